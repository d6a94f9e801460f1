//! Statistics for ablation reports: pure functions, `f64` throughout.
//!
//! The unit of independence is the **task**. Repeated trials of one task are
//! nested inside it and are *not* independent draws (a hard task stays hard on
//! every repeat), so every interval here that concerns a pass rate or an
//! effect is built from per-task means, with the number of tasks `T` as the
//! sample size and `T - 1` degrees of freedom. This is the clustered-standard-
//! error recipe of Miller (2024), "Adding Error Bars to Evals: A Statistical
//! Approach to Language Model Evaluations", arXiv:2411.00640, and the
//! equal-cluster-size case of two-stage sampling (Cochran 1977, *Sampling
//! Techniques*, 3rd ed., ch. 10-11), where the variance of the overall mean is
//! estimated from the spread of the primary units (tasks) alone.
//!
//! # Conventions
//!
//! * `conf` is a two-sided confidence level in `(0, 1)`, e.g. `0.95`;
//!   `alpha` is a significance level in `(0, 1)`, e.g. `0.05`.
//! * Invalid arguments (a level outside `(0, 1)`, `successes > n`, too few
//!   tasks for an interval, ...) give `NaN` rather than a panic, so that a
//!   report can print "n/a" for one cell instead of aborting. The only panic is
//!   a caller bug that no report should paper over: arms of different lengths
//!   in [`paired_effect`].
//! * Trial outcomes are numbers in `[0, 1]` (1 = pass). Fractional scores work
//!   too: all task-level functions only average them.
//! * Two interval families: the t intervals of [`pass_rate`] and
//!   [`paired_effect`] (Miller 2024), and the score-type intervals of
//!   [`pass_rate_wilson`] and [`paired_effect_mover`], which keep their
//!   coverage at rates near 0 or 1 where the t intervals collapse to zero
//!   width. The test `coverage_simulation` compares them (run it with
//!   `--nocapture` for the table).

use statrs::distribution::{Beta, ContinuousCDF, Normal, StudentsT};
use statrs::function::factorial::ln_binomial;

/// Degrees of freedom above which the Student-t distribution is computed from
/// the standard Normal instead of statrs' t routines (see [`t_quantile`]).
pub const T_NORMAL_DF: f64 = 1e4;

// ---------------------------------------------------------------------------
// Distribution helpers
// ---------------------------------------------------------------------------

fn std_normal() -> Normal {
    Normal::new(0.0, 1.0).expect("N(0, 1) is a valid distribution")
}

fn is_open_unit(p: f64) -> bool {
    p > 0.0 && p < 1.0
}

/// Quantile (inverse CDF) of the standard Normal distribution at `p`.
///
/// Method: statrs `Normal::inverse_cdf`, i.e. `-sqrt(2) * erfc_inv(2p)` with
/// the Boost-style rational approximations of the inverse error function.
/// `normal_quantile(0.975) = 1.959963984540054`.
///
/// Returns `NaN` unless `0 < p < 1`.
pub fn normal_quantile(p: f64) -> f64 {
    if !is_open_unit(p) {
        return f64::NAN;
    }
    std_normal().inverse_cdf(p)
}

/// Quantile of Student's t distribution with `df` degrees of freedom at `p`
/// (Student 1908).
///
/// Method: for `df <= 1e4` ([`T_NORMAL_DF`]), statrs `StudentsT::inverse_cdf`,
/// which inverts the regularized incomplete beta function,
/// `x = I^{-1}_{2 min(p,1-p)}(df/2, 1/2)`, `t = ±sqrt(df (1 - x) / x)`.
/// Above that, the beta inversion is wrong (off by `1e-4` at `df = 1e6`) and
/// very slow (it does not return in reasonable time at `df = 1e8`), so the
/// Normal quantile `z` is used with the Cornish-Fisher expansion of Abramowitz
/// & Stegun 26.7.5, `t = z + (z^3 + z)/(4 df) + (5z^5 + 16z^3 + 3z)/(96 df^2)`,
/// whose error there is below `1e-9` (the correction terms themselves are
/// below `3e-4`, so this is the Normal quantile to within that). `df = +inf`
/// gives exactly the Normal quantile.
///
/// Returns `NaN` unless `0 < p < 1` and `df > 0`.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if !is_open_unit(p) || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if df > T_NORMAL_DF {
        let z = normal_quantile(p);
        let (z3, z5) = (z.powi(3), z.powi(5));
        return z + (z3 + z) / (4.0 * df) + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * df * df);
    }
    StudentsT::new(0.0, 1.0, df).expect("df > 0 gives a valid Student t").inverse_cdf(p)
}

/// Upper-tail probability `P(T > x)` of Student's t with `df` degrees of
/// freedom (Student 1908), used for p-values.
///
/// Method: statrs `StudentsT::sf`, `I_{df/(df+x^2)}(df/2, 1/2) / 2` (regularized
/// incomplete beta), which stays accurate far in the tail; for `df > 1e4` the
/// Normal survival function is used (absolute error below `1e-5` there; the
/// statrs t routines misbehave at very large `df`, see [`t_quantile`]).
///
/// Returns `NaN` if `x` is `NaN` or `df` is not positive.
pub fn t_sf(x: f64, df: f64) -> f64 {
    if x.is_nan() || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if df > T_NORMAL_DF {
        return std_normal().sf(x);
    }
    StudentsT::new(0.0, 1.0, df).expect("df > 0 gives a valid Student t").sf(x)
}

/// Two-sided critical value `q_{1 - (1-conf)/2}` of Student's t on `df`.
fn t_two_sided(conf: f64, df: f64) -> f64 {
    if !is_open_unit(conf) {
        return f64::NAN;
    }
    t_quantile(1.0 - (1.0 - conf) / 2.0, df)
}

// ---------------------------------------------------------------------------
// Descriptive statistics
// ---------------------------------------------------------------------------

/// Arithmetic mean `sum(x) / n`.
///
/// Returns `NaN` for an empty slice (the mean of nothing is undefined).
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample standard deviation with Bessel's correction,
/// `sqrt(sum((x - mean)^2) / (n - 1))`, computed in two passes (mean first)
/// for numerical stability.
///
/// Policy for `n < 2`: returns `NaN`. One observation carries no information
/// about spread; returning `0` would make every downstream interval look
/// perfectly certain.
pub fn sample_sd(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return f64::NAN;
    }
    let m = mean(xs);
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    (ss / (xs.len() - 1) as f64).sqrt()
}

// ---------------------------------------------------------------------------
// Binomial intervals (independent trials)
// ---------------------------------------------------------------------------

/// Wilson score interval for a binomial proportion (Wilson 1927, JASA
/// 22:209-212; recommended by Brown, Cai & DasGupta 2001, Stat. Sci.
/// 16:101-133):
///
/// `(p + z^2/(2n) ± z sqrt(p(1-p)/n + z^2/(4n^2))) / (1 + z^2/n)`,
/// with `p = successes / n` and `z` the Normal quantile at `1 - (1-conf)/2`.
///
/// Assumes independent trials: use it for one trial per task, or for the
/// trials of a single task. The bounds are clamped to `[0, 1]`, and are exactly
/// `0` when `successes == 0` and exactly `1` when `successes == n`.
///
/// Returns `(NaN, NaN)` when `n == 0`, `successes > n` or `conf` is not in
/// `(0, 1)`.
pub fn wilson(successes: u64, n: u64, conf: f64) -> (f64, f64) {
    if n == 0 || successes > n || !is_open_unit(conf) {
        return (f64::NAN, f64::NAN);
    }
    let z = normal_quantile(1.0 - (1.0 - conf) / 2.0);
    let nf = n as f64;
    let p = successes as f64 / nf;
    let z2n = z * z / nf;
    let center = (p + z2n / 2.0) / (1.0 + z2n);
    let half = z / (1.0 + z2n) * (p * (1.0 - p) / nf + z2n / (4.0 * nf)).sqrt();
    let lo = if successes == 0 { 0.0 } else { (center - half).max(0.0) };
    let hi = if successes == n { 1.0 } else { (center + half).min(1.0) };
    (lo, hi)
}

/// Clopper-Pearson "exact" interval for a binomial proportion (Clopper &
/// Pearson 1934, Biometrika 26:404-413), by the beta-quantile identity:
///
/// `lo = Beta^{-1}(alpha/2; x, n - x + 1)`, `hi = Beta^{-1}(1 - alpha/2; x + 1, n - x)`,
/// with `alpha = 1 - conf`, `lo = 0` exactly when `x == 0` and `hi = 1` exactly
/// when `x == n`. Beta quantiles from statrs `Beta::inverse_cdf`.
///
/// Guarantees coverage `>= conf` for independent trials (conservative).
/// Returns `(NaN, NaN)` when `n == 0`, `successes > n` or `conf` is not in
/// `(0, 1)`.
pub fn clopper_pearson(successes: u64, n: u64, conf: f64) -> (f64, f64) {
    if n == 0 || successes > n || !is_open_unit(conf) {
        return (f64::NAN, f64::NAN);
    }
    let alpha = 1.0 - conf;
    let (x, nf) = (successes as f64, n as f64);
    let lo = if successes == 0 { 0.0 } else { Beta::new(x, nf - x + 1.0).expect("positive shapes").inverse_cdf(alpha / 2.0) };
    let hi = if successes == n { 1.0 } else { Beta::new(x + 1.0, nf - x).expect("positive shapes").inverse_cdf(1.0 - alpha / 2.0) };
    (lo, hi)
}

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
fn task_means(tasks: &[Vec<f64>]) -> Vec<f64> {
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
        return Estimate { mean: m, se: f64::NAN, lo: f64::NAN, hi: f64::NAN, df: n_tasks.saturating_sub(1) as f64, n_tasks, n_trials };
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
pub struct Paired {
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
pub fn paired_effect(control: &[Vec<f64>], treatment: &[Vec<f64>], conf: f64) -> Paired {
    assert_eq!(control.len(), treatment.len(), "paired_effect: both arms must list the same tasks");
    let diffs: Vec<f64> = control.iter().zip(treatment).filter(|(c, t)| !c.is_empty() && !t.is_empty()).map(|(c, t)| mean(t) - mean(c)).collect();
    let n_tasks = diffs.len();
    let mean_diff = mean(&diffs);
    if n_tasks < 2 || !is_open_unit(conf) {
        return Paired { mean_diff, se: f64::NAN, lo: f64::NAN, hi: f64::NAN, df: n_tasks.saturating_sub(1) as f64, p_value: f64::NAN, n_tasks };
    }
    let df = (n_tasks - 1) as f64;
    let se = sample_sd(&diffs) / (n_tasks as f64).sqrt();
    if se == 0.0 {
        // All differences are identical.
        let p_value = if mean_diff == 0.0 { 1.0 } else { 0.0 };
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
fn clustered_wilson(means: &[f64], n_trials: usize, conf: f64) -> (f64, f64) {
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
    let n_eff = if var > 0.0 && p > 0.0 && p < 1.0 { (p * (1.0 - p) / var).min(n) } else { t_count as f64 };
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
pub fn pass_rate_wilson(tasks: &[Vec<f64>], conf: f64) -> Estimate {
    let e = pass_rate(tasks, conf);
    let (lo, hi) = clustered_wilson(&task_means(tasks), e.n_trials, conf);
    Estimate { lo, hi, ..e }
}

/// Pearson correlation, `0` when either side has no spread.
fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let (ma, mb) = (mean(a), mean(b));
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    if saa == 0.0 || sbb == 0.0 { 0.0 } else { (sab / (saa * sbb).sqrt()).clamp(-1.0, 1.0) }
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
pub fn paired_effect_mover(control: &[Vec<f64>], treatment: &[Vec<f64>], conf: f64) -> Paired {
    let base = paired_effect(control, treatment, conf);
    if base.n_tasks < 2 || !is_open_unit(conf) {
        return base;
    }
    let pairs: Vec<(&Vec<f64>, &Vec<f64>)> = control.iter().zip(treatment).filter(|(c, t)| !c.is_empty() && !t.is_empty()).collect();
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

// ---------------------------------------------------------------------------
// One inference per comparison
// ---------------------------------------------------------------------------

/// Tasks up to which [`sign_flip`] enumerates every sign vector (`2^T`);
/// above, the Normal approximation of the sign-flip distribution is used.
pub const SIGN_FLIP_EXACT_MAX: usize = 16;

/// A sign-flip (randomization) test on per-task differences and the
/// interval that inverts it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignFlip {
    pub lo: f64,
    pub hi: f64,
    pub p_value: f64,
    /// `true` when every one of the `2^T` sign vectors was enumerated.
    pub exact: bool,
}

/// Fisher's one-sample randomization test of `H0: mean difference = delta`
/// on per-task differences `d_t` (each task's difference is equally likely to
/// have either sign under `H0`), with the confidence interval that inverts it
/// (Hartigan 1969, JASA 64:1303-1317: the bounds are order statistics of the
/// `2^T - 1` subset means).
///
/// Exact (`T <= SIGN_FLIP_EXACT_MAX`): with `M_(1) <= ... <= M_(N)` the means
/// of the `N = 2^T - 1` non-empty subsets of the `d_t`, and
/// `c = floor((1 - conf)/2 * 2^T)`, the interval is `[M_(c), M_(N+1-c)]`, or
/// `[-1, 1]` when `c = 0` (too few tasks for any conclusion at this level:
/// with 5 tasks at 95%, with 2 tasks at any level below 50%). The two-sided
/// p-value of `delta = 0` is `min(1, 2 min(1 + #{M <= 0}, 1 + #{M >= 0}) / 2^T)`.
/// Then `p <= 1 - conf` exactly when the interval excludes 0.
///
/// Approximate (`T > SIGN_FLIP_EXACT_MAX`): the sign-flip distribution of
/// `S = sum(d_t - delta)` is Normal with variance `sum((d_t - delta)^2)`
/// (its exact permutation variance), which inverts in closed form to
/// `mean ± z sqrt(SS / (T (T - z^2)))`, `SS = sum((d_t - mean)^2)`, and
/// `p = 2 P(Z > |sum d| / sqrt(sum d^2))`; again `p < 1 - conf` exactly
/// when the interval excludes 0.
///
/// Bounds are clamped to `[-1, 1]`. `T = 0` or `conf` outside `(0, 1)` gives NaN.
pub fn sign_flip(d: &[f64], conf: f64) -> SignFlip {
    let t_count = d.len();
    let nan = SignFlip { lo: f64::NAN, hi: f64::NAN, p_value: f64::NAN, exact: false };
    if t_count == 0 || !is_open_unit(conf) || d.iter().any(|x| !x.is_finite()) {
        return nan;
    }
    let a = (1.0 - conf) / 2.0;
    let m = mean(d);
    if t_count <= SIGN_FLIP_EXACT_MAX {
        let total = 1usize << t_count;
        let mut sums = vec![0.0f64; total];
        let mut means = Vec::with_capacity(total - 1);
        for mask in 1..total {
            let low = mask.trailing_zeros() as usize;
            sums[mask] = sums[mask & (mask - 1)] + d[low];
            let mean_f = sums[mask] / mask.count_ones() as f64;
            means.push(if mean_f.abs() < 1e-12 { 0.0 } else { mean_f });
        }
        let n = means.len();
        let below = means.iter().filter(|&&x| x <= 0.0).count();
        let above = means.iter().filter(|&&x| x >= 0.0).count();
        let p_value = (2.0 * (1 + below.min(above)) as f64 / total as f64).min(1.0);
        let c = (a * total as f64).floor() as usize;
        let (lo, hi) = if c == 0 {
            (-1.0, 1.0)
        } else {
            let lo = *means.select_nth_unstable_by(c - 1, f64::total_cmp).1;
            let hi = *means.select_nth_unstable_by(n - c, f64::total_cmp).1;
            (lo, hi)
        };
        return SignFlip { lo: lo.max(-1.0), hi: hi.min(1.0), p_value, exact: true };
    }
    let tf = t_count as f64;
    let z = normal_quantile(1.0 - a);
    let ss: f64 = d.iter().map(|x| (x - m) * (x - m)).sum();
    let (lo, hi) = if tf > z * z {
        let half = z * (ss / (tf * (tf - z * z))).sqrt();
        ((m - half).max(-1.0), (m + half).min(1.0))
    } else {
        (-1.0, 1.0)
    };
    let q: f64 = d.iter().map(|x| x * x).sum();
    let p_value = if q == 0.0 { 1.0 } else { (2.0 * std_normal().sf(d.iter().sum::<f64>().abs() / q.sqrt())).min(1.0) };
    SignFlip { lo, hi, p_value, exact: false }
}

/// The p-value of `H0: difference = 0` that inverts a nested family of
/// intervals `interval(conf)`: the level `alpha` at which 0 is on the edge
/// of the `1 - alpha` interval, by bisection (to `1e-12`). `1` when even
/// the narrowest interval holds 0, `<= 1e-12` when even the widest excludes it.
fn inverted_p_value(interval: impl Fn(f64) -> (f64, f64)) -> f64 {
    let excludes = |alpha: f64| {
        let (lo, hi) = interval(1.0 - alpha);
        lo > 0.0 || hi < 0.0
    };
    // Invariant: 0 is inside the interval at level `inside`, outside at `outside`.
    let (mut inside, mut outside) = (1e-12, 1.0 - 1e-12);
    if excludes(inside) {
        return inside;
    }
    if !excludes(outside) {
        return 1.0;
    }
    for _ in 0..60 {
        let mid = 0.5 * (inside + outside);
        if excludes(mid) {
            outside = mid;
        } else {
            inside = mid;
        }
    }
    outside
}

/// The comparison of two arms, as reported: estimate, interval and p-value
/// from one procedure, so that they can never contradict each other.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Inference {
    /// treatment - control: mean over tasks of the per-task differences.
    pub mean_diff: f64,
    pub lo: f64,
    pub hi: f64,
    /// Two-sided p-value of "no difference": `p <= 1 - conf` exactly when
    /// the interval excludes 0 (up to the bisection's `1e-12`).
    pub p_value: f64,
    pub n_tasks: usize,
    /// `sign_flip_exact+mover`, `sign_flip_normal+mover` (tasks as the
    /// unit) or `newcombe_one_task` (the trials of a single task).
    pub method: &'static str,
}

/// The paired comparison reported for every ablation: tasks are the unit.
///
/// * `T >= 2` tasks: the interval is the hull of the [`sign_flip`] interval
///   on the per-task differences (exact for small `T`: no verdict from 2 to
///   5 tasks at 95%, whatever the trials) and the MOVER score interval of
///   [`paired_effect_mover`] (which keeps its width when every task agrees,
///   where a shift test alone collapses); the p-value is the larger of the
///   two tests' p-values (the MOVER one by inversion). Both must reject for
///   the interval to exclude 0: conservative, and consistent by construction.
/// * `T = 1`: [`newcombe_unpaired`] over the task's trials (independent
///   trials of one task), labelled as speaking for that task only.
/// * `T = 0`: NaN, method `none`.
///
/// # Panics
/// If the arms list different numbers of tasks (caller bug).
pub fn paired_inference(control: &[Vec<f64>], treatment: &[Vec<f64>], conf: f64) -> Inference {
    assert_eq!(control.len(), treatment.len(), "paired_inference: both arms must list the same tasks");
    let pairs: Vec<(&Vec<f64>, &Vec<f64>)> = control.iter().zip(treatment).filter(|(c, t)| !c.is_empty() && !t.is_empty()).collect();
    let n_tasks = pairs.len();
    let d: Vec<f64> = pairs.iter().map(|(c, t)| mean(t) - mean(c)).collect();
    let mean_diff = mean(&d);
    if n_tasks == 0 || !is_open_unit(conf) {
        return Inference { mean_diff, lo: f64::NAN, hi: f64::NAN, p_value: f64::NAN, n_tasks, method: "none" };
    }
    if n_tasks == 1 {
        let (c, t) = pairs[0];
        let count = |v: &Vec<f64>| v.iter().sum::<f64>();
        let (x1, n1, x2, n2) = (count(c), c.len() as f64, count(t), t.len() as f64);
        let (lo, hi) = newcombe_unpaired(x1, n1, x2, n2, conf);
        let p_value = inverted_p_value(|cf| newcombe_unpaired(x1, n1, x2, n2, cf));
        return Inference { mean_diff, lo, hi, p_value, n_tasks, method: "newcombe_one_task" };
    }
    let (cv, tv): (Vec<Vec<f64>>, Vec<Vec<f64>>) = pairs.iter().map(|(c, t)| ((*c).clone(), (*t).clone())).unzip();
    let sf = sign_flip(&d, conf);
    let mv = paired_effect_mover(&cv, &tv, conf);
    let lo = sf.lo.min(mv.lo).max(-1.0);
    let hi = sf.hi.max(mv.hi).min(1.0);
    let p_mover = inverted_p_value(|cf| {
        let m = paired_effect_mover(&cv, &tv, cf);
        (m.lo, m.hi)
    });
    let method = if sf.exact { "sign_flip_exact+mover" } else { "sign_flip_normal+mover" };
    Inference { mean_diff, lo, hi, p_value: sf.p_value.max(p_mover), n_tasks, method }
}

/// Only the interval of [`paired_inference`] (no p-value): what the coverage
/// simulation checks, at a fraction of the cost.
pub fn paired_interval(control: &[Vec<f64>], treatment: &[Vec<f64>], conf: f64) -> (f64, f64) {
    let d: Vec<f64> = control.iter().zip(treatment).filter(|(c, t)| !c.is_empty() && !t.is_empty()).map(|(c, t)| mean(t) - mean(c)).collect();
    if d.len() < 2 {
        return (f64::NAN, f64::NAN);
    }
    let sf = sign_flip(&d, conf);
    let mv = paired_effect_mover(control, treatment, conf);
    (sf.lo.min(mv.lo).max(-1.0), sf.hi.max(mv.hi).min(1.0))
}

/// Newcombe's hybrid score interval for the difference `x2/n2 - x1/n1` of
/// two independent proportions (Newcombe 1998, Stat. Med. 17:873-890,
/// method 10): with Wilson intervals `(l1, u1)` and `(l2, u2)`,
/// `lo = D - sqrt((p2 - l2)^2 + (u1 - p1)^2)`, `hi = D + sqrt((u2 - p2)^2 + (p1 - l1)^2)`.
/// Counts may be fractional (sums of scores); NaN when either `n` is 0.
pub fn newcombe_unpaired(x1: f64, n1: f64, x2: f64, n2: f64, conf: f64) -> (f64, f64) {
    if n1 <= 0.0 || n2 <= 0.0 || !is_open_unit(conf) {
        return (f64::NAN, f64::NAN);
    }
    let z = normal_quantile(1.0 - (1.0 - conf) / 2.0);
    let w = |x: f64, n: f64| {
        let p = x / n;
        let z2n = z * z / n;
        let center = (p + z2n / 2.0) / (1.0 + z2n);
        let half = z / (1.0 + z2n) * (p * (1.0 - p) / n + z2n / (4.0 * n)).max(0.0).sqrt();
        (p, if x <= 0.0 { 0.0 } else { (center - half).max(0.0) }, if x >= n { 1.0 } else { (center + half).min(1.0) })
    };
    let ((p1, l1, u1), (p2, l2, u2)) = (w(x1, n1), w(x2, n2));
    let d = p2 - p1;
    (d - ((p2 - l2).powi(2) + (u1 - p1).powi(2)).sqrt(), d + ((u2 - p2).powi(2) + (p1 - l1).powi(2)).sqrt())
}

/// Fewest tasks with which an exact sign-flip test can reject at two-sided
/// level `alpha` at all: the smallest `T` with `2 / 2^T <= alpha`.
pub fn sign_flip_min_tasks(alpha: f64) -> u64 {
    let mut t = 1u64;
    while t < 64 && 2.0 / (1u64 << t) as f64 > alpha {
        t += 1;
    }
    t
}

/// Mid-p McNemar test for paired binary outcomes with one trial per task
/// (McNemar 1947; mid-p version recommended by Fagerland, Lydersen & Laake
/// 2013, BMC Med. Res. Methodol. 13:91).
///
/// `b` = tasks that pass under control only, `c` = tasks that pass under
/// treatment only (the discordant pairs). Under `H0`, `b ~ Binomial(b + c, 1/2)`.
/// With `k = min(b, c)` and `n = b + c`:
///
/// `mid-p = 2 P(X <= k) - P(X = k)`,
///
/// i.e. the two-sided exact conditional p-value minus the point probability of
/// the observed table. It is at most `1` (exactly `1` when `b == c`), and `1`
/// when there are no discordant pairs. Binomial terms are computed in log space
/// (statrs `ln_binomial`), so large `n` does not underflow the sum.
pub fn mcnemar_mid_p(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let pmf = |x: u64| (ln_binomial(n, x) + ln_half_n).exp();
    let cdf_k: f64 = (0..=k).map(pmf).sum();
    (2.0 * cdf_k - pmf(k)).clamp(0.0, 1.0)
}

/// Holm step-down adjusted p-values (Holm 1979, Scand. J. Stat. 6:65-70),
/// which control the family-wise error rate under any dependence.
///
/// With the `m` p-values sorted ascending, `p_(1) <= ... <= p_(m)`, the
/// adjusted value is `max_{j <= i} min(1, (m - j + 1) p_(j))`; results are
/// returned in the original order, are monotone in the raw p-values, and are
/// capped at 1 (the same as R's `p.adjust(p, "holm")`).
///
/// `NaN` entries (comparisons that could not be tested) stay `NaN` and are
/// not counted in `m`.
pub fn holm(p_values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..p_values.len()).filter(|&i| !p_values[i].is_nan()).collect();
    order.sort_by(|&i, &j| p_values[i].total_cmp(&p_values[j]));
    let m = order.len();
    let mut adjusted = vec![f64::NAN; p_values.len()];
    let mut running_max = 0.0_f64;
    for (rank, &i) in order.iter().enumerate() {
        let candidate = ((m - rank) as f64 * p_values[i]).min(1.0);
        running_max = running_max.max(candidate);
        adjusted[i] = running_max;
    }
    adjusted
}

// ---------------------------------------------------------------------------
// pass@k and pass^k
// ---------------------------------------------------------------------------

/// Unbiased estimator of pass@k, the probability that at least one of `k`
/// samples drawn without replacement from `n` trials (of which `c` passed)
/// passes (Chen et al. 2021, "Evaluating Large Language Models Trained on
/// Code", arXiv:2107.03374):
///
/// `pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n-c+1}^{n} (1 - k / i)`,
///
/// evaluated as the product (their numerically stable form) rather than with
/// binomial coefficients, which overflow. Returns `1` when `n - c < k`
/// (every draw of `k` must contain a pass) and `0` when `c == 0` or `k == 0`.
/// Returns `NaN` when `c > n` or `k > n` (needs `n >= k` trials).
pub fn pass_at_k(n: u64, c: u64, k: u64) -> f64 {
    if c > n || k > n {
        return f64::NAN;
    }
    if n - c < k {
        return 1.0;
    }
    let kf = k as f64;
    let prod: f64 = (n - c + 1..=n).map(|i| 1.0 - kf / i as f64).product();
    1.0 - prod
}

/// Estimator of pass^k, the probability that `k` samples drawn without
/// replacement from `n` trials (of which `c` passed) *all* pass: the
/// reliability metric of tau-bench (Yao et al. 2024, arXiv:2406.12045):
///
/// `pass^k = C(c, k) / C(n, k) = prod_{i=0}^{k-1} (c - i) / (n - i)`,
///
/// evaluated as the product. Unbiased for `p^k` of a task with pass
/// probability `p`. Returns `0` when `k > c`, `1` when `k == 0`, and `NaN`
/// when `c > n` or `k > n`.
pub fn pass_hat_k(n: u64, c: u64, k: u64) -> f64 {
    if c > n || k > n {
        return f64::NAN;
    }
    if k > c {
        return 0.0;
    }
    (0..k).map(|i| (c - i) as f64 / (n - i) as f64).product()
}

// ---------------------------------------------------------------------------
// Power and gates
// ---------------------------------------------------------------------------

/// `t_{1-alpha/2, df} + t_{power, df}`, or `NaN` for invalid levels.
fn t_sum(alpha: f64, power: f64, df: f64) -> f64 {
    if !is_open_unit(alpha) || !is_open_unit(power) || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    t_quantile(1.0 - alpha / 2.0, df) + t_quantile(power, df)
}

/// Number of tasks needed for a paired comparison to detect a mean
/// difference `delta` with a two-sided level-`alpha` test at the given power
/// (the t form of Miller 2024, arXiv:2411.00640, power for paired
/// differences; Julious 2004, Stat. Med. 23:1921-1986, eq. 7):
///
/// the smallest `n` with `n >= (t_{1-alpha/2, n-1} + t_{power, n-1})^2 var_d / delta^2`,
///
/// where `var_d` is the variance of the per-task differences `d_t` (trial
/// noise included) and `alpha` is the level actually applied (divide by the
/// number of comparisons of the family first). Never fewer than
/// [`sign_flip_min_tasks`]`(alpha)`, below which the exact sign-flip test of
/// the report cannot reject at all, nor fewer than 2.
///
/// Returns `None` when `var_d` is negative or not finite, `delta` is zero or
/// not finite, or `alpha`/`power` are not in `(0, 1)`.
pub fn sample_size_paired(var_d: f64, delta: f64, alpha: f64, power: f64) -> Option<u64> {
    if !var_d.is_finite() || var_d < 0.0 || !delta.is_finite() || delta == 0.0 || !is_open_unit(alpha) || !is_open_unit(power) {
        return None;
    }
    let floor = sign_flip_min_tasks(alpha).max(2);
    let z = normal_quantile(1.0 - alpha / 2.0) + normal_quantile(power);
    // The Normal answer is a lower bound (t > z); step up from it.
    let mut n = ((z * z * var_d / (delta * delta)).ceil() as u64).max(floor);
    while n < 10_000_000 {
        let q = t_sum(alpha, power, (n - 1) as f64);
        if (n as f64) >= q * q * var_d / (delta * delta) {
            return Some(n);
        }
        n += 1;
    }
    Some(n)
}

/// Minimum detectable effect of a paired comparison on `n` tasks: the
/// smallest true mean difference a two-sided level-`alpha` t-test detects
/// with the given power, `MDE = (t_{1-alpha/2, n-1} + t_{power, n-1}) sqrt(var_d / n)`
/// (Julious 2004, the inverse of [`sample_size_paired`]). `alpha` is the
/// level actually applied (after the family's adjustment).
/// Returns `NaN` for `n < 2`, negative `var_d`, or levels outside `(0, 1)`.
pub fn min_detectable_effect(var_d: f64, n: u64, alpha: f64, power: f64) -> f64 {
    if n < 2 || var_d.is_nan() || var_d < 0.0 {
        return f64::NAN;
    }
    t_sum(alpha, power, (n - 1) as f64) * (var_d / n as f64).sqrt()
}

/// One-sided `(1 - alpha)` confidence bounds on the mean per-task difference,
/// for a regression gate: `lower = mean - t_{1-alpha, T-1} se` and
/// `upper = mean + t_{1-alpha, T-1} se`, with `se = sample_sd(d) / sqrt(T)`
/// (one-sided Student t bounds, Student 1908).
///
/// Each bound on its own has coverage `1 - alpha`: a gate "fail if
/// `upper < -margin`" (or "pass only if `lower > 0`") is a level-`alpha`
/// one-sided test. Together they form a `1 - 2 alpha` two-sided interval.
///
/// Returns `(NaN, NaN)` for fewer than 2 tasks or `alpha` outside `(0, 1)`;
/// `(m, m)` when all differences are equal.
pub fn one_sided_bounds(diffs_per_task: &[f64], alpha: f64) -> (f64, f64) {
    let t_count = diffs_per_task.len();
    if t_count < 2 || !is_open_unit(alpha) {
        return (f64::NAN, f64::NAN);
    }
    let m = mean(diffs_per_task);
    let se = sample_sd(diffs_per_task) / (t_count as f64).sqrt();
    if se == 0.0 {
        return (m, m);
    }
    let q = t_quantile(1.0 - alpha, (t_count - 1) as f64);
    (m - q * se, m + q * se)
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    macro_rules! assert_close {
        ($a:expr, $b:expr, $tol:expr) => {{
            let (a, b, tol) = ($a as f64, $b as f64, $tol as f64);
            assert!(close(a, b, tol), "{} = {a}, expected {b} ± {tol}", stringify!($a));
        }};
    }

    #[test]
    fn quantiles() {
        assert_close!(normal_quantile(0.975), 1.959964, 1e-6);
        assert_close!(normal_quantile(0.5), 0.0, 1e-12);
        assert_close!(normal_quantile(0.8), 0.841621, 1e-6);
        assert_close!(t_quantile(0.975, 9.0), 2.262157, 1e-6);
        assert_close!(t_quantile(0.025, 9.0), -2.262157, 1e-6);
        assert_close!(t_quantile(0.95, 29.0), 1.699127, 1e-6);
        assert_close!(t_quantile(0.975, 1.0), 12.706205, 1e-5);
        assert_close!(t_quantile(0.975, 1e6), 1.959964, 1e-4);
        assert_close!(t_quantile(0.975, f64::INFINITY), 1.959964, 1e-6);
        // Below the switch the t quantile is still accurate.
        assert_close!(t_quantile(0.975, 1000.0), 1.962339, 1e-5);
        assert!(t_quantile(0.0, 5.0).is_nan());
        assert!(t_quantile(0.5, 0.0).is_nan());
        assert!(normal_quantile(1.0).is_nan());
        // t survival function: P(t_9 > 2.262157) = 0.025.
        assert_close!(t_sf(2.262157, 9.0), 0.025, 1e-7);
        assert_close!(t_sf(1.959964, 1e6), 0.025, 1e-6);
    }

    #[test]
    fn mean_and_sd() {
        assert_close!(mean(&[1.0, 2.0, 3.0, 4.0]), 2.5, 1e-12);
        assert!(mean(&[]).is_nan());
        assert_close!(sample_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), 2.138090, 1e-6);
        assert!(sample_sd(&[1.0]).is_nan());
        assert!(sample_sd(&[]).is_nan());
        assert_eq!(sample_sd(&[3.0, 3.0, 3.0]), 0.0);
    }

    #[test]
    fn wilson_known_values() {
        let (lo, hi) = wilson(7, 10, 0.95);
        assert_close!(lo, 0.397, 5e-4);
        assert_close!(hi, 0.892, 5e-4);
        let (lo, hi) = wilson(0, 20, 0.95);
        assert_eq!(lo, 0.0);
        assert_close!(hi, 0.161, 5e-4);
        let (lo, hi) = wilson(20, 20, 0.95);
        assert_close!(lo, 0.839, 5e-4);
        assert_eq!(hi, 1.0);
        assert!(wilson(0, 0, 0.95).0.is_nan());
        assert!(wilson(3, 2, 0.95).1.is_nan());
    }

    #[test]
    fn clopper_pearson_known_values() {
        let (lo, hi) = clopper_pearson(7, 10, 0.95);
        assert_close!(lo, 0.348, 5e-4);
        assert_close!(hi, 0.933, 5e-4);
        let (lo, hi) = clopper_pearson(0, 10, 0.95);
        assert_eq!(lo, 0.0);
        // Exact: 1 - 0.025^(1/10).
        assert_close!(hi, 1.0 - 0.025_f64.powf(0.1), 1e-9);
        let (lo, hi) = clopper_pearson(10, 10, 0.95);
        assert_close!(lo, 0.025_f64.powf(0.1), 1e-9);
        assert_eq!(hi, 1.0);
        assert!(clopper_pearson(1, 0, 0.95).0.is_nan());
    }

    #[test]
    fn pass_rate_basic() {
        // Three tasks with per-task means 1, 0.5, 0 -> mean 0.5, sd 0.5.
        let tasks = vec![vec![1.0, 1.0], vec![1.0, 0.0], vec![0.0, 0.0], vec![]];
        let e = pass_rate(&tasks, 0.95);
        assert_eq!(e.n_tasks, 3);
        assert_eq!(e.n_trials, 6);
        assert_close!(e.mean, 0.5, 1e-12);
        assert_close!(e.se, 0.5 / 3f64.sqrt(), 1e-12);
        assert_eq!(e.df, 2.0);
        let half = t_quantile(0.975, 2.0) * e.se;
        assert_close!(e.lo, 0.5 - half, 1e-12);
        assert_close!(e.hi, 0.5 + half, 1e-12);
        // Unequal repeats: each task weighs the same.
        let e = pass_rate(&[vec![1.0], vec![0.0, 0.0, 0.0, 0.0]], 0.95);
        assert_close!(e.mean, 0.5, 1e-12);
        // One task: interval undefined.
        let e = pass_rate(&[vec![1.0, 0.0, 1.0]], 0.95);
        assert_close!(e.mean, 2.0 / 3.0, 1e-12);
        assert!(e.se.is_nan() && e.lo.is_nan() && e.hi.is_nan());
        assert_eq!((e.n_tasks, e.df), (1, 0.0));
        // No tasks.
        let e = pass_rate(&[], 0.95);
        assert!(e.mean.is_nan());
        assert_eq!((e.n_tasks, e.n_trials), (0, 0));
        // Degenerate: everything fails -> zero-width interval at 0.
        let e = pass_rate(&vec![vec![0.0; 3]; 5], 0.95);
        assert_eq!((e.mean, e.se, e.lo, e.hi), (0.0, 0.0, 0.0, 0.0));
    }

    #[test]
    fn paired_effect_basic() {
        let control = vec![vec![0.0, 0.0], vec![1.0, 0.0], vec![1.0, 1.0], vec![0.0, 1.0]];
        let treatment = vec![vec![1.0, 0.0], vec![1.0, 1.0], vec![1.0, 1.0], vec![1.0, 1.0]];
        // d = 0.5, 0.5, 0, 0.5
        let p = paired_effect(&control, &treatment, 0.95);
        let d = [0.5, 0.5, 0.0, 0.5];
        let se = sample_sd(&d) / 2.0;
        assert_eq!(p.n_tasks, 4);
        assert_close!(p.mean_diff, 0.375, 1e-12);
        assert_close!(p.se, se, 1e-12);
        assert_eq!(p.df, 3.0);
        let t_stat = 0.375 / se; // = 3.0
        assert_close!(t_stat, 3.0, 1e-12);
        // Two-sided p of t = 3 on 3 df is 0.05767 (R: 2*pt(-3, 3)).
        assert_close!(p.p_value, 0.057669, 1e-5);
        let half = t_quantile(0.975, 3.0) * se;
        assert_close!(p.lo, 0.375 - half, 1e-12);
        assert_close!(p.hi, 0.375 + half, 1e-12);
        // The interval excludes 0 exactly when p < 0.05.
        assert!(p.lo < 0.0);

        // All differences zero.
        let z = paired_effect(&vec![vec![0.0]; 6], &vec![vec![0.0]; 6], 0.95);
        assert_eq!((z.mean_diff, z.se, z.lo, z.hi, z.p_value), (0.0, 0.0, 0.0, 0.0, 1.0));
        // All differences equal and non-zero.
        let z = paired_effect(&vec![vec![0.0]; 6], &vec![vec![1.0]; 6], 0.95);
        assert_eq!((z.lo, z.hi, z.p_value), (1.0, 1.0, 0.0));
        // Tasks empty in either arm are dropped from both.
        let z = paired_effect(&[vec![], vec![0.0], vec![1.0]], &[vec![1.0], vec![1.0], vec![]], 0.95);
        assert_eq!(z.n_tasks, 1);
        assert!(z.p_value.is_nan());
    }

    #[test]
    #[should_panic(expected = "same tasks")]
    fn paired_effect_length_mismatch_panics() {
        paired_effect(&[vec![1.0]], &[], 0.95);
    }

    /// Exact binomial point probability by direct summation of integers.
    fn binom_half_pmf(n: u64, x: u64) -> f64 {
        let mut c = 1.0_f64;
        for i in 0..x {
            c = c * (n - i) as f64 / (i + 1) as f64;
        }
        c / 2f64.powi(n as i32)
    }

    #[test]
    fn mcnemar_known_values() {
        // b = 1, c = 5: n = 6, P(X <= 1) = 7/64, P(X = 1) = 6/64,
        // mid-p = 14/64 - 6/64 = 0.125.
        let expected = 2.0 * (binom_half_pmf(6, 0) + binom_half_pmf(6, 1)) - binom_half_pmf(6, 1);
        assert_close!(expected, 0.125, 1e-15);
        assert_close!(mcnemar_mid_p(1, 5), expected, 1e-12);
        assert_close!(mcnemar_mid_p(5, 1), expected, 1e-12);
        // Fagerland et al. 2013 worked example: b = 2, c = 10 (n = 12):
        // mid-p = 2 * P(X <= 2) - P(X = 2) = (2*79 - 66) / 4096 = 0.02246.
        assert_close!(mcnemar_mid_p(2, 10), 92.0 / 4096.0, 1e-12);
        assert_eq!(mcnemar_mid_p(0, 0), 1.0);
        assert_close!(mcnemar_mid_p(4, 4), 1.0, 1e-12);
        // Large n does not underflow: symmetric -> 1, lopsided -> tiny.
        assert_close!(mcnemar_mid_p(1500, 1500), 1.0, 1e-9);
        assert!(mcnemar_mid_p(1000, 1400) < 1e-9);
    }

    #[test]
    fn holm_known_values() {
        // R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = 0.03 0.06 0.06 0.02
        let adj = holm(&[0.01, 0.04, 0.03, 0.005]);
        for (a, e) in adj.iter().zip([0.03, 0.06, 0.06, 0.02]) {
            assert_close!(*a, e, 1e-12);
        }
        // Capped at 1, monotone.
        let adj = holm(&[0.5, 0.4, 0.9]);
        assert_eq!(adj, vec![1.0, 1.0, 1.0]);
        assert!(holm(&[]).is_empty());
        // NaN stays NaN and does not count in m.
        let adj = holm(&[0.01, f64::NAN, 0.02]);
        assert_close!(adj[0], 0.02, 1e-12);
        assert!(adj[1].is_nan());
        assert_close!(adj[2], 0.02, 1e-12);
    }

    #[test]
    fn pass_at_k_known_values() {
        assert_close!(pass_at_k(10, 3, 1), 0.3, 1e-12);
        assert_eq!(pass_at_k(10, 3, 10), 1.0);
        assert_eq!(pass_at_k(10, 0, 5), 0.0);
        // 1 - C(7,2)/C(10,2) = 1 - 21/45.
        assert_close!(pass_at_k(10, 3, 2), 1.0 - 21.0 / 45.0, 1e-12);
        // Large n stays finite and exact enough: 1 - C(190,10)/C(200,10).
        let direct = 1.0 - (0..10).map(|i| (190 - i) as f64 / (200 - i) as f64).product::<f64>();
        assert_close!(pass_at_k(200, 10, 10), direct, 1e-12);
        assert!(pass_at_k(5, 6, 1).is_nan());
        assert!(pass_at_k(5, 2, 6).is_nan());

        assert_close!(pass_hat_k(10, 3, 1), 0.3, 1e-12);
        assert_close!(pass_hat_k(10, 3, 2), 6.0 / 90.0, 1e-12);
        assert_eq!(pass_hat_k(10, 3, 4), 0.0);
        assert_eq!(pass_hat_k(10, 10, 10), 1.0);
        assert_eq!(pass_hat_k(10, 3, 0), 1.0);
    }

    #[test]
    fn power_known_values() {
        // scipy.stats.t.ppf: the smallest n with n >= (t_{.975,n-1} + t_{.8,n-1})^2 * 0.25 / 0.01
        // is 199 (the Normal formula said 197); at alpha 0.01 (5 ablations, Bonferroni) 296.
        assert_eq!(sample_size_paired(0.25, 0.1, 0.05, 0.8), Some(199));
        assert_eq!(sample_size_paired(0.25, -0.1, 0.05, 0.8), Some(199));
        assert_eq!(sample_size_paired(0.25, 0.1, 0.01, 0.8), Some(296));
        // No variance: the floor is the exact sign-flip test's, 2/2^6 <= 0.05 < 2/2^5.
        assert_eq!(sample_size_paired(0.0, 0.1, 0.05, 0.8), Some(6));
        assert_eq!(sign_flip_min_tasks(0.05), 6);
        assert_eq!(sign_flip_min_tasks(0.01), 8);
        assert_eq!(sample_size_paired(0.25, 0.0, 0.05, 0.8), None);
        assert_eq!(sample_size_paired(0.25, 0.1, 1.5, 0.8), None);
        // MDE at 5 tasks, var_d 0.04 (scipy: (t.ppf(.975,4) + t.ppf(.8,4)) * sqrt(0.04/5)).
        // scipy.stats.nct gives the paired t-test 0.791 power at this effect;
        // the old Normal MDE (0.2506) had 0.564.
        assert_close!(min_detectable_effect(0.04, 5, 0.05, 0.8), 0.3324952300054415, 1e-9);
        assert_close!(min_detectable_effect(0.04, 5, 0.01, 0.8), 0.49596519465255795, 1e-9);
        assert_close!(min_detectable_effect(0.04, 20, 0.01, 0.8), 0.16644776429808955, 1e-9);
        assert!(min_detectable_effect(0.25, 0, 0.05, 0.8).is_nan());
        assert!(min_detectable_effect(0.25, 1, 0.05, 0.8).is_nan());
    }

    #[test]
    fn sign_flip_known_values() {
        // Brute force over the 128 sign vectors of the statistic itself (Python,
        // itertools.product), inverted on a 0.0005 grid: p(0) = 0.09375, CI [0, 0.4].
        let d = [0.3, 0.1, 0.5, -0.1, 0.2, 0.4, 0.0];
        let s = sign_flip(&d, 0.95);
        assert!(s.exact);
        assert_close!(s.p_value, 0.09375, 1e-12);
        assert_close!(s.lo, 0.0, 1e-12);
        assert_close!(s.hi, 0.4, 1e-12);
        // The cases: 3 tasks each 5/10 -> 6/10 (p = 2/8), 2 tasks 0/2 -> 2/2 (p = 2/4):
        // no interval narrower than [-1, 1] at 95%.
        let s = sign_flip(&[0.1, 0.1, 0.1], 0.95);
        assert_eq!((s.lo, s.hi, s.p_value), (-1.0, 1.0, 0.25));
        let s = sign_flip(&[1.0, 1.0], 0.95);
        assert_eq!((s.lo, s.hi, s.p_value), (-1.0, 1.0, 0.5));
        // 6 identical differences: p = 2/64, and the only subset mean is 0.1.
        let s = sign_flip(&[0.1; 6], 0.95);
        assert_close!(s.p_value, 2.0 / 64.0, 1e-15);
        assert_close!(s.lo, 0.1, 1e-12);
        assert_close!(s.hi, 0.1, 1e-12);
        // Normal form (20 tasks): half-width z sqrt(SS/(T(T - z^2))) = 0.048758127 and
        // p = 2 P(Z > 2/sqrt(0.4)) = 0.0015654 (scipy.stats.norm).
        let d: Vec<f64> = (0..20).map(|i| if i < 10 { 0.2 } else { 0.0 }).collect();
        let s = sign_flip(&d, 0.95);
        assert!(!s.exact);
        assert_close!(s.lo, 0.1 - 0.04875812723671694, 1e-9);
        assert_close!(s.hi, 0.1 + 0.04875812723671694, 1e-9);
        assert_close!(s.p_value, 0.001565402258002548, 1e-9);
        assert!(sign_flip(&[], 0.95).p_value.is_nan());
    }

    #[test]
    fn newcombe_known_values() {
        // Newcombe 1998, Stat. Med. 17:873, Table II, method 10: 56/70 - 48/80 -> (0.0524, 0.3339);
        // 10/10 - 0/10 -> (0.6075, 1.0000).
        let (lo, hi) = newcombe_unpaired(48.0, 80.0, 56.0, 70.0, 0.95);
        assert_close!(lo, 0.0524, 1e-4);
        assert_close!(hi, 0.3339, 1e-4);
        let (lo, hi) = newcombe_unpaired(0.0, 10.0, 10.0, 10.0, 0.95);
        assert_close!(lo, 0.6075, 1e-4);
        assert_close!(hi, 1.0, 1e-12);
    }

    #[test]
    fn paired_inference_one_method() {
        // 2 tasks, 0/2 -> 2/2: no verdict can come from two tasks.
        let i = paired_inference(&vec![vec![0.0, 0.0]; 2], &vec![vec![1.0, 1.0]; 2], 0.95);
        assert_eq!((i.lo, i.hi), (-1.0, 1.0));
        assert!(i.p_value >= 0.5, "{i:?}");
        // 3 tasks each 5/10 -> 6/10: p >= 2/8, interval holds 0.
        let c: Vec<Vec<f64>> = (0..3).map(|_| (0..10).map(|k| (k < 5) as u8 as f64).collect()).collect();
        let t: Vec<Vec<f64>> = (0..3).map(|_| (0..10).map(|k| (k < 6) as u8 as f64).collect()).collect();
        let i = paired_inference(&c, &t, 0.95);
        assert!(i.lo < 0.0 && i.p_value >= 0.25, "{i:?}");
        assert_eq!(i.method, "sign_flip_exact+mover");
        // One task: Newcombe over the trials, 0/5 -> 5/5: Wilson 0/5 upper 3.8415/8.8415 = 0.43448,
        // lo = 1 - sqrt(2) 0.43448 = 0.38555 > 0.
        let i = paired_inference(&[vec![0.0; 5]], &[vec![1.0; 5]], 0.95);
        assert_eq!(i.method, "newcombe_one_task");
        let z2 = 1.959963984540054f64.powi(2);
        assert_close!(i.lo, 1.0 - 2f64.sqrt() * z2 / (5.0 + z2), 1e-9);
        assert!(i.p_value < 0.05, "{i:?}");
    }

    #[test]
    fn one_sided_bounds_basic() {
        let d = [0.1, -0.2, 0.3, 0.0, 0.2];
        let (lo, hi) = one_sided_bounds(&d, 0.05);
        let m = mean(&d);
        let se = sample_sd(&d) / 5f64.sqrt();
        let q = 2.131847; // t_{0.95, 4}
        assert_close!(lo, m - q * se, 1e-6);
        assert_close!(hi, m + q * se, 1e-6);
        assert_eq!(one_sided_bounds(&[0.2, 0.2], 0.05), (0.2, 0.2));
        assert!(one_sided_bounds(&[0.2], 0.05).0.is_nan());
    }

    #[test]
    fn score_intervals_basic() {
        // 10 tasks x 1 trial, all failed: n* = 10 (z / t_9)^2, Wilson upper z^2/(n* + z^2).
        let all_fail = vec![vec![0.0]; 10];
        let e = pass_rate_wilson(&all_fail, 0.95);
        let z = normal_quantile(0.975);
        let n_star = 10.0 * (z / t_quantile(0.975, 9.0)).powi(2);
        assert_eq!(e.lo, 0.0);
        assert_close!(e.hi, z * z / (n_star + z * z), 1e-12);
        assert_close!(e.hi, 0.3385, 1e-3);
        assert_eq!((e.mean, e.se, e.n_tasks, e.n_trials), (0.0, 0.0, 10, 10));
        // Every trial passes: the effective size falls back to the 10 tasks, not the 30
        // trials: n* = 10 (z/t_9)^2, lo = n*/(n* + z^2) = 0.66149 (scipy); 14 tasks x 10
        // trials: 0.74998 (it was 0.968 counting trials).
        let e = pass_rate_wilson(&vec![vec![1.0; 3]; 10], 0.95);
        assert_eq!(e.hi, 1.0);
        assert_close!(e.lo, 0.6614913773398168, 1e-9);
        let e = pass_rate_wilson(&vec![vec![1.0; 10]; 14], 0.95);
        assert_close!(e.lo, 0.7499788640490404, 1e-9);
        // Away from the boundary with many tasks it is close to the t interval.
        let tasks: Vec<Vec<f64>> = (0..200).map(|i| vec![(i % 2) as f64, ((i / 2) % 2) as f64]).collect();
        let (t, w) = (pass_rate(&tasks, 0.95), pass_rate_wilson(&tasks, 0.95));
        assert_close!(w.lo, t.lo, 0.01);
        assert_close!(w.hi, t.hi, 0.01);
        assert!(pass_rate_wilson(&[vec![1.0]], 0.95).lo.is_nan());

        // MOVER: both arms all fail -> symmetric interval around 0, not [0, 0].
        let m = paired_effect_mover(&all_fail, &all_fail, 0.95);
        assert_eq!((m.mean_diff, m.p_value), (0.0, 1.0));
        assert_close!(m.lo, -e_hi_all_fail(), 1e-12);
        assert_close!(m.hi, e_hi_all_fail(), 1e-12);
        // Many tasks, away from the boundary: close to the paired t interval.
        let control: Vec<Vec<f64>> = (0..200).map(|i| vec![(i % 2) as f64]).collect();
        let treatment: Vec<Vec<f64>> = (0..200).map(|i| vec![((i % 2 == 1) || i % 3 == 0) as u8 as f64]).collect();
        let (t, m) = (paired_effect(&control, &treatment, 0.95), paired_effect_mover(&control, &treatment, 0.95));
        assert_eq!((t.mean_diff, t.p_value), (m.mean_diff, m.p_value));
        assert_close!(m.lo, t.lo, 0.01);
        assert_close!(m.hi, t.hi, 0.01);
    }

    fn e_hi_all_fail() -> f64 {
        pass_rate_wilson(&vec![vec![0.0]; 10], 0.95).hi
    }

    // -----------------------------------------------------------------------
    // Coverage simulation
    // -----------------------------------------------------------------------

    /// SplitMix64 (Steele, Lea & Flood 2014): tiny, seedable, good enough.
    pub(crate) struct SplitMix64(pub u64);

    impl SplitMix64 {
        fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        /// Uniform in [0, 1).
        pub fn uniform(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
        }
        /// Standard Normal by Box-Muller.
        fn normal(&mut self) -> f64 {
            let u1 = 1.0 - self.uniform(); // (0, 1]
            let u2 = self.uniform();
            (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        }
        pub fn bernoulli(&mut self, p: f64) -> f64 {
            if self.uniform() < p { 1.0 } else { 0.0 }
        }
        /// Gamma(k, 1) by Marsaglia & Tsang (2000, ACM TOMS 26:363-372),
        /// with `Gamma(k) = Gamma(k + 1) U^(1/k)` for `k < 1`.
        fn gamma(&mut self, k: f64) -> f64 {
            if k < 1.0 {
                let u = 1.0 - self.uniform();
                return self.gamma(k + 1.0) * u.powf(1.0 / k);
            }
            let d = k - 1.0 / 3.0;
            let c = 1.0 / (9.0 * d).sqrt();
            loop {
                let x = self.normal();
                let v = (1.0 + c * x).powi(3);
                if v <= 0.0 {
                    continue;
                }
                let u = 1.0 - self.uniform();
                if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                    return d * v;
                }
            }
        }
        /// Beta(a, b) as X / (X + Y), X ~ Gamma(a), Y ~ Gamma(b).
        pub fn beta(&mut self, a: f64, b: f64) -> f64 {
            let (x, y) = (self.gamma(a), self.gamma(b));
            if x + y == 0.0 { 0.5 } else { x / (x + y) }
        }
    }

    /// One cell of the grid: `tasks` tasks drawn afresh each replication
    /// from a population with mean control rate `base` and intraclass
    /// correlation `icc` (task rates ~ Beta with mean `base` and
    /// `a + b = (1 - icc) / icc`, so that two trials of one task correlate
    /// by `icc`; `icc = 0`: every task has rate `base`). The treatment moves
    /// each task in proportion to its room, `q = p + delta (1 - p) / (1 - base)`
    /// (at base 0.95 downwards, `q = p - delta p / base`), so the population
    /// difference is exactly `±delta` and the effect varies by task.
    /// `repeats` Bernoulli trials per task and arm.
    pub(crate) struct Cell {
        pub tasks: usize,
        pub repeats: usize,
        pub base: f64,
        pub icc: f64,
        pub delta: f64,
    }

    impl Cell {
        /// Signed population difference.
        pub fn effect(&self) -> f64 {
            if self.base > 0.5 { -self.delta } else { self.delta }
        }
        /// (control, treatment) trial outcomes per task.
        pub fn draw(&self, rng: &mut SplitMix64, control: &mut [Vec<f64>], treatment: &mut [Vec<f64>]) {
            for t in 0..self.tasks {
                let p = if self.icc == 0.0 {
                    self.base
                } else {
                    let s = (1.0 - self.icc) / self.icc;
                    rng.beta(self.base * s, (1.0 - self.base) * s)
                };
                let q = if self.base > 0.5 { p - self.delta * p / self.base } else { p + self.delta * (1.0 - p) / (1.0 - self.base) };
                control[t].clear();
                treatment[t].clear();
                for _ in 0..self.repeats {
                    control[t].push(rng.bernoulli(p));
                    treatment[t].push(rng.bernoulli(q));
                }
            }
        }
    }

    pub(crate) const COVERAGE_REPS: usize = 2000;

    /// Coverage of the reported 95% intervals for the population estimand
    /// (the mean pass rate, and the mean difference, over the population of
    /// tasks the suite is a sample of) over the grid tasks {5, 20, 100} x
    /// repeats {1, 5} x base {0.05, 0.5, 0.95} x ICC {0, 0.5} x delta {0, 0.1},
    /// 2000 replications per cell. Asserted: every interval covers in at least
    /// 93% of replications in every cell (the simulation standard error at
    /// 0.95 is 0.005). `make test` prints the table (`--nocapture`).
    #[test]
    fn simulation_coverage_grid() {
        let started = std::time::Instant::now();
        let mut rng = SplitMix64(0x5EED_AB1A_7E00_0013);
        println!("simulation_coverage_grid: {COVERAGE_REPS} replications per cell; coverage of the 95% intervals for the population mean");
        println!("{:>5} {:>3} {:>4} {:>4} {:>5} | {:>9} {:>9} | {:>8}", "tasks", "rep", "base", "icc", "delta", "pass rate", "effect", "P(excl0)");
        let mut worst: (f64, String) = (1.0, String::new());
        let mut false_positive: f64 = 0.0;
        let mut failures = Vec::new();
        for &tasks in &[5usize, 20, 100] {
            for &repeats in &[1usize, 5] {
                for &base in &[0.05, 0.5, 0.95] {
                    for &icc in &[0.0, 0.5] {
                        for &delta in &[0.0, 0.1] {
                            let cell = Cell { tasks, repeats, base, icc, delta };
                            let mut control = vec![Vec::with_capacity(repeats); tasks];
                            let mut treatment = vec![Vec::with_capacity(repeats); tasks];
                            let (mut cover_rate, mut cover_diff, mut excl0) = (0usize, 0usize, 0usize);
                            for _ in 0..COVERAGE_REPS {
                                cell.draw(&mut rng, &mut control, &mut treatment);
                                let e = pass_rate_wilson(&control, 0.95);
                                cover_rate += (e.lo <= base && base <= e.hi) as usize;
                                let (lo, hi) = paired_interval(&control, &treatment, 0.95);
                                let truth = cell.effect();
                                cover_diff += (lo <= truth && truth <= hi) as usize;
                                excl0 += (lo > 0.0 || hi < 0.0) as usize;
                            }
                            let r = COVERAGE_REPS as f64;
                            let (cr, cd) = (cover_rate as f64 / r, cover_diff as f64 / r);
                            let name = format!("tasks {tasks} repeats {repeats} base {base} icc {icc} delta {delta}");
                            println!("{tasks:5} {repeats:3} {base:4.2} {icc:4.1} {delta:5.1} | {cr:9.3} {cd:9.3} | {:8.3}", excl0 as f64 / r);
                            if delta == 0.0 {
                                false_positive = false_positive.max(excl0 as f64 / r);
                            }
                            for (what, c) in [("pass rate", cr), ("effect", cd)] {
                                if c < worst.0 {
                                    worst = (c, format!("{what}, {name}"));
                                }
                                if c < 0.93 {
                                    failures.push(format!("{name}: {what} coverage {c:.3}"));
                                }
                            }
                        }
                    }
                }
            }
        }
        println!(
            "lowest coverage {:.3} ({}); P(excl0) at delta 0 is the false-positive rate, at 0.1 the power; {:.1} s",
            worst.0,
            worst.1,
            started.elapsed().as_secs_f64()
        );
        assert!(failures.is_empty(), "cells below 0.93: {failures:#?}");
        // The figures the README states (seeded, so exactly reproducible).
        assert!(worst.0 >= 0.938, "README: every interval covers in at least 93.8%; lowest {}", worst.0);
        assert!(false_positive <= 0.057, "README: no true difference, 0 excluded in at most 5.7%; saw {false_positive}");
    }

    /// The verdict, the interval and the p-value never disagree: over many
    /// random data sets (2 to 30 tasks, 1 to 6 trials, rates anywhere), the
    /// interval excludes 0 exactly when `p <= 1 - conf`.
    #[test]
    fn simulation_interval_and_p_value_agree() {
        let mut rng = SplitMix64(0xA6EE);
        let mut disagree = Vec::new();
        for i in 0..600 {
            let tasks = 1 + (rng.uniform() * 30.0) as usize;
            let repeats = 1 + (rng.uniform() * 6.0) as usize;
            let (pc, pt) = (rng.uniform(), rng.uniform());
            let conf = [0.95, 0.99, 0.9875][i % 3];
            let arm = |rng: &mut SplitMix64, p: f64| -> Vec<Vec<f64>> {
                (0..tasks)
                    .map(|_| {
                        let pk = (p + 0.3 * (rng.uniform() - 0.5)).clamp(0.0, 1.0);
                        (0..repeats).map(|_| rng.bernoulli(pk)).collect()
                    })
                    .collect()
            };
            let (c, t) = (arm(&mut rng, pc), arm(&mut rng, pt));
            let inf = paired_inference(&c, &t, conf);
            let excludes = inf.lo > 0.0 || inf.hi < 0.0;
            let alpha = 1.0 - conf;
            // Away from the bisection's tolerance the two must agree.
            if (inf.p_value - alpha).abs() > 1e-9 && excludes != (inf.p_value <= alpha) {
                disagree.push(format!("tasks {tasks} repeats {repeats}: [{}, {}] p {}", inf.lo, inf.hi, inf.p_value));
            }
            if tasks == 2 {
                assert!(!excludes, "2 tasks never give a verdict: {inf:?}");
            }
        }
        assert!(disagree.is_empty(), "{disagree:#?}");
    }
}
