//! Every text the harness sends. Texts outside a component are the same in
//! every arm; a component's texts appear only where it is on.

use crate::experiment::instructions::{ArmPrompts, PLACEHOLDERS};
use crate::record::CheckResult;
use crate::suite::Task;

/// The builtin system prompt (`instructions = builtin`).
/// It shows no example code: a small model copies an example block instead of
/// solving the task, which would make the bare arm a straw man. The exact
/// opening fence, with the task's own file name, is in the task message.
pub const DEFAULT_SYSTEM: &str = "You are a careful Python programmer solving a small coding task.
To change a file, reply with its complete new content in one fenced code block, with the language and the file name after the opening fence.
Put only code in the block. When the task is complete, write DONE on a line of its own.";

/// sha256 of this file: every builtin text the harness can send (recorded in
/// the manifest's prompt digests as `builtin-texts`).
pub(crate) fn builtin_texts_sha256() -> String {
    crate::digest::sha256_hex(include_str!("prompts.rs").as_bytes())
}

/// Added to the system prompt when the `tools` component is on.
pub(crate) const TOOLS_NOTE: &str = "You can call the tools read_file, list_files and run_tests to inspect the workspace and run the checks. Files change only through fenced code blocks.";

pub(crate) fn system_prompt(instructions: &str, tools: bool) -> String {
    if tools { format!("{instructions}\n\n{TOOLS_NOTE}") } else { instructions.to_string() }
}

impl ArmPrompts {
    /// `instructions = builtin`: DEFAULT_SYSTEM and the builtin task message.
    pub fn builtin() -> ArmPrompts {
        ArmPrompts {
            system: Some(DEFAULT_SYSTEM.to_string()),
            user_template: None,
            prefill: None,
            stop: Vec::new(),
        }
    }

    /// The system message of a session, if any.
    pub fn system_message(&self, tools: bool) -> Option<String> {
        match &self.system {
            Some(s) => Some(system_prompt(s, tools)),
            None if tools => Some(TOOLS_NOTE.to_string()),
            None => None,
        }
    }

    /// The first user message of a session.
    pub fn first_message(&self, task: &Task, files: &[(String, String)], tools: bool) -> String {
        match &self.user_template {
            Some(t) => render_user(t, task, files, tools),
            None => task_message(task, files, tools),
        }
    }
}

/// A `user_template` with its placeholders filled in one pass (text that a
/// placeholder brings in is never substituted again):
/// `{prompt}` the task's prompt (task.toml), `{code}` the first editable
/// file as the workspace holds it (leading blank lines and trailing
/// whitespace cut), `{file}` its name, `{files}` the workspace's files as the
/// builtin message lists them (names only with `tools` on).
pub(crate) fn render_user(
    template: &str,
    task: &Task,
    files: &[(String, String)],
    tools: bool,
) -> String {
    let first = task.editable.first().map(String::as_str).unwrap_or("");
    let code = files.iter().find(|(n, _)| n == first).map(|(_, c)| c.as_str()).unwrap_or("");
    let code = code.trim_end();
    let code = code.trim_start_matches(['\n', '\r']);
    let mut out = String::with_capacity(template.len() + code.len());
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let hit = PLACEHOLDERS.iter().find(|p| tail.starts_with(*p));
        match hit {
            Some(p) => {
                match *p {
                    "{prompt}" => out.push_str(task.prompt.trim()),
                    "{code}" => out.push_str(code),
                    "{file}" => out.push_str(first),
                    _ => out.push_str(files_block(files, tools).trim()),
                }
                rest = &tail[p.len()..];
            }
            None => {
                out.push('{');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn files_block(files: &[(String, String)], tools: bool) -> String {
    let mut s = String::new();
    if tools {
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        s.push_str(&format!("Files in the workspace: {}\nUse read_file to read them and run_tests to run the checks.\n", names.join(", ")));
    } else {
        for (name, content) in files {
            s.push_str(&format!("\n--- {name} ---\n```python\n{}\n```\n", content.trim_end()));
        }
    }
    s
}

/// The first user message of a session. With tools off the task's files are
/// inline; with tools on only their names are given.
pub fn task_message(task: &Task, files: &[(String, String)], tools: bool) -> String {
    let mut s =
        format!("{}\n\nEditable file(s): {}\n", task.prompt.trim(), task.editable.join(", "));
    if !tools {
        s.push_str("\nThe files of the workspace:\n");
    }
    s.push_str(&files_block(files, tools));
    if let Some(first) = task.editable.first() {
        s.push_str(&format!("\nReply with the complete new content of {first} in one fenced code block that starts with ```python {first}\n"));
    }
    s
}

/// Summary of a check run: what `feedback` and `run_tests` show the model.
pub(crate) fn check_summary(check: &CheckResult, tail_bytes: usize) -> String {
    let mut s = if check.timed_out {
        format!("The checks timed out: 0/{} tests passed.\n", check.total)
    } else {
        format!("Checks: {}/{} tests passed.\n", check.passed, check.total)
    };
    if !check.failed_tests.is_empty() {
        s.push_str(&format!("Failed: {}\n", check.failed_tests.join(", ")));
    }
    let tail = check.output_tail(tail_bytes).trim();
    if !tail.is_empty() && !check.all_passed() {
        s.push_str(&format!("Output (last {tail_bytes} bytes at most):\n{tail}\n"));
    }
    s
}

pub(crate) fn feedback_message(check: &CheckResult, tail_bytes: usize) -> String {
    format!(
        "The harness ran the checks on your edit.\n{}Fix the code and send the complete file again.",
        check_summary(check, tail_bytes)
    )
}

pub(crate) fn loop_guard_message(step: u32, scored: Option<(u32, u32)>) -> String {
    let score = match scored {
        Some((p, t)) => format!("which scored {p}/{t} tests passed"),
        None => "which was not checked".to_string(),
    };
    format!(
        "This submission repeats the code you sent at step {step}, {score}. It was not run again. Change your approach: try a different way to solve the task."
    )
}

pub(crate) fn acceptance_refusal(check: &CheckResult) -> String {
    format!(
        "Not accepted: the checks do not pass yet ({}/{} tests passed). You are done only when every test passes; keep working.",
        check.passed, check.total
    )
}

pub(crate) fn unparsed_tool_call_message(raw: &[String]) -> String {
    format!(
        "The harness could not read {} tool call(s) in your reply: {}. Send tool calls with a name and JSON arguments.",
        raw.len(),
        raw.join("; ")
    )
}

/// The progress file carried across a session boundary (`progress_handoff`).
pub(crate) fn progress_note(
    steps: u32,
    results: &[(u32, Option<(u32, u32)>)],
    last_failed: &[String],
) -> String {
    let mut s = format!(
        "Progress file from your previous session (the conversation was reset; the files keep your edits):\n- steps so far: {steps}\n"
    );
    if results.is_empty() {
        s.push_str("- no submission yet\n");
    }
    for (step, r) in results {
        match r {
            Some((p, t)) => {
                s.push_str(&format!("- step {step}: submitted code, {p}/{t} tests passed\n"))
            }
            None => s.push_str(&format!("- step {step}: submitted code, not checked\n")),
        }
    }
    if last_failed.is_empty() {
        s.push_str("- next step: check the current code against the task and finish it\n");
    } else {
        s.push_str(&format!(
            "- next step: make these failing tests pass: {}\n",
            last_failed.join(", ")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::instructions::parse_instructions;
    use std::path::Path;

    fn add_two() -> Task {
        let root = crate::repo_root().join("tests/fixtures/suites/tiny");
        crate::suite::load(&root).unwrap().task("add-two").unwrap().clone()
    }

    fn files() -> Vec<(String, String)> {
        vec![
            ("add.py".into(), "\n\ndef add(a, b):\n    \"\"\"Sum.\"\"\"\n\n".into()),
            ("tests/test_add.py".into(), "import unittest\n".into()),
        ]
    }

    #[test]
    fn the_builtin_task_message_is_as_written_here() {
        let task = add_two();
        let expected = format!(
            "{}\n\nEditable file(s): add.py\n\nThe files of the workspace:\n\n--- add.py ---\n```python\n\n\ndef add(a, b):\n    \"\"\"Sum.\"\"\"\n```\n\n--- tests/test_add.py ---\n```python\nimport unittest\n```\n\nReply with the complete new content of add.py in one fenced code block that starts with ```python add.py\n",
            task.prompt.trim()
        );
        assert_eq!(task_message(&task, &files(), false), expected);
        assert_eq!(ArmPrompts::builtin().first_message(&task, &files(), false), expected);
        let with_tools = format!(
            "{}\n\nEditable file(s): add.py\nFiles in the workspace: add.py, tests/test_add.py\nUse read_file to read them and run_tests to run the checks.\n\nReply with the complete new content of add.py in one fenced code block that starts with ```python add.py\n",
            task.prompt.trim()
        );
        assert_eq!(task_message(&task, &files(), true), with_tools);
        assert_eq!(ArmPrompts::builtin().system_message(false).as_deref(), Some(DEFAULT_SYSTEM));
    }

    #[test]
    fn a_user_template_fills_its_placeholders_once() {
        let task = add_two();
        let t = "Solve:\n```\n{code}\n```\nin {file}. {unknown} {prompt}";
        let out = render_user(t, &task, &files(), false);
        assert_eq!(
            out,
            format!(
                "Solve:\n```\ndef add(a, b):\n    \"\"\"Sum.\"\"\"\n```\nin add.py. {{unknown}} {}",
                task.prompt.trim()
            )
        );
        // Text a placeholder brings in is not substituted again.
        let tricky = vec![("add.py".to_string(), "s = '{prompt}'\n".to_string())];
        assert_eq!(render_user("[{code}]", &task, &tricky, false), "[s = '{prompt}']");
        assert!(
            render_user("{files}", &task, &files(), false)
                .starts_with("--- add.py ---\n```python\n")
        );
    }

    #[test]
    fn instructions_files() {
        let md = parse_instructions(Path::new("p/sys.md"), "Be brief.").unwrap();
        assert_eq!(
            md,
            ArmPrompts {
                system: Some("Be brief.".into()),
                user_template: None,
                prefill: None,
                stop: Vec::new()
            }
        );
        let toml = parse_instructions(
            Path::new("p/card.toml"),
            "user_template = \"Do it:\\n{code}\\n\"\n",
        )
        .unwrap();
        assert_eq!(
            toml,
            ArmPrompts {
                system: None,
                user_template: Some("Do it:\n{code}\n".into()),
                prefill: None,
                stop: Vec::new()
            }
        );
        assert_eq!(toml.system_message(false), None, "no system message");
        assert_eq!(toml.system_message(true).as_deref(), Some(TOOLS_NOTE));
        let both = parse_instructions(
            Path::new("card.toml"),
            "system = \"S\"\nuser_template = \"{prompt}\"\n",
        )
        .unwrap();
        assert_eq!(both.system_message(false).as_deref(), Some("S"));

        let err = parse_instructions(
            Path::new("card.toml"),
            "system = \"S\"\nassistant_prefix = \"x\"\n",
        )
        .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("assistant_prefix"), "{err}");
        let err = parse_instructions(Path::new("card.toml"), "user_template = \"no task here\"\n")
            .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("user_template"), "{err}");
        let err = parse_instructions(Path::new("card.toml"), "# nothing\n").unwrap_err();
        assert!(
            err.to_string().contains("card.toml") && err.to_string().contains("user_template"),
            "{err}"
        );

        let card = parse_instructions(
            Path::new("card.toml"),
            "user_template = \"{code}\"\nprefill = \"```python\\n\"\nstop = [\"\\n```\"]\n",
        )
        .unwrap();
        assert_eq!(
            (card.prefill.as_deref(), card.stop.as_slice()),
            (Some("```python\n"), ["\n```".to_string()].as_slice())
        );
        let err = parse_instructions(
            Path::new("card.toml"),
            "user_template = \"{code}\"\nprefill = \"\"\n",
        )
        .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("prefill"), "{err}");
        let err = parse_instructions(
            Path::new("card.toml"),
            "user_template = \"{code}\"\nstop = [\"a\", \"\"]\n",
        )
        .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("stop[1]"), "{err}");
        let many = format!(
            "user_template = \"{{code}}\"\nstop = [{}]\n",
            (0..17).map(|i| format!("\"s{i}\"")).collect::<Vec<_>>().join(", ")
        );
        let err = parse_instructions(Path::new("card.toml"), &many).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("stop"), "{err}");
    }

    /// configs/prompts/humaneval-qwen.toml through Qwen's own chat template, with the
    /// prefill the engine appends, is byte for byte the ChatML string the Qwen2.5-Coder
    /// evaluation code builds (QwenLM/Qwen2.5-Coder, qwencoder-eval/instruct/eval_plus/model.py,
    /// class ChatML, commit dc5af29), for a HumanEval prompt.
    #[test]
    fn the_qwen_prompt_file_renders_as_the_qwen_evaluation_builds_its_prompt() {
        let root = crate::repo_root();
        let card = crate::experiment::instructions::load_instructions(
            &root.join("configs/prompts/humaneval-qwen.toml"),
        )
        .unwrap();
        let task = add_two();
        let prompt = "def add(a, b):\n    \"\"\"Sum.\"\"\"";
        let files = vec![("add.py".to_string(), format!("\n{prompt}\n\n"))];
        let mut messages = Vec::new();
        messages.extend(card.system_message(false).map(crate::model::Message::system));
        messages.push(crate::model::Message::user(card.first_message(&task, &files, false)));
        let source = std::fs::read_to_string(
            root.join("crates/core/src/model/chat_templates/qwen2.5-coder-0.5b-instruct.jinja"),
        )
        .unwrap();
        let template =
            crate::model::chat_template::ChatTemplate::new(&source, "", "<|im_end|>").unwrap();
        let rendered = crate::model::chat_template::with_prefill(
            template.render(&messages, &[]).unwrap(),
            card.prefill.as_deref(),
        );
        // The Qwen harness's string, with its {prompt} = the problem's prompt, stripped.
        let qwen = format!(
            "<|im_start|>system\nYou are an intelligent programming assistant to produce Python algorithmic solutions<|im_end|>\n<|im_start|>user\nCan you complete the following Python function?\n```python\n{prompt}\n```\n<|im_end|>\n<|im_start|>assistant\n```python\n"
        );
        assert_eq!(rendered, qwen);
        assert_eq!(card.stop, ["\nif __name__", "\ndef main(", "\nprint(", "\n#", "\n```"]);
    }
}
