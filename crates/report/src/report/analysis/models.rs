//! Harness x model: whether an effect differs between two models. On the tasks both models ran,
//! each task's effect under one model minus its effect under the other, with the sign-flip
//! interval over tasks; Bonferroni over every (effect, pair of models) of the list. A detected
//! difference is the finding "this component helps model X more than model Y".

use super::{EffectVerdict, verdict};
use crate::report::stats::{self, SignFlipTest};
use serde::Serialize;

/// One effect compared between two models.
#[derive(Debug, Clone, Serialize)]
pub struct ModelDifference {
    pub effect: String,
    pub model_a: String,
    pub model_b: String,
    /// The effect's mean under each model, over the tasks both ran.
    pub effect_a: f64,
    pub effect_b: f64,
    /// `effect_a - effect_b`, its interval and p-value (unadjusted).
    pub difference: f64,
    pub lo: f64,
    pub hi: f64,
    pub p_value: f64,
    pub n_tasks: usize,
    /// Differences in the family, and the intervals' level `1 - alpha / family_size`.
    pub family_size: usize,
    pub interval_level: f64,
    /// `helps`: the effect is larger under model a; `hurts`: under model b.
    pub verdict: EffectVerdict,
}

/// An effect under one model: its name, the model, the bound on its per-task values (1 for a
/// difference of two rates, 2 for an interaction's difference of differences), and its value on
/// each task (None where the model has none).
pub(crate) struct PerTask {
    pub effect: String,
    pub model: String,
    pub bound: f64,
    pub values: Vec<Option<f64>>,
}

/// Every effect that two models or more have, compared between each two of them.
pub(crate) fn differences(
    effects: &[PerTask],
    alpha: f64,
    test: SignFlipTest,
) -> Vec<ModelDifference> {
    let mut pairs: Vec<(&PerTask, &PerTask)> = Vec::new();
    for (i, a) in effects.iter().enumerate() {
        for b in &effects[i + 1..] {
            if a.effect == b.effect && a.model != b.model {
                pairs.push((a, b));
            }
        }
    }
    let m = pairs.len().max(1);
    let level_alpha = alpha / m as f64;
    pairs
        .into_iter()
        .map(|(a, b)| {
            let both: Vec<(f64, f64)> =
                a.values.iter().zip(&b.values).filter_map(|(x, y)| Some(((*x)?, (*y)?))).collect();
            // The sign-flip test is for values in [-1, 1]: infer on the difference over its bound.
            let s = 2.0 * a.bound.max(b.bound);
            let lists = |f: fn(&(f64, f64)) -> f64| -> Vec<Vec<f64>> {
                both.iter().map(|p| vec![f(p) / s]).collect()
            };
            let (ya, yb) = (lists(|p| p.0), lists(|p| p.1));
            let inf = stats::paired_inference_by(&yb, &ya, 1.0 - level_alpha, test);
            let mean =
                |v: &[Vec<f64>]| s * stats::mean(&v.iter().map(|x| x[0]).collect::<Vec<_>>());
            let (lo, hi) =
                if inf.n_tasks >= 2 { (s * inf.lo, s * inf.hi) } else { (f64::NAN, f64::NAN) };
            ModelDifference {
                effect: a.effect.clone(),
                model_a: a.model.clone(),
                model_b: b.model.clone(),
                effect_a: mean(&ya),
                effect_b: mean(&yb),
                difference: s * inf.mean_diff,
                lo,
                hi,
                p_value: inf.p_value,
                n_tasks: inf.n_tasks,
                family_size: m,
                interval_level: 1.0 - level_alpha,
                verdict: if inf.n_tasks < 2 {
                    EffectVerdict::NotEnoughData
                } else {
                    verdict(&inf, level_alpha)
                },
            }
        })
        .collect()
}
