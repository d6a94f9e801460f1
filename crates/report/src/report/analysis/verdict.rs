//! The verdict of a comparison, from its inference: which sign-flip p-value
//! the design's null needs, helps / hurts / no effect read from the
//! interval, and the equivalence words once a margin is declared.

use super::{EffectVerdict, stats};

/// The sign-flip p-value the verdicts read, by the null "no effect" means
/// in this design (docs/statistics.md, "Which p-value"): the mid-p when
/// every model samples (temperature above 0: trial noise decides which
/// tasks change, and the mid-p keeps its size for arms identical on every
/// task); else the exact test, whose size holds for any differences
/// symmetric about 0 however many tasks changed (greedy arms: the treatment
/// fixes which tasks change). A record without the models' temperatures
/// (an import) gets the exact test.
pub(crate) fn sign_flip_test(exp: &ablate_core::record::RecordedExperiment) -> stats::SignFlipTest {
    let sampled = |m: &serde_json::Value| m["temperature"].as_f64().is_some_and(|t| t > 0.0);
    match exp.rest.get("models").and_then(|m| m.as_array()) {
        Some(models) if !models.is_empty() && models.iter().all(sampled) => {
            stats::SignFlipTest::MidP
        }
        _ => stats::SignFlipTest::Exact,
    }
}

/// The verdict once a margin is declared: an effect shown stays one; else
/// `equivalent` when the two one-sided tests showed the difference inside the
/// margins (`shown`: [`stats::paired_equivalent`]), `undecided` when not.
pub(crate) fn with_margin(
    v: EffectVerdict,
    shown: bool,
    n_tasks: usize,
    margin: f64,
) -> EffectVerdict {
    let one_task = n_tasks == 1;
    match v {
        // Too few tasks for any test to reject: no equivalence either, and the reason says more.
        EffectVerdict::Helps { .. }
        | EffectVerdict::Hurts { .. }
        | EffectVerdict::NotEnoughData
        | EffectVerdict::NoVerdictPossible { .. } => v,
        _ if shown => EffectVerdict::Equivalent { margin, one_task },
        _ => EffectVerdict::Undecided { margin, one_task },
    }
}

/// helps / hurts / no verdict, read from the interval (which excludes 0
/// exactly when the p-value is at most the level): never against it.
pub fn verdict(inf: &stats::Inference, level_alpha: f64) -> EffectVerdict {
    if inf.n_tasks == 0 || inf.lo.is_nan() {
        return EffectVerdict::NotEnoughData;
    }
    let one_task = inf.n_tasks == 1;
    if inf.lo > 0.0 {
        return EffectVerdict::Helps { one_task };
    }
    if inf.hi < 0.0 {
        return EffectVerdict::Hurts { one_task };
    }
    let needed = stats::sign_flip_min_tasks(level_alpha);
    if inf.n_tasks >= 2 && (inf.n_tasks as u64) < needed {
        EffectVerdict::NoVerdictPossible { tasks: inf.n_tasks, needed }
    } else {
        EffectVerdict::NoDetectableEffect { one_task }
    }
}
