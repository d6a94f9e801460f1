//! Google's Gemini API (`POST /v1beta/models/{model}:generateContent`,
//! `:streamGenerateContent?alt=sse`, `:countTokens`), read into the gateway's
//! one provider-neutral call and written back from one `ChatReply`: the
//! `GenerateContentResponse`, and its stream of server-sent events (emulated
//! from the complete reply). Gemini CLI speaks it (`GOOGLE_GEMINI_BASE_URL`).

use super::wire::{self, Asked, BadRequest, ReplyMeta, Stop};
use crate::model::{
    ChatReply, Message, Reasoning, ResponseFormat, Role, ToolCall, ToolChoice, ToolSpec,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// Keys read; any other is recorded as not delivered.
const KNOWN: [&str; 5] =
    ["contents", "systemInstruction", "tools", "toolConfig", "generationConfig"];

/// `generationConfig` keys read; any other is recorded as not delivered (`generationConfig.<key>`).
const CONFIG_KNOWN: [&str; 8] = [
    "temperature",
    "topP",
    "maxOutputTokens",
    "stopSequences",
    "seed",
    "responseMimeType",
    "responseJsonSchema",
    "thinkingConfig",
];

/// What a path under `/v1beta/models/` asks: the model and the method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    Generate,
    Stream,
    CountTokens,
}

/// `/v1beta/models/{model}:{method}` (or `/v1/...`) -> (model, method); None: not such a path.
pub fn route(path: &str) -> Option<(String, Method)> {
    let rest = path.strip_prefix("/v1beta/models/").or_else(|| path.strip_prefix("/v1/models/"))?;
    let (model, method) = rest.rsplit_once(':')?;
    let method = match method {
        "generateContent" => Method::Generate,
        "streamGenerateContent" => Method::Stream,
        "countTokens" => Method::CountTokens,
        _ => return None,
    };
    Some((model.to_string(), method))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    #[serde(default)]
    contents: Vec<Content>,
    system_instruction: Option<Content>,
    tools: Option<Vec<Tool>>,
    tool_config: Option<ToolConfig>,
    generation_config: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
struct Content {
    role: Option<String>,
    #[serde(default)]
    parts: Vec<Value>,
}

/// A part: one of these keys (text, a call, a call's response, a thought).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Part {
    text: Option<String>,
    function_call: Option<FunctionCall>,
    function_response: Option<FunctionResponse>,
    #[serde(default)]
    thought: bool,
}

#[derive(Deserialize)]
struct FunctionCall {
    id: Option<String>,
    name: String,
    #[serde(default)]
    args: Value,
}

#[derive(Deserialize)]
struct FunctionResponse {
    id: Option<String>,
    name: String,
    #[serde(default)]
    response: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Tool {
    #[serde(default)]
    function_declarations: Vec<Declaration>,
    #[serde(flatten)]
    other: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Declaration {
    name: String,
    #[serde(default)]
    description: String,
    parameters: Option<Value>,
    parameters_json_schema: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfig {
    function_calling_config: Option<CallingConfig>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallingConfig {
    mode: Option<String>,
    #[serde(default)]
    allowed_function_names: Vec<String>,
}

/// Read a request for `model` (from the path).
pub fn read(body: &Value, model: &str) -> Result<Asked, BadRequest> {
    let obj = body.as_object().ok_or("the request body is not a JSON object")?;
    let req: Request = wire::from_json(body, "")?;
    if req.contents.is_empty() {
        return Err(BadRequest::naming("contents", "`contents` is empty"));
    }
    let mut messages = Vec::new();
    if let Some(s) = req.system_instruction {
        messages.push(Message::system(texts(&s.parts, "systemInstruction.parts")?));
    }
    for (i, c) in req.contents.iter().enumerate() {
        read_content(c, &format!("contents[{i}]"), &mut messages)?;
    }
    wire::link_tool_results(&mut messages);
    let mut asked = Asked::new(messages, tools(req.tools)?, Some(json!(model)));
    asked.tool_choice = tool_choice(req.tool_config)?;
    let mut ignored: Vec<String> = wire::unread(obj, &KNOWN).collect();
    if let Some(g) = req.generation_config {
        read_config(&g, &mut asked)?;
        let other = wire::unread(&g, &CONFIG_KNOWN);
        ignored.extend(other.map(|k| format!("generationConfig.{k}")));
    }
    asked.ignored = ignored;
    Ok(asked)
}

/// The text of `parts` (thoughts left out); a part of another kind is refused.
fn texts(parts: &[Value], at: &str) -> Result<String, BadRequest> {
    let mut text = String::new();
    for (j, p) in parts.iter().enumerate() {
        let at = format!("{at}[{j}]");
        let p: Part = wire::from_json(p, &at)?;
        match p.text {
            Some(t) if !p.thought => text.push_str(&t),
            Some(_) => {}
            None => {
                return Err(BadRequest::at(at, "only text parts are supported here"));
            }
        }
    }
    Ok(text)
}

/// One turn: the user's text and function responses, or the model's text and calls.
fn read_content(c: &Content, at: &str, messages: &mut Vec<Message>) -> Result<(), BadRequest> {
    let model = match c.role.as_deref() {
        None | Some("user") => false,
        Some("model") => true,
        Some(other) => {
            return Err(BadRequest::at(
                format!("{at}.role"),
                format!("`{other}` is not user or model"),
            ));
        }
    };
    let mut turn = Message {
        role: if model { Role::Assistant } else { Role::User },
        content: String::new(),
        tool_calls: Vec::new(),
        tool_call_id: None,
        name: None,
    };
    for (j, p) in c.parts.iter().enumerate() {
        let pat = format!("{at}.parts[{j}]");
        let p: Part = wire::from_json(p, &pat)?;
        match (p.text, p.function_call, p.function_response) {
            (Some(_), _, _) if p.thought => {}
            (Some(t), None, None) => turn.content.push_str(&t),
            (None, Some(f), None) if model => turn.tool_calls.push(ToolCall {
                id: f.id.unwrap_or_else(|| format!("call_{}_{j}", messages.len())),
                name: f.name,
                arguments: f.args.to_string(),
            }),
            (None, None, Some(r)) if !model => {
                let content = match &r.response {
                    Value::Object(o) if o.len() == 1 && o.values().all(Value::is_string) => {
                        o.values().next().and_then(Value::as_str).unwrap_or("").to_string()
                    }
                    other => other.to_string(),
                };
                messages.push(Message {
                    role: Role::Tool,
                    content,
                    tool_calls: Vec::new(),
                    tool_call_id: r.id,
                    name: Some(r.name),
                });
            }
            _ => {
                let what =
                    "a text, or a functionCall (model) or functionResponse (user), one a part";
                return Err(BadRequest::at(
                    pat,
                    format!("not supported: the gateway forwards {what}"),
                ));
            }
        }
    }
    if !turn.content.is_empty() || !turn.tool_calls.is_empty() {
        messages.push(turn);
    }
    Ok(())
}

/// The function declarations; any other tool (Google Search, code execution) is refused by name.
fn tools(tools: Option<Vec<Tool>>) -> Result<Vec<ToolSpec>, BadRequest> {
    let mut out = Vec::new();
    for (i, t) in tools.unwrap_or_default().into_iter().enumerate() {
        if let Some(k) = t.other.keys().next() {
            return Err(BadRequest::at(
                format!("tools[{i}].{k}"),
                "not supported: the gateway offers functionDeclarations only",
            ));
        }
        for d in t.function_declarations {
            let parameters = d.parameters_json_schema.or(d.parameters);
            out.push(ToolSpec {
                name: d.name,
                description: d.description,
                parameters: parameters
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            });
        }
    }
    Ok(out)
}

fn tool_choice(c: Option<ToolConfig>) -> Result<ToolChoice, BadRequest> {
    let Some(c) = c.and_then(|c| c.function_calling_config) else { return Ok(ToolChoice::Auto) };
    Ok(match (c.mode.as_deref(), c.allowed_function_names.as_slice()) {
        (None | Some("AUTO") | Some("MODE_UNSPECIFIED"), _) => ToolChoice::Auto,
        (Some("NONE"), _) => ToolChoice::None,
        (Some("ANY"), [one]) => ToolChoice::Named(one.clone()),
        (Some("ANY"), []) => ToolChoice::Required,
        (Some("ANY"), _) => {
            return Err(BadRequest::at(
                "toolConfig.functionCallingConfig.allowedFunctionNames",
                "more than one is not supported (none, or one)",
            ));
        }
        (Some(other), _) => {
            return Err(BadRequest::at(
                "toolConfig.functionCallingConfig.mode",
                format!("`{other}` is not supported (AUTO, ANY, NONE)"),
            ));
        }
    })
}

/// `generationConfig`: the sampling values (fixed by the experiment), the output cap, stop
/// sequences, a JSON reply, and the thinking budget or level.
fn read_config(g: &Map<String, Value>, asked: &mut Asked) -> Result<(), BadRequest> {
    let get = |k: &str| g.get(k).filter(|v| !v.is_null()).cloned();
    asked.temperature = get("temperature");
    asked.top_p = get("topP");
    asked.seed = get("seed");
    asked.max_tokens = get("maxOutputTokens").map(|v| ("maxOutputTokens", v));
    let stop: Option<Stop> =
        wire::from_json(&json!(g.get("stopSequences")), "generationConfig.stopSequences")?;
    asked.stop = Stop::list(stop);
    asked.response_format = match (get("responseMimeType"), get("responseJsonSchema")) {
        (_, Some(schema)) => {
            Some(ResponseFormat::JsonSchema { name: "response".into(), schema, strict: true })
        }
        (Some(m), None) if m == "application/json" => Some(ResponseFormat::JsonObject),
        _ => None,
    };
    if let Some(t) = get("thinkingConfig") {
        let budget = t.get("thinkingBudget").and_then(Value::as_i64);
        asked.reasoning = Reasoning {
            effort: t.get("thinkingLevel").and_then(Value::as_str).map(str::to_lowercase),
            budget_tokens: budget.filter(|b| *b > 0).map(|b| b as u64),
            enabled: budget.map(|b| b != 0),
        }
        .some();
    }
    Ok(())
}

fn finish(reply: &ChatReply) -> &'static str {
    match reply.finish_reason.as_deref() {
        Some("length") => "MAX_TOKENS",
        _ => "STOP",
    }
}

/// The `GenerateContentResponse`.
pub fn reply(reply: &ChatReply, meta: &ReplyMeta) -> Value {
    let mut parts = Vec::new();
    if !reply.text.is_empty() || reply.tool_calls.is_empty() {
        parts.push(json!({"text": reply.text}));
    }
    for c in &reply.tool_calls {
        let args: Value = serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({}));
        parts.push(json!({"functionCall": {"id": c.id, "name": c.name, "args": args}}));
    }
    let u = reply.usage;
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish(reply), "index": 0}],
        "usageMetadata": {"promptTokenCount": u.input, "candidatesTokenCount": u.output,
            "totalTokenCount": u.total(), "cachedContentTokenCount": u.cached},
        "modelVersion": meta.model,
        "responseId": meta.id,
    })
}

/// The stream (`alt=sse`): the whole reply as one event, as a short reply comes.
pub fn sse(r: &ChatReply, meta: &ReplyMeta) -> String {
    format!("data: {}\r\n\r\n", reply(r, meta))
}

/// `countTokens`: an upper bound (the request's bytes), as for Anthropic's (`anthropic::count_tokens`).
pub(crate) fn count_tokens(body: &Value, model: &str) -> Result<Value, BadRequest> {
    // countTokens wraps the request in `generateContentRequest`, or sends `contents` alone.
    let inner = body.get("generateContentRequest").unwrap_or(body);
    Ok(json!({"totalTokens": read(inner, model)?.prompt_bound()}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Tokens;

    #[test]
    fn paths_name_the_model_and_the_method() {
        assert_eq!(
            route("/v1beta/models/gemini-2.5-pro:streamGenerateContent"),
            Some(("gemini-2.5-pro".into(), Method::Stream))
        );
        assert_eq!(route("/v1/models/m:countTokens"), Some(("m".into(), Method::CountTokens)));
        assert_eq!(route("/v1beta/models/m:embedContent"), None);
        assert_eq!(route("/v1/models/m"), None);
    }

    #[test]
    fn a_conversation_with_a_call_and_its_response_reads_as_one() {
        // The shape Gemini CLI sends (google-genai's camelCase JSON).
        let body = json!({
            "systemInstruction": {"role": "user", "parts": [{"text": "be brief"}]},
            "contents": [
                {"role": "user", "parts": [{"text": "fix add.py"}]},
                {"role": "model", "parts": [{"text": "reading", "thought": true}, {"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"output": "add.py"}}}]}],
            "tools": [{"functionDeclarations": [{"name": "run_shell_command", "description": "run", "parametersJsonSchema": {"type": "object"}}]}],
            "generationConfig": {"temperature": 0, "topP": 1, "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 8192}, "topK": 64},
            "safetySettings": []});
        let a = read(&body, "gemini-2.5-pro").unwrap();
        let roles: Vec<Role> = a.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::System, Role::User, Role::Assistant, Role::Tool]);
        assert_eq!(a.messages[2].tool_calls[0].arguments, "{\"command\":\"ls\"}");
        // The response points to the call it answers, by the id made for it.
        assert_eq!(
            a.messages[3].tool_call_id.as_deref(),
            Some(a.messages[2].tool_calls[0].id.as_str())
        );
        assert_eq!(a.messages[3].content, "add.py");
        assert_eq!(a.tools[0].name, "run_shell_command");
        assert_eq!(
            a.reasoning.map(|r| r.to_string()).as_deref(),
            Some("budget_tokens=8192 thinking=on")
        );
        assert_eq!(a.ignored, ["safetySettings", "generationConfig.topK"]);
        assert_eq!(a.model, Some(json!("gemini-2.5-pro")));
    }

    #[test]
    fn what_cannot_be_forwarded_is_refused_by_name() {
        for (body, message) in [
            (json!({"contents": []}), "`contents` is empty"),
            (
                json!({"contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": ""}}]}]}),
                "contents[0].parts[0]: not supported: the gateway forwards a text, or a functionCall (model) or functionResponse (user), one a part",
            ),
            (
                json!({"contents": [{"parts": [{"text": "x"}]}], "tools": [{"googleSearch": {}}]}),
                "tools[0].googleSearch: not supported: the gateway offers functionDeclarations only",
            ),
            (
                json!({"contents": [{"role": "tool", "parts": [{"text": "x"}]}]}),
                "contents[0].role: `tool` is not user or model",
            ),
        ] {
            assert_eq!(
                read(&body, "m").err().map(|e| e.message).as_deref(),
                Some(message),
                "{body}"
            );
        }
    }

    #[test]
    fn the_reply_carries_text_calls_and_usage() {
        let r = ChatReply {
            text: "ok".into(),
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
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
        let meta =
            ReplyMeta { id: "r-1", model: "m", created: 5, created_at: "2025-01-01T00:00:00Z" };
        let v = reply(&r, &meta);
        assert_eq!(v["candidates"][0]["content"]["parts"][1]["functionCall"]["args"]["a"], 1);
        assert_eq!(v["usageMetadata"]["totalTokenCount"], 10);
        assert_eq!(v["candidates"][0]["finishReason"], "STOP");
        let s = sse(&r, &meta);
        assert!(s.starts_with("data: {") && s.ends_with("\r\n\r\n"), "{s}");
    }
}
