//! `ablate export RUN... -o FILE`: one tidy dataset of many runs — their
//! trials, arms or effects — with typed columns (docs/exports.md), written as
//! Parquet or CSV with polars (the cargo feature `polars`).
//!
//! The rows are the same as the run folder's CSV files (computed afresh from
//! the records, nothing is written into the runs); columns present in some
//! runs only (components of different harnesses) are null elsewhere.

use crate::report::{ReportError, analysis, export, load, rows};
use std::path::{Path, PathBuf};

/// Why an export was not written: a run that does not read (bad input), the
/// table that could not be built, or the output file that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Run(#[from] ReportError),
    #[error("cannot build the table: {0}")]
    Frame(#[from] FrameError),
    #[error("cannot write {}: {source}", out.display())]
    Write { out: PathBuf, source: WriteError },
}

/// Why the runs' rows cannot become a DataFrame.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// A cell not of its column's type.
    #[error("column `{column}`, row {row}: {cell} is not {what}")]
    Cell { column: String, row: usize, cell: String, what: &'static str },
    /// What the DataFrame library said.
    #[error("{0}")]
    Engine(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Why the DataFrame cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{0}")]
    Create(#[from] std::io::Error),
    /// What the DataFrame library said.
    #[error("{0}")]
    Engine(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Which table of the runs to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Trials,
    Arms,
    Effects,
}

pub use crate::report::cells::{Cell, Kind};
#[cfg_attr(not(any(test, feature = "polars")), allow(dead_code))]
pub(crate) use crate::report::export::TypedTable;

/// The type of a column of the exports, as its row type gives it (a
/// `component.` column is a category, a `metric.` column a float; a name no
/// table has is text).
#[cfg(test)]
pub(crate) fn column_kind(name: &str) -> Kind {
    if name.starts_with("component.") {
        return Kind::Category;
    }
    if name.starts_with("metric.") {
        return Kind::Float;
    }
    [rows::trials_schema(), rows::arms_schema(), rows::effects_schema()]
        .concat()
        .into_iter()
        .find(|(n, _)| n == name)
        .map_or(Kind::Text, |(_, kind)| kind)
}

/// One table of one run, typed, computed afresh from its records.
#[cfg_attr(not(any(test, feature = "polars")), allow(dead_code))]
pub(crate) fn table_rows(dir: &Path, table: Table) -> Result<TypedTable, ReportError> {
    crate::report::require_manifest(dir)?;
    Ok(match table {
        Table::Trials => {
            let mut trials = Vec::new();
            let data = load::load_with(dir, Some(&mut |r| trials.push(rows::TrialRow::of(r))))?;
            let report = analysis::analyse(&data);
            export::trials_table(&data, &report, trials)
        }
        Table::Arms => export::arms_table(&analysis::analyse(&load::load(dir)?)),
        Table::Effects => export::effects_table(&analysis::analyse(&load::load(dir)?)),
    })
}

/// Rows of many runs under the union of their columns (in first-seen order);
/// a column a run does not have is null in its rows.
#[cfg(feature = "polars")]
pub(crate) fn union_rows(runs: &[PathBuf], table: Table) -> Result<TypedTable, ReportError> {
    let mut out = TypedTable::default();
    for run in runs {
        let one = table_rows(run, table)?;
        for c in &one.columns {
            if !out.columns.iter().any(|(n, _)| *n == c.0) {
                out.columns.push(c.clone());
            }
        }
        let index: Vec<Option<usize>> =
            out.columns.iter().map(|(c, _)| one.columns.iter().position(|(h, _)| h == c)).collect();
        for row in one.rows {
            out.rows.push(index.iter().map(|i| i.map_or(Cell::Null, |i| row[i].clone())).collect());
        }
    }
    Ok(out)
}

#[cfg(feature = "polars")]
mod frame {
    use super::*;
    use polars::prelude::*;

    impl From<PolarsError> for FrameError {
        fn from(e: PolarsError) -> FrameError {
            FrameError::Engine(Box::new(e))
        }
    }

    impl From<PolarsError> for WriteError {
        fn from(e: PolarsError) -> WriteError {
            WriteError::Engine(Box::new(e))
        }
    }

    /// One column's cells as values: `pick` reads a cell of the column's
    /// type (None: another type, an error naming the column, the row and `what`
    /// the column holds); a null cell is None.
    fn values<'a, T>(
        name: &str,
        cells: impl Iterator<Item = &'a Cell>,
        what: &'static str,
        pick: impl Fn(&'a Cell) -> Option<T>,
    ) -> Result<Vec<Option<T>>, FrameError> {
        cells
            .enumerate()
            .map(|(i, c)| match c {
                Cell::Null => Ok(None),
                _ => pick(c).map(Some).ok_or_else(|| FrameError::Cell {
                    column: name.to_string(),
                    row: i + 1,
                    cell: format!("{c:?}"),
                    what,
                }),
            })
            .collect()
    }

    /// The runs' rows as a typed DataFrame: each column of the type its row gives it.
    pub(crate) fn dataframe(table: &TypedTable) -> Result<DataFrame, FrameError> {
        let mut cols: Vec<Column> = Vec::with_capacity(table.columns.len());
        for (j, (name, kind)) in table.columns.iter().enumerate() {
            let cells = table.rows.iter().map(|r| &r[j]);
            let n = name.as_str().into();
            let series = match kind {
                Kind::Float => Series::new(
                    n,
                    values(name, cells, "a number", |c| match c {
                        Cell::Float(x) => Some(*x),
                        _ => None,
                    })?,
                ),
                Kind::Int if name == "seed" => Series::new(
                    n,
                    values(name, cells, "a whole number", |c| match c {
                        Cell::Int(x) => Some(*x),
                        _ => None,
                    })?,
                ),
                Kind::Int => Series::new(
                    n,
                    values(name, cells, "a whole number below 2^63", |c| match c {
                        Cell::Int(x) => i64::try_from(*x).ok(),
                        _ => None,
                    })?,
                ),
                Kind::Bool => Series::new(
                    n,
                    values(name, cells, "true or false", |c| match c {
                        Cell::Bool(b) => Some(*b),
                        _ => None,
                    })?,
                ),
                Kind::Category | Kind::Text => {
                    let s = Series::new(
                        n,
                        values(name, cells, "text", |c| match c {
                            Cell::Text(t) => Some(t.as_str()),
                            _ => None,
                        })?,
                    );
                    if *kind == Kind::Category {
                        s.cast(&DataType::from_categories(Categories::global()))?
                    } else {
                        s
                    }
                }
            };
            cols.push(series.into());
        }
        Ok(DataFrame::new(table.rows.len(), cols)?)
    }

    /// Write the DataFrame as Parquet (`.parquet`) or CSV (anything else).
    pub fn write(df: &mut DataFrame, out: &Path) -> Result<(), WriteError> {
        let file = std::fs::File::create(out)?;
        let parquet = out.extension().is_some_and(|e| e == "parquet");
        if parquet {
            ParquetWriter::new(file).finish(df)?;
        } else {
            CsvWriter::new(file).include_header(true).finish(df)?;
        }
        Ok(())
    }
}

/// Export `table` of `runs` to `out` (Parquet when it ends in `.parquet`, else CSV).
/// Returns the number of rows written.
#[cfg(feature = "polars")]
pub fn export(runs: &[PathBuf], table: Table, out: &Path) -> Result<usize, ExportError> {
    let table = union_rows(runs, table)?;
    let mut df = frame::dataframe(&table)?;
    frame::write(&mut df, out)
        .map_err(|source| ExportError::Write { out: out.to_path_buf(), source })?;
    Ok(table.rows.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed tables hold what the CSV files `ablate report` writes hold:
    /// every cell, written as text the way the files write it, equals the
    /// file's cell, and the columns are the files' headers (a run of 7 arms
    /// with components, synthetic records).
    #[test]
    fn typed_tables_are_the_csv_files() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = crate::repo_root().join("configs/core.toml");
        let mut exp = ablate_core::experiment::config::load(&cfg).unwrap();
        exp.trials = 2;
        let suite = ablate_core::suite::load(&exp.suite_path).unwrap();
        let plan = ablate_core::plan::build(&exp, &suite).unwrap();
        let run = dir.path().join("run");
        ablate_synth::write_run(&run, &exp, &suite, &plan, 7, |t, arm| {
            if arm == "bare" { 0.2 } else { 0.3 + 0.1 * (t.len() % 4) as f64 }
        })
        .unwrap();
        crate::report::report_dir(&run).unwrap();
        let text = |c: &Cell| match c {
            Cell::Null => String::new(),
            Cell::Float(x) => rows::num(*x),
            Cell::Int(n) => n.to_string(),
            Cell::Bool(b) => b.to_string(),
            Cell::Text(t) => t.clone(),
        };
        for (table, file, rows_expected) in [
            (Table::Trials, "trials.csv", 4 * 7 * 2),
            (Table::Arms, "arms.csv", 7),
            (Table::Effects, "effects.csv", 6),
        ] {
            let typed = table_rows(&run, table).unwrap();
            let mut r = csv::Reader::from_path(run.join(file)).unwrap();
            let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
            let names: Vec<String> = typed.columns.iter().map(|(n, _)| n.clone()).collect();
            assert_eq!(names, header, "{file}");
            let rows: Vec<Vec<String>> =
                r.records().map(|x| x.unwrap().iter().map(String::from).collect()).collect();
            assert_eq!(rows.len(), rows_expected, "{file}");
            let typed_text: Vec<Vec<String>> =
                typed.rows.iter().map(|row| row.iter().map(text).collect()).collect();
            assert_eq!(typed_text, rows, "{file}");
        }
    }

    /// Every column of the three CSV files has the type docs/exports.md gives it.
    #[test]
    fn every_column_is_documented_with_its_type() {
        let doc = std::fs::read_to_string(crate::repo_root().join("docs/exports.md")).unwrap();
        let all: Vec<String> =
            [rows::trials_columns(), rows::arms_columns(), rows::effects_columns()].concat();
        for col in &all {
            // The doc's row naming the column (alone or in a group, `_lo`/`_hi` suffixes shortened).
            let line = doc
                .lines()
                .filter(|l| l.starts_with('|'))
                .find(|l| {
                    let first = l.split('|').nth(1).unwrap_or("");
                    first
                        .split(',')
                        .map(|c| c.trim().trim_matches('`'))
                        .any(|c| c == *col || (c.starts_with('_') && col.ends_with(c)))
                })
                .unwrap_or_else(|| panic!("column `{col}` is not in docs/exports.md"));
            let typ = line.split('|').nth(2).unwrap_or("").trim();
            let want = column_kind(col).doc_name();
            assert_eq!(typ, want, "docs/exports.md gives `{col}` the type {typ}");
        }
    }
}
