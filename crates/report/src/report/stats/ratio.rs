//! What a comparison costs and how reliably an arm passes, with task-clustered
//! intervals: ratios of means (the tokens, money, time or steps of one arm
//! against another's; the spend per solved task), and pass^k and the
//! consistency score, per arm and paired between arms.

use super::*;

/// An estimate and its two-sided interval (NaN where there is none).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Span {
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Span {
    pub const NONE: Span = Span { estimate: f64::NAN, lo: f64::NAN, hi: f64::NAN };

    /// The paired t interval's difference (`paired_effect`) as a span.
    pub(crate) fn of_paired(p: &Paired) -> Span {
        Span { estimate: p.mean_diff, lo: p.lo, hi: p.hi }
    }
}

/// `R = prod_j mean(x_j)^{s_j}` over `T` tasks, where `terms[j] = (s_j, x_j)`,
/// `s_j` is `+1` or `-1` and `x_j[t]` is task `t`'s value of term `j` (every
/// term lists the same tasks in the same order), with the interval of `log R`
/// by linearisation (the delta method for a ratio of means, with the task as
/// the cluster; Cochran 1977, *Sampling Techniques*, 3rd ed., §6.4 and
/// §11.8):
///
/// * `z_t = sum_j s_j x_j[t] / mean(x_j)`, the linearised `log R` of task `t`;
/// * `se = sample_sd(z) / sqrt(T)`, so the covariance of paired terms (one
///   arm's and the other's tokens on the same task) enters through `z`;
/// * `[lo, hi] = R exp(∓ t_{1-(1-conf)/2, T-1} se)`: the interval of
///   `log R`, back on the ratio's scale (never below 0, asymmetric as a
///   ratio's is).
///
/// NaN bounds with fewer than 2 tasks; a NaN estimate too when a mean is not
/// above 0 (a ratio to no spend, or a spend per solved task where none was
/// solved).
pub(crate) fn log_linear(terms: &[(f64, &[f64])], conf: f64) -> Span {
    let Some((estimate, n)) = log_linear_estimate(terms) else { return Span::NONE };
    if n < 2 || !is_open_unit(conf) {
        return Span { estimate, ..Span::NONE };
    }
    let (log_r, se) = log_linear_at(terms, &vec![1.0; n]);
    let half = t_two_sided(conf, (n - 1) as f64) * se;
    Span { estimate, lo: (log_r - half).exp(), hi: (log_r + half).exp() }
}

/// [`log_linear`]'s estimate with the studentized bootstrap interval of
/// `log R` ([`bootstrap_t`]) from [`BOOTSTRAP_FROM_TASKS`] tasks on, the delta
/// method's below: it follows the skew of heavy-tailed spends, which the t
/// interval does not (docs/statistics.md, "Costs and reliability"). The tasks
/// are resampled in the order of their values (term by term), so the
/// interval is the same whatever the tasks are called or the order they ran in.
pub(crate) fn log_linear_bootstrap(terms: &[(f64, &[f64])], conf: f64) -> Span {
    let Some((estimate, n)) = log_linear_estimate(terms) else { return Span::NONE };
    if n < BOOTSTRAP_FROM_TASKS || !is_open_unit(conf) {
        return log_linear(terms, conf);
    }
    // The tasks in an order of their values alone, so the resamples do not
    // depend on the tasks' names or the order they ran in.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| {
        terms.iter().map(|(_, x)| x[a].total_cmp(&x[b])).find(|o| o.is_ne()).unwrap_or(a.cmp(&b))
    });
    let sorted: Vec<Vec<f64>> =
        terms.iter().map(|(_, x)| order.iter().map(|&t| x[t]).collect()).collect();
    let terms: Vec<(f64, &[f64])> =
        terms.iter().zip(&sorted).map(|((s, _), x)| (*s, x.as_slice())).collect();
    let (lo, hi) = bootstrap_t(n, conf, |w| log_linear_at(&terms, w));
    Span { estimate, lo: lo.exp(), hi: hi.exp() }
}

/// The tasks from which [`log_linear_bootstrap`] resamples (below them a
/// resample too often repeats one task).
pub(crate) const BOOTSTRAP_FROM_TASKS: usize = 10;

/// `R` and the number of tasks; None when there are none or a mean is not above 0.
fn log_linear_estimate(terms: &[(f64, &[f64])]) -> Option<(f64, usize)> {
    let n = terms.first().map_or(0, |(_, x)| x.len());
    assert!(terms.iter().all(|(_, x)| x.len() == n), "log_linear: every term lists the same tasks");
    let means: Vec<f64> = terms.iter().map(|(_, x)| mean(x)).collect();
    if n == 0 || means.iter().any(|&m| !(m > 0.0 && m.is_finite())) {
        return None;
    }
    Some((terms.iter().zip(&means).map(|((s, _), m)| s * m.ln()).sum::<f64>().exp(), n))
}

/// `log R` and its linearised standard error with task `t` counted `w[t]` times.
fn log_linear_at(terms: &[(f64, &[f64])], w: &[f64]) -> (f64, f64) {
    let n = w.len();
    let m: Vec<f64> = terms.iter().map(|(_, x)| weighted_mean(x, w)).collect();
    if m.iter().any(|&m| m.is_nan() || m <= 0.0) {
        return (f64::NAN, f64::NAN);
    }
    let log_r: f64 = terms.iter().zip(&m).map(|((s, _), m)| s * m.ln()).sum();
    let z: Vec<f64> =
        (0..n).map(|t| terms.iter().zip(&m).map(|((s, x), m)| s * x[t] / m).sum()).collect();
    (log_r, weighted_sd(&z, w) / (n as f64).sqrt())
}

/// The ratio treatment / control of the mean over tasks of a per-task
/// value (tokens per trial, say), paired by task ([`log_linear_bootstrap`]).
pub(crate) fn ratio_of_means(control: &[f64], treatment: &[f64], conf: f64) -> Span {
    log_linear_bootstrap(&[(1.0, treatment), (-1.0, control)], conf)
}

/// Spend per solved task: the arm's whole spend over its passes, failed
/// trials' spend included, as a ratio estimator over tasks: `spend[t]` and
/// `solved[t]` are task `t`'s totals. [`log_linear_bootstrap`] when the arm
/// solved [`BOOTSTRAP_FROM_PASSES`] or more, else [`log_linear`] (with few
/// passes a resample often holds none, and the delta method covers better).
pub fn per_solved(spend: &[f64], solved: &[f64], conf: f64) -> Span {
    let terms = [(1.0, spend), (-1.0, solved)];
    if solved.iter().sum::<f64>() >= BOOTSTRAP_FROM_PASSES {
        log_linear_bootstrap(&terms, conf)
    } else {
        log_linear(&terms, conf)
    }
}

/// The passes an arm needs for [`per_solved`]'s bootstrap.
pub(crate) const BOOTSTRAP_FROM_PASSES: f64 = 10.0;

/// The ratio treatment / control of the spend per solved task, paired by
/// task; bootstrap or delta method as [`per_solved`], by the arm with fewer passes.
pub(crate) fn per_solved_ratio(
    control: (&[f64], &[f64]),
    treatment: (&[f64], &[f64]),
    conf: f64,
) -> Span {
    let terms = [(1.0, treatment.0), (-1.0, treatment.1), (-1.0, control.0), (1.0, control.1)];
    let fewest = control.1.iter().sum::<f64>().min(treatment.1.iter().sum());
    if fewest >= BOOTSTRAP_FROM_PASSES {
        log_linear_bootstrap(&terms, conf)
    } else {
        log_linear(&terms, conf)
    }
}

/// The mean over tasks of the per-task differences `treatment - control` of
/// per-task values (a spend's task means, a metric's), with the paired t
/// interval ([`paired_effect`], each task's value its one observation).
pub(crate) fn mean_difference(control: &[f64], treatment: &[f64], conf: f64) -> Span {
    Span::of_paired(&paired_effect(&one_each(control), &one_each(treatment), conf))
}

/// Each task's value as its one observation.
fn one_each(values: &[f64]) -> Vec<Vec<f64>> {
    values.iter().map(|&v| vec![v]).collect()
}

/// Resamples of [`bootstrap_t`].
pub(crate) const BOOTSTRAP_RESAMPLES: usize = 1999;

/// The studentized (bootstrap-t) interval of a statistic of `n` tasks
/// (Efron & Tibshirani 1993, *An Introduction to the Bootstrap*, §12.5; Hall
/// 1992, *The Bootstrap and Edgeworth Expansion*, §3.5: second-order accurate
/// where the t interval is first-order, so it follows the skew of heavy-tailed
/// spends). `stat(w)` gives the estimate and its standard error with task `t`
/// counted `w[t]` times; the tasks are resampled with replacement
/// [`BOOTSTRAP_RESAMPLES`] times from a seed fixed by `n` (the interval
/// depends on the data alone), `T* = (est* - est) / se*`, and the interval is
/// `[est - q_{1-a/2}(T*) se, est - q_{a/2}(T*) se]`. Resamples whose standard
/// error is 0 (one task drawn every time) are left out.
pub(crate) fn bootstrap_t(n: usize, conf: f64, stat: impl Fn(&[f64]) -> (f64, f64)) -> (f64, f64) {
    let (est, se) = stat(&vec![1.0; n]);
    if !(est.is_finite() && se.is_finite()) {
        return (f64::NAN, f64::NAN);
    }
    if se == 0.0 {
        return (est, est);
    }
    let mut rng = SplitMix64(0xB007_5742_0000_0000 ^ n as u64);
    let mut w = vec![0.0; n];
    let mut ts = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        w.iter_mut().for_each(|x| *x = 0.0);
        for _ in 0..n {
            w[(rng.next_u64() % n as u64) as usize] += 1.0;
        }
        let (e, s) = stat(&w);
        if e.is_finite() && s > 0.0 {
            ts.push((e - est) / s);
        }
    }
    if ts.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    ts.sort_by(f64::total_cmp);
    let a = (1.0 - conf) / 2.0;
    let q = |p: f64| ts[((p * (ts.len() + 1) as f64).round() as usize).clamp(1, ts.len()) - 1];
    (est - q(1.0 - a) * se, est - q(a) * se)
}

fn weighted_mean(x: &[f64], w: &[f64]) -> f64 {
    let total: f64 = w.iter().sum();
    x.iter().zip(w).map(|(x, w)| x * w).sum::<f64>() / total
}

/// The sample standard deviation with task `t` counted `w[t]` times;
/// exactly 0 when the tasks counted have no spread ([`no_spread`]).
fn weighted_sd(x: &[f64], w: &[f64]) -> f64 {
    let counted: Vec<f64> = x.iter().zip(w).filter(|(_, w)| **w > 0.0).map(|(x, _)| *x).collect();
    if no_spread(&counted) {
        return 0.0;
    }
    let total: f64 = w.iter().sum();
    let m = weighted_mean(x, w);
    let ss: f64 = x.iter().zip(w).map(|(x, w)| w * (x - m).powi(2)).sum();
    (ss / (total - 1.0)).max(0.0).sqrt()
}

/// The consistency score at `k` of a task with `c` passes in `n` trials: the
/// unbiased estimate of the probability that `k` of its trials, drawn without
/// replacement, all agree (all pass or all fail): `pass^k` of the passes plus
/// `pass^k` of the failures. NaN when `k > n`.
pub(crate) fn consistency_k(n: u64, c: u64, k: u64) -> f64 {
    if k > n { f64::NAN } else { pass_hat_k(n, c, k) + pass_hat_k(n, n - c, k) }
}

/// The mean over tasks of a per-task value in `[0, 1]` (pass^k, the
/// consistency score), with the Wilson interval over the tasks: a value in
/// `[0, 1]` with mean `p` has variance at most `p (1 - p)`, so Wilson's score
/// interval on `T` tasks (with the t adjustment of [`pass_rate_wilson`]) is
/// conservative for it and, unlike the t interval, does not collapse when
/// every task has the same value.
pub(crate) fn bounded_mean(values: &[f64], conf: f64) -> Span {
    let e = pass_rate_wilson(&one_each(values), conf);
    Span { estimate: e.mean, lo: e.lo, hi: e.hi }
}

/// The paired difference treatment - control of per-task values in `[0, 1]`
/// (pass^k of two arms on the same tasks): MOVER over the arms'
/// [`bounded_mean`] intervals and the correlation of their values
/// ([`paired_effect_mover`], each task's value its one observation).
pub(crate) fn bounded_paired(control: &[f64], treatment: &[f64], conf: f64) -> Span {
    let p = paired_effect_mover(&one_each(control), &one_each(treatment), conf);
    Span { estimate: p.mean_diff, lo: p.lo, hi: p.hi }
}
