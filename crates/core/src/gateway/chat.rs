//! A chat call of any API: read by the API's reader into the common form,
//! refused by name where it cannot be honoured, the budget reserved, forwarded
//! to the experiment's model, metered, delivered (`delivered`), and answered
//! in the API's own form; one trace line whatever becomes of it.

use super::adapter::{self, Replying};
use super::http::{Refusal, Resp, bad_request, json_of, json_response, refusal, respond, settle};
use super::meter::refused_excerpt;
use super::meter::{CallKind, Reservation, TrialMeter};
use super::wire::{self, Api, Asked, ReplyMeta};
use super::{delivered, legacy, responses};
use crate::model::ChatRequest;
use crate::record::TraceStep;
use crate::record::harness_kind::HostedTools;
use crate::record::omit::holds_string;
use bytes::Bytes;
use hyper::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A chat request, whatever becomes of it: one trace line.
pub(super) async fn chat_request(
    meter: Arc<TrialMeter>,
    api: Api,
    path_model: Option<String>,
    authorized: bool,
    body: Result<Bytes, bool>,
    shown: String,
) -> Resp {
    meter.note_request();
    let n = meter.next_call();
    let mut step = meter.blank_step(n);
    let mut forwarded = false;
    if !authorized {
        meter.state.lock().unwrap().refused_requests += 1;
        step.notes.push(format!("refused: {shown}"));
    }
    let (received, outcome) = match call_body(api, body, authorized) {
        Ok(v) => {
            let out = chat(&meter, api, path_model, &v, &mut step, &mut forwarded).await;
            (v, out)
        }
        Err((received, refused)) => (received, Err(refused)),
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

/// A chat call's body as JSON; or what its trace line keeps of it (its text, capped, when it
/// is not JSON) and its refusal: too large, unreadable, not JSON, or no key.
#[allow(clippy::result_large_err)] // the handlers' refusal type (`http::json_of`)
fn call_body(
    api: Api,
    body: Result<Bytes, bool>,
    authorized: bool,
) -> Result<Value, (Value, Refusal)> {
    let bytes = match body {
        Ok(bytes) => bytes,
        Err(_) => return Err((Value::Null, json_of(body, api).expect_err("an unread body"))),
    };
    let parsed = super::http::bounded_json(&bytes);
    let unauthorized =
        || refusal(api, StatusCode::UNAUTHORIZED, "unauthorized", "missing or wrong key", None);
    match parsed {
        Ok(v) if authorized => Ok(v),
        Ok(v) => Err((v, unauthorized())),
        Err(e) => {
            let raw = crate::model::http::truncate(&String::from_utf8_lossy(&bytes), 64 * 1024);
            let not_json = e.to_string();
            let r = if authorized {
                refusal(api, StatusCode::BAD_REQUEST, "invalid_request_error", &not_json, None)
            } else {
                unauthorized()
            };
            Err((Value::String(raw), r))
        }
    }
}

/// A chat call with a JSON body from an authorized harness: read, reserve,
/// forward, answer. Err is a refusal (response, body) for the trace.
/// `forwarded` is set once a step is reserved (the call is in flight).
pub(super) async fn chat(
    meter: &Arc<TrialMeter>,
    api: Api,
    path_model: Option<String>,
    body: &Value,
    step: &mut TraceStep,
    forwarded: &mut bool,
) -> Result<Resp, Refusal> {
    too_many_messages(api, body)?;
    let (asked, mut request) = read_call(meter, api, path_model, body)?;
    let r = meter.reserve(crate::model::prompt_bound(&request), CallKind::Chat).await.map_err(|limit| {
        let name = limit.name();
        let msg = format!("budget exhausted ({name}): the trial's {name} budget is spent; no further model calls are allowed");
        step.error = Some(msg.clone());
        refusal(api, StatusCode::TOO_MANY_REQUESTS, "budget_exhausted", &msg, Some(name))
    })?;
    *forwarded = true;
    let delivery = delivered::observe(&asked, body, &request, &*meter.client, &meter.model.name);
    meter.state.lock().unwrap().delivery.merge(&delivery);
    step.notes = meter.overrides(&asked, r.max_tokens);
    step.notes.extend(notes(meter, api, &asked, &request, &r));
    request.max_tokens = r.max_tokens;
    request.timeout = r.timeout;
    let reply = forward(meter, api, &request, &r, step).await?;
    if api == Api::Responses && asked.store {
        let ids = responses::Ids::of(&step.operation_id);
        let had_instructions = responses::has_instructions(body);
        meter.store(
            ids.response,
            responses::stored_conversation(&request.messages, had_instructions, &reply),
        );
    }
    Ok(answer(meter, api, &asked, &reply, step))
}

/// The request as read by its API's adapter, and the call in the common form
/// with the experiment's settings; refused by name where it cannot be honoured.
#[allow(clippy::result_large_err)] // the handlers' refusal type (`http::json_of`)
fn read_call(
    meter: &TrialMeter,
    api: Api,
    path_model: Option<String>,
    body: &Value,
) -> Result<(Asked, ChatRequest), Refusal> {
    let refused = |msg: String| {
        meter.note_unsupported(msg.clone());
        refusal(api, StatusCode::BAD_REQUEST, "invalid_request_error", &msg, None)
    };
    let mut asked = adapter::of(api).read(body).map_err(|e| {
        meter.note_unsupported(e.to_string());
        bad_request(api, &e)
    })?;
    if let Some(m) = path_model {
        asked.model = Some(json!(m));
    }
    if meter.hosted_tools.get() == Some(&HostedTools::Refuse) && !asked.omitted_tools.is_empty() {
        return Err(refused(format!(
            "tools: hosted tool `{}` refused ([gateway] hosted_tools = \"refuse\"): no model behind the gateway runs it",
            asked.omitted_tools.join("`, `")
        )));
    }
    let request = ChatRequest {
        messages: conversation(meter, api, &asked, body)?,
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
        return Err(refused(format!(
            "`{field}` is not supported by this experiment's model (provider {}): it cannot be honoured, so the call is refused rather than run without it",
            meter.model.provider.name()
        )));
    }
    Ok((asked, request))
}

/// The messages sent: the request's, with a Responses call's stored
/// conversation (`previous_response_id`) after its instructions.
#[allow(clippy::result_large_err)] // the handlers' refusal type (`http::json_of`)
fn conversation(
    meter: &TrialMeter,
    api: Api,
    asked: &Asked,
    body: &Value,
) -> Result<Vec<crate::model::Message>, Refusal> {
    let mut messages = asked.messages.clone();
    let Some(prev) = &asked.previous_response_id else { return Ok(messages) };
    let Some(earlier) = meter.stored(prev) else {
        let msg = format!("Previous response with id '{prev}' not found.");
        let mut v = wire::error_body(api, "invalid_request_error", &msg, None);
        v["error"]["param"] = json!("previous_response_id");
        v["error"]["code"] = json!("previous_response_not_found");
        return Err((json_response(StatusCode::BAD_REQUEST, &v), v));
    };
    // Its instructions first (not carried over), then the stored turns, then this input.
    let at = usize::from(responses::has_instructions(body));
    messages.splice(at..at, earlier);
    let bytes = super::meter::conversation_bytes(&messages);
    if messages.len() > super::MAX_MESSAGES || bytes > super::MAX_CONVERSATION_BYTES {
        let msg = format!(
            "the conversation with previous_response_id holds {} messages and {bytes} bytes of text, over the {} messages and {} bytes one call may send",
            messages.len(),
            super::MAX_MESSAGES,
            super::MAX_CONVERSATION_BYTES
        );
        let mut v = wire::error_body(api, "invalid_request_error", &msg, None);
        v["error"]["param"] = json!("previous_response_id");
        return Err((json_response(StatusCode::BAD_REQUEST, &v), v));
    }
    Ok(messages)
}

/// A body whose list of messages (`messages`, a Responses `input`, a Gemini
/// `contents`) is longer than a call may send is refused before it is read.
#[allow(clippy::result_large_err)] // the handlers' refusal type (`http::json_of`)
fn too_many_messages(api: Api, body: &Value) -> Result<(), Refusal> {
    for key in ["messages", "input", "contents"] {
        if let Some(n) = body.get(key).and_then(Value::as_array).map(Vec::len)
            && n > super::MAX_MESSAGES
        {
            let msg =
                format!("{key}: {n} items, over the {} one call may send", super::MAX_MESSAGES);
            let mut v = wire::error_body(api, "invalid_request_error", &msg, None);
            v["error"]["param"] = json!(key);
            return Err((json_response(StatusCode::BAD_REQUEST, &v), v));
        }
    }
    Ok(())
}

/// The trace notes of a forwarded call: its output cap, and what was asked
/// and does not reach the model.
fn notes(
    meter: &TrialMeter,
    api: Api,
    asked: &Asked,
    request: &ChatRequest,
    r: &Reservation,
) -> Vec<String> {
    let mut notes = Vec::new();
    if r.clamped {
        notes.push(format!(
            "max_tokens: {} (what remains of max_total_tokens beside the calls in flight)",
            r.max_tokens
        ));
    }
    if !asked.ignored.is_empty() {
        notes.push(format!("not forwarded: {}", asked.ignored.join(", ")));
    }
    if !asked.omitted_tools.is_empty() {
        notes.push(format!(
            "hosted tools left out (no model the gateway forwards to runs them): {}",
            asked.omitted_tools.join(", ")
        ));
    }
    if let Some(asked) = &request.reasoning {
        let reached = meter.client.delivers_reasoning(asked);
        if reached.as_ref() != Some(asked) {
            let reached = reached.map_or("nothing".to_string(), |x| x.to_string());
            let provider = meter.model.provider.name();
            notes.push(format!(
                "reasoning: asked {asked}, reached the model as {reached} (provider {provider})"
            ));
        }
    }
    if matches!(api, Api::Completions | Api::Generate) {
        notes.push(legacy::NOTE.to_string());
    }
    notes
}

/// The call to the model, metered: its reply, or the refusal the harness
/// gets (the provider failed, or the working time ran out in flight).
async fn forward(
    meter: &TrialMeter,
    api: Api,
    request: &ChatRequest,
    r: &Reservation,
    step: &mut TraceStep,
) -> Result<crate::model::ChatReply, Refusal> {
    // A call still in flight when the working time is spent is cut there: traced and answered,
    // so that the record and its trace agree (the harness is being stopped anyway).
    let outcome = tokio::select! {
        o = meter.client.chat(request, step.operation_id.clone()) => o,
        () = meter.out_of_time() => {
            meter.state.lock().unwrap().reserved -= r.reserved;
            let msg = "cut in flight: the trial's working_seconds budget is spent";
            step.error = Some(msg.to_string());
            let status = StatusCode::TOO_MANY_REQUESTS;
            return Err(refusal(api, status, "budget_exhausted", msg, Some("working_seconds")));
        }
    };
    step.request_attempts = outcome.attempts;
    step.latency_ms = outcome.latency.as_millis() as u64;
    step.rate_limit_wait_ms = outcome.wait.as_millis() as u64;
    let mut st = meter.state.lock().unwrap();
    st.wait += outcome.wait;
    st.reserved = st.reserved.saturating_sub(r.reserved);
    match outcome.result {
        Ok(reply) => {
            st.tokens.add(reply.usage);
            if reply.token_source == crate::record::TokenSource::Estimated {
                st.estimated_calls += 1;
            }
            reply.note_fingerprint(&mut st.fingerprints);
            meter.note_spent(&mut st);
            Ok(reply)
        }
        Err(e) => {
            let msg = e.to_string();
            step.error = Some(msg.clone());
            Err(if meter.upstream_failed(st, &e, r.limited_by_budget) {
                let m = format!(
                    "budget exhausted (working_seconds): the model call timed out with the trial's working time ({msg})"
                );
                let status = StatusCode::TOO_MANY_REQUESTS;
                refusal(api, status, "budget_exhausted", &m, Some("working_seconds"))
            } else {
                let m = format!("the model endpoint failed: {msg}");
                refusal(api, StatusCode::BAD_GATEWAY, "provider_error", &m, None)
            })
        }
    }
}

/// The reply in the API's own form (whole, or its stream), and its trace.
fn answer(
    meter: &TrialMeter,
    api: Api,
    asked: &Asked,
    reply: &crate::model::ChatReply,
    step: &mut TraceStep,
) -> Resp {
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
    let replying = Replying { reply, meta: &meta, asked, operation_id: &step.operation_id };
    let adapter = adapter::of(api);
    let json_reply = adapter.reply(&replying);
    // Every chat API streams; a stream asked of one that did not would get the whole reply.
    let resp = match if asked.stream { adapter.stream(&replying) } else { None } {
        Some((framing, text)) => {
            step.notes.push(format!("streamed ({})", framing.name()));
            respond(StatusCode::OK, framing.content_type(), text)
        }
        None => json_response(StatusCode::OK, &json_reply),
    };
    if !reply.text.is_empty() && !holds_string(&json_reply, &reply.text) {
        step.reply_text = Some(reply.text.clone());
    }
    step.reply = Some(json_reply);
    resp
}
