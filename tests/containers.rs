//! Container (Harbor) tasks end to end against a scripted model server: the
//! builtin loop works through the shell of the trial's container, the task's
//! verifier grades what it left, and nothing of the trial outlives it. These
//! tests need a container engine (scripts/install-deps.sh installs podman):
//! they fail, not skip, where none answers.

mod common;

use ablate::record::{TrialRecord, TrialStatus};
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// One container trial at a time: they share the engine and the machine's two cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn terminal_suite(dir: &Path, tasks: &[&str]) -> PathBuf {
    let suite = dir.join("terminal");
    std::fs::create_dir_all(&suite).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/terminal");
    std::fs::copy(src.join("suite.toml"), suite.join("suite.toml")).unwrap();
    for t in tasks {
        ablate::sandbox::copy_tree(&src.join(t), &suite.join(t)).unwrap();
        // copy_tree keeps no modes: the scripts are run with bash, as Harbor runs them.
    }
    suite
}

/// Replies in order, then DONE forever.
fn script(replies: Vec<String>) -> Handler {
    Arc::new(move |path, _body, n| {
        meta(path)
            .unwrap_or_else(|| openai_text(replies.get(n).map(String::as_str).unwrap_or("DONE")))
    })
}

fn engine_ready() -> &'static ablate::container::Engine {
    ablate::container::init(None)
        .unwrap_or_else(|e| panic!("a container engine is required for these tests: {e}"))
}

/// Containers of this test's trial still on the machine.
fn containers_of(trial: &str) -> Vec<String> {
    let e = engine_ready();
    let out = std::process::Command::new(&e.program)
        .args([
            "ps",
            "-a",
            "--filter",
            &format!("label=ablate.trial={trial}"),
            "--format",
            "{{.Names}}",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

async fn run_terminal(
    dir: &Path,
    task: &str,
    replies: Vec<String>,
    arms: &str,
    max_seconds: f64,
) -> (Ran, TrialRecord) {
    engine_ready();
    let server = start(script(replies)).await;
    let suite = terminal_suite(dir, &[task]);
    let tasks = [task];
    let mut cfg = Cfg::new(&suite, "openai", &server.url, arms);
    cfg.tasks = &tasks;
    cfg.max_steps = 6;
    cfg.max_working_seconds = max_seconds;
    let config = cfg.write(dir);
    let ran = run(&config, &dir.join("results")).await;
    let rec = ran.records[0].clone();
    assert!(
        containers_of(&rec.trial_id).is_empty(),
        "containers left: {:?}",
        containers_of(&rec.trial_id)
    );
    (ran, rec)
}

/// One trial of hello-file in the bare arm whose model runs `script` in one shell block.
async fn hello_running(dir: &Path, script: &str) -> TrialRecord {
    let replies = vec![format!("```bash\n{script}\n```")];
    run_terminal(dir, "hello-file", replies, "[arms.bare]\n", 60.0).await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_solves_the_task_through_the_shell_passes() {
    let _g = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (ran, rec) = run_terminal(
        dir.path(),
        "hello-file",
        vec!["```bash\necho 'Hello, world!' > hello.txt\n```".into(), "DONE".into()],
        "[arms.bare]\n",
        60.0,
    )
    .await;
    assert_eq!(rec.status, TrialStatus::Passed, "{rec:?}");
    let v = rec.grade.as_ref().unwrap().verifier.as_ref().unwrap();
    assert_eq!(
        (v.reward, v.reward_file.as_deref(), v.mode.as_str()),
        (Some(1.0), Some("reward.txt"), "shared")
    );
    assert_eq!(rec.graded_pass, Some(true));
    // The command and its result are in the trace.
    let steps = traces(&ran.dir, &rec.trial_id);
    assert_eq!(steps[0].tool_calls[0].name, "shell");
    assert_eq!(steps[0].tool_calls[0].result, "exit: 0", "the bare arm shows no output");
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(ran.dir.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(m["containers"]["images"][0]["task"], "hello-file");
    assert_eq!(m["containers"]["reward_threshold"], 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arms_resources_are_the_limits_its_containers_get() {
    let _g = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    // The task is solved only where the container's memory limit is the arm's 300 MB (cgroup v2
    // or v1), which the task (512 MB) and the suite would not give; and its cpu quota the arm's.
    let check = "m=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes); \
        q=$(cut -d' ' -f1 /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us); \
        test \"$m\" = 314572800 && test \"$q\" = 50000 && echo 'Hello, world!' > hello.txt";
    let (_, rec) = run_terminal(
        dir.path(),
        "hello-file",
        vec![format!("```bash\n{check}\n```"), "DONE".into()],
        "[arms.bare]\nresources = { cpus = 0.5, memory_mb = 300 }\n",
        60.0,
    )
    .await;
    assert_eq!(rec.status, TrialStatus::Passed, "{rec:?}");
    let c = rec.container.as_ref().expect("a container trial records its run");
    assert_eq!((c.cpus, c.memory_mb, c.storage_mb), (0.5, 300, None), "disk is not limited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trial_that_runs_out_of_time_is_a_timeout_whatever_its_reward() {
    let _g = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    // The right file, then a command that outlives the 4 s of working time.
    let replies = vec![
        "```bash\necho 'Hello, world!' > hello.txt\n```".to_string(),
        "```bash\nsleep 60\n```".to_string(),
    ];
    let (ran, rec) = run_terminal(dir.path(), "hello-file", replies, "[arms.bare]\n", 4.0).await;
    assert_eq!(rec.status, TrialStatus::Timeout, "{rec:?}");
    assert_eq!(
        rec.end_reason,
        ablate::record::EndReason::Budget { limit: ablate::record::BudgetLimit::WorkingSeconds }
    );
    // The verifier still ran; its reward is recorded, and the state passes.
    let v = rec.grade.as_ref().unwrap().verifier.as_ref().unwrap();
    assert_eq!((v.reward, v.passed, rec.graded_pass), (Some(1.0), true, Some(true)));
    assert!(
        rec.working_seconds < 20.0,
        "the command was stopped at the working time: {}",
        rec.working_seconds
    );
    // The report's two pass rates differ by exactly that trial: 0 of 1 and 1 of 1.
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(ran.dir.join("report.json")).unwrap())
            .unwrap();
    let arm = &report["arms"][0];
    assert_eq!(
        (arm["pass_rate"]["mean"].as_f64(), arm["pass_rate_final_state"]["mean"].as_f64()),
        (Some(0.0), Some(1.0)),
        "{arm}"
    );
    assert_eq!(arm["stopped_but_passing"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_left_without_a_reward_is_a_grader_error_and_a_deleted_log_folder_is_made_again()
{
    let _g = SERIAL.lock().await;
    // /logs/verifier deleted and made unwritable: the verifier gets a fresh one all the same.
    let dir = tempfile::tempdir().unwrap();
    let replies = vec!["```bash\necho 'Hello, world!' > hello.txt && rm -rf /logs/verifier && touch /logs/verifier && chmod 000 /logs\n```".to_string()];
    let (_, rec) = run_terminal(dir.path(), "hello-file", replies, "[arms.bare]\n", 60.0).await;
    assert_eq!(rec.status, TrialStatus::Passed, "{rec:?}");
    // bash removed: test.sh cannot run, so no reward is written. Harbor would count a 0.
    let dir = tempfile::tempdir().unwrap();
    let replies = vec![
        "```bash\necho 'Hello, world!' > hello.txt; rm -f /usr/bin/bash /bin/bash\n```".to_string(),
    ];
    let (_, rec) = run_terminal(dir.path(), "hello-file", replies, "[arms.bare]\n", 60.0).await;
    assert_eq!(rec.status, TrialStatus::GraderError, "{rec:?}");
    let v = rec.grade.as_ref().unwrap().verifier.as_ref().unwrap();
    assert_eq!(v.reward, None);
    assert!(v.error.as_deref().unwrap().contains("wrote no reward"), "{v:?}");
    assert!(rec.error.as_deref().unwrap().starts_with("verifier: "), "{:?}", rec.error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reward_written_by_the_agent_does_not_count() {
    let _g = SERIAL.lock().await;
    // The task left undone; a reward of 1 written where the verifier writes, and a process that
    // keeps writing it while the verifier would run (Harbor's verifier reads the agent's folder).
    let dir = tempfile::tempdir().unwrap();
    let forge = "mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; echo '{\"reward\": 1}' > /logs/verifier/reward.json; \
                 nohup sh -c 'while :; do echo 1 > /logs/verifier/reward.txt; sleep 0.05; done' >/dev/null 2>&1 &";
    let (_, rec) = run_terminal(
        dir.path(),
        "hello-file",
        vec![format!("```bash\n{forge}\n```")],
        "[arms.bare]\n",
        60.0,
    )
    .await;
    assert_eq!(rec.status, TrialStatus::Failed, "{rec:?}");
    let v = rec.grade.as_ref().unwrap().verifier.as_ref().unwrap();
    assert_eq!(
        (v.reward, v.reward_file.as_deref(), rec.graded_pass),
        (Some(0.0), Some("reward.txt"), Some(false)),
        "{v:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_process_ends_with_its_trial_and_no_container_is_left() {
    let _g = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    // A duration no other program on the machine is likely to sleep.
    let replies = vec!["```bash\n(setsid sleep 613.27 &) ; nohup sleep 613.27 >/dev/null 2>&1 & echo 'Hello, world!' > hello.txt\n```".to_string()];
    let (_, rec) = run_terminal(dir.path(), "hello-file", replies, "[arms.bare]\n", 60.0).await;
    assert_eq!(rec.status, TrialStatus::Passed, "{rec:?}");
    // run_terminal asserts that no container of the trial is left; no sleeper of it runs on the host.
    let sleepers =
        std::process::Command::new("pgrep").args(["-f", "^sleep 613.27$"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&sleepers.stdout).trim().is_empty() || !sleepers.status.success(),
        "a sleeper outlived the trial"
    );
}

/// One trial of hello-file with the external harness `fixture` (tests/fixtures/harnesses),
/// its `script` run with `args` (a TOML list's items), `extra` lines in `[harness]`.
async fn run_external(
    dir: &Path,
    server: &Server,
    fixture: &str,
    script: &str,
    args: &str,
    extra: &str,
) -> Ran {
    engine_ready();
    let suite = terminal_suite(dir, &["hello-file"]);
    let files =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/harnesses").join(fixture);
    let args = if args.is_empty() { String::new() } else { format!(", {args}") };
    let harness = format!(
        "[harness]\nkind = \"external\"\n{extra}command = [\"python3\", \"{{harness}}/{script}\"{args}]\nfiles = [\"{}\"]\ncomponents.mode = [\"a\", \"b\"]\n",
        files.display()
    );
    let tasks = ["hello-file"];
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.a]\nmode = \"a\"\n");
    cfg.tasks = &tasks;
    cfg.top_extra = &harness;
    let config = cfg.write(dir);
    run(&config, &dir.join("results")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_harness_in_the_container_reaches_the_gateway_and_nothing_else() {
    let _g = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = start(script(vec!["Hello, world!".into()])).await;
    let ran = run_external(
        dir.path(),
        &server,
        "container-probe",
        "probe.py",
        &format!("\"{}\"", server.url),
        "",
    )
    .await;
    let rec = &ran.records[0];
    assert!(
        containers_of(&rec.trial_id).is_empty(),
        "containers left: {:?}",
        containers_of(&rec.trial_id)
    );
    // The harness wrote the model's answer, which passes the task.
    assert_eq!(rec.status, TrialStatus::Passed, "{rec:?}");
    let out = &rec.harness_command.as_ref().unwrap().stdout_tail;
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("PROBE "))
        .unwrap_or_else(|| panic!("no probe line in {out}"));
    let seen: Value = serde_json::from_str(line).unwrap();
    // The gateway answered, with the budget left after its one call (max_steps 4, less 1).
    assert_eq!(
        (seen["gateway"].as_str(), seen["remaining_steps"].as_str()),
        (Some("ANSWERED"), Some("3")),
        "{seen}"
    );
    // Neither the model server on the host's loopback nor the outside: a container of its own with
    // nothing but a loopback.
    assert_eq!(
        (seen["upstream"].as_str(), seen["outside"].as_str()),
        (Some("ConnectionRefusedError"), Some("OSError")),
        "{seen}"
    );
    assert_eq!(seen["interfaces"], serde_json::json!(["lo"]), "{seen}");
    assert_eq!(seen["workdir"], "/app");
    assert_eq!(
        server.chats.lock().unwrap().len(),
        1,
        "one call reached the model, through the gateway"
    );
    assert_eq!(rec.steps, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_harness_on_the_host_reaches_the_container_only_through_the_exec_endpoint() {
    let _g = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = start(script(vec!["Hello, world!".into()])).await;
    let ran =
        run_external(dir.path(), &server, "container-host", "agent.py", "", "runs_in = \"host\"\n")
            .await;
    let rec = &ran.records[0];
    assert!(
        containers_of(&rec.trial_id).is_empty(),
        "containers left: {:?}",
        containers_of(&rec.trial_id)
    );
    let out = &rec.harness_command.as_ref().unwrap().stdout_tail;
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("PROBE "))
        .unwrap_or_else(|| panic!("no probe line in {out}\n{rec:?}"));
    let seen: Value = serde_json::from_str(line).unwrap();
    eprintln!("the harness on the host saw: {seen}");
    // Commands run in the task's working folder, as its agent user (root in this image), and the
    // tests and the solution are not there before the verifier.
    assert_eq!(seen["where"], serde_json::json!([200, 0, ["/app", "0"], "err\n"]), "{seen}");
    assert_eq!(seen["where_hidden"], true, "{seen}");
    assert_eq!(seen["remaining_seconds_header"], true, "{seen}");
    assert_eq!(seen["write"], serde_json::json!([200, 0]), "{seen}");
    // A command past its timeout is stopped: no exit code, timed out.
    assert_eq!(seen["timeout"], serde_json::json!([200, null, true]), "{seen}");
    assert_eq!(
        (seen["wrong_key"].as_u64(), seen["unknown_key"].as_u64(), seen["not_a_string"].as_u64()),
        (Some(401), Some(400), Some(400)),
        "{seen}"
    );
    // No socket of the engine, and the engine's command in the jail does not see the trial's container.
    assert_eq!(seen["sockets"], serde_json::json!([]), "{seen}");
    assert_ne!(seen["engine_sees_trial"], true, "{seen}");
    // The harness's own folder holds nothing of the task.
    assert_eq!(seen["local_files"], serde_json::json!([]), "{seen}");
    // The file written through the endpoint passes the task.
    assert_eq!(rec.status, TrialStatus::Passed, "{rec:?}");
    // One model call; the exec calls traced as lines of their own (the three that were run and the
    // two refused as malformed), and the one with a wrong key as a refused request.
    assert_eq!(rec.steps, 1);
    let trace =
        std::fs::read_to_string(ran.dir.join("traces").join(format!("{}.jsonl", rec.trial_id)))
            .unwrap();
    let lines: Vec<Value> = trace.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let execs: Vec<&Value> = lines
        .iter()
        .filter(|l| l["notes"].get(0).and_then(Value::as_str) == Some("exec"))
        .collect();
    assert_eq!((lines.len(), execs.len()), (7, 5), "{trace}");
    assert_eq!(
        lines.iter().filter(|l| l["notes"][0] == "refused: POST /ablate/v1/exec").count(),
        1,
        "{trace}"
    );
    assert_eq!(rec.harness_command.as_ref().unwrap().exec_calls, 5);
    assert_eq!(execs[1]["request"]["exec"]["command"], "cat > hello.txt");
    assert!(
        execs[3]["error"].as_str().is_some_and(|e| e.contains("unknown field `user`")),
        "{}",
        execs[3]
    );
    assert_eq!(execs[2]["reply"]["timed_out"], true, "{}", execs[2]);
}

/// Containers on the machine whose trial id is one of the run's.
fn containers_of_run(run_dir: &Path) -> Vec<String> {
    let ids: Vec<String> = ablate::record::jsonl::read::<ablate::record::AttemptStart>(
        &run_dir.join("attempts.jsonl"),
    )
    .map(|r| r.records.into_iter().map(|a| a.trial_id).collect())
    .unwrap_or_default();
    ids.iter().flat_map(|id| containers_of(id)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_container_trial_then_resume_leaves_one_record_each_and_no_container() {
    let _g = SERIAL.lock().await;
    engine_ready();
    let dir = tempfile::tempdir().unwrap();
    // The first attempt's agent sleeps in its container; after the kill, the model solves the task.
    let healed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = healed.clone();
    let server = start(Arc::new(move |path, _b, _n| {
        meta(path).unwrap_or_else(|| {
            if flag.load(std::sync::atomic::Ordering::SeqCst) {
                openai_text("```bash\necho 'Hello, world!' > hello.txt\n```\nDONE")
            } else {
                openai_text("```bash\nsleep 300\n```")
            }
        })
    }))
    .await;
    let suite = terminal_suite(dir.path(), &["hello-file"]);
    let tasks = ["hello-file"];
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.bare]\n");
    cfg.tasks = &tasks;
    cfg.trials = 2;
    cfg.max_working_seconds = 200.0;
    let config = cfg.write(dir.path());
    let results = dir.path().join("results");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ablate"))
        .args(run_args(&config, &results, &["--run-id", "r", "-j", "1"]))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let run_dir = results.join("r");
    let start_time = std::time::Instant::now();
    while containers_of_run(&run_dir).is_empty() {
        assert!(start_time.elapsed() < Duration::from_secs(60), "no container of the run started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The agent's command is running in the container: kill ablate.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGKILL) };
    let _ = child.wait().await;
    let left = containers_of_run(&run_dir);
    assert_eq!(left.len(), 1, "the killed run's container is still there: {left:?}");
    healed.store(true, std::sync::atomic::Ordering::SeqCst);
    let out = output_within_async(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_ablate"))
            .args(resume_args(&config, &run_dir)),
        Duration::from_secs(300),
    )
    .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "removed 1 container(s) left by an ablate process that was killed: {}",
            left[0]
        )),
        "{err}"
    );
    let records =
        ablate::record::jsonl::read::<TrialRecord>(&run_dir.join("trials.jsonl")).unwrap().records;
    let mut finals: Vec<(String, TrialStatus)> =
        records.iter().map(|r| (r.trial_id.clone(), r.status)).collect();
    finals.sort();
    // The interrupted attempt and its trial's second attempt, and the other trial: one final record each.
    let passed: Vec<&(String, TrialStatus)> =
        finals.iter().filter(|(_, s)| *s == TrialStatus::Passed).collect();
    assert_eq!(passed.len(), 2, "{finals:?}");
    // Every final record says what its container ran on: the engine that answered, and the
    // limits the manifest lists for the task.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("manifest.json")).unwrap())
            .unwrap();
    let facts = &manifest["containers"];
    for r in records.iter().filter(|r| r.status == TrialStatus::Passed) {
        let c = r.container.as_ref().unwrap_or_else(|| panic!("{r:?}"));
        assert_eq!(c.engine, facts["engine"]["program"].as_str().unwrap(), "{c:?}");
        let limits = facts["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task"] == r.task.as_str())
            .map(|t| t["limits"].clone())
            .unwrap();
        assert_eq!(
            serde_json::json!({"cpus": c.cpus, "memory_mb": c.memory_mb, "pids": c.pids}),
            limits,
            "{c:?}"
        );
    }
    assert_eq!(
        finals.iter().filter(|(_, s)| *s == TrialStatus::Interrupted).count(),
        1,
        "{finals:?}"
    );
    assert!(containers_of_run(&run_dir).is_empty(), "{:?}", containers_of_run(&run_dir));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harbor_tasks_that_cannot_run_are_refused_naming_the_task_and_the_key() {
    let _g = SERIAL.lock().await;
    engine_ready();
    let server = start(script(vec![])).await;
    let dir = tempfile::tempdir().unwrap();
    let ablate = |args: &[&str]| {
        let out = output_within(
            std::process::Command::new(env!("CARGO_BIN_EXE_ablate")).args(args),
            Duration::from_secs(300),
        );
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // Each variant of hello-file's task.toml, and the key its refusal names.
    let base = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/terminal/hello-file/task.toml"),
    )
    .unwrap();
    let cases: Vec<(String, &str)> = vec![
        ("schema_version = \"1.1\"\n[environment\n".into(), ""),
        (base.replace("schema_version = \"1.1\"", "schema_version = \"3.0\""), "schema_version"),
        (format!("{base}\n[[steps]]\nname = \"one\"\n"), "steps"),
        (base.replace("memory_mb = 512", "memory_mb = 512\ngpus = 1"), "environment.gpus"),
        (base.replace("memory_mb = 512", "memory_mb = 512\nos = \"windows\""), "environment.os"),
        (
            base.replace(
                "network_mode = \"no-network\"",
                "network_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]",
            ),
            "environment.allowed_hosts",
        ),
        (
            base.replace(
                "memory_mb = 512",
                "memory_mb = 512\nmcp_servers = [{name = \"x\", url = \"http://x\"}]",
            ),
            "environment.mcp_servers",
        ),
        (
            base.replace("[verifier]", "[verifier]\nenvironment_mode = \"separate\""),
            "verifier.environment_mode",
        ),
        (base.replace("[agent]", "[agent]\nspeed = 2"), "agent.speed"),
    ];
    for (i, (text, key)) in cases.iter().enumerate() {
        let root = dir.path().join(format!("case{i}"));
        let suite = terminal_suite(&root, &["hello-file"]);
        let toml = suite.join("hello-file/task.toml");
        std::fs::write(&toml, text).unwrap();
        let tasks = ["hello-file"];
        let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.bare]\n");
        cfg.tasks = &tasks;
        let config = cfg.write(&root);
        let (code, err) = ablate(&["plan", config.to_str().unwrap()]);
        assert_eq!(code, Some(2), "case {i}: {err}");
        let named = if key.is_empty() {
            format!("{}: invalid TOML", toml.display())
        } else {
            format!("{}: key `{key}`", toml.display())
        };
        assert!(err.contains(&named), "case {i}: {err}");
    }
    // A compose file beside the Dockerfile.
    let root = dir.path().join("compose");
    let suite = terminal_suite(&root, &["hello-file"]);
    std::fs::write(suite.join("hello-file/environment/docker-compose.yaml"), "services: {}\n")
        .unwrap();
    let tasks = ["hello-file"];
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.bare]\n");
    cfg.tasks = &tasks;
    let config = cfg.write(&root);
    let (code, err) = ablate(&["plan", config.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("docker-compose.yaml: a compose file is not run"), "{err}");

    // At run time: a Dockerfile that does not build, an image that is not here, a public network
    // the experiment does not allow. Nothing is recorded: no run folder is made.
    type Change<'a> = &'a dyn Fn(&Path);
    let runs: [(&str, Change, &str); 3] = [
        (
            "nobuild",
            &|s: &Path| {
                std::fs::write(
                    s.join("hello-file/environment/Dockerfile"),
                    "FROM localhost/ablate-base:bookworm\nRUN exit 3\n",
                )
                .unwrap()
            },
            "environment/Dockerfile: task `hello-file`: the image does not build",
        ),
        (
            "noimage",
            &|s: &Path| {
                std::fs::remove_file(s.join("hello-file/environment/Dockerfile")).unwrap();
                let t = std::fs::read_to_string(s.join("hello-file/task.toml")).unwrap();
                std::fs::write(
                    s.join("hello-file/task.toml"),
                    t.replace(
                        "memory_mb = 512",
                        "memory_mb = 512\ndocker_image = \"ablate-test/absent:1\"",
                    ),
                )
                .unwrap();
            },
            "key `environment.docker_image`: the image `ablate-test/absent:1` ([environment].docker_image) is not on this machine",
        ),
        (
            "public",
            &|s: &Path| {
                let t = std::fs::read_to_string(s.join("hello-file/task.toml")).unwrap();
                std::fs::write(
                    s.join("hello-file/task.toml"),
                    t.replace("network_mode = \"no-network\"\n", ""),
                )
                .unwrap();
            },
            "key `environment.network_mode`: task `hello-file` runs with a public network",
        ),
    ];
    for (name, change, want) in runs {
        let root = dir.path().join(name);
        let suite = terminal_suite(&root, &["hello-file"]);
        change(&suite);
        let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.bare]\n");
        cfg.tasks = &tasks;
        let config = cfg.write(&root);
        let results = root.join("results");
        let (code, err) = ablate(&run_args(&config, &results, &[]));
        assert_eq!(code, Some(2), "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
        // No run folder; a failed build's log alone is kept, under build-logs/, and named.
        let made: Vec<String> = std::fs::read_dir(&results)
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let logs = results.join("build-logs/hello-file.log");
        match name {
            "nobuild" => {
                assert_eq!(made, ["build-logs"], "{name}: {made:?}");
                assert!(err.contains(&logs.display().to_string()), "{name}: {err}");
                assert!(std::fs::read_to_string(&logs).unwrap().contains("exit 3"));
            }
            _ => assert!(made.is_empty(), "{name}: a run folder was made: {made:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binaries_a_root_agent_replaces_never_run_in_ablates_own_steps() {
    let _g = SERIAL.lock().await;
    // The task left undone; every binary ablate's steps used to run in the container (sleep
    // restarted by the first process, head reading the reward, rm and mkdir clearing it, kill,
    // sh) replaced by one that writes a reward of 1, then every process killed. The task's own
    // test.sh uses bash and cat alone, which stay (what test.sh runs is the task's contract).
    let forge = r#"for b in sleep head rm mkdir chmod kill sh dash; do p=$(command -v $b) || continue; printf '#!/bin/bash\necho 1 > /logs/verifier/reward.txt 2>/dev/null; echo "{\\"reward\\": 1}" > /logs/verifier/reward.json 2>/dev/null; exit 0\n' > /tmp/forge; cat /tmp/forge > "$(readlink -f "$p")"; done; /usr/bin/kill -9 -1 2>/dev/null; builtin kill -9 -1"#;
    let dir = tempfile::tempdir().unwrap();
    let rec = hello_running(dir.path(), forge).await;
    let v = rec.grade.as_ref().unwrap().verifier.as_ref().unwrap();
    assert_eq!(
        (rec.status, v.reward, v.reward_file.as_deref()),
        (TrialStatus::Failed, Some(0.0), Some("reward.txt")),
        "{rec:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_left_by_the_agent_does_not_stop_the_verifier() {
    let _g = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let bomb =
        "echo 'Hello, world!' > /app/hello.txt; (b(){ b | b & }; b) >/dev/null 2>&1 & sleep 2";
    let rec = hello_running(dir.path(), bomb).await;
    assert_eq!(rec.status, TrialStatus::Passed, "{rec:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_environment_gets_only_the_variables_the_experiment_passes() {
    let _g = SERIAL.lock().await;
    engine_ready();
    let secret = "s3cr3t-4d8f-passed";
    let server = start(script(vec!["```bash\necho \"$K\" > /app/hello.txt\n```".into()])).await;
    let dir = tempfile::tempdir().unwrap();
    let suite = terminal_suite(dir.path(), &["hello-file"]);
    let toml = suite.join("hello-file/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(&toml, format!("{text}\n[environment.env]\nK = \"${{ABLATE_TEST_PASSED}}\"\n"))
        .unwrap();
    // The verifier passes only when the container got the passed value.
    let test_sh = suite.join("hello-file/tests/test.sh");
    let sh = std::fs::read_to_string(&test_sh).unwrap().replace("Hello, world!", secret);
    std::fs::write(&test_sh, sh).unwrap();
    let tasks = ["hello-file"];
    let write = |name: &str, pass_env: &str, model_extra: &'static str| {
        let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.bare]\n");
        cfg.tasks = &tasks;
        cfg.model_extra = model_extra;
        let root = dir.path().join(name);
        std::fs::create_dir_all(&root).unwrap();
        cfg.experiment_extra = pass_env.to_string();
        cfg.write(&root)
    };
    let ablate = |args: &[&str]| {
        let out = output_within(
            std::process::Command::new(env!("CARGO_BIN_EXE_ablate"))
                .args(args)
                .env("ABLATE_TEST_PASSED", secret)
                .env("ABLATE_TEST_MODEL_KEY", "model-key-never-passed"),
            Duration::from_secs(300),
        );
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // Not passed: refused before anything runs, naming the task's key and what to do.
    let config = write("none", "", "");
    let (code, err) = ablate(&["plan", config.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&format!("{}: key `environment.env.K`", toml.display())), "{err}");
    assert!(err.contains("needs ${ABLATE_TEST_PASSED}") && err.contains("pass_env"), "{err}");
    // A model's key is never passed.
    let config = write(
        "key",
        "pass_env = [\"ABLATE_TEST_MODEL_KEY\"]\n",
        "api_key_env = \"ABLATE_TEST_MODEL_KEY\"",
    );
    let (code, err) = ablate(&["plan", config.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("key `experiment.pass_env[0]`") && err.contains("model `m`"), "{err}");
    // Passed: the container has it; the run folder holds its name and digest, never the value.
    let config = write("passed", "pass_env = [\"ABLATE_TEST_PASSED\"]\n", "");
    let results = dir.path().join("passed/results");
    let (code, err) =
        ablate(&["run", config.to_str().unwrap(), "--results", results.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let run = std::fs::read_dir(&results).unwrap().flatten().next().unwrap().path();
    let rec: Value = serde_json::from_str(
        std::fs::read_to_string(run.join("trials.jsonl")).unwrap().lines().next().unwrap(),
    )
    .unwrap();
    assert_eq!(rec["status"], "passed", "{rec}");
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    // sha256("s3cr3t-4d8f-passed"), by sha2 here.
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(secret.as_bytes()));
    assert_eq!(m["containers"]["pass_env"]["ABLATE_TEST_PASSED"], serde_json::json!(digest));
    for f in walk_files(&run) {
        let bytes = std::fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "{} holds the value",
            f.display()
        );
    }
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() { out.extend(walk_files(&p)) } else { out.push(p) }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_build_cannot_reach_the_hosts_loopback() {
    let _g = SERIAL.lock().await;
    engine_ready();
    // A service on the host's loopback; the Dockerfile's build fails if it reaches it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let suite = terminal_suite(dir.path(), &["hello-file"]);
    let probe = format!(
        "RUN python3 -c \"import socket, sys; s = socket.socket(); s.settimeout(3); sys.exit(1 if s.connect_ex(('127.0.0.1', {port})) == 0 else 0)\" # {}\n",
        rand_tag()
    );
    append_to_dockerfile(&suite, &probe);
    let out = suite_check(&suite);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("1 tasks ok"), "{stdout}");
    drop(listener);
    // The probe's image is this test's own: removed.
    remove_hello_image(&suite);
}

/// A line (or lines) added to the end of the suite's hello-file Dockerfile.
fn append_to_dockerfile(suite: &Path, lines: &str) {
    let dockerfile = suite.join("hello-file/environment/Dockerfile");
    let text = std::fs::read_to_string(&dockerfile).unwrap();
    std::fs::write(&dockerfile, format!("{text}\n{lines}")).unwrap();
}

/// `ablate suite check SUITE`, within 10 minutes.
fn suite_check(suite: &Path) -> std::process::Output {
    output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_ablate")).args([
            "suite",
            "check",
            suite.to_str().unwrap(),
        ]),
        Duration::from_secs(600),
    )
}

/// The tag of the suite's hello-file image.
fn hello_image(suite: &Path) -> String {
    let task = ablate::suite::load(suite).unwrap().task("hello-file").unwrap().clone();
    ablate::container::image::tag(&task)
}

/// A test's own hello-file image (its Dockerfile made it this test's): removed.
fn remove_hello_image(suite: &Path) {
    let _ = std::process::Command::new(&engine_ready().program)
        .args(["rmi", "-f", &hello_image(suite)])
        .output();
}

/// A tag that makes the probe's Dockerfile (and so its image) this run's own.
fn rand_tag() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    )
}

/// A registry on the host's loopback that counts the connections made to it.
struct Registry {
    port: u16,
    connections: Arc<std::sync::atomic::AtomicUsize>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Registry {
    fn start() -> Registry {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (c, s) = (connections.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok(_) => {
                        c.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Registry { port, connections, stop }
    }

    fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pull_policy_decides_whether_a_build_reaches_a_registry() {
    let _g = SERIAL.lock().await;
    engine_ready();
    let registry = Registry::start();
    let server = start(script(vec![])).await;
    let dir = tempfile::tempdir().unwrap();
    let absent = format!("127.0.0.1:{}/ablate-test/absent:1", registry.port);
    // (pull, FROM, exit, connections made, what stderr names)
    let cases = [
        ("never", absent.clone(), 2, 0, format!("builds on `{absent}`")),
        ("missing", absent.clone(), 2, 1, "build-logs/hello-file.log".to_string()),
        (
            "missing",
            "localhost/ablate-base:bookworm".to_string(),
            0,
            0,
            "pull policy `missing`".into(),
        ),
    ];
    for (i, (pull, from, code, connections, named)) in cases.iter().enumerate() {
        let root = dir.path().join(format!("case{i}"));
        let suite = terminal_suite(&root, &["hello-file"]);
        let dockerfile = suite.join("hello-file/environment/Dockerfile");
        let text = std::fs::read_to_string(&dockerfile).unwrap();
        let rest: String =
            text.lines().filter(|l| !l.starts_with("FROM")).map(|l| format!("{l}\n")).collect();
        std::fs::write(
            &dockerfile,
            format!("FROM {from}\n{rest}RUN echo {} > /tmp/case\n", rand_tag()),
        )
        .unwrap();
        let tasks = ["hello-file"];
        let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.bare]\n");
        cfg.tasks = &tasks;
        cfg.max_steps = 1;
        cfg.experiment_extra = format!("pull = \"{pull}\"\n");
        let config = cfg.write(&root);
        let before = registry.connections();
        let out = output_within(
            std::process::Command::new(env!("CARGO_BIN_EXE_ablate"))
                .args(["run", config.to_str().unwrap(), "--results"])
                .arg(root.join("results")),
            Duration::from_secs(600),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "case {i}: {err}");
        let made = registry.connections() - before;
        assert_eq!(made.min(1), *connections, "case {i}: {made} connections\n{err}");
        assert!(err.contains(named.as_str()), "case {i}: {err}");
        if named.starts_with("build-logs") {
            let log = root.join("results/build-logs/hello-file.log");
            assert!(std::fs::read_to_string(&log).unwrap().contains("podman build"), "{err}");
        }
        if *code == 0 {
            let run = std::fs::read_dir(root.join("results"))
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .find(|p| p.join("manifest.json").is_file())
                .unwrap();
            let m: Value =
                serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap())
                    .unwrap();
            let bases = &m["containers"]["images"][0]["bases"];
            assert_eq!(bases[0]["name"], "localhost/ablate-base:bookworm", "{m}");
            assert!(bases[0]["id"].as_str().is_some_and(|id| id.len() >= 12), "{m}");
            remove_hello_image(&suite);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_bundle_reaches_the_build_and_is_not_left_in_the_image() {
    let _g = SERIAL.lock().await;
    let engine = engine_ready();
    if engine.kind != ablate::container::EngineKind::Podman {
        eprintln!("\n*** SKIPPED: build_ca_bundle needs podman's build mounts ***\n");
        return;
    }
    let server = start(script(vec![])).await;
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("ABLATE-TEST-CA-{}", rand_tag());
    std::fs::write(dir.path().join("ca.pem"), format!("# {marker}\n")).unwrap();
    let suite = terminal_suite(dir.path(), &["hello-file"]);
    // The build fails unless its steps see the bundle and a pip.conf pointing at it.
    let check = format!(
        "RUN grep -q {marker} /etc/ssl/certs/ca-certificates.crt && grep -q 'cert = /etc/ssl/certs/ca-certificates.crt' /etc/pip.conf\n"
    );
    append_to_dockerfile(&suite, &check);
    let tasks = ["hello-file"];
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.bare]\n");
    cfg.tasks = &tasks;
    cfg.max_steps = 1;
    let ca = dir.path().join("ca.pem");
    cfg.experiment_extra = format!("build_ca_bundle = \"{}\"\n", ca.display());
    let config = cfg.write(dir.path());
    let out = output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_ablate"))
            .args(["run", config.to_str().unwrap(), "--results"])
            .arg(dir.path().join("results")),
        Duration::from_secs(600),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // Nothing of it stays in the image (pip.conf's mount point stays, empty).
    let tag = hello_image(&suite);
    let inside = std::process::Command::new(&engine.program)
        .args(["run", "--rm", "--network", "none", &tag, "sh", "-c"])
        .arg(format!("grep -c {marker} /etc/ssl/certs/ca-certificates.crt; test -s /etc/pip.conf && echo pip.conf"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&inside.stdout).trim(), "0");
    remove_hello_image(&suite);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_build_in_suite_check_keeps_its_log_beside_the_suite() {
    let _g = SERIAL.lock().await;
    engine_ready();
    let dir = tempfile::tempdir().unwrap();
    let suite = terminal_suite(dir.path(), &["hello-file"]);
    append_to_dockerfile(&suite, &format!("RUN echo {} && false\n", rand_tag()));
    let out = suite_check(&suite);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let log = dir.path().join("terminal.build-logs/hello-file.log");
    assert!(stdout.contains(&log.display().to_string()), "{stdout}");
    assert!(std::fs::read_to_string(&log).unwrap().contains("false"), "{stdout}");
}
