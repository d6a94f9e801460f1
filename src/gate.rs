//! The CI regression gate on pass rate.
//!
//! Pooled pass counts of the candidate and the baseline over the tasks both
//! hold, and two exact unconditional tests (`ExactTest`): FAIL when "not
//! worse" is rejected at alpha (a significant regression), PASS when "worse by
//! the margin or more" is rejected at alpha (non-inferior), INCONCLUSIVE
//! otherwise; the one-sided bounds that invert the same tests are printed
//! beside. A baseline is a per-task CSV (`ablate baseline save`) or a run
//! folder; it must match the candidate's suite, tasks, model and budget.
//! docs/statistics.md describes the rule.

use crate::error::InputError;
use crate::record::TrialStatus;
use crate::report::load::RunData;
use crate::report::stats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// `ablate gate`'s inputs, as the command line gives them.
#[derive(Debug, Clone)]
pub struct GateOptions {
    /// A baseline CSV (`ablate baseline save`) or a run folder.
    pub baseline: std::path::PathBuf,
    /// The candidate run folder.
    pub candidate: std::path::PathBuf,
    pub margin: f64,
    pub alpha: f64,
    pub arm: Option<String>,
    pub model: Option<String>,
    pub allow_drift: bool,
    /// Append the Markdown summary to this file (a CI job summary).
    pub markdown: Option<std::path::PathBuf>,
    /// Write a JUnit report here.
    pub junit: Option<std::path::PathBuf>,
}

/// What the gate found: the drifts between baseline and candidate, the
/// report to print (none when a drift refused the comparison), the exit code.
#[derive(Debug)]
pub struct GateOutcome {
    pub drifts: Vec<String>,
    pub decided: Option<String>,
    pub exit: crate::error::Exit,
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("{path}: {source}")]
    Write { path: std::path::PathBuf, source: std::io::Error },
}

/// The gate's pipeline: check the options, read the baseline and the
/// candidate, refuse a drift (unless allowed), decide, and write the
/// Markdown and JUnit outputs asked for.
pub fn run(o: &GateOptions) -> Result<GateOutcome, GateError> {
    if !(o.margin >= 0.0 && o.margin < 1.0) {
        return Err(InputError::at(&o.candidate, "--margin", format!("{} is not in [0, 1)", o.margin)).into());
    }
    if !(o.alpha > 0.0 && o.alpha < 0.5) {
        return Err(InputError::at(&o.candidate, "--alpha", format!("{} is not in (0, 0.5)", o.alpha)).into());
    }
    let load = |dir: &Path| crate::report::load::load(dir).map_err(|e| InputError::new(dir, e.to_string()));
    let base = if o.baseline.is_dir() {
        baseline_of_run(&load(&o.baseline)?, o.arm.as_deref(), o.model.as_deref()).map_err(|e| InputError::new(&o.baseline, e))?
    } else {
        read_baseline(&o.baseline)?
    };
    let arm = o.arm.clone().or_else(|| Some(base[0].arm.clone()));
    let model = o.model.clone().or_else(|| Some(base[0].model.clone()));
    let cand = baseline_of_run(&load(&o.candidate)?, arm.as_deref(), model.as_deref()).map_err(|e| InputError::new(&o.candidate, e))?;
    let drifts = drifts(&base, &cand);
    if !drifts.is_empty() && !o.allow_drift {
        return Ok(GateOutcome { drifts, decided: None, exit: crate::error::Exit::Usage });
    }
    let pairs = pair(&base, &cand);
    let decision = decide(&pairs, o.alpha, o.margin);
    let oc = characteristics(&decision);
    let hint = if decision.verdict == Verdict::Inconclusive { size_hint(&decision) } else { None };
    fn written(path: &Path) -> impl Fn(std::io::Error) -> GateError + '_ {
        move |source| GateError::Write { path: path.to_path_buf(), source }
    }
    if let Some(path) = &o.markdown {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(written(path))?;
        f.write_all(markdown(&decision, &pairs, &oc, hint).as_bytes()).map_err(written(path))?;
    }
    if let Some(path) = &o.junit {
        std::fs::write(path, junit(&decision, &pairs)).map_err(written(path))?;
    }
    Ok(GateOutcome { drifts, decided: Some(render(&decision, &pairs, &oc, hint)), exit: decision.verdict.exit_code() })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Pass,
    Fail,
    Inconclusive,
}

impl Verdict {
    pub fn exit_code(self) -> crate::error::Exit {
        match self {
            Verdict::Pass => crate::error::Exit::Ok,
            Verdict::Fail => crate::error::Exit::Failure,
            Verdict::Inconclusive => crate::error::Exit::Inconclusive,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Inconclusive => "INCONCLUSIVE",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub verdict: Verdict,
    pub n_tasks: usize,
    /// Pooled pass counts over the paired tasks.
    pub baseline_passes: u64,
    pub baseline_trials: u64,
    pub candidate_passes: u64,
    pub candidate_trials: u64,
    /// Candidate rate - baseline rate (pooled over the paired tasks).
    pub mean: f64,
    /// One-sided (1 - alpha) bounds on the difference, by inverting the exact tests.
    pub lower: f64,
    pub upper: f64,
    /// Exact p-value of "worse by the margin or more" (PASS when <= alpha).
    pub p_non_inferior: f64,
    /// Exact p-value of "not worse" (FAIL when <= alpha).
    pub p_regression: f64,
    pub margin: f64,
    pub alpha: f64,
}

/// Points of the nuisance grid over which the exact p-values take their supremum.
const NUISANCE_GRID: usize = 200;

/// `ln C(n, k)` for k = 0..=n.
fn ln_choose(n: u64) -> Vec<f64> {
    (0..=n).map(|k| statrs::function::factorial::ln_binomial(n, k)).collect()
}

fn pmf(ln_c: &[f64], p: f64) -> Vec<f64> {
    let n = ln_c.len() - 1;
    (0..=n)
        .map(|k| {
            if p <= 0.0 {
                (k == 0) as u8 as f64
            } else if p >= 1.0 {
                (k == n) as u8 as f64
            } else {
                (ln_c[k] + k as f64 * p.ln() + (n - k) as f64 * (1.0 - p).ln()).exp()
            }
        })
        .collect()
}

/// Confidence level of the interval for the nuisance rate (Berger & Boos):
/// the p-value is the largest tail probability over that interval, plus `1 - NUISANCE_CONF`.
const NUISANCE_CONF: f64 = 0.999;

/// Exact unconditional test (Barnard 1947; Chan 1998, Stat. Med. 17:1403-1413,
/// for a non-zero null difference) on baseline `x` of `nx` and candidate `y`
/// of `ny` independent trials, with the nuisance rate confined to a
/// confidence interval (Berger & Boos 1994, JASA 89:1012-1016).
///
/// * `upper = true`: `H0: py - px <= -shift` against `py - px > -shift`
///   (non-inferiority with `shift` = the margin);
/// * `upper = false`: `H0: py - px >= -shift` against `py - px < -shift`
///   (a regression with `shift = 0`).
///
/// The statistic is the Wald statistic with half-counts added to the
/// variance, `Z = (y/ny - x/nx + shift) / sqrt(a(1-a)/nx + b(1-b)/ny)`,
/// `a = (x + 1/2)/(nx + 1)`, `b = (y + 1/2)/(ny + 1)`, made monotone in `y`
/// (its running maximum over `y' <= y` for `upper`, running minimum over
/// `y' >= y` otherwise), so the rejection region is one threshold of `y`
/// per `x`. Under the null boundary `py = px - shift` (where the tail is
/// largest) the tail probability is computed exactly for `px` on a
/// 201-point grid; the p-value is its largest value over the grid points
/// inside the 99.9% Clopper-Pearson interval of the baseline rate `px`
/// from `x`, plus 0.001. Valid at every size (up to the grid).
pub struct ExactTest {
    nx: u64,
    ny: u64,
    upper: bool,
    /// Monotone statistic per (x, y), row-major.
    stat: Vec<f64>,
    grid: Vec<f64>,
    fx: Vec<Vec<f64>>,
    /// Upper tails `P(Y >= k)` (for `upper`) or lower `P(Y <= k)` at each grid point.
    tail: Vec<Vec<f64>>,
    /// The nuisance interval for each baseline count, computed when first needed.
    interval: Vec<std::sync::OnceLock<(f64, f64)>>,
}

impl ExactTest {
    pub fn new(nx: u64, ny: u64, shift: f64, upper: bool) -> ExactTest {
        let (from, to) = (shift.max(0.0), (1.0 + shift).min(1.0));
        let mut t = ExactTest { nx, ny, upper, stat: Vec::new(), grid: Vec::new(), fx: Vec::new(), tail: Vec::new(), interval: Vec::new() };
        if nx == 0 || ny == 0 || from > to {
            return t;
        }
        let (nxf, nyf) = (nx as f64, ny as f64);
        t.stat = vec![0.0; ((nx + 1) * (ny + 1)) as usize];
        for x in 0..=nx {
            let a = (x as f64 + 0.5) / (nxf + 1.0);
            let row = &mut t.stat[(x * (ny + 1)) as usize..((x + 1) * (ny + 1)) as usize];
            for y in 0..=ny {
                let b = (y as f64 + 0.5) / (nyf + 1.0);
                row[y as usize] = (y as f64 / nyf - x as f64 / nxf + shift) / (a * (1.0 - a) / nxf + b * (1.0 - b) / nyf).sqrt();
            }
            if upper {
                for k in 1..row.len() {
                    row[k] = row[k].max(row[k - 1]);
                }
            } else {
                for k in (0..row.len() - 1).rev() {
                    row[k] = row[k].min(row[k + 1]);
                }
            }
        }
        t.interval = (0..=nx).map(|_| std::sync::OnceLock::new()).collect();
        let (lx, ly) = (ln_choose(nx), ln_choose(ny));
        for i in 0..=NUISANCE_GRID {
            let px = from + (to - from) * i as f64 / NUISANCE_GRID as f64;
            let fy = pmf(&ly, (px - shift).clamp(0.0, 1.0));
            let mut tail = vec![0.0; ny as usize + 1];
            if upper {
                let mut acc = 0.0;
                for k in (0..=ny as usize).rev() {
                    acc += fy[k];
                    tail[k] = acc;
                }
            } else {
                let mut acc = 0.0;
                for k in 0..=ny as usize {
                    acc += fy[k];
                    tail[k] = acc;
                }
            }
            t.grid.push(px);
            t.fx.push(pmf(&lx, px));
            t.tail.push(tail);
        }
        t
    }

    /// The p-value of baseline `x` of `nx` and candidate `y` of `ny`.
    pub fn p(&self, x: u64, y: u64) -> f64 {
        if self.grid.is_empty() {
            return 1.0;
        }
        let (nx, ny) = (self.nx as usize, self.ny as usize);
        let obs = self.stat[x as usize * (ny + 1) + y as usize];
        // Per baseline count x': the rejection region in y' as an index into the tails.
        let cut: Vec<Option<usize>> = (0..=nx)
            .map(|xp| {
                let row = &self.stat[xp * (ny + 1)..(xp + 1) * (ny + 1)];
                if self.upper {
                    // first y' with stat >= obs (row nondecreasing)
                    let k = row.partition_point(|&v| v < obs - 1e-12);
                    (k <= ny).then_some(k)
                } else {
                    // last y' with stat <= obs
                    let k = row.partition_point(|&v| v <= obs + 1e-12);
                    (k > 0).then(|| k - 1)
                }
            })
            .collect();
        let (lo, hi) = *self.interval[x as usize].get_or_init(|| stats::clopper_pearson(x, self.nx, NUISANCE_CONF));
        let mut worst: f64 = 0.0;
        for (g, &px) in self.grid.iter().enumerate() {
            if px < lo || px > hi {
                continue;
            }
            let (fx, tail) = (&self.fx[g], &self.tail[g]);
            let prob: f64 = cut.iter().enumerate().map(|(xp, c)| c.map_or(0.0, |k| fx[xp] * tail[k])).sum();
            worst = worst.max(prob);
        }
        (worst + (1.0 - NUISANCE_CONF)).min(1.0)
    }
}

/// Non-inferiority p-value: `H0: candidate rate <= baseline rate - shift`.
pub fn non_inferiority_p(base: u64, nb: u64, cand: u64, nc: u64, shift: f64) -> f64 {
    ExactTest::new(nb, nc, shift, true).p(base, cand)
}

/// Regression p-value: `H0: candidate rate >= baseline rate - shift`.
pub fn regression_p(base: u64, nb: u64, cand: u64, nc: u64, shift: f64) -> f64 {
    ExactTest::new(nb, nc, shift, false).p(base, cand)
}

/// The gate's rule on pooled counts over the paired tasks (baseline `x` of
/// `nx`, candidate `y` of `ny`): FAIL when "the candidate is not worse" is
/// rejected by the exact test at `alpha` (a significant regression), else PASS
/// when "worse by the margin or more" is rejected at `alpha` (non-inferior),
/// else INCONCLUSIVE. A PASS for a true drop of the margin or more therefore
/// happens in at most `alpha` of runs (the test's level, whatever the size);
/// with few tasks and trials neither can be shown and the gate says so.
pub fn decide_counts(x: u64, nx: u64, y: u64, ny: u64, n_tasks: usize, alpha: f64, margin: f64) -> Decision {
    let (verdict, p_non_inferior, p_regression) = verdict_counts(x, nx, y, ny, alpha, margin);
    // Bounds: the largest delta with "diff <= delta" rejected, the smallest with "diff >= delta" rejected.
    let bound = |reject: &dyn Fn(f64) -> bool, rejected_low: bool| -> f64 {
        // `reject(delta)` is true on one side of the bound: below it when `rejected_low`.
        let (mut a, mut b) = (-1.0, 1.0);
        if rejected_low {
            if !reject(-1.0 + 1e-9) {
                return -1.0;
            }
        } else if !reject(1.0 - 1e-9) {
            return 1.0;
        }
        for _ in 0..30 {
            let mid = 0.5 * (a + b);
            if reject(mid) == rejected_low {
                a = mid;
            } else {
                b = mid;
            }
        }
        if rejected_low { a } else { b }
    };
    let lower = bound(&|delta| non_inferiority_p(x, nx, y, ny, -delta) <= alpha, true);
    let upper = bound(&|delta| regression_p(x, nx, y, ny, -delta) <= alpha, false);
    let mean = if nx == 0 || ny == 0 { f64::NAN } else { y as f64 / ny as f64 - x as f64 / nx as f64 };
    Decision {
        verdict,
        n_tasks,
        baseline_passes: x,
        baseline_trials: nx,
        candidate_passes: y,
        candidate_trials: ny,
        mean,
        lower,
        upper,
        p_non_inferior,
        p_regression,
        margin,
        alpha,
    }
}

/// The verdict of [`decide_counts`] with its two p-values (non-inferiority, regression), without the bounds.
pub fn verdict_counts(x: u64, nx: u64, y: u64, ny: u64, alpha: f64, margin: f64) -> (Verdict, f64, f64) {
    verdict_with(&ExactTest::new(nx, ny, 0.0, false), &ExactTest::new(nx, ny, margin, true), x, y, alpha)
}

/// The verdict with the regression test (candidate as `x`) and the non-inferiority test built once.
fn verdict_with(regression: &ExactTest, non_inferior: &ExactTest, x: u64, y: u64, alpha: f64) -> (Verdict, f64, f64) {
    let p_regression = regression.p(x, y);
    let p_non_inferior = non_inferior.p(x, y);
    let verdict = if p_regression <= alpha {
        Verdict::Fail
    } else if p_non_inferior <= alpha {
        Verdict::Pass
    } else {
        Verdict::Inconclusive
    };
    (verdict, p_non_inferior, p_regression)
}

/// The rule on paired baseline and candidate rows.
pub fn decide(pairs: &[(&BaselineRow, &BaselineRow)], alpha: f64, margin: f64) -> Decision {
    let sum = |f: &dyn Fn(&(&BaselineRow, &BaselineRow)) -> u32| pairs.iter().map(|p| f(p) as u64).sum::<u64>();
    decide_counts(sum(&|p| p.0.passes), sum(&|p| p.0.trials), sum(&|p| p.1.passes), sum(&|p| p.1.trials), pairs.len(), alpha, margin)
}

/// Whether one task regressed by the gate's own rule: the exact regression
/// test on its counts at `alpha / tasks` (Bonferroni over the tasks, so that
/// an unchanged candidate shows no red task in at least 1 - alpha of runs).
pub fn task_regressed(b: &BaselineRow, c: &BaselineRow, alpha: f64, tasks: usize) -> bool {
    regression_p(b.passes as u64, b.trials as u64, c.passes as u64, c.trials as u64, 0.0) <= alpha / tasks.max(1) as f64
}

/// Operating characteristics of the rule at the sizes at hand.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Characteristic {
    /// True drop of the candidate's rate below the baseline rate.
    pub drop: f64,
    pub p_fail: f64,
    pub p_pass: f64,
    /// `true` when computed exactly (every outcome enumerated), else a Normal approximation.
    pub exact: bool,
}

/// Probability of each verdict when every task's baseline rate is `rate` and
/// the candidate's is `rate - drop`, with `nx` and `ny` trials in all: exact
/// enumeration of the outcomes (the verdict is monotone in the candidate's
/// passes, so one threshold per baseline count) up to 120 trials a side, a
/// Normal approximation above. Heterogeneous task rates only make the pooled
/// counts less variable.
pub fn characteristic(rate: f64, drop: f64, nx: u64, ny: u64, alpha: f64, margin: f64) -> Characteristic {
    let q = (rate - drop).clamp(0.0, 1.0);
    if nx > 120 || ny > 120 {
        let se = (rate * (1.0 - rate) / nx as f64 + q * (1.0 - q) / ny as f64).sqrt().max(1e-12);
        let z = stats::normal_quantile(1.0 - alpha);
        let phi = |v: f64| 1.0 - stats::t_sf(v, f64::INFINITY);
        return Characteristic { drop, p_fail: phi((drop - z * se) / se), p_pass: phi((margin - drop - z * se) / se), exact: false };
    }
    let fx = pmf(&ln_choose(nx), rate);
    let fy = pmf(&ln_choose(ny), q);
    let (regression, non_inferior) = (ExactTest::new(nx, ny, 0.0, false), ExactTest::new(nx, ny, margin, true));
    let (mut p_fail, mut p_pass) = (0.0, 0.0);
    for x in 0..=nx {
        // FAIL for y <= y_fail (monotone), PASS for y >= y_pass unless FAIL.
        let fails = |y: u64| regression.p(x, y) <= alpha;
        let passes = |y: u64| non_inferior.p(x, y) <= alpha;
        let y_fail = partition(ny, &fails, true);
        let y_pass = partition(ny, &passes, false);
        for y in 0..=ny {
            let f = y_fail.is_some_and(|t| y <= t);
            let p = !f && y_pass.is_some_and(|t| y >= t);
            let w = fx[x as usize] * fy[y as usize];
            if f {
                p_fail += w;
            } else if p {
                p_pass += w;
            }
        }
    }
    Characteristic { drop, p_fail, p_pass, exact: true }
}

/// For a predicate monotone over 0..=n: when `low`, the largest y with
/// `pred(y)` (true for small y); else the smallest y with `pred(y)`.
fn partition(n: u64, pred: &dyn Fn(u64) -> bool, low: bool) -> Option<u64> {
    if low {
        if !pred(0) {
            return None;
        }
        let (mut a, mut b) = (0u64, n + 1); // pred(a) true, pred(b) false (b = n+1 virtual)
        while b - a > 1 {
            let m = (a + b) / 2;
            if pred(m) { a = m } else { b = m }
        }
        Some(a)
    } else {
        if !pred(n) {
            return None;
        }
        let (mut a, mut b) = (-1i64, n as i64); // pred(a) false (virtual), pred(b) true
        while b - a > 1 {
            let m = (a + b) / 2;
            if pred(m as u64) { b = m } else { a = m }
        }
        Some(b as u64)
    }
}

/// The characteristics printed by the gate: no change, a drop of the margin,
/// and drops of 10 and 20 pp, at the baseline's pooled rate.
pub fn characteristics(d: &Decision) -> Vec<Characteristic> {
    let rate = if d.baseline_trials == 0 { 0.5 } else { d.baseline_passes as f64 / d.baseline_trials as f64 };
    let mut drops = vec![0.0, d.margin, 0.10, 0.20];
    drops.sort_by(f64::total_cmp);
    // A margin of 10 or 20 pp is listed once.
    drops.dedup_by(|a, b| (*a - *b).abs() < 1e-12);
    drops.into_iter().map(|drop| characteristic(rate, drop, d.baseline_trials, d.candidate_trials, d.alpha, d.margin)).collect()
}

/// One task of a baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineRow {
    pub task: String,
    pub trials: u32,
    pub passes: u32,
    pub pass_rate: f64,
    pub arm: String,
    pub model: String,
    pub model_identity: String,
    pub suite_digest: String,
    /// The experiment-level budget as JSON.
    pub budget: String,
    pub run_id: String,
}

/// Per-task pass counts of one (arm, model) of a run, with its identity.
pub fn baseline_of_run(data: &RunData, arm: Option<&str>, model: Option<&str>) -> Result<Vec<BaselineRow>, String> {
    let pick = |names: &crate::report::load::Names, want: Option<&str>, what: &str| -> Result<u32, String> {
        match want {
            Some(w) => names.get(w).ok_or_else(|| format!("the run has no {what} `{w}`; it has: {}", names.list.join(", "))),
            None if names.list.len() == 1 => Ok(0),
            None => Err(format!("the run has several {what}s ({}); choose one with --{what}", names.list.join(", "))),
        }
    };
    let arm_i = pick(&data.arms, arm, "arm")?;
    let model_i = pick(&data.models, model, "model")?;
    let model_name = data.models.name(model_i).to_string();
    let identity = data.manifest.models.iter().find(|m| m.name == model_name).and_then(|m| m.identity.clone()).unwrap_or_default();
    let budget = serde_json::to_string(&data.manifest.budget).unwrap_or_default();
    let mut per_task: BTreeMap<u32, (u32, u32)> = BTreeMap::new();
    for r in data.trials.iter().filter(|r| r.arm == arm_i && r.model == model_i) {
        let e = per_task.entry(r.task).or_default();
        e.0 += 1;
        if r.status == TrialStatus::Passed {
            e.1 += 1;
        }
    }
    if per_task.is_empty() {
        return Err(format!("no finished trials for arm `{}` and model `{model_name}`", data.arms.name(arm_i)));
    }
    Ok(per_task
        .into_iter()
        .map(|(t, (n, p))| BaselineRow {
            task: data.tasks.name(t).to_string(),
            trials: n,
            passes: p,
            pass_rate: p as f64 / n as f64,
            arm: data.arms.name(arm_i).to_string(),
            model: model_name.clone(),
            model_identity: identity.clone(),
            suite_digest: data.manifest.suite.digest.clone(),
            budget: budget.clone(),
            run_id: data.manifest.run_id.clone(),
        })
        .collect())
}

pub fn write_baseline(path: &Path, rows: &[BaselineRow]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut w = csv::Writer::from_path(path).map_err(std::io::Error::other)?;
    for r in rows {
        w.serialize(r).map_err(std::io::Error::other)?;
    }
    w.flush()
}

/// Columns of a baseline file, in the order `write_baseline` writes them.
pub const BASELINE_COLUMNS: [&str; 10] = ["task", "trials", "passes", "pass_rate", "arm", "model", "model_identity", "suite_digest", "budget", "run_id"];

/// How far a baseline's `pass_rate` may stray from passes / trials: a
/// hand-edited file may round it to two decimals.
const PASS_RATE_TOLERANCE: f64 = 0.005;

/// Read a baseline file and check it row by row: every column present, counts
/// that are whole numbers with passes <= trials, a pass rate that agrees with
/// them, each task once, and one arm, model, suite and budget throughout. An
/// error names the file, the row (as a spreadsheet numbers it: the header is
/// row 1) and the column. The pass rate used is passes / trials.
pub fn read_baseline(path: &Path) -> Result<Vec<BaselineRow>, InputError> {
    let bad = |row: u64, col: &str, msg: String| InputError::new(path, format!("row {row}, column `{col}`: {msg}"));
    let mut r = csv::Reader::from_path(path).map_err(|e| InputError::new(path, format!("cannot read: {e}")))?;
    let headers = r.headers().map_err(|e| InputError::new(path, format!("cannot read the header row: {e}")))?.clone();
    for col in BASELINE_COLUMNS {
        if !headers.iter().any(|h| h == col) {
            return Err(bad(1, col, format!("missing; a baseline has the columns {}", BASELINE_COLUMNS.join(","))));
        }
    }
    let mut rows: Vec<BaselineRow> = Vec::new();
    let mut first_row_of: BTreeMap<String, u64> = BTreeMap::new();
    for record in r.records() {
        let record = record.map_err(|e| {
            let row = e.position().map(|p| p.line()).unwrap_or(0);
            InputError::new(path, format!("row {row}: {e}"))
        })?;
        let row = record.position().map(|p| p.line()).unwrap_or(rows.len() as u64 + 2);
        let field = |col: &str| headers.iter().position(|h| h == col).and_then(|i| record.get(i)).unwrap_or("").trim();
        let count = |col: &str| -> Result<u32, InputError> {
            let v = field(col);
            v.parse::<u32>().map_err(|_| bad(row, col, format!("`{v}` is not a whole number of at least 0")))
        };
        let task = field("task").to_string();
        if task.is_empty() {
            return Err(bad(row, "task", "empty".into()));
        }
        if let Some(first) = first_row_of.get(&task) {
            return Err(bad(row, "task", format!("task `{task}` appears twice (first in row {first})")));
        }
        first_row_of.insert(task.clone(), row);
        let trials = count("trials")?;
        let passes = count("passes")?;
        if trials == 0 {
            return Err(bad(row, "trials", "0: a task of a baseline has at least one trial".into()));
        }
        if passes > trials {
            return Err(bad(row, "passes", format!("{passes} passes of {trials} trials")));
        }
        let rate_text = field("pass_rate");
        let rate: f64 = rate_text.parse().map_err(|_| bad(row, "pass_rate", format!("`{rate_text}` is not a number")))?;
        let expected = passes as f64 / trials as f64;
        if !rate.is_finite() || (rate - expected).abs() > PASS_RATE_TOLERANCE {
            return Err(bad(row, "pass_rate", format!("{rate_text} contradicts passes / trials = {passes}/{trials} = {expected:.3}")));
        }
        let text = |col: &str| field(col).to_string();
        let current = BaselineRow {
            task,
            trials,
            passes,
            pass_rate: expected,
            arm: text("arm"),
            model: text("model"),
            model_identity: text("model_identity"),
            suite_digest: text("suite_digest"),
            budget: text("budget"),
            run_id: text("run_id"),
        };
        if let Some(first) = rows.first() {
            let same = [
                ("arm", &first.arm, &current.arm),
                ("model", &first.model, &current.model),
                ("model_identity", &first.model_identity, &current.model_identity),
                ("suite_digest", &first.suite_digest, &current.suite_digest),
                ("budget", &first.budget, &current.budget),
            ];
            if let Some((col, a, b)) = same.iter().find(|(_, a, b)| a != b) {
                let first_row = first_row_of[&first.task];
                return Err(bad(row, col, format!("`{b}` differs from row {first_row}'s `{a}`: a baseline is one arm and model of one run")));
            }
        }
        rows.push(current);
    }
    if rows.is_empty() {
        return Err(InputError::new(path, "the baseline holds no task"));
    }
    Ok(rows)
}

/// Differences between what was fixed for the baseline and for the candidate.
pub fn drifts(base: &[BaselineRow], cand: &[BaselineRow]) -> Vec<String> {
    let mut out = Vec::new();
    let (b, c) = (&base[0], &cand[0]);
    if b.suite_digest != c.suite_digest {
        out.push(format!("suite digest: baseline {} vs candidate {}", short(&b.suite_digest), short(&c.suite_digest)));
    }
    let bt: Vec<&str> = base.iter().map(|r| r.task.as_str()).collect();
    let ct: Vec<&str> = cand.iter().map(|r| r.task.as_str()).collect();
    let only_b: Vec<&str> = bt.iter().copied().filter(|t| !ct.contains(t)).collect();
    let only_c: Vec<&str> = ct.iter().copied().filter(|t| !bt.contains(t)).collect();
    if !only_b.is_empty() || !only_c.is_empty() {
        out.push(format!("task set: only in baseline [{}], only in candidate [{}]", only_b.join(", "), only_c.join(", ")));
    }
    if b.model != c.model || b.model_identity != c.model_identity {
        out.push(format!("model: baseline {} ({}) vs candidate {} ({})", b.model, or_none(&b.model_identity), c.model, or_none(&c.model_identity)));
    }
    if b.budget != c.budget {
        out.push(format!("budget: baseline {} vs candidate {}", b.budget, c.budget));
    }
    out
}

fn short(s: &str) -> &str {
    &s[..12.min(s.len())]
}

fn or_none(s: &str) -> &str {
    if s.is_empty() { "no identity" } else { s }
}

/// Per-task rows paired over the tasks both contain, in baseline order.
pub fn pair<'a>(base: &'a [BaselineRow], cand: &'a [BaselineRow]) -> Vec<(&'a BaselineRow, &'a BaselineRow)> {
    base.iter().filter_map(|b| cand.iter().find(|c| c.task == b.task).map(|c| (b, c))).collect()
}

/// How many times its current trials per task (same tasks, the baseline as
/// it is) the candidate would need for an unchanged candidate to PASS in at
/// least 80% of runs; `None` when even 32 times is not enough (the baseline
/// is then too small as well).
pub fn size_hint(d: &Decision) -> Option<u64> {
    if d.baseline_trials == 0 {
        return None;
    }
    let rate = d.baseline_passes as f64 / d.baseline_trials as f64;
    [2u64, 4, 8, 16, 32].into_iter().find(|&k| characteristic(rate, 0.0, d.baseline_trials, k * d.candidate_trials, d.alpha, d.margin).p_pass >= 0.8)
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

pub fn render(d: &Decision, pairs: &[(&BaselineRow, &BaselineRow)], oc: &[Characteristic], hint: Option<u64>) -> String {
    let pp = |x: f64| if x.is_finite() { format!("{:+.1} pp", x * 100.0) } else { "n/a".into() };
    let mut s = format!(
        "gate: {}  candidate - baseline over {} tasks: {}/{} -> {}/{} ({}), one-sided {:.0}% bounds [{}, {}], margin {:.1} pp\n",
        d.verdict.name(),
        d.n_tasks,
        d.baseline_passes,
        d.baseline_trials,
        d.candidate_passes,
        d.candidate_trials,
        pp(d.mean),
        (1.0 - d.alpha) * 100.0,
        pp(d.lower),
        pp(d.upper),
        d.margin * 100.0
    );
    let why = match d.verdict {
        Verdict::Fail => format!("\"not worse\" is rejected (exact p {:.4} <= {}): a significant regression", d.p_regression, d.alpha),
        Verdict::Pass => format!(
            "\"worse by {:.1} pp or more\" is rejected (exact p {:.4} <= {}): not worse than the baseline by more than the margin",
            d.margin * 100.0,
            d.p_non_inferior,
            d.alpha
        ),
        Verdict::Inconclusive => format!(
            "neither a regression (p {:.3}) nor non-inferiority (p {:.3}) is shown at {}; {}",
            d.p_regression,
            d.p_non_inferior,
            d.alpha,
            match hint {
                Some(k) => format!("about {k} times the candidate's trials per task would let an unchanged candidate PASS in 80% of runs"),
                None => "even 32 times the candidate's trials per task would not let an unchanged candidate PASS in 80% of runs: the baseline needs more tasks or trials too".into(),
            }
        ),
    };
    let _ = writeln!(s, "  {why}");
    if let Some(first) = oc.first() {
        let rate = if d.baseline_trials == 0 { f64::NAN } else { d.baseline_passes as f64 / d.baseline_trials as f64 };
        let _ = writeln!(
            s,
            "  operating characteristics at this size ({} baseline and {} candidate trials, every task at the baseline's {}; {}):",
            d.baseline_trials,
            d.candidate_trials,
            pct(rate),
            if first.exact { "exact" } else { "Normal approximation" }
        );
        for c in oc {
            let what = if c.drop == 0.0 { "no change".to_string() } else { format!("a drop of {:.0} pp", c.drop * 100.0) };
            let _ = writeln!(s, "    {what:<16} caught (FAIL) in {:>6} of runs, PASS in {:>6}", pct(c.p_fail), pct(c.p_pass));
        }
        let _ = writeln!(
            s,
            "    a true drop of {:.1} pp or more PASSes in at most {:.0}% of runs (the test's level), whatever the size",
            d.margin * 100.0,
            d.alpha * 100.0
        );
    }
    let red: Vec<String> = pairs
        .iter()
        .filter(|(b, c)| task_regressed(b, c, d.alpha, pairs.len()))
        .map(|(b, c)| format!("{} {}/{} -> {}/{}", b.task, b.passes, b.trials, c.passes, c.trials))
        .collect();
    if !red.is_empty() {
        let _ = writeln!(s, "  tasks that regressed by the gate's rule (exact test at alpha/{}): {}", pairs.len(), red.join(", "));
    }
    s
}

pub fn markdown(d: &Decision, pairs: &[(&BaselineRow, &BaselineRow)], oc: &[Characteristic], hint: Option<u64>) -> String {
    let icon = match d.verdict {
        Verdict::Pass => "✅",
        Verdict::Fail => "❌",
        Verdict::Inconclusive => "⚠️",
    };
    let mut s = format!("## ablate gate: {icon} {}\n\n", d.verdict.name());
    let _ = writeln!(s, "```\n{}```\n", render(d, pairs, oc, hint));
    s.push_str("| task | baseline | candidate | change | regressed |\n|---|---|---|---|---|\n");
    for (b, c) in pairs {
        let _ = writeln!(
            s,
            "| {} | {}/{} ({:.0}%) | {}/{} ({:.0}%) | {:+.0} pp | {} |",
            b.task,
            b.passes,
            b.trials,
            b.pass_rate * 100.0,
            c.passes,
            c.trials,
            c.pass_rate * 100.0,
            (c.pass_rate - b.pass_rate) * 100.0,
            if task_regressed(b, c, d.alpha, pairs.len()) { "yes" } else { "no" }
        );
    }
    s
}

/// JUnit XML: one test case per task with its counts, failed only where the
/// gate's own rule says the task regressed ([`task_regressed`]), and one test
/// case for the overall verdict (failed on FAIL, skipped on INCONCLUSIVE).
pub fn junit(d: &Decision, pairs: &[(&BaselineRow, &BaselineRow)]) -> String {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let red: Vec<bool> = pairs.iter().map(|(b, c)| task_regressed(b, c, d.alpha, pairs.len())).collect();
    let summary = format!(
        "baseline {}/{}, candidate {}/{}, difference {:+.1} pp, one-sided bounds [{:+.1}, {:+.1}] pp, margin {:.1} pp",
        d.baseline_passes,
        d.baseline_trials,
        d.candidate_passes,
        d.candidate_trials,
        d.mean * 100.0,
        d.lower * 100.0,
        d.upper * 100.0,
        d.margin * 100.0
    );
    let case = |name: String, status: TestCaseStatus, out: &str| {
        let mut case = TestCase::new(name, status);
        case.set_classname("ablate.gate").set_system_out(out);
        case
    };
    let mut suite = TestSuite::new(format!("ablate gate: {}", d.verdict.name()));
    let overall = match d.verdict {
        Verdict::Fail => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!("significant regression (exact p {:.4})", d.p_regression)).set_description(summary.as_str());
            s
        }
        Verdict::Inconclusive => {
            let mut s = TestCaseStatus::skipped();
            s.set_message("inconclusive: the data cannot decide");
            s
        }
        Verdict::Pass => TestCaseStatus::success(),
    };
    suite.add_test_case(case(format!("overall: {}", d.verdict.name()), overall, &summary));
    for ((b, c), red) in pairs.iter().zip(red) {
        let counts = format!("baseline {}/{}, candidate {}/{}", b.passes, b.trials, c.passes, c.trials);
        let status = if red {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!("regressed: {counts}")).set_description(counts.as_str());
            s
        } else {
            TestCaseStatus::success()
        };
        suite.add_test_case(case(b.task.clone(), status, &counts));
    }
    let mut report = Report::new("ablate gate");
    report.add_test_suite(suite);
    report.to_string().unwrap_or_else(|e| format!("<!-- cannot write JUnit: {e} -->\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64: a tiny seeded generator for the simulations.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    #[test]
    fn exact_p_known_values() {
        // The same definition brute-forced in Python with scipy.stats (binom, beta): every
        // (x', y') and the same 201-point grid (scripts/gate_reference.py).
        let ni = [((6, 8, 8, 8), 0.07449855337889635), ((40, 50, 48, 50), 0.0019051175317531862), ((126, 140, 130, 140), 0.014665149091872717)];
        for ((x, nx, y, ny), want) in ni {
            let got = non_inferiority_p(x, nx, y, ny, 0.05);
            assert!((got - want).abs() < 1e-9, "non-inferiority {x}/{nx} -> {y}/{ny}: {got}, want {want}");
        }
        let reg = [((8, 8, 4, 8), 0.014946915936095987), ((3, 10, 0, 10), 0.05888803100585939), ((18, 30, 15, 30), 0.24869559548303827)];
        for ((x, nx, y, ny), want) in reg {
            let got = regression_p(x, nx, y, ny, 0.0);
            assert!((got - want).abs() < 1e-9, "regression {x}/{nx} -> {y}/{ny}: {got}, want {want}");
        }
    }

    #[test]
    fn decision_rule() {
        // 2 tasks x 1 trial, all passing on both sides: once PASS, now undecidable.
        assert_eq!(decide_counts(2, 2, 2, 2, 2, 0.05, 0.05).verdict, Verdict::Inconclusive);
        // 3 tasks 6/10 -> 5/10 each (18/30 -> 15/30): once FAIL, not a significant regression.
        assert_eq!(decide_counts(18, 30, 15, 30, 3, 0.05, 0.05).verdict, Verdict::Inconclusive);
        // 14 tasks x 10: 140/140 -> 70/140 fails; 126/140 -> 130/140 passes (p 0.0147 above).
        assert_eq!(decide_counts(140, 140, 70, 140, 14, 0.05, 0.05).verdict, Verdict::Fail);
        let d = decide_counts(126, 140, 130, 140, 14, 0.05, 0.05);
        assert_eq!(d.verdict, Verdict::Pass);
        assert!(d.lower > -0.05 && d.lower < d.mean && d.mean < d.upper, "{d:?}");
        assert_eq!(Verdict::Inconclusive.exit_code().code(), 3);
    }

    /// The false-PASS rate of a true drop of the margin or more, computed
    /// exactly (every outcome enumerated) when every task has the same rate,
    /// over tasks {2, 3, 4, 5} x trials {1, 2, 5}, 10 x 2, 14 x 2, 14 x 5 and rates from 0.05
    /// to 1, drops of the margin (5 pp), 10 and 20 pp: at most alpha in every
    /// cell. With identical rates the pooled counts are binomial, so this is
    /// the rule's exact operating characteristic.
    #[test]
    fn simulation_gate_false_pass_exact() {
        let (alpha, margin) = (0.05, 0.05);
        let mut worst: (f64, String) = (0.0, String::new());
        let mut aa_fail: f64 = 0.0;
        let mut shipped = Vec::new();
        let sizes = [2u64, 3, 4, 5].iter().flat_map(|&t| [(t, 1u64), (t, 2), (t, 5)]).chain([(10, 2), (14, 2), (14, 5)]);
        for (tasks, trials) in sizes {
            {
                let n = tasks * trials;
                for rate in [1.0, 0.97, 0.8, 0.5, 0.3, 0.05] {
                    for drop in [0.0, margin, 0.10, 0.20] {
                        if rate - drop < -1e-12 {
                            continue;
                        }
                        let c = characteristic(rate, drop, n, n, alpha, margin);
                        assert!(c.exact);
                        if drop == 0.0 {
                            aa_fail = aa_fail.max(c.p_fail);
                        } else if c.p_pass > worst.0 {
                            worst = (c.p_pass, format!("{tasks} tasks x {trials}, {rate} -> {}", rate - drop));
                        }
                        if tasks == 4 && trials == 2 && [(1.0, 0.2), (0.97, 0.2), (0.05, 0.05)].contains(&(rate, drop)) {
                            shipped.push(format!(
                                "{:.0}% -> {:.0}%: PASS {:.1}%, FAIL {:.1}%",
                                rate * 100.0,
                                (rate - drop) * 100.0,
                                c.p_pass * 100.0,
                                c.p_fail * 100.0
                            ));
                        }
                    }
                }
            }
        }
        println!(
            "gate, exact: largest false-PASS rate for a true drop >= the margin: {:.4} ({}); largest FAIL rate with no change: {:.4}",
            worst.0, worst.1, aa_fail
        );
        println!("gate at the shipped size (4 tasks x 2 trials): {}", shipped.join("; "));
        assert!(worst.0 <= alpha + 1e-9, "false PASS {worst:?}");
        assert!(aa_fail <= alpha + 1e-9, "A/A FAIL {aa_fail}");
        // The figures the README states.
        assert!(worst.0 <= 0.04885 && aa_fail <= 0.04765, "README: false PASS at most 4.88%, A/A FAIL at most 4.76%");
    }

    /// Heterogeneous tasks (rates uniform in [0.05, 1] per task, each task
    /// dropping by the margin or 20 pp): the false-PASS rate by simulation,
    /// 2000 replications per cell, tasks {2, 3, 4, 5} x trials {1, 2} and 14 x 2.
    /// Asserted at most alpha + 3 simulation standard errors.
    #[test]
    fn simulation_gate_false_pass_heterogeneous() {
        let (alpha, margin, reps) = (0.05, 0.05, 2000);
        let limit = alpha + 3.0 * (alpha * (1.0 - alpha) / reps as f64).sqrt();
        let mut rng = Rng(0x6A7E);
        let mut worst: f64 = 0.0;
        for (tasks, trials) in [(2u64, 1u64), (2, 2), (3, 1), (3, 2), (4, 1), (4, 2), (5, 1), (5, 2), (14, 2)] {
            let n = tasks * trials;
            let (regression, non_inferior) = (ExactTest::new(n, n, 0.0, false), ExactTest::new(n, n, margin, true));
            for drop in [margin, 0.2] {
                let mut passes = 0;
                for _ in 0..reps {
                    let (mut x, mut y) = (0, 0);
                    for _ in 0..tasks {
                        let p = 0.05 + 0.95 * rng.next();
                        let q = (p - drop).max(0.0);
                        for _ in 0..trials {
                            x += (rng.next() < p) as u64;
                            y += (rng.next() < q) as u64;
                        }
                    }
                    passes += (verdict_with(&regression, &non_inferior, x, y, alpha).0 == Verdict::Pass) as usize;
                }
                let rate = passes as f64 / reps as f64;
                worst = worst.max(rate);
                assert!(rate <= limit, "{tasks} tasks x {trials}, drop {drop}: false PASS {rate} > {limit}");
            }
        }
        println!("gate, heterogeneous tasks: largest false-PASS rate {worst:.4} (limit {limit:.4}, {reps} replications per cell)");
        assert!(worst <= 0.0185, "README: at most 1.85% with heterogeneous tasks; saw {worst}");
    }

    #[test]
    fn a_red_task_is_a_task_the_rule_says_regressed() {
        let row = |task: &str, trials, passes| BaselineRow {
            task: task.into(),
            trials,
            passes,
            pass_rate: passes as f64 / trials as f64,
            arm: "a".into(),
            model: "m".into(),
            model_identity: String::new(),
            suite_digest: String::new(),
            budget: String::new(),
            run_id: String::new(),
        };
        // 2/2 -> 1/2 fell but is no evidence; 10/10 -> 0/10 is (exact p ~1e-5 < 0.05/2).
        let (b1, c1, b2, c2) = (row("a", 2, 2), row("a", 2, 1), row("b", 10, 10), row("b", 10, 0));
        assert!(!task_regressed(&b1, &c1, 0.05, 2));
        assert!(task_regressed(&b2, &c2, 0.05, 2));
        let pairs = vec![(&b1, &c1), (&b2, &c2)];
        let d = decide(&pairs, 0.05, 0.05);
        let xml = junit(&d, &pairs);
        assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
        assert_eq!(xml.matches("<failure ").count(), 1 + (d.verdict == Verdict::Fail) as usize, "{xml}");
        assert!(xml.contains("baseline 2/2, candidate 1/2") && xml.contains("name=\"overall: "), "{xml}");
    }

    const HEADER: &str = "task,trials,passes,pass_rate,arm,model,model_identity,suite_digest,budget,run_id\n";

    fn read(body: &str) -> Result<Vec<BaselineRow>, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("base.csv");
        std::fs::write(&path, body).unwrap();
        read_baseline(&path).map_err(|e| {
            let text = e.to_string();
            let prefix = format!("{}: ", path.display());
            assert!(text.starts_with(&prefix), "names the file: {text}");
            text[prefix.len()..].to_string()
        })
    }

    #[test]
    fn a_sound_baseline_is_read_with_rates_from_the_counts() {
        let rows = read(&format!(
            "{HEADER}a,12,11,0.9166666666666666,full,m,,d1,\"{{\"\"max_steps\"\":4}}\",r\nb,4,1,0.25,full,m,,d1,\"{{\"\"max_steps\"\":4}}\",r\n"
        ))
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].task.as_str(), rows[0].trials, rows[0].passes), ("a", 12, 11));
        assert_eq!(rows[0].budget, "{\"max_steps\":4}");
        assert_eq!(rows[1].pass_rate, 0.25);
        // Rounded to two decimals by hand: accepted, and 11/12 is what counts.
        let rows = read(&format!("{HEADER}a,12,11,0.92,full,m,,d1,b,r\n")).unwrap();
        assert_eq!(rows[0].pass_rate, 11.0 / 12.0);
    }

    #[test]
    fn a_bad_baseline_row_is_refused_naming_row_and_column() {
        let cases = [
            // A zero rate against 11 passes of 12: the case that once gave PASS at +91.7 pp.
            (format!("{HEADER}a,12,11,0,full,m,,d1,b,r\n"), "row 2, column `pass_rate`: 0 contradicts passes / trials = 11/12 = 0.917"),
            (format!("{HEADER}a,12,11,0.9,full,m,,d1,b,r\n"), "row 2, column `pass_rate`: 0.9 contradicts passes / trials = 11/12 = 0.917"),
            (
                format!("{HEADER}a,4,2,0.5,full,m,,d1,b,r\nb,4,1,0.25,full,m,,d1,b,r\na,4,3,0.75,full,m,,d1,b,r\n"),
                "row 4, column `task`: task `a` appears twice (first in row 2)",
            ),
            (format!("{HEADER}a,3,4,1.3333333333333333,full,m,,d1,b,r\n"), "row 2, column `passes`: 4 passes of 3 trials"),
            (format!("{HEADER}a,-3,0,0,full,m,,d1,b,r\n"), "row 2, column `trials`: `-3` is not a whole number of at least 0"),
            (format!("{HEADER}a,3,-1,0,full,m,,d1,b,r\n"), "row 2, column `passes`: `-1` is not a whole number of at least 0"),
            (format!("{HEADER}a,3,1.5,0.5,full,m,,d1,b,r\n"), "row 2, column `passes`: `1.5` is not a whole number of at least 0"),
            (format!("{HEADER}a,0,0,0,full,m,,d1,b,r\n"), "row 2, column `trials`: 0: a task of a baseline has at least one trial"),
            (format!("{HEADER}a,2,1,NaN,full,m,,d1,b,r\n"), "row 2, column `pass_rate`: NaN contradicts passes / trials = 1/2 = 0.500"),
            (format!("{HEADER}a,2,1,inf,full,m,,d1,b,r\n"), "row 2, column `pass_rate`: inf contradicts passes / trials = 1/2 = 0.500"),
            (format!("{HEADER}a,2,1,half,full,m,,d1,b,r\n"), "row 2, column `pass_rate`: `half` is not a number"),
            (format!("{HEADER},2,1,0.5,full,m,,d1,b,r\n"), "row 2, column `task`: empty"),
            (format!("{HEADER}a,2,1,0.5,full,m,,d1,b,r\nb,2,1,0.5,full,m2,,d1,b,r\n"), "row 3, column `model`: `m2` differs from row 2's `m`"),
            (format!("{HEADER}a,2,1,0.5,full,m,,d1,b,r\nb,2,1,0.5,full,m,,d1,b2,r\n"), "row 3, column `budget`: `b2` differs from row 2's `b`"),
            (
                "task,trials,passes,arm,model,model_identity,suite_digest,budget,run_id\na,2,1,full,m,,d1,b,r\n".to_string(),
                "row 1, column `pass_rate`: missing",
            ),
            (HEADER.to_string(), "the baseline holds no task"),
        ];
        for (body, want) in cases {
            let err = read(&body).expect_err(want);
            assert!(err.starts_with(want), "want `{want}`, got `{err}`");
        }
    }
}
