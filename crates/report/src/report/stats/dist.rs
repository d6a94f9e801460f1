//! Distribution helpers (Normal and Student-t quantiles) and descriptive statistics.

use super::*;
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

// ---------------------------------------------------------------------------
// Distribution helpers
// ---------------------------------------------------------------------------

pub(super) fn std_normal() -> Normal {
    Normal::new(0.0, 1.0).expect("N(0, 1) is a valid distribution")
}

pub(super) fn is_open_unit(p: f64) -> bool {
    p > 0.0 && p < 1.0
}

/// Quantile (inverse CDF) of the standard Normal distribution at `p`.
///
/// Method: statrs `Normal::inverse_cdf`, i.e. `-sqrt(2) * erfc_inv(2p)` with
/// the Boost-style rational approximations of the inverse error function.
/// `normal_quantile(0.975) = 1.959963984540054`.
///
/// Returns `NaN` unless `0 < p < 1`.
pub(crate) fn normal_quantile(p: f64) -> f64 {
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
/// incomplete beta), which stays accurate far in the tail; for `df > 1e4`
/// (the statrs t routines misbehave at very large `df`, see [`t_quantile`])
/// the inverse of [`t_quantile`]'s Cornish-Fisher expansion: the Normal tail
/// at the `z` whose expansion is `x` (found by Newton's method), so that
/// `t_sf(t_quantile(p, df), df) = 1 - p` on both sides of the switch. Its
/// relative error at `df = 2e4` is below `1e-6` out to `x = 5` (mpmath's
/// incomplete beta at 40 digits), where the plain Normal tail was off by
/// `7e-6` absolute at `x = 1.96` and by 0.8% at `x = 5`.
///
/// Returns `NaN` if `x` is `NaN` or `df` is not positive.
pub(crate) fn t_sf(x: f64, df: f64) -> f64 {
    if x.is_nan() || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if df > T_NORMAL_DF {
        // The Normal deviate whose t quantile (the expansion of `t_quantile`) is `x`, by Newton
        // from `z = x` (the expansion rises with `z`), then its Normal tail.
        let mut z = x;
        for _ in 0..8 {
            let (z2, z3) = (z * z, z * z * z);
            let f = z
                + (z3 + z) / (4.0 * df)
                + (5.0 * z3 * z2 + 16.0 * z3 + 3.0 * z) / (96.0 * df * df)
                - x;
            let slope = 1.0
                + (3.0 * z2 + 1.0) / (4.0 * df)
                + (25.0 * z2 * z2 + 48.0 * z2 + 3.0) / (96.0 * df * df);
            z -= f / slope;
        }
        return std_normal().sf(z);
    }
    StudentsT::new(0.0, 1.0, df).expect("df > 0 gives a valid Student t").sf(x)
}

/// Two-sided critical value `q_{1 - (1-conf)/2}` of Student's t on `df`.
pub(super) fn t_two_sided(conf: f64, df: f64) -> f64 {
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

/// Values closer than this count as equal: per-task means are ratios of
/// trial counts (two distinct ones differ by at least `1/(n1 n2)`, far above
/// this), while averaging equal values can leave a float error near `1e-16`
/// (14 tasks all at 6/10 gave a variance of about `1e-33`, not 0).
pub(crate) const SPREAD_TOLERANCE: f64 = 1e-12;

/// Whether `xs` have no spread: their range is at most [`SPREAD_TOLERANCE`].
/// Every "all alike" decision of the statistics goes through this, never `== 0.0`
/// on a computed variance.
pub(crate) fn no_spread(xs: &[f64]) -> bool {
    let (lo, hi) =
        xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    hi - lo <= SPREAD_TOLERANCE
}

/// Sample standard deviation with Bessel's correction,
/// `sqrt(sum((x - mean)^2) / (n - 1))`, computed in two passes (mean first)
/// for numerical stability.
///
/// Exactly 0 when the values have no spread ([`no_spread`]).
///
/// Policy for `n < 2`: returns `NaN`. One observation carries no information
/// about spread; returning `0` would make every downstream interval look
/// perfectly certain.
pub(crate) fn sample_sd(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return f64::NAN;
    }
    if no_spread(xs) {
        return 0.0;
    }
    let m = mean(xs);
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    (ss / (xs.len() - 1) as f64).sqrt()
}
