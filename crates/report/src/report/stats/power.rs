//! Power, sample size and the one-sided bounds the gates use.

use super::*;

// ---------------------------------------------------------------------------
// Power and gates
// ---------------------------------------------------------------------------

/// `t_{1-alpha/2, df} + t_{power, df}`, or `NaN` for invalid levels.
pub(super) fn t_sum(alpha: f64, power: f64, df: f64) -> f64 {
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
/// [`sign_flip_min_tasks`]`(alpha)`, below which the report's sign-flip test
/// cannot reject at all, nor fewer than 2.
///
/// Returns `None` when `var_d` is negative or not finite, `delta` is zero or
/// not finite, or `alpha`/`power` are not in `(0, 1)`.
pub(crate) fn sample_size_paired(var_d: f64, delta: f64, alpha: f64, power: f64) -> Option<u64> {
    if !var_d.is_finite()
        || var_d < 0.0
        || !delta.is_finite()
        || delta == 0.0
        || !is_open_unit(alpha)
        || !is_open_unit(power)
    {
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
pub(crate) fn min_detectable_effect(var_d: f64, n: u64, alpha: f64, power: f64) -> f64 {
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
#[cfg(test)]
pub(crate) fn one_sided_bounds(diffs_per_task: &[f64], alpha: f64) -> (f64, f64) {
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
