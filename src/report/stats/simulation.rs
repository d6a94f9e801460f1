//! Coverage and agreement simulations over the grid the report's methods are
//! checked on (run once by `make test`: `cargo test --lib simulation`).

use super::*;

// -----------------------------------------------------------------------
// Coverage simulation
// -----------------------------------------------------------------------

pub(crate) use super::sign_flip::SplitMix64;

/// The simulations' draws from `SplitMix64`.
impl SplitMix64 {
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

/// The size of the equivalence verdict: when the true difference is exactly
/// the margin (0.1), "equivalent within ±10 pp" (the `1 - 2 alpha` interval
/// inside the margins: two one-sided tests at alpha = 0.05) must be declared
/// in at most alpha of replications, over tasks {20, 100} x repeats {1, 5} x
/// ICC {0, 0.5} at base 0.5, 2000 replications a cell (simulation standard
/// error at 0.05: 0.005). `make test` prints the table.
#[test]
fn simulation_equivalence_size() {
    let (alpha, margin) = (0.05, 0.1);
    let mut rng = SplitMix64(0x5EED_E0C1_7A1E_0001);
    println!("simulation_equivalence_size: true difference = margin = 0.1, alpha 0.05; P(declared equivalent) should be at most 0.05");
    println!("{:>5} {:>3} {:>4} | {:>8}", "tasks", "rep", "icc", "P(equiv)");
    let mut worst: f64 = 0.0;
    for &tasks in &[20usize, 100] {
        for &repeats in &[1usize, 5] {
            for &icc in &[0.0, 0.5] {
                let cell = Cell { tasks, repeats, base: 0.5, icc, delta: margin };
                let mut control = vec![Vec::with_capacity(repeats); tasks];
                let mut treatment = vec![Vec::with_capacity(repeats); tasks];
                let mut declared = 0usize;
                for _ in 0..COVERAGE_REPS {
                    cell.draw(&mut rng, &mut control, &mut treatment);
                    let (lo, hi) = paired_interval(&control, &treatment, 1.0 - 2.0 * alpha);
                    declared += (lo > -margin && hi < margin) as usize;
                }
                let rate = declared as f64 / COVERAGE_REPS as f64;
                println!("{tasks:5} {repeats:3} {icc:4.1} | {rate:8.3}");
                worst = worst.max(rate);
            }
        }
    }
    println!("largest rate of a false 'equivalent': {worst:.3}");
    assert!(worst <= alpha + 0.01, "equivalence declared at the margin in {worst} of replications");
}
