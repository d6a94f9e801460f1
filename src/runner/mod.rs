//! The runner: executes a plan, `--jobs N` trials at a time, and records every
//! started attempt.
//!
//! Per trial: a fresh sandbox, the agent loop (harness components + model
//! client), the harness's own final grading, then exactly one record appended
//! to trials.jsonl. A trial's failure is data; only setup problems (bad
//! config, unreachable endpoint at start) stop a run.

pub mod progress;
pub mod summary;

use crate::config::Experiment;
use crate::digest;
use crate::error::InputError;
use crate::grader::{self, Grade};
use crate::harness::agent::{self, TrialContext};
use crate::harness::{Instructions, prompts};
use crate::model::{self, ModelClient};
use crate::plan::{self, Shard, TrialSpec};
use crate::record::folder;
use crate::record::jsonl::{self, JsonlWriter};
use crate::record::lock::{LockError, RunLock};
use crate::record::{
    AttemptStart, EndReason, HostFacts, Manifest, ModelIdentity, SuiteFacts, TrialRecord, TrialStatus, FORMAT_VERSION,
    experiment_json, now_rfc3339,
};
use crate::sandbox::Sandbox;
use crate::suite::Suite;
use progress::{Progress, ProgressMode};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub struct RunOptions {
    pub jobs: usize,
    pub shard: Option<Shard>,
    /// Parent folder of new runs (`results/`).
    pub results_dir: PathBuf,
    /// Continue this run folder instead of starting a new one.
    pub resume: Option<PathBuf>,
    pub progress: ProgressMode,
    /// Name of a new run folder; it must not exist yet.
    pub run_id: Option<String>,
    /// On resume, go on (with a warning) when a model's identity differs
    /// from the one in the manifest, instead of refusing.
    pub allow_model_change: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("setup failed: {0}")]
    Setup(String),
    /// Another process writes into the run folder.
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("cannot write records in {dir}: {source}")]
    Io { dir: PathBuf, source: std::io::Error },
    #[error("interrupted; {recorded} trials are recorded. Continue with: ablate run {config} --resume {dir}")]
    Interrupted { recorded: usize, config: String, dir: PathBuf },
}

#[derive(Debug)]
pub struct RunSummary {
    pub dir: PathBuf,
    pub planned: usize,
    pub ran_now: usize,
    pub records: Vec<TrialRecord>,
    /// The run folder's lock, held until the summary is dropped (the caller
    /// writes the final exports under it).
    pub lock: RunLock,
}

/// Status of a finished attempt. Precedence: a changed test file; then an
/// infrastructure failure; then the final grading (passed wins over a budget
/// stop: the snapshot solves the task); then how the loop ended.
pub fn status_of(end: &EndReason, grade: Option<&Grade>) -> TrialStatus {
    if grade.is_some_and(|g| !g.tampered_tests.is_empty()) {
        return TrialStatus::PolicyViolation;
    }
    match end {
        EndReason::ProviderError => return TrialStatus::ProviderError,
        EndReason::HarnessError => return TrialStatus::HarnessError,
        EndReason::Interrupted => return TrialStatus::Interrupted,
        _ => {}
    }
    let Some(grade) = grade else { return TrialStatus::GraderError };
    if grade.check.all_passed() {
        return TrialStatus::Passed;
    }
    match end {
        EndReason::RequestTimeout | EndReason::Budget { limit: crate::record::BudgetLimit::WorkingSeconds } => TrialStatus::Timeout,
        EndReason::Budget { .. } => TrialStatus::BudgetExhausted,
        _ => TrialStatus::Failed,
    }
}

struct Shared {
    exp: Experiment,
    suite: Suite,
    clients: HashMap<String, Arc<dyn ModelClient>>,
    instructions: HashMap<String, String>,
    run_id: String,
    dir: PathBuf,
    trials_writer: Mutex<JsonlWriter>,
    attempts_writer: Mutex<JsonlWriter>,
    exports: Mutex<ExportClock>,
}

/// When the exports were last rewritten and how long that took: they are
/// rewritten after a trial once at least max(2 s, 10 x the last rewrite) has
/// passed, so a long run costs little and a crash loses at most that window.
struct ExportClock {
    last: Option<Instant>,
    took: std::time::Duration,
}

impl Shared {
    fn maybe_export(&self, force: bool) {
        let mut clock = self.exports.lock().unwrap();
        let wait = (clock.took * 10).max(std::time::Duration::from_secs(2));
        if !force && clock.last.is_some_and(|t| t.elapsed() < wait) {
            return;
        }
        let start = Instant::now();
        if let Err(e) = crate::report::report_dir(&self.dir) {
            // Records are intact; only the derived files are stale.
            eprintln!("warning: {e}");
        }
        clock.took = start.elapsed();
        clock.last = Some(Instant::now());
    }
}

pub async fn run(exp: Experiment, suite: Suite, opts: RunOptions) -> Result<RunSummary, RunError> {
    let plan = plan::build(&exp, &suite)?;
    let io = |dir: &Path| {
        let dir = dir.to_path_buf();
        move |source| RunError::Io { dir: dir.clone(), source }
    };

    // The folder being resumed (same experiment only) is locked before
    // anything is read from it but its manifest; a new folder is made (and
    // locked) after setup, so a setup failure leaves no folder behind.
    let resumed = match &opts.resume {
        Some(dir) => {
            let path = dir.join("manifest.json");
            let text = std::fs::read_to_string(&path).map_err(|e| InputError::new(&path, format!("cannot read manifest: {e}")))?;
            let m: Manifest = serde_json::from_str(&text).map_err(|e| InputError::new(&path, format!("not a manifest: {e}")))?;
            let lock = RunLock::acquire(dir)?;
            if m.config_digest != plan.config_digest {
                return Err(InputError::at(&path, "config_digest", format!(
                    "the run was planned from another experiment ({}) than {} ({}); resume with the config it was started with",
                    &m.config_digest[..12], exp.config_path.display(), &plan.config_digest[..12]
                )).into());
            }
            if m.suite.digest != suite.digest {
                return Err(InputError::at(&path, "suite.digest", "the task suite changed since the run started; resuming would mix two suites").into());
            }
            Some((dir.clone(), m, lock))
        }
        None => {
            if let Some(id) = &opts.run_id {
                folder::check_run_id(id).map_err(|e| InputError::at(&exp.config_path, "--run-id", e))?;
            }
            None
        }
    };

    // Setup: every model must be reachable before any trial starts.
    let mut clients: HashMap<String, Arc<dyn ModelClient>> = HashMap::new();
    let mut identities = Vec::new();
    for spec in &exp.models {
        let client: Arc<dyn ModelClient> = Arc::from(model::client_for(spec).map_err(RunError::Setup)?);
        let identity = client.identity().await.map_err(|e| {
            RunError::Setup(format!("model `{}`: cannot reach {}: {e}", spec.name, spec.endpoint.as_deref().or(spec.path.as_deref()).unwrap_or("?")))
        })?;
        identities.push(ModelIdentity { name: spec.name.clone(), identity, engine: client.engine() });
        clients.insert(spec.name.clone(), client);
    }
    let mut instructions = HashMap::new();
    for arm in &exp.arms {
        let text = match &arm.components.instructions {
            Instructions::Builtin => prompts::DEFAULT_SYSTEM.to_string(),
            Instructions::File(p) => std::fs::read_to_string(exp.resolve(p))
                .map_err(|e| InputError::at(&exp.config_path, format!("arms.{}.instructions", arm.name), format!("cannot read `{p}`: {e}")))?,
        };
        instructions.insert(arm.name.clone(), text);
    }

    let (dir, manifest, lock) = match resumed {
        Some((dir, m, lock)) => {
            check_identities(&dir.join("manifest.json"), &m.models, &identities, opts.allow_model_change)?;
            std::fs::create_dir_all(dir.join("traces")).map_err(io(&dir))?;
            (dir, m, lock)
        }
        None => {
            // create_dir under the final name, then the lock, then the manifest.
            let (run_id, dir) = match &opts.run_id {
                Some(id) => match folder::create_named(&opts.results_dir, id) {
                    Ok(dir) => (id.clone(), dir),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        let taken = opts.results_dir.join(id);
                        return Err(InputError::at(&exp.config_path, "--run-id", format!(
                            "{} exists; continue it with --resume or choose another --run-id", taken.display()
                        )).into());
                    }
                    Err(e) => return Err(io(&opts.results_dir)(e)),
                },
                None => {
                    let stamp = time::OffsetDateTime::now_utc().format(&time::macros::format_description!("[year][month][day]T[hour][minute][second]Z")).unwrap_or_default();
                    folder::create_new(&opts.results_dir, &stamp, &exp.name).map_err(io(&opts.results_dir))?
                }
            };
            let lock = RunLock::acquire(&dir)?;
            let mut m = new_manifest(run_id, &exp, &suite, &plan, opts.shard);
            m.models = identities;
            write_manifest(&dir, &m).map_err(io(&dir))?;
            std::fs::create_dir(dir.join("traces")).map_err(io(&dir))?;
            (dir, m, lock)
        }
    };

    // What is already recorded; attempts that started and never finished
    // become `interrupted` records before anything runs.
    let trials_path = dir.join("trials.jsonl");
    let attempts_path = dir.join("attempts.jsonl");
    let mut trials_writer = JsonlWriter::open(&trials_path).map_err(io(&dir))?;
    let attempts_writer = JsonlWriter::open(&attempts_path).map_err(io(&dir))?;
    let existing = jsonl::read::<TrialRecord>(&trials_path).map_err(io(&dir))?;
    // Records of another plan would be counted as this run's: refuse them.
    let planned: HashSet<u64> = manifest.plan.iter().map(TrialSpec::plan_key).collect();
    let unplanned = existing.records.iter().filter(|r| !planned.contains(&r.plan_key())).count();
    if unplanned > 0 {
        let records = if unplanned == 1 { "record is" } else { "records are" };
        return Err(InputError::new(&trials_path, format!("{unplanned} {records} not in this run's plan; refusing to resume a folder that mixes runs")).into());
    }
    let started = jsonl::read::<AttemptStart>(&attempts_path).map_err(io(&dir))?;
    let mut records = existing.records;
    let recorded: HashSet<(String, u32)> = records.iter().map(|r| (r.trial_id.clone(), r.attempt)).collect();
    let by_id: HashMap<&str, &TrialSpec> = manifest.plan.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut next_attempt: HashMap<String, u32> = HashMap::new();
    for r in &records {
        let e = next_attempt.entry(r.trial_id.clone()).or_insert(1);
        *e = (*e).max(r.attempt + 1);
    }
    for a in &started.records {
        let e = next_attempt.entry(a.trial_id.clone()).or_insert(1);
        *e = (*e).max(a.attempt + 1);
        if recorded.contains(&(a.trial_id.clone(), a.attempt)) {
            continue;
        }
        if let Some(spec) = by_id.get(a.trial_id.as_str()) {
            let rec = interrupted_record(&manifest.run_id, spec, a);
            trials_writer.append(&rec).map_err(io(&dir))?;
            records.push(rec);
        }
    }
    let done: HashSet<String> = records.iter().filter(|r| r.status.is_final()).map(|r| r.trial_id.clone()).collect();
    let pending: Vec<TrialSpec> = manifest.plan.iter().filter(|t| !done.contains(&t.id)).cloned().collect();

    let shared = Arc::new(Shared {
        exp,
        suite,
        clients,
        instructions,
        run_id: manifest.run_id.clone(),
        dir: dir.clone(),
        trials_writer: Mutex::new(trials_writer),
        attempts_writer: Mutex::new(attempts_writer),
        exports: Mutex::new(ExportClock { last: None, took: std::time::Duration::ZERO }),
    });
    let progress = Arc::new(Progress::new(opts.progress, manifest.plan.len() as u64, done.len() as u64));
    let semaphore = Arc::new(tokio::sync::Semaphore::new(opts.jobs.max(1)));
    let new_records = Arc::new(Mutex::new(Vec::new()));
    let mut set = tokio::task::JoinSet::new();
    for spec in pending.iter().cloned() {
        let attempt = next_attempt.get(&spec.id).copied().unwrap_or(1);
        let (shared, semaphore, progress, new_records) = (shared.clone(), semaphore.clone(), progress.clone(), new_records.clone());
        set.spawn(async move {
            let _permit = semaphore.acquire_owned().await.expect("semaphore open");
            let rec = run_trial(&shared, &spec, attempt).await?;
            progress.trial_done(&rec);
            new_records.lock().unwrap().push(rec);
            let s = shared.clone();
            let _ = tokio::task::spawn_blocking(move || s.maybe_export(false)).await;
            Ok::<(), std::io::Error>(())
        });
    }
    let ran_now = pending.len();
    let outcome = tokio::select! {
        r = async {
            while let Some(joined) = set.join_next().await {
                match joined {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return Err(RunError::Io { dir: dir.clone(), source: e }),
                    Err(e) => return Err(RunError::Io { dir: dir.clone(), source: std::io::Error::other(format!("trial task failed: {e}")) }),
                }
            }
            Ok(())
        } => r,
        _ = tokio::signal::ctrl_c() => {
            set.abort_all();
            progress.finish();
            let recorded = records.len() + new_records.lock().unwrap().len();
            return Err(RunError::Interrupted { recorded, config: shared.exp.config_path.display().to_string(), dir });
        }
    };
    progress.finish();
    let s = shared.clone();
    let _ = tokio::task::spawn_blocking(move || s.maybe_export(true)).await;
    outcome?;
    records.extend(new_records.lock().unwrap().drain(..));
    Ok(RunSummary { dir, planned: manifest.plan.len(), ran_now, records, lock })
}

/// On resume, every model must be the one the run started with: its identity
/// (`gguf-sha256:...`, `ollama-digest:...`) as read at setup must equal the
/// manifest's. A difference is refused, or only warned of when `allow`.
fn check_identities(manifest_path: &Path, recorded: &[ModelIdentity], now: &[ModelIdentity], allow: bool) -> Result<(), RunError> {
    let show = |i: Option<&String>| i.map(|s| format!("`{s}`")).unwrap_or_else(|| "none".into());
    let changes: Vec<String> = now
        .iter()
        .filter_map(|n| {
            let before = recorded.iter().find(|r| r.name == n.name);
            let was = before.and_then(|r| r.identity.as_ref());
            (before.is_none() || was != n.identity.as_ref())
                .then(|| format!("model `{}` was {} when the run started and is {} now", n.name, show(was), show(n.identity.as_ref())))
        })
        .collect();
    if changes.is_empty() {
        return Ok(());
    }
    if allow {
        for c in &changes {
            eprintln!("warning: {c}; resuming anyway (--allow-model-change): this run's records come from more than one model");
        }
        return Ok(());
    }
    Err(InputError::at(manifest_path, "models", format!(
        "{}; resuming would mix two models in one run (--allow-model-change resumes anyway)", changes.join("; ")
    )).into())
}

/// The manifest of a new run: everything fixed for it (identities are added at setup).
pub fn new_manifest(run_id: String, exp: &Experiment, suite: &Suite, plan: &plan::Plan, shard: Option<Shard>) -> Manifest {
    let trials = plan.shard(shard);
    Manifest {
        format: FORMAT_VERSION,
        run_id,
        tool: "ablate".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        created_at: now_rfc3339(),
        config_path: exp.config_path.display().to_string(),
        config_file_digest: exp.file_digest.clone(),
        config_digest: plan.config_digest.clone(),
        experiment: experiment_json(exp),
        suite: SuiteFacts {
            name: suite.name.clone(),
            version: suite.version.clone(),
            path: exp.suite.clone(),
            digest: suite.digest.clone(),
            tasks: suite.tasks.iter().map(|t| (t.id.clone(), t.digest.clone())).collect(),
        },
        prompt_digests: std::iter::once(("builtin".to_string(), digest::sha256_hex(prompts::DEFAULT_SYSTEM.as_bytes())))
            .chain(exp.prompt_digests.iter().map(|(k, v)| (k.clone(), v.clone())))
            .collect(),
        host: HostFacts::read(),
        models: Vec::new(),
        budget: exp.budget.clone(),
        experiment_seed: exp.seed,
        shard,
        planned_trials: trials.len(),
        plan: trials,
    }
}

pub fn write_manifest(dir: &Path, m: &Manifest) -> std::io::Result<()> {
    let tmp = dir.join("manifest.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(m).map_err(std::io::Error::other)?)?;
    std::fs::rename(tmp, dir.join("manifest.json"))
}

fn interrupted_record(run_id: &str, spec: &TrialSpec, a: &AttemptStart) -> TrialRecord {
    let mut r = TrialRecord::blank(run_id, spec, a.attempt, TrialStatus::Interrupted, EndReason::Interrupted, a.started_at.clone());
    r.error = Some("the attempt started and never finished (the run was stopped)".into());
    r.finished_at = now_rfc3339();
    r
}

/// One attempt of one trial, from start line to record. Errors returned are
/// only failures to write records (the run cannot go on without them).
async fn run_trial(shared: &Shared, spec: &TrialSpec, attempt: u32) -> std::io::Result<TrialRecord> {
    let started_at = now_rfc3339();
    let wall = Instant::now();
    shared.attempts_writer.lock().unwrap().append(&AttemptStart { trial_id: spec.id.clone(), attempt, started_at: started_at.clone() })?;
    let exp = &shared.exp;
    let task = shared.suite.task(&spec.task).expect("planned task is in the suite");
    let arm = exp.arm(&spec.arm).expect("planned arm exists");
    let model_spec = exp.model(&spec.model).expect("planned model exists");
    let declared = task.check.tests;

    let mut record = TrialRecord::blank(&shared.run_id, spec, attempt, TrialStatus::HarnessError, EndReason::HarnessError, started_at);
    record.tests_total = declared;

    match Sandbox::create(task) {
        Err(e) => record.error = Some(format!("cannot create the sandbox: {e}")),
        Ok(sandbox) => {
            let trace_path = shared.dir.join("traces").join(format!("{}.jsonl", spec.id));
            let mut trace = JsonlWriter::open(&trace_path)?;
            let mut trace_error: Option<std::io::Error> = None;
            let ctx = TrialContext {
                trial_id: &spec.id,
                attempt,
                task,
                components: &arm.components,
                instructions: &shared.instructions[&arm.name],
                budget: &exp.budget,
                settings: &exp.harness,
                model: model_spec,
                client: shared.clients[&spec.model].as_ref(),
                seed: spec.seed,
            };
            let mut on_step = |step: crate::record::TraceStep| {
                if let Err(e) = trace.append(&step) {
                    trace_error.get_or_insert(e);
                }
            };
            let out = agent::run_agent(&ctx, &sandbox, &mut on_step).await;
            record.end_reason = out.end_reason.clone();
            record.steps = out.steps;
            record.sessions = out.sessions;
            record.tokens = out.tokens;
            record.working_seconds = out.working.as_secs_f64();
            record.rate_limit_wait_seconds = out.wait.as_secs_f64();
            record.cost_usd = out.cost_usd;
            record.incidents = out.incidents;
            record.error = out.error;
            if let Some(e) = trace_error {
                record.error.get_or_insert(format!("cannot write the trace: {e}"));
            }
            // Final grading by the harness, whatever the components.
            match grader::grade(&sandbox, &task.check).await {
                Ok(g) => {
                    record.tests_passed = g.check.passed;
                    record.tests_total = g.check.total;
                    if !g.tampered_tests.is_empty() {
                        record.error.get_or_insert(format!("test files changed during the trial: {}", g.tampered_tests.join(", ")));
                    }
                    record.grade = Some(g);
                }
                Err(e) => {
                    record.error.get_or_insert(format!("final grading failed: {e}"));
                }
            }
            record.status = status_of(&record.end_reason, record.grade.as_ref());
        }
    }
    record.wall_seconds = wall.elapsed().as_secs_f64();
    record.finished_at = now_rfc3339();
    shared.trials_writer.lock().unwrap().append(&record)?;
    Ok(record)
}
