//! The estimate after a sequential run stopped. A sequence stops the first
//! time its differences look decisive, so their plain mean at the stop
//! (the naive estimate) is biased away from 0: at the fixed design's MDE the
//! naive mean of a "helps" lies well above the truth (Whitehead 1986,
//! Biometrika 73:573-581, on estimates after sequential tests). The
//! confidence sequence itself stays valid; only the point estimate needs
//! correcting. This is the bootstrap bias correction (Efron & Tibshirani
//! 1993, *An Introduction to the Bootstrap*, ch. 10) through the run's own
//! stopping rule: resample the differences the sequence took, run each
//! resample through the same rule until it decides or reaches the same
//! horizon, and subtract the resamples' mean excess over the observed mean.
//! `simulation_sequential_efficiency` measures both estimates' bias.

use super::stats::SplitMix64;
use ablate_core::sequential::betting::Bets;
use ablate_core::sequential::{Decision, Sequence};

/// Resamples of the bias correction.
pub(crate) const BOOTSTRAP_REPS: usize = 400;

/// The stopping rule a sequence followed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StoppingRule {
    pub alpha: f64,
    pub margin: Option<f64>,
    pub sizing: Bets,
    /// The most tasks a resample may take: the design's budget of tasks for
    /// a decided comparison, the tasks it took for one stopped undecided.
    pub horizon: usize,
}

/// The mean of `d` when `rule` stopped on it, run from the first element.
fn stopped_mean(draw: &mut impl FnMut() -> f64, rule: &StoppingRule) -> f64 {
    let mut seq = Sequence::untracked(rule.alpha, rule.margin, rule.sizing, &[]);
    while seq.tasks() < rule.horizon && seq.decision == Decision::Undecided {
        seq.push(draw());
    }
    seq.mean()
}

/// The bias-reduced estimate of the mean difference: `mean(d) - (E*[mean at
/// the stop] - mean(d))`, the expectation over [`BOOTSTRAP_REPS`] resamples
/// of `d` (with replacement, seeded by `seed`) through `rule`. NaN with fewer
/// than 2 differences.
pub(crate) fn bias_reduced(d: &[f64], rule: &StoppingRule, seed: u64) -> f64 {
    if d.len() < 2 || rule.horizon < 1 {
        return f64::NAN;
    }
    let observed = d.iter().sum::<f64>() / d.len() as f64;
    let mut rng = SplitMix64(seed ^ 0x5709_B1A5_0000_0001);
    let mut draw = || d[((u128::from(rng.next_u64()) * d.len() as u128) >> 64) as usize];
    let total: f64 = (0..BOOTSTRAP_REPS).map(|_| stopped_mean(&mut draw, rule)).sum();
    let bias = total / BOOTSTRAP_REPS as f64 - observed;
    (observed - bias).clamp(-1.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Differences that never let the rule stop before the horizon: every resample runs to
    /// the horizon, whose mean is unbiased for the resampling mean, so the correction is only
    /// the resampling noise (here within 0.01). Every difference alike: no correction at all.
    #[test]
    fn no_early_stop_no_correction() {
        let rule =
            StoppingRule { alpha: 0.05, margin: None, sizing: Bets::Horizon(50), horizon: 12 };
        let d: Vec<f64> = (0..12).map(|i| if i % 2 == 0 { 0.2 } else { -0.2 }).collect();
        assert!(bias_reduced(&d, &rule, 1).abs() < 0.01);
        let same = vec![-1.0; 11];
        let rule = StoppingRule { horizon: 40, ..rule };
        assert_eq!(bias_reduced(&same, &rule, 1), -1.0);
        assert!(bias_reduced(&[0.5], &rule, 1).is_nan());
    }
}
