//! `ablate export RUN... -o FILE`: one tidy dataset of many runs — their
//! trials, arms or effects — with typed columns (docs/exports.md), written as
//! Parquet or CSV with polars (the cargo feature `polars`).
//!
//! The rows are the same as the run folder's CSV files (computed afresh from
//! the records, nothing is written into the runs); columns present in some
//! runs only (components of different harnesses) are null elsewhere.

use crate::report::{ReportError, analysis, export, load};
use std::path::{Path, PathBuf};

/// Why an export was not written: a run that does not read (bad input), the
/// table that could not be built, or the output file that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Run(#[from] ReportError),
    #[error("cannot build the table: {0}")]
    Frame(String),
    #[error("cannot write {}: {message}", out.display())]
    Write { out: PathBuf, message: String },
}

/// Which table of the runs to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Table {
    Trials,
    Arms,
    Effects,
}

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

const FLOATS: &[&str] = &[
    "alpha",
    "pass_rate",
    "pass_rate_lo",
    "pass_rate_hi",
    "pass_rate_excl_infra",
    "pass_rate_excl_infra_lo",
    "pass_rate_excl_infra_hi",
    "pass_rate_final_state",
    "reward",
    "pass_rate_final_state_lo",
    "pass_rate_final_state_hi",
    "tests_passed_fraction",
    "tests_passed_fraction_lo",
    "tests_passed_fraction_hi",
    "tokens_per_trial",
    "working_seconds_per_trial",
    "steps_per_trial",
    "cost_per_trial",
    "tokens_per_solved",
    "working_seconds_per_solved",
    "cost_per_solved",
    "interval_level",
    "working_seconds",
    "wall_seconds",
    "rate_limit_wait_seconds",
    "cost_usd",
    "control_rate",
    "treatment_rate",
    "delta",
    "lo",
    "hi",
    "p_value",
    "p_adjusted",
    "mde",
    "delta_excl_infra",
    "lo_excl_infra",
    "hi_excl_infra",
    "p_value_excl_infra",
];
const INTS: &[&str] = &[
    "repeat",
    "stopped_but_passing",
    "seed",
    "attempt",
    "tests_passed",
    "tests_total",
    "steps",
    "sessions",
    "tokens_input",
    "tokens_output",
    "tokens_cached",
    "loop_guard_hits",
    "invalid_tool_calls",
    "unparsed_replies",
    "path_refusals",
    "trials",
    "tasks",
    "trials_excl_infra",
    "passed",
    "failed",
    "timeout",
    "budget_exhausted",
    "provider_error",
    "harness_error",
    "grader_error",
    "policy_violation",
    "interrupted",
    "n_tasks",
    "family_size",
    "infra_errors_control",
    "infra_errors_treatment",
    "decided_after_tasks",
    "sequential_trials",
    "projected_tasks",
];
const BOOLS: &[&str] = &["counted", "infra_differs", "graded_pass"];
const CATEGORIES: &[&str] = &[
    "run_id",
    "experiment",
    "config_digest",
    "suite_digest",
    "task",
    "arm",
    "model",
    "status",
    "end_reason",
    "budget_limit",
    "kind",
    "control",
    "treatment",
    "method",
    "scope",
    "estimand",
    "adjustment",
    "pass_rate_method",
];

/// The type of a column of the exports.
pub fn column_kind(name: &str) -> Kind {
    if FLOATS.contains(&name) {
        Kind::Float
    } else if INTS.contains(&name) {
        Kind::Int
    } else if BOOLS.contains(&name) {
        Kind::Bool
    } else if CATEGORIES.contains(&name) || name.starts_with("component.") {
        Kind::Category
    } else {
        Kind::Text
    }
}

/// Header and rows of one table of one run, as its CSV file would hold them.
pub fn table_rows(
    dir: &Path,
    table: Table,
) -> Result<(Vec<String>, Vec<Vec<String>>), ReportError> {
    crate::report::require_manifest(dir)?;
    let scratch = |source: std::io::Error| ReportError::Write { dir: std::env::temp_dir(), source };
    let bytes = match table {
        Table::Trials => {
            let tmp = tempfile::tempdir().map_err(scratch)?;
            let mut csv = export::TrialsCsv::create(tmp.path()).map_err(scratch)?;
            let data = load::load_with(dir, Some(&mut |r| csv.push(r)))?;
            let report = analysis::analyse(&data);
            csv.finish(tmp.path(), &data, &report).map_err(scratch)?;
            std::fs::read(tmp.path().join("trials.csv")).map_err(scratch)?
        }
        Table::Arms | Table::Effects => {
            let data = load::load(dir)?;
            let report = analysis::analyse(&data);
            if table == Table::Arms {
                export::arms_csv(&report)
            } else {
                export::effects_csv(&report)
            }
        }
    };
    let mut r = csv::Reader::from_reader(bytes.as_slice());
    let unreadable = |e: csv::Error| scratch(std::io::Error::other(e));
    let header: Vec<String> = r.headers().map_err(unreadable)?.iter().map(String::from).collect();
    let rows = r
        .records()
        .map(|rec| rec.map(|rec| rec.iter().map(String::from).collect()))
        .collect::<Result<Vec<Vec<String>>, _>>()
        .map_err(unreadable)?;
    Ok((header, rows))
}

/// Rows of many runs under the union of their columns (in first-seen order);
/// a column a run does not have is empty (null) in its rows.
pub fn union_rows(
    runs: &[PathBuf],
    table: Table,
) -> Result<(Vec<String>, Vec<Vec<String>>), ReportError> {
    let mut columns: Vec<String> = Vec::new();
    let mut all: Vec<(Vec<String>, Vec<Vec<String>>)> = Vec::new();
    for run in runs {
        let (header, rows) = table_rows(run, table)?;
        for h in &header {
            if !columns.contains(h) {
                columns.push(h.clone());
            }
        }
        all.push((header, rows));
    }
    let mut out = Vec::new();
    for (header, rows) in all {
        let index: Vec<Option<usize>> =
            columns.iter().map(|c| header.iter().position(|h| h == c)).collect();
        for row in rows {
            out.push(index.iter().map(|i| i.map(|i| row[i].clone()).unwrap_or_default()).collect());
        }
    }
    Ok((columns, out))
}

#[cfg(feature = "polars")]
mod frame {
    use super::*;
    use polars::prelude::*;

    /// The runs' rows as a typed DataFrame.
    pub fn dataframe(columns: &[String], rows: &[Vec<String>]) -> Result<DataFrame, String> {
        let mut cols: Vec<Column> = Vec::with_capacity(columns.len());
        for (j, name) in columns.iter().enumerate() {
            let cell = |i: usize| rows[i][j].as_str();
            let n = rows.len();
            let bad = |i: usize, what: &str| {
                format!("column `{name}`, row {}: `{}` is not {what}", i + 1, cell(i))
            };
            let series = match column_kind(name) {
                Kind::Float => {
                    let v: Vec<Option<f64>> = (0..n)
                        .map(|i| {
                            if cell(i).is_empty() {
                                Ok(None)
                            } else {
                                cell(i).parse().map(Some).map_err(|_| bad(i, "a number"))
                            }
                        })
                        .collect::<Result<_, _>>()?;
                    Series::new(name.into(), v)
                }
                Kind::Int if name == "seed" => {
                    let v: Vec<Option<u64>> = (0..n)
                        .map(|i| {
                            if cell(i).is_empty() {
                                Ok(None)
                            } else {
                                cell(i).parse().map(Some).map_err(|_| bad(i, "a whole number"))
                            }
                        })
                        .collect::<Result<_, _>>()?;
                    Series::new(name.into(), v)
                }
                Kind::Int => {
                    let v: Vec<Option<i64>> = (0..n)
                        .map(|i| {
                            if cell(i).is_empty() {
                                Ok(None)
                            } else {
                                cell(i)
                                    .parse::<i64>()
                                    .map(Some)
                                    .map_err(|_| bad(i, "a whole number"))
                            }
                        })
                        .collect::<Result<_, _>>()?;
                    Series::new(name.into(), v)
                }
                Kind::Bool => {
                    let v: Vec<Option<bool>> = (0..n)
                        .map(|i| match cell(i) {
                            "" => Ok(None),
                            "true" => Ok(Some(true)),
                            "false" => Ok(Some(false)),
                            _ => Err(bad(i, "true or false")),
                        })
                        .collect::<Result<_, _>>()?;
                    Series::new(name.into(), v)
                }
                Kind::Category | Kind::Text => {
                    let v: Vec<Option<&str>> =
                        (0..n).map(|i| (!cell(i).is_empty()).then(|| cell(i))).collect();
                    let s = Series::new(name.into(), v);
                    if column_kind(name) == Kind::Category {
                        s.cast(&DataType::from_categories(Categories::global()))
                            .map_err(|e| e.to_string())?
                    } else {
                        s
                    }
                }
            };
            cols.push(series.into());
        }
        DataFrame::new(rows.len(), cols).map_err(|e| e.to_string())
    }

    /// Write the DataFrame as Parquet (`.parquet`) or CSV (anything else).
    pub fn write(df: &mut DataFrame, out: &Path) -> Result<(), String> {
        let file = std::fs::File::create(out).map_err(|e| e.to_string())?;
        let parquet = out.extension().is_some_and(|e| e == "parquet");
        if parquet {
            ParquetWriter::new(file).finish(df).map(|_| ()).map_err(|e| e.to_string())
        } else {
            CsvWriter::new(file).include_header(true).finish(df).map_err(|e| e.to_string())
        }
    }
}

/// Export `table` of `runs` to `out` (Parquet when it ends in `.parquet`, else CSV).
/// Returns the number of rows written.
#[cfg(feature = "polars")]
pub fn export(runs: &[PathBuf], table: Table, out: &Path) -> Result<usize, ExportError> {
    let (columns, rows) = union_rows(runs, table)?;
    let mut df = frame::dataframe(&columns, &rows).map_err(ExportError::Frame)?;
    frame::write(&mut df, out)
        .map_err(|message| ExportError::Write { out: out.to_path_buf(), message })?;
    Ok(rows.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every column of the three CSV files has the type docs/exports.md gives it.
    #[test]
    fn every_column_is_documented_with_its_type() {
        let doc =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/exports.md"))
                .unwrap();
        use crate::report::rows;
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
            let want = match column_kind(col) {
                Kind::Float => "float",
                Kind::Int => "int",
                Kind::Bool => "bool",
                Kind::Category | Kind::Text => "str",
            };
            assert_eq!(typ, want, "docs/exports.md gives `{col}` the type {typ}");
        }
    }
}
