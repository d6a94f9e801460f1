//! Which tasks carry an effect: each task's effect with its sampling error, shrunk toward the
//! mean by empirical Bayes (the between-task variance by DerSimonian & Laird's moments, 1986),
//! and a leave-one-task-out check of a detected effect: the tasks without which the verdict
//! changes (one at a time, then the two that push the effect furthest its way).

use super::{EffectVerdict, verdict};
use crate::report::stats::{self, SignFlipTest};
use serde::Serialize;

/// An effect's tasks.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TaskEffects {
    /// The spread (SD) of the true per-task effects beyond sampling error; NaN under 2 tasks.
    pub tau: f64,
    pub tasks: Vec<TaskEffect>,
    /// A detected effect: the tasks without any one of which it is no longer detected, or (when
    /// `together`) the two without both of which it is not.
    pub carried_by: Vec<String>,
    pub together: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskEffect {
    pub task: String,
    /// The task's effect as measured, its standard error, and shrunk toward the mean.
    pub effect: f64,
    pub se: f64,
    pub shrunk: f64,
}

/// One task's effect and its sampling variance.
pub(crate) struct Measured {
    pub task: String,
    pub effect: f64,
    pub variance: f64,
}

/// The variance of a mean of `n` values in [0, 1] summing to `sum`: at most `p (1 - p) / n`
/// (Bhatia-Davis), with `p` moved off 0 and 1 by half a trial so that a task all passed or all
/// failed still has some.
pub(crate) fn mean_variance(sum: f64, n: usize) -> f64 {
    let p = (sum + 0.5) / (n as f64 + 1.0);
    p * (1.0 - p) / n as f64
}

/// The tasks of an effect: measured, shrunk, and (when `v` detects it) the leave-one-task-out
/// check on `control` and `treatment` (each task's values, the inference `paired_inference_by`
/// at `conf` with `test`).
pub(crate) fn effects(
    measured: Vec<Measured>,
    control: &[Vec<f64>],
    treatment: &[Vec<f64>],
    conf: f64,
    test: SignFlipTest,
    v: &EffectVerdict,
) -> TaskEffects {
    let d: Vec<f64> = measured.iter().map(|m| m.effect).collect();
    let var: Vec<f64> = measured.iter().map(|m| m.variance.max(1e-9)).collect();
    let tau2 = between_task_variance(&d, &var);
    let mean = stats::mean(&d);
    let tasks = measured
        .into_iter()
        .zip(&var)
        .map(|(m, &v)| {
            let shrink = if tau2.is_finite() { tau2 / (tau2 + v) } else { 1.0 };
            TaskEffect {
                shrunk: mean + shrink * (m.effect - mean),
                se: v.sqrt(),
                task: m.task,
                effect: m.effect,
            }
        })
        .collect::<Vec<_>>();
    let (carried_by, together) = match v {
        EffectVerdict::Helps { .. } | EffectVerdict::Hurts { .. } => {
            // The tasks both sides ran, in the order of `measured`.
            let both = |i: &usize| !control[*i].is_empty() && !treatment[*i].is_empty();
            let shared: Vec<usize> = (0..control.len()).filter(both).collect();
            let pick = |xs: &[Vec<f64>]| -> Vec<Vec<f64>> {
                shared.iter().map(|&i| xs[i].clone()).collect()
            };
            let names: Vec<&str> = tasks.iter().map(|t| t.task.as_str()).collect();
            carried_by(&names, &d, &pick(control), &pick(treatment), conf, test, v)
        }
        _ => (vec![], false),
    };
    TaskEffects { tau: tau2.sqrt(), tasks, carried_by, together }
}

/// DerSimonian-Laird: `max(0, (Q - (T - 1)) / (sum w - sum w^2 / sum w))`, `w = 1 / v`.
pub(crate) fn between_task_variance(d: &[f64], v: &[f64]) -> f64 {
    if d.len() < 2 {
        return f64::NAN;
    }
    let w: Vec<f64> = v.iter().map(|v| 1.0 / v).collect();
    let sw: f64 = w.iter().sum();
    let mu = w.iter().zip(d).map(|(w, d)| w * d).sum::<f64>() / sw;
    let q: f64 = w.iter().zip(d).map(|(w, d)| w * (d - mu).powi(2)).sum();
    let c = sw - w.iter().map(|w| w * w).sum::<f64>() / sw;
    ((q - (d.len() as f64 - 1.0)) / c).max(0.0)
}

/// The tasks without which a detected effect is not detected: each alone, else the two whose
/// effects push furthest in its direction; none when it survives both.
fn carried_by(
    names: &[&str],
    d: &[f64],
    control: &[Vec<f64>],
    treatment: &[Vec<f64>],
    conf: f64,
    test: SignFlipTest,
    v: &EffectVerdict,
) -> (Vec<String>, bool) {
    let without = |out: &[usize]| -> bool {
        let keep = |xs: &[Vec<f64>]| -> Vec<Vec<f64>> {
            xs.iter()
                .enumerate()
                .filter(|(i, _)| !out.contains(i))
                .map(|(_, x)| x.clone())
                .collect()
        };
        let inf = stats::paired_inference_by(&keep(control), &keep(treatment), conf, test);
        verdict(&inf, 1.0 - conf).short() != v.short()
    };
    let alone: Vec<String> =
        (0..d.len()).filter(|&i| without(&[i])).map(|i| names[i].to_string()).collect();
    if !alone.is_empty() || d.len() < 3 {
        return (alone, false);
    }
    let sign = if stats::mean(d) >= 0.0 { 1.0 } else { -1.0 };
    let mut order: Vec<usize> = (0..d.len()).collect();
    order.sort_by(|&a, &b| (sign * d[b]).total_cmp(&(sign * d[a])));
    if without(&order[..2]) {
        (order[..2].iter().map(|&i| names[i].to_string()).collect(), true)
    } else {
        (vec![], false)
    }
}
