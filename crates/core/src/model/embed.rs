//! Embeddings, provider-neutral: what a harness asks of the gateway's
//! `/v1/embeddings` or `/api/embed`, forwarded to an upstream that serves
//! them (OpenAI-compatible servers, Ollama). The embedded model serves none.

use super::{ModelError, TokenSource, http};
use serde_json::{Value, json};
use std::time::Duration;

/// An embeddings call: the embedding model the harness named and its texts.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedRequest {
    pub model: String,
    pub input: Vec<String>,
    /// Output dimensions, where the model can shorten its vectors.
    pub dimensions: Option<u64>,
    pub timeout: Duration,
}

impl EmbedRequest {
    /// An upper bound of its input tokens: the bytes of its texts (no
    /// byte-level tokenizer makes more tokens than bytes).
    pub fn bound(&self) -> u64 {
        self.input.iter().map(|s| s.len() as u64).sum::<u64>().max(1)
    }
}

/// One vector per input, in the inputs' order, and the input tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedReply {
    pub vectors: Vec<Vec<f64>>,
    pub input_tokens: u64,
    pub token_source: TokenSource,
}

/// One embeddings call across its retries.
#[derive(Debug, Clone)]
pub struct EmbedOutcome {
    pub result: Result<EmbedReply, ModelError>,
    pub attempts: u32,
    pub latency: Duration,
    pub wait: Duration,
}

/// OpenAI's `POST /v1/embeddings` body (floats asked, whatever the harness's encoding).
pub(crate) fn openai_body(req: &EmbedRequest) -> Value {
    let mut body = json!({"model": req.model, "input": req.input, "encoding_format": "float"});
    if let Some(d) = req.dimensions {
        body["dimensions"] = json!(d);
    }
    body
}

/// Ollama's `POST /api/embed` body.
pub(crate) fn ollama_body(req: &EmbedRequest) -> Value {
    let mut body = json!({"model": req.model, "input": req.input});
    if let Some(d) = req.dimensions {
        body["dimensions"] = json!(d);
    }
    body
}

fn malformed(error: impl Into<String>, v: &Value) -> ModelError {
    ModelError::Malformed { error: error.into(), body: http::truncate(&v.to_string(), 2000) }
}

fn vector(v: &Value, what: &str, whole: &Value) -> Result<Vec<f64>, ModelError> {
    let items = v
        .as_array()
        .ok_or_else(|| malformed(format!("{what} is not an array of numbers"), whole))?;
    items
        .iter()
        .map(|x| {
            x.as_f64().ok_or_else(|| {
                malformed(format!("{what} holds a value that is not a number: {x}"), whole)
            })
        })
        .collect()
}

/// The input tokens the reply reports at `pointer`, else the request's bound (noted as estimated).
fn tokens(v: &Value, pointer: &str, req: &EmbedRequest) -> (u64, TokenSource) {
    match v.pointer(pointer).and_then(Value::as_u64) {
        Some(n) => (n, TokenSource::Reported),
        None => (req.bound(), TokenSource::Estimated),
    }
}

fn checked(
    vectors: Vec<Vec<f64>>,
    req: &EmbedRequest,
    v: &Value,
    (input_tokens, token_source): (u64, TokenSource),
) -> Result<EmbedReply, ModelError> {
    if vectors.len() != req.input.len() {
        return Err(malformed(
            format!("{} vectors for {} inputs", vectors.len(), req.input.len()),
            v,
        ));
    }
    Ok(EmbedReply { vectors, input_tokens, token_source })
}

/// OpenAI's reply: `data[].embedding` (placed by `index`), `usage.prompt_tokens`.
pub(crate) fn parse_openai(v: &Value, req: &EmbedRequest) -> Result<EmbedReply, ModelError> {
    let data =
        v.get("data").and_then(Value::as_array).ok_or_else(|| malformed("no `data` array", v))?;
    let mut vectors: Vec<Option<Vec<f64>>> = vec![None; data.len()];
    for (i, item) in data.iter().enumerate() {
        let at = item.get("index").and_then(Value::as_u64).map_or(i, |n| n as usize);
        let slot =
            vectors.get_mut(at).ok_or_else(|| malformed(format!("index {at} out of range"), v))?;
        *slot = Some(vector(item.get("embedding").unwrap_or(&Value::Null), "data[].embedding", v)?);
    }
    let vectors = vectors
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| malformed("an index given twice", v))?;
    checked(vectors, req, v, tokens(v, "/usage/prompt_tokens", req))
}

/// Ollama's `/api/embed` reply: `embeddings`, `prompt_eval_count`.
pub(crate) fn parse_ollama(v: &Value, req: &EmbedRequest) -> Result<EmbedReply, ModelError> {
    let rows = v
        .get("embeddings")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("no `embeddings` array", v))?;
    let vectors =
        rows.iter().map(|r| vector(r, "embeddings[]", v)).collect::<Result<Vec<_>, _>>()?;
    checked(vectors, req, v, tokens(v, "/prompt_eval_count", req))
}

/// POST `body` to the endpoint's `path` with its retry policy and read the reply with `parse`.
pub async fn call(
    endpoint: &http::Endpoint,
    path: &str,
    body: Value,
    req: &EmbedRequest,
    operation_id: &str,
    parse: fn(&Value, &EmbedRequest) -> Result<EmbedReply, ModelError>,
) -> EmbedOutcome {
    let out =
        endpoint.request(path, Some(&body), Some(operation_id), req.timeout, &endpoint.retry).await;
    let result =
        out.result.and_then(|(_, text)| http::parse_body(&text).1).and_then(|v| parse(&v, req));
    EmbedOutcome { result, attempts: out.attempts, latency: out.latency, wait: out.wait }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(n: usize) -> EmbedRequest {
        EmbedRequest {
            model: "e".into(),
            input: (0..n).map(|i| "ab".repeat(i + 1)).collect(),
            dimensions: None,
            timeout: Duration::ZERO,
        }
    }

    #[test]
    fn openai_vectors_are_placed_by_index_and_counted() {
        let v = json!({"data": [{"index": 1, "embedding": [0.5, 1]}, {"index": 0, "embedding": [-2.0, 0.25]}], "usage": {"prompt_tokens": 7}});
        let r = parse_openai(&v, &req(2)).unwrap();
        assert_eq!(r.vectors, vec![vec![-2.0, 0.25], vec![0.5, 1.0]]);
        assert_eq!((r.input_tokens, r.token_source), (7, TokenSource::Reported));
    }

    #[test]
    fn a_reply_without_usage_is_counted_by_bytes_and_a_short_one_refused() {
        // Inputs "ab" and "abab": 6 bytes.
        let r = parse_ollama(&json!({"embeddings": [[1.0], [2.0]]}), &req(2)).unwrap();
        assert_eq!((r.input_tokens, r.token_source), (6, TokenSource::Estimated));
        assert!(matches!(
            parse_ollama(&json!({"embeddings": [[1.0]]}), &req(2)),
            Err(ModelError::Malformed { .. })
        ));
        assert!(matches!(
            parse_openai(&json!({"data": [{"index": 0, "embedding": ["x"]}]}), &req(1)),
            Err(ModelError::Malformed { .. })
        ));
    }
}
