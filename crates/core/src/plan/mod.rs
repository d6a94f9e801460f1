//! The trial plan: every (task, arm, model, repeat), with stable ids, paired
//! seeds and an interleaved execution order.
//!
//! - The id of a trial is derived from the config digest, task, arm, model and
//!   repeat: the same experiment always plans the same ids, so a resumed run
//!   knows which trials already have a record.
//! - The seed depends only on (experiment seed, task, repeat): the same
//!   (task, repeat) gets the same seed in every arm and model (common random
//!   numbers), which makes paired differences less noisy.
//! - The order is blocked: each (model, task, repeat) block holds every arm, in
//!   a seeded random order, and blocks are shuffled. Arms are interleaved over
//!   time, so drift of an endpoint hits every arm alike.
//! - The sequential design (run until decided) orders tasks instead: the
//!   tasks in a seeded random order, and each task's blocks (every arm for one
//!   (model, repeat)) together, shuffled among themselves, so each task is
//!   complete as early as it can be and tasks enter the decision in that order.
//! - Shards (`K/N`) take every N-th trial of the order; in the sequential
//!   design, every N-th task of the task order instead, with all its trials,
//!   so a shard completes the tasks it owns and follows them by its own rule.

pub mod render;

use crate::digest;
use crate::error::InputError;
use crate::experiment::config::Experiment;
use crate::record;
use crate::suite::{Suite, TaskKind};
use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

pub use crate::record::design::{Shard, TrialSpec};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub config_digest: String,
    pub trials: Vec<TrialSpec>,
    /// The sequential design: shards own whole tasks (`Plan::shard`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shard_by_task: bool,
}

/// Stable trial id: 16 hex chars of sha256 over its defining parts.
pub fn trial_id(config_digest: &str, task: &str, arm: &str, model: &str, repeat: u32) -> String {
    let r = repeat.to_string();
    let d = digest::digest_parts([
        ("config", config_digest),
        ("task", task),
        ("arm", arm),
        ("model", model),
        ("repeat", r.as_str()),
    ]);
    d[..16].to_string()
}

/// The seed of (task, repeat); equal across arms and models by construction.
pub fn trial_seed(experiment_seed: u64, task: &str, repeat: u32) -> u64 {
    let s = experiment_seed.to_string();
    let r = repeat.to_string();
    let d = digest::digest_parts([("seed", s.as_str()), ("task", task), ("repeat", r.as_str())]);
    // 53 bits: exact in JSON numbers and accepted by every provider's seed field.
    u64::from_str_radix(&d[..14], 16).expect("hex") & ((1u64 << 53) - 1)
}

/// The plan in execution order without its specs written out: 16 bytes a
/// trial (indices into the names), each `TrialSpec` made when it is needed.
/// What a run of a million trials holds instead of a million specs.
#[derive(Debug, Clone)]
pub struct Order {
    pub config_digest: String,
    seed: u64,
    tasks: Vec<String>,
    arms: Vec<String>,
    models: Vec<String>,
    entries: Vec<Entry>,
    /// The sequential design: each task's position in the task order, by
    /// which shards own whole tasks (None: shards take every N-th trial).
    task_position: Option<Vec<u32>>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    model: u32,
    arm: u32,
    task: u32,
    repeat: u32,
}

impl Order {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The trial at position `order` of the execution order.
    pub fn spec(&self, order: usize) -> TrialSpec {
        let e = self.entries[order];
        let (task, arm, model) = (
            &self.tasks[e.task as usize],
            &self.arms[e.arm as usize],
            &self.models[e.model as usize],
        );
        TrialSpec {
            id: trial_id(&self.config_digest, task, arm, model, e.repeat),
            order: order as u32,
            task: task.clone(),
            arm: arm.clone(),
            model: model.clone(),
            repeat: e.repeat,
            seed: trial_seed(self.seed, task, e.repeat),
        }
    }

    /// How many trials `shard` (all without one) holds.
    pub fn count(&self, shard: Option<Shard>) -> usize {
        match (shard, &self.task_position) {
            (None, _) => self.entries.len(),
            (Some(s), None) => {
                (self.entries.len() + s.count as usize - s.index as usize) / s.count as usize
            }
            (Some(_), Some(_)) => {
                (0..self.entries.len()).filter(|&i| self.in_shard(i, shard)).count()
            }
        }
    }

    /// Whether the trial at position `i` of the order is in `shard` (every
    /// trial is in no shard at all): every N-th trial, or in the sequential
    /// design every trial of every N-th task of the task order.
    fn in_shard(&self, i: usize, shard: Option<Shard>) -> bool {
        let Some(s) = shard else { return true };
        let at = match &self.task_position {
            Some(position) => position[self.entries[i].task as usize] as usize,
            None => i,
        };
        s.owns(at)
    }

    /// The trials of `shard` (all without one), in execution order, made one at a time.
    pub fn specs(&self, shard: Option<Shard>) -> impl Iterator<Item = TrialSpec> + '_ {
        (0..self.entries.len()).filter(move |&i| self.in_shard(i, shard)).map(|i| self.spec(i))
    }
}

/// The execution order. `experiment.tasks` (if not empty) selects tasks of the suite.
/// The most trials one run plans (16 bytes each while it runs).
pub(crate) const MAX_PLANNED: u64 = 10_000_000;

/// The manifest of a new run, without its plan (`Manifest::write_with_plan` writes it from
/// `order.specs(shard)`): the experiment, the suite and the plan as the record holds them. `facts`
/// come from the runner (`runner::facts`).
pub fn manifest(
    run_id: String,
    exp: &Experiment,
    suite: &Suite,
    order: &Order,
    shard: Option<Shard>,
    facts: record::RunnerFacts,
) -> record::Manifest {
    record::Manifest {
        format: record::FORMAT_VERSION,
        run_id,
        tool: "ablate".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        created_at: record::now_rfc3339(),
        config_path: exp.config_path.display().to_string(),
        config_file_digest: exp.file_digest.clone(),
        config_digest: order.config_digest.clone(),
        experiment: exp.recorded(),
        suite: record::SuiteFacts {
            name: suite.name.clone(),
            version: suite.version.clone(),
            path: exp.suite.clone(),
            digest: suite.digest.clone(),
            tasks: suite.tasks.iter().map(|t| (t.id.clone(), t.digest.clone())).collect(),
            grading: suite
                .tasks
                .iter()
                .filter_map(|t| match t.kind {
                    TaskKind::Python => Some((t.id.clone(), t.check.mode)),
                    TaskKind::Container(_) => None,
                })
                .collect(),
            source: suite.source.clone(),
        },
        prompt_digests: facts
            .builtin_prompts
            .into_iter()
            .chain(exp.prompt_digests.iter().map(|(k, v)| (k.clone(), v.clone())))
            .collect(),
        host: facts.host,
        models: Vec::new(),
        budget: exp.budget.clone(),
        experiment_seed: exp.seed,
        shard,
        merged: None,
        containers: None,
        sequential: exp
            .sequential
            .as_ref()
            .map(|_| record::SequentialFacts { task_order: order.task_order() }),
        imported: None,
        planned_trials: order.count(shard),
        plan: Vec::new(),
    }
}

pub fn order(exp: &Experiment, suite: &Suite) -> Result<Order, InputError> {
    let mut task_ids: Vec<&str> = Vec::new();
    if exp.tasks.is_empty() {
        task_ids.extend(suite.tasks.iter().map(|t| t.id.as_str()));
    } else {
        for (i, id) in exp.tasks.iter().enumerate() {
            if suite.task(id).is_none() {
                let known =
                    suite.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>().join(", ");
                return Err(InputError::at(
                    &exp.config_path,
                    format!("experiment.tasks[{i}]"),
                    format!("suite `{}` has no task `{id}`; tasks: {known}", suite.name),
                ));
            }
            if task_ids.contains(&id.as_str()) {
                return Err(InputError::at(
                    &exp.config_path,
                    format!("experiment.tasks[{i}]"),
                    format!("task `{id}` is listed twice"),
                ));
            }
            task_ids.push(id);
        }
    }
    refuse_resources_without_containers(exp, suite, &task_ids)?;
    refuse_budget_sweep_that_cannot_run(exp, suite, &task_ids)?;
    if exp.factorial.is_some() && exp.sequential.is_some() {
        return Err(InputError::at(
            &exp.config_path,
            "matrix.factorial",
            "a factorial design is not run with the sequential design (`--until-decided` or design = \"sequential\"): its stopping rule decides one comparison of two arms at a time, and a factorial's effects are contrasts over all its runs; run it with the fixed design",
        ));
    }
    let planned = (exp.models.len() as u64)
        * (task_ids.len() as u64)
        * (exp.trials as u64)
        * (exp.arms.len() as u64);
    if planned > MAX_PLANNED {
        return Err(InputError::at(
            &exp.config_path,
            "experiment.trials",
            format!(
                "{} models x {} tasks x {} trials x {} arms = {planned} trials, more than the {MAX_PLANNED} one run can plan",
                exp.models.len(),
                task_ids.len(),
                exp.trials,
                exp.arms.len()
            ),
        ));
    }
    let config_digest = exp.config_digest();
    let entries = if exp.sequential.is_some() {
        task_major(exp, task_ids.len())
    } else {
        interleaved(exp, task_ids.len())
    };
    let task_position = exp.sequential.is_some().then(|| {
        let mut position = vec![u32::MAX; task_ids.len()];
        let mut next = 0;
        for e in &entries {
            if position[e.task as usize] == u32::MAX {
                position[e.task as usize] = next;
                next += 1;
            }
        }
        position
    });
    Ok(Order {
        config_digest,
        seed: exp.seed,
        tasks: task_ids.iter().map(|t| t.to_string()).collect(),
        arms: exp.arms.iter().map(|a| a.name.clone()).collect(),
        models: exp.models.iter().map(|m| m.name.clone()).collect(),
        entries,
        task_position,
    })
}

/// Blocks of every arm for one (model, task, repeat), each shuffled, then
/// the blocks shuffled: the shuffles draw from the seed by length alone. Built
/// in one vector (a block is a slice of it), then laid out block by block.
fn interleaved(exp: &Experiment, tasks: usize) -> Vec<Entry> {
    let mut rng = ChaCha8Rng::seed_from_u64(trial_seed(exp.seed, "<order>", 0));
    let arms = exp.arms.len();
    let mut by_block: Vec<Entry> =
        Vec::with_capacity(exp.models.len() * tasks * exp.trials as usize * arms);
    for model in 0..exp.models.len() {
        for task in 0..tasks {
            for repeat in 0..exp.trials {
                let start = by_block.len();
                by_block.extend((0..arms).map(|arm| Entry {
                    model: model as u32,
                    arm: arm as u32,
                    task: task as u32,
                    repeat,
                }));
                by_block[start..].shuffle(&mut rng);
            }
        }
    }
    let mut blocks: Vec<u32> = (0..(by_block.len() / arms.max(1)) as u32).collect();
    blocks.shuffle(&mut rng);
    blocks
        .iter()
        .flat_map(|&b| &by_block[b as usize * arms..(b as usize + 1) * arms])
        .copied()
        .collect()
}

/// The sequential design's order: the tasks shuffled (their own seed), then
/// task by task its blocks (every arm for one (model, repeat)), each shuffled,
/// and the task's blocks shuffled among themselves.
fn task_major(exp: &Experiment, tasks: usize) -> Vec<Entry> {
    let mut task_rng = ChaCha8Rng::seed_from_u64(trial_seed(exp.seed, "<task order>", 0));
    let mut rng = ChaCha8Rng::seed_from_u64(trial_seed(exp.seed, "<order>", 0));
    let mut order: Vec<u32> = (0..tasks as u32).collect();
    order.shuffle(&mut task_rng);
    let arms = exp.arms.len();
    let mut entries = Vec::with_capacity(exp.models.len() * tasks * exp.trials as usize * arms);
    for &task in &order {
        let mut blocks: Vec<Vec<Entry>> = Vec::new();
        for model in 0..exp.models.len() {
            for repeat in 0..exp.trials {
                let mut block: Vec<Entry> = (0..arms)
                    .map(|arm| Entry { model: model as u32, arm: arm as u32, task, repeat })
                    .collect();
                block.shuffle(&mut rng);
                blocks.push(block);
            }
        }
        blocks.shuffle(&mut rng);
        entries.extend(blocks.into_iter().flatten());
    }
    entries
}

impl Order {
    /// The tasks in the order they first appear (the sequential design's task order).
    pub fn task_order(&self) -> Vec<String> {
        let mut seen = vec![false; self.tasks.len()];
        let mut out = Vec::with_capacity(self.tasks.len());
        for e in &self.entries {
            if !std::mem::replace(&mut seen[e.task as usize], true) {
                out.push(self.tasks[e.task as usize].clone());
            }
        }
        out
    }
}

/// Build the plan with every spec written out (`order` holds it compactly).
/// An arm's `resources` are a container's limits: refused, naming the arm and a task, when a
/// task of the experiment runs in the jail instead (they would be dropped there).
fn refuse_resources_without_containers(
    exp: &Experiment,
    suite: &Suite,
    task_ids: &[&str],
) -> Result<(), InputError> {
    let Some(arm) = exp.arms.iter().find(|a| !a.resources.is_empty()) else { return Ok(()) };
    let jailed = task_ids.iter().find(|id| {
        suite.task(id).is_some_and(|t| match t.kind {
            TaskKind::Python => true,
            TaskKind::Container(_) => false,
        })
    });
    match jailed {
        Some(task) => Err(InputError::at(
            &exp.config_path,
            format!("arms.{}.resources", arm.budget.as_ref().map_or(&arm.name, |b| &b.of)),
            format!(
                "sets container resources, but task `{task}` of suite `{}` is a Python task, run in the jail: resources are for container (Harbor) tasks",
                suite.name
            ),
        )),
        None => Ok(()),
    }
}

/// A budget sweep that could not run as its curves say: with the sequential design (set by
/// `--until-decided` after the config was checked), or at a working-time level above a task's
/// own agent timeout (the trial's budget is the smaller, so two levels would run alike).
fn refuse_budget_sweep_that_cannot_run(
    exp: &Experiment,
    suite: &Suite,
    task_ids: &[&str],
) -> Result<(), InputError> {
    use crate::experiment::matrix::BudgetKey;
    let at = |msg: String| InputError::at(&exp.config_path, "matrix.budget", msg);
    let levels: Vec<_> =
        exp.arms.iter().filter_map(|a| a.budget.as_ref().map(|b| b.level)).collect();
    if levels.is_empty() {
        return Ok(());
    }
    if exp.sequential.is_some() {
        return Err(at("a budget sweep is not run with the sequential design (`--until-decided` or design = \"sequential\"): its curves compare every level on the same tasks".into()));
    }
    let top = levels.iter().filter(|l| l.key == BudgetKey::MaxWorkingSeconds).map(|l| l.value);
    let Some(top) = top.reduce(f64::max) else { return Ok(()) };
    for id in task_ids {
        let timeout = suite.task(id).and_then(|t| t.agent_timeout_sec());
        if let Some(t) = timeout.filter(|&t| t < top) {
            return Err(at(format!(
                "the level {top} s is above task `{id}`'s agent timeout of {t} s, which bounds its trials' working time: levels above it would run alike"
            )));
        }
    }
    Ok(())
}

pub fn build(exp: &Experiment, suite: &Suite) -> Result<Plan, InputError> {
    let order = order(exp, suite)?;
    Ok(Plan {
        trials: order.specs(None).collect(),
        shard_by_task: order.task_position.is_some(),
        config_digest: order.config_digest,
    })
}

/// A shard that is not `K/N` with `1 <= K <= N`: the text given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid shard `{0}`: use K/N with 1 <= K <= N, e.g. --shard 2/4")]
pub struct BadShard(pub String);

impl FromStr for Shard {
    type Err = BadShard;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadShard(s.to_string());
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = k.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Plan {
    pub fn shard(&self, shard: Option<Shard>) -> Vec<TrialSpec> {
        let Some(s) = shard else { return self.trials.clone() };
        if !self.shard_by_task {
            return self.trials.iter().filter(|t| s.owns(t.order as usize)).cloned().collect();
        }
        let mut position: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for t in &self.trials {
            let next = position.len();
            position.entry(t.task.as_str()).or_insert(next);
        }
        self.trials.iter().filter(|t| s.owns(position[t.task.as_str()])).cloned().collect()
    }
}
