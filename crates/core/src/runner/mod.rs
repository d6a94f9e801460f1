//! The runner: executes a plan, `--jobs N` trials at a time, and records every
//! started attempt.
//!
//! Per trial: a fresh sandbox, the agent loop (harness components + model
//! client), the harness's own final grading, then exactly one record appended
//! to trials.jsonl. A trial's failure is data; only setup problems (bad
//! config, unreachable endpoint at start) stop a run.

mod containers;
mod env;
pub mod facts;
mod ledger;
pub mod progress;

use crate::error::InputError;
use crate::experiment::config::Experiment;
use crate::experiment::instructions::ArmPrompts;
use crate::experiment::{HarnessKind, Instructions};
use crate::harness::agent;
use crate::harness::external;
use crate::model::{self, ModelClient};
use crate::plan::{self, Shard, TrialSpec};
use crate::record::Grade;
use crate::record::events::{self, Event, Reporters};
use crate::record::folder;
use crate::record::jsonl::JsonlWriter;
use crate::record::lock::{LockError, RunLock};
use crate::record::{
    AttemptStart, EndReason, ManifestHead, ModelIdentity, TrialRecord, TrialStatus, now_rfc3339,
};
use crate::suite::{Suite, TaskKind};
use ledger::Ledger;
use std::collections::HashMap;
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
    /// Name of a new run folder; it must not exist yet.
    pub run_id: Option<String>,
    /// On resume, go on (with a warning) when a model's identity differs
    /// from the one in the manifest, instead of refusing.
    pub allow_model_change: bool,
    /// Every consumer of the run's events: the progress (`progress::Progress`),
    /// the exports (`report::live::LiveExports`), any other. None: a silent run
    /// that writes its records only.
    pub reporters: Vec<Arc<dyn events::Reporter>>,
    /// Settings of an embedded model's engine (`--local-*`, ABLATE_LOCAL_*).
    pub engine: model::EngineSettings,
    /// The container engine of container tasks (`--engine`; None: docker when
    /// it answers, else podman).
    pub container_engine: Option<crate::container::EngineKind>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("setup failed: {0}")]
    Setup(String),
    /// A model's client could not be made.
    #[error("setup failed: {0}")]
    Model(#[from] model::SetupError),
    /// No sandbox for candidate code, and none was waived.
    #[error("setup failed: {0}")]
    Sandbox(#[from] crate::sandbox::isolation::NoSandbox),
    /// The container engine, or what the last run left in it, could not be used.
    #[error("setup failed: {0}")]
    Container(#[from] crate::container::ContainerError),
    /// Another process writes into the run folder.
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("cannot write records in {dir}: {source}")]
    Io { dir: PathBuf, source: std::io::Error },
    #[error(
        "interrupted; {recorded} trials are recorded. Continue with: ablate run {config} --resume {dir}"
    )]
    Interrupted { recorded: usize, config: String, dir: PathBuf },
}

/// What a run did; its records are in `dir` (read them with `report::load`).
#[derive(Debug)]
pub struct RunSummary {
    pub dir: PathBuf,
    pub planned: usize,
    pub ran_now: usize,
    /// Attempts found started and unfinished, recorded as `interrupted` at the start.
    pub interrupted: usize,
    /// The run folder's lock, held until the summary is dropped: reporters
    /// that write into the folder (the exports) finish under it.
    pub lock: RunLock,
}

/// Status of a finished attempt, one rule for every kind of trial. Precedence:
/// a policy violation (a changed test file, a planted module, a forged
/// check); then an infrastructure failure; then a stop by the budget or the
/// time (`timeout`, `budget_exhausted`), whatever the final grading says (the
/// record's `graded_pass` says it, and the report shows the pass rate both
/// ways); then a grading that could not be done (`grader_error`: no grade, or
/// a verifier that gave no reward); then the final grading.
pub fn status_of(end: &EndReason, grade: Option<&Grade>) -> TrialStatus {
    if grade.is_some_and(|g| g.violation().is_some()) {
        return TrialStatus::PolicyViolation;
    }
    match end {
        EndReason::ProviderError => return TrialStatus::ProviderError,
        EndReason::HarnessError => return TrialStatus::HarnessError,
        EndReason::Interrupted => return TrialStatus::Interrupted,
        EndReason::RequestTimeout
        | EndReason::Budget { limit: crate::record::BudgetLimit::WorkingSeconds } => {
            return TrialStatus::Timeout;
        }
        EndReason::Budget { .. } => return TrialStatus::BudgetExhausted,
        _ => {}
    }
    let Some(grade) = grade else { return TrialStatus::GraderError };
    if grade.verifier.as_ref().is_some_and(|v| v.error.is_some()) {
        return TrialStatus::GraderError;
    }
    if grade.passed() { TrialStatus::Passed } else { TrialStatus::Failed }
}

struct Shared {
    exp: Experiment,
    suite: Suite,
    /// An external harness's files, staged once for the run (shown read-only at /harness).
    harness_dir: Option<tempfile::TempDir>,
    /// The interpreter `[harness] python` names, resolved.
    harness_python: Option<crate::grader::Python>,
    clients: HashMap<String, Arc<dyn ModelClient>>,
    instructions: HashMap<String, ArmPrompts>,
    /// The engine and images of container tasks (None: the run has none).
    containers: Option<containers::ContainerSetup>,
    run_id: String,
    dir: PathBuf,
    trials_writer: Arc<Mutex<JsonlWriter>>,
    attempts_writer: Arc<Mutex<JsonlWriter>>,
}

/// `--jobs` when not given: with the embedded model, as many trials as it
/// decodes together (continuous batching, `--local-batch`, default 4);
/// otherwise one at a time.
pub fn default_jobs(exp: &Experiment, engine: &model::EngineSettings) -> usize {
    if exp.models.iter().any(|m| m.provider == crate::experiment::config::Provider::Local) {
        #[cfg(feature = "local")]
        {
            let o = crate::model::local::LocalOptions::from_settings(engine);
            return o.batch.min(o.slots).max(1);
        }
    }
    let _ = engine;
    1
}

pub async fn run(exp: Experiment, suite: Suite, opts: RunOptions) -> Result<RunSummary, RunError> {
    // Everything the run says goes through its reporters.
    let reporters = Reporters::new(opts.reporters.clone());
    // The execution order, 16 bytes a trial; specs are made as they are needed.
    let plan = plan::order(&exp, &suite)?;
    let inputs = RunInputs { exp: &exp, suite: &suite, plan: &plan, opts: &opts };
    // The folder being resumed (same experiment only) is locked before
    // anything is read from it but its manifest; a new folder is made (and
    // locked) after setup, so a setup failure leaves no folder behind.
    let resumed = folder_to_resume(&inputs)?;
    let host_command = command_on_host(&exp, &suite)?;
    let setup = setup(&exp, &opts.engine, host_command, &reporters).await?;
    let container_setup = set_up_containers(&inputs, &reporters).await?;
    let (folder, mut ledger) =
        open_folder(&inputs, resumed, &setup, container_setup.as_ref(), &reporters)?;
    let RunFolder { dir, run_id, part, lock } = folder;

    // What is already recorded; attempts that started and never finished
    // become `interrupted` records before anything runs.
    let (trials_writer, attempts_writer, interrupted) =
        open_records(&exp, &dir, &mut ledger, &plan, part, &run_id)?;
    let planned_count = ledger.planned();
    let already = ledger.finished();
    // The sequential design: the decisions so far, from the records (a resumed
    // run replays them and reaches the decisions an uninterrupted one would).
    let monitor = sequential_monitor(&exp, &dir)?;

    let shared = Arc::new(Shared {
        exp,
        suite,
        harness_dir: setup.harness_dir,
        harness_python: setup.harness_python,
        clients: setup.clients,
        instructions: setup.instructions,
        containers: container_setup,
        run_id,
        dir: dir.clone(),
        trials_writer: Arc::new(Mutex::new(trials_writer)),
        attempts_writer: Arc::new(Mutex::new(attempts_writer)),
    });
    reporters.emit(&Event::Started {
        dir: &dir,
        planned: planned_count as u64,
        already: already as u64,
    });
    let finished_now = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // The trials to run, made one at a time from the order as slots free up
    // (in a sequential run, gated by the monitor: `execute`).
    let work = plan
        .specs(part)
        .filter_map(|spec| ledger.next_attempt(&spec).map(|attempt| (spec, attempt)));
    let outcome = tokio::select! {
        r = execute(shared.clone(), work, opts.jobs, reporters.clone(), finished_now.clone(), monitor.clone()) => r,
        // Dropping `execute` drops its JoinSet, which aborts the trials under way.
        _ = tokio::signal::ctrl_c() => {
            reporters.emit(&Event::Finished { interrupted: true });
            let recorded = already + finished_now.load(std::sync::atomic::Ordering::SeqCst);
            return Err(RunError::Interrupted { recorded, config: shared.exp.config_path.display().to_string(), dir });
        }
    };
    // What chose the work is not needed by what reporters do at the end (the
    // final export): free it first.
    drop((ledger, plan));
    reporters.emit(&Event::Finished { interrupted: false });
    outcome?;
    let ran_now = finished_now.load(std::sync::atomic::Ordering::SeqCst);
    Ok(RunSummary { dir, planned: planned_count, ran_now, interrupted, lock })
}

/// What the steps of a run that open its folder read.
struct RunInputs<'a> {
    exp: &'a Experiment,
    suite: &'a Suite,
    plan: &'a plan::Order,
    opts: &'a RunOptions,
}

/// `--resume`: the folder to resume, locked and checked against this run's shard; a new
/// folder's `--run-id` is checked here (the folder is made after setup).
fn folder_to_resume(
    inputs: &RunInputs<'_>,
) -> Result<Option<(PathBuf, ManifestHead, RunLock)>, RunError> {
    let RunInputs { exp, suite, plan, opts } = *inputs;
    let resumed = match &opts.resume {
        Some(dir) => {
            let resumed = open_resumed(dir, exp, suite, plan)?;
            same_shard(dir, resumed.1.shard, opts.shard)?;
            Some(resumed)
        }
        None => {
            if let Some(id) = &opts.run_id {
                folder::check_run_id(id)
                    .map_err(|e| InputError::at(&exp.config_path, "--run-id", e.to_string()))?;
            }
            None
        }
    };
    Ok(resumed)
}

/// Whether the external command runs on the host: for Python tasks, and for container tasks
/// when `runs_in = "host"`. A command in the tasks' containers cannot have `python` and
/// `mounts`: refused (`refuse_unbound`).
fn command_on_host(exp: &Experiment, suite: &Suite) -> Result<bool, RunError> {
    let (mut host_command, mut in_containers) = (false, false);
    for t in suite.tasks.iter().filter(|t| exp.tasks.is_empty() || exp.tasks.contains(&t.id)) {
        match t.kind {
            TaskKind::Python => host_command = true,
            TaskKind::Container(_) => in_containers = true,
        }
    }
    host_command |=
        exp.harness_kind.external().is_some_and(|e| e.runs_in == crate::experiment::RunsIn::Host);
    if let Some(ext) =
        exp.harness_kind.external().filter(|e| e.runs_in == crate::experiment::RunsIn::Container)
        && in_containers
    {
        refuse_unbound(exp, ext)?;
    }
    Ok(host_command)
}

/// The engine and images of the run's container tasks (None: it has none), with what the
/// reporters are told of them.
async fn set_up_containers(
    inputs: &RunInputs<'_>,
    reporters: &Reporters,
) -> Result<Option<containers::ContainerSetup>, RunError> {
    let RunInputs { exp, suite, opts, .. } = *inputs;
    let container_setup =
        containers::setup(exp, suite, opts.container_engine, &opts.results_dir).await?;
    if container_setup.is_some() {
        reporters.note(&format!(
            "images: pull policy `{}` for the images Dockerfiles build on (pull under [experiment]; docs/harbor.md)",
            exp.pull.name()
        ));
    }
    if let Some(c) = &container_setup
        && !c.swept.is_empty()
    {
        reporters.warn(&format!(
            "removed {} container(s) left by an ablate process that was killed: {}",
            c.swept.len(),
            c.swept.join(", ")
        ));
    }
    Ok(container_setup)
}

/// The run folder and what it plans: the resumed one, once its models and images are found
/// to be the ones it started with, or a new one; then the build logs of the images this run
/// built are copied into it.
fn open_folder(
    inputs: &RunInputs<'_>,
    resumed: Option<(PathBuf, ManifestHead, RunLock)>,
    setup: &Setup,
    container_setup: Option<&containers::ContainerSetup>,
    reporters: &Reporters,
) -> Result<(RunFolder, Ledger), RunError> {
    let RunInputs { exp, suite, plan, opts } = *inputs;
    let (folder, ledger) = match resumed {
        Some((dir, head, lock)) => {
            check_identities(
                &dir.join("manifest.json"),
                &head.models,
                &setup.identities,
                opts.allow_model_change,
                reporters,
            )?;
            if let Some(c) = container_setup {
                containers::check_images(&dir.join("manifest.json"), head.containers.as_ref(), c)?;
            }
            continue_folder(dir, head, lock, plan)?
        }
        None => {
            let facts = container_setup.map(|c| containers::facts(c, exp, suite));
            new_folder(exp, suite, plan, opts, setup.identities.clone(), facts)?
        }
    };
    // Build logs of the images this run built.
    if let Some(c) = container_setup {
        let dir = &folder.dir;
        for (task, log) in &c.logs {
            let to = crate::container::images_dir(dir).join(format!("{task}.log"));
            let _ = std::fs::create_dir_all(crate::container::images_dir(dir));
            let _ = std::fs::copy(log, to);
        }
    }
    Ok((folder, ledger))
}

/// The run's records opened for appending, after what they hold is read into the ledger;
/// attempts that started and never finished are recorded `interrupted` (their number).
fn open_records(
    exp: &Experiment,
    dir: &Path,
    ledger: &mut Ledger,
    plan: &plan::Order,
    part: Option<Shard>,
    run_id: &str,
) -> Result<(JsonlWriter, JsonlWriter, usize), RunError> {
    let trials_path = dir.join("trials.jsonl");
    let mut trials_writer = JsonlWriter::open(&trials_path).map_err(io_error(dir))?;
    let attempts_writer = JsonlWriter::open(&dir.join("attempts.jsonl")).map_err(io_error(dir))?;
    let retries = exp.sequential.as_ref().map(|d| d.retries());
    let unplanned = ledger.read_records(&trials_path, retries).map_err(io_error(dir))?;
    // Records of another plan would be counted as this run's: refuse them.
    if unplanned > 0 {
        let records = if unplanned == 1 { "record is" } else { "records are" };
        return Err(InputError::new(&trials_path, format!("{unplanned} {records} not in this run's plan; refusing to resume a folder that mixes runs")).into());
    }
    let starts = ledger.take_unfinished(&dir.join("attempts.jsonl")).map_err(io_error(dir))?;
    let mut interrupted = 0usize;
    if !starts.is_empty() {
        let by_id: HashMap<&str, &AttemptStart> =
            starts.iter().map(|a| (a.trial_id.as_str(), a)).collect();
        for spec in plan.specs(part).filter(|t| ledger.plans(t.plan_key())) {
            if let Some(a) = by_id.get(spec.id.as_str()) {
                trials_writer
                    .append(&interrupted_record(run_id, &spec, a))
                    .map_err(io_error(dir))?;
                interrupted += 1;
            }
        }
    }
    drop(starts);
    Ok((trials_writer, attempts_writer, interrupted))
}

/// The sequential design's monitor, fed the recorded trials (None: the fixed design).
fn sequential_monitor(
    exp: &Experiment,
    dir: &Path,
) -> Result<Option<Arc<Mutex<crate::sequential::Monitor>>>, RunError> {
    let trials_path = dir.join("trials.jsonl");
    let monitor = match &exp.sequential {
        None => None,
        Some(_) => {
            // The rule the report and merge follow, built from the manifest as they build it.
            let models: Vec<String> = exp.models.iter().map(|m| m.name.clone()).collect();
            let head = ManifestHead::read(dir)?;
            let mut m = head.sequential_monitor(&models, false).ok_or_else(|| {
                InputError::at(
                    dir.join("manifest.json"),
                    "sequential",
                    "the experiment is sequential but the run's manifest has no task order",
                )
            })?;
            drop(head);
            crate::record::jsonl::for_each::<TrialRecord>(&trials_path, |r| {
                crate::record::feed_monitor(&mut m, &r);
            })
            .map_err(io_error(dir))?;
            Some(Arc::new(Mutex::new(m)))
        }
    };
    Ok(monitor)
}

fn io_error(dir: &Path) -> impl Fn(std::io::Error) -> RunError + use<> {
    let dir = dir.to_path_buf();
    move |source| RunError::Io { dir: dir.clone(), source }
}

/// The run folder being written, locked: its run id and the shard of the
/// order it runs.
struct RunFolder {
    dir: PathBuf,
    run_id: String,
    part: Option<Shard>,
    lock: RunLock,
}

/// A folder to resume, locked: only the run of this experiment, suite and
/// isolation. The manifest's head only: the plan comes back as its keys (8
/// bytes a trial); the specs are made from the order built from the config.
/// `--resume` with `--shard` continues that shard only: any other is refused.
fn same_shard(
    dir: &Path,
    recorded: Option<plan::Shard>,
    asked: Option<plan::Shard>,
) -> Result<(), InputError> {
    let Some(asked) = asked else { return Ok(()) };
    if recorded == Some(asked) {
        return Ok(());
    }
    let is = match recorded {
        Some(s) => format!("shard {}/{}", s.index, s.count),
        None => "the whole plan".into(),
    };
    Err(InputError::at(
        dir.join("manifest.json"),
        "--shard",
        format!(
            "the run folder is {is}, not shard {}/{}: resume it without --shard (it continues what it planned)",
            asked.index, asked.count
        ),
    ))
}

fn open_resumed(
    dir: &Path,
    exp: &Experiment,
    suite: &Suite,
    plan: &plan::Order,
) -> Result<(PathBuf, ManifestHead, RunLock), RunError> {
    let path = dir.join("manifest.json");
    let m = ManifestHead::read(dir)?;
    let lock = RunLock::acquire(dir)?;
    if let Some(imported) = &m.imported {
        return Err(InputError::at(
            &path,
            "imported",
            format!(
                "this run was imported from {} records (ablate import): its trials were run by {} and cannot be resumed here",
                imported.tool.name(),
                imported.tool.name()
            ),
        )
        .into());
    }
    if m.config_digest != plan.config_digest {
        return Err(InputError::at(
            &path,
            "config_digest",
            format!(
                "the run was planned from another experiment ({}) than {} ({}); resume with the config it was started with{}",
                &m.config_digest[..12],
                exp.config_path.display(),
                &plan.config_digest[..12],
                match (m.experiment.sequential.is_some(), exp.sequential.is_some()) {
                    (true, false) => " (it runs until decided: add --until-decided)",
                    (false, true) => " (it was not run until decided: leave out --until-decided)",
                    _ => "",
                }
            ),
        )
        .into());
    }
    if m.suite.digest != suite.digest {
        return Err(InputError::at(
            &path,
            "suite.digest",
            "the task suite changed since the run started; resuming would mix two suites",
        )
        .into());
    }
    // Trials graded with and without the sandbox are not one run.
    let now = crate::sandbox::isolation::current()?;
    if let Some(then) = &m.host.isolation
        && then.is_isolated() != now.is_isolated()
    {
        return Err(InputError::at(
            &path,
            "host.isolation",
            format!("the run started with isolation {} and would resume with {}; resuming would mix sandboxed and unsandboxed trials", then.kind(), now.kind()),
        )
        .into());
    }
    Ok((dir.to_path_buf(), m, lock))
}

/// What trials need that is made once per run.
struct Setup {
    /// An external harness's files, staged once for the run.
    harness_dir: Option<tempfile::TempDir>,
    harness_python: Option<crate::grader::Python>,
    clients: HashMap<String, Arc<dyn ModelClient>>,
    identities: Vec<ModelIdentity>,
    instructions: HashMap<String, ArmPrompts>,
}

/// `python` and `mounts` are shown in the jail; a command that runs in a task's
/// container (`runs_in = "container"`) would run without them: refused by name.
fn refuse_unbound(
    exp: &Experiment,
    ext: &crate::record::harness_kind::ExternalHarness,
) -> Result<(), RunError> {
    let key = match (&ext.python, ext.mounts.is_empty()) {
        (Some(_), _) => "harness.python",
        (None, false) => "harness.mounts",
        (None, true) => return Ok(()),
    };
    Err(RunError::Input(InputError::at(
        &exp.config_path,
        key,
        "is shown only to a command that runs in ablate's jail, and the suite's container tasks run the command in the task's container (runs_in = \"container\"), where it is not bound: put what the harness needs in `files`, or set runs_in = \"host\"",
    )))
}

/// Candidate code runs only in the sandbox (or where the user opted out); an
/// external harness's files are staged once (its sandbox needs root); every
/// model must be reachable before any trial starts; every arm's instructions
/// file is read. `host_command`: the external command runs on the host (its
/// program is looked for in the jail; in a container it is the image's).
async fn setup(
    exp: &Experiment,
    engine: &model::EngineSettings,
    host_command: bool,
    reporters: &Reporters,
) -> Result<Setup, RunError> {
    let isolation = crate::sandbox::isolation::current()?;
    let (harness_dir, harness_python) = stage_harness(exp, isolation, host_command)?;
    let (clients, identities) = connect_models(exp, engine, reporters).await?;
    let instructions = read_instructions(exp)?;
    Ok(Setup { harness_dir, harness_python, clients, identities, instructions })
}

/// An external harness's files staged, its interpreter resolved and, when its command runs on
/// the host, its command checked (`external::preflight`); nothing for the builtin harness.
fn stage_harness(
    exp: &Experiment,
    isolation: &crate::record::Isolation,
    host_command: bool,
) -> Result<(Option<tempfile::TempDir>, Option<crate::grader::Python>), RunError> {
    let staged = match &exp.harness_kind {
        HarnessKind::Builtin => (None, None),
        HarnessKind::Imported(i) => {
            return Err(RunError::Setup(format!(
                "the trials of a run imported from {} cannot be run by ablate",
                i.tool
            )));
        }
        HarnessKind::External(ext) => {
            external::can_run(isolation).map_err(|e| RunError::Setup(e.to_string()))?;
            let dir = crate::sandbox::scratch::tempdir("harness-")
                .map_err(|e| RunError::Setup(e.to_string()))?;
            let files: Vec<PathBuf> = ext.files.iter().map(|f| exp.resolve(f)).collect();
            external::stage_files(&files, dir.path())
                .map_err(|e| RunError::Setup(format!("cannot stage the harness files: {e}")))?;
            let python = match &ext.python {
                None => None,
                Some(p) => Some(crate::grader::resolve(p).map_err(|m| {
                    RunError::Input(InputError::at(
                        &exp.config_path,
                        "harness.python",
                        m.to_string(),
                    ))
                })?),
            };
            if host_command {
                let view = external::HostView::new(python.as_ref(), &ext.mounts);
                external::preflight(
                    &ext.command,
                    dir.path(),
                    isolation,
                    &view,
                    python.is_some(),
                    &ext.mounts,
                )
                .map_err(|(key, m)| RunError::Input(InputError::at(&exp.config_path, key, m)))?;
            }
            (Some(dir), python)
        }
    };
    Ok(staged)
}

/// A client for each model, and its identity, read from the model (which must be reachable).
async fn connect_models(
    exp: &Experiment,
    engine: &model::EngineSettings,
    reporters: &Reporters,
) -> Result<(HashMap<String, Arc<dyn ModelClient>>, Vec<ModelIdentity>), RunError> {
    let mut clients: HashMap<String, Arc<dyn ModelClient>> = HashMap::new();
    let mut identities = Vec::new();
    for (i, spec) in exp.models.iter().enumerate() {
        let client: Arc<dyn ModelClient> = Arc::from(model::client_for(spec, engine)?);
        let identity = client.identity().await.map_err(|e| match e {
            // A name the endpoint does not serve is a config error: every trial would fail.
            model::ModelError::UnknownModel { .. } => InputError::at(
                &exp.config_path,
                format!("models[{i}].model"),
                format!("{}: {e}", spec.endpoint.as_deref().unwrap_or("?")),
            )
            .into(),
            _ => RunError::Setup(format!(
                "model `{}`: cannot reach {}: {e}",
                spec.name,
                spec.endpoint.as_deref().or(spec.path.as_deref()).unwrap_or("?")
            )),
        })?;
        if let Some(why) = client.unchecked() {
            reporters.warn(&why);
        }
        identities.push(ModelIdentity {
            name: spec.name.clone(),
            identity,
            engine: client.engine(),
            served: client.served(),
        });
        clients.insert(spec.name.clone(), client);
    }
    Ok((clients, identities))
}

/// Each builtin arm's instructions: the builtin ones or its file's.
fn read_instructions(exp: &Experiment) -> Result<HashMap<String, ArmPrompts>, RunError> {
    let mut instructions = HashMap::new();
    for arm in &exp.arms {
        let Some(components) = arm.builtin_components() else { continue };
        let text = match &components.instructions {
            Instructions::Builtin => ArmPrompts::builtin(),
            Instructions::File(p) => {
                let path = exp.resolve(p);
                if !path.is_file() {
                    return Err(InputError::at(
                        &exp.config_path,
                        format!("arms.{}.instructions", arm.name),
                        format!("cannot read `{p}`"),
                    )
                    .into());
                }
                crate::experiment::instructions::load_instructions(&path)?
            }
        };
        instructions.insert(arm.name.clone(), text);
    }
    Ok(instructions)
}

/// The resumed folder with what it plans: its shard of the order, and the
/// trials of that shard its plan keys name.
fn continue_folder(
    dir: PathBuf,
    mut head: ManifestHead,
    lock: RunLock,
    plan: &plan::Order,
) -> Result<(RunFolder, Ledger), RunError> {
    std::fs::create_dir_all(dir.join("traces")).map_err(io_error(&dir))?;
    let keys = std::mem::take(&mut head.plan.0);
    let ids: Vec<u64> = plan
        .specs(head.shard)
        .filter(|t| keys.binary_search(&t.plan_key()).is_ok())
        .map(|t| crate::record::trial_number(&t.id))
        .collect();
    Ok((RunFolder { dir, run_id: head.run_id, part: head.shard, lock }, Ledger::new(keys, ids)))
}

/// A new run folder: made under its final name, then locked, then its
/// manifest written with the plan (one pass over the specs, noting each
/// trial's key and id).
fn new_folder(
    exp: &Experiment,
    suite: &Suite,
    plan: &plan::Order,
    opts: &RunOptions,
    identities: Vec<ModelIdentity>,
    containers: Option<crate::record::ContainerFacts>,
) -> Result<(RunFolder, Ledger), RunError> {
    let results = &opts.results_dir;
    let (run_id, dir) = match &opts.run_id {
        Some(id) => match folder::create_named(results, id) {
            Ok(dir) => (id.clone(), dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let taken = results.join(id);
                return Err(InputError::at(
                    &exp.config_path,
                    "--run-id",
                    format!(
                        "{} exists; continue it with --resume or choose another --run-id",
                        taken.display()
                    ),
                )
                .into());
            }
            Err(e) => return Err(io_error(results)(e)),
        },
        None => {
            let stamp = time::OffsetDateTime::now_utc()
                .format(&time::macros::format_description!(
                    "[year][month][day]T[hour][minute][second]Z"
                ))
                .unwrap_or_default();
            folder::create_new(results, &stamp, &exp.name).map_err(io_error(results))?
        }
    };
    let lock = RunLock::acquire(&dir)?;
    let mut m =
        crate::plan::manifest(run_id, exp, suite, plan, opts.shard, facts::runner_facts(exp));
    m.models = identities;
    m.containers = containers;
    let (mut keys, mut ids) =
        (Vec::with_capacity(m.planned_trials), Vec::with_capacity(m.planned_trials));
    let noted = plan.specs(opts.shard).inspect(|t| {
        keys.push(t.plan_key());
        ids.push(crate::record::trial_number(&t.id));
    });
    m.write_with_plan(&dir, noted).map_err(io_error(&dir))?;
    std::fs::create_dir(dir.join("traces")).map_err(io_error(&dir))?;
    keys.sort_unstable();
    Ok((RunFolder { dir, run_id: m.run_id, part: opts.shard, lock }, Ledger::new(keys, ids)))
}

/// On resume, every model must be the one the run started with: its identity
/// (`gguf-sha256:...`, `ollama-digest:...`) as read at setup must equal the
/// manifest's. A difference is refused, or only warned of when `allow`.
fn check_identities(
    manifest_path: &Path,
    recorded: &[ModelIdentity],
    now: &[ModelIdentity],
    allow: bool,
    reporters: &Reporters,
) -> Result<(), RunError> {
    let show = |i: Option<&String>| i.map(|s| format!("`{s}`")).unwrap_or_else(|| "none".into());
    let changes: Vec<String> = now
        .iter()
        .filter_map(|n| {
            let before = recorded.iter().find(|r| r.name == n.name);
            let was = before.and_then(|r| r.identity.as_ref());
            (before.is_none() || was != n.identity.as_ref()).then(|| {
                format!(
                    "model `{}` was {} when the run started and is {} now",
                    n.name,
                    show(was),
                    show(n.identity.as_ref())
                )
            })
        })
        .collect();
    if changes.is_empty() {
        return Ok(());
    }
    if allow {
        for c in &changes {
            reporters.warn(&format!("{c}; resuming anyway (--allow-model-change): this run's records come from more than one model"));
        }
        return Ok(());
    }
    Err(InputError::at(
        manifest_path,
        "models",
        format!(
            "{}; resuming would mix two models in one run (--allow-model-change resumes anyway)",
            changes.join("; ")
        ),
    )
    .into())
}

/// Run each (trial, attempt) of `work`, `jobs` at a time: a trial's task is
/// spawned only when a slot is free, so memory holds `jobs` trials, not the
/// plan. Only a failure to write records stops it: a trial's own failure is
/// its record, and a task that dies outside the trial (a bug in a
/// reporter) is reported and the others go on.
async fn execute(
    shared: Arc<Shared>,
    work: impl Iterator<Item = (TrialSpec, u32)>,
    jobs: usize,
    reporters: Reporters,
    finished: Arc<std::sync::atomic::AtomicUsize>,
    monitor: Option<Arc<Mutex<crate::sequential::Monitor>>>,
) -> Result<(), RunError> {
    let mut set = tokio::task::JoinSet::new();
    let mut work = work.peekable();
    // Trials of a sequential run whose attempt ended in an infrastructure error, to run again first.
    let mut again: std::collections::VecDeque<(TrialSpec, u32)> = Default::default();
    loop {
        while set.len() < jobs.max(1) {
            // A sequential run starts only the trials an open comparison needs;
            // near its budget of trials it waits for the trials under way.
            let next = again.front().or_else(|| work.peek());
            let gate = match (&monitor, next) {
                (Some(m), Some((spec, _))) => {
                    m.lock().unwrap().gate(&spec.task, &spec.arm, &spec.model)
                }
                _ => crate::sequential::Gate::Run,
            };
            let mut take = || again.pop_front().or_else(|| work.next());
            match gate {
                crate::sequential::Gate::Skip => {
                    take();
                    continue;
                }
                crate::sequential::Gate::Wait if !set.is_empty() => break,
                _ => {}
            }
            let Some((spec, attempt)) = take() else { break };
            let (shared, reporters, finished, monitor) =
                (shared.clone(), reporters.clone(), finished.clone(), monitor.clone());
            set.spawn(async move {
                let rec = run_trial(&shared, &spec, attempt).await?;
                let mut retry = None;
                if let Some(m) = &monitor
                    && rec.status.is_final()
                {
                    let (decided, spent) = {
                        let mut m = m.lock().unwrap();
                        let was = m.spent().is_some();
                        let decided = crate::record::feed_monitor(&mut m, &rec);
                        if rec.status.is_infrastructure_error() && m.retry(attempt) {
                            retry = Some((spec.clone(), attempt + 1));
                        }
                        (decided, m.spent().filter(|_| !was))
                    };
                    for d in decided {
                        reporters.emit(&Event::Decided(&d));
                    }
                    if let Some(s) = spent {
                        reporters
                            .warn(&format!("{s}: no more trials start; the ones under way finish"));
                    }
                }
                reporters.emit(&Event::TrialFinished(&rec));
                if retry.is_none() {
                    finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                Ok::<_, std::io::Error>(retry)
            });
        }
        let Some(joined) = set.join_next().await else { break };
        match joined {
            Ok(Ok(retry)) => again.extend(retry),
            Ok(Err(e)) => return Err(RunError::Io { dir: shared.dir.clone(), source: e }),
            Err(e) if e.is_cancelled() => {}
            // run_trial catches panics of the attempt; this is one around it.
            Err(e) => {
                reporters.warn(&format!("a trial task failed outside its attempt: {e} (an attempt left without a record becomes `interrupted` on --resume)"))
            }
        }
    }
    Ok(())
}

/// The record of an attempt that started and never finished.
fn interrupted_record(run_id: &str, spec: &TrialSpec, a: &AttemptStart) -> TrialRecord {
    let mut r = TrialRecord::blank(
        run_id,
        spec,
        a.attempt,
        TrialStatus::Interrupted,
        EndReason::Interrupted,
        a.started_at.clone(),
    );
    r.error = Some("the attempt started and never finished (the run was stopped)".into());
    r.finished_at = now_rfc3339();
    r
}

/// One attempt of one trial, from start line to record. A panic or an error
/// inside the attempt (sandbox, agent loop, grading) becomes this attempt's
/// `harness_error` record; errors returned are only failures to write records
/// (the run cannot go on without them).
async fn run_trial(
    shared: &Shared,
    spec: &TrialSpec,
    attempt: u32,
) -> std::io::Result<TrialRecord> {
    let started_at = now_rfc3339();
    let wall = Instant::now();
    append(
        &shared.attempts_writer,
        AttemptStart { trial_id: spec.id.clone(), attempt, started_at: started_at.clone() },
    )
    .await?;
    let mut record = TrialRecord::blank(
        &shared.run_id,
        spec,
        attempt,
        TrialStatus::HarnessError,
        EndReason::HarnessError,
        started_at,
    );
    let outcome = CatchUnwind(Box::pin(attempt_body(shared, spec, attempt, &mut record))).await;
    if let Err(panic) = outcome {
        // What the attempt measured before the panic stays; it ends as ablate's failure.
        record.status = TrialStatus::HarnessError;
        record.end_reason = EndReason::HarnessError;
        record.error =
            Some(format!("ablate panicked during the trial: {}", panic_message(panic.as_ref())));
    }
    record.wall_seconds = wall.elapsed().as_secs_f64();
    record.finished_at = now_rfc3339();
    append(&shared.trials_writer, record).await
}

/// Append a line and sync it on a blocking thread, not a runtime thread: the
/// sync can take milliseconds, which would stall the other trials' tasks.
async fn append<T: serde::Serialize + Send + 'static>(
    writer: &Arc<Mutex<JsonlWriter>>,
    line: T,
) -> std::io::Result<T> {
    let writer = writer.clone();
    let written =
        tokio::task::spawn_blocking(move || writer.lock().unwrap().append(&line).map(|()| line))
            .await;
    written.map_err(std::io::Error::other)?
}

/// What a container task's trial runs on (None for other tasks).
fn container_run(
    shared: &Shared,
    task: &crate::suite::Task,
    arm: &crate::experiment::matrix::Arm,
) -> Option<crate::record::ContainerRun> {
    let container = match &task.kind {
        TaskKind::Python => return None,
        TaskKind::Container(c) => c,
    };
    let engine = shared.containers.as_ref()?.engine;
    let l = crate::container::trial::limits(container, &shared.suite.containers, &arm.resources);
    Some(crate::record::ContainerRun {
        engine: engine.program.clone(),
        engine_version: engine.version.clone(),
        cpus: l.cpus,
        memory_mb: l.memory_mb,
        pids: l.pids,
        storage_mb: None,
    })
}

/// The attempt itself, the same for every kind of task: its environment made
/// (`env`), the arm's harness run in it, what it left graded, the environment
/// disposed of; all of it filled into `record`.
async fn attempt_body(shared: &Shared, spec: &TrialSpec, attempt: u32, record: &mut TrialRecord) {
    let exp = &shared.exp;
    let task = shared.suite.task(&spec.task).expect("planned task is in the suite");
    let arm = exp.arm(&spec.arm).expect("planned arm exists");
    record.tests_total = task.check.tests;
    let budget = env::trial_budget(&arm.budget_under(&exp.budget), task);
    record.task_timeout_seconds = task.agent_timeout_sec();
    record.container = container_run(shared, task, arm);

    let trace_path = shared.dir.join("traces").join(format!("{}.jsonl", spec.id));
    let mut trace = match JsonlWriter::open(&trace_path) {
        Ok(t) => t,
        Err(e) => {
            record.error = Some(format!("cannot open the trace {}: {e}", trace_path.display()));
            return;
        }
    };
    let environment = match env::TrialEnv::create(shared, task, (spec, arm), attempt).await {
        Ok(e) => e,
        Err(e) => {
            record.error = Some(e.to_string());
            return;
        }
    };
    let trace_error: Arc<Mutex<Option<std::io::Error>>> = Arc::new(Mutex::new(None));
    let on_trace_error = trace_error.clone();
    let on_step = move |step: crate::record::TraceStep| {
        if let Err(e) = trace.append(&step) {
            on_trace_error.lock().unwrap().get_or_insert(e);
        }
    };
    match environment
        .run_harness(shared, task, spec, attempt, arm, &budget, Box::new(on_step))
        .await
    {
        Ok(run) => {
            fill_measured(record, run.measured);
            record.harness_command = run.command;
        }
        Err(e) => {
            record.error = Some(e.to_string());
            let _ = environment.dispose().await;
            return;
        }
    }
    if let Some(e) = trace_error.lock().unwrap().take() {
        record.error.get_or_insert(format!("cannot write the trace: {e}"));
    }
    // Final grading by the harness, whatever the components.
    match environment.grade(shared, task).await {
        Ok(g) => {
            record.tests_passed = g.check.passed;
            record.tests_total = g.check.total;
            if let Some(why) = g.violation() {
                record.error.get_or_insert(why);
            }
            if let Some(e) = g.verifier.as_ref().and_then(|v| v.error.as_ref()) {
                record.error.get_or_insert(format!("verifier: {e}"));
            }
            record.graded_pass = Some(g.passed());
            record.grade = Some(g);
        }
        Err(e) => {
            record.error.get_or_insert(format!("final grading failed: {e}"));
        }
    }
    if let Err(e) = environment.dispose().await {
        record.error.get_or_insert(format!("cannot remove the trial's environment: {e}"));
    }
    record.status = status_of(&record.end_reason, record.grade.as_ref());
}

/// What the agent loop (or an external harness, in the same terms) measured, into the record.
fn fill_measured(record: &mut TrialRecord, out: agent::AgentOutcome) {
    record.end_reason = out.end_reason;
    record.steps = out.steps;
    record.sessions = out.sessions;
    record.tokens = out.tokens;
    record.tokens_estimated_calls = out.tokens_estimated_calls;
    record.working_seconds = out.working.as_secs_f64();
    record.rate_limit_wait_seconds = out.wait.as_secs_f64();
    record.cost_usd = out.cost_usd;
    record.system_fingerprints = out.fingerprints;
    record.delivery = out.delivery;
    record.incidents = out.incidents;
    record.error = out.error;
}

/// A future that turns a panic while polling its inner future into `Err`
/// with the panic's payload (what `FutureExt::catch_unwind` does).
struct CatchUnwind<'a, T>(std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>);

impl<T> std::future::Future for CatchUnwind<'_, T> {
    type Output = Result<T, Box<dyn std::any::Any + Send>>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let inner = self.0.as_mut();
        // The inner future is dropped after a panic, never polled again.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(payload) => std::task::Poll::Ready(Err(payload)),
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BoxFuture, CallOutcome, ChatRequest, ModelError};
    use crate::record::Tokens;
    use crate::record::jsonl;
    use progress::{Progress, ProgressMode};

    /// An RFC 3339 time in UTC, as `now_rfc3339` writes it; panics unless the text is one
    /// and formats back to itself.
    fn parse_utc(text: &str) -> time::OffsetDateTime {
        use time::format_description::well_known::Rfc3339;
        let parsed = time::OffsetDateTime::parse(text, &Rfc3339)
            .unwrap_or_else(|e| panic!("not an RFC 3339 time: {text:?}: {e}"));
        assert!(parsed.offset().is_utc(), "not in UTC: {text:?}");
        assert_eq!(parsed.format(&Rfc3339).unwrap(), text, "formats back to itself");
        parsed
    }

    /// Answers with a correct add.py, and panics on the is-even task's requests.
    struct PanicsOnIsEven;

    impl ModelClient for PanicsOnIsEven {
        fn chat<'a>(
            &'a self,
            req: &'a ChatRequest,
            operation_id: String,
        ) -> BoxFuture<'a, CallOutcome> {
            Box::pin(async move {
                if req.messages.iter().any(|m| m.content.contains("is_even")) {
                    panic!("scripted client panic on is-even");
                }
                let text = "```python add.py\ndef add(a, b):\n    return a + b\n```\nDONE";
                CallOutcome {
                    request_body: serde_json::json!({"messages": req.messages}),
                    reply_body: Some(serde_json::json!({"text": text})),
                    ..CallOutcome::scripted(
                        operation_id,
                        text,
                        Tokens { input: 10, output: 5, cached: 0 },
                    )
                }
            })
        }

        fn identity(&self) -> BoxFuture<'_, Result<Option<String>, ModelError>> {
            Box::pin(async { Ok(None) })
        }
    }

    /// A run folder in `dir` for the tiny suite's two tasks, one bare arm, `client` as model `m`.
    fn shared_with(client: Arc<dyn ModelClient>, dir: &Path) -> (Arc<Shared>, Vec<TrialSpec>) {
        let suite_dir = crate::repo_root().join("tests/fixtures/suites/tiny");
        let text = format!(
            "[experiment]\nname = \"p\"\nsuite = \"{}\"\ntrials = 1\nseed = 1\n\n[budget]\nmax_steps = 2\nmax_output_tokens_per_step = 100\nmax_total_tokens = 10000\nmax_working_seconds = 60\n\n[[models]]\nname = \"m\"\nprovider = \"openai\"\nmodel = \"m\"\nendpoint = \"http://127.0.0.1:1\"\ntemperature = 0.0\n\n[arms.b]\n",
            suite_dir.display()
        );
        let exp = crate::experiment::config::load_str(&dir.join("exp.toml"), &text).unwrap();
        let suite = crate::suite::load(&exp.suite_path).unwrap();
        let plan = plan::order(&exp, &suite).unwrap();
        let mut manifest =
            crate::plan::manifest("r".into(), &exp, &suite, &plan, None, facts::runner_facts(&exp));
        manifest.plan = plan.specs(None).collect();
        std::fs::create_dir_all(dir.join("traces")).unwrap();
        manifest.write(dir).unwrap();
        let shared = Shared {
            exp,
            suite,
            harness_dir: None,
            harness_python: None,
            clients: HashMap::from([("m".to_string(), client)]),
            instructions: HashMap::from([("b".to_string(), ArmPrompts::builtin())]),
            containers: None,
            run_id: "r".into(),
            dir: dir.to_path_buf(),
            trials_writer: Arc::new(Mutex::new(
                JsonlWriter::open(&dir.join("trials.jsonl")).unwrap(),
            )),
            attempts_writer: Arc::new(Mutex::new(
                JsonlWriter::open(&dir.join("attempts.jsonl")).unwrap(),
            )),
        };
        (Arc::new(shared), manifest.plan)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_in_one_trial_is_its_harness_error_record_and_the_run_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let (shared, plan) = shared_with(Arc::new(PanicsOnIsEven), dir.path());
        assert_eq!(plan.len(), 2);
        let work = plan.iter().map(|s| (s.clone(), 1));
        /// Records the statuses of the TrialFinished events it is given.
        #[derive(Default)]
        struct Seen(Mutex<Vec<(String, TrialStatus)>>);
        impl events::Reporter for Seen {
            fn report(&self, event: &Event<'_>) {
                if let Event::TrialFinished(r) = event {
                    self.0.lock().unwrap().push((r.task.clone(), r.status));
                }
            }
        }
        let seen = Arc::new(Seen::default());
        let reporters =
            Reporters::new(vec![Arc::new(Progress::new(ProgressMode::Quiet)), seen.clone()]);
        let finished = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let before = time::OffsetDateTime::now_utc();
        execute(shared, work, 2, reporters, finished.clone(), None)
            .await
            .expect("a panic does not stop the run");
        let after = time::OffsetDateTime::now_utc();
        let mut events = seen.0.lock().unwrap().clone();
        events.sort();
        assert_eq!(
            events,
            vec![
                ("add-two".to_string(), TrialStatus::Passed),
                ("is-even".to_string(), TrialStatus::HarnessError)
            ],
            "every attempt reaches the reporters"
        );

        let written = jsonl::read::<TrialRecord>(&dir.path().join("trials.jsonl")).unwrap().records;
        assert_eq!(written.len(), 2, "one record per attempt, the panicked one included");
        assert_eq!(finished.load(std::sync::atomic::Ordering::SeqCst), 2);
        let even = written.iter().find(|r| r.task == "is-even").unwrap();
        assert_eq!(even.status, TrialStatus::HarnessError);
        assert_eq!(even.end_reason, EndReason::HarnessError);
        assert_eq!(
            even.error.as_deref(),
            Some("ablate panicked during the trial: scripted client panic on is-even")
        );
        assert_eq!(even.attempt, 1);
        // The panicked attempt's times are real RFC 3339 instants, in order, within the run.
        let (started_at, finished_at) = (parse_utc(&even.started_at), parse_utc(&even.finished_at));
        assert!(
            before <= started_at && started_at <= finished_at && finished_at <= after,
            "{} .. {} outside {before} .. {after}",
            even.started_at,
            even.finished_at
        );
        let add = written.iter().find(|r| r.task == "add-two").unwrap();
        assert_eq!(add.status, TrialStatus::Passed, "{add:?}");
        assert_eq!((add.tests_passed, add.tests_total), (6, 6));
        let started =
            jsonl::read::<AttemptStart>(&dir.path().join("attempts.jsonl")).unwrap().records;
        assert_eq!(started.len(), 2);
    }
}
