//! The gateway's overhead per model call: the same non-streaming chat request
//! sent with the same HTTP client straight to an instant-reply model server
//! and through the gateway in front of it, N times each (interleaved in
//! rounds), on loopback. The model takes no time, so the difference is what
//! the gateway adds: a second HTTP hop, reading and writing the bodies, the
//! budget and the trace line.
//!
//! Then the memory a hostile harness can make the gateway hold: this
//! process's peak resident set (VmHWM, the bench's client and model server
//! included) before and after a body of 250,000 empty messages and a chain of
//! twelve `previous_response_id` calls of 7 MB of new input each.
//!
//! cargo bench --no-default-features --bench gateway [-- N]

#[path = "../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

use ablate::experiment::config::{Budget, ModelSpec, Provider, RetryPolicy};
use ablate::gateway::{TrialMeter, serve};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// This process's peak resident set so far, in MB (VmHWM).
fn peak_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn stats(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let mean = v.iter().map(|d| d.as_secs_f64()).sum::<f64>() / v.len() as f64;
    (mean * 1e3, v[v.len() / 2].as_secs_f64() * 1e3)
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(500);
    let server = common::start(Arc::new(|path, _, _| {
        common::meta(path).unwrap_or_else(|| common::openai_text("ok"))
    }))
    .await;
    let spec = ModelSpec {
        name: "m".into(),
        provider: Provider::Openai,
        model: "m".into(),
        endpoint: Some(server.url.clone()),
        api_key_env: None,
        path: None,
        resolved_path: None,
        temperature: 0.0,
        top_p: 1.0,
        context_tokens: None,
        request_timeout_seconds: 30.0,
        price: None,
        retry: RetryPolicy::None,
        max_response_bytes: 1 << 20,
        reasoning: true,
    };
    let budget = Budget {
        max_steps: u32::MAX,
        max_output_tokens_per_step: 200,
        max_total_tokens: u64::MAX,
        max_working_seconds: 1e9,
        max_cost_usd: None,
    };
    let client: Arc<dyn ablate::model::ModelClient> =
        Arc::from(ablate::model::client_for(&spec, &Default::default()).unwrap());
    // The trace line is serialized as the runner would before writing it.
    let traced = Arc::new(AtomicUsize::new(0));
    let t = traced.clone();
    let meter = TrialMeter::new(
        "bench".into(),
        1,
        spec,
        client,
        budget,
        1,
        Box::new(move |s| {
            t.fetch_add(serde_json::to_string(&s).unwrap().len(), Ordering::Relaxed);
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gateway = format!("http://{}/v1/chat/completions", listener.local_addr().unwrap());
    let direct = format!("{}/v1/chat/completions", server.url);
    let key = meter.key().to_string();
    let task = tokio::spawn(serve(listener, meter.clone()));

    let http = reqwest::Client::new();
    let body = json!({"model": "m", "messages": [
        {"role": "system", "content": "You are a coding agent. ".repeat(20)},
        {"role": "user", "content": "Fix add.py so that the tests pass."}], "temperature": 0.0, "max_tokens": 200});
    let call = |url: String| {
        let (http, body, key) = (http.clone(), body.clone(), key.clone());
        async move {
            let start = Instant::now();
            let resp = http.post(url).bearer_auth(key).json(&body).send().await.unwrap();
            assert_eq!(resp.status().as_u16(), 200);
            resp.bytes().await.unwrap();
            start.elapsed()
        }
    };
    for _ in 0..20 {
        call(direct.clone()).await;
        call(gateway.clone()).await;
    }
    let (mut d, mut g) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let rounds = 5;
    for r in 0..rounds {
        let k = n / rounds + usize::from(r < n % rounds);
        for _ in 0..k {
            d.push(call(direct.clone()).await);
        }
        for _ in 0..k {
            g.push(call(gateway.clone()).await);
        }
    }
    let (dm, dmed) = stats(d);
    let (gm, gmed) = stats(g);
    println!(
        "gateway overhead per non-streaming call, {n} calls each way, loopback, instant model"
    );
    println!("  direct to the model server: mean {dm:.3} ms, median {dmed:.3} ms");
    println!("  through the gateway:        mean {gm:.3} ms, median {gmed:.3} ms");
    println!("  overhead:                   mean {:.3} ms, median {:.3} ms", gm - dm, gmed - dmed);
    println!(
        "  ({} trace bytes, {} calls traced)",
        traced.load(Ordering::Relaxed),
        meter.summary().calls
    );
    let before = peak_mb();
    // Bodies sent as text: the client holds 7 MB, not the JSON values it would build.
    let hostile = |path: &str, body: String| {
        let (http, key) = (http.clone(), key.clone());
        let url = gateway.replace("/v1/chat/completions", path);
        async move {
            let resp = http
                .post(url)
                .bearer_auth(key)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<serde_json::Value>().await.unwrap_or_default())
        }
    };
    let empty = r#"{"role":"user","content":""}"#;
    let body = format!(r#"{{"messages":[{}]}}"#, vec![empty; 250_000].join(","));
    let (client_side, body_len) = (peak_mb(), body.len());
    let (many, _) = hostile("/v1/chat/completions", body).await;
    let after_many = peak_mb();
    let chunk = "x".repeat(7_000_000);
    let (mut previous, mut statuses) = (None::<String>, Vec::new());
    for _ in 0..12 {
        let mut body = json!({"model": "m", "input": chunk.clone()});
        if let Some(p) = &previous {
            body["previous_response_id"] = json!(p);
        }
        let (status, v) = hostile("/v1/responses", body.to_string()).await;
        statuses.push(status);
        if let Some(id) = v["id"].as_str() {
            previous = Some(id.to_string());
        }
    }
    println!(
        "hostile requests (peak resident set of this process, client and model server included)"
    );
    println!(
        "  before: {before:.0} MB; the client's body of 250,000 empty messages ({} bytes) built: {client_side:.0} MB",
        body_len
    );
    println!("  after it was sent (status {many}): {after_many:.0} MB");
    println!(
        "  after 12 chained previous_response_id calls of 7 MB each (statuses {statuses:?}): {:.0} MB",
        peak_mb()
    );
    task.abort();
}
