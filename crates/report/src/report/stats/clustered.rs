//! The clustered pass rate and paired effect over tasks (t intervals), and the
//! score-type intervals that stay valid near 0 and 1 (Wilson on the effective
//! sample size, MOVER).

use super::*;

// ---------------------------------------------------------------------------
// Clustered pass rate
// ---------------------------------------------------------------------------

/// A pass rate with its clustered (task-level) uncertainty.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Mean of the per-task mean outcomes (each task weighs the same,
    /// whatever its number of trials).
    pub mean: f64,
    /// Standard error `sd(per-task means) / sqrt(n_tasks)`.
    pub se: f64,
    /// Lower bound of the two-sided t interval.
    pub lo: f64,
    /// Upper bound of the two-sided t interval.
    pub hi: f64,
    /// Degrees of freedom of the interval, `n_tasks - 1`.
    pub df: f64,
    /// Number of tasks with at least one trial.
    pub n_tasks: usize,
    /// Total number of trials over those tasks.
    pub n_trials: usize,
}

/// Per-task means of the tasks that have at least one trial.
pub(super) fn task_means(tasks: &[Vec<f64>]) -> Vec<f64> {
    tasks.iter().filter(|t| !t.is_empty()).map(|t| mean(t)).collect()
}

/// Clustered pass rate: the mean over tasks of the per-task mean outcome,
/// with a t interval whose sample size is the number of tasks (Miller 2024,
/// arXiv:2411.00640, clustered standard errors; Cochran 1977, two-stage
/// sampling with equal cluster sizes).
///
/// * `tasks[t]` holds the outcomes (in `[0, 1]`) of the repeated trials of
///   task `t`; tasks with no trials are ignored (not counted in `n_tasks`).
/// * `mean = (1/T) sum_t mean(tasks[t])`.
/// * `se = sample_sd(task means) / sqrt(T)`; this captures both the
///   between-task spread and the trial-to-trial noise of each task mean.
/// * `[lo, hi] = mean ± t_{1-(1-conf)/2, T-1} * se`, `df = T - 1`.
///
/// The bounds are *not* clamped to `[0, 1]`, so that `mean ± half-width`
/// stays symmetric; clamp for display if wanted.
///
/// Target of inference: the mean pass rate over the population of tasks the
/// suite is a sample of; it is also valid (conservative) for the mean over
/// the suite's own tasks.
///
/// Edge cases, by documented policy:
/// * `T = 1`: the interval is undefined (no between-task spread can be
///   estimated), so `se`, `lo` and `hi` are `NaN` and `df = 0`; `mean` is the
///   task's mean. (No Wilson fallback: it would treat repeats of one task as
///   independent evidence about the whole suite.)
/// * `T = 0`: everything is `NaN`, counts are `0`.
/// * All task means equal (e.g. every trial failed): `se = 0` and
///   `lo = hi = mean`. This is the known weakness of a Wald-type interval at
///   rates near 0 or 1 with few tasks and trials (Brown, Cai & DasGupta
///   2001): with 10 tasks of one trial at a rate near 0.05 the 95% interval
///   covers only about half the time. [`pass_rate_wilson`] does not have this
///   problem; see the test `coverage_simulation`.
pub fn pass_rate(tasks: &[Vec<f64>], conf: f64) -> Estimate {
    let means = task_means(tasks);
    let n_tasks = means.len();
    let n_trials = tasks.iter().map(Vec::len).sum();
    let m = mean(&means);
    if n_tasks < 2 || !is_open_unit(conf) {
        return Estimate {
            mean: m,
            se: f64::NAN,
            lo: f64::NAN,
            hi: f64::NAN,
            df: n_tasks.saturating_sub(1) as f64,
            n_tasks,
            n_trials,
        };
    }
    let df = (n_tasks - 1) as f64;
    let se = sample_sd(&means) / (n_tasks as f64).sqrt();
    let half = t_two_sided(conf, df) * se;
    Estimate { mean: m, se, lo: m - half, hi: m + half, df, n_tasks, n_trials }
}

// ---------------------------------------------------------------------------
// Paired effect
// ---------------------------------------------------------------------------

/// A paired (within-task) difference treatment - control.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Paired {
    /// Mean over tasks of `d_t = mean(treatment_t) - mean(control_t)`.
    pub mean_diff: f64,
    /// Standard error `sample_sd(d) / sqrt(n_tasks)`.
    pub se: f64,
    /// Lower bound of the two-sided t interval.
    pub lo: f64,
    /// Upper bound of the two-sided t interval.
    pub hi: f64,
    /// Degrees of freedom, `n_tasks - 1`.
    pub df: f64,
    /// Two-sided paired t-test p-value for `H0: mean difference = 0`.
    pub p_value: f64,
    /// Number of tasks with at least one trial in both arms.
    pub n_tasks: usize,
}

/// Paired effect of a treatment over a control on the same tasks: a paired
/// t-test and t interval on the per-task differences (Student 1908; Miller
/// 2024, arXiv:2411.00640, "paired differences", which removes the
/// between-task variance shared by both arms).
///
/// * `control[t]` and `treatment[t]` are the trial outcomes of task `t` under
///   each arm; the arms must list the same tasks in the same order. Tasks with
///   no trials in either arm are dropped from both.
/// * `d_t = mean(treatment[t]) - mean(control[t])`, `mean_diff = mean(d)`,
///   `se = sample_sd(d) / sqrt(T)`, `df = T - 1`,
///   `[lo, hi] = mean_diff ± t_{1-(1-conf)/2, T-1} se`,
///   `p_value = 2 P(t_{T-1} > |mean_diff / se|)`.
///
/// Edge cases, by documented policy:
/// * every `d_t` is 0 (e.g. both arms failed everything): `se = 0`,
///   `p_value = 1`, interval `[0, 0]`: no evidence of any difference.
/// * every `d_t` equals the same non-zero `d`: `se = 0`, `p_value = 0`,
///   interval `[d, d]` (a perfectly consistent effect).
/// * `T = 1`: `se`, `lo`, `hi` and `p_value` are `NaN`, `df = 0`.
/// * `T = 0`: everything is `NaN`.
///
/// # Panics
/// If `control.len() != treatment.len()`: the pairing is then meaningless,
/// which is a bug in the caller.
pub(crate) fn paired_effect(control: &[Vec<f64>], treatment: &[Vec<f64>], conf: f64) -> Paired {
    assert_eq!(control.len(), treatment.len(), "paired_effect: both arms must list the same tasks");
    let diffs: Vec<f64> = control
        .iter()
        .zip(treatment)
        .filter(|(c, t)| !c.is_empty() && !t.is_empty())
        .map(|(c, t)| mean(t) - mean(c))
        .collect();
    let n_tasks = diffs.len();
    let mean_diff = mean(&diffs);
    if n_tasks < 2 || !is_open_unit(conf) {
        return Paired {
            mean_diff,
            se: f64::NAN,
            lo: f64::NAN,
            hi: f64::NAN,
            df: n_tasks.saturating_sub(1) as f64,
            p_value: f64::NAN,
            n_tasks,
        };
    }
    let df = (n_tasks - 1) as f64;
    let se = sample_sd(&diffs) / (n_tasks as f64).sqrt();
    if se == 0.0 {
        // All differences are identical.
        let p_value = if mean_diff.abs() <= SPREAD_TOLERANCE { 1.0 } else { 0.0 };
        return Paired { mean_diff, se, lo: mean_diff, hi: mean_diff, df, p_value, n_tasks };
    }
    let half = t_two_sided(conf, df) * se;
    let t_stat = mean_diff / se;
    let p_value = (2.0 * t_sf(t_stat.abs(), df)).min(1.0);
    Paired { mean_diff, se, lo: mean_diff - half, hi: mean_diff + half, df, p_value, n_tasks }
}

// ---------------------------------------------------------------------------
// Score-type intervals that stay valid near 0 and 1
// ---------------------------------------------------------------------------

/// Clustered Wilson interval from per-task means (see [`pass_rate_wilson`]).
pub(super) fn clustered_wilson(means: &[f64], n_trials: usize, conf: f64) -> (f64, f64) {
    let t_count = means.len();
    if t_count < 2 || n_trials == 0 || !is_open_unit(conf) {
        return (f64::NAN, f64::NAN);
    }
    let p = mean(means);
    let n = n_trials as f64;
    let var = sample_sd(means).powi(2) / t_count as f64;
    // Effective sample size: the number of independent trials that would
    // give the observed variance; never more than the trials run (design
    // effect floored at 1), and all of them when the variance says nothing.
    // When the task means show no spread at all (every task passed, or
    // every task failed, or all alike) the variance says nothing, and the
    // fallback is the number of tasks, not of trials: the task is the unit,
    // and counting every trial as independent made 14 tasks x 10 trials, all
    // passing, look like [0.968, 1] (coverage 0.87 in simulation).
    let n_eff =
        if var > 0.0 && p > 0.0 && p < 1.0 { (p * (1.0 - p) / var).min(n) } else { t_count as f64 };
    let z = normal_quantile(1.0 - (1.0 - conf) / 2.0);
    let t = t_two_sided(conf, (t_count - 1) as f64);
    // Degrees-of-freedom adjustment: shrink n so that z / sqrt(n*) = t / sqrt(n_eff).
    let n_star = n_eff * (z / t).powi(2);
    let z2n = z * z / n_star;
    let center = (p + z2n / 2.0) / (1.0 + z2n);
    let half = z / (1.0 + z2n) * (p * (1.0 - p) / n_star + z2n / (4.0 * n_star)).max(0.0).sqrt();
    let lo = if p <= 0.0 { 0.0 } else { (center - half).max(0.0) };
    let hi = if p >= 1.0 { 1.0 } else { (center + half).min(1.0) };
    (lo, hi)
}

/// Clustered pass rate with a Wilson score interval on the effective sample
/// size: the same point estimate, `se` and `df` as [`pass_rate`], but an
/// interval that stays honest at rates near 0 or 1, where the t interval
/// collapses to zero width whenever every task has the same mean.
///
/// Method (Korn & Graubard 1998, Survey Methodology 24:193-201, effective
/// sample size with a degrees-of-freedom adjustment; the Wilson form is the
/// one evaluated for clustered data by Dean & Pagano 2015, J. Surv. Stat.
/// Methodol. 3:484-503):
/// * `p = mean of task means`, `v = se^2` (clustered, as in [`pass_rate`]);
/// * effective number of trials `n_eff = min(n_trials, p(1-p)/v)`, or
///   `n_eff = T` (the number of tasks: conservative) when `v = 0` or `p` is
///   0 or 1;
/// * `n* = n_eff (z / t_{T-1})^2`, with `z` and `t` the two-sided quantiles;
/// * the Wilson interval ([`wilson`]) for proportion `p` on `n*` trials.
///
/// So with 10 tasks of one trial each, all failed, the 95% interval is
/// `[0, 0.34]` instead of `[0, 0]`. Intended for pass/fail outcomes; with
/// fractional scores it is conservative (their variance is below `p(1-p)`).
/// Bounds lie in `[0, 1]`, `lo = 0` exactly when `p = 0`, `hi = 1` when `p = 1`.
/// Edge cases as [`pass_rate`]: `T = 1` gives `NaN` bounds.
pub(crate) fn pass_rate_wilson(tasks: &[Vec<f64>], conf: f64) -> Estimate {
    let e = pass_rate(tasks, conf);
    let (lo, hi) = clustered_wilson(&task_means(tasks), e.n_trials, conf);
    Estimate { lo, hi, ..e }
}

/// Pearson correlation, `0` when either side has no spread.
pub(super) fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let (ma, mb) = (mean(a), mean(b));
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    if no_spread(a) || no_spread(b) { 0.0 } else { (sab / (saa * sbb).sqrt()).clamp(-1.0, 1.0) }
}

/// Paired effect with a MOVER interval built from the two arms' clustered
/// Wilson intervals: the same `mean_diff`, `se`, `df`, `p_value` and
/// `n_tasks` as [`paired_effect`], but an interval that stays honest near 0
/// and 1, where the paired t interval collapses to `[0, 0]` whenever both
/// arms agree on every task.
///
/// Method: "method of variance estimates recovery" (Zou & Donner 2008, Stat.
/// Med. 27:1693-1702), in the paired form of Newcombe 1998 (Stat. Med.
/// 17:2635-2650, method 10), with each arm's interval from
/// [`pass_rate_wilson`] (`(l1, u1)` around `p1` for control, `(l2, u2)`
/// around `p2` for treatment) and `r` the Pearson correlation of the per-task
/// means of the two arms (`0` if either arm has no spread):
///
/// `lo = D - sqrt((p2 - l2)^2 - 2 r (p2 - l2)(u1 - p1) + (u1 - p1)^2)`,
/// `hi = D + sqrt((u2 - p2)^2 - 2 r (u2 - p2)(p1 - l1) + (p1 - l1)^2)`,
/// with `D = p2 - p1`. For many tasks away from 0 and 1 it agrees with the
/// paired t interval.
///
/// The `p_value` is still the paired t-test's, so at the margin the interval
/// and the p-value can disagree about 0; a gate should use one of them.
/// Tasks with no trials in either arm are dropped from both; `T = 1` gives
/// `NaN` bounds.
///
/// # Panics
/// If `control.len() != treatment.len()`, as [`paired_effect`].
pub(crate) fn paired_effect_mover(
    control: &[Vec<f64>],
    treatment: &[Vec<f64>],
    conf: f64,
) -> Paired {
    let base = paired_effect(control, treatment, conf);
    if base.n_tasks < 2 || !is_open_unit(conf) {
        return base;
    }
    let pairs: Vec<(&Vec<f64>, &Vec<f64>)> =
        control.iter().zip(treatment).filter(|(c, t)| !c.is_empty() && !t.is_empty()).collect();
    let mc: Vec<f64> = pairs.iter().map(|(c, _)| mean(c)).collect();
    let mt: Vec<f64> = pairs.iter().map(|(_, t)| mean(t)).collect();
    let nc: usize = pairs.iter().map(|(c, _)| c.len()).sum();
    let nt: usize = pairs.iter().map(|(_, t)| t.len()).sum();
    let (p1, p2) = (mean(&mc), mean(&mt));
    let (l1, u1) = clustered_wilson(&mc, nc, conf);
    let (l2, u2) = clustered_wilson(&mt, nt, conf);
    let r = correlation(&mc, &mt);
    let d = p2 - p1;
    let below = (p2 - l2).powi(2) - 2.0 * r * (p2 - l2) * (u1 - p1) + (u1 - p1).powi(2);
    let above = (u2 - p2).powi(2) - 2.0 * r * (u2 - p2) * (p1 - l1) + (p1 - l1).powi(2);
    Paired { lo: d - below.max(0.0).sqrt(), hi: d + above.max(0.0).sqrt(), ..base }
}
