//! The typed cells of a row of trials.csv, arms.csv or effects.csv, read off
//! the row's own `Serialize` (the same one csv writes the file with): each
//! column's name, its type and its value. A column's type comes from the row
//! type, not from the data: a float cell is marked as one (`Num`), and a field
//! whose value may be absent, or whose text is a category, says so by the
//! marker its `serialize_with` wraps it in (`as_bool`, `as_int`, `as_category`).
//! The export's schema, its typed columns and the docs check all come from
//! here, so a column is defined once, in its row.

use serde::Serialize;
use serde::ser::{self, Impossible};

/// The type of a column, as docs/exports.md states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Float,
    Int,
    Bool,
    /// Text with few distinct values (names, statuses, methods, component values): categorical.
    Category,
    Text,
}

impl Kind {
    /// The type's name in docs/exports.md.
    #[cfg(test)]
    pub(crate) fn doc_name(self) -> &'static str {
        match self {
            Kind::Float => "float",
            Kind::Int => "int",
            Kind::Bool => "bool",
            Kind::Category | Kind::Text => "str",
        }
    }
}

/// One cell's value (`Null`: empty in the CSV).
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Float(f64),
    Int(u64),
    Bool(bool),
    Text(String),
}

/// The markers a field's serialization is wrapped in to give its column a
/// type the value alone does not (csv writes the value within unchanged).
pub(crate) const FLOAT: &str = "ablate::Float";
const BOOL: &str = "ablate::Bool";
const INT: &str = "ablate::Int";
const CATEGORY: &str = "ablate::Category";

/// `#[serde(serialize_with)]` for an optional flag: a bool column even when empty.
pub fn as_bool<S: ser::Serializer>(v: &Option<bool>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_newtype_struct(BOOL, v)
}

/// `#[serde(serialize_with)]` for an optional count: an int column even when empty.
pub fn as_int<S: ser::Serializer>(v: &Option<usize>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_newtype_struct(INT, v)
}

/// `#[serde(serialize_with)]` for a name, status or method: a category column.
pub fn as_category<T: AsRef<str>, S: ser::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_newtype_struct(CATEGORY, v.as_ref())
}

/// A row's columns: (name, type, value), in the order csv writes them: a
/// struct's fields, or those of each struct in a tuple (as csv flattens
/// them); a sequence in the tuple (the component values, the recorded
/// metrics' cells) gives one column per element, named by `extra`: a float
/// column for a float element, else a category.
pub fn cells<T: Serialize + ?Sized>(row: &T, extra: &[String]) -> Vec<(String, Kind, Cell)> {
    let mut out = Row { cells: Vec::new(), extra, next_extra: 0 };
    row.serialize(&mut out).expect("a row's fields are scalars, structs, tuples or sequences");
    out.cells
}

/// A row type's columns and their types (read off its default value).
pub fn schema<T: Serialize + Default>() -> Vec<(String, Kind)> {
    cells(&T::default(), &[]).into_iter().map(|(name, kind, _)| (name, kind)).collect()
}

#[derive(Debug)]
pub(crate) struct Unsupported(String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not a cell: {}", self.0)
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Unsupported(msg.to_string())
    }
}

/// Walks a row: structs and tuples give their fields, sequences their elements.
struct Row<'e> {
    cells: Vec<(String, Kind, Cell)>,
    extra: &'e [String],
    next_extra: usize,
}

impl Row<'_> {
    fn field<T: Serialize + ?Sized>(&mut self, name: String, value: &T) -> Result<(), Unsupported> {
        let (kind, cell) = value.serialize(Leaf(None))?;
        self.cells.push((name, kind, cell));
        Ok(())
    }
}

/// The serializer methods both walkers refuse: compounds that are neither a
/// row nor a cell (csv writes none of them either).
macro_rules! refused_compounds {
    () => {
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            variant: &'static str,
            _: &T,
        ) -> Result<Self::Ok, Unsupported> {
            Err(Unsupported(variant.into()))
        }
        fn serialize_tuple_struct(
            self,
            name: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleStruct, Unsupported> {
            Err(Unsupported(name.into()))
        }
        fn serialize_tuple_variant(
            self,
            name: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, Unsupported> {
            Err(Unsupported(name.into()))
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Unsupported> {
            Err(Unsupported("a map".into()))
        }
        fn serialize_struct_variant(
            self,
            name: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, Unsupported> {
            Err(Unsupported(name.into()))
        }
    };
}

macro_rules! not_a_row {
    ($($method:ident($($arg:ty),*)),* $(,)?) => {$(
        fn $method(self, $(_: $arg),*) -> Result<(), Unsupported> {
            Err(Unsupported(stringify!($method).into()))
        }
    )*};
}

impl ser::Serializer for &mut Row<'_> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Impossible<(), Unsupported>;
    type SerializeTupleVariant = Impossible<(), Unsupported>;
    type SerializeMap = Impossible<(), Unsupported>;
    type SerializeStruct = Self;
    type SerializeStructVariant = Impossible<(), Unsupported>;

    refused_compounds!();

    not_a_row!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_none(),
        serialize_unit(),
        serialize_unit_struct(&'static str),
        serialize_unit_variant(&'static str, u32, &'static str),
    );

    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Unsupported> {
        v.serialize(self)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), Unsupported> {
        v.serialize(self)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self, Unsupported> {
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, Unsupported> {
        Ok(self)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Unsupported> {
        Ok(self)
    }
}

impl ser::SerializeSeq for &mut Row<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Unsupported> {
        let name = self
            .extra
            .get(self.next_extra)
            .cloned()
            .ok_or_else(|| Unsupported("more sequence elements than names for them".into()))?;
        self.next_extra += 1;
        // A float element (a recorded metric's cell) is a float column; any other a category.
        let (kind, cell) = v.serialize(Leaf(None))?;
        let kind = if kind == Kind::Float { Kind::Float } else { Kind::Category };
        self.cells.push((name, kind, cell));
        Ok(())
    }
    fn end(self) -> Result<(), Unsupported> {
        Ok(())
    }
}

impl ser::SerializeTuple for &mut Row<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Unsupported> {
        v.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Unsupported> {
        Ok(())
    }
}

impl ser::SerializeStruct for &mut Row<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), Unsupported> {
        self.field(key.to_string(), v)
    }
    fn end(self) -> Result<(), Unsupported> {
        Ok(())
    }
}

/// One field's type and value; `Some(kind)` once a marker has named the type.
struct Leaf(Option<Kind>);

impl Leaf {
    fn kind(&self, of_value: Kind) -> Kind {
        self.0.unwrap_or(of_value)
    }
}

type Typed = (Kind, Cell);

impl ser::Serializer for Leaf {
    type Ok = Typed;
    type Error = Unsupported;
    type SerializeSeq = Impossible<Typed, Unsupported>;
    type SerializeTuple = Impossible<Typed, Unsupported>;
    type SerializeTupleStruct = Impossible<Typed, Unsupported>;
    type SerializeTupleVariant = Impossible<Typed, Unsupported>;
    type SerializeMap = Impossible<Typed, Unsupported>;
    type SerializeStruct = Impossible<Typed, Unsupported>;
    type SerializeStructVariant = Impossible<Typed, Unsupported>;

    refused_compounds!();

    /// Typed values, not text: a float cell gives its number, not its digits.
    fn is_human_readable(&self) -> bool {
        false
    }

    fn serialize_bool(self, v: bool) -> Result<Typed, Unsupported> {
        Ok((self.kind(Kind::Bool), Cell::Bool(v)))
    }
    fn serialize_i8(self, v: i8) -> Result<Typed, Unsupported> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<Typed, Unsupported> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<Typed, Unsupported> {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<Typed, Unsupported> {
        let v = u64::try_from(v).map_err(|_| Unsupported(format!("negative count {v}")))?;
        self.serialize_u64(v)
    }
    fn serialize_u8(self, v: u8) -> Result<Typed, Unsupported> {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<Typed, Unsupported> {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<Typed, Unsupported> {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<Typed, Unsupported> {
        Ok((self.kind(Kind::Int), Cell::Int(v)))
    }
    fn serialize_f32(self, v: f32) -> Result<Typed, Unsupported> {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<Typed, Unsupported> {
        Ok((self.kind(Kind::Float), if v.is_finite() { Cell::Float(v) } else { Cell::Null }))
    }
    fn serialize_char(self, v: char) -> Result<Typed, Unsupported> {
        self.serialize_str(&v.to_string())
    }
    /// Text; empty text is an empty cell, as in the CSV.
    fn serialize_str(self, v: &str) -> Result<Typed, Unsupported> {
        let cell = if v.is_empty() { Cell::Null } else { Cell::Text(v.to_string()) };
        Ok((self.kind(Kind::Text), cell))
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<Typed, Unsupported> {
        Err(Unsupported("bytes".into()))
    }
    /// An absent value: its type must have been named by a marker.
    fn serialize_none(self) -> Result<Typed, Unsupported> {
        match self.0 {
            Some(kind) => Ok((kind, Cell::Null)),
            None => Err(Unsupported(
                "an Option field without a marker (as_bool, as_int or a Num) has no type".into(),
            )),
        }
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<Typed, Unsupported> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<Typed, Unsupported> {
        Err(Unsupported("()".into()))
    }
    fn serialize_unit_struct(self, name: &'static str) -> Result<Typed, Unsupported> {
        Err(Unsupported(name.into()))
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Typed, Unsupported> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        v: &T,
    ) -> Result<Typed, Unsupported> {
        let marked = match name {
            FLOAT => Some(Kind::Float),
            BOOL => Some(Kind::Bool),
            INT => Some(Kind::Int),
            CATEGORY => Some(Kind::Category),
            _ => self.0,
        };
        v.serialize(Leaf(marked))
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Unsupported> {
        Err(Unsupported("a sequence inside a cell".into()))
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Unsupported> {
        Err(Unsupported("a tuple inside a cell".into()))
    }
    fn serialize_struct(
        self,
        name: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, Unsupported> {
        Err(Unsupported(name.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Serialize)]
    struct Inner {
        #[serde(serialize_with = "as_category")]
        arm: String,
        n: u32,
    }

    #[derive(Default, Serialize)]
    struct Row {
        note: &'static str,
        #[serde(serialize_with = "as_bool")]
        flag: Option<bool>,
        #[serde(serialize_with = "as_int")]
        after: Option<usize>,
        rate: crate::report::rows::Num,
    }

    /// Types come from the row and its markers, not the values: the default
    /// row (every optional value absent) has the same types as a full one.
    #[test]
    fn a_column_type_comes_from_the_row() {
        let want = [
            ("arm", Kind::Category),
            ("n", Kind::Int),
            ("note", Kind::Text),
            ("flag", Kind::Bool),
            ("after", Kind::Int),
            ("rate", Kind::Float),
        ];
        let got = schema::<(Inner, Row)>();
        assert_eq!(got, want.map(|(n, k)| (n.to_string(), k)));
        let inner = Inner { arm: "bare".into(), n: 3 };
        let full = Row { note: "", flag: Some(false), after: Some(12), rate: 0.25.into() };
        let cells: Vec<Cell> = cells(&(&inner, &full, vec!["x"]), &["component.k".into()])
            .into_iter()
            .map(|(_, _, c)| c)
            .collect();
        assert_eq!(
            cells,
            [
                Cell::Text("bare".into()),
                Cell::Int(3),
                Cell::Null,
                Cell::Bool(false),
                Cell::Int(12),
                Cell::Float(0.25),
                Cell::Text("x".into()),
            ]
        );
        // csv writes the same row as before the markers: they change no text.
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
        w.serialize((&inner, &full)).unwrap();
        assert_eq!(String::from_utf8(w.into_inner().unwrap()).unwrap(), "bare,3,,false,12,0.25\n");
    }

    /// An optional field without a marker has no type: refused, not guessed.
    #[test]
    fn an_unmarked_optional_field_is_refused() {
        #[derive(Default, Serialize)]
        struct Bad {
            maybe: Option<u32>,
        }
        let err = Bad::default().serialize(&mut super::Row {
            cells: Vec::new(),
            extra: &[],
            next_extra: 0,
        });
        assert!(err.unwrap_err().to_string().contains("has no type"));
    }
}
