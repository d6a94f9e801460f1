//! OpenAI's Responses API (`POST /v1/responses`), read into the gateway's one
//! provider-neutral call and written back from one `ChatReply`: the response
//! object, and its stream of server-sent events (emulated from the complete
//! reply, in the order and with the fields OpenAI's SDKs read). Responses are
//! kept per trial for `previous_response_id` (the gateway's store).

use super::wire::{self, Asked, BadRequest, ReplyMeta};
use crate::model::{ChatReply, Message, Role, ToolCall, ToolSpec};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// Responses a trial keeps for `previous_response_id` (the oldest go first).
pub(crate) const STORED_RESPONSES: usize = 256;

/// Keys read; any other is noted as not forwarded.
const KNOWN: [&str; 15] = [
    "reasoning",
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stream",
    "previous_response_id",
    "store",
    "text",
    "parallel_tool_calls",
    "seed",
];

/// Echoed keys the gateway does nothing else with (`instructions` is read, `parallel_tool_calls`
/// recorded on its own).
const ECHO_ONLY: [&str; 3] = ["metadata", "truncation", "user"];

/// A key echoed back unchanged in the response object, with its default.
type Echoed = (&'static str, fn() -> Value);

/// Keys echoed back unchanged in the response object, with their defaults.
const ECHOED: [Echoed; 5] = [
    ("metadata", || json!({})),
    ("parallel_tool_calls", || json!(true)),
    ("truncation", || json!("disabled")),
    ("user", || Value::Null),
    ("instructions", || Value::Null),
];

/// The keys of a Responses request that are read typed (null is absent); the sampling values
/// are forwarded as they are, and the echoed keys echoed as they are.
#[derive(Deserialize)]
struct Request {
    instructions: Option<String>,
    input: Option<Input>,
    previous_response_id: Option<String>,
    stream: Option<bool>,
    store: Option<bool>,
}

/// `input`: a string, or a list of items read one by one (so that an item's own error, such as
/// a type not supported, is the one reported).
#[derive(Deserialize)]
#[serde(untagged, expecting = "expected a string or a list of items")]
enum Input {
    Text(String),
    Items(Vec<Value>),
}

/// An item's `type` (absent: a message), read before the item itself.
#[derive(Deserialize)]
struct ItemKind {
    #[serde(rename = "type")]
    kind: Option<String>,
}

#[derive(Deserialize)]
struct MessageItem {
    role: ItemRole,
    content: Option<Content>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ItemRole {
    System,
    Developer,
    User,
    Assistant,
}

/// A string, or a list of parts read one by one.
#[derive(Deserialize)]
#[serde(untagged, expecting = "expected a string or a list of content parts")]
enum Content {
    Text(String),
    Parts(Vec<Value>),
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct CallItem {
    call_id: String,
    name: String,
    arguments: Option<Value>,
    /// The namespace tool the called function belongs to (`flat_name`).
    namespace: Option<String>,
}

/// Tool types the provider runs itself (OpenAI's hosted tools): no model the
/// gateway forwards to runs them, so they are left out of what reaches it
/// (the delivery record shows them asked and not reached; docs/delivery.md).
pub(crate) const HOSTED_TOOLS: [&str; 9] = [
    "web_search",
    "web_search_preview",
    "web_search_preview_2025_03_11",
    "web_search_2025_08_26",
    "file_search",
    "code_interpreter",
    "image_generation",
    "computer_use_preview",
    "mcp",
];

/// A function inside a namespace tool, as the model is offered it: one flat
/// function whose name joins the two (OpenAI's function names allow `_`, not `.`).
pub(crate) fn flat_name(namespace: &str, name: &str) -> String {
    format!("{namespace}__{name}")
}

#[derive(Deserialize)]
struct OutputItem {
    call_id: String,
    output: Option<Value>,
}

/// Whether a request sets `instructions`: a stored conversation goes after them, and is kept
/// without them (they are not carried over to the next response).
pub(crate) fn has_instructions(body: &Value) -> bool {
    body.get("instructions").is_some_and(|v| !v.is_null())
}

/// Read a Responses request (the stored conversation of `previous_response_id` is the gateway's to add).
pub fn read(body: &Value) -> Result<Asked, BadRequest> {
    let obj = body.as_object().ok_or("the request body is not a JSON object")?;
    let non_null = |k: &str| obj.get(k).filter(|v| !v.is_null());
    let req: Request = wire::from_json(body, "")?;
    let mut messages = Vec::new();
    if let Some(text) = req.instructions {
        messages.push(Message::system(text));
    }
    match req.input {
        None if req.previous_response_id.is_none() => {
            return Err(BadRequest::naming("input", "`input` is missing"));
        }
        None => {}
        Some(Input::Text(s)) => messages.push(Message::user(s)),
        Some(Input::Items(items)) => {
            for (i, item) in items.iter().enumerate() {
                read_item(item, &format!("input[{i}]"), &mut messages)?;
            }
        }
    }
    let (tools, namespaced, omitted) = read_tools(non_null("tools"))?;
    let mut asked = Asked::new(messages, tools, obj.get("model").cloned());
    asked.namespaced = namespaced;
    asked.omitted_tools = omitted;
    asked.stream = req.stream.unwrap_or(false);
    asked.temperature = non_null("temperature").cloned();
    asked.top_p = non_null("top_p").cloned();
    asked.seed = non_null("seed").cloned();
    asked.max_tokens = non_null("max_output_tokens").map(|v| ("max_output_tokens", v.clone()));
    asked.tool_choice = wire::read_tool_choice(non_null("tool_choice"), "tool_choice")?;
    asked.response_format =
        wire::read_response_format(non_null("text").and_then(|t| t.get("format")), "text.format")?;
    let reasoning = non_null("reasoning");
    if let Some(r) = reasoning.filter(|r| !r.is_object()) {
        return Err(BadRequest::at("reasoning", format!("not an object: {r}")));
    }
    asked.reasoning =
        wire::read_effort(reasoning.and_then(|r| r.get("effort")), "reasoning.effort")?;
    let other = reasoning.and_then(Value::as_object).into_iter().flat_map(|o| o.keys());
    let mut other: Vec<String> =
        other.filter(|k| *k != "effort").map(|k| format!("reasoning.{k}")).collect();
    // `text` carries the format (read) and settings such as `verbosity` (not forwarded).
    let text_keys = non_null("text").and_then(Value::as_object).into_iter().flat_map(|o| o.keys());
    other.extend(text_keys.filter(|k| *k != "format").map(|k| format!("text.{k}")));
    asked.previous_response_id = req.previous_response_id;
    asked.store = req.store.unwrap_or(true);
    let mut echo = Map::new();
    for (k, default) in ECHOED {
        echo.insert(k.to_string(), non_null(k).cloned().unwrap_or_else(default));
    }
    echo.insert("tool_choice".into(), non_null("tool_choice").cloned().unwrap_or(json!("auto")));
    echo.insert("tools".into(), non_null("tools").cloned().unwrap_or(json!([])));
    echo.insert(
        "text".into(),
        non_null("text").cloned().unwrap_or(json!({"format": {"type": "text"}})),
    );
    echo.insert(
        "previous_response_id".into(),
        non_null("previous_response_id").cloned().unwrap_or(Value::Null),
    );
    echo.insert("store".into(), json!(asked.store));
    asked.echo = Value::Object(echo);
    asked.ignored = obj
        .keys()
        // Echoed keys are echoed, not forwarded: recorded as not delivered too.
        .filter(|k| !KNOWN.contains(&k.as_str()) || ECHO_ONLY.contains(&k.as_str()))
        .cloned()
        .chain(other)
        .collect();
    Ok(asked)
}

/// `tools`: the function tools, each function of a namespace tool as a flat
/// function (and its (flat name, namespace, name)), and the hosted tools left out.
type Tools = (Vec<ToolSpec>, Vec<(String, String, String)>, Vec<String>);

fn read_tools(v: Option<&Value>) -> Result<Tools, BadRequest> {
    let list = match v {
        None => return Ok(Default::default()),
        Some(Value::Array(ts)) => ts,
        Some(_) => return Err("`tools` is not an array".into()),
    };
    let (mut tools, mut namespaced, mut omitted) = (Vec::new(), Vec::new(), Vec::new());
    for (i, t) in list.iter().enumerate() {
        let at = format!("tools[{i}]");
        match t.get("type").and_then(Value::as_str) {
            Some(kind) if HOSTED_TOOLS.contains(&kind) => omitted.push(kind.to_string()),
            Some("namespace") => {
                let ns = t.get("name").and_then(Value::as_str);
                let ns = ns.ok_or_else(|| BadRequest::at(&at, "no `name`"))?;
                let inner = t.get("tools").and_then(Value::as_array);
                let inner = inner.ok_or_else(|| BadRequest::at(&at, "no `tools` list"))?;
                for (j, f) in inner.iter().enumerate() {
                    let mut spec = read_tool(f, &format!("{at}.tools[{j}]"))?;
                    let flat = flat_name(ns, &spec.name);
                    namespaced.push((
                        flat.clone(),
                        ns.to_string(),
                        std::mem::replace(&mut spec.name, flat),
                    ));
                    tools.push(spec);
                }
            }
            _ => tools.push(read_tool(t, &at)?),
        }
    }
    Ok((tools, namespaced, omitted))
}

/// The function tool at `at`: flat (`{"type": "function", "name", "parameters"}`), or nested as
/// in chat.
fn read_tool(t: &Value, at: &str) -> Result<ToolSpec, BadRequest> {
    if t.get("function").is_some() {
        return wire::read_tool(t, at);
    }
    match t.get("type").and_then(Value::as_str) {
        Some("function") => {}
        Some(other) => {
            return Err(BadRequest::at(
                at,
                format!("tool type `{other}` is not supported (function)"),
            ));
        }
        None => return Err(BadRequest::at(at, "no `type`")),
    }
    let name =
        t.get("name").and_then(Value::as_str).ok_or_else(|| BadRequest::at(at, "no `name`"))?;
    Ok(ToolSpec {
        name: name.to_string(),
        description: t.get("description").and_then(Value::as_str).unwrap_or("").to_string(),
        parameters: t
            .get("parameters")
            .filter(|p| !p.is_null())
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

/// Text of the content at `at`: a string or a list of text parts.
fn content_text(content: Option<Content>, at: &str) -> Result<String, BadRequest> {
    let parts = match content {
        None => return Ok(String::new()),
        Some(Content::Text(s)) => return Ok(s),
        Some(Content::Parts(parts)) => parts,
    };
    let mut text = String::new();
    for (j, p) in parts.iter().enumerate() {
        let p: Part = wire::from_json(p, &format!("{at}[{j}]"))?;
        match p.kind.as_str() {
            "input_text" | "output_text" | "text" => text.push_str(&p.text.unwrap_or_default()),
            "refusal" => text.push_str(&p.refusal.unwrap_or_default()),
            other => {
                return Err(BadRequest::at(
                    format!("{at}[{j}]"),
                    format!(
                        "content part of type `{other}` is not supported: the gateway forwards text"
                    ),
                ));
            }
        }
    }
    Ok(text)
}

/// The input item at `at`, appended to `messages`: a message, an earlier function call (merged
/// into the assistant message before it), or a call's output.
fn read_item(item: &Value, at: &str, messages: &mut Vec<Message>) -> Result<(), BadRequest> {
    if let Value::String(s) = item {
        messages.push(Message::user(s));
        return Ok(());
    }
    let ItemKind { kind } = wire::from_json(item, at)?;
    match kind.as_deref().unwrap_or("message") {
        "message" => {
            let m: MessageItem = wire::from_json(item, at)?;
            let role = match m.role {
                ItemRole::System | ItemRole::Developer => Role::System,
                ItemRole::User => Role::User,
                ItemRole::Assistant => Role::Assistant,
            };
            let content = content_text(m.content, &format!("{at}.content"))?;
            messages.push(Message {
                role,
                content,
                tool_calls: Vec::new(),
                tool_call_id: None,
                name: None,
            });
        }
        "function_call" => {
            let c: CallItem = wire::from_json(item, at)?;
            let name = match &c.namespace {
                Some(ns) => flat_name(ns, &c.name),
                None => c.name,
            };
            let arguments = match c.arguments {
                Some(Value::String(s)) => s,
                None => "{}".into(),
                Some(other) => other.to_string(),
            };
            let call = ToolCall { id: c.call_id, name, arguments };
            // Consecutive calls, and the assistant's text before them, are one assistant turn.
            match messages.last_mut() {
                Some(m) if m.role == Role::Assistant => m.tool_calls.push(call),
                _ => messages.push(Message {
                    role: Role::Assistant,
                    content: String::new(),
                    tool_calls: vec![call],
                    tool_call_id: None,
                    name: None,
                }),
            }
        }
        "function_call_output" => {
            let o: OutputItem = wire::from_json(item, at)?;
            let output = match o.output {
                Some(Value::String(s)) => s,
                Some(Value::Array(parts)) => {
                    content_text(Some(Content::Parts(parts)), &format!("{at}.output"))?
                }
                None => String::new(),
                Some(other) => other.to_string(),
            };
            wire::push_tool_result(messages, o.call_id, output);
        }
        // Reasoning an earlier response returned carries nothing this model reads.
        "reasoning" => {}
        other => {
            return Err(BadRequest::at(
                at,
                format!(
                    "item type `{other}` is not supported (message, function_call, function_call_output)"
                ),
            ));
        }
    }
    Ok(())
}

/// The ids of one response: its own, its message item's, and each call item's.
pub struct Ids {
    pub response: String,
    pub message: String,
}

impl Ids {
    pub fn of(operation_id: &str) -> Ids {
        let tail: String =
            operation_id.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        Ids { response: format!("resp_{tail}"), message: format!("msg_{tail}") }
    }

    fn call(&self, i: usize) -> String {
        format!("fc_{}_{i}", self.message.trim_start_matches("msg_"))
    }
}

fn incomplete(reply: &ChatReply) -> bool {
    reply.tool_calls.is_empty() && reply.finish_reason.as_deref() == Some("length")
}

fn usage(reply: &ChatReply) -> Value {
    let u = reply.usage;
    json!({
        "input_tokens": u.input, "input_tokens_details": {"cached_tokens": u.cached},
        "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.total(),
    })
}

fn message_item(ids: &Ids, status: &str, text: &str) -> Value {
    json!({"id": ids.message, "type": "message", "status": status, "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
}

/// A call item; a call of a namespace tool's function named as the harness named it.
fn call_item(
    asked: &Asked,
    ids: &Ids,
    i: usize,
    c: &ToolCall,
    status: &str,
    arguments: &str,
) -> Value {
    let mut item = json!({"id": ids.call(i), "type": "function_call", "status": status, "call_id": c.id, "name": c.name, "arguments": arguments});
    if let Some((_, ns, name)) = asked.namespaced.iter().find(|(flat, _, _)| *flat == c.name) {
        item["name"] = json!(name);
        item["namespace"] = json!(ns);
    }
    item
}

/// The output items: the message (when it has text, or there is no call), then one item per call.
fn output(asked: &Asked, reply: &ChatReply, ids: &Ids) -> Vec<Value> {
    let mut out = Vec::new();
    if !reply.text.is_empty() || reply.tool_calls.is_empty() {
        out.push(message_item(
            ids,
            if incomplete(reply) { "incomplete" } else { "completed" },
            &reply.text,
        ));
    }
    for (i, c) in reply.tool_calls.iter().enumerate() {
        let args = if c.arguments.trim().is_empty() { "{}" } else { &c.arguments };
        out.push(call_item(asked, ids, i, c, "completed", args));
    }
    out
}

/// The response object; `status` in_progress for the stream's first events.
fn object(
    asked: &Asked,
    meta: &ReplyMeta,
    ids: &Ids,
    status: &str,
    output: Vec<Value>,
    usage: Value,
    reply: Option<&ChatReply>,
) -> Value {
    let mut o = json!({
        "id": ids.response, "object": "response", "created_at": meta.created, "status": status,
        "background": false, "error": null, "incomplete_details": null,
        "max_output_tokens": asked.max_tokens.as_ref().map(|(_, v)| v.clone()), "model": meta.model,
        "output": output, "reasoning": {"effort": null, "summary": null}, "service_tier": "default",
        "temperature": asked.temperature.clone().unwrap_or(json!(1.0)), "top_p": asked.top_p.clone().unwrap_or(json!(1.0)),
        "usage": usage,
    });
    if let (Some(map), Value::Object(echo)) = (o.as_object_mut(), &asked.echo) {
        for (k, v) in echo {
            map.insert(k.clone(), v.clone());
        }
    }
    if let Some(r) = reply
        && incomplete(r)
    {
        o["status"] = json!("incomplete");
        o["incomplete_details"] = json!({"reason": "max_output_tokens"});
    }
    o
}

/// The non-streaming response.
pub fn reply(reply: &ChatReply, meta: &ReplyMeta, asked: &Asked, ids: &Ids) -> Value {
    object(asked, meta, ids, "completed", output(asked, reply, ids), usage(reply), Some(reply))
}

/// The same response as OpenAI streams it: `response.created`, the items
/// added, their text and arguments (each in one delta), done, then
/// `response.completed` (or `response.incomplete`) with the whole response.
pub fn sse(reply: &ChatReply, meta: &ReplyMeta, asked: &Asked, ids: &Ids) -> String {
    let mut events: Vec<Value> = Vec::new();
    let start = object(asked, meta, ids, "in_progress", Vec::new(), Value::Null, None);
    events.push(json!({"type": "response.created", "response": start}));
    events.push(json!({"type": "response.in_progress", "response": start}));
    let mut index = 0usize;
    if !reply.text.is_empty() || reply.tool_calls.is_empty() {
        let status = if incomplete(reply) { "incomplete" } else { "completed" };
        let mut added = message_item(ids, "in_progress", "");
        added["content"] = json!([]);
        events.push(
            json!({"type": "response.output_item.added", "output_index": index, "item": added}),
        );
        let part = |text: &str| json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
        let at = json!({"item_id": ids.message, "output_index": index, "content_index": 0});
        let with = |mut v: Value| {
            if let (Some(m), Some(a)) = (v.as_object_mut(), at.as_object()) {
                m.extend(a.clone());
            }
            v
        };
        events.push(with(json!({"type": "response.content_part.added", "part": part("")})));
        if !reply.text.is_empty() {
            events.push(with(
                json!({"type": "response.output_text.delta", "delta": reply.text, "logprobs": []}),
            ));
        }
        events.push(with(
            json!({"type": "response.output_text.done", "text": reply.text, "logprobs": []}),
        ));
        events.push(with(json!({"type": "response.content_part.done", "part": part(&reply.text)})));
        events.push(json!({"type": "response.output_item.done", "output_index": index, "item": message_item(ids, status, &reply.text)}));
        index += 1;
    }
    for (i, c) in reply.tool_calls.iter().enumerate() {
        let args = if c.arguments.trim().is_empty() { "{}" } else { &c.arguments };
        events.push(json!({"type": "response.output_item.added", "output_index": index, "item": call_item(asked, ids, i, c, "in_progress", "")}));
        events.push(json!({"type": "response.function_call_arguments.delta", "item_id": ids.call(i), "output_index": index, "delta": args}));
        events.push(json!({"type": "response.function_call_arguments.done", "item_id": ids.call(i), "output_index": index, "name": c.name, "arguments": args}));
        events.push(json!({"type": "response.output_item.done", "output_index": index, "item": call_item(asked, ids, i, c, "completed", args)}));
        index += 1;
    }
    let last = if incomplete(reply) { "response.incomplete" } else { "response.completed" };
    events.push(json!({"type": last, "response": object(asked, meta, ids, "completed", output(asked, reply, ids), usage(reply), Some(reply))}));
    let mut out = String::new();
    for (n, mut e) in events.into_iter().enumerate() {
        e["sequence_number"] = json!(n);
        let kind = e["type"].as_str().unwrap_or("").to_string();
        out.push_str(&format!("event: {kind}\ndata: {e}\n\n"));
    }
    out
}

/// The conversation a stored response continues from: what it was asked
/// (less its instructions, which are not carried over) and what it answered.
pub(crate) fn stored_conversation(
    asked_messages: &[Message],
    had_instructions: bool,
    reply: &ChatReply,
) -> Vec<Message> {
    let mut out: Vec<Message> =
        asked_messages.iter().skip(usize::from(had_instructions)).cloned().collect();
    out.push(Message::assistant(reply.text.clone(), reply.tool_calls.clone()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Tokens;

    const META: ReplyMeta =
        ReplyMeta { id: "c1", model: "m", created: 5, created_at: "2025-01-01T00:00:00Z" };

    fn reply(text: &str, calls: Vec<ToolCall>, finish: &str) -> ChatReply {
        ChatReply {
            text: text.into(),
            tool_calls: calls,
            unparsed_tool_calls: vec![],
            finish_reason: Some(finish.into()),
            usage: Tokens { input: 7, output: 3, cached: 0 },
            token_source: Default::default(),
            usage_note: None,
            fingerprint: None,
        }
    }

    #[test]
    fn input_items_become_one_conversation() {
        let body = json!({"model": "m", "instructions": "be brief", "input": [
            {"role": "user", "content": "add 2 and 3"},
            {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": "{\"a\":2,\"b\":3}", "id": "fc_1", "status": "completed"},
            {"type": "function_call_output", "call_id": "call_1", "output": "5"},
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "now say it"}]}],
            "tools": [{"type": "function", "name": "add", "parameters": {"type": "object"}, "strict": true}],
            "tool_choice": {"type": "function", "name": "add"}, "max_output_tokens": 50, "store": false, "reasoning": {"effort": "low"}});
        let a = read(&body).unwrap();
        let roles: Vec<Role> = a.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            vec![Role::System, Role::User, Role::Assistant, Role::Tool, Role::System]
        );
        assert_eq!(a.messages[2].tool_calls[0].arguments, "{\"a\":2,\"b\":3}");
        assert_eq!(
            (a.messages[3].tool_call_id.as_deref(), a.messages[3].name.as_deref()),
            (Some("call_1"), Some("add"))
        );
        assert_eq!(a.tools[0].name, "add");
        assert_eq!(a.tool_choice, crate::model::ToolChoice::Named("add".into()));
        assert_eq!(a.max_tokens, Some(("max_output_tokens", json!(50))));
        assert!(!a.store);
        // The effort is read into the common form (forwarded or recorded as not delivered).
        assert!(a.ignored.is_empty(), "{:?}", a.ignored);
        assert_eq!(a.reasoning.map(|r| r.to_string()).as_deref(), Some("effort=low"));
    }

    #[test]
    fn namespace_tools_are_offered_flat_and_called_back_by_their_own_names() {
        // Codex CLI's defaults (0.171.0): a namespace tool and a hosted web search.
        let body = json!({"input": [
                {"type": "function_call", "call_id": "c0", "name": "close_agent", "namespace": "multi_agent_v1", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c0", "output": "closed"}],
            "tools": [{"type": "function", "name": "exec_command"},
                {"type": "namespace", "name": "multi_agent_v1", "description": "sub-agents",
                 "tools": [{"type": "function", "name": "close_agent", "parameters": {"type": "object"}}]},
                {"type": "web_search", "external_web_access": true}]});
        let a = read(&body).unwrap();
        let names: Vec<&str> = a.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["exec_command", "multi_agent_v1__close_agent"]);
        assert_eq!(a.omitted_tools, ["web_search"]);
        // An earlier call the harness sends back is read under the name the model was offered.
        assert_eq!(a.messages[0].tool_calls[0].name, "multi_agent_v1__close_agent");
        let call = ToolCall {
            id: "c1".into(),
            name: "multi_agent_v1__close_agent".into(),
            arguments: "{}".into(),
        };
        let out = super::reply(&reply("", vec![call], "tool_calls"), &META, &a, &Ids::of("t-1-s1"));
        let item = &out["output"][0];
        assert_eq!(
            (item["name"].as_str(), item["namespace"].as_str()),
            (Some("close_agent"), Some("multi_agent_v1"))
        );
    }

    #[test]
    fn the_stream_rebuilds_the_response() {
        let r = reply(
            "hi",
            vec![ToolCall { id: "call_9".into(), name: "f".into(), arguments: "{\"a\":1}".into() }],
            "tool_calls",
        );
        let asked = read(&json!({"model": "m", "input": "x"})).unwrap();
        let ids = Ids::of("t-1-s1");
        let sse = sse(&r, &META, &asked, &ids);
        let events: Vec<Value> = sse
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed"
            ]
        );
        // Numbered from 0; the `event:` line names each.
        assert!(events.iter().enumerate().all(|(i, e)| e["sequence_number"] == json!(i)));
        assert_eq!(sse.lines().filter(|l| l.starts_with("event: ")).count(), events.len());
        let done = &events[12]["response"];
        assert_eq!(done["output"][0]["content"][0]["text"], "hi");
        assert_eq!(
            (done["output"][1]["call_id"].as_str(), done["output"][1]["arguments"].as_str()),
            (Some("call_9"), Some("{\"a\":1}"))
        );
        assert_eq!(done["usage"]["total_tokens"], 10);
        assert_eq!(events[0]["response"]["output"], json!([]));
        // Cut at the output cap: incomplete, as OpenAI ends such a stream.
        let cut = reply("par", vec![], "length");
        let sse = super::sse(&cut, &META, &asked, &ids);
        assert!(sse.contains("event: response.incomplete"), "{sse}");
        let full = super::reply(&cut, &META, &asked, &ids);
        assert_eq!(
            (full["status"].as_str(), full["incomplete_details"]["reason"].as_str()),
            (Some("incomplete"), Some("max_output_tokens"))
        );
    }

    #[test]
    fn a_part_with_null_fields_reads_as_its_text() {
        let body = json!({"input": [{"role": "assistant", "content":
            [{"type": "output_text", "text": "x", "refusal": null, "annotations": []}]}]});
        assert_eq!(read(&body).unwrap().messages[0].content, "x");
    }

    #[test]
    fn requests_it_cannot_forward_are_refused() {
        for (body, message) in [
            (json!({"model": "m"}), "`input` is missing"),
            (
                json!({"input": [{"type": "web_search_call"}]}),
                "input[0]: item type `web_search_call` is not supported (message, function_call, function_call_output)",
            ),
            (
                json!({"input": "x", "tools": [{"type": "custom", "name": "apply_patch"}]}),
                "tools[0]: tool type `custom` is not supported (function)",
            ),
            (
                json!({"input": "x", "tools": [{"type": "namespace", "name": "n", "tools": [{"type": "local_shell"}]}]}),
                "tools[0].tools[0]: tool type `local_shell` is not supported (function)",
            ),
            (
                json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}),
                "input[0].content[0]: content part of type `input_image` is not supported: the gateway forwards text",
            ),
            (json!({"input": 5}), "input: expected a string or a list of items"),
            (json!({"input": [{"content": "x"}]}), "input[0]: missing field `role`"),
            (
                json!({"input": [{"role": "tool", "content": "x"}]}),
                "input[0].role: unknown variant `tool`, expected one of `system`, `developer`, `user`, `assistant`",
            ),
            (
                json!({"input": ["a", {"type": "function_call", "name": "f"}]}),
                "input[1]: missing field `call_id`",
            ),
            (
                json!({"input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_file"}]}]}),
                "input[0].output[0]: content part of type `input_file` is not supported: the gateway forwards text",
            ),
            (
                json!({"input": "x", "instructions": ["a"]}),
                "instructions: invalid type: sequence, expected a string",
            ),
            (
                json!({"input": "x", "store": "yes"}),
                "store: invalid type: string \"yes\", expected a boolean",
            ),
        ] {
            assert_eq!(read(&body).err().map(|e| e.message).as_deref(), Some(message), "{body}");
        }
    }
}
