//! HTTP with a typed retry policy: bounded attempts, exponential backoff with
//! full jitter, Retry-After honoured on 429/503. Time asleep is reported
//! apart from time in requests, so rate limits do not eat the working budget.

use super::{CallOutcome, ChatReply, ModelError, ToolSpec};
use crate::experiment::config::RetryPolicy;
use rand::RngExt;
use std::time::{Duration, Instant};

pub struct HttpOutcome {
    pub result: Result<(u16, String), ModelError>,
    pub attempts: u32,
    pub latency: Duration,
    pub wait: Duration,
}

/// Statuses worth another attempt.
fn retryable(status: u16) -> bool {
    status == 429 || status == 408 || (500..=599).contains(&status)
}

/// Retry-After in seconds (the HTTP-date form falls back to backoff).
fn retry_after(resp: &reqwest::Response) -> Option<Duration> {
    let v = resp.headers().get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let secs: f64 = v.trim().parse().ok()?;
    (secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(600.0)))
}

fn backoff(policy: &RetryPolicy, retry_index: u32) -> Duration {
    match policy {
        RetryPolicy::None => Duration::ZERO,
        RetryPolicy::Exponential { base_ms, max_ms, .. } => {
            let cap = (*base_ms as f64 * 2f64.powi(retry_index as i32)).min(*max_ms as f64);
            let ms = rand::rng().random_range(0.0..=cap.max(1.0));
            Duration::from_millis(ms as u64)
        }
    }
}

fn max_attempts(policy: &RetryPolicy) -> u32 {
    match policy {
        RetryPolicy::None => 1,
        RetryPolicy::Exponential { max_attempts, .. } => (*max_attempts).max(1),
    }
}

/// Why a body could not be read.
enum ReadError {
    TooLarge,
    Http(reqwest::Error),
}

/// Read a response body chunk by chunk, never holding more than `max` bytes:
/// a runaway endpoint must cost a trial, not the process's memory.
async fn read_capped(mut resp: reqwest::Response, max: u64) -> Result<String, ReadError> {
    if resp.content_length().is_some_and(|n| n > max) {
        return Err(ReadError::TooLarge);
    }
    let mut buf: Vec<u8> = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(ReadError::Http)? {
        if buf.len() as u64 + chunk.len() as u64 > max {
            return Err(ReadError::TooLarge);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// POST `body` (or GET when None) to `url`, reading at most `max_bytes` of
/// the reply body. Timeouts and oversized bodies are not retried: a hanging
/// endpoint would otherwise hold a trial for attempts x timeout.
#[allow(clippy::too_many_arguments)]
pub async fn send(
    client: &reqwest::Client,
    url: &str,
    body: Option<&serde_json::Value>,
    bearer: Option<&str>,
    operation_id: Option<&str>,
    timeout: Duration,
    policy: &RetryPolicy,
    max_bytes: u64,
) -> HttpOutcome {
    let mut latency = Duration::ZERO;
    let mut wait = Duration::ZERO;
    let attempts_max = max_attempts(policy);
    // One attempt's request: POST `body` (or GET when None), with the attempt's timeout, the
    // operation id and the bearer key.
    let request = || {
        let mut req = match body {
            Some(b) => client.post(url).json(b),
            None => client.get(url),
        };
        req = req.timeout(timeout);
        // The same id on every retry lets a server (or a proxy log) tie them together.
        if let Some(id) = operation_id {
            req = req.header("X-Ablate-Operation-Id", id);
        }
        if let Some(key) = bearer {
            req = req.bearer_auth(key);
        }
        req
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let req = request();
        let (outcome, took) = attempt_once(req, timeout, max_bytes).await;
        latency += took;
        let (err, pause) = match outcome {
            Attempt::Final(result) => {
                return HttpOutcome { result, attempts: attempt, latency, wait };
            }
            Attempt::Retry(err, pause) => (err, pause),
        };
        if attempt >= attempts_max {
            return HttpOutcome { result: Err(err), attempts: attempt, latency, wait };
        }
        let sleep = pause.unwrap_or_else(|| backoff(policy, attempt - 1));
        tokio::time::sleep(sleep).await;
        wait += sleep;
    }
}

/// What one attempt came to: the result to return, or an error worth another attempt
/// (with the pause the server asked for, if it did).
enum Attempt {
    Final(Result<(u16, String), ModelError>),
    Retry(ModelError, Option<Duration>),
}

/// Send one attempt and read its reply: what it came to, and the time it took.
async fn attempt_once(
    req: reqwest::RequestBuilder,
    timeout: Duration,
    max_bytes: u64,
) -> (Attempt, Duration) {
    let start = Instant::now();
    let sent = req.send().await;
    match sent {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let after = retry_after(&resp);
            let text = read_capped(resp, max_bytes).await;
            let took = start.elapsed();
            (reply_attempt(status, after, text, timeout, max_bytes), took)
        }
        Err(e) => {
            let took = start.elapsed();
            if e.is_timeout() {
                return (Attempt::Final(Err(ModelError::Timeout(timeout.as_secs_f64()))), took);
            }
            (Attempt::Retry(ModelError::Connect(format!("{e}")), None), took)
        }
    }
}

/// What a reply came to: a 2xx body is the result; a retryable status is retried after its
/// Retry-After; a read that failed, other than by timing out, is retried; the rest are final.
fn reply_attempt(
    status: u16,
    after: Option<Duration>,
    text: Result<String, ReadError>,
    timeout: Duration,
    max_bytes: u64,
) -> Attempt {
    match text {
        Err(ReadError::TooLarge) => Attempt::Final(Err(ModelError::TooLarge { limit: max_bytes })),
        Err(ReadError::Http(e)) if e.is_timeout() => {
            Attempt::Final(Err(ModelError::Timeout(timeout.as_secs_f64())))
        }
        Err(ReadError::Http(e)) => Attempt::Retry(ModelError::Connect(e.to_string()), None),
        Ok(text) if (200..300).contains(&status) => Attempt::Final(Ok((status, text))),
        Ok(text) if retryable(status) => {
            Attempt::Retry(ModelError::Status { status, body: truncate(&text, 2000) }, after)
        }
        Ok(text) => Attempt::Final(Err(ModelError::Status { status, body: truncate(&text, 2000) })),
    }
}

pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... [{} bytes]", &s[..end], s.len())
}

/// Parse a reply body; the raw text is kept for the trace either way.
pub(crate) fn parse_body(text: &str) -> (serde_json::Value, Result<serde_json::Value, ModelError>) {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) => (v.clone(), Ok(v)),
        Err(e) => (
            serde_json::Value::String(text.to_string()),
            Err(ModelError::Malformed {
                error: format!("body is not JSON: {e}"),
                body: truncate(text, 2000),
            }),
        ),
    }
}

/// Tools in the `{"type": "function", "function": {...}}` form both HTTP
/// providers take.
pub(crate) fn tools_json(tools: &[ToolSpec]) -> serde_json::Value {
    tools
        .iter()
        .map(|t| serde_json::to_value(t.as_function()).expect("a tool serializes"))
        .collect()
}

/// A provider's HTTP endpoint: what every call to it passes (the client, the base URL, the
/// bearer key, the retry policy and the cap on a reply's body).
pub struct Endpoint {
    pub client: reqwest::Client,
    pub base: String,
    pub bearer: Option<String>,
    pub retry: RetryPolicy,
    pub max_bytes: u64,
}

impl Endpoint {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// One logical chat call to `path`: send `body` with the retry policy, keep the reply body
    /// for the trace, read it with the provider's `parse`, and settle the usage the request
    /// counts (`model::settle_usage`).
    pub async fn chat(
        &self,
        path: &str,
        req: &super::ChatRequest,
        body: serde_json::Value,
        operation_id: String,
        parse: fn(&serde_json::Value) -> Result<ChatReply, ModelError>,
    ) -> CallOutcome {
        let out =
            self.request(path, Some(&body), Some(&operation_id), req.timeout, &self.retry).await;
        let mut outcome = chat_outcome(out, body, operation_id, parse);
        super::settle_usage(req, &mut outcome);
        outcome
    }

    /// POST `body` to `path` (GET when None) with `policy` (`send`).
    pub async fn request(
        &self,
        path: &str,
        body: Option<&serde_json::Value>,
        operation_id: Option<&str>,
        timeout: Duration,
        policy: &RetryPolicy,
    ) -> HttpOutcome {
        let (url, bearer) = (self.url(path), self.bearer.as_deref());
        send(&self.client, &url, body, bearer, operation_id, timeout, policy, self.max_bytes).await
    }

    /// GET `path` once (a setup check: no retry).
    pub async fn get(&self, path: &str, timeout: Duration) -> HttpOutcome {
        self.request(path, None, None, timeout, &RetryPolicy::None).await
    }
}

/// The call's outcome: the reply body kept for the trace, read with the provider's `parse`.
fn chat_outcome(
    out: HttpOutcome,
    body: serde_json::Value,
    operation_id: String,
    parse: fn(&serde_json::Value) -> Result<ChatReply, ModelError>,
) -> CallOutcome {
    let (reply_body, result) = match out.result {
        Ok((_, text)) => {
            let (raw, parsed) = parse_body(&text);
            (Some(raw), parsed.and_then(|v| parse(&v)))
        }
        Err(e) => (None, Err(e)),
    };
    CallOutcome {
        operation_id,
        request_body: body,
        reply_body,
        result,
        attempts: out.attempts,
        latency: out.latency,
        wait: out.wait,
    }
}
