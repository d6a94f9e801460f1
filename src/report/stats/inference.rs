//! One inference per comparison: the sign-flip test (`sign_flip.rs`) and
//! MOVER, Newcombe for one task, McNemar, Holm.

use super::*;
use statrs::function::factorial::ln_binomial;

// ---------------------------------------------------------------------------
// One inference per comparison
// ---------------------------------------------------------------------------

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
    /// Tasks as the unit: the exact sign-flip test (every subset, or the lattice of the differences) and MOVER.
    SignFlipExactMover,
    /// Tasks as the unit: the sign-flip test by seeded Monte Carlo (fractional scores off a small lattice) and MOVER.
    SignFlipMonteCarloMover,
}

impl InferenceMethod {
    /// The name written in records and exports.
    pub fn name(self) -> &'static str {
        match self {
            InferenceMethod::None => "none",
            InferenceMethod::NewcombeOneTask => "newcombe_one_task",
            InferenceMethod::SignFlipExactMover => "sign_flip_exact+mover",
            InferenceMethod::SignFlipMonteCarloMover => "sign_flip_monte_carlo+mover",
        }
    }

    /// The method in words, for reports.
    pub fn words(self) -> &'static str {
        match self {
            InferenceMethod::None => "none",
            InferenceMethod::NewcombeOneTask => "Newcombe, one task",
            InferenceMethod::SignFlipExactMover => "exact sign-flip + MOVER",
            InferenceMethod::SignFlipMonteCarloMover => "Monte Carlo sign-flip + MOVER",
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
    let method = if sf.exact { InferenceMethod::SignFlipExactMover } else { InferenceMethod::SignFlipMonteCarloMover };
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
