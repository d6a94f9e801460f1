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

pub mod render;

use crate::config::Experiment;
use crate::digest;
use crate::error::InputError;
use crate::suite::Suite;
use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TrialSpec {
    pub id: String,
    /// Position in the execution order (0-based).
    pub order: u32,
    pub task: String,
    pub arm: String,
    pub model: String,
    /// Repeat index within (task, arm, model), 0-based.
    pub repeat: u32,
    /// Sampling seed sent to the model.
    pub seed: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub config_digest: String,
    pub trials: Vec<TrialSpec>,
}

/// Stable trial id: 16 hex chars of sha256 over its defining parts.
pub fn trial_id(config_digest: &str, task: &str, arm: &str, model: &str, repeat: u32) -> String {
    let r = repeat.to_string();
    let d = digest::digest_parts([("config", config_digest), ("task", task), ("arm", arm), ("model", model), ("repeat", r.as_str())]);
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

/// Build the plan. `experiment.tasks` (if not empty) selects tasks of the suite.
pub fn build(exp: &Experiment, suite: &Suite) -> Result<Plan, InputError> {
    let mut task_ids: Vec<&str> = Vec::new();
    if exp.tasks.is_empty() {
        task_ids.extend(suite.tasks.iter().map(|t| t.id.as_str()));
    } else {
        for (i, id) in exp.tasks.iter().enumerate() {
            if suite.task(id).is_none() {
                let known = suite.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>().join(", ");
                return Err(InputError::at(&exp.config_path, format!("experiment.tasks[{i}]"), format!("suite `{}` has no task `{id}`; tasks: {known}", suite.name)));
            }
            if task_ids.contains(&id.as_str()) {
                return Err(InputError::at(&exp.config_path, format!("experiment.tasks[{i}]"), format!("task `{id}` is listed twice")));
            }
            task_ids.push(id);
        }
    }
    let config_digest = exp.config_digest();
    let mut rng = ChaCha8Rng::seed_from_u64(trial_seed(exp.seed, "<order>", 0));
    let mut blocks: Vec<Vec<TrialSpec>> = Vec::new();
    for model in &exp.models {
        for task in &task_ids {
            for repeat in 0..exp.trials {
                let seed = trial_seed(exp.seed, task, repeat);
                let mut block: Vec<TrialSpec> = exp
                    .arms
                    .iter()
                    .map(|arm| TrialSpec {
                        id: trial_id(&config_digest, task, &arm.name, &model.name, repeat),
                        order: 0,
                        task: task.to_string(),
                        arm: arm.name.clone(),
                        model: model.name.clone(),
                        repeat,
                        seed,
                    })
                    .collect();
                block.shuffle(&mut rng);
                blocks.push(block);
            }
        }
    }
    blocks.shuffle(&mut rng);
    let mut trials: Vec<TrialSpec> = blocks.into_iter().flatten().collect();
    for (i, t) in trials.iter_mut().enumerate() {
        t.order = i as u32;
    }
    Ok(Plan { config_digest, trials })
}

/// A deterministic part of the plan: `K/N` takes every trial whose position
/// in the execution order is K-1 modulo N. Every trial is in exactly one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1-based.
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub fn contains(&self, t: &TrialSpec) -> bool {
        t.order % self.count == self.index - 1
    }
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("invalid shard `{s}`: use K/N with 1 <= K <= N, e.g. --shard 2/4");
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
        match shard {
            Some(s) => self.trials.iter().filter(|t| s.contains(t)).cloned().collect(),
            None => self.trials.clone(),
        }
    }
}
