//! The meter of one trial attempt: its credential, its budget (checked, and a
//! step and tokens reserved before each call), what its calls spent and
//! asked, its delivery record, and its trace lines.

use super::wire::Asked;
use super::{
    HEADER_SECONDS, HEADER_STEPS, HEADER_TOKENS, REFUSED_EXCERPT_BYTES, TRACED_REFUSALS, responses,
};
use crate::container::trial::ContainerExec;
use crate::experiment::config::{Budget, ModelSpec};
use crate::model::{ModelClient, ModelError};
use crate::record::harness_kind::HostedTools;
use crate::record::omit::TracedSoFar;
use crate::record::{BudgetLimit, Tokens, TraceStep};
use bytes::Bytes;
use hyper::Method;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

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
pub(super) struct State {
    /// Trace lines numbered so far (chat requests and exec calls).
    pub(super) lines: u32,
    pub(super) calls: u32,
    pub(super) exec_calls: u32,
    pub(super) embedding_calls: u32,
    pub(super) forwarded: u32,
    pub(super) in_flight: u32,
    pub(super) tokens: Tokens,
    /// Tokens calls in flight may still add: each one's output cap and its prompt's bound.
    pub(super) reserved: u64,
    pub(super) estimated_calls: u32,
    pub(super) wait: Duration,
    pub(super) exhausted: Option<BudgetLimit>,
    pub(super) limit_reached: Option<BudgetLimit>,
    pub(super) provider_error: Option<String>,
    pub(super) request_timed_out: bool,
    pub(super) requested: BTreeMap<String, Overridden>,
    /// Distinct `system_fingerprint`s of the replies, in the order first seen.
    pub(super) fingerprints: Vec<String>,
    pub(super) first_request: Option<Duration>,
    pub(super) refused_requests: u32,
    pub(super) unsupported: Option<String>,
    pub(super) delivery: crate::record::delivery::Delivery,
    /// When the gateway first wanted the harness stopped: working time ends there (the grace after it is not working time).
    pub(super) stopped_at: Option<Duration>,
    /// Responses API: stored conversations by response id, oldest first, with their bytes of text.
    pub(super) stored: std::collections::VecDeque<(String, Vec<crate::model::Message>, usize)>,
    /// Bytes of text of `stored`.
    pub(super) stored_bytes: usize,
}

pub(super) struct Tracer {
    on_step: Box<dyn FnMut(TraceStep) + Send>,
    so_far: TracedSoFar,
    /// The previous line's request messages, as received.
    previous: Vec<Value>,
}

/// One trial attempt's credential, budget, counters and trace.
pub struct TrialMeter {
    pub(super) trial_id: String,
    pub(super) attempt: u32,
    pub(super) model: ModelSpec,
    pub(super) client: Arc<dyn ModelClient>,
    pub(super) budget: Budget,
    pub(super) seed: u64,
    pub(super) key: String,
    pub(super) start: Instant,
    pub(super) state: Mutex<State>,
    pub(super) tracer: Mutex<Tracer>,
    pub(super) stop: watch::Sender<Option<GatewayStop>>,
    /// The working time is spent: calls still in flight are cut (`out_of_time`).
    pub(super) time_up: watch::Sender<bool>,
    pub(super) in_flight: watch::Sender<u32>,
    /// The container the exec endpoint runs commands in; unset, the endpoint does not exist.
    pub(super) exec: std::sync::OnceLock<ContainerExec>,
    /// Exec calls run one at a time.
    pub(super) exec_turn: tokio::sync::Mutex<()>,
    /// What becomes of a hosted tool (unset: omitted).
    pub(super) hosted_tools: std::sync::OnceLock<HostedTools>,
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
            hosted_tools: std::sync::OnceLock::new(),
        })
    }

    /// Open the exec endpoint on `target`: a harness on the host reaches the
    /// task's container through it (and through nothing else).
    pub(crate) fn allow_exec(&self, target: ContainerExec) {
        let _ = self.exec.set(target);
    }

    /// What becomes of a hosted tool the harness offers (`[gateway] hosted_tools`).
    pub(crate) fn set_hosted_tools(&self, policy: HostedTools) {
        let _ = self.hosted_tools.set(policy);
    }

    /// The credential the harness must present (32 hex characters).
    pub fn key(&self) -> &str {
        &self.key
    }

    pub(super) fn working_in(&self, st: &State) -> Duration {
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
    pub(super) async fn out_of_time(&self) {
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
    pub(crate) fn remaining(&self) -> (u32, u64, f64) {
        let st = self.state.lock().unwrap();
        let b = &self.budget;
        (
            b.max_steps.saturating_sub(st.forwarded),
            b.max_total_tokens.saturating_sub(st.tokens.total().saturating_add(st.reserved)),
            (b.max_working_seconds - self.working_in(&st).as_secs_f64()).max(0.0),
        )
    }

    pub(super) fn budget_headers(&self, h: &mut hyper::HeaderMap) {
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

    pub(super) fn request_stop(&self, why: GatewayStop) {
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
    pub(super) fn note_unsupported(&self, message: String) {
        self.state.lock().unwrap().unsupported.get_or_insert(message);
    }

    /// A model call arrived: the first one's time is kept.
    pub(super) fn note_request(&self) {
        let mut st = self.state.lock().unwrap();
        if st.first_request.is_none() {
            st.first_request = Some(self.start.elapsed());
        }
    }

    /// A request refused before any model call (no such endpoint, a wrong
    /// key): one trace line, its body as an excerpt, up to TRACED_REFUSALS.
    pub(super) fn trace_refusal(
        &self,
        method: &Method,
        path: &str,
        body: &Result<Bytes, bool>,
        reply: Value,
    ) {
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
            Ok(b) if !b.is_empty() => super::http::bounded_json(b).unwrap_or_else(|_| {
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
    pub(super) fn note_spent(&self, st: &mut State) {
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
    pub(super) fn upstream_failed(
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
    pub(super) fn stored(&self, id: &str) -> Option<Vec<crate::model::Message>> {
        self.state
            .lock()
            .unwrap()
            .stored
            .iter()
            .find(|(k, _, _)| k == id)
            .map(|(_, m, _)| m.clone())
    }

    /// Keep a response's conversation for `previous_response_id`: at most
    /// STORED_RESPONSES of them and MAX_STORED_BYTES of their text, the oldest
    /// going first.
    pub(super) fn store(&self, id: String, conversation: Vec<crate::model::Message>) {
        let bytes = conversation_bytes(&conversation);
        let mut st = self.state.lock().unwrap();
        while !st.stored.is_empty()
            && (st.stored.len() >= responses::STORED_RESPONSES
                || st.stored_bytes + bytes > super::MAX_STORED_BYTES)
        {
            if let Some((_, _, old)) = st.stored.pop_front() {
                st.stored_bytes -= old;
            }
        }
        st.stored_bytes += bytes;
        st.stored.push_back((id, conversation, bytes));
    }

    /// The next trace line's number, counting a chat request.
    pub(super) fn next_call(&self) -> u32 {
        let mut st = self.state.lock().unwrap();
        st.calls += 1;
        st.lines += 1;
        st.lines
    }

    /// The next trace line's number, counting an exec call.
    pub(super) fn next_exec(&self) -> u32 {
        let mut st = self.state.lock().unwrap();
        st.exec_calls += 1;
        st.lines += 1;
        st.lines
    }

    /// The next trace line's number, counting an embeddings call.
    pub(super) fn next_embedding(&self) -> u32 {
        let mut st = self.state.lock().unwrap();
        st.embedding_calls += 1;
        st.lines += 1;
        st.lines
    }

    pub(super) fn operation_id(&self, n: u32) -> String {
        format!("{}-{}-s{}", self.trial_id, self.attempt, n)
    }

    pub(super) fn blank_step(&self, n: u32) -> TraceStep {
        TraceStep::blank(&self.trial_id, self.attempt, n, 1, self.operation_id(n))
    }

    /// Hand a step to `on_step`, its request (the body as received) less the
    /// leading messages the previous line's request held, and `tools` when
    /// the previous traced list was the same.
    pub(super) fn trace(&self, mut step: TraceStep, received: Value) {
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
    /// A call whose tokens do not fit only because of what calls in flight
    /// hold waits for one of them to settle and asks again: the budget is
    /// exhausted only when what is counted reaches it, never by reservations.
    pub(super) async fn reserve(
        &self,
        prompt_bound: u64,
        kind: CallKind,
    ) -> Result<Reservation, BudgetLimit> {
        loop {
            let mut settled = self.in_flight.subscribe();
            match self.try_reserve(prompt_bound, kind) {
                Ok(r) => return Ok(r),
                Err(Refused::Spent(limit)) => return Err(limit),
                Err(Refused::Held) => {
                    let _ = settled.changed().await;
                }
            }
        }
    }

    fn try_reserve(&self, prompt_bound: u64, kind: CallKind) -> Result<Reservation, Refused> {
        let chat = kind == CallKind::Chat;
        let mut st = self.state.lock().unwrap();
        let b = &self.budget;
        let working = self.working_in(&st).as_secs_f64();
        let committed = st.tokens.total().saturating_add(st.reserved);
        if st.exhausted.is_none()
            && committed >= b.max_total_tokens
            && st.tokens.total() < b.max_total_tokens
            && st.in_flight > 0
            && !(chat && st.forwarded >= b.max_steps)
        {
            return Err(Refused::Held);
        }
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
            return Err(Refused::Spent(limit));
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
    pub(super) fn overrides(&self, asked: &Asked, max_tokens: u32) -> Vec<String> {
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

/// Why a reservation was not made: a limit is reached, or the tokens are
/// held by calls in flight (wait for one to settle).
enum Refused {
    Spent(BudgetLimit),
    Held,
}

/// What a reservation is for: a chat call is a step with an output cap; an
/// embeddings call is neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CallKind {
    Chat,
    Embedding,
}

pub(super) struct Reservation {
    pub(super) max_tokens: u32,
    /// The cap is below the per-step cap: the remaining total tokens bound it.
    pub(super) clamped: bool,
    /// Tokens held for the call while in flight.
    pub(super) reserved: u64,
    pub(super) timeout: Duration,
    pub(super) limited_by_budget: bool,
}

/// `{"excerpt": <its first bytes as JSON text>, "bytes": <its size>}` for a
/// body larger than the excerpt; a small body as it is.
pub(super) fn refused_excerpt(body: &Value) -> Value {
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

/// Bytes of a conversation's text: every message's content and tool calls.
pub(super) fn conversation_bytes(messages: &[crate::model::Message]) -> usize {
    messages
        .iter()
        .map(|m| {
            m.content.len()
                + m.tool_calls.iter().map(|c| c.name.len() + c.arguments.len()).sum::<usize>()
        })
        .sum()
}
