//! Simulations of the sequential design (`ablate_core::sequential`): its error rates
//! under continuous monitoring, its coverage at the stopping time, peeking at
//! the fixed-design interval as a negative control, the size of its
//! equivalence decision, and how many tasks it takes to decide against the
//! fixed design with 80% power. Run once by `make test` (`cargo test --lib
//! simulation`), printing the tables; the populations are `simulation::Cell`'s.

use super::simulation::{Cell, SplitMix64, Table, reps, slack};
use super::*;
use ablate_core::sequential::{Decision, Sequence};

/// One replication: tasks enter one at a time until the sequence decides or
/// `max_tasks` have entered. Returns the decision, the tasks used, whether
/// the sequence still held the true difference then, and whether peeking
/// at the fixed design's t interval after every task (from the second) would
/// ever have excluded 0.
struct Outcome {
    decision: Decision,
    /// The differences the sequence took, in order.
    differences: Vec<f64>,
    tasks: usize,
    covered: bool,
    peeked_rejects: bool,
}

fn replicate(
    cell: &Cell,
    rng: &mut SplitMix64,
    alpha: f64,
    margin: Option<f64>,
    max_tasks: usize,
    t_crit: &[f64],
) -> Outcome {
    let truth = cell.effect();
    let mut seq =
        Sequence::untracked(alpha, margin, ablate_core::sequential::bets_for(max_tasks), &[truth]);
    let one = Cell { tasks: 1, ..*cell };
    let (mut c, mut t) =
        (vec![Vec::with_capacity(cell.repeats)], vec![Vec::with_capacity(cell.repeats)]);
    let (mut sum, mut sum2, mut peeked_rejects) = (0.0, 0.0, false);
    for (k, &crit) in t_crit.iter().enumerate().take(max_tasks + 1).skip(1) {
        one.draw(rng, &mut c, &mut t);
        let d = mean(&t[0]) - mean(&c[0]);
        seq.push(d);
        sum += d;
        sum2 += d * d;
        if k >= 2 && !peeked_rejects {
            let m = sum / k as f64;
            let var = (sum2 - k as f64 * m * m) / (k as f64 - 1.0);
            peeked_rejects = var > 1e-12 && m.abs() > crit * (var / k as f64).sqrt();
        }
        if seq.decision != Decision::Undecided {
            break;
        }
    }
    Outcome {
        decision: seq.decision,
        differences: seq.differences().to_vec(),
        tasks: seq.tasks(),
        covered: !seq.excludes(0),
        peeked_rejects,
    }
}

/// t_{1 - alpha/2, k - 1} for k tasks (index k), the fixed design's two-sided quantile.
fn t_table(alpha: f64, max_tasks: usize) -> Vec<f64> {
    (0..=max_tasks)
        .map(|k| if k < 2 { f64::NAN } else { t_quantile(1.0 - alpha / 2.0, (k - 1) as f64) })
        .collect()
}

const VALIDITY_REPS: usize = 2000;

/// Under no effect, with the rule applied after every task up to 500 tasks:
/// the rate of ever declaring helps or hurts, and the sequence's coverage
/// at the stopping time, over trials {1, 3, 5} x base {0.1, 0.5, 0.9} x
/// ICC {0, 0.5}, 2000 replications a cell, alpha 0.05. Ville's inequality
/// bounds the rate by alpha exactly; asserted: at most alpha plus 3 of the
/// simulation's standard errors at alpha (0.005), and coverage at least
/// 1 - alpha less the same. The negative control:
/// peeking at the fixed design's t interval after every task declares an
/// effect far more often than alpha; asserted above 2 alpha in every cell.
#[test]
fn simulation_sequential_validity() {
    let mut out = Table::default();
    let started = std::time::Instant::now();
    let (alpha, max_tasks) = (0.05, 500);
    let t_crit = t_table(alpha, max_tasks);
    let mut rng = SplitMix64(0x5E9_0E7C_E000_0027);
    let runs = reps(VALIDITY_REPS);
    out.line(format_args!(
        "simulation_sequential_validity: no effect, the rule after every task, up to {max_tasks} tasks, {runs} replications, alpha {alpha}"
    ));
    out.line(format_args!(
        "{:>6} {:>4} {:>4} | {:>12} {:>9} | {:>15}",
        "trials", "base", "icc", "P(ever h/h)", "coverage", "peeking t: P(ever)"
    ));
    let (mut worst_fp, mut worst_cover, mut least_peek) = (0.0f64, 1.0f64, 1.0f64);
    for &repeats in &[1usize, 3, 5] {
        for &base in &[0.1, 0.5, 0.9] {
            for &icc in &[0.0, 0.5] {
                let cell = Cell { tasks: max_tasks, repeats, base, icc, delta: 0.0 };
                let (mut fp, mut covered, mut peeked) = (0usize, 0usize, 0usize);
                for _ in 0..runs {
                    let o = replicate(&cell, &mut rng, alpha, None, max_tasks, &t_crit);
                    fp += matches!(o.decision, Decision::Helps | Decision::Hurts) as usize;
                    covered += o.covered as usize;
                    peeked += o.peeked_rejects as usize;
                }
                let n = runs as f64;
                let (fp, covered, peeked) = (fp as f64 / n, covered as f64 / n, peeked as f64 / n);
                out.line(format_args!(
                    "{repeats:>6} {base:>4} {icc:>4} | {fp:>12.3} {covered:>9.3} | {peeked:>15.3}"
                ));
                worst_fp = worst_fp.max(fp);
                worst_cover = worst_cover.min(covered);
                least_peek = least_peek.min(peeked);
            }
        }
    }
    out.line(format_args!(
        "worst: P(ever helps or hurts) {worst_fp:.3}, coverage {worst_cover:.3}; peeking at the t interval: at least {least_peek:.3} ({:.0} s)",
        started.elapsed().as_secs_f64()
    ));
    let slack = slack(alpha, runs);
    assert!(worst_fp <= alpha + slack, "false decisions {worst_fp}");
    assert!(worst_cover >= 1.0 - alpha - slack, "coverage {worst_cover}");
    assert!(least_peek > 2.0 * alpha, "the negative control shows the inflation: {least_peek}");
}

/// The true difference exactly at the margin (10 pp, up or down, and
/// the effect varying by task): "equivalent" declared in at most alpha of
/// replications (plus 3 standard errors, 0.015), up to 500 tasks, 2000 replications a cell.
#[test]
fn simulation_sequential_equivalence_size() {
    let mut out = Table::default();
    let (alpha, margin, max_tasks) = (0.05, 0.1, 500);
    let t_crit = t_table(alpha, max_tasks);
    let mut rng = SplitMix64(0xE9_0175_1CE0_0027);
    let runs = reps(VALIDITY_REPS);
    out.line(format_args!(
        "simulation_sequential_equivalence_size: the difference at the margin ±{margin}, up to {max_tasks} tasks, {runs} replications"
    ));
    let mut worst = 0.0f64;
    for &repeats in &[1usize, 5] {
        for &(base, icc) in &[(0.3, 0.0), (0.5, 0.5), (0.8, 0.25)] {
            let cell = Cell { tasks: max_tasks, repeats, base, icc, delta: margin };
            let mut equivalent = 0usize;
            for _ in 0..runs {
                equivalent += (replicate(&cell, &mut rng, alpha, Some(margin), max_tasks, &t_crit)
                    .decision
                    == Decision::Equivalent) as usize;
            }
            let rate = equivalent as f64 / runs as f64;
            out.line(format_args!(
                "  trials {repeats} base {base} icc {icc}: P(equivalent) {rate:.3}"
            ));
            worst = worst.max(rate);
        }
    }
    out.line(format_args!("worst P(equivalent) at the margin: {worst:.3}"));
    assert!(worst <= alpha + slack(alpha, runs), "{worst}");
}

/// Tasks to a decision against the fixed design. The fixed design: `fixed`
/// tasks, the paired t-test at alpha with 80% power at its MDE (from the
/// true variance of the per-task difference under no effect). The
/// sequential design: up to twice as many tasks, its bets sized as a run
/// with that budget sizes them (`sequential::bets_for`: for the fixed
/// design's number). Simulated effects vary by task (`Cell`). At effects of 1x, 2x and 4x the MDE: the mean tasks used over
/// the fixed design's, and the share decided (rightly: helps); at no effect
/// with a margin of 2x the MDE: the mean tasks used and the share decided
/// equivalent. 2000 replications a cell, each figure with its simulation
/// standard error. Asserted: at 2x at most 0.6 and at
/// 4x at most 0.35 of the fixed design's tasks, in every cell, and the
/// sequence holding the true difference at the stopping time in at least
/// 1 - alpha of replications (less 3 standard errors, 0.029).
#[test]
fn simulation_sequential_efficiency() {
    let mut out = Table::default();
    let started = std::time::Instant::now();
    let (alpha, fixed, reps) = (0.05, 200usize, reps(2000));
    let max_tasks = 2 * fixed;
    let t_crit = t_table(alpha, max_tasks);
    let mut rng = SplitMix64(0xEF_F1C1_E000_0027);
    out.line(format_args!(
        "simulation_sequential_efficiency: the fixed design {fixed} tasks (paired t, 80% power at its MDE, alpha {alpha}); sequential up to {max_tasks} tasks; {reps} replications"
    ));
    out.line(format_args!(
        "{:>6} {:>4} {:>4} {:>6} | {:>22} {:>22} {:>22} | {:>20}",
        "trials",
        "base",
        "icc",
        "MDE",
        "1x: ratio±se ok±se",
        "2x: ratio±se ok±se",
        "4x: ratio±se ok±se",
        "0, margin 2x: ratio/eq"
    ));
    let mut failures = Vec::new();
    let mut worst_cover: f64 = 1.0;
    for &(repeats, base, icc) in
        &[(1usize, 0.5, 0.5), (3, 0.5, 0.0), (3, 0.1, 0.25), (5, 0.3, 0.25)]
    {
        // Var(d) under no effect: two arms of `repeats` Bernoulli trials at a task rate p with
        // E[p (1 - p)] = base (1 - base) (1 - icc) (Beta with that ICC): 2 E[p (1 - p)] / repeats.
        let var_d = 2.0 * base * (1.0 - base) * (1.0 - icc) / repeats as f64;
        let mde = min_detectable_effect(var_d, fixed as u64, alpha, 0.8);
        let mut row = format!("{repeats:>6} {base:>4} {icc:>4} {mde:>6.3} |");
        for &k in &[1.0, 2.0, 4.0] {
            let cell = Cell { tasks: max_tasks, repeats, base, icc, delta: k * mde };
            let (mut used, mut right, mut covered) = (Vec::new(), 0usize, 0usize);
            for _ in 0..reps {
                let o = replicate(&cell, &mut rng, alpha, None, max_tasks, &t_crit);
                used.push(o.tasks as f64 / fixed as f64);
                right += (o.decision == Decision::Helps) as usize;
                covered += o.covered as usize;
            }
            worst_cover = worst_cover.min(covered as f64 / reps as f64);
            let ratio = mean(&used);
            let share = right as f64 / reps as f64;
            row.push_str(&format!(
                " {ratio:>5.2}±{:.3} {share:>4.2}±{:.3} ",
                sample_sd(&used) / (reps as f64).sqrt(),
                (share * (1.0 - share) / reps as f64).sqrt()
            ));
            if (k == 2.0 && ratio > 0.6) || (k == 4.0 && ratio > 0.35) {
                failures.push(format!("trials {repeats} base {base} icc {icc} at {k}x MDE: {ratio:.2} of the fixed design's tasks"));
            }
        }
        let cell = Cell { tasks: max_tasks, repeats, base, icc, delta: 0.0 };
        let (mut tasks, mut equivalent) = (0usize, 0usize);
        for _ in 0..reps {
            let o = replicate(&cell, &mut rng, alpha, Some(2.0 * mde), max_tasks, &t_crit);
            tasks += o.tasks;
            equivalent += (o.decision == Decision::Equivalent) as usize;
        }
        row.push_str(&format!(
            "| {:>10.2} {:>9.2}",
            tasks as f64 / reps as f64 / fixed as f64,
            equivalent as f64 / reps as f64
        ));
        out.line(format_args!("{row}"));
    }
    out.line(format_args!(
        "coverage of the true difference at the stopping time, at least {worst_cover:.3} ({:.0} s)",
        started.elapsed().as_secs_f64()
    ));
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(worst_cover >= 1.0 - alpha - slack(alpha, reps), "coverage {worst_cover}");
}

/// Replications a cell of [`simulation_sequential_estimate`].
const ESTIMATE_REPS: usize = 1000;

/// The estimate after stopping: the fixed design of 100 tasks (paired t, 80% power at its MDE),
/// the sequential design up to 200 tasks (bets sized for 100), at 1x and 2x that MDE; over the
/// replications decided "helps", the naive mean at the stop and the bias-reduced estimate
/// (`report::stopping`, the report's own), each as mean / truth - 1 with its standard error.
/// Asserted: the bias-reduced estimate's relative bias is smaller in size than the naive
/// mean's in every cell.
#[test]
fn simulation_sequential_estimate() {
    use crate::report::stopping::{StoppingRule, bias_reduced};
    let mut out = Table::default();
    let (alpha, fixed, reps) = (0.05, 100usize, reps(ESTIMATE_REPS));
    let max_tasks = 2 * fixed;
    let t_crit = t_table(alpha, max_tasks);
    let mut rng = SplitMix64(0xE571_4A7E_0000_0001);
    out.line(format_args!("simulation_sequential_estimate: fixed design {fixed} tasks, sequential up to {max_tasks}; {reps} replications a cell; over the 'helps' decisions, estimate / truth - 1 (standard error)"));
    out.line(format_args!(
        "{:>6} {:>4} {:>4} {:>6} {:>3} | {:>7} {:>16} {:>16}",
        "trials", "base", "icc", "effect", "x", "helps", "naive", "bias-reduced"
    ));
    let mut failures = Vec::new();
    for &(repeats, base, icc) in &[(1usize, 0.5, 0.5), (3, 0.3, 0.25)] {
        let var_d = 2.0 * base * (1.0 - base) * (1.0 - icc) / repeats as f64;
        let mde = min_detectable_effect(var_d, fixed as u64, alpha, 0.8);
        for &k in &[1.0, 2.0] {
            let cell = Cell { tasks: max_tasks, repeats, base, icc, delta: k * mde };
            let truth = cell.effect();
            let (mut naive, mut reduced) = (Vec::new(), Vec::new());
            for r in 0..reps {
                let o = replicate(&cell, &mut rng, alpha, None, max_tasks, &t_crit);
                if o.decision != Decision::Helps {
                    continue;
                }
                let rule = StoppingRule {
                    alpha,
                    margin: None,
                    sizing: ablate_core::sequential::bets_for(max_tasks),
                    horizon: max_tasks,
                };
                naive.push(mean(&o.differences) / truth - 1.0);
                reduced.push(bias_reduced(&o.differences, &rule, r as u64) / truth - 1.0);
            }
            let se = |v: &[f64]| sample_sd(v) / (v.len() as f64).sqrt();
            let (bn, br) = (mean(&naive), mean(&reduced));
            out.line(format_args!(
                "{repeats:>6} {base:>4} {icc:>4} {truth:>6.3} {k:>3} | {:>7.3} {:>+8.3} ({:.3}) {:>+8.3} ({:.3})",
                naive.len() as f64 / reps as f64,
                bn,
                se(&naive),
                br,
                se(&reduced)
            ));
            if br.abs() >= bn.abs() {
                failures.push(format!(
                    "trials {repeats} base {base} icc {icc} at {k}x: {br:.3} vs {bn:.3}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
