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
        Ok(b) => bounded_json(b).unwrap_or_else(|_| {
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
    bounded_json(&bytes)
        .map_err(|e| refusal(StatusCode::BAD_REQUEST, "invalid_request_error", &e.to_string()))
}

/// Most JSON values (objects, arrays, strings, numbers, ..., an object's keys
/// counted as strings) one request body may hold: a body is counted without being built before it is parsed, so a
/// body of many tiny values cannot make the gateway hold hundreds of MB.
pub(crate) const MAX_JSON_VALUES: usize = 100_000;

/// Why a body was not parsed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    #[error("the request body is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("the request body holds more than {MAX_JSON_VALUES} JSON values")]
    TooManyValues,
}

/// A body parsed as JSON once it is known to hold at most MAX_JSON_VALUES values.
pub(crate) fn bounded_json(bytes: &[u8]) -> Result<Value, BodyError> {
    use serde::de::DeserializeSeed;
    let seen = std::cell::Cell::new(0usize);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match ValueCount(&seen).deserialize(&mut de).and_then(|()| de.end()) {
        Ok(()) => serde_json::from_slice(bytes).map_err(BodyError::NotJson),
        Err(_) if seen.get() > MAX_JSON_VALUES => Err(BodyError::TooManyValues),
        Err(e) => Err(BodyError::NotJson(e)),
    }
}

/// Counts a document's values as it reads them, keeping none; stops past the limit.
struct ValueCount<'a>(&'a std::cell::Cell<usize>);

impl ValueCount<'_> {
    fn one<E: serde::de::Error>(&self) -> Result<(), E> {
        self.0.set(self.0.get() + 1);
        if self.0.get() > MAX_JSON_VALUES {
            return Err(E::custom("too many JSON values"));
        }
        Ok(())
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for ValueCount<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ValueCount<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.one()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.one()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.one()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.one()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.one()
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.one()
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.one()?;
        while seq.next_element_seed(ValueCount(self.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.one()?;
        while map.next_key_seed(ValueCount(self.0))?.is_some() {
            map.next_value_seed(ValueCount(self.0))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_parsed_only_within_its_count_of_values() {
        // {"a": [1, 2, {"b": null}]}: the object, "a", the list, 1, 2, the inner object, "b",
        // null: 8 values, counted by hand.
        let seen = std::cell::Cell::new(0);
        use serde::de::DeserializeSeed;
        let mut de = serde_json::Deserializer::from_slice(br#"{"a": [1, 2, {"b": null}]}"#);
        ValueCount(&seen).deserialize(&mut de).unwrap();
        assert_eq!(seen.get(), 8);
        // A list of N zeros holds N + 1 values: at the limit it parses, one more is refused.
        let list = |n: usize| format!("[{}]", vec!["0"; n].join(","));
        assert!(bounded_json(list(MAX_JSON_VALUES - 1).as_bytes()).is_ok());
        assert!(matches!(
            bounded_json(list(MAX_JSON_VALUES).as_bytes()),
            Err(BodyError::TooManyValues)
        ));
        assert!(matches!(bounded_json(b"{\"a\": }"), Err(BodyError::NotJson(_))));
        assert!(matches!(bounded_json(b"{} trailing"), Err(BodyError::NotJson(_))));
    }
}
