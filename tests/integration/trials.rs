//! Real trials against scripted OpenAI-compatible and Ollama servers on loopback.

use crate::common;

use ablate::record::{BudgetLimit, EndReason, TrialStatus};
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// sha256 over "add.py\0" + hex sha256(add.py) + "\n", the framing of
/// `Sandbox::snapshot_sha256` (python3 hashlib), for add.py as RIGHT_ADD and WRONG_ADD
/// write it and as the tiny suite's stub has it.
const SNAPSHOT_RIGHT: &str = "6a7819cd700e942daa3b8f2ec298f0d8494c20ca11e98aa8612979906ada42e4";
const SNAPSHOT_WRONG: &str = "ac8ff5768e73072fefe45f21c0dd1321a31322c849f466f40bddc843fe245012";
const SNAPSHOT_STUB: &str = "55d61c6e2992ab7edc22ea94f5e7234b98edecd4c5af7368c031e4513352090b";

const FEEDBACK_ARMS: &str = "[arms.nofb]\n[arms.fb]\nfeedback = true\n[[matrix.pairs]]\ncontrol = \"nofb\"\ntreatment = \"fb\"\n";

/// Wrong code first; correct code once the harness has shown failing checks.
fn fixer() -> Handler {
    Arc::new(|path, body, _| {
        if let Some(r) = meta(path) {
            return r;
        }
        let saw_feedback = count_messages(body, "The harness ran the checks") > 0;
        let text = if saw_feedback { RIGHT_ADD } else { WRONG_ADD };
        if path == "/api/chat" { ollama_text(text) } else { openai_text(text) }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_lets_a_fixing_model_pass_openai() {
    let server = start(fixer()).await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, FEEDBACK_ARMS);
    cfg.trials = 2;
    let summary = run(&cfg.write(dir.path()), dir.path()).await;
    assert_eq!(summary.records.len(), 4);
    for r in &summary.records {
        match r.arm.as_str() {
            "fb" => {
                assert_eq!(r.status, TrialStatus::Passed, "{r:?}");
                assert_eq!(r.end_reason, EndReason::ChecksPassed);
                assert_eq!(r.steps, 2);
                assert_eq!((r.tests_passed, r.tests_total), (6, 6));
            }
            _ => {
                assert_eq!(r.status, TrialStatus::Failed, "{r:?}");
                assert_eq!(r.end_reason, EndReason::ModelDone);
                assert_eq!(r.steps, 1, "without feedback the bare loop is one call");
                // a - b passes test_zero_plus_zero only (tests/fixtures/suites/tiny/add-two/tests/test_add.py).
                assert_eq!((r.tests_passed, r.tests_total), (1, 6));
            }
        }
        assert_eq!(r.tokens.input, 100 * r.steps as u64);
        assert_eq!(r.tokens.cached, 10 * r.steps as u64);
        let g = r.grade.as_ref().expect("final grading recorded");
        assert_eq!(
            g.snapshot_sha256,
            if r.arm == "fb" { SNAPSHOT_RIGHT } else { SNAPSHOT_WRONG },
            "{}",
            r.arm
        );
        assert!(g.check.command.iter().any(|a| a == "unittest"));
        let steps = traces(&summary.dir, &r.trial_id);
        assert_eq!(steps.len() as u32, r.steps);
        assert_eq!(steps[0].request["seed"], json!(r.seed), "the plan's seed is sent");
        assert_eq!(steps[0].request["max_tokens"], json!(200));
    }
    // The request as sent after feedback carries the check summary.
    let fb = summary.records.iter().find(|r| r.arm == "fb").unwrap();
    let steps = traces(&summary.dir, &fb.trial_id);
    assert_eq!(
        steps[0].check.as_ref().map(|c| (c.passed, c.total)),
        Some((1, 6)),
        "step 1 sent a - b"
    );
    assert!(steps[1].request.to_string().contains("Checks: "), "{}", steps[1].request);
    // Manifest written with the plan and digests.
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(summary.dir.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(m["planned_trials"], json!(4));
    assert_eq!(m["suite"]["name"], json!("tiny"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_lets_a_fixing_model_pass_ollama_and_records_digest() {
    let server = start(fixer()).await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let cfg = Cfg::new(&suite, "ollama", &server.url, FEEDBACK_ARMS);
    let summary = run(&cfg.write(dir.path()), dir.path()).await;
    let by_arm = |a: &str| summary.records.iter().find(|r| r.arm == a).unwrap().clone();
    assert_eq!(by_arm("fb").status, TrialStatus::Passed);
    assert_eq!(by_arm("nofb").status, TrialStatus::Failed);
    assert_eq!(by_arm("fb").tokens.input, 180);
    let body = &server.chats.lock().unwrap()[0];
    assert_eq!(body["options"]["num_predict"], json!(200));
    assert_eq!(body["stream"], json!(false));
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(summary.dir.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(m["models"][0]["identity"], json!("ollama-digest:sha256:feedface"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_guard_catches_a_repeated_submission() {
    // Always the same wrong code, in new clothes the second time.
    let server = start(Arc::new(|path, _body, n| {
        meta(path).unwrap_or_else(|| {
            if n % 2 == 0 {
                openai_text(WRONG_ADD)
            } else {
                openai_text("```python add.py\n# retry\ndef add(a, b):\n        return a - b\n```")
            }
        })
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg =
        Cfg::new(&suite, "openai", &server.url, "[arms.g]\nfeedback = true\nloop_guard = true\n");
    cfg.max_steps = 3;
    let summary = run(&cfg.write(dir.path()), dir.path()).await;
    let r = &summary.records[0];
    assert_eq!(r.status, TrialStatus::BudgetExhausted);
    assert_eq!(r.end_reason, EndReason::Budget { limit: BudgetLimit::Steps });
    assert_eq!(r.incidents.loop_guard_hits, 2);
    let steps = traces(&summary.dir, &r.trial_id);
    let hit = steps[1].loop_guard.as_ref().expect("step 2 repeats step 1");
    assert_eq!(hit.repeats_step, 1);
    let (passed, total) = hit.scored.expect("the repeated step's score is recorded");
    assert_eq!(total, 6);
    assert_eq!(Some(passed), steps[0].check.as_ref().map(|c| c.passed));
    assert!(steps[1].check.is_none(), "a repeat is not re-run");
    assert!(steps[2].request.to_string().contains("repeats the code you sent at step 1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_tool_call_and_path_escape_get_error_results() {
    let server = start(Arc::new(|path, _body, n| {
        meta(path).unwrap_or_else(|| match n {
            0 => openai_tool("call_a", "read_file", r#"{"file": "add.py"}"#),
            1 => openai_tool("call_b", "read_file", r#"{"path": "../../../etc/passwd"}"#),
            2 => openai_tool("call_c", "read_file", "{not json"),
            3 => openai_tool("call_d", "read_file", r#"{"path": "add.py"}"#),
            _ => openai_text(RIGHT_ADD),
        })
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.t]\ntools = true\n");
    cfg.max_steps = 6;
    let summary = run(&cfg.write(dir.path()), dir.path()).await;
    let r = &summary.records[0];
    assert_eq!(r.status, TrialStatus::Passed, "{r:?}");
    assert_eq!(r.incidents.invalid_tool_calls, 2);
    assert_eq!(r.incidents.path_refusals, 1);
    assert_eq!(r.incidents.tool_calls, 4, "call_a to call_d, answered or refused");
    let steps = traces(&summary.dir, &r.trial_id);
    let call = |i: usize| steps[i].tool_calls[0].clone();
    assert_eq!(call(0).id, "call_a");
    assert!(
        !call(0).ok
            && call(0).result.contains("invalid_arguments")
            && call(0).result.contains("unknown field `file`")
    );
    assert!(
        !call(1).ok
            && call(1).result.contains("path_refused")
            && call(1).result.contains("leaves the workspace")
    );
    assert!(!call(2).ok && call(2).result.contains("not valid JSON"));
    assert_eq!(call(2).arguments, json!("{not json"), "raw arguments kept");
    assert!(call(3).ok && call(3).result.contains("raise NotImplementedError"));
    // The answer goes back with the matching id, and the tools were offered with strict schemas.
    let sent = server.chats.lock().unwrap()[1].clone();
    let tool_msg =
        sent["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool_msg["tool_call_id"], json!("call_a"));
    assert_eq!(
        steps[0].request["tools"][0]["function"]["parameters"]["additionalProperties"],
        json!(false)
    );
    // The trace leaves out what step 1's line holds: system, task, the reply and its tool result.
    let omits = steps[1].request_omits.as_ref().unwrap();
    assert_eq!((omits.messages, omits.tools), (4, true));
    assert!(steps[1].request.get("tools").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_that_loops_forever_is_killed_at_the_check_timeout() {
    let server = start(Arc::new(|path, _b, _n| {
        meta(path).unwrap_or_else(|| {
            openai_text(
                "```python add.py\ndef add(a, b):\n    while True:\n        pass\n```\nDONE",
            )
        })
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let suite = tiny_with_timeout(dir.path(), 1.0);
    let cfg = Cfg::new(&suite, "openai", &server.url, "[arms.b]\n");
    let start = std::time::Instant::now();
    let summary = run(&cfg.write(dir.path()), dir.path()).await;
    let r = &summary.records[0];
    assert_eq!(r.status, TrialStatus::Failed);
    let g = r.grade.as_ref().unwrap();
    assert!(g.check.timed_out);
    assert_eq!(g.check.exit_code, None);
    assert_eq!((r.tests_passed, r.tests_total), (0, 6));
    assert!(start.elapsed() < Duration::from_secs(15), "took {:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_with_retry_after_is_retried_and_not_counted_as_work() {
    let server = start(Arc::new(|path, _b, n| {
        meta(path).unwrap_or_else(|| {
            if n == 0 {
                Reply::status(429, "{\"error\":\"slow down\"}").header("Retry-After", "1")
            } else {
                openai_text(RIGHT_ADD)
            }
        })
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let summary = run_tiny(dir.path(), &server.url).await;
    let r = &summary.records[0];
    assert_eq!(r.status, TrialStatus::Passed);
    assert!(r.rate_limit_wait_seconds >= 1.0, "{}", r.rate_limit_wait_seconds);
    assert!(
        r.working_seconds < r.wall_seconds - 0.9,
        "working {} wall {}",
        r.working_seconds,
        r.wall_seconds
    );
    let steps = traces(&summary.dir, &r.trial_id);
    assert_eq!(steps[0].request_attempts, 2);
    assert!(steps[0].rate_limit_wait_ms >= 1000);
    assert_eq!(server.chats.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_beyond_the_retry_limit_give_provider_error() {
    let server =
        start(Arc::new(|path, _b, _n| meta(path).unwrap_or_else(|| Reply::status(500, "boom"))))
            .await;
    let dir = tempfile::tempdir().unwrap();
    let summary = run_tiny(dir.path(), &server.url).await;
    let r = &summary.records[0];
    assert_eq!(r.status, TrialStatus::ProviderError);
    assert!(r.error.as_deref().unwrap().contains("HTTP 500"));
    assert_eq!(server.chats.lock().unwrap().len(), 3, "max_attempts = 3");
    let steps = traces(&summary.dir, &r.trial_id);
    assert_eq!(steps[0].request_attempts, 3);
    // The snapshot is still graded: the stub as the suite gives it, which passes no test.
    let g = r.grade.as_ref().expect("the snapshot is still graded");
    assert_eq!((r.tests_passed, r.tests_total, g.snapshot_sha256.as_str()), (0, 6, SNAPSHOT_STUB));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_endpoint_gives_timeout() {
    let server = start(Arc::new(|path, _b, _n| {
        meta(path).unwrap_or_else(|| openai_text(RIGHT_ADD).delayed(Duration::from_secs(30)))
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.b]\n");
    cfg.model_extra = "request_timeout_seconds = 1";
    let start = std::time::Instant::now();
    let summary = run(&cfg.write(dir.path()), dir.path()).await;
    let r = &summary.records[0];
    assert_eq!(r.status, TrialStatus::Timeout);
    assert_eq!(r.end_reason, EndReason::RequestTimeout);
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_body_gives_a_recorded_error() {
    let server = start(Arc::new(|path, _b, n| {
        meta(path).unwrap_or_else(|| {
            if n == 0 {
                Reply::status(200, "<html>not json")
            } else {
                Reply::json(json!({"choices": []}))
            }
        })
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.b]\n");
    cfg.trials = 2;
    let summary = run(&cfg.write(dir.path()), dir.path()).await;
    // The first request of the run gets the HTML, the other the empty choices; which trial
    // sends first is up to the two workers.
    let mut replies = Vec::new();
    for r in &summary.records {
        assert_eq!(r.status, TrialStatus::ProviderError);
        let steps = traces(&summary.dir, &r.trial_id);
        assert_eq!(steps[0].error, r.error, "{r:?}");
        replies.push((steps[0].reply.clone(), r.error.clone()));
    }
    replies.sort_by_key(|(reply, _)| reply.as_ref().map(|v| v.is_string()));
    let expected = vec![
        (
            Some(json!({"choices": []})),
            Some("malformed reply: no choices[0] in the reply".to_string()),
        ),
        (
            Some(json!("<html>not json")),
            Some(
                "malformed reply: body is not JSON: expected value at line 1 column 1".to_string(),
            ),
        ),
    ];
    assert_eq!(replies, expected, "the body received is in the trace, with the error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_budget_stops_a_trial_with_budget_exhausted() {
    // A model that lists files forever: only the budget ends it.
    let server = start(Arc::new(|path, _b, n| {
        meta(path).unwrap_or_else(|| openai_tool(&format!("c{n}"), "list_files", "{}"))
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.t]\ntools = true\n");
    cfg.max_steps = 50;
    cfg.max_total_tokens = 300; // 120 per step
    let summary = run(&cfg.write(dir.path()), dir.path()).await;
    let r = &summary.records[0];
    assert_eq!(r.status, TrialStatus::BudgetExhausted);
    assert_eq!(r.end_reason, EndReason::Budget { limit: BudgetLimit::TotalTokens });
    assert_eq!(r.steps, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_cannot_rewrite_the_tests() {
    let cheat = "```python add.py\nimport pathlib\np = pathlib.Path(__file__).parent / 'tests' / 'test_add.py'\np.write_text(p.read_text() + '\\n# tampered\\n')\ndef add(a, b):\n    return a + b\n```\nDONE";
    let server =
        start(Arc::new(move |path, _b, _n| meta(path).unwrap_or_else(|| openai_text(cheat)))).await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let summary = run(
        &Cfg::new(&suite, "openai", &server.url, "[arms.b]\nacceptance = true\n").write(dir.path()),
        dir.path(),
    )
    .await;
    let r = &summary.records[0];
    // The tests are read-only in the sandbox: the write fails and the import with it. Every
    // DONE is refused (acceptance: the checks fail) until the 4 steps are spent.
    assert_eq!(
        (r.status, &r.end_reason, r.steps, r.incidents.refused_done),
        (TrialStatus::BudgetExhausted, &EndReason::Budget { limit: BudgetLimit::Steps }, 4, 4),
        "{r:?}"
    );
    assert_eq!((r.tests_passed, r.tests_total), (0, 6));
    let check = &r.grade.as_ref().unwrap().check;
    assert!(check.output.contains("Read-only file system"), "{}", check.output);
    assert!(r.grade.as_ref().unwrap().tampered_tests.is_empty());
    // The suite's own files are untouched.
    assert!(
        !std::fs::read_to_string(suite.join("add-two/tests/test_add.py"))
            .unwrap()
            .contains("tampered")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_is_sent_but_never_recorded_and_operation_id_survives_retries() {
    // SAFETY: set before any thread reads it; the name is unique to this test.
    unsafe { std::env::set_var("ABLATE_TEST_KEY_7", "sk-secret-777") };
    let server = start(Arc::new(|path, _b, n| {
        meta(path).unwrap_or_else(|| {
            if n == 0 {
                Reply::status(503, "busy").header("Retry-After", "0")
            } else {
                openai_text(RIGHT_ADD)
            }
        })
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.b]\n");
    cfg.model_extra = "api_key_env = \"ABLATE_TEST_KEY_7\"";
    let summary = run(&cfg.write(dir.path()), dir.path()).await;
    assert_eq!(summary.records[0].status, TrialStatus::Passed);
    let heads = server.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 2);
    assert!(
        heads.iter().all(|h| h.contains("authorization: Bearer sk-secret-777")
            || h.contains("Authorization: Bearer sk-secret-777")),
        "{heads:?}"
    );
    let op = |h: &str| {
        h.lines()
            .find(|l| l.to_lowercase().starts_with("x-ablate-operation-id"))
            .map(|l| l.to_string())
    };
    assert!(op(&heads[0]).is_some());
    assert_eq!(op(&heads[0]), op(&heads[1]), "one operation id across retries");
    let steps = traces(&summary.dir, &summary.records[0].trial_id);
    assert!(op(&heads[0]).unwrap().ends_with(&steps[0].operation_id));
    for entry in ablate::digest::list_files(&summary.dir).unwrap() {
        let text = std::fs::read_to_string(summary.dir.join(&entry)).unwrap();
        assert!(!text.contains("sk-secret-777"), "key leaked into {}", entry.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acceptance_refuses_a_false_done() {
    // Says DONE with wrong code; fixes it once refused.
    let server = start(Arc::new(|path, body, _n| {
        meta(path).unwrap_or_else(|| {
            let refused = count_messages(body, "Not accepted") > 0;
            openai_text(if refused {
                RIGHT_ADD
            } else {
                "```python add.py\ndef add(a, b):\n    return 0\n```\nDONE"
            })
        })
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let arms = "[arms.off]\n[arms.on]\nacceptance = true\n[[matrix.pairs]]\ncontrol = \"off\"\ntreatment = \"on\"\n";
    let summary =
        run(&Cfg::new(&suite, "openai", &server.url, arms).write(dir.path()), dir.path()).await;
    let on = summary.records.iter().find(|r| r.arm == "on").unwrap();
    let off = summary.records.iter().find(|r| r.arm == "off").unwrap();
    assert_eq!(
        (off.status, off.end_reason.clone(), off.steps),
        (TrialStatus::Failed, EndReason::ModelDone, 1)
    );
    assert_eq!(
        (on.status, on.end_reason.clone(), on.steps),
        (TrialStatus::Passed, EndReason::ChecksPassed, 2)
    );
    assert_eq!(on.incidents.refused_done, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_reset_the_conversation_and_handoff_carries_progress() {
    let server =
        start(Arc::new(|path, _b, _n| meta(path).unwrap_or_else(|| openai_text(WRONG_ADD)))).await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let arms =
        "[arms.plain]\nfeedback = true\n[arms.handoff]\nfeedback = true\nprogress_handoff = true\n";
    let mut cfg = Cfg::new(&suite, "openai", &server.url, arms);
    cfg.max_steps = 3;
    cfg.top_extra = "[harness]\nsession_steps = 2";
    let summary = run(&cfg.write(dir.path()), dir.path()).await;
    for r in &summary.records {
        assert_eq!(r.sessions, 2, "{r:?}");
        let steps = traces(&summary.dir, &r.trial_id);
        assert_eq!(steps[2].session, 2);
        let first_of_session = steps[2].request["messages"].as_array().unwrap();
        assert_eq!(first_of_session.len(), 2, "reset to system + task message");
        let has_progress = first_of_session[1]["content"]
            .as_str()
            .unwrap()
            .contains("Progress file from your previous session");
        assert_eq!(has_progress, r.arm == "handoff");
        if has_progress {
            assert!(
                first_of_session[1]["content"]
                    .as_str()
                    .unwrap()
                    .contains("- step 1: submitted code")
            );
        }
        assert!(steps[2].request_omits.is_none(), "a new session's first request is whole");
        // Within a session the conversation grows; the trace holds only the new feedback note.
        let omits = steps[1].request_omits.as_ref().unwrap();
        assert_eq!(omits.messages, 3, "system, task, the reply of step 1");
        let new = steps[1].request["messages"].as_array().unwrap();
        assert_eq!(new.len(), 1);
        assert!(
            new[0]["content"].as_str().unwrap().contains("The harness ran the checks"),
            "{new:?}"
        );
    }
}

/// A JSON string's escaped form, as it stands in a JSONL file.
fn escaped(s: &str) -> String {
    let q = serde_json::to_string(s).unwrap();
    q[1..q.len() - 1].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_holds_each_message_once_and_the_conversation_can_be_rebuilt() {
    // Step 1 reads the file (a tool result), step 2 sends wrong code (feedback), step 3 fixes it.
    let server = start(Arc::new(|path, _b, n| {
        meta(path).unwrap_or_else(|| match n {
            0 => openai_tool("call_r", "read_file", r#"{"path": "add.py"}"#),
            1 => openai_text(WRONG_ADD),
            _ => openai_text(RIGHT_ADD),
        })
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg =
        Cfg::new(&suite, "openai", &server.url, "[arms.t]\ntools = true\nfeedback = true\n");
    cfg.max_steps = 3;
    let summary = run(&cfg.write(dir.path()), dir.path()).await;
    let r = &summary.records[0];
    assert_eq!((r.status, r.steps), (TrialStatus::Passed, 3), "{r:?}");
    let text =
        std::fs::read_to_string(summary.dir.join("traces").join(format!("{}.jsonl", r.trial_id)))
            .unwrap();
    let steps = traces(&summary.dir, &r.trial_id);

    // Every message of the last request as sent, and the last reply, stand once in the trace.
    let sent = server.chats.lock().unwrap().clone();
    let last = sent[2]["messages"].as_array().unwrap();
    assert_eq!(last.len(), 6, "system, task, tool call, tool result, wrong code, feedback");
    for m in last {
        let content = m["content"].as_str().unwrap_or("");
        if !content.is_empty() {
            assert_eq!(
                text.matches(&escaped(content)).count(),
                1,
                "{} message held {} times",
                m["role"],
                text.matches(&escaped(content)).count()
            );
        }
    }
    assert_eq!(text.matches(&escaped(RIGHT_ADD)).count(), 1);
    assert!(steps.iter().all(|s| s.reply_text.is_none()), "the reply body holds the text");
    assert_eq!(text.matches("\"tools\":[").count(), 1, "the tool list once");

    // What each line leaves out is exactly the head of the body as sent.
    let omitted: Vec<usize> =
        steps.iter().map(|s| s.request_omits.as_ref().map_or(0, |o| o.messages)).collect();
    assert_eq!(omitted, vec![0, 4, 5]);
    for (i, s) in steps.iter().enumerate().skip(1) {
        let all = sent[i]["messages"].as_array().unwrap();
        let n = omitted[i];
        let head = serde_json::to_string(&all[..n].to_vec()).unwrap();
        assert_eq!(
            s.request_omits.as_ref().unwrap().sha256.as_deref(),
            Some(ablate::digest::sha256_hex(head.as_bytes()).as_str())
        );
        assert_eq!(s.request["messages"].as_array().unwrap(), &all[n..].to_vec());
    }
    // Rebuilt from the trace, top to bottom: step 1's messages, its reply and tool result, step 2's (none), its reply, step 3's feedback.
    assert_eq!(steps[0].request["messages"].as_array().unwrap().len(), 2);
    assert_eq!(steps[0].tool_calls[0].result, last[3]["content"].as_str().unwrap());
    assert_eq!(
        steps[1].reply.as_ref().unwrap()["choices"][0]["message"]["content"],
        json!(WRONG_ADD)
    );
    assert_eq!(last[4]["content"], json!(WRONG_ADD));
    assert_eq!(steps[2].request["messages"][0], last[5]);
}

/// The model's identity comes from what `/v1/models` says of it (volatile
/// fields aside), and each trial records the `system_fingerprint`s of its
/// replies; a fingerprint that changes within the run is warned of.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_identity_and_a_fingerprint_change_are_recorded() {
    let chats = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = chats.clone();
    let server = start(Arc::new(move |path, _, _| {
        if path == "/v1/models" {
            // vLLM's shape: `created` and `permission` change from one request to the next.
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
            return Reply::json(json!({"object": "list", "data": [{"id": "m", "object": "model", "created": now, "owned_by": "vllm",
                "root": "/models/m", "max_model_len": 4096, "permission": [{"id": format!("modelperm-{now}"), "created": now}]}]}));
        }
        let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut reply: Value = serde_json::from_str(&openai_text(WRONG_ADD).body).unwrap();
        reply["system_fingerprint"] = json!(if n < 2 { "fp_a" } else { "fp_b" });
        Reply::json(reply)
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.bare]\n");
    cfg.trials = 4;
    let summary = try_run(&cfg.write(dir.path()), dir.path(), 1).await.unwrap();
    assert_eq!(chats.load(std::sync::atomic::Ordering::SeqCst), 4, "one call a trial");
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(summary.dir.join("manifest.json")).unwrap())
            .unwrap();
    // sha256 of {"id":"m","max_model_len":4096,"object":"model","owned_by":"vllm","root":"/models/m"}
    // (python3: json.dumps(entry, sort_keys=True, separators=(",", ":"))), first 16 hex digits.
    assert_eq!(m["models"][0]["identity"], json!("openai-models:sha256:1e01dea54e2de241"));
    assert_eq!(m["models"][0]["served"]["root"], json!("/models/m"));
    assert!(m["models"][0]["served"].get("created").is_none());
    let mut by_fp: Vec<Vec<String>> =
        summary.records.iter().map(|r| r.system_fingerprints.clone()).collect();
    by_fp.sort();
    assert_eq!(
        by_fp,
        vec![
            vec!["fp_a".to_string()],
            vec!["fp_a".into()],
            vec!["fp_b".into()],
            vec!["fp_b".into()]
        ]
    );
    let report = ablate::report::report_dir(&summary.dir).unwrap();
    let changes = ablate::report::analysis::fingerprint_changes(&report);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(
        changes[0].starts_with(
            "model `m` replied under 2 system fingerprints (`fp_a` in 2 trials, `fp_b` in 2 trials)"
        ),
        "{}",
        changes[0]
    );
    let csv = std::fs::read_to_string(summary.dir.join("trials.csv")).unwrap();
    assert_eq!(csv.matches(",fp_a").count() + csv.matches(",fp_b").count(), 4, "{csv}");
}

/// An arm's prompt file may end generation at stop sequences: they reach the model's API as
/// its own `stop` (OpenAI's top-level `stop`, Ollama's `options.stop`), every call, and a reply
/// that stopped inside the code fence it opened is read with the fence closed where it
/// stopped. A prefill is refused for a model whose API cannot start the assistant's turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arms_stop_sequences_reach_every_http_provider_and_close_the_open_fence() {
    let code = "```python\ndef add(a, b):\n    return a + b".to_string();
    for provider in ["openai", "ollama"] {
        // The model's reply stopped at "\n```": the fence it opened is not closed in the text.
        let open = code.clone();
        let server = start(Arc::new(move |path, _body, _| {
            if let Some(r) = meta(path) {
                return r;
            }
            if path == "/api/chat" { ollama_text(&open) } else { openai_text(&open) }
        }))
        .await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("card.toml"),
            "user_template = \"Complete:\\n{code}\\n\"\nstop = [\"\\n```\", \"\\nif __name__\"]\n",
        )
        .unwrap();
        let suite = fixture("tiny");
        let arms = "[arms.card]\ninstructions = \"card.toml\"\n";
        let cfg = Cfg::new(&suite, provider, &server.url, arms);
        let summary = run(&cfg.write(dir.path()), dir.path()).await;
        let r = &summary.records[0];
        assert_eq!(
            r.status,
            TrialStatus::Passed,
            "{provider}: the open fence's code was graded: {r:?}"
        );
        let chats = server.chats.lock().unwrap().clone();
        assert!(!chats.is_empty());
        for body in &chats {
            let stop = if provider == "ollama" { &body["options"]["stop"] } else { &body["stop"] };
            assert_eq!(stop, &json!(["\n```", "\nif __name__"]), "{provider}: {body}");
        }

        std::fs::write(
            dir.path().join("card.toml"),
            "user_template = \"Complete:\\n{code}\\n\"\nprefill = \"```python\\n\"\n",
        )
        .unwrap();
        let err = ablate::experiment::config::load(&cfg.write(dir.path())).unwrap_err();
        assert!(
            err.file.ends_with("card.toml") && err.key.as_deref() == Some("prefill"),
            "{provider}: {err}"
        );
        assert!(err.message.contains(provider), "{err}");
    }
}
