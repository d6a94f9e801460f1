//! One writer per run folder, folders that stay inside --results, and a
//! report that trusts only the plan: the real binary, run as a user would,
//! often two at once.

use crate::common;

use ablate::record::{Manifest, TrialRecord};
use common::*;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_ablate");

fn cmd(args: &[&str]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(BIN);
    c.args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// How long one `ablate` of these tests may take.
const LIMIT: Duration = Duration::from_secs(120);

/// The command is built at the call, so the future does not borrow `args`.
fn ablate(args: &[&str]) -> impl Future<Output = Output> + use<> {
    let mut c = cmd(args);
    async move { output_within_async(&mut c, LIMIT).await }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn manifest(dir: &Path) -> Manifest {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

fn records(dir: &Path) -> Vec<TrialRecord> {
    ablate::record::jsonl::read(&dir.join("trials.jsonl")).unwrap().records
}

/// Every planned trial of `dir` has exactly one final record, and every record is of this run.
fn assert_complete_once(dir: &Path) {
    let m = manifest(dir);
    assert_eq!(m.run_id, dir.file_name().unwrap().to_str().unwrap(), "run id is the folder name");
    let recs = records(dir);
    let mut finals: HashMap<&str, usize> = HashMap::new();
    for r in &recs {
        assert_eq!(r.run_id, m.run_id, "{}: a record of another run", dir.display());
        if r.status.is_final() {
            *finals.entry(r.trial_id.as_str()).or_default() += 1;
        }
    }
    assert_eq!(finals.len(), m.plan.len(), "{}: {finals:?}", dir.display());
    for t in &m.plan {
        assert_eq!(
            finals.get(t.id.as_str()),
            Some(&1),
            "{}: trial {} recorded once",
            dir.display(),
            t.id
        );
    }
}

/// Every path under `dir`, relative, with file sizes: a listing to compare.
fn listing(dir: &Path) -> BTreeSet<(PathBuf, u64)> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            out.insert((
                e.path().strip_prefix(dir).unwrap().to_path_buf(),
                if meta.is_dir() { 0 } else { meta.len() },
            ));
            if meta.is_dir() {
                stack.push(e.path());
            }
        }
    }
    out
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    v.sort();
    v
}

async fn openai_server(delay_ms: u64) -> Server {
    start(Arc::new(move |path, _b, _n| {
        meta(path)
            .unwrap_or_else(|| openai_text(RIGHT_ADD).delayed(Duration::from_millis(delay_ms)))
    }))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_started_together_get_two_folders_with_their_own_records() {
    let server = openai_server(100).await;
    let tmp = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, TWO_ARMS);
    cfg.trials = 2;
    let config = cfg.write(tmp.path());
    let results = tmp.path().join("results");
    let (c, r) = (config.to_str().unwrap(), results.to_str().unwrap());
    // Same config, same experiment name, same second: once plain, once as the two shards.
    let (a, b) = tokio::join!(
        ablate(&["run", c, "--results", r, "--plain", "-j", "2"]),
        ablate(&["run", c, "--results", r, "--plain", "-j", "2"])
    );
    assert!(a.status.success(), "{}", stderr(&a));
    assert!(b.status.success(), "{}", stderr(&b));
    let (s1, s2) = tokio::join!(
        ablate(&["run", c, "--results", r, "--plain", "--shard", "1/2"]),
        ablate(&["run", c, "--results", r, "--plain", "--shard", "2/2"])
    );
    assert!(s1.status.success() && s2.status.success(), "{}\n{}", stderr(&s1), stderr(&s2));

    let dirs = subdirs(&results);
    assert_eq!(dirs.len(), 4, "four runs, four folders: {dirs:?}");
    let mut planned = 0;
    for d in &dirs {
        assert!(d.file_name().unwrap().to_str().unwrap().contains("-t"), "{}", d.display());
        assert_complete_once(d);
        let m = manifest(d);
        let attempts =
            ablate::record::jsonl::read::<ablate::record::AttemptStart>(&d.join("attempts.jsonl"))
                .unwrap()
                .records;
        assert_eq!(attempts.len(), m.plan.len(), "{}: one attempt per trial", d.display());
        planned += m.plan.len();
    }
    assert_eq!(planned, 4 + 4 + 2 + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_resume_of_one_folder_is_refused_and_names_the_holder() {
    let server = openai_server(250).await;
    let tmp = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, TWO_ARMS);
    cfg.trials = 2;
    let config = cfg.write(tmp.path());
    let results = tmp.path().join("results");
    let (c, r) = (config.to_str().unwrap(), results.to_str().unwrap());
    let out = ablate(&["run", c, "--results", r, "--plain", "--run-id", "x"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = results.join("x");
    // Forget the records: every trial is pending again.
    std::fs::write(dir.join("trials.jsonl"), "").unwrap();
    std::fs::write(dir.join("attempts.jsonl"), "").unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join(".lock")).unwrap(),
        "",
        "a finished run names no holder"
    );

    let d = dir.to_str().unwrap();
    let first = cmd(&["run", c, "--resume", d, "--plain"]).kill_on_drop(true).spawn().unwrap();
    let second = cmd(&["run", c, "--resume", d, "--plain"]).kill_on_drop(true).spawn().unwrap();
    let pids = (first.id().unwrap(), second.id().unwrap());
    // Past the limit both futures are dropped, and with them (kill_on_drop) both runs.
    let (first, second) = within(LIMIT, "the two resumes", async {
        tokio::join!(first.wait_with_output(), second.wait_with_output())
    })
    .await;
    let (first, second) = (first.unwrap(), second.unwrap());
    let (winner, loser, winner_pid) = match (first.status.code(), second.status.code()) {
        (Some(0), Some(2)) => (&first, &second, pids.0),
        (Some(2), Some(0)) => (&second, &first, pids.1),
        codes => panic!(
            "one resume runs, the other is refused: {codes:?}\n{}\n{}",
            stderr(&first),
            stderr(&second)
        ),
    };
    let msg = stderr(loser);
    let host = ablate::record::lock::hostname();
    assert!(
        msg.contains(&format!("{d} is in use by pid {winner_pid} on host {host} since ")),
        "{msg}"
    );
    assert!(msg.contains("--resume"), "the holder's command line: {msg}");
    assert!(stderr(winner).contains("recorded in"), "{}", stderr(winner));
    assert_complete_once(&dir);
    assert_eq!(records(&dir).len(), 4, "no trial ran twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_experiment_name_with_dot_dot_stays_inside_results() {
    let server = openai_server(0).await;
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("a").join("b");
    std::fs::create_dir_all(&base).unwrap();
    let suite = fixture("tiny");
    let cfg = Cfg::new(&suite, "openai", &server.url, "[arms.a]\n");
    let config = cfg.write(&base);
    let text = std::fs::read_to_string(&config).unwrap().replacen(
        "name = \"t\"",
        "name = \"../../../esc\"",
        1,
    );
    std::fs::write(&config, text).unwrap();
    let results = base.join("results");
    // Take the first name of this second and the next few, so the run needs a suffix.
    let now = time::OffsetDateTime::now_utc();
    for s in 0..4 {
        let t = now + time::Duration::seconds(s);
        let stamp = format!(
            "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
            t.year(),
            t.month() as u8,
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        );
        std::fs::create_dir_all(results.join(ablate::record::folder::candidate(
            &stamp,
            "../../../esc",
            1,
        )))
        .unwrap();
    }
    let before = listing(tmp.path());
    let out = ablate(&run_args(&config, &results, &[])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let after = listing(tmp.path());
    let new: Vec<&PathBuf> =
        after.iter().map(|(p, _)| p).filter(|p| !before.iter().any(|(q, _)| q == *p)).collect();
    assert!(!new.is_empty());
    for p in &new {
        assert!(p.starts_with("a/b/results"), "{} is outside --results", p.display());
    }
    let made: Vec<PathBuf> =
        subdirs(&results).into_iter().filter(|d| d.join("manifest.json").is_file()).collect();
    assert_eq!(made.len(), 1, "{made:?}");
    let name = made[0].file_name().unwrap().to_str().unwrap();
    // `<stamp>-` then the name with each of `../../../` turned into `-`, then the suffix.
    assert!(
        name.ends_with(&format!("Z-{}esc-2", "-".repeat(9))),
        "a sanitised name with a suffix: {name}"
    );
    assert_complete_once(&made[0]);

    // --run-id must be a plain folder name.
    for bad in ["../x", "a/b", ".hidden", "..", "a\\b"] {
        let out = ablate(&[
            "run",
            config.to_str().unwrap(),
            "--results",
            results.to_str().unwrap(),
            "--run-id",
            bad,
        ])
        .await;
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(stderr(&out).contains("--run-id"), "{}", stderr(&out));
    }
    // A taken --run-id is refused, and nothing is written into it.
    let taken = made[0].file_name().unwrap().to_str().unwrap().to_string();
    let before = listing(&made[0]);
    let out = ablate(&[
        "run",
        config.to_str().unwrap(),
        "--results",
        results.to_str().unwrap(),
        "--run-id",
        &taken,
    ])
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("exists; continue it with --resume"), "{}", stderr(&out));
    assert_eq!(listing(&made[0]), before);
    assert_eq!(listing(tmp.path()), after, "nothing was created anywhere");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_outside_the_plan_are_refused_by_report_and_resume() {
    let server = openai_server(0).await;
    let tmp = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.a]\n");
    cfg.trials = 2;
    let config = cfg.write(tmp.path());
    let results = tmp.path().join("results");
    let out = ablate(&run_args(&config, &results, &["--run-id", "r"])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = results.join("r");
    let d = dir.to_str().unwrap();
    let out = ablate(&["report", d]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Foreign records: unknown trial ids, and a planned id under another arm.
    let recs = records(&dir);
    let mut extra = String::new();
    for i in 0..3 {
        let mut r = recs[0].clone();
        r.trial_id = format!("{:016x}", 0xdead_0000u64 + i);
        extra.push_str(&serde_json::to_string(&r).unwrap());
        extra.push('\n');
    }
    let mut r = recs[1].clone();
    r.arm = "b".into();
    extra.push_str(&serde_json::to_string(&r).unwrap());
    extra.push('\n');
    let mut f = std::fs::OpenOptions::new().append(true).open(dir.join("trials.jsonl")).unwrap();
    std::io::Write::write_all(&mut f, extra.as_bytes()).unwrap();
    drop(f);

    let before = listing(&dir);
    let out = ablate(&["report", d]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let msg = stderr(&out);
    assert!(
        msg.contains("trials.jsonl") && msg.contains("4 records are not in this run's plan"),
        "{msg}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).is_empty(), "no report printed");
    assert_eq!(listing(&dir), before, "the exports are left as they were, no temporary file");

    // gate and baseline read the same way.
    let out =
        ablate(&["baseline", "save", d, "-o", tmp.path().join("b.csv").to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("4 records are not in this run's plan"), "{}", stderr(&out));

    // A resume does not add to a folder that mixes runs.
    let out = ablate(&["run", config.to_str().unwrap(), "--resume", d, "--plain"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("4 records are not in this run's plan"), "{}", stderr(&out));
    assert_eq!(records(&dir).len(), recs.len() + 4);
}

#[test]
fn report_on_a_folder_without_a_manifest_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    // A task folder, say: a typo'd path must not change its digest.
    let dir = tmp.path().join("add-two");
    ablate::sandbox::copy_tree(&fixture("tiny").join("add-two"), &dir).unwrap();
    std::fs::write(dir.join("trials.jsonl"), "").unwrap();
    let before = listing(&dir);
    let out = output_within(
        std::process::Command::new(BIN).args(["report", dir.to_str().unwrap()]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let msg = stderr(&out);
    assert!(msg.contains(&format!("{} has no manifest.json", dir.display())), "{msg}");
    assert_eq!(listing(&dir), before, "nothing written");
    // A folder that does not exist is not created.
    let missing = tmp.path().join("nope");
    let out = output_within(
        std::process::Command::new(BIN).args(["report", missing.to_str().unwrap()]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(!missing.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_refuses_a_changed_model_unless_allowed() {
    let changed = Arc::new(AtomicBool::new(false));
    let flag = changed.clone();
    let server = start(Arc::new(move |path, _b, _n| match path {
        "/api/show" => {
            let digest =
                if flag.load(Ordering::SeqCst) { "sha256:beef" } else { "sha256:feedface" };
            Reply::json(serde_json::json!({"digest": digest, "details": {}}))
        }
        "/api/tags" => {
            Reply::json(serde_json::json!({"models": [{"name": "m:latest", "model": "m:latest"}]}))
        }
        _ => ollama_text(RIGHT_ADD),
    }))
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let cfg = Cfg::new(&suite, "ollama", &server.url, "[arms.a]\n");
    let config = cfg.write(tmp.path());
    let results = tmp.path().join("results");
    let (c, r) = (config.to_str().unwrap(), results.to_str().unwrap());
    let out = ablate(&["run", c, "--results", r, "--plain", "--run-id", "m"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = results.join("m");
    assert_eq!(manifest(&dir).models[0].identity.as_deref(), Some("ollama-digest:sha256:feedface"));
    std::fs::write(dir.join("trials.jsonl"), "").unwrap();
    std::fs::write(dir.join("attempts.jsonl"), "").unwrap();
    let d = dir.to_str().unwrap();

    // Same model: resumes.
    let out = ablate(&["run", c, "--resume", d, "--plain"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(records(&dir).len(), 1);
    std::fs::write(dir.join("trials.jsonl"), "").unwrap();
    std::fs::write(dir.join("attempts.jsonl"), "").unwrap();

    changed.store(true, Ordering::SeqCst);
    let before = listing(&dir);
    let out = ablate(&["run", c, "--resume", d, "--plain"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let msg = stderr(&out);
    assert!(
        msg.contains("model `m`")
            && msg.contains("ollama-digest:sha256:feedface")
            && msg.contains("ollama-digest:sha256:beef"),
        "{msg}"
    );
    assert!(msg.contains("--allow-model-change"), "{msg}");
    assert_eq!(listing(&dir), before, "no trial ran");

    let out = ablate(&["run", c, "--resume", d, "--plain", "--allow-model-change"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("warning: model `m`"), "{}", stderr(&out));
    assert_complete_once(&dir);
}

#[test]
fn report_on_a_folder_in_use_prints_without_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/core.toml");
    let mut exp = ablate::experiment::config::load(&cfg).unwrap();
    exp.trials = 2;
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let run = tmp.path().join("run");
    ablate_synth::write_run(&run, &exp, &suite, &plan, 1, |_, _| 0.5).unwrap();
    let held = ablate::record::lock::RunLock::acquire(&run).unwrap();
    let before = listing(&run);
    let out = output_within(
        std::process::Command::new(BIN)
            .args(["report", run.to_str().unwrap()])
            .env("NO_COLOR", "1"),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let printed = out.stdout.clone();
    let msg = stderr(&out);
    assert!(
        msg.contains(&format!("is in use by pid {}", std::process::id()))
            && msg.contains("not written"),
        "{msg}"
    );
    assert_eq!(listing(&run), before, "no export written while another process holds the folder");
    drop(held);
    let out = output_within(
        std::process::Command::new(BIN)
            .args(["report", run.to_str().unwrap()])
            .env("NO_COLOR", "1"),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&printed),
        String::from_utf8_lossy(&out.stdout),
        "the report printed while held is the one written after"
    );
    // configs/core.toml's 4 tasks x 7 arms x 2 trials, every one recorded.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    assert_eq!(
        (json["planned_trials"].as_u64(), json["recorded_trials"].as_u64()),
        (Some(4 * 7 * 2), Some(4 * 7 * 2))
    );
    assert_eq!(json["arms"].as_array().unwrap().len(), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_is_recorded_and_resume_does_not_mix_it() {
    let server =
        start(Arc::new(|path, _b, _n| meta(path).unwrap_or_else(|| openai_text(RIGHT_ADD)))).await;
    let tmp = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.a]\n");
    cfg.trials = 2;
    let config = cfg.write(tmp.path());
    let results = tmp.path().join("results");
    let (c, r) = (config.to_str().unwrap(), results.to_str().unwrap());
    // Without bubblewrap, and opted in: recorded as none.
    let mut run = cmd(&["run", c, "--results", r, "--plain", "--run-id", "u", "--unsandboxed"]);
    let out = output_within_async(run.env("ABLATE_BWRAP", "/nonexistent/bwrap"), LIMIT).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("WITHOUT a sandbox"), "{}", stderr(&out));
    let dir = results.join("u");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["host"]["isolation"]["kind"], "none");
    // Resumed with the sandbox: refused, naming the key.
    let out = ablate(&["run", c, "--resume", dir.to_str().unwrap(), "--plain"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("key `host.isolation`") && stderr(&out).contains("isolation none"),
        "{}",
        stderr(&out)
    );
    // With the sandbox: recorded as bubblewrap.
    let out = ablate(&["run", c, "--results", r, "--plain", "--run-id", "b"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("b/manifest.json")).unwrap())
            .unwrap();
    assert_eq!(m["host"]["isolation"]["kind"], "bubblewrap");
}
