//! The record format of a run (`results/<run-id>/`), documented field by field
//! in `docs/records.md`:
//!
//! - `manifest.json`: everything fixed for the run (config as resolved, digests,
//!   model identities, budget, seeds, the plan).
//! - `attempts.jsonl`: one line when an attempt starts (lets resume find
//!   attempts that started and never finished).
//! - `trials.jsonl`: one line per finished attempt.
//! - `traces/<trial-id>.jsonl`: one line per step of that trial.
//! - `.lock`: held by the one process writing into the folder (`lock`).

pub mod delivery;
pub mod design;
pub mod events;
pub mod folder;
pub mod grade;
pub mod harness_kind;
pub mod imported;
pub mod jsonl;
pub mod lock;
pub mod merge;
pub mod omit;

pub use grade::{CheckResult, Grade, GradingMode, RunnerReport, VerifierRecord};

use design::{
    Budget, Comparison, Price, RecordedArm, RecordedSettings, SequentialDesign, Shard, SuiteSource,
    TrialSpec,
};
use harness_kind::HarnessKind;
use serde::{Deserialize, Serialize};

/// Version of the record format; bumped on incompatible changes.
pub const FORMAT_VERSION: u32 = 1;

/// How an attempt ended. Every started attempt gets exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialStatus {
    /// Final grading: every test passed.
    Passed,
    /// Final grading: some test failed.
    Failed,
    /// The working-time limit or a model request timed out.
    Timeout,
    /// A budget limit other than time (steps, tokens, money) stopped the trial.
    BudgetExhausted,
    /// The model endpoint failed beyond the retry policy, or replied with a
    /// body that cannot be read.
    ProviderError,
    /// ablate itself failed during the trial (a bug or a local I/O error).
    HarnessError,
    /// The final checks could not be run.
    GraderError,
    /// The trial changed a test file (restored before grading).
    PolicyViolation,
    /// The attempt started and never finished (the run was killed).
    Interrupted,
}

impl TrialStatus {
    pub const ALL: [TrialStatus; 9] = [
        TrialStatus::Passed,
        TrialStatus::Failed,
        TrialStatus::Timeout,
        TrialStatus::BudgetExhausted,
        TrialStatus::ProviderError,
        TrialStatus::HarnessError,
        TrialStatus::GraderError,
        TrialStatus::PolicyViolation,
        TrialStatus::Interrupted,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TrialStatus::Passed => "passed",
            TrialStatus::Failed => "failed",
            TrialStatus::Timeout => "timeout",
            TrialStatus::BudgetExhausted => "budget_exhausted",
            TrialStatus::ProviderError => "provider_error",
            TrialStatus::HarnessError => "harness_error",
            TrialStatus::GraderError => "grader_error",
            TrialStatus::PolicyViolation => "policy_violation",
            TrialStatus::Interrupted => "interrupted",
        }
    }

    /// Infrastructure errors: excluded from the second denominator.
    pub fn is_infrastructure_error(self) -> bool {
        matches!(
            self,
            TrialStatus::ProviderError
                | TrialStatus::HarnessError
                | TrialStatus::GraderError
                | TrialStatus::Interrupted
        )
    }

    /// The trial's outcome as the analysis counts it: 1 for passed, 0 for anything else.
    pub fn pass_value(self) -> f64 {
        if self == TrialStatus::Passed { 1.0 } else { 0.0 }
    }

    /// What a final record of this status, attempt (1-based) and score (its primary outcome's
    /// value; None: it has none in [0, 1]) is to the sequential rule: an infrastructure error
    /// enters nothing, nor does a record without a score.
    pub fn outcome(self, attempt: u32, score: Option<f64>) -> crate::sequential::Outcome {
        use crate::sequential::Outcome;
        match score {
            _ if self.is_infrastructure_error() => Outcome::Infrastructure { attempt },
            Some(v) if (0.0..=1.0).contains(&v) => Outcome::Scored(v),
            _ => Outcome::Unscorable,
        }
    }

    /// A final record ends the trial; an interrupted attempt is re-run on resume.
    pub fn is_final(self) -> bool {
        self != TrialStatus::Interrupted
    }
}

/// The budget limit that stopped a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetLimit {
    Steps,
    TotalTokens,
    WorkingSeconds,
    Cost,
}

impl BudgetLimit {
    /// The name records, exports and the gateway's errors use (its serde name).
    pub fn name(self) -> &'static str {
        match self {
            BudgetLimit::Steps => "steps",
            BudgetLimit::TotalTokens => "total_tokens",
            BudgetLimit::WorkingSeconds => "working_seconds",
            BudgetLimit::Cost => "cost",
        }
    }
}

/// What an external harness's command did (harness::external), for the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandOutcome {
    pub command: Vec<String>,
    /// None when it was killed (stopped, timed out, or by a signal).
    pub exit_code: Option<i32>,
    /// Why ablate stopped it, when it did: `budget: <limit>` or `provider_error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    pub wall_seconds: f64,
    /// The last 4 KiB of each stream.
    pub stdout_tail: String,
    pub stderr_tail: String,
    /// From the command's start to its first model call (start-up time:
    /// imports, and what frameworks do before they call); None: no call made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_model_call_seconds: Option<f64>,
    /// Requests the gateway refused before any model call: an endpoint it
    /// does not have, a wrong key (each in the trace).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub refused_requests: u32,
    /// Commands run through the gateway's exec endpoint (`runs_in = "host"`).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub exec_calls: u32,
    /// Embeddings calls the gateway forwarded (their input tokens are in the trial's tokens).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub embedding_calls: u32,
    /// What the harness measured and reported (`ablate-metric NAME VALUE`
    /// lines of its standard output; docs/external-harness.md): outcomes the
    /// report compares as `harness.NAME`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub metrics: std::collections::BTreeMap<String, f64>,
    /// `ablate-metric` lines that were not read, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics_refused: Vec<String>,
}

/// What ended the agent loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum EndReason {
    /// Checks run by the harness (feedback, acceptance, run_tests) passed.
    ChecksPassed,
    /// The model said it was done and the acceptance setting allowed it.
    ModelDone,
    /// A budget limit was reached.
    Budget { limit: BudgetLimit },
    /// A model request failed for good.
    ProviderError,
    /// A model request timed out.
    RequestTimeout,
    /// ablate failed.
    HarnessError,
    /// The run was killed before the attempt finished.
    Interrupted,
    /// An external harness's command ended by itself (its exit code is in
    /// `harness_command`).
    CommandExited,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    /// Input tokens served from a prompt cache, when the provider says.
    pub cached: u64,
}

impl Tokens {
    pub fn total(&self) -> u64 {
        self.input + self.output
    }
    pub fn add(&mut self, other: Tokens) {
        self.input += other.input;
        self.output += other.output;
        self.cached += other.cached;
    }

    /// Their price in USD at `price` (cached input at its own price when
    /// given, else at the input price); None without a price.
    pub fn cost(&self, price: Option<&Price>) -> Option<f64> {
        let p = price?;
        let cached_price = p.cached_input_per_mtok.unwrap_or(p.input_per_mtok);
        let uncached = self.input.saturating_sub(self.cached) as f64;
        Some(
            (uncached * p.input_per_mtok
                + self.cached as f64 * cached_price
                + self.output as f64 * p.output_per_mtok)
                / 1e6,
        )
    }
}

/// How a reply's tokens were counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The provider's `usage` (counts that are whole, non-negative numbers).
    #[default]
    Reported,
    /// The embedded engine's own tokenizer.
    Engine,
    /// The reply had no usable `usage`: its UTF-8 bytes (and the request's),
    /// an upper bound of any byte-level tokenizer's count, were counted.
    Estimated,
}

impl TokenSource {
    pub fn is_reported(&self) -> bool {
        *self == TokenSource::Reported
    }
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// Counters of things the harness refused or caught during a trial.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Incidents {
    pub loop_guard_hits: u32,
    pub invalid_tool_calls: u32,
    pub unparsed_replies: u32,
    pub path_refusals: u32,
    pub refused_done: u32,
    /// Tool calls the model made (answered or refused); absent in older records.
    #[serde(default)]
    pub tool_calls: u32,
}

/// Whether `name` may name a metric (`CommandOutcome::metrics`, and a primary
/// outcome's key): letters, digits, `_`, `.` and `-`, not empty.
pub(crate) fn is_metric_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

/// What a container task's trial ran on: the engine and the limits its
/// container was given (the same for requests and limits: a container gets
/// what it is limited to).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerRun {
    /// The engine's program (`docker`, `podman`) and the version it reports.
    pub engine: String,
    pub engine_version: String,
    pub cpus: f64,
    pub memory_mb: u64,
    pub pids: u64,
    /// The container's disk limit; None: not limited (ablate sets none: podman and docker limit
    /// a container's disk only on overlay over XFS with quotas, and refuse `--storage-opt size`
    /// elsewhere, as on this project's ext4 machines). Records made before it read as None.
    #[serde(default)]
    pub storage_mb: Option<u64>,
}

impl ContainerRun {
    /// In words: `podman 4.9.3, 1 cpus, 2048 MB, 4096 pids, disk not limited`.
    pub fn describe(&self) -> String {
        self.describe_except(&[])
    }

    /// [`ContainerRun::describe`] without the limits named (`resources.cpus`, ...): what a
    /// comparison holds equal when its arms set those on purpose.
    pub fn describe_except(&self, set: &[String]) -> String {
        let free = |name: &str| !set.iter().any(|c| c == name);
        let mut parts = vec![format!("{} {}", self.engine, self.engine_version)];
        for (name, text) in [
            ("resources.cpus", format!("{} cpus", self.cpus)),
            ("resources.memory_mb", format!("{} MB", self.memory_mb)),
            ("resources.pids", format!("{} pids", self.pids)),
        ] {
            if free(name) {
                parts.push(text);
            }
        }
        parts.push(self.storage_text());
        parts.join(", ")
    }

    /// `disk not limited`, or `N MB disk`.
    pub(crate) fn storage_text(&self) -> String {
        self.storage_mb.map_or("disk not limited".to_string(), |mb| format!("{mb} MB disk"))
    }
}

/// One line of trials.jsonl: a finished attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    pub format: u32,
    pub run_id: String,
    pub trial_id: String,
    pub task: String,
    pub arm: String,
    pub model: String,
    pub repeat: u32,
    pub seed: u64,
    /// 1 for the first attempt of this trial, 2 after an interrupted one, ...
    pub attempt: u32,
    pub status: TrialStatus,
    pub end_reason: EndReason,
    /// Tests passed / total in the final grading (0 / declared when ungraded).
    pub tests_passed: u32,
    pub tests_total: u32,
    /// The harness's final grading of the final snapshot.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub grade: Option<Grade>,
    /// Whether what the trial left passes (every test, or the reward at its
    /// threshold), whatever its status: a trial stopped by its budget or time
    /// is `timeout` or `budget_exhausted` even when this is true. The report
    /// shows the pass rate both ways. None when it was not graded.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub graded_pass: Option<bool>,
    /// A container task's trial: the engine and the container's limits.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub container: Option<ContainerRun>,
    /// A container task's own agent timeout (`[agent].timeout_sec`): the
    /// trial's working time is the smaller of it and the budget's.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub task_timeout_seconds: Option<f64>,
    pub steps: u32,
    pub sessions: u32,
    pub tokens: Tokens,
    /// Model calls whose tokens were estimated from bytes (the provider gave no
    /// usable usage; `TokenSource::Estimated`): `tokens` is then an upper bound.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub tokens_estimated_calls: u32,
    /// Trial time excluding rate-limit waits: what the working-time budget counts.
    pub working_seconds: f64,
    /// Wall-clock time of the attempt, waits included.
    pub wall_seconds: f64,
    /// Time spent waiting on 429/503 Retry-After and backoff.
    pub rate_limit_wait_seconds: f64,
    /// From the model's prices; None when it has none.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cost_usd: Option<f64>,
    /// The distinct `system_fingerprint`s the model's replies carried, in the
    /// order first seen (OpenAI-compatible servers that send one). More than
    /// one, or a change between trials, means the serving stack changed.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub system_fingerprints: Vec<String>,
    /// Per model-facing field of the trial's model calls, the values asked
    /// and the values that reached the model (`delivery`; docs/delivery.md).
    /// None: not recorded (an import, a record of an older version).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delivery: Option<delivery::Delivery>,
    pub incidents: Incidents,
    /// An external harness's command: exit code, why it was stopped, output tails.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub harness_command: Option<CommandOutcome>,
    /// An imported trial: the source file and the source's own words for its outcome.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub imported: Option<imported::ImportedFrom>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    pub started_at: String,
    pub finished_at: String,
}

impl TrialRecord {
    /// The value of the outcome the experiment decides on (`[experiment] primary`; None: the
    /// pass rate): `tests_passed` the fraction of tests passed, `reward.KEY` a key of the
    /// verifier's reward.json, `harness.NAME` a metric the external harness reported. None when
    /// the record has no such value. The report reads the same (`report::analysis::primary`).
    pub fn score(&self, primary: Option<&str>) -> Option<f64> {
        match primary {
            None | Some("pass_rate") => Some(self.status.pass_value()),
            Some("tests_passed") => Some(if self.tests_total == 0 {
                0.0
            } else {
                f64::from(self.tests_passed) / f64::from(self.tests_total)
            }),
            Some(name) => {
                if let Some(key) = name.strip_prefix("reward.") {
                    let v = self.grade.as_ref()?.verifier.as_ref()?;
                    v.rewards.get(key).copied()
                } else if let Some(metric) = name.strip_prefix("harness.") {
                    self.harness_command.as_ref()?.metrics.get(metric).copied()
                } else {
                    None
                }
            }
        }
    }

    /// A record of `spec`'s attempt with nothing measured yet: the runner
    /// fills in what the attempt did.
    pub fn blank(
        run_id: &str,
        spec: &TrialSpec,
        attempt: u32,
        status: TrialStatus,
        end_reason: EndReason,
        started_at: String,
    ) -> TrialRecord {
        TrialRecord {
            format: FORMAT_VERSION,
            run_id: run_id.to_string(),
            trial_id: spec.id.clone(),
            task: spec.task.clone(),
            arm: spec.arm.clone(),
            model: spec.model.clone(),
            repeat: spec.repeat,
            seed: spec.seed,
            attempt,
            status,
            end_reason,
            tests_passed: 0,
            tests_total: 0,
            grade: None,
            graded_pass: None,
            container: None,
            task_timeout_seconds: None,
            steps: 0,
            sessions: 0,
            tokens: Tokens::default(),
            tokens_estimated_calls: 0,
            working_seconds: 0.0,
            wall_seconds: 0.0,
            rate_limit_wait_seconds: 0.0,
            cost_usd: None,
            system_fingerprints: Vec::new(),
            delivery: None,
            incidents: Incidents::default(),
            harness_command: None,
            imported: None,
            error: None,
            started_at,
            finished_at: String::new(),
        }
    }
}

/// One line of attempts.jsonl: an attempt started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptStart {
    pub trial_id: String,
    pub attempt: u32,
    pub started_at: String,
}

/// A tool call and what the harness answered; ids match the model's call ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    pub id: String,
    pub name: String,
    /// Arguments as the model sent them (raw text when they were not JSON).
    pub arguments: serde_json::Value,
    pub ok: bool,
    pub result: String,
}

/// A loop-guard hit: the submission repeats an earlier step's code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopGuardHit {
    pub repeats_step: u32,
    pub fingerprint: String,
    /// passed/total that step scored, when it was checked.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scored: Option<(u32, u32)>,
}

/// One line of traces/<trial-id>.jsonl: one model call and what followed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceStep {
    pub trial_id: String,
    pub attempt: u32,
    pub step: u32,
    pub session: u32,
    /// Kept across the retries of this logical call.
    pub operation_id: String,
    /// HTTP attempts made (1 without retries).
    pub request_attempts: u32,
    /// The request body as sent (after every transformation; no API key),
    /// less what earlier lines of the trace hold: see `request_omits`.
    pub request: serde_json::Value,
    /// What `request` leaves out; absent when it is the whole body.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub request_omits: Option<RequestOmits>,
    /// The reply body as received (the parsed JSON, or the raw text).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reply: Option<serde_json::Value>,
    /// The assistant text of the reply.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reply_text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRecord>,
    /// Files written from this reply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edits: Vec<String>,
    /// Checks run by the harness after this step (feedback / acceptance).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub check: Option<CheckResult>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub loop_guard: Option<LoopGuardHit>,
    /// What the harness noticed: refusals, unparsed replies, refused "done".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub tokens: Tokens,
    /// How `tokens` were counted, when not from the provider's usage.
    #[serde(default, skip_serializing_if = "TokenSource::is_reported")]
    pub tokens_counted: TokenSource,
    pub latency_ms: u64,
    pub rate_limit_wait_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
}

impl TraceStep {
    /// A step with nothing recorded yet: the agent loop and the gateway fill in
    /// what the call did.
    pub fn blank(
        trial_id: &str,
        attempt: u32,
        step: u32,
        session: u32,
        operation_id: String,
    ) -> TraceStep {
        TraceStep {
            trial_id: trial_id.to_string(),
            attempt,
            step,
            session,
            operation_id,
            request_attempts: 0,
            request: serde_json::Value::Null,
            request_omits: None,
            reply: None,
            reply_text: None,
            finish_reason: None,
            tool_calls: Vec::new(),
            edits: Vec::new(),
            check: None,
            loop_guard: None,
            notes: Vec::new(),
            tokens: Tokens::default(),
            tokens_counted: TokenSource::Reported,
            latency_ms: 0,
            rate_limit_wait_ms: 0,
            error: None,
        }
    }
}

/// The parts of a step's request body left out of its trace line because
/// earlier lines of the same session hold them: the body as sent is
/// `messages` = the first `messages` messages (rebuilt from earlier lines)
/// followed by `request.messages`, and `tools` = the previous step's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestOmits {
    /// Leading messages left out: the earlier requests' messages of this
    /// session, each followed by that step's reply (the assistant message)
    /// and the results of its tool calls (in its `tool_calls`), in order.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub messages: usize,
    /// Local provider: leading bytes of `request.prompt` left out, the
    /// previous step's whole prompt (this one extends it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prompt_bytes: usize,
    /// sha256 of what is left out: the omitted messages as a compact JSON
    /// array, or the omitted prompt bytes; for checking a reconstruction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// `tools` left out: the same list as the previous step's request.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tools: bool,
    /// External harnesses (the gateway): the left-out `messages` are the
    /// first `messages` messages of the previous trace line's request as
    /// received, not the session's conversation as the builtin loop keeps it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub previous_request: bool,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What only the process that runs the trials knows, for a new run's
/// manifest: the host and its sandbox, and the digests of the builtin
/// harness's own texts (none for an external harness).
#[derive(Debug, Clone, Default)]
pub struct RunnerFacts {
    pub host: HostFacts,
    pub builtin_prompts: Vec<(String, String)>,
}

/// Host facts recorded in the manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    pub os: String,
    pub arch: String,
    pub cpus: usize,
    pub hostname: String,
    pub python: String,
    /// The sandbox candidate code ran in (absent in runs made before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
}

/// Which isolation is in force; recorded in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Isolation {
    /// bubblewrap namespaces; `uid_switch` when checks run under their own
    /// unprivileged uid (ablate runs as root), which makes the process limit real.
    /// `memory_cgroup` when each jail's processes and its `/tmp` share one
    /// memory cgroup limited to `memory_mb` (otherwise `/tmp` alone is capped at it).
    Bubblewrap {
        bwrap: String,
        version: String,
        uid_switch: bool,
        #[serde(default)]
        memory_cgroup: bool,
    },
    /// No isolation: the user opted in (`--unsandboxed`). Candidate code runs
    /// as ablate's user with only rlimits and a cleared environment.
    None { reason: String },
}

impl Isolation {
    pub fn is_isolated(&self) -> bool {
        matches!(self, Isolation::Bubblewrap { .. })
    }

    /// The recorded name of the kind: `bubblewrap` or `none`.
    pub fn kind(&self) -> &'static str {
        match self {
            Isolation::Bubblewrap { .. } => "bubblewrap",
            Isolation::None { .. } => "none",
        }
    }
}

/// What a run with container (Harbor) tasks records about them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerFacts {
    /// The engine: `docker` or `podman`, and its version.
    pub engine: EngineFacts,
    /// The image of each container task: a resume with another id is refused.
    pub images: Vec<TaskImage>,
    /// The pass rule: a trial passes when its reward reaches this.
    pub reward_threshold: f64,
    pub reward_rule: String,
    /// Tasks whose task.toml asks for a public network may have it.
    pub allow_network: bool,
    /// The variables passed to containers (`pass_env`): name -> sha256 of the
    /// value. Never a value.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub pass_env: std::collections::BTreeMap<String, String>,
    /// Each container task as its task.toml defines it (limits, timeouts, network, metadata).
    pub tasks: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineFacts {
    pub kind: String,
    pub program: String,
    pub version: String,
}

/// The image a container task's trials run in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskImage {
    pub task: String,
    /// What the engine knows it by (a tag of ablate's, or the task's docker_image).
    pub name: String,
    /// The engine's image id.
    pub id: String,
    /// Built by this run (not found in the engine's cache).
    pub built: bool,
    /// The images its Dockerfile builds on, with the engine's id of each (None:
    /// the engine has none by that name); empty for an image used as named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bases: Vec<BaseImage>,
}

/// An image a task's Dockerfile builds on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaseImage {
    pub name: String,
    pub id: Option<String>,
}

/// The identity of a fixed model, read at run start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelIdentity {
    pub name: String,
    /// `gguf-sha256:<hex>`, `ollama-digest:<digest>`,
    /// `openai-models:sha256:<16 hex>` (over `served`), or None when the
    /// provider gives none. Compared on resume and by the gate's drift check.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub identity: Option<String>,
    /// What an OpenAI-compatible server's `/v1/models` says of the model (its
    /// entry, without the fields that change per request).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub served: Option<serde_json::Value>,
    /// Engine settings of a `local` model (threads, slots, prefix cache,
    /// template); recorded, not compared on resume.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub engine: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteFacts {
    pub name: String,
    pub version: String,
    pub path: String,
    pub digest: String,
    /// Task id -> digest of its folder.
    pub tasks: Vec<(String, String)>,
    /// Task id -> where the candidate's code runs while its checks run (Python
    /// tasks; a container task's verifier runs in its container).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub grading: std::collections::BTreeMap<String, GradingMode>,
    /// An imported suite's source file and importer (absent for suites written by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SuiteSource>,
}

/// manifest.json: everything fixed for the run. `P` is how the plan is read
/// back: every spec (`Vec<TrialSpec>`, what merge needs) or only their sorted
/// keys (`PlanKeys`, 8 bytes a trial: what resume and the report need).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest<P = Vec<TrialSpec>> {
    pub format: u32,
    pub run_id: String,
    pub tool: String,
    pub tool_version: String,
    pub created_at: String,
    pub config_path: String,
    /// sha256 of the config file's bytes.
    pub config_file_digest: String,
    /// sha256 of the resolved experiment (part of every trial id).
    pub config_digest: String,
    /// The experiment as resolved: arms with all component values,
    /// comparisons, models, budget, harness settings.
    pub experiment: RecordedExperiment,
    pub suite: SuiteFacts,
    /// Prompt file (as written) -> sha256; the builtin prompt under "builtin" (builtin harness only).
    pub prompt_digests: Vec<(String, String)>,
    pub host: HostFacts,
    pub models: Vec<ModelIdentity>,
    pub budget: Budget,
    pub experiment_seed: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub shard: Option<Shard>,
    /// A run put together from shard folders by `ablate merge`: the shards, and what was missing.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub merged: Option<merge::MergedFrom>,
    /// Container (Harbor) tasks: the engine, each task's image, the pass rule.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub containers: Option<ContainerFacts>,
    /// The sequential design: the order tasks enter the decision in.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sequential: Option<SequentialFacts>,
    /// A run imported from another tool's records (`ablate import`): the sources and the mapping.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub imported: Option<imported::ImportFacts>,
    /// Trials of this run (after sharding), in execution order.
    pub planned_trials: usize,
    /// The plan as read back (`Manifest::write` writes it, or the specs it is given).
    #[serde(skip_serializing, default)]
    pub plan: P,
}

/// What the sequential design needs of the plan to decide again from the records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequentialFacts {
    /// The experiment's tasks in the seeded order they enter the decision.
    pub task_order: Vec<String>,
}

/// The manifest with its plan read as sorted keys (`PlanKeys`).
pub type ManifestHead = Manifest<PlanKeys>;

impl<P: serde::de::DeserializeOwned + Default> Manifest<P> {
    /// Read `dir/manifest.json` through a buffer (the plan of a large run is
    /// never one string in memory). An error names the file and, for a
    /// manifest that does not parse, the key (`experiment.arms[2].name`).
    pub fn read(dir: &std::path::Path) -> Result<Manifest<P>, crate::error::InputError> {
        let path = dir.join("manifest.json");
        let file = std::fs::File::open(&path).map_err(|e| {
            crate::error::InputError::new(
                &path,
                format!("cannot read the manifest: {e} (is this a run folder?)"),
            )
        })?;
        let mut de =
            serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(1 << 16, file));
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let message = format!("not a manifest ablate can read: {}", e.inner());
            match crate::error::key_at("", e.path()) {
                key if key.is_empty() => crate::error::InputError::new(&path, message),
                key => crate::error::InputError::at(&path, key, message),
            }
        })
    }
}

/// `plan_key` of every planned trial, sorted, read one spec at a time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanKeys(pub Vec<u64>);

impl<'de> Deserialize<'de> for PlanKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Spec {
            id: String,
            task: String,
            arm: String,
            model: String,
            repeat: u32,
        }
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = Vec<u64>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of trial specs")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Vec<u64>, A::Error> {
                let mut keys = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(s) = seq.next_element::<Spec>()? {
                    keys.push(plan_key(&s.id, &s.task, &s.arm, &s.model, s.repeat));
                }
                keys.sort_unstable();
                Ok(keys)
            }
        }
        d.deserialize_seq(Keys).map(PlanKeys)
    }
}

/// The resolved experiment as the manifest records it (what `Experiment`
/// serialises to): the fields the analysis reads, typed, and the rest (suite,
/// trials, seed, budget, harness settings, models, prompt digests) kept as
/// written. A manifest whose experiment does not parse is refused when read,
/// naming the field, instead of showing up as a run without arms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedExperiment {
    pub name: String,
    #[serde(default)]
    pub tasks: Vec<String>,
    /// Trials per (task, arm, model).
    #[serde(default)]
    pub trials: u32,
    /// The experiment's seed: the model's sampling seed, and the seed of the
    /// analysis's random orders (equivalence). 0 when a record has none (imports).
    #[serde(default)]
    pub seed: u64,
    pub alpha: f64,
    /// The equivalence margin, when the experiment declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<f64>,
    /// The outcome the verdicts decide on; None: the pass rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<String>,
    /// Run until decided: the sequential design and its budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequential: Option<SequentialDesign>,
    pub arms: Vec<RecordedArm>,
    #[serde(default)]
    pub comparisons: Vec<Comparison>,
    /// A two-level factorial design over components; its runs are arms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factorial: Option<design::FactorialDesign>,
    /// Absent for the builtin harness.
    #[serde(default, skip_serializing_if = "HarnessKind::is_builtin")]
    pub harness_kind: HarnessKind,
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

impl Manifest {
    /// Write `dir/manifest.json` with `self.plan` as its plan: to a temporary
    /// file, synced, then renamed into place.
    pub fn write(&self, dir: &std::path::Path) -> std::io::Result<()> {
        self.write_with_plan(dir, self.plan.iter())
    }

    /// Write `dir/manifest.json` with `plan` as its plan, one spec at a time:
    /// a new run of a million trials never holds a million specs.
    /// (`plan` yields `TrialSpec`s or references to them.)
    pub fn write_with_plan<I>(&self, dir: &std::path::Path, plan: I) -> std::io::Result<()>
    where
        I: Iterator,
        I::Item: std::borrow::Borrow<TrialSpec> + Serialize,
    {
        struct Specs<I>(std::cell::RefCell<Option<I>>);
        impl<I: Iterator<Item: Serialize>> Serialize for Specs<I> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let specs = self
                    .0
                    .borrow_mut()
                    .take()
                    .ok_or_else(|| serde::ser::Error::custom("the plan is written once"))?;
                s.collect_seq(specs)
            }
        }
        #[derive(Serialize)]
        #[serde(bound = "")]
        struct WithPlan<'a, I: Iterator<Item: Serialize>> {
            #[serde(flatten)]
            manifest: &'a Manifest,
            plan: Specs<I>,
        }
        let out = WithPlan { manifest: self, plan: Specs(std::cell::RefCell::new(Some(plan))) };
        folder::write_atomic(&dir.join("manifest.json"), |w| {
            serde_json::to_writer_pretty(w, &out).map_err(std::io::Error::other)
        })
    }
}

impl<P> Manifest<P> {
    /// The experiment back from the manifest (for analysis-time checks).
    /// External arms list their values in the declared order.
    pub fn arms(&self) -> Vec<RecordedArm> {
        let mut arms = self.experiment.arms.clone();
        if let HarnessKind::External(ext) = self.harness_kind() {
            let position = |name: &str| {
                ext.components.iter().position(|d| d.name == name).unwrap_or(usize::MAX)
            };
            for arm in &mut arms {
                if let RecordedSettings::External(values) = &mut arm.settings {
                    values.sort_by(|a, _, b, _| position(a).cmp(&position(b)));
                }
            }
        }
        arms
    }

    /// The harness the run used (builtin when the record names none).
    pub fn harness_kind(&self) -> HarnessKind {
        self.experiment.harness_kind.clone()
    }

    pub fn comparisons(&self) -> Vec<Comparison> {
        self.experiment.comparisons.clone()
    }

    /// The tasks a sequential run's rule follows, in the order they enter:
    /// the seeded task order, or a shard's own tasks of it (every N-th task,
    /// `plan::Shard`). None for a fixed design.
    pub fn sequential_task_order(&self) -> Option<Vec<String>> {
        Some(crate::sequential::own_tasks(
            &self.sequential.as_ref()?.task_order,
            self.shard.map(|s| (s.index, s.count)),
        ))
    }

    /// A sequential run's rule, as the runner followed it: its task order (a
    /// shard's own tasks of it), every comparison on every one of `models`,
    /// the design's budgets (`crate::sequential`). Fed no record yet. None
    /// for a fixed design.
    pub fn sequential_monitor(
        &self,
        models: &[String],
        history: bool,
    ) -> Option<crate::sequential::Monitor> {
        let order = &self.sequential.as_ref()?.task_order;
        let exp = &self.experiment;
        let design = exp.sequential.clone().unwrap_or_default();
        let run = crate::sequential::RunDesign {
            task_order: order,
            shard: self.shard.map(|s| (s.index, s.count)),
            trials: exp.trials,
            max_tasks: design.max_tasks,
            max_trials: design.max_trials,
            max_cost_usd: design.max_cost_usd,
            max_seconds: design.max_seconds,
            margin: exp.margin,
            alpha: exp.alpha,
            infra_retries: design.retries(),
            primary: exp.primary.clone(),
        };
        let named: Vec<crate::sequential::Named<'_>> = exp
            .comparisons
            .iter()
            .map(|c| (c.name.as_str(), c.control.as_str(), c.treatment.as_str(), c.is_ablation()))
            .collect();
        Some(crate::sequential::Monitor::for_run(&run, &named, models, history))
    }
}

/// A final record into a sequential rule: what it spent (`feed_spend`) and
/// its pass value. Returns the comparisons it decided (`Monitor::record`);
/// an interrupted record adds nothing.
pub(crate) fn feed_monitor(
    m: &mut crate::sequential::Monitor,
    r: &TrialRecord,
) -> Vec<crate::sequential::DecidedComparison> {
    if !r.status.is_final() {
        return Vec::new();
    }
    feed_spend(m, r);
    let outcome = r.status.outcome(r.attempt, r.score(m.primary()));
    m.record_outcome(&r.task, &r.arm, &r.model, r.repeat, outcome)
}

/// What a final record spent, into a sequential rule's budgets of money and
/// running time (its cost, its time span); an interrupted record adds nothing.
pub fn feed_spend(m: &mut crate::sequential::Monitor, r: &TrialRecord) {
    if r.status.is_final() {
        let at = |t: &str| rfc3339_seconds(t).unwrap_or(f64::NAN);
        m.spend(at(&r.started_at), at(&r.finished_at), r.cost_usd);
    }
}

/// A trial as the plan names it, reduced to 64 bits: a record belongs to the
/// plan when its key is among the plan's keys. Over the trial id and the
/// names that the analysis groups by, so a record whose id is planned but
/// whose task, arm, model or repeat is not the planned one does not belong.
pub fn plan_key(trial_id: &str, task: &str, arm: &str, model: &str, repeat: u32) -> u64 {
    use std::hash::{Hash, Hasher};
    // Fixed keys: equal within one build, which is all a check in one process needs.
    let mut h = std::hash::DefaultHasher::new();
    (trial_id, task, arm, model, repeat).hash(&mut h);
    h.finish()
}

/// A trial id (16 hex digits, `plan::trial_id`) as the 64-bit number it
/// spells; an id of another shape (a hand-edited record) by its hash.
pub fn trial_number(id: &str) -> u64 {
    match u64::from_str_radix(id, 16) {
        Ok(n) if id.len() == 16 => n,
        _ => {
            use std::hash::{Hash, Hasher};
            let mut h = std::hash::DefaultHasher::new();
            id.hash(&mut h);
            h.finish()
        }
    }
}

impl TrialSpec {
    pub fn plan_key(&self) -> u64 {
        plan_key(&self.id, &self.task, &self.arm, &self.model, self.repeat)
    }
}

/// The fields of a trial record that say which trial and attempt it is and how
/// it ended: what resume and merge read of each line (serde skips the rest).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RecordKey {
    pub trial_id: String,
    pub task: String,
    pub arm: String,
    pub model: String,
    pub repeat: u32,
    pub attempt: u32,
    pub status: TrialStatus,
}

impl RecordKey {
    pub fn plan_key(&self) -> u64 {
        plan_key(&self.trial_id, &self.task, &self.arm, &self.model, self.repeat)
    }
}

impl TrialRecord {
    pub fn plan_key(&self) -> u64 {
        plan_key(&self.trial_id, &self.task, &self.arm, &self.model, self.repeat)
    }
}

/// RFC 3339 UTC timestamp, second precision.
pub(crate) fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    now.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// Seconds since the Unix epoch of an RFC 3339 time such as a record's
/// `started_at` (None when it does not read as one).
pub(crate) fn rfc3339_seconds(t: &str) -> Option<f64> {
    let t = time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()?;
    Some(t.unix_timestamp_nanos() as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::design::Price;
    use super::*;

    #[test]
    fn cost_prices_cached_input_apart() {
        let t = Tokens { input: 1_000_000, output: 500_000, cached: 200_000 };
        let price =
            Price { input_per_mtok: 3.0, output_per_mtok: 15.0, cached_input_per_mtok: Some(0.3) };
        // By hand: 0.8 M uncached x 3 + 0.2 M cached x 0.3 + 0.5 M output x 15 = 2.4 + 0.06 + 7.5.
        assert!((t.cost(Some(&price)).unwrap() - 9.96).abs() < 1e-12);
        // Without a cached price, cached input costs the input price: 1 M x 3 + 7.5.
        let plain = Price { cached_input_per_mtok: None, ..price };
        assert!((t.cost(Some(&plain)).unwrap() - 10.5).abs() < 1e-12);
        assert_eq!(t.cost(None), None);
    }
}
