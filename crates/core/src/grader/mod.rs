//! Running a task's checks on a sandbox and reading passed/total.
//!
//! The grader is used in three places: `suite check` (stub and solution), the
//! `feedback` component and `run_tests` tool during a trial, and the final
//! grading of every trial's snapshot, which the harness always does itself.

pub mod parse;
pub mod suite_check;

use crate::record::GradingMode;
use crate::record::{CheckResult, Grade, RunnerReport, VerifierRecord};
use crate::sandbox::isolation::ChannelEnd;
use crate::sandbox::isolation::{self, JAIL_OUT_DIR, JAIL_RUNNER_DIR, Jail};
use crate::sandbox::process::{Confinement, ProcessOutcome, run_limited};
use crate::sandbox::{Sandbox, scratch};
use crate::suite::{CheckSpec, Task, runner_mode};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub mod channel;
mod out_of_process;

/// Bytes kept of each output stream of a check.
pub const OUTPUT_CAP: usize = 64 * 1024;

/// The Python interpreter behind `python3` on PATH, resolved once, with the
/// installation folders the sandbox must show it. On machines where `python3`
/// is a pyenv shim each call through it costs ~55 ms extra. `use_python`
/// (the command line's `--python`, or ABLATE_PYTHON) names another.
pub struct Python {
    pub executable: String,
    /// sys.prefix, sys.base_prefix, sys.exec_prefix (deduplicated).
    pub prefixes: Vec<PathBuf>,
}

static PYTHON: OnceLock<Python> = OnceLock::new();

/// Why the interpreter that runs the checks cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    #[error("cannot run `{exe}`: {source}")]
    CannotRun { exe: String, source: std::io::Error },
    #[error("`{exe}` failed ({status}): {stderr}")]
    Failed { exe: String, status: std::process::ExitStatus, stderr: String },
    #[error(transparent)]
    NoSandbox(#[from] isolation::NoSandbox),
    #[error("no jail uid: {0}")]
    NoJailUid(std::io::Error),
    #[error("cannot prepare the sandbox's folder: {0}")]
    Scratch(std::io::Error),
    #[error("cannot start the sandbox: {0}")]
    SandboxStart(std::io::Error),
    #[error(
        "the Python that runs the checks, {executable}, does not work in the sandbox as outside (outside, sys.prefix is {prefix}; {seen}). \
         The sandbox's unprivileged user must be able to read its installation: install it where every user can (for example \
         /usr or /opt, folders mode 0755), or name another with --python"
    )]
    NotInSandbox { executable: String, prefix: String, seen: String },
}

/// Ask `exe` for its real executable and its installation folders.
pub fn resolve(exe: &str) -> Result<Python, PythonError> {
    let out = std::process::Command::new(exe)
        .args(["-c", "import sys; print(sys.executable); print(sys.prefix); print(sys.base_prefix); print(sys.exec_prefix)"])
        .output()
        .map_err(|source| PythonError::CannotRun { exe: exe.into(), source })?;
    if !out.status.success() {
        return Err(PythonError::Failed {
            exe: exe.into(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().into(),
        });
    }
    let out = String::from_utf8_lossy(&out.stdout);
    let mut lines = out.lines().map(str::trim).filter(|l| !l.is_empty());
    let executable = lines.next().unwrap_or(exe).to_string();
    let mut prefixes: Vec<PathBuf> = Vec::new();
    for l in lines {
        let p = PathBuf::from(l);
        if !prefixes.contains(&p) {
            prefixes.push(p);
        }
    }
    Ok(Python { executable, prefixes })
}

/// Run checks with `exe` instead of `python3`, once it is shown to run:
/// called before the first check or harness resolves the interpreter (the
/// command line does); a later call changes nothing.
pub fn use_python(exe: &str) -> Result<(), PythonError> {
    let _ = PYTHON.set(resolve(exe)?);
    Ok(())
}

/// The interpreter checks run with: the one `use_python` named, else the
/// real one behind `python3` (or `python3` as it is, when it does not answer).
pub fn python_info() -> &'static Python {
    PYTHON.get_or_init(|| {
        resolve("python3")
            .unwrap_or_else(|_| Python { executable: "python3".into(), prefixes: vec![] })
    })
}

pub fn python() -> &'static str {
    &python_info().executable
}

/// Start the interpreter in the jail as checks start it and see that it finds
/// its own installation there (`sys.prefix` as outside) and can start itself
/// again (`sys.executable` executable by the jail's uid): a Python installed
/// under a folder the jail's uid cannot enter would otherwise run another
/// standard library, or fail every check that starts a subprocess.
pub fn preflight() -> Result<(), PythonError> {
    let iso = isolation::current()?;
    if !iso.is_isolated() {
        return Ok(());
    }
    let py = python_info();
    let Some(prefix) = py.prefixes.first() else { return Ok(()) };
    let lease = isolation::lease_uid().map_err(PythonError::NoJailUid)?;
    let dir = scratch::tempdir("preflight-").map_err(PythonError::Scratch)?;
    if isolation::is_root() {
        std::os::unix::fs::lchown(dir.path(), Some(lease.uid()), Some(lease.uid()))
            .map_err(PythonError::Scratch)?;
    }
    let jail = Jail { python_prefixes: &py.prefixes, ..Jail::of(dir.path(), lease.uid()) };
    let crate::record::Isolation::Bubblewrap { bwrap, uid_switch, .. } = iso else { return Ok(()) };
    let script = "import os, sys; print(sys.prefix); print(os.access(sys.executable, os.X_OK))";
    let bin_dir = Path::new(&py.executable).parent().map(Path::to_path_buf);
    let argv = jail.argv(
        Path::new(bwrap),
        *uid_switch,
        &[py.executable.clone(), "-I".into(), "-c".into(), script.into()],
        &isolation::check_env(bin_dir.as_deref()),
        None,
    );
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(PythonError::SandboxStart)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let (jail_prefix, runs_itself) = (lines.next().unwrap_or(""), lines.next() == Some("True"));
    if out.status.success() && jail_prefix == prefix.to_string_lossy() && runs_itself {
        return Ok(());
    }
    let seen = if out.status.success() {
        format!(
            "there it finds sys.prefix {jail_prefix:?}{}",
            if runs_itself { "" } else { " and cannot start sys.executable" }
        )
    } else {
        format!(
            "there it does not start ({}: {})",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
    };
    Err(PythonError::NotInSandbox {
        executable: py.executable.clone(),
        prefix: prefix.display().to_string(),
        seen,
    })
}

/// The runner script, written once per process into a folder the jail shows
/// read-only (inside the process's scratch folder).
fn runner_dir() -> std::io::Result<PathBuf> {
    static DIR: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);
    let mut guard = DIR.lock().unwrap();
    if let Some(d) =
        guard.as_ref().filter(|d| d.join("runner.py").is_file() && d.join("remote.py").is_file())
    {
        return Ok(d.clone());
    }
    let dir = scratch::tempdir("runner-")?.keep();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    for (name, text) in [("runner.py", RUNNER_PY), ("remote.py", REMOTE_PY)] {
        let file = dir.join(name);
        std::fs::write(&file, text)?;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))?;
    }
    *guard = Some(dir.clone());
    Ok(dir)
}

/// The grader's test runner (crates/core/src/grader/runner.py).
pub const RUNNER_PY: &str = include_str!("runner.py");

/// Out-of-process grading's two sides (crates/core/src/grader/remote.py).
pub const REMOTE_PY: &str = include_str!("remote.py");

/// Bytes of the runner's result file read back (a file that large is forged).
const CHANNEL_CAP: u64 = 4 << 20;

/// Canary names offered to the runner per check (it uses what it needs).
const CANARY_NAMES: usize = 512;

/// The text of the task's test files in the sandbox and their paths (for
/// choosing canary names that no real test has: a test module that fails to
/// import is reported by unittest under the module's own name), at most 4 MiB.
fn test_sources(sandbox: &Sandbox) -> String {
    let tests = sandbox.path().join("tests");
    let mut text = String::new();
    for rel in crate::digest::list_files(&tests).unwrap_or_default() {
        text.push_str(&rel.to_string_lossy());
        text.push('\n');
        if let Ok(bytes) = crate::sandbox::read_regular(&tests.join(&rel), 1 << 20) {
            text.push_str(&String::from_utf8_lossy(&bytes));
            text.push('\n');
        }
        if text.len() > 4 << 20 {
            break;
        }
    }
    text
}

/// Run the checks in the sandbox, under its isolation, in the task's mode.
/// An error is returned only when the command cannot be started at all (a
/// grader error); a failing, hanging or forging check is a result.
pub async fn run_checks(sandbox: &Sandbox, spec: &CheckSpec) -> std::io::Result<CheckResult> {
    match spec.mode {
        GradingMode::InProcess => run_tests(sandbox, spec, None).await,
        GradingMode::OutOfProcess => out_of_process::run(sandbox, spec).await,
    }
}

/// A script of the grader's folder as a check's process names it: at
/// /ablate in the jail, or where it is on the host.
fn grader_script(runner: &Path, jailed: bool, name: &str) -> String {
    if jailed {
        format!("{JAIL_RUNNER_DIR}/{name}")
    } else {
        runner.join(name).display().to_string()
    }
}

/// The environment a check's Python runs with.
fn python_env(py: &Python) -> Vec<(String, String)> {
    let bin_dir = Path::new(&py.executable).parent().map(Path::to_path_buf);
    isolation::check_env(bin_dir.as_deref())
}

/// The jail a grader's process of `sandbox` runs in: its workspace, its
/// `tests` (when it has them) read-only, the grader's folder, the Python
/// installation; no output folder, channel or other bind.
fn grader_jail<'a>(
    sandbox: &'a Sandbox,
    tests: &'a Path,
    runner: &'a Path,
    py: &'a Python,
) -> Jail<'a> {
    Jail {
        tests: tests.is_dir().then_some(tests),
        runner_dir: Some(runner),
        python_prefixes: &py.prefixes,
        ..Jail::of(sandbox.path(), sandbox.uid())
    }
}

/// The candidate's side of out-of-process grading, as the tests' process sees it.
struct Remote<'a> {
    channel: &'a ChannelEnd,
    modules: &'a [String],
}

/// Run the tests in `sandbox` through the grader's runner; with `remote`, the
/// candidate's modules are asked of its own process on the channel.
async fn run_tests(
    sandbox: &Sandbox,
    spec: &CheckSpec,
    remote: Option<Remote<'_>>,
) -> std::io::Result<CheckResult> {
    let isolation = isolation::current().map_err(std::io::Error::other)?;
    let (mode, args) = runner_mode(&spec.command, spec.parser).map_err(std::io::Error::other)?;
    let py = python_info();
    let runner = runner_dir()?;
    let jailed = isolation.is_isolated();
    let out_dir = results_dir(sandbox, jailed)?;
    let argv = runner_argv(py, &runner, out_dir.path(), jailed, mode, args);
    let env = python_env(py);
    let tests = sandbox.path().join("tests");
    let confine = Confinement {
        isolation,
        jail: Jail {
            out_dir: Some(out_dir.path()),
            channel: remote.as_ref().map(|r| r.channel),
            ..grader_jail(sandbox, &tests, &runner, py)
        },
        limits: spec.limits,
    };
    let key = channel::new_key();
    let canaries = if mode == "unittest" {
        channel::canary_names(CANARY_NAMES, &test_sources(sandbox))
    } else {
        Vec::new()
    };
    let modules = remote.as_ref().map_or(&[][..], |r| r.modules);
    let stdin =
        format!("{}\n", serde_json::json!({"key": key, "canaries": canaries, "remote": modules}));
    let out = run_limited(
        &argv,
        sandbox.path(),
        &env,
        spec.timeout,
        OUTPUT_CAP,
        Some(&confine),
        Some(stdin.as_bytes()),
    )
    .await?;
    let output = combined_output(&out);
    let channel_bytes =
        crate::sandbox::read_regular(&out_dir.path().join("results.jsonl"), CHANNEL_CAP)
            .unwrap_or_default();
    let canary_set: std::collections::HashSet<String> = canaries.into_iter().collect();
    let report = channel::read(&channel_bytes, CHANNEL_CAP, &key, &canary_set);
    let text = parse::parse(spec.parser, &output);
    let (verdict, failed_tests) = verdict(spec, &out, &text, &report, !canary_set.is_empty());
    Ok(CheckResult {
        mode: if remote.is_some() { GradingMode::OutOfProcess } else { GradingMode::InProcess },
        command: argv,
        exit_code: out.exit_code,
        timed_out: out.timed_out,
        passed: if out.timed_out { 0 } else { report.passed.min(spec.tests) },
        total: spec.tests,
        summary_found: text.total.is_some(),
        reported_total: text.total,
        runner: Some(report),
        forgery: verdict,
        failed_tests,
        duration_ms: out.duration.as_millis() as u64,
        output,
        output_truncated: out.stdout.truncated() || out.stderr.truncated(),
    })
}

/// The folder the runner writes its results into; when `jailed`, the sandbox handed over to
/// the jail's uid, and the folder too when we are root.
fn results_dir(sandbox: &Sandbox, jailed: bool) -> std::io::Result<tempfile::TempDir> {
    let out_dir = scratch::tempdir("out-")?;
    if jailed {
        sandbox.hand_over()?;
        if isolation::is_root() {
            std::os::unix::fs::lchown(out_dir.path(), Some(sandbox.uid()), Some(sandbox.uid()))?;
        }
    }
    Ok(out_dir)
}

/// The command that runs the tests through the grader's runner, which writes its results
/// into `out_dir` (as the jail sees it when `jailed`).
fn runner_argv(
    py: &Python,
    runner: &Path,
    out_dir: &Path,
    jailed: bool,
    mode: &str,
    args: &[String],
) -> Vec<String> {
    let runner_path = grader_script(runner, jailed, "runner.py");
    let result_path = if jailed {
        format!("{JAIL_OUT_DIR}/results.jsonl")
    } else {
        out_dir.join("results.jsonl").display().to_string()
    };
    // Isolated (no user site, no PYTHON* variables, no script or working folder
    // on sys.path) and no bytecode written; the runner reads none for the
    // workspace either (runner.py).
    let mut argv = vec![
        py.executable.clone(),
        "-I".to_string(),
        "-B".to_string(),
        runner_path,
        result_path,
        mode.to_string(),
    ];
    argv.extend(args.iter().cloned());
    argv
}

/// The check's stdout, then its stderr on a line of its own.
fn combined_output(out: &ProcessOutcome) -> String {
    let mut output = out.stdout.text();
    let err_text = out.stderr.text();
    if !err_text.is_empty() {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str(&err_text);
    }
    output
}

/// The forgery verdict, and the failed tests: the runner's when it reported, else those of
/// the output's text.
fn verdict(
    spec: &CheckSpec,
    out: &ProcessOutcome,
    text: &parse::Parsed,
    report: &RunnerReport,
    expect_canaries: bool,
) -> (Option<String>, Vec<String>) {
    let verdict =
        channel::judge(spec.tests, out.exit_code, out.timed_out, text, report, expect_canaries);
    let failed_tests = if report.tests > 0 || report.finished {
        report.failed.clone()
    } else {
        text.failed_tests.clone()
    };
    (verdict, failed_tests)
}

/// Final grading of a trial: the test files compared with the suite's; the
/// editable files taken as the snapshot and graded in a fresh copy of the
/// task (nothing else the trial left reaches the grade); the trial's
/// workspace searched for files named like the grader's own modules.
pub async fn grade(sandbox: &Sandbox, task: &Task) -> std::io::Result<Grade> {
    let tampered_tests = sandbox.restore_tests()?;
    let snapshot = sandbox.snapshot();
    let fresh = Sandbox::graded_copy(task, &snapshot)?;
    let mut check = run_checks(&fresh, &task.check).await?;
    let planted = check
        .runner
        .as_ref()
        .map(|r| sandbox.planted_modules(&r.grader_modules))
        .unwrap_or_default();
    // The record keeps a bounded tail; traces hold the step-level outputs.
    let tail = check.output_tail(4096).to_string();
    check.output = tail;
    Ok(Grade {
        check,
        snapshot_sha256: snapshot.sha256(),
        tampered_tests,
        planted_modules: planted,
        snapshot_notes: snapshot.notes,
        verifier: None,
    })
}

/// The grade of a container task's trial, from its verifier: one "test" that
/// passes when the reward reaches the threshold.
pub(crate) fn container_grade(v: VerifierRecord) -> Grade {
    let passed = v.passed && v.error.is_none();
    let check = CheckResult {
        mode: GradingMode::InProcess,
        command: v.command.clone(),
        exit_code: v.exit_code,
        timed_out: v.timed_out,
        passed: passed as u32,
        total: 1,
        summary_found: v.reward.is_some(),
        reported_total: None,
        runner: None,
        forgery: None,
        failed_tests: if passed || v.error.is_some() { Vec::new() } else { vec!["reward".into()] },
        duration_ms: v.duration_ms,
        output: v.output.clone(),
        output_truncated: false,
    };
    Grade {
        check,
        snapshot_sha256: String::new(),
        tampered_tests: Vec::new(),
        planted_modules: Vec::new(),
        snapshot_notes: Vec::new(),
        verifier: Some(v),
    }
}
