//! Model clients: one trait, one implementation per provider.
//!
//! A client turns a provider-neutral `ChatRequest` into the provider's request
//! body, sends it (with the retry policy), and reads the reply back into a
//! `ChatReply`. The exact body sent is returned for the trace.

pub mod chat_format;
pub mod chat_template;
pub mod embed;
pub mod engine_settings;
pub mod http;
#[cfg(feature = "local")]
pub mod local;
pub mod ollama;
pub mod openai;
pub mod py_json;
pub mod sampling;

use crate::experiment::config::{ModelSpec, Provider};
pub use crate::record::TokenSource;
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
        Message {
            role: Role::System,
            content: text.into(),
            tool_calls: vec![],
            tool_call_id: None,
            name: None,
        }
    }
    pub fn user(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: text.into(),
            tool_calls: vec![],
            tool_call_id: None,
            name: None,
        }
    }
    pub fn assistant(text: impl Into<String>, tool_calls: Vec<ToolCall>) -> Message {
        Message {
            role: Role::Assistant,
            content: text.into(),
            tool_calls,
            tool_call_id: None,
            name: None,
        }
    }
    pub fn tool(call: &ToolCall, result: impl Into<String>) -> Message {
        Message {
            role: Role::Tool,
            content: result.into(),
            tool_calls: vec![],
            tool_call_id: Some(call.id.clone()),
            name: Some(call.name.clone()),
        }
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
pub(crate) struct FunctionTool<'t> {
    r#type: &'static str,
    function: &'t ToolSpec,
}

impl ToolSpec {
    pub(crate) fn as_function(&self) -> FunctionTool<'_> {
        FunctionTool { r#type: "function", function: self }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: u32,
    pub temperature: f64,
    pub top_p: f64,
    pub seed: u64,
    /// Per-request timeout (the smaller of the model's and the time left).
    pub timeout: Duration,
    /// Generation stops before the first of these strings (not included in the reply).
    pub stop: Vec<String>,
    /// The text the assistant's turn starts with: the model continues it and
    /// the reply's text is this text followed by the generated one. Only the
    /// embedded engine takes it (`ModelClient::cannot_honour` names it for the others).
    pub prefill: Option<String>,
    /// Whether and which tool the model must call.
    pub tool_choice: ToolChoice,
    /// A reply that is a JSON object (or one of a JSON schema).
    pub response_format: Option<ResponseFormat>,
    /// How much the model is to reason before it answers, where the harness asked.
    pub reasoning: Option<Reasoning>,
}

/// A reasoning setting in one form for every API the gateway speaks:
/// Responses `reasoning.effort`, chat `reasoning_effort`, Messages `thinking`
/// and `output_config.effort`, Ollama `think`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reasoning {
    /// `minimal`, `low`, `medium`, `high`, ... as asked.
    pub effort: Option<String>,
    /// Messages `thinking.budget_tokens`.
    pub budget_tokens: Option<u64>,
    /// Thinking on or off (Messages `thinking.type`, Ollama `think` as a boolean).
    pub enabled: Option<bool>,
}

impl Reasoning {
    /// None when nothing is set.
    pub fn some(self) -> Option<Reasoning> {
        (self != Reasoning::default()).then_some(self)
    }
}

impl std::fmt::Display for Reasoning {
    /// `effort=high budget_tokens=1024 thinking=on`: the parts set, in that order.
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(e) = &self.effort {
            parts.push(format!("effort={e}"));
        }
        if let Some(b) = self.budget_tokens {
            parts.push(format!("budget_tokens={b}"));
        }
        if let Some(on) = self.enabled {
            parts.push(format!("thinking={}", if on { "on" } else { "off" }));
        }
        f.write_str(&parts.join(" "))
    }
}

/// Whether and which tool the model must call (OpenAI's `tool_choice`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides (every API's default).
    #[default]
    Auto,
    /// No tool call: the tools are not offered.
    None,
    /// Some tool call.
    Required,
    /// A call of this tool.
    Named(String),
}

impl ToolChoice {
    /// A choice only a provider that enforces it can honour (`required` or a named tool).
    pub(crate) fn constrains(&self) -> bool {
        matches!(self, ToolChoice::Required | ToolChoice::Named(_))
    }

    /// OpenAI's form.
    pub fn openai(&self) -> serde_json::Value {
        match self {
            ToolChoice::Auto => serde_json::json!("auto"),
            ToolChoice::None => serde_json::json!("none"),
            ToolChoice::Required => serde_json::json!("required"),
            ToolChoice::Named(n) => {
                serde_json::json!({"type": "function", "function": {"name": n}})
            }
        }
    }
}

/// A reply constrained to JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    /// Any JSON object.
    JsonObject,
    /// A JSON value of this schema.
    JsonSchema { name: String, schema: serde_json::Value, strict: bool },
}

impl ResponseFormat {
    /// OpenAI chat's `response_format`.
    pub fn openai(&self) -> serde_json::Value {
        match self {
            ResponseFormat::JsonObject => serde_json::json!({"type": "json_object"}),
            ResponseFormat::JsonSchema { name, schema, strict } => {
                serde_json::json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": strict}})
            }
        }
    }

    /// Ollama's `format`: "json", or the schema.
    pub fn ollama(&self) -> serde_json::Value {
        match self {
            ResponseFormat::JsonObject => serde_json::json!("json"),
            ResponseFormat::JsonSchema { schema, .. } => schema.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    /// Tool calls present in the reply that could not be read (kept raw).
    pub unparsed_tool_calls: Vec<String>,
    pub finish_reason: Option<String>,
    pub usage: Tokens,
    /// How `usage` was counted.
    pub token_source: TokenSource,
    /// Why the provider's usage was not taken (`TokenSource::Estimated`), or
    /// what is odd about it (more output than the cap sent).
    pub usage_note: Option<String>,
    /// OpenAI's system_fingerprint, when given.
    pub fingerprint: Option<String>,
}

/// Tokens added per message for the chat template's markers, in the estimate.
const TEMPLATE_TOKENS_PER_MESSAGE: u64 = 8;

/// The bytes of what a request sends (its messages and tools) and of what a
/// reply holds: no byte-level tokenizer makes more tokens than bytes, so this
/// bounds a count the provider did not give.
pub(crate) fn estimate_tokens(request: &ChatRequest, reply: &ChatReply) -> Tokens {
    let output = (reply.text.len() as u64
        + call_bytes(&reply.tool_calls)
        + reply.unparsed_tool_calls.iter().map(|c| c.len() as u64).sum::<u64>())
    .max(1);
    Tokens { input: prompt_bound(request), output, cached: 0 }
}

fn call_bytes(calls: &[ToolCall]) -> u64 {
    calls.iter().map(|c| (c.name.len() + c.arguments.len()) as u64 + 4).sum::<u64>()
}

/// An upper bound of the input tokens of `request`: the bytes of its
/// messages and tools, and a few tokens a message for the template's markers.
pub(crate) fn prompt_bound(request: &ChatRequest) -> u64 {
    request
        .messages
        .iter()
        .map(|m| m.content.len() as u64 + call_bytes(&m.tool_calls) + TEMPLATE_TOKENS_PER_MESSAGE)
        .sum::<u64>()
        + request
            .tools
            .iter()
            .map(|t| serde_json::to_string(&t.as_function()).map(|s| s.len() as u64).unwrap_or(0))
            .sum::<u64>()
}

/// After an HTTP provider's call: a reply whose usage could not be read is
/// counted by `estimate_tokens` (never as 0), and a reported output above
/// the cap sent is noted.
pub(crate) fn settle_usage(request: &ChatRequest, outcome: &mut CallOutcome) {
    let Ok(reply) = &mut outcome.result else { return };
    if reply.token_source == TokenSource::Estimated {
        reply.usage = estimate_tokens(request, reply);
    } else if reply.usage.output > request.max_tokens as u64 {
        reply.usage_note = Some(format!(
            "the provider reported {} output tokens for a cap of {}",
            reply.usage.output, request.max_tokens
        ));
    }
}

/// A reply message's `tool_calls` in the form OpenAI's and Ollama's chat APIs share: each
/// `{"id", "function": {"name", "arguments"}}`, the arguments a JSON text (OpenAI) or a JSON
/// value (Ollama, written out as text); an id that is missing is `call_<i>`. A call without a
/// name or arguments is kept whole as text, unparsed.
pub(crate) fn read_tool_calls(message: &serde_json::Value) -> (Vec<ToolCall>, Vec<String>) {
    use serde_json::Value;
    let mut tool_calls = Vec::new();
    let mut unparsed = Vec::new();
    let Some(Value::Array(calls)) = message.get("tool_calls") else {
        return (tool_calls, unparsed);
    };
    for (i, c) in calls.iter().enumerate() {
        let name = c.pointer("/function/name").and_then(Value::as_str);
        match (name, c.pointer("/function/arguments")) {
            (Some(name), Some(args)) => tool_calls.push(ToolCall {
                id: c
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("call_{i}"), str::to_string),
                name: name.to_string(),
                arguments: match args {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                },
            }),
            _ => unparsed.push(c.to_string()),
        }
    }
    (tool_calls, unparsed)
}

/// Read a provider's token counts: `fields` are (JSON pointer, what it is)
/// for input and output. A count that is absent or not a whole
/// non-negative number leaves the reply to be estimated.
pub(crate) fn read_usage(
    body: &serde_json::Value,
    input: &str,
    output: &str,
    cached: Option<&str>,
) -> (Tokens, TokenSource, Option<String>) {
    let read = |p: &str| -> Result<u64, String> {
        match body.pointer(p) {
            None | Some(serde_json::Value::Null) => {
                Err(format!("no {} in the reply", p.trim_start_matches('/').replace('/', ".")))
            }
            Some(v) => v.as_u64().ok_or_else(|| {
                format!(
                    "{} is not a whole non-negative number: {v}",
                    p.trim_start_matches('/').replace('/', ".")
                )
            }),
        }
    };
    match (read(input), read(output)) {
        (Ok(i), Ok(o)) => {
            let c = cached
                .and_then(|p| body.pointer(p))
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
                .min(i);
            (Tokens { input: i, output: o, cached: c }, TokenSource::Reported, None)
        }
        (Err(e), _) | (_, Err(e)) => (
            Tokens::default(),
            TokenSource::Estimated,
            Some(format!("{e}: tokens estimated from bytes")),
        ),
    }
}

impl ChatReply {
    /// Add this reply's `system_fingerprint` to `seen` (distinct, in the order first seen).
    pub(crate) fn note_fingerprint(&self, seen: &mut Vec<String>) {
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
                token_source: TokenSource::Reported,
                usage_note: None,
                fingerprint: None,
            }),
            attempts: 1,
            latency: Duration::ZERO,
            wait: Duration::ZERO,
        }
    }
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a client's `identity` could not check the model's name against the
/// endpoint's list, kept for `ModelClient::unchecked` (the run warns with it).
#[derive(Debug, Default)]
pub(crate) struct Unchecked(std::sync::OnceLock<String>);

impl Unchecked {
    /// The list at `url` could not be read: an HTTP `status`, or (None) a body
    /// that is not a model list.
    pub fn record(&self, url: &str, status: Option<u16>, model: &str) {
        let why = match status {
            Some(status) => format!("{url} gave HTTP {status}"),
            None => format!("{url} gave no model list ablate can read"),
        };
        let _ = self.0.set(format!("{why}; model `{model}` is not checked"));
    }

    pub fn get(&self) -> Option<String> {
        self.0.get().cloned()
    }
}

pub trait ModelClient: Send + Sync {
    /// Send one logical chat call (with retries).
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        operation_id: String,
    ) -> BoxFuture<'a, CallOutcome>;

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

    /// Why `identity` could not check the model's name against the endpoint's
    /// list (none, or none it can read): the run warns with it through its
    /// reporters. None when the name was checked or there is no list.
    fn unchecked(&self) -> Option<String> {
        None
    }

    /// The first setting of `request` this provider cannot honour, named as
    /// the request's key (`tool_choice`, `response_format`): the call is
    /// refused rather than run another way.
    fn cannot_honour(&self, request: &ChatRequest) -> Option<&'static str> {
        let _ = request;
        None
    }

    /// The part of `reasoning` this provider's request carries to the model
    /// (None: none of it; the delivery record then says it did not reach the
    /// model). The default: a provider with no reasoning setting.
    fn delivers_reasoning(&self, reasoning: &Reasoning) -> Option<Reasoning> {
        let _ = reasoning;
        None
    }

    /// An embeddings call, where the provider serves embeddings; None: it
    /// serves none (the gateway answers 501).
    fn embed<'a>(
        &'a self,
        request: &'a embed::EmbedRequest,
        operation_id: &'a str,
    ) -> Option<BoxFuture<'a, embed::EmbedOutcome>> {
        let _ = (request, operation_id);
        None
    }
}

pub use engine_settings::EngineSettings;

/// Why a model's client could not be made: the model, named once, and the reason.
#[derive(Debug, thiserror::Error)]
#[error("model `{model}`: {reason}")]
pub struct SetupError {
    pub model: String,
    #[source]
    pub reason: SetupReason,
}

#[derive(Debug, thiserror::Error)]
pub enum SetupReason {
    #[error("environment variable {0} (api_key_env) is not set")]
    KeyUnset(String),
    #[error("the local provider is not in this build (build with the `local` feature)")]
    NotBuilt,
    #[error("the local provider needs the GGUF file's path")]
    NoPath,
    #[error("GGUF file `{}` not found", .0.display())]
    NotFound(std::path::PathBuf),
    #[error("context_tokens {0} is too small")]
    ContextTooSmall(u32),
    #[error("cannot start the llama.cpp worker: {0}")]
    Worker(#[source] std::io::Error),
    #[error("cannot read `{}`: {source}", path.display())]
    Read { path: std::path::PathBuf, source: std::io::Error },
    /// What the engine said while loading the model (llama.cpp, the chat template).
    #[error(transparent)]
    Load(#[from] EngineLoadError),
    #[error("the llama.cpp worker stopped while loading")]
    WorkerStopped,
}

/// Why the embedded engine cannot load its model (said by its worker thread while loading).
#[derive(Debug, thiserror::Error)]
pub enum EngineLoadError {
    #[error("cannot initialize llama.cpp: {0}")]
    Backend(String),
    #[error("cannot load GGUF `{}`: {reason}", path.display())]
    Gguf { path: std::path::PathBuf, reason: String },
    #[error("--local-template `{}`: cannot read it: {source}", file.display())]
    TemplateFile { file: std::path::PathBuf, source: std::io::Error },
    #[error(
        "the chat template of `{}` is not UTF-8 ({reason}); give one with --local-template",
        path.display()
    )]
    TemplateNotUtf8 { path: std::path::PathBuf, reason: String },
    #[error("`{}` carries no chat template ({reason}); give one with --local-template", path.display())]
    NoTemplate { path: std::path::PathBuf, reason: String },
    /// The template (`from`: the file or the model it came from) does not parse.
    #[error("{from}: {source}")]
    Template { from: String, source: chat_template::TemplateError },
    #[error("{from}: cannot render a system and a user message: {source}")]
    TemplateRender { from: String, source: chat_template::TemplateError },
    #[error("cannot create a llama.cpp context of {slots} x {per_slot} tokens: {reason}")]
    Context { slots: usize, per_slot: u32, reason: String },
}

impl SetupError {
    pub fn new(model: &str, reason: SetupReason) -> SetupError {
        SetupError { model: model.to_string(), reason }
    }
}

/// Build the client for a model spec; `engine` sets up an embedded model.
pub fn client_for(
    spec: &ModelSpec,
    engine: &EngineSettings,
) -> Result<Box<dyn ModelClient>, SetupError> {
    match spec.provider {
        Provider::Openai => Ok(Box::new(openai::OpenAiClient::new(spec)?)),
        Provider::Ollama => Ok(Box::new(ollama::OllamaClient::new(spec)?)),
        #[cfg(feature = "local")]
        Provider::Local => Ok(Box::new(local::LocalClient::new(spec, engine)?)),
        #[cfg(not(feature = "local"))]
        Provider::Local => {
            let _ = engine;
            Err(SetupError::new(&spec.name, SetupReason::NotBuilt))
        }
    }
}

#[cfg(test)]
mod unchecked_tests {
    use super::Unchecked;

    #[test]
    fn the_first_reason_is_kept_and_names_the_url_and_the_model() {
        let u = Unchecked::default();
        assert_eq!(u.get(), None);
        u.record("http://h/v1/models", Some(404), "m");
        u.record("http://h/v1/models", None, "m");
        assert_eq!(
            u.get().as_deref(),
            Some("http://h/v1/models gave HTTP 404; model `m` is not checked")
        );
        let u = Unchecked::default();
        u.record("http://h/api/tags", None, "q");
        assert_eq!(
            u.get().as_deref(),
            Some("http://h/api/tags gave no model list ablate can read; model `q` is not checked")
        );
    }
}

#[cfg(test)]
mod setup_tests {
    use super::*;

    /// The models of a config with these `[[models]]` tables.
    fn models(tables: &str) -> Vec<ModelSpec> {
        let root = crate::repo_root().join("tests/fixtures/suites/tiny");
        let text = format!(
            "[experiment]\nname = \"s\"\nsuite = \"{}\"\ntrials = 1\nseed = 1\n\n[budget]\nmax_steps = 2\nmax_output_tokens_per_step = 10\nmax_total_tokens = 100\nmax_working_seconds = 10\n\n{tables}\n[arms.b]\n",
            root.display()
        );
        crate::experiment::config::load_str(&root.join("exp.toml"), &text).unwrap().models
    }

    #[test]
    fn a_client_that_cannot_be_made_says_why_naming_the_model_once() {
        let specs = models(
            "[[models]]\nname = \"k\"\nprovider = \"openai\"\nmodel = \"m\"\nendpoint = \"http://127.0.0.1:1\"\ntemperature = 0.0\napi_key_env = \"ABLATE_TEST_KEY_NEVER_SET_7F3A\"\n\n[[models]]\nname = \"g\"\nprovider = \"local\"\nmodel = \"g\"\npath = \"no-such-model.gguf\"\ntemperature = 0.0\n",
        );
        let err = |spec: &ModelSpec| client_for(spec, &EngineSettings::default()).err().unwrap();
        let e = err(&specs[0]);
        assert!(
            matches!(&e.reason, SetupReason::KeyUnset(v) if v == "ABLATE_TEST_KEY_NEVER_SET_7F3A")
        );
        assert_eq!(
            e.to_string(),
            "model `k`: environment variable ABLATE_TEST_KEY_NEVER_SET_7F3A (api_key_env) is not set"
        );
        let e = err(&specs[1]);
        let path = crate::repo_root().join("tests/fixtures/suites/tiny/no-such-model.gguf");
        if cfg!(feature = "local") {
            assert!(matches!(&e.reason, SetupReason::NotFound(p) if *p == path), "{e}");
            assert_eq!(
                e.to_string(),
                format!("model `g`: GGUF file `{}` not found", path.display())
            );
        } else {
            assert!(matches!(e.reason, SetupReason::NotBuilt), "{e}");
        }
    }
}

#[cfg(test)]
mod tool_call_tests {
    use super::{ToolCall, read_tool_calls};
    use serde_json::json;

    #[test]
    fn tool_calls_read_in_both_forms_and_a_call_without_a_name_is_kept_unparsed() {
        let call = |id: &str, name: &str, arguments: &str| ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        };
        // OpenAI: the arguments are JSON text; Ollama: a JSON value, written out; no id: call_<i>.
        let message = json!({"tool_calls": [
            {"id": "c7", "type": "function", "function": {"name": "run", "arguments": "{\"a\":1}"}},
            {"function": {"name": "edit", "arguments": {"path": "x"}}},
            {"function": {"arguments": "{}"}},
        ]});
        assert_eq!(
            read_tool_calls(&message),
            (
                vec![call("c7", "run", "{\"a\":1}"), call("call_1", "edit", "{\"path\":\"x\"}")],
                vec![r#"{"function":{"arguments":"{}"}}"#.to_string()]
            )
        );
        assert_eq!(read_tool_calls(&json!({"content": "hi"})), (vec![], vec![]));
    }
}
