//! Harness or model: the share of the outcome's variance from the task, the arm (the harness),
//! the model, arm x model, task x configuration (a task's response to an arm or a model beyond
//! their average effects) and trial noise. On the outcome's own scale (a pass is 1): each trial
//! is `mean + task + arm + model + arm.model + the task's interactions + noise`, the crossed
//! random-effects model of a balanced three-way layout, estimated by the method of moments
//! (ANOVA: Searle, Casella & McCulloch, *Variance Components*, 1992, ch. 4): the trial noise from
//! the spread within each (task, arm, model) cell, the other components from the mean squares of
//! the cells' means and their expected values, solved from the highest interaction down and
//! reported as 0 where negative. Tasks are a sample (random); arms and models are the ones run
//! (fixed: their component is the spread of their effects, `sum of squares / (levels - 1)`), the
//! unrestricted mixed model. So the intervals resample tasks (a percentile bootstrap, seeded by
//! the experiment's seed). Checked against known components by simulation
//! (`simulation_variance`, docs/statistics.md).

use super::containers::Groups;
use super::primary::Primary;
use crate::report::load::RunData;
use crate::report::stats;
use crate::report::warnings::VarianceNote;
use serde::Serialize;

/// Bootstrap resamples of the tasks for the intervals.
pub(crate) const BOOTSTRAP: usize = 400;
/// The fewest tasks a decomposition is made from, and the fewest its intervals are drawn from
/// (a percentile bootstrap of fewer tasks has too few distinct resamples to mean anything).
pub(crate) const MIN_TASKS: usize = 3;
pub(crate) const MIN_TASKS_INTERVALS: usize = 10;

/// The components, in the order reported.
pub(crate) const COMPONENTS: [&str; 6] =
    ["task", "arm", "model", "arm x model", "task x configuration", "trial noise"];

#[derive(Debug, Clone, Serialize)]
pub struct Decomposition {
    /// Tasks every (arm, model) ran; arms and models; trials a cell (harmonic mean).
    pub tasks: usize,
    pub arms: usize,
    pub models: usize,
    pub trials_per_cell: f64,
    pub components: Vec<Share>,
    /// The intervals' level (`1 - alpha`).
    pub level: f64,
    /// Tasks and trials a task for 80% power on a difference of two arms of 10 pp.
    pub next: Vec<NextExperiment>,
    /// What could not be separated, when something could not.
    pub notes: Vec<VarianceNote>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Share {
    pub component: &'static str,
    pub variance: f64,
    /// Its share of the sum of the components, with the bootstrap interval.
    pub share: f64,
    pub lo: f64,
    pub hi: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct NextExperiment {
    pub trials_per_task: u32,
    pub tasks: Option<u64>,
}

/// A balanced layout: `y[t][a][m]` the trials' values of task t, arm a, model m.
pub(crate) type Layout = Vec<Vec<Vec<Vec<f64>>>>;

/// The decomposition of a run's primary outcome over the tasks every (arm, model) ran; None
/// with fewer than two tasks or when a value is missing or outside [0, 1].
pub(super) fn of_run(
    data: &RunData,
    groups: &Groups,
    primary: &Primary,
    alpha: f64,
) -> Option<Decomposition> {
    let (n_tasks, n_arms, n_models) =
        (data.tasks.list.len(), data.arms.list.len(), data.models.list.len());
    let mut y: Layout = vec![vec![vec![Vec::new(); n_models]; n_arms]; n_tasks];
    for ((m, a), rows) in groups {
        for r in rows {
            let v = primary.value(data, r);
            if !(0.0..=1.0).contains(&v) {
                return None;
            }
            y[r.task as usize][*a as usize][*m as usize].push(v);
        }
    }
    // Arms or models with no trial at all are not part of the layout.
    let ran_arm: Vec<bool> =
        (0..n_arms).map(|a| y.iter().any(|t| t[a].iter().any(|c| !c.is_empty()))).collect();
    let ran_model: Vec<bool> =
        (0..n_models).map(|m| y.iter().any(|t| t.iter().any(|a| !a[m].is_empty()))).collect();
    let y: Layout = y
        .into_iter()
        .map(|t| {
            t.into_iter()
                .zip(&ran_arm)
                .filter(|(_, r)| **r)
                .map(|(a, _)| {
                    a.into_iter().zip(&ran_model).filter(|(_, r)| **r).map(|(c, _)| c).collect()
                })
                .collect::<Vec<Vec<Vec<f64>>>>()
        })
        .filter(|t: &Vec<Vec<Vec<f64>>>| t.iter().flatten().all(|c| !c.is_empty()))
        .collect();
    if y.first().is_none_or(|t| t.first().is_none_or(|a| a.is_empty())) {
        return None; // no arm or no model ran a trial
    }
    decompose(&y, alpha, data.manifest.experiment.seed, BOOTSTRAP)
}

/// The decomposition of a complete layout, with bootstrap intervals over its tasks.
pub(crate) fn decompose(y: &Layout, alpha: f64, seed: u64, draws: usize) -> Option<Decomposition> {
    let t = y.len();
    if t < MIN_TASKS {
        return None;
    }
    let draws = if t < MIN_TASKS_INTERVALS { 0 } else { draws };
    let (point, arm_task) = components(y);
    let mut rng = stats::SplitMix64(seed ^ 0x5CA1_AB1E_0000_0000);
    let draws: Vec<[f64; 6]> = (0..draws)
        .map(|_| {
            let sample: Layout =
                (0..t).map(|_| y[(rng.next_u64() % t as u64) as usize].clone()).collect();
            shares(&components(&sample).0)
        })
        .collect();
    let shares_now = shares(&point);
    let mut out = Vec::new();
    for (i, name) in COMPONENTS.iter().enumerate() {
        let mut xs: Vec<f64> = draws.iter().map(|d| d[i]).filter(|x| x.is_finite()).collect();
        xs.sort_by(f64::total_cmp);
        let q = |p: f64| {
            xs.get(((xs.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN)
        };
        out.push(Share {
            component: name,
            variance: point[i],
            share: shares_now[i],
            lo: q(alpha / 2.0),
            hi: q(1.0 - alpha / 2.0),
        });
    }
    let (a, m) = (y[0].len(), y[0][0].len());
    let n_h = harmonic_trials(y);
    let mut notes = Vec::new();
    if t < MIN_TASKS_INTERVALS {
        notes.push(VarianceNote::NoIntervals { tasks: t, fewest: MIN_TASKS_INTERVALS });
    }
    if n_h < 2.0 - 1e-9 {
        notes.push(VarianceNote::OneTrialACell);
    }
    if a < 2 {
        notes.push(VarianceNote::OneArm);
    }
    if m < 2 {
        notes.push(VarianceNote::OneModel);
    }
    // An arm difference's per-task variance: twice (task x arm + noise / r), the task x arm part
    // with its three-way share (task x model cancels in a difference of arms). Not said without
    // two arms or without trial noise to go by.
    let next = if a < 2 || n_h < 2.0 - 1e-9 {
        vec![]
    } else {
        [1u32, 2, 5]
            .iter()
            .map(|&r| {
                let var_d = 2.0 * (arm_task + point[5] / r as f64);
                let tasks = stats::sample_size_paired(var_d, 0.10, alpha, 0.8);
                NextExperiment { trials_per_task: r, tasks }
            })
            .collect()
    };
    Some(Decomposition {
        tasks: t,
        arms: a,
        models: m,
        trials_per_cell: n_h,
        components: out,
        level: 1.0 - alpha,
        next,
        notes,
    })
}

/// Shares of the sum (NaN when every component is 0).
fn shares(c: &[f64; 6]) -> [f64; 6] {
    let total: f64 = c.iter().sum();
    c.map(|x| x / total)
}

/// The harmonic mean of the cells' trial counts.
fn harmonic_trials(y: &Layout) -> f64 {
    let cells: Vec<f64> = y.iter().flatten().flatten().map(|c| c.len() as f64).collect();
    cells.len() as f64 / cells.iter().map(|n| 1.0 / n).sum::<f64>()
}

/// The six components by the method of moments: [task, arm, model, arm x model,
/// task x configuration, trial noise], each at least 0; and the task x arm part of task x
/// configuration (task x arm and task x arm x model, floored at 0), which a difference of two arms
/// carries.
pub(crate) fn components(y: &Layout) -> ([f64; 6], f64) {
    let (t, a, m) = (y.len(), y[0].len(), y[0][0].len());
    let sizes = [t, a, m];
    // Trial noise: the pooled variance within cells (none with one trial a cell).
    let (mut ss, mut df) = (0.0, 0usize);
    for c in y.iter().flatten().flatten() {
        let mu = stats::mean(c);
        ss += c.iter().map(|v| (v - mu).powi(2)).sum::<f64>();
        df += c.len() - 1;
    }
    let noise = if df > 0 { ss / df as f64 } else { 0.0 };
    let n_h = harmonic_trials(y);
    let cell = |i: usize| -> f64 {
        let (ti, ai, mi) = (i / (a * m), i / m % a, i % m);
        stats::mean(&y[ti][ai][mi])
    };
    let means: Vec<f64> = (0..t * a * m).map(cell).collect();
    // Each term (a set of factors, bit 0 task, 1 arm, 2 model) over the factors of size > 1.
    let present: u32 = (0..3).filter(|&f| sizes[f] > 1).fold(0, |s, f| s | 1 << f);
    let terms: Vec<u32> = (1u32..8).filter(|s| s & !present == 0).collect();
    let marginals = marginals(&means, sizes);
    let ms = |s: u32| mean_square(&marginals, sizes, s);
    // Expected mean squares (the unrestricted mixed model, tasks random): E[MS_S] = the sum over
    // S' containing S, S' = S or S' holding the task, of (prod of sizes outside S') var_S'.
    let outside =
        |s: u32| -> f64 { (0..3).filter(|f| s >> f & 1 == 0).map(|f| sizes[f] as f64).product() };
    let mut var = [0.0f64; 8];
    let mut order = terms.clone();
    order.sort_by_key(|s| std::cmp::Reverse(s.count_ones()));
    for &s in &order {
        // Tasks are random, arms and models fixed: a higher term enters a mean square's
        // expectation only when it involves the task (fixed interactions sum to zero).
        let above: f64 = terms
            .iter()
            .filter(|&&u| u != s && u & s == s && u & 1 == 1)
            .map(|&u| outside(u) * var[u as usize])
            .sum();
        // Every cell mean carries its trials' noise, `noise / n`, in every mean square.
        var[s as usize] = (ms(s) - above - noise / n_h) / outside(s);
    }
    let v = |s: u32| var[s as usize].max(0.0);
    let (task, arm, model) = (1u32, 2u32, 4u32);
    let arm_task = (var[(task | arm) as usize] + var[(task | arm | model) as usize]).max(0.0);
    let parts = [
        v(task),
        v(arm),
        v(model),
        v(arm | model),
        // Summed before the floor at 0: flooring each part would bias their sum upwards.
        (var[(task | arm) as usize]
            + var[(task | model) as usize]
            + var[(task | arm | model) as usize])
            .max(0.0),
        noise,
    ];
    (parts, arm_task)
}

/// The mean square of term `s` (a set of factors) in the table of cell means: its effects by
/// inclusion-exclusion over the marginal means (`marginals`), squared and summed over cells, over
/// its degrees of freedom (the product of its factors' sizes less one).
fn mean_square(marginals: &[Vec<f64>; 8], sizes: [usize; 3], s: u32) -> f64 {
    let cells = sizes.iter().product::<usize>();
    // Each subset `u` of `s` enters with the sign (-1)^(|s| - |u|).
    let terms: Vec<(f64, &Vec<f64>)> = (0u32..8)
        .filter(|u| u & !s == 0)
        .map(|u| {
            let even = (s.count_ones() - u.count_ones()).is_multiple_of(2);
            (if even { 1.0 } else { -1.0 }, &marginals[u as usize])
        })
        .collect();
    let ss: f64 =
        (0..cells).map(|i| terms.iter().map(|(sign, m)| sign * m[i]).sum::<f64>().powi(2)).sum();
    let df: f64 = (0..3).filter(|f| s >> f & 1 == 1).map(|f| sizes[f] as f64 - 1.0).product();
    ss / df
}

/// For each set `u` of factors, every cell's marginal mean over the factors outside `u` (cells
/// indexed `(task * arms + arm) * models + model`).
fn marginals(means: &[f64], sizes: [usize; 3]) -> [Vec<f64>; 8] {
    let coords = |i: usize| [i / (sizes[1] * sizes[2]), i / sizes[2] % sizes[1], i % sizes[2]];
    std::array::from_fn(|u| {
        let key = |i: usize| -> usize {
            let c = coords(i);
            (0..3).fold(0, |k, f| k * sizes[f] + if u >> f & 1 == 1 { c[f] } else { 0 })
        };
        let mut sum = vec![0.0; means.len()];
        let mut n = vec![0usize; means.len()];
        for (i, &x) in means.iter().enumerate() {
            sum[key(i)] += x;
            n[key(i)] += 1;
        }
        (0..means.len()).map(|i| sum[key(i)] / n[key(i)] as f64).collect()
    })
}
