//! An external harness: the user's own agent command, run once per trial in
//! the sandboxed workspace, its model calls metered by the trial's gateway.
//!
//! The command sees the task through environment variables and one JSON file
//! (docs/external-harness.md), and the model through the conventional
//! variables (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OLLAMA_HOST`), which point
//! at the gateway: inside the jail at 127.0.0.1:11434 in a network namespace
//! of the trial's own (sandbox::netns), where nothing else can be reached.
//! The command ends by itself, or is stopped when the gateway says the budget
//! is spent or the upstream failed, or when the working time runs out. The
//! runner then grades the workspace exactly as for the builtin loop.

use crate::container::trial::TrialContainer;
use crate::experiment::config::{Budget, ModelSpec};
use crate::gateway::{self, TrialMeter};
use crate::grader::{self, OUTPUT_CAP, Python};
use crate::harness::agent::AgentOutcome;
use crate::model::ModelClient;
use crate::record::Isolation;
use crate::record::{BudgetLimit, CommandOutcome, EndReason, TraceStep};
use crate::sandbox::Sandbox;
use crate::sandbox::isolation::{self, JAIL_WORKSPACE, Jail};
use crate::sandbox::netns::{GATEWAY_PORT, TrialNet};
use crate::sandbox::process::{Confinement, run_until};
use crate::suite::Limits;
use crate::suite::Task;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the harness's files and the trial file appear in the jail.
pub(crate) const JAIL_HARNESS_DIR: &str = "/harness";
pub(crate) const JAIL_TRIAL_DIR: &str = "/ablate-trial";

/// Memory of an external harness's jail without `[harness] memory_mb`, MiB.
pub(crate) const HARNESS_MEMORY_MB: u64 = 4096;

/// Limits of an external harness's process tree: an agent (and the tests it
/// runs) needs more room than one check. Its memory is bounded by the jail's
/// memory cgroup where there is one, not by each process's address space,
/// which JIT runtimes (Bun, the JVM) reserve far past what they use.
pub(crate) fn harness_limits(budget: &Budget, memory_mb: u64) -> Limits {
    Limits {
        memory_mb,
        address_space: false,
        file_size_mb: 64,
        cpu_seconds: (budget.max_working_seconds.ceil() as u64).saturating_mul(2).max(60),
        processes: 128,
        open_files: 1024,
    }
}

pub struct ExternalContext<'a> {
    pub trial_id: &'a str,
    pub attempt: u32,
    pub task: &'a Task,
    /// The harness command as configured (`{harness}`, `{workspace}` expanded here).
    pub command: &'a [String],
    /// The harness's files, staged in one folder (shown at /harness).
    pub harness_dir: &'a Path,
    /// The arm's component values, by declared name.
    pub components: Vec<(String, String)>,
    pub budget: &'a Budget,
    pub model: &'a ModelSpec,
    pub client: Arc<dyn ModelClient>,
    pub seed: u64,
    /// The harness reaches a container task through the gateway's exec endpoint (`runs_in = "host"`).
    pub exec: bool,
    /// The interpreter `[harness] python` names, resolved (None: the checks' Python).
    pub python: Option<&'a Python>,
    /// `[harness] mounts`.
    pub mounts: &'a [String],
    /// `[harness] memory_mb`: the jail's memory.
    pub memory_mb: u64,
    /// `[gateway] hosted_tools`.
    pub hosted_tools: crate::record::harness_kind::HostedTools,
}

impl ExternalContext<'_> {
    /// The trial's meter: its budget, model and seed, each call reported to `on_step`.
    fn meter(&self, on_step: Box<dyn FnMut(TraceStep) + Send>) -> Arc<TrialMeter> {
        let meter = TrialMeter::new(
            self.trial_id.to_string(),
            self.attempt,
            self.model.clone(),
            self.client.clone(),
            self.budget.clone(),
            self.seed,
            on_step,
        );
        meter.set_hosted_tools(self.hosted_tools);
        meter
    }
}

/// What the trial measured, in the builtin loop's terms (one session, no
/// incidents of the builtin harness), and what the command did.
pub struct ExternalOutcome {
    pub measured: AgentOutcome,
    pub command: Option<CommandOutcome>,
}

/// Why an external harness's command could not be launched for a trial:
/// the trial's `harness_error`, in ablate's own words.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LaunchError {
    /// No sandbox for the command (and none was waived).
    #[error(transparent)]
    Isolation(#[from] crate::sandbox::isolation::NoSandbox),
    #[error(
        "an external harness runs in a network namespace of each trial's own, which needs root; run as root, or with --unsandboxed"
    )]
    NeedsRoot,
    #[error("cannot create the trial's network namespace: {0}")]
    Namespace(#[source] std::io::Error),
    #[error("cannot reach the container's network namespace: {0}")]
    ContainerNamespace(#[source] std::io::Error),
    /// The gateway's listener, the trial's files or their modes.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("cannot create the harness's working folder: {0}")]
    WorkingFolder(#[source] std::io::Error),
    #[error("cannot hand the workspace over: {0}")]
    HandOver(#[source] std::io::Error),
    #[error("cannot start the harness command {argv:?}: {source}")]
    Start { argv: Vec<String>, source: std::io::Error },
    #[error(transparent)]
    Container(#[from] crate::container::ContainerError),
}

/// Whether external harnesses can run under this isolation: in the sandbox,
/// each trial's network namespace needs root (checked at setup, once).
pub(crate) fn can_run(iso: &Isolation) -> Result<(), LaunchError> {
    if iso.is_isolated() && !isolation::is_root() {
        return Err(LaunchError::NeedsRoot);
    }
    Ok(())
}

/// What the harness's sandbox shows of this machine besides the system: its
/// interpreter (the one `[harness] python` names, else the checks' Python)
/// with its installation, and the `mounts`, each read-only at its own path.
pub struct HostView<'a> {
    pub python: &'a Python,
    pub shown: Vec<PathBuf>,
}

impl<'a> HostView<'a> {
    pub fn new(python: Option<&'a Python>, mounts: &[String]) -> HostView<'a> {
        let checks = grader::python_info();
        let python = python.unwrap_or(checks);
        let mut shown: Vec<PathBuf> = Vec::new();
        for p in checks
            .prefixes
            .iter()
            .chain(&python.prefixes)
            .cloned()
            .chain(mounts.iter().map(PathBuf::from))
        {
            if !shown.contains(&p) {
                shown.push(p);
            }
        }
        HostView { python, shown }
    }

    /// The command's environment's PATH starts at the interpreter's folder.
    fn bin_dir(&self) -> Option<PathBuf> {
        Path::new(&self.python.executable).parent().map(Path::to_path_buf)
    }
}

/// Before the first trial: the command's program, as the trial's jail shows
/// it (the harness files at /harness, the system, the interpreter and the
/// mounts), exists and can be executed there, and the interpreter `[harness]
/// python` names starts there as outside (its site imported, its own
/// sys.prefix). Err is the key at fault and what to do.
pub fn preflight(
    command: &[String],
    harness_dir: &Path,
    iso: &Isolation,
    view: &HostView<'_>,
    named_python: bool,
    mounts: &[String],
) -> Result<(), (&'static str, String)> {
    let Isolation::Bubblewrap { bwrap, uid_switch, .. } = iso else { return Ok(()) };
    let setup = |e: String| ("harness.command", e);
    let argv =
        expand_command(command, JAIL_HARNESS_DIR, JAIL_WORKSPACE, &view.python.executable, mounts);
    let program = argv.first().cloned().unwrap_or_default();
    let lease = isolation::lease_uid().map_err(|e| setup(format!("no jail uid: {e}")))?;
    let dir = crate::sandbox::scratch::tempdir("preflight-").map_err(|e| setup(e.to_string()))?;
    if isolation::is_root() {
        std::os::unix::fs::lchown(dir.path(), Some(lease.uid()), Some(lease.uid()))
            .map_err(|e| setup(e.to_string()))?;
    }
    let ro_binds = vec![(harness_dir.to_path_buf(), JAIL_HARNESS_DIR.to_string())];
    let jail = Jail {
        python_prefixes: &view.shown,
        ro_binds: &ro_binds,
        ..Jail::of(dir.path(), lease.uid())
    };
    let run = |check: &[String]| -> Result<std::process::Output, (&'static str, String)> {
        let full = jail.argv(
            Path::new(bwrap),
            *uid_switch,
            check,
            &isolation::check_env(view.bin_dir().as_deref()),
            None,
        );
        std::process::Command::new(&full[0])
            .args(&full[1..])
            .env_clear()
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| setup(format!("cannot start the sandbox: {e}")))
    };
    if named_python {
        python_starts_in_jail(view.python, &run)?;
    }
    let check = [
        "sh".to_string(),
        "-c".into(),
        "p=$(command -v -- \"$1\") && [ -x \"$p\" ]".into(),
        "preflight".into(),
        program.clone(),
    ];
    if run(&check)?.status.success() {
        return Ok(());
    }
    Err(setup(format!(
        "`{program}` cannot be run in the sandbox the harness runs in: it shows /usr, /etc, the harness's files at {JAIL_HARNESS_DIR} (list them in \
         `files` and name them as {{harness}}/...), the trial's workspace, the interpreter (`python`) with its installation and the `mounts`, and \
         nothing else of this machine"
    )))
}

/// What `preflight` refuses: the key at fault and what to do.
type Refusal = (&'static str, String);

/// The interpreter `[harness] python` names starts in the jail (`run`) as outside: its site
/// imported, its own sys.prefix, able to start sys.executable.
fn python_starts_in_jail(
    py: &Python,
    run: &dyn Fn(&[String]) -> Result<std::process::Output, Refusal>,
) -> Result<(), Refusal> {
    let script =
        "import os, site, sys; print(sys.prefix); print(os.access(sys.executable, os.X_OK))";
    let out = run(&[py.executable.clone(), "-c".into(), script.into()])?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let (prefix, runs_itself) = (lines.next().unwrap_or(""), lines.next() == Some("True"));
    let outside = py.prefixes.first().map(|p| p.display().to_string()).unwrap_or_default();
    if !(out.status.success() && prefix == outside && runs_itself) {
        let seen = if out.status.success() {
            format!(
                "there its sys.prefix is {prefix:?}{}",
                if runs_itself { "" } else { " and it cannot start sys.executable" }
            )
        } else {
            format!(
                "there it does not start: {}",
                crate::sandbox::process::tail(String::from_utf8_lossy(&out.stderr).trim(), 600)
            )
        };
        return Err((
            "harness.python",
            format!(
                "`{}` does not start in the sandbox as outside (outside, sys.prefix is {outside}; {seen}). The sandbox shows the \
                 interpreter's installation read-only to an unprivileged user: its files must be readable by every user (a venv made from \
                 a Python under a 0700 home folder is not; make it from one in /usr or /opt), and a folder it needs beyond its \
                 installation goes in `mounts`",
                py.executable
            ),
        ));
    }
    Ok(())
}

/// Expand `{harness}`, `{workspace}`, `{python}` and `{mounts[i]}` (the i-th
/// of `[harness] mounts`, absolute) in the command; a first word `python3` or
/// `python` becomes the interpreter too.
pub(crate) fn expand_command(
    command: &[String],
    harness: &str,
    workspace: &str,
    python: &str,
    mounts: &[String],
) -> Vec<String> {
    let mut argv: Vec<String> = command
        .iter()
        .map(|a| {
            let mut a = a
                .replace("{harness}", harness)
                .replace("{workspace}", workspace)
                .replace("{python}", python);
            for (i, m) in mounts.iter().enumerate() {
                a = a.replace(&format!("{{mounts[{i}]}}"), m);
            }
            a
        })
        .collect();
    if let Some(first) = argv.first_mut()
        && (first == "python3" || first == "python")
    {
        *first = python.to_string();
    }
    argv
}

/// The environment of the command: the check environment, the task, the
/// budget, the arm's components and the gateway.
fn task_environment(
    ctx: &ExternalContext<'_>,
    gateway_base: &str,
    key: &str,
    trial_file: &str,
    workspace: &str,
) -> Vec<(String, String)> {
    let mut env = isolation::check_env(HostView::new(ctx.python, ctx.mounts).bin_dir().as_deref());
    let b = ctx.budget;
    // A container task's tests are hidden until its verifier runs.
    let test_command = ctx
        .task
        .shown_test_command()
        .map_or_else(String::new, |command| serde_json::to_string(command).unwrap_or_default());
    let mut add = |k: &str, v: String| env.push((k.to_string(), v));
    add("ABLATE_TRIAL_ID", ctx.trial_id.to_string());
    add("ABLATE_TASK_KIND", ctx.task.kind.name().to_string());
    add("ABLATE_TRIAL_FILE", trial_file.to_string());
    add("ABLATE_TASK_ID", ctx.task.id.clone());
    add("ABLATE_TASK_PROMPT", ctx.task.prompt.trim().to_string());
    add("ABLATE_EDITABLE", ctx.task.editable.join("\n"));
    add("ABLATE_WORKSPACE", workspace.to_string());
    add("ABLATE_TEST_COMMAND", test_command);
    add("ABLATE_SEED", ctx.seed.to_string());
    add("ABLATE_MAX_STEPS", b.max_steps.to_string());
    add("ABLATE_MAX_OUTPUT_TOKENS", b.max_output_tokens_per_step.to_string());
    add("ABLATE_MAX_TOTAL_TOKENS", b.max_total_tokens.to_string());
    add("ABLATE_MAX_WORKING_SECONDS", b.max_working_seconds.to_string());
    add("ABLATE_MODEL", ctx.model.name.clone());
    add("OPENAI_BASE_URL", format!("{gateway_base}/v1"));
    add("OPENAI_API_BASE", format!("{gateway_base}/v1"));
    add("OPENAI_API_KEY", key.to_string());
    add("OLLAMA_HOST", format!("{gateway_base}/k/{key}"));
    // litellm's `ollama/` models read OLLAMA_API_BASE.
    add("OLLAMA_API_BASE", format!("{gateway_base}/k/{key}"));
    // Anthropic's SDK adds /v1/messages to the base itself.
    add("ANTHROPIC_BASE_URL", gateway_base.to_string());
    add("ANTHROPIC_API_KEY", key.to_string());
    // Gemini CLI and Google's SDK (google-genai) add /v1beta/models/... to the base.
    add("GOOGLE_GEMINI_BASE_URL", gateway_base.to_string());
    add("GEMINI_API_KEY", key.to_string());
    if ctx.exec {
        add("ABLATE_EXEC_URL", format!("{gateway_base}{}", gateway::EXEC_PATH));
    }
    for (name, value) in &ctx.components {
        add(&format!("ABLATE_COMPONENT_{}", name.to_ascii_uppercase()), value.clone());
    }
    env
}

/// The same facts as one JSON file.
fn trial_json(
    ctx: &ExternalContext<'_>,
    gateway_base: &str,
    key: &str,
    workspace: &str,
) -> serde_json::Value {
    serde_json::json!({
        "trial_id": ctx.trial_id,
        "attempt": ctx.attempt,
        "task": {
            "id": ctx.task.id,
            "kind": ctx.task.kind.name(),
            "prompt": ctx.task.prompt.trim(),
            "editable": ctx.task.editable,
            "tests": ctx.task.check.tests,
            "test_command": ctx.task.shown_test_command().unwrap_or_default(),
        },
        "workspace": workspace,
        "seed": ctx.seed,
        "budget": ctx.budget,
        "components": ctx.components.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect::<serde_json::Map<_, _>>(),
        "model": {
            "name": ctx.model.name,
            "openai_base_url": format!("{gateway_base}/v1"),
            "ollama_host": format!("{gateway_base}/k/{key}"),
            "anthropic_base_url": gateway_base,
            "api_key": key,
        },
        "exec_url": ctx.exec.then(|| format!("{gateway_base}{}", gateway::EXEC_PATH)),
    })
}

/// Run the harness command for one trial. Errors of ablate's own (cannot set
/// up the namespace, cannot start the command) come back in `error` with
/// end reason `harness_error`.
pub async fn run_external(
    ctx: &ExternalContext<'_>,
    sandbox: &Sandbox,
    on_step: Box<dyn FnMut(TraceStep) + Send>,
) -> ExternalOutcome {
    let meter = ctx.meter(on_step);
    let outcome = launch(ctx, sandbox, &meter).await;
    finish(&meter, outcome)
}

/// Run the harness command for one trial of a container task, in its
/// container (`runs_in = "container"`): the harness's files at /harness
/// (read-only), the gateway on 127.0.0.1:GATEWAY_PORT of the container's own
/// network namespace, the task as environment variables and /ablate-trial/trial.json.
pub(crate) async fn run_in_container(
    ctx: &ExternalContext<'_>,
    container: &TrialContainer,
    on_step: Box<dyn FnMut(TraceStep) + Send>,
) -> ExternalOutcome {
    let meter = ctx.meter(on_step);
    let outcome = launch_in_container(ctx, container, &meter).await;
    finish(&meter, outcome)
}

/// Run the harness command for one trial of a container task on the host
/// (`runs_in = "host"`): in the sandbox as for a Python task, with an empty
/// working folder of its own, reaching the container only through the
/// gateway's exec endpoint.
pub(crate) async fn run_on_host(
    ctx: &ExternalContext<'_>,
    container: &TrialContainer,
    on_step: Box<dyn FnMut(TraceStep) + Send>,
) -> ExternalOutcome {
    let meter = ctx.meter(on_step);
    meter.allow_exec(container.handle());
    let outcome = match Sandbox::empty(&ctx.task.id) {
        Ok(sandbox) => launch(ctx, &sandbox, &meter).await,
        Err(e) => Err(LaunchError::WorkingFolder(e)),
    };
    // Whatever the commands started in the container ends with the harness.
    container.stop_all().await;
    finish(&meter, outcome)
}

async fn launch_in_container(
    ctx: &ExternalContext<'_>,
    container: &TrialContainer,
    meter: &Arc<TrialMeter>,
) -> Result<CommandOutcome, LaunchError> {
    let pid = container.pid().await?;
    let net = TrialNet::inside(pid).map_err(LaunchError::ContainerNamespace)?;
    let listener = net.listener.try_clone()?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let server = tokio::spawn(gateway::serve(listener, meter.clone()));
    let base = format!("http://127.0.0.1:{GATEWAY_PORT}");
    let workspace = container.workdir().unwrap_or(".").to_string();
    let trial_file = format!("{JAIL_TRIAL_DIR}/trial.json");
    let result = async {
        let trial_dir = crate::sandbox::scratch::tempdir("trial-")?;
        let json = trial_json(ctx, &base, meter.key(), &workspace);
        std::fs::write(
            trial_dir.path().join("trial.json"),
            serde_json::to_vec_pretty(&json).unwrap_or_default(),
        )?;
        container.copy_in(trial_dir.path(), JAIL_TRIAL_DIR).await?;
        // The command as written: inside the container `python3` is the image's.
        let argv: Vec<String> = ctx
            .command
            .iter()
            .map(|a| {
                a.replace("{harness}", JAIL_HARNESS_DIR)
                    .replace("{workspace}", &workspace)
                    .replace("{python}", "python3")
            })
            .collect();
        let mut env = task_environment(ctx, &base, meter.key(), &trial_file, &workspace);
        env.retain(|(k, _)| !matches!(k.as_str(), "PATH" | "HOME" | "TMPDIR" | "LANG" | "LC_ALL"));
        let hard = Duration::from_secs_f64(
            (ctx.budget.max_working_seconds * 10.0 + 600.0).min(7.0 * 86_400.0),
        );
        let start = Instant::now();
        let out =
            container.exec_until(&argv, &env, hard, OUTPUT_CAP, stop_at_budget(ctx, meter)).await;
        let out = match out {
            Ok(out) => out,
            Err(source) => return Err(LaunchError::Start { argv, source }),
        };
        Ok(command_outcome(argv, out, meter, start))
    }
    .await;
    server.abort();
    let _ = tokio::time::timeout(Duration::from_secs(10), meter.settled()).await;
    drop(net);
    result
}

/// How long a harness may go on after its budget is spent (every model call
/// and command is refused by then) to write its outputs before it is stopped.
pub(crate) const GRACE: Duration = Duration::from_secs(5);

/// Resolves GRACE after the gateway wants the harness stopped, or its working time is spent.
async fn stop_at_budget(ctx: &ExternalContext<'_>, meter: &Arc<TrialMeter>) {
    spent(ctx, meter).await;
    tokio::time::sleep(GRACE).await;
}

async fn spent(ctx: &ExternalContext<'_>, meter: &Arc<TrialMeter>) {
    let max = ctx.budget.max_working_seconds;
    tokio::select! {
        _ = meter.stopped() => {}
        _ = async {
            loop {
                let left = max - meter.working().as_secs_f64();
                if left <= 0.0 {
                    meter.exhaust(BudgetLimit::WorkingSeconds);
                    return;
                }
                tokio::time::sleep(Duration::from_secs_f64(left.min(1.0))).await;
            }
        } => {}
    }
}

/// The command's outcome for the record.
fn command_outcome(
    command: Vec<String>,
    out: crate::sandbox::process::ProcessOutcome,
    meter: &TrialMeter,
    start: Instant,
) -> CommandOutcome {
    let tail = |c: &crate::sandbox::process::Capture| {
        crate::sandbox::process::tail(&c.text(), 4096).to_string()
    };
    let summary = meter.summary();
    let (metrics, metrics_refused) = metric_lines(&out.stdout.text());
    let stopped_by = if out.stopped || out.timed_out {
        Some(match (summary.exhausted, &summary.provider_error) {
            (Some(limit), _) => format!("budget: {}", limit.name()),
            (None, Some(_)) => "provider_error".to_string(),
            _ => "timeout".to_string(),
        })
    } else {
        None
    };
    CommandOutcome {
        command,
        exit_code: out.exit_code,
        stopped_by,
        wall_seconds: start.elapsed().as_secs_f64(),
        stdout_tail: tail(&out.stdout),
        stderr_tail: tail(&out.stderr),
        first_model_call_seconds: summary.first_request.map(|d| d.as_secs_f64()),
        refused_requests: summary.refused_requests,
        exec_calls: summary.exec_calls,
        embedding_calls: summary.embedding_calls,
        metrics,
        metrics_refused,
    }
}

/// The prefix of a metric line on a harness's standard output.
pub(crate) const METRIC_LINE: &str = "ablate-metric";

/// The most metrics a trial records (and refusals it notes), and the longest
/// name: a harness is not trusted to keep its record small.
pub(crate) const MAX_METRICS: usize = 64;
pub(crate) const MAX_METRIC_NAME: usize = 64;

/// The harness's reported metrics: every stdout line `ablate-metric NAME VALUE`
/// (NAME of letters, digits, `_`, `.` and `-`, at most [`MAX_METRIC_NAME`];
/// VALUE a finite number; the last line of a name counts; at most
/// [`MAX_METRICS`] names), and the lines that start so but do not read, with
/// why (at most [`MAX_METRICS`] of them).
pub(crate) fn metric_lines(stdout: &str) -> (std::collections::BTreeMap<String, f64>, Vec<String>) {
    let mut metrics = std::collections::BTreeMap::new();
    let mut refused = Vec::new();
    for line in stdout.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix(METRIC_LINE) else { continue };
        if !rest.starts_with(char::is_whitespace) {
            continue;
        }
        match metric_line(rest, &metrics) {
            Ok((name, v)) => {
                metrics.insert(name.to_string(), v);
            }
            Err(why) if refused.len() < MAX_METRICS => {
                let shown = crate::sandbox::process::tail(line, 200);
                refused.push(format!("{shown:?}: {why}"));
            }
            Err(_) => {}
        }
    }
    (metrics, refused)
}

/// One metric line after its prefix: (NAME, VALUE), or why not.
fn metric_line<'a>(
    rest: &'a str,
    metrics: &std::collections::BTreeMap<String, f64>,
) -> Result<(&'a str, f64), String> {
    let parts: Vec<&str> = rest.split_whitespace().collect();
    let [name, value] = parts.as_slice() else {
        return Err(format!("not `{METRIC_LINE} NAME VALUE`"));
    };
    let named = name.len() <= MAX_METRIC_NAME && crate::record::is_metric_name(name);
    if !named {
        return Err(format!("NAME is not letters, digits, _ . - (at most {MAX_METRIC_NAME})"));
    }
    let v = value.parse::<f64>().ok().filter(|v| v.is_finite());
    let Some(v) = v else { return Err("the value is not a finite number".into()) };
    if metrics.len() >= MAX_METRICS && !metrics.contains_key(*name) {
        return Err(format!("more than {MAX_METRICS} metrics"));
    }
    Ok((name, v))
}

/// The trial's outcome from what the gateway counted and how the command ended.
fn finish(
    meter: &Arc<TrialMeter>,
    outcome: Result<CommandOutcome, LaunchError>,
) -> ExternalOutcome {
    let summary = meter.summary();
    let (end_reason, error) = match (&outcome, summary.exhausted, &summary.provider_error) {
        (Err(e), _, _) => (EndReason::HarnessError, Some(e.to_string())),
        // A harness the gateway refused before any model call never ran the
        // experiment: an infrastructure error naming the refusal, never a failure.
        (Ok(_), None, None) if summary.steps == 0 && summary.unsupported.is_some() => (
            EndReason::HarnessError,
            summary.unsupported.as_ref().map(|u| {
                format!("the gateway refused the harness's request and no model call was made: {u}")
            }),
        ),
        (_, Some(limit), _) => (EndReason::Budget { limit }, None),
        (_, _, Some(e)) if summary.request_timed_out => {
            (EndReason::RequestTimeout, Some(e.clone()))
        }
        (_, _, Some(e)) => (EndReason::ProviderError, Some(e.clone())),
        (Ok(_), None, None) => (EndReason::CommandExited, None),
    };
    ExternalOutcome {
        measured: AgentOutcome {
            end_reason,
            steps: summary.steps,
            sessions: 1,
            tokens: summary.tokens,
            tokens_estimated_calls: summary.tokens_estimated_calls,
            working: summary.working,
            wait: summary.wait,
            cost_usd: summary.cost_usd,
            incidents: Default::default(),
            error,
            fingerprints: summary.fingerprints.clone(),
            delivery: Some(summary.delivery.clone()),
        },
        command: outcome.ok(),
    }
}

async fn launch(
    ctx: &ExternalContext<'_>,
    sandbox: &Sandbox,
    meter: &Arc<TrialMeter>,
) -> Result<CommandOutcome, LaunchError> {
    let iso = isolation::current()?;
    let jailed = iso.is_isolated();
    // The gateway's listener: inside the trial's own network namespace, or on
    // the host's loopback when unsandboxed.
    let (net, listener, base) = if jailed {
        can_run(iso)?;
        let net = TrialNet::create().map_err(LaunchError::Namespace)?;
        let std_listener = net.listener.try_clone()?;
        (Some(net), std_listener, format!("http://127.0.0.1:{GATEWAY_PORT}"))
    } else {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = l.local_addr()?.port();
        (None, l, format!("http://127.0.0.1:{port}"))
    };
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let server = tokio::spawn(gateway::serve(listener, meter.clone()));
    let result = command(ctx, sandbox, meter, iso, net.as_ref(), &base).await;
    server.abort();
    // Calls already forwarded finish and write their trace lines (bounded).
    let _ = tokio::time::timeout(Duration::from_secs(10), meter.settled()).await;
    result
}

async fn command(
    ctx: &ExternalContext<'_>,
    sandbox: &Sandbox,
    meter: &Arc<TrialMeter>,
    iso: &Isolation,
    net: Option<&TrialNet>,
    base: &str,
) -> Result<CommandOutcome, LaunchError> {
    let jailed = iso.is_isolated();
    let trial_dir = crate::sandbox::scratch::tempdir("trial-")?;
    let (harness, workspace, trial_file) = if jailed {
        (
            JAIL_HARNESS_DIR.to_string(),
            JAIL_WORKSPACE.to_string(),
            format!("{JAIL_TRIAL_DIR}/trial.json"),
        )
    } else {
        let ws = sandbox.path().display().to_string();
        (
            ctx.harness_dir.display().to_string(),
            ws,
            trial_dir.path().join("trial.json").display().to_string(),
        )
    };
    let json = trial_json(ctx, base, meter.key(), &workspace);
    let file = trial_dir.path().join("trial.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&json).unwrap_or_default())?;
    set_mode(trial_dir.path(), 0o755)?;
    set_mode(&file, 0o644)?;
    let view = HostView::new(ctx.python, ctx.mounts);
    let argv =
        expand_command(ctx.command, &harness, &workspace, &view.python.executable, ctx.mounts);
    let env = task_environment(ctx, base, meter.key(), &trial_file, &workspace);
    if jailed {
        sandbox.hand_over().map_err(LaunchError::HandOver)?;
    }
    let tests = sandbox.path().join("tests");
    let ro_binds: Vec<(PathBuf, String)> = vec![
        (ctx.harness_dir.to_path_buf(), JAIL_HARNESS_DIR.to_string()),
        (trial_dir.path().to_path_buf(), JAIL_TRIAL_DIR.to_string()),
    ];
    let confine = Confinement {
        isolation: iso,
        jail: Jail {
            workspace: sandbox.path(),
            tests: tests.is_dir().then_some(tests.as_path()),
            runner_dir: None,
            out_dir: None,
            uid: sandbox.uid(),
            python_prefixes: &view.shown,
            ro_binds: &ro_binds,
            netns: net.map(|n| n.fd()),
            channel: None,
        },
        limits: harness_limits(ctx.budget, ctx.memory_mb),
    };
    let max = ctx.budget.max_working_seconds;
    let stop = stop_at_budget(ctx, meter);
    // A backstop far beyond the working time (waits do not count against it).
    let hard = Duration::from_secs_f64((max * 10.0 + 600.0).min(7.0 * 86_400.0));
    let start = Instant::now();
    let out =
        match run_until(&argv, sandbox.path(), &env, hard, OUTPUT_CAP, Some(&confine), None, stop)
            .await
        {
            Ok(out) => out,
            Err(source) => return Err(LaunchError::Start { argv, source }),
        };
    Ok(command_outcome(argv, out, meter, start))
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Stage the harness's files (config `files`, resolved) into one folder: a
/// folder's contents at its root, a file under its own name.
pub(crate) fn stage_files(files: &[PathBuf], into: &Path) -> std::io::Result<()> {
    for f in files {
        let meta = std::fs::metadata(f)
            .map_err(|e| std::io::Error::other(format!("{}: {e}", f.display())))?;
        if meta.is_dir() {
            crate::sandbox::copy_tree(f, into)?;
        } else {
            let name = f
                .file_name()
                .ok_or_else(|| std::io::Error::other(format!("{}: no file name", f.display())))?;
            std::fs::copy(f, into.join(name))?;
        }
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(into, std::fs::Permissions::from_mode(0o755))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: two metrics (the later `tool_calls` counts), a refused value and a refused
    /// name; a line that merely starts with the word is not a metric line.
    #[test]
    fn metric_lines_are_read_and_bad_ones_named() {
        let out = "hello\nablate-metric tool_calls 3\n  ablate-metric cost.usd 0.25\nablate-metric tool_calls 4\nablate-metric x NaN\nablate-metric a b c\nablate-metrics 1 2\n";
        let (m, refused) = metric_lines(out);
        assert_eq!(
            m.into_iter().collect::<Vec<_>>(),
            vec![("cost.usd".to_string(), 0.25), ("tool_calls".to_string(), 4.0)]
        );
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(
            refused[0].contains("not a finite number") && refused[1].contains("NAME VALUE"),
            "{refused:?}"
        );
    }

    /// A harness cannot grow its record without bound: 70 names keep the first 64 in sorted
    /// order of arrival (m00..m63), the other 6 are refused by name; a 65-character name is
    /// refused; a name seen before may be updated past the cap.
    #[test]
    fn metric_lines_are_capped() {
        let mut out: String = (0..70).map(|i| format!("ablate-metric m{i:02} {i}\n")).collect();
        out.push_str(&format!("ablate-metric {} 1\nablate-metric m00 99\n", "x".repeat(65)));
        let (m, refused) = metric_lines(&out);
        assert_eq!(m.len(), MAX_METRICS);
        assert_eq!((m["m00"], m["m63"]), (99.0, 63.0));
        assert!(!m.contains_key("m64"));
        assert_eq!(refused.len(), 7, "{refused:?}");
        assert!(refused[0].contains("m64") && refused[0].contains("more than 64 metrics"));
        assert!(refused[6].contains("at most 64"), "{refused:?}");
    }

    #[test]
    fn placeholders_expand() {
        let cmd = ["sh", "{harness}/run.sh", "--in={workspace}", "{mounts[1]}/bin/codex"]
            .map(String::from);
        let mounts = ["/opt/a".to_string(), "/opt/agents".to_string()];
        assert_eq!(
            expand_command(&cmd, "/harness", "/workspace", "/py", &mounts),
            vec!["sh", "/harness/run.sh", "--in=/workspace", "/opt/agents/bin/codex"]
        );
    }
}
