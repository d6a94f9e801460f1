//! Model clients: one trait, one implementation per provider.
//!
//! A client turns a provider-neutral `ChatRequest` into the provider's request
//! body, sends it (with the retry policy), and reads the reply back into a
//! `ChatReply`. The exact body sent is returned for the trace.

pub mod chat_format;
pub mod chat_template;
pub mod engine_settings;
pub mod http;
#[cfg(feature = "local")]
pub mod local;
pub mod ollama;
pub mod openai;
pub mod py_json;
pub mod sampling;

use crate::experiment::config::{ModelSpec, Provider};
use crate::record::Tokens;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    /// The role's name in chat APIs.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// A tool call as the model made it. `arguments` is the raw JSON text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For role Tool: the id of the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For role Tool: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Message {
    pub fn system(text: impl Into<String>) -> Message {
        Message { role: Role::System, content: text.into(), tool_calls: vec![], tool_call_id: None, name: None }
    }
    pub fn user(text: impl Into<String>) -> Message {
        Message { role: Role::User, content: text.into(), tool_calls: vec![], tool_call_id: None, name: None }
    }
    pub fn assistant(text: impl Into<String>, tool_calls: Vec<ToolCall>) -> Message {
        Message { role: Role::Assistant, content: text.into(), tool_calls, tool_call_id: None, name: None }
    }
    pub fn tool(call: &ToolCall, result: impl Into<String>) -> Message {
        Message { role: Role::Tool, content: result.into(), tool_calls: vec![], tool_call_id: Some(call.id.clone()), name: Some(call.name.clone()) }
    }
}

/// A tool offered to the model, with a JSON Schema for its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// A tool as chat APIs and chat templates write it: `{"type": "function",
/// "function": {"name", "description", "parameters"}}`, keys in that order.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FunctionTool<'t> {
    r#type: &'static str,
    function: &'t ToolSpec,
}

impl ToolSpec {
    pub fn as_function(&self) -> FunctionTool<'_> {
        FunctionTool { r#type: "function", function: self }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: u32,
    pub temperature: f64,
    pub top_p: f64,
    pub seed: u64,
    /// Per-request timeout (the smaller of the model's and the time left).
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    /// Tool calls present in the reply that could not be read (kept raw).
    pub unparsed_tool_calls: Vec<String>,
    pub finish_reason: Option<String>,
    pub usage: Tokens,
    /// OpenAI's system_fingerprint, when given.
    pub fingerprint: Option<String>,
}

impl ChatReply {
    /// Add this reply's `system_fingerprint` to `seen` (distinct, in the order first seen).
    pub fn note_fingerprint(&self, seen: &mut Vec<String>) {
        if let Some(fp) = &self.fingerprint
            && !seen.contains(fp)
        {
            seen.push(fp.clone());
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("request timed out after {0:.1} s")]
    Timeout(f64),
    #[error("HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("response body exceeds {limit} bytes (max_response_bytes)")]
    TooLarge { limit: u64 },
    /// The endpoint lists its models and `model` is not among them.
    #[error("the endpoint does not serve model `{model}`; it serves: {}", if served.is_empty() { "no model".to_string() } else { served.join(", ") })]
    UnknownModel { model: String, served: Vec<String> },
    #[error("malformed reply: {error}")]
    Malformed { error: String, body: String },
    #[error("{0}")]
    Other(String),
}

/// One logical model call, across its retries.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub operation_id: String,
    /// The exact request body as sent (no credentials).
    pub request_body: serde_json::Value,
    /// The reply body as received: JSON, or a string of the raw text.
    pub reply_body: Option<serde_json::Value>,
    pub result: Result<ChatReply, ModelError>,
    pub attempts: u32,
    /// Time in requests (working time).
    pub latency: Duration,
    /// Time sleeping for Retry-After and backoff (not working time).
    pub wait: Duration,
}

#[cfg(test)]
impl CallOutcome {
    /// A reply of `text` on the first attempt with no bodies recorded: the
    /// outcome scripted model clients give in unit tests.
    pub(crate) fn scripted(operation_id: String, text: &str, usage: Tokens) -> CallOutcome {
        CallOutcome {
            operation_id,
            request_body: serde_json::Value::Null,
            reply_body: None,
            result: Ok(ChatReply {
                text: text.into(),
                tool_calls: vec![],
                unparsed_tool_calls: vec![],
                finish_reason: Some("stop".into()),
                usage,
                fingerprint: None,
            }),
            attempts: 1,
            latency: Duration::ZERO,
            wait: Duration::ZERO,
        }
    }
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub trait ModelClient: Send + Sync {
    /// Send one logical chat call (with retries).
    fn chat<'a>(&'a self, request: &'a ChatRequest, operation_id: String) -> BoxFuture<'a, CallOutcome>;

    /// The model's identity for the manifest (digest, file hash), read at
    /// setup; an Err means the endpoint is not usable and the run must not start.
    fn identity(&self) -> BoxFuture<'_, Result<Option<String>, ModelError>>;

    /// Settings of an in-process engine that shape speed but are not part of
    /// the experiment (threads, cache slots, ...), for the manifest.
    fn engine(&self) -> Option<serde_json::Value> {
        None
    }

    /// What the server says of the model (OpenAI-compatible: its `/v1/models`
    /// entry), read by `identity`, for the manifest.
    fn served(&self) -> Option<serde_json::Value> {
        None
    }
}

pub use engine_settings::EngineSettings;

/// Build the client for a model spec; `engine` sets up an embedded model.
pub fn client_for(spec: &ModelSpec, engine: &EngineSettings) -> Result<Box<dyn ModelClient>, String> {
    match spec.provider {
        Provider::Openai => Ok(Box::new(openai::OpenAiClient::new(spec)?)),
        Provider::Ollama => Ok(Box::new(ollama::OllamaClient::new(spec)?)),
        #[cfg(feature = "local")]
        Provider::Local => Ok(Box::new(local::LocalClient::new(spec, engine)?)),
        #[cfg(not(feature = "local"))]
        Provider::Local => {
            let _ = engine;
            Err(format!("model `{}`: the local provider is not in this build (build with the `local` feature)", spec.name))
        }
    }
}
