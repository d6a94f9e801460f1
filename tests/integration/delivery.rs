//! The delivery check end to end (docs/delivery.md): an external harness that
//! asks as Codex CLI does runs through the trial's gateway against a scripted
//! upstream, and the report's verdict follows what reached the model, not
//! what the harness asked.

use crate::common;

use ablate::record::delivery::DeliveryCheck;
use ablate::record::{EndReason, TrialStatus};
use ablate::report::analysis::EffectVerdict;
use common::*;
use std::sync::Arc;

fn harness_toml() -> String {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/harnesses/effort");
    format!(
        "[harness]\nkind = \"external\"\ncommand = [\"python3\", \"{{harness}}/agent.py\"]\nfiles = [\"{}\"]\ncomponents.effort = [\"low\", \"high\"]\ncomponents.tools = [\"codex\", \"custom\"]\n",
        dir.display()
    )
}

const EFFORT_ARMS: &str = "[arms.low]\neffort = \"low\"\n[arms.high]\neffort = \"high\"\n[[matrix.pairs]]\ncontrol = \"low\"\ntreatment = \"high\"\n";

/// The effort ablation (3 trials an arm on add-two) against `server`, with the model's `extra` keys.
async fn effort_run(
    dir: &std::path::Path,
    server: &Server,
    model_extra: &str,
) -> (Ran, ablate::report::analysis::Report) {
    let suite = fixture("tiny");
    let top = harness_toml();
    let mut cfg = Cfg::new(&suite, "openai", &server.url, EFFORT_ARMS);
    cfg.top_extra = &top;
    cfg.model_extra = model_extra;
    cfg.trials = 3;
    let ran = run(&cfg.write(dir), &dir.join("results")).await;
    // Every export written, as `ablate report` writes them.
    let report = ablate::report::report_dir(&ran.dir).unwrap();
    (ran, report)
}

/// An upstream that honours the effort: right code at `high`, wrong at anything else.
fn honouring() -> Handler {
    Arc::new(|path, body, _| {
        meta(path).unwrap_or_else(|| {
            let high = body["reasoning_effort"] == "high";
            openai_text(if high { RIGHT_ADD } else { WRONG_ADD })
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effort_the_provider_ignores_is_not_delivered_and_gets_no_verdict() {
    let server = start(honouring()).await;
    let dir = tempfile::tempdir().unwrap();
    // The endpoint is declared to ignore reasoning settings: they are not sent.
    let (ran, report) = effort_run(dir.path(), &server, "reasoning = false\n").await;
    assert_eq!(ran.records.len(), 6);
    for r in &ran.records {
        // Codex's namespace and hosted tools do not stop the call: it is answered.
        assert_eq!(r.status, TrialStatus::Failed, "{r:?}");
        assert_eq!(r.steps, 1, "{r:?}");
        let seen = &r.delivery.as_ref().expect("a delivery record").fields["reasoning"];
        assert_eq!(seen.reached.iter().collect::<Vec<_>>(), ["(not set)"], "{r:?}");
        assert_eq!(seen.asked.iter().collect::<Vec<_>>(), [&format!("effort={}", r.arm)]);
    }
    for body in server.chats.lock().unwrap().iter() {
        assert!(body.get("reasoning_effort").is_none(), "{body}");
        let names: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["exec_command", "multi_agent_v1__close_agent"], "web_search left out");
    }
    let e = &report.ablations[0];
    assert_eq!((e.control.as_str(), e.treatment.as_str()), ("low", "high"));
    let EffectVerdict::NotDelivered { fields } = &e.verdict else { panic!("{:?}", e.verdict) };
    let names: Vec<&str> = fields.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(names, ["reasoning"]);
    assert_eq!(
        e.verdict.to_string(),
        "not delivered: reasoning (asked effort=low vs effort=high; reached the model as (not set) in both arms)"
    );
    // Every output says so: the terminal, report.md, effects.csv and report.json.
    let text = ablate::report::terminal::render(&report, false);
    assert!(text.contains("not delivered: reasoning"), "{text}");
    let md = std::fs::read_to_string(ran.dir.join("report.md")).unwrap();
    assert!(md.contains("not delivered: reasoning"), "{md}");
    let csv = std::fs::read_to_string(ran.dir.join("effects.csv")).unwrap();
    assert!(csv.contains(",not_delivered,"), "{csv}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ran.dir.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(json["ablations"][0]["delivery"]["kind"], "not_delivered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_effort_reaching_a_provider_that_honours_it_is_an_effect() {
    let server = start(honouring()).await;
    let dir = tempfile::tempdir().unwrap();
    let (ran, report) = effort_run(dir.path(), &server, "").await;
    for r in &ran.records {
        let want = if r.arm == "high" { TrialStatus::Passed } else { TrialStatus::Failed };
        assert_eq!(r.status, want, "{r:?}");
    }
    let sent: Vec<String> =
        server.chats.lock().unwrap().iter().map(|b| b["reasoning_effort"].to_string()).collect();
    assert_eq!(sent.iter().filter(|e| *e == "\"high\"").count(), 3, "{sent:?}");
    let e = &report.ablations[0];
    assert_eq!(e.delivery, DeliveryCheck::Delivered { fields: vec!["reasoning".into()] });
    assert!(!matches!(e.verdict, EffectVerdict::NotDelivered { .. }), "{:?}", e.verdict);
    assert_eq!(e.delta, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_harness_is_an_infrastructure_error_and_its_arm_is_not_comparable() {
    let server = start(honouring()).await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let top = harness_toml();
    let arms = "[arms.codex]\ntools = \"codex\"\n[arms.custom]\ntools = \"custom\"\n[[matrix.pairs]]\ncontrol = \"codex\"\ntreatment = \"custom\"\n";
    let mut cfg = Cfg::new(&suite, "openai", &server.url, arms);
    cfg.top_extra = &top;
    let ran = run(&cfg.write(dir.path()), &dir.path().join("results")).await;
    let refused = ran.records.iter().find(|r| r.arm == "custom").unwrap();
    assert_eq!(
        (refused.status, refused.end_reason.clone()),
        (TrialStatus::HarnessError, EndReason::HarnessError)
    );
    let error = refused.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("refused") && error.contains("tools[0]") && error.contains("custom"),
        "{error}"
    );
    let report = ablate::report::analyse_dir(&ran.dir, None).unwrap();
    let e = &report.ablations[0];
    assert_eq!(e.verdict, EffectVerdict::NotComparable { arm: "custom".into() });
    assert!(
        e.delta.is_nan() && e.p_value.is_nan(),
        "no number for an experiment that did not happen"
    );
    assert_eq!(e.verdict.to_string(), "not comparable: no trial of arm `custom` reached the model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosted_tools_refused_by_policy_are_a_harness_error_naming_the_tool() {
    let server = start(honouring()).await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let top = format!("{}[gateway]\nhosted_tools = \"refuse\"\n", harness_toml());
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.a]\n");
    cfg.top_extra = &top;
    let ran = run(&cfg.write(dir.path()), &dir.path().join("results")).await;
    let r = &ran.records[0];
    assert_eq!(r.status, TrialStatus::HarnessError, "{r:?}");
    let error = r.error.as_deref().unwrap_or_default();
    assert!(error.contains("`web_search`") && error.contains("hosted_tools"), "{error}");
    assert!(server.chats.lock().unwrap().is_empty(), "no call reached the model");
    // The manifest records the policy (the default, omit, is left out).
    let manifest = std::fs::read_to_string(ran.dir.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"hosted_tools\": \"refuse\""), "{manifest}");
}
