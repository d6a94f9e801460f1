//! A model's own chat template (the Jinja text a GGUF carries, or a file given
//! with `--local-template`), run with minijinja as Hugging Face transformers
//! runs it: `trim_blocks` and `lstrip_blocks`, loop controls, `tojson` as
//! Python's `json.dumps` (`", "` and `": "`, no HTML escaping, non-ASCII kept),
//! `raise_exception`, Python's string and dict methods (`.strip()`,
//! `.items()`, ...), and `bos_token` / `eos_token`. The golden tests hold it
//! to jinja2's rendering of the same conversations byte for byte
//! (`chat_templates/`, written by `scripts/chat-templates.py golden`).
//!
//! A template that reads `tools` is given the tools and the conversation in
//! the form such templates read (transformers, vLLM): an assistant's calls as
//! `tool_calls` of `{"type": "function", "function": {"name", "arguments"}}`,
//! the arguments a map in the key order the model wrote them when they are a
//! JSON object (else the text), results as `tool` messages. A template that
//! does not read `tools` (SmolLM2's) would drop them, so it is given plain
//! turns instead, with the tools in Qwen2.5's Hermes-style text
//! (`chat_format::template_turns`).
//!
//! Not provided: `strftime_now` (a prompt holding today's date would change
//! between the runs of one experiment); a template that calls it fails to
//! render, naming the function, and `--local-template` gives another.
//! JSON objects ablate holds itself (tool parameter schemas) have their keys
//! sorted; numbers are written as Python writes them (`1e-07`, `1e+16`).

use super::chat_format::template_turns;
use super::py_json;
use super::{FunctionTool, Message, ToolSpec};
use minijinja::value::{Kwargs, Serde, Value};
use minijinja::{Environment, Error, ErrorKind};
use serde::Serialize;

const NAME: &str = "chat_template";

/// A compiled chat template and the special tokens it is given.
pub struct ChatTemplate {
    env: Environment<'static>,
    takes_tools: bool,
    bos_token: String,
    eos_token: String,
}

impl ChatTemplate {
    /// Compile `source`; the error says where the template does not parse.
    pub fn new(
        source: &str,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<ChatTemplate, TemplateError> {
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(TemplateError)?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", |message: String| -> Result<Value, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        });
        env.add_template_owned(NAME, source.to_string()).map_err(TemplateError)?;
        let takes_tools = env
            .get_template(NAME)
            .map_err(TemplateError)?
            .undeclared_variables(false)
            .contains("tools");
        Ok(ChatTemplate {
            env,
            takes_tools,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        })
    }

    /// Whether the template reads `tools` (and so is given them).
    #[cfg(test)]
    fn takes_tools(&self) -> bool {
        self.takes_tools
    }

    /// The prompt for `messages` and `tools`, ending with the assistant's
    /// turn opened (`add_generation_prompt`).
    pub fn render(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<String, TemplateError> {
        let template = self.env.get_template(NAME).map_err(TemplateError)?;
        let (messages, tools): (Vec<TemplateMessage>, Vec<FunctionTool>) = if self.takes_tools {
            (
                messages.iter().map(TemplateMessage::of).collect(),
                tools.iter().map(ToolSpec::as_function).collect(),
            )
        } else {
            let turns = template_turns(messages, tools);
            (
                turns
                    .into_iter()
                    .map(|(role, content)| TemplateMessage::plain(role, content))
                    .collect(),
                vec![],
            )
        };
        let tools = if tools.is_empty() { Value::UNDEFINED } else { Value::from(Serde(tools)) };
        let ctx = minijinja::context! {
            messages => Value::from(Serde(messages)),
            tools => tools,
            add_generation_prompt => true,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
        };
        template.render(ctx).map_err(TemplateError)
    }
}

/// A chat template that does not parse or render: the message says where in the template and
/// why, with its cause.
#[derive(Debug, thiserror::Error)]
#[error("{}", describe(.0))]
pub struct TemplateError(Error);

/// The error and where in the template it is, with its cause.
fn describe(e: &Error) -> String {
    let mut s = match e.line() {
        Some(line) => {
            format!("{} (chat template line {line})", e.detail().unwrap_or(&e.kind().to_string()))
        }
        None => e.detail().map(str::to_string).unwrap_or_else(|| e.kind().to_string()),
    };
    if e.kind() == ErrorKind::UnknownFunction {
        s.push_str(
            "; ablate does not provide it (strftime_now: a prompt holding the date would change between runs); give another template with --local-template",
        );
    }
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        s.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    s
}

#[derive(Serialize)]
struct TemplateMessage {
    role: String,
    content: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<TemplateCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

#[derive(Serialize)]
struct TemplateCall {
    id: String,
    r#type: &'static str,
    function: TemplateFunctionCall,
}

#[derive(Serialize)]
struct TemplateFunctionCall {
    name: String,
    arguments: Value,
}

impl TemplateMessage {
    fn plain(role: String, content: String) -> TemplateMessage {
        TemplateMessage { role, content, tool_calls: vec![], tool_call_id: None, name: None }
    }

    fn of(m: &Message) -> TemplateMessage {
        let tool_calls = m
            .tool_calls
            .iter()
            .map(|c| TemplateCall {
                id: c.id.clone(),
                r#type: "function",
                function: TemplateFunctionCall {
                    name: c.name.clone(),
                    arguments: call_arguments(&c.arguments),
                },
            })
            .collect();
        TemplateMessage {
            role: m.role.as_str().into(),
            content: m.content.clone(),
            tool_calls,
            tool_call_id: m.tool_call_id.clone(),
            name: m.name.clone(),
        }
    }
}

/// A call's arguments as the template reads them: the JSON object as a map in
/// the order written, or the text itself when it is not a JSON object.
fn call_arguments(text: &str) -> Value {
    py_json::loads_object(text).unwrap_or_else(|| Value::from(text))
}

/// `tojson` as transformers defines it: `json.dumps(x, ensure_ascii=False,
/// indent=None, separators=None, sort_keys=False)`.
fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let (item, key) = match separators.as_deref() {
        Some([item, key]) => (item.clone(), key.clone()),
        Some(_) => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "tojson: separators must be (item, key)",
            ));
        }
        None if indent.is_some() => (",".into(), ": ".into()),
        None => (", ".into(), ": ".into()),
    };
    let text = if sort_keys.unwrap_or(false) {
        let sorted: serde_json::Value = serde_json::to_value(value).map_err(json_error)?;
        py_json::dumps(&sorted, &item, &key, indent)
    } else {
        py_json::dumps(value, &item, &key, indent)
    }
    .map_err(json_error)?;
    Ok(Value::from_safe_string(if ensure_ascii.unwrap_or(false) {
        py_json::ascii_escaped(&text)
    } else {
        text
    }))
}

fn json_error(e: serde_json::Error) -> Error {
    Error::new(ErrorKind::InvalidOperation, "tojson: cannot write the value as JSON").with_source(e)
}

/// The prompt an engine decodes: the chat template's rendering (which ends
/// with the generation prompt, the assistant's turn opened) and the prefill
/// the turn starts with, byte for byte.
#[cfg_attr(not(feature = "local"), allow(dead_code))]
pub(crate) fn with_prefill(rendered: String, prefill: Option<&str>) -> String {
    match prefill {
        Some(p) => rendered + p,
        None => rendered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, ToolCall};

    const TEMPLATES: [(&str, &str); 2] = [
        (
            "qwen2.5-coder-0.5b-instruct",
            include_str!("chat_templates/qwen2.5-coder-0.5b-instruct.jinja"),
        ),
        ("smollm2-135m-instruct", include_str!("chat_templates/smollm2-135m-instruct.jinja")),
    ];

    #[derive(serde::Deserialize)]
    struct Cases {
        cases: indexmap::IndexMap<String, Case>,
    }

    #[derive(serde::Deserialize)]
    struct Case {
        messages: Vec<CaseMessage>,
        tools: Vec<ToolSpec>,
    }

    #[derive(serde::Deserialize)]
    struct CaseMessage {
        role: String,
        content: String,
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
        tool_call_id: Option<String>,
        name: Option<String>,
    }

    fn message(m: &CaseMessage) -> Message {
        let role = match m.role.as_str() {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            other => panic!("role {other}"),
        };
        Message {
            role,
            content: m.content.clone(),
            tool_calls: m.tool_calls.clone(),
            tool_call_id: m.tool_call_id.clone(),
            name: m.name.clone(),
        }
    }

    fn golden(template: &str, case: &str) -> Option<String> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("src/model/chat_templates/golden/{template}/{case}.txt"));
        std::fs::read_to_string(path).ok()
    }

    /// Every case with every template, against jinja2's rendering as
    /// transformers does it (scripts/chat-templates.py golden).
    #[test]
    fn renders_as_jinja2_renders_for_transformers() {
        let cases: Cases = serde_json::from_str(include_str!("chat_templates/cases.json")).unwrap();
        let mut compared = 0;
        for (name, source) in TEMPLATES {
            let t = ChatTemplate::new(source, "<|bos|>", "<|eos|>").unwrap();
            for (case_name, case) in &cases.cases {
                let messages: Vec<Message> = case.messages.iter().map(message).collect();
                let expected = golden(name, case_name);
                if !case.tools.is_empty() && !t.takes_tools() {
                    assert!(expected.is_none(), "{name} takes no tools: no golden for {case_name}");
                    continue;
                }
                let expected =
                    expected.unwrap_or_else(|| panic!("no golden for {name}/{case_name}"));
                assert_eq!(
                    t.render(&messages, &case.tools).unwrap(),
                    expected,
                    "{name}/{case_name}"
                );
                compared += 1;
            }
        }
        assert_eq!(compared, 8, "5 cases with Qwen2.5, the 3 without tools with SmolLM2");
    }

    #[test]
    fn which_templates_take_tools() {
        let takes: Vec<bool> = TEMPLATES
            .iter()
            .map(|(_, s)| ChatTemplate::new(s, "", "").unwrap().takes_tools())
            .collect();
        assert_eq!(takes, [true, false]);
    }

    /// A template without tools gets the Qwen2.5 tool text in plain turns:
    /// the tools in the system turn, calls as <tool_call> text, results as a
    /// user turn; nothing of the conversation is dropped.
    #[test]
    fn a_template_without_tools_gets_them_as_text() {
        let t = ChatTemplate::new(TEMPLATES[1].1, "", "").unwrap();
        let call = ToolCall {
            id: "call_0".into(),
            name: "read_file".into(),
            arguments: "{\"path\":\"a.py\"}".into(),
        };
        let tools = [ToolSpec {
            name: "read_file".into(),
            description: "Read.".into(),
            parameters: serde_json::json!({"type": "object"}),
        }];
        let messages = [
            Message::system("S."),
            Message::user("Go."),
            Message::assistant("", vec![call.clone()]),
            Message::tool(&call, "x = 1"),
        ];
        let out = t.render(&messages, &tools).unwrap();
        assert_eq!(
            out,
            "<|im_start|>system\nS.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
             You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n\
             {\"type\": \"function\", \"function\": {\"name\": \"read_file\", \"description\": \"Read.\", \"parameters\": {\"type\": \"object\"}}}\n\
             </tools>\n\nFor each function call, return a json object with function name and arguments within \
             <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n\
             <|im_start|>user\nGo.<|im_end|>\n\
             <|im_start|>assistant\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.py\"}}\n</tool_call><|im_end|>\n\
             <|im_start|>user\n<tool_response>\nx = 1\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn tojson_writes_what_pythons_json_dumps_writes() {
        // Each expected value printed by Python 3.11's json.dumps (ensure_ascii=False
        // unless given, as transformers' tojson) of the same value.
        let t = |filter: &str, json: &str| {
            let env = ChatTemplate::new(&format!("{{{{ v | {filter} }}}}"), "", "").unwrap();
            let v: Value = serde_json::from_str(json).unwrap();
            env.env.get_template(NAME).unwrap().render(minijinja::context! { v => v }).unwrap()
        };
        let v = r#"{"b": "é\"<&>", "a": [1, 2.5, 1e-07, 1e16, 0.0001, -0.0], "c": {}, "d": [], "e": null, "f": true}"#;
        assert_eq!(
            t("tojson", v),
            r#"{"b": "é\"<&>", "a": [1, 2.5, 1e-07, 1e+16, 0.0001, -0.0], "c": {}, "d": [], "e": null, "f": true}"#
        );
        assert_eq!(
            t("tojson(sort_keys=true, ensure_ascii=true)", v),
            r#"{"a": [1, 2.5, 1e-07, 1e+16, 0.0001, -0.0], "b": "\u00e9\"<&>", "c": {}, "d": [], "e": null, "f": true}"#
        );
        assert_eq!(
            t("tojson(indent=2)", v),
            "{\n  \"b\": \"é\\\"<&>\",\n  \"a\": [\n    1,\n    2.5,\n    1e-07,\n    1e+16,\n    0.0001,\n    -0.0\n  ],\n  \"c\": {},\n  \"d\": [],\n  \"e\": null,\n  \"f\": true\n}"
        );
        assert_eq!(
            t(r#"tojson(separators=[",", ":"])"#, r#"{"a": [1, {"b": 2}]}"#),
            r#"{"a":[1,{"b":2}]}"#
        );
        assert_eq!(t("tojson(ensure_ascii=true)", r#""😀""#), r#""\ud83d\ude00""#);
        assert_eq!(
            t("tojson", "[1e22, 123456789012345680.0, 0.1, 100.0, 1.5e-5, 12345.678]"),
            "[1e+22, 1.2345678901234568e+17, 0.1, 100.0, 1.5e-05, 12345.678]"
        );
    }

    #[test]
    fn arguments_keep_the_order_written() {
        let v = call_arguments(r#"{"z": 1, "a": {"y": [2], "b": "x"}}"#);
        assert_eq!(py_json::compact(&v), r#"{"z": 1, "a": {"y": [2], "b": "x"}}"#);
        assert_eq!(call_arguments("[1, 2]").as_str(), Some("[1, 2]"), "not an object: the text");
        assert_eq!(call_arguments("nope").as_str(), Some("nope"));
    }

    #[test]
    fn template_errors_name_the_problem() {
        let e = ChatTemplate::new("{% for m in messages %}", "", "").err().unwrap().to_string();
        assert!(e.contains("line 1"), "{e}");
        let t = ChatTemplate::new(
            "{{ raise_exception('Only user and assistant roles are supported!') }}",
            "",
            "",
        )
        .unwrap();
        assert_eq!(
            t.render(&[Message::user("u")], &[]).unwrap_err().to_string(),
            "Only user and assistant roles are supported! (chat template line 1)"
        );
        let t = ChatTemplate::new("{{ strftime_now('%d %b %Y') }}", "", "").unwrap();
        let e = t.render(&[Message::user("u")], &[]).unwrap_err().to_string();
        assert!(e.contains("strftime_now") && e.contains("--local-template"), "{e}");
    }
}
