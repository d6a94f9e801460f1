//! The effects of a factorial design (`[matrix.factorial]`): each main effect and each
//! two-factor interaction the design estimates, as a contrast over all its runs computed on each
//! task (tasks the unit, a task's trials in a run averaged first), with the sign-flip interval
//! and verdict at the family's level (Bonferroni over the design's effects for one model). An
//! interaction is reported as the difference it makes: A's effect with B on minus A's effect with
//! B off (twice the textbook's interaction effect). With several models, each effect's
//! difference between two models is the harness x model interaction (`models`).

use super::models::{self, ModelDifference};

use super::tasks::{self, TaskEffects};
use super::{EffectVerdict, Run, by_task, verdict};
use crate::report::load::RunData;
use crate::report::stats;
use ablate_core::experiment::factorial::{Estimable, FactorialDesign};
use ablate_core::record::delivery::{Delivery, DeliveryCheck};
use serde::Serialize;

/// A factorial design's effects, for every model.
#[derive(Debug, Clone, Serialize)]
pub struct Factorial {
    /// `2^(4-1) (resolution IV)` or `2^3 (full)`.
    pub design: String,
    pub from: String,
    /// The factors' components, low and high values.
    pub factors: Vec<ablate_core::experiment::factorial::Factor>,
    pub runs: usize,
    /// Effects in the family: the design's main effects and interaction classes, under every model.
    pub family_size: usize,
    /// Each interval's level: `1 - alpha / family_size`.
    pub interval_level: f64,
    pub effects: Vec<FactorialEffect>,
    /// Each effect's difference between two models; empty with one model.
    pub model_differences: Vec<ModelDifference>,
    /// Why the design's effects could not be estimated for a model, when they could not.
    pub not_estimated: Vec<String>,
}

/// What a factorial effect is: one component's main effect, or an interaction of two (with the
/// interactions the design cannot tell it apart from).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Term {
    Main { component: String },
    Interaction { a: String, b: String, aliases: Vec<String> },
}

impl Term {
    /// `feedback`, or `feedback x tools` (with `= acceptance x loop_guard` for its aliases).
    pub fn name(&self) -> String {
        match self {
            Term::Main { component } => component.clone(),
            Term::Interaction { a, b, aliases } => {
                let mut s = format!("{a} x {b}");
                for alias in aliases {
                    s.push_str(&format!(" = {alias}"));
                }
                s
            }
        }
    }
}

/// One effect of the design for one model.
#[derive(Debug, Clone, Serialize)]
pub struct FactorialEffect {
    pub model: String,
    pub term: Term,
    /// Main effect: the mean outcome with the component high minus low. Interaction: A's effect
    /// with B high minus A's effect with B low. Over tasks, each task's contrast of its runs.
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
    pub p_value: f64,
    pub n_tasks: usize,
    pub method: stats::InferenceMethod,
    pub verdict: EffectVerdict,
    /// An interaction's A effect with B high and with B low (main effect +- half the estimate).
    pub conditional: Option<(f64, f64)>,
    /// Each task's contrast, shrunk, and the tasks that carry the verdict.
    pub tasks: TaskEffects,
}

/// The design's effects, or None when the run has no factorial design.
pub(super) fn effects(x: &Run) -> Option<Factorial> {
    let design = x.data.manifest.experiment.factorial.as_ref()?;
    let estimable = design.estimable();
    // The family: every effect of the design under every model (as the ablations' over models).
    let m = estimable.len() * x.data.models.list.len().max(1);
    let level_alpha = x.alpha / m as f64;
    let mut out = Factorial {
        design: match design.resolution() {
            None => format!("{} (full)", design.notation()),
            Some(r) => format!(
                "{} (resolution {})",
                design.notation(),
                ablate_core::experiment::factorial::roman(r)
            ),
        },
        from: design.from.clone(),
        factors: design.factors.clone(),
        runs: design.runs.len(),
        family_size: m,
        interval_level: 1.0 - level_alpha,
        effects: vec![],
        model_differences: vec![],
        not_estimated: vec![],
    };
    let mut per_task: Vec<models::PerTask> = Vec::new();
    for (mi, model) in x.data.models.list.iter().enumerate() {
        let cells = match cells(x, design, mi as u32) {
            Ok(cells) => cells,
            Err(why) => {
                out.not_estimated.push(format!("model `{model}`: {why}"));
                continue;
            }
        };
        let withheld = delivery(x.data, design, mi as u32);
        for e in &estimable {
            let (effect, values) = effect(x, design, e, &cells, model, level_alpha, &withheld);
            let bound = if e.main().is_some() { 1.0 } else { 2.0 };
            if !effect.verdict.withheld() {
                let name = effect.term.name();
                per_task.push(models::PerTask {
                    effect: name,
                    model: model.clone(),
                    bound,
                    values,
                });
            }
            out.effects.push(effect);
        }
    }
    out.model_differences = models::differences(&per_task, x.alpha, x.test);
    conditionals(&mut out);
    Some(out)
}

/// A run's trials on one task: their mean and number.
pub(crate) type Cell = Option<(f64, usize)>;

/// Each task's mean outcome in each run (`cells[task][run]`); None where the run has no trial on
/// the task. Refused (with the reason) when a trial's primary outcome is missing or outside [0, 1].
fn cells(x: &Run, d: &FactorialDesign, model: u32) -> Result<Vec<Vec<Cell>>, String> {
    let n_tasks = x.data.tasks.list.len();
    let mut out = vec![vec![None; d.runs.len()]; n_tasks];
    for (ri, run) in d.runs.iter().enumerate() {
        let Some(arm) = x.data.arms.get(&run.arm) else { continue };
        let Some(rows) = x.groups.get(&(model, arm)) else { continue };
        let values = by_task(rows, n_tasks, |r| x.primary.value(x.data, r));
        if let Some(u) = super::primary::unusable([&values, &values]) {
            return Err(format!(
                "{} trials of run `{}` have no {} and {} one outside [0, 1]",
                u.missing / 2,
                run.arm,
                x.primary.name(),
                u.outside / 2
            ));
        }
        for (t, v) in values.iter().enumerate() {
            out[t][ri] = (!v.is_empty()).then(|| (stats::mean(v), v.len()));
        }
    }
    Ok(out)
}

/// The verdict every effect of the model gets instead of its own when the experiment did not
/// happen as designed: a run whose trials never reached the model; or, per factor, one whose
/// high and low runs reached the model identically though they asked differently.
struct Withheld {
    all: Option<EffectVerdict>,
    factor: Vec<Option<EffectVerdict>>,
}

fn delivery(data: &RunData, d: &FactorialDesign, model: u32) -> Withheld {
    let record = |arm: &str| data.arms.get(arm).and_then(|a| data.delivery.get(&(model, a)));
    let silent = d.runs.iter().find(|r| {
        data.manifest.imported.is_none()
            && record(&r.arm).is_some_and(|x| x.trials > 0 && x.reached_model == 0)
    });
    let all = silent.map(|r| EffectVerdict::NotComparable { arm: r.arm.clone() });
    let factor = (0..d.k())
        .map(|i| {
            let merged = |high: bool| {
                let mut out: Option<Delivery> = None;
                for r in d.runs.iter().filter(|r| r.high[i] == high) {
                    if let Some(rec) = record(&r.arm).and_then(|x| x.record.as_ref()) {
                        out.get_or_insert_with(Delivery::default).merge(rec);
                    }
                }
                out
            };
            match DeliveryCheck::of(merged(false).as_ref(), merged(true).as_ref()) {
                DeliveryCheck::NotDelivered { fields } => {
                    Some(EffectVerdict::NotDelivered { fields })
                }
                _ => None,
            }
        })
        .collect();
    Withheld { all, factor }
}

/// One effect: each task's contrast (tasks with every run), inferred at `level_alpha`; an
/// interaction's on the textbook scale (in [-1, 1]) and doubled. Returns the per-task contrasts
/// (on the reported scale) for the models' comparison.
fn effect(
    x: &Run,
    d: &FactorialDesign,
    e: &Estimable,
    cells: &[Vec<Cell>],
    model: &str,
    level_alpha: f64,
    withheld: &Withheld,
) -> (FactorialEffect, Vec<Option<f64>>) {
    let scale = if e.main().is_some() { 1.0 } else { 2.0 };
    let c = contrast(d, e, cells);
    let (low, high) = (c.low, c.high);
    let mut per_task = vec![None; cells.len()];
    let mut measured = Vec::new();
    for ((&t, &value), &variance) in c.tasks.iter().zip(&c.values).zip(&c.variances) {
        per_task[t] = Some(scale * value);
        let task = x.data.tasks.list[t].clone();
        let variance = scale * scale * variance;
        measured.push(tasks::Measured { task, effect: scale * value, variance });
    }
    let inf = stats::paired_inference_by(&low, &high, 1.0 - level_alpha, x.test);
    let factors: Vec<usize> = (0..d.k()).filter(|&i| e.contrast >> i & 1 == 1).collect();
    let withheld_here =
        withheld.all.clone().or_else(|| factors.iter().find_map(|&i| withheld.factor[i].clone()));
    let v = withheld_here.unwrap_or_else(|| verdict(&inf, level_alpha));
    let term = match e.main() {
        Some(i) => Term::Main { component: d.factors[i].component.clone() },
        None => Term::Interaction {
            a: d.factors[factors[0]].component.clone(),
            b: d.factors[factors[1]].component.clone(),
            aliases: e.terms[1..].iter().map(|&t| d.term_name(t)).collect(),
        },
    };
    let conf = 1.0 - level_alpha;
    let tasks = tasks::effects(measured, &low, &high, conf, x.test, &v);
    // A withheld verdict shows no numbers either: they are of an experiment that did not happen.
    let shown = if v.withheld() { f64::NAN } else { scale };
    let effect = FactorialEffect {
        model: model.to_string(),
        term,
        estimate: shown * inf.mean_diff,
        lo: shown * inf.lo,
        hi: shown * inf.hi,
        p_value: if v.withheld() { f64::NAN } else { inf.p_value },
        n_tasks: inf.n_tasks,
        method: inf.method,
        verdict: v,
        conditional: None,
        tasks,
    };
    (effect, per_task)
}

/// An effect's contrast on each task that has every run: the cell means at the contrast's low
/// and high signs, the contrast (high mean minus low mean: the textbook scale) and its sampling
/// variance (each cell mean enters with weight `2 / runs`).
pub(crate) struct Contrast {
    pub tasks: Vec<usize>,
    pub low: Vec<Vec<f64>>,
    pub high: Vec<Vec<f64>>,
    pub values: Vec<f64>,
    pub variances: Vec<f64>,
}

pub(crate) fn contrast(d: &FactorialDesign, e: &Estimable, cells: &[Vec<Cell>]) -> Contrast {
    let half = d.runs.len() as f64 / 2.0;
    let mut c =
        Contrast { tasks: vec![], low: vec![], high: vec![], values: vec![], variances: vec![] };
    for (t, row) in cells.iter().enumerate() {
        let Some(values) = row.iter().copied().collect::<Option<Vec<(f64, usize)>>>() else {
            continue;
        };
        let side = |s: f64| -> Vec<f64> {
            let at = d.runs.iter().zip(&values).filter(|(r, _)| d.sign(e.contrast, r) == s);
            at.map(|(_, v)| v.0).collect()
        };
        let (l, h) = (side(-1.0), side(1.0));
        c.values.push(stats::mean(&h) - stats::mean(&l));
        c.variances.push(
            values
                .iter()
                .map(|&(m, n)| tasks::mean_variance(m * n as f64, n) / (half * half))
                .sum(),
        );
        c.tasks.push(t);
        c.low.push(l);
        c.high.push(h);
    }
    c
}

/// Set each interaction's conditional effects: A's main effect plus and minus half the
/// interaction's estimate (A's effect with B high, with B low).
fn conditionals(f: &mut Factorial) {
    let mains: Vec<(String, String, f64)> = f
        .effects
        .iter()
        .filter_map(|e| match &e.term {
            Term::Main { component } => Some((e.model.clone(), component.clone(), e.estimate)),
            Term::Interaction { .. } => None,
        })
        .collect();
    for e in &mut f.effects {
        if let Term::Interaction { a, .. } = &e.term {
            let main = mains.iter().find(|(m, c, _)| *m == e.model && c == a).map(|x| x.2);
            e.conditional = main.map(|m| (m + e.estimate / 2.0, m - e.estimate / 2.0));
        }
    }
}
