//! JSON as Python's `json.dumps` writes it, which is what chat templates
//! print through transformers' `tojson`: `", "` and `": "` separators (or the
//! ones given), `indent` as Python lays it out, non-ASCII kept or escaped as
//! `\uXXXX` (`ensure_ascii`), floats as Python's `repr`; keys in the order
//! the value holds them; and `json.loads` of an object, which keeps them in
//! the order written.

use serde::Serialize;

/// `json.loads` of a JSON object, as a value whose keys stay in the order
/// written (minijinja's map keeps insertion order); `None` for any text that
/// is not one JSON object.
pub(crate) fn loads_object(text: &str) -> Option<minijinja::Value> {
    serde_json::from_str::<minijinja::Value>(text)
        .ok()
        .filter(|v| v.kind() == minijinja::value::ValueKind::Map)
}

/// `json.dumps` of a value: separators, optional indentation, floats as
/// Python's `repr`.
pub fn dumps<T: Serialize + ?Sized>(
    value: &T,
    item: &str,
    key: &str,
    indent: Option<usize>,
) -> Result<String, serde_json::Error> {
    let mut bytes = Vec::new();
    let formatter = PyFormatter {
        item: item.as_bytes(),
        key: key.as_bytes(),
        indent,
        level: 0,
        has_value: false,
    };
    let mut ser = serde_json::Serializer::with_formatter(&mut bytes, formatter);
    value.serialize(&mut ser)?;
    Ok(String::from_utf8(bytes).expect("serde_json writes UTF-8"))
}

/// Non-ASCII characters as `\uXXXX` (UTF-16 units, lowercase hex), as
/// `ensure_ascii=True` writes them; they can only occur inside JSON strings.
pub(crate) fn ascii_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// serde_json output laid out as Python's `json` module lays it out.
struct PyFormatter<'s> {
    item: &'s [u8],
    key: &'s [u8],
    indent: Option<usize>,
    level: usize,
    has_value: bool,
}

impl PyFormatter<'_> {
    fn newline<W: ?Sized + std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        match self.indent {
            Some(n) => {
                w.write_all(b"\n")?;
                w.write_all(" ".repeat(n * self.level).as_bytes())
            }
            None => Ok(()),
        }
    }
    fn open<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(bracket)
    }
    fn close<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.level -= 1;
        if self.has_value {
            self.newline(w)?;
        }
        self.has_value = true;
        w.write_all(bracket)
    }
    fn element<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if !first {
            w.write_all(self.item)?;
        }
        self.newline(w)
    }
}

impl serde_json::ser::Formatter for PyFormatter<'_> {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.element(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.element(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(self.key)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        w.write_all(py_float(value).as_bytes())
    }
    fn write_f32<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: f32,
    ) -> std::io::Result<()> {
        w.write_all(py_float(f64::from(value)).as_bytes())
    }
}

/// Python's `repr` of a finite float: the shortest digits that read back,
/// positional for exponents from -4 to 15, else `d.ddde±XX`.
fn py_float(v: f64) -> String {
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} writes an exponent");
    let exp: i32 = exp.parse().expect("{:e} writes an integer exponent");
    if (-4..16).contains(&exp) {
        let s = format!("{v}");
        if s.contains('.') { s } else { format!("{s}.0") }
    } else {
        format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

/// Compact `json.dumps` (`", "` and `": "`).
pub fn compact<T: Serialize + ?Sized>(value: &T) -> String {
    dumps(value, ", ", ": ", None).expect("a value of ablate's serializes")
}
