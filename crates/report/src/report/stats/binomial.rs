//! Intervals for independent trials (Wilson, Clopper-Pearson) and the pass@k / pass^k estimators.

use super::*;
use statrs::distribution::{Beta, ContinuousCDF};

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
pub(crate) fn clopper_pearson(successes: u64, n: u64, conf: f64) -> (f64, f64) {
    if n == 0 || successes > n || !is_open_unit(conf) {
        return (f64::NAN, f64::NAN);
    }
    let alpha = 1.0 - conf;
    let (x, nf) = (successes as f64, n as f64);
    let lo = if successes == 0 {
        0.0
    } else {
        Beta::new(x, nf - x + 1.0).expect("positive shapes").inverse_cdf(alpha / 2.0)
    };
    let hi = if successes == n {
        1.0
    } else {
        Beta::new(x + 1.0, nf - x).expect("positive shapes").inverse_cdf(1.0 - alpha / 2.0)
    };
    (lo, hi)
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
