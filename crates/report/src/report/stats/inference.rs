//! One inference per comparison: the sign-flip test (`sign_flip.rs`) and
//! MOVER, Newcombe for one task, McNemar.

use super::*;
#[cfg(test)]
use statrs::function::factorial::ln_binomial;
use std::borrow::Cow;

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
    /// the interval excludes 0 (up to the bisection's `1e-12`). With 2 tasks
    /// or more, the p-value of the method's [`SignFlipTest`].
    pub p_value: f64,
    /// With 2 tasks or more, both sign-flip p-values (each the larger of the
    /// test's and the floor's), whichever the verdict reads; NaN otherwise.
    pub p_mid: f64,
    pub p_exact: f64,
    pub n_tasks: usize,
    pub method: InferenceMethod,
}

/// Which inference [`paired_inference`] used; written (serialised) under
/// its `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InferenceMethod {
    /// No task in both arms: nothing to infer.
    None,
    /// One task: Newcombe over its trials.
    NewcombeOneTask,
    /// Tasks as the unit: the sign-flip test on the per-task differences,
    /// exact (every subset, or the lattice of the differences) or by seeded
    /// Monte Carlo, with the floor its interval needed (see [`SpreadFloor`]).
    SignFlip { exact: bool, floor: SpreadFloor, test: SignFlipTest },
    /// A sequential run: the anytime-valid betting confidence sequence at the
    /// stopping time (`ablate_core::sequential`), for tasks like these, or without
    /// replacement for these tasks once every task entered. No p-value.
    BettingCs { without_replacement: bool },
}

/// The floor under the sign-flip interval's width (which shrinks to a point
/// when every task moved by the same amount); see [`paired_inference`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpreadFloor {
    /// One trial a task (or no trial noise), and the differences have
    /// spread: the sign-flip test alone.
    None,
    /// Every task has 2 trials or more in each arm and the trials vary: the
    /// hull with the t interval whose variance is the differences' trial noise.
    TrialNoise,
    /// No trial noise to go by and no spread among the differences: the
    /// hull with the MOVER score interval.
    Mover,
}

impl InferenceMethod {
    /// The name written in records and exports: `sign_flip` (the exact test,
    /// ties counted whole) or `sign_flip_mid_p`, then `_monte_carlo` when
    /// drawn, then the floor's `+trial_noise` or `+mover`.
    pub fn name(self) -> String {
        match self {
            InferenceMethod::None => "none".into(),
            InferenceMethod::NewcombeOneTask => "newcombe_one_task".into(),
            InferenceMethod::SignFlip { exact, floor, test } => format!(
                "sign_flip{}{}{}",
                if test == SignFlipTest::MidP { "_mid_p" } else { "" },
                if exact { "" } else { "_monte_carlo" },
                match floor {
                    SpreadFloor::None => "",
                    SpreadFloor::TrialNoise => "+trial_noise",
                    SpreadFloor::Mover => "+mover",
                }
            ),
            InferenceMethod::BettingCs { without_replacement: false } => "betting_cs".into(),
            InferenceMethod::BettingCs { without_replacement: true } => {
                "betting_cs_without_replacement".into()
            }
        }
    }

    /// The method in words, for reports.
    pub fn words(self) -> String {
        match self {
            InferenceMethod::None => "none".into(),
            InferenceMethod::NewcombeOneTask => "Newcombe, one task".into(),
            InferenceMethod::SignFlip { exact, floor, test } => format!(
                "{} {}{}",
                if exact { "exact" } else { "Monte Carlo" },
                match test {
                    SignFlipTest::MidP => "mid-p sign-flip",
                    SignFlipTest::Exact => "sign-flip test (ties whole)",
                },
                match floor {
                    SpreadFloor::None => "",
                    SpreadFloor::TrialNoise => ", trial-noise t floor",
                    SpreadFloor::Mover => " + MOVER (no spread)",
                }
            ),
            InferenceMethod::BettingCs { without_replacement: false } => {
                "anytime-valid betting confidence sequence".into()
            }
            InferenceMethod::BettingCs { without_replacement: true } => {
                "anytime-valid betting confidence sequence, without replacement".into()
            }
        }
    }
}

impl std::fmt::Display for InferenceMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl serde::Serialize for InferenceMethod {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

/// The paired comparison reported for every ablation: tasks are the unit.
///
/// * `T >= 2` tasks: the [`sign_flip`] test on the per-task differences
///   `d_t` and the interval that inverts it. Studentizing changes nothing
///   here: under sign flips `sum d_t^2` is fixed, and the one-sample t
///   statistic is an increasing function of `sum d_t`, so the permutation
///   t-test *is* this test (`permutation_t_is_the_sign_flip_test`); the
///   power grid (`simulation_power_grid`) compares it with the paired t-test.
/// * The sign-flip interval knows only the spread the `d_t` show: when they
///   show little or none (every task moved alike), it shrinks towards a
///   point, though each `d_t` carries its trials' noise. So it has a floor,
///   and the reported interval is the hull of the two, the p-value the
///   larger of the two tests' (both must reject):
///   - when every task has at least 2 trials in each arm and the trials
///     vary ([`SpreadFloor::TrialNoise`]), always: the t interval
///     `d ± t_{T-1} sqrt(f / T)` whose variance `f` is the floor of
///     [`trial_noise_floor_factor`]: the trial noise of the differences,
///     `v = mean_t(s2_ct / n_ct + s2_tt / n_tt)` (the variance the `d_t`
///     would show from trial noise alone, were the tasks' true effects
///     identical), times the 2.5% quantile of `chi2_{T-1} / (T - 1)`.
///     Applied always, not only at zero spread, so that a little more
///     spread never narrows the interval (13 tasks 6/10 -> 6/10 and one
///     6/10 -> 7/10 would otherwise be "equivalent within ±5 pp" on a
///     sign-flip interval of [0, +2] pp);
///   - otherwise, when the `d_t` have no spread at all ([`no_spread`]):
///     the MOVER score interval of [`paired_effect_mover`];
///   - otherwise the sign-flip test alone ([`SpreadFloor::None`]).
/// * `T = 1`: [`newcombe_unpaired`] over the task's trials (independent
///   trials of one task), labelled as speaking for that task only.
/// * `T = 0`: NaN, method `none`.
///
/// # Panics
/// If the arms list different numbers of tasks (caller bug).
pub fn paired_inference(control: &[Vec<f64>], treatment: &[Vec<f64>], conf: f64) -> Inference {
    paired_inference_by(control, treatment, conf, SignFlipTest::MidP)
}

/// [`paired_inference`] with the interval and the p-value of `test`.
pub(crate) fn paired_inference_by(
    control: &[Vec<f64>],
    treatment: &[Vec<f64>],
    conf: f64,
    test: SignFlipTest,
) -> Inference {
    assert_eq!(
        control.len(),
        treatment.len(),
        "paired_inference: both arms must list the same tasks"
    );
    let tasks = PairedTasks::of(control, treatment);
    let n_tasks = tasks.d.len();
    let mean_diff = mean(&tasks.d);
    if n_tasks == 0 || !is_open_unit(conf) {
        return Inference {
            mean_diff,
            lo: f64::NAN,
            hi: f64::NAN,
            p_value: f64::NAN,
            p_mid: f64::NAN,
            p_exact: f64::NAN,
            n_tasks,
            method: InferenceMethod::None,
        };
    }
    if n_tasks == 1 {
        let (c, t) = (&tasks.control[0], &tasks.treatment[0]);
        let count = |v: &Vec<f64>| v.iter().sum::<f64>();
        let (x1, n1, x2, n2) = (count(c), c.len() as f64, count(t), t.len() as f64);
        let (lo, hi) = newcombe_unpaired(x1, n1, x2, n2, conf);
        let p_value = inverted_p_value(|cf| newcombe_unpaired(x1, n1, x2, n2, cf));
        return Inference {
            mean_diff,
            lo,
            hi,
            p_value,
            p_mid: f64::NAN,
            p_exact: f64::NAN,
            n_tasks,
            method: InferenceMethod::NewcombeOneTask,
        };
    }
    let sf = sign_flip_by(&tasks.d, conf, test);
    let floor = tasks.floor();
    let (lo, hi) = floor.widen((sf.lo, sf.hi), conf);
    let floor_p = floor.p_value();
    let (p_value, p_mid, p_exact) =
        (sf.p_value.max(floor_p), sf.p_mid.max(floor_p), sf.p_exact.max(floor_p));
    let method = InferenceMethod::SignFlip { exact: sf.exact, floor: floor.kind(), test };
    Inference { mean_diff, lo, hi, p_value, p_mid, p_exact, n_tasks, method }
}

/// Only the p-value of [`paired_inference_by`], the same number, without the
/// interval's inversion (the sign flip's tails alone where the differences
/// lie on a lattice): what orders a family before each comparison's level is
/// known (`stats::holm`).
pub(crate) fn paired_p(control: &[Vec<f64>], treatment: &[Vec<f64>], test: SignFlipTest) -> f64 {
    let tasks = PairedTasks::of(control, treatment);
    if tasks.d.len() < 2 {
        return paired_inference_by(control, treatment, 0.95, test).p_value;
    }
    sign_flip_p_by(&tasks.d, test).max(tasks.floor().p_value())
}

/// The orders of the tasks [`paired_equivalent`] averages its bettors' capital over.
pub(crate) const EQUIVALENCE_ORDERS: usize = 100;

/// Mixed into the seed of [`paired_equivalent`]'s orders, so that they are
/// not the stream of any other draw made from the same seed.
pub(crate) const EQUIVALENCE_STREAM: u64 = 0x0E9A_1E0C_0DE5_0001;

/// Whether the mean difference over the population of tasks like these is
/// shown to lie inside `(-margin, +margin)`: two one-sided tests, each at
/// `alpha`, of "the difference is `-margin` or less" and "`+margin` or more",
/// each by betting (Waudby-Smith & Ramdas 2024; `sequential::betting`), and
/// a function of the differences and `seed` alone, whatever the tasks' order
/// or names:
///
/// * the differences are sorted, then put in [`EQUIVALENCE_ORDERS`] orders
///   drawn uniformly at random from `seed` (Fisher-Yates on
///   `SplitMix64(seed ^ EQUIVALENCE_STREAM)`, each order from the sorted list);
/// * in each order the two bettors bet against the margins with bets sized
///   for this many tasks, and their final capitals are kept;
/// * a margin is rejected when its bettor's capital, **averaged over the
///   orders**, reaches `1 / alpha`.
///
/// Why it holds: for tasks drawn independently from one population, the
/// sorted differences put in a uniformly random order are distributed as the
/// differences themselves, so each order's final capital has expectation at
/// most 1 under its null (a supermartingale's), and so has their average (a
/// mixture of e-values is one): Markov's inequality bounds each test's size
/// by `alpha`. The orders are random given the seed, and the seed (the
/// experiment's, written before any trial ran) does not depend on the
/// outcomes. The earlier rule bet in the suite's order and stopped at the
/// first prefix that reached `1 / alpha`: renaming tasks could turn
/// "equivalent" into "undecided" (`equivalence_is_a_function_of_the_differences`).
///
/// Valid for any distribution of the differences in `[-1, 1]`, where the
/// sign flip at a shift other than 0 assumes them symmetric: with the
/// sign-flip interval's bounds a false "equivalent" at a true difference of
/// exactly the margin was measured at up to 6.7% at alpha 0.05
/// (`simulation_equivalence_sign_flip`). One task: its trials'
/// [`newcombe_unpaired`] interval at `1 - 2 alpha` inside the margins (that task only).
pub fn paired_equivalent(
    control: &[Vec<f64>],
    treatment: &[Vec<f64>],
    alpha: f64,
    margin: f64,
    seed: u64,
) -> bool {
    let tasks = PairedTasks::of(control, treatment);
    if !(is_open_unit(2.0 * alpha) && margin > 0.0 && margin <= 1.0) {
        return false;
    }
    match tasks.d.len() {
        0 => false,
        1 => {
            let i = paired_inference(&tasks.control, &tasks.treatment, 1.0 - 2.0 * alpha);
            i.lo > -margin && i.hi < margin
        }
        _ => {
            let (up, down) = order_free_capital(&tasks.d, alpha, margin, seed);
            up >= -alpha.ln() && down >= -alpha.ln()
        }
    }
}

/// The logs of the two bettors' final capitals of [`paired_equivalent`],
/// each averaged over the orders: the upward bettor's against `-margin`,
/// the downward one's against `+margin`.
pub fn order_free_capital(d: &[f64], alpha: f64, margin: f64, seed: u64) -> (f64, f64) {
    use ablate_core::sequential::betting::{Bets, BettingCs};
    // On x = (d + 1) / 2 in [0, 1]; bets at level 2 alpha, as the sequential design's.
    let mut x: Vec<f64> = d.iter().map(|d| (d.clamp(-1.0, 1.0) + 1.0) / 2.0).collect();
    x.sort_by(f64::total_cmp);
    let margins = [(1.0 - margin) / 2.0, (1.0 + margin) / 2.0];
    let mut rng = SplitMix64(seed ^ EQUIVALENCE_STREAM);
    let (mut ups, mut downs) = (Vec::new(), Vec::new());
    for _ in 0..EQUIVALENCE_ORDERS {
        let mut order = x.clone();
        for i in (1..order.len()).rev() {
            let k = ((u128::from(rng.next_u64()) * (i as u128 + 1)) >> 64) as usize;
            order.swap(i, k);
        }
        let mut cs = BettingCs::new(2.0 * alpha, Bets::Horizon(x.len()), None, &margins, false);
        for &v in &order {
            cs.push(v);
        }
        ups.push(cs.points()[0].capital().up);
        downs.push(cs.points()[1].capital().down);
    }
    (log_mean_exp(&ups), log_mean_exp(&downs))
}

/// `log(mean(exp(v)))`, without overflow.
fn log_mean_exp(v: &[f64]) -> f64 {
    let top = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    top + (v.iter().map(|x| (x - top).exp()).sum::<f64>() / v.len() as f64).ln()
}

/// The tasks with trials in both arms, and their differences `d_t`.
#[derive(Clone)]
struct PairedTasks {
    control: Vec<Vec<f64>>,
    treatment: Vec<Vec<f64>>,
    d: Vec<f64>,
}

impl PairedTasks {
    fn of(control: &[Vec<f64>], treatment: &[Vec<f64>]) -> PairedTasks {
        let (control, treatment): (Vec<Vec<f64>>, Vec<Vec<f64>>) = control
            .iter()
            .zip(treatment)
            .filter(|(c, t)| !c.is_empty() && !t.is_empty())
            .map(|(c, t)| (c.clone(), t.clone()))
            .unzip();
        let d = control.iter().zip(&treatment).map(|(c, t)| mean(t) - mean(c)).collect();
        PairedTasks { control, treatment, d }
    }

    /// The floor under the sign-flip interval (see [`paired_inference`]),
    /// the trial noise's variance computed once. It looks at the tasks that
    /// changed when two or more did (and not all: then these tasks
    /// themselves), as the sign flip's distribution does, so that a task
    /// whose difference is 0 moves neither p-value; with fewer, the
    /// sign-flip p-value is 1 and the floor only widens the interval.
    fn floor(&self) -> Floor<'_> {
        let changed: Vec<usize> =
            (0..self.d.len()).filter(|&i| self.d[i].abs() > ZERO_DIFFERENCE).collect();
        let (basis, share) = if changed.len() >= 2 && changed.len() < self.d.len() {
            let subset = PairedTasks {
                control: changed.iter().map(|&i| self.control[i].clone()).collect(),
                treatment: changed.iter().map(|&i| self.treatment[i].clone()).collect(),
                d: changed.iter().map(|&i| self.d[i]).collect(),
            };
            (Cow::Owned(subset), changed.len() as f64 / self.d.len() as f64)
        } else {
            (Cow::Borrowed(self), 1.0)
        };
        let every_two = basis.control.iter().chain(&basis.treatment).all(|v| v.len() >= 2);
        let noise = every_two.then(|| trial_noise(&basis.control, &basis.treatment));
        let kind = match noise {
            Some(v) if v > SPREAD_TOLERANCE => {
                FloorKind::TrialNoise(v * trial_noise_floor_factor(basis.d.len()))
            }
            _ if no_spread(&basis.d) => FloorKind::Mover,
            _ => FloorKind::None,
        };
        Floor { kind, basis, share }
    }
}

/// A [`SpreadFloor`] with what it needs: the tasks it looks at (`basis`),
/// their share of all the paired tasks (the floor's interval is for their
/// mean, so times `share` for the mean over all), and the trial-noise
/// floor's variance.
struct Floor<'a> {
    kind: FloorKind,
    basis: Cow<'a, PairedTasks>,
    share: f64,
}

enum FloorKind {
    None,
    TrialNoise(f64),
    Mover,
}

impl Floor<'_> {
    fn kind(&self) -> SpreadFloor {
        match self.kind {
            FloorKind::None => SpreadFloor::None,
            FloorKind::TrialNoise(_) => SpreadFloor::TrialNoise,
            FloorKind::Mover => SpreadFloor::Mover,
        }
    }

    /// The hull of the sign-flip interval and the floor's, clamped to `[-1, 1]`.
    fn widen(&self, (lo, hi): (f64, f64), conf: f64) -> (f64, f64) {
        let tasks = &self.basis;
        let (flo, fhi) = match self.kind {
            FloorKind::None => return (lo.max(-1.0), hi.min(1.0)),
            FloorKind::TrialNoise(v) => {
                let half = t_two_sided(conf, (tasks.d.len() - 1) as f64)
                    * (v / tasks.d.len() as f64).sqrt();
                (mean(&tasks.d) - half, mean(&tasks.d) + half)
            }
            FloorKind::Mover => {
                let m = paired_effect_mover(&tasks.control, &tasks.treatment, conf);
                (m.lo, m.hi)
            }
        };
        let (flo, fhi) = (flo * self.share, fhi * self.share);
        (lo.min(flo).max(-1.0), hi.max(fhi).min(1.0))
    }

    /// The floor's own two-sided p-value of "no difference" (0 without a floor).
    fn p_value(&self) -> f64 {
        let tasks = &self.basis;
        match self.kind {
            FloorKind::None => 0.0,
            FloorKind::TrialNoise(v) => {
                let n = tasks.d.len() as f64;
                (2.0 * t_sf((mean(&tasks.d) / (v / n).sqrt()).abs(), n - 1.0)).min(1.0)
            }
            FloorKind::Mover => inverted_p_value(|cf| {
                let m = paired_effect_mover(&tasks.control, &tasks.treatment, cf);
                (m.lo, m.hi)
            }),
        }
    }
}

/// The trial noise of the per-task differences: `mean_t(s2_ct / n_ct + s2_tt / n_tt)`,
/// with `s2` the sample variance of a task's trials in an arm (each arm of
/// each task needs 2 trials).
fn trial_noise(control: &[Vec<f64>], treatment: &[Vec<f64>]) -> f64 {
    let var_of_mean = |v: &Vec<f64>| sample_sd(v).powi(2) / v.len() as f64;
    mean(
        &control
            .iter()
            .zip(treatment)
            .map(|(c, t)| var_of_mean(c) + var_of_mean(t))
            .collect::<Vec<_>>(),
    )
}

/// The quantile of the spread trial noise alone would show below which the
/// observed spread is not trusted (see [`trial_noise_floor_factor`]).
pub(crate) const TRIAL_NOISE_FLOOR_QUANTILE: f64 = 0.025;

/// The floor's variance is the trial noise `v` times `chi2_{T-1}(0.025) / (T - 1)`,
/// the 2.5% quantile of the sample variance of `T` differences scattered by
/// that noise alone (Normal theory). The floor binds only where the
/// differences scatter less than trial noise would let them in 97.5% of
/// samples, so it costs the test almost no power where the tasks behave
/// like their trials, and it varies continuously with the data.
fn trial_noise_floor_factor(tasks: usize) -> f64 {
    use statrs::distribution::{ChiSquared, ContinuousCDF};
    let df = (tasks - 1) as f64;
    ChiSquared::new(df).map(|c| c.inverse_cdf(TRIAL_NOISE_FLOOR_QUANTILE) / df).unwrap_or(0.0)
}

/// Only the interval of [`paired_inference`] (no p-value): what the coverage
/// simulation checks, at a fraction of the cost.
#[cfg(test)]
pub(crate) fn paired_interval(
    control: &[Vec<f64>],
    treatment: &[Vec<f64>],
    conf: f64,
) -> (f64, f64) {
    let tasks = PairedTasks::of(control, treatment);
    if tasks.d.len() < 2 || !is_open_unit(conf) {
        return (f64::NAN, f64::NAN);
    }
    let sf = sign_flip(&tasks.d, conf);
    tasks.floor().widen((sf.lo, sf.hi), conf)
}

/// Whether [`paired_inference`] rejects "no difference" at two-sided level
/// `alpha`, computed from the sign-flip p-value alone and the floor's
/// interval at `1 - alpha` (no inversion): the power simulation's test, at a
/// fraction of the cost. Tasks without trials in both arms are left out;
/// fewer than two tasks left never reject here.
#[cfg(test)]
pub(crate) fn paired_rejects(control: &[Vec<f64>], treatment: &[Vec<f64>], alpha: f64) -> bool {
    paired_rejects_by(control, treatment, alpha, sign_flip_p)
}

/// [`paired_rejects`] with another sign-flip p-value in place of the mid-p
/// (the power simulation's comparison with the exact test).
#[cfg(test)]
pub(crate) fn paired_rejects_by(
    control: &[Vec<f64>],
    treatment: &[Vec<f64>],
    alpha: f64,
    sign_flip_p: fn(&[f64]) -> f64,
) -> bool {
    let tasks = PairedTasks::of(control, treatment);
    if tasks.d.len() < 2 || !is_open_unit(alpha) || sign_flip_p(&tasks.d) > alpha {
        return false;
    }
    // The sign flip rejects: its interval excludes 0, so the hull does exactly when the floor's does.
    let m = mean(&tasks.d);
    let (lo, hi) = tasks.floor().widen((m, m), 1.0 - alpha);
    lo > 0.0 || hi < 0.0
}

/// Newcombe's hybrid score interval for the difference `x2/n2 - x1/n1` of
/// two independent proportions (Newcombe 1998, Stat. Med. 17:873-890,
/// method 10): with Wilson intervals `(l1, u1)` and `(l2, u2)`,
/// `lo = D - sqrt((p2 - l2)^2 + (u1 - p1)^2)`, `hi = D + sqrt((u2 - p2)^2 + (p1 - l1)^2)`.
/// Counts may be fractional (sums of scores); NaN when either `n` is 0.
pub(crate) fn newcombe_unpaired(x1: f64, n1: f64, x2: f64, n2: f64, conf: f64) -> (f64, f64) {
    if n1 <= 0.0 || n2 <= 0.0 || !is_open_unit(conf) {
        return (f64::NAN, f64::NAN);
    }
    let z = normal_quantile(1.0 - (1.0 - conf) / 2.0);
    let w = |x: f64, n: f64| {
        let p = x / n;
        let z2n = z * z / n;
        let center = (p + z2n / 2.0) / (1.0 + z2n);
        let half = z / (1.0 + z2n) * (p * (1.0 - p) / n + z2n / (4.0 * n)).max(0.0).sqrt();
        (
            p,
            if x <= 0.0 { 0.0 } else { (center - half).max(0.0) },
            if x >= n { 1.0 } else { (center + half).min(1.0) },
        )
    };
    let ((p1, l1, u1), (p2, l2, u2)) = (w(x1, n1), w(x2, n2));
    let d = p2 - p1;
    (
        d - ((p2 - l2).powi(2) + (u1 - p1).powi(2)).sqrt(),
        d + ((u2 - p2).powi(2) + (p1 - l1).powi(2)).sqrt(),
    )
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
#[cfg(test)]
pub(crate) fn mcnemar_mid_p(b: u64, c: u64) -> f64 {
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

/// One comparison's step in [`holm`]: the level it is tested at (its
/// interval is drawn at `1 - level`) and its adjusted p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HolmStep {
    pub level: f64,
    pub p_adjusted: f64,
}

/// Holm's step-down procedure (Holm 1979, Scand. J. Statist. 6:65-70; closed
/// testing of Bonferroni's intersections) over the family's p-values, at
/// family-wise level `alpha`. With the `m` p-values in ascending order
/// `p_(1) <= ... <= p_(m)`, the `j`-th is rejected when every
/// `p_(i) <= alpha / (m - i + 1)` for `i <= j`; its adjusted p-value is
/// `max_{i <= j} min(1, (m - i + 1) p_(i))`. Each comparison's level is its
/// step's, `alpha / (m - j + 1)`, and from the first step not rejected on
/// that step's level for all later ones: so an interval at `1 - level`
/// excludes 0 exactly when Holm rejects. (Each interval holds at its own
/// level; the family-wise guarantee is the verdicts'.) NaN p-values go last,
/// with a NaN adjusted p-value. Ties keep the input order.
pub fn holm(p: &[f64], alpha: f64) -> Vec<HolmStep> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| match (p[a].is_nan(), p[b].is_nan()) {
        (false, false) => p[a].total_cmp(&p[b]),
        (x, y) => x.cmp(&y),
    });
    let mut out = vec![HolmStep { level: alpha, p_adjusted: f64::NAN }; m];
    let (mut stopped_at, mut running) = (None::<usize>, 0.0f64);
    for (j, &i) in order.iter().enumerate() {
        let level_of = |step: usize| alpha / (m - step) as f64;
        if stopped_at.is_none() && (p[i].is_nan() || p[i] > level_of(j)) {
            stopped_at = Some(j);
        }
        running = running.max((p[i] * (m - j) as f64).min(1.0));
        let p_adjusted = if p[i].is_nan() { f64::NAN } else { running };
        out[i] = HolmStep { level: level_of(stopped_at.unwrap_or(j)), p_adjusted };
    }
    out
}
