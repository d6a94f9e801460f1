//! Anthropic's Messages API (`POST /v1/messages`), read into the gateway's one
//! provider-neutral call and written back from one `ChatReply`: the message,
//! and its stream of server-sent events (emulated from the complete reply, in
//! the order Anthropic's SDK accumulates them).

use super::wire::{self, Asked, BadRequest, ReplyMeta, Stop};
use crate::model::{
    ChatReply, Message, Reasoning, ResponseFormat, Role, ToolCall, ToolChoice, ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

const KNOWN: [&str; 12] = [
    "thinking",
    "model",
    "max_tokens",
    "system",
    "messages",
    "tools",
    "tool_choice",
    "stop_sequences",
    "temperature",
    "top_p",
    "stream",
    "output_config",
];

/// Keys that ask for nothing this model is sent, not noted as dropped (`metadata` is: the
/// delivery record keeps it by presence, docs/delivery.md).
const QUIET: [&str; 1] = ["anthropic_version"];

/// A Messages request as the gateway reads it: each key it forwards or acts
/// on, typed (null is absent); other keys are noted as dropped (`KNOWN`).
/// Errors name the path of the value at fault (`wire::from_json`).
#[derive(Deserialize)]
struct Request {
    // `model` is read as it is (any value: the experiment fixes the model).
    max_tokens: Option<Value>,
    system: Option<Text>,
    messages: Vec<InMessage>,
    tools: Option<Vec<Tool>>,
    tool_choice: Option<Choice>,
    stop_sequences: Option<Stop>,
    temperature: Option<Value>,
    top_p: Option<Value>,
    stream: Option<bool>,
    output_config: Option<OutputConfig>,
    thinking: Option<Thinking>,
}

/// `thinking`: on with a token budget, off, or adaptive (the model decides).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Thinking {
    Enabled { budget_tokens: Option<u64> },
    Disabled {},
    Adaptive {},
}

/// A string, or a list of content blocks read one by one (so that a block's
/// own error, such as a type not supported, is the one reported).
#[derive(Deserialize)]
#[serde(untagged, expecting = "expected a string or a list of content blocks")]
enum Text {
    One(String),
    Blocks(Vec<Value>),
}

#[derive(Deserialize)]
struct InMessage {
    role: InRole,
    content: Text,
}

#[derive(Deserialize, PartialEq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum InRole {
    User,
    Assistant,
    System,
}

/// A content block of a message.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Option<Value>,
    },
    ToolResult {
        tool_use_id: String,
        content: Option<Text>,
        is_error: Option<bool>,
    },
    // Thinking an earlier reply returned carries nothing this model reads.
    Thinking {},
    RedactedThinking {},
}

/// A block of a tool result's content: text only (the gateway forwards text).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResultBlock {
    Text {
        #[serde(default)]
        text: String,
    },
}

#[derive(Deserialize)]
struct Tool {
    #[serde(rename = "type")]
    kind: Option<String>,
    name: String,
    description: Option<String>,
    input_schema: Option<Value>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Choice {
    Auto {},
    Any {},
    None {},
    Tool { name: String },
}

#[derive(Deserialize)]
struct OutputConfig {
    format: Option<Format>,
    effort: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Format {
    JsonSchema { schema: Value },
}

/// Read a Messages request.
pub fn read(body: &Value) -> Result<Asked, BadRequest> {
    let obj = body.as_object().ok_or("the request body is not a JSON object")?;
    let req: Request = wire::from_json(body, "")?;
    let mut messages = Vec::new();
    match req.system {
        None => {}
        Some(Text::One(s)) => messages.push(Message::system(s)),
        Some(Text::Blocks(blocks)) => {
            let texts: Vec<&str> =
                blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect();
            messages.push(Message::system(texts.join("\n")));
        }
    }
    if req.messages.is_empty() {
        return Err(BadRequest::naming("messages", "`messages` is empty"));
    }
    for (i, m) in req.messages.into_iter().enumerate() {
        read_message(m, &format!("messages[{i}]"), &mut messages)?;
    }
    let tools = req
        .tools
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, t)| read_tool(t, &format!("tools[{i}]")))
        .collect::<Result<_, _>>()?;
    let mut asked = Asked::new(messages, tools, obj.get("model").cloned());
    asked.stream = req.stream.unwrap_or(false);
    asked.temperature = req.temperature;
    asked.top_p = req.top_p;
    asked.max_tokens = req.max_tokens.map(|v| ("max_tokens", v));
    asked.stop = Stop::list(req.stop_sequences);
    asked.tool_choice = match req.tool_choice {
        None | Some(Choice::Auto {}) => ToolChoice::Auto,
        Some(Choice::Any {}) => ToolChoice::Required,
        Some(Choice::None {}) => ToolChoice::None,
        Some(Choice::Tool { name }) => ToolChoice::Named(name),
    };
    let (format, effort) = req.output_config.map(|o| (o.format, o.effort)).unwrap_or_default();
    asked.response_format = format.map(|Format::JsonSchema { schema }| {
        ResponseFormat::JsonSchema { name: "response".into(), schema, strict: true }
    });
    let (enabled, budget_tokens) = match req.thinking {
        None | Some(Thinking::Adaptive {}) => (None, None),
        Some(Thinking::Enabled { budget_tokens }) => (Some(true), budget_tokens),
        Some(Thinking::Disabled {}) => (Some(false), None),
    };
    asked.reasoning = Reasoning { effort, budget_tokens, enabled }.some();
    asked.ignored = wire::unread(obj, &KNOWN).filter(|k| !QUIET.contains(&k.as_str())).collect();
    Ok(asked)
}

/// `/v1/messages/count_tokens`: an upper bound (the request's bytes), since the gateway does not
/// tokenize for the upstream.
pub(crate) fn count_tokens(body: &Value) -> Result<Value, BadRequest> {
    Ok(json!({"input_tokens": read(body)?.prompt_bound()}))
}

fn read_tool(t: Tool, at: &str) -> Result<ToolSpec, BadRequest> {
    match t.kind.as_deref() {
        None | Some("custom") => {}
        Some(other) => {
            return Err(BadRequest::at(
                at,
                format!("tool type `{other}` is not supported (a custom tool with input_schema)"),
            ));
        }
    }
    Ok(ToolSpec {
        name: t.name,
        description: t.description.unwrap_or_default(),
        parameters: t.input_schema.unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

/// Text of a tool result's content at `at`: a string or a list of text blocks.
fn result_text(v: Option<Text>, at: &str) -> Result<String, BadRequest> {
    match v {
        None => Ok(String::new()),
        Some(Text::One(s)) => Ok(s),
        Some(Text::Blocks(blocks)) => blocks
            .iter()
            .enumerate()
            .map(|(j, b)| {
                wire::from_json(b, &format!("{at}[{j}]")).map(|ResultBlock::Text { text }| text)
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|parts| parts.join("\n")),
    }
}

/// One message at `at`: its tool results become tool messages (first, in
/// order), its text one user or assistant message, its tool uses the
/// assistant's calls.
fn read_message(m: InMessage, at: &str, messages: &mut Vec<Message>) -> Result<(), BadRequest> {
    let role = match m.role {
        InRole::User => Role::User,
        InRole::Assistant => Role::Assistant,
        InRole::System => Role::System,
    };
    let blocks = match m.content {
        Text::One(s) => vec![json!({"type": "text", "text": s})],
        Text::Blocks(a) => a,
    };
    let mut text: Vec<String> = Vec::new();
    let mut calls: Vec<ToolCall> = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        let at = format!("{at}.content[{i}]");
        match wire::from_json(b, &at)? {
            Block::Text { text: t } => text.push(t),
            Block::ToolUse { id, name, input } if role == Role::Assistant => {
                let input = input.filter(|v| !v.is_null()).unwrap_or(json!({}));
                calls.push(ToolCall { id, name, arguments: input.to_string() });
            }
            Block::ToolResult { tool_use_id, content, is_error } if role == Role::User => {
                let mut content = result_text(content, &format!("{at}.content"))?;
                if is_error == Some(true) {
                    content = format!("Error: {content}");
                }
                wire::push_tool_result(messages, tool_use_id, content);
            }
            Block::Thinking {} | Block::RedactedThinking {} => {}
            Block::ToolUse { .. } | Block::ToolResult { .. } => {
                let kind = b.get("type").and_then(Value::as_str).unwrap_or("?");
                return Err(BadRequest::at(
                    at,
                    format!(
                        "a block of type `{kind}` is not supported in a {} message",
                        if role == Role::Assistant { "assistant" } else { "user or system" }
                    ),
                ));
            }
        }
    }
    if !text.is_empty() || !calls.is_empty() {
        messages.push(Message {
            role,
            content: text.join("\n"),
            tool_calls: calls,
            tool_call_id: None,
            name: None,
        });
    }
    Ok(())
}

fn stop_reason(reply: &ChatReply) -> &'static str {
    if !reply.tool_calls.is_empty() {
        return "tool_use";
    }
    match wire::openai_finish(reply).as_str() {
        "length" => "max_tokens",
        "content_filter" => "refusal",
        _ => "end_turn",
    }
}

fn input_of(c: &ToolCall) -> Value {
    serde_json::from_str::<Value>(&c.arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}))
}

fn id_of(meta: &ReplyMeta) -> String {
    let tail: String =
        meta.id.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    format!("msg_{tail}")
}

fn usage(reply: &ChatReply) -> Value {
    json!({"input_tokens": reply.usage.input, "output_tokens": reply.usage.output, "cache_creation_input_tokens": 0, "cache_read_input_tokens": reply.usage.cached})
}

/// The non-streaming message.
pub fn reply(reply: &ChatReply, meta: &ReplyMeta) -> Value {
    let mut content = Vec::new();
    if !reply.text.is_empty() {
        content.push(json!({"type": "text", "text": reply.text}));
    }
    for c in &reply.tool_calls {
        content.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input_of(c)}));
    }
    json!({"id": id_of(meta), "type": "message", "role": "assistant", "model": meta.model, "content": content,
        "stop_reason": stop_reason(reply), "stop_sequence": null, "usage": usage(reply)})
}

/// The same message as Anthropic streams it: `message_start`, each block
/// started, its text or its input (one delta) and stopped, `message_delta`
/// with the stop reason and the output tokens, `message_stop`.
pub fn sse(reply: &ChatReply, meta: &ReplyMeta) -> String {
    let mut events: Vec<(&str, Value)> = Vec::new();
    let mut start_usage = usage(reply);
    start_usage["output_tokens"] = json!(0);
    events.push((
        "message_start",
        json!({"type": "message_start", "message": {"id": id_of(meta), "type": "message", "role": "assistant", "model": meta.model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage}}),
    ));
    let mut index = 0;
    if !reply.text.is_empty() {
        events.push(("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
        events.push(("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": reply.text}})));
        events.push(("content_block_stop", json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    for c in &reply.tool_calls {
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": c.id, "name": c.name, "input": {}}}),
        ));
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": input_of(c).to_string()}}),
        ));
        events.push(("content_block_stop", json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null}, "usage": {"output_tokens": reply.usage.output}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events.iter().map(|(kind, data)| format!("event: {kind}\ndata: {data}\n\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Tokens;

    const META: ReplyMeta =
        ReplyMeta { id: "t-1-s2", model: "m", created: 5, created_at: "2025-01-01T00:00:00Z" };

    #[test]
    fn tool_results_come_before_the_text_of_their_turn() {
        let body = json!({"model": "m", "max_tokens": 100, "system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "messages": [
                {"role": "user", "content": "add"},
                {"role": "assistant", "content": [{"type": "text", "text": "calling"}, {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "5"}], "is_error": true}, {"type": "text", "text": "go on"}]}],
            "tools": [{"name": "add", "input_schema": {"type": "object"}}], "tool_choice": {"type": "any"}, "stop_sequences": ["</x>"], "metadata": {"user_id": "u"}, "thinking": {"type": "enabled"}});
        let a = read(&body).unwrap();
        let roles: Vec<Role> = a.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, vec![Role::System, Role::User, Role::Assistant, Role::Tool, Role::User]);
        assert_eq!(a.messages[0].content, "a\nb");
        assert_eq!(
            (a.messages[2].content.as_str(), a.messages[2].tool_calls[0].arguments.as_str()),
            ("calling", "{\"a\":2}")
        );
        assert_eq!(
            (a.messages[3].content.as_str(), a.messages[3].name.as_deref()),
            ("Error: 5", Some("add"))
        );
        assert_eq!(
            (a.tool_choice.clone(), a.stop.clone()),
            (ToolChoice::Required, vec!["</x>".to_string()])
        );
        // Thinking is read into the common form (forwarded or recorded as not delivered);
        // metadata is recorded as not delivered.
        assert_eq!(a.ignored, ["metadata"]);
        assert_eq!(a.reasoning, Some(Reasoning { enabled: Some(true), ..Default::default() }));
        let effort = json!({"messages": [{"role": "user", "content": "x"}],
            "thinking": {"type": "enabled", "budget_tokens": 31999, "display": "omitted"}, "output_config": {"effort": "high"}});
        assert_eq!(
            read(&effort).unwrap().reasoning.map(|r| r.to_string()).as_deref(),
            Some("effort=high budget_tokens=31999 thinking=on")
        );
    }

    /// A request that is not what the Messages API reads is refused naming the
    /// path of the value at fault and what is wrong with it.
    #[test]
    fn a_bad_request_is_refused_naming_the_path() {
        let user = |content: Value| json!({"model": "m", "messages": [{"role": "user", "content": content}]});
        let cases = [
            (json!({"model": "m"}), "missing field `messages`"),
            (json!({"model": "m", "messages": []}), "`messages` is empty"),
            (
                user(json!([{"type": "image", "source": {}}])),
                "messages[0].content[0].type: unknown variant `image`, expected one of `text`, `tool_use`, `tool_result`, `thinking`, `redacted_thinking`",
            ),
            (user(json!(5)), "messages[0].content: expected a string or a list of content blocks"),
            (
                user(json!([{"type": "tool_use", "id": "t", "name": "f", "input": {}}])),
                "messages[0].content[0]: a block of type `tool_use` is not supported in a user or system message",
            ),
            (
                user(
                    json!([{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image"}]}]),
                ),
                "messages[0].content[0].content[0].type: unknown variant `image`, expected `text`",
            ),
            (
                json!({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "name": "f"}]}]}),
                "messages[0].content[0]: missing field `id`",
            ),
            (
                json!({"messages": [{"role": "tool", "content": "x"}]}),
                "messages[0].role: unknown variant `tool`, expected one of `user`, `assistant`, `system`",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "stream": "yes"}),
                "stream: invalid type: string \"yes\", expected a boolean",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "tool"}}),
                "tool_choice: missing field `name`",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "system": 5}),
                "system: expected a string or a list of content blocks",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "stop_sequences": [1]}),
                "stop_sequences: expected a string or a list of strings",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "bash_20250124", "name": "bash"}]}),
                "tools[0]: tool type `bash_20250124` is not supported (a custom tool with input_schema)",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "output_config": {"format": {"type": "json_schema"}}}),
                "output_config.format: missing field `schema`",
            ),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .filter_map(|(body, want)| {
                let got = read(body).err().map(|e| e.message);
                (got.as_deref() != Some(*want))
                    .then(|| format!("{body}\n  got  {got:?}\n  want {want}"))
            })
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn the_stream_rebuilds_the_message() {
        let r = ChatReply {
            text: "ok".into(),
            tool_calls: vec![ToolCall {
                id: "toolu_9".into(),
                name: "f".into(),
                arguments: "{\"a\":1}".into(),
            }],
            unparsed_tool_calls: vec![],
            finish_reason: Some("tool_calls".into()),
            usage: Tokens { input: 7, output: 3, cached: 0 },
            token_source: Default::default(),
            usage_note: None,
            fingerprint: None,
        };
        let sse = sse(&r, &META);
        let names: Vec<&str> = sse.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let data: Vec<Value> = sse
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        assert_eq!(data[0]["message"]["content"], json!([]));
        assert_eq!(data[5]["delta"]["partial_json"], "{\"a\":1}");
        assert_eq!(
            (data[7]["delta"]["stop_reason"].as_str(), data[7]["usage"]["output_tokens"].as_u64()),
            (Some("tool_use"), Some(3))
        );
        let full = reply(&r, &META);
        assert_eq!(full["content"][1]["input"], json!({"a": 1}));
    }
}
