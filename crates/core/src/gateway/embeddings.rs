//! Embeddings through the gateway: OpenAI's `/v1/embeddings`, Ollama's
//! `/api/embed` and its older `/api/embeddings`, read into one
//! `EmbedRequest` (each form a serde struct, unknown keys refused, each field's
//! type checking its value) and answered in the form asked, whatever the upstream's API.
//! The embedding model is the harness's choice (it names it); the call is
//! metered (its input tokens count against `max_total_tokens`, not a step)
//! and traced. An upstream that serves no embeddings (the embedded model)
//! gets a 501.

use super::adapter::{Adapter, Call};
use super::http::{Resp, as_received, bad_request, json_of, json_response, refusal, settle};
use super::meter::{CallKind, TrialMeter, refused_excerpt};
use super::wire::{Api, BadRequest, checked, from_body};
use crate::model::ModelError;
use crate::model::embed::{EmbedReply, EmbedRequest};
use crate::record::Tokens;
use bytes::Bytes;
use hyper::StatusCode;
use serde::Deserialize;
use serde::de::Deserializer;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Which endpoint was called: its request and reply forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedApi {
    /// OpenAI's `POST /v1/embeddings`.
    OpenAi,
    /// Ollama's `POST /api/embed`.
    Ollama,
    /// Ollama's older `POST /api/embeddings` (`prompt`, one vector).
    OllamaLegacy,
}

impl EmbedApi {
    /// The API whose error form its errors take.
    pub fn errors(self) -> Api {
        match self {
            EmbedApi::OpenAi => Api::OpenAi,
            EmbedApi::Ollama | EmbedApi::OllamaLegacy => Api::Ollama,
        }
    }
}

/// What an embeddings request asks.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub request: EmbedRequest,
    /// The model as the harness named it (the reply names it so).
    pub named: String,
    /// OpenAI's `encoding_format: "base64"`: little-endian float32, base64.
    pub base64: bool,
    /// Keys read and not forwarded (said in the trace).
    pub ignored: Vec<String>,
}

/// The texts of `key`; Err: what is wrong with it, naming it.
fn texts(v: Value, key: &str) -> Result<Vec<String>, String> {
    let out = match v {
        Value::String(s) => vec![s],
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Value::String(s) => out.push(s),
                    Value::Number(_) | Value::Array(_) => {
                        return Err(format!(
                            "`{key}` as token ids is not supported by the gateway: send the text"
                        ));
                    }
                    other => {
                        return Err(format!(
                            "`{key}` must be a string or an array of strings; it holds {other}"
                        ));
                    }
                }
            }
            out
        }
        other => {
            return Err(format!("`{key}` must be a string or an array of strings, not {other}"));
        }
    };
    if out.is_empty() {
        return Err(format!("`{key}` is empty"));
    }
    Ok(out)
}

/// The embedding model the harness names.
#[derive(Debug)]
struct Model(String);

impl<'de> Deserialize<'de> for Model {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked(d, |v| match v {
            Value::String(s) => Ok(Model(s)),
            _ => Err(MODEL.to_string()),
        })
    }
}

const MODEL: &str = "`model` must be a string: the embedding model";

/// The texts to embed under `input` (not empty; token ids are refused).
#[derive(Debug)]
struct Input(Vec<String>);

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked(d, |v| texts(v, "input").map(Input))
    }
}

/// The older Ollama form's one text, under `prompt`.
#[derive(Debug)]
struct Prompt(Vec<String>);

impl<'de> Deserialize<'de> for Prompt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked(d, |v| texts(v, "prompt").map(Prompt))
    }
}

/// The vectors' length asked for: a positive whole number.
#[derive(Debug)]
struct Dimensions(u64);

impl<'de> Deserialize<'de> for Dimensions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked(d, |v| {
            v.as_u64()
                .filter(|&d| d > 0)
                .map(Dimensions)
                .ok_or_else(|| "`dimensions` must be a positive whole number".to_string())
        })
    }
}

/// OpenAI's `encoding_format`: `true` for base64.
#[derive(Debug)]
struct Base64(bool);

impl<'de> Deserialize<'de> for Base64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked(d, |v| match v.as_str() {
            Some("float") => Ok(Base64(false)),
            Some("base64") => Ok(Base64(true)),
            _ => Err(format!("`encoding_format` must be \"float\" or \"base64\", not {v}")),
        })
    }
}

/// OpenAI's `POST /v1/embeddings` body. A null reads as an absent value; a key not listed is
/// refused; `user` is read and not forwarded.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenAiBody {
    model: Option<Model>,
    input: Option<Input>,
    encoding_format: Option<Base64>,
    dimensions: Option<Dimensions>,
    user: Option<Value>,
}

/// Ollama's `POST /api/embed` body; `truncate`, `options` and `keep_alive` are read and not
/// forwarded.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OllamaBody {
    model: Option<Model>,
    input: Option<Input>,
    dimensions: Option<Dimensions>,
    truncate: Option<Value>,
    options: Option<Value>,
    keep_alive: Option<Value>,
}

/// Ollama's older `POST /api/embeddings` body: one text as `prompt`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LegacyBody {
    model: Option<Model>,
    prompt: Option<Prompt>,
    options: Option<Value>,
    keep_alive: Option<Value>,
}

/// The keys of `values` that were given (not absent, not null).
fn given<const N: usize>(values: [(&str, &Option<Value>); N]) -> Vec<String> {
    values.iter().filter(|(_, v)| v.is_some()).map(|(k, _)| k.to_string()).collect()
}

/// An embeddings call: the common form [`Asked`], answered from the upstream's vectors.
pub enum Embed {}

impl Call for Embed {
    type Asked = Asked;
    type Answer<'a> = Embedded<'a>;
    type Body<'a> = Value;
}

/// What an embeddings reply is written from: the upstream's vectors and the request as read.
pub struct Embedded<'a> {
    pub reply: &'a EmbedReply,
    pub asked: &'a Asked,
}

impl EmbedApi {
    /// The adapter of this endpoint.
    pub fn adapter(self) -> &'static dyn Adapter<Embed> {
        match self {
            EmbedApi::OpenAi => &OpenAiEmbeddings,
            EmbedApi::Ollama => &OllamaEmbed,
            EmbedApi::OllamaLegacy => &OllamaEmbeddings,
        }
    }
}

/// Read a request body in `api`'s form. The experiment's model name (or
/// `NAME:latest`) stands for `upstream_model`; any other name is the
/// harness's own embedding model and is forwarded as named.
pub fn read(
    api: EmbedApi,
    v: Value,
    experiment_name: &str,
    upstream_model: &str,
) -> Result<Asked, BadRequest> {
    let mut asked = api.adapter().read(v)?;
    if asked.named.strip_suffix(":latest").unwrap_or(&asked.named) == experiment_name {
        asked.request.model = upstream_model.to_string();
    }
    Ok(asked)
}

/// The fields every form reads, into the common form: the model as named, the texts under `key`.
fn asked(
    model: Option<Model>,
    (key, texts): (&str, Option<Vec<String>>),
    dimensions: Option<Dimensions>,
    base64: Option<Base64>,
    ignored: Vec<String>,
) -> Result<Asked, BadRequest> {
    let Model(named) = model.ok_or(MODEL)?;
    let input = texts.ok_or_else(|| BadRequest::naming(key, format!("`{key}` is missing")))?;
    Ok(Asked {
        request: EmbedRequest {
            model: named.clone(),
            input,
            dimensions: dimensions.map(|d| d.0),
            timeout: Duration::ZERO,
        },
        named,
        base64: base64.is_some_and(|b| b.0),
        ignored,
    })
}

fn object(v: Value) -> Result<Value, BadRequest> {
    match v {
        Value::Object(_) => Ok(v),
        _ => Err("the request body must be a JSON object".into()),
    }
}

/// OpenAI's `POST /v1/embeddings`.
struct OpenAiEmbeddings;

impl Adapter<Embed> for OpenAiEmbeddings {
    fn read(&self, body: Value) -> Result<Asked, BadRequest> {
        let b: OpenAiBody = from_body(object(body)?)?;
        let ignored = given([("user", &b.user)]);
        asked(b.model, ("input", b.input.map(|t| t.0)), b.dimensions, b.encoding_format, ignored)
    }
    fn reply(&self, e: &Embedded) -> Value {
        let data: Vec<Value> = e
            .reply
            .vectors
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let embedding = if e.asked.base64 { json!(base64_f32(v)) } else { json!(v) };
                json!({"object": "embedding", "index": i, "embedding": embedding})
            })
            .collect();
        let tokens = e.reply.input_tokens;
        json!({"object": "list", "data": data, "model": e.asked.named,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
    }
}

/// Ollama's `POST /api/embed`.
struct OllamaEmbed;

impl Adapter<Embed> for OllamaEmbed {
    fn read(&self, body: Value) -> Result<Asked, BadRequest> {
        let b: OllamaBody = from_body(object(body)?)?;
        let ignored = given([
            ("truncate", &b.truncate),
            ("options", &b.options),
            ("keep_alive", &b.keep_alive),
        ]);
        asked(b.model, ("input", b.input.map(|t| t.0)), b.dimensions, None, ignored)
    }
    fn reply(&self, e: &Embedded) -> Value {
        json!({"model": e.asked.named, "embeddings": e.reply.vectors, "total_duration": 0,
            "load_duration": 0, "prompt_eval_count": e.reply.input_tokens})
    }
}

/// Ollama's older `POST /api/embeddings` (`prompt`, one vector).
struct OllamaEmbeddings;

impl Adapter<Embed> for OllamaEmbeddings {
    fn read(&self, body: Value) -> Result<Asked, BadRequest> {
        let b: LegacyBody = from_body(object(body)?)?;
        let ignored = given([("options", &b.options), ("keep_alive", &b.keep_alive)]);
        let asked = asked(b.model, ("prompt", b.prompt.map(|t| t.0)), None, None, ignored)?;
        if asked.request.input.len() != 1 {
            return Err(BadRequest::naming("prompt", "`prompt` must be one string"));
        }
        Ok(asked)
    }
    fn reply(&self, e: &Embedded) -> Value {
        json!({"embedding": e.reply.vectors.first().cloned().unwrap_or_default()})
    }
}

/// What the trace keeps of a reply: its shape, not the vectors.
pub fn traced(r: &EmbedReply) -> Value {
    json!({"vectors": r.vectors.len(), "dimensions": r.vectors.first().map_or(0, Vec::len)})
}

/// A vector as OpenAI's base64 encoding: little-endian float32, standard alphabet, padded.
pub(crate) fn base64_f32(v: &[f64]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = v.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// An embeddings request from an authorized harness: forwarded to the
/// upstream when it serves embeddings (501 when it does not), its input
/// tokens counted against the budget; one trace line whatever becomes of it.
pub(super) async fn embeddings_request(
    meter: Arc<TrialMeter>,
    api: EmbedApi,
    body: Result<Bytes, bool>,
    shown: String,
) -> Resp {
    meter.note_request();
    let n = meter.next_embedding();
    let mut step = meter.blank_step(n);
    let received = as_received(&body);
    let (mut reserved, mut unserved) = (None, false);
    let outcome = embed_call(&meter, api, body, &mut step, &mut reserved, &mut unserved).await;
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

/// The embeddings call itself: read, refused where the upstream serves none,
/// reserved, forwarded, metered. `reserved`: the tokens held while in flight;
/// `unserved`: the provider serves no embeddings.
async fn embed_call(
    meter: &TrialMeter,
    api: EmbedApi,
    body: Result<Bytes, bool>,
    step: &mut crate::record::TraceStep,
    reserved: &mut Option<u64>,
    unserved: &mut bool,
) -> Result<Resp, (Resp, Value)> {
    let refusal = |status, kind: &str, message: &str, limit: Option<&str>| {
        refusal(api.errors(), status, kind, message, limit)
    };
    let v = json_of(body, api.errors())?;
    let mut asked = read(api, v, &meter.model.name, &meter.model.model)
        .map_err(|e| bad_request(api.errors(), &e))?;
    if meter.client.embed(&asked.request, &step.operation_id).is_none() {
        *unserved = true;
        let msg = format!(
            "the experiment's model (provider {}) serves no embeddings",
            meter.model.provider.name()
        );
        return Err(refusal(StatusCode::NOT_IMPLEMENTED, "not_implemented", &msg, None));
    }
    let r = meter.reserve(asked.request.bound(), CallKind::Embedding).await.map_err(|limit| {
        let name = limit.name();
        let msg = format!("budget exhausted ({name}): the trial's {name} budget is spent; no further model calls are allowed");
        refusal(StatusCode::TOO_MANY_REQUESTS, "budget_exhausted", &msg, Some(name))
    })?;
    *reserved = Some(r.reserved);
    if !asked.ignored.is_empty() {
        step.notes.push(format!("not forwarded: {}", asked.ignored.join(", ")));
    }
    asked.request.timeout = r.timeout;
    let Some(call) = meter.client.embed(&asked.request, &step.operation_id) else {
        unreachable!("the provider served embeddings a moment ago")
    };
    metered(meter, api, &asked, call.await, step, r.limited_by_budget)
}

/// An embeddings call's outcome counted against the budget and traced; the
/// reply in the form asked, or the refusal the harness hears.
#[allow(clippy::result_large_err)] // the handlers' refusal type (`http::json_of`)
fn metered(
    meter: &TrialMeter,
    api: EmbedApi,
    asked: &Asked,
    outcome: crate::model::embed::EmbedOutcome,
    step: &mut crate::record::TraceStep,
    limited_by_budget: bool,
) -> Result<Resp, (Resp, Value)> {
    let refusal = |status, kind: &str, message: &str, limit: Option<&str>| {
        refusal(api.errors(), status, kind, message, limit)
    };
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
            step.reply = Some(traced(&reply));
            let answer = Embedded { reply: &reply, asked };
            Ok(json_response(StatusCode::OK, &api.adapter().reply(&answer)))
        }
        // The upstream refused the request itself (an unknown embedding model, bad input): the harness hears it; the trial goes on.
        Err(ModelError::Status { status, body })
            if (400..500).contains(&status) && status != 429 =>
        {
            drop(st);
            let msg = format!("the upstream refused the embeddings request: HTTP {status}: {body}");
            step.error = Some(msg.clone());
            Err(refusal(
                StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
                "upstream_refused",
                &msg,
                None,
            ))
        }
        Err(e) => {
            let msg = e.to_string();
            step.error = Some(msg.clone());
            if meter.upstream_failed(st, &e, limited_by_budget) {
                let m = format!(
                    "budget exhausted (working_seconds): the embeddings call timed out with the trial's working time ({msg})"
                );
                Err(refusal(
                    StatusCode::TOO_MANY_REQUESTS,
                    "budget_exhausted",
                    &m,
                    Some("working_seconds"),
                ))
            } else {
                Err(refusal(
                    StatusCode::BAD_GATEWAY,
                    "provider_error",
                    &format!("the embeddings endpoint failed: {msg}"),
                    None,
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_pythons_struct_and_base64() {
        // python3 -c 'import base64,struct; print(base64.b64encode(struct.pack("<3f", 1.0, -2.5, 0.1)).decode())'
        assert_eq!(base64_f32(&[1.0, -2.5, 0.1]), "AACAPwAAIMDNzMw9");
        // struct.pack("<f", 1.0) alone: 4 bytes, two padding characters.
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
    }

    #[test]
    fn requests_are_read_in_each_form_and_token_ids_refused() {
        let a = read(
            EmbedApi::OpenAi,
            json!({"model": "m", "input": "hi", "encoding_format": "base64", "user": "u"}),
            "m",
            "up",
        )
        .unwrap();
        assert_eq!(
            (a.request.model.as_str(), a.request.input.clone(), a.base64, a.ignored.clone()),
            ("up", vec!["hi".to_string()], true, vec!["user".to_string()])
        );
        // The reply names the model as the harness did.
        assert_eq!(a.named, "m");
        let a = read(
            EmbedApi::Ollama,
            json!({"model": "nomic", "input": ["a", "b"], "dimensions": 8}),
            "m",
            "up",
        )
        .unwrap();
        assert_eq!(
            (a.request.model.as_str(), a.request.input.len(), a.request.dimensions),
            ("nomic", 2, Some(8))
        );
        assert_eq!(
            read(EmbedApi::OllamaLegacy, json!({"model": "m:latest", "prompt": "x"}), "m", "up")
                .unwrap()
                .request
                .model,
            "up"
        );
        let e = read(EmbedApi::OpenAi, json!({"model": "m", "input": [[1, 2]]}), "m", "up")
            .unwrap_err();
        assert!(e.message.contains("token ids"), "{e}");
        assert_eq!(e.param.as_deref(), Some("input"));
        assert!(
            read(EmbedApi::OpenAi, json!({"model": "m", "input": []}), "m", "up")
                .unwrap_err()
                .message
                .contains("empty")
        );
        assert!(
            read(EmbedApi::Ollama, json!({"model": "m", "input": "x", "stream": true}), "m", "up")
                .unwrap_err()
                .message
                .contains("`stream`")
        );
        let e =
            read(EmbedApi::Ollama, json!({"model": "m", "input": "x", "stream": true}), "m", "up")
                .unwrap_err();
        // An unknown key is refused by serde, naming it and the form's keys.
        assert_eq!(e.param.as_deref(), Some("stream"));
        assert_eq!(
            e.message,
            "unknown field `stream`, expected one of `model`, `input`, `dimensions`, `truncate`, \
             `options`, `keep_alive`"
        );
        let e = read(EmbedApi::OllamaLegacy, json!({"model": "m", "input": "x"}), "m", "up")
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("input"));
        // A value of the wrong kind is refused naming its key.
        let refused = |api, body: serde_json::Value| read(api, body, "m", "up").unwrap_err();
        let e = refused(
            EmbedApi::OpenAi,
            json!({"model": "m", "input": "x", "encoding_format": "hex"}),
        );
        assert_eq!(e.param.as_deref(), Some("encoding_format"));
        assert_eq!(e.message, r#"`encoding_format` must be "float" or "base64", not "hex""#);
        let e = refused(EmbedApi::Ollama, json!({"model": "m", "input": "x", "dimensions": 0}));
        assert_eq!(e.param.as_deref(), Some("dimensions"));
        let e = refused(EmbedApi::OpenAi, json!({"model": 3, "input": "x"}));
        assert_eq!(
            (e.param.as_deref(), e.message.as_str()),
            (Some("model"), "`model` must be a string: the embedding model")
        );
        let e = refused(EmbedApi::OpenAi, json!({"input": "x"}));
        assert_eq!(e.message, "`model` must be a string: the embedding model");
        let e = refused(EmbedApi::OllamaLegacy, json!({"model": "m", "prompt": ["a", "b"]}));
        assert_eq!(
            (e.param.as_deref(), e.message.as_str()),
            (Some("prompt"), "`prompt` must be one string")
        );
        let e = refused(EmbedApi::OpenAi, json!({"model": "m", "input": ["a", {}]}));
        assert_eq!(e.message, "`input` must be a string or an array of strings; it holds {}");
        assert_eq!(refused(EmbedApi::OpenAi, json!([1])).param, None);
        let e = refused(EmbedApi::OpenAi, json!({"model": "m", "input": "x", "dimensions": 8.5}));
        assert_eq!(e.message, "`dimensions` must be a positive whole number");
        // A null is an absent value: nothing ignored, no dimensions, floats.
        let a = read(
            EmbedApi::OpenAi,
            json!({"model": "m", "input": "x", "user": null, "dimensions": null, "encoding_format": null}),
            "m",
            "up",
        )
        .unwrap();
        assert_eq!((a.base64, a.ignored.len(), a.request.dimensions), (false, 0, None));
        let e =
            read(EmbedApi::Ollama, json!({"model": "m", "input": null}), "m", "up").unwrap_err();
        assert_eq!((e.param.as_deref(), e.message.as_str()), (Some("input"), "`input` is missing"));
    }
}
