//! Budget-response curves of a budget sweep (`[matrix.budget]`): each arm's outcome and each
//! comparison's paired effect at every level of the swept key, as a band simultaneous over the
//! levels of its curve (Bonferroni: each level's interval at `1 - alpha / m` for `m` levels),
//! and each step between neighbouring levels as a paired change over tasks (Bonferroni over the
//! `m - 1` steps). The outcome is the experiment's primary (the pass rate by default). Bands are
//! simultaneous within a curve, not across curves: they are unadjusted across the family.

use super::primary::unusable;
use super::{EffectReport, EffectVerdict, Run};
use super::{by_task, rate_interval};
use crate::report::load::Row;
use crate::report::stats::{self, SignFlipTest};
use ablate_core::experiment::matrix::{BudgetKey, BudgetLevel};
use serde::Serialize;

/// Every curve of a run's budget sweep.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetCurves {
    pub key: BudgetKey,
    /// The levels, increasing.
    pub levels: Vec<f64>,
    /// Each arm's outcome against the level.
    pub arms: Vec<Curve>,
    /// Each comparison's paired effect against the level.
    pub effects: Vec<Curve>,
    /// Curves not drawn, and why.
    pub not_drawn: Vec<NotDrawn>,
}

/// A curve the report does not draw: the arm or comparison, the model, the reason.
#[derive(Debug, Clone, Serialize)]
pub struct NotDrawn {
    pub of: String,
    pub model: String,
    pub why: NotDrawnWhy,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NotDrawnWhy {
    /// A trial's primary outcome is missing or outside [0, 1].
    PrimaryUnusable,
    /// The comparison at `level` was refused (the analysis's guard).
    Refused { level: f64 },
    /// The comparison at `level` has no verdict to read (`EffectVerdict::withheld`): the curve
    /// would show an effect of an experiment that did not happen as claimed.
    Withheld { level: f64, verdict: EffectVerdict },
}

/// One curve: an arm's outcome or a comparison's effect at each level it has trials at.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    /// The arm or comparison the sweep repeats.
    pub of: String,
    pub model: String,
    pub points: Vec<Point>,
    /// The band's level: each point's interval is at `1 - alpha / points`.
    pub band_level: f64,
    /// The change from each level to the next, over the tasks both have.
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Point {
    pub level: f64,
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
    pub n_tasks: usize,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Step {
    pub from: f64,
    pub to: f64,
    pub change: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Curve {
    /// Levels whose interval lies above zero (an effect that helps there).
    pub(crate) fn above_zero(&self) -> Vec<f64> {
        self.points.iter().filter(|p| p.lo > 0.0).map(|p| p.level).collect()
    }

    /// Levels whose interval lies below zero (an effect that hurts there).
    pub(crate) fn below_zero(&self) -> Vec<f64> {
        self.points.iter().filter(|p| p.hi < 0.0).map(|p| p.level).collect()
    }

    /// Steps whose change is detectably positive.
    pub(crate) fn rises(&self) -> Vec<Step> {
        self.steps.iter().copied().filter(|s| s.lo > 0.0).collect()
    }

    /// Steps whose change is detectably negative.
    pub(crate) fn falls(&self) -> Vec<Step> {
        self.steps.iter().copied().filter(|s| s.hi < 0.0).collect()
    }

    /// The level past which no step rises detectably, when an earlier step did: where the curve
    /// stops growing (None when no step rises, or the last step does).
    pub(crate) fn stops_growing_at(&self) -> Option<f64> {
        let last_rise = self.steps.iter().rposition(|s| s.lo > 0.0)?;
        (last_rise + 1 < self.steps.len()).then(|| self.steps[last_rise].to)
    }
}

/// What the curves are computed from: the analysis's run and its checked effects.
pub(super) struct Inputs<'a> {
    pub run: &'a Run<'a>,
    /// The run's effects, their verdicts checked: a level whose effect is missing (refused) or
    /// withheld leaves its curve undrawn.
    pub effects: &'a [&'a EffectReport],
}

/// The run's budget curves; None when it has no budget sweep.
pub(super) fn curves(x: &Inputs<'_>) -> Option<BudgetCurves> {
    let swept: Vec<(&str, &str, BudgetLevel)> = x
        .run
        .data
        .arm_settings
        .iter()
        .filter_map(|a| a.budget.as_ref().map(|b| (a.name.as_str(), b.of.as_str(), b.level)))
        .collect();
    let key = swept.first()?.2.key;
    let mut levels: Vec<f64> = swept.iter().map(|s| s.2.value).collect();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    let mut out =
        BudgetCurves { key, levels, arms: Vec::new(), effects: Vec::new(), not_drawn: Vec::new() };
    let models = 0..x.run.data.models.list.len() as u32;
    for base in first_seen(swept.iter().map(|s| s.1)) {
        let at: Vec<(f64, &str)> =
            swept.iter().filter(|s| s.1 == base).map(|s| (s.2.value, s.0)).collect();
        for model in models.clone() {
            let mut series: Vec<(f64, Vec<Vec<f64>>)> =
                at.iter().filter_map(|&(l, arm)| Some((l, x.outcomes(model, arm)?))).collect();
            series.sort_by(|a, b| a.0.total_cmp(&b.0));
            push(&mut out, base, x.run.data.models.name(model), arm_curve(x, &series), true);
        }
    }
    let comparisons = x.run.data.manifest.comparisons();
    let swept: Vec<_> = comparisons.iter().filter(|c| c.budget.is_some()).collect();
    for base in first_seen(swept.iter().filter_map(|c| Some(c.budget.as_ref()?.of.as_str()))) {
        for model in models.clone() {
            let name = x.run.data.models.name(model);
            let at_levels =
                swept.iter().copied().filter(|c| c.budget.as_ref().is_some_and(|b| b.of == base));
            let drawn = match effect_series(x, at_levels, model) {
                Ok(series) => effect_curve(x, &series),
                Err(why) => Drawn::Not(why),
            };
            push(&mut out, base, name, drawn, false);
        }
    }
    Some(out)
}

/// A swept comparison's paired outcomes at each level (increasing), or why its curve is not
/// drawn: a level whose effect was refused, or whose verdict is withheld.
fn effect_series<'c>(
    x: &Inputs<'_>,
    at_levels: impl Iterator<Item = &'c ablate_core::experiment::matrix::Comparison>,
    model: u32,
) -> Result<Vec<(f64, Paired)>, NotDrawnWhy> {
    let model_name = x.run.data.models.name(model);
    let mut series = Vec::new();
    for c in at_levels {
        let level = c.budget.as_ref().map_or(f64::NAN, |b| b.level.value);
        let (Some(ct), Some(tt)) = (x.outcomes(model, &c.control), x.outcomes(model, &c.treatment))
        else {
            continue;
        };
        let effect = x.effects.iter().find(|e| e.name == c.name && e.model == model_name);
        match effect {
            None => return Err(NotDrawnWhy::Refused { level }),
            Some(e) if e.verdict.withheld() => {
                return Err(NotDrawnWhy::Withheld { level, verdict: e.verdict.clone() });
            }
            Some(_) => series.push((level, paired(ct, tt))),
        }
    }
    series.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(series)
}

/// The names in the order first seen, each once.
fn first_seen<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// A curve with points into the arms' or effects' list, or the pair into `not_drawn`.
fn push(out: &mut BudgetCurves, of: &str, model: &str, curve: Drawn, arm: bool) {
    let (of, model) = (of.to_string(), model.to_string());
    match curve {
        Drawn::Empty => {}
        Drawn::Not(why) => out.not_drawn.push(NotDrawn { of, model, why }),
        Drawn::Curve { points, steps, band_level } => {
            let c = Curve { of, model, points, band_level, steps };
            if arm { out.arms.push(c) } else { out.effects.push(c) }
        }
    }
}

enum Drawn {
    /// No level has trials.
    Empty,
    /// Not drawn, and why.
    Not(NotDrawnWhy),
    Curve {
        points: Vec<Point>,
        steps: Vec<Step>,
        band_level: f64,
    },
}

/// A comparison's outcomes by task, kept only where both arms ran the task.
pub(crate) type Paired = (Vec<Vec<f64>>, Vec<Vec<f64>>);

fn paired(mut c: Vec<Vec<f64>>, mut t: Vec<Vec<f64>>) -> Paired {
    for (a, b) in c.iter_mut().zip(t.iter_mut()) {
        if a.is_empty() || b.is_empty() {
            a.clear();
            b.clear();
        }
    }
    (c, t)
}

impl Inputs<'_> {
    /// The primary outcome of an arm's trials for one model, by task; None without trials.
    fn outcomes(&self, model: u32, arm: &str) -> Option<Vec<Vec<f64>>> {
        let rows: &Vec<&Row> = self.run.groups.get(&(model, self.run.data.arms.get(arm)?))?;
        let n_tasks = self.run.data.tasks.list.len();
        Some(by_task(rows, n_tasks, |r| self.run.primary.value(self.run.data, r)))
    }

    /// The level of each of `m` simultaneous intervals.
    fn each(&self, m: usize) -> f64 {
        1.0 - self.run.alpha / m.max(1) as f64
    }
}

/// An arm's outcome at each level (its interval as the arm's pass rate is given) and the paired
/// change between neighbouring levels.
fn arm_curve(x: &Inputs<'_>, series: &[(f64, Vec<Vec<f64>>)]) -> Drawn {
    if series.is_empty() {
        return Drawn::Empty;
    }
    if series.iter().any(|(_, o)| unusable([o, &[]]).is_some()) {
        return Drawn::Not(NotDrawnWhy::PrimaryUnusable);
    }
    let conf = x.each(series.len());
    let points = series
        .iter()
        .map(|(level, o)| {
            let i = rate_interval(o, conf);
            Point { level: *level, estimate: i.mean, lo: i.lo, hi: i.hi, n_tasks: i.n_tasks }
        })
        .collect();
    let step_conf = x.each(series.len() - 1);
    let steps = series
        .windows(2)
        .map(|w| {
            let (a, b) = paired(w[0].1.clone(), w[1].1.clone());
            step(w[0].0, w[1].0, stats::paired_inference_by(&a, &b, step_conf, x.run.test))
        })
        .collect();
    Drawn::Curve { points, steps, band_level: conf }
}

/// A comparison's paired effect at each level, and the change of the effect between neighbouring
/// levels (each task's effect at one level against its effect at the next).
fn effect_curve(x: &Inputs<'_>, series: &[(f64, Paired)]) -> Drawn {
    if series.is_empty() {
        return Drawn::Empty;
    }
    if series.iter().any(|(_, (c, t))| unusable([c, t]).is_some()) {
        return Drawn::Not(NotDrawnWhy::PrimaryUnusable);
    }
    let conf = x.each(series.len());
    let points = series
        .iter()
        .map(|(level, (c, t))| {
            let inf = stats::paired_inference_by(c, t, conf, x.run.test);
            Point {
                level: *level,
                estimate: inf.mean_diff,
                lo: inf.lo,
                hi: inf.hi,
                n_tasks: inf.n_tasks,
            }
        })
        .collect();
    let step_conf = x.each(series.len() - 1);
    let steps = series
        .windows(2)
        .map(|w| {
            let (change, lo, hi) = effect_change(&w[0].1, &w[1].1, step_conf, x.run.test);
            Step { from: w[0].0, to: w[1].0, change, lo, hi }
        })
        .collect();
    Drawn::Curve { points, steps, band_level: conf }
}

/// The change of a comparison's effect from one level to the next, over the tasks both have:
/// each task's effect at the higher level minus its effect at the lower, with the sign-flip
/// interval at `conf`. An effect lies in [-1, 1], so a change lies in [-2, 2]: the inference
/// runs on half of each effect (in [-0.5, 0.5], as the test's range requires) and is doubled.
/// (change, lo, hi); no interval from fewer than two tasks.
pub(crate) fn effect_change(
    lower: &Paired,
    higher: &Paired,
    conf: f64,
    test: SignFlipTest,
) -> (f64, f64, f64) {
    let half = |p: &Paired| -> Vec<Vec<f64>> {
        task_effects(p).into_iter().map(|v| v.into_iter().map(|d| d / 2.0).collect()).collect()
    };
    let (a, b) = paired(half(lower), half(higher));
    let s = step(0.0, 0.0, stats::paired_inference_by(&a, &b, conf, test));
    (2.0 * s.change, 2.0 * s.lo, 2.0 * s.hi)
}

/// Each task's effect (treatment mean minus control mean) as its one value; no value where the
/// comparison has no pair on the task.
fn task_effects((c, t): &Paired) -> Vec<Vec<f64>> {
    c.iter()
        .zip(t)
        .map(|(a, b)| if a.is_empty() { Vec::new() } else { vec![stats::mean(b) - stats::mean(a)] })
        .collect()
}

/// A step's change; no interval from fewer than two tasks (one task's effects are not trials).
fn step(from: f64, to: f64, inf: stats::Inference) -> Step {
    let (lo, hi) = if inf.n_tasks >= 2 { (inf.lo, inf.hi) } else { (f64::NAN, f64::NAN) };
    Step { from, to, change: inf.mean_diff, lo, hi }
}
