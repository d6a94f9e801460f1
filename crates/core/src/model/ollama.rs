//! Ollama's `/api/chat`; the model digest (from `/api/show`, else `/api/tags`)
//! is the model's identity.

use super::{BoxFuture, CallOutcome, ChatReply, ChatRequest, Message, ModelClient, ModelError};
use super::{embed, http};
use crate::experiment::config::{ModelSpec, RetryPolicy};
use serde_json::{Value, json};
use std::time::Duration;

pub(crate) struct OllamaClient {
    endpoint: http::Endpoint,
    model: String,
    num_ctx: Option<u32>,
    /// Why `identity` could not check the model's name (`ModelClient::unchecked`).
    unchecked: super::Unchecked,
    /// The endpoint takes `think` (`[models] reasoning`).
    reasoning: bool,
}

impl OllamaClient {
    pub fn new(spec: &ModelSpec) -> Result<Self, super::SetupError> {
        Ok(OllamaClient {
            endpoint: http::Endpoint {
                client: reqwest::Client::new(),
                base: spec.endpoint.clone().unwrap_or_default(),
                bearer: None,
                retry: spec.retry.clone(),
                max_bytes: spec.max_response_bytes,
            },
            model: spec.model.clone(),
            num_ctx: spec.context_tokens,
            unchecked: super::Unchecked::default(),
            reasoning: spec.reasoning,
        })
    }

    pub fn body(&self, req: &ChatRequest) -> Value {
        let messages: Vec<Value> = req.messages.iter().map(message_json).collect();
        let mut options = json!({
            "num_predict": req.max_tokens,
            "temperature": req.temperature,
            "top_p": req.top_p,
            "seed": req.seed,
        });
        if let Some(n) = self.num_ctx {
            options["num_ctx"] = json!(n);
        }
        if !req.stop.is_empty() {
            options["stop"] = json!(req.stop);
        }
        let mut body =
            json!({"model": self.model, "messages": messages, "stream": false, "options": options});
        // Ollama has no tool_choice: `none` is honoured by offering no tool.
        if !req.tools.is_empty() && req.tool_choice != super::ToolChoice::None {
            body["tools"] = http::tools_json(&req.tools);
        }
        if let Some(f) = &req.response_format {
            body["format"] = f.ollama();
        }
        if let Some(r) = req.reasoning.as_ref().and_then(|r| self.delivers_reasoning(r)) {
            body["think"] = match (r.effort, r.enabled) {
                (Some(effort), _) => json!(effort),
                (None, on) => json!(on.unwrap_or(true)),
            };
        }
        body
    }
}

/// Ollama's `think` is an effort (`low`, `medium`, `high`) or on/off; a
/// token budget has no place in it.
fn delivered_reasoning(r: &super::Reasoning) -> Option<super::Reasoning> {
    let enabled = if r.effort.is_some() { None } else { r.enabled };
    super::Reasoning { effort: r.effort.clone(), enabled, budget_tokens: None }.some()
}

fn message_json(m: &Message) -> Value {
    let mut v = json!({"role": m.role.as_str(), "content": m.content});
    if !m.tool_calls.is_empty() {
        v["tool_calls"] = m
            .tool_calls
            .iter()
            .map(|c| {
                let args: Value =
                    serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!(c.arguments));
                json!({"function": {"name": c.name, "arguments": args}})
            })
            .collect();
    }
    if let Some(name) = &m.name {
        v["tool_name"] = json!(name);
    }
    v
}

/// Read an `/api/chat` body. Ollama gives calls no ids; they get `call_<i>`.
pub(crate) fn parse_reply(v: &Value) -> Result<ChatReply, ModelError> {
    let malformed = |what: &str| ModelError::Malformed {
        error: what.to_string(),
        body: http::truncate(&v.to_string(), 2000),
    };
    if let Some(err) = v.get("error").and_then(Value::as_str) {
        return Err(ModelError::Other(format!("ollama: {err}")));
    }
    let message = v.get("message").ok_or_else(|| malformed("no message in the reply"))?;
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(_) => return Err(malformed("message.content is not a string")),
    };
    let (tool_calls, unparsed) = super::read_tool_calls(message);
    let (usage, token_source, usage_note) =
        super::read_usage(v, "/prompt_eval_count", "/eval_count", None);
    Ok(ChatReply {
        text,
        tool_calls,
        unparsed_tool_calls: unparsed,
        finish_reason: v.get("done_reason").and_then(Value::as_str).map(str::to_string),
        usage,
        token_source,
        usage_note,
        fingerprint: None,
    })
}

impl ModelClient for OllamaClient {
    fn cannot_honour(&self, req: &ChatRequest) -> Option<&'static str> {
        if req.prefill.is_some() {
            return Some("prefill");
        }
        req.tool_choice.constrains().then_some("tool_choice")
    }

    fn delivers_reasoning(&self, r: &super::Reasoning) -> Option<super::Reasoning> {
        if self.reasoning { delivered_reasoning(r) } else { None }
    }

    fn chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        operation_id: String,
    ) -> BoxFuture<'a, CallOutcome> {
        Box::pin(self.endpoint.chat("/api/chat", req, self.body(req), operation_id, parse_reply))
    }

    fn embed<'a>(
        &'a self,
        req: &'a embed::EmbedRequest,
        operation_id: &'a str,
    ) -> Option<BoxFuture<'a, embed::EmbedOutcome>> {
        let (body, parse) = (embed::ollama_body(req), embed::parse_ollama);
        Some(Box::pin(embed::call(&self.endpoint, "/api/embed", body, req, operation_id, parse)))
    }

    fn unchecked(&self) -> Option<String> {
        self.unchecked.get()
    }

    fn identity(&self) -> BoxFuture<'_, Result<Option<String>, ModelError>> {
        Box::pin(async move {
            let t = Duration::from_secs(30);
            // The local models first: an unknown name is refused with the list
            // (a server without /api/tags is only warned about).
            let tags_url = self.endpoint.url("/api/tags");
            let tags = self.endpoint.get("/api/tags", t).await;
            let mut listed_digest = None;
            match tags.result {
                Ok((_, text)) => match serde_json::from_str::<Value>(&text)
                    .ok()
                    .as_ref()
                    .and_then(|v| v.get("models"))
                    .and_then(Value::as_array)
                {
                    Some(models) => {
                        let name_of = |m: &Value| {
                            m.get("name")
                                .or_else(|| m.get("model"))
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string()
                        };
                        let found = models.iter().find(|m| {
                            let name = name_of(m);
                            name == self.model || name == format!("{}:latest", self.model)
                        });
                        match found {
                            Some(m) => {
                                listed_digest =
                                    m.get("digest").and_then(Value::as_str).map(str::to_string)
                            }
                            None => {
                                return Err(ModelError::UnknownModel {
                                    model: self.model.clone(),
                                    served: models.iter().map(name_of).collect(),
                                });
                            }
                        }
                    }
                    None => {
                        self.unchecked.record(&tags_url, None, &self.model);
                    }
                },
                Err(ModelError::Status { status, .. }) => {
                    self.unchecked.record(&tags_url, Some(status), &self.model);
                }
                Err(e) => return Err(e),
            }
            let body = json!({"model": self.model});
            let show =
                self.endpoint.request("/api/show", Some(&body), None, t, &RetryPolicy::None).await;
            match show.result {
                Ok((_, text)) => {
                    if let Some(d) = serde_json::from_str::<Value>(&text)
                        .ok()
                        .as_ref()
                        .and_then(|v| v.get("digest"))
                        .and_then(Value::as_str)
                    {
                        return Ok(Some(format!("ollama-digest:{d}")));
                    }
                }
                // The list showed the model: its digest there will do.
                Err(_) if listed_digest.is_some() => {}
                Err(e) => return Err(e),
            }
            Ok(listed_digest.map(|d| format!("ollama-digest:{d}")))
        })
    }
}
