//! ablate killed (SIGKILL) or interrupted (SIGINT) while candidate code runs
//! in a check: nothing of the candidate survives, and `--resume` finishes the run.

use crate::common;

use ablate::record::{TrialRecord, TrialStatus};
use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// An endless CPU loop at import: the check runs until its timeout.
const SPIN: &str = "```python add.py\nwhile True:\n    pass\n```\nDONE";

async fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The temporary folder the test's ablate processes use, its own: the scratch folder a killed
/// run leaves is swept by the next ablate process started there, so another test's or run's
/// ablate on this machine (in the system's /tmp) must not be the one to sweep it. Every user may
/// pass through it and the test's folder, as the jail's uids do to reach their workspaces.
fn private_tmp(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    for d in [dir, tmp.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    tmp
}

/// Start `ablate run` on a config whose model answers with SPIN until `healed`, in the test's
/// own temporary folder (`private_tmp`).
async fn spinning_run(
    dir: &std::path::Path,
    healed: Arc<AtomicBool>,
) -> (std::path::PathBuf, std::path::PathBuf, tokio::process::Child) {
    let server = start(Arc::new(move |path, _b, _n| {
        meta(path).unwrap_or_else(|| {
            if healed.load(Ordering::SeqCst) { openai_text(RIGHT_ADD) } else { openai_text(SPIN) }
        })
    }))
    .await;
    let suite = tiny_with_timeout(dir, 120.0);
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.b]\nfeedback = true\n");
    cfg.max_steps = 2;
    let config = cfg.write(dir);
    // The server lives as long as the test's runtime.
    std::mem::forget(server);
    let results = dir.join("results");
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ablate"))
        .args(run_args(&config, &results, &["--run-id", "r"]))
        .env("TMPDIR", private_tmp(dir))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        // What the run says on stderr, read once it has ended.
        .stderr(std::fs::File::create(dir.join("stderr.txt")).unwrap())
        // A test that panics must not leave `ablate run` (and its spinning check) behind.
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    (config, results.join("r"), child)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_check_leaves_no_process_and_resume_finishes() {
    let _g = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let healed = Arc::new(AtomicBool::new(false));
    let (config, run_dir, mut child) = spinning_run(dir.path(), healed.clone()).await;
    let pid = child.id().unwrap();
    wait_for("the spinning check", Duration::from_secs(30), || !running_checks(pid).is_empty())
        .await;
    let jailed = jail_descendants(pid);
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let _ = child.wait().await;
    let uids: Vec<u32> = jailed.iter().map(|(_, uid)| *uid).collect();
    wait_for("the sandbox to die with ablate", Duration::from_secs(5), || {
        jailed.iter().all(|(p, _)| !alive(*p)) && processes_with_uids(&uids).is_empty()
    })
    .await;
    // The killed process's scratch folder (the trial's workspace, the runner's files) stays
    // behind, unlocked; the next ablate process removes it.
    let tmp = private_tmp(dir.path());
    let scratch: Vec<std::path::PathBuf> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().unwrap().to_string_lossy().starts_with(&format!("ablate-scratch-{pid}-"))
        })
        .collect();
    assert_eq!(scratch.len(), 1, "{scratch:?}");
    assert!(
        std::fs::read_dir(&scratch[0])
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("ws-add-two-")),
        "{scratch:?}"
    );

    healed.store(true, Ordering::SeqCst);
    let out = output_within_async(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_ablate"))
            .args(resume_args(&config, &run_dir))
            .env("TMPDIR", &tmp),
        Duration::from_secs(120),
    )
    .await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let records =
        ablate::record::jsonl::read::<TrialRecord>(&run_dir.join("trials.jsonl")).unwrap().records;
    let statuses: Vec<TrialStatus> = records.iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![TrialStatus::Interrupted, TrialStatus::Passed]);
    assert!(processes_with_uids(&uids).is_empty());
    assert!(!scratch[0].exists(), "{} was not swept by the resume", scratch[0].display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_a_check_leaves_no_process() {
    let _g = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (_config, run_dir, mut child) =
        spinning_run(dir.path(), Arc::new(AtomicBool::new(false))).await;
    let pid = child.id().unwrap();
    wait_for("the spinning check", Duration::from_secs(30), || !running_checks(pid).is_empty())
        .await;
    let jailed = jail_descendants(pid);
    let uids: Vec<u32> = jailed.iter().map(|(_, uid)| *uid).collect();
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("ablate stops on Ctrl-C")
        .unwrap();
    // 128 + SIGINT (docs/getting-started.md: 130, a run interrupted by Ctrl-C). The attempt in flight has its start
    // line and no record: a --resume records it as interrupted before anything runs.
    assert_eq!(status.code(), Some(130), "{status:?}");
    // The last line says what was kept and how to go on, as a note, not as an error.
    let said = std::fs::read_to_string(dir.path().join("stderr.txt")).unwrap();
    let last = said.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("interrupted; 0 trials are recorded. Continue with: ablate run ")
            && last.ends_with(&format!("--resume {}", run_dir.display())),
        "{said}"
    );
    wait_for("the sandbox to die with the run", Duration::from_secs(5), || {
        jailed.iter().all(|(p, _)| !alive(*p)) && processes_with_uids(&uids).is_empty()
    })
    .await;
    assert!(
        ablate::record::jsonl::read::<TrialRecord>(&run_dir.join("trials.jsonl"))
            .unwrap()
            .records
            .is_empty()
    );
    let attempts = ablate::record::jsonl::read::<ablate::record::AttemptStart>(
        &run_dir.join("attempts.jsonl"),
    )
    .unwrap()
    .records;
    assert_eq!(attempts.iter().map(|a| a.attempt).collect::<Vec<_>>(), vec![1], "{attempts:?}");
}
