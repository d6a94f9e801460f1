//! External harnesses end to end: a probe harness (tests/fixtures/harnesses/probe)
//! runs in the sandbox, its model calls go through the trial's gateway to a
//! scripted model server, and the workspace is graded as for builtin trials.

use crate::common;

use ablate::record::{BudgetLimit, EndReason, TrialRecord, TrialStatus};
use common::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MODES: [&str; 8] =
    ["echo", "stream", "greedy", "late", "settings", "direct", "crash", "hang"];

fn harness_toml(url: &str) -> String {
    let probe = fixture_dir().join("harnesses/probe");
    format!(
        "[harness]\nkind = \"external\"\ncommand = [\"python3\", \"{{harness}}/probe.py\", \"{url}\"]\nfiles = [\"{}\"]\ncomponents.mode = [{}]\ncomponents.color = [\"red\", \"blue\"]\n",
        probe.display(),
        MODES.iter().map(|m| format!("\"{m}\"")).collect::<Vec<_>>().join(", ")
    )
}

fn fixture_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn record<'a>(records: &'a [TrialRecord], arm: &str) -> &'a TrialRecord {
    records.iter().find(|r| r.arm == arm).unwrap_or_else(|| panic!("no record of arm {arm}"))
}

fn chats_with(server: &Server, needle: &str) -> Vec<serde_json::Value> {
    server
        .chats
        .lock()
        .unwrap()
        .iter()
        .filter(|b| b.to_string().contains(needle))
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_harness_is_metered_graded_and_contained() {
    let server =
        start(Arc::new(|path, _b, _n| meta(path).unwrap_or_else(|| openai_text(RIGHT_ADD)))).await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let top = harness_toml(&server.url);
    let mut arms = String::new();
    for m in MODES {
        arms.push_str(&format!("[arms.{m}]\nmode = \"{m}\"\n"));
    }
    arms.push_str("[arms.echo-blue]\nmode = \"echo\"\ncolor = \"blue\"\n[[matrix.pairs]]\ncontrol = \"echo\"\ntreatment = \"echo-blue\"\n");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, &arms);
    cfg.top_extra = &top;
    cfg.max_steps = 3;
    cfg.max_working_seconds = 4.0;
    let config = cfg.write(dir.path());
    let start_time = Instant::now();
    let summary = run(&config, &dir.path().join("results")).await;
    let rs = &summary.records;
    assert_eq!(rs.len(), 9);

    // Components reach the harness and change what it sends; its edit is graded.
    for (arm, color) in [("echo", "red"), ("echo-blue", "blue")] {
        let r = record(rs, arm);
        assert_eq!(r.status, TrialStatus::Passed, "{arm}: {r:?}");
        assert_eq!(r.end_reason, EndReason::CommandExited);
        assert_eq!(r.harness_command.as_ref().unwrap().exit_code, Some(0));
        assert_eq!(
            (r.steps, r.tokens.output),
            (1, 20),
            "one call of 20 output tokens (the scripted usage)"
        );
        assert_eq!(
            r.system_fingerprints,
            vec!["fp_test".to_string()],
            "the gateway keeps the fingerprint of the reply it passed on"
        );
        assert_eq!(chats_with(&server, &format!("mode=echo color={color}")).len(), 1);
        let trace = traces(&summary.dir, &r.trial_id);
        assert_eq!(trace.len(), 1);
        assert!(
            trace[0].request.to_string().contains(&format!("color={color}")),
            "{:?}",
            trace[0].request
        );
    }
    // Streaming is answered and traced the same way.
    let r = record(rs, "stream");
    assert_eq!(r.status, TrialStatus::Passed, "{r:?}");
    let trace = traces(&summary.dir, &r.trial_id);
    assert!(trace[0].notes.contains(&"streamed (sse)".to_string()), "{:?}", trace[0].notes);

    // A greedy harness is stopped at max_steps: exactly 3 calls reached the model.
    let r = record(rs, "greedy");
    assert_eq!(r.status, TrialStatus::BudgetExhausted, "{r:?}");
    assert_eq!(r.end_reason, EndReason::Budget { limit: BudgetLimit::Steps });
    assert_eq!(chats_with(&server, "mode=greedy").len(), 3);
    assert_eq!(r.steps, 3);
    assert_eq!(r.harness_command.as_ref().unwrap().stopped_by.as_deref(), Some("budget: steps"));
    // The fourth call was refused (and traced), which stopped the harness.
    let trace = traces(&summary.dir, &r.trial_id);
    assert_eq!(trace.len(), 4);
    assert!(trace[3].error.as_deref().unwrap_or("").contains("steps"), "{:?}", trace[3].error);

    // A harness whose workspace passes when its budget is spent is budget_exhausted all the same
    // (the final state recorded beside it), and it had its grace to write its log: it exited by itself.
    let r = record(rs, "late");
    assert_eq!((r.status, r.graded_pass), (TrialStatus::BudgetExhausted, Some(true)), "{r:?}");
    let cmd = r.harness_command.as_ref().unwrap();
    assert_eq!((cmd.exit_code, cmd.stdout_tail.trim()), (Some(0), "WROTE 429"), "{cmd:?}");
    assert!(cmd.first_model_call_seconds.is_some_and(|s| s < 4.0), "{cmd:?}");

    // Asked temperature 1.5 and 10,000 tokens: the model got the experiment's.
    let sent = chats_with(&server, "mode=settings");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["temperature"], 0.0);
    assert_eq!(sent[0]["max_tokens"], 200);
    let r = record(rs, "settings");
    let notes = traces(&summary.dir, &r.trial_id)[0].notes.join(" ");
    assert!(
        notes.contains("temperature") && notes.contains("1.5") && notes.contains("10000"),
        "{notes}"
    );

    // The upstream URL is not reachable from the sandbox.
    let r = record(rs, "direct");
    let out = &r.harness_command.as_ref().unwrap().stdout_tail;
    assert!(out.contains("DIRECT ") && !out.contains("CONNECTED"), "{out}");
    assert!(chats_with(&server, "mode=direct").is_empty());

    // A crash is the arm's outcome, graded as usual.
    let r = record(rs, "crash");
    assert_eq!(r.status, TrialStatus::Failed, "{r:?}");
    assert_eq!(r.harness_command.as_ref().unwrap().exit_code, Some(3));

    // A hang (with a daemon and a forked child) is stopped at the working time, and nothing is left.
    let r = record(rs, "hang");
    assert_eq!(r.status, TrialStatus::Timeout, "{r:?}");
    assert_eq!(r.end_reason, EndReason::Budget { limit: BudgetLimit::WorkingSeconds });
    assert_eq!(
        r.harness_command.as_ref().unwrap().stopped_by.as_deref(),
        Some("budget: working_seconds")
    );
    assert!(r.working_seconds >= 4.0 && r.working_seconds < 8.0, "{}", r.working_seconds);
    assert!(sandbox_processes().is_empty(), "{:?}", sandbox_processes());
    assert!(start_time.elapsed() < Duration::from_secs(60));

    // The manifest records the harness, its files' digest and the declared components.
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(summary.dir.join("manifest.json")).unwrap())
            .unwrap();
    let h = &m["experiment"]["harness_kind"];
    let probe = fixture_dir().join("harnesses/probe");
    assert_eq!(
        (&h["kind"], &h["files"]),
        (&serde_json::json!("external"), &serde_json::json!([probe.display().to_string()])),
        "{h}"
    );
    // The files' digest as its definition gives it, with the sha2 crate: sha256 over "<file>\0<digest>\n"
    // per listed file, a folder's digest being sha256 over "<path>\0<sha256 of its bytes>\n" per file in it.
    let sha = |b: &[u8]| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b));
    let folder =
        sha(format!("probe.py\0{}\n", sha(&std::fs::read(probe.join("probe.py")).unwrap()))
            .as_bytes());
    assert_eq!(
        h["files_digest"],
        serde_json::json!(sha(format!("{}\0{folder}\n", probe.display()).as_bytes())),
        "{h}"
    );
    let components: Vec<(String, serde_json::Value)> = h["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["values"].clone()))
        .collect();
    assert_eq!(
        components,
        [
            ("mode".to_string(), serde_json::json!(MODES)),
            ("color".to_string(), serde_json::json!(["red", "blue"]))
        ],
        "{h}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_harness_python_and_mounts_anywhere_are_shown_in_the_sandbox() {
    // A venv under the host's /tmp (which the jail replaces by its own) with a package of the
    // harness's, and a data folder beside it: both reach the command, read-only.
    let server =
        start(Arc::new(|path, _b, _n| meta(path).unwrap_or_else(|| openai_text(RIGHT_ADD)))).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    let venv = dir.path().join("venv");
    let made = output_within(
        std::process::Command::new("/usr/bin/python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv),
        Duration::from_secs(60),
    );
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let site = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("site-packages");
    std::fs::write(site.join("harnessdep.py"), "VALUE = 42\n").unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("hint.txt"), "use +\n").unwrap();
    let agent = dir.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.py"),
        format!(
            "import harnessdep, sys\nprint('DEP', harnessdep.VALUE, sys.prefix == {venv:?}, open({hint:?}).read().strip())\n\
             open('add.py', 'w').write('def add(a, b):\\n    return a + b\\n')\n\
             try:\n    open({hint:?}, 'w')\nexcept OSError as e:\n    print('READONLY', type(e).__name__)\n",
            venv = venv.display().to_string(),
            hint = data.join("hint.txt").display().to_string()
        ),
    )
    .unwrap();
    let harness = format!(
        "[harness]\nkind = \"external\"\ncommand = [\"python3\", \"{{harness}}/agent.py\"]\nfiles = [\"{}\"]\npython = \"{}\"\nmounts = [\"{}\"]\ncomponents.x = [true, false]\n",
        agent.display(),
        venv.join("bin/python").display(),
        data.display()
    );
    let ran = run_harness(dir.path(), &server.url, &harness).await;
    let r = &ran.records[0];
    let cmd = r.harness_command.as_ref().unwrap();
    assert_eq!(r.status, TrialStatus::Passed, "{r:?}");
    assert_eq!(cmd.stdout_tail.trim(), "DEP 42 True use +\nREADONLY OSError", "{cmd:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_that_reserves_more_address_space_than_memory_runs_and_memory_mb_bounds_it() {
    if !ablate::sandbox::isolation::is_root() {
        eprintln!("SKIPPED: the jail's memory cgroup needs root");
        return;
    }
    let server =
        start(Arc::new(|path, _b, _n| meta(path).unwrap_or_else(|| openai_text("x")))).await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let harness = fixture_dir().join("harnesses/memory");
    // 8 GiB reserved, untouched: Bun's shape. 256 MiB touched under memory_mb = 128: too much.
    let top = format!(
        "[harness]\nkind = \"external\"\ncommand = [\"python3\", \"{{harness}}/agent.py\"]\nfiles = [\"{}\"]\nmemory_mb = 128\ncomponents.reserve_gb = [8, 1]\ncomponents.touch_mb = [0, 256]\n",
        harness.display()
    );
    let arms = "[arms.reserve]\n[arms.touch]\nreserve_gb = 1\ntouch_mb = 256\n";
    let mut cfg = Cfg::new(&suite, "openai", &server.url, arms);
    cfg.top_extra = &top;
    let ran = run(&cfg.write(dir.path()), &dir.path().join("results")).await;
    let out = |arm: &str| {
        let c = record(&ran.records, arm).harness_command.clone().unwrap();
        (c.exit_code, c.stdout_tail)
    };
    // Under the old 4 GiB address-space limit the reservation failed (exit 2).
    let (code, stdout) = out("reserve");
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("RESERVED 8 GiB") && stdout.contains("TOUCHED 0 MiB"), "{stdout}");
    // Touching more than memory_mb is stopped by the jail's memory cgroup.
    let (code, stdout) = out("touch");
    assert_ne!(code, Some(0), "{stdout}");
    assert!(!stdout.contains("TOUCHED"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_or_mounts_for_a_command_in_the_tasks_container_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let suite = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/terminal");
    let harness = fixture_dir().join("harnesses/probe");
    for (key, line) in [
        ("harness.mounts", format!("mounts = [\"{}\"]", harness.display())),
        ("harness.python", "python = \"/usr/bin/python3\"".to_string()),
    ] {
        // runs_in = "container" (the default): the command runs in the task's own container.
        let top = format!(
            "[harness]\nkind = \"external\"\ncommand = [\"python3\", \"{{harness}}/probe.py\"]\nfiles = [\"{}\"]\n{line}\ncomponents.mode = [\"echo\", \"late\"]\n",
            harness.display()
        );
        let mut cfg = Cfg::new(&suite, "openai", "http://127.0.0.1:9", "[arms.a]\n");
        cfg.tasks = &["hello-file"];
        cfg.top_extra = &top;
        let err =
            try_run(&cfg.write(dir.path()), &dir.path().join("results"), 1).await.unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(key) && msg.contains("runs_in"), "{msg}");
    }
}
