//! Anthropic's Messages API (`POST /v1/messages`), read into the gateway's one
//! provider-neutral call and written back from one `ChatReply`: the message,
//! and its stream of server-sent events (emulated from the complete reply, in
//! the order Anthropic's SDK accumulates them).

use super::wire::{self, Asked, ReplyMeta};
use crate::model::{ChatReply, Message, ResponseFormat, Role, ToolCall, ToolChoice, ToolSpec};
use serde_json::{Value, json};

const KNOWN: [&str; 11] = [
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

/// Keys that ask for nothing this model is sent, not noted as dropped.
const QUIET: [&str; 2] = ["metadata", "anthropic_version"];

/// Read a Messages request.
pub fn read(body: &Value) -> Result<Asked, String> {
    let obj = body.as_object().ok_or("the request body is not a JSON object")?;
    let non_null = |k: &str| obj.get(k).filter(|v| !v.is_null());
    let mut messages = Vec::new();
    match non_null("system") {
        None => {}
        Some(Value::String(s)) => messages.push(Message::system(s)),
        Some(Value::Array(blocks)) => {
            let texts: Vec<&str> =
                blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect();
            messages.push(Message::system(texts.join("\n")));
        }
        Some(_) => return Err("`system` is not a string or a list of text blocks".into()),
    }
    let list = non_null("messages")
        .and_then(Value::as_array)
        .ok_or("`messages` is missing or not an array")?;
    if list.is_empty() {
        return Err("`messages` is empty".into());
    }
    for (i, m) in list.iter().enumerate() {
        read_message(m, &mut messages).map_err(|e| format!("messages[{i}]: {e}"))?;
    }
    let tools = wire::read_tools(non_null("tools"), read_tool)?;
    let mut asked = Asked::new(messages, tools, obj.get("model").cloned());
    asked.stream = wire::read_stream(non_null("stream"), false)?;
    asked.temperature = non_null("temperature").cloned();
    asked.top_p = non_null("top_p").cloned();
    asked.max_tokens = non_null("max_tokens").map(|v| ("max_tokens", v.clone()));
    asked.stop = wire::read_stop(non_null("stop_sequences"), "stop_sequences")?;
    asked.tool_choice = match non_null("tool_choice") {
        None => ToolChoice::Auto,
        Some(c) => match (c.get("type").and_then(Value::as_str), c.get("name").and_then(Value::as_str)) {
            (Some("auto"), _) => ToolChoice::Auto,
            (Some("any"), _) => ToolChoice::Required,
            (Some("none"), _) => ToolChoice::None,
            (Some("tool"), Some(n)) => ToolChoice::Named(n.to_string()),
            _ => return Err("`tool_choice` is not {\"type\": auto|any|none} or {\"type\": \"tool\", \"name\": ...}".into()),
        },
    };
    asked.response_format = match non_null("output_config")
        .and_then(|o| o.get("format"))
        .filter(|f| !f.is_null())
    {
        None => None,
        Some(f) if f.get("type").and_then(Value::as_str) == Some("json_schema") => {
            Some(ResponseFormat::JsonSchema {
                name: "response".into(),
                schema: f.get("schema").cloned().ok_or("`output_config.format` has no schema")?,
                strict: true,
            })
        }
        Some(_) => return Err("`output_config.format` must have type json_schema".into()),
    };
    asked.ignored = obj
        .keys()
        .filter(|k| !KNOWN.contains(&k.as_str()) && !QUIET.contains(&k.as_str()))
        .cloned()
        .collect();
    Ok(asked)
}

fn read_tool(t: &Value) -> Result<ToolSpec, String> {
    match t.get("type").and_then(Value::as_str) {
        None | Some("custom") => {}
        Some(other) => {
            return Err(format!(
                "tool type `{other}` is not supported (a custom tool with input_schema)"
            ));
        }
    }
    let name = t.get("name").and_then(Value::as_str).ok_or("no `name`")?;
    Ok(ToolSpec {
        name: name.to_string(),
        description: t.get("description").and_then(Value::as_str).unwrap_or("").to_string(),
        parameters: t
            .get("input_schema")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

/// Text of a tool result's content: a string or a list of text blocks.
fn result_text(v: Option<&Value>) -> Result<String, String> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(blocks)) => {
            let mut parts = Vec::new();
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        parts.push(b.get("text").and_then(Value::as_str).unwrap_or("").to_string())
                    }
                    other => {
                        return Err(format!(
                            "tool_result content of type `{}` is not supported: the gateway forwards text",
                            other.unwrap_or("?")
                        ));
                    }
                }
            }
            Ok(parts.join("\n"))
        }
        Some(_) => Err("tool_result `content` is not a string or a list of blocks".into()),
    }
}

/// One message: its tool results become tool messages (first, in order), its
/// text one user or assistant message, its tool uses the assistant's calls.
fn read_message(m: &Value, messages: &mut Vec<Message>) -> Result<(), String> {
    let role = match m.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("system") => Role::System,
        Some(other) => return Err(format!("role `{other}` is not supported (user, assistant)")),
        None => return Err("`role` is missing".into()),
    };
    let blocks: Vec<Value> = match m.get("content") {
        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
        Some(Value::Array(a)) => a.clone(),
        _ => return Err("`content` is not a string or a list of blocks".into()),
    };
    let mut text: Vec<String> = Vec::new();
    let mut calls: Vec<ToolCall> = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                text.push(b.get("text").and_then(Value::as_str).unwrap_or("").to_string())
            }
            Some("tool_use") if role == Role::Assistant => {
                let id = b
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or(format!("content[{i}]: tool_use without `id`"))?;
                let name = b
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or(format!("content[{i}]: tool_use without `name`"))?;
                let input = b.get("input").cloned().unwrap_or(json!({}));
                calls.push(ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments: input.to_string(),
                });
            }
            Some("tool_result") if role == Role::User => {
                let id = b
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .ok_or(format!("content[{i}]: tool_result without `tool_use_id`"))?;
                let mut content =
                    result_text(b.get("content")).map_err(|e| format!("content[{i}]: {e}"))?;
                if b.get("is_error").and_then(Value::as_bool) == Some(true) {
                    content = format!("Error: {content}");
                }
                let name = messages
                    .iter()
                    .rev()
                    .flat_map(|m| m.tool_calls.iter())
                    .find(|c| c.id == id)
                    .map(|c| c.name.clone());
                messages.push(Message {
                    role: Role::Tool,
                    content,
                    tool_calls: Vec::new(),
                    tool_call_id: Some(id.to_string()),
                    name,
                });
            }
            // Thinking an earlier reply returned carries nothing this model reads.
            Some("thinking" | "redacted_thinking") => {}
            other => {
                return Err(format!(
                    "content[{i}]: block of type `{}` is not supported here",
                    other.unwrap_or("?")
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
        assert_eq!(a.ignored, vec!["thinking".to_string()]);
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
