//! `ablate merge`: shards of one experiment put back together report exactly
//! what the unsharded run reports; what is missing or foreign is named.

use crate::common;

use ablate::record::merge::{MergeError, MergeOptions, merge};
use ablate::record::{Manifest, TrialRecord};
use common::*;
use serde_json::Value;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const RIGHT_EVEN: &str = "```python even.py\ndef is_even(n):\n    return n % 2 == 0\n```\nDONE";
const WRONG_EVEN: &str = "```python even.py\ndef is_even(n):\n    return n % 2 == 1\n```\nDONE";

/// The reply is a function of the request alone (task, arm's prompt, step,
/// seed), so every run of the plan, however split, gets the same answers.
fn scripted(body: &Value) -> Reply {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let head = serde_json::to_string(&messages[..messages.len().min(2)]).unwrap();
    let mut h = std::hash::DefaultHasher::new();
    (&head, messages.len(), body["seed"].as_u64()).hash(&mut h);
    let right = !h.finish().is_multiple_of(3);
    let even = head.contains("even.py");
    openai_text(match (even, right) {
        (true, true) => RIGHT_EVEN,
        (true, false) => WRONG_EVEN,
        (false, true) => RIGHT_ADD,
        (false, false) => WRONG_ADD,
    })
}

async fn server() -> Server {
    start(Arc::new(|path, body, _| meta(path).unwrap_or_else(|| scripted(body)))).await
}

/// A scripted server, a temporary folder, the experiment's config and the results folder.
struct Setup {
    _server: Server,
    dir: tempfile::TempDir,
    cfg: PathBuf,
    results: PathBuf,
}

async fn setup() -> Setup {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &server.url);
    let results = dir.path().join("results");
    Setup { _server: server, dir, cfg, results }
}

fn config(dir: &Path, url: &str) -> PathBuf {
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(
        &suite,
        "openai",
        url,
        "[arms.bare]\nbase = \"bare\"\n[arms.full]\nbase = \"full\"\n[[matrix.combined]]\ncontrol = \"bare\"\ntreatment = \"full\"\n",
    );
    cfg.tasks = &["add-two", "is-even"];
    cfg.trials = 5;
    cfg.max_steps = 2;
    cfg.write(dir)
}

enum RunAs<'a> {
    /// A new run folder of this name, the whole plan or one shard (K/N).
    New(&'a str, Option<&'a str>),
    Resume(&'a Path),
}

/// The run's summary, and whether its final exports were written (or why not).
async fn ablate_run(
    config: &Path,
    results: &Path,
    how: RunAs<'_>,
) -> (ablate::runner::RunSummary, Result<(), String>) {
    let exp = ablate::experiment::config::load(config).unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let (run_id, shard, resume) = match how {
        RunAs::New(id, shard) => (Some(id.to_string()), shard.map(|s| s.parse().unwrap()), None),
        RunAs::Resume(dir) => (None, None, Some(dir.to_path_buf())),
    };
    let exports = std::sync::Arc::new(ablate::report::live::LiveExports::new(Default::default()));
    let opts = ablate::runner::RunOptions {
        jobs: 2,
        shard,
        results_dir: results.to_path_buf(),
        resume,
        run_id,
        allow_model_change: false,
        reporters: vec![exports.clone()],
        engine: Default::default(),
        container_engine: None,
    };
    let summary =
        within(RUN_LIMIT, "the run", ablate::runner::run(exp, suite, opts)).await.unwrap();
    let exported = within(
        RUN_LIMIT,
        "the final exports",
        tokio::task::spawn_blocking(move || exports.finish()),
    )
    .await
    .unwrap();
    let exported = exported.map_err(|e| e.to_string());
    (summary, exported.and_then(|e| e.report.map_err(|e| e.to_string())).map(|_| ()))
}

/// A new run (or shard) with its exports written; its folder.
async fn run_as(config: &Path, results: &Path, run_id: &str, shard: Option<&str>) -> PathBuf {
    let (summary, exported) = ablate_run(config, results, RunAs::New(run_id, shard)).await;
    assert!(exported.is_ok(), "{:?}", exported.err());
    summary.dir.clone()
}

/// A CSV without the columns that differ between two runs of one plan by
/// nature: the run id and measured times.
fn table(path: &Path) -> Vec<Vec<(String, String)>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    r.records()
        .map(|row| {
            header
                .iter()
                .zip(row.unwrap().iter())
                .filter(|(k, _)| {
                    k.as_str() != "run_id"
                        && !k.contains("working_seconds")
                        && !k.contains("wall_seconds")
                })
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect()
        })
        .collect()
}

fn manifest(dir: &Path) -> Manifest {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

fn opts(out: PathBuf, shards: &[&PathBuf], allow_partial: bool) -> MergeOptions {
    MergeOptions { out, shards: shards.iter().map(|p| p.to_path_buf()).collect(), allow_partial }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_shards_report_what_the_unsharded_run_reports() {
    let Setup { _server, dir: _dir, cfg, results } = setup().await;
    let whole = run_as(&cfg, &results, "whole", None).await;
    let shards = [
        run_as(&cfg, &results, "s1", Some("1/3")).await,
        run_as(&cfg, &results, "s2", Some("2/3")).await,
        run_as(&cfg, &results, "s3", Some("3/3")).await,
    ];
    // Given in any order.
    let out = results.join("merged");
    let summary = merge(&opts(out.clone(), &[&shards[2], &shards[0], &shards[1]], false)).unwrap();
    assert_eq!((summary.planned, summary.records, summary.missing.len()), (20, 20, 0));
    drop(summary);
    ablate::report::report_dir(&out).unwrap();

    // Two arms of one model, and their one combined comparison.
    for (name, rows) in [("arms.csv", 2), ("effects.csv", 1)] {
        let (a, b) = (table(&whole.join(name)), table(&out.join(name)));
        assert_eq!(a.len(), rows, "{name}");
        assert_eq!(a, b, "{name} of the merged run equals the unsharded run's");
    }
    // The scripted answers differ between trials: the comparison is not of two constant tables.
    let arms = table(&whole.join("arms.csv"));
    let rate = |row: &Vec<(String, String)>| {
        row.iter().find(|(k, _)| k == "passed").unwrap().1.parse::<u32>().unwrap()
    };
    assert!(
        arms.iter().any(|r| rate(r) > 0 && rate(r) < 10),
        "pass counts are strictly between 0 and 10: {arms:?}"
    );

    // The manifest holds the whole plan, in the unsharded order, and where it came from.
    let (m, w) = (manifest(&out), manifest(&whole));
    assert_eq!(m.plan, w.plan);
    assert_eq!((m.shard, m.planned_trials, m.run_id.as_str()), (None, 20, "merged"));
    let merged = m.merged.unwrap();
    assert_eq!(
        merged.shards.iter().map(|s| (s.shard.index, s.run_id.as_str())).collect::<Vec<_>>(),
        vec![(1, "s1"), (2, "s2"), (3, "s3")]
    );
    assert!(!merged.partial);
    // Every record carries the merged run id; every trace came along, byte for byte.
    let records =
        ablate::record::jsonl::read::<TrialRecord>(&out.join("trials.jsonl")).unwrap().records;
    assert_eq!(records.len(), 20);
    assert!(records.iter().all(|r| r.run_id == "merged"));
    for r in &records {
        let name = format!("{}.jsonl", r.trial_id);
        let from: Vec<&PathBuf> =
            shards.iter().filter(|s| s.join("traces").join(&name).is_file()).collect();
        assert_eq!(from.len(), 1, "{name} is in exactly one shard");
        assert_eq!(
            std::fs::read(out.join("traces").join(&name)).unwrap(),
            std::fs::read(from[0].join("traces").join(&name)).unwrap(),
            "{name}"
        );
    }

    // The CLI reads it like any run: report, and the gate against the unsharded run.
    let bin = env!("CARGO_BIN_EXE_ablate");
    let report = output_within(
        std::process::Command::new(bin).args(["report", out.to_str().unwrap(), "--no-color"]),
        Duration::from_secs(60),
    );
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    let gate = output_within(
        std::process::Command::new(bin).args([
            "gate",
            "--baseline",
            whole.to_str().unwrap(),
            "--candidate",
            out.to_str().unwrap(),
            "--arm",
            "full",
        ]),
        Duration::from_secs(60),
    );
    // Equal counts, 10 trials a side: x/10 -> x/10 is INCONCLUSIVE at margin 5 pp for every x
    // (scripts/gate_reference.py, verdict(x, 10, x, 10, 0.05, 0.05)); never FAIL, drift or a usage error.
    assert_eq!(gate.status.code(), Some(3), "{}", String::from_utf8_lossy(&gate.stdout));
    assert!(
        String::from_utf8_lossy(&gate.stdout).starts_with("gate: INCONCLUSIVE"),
        "{}",
        String::from_utf8_lossy(&gate.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_unfinished_shards_are_named_and_allow_partial_merges_what_exists() {
    let Setup { _server, dir: _dir, cfg, results } = setup().await;
    let s1 = run_as(&cfg, &results, "s1", Some("1/3")).await;
    let s3 = run_as(&cfg, &results, "s3", Some("3/3")).await;
    // Shard 3 loses its last record: that trial has no final record.
    let trials = s3.join("trials.jsonl");
    let text = std::fs::read_to_string(&trials).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let lost: TrialRecord = serde_json::from_str(lines.pop().unwrap()).unwrap();
    std::fs::write(&trials, lines.join("\n") + "\n").unwrap();

    let out = results.join("merged");
    let Err(MergeError::Incomplete(why)) = merge(&opts(out.clone(), &[&s1, &s3], false)) else {
        panic!("an incomplete merge is refused")
    };
    let why = why.join("\n");
    assert!(why.contains("missing shards: 2/3"), "{why}");
    assert!(why.contains(&lost.trial_id) && why.contains("1 of 6 planned trials"), "{why}");
    assert!(!out.exists(), "a refused merge writes nothing");
    assert!(
        std::fs::read_dir(&results).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("merging"))
    );

    let summary = merge(&opts(out.clone(), &[&s1, &s3], true)).unwrap();
    assert_eq!((summary.planned, summary.records), (7 + 6, 7 + 5));
    drop(summary);
    let m = manifest(&out).merged.unwrap();
    assert!(m.partial);
    assert_eq!((m.missing_shards, m.unfinished_trials), (vec![2], 1));

    // --resume of the merged folder runs the trial that had no final record.
    let resumed = Ran::from(ablate_run(&cfg, &results, RunAs::Resume(&out)).await.0);
    assert_eq!(resumed.ran_now, 1);
    assert_eq!(resumed.records.iter().filter(|r| r.status.is_final()).count(), 13);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_of_different_experiments_or_twice_the_same_are_refused() {
    let Setup { _server, dir, cfg, results } = setup().await;
    let s1 = run_as(&cfg, &results, "s1", Some("1/2")).await;
    let s2 = run_as(&cfg, &results, "s2", Some("2/2")).await;
    let whole = run_as(&cfg, &results, "whole", None).await;
    // Another experiment: another seed.
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let other_cfg = other_dir.join("exp.toml");
    std::fs::write(
        &other_cfg,
        std::fs::read_to_string(&cfg).unwrap().replace("seed = 3", "seed = 4"),
    )
    .unwrap();
    let other = run_as(&other_cfg, &results, "o2", Some("2/2")).await;

    let out = results.join("merged");
    let err = |shards: &[&PathBuf]| match merge(&opts(out.clone(), shards, true)) {
        Err(MergeError::Input(e)) => e.to_string(),
        other => panic!("refused as bad input, got {other:?}"),
    };
    let e = err(&[&s1, &other]);
    assert!(e.contains("o2/manifest.json") && e.contains("config_digest"), "{e}");
    let e = err(&[&s1, &s1.clone()]);
    assert!(e.contains("shard.index") && e.contains("given twice"), "{e}");
    let e = err(&[&s1, &whole]);
    assert!(e.contains("whole/manifest.json") && e.contains("not a shard"), "{e}");
    let e = err(&[&s1, &dir.path().join("nowhere")]);
    assert!(e.contains("nowhere/manifest.json"), "{e}");
    assert!(!out.exists());
    // And the good pair merges.
    let summary = merge(&opts(out.clone(), &[&s1, &s2], false)).unwrap();
    assert_eq!((summary.planned, summary.records, summary.missing.len()), (20, 20, 0));
    drop(summary);
    // Into an existing folder: refused.
    let e = err(&[&s1, &s2]);
    assert!(e.contains("exists"), "{e}");
}

/// scripts/local-shards.sh 3 CONFIG RESULTS local, with this build's ablate. The script
/// backgrounds its shards: past the limit its whole process group is killed.
async fn local_shards(cfg: &Path, results: &Path) -> std::process::Output {
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/local-shards.sh"))
        .args(["3", cfg.to_str().unwrap(), results.to_str().unwrap(), "local"])
        .env("ABLATE", env!("CARGO_BIN_EXE_ablate"));
    output_within_async(&mut cmd, Duration::from_secs(300)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_shards_script_runs_the_shards_as_processes_and_merges_them() {
    let Setup { _server, dir: _dir, cfg, results } = setup().await;
    let whole = run_as(&cfg, &results, "whole", None).await;
    let out = local_shards(&cfg, &results).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let merged = results.join("local");
    for k in 1..=3 {
        assert_eq!(
            manifest(&results.join(format!("local-shard-{k}-of-3")))
                .shard
                .map(|s| (s.index, s.count)),
            Some((k, 3))
        );
    }
    assert_eq!(manifest(&merged).plan, manifest(&whole).plan);
    for name in ["arms.csv", "effects.csv"] {
        assert_eq!(table(&whole.join(name)), table(&merged.join(name)), "{name}");
    }
    // Run again with the same id: every shard resumes, finds nothing to do, and the merge is refused (the folder exists).
    let again = local_shards(&cfg, &results).await;
    assert_eq!(again.status.code(), Some(2), "{}", String::from_utf8_lossy(&again.stderr));
    let log = std::fs::read_to_string(results.join("local-shard-2-of-3.log")).unwrap();
    assert!(log.contains("(0 run now"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_with_no_trials_writes_an_empty_valid_folder() {
    // 20 trials in 30 shards (a Slurm array larger than the plan): shard 25 holds none.
    let Setup { _server, dir: _dir, cfg, results } = setup().await;
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ablate"));
    cmd.args(["run", cfg.to_str().unwrap(), "--shard", "25/30", "--results"])
        .arg(&results)
        .args(["--run-id", "empty"]);
    let out = output_within_async(&mut cmd, Duration::from_secs(120)).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let folder = results.join("empty");
    assert_eq!(manifest(&folder).shard.map(|s| (s.index, s.count)), Some((25, 30)));
    assert_eq!(std::fs::read_to_string(folder.join("trials.jsonl")).unwrap_or_default(), "");
    // Its exports hold the header alone, and the folder reads as a run.
    let csv = std::fs::read_to_string(folder.join("trials.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1, "{csv}");
    assert!(csv.starts_with("run_id,"), "{csv}");
    let mut report = tokio::process::Command::new(env!("CARGO_BIN_EXE_ablate"));
    report.arg("report").arg(&folder);
    let out = output_within_async(&mut report, Duration::from_secs(60)).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_with_another_shard_is_refused() {
    let Setup { _server, dir: _dir, cfg, results } = setup().await;
    let shard = run_as(&cfg, &results, "s1", Some("1/3")).await;
    let resume = |with: &str| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ablate"));
        cmd.args(["run", cfg.to_str().unwrap(), "--resume"]).arg(&shard).args(["--shard", with]);
        cmd
    };
    let out = output_within_async(&mut resume("2/3"), Duration::from_secs(120)).await;
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("key `--shard`") && err.contains("is shard 1/3, not shard 2/3"), "{err}");
    let out = output_within_async(&mut resume("1/3"), Duration::from_secs(120)).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}
