//! One inference per comparison: the exact sign-flip test and its inverted
//! interval, Newcombe for one task, McNemar, Holm.

use super::*;
use statrs::distribution::ContinuousCDF;
use statrs::function::factorial::ln_binomial;

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
pub(super) fn inverted_p_value(interval: impl Fn(f64) -> (f64, f64)) -> f64 {
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
    pub method: InferenceMethod,
}

/// Which inference [`paired_inference`] used; written (serialised) under
/// its `name`, the one records and exports have always held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InferenceMethod {
    /// No task in both arms: nothing to infer.
    None,
    /// One task: Newcombe over its trials.
    NewcombeOneTask,
    /// Tasks as the unit: the exact sign-flip test (all sign patterns) and MOVER.
    SignFlipExactMover,
    /// Tasks as the unit: the sign-flip test's Normal approximation (many tasks) and MOVER.
    SignFlipNormalMover,
}

impl InferenceMethod {
    /// The name written in records and exports.
    pub fn name(self) -> &'static str {
        match self {
            InferenceMethod::None => "none",
            InferenceMethod::NewcombeOneTask => "newcombe_one_task",
            InferenceMethod::SignFlipExactMover => "sign_flip_exact+mover",
            InferenceMethod::SignFlipNormalMover => "sign_flip_normal+mover",
        }
    }

    /// The method in words, for reports.
    pub fn words(self) -> &'static str {
        match self {
            InferenceMethod::None => "none",
            InferenceMethod::NewcombeOneTask => "Newcombe, one task",
            InferenceMethod::SignFlipExactMover => "exact sign-flip + MOVER",
            InferenceMethod::SignFlipNormalMover => "sign-flip (Normal) + MOVER",
        }
    }
}

impl std::fmt::Display for InferenceMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for InferenceMethod {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
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
        return Inference { mean_diff, lo: f64::NAN, hi: f64::NAN, p_value: f64::NAN, n_tasks, method: InferenceMethod::None };
    }
    if n_tasks == 1 {
        let (c, t) = pairs[0];
        let count = |v: &Vec<f64>| v.iter().sum::<f64>();
        let (x1, n1, x2, n2) = (count(c), c.len() as f64, count(t), t.len() as f64);
        let (lo, hi) = newcombe_unpaired(x1, n1, x2, n2, conf);
        let p_value = inverted_p_value(|cf| newcombe_unpaired(x1, n1, x2, n2, cf));
        return Inference { mean_diff, lo, hi, p_value, n_tasks, method: InferenceMethod::NewcombeOneTask };
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
    let method = if sf.exact { InferenceMethod::SignFlipExactMover } else { InferenceMethod::SignFlipNormalMover };
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
