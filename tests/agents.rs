//! Conformance of the CLI agents people ablate (examples/harnesses/, installed
//! pinned by `make agents` into target/agents): each runs with its stock
//! settings through the trial's gateway against a scripted upstream, on the
//! tiny suite's add-two task. It passes; it stops `budget_exhausted` at a step
//! limit; and Codex's effort ablation is "not delivered" against a provider
//! that ignores reasoning and an effect against one that honours it.
//!
//! Without the agents installed these tests are skipped loudly; with CI set
//! they fail.

mod common;

use ablate::record::delivery::DeliveryCheck;
use ablate::record::{BudgetLimit, EndReason, TrialStatus};
use ablate::report::analysis::EffectVerdict;
use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// An agent of examples/harnesses, and where `make agents` puts its program.
struct Agent {
    /// The folder of its wrapper under examples/harnesses.
    dir: &'static str,
    /// Its program, under target/agents.
    program: &'static str,
    /// What makes it answer without working (`--version`, `--help`).
    answers: &'static str,
    /// A Python program of target/agents/venv (its interpreter is then the harness's `python`).
    python: bool,
}

const fn agent(dir: &'static str, program: &'static str) -> Agent {
    Agent { dir, program, answers: "--version", python: false }
}

const CODEX: Agent = agent(
    "codex",
    "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
);
const CLAUDE: Agent =
    agent("claude-code", "node_modules/@anthropic-ai/claude-code-linux-x64/claude");
const OPENCODE: Agent = agent("opencode", "node_modules/opencode-linux-x64/bin/opencode");
const GEMINI: Agent = agent("gemini-cli", "node_modules/@google/gemini-cli/bundle/gemini.js");
const AIDER: Agent = Agent { python: true, ..agent("aider", "venv/bin/aider") };
const MINI: Agent =
    Agent { python: true, answers: "--help", ..agent("mini-swe-agent", "venv/bin/mini") };

/// The agent's program when it answers; None (skipped loudly) when it is not installed.
fn installed(agent: &Agent) -> Option<PathBuf> {
    let program = root().join("target/agents").join(agent.program);
    // A bundle runs under the machine's node.
    let mut cmd = if agent.program.ends_with(".js") {
        let mut c = std::process::Command::new("node");
        c.arg(&program);
        c
    } else {
        std::process::Command::new(&program)
    };
    let answers = cmd
        .arg(agent.answers)
        .env("HOME", std::env::temp_dir())
        .output()
        .is_ok_and(|o| o.status.success());
    if answers {
        return Some(program);
    }
    if std::env::var_os("CI").is_some() {
        panic!("{} does not answer --version: run make agents (make test does)", program.display());
    }
    eprintln!("\n*** SKIPPED: {} needs make agents (npm and PyPI) ***\n", agent.dir);
    None
}

/// The `[harness]` table of `agent`'s example, with its declared components.
fn harness(agent: &Agent, components: &str) -> String {
    let python = if agent.python {
        format!("python = \"{}\"\n", root().join("target/agents/venv/bin/python").display())
    } else {
        String::new()
    };
    format!(
        "[harness]\nkind = \"external\"\ncommand = [\"sh\", \"{{harness}}/run.sh\", \"{{mounts[0]}}/{}\"]\nfiles = [\"{}/\"]\nmounts = [\"{}\"]\n{python}{components}\n",
        agent.program,
        root().join("examples/harnesses").join(agent.dir).display(),
        root().join("target/agents").display(),
    )
}

/// The shell tool the request offers, and the arguments that run `cmd` with it.
fn shell_call(body: &Value, cmd: &str) -> Option<(String, String)> {
    let tools = body["tools"].as_array()?;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    let (name, args) = if names.contains(&"exec_command") {
        ("exec_command", json!({"cmd": cmd}))
    } else if names.contains(&"Bash") {
        ("Bash", json!({"command": cmd, "description": "run"}))
    } else if names.contains(&"bash") {
        ("bash", json!({"command": cmd, "description": "run"}))
    } else if names.contains(&"run_shell_command") {
        ("run_shell_command", json!({"command": cmd}))
    } else {
        return None;
    };
    Some((name.to_string(), args.to_string()))
}

/// Whether the conversation already holds a tool result.
fn has_tool_result(body: &Value) -> bool {
    body["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
}

const FIX: &str = "printf 'def add(a, b):\\n    return a + b\\n' > add.py";
/// The fix as an agent without tools (aider) takes it: the file, whole, in a fenced block.
const WHOLE_FIX: &str = "add.py\n```python\ndef add(a, b):\n    return a + b\n```\n";
/// What mini-swe-agent's model runs to say it is done.
const SUBMIT: &str = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT";

/// The scripted model: where the request offers a shell, one call that fixes add.py, then
/// "Done."; any other request (a title, a summary) gets a line of text. `fixes(body)` false:
/// the model answers without fixing.
fn upstream(fixes: fn(&Value) -> bool) -> Handler {
    Arc::new(move |path, body, _| {
        if let Some(m) = meta(path) {
            return m;
        }
        let asks_submit = body.to_string().contains("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT");
        match shell_call(body, FIX) {
            Some((name, args)) if !has_tool_result(body) && fixes(body) => {
                openai_tool("call_1", &name, &args)
            }
            Some(_) if asks_submit => {
                let (name, args) = shell_call(body, SUBMIT).expect("a shell tool");
                openai_tool("call_2", &name, &args)
            }
            None if fixes(body) && !has_tool_result(body) => openai_text(WHOLE_FIX),
            _ => openai_text("Done."),
        }
    })
}

/// A model that keeps calling the shell: only the step limit stops the agent.
fn endless() -> Handler {
    Arc::new(|path, body, n| {
        meta(path).unwrap_or_else(|| match shell_call(body, "ls") {
            Some((name, args)) => openai_tool(&format!("call_{n}"), &name, &args),
            // An agent without tools (aider) gets an edit that never applies, and asks again.
            None => openai_text(UNAPPLIABLE),
        })
    })
}

/// A search/replace edit whose search text is not in the file.
const UNAPPLIABLE: &str =
    "add.py\n```python\n<<<<<<< SEARCH\nno such line\n=======\nx = 1\n>>>>>>> REPLACE\n```\n";

async fn run_agent(
    dir: &Path,
    server: &Server,
    harness: &str,
    arms: &str,
    max_steps: u32,
    model_extra: &str,
) -> Ran {
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, arms);
    cfg.top_extra = harness;
    cfg.max_steps = max_steps;
    cfg.max_working_seconds = 120.0;
    cfg.model_extra = model_extra;
    run(&cfg.write(dir), &dir.join("results")).await
}

/// Stock settings pass, in `min_steps` model calls at least; false: not installed (skipped).
async fn stock(agent: &Agent, components: &str, min_steps: u32) -> bool {
    if installed(agent).is_none() {
        return false;
    }
    let h = harness(agent, components);
    let dir = tempfile::tempdir().unwrap();
    let server = start(upstream(|_| true)).await;
    let ran = run_agent(dir.path(), &server, &h, "[arms.stock]\n", 8, "").await;
    let r = &ran.records[0];
    let out = r.harness_command.as_ref().map(|c| c.stderr_tail.clone()).unwrap_or_default();
    assert_eq!(r.status, TrialStatus::Passed, "{}: {r:?}\n{out}", agent.dir);
    assert!(r.steps >= min_steps, "{}: {r:?}", agent.dir);
    true
}

/// An endless model is stopped at 3 steps.
async fn stopped_at_its_budget(agent: &Agent, components: &str, arm: &str) {
    let h = harness(agent, components);
    let dir = tempfile::tempdir().unwrap();
    let server = start(endless()).await;
    let ran = run_agent(dir.path(), &server, &h, arm, 3, "").await;
    let r = &ran.records[0];
    assert_eq!(r.status, TrialStatus::BudgetExhausted, "{}: {r:?}", agent.dir);
    assert_eq!(r.end_reason, EndReason::Budget { limit: BudgetLimit::Steps });
    assert_eq!(r.steps, 3, "{}", agent.dir);
}

/// Stock settings pass (a shell call, then its answer); an endless model is stopped at 3 steps.
async fn stock_and_budget(agent: &Agent, components: &str) {
    if stock(agent, components, 2).await {
        stopped_at_its_budget(agent, components, "[arms.stock]\n").await;
    }
}

const CODEX_COMPONENTS: &str = "components.effort = [\"low\", \"high\"]\ncomponents.instructions = [\"builtin\", \"terse.md\"]\ncomponents.web_search = [\"default\", \"disabled\"]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_stock_and_stops_at_its_budget() {
    stock_and_budget(&CODEX, CODEX_COMPONENTS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_effort_is_not_delivered_where_ignored_and_an_effect_where_honoured() {
    if installed(&CODEX).is_none() {
        return;
    }
    let h = harness(&CODEX, CODEX_COMPONENTS);
    let arms = "[arms.low]\neffort = \"low\"\n[arms.high]\neffort = \"high\"\n[[matrix.pairs]]\ncontrol = \"low\"\ntreatment = \"high\"\n";
    // The model fixes the code only when asked for high effort.
    let high = |b: &Value| b["reasoning_effort"] == "high";

    let dir = tempfile::tempdir().unwrap();
    let server = start(upstream(high)).await;
    let ran = run_agent(dir.path(), &server, &h, arms, 8, "reasoning = false\n").await;
    assert!(ran.records.iter().all(|r| r.status == TrialStatus::Failed), "{:?}", ran.records);
    let report = ablate::report::analyse_dir(&ran.dir, None).unwrap();
    let e = &report.ablations[0];
    let EffectVerdict::NotDelivered { fields } = &e.verdict else {
        panic!(
            "{:?} {:?} {:#?}",
            e.verdict,
            e.delivery,
            ran.records.iter().map(|r| &r.delivery).collect::<Vec<_>>()
        )
    };
    assert_eq!(fields.iter().map(|f| f.field.as_str()).collect::<Vec<_>>(), ["reasoning"]);

    let dir = tempfile::tempdir().unwrap();
    let server = start(upstream(high)).await;
    let ran = run_agent(dir.path(), &server, &h, arms, 8, "").await;
    for r in &ran.records {
        let want = if r.arm == "high" { TrialStatus::Passed } else { TrialStatus::Failed };
        assert_eq!(r.status, want, "{r:?}");
    }
    let report = ablate::report::analyse_dir(&ran.dir, None).unwrap();
    let e = &report.ablations[0];
    assert!(
        matches!(&e.delivery, DeliveryCheck::Delivered { fields } if fields.contains(&"reasoning".to_string())),
        "{:?}",
        e.delivery
    );
    assert_eq!(e.delta, 1.0, "{:?}", e.verdict);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_stock_and_stops_at_its_budget() {
    stock_and_budget(&CLAUDE, "components.append_system_prompt = [\"none\", \"terse.md\"]\ncomponents.disallowed_tools = [\"none\", \"WebFetch\"]")
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_runs_stock_and_stops_at_its_budget() {
    stock_and_budget(&OPENCODE, "components.agent = [\"build\", \"plan\"]").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aider_runs_stock_and_stops_at_its_budget() {
    // aider takes its edits from the reply's text: one call. With search/replace edits that do
    // not apply it asks the model again (its reflections), until the step limit stops it.
    let components = "components.edit_format = [\"whole\", \"diff\"]";
    if stock(&AIDER, components, 1).await {
        stopped_at_its_budget(&AIDER, components, "[arms.diff]\nedit_format = \"diff\"\n").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mini_swe_agent_runs_stock_and_stops_at_its_budget() {
    // A shell call that fixes, then the one that submits.
    let components = "components.config = [\"mini\", \"mini_textbased\"]";
    if stock(&MINI, components, 2).await {
        stopped_at_its_budget(&MINI, components, "[arms.stock]\n").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_runs_stock_and_stops_at_its_budget() {
    stock_and_budget(&GEMINI, "components.system_md = [\"builtin\", \"terse.md\"]").await;
}
