//! The responses every handler shares: a body with its status, the refusal
//! forms, a request body read as JSON, and what a trace line keeps of it.

use super::MAX_REQUEST_BYTES;
use super::wire::{self, Api, BadRequest};
use crate::record::TraceStep;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use serde_json::Value;

pub(super) type Resp = Response<Full<Bytes>>;

pub(super) fn respond(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(hyper::header::CONTENT_TYPE, content_type.parse().expect("a valid header value"));
    r
}

/// A 400 refusing a request the API's reader could not read, and its body for the trace.
pub(super) fn bad_request(api: Api, bad: &BadRequest) -> (Resp, Value) {
    let v = wire::bad_request_body(api, bad);
    (json_response(StatusCode::BAD_REQUEST, &v), v)
}

pub(super) fn json_response(status: StatusCode, v: &Value) -> Resp {
    let mut r = respond(status, "application/json", v.to_string());
    // OpenAI's SDKs retry 429 and 5xx unless told not to: a refusal is final.
    if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        r.headers_mut().insert("x-should-retry", "false".parse().expect("a valid header value"));
    }
    r
}

/// The response of a handled request; a refusal's body (and its message, when
/// the step has no error yet) goes into the step's trace line.
pub(super) fn settle(outcome: Result<Resp, (Resp, Value)>, step: &mut TraceStep) -> Resp {
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
pub(super) fn as_received(body: &Result<Bytes, bool>) -> Value {
    match body {
        Ok(b) => serde_json::from_slice::<Value>(b).unwrap_or_else(|_| {
            Value::String(crate::model::http::truncate(&String::from_utf8_lossy(b), 64 * 1024))
        }),
        Err(_) => Value::Null,
    }
}

/// A refused request: the response, and its body for the trace.
pub(super) type Refusal = (Resp, Value);

/// A refusal in `api`'s error form.
pub(super) fn refusal(
    api: Api,
    status: StatusCode,
    kind: &str,
    message: &str,
    limit: Option<&str>,
) -> Refusal {
    let v = wire::error_body(api, kind, message, limit);
    (json_response(status, &v), v)
}

/// A request body read as JSON, or its refusal (413 too large, 400 unreadable
/// or not JSON) in `api`'s error form: the handlers' refusal type, as they return it.
#[allow(clippy::result_large_err)]
pub(super) fn json_of(body: Result<Bytes, bool>, api: Api) -> Result<Value, Refusal> {
    let refusal = |status, kind: &str, message: &str| refusal(api, status, kind, message, None);
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
