//! What grading a trial gives, as the record holds it: the result of one run
//! of a task's checks (`CheckResult`, with what the grader's own runner
//! reported, `RunnerReport`) and the final grade of a trial's snapshot
//! (`Grade`). The grader (`grader`) produces them; the record owns their
//! format (docs/records.md).

use serde::{Deserialize, Serialize};

/// Where the candidate's code runs while a task's checks run (`[check] mode`
/// in task.toml; docs/sandbox.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GradingMode {
    /// The tests import the candidate's modules into their own process: any
    /// test works, and the runner's defences decide and detect.
    #[default]
    InProcess,
    /// The candidate's modules run in a jailed process of their own and the
    /// tests, in another, call them with plain data only: nothing the
    /// candidate's code does can reach a test, an assertion or a result.
    OutOfProcess,
}

impl GradingMode {
    pub fn name(self) -> &'static str {
        match self {
            GradingMode::InProcess => "in_process",
            GradingMode::OutOfProcess => "out_of_process",
        }
    }
}

/// The result of one run of a task's checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// Where the candidate's code ran (records before modes existed: in process).
    #[serde(default)]
    pub mode: GradingMode,
    /// The argv as run inside the sandbox (the grader's runner, then the task's arguments).
    pub command: Vec<String>,
    /// None when killed (timeout) or ended by a signal.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// Tests the grader's runner saw pass.
    pub passed: u32,
    /// The task's declared test count.
    pub total: u32,
    /// Whether the runner's printed summary line was found.
    pub summary_found: bool,
    /// The test count of the printed summary (`Ran N tests`), when found.
    #[serde(default)]
    pub reported_total: Option<u32>,
    /// What the grader's runner reported on its own result file.
    #[serde(default)]
    pub runner: Option<RunnerReport>,
    /// Set when the outcome was forged (a patched framework, a summary that
    /// contradicts the runner, an early exit 0): the trial is a policy violation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forgery: Option<String>,
    pub failed_tests: Vec<String>,
    pub duration_ms: u64,
    /// Captured output (stdout then stderr), capped; see OUTPUT_CAP.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub output: String,
    pub output_truncated: bool,
}

impl CheckResult {
    /// Passed: the process exited 0 in time, the runner reported every declared
    /// test as passed and finished, the printed summary agrees, nothing forged.
    pub fn all_passed(&self) -> bool {
        let runner_ok = self.runner.as_ref().is_some_and(|r| {
            r.finished
                && r.tests == self.total
                && r.passed == self.total
                && r.fixture_errors.is_empty()
        });
        self.total > 0
            && self.passed == self.total
            && !self.timed_out
            && self.exit_code == Some(0)
            && self.forgery.is_none()
            && runner_ok
            && self.reported_total == Some(self.total)
    }

    /// The last `max_bytes` bytes of output, on a char boundary.
    pub(crate) fn output_tail(&self, max_bytes: usize) -> &str {
        let mut start = self.output.len().saturating_sub(max_bytes);
        while !self.output.is_char_boundary(start) {
            start += 1;
        }
        &self.output[start..]
    }
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
    /// Files the trial left at the top of its workspace named like a module
    /// the grader imports (`unittest.py`, ...), noted only: final grading
    /// runs a fresh copy of the task with the editable files alone, so they
    /// never reach the grade (an honest harness may leave a `types.py`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub planted_modules: Vec<String>,
    /// Editable files taken as empty in the snapshot, and why (a symlink, a FIFO, too large).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub snapshot_notes: Vec<String>,
    /// A container task's verifier: its reward and how it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier: Option<VerifierRecord>,
}

/// A container (Harbor) task's verification (docs/harbor.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifierRecord {
    /// `shared`: the verifier ran in the agent's container, as Harbor's default.
    pub mode: String,
    pub command: Vec<String>,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// The reward the pass rule reads (None when the verifier wrote none it could read).
    pub reward: Option<f64>,
    /// Every value of reward.json (or `reward` of reward.txt).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub rewards: std::collections::BTreeMap<String, f64>,
    /// `reward.json` or `reward.txt`.
    pub reward_file: Option<String>,
    /// The suite's pass threshold.
    pub threshold: f64,
    /// The reward reached the threshold.
    pub passed: bool,
    /// Why the verification gave no reward (the trial is then a grader error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The verifier's output tail.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
    pub duration_ms: u64,
}

impl Grade {
    /// Whether what the trial left passes: every test (a Python task), the
    /// reward at its threshold (a container task).
    pub fn passed(&self) -> bool {
        match &self.verifier {
            Some(v) => v.passed && v.error.is_none(),
            None => self.check.all_passed(),
        }
    }

    /// Why the trial is a policy violation, if it is one.
    pub fn violation(&self) -> Option<String> {
        if !self.tampered_tests.is_empty() {
            return Some(format!(
                "test files changed during the trial: {}",
                self.tampered_tests.join(", ")
            ));
        }
        self.check.forgery.as_ref().map(|f| format!("grade forgery: {f}"))
    }
}

/// What the runner reported.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerReport {
    /// Tests collected before any ran (`start`).
    pub loaded: Option<u32>,
    /// Test outcomes reported.
    pub tests: u32,
    pub passed: u32,
    /// The runner got to its `end` line.
    pub finished: bool,
    /// Framework attributes that changed while the task's code ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tampered: Vec<String>,
    /// Lines the runner cannot have written (bad JSON, duplicates, order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub anomalies: Vec<String>,
    /// Short names of failed or errored tests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// Tests that did not run because a class or module fixture failed (counted in `tests`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_run: u32,
    /// Class or module fixtures (`setUpClass`, `setUpModule`, ...) that raised.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixture_errors: Vec<String>,
    /// Canaries (tests that must fail) the runner reported, and how many failed as they must.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub canaries: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub canaries_failed: u32,
    /// Canaries reported with another outcome (`name: outcome`): a manipulation turned them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub canaries_turned: Vec<String>,
    /// Introspection (frames, the object graph) refused to the task's code.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied: Vec<String>,
    /// The top-level modules the runner had imported before the task's code
    /// (its `ready` line): a workspace file named like one of them is refused.
    #[serde(skip)]
    pub grader_modules: Vec<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
