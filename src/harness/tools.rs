//! The tools offered when the `tools` component is on: read_file, list_files,
//! run_tests. Arguments are validated against each tool's JSON Schema
//! (`additionalProperties: false`) before anything runs; an invalid or unknown
//! call gets a structured error result.

use crate::model::ToolSpec;
use serde_json::{Value, json};

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
pub struct CallError {
    pub kind: &'static str,
    pub message: String,
}

impl CallError {
    pub fn to_result(&self) -> String {
        json!({"error": {"type": self.kind, "message": self.message}}).to_string()
    }
}

/// Validate `arguments` (raw JSON text) for tool `name` against its schema.
pub fn validate(name: &str, arguments: &str) -> Result<Call, CallError> {
    let Some(spec) = specs().into_iter().find(|s| s.name == name) else {
        let names: Vec<String> = specs().into_iter().map(|s| s.name).collect();
        return Err(CallError { kind: "unknown_tool", message: format!("no tool named `{name}`; tools: {}", names.join(", ")) });
    };
    let args: Value = if arguments.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(arguments).map_err(|e| CallError { kind: "invalid_arguments", message: format!("arguments are not valid JSON: {e}") })?
    };
    check_schema(&spec.parameters, &args).map_err(|m| CallError { kind: "invalid_arguments", message: m })?;
    Ok(match name {
        "read_file" => Call::ReadFile { path: args["path"].as_str().unwrap_or_default().to_string() },
        "list_files" => Call::ListFiles,
        _ => Call::RunTests,
    })
}

/// The JSON Schema subset our tools use: an object with typed properties,
/// `required`, and `additionalProperties: false`.
pub fn check_schema(schema: &Value, value: &Value) -> Result<(), String> {
    let Some(obj) = value.as_object() else {
        return Err(format!("arguments must be a JSON object, got {value}"));
    };
    let props = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    if schema.get("additionalProperties") == Some(&Value::Bool(false))
        && let Some(extra) = obj.keys().find(|k| !props.contains_key(*k))
    {
        let allowed: Vec<&String> = props.keys().collect();
        return Err(format!("unknown argument `{extra}`; allowed: {allowed:?}"));
    }
    for req in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
        let req = req.as_str().unwrap_or_default();
        if !obj.contains_key(req) {
            return Err(format!("missing required argument `{req}`"));
        }
    }
    for (key, val) in obj {
        let Some(want) = props.get(key).and_then(|p| p.get("type")).and_then(Value::as_str) else { continue };
        let ok = match want {
            "string" => val.is_string(),
            "integer" => val.is_i64() || val.is_u64(),
            "number" => val.is_number(),
            "boolean" => val.is_boolean(),
            "object" => val.is_object(),
            "array" => val.is_array(),
            _ => true,
        };
        if !ok {
            return Err(format!("argument `{key}` must be a {want}, got {val}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_against_the_schema() {
        assert_eq!(validate("read_file", r#"{"path": "m.py"}"#), Ok(Call::ReadFile { path: "m.py".into() }));
        assert_eq!(validate("list_files", ""), Ok(Call::ListFiles));
        assert_eq!(validate("run_tests", "{}"), Ok(Call::RunTests));
        let e = validate("read_file", r#"{"path": 3}"#).unwrap_err();
        assert_eq!(e.kind, "invalid_arguments");
        assert!(e.message.contains("must be a string"), "{}", e.message);
        let e = validate("read_file", r#"{}"#).unwrap_err();
        assert!(e.message.contains("missing required argument `path`"));
        let e = validate("read_file", r#"{"path": "a", "mode": "w"}"#).unwrap_err();
        assert!(e.message.contains("unknown argument `mode`"));
        let e = validate("read_file", "{not json").unwrap_err();
        assert!(e.message.contains("not valid JSON"));
        let e = validate("delete_file", "{}").unwrap_err();
        assert_eq!(e.kind, "unknown_tool");
        assert!(e.to_result().contains("\"unknown_tool\""));
    }
}
