//! What every command prints, pinned as insta snapshots (`tests/snapshots/`):
//! each command's `--help`, and the output of `run`, `plan`, `report`,
//! `baseline save`, `gate`, `merge`, `suite check` and `suite import` on fixed
//! inputs, and of refused inputs. Paths, digests, run ids and times are
//! replaced by placeholders. After an intended change:
//! `INSTA_UPDATE=always cargo test --test integration snapshots::`, then review the diff.

use crate::common;

use ablate_synth as synth;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

fn ablate(args: &[&str]) -> String {
    let out = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_ablate"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("NO_COLOR", "1")
            .env_remove("CI"),
        Duration::from_secs(120),
    );
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Placeholders for what changes from one machine or run to the next.
fn settings(tmp: Option<&Path>) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("../snapshots");
    s.set_prepend_module_to_snapshot(false);
    if let Some(tmp) = tmp {
        s.add_filter(&regex::escape(&tmp.display().to_string()), "[tmp]");
    }
    s.add_filter(&regex::escape(env!("CARGO_MANIFEST_DIR")), "[repo]");
    s.add_filter(r"\b[0-9a-f]{12,64}\b", "[digest]");
    s.add_filter(r"\b\d+(\.\d+)? ?(ms|s)\b", "[time]");
    // A ratio of working times is as much a measured time as they are.
    s.add_filter(
        r"(?m)(working time per [^:]*:.*), \d+(\.\d+)?x( \[\S+, \S+\])?$",
        "${1}, [ratio]",
    );
    s.add_filter(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", "[timestamp]");
    s.add_filter(r"ablate \d+\.\d+\.\d+", "ablate [version]");
    s.add_filter(r"at line \d+ column \d+", "at [position]");
    s
}

#[test]
fn every_help() {
    let commands: &[&[&str]] = &[
        &[],
        &["suite"],
        &["suite", "check"],
        &["suite", "import"],
        &["run"],
        &["report"],
        &["merge"],
        &["baseline"],
        &["baseline", "save"],
        &["gate"],
        &["export"],
        &["plan"],
        &["import"],
    ];
    let _g = settings(None).bind_to_scope();
    for c in commands {
        let mut args: Vec<&str> = c.to_vec();
        args.push("--help");
        let name = if c.is_empty() { "help".to_string() } else { format!("help-{}", c.join("-")) };
        insta::assert_snapshot!(name, ablate(&args));
    }
}

/// A synthetic run of configs/core.toml's first two tasks, arms bare and full.
fn synthetic(dir: &Path, name: &str, seed: u64, full_rate: f64) -> PathBuf {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/core.toml");
    let mut exp = ablate::experiment::config::load(&cfg).unwrap();
    exp.trials = 6;
    exp.tasks.truncate(2);
    exp.arms.retain(|a| a.name == "bare" || a.name == "full");
    exp.comparisons.retain(|c| {
        (c.control == "bare" && c.treatment == "full")
            || (c.control == "full" && c.treatment == "bare")
    });
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let out = dir.join(name);
    synth::write_run(
        &out,
        &exp,
        &suite,
        &plan,
        seed,
        |_, arm| if arm == "full" { full_rate } else { 0.3 },
    )
    .unwrap();
    out
}

#[test]
fn command_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let _g = settings(Some(dir.path())).bind_to_scope();
    insta::assert_snapshot!("plan-gate", ablate(&["plan", "configs/gate.toml"]));
    let run = synthetic(dir.path(), "run", 3, 0.8);
    let run_s = run.to_str().unwrap();
    insta::assert_snapshot!("report", ablate(&["report", run_s]));
    let baseline = dir.path().join("baseline.csv");
    insta::assert_snapshot!(
        "baseline-save",
        ablate(&["baseline", "save", run_s, "--arm", "full", "-o", baseline.to_str().unwrap()])
    );
    let candidate = synthetic(dir.path(), "candidate", 4, 0.8);
    insta::assert_snapshot!(
        "gate",
        ablate(&[
            "gate",
            "--baseline",
            baseline.to_str().unwrap(),
            "--candidate",
            candidate.to_str().unwrap()
        ])
    );
    let missing = dir.path().join("missing");
    insta::assert_snapshot!(
        "merge-refused",
        ablate(&[
            "merge",
            "-o",
            dir.path().join("out").to_str().unwrap(),
            missing.to_str().unwrap()
        ])
    );
    insta::assert_snapshot!(
        "suite-check",
        ablate(&["suite", "check", "tests/fixtures/suites/tiny"])
    );
    insta::assert_snapshot!(
        "config-error",
        ablate(&["plan", "tests/fixtures/suites/tiny/add-two/task.toml"])
    );
    // A manifest whose recorded experiment does not parse is refused, naming the key.
    let bad = synthetic(dir.path(), "bad-manifest", 5, 0.5);
    let path = bad.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["experiment"]["arms"][1]["name"] = serde_json::json!(5);
    std::fs::write(&path, serde_json::to_string(&m).unwrap()).unwrap();
    insta::assert_snapshot!("report-bad-manifest", ablate(&["report", bad.to_str().unwrap()]));
    // A recorded arm's key that is no component is refused, naming it and the arm.
    let unknown = synthetic(dir.path(), "unknown-component", 5, 0.5);
    let path = unknown.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["experiment"]["arms"][1]["components"]["feedbak"] = serde_json::json!(true);
    std::fs::write(&path, serde_json::to_string(&m).unwrap()).unwrap();
    insta::assert_snapshot!(
        "report-unknown-component",
        ablate(&["report", unknown.to_str().unwrap()])
    );
    insta::assert_snapshot!(
        "python-error",
        ablate(&[
            "--python",
            "/nonexistent/python3",
            "suite",
            "check",
            "tests/fixtures/suites/tiny"
        ])
    );
    let imported = dir.path().join("imported");
    let imported_s = imported.to_str().unwrap();
    insta::assert_snapshot!(
        "suite-import",
        ablate(&[
            "suite",
            "import",
            "humaneval",
            "tests/fixtures/imports/humaneval-mini.jsonl",
            "-o",
            imported_s
        ])
    );
    // This build has no polars (the default features): export says how to get it.
    if cfg!(not(feature = "polars")) {
        insta::assert_snapshot!(
            "export-without-polars",
            ablate(&["export", run_s, "-o", dir.path().join("x.parquet").to_str().unwrap()])
        );
    }
    insta::assert_snapshot!(
        "suite-import-exists",
        ablate(&[
            "suite",
            "import",
            "humaneval",
            "tests/fixtures/imports/humaneval-mini.jsonl",
            "-o",
            imported_s
        ])
    );
}

/// One command's output for each way a command can fail, each exit status
/// decided by `cli::error` alone: a file that cannot be written (1), a flag out
/// of range (2, named by the flag), and a run folder whose exports cannot be
/// written (1: the records are fine, the input is not at fault).
#[test]
fn failure_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let _g = settings(Some(dir.path())).bind_to_scope();
    let run = synthetic(dir.path(), "run", 3, 0.8);
    let run_s = run.to_str().unwrap();
    // A baseline under a file: no folder can be made for it.
    let nowhere = run.join("manifest.json").join("baseline.csv");
    insta::assert_snapshot!(
        "baseline-save-unwritable",
        ablate(&["baseline", "save", run_s, "--arm", "full", "-o", nowhere.to_str().unwrap()])
    );
    insta::assert_snapshot!("run-jobs-zero", ablate(&["run", "configs/core.toml", "--jobs", "0"]));
    // The exports' temporary file is taken by a folder: trials.csv cannot be written (as root, too).
    std::fs::create_dir(run.join(".trials.csv.tmp")).unwrap();
    insta::assert_snapshot!("report-unwritable", ablate(&["report", run_s]));
    assert!(!run.join("trials.csv").exists(), "nothing half-written");
}

/// `ablate run` to its end against a scripted model (wrong code, then right
/// code once the checks' failures are shown), one trial at a time so that the
/// lines come in plan order; then the same run again, refused, and resumed.
#[test]
fn run_output() {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server = rt.block_on(common::start(Arc::new(|path, body, _| {
        if let Some(r) = common::meta(path) {
            return r;
        }
        let fixed = common::count_messages(body, "The harness ran the checks") > 0;
        common::openai_text(if fixed { common::RIGHT_ADD } else { common::WRONG_ADD })
    })));
    let dir = tempfile::tempdir().unwrap();
    let suite = common::fixture("tiny");
    let arms = "[arms.nofb]\n[arms.fb]\nfeedback = true\n[[matrix.pairs]]\ncontrol = \"nofb\"\ntreatment = \"fb\"\n";
    let mut cfg = common::Cfg::new(&suite, "openai", &server.url, arms);
    cfg.trials = 2;
    let config = cfg.write(dir.path());
    let mut s = settings(Some(dir.path()));
    s.add_filter(&regex::escape(&server.url), "[model server]");
    s.add_filter(&regex::escape(&suite.display().to_string()), "[suite]");
    let _g = s.bind_to_scope();
    let results = dir.path().join("results");
    let (config_s, results_s) = (config.to_str().unwrap(), results.to_str().unwrap());
    insta::assert_snapshot!(
        "run",
        ablate(&["run", config_s, "--results", results_s, "--run-id", "r", "-j", "1", "--plain"])
    );
    insta::assert_snapshot!(
        "run-exists",
        ablate(&["run", config_s, "--results", results_s, "--run-id", "r", "-j", "1", "--plain"])
    );
    insta::assert_snapshot!(
        "run-resume-done",
        ablate(&[
            "run",
            config_s,
            "--resume",
            results.join("r").to_str().unwrap(),
            "-j",
            "1",
            "--plain"
        ])
    );
    // The same experiment as two shards, put back together.
    for k in ["1/2", "2/2"] {
        let id = format!("s{}", &k[..1]);
        let out = ablate(&[
            "run",
            config_s,
            "--results",
            results_s,
            "--run-id",
            &id,
            "--shard",
            k,
            "-j",
            "1",
            "--plain",
        ]);
        assert!(out.starts_with("exit: 0\n"), "{out}");
    }
    let (s1, s2, merged) = (results.join("s1"), results.join("s2"), results.join("merged"));
    insta::assert_snapshot!(
        "merge",
        ablate(&[
            "merge",
            "-o",
            merged.to_str().unwrap(),
            s1.to_str().unwrap(),
            s2.to_str().unwrap()
        ])
    );
    insta::assert_snapshot!(
        "merge-one-shard-missing",
        ablate(&["merge", "-o", results.join("m2").to_str().unwrap(), s1.to_str().unwrap()])
    );
    drop(server);
}
