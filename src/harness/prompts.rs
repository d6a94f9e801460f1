//! Every text the harness sends. Texts outside a component are the same in
//! every arm; a component's texts appear only where it is on.

use crate::grader::CheckResult;
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
pub fn builtin_texts_sha256() -> String {
    crate::digest::sha256_hex(include_str!("prompts.rs").as_bytes())
}

/// Added to the system prompt when the `tools` component is on.
pub const TOOLS_NOTE: &str = "You can call the tools read_file, list_files and run_tests to inspect the workspace and run the checks. Files change only through fenced code blocks.";

pub fn system_prompt(instructions: &str, tools: bool) -> String {
    if tools { format!("{instructions}\n\n{TOOLS_NOTE}") } else { instructions.to_string() }
}

/// The first user message of a session. With tools off the task's files are
/// inline; with tools on only their names are given.
pub fn task_message(task: &Task, files: &[(String, String)], tools: bool) -> String {
    let mut s = format!("{}\n\nEditable file(s): {}\n", task.prompt.trim(), task.editable.join(", "));
    if tools {
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        s.push_str(&format!("Files in the workspace: {}\nUse read_file to read them and run_tests to run the checks.\n", names.join(", ")));
    } else {
        s.push_str("\nThe files of the workspace:\n");
        for (name, content) in files {
            s.push_str(&format!("\n--- {name} ---\n```python\n{}\n```\n", content.trim_end()));
        }
    }
    if let Some(first) = task.editable.first() {
        s.push_str(&format!("\nReply with the complete new content of {first} in one fenced code block that starts with ```python {first}\n"));
    }
    s
}

/// Summary of a check run: what `feedback` and `run_tests` show the model.
pub fn check_summary(check: &CheckResult, tail_bytes: usize) -> String {
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

pub fn feedback_message(check: &CheckResult, tail_bytes: usize) -> String {
    format!("The harness ran the checks on your edit.\n{}Fix the code and send the complete file again.", check_summary(check, tail_bytes))
}

pub fn loop_guard_message(step: u32, scored: Option<(u32, u32)>) -> String {
    let score = match scored {
        Some((p, t)) => format!("which scored {p}/{t} tests passed"),
        None => "which was not checked".to_string(),
    };
    format!(
        "This submission repeats the code you sent at step {step}, {score}. It was not run again. Change your approach: try a different way to solve the task."
    )
}

pub fn acceptance_refusal(check: &CheckResult) -> String {
    format!(
        "Not accepted: the checks do not pass yet ({}/{} tests passed). You are done only when every test passes; keep working.",
        check.passed, check.total
    )
}

pub fn unparsed_tool_call_message(raw: &[String]) -> String {
    format!("The harness could not read {} tool call(s) in your reply: {}. Send tool calls with a name and JSON arguments.", raw.len(), raw.join("; "))
}

/// The progress file carried across a session boundary (`progress_handoff`).
pub fn progress_note(steps: u32, results: &[(u32, Option<(u32, u32)>)], last_failed: &[String]) -> String {
    let mut s = format!("Progress file from your previous session (the conversation was reset; the files keep your edits):\n- steps so far: {steps}\n");
    if results.is_empty() {
        s.push_str("- no submission yet\n");
    }
    for (step, r) in results {
        match r {
            Some((p, t)) => s.push_str(&format!("- step {step}: submitted code, {p}/{t} tests passed\n")),
            None => s.push_str(&format!("- step {step}: submitted code, not checked\n")),
        }
    }
    if last_failed.is_empty() {
        s.push_str("- next step: check the current code against the task and finish it\n");
    } else {
        s.push_str(&format!("- next step: make these failing tests pass: {}\n", last_failed.join(", ")));
    }
    s
}
