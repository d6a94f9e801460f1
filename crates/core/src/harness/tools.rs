//! The tools offered when the `tools` component is on: read_file, list_files,
//! run_tests. Each tool's arguments are a typed struct that refuses unknown
//! fields, read before anything runs, matching the JSON Schema offered to the
//! model (a test holds the two together); an invalid or unknown call gets a
//! structured error result.

use crate::model::ToolSpec;
use serde::Deserialize;
use serde_json::error::Category;
use serde_json::json;

pub fn specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file of the workspace.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "path relative to the workspace root"}},
                "required": ["path"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "list_files".into(),
            description: "List the files of the workspace.".into(),
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
        ToolSpec {
            name: "run_tests".into(),
            description: "Run the task's checks on the current files and get passed/total, the failed tests and the output tail.".into(),
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
    ]
}

/// A validated tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    ReadFile { path: String },
    ListFiles,
    RunTests,
}

/// Why a call was refused; becomes `{"error": {"type": ..., "message": ...}}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallError {
    pub kind: &'static str,
    pub message: String,
}

impl CallError {
    pub(crate) fn to_result(&self) -> String {
        json!({"error": {"type": self.kind, "message": self.message}}).to_string()
    }
}

/// `read_file`'s arguments, as its schema in `specs` states them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadFileArgs {
    path: String,
}

/// The arguments of a tool that takes none: `{}` (or nothing at all).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// Read `arguments` (raw JSON text) for tool `name` into its typed arguments:
/// serde refuses a missing, unknown or mistyped argument by name, as the
/// tool's schema (`additionalProperties: false`) says. Empty text is `{}`.
pub(crate) fn validate(name: &str, arguments: &str) -> Result<Call, CallError> {
    let text = if arguments.trim().is_empty() { "{}" } else { arguments };
    match name {
        "read_file" => parse::<ReadFileArgs>(text).map(|a| Call::ReadFile { path: a.path }),
        "list_files" => parse::<NoArgs>(text).map(|_| Call::ListFiles),
        "run_tests" => parse::<NoArgs>(text).map(|_| Call::RunTests),
        _ => {
            let names: Vec<String> = specs().into_iter().map(|s| s.name).collect();
            Err(CallError {
                kind: "unknown_tool",
                message: format!("no tool named `{name}`; tools: {}", names.join(", ")),
            })
        }
    }
}

fn parse<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, CallError> {
    serde_json::from_str(text).map_err(|e| {
        let message = match e.classify() {
            Category::Syntax | Category::Eof | Category::Io => {
                format!("arguments are not valid JSON: {e}")
            }
            // serde names the struct when the value is not an object; say it plainly.
            Category::Data if !text.trim_start().starts_with('{') => {
                format!("arguments must be a JSON object, got {}", text.trim())
            }
            Category::Data => format!("invalid arguments: {e}"),
        };
        CallError { kind: "invalid_arguments", message }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_against_the_schema() {
        assert_eq!(
            validate("read_file", r#"{"path": "m.py"}"#),
            Ok(Call::ReadFile { path: "m.py".into() })
        );
        assert_eq!(validate("list_files", ""), Ok(Call::ListFiles));
        assert_eq!(validate("run_tests", "{}"), Ok(Call::RunTests));
        let e = validate("read_file", r#"{"path": 3}"#).unwrap_err();
        assert_eq!(e.kind, "invalid_arguments");
        assert_eq!(
            e.message,
            "invalid arguments: invalid type: integer `3`, expected a string at line 1 column 10"
        );
        let e = validate("read_file", r#"{}"#).unwrap_err();
        assert_eq!(e.message, "invalid arguments: missing field `path` at line 1 column 2");
        let e = validate("read_file", r#"{"path": "a", "mode": "w"}"#).unwrap_err();
        assert_eq!(
            e.message,
            "invalid arguments: unknown field `mode`, expected `path` at line 1 column 20"
        );
        let e = validate("run_tests", r#"{"verbose": true}"#).unwrap_err();
        assert_eq!(
            e.message,
            "invalid arguments: unknown field `verbose`, there are no fields at line 1 column 10"
        );
        let e = validate("read_file", r#""m.py""#).unwrap_err();
        assert_eq!(e.message, r#"arguments must be a JSON object, got "m.py""#);
        let e = validate("read_file", "{not json").unwrap_err();
        assert_eq!(
            (e.kind, e.message.starts_with("arguments are not valid JSON: key must be a string")),
            ("invalid_arguments", true),
            "{}",
            e.message
        );
        let e = validate("delete_file", "{}").unwrap_err();
        assert_eq!(e.kind, "unknown_tool");
        assert_eq!(
            e.to_result(),
            r#"{"error":{"message":"no tool named `delete_file`; tools: read_file, list_files, run_tests","type":"unknown_tool"}}"#
        );
    }

    /// The schema offered to the model and the typed arguments agree: a call
    /// giving every property the schema lists (a value of its type) is
    /// accepted; one leaving out a required property, or adding one the
    /// schema does not list, is refused.
    #[test]
    fn the_offered_schemas_and_the_typed_arguments_agree() {
        for spec in specs() {
            let p = &spec.parameters;
            assert_eq!(p["additionalProperties"], false, "{}", spec.name);
            let props = p["properties"].as_object().unwrap();
            let example: serde_json::Map<String, serde_json::Value> = props
                .iter()
                .map(|(k, v)| {
                    assert_eq!(
                        v["type"], "string",
                        "{}.{k}: only string arguments are typed here",
                        spec.name
                    );
                    (k.clone(), json!("x"))
                })
                .collect();
            let text = serde_json::Value::Object(example.clone()).to_string();
            assert!(validate(&spec.name, &text).is_ok(), "{} accepts {text}", spec.name);
            for req in p["required"].as_array().into_iter().flatten() {
                let mut missing = example.clone();
                missing.remove(req.as_str().unwrap());
                assert!(
                    validate(&spec.name, &serde_json::Value::Object(missing).to_string()).is_err(),
                    "{} requires {req}",
                    spec.name
                );
            }
            let mut extra = example.clone();
            extra.insert("unlisted".into(), json!(1));
            assert!(
                validate(&spec.name, &serde_json::Value::Object(extra).to_string()).is_err(),
                "{} refuses unlisted",
                spec.name
            );
        }
    }
}
