//! An arm's instructions file (`instructions = "<file>"`): a `.toml` with
//! `system` and/or `user_template` (configs/README.md), or any other file as
//! the system prompt. Read and checked here, with the experiment; the harness
//! renders it (`harness::prompts`).

use super::components::{ArmInput, Instructions, Setting};
use crate::digest;
use crate::error::{InputError, parse_toml_str};
use serde::Deserialize;
use std::path::Path;

/// `instructions = "<file>"`: the file is read and checked with the config, its digest kept.
impl Setting for Instructions {
    type Raw = String;
    fn from_raw(file: String, at: &mut ArmInput<'_>) -> Result<Instructions, InputError> {
        let (path, key) = (at.path, format!("{}.instructions", at.key));
        let full = at.config_dir.join(&file);
        let bytes = std::fs::read(&full).map_err(|e| {
            InputError::at(path, &key, format!("cannot read `{}`: {e}", full.display()))
        })?;
        // A `.toml` prompt file (system + user_template) is checked here, so `plan` catches it.
        let text = String::from_utf8(bytes.clone()).map_err(|_| {
            InputError::at(path, &key, format!("`{}` is not UTF-8 text", full.display()))
        })?;
        let prompts = parse_instructions(&full, &text)?;
        if prompts.prefill.is_some() && !at.without_prefill.is_empty() {
            return Err(InputError::at(
                &full,
                "prefill",
                format!(
                    "only the embedded model (provider = \"local\") can start the assistant's turn with a text; the experiment also runs {}, whose API cannot",
                    at.without_prefill.join(", ")
                ),
            ));
        }
        at.prompt_digests.insert(file.clone(), digest::sha256_hex(&bytes));
        Ok(Instructions::File(file))
    }
}

/// What an arm's `instructions` give the harness: the system prompt and,
/// optionally, a template of each session's first user message.
#[derive(Debug, Clone, PartialEq)]
pub struct ArmPrompts {
    /// None: no system message (the model's chat template applies its own
    /// default, as model cards' evaluations often do); with `tools` on, the
    /// tools note alone.
    pub system: Option<String>,
    /// None: the builtin task message (`task_message`).
    pub user_template: Option<String>,
    /// The text the assistant's turn starts with (`prefill`): sent after the
    /// chat template's generation prompt (the embedded model only), and the
    /// reply is read as this text followed by the generated one.
    pub prefill: Option<String>,
    /// Generation stops before the first of these strings (`stop`), which
    /// are cut from the reply; every provider honours them.
    pub stop: Vec<String>,
}

/// Most stop sequences an arm may give (OpenAI's own API takes at most 4;
/// OpenAI-compatible servers, Ollama and the embedded engine take more).
pub(crate) const MAX_STOP: usize = 16;

/// The placeholders of a `user_template`.
pub(crate) const PLACEHOLDERS: [&str; 4] = ["{prompt}", "{code}", "{file}", "{files}"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPromptFile {
    system: Option<String>,
    user_template: Option<String>,
    prefill: Option<String>,
    #[serde(default)]
    stop: Vec<String>,
}

/// Read an arm's instructions file. A `.toml` file holds `system` and/or
/// `user_template` (configs/README.md); any other file is the system prompt
/// as it is. Errors name the file and the key.
pub fn load_instructions(path: &Path) -> Result<ArmPrompts, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError::new(path, format!("cannot read the instructions file: {e}")))?;
    parse_instructions(path, &text)
}

pub(crate) fn parse_instructions(path: &Path, text: &str) -> Result<ArmPrompts, InputError> {
    if path.extension().is_none_or(|e| e != "toml") {
        return Ok(ArmPrompts {
            system: Some(text.to_string()),
            user_template: None,
            prefill: None,
            stop: Vec::new(),
        });
    }
    let raw: RawPromptFile = parse_toml_str(path, text)?;
    if raw.system.is_none() && raw.user_template.is_none() {
        return Err(InputError::new(
            path,
            "an instructions .toml needs `system`, `user_template` or both",
        ));
    }
    if let Some(t) = &raw.user_template
        && !["{prompt}", "{code}", "{files}"].iter().any(|p| t.contains(p))
    {
        return Err(InputError::at(
            path,
            "user_template",
            "holds none of {prompt}, {code} and {files}: the task would not reach the model",
        ));
    }
    if raw.prefill.as_deref() == Some("") {
        return Err(InputError::at(
            path,
            "prefill",
            "is empty: leave it out, or give the text the assistant's turn starts with",
        ));
    }
    if raw.stop.len() > MAX_STOP {
        return Err(InputError::at(
            path,
            "stop",
            format!("{} stop sequences: at most {MAX_STOP}", raw.stop.len()),
        ));
    }
    if let Some(i) = raw.stop.iter().position(String::is_empty) {
        return Err(InputError::at(
            path,
            format!("stop[{i}]"),
            "an empty stop sequence would stop before anything is generated",
        ));
    }
    Ok(ArmPrompts {
        system: raw.system,
        user_template: raw.user_template,
        prefill: raw.prefill,
        stop: raw.stop,
    })
}
