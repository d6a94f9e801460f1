//! A run killed mid-way and resumed completes the plan with no trial recorded twice.

use crate::common;

use ablate::record::{TrialRecord, TrialStatus};
use common::*;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_a_killed_run_completes_the_plan_once() {
    // Slow replies so that the kill lands in the middle of the run.
    let server = start(Arc::new(|path, _b, _n| {
        meta(path).unwrap_or_else(|| openai_text(RIGHT_ADD).delayed(Duration::from_millis(400)))
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, TWO_ARMS);
    cfg.trials = 4;
    let config = cfg.write(dir.path());
    let results = dir.path().join("results");
    let bin = env!("CARGO_BIN_EXE_ablate");

    let mut child = tokio::process::Command::new(bin)
        .args(["run", config.to_str().unwrap(), "--results", results.to_str().unwrap(), "--plain"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        // A test that panics before the kill must not leave the run behind.
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Wait until a few trials are recorded, then kill -9 mid-trial.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let run_dir = loop {
        assert!(std::time::Instant::now() < deadline, "the run recorded 2 trials within 120 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let Some(d) = std::fs::read_dir(&results)
            .ok()
            .and_then(|mut rd| rd.next())
            .and_then(|e| e.ok())
            .map(|e| e.path())
        else {
            continue;
        };
        let n = ablate::record::jsonl::read::<TrialRecord>(&d.join("trials.jsonl"))
            .map(|r| r.records.len())
            .unwrap_or(0);
        if n >= 2 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            break d;
        }
    };
    child.kill().await.unwrap();
    let before =
        ablate::record::jsonl::read::<TrialRecord>(&run_dir.join("trials.jsonl")).unwrap().records;
    assert!(before.len() < 8, "killed before the end ({} records)", before.len());

    let out = output_within_async(
        tokio::process::Command::new(bin).args(resume_args(&config, &run_dir)),
        Duration::from_secs(120),
    )
    .await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let records =
        ablate::record::jsonl::read::<TrialRecord>(&run_dir.join("trials.jsonl")).unwrap().records;
    let manifest: ablate::record::Manifest =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest.plan.len(), 8);
    let mut finals: HashMap<&str, usize> = HashMap::new();
    for r in records.iter().filter(|r| r.status.is_final()) {
        *finals.entry(r.trial_id.as_str()).or_default() += 1;
    }
    for t in &manifest.plan {
        assert_eq!(
            finals.get(t.id.as_str()),
            Some(&1),
            "trial {} has exactly one final record",
            t.id
        );
    }
    // The records from before the kill are all still there, unchanged.
    for r in &before {
        assert!(records.contains(r));
    }
    // An attempt in flight at the kill is recorded as interrupted, and its trial ran again.
    for r in records.iter().filter(|r| r.status == TrialStatus::Interrupted) {
        assert!(records.iter().any(|f| f.trial_id == r.trial_id
            && f.attempt == r.attempt + 1
            && f.status.is_final()));
    }
    let interrupted = records.iter().filter(|r| r.status == TrialStatus::Interrupted).count();
    assert!(interrupted >= 1, "the kill landed mid-trial (400 ms replies)");
    assert!(
        records.iter().filter(|r| r.status.is_final()).all(|r| r.status == TrialStatus::Passed)
    );
}
