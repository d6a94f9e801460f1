//! What the model endpoints may do to a run: oversized reply bodies, model
//! names they do not serve, and model lists they do not offer.

use crate::common;

use ablate::record::TrialStatus;
use ablate::runner::RunError;
use common::*;
use serde_json::json;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_configured_cap_is_a_provider_error_and_one_at_the_cap_is_read() {
    let exact = openai_text(RIGHT_ADD).body.len();
    let server =
        start(Arc::new(|path, _b, _n| meta(path).unwrap_or_else(|| openai_text(RIGHT_ADD)))).await;
    let suite = fixture("tiny");

    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Cfg::new(&suite, "openai", &server.url, "[arms.b]\n");
    let extra = format!("max_response_bytes = {}", exact - 1);
    cfg.model_extra = &extra;
    let summary = run(&cfg.write(dir.path()), dir.path()).await;
    let r = &summary.records[0];
    assert_eq!(r.status, TrialStatus::ProviderError, "{r:?}");
    assert_eq!(
        r.error.as_deref(),
        Some(format!("response body exceeds {} bytes (max_response_bytes)", exact - 1).as_str())
    );
    assert_eq!(server.chats.lock().unwrap().len(), 1, "an oversized body is not retried");
    let steps = traces(&summary.dir, &r.trial_id);
    assert!(steps[0].reply.is_none());
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(summary.dir.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(
        m["experiment"]["models"][0]["max_response_bytes"],
        json!(exact - 1),
        "the cap is recorded"
    );

    let dir = tempfile::tempdir().unwrap();
    let extra = format!("max_response_bytes = {exact}");
    cfg.model_extra = &extra;
    let summary = run(&cfg.write(dir.path()), dir.path()).await;
    assert_eq!(summary.records[0].status, TrialStatus::Passed, "{:?}", summary.records[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_body_without_length_stops_at_the_default_cap() {
    // 9 MiB of text with no Content-Length: only reading in chunks can stop it.
    let big = openai_text(&"x".repeat(9 << 20));
    let server = start_unframed(Arc::new(big.body)).await;
    let dir = tempfile::tempdir().unwrap();
    let summary = run_tiny(dir.path(), &server.url).await;
    let r = &summary.records[0];
    assert_eq!(r.status, TrialStatus::ProviderError, "{r:?}");
    assert_eq!(
        r.error.as_deref(),
        Some("response body exceeds 8388608 bytes (max_response_bytes)")
    );
}

fn listing(
    openai: Option<&'static [&'static str]>,
    ollama: Option<&'static [&'static str]>,
) -> Handler {
    Arc::new(move |path, _b, _n| match path {
        "/v1/models" => match openai {
            Some(ids) => Reply::json(
                json!({"object": "list", "data": ids.iter().map(|i| json!({"id": i, "object": "model"})).collect::<Vec<_>>()}),
            ),
            None => Reply::status(404, "not found"),
        },
        "/api/tags" => match ollama {
            Some(names) => Reply::json(
                json!({"models": names.iter().map(|n| json!({"name": n, "model": n, "digest": "d1"})).collect::<Vec<_>>()}),
            ),
            None => Reply::status(404, "404 page not found"),
        },
        "/api/chat" => ollama_text(RIGHT_ADD),
        _ => meta(path).unwrap_or_else(|| openai_text(RIGHT_ADD)),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_the_openai_endpoint_does_not_serve_is_refused_at_setup() {
    let server = start(listing(Some(&["gpt-a", "gpt-b"]), None)).await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let config = Cfg::new(&suite, "openai", &server.url, "[arms.b]\n").write(dir.path());
    let err = try_run(&config, dir.path(), 1).await.unwrap_err();
    let RunError::Input(e) = err else { panic!("not an input error: {err}") };
    assert_eq!(e.key.as_deref(), Some("models[0].model"));
    assert!(e.message.ends_with("does not serve model `m`; it serves: gpt-a, gpt-b"), "{e}");
    assert!(server.chats.lock().unwrap().is_empty(), "no trial ran");

    // The binary exits with 2 and says what the endpoint serves.
    let results = dir.path().join("results");
    let out = tokio::task::spawn_blocking(move || {
        output_within(
            std::process::Command::new(env!("CARGO_BIN_EXE_ablate")).args([
                "run",
                config.to_str().unwrap(),
                "--results",
                results.to_str().unwrap(),
            ]),
            std::time::Duration::from_secs(60),
        )
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("key `models[0].model`") && err.contains("it serves: gpt-a, gpt-b"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_the_ollama_endpoint_does_not_have_is_refused_at_setup() {
    let server = start(listing(None, Some(&["llama3:latest", "qwen2.5:7b"]))).await;
    let dir = tempfile::tempdir().unwrap();
    let suite = fixture("tiny");
    let err = try_run(
        &Cfg::new(&suite, "ollama", &server.url, "[arms.b]\n").write(dir.path()),
        dir.path(),
        1,
    )
    .await
    .unwrap_err();
    let RunError::Input(e) = err else { panic!("not an input error: {err}") };
    assert_eq!(e.key.as_deref(), Some("models[0].model"));
    assert!(
        e.message.ends_with("does not serve model `m`; it serves: llama3:latest, qwen2.5:7b"),
        "{e}"
    );
    assert!(server.chats.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_models_and_endpoints_without_a_list_both_run() {
    let suite = fixture("tiny");
    // `m` listed as `m:latest` (ollama) / `m` (openai); then no listing at all (404): a warning, and the run goes on.
    for (provider, handler) in [
        ("openai", listing(Some(&["other", "m"]), None)),
        ("ollama", listing(None, Some(&["other:latest", "m:latest"]))),
        ("openai", listing(None, None)),
        ("ollama", listing(None, None)),
    ] {
        let server = start(handler).await;
        let dir = tempfile::tempdir().unwrap();
        let summary = try_run(
            &Cfg::new(&suite, provider, &server.url, "[arms.b]\n").write(dir.path()),
            dir.path(),
            1,
        )
        .await
        .unwrap();
        assert_eq!(
            summary.records[0].status,
            TrialStatus::Passed,
            "{provider}: {:?}",
            summary.records[0]
        );
    }
}
