//! The two APIs the gateway speaks, read into one provider-neutral call and
//! written back from one `ChatReply`: OpenAI's `/v1/chat/completions` and
//! Ollama's `/api/chat`. Streams are emulated from the one complete reply.

use crate::model::{
    ChatReply, Message, Reasoning, ResponseFormat, Role, ToolCall, ToolChoice, ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI's `/v1/chat/completions`.
    OpenAi,
    /// Ollama's `/api/chat`.
    Ollama,
    /// OpenAI's Responses API, `/v1/responses` (`responses.rs`).
    Responses,
    /// Anthropic's Messages API, `/v1/messages` (`anthropic.rs`).
    Anthropic,
    /// OpenAI's legacy `/v1/completions` (`legacy.rs`).
    Completions,
    /// Ollama's `/api/generate` (`legacy.rs`).
    Generate,
    /// Google's Gemini API, `:generateContent` (`gemini.rs`).
    Gemini,
    /// Gemini's `:streamGenerateContent?alt=sse`.
    GeminiStream,
}

impl Api {
    /// Whether its errors take OpenAI's form `{"error": {"type", "message"}}`.
    fn openai_errors(self) -> bool {
        matches!(self, Api::OpenAi | Api::Responses | Api::Completions)
    }
}

/// A chat call as the harness asked it.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub stream: bool,
    /// OpenAI `stream_options.include_usage`.
    pub include_usage: bool,
    /// Settings the experiment fixes, as the harness asked them: (key as
    /// named in the request, value).
    pub model: Option<Value>,
    pub temperature: Option<Value>,
    pub top_p: Option<Value>,
    pub max_tokens: Option<(&'static str, Value)>,
    pub seed: Option<Value>,
    /// Stop strings, forwarded.
    pub stop: Vec<String>,
    pub tool_choice: ToolChoice,
    pub response_format: Option<ResponseFormat>,
    /// Responses API: the stored response this one continues, and whether to store it.
    pub previous_response_id: Option<String>,
    pub store: bool,
    /// Settings of the request to echo back in the reply (Responses API).
    pub echo: Value,
    /// Keys of the request the gateway does not forward.
    pub ignored: Vec<String>,
    /// The reasoning setting asked, in the common form (forwarded where the provider takes it).
    pub reasoning: Option<Reasoning>,
    /// Functions of namespace tools offered flat: (flat name, namespace, name).
    pub namespaced: Vec<(String, String, String)>,
    /// Hosted tools (run by a provider's own servers) left out, by type.
    pub omitted_tools: Vec<String>,
}

impl Asked {
    /// An upper bound of its prompt's tokens (its bytes, as `model::prompt_bound` counts them):
    /// what the token-count endpoints answer, the gateway not tokenizing for the upstream.
    pub(crate) fn prompt_bound(self) -> u64 {
        let (messages, tools) = (self.messages, self.tools);
        crate::model::prompt_bound(&crate::model::ChatRequest {
            messages,
            tools,
            ..Default::default()
        })
    }

    /// A request of `messages` and `tools`, nothing else asked.
    pub fn new(messages: Vec<Message>, tools: Vec<ToolSpec>, model: Option<Value>) -> Asked {
        Asked {
            messages,
            tools,
            stream: false,
            include_usage: false,
            model,
            temperature: None,
            top_p: None,
            max_tokens: None,
            seed: None,
            stop: Vec::new(),
            tool_choice: ToolChoice::Auto,
            response_format: None,
            previous_response_id: None,
            store: false,
            echo: Value::Null,
            ignored: Vec::new(),
            reasoning: None,
            namespaced: Vec::new(),
            omitted_tools: Vec::new(),
        }
    }
}

/// An effort (chat `reasoning_effort`, Responses `reasoning.effort`, Messages
/// `output_config.effort`): a string at `at`; null or absent, none.
pub(crate) fn read_effort(v: Option<&Value>, at: &str) -> Result<Option<Reasoning>, BadRequest> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(e)) => {
            Ok(Reasoning { effort: Some(e.clone()), ..Default::default() }.some())
        }
        Some(_) => Err(BadRequest::at(at, "not a string")),
    }
}

/// Ollama's `think`: on/off, or an effort.
fn read_think(v: Option<&Value>) -> Result<Option<Reasoning>, BadRequest> {
    match v {
        Some(Value::Bool(on)) => Ok(Some(Reasoning { enabled: Some(*on), ..Default::default() })),
        v => read_effort(v, "think")
            .map_err(|_| BadRequest::at("think", "not a boolean or a string")),
    }
}

/// `tools`: a list, each read by `read` with its path (`tools[i]`, which its errors name; null:
/// none).
pub(crate) fn read_tools(
    v: Option<&Value>,
    read: fn(&Value, &str) -> Result<ToolSpec, BadRequest>,
) -> Result<Vec<ToolSpec>, BadRequest> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(ts)) => {
            ts.iter().enumerate().map(|(i, t)| read(t, &format!("tools[{i}]"))).collect()
        }
        Some(_) => Err("`tools` is not an array".into()),
    }
}

/// `stop` (Anthropic's `stop_sequences`): a string or a list of strings.
#[derive(Deserialize)]
#[serde(untagged, expecting = "expected a string or a list of strings")]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

impl Stop {
    /// The stop strings of an optional `stop` (absent or null: none).
    pub fn list(stop: Option<Stop>) -> Vec<String> {
        match stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s],
            Some(Stop::Many(v)) => v,
        }
    }
}

/// `tool_choice` as OpenAI chat and the Responses API write it.
#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "expected auto, none, required or {\"type\": \"function\", ...} naming a function"
)]
enum ChoiceIn {
    Mode(String),
    Object(ChoiceObject),
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ChoiceObject {
    /// Chat nests the name under `function`; the Responses API's form is flat.
    Function {
        function: Option<FunctionName>,
        name: Option<String>,
    },
    AllowedTools {
        mode: Option<String>,
    },
}

#[derive(Deserialize)]
struct FunctionName {
    name: String,
}

/// The `tool_choice` at `at` (absent or null: auto).
pub(crate) fn read_tool_choice(v: Option<&Value>, at: &str) -> Result<ToolChoice, BadRequest> {
    let Some(choice) = optional(v, at)? else { return Ok(ToolChoice::Auto) };
    match choice {
        ChoiceIn::Mode(mode) => match mode.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => {
                Err(BadRequest::at(at, format!("`{other}` is not one of auto, none, required")))
            }
        },
        ChoiceIn::Object(ChoiceObject::Function { function, name }) => {
            match function.map(|f| f.name).or(name) {
                Some(n) => Ok(ToolChoice::Named(n)),
                None => Err(BadRequest::at(at, "a function choice names no function")),
            }
        }
        ChoiceIn::Object(ChoiceObject::AllowedTools { mode }) => match mode.as_deref() {
            Some("required") => Ok(ToolChoice::Required),
            _ => Ok(ToolChoice::Auto),
        },
    }
}

/// A response format as OpenAI chat (`response_format`) and the Responses API (`text.format`)
/// write it.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum FormatIn {
    Text {},
    JsonObject {},
    /// Chat nests the schema under `json_schema`; the Responses API's form is flat.
    JsonSchema {
        json_schema: Option<SchemaIn>,
        #[serde(flatten)]
        flat: SchemaIn,
    },
}

#[derive(Deserialize)]
struct SchemaIn {
    name: Option<String>,
    schema: Option<Value>,
    strict: Option<bool>,
}

/// The response format at `at` (absent, null or text: none).
pub(crate) fn read_response_format(
    v: Option<&Value>,
    at: &str,
) -> Result<Option<ResponseFormat>, BadRequest> {
    let Some(format) = optional(v, at)? else { return Ok(None) };
    match format {
        FormatIn::Text {} => Ok(None),
        FormatIn::JsonObject {} => Ok(Some(ResponseFormat::JsonObject)),
        FormatIn::JsonSchema { json_schema, flat } => {
            let s = json_schema.unwrap_or(flat);
            let schema =
                s.schema.ok_or_else(|| BadRequest::at(at, "of type json_schema has no schema"))?;
            Ok(Some(ResponseFormat::JsonSchema {
                name: s.name.unwrap_or_else(|| "response".into()),
                schema,
                strict: s.strict.unwrap_or(false),
            }))
        }
    }
}

/// Ollama's `format`: "json" or a JSON schema.
#[derive(Deserialize)]
#[serde(untagged, expecting = "expected \"json\" or a JSON schema")]
enum OllamaFormat {
    Word(String),
    Schema(serde_json::Map<String, Value>),
}

/// Ollama's `format` at `at` (absent, null or empty: none).
pub(crate) fn read_ollama_format(
    v: Option<&Value>,
    at: &str,
) -> Result<Option<ResponseFormat>, BadRequest> {
    let Some(format) = optional(v, at)? else { return Ok(None) };
    match format {
        OllamaFormat::Word(w) if w.is_empty() => Ok(None),
        OllamaFormat::Word(w) if w == "json" => Ok(Some(ResponseFormat::JsonObject)),
        OllamaFormat::Word(w) => {
            Err(BadRequest::at(at, format!("`{w}` is not \"json\" or a JSON schema")))
        }
        OllamaFormat::Schema(o) => Ok(Some(ResponseFormat::JsonSchema {
            name: "response".into(),
            schema: Value::Object(o),
            strict: false,
        })),
    }
}

/// Why the gateway refuses a request (a 400): the message, and the path of the value at fault
/// when it is one value (`messages[2].role`), which OpenAI's error object carries as `param`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRequest {
    pub param: Option<String>,
    pub message: String,
}

impl BadRequest {
    /// The value at `param` is at fault: the message says `<param>: <what>`.
    pub fn at(param: impl Into<String>, what: impl Into<String>) -> BadRequest {
        let param = param.into();
        BadRequest { message: format!("{param}: {}", what.into()), param: Some(param) }
    }

    /// The value at `param` is at fault, and `message` names it already (`` `input` is missing``).
    pub fn naming(param: impl Into<String>, message: impl Into<String>) -> BadRequest {
        BadRequest { param: Some(param.into()), message: message.into() }
    }
}

impl std::fmt::Display for BadRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BadRequest {}

/// A request as a whole is at fault.
impl From<String> for BadRequest {
    fn from(message: String) -> BadRequest {
        BadRequest { param: None, message }
    }
}

impl From<&str> for BadRequest {
    fn from(message: &str) -> BadRequest {
        BadRequest::from(message.to_string())
    }
}

/// An optional key's value at `at` read as `T` (`from_json`); absent or null: None.
fn optional<T: serde::de::DeserializeOwned>(
    v: Option<&Value>,
    at: &str,
) -> Result<Option<T>, BadRequest> {
    v.filter(|v| !v.is_null()).map(|v| from_json(v, at)).transpose()
}

/// Read `T` from the JSON value `v` found at `at` in the request (`""`: the body itself); an
/// error names the path of the value at fault, such as `messages[2].content[0]` with `missing
/// field `id``, through serde_path_to_error.
pub(crate) fn from_json<T: serde::de::DeserializeOwned>(
    v: &Value,
    at: &str,
) -> Result<T, BadRequest> {
    deserialize_at(v, at, BadRequest::at)
}

/// `T` read from `de` through serde_path_to_error; a refusal is `refused(key, message)` with the
/// key at fault below `at`, or the message alone when the value at `at` itself is.
fn deserialize_at<'de, T: serde::Deserialize<'de>>(
    de: impl serde::Deserializer<'de, Error = serde_json::Error>,
    at: &str,
    refused: fn(String, String) -> BadRequest,
) -> Result<T, BadRequest> {
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = crate::error::key_at(at, e.path());
        let message = e.into_inner().to_string();
        if path.is_empty() { BadRequest::from(message) } else { refused(path, message) }
    })
}

/// The keys of `obj` its API's reader does not read (`known` lists those it does), in the
/// body's order: what the request's `ignored` records as asked and not delivered.
pub(crate) fn unread<'a>(
    obj: &'a serde_json::Map<String, Value>,
    known: &'a [&str],
) -> impl Iterator<Item = String> + 'a {
    obj.keys().filter(|k| !known.contains(&k.as_str())).cloned()
}

/// Read `T` from a request body whose field types check their own values and name their key in
/// each message (`` `dimensions` must be a positive whole number``): through
/// serde_path_to_error, so that the refusal's `param` is the key at fault. The body is taken by
/// value: its strings move into `T`, not copied.
pub(crate) fn from_body<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, BadRequest> {
    deserialize_at(v, "", BadRequest::naming)
}

/// A field's value read as JSON and then checked by `check`, whose message names the key: the
/// `Deserialize` of such a field type.
pub fn checked<'de, D: serde::Deserializer<'de>, T>(
    d: D,
    check: impl FnOnce(Value) -> Result<T, String>,
) -> Result<T, D::Error> {
    use serde::de::Error as _;
    check(<Value as serde::Deserialize>::deserialize(d)?).map_err(D::Error::custom)
}

/// A tool's result appended to `messages` as a tool message, named after the
/// call it answers (the latest earlier call with that id).
pub(crate) fn push_tool_result(messages: &mut Vec<Message>, call_id: String, content: String) {
    let name = messages
        .iter()
        .rev()
        .flat_map(|m| m.tool_calls.iter())
        .find(|c| c.id == call_id)
        .map(|c| c.name.clone());
    messages.push(Message {
        role: Role::Tool,
        content,
        tool_calls: Vec::new(),
        tool_call_id: Some(call_id),
        name,
    });
}

fn bad(msg: &str) -> BadRequest {
    BadRequest::from(msg)
}

/// A chat request of OpenAI's `/v1/chat/completions` or Ollama's `/api/chat`.
pub(super) fn read_chat(api: Api, body: &Value) -> Result<Asked, BadRequest> {
    let obj = body.as_object().ok_or_else(|| bad("the request body is not a JSON object"))?;
    let req: ChatRequest = from_json(body, "")?;
    if req.messages.is_empty() {
        return Err(BadRequest::naming("messages", "`messages` is empty"));
    }
    let mut messages = Vec::with_capacity(req.messages.len());
    for (i, m) in req.messages.into_iter().enumerate() {
        messages.push(read_message(m, i)?);
    }
    link_tool_results(&mut messages);
    let tools = read_tools(obj.get("tools"), read_tool)?;
    let mut asked = Asked::new(messages, tools, obj.get("model").cloned());
    match api {
        Api::Ollama => {
            read_ollama_keys(body, &mut asked)?;
            asked.response_format = read_ollama_format(obj.get("format"), "format")?;
            asked.reasoning = read_think(obj.get("think"))?;
            // `keep_alive` is not among them: it is recorded as not delivered (by presence).
            const KNOWN: [&str; 7] =
                ["model", "messages", "tools", "stream", "options", "format", "think"];
            asked.ignored.extend(unread(obj, &KNOWN));
        }
        // OpenAI's chat (`adapter` sends no other API here).
        _ => {
            read_openai_keys(body, &mut asked)?;
            asked.max_tokens = non_null(obj.get("max_completion_tokens"))
                .map(|v| ("max_completion_tokens", v))
                .or_else(|| non_null(obj.get("max_tokens")).map(|v| ("max_tokens", v)));
            asked.tool_choice = read_tool_choice(obj.get("tool_choice"), "tool_choice")?;
            asked.response_format =
                read_response_format(obj.get("response_format"), "response_format")?;
            asked.reasoning = read_effort(obj.get("reasoning_effort"), "reasoning_effort")?;
            const KNOWN: [&str; 14] = [
                "reasoning_effort",
                "model",
                "messages",
                "tools",
                "stream",
                "stream_options",
                "temperature",
                "top_p",
                "seed",
                "max_tokens",
                "max_completion_tokens",
                "stop",
                "tool_choice",
                "response_format",
            ];
            asked.ignored = unread(obj, &KNOWN).collect();
        }
    }
    Ok(asked)
}

/// The messages of a chat request, typed; its other keys are read from the body as they are
/// (`read_chat`), and those it does not know are noted as dropped.
#[derive(Deserialize)]
struct ChatRequest {
    messages: Vec<ChatMessage>,
}

/// The keys OpenAI chat reads typed; the sampling values are forwarded as they are.
#[derive(Deserialize)]
struct OpenAiKeys {
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    stop: Option<Stop>,
}

#[derive(Deserialize)]
struct StreamOptions {
    include_usage: Option<bool>,
}

/// The keys Ollama's chat reads typed.
#[derive(Deserialize)]
struct OllamaKeys {
    stream: Option<bool>,
    options: Option<OllamaOptions>,
}

/// Ollama's `options`: `stop` typed, the sampling values read from the object as they are.
#[derive(Deserialize)]
#[serde(expecting = "an object of options")]
struct OllamaOptions {
    stop: Option<Stop>,
    #[serde(flatten)]
    rest: serde_json::Map<String, Value>,
}

fn non_null(v: Option<&Value>) -> Option<Value> {
    v.filter(|v| !v.is_null()).cloned()
}

/// The keys OpenAI's chat and completions share: `stream`, `stream_options.include_usage`,
/// `stop` and the sampling values.
pub(super) fn read_openai_keys(body: &Value, asked: &mut Asked) -> Result<(), BadRequest> {
    let keys: OpenAiKeys = from_json(body, "")?;
    asked.stream = keys.stream.unwrap_or(false);
    asked.include_usage = keys.stream_options.and_then(|o| o.include_usage).unwrap_or(false);
    asked.temperature = non_null(body.get("temperature"));
    asked.top_p = non_null(body.get("top_p"));
    asked.seed = non_null(body.get("seed"));
    asked.stop = Stop::list(keys.stop);
    Ok(())
}

/// The keys Ollama's chat and generate share: `stream` (on unless turned off) and `options`
/// (its sampling values, `num_predict` and `stop`; any other option noted as dropped).
pub(super) fn read_ollama_keys(body: &Value, asked: &mut Asked) -> Result<(), BadRequest> {
    let keys: OllamaKeys = from_json(body, "")?;
    asked.stream = keys.stream.unwrap_or(true);
    if let Some(o) = keys.options {
        asked.temperature = non_null(o.rest.get("temperature"));
        asked.top_p = non_null(o.rest.get("top_p"));
        asked.seed = non_null(o.rest.get("seed"));
        asked.max_tokens = non_null(o.rest.get("num_predict")).map(|v| ("num_predict", v));
        asked.stop = Stop::list(o.stop);
        const KNOWN: [&str; 4] = ["temperature", "top_p", "seed", "num_predict"];
        asked.ignored.extend(unread(&o.rest, &KNOWN).map(|k| format!("options.{k}")));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(expecting = "a message object")]
struct ChatMessage {
    role: ChatRole,
    content: Option<Content>,
    images: Option<Vec<Value>>,
    tool_calls: Option<Vec<CallIn>>,
    tool_call_id: Option<String>,
    /// Ollama names the tool a result answers.
    tool_name: Option<String>,
    name: Option<String>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum ChatRole {
    System,
    Developer,
    User,
    Assistant,
    Tool,
}

/// Message content: a string or (OpenAI) a list of parts, each read on its own.
#[derive(Deserialize)]
#[serde(untagged, expecting = "expected a string or a list of text parts")]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

/// A call of an assistant message: OpenAI's arguments are a JSON string, Ollama's an object,
/// and Ollama's calls carry no id.
#[derive(Deserialize)]
struct CallIn {
    id: Option<String>,
    function: FunctionIn,
}

#[derive(Deserialize)]
struct FunctionIn {
    name: String,
    arguments: Option<Value>,
}

/// Message `index` of a chat request.
fn read_message(m: ChatMessage, index: usize) -> Result<Message, BadRequest> {
    let at = format!("messages[{index}]");
    let role = match m.role {
        ChatRole::System | ChatRole::Developer => Role::System,
        ChatRole::User => Role::User,
        ChatRole::Assistant => Role::Assistant,
        ChatRole::Tool => Role::Tool,
    };
    let content = match m.content {
        None => String::new(),
        Some(Content::Text(s)) => s,
        Some(Content::Parts(parts)) => {
            let mut text = String::new();
            for p in parts {
                match (p.kind.as_str(), p.text) {
                    ("text", Some(t)) => text.push_str(&t),
                    (kind, _) => {
                        return Err(BadRequest::at(
                            at,
                            format!(
                                "content part of type `{kind}` is not supported: the gateway forwards text"
                            ),
                        ));
                    }
                }
            }
            text
        }
    };
    if m.images.is_some_and(|a| !a.is_empty()) {
        return Err(BadRequest::at(at, "images are not supported: the gateway forwards text"));
    }
    let tool_calls = m
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, c)| ToolCall {
            // Ollama's calls carry no id: one is made up that tool results can point to.
            id: c.id.unwrap_or_else(|| format!("call_{index}_{i}")),
            name: c.function.name,
            arguments: match c.function.arguments {
                Some(Value::String(s)) => s,
                None | Some(Value::Null) => "{}".to_string(),
                Some(other) => other.to_string(),
            },
        })
        .collect();
    let tool = role == Role::Tool;
    Ok(Message {
        role,
        content,
        tool_calls,
        tool_call_id: if tool { m.tool_call_id } else { None },
        name: if tool { m.tool_name.or(m.name) } else { None },
    })
}

/// Give each tool result both the id and the name of the call it answers,
/// whichever the API left out: OpenAI results name the id, Ollama's the tool
/// (or nothing, answering the calls in order). Each provider upstream needs its own.
pub(super) fn link_tool_results(messages: &mut [Message]) {
    let mut calls: Vec<ToolCall> = Vec::new();
    let mut answered: Vec<bool> = Vec::new();
    for m in messages.iter_mut() {
        match m.role {
            Role::Assistant if !m.tool_calls.is_empty() => {
                calls = m.tool_calls.clone();
                answered = vec![false; calls.len()];
            }
            Role::Tool => {
                let open = |i: &usize| !answered[*i];
                let by_id = m
                    .tool_call_id
                    .as_ref()
                    .and_then(|id| (0..calls.len()).find(|&i| &calls[i].id == id));
                let by_name = || {
                    m.name
                        .as_ref()
                        .and_then(|n| (0..calls.len()).filter(open).find(|&i| &calls[i].name == n))
                };
                let first_open = || (0..calls.len()).find(open);
                let found =
                    if m.tool_call_id.is_some() { by_id } else { by_name().or_else(first_open) };
                if let Some(i) = found {
                    answered[i] = true;
                    m.tool_call_id.get_or_insert(calls[i].id.clone());
                    m.name.get_or_insert(calls[i].name.clone());
                }
            }
            _ => {}
        }
    }
}

/// A tool of a chat request (and the Responses API's nested form).
#[derive(Deserialize)]
#[serde(expecting = "a tool object")]
struct ToolIn {
    #[serde(rename = "type")]
    kind: Option<String>,
    function: Option<FunctionSpec>,
}

#[derive(Deserialize)]
struct FunctionSpec {
    name: String,
    description: Option<String>,
    parameters: Option<Value>,
}

/// The tool at `at`: a function, as OpenAI chat and Ollama write it.
pub(super) fn read_tool(t: &Value, at: &str) -> Result<ToolSpec, BadRequest> {
    let t: ToolIn = from_json(t, at)?;
    match t.kind.as_deref() {
        None | Some("function") => {}
        Some(other) => {
            return Err(BadRequest::at(
                at,
                format!("tool type `{other}` is not supported (function)"),
            ));
        }
    }
    let f = t.function.ok_or_else(|| BadRequest::at(at, "missing field `function`"))?;
    Ok(ToolSpec {
        name: f.name,
        description: f.description.unwrap_or_default(),
        parameters: f.parameters.unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

/// What the reply says beyond the reply itself.
pub struct ReplyMeta<'a> {
    pub id: &'a str,
    pub model: &'a str,
    pub created: u64,
    pub created_at: &'a str,
}

pub(super) fn openai_finish(reply: &ChatReply) -> String {
    if !reply.tool_calls.is_empty() {
        return "tool_calls".into();
    }
    match reply.finish_reason.as_deref() {
        Some("length") => "length".into(),
        Some("tool_calls") | None | Some("") => "stop".into(),
        Some(other) => other.into(),
    }
}

fn openai_usage(reply: &ChatReply) -> Value {
    let u = reply.usage;
    let mut v =
        json!({"prompt_tokens": u.input, "completion_tokens": u.output, "total_tokens": u.total()});
    if u.cached > 0 {
        v["prompt_tokens_details"] = json!({"cached_tokens": u.cached});
    }
    v
}

fn openai_calls(reply: &ChatReply) -> Vec<Value> {
    reply.tool_calls.iter().map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}})).collect()
}

/// The non-streaming chat completion.
pub(crate) fn openai_reply(reply: &ChatReply, meta: &ReplyMeta) -> Value {
    let mut message = json!({"role": "assistant", "content": if reply.text.is_empty() && !reply.tool_calls.is_empty() { Value::Null } else { json!(reply.text) }});
    if !reply.tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(openai_calls(reply));
    }
    let mut v = json!({
        "id": meta.id, "object": "chat.completion", "created": meta.created, "model": meta.model,
        "choices": [{"index": 0, "message": message, "finish_reason": openai_finish(reply)}],
        "usage": openai_usage(reply),
    });
    if let Some(fp) = &reply.fingerprint {
        v["system_fingerprint"] = json!(fp);
    }
    v
}

/// The same reply as server-sent events: a role and content chunk, one chunk
/// per tool call, a finish chunk, a usage chunk when asked, then `[DONE]`.
pub(crate) fn openai_sse(reply: &ChatReply, meta: &ReplyMeta, include_usage: bool) -> String {
    let chunk = |choices: Value| {
        let mut c = json!({"id": meta.id, "object": "chat.completion.chunk", "created": meta.created, "model": meta.model, "choices": choices});
        if let Some(fp) = &reply.fingerprint {
            c["system_fingerprint"] = json!(fp);
        }
        if include_usage {
            c["usage"] = Value::Null;
        }
        c
    };
    let mut chunks = vec![chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": reply.text}, "finish_reason": null}]),
    )];
    for (i, call) in openai_calls(reply).into_iter().enumerate() {
        let mut call = call;
        call["index"] = json!(i);
        chunks.push(chunk(
            json!([{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]),
        ));
    }
    chunks.push(chunk(json!([{"index": 0, "delta": {}, "finish_reason": openai_finish(reply)}])));
    if include_usage {
        let mut c = chunk(json!([]));
        c["usage"] = openai_usage(reply);
        chunks.push(c);
    }
    let mut out = String::new();
    for c in chunks {
        out.push_str("data: ");
        out.push_str(&c.to_string());
        out.push_str("\n\n");
    }
    out.push_str("data: [DONE]\n\n");
    out
}

fn ollama_calls(reply: &ChatReply) -> Vec<Value> {
    reply
        .tool_calls
        .iter()
        .map(|c| {
            // Ollama's arguments are an object; text that is not JSON stays text.
            let args: Value =
                serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!(c.arguments));
            json!({"function": {"name": c.name, "arguments": args}})
        })
        .collect()
}

pub(super) fn ollama_done(reply: &ChatReply) -> &'static str {
    match reply.finish_reason.as_deref() {
        Some("length") => "length",
        _ => "stop",
    }
}

fn ollama_final(reply: &ChatReply, meta: &ReplyMeta, message: Value) -> Value {
    json!({
        "model": meta.model, "created_at": meta.created_at, "message": message, "done": true, "done_reason": ollama_done(reply),
        "total_duration": 0, "load_duration": 0, "prompt_eval_count": reply.usage.input, "prompt_eval_duration": 0,
        "eval_count": reply.usage.output, "eval_duration": 0,
    })
}

/// The non-streaming `/api/chat` reply.
pub(crate) fn ollama_reply(reply: &ChatReply, meta: &ReplyMeta) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.text});
    if !reply.tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(ollama_calls(reply));
    }
    ollama_final(reply, meta, message)
}

/// The same reply as Ollama streams it: newline-delimited JSON objects, the
/// content, then the tool calls, then a `done` object with the counts.
pub(crate) fn ollama_ndjson(reply: &ChatReply, meta: &ReplyMeta) -> String {
    let part = |message: Value| json!({"model": meta.model, "created_at": meta.created_at, "message": message, "done": false});
    let mut lines = Vec::new();
    if !reply.text.is_empty() {
        lines.push(part(json!({"role": "assistant", "content": reply.text})));
    }
    if !reply.tool_calls.is_empty() {
        lines.push(part(
            json!({"role": "assistant", "content": "", "tool_calls": ollama_calls(reply)}),
        ));
    }
    lines.push(ollama_final(reply, meta, json!({"role": "assistant", "content": ""})));
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// An error body in the API's own form.
/// The body of a 400 for `bad`: its text as the message, and in OpenAI's error object the path
/// of the value at fault as `param`.
pub(crate) fn bad_request_body(api: Api, bad: &BadRequest) -> Value {
    let mut v = error_body(api, "invalid_request_error", &bad.message, None);
    if let Some(p) = bad.param.as_ref().filter(|_| api.openai_errors()) {
        v["error"]["param"] = json!(p);
    }
    v
}

pub(crate) fn error_body(api: Api, kind: &str, message: &str, limit: Option<&str>) -> Value {
    if api.openai_errors() {
        let mut e = json!({"type": kind, "message": message});
        if let Some(l) = limit {
            e["limit"] = json!(l);
        }
        return json!({"error": e});
    }
    match api {
        Api::Anthropic => {
            // Anthropic's own error types; ablate's kind kept beside them.
            let t = match kind {
                "unauthorized" => "authentication_error",
                "not_found" => "not_found_error",
                "budget_exhausted" => "rate_limit_error",
                "request_too_large" => "request_too_large",
                "provider_error" | "internal_error" => "api_error",
                _ => "invalid_request_error",
            };
            let mut e = json!({"type": t, "message": message, "ablate_type": kind});
            if let Some(l) = limit {
                e["limit"] = json!(l);
            }
            json!({"type": "error", "error": e})
        }
        Api::Gemini | Api::GeminiStream => {
            // Google's error form: the HTTP code, a message and a status word.
            let (code, status) = match kind {
                "unauthorized" => (401, "UNAUTHENTICATED"),
                "not_found" => (404, "NOT_FOUND"),
                "budget_exhausted" => (429, "RESOURCE_EXHAUSTED"),
                "provider_error" | "internal_error" => (500, "INTERNAL"),
                "not_implemented" => (501, "UNIMPLEMENTED"),
                _ => (400, "INVALID_ARGUMENT"),
            };
            let mut e =
                json!({"code": code, "message": message, "status": status, "ablate_type": kind});
            if let Some(l) = limit {
                e["limit"] = json!(l);
            }
            json!({"error": e})
        }
        _ => json!({"error": message}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Tokens;

    fn reply(text: &str, calls: Vec<ToolCall>) -> ChatReply {
        ChatReply {
            text: text.into(),
            tool_calls: calls,
            unparsed_tool_calls: vec![],
            finish_reason: Some("stop".into()),
            usage: Tokens { input: 7, output: 3, cached: 0 },
            token_source: Default::default(),
            usage_note: None,
            fingerprint: None,
        }
    }

    const META: ReplyMeta =
        ReplyMeta { id: "c1", model: "m", created: 5, created_at: "2025-01-01T00:00:00Z" };

    #[test]
    fn ollama_tool_results_get_the_ids_of_the_calls_they_answer() {
        let body = json!({"model": "x", "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "read", "arguments": {"path": "a"}}},
                {"function": {"name": "list", "arguments": {}}}]},
            {"role": "tool", "tool_name": "list", "content": "a b"},
            {"role": "tool", "content": "text of a"}]});
        let a = read_chat(Api::Ollama, &body).unwrap();
        assert!(a.stream, "Ollama streams by default");
        assert_eq!(a.messages[1].tool_calls[0].id, "call_1_0");
        assert_eq!(a.messages[1].tool_calls[0].arguments, r#"{"path":"a"}"#);
        assert_eq!(
            (a.messages[2].tool_call_id.as_deref(), a.messages[2].name.as_deref()),
            (Some("call_1_1"), Some("list"))
        );
        // Unnamed: the first call no earlier result answered.
        assert_eq!(
            (a.messages[3].tool_call_id.as_deref(), a.messages[3].name.as_deref()),
            (Some("call_1_0"), Some("read"))
        );
    }

    #[test]
    fn openai_tool_results_get_the_names_of_their_calls() {
        let body = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "t9", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "t9", "content": "ok"}], "n": 2, "max_tokens": 5});
        let a = read_chat(Api::OpenAi, &body).unwrap();
        assert_eq!(a.messages[0].content, "ab");
        assert_eq!(a.messages[2].name.as_deref(), Some("run"));
        assert_eq!(a.ignored, vec!["n".to_string()]);
        assert_eq!(a.max_tokens, Some(("max_tokens", json!(5))));
        assert!(!a.stream);
    }

    #[test]
    fn requests_the_apis_do_not_accept_are_refused() {
        // Each refusal is the message of the 400 the client gets, naming what it sent.
        for (body, message) in [
            (json!([]), "the request body is not a JSON object"),
            (json!({"messages": []}), "`messages` is empty"),
            (
                json!({"messages": [{"role": "function", "content": "x"}]}),
                "messages[0].role: unknown variant `function`, expected one of `system`, `developer`, `user`, `assistant`, `tool`",
            ),
            (json!({"model": "m"}), "missing field `messages`"),
            (
                json!({"messages": "hi"}),
                "messages: invalid type: string \"hi\", expected a sequence",
            ),
            (
                json!({"messages": [1]}),
                "messages[0]: invalid type: integer `1`, expected a message object",
            ),
            (json!({"messages": [{"content": "x"}]}), "messages[0]: missing field `role`"),
            (
                json!({"messages": [{"role": "user", "content": 5}]}),
                "messages[0].content: expected a string or a list of text parts",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": "c"}]}]}),
                "messages[1].tool_calls[0]: missing field `function`",
            ),
            (
                json!({"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]}),
                "messages[0].tool_calls[0].function: missing field `name`",
            ),
            (
                json!({"messages": [{"role": "tool", "tool_call_id": 7, "content": "x"}]}),
                "messages[0].tool_call_id: invalid type: integer `7`, expected a string",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]}),
                "messages[0]: images are not supported: the gateway forwards text",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}),
                "tools[0]: missing field `function`",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"description": "d"}}]}),
                "tools[0].function: missing field `name`",
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}),
                "messages[0]: content part of type `image_url` is not supported: the gateway forwards text",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web_search"}]}),
                "tools[0]: tool type `web_search` is not supported (function)",
            ),
        ] {
            let got = read_chat(Api::OpenAi, &body).err().map(|e| e.message);
            assert_eq!(got.as_deref(), Some(message), "{body}");
        }
    }

    #[test]
    fn tool_choices_and_response_formats_read_in_every_form_the_apis_write() {
        let choice = |v: Value| read_tool_choice(Some(&v), "tool_choice");
        assert_eq!(choice(json!("required")), Ok(ToolChoice::Required));
        assert_eq!(choice(json!(null)), Ok(ToolChoice::Auto));
        let named = Ok(ToolChoice::Named("f".into()));
        assert_eq!(choice(json!({"type": "function", "function": {"name": "f"}})), named);
        assert_eq!(choice(json!({"type": "function", "name": "f"})), named);
        assert_eq!(
            choice(json!({"type": "allowed_tools", "mode": "required", "tools": []})),
            Ok(ToolChoice::Required)
        );
        let format = |v: Value| read_response_format(Some(&v), "response_format");
        assert_eq!(format(json!({"type": "text"})), Ok(None));
        assert_eq!(format(json!({"type": "json_object"})), Ok(Some(ResponseFormat::JsonObject)));
        let schema = json!({"type": "object"});
        let want = Ok(Some(ResponseFormat::JsonSchema {
            name: "n".into(),
            schema: schema.clone(),
            strict: true,
        }));
        assert_eq!(
            format(
                json!({"type": "json_schema", "json_schema": {"name": "n", "schema": schema, "strict": true}})
            ),
            want
        );
        assert_eq!(
            format(json!({"type": "json_schema", "name": "n", "schema": schema, "strict": true})),
            want
        );
        let ollama = |v: Value| read_ollama_format(Some(&v), "format");
        assert_eq!(ollama(json!("")), Ok(None));
        assert_eq!(ollama(json!("json")), Ok(Some(ResponseFormat::JsonObject)));
        assert_eq!(
            ollama(schema.clone()),
            Ok(Some(ResponseFormat::JsonSchema { name: "response".into(), schema, strict: false }))
        );
        // The refusals, each naming the key.
        let message =
            |r: Result<_, BadRequest>| r.map(|_: Option<ResponseFormat>| ()).unwrap_err().message;
        assert_eq!(
            choice(json!("any")).unwrap_err().message,
            "tool_choice: `any` is not one of auto, none, required"
        );
        assert_eq!(
            choice(json!({"type": "function"})).unwrap_err().message,
            "tool_choice: a function choice names no function"
        );
        assert_eq!(
            choice(json!(5)).unwrap_err().message,
            "tool_choice: expected auto, none, required or {\"type\": \"function\", ...} naming a function"
        );
        assert_eq!(
            message(format(json!({"type": "xml"}))),
            "response_format.type: unknown variant `xml`, expected one of `text`, `json_object`, `json_schema`"
        );
        assert_eq!(
            message(format(json!({"type": "json_schema", "json_schema": {"name": "n"}}))),
            "response_format: of type json_schema has no schema"
        );
        assert_eq!(
            message(ollama(json!("yaml"))),
            "format: `yaml` is not \"json\" or a JSON schema"
        );
        assert_eq!(message(ollama(json!([1]))), "format: expected \"json\" or a JSON schema");
    }

    #[test]
    fn a_refusal_names_the_value_at_fault_as_param_in_openai_errors() {
        // (body, the param OpenAI's error object carries): the path serde reports, the path a
        // reader names, a key the message names itself, and none for the body as a whole.
        for (body, param) in [
            (json!({"messages": [{"role": "user", "content": 5}]}), Some("messages[0].content")),
            (
                json!({"messages": [{"role": "user", "content": "x", "images": ["a"]}]}),
                Some("messages[0]"),
            ),
            (json!({"messages": []}), Some("messages")),
            (json!([]), None),
        ] {
            let bad = read_chat(Api::OpenAi, &body).unwrap_err();
            assert_eq!(bad.param.as_deref(), param, "{body}");
            let v = bad_request_body(Api::OpenAi, &bad);
            assert_eq!(v["error"]["message"], json!(bad.message));
            assert_eq!(v["error"]["type"], "invalid_request_error");
            assert_eq!(v["error"].get("param").and_then(Value::as_str), param, "{v}");
            // Ollama's error is a string and Anthropic's object has no param: the message alone.
            assert_eq!(bad_request_body(Api::Ollama, &bad), json!({"error": bad.message}));
            assert!(bad_request_body(Api::Anthropic, &bad)["error"].get("param").is_none());
        }
    }

    #[test]
    fn sse_chunks_rebuild_the_reply() {
        let r = reply(
            "hi",
            vec![ToolCall { id: "c".into(), name: "f".into(), arguments: "{\"a\":1}".into() }],
        );
        let sse = openai_sse(&r, &META, true);
        let data: Vec<&str> = sse.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
        assert_eq!(data.len(), 5, "content, one call, finish, usage, [DONE]: {sse}");
        assert_eq!(*data.last().unwrap(), "[DONE]");
        let v: Vec<Value> = data[..4].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
        assert_eq!(v[0]["choices"][0]["delta"]["content"], "hi");
        assert_eq!(
            v[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
        assert_eq!(v[2]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(v[3]["usage"]["total_tokens"], 10);
        let nd = ollama_ndjson(&r, &META);
        let lines: Vec<Value> = nd.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1]["message"]["tool_calls"][0]["function"]["arguments"]["a"], 1);
        assert_eq!(
            (lines[2]["done"].clone(), lines[2]["eval_count"].clone()),
            (json!(true), json!(3))
        );
    }
}
