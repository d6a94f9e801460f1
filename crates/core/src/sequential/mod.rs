//! Run until decided: the sequential design's rule, the same for the runner
//! (which trials to start) and the report (what was decided).
//!
//! Tasks enter in the plan's seeded order. After each task, in that order,
//! each comparison adds the task's paired difference (treatment pass rate
//! minus control pass rate over the task's trials, in [-1, 1]) to an
//! anytime-valid confidence sequence on the mean difference
//! (`betting`: Waudby-Smith & Ramdas 2024), at level alpha / m over the
//! family of m ablations (combined comparisons at alpha, as in the fixed
//! design). A comparison is decided, for good, the first time its sequence
//!
//! - lies above 0: **helps**; below 0: **hurts**;
//! - lies inside (-margin, +margin): **equivalent** within the margin.
//!
//! Because the sequence holds at every time at once, stopping at the first
//! decision keeps the error rates: under no effect, helps or hurts is ever
//! declared with probability at most alpha / m; at a true difference of
//! exactly the margin, equivalent at most alpha / m.
//!
//! The decision after task k depends only on the records of the first k
//! tasks in the order, never on which trials finished first: a resumed run
//! replays its records and reaches the same decisions.

pub mod betting;
pub mod spend;

use betting::{Bets, BettingCs};
use spend::{Spend, Spent};
use std::collections::HashMap;

/// Where a comparison stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Undecided,
    Helps,
    Hurts,
    Equivalent,
}

impl Decision {
    pub fn name(self) -> &'static str {
        match self {
            Decision::Undecided => "undecided",
            Decision::Helps => "helps",
            Decision::Hurts => "hurts",
            Decision::Equivalent => "equivalent",
        }
    }
}

/// A comparison the rule has just decided (`Monitor::record`): the
/// comparison's name, its model, the decision and the tasks it took. The
/// runner's progress writes it as "NAME on MODEL: DECISION after N tasks".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecidedComparison {
    pub name: String,
    pub model: String,
    pub decision: Decision,
    pub tasks: usize,
}

/// One comparison followed by the sequential rule: arm `treatment` against
/// arm `control` on `model`, at level `alpha`.
#[derive(Debug, Clone, PartialEq)]
pub struct ComparisonSpec {
    pub name: String,
    pub control: String,
    pub treatment: String,
    pub model: String,
    pub alpha: f64,
}

/// A comparison as the runner and the report name it: (name, control arm,
/// treatment arm, whether it is an ablation).
pub type Named<'a> = (&'a str, &'a str, &'a str, bool);

/// What a sequential run follows: each comparison on each model, ablations at
/// alpha / m for the m ablations of the run (every ablation on every model),
/// combined comparisons at alpha, as the fixed design's report does.
pub fn family(comparisons: &[Named<'_>], models: &[String], alpha: f64) -> Vec<ComparisonSpec> {
    let m = (comparisons.iter().filter(|c| c.3).count() * models.len()).max(1);
    let mut out = Vec::new();
    for &(name, control, treatment, ablation) in comparisons {
        for model in models {
            out.push(ComparisonSpec {
                name: name.to_string(),
                control: control.to_string(),
                treatment: treatment.to_string(),
                model: model.clone(),
                alpha: if ablation { alpha / m as f64 } else { alpha },
            });
        }
    }
    out
}

/// A run's sequential design as the manifest or the config gives it.
pub(crate) struct RunDesign<'a> {
    /// The experiment's tasks in the order they enter.
    pub task_order: &'a [String],
    /// A shard (index from 1, count) follows its own tasks (`own_tasks`)
    /// with its share of the budgets; None: the whole order.
    pub shard: Option<(u32, u32)>,
    pub trials: u32,
    pub max_tasks: Option<u32>,
    pub max_trials: Option<u64>,
    /// Budgets of money and running time: no trial starts once the records spent them.
    pub max_cost_usd: Option<f64>,
    pub max_seconds: Option<f64>,
    pub margin: Option<f64>,
    pub alpha: f64,
    /// Re-runs of a trial whose attempt ended in an infrastructure error.
    pub infra_retries: u32,
    /// The outcome the rule decides on (`[experiment] primary`); None: the pass rate.
    pub primary: Option<String>,
}

/// The tasks of `order` a shard (index from 1, count) owns: every count-th
/// task from the index-th, in order; without a shard, all of them.
pub(crate) fn own_tasks(order: &[String], shard: Option<(u32, u32)>) -> Vec<String> {
    match shard {
        Some((index, count)) => {
            order.iter().skip(index as usize - 1).step_by(count as usize).cloned().collect()
        }
        None => order.to_vec(),
    }
}

impl Monitor {
    /// The monitor of a run: its comparisons on every model (`family`), at
    /// most `max_tasks` tasks (every task by default), its bets (`bets_for`).
    /// A shard follows its own tasks: those of the first `max_tasks` of the
    /// order, bets sized for them, and its share of the budgets of trials and
    /// money (the budget over the shard count; running time is each shard's,
    /// as shards run side by side). The runner, the report and merge all
    /// build it here, so they follow one rule.
    pub(crate) fn for_run(
        d: &RunDesign<'_>,
        comparisons: &[Named<'_>],
        models: &[String],
        history: bool,
    ) -> Monitor {
        let budget =
            d.max_tasks.map_or(d.task_order.len(), |n| (n as usize).min(d.task_order.len()));
        let order = own_tasks(&d.task_order[..budget], d.shard);
        let all = own_tasks(d.task_order, d.shard);
        let shards = d.shard.map_or(1, |(_, n)| n);
        let family = family(comparisons, models, d.alpha);
        let max_trials = d.max_trials.map(|n| (n as usize).div_ceil(shards as usize));
        let mut m = Monitor::new(
            &all,
            d.trials,
            order.len(),
            max_trials,
            d.margin,
            bets_for(order.len()),
            family,
            history,
        );
        m.spend = Spend::new(d.max_cost_usd.map(|c| c / shards as f64), d.max_seconds);
        m.retries = d.infra_retries;
        m.primary = d.primary.clone();
        m
    }
}

/// The bets of a run whose budget is `max_tasks` tasks: sized for half of
/// it, so an effect a fixed design of that half detects with 80% power is
/// decided in about as many tasks, a larger one in far fewer, while the
/// sequence still narrows up to the budget (docs/statistics.md, the
/// efficiency table).
pub fn bets_for(max_tasks: usize) -> Bets {
    Bets::Horizon((max_tasks / 2).max(1))
}

/// The confidence sequence of a mean difference in [-1, 1] and its decision.
#[derive(Debug, Clone)]
pub struct Sequence {
    /// On x = (d + 1) / 2 in [0, 1]: the population of tasks like these.
    cs: BettingCs,
    /// Without replacement from the experiment's tasks: these tasks (None in simulations).
    wor: Option<BettingCs>,
    margin: Option<f64>,
    sizing: Bets,
    pub decision: Decision,
    /// Tasks added when the decision was taken.
    pub decided_at: Option<usize>,
    sum_d: f64,
    sum_d2: f64,
    /// The differences added, in order (the estimate after the stop resamples them).
    differences: Vec<f64>,
}

/// The followed points of a sequence: 0, then -margin and +margin (x scale).
fn decision_points(margin: Option<f64>) -> Vec<f64> {
    let mut points = vec![0.5];
    if let Some(m) = margin {
        points.extend([0.5 - m / 2.0, 0.5 + m / 2.0]);
    }
    points
}

/// A confidence interval of the mean difference, with what it speaks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SequenceInterval {
    pub lo: f64,
    pub hi: f64,
    /// The suite's own mean (without replacement; every task used), or the
    /// population of tasks like these.
    pub these_tasks: bool,
}

impl Sequence {
    /// `population`: the experiment's tasks (the without-replacement form's N);
    /// `sizing`: the bets' (`bets_for(max_tasks)` in runs); `history`: the
    /// interval after every task kept (the report's plot; the runner needs
    /// only the decisions). The without-replacement interval is found when asked.
    pub fn new(
        alpha: f64,
        margin: Option<f64>,
        population: usize,
        sizing: Bets,
        history: bool,
    ) -> Sequence {
        let cs = BettingCs::new(alpha, sizing, None, &decision_points(margin), history);
        Sequence::of(
            cs,
            Some(BettingCs::new(alpha, sizing, Some(population.max(1)), &[], false)),
            margin,
            sizing,
        )
    }

    /// The decisions alone, with `also` (differences) followed too (`excludes`):
    /// no interval is computed, so each task costs a few logarithms (simulations).
    pub fn untracked(alpha: f64, margin: Option<f64>, sizing: Bets, also: &[f64]) -> Sequence {
        let mut points = decision_points(margin);
        points.extend(also.iter().map(|d| (d + 1.0) / 2.0));
        Sequence::of(BettingCs::new(alpha, sizing, None, &points, false), None, margin, sizing)
    }

    fn of(cs: BettingCs, wor: Option<BettingCs>, margin: Option<f64>, sizing: Bets) -> Sequence {
        Sequence {
            cs,
            wor,
            margin,
            sizing,
            decision: Decision::Undecided,
            decided_at: None,
            sum_d: 0.0,
            sum_d2: 0.0,
            differences: Vec::new(),
        }
    }

    /// Whether the `i`-th difference given to `untracked` has left the sequence.
    pub fn excludes(&self, i: usize) -> bool {
        let p = self.cs.points()[1 + 2 * self.margin.is_some() as usize + i];
        p.above || p.below
    }

    pub fn tasks(&self) -> usize {
        self.cs.len()
    }

    /// Add a task's difference (treatment minus control, in [-1, 1]); decide
    /// if the sequence now allows it. Differences after the decision are not added.
    pub fn push(&mut self, d: f64) {
        if self.decision != Decision::Undecided {
            return;
        }
        let d = d.clamp(-1.0, 1.0);
        self.sum_d += d;
        self.sum_d2 += d * d;
        self.differences.push(d);
        self.cs.push((d + 1.0) / 2.0);
        if let Some(w) = &mut self.wor {
            w.push((d + 1.0) / 2.0);
        }
        let p = self.cs.points();
        let decision = if p[0].above {
            Decision::Helps
        } else if p[0].below {
            Decision::Hurts
        } else if self.margin.is_some() && p[1].above && p[2].below {
            Decision::Equivalent
        } else {
            Decision::Undecided
        };
        if decision != Decision::Undecided {
            self.decision = decision;
            self.decided_at = Some(self.cs.len());
        }
    }

    /// The differences added, in order (each clamped into [-1, 1]).
    pub fn differences(&self) -> &[f64] {
        &self.differences
    }

    /// The mean difference of the tasks added.
    pub fn mean(&self) -> f64 {
        if self.cs.is_empty() { f64::NAN } else { self.sum_d / self.cs.len() as f64 }
    }

    /// The sequence now, on the difference scale: for tasks like these, or,
    /// once every task of the experiment is in, for these tasks.
    pub fn interval(&self, all_tasks_in: bool) -> SequenceInterval {
        let (lo, hi) = match (&self.wor, all_tasks_in) {
            (Some(w), true) => w.interval(),
            _ => self.cs.interval(),
        };
        SequenceInterval {
            lo: 2.0 * lo - 1.0,
            hi: 2.0 * hi - 1.0,
            these_tasks: all_tasks_in && self.wor.is_some(),
        }
    }

    /// The running interval after each task (tasks like these), on the
    /// difference scale; empty unless the sequence keeps its history.
    pub fn history(&self) -> Vec<(f64, f64)> {
        self.cs.history().iter().map(|&(l, h)| (2.0 * l - 1.0, 2.0 * h - 1.0)).collect()
    }

    /// How many tasks in all the current estimate suggests a decision needs
    /// (a projection of the sequence's width at the observed mean and spread):
    /// None when it is more than `cap`.
    pub fn projected_tasks(&self, cap: usize) -> Option<usize> {
        let t = self.cs.len();
        if t < 2 {
            return None;
        }
        let mean = self.mean();
        let var = ((self.sum_d2 - t as f64 * mean * mean) / (t as f64 - 1.0)).max(0.0);
        // On x = (d + 1) / 2: half the spread; the half-width doubles back to d.
        let sd_x = var.sqrt() / 2.0;
        let room = |hw: f64| match self.margin {
            Some(m) => hw < mean.abs() || hw < m - mean.abs(),
            None => hw < mean.abs(),
        };
        let mut n = t;
        while n <= cap {
            if room(2.0 * betting::projected_half_width(sd_x, n, self.cs.alpha(), self.sizing)) {
                return Some(n);
            }
            n = (n + 1).max(n + n / 20);
        }
        None
    }
}

/// The sequential rule over a run: the task order, each comparison's
/// sequence, and the outcomes of the tasks not yet added.
#[derive(Debug)]
pub struct Monitor {
    order: HashMap<String, usize>,
    tasks: usize,
    trials: u32,
    max_tasks: usize,
    comparisons: Vec<(ComparisonSpec, Sequence)>,
    /// The next task (position in the order) each comparison waits for.
    next: Vec<usize>,
    /// Outcomes by (task position, arm, model): one slot per repeat.
    outcomes: HashMap<(usize, String, String), Vec<Option<Outcome>>>,
    /// Re-runs of a trial whose attempt ended in an infrastructure error.
    retries: u32,
    /// Per comparison, the task (position) at which it stopped for good
    /// because a trial of it kept ending in infrastructure errors; kept
    /// current by `fill`, read by the queries.
    stalled: Vec<Option<usize>>,
    /// The budget of trials: tasks enter while the trials the tasks so far
    /// needed (`needed_through`) stay within it.
    max_trials: Option<usize>,
    /// The budgets of money and running time, and what the records spent.
    spend: Spend,
    /// The outcome the rule decides on (`[experiment] primary`); None: the pass rate.
    primary: Option<String>,
}

/// The re-runs a sequential design gives a trial whose attempt ended in an
/// infrastructure error, unless `infra_retries` says otherwise.
pub const DEFAULT_INFRA_RETRIES: u32 = 2;

/// Whether a trial whose attempt number `attempt` (1-based) ended in an
/// infrastructure error runs again under `retries` re-runs: the one rule the
/// runner, its ledger on resume and the monitor follow.
pub(crate) fn runs_again(attempt: u32, retries: u32) -> bool {
    attempt <= retries
}

/// A final record as far as the rule goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// Its pass value.
    Scored(f64),
    /// Its attempt (1-based) ended in an infrastructure error: the task does
    /// not enter until a re-run scores it, so an outage can delay a decision,
    /// never make one.
    Infrastructure { attempt: u32 },
    /// It records no value of the primary outcome in [0, 1]: the task never enters, and the
    /// comparisons that need it stop there undecided (the report says why).
    Unscorable,
}

/// What the runner does with a trial of a sequential run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Some comparison not yet decided needs it.
    Run,
    /// No comparison will: decided, or past the budget.
    Skip,
    /// Whether it falls inside the budget of trials depends on decisions the
    /// trials under way will make: ask again when one has finished.
    Wait,
}

/// How a comparison is counted as needing a task it has not reached yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Count {
    /// Only what is known: it needs the tasks it entered and, open, its next one (decided, no later one).
    Known,
    /// As if it needed every task until its budget (it may decide before).
    Undecided,
}

impl Monitor {
    /// `task_order`: the experiment's tasks in the order they enter;
    /// `trials`: trials of each task per arm and model; at most `max_tasks` enter;
    /// `sizing`: the bets of every sequence; `max_trials`: the budget of
    /// trials; `history`: every sequence keeps its interval after each task.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        task_order: &[String],
        trials: u32,
        max_tasks: usize,
        max_trials: Option<usize>,
        margin: Option<f64>,
        sizing: Bets,
        comparisons: Vec<ComparisonSpec>,
        history: bool,
    ) -> Monitor {
        let n = task_order.len();
        let next = vec![0; comparisons.len()];
        let stalled = vec![None; comparisons.len()];
        Monitor {
            order: task_order.iter().enumerate().map(|(i, t)| (t.clone(), i)).collect(),
            tasks: n,
            trials,
            max_tasks: max_tasks.min(n),
            comparisons: comparisons
                .into_iter()
                .map(|c| {
                    let s = Sequence::new(c.alpha, margin, n, sizing, history);
                    (c, s)
                })
                .collect(),
            next,
            outcomes: HashMap::new(),
            retries: DEFAULT_INFRA_RETRIES,
            stalled,
            max_trials,
            spend: Spend::default(),
            primary: None,
        }
    }

    /// The outcome the rule decides on (`[experiment] primary`); None: the pass rate.
    pub fn primary(&self) -> Option<&str> {
        self.primary.as_deref()
    }

    /// A final record: `passed` (0 or 1, or a fraction) of `repeat` of `task` in `arm` on `model`.
    /// Tasks now complete enter every comparison waiting for them, in order.
    /// Returns the comparisons this decided.
    pub fn record(
        &mut self,
        task: &str,
        arm: &str,
        model: &str,
        repeat: u32,
        passed: f64,
    ) -> Vec<DecidedComparison> {
        self.record_outcome(task, arm, model, repeat, Outcome::Scored(passed))
    }

    /// Whether a trial whose `attempt` (1-based) ended in an infrastructure
    /// error is re-run ([`runs_again`] under the design's `infra_retries`).
    pub fn retry(&self, attempt: u32) -> bool {
        runs_again(attempt, self.retries)
    }

    /// A final record's outcome (`record::TrialStatus::outcome`). Returns the
    /// comparisons it decided, as [`Monitor::record`] does.
    pub fn record_outcome(
        &mut self,
        task: &str,
        arm: &str,
        model: &str,
        repeat: u32,
        outcome: Outcome,
    ) -> Vec<DecidedComparison> {
        let Some(&k) = self.order.get(task) else { return Vec::new() };
        if repeat >= self.trials {
            return Vec::new();
        }
        let slots = self
            .outcomes
            .entry((k, arm.to_string(), model.to_string()))
            .or_insert_with(|| vec![None; self.trials as usize]);
        slots[repeat as usize] = Some(outcome);
        let open: Vec<bool> =
            self.comparisons.iter().map(|(_, s)| s.decision == Decision::Undecided).collect();
        self.advance();
        self.stalled = (0..self.comparisons.len()).map(|i| self.find_stall(i)).collect();
        self.comparisons
            .iter()
            .zip(open)
            .filter(|((_, s), was_open)| *was_open && s.decision != Decision::Undecided)
            .map(|((c, s), _)| DecidedComparison {
                name: c.name.clone(),
                model: c.model.clone(),
                decision: s.decision,
                tasks: s.tasks(),
            })
            .collect()
    }

    fn mean_of(&self, k: usize, arm: &str, model: &str) -> Option<f64> {
        let slots = self.outcomes.get(&(k, arm.to_string(), model.to_string()))?;
        let mut sum = 0.0;
        for s in slots {
            match s {
                Some(Outcome::Scored(v)) => sum += v,
                _ => return None,
            }
        }
        Some(sum / slots.len() as f64)
    }

    /// Whether task `k` of `arm` on `model` has a trial whose infrastructure
    /// errors used up its re-runs, or that has no score: it will never enter.
    fn exhausted(&self, k: usize, arm: &str, model: &str) -> bool {
        self.outcomes.get(&(k, arm.to_string(), model.to_string())).is_some_and(|slots| {
            slots.iter().any(|s| match s {
                Some(Outcome::Infrastructure { attempt }) => !self.retry(*attempt),
                Some(Outcome::Unscorable) => true,
                _ => false,
            })
        })
    }

    /// Whether the comparison `name` on `model` stopped (`stalled_at`) at a task a trial of
    /// which records no score of the primary outcome, rather than at infrastructure errors.
    pub fn stalled_unscorable(&self, name: &str, model: &str) -> bool {
        let Some(i) = self.comparisons.iter().position(|(c, _)| c.name == name && c.model == model)
        else {
            return false;
        };
        let (Some(k), spec) = (self.stalled(i), &self.comparisons[i].0) else { return false };
        [&spec.control, &spec.treatment].iter().any(|arm| {
            self.outcomes
                .get(&(k, arm.to_string(), model.to_string()))
                .is_some_and(|slots| slots.contains(&Some(Outcome::Unscorable)))
        })
    }

    /// The task (position in the order) at which comparison `i` stopped for
    /// good because a trial of it kept ending in infrastructure errors.
    fn stalled(&self, i: usize) -> Option<usize> {
        self.stalled[i]
    }

    /// [`Monitor::stalled`] worked out from the outcomes (after each record).
    fn find_stall(&self, i: usize) -> Option<usize> {
        let (spec, seq) = &self.comparisons[i];
        let k = self.next[i];
        (seq.decision == Decision::Undecided
            && k < self.max_tasks
            && (self.exhausted(k, &spec.control, &spec.model)
                || self.exhausted(k, &spec.treatment, &spec.model)))
        .then_some(k)
    }

    /// The task at which the comparison `name` on `model` stopped because a
    /// trial kept ending in infrastructure errors after its re-runs: no
    /// decision can come from it (the report says so).
    pub fn stalled_at(&self, name: &str, model: &str) -> Option<usize> {
        let i = self.comparisons.iter().position(|(c, _)| c.name == name && c.model == model)?;
        self.stalled(i)
    }

    /// Tasks enter each comparison in order once complete. With a budget of
    /// trials, task k enters only when the trials tasks 0..=k need are known
    /// (every comparison still open has entered the tasks before k) and
    /// within the budget: the rule depends on the records alone.
    fn advance(&mut self) {
        loop {
            let mut moved = false;
            for i in 0..self.comparisons.len() {
                loop {
                    let k = self.next[i];
                    let (spec, seq) = &self.comparisons[i];
                    if seq.decision != Decision::Undecided
                        || k >= self.max_tasks
                        || !self.within_budget(k)
                    {
                        break;
                    }
                    let (Some(c), Some(t)) = (
                        self.mean_of(k, &spec.control, &spec.model),
                        self.mean_of(k, &spec.treatment, &spec.model),
                    ) else {
                        break;
                    };
                    self.comparisons[i].1.push(t - c);
                    self.next[i] += 1;
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
    }

    /// Whether task k may enter under the budget of trials (known for certain).
    fn within_budget(&self, k: usize) -> bool {
        let Some(max) = self.max_trials else { return true };
        let open_behind = self
            .comparisons
            .iter()
            .zip(&self.next)
            .any(|((_, s), &n)| s.decision == Decision::Undecided && n < k);
        !open_behind && self.needed_through(k, Count::Undecided) <= max
    }

    /// Whether comparison `i` needs task `j`, counted as `count` says when it is open and has not reached `j`.
    fn needs_task(&self, i: usize, j: usize, count: Count) -> bool {
        let seq = &self.comparisons[i].1;
        if let Some(k) = self.stalled(i) {
            return j < k;
        }
        match seq.decided_at {
            Some(d) => j < d,
            // Open now, it needs its next task for certain; later ones only if it stays open.
            None => j <= self.next[i] || count == Count::Undecided,
        }
    }

    /// The trials tasks 0..=k need: per task, every (arm, model) of a
    /// comparison that needs it, times the trials per task.
    fn needed_through(&self, k: usize, count: Count) -> usize {
        let mut total = 0;
        for j in 0..=k.min(self.tasks.saturating_sub(1)) {
            let mut arms: Vec<(&str, &str)> = Vec::new();
            for (i, (c, _)) in self.comparisons.iter().enumerate() {
                if self.needs_task(i, j, count) {
                    for arm in [&c.control, &c.treatment] {
                        if !arms.contains(&(arm.as_str(), c.model.as_str())) {
                            arms.push((arm.as_str(), c.model.as_str()));
                        }
                    }
                }
            }
            total += arms.len() * self.trials as usize;
        }
        total
    }

    /// What a final record spent: it ran from `started` to `finished`
    /// (seconds on one clock) and cost `cost_usd`. Only the runner's choice
    /// of trials to start depends on it, never a decision.
    pub fn spend(&mut self, started: f64, finished: f64, cost_usd: Option<f64>) {
        self.spend.add(started, finished, cost_usd);
    }

    /// The budget of money or running time the records spent, if one is.
    pub fn spent(&self) -> Option<Spent> {
        self.spend.spent()
    }

    /// Whether a trial of `task` in `arm` on `model` serves a comparison not yet decided.
    pub fn needs(&self, task: &str, arm: &str, model: &str) -> bool {
        self.gate(task, arm, model) != Gate::Skip
    }

    /// Whether to start a trial of `task` in `arm` on `model` now: run it
    /// when an open comparison needs it and the task is inside the budgets
    /// for certain; skip it when not; wait when the budget of trials depends
    /// on decisions still to come (the trials under way decide it).
    pub fn gate(&self, task: &str, arm: &str, model: &str) -> Gate {
        let Some(&k) = self.order.get(task) else { return Gate::Skip };
        let open = self.comparisons.iter().enumerate().any(|(i, (c, s))| {
            s.decision == Decision::Undecided
                && self.stalled(i).is_none()
                && c.model == model
                && (c.control == arm || c.treatment == arm)
        });
        if k >= self.max_tasks || !open || self.spent().is_some() {
            return Gate::Skip;
        }
        let Some(max) = self.max_trials else { return Gate::Run };
        if self.needed_through(k, Count::Undecided) <= max {
            Gate::Run
        } else if self.needed_through(k, Count::Known) > max {
            Gate::Skip
        } else {
            Gate::Wait
        }
    }

    /// Every comparison decided, or at the end of its tasks, or a budget of money or time spent.
    pub fn finished(&self) -> bool {
        self.spent().is_some()
            || self.comparisons.iter().zip(&self.next).enumerate().all(|(i, ((_, s), &k))| {
                s.decision != Decision::Undecided
                    || self.stalled(i).is_some()
                    || k >= self.max_tasks
                    || self.max_trials.is_some_and(|m| self.needed_through(k, Count::Known) > m)
            })
    }

    pub fn comparisons(&self) -> impl Iterator<Item = (&ComparisonSpec, &Sequence)> {
        self.comparisons.iter().map(|(c, s)| (c, s))
    }

    /// The experiment's tasks (the without-replacement population).
    pub fn tasks(&self) -> usize {
        self.tasks
    }

    pub fn max_tasks(&self) -> usize {
        self.max_tasks
    }
}

#[cfg(test)]
mod tests;
