//! The builtin loop on a container (Harbor) task: the model works in the
//! trial's container through a shell, and the task's tests stay hidden until
//! the verifier runs after the loop. Each component has its meaning here
//! (docs/harbor.md, "The builtin harness on container tasks"):
//!
//! - `tools`: a `shell` tool (and `read_file`, `write_file`) by tool calling;
//!   off, the command is a fenced ```bash block of the reply;
//! - `edit_format`: which fenced block is the command (tools off);
//! - `feedback`: the command's output tail comes back; off, only its exit code;
//! - `loop_guard`: a command the model just ran, with the same output, is not
//!   run again; the model is told so;
//! - `acceptance`: a "done" is accepted after one verify-before-finishing turn;
//! - `progress_handoff`: a new session starts with the commands run so far;
//! - `instructions`: the system prompt (builtin: `TERMINAL_SYSTEM`).
//!
//! The model is told its budget at the start and after every step.

use super::calls::{AgentOutcome, CallContext, Calls};
use super::hooks::{Hooks, SessionFacts};
use super::{edit, prompts};
use crate::container::trial::TrialContainer;
use crate::experiment::components::EditFormat;
use crate::experiment::instructions::ArmPrompts;
use crate::experiment::{Components, config::HarnessSettings};
use crate::model::{ChatReply, Message, ToolCall, ToolSpec};
use crate::record::omit::TracedSoFar;
use crate::record::{EndReason, Incidents, LoopGuardHit, ToolCallRecord, TraceStep};
use crate::suite::Task;
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

/// The builtin system prompt of container tasks.
pub(crate) const TERMINAL_SYSTEM: &str = "You are working in a Linux shell inside a container to complete a task.
Run one shell command at a time and read its result before the next. Keep replies short: the command, no explanation.
When the task is complete, write DONE on a line of its own.";

/// Added to the system prompt with `tools` on / off.
pub(crate) const SHELL_TOOL_NOTE: &str =
    "Run commands with the shell tool; read_file and write_file read and write whole files.";
pub(crate) const FENCED_NOTE: &str = "Each reply: one fenced ```bash code block holding the next command. It is run and its result comes back.";

/// Sent after a reply that ran no command and did not say DONE.
const NO_COMMAND_TOOLS: &str = "Your reply ran no command. Call the shell tool with the next command, or write DONE when the task is complete.";
const NO_COMMAND_FENCED: &str = "Your reply ran no command. Reply with one fenced ```bash code block holding the next command, or write DONE when the task is complete.";

/// Longest a single command may run (less when less working time is left).
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// Bytes of a command's output kept in the trace.
const TRACE_OUTPUT: usize = 16 * 1024;

pub struct TerminalContext<'a> {
    pub calls: CallContext<'a>,
    pub task: &'a Task,
    pub components: &'a Components,
    pub instructions: &'a ArmPrompts,
    pub settings: &'a HarnessSettings,
}

pub fn specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "shell".into(),
            description:
                "Run a command with bash in the task's container and get its exit code and output."
                    .into(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"], "additionalProperties": false}),
        },
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file of the container.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false}),
        },
        ToolSpec {
            name: "write_file".into(),
            description:
                "Write a whole file of the container (made with its folders when missing).".into(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        },
    ]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellArgs {
    command: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

/// A command the model asked for, as run.
#[derive(Debug)]
enum Action {
    Shell(String),
    Read(String),
    Write(String, String),
}

impl Action {
    /// The shell command it is run as (a file read or write is a shell command too).
    fn command(&self) -> (String, Option<Vec<u8>>) {
        match self {
            Action::Shell(c) => (c.clone(), None),
            Action::Read(p) => (format!("cat -- {}", crate::container::shell_quote(p)), None),
            Action::Write(p, content) => {
                let q = crate::container::shell_quote(p);
                (
                    format!("mkdir -p -- \"$(dirname -- {q})\" && cat > {q}"),
                    Some(content.clone().into_bytes()),
                )
            }
        }
    }
}

/// Why a tool call is not run: the model is told this as the call's result.
#[derive(Debug, thiserror::Error)]
enum BadCall {
    #[error("invalid arguments for {tool}: {source}")]
    Arguments { tool: String, source: serde_json::Error },
    #[error("no tool named `{0}`; the tools are shell, read_file and write_file")]
    NoSuchTool(String),
    #[error("no tools are offered in this setting")]
    NoTools,
}

fn parse_call(call: &ToolCall) -> Result<Action, BadCall> {
    let text = if call.arguments.trim().is_empty() { "{}" } else { &call.arguments };
    let bad = |source| BadCall::Arguments { tool: call.name.clone(), source };
    match call.name.as_str() {
        "shell" => {
            serde_json::from_str::<ShellArgs>(text).map(|a| Action::Shell(a.command)).map_err(bad)
        }
        "read_file" => {
            serde_json::from_str::<ReadArgs>(text).map(|a| Action::Read(a.path)).map_err(bad)
        }
        "write_file" => serde_json::from_str::<WriteArgs>(text)
            .map(|a| Action::Write(a.path, a.content))
            .map_err(bad),
        other => Err(BadCall::NoSuchTool(other.to_string())),
    }
}

/// The command of a reply without tool calls: its fenced ```bash / ```sh block.
fn fenced_command(text: &str, format: EditFormat) -> Option<String> {
    let blocks: Vec<String> = edit::fenced_blocks(text)
        .into_iter()
        .filter(|b| {
            let lang = b.info.split_whitespace().next().unwrap_or("");
            matches!(lang, "bash" | "sh" | "shell" | "console" | "")
        })
        .map(|b| b.body)
        .filter(|b| !b.trim().is_empty())
        .collect();
    match format {
        EditFormat::LastFenced => blocks.last().cloned(),
        EditFormat::FirstFenced => blocks.first().cloned(),
    }
}

/// A command whose last non-empty line is `DONE`: the command without it.
fn strip_done_line(cmd: &str) -> Option<String> {
    let lines: Vec<&str> = cmd.lines().collect();
    let last = lines.iter().rposition(|l| !l.trim().is_empty())?;
    (lines[last].trim() == "DONE").then(|| lines[..last].join("\n"))
}

/// One trial of the builtin loop in `container`.
pub async fn run_agent(
    ctx: &TerminalContext<'_>,
    container: &TrialContainer,
    on_step: &mut (dyn FnMut(TraceStep) + Send),
) -> AgentOutcome {
    let c = ctx.components;
    let mut t = Loop {
        ctx,
        container,
        hooks: Hooks::of(c),
        calls: Calls::new(ctx.calls),
        incidents: Incidents::default(),
        system: system_prompt(ctx),
        history: Vec::new(),
        verified: false,
    };
    let tool_specs = if c.tools { specs() } else { Vec::new() };
    let mut messages = t.first(0, &TerminalSession(1, &[]));
    let session_len = messages.len();
    let mut in_trace = TracedSoFar::default();
    let (mut steps, mut sessions) = (0u32, 1u32);
    let mut error = None;

    let end_reason = loop {
        if let Some(limit) = t.calls.budget_stop(steps) {
            break EndReason::Budget { limit };
        }
        if steps > 0
            && steps.is_multiple_of(ctx.settings.session_steps)
            && messages.len() > session_len
        {
            sessions += 1;
            messages = t.first(steps, &TerminalSession(sessions, &t.history));
            in_trace.messages = 0;
            in_trace.prompt = None;
        }
        steps += 1;
        let (mut step, reply) = match t
            .calls
            .call_model(&messages, &tool_specs, steps, sessions, &mut in_trace)
            .await
        {
            Ok(answered) => answered,
            Err((step, e, end)) => {
                on_step(step);
                error = Some(e);
                break end;
            }
        };
        messages.push(Message::assistant(reply.text.clone(), reply.tool_calls.clone()));
        let (actions, done_in_command) = t.actions(&reply, &mut step);
        let (to_send, mut notes) = t.run_actions(actions, steps, &mut step).await;
        let done = done_in_command || (edit::says_done(&reply.text) && reply.tool_calls.is_empty());
        if t.finishes(done, &mut step, &mut notes) {
            on_step(step);
            break EndReason::ModelDone;
        }
        in_trace.messages = messages.len() + to_send.len();
        messages.extend(to_send);
        notes.push(budget_line(&t.calls, steps));
        messages.push(Message::user(notes.join("\n\n")));
        on_step(step);
    };
    t.calls.outcome(end_reason, steps, sessions, t.incidents, error)
}

/// The system prompt: the builtin instructions of a container task are its own; an arm's
/// file is the arm's. Then how commands are run (tools on or off).
fn system_prompt(ctx: &TerminalContext<'_>) -> String {
    let c = ctx.components;
    let system = match &c.instructions {
        crate::experiment::components::Instructions::Builtin => TERMINAL_SYSTEM.to_string(),
        crate::experiment::components::Instructions::File(_) => {
            ctx.instructions.system.clone().unwrap_or_else(|| TERMINAL_SYSTEM.to_string())
        }
    };
    format!("{system}\n\n{}", if c.tools { SHELL_TOOL_NOTE } else { FENCED_NOTE })
}

/// The budget left, as the model is told it.
fn budget_line(calls: &Calls<'_>, steps: u32) -> String {
    let (s, t, secs) = calls.remaining(steps);
    format!("Budget left: {s} model calls, {t} tokens, {secs:.0} seconds.")
}

/// An action the model asked for: its tool call (None for a fenced command), and the action
/// or why it is not run.
type Asked<'r> = (Option<&'r ToolCall>, Result<Action, BadCall>);

/// What the steps of one trial's loop share.
struct Loop<'c, 'a> {
    ctx: &'c TerminalContext<'a>,
    container: &'c TrialContainer,
    hooks: Hooks,
    calls: Calls<'a>,
    incidents: Incidents,
    system: String,
    /// (step, command, exit code, output) of every command run, for the progress note and
    /// the loop guard.
    history: Vec<(u32, String, Option<i32>, String)>,
    /// Whether a done was already held for a verification turn.
    verified: bool,
}

impl Loop<'_, '_> {
    /// A session's first messages: the system prompt, then the task's prompt with the
    /// session's notes and the budget left.
    fn first(&self, steps: u32, session: &TerminalSession<'_>) -> Vec<Message> {
        let (ctx, c) = (self.ctx, self.ctx.components);
        let mut m = match &ctx.instructions.user_template {
            Some(t)
                if !matches!(
                    c.instructions,
                    crate::experiment::components::Instructions::Builtin
                ) =>
            {
                prompts::render_user(t, ctx.task, &[], c.tools)
            }
            Some(_) => ctx.task.prompt.trim().to_string(),
            None => ctx.task.prompt.trim().to_string(),
        };
        self.hooks.add_session_notes(&mut m, session);
        m.push_str("\n\n");
        m.push_str(&budget_line(&self.calls, steps));
        vec![Message::system(self.system.clone()), Message::user(m)]
    }

    /// The actions of a reply: its tool calls (tools on), else its fenced command; and
    /// whether a command ended with DONE (the line taken off it). Noted in `step`: that
    /// DONE, and tool calls that did not parse.
    fn actions<'r>(
        &mut self,
        reply: &'r ChatReply,
        step: &mut TraceStep,
    ) -> (Vec<Asked<'r>>, bool) {
        let c = self.ctx.components;
        let mut actions: Vec<Asked<'r>> = Vec::new();
        if !reply.tool_calls.is_empty() {
            self.incidents.tool_calls += reply.tool_calls.len() as u32;
            for call in &reply.tool_calls {
                let a = if c.tools { parse_call(call) } else { Err(BadCall::NoTools) };
                if a.is_err() {
                    self.incidents.invalid_tool_calls += 1;
                }
                actions.push((Some(call), a));
            }
        } else if !c.tools
            && let Some(cmd) = fenced_command(&reply.text, c.edit_format)
        {
            actions.push((None, Ok(Action::Shell(cmd))));
        }
        // DONE as the last line of a command is the model saying it is done once it has run.
        let mut done_in_command = false;
        for (_, a) in actions.iter_mut() {
            if let Ok(Action::Shell(cmd)) = a
                && let Some(rest) = strip_done_line(cmd)
            {
                done_in_command = true;
                *cmd = rest;
            }
        }
        actions.retain(|(call, a)| {
            call.is_some() || !matches!(a, Ok(Action::Shell(c)) if c.trim().is_empty())
        });
        if done_in_command {
            step.notes.push("DONE as the command's last line: done once it has run".into());
        }
        if !reply.unparsed_tool_calls.is_empty() {
            self.incidents.invalid_tool_calls += reply.unparsed_tool_calls.len() as u32;
            step.notes
                .push(format!("unparsed tool calls: {}", reply.unparsed_tool_calls.join("; ")));
        }
        (actions, done_in_command)
    }

    /// Run a step's actions in order, each recorded in `step`: the results of tool calls to
    /// send back, and the notes (a fenced command's result).
    async fn run_actions(
        &mut self,
        actions: Vec<Asked<'_>>,
        steps: u32,
        step: &mut TraceStep,
    ) -> (Vec<Message>, Vec<String>) {
        let mut to_send: Vec<Message> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        for (i, (call, action)) in actions.into_iter().enumerate() {
            let id = call.map(|c| c.id.clone()).unwrap_or_else(|| format!("fenced-{steps}-{i}"));
            let name = call.map(|c| c.name.clone()).unwrap_or_else(|| "shell".into());
            let arguments = call
                .map(|c| {
                    serde_json::from_str(&c.arguments)
                        .unwrap_or(serde_json::Value::String(c.arguments.clone()))
                })
                .unwrap_or(serde_json::Value::Null);
            let (ok, result) = match action {
                Err(e) => (false, json!({"error": e.to_string()}).to_string()),
                Ok(action) => self.run(action, steps, step).await,
            };
            step.tool_calls.push(ToolCallRecord {
                id: id.clone(),
                name: name.clone(),
                arguments,
                ok,
                result: result.clone(),
            });
            match call {
                Some(call) => to_send.push(Message::tool(call, result)),
                None => notes.push(result),
            }
        }
        (to_send, notes)
    }

    /// Run one action: not again when the loop guard sees the command just run, else in the
    /// container. Whether it succeeded, and its result as the model sees it.
    async fn run(&mut self, action: Action, steps: u32, step: &mut TraceStep) -> (bool, String) {
        let (command, stdin) = action.command();
        let repeat = self
            .history
            .last()
            .filter(|h| self.hooks.refuse_repeats() && h.1 == command && stdin.is_none())
            .cloned();
        if let Some((earlier, _, _, _)) = repeat {
            self.incidents.loop_guard_hits += 1;
            step.loop_guard = Some(LoopGuardHit {
                repeats_step: earlier,
                fingerprint: edit::fingerprint(&command),
                scored: None,
            });
            return (
                false,
                format!(
                    "Not run again: you ran exactly this command in step {earlier}. Try something else."
                ),
            );
        }
        let tail = self.ctx.settings.feedback_tail_bytes;
        let left = Duration::from_secs_f64(self.calls.remaining(steps).2.max(1.0));
        let out = self
            .container
            .shell(&command, left.min(COMMAND_TIMEOUT), TRACE_OUTPUT, stdin.as_deref())
            .await;
        let text = format!("{}{}", out.stdout.text(), out.stderr.text());
        let code = out.exit_code;
        let shown = if out.timed_out {
            format!("exit: timed out\n{}", crate::sandbox::process::tail(&text, tail))
        } else if self.hooks.report_results() {
            format!(
                "exit: {}\n{}",
                code.map(|c| c.to_string()).unwrap_or("killed".into()),
                crate::sandbox::process::tail(&text, tail)
            )
        } else {
            format!("exit: {}", code.map(|c| c.to_string()).unwrap_or("killed".into()))
        };
        self.history.push((steps, command, code, text.clone()));
        (code == Some(0), shown)
    }

    /// The end of a step: a reply with no command and no DONE is told how to run one; a
    /// done is held for one verification turn when `acceptance` says so. Whether the loop
    /// ends here (the model done).
    fn finishes(&mut self, done: bool, step: &mut TraceStep, notes: &mut Vec<String>) -> bool {
        let tools = self.ctx.components.tools;
        let acted = !step.tool_calls.is_empty();
        if !acted && !done {
            // Not a finish: the model is told how to run a command, and the loop goes on.
            self.incidents.unparsed_replies += 1;
            step.notes.push("reply holds no command and no DONE".into());
            notes.push(if tools { NO_COMMAND_TOOLS } else { NO_COMMAND_FENCED }.to_string());
        }
        if done {
            if self.hooks.guard_done() && !self.verified {
                self.verified = true;
                self.incidents.refused_done += 1;
                step.notes.push("done held for one verification turn".into());
                notes.push("Before you finish, check your work: run commands that show the task is done as the instruction asks. Then write DONE.".into());
            } else {
                return true;
            }
        }
        false
    }
}

/// A session's start as the hooks see it: the session and the commands run so far.
struct TerminalSession<'a>(u32, &'a [(u32, String, Option<i32>, String)]);

impl SessionFacts for TerminalSession<'_> {
    fn session(&self) -> u32 {
        self.0
    }

    fn progress(&self) -> String {
        progress_note(self.1)
    }
}

/// The commands of the trial so far and their exit codes.
fn progress_note(history: &[(u32, String, Option<i32>, String)]) -> String {
    let mut s = String::from("Progress so far (commands run, with their exit codes):");
    for (step, cmd, code, _) in history.iter().rev().take(20).rev() {
        let first = cmd.lines().next().unwrap_or("");
        s.push_str(&format!(
            "\n- step {step}: `{first}` -> {}",
            code.map(|c| c.to_string()).unwrap_or("killed".into())
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_of_a_reply_without_tools_is_its_fenced_shell_block() {
        let reply =
            "First:\n```bash\nls -la\n```\nthen\n```sh\ncat a.txt\n```\n```python\nprint(1)\n```";
        assert_eq!(fenced_command(reply, EditFormat::LastFenced).as_deref(), Some("cat a.txt\n"));
        assert_eq!(fenced_command(reply, EditFormat::FirstFenced).as_deref(), Some("ls -la\n"));
        assert_eq!(fenced_command("DONE", EditFormat::LastFenced), None);
    }

    #[test]
    fn done_as_a_commands_last_line_is_taken_off_it() {
        assert_eq!(strip_done_line("echo hi > a\nDONE\n").as_deref(), Some("echo hi > a"));
        assert_eq!(strip_done_line("  DONE  ").as_deref(), Some(""));
        assert_eq!(strip_done_line("echo DONE"), None);
        assert_eq!(strip_done_line("DONE\necho hi"), None);
    }

    #[test]
    fn tool_arguments_are_typed() {
        let call = |name: &str, args: &str| ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: args.into(),
        };
        assert!(
            matches!(parse_call(&call("shell", r#"{"command": "ls"}"#)), Ok(Action::Shell(c)) if c == "ls")
        );
        assert!(
            parse_call(&call("shell", r#"{"cmd": "ls"}"#))
                .unwrap_err()
                .to_string()
                .contains("unknown field")
        );
        assert!(
            parse_call(&call("run_tests", "{}")).unwrap_err().to_string().contains("no tool named")
        );
        let (cmd, stdin) =
            parse_call(&call("write_file", r#"{"path": "a b.txt", "content": "x"}"#))
                .unwrap()
                .command();
        assert_eq!(
            (cmd.as_str(), stdin.as_deref()),
            ("mkdir -p -- \"$(dirname -- 'a b.txt')\" && cat > 'a b.txt'", Some(&b"x"[..]))
        );
    }
}
