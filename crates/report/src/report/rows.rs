//! The rows of trials.csv, arms.csv and effects.csv as serde structs: each
//! column is named once, beside its value, and a file's header is read off
//! its row type (`columns`). Every file starts with the run's columns
//! (`RunCells`) and ends with one `component.<name>` column per component of
//! the run's arms, which no struct can name ahead of time. docs/exports.md
//! documents every column with its type.

use super::analysis::costs::{Costs, Spend};
use super::analysis::{ArmReport, EffectReport, Report};
use super::cells::{self, as_bool, as_category, as_int};
use super::stats::Span;
use ablate_core::record::{EndReason, TrialRecord, TrialStatus};
use serde::{Serialize, Serializer};

/// A float cell: always written as a float (`3.0`, never `3`), so that a
/// column's type does not depend on the data; empty (null) when not finite or
/// absent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Num(pub Option<f64>);

impl From<f64> for Num {
    fn from(x: f64) -> Num {
        Num(Some(x))
    }
}

impl From<Option<f64>> for Num {
    fn from(x: Option<f64>) -> Num {
        Num(x)
    }
}

/// The text of a float cell: the shortest decimal that reads back as the
/// same `f64`, in exponent form outside `[1e-6, 1e15)` so that a cell has
/// at most about 25 characters (an open interval end of `5e-324` was a
/// 326-character decimal).
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return String::new();
    }
    let s =
        if x == 0.0 || (1e-6..1e15).contains(&x.abs()) { format!("{x}") } else { format!("{x:e}") };
    if s.contains('.') || s.contains('e') { s } else { format!("{s}.0") }
}

/// Marked as a float column ([`cells`]); csv writes its text ([`num`]), a
/// typed reader ([`cells::cells`]) gets the number.
impl Serialize for Num {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_newtype_struct(cells::FLOAT, &self.0.map(num).unwrap_or_default())
        } else {
            s.serialize_newtype_struct(cells::FLOAT, &self.0.filter(|x| x.is_finite()))
        }
    }
}

/// The column names of a row type: its fields in order, as csv writes them
/// (read off the same `Serialize` by [`cells::schema`]).
fn columns<T: Serialize + Default>() -> Vec<String> {
    cells::schema::<T>().into_iter().map(|(name, _)| name).collect()
}

/// The columns every CSV starts with: which run, experiment, config and suite.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunCells<'a> {
    #[serde(serialize_with = "as_category")]
    pub run_id: &'a str,
    #[serde(serialize_with = "as_category")]
    pub experiment: &'a str,
    #[serde(serialize_with = "as_category")]
    pub config_digest: &'a str,
    #[serde(serialize_with = "as_category")]
    pub suite_digest: &'a str,
}

impl<'a> RunCells<'a> {
    pub fn of(r: &'a Report) -> RunCells<'a> {
        RunCells {
            run_id: &r.run_id,
            experiment: &r.experiment,
            config_digest: &r.config_digest,
            suite_digest: &r.suite_digest,
        }
    }
}

/// The name of a component's column.
pub(crate) fn component_column(name: &str) -> String {
    format!("component.{name}")
}

/// One recorded attempt: trials.csv after the run's columns and before the
/// component columns. `counted` (the attempt the analysis counts: the last
/// final attempt of its trial) is known only once the whole file is read:
/// empty in the first pass, filled in by the second.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TrialRow {
    pub trial_id: String,
    #[serde(serialize_with = "as_category")]
    pub task: String,
    #[serde(serialize_with = "as_category")]
    pub arm: String,
    #[serde(serialize_with = "as_category")]
    pub model: String,
    pub repeat: u32,
    pub seed: u64,
    pub attempt: u32,
    #[serde(serialize_with = "as_bool")]
    pub counted: Option<bool>,
    #[serde(serialize_with = "as_category")]
    pub status: String,
    /// What the trial left passes, whatever stopped it (empty: not graded).
    #[serde(serialize_with = "as_bool")]
    pub graded_pass: Option<bool>,
    /// A container task's reward (empty for Python tasks and when none was read).
    pub reward: Num,
    #[serde(serialize_with = "as_category")]
    pub end_reason: String,
    #[serde(serialize_with = "as_category")]
    pub budget_limit: String,
    pub tests_passed: u32,
    pub tests_total: u32,
    pub steps: u32,
    pub sessions: u32,
    pub tokens_input: u64,
    pub tokens_output: u64,
    pub tokens_cached: u64,
    pub working_seconds: Num,
    pub wall_seconds: Num,
    pub rate_limit_wait_seconds: Num,
    pub cost_usd: Num,
    pub loop_guard_hits: u32,
    pub invalid_tool_calls: u32,
    pub unparsed_replies: u32,
    pub path_refusals: u32,
    pub snapshot_sha256: String,
    pub finished_at: String,
    /// The replies' distinct `system_fingerprint`s, space-separated.
    pub system_fingerprints: String,
}

fn end_reason(e: &EndReason) -> (&'static str, &'static str) {
    match e {
        EndReason::ChecksPassed => ("checks_passed", ""),
        EndReason::ModelDone => ("model_done", ""),
        EndReason::Budget { limit } => ("budget", limit.name()),
        EndReason::ProviderError => ("provider_error", ""),
        EndReason::RequestTimeout => ("request_timeout", ""),
        EndReason::HarnessError => ("harness_error", ""),
        EndReason::Interrupted => ("interrupted", ""),
        EndReason::CommandExited => ("command_exited", ""),
    }
}

impl TrialRow {
    pub fn of(r: &TrialRecord) -> TrialRow {
        let (reason, limit) = end_reason(&r.end_reason);
        TrialRow {
            trial_id: r.trial_id.clone(),
            task: r.task.clone(),
            arm: r.arm.clone(),
            model: r.model.clone(),
            repeat: r.repeat,
            seed: r.seed,
            attempt: r.attempt,
            counted: None,
            status: r.status.name().to_string(),
            graded_pass: r.graded_pass,
            reward: r
                .grade
                .as_ref()
                .and_then(|g| g.verifier.as_ref())
                .and_then(|v| v.reward)
                .into(),
            end_reason: reason.to_string(),
            budget_limit: limit.to_string(),
            tests_passed: r.tests_passed,
            tests_total: r.tests_total,
            steps: r.steps,
            sessions: r.sessions,
            tokens_input: r.tokens.input,
            tokens_output: r.tokens.output,
            tokens_cached: r.tokens.cached,
            working_seconds: r.working_seconds.into(),
            wall_seconds: r.wall_seconds.into(),
            rate_limit_wait_seconds: r.rate_limit_wait_seconds.into(),
            cost_usd: r.cost_usd.into(),
            loop_guard_hits: r.incidents.loop_guard_hits,
            invalid_tool_calls: r.incidents.invalid_tool_calls,
            unparsed_replies: r.incidents.unparsed_replies,
            path_refusals: r.incidents.path_refusals,
            snapshot_sha256: r
                .grade
                .as_ref()
                .map(|g| g.snapshot_sha256.clone())
                .unwrap_or_default(),
            finished_at: r.finished_at.clone(),
            system_fingerprints: r.system_fingerprints.join(" "),
        }
    }
}

/// One (arm, model): arms.csv after the run's columns and before the
/// component columns.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ArmRow<'a> {
    pub alpha: Num,
    #[serde(serialize_with = "as_category")]
    pub arm: &'a str,
    #[serde(serialize_with = "as_category")]
    pub model: &'a str,
    pub trials: usize,
    pub tasks: usize,
    pub pass_rate: Num,
    pub pass_rate_lo: Num,
    pub pass_rate_hi: Num,
    #[serde(serialize_with = "as_category")]
    pub pass_rate_method: &'a str,
    pub pass_rate_excl_infra: Num,
    pub pass_rate_excl_infra_lo: Num,
    pub pass_rate_excl_infra_hi: Num,
    pub trials_excl_infra: usize,
    pub infra_error_rate: Num,
    pub infra_error_rate_lo: Num,
    pub infra_error_rate_hi: Num,
    pub pass_rate_final_state: Num,
    pub pass_rate_final_state_lo: Num,
    pub pass_rate_final_state_hi: Num,
    pub stopped_but_passing: usize,
    pub tests_passed_fraction: Num,
    pub tests_passed_fraction_lo: Num,
    pub tests_passed_fraction_hi: Num,
    pub passed: usize,
    pub failed: usize,
    pub timeout: usize,
    pub budget_exhausted: usize,
    pub provider_error: usize,
    pub harness_error: usize,
    pub grader_error: usize,
    pub policy_violation: usize,
    pub interrupted: usize,
    pub tokens_per_trial: Num,
    pub tokens_per_trial_lo: Num,
    pub tokens_per_trial_hi: Num,
    pub working_seconds_per_trial: Num,
    pub steps_per_trial: Num,
    pub cost_per_trial: Num,
    pub cost_per_trial_lo: Num,
    pub cost_per_trial_hi: Num,
    pub tokens_per_solved: Num,
    pub working_seconds_per_solved: Num,
    pub cost_per_solved: Num,
    pub interval_level: Num,
    /// The arm that beats this one on both pass rate and spend per trial with
    /// confidence (`costs::beaten_by`), as `arm (model)`; empty on the frontier.
    pub beaten_by: String,
    /// A budget sweep's key, level and the arm it repeats; empty without a sweep.
    #[serde(serialize_with = "as_category")]
    pub budget_key: &'static str,
    pub budget_level: Num,
    pub budget_of: &'a str,
}

impl<'a> ArmRow<'a> {
    pub fn of(r: &Report, a: &'a ArmReport) -> ArmRow<'a> {
        let s = |status: TrialStatus| a.statuses.get(status);
        let spend = |o: Spend| a.costs.per_trial.iter().find(|(x, _)| *x == o).map(|(_, s)| *s);
        ArmRow {
            alpha: r.alpha.into(),
            arm: &a.arm,
            model: &a.model,
            trials: a.trials,
            tasks: a.tasks,
            pass_rate: a.pass_rate.mean.into(),
            pass_rate_lo: a.pass_rate.lo.into(),
            pass_rate_hi: a.pass_rate.hi.into(),
            pass_rate_method: a.pass_rate.method.name(),
            pass_rate_excl_infra: a.pass_rate_excl_infra.mean.into(),
            pass_rate_excl_infra_lo: a.pass_rate_excl_infra.lo.into(),
            pass_rate_excl_infra_hi: a.pass_rate_excl_infra.hi.into(),
            trials_excl_infra: a.trials_excl_infra,
            infra_error_rate: a.costs.infra_errors.estimate.into(),
            infra_error_rate_lo: a.costs.infra_errors.lo.into(),
            infra_error_rate_hi: a.costs.infra_errors.hi.into(),
            pass_rate_final_state: a.pass_rate_final_state.mean.into(),
            pass_rate_final_state_lo: a.pass_rate_final_state.lo.into(),
            pass_rate_final_state_hi: a.pass_rate_final_state.hi.into(),
            stopped_but_passing: a.stopped_but_passing,
            tests_passed_fraction: a.tests_passed.mean.into(),
            tests_passed_fraction_lo: a.tests_passed.lo.into(),
            tests_passed_fraction_hi: a.tests_passed.hi.into(),
            passed: s(TrialStatus::Passed),
            failed: s(TrialStatus::Failed),
            timeout: s(TrialStatus::Timeout),
            budget_exhausted: s(TrialStatus::BudgetExhausted),
            provider_error: s(TrialStatus::ProviderError),
            harness_error: s(TrialStatus::HarnessError),
            grader_error: s(TrialStatus::GraderError),
            policy_violation: s(TrialStatus::PolicyViolation),
            interrupted: s(TrialStatus::Interrupted),
            tokens_per_trial: a.tokens_per_trial.into(),
            tokens_per_trial_lo: spend(Spend::Tokens).map(|s| s.lo).into(),
            tokens_per_trial_hi: spend(Spend::Tokens).map(|s| s.hi).into(),
            working_seconds_per_trial: a.working_seconds_per_trial.into(),
            steps_per_trial: a.steps_per_trial.into(),
            cost_per_trial: a.cost_per_trial.into(),
            cost_per_trial_lo: spend(Spend::Cost).map(|s| s.lo).into(),
            cost_per_trial_hi: spend(Spend::Cost).map(|s| s.hi).into(),
            tokens_per_solved: a.tokens_per_solved.into(),
            working_seconds_per_solved: a.working_seconds_per_solved.into(),
            cost_per_solved: a.cost_per_solved.into(),
            interval_level: (1.0 - r.alpha).into(),
            beaten_by: beaten_by(r, a),
            budget_key: a.budget.as_ref().map_or("", |b| b.level.key.name()),
            budget_level: a.budget.as_ref().map(|b| b.level.value).into(),
            budget_of: a.budget.as_ref().map_or("", |b| b.of.as_str()),
        }
    }
}

/// `arm (model)` of the arm that beats `a` on both pass rate and spend per trial with
/// confidence, or empty.
fn beaten_by(r: &Report, a: &ArmReport) -> String {
    a.beaten_by.map(|j| format!("{} ({})", r.arms[j].arm, r.arms[j].model)).unwrap_or_default()
}

/// One comparison: effects.csv after the run's columns.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EffectRow<'a> {
    pub alpha: Num,
    pub name: &'a str,
    #[serde(serialize_with = "as_category")]
    pub kind: &'a str,
    /// The components that differ, `;`-separated.
    pub components: String,
    #[serde(serialize_with = "as_category")]
    pub model: &'a str,
    #[serde(serialize_with = "as_category")]
    pub control: &'a str,
    #[serde(serialize_with = "as_category")]
    pub treatment: &'a str,
    pub control_rate: Num,
    pub treatment_rate: Num,
    pub delta: Num,
    pub lo: Num,
    pub hi: Num,
    pub interval_level: Num,
    #[serde(serialize_with = "as_category")]
    pub method: String,
    #[serde(serialize_with = "as_category")]
    pub scope: &'a str,
    #[serde(serialize_with = "as_category")]
    pub estimand: &'a str,
    pub p_value: Num,
    pub p_mid_p: Num,
    pub p_exact: Num,
    pub p_adjusted: Num,
    pub family_size: usize,
    pub n_tasks: usize,
    pub mde: Num,
    pub infra_errors_control: usize,
    pub infra_errors_treatment: usize,
    pub infra_differs: bool,
    pub delta_excl_infra: Num,
    pub lo_excl_infra: Num,
    pub hi_excl_infra: Num,
    pub p_value_excl_infra: Num,
    #[serde(serialize_with = "as_category")]
    pub adjustment: &'a str,
    pub verdict: String,
    pub delivery: &'static str,
    pub delivery_note: String,
    pub design: &'static str,
    #[serde(serialize_with = "as_int")]
    pub decided_after_tasks: Option<usize>,
    #[serde(serialize_with = "as_int")]
    pub sequential_trials: Option<usize>,
    #[serde(serialize_with = "as_int")]
    pub projected_tasks: Option<usize>,
    pub delta_bias_reduced: Num,
    pub these_tasks_lo: Num,
    pub these_tasks_hi: Num,
    /// What `delta` and the verdict are on: `pass_rate` or the experiment's primary.
    #[serde(serialize_with = "as_category")]
    pub primary: &'a str,
    /// The level of the cost and reliability intervals (`1 - alpha`, unadjusted).
    pub costs_level: Num,
    pub costs_n_tasks: usize,
    /// The k of the pass^k columns (`CostCells`): the largest both arms reached.
    #[serde(serialize_with = "as_int")]
    pub pass_hat_k: Option<usize>,
    /// A budget sweep's key, level and the comparison it repeats; empty without a sweep.
    #[serde(serialize_with = "as_category")]
    pub budget_key: &'static str,
    pub budget_level: Num,
    pub budget_of: &'a str,
}

impl<'a> EffectRow<'a> {
    pub fn of(r: &'a Report, e: &'a EffectReport) -> EffectRow<'a> {
        let x = e.excl_infra.as_ref();
        EffectRow {
            alpha: r.alpha.into(),
            name: &e.name,
            kind: e.kind.name(),
            components: e.components.join(";"),
            model: &e.model,
            control: &e.control,
            treatment: &e.treatment,
            control_rate: e.control_rate.into(),
            treatment_rate: e.treatment_rate.into(),
            delta: e.delta.into(),
            lo: e.lo.into(),
            hi: e.hi.into(),
            interval_level: e.interval_level.into(),
            method: e.method.name(),
            scope: &e.scope,
            estimand: e.estimand,
            p_value: e.p_value.into(),
            p_mid_p: e.p_mid.into(),
            p_exact: e.p_exact.into(),
            p_adjusted: e.p_adjusted.into(),
            family_size: e.family_size,
            n_tasks: e.n_tasks,
            mde: e.mde.into(),
            infra_errors_control: e.infra_errors_control,
            infra_errors_treatment: e.infra_errors_treatment,
            infra_differs: e.infra_differs,
            delta_excl_infra: x.map(|x| x.delta).into(),
            lo_excl_infra: x.map(|x| x.lo).into(),
            hi_excl_infra: x.map(|x| x.hi).into(),
            p_value_excl_infra: x.map(|x| x.p_value).into(),
            adjustment: if e.family_size > 1 {
                super::analysis::family_adjustment(e)
            } else {
                "none"
            },
            verdict: e.verdict.to_string(),
            delivery: delivery_kind(&e.delivery, &e.verdict),
            delivery_note: e.delivery_note.as_ref().map(ToString::to_string).unwrap_or_default(),
            design: if e.sequential.is_some() { "sequential" } else { "fixed" },
            decided_after_tasks: e.sequential.as_ref().and_then(|s| s.decided_after_tasks),
            sequential_trials: e.sequential.as_ref().map(|s| s.trials),
            projected_tasks: e.sequential.as_ref().and_then(|s| s.projected_tasks),
            delta_bias_reduced: e.sequential.as_ref().map(|s| s.delta_bias_reduced).into(),
            these_tasks_lo: e.sequential.as_ref().and_then(|s| s.these_tasks).map(|t| t.0).into(),
            these_tasks_hi: e.sequential.as_ref().and_then(|s| s.these_tasks).map(|t| t.1).into(),
            primary: &r.primary,
            costs_level: e.costs.level.into(),
            costs_n_tasks: e.costs.n_tasks,
            pass_hat_k: e.costs.pass_hat_k.last().map(|h| h.k as usize),
            budget_key: e.budget.as_ref().map_or("", |b| b.level.key.name()),
            budget_level: e.budget.as_ref().map(|b| b.level.value).into(),
            budget_of: e.budget.as_ref().map_or("", |b| b.of.as_str()),
        }
    }
}

/// A struct of float cells named in order, filled from a list of values in
/// the same order (`from_values`): the cost columns, whose names follow one
/// pattern over the spends.
macro_rules! float_cells {
    ($(#[$doc:meta])* $name:ident { $($field:ident),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, Serialize)]
        pub struct $name {
            $(pub $field: Num,)*
        }
        impl $name {
            fn from_values(values: Vec<f64>) -> $name {
                let mut v = values.into_iter();
                $name { $($field: v.next().into(),)* }
            }
        }
    };
}

float_cells! {
    /// A comparison's costs and reliability (`analysis::costs::Costs`):
    /// effects.csv after [`EffectRow`]; docs/exports.md names each column.
    CostCells {
        tokens_control, tokens_treatment, tokens_diff, tokens_diff_lo, tokens_diff_hi,
        tokens_ratio, tokens_ratio_lo, tokens_ratio_hi, cost_usd_control, cost_usd_treatment,
        cost_usd_diff, cost_usd_diff_lo, cost_usd_diff_hi, cost_usd_ratio, cost_usd_ratio_lo,
        cost_usd_ratio_hi, working_seconds_control, working_seconds_treatment,
        working_seconds_diff, working_seconds_diff_lo, working_seconds_diff_hi,
        working_seconds_ratio, working_seconds_ratio_lo, working_seconds_ratio_hi,
        steps_control, steps_treatment, steps_diff, steps_diff_lo, steps_diff_hi, steps_ratio,
        steps_ratio_lo, steps_ratio_hi, tokens_per_solved_control,
        tokens_per_solved_control_lo, tokens_per_solved_control_hi,
        tokens_per_solved_treatment, tokens_per_solved_treatment_lo,
        tokens_per_solved_treatment_hi, tokens_per_solved_ratio, tokens_per_solved_ratio_lo,
        tokens_per_solved_ratio_hi, cost_usd_per_solved_control,
        cost_usd_per_solved_control_lo, cost_usd_per_solved_control_hi,
        cost_usd_per_solved_treatment, cost_usd_per_solved_treatment_lo,
        cost_usd_per_solved_treatment_hi, cost_usd_per_solved_ratio,
        cost_usd_per_solved_ratio_lo, cost_usd_per_solved_ratio_hi,
        working_seconds_per_solved_control, working_seconds_per_solved_control_lo,
        working_seconds_per_solved_control_hi, working_seconds_per_solved_treatment,
        working_seconds_per_solved_treatment_lo, working_seconds_per_solved_treatment_hi,
        working_seconds_per_solved_ratio, working_seconds_per_solved_ratio_lo,
        working_seconds_per_solved_ratio_hi, pass_hat_k_control, pass_hat_k_control_lo,
        pass_hat_k_control_hi, pass_hat_k_treatment, pass_hat_k_treatment_lo,
        pass_hat_k_treatment_hi, pass_hat_k_diff, pass_hat_k_diff_lo, pass_hat_k_diff_hi
    }
}

/// `[estimate, lo, hi]` of a span.
fn three(s: &Span) -> [f64; 3] {
    [s.estimate, s.lo, s.hi]
}

impl CostCells {
    /// The cells in [`CostCells`]' order: per spend its means, difference and
    /// ratio; per spend per solved task both arms and the ratio; pass^k at the
    /// largest k both arms reached (every k: report.json). NaN (empty) where
    /// the run has no such number.
    pub fn of(c: &Costs) -> CostCells {
        let mut v = Vec::new();
        for o in Spend::ALL {
            v.extend(match c.per_trial(o) {
                Some(s) => [s.control, s.treatment]
                    .into_iter()
                    .chain(three(&s.difference))
                    .chain(three(&s.ratio))
                    .collect::<Vec<f64>>(),
                None => vec![f64::NAN; 8],
            });
        }
        for o in Spend::PER_SOLVED {
            v.extend(match c.per_solved(o) {
                Some(s) => [three(&s.control), three(&s.treatment), three(&s.ratio)].concat(),
                None => vec![f64::NAN; 9],
            });
        }
        v.extend(match c.pass_hat_k.last() {
            Some(h) => [three(&h.control), three(&h.treatment), three(&h.difference)].concat(),
            None => vec![f64::NAN; 9],
        });
        CostCells::from_values(v)
    }
}

/// The recorded metrics any comparison of the run reports, in first-seen order.
pub fn metric_names(r: &Report) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for e in r.ablations.iter().chain(&r.combined) {
        for m in &e.costs.metrics {
            if !names.contains(&m.name) {
                names.push(m.name.clone());
            }
        }
    }
    names
}

/// The cells of each recorded metric after effects.csv's fixed columns.
const METRIC_CELLS: [&str; 5] = ["control", "treatment", "diff", "diff_lo", "diff_hi"];

/// effects.csv's columns of the metrics `names`: `metric.NAME.control`, `.treatment`, `.diff`,
/// `.diff_lo`, `.diff_hi` (float columns).
pub(crate) fn metric_columns(names: &[String]) -> Vec<String> {
    names.iter().flat_map(|n| METRIC_CELLS.map(|c| format!("metric.{n}.{c}"))).collect()
}

/// A comparison's cells under [`metric_columns`]: empty where it does not report the metric.
pub(crate) fn metric_cells(e: &EffectReport, names: &[String]) -> Vec<Num> {
    names
        .iter()
        .flat_map(|n| match e.costs.metrics.iter().find(|m| m.name == *n) {
            Some(m) => {
                let d = m.difference;
                [m.control, m.treatment, d.estimate, d.lo, d.hi].map(Num::from)
            }
            None => [Num(None); 5],
        })
        .collect()
}

/// The delivery check's outcome in one word (docs/delivery.md).
fn delivery_kind(
    d: &ablate_core::record::delivery::DeliveryCheck,
    v: &super::analysis::EffectVerdict,
) -> &'static str {
    use ablate_core::record::delivery::DeliveryCheck as D;
    if matches!(v, super::analysis::EffectVerdict::NotComparable { .. }) {
        return "not_comparable";
    }
    match d {
        D::Delivered { .. } => "delivered",
        D::Identical => "identical",
        D::NotDelivered { .. } => "not_delivered",
        D::Unrecorded => "unrecorded",
    }
}

/// trials.csv's columns before the component columns, with their types.
#[cfg(test)]
pub(crate) fn trials_schema() -> Vec<(String, cells::Kind)> {
    cells::schema::<(RunCells, TrialRow)>()
}

/// arms.csv's columns before the component columns, with their types.
#[cfg(test)]
pub(crate) fn arms_schema() -> Vec<(String, cells::Kind)> {
    cells::schema::<(RunCells, ArmRow)>()
}

/// effects.csv's columns, with their types.
#[cfg(test)]
pub(crate) fn effects_schema() -> Vec<(String, cells::Kind)> {
    cells::schema::<(RunCells, EffectRow, CostCells)>()
}

/// trials.csv's columns before the component columns.
pub(crate) fn trials_columns() -> Vec<String> {
    columns::<(RunCells, TrialRow)>()
}

/// arms.csv's columns before the component columns.
pub(crate) fn arms_columns() -> Vec<String> {
    columns::<(RunCells, ArmRow)>()
}

/// effects.csv's columns.
pub(crate) fn effects_columns() -> Vec<String> {
    columns::<(RunCells, EffectRow, CostCells)>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The columns as docs/exports.md lists them, in its order (the file's
    /// tables, read here, so that a column added to a row and not to the
    /// documentation fails).
    fn documented(table: &str) -> Vec<String> {
        let doc = std::fs::read_to_string(crate::repo_root().join("docs/exports.md")).unwrap();
        let section = |heading: &str| -> String {
            let start = doc
                .find(heading)
                .unwrap_or_else(|| panic!("docs/exports.md has a `{heading}` section"));
            let rest = &doc[start..];
            let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
            rest[..end].to_string()
        };
        // The run's columns (documented once, before the files), then the file's own.
        let run = section("| `run_id`");
        let run = &run[..run.find("\n\n").unwrap_or(run.len())];
        let text = format!("{run}\n{}", section(&format!("## {table}")));
        let mut out = Vec::new();
        for line in text.lines().filter(|l| l.starts_with("| `")) {
            let first = line.split('|').nth(1).unwrap_or("");
            let names: Vec<&str> = first.split(',').map(|c| c.trim().trim_matches('`')).collect();
            let base = names[0].to_string();
            for n in &names {
                out.push(if n.starts_with('_') { format!("{base}{n}") } else { n.to_string() });
            }
        }
        out
    }

    #[test]
    fn headers_are_the_row_fields_in_the_documented_order() {
        let t = trials_columns();
        assert_eq!(t.len(), 35);
        assert_eq!(t[..5], ["run_id", "experiment", "config_digest", "suite_digest", "trial_id"]);
        assert_eq!(t[10..13], ["attempt", "counted", "status"]);
        assert_eq!(t[33..], ["finished_at", "system_fingerprints"]);
        assert_eq!(arms_columns().len(), 52);
        assert_eq!(effects_columns().len(), 120);
        for (table, cols) in
            [("trials.csv", t), ("arms.csv", arms_columns()), ("effects.csv", effects_columns())]
        {
            let doc = documented(table);
            let doc: Vec<&String> = doc
                .iter()
                .filter(|c| !c.starts_with("component.") && !c.starts_with("metric."))
                .collect();
            assert_eq!(
                cols.iter().collect::<Vec<_>>(),
                doc,
                "{table}: the row's columns and docs/exports.md's"
            );
        }
    }

    #[test]
    fn a_float_cell_is_always_a_float_and_empty_when_not_finite() {
        assert_eq!(num(3.0), "3.0");
        assert_eq!(num(0.25), "0.25");
        assert_eq!(num(-0.5), "-0.5");
        assert_eq!(num(f64::NAN), "");
        // Bounded: the open end of an interval, the smallest f64 above 0, and huge counts.
        assert_eq!(num(f64::from_bits(1)), "5e-324");
        assert_eq!(num(-f64::from_bits(1)), "-5e-324");
        assert_eq!(num(1.5e-7), "1.5e-7");
        assert_eq!(num(0.000001), "0.000001");
        assert_eq!(num(2.5e20), "2.5e20");
        for x in [f64::from_bits(1), 0.1 + 0.2, 1.0 / 3.0, 123456.789, 1e300, -2.2e-308] {
            assert_eq!(num(x).parse::<f64>().unwrap(), x, "{x} reads back");
            assert!(num(x).len() <= 25, "{}", num(x));
        }
        assert_eq!(num(f64::INFINITY), "");
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
        w.serialize((Num(None), Num::from(2.0), Num::from(f64::NAN))).unwrap();
        assert_eq!(String::from_utf8(w.into_inner().unwrap()).unwrap(), ",2.0,\n");
    }
}
