//! From rows to the report: per arm and model, and per comparison. The
//! statistics themselves are in `stats`; this module only groups and labels.

pub use super::interval::{Interval, IntervalMethod};
use super::load::{Row, RunData};
use super::stats;
use super::warnings::{ArmWarning, DeliveryNote, Refusal};
use ablate_core::experiment::matrix::{self, ComparisonKind};
use ablate_core::record::TrialStatus;
use ablate_core::record::delivery::{DeliveryCheck, Undelivered};
use ablate_core::record::design::Comparison;
use serde::Serialize;
use std::collections::BTreeMap;

pub mod budget;
mod containers;
pub mod costs;
mod delivery;
pub mod factorial;
pub mod models;
pub mod primary;
mod sequential;
pub mod tasks;
pub mod variance;
mod verdict;
pub use verdict::verdict;
pub(crate) use verdict::{sign_flip_test, with_margin};

/// What an effect compares: one component (an ablation, in the family the
/// p-values are adjusted over) or arms that differ in several (combined).
/// Written under its `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectKind {
    Ablation,
    Combined,
}

impl EffectKind {
    pub fn name(self) -> &'static str {
        match self {
            EffectKind::Ablation => "ablation",
            EffectKind::Combined => "combined",
        }
    }
}

/// The estimand of an interval over two tasks or more: the mean over the
/// population of tasks the suite is a sample of (the coverage simulation's
/// target); its p-value tests "no effect" on the suite's own tasks.
pub const ESTIMAND_TASKS_LIKE_THESE: &str = "tasks like these";
/// The estimand of a one-task interval: that task's rate, its trials the sample.
pub(crate) const ESTIMAND_THIS_TASK: &str = "this task";
/// What the effects' intervals and p-values are about, said in every output.
pub(crate) const ESTIMAND_NOTE: &str = "intervals: the mean difference over tasks like these (the population of tasks the suite samples); p: no effect on these tasks";
/// The estimand of the arms' pass-rate intervals, for a table of them.
pub(crate) fn arms_estimand(arms: &[ArmReport]) -> &'static str {
    let one = arms.iter().filter(|a| a.pass_rate.n_tasks == 1).count();
    if one == 0 {
        ESTIMAND_TASKS_LIKE_THESE
    } else if one == arms.len() {
        ESTIMAND_THIS_TASK
    } else {
        "tasks like these; one-task arms: this task"
    }
}

/// What a sequential run's effects are, said in every output.
pub(crate) const SEQUENTIAL_NOTE: &str = "intervals: anytime-valid confidence sequences at each comparison's stopping time, for the mean difference over tasks like these (with every task in and undecided, the suite's own mean as run is a separate line, a description); no p-values: a fixed-design test is not valid after stopping on the data (the arms' pass-rate intervals describe the tasks each arm ran)";

/// How the ablations' family is adjusted for `e`: Holm's step-down in the
/// fixed design, Bonferroni in a sequential one (its sequences are decided
/// at different times).
pub(crate) fn family_adjustment(e: &EffectReport) -> &'static str {
    if e.sequential.is_some() { "bonferroni" } else { "holm" }
}

/// [`SEQUENTIAL_NOTE`] for a sequential run's effects; else [`ESTIMAND_NOTE`]
/// when some effect of the list covers tasks like these.
pub(crate) fn estimand_note(effects: &[EffectReport]) -> Option<&'static str> {
    if effects.iter().any(|e| e.sequential.is_some()) {
        return Some(SEQUENTIAL_NOTE);
    }
    effects.iter().any(|e| e.estimand == ESTIMAND_TASKS_LIKE_THESE).then_some(ESTIMAND_NOTE)
}

/// A sequential comparison's course in one line: what was decided after how
/// many tasks and trials, or where the budget ended it.
pub(crate) fn sequential_note(e: &EffectReport) -> Option<String> {
    let q = e.sequential.as_ref()?;
    let tasks = super::format::count(q.tasks, "task");
    Some(match q.decided_after_tasks {
        Some(_) => format!(
            "sequence: decided ({}) after {tasks}, {} trials; delta is the naive mean at the stop, biased away from 0 by stopping early: bias-reduced {} pp",
            e.verdict.short(),
            q.trials,
            super::format::pp(q.delta_bias_reduced)
        ),
        None => format!(
            "sequence: undecided after {tasks}, {} trials ({}{}); its interval now: {}{}",
            q.trials,
            e.estimand,
            q.budget_spent.map(|b| format!("; {b}")).unwrap_or_default(),
            e.method.words(),
            q.these_tasks
                .map(|(lo, hi)| format!(
                    "; these tasks as run, a description and not the inference: [{}, {}] pp",
                    super::format::pp(lo),
                    super::format::pp(hi)
                ))
                .unwrap_or_default()
        ),
    })
}

/// The gate's estimand: the pass rate over the suite's own tasks, the trials the random part.
pub(crate) const ESTIMAND_THESE_TASKS: &str = "these tasks";

/// The verdict on an effect, read from its interval. Written out (JSON, CSV,
/// Markdown) as the sentence `Display` gives.
#[derive(Debug, Clone, PartialEq)]
pub enum EffectVerdict {
    /// No task in both arms, or no interval.
    NotEnoughData,
    /// The arms asked differently in these fields and reached the model
    /// identically in all of them: the treatment never reached the model
    /// (the delivery check, `report::delivery`), so no effect is claimed.
    NotDelivered { fields: Vec<Undelivered> },
    /// No trial of this arm reached the model: there is no experiment to compare.
    NotComparable { arm: String },
    /// The arms met different numbers of infrastructure errors (provider,
    /// harness or grader failures), and the verdict with them counted as
    /// failures differs from the verdict without them: the infrastructure
    /// would decide, so the comparison is flagged and not decided.
    InfrastructureDiffers { control: usize, treatment: usize },
    /// The arms' trials of `task` ran on different container engines or
    /// limits (as recorded): the comparison would measure the infrastructure.
    ContainersDiffer { task: String, control: String, treatment: String },
    /// A sequential comparison stopped at `task`, whose trials kept ending in
    /// infrastructure errors after `retries` re-runs: no decision came from it.
    InfrastructureStopped { task: String, retries: u32 },
    /// The interval lies above 0 (`one_task`: it speaks for that task only).
    Helps { one_task: bool },
    /// The interval lies below 0.
    Hurts { one_task: bool },
    /// Too few tasks for the exact test to ever reject at this level.
    NoVerdictPossible { tasks: usize, needed: u64 },
    /// The interval holds 0: absence of evidence, not evidence of no effect
    /// (declare a margin for that).
    NoDetectableEffect { one_task: bool },
    /// With a declared margin: two one-sided tests at the comparison's level
    /// put the difference inside (-margin, +margin).
    Equivalent { margin: f64, one_task: bool },
    /// With a declared margin: neither an effect nor equivalence shown.
    Undecided { margin: f64, one_task: bool },
    /// The experiment's primary outcome is missing on some trials or outside
    /// [0, 1] on some: there is nothing a verdict could be read from.
    PrimaryUnusable { primary: String, missing: usize, outside: usize },
    /// A sequential run that spent its budget before deciding: the tasks the
    /// current estimate suggests a decision needs in all (None: more than
    /// `PROJECTION_CAP`), `tasks` the tasks that entered, `every_task` when
    /// they are all of the experiment's.
    UndecidedAtBudget { projected_tasks: Option<usize>, tasks: usize, every_task: bool },
}

/// The most tasks a sequential report projects a decision to need.
pub const PROJECTION_CAP: usize = 100_000;

impl EffectVerdict {
    /// Whether the verdict withholds a reading of the interval because the experiment is not the
    /// one claimed (not delivered, not comparable, other infrastructure, no usable primary) or
    /// there is no interval.
    pub fn withheld(&self) -> bool {
        matches!(
            self,
            EffectVerdict::NotEnoughData
                | EffectVerdict::NotDelivered { .. }
                | EffectVerdict::NotComparable { .. }
                | EffectVerdict::InfrastructureDiffers { .. }
                | EffectVerdict::ContainersDiffer { .. }
                | EffectVerdict::InfrastructureStopped { .. }
                | EffectVerdict::PrimaryUnusable { .. }
        )
    }

    /// One word: `helps`, `hurts`, `n.s.` (no effect shown) or `n/a`.
    pub fn short(&self) -> &'static str {
        match self {
            EffectVerdict::NotDelivered { .. } => "not delivered",
            EffectVerdict::NotComparable { .. } => "not comparable",
            EffectVerdict::InfrastructureDiffers { .. }
            | EffectVerdict::InfrastructureStopped { .. }
            | EffectVerdict::ContainersDiffer { .. } => "infrastructure",
            EffectVerdict::Helps { .. } => "helps",
            EffectVerdict::Hurts { .. } => "hurts",
            EffectVerdict::NoVerdictPossible { .. } | EffectVerdict::NoDetectableEffect { .. } => {
                "n.s."
            }
            EffectVerdict::Equivalent { .. } => "equivalent",
            EffectVerdict::Undecided { .. } | EffectVerdict::UndecidedAtBudget { .. } => {
                "undecided"
            }
            EffectVerdict::NotEnoughData | EffectVerdict::PrimaryUnusable { .. } => "n/a",
        }
    }
}

impl std::fmt::Display for EffectVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let only = |one: bool| if one { " (this task only)" } else { "" };
        match *self {
            EffectVerdict::NotEnoughData => f.write_str("not enough data to tell"),
            EffectVerdict::PrimaryUnusable { ref primary, missing, outside } => write!(
                f,
                "no verdict: the primary outcome `{primary}` is missing on {missing} trials and outside [0, 1] on {outside} (a verdict decides on a score in [0, 1] every trial records)"
            ),
            EffectVerdict::NotDelivered { ref fields } => {
                let list: Vec<String> = fields.iter().map(ToString::to_string).collect();
                write!(f, "not delivered: {}", list.join("; "))
            }
            EffectVerdict::NotComparable { ref arm } => {
                write!(f, "not comparable: no trial of arm `{arm}` reached the model")
            }
            EffectVerdict::InfrastructureDiffers { control, treatment } => write!(
                f,
                "no verdict: the arms met different infrastructure (infrastructure errors: {control} in the control, {treatment} in the treatment) and the verdict depends on them"
            ),
            EffectVerdict::ContainersDiffer { ref task, ref control, ref treatment } => write!(
                f,
                "no verdict: the arms ran on different infrastructure (task `{task}`: {control} in the control, {treatment} in the treatment)"
            ),
            EffectVerdict::InfrastructureStopped { ref task, retries } => write!(
                f,
                "no verdict: stopped at task `{task}`, whose trials still met infrastructure errors after {}",
                super::format::count(retries as usize, "re-run")
            ),
            EffectVerdict::Helps { one_task } => write!(f, "helps{}", only(one_task)),
            EffectVerdict::Hurts { one_task } => write!(f, "hurts{}", only(one_task)),
            EffectVerdict::NoVerdictPossible { tasks, needed } => write!(
                f,
                "no verdict possible: {tasks} tasks, at least {needed} needed at this level"
            ),
            EffectVerdict::NoDetectableEffect { one_task } => {
                write!(f, "no detectable effect{}", only(one_task))
            }
            EffectVerdict::Equivalent { margin, one_task } => write!(
                f,
                "equivalent within ±{} pp{}",
                super::format::margin_pp(margin),
                only(one_task)
            ),
            EffectVerdict::Undecided { margin, one_task } => {
                write!(
                    f,
                    "undecided: neither an effect nor within ±{} pp{}",
                    super::format::margin_pp(margin),
                    only(one_task)
                )
            }
            EffectVerdict::UndecidedAtBudget { projected_tasks, tasks, every_task } => {
                f.write_str(if every_task {
                    "undecided with every task in"
                } else {
                    "undecided at budget"
                })?;
                match projected_tasks {
                    _ if tasks < 2 => write!(
                        f,
                        ": {} too few to project how many more a decision needs",
                        super::format::count(tasks, "task")
                    ),
                    Some(n) => write!(
                        f,
                        ": about {n} tasks like these in all would decide it at the current estimate"
                    ),
                    None => write!(
                        f,
                        ": more than {PROJECTION_CAP} tasks like these would be needed at the current estimate"
                    ),
                }
            }
        }
    }
}

/// Serialised under `name()`: the one list of the names records and exports hold.
macro_rules! serialize_by_name {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
    )*};
}
serialize_by_name!(IntervalMethod, EffectKind);

impl Serialize for EffectVerdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The interval of a pass rate: clustered over tasks, as a Wilson score
/// interval on the effective sample size (`stats::pass_rate_wilson`: the
/// t interval collapses to zero width near 0 and 1 with few tasks, and
/// covered the truth in as little as 52% of simulated runs there); with a
/// single task, Wilson's interval over that task's trials, which speaks for
/// that task only.
fn rate_interval(outcomes: &[Vec<f64>], conf: f64) -> Interval {
    let e = stats::pass_rate_wilson(outcomes, conf);
    if e.n_tasks != 1 {
        return e.into();
    }
    let trials: Vec<f64> = outcomes.iter().flatten().copied().collect();
    let successes = trials.iter().filter(|&&x| x >= 1.0).count() as u64;
    if trials.iter().any(|&x| x > 0.0 && x < 1.0) {
        return e.into(); // fractions (tests passed): no binomial interval
    }
    let (lo, hi) = stats::wilson(successes, trials.len() as u64, conf);
    Interval { mean: e.mean, lo, hi, se: f64::NAN, n_tasks: 1, method: IntervalMethod::Wilson }
}

#[derive(Debug, Clone, Serialize)]
pub struct ArmReport {
    pub arm: String,
    pub model: String,
    /// The arm's value of every component (`Arm::component_values`).
    pub components: Vec<(String, String)>,
    pub trials: usize,
    pub tasks: usize,
    /// Every started trial counts; errors count as failures.
    pub pass_rate: Interval,
    /// Infrastructure errors (provider, harness, grader) left out.
    pub pass_rate_excl_infra: Interval,
    pub trials_excl_infra: usize,
    /// Every trial counts as what it left: a trial stopped by its time or
    /// budget whose final state passes counts as a pass (Harbor's scoring,
    /// where the reward counts). Beside `pass_rate`, where a timeout is a failure.
    pub pass_rate_final_state: Interval,
    /// Trials that timed out or hit their budget and whose final state passes.
    pub stopped_but_passing: usize,
    /// Mean fraction of tests passed.
    pub tests_passed: Interval,
    /// Final attempts by status; `Interrupted` counts interrupted attempts.
    pub statuses: StatusCounts,
    pub min_task_rate: f64,
    pub max_task_rate: f64,
    pub tokens_per_trial: f64,
    pub working_seconds_per_trial: f64,
    pub steps_per_trial: f64,
    pub cost_per_trial: Option<f64>,
    pub tokens_per_solved: Option<f64>,
    pub working_seconds_per_solved: Option<f64>,
    pub cost_per_solved: Option<f64>,
    /// (k, pass@k, pass^k), averaged over tasks, for k in PASS_AT_K up to the trials per task.
    pub pass_at_k: Vec<(u64, f64, f64)>,
    /// Spend per solved task and pass^k with intervals (`costs::arm`).
    pub costs: costs::ArmCosts,
    /// What its container trials ran on (`ContainerRun::describe`), each once.
    pub containers: Vec<String>,
    /// The arm (its index in `Report::arms`) that beats this one on both pass
    /// rate and spend per trial with confidence (`costs::beaten_by`); None on the frontier.
    #[serde(skip)]
    pub beaten_by: Option<usize>,
    /// The arm a budget sweep repeats, and its level; None without a sweep.
    pub budget: Option<matrix::AtBudget>,
    pub warnings: Vec<ArmWarning>,
}

/// An arm's final attempts by status, and its interrupted attempts (which
/// leave no final record) under `TrialStatus::Interrupted`. Iterated, and
/// written to report.json (status name: count), in the order of the names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusCounts(BTreeMap<TrialStatus, usize>);

impl StatusCounts {
    /// The statuses of `final_attempts`, and `interrupted` attempts when there were any.
    pub fn of(
        final_attempts: impl IntoIterator<Item = TrialStatus>,
        interrupted: Option<usize>,
    ) -> StatusCounts {
        let mut counts = BTreeMap::new();
        for status in final_attempts {
            *counts.entry(status).or_default() += 1;
        }
        if let Some(n) = interrupted {
            counts.insert(TrialStatus::Interrupted, n);
        }
        StatusCounts(counts)
    }

    /// How many ended so (0 for a status none did).
    pub fn get(&self, status: TrialStatus) -> usize {
        self.0.get(&status).copied().unwrap_or(0)
    }

    /// Each status some attempt ended in, with its count, in the order of the status names.
    pub fn iter(&self) -> impl Iterator<Item = (TrialStatus, usize)> {
        let mut counts: Vec<(TrialStatus, usize)> = self.0.iter().map(|(s, n)| (*s, *n)).collect();
        counts.sort_by_key(|(s, _)| s.name());
        counts.into_iter()
    }
}

impl Serialize for StatusCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter().map(|(status, n)| (status.name(), n)))
    }
}

/// The effect with infrastructure-error trials left out of both arms.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct ExclInfra {
    pub delta: f64,
    pub lo: f64,
    pub hi: f64,
    pub p_value: f64,
    pub n_tasks: usize,
    pub verdict_changes: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct EffectReport {
    pub name: String,
    pub model: String,
    pub control: String,
    pub treatment: String,
    pub kind: EffectKind,
    /// The component of an ablation; the differing components of a combined one.
    pub components: Vec<String>,
    /// Pass rates (mean of per-task means) of the paired tasks in each arm.
    pub control_rate: f64,
    pub treatment_rate: f64,
    pub delta: f64,
    /// The interval at `interval_level`, from the inference named in `method`.
    pub lo: f64,
    pub hi: f64,
    /// Two-sided p-value of "no difference" from the same inference (unadjusted).
    pub p_value: f64,
    /// The sign-flip test's two p-values (unadjusted), whichever `p_value`
    /// is: the mid-p and the exact test's (NaN for other methods).
    pub p_mid: f64,
    pub p_exact: f64,
    /// Adjusted over the ablations of the run: Holm's (`stats::holm`) in the
    /// fixed design (null for combined comparisons, which are not in the family).
    pub p_adjusted: Option<f64>,
    /// Comparisons in the family the interval and the verdict are adjusted for (1 for combined).
    pub family_size: usize,
    /// Confidence level of `lo`/`hi`: `1 - alpha / family_size`.
    pub interval_level: f64,
    pub method: stats::InferenceMethod,
    /// `tasks` (the tasks as a sample of a population), or `one task: <task>`
    /// (the trials of a single task: speaks for that task only).
    pub scope: String,
    /// What the interval covers: `tasks like these` (the mean difference over
    /// the population of tasks the suite samples) or `this task` (one task's
    /// trials). See [`ESTIMAND_TASKS_LIKE_THESE`].
    pub estimand: &'static str,
    pub n_tasks: usize,
    /// Smallest effect a paired t-test at `1 - interval_level` detects with 80% power on these tasks.
    pub mde: f64,
    /// Infrastructure-error trials (provider, harness, grader) in each arm.
    pub infra_errors_control: usize,
    pub infra_errors_treatment: usize,
    /// The arms differ in infrastructure errors: the effect may measure the infrastructure.
    pub infra_differs: bool,
    /// The effect without infrastructure-error trials (when either arm had any).
    pub excl_infra: Option<ExclInfra>,
    pub verdict: EffectVerdict,
    /// A sequential run: how the comparison's sequence went.
    pub sequential: Option<SequentialEffect>,
    /// The delivery check: whether the arms' requests reached the model differently.
    pub delivery: DeliveryCheck,
    /// What the delivery check adds beside the verdict (None: nothing).
    pub delivery_note: Option<DeliveryNote>,
    /// What the comparison costs and how reliably each arm passes (`costs::paired`).
    pub costs: costs::Costs,
    /// The comparison a budget sweep repeats, and its level; None without a sweep.
    pub budget: Option<matrix::AtBudget>,
    /// Each task's effect, shrunk, and the tasks that carry a detected effect.
    pub tasks: tasks::TaskEffects,
}

/// A comparison of a sequential run (`ablate_core::sequential`): its interval,
/// level and verdict are the confidence sequence's at the stopping time.
#[derive(Debug, Clone, Serialize)]
pub struct SequentialEffect {
    /// Tasks in the sequence when it was decided (None: undecided).
    pub decided_after_tasks: Option<usize>,
    /// Tasks that entered the sequence, and the trials they took in the two arms.
    pub tasks: usize,
    pub trials: usize,
    /// Undecided at budget: the tasks in all the current estimate suggests.
    pub projected_tasks: Option<usize>,
    /// The running interval (tasks like these) after each task, for the plot.
    pub history: Vec<(f64, f64)>,
    /// The bias-reduced estimate of the mean difference (`report::stopping`):
    /// `delta` is the naive mean of the differences at the stop, biased away
    /// from 0 when the sequence stopped early on them.
    pub delta_bias_reduced: f64,
    /// Every task in and undecided: the without-replacement sequence, a
    /// description of these tasks as run (the suite's own mean, closing on it
    /// at the last task), never the effect's interval.
    pub these_tasks: Option<(f64, f64)>,
    /// The experiment's budget of money or running time, when the records
    /// spent it (what stopped the trials of a comparison left undecided).
    #[serde(serialize_with = "crate::report::warnings::spent_as_sentence")]
    pub budget_spent: Option<ablate_core::sequential::spend::Spent>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub run_id: String,
    pub experiment: String,
    /// sha256 of the resolved experiment (manifest `config_digest`).
    pub config_digest: String,
    /// Every component's name, in the order of the first arm, then any others.
    pub component_names: Vec<String>,
    pub suite: String,
    pub suite_digest: String,
    /// Task id -> where the candidate's code ran (manifest `suite.grading`).
    pub grading: std::collections::BTreeMap<String, ablate_core::record::GradingMode>,
    pub alpha: f64,
    /// The equivalence margin, when the experiment declares one.
    pub margin: Option<f64>,
    pub planned_trials: usize,
    pub recorded_trials: usize,
    pub interrupted_attempts: usize,
    pub unreadable_lines: Vec<usize>,
    pub arms: Vec<ArmReport>,
    pub ablations: Vec<EffectReport>,
    pub combined: Vec<EffectReport>,
    /// A budget sweep's curves (`[matrix.budget]`); None without a sweep.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_curves: Option<budget::BudgetCurves>,
    /// A factorial design's effects (`[matrix.factorial]`); None without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub factorial: Option<factorial::Factorial>,
    /// Each comparison's effect compared between every two models (harness x model).
    pub model_differences: Vec<models::ModelDifference>,
    /// The outcome's variance by source (task, arm, model, ...); None under two tasks.
    pub variance: Option<variance::Decomposition>,
    /// The outcome the verdicts decide on: `pass_rate`, or the experiment's primary.
    pub primary: String,
    /// Comparisons labelled ablations that the analysis-time guard refused.
    pub refused: Vec<Refusal>,
    /// The `system_fingerprint`s each model's replies carried (OpenAI-compatible
    /// servers that send one). Two or more for one model: its serving stack
    /// changed during the run.
    pub system_fingerprints: Vec<FingerprintSeen>,
    /// An imported run (`ablate import`): where its trials came from and how they were graded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported: Option<String>,
}

/// A sentence per model whose replies carried more than one `system_fingerprint`.
pub fn fingerprint_changes(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    let mut models: Vec<&str> = r.system_fingerprints.iter().map(|f| f.model.as_str()).collect();
    models.dedup();
    for model in models {
        let seen: Vec<&FingerprintSeen> =
            r.system_fingerprints.iter().filter(|f| f.model == model).collect();
        if seen.len() > 1 {
            let list = seen
                .iter()
                .map(|f| format!("`{}` in {} trials", f.fingerprint, f.attempts))
                .collect::<Vec<_>>()
                .join(", ");
            out.push(format!(
                "model `{model}` replied under {} system fingerprints ({list}): its serving stack changed during the run; trials.csv's system_fingerprints column says which trial saw which",
                seen.len()
            ));
        }
    }
    out
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FingerprintSeen {
    pub model: String,
    pub fingerprint: String,
    /// Final attempts whose replies carried it.
    pub attempts: usize,
}

/// The k of pass@k and pass^k reported (those up to the trials per task).
pub const PASS_AT_K: [u64; 6] = [1, 2, 3, 5, 10, 20];

/// Per-task outcome vectors for one (arm, model), in task-table order.
fn by_task(rows: &[&Row], n_tasks: usize, f: impl Fn(&Row) -> f64) -> Vec<Vec<f64>> {
    let mut v = vec![Vec::new(); n_tasks];
    for r in rows {
        v[r.task as usize].push(f(r));
    }
    v
}

fn mean_of(xs: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 { f64::NAN } else { s / n as f64 }
}

/// What an arm's trials (`rows`, over `tasks` tasks) call into question.
/// `imported`: the run was imported, and its sources may not count model calls
/// (docs/import.md): no warning from a count they lack.
fn arm_warnings(rows: &[&Row], tasks: usize, imported: bool) -> Vec<ArmWarning> {
    let trials = rows.len();
    let many = |k: usize| k as f64 > 0.1 * trials as f64;
    let stopped = rows
        .iter()
        .filter(|r| {
            r.status.is_infrastructure_error()
                || matches!(r.status, TrialStatus::Timeout | TrialStatus::BudgetExhausted)
        })
        .count();
    let mut warnings = Vec::new();
    if many(stopped) {
        warnings.push(ArmWarning::ManyStopped { stopped, trials });
    }
    let silent = if imported { 0 } else { rows.iter().filter(|r| r.steps == 0).count() };
    if silent == trials && trials > 0 {
        warnings.push(ArmWarning::NoModelCall { trials });
    } else if many(silent) {
        warnings.push(ArmWarning::ManyWithoutModelCall { silent, trials });
    }
    if tasks == 1 {
        warnings.push(ArmWarning::OneTask);
    }
    warnings
}

/// What the stages of the analysis share: the run, its rows by (model, arm), the outcome the
/// verdicts decide on, and the level and test of the inference.
struct Run<'a> {
    data: &'a RunData,
    groups: containers::Groups<'a>,
    /// The outcome the verdicts decide on: the pass rate, or the experiment's primary.
    primary: primary::Primary,
    alpha: f64,
    /// `1 - alpha`: the level of an unadjusted interval.
    conf: f64,
    n_tasks: usize,
    test: stats::SignFlipTest,
}

impl<'a> Run<'a> {
    /// Loading the groups: the run's rows by (model, arm), and its level and test.
    fn of(data: &'a RunData) -> Run<'a> {
        let alpha = data.manifest.experiment.alpha;
        let mut groups: containers::Groups<'a> = BTreeMap::new();
        for r in &data.trials {
            groups.entry((r.model, r.arm)).or_default().push(r);
        }
        Run {
            data,
            groups,
            primary: primary::Primary::of(data),
            alpha,
            conf: 1.0 - alpha,
            n_tasks: data.tasks.list.len(),
            test: sign_flip_test(&data.manifest.experiment),
        }
    }

    /// The two arms' primary outcomes by task, paired: only tasks present in both arms.
    fn paired(&self, c: &[&Row], t: &[&Row]) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
        let outcome = |r: &Row| self.primary.value(self.data, r);
        let mut cv = by_task(c, self.n_tasks, outcome);
        let mut tv = by_task(t, self.n_tasks, outcome);
        // Pair only tasks present in both arms.
        for k in 0..self.n_tasks {
            if cv[k].is_empty() || tv[k].is_empty() {
                cv[k].clear();
                tv[k].clear();
            }
        }
        (cv, tv)
    }
}

pub fn analyse(data: &RunData) -> Report {
    let run = Run::of(data);
    let arms = arm_reports(&run);
    // Effects: each comparison of the manifest, per model, re-checked by the guard.
    // First the paired outcomes of every comparison, then the inference, at the
    // level adjusted for the family of ablations (Holm's step: the interval, the
    // p-value and the verdict then come from one procedure and agree).
    let Comparisons { pending, unusable, refused } = comparisons(&run);
    let per_task: Vec<models::PerTask> = pending.iter().map(comparison_per_task).collect();
    let (mut ablations, mut combined) = inferred(&run, pending);
    for e in unusable {
        if e.kind == EffectKind::Ablation { ablations.push(e) } else { combined.push(e) }
    }
    if let Some(order) = data.manifest.sequential_task_order() {
        sequential::effects(data, &order, &mut ablations, &mut combined);
    }
    for e in ablations.iter_mut().chain(combined.iter_mut()) {
        delivery::check(data, e);
        containers::check(data, &run.groups, e);
    }
    let effects: Vec<&EffectReport> = ablations.iter().chain(&combined).collect();
    let designs = designs(&run, &effects, per_task);
    report(&run, arms, ablations, combined, refused, designs)
}

/// Every (model, arm)'s report, in the order of the groups, each with the arm that beats it.
fn arm_reports(run: &Run) -> Vec<ArmReport> {
    let mut arms: Vec<ArmReport> =
        run.groups.iter().map(|(&(model, arm), rows)| arm_report(run, model, arm, rows)).collect();
    for (a, by) in costs::beaten_by(&arms).into_iter().enumerate() {
        arms[a].beaten_by = by;
    }
    arms
}

/// One (model, arm)'s pass rates, spend, statuses and warnings (`beaten_by` left None).
fn arm_report(run: &Run, model: u32, arm: u32, rows: &[&Row]) -> ArmReport {
    let (data, n_tasks, conf) = (run.data, run.n_tasks, run.conf);
    let outcomes = by_task(rows, n_tasks, Row::passed);
    let pass = stats::pass_rate(&outcomes, conf);
    let kept: Vec<&Row> =
        rows.iter().copied().filter(|r| !r.status.is_infrastructure_error()).collect();
    let stopped_but_passing =
        rows.iter().filter(|r| r.status != TrialStatus::Passed && r.graded_passed() >= 1.0).count();
    let tests = stats::pass_rate_wilson(&by_task(rows, n_tasks, Row::test_fraction), conf);
    let statuses = StatusCounts::of(
        rows.iter().map(|r| r.status),
        data.interrupted.get(&(model, arm)).copied(),
    );
    let task_rates: Vec<f64> =
        outcomes.iter().filter(|t| !t.is_empty()).map(|t| stats::mean(t)).collect();
    let solved = rows.iter().filter(|r| r.status == TrialStatus::Passed).count();
    let tokens: f64 = rows.iter().map(|r| (r.tokens_input + r.tokens_output) as f64).sum();
    let working: f64 = rows.iter().map(|r| r.working_seconds).sum();
    let cost: Option<f64> = rows.iter().map(|r| r.cost_usd).sum();
    let n = rows.len() as f64;
    let per_solved = |total: f64| (solved > 0).then(|| total / solved as f64);
    let arm_name = data.arms.name(arm).to_string();
    let settings = data.arm_settings.iter().find(|a| a.name == arm_name);
    ArmReport {
        components: settings.map(|a| a.component_values()).unwrap_or_default(),
        arm: arm_name,
        model: data.models.name(model).to_string(),
        trials: rows.len(),
        tasks: pass.n_tasks,
        pass_rate: rate_interval(&outcomes, conf),
        pass_rate_excl_infra: rate_interval(&by_task(&kept, n_tasks, Row::passed), conf),
        trials_excl_infra: kept.len(),
        pass_rate_final_state: rate_interval(&by_task(rows, n_tasks, Row::graded_passed), conf),
        stopped_but_passing,
        tests_passed: tests.into(),
        statuses,
        min_task_rate: task_rates.iter().copied().fold(f64::NAN, f64::min),
        max_task_rate: task_rates.iter().copied().fold(f64::NAN, f64::max),
        tokens_per_trial: tokens / n,
        working_seconds_per_trial: working / n,
        steps_per_trial: rows.iter().map(|r| r.steps as f64).sum::<f64>() / n,
        cost_per_trial: cost.map(|c| c / n),
        tokens_per_solved: per_solved(tokens),
        working_seconds_per_solved: per_solved(working),
        cost_per_solved: cost.and_then(per_solved),
        pass_at_k: pass_at_k(&outcomes),
        costs: costs::arm(rows, n_tasks, conf),
        containers: container_runs(data, rows),
        beaten_by: None,
        budget: settings.and_then(|a| a.budget.clone()),
        warnings: arm_warnings(rows, pass.n_tasks, data.manifest.imported.is_some()),
    }
}

/// (k, pass@k, pass^k) averaged over the tasks with trials, for each k of [`PASS_AT_K`] up to
/// the fewest trials of a task (none when a task has a single trial).
fn pass_at_k(outcomes: &[Vec<f64>]) -> Vec<(u64, f64, f64)> {
    let min_trials =
        outcomes.iter().filter(|t| !t.is_empty()).map(Vec::len).min().unwrap_or(0) as u64;
    PASS_AT_K
        .into_iter()
        .filter(|&k| min_trials > 1 && k <= min_trials)
        .map(|k| {
            let per_task = outcomes.iter().filter(|t| !t.is_empty()).map(|t| {
                let c = t.iter().filter(|&&x| x >= 1.0).count() as u64;
                (stats::pass_at_k(t.len() as u64, c, k), stats::pass_hat_k(t.len() as u64, c, k))
            });
            let v: Vec<(f64, f64)> = per_task.collect();
            (k, mean_of(v.iter().map(|x| x.0)), mean_of(v.iter().map(|x| x.1)))
        })
        .collect()
}

/// What the container trials of `rows` ran on, each run once, in the order of their ids.
fn container_runs(data: &RunData, rows: &[&Row]) -> Vec<String> {
    let ids: std::collections::BTreeSet<u32> = rows.iter().filter_map(|r| r.container).collect();
    ids.into_iter().map(|i| data.container_runs.name(i).to_string()).collect()
}

/// The comparisons before their inference: those with paired outcomes to infer from, those
/// whose primary outcome is unusable (their verdict says why), and those the guard refused.
#[derive(Default)]
struct Comparisons {
    pending: Vec<Pending>,
    unusable: Vec<EffectReport>,
    refused: Vec<Refusal>,
}

/// Each comparison of the manifest, per model, re-checked by the guard: its paired outcomes.
fn comparisons(run: &Run) -> Comparisons {
    let data = run.data;
    let manifest_arms = &data.arm_settings;
    let mut out = Comparisons::default();
    for c in data.manifest.comparisons() {
        let (Some(ca), Some(ta)) = (
            manifest_arms.iter().find(|a| a.name == c.control),
            manifest_arms.iter().find(|a| a.name == c.treatment),
        ) else {
            out.refused.push(Refusal::ArmMissing { comparison: c.name.clone() });
            continue;
        };
        let guard = matrix::guard(&c.name, ca, ta);
        let is_ablation = matches!(c.kind, ComparisonKind::Ablation { .. });
        if let Err(e @ matrix::GuardError::BudgetsDiffer { .. }) = &guard {
            out.refused.push(Refusal::BudgetsDiffer(e.clone()));
            continue;
        }
        if is_ablation && let Err(e) = &guard {
            out.refused.push(Refusal::NotAnAblation(e.clone()));
            continue;
        }
        let (Some(ci), Some(ti)) = (data.arms.get(&c.control), data.arms.get(&c.treatment)) else {
            continue;
        };
        for model in 0..data.models.list.len() as u32 {
            let empty = Vec::new();
            let crow = run.groups.get(&(model, ci)).unwrap_or(&empty);
            let trow = run.groups.get(&(model, ti)).unwrap_or(&empty);
            if crow.is_empty() && trow.is_empty() {
                continue;
            }
            let p = pending(run, &c, model, crow, trow);
            if let Some(u) = primary::unusable([&p.all.0, &p.all.1]) {
                // Nothing to infer from: the verdict says why, the family leaves it out.
                let mut effect = p.effect;
                effect.verdict = EffectVerdict::PrimaryUnusable {
                    primary: run.primary.name().to_string(),
                    missing: u.missing,
                    outside: u.outside,
                };
                out.unusable.push(effect);
                continue;
            }
            out.pending.push(p);
        }
    }
    out
}

/// Comparison `c` under `model` (its arms' rows `crow` and `trow`): the paired outcomes, with
/// and without infrastructure errors, and the effect before its inference.
fn pending(run: &Run, c: &Comparison, model: u32, crow: &[&Row], trow: &[&Row]) -> Pending {
    fn keep<'a>(rows: &[&'a Row]) -> Vec<&'a Row> {
        rows.iter().copied().filter(|r| !r.status.is_infrastructure_error()).collect()
    }
    let (ck, tk) = (keep(crow), keep(trow));
    let infra_c = crow.len() - ck.len();
    let infra_t = trow.len() - tk.len();
    let all = run.paired(crow, trow);
    let present: Vec<usize> = (0..run.n_tasks).filter(|&k| !all.0[k].is_empty()).collect();
    let scope = if present.len() == 1 {
        format!("one task: {}", run.data.tasks.name(present[0] as u32))
    } else {
        "tasks".to_string()
    };
    let rate = |v: &[Vec<f64>]| {
        stats::mean(&v.iter().filter(|t| !t.is_empty()).map(|t| stats::mean(t)).collect::<Vec<_>>())
    };
    let is_ablation = matches!(c.kind, ComparisonKind::Ablation { .. });
    let effect = EffectReport {
        name: c.name.clone(),
        model: run.data.models.name(model).to_string(),
        control: c.control.clone(),
        treatment: c.treatment.clone(),
        kind: if is_ablation { EffectKind::Ablation } else { EffectKind::Combined },
        components: c.differs.iter().map(|d| d.component.clone()).collect(),
        control_rate: rate(&all.0),
        treatment_rate: rate(&all.1),
        delta: f64::NAN,
        lo: f64::NAN,
        hi: f64::NAN,
        p_value: f64::NAN,
        p_mid: f64::NAN,
        p_exact: f64::NAN,
        p_adjusted: None,
        family_size: 1,
        interval_level: run.conf,
        method: stats::InferenceMethod::None,
        estimand: if present.len() == 1 { ESTIMAND_THIS_TASK } else { ESTIMAND_TASKS_LIKE_THESE },
        scope,
        n_tasks: present.len(),
        mde: f64::NAN,
        infra_errors_control: infra_c,
        infra_errors_treatment: infra_t,
        infra_differs: infra_c != infra_t,
        excl_infra: None,
        verdict: EffectVerdict::NotEnoughData,
        sequential: None,
        delivery: DeliveryCheck::Unrecorded,
        delivery_note: None,
        costs: costs::paired(run.data, crow, trow, run.n_tasks, run.conf),
        budget: c.budget.clone(),
        tasks: tasks::TaskEffects::default(),
    };
    Pending { effect, all, kept: run.paired(&ck, &tk) }
}

/// The inference of every pending comparison, in their order, split into the ablations and the
/// combined comparisons. The ablations with tasks form the family: Holm's steps set their levels.
fn inferred(run: &Run, pending: Vec<Pending>) -> (Vec<EffectReport>, Vec<EffectReport>) {
    let family = pending
        .iter()
        .filter(|p| p.effect.kind == EffectKind::Ablation && p.effect.n_tasks > 0)
        .count()
        .max(1);
    let steps = holm_steps(&pending, run.alpha, run.test);
    let mut ablations = Vec::new();
    let mut combined = Vec::new();
    for (i, p) in pending.into_iter().enumerate() {
        let m = if p.effect.kind == EffectKind::Ablation { family } else { 1 };
        let effect = inference(run, p, m, steps[i]);
        if effect.kind == EffectKind::Ablation {
            ablations.push(effect)
        } else {
            combined.push(effect)
        }
    }
    (ablations, combined)
}

/// A comparison's interval, p-values and verdict, adjusted for a family of `m` (at its Holm
/// `step` when it has one), with the margin's tests and the effect without infrastructure errors.
fn inference(run: &Run, p: Pending, m: usize, step: Option<stats::HolmStep>) -> EffectReport {
    let Pending { mut effect, all, kept } = p;
    let (alpha, test) = (run.alpha, run.test);
    let (margin, seed) = (run.data.manifest.experiment.margin, run.data.manifest.experiment.seed);
    let level_alpha = step.map_or(alpha / m as f64, |s| s.level);
    let inf = stats::paired_inference_by(&all.0, &all.1, 1.0 - level_alpha, test);
    let diffs: Vec<f64> = all
        .0
        .iter()
        .zip(&all.1)
        .filter(|(a, _)| !a.is_empty())
        .map(|(a, b)| stats::mean(b) - stats::mean(a))
        .collect();
    let var_d = stats::sample_sd(&diffs).powi(2);
    effect.mde = stats::min_detectable_effect(var_d, diffs.len() as u64, level_alpha, 0.8);
    effect.delta = inf.mean_diff;
    effect.lo = inf.lo;
    effect.hi = inf.hi;
    effect.p_value = inf.p_value;
    effect.p_mid = inf.p_mid;
    effect.p_exact = inf.p_exact;
    effect.family_size = m;
    effect.interval_level = 1.0 - level_alpha;
    effect.p_adjusted = match step {
        Some(s) => Some(s.p_adjusted),
        None => (effect.kind == EffectKind::Ablation).then(|| (inf.p_value * m as f64).min(1.0)),
    };
    effect.method = inf.method;
    effect.verdict = verdict(&inf, level_alpha);
    let measured = measured_tasks(run.data, &all);
    effect.tasks =
        tasks::effects(measured, &all.0, &all.1, 1.0 - level_alpha, test, &effect.verdict);
    // Two one-sided tests (by betting: stats::paired_equivalent), at alpha / m (Bonferroni).
    let equivalence_alpha = alpha / m as f64;
    if let Some(margin) = margin {
        let shown = stats::paired_equivalent(&all.0, &all.1, equivalence_alpha, margin, seed);
        effect.verdict = with_margin(effect.verdict.clone(), shown, inf.n_tasks, margin);
    }
    if effect.infra_errors_control + effect.infra_errors_treatment > 0 {
        let levels = (level_alpha, equivalence_alpha);
        effect.excl_infra = Some(excl_infra(run, &kept, levels, &effect.verdict));
    }
    // Arms that met different infrastructure: flagged, and not decided when counting their
    // infrastructure errors as failures or leaving them out gives different verdicts.
    if effect.infra_differs && effect.excl_infra.as_ref().is_some_and(|x| x.verdict_changes) {
        effect.verdict = EffectVerdict::InfrastructureDiffers {
            control: effect.infra_errors_control,
            treatment: effect.infra_errors_treatment,
        };
    }
    effect
}

/// The effect on the outcomes `kept` without infrastructure errors, at the comparison's level
/// and its equivalence level (`levels`, as alphas); whether its verdict differs from `with`.
fn excl_infra(
    run: &Run,
    kept: &(Vec<Vec<f64>>, Vec<Vec<f64>>),
    (level_alpha, equivalence_alpha): (f64, f64),
    with: &EffectVerdict,
) -> ExclInfra {
    let experiment = &run.data.manifest.experiment;
    let x = stats::paired_inference_by(&kept.0, &kept.1, 1.0 - level_alpha, run.test);
    let mut v = verdict(&x, level_alpha);
    if let Some(margin) = experiment.margin {
        let shown =
            stats::paired_equivalent(&kept.0, &kept.1, equivalence_alpha, margin, experiment.seed);
        v = with_margin(v, shown, x.n_tasks, margin);
    }
    ExclInfra {
        delta: x.mean_diff,
        lo: x.lo,
        hi: x.hi,
        p_value: x.p_value,
        n_tasks: x.n_tasks,
        verdict_changes: v.short() != with.short(),
    }
}

/// The designs read beside the comparisons: a factorial design's effects, each comparison's
/// effect between models, the outcome's variance by source, and a budget sweep's curves.
struct Designs {
    factorial: Option<factorial::Factorial>,
    model_differences: Vec<models::ModelDifference>,
    variance: Option<variance::Decomposition>,
    budget_curves: Option<budget::BudgetCurves>,
}

/// The designs of the run, given its checked `effects` and each comparison's effect by task.
fn designs(run: &Run, effects: &[&EffectReport], per_task: Vec<models::PerTask>) -> Designs {
    let (data, groups, primary, alpha, test) =
        (run.data, &run.groups, &run.primary, run.alpha, run.test);
    let factorial = factorial::effects(run);
    // Effects whose verdict is withheld (not delivered, not comparable, ...) are not compared.
    let shown = |p: &&models::PerTask| {
        effects.iter().any(|e| e.name == p.effect && e.model == p.model && !e.verdict.withheld())
    };
    let per_task: Vec<models::PerTask> = per_task.into_iter().filter(|p| shown(&p)).collect();
    let model_differences = models::differences(&per_task, alpha, test);
    let variance = variance::of_run(data, groups, primary, alpha);
    let budget_curves = budget::curves(&budget::Inputs { run, effects });
    Designs { factorial, model_differences, variance, budget_curves }
}

/// The report, from the stages' results.
fn report(
    run: &Run,
    arms: Vec<ArmReport>,
    ablations: Vec<EffectReport>,
    combined: Vec<EffectReport>,
    refused: Vec<Refusal>,
    designs: Designs,
) -> Report {
    let data = run.data;
    Report {
        run_id: data.manifest.run_id.clone(),
        experiment: data.manifest.experiment.name.clone(),
        config_digest: data.manifest.config_digest.clone(),
        component_names: component_names(data),
        suite: format!("{} {}", data.manifest.suite.name, data.manifest.suite.version),
        suite_digest: data.manifest.suite.digest.clone(),
        grading: data.manifest.suite.grading.clone(),
        alpha: run.alpha,
        margin: data.manifest.experiment.margin,
        planned_trials: data.manifest.planned_trials,
        recorded_trials: data.trials.len(),
        interrupted_attempts: data.interrupted.values().sum(),
        unreadable_lines: data.unreadable_lines.clone(),
        arms,
        ablations,
        combined,
        budget_curves: designs.budget_curves,
        factorial: designs.factorial,
        model_differences: designs.model_differences,
        variance: designs.variance,
        primary: run.primary.name().to_string(),
        refused,
        system_fingerprints: fingerprints_seen(data),
        imported: imported_note(data),
    }
}

/// Every component's name, in the order of the first arm, then any others.
fn component_names(data: &RunData) -> Vec<String> {
    let mut component_names: Vec<String> = Vec::new();
    for a in &data.arm_settings {
        for (k, _) in a.component_values() {
            if !component_names.contains(&k) {
                component_names.push(k);
            }
        }
    }
    component_names
}

/// The `system_fingerprint`s each model's replies carried, with the final attempts of each.
fn fingerprints_seen(data: &RunData) -> Vec<FingerprintSeen> {
    data.fingerprints
        .iter()
        .map(|((model, fp), &attempts)| FingerprintSeen {
            model: data.models.name(*model).to_string(),
            fingerprint: fp.clone(),
            attempts,
        })
        .collect()
}

/// An imported run: where its trials came from and how they were graded.
fn imported_note(data: &RunData) -> Option<String> {
    data.manifest.imported.as_ref().map(|i| {
        let sources = i.sources.iter().map(|s| s.path.as_str()).collect::<Vec<_>>().join(", ");
        format!(
            "imported from {} records ({sources}; docs/import.md); pass rule: {}",
            i.tool.name(),
            i.pass_rule
        )
    })
}

/// A comparison's paired outcomes before its inference: every trial, and
/// without infrastructure errors.
struct Pending {
    effect: EffectReport,
    all: (Vec<Vec<f64>>, Vec<Vec<f64>>),
    kept: (Vec<Vec<f64>>, Vec<Vec<f64>>),
}

/// A comparison's effect on each task (None where the arms do not share it), for the models'
/// comparison.
fn comparison_per_task(p: &Pending) -> models::PerTask {
    let values = p
        .all
        .0
        .iter()
        .zip(&p.all.1)
        .map(|(c, t)| (!c.is_empty() && !t.is_empty()).then(|| stats::mean(t) - stats::mean(c)))
        .collect();
    models::PerTask {
        effect: p.effect.name.clone(),
        model: p.effect.model.clone(),
        bound: 1.0,
        values,
    }
}

/// Each shared task's effect and its sampling variance (`tasks::mean_variance` of each arm).
fn measured_tasks(data: &RunData, (c, t): &(Vec<Vec<f64>>, Vec<Vec<f64>>)) -> Vec<tasks::Measured> {
    let sum = |v: &[f64]| v.iter().sum::<f64>();
    c.iter()
        .zip(t)
        .enumerate()
        .filter(|(_, (c, t))| !c.is_empty() && !t.is_empty())
        .map(|(i, (c, t))| tasks::Measured {
            task: data.tasks.list[i].clone(),
            effect: stats::mean(t) - stats::mean(c),
            variance: tasks::mean_variance(sum(c), c.len()) + tasks::mean_variance(sum(t), t.len()),
        })
        .collect()
}

/// Holm over the ablations with tasks (`stats::holm`): their p-values (the
/// same at any level) order the family, and each is tested, and its interval
/// drawn, at its step's level; None for the others.
fn holm_steps(
    pending: &[Pending],
    alpha: f64,
    test: stats::SignFlipTest,
) -> Vec<Option<stats::HolmStep>> {
    let member = |p: &Pending| p.effect.kind == EffectKind::Ablation && p.effect.n_tasks > 0;
    let members: Vec<usize> = (0..pending.len()).filter(|&i| member(&pending[i])).collect();
    let p: Vec<f64> = members
        .iter()
        .map(|&i| stats::paired_p(&pending[i].all.0, &pending[i].all.1, test))
        .collect();
    let steps = stats::holm(&p, alpha);
    let mut out = vec![None; pending.len()];
    for (k, &i) in members.iter().enumerate() {
        out[i] = Some(steps[k]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// report.json and every rendering list the statuses by name, as the
    /// string-keyed map did; interrupted attempts under `interrupted`.
    #[test]
    fn status_counts_are_written_in_the_order_of_their_names() {
        use TrialStatus::*;
        let counts = StatusCounts::of([Passed, Failed, Passed, BudgetExhausted], Some(2));
        assert_eq!((counts.get(Passed), counts.get(Interrupted), counts.get(Timeout)), (2, 2, 0));
        assert_eq!(
            serde_json::to_string(&counts).unwrap(),
            r#"{"budget_exhausted":1,"failed":1,"interrupted":2,"passed":2}"#
        );
        assert_eq!(
            crate::report::format::statuses(counts.iter()),
            "budget_exhausted 1, failed 1, interrupted 2, passed 2"
        );
    }

    /// The typed kinds, methods and verdicts are written as the strings
    /// records and exports have always held (docs/records.md, docs/exports.md).
    #[test]
    fn enums_serialise_to_the_documented_strings() {
        assert_eq!(serde_json::to_value(EffectKind::Ablation).unwrap(), json!("ablation"));
        assert_eq!(serde_json::to_value(EffectKind::Combined).unwrap(), json!("combined"));
        assert_eq!(
            serde_json::to_value(IntervalMethod::ClusteredWilson).unwrap(),
            json!("clustered_wilson")
        );
        assert_eq!(serde_json::to_value(IntervalMethod::Wilson).unwrap(), json!("wilson"));
        use stats::{InferenceMethod::SignFlip, SignFlipTest as T, SpreadFloor};
        for (exact, floor, test, name) in [
            (true, SpreadFloor::None, T::MidP, "sign_flip_mid_p"),
            (false, SpreadFloor::None, T::MidP, "sign_flip_mid_p_monte_carlo"),
            (true, SpreadFloor::TrialNoise, T::MidP, "sign_flip_mid_p+trial_noise"),
            (false, SpreadFloor::TrialNoise, T::MidP, "sign_flip_mid_p_monte_carlo+trial_noise"),
            (true, SpreadFloor::Mover, T::MidP, "sign_flip_mid_p+mover"),
            (false, SpreadFloor::Mover, T::MidP, "sign_flip_mid_p_monte_carlo+mover"),
            (true, SpreadFloor::None, T::Exact, "sign_flip"),
            (false, SpreadFloor::None, T::Exact, "sign_flip_monte_carlo"),
            (true, SpreadFloor::TrialNoise, T::Exact, "sign_flip+trial_noise"),
            (false, SpreadFloor::Mover, T::Exact, "sign_flip_monte_carlo+mover"),
        ] {
            let method = SignFlip { exact, floor, test };
            assert_eq!(serde_json::to_value(method).unwrap(), json!(name));
        }
        assert_eq!(
            serde_json::to_value(stats::InferenceMethod::NewcombeOneTask).unwrap(),
            json!("newcombe_one_task")
        );
        assert_eq!(serde_json::to_value(stats::InferenceMethod::None).unwrap(), json!("none"));
        for (v, text) in [
            (EffectVerdict::NotEnoughData, "not enough data to tell"),
            (EffectVerdict::Helps { one_task: false }, "helps"),
            (EffectVerdict::Hurts { one_task: true }, "hurts (this task only)"),
            (
                EffectVerdict::NoVerdictPossible { tasks: 4, needed: 6 },
                "no verdict possible: 4 tasks, at least 6 needed at this level",
            ),
            (EffectVerdict::NoDetectableEffect { one_task: false }, "no detectable effect"),
            (
                EffectVerdict::NoDetectableEffect { one_task: true },
                "no detectable effect (this task only)",
            ),
        ] {
            assert_eq!(serde_json::to_value(v).unwrap(), json!(text));
        }
    }

    /// Which p-value a verdict reads follows the design: greedy (or unknown) models, the exact
    /// test; every model sampled, the mid-p. 12 one-trial tasks up and 4 down: by hand the exact
    /// p is 2 x 2517 / 2^16 = 0.0768 (no detectable effect at 0.05), the mid-p 3214 / 2^16 =
    /// 0.0490 (helps); both are reported either way.
    #[test]
    fn the_p_value_a_verdict_reads_follows_the_design() {
        let exp = |models: serde_json::Value| -> ablate_core::record::RecordedExperiment {
            serde_json::from_value(
                json!({"name": "e", "alpha": 0.05, "arms": [], "models": models}),
            )
            .unwrap()
        };
        let (greedy, sampled, mixed, unknown) = (
            exp(json!([{"name": "m", "temperature": 0.0}])),
            exp(json!([{"name": "m", "temperature": 0.7}])),
            exp(json!([{"name": "m", "temperature": 0.7}, {"name": "n", "temperature": 0.0}])),
            exp(json!(["m"])),
        );
        use stats::SignFlipTest as T;
        assert_eq!(sign_flip_test(&greedy), T::Exact);
        assert_eq!(sign_flip_test(&sampled), T::MidP);
        assert_eq!(sign_flip_test(&mixed), T::Exact);
        assert_eq!(sign_flip_test(&unknown), T::Exact);
        let c: Vec<Vec<f64>> = (0..16).map(|i| vec![if i < 12 { 0.0 } else { 1.0 }]).collect();
        let t: Vec<Vec<f64>> = (0..16).map(|i| vec![if i < 12 { 1.0 } else { 0.0 }]).collect();
        for (test, p, word) in
            [(T::Exact, 5034.0 / 65536.0, "n.s."), (T::MidP, 3214.0 / 65536.0, "helps")]
        {
            let inf = stats::paired_inference_by(&c, &t, 0.95, test);
            assert!((inf.p_value - p).abs() < 1e-12, "{test:?}: {inf:?}");
            assert!((inf.p_exact - 5034.0 / 65536.0).abs() < 1e-12, "{inf:?}");
            assert!((inf.p_mid - 3214.0 / 65536.0).abs() < 1e-12, "{inf:?}");
            assert_eq!(verdict(&inf, 0.05).short(), word, "{test:?}: {inf:?}");
        }
    }

    #[test]
    fn verdict_reads_the_interval() {
        let inf = |lo: f64, hi: f64, n_tasks: usize| stats::Inference {
            mean_diff: (lo + hi) / 2.0,
            lo,
            hi,
            p_value: 0.5,
            p_mid: 0.5,
            p_exact: 0.5,
            n_tasks,
            method: stats::InferenceMethod::SignFlip {
                exact: false,
                floor: stats::SpreadFloor::None,
                test: stats::SignFlipTest::MidP,
            },
        };
        assert_eq!(verdict(&inf(0.01, 0.3, 20), 0.05), EffectVerdict::Helps { one_task: false });
        assert_eq!(verdict(&inf(-0.3, -0.01, 1), 0.05), EffectVerdict::Hurts { one_task: true });
        // At alpha 0.05 the exact sign-flip test needs 6 tasks (2 / 2^6 = 0.031 <= 0.05 < 2 / 2^5).
        assert_eq!(
            verdict(&inf(-0.1, 0.3, 5), 0.05),
            EffectVerdict::NoVerdictPossible { tasks: 5, needed: 6 }
        );
        assert_eq!(
            verdict(&inf(-0.1, 0.3, 6), 0.05),
            EffectVerdict::NoDetectableEffect { one_task: false }
        );
        assert_eq!(verdict(&inf(f64::NAN, f64::NAN, 3), 0.05), EffectVerdict::NotEnoughData);
    }

    #[test]
    fn a_margin_turns_no_effect_into_equivalent_or_undecided() {
        let none = EffectVerdict::NoDetectableEffect { one_task: false };
        // Shown inside the margins: equivalent; not shown: undecided.
        assert_eq!(
            with_margin(none.clone(), true, 20, 0.05),
            EffectVerdict::Equivalent { margin: 0.05, one_task: false }
        );
        assert_eq!(
            with_margin(none.clone(), false, 20, 0.05),
            EffectVerdict::Undecided { margin: 0.05, one_task: false }
        );
        assert_eq!(
            with_margin(none.clone(), true, 1, 0.05),
            EffectVerdict::Equivalent { margin: 0.05, one_task: true }
        );
        // An effect shown stays one.
        let helps = EffectVerdict::Helps { one_task: false };
        assert_eq!(with_margin(helps.clone(), true, 20, 0.05), helps);
        let few = EffectVerdict::NoVerdictPossible { tasks: 4, needed: 8 };
        assert_eq!(with_margin(few.clone(), true, 4, 0.05), few);
        assert_eq!(
            EffectVerdict::Equivalent { margin: 0.05, one_task: false }.to_string(),
            "equivalent within ±5 pp"
        );
        assert_eq!(
            EffectVerdict::Undecided { margin: 0.025, one_task: false }.to_string(),
            "undecided: neither an effect nor within ±2.5 pp"
        );
    }
}
