//! The agent loop: model calls under the budget, with each harness component
//! applied as the arm sets it.
//!
//! A step is one model call. After it the harness applies the reply (edit,
//! tool calls), then decides what to send back: tool results, feedback
//! (`feedback`), a loop-guard note (`loop_guard`). When it has nothing to send,
//! or the model says DONE, the model is ending the trial: with `acceptance`
//! on, the checks must pass or the "done" is refused; off, it ends.
//! Bare (everything off) is therefore one call.

pub use super::calls::AgentOutcome;
use super::calls::{CallContext, Calls};
use super::edit::{self, Extracted};
use super::hooks::{Hooks, SessionFacts};
use super::{prompts, tools};
use crate::experiment::Components;
use crate::experiment::config::{Budget, HarnessSettings, ModelSpec};
use crate::experiment::instructions::ArmPrompts;
use crate::grader;
use crate::model::{ChatReply, Message, ModelClient};
use crate::record::CheckResult;
use crate::record::omit::TracedSoFar;
use crate::record::{EndReason, Incidents, LoopGuardHit, ToolCallRecord, TraceStep};
use crate::sandbox::Sandbox;
use crate::suite::Task;
use std::collections::HashMap;

pub struct TrialContext<'a> {
    pub trial_id: &'a str,
    pub attempt: u32,
    pub task: &'a Task,
    pub components: &'a Components,
    /// The system prompt and user template (builtin or the arm's file).
    pub instructions: &'a ArmPrompts,
    pub budget: &'a Budget,
    pub settings: &'a HarnessSettings,
    pub model: &'a ModelSpec,
    pub client: &'a dyn ModelClient,
    pub seed: u64,
}

impl<'a> TrialContext<'a> {
    fn call_context(&self) -> CallContext<'a> {
        CallContext {
            trial_id: self.trial_id,
            attempt: self.attempt,
            budget: self.budget,
            model: self.model,
            client: self.client,
            seed: self.seed,
            prefill: self.instructions.prefill.as_deref(),
            stop: &self.instructions.stop,
        }
    }
}

/// Bytes of one file inlined into a prompt.
pub(crate) const FILE_CAP: u64 = 64 * 1024;

struct Loop<'a> {
    ctx: &'a TrialContext<'a>,
    sandbox: &'a Sandbox,
    /// What the arm's components do at the loop's points.
    hooks: Hooks,
    calls: Calls<'a>,
    incidents: Incidents,
    /// fingerprint -> (step, score when checked)
    seen: HashMap<String, (u32, Option<(u32, u32)>)>,
    /// (step, score) of each submission, for the progress file.
    results: Vec<(u32, Option<(u32, u32)>)>,
    last_check: Option<(String, CheckResult)>,
}

impl<'a> Loop<'a> {
    /// The task's own files for the first message: only files the task ships
    /// (never ones the candidate created), each cut at FILE_CAP bytes.
    fn files(&self) -> Vec<(String, String)> {
        self.sandbox.task_files(FILE_CAP)
    }

    /// A session's messages: the system prompt (if any) and the task, with the hooks' notes.
    fn session_start(&self, session: u32, steps: u32) -> Vec<Message> {
        let c = self.ctx.components;
        let mut first = self.ctx.instructions.first_message(self.ctx.task, &self.files(), c.tools);
        self.hooks.add_session_notes(&mut first, &AgentSession { lp: self, session, steps });
        let system = self.ctx.instructions.system_message(c.tools).map(Message::system);
        system.into_iter().chain([Message::user(first)]).collect()
    }

    /// Run the checks on the current snapshot (cached per snapshot).
    async fn check(&mut self) -> Result<CheckResult, ChecksNotRun> {
        let snap = self.sandbox.snapshot_sha256();
        if let Some((s, r)) = &self.last_check
            && *s == snap
        {
            return Ok(r.clone());
        }
        let r =
            grader::run_checks(self.sandbox, &self.ctx.task.check).await.map_err(ChecksNotRun)?;
        self.last_check = Some((snap, r.clone()));
        Ok(r)
    }
}

/// The checks could not be run (not: they ran and failed); the trial ends as a harness error.
#[derive(Debug, thiserror::Error)]
#[error("cannot run the checks: {0}")]
pub(crate) struct ChecksNotRun(#[source] std::io::Error);

/// For the trace: a check result with its output trimmed to the tail shown.
fn traced(check: &CheckResult, tail: usize) -> CheckResult {
    let mut c = check.clone();
    c.output = check.output_tail(tail.max(4096)).to_string();
    c
}

/// One trial of the builtin loop: until the budget, the checks or the model
/// end it, each step asks the model (`call_model`), applies its edit
/// (`apply_edit`), answers its tool calls (`answer_tools`) and then sees
/// whether the trial ends (`settle`: feedback after an edit, acceptance of a
/// "done"). Each step's trace line goes to `on_step` as the step ends.
pub async fn run_agent(
    ctx: &TrialContext<'_>,
    sandbox: &Sandbox,
    on_step: &mut (dyn FnMut(TraceStep) + Send),
) -> AgentOutcome {
    let mut lp = Loop {
        ctx,
        sandbox,
        hooks: Hooks::of(ctx.components),
        calls: Calls::new(ctx.call_context()),
        incidents: Incidents::default(),
        seen: HashMap::new(),
        results: Vec::new(),
        last_check: None,
    };
    let tool_specs = if ctx.components.tools { tools::specs() } else { Vec::new() };
    let mut messages = lp.session_start(1, 0);
    // Messages a session starts with (system, if any, and the task).
    let session_len = messages.len();
    // What earlier trace lines already hold, left out of each step's `request`.
    let mut in_trace = TracedSoFar::default();
    let mut steps = 0u32;
    let mut sessions = 1u32;
    let mut error = None;

    let end_reason = loop {
        if let Some(limit) = lp.calls.budget_stop(steps) {
            break EndReason::Budget { limit };
        }
        // Session boundary: reset the conversation; carry the progress file if on.
        if steps > 0
            && steps.is_multiple_of(ctx.settings.session_steps)
            && messages.len() > session_len
        {
            sessions += 1;
            messages = lp.session_start(sessions, steps);
            in_trace.messages = 0;
            in_trace.prompt = None;
        }
        steps += 1;
        let (mut step, reply) =
            match lp.calls.call_model(&messages, &tool_specs, steps, sessions, &mut in_trace).await
            {
                Ok(answered) => answered,
                Err((step, e, end)) => {
                    on_step(step);
                    error = Some(e);
                    break end;
                }
            };
        messages.push(Message::assistant(reply.text.clone(), reply.tool_calls.clone()));
        let mut turn = Turn::default();
        let edited = lp.apply_edit(&reply.text, steps, &mut step, &mut turn);
        lp.answer_tools(&reply, &mut step, &mut turn).await;
        match lp.settle(&reply, steps, edited, &mut step, &mut turn).await {
            Some(Ok(end)) => {
                on_step(step);
                break end;
            }
            Some(Err(e)) => {
                let e = e.to_string();
                step.error = Some(e.clone());
                on_step(step);
                error = Some(e);
                break EndReason::HarnessError;
            }
            None => {}
        }
        // The next request starts with these: this request's messages, the
        // reply (in this line's `reply`) and the tool results (in `tool_calls`).
        in_trace.messages = messages.len() + turn.to_send.len();
        messages.extend(turn.to_send);
        if !turn.user_notes.is_empty() {
            messages.push(Message::user(turn.user_notes.join("\n\n")));
        }
        on_step(step);
    };

    lp.calls.outcome(end_reason, steps, sessions, lp.incidents, error)
}

/// A session's start as the hooks see it: the progress file is what was submitted, how it
/// scored, and the tests the last check failed.
struct AgentSession<'a> {
    lp: &'a Loop<'a>,
    session: u32,
    steps: u32,
}

impl SessionFacts for AgentSession<'_> {
    fn session(&self) -> u32 {
        self.session
    }

    fn progress(&self) -> String {
        let failed =
            self.lp.last_check.as_ref().map(|(_, r)| r.failed_tests.clone()).unwrap_or_default();
        prompts::progress_note(self.steps, &self.lp.results, &failed)
    }
}

/// What a step sends back before the next request: tool results, then the
/// harness's notes as one user message.
#[derive(Default)]
struct Turn {
    to_send: Vec<Message>,
    user_notes: Vec<String>,
}

impl Loop<'_> {
    /// The reply's edit, unless the loop guard catches a repeat. Whether a
    /// file was written.
    fn apply_edit(
        &mut self,
        text: &str,
        steps: u32,
        step: &mut TraceStep,
        turn: &mut Turn,
    ) -> bool {
        let (c, sandbox) = (self.ctx.components, self.sandbox);
        // With stop sequences (a prompt file's `stop`, e.g. "\n```"), a reply that ends inside the
        // fence its prefill opened is closed where generation stopped.
        let closed;
        let text = if !self.ctx.instructions.stop.is_empty() && edit::ends_in_open_fence(text) {
            closed = format!("{}\n```\n", text.trim_end_matches('\n'));
            closed.as_str()
        } else {
            text
        };
        match edit::extract(text, c.edit_format, sandbox.editable()) {
            Extracted::Edit { file, content } => {
                let fp = edit::fingerprint(&content);
                match self.seen.get(&fp).copied().filter(|_| self.hooks.refuse_repeats()) {
                    Some((earlier, scored)) => {
                        self.incidents.loop_guard_hits += 1;
                        step.loop_guard =
                            Some(LoopGuardHit { repeats_step: earlier, fingerprint: fp, scored });
                        turn.user_notes.push(prompts::loop_guard_message(earlier, scored));
                        false
                    }
                    None => match sandbox.write_editable(&file, &content) {
                        Ok(name) => {
                            step.edits.push(name);
                            self.seen.entry(fp.clone()).or_insert((steps, None));
                            self.results.push((steps, None));
                            true
                        }
                        Err(refusal) => {
                            self.incidents.path_refusals += 1;
                            step.notes.push(format!("edit refused: {refusal}"));
                            turn.user_notes.push(format!("Your edit was refused: {refusal}."));
                            false
                        }
                    },
                }
            }
            Extracted::Ambiguous(info) => {
                self.incidents.unparsed_replies += 1;
                step.notes.push(format!("code block `{info}` names no editable file"));
                turn.user_notes.push(format!(
                    "Your code block does not say which file it is for. Put the file name after the language: ```python {}",
                    sandbox.editable()[0]
                ));
                false
            }
            Extracted::None => false,
        }
    }

    /// Each tool call answered with a result carrying its id; tool calls the
    /// model wrote but that could not be read, noted.
    async fn answer_tools(&mut self, reply: &ChatReply, step: &mut TraceStep, turn: &mut Turn) {
        let tail = self.ctx.settings.feedback_tail_bytes;
        self.incidents.tool_calls += reply.tool_calls.len() as u32;
        for call in &reply.tool_calls {
            let args_value = serde_json::from_str(&call.arguments)
                .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()));
            let (ok, result) = if !self.ctx.components.tools {
                self.incidents.invalid_tool_calls += 1;
                (
                    false,
                    tools::CallError {
                        kind: "tools_unavailable",
                        message: "no tools are offered in this setting".into(),
                    }
                    .to_result(),
                )
            } else {
                match tools::validate(&call.name, &call.arguments) {
                    Err(e) => {
                        self.incidents.invalid_tool_calls += 1;
                        (false, e.to_result())
                    }
                    Ok(tools::Call::ListFiles) => (true, self.sandbox.list().join("\n")),
                    Ok(tools::Call::ReadFile { path }) => match self.sandbox.read(&path) {
                        Ok(text) => (true, text),
                        Err(refusal) => {
                            self.incidents.path_refusals += 1;
                            (
                                false,
                                tools::CallError {
                                    kind: "path_refused",
                                    message: refusal.to_string(),
                                }
                                .to_result(),
                            )
                        }
                    },
                    Ok(tools::Call::RunTests) => match self.check().await {
                        Ok(r) => {
                            step.check = Some(traced(&r, tail));
                            (true, prompts::check_summary(&r, tail))
                        }
                        Err(e) => (
                            false,
                            tools::CallError { kind: "check_failed", message: e.to_string() }
                                .to_result(),
                        ),
                    },
                }
            };
            step.tool_calls.push(ToolCallRecord {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: args_value,
                ok,
                result: result.clone(),
            });
            turn.to_send.push(Message::tool(call, result));
        }
        if !reply.unparsed_tool_calls.is_empty() {
            self.incidents.invalid_tool_calls += reply.unparsed_tool_calls.len() as u32;
            step.notes
                .push(format!("unparsed tool calls: {}", reply.unparsed_tool_calls.join("; ")));
            turn.user_notes.push(prompts::unparsed_tool_call_message(&reply.unparsed_tool_calls));
        }
    }

    /// Does the trial end here? Feedback: the harness runs the checks after
    /// each edit. Then a "done" (or a reply leaving nothing to send) ends the
    /// trial, or with acceptance on, only if the checks pass. Some(Ok(end))
    /// ends it; Some(Err) when the checks could not run.
    async fn settle(
        &mut self,
        reply: &ChatReply,
        steps: u32,
        edited: bool,
        step: &mut TraceStep,
        turn: &mut Turn,
    ) -> Option<Result<EndReason, ChecksNotRun>> {
        let tail = self.ctx.settings.feedback_tail_bytes;
        if edited && self.hooks.report_results() {
            let r = match self.score(steps, step).await {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            if r.all_passed() {
                return Some(Ok(EndReason::ChecksPassed));
            }
            turn.user_notes.push(prompts::feedback_message(&r, tail));
        }
        let done = edit::says_done(&reply.text);
        let nothing_to_send = turn.to_send.is_empty() && turn.user_notes.is_empty();
        if !edited
            && reply.tool_calls.is_empty()
            && !done
            && reply.unparsed_tool_calls.is_empty()
            && step.loop_guard.is_none()
        {
            self.incidents.unparsed_replies += 1;
            step.notes.push("reply holds no code, no tool call and no DONE".into());
        }
        if !((done && reply.tool_calls.is_empty()) || nothing_to_send) {
            return None;
        }
        if !self.hooks.guard_done() {
            return Some(Ok(EndReason::ModelDone));
        }
        let r = match self.score(steps, step).await {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        if r.all_passed() {
            return Some(Ok(EndReason::ChecksPassed));
        }
        self.incidents.refused_done += 1;
        step.notes.push(format!("done refused: {}/{} tests pass", r.passed, r.total));
        turn.user_notes.push(prompts::acceptance_refusal(&r));
        None
    }

    /// Run the checks for the harness's own judgement, remember the score and
    /// put the result in the step's trace line.
    async fn score(
        &mut self,
        steps: u32,
        step: &mut TraceStep,
    ) -> Result<CheckResult, ChecksNotRun> {
        let r = self.check().await?;
        record_score(self, steps, &r);
        step.check = Some(traced(&r, self.ctx.settings.feedback_tail_bytes));
        Ok(r)
    }
}

/// Remember the score of the current snapshot for the loop guard and the
/// progress file.
fn record_score(lp: &mut Loop<'_>, step: u32, r: &CheckResult) {
    let score = Some((r.passed, r.total));
    if let Some(last) = lp.results.last_mut()
        && last.0 == step
    {
        last.1 = score;
    }
    for v in lp.seen.values_mut() {
        if v.0 == step {
            v.1 = score;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::{BoxFuture, CallOutcome, ChatRequest, ModelError};
    use crate::record::Tokens;
    use std::sync::Mutex;

    /// Records the messages of each request and answers without code.
    struct Recorder(Mutex<Vec<Vec<Message>>>);

    impl ModelClient for Recorder {
        fn chat<'a>(
            &'a self,
            req: &'a ChatRequest,
            operation_id: String,
        ) -> BoxFuture<'a, CallOutcome> {
            self.0.lock().unwrap().push(req.messages.clone());
            Box::pin(async move {
                CallOutcome::scripted(
                    operation_id,
                    "DONE",
                    Tokens { input: 1, output: 1, cached: 0 },
                )
            })
        }

        fn identity(&self) -> BoxFuture<'_, Result<Option<String>, ModelError>> {
            Box::pin(async { Ok(None) })
        }
    }

    /// An experiment on the tiny suite with these `arms` (TOML), one model, two steps.
    pub(crate) fn experiment(arms: &str) -> crate::experiment::config::Experiment {
        let root = crate::repo_root().join("tests/fixtures/suites/tiny");
        let text = format!(
            "[experiment]\nname = \"p\"\nsuite = \"{}\"\ntrials = 1\nseed = 1\n\n[budget]\nmax_steps = 2\nmax_output_tokens_per_step = 100\nmax_total_tokens = 10000\nmax_working_seconds = 60\n\n[[models]]\nname = \"m\"\nprovider = \"openai\"\nmodel = \"m\"\nendpoint = \"http://127.0.0.1:1\"\ntemperature = 0.0\n\n{arms}",
            root.display()
        );
        crate::experiment::config::load_str(&root.join("exp.toml"), &text).unwrap()
    }

    /// The messages of the first request of a trial of `components` on add-two under `prompts`.
    pub(crate) async fn first_request(
        prompts: &ArmPrompts,
        components: &Components,
    ) -> (Vec<Message>, Task) {
        let exp = experiment("[arms.b]\n");
        let task = crate::suite::load(&exp.suite_path).unwrap().task("add-two").unwrap().clone();
        let sandbox = Sandbox::create(&task).unwrap();
        let client = Recorder(Mutex::new(Vec::new()));
        let ctx = TrialContext {
            trial_id: "t",
            attempt: 1,
            task: &task,
            components,
            instructions: prompts,
            budget: &exp.budget,
            settings: &exp.harness,
            model: &exp.models[0],
            client: &client,
            seed: 1,
        };
        let outcome = run_agent(&ctx, &sandbox, &mut |_| {}).await;
        assert_eq!(outcome.steps, 1, "DONE at once: one call");
        let first = client.0.lock().unwrap()[0].clone();
        (first, task)
    }

    #[tokio::test]
    async fn builtin_instructions_send_the_default_system_prompt_and_the_task_message() {
        let (messages, task) = first_request(&ArmPrompts::builtin(), &Components::bare()).await;
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].content, prompts::DEFAULT_SYSTEM);
        // The whole builtin task message (its text is pinned in prompts.rs), over the task's files
        // as a fresh sandbox shows them, tools off (bare).
        let files = Sandbox::create(&task).unwrap().task_files(FILE_CAP);
        assert_eq!(
            files.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>(),
            ["add.py", "tests/__init__.py", "tests/test_add.py"]
        );
        assert_eq!(messages[1].content, prompts::task_message(&task, &files, false));
        assert!(messages[1].content.contains("Editable file(s): add.py"));
    }

    #[tokio::test]
    async fn a_user_template_without_system_sends_one_user_message() {
        let card = ArmPrompts {
            system: None,
            user_template: Some("Complete this:\n```python\n{code}\n```".into()),
            prefill: None,
            stop: Vec::new(),
        };
        let (messages, task) = first_request(&card, &Components::bare()).await;
        assert_eq!(messages.len(), 1, "no system message");
        let code = std::fs::read_to_string(task.workspace_dir().join("add.py")).unwrap();
        assert_eq!(messages[0].content, format!("Complete this:\n```python\n{}\n```", code.trim()));
    }
}
