//! The gateway of external harnesses: a per-trial HTTP server speaking the
//! OpenAI and Ollama chat APIs, forwarding each call to the experiment's
//! model (any `ModelClient`) under the trial's budget, and tracing each call.
//!
//! The harness holds one credential (`TrialMeter::key`), never the upstream
//! endpoint or its key. The experiment fixes sampling (temperature, top_p,
//! the trial seed) and the output cap of each call, whatever the harness
//! asks; what it asked is noted in the trace. docs/external-harness.md,
//! "The gateway", is the user-facing description.

pub mod anthropic;
pub mod delivered;
pub mod embeddings;
pub mod gemini;
pub mod legacy;
pub mod responses;
pub mod wire;

use crate::container::trial::ContainerExec;
use crate::experiment::config::{Budget, ModelSpec};
use crate::model::{ChatRequest, ModelClient, ModelError};
use crate::record::omit::{TracedSoFar, holds_string};
use crate::record::{BudgetLimit, Tokens, TraceStep};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;
use wire::{Api, Asked, BadRequest, ReplyMeta};

/// Largest request body accepted (413 beyond).
pub const MAX_REQUEST_BYTES: usize = 8 << 20;

/// The version `/api/version` reports, for Ollama clients that check it.
pub const OLLAMA_VERSION: &str = "0.9.0";

/// Why the gateway wants the harness stopped.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GatewayStop {
    /// A call was refused past this limit (or the runner marked it).
    Budget(BudgetLimit),
    /// The model endpoint failed beyond its retry policy.
    ProviderError(String),
}

/// A setting the experiment fixes that the harness asked otherwise.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overridden {
    /// Calls that asked a different value.
    pub count: u32,
    /// The last value asked.
    pub last: Value,
}

/// What a trial's calls through the gateway came to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeterSummary {
    /// Model calls forwarded upstream (what `max_steps` counts).
    pub steps: u32,
    /// Chat requests traced: forwarded and refused.
    pub calls: u32,
    pub tokens: Tokens,
    /// Forwarded calls whose tokens were estimated (no usable usage upstream).
    pub tokens_estimated_calls: u32,
    /// Rate-limit and queue waits reported by the client.
    pub wait: Duration,
    /// Time since the meter was made, less `wait`, up to the moment the gateway
    /// first wanted the harness stopped.
    pub working: Duration,
    pub cost_usd: Option<f64>,
    /// The limit a call was refused at (or the runner marked with `exhaust`).
    pub exhausted: Option<BudgetLimit>,
    /// The first limit reached, refused at or not: `steps` after the
    /// max_steps-th call, `total_tokens` / `cost` after the call crossing it.
    pub limit_reached: Option<BudgetLimit>,
    /// The error of the call that failed beyond the retry policy.
    pub provider_error: Option<String>,
    /// That error was a request timeout (not one the working-time budget caused).
    pub request_timed_out: bool,
    /// Settings asked and overridden, by key as the harness named it
    /// (`model`, `temperature`, `top_p`, `max_tokens`, `max_completion_tokens`,
    /// `num_predict`, `seed`).
    pub requested: BTreeMap<String, Overridden>,
    /// Distinct `system_fingerprint`s of the replies, in the order first seen.
    pub fingerprints: Vec<String>,
    /// Commands run through the exec endpoint (a harness on the host, a container task).
    pub exec_calls: u32,
    /// Embeddings calls forwarded upstream (their tokens are in `tokens`; they are not steps).
    pub embedding_calls: u32,
    /// From the meter's start to the first model call the gateway received.
    pub first_request: Option<Duration>,
    /// Requests refused before any model call: no such endpoint, a wrong key.
    pub refused_requests: u32,
    /// The first chat request refused for what it asked (a field or a value
    /// the gateway or the provider does not support), as the refusal said it.
    pub unsupported: Option<String>,
    /// What the forwarded calls asked and what reached the model, field by field.
    pub delivery: crate::record::delivery::Delivery,
}

#[derive(Default)]
struct State {
    /// Trace lines numbered so far (chat requests and exec calls).
    lines: u32,
    calls: u32,
    exec_calls: u32,
    embedding_calls: u32,
    forwarded: u32,
    in_flight: u32,
    tokens: Tokens,
    /// Tokens calls in flight may still add: each one's output cap and its prompt's bound.
    reserved: u64,
    estimated_calls: u32,
    wait: Duration,
    exhausted: Option<BudgetLimit>,
    limit_reached: Option<BudgetLimit>,
    provider_error: Option<String>,
    request_timed_out: bool,
    requested: BTreeMap<String, Overridden>,
    /// Distinct `system_fingerprint`s of the replies, in the order first seen.
    fingerprints: Vec<String>,
    first_request: Option<Duration>,
    refused_requests: u32,
    unsupported: Option<String>,
    delivery: crate::record::delivery::Delivery,
    /// When the gateway first wanted the harness stopped: working time ends there (the grace after it is not working time).
    stopped_at: Option<Duration>,
    /// Responses API: stored conversations by response id, oldest first.
    stored: std::collections::VecDeque<(String, Vec<crate::model::Message>)>,
}

struct Tracer {
    on_step: Box<dyn FnMut(TraceStep) + Send>,
    so_far: TracedSoFar,
    /// The previous line's request messages, as received.
    previous: Vec<Value>,
}

/// One trial attempt's credential, budget, counters and trace.
pub struct TrialMeter {
    trial_id: String,
    attempt: u32,
    model: ModelSpec,
    client: Arc<dyn ModelClient>,
    budget: Budget,
    seed: u64,
    key: String,
    start: Instant,
    state: Mutex<State>,
    tracer: Mutex<Tracer>,
    stop: watch::Sender<Option<GatewayStop>>,
    /// The working time is spent: calls still in flight are cut (`out_of_time`).
    time_up: watch::Sender<bool>,
    in_flight: watch::Sender<u32>,
    /// The container the exec endpoint runs commands in; unset, the endpoint does not exist.
    exec: std::sync::OnceLock<ContainerExec>,
    /// Exec calls run one at a time.
    exec_turn: tokio::sync::Mutex<()>,
}

impl TrialMeter {
    pub fn new(
        trial_id: String,
        attempt: u32,
        model: ModelSpec,
        client: Arc<dyn ModelClient>,
        budget: Budget,
        seed: u64,
        on_step: Box<dyn FnMut(TraceStep) + Send>,
    ) -> Arc<TrialMeter> {
        Arc::new(TrialMeter {
            trial_id,
            attempt,
            model,
            client,
            budget,
            seed,
            key: format!("{:032x}", rand::random::<u128>()),
            start: Instant::now(),
            state: Mutex::new(State::default()),
            tracer: Mutex::new(Tracer {
                on_step,
                so_far: TracedSoFar::default(),
                previous: Vec::new(),
            }),
            stop: watch::channel(None).0,
            time_up: watch::channel(false).0,
            in_flight: watch::channel(0).0,
            exec: std::sync::OnceLock::new(),
            exec_turn: tokio::sync::Mutex::new(()),
        })
    }

    /// Open the exec endpoint on `target`: a harness on the host reaches the
    /// task's container through it (and through nothing else).
    pub fn allow_exec(&self, target: ContainerExec) {
        let _ = self.exec.set(target);
    }

    /// The credential the harness must present (32 hex characters).
    pub fn key(&self) -> &str {
        &self.key
    }

    fn working_in(&self, st: &State) -> Duration {
        let now = self.start.elapsed();
        st.stopped_at.map_or(now, |at| at.min(now)).saturating_sub(st.wait)
    }

    /// Time since the meter was made, less the waits the client reported.
    pub fn working(&self) -> Duration {
        self.working_in(&self.state.lock().unwrap())
    }

    pub fn summary(&self) -> MeterSummary {
        let st = self.state.lock().unwrap();
        MeterSummary {
            steps: st.forwarded,
            calls: st.calls,
            tokens: st.tokens,
            tokens_estimated_calls: st.estimated_calls,
            wait: st.wait,
            working: self.working_in(&st),
            cost_usd: st.tokens.cost(self.model.price.as_ref()),
            exhausted: st.exhausted,
            limit_reached: st.limit_reached,
            provider_error: st.provider_error.clone(),
            request_timed_out: st.request_timed_out,
            requested: st.requested.clone(),
            fingerprints: st.fingerprints.clone(),
            exec_calls: st.exec_calls,
            embedding_calls: st.embedding_calls,
            first_request: st.first_request,
            refused_requests: st.refused_requests,
            unsupported: st.unsupported.clone(),
            delivery: st.delivery.clone(),
        }
    }

    /// Resolves once the gateway wants the harness stopped; pending otherwise.
    pub async fn stopped(&self) -> GatewayStop {
        let mut rx = self.stop.subscribe();
        // The guard of `wait_for` must not live across the await below.
        let got = rx.wait_for(Option::is_some).await.ok().and_then(|v| v.clone());
        match got {
            Some(why) => why,
            // The sender lives as long as self: unreachable, but never resolve wrongly.
            None => std::future::pending().await,
        }
    }

    /// Resolves once the working time is spent (never for another stop: the
    /// calls forwarded within a step or token budget are answered).
    async fn out_of_time(&self) {
        let mut rx = self.time_up.subscribe();
        let _ = rx.wait_for(|up| *up).await;
    }

    /// Mark a limit the runner detected itself (the wall clock): later calls
    /// are refused, and `stopped` resolves.
    pub fn exhaust(&self, limit: BudgetLimit) {
        let mut st = self.state.lock().unwrap();
        st.exhausted.get_or_insert(limit);
        st.limit_reached.get_or_insert(limit);
        drop(st);
        self.request_stop(GatewayStop::Budget(limit));
    }

    /// What is left of the budget: model calls, tokens (less what calls in
    /// flight may still add) and working seconds.
    pub fn remaining(&self) -> (u32, u64, f64) {
        let st = self.state.lock().unwrap();
        let b = &self.budget;
        (
            b.max_steps.saturating_sub(st.forwarded),
            b.max_total_tokens.saturating_sub(st.tokens.total().saturating_add(st.reserved)),
            (b.max_working_seconds - self.working_in(&st).as_secs_f64()).max(0.0),
        )
    }

    fn budget_headers(&self, h: &mut hyper::HeaderMap) {
        let (steps, tokens, secs) = self.remaining();
        for (k, v) in [
            (HEADER_STEPS, steps.to_string()),
            (HEADER_TOKENS, tokens.to_string()),
            (HEADER_SECONDS, format!("{secs:.1}")),
        ] {
            if let Ok(v) = v.parse() {
                h.insert(k, v);
            }
        }
    }

    /// Calls forwarded and not yet answered.
    pub fn in_flight(&self) -> u32 {
        *self.in_flight.borrow()
    }

    /// Resolves when no call is in flight: every forwarded call has been traced.
    pub async fn settled(&self) {
        let mut rx = self.in_flight.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    fn request_stop(&self, why: GatewayStop) {
        if why == GatewayStop::Budget(BudgetLimit::WorkingSeconds) {
            self.time_up.send_replace(true);
        }
        {
            let mut st = self.state.lock().unwrap();
            if st.stopped_at.is_none() {
                st.stopped_at = Some(self.start.elapsed());
            }
        }
        self.stop.send_if_modified(|s| {
            if s.is_none() {
                *s = Some(why);
                true
            } else {
                false
            }
        });
    }

    /// A chat request refused for what it asked: the first refusal is kept.
    fn note_unsupported(&self, message: String) {
        self.state.lock().unwrap().unsupported.get_or_insert(message);
    }

    /// A model call arrived: the first one's time is kept.
    fn note_request(&self) {
        let mut st = self.state.lock().unwrap();
        if st.first_request.is_none() {
            st.first_request = Some(self.start.elapsed());
        }
    }

    /// A request refused before any model call (no such endpoint, a wrong
    /// key): one trace line, its body as an excerpt, up to TRACED_REFUSALS.
    fn trace_refusal(&self, method: &Method, path: &str, body: &Result<Bytes, bool>, reply: Value) {
        let n = {
            let mut st = self.state.lock().unwrap();
            st.refused_requests += 1;
            if st.refused_requests > TRACED_REFUSALS {
                return;
            }
            st.lines += 1;
            st.lines
        };
        let mut step = self.blank_step(n);
        step.error = reply
            .pointer("/error/message")
            .or_else(|| reply.get("error"))
            .and_then(Value::as_str)
            .map(str::to_string);
        step.notes.push(format!("refused: {method} {path}"));
        step.reply = Some(reply);
        let received = match body {
            Ok(b) if !b.is_empty() => serde_json::from_slice::<Value>(b).unwrap_or_else(|_| {
                Value::String(crate::model::http::truncate(&String::from_utf8_lossy(b), 64 * 1024))
            }),
            _ => Value::Null,
        };
        self.trace(
            step,
            refused_excerpt(&json!({"method": method.as_str(), "path": path, "body": received})),
        );
    }

    /// After a call's tokens are counted: the token and cost limits it reached.
    fn note_spent(&self, st: &mut State) {
        if st.tokens.total() >= self.budget.max_total_tokens {
            st.limit_reached.get_or_insert(BudgetLimit::TotalTokens);
        }
        if let (Some(max), Some(c)) =
            (self.budget.max_cost_usd, st.tokens.cost(self.model.price.as_ref()))
            && c >= max
        {
            st.limit_reached.get_or_insert(BudgetLimit::Cost);
        }
    }

    /// A forwarded call failed beyond the retry policy: the harness is to be
    /// stopped, for its working time (a timeout the budget caused: true) or
    /// for the provider's error.
    fn upstream_failed(
        &self,
        mut st: std::sync::MutexGuard<'_, State>,
        e: &ModelError,
        limited_by_budget: bool,
    ) -> bool {
        let budget_timeout = matches!(e, ModelError::Timeout(_)) && limited_by_budget;
        let stop = if budget_timeout {
            st.exhausted.get_or_insert(BudgetLimit::WorkingSeconds);
            st.limit_reached.get_or_insert(BudgetLimit::WorkingSeconds);
            GatewayStop::Budget(BudgetLimit::WorkingSeconds)
        } else {
            let msg = e.to_string();
            st.provider_error.get_or_insert(msg.clone());
            st.request_timed_out |= matches!(e, ModelError::Timeout(_));
            GatewayStop::ProviderError(msg)
        };
        drop(st);
        self.request_stop(stop);
        budget_timeout
    }

    /// The conversation stored under a response id (Responses API).
    fn stored(&self, id: &str) -> Option<Vec<crate::model::Message>> {
        self.state.lock().unwrap().stored.iter().find(|(k, _)| k == id).map(|(_, m)| m.clone())
    }

    fn store(&self, id: String, conversation: Vec<crate::model::Message>) {
        let mut st = self.state.lock().unwrap();
        if st.stored.len() >= responses::STORED_RESPONSES {
            st.stored.pop_front();
        }
        st.stored.push_back((id, conversation));
    }

    /// The next trace line's number, counting a chat request.
    fn next_call(&self) -> u32 {
        let mut st = self.state.lock().unwrap();
        st.calls += 1;
        st.lines += 1;
        st.lines
    }

    /// The next trace line's number, counting an exec call.
    fn next_exec(&self) -> u32 {
        let mut st = self.state.lock().unwrap();
        st.exec_calls += 1;
        st.lines += 1;
        st.lines
    }

    /// The next trace line's number, counting an embeddings call.
    fn next_embedding(&self) -> u32 {
        let mut st = self.state.lock().unwrap();
        st.embedding_calls += 1;
        st.lines += 1;
        st.lines
    }

    fn operation_id(&self, n: u32) -> String {
        format!("{}-{}-s{}", self.trial_id, self.attempt, n)
    }

    fn blank_step(&self, n: u32) -> TraceStep {
        TraceStep::blank(&self.trial_id, self.attempt, n, 1, self.operation_id(n))
    }

    /// Hand a step to `on_step`, its request (the body as received) less the
    /// leading messages the previous line's request held, and `tools` when
    /// the previous traced list was the same.
    fn trace(&self, mut step: TraceStep, received: Value) {
        let mut t = self.tracer.lock().unwrap();
        let current: Vec<Value> =
            received.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
        t.so_far.messages = t.previous.iter().zip(&current).take_while(|(a, b)| a == b).count();
        let (request, omits) = t.so_far.request(received);
        step.request = request;
        step.request_omits = omits.map(|mut o| {
            o.previous_request = o.messages > 0;
            o
        });
        t.previous = current;
        (t.on_step)(step);
    }

    /// Check the budget and reserve a step and tokens; Err is the limit that
    /// refuses the call. Tokens: the call is forwarded only when at least one
    /// output token fits in `max_total_tokens` beside what is counted and what
    /// the calls in flight may still add (their output caps and prompt
    /// bounds); its cap is clamped to that room. So calls in parallel can never
    /// spend more than calls one at a time: at most the last call's own prompt
    /// over the budget.
    /// An embeddings call reserves its input's bound only and is not a step.
    fn reserve(&self, prompt_bound: u64, kind: CallKind) -> Result<Reservation, BudgetLimit> {
        let chat = kind == CallKind::Chat;
        let mut st = self.state.lock().unwrap();
        let b = &self.budget;
        let working = self.working_in(&st).as_secs_f64();
        let committed = st.tokens.total().saturating_add(st.reserved);
        let limit = st.exhausted.or_else(|| {
            if chat && st.forwarded >= b.max_steps {
                Some(BudgetLimit::Steps)
            } else if committed >= b.max_total_tokens {
                Some(BudgetLimit::TotalTokens)
            } else if working >= b.max_working_seconds {
                Some(BudgetLimit::WorkingSeconds)
            } else if let (Some(max), Some(c)) =
                (b.max_cost_usd, st.tokens.cost(self.model.price.as_ref()))
            {
                (c >= max).then_some(BudgetLimit::Cost)
            } else {
                None
            }
        });
        if let Some(limit) = limit {
            st.exhausted.get_or_insert(limit);
            st.limit_reached.get_or_insert(limit);
            drop(st);
            self.request_stop(GatewayStop::Budget(limit));
            return Err(limit);
        }
        if chat {
            st.forwarded += 1;
            if st.forwarded >= b.max_steps {
                st.limit_reached.get_or_insert(BudgetLimit::Steps);
            }
        }
        st.in_flight += 1;
        self.in_flight.send_replace(st.in_flight);
        let remaining_time = Duration::from_secs_f64((b.max_working_seconds - working).max(0.0));
        let model_timeout = Duration::from_secs_f64(self.model.request_timeout_seconds);
        let remaining_tokens = b.max_total_tokens.saturating_sub(committed);
        let max_tokens = if chat {
            (b.max_output_tokens_per_step as u64).min(remaining_tokens).max(1) as u32
        } else {
            0
        };
        let reserved = max_tokens as u64 + prompt_bound;
        st.reserved += reserved;
        Ok(Reservation {
            max_tokens,
            clamped: chat && (max_tokens as u64) < b.max_output_tokens_per_step as u64,
            reserved,
            timeout: remaining_time.min(model_timeout),
            limited_by_budget: remaining_time < model_timeout,
        })
    }

    /// Notes of the settings asked otherwise than the experiment fixes, counted in the summary.
    fn overrides(&self, asked: &Asked, max_tokens: u32) -> Vec<String> {
        let m = &self.model;
        let num = |v: &Value, fixed: f64| v.as_f64() == Some(fixed);
        let mut found: Vec<(String, Value, String)> = Vec::new();
        if let Some(v) = &asked.model {
            let same = v.as_str().is_some_and(|s| {
                let s = s.strip_suffix(":latest").unwrap_or(s);
                s == m.name || s == m.model
            });
            if !same {
                found.push(("model".into(), v.clone(), format!("`{}`", m.name)));
            }
        }
        if let Some(v) = asked.temperature.as_ref().filter(|v| !num(v, m.temperature)) {
            found.push(("temperature".into(), v.clone(), m.temperature.to_string()));
        }
        if let Some(v) = asked.top_p.as_ref().filter(|v| !num(v, m.top_p)) {
            found.push(("top_p".into(), v.clone(), m.top_p.to_string()));
        }
        if let Some((k, v)) =
            asked.max_tokens.as_ref().filter(|(_, v)| v.as_u64() != Some(max_tokens as u64))
        {
            found.push((k.to_string(), v.clone(), max_tokens.to_string()));
        }
        if let Some(v) = asked.seed.as_ref().filter(|v| v.as_u64() != Some(self.seed)) {
            found.push(("seed".into(), v.clone(), self.seed.to_string()));
        }
        let mut st = self.state.lock().unwrap();
        found
            .into_iter()
            .map(|(k, v, sent)| {
                let note = format!("{k}: asked {v}, sent {sent} (fixed by the experiment)");
                let e = st.requested.entry(k).or_insert(Overridden { count: 0, last: Value::Null });
                e.count += 1;
                e.last = v;
                note
            })
            .collect()
    }
}

/// What a reservation is for: a chat call is a step with an output cap; an
/// embeddings call is neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallKind {
    Chat,
    Embedding,
}

struct Reservation {
    max_tokens: u32,
    /// The cap is below the per-step cap: the remaining total tokens bound it.
    clamped: bool,
    /// Tokens held for the call while in flight.
    reserved: u64,
    timeout: Duration,
    limited_by_budget: bool,
}

type Resp = Response<Full<Bytes>>;

fn respond(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(hyper::header::CONTENT_TYPE, content_type.parse().expect("a valid header value"));
    r
}

/// A 400 refusing a request the API's reader could not read, and its body for the trace.
fn bad_request(api: Api, bad: &BadRequest) -> (Resp, Value) {
    let v = wire::bad_request_body(api, bad);
    (json_response(StatusCode::BAD_REQUEST, &v), v)
}

fn json_response(status: StatusCode, v: &Value) -> Resp {
    let mut r = respond(status, "application/json", v.to_string());
    // OpenAI's SDKs retry 429 and 5xx unless told not to: a refusal is final.
    if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        r.headers_mut().insert("x-should-retry", "false".parse().expect("a valid header value"));
    }
    r
}

/// Serve `meter`'s trial on `listener` until this future is dropped (or its
/// task aborted); open connections end with it.
pub async fn serve(listener: tokio::net::TcpListener, meter: Arc<TrialMeter>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // Out of descriptors and the like: pause rather than spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let meter = meter.clone();
        connections.spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let meter = meter.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(meter, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
        });
    }
}

enum Route {
    Chat(Api),
    /// A Gemini call, and the model its path names.
    Gemini(Api, String),
    GeminiCount(String),
    Models,
    Model(String),
    Tags,
    Show,
    Ps,
    Version,
    Root,
    Exec,
    CountTokens,
    Embeddings(embeddings::EmbedApi),
    NotFound,
}

/// `/k/<key>/rest` -> (Some(key), "/rest"); other paths are left as they are.
fn split_key(path: &str) -> (Option<&str>, &str) {
    if let Some(after) = path.strip_prefix("/k/") {
        return match after.find('/') {
            Some(i) => (Some(&after[..i]), &after[i..]),
            None => (Some(after), "/"),
        };
    }
    (None, path)
}

/// Equal strings, in time independent of where they differ.
fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The credential a request presents, in any of the forms the SDKs send:
/// `Authorization: Bearer` (any case), `x-api-key` (Anthropic), `api-key` (Azure).
fn presented_keys(h: &hyper::HeaderMap) -> Vec<&str> {
    let mut keys = Vec::new();
    for v in h.get_all(hyper::header::AUTHORIZATION) {
        if let Ok(v) = v.to_str()
            && let Some((scheme, key)) = v.trim().split_once(char::is_whitespace)
            && scheme.eq_ignore_ascii_case("bearer")
        {
            keys.push(key.trim());
        }
    }
    for name in ["x-api-key", "api-key", "x-goog-api-key"] {
        keys.extend(h.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::trim));
    }
    keys
}

/// Most refused requests (no such endpoint, a wrong key) traced per trial;
/// beyond, they are counted only.
pub const TRACED_REFUSALS: u32 = 1000;

async fn handle(meter: Arc<TrialMeter>, req: Request<Incoming>) -> Resp {
    let full_path = req.uri().path().to_string();
    let (path_key, path) = split_key(&full_path);
    let path = path.trim_end_matches('/');
    let path = if path.is_empty() { "/" } else { path };
    let mut api = if path.starts_with("/api/") { Api::Ollama } else { Api::OpenAi };
    // Google's clients may send the key as the `key` query parameter.
    let query_key = req
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("key=")).map(str::to_string));
    let authorized = path_key.is_some_and(|k| same_key(k, &meter.key))
        || query_key.is_some_and(|k| same_key(&k, &meter.key))
        || presented_keys(req.headers()).iter().any(|k| same_key(k, &meter.key));
    let gemini = gemini::route(path).filter(|_| req.method() == Method::POST);
    if gemini.is_some() {
        api = Api::Gemini;
    }
    let route = match (req.method(), path) {
        _ if gemini.is_some() => {
            let (model, m) = gemini.clone().expect("a Gemini path");
            match m {
                gemini::Method::Generate => Route::Gemini(Api::Gemini, model),
                gemini::Method::Stream => Route::Gemini(Api::GeminiStream, model),
                gemini::Method::CountTokens => Route::GeminiCount(model),
            }
        }
        (&Method::POST, "/v1/chat/completions" | "/chat/completions") => Route::Chat(Api::OpenAi),
        (&Method::POST, "/v1/responses" | "/responses") => Route::Chat(Api::Responses),
        (&Method::POST, "/v1/messages") => Route::Chat(Api::Anthropic),
        (&Method::POST, "/v1/messages/count_tokens") => Route::CountTokens,
        (&Method::POST, "/v1/completions" | "/completions") => Route::Chat(Api::Completions),
        (&Method::POST, "/api/chat") => Route::Chat(Api::Ollama),
        (&Method::POST, "/api/generate") => Route::Chat(Api::Generate),
        (&Method::POST, "/v1/embeddings" | "/embeddings") => {
            Route::Embeddings(embeddings::EmbedApi::OpenAi)
        }
        (&Method::POST, "/api/embed") => Route::Embeddings(embeddings::EmbedApi::Ollama),
        (&Method::POST, "/api/embeddings") => Route::Embeddings(embeddings::EmbedApi::OllamaLegacy),
        (&Method::GET, "/v1/models" | "/models") => Route::Models,
        (&Method::GET, p) if p.starts_with("/v1/models/") => {
            Route::Model(p["/v1/models/".len()..].to_string())
        }
        (&Method::GET, "/api/tags") => Route::Tags,
        (&Method::POST, "/api/show") => Route::Show,
        (&Method::GET, "/api/ps") => Route::Ps,
        (&Method::GET, "/api/version") => Route::Version,
        (&Method::GET | &Method::HEAD, "/") => Route::Root,
        (&Method::POST, EXEC_PATH) if meter.exec.get().is_some() => Route::Exec,
        _ => Route::NotFound,
    };
    if path.starts_with("/v1/messages") {
        api = Api::Anthropic;
    }
    let (method, shown_path) = (req.method().clone(), path.to_string());
    // Reading the body of a chat call even when refused: the trace holds it.
    let body = match Limited::new(req.into_body(), MAX_REQUEST_BYTES).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(true),
        Err(_) => Err(false),
    };
    let refuse = |status: StatusCode, kind: &str, message: String| -> (Resp, Value) {
        let v = wire::error_body(api, kind, &message, None);
        (json_response(status, &v), v)
    };
    let chat_call = match &route {
        Route::Chat(api) => Some((*api, None)),
        Route::Gemini(api, model) => Some((*api, Some(model.clone()))),
        _ => None,
    };
    if let Some((api, path_model)) = chat_call {
        // In its own task: a harness hanging up mid-call does not cancel a
        // call the model is already answering; it is still counted and traced.
        let m = meter.clone();
        let shown = format!("{method} {shown_path}");
        return match tokio::spawn(async move {
            chat_request(m, api, path_model, authorized, body, shown).await
        })
        .await
        {
            Ok(resp) => resp,
            Err(e) => {
                refuse(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal_error",
                    format!("the gateway failed: {e}"),
                )
                .0
            }
        };
    }
    // Every other request refused is traced too: a harness that only ever
    // calls an endpoint the gateway lacks shows it in the trace.
    let refused = |status: StatusCode, kind: &str, message: String| -> Resp {
        let (resp, reply) = refuse(status, kind, message);
        meter.trace_refusal(&method, &shown_path, &body, reply);
        resp
    };
    if !authorized {
        return refused(StatusCode::UNAUTHORIZED, "unauthorized", "missing or wrong key".into());
    }
    if let Route::Exec = route {
        let m = meter.clone();
        return match tokio::spawn(async move { exec_request(m, body).await }).await {
            Ok(resp) => resp,
            Err(e) => {
                refuse(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal_error",
                    format!("the gateway failed: {e}"),
                )
                .0
            }
        };
    }
    if let Route::Embeddings(e) = route {
        let m = meter.clone();
        let shown = format!("{method} {shown_path}");
        return match tokio::spawn(async move { embeddings_request(m, e, body, shown).await }).await
        {
            Ok(resp) => resp,
            Err(e) => {
                refuse(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal_error",
                    format!("the gateway failed: {e}"),
                )
                .0
            }
        };
    }
    let name = &meter.model.name;
    let context = meter.model.context_tokens;
    let details = json!({"parent_model": "", "format": "gguf", "family": "gateway", "families": ["gateway"], "parameter_size": "", "quantization_level": ""});
    match route {
        Route::Models => {
            json_response(StatusCode::OK, &json!({"object": "list", "data": [model_object(name)]}))
        }
        Route::Model(id) => {
            if id == *name
                || id == meter.model.model
                || id.strip_suffix(":latest") == Some(name.as_str())
            {
                json_response(StatusCode::OK, &model_object(&id))
            } else {
                refused(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    format!("the model `{id}` does not exist; this trial's model is `{name}`"),
                )
            }
        }
        Route::Tags => json_response(
            StatusCode::OK,
            &json!({"models": [{"name": name, "model": name, "modified_at": "1970-01-01T00:00:00Z", "size": 0, "digest": "", "details": details}]}),
        ),
        Route::Show => {
            let mut info = json!({"general.architecture": "gateway"});
            if let Some(n) = context {
                info["gateway.context_length"] = json!(n);
            }
            let parameters = context.map(|n| format!("num_ctx {n}")).unwrap_or_default();
            json_response(
                StatusCode::OK,
                &json!({"modelfile": "", "parameters": parameters, "template": "{{ .Tools }}", "details": details,
                    "model_info": info, "capabilities": ["completion", "tools"], "modified_at": "1970-01-01T00:00:00Z"}),
            )
        }
        Route::Ps => {
            let mut m = json!({"name": name, "model": name, "size": 0, "digest": "", "details": details, "expires_at": "2100-01-01T00:00:00Z", "size_vram": 0});
            if let Some(n) = context {
                m["context_length"] = json!(n);
            }
            json_response(StatusCode::OK, &json!({"models": [m]}))
        }
        Route::CountTokens => match body
            .as_ref()
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(b).ok())
            .map(|v| anthropic::read(&v))
        {
            Some(Ok(asked)) => {
                let request = ChatRequest {
                    messages: asked.messages,
                    tools: asked.tools,
                    ..ChatRequest::default()
                };
                // An upper bound (the request's bytes): the gateway does not tokenize for the upstream.
                json_response(
                    StatusCode::OK,
                    &json!({"input_tokens": crate::model::prompt_bound(&request)}),
                )
            }
            Some(Err(e)) => {
                refused(StatusCode::BAD_REQUEST, "invalid_request_error", e.to_string())
            }
            None => refused(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "the request body is not JSON".into(),
            ),
        },
        Route::GeminiCount(model) => {
            let read = body.as_ref().ok().and_then(|b| serde_json::from_slice::<Value>(b).ok());
            match read.map(|v| gemini::count_tokens(&v, &model)) {
                Some(Ok(v)) => json_response(StatusCode::OK, &v),
                Some(Err(e)) => {
                    refused(StatusCode::BAD_REQUEST, "invalid_request_error", e.to_string())
                }
                None => refused(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "the request body is not JSON".into(),
                ),
            }
        }
        Route::Version => json_response(StatusCode::OK, &json!({"version": OLLAMA_VERSION})),
        Route::Root => respond(StatusCode::OK, "text/plain", "Ollama is running"),
        Route::Chat(_)
        | Route::Gemini(..)
        | Route::Exec
        | Route::Embeddings(_)
        | Route::NotFound => refused(
            StatusCode::NOT_FOUND,
            "not_found",
            format!(
                "no such endpoint: {method} {shown_path} (docs/external-harness.md lists the gateway's endpoints)"
            ),
        ),
    }
}

fn model_object(id: &str) -> Value {
    json!({"id": id, "object": "model", "created": 0, "owned_by": "ablate"})
}

/// A chat request, whatever becomes of it: one trace line.
async fn chat_request(
    meter: Arc<TrialMeter>,
    api: Api,
    path_model: Option<String>,
    authorized: bool,
    body: Result<Bytes, bool>,
    shown: String,
) -> Resp {
    meter.note_request();
    let refuse = |status: StatusCode, kind: &str, message: String| -> (Resp, Value) {
        let v = wire::error_body(api, kind, &message, None);
        (json_response(status, &v), v)
    };
    let n = meter.next_call();
    let mut step = meter.blank_step(n);
    let mut forwarded = false;
    if !authorized {
        meter.state.lock().unwrap().refused_requests += 1;
        step.notes.push(format!("refused: {shown}"));
    }
    let (received, outcome) = match body {
        Err(too_large) => {
            let (status, msg) = if too_large {
                (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request body exceeds {MAX_REQUEST_BYTES} bytes"),
                )
            } else {
                (StatusCode::BAD_REQUEST, "the request body could not be read".to_string())
            };
            (
                Value::Null,
                Err(refuse(
                    status,
                    if too_large { "request_too_large" } else { "invalid_request_error" },
                    msg,
                )),
            )
        }
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Err(e) => {
                let raw = crate::model::http::truncate(&String::from_utf8_lossy(&bytes), 64 * 1024);
                let out = if authorized {
                    Err(refuse(
                        StatusCode::BAD_REQUEST,
                        "invalid_request_error",
                        format!("the request body is not JSON: {e}"),
                    ))
                } else {
                    Err(refuse(
                        StatusCode::UNAUTHORIZED,
                        "unauthorized",
                        "missing or wrong key".into(),
                    ))
                };
                (Value::String(raw), out)
            }
            Ok(v) if !authorized => (
                v,
                Err(refuse(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "missing or wrong key".into(),
                )),
            ),
            Ok(v) => {
                let out = chat(&meter, api, path_model, &v, &mut step, &mut forwarded).await;
                (v, out)
            }
        },
    };
    let resp = settle(outcome, &mut step);
    // A refused request is traced as an excerpt with its size: a harness that
    // keeps sending large bodies past its budget cannot fill the run folder.
    let received = if forwarded { received } else { refused_excerpt(&received) };
    meter.trace(step, received);
    if forwarded {
        let mut st = meter.state.lock().unwrap();
        st.in_flight -= 1;
        meter.in_flight.send_replace(st.in_flight);
    }
    let mut resp = resp;
    meter.budget_headers(resp.headers_mut());
    resp
}

/// Headers every chat reply carries: what is left of the trial's budget.
pub const HEADER_STEPS: &str = "x-ablate-remaining-steps";
pub const HEADER_TOKENS: &str = "x-ablate-remaining-tokens";
pub const HEADER_SECONDS: &str = "x-ablate-remaining-seconds";

/// Bytes of a refused request body kept in its trace line.
pub const REFUSED_EXCERPT_BYTES: usize = 2048;

/// `{"excerpt": <its first bytes as JSON text>, "bytes": <its size>}` for a
/// body larger than the excerpt; a small body as it is.
fn refused_excerpt(body: &Value) -> Value {
    let text = match body {
        Value::String(s) => s.clone(),
        Value::Null => return Value::Null,
        v => v.to_string(),
    };
    if text.len() <= REFUSED_EXCERPT_BYTES {
        return body.clone();
    }
    let mut end = REFUSED_EXCERPT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    json!({"excerpt": &text[..end], "bytes": text.len()})
}

/// A chat call with a JSON body from an authorized harness: read, reserve,
/// forward, answer. Err is a refusal (response, body) for the trace.
/// `forwarded` is set once a step is reserved (the call is in flight).
async fn chat(
    meter: &Arc<TrialMeter>,
    api: Api,
    path_model: Option<String>,
    body: &Value,
    step: &mut TraceStep,
    forwarded: &mut bool,
) -> Result<Resp, (Resp, Value)> {
    let refusal = |status: StatusCode, kind: &str, message: &str, limit: Option<&str>| {
        let v = wire::error_body(api, kind, message, limit);
        (json_response(status, &v), v)
    };
    let mut asked = wire::read_request(api, body).map_err(|e| {
        meter.note_unsupported(e.to_string());
        bad_request(api, &e)
    })?;
    if let Some(m) = path_model {
        asked.model = Some(json!(m));
    }
    let mut messages = asked.messages.clone();
    let had_instructions =
        api == Api::Responses && body.get("instructions").is_some_and(|v| !v.is_null());
    if let Some(prev) = &asked.previous_response_id {
        let Some(earlier) = meter.stored(prev) else {
            let msg = format!("Previous response with id '{prev}' not found.");
            let mut v = wire::error_body(api, "invalid_request_error", &msg, None);
            v["error"]["param"] = json!("previous_response_id");
            v["error"]["code"] = json!("previous_response_not_found");
            return Err((json_response(StatusCode::BAD_REQUEST, &v), v));
        };
        // Its instructions first (not carried over), then the stored turns, then this input.
        let at = usize::from(had_instructions);
        messages.splice(at..at, earlier);
    }
    let mut request = ChatRequest {
        messages,
        tools: asked.tools.clone(),
        max_tokens: 0,
        temperature: meter.model.temperature,
        top_p: meter.model.top_p,
        seed: meter.seed,
        timeout: Duration::ZERO,
        stop: asked.stop.clone(),
        prefill: None,
        tool_choice: asked.tool_choice.clone(),
        response_format: asked.response_format.clone(),
        reasoning: asked.reasoning.clone(),
    };
    if let Some(field) = meter.client.cannot_honour(&request) {
        let msg = format!(
            "`{field}` is not supported by this experiment's model (provider {}): it cannot be honoured, so the call is refused rather than run without it",
            meter.model.provider.name()
        );
        meter.note_unsupported(msg.clone());
        return Err(refusal(StatusCode::BAD_REQUEST, "invalid_request_error", &msg, None));
    }
    let r = meter.reserve(crate::model::prompt_bound(&request), CallKind::Chat).map_err(|limit| {
        let name = limit.name();
        let msg = format!("budget exhausted ({name}): the trial's {name} budget is spent; no further model calls are allowed");
        step.error = Some(msg.clone());
        refusal(StatusCode::TOO_MANY_REQUESTS, "budget_exhausted", &msg, Some(name))
    })?;
    *forwarded = true;
    let delivery = delivered::observe(&asked, body, &request, &*meter.client, &meter.model.name);
    meter.state.lock().unwrap().delivery.merge(&delivery);
    step.notes = meter.overrides(&asked, r.max_tokens);
    if r.clamped {
        step.notes.push(format!(
            "max_tokens: {} (what remains of max_total_tokens beside the calls in flight)",
            r.max_tokens
        ));
    }
    if !asked.ignored.is_empty() {
        step.notes.push(format!("not forwarded: {}", asked.ignored.join(", ")));
    }
    if !asked.omitted_tools.is_empty() {
        step.notes.push(format!(
            "hosted tools left out (no model the gateway forwards to runs them): {}",
            asked.omitted_tools.join(", ")
        ));
    }
    if let Some(r) = &request.reasoning {
        let reached = meter.client.delivers_reasoning(r);
        if reached.as_ref() != Some(r) {
            let reached = reached.map_or("nothing".to_string(), |x| x.to_string());
            step.notes.push(format!(
                "reasoning: asked {r}, reached the model as {reached} (provider {})",
                meter.model.provider.name()
            ));
        }
    }
    if matches!(api, Api::Completions | Api::Generate) {
        step.notes.push(legacy::NOTE.to_string());
    }
    request.max_tokens = r.max_tokens;
    request.timeout = r.timeout;
    // A call still in flight when the trial is stopped is cut there: traced and answered, so
    // that the record and its trace agree (the harness is being stopped anyway).
    let outcome = tokio::select! {
        o = meter.client.chat(&request, step.operation_id.clone()) => o,
        () = meter.out_of_time() => {
            meter.state.lock().unwrap().reserved -= r.reserved;
            let msg = "cut in flight: the trial's working_seconds budget is spent";
            step.error = Some(msg.to_string());
            return Err(refusal(StatusCode::TOO_MANY_REQUESTS, "budget_exhausted", msg, Some("working_seconds")));
        }
    };
    step.request_attempts = outcome.attempts;
    step.latency_ms = outcome.latency.as_millis() as u64;
    step.rate_limit_wait_ms = outcome.wait.as_millis() as u64;
    let mut st = meter.state.lock().unwrap();
    st.wait += outcome.wait;
    st.reserved = st.reserved.saturating_sub(r.reserved);
    let reply = match outcome.result {
        Ok(reply) => {
            st.tokens.add(reply.usage);
            if reply.token_source == crate::record::TokenSource::Estimated {
                st.estimated_calls += 1;
            }
            reply.note_fingerprint(&mut st.fingerprints);
            meter.note_spent(&mut st);
            reply
        }
        Err(e) => {
            let msg = e.to_string();
            step.error = Some(msg.clone());
            let budget_timeout = meter.upstream_failed(st, &e, r.limited_by_budget);
            return Err(if budget_timeout {
                let m = format!(
                    "budget exhausted (working_seconds): the model call timed out with the trial's working time ({msg})"
                );
                refusal(
                    StatusCode::TOO_MANY_REQUESTS,
                    "budget_exhausted",
                    &m,
                    Some("working_seconds"),
                )
            } else {
                refusal(
                    StatusCode::BAD_GATEWAY,
                    "provider_error",
                    &format!("the model endpoint failed: {msg}"),
                    None,
                )
            });
        }
    };
    drop(st);
    step.tokens = reply.usage;
    step.tokens_counted = reply.token_source;
    step.notes.extend(reply.usage_note.clone());
    step.finish_reason = reply.finish_reason.clone();
    if !reply.unparsed_tool_calls.is_empty() {
        step.notes.push(format!(
            "unparsed tool calls (not passed on): {}",
            reply.unparsed_tool_calls.join("; ")
        ));
    }
    let now = SystemTime::now();
    let created_at = time::OffsetDateTime::from(now)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let id = format!("chatcmpl-{}", step.operation_id);
    let meta = ReplyMeta {
        id: &id,
        model: &meter.model.name,
        created: now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        created_at: &created_at,
    };
    let sse = |text: String| ("sse", respond(StatusCode::OK, "text/event-stream", text));
    let ndjson = |text: String| ("ndjson", respond(StatusCode::OK, "application/x-ndjson", text));
    let (json_reply, streamed) = match api {
        Api::OpenAi => (
            wire::openai_reply(&reply, &meta),
            asked.stream.then(|| sse(wire::openai_sse(&reply, &meta, asked.include_usage))),
        ),
        Api::Ollama => (
            wire::ollama_reply(&reply, &meta),
            asked.stream.then(|| ndjson(wire::ollama_ndjson(&reply, &meta))),
        ),
        Api::Responses => {
            let ids = responses::Ids::of(&step.operation_id);
            if asked.store {
                meter.store(
                    ids.response.clone(),
                    responses::stored_conversation(&request.messages, had_instructions, &reply),
                );
            }
            (
                responses::reply(&reply, &meta, &asked, &ids),
                asked.stream.then(|| sse(responses::sse(&reply, &meta, &asked, &ids))),
            )
        }
        Api::Anthropic => (
            anthropic::reply(&reply, &meta),
            asked.stream.then(|| sse(anthropic::sse(&reply, &meta))),
        ),
        Api::Completions => (
            legacy::completion(&reply, &meta),
            asked.stream.then(|| sse(legacy::completion_sse(&reply, &meta, asked.include_usage))),
        ),
        Api::Generate => (
            legacy::generate(&reply, &meta),
            asked.stream.then(|| ndjson(legacy::generate_ndjson(&reply, &meta))),
        ),
        Api::Gemini | Api::GeminiStream => {
            (gemini::reply(&reply, &meta), asked.stream.then(|| sse(gemini::sse(&reply, &meta))))
        }
    };
    if !reply.text.is_empty() && !holds_string(&json_reply, &reply.text) {
        step.reply_text = Some(reply.text.clone());
    }
    let resp = match streamed {
        Some((kind, resp)) => {
            step.notes.push(format!("streamed ({kind})"));
            resp
        }
        None => json_response(StatusCode::OK, &json_reply),
    };
    step.reply = Some(json_reply);
    Ok(resp)
}

/// An embeddings request from an authorized harness: forwarded to the
/// upstream when it serves embeddings (501 when it does not), its input
/// tokens counted against the budget; one trace line whatever becomes of it.
async fn embeddings_request(
    meter: Arc<TrialMeter>,
    api: embeddings::EmbedApi,
    body: Result<Bytes, bool>,
    shown: String,
) -> Resp {
    let refusal = |status: StatusCode, kind: &str, message: &str, limit: Option<&str>| {
        let v = wire::error_body(api.errors(), kind, message, limit);
        (json_response(status, &v), v)
    };
    meter.note_request();
    let n = meter.next_embedding();
    let mut step = meter.blank_step(n);
    let received = as_received(&body);
    let (mut reserved, mut unserved) = (None, false);
    let outcome: Result<Resp, (Resp, Value)> = async {
        let v = json_of(body, api.errors())?;
        let mut asked = embeddings::read(api, v, &meter.model.name, &meter.model.model)
            .map_err(|e| bad_request(api.errors(), &e))?;
        if meter.client.embed(&asked.request, &step.operation_id).is_none() {
            unserved = true;
            let msg = format!("the experiment's model (provider {}) serves no embeddings", meter.model.provider.name());
            return Err(refusal(StatusCode::NOT_IMPLEMENTED, "not_implemented", &msg, None));
        }
        let r = meter.reserve(asked.request.bound(), CallKind::Embedding).map_err(|limit| {
            let name = limit.name();
            let msg = format!("budget exhausted ({name}): the trial's {name} budget is spent; no further model calls are allowed");
            refusal(StatusCode::TOO_MANY_REQUESTS, "budget_exhausted", &msg, Some(name))
        })?;
        reserved = Some(r.reserved);
        if !asked.ignored.is_empty() {
            step.notes.push(format!("not forwarded: {}", asked.ignored.join(", ")));
        }
        asked.request.timeout = r.timeout;
        let Some(call) = meter.client.embed(&asked.request, &step.operation_id) else { unreachable!("the provider served embeddings a moment ago") };
        let outcome = call.await;
        step.request_attempts = outcome.attempts;
        step.latency_ms = outcome.latency.as_millis() as u64;
        step.rate_limit_wait_ms = outcome.wait.as_millis() as u64;
        let mut st = meter.state.lock().unwrap();
        st.wait += outcome.wait;
        match outcome.result {
            Ok(reply) => {
                let tokens = Tokens { input: reply.input_tokens, output: 0, cached: 0 };
                st.tokens.add(tokens);
                if reply.token_source == crate::record::TokenSource::Estimated {
                    st.estimated_calls += 1;
                    step.notes.push("no usage in the reply: input tokens counted from bytes".into());
                }
                meter.note_spent(&mut st);
                drop(st);
                step.tokens = tokens;
                step.tokens_counted = reply.token_source;
                step.reply = Some(embeddings::traced(&reply));
                Ok(json_response(StatusCode::OK, &embeddings::reply(api, &reply, &asked)))
            }
            // The upstream refused the request itself (an unknown embedding model, bad input): the harness hears it; the trial goes on.
            Err(ModelError::Status { status, body }) if (400..500).contains(&status) && status != 429 => {
                drop(st);
                let msg = format!("the upstream refused the embeddings request: HTTP {status}: {body}");
                step.error = Some(msg.clone());
                Err(refusal(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST), "upstream_refused", &msg, None))
            }
            Err(e) => {
                let msg = e.to_string();
                step.error = Some(msg.clone());
                if meter.upstream_failed(st, &e, r.limited_by_budget) {
                    let m = format!("budget exhausted (working_seconds): the embeddings call timed out with the trial's working time ({msg})");
                    Err(refusal(StatusCode::TOO_MANY_REQUESTS, "budget_exhausted", &m, Some("working_seconds")))
                } else {
                    Err(refusal(StatusCode::BAD_GATEWAY, "provider_error", &format!("the embeddings endpoint failed: {msg}"), None))
                }
            }
        }
    }
    .await;
    let resp = settle(outcome, &mut step);
    step.notes.insert(0, "embeddings".into());
    if unserved {
        // As an endpoint the gateway lacks: counted and said so.
        meter.state.lock().unwrap().refused_requests += 1;
        step.notes.push(format!("refused: {shown}"));
    }
    meter.trace(step, if reserved.is_some() { received } else { refused_excerpt(&received) });
    if let Some(r) = reserved {
        let mut st = meter.state.lock().unwrap();
        st.reserved = st.reserved.saturating_sub(r);
        st.in_flight -= 1;
        meter.in_flight.send_replace(st.in_flight);
    }
    let mut resp = resp;
    meter.budget_headers(resp.headers_mut());
    resp
}

/// The response of a handled request; a refusal's body (and its message, when
/// the step has no error yet) goes into the step's trace line.
fn settle(outcome: Result<Resp, (Resp, Value)>, step: &mut TraceStep) -> Resp {
    match outcome {
        Ok(resp) => resp,
        Err((resp, reply)) => {
            if step.error.is_none() {
                step.error = reply
                    .pointer("/error/message")
                    .or_else(|| reply.get("error"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            step.reply = Some(reply);
            resp
        }
    }
}

/// A request body as its trace line keeps it: its JSON, or its text (capped).
fn as_received(body: &Result<Bytes, bool>) -> Value {
    match body {
        Ok(b) => serde_json::from_slice::<Value>(b).unwrap_or_else(|_| {
            Value::String(crate::model::http::truncate(&String::from_utf8_lossy(b), 64 * 1024))
        }),
        Err(_) => Value::Null,
    }
}

/// A request body read as JSON, or its refusal (413 too large, 400 unreadable
/// or not JSON) in `api`'s error form: the handlers' refusal type, as they return it.
#[allow(clippy::result_large_err)]
fn json_of(body: Result<Bytes, bool>, api: Api) -> Result<Value, (Resp, Value)> {
    let refusal = |status: StatusCode, kind: &str, message: &str| {
        let v = wire::error_body(api, kind, message, None);
        (json_response(status, &v), v)
    };
    let bytes = body.map_err(|too_large| {
        if too_large {
            refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                &format!("the request body exceeds {MAX_REQUEST_BYTES} bytes"),
            )
        } else {
            refusal(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "the request body could not be read",
            )
        }
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        refusal(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &format!("the request body is not JSON: {e}"),
        )
    })
}

/// The exec endpoint (a harness on the host, a container task): one command
/// run in the task's container as its agent user. docs/external-harness.md,
/// "Container tasks from the host".
pub const EXEC_PATH: &str = "/ablate/v1/exec";
/// A command's time when the request does not say (seconds).
pub const EXEC_DEFAULT_TIMEOUT: f64 = 120.0;
/// The longest a command may be given (seconds); the trial's remaining working time bounds it too.
pub const EXEC_MAX_TIMEOUT: f64 = 600.0;
/// Bytes of stdout and of stderr returned (and traced) per command.
pub const EXEC_OUTPUT_CAP: usize = 64 * 1024;
/// Bytes of a command line.
pub const EXEC_MAX_COMMAND: usize = 64 * 1024;

/// What an exec request asks.
#[derive(Debug)]
struct ExecAsk {
    command: String,
    timeout: f64,
    stdin: Option<String>,
}

/// An exec request's body: a null reads as an absent value, a key not listed is refused.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecBody {
    command: Option<ExecCommand>,
    timeout_sec: Option<ExecTimeout>,
    stdin: Option<ExecStdin>,
}

const EXEC_COMMAND: &str = "`command` must be a string: a bash command line";

/// A bash command line: not blank, at most [`EXEC_MAX_COMMAND`] bytes.
struct ExecCommand(String);

impl<'de> serde::Deserialize<'de> for ExecCommand {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        wire::checked(d, |v| match v {
            Value::String(c) if c.trim().is_empty() => Err("`command` is empty".to_string()),
            Value::String(c) if c.len() > EXEC_MAX_COMMAND => {
                Err(format!("`command` exceeds {EXEC_MAX_COMMAND} bytes"))
            }
            Value::String(c) => Ok(ExecCommand(c)),
            _ => Err(EXEC_COMMAND.to_string()),
        })
    }
}

/// Seconds the command may run: positive and finite, cut to [`EXEC_MAX_TIMEOUT`].
struct ExecTimeout(f64);

impl<'de> serde::Deserialize<'de> for ExecTimeout {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        wire::checked(d, |v| match v.as_f64() {
            Some(t) if t > 0.0 && t.is_finite() => Ok(ExecTimeout(t.min(EXEC_MAX_TIMEOUT))),
            _ => Err("`timeout_sec` must be a positive number of seconds".to_string()),
        })
    }
}

/// The command's standard input: a string of at most [`MAX_REQUEST_BYTES`].
struct ExecStdin(String);

impl<'de> serde::Deserialize<'de> for ExecStdin {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        wire::checked(d, |v| match v {
            Value::String(s) if s.len() <= MAX_REQUEST_BYTES => Ok(ExecStdin(s)),
            _ => Err("`stdin` must be a string".to_string()),
        })
    }
}

fn read_exec(body: Value) -> Result<ExecAsk, BadRequest> {
    if !body.is_object() {
        return Err("the body must be a JSON object: {\"command\": \"...\"}".into());
    }
    let b: ExecBody = wire::from_body(body)?;
    Ok(ExecAsk {
        command: b.command.ok_or(EXEC_COMMAND)?.0,
        timeout: b.timeout_sec.map_or(EXEC_DEFAULT_TIMEOUT, |t| t.0),
        stdin: b.stdin.map(|s| s.0),
    })
}

/// An exec request from an authorized harness: one trace line whatever becomes of it.
async fn exec_request(meter: Arc<TrialMeter>, body: Result<Bytes, bool>) -> Resp {
    let refusal = |status: StatusCode, kind: &str, message: &str, limit: Option<&str>| {
        let v = wire::error_body(Api::OpenAi, kind, message, limit);
        (json_response(status, &v), v)
    };
    let n = meter.next_exec();
    let mut step = meter.blank_step(n);
    let received = as_received(&body);
    let mut ran = false;
    let outcome: Result<Resp, (Resp, Value)> = async {
        let v = json_of(body, Api::OpenAi)?;
        let ask = read_exec(v).map_err(|e| bad_request(Api::OpenAi, &e))?;
        let target = meter.exec.get().cloned().ok_or_else(|| refusal(StatusCode::NOT_FOUND, "not_found", "no exec endpoint in this trial", None))?;
        // One command at a time; the budget is looked at once it is this one's turn.
        let _turn = meter.exec_turn.lock().await;
        let left = {
            let st = meter.state.lock().unwrap();
            let limit =
                st.exhausted.or_else(|| (meter.working_in(&st).as_secs_f64() >= meter.budget.max_working_seconds).then_some(BudgetLimit::WorkingSeconds));
            if let Some(limit) = limit {
                let name = limit.name();
                return Err(refusal(
                    StatusCode::TOO_MANY_REQUESTS,
                    "budget_exhausted",
                    &format!("budget exhausted ({name}): the trial's {name} budget is spent; no further commands are run"),
                    Some(name),
                ));
            }
            meter.budget.max_working_seconds - meter.working_in(&st).as_secs_f64()
        };
        ran = true;
        let timeout = ask.timeout.min(left).max(0.1);
        if timeout < ask.timeout {
            step.notes.push(format!("timeout_sec: {timeout:.1} (what remains of the working time)"));
        }
        let out = target.shell(&ask.command, Duration::from_secs_f64(timeout), EXEC_OUTPUT_CAP, ask.stdin.as_deref().map(str::as_bytes)).await;
        step.latency_ms = out.duration.as_millis() as u64;
        let reply = json!({
            "exit_code": out.exit_code,
            "timed_out": out.timed_out,
            "stdout": out.stdout.text(),
            "stderr": out.stderr.text(),
            "truncated": out.stdout.truncated() || out.stderr.truncated(),
            "duration_ms": step.latency_ms,
        });
        step.reply = Some(reply.clone());
        Ok(json_response(StatusCode::OK, &reply))
    }
    .await;
    let resp = settle(outcome, &mut step);
    step.notes.insert(0, "exec".into());
    // A refused request is traced as an excerpt, as a refused chat request is.
    let received = json!({"exec": received});
    meter.trace(step, if ran { received } else { refused_excerpt(&received) });
    let mut resp = resp;
    meter.budget_headers(resp.headers_mut());
    resp
}

#[cfg(test)]
mod exec_tests {
    use super::read_exec;
    use serde_json::json;

    #[test]
    fn exec_requests_are_read_and_each_fault_names_its_key() {
        let a = read_exec(json!({"command": "ls", "timeout_sec": 5000, "stdin": "x"})).unwrap();
        // A timeout above the cap is cut to 600 s; an absent one is 120 s.
        assert_eq!((a.command.as_str(), a.timeout, a.stdin.as_deref()), ("ls", 600.0, Some("x")));
        let a = read_exec(json!({"command": "ls", "timeout_sec": null, "stdin": null})).unwrap();
        assert_eq!((a.timeout, a.stdin), (120.0, None));
        let refused = |body: serde_json::Value| {
            let e = read_exec(body).unwrap_err();
            (e.param, e.message)
        };
        let key = |k: &str| Some(k.to_string());
        assert_eq!(
            refused(json!({"command": "ls", "user": "root"})),
            (
                key("user"),
                "unknown field `user`, expected one of `command`, `timeout_sec`, `stdin`".into()
            )
        );
        assert_eq!(
            refused(json!({})),
            (None, "`command` must be a string: a bash command line".into())
        );
        assert_eq!(
            refused(json!({"command": "  "})),
            (key("command"), "`command` is empty".into())
        );
        assert_eq!(
            refused(json!({"command": "x".repeat(64 * 1024 + 1)})),
            (key("command"), "`command` exceeds 65536 bytes".into())
        );
        assert_eq!(
            refused(json!({"command": "ls", "timeout_sec": -1})),
            (key("timeout_sec"), "`timeout_sec` must be a positive number of seconds".into())
        );
        assert_eq!(
            refused(json!({"command": "ls", "stdin": 3})),
            (key("stdin"), "`stdin` must be a string".into())
        );
        assert_eq!(
            refused(json!(["ls"])),
            (None, r#"the body must be a JSON object: {"command": "..."}"#.into())
        );
    }
}
