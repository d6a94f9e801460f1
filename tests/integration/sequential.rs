//! The sequential design end to end against a scripted model with known pass
//! rates: a large effect is decided after a fraction of the tasks and its
//! arm stops; no effect is decided equivalent; a run killed with SIGKILL and
//! resumed reaches the decisions of an uninterrupted one.

use crate::common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const TASKS: usize = 40;

/// Arm `b`'s instructions carry this marker: the scripted model answers it
/// wrongly; every other arm rightly. So a -> b moves every task from pass to
/// fail (d = -1) and a -> c moves none (d = 0).
const MARK: &str = "WRONG-ARM";

fn scripted(body: &Value) -> Reply {
    let text = serde_json::to_string(&body["messages"]).unwrap();
    openai_text(if text.contains(MARK) { WRONG_ADD } else { RIGHT_ADD })
}

/// A suite of `tasks` copies of the tiny suite's add-two, ids add-00, add-01...
fn suite(dir: &Path, tasks: usize) -> PathBuf {
    let from = fixture("tiny").join("add-two");
    let root = dir.join("adds");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("suite.toml"),
        "name = \"adds\"\nversion = \"1.0.0\"\ndescription = \"copies of add-two\"\n",
    )
    .unwrap();
    for i in 0..tasks {
        let id = format!("add-{i:02}");
        let to = root.join(&id);
        copy_dir(&from, &to);
        let toml = std::fs::read_to_string(to.join("task.toml"))
            .unwrap()
            .replace("id = \"add-two\"", &format!("id = \"{id}\""));
        std::fs::write(to.join("task.toml"), toml).unwrap();
    }
    root
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()))
        } else {
            std::fs::copy(&p, to.join(e.file_name())).map(|_| ()).unwrap()
        }
    }
}

/// The experiment on `TASKS` tasks.
fn config(dir: &Path, url: &str) -> PathBuf {
    config_on(dir, url, TASKS)
}

/// Arms a, b, c on a suite of `tasks` tasks, pairs a -> b and a -> c, margin 20 pp.
fn config_on(dir: &Path, url: &str, tasks: usize) -> PathBuf {
    let suite = suite(dir, tasks);
    for (name, text) in [
        ("a.md", "You write Python. Arm A."),
        ("b.md", &format!("You write Python. {MARK}.")),
        ("c.md", "You write Python. Arm C."),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let text = format!(
        "[experiment]\nname = \"seq\"\nsuite = \"{}\"\ntrials = 1\nseed = 3\nmargin = 0.2\ndesign = \"sequential\"\n\n\
         [budget]\nmax_steps = 2\nmax_output_tokens_per_step = 200\nmax_total_tokens = 100000\nmax_working_seconds = 60\n\n\
         [[models]]\nname = \"m\"\nprovider = \"openai\"\nmodel = \"m\"\nendpoint = \"{url}\"\ntemperature = 0.0\n\n\
         [arms.a]\nbase = \"bare\"\ninstructions = \"a.md\"\n[arms.b]\nbase = \"bare\"\ninstructions = \"b.md\"\n[arms.c]\nbase = \"bare\"\ninstructions = \"c.md\"\n\n\
         [[matrix.pairs]]\ncontrol = \"a\"\ntreatment = \"b\"\n[[matrix.pairs]]\ncontrol = \"a\"\ntreatment = \"c\"\n",
        suite.display()
    );
    let path = dir.join("seq.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// effects.csv as (name -> column -> value).
fn effects(run: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut r = csv::Reader::from_path(run.join("effects.csv")).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    r.records()
        .map(|row| header.iter().cloned().zip(row.unwrap().iter().map(String::from)).collect())
        .collect()
}

fn records(run: &Path) -> Vec<ablate::record::TrialRecord> {
    ablate::record::jsonl::read::<ablate::record::TrialRecord>(&run.join("trials.jsonl"))
        .unwrap()
        .records
}

fn ablate(args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ablate"));
    cmd.args(args).arg("--plain");
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decided_comparisons_stop_and_a_killed_run_resumes_to_the_same_decisions() {
    let server =
        start(Arc::new(|path, body, _| meta(path).unwrap_or_else(|| scripted(body)))).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &server.url);
    let results = dir.path().join("results");
    let (cfg_s, results_s) =
        (cfg.to_str().unwrap().to_string(), results.to_str().unwrap().to_string());

    // Uninterrupted.
    let out = tokio::task::spawn_blocking({
        let (c, r) = (cfg_s.clone(), results_s.clone());
        move || {
            output_within(
                &mut ablate(&["run", &c, "--results", &r, "--run-id", "whole", "--jobs", "2"]),
                Duration::from_secs(600),
            )
        }
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let whole = results.join("whole");
    let e = effects(&whole);
    let row = |treatment: &str| {
        e.iter()
            .find(|r| r["treatment"] == treatment)
            .unwrap_or_else(|| panic!("{treatment}: {e:?}"))
            .clone()
    };
    // By hand: alpha 0.05 / 2 ablations, bets sized for half the 40 tasks, l_t = sqrt(2 ln 80 / (s2_{t-1} 20)),
    // at least sqrt(0.4382 / 0.25) = 1.32 here. a -> b, d = -1 (x = 0) each task: the downward bet at 1/2 is
    // its truncation 1, each factor 1.5, and 0.5 * 1.5^k >= 40 first at k = 11 (1.5^10 = 57.7, 1.5^11 = 86.5).
    let (hurt, same) = (row("b"), row("c"));
    assert_eq!(
        (hurt["design"].as_str(), hurt["verdict"].as_str(), hurt["decided_after_tasks"].as_str()),
        ("sequential", "hurts", "11"),
        "{hurt:?}"
    );
    assert_eq!(hurt["method"], "betting_cs");
    // Every difference the sequences took is -1 (a -> b) or 0 (a -> c): every resample of the
    // bias correction is the same, so the bias-reduced estimate is the naive mean.
    assert_eq!((hurt["delta"].as_str(), hurt["delta_bias_reduced"].as_str()), ("-1.0", "-1.0"));
    assert_eq!(same["delta_bias_reduced"], "0.0", "{same:?}");
    assert_eq!(hurt["p_value"], "", "no p-value after optional stopping");
    // a -> c, d = 0 (x = 1/2) each task: the bets at 0.4 and 0.6 are their truncation 1.25, each factor 1.125,
    // and 0.5 * 1.125^k >= 40 first at k = 38 (1.125^37 = 78.2, 1.125^38 = 88.0).
    assert_eq!(
        (same["verdict"].as_str(), same["decided_after_tasks"].as_str()),
        ("equivalent within ±20 pp", "38"),
        "{same:?}"
    );
    assert!(stderr.contains("decided: ") && stderr.contains("hurts after 11 tasks"), "{stderr}");

    // b's trials stop once a -> b is decided (a few may be under way: 2 at a time).
    let recs = records(&whole);
    let b_trials = recs.iter().filter(|r| r.arm == "b").count();
    assert!((11..=13).contains(&b_trials), "{b_trials} trials of b");
    // a and c run until a -> c is decided at task 38 (and no further than the tasks under way).
    let c_trials = recs.iter().filter(|r| r.arm == "c").count();
    assert!((38..=40).contains(&c_trials), "{c_trials} trials of c");
    let manifest = ablate::record::ManifestHead::read(&whole).unwrap();
    let order = manifest.sequential.unwrap().task_order;
    assert_eq!(order.len(), TASKS);
    // The seeded order is not the suite's.
    assert_ne!(order, (0..TASKS).map(|i| format!("add-{i:02}")).collect::<Vec<_>>());
    // b ran on the first tasks of the order only.
    let first: std::collections::BTreeSet<&str> = order[..13].iter().map(String::as_str).collect();
    assert!(recs.iter().filter(|r| r.arm == "b").all(|r| first.contains(r.task.as_str())));

    // The report says how each sequence went, with no p-value, and plots the sequences.
    let report = output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_ablate")).args([
            "report",
            whole.to_str().unwrap(),
            "--no-color",
        ]),
        Duration::from_secs(60),
    );
    let text = String::from_utf8_lossy(&report.stdout);
    println!("{text}");
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    assert!(text.contains("sequence: decided (hurts) after 11 tasks, "), "{text}");
    assert!(text.contains("sequence: decided (equivalent) after 38 tasks, "), "{text}");
    assert!(text.contains("anytime-valid"), "{text}");
    let html = std::fs::read_to_string(whole.join("report.html")).unwrap();
    assert!(
        html.contains("<h2>Confidence sequences</h2>") && html.matches("<polygon").count() == 2,
        "two sequences plotted"
    );
    let md = std::fs::read_to_string(whole.join("report.md")).unwrap();
    assert!(md.contains("decided (hurts) after 11 tasks"), "{md}");

    // Killed (SIGKILL, the whole process group) part way, then resumed: the same decisions.
    let log = dir.path().join("killed.log");
    let mut child = {
        use std::os::unix::process::CommandExt;
        let mut cmd =
            ablate(&["run", &cfg_s, "--results", &results_s, "--run-id", "killed", "--jobs", "2"]);
        cmd.stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.path().join("killed.err")).unwrap())
            .process_group(0);
        cmd.spawn().unwrap()
    };
    let killed = results.join("killed");
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    loop {
        let n = std::fs::read_to_string(killed.join("trials.jsonl"))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if n >= 20 || std::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = child.id() as i32;
    rustix::process::kill_process_group(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let _ = child.wait();
    let partial = records(&killed).len();
    assert!(
        partial >= 20 && partial < recs.len(),
        "killed after {partial} of {} records",
        recs.len()
    );
    let out = tokio::task::spawn_blocking({
        let (c, k) = (cfg_s.clone(), killed.to_str().unwrap().to_string());
        move || {
            output_within(
                &mut ablate(&["run", &c, "--resume", &k, "--jobs", "2"]),
                Duration::from_secs(600),
            )
        }
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let again = effects(&killed);
    let key = |rows: &[std::collections::BTreeMap<String, String>]| -> Vec<(String, String, String, String, String)> {
        rows.iter().map(|r| (r["name"].clone(), r["verdict"].clone(), r["decided_after_tasks"].clone(), r["lo"].clone(), r["hi"].clone())).collect()
    };
    assert_eq!(key(&again), key(&e));

    // A budget of 40 trials: tasks 0..10 need a, b and c (33 trials); after -b's decision at task 11,
    // 2 a task: tasks 11, 12 and 13 enter (39), task 14 would make 41. -c is then undecided at budget after
    // 14 tasks, whatever order the trials finished in.
    let budget_cfg = dir.path().join("budget.toml");
    std::fs::write(
        &budget_cfg,
        std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("design = \"sequential\"\n", "design = \"sequential\"\nmax_trials = 40\n"),
    )
    .unwrap();
    let out = output_within(
        &mut ablate(&[
            "run",
            budget_cfg.to_str().unwrap(),
            "--results",
            &results_s,
            "--run-id",
            "budget",
            "--jobs",
            "3",
        ]),
        Duration::from_secs(600),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let budget = effects(&results.join("budget"));
    let c = budget.iter().find(|r| r["treatment"] == "c").unwrap();
    assert_eq!((c["n_tasks"].as_str(), c["decided_after_tasks"].as_str()), ("14", ""), "{c:?}");
    assert!(c["verdict"].starts_with("undecided at budget: about "), "{c:?}");
    let b = budget.iter().find(|r| r["treatment"] == "b").unwrap();
    assert_eq!((b["verdict"].as_str(), b["decided_after_tasks"].as_str()), ("hurts", "11"));
    let started = records(&results.join("budget")).len();
    assert!(
        (39..=42).contains(&started),
        "{started} trials started for a budget of 40 (39 used; b's trials under way at its decision)"
    );

    // Two shards, each owning every other task of the order and following its own tasks by the
    // same rule, then merged: the merged report replays the whole order. By hand, each shard's
    // a -> b sequence meets the same truncated bets (factor 1.5 a task) and decides after 11 of its
    // own tasks, so b ran on the first 22 tasks of the order, more than the 11 the whole order
    // needs; a -> c never decides inside a shard's 20 tasks, so a and c ran every task. The merged
    // run has the records the whole order's rule reads: its decisions and intervals.
    let mut shard_dirs = Vec::new();
    for k in 1..=2 {
        let id = format!("shard{k}");
        let out = output_within(
            &mut ablate(&[
                "run",
                &cfg_s,
                "--results",
                &results_s,
                "--run-id",
                &id,
                "--shard",
                &format!("{k}/2"),
                "--jobs",
                "2",
            ]),
            Duration::from_secs(600),
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let recs = records(&results.join(&id));
        let own: std::collections::BTreeSet<&str> =
            order.iter().skip(k - 1).step_by(2).map(String::as_str).collect();
        assert!(
            recs.iter().all(|r| own.contains(r.task.as_str())),
            "shard {k}/2 ran only its own tasks"
        );
        let b = recs.iter().filter(|r| r.arm == "b").count();
        assert!((11..=13).contains(&b), "shard {k}/2 ran {b} trials of b");
        assert_eq!(
            recs.iter().filter(|r| r.arm == "c").count(),
            20,
            "shard {k}/2 ran c on each of its 20 tasks"
        );
        shard_dirs.push(results.join(&id).to_str().unwrap().to_string());
    }
    let merged = results.join("merged");
    let out = output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_ablate")).args([
            "merge",
            "-o",
            merged.to_str().unwrap(),
            &shard_dirs[1],
            &shard_dirs[0],
        ]),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "the trials the shards' rules skipped are not missing: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_ablate")).args([
            "report",
            merged.to_str().unwrap(),
            "--no-color",
        ]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(key(&effects(&merged)), key(&e));
    // A shard killed before its rule is done is named as unfinished by merge.
    let cut = results.join("cut");
    copy_dir(&results.join("shard1"), &cut);
    let kept: Vec<String> = std::fs::read_to_string(cut.join("trials.jsonl"))
        .unwrap()
        .lines()
        .take(10)
        .map(String::from)
        .collect();
    std::fs::write(cut.join("trials.jsonl"), kept.join("\n") + "\n").unwrap();
    let out = output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_ablate")).args([
            "merge",
            "-o",
            results.join("m2").to_str().unwrap(),
            cut.to_str().unwrap(),
            &shard_dirs[1],
        ]),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("is incomplete"), "{stderr}");
}

/// Seconds since the epoch of a record's RFC 3339 time.
fn seconds(t: &str) -> f64 {
    let t = time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).unwrap();
    t.unix_timestamp_nanos() as f64 / 1e9
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_of_money_and_running_time_stop_the_trials_and_a_resume_counts_them_again() {
    let server =
        start(Arc::new(|path, body, _| meta(path).unwrap_or_else(|| scripted(body)))).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = std::fs::read_to_string(config(dir.path(), &server.url)).unwrap();
    let results = dir.path().join("results");
    let results_s = results.to_str().unwrap().to_string();
    let run = |name: &str, text: String, extra: &[&str]| {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        let mut args = vec![
            "run",
            path.to_str().unwrap(),
            "--results",
            &results_s,
            "--run-id",
            name,
            "--jobs",
            "1",
        ];
        args.extend_from_slice(extra);
        let out = output_within(&mut ablate(&args), Duration::from_secs(600));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };

    // Money: one call a trial (bare arms), 20 output tokens at $50,000 a million output tokens and
    // input free: $1.00 a trial by hand. A budget of $7 with one trial at a time: exactly 7 trials
    // start (the 7th spends it), of the 120 planned.
    let money = cfg
        .replace("design = \"sequential\"\n", "design = \"sequential\"\nmax_cost_usd = 7.0\n")
        .replace(
            "temperature = 0.0\n",
            "temperature = 0.0\nprice = { input_per_mtok = 0.0, output_per_mtok = 50000.0 }\n",
        );
    let stderr = run("money", money.clone(), &[]);
    assert!(stderr.contains("money budget spent: $7.0000 of $7"), "{stderr}");
    let recs = records(&results.join("money"));
    assert!(
        recs.iter().all(|r| r.cost_usd == Some(1.0)),
        "{:?}",
        recs.iter().map(|r| r.cost_usd).collect::<Vec<_>>()
    );
    assert_eq!(recs.len(), 7);
    // Tasks 1 and 2 of the order have all three arms' trials; the third has one: two tasks entered.
    let e = effects(&results.join("money"));
    for row in &e {
        assert_eq!(
            (row["n_tasks"].as_str(), row["decided_after_tasks"].as_str()),
            ("2", ""),
            "{row:?}"
        );
        assert!(row["verdict"].starts_with("undecided at budget"), "{row:?}");
    }
    let report = output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_ablate")).args([
            "report",
            results.join("money").to_str().unwrap(),
            "--no-color",
        ]),
        Duration::from_secs(60),
    );
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("money budget spent: $7.0000 of $7"), "{text}");
    // Resumed, the spend is counted again from the records: nothing starts.
    let path = dir.path().join("money.toml");
    let out = output_within(
        &mut ablate(&[
            "run",
            path.to_str().unwrap(),
            "--resume",
            results.join("money").to_str().unwrap(),
        ]),
        Duration::from_secs(600),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(records(&results.join("money")).len(), 7);

    // Running time: one trial at a time, so the spans do not overlap and their union is their sum.
    // The run stops at the first trial whose end brings the sum to 1.5 s: the trials before it sum
    // to less, all of them to at least that.
    let timed =
        cfg.replace("design = \"sequential\"\n", "design = \"sequential\"\nmax_seconds = 1.5\n");
    let stderr = run("timed", timed, &[]);
    assert!(stderr.contains("time budget spent: "), "{stderr}");
    let recs = records(&results.join("timed"));
    let spans: Vec<f64> =
        recs.iter().map(|r| seconds(&r.finished_at) - seconds(&r.started_at)).collect();
    let all: f64 = spans.iter().sum();
    let before: f64 = spans[..spans.len() - 1].iter().sum();
    println!(
        "time budget 1.5 s: {} trials, their spans summing to {before:.3} s before the last and {all:.3} s with it",
        recs.len()
    );
    assert!(
        recs.len() < 120 && before < 1.5 && all >= 1.5,
        "{} trials, spans {spans:?}",
        recs.len()
    );
    // A money budget in a fixed design, or on a model without prices, is refused by name.
    for (name, text, key) in [
        ("fixed", money.replace("design = \"sequential\"\n", ""), "experiment.max_cost_usd"),
        (
            "unpriced",
            money.replace("price = { input_per_mtok = 0.0, output_per_mtok = 50000.0 }\n", ""),
            "models[0].price",
        ),
    ] {
        let p = dir.path().join(format!("{name}.toml"));
        std::fs::write(&p, text).unwrap();
        let out = output_within(
            std::process::Command::new(env!("CARGO_BIN_EXE_ablate"))
                .args(["plan", p.to_str().unwrap()]),
            Duration::from_secs(60),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(key), "{stderr}");
    }
    // A shard's plan says how the budgets divide.
    let timed_path = dir.path().join("timed.toml");
    let out = output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_ablate")).args([
            "plan",
            timed_path.to_str().unwrap(),
            "--shard",
            "1/2",
        ]),
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "(at most: a sequential shard follows its own tasks of the order with 1/2 of max_trials and max_cost_usd, and max_seconds of its own running time)"
        ),
        "{stdout}"
    );
}

/// `ablate run CONFIG` into `results/RUN_ID` with `--jobs JOBS`, to its end: the run
/// folder and the command's output (asserted successful).
async fn run_to_end(
    config: &Path,
    results: &Path,
    run_id: &str,
    jobs: &str,
) -> (PathBuf, std::process::Output) {
    let (c, r) = (config.to_str().unwrap().to_string(), results.to_str().unwrap().to_string());
    let (id, j) = (run_id.to_string(), jobs.to_string());
    let out = tokio::task::spawn_blocking(move || {
        output_within(
            &mut ablate(&["run", &c, "--results", &r, "--run-id", &id, "--jobs", &j]),
            Duration::from_secs(600),
        )
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (results.join(run_id), out)
}

/// An outage cannot decide a sequential comparison. Arm c's first 12 trials each meet a provider
/// error (a 401 on every other request of c's, so each re-run succeeds): counted as failures
/// beside a's passes they would be 12 tasks of d = -1, "hurts" after 11 (by hand, above). Each
/// such trial is re-run (the default 2 re-runs), its first record kept, and a -> c reaches the
/// decision the clean run reaches: equivalent after 38 tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_re_run_and_decides_nothing() {
    let c_calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = start(Arc::new({
        let c_calls = c_calls.clone();
        move |path, body, _| {
            meta(path).unwrap_or_else(|| {
                let text = serde_json::to_string(&body["messages"]).unwrap();
                if text.contains("Arm C.") {
                    let n = c_calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if n < 24 && n.is_multiple_of(2) {
                        return Reply::status(401, "{\"error\":{\"message\":\"outage\"}}");
                    }
                }
                scripted(body)
            })
        }
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &server.url);
    let (run, out) = run_to_end(&cfg, &dir.path().join("results"), "outage", "1").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let recs = records(&run);
    let errors: Vec<_> = recs.iter().filter(|r| r.status.is_infrastructure_error()).collect();
    assert_eq!(errors.len(), 12, "every provider error is kept: {stderr}");
    for e in &errors {
        assert_eq!((e.arm.as_str(), e.attempt), ("c", 1));
        let again = recs.iter().find(|r| r.trial_id == e.trial_id && r.attempt == 2);
        assert!(again.is_some_and(|r| r.status.pass_value() == 1.0), "{} re-run", e.trial_id);
    }
    let e = effects(&run);
    let same = e.iter().find(|r| r["treatment"] == "c").unwrap();
    assert_eq!(
        (same["verdict"].as_str(), same["decided_after_tasks"].as_str()),
        ("equivalent within ±20 pp", "38"),
        "{same:?}"
    );
    assert_eq!(same["infra_errors_treatment"], "0", "the analysed attempts scored: {same:?}");
}

/// With every task in and the comparison open, the interval printed is still the sequence for
/// tasks like these; the suite's own mean as run is a separate, labelled description. a -> c
/// moves no task (d = 0 each, x = 1/2) and, with no margin, nothing can decide it, on any number
/// of tasks (12 here): after all of them the without-replacement sequence is the suite's mean
/// difference itself, [0, 0], while the sequence for tasks like these keeps a width (each
/// bettor's factors at m = 1/2 +- h are 1 - l h < 1 when x = 1/2: no candidate near 0 is ever
/// rejected).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_task_in_and_undecided_prints_the_inference_not_the_description() {
    let server =
        start(Arc::new(|path, body, _| meta(path).unwrap_or_else(|| scripted(body)))).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_on(dir.path(), &server.url, 12);
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("margin = 0.2\n", "")
        .replace("[[matrix.pairs]]\ncontrol = \"a\"\ntreatment = \"b\"\n", "");
    std::fs::write(&cfg, text).unwrap();
    let (run, out) = run_to_end(&cfg, &dir.path().join("results"), "open", "2").await;
    let e = effects(&run);
    let row = e.iter().find(|r| r["treatment"] == "c").unwrap();
    assert!(row["verdict"].starts_with("undecided with every task in"), "{row:?}");
    assert_eq!(
        (row["method"].as_str(), row["estimand"].as_str()),
        ("betting_cs", "tasks like these")
    );
    let (lo, hi): (f64, f64) = (row["lo"].parse().unwrap(), row["hi"].parse().unwrap());
    assert!(lo < -0.05 && hi > 0.05, "the sequence for tasks like these keeps its width: {row:?}");
    let (tlo, thi): (f64, f64) =
        (row["these_tasks_lo"].parse().unwrap(), row["these_tasks_hi"].parse().unwrap());
    assert!(tlo.abs() < 1e-9 && thi.abs() < 1e-9, "these tasks as run: the suite's mean: {row:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("these tasks as run, a description and not the inference"), "{stdout}");
}
