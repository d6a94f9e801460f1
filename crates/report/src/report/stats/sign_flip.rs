//! Fisher's sign-flip test on per-task differences, in its mid-p form, and
//! the interval that inverts it; its distribution exact wherever that is
//! feasible.
//!
//! Under `H0: mean difference = delta` each task's `d_t - delta` is equally
//! likely to have either sign. Flipping the signs of a set `B` of tasks moves
//! the statistic `sum(d_t - delta)` at least as far as observed exactly when
//! `sum_B (d_t - delta) <= 0`, i.e. when the mean of `d` over `B` is at most
//! `delta`, and to exactly the observed value when that mean is `delta` (`B`
//! empty is such a tie). So the whole test, at every `delta`, is the
//! distribution of the **subset means** of the `d_t` over the `2^T` equally
//! likely sets (Hartigan 1969, JASA 64:1303-1317):
//!
//! * two-sided **mid-p** value of `delta = 0` (Lancaster 1961; the ties count
//!   half in each tail): `2 min(P(sum_B d <= 0), P(sum_B d >= 0)) - P(sum_B d = 0)`,
//!   held to at least the exact test's smallest, `2^(1 - n)` over the `n`
//!   tasks that changed ([`exact_floor`]);
//! * interval at level `conf`: the shifts the mid-p test keeps
//!   ([`inverted_interval`]), or `[-1, 1]` when `2^(1 - T) > 1 - conf` (too few
//!   tasks for the exact test to reject at this level), widened to 0 when
//!   the floor keeps 0. Then `p <= 1 - conf` exactly when the interval
//!   excludes 0.
//!
//! That distribution is computed, in order of preference:
//!
//! 1. **Enumeration** of every subset, up to [`SIGN_FLIP_ENUMERATE_MAX`] tasks.
//! 2. **The lattice** of the differences: pass/fail outcomes give
//!    `d_t = a_t / L` with integer `a_t` and `L` the least common multiple of
//!    the trial counts. The joint distribution of (`|B|`, `sum_B a_t`) is
//!    built by dynamic programming over the tasks, exactly (its
//!    probabilities are multiples of `2^-T`, exact in `f64` up to 53 tasks
//!    and to `f64` rounding beyond). A task whose difference is 0 adds
//!    nothing to any sum, so the p-value does not change when an unchanged
//!    task is added (the defect of the Normal approximation this replaced:
//!    16 tasks with 4 flips give p 0.125, it gave a 17th unchanged task p 0.0455).
//! 3. **Monte Carlo** (fractional scores off any small lattice, or a lattice
//!    too large for the programme: more than 4e8 cells times tasks, such as
//!    500 tasks of 10 trials with differences spread over all of [-1, 1]):
//!    [`SIGN_FLIP_DRAWS`] subsets drawn with a fixed seed, the observed one
//!    added (so `p >= 1/(draws + 1)`); the Monte Carlo standard error of the
//!    p-value is returned beside it.

use super::*;

/// Tasks up to which [`sign_flip`] enumerates every subset (`2^T`).
pub(crate) const SIGN_FLIP_ENUMERATE_MAX: usize = 16;

/// Largest common denominator of the differences tried for the lattice (the
/// least common multiple of trial counts 1 to 9 is 2520).
pub(crate) const SIGN_FLIP_LATTICE_MAX_DENOMINATOR: u64 = 5040;

/// Most cells (`(T + 1) x` the span of the integer sums) times tasks the
/// lattice's dynamic programme may take; beyond, Monte Carlo.
pub(crate) const SIGN_FLIP_LATTICE_MAX_WORK: f64 = 4e8;

/// Subsets drawn by the Monte Carlo sign-flip test.
pub const SIGN_FLIP_DRAWS: usize = 100_000;

/// How a [`SignFlip`] was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignFlipMethod {
    /// Every subset enumerated.
    Enumerated,
    /// The exact distribution on the lattice of the differences.
    Lattice,
    /// Seeded Monte Carlo over [`SIGN_FLIP_DRAWS`] subsets.
    MonteCarlo,
}

/// Which p-value of the sign flip a verdict reads, and so which null it
/// guarantees its size under (docs/statistics.md, "Which p-value").
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SignFlipTest {
    /// Ties with the observed sum counted half (Lancaster 1961), held to at
    /// least the exact test's smallest: size at most alpha for arms
    /// identical on every task (simulated over the power grid), not for
    /// every null of symmetric differences. Sampled arms.
    MidP,
    /// Ties counted whole: size at most alpha whenever each task's
    /// difference is symmetric about 0, however many tasks changed. Greedy
    /// arms, whose changed tasks are fixed by the treatment.
    Exact,
}

/// A sign-flip (randomization) test on per-task differences and the
/// interval that inverts it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignFlip {
    pub lo: f64,
    pub hi: f64,
    /// The p-value of `test`, the one the interval inverts.
    pub p_value: f64,
    pub test: SignFlipTest,
    /// Both p-values, whichever the interval inverts.
    pub p_mid: f64,
    pub p_exact: f64,
    /// `true` unless computed by Monte Carlo.
    pub exact: bool,
    pub method: SignFlipMethod,
    /// The Monte Carlo standard error of `p_value` (`sqrt(p (1 - p) / draws)`); 0 when exact.
    pub p_monte_carlo_se: f64,
}

/// The subset means of `d` with their probabilities (a non-empty subset's
/// mean and the probability of drawing a subset with that mean), and
/// `P(sum_B d <= 0)`, `P(sum_B d >= 0)` over all subsets, the empty one included.
struct SubsetMeans {
    /// (mean, probability), any order; the empty subset left out.
    means: Vec<(f64, f64)>,
    below: f64,
    above: f64,
    /// `P(sum_B d = 0)`, the empty subset included: the ties the mid-p halves.
    tie: f64,
    /// The probability one subset carries (`2^-T`; `1/(draws + 1)` for Monte Carlo).
    unit: f64,
}

/// Means within this of 0 are 0 (the float error of summing differences that
/// cancel), and so is a task's difference: such a task changed nothing.
pub(crate) const ZERO_DIFFERENCE: f64 = 1e-12;
const ZERO: f64 = ZERO_DIFFERENCE;

fn enumerate(d: &[f64]) -> SubsetMeans {
    let total = 1usize << d.len();
    let unit = 1.0 / total as f64;
    let mut sums = vec![0.0f64; total];
    let mut means = Vec::with_capacity(total - 1);
    let (mut below, mut above, mut tie) = (unit, unit, unit);
    for mask in 1..total {
        let low = mask.trailing_zeros() as usize;
        sums[mask] = sums[mask & (mask - 1)] + d[low];
        let m = sums[mask] / mask.count_ones() as f64;
        let m = if m.abs() < ZERO { 0.0 } else { m };
        below += if m <= 0.0 { unit } else { 0.0 };
        above += if m >= 0.0 { unit } else { 0.0 };
        tie += if m == 0.0 { unit } else { 0.0 };
        means.push((m, unit));
    }
    SubsetMeans { means, below, above, tie, unit }
}

/// `d_t = a_t / L` for the smallest `L` up to [`SIGN_FLIP_LATTICE_MAX_DENOMINATOR`]
/// that makes every `a_t` whole (to `1e-9`).
fn lattice_of(d: &[f64]) -> Option<(Vec<i64>, u64)> {
    'next: for l in 1..=SIGN_FLIP_LATTICE_MAX_DENOMINATOR {
        let lf = l as f64;
        let mut a = Vec::with_capacity(d.len());
        for &x in d {
            let y = x * lf;
            if (y - y.round()).abs() > 1e-9 {
                continue 'next;
            }
            a.push(y.round() as i64);
        }
        return Some((a, l));
    }
    None
}

/// The integer sums of the lattice `a` span `[-neg, pos]`: `neg`, the
/// span's `width` and, when the dynamic programme over the non-zero `a_t`
/// (cells times tasks) is within [`SIGN_FLIP_LATTICE_MAX_WORK`], `true`
/// (else Monte Carlo). One limit for [`sign_flip`] and [`sign_flip_p`], so
/// that both always give the same p-value.
fn lattice_span(a: &[i64]) -> (i64, usize, bool) {
    let n = a.iter().filter(|x| **x != 0).count();
    let neg: i64 = a.iter().filter(|x| **x < 0).map(|x| -x).sum();
    let width = a.iter().map(|x| x.unsigned_abs()).sum::<u64>() as usize + 1;
    (neg, width, (n + 1) as f64 * width as f64 * n as f64 <= SIGN_FLIP_LATTICE_MAX_WORK)
}

fn on_lattice(a: &[i64], l: u64) -> Option<SubsetMeans> {
    let t = a.len();
    let (neg, width, feasible) = lattice_span(a);
    if !feasible {
        return None;
    }
    // The programme runs over the tasks whose difference is not 0; the `z` others change no sum,
    // only the subset's size, which they add to binomially at the end.
    let nonzero: Vec<i64> = a.iter().copied().filter(|x| *x != 0).collect();
    let (n, z) = (nonzero.len(), t - nonzero.len());
    // p[k][s + neg]: the probability that a subset of the non-zero tasks seen so far has k members summing to s.
    let mut p = vec![vec![0.0f64; width]; n + 1];
    p[0][neg as usize] = 1.0;
    // The sums reachable so far, as indices: [neg - neg_seen, neg + pos_seen].
    let (mut from, mut to) = (neg as usize, neg as usize);
    for (seen, &x) in nonzero.iter().enumerate() {
        for k in (0..=seen).rev() {
            let (head, tail) = p.split_at_mut(k + 1);
            let (row, next) = (&mut head[k], &mut tail[0]);
            for s in from..=to {
                let v = row[s];
                if v == 0.0 {
                    continue;
                }
                row[s] = v * 0.5;
                next[(s as i64 + x) as usize] += v * 0.5;
            }
        }
        if x < 0 {
            from -= (-x) as usize;
        } else {
            to += x as usize;
        }
    }
    // The zero tasks: j of them in the subset with probability C(z, j) / 2^z.
    // C(z, j) by the recurrence (exact in f64 while it stays below 2^53), times 2^-z.
    let mut zeros = Vec::with_capacity(z + 1);
    let mut c = 1.0f64;
    for j in 0..=z {
        zeros.push(c * 0.5f64.powi(z as i32));
        c = c * (z - j) as f64 / (j + 1) as f64;
    }
    let mut means = Vec::new();
    let (mut below, mut above, mut tie) = (0.0, 0.0, 0.0);
    for (k, row) in p.iter().enumerate() {
        for (i, &v) in row.iter().enumerate() {
            if v == 0.0 {
                continue;
            }
            let s = i as i64 - neg;
            below += if s <= 0 { v } else { 0.0 };
            above += if s >= 0 { v } else { 0.0 };
            tie += if s == 0 { v } else { 0.0 };
            for (j, &w) in zeros.iter().enumerate() {
                if k + j > 0 {
                    means.push((s as f64 / (l as f64 * (k + j) as f64), v * w));
                }
            }
        }
    }
    Some(SubsetMeans { means, below, above, tie, unit: 0.5f64.powi(t as i32) })
}

/// SplitMix64 (Steele, Lea & Flood 2014): tiny, seedable, good enough; the
/// Monte Carlo's fixed-seed draws here, and the simulations' (which add
/// their distributions to it in `simulation.rs`).
pub(crate) struct SplitMix64(pub u64);

impl SplitMix64 {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Draws from `SplitMix64` for the simulations and the sequential design's
/// projection (`report::power::sequential_projection`).
impl SplitMix64 {
    /// Uniform in [0, 1).
    pub(crate) fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Standard Normal by Box-Muller.
    pub(crate) fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
    pub(crate) fn bernoulli(&mut self, p: f64) -> f64 {
        if self.uniform() < p { 1.0 } else { 0.0 }
    }
    /// Gamma(k, 1) by Marsaglia & Tsang (2000, ACM TOMS 26:363-372),
    /// with `Gamma(k) = Gamma(k + 1) U^(1/k)` for `k < 1`.
    pub(crate) fn gamma(&mut self, k: f64) -> f64 {
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

/// The seeded draws: the tasks whose difference is not 0 are drawn from one
/// stream, seeded by their number, and only they move the flipped sum, so
/// the p-value is the same with or without unchanged tasks; whether an
/// unchanged task is in the subset (its size, for the interval) comes from
/// a second stream.
fn monte_carlo(d: &[f64]) -> SubsetMeans {
    let unit = 1.0 / (SIGN_FLIP_DRAWS + 1) as f64;
    let changed: Vec<f64> = d.iter().copied().filter(|x| x.abs() > ZERO).collect();
    let unchanged = (d.len() - changed.len()) as u32;
    let mut rng = SplitMix64(0xAB1A_7E00_0000_0000 ^ changed.len() as u64);
    let mut sizes = SplitMix64(0xAB1A_7E00_2E20_0000 ^ d.len() as u64);
    let mut means = Vec::with_capacity(SIGN_FLIP_DRAWS);
    // The observed sign pattern (the empty set) counts on both sides.
    let (mut below, mut above, mut tie) = (unit, unit, unit);
    let mut bits = 0u64;
    for _ in 0..SIGN_FLIP_DRAWS {
        let (mut sum, mut n) = (0.0, 0u32);
        for (i, x) in changed.iter().enumerate() {
            if i % 64 == 0 {
                bits = rng.next_u64();
            }
            if bits >> (i % 64) & 1 == 1 {
                sum += x;
                n += 1;
            }
        }
        for i in 0..unchanged {
            if i % 64 == 0 {
                bits = sizes.next_u64();
            }
            n += (bits >> (i % 64) & 1) as u32;
        }
        let sum = if sum.abs() < ZERO { 0.0 } else { sum };
        below += if sum <= 0.0 { unit } else { 0.0 };
        above += if sum >= 0.0 { unit } else { 0.0 };
        tie += if sum == 0.0 { unit } else { 0.0 };
        if n > 0 {
            means.push((sum / f64::from(n), unit));
        }
    }
    SubsetMeans { means, below, above, tie, unit }
}

/// The sign-flip test of `delta = 0` on the per-task differences `d` and the
/// interval that inverts it (see the module's documentation). Bounds are
/// clamped to `[-1, 1]`; `T = 0`, a non-finite difference or `conf` outside
/// `(0, 1)` gives NaN.
#[cfg(test)]
pub(crate) fn sign_flip(d: &[f64], conf: f64) -> SignFlip {
    sign_flip_by(d, conf, SignFlipTest::MidP)
}

/// [`sign_flip`] with the interval inverting `test`'s p-value.
pub(crate) fn sign_flip_by(d: &[f64], conf: f64, test: SignFlipTest) -> SignFlip {
    let nan = SignFlip {
        lo: f64::NAN,
        hi: f64::NAN,
        p_value: f64::NAN,
        test,
        p_mid: f64::NAN,
        p_exact: f64::NAN,
        exact: false,
        method: SignFlipMethod::MonteCarlo,
        p_monte_carlo_se: f64::NAN,
    };
    if d.is_empty() || !is_open_unit(conf) || d.iter().any(|x| !x.is_finite()) {
        return nan;
    }
    let (mut sm, method) = if d.len() <= SIGN_FLIP_ENUMERATE_MAX {
        (enumerate(d), SignFlipMethod::Enumerated)
    } else if let Some(sm) = lattice_of(d).and_then(|(a, l)| on_lattice(&a, l)) {
        (sm, SignFlipMethod::Lattice)
    } else {
        (monte_carlo(d), SignFlipMethod::MonteCarlo)
    };
    // The p-value from the tasks that changed alone, exactly when they are few enough to
    // enumerate (an unchanged task moves no sum): unchanged tasks never move it.
    let changed: Vec<f64> = d.iter().copied().filter(|x| x.abs() > ZERO).collect();
    let (tails, exact) =
        if method == SignFlipMethod::MonteCarlo && changed.len() <= SIGN_FLIP_ENUMERATE_MAX {
            let e = enumerate(&changed);
            ((e.below, e.above, e.tie), true)
        } else {
            ((sm.below, sm.above, sm.tie), method != SignFlipMethod::MonteCarlo)
        };
    let p_mid = mid_p(tails.0, tails.1, tails.2).max(exact_floor(d));
    let p_exact = exact_p(tails.0, tails.1);
    let (p_value, tie) = match test {
        SignFlipTest::MidP => (p_mid, 0.5),
        SignFlipTest::Exact => (p_exact, 1.0),
    };
    // Too few tasks for the exact test to reject at this level: no conclusion.
    let (mut lo, mut hi) = if (d.len() as u64) < sign_flip_min_tasks(1.0 - conf) {
        (-1.0, 1.0)
    } else {
        inverted_interval(&mut sm.means, sm.unit, (1.0 - conf) / 2.0, tie)
    };
    if p_value > 1.0 - conf {
        // The floor keeps 0 where the mid-p alone would not: so does the interval.
        (lo, hi) = (lo.min(0.0), hi.max(0.0));
    } else if lo <= 0.0 && hi >= 0.0 {
        // An exact p-value beside a Monte Carlo interval that keeps 0: the end nearest 0
        // moves just past it, so that the interval excludes 0 exactly when p <= 1 - conf.
        if mean(d) >= 0.0 { lo = f64::from_bits(1) } else { hi = -f64::from_bits(1) }
    }
    let se = if exact { 0.0 } else { (p_value * (1.0 - p_value) / SIGN_FLIP_DRAWS as f64).sqrt() };
    SignFlip {
        lo: lo.max(-1.0),
        hi: hi.min(1.0),
        p_value,
        test,
        p_mid,
        p_exact,
        exact,
        method,
        p_monte_carlo_se: se,
    }
}

/// The smallest p-value the exact sign-flip test could give on these
/// differences, `2^(1 - n)` with `n` the tasks whose difference is not 0
/// (every one of them moved the same way). The mid-p is never reported
/// below it: with `n` changed tasks the mid-p alone could reject at `2^-n`,
/// where the chance that all `n` agree in sign by chance is `2^(1 - n)`
/// (5 changed tasks, all the same way: a mid-p of 0.031, a size of 0.0625).
fn exact_floor(d: &[f64]) -> f64 {
    let n = d.iter().filter(|x| x.abs() > ZERO).count();
    0.5f64.powi(n as i32 - 1).min(1.0)
}

/// The two-sided mid-p value from `P(S <= s)`, `P(S >= s)` and `P(S = s)`
/// of the flipped statistic `S` at the observed `s`: each tail counts the
/// ties at half weight (Lancaster 1961), `min(1, 2 min(below, above) - tie)`.
fn mid_p(below: f64, above: f64, tie: f64) -> f64 {
    (2.0 * below.min(above) - tie).clamp(0.0, 1.0)
}

/// The two-sided exact p-value from `P(S <= s)` and `P(S >= s)`: each tail
/// counts the ties whole, `min(1, 2 min(below, above))`.
fn exact_p(below: f64, above: f64) -> f64 {
    (2.0 * below.min(above)).min(1.0)
}

/// The set of shifts `delta` the test keeps at one-sided level `a`
/// (`a = (1 - conf) / 2`), from the non-empty subset means (sorted here),
/// ties weighed `tie` (one half for the mid-p, 1 for the exact test).
/// The upper tail's p at `delta` is `W(< delta) + tie (W(= delta) + unit)`
/// (`W` the subset-mean weights, the empty subset always a tie), a step
/// function rising with `delta`; the lower end is the first mean `g` past
/// which it exceeds `a`, and `g` itself is kept only when its own value
/// (`tie` of the way up the step; the whole step for the exact test) exceeds `a`. An end the test rejects is reported
/// as the next `f64` inside (`(0, x]` is written `[5e-324, x]`), so that the
/// interval excludes 0 exactly when the p-value is at most `1 - conf`.
/// [`sign_flip`] calls it only with enough tasks for the exact test to reject
/// (`2^(1 - T) <= 1 - conf`), so the half unit alone never exceeds `a`.
fn inverted_interval(means: &mut [(f64, f64)], unit: f64, a: f64, tie: f64) -> (f64, f64) {
    means.sort_by(|x, y| x.0.total_cmp(&y.0));
    // Equal means (to the float error of their sums) form one step.
    let mut steps: Vec<(f64, f64)> = Vec::new();
    for &(m, w) in means.iter() {
        match steps.last_mut() {
            Some(last) if m - last.0 <= ZERO => last.1 += w,
            _ => steps.push((m, w)),
        }
    }
    let end = |steps: &mut dyn Iterator<Item = &(f64, f64)>, inward: fn(f64) -> f64| {
        let mut before = 0.0;
        for &(g, w) in steps {
            if before + w + tie * unit > a {
                return if before + tie * (w + unit) > a { g } else { inward(g) };
            }
            before += w;
        }
        f64::NAN
    };
    (end(&mut steps.iter(), f64::next_up), end(&mut steps.iter().rev(), f64::next_down))
}

/// Only the p-value of [`sign_flip`], the same number (its lattice, its
/// limits, its Monte Carlo) computed more cheaply when the differences lie on a lattice: the distribution of the
/// flipped sum alone (no subset sizes), one dynamic programme over the
/// tasks on the integer sums. Otherwise [`sign_flip`]'s own.
pub fn sign_flip_p(d: &[f64]) -> f64 {
    sign_flip_p_by(d, SignFlipTest::MidP)
}

/// [`sign_flip_p`] for either test: the p-value [`sign_flip_by`] gives, by the
/// cheaper programme where the differences lie on a lattice.
pub(crate) fn sign_flip_p_by(d: &[f64], test: SignFlipTest) -> f64 {
    match (lattice_tails(d), test) {
        (Some((below, above, tie)), SignFlipTest::MidP) => {
            mid_p(below, above, tie).max(exact_floor(d))
        }
        (Some((below, above, _)), SignFlipTest::Exact) => exact_p(below, above),
        (None, _) => sign_flip_by(d, 0.95, test).p_value,
    }
}

/// The exact (not mid-p) sign-flip p-value `min(1, 2 min(below, above))` on
/// the lattice, the test this one replaced: the power simulation's
/// comparison. NaN off a lattice.
#[cfg(test)]
pub(crate) fn sign_flip_p_conservative(d: &[f64]) -> f64 {
    lattice_tails(d).map_or(f64::NAN, |(below, above, _)| exact_p(below, above))
}

/// `P(S <= s)`, `P(S >= s)` and `P(S = s)` of the flipped sum `S` at the
/// observed `s`, by one dynamic programme over the tasks on the integer
/// sums, when the differences lie on a lattice small enough for it.
fn lattice_tails(d: &[f64]) -> Option<(f64, f64, f64)> {
    if d.is_empty() || d.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let (a, _) = lattice_of(d)?;
    let (neg, width, feasible) = lattice_span(&a);
    if !feasible {
        return None;
    }
    let mut p = vec![0.0f64; width];
    let mut next = vec![0.0f64; width];
    p[neg as usize] = 1.0;
    let (mut from, mut to) = (neg as usize, neg as usize);
    for &x in &a {
        if x == 0 {
            continue;
        }
        let (nf, nt) = if x < 0 { (from - (-x) as usize, to) } else { (from, to + x as usize) };
        next[nf..=nt].iter_mut().for_each(|v| *v = 0.0);
        for s in from..=to {
            let v = p[s] * 0.5;
            next[s] += v;
            next[(s as i64 + x) as usize] += v;
        }
        std::mem::swap(&mut p, &mut next);
        (from, to) = (nf, nt);
    }
    let below: f64 = p[..=neg as usize].iter().sum();
    let above: f64 = p[neg as usize..].iter().sum();
    Some((below, above, p[neg as usize]))
}

/// Fewest tasks with which the sign-flip test can reject at two-sided level
/// `alpha` at all: the smallest `T` with `2 / 2^T <= alpha` (the exact
/// test's smallest p-value, every task moved the same way; the mid-p test is
/// held to it, see [`sign_flip`]).
pub(crate) fn sign_flip_min_tasks(alpha: f64) -> u64 {
    let mut t = 1u64;
    while t < 64 && 2.0 / (1u64 << t) as f64 > alpha {
        t += 1;
    }
    t
}
