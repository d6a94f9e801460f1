//! Chat format of the embedded model, apart from llama.cpp so that it builds
//! and is tested without it: messages to the (role, content) turns given to
//! the chat template in Qwen2.5's native tool format (`tools_section`,
//! `template_turns`), and tool calls read back out of generated text
//! (`parse_tool_calls`, `parse_fenced_tool_calls`). `model::local` describes
//! the format in full.

use super::py_json;
use super::{Message, Role, ToolCall, ToolSpec};
use serde_json::Value;
use std::fmt::Write as _;

const TOOLS_HEAD: &str = "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>";
const TOOLS_TAIL: &str = "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";

/// The tools section Qwen2.5's template appends to the system message: each
/// tool as `{"type": "function", "function": {...}}` in `json.dumps`'s layout.
pub(crate) fn tools_section(tools: &[ToolSpec]) -> String {
    let mut s = String::from(TOOLS_HEAD);
    for t in tools {
        s.push('\n');
        s.push_str(&py_json::compact(&t.as_function()));
    }
    s.push_str(TOOLS_TAIL);
    s
}

/// The (role, content) turns given to the chat template: the system turn with
/// the tools section, assistant tool calls as `<tool_call>` blocks, and each
/// run of tool results as one user turn of `<tool_response>` blocks.
pub(crate) fn template_turns(messages: &[Message], tools: &[ToolSpec]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut rest = messages;
    if !tools.is_empty() {
        let section = tools_section(tools);
        match messages.first() {
            Some(m) if m.role == Role::System => {
                out.push(("system".into(), format!("{}{section}", m.content)));
                rest = &messages[1..];
            }
            _ => out.push(("system".into(), section.trim_start().to_string())),
        }
    }
    let mut in_tool_run = false;
    for m in rest {
        if m.role == Role::Tool {
            let block = format!("<tool_response>\n{}\n</tool_response>", m.content);
            match out.last_mut() {
                Some((_, content)) if in_tool_run => {
                    content.push('\n');
                    content.push_str(&block);
                }
                _ => out.push(("user".into(), block)),
            }
            in_tool_run = true;
            continue;
        }
        in_tool_run = false;
        let turn = match m.role {
            Role::System => ("system", m.content.clone()),
            Role::User => ("user", m.content.clone()),
            Role::Assistant => ("assistant", assistant_content(m)),
            Role::Tool => unreachable!(),
        };
        out.push((turn.0.into(), turn.1));
    }
    out
}

fn assistant_content(m: &Message) -> String {
    let mut s = m.content.clone();
    for c in &m.tool_calls {
        if !s.is_empty() {
            s.push('\n');
        }
        let args = c.arguments.trim();
        let args =
            py_json::loads_object(args).map_or_else(|| args.to_string(), |v| py_json::compact(&v));
        let _ = write!(
            s,
            "<tool_call>\n{{\"name\": \"{}\", \"arguments\": {args}}}\n</tool_call>",
            c.name
        );
    }
    s
}

// ---------------------------------------------------------------------------
// Reply: tool calls out of the generated text

const CALL_OPEN: &str = "<tool_call>";
const CALL_CLOSE: &str = "</tool_call>";

/// Split generated text into (text outside the blocks, trimmed; tool calls;
/// unreadable blocks, raw). A block left open at the end is read to the end.
pub fn parse_tool_calls(raw: &str) -> (String, Vec<ToolCall>, Vec<String>) {
    let mut text = String::new();
    let mut calls: Vec<ToolCall> = Vec::new();
    let mut unparsed = Vec::new();
    let mut rest = raw;
    while let Some(i) = rest.find(CALL_OPEN) {
        text.push_str(&rest[..i]);
        let after = &rest[i + CALL_OPEN.len()..];
        let (inner, next) = match after.find(CALL_CLOSE) {
            Some(j) => (&after[..j], &after[j + CALL_CLOSE.len()..]),
            None => (after, ""),
        };
        match parse_call(inner) {
            Some((name, arguments)) => {
                calls.push(ToolCall { id: format!("call_{}", calls.len()), name, arguments })
            }
            None => unparsed.push(inner.to_string()),
        }
        rest = next;
    }
    text.push_str(rest);
    (text.trim().to_string(), calls, unparsed)
}

/// Tool calls written as a JSON object `{"name": <offered tool>, "arguments": ...}`
/// that is the whole reply or the body of a code fence (no language, or
/// `json`). Returns the text without those fences, and the calls.
pub fn parse_fenced_tool_calls(text: &str, tools: &[ToolSpec]) -> (String, Vec<ToolCall>) {
    let as_call = |body: &str| -> Option<(String, String)> {
        let v: Value = serde_json::from_str(body.trim()).ok()?;
        let has_args = v.get("arguments").or_else(|| v.get("parameters")).is_some();
        let (name, args) = parse_call(body)?;
        (has_args && tools.iter().any(|t| t.name == name)).then_some((name, args))
    };
    let call = |n: usize, (name, arguments): (String, String)| ToolCall {
        id: format!("call_{n}"),
        name,
        arguments,
    };
    if let Some(c) = as_call(text) {
        return (String::new(), vec![call(0, c)]);
    }
    let mut out = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("```") {
        let after = &rest[i + 3..];
        let Some(nl) = after.find('\n') else { break };
        let info = after[..nl].trim();
        let Some(j) = after[nl + 1..].find("```") else { break };
        let body = &after[nl + 1..nl + 1 + j];
        let end = i + 3 + nl + 1 + j + 3;
        match as_call(body).filter(|_| info.is_empty() || info.eq_ignore_ascii_case("json")) {
            Some(c) => {
                out.push_str(&rest[..i]);
                calls.push(call(calls.len(), c));
            }
            None => out.push_str(&rest[..end]),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    (out.trim().to_string(), calls)
}

/// (name, arguments JSON text) of one block, or None when it is not a JSON
/// object with a non-empty string `name`. `arguments` (or `parameters`) is
/// kept as generated; a string holding JSON is unwrapped; absent means `{}`.
fn parse_call(inner: &str) -> Option<(String, String)> {
    let t = inner.trim();
    let v: Value = serde_json::from_str(t).ok()?;
    let obj = v.as_object()?;
    let name = obj.get("name")?.as_str()?.trim();
    if name.is_empty() {
        return None;
    }
    let key = ["arguments", "parameters"].into_iter().find(|k| obj.contains_key(*k));
    let arguments = match key {
        None => "{}".to_string(),
        Some(key) => match &obj[key] {
            Value::String(s) => s.clone(),
            other => raw_member(t, key).map(str::to_string).unwrap_or_else(|| other.to_string()),
        },
    };
    Some((name.to_string(), arguments))
}

/// The raw text of member `key` of the JSON object `t` (already validated);
/// the last one when repeated, as serde_json keeps.
fn raw_member<'t>(t: &'t str, key: &str) -> Option<&'t str> {
    // A map keeps the last of repeated keys, as serde_json's Value does.
    let members: std::collections::HashMap<String, &'t serde_json::value::RawValue> =
        serde_json::from_str(t).ok()?;
    members.get(key).map(|v| v.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec_tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }]
    }

    #[test]
    fn parses_calls_and_keeps_text_and_bad_blocks() {
        let raw = "I will look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.py\", \"n\": 2}}\n</tool_call>\n\
                   <tool_call>\n{\"name\": \"x\", \"arguments\": {oops}\n</tool_call>\n\
                   <tool_call>{\"arguments\": {}}</tool_call>\n\
                   <tool_call>{\"name\": \"run_tests\", \"arguments\": \"{\\\"k\\\": 1}\"}</tool_call> done";
        let (text, calls, bad) = parse_tool_calls(raw);
        assert_eq!(text, "I will look.\n\n\n\n done");
        assert_eq!(calls.len(), 2);
        assert_eq!(
            calls[0],
            ToolCall {
                id: "call_0".into(),
                name: "read_file".into(),
                arguments: "{\"path\": \"a.py\", \"n\": 2}".into()
            }
        );
        assert_eq!(
            calls[1],
            ToolCall {
                id: "call_1".into(),
                name: "run_tests".into(),
                arguments: "{\"k\": 1}".into()
            }
        );
        assert_eq!(
            bad,
            vec![
                "\n{\"name\": \"x\", \"arguments\": {oops}\n".to_string(),
                "{\"arguments\": {}}".to_string()
            ]
        );
    }

    #[test]
    fn parses_open_block_at_end_and_missing_arguments() {
        let (text, calls, bad) = parse_tool_calls("<tool_call>\n{\"name\": \"finish\"}\n");
        assert_eq!(text, "");
        assert_eq!(
            calls,
            vec![ToolCall { id: "call_0".into(), name: "finish".into(), arguments: "{}".into() }]
        );
        assert!(bad.is_empty());
        let (_, calls, bad) = parse_tool_calls("<tool_call>\n{\"name\": \"finish\", \"argu");
        assert!(calls.is_empty());
        assert_eq!(bad.len(), 1);
        let (text, calls, bad) = parse_tool_calls("  plain answer  ");
        assert_eq!((text.as_str(), calls.len(), bad.len()), ("plain answer", 0, 0));
    }

    #[test]
    fn raw_member_keeps_order_spacing_and_nesting() {
        let t = r#"{"name": "w", "arguments": {"z": "a,}\"b", "a": [1, {"k": []}]}, "x": 1}"#;
        assert_eq!(raw_member(t, "arguments"), Some(r#"{"z": "a,}\"b", "a": [1, {"k": []}]}"#));
        assert_eq!(raw_member(t, "x"), Some("1"));
        assert_eq!(raw_member(t, "nope"), None);
        // Repeated keys: the last, as serde_json's Value (and Python's json) keep.
        assert_eq!(
            raw_member(r#"{"arguments": {"a": 1}, "arguments": {"b":2}}"#, "arguments"),
            Some(r#"{"b":2}"#)
        );
    }

    #[test]
    fn turns_follow_qwen25_tool_format() {
        let call = ToolCall {
            id: "call_0".into(),
            name: "read_file".into(),
            arguments: "{\"path\":\"a.py\"}".into(),
        };
        let call2 = ToolCall {
            id: "call_1".into(),
            name: "read_file".into(),
            arguments: "{\"path\": \"b.py\"}".into(),
        };
        let messages = vec![
            Message::system("Be brief."),
            Message::user("Fix it."),
            Message::assistant("", vec![call.clone(), call2.clone()]),
            Message::tool(&call, "print(1)"),
            Message::tool(&call2, "print(2)"),
            Message::assistant("Done.", vec![]),
            Message::user("Again."),
            Message::assistant("Sure.", vec![call.clone()]),
        ];
        let turns = template_turns(&messages, &spec_tools());
        let roles: Vec<&str> = turns.iter().map(|t| t.0.as_str()).collect();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
        );
        assert_eq!(
            turns[0].1,
            "Be brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
             You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n\
             {\"type\": \"function\", \"function\": {\"name\": \"read_file\", \"description\": \"Read a file.\", \
             \"parameters\": {\"properties\": {\"path\": {\"type\": \"string\"}}, \"required\": [\"path\"], \"type\": \"object\"}}}\n\
             </tools>\n\nFor each function call, return a json object with function name and arguments within \
             <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"
        );
        assert_eq!(
            turns[2].1,
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.py\"}}\n</tool_call>\n\
             <tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"b.py\"}}\n</tool_call>"
        );
        assert_eq!(
            turns[3].1,
            "<tool_response>\nprint(1)\n</tool_response>\n<tool_response>\nprint(2)\n</tool_response>"
        );
        assert_eq!(
            turns[6].1,
            "Sure.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.py\"}}\n</tool_call>"
        );
        // No tools: messages pass through; no system turn is invented.
        let plain = template_turns(&[Message::user("hi")], &[]);
        assert_eq!(plain, vec![("user".to_string(), "hi".to_string())]);
        // Tools without a system message: the section alone.
        let t = template_turns(&[Message::user("hi")], &spec_tools());
        assert!(t[0].1.starts_with("# Tools\n\n"));
    }

    #[test]
    fn a_generated_call_renders_back_as_generated() {
        let generated = "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/x.py\", \"lines\": [1, 2]}}\n</tool_call>";
        let (text, calls, _) = parse_tool_calls(generated);
        let back = assistant_content(&Message::assistant(text, calls));
        assert_eq!(back, generated);
    }

    #[test]
    fn fenced_calls_need_an_offered_tool_and_arguments() {
        let tools = spec_tools();
        let raw = "Reading it.\n```json\n{\n  \"name\": \"read_file\",\n  \"arguments\": {\n    \"path\": \"calc.py\"\n  }\n}\n```\nthen\n```python\nprint(1)\n```\n```json\n{\"name\": \"other\", \"arguments\": {}}\n```";
        let (text, calls) = parse_fenced_tool_calls(raw, &tools);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "read_file");
        assert_eq!(calls[0].arguments, "{\n    \"path\": \"calc.py\"\n  }");
        assert_eq!(
            text,
            "Reading it.\n\nthen\n```python\nprint(1)\n```\n```json\n{\"name\": \"other\", \"arguments\": {}}\n```"
        );
        let (text, calls) = parse_fenced_tool_calls(
            " {\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}} ",
            &tools,
        );
        assert_eq!((text.as_str(), calls.len()), ("", 1));
        let (_, calls) = parse_fenced_tool_calls("```json\n{\"name\": \"read_file\"}\n```", &tools);
        assert!(calls.is_empty());
        let (text, calls) = parse_fenced_tool_calls("unterminated ```json\n{", &tools);
        assert_eq!((text.as_str(), calls.len()), ("unterminated ```json\n{", 0));
    }
}
