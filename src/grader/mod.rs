//! Running a task's checks on a sandbox and reading passed/total.
//!
//! The grader is used in three places: `suite check` (stub and solution), the
//! `feedback` component and `run_tests` tool during a trial, and the final
//! grading of every trial's snapshot, which the harness always does itself.

pub mod parse;

use crate::sandbox::process::run_limited;
use crate::sandbox::Sandbox;
use crate::suite::CheckSpec;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::OnceLock;

/// Bytes kept of each output stream of a check.
pub const OUTPUT_CAP: usize = 64 * 1024;

/// The result of one run of a task's checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// The argv as run (after interpreter resolution).
    pub command: Vec<String>,
    /// None when killed (timeout) or ended by a signal.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub passed: u32,
    /// Never below the task's declared test count.
    pub total: u32,
    /// Whether the runner's own summary line was found.
    pub summary_found: bool,
    pub failed_tests: Vec<String>,
    pub duration_ms: u64,
    /// Captured output (stdout then stderr), capped; see OUTPUT_CAP.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub output: String,
    pub output_truncated: bool,
}

impl CheckResult {
    pub fn all_passed(&self) -> bool {
        self.total > 0 && self.passed == self.total && !self.timed_out
    }

    /// The last `max_bytes` bytes of output, on a char boundary.
    pub fn output_tail(&self, max_bytes: usize) -> &str {
        let s = self.output.as_str();
        if s.len() <= max_bytes {
            return s;
        }
        let mut start = s.len() - max_bytes;
        while !s.is_char_boundary(start) {
            start += 1;
        }
        &s[start..]
    }
}

/// The Python interpreter behind `python3` on PATH, resolved once: on machines
/// where `python3` is a pyenv shim each call through it costs ~55 ms extra.
/// `ABLATE_PYTHON` overrides it.
pub fn python() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        if let Ok(p) = std::env::var("ABLATE_PYTHON") {
            return p;
        }
        std::process::Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "python3".to_string())
    })
}

fn resolve_argv(command: &[String]) -> Vec<String> {
    let mut argv = command.to_vec();
    if let Some(first) = argv.first_mut() {
        if first == "python3" || first == "python" {
            *first = python().to_string();
        }
    }
    argv
}

/// Run the checks in `dir`. An error is returned only when the command cannot
/// be started at all (a grader error); a failing or hanging check is a result.
pub async fn run_checks(dir: &Path, spec: &CheckSpec) -> std::io::Result<CheckResult> {
    let argv = resolve_argv(&spec.command);
    let env = vec![
        ("PYTHONDONTWRITEBYTECODE".to_string(), "1".to_string()),
        ("PYTHONHASHSEED".to_string(), "0".to_string()),
        ("PYTHONUNBUFFERED".to_string(), "1".to_string()),
    ];
    let out = run_limited(&argv, dir, &env, spec.timeout, OUTPUT_CAP).await?;
    let mut output = out.stdout.text();
    let err_text = out.stderr.text();
    if !err_text.is_empty() {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str(&err_text);
    }
    let parsed = parse::parse(spec.parser, &output);
    let total = parsed.total.unwrap_or(0).max(spec.tests);
    let passed = if out.timed_out { 0 } else { parsed.passed.min(total) };
    Ok(CheckResult {
        command: argv,
        exit_code: out.exit_code,
        timed_out: out.timed_out,
        passed,
        total,
        summary_found: parsed.total.is_some(),
        failed_tests: parsed.failed_tests,
        duration_ms: out.duration.as_millis() as u64,
        output,
        output_truncated: out.stdout.truncated() || out.stderr.truncated(),
    })
}

/// Final grading of a trial: put the tests back, run the checks on the final
/// snapshot and identify it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grade {
    pub check: CheckResult,
    /// sha256 of the graded editable files (see Sandbox::snapshot_sha256).
    pub snapshot_sha256: String,
    /// Test files the trial changed; restored before grading.
    pub tampered_tests: Vec<String>,
}

pub async fn grade(sandbox: &Sandbox, spec: &CheckSpec) -> std::io::Result<Grade> {
    let tampered_tests = sandbox.restore_tests()?;
    let snapshot_sha256 = sandbox.snapshot_sha256();
    let mut check = run_checks(sandbox.path(), spec).await?;
    // The record keeps a bounded tail; traces hold the step-level outputs.
    let tail = check.output_tail(4096).to_string();
    check.output = tail;
    Ok(Grade { check, snapshot_sha256, tampered_tests })
}
