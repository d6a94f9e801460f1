//! Designed experiments on synthetic runs with known truth (docs/statistics.md, "Factorial
//! designs" and "Variance by source"):
//!
//! * `simulation_factorial`: every effect of a 2^3 and of a 2^(4-1) design at once, each interval
//!   at `1 - alpha / m` (Bonferroni over the design's `m` effects) as `analysis::factorial`
//!   computes it. Each task's success probability in a run is
//!   `base + sum_i (beta_i + u_i) x_i / 2 + gamma x_1 x_2 / 2` (`x = -1` low, `+1` high), with a
//!   task's base uniform on [0.35, 0.65] and its own deviation `u_i` of each main effect uniform
//!   on [-0.08, 0.08]: the true main effects are `beta`, the first two factors' interaction
//!   `gamma` (the textbook scale), the others 0 (in the fraction, `gamma` is that of the alias
//!   class holding the first two factors).
//! * `simulation_model_interaction`: the harness x model test (`analysis::models`) on one
//!   comparison under two models: its size when the effect is the same under both, and its power
//!   when it differs by 20 pp.
//! * `simulation_variance`: the decomposition (`analysis::variance`) on layouts with known
//!   components (intervals from 200 resamples): its mean against the truth and its intervals'
//!   coverage of each share.

use super::simulation::{SplitMix64, Table, reps, slack};
use super::*;
use crate::report::analysis::EffectVerdict;
use crate::report::analysis::factorial::{Cell, contrast};
use crate::report::analysis::models::{PerTask, differences};
use crate::report::analysis::variance::{Layout, decompose};
use ablate_core::experiment::factorial::{Factor, FactorialDesign, FactorialRun, Generator};

fn design(k: usize, generators: Vec<Generator>) -> FactorialDesign {
    let factors = (0..k)
        .map(|i| Factor { component: format!("f{i}"), low: "off".into(), high: "on".into() })
        .collect();
    let mut d = FactorialDesign { from: "x".into(), factors, generators, runs: vec![] };
    let base = k - d.generators.len();
    for i in 0u32..1 << base {
        let mut high: Vec<bool> = (0..k).map(|b| b < base && i >> b & 1 == 1).collect();
        for g in &d.generators {
            high[g.factor] = g.product.iter().filter(|&&f| !high[f]).count() % 2 == 0;
        }
        d.runs.push(FactorialRun { arm: format!("r{i}"), high });
    }
    d
}

/// One replication's cells: each task's mean over `repeats` trials in each run.
fn cells(
    rng: &mut SplitMix64,
    d: &FactorialDesign,
    tasks: usize,
    repeats: usize,
    beta: &[f64],
    gamma: f64,
) -> Vec<Vec<Cell>> {
    (0..tasks)
        .map(|_| {
            let base = 0.35 + 0.3 * rng.uniform();
            let u: Vec<f64> = (0..d.k()).map(|_| 0.16 * rng.uniform() - 0.08).collect();
            d.runs
                .iter()
                .map(|r| {
                    let x = |i: usize| if r.high[i] { 1.0 } else { -1.0 };
                    let p = base
                        + (0..d.k()).map(|i| (beta[i] + u[i]) * x(i) / 2.0).sum::<f64>()
                        + gamma * x(0) * x(1) / 2.0;
                    let wins: f64 = (0..repeats).map(|_| rng.bernoulli(p)).sum();
                    Some((wins / repeats as f64, repeats))
                })
                .collect()
        })
        .collect()
}

#[test]
fn simulation_factorial() {
    let alpha = 0.05;
    let n = reps(2_000);
    let mut out = Table::default();
    let mut rng = SplitMix64(0xFAC7_0E1A_0000_0001);
    out.line(format_args!(
        "simulation_factorial: {n} replications; every effect's interval at 1 - alpha/m at once (simultaneous 95%), and each alone"
    ));
    out.line(format_args!(
        "{:>9} {:>5} {:>6} {:>7} | {:>12} {:>10} {:>10}",
        "design", "tasks", "trials", "effects", "simultaneous", "worst one", "mean width"
    ));
    let full = design(3, vec![]);
    let half = design(4, vec![Generator { factor: 3, product: vec![0, 1, 2] }]);
    for (name, d) in [("2^3", &full), ("2^(4-1)", &half)] {
        let estimable = d.estimable();
        let m = estimable.len();
        for tasks in [10, 30] {
            for repeats in [1, 3] {
                for (label, beta0, gamma) in [("null", 0.0, 0.0), ("effects", 0.2, 0.1)] {
                    let mut beta = vec![0.0; d.k()];
                    beta[0] = beta0;
                    let truth = |e: &ablate_core::experiment::factorial::Estimable| match e.main() {
                        Some(i) => beta[i],
                        None if e.terms.contains(&0b11) => gamma,
                        None => 0.0,
                    };
                    let (mut all, mut each, mut width) = (0usize, vec![0usize; m], 0.0);
                    for _ in 0..n {
                        let c = cells(&mut rng, d, tasks, repeats, &beta, gamma);
                        let mut every = true;
                        for (j, e) in estimable.iter().enumerate() {
                            let x = contrast(d, e, &c);
                            let i = paired_inference_by(
                                &x.low,
                                &x.high,
                                1.0 - alpha / m as f64,
                                SignFlipTest::MidP,
                            );
                            let hit = i.lo <= truth(e) && truth(e) <= i.hi;
                            each[j] += usize::from(hit);
                            every &= hit;
                            width += (i.hi - i.lo) / (m * n) as f64;
                        }
                        all += usize::from(every);
                    }
                    let rate = all as f64 / n as f64;
                    let worst = *each.iter().min().unwrap() as f64 / n as f64;
                    out.line(format_args!(
                        "{name:>9} {tasks:>5} {repeats:>6} {label:>7} | {rate:>12.3} {worst:>10.3} {:>9.1}pp",
                        100.0 * width
                    ));
                    assert!(
                        rate >= 0.94 - slack(0.95, n),
                        "{name} {tasks} tasks {repeats} trials {label}: {rate}"
                    );
                }
            }
        }
    }
}

#[test]
fn simulation_model_interaction() {
    let alpha = 0.05;
    let n = reps(4_000);
    let mut out = Table::default();
    let mut rng = SplitMix64(0x40DE_1000_0000_0001);
    out.line(format_args!("simulation_model_interaction: {n} replications; one comparison under two models; rejections of 'the same effect under both'"));
    out.line(format_args!(
        "{:>5} {:>6} {:>10} | {:>9}",
        "tasks", "trials", "difference", "rejected"
    ));
    for tasks in [10, 30] {
        for repeats in [1, 3] {
            for diff in [0.0, 0.2] {
                let mut rejected = 0usize;
                for _ in 0..n {
                    let effects: Vec<PerTask> = [0.0, diff]
                        .iter()
                        .enumerate()
                        .map(|(m, &shift)| {
                            let values = (0..tasks)
                                .map(|_| {
                                    let p = 0.3 + 0.3 * rng.uniform() - 0.1 * m as f64 + 0.1;
                                    let q = p + 0.15 - shift + 0.1 * rng.uniform() - 0.05;
                                    let mut mean = |x: f64| {
                                        (0..repeats).map(|_| rng.bernoulli(x)).sum::<f64>()
                                            / repeats as f64
                                    };
                                    Some(mean(q) - mean(p))
                                })
                                .collect();
                            PerTask {
                                effect: "c".into(),
                                model: format!("m{m}"),
                                bound: 1.0,
                                values,
                            }
                        })
                        .collect();
                    let d = differences(&effects, alpha, SignFlipTest::MidP);
                    rejected += usize::from(matches!(
                        d[0].verdict,
                        EffectVerdict::Helps { .. } | EffectVerdict::Hurts { .. }
                    ));
                }
                let rate = rejected as f64 / n as f64;
                out.line(format_args!(
                    "{tasks:>5} {repeats:>6} {:>8.0}pp | {rate:>9.3}",
                    100.0 * diff
                ));
                if diff == 0.0 {
                    assert!(
                        rate <= alpha + slack(alpha, n),
                        "size {rate} at {tasks} tasks, {repeats} trials"
                    );
                }
            }
        }
    }
}

/// A layout with known components: tasks random (base uniform, var 0.04/3 = 0.01333), four arms
/// fixed at -0.1, 0, 0.05, 0.05 (var 0.005), two models fixed at -0.05, +0.05 (var 0.005), an
/// arm x model table fixed at +-0.03 (var 0.0036), task x arm random uniform +-0.08 (var
/// 0.002133), Bernoulli trials. Returns the layout.
fn layout(rng: &mut SplitMix64, tasks: usize, repeats: usize) -> Layout {
    (0..tasks)
        .map(|_| {
            let t = 0.4 * rng.uniform() - 0.2;
            (0..4)
                .map(|a| {
                    let ta = 0.16 * rng.uniform() - 0.08;
                    (0..2)
                        .map(|m| {
                            (0..repeats).map(|_| rng.bernoulli(probability(t, ta, a, m))).collect()
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}

const ARMS: [f64; 4] = [-0.1, 0.0, 0.05, 0.05];
const MODELS: [f64; 2] = [-0.05, 0.05];

fn probability(t: f64, ta: f64, a: usize, m: usize) -> f64 {
    let am = if a.is_multiple_of(2) == (m == 0) { 0.03 } else { -0.03 };
    0.5 + t + ARMS[a] + MODELS[m] + am + ta
}

#[test]
fn simulation_variance() {
    let alpha = 0.05;
    let n = reps(1_000);
    let mut out = Table::default();
    let mut rng = SplitMix64(0x7A21_A4CE_0000_0001);
    // The truth: each component's variance; trial noise E[p (1 - p)] by a long draw.
    let var_fixed = |xs: &[f64]| {
        let mu = xs.iter().sum::<f64>() / xs.len() as f64;
        xs.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / (xs.len() as f64 - 1.0)
    };
    let mut noise = 0.0;
    let draws = 400_000;
    let mut g = SplitMix64(7);
    for i in 0..draws {
        let p = probability(0.4 * g.uniform() - 0.2, 0.16 * g.uniform() - 0.08, i % 4, i / 4 % 2);
        noise += p * (1.0 - p) / draws as f64;
    }
    // The arm x model table +-0.03 in a checkerboard: double-centred cells +-0.03, (A-1)(M-1) = 3.
    let truth = [
        0.04 / 3.0,
        var_fixed(&ARMS),
        var_fixed(&MODELS),
        4.0 * 2.0 * 0.0009 / 3.0,
        0.0256 / 12.0,
        noise,
    ];
    let total: f64 = truth.iter().sum();
    out.line(format_args!("simulation_variance: {n} replications; 4 arms x 2 models, tasks random; share of each component"));
    out.line(format_args!(
        "{:>5} {:>6} | {:<21} {:>7} {:>7} {:>8}",
        "tasks", "trials", "component", "truth", "mean", "covered"
    ));
    for tasks in [20, 50] {
        for repeats in [2, 5] {
            let mut mean = [0.0; 6];
            let mut covered = [0usize; 6];
            for _ in 0..n {
                let y = layout(&mut rng, tasks, repeats);
                let d = decompose(&y, alpha, rng.next_u64(), 200)
                    .expect("a layout of 20 tasks or more");
                for (i, s) in d.components.iter().enumerate() {
                    mean[i] += s.share / n as f64;
                    let t = truth[i] / total;
                    covered[i] += usize::from(s.lo <= t && t <= s.hi);
                }
            }
            for i in 0..6 {
                let rate = covered[i] as f64 / n as f64;
                // Recovery: the mean share within 0.01 (and 3 simulation SEs) of the truth; 0.04
                // for task x configuration and trial noise, which the floor at 0 biases
                // (docs/statistics.md, "Variance by source").
                let bias = if i < 4 { 0.01 } else { 0.04 };
                let tolerance = bias + 3.0 * 0.05 / (n as f64).sqrt();
                assert!(
                    (mean[i] - truth[i] / total).abs() <= tolerance,
                    "{}: mean share {} against {} at {tasks} tasks, {repeats} trials",
                    crate::report::analysis::variance::COMPONENTS[i],
                    mean[i],
                    truth[i] / total
                );
                out.line(format_args!(
                    "{tasks:>5} {repeats:>6} | {:<21} {:>7.4} {:>7.4} {:>8.3}",
                    crate::report::analysis::variance::COMPONENTS[i],
                    truth[i] / total,
                    mean[i],
                    rate
                ));
            }
        }
    }
}
