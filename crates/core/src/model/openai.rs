//! OpenAI-compatible `/v1/chat/completions` (vLLM, llama.cpp server, LM Studio,
//! OpenAI and others).

use super::{BoxFuture, CallOutcome, ChatReply, ChatRequest, Message, ModelClient, ModelError};
use super::{embed, http};
use crate::experiment::config::ModelSpec;
use serde_json::{Value, json};
use std::time::Duration;

pub(crate) struct OpenAiClient {
    endpoint: http::Endpoint,
    model: String,
    /// What `/v1/models` said of the model at setup (its entry, volatile fields removed).
    served: std::sync::OnceLock<Value>,
    /// Why `identity` could not check the model's name (`ModelClient::unchecked`).
    unchecked: super::Unchecked,
    /// The endpoint takes `reasoning_effort` (`[models] reasoning`).
    reasoning: bool,
}

impl OpenAiClient {
    pub fn new(spec: &ModelSpec) -> Result<Self, super::SetupError> {
        let api_key = match &spec.api_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                super::SetupError::new(&spec.name, super::SetupReason::KeyUnset(var.clone()))
            })?),
            None => None,
        };
        let base = spec.endpoint.clone().unwrap_or_default();
        // Accept both `http://host:port` and `http://host:port/v1`.
        let base = base.strip_suffix("/v1").unwrap_or(&base).to_string();
        Ok(OpenAiClient {
            endpoint: http::Endpoint {
                client: reqwest::Client::new(),
                base,
                bearer: api_key,
                retry: spec.retry.clone(),
                max_bytes: spec.max_response_bytes,
            },
            model: spec.model.clone(),
            served: std::sync::OnceLock::new(),
            unchecked: super::Unchecked::default(),
            reasoning: spec.reasoning,
        })
    }

    pub fn body(&self, req: &ChatRequest) -> Value {
        let messages: Vec<Value> = req.messages.iter().map(message_json).collect();
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "temperature": req.temperature,
            "top_p": req.top_p,
            "seed": req.seed,
            "max_tokens": req.max_tokens,
            "stream": false,
        });
        if !req.tools.is_empty() {
            body["tools"] = http::tools_json(&req.tools);
            if req.tool_choice != super::ToolChoice::Auto {
                body["tool_choice"] = req.tool_choice.openai();
            }
        }
        if !req.stop.is_empty() {
            body["stop"] = json!(req.stop);
        }
        if let Some(f) = &req.response_format {
            body["response_format"] = f.openai();
        }
        if let Some(effort) =
            req.reasoning.as_ref().and_then(|r| self.delivers_reasoning(r)).and_then(|r| r.effort)
        {
            body["reasoning_effort"] = json!(effort);
        }
        body
    }
}

/// The chat API's `reasoning_effort` carries an effort; a token budget or an
/// on/off switch has no place in it.
fn delivered_reasoning(r: &super::Reasoning) -> Option<super::Reasoning> {
    super::Reasoning { effort: r.effort.clone(), ..Default::default() }.some()
}

fn message_json(m: &Message) -> Value {
    let mut v = json!({"role": m.role.as_str(), "content": m.content});
    if !m.tool_calls.is_empty() {
        v["tool_calls"] =
            m.tool_calls.iter().map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}})).collect();
    }
    if let Some(id) = &m.tool_call_id {
        v["tool_call_id"] = json!(id);
    }
    v
}

/// Read a chat completion body.
pub(crate) fn parse_reply(v: &Value) -> Result<ChatReply, ModelError> {
    let malformed = |what: &str| ModelError::Malformed {
        error: what.to_string(),
        body: http::truncate(&v.to_string(), 2000),
    };
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| malformed("no choices[0] in the reply"))?;
    let message =
        choice.get("message").ok_or_else(|| malformed("no choices[0].message in the reply"))?;
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(_) => return Err(malformed("choices[0].message.content is not a string")),
    };
    let (tool_calls, unparsed) = super::read_tool_calls(message);
    let (usage, token_source, usage_note) = super::read_usage(
        v,
        "/usage/prompt_tokens",
        "/usage/completion_tokens",
        Some("/usage/prompt_tokens_details/cached_tokens"),
    );
    Ok(ChatReply {
        text,
        tool_calls,
        unparsed_tool_calls: unparsed,
        finish_reason: choice.get("finish_reason").and_then(Value::as_str).map(str::to_string),
        usage,
        token_source,
        usage_note,
        fingerprint: v.get("system_fingerprint").and_then(Value::as_str).map(str::to_string),
    })
}

/// Model ids of a `/v1/models` body (`{"data": [{"id": ...}]}`), None when
/// the body is not such a list.
/// The entries of a `/v1/models` body, or None when it holds no list.
fn served_list(body: &str) -> Option<Vec<Value>> {
    let v: Value = serde_json::from_str(body).ok()?;
    match v {
        Value::Object(mut o) => match o.remove("data")? {
            Value::Array(entries) => Some(entries),
            _ => None,
        },
        _ => None,
    }
}

/// What the server says `model` is: its entry without the fields that change
/// from one request to the next (`created`, which llama.cpp's server sets to
/// the time of the request, and vLLM's `permission` records with their own
/// ids and times).
fn served_entry(mut entry: Value) -> Value {
    if let Some(obj) = entry.as_object_mut() {
        obj.remove("created");
        obj.remove("permission");
    }
    entry
}

/// The identity of an OpenAI-compatible model: `openai-models:sha256:<16 hex>`
/// over its `/v1/models` entry (`served_entry`, keys sorted).
pub(crate) fn served_identity(entry: &Value) -> String {
    let canonical = serde_json::to_string(entry).unwrap_or_default();
    format!("openai-models:sha256:{}", &crate::digest::sha256_hex(canonical.as_bytes())[..16])
}

impl ModelClient for OpenAiClient {
    /// The chat completions API has no way to start the assistant's turn with a text.
    fn cannot_honour(&self, req: &ChatRequest) -> Option<&'static str> {
        req.prefill.is_some().then_some("prefill")
    }

    fn delivers_reasoning(&self, r: &super::Reasoning) -> Option<super::Reasoning> {
        if self.reasoning { delivered_reasoning(r) } else { None }
    }

    fn chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        operation_id: String,
    ) -> BoxFuture<'a, CallOutcome> {
        let body = self.body(req);
        Box::pin(self.endpoint.chat("/v1/chat/completions", req, body, operation_id, parse_reply))
    }

    fn embed<'a>(
        &'a self,
        req: &'a embed::EmbedRequest,
        operation_id: &'a str,
    ) -> Option<BoxFuture<'a, embed::EmbedOutcome>> {
        let (body, parse) = (embed::openai_body(req), embed::parse_openai);
        Some(Box::pin(embed::call(
            &self.endpoint,
            "/v1/embeddings",
            body,
            req,
            operation_id,
            parse,
        )))
    }

    fn unchecked(&self) -> Option<String> {
        self.unchecked.get()
    }

    fn served(&self) -> Option<Value> {
        self.served.get().cloned()
    }

    fn identity(&self) -> BoxFuture<'_, Result<Option<String>, ModelError>> {
        Box::pin(async move {
            // Reachability, and the model name against the endpoint's list;
            // a server without /v1/models (or an unreadable list) is only warned about.
            let url = self.endpoint.url("/v1/models");
            let out = self.endpoint.get("/v1/models", Duration::from_secs(10)).await;
            match out.result {
                Ok((_, text)) => match served_list(&text) {
                    Some(entries) => {
                        let id =
                            |m: &Value| m.get("id").and_then(Value::as_str).map(str::to_string);
                        match entries
                            .iter()
                            .position(|m| id(m).as_deref() == Some(self.model.as_str()))
                        {
                            None => Err(ModelError::UnknownModel {
                                model: self.model.clone(),
                                served: entries.iter().filter_map(id).collect(),
                            }),
                            Some(i) => {
                                let entry = served_entry(entries[i].clone());
                                let identity = served_identity(&entry);
                                let _ = self.served.set(entry);
                                Ok(Some(identity))
                            }
                        }
                    }
                    None => {
                        self.unchecked.record(&url, None, &self.model);
                        Ok(None)
                    }
                },
                Err(ModelError::Status { status, .. }) => {
                    self.unchecked.record(&url, Some(status), &self.model);
                    Ok(None)
                }
                Err(e) => Err(e),
            }
        })
    }
}
