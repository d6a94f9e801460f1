//! The gateway of external harnesses, driven over HTTP as a harness would,
//! in front of a scripted model server.

use crate::common;

use ablate::experiment::config::{Budget, ModelSpec, Price, Provider, RetryPolicy};
use ablate::gateway::{GatewayStop, TrialMeter, serve};
use ablate::record::{BudgetLimit, TraceStep};
use common::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SEED: u64 = 42;

fn spec(provider: Provider, url: &str) -> ModelSpec {
    ModelSpec {
        name: "exp-model".into(),
        provider,
        model: "m".into(),
        endpoint: Some(url.into()),
        api_key_env: None,
        path: None,
        resolved_path: None,
        temperature: 0.2,
        top_p: 1.0,
        context_tokens: None,
        request_timeout_seconds: 30.0,
        price: None,
        retry: RetryPolicy::Exponential { max_attempts: 2, base_ms: 1, max_ms: 5 },
        max_response_bytes: 1 << 20,
        reasoning: true,
    }
}

fn budget(max_steps: u32, max_total_tokens: u64) -> Budget {
    Budget {
        max_steps,
        max_output_tokens_per_step: 200,
        max_total_tokens,
        max_working_seconds: 60.0,
        max_cost_usd: None,
    }
}

struct Gw {
    /// http://127.0.0.1:port
    url: String,
    key: String,
    meter: Arc<TrialMeter>,
    steps: Arc<Mutex<Vec<TraceStep>>>,
    http: reqwest::Client,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Gw {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn gateway(model: ModelSpec, budget: Budget) -> Gw {
    let client: Arc<dyn ablate::model::ModelClient> =
        Arc::from(ablate::model::client_for(&model, &Default::default()).unwrap());
    gateway_with(model, client, budget).await
}

async fn gateway_with(
    model: ModelSpec,
    client: Arc<dyn ablate::model::ModelClient>,
    budget: Budget,
) -> Gw {
    let steps = Arc::new(Mutex::new(Vec::new()));
    let sink = steps.clone();
    let meter = TrialMeter::new(
        "t1".into(),
        1,
        model,
        client,
        budget,
        SEED,
        Box::new(move |s| sink.lock().unwrap().push(s)),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(serve(listener, meter.clone()));
    // No request of these tests waits on the gateway for long: a hung one fails the test.
    let http = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap();
    Gw { url, key: meter.key().to_string(), meter, steps, http, task }
}

impl Gw {
    async fn post(&self, path: &str, body: &Value) -> (u16, String, String) {
        let resp = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.key)
            .json(body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let ctype = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        (status, ctype, resp.text().await.unwrap())
    }
    async fn get(&self, path: &str) -> (u16, Value) {
        let resp = self
            .http
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.key)
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.json().await.unwrap())
    }
    fn steps(&self) -> Vec<TraceStep> {
        self.steps.lock().unwrap().clone()
    }
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn openai_server() -> Handler {
    Arc::new(|path, _, _| meta(path).unwrap_or_else(|| openai_text("hello")))
}

/// Is `stopped()` still pending after a short while?
async fn not_stopped(meter: &TrialMeter) -> bool {
    tokio::time::timeout(Duration::from_millis(50), meter.stopped()).await.is_err()
}

async fn stop_of(meter: &TrialMeter) -> GatewayStop {
    tokio::time::timeout(Duration::from_secs(5), meter.stopped()).await.expect("stopped() resolves")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_calls_streaming_or_not_are_answered_and_traced() {
    let server = start(openai_server()).await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(10, 100_000)).await;

    let first = json!({"model": "exp-model", "messages": [user("hi")]});
    let (status, ctype, text) = gw.post("/v1/chat/completions", &first).await;
    assert_eq!((status, ctype.as_str()), (200, "application/json"), "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "hello");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["total_tokens"], 120);
    assert_eq!(v["model"], "exp-model");

    let second = json!({"model": "exp-model", "stream": true, "stream_options": {"include_usage": true},
        "messages": [user("hi"), {"role": "assistant", "content": "hello"}, user("more")]});
    let (status, ctype, text) = gw.post("/v1/chat/completions", &second).await;
    assert_eq!((status, ctype.as_str()), (200, "text/event-stream"), "{text}");
    let data: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(data.last(), Some(&"[DONE]"));
    let chunks: Vec<Value> =
        data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    let content: String =
        chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(content, "hello");
    assert_eq!(
        chunks.iter().filter_map(|c| c["choices"][0]["finish_reason"].as_str()).collect::<Vec<_>>(),
        ["stop"]
    );
    assert_eq!(chunks.last().unwrap()["usage"]["total_tokens"], 120);

    // Both reached the model, each under its own operation id.
    assert_eq!(server.chats.lock().unwrap().len(), 2);
    assert!(
        server.heads.lock().unwrap()[1].to_lowercase().contains("x-ablate-operation-id: t1-1-s2")
    );

    let steps = gw.steps();
    assert_eq!(steps.len(), 2);
    assert_eq!(
        (steps[0].step, steps[0].operation_id.as_str(), steps[0].request_attempts),
        (1, "t1-1-s1", 1)
    );
    assert_eq!(steps[0].request, first, "the first body as received, whole");
    assert!(steps[0].request_omits.is_none());
    assert_eq!(steps[0].reply.as_ref().unwrap()["choices"][0]["message"]["content"], "hello");
    assert_eq!((steps[0].tokens.input, steps[0].tokens.output), (100, 20));
    assert_eq!(steps[0].finish_reason.as_deref(), Some("stop"));
    assert!(steps[0].notes.is_empty(), "nothing overridden: {:?}", steps[0].notes);
    // The stream is traced as the equivalent JSON; the first message is left
    // out as the previous line's request holds it.
    assert!(steps[1].notes.contains(&"streamed (sse)".to_string()), "{:?}", steps[1].notes);
    assert_eq!(steps[1].reply.as_ref().unwrap()["object"], "chat.completion");
    assert_eq!(steps[1].reply.as_ref().unwrap()["choices"][0]["message"]["content"], "hello");
    let omits = steps[1].request_omits.as_ref().unwrap();
    assert_eq!((omits.messages, omits.previous_request), (1, true));
    assert_eq!(
        steps[1].request["messages"],
        json!([{"role": "assistant", "content": "hello"}, user("more")])
    );

    let s = gw.meter.summary();
    assert_eq!(
        (s.steps, s.calls, s.tokens.total(), s.exhausted, s.provider_error),
        (2, 2, 240, None, None)
    );
    assert!(not_stopped(&gw.meter).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_chat_streams_ndjson_by_default_and_answers_one_json_when_asked() {
    let server =
        start(Arc::new(|path, _, _| meta(path).unwrap_or_else(|| ollama_text("hi there")))).await;
    let gw = gateway(spec(Provider::Ollama, &server.url), budget(10, 100_000)).await;

    let (status, ctype, text) =
        gw.post("/api/chat", &json!({"model": "exp-model", "messages": [user("hi")]})).await;
    assert_eq!((status, ctype.as_str()), (200, "application/x-ndjson"), "{text}");
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // The upstream reply was whole (not streamed): its text in one line, then the closing line.
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(
        (lines[0]["message"]["content"].clone(), lines[1]["message"]["content"].clone()),
        (json!("hi there"), json!("")),
        "{text}"
    );
    let content: String = lines.iter().filter_map(|l| l["message"]["content"].as_str()).collect();
    assert_eq!(content, "hi there");
    assert!(lines[..lines.len() - 1].iter().all(|l| l["done"] == false));
    let last = lines.last().unwrap();
    assert_eq!(
        (last["done"].clone(), last["prompt_eval_count"].clone(), last["eval_count"].clone()),
        (json!(true), json!(90), json!(15))
    );

    let (status, ctype, text) = gw
        .post(
            "/api/chat",
            &json!({"model": "exp-model", "stream": false, "messages": [user("again")]}),
        )
        .await;
    assert_eq!((status, ctype.as_str()), (200, "application/json"), "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (v["message"]["content"].clone(), v["done"].clone(), v["done_reason"].clone()),
        (json!("hi there"), json!(true), json!("stop"))
    );

    let steps = gw.steps();
    assert_eq!(steps.len(), 2);
    assert!(steps[0].notes.contains(&"streamed (ndjson)".to_string()), "{:?}", steps[0].notes);
    assert!(!steps[1].notes.iter().any(|n| n.starts_with("streamed")), "{:?}", steps[1].notes);
    assert_eq!(steps[0].reply.as_ref().unwrap()["message"]["content"], "hi there");
    assert_eq!(steps[1].tokens.total(), 105);
    // The upstream is Ollama: it got the experiment's options, not streaming.
    let chats = server.chats.lock().unwrap();
    assert_eq!(chats.len(), 2);
    assert_eq!(
        (chats[0]["stream"].clone(), chats[0]["options"]["seed"].clone()),
        (json!(false), json!(SEED))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_round_trip_across_both_apis() {
    let handler: Handler = Arc::new(|path, _, i| {
        meta(path).unwrap_or_else(|| {
            if i % 2 == 0 {
                openai_tool("call_7", "read_file", r#"{"path":"a.py"}"#)
            } else {
                openai_text("done")
            }
        })
    });
    let server = start(handler).await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(10, 100_000)).await;
    let tools = json!([{"type": "function", "function": {"name": "read_file", "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]);

    // OpenAI harness.
    let mut messages = vec![user("fix a.py")];
    let (status, _, text) =
        gw.post("/v1/chat/completions", &json!({"messages": messages, "tools": tools})).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let msg = &v["choices"][0]["message"];
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(msg["content"], Value::Null);
    assert_eq!(msg["tool_calls"][0]["id"], "call_7");
    assert_eq!(msg["tool_calls"][0]["function"]["name"], "read_file");
    assert_eq!(msg["tool_calls"][0]["function"]["arguments"], r#"{"path":"a.py"}"#);
    messages.push(msg.clone());
    messages.push(json!({"role": "tool", "tool_call_id": "call_7", "content": "print(1)"}));
    let (status, _, text) =
        gw.post("/v1/chat/completions", &json!({"messages": messages, "tools": tools})).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["choices"][0]["message"]["content"],
        "done"
    );

    // Ollama harness: no call ids; the result names the tool.
    let (status, _, text) = gw
        .post(
            "/api/chat",
            &json!({"stream": false, "messages": [user("fix a.py")], "tools": tools}),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        v["message"]["tool_calls"][0]["function"]["arguments"],
        json!({"path": "a.py"}),
        "Ollama's arguments are an object"
    );
    let echo = json!({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "a.py"}}}]});
    let body = json!({"stream": false, "tools": tools, "messages": [user("fix a.py"), echo, {"role": "tool", "tool_name": "read_file", "content": "print(1)"}]});
    let (status, _, text) = gw.post("/api/chat", &body).await;
    assert_eq!(status, 200, "{text}");

    let chats = server.chats.lock().unwrap();
    assert_eq!(chats.len(), 4);
    assert_eq!(chats[0]["tools"][0]["function"]["name"], "read_file");
    let m = &chats[1]["messages"];
    assert_eq!(
        (m[1]["tool_calls"][0]["id"].clone(), m[2]["role"].clone(), m[2]["tool_call_id"].clone()),
        (json!("call_7"), json!("tool"), json!("call_7"))
    );
    assert_eq!(m[2]["content"], "print(1)");
    // The OpenAI upstream needs ids: the Ollama result points at the id made for its call.
    let m = &chats[3]["messages"];
    assert_eq!(m[1]["tool_calls"][0]["function"]["arguments"], r#"{"path":"a.py"}"#);
    assert_eq!(m[2]["tool_call_id"], m[1]["tool_calls"][0]["id"]);
    // The second OpenAI line leaves out the tools the first holds.
    let steps = gw.steps();
    assert!(steps[1].request_omits.as_ref().unwrap().tools);
    assert!(steps[1].request.get("tools").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_experiment_fixes_sampling_and_the_output_cap_and_the_trace_notes_the_ask() {
    let server = start(openai_server()).await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(10, 100_000)).await;
    let body = json!({"model": "gpt-x", "messages": [user("hi")], "temperature": 1.5, "max_tokens": 10000, "top_p": 0.5, "seed": 7, "n": 1});
    let (status, _, text) = gw.post("/v1/chat/completions", &body).await;
    assert_eq!(status, 200, "{text}");
    let sent = server.chats.lock().unwrap()[0].clone();
    assert_eq!(sent["temperature"], 0.2);
    assert_eq!(sent["max_tokens"], 200);
    assert_eq!(sent["top_p"], 1.0);
    assert_eq!(sent["seed"], SEED);
    assert_eq!(sent["model"], "m", "the upstream model, not the harness's");
    let notes = &gw.steps()[0].notes;
    for want in [
        "model: asked \"gpt-x\", sent `exp-model` (fixed by the experiment)",
        "temperature: asked 1.5, sent 0.2 (fixed by the experiment)",
        "top_p: asked 0.5, sent 1 (fixed by the experiment)",
        "max_tokens: asked 10000, sent 200 (fixed by the experiment)",
        "seed: asked 7, sent 42 (fixed by the experiment)",
        "not forwarded: n",
    ] {
        assert!(notes.contains(&want.to_string()), "{want:?} not in {notes:?}");
    }
    // max_completion_tokens is the OpenAI name that wins when both are given.
    let body = json!({"messages": [user("hi")], "temperature": 1.5, "max_completion_tokens": 64, "max_tokens": 9});
    gw.post("/v1/chat/completions", &body).await;
    let s = gw.meter.summary();
    assert_eq!(s.requested["temperature"].count, 2);
    assert_eq!(s.requested["temperature"].last, json!(1.5));
    assert_eq!(s.requested["max_completion_tokens"].last, json!(64));
    assert_eq!(s.requested["max_tokens"].count, 1);
    // Asked once (7, by the first request), then not at all.
    assert_eq!((s.requested["seed"].count, &s.requested["seed"].last), (1, &json!(7)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_greedy_harness_is_stopped_at_max_steps() {
    let server = start(openai_server()).await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(3, 100_000)).await;
    let body = json!({"messages": [user("again")]});
    let mut statuses = Vec::new();
    let mut last = String::new();
    for _ in 0..10 {
        let resp = gw
            .http
            .post(format!("{}/v1/chat/completions", gw.url))
            .bearer_auth(&gw.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        if status != 200 {
            assert_eq!(resp.headers().get("x-should-retry").unwrap(), "false");
        }
        statuses.push(status);
        last = resp.text().await.unwrap();
        if status != 200 {
            break;
        }
        assert!(not_stopped(&gw.meter).await, "pending while calls are allowed");
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(server.chats.lock().unwrap().len(), 3, "exactly max_steps calls reach the model");
    let v: Value = serde_json::from_str(&last).unwrap();
    assert_eq!(
        (v["error"]["type"].clone(), v["error"]["limit"].clone()),
        (json!("budget_exhausted"), json!("steps"))
    );
    assert_eq!(stop_of(&gw.meter).await, GatewayStop::Budget(BudgetLimit::Steps));
    let s = gw.meter.summary();
    assert_eq!(
        (s.steps, s.calls, s.exhausted, s.limit_reached),
        (3, 4, Some(BudgetLimit::Steps), Some(BudgetLimit::Steps))
    );
    let steps = gw.steps();
    assert_eq!(steps.len(), 4, "the refused call is traced too");
    assert_eq!((steps[3].step, steps[3].request_attempts), (4, 0));
    assert!(steps[3].error.as_deref().unwrap().contains("budget exhausted (steps)"));
    // Ollama's form of the same refusal.
    let (status, _, text) = gw.post("/api/chat", &json!({"messages": [user("x")]})).await;
    assert_eq!(status, 429);
    assert!(
        serde_json::from_str::<Value>(&text).unwrap()["error"].as_str().unwrap().contains("steps")
    );
    assert_eq!(server.chats.lock().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_cannot_exceed_max_steps() {
    let server = start(Arc::new(|path, _, _| {
        meta(path).unwrap_or_else(|| openai_text("x").delayed(Duration::from_millis(100)))
    }))
    .await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(4, 1_000_000)).await;
    let calls = (0..12).map(|_| {
        let (http, url, key) = (gw.http.clone(), gw.url.clone(), gw.key.clone());
        tokio::spawn(async move {
            let resp = http
                .post(format!("{url}/v1/chat/completions"))
                .bearer_auth(key)
                .json(&json!({"messages": [user("go")]}))
                .send()
                .await
                .unwrap();
            resp.status().as_u16()
        })
    });
    let mut statuses = Vec::new();
    for c in calls.collect::<Vec<_>>() {
        statuses.push(c.await.unwrap());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 4, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 8, "{statuses:?}");
    assert_eq!(server.chats.lock().unwrap().len(), 4);
    tokio::time::timeout(Duration::from_secs(5), gw.meter.settled())
        .await
        .expect("the calls settle");
    assert_eq!(gw.steps().len(), 12);
    let mut numbers: Vec<u32> = gw.steps().iter().map(|s| s.step).collect();
    numbers.sort();
    assert_eq!(numbers, (1..=12).collect::<Vec<_>>(), "each call its own step number");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_budget_caps_each_call_and_refuses_past_it() {
    let server = start(openai_server()).await;
    // Each reply uses 120 tokens: 150 allows a second call (capped at 30
    // output tokens) that crosses the budget; the third is refused.
    let gw = gateway(spec(Provider::Openai, &server.url), budget(10, 150)).await;
    let body = json!({"messages": [user("go")]});
    assert_eq!(gw.post("/v1/chat/completions", &body).await.0, 200);
    assert_eq!(gw.meter.summary().limit_reached, None);
    assert_eq!(gw.post("/v1/chat/completions", &body).await.0, 200);
    let s = gw.meter.summary();
    assert_eq!(
        (s.tokens.total(), s.limit_reached, s.exhausted),
        (240, Some(BudgetLimit::TotalTokens), None)
    );
    assert!(
        not_stopped(&gw.meter).await,
        "a call that crosses the budget is answered; only the next is refused"
    );
    let (status, _, text) = gw.post("/v1/chat/completions", &body).await;
    assert_eq!(status, 429);
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["error"]["limit"], "total_tokens");
    assert_eq!(stop_of(&gw.meter).await, GatewayStop::Budget(BudgetLimit::TotalTokens));
    let chats = server.chats.lock().unwrap();
    assert_eq!(chats.len(), 2);
    assert_eq!(
        (chats[0]["max_tokens"].clone(), chats[1]["max_tokens"].clone()),
        (json!(150), json!(30))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cost_budget_refuses_past_it() {
    let server = start(openai_server()).await;
    let mut model = spec(Provider::Openai, &server.url);
    // 1 $/Mtok: each call (100 in, 20 out) costs 0.00012 $.
    model.price =
        Some(Price { input_per_mtok: 1.0, output_per_mtok: 1.0, cached_input_per_mtok: None });
    let mut b = budget(10, 1_000_000);
    b.max_cost_usd = Some(0.0002);
    let gw = gateway(model, b).await;
    let body = json!({"messages": [user("go")]});
    let statuses = [
        gw.post("/v1/chat/completions", &body).await.0,
        gw.post("/v1/chat/completions", &body).await.0,
        gw.post("/v1/chat/completions", &body).await.0,
    ];
    assert_eq!(statuses, [200, 200, 429]);
    let s = gw.meter.summary();
    assert_eq!(s.exhausted, Some(BudgetLimit::Cost));
    assert!((s.cost_usd.unwrap() - 0.00024).abs() < 1e-12, "{:?}", s.cost_usd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_working_time_budget_ends_a_slow_call_and_the_runner_can_mark_it() {
    let server = start(Arc::new(|path, _, _| {
        meta(path).unwrap_or_else(|| openai_text("late").delayed(Duration::from_secs(3)))
    }))
    .await;
    let mut b = budget(10, 100_000);
    b.max_working_seconds = 0.4;
    let gw = gateway(spec(Provider::Openai, &server.url), b).await;
    let (status, _, text) =
        gw.post("/v1/chat/completions", &json!({"messages": [user("go")]})).await;
    assert_eq!(status, 429, "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["error"]["limit"], "working_seconds");
    assert_eq!(stop_of(&gw.meter).await, GatewayStop::Budget(BudgetLimit::WorkingSeconds));
    let s = gw.meter.summary();
    assert_eq!((s.exhausted, s.provider_error), (Some(BudgetLimit::WorkingSeconds), None));

    // exhaust(): the runner's own finding refuses later calls.
    let server = start(openai_server()).await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(10, 100_000)).await;
    gw.meter.exhaust(BudgetLimit::WorkingSeconds);
    let (status, _, text) =
        gw.post("/v1/chat/completions", &json!({"messages": [user("go")]})).await;
    assert_eq!(status, 429);
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["error"]["limit"], "working_seconds");
    assert!(server.chats.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_is_required_in_the_header_or_the_path() {
    let server = start(openai_server()).await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(10, 100_000)).await;
    let body = json!({"messages": [user("hi")]});
    let url = format!("{}/v1/chat/completions", gw.url);
    let wrong = gw.http.post(&url).bearer_auth("0".repeat(32)).json(&body).send().await.unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    assert_eq!(wrong.json::<Value>().await.unwrap()["error"]["type"], "unauthorized");
    let missing = gw.http.post(&url).json(&body).send().await.unwrap();
    assert_eq!(missing.status().as_u16(), 401);
    let wrong_path = gw
        .http
        .post(format!("{}/k/{}/v1/chat/completions", gw.url, "f".repeat(32)))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_path.status().as_u16(), 401);
    let tags = gw.http.get(format!("{}/api/tags", gw.url)).send().await.unwrap();
    assert_eq!(tags.status().as_u16(), 401);
    assert!(server.chats.lock().unwrap().is_empty(), "nothing reached the model");
    assert_eq!(gw.meter.summary().steps, 0);
    let steps = gw.steps();
    assert_eq!(steps.len(), 4, "refused calls are traced, and the refused model list");
    assert!(
        steps
            .iter()
            .all(|s| s.error.as_deref() == Some("missing or wrong key") && s.request_attempts == 0)
    );
    assert_eq!(steps[3].notes, ["refused: GET /api/tags"]);
    assert_eq!(gw.meter.summary().refused_requests, 4);

    // OLLAMA_HOST=http://host/k/<key>: no header needed.
    let base = format!("{}/k/{}", gw.url, gw.key);
    let ok = gw.http.post(format!("{base}/v1/chat/completions")).json(&body).send().await.unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    let ok = gw
        .http
        .post(format!("{base}/api/chat"))
        .json(&json!({"stream": false, "messages": [user("hi")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    assert_eq!(ok.json::<Value>().await.unwrap()["message"]["content"], "hello");
    assert_eq!(
        gw.http.get(format!("{base}/api/version")).send().await.unwrap().status().as_u16(),
        200
    );
    assert_eq!(server.chats.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_failures_beyond_the_retry_policy_give_502_and_stop_the_harness() {
    let server = start(Arc::new(|path, _, _| {
        meta(path).unwrap_or_else(|| Reply::status(500, "{\"error\": \"boom\"}"))
    }))
    .await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(10, 100_000)).await;
    let (status, _, text) =
        gw.post("/v1/chat/completions", &json!({"messages": [user("hi")]})).await;
    assert_eq!(status, 502, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["type"], "provider_error");
    assert!(!text.contains(&server.url), "the upstream address stays hidden: {text}");
    assert_eq!(server.chats.lock().unwrap().len(), 2, "max_attempts = 2");
    match stop_of(&gw.meter).await {
        GatewayStop::ProviderError(e) => assert!(e.contains("HTTP 500"), "{e}"),
        other => panic!("{other:?}"),
    }
    let s = gw.meter.summary();
    assert!(s.provider_error.as_deref().unwrap().contains("HTTP 500"));
    assert_eq!((s.exhausted, s.request_timed_out), (None, false));
    let step = &gw.steps()[0];
    assert_eq!(step.request_attempts, 2);
    assert!(step.error.as_deref().unwrap().contains("HTTP 500"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_lists_unknown_paths_bad_bodies() {
    let server = start(openai_server()).await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(10, 100_000)).await;
    let (status, v) = gw.get("/v1/models").await;
    assert_eq!(status, 200);
    assert_eq!(
        v["data"].as_array().unwrap().iter().map(|m| m["id"].clone()).collect::<Vec<_>>(),
        [json!("exp-model")]
    );
    let (status, v) = gw.get("/api/tags").await;
    assert_eq!(status, 200);
    assert_eq!(
        v["models"].as_array().unwrap().iter().map(|m| m["name"].clone()).collect::<Vec<_>>(),
        [json!("exp-model")]
    );
    let (status, v) = gw.get("/v1/embeddings").await;
    assert_eq!(status, 404);
    assert_eq!(v["error"]["type"], "not_found");
    let (status, _, _) = gw.post("/api/show", &json!({"model": "exp-model"})).await;
    assert_eq!(status, 200);

    let resp = gw
        .http
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(&gw.key)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    assert_eq!(resp.json::<Value>().await.unwrap()["error"]["type"], "invalid_request_error");
    let (status, _, text) = gw
        .post(
            "/v1/chat/completions",
            &json!({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
        )
        .await;
    assert_eq!(status, 400, "{text}");
    let big = vec![b' '; ablate::gateway::MAX_REQUEST_BYTES + 1];
    let resp = gw
        .http
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(&gw.key)
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 413);
    assert!(server.chats.lock().unwrap().is_empty());
    // The unknown path is traced too, before the bad bodies.
    let steps = gw.steps();
    assert_eq!(steps[0].notes, ["refused: GET /v1/embeddings"]);
    let steps = &steps[1..];
    assert_eq!(steps.len(), 3, "bad bodies are traced");
    assert_eq!(steps[0].request, json!("{not json"));
    assert!(steps[0].error.as_deref().unwrap().starts_with("the request body is not JSON"));
    assert!(steps[1].error.as_deref().unwrap().contains("image_url"));
    assert!(steps[2].error.as_deref().unwrap().contains("exceeds"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_harness_hangs_up_on_is_still_counted_and_traced() {
    let server = start(Arc::new(|path, _, _| {
        meta(path).unwrap_or_else(|| openai_text("slow").delayed(Duration::from_millis(400)))
    }))
    .await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(10, 100_000)).await;
    let sent = gw
        .http
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(&gw.key)
        .timeout(Duration::from_millis(100))
        .json(&json!({"messages": [user("hi")]}))
        .send()
        .await;
    assert!(sent.unwrap_err().is_timeout());
    assert_eq!(gw.meter.in_flight(), 1);
    assert!(gw.steps().is_empty());
    tokio::time::timeout(Duration::from_secs(5), gw.meter.settled())
        .await
        .expect("the call finishes");
    let steps = gw.steps();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].tokens.total(), 120);
    assert_eq!(steps[0].reply.as_ref().unwrap()["choices"][0]["message"]["content"], "slow");
    assert_eq!((gw.meter.summary().steps, gw.meter.summary().tokens.total()), (1, 120));
}

/// An upstream that honours max_tokens: `min(max_tokens, cap)` output tokens (the text that
/// long), 5 prompt tokens; `usage` as `usage(prompt, completion)` gives it.
/// A reply's `usage` from its prompt and completion token counts (Null: none).
type Usage = fn(u64, u64) -> Value;

fn sized_server(cap: u64, delay: Duration, usage: Usage) -> Handler {
    Arc::new(move |path, body, _| {
        meta(path).unwrap_or_else(|| {
            let n = body["max_tokens"].as_u64().unwrap_or(cap).min(cap);
            let mut reply = json!({"id": "x", "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "x".repeat(n as usize)}, "finish_reason": "length"}]});
            let u = usage(5, n);
            if !u.is_null() {
                reply["usage"] = u;
            }
            Reply::json(reply).delayed(delay)
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_cannot_spend_more_than_the_token_budget() {
    // 40 calls at once under max_total_tokens = 1000, 600 output tokens a call allowed.
    let server = start(sized_server(
        600,
        Duration::from_millis(400),
        |p, c| json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}),
    ))
    .await;
    let mut b = budget(100, 1000);
    b.max_output_tokens_per_step = 600;
    let gw = Arc::new(gateway(spec(Provider::Openai, &server.url), b).await);
    let body = json!({"model": "exp-model", "messages": [user("hi")]});
    let calls: Vec<_> = (0..40)
        .map(|_| {
            let (gw, body) = (gw.clone(), body.clone());
            tokio::spawn(async move { gw.post("/v1/chat/completions", &body).await })
        })
        .collect();
    let mut statuses = Vec::new();
    for c in calls {
        let (status, _, text) = c.await.unwrap();
        if status == 429 {
            assert!(text.contains("budget_exhausted") && text.contains("total_tokens"), "{text}");
        }
        statuses.push(status);
    }
    // The first call reserves its cap (600) and its prompt's bound (2 bytes of "hi" + 8 = 10);
    // the second gets what is left, 1000 - 610 = 390; nothing is left for the other 38.
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 2, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 38, "{statuses:?}");
    let mut caps: Vec<u64> =
        server.chats.lock().unwrap().iter().map(|b| b["max_tokens"].as_u64().unwrap()).collect();
    caps.sort();
    assert_eq!(caps, [390, 600]);
    // Spent: 600 + 390 output and 5 + 5 prompt tokens: exactly the budget.
    let s = gw.meter.summary();
    assert_eq!((s.steps, s.calls, s.tokens.total()), (2, 40, 1000));
    assert_eq!(stop_of(&gw.meter).await, GatewayStop::Budget(BudgetLimit::TotalTokens));
    let clamped: Vec<TraceStep> = gw
        .steps()
        .into_iter()
        .filter(|s| s.notes.iter().any(|n| n.starts_with("max_tokens: 390")))
        .collect();
    assert_eq!(clamped.len(), 1, "the clamped cap is noted in its trace line");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_that_spend_little_do_not_end_the_budget_by_their_reservations() {
    // Six calls at once under 16,000 tokens, 4,096 output tokens a call allowed, each spending
    // 60 output and 5 prompt tokens. Three reserve 4,096 + 10 each (12,318), the fourth gets the
    // 3,682 left; the fifth and sixth wait for one to settle instead of ending the trial.
    let server = start(sized_server(
        60,
        Duration::from_millis(300),
        |p, c| json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}),
    ))
    .await;
    let mut b = budget(100, 16_000);
    b.max_output_tokens_per_step = 4096;
    let gw = Arc::new(gateway(spec(Provider::Openai, &server.url), b).await);
    let body = json!({"model": "exp-model", "messages": [user("hi")]});
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let (gw, body) = (gw.clone(), body.clone());
            tokio::spawn(async move { gw.post("/v1/chat/completions", &body).await.0 })
        })
        .collect();
    let mut statuses = Vec::new();
    for c in calls {
        statuses.push(c.await.unwrap());
    }
    assert_eq!(statuses, [200; 6]);
    let s = gw.meter.summary();
    // 6 x (5 + 60) tokens spent: nothing is exhausted, nothing reached, the harness not stopped.
    assert_eq!((s.steps, s.tokens.total(), s.limit_reached, s.exhausted), (6, 390, None, None));
    assert!(not_stopped(&gw.meter).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_holds_a_bounded_conversation_whatever_it_asks() {
    let server = start(openai_server()).await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(100, 100_000_000)).await;
    // 250,000 empty messages in a 7 MiB body (1,250,003 JSON values and keys: 5 a message, the
    // list, the body and its key): refused by the values it holds, counted before any is built;
    // 12,000 (60,003) by the messages it lists.
    let empty = json!({"role": "user", "content": ""});
    let body = json!({"messages": vec![empty.clone(); 250_000]});
    let (status, _, text) = gw.post("/v1/chat/completions", &body).await;
    assert_eq!(status, 400, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains("more than 100000 JSON values"));
    let body = json!({"messages": vec![empty; 12_000]});
    let (status, _, text) = gw.post("/v1/chat/completions", &body).await;
    assert_eq!(status, 400, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["param"], "messages");
    assert!(v["error"]["message"].as_str().unwrap().contains("12000 items, over the 10000"));
    assert!(server.chats.lock().unwrap().is_empty(), "neither reached the model");
    // A chain of previous_response_id, each call 1.5 MB of new input: the conversation it would
    // send grows by each call and its reply; once past 8 MiB the call is refused naming the
    // field, and no request forwarded is ever larger than the body limit.
    let chunk = "x".repeat(1_500_000);
    let mut previous: Option<String> = None;
    let mut refused_at = None;
    for step in 1..=12 {
        let mut body = json!({"model": "exp-model", "input": chunk.clone()});
        if let Some(p) = &previous {
            body["previous_response_id"] = json!(p);
        }
        let (status, _, text) = gw.post("/v1/responses", &body).await;
        let v: Value = serde_json::from_str(&text).unwrap();
        if status == 400 {
            assert_eq!(v["error"]["param"], "previous_response_id", "{v}");
            refused_at = Some(step);
            break;
        }
        assert_eq!(status, 200, "{text}");
        previous = v["id"].as_str().map(str::to_string);
    }
    // 5 x 1.5 MB = 7.5 MB fit in 8 MiB (8,388,608 bytes); the sixth call's 9 MB does not.
    assert_eq!(refused_at, Some(6));
    let largest = server.chats.lock().unwrap().iter().map(|b| b.to_string().len()).max().unwrap();
    assert!(largest < ablate::gateway::MAX_REQUEST_BYTES, "{largest}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_without_usable_usage_are_counted_from_their_bytes() {
    // Each kind of usage a provider may get wrong: none, a negative count, one too large to be a
    // count, a fraction. The budget binds all the same: each call counts its prompt's bound
    // ("hi": 2 bytes + 8) and its text's bytes (as many as the cap it was sent).
    let kinds: [(&str, Usage); 4] = [
        ("absent", |_, _| Value::Null),
        ("negative", |_, _| json!({"prompt_tokens": -5, "completion_tokens": -1})),
        ("huge", |_, _| json!({"prompt_tokens": 1e20, "completion_tokens": 1e20})),
        (
            "fraction",
            |p, c| json!({"prompt_tokens": p as f64 + 0.5, "completion_tokens": c as f64 * 0.5}),
        ),
    ];
    for (kind, usage) in kinds {
        let server = start(sized_server(300, Duration::ZERO, usage)).await;
        let gw = gateway(spec(Provider::Openai, &server.url), budget(100, 1000)).await;
        let body = json!({"model": "exp-model", "messages": [user("hi")]});
        let mut forwarded = 0;
        for _ in 0..20 {
            let (status, _, text) = gw.post("/v1/chat/completions", &body).await;
            if status == 429 {
                assert!(text.contains("total_tokens"), "{kind}: {text}");
                break;
            }
            assert_eq!(status, 200, "{kind}: {text}");
            forwarded += 1;
        }
        // Caps 200, 200, 200, 200 (840 counted), then 160 (1000 - 840): 1010 counted, and the
        // sixth call refused. Counted as 0, the budget would never have bound.
        assert_eq!(forwarded, 5, "{kind}");
        let s = gw.meter.summary();
        assert_eq!(
            (s.tokens.input, s.tokens.output, s.tokens_estimated_calls),
            (50, 960, 5),
            "{kind}"
        );
        let steps = gw.steps();
        let estimated: Vec<&TraceStep> = steps
            .iter()
            .filter(|s| s.tokens_counted == ablate::record::TokenSource::Estimated)
            .collect();
        assert_eq!(estimated.len(), 5, "{kind}");
        assert!(
            estimated
                .iter()
                .all(|s| s.notes.iter().any(|n| n.ends_with("tokens estimated from bytes"))),
            "{kind}: {:?}",
            estimated[0].notes
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_requests_are_traced_as_an_excerpt_with_their_size() {
    // Past the step budget, a harness that keeps sending 1 MB bodies fills no trace.
    let server = start(openai_server()).await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(1, 100_000)).await;
    let big = json!({"model": "exp-model", "messages": [user(&"y".repeat(1 << 20))]});
    let (status, _, _) = gw
        .post("/v1/chat/completions", &json!({"model": "exp-model", "messages": [user("hi")]}))
        .await;
    assert_eq!(status, 200);
    for _ in 0..3 {
        let (status, _, _) = gw.post("/v1/chat/completions", &big).await;
        assert_eq!(status, 429);
    }
    let steps = gw.steps();
    assert_eq!(steps.len(), 4);
    let size = big.to_string().len() as u64;
    for s in &steps[1..] {
        assert_eq!(s.request["bytes"].as_u64(), Some(size), "{:?}", s.request);
        assert_eq!(
            s.request["excerpt"].as_str().map(str::len),
            Some(ablate::gateway::REFUSED_EXCERPT_BYTES)
        );
        assert!(serde_json::to_string(s).unwrap().len() < 8 << 10);
    }
}

/// An upstream serving embeddings in both APIs: input i gets [i + 0.5, -1.25, 0.375]
/// (floats exact in float32), 3 tokens an input reported (none when `usage` is false).
fn embedding_server(usage: bool) -> Handler {
    Arc::new(move |path, body, _| {
        if let Some(m) = meta(path) {
            return m;
        }
        let inputs: Vec<Value> = match &body["input"] {
            Value::Array(a) => a.clone(),
            v => vec![v.clone()],
        };
        let vector = |i: usize| json!([i as f64 + 0.5, -1.25, 0.375]);
        // What must reach the upstream: its own model id for the experiment's name, floats.
        if body["model"] == "exp-model" || body.get("encoding_format").is_some_and(|f| f != "float")
        {
            return Reply::status(
                400,
                r#"{"error": {"message": "the gateway forwarded the harness's name or encoding"}}"#,
            );
        }
        match path {
            "/v1/embeddings" if body["model"] == "unknown-embedder" => {
                Reply::status(404, r#"{"error": {"message": "model not found"}}"#)
            }
            "/v1/embeddings" => {
                let data: Vec<Value> = (0..inputs.len())
                    .map(|i| json!({"object": "embedding", "index": i, "embedding": vector(i)}))
                    .collect();
                let mut v = json!({"object": "list", "data": data, "model": body["model"]});
                if usage {
                    v["usage"] = json!({"prompt_tokens": 3 * inputs.len(), "total_tokens": 3 * inputs.len()});
                }
                Reply::json(v)
            }
            "/api/embed" => {
                let mut v = json!({"model": body["model"], "embeddings": (0..inputs.len()).map(vector).collect::<Vec<_>>()});
                if usage {
                    v["prompt_eval_count"] = json!(3 * inputs.len());
                }
                Reply::json(v)
            }
            _ => Reply::status(404, "{}"),
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_are_forwarded_in_the_form_asked_and_their_tokens_metered() {
    for provider in [Provider::Openai, Provider::Ollama] {
        let server = start(embedding_server(true)).await;
        let gw = gateway(spec(provider, &server.url), budget(1, 100)).await;
        // OpenAI's form, floats: two inputs, the experiment's name standing for the upstream's id.
        let (status, _, text) =
            gw.post("/v1/embeddings", &json!({"model": "exp-model", "input": ["a", "b"]})).await;
        assert_eq!(status, 200, "{provider:?}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["data"][1]["embedding"], json!([1.5, -1.25, 0.375]), "{provider:?}");
        assert_eq!(
            (v["usage"]["prompt_tokens"].as_u64(), v["model"].as_str()),
            (Some(6), Some("exp-model"))
        );
        // Base64 (the openai SDK's default): [0.5, -1.25, 0.375] as little-endian float32, by
        // python3 -c 'import base64,struct; print(base64.b64encode(struct.pack("<3f", 0.5, -1.25, 0.375)).decode())'
        let (_, _, text) = gw
            .post(
                "/v1/embeddings",
                &json!({"model": "nomic", "input": "a", "encoding_format": "base64"}),
            )
            .await;
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap()["data"][0]["embedding"],
            "AAAAPwAAoL8AAMA+",
            "{provider:?}"
        );
        // Ollama's two forms.
        let (_, _, text) =
            gw.post("/api/embed", &json!({"model": "nomic", "input": ["a", "b", "c"]})).await;
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (v["embeddings"][2][0].as_f64(), v["prompt_eval_count"].as_u64()),
            (Some(2.5), Some(9)),
            "{provider:?}"
        );
        let (_, _, text) =
            gw.post("/api/embeddings", &json!({"model": "nomic", "prompt": "a"})).await;
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            json!({"embedding": [0.5, -1.25, 0.375]}),
            "{provider:?}"
        );
        // 6 + 3 + 9 + 3 = 21 input tokens, four calls, no step: max_steps = 1 still allows a chat call.
        let s = gw.meter.summary();
        assert_eq!(
            (s.tokens.input, s.tokens.output, s.steps, s.embedding_calls),
            (21, 0, 0, 4),
            "{provider:?}"
        );
        let steps = gw.steps();
        assert_eq!(steps.len(), 4);
        assert!(
            steps.iter().all(|st| st.notes[0] == "embeddings" && st.tokens.input > 0),
            "{steps:?}"
        );
        assert_eq!(
            steps[0].reply,
            Some(json!({"vectors": 2, "dimensions": 3})),
            "the trace keeps the shape, not the vectors"
        );
        assert_eq!(server.chats.lock().unwrap().len(), 0, "no chat call was made");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_are_refused_past_the_token_budget_and_an_upstream_refusal_is_passed_back() {
    // Without usage, each call counts its input's bytes: 40 bytes a call under 100 tokens.
    let server = start(embedding_server(false)).await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(10, 100)).await;
    let body = json!({"model": "e", "input": "x".repeat(40)});
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(gw.post("/v1/embeddings", &body).await.0);
    }
    // 0, 40, 80 counted before the first three calls (each under 100); 120 before the fourth.
    assert_eq!(statuses, [200, 200, 200, 429]);
    let s = gw.meter.summary();
    assert_eq!((s.tokens.input, s.tokens_estimated_calls, s.embedding_calls), (120, 3, 4));
    assert_eq!(s.exhausted, Some(BudgetLimit::TotalTokens));

    let server = start(embedding_server(true)).await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(10, 1000)).await;
    let (status, _, text) =
        gw.post("/v1/embeddings", &json!({"model": "unknown-embedder", "input": "a"})).await;
    assert_eq!(status, 404, "{text}");
    assert!(text.contains("model not found"), "{text}");
    assert!(
        not_stopped(&gw.meter).await,
        "an upstream's refusal of the embedding model does not stop the trial"
    );
    let (status, _, text) =
        gw.post("/v1/embeddings", &json!({"model": "e", "input": [[1, 2, 3]]})).await;
    assert_eq!(status, 400);
    assert!(text.contains("token ids"), "{text}");
}

/// A provider with no embeddings (as the embedded model): chat is never called here.
struct ChatOnly;

impl ablate::model::ModelClient for ChatOnly {
    fn chat<'a>(
        &'a self,
        _: &'a ablate::model::ChatRequest,
        _: String,
    ) -> ablate::model::BoxFuture<'a, ablate::model::CallOutcome> {
        unreachable!("no chat call in this test")
    }
    fn identity(
        &self,
    ) -> ablate::model::BoxFuture<'_, Result<Option<String>, ablate::model::ModelError>> {
        Box::pin(async { Ok(None) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_without_embeddings_answers_501_traced_and_counted() {
    let gw =
        gateway_with(spec(Provider::Local, "unused"), Arc::new(ChatOnly), budget(10, 1000)).await;
    for (path, body) in [
        ("/v1/embeddings", json!({"model": "e", "input": "a"})),
        ("/api/embed", json!({"model": "e", "input": "a"})),
    ] {
        let (status, _, text) = gw.post(path, &body).await;
        assert_eq!(status, 501, "{text}");
        assert!(text.contains("serves no embeddings"), "{text}");
    }
    let s = gw.meter.summary();
    assert_eq!((s.refused_requests, s.embedding_calls, s.tokens.total()), (2, 2, 0));
    assert_eq!(gw.steps()[1].notes, ["embeddings", "refused: POST /api/embed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_when_the_working_time_runs_out_is_cut_traced_and_answered() {
    // The model takes 30 s; the runner marks the working time spent 300 ms into the call (as
    // it does for a provider, like the embedded model, that does not stop at the time left).
    let server = start(Arc::new(|path, _, _| {
        meta(path).unwrap_or_else(|| openai_text("x").delayed(Duration::from_secs(30)))
    }))
    .await;
    let gw = gateway(spec(Provider::Openai, &server.url), budget(4, 1_000_000)).await;
    let meter = gw.meter.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        meter.exhaust(BudgetLimit::WorkingSeconds);
    });
    let started = Instant::now();
    let (status, _, text) =
        gw.post("/v1/chat/completions", &json!({"messages": [user("x")]})).await;
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("cut in flight") && text.contains("working_seconds"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(10), "the call did not wait for the model");
    tokio::time::timeout(Duration::from_secs(5), gw.meter.settled()).await.expect("settled");
    let steps = gw.steps();
    assert_eq!(steps.len(), 1, "the call in flight has its trace line");
    assert!(steps[0].error.as_deref().unwrap_or_default().contains("cut in flight"));
    assert_eq!(gw.meter.summary().steps, 1);
}
