//! `ablate export`: one typed dataset of many runs, as Parquet and CSV (feature `polars`).
#![cfg(feature = "polars")]

mod common;

use ablate_synth as synth;
use polars::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn generate(dir: &Path, name: &str, config: &str, trials: Option<u32>, seed: u64) -> PathBuf {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join(config);
    let mut exp = ablate::experiment::config::load(&cfg).unwrap();
    if let Some(t) = trials {
        exp.trials = t;
    }
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let run = dir.join(name);
    synth::write_run(
        &run,
        &exp,
        &suite,
        &plan,
        seed,
        |_, arm| if arm == "bare" { 0.3 } else { 0.6 },
    )
    .unwrap();
    run
}

fn ablate(args: &[&str]) -> (i32, String) {
    let out = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_ablate")).args(args),
        Duration::from_secs(60),
    );
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn two_runs_become_one_typed_dataset() {
    let dir = tempfile::tempdir().unwrap();
    // Two different experiments: 4 tasks x 7 arms x 3 trials, and the one-task seed demo (2 models).
    let a = generate(dir.path(), "a", "configs/core.toml", Some(3), 1);
    let b = generate(dir.path(), "b", "configs/seed-demo.toml", None, 2);
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    let expected_trials = 4 * 7 * 3 + 2 * 2 * 5;

    let parquet = dir.path().join("trials.parquet");
    let (code, err) = ablate(&["export", a_s, b_s, "-o", parquet.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("wrote {expected_trials} rows of 2 runs")), "{err}");
    let df = ParquetReader::new(std::fs::File::open(&parquet).unwrap()).finish().unwrap();
    assert_eq!(df.height(), expected_trials);
    let schema = df.schema();
    assert_eq!(schema.get("working_seconds"), Some(&DataType::Float64));
    assert_eq!(schema.get("tokens_input"), Some(&DataType::Int64));
    assert_eq!(schema.get("seed"), Some(&DataType::UInt64));
    assert_eq!(schema.get("counted"), Some(&DataType::Boolean));
    assert!(
        matches!(schema.get("arm"), Some(DataType::Categorical(_, _))),
        "{:?}",
        schema.get("arm")
    );
    assert!(matches!(schema.get("component.feedback"), Some(DataType::Categorical(_, _))));
    // cost_usd: a float column, set in every row (the synthetic runs price every trial).
    assert_eq!(schema.get("cost_usd"), Some(&DataType::Float64));
    assert_eq!(df.column("cost_usd").unwrap().null_count(), 0);
    assert_eq!(df.column("run_id").unwrap().n_unique().unwrap(), 2);

    // Effects of both runs: the seed demo's one-task comparisons keep their scope and method.
    let effects = dir.path().join("effects.parquet");
    let (code, err) =
        ablate(&["export", a_s, b_s, "--table", "effects", "-o", effects.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let df = ParquetReader::new(std::fs::File::open(&effects).unwrap()).finish().unwrap();
    assert_eq!(df.height(), 6 + 2, "5 ablations + 1 combined; 1 combined per model");
    assert_eq!(df.schema().get("delta"), Some(&DataType::Float64));
    assert_eq!(df.schema().get("infra_differs"), Some(&DataType::Boolean));
    // A recorded metric's cells are float columns (the synthetic runs record loop-guard hits).
    assert_eq!(df.schema().get("metric.loop_guard_hits.diff"), Some(&DataType::Float64));
    assert_eq!(df.schema().get("metric.harness.tool_calls.control"), Some(&DataType::Float64));
    let scope = df.column("scope").unwrap().cast(&DataType::String).unwrap();
    let scope = scope.str().unwrap();
    let one_task =
        (0..scope.len()).filter(|&i| scope.get(i) == Some("one task: parse-duration")).count();
    assert_eq!(one_task, 2);

    // CSV: the same rows, whole-number floats written as floats.
    let csv_out = dir.path().join("arms.csv");
    let (code, err) =
        ablate(&["export", a_s, b_s, "--table", "arms", "-o", csv_out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let mut r = csv::Reader::from_path(&csv_out).unwrap();
    let headers = r.headers().unwrap().clone();
    let col = headers.iter().position(|h| h == "alpha").unwrap();
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
    assert_eq!(rows.len(), 7 + 2 * 2);
    // Both configs' alpha = 0.05, written as a float.
    assert!(rows.iter().all(|x| &x[col] == "0.05"), "alpha as floats: {rows:?}");

    // A folder that is not a run: an error naming it.
    let (code, err) =
        ablate(&["export", dir.path().to_str().unwrap(), "-o", csv_out.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has no manifest.json"), "{err}");
}
