//! What a comparison costs and how reliably each arm passes (docs/statistics.md,
//! "Costs and reliability"): every comparison's paired effect on the tokens,
//! money, working time and steps of a trial, the spend per solved task, and
//! pass^k, beside its pass-rate effect; every arm's spend per solved task,
//! pass^k and consistency score. All at the run's `1 - alpha`, unadjusted:
//! secondary outcomes, outside the family the verdicts are adjusted over.

use super::{PASS_AT_K, by_task};
use crate::report::load::{INCIDENTS, Row, RunData};
use crate::report::stats::{self, Span};
use ablate_core::record::TrialStatus;
use serde::Serialize;

/// A quantity a trial spends, written under its `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spend {
    Tokens,
    Cost,
    WorkingSeconds,
    Steps,
}

impl Spend {
    pub const ALL: [Spend; 4] = [Spend::Tokens, Spend::Cost, Spend::WorkingSeconds, Spend::Steps];

    pub fn name(self) -> &'static str {
        match self {
            Spend::Tokens => "tokens",
            Spend::Cost => "cost_usd",
            Spend::WorkingSeconds => "working_seconds",
            Spend::Steps => "steps",
        }
    }

    /// The quantity in words, after "the": "at 1.8x the tokens".
    pub fn words(self) -> &'static str {
        match self {
            Spend::Tokens => "tokens",
            Spend::Cost => "cost",
            Spend::WorkingSeconds => "working time",
            Spend::Steps => "steps",
        }
    }

    /// What a trial spent (None: its record has no cost).
    fn of(self, r: &Row) -> Option<f64> {
        match self {
            Spend::Tokens => Some((r.tokens_input + r.tokens_output) as f64),
            Spend::Cost => r.cost_usd,
            Spend::WorkingSeconds => Some(r.working_seconds),
            Spend::Steps => Some(r.steps as f64),
        }
    }

    /// Spent per solved task, reported for: what one solution costs.
    pub const PER_SOLVED: [Spend; 3] = [Spend::Tokens, Spend::Cost, Spend::WorkingSeconds];
}

impl Serialize for Spend {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A comparison's paired effect on what a trial spends: each arm's mean over
/// tasks of its trials' mean, the difference treatment - control (the paired
/// t interval over tasks) and the ratio (`stats::ratio_of_means`).
#[derive(Debug, Clone, Serialize)]
pub struct SpendEffect {
    pub outcome: Spend,
    pub control: f64,
    pub treatment: f64,
    pub difference: Span,
    pub ratio: Span,
}

/// Spend per solved task in each arm (`stats::per_solved`: failed trials'
/// spend counts) and its paired ratio (`stats::per_solved_ratio`).
#[derive(Debug, Clone, Serialize)]
pub struct SolvedSpend {
    pub outcome: Spend,
    pub control: Span,
    pub treatment: Span,
    pub ratio: Span,
}

/// pass^k in each arm (`stats::bounded_mean`) and its paired difference
/// (`stats::bounded_paired`), on the tasks with at least `k` trials in both.
#[derive(Debug, Clone, Serialize)]
pub struct PassHatEffect {
    pub k: u64,
    pub control: Span,
    pub treatment: Span,
    pub difference: Span,
}

/// A comparison's secondary outcomes, on the tasks both arms ran, every
/// trial counted (an infrastructure error spends too).
#[derive(Debug, Clone, Serialize)]
pub struct Costs {
    /// The level of every interval here: the run's `1 - alpha`, unadjusted.
    pub level: f64,
    pub n_tasks: usize,
    pub per_trial: Vec<SpendEffect>,
    pub per_solved: Vec<SolvedSpend>,
    pub pass_hat_k: Vec<PassHatEffect>,
    /// Every other outcome the trials recorded (docs/statistics.md, "Costs and
    /// reliability"): the builtin harness's counters, `reward.KEY`, `harness.NAME`.
    pub metrics: Vec<MetricEffect>,
}

/// A recorded metric's paired effect: each arm's mean over tasks of the
/// task's mean, and the difference with the paired t interval over tasks.
#[derive(Debug, Clone, Serialize)]
pub struct MetricEffect {
    pub name: String,
    pub control: f64,
    pub treatment: f64,
    pub difference: Span,
}

impl Costs {
    pub fn per_trial(&self, outcome: Spend) -> Option<&SpendEffect> {
        self.per_trial.iter().find(|s| s.outcome == outcome)
    }
    pub fn per_solved(&self, outcome: Spend) -> Option<&SolvedSpend> {
        self.per_solved.iter().find(|s| s.outcome == outcome)
    }
}

/// An arm's spend per solved task, and its reliability at each k.
#[derive(Debug, Clone, Serialize)]
pub struct ArmCosts {
    /// The share of trials that ended in an infrastructure error (provider,
    /// harness, grader), with the clustered Wilson interval over tasks.
    pub infra_errors: Span,
    /// Tokens and cost per trial: the mean over tasks of the task's mean,
    /// with the t interval over tasks (`stats::pass_rate`'s, on spends).
    pub per_trial: Vec<(Spend, Span)>,
    pub per_solved: Vec<(Spend, Span)>,
    pub reliability: Vec<Reliability>,
}

/// pass^k and the consistency score (`stats::consistency_k`) at one k, with
/// intervals over tasks (`stats::bounded_mean`).
#[derive(Debug, Clone, Serialize)]
pub struct Reliability {
    pub k: u64,
    pub pass_hat_k: Span,
    pub consistency: Span,
}

/// Each task's trials of one arm, in task-table order (empty: none).
fn rows_by_task<'a>(rows: &[&'a Row], n_tasks: usize) -> Vec<Vec<&'a Row>> {
    let mut v: Vec<Vec<&Row>> = vec![Vec::new(); n_tasks];
    for r in rows {
        v[r.task as usize].push(r);
    }
    v
}

/// Per task: the mean and the total of what its trials spent (None: a trial has no record of it).
fn spent(tasks: &[Vec<&Row>], outcome: Spend) -> Option<(Vec<f64>, Vec<f64>)> {
    let mut means = Vec::with_capacity(tasks.len());
    let mut totals = Vec::with_capacity(tasks.len());
    for t in tasks {
        let total: f64 = t.iter().map(|r| outcome.of(r)).sum::<Option<f64>>()?;
        totals.push(total);
        means.push(total / t.len() as f64);
    }
    Some((means, totals))
}

fn passes(tasks: &[Vec<&Row>]) -> Vec<f64> {
    tasks
        .iter()
        .map(|t| t.iter().filter(|r| r.status == TrialStatus::Passed).count() as f64)
        .collect()
}

/// The k reported: those of `PASS_AT_K` from 2 up to the fewest trials a task has.
fn ks(tasks: &[Vec<&Row>]) -> impl Iterator<Item = u64> {
    let fewest = tasks.iter().map(Vec::len).min().unwrap_or(0) as u64;
    PASS_AT_K.into_iter().filter(move |&k| k > 1 && k <= fewest)
}

/// Per task: `f(n, c, k)` of its `n` trials with `c` passes.
fn per_task(tasks: &[Vec<&Row>], k: u64, f: fn(u64, u64, u64) -> f64) -> Vec<f64> {
    let c = passes(tasks);
    tasks.iter().zip(c).map(|(t, c)| f(t.len() as u64, c as u64, k)).collect()
}

/// Per task, the mean of metric `m` over its trials (None: a trial did not record it).
fn metric_means(data: &RunData, tasks: &[Vec<&Row>], m: Metric) -> Option<Vec<f64>> {
    let value = |r: &Row| match m {
        Metric::Incident(i) => Some(f64::from(r.incidents[i])),
        Metric::Recorded(id) => {
            data.metrics.get(&r.ordinal)?.iter().find(|(k, _)| *k == id).map(|(_, v)| *v)
        }
    };
    tasks
        .iter()
        .map(|t| Some(t.iter().map(|r| value(r)).sum::<Option<f64>>()? / t.len() as f64))
        .collect()
}

/// A metric: a builtin counter (its index in `INCIDENTS`) or a recorded one (its name's id).
#[derive(Clone, Copy)]
enum Metric {
    Incident(usize),
    Recorded(u32),
}

/// Every metric both arms recorded on every trial, but those zero everywhere.
fn metric_effects(
    data: &RunData,
    c: &[Vec<&Row>],
    t: &[Vec<&Row>],
    conf: f64,
) -> Vec<MetricEffect> {
    let incidents = (0..INCIDENTS.len()).map(|i| (INCIDENTS[i].to_string(), Metric::Incident(i)));
    let recorded = data.metric_names.list.iter().enumerate();
    let recorded = recorded.map(|(i, n)| (n.clone(), Metric::Recorded(i as u32)));
    incidents
        .chain(recorded)
        .filter_map(|(name, m)| {
            let (cm, tm) = (metric_means(data, c, m)?, metric_means(data, t, m)?);
            if cm.iter().chain(&tm).all(|&v| v == 0.0) {
                return None;
            }
            Some(MetricEffect {
                name,
                control: stats::mean(&cm),
                treatment: stats::mean(&tm),
                difference: stats::mean_difference(&cm, &tm, conf),
            })
        })
        .collect()
}

/// A comparison's secondary outcomes on the tasks both arms ran.
pub fn paired(
    data: &RunData,
    control: &[&Row],
    treatment: &[&Row],
    n_tasks: usize,
    conf: f64,
) -> Costs {
    let (mut all_c, mut all_t) = (rows_by_task(control, n_tasks), rows_by_task(treatment, n_tasks));
    let both: Vec<usize> =
        (0..n_tasks).filter(|&k| !all_c[k].is_empty() && !all_t[k].is_empty()).collect();
    let c: Vec<Vec<&Row>> = both.iter().map(|&k| std::mem::take(&mut all_c[k])).collect();
    let t: Vec<Vec<&Row>> = both.iter().map(|&k| std::mem::take(&mut all_t[k])).collect();
    let per_trial = Spend::ALL
        .into_iter()
        .filter_map(|outcome| {
            let ((cm, _), (tm, _)) = (spent(&c, outcome)?, spent(&t, outcome)?);
            Some(SpendEffect {
                outcome,
                control: stats::mean(&cm),
                treatment: stats::mean(&tm),
                difference: stats::mean_difference(&cm, &tm, conf),
                ratio: stats::ratio_of_means(&cm, &tm, conf),
            })
        })
        .collect();
    let (cp, tp) = (passes(&c), passes(&t));
    let per_solved = Spend::PER_SOLVED
        .into_iter()
        .filter_map(|outcome| {
            let ((_, cs), (_, ts)) = (spent(&c, outcome)?, spent(&t, outcome)?);
            Some(SolvedSpend {
                outcome,
                control: stats::per_solved(&cs, &cp, conf),
                treatment: stats::per_solved(&ts, &tp, conf),
                ratio: stats::per_solved_ratio((&cs, &cp), (&ts, &tp), conf),
            })
        })
        .collect();
    let fewest = |x: &[Vec<&Row>], y: &[Vec<&Row>]| {
        ks(x).filter(|&k| ks(y).any(|j| j == k)).collect::<Vec<u64>>()
    };
    let pass_hat_k = fewest(&c, &t)
        .into_iter()
        .map(|k| {
            let (cv, tv) = (per_task(&c, k, stats::pass_hat_k), per_task(&t, k, stats::pass_hat_k));
            PassHatEffect {
                k,
                control: stats::bounded_mean(&cv, conf),
                treatment: stats::bounded_mean(&tv, conf),
                difference: stats::bounded_paired(&cv, &tv, conf),
            }
        })
        .collect();
    let metrics = metric_effects(data, &c, &t, conf);
    Costs { level: conf, n_tasks: both.len(), per_trial, per_solved, pass_hat_k, metrics }
}

/// An arm's spend per solved task and reliability, over the tasks it ran.
pub fn arm(rows: &[&Row], n_tasks: usize, conf: f64) -> ArmCosts {
    let tasks: Vec<Vec<&Row>> =
        rows_by_task(rows, n_tasks).into_iter().filter(|t| !t.is_empty()).collect();
    let solved = passes(&tasks);
    let per_trial = [Spend::Tokens, Spend::Cost]
        .into_iter()
        .filter_map(|o| {
            let means = spent(&tasks, o)?.0;
            let e = stats::pass_rate(&means.iter().map(|&m| vec![m]).collect::<Vec<_>>(), conf);
            Some((o, Span { estimate: e.mean, lo: e.lo, hi: e.hi }))
        })
        .collect();
    let per_solved = Spend::PER_SOLVED
        .into_iter()
        .filter_map(|o| spent(&tasks, o).map(|(_, s)| (o, stats::per_solved(&s, &solved, conf))))
        .collect();
    let reliability = ks(&tasks)
        .map(|k| Reliability {
            k,
            pass_hat_k: stats::bounded_mean(&per_task(&tasks, k, stats::pass_hat_k), conf),
            consistency: stats::bounded_mean(&per_task(&tasks, k, stats::consistency_k), conf),
        })
        .collect();
    let infra = by_task(rows, n_tasks, |r| f64::from(u8::from(r.status.is_infrastructure_error())));
    let e = stats::pass_rate_wilson(&infra, conf);
    let infra_errors = Span { estimate: e.mean, lo: e.lo, hi: e.hi };
    ArmCosts { infra_errors, per_trial, per_solved, reliability }
}

/// The spend the frontier is drawn on: the cost when every arm recorded one, else tokens.
pub(crate) fn frontier_spend(arms: &[super::ArmReport]) -> Spend {
    let priced = arms.iter().all(|a| a.costs.per_trial.iter().any(|(o, _)| *o == Spend::Cost));
    if priced && !arms.is_empty() { Spend::Cost } else { Spend::Tokens }
}

/// For each arm, the first other arm that beats it on both the pass rate and
/// the spend per trial with confidence: its pass rate's interval wholly above
/// this arm's, and its spend's wholly below (None: on the frontier, no arm
/// beats it on both with confidence). Overlapping intervals at `1 - alpha`
/// each: conservative, as a comparison of two intervals is.
pub fn beaten_by(arms: &[super::ArmReport]) -> Vec<Option<usize>> {
    let spend = frontier_spend(arms);
    let points: Vec<(Span, Span)> = arms
        .iter()
        .map(|a| {
            let p = &a.pass_rate;
            let cost = a.costs.per_trial.iter().find(|(o, _)| *o == spend);
            (Span { estimate: p.mean, lo: p.lo, hi: p.hi }, cost.map_or(Span::NONE, |(_, s)| *s))
        })
        .collect();
    first_beating(&points)
}

/// [`beaten_by`] on (pass rate, spend) points.
fn first_beating(points: &[(Span, Span)]) -> Vec<Option<usize>> {
    (0..points.len())
        .map(|i| {
            let (me, my_cost) = points[i];
            (0..points.len()).find(|&j| {
                let (other, other_cost) = points[j];
                j != i && other.lo > me.hi && other_cost.hi < my_cost.lo
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: b's pass rate [0.6, 0.8] lies above a's [0.3, 0.5] and its spend [90, 110] below
    /// a's [150, 200]: b beats a. c is cheaper than b but its rate overlaps b's, and b's spend
    /// overlaps nobody's below: b and c are on the frontier; d has no interval (one task) and is
    /// never beaten nor beats.
    #[test]
    fn an_arm_is_beaten_only_by_one_better_on_both_with_confidence() {
        let s = |lo: f64, hi: f64| Span { estimate: (lo + hi) / 2.0, lo, hi };
        let points = [
            (s(0.3, 0.5), s(150.0, 200.0)),
            (s(0.6, 0.8), s(90.0, 110.0)),
            (s(0.55, 0.7), s(40.0, 60.0)),
            (Span::NONE, Span::NONE),
        ];
        assert_eq!(first_beating(&points), vec![Some(1), None, None, None]);
        // Touching intervals are not separated: no confidence.
        let touching = [(s(0.3, 0.6), s(100.0, 200.0)), (s(0.6, 0.8), s(50.0, 100.0))];
        assert_eq!(first_beating(&touching), vec![None, None]);
    }
}
