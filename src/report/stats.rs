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
    StudentsT::new(0.0, 1.0, df)
        .expect("df > 0 gives a valid Student t")
        .inverse_cdf(p)
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
    StudentsT::new(0.0, 1.0, df)
        .expect("df > 0 gives a valid Student t")
        .sf(x)
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
    let lo = if successes == 0 {
        0.0
    } else {
        (center - half).max(0.0)
    };
    let hi = if successes == n {
        1.0
    } else {
        (center + half).min(1.0)
    };
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
    let lo = if successes == 0 {
        0.0
    } else {
        Beta::new(x, nf - x + 1.0)
            .expect("positive shapes")
            .inverse_cdf(alpha / 2.0)
    };
    let hi = if successes == n {
        1.0
    } else {
        Beta::new(x + 1.0, nf - x)
            .expect("positive shapes")
            .inverse_cdf(1.0 - alpha / 2.0)
    };
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
    tasks
        .iter()
        .filter(|t| !t.is_empty())
        .map(|t| mean(t))
        .collect()
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
    Estimate {
        mean: m,
        se,
        lo: m - half,
        hi: m + half,
        df,
        n_tasks,
        n_trials,
    }
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
    assert_eq!(
        control.len(),
        treatment.len(),
        "paired_effect: both arms must list the same tasks"
    );
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
        let p_value = if mean_diff == 0.0 { 1.0 } else { 0.0 };
        return Paired {
            mean_diff,
            se,
            lo: mean_diff,
            hi: mean_diff,
            df,
            p_value,
            n_tasks,
        };
    }
    let half = t_two_sided(conf, df) * se;
    let t_stat = mean_diff / se;
    let p_value = (2.0 * t_sf(t_stat.abs(), df)).min(1.0);
    Paired {
        mean_diff,
        se,
        lo: mean_diff - half,
        hi: mean_diff + half,
        df,
        p_value,
        n_tasks,
    }
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
    let n_eff = if var > 0.0 && p > 0.0 && p < 1.0 {
        (p * (1.0 - p) / var).min(n)
    } else {
        n
    };
    let z = normal_quantile(1.0 - (1.0 - conf) / 2.0);
    let t = t_two_sided(conf, (t_count - 1) as f64);
    // Degrees-of-freedom adjustment: shrink n so that z / sqrt(n*) = t / sqrt(n_eff).
    let n_star = n_eff * (z / t).powi(2);
    let z2n = z * z / n_star;
    let center = (p + z2n / 2.0) / (1.0 + z2n);
    let half = z / (1.0 + z2n)
        * (p * (1.0 - p) / n_star + z2n / (4.0 * n_star))
            .max(0.0)
            .sqrt();
    let lo = if p <= 0.0 {
        0.0
    } else {
        (center - half).max(0.0)
    };
    let hi = if p >= 1.0 {
        1.0
    } else {
        (center + half).min(1.0)
    };
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
///   `n_eff = n_trials` when `v = 0` or `p` is 0 or 1;
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
    if saa == 0.0 || sbb == 0.0 {
        0.0
    } else {
        (sab / (saa * sbb).sqrt()).clamp(-1.0, 1.0)
    }
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
    let pairs: Vec<(&Vec<f64>, &Vec<f64>)> = control
        .iter()
        .zip(treatment)
        .filter(|(c, t)| !c.is_empty() && !t.is_empty())
        .collect();
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
    Paired {
        lo: d - below.max(0.0).sqrt(),
        hi: d + above.max(0.0).sqrt(),
        ..base
    }
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
    let mut order: Vec<usize> = (0..p_values.len())
        .filter(|&i| !p_values[i].is_nan())
        .collect();
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

/// `z_{1-alpha/2} + z_{power}`, or `NaN` for invalid levels.
fn z_sum(alpha: f64, power: f64) -> f64 {
    if !is_open_unit(alpha) || !is_open_unit(power) {
        return f64::NAN;
    }
    normal_quantile(1.0 - alpha / 2.0) + normal_quantile(power)
}

/// Number of tasks needed for a paired comparison to detect a mean
/// difference `delta` with a two-sided level-`alpha` test at the given power
/// (Miller 2024, arXiv:2411.00640, power analysis for paired differences):
///
/// `n = ceil((z_{1-alpha/2} + z_{power})^2 * var_d / delta^2)`,
///
/// where `var_d` is the variance of the per-task differences `d_t` (which
/// already includes the trial noise of the per-task means). This is the
/// Normal approximation; the t-test needs a task or two more when `n` is
/// small. The result is at least `2`, the fewest tasks a t interval needs.
///
/// Returns `None` when `var_d` is negative or not finite, `delta` is zero or
/// not finite, or `alpha`/`power` are not in `(0, 1)`.
pub fn sample_size_paired(var_d: f64, delta: f64, alpha: f64, power: f64) -> Option<u64> {
    let z = z_sum(alpha, power);
    if !var_d.is_finite() || var_d < 0.0 || !delta.is_finite() || delta == 0.0 || z.is_nan() {
        return None;
    }
    let n = (z * z * var_d / (delta * delta)).ceil();
    Some((n as u64).max(2))
}

/// Minimum detectable effect of a paired comparison on `n` tasks (Miller
/// 2024, arXiv:2411.00640): the smallest true mean difference a two-sided
/// level-`alpha` test detects with the given power,
///
/// `MDE = (z_{1-alpha/2} + z_{power}) * sqrt(var_d / n)`
///
/// (the inverse of [`sample_size_paired`], Normal approximation).
/// Returns `NaN` for `n == 0`, negative `var_d`, or levels outside `(0, 1)`.
pub fn min_detectable_effect(var_d: f64, n: u64, alpha: f64, power: f64) -> f64 {
    if n == 0 || var_d.is_nan() || var_d < 0.0 {
        return f64::NAN;
    }
    z_sum(alpha, power) * (var_d / n as f64).sqrt()
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
            assert!(
                close(a, b, tol),
                "{} = {a}, expected {b} ± {tol}",
                stringify!($a)
            );
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
        assert_close!(
            sample_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]),
            2.138090,
            1e-6
        );
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
        let control = vec![
            vec![0.0, 0.0],
            vec![1.0, 0.0],
            vec![1.0, 1.0],
            vec![0.0, 1.0],
        ];
        let treatment = vec![
            vec![1.0, 0.0],
            vec![1.0, 1.0],
            vec![1.0, 1.0],
            vec![1.0, 1.0],
        ];
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
        assert_eq!(
            (z.mean_diff, z.se, z.lo, z.hi, z.p_value),
            (0.0, 0.0, 0.0, 0.0, 1.0)
        );
        // All differences equal and non-zero.
        let z = paired_effect(&vec![vec![0.0]; 6], &vec![vec![1.0]; 6], 0.95);
        assert_eq!((z.lo, z.hi, z.p_value), (1.0, 1.0, 0.0));
        // Tasks empty in either arm are dropped from both.
        let z = paired_effect(
            &[vec![], vec![0.0], vec![1.0]],
            &[vec![1.0], vec![1.0], vec![]],
            0.95,
        );
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
        let direct = 1.0
            - (0..10)
                .map(|i| (190 - i) as f64 / (200 - i) as f64)
                .product::<f64>();
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
        // (1.959964 + 0.841621)^2 * 0.25 / 0.01 = 7.848879 * 25 = 196.22 -> 197.
        let z = normal_quantile(0.975) + normal_quantile(0.8);
        assert_close!(z * z * 25.0, 196.222, 1e-3);
        assert_eq!(sample_size_paired(0.25, 0.1, 0.05, 0.8), Some(197));
        assert_eq!(sample_size_paired(0.25, -0.1, 0.05, 0.8), Some(197));
        assert_eq!(sample_size_paired(0.0, 0.1, 0.05, 0.8), Some(2));
        assert_eq!(sample_size_paired(0.25, 0.0, 0.05, 0.8), None);
        assert_eq!(sample_size_paired(0.25, 0.1, 1.5, 0.8), None);
        // MDE inverts the sample size: at n = 196.22 the MDE is 0.1.
        assert_close!(
            min_detectable_effect(0.25, 197, 0.05, 0.8),
            0.1 * (196.222_f64 / 197.0).sqrt(),
            1e-5
        );
        assert!(min_detectable_effect(0.25, 0, 0.05, 0.8).is_nan());
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
        let e = pass_rate_wilson(&vec![vec![1.0; 3]; 10], 0.95);
        assert_eq!(e.hi, 1.0);
        assert!(e.lo > 0.8 && e.lo < 1.0);
        // Away from the boundary with many tasks it is close to the t interval.
        let tasks: Vec<Vec<f64>> = (0..200)
            .map(|i| vec![(i % 2) as f64, ((i / 2) % 2) as f64])
            .collect();
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
        let treatment: Vec<Vec<f64>> = (0..200)
            .map(|i| vec![((i % 2 == 1) || i % 3 == 0) as u8 as f64])
            .collect();
        let (t, m) = (
            paired_effect(&control, &treatment, 0.95),
            paired_effect_mover(&control, &treatment, 0.95),
        );
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
    struct SplitMix64(u64);

    impl SplitMix64 {
        fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        /// Uniform in [0, 1).
        fn uniform(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
        }
        /// Standard Normal by Box-Muller.
        fn normal(&mut self) -> f64 {
            let u1 = 1.0 - self.uniform(); // (0, 1]
            let u2 = self.uniform();
            (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        }
        fn bernoulli(&mut self, p: f64) -> f64 {
            if self.uniform() < p { 1.0 } else { 0.0 }
        }
    }

    fn logistic(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    fn logit(p: f64) -> f64 {
        (p / (1.0 - p)).ln()
    }

    /// `E[logistic(mu + sd Z)]`, `Z ~ N(0, 1)`, by the trapezoid rule on
    /// `[-12, 12]` (error far below anything the simulation can see).
    fn logit_normal_mean(mu: f64, sd: f64) -> f64 {
        let h = 0.005;
        let steps = (24.0 / h) as usize;
        let phi = |z: f64| (-0.5 * z * z).exp() / (std::f64::consts::TAU).sqrt();
        (0..=steps)
            .map(|i| {
                let z = -12.0 + i as f64 * h;
                let w = if i == 0 || i == steps { 0.5 } else { 1.0 };
                w * logistic(mu + sd * z) * phi(z)
            })
            .sum::<f64>()
            * h
    }

    // Simulation model (logit-normal task effects, so the trials of one task
    // are correlated through the task's rate):
    // * control rate of task t:   p_t = logistic(logit(base) + SIGMA_TASK z_t)
    // * treatment rate of task t: q_t = logistic(logit(p_t) + EFFECT + SIGMA_EFFECT w_t)
    //   (the effect itself varies by task)
    // * each arm runs `repeats` independent Bernoulli trials per task.
    // Tasks are drawn afresh in every replication.
    //
    // Estimands. Primary (asserted), conditional on the drawn tasks:
    //   pass rate  = (1/T) sum_t p_t,   difference = (1/T) sum_t (q_t - p_t).
    // Secondary (printed only), the population of tasks:
    //   pass rate  = E[p_t],            difference = E[q_t - p_t]
    // (computed by numerical integration).
    // A/A: a second control arm on the same p_t (true difference exactly 0 on
    // every task); "significant" means the paired t-test's p < 0.05, or, for
    // MOVER, an interval that excludes 0.
    const SIGMA_TASK: f64 = 1.0;
    const EFFECT: f64 = 0.5;
    const SIGMA_EFFECT: f64 = 0.5;
    const REPS: usize = 2000;

    /// Coverage counts, in the order t-rate, Wilson-rate, t-diff, MOVER-diff.
    #[derive(Default)]
    struct Row {
        base: f64,
        tasks: usize,
        repeats: usize,
        cover: [f64; 4],
        cover_pop: [f64; 4],
        aa_t: f64,
        aa_mover: f64,
        zero_se: f64,
    }

    fn simulate(rng: &mut SplitMix64, tasks: usize, repeats: usize, base: f64) -> Row {
        let pop_rate = logit_normal_mean(logit(base), SIGMA_TASK);
        let pop_diff =
            logit_normal_mean(logit(base) + EFFECT, SIGMA_TASK.hypot(SIGMA_EFFECT)) - pop_rate;
        let mut row = Row {
            base,
            tasks,
            repeats,
            ..Row::default()
        };
        let mut control = vec![Vec::with_capacity(repeats); tasks];
        let mut treatment = vec![Vec::with_capacity(repeats); tasks];
        let mut control2 = vec![Vec::with_capacity(repeats); tasks];
        let inside = |lo: f64, hi: f64, x: f64| (lo <= x && x <= hi) as u8 as f64;
        for _ in 0..REPS {
            let (mut true_rate, mut true_diff) = (0.0, 0.0);
            for t in 0..tasks {
                let lp = logit(base) + SIGMA_TASK * rng.normal();
                let p = logistic(lp);
                let q = logistic(lp + EFFECT + SIGMA_EFFECT * rng.normal());
                true_rate += p;
                true_diff += q - p;
                control[t].clear();
                treatment[t].clear();
                control2[t].clear();
                for _ in 0..repeats {
                    control[t].push(rng.bernoulli(p));
                    treatment[t].push(rng.bernoulli(q));
                    control2[t].push(rng.bernoulli(p));
                }
            }
            true_rate /= tasks as f64;
            true_diff /= tasks as f64;

            let t_rate = pass_rate(&control, 0.95);
            let w_rate = pass_rate_wilson(&control, 0.95);
            let t_diff = paired_effect(&control, &treatment, 0.95);
            let m_diff = paired_effect_mover(&control, &treatment, 0.95);
            let bounds = [
                (t_rate.lo, t_rate.hi),
                (w_rate.lo, w_rate.hi),
                (t_diff.lo, t_diff.hi),
                (m_diff.lo, m_diff.hi),
            ];
            for (i, &(lo, hi)) in bounds.iter().enumerate() {
                let (truth, pop) = if i < 2 {
                    (true_rate, pop_rate)
                } else {
                    (true_diff, pop_diff)
                };
                row.cover[i] += inside(lo, hi, truth);
                row.cover_pop[i] += inside(lo, hi, pop);
            }
            row.zero_se += (t_rate.se == 0.0) as u8 as f64;

            let aa_t = paired_effect(&control, &control2, 0.95);
            row.aa_t += (aa_t.p_value < 0.05) as u8 as f64;
            let aa_m = paired_effect_mover(&control, &control2, 0.95);
            row.aa_mover += 1.0 - inside(aa_m.lo, aa_m.hi, 0.0);
        }
        let r = REPS as f64;
        row.cover
            .iter_mut()
            .chain(row.cover_pop.iter_mut())
            .for_each(|c| *c /= r);
        row.aa_t /= r;
        row.aa_mover /= r;
        row.zero_se /= r;
        row
    }

    /// Coverage of the 95% intervals over task counts, repeats and base rates
    /// near 0, 0.5 and 1 with correlated (logit-normal) tasks; A/A false
    /// positive rates. Run with `--nocapture` to see the table.
    ///
    /// Asserted in every scenario: the score-type intervals
    /// ([`pass_rate_wilson`], [`paired_effect_mover`]) cover the conditional
    /// estimand in at least 93% of replications, and A/A comparisons are
    /// significant in at most `0.05 + 3 sqrt(0.05 * 0.95 / REPS)`.
    ///
    /// The t intervals ([`pass_rate`], [`paired_effect`]) are asserted only at
    /// base rate 0.5: near 0 and 1 with few tasks/trials they are known to
    /// under-cover (zero-width intervals when every task mean is equal), and
    /// the table shows by how much (rows marked `<`).
    #[test]
    fn coverage_simulation() {
        let mut rng = SplitMix64(0x5EED_AB1A_7E00_0001);
        let aa_limit = 0.05 + 3.0 * (0.05 * 0.95 / REPS as f64).sqrt();
        let mut rows = Vec::new();
        for &base in &[0.05, 0.5, 0.95] {
            for &tasks in &[10, 30, 100] {
                for &repeats in &[1, 3, 5] {
                    rows.push(simulate(&mut rng, tasks, repeats, base));
                }
            }
        }
        println!(
            "coverage_simulation: {REPS} replications per row; task rates logit-normal \
             (logit(base) + N(0, {SIGMA_TASK}^2)); treatment +{EFFECT} logit (task sd {SIGMA_EFFECT})"
        );
        println!(
            "coverage of 95% intervals: conditional estimand (mean over the drawn tasks) [population estimand]"
        );
        println!(
            "{:>4} {:>5} {:>3} | {:^13} {:^13} | {:^13} {:^13} | {:>6} {:>7} | {:>6}",
            "base",
            "tasks",
            "rep",
            "rate t",
            "rate Wilson",
            "diff t",
            "diff MOVER",
            "A/A t",
            "A/A MOV",
            "P(se=0)"
        );
        let mark = |c: f64| if c < 0.93 { '<' } else { ' ' };
        for r in &rows {
            let cell = |i: usize| {
                format!(
                    "{:.3}{}[{:.3}]",
                    r.cover[i],
                    mark(r.cover[i]),
                    r.cover_pop[i]
                )
            };
            println!(
                "{:4.2} {:5} {:3} | {} {} | {} {} | {:6.3} {:7.3} | {:6.3}",
                r.base,
                r.tasks,
                r.repeats,
                cell(0),
                cell(1),
                cell(2),
                cell(3),
                r.aa_t,
                r.aa_mover,
                r.zero_se
            );
        }
        println!("'<' marks conditional coverage below 0.93; A/A limit {aa_limit:.4}");

        let mut failures = Vec::new();
        for r in &rows {
            let name = format!("base {} T {} r {}", r.base, r.tasks, r.repeats);
            let asserted: &[usize] = if r.base == 0.5 {
                &[0, 1, 2, 3]
            } else {
                &[1, 3]
            };
            for &i in asserted {
                if r.cover[i] < 0.93 {
                    failures.push(format!("{name}: coverage[{i}] = {:.3}", r.cover[i]));
                }
            }
            if r.aa_t > aa_limit || r.aa_mover > aa_limit {
                failures.push(format!(
                    "{name}: A/A rejections t {:.3}, MOVER {:.3}",
                    r.aa_t, r.aa_mover
                ));
            }
        }
        assert!(failures.is_empty(), "scenarios failing: {failures:#?}");
    }
}
