//! A trial's environment, one seam for both kinds of task: the jail's
//! workspace of a Python task (`sandbox`), or the container of a container
//! (Harbor) task (`container`). The runner makes it, runs the arm's harness in
//! it, grades what the harness left, and disposes of it, the same way for
//! both; what differs is behind these four steps.

use super::Shared;
use crate::container::trial::{Spec, TrialContainer};
use crate::experiment::config::{Budget, ModelSpec};
use crate::experiment::matrix::Arm;
use crate::experiment::{Components, ExternalHarness, HarnessKind, RunsIn};
use crate::grader;
use crate::harness::agent::{self, AgentOutcome, TrialContext};
use crate::harness::calls::CallContext;
use crate::harness::external::{self, ExternalContext};
use crate::harness::terminal::{self, TerminalContext};
use crate::model::ModelClient;
use crate::plan::TrialSpec;
use crate::record::{CommandOutcome, Grade, TraceStep};
use crate::sandbox::Sandbox;
use crate::suite::{Task, TaskKind};
use std::path::Path;
use std::sync::Arc;

pub enum TrialEnv {
    /// A Python task: a copy of its workspace, where candidate code runs in the jail.
    Jail(Sandbox),
    /// A container task: a fresh container of its image.
    Container(Box<TrialContainer>),
}

/// What the harness did, in the record's terms.
pub struct HarnessRun {
    pub measured: AgentOutcome,
    pub command: Option<CommandOutcome>,
}

/// Why a trial's environment could not be made, its harness not run, or the
/// environment not removed: the trial's recorded error.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("cannot create the sandbox: {0}")]
    Sandbox(#[source] std::io::Error),
    #[error("the run has no container engine")]
    NoEngine,
    #[error("task `{0}` has no image")]
    NoImage(String),
    #[error(transparent)]
    Container(#[from] crate::container::ContainerError),
    #[error("arm `{0}` does not fit the experiment's harness")]
    ArmDoesNotFit(String),
}

impl TrialEnv {
    /// The environment of one attempt of `task` in `arm` (whose resources its container gets).
    pub async fn create(
        shared: &Shared,
        task: &Task,
        (spec, arm): (&TrialSpec, &crate::experiment::matrix::Arm),
        attempt: u32,
    ) -> Result<TrialEnv, EnvError> {
        let container = match &task.kind {
            TaskKind::Python => {
                return Sandbox::create(task).map(TrialEnv::Jail).map_err(EnvError::Sandbox);
            }
            TaskKind::Container(c) => c,
        };
        let setup = shared.containers.as_ref().ok_or(EnvError::NoEngine)?;
        let image = setup.images.get(&task.id).ok_or_else(|| EnvError::NoImage(task.id.clone()))?;
        let mut binds = Vec::new();
        if let (HarnessKind::External(ext), Some(dir)) =
            (&shared.exp.harness_kind, &shared.harness_dir)
            && ext.runs_in == RunsIn::Container
        {
            binds.push((dir.path().to_path_buf(), external::JAIL_HARNESS_DIR.to_string()));
        }
        let spec = Spec {
            task,
            container,
            image_id: &image.id,
            settings: &shared.suite.containers,
            resources: arm.resources,
            trial_id: &spec.id,
            attempt,
            binds,
            env: Vec::new(),
            passed_env: &setup.passed_env,
        };
        Ok(TrialEnv::Container(Box::new(TrialContainer::start(setup.engine, &spec).await?)))
    }

    /// Run the arm's harness (the builtin loop, or the external command) until it ends.
    #[allow(clippy::too_many_arguments)]
    pub async fn run_harness(
        &self,
        shared: &Shared,
        task: &Task,
        spec: &TrialSpec,
        attempt: u32,
        arm: &Arm,
        budget: &Budget,
        on_step: Box<dyn FnMut(TraceStep) + Send>,
    ) -> Result<HarnessRun, EnvError> {
        let exp = &shared.exp;
        let model = exp.model(&spec.model).expect("planned model exists");
        let client = shared.clients[&spec.model].clone();
        let trial = HarnessTrial { shared, task, spec, attempt, arm, budget, model, client };
        match (&exp.harness_kind, arm.builtin_components(), &shared.harness_dir) {
            (HarnessKind::External(ext), _, Some(dir)) => {
                Ok(self.run_external(trial, ext, dir.path(), on_step).await)
            }
            (HarnessKind::Builtin, Some(components), _) => {
                Ok(self.run_builtin(trial, components, on_step).await)
            }
            _ => Err(EnvError::ArmDoesNotFit(arm.name.clone())),
        }
    }

    /// The external harness's command, on the host or in the task's container.
    async fn run_external(
        &self,
        trial: HarnessTrial<'_>,
        ext: &ExternalHarness,
        harness_dir: &Path,
        on_step: Box<dyn FnMut(TraceStep) + Send>,
    ) -> HarnessRun {
        let HarnessTrial { shared, task, spec, attempt, arm, budget, model, client } = trial;
        let ctx = ExternalContext {
            trial_id: &spec.id,
            attempt,
            task,
            command: &ext.command,
            harness_dir,
            components: arm.component_values(),
            budget,
            model,
            client,
            seed: spec.seed,
            exec: matches!(self, TrialEnv::Container(_)) && ext.runs_in == RunsIn::Host,
            python: shared.harness_python.as_ref(),
            mounts: &ext.mounts,
            memory_mb: ext.memory_mb.unwrap_or(external::HARNESS_MEMORY_MB),
            hosted_tools: ext.hosted_tools,
        };
        let out = match self {
            TrialEnv::Jail(sandbox) => external::run_external(&ctx, sandbox, on_step).await,
            TrialEnv::Container(c) if ext.runs_in == RunsIn::Host => {
                external::run_on_host(&ctx, c, on_step).await
            }
            TrialEnv::Container(c) => external::run_in_container(&ctx, c, on_step).await,
        };
        HarnessRun { measured: out.measured, command: out.command }
    }

    /// The builtin agent loop: in the jail (a Python task) or through the task's container's
    /// terminal.
    async fn run_builtin(
        &self,
        trial: HarnessTrial<'_>,
        components: &Components,
        on_step: Box<dyn FnMut(TraceStep) + Send>,
    ) -> HarnessRun {
        let HarnessTrial { shared, task, spec, attempt, arm, budget, model, client } = trial;
        let exp = &shared.exp;
        let mut on_step = on_step;
        let measured = match self {
            TrialEnv::Jail(sandbox) => {
                let ctx = TrialContext {
                    trial_id: &spec.id,
                    attempt,
                    task,
                    components,
                    instructions: &shared.instructions[&arm.name],
                    budget,
                    settings: &exp.harness,
                    model,
                    client: client.as_ref(),
                    seed: spec.seed,
                };
                agent::run_agent(&ctx, sandbox, &mut on_step).await
            }
            TrialEnv::Container(c) => {
                let instructions = &shared.instructions[&arm.name];
                let ctx = TerminalContext {
                    calls: CallContext {
                        trial_id: &spec.id,
                        attempt,
                        budget,
                        model,
                        client: client.as_ref(),
                        seed: spec.seed,
                        prefill: instructions.prefill.as_deref(),
                        stop: &instructions.stop,
                    },
                    task,
                    components,
                    instructions,
                    settings: &exp.harness,
                };
                terminal::run_agent(&ctx, c, &mut on_step).await
            }
        };
        HarnessRun { measured, command: None }
    }

    /// Grade what the harness left: the snapshot of the editable files in a
    /// fresh copy of the task (Python), the task's verifier (container).
    pub async fn grade(&self, shared: &Shared, task: &Task) -> std::io::Result<Grade> {
        match self {
            TrialEnv::Jail(sandbox) => grader::grade(sandbox, task).await,
            TrialEnv::Container(c) => Ok(grader::container_grade(
                c.verify(task, shared.suite.containers.reward_threshold).await,
            )),
        }
    }

    /// Remove the environment (the container and everything in it).
    pub(crate) async fn dispose(self) -> Result<(), EnvError> {
        match self {
            TrialEnv::Jail(sandbox) => {
                drop(sandbox);
                Ok(())
            }
            TrialEnv::Container(c) => Ok(c.remove().await?),
        }
    }
}

/// What a trial's harness runs with: its task, its arm, its model and the budget.
struct HarnessTrial<'a> {
    shared: &'a Shared,
    task: &'a Task,
    spec: &'a TrialSpec,
    attempt: u32,
    arm: &'a Arm,
    budget: &'a Budget,
    model: &'a ModelSpec,
    client: Arc<dyn ModelClient>,
}

/// The budget of a trial of `task`: the experiment's, with the working time
/// the smaller of it and the task's own agent timeout (a container task's).
pub(crate) fn trial_budget(budget: &Budget, task: &Task) -> Budget {
    let mut b = budget.clone();
    if let Some(t) = task.agent_timeout_sec() {
        b.max_working_seconds = b.max_working_seconds.min(t);
    }
    b
}
