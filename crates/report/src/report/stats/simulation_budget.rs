//! Coverage of a budget sweep's bands (`report::analysis::budget`) on synthetic curves with
//! known truth: three levels, the same tasks at each; the treatment's effect grows from 0 to
//! `top` (0, top / 2, top), each task moved in proportion to its room as in
//! `simulation::Cell`. A band covers when every level's interval, each at `1 - alpha / 3`, holds
//! its true value at once; the steps' when both steps' intervals (`analysis::budget::effect_change`),
//! each at `1 - alpha / 2`, hold theirs. The table is in docs/statistics.md, "Budget curves".

use super::simulation::{SplitMix64, Table, reps, slack};
use super::*;
use crate::report::analysis::budget::effect_change;

/// A level's outcomes by task: the control's and the treatment's.
type Level = (Vec<Vec<f64>>, Vec<Vec<f64>>);

/// One replication's tasks: each task's control rate (Beta, mean `base`, intraclass correlation
/// 0.3), the control's and the treatment's outcomes at each level.
fn draw(
    rng: &mut SplitMix64,
    (tasks, repeats, base): (usize, usize, f64),
    effects: [f64; 3],
) -> [Level; 3] {
    let s = (1.0 - 0.3) / 0.3;
    let rates: Vec<f64> = (0..tasks).map(|_| rng.beta(base * s, (1.0 - base) * s)).collect();
    effects.map(|delta| {
        let mut c = Vec::new();
        let mut t = Vec::new();
        for &p in &rates {
            let q = p + delta * (1.0 - p) / (1.0 - base);
            c.push((0..repeats).map(|_| rng.bernoulli(p)).collect());
            t.push((0..repeats).map(|_| rng.bernoulli(q)).collect());
        }
        (c, t)
    })
}

#[test]
fn simulation_budget_bands() {
    let alpha = 0.05;
    let n = reps(2_000);
    let mut out = Table::default();
    let mut rng = SplitMix64(0xB0D6_E700_0000_0001);
    out.line(format_args!(
        "simulation_budget_bands: 3 levels, effect 0, top/2, top; ICC 0.3; {n} replications; simultaneous 95%"
    ));
    out.line(format_args!(
        "{:>5} {:>6} {:>5} {:>5} | {:>10} {:>11} {:>11}",
        "tasks", "trials", "base", "top", "arm band", "effect band", "effect steps"
    ));
    for tasks in [10, 30] {
        for repeats in [2, 5] {
            for base in [0.2, 0.5] {
                for top in [0.0, 0.2] {
                    let effects = [0.0, top / 2.0, top];
                    let mut hits = [0usize; 3];
                    for _ in 0..n {
                        let levels = draw(&mut rng, (tasks, repeats, base), effects);
                        let band = |l: &Level, j: usize| {
                            let i = paired_inference_by(
                                &l.0,
                                &l.1,
                                1.0 - alpha / 3.0,
                                SignFlipTest::MidP,
                            );
                            i.lo <= effects[j] && effects[j] <= i.hi
                        };
                        let arm = |l: &Level, j: usize| {
                            let e = pass_rate_wilson(&l.1, 1.0 - alpha / 3.0);
                            let truth = base + effects[j];
                            e.lo <= truth && truth <= e.hi
                        };
                        let step = |j: usize| {
                            let (_, lo, hi) = effect_change(
                                &levels[j],
                                &levels[j + 1],
                                1.0 - alpha / 2.0,
                                SignFlipTest::MidP,
                            );
                            let truth = effects[j + 1] - effects[j];
                            lo <= truth && truth <= hi
                        };
                        hits[0] += usize::from((0..3).all(|j| arm(&levels[j], j)));
                        hits[1] += usize::from((0..3).all(|j| band(&levels[j], j)));
                        hits[2] += usize::from((0..2).all(step));
                    }
                    let rate = hits.map(|h| h as f64 / n as f64);
                    out.line(format_args!(
                        "{tasks:>5} {repeats:>6} {base:>5} {top:>5} | {:>10.3} {:>11.3} {:>11.3}",
                        rate[0], rate[1], rate[2]
                    ));
                    for (r, what) in rate.iter().zip(["arm band", "effect band", "effect steps"]) {
                        assert!(
                            *r >= 0.93 - slack(0.95, n),
                            "{what} covered {r} at {tasks} tasks, {repeats} trials, base {base}, top {top}"
                        );
                    }
                }
            }
        }
    }
}
