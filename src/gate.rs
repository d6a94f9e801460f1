//! The CI regression gate on pass rate.
//!
//! Paired per-task differences d_t = candidate_t - baseline_t over the tasks
//! both contain, with one-sided (1 - alpha) t bounds on their mean (T - 1 df):
//! FAIL when the upper bound is below 0 (a significant regression), PASS
//! when the lower bound is above -margin (non-inferior), INCONCLUSIVE
//! otherwise. A baseline is a per-task CSV (`ablate baseline save`) or a run
//! folder; it must match the candidate's suite, tasks, model and budget.

use crate::error::InputError;
use crate::report::load::RunData;
use crate::report::stats;
use crate::record::TrialStatus;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// Exit codes of `ablate gate`, documented in the README.
pub mod exit {
    pub const PASS: i32 = 0;
    pub const FAIL: i32 = 1;
    /// Bad input, or a baseline that does not match the candidate.
    pub const USAGE: i32 = 2;
    pub const INCONCLUSIVE: i32 = 3;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Pass,
    Fail,
    Inconclusive,
}

impl Verdict {
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Pass => exit::PASS,
            Verdict::Fail => exit::FAIL,
            Verdict::Inconclusive => exit::INCONCLUSIVE,
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
    pub mean: f64,
    pub lower: f64,
    pub upper: f64,
    pub margin: f64,
    pub alpha: f64,
}

/// The decision rule on per-task differences (candidate - baseline).
pub fn decide(diffs: &[f64], alpha: f64, margin: f64) -> Decision {
    let (lower, upper) = stats::one_sided_bounds(diffs, alpha);
    let verdict = if upper < 0.0 {
        Verdict::Fail
    } else if lower > -margin {
        Verdict::Pass
    } else {
        Verdict::Inconclusive
    };
    Decision { verdict, n_tasks: diffs.len(), mean: stats::mean(diffs), lower, upper, margin, alpha }
}

/// How much more data would likely decide an inconclusive gate: the factor
/// by which the standard error must shrink for either bound to clear its
/// threshold at the current mean, turned into trials per task (se ~ 1/sqrt(r)).
/// A rough hint: the between-task part of the variance does not shrink with trials.
pub fn trials_hint(d: &Decision, trials_per_task: f64) -> Option<u64> {
    if d.verdict != Verdict::Inconclusive || !d.lower.is_finite() || d.n_tasks < 2 {
        return None;
    }
    let half = d.upper - d.mean;
    if half <= 0.0 {
        return None;
    }
    // Needed half-widths for PASS (mean + margin) and FAIL (-mean); the larger is reachable sooner.
    let target = (d.mean + d.margin).max(-d.mean);
    if target <= 0.0 {
        return None;
    }
    let factor = (half / target).powi(2);
    Some((trials_per_task * factor).ceil() as u64)
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
pub const BASELINE_COLUMNS: [&str; 10] =
    ["task", "trials", "passes", "pass_rate", "arm", "model", "model_identity", "suite_digest", "budget", "run_id"];

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

pub fn render(d: &Decision, pairs: &[(&BaselineRow, &BaselineRow)], hint: Option<u64>) -> String {
    let pp = |x: f64| if x.is_finite() { format!("{:+.1} pp", x * 100.0) } else { "n/a".into() };
    let mut s = format!(
        "gate: {}  candidate - baseline over {} tasks: {}, one-sided {:.0}% bounds [{}, {}], margin {:.1} pp\n",
        d.verdict.name(),
        d.n_tasks,
        pp(d.mean),
        (1.0 - d.alpha) * 100.0,
        pp(d.lower),
        pp(d.upper),
        d.margin * 100.0
    );
    let why = match d.verdict {
        Verdict::Fail => "the upper bound is below 0: a significant regression".to_string(),
        Verdict::Pass => format!("the lower bound is above -{:.1} pp: not worse than the baseline by more than the margin", d.margin * 100.0),
        Verdict::Inconclusive => match hint {
            Some(n) => format!("neither a regression nor non-inferiority is shown; about {n} trials per task would likely decide it"),
            None => "neither a regression nor non-inferiority is shown (too few tasks for bounds)".into(),
        },
    };
    let _ = writeln!(s, "  {why}");
    let fell: Vec<String> = pairs
        .iter()
        .filter(|(b, c)| c.pass_rate < b.pass_rate)
        .map(|(b, c)| format!("{} {:.0}% -> {:.0}%", b.task, b.pass_rate * 100.0, c.pass_rate * 100.0))
        .collect();
    if !fell.is_empty() {
        let _ = writeln!(s, "  tasks whose pass rate fell: {}", fell.join(", "));
    }
    s
}

pub fn markdown(d: &Decision, pairs: &[(&BaselineRow, &BaselineRow)], hint: Option<u64>) -> String {
    let icon = match d.verdict {
        Verdict::Pass => "✅",
        Verdict::Fail => "❌",
        Verdict::Inconclusive => "⚠️",
    };
    let mut s = format!("## ablate gate: {icon} {}\n\n", d.verdict.name());
    let _ = writeln!(s, "```\n{}```\n", render(d, pairs, hint));
    s.push_str("| task | baseline | candidate | change |\n|---|---|---|---|\n");
    for (b, c) in pairs {
        let _ = writeln!(
            s,
            "| {} | {}/{} ({:.0}%) | {}/{} ({:.0}%) | {:+.0} pp |",
            b.task,
            b.passes,
            b.trials,
            b.pass_rate * 100.0,
            c.passes,
            c.trials,
            c.pass_rate * 100.0,
            (c.pass_rate - b.pass_rate) * 100.0
        );
    }
    s
}

/// JUnit XML: one test case per task, failed when its pass rate fell.
pub fn junit(d: &Decision, pairs: &[(&BaselineRow, &BaselineRow)]) -> String {
    let esc = crate::report::html::esc;
    let failures = pairs.iter().filter(|(b, c)| c.pass_rate < b.pass_rate).count();
    let mut s = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"ablate gate\" tests=\"{}\" failures=\"{failures}\">\n<testsuite name=\"ablate gate: {}\" tests=\"{}\" failures=\"{failures}\">\n",
        pairs.len(),
        d.verdict.name(),
        pairs.len()
    );
    for (b, c) in pairs {
        let _ = write!(s, "  <testcase classname=\"ablate.gate\" name=\"{}\">", esc(&b.task));
        if c.pass_rate < b.pass_rate {
            let _ = write!(
                s,
                "<failure message=\"pass rate fell from {:.0}% to {:.0}%\">baseline {}/{}, candidate {}/{}</failure>",
                b.pass_rate * 100.0,
                c.pass_rate * 100.0,
                b.passes,
                b.trials,
                c.passes,
                c.trials
            );
        }
        s.push_str("</testcase>\n");
    }
    s.push_str("</testsuite>\n</testsuites>\n");
    s
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

    fn rate(rng: &mut Rng, p: f64, trials: u32) -> f64 {
        (0..trials).filter(|_| rng.next() < p).count() as f64 / trials as f64
    }

    /// Fraction of replications ending in each verdict for tasks with true
    /// rates `p`, the candidate's lowered by `drop`.
    fn simulate(tasks: usize, trials: u32, drop: f64, reps: usize, seed: u64) -> (f64, f64) {
        let mut rng = Rng(seed);
        let (mut fails, mut passes) = (0, 0);
        for _ in 0..reps {
            let true_rates: Vec<f64> = (0..tasks).map(|_| 0.1 + 0.8 * rng.next()).collect();
            let diffs: Vec<f64> = true_rates.iter().map(|&p| rate(&mut rng, (p - drop).max(0.0), trials) - rate(&mut rng, p, trials)).collect();
            match decide(&diffs, 0.05, 0.05).verdict {
                Verdict::Fail => fails += 1,
                Verdict::Pass => passes += 1,
                Verdict::Inconclusive => {}
            }
        }
        (fails as f64 / reps as f64, passes as f64 / reps as f64)
    }

    #[test]
    fn simulation_aa_gate_fails_at_most_alpha() {
        let reps = 2000;
        // alpha plus three simulation standard errors.
        let bound = 0.05 + 3.0 * (0.05f64 * 0.95 / reps as f64).sqrt();
        for (tasks, trials) in [(10, 3), (14, 5), (30, 2)] {
            let (fail, _) = simulate(tasks, trials, 0.0, reps, 7 + tasks as u64);
            println!("A/A tasks {tasks} trials {trials}: FAIL in {:.1}% of {reps}", fail * 100.0);
            assert!(fail <= bound, "A/A FAIL rate {fail} > {bound}");
        }
    }

    #[test]
    fn simulation_regression_beyond_margin_fails() {
        let (fail, pass) = simulate(14, 10, 0.25, 500, 99);
        println!("drop 25 pp, 14 tasks x 10 trials: FAIL {:.1}%, PASS {:.1}%", fail * 100.0, pass * 100.0);
        assert!(fail >= 0.9, "FAIL in only {fail}");
        assert!(pass == 0.0);
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
        let rows = read(&format!("{HEADER}a,12,11,0.9166666666666666,full,m,,d1,\"{{\"\"max_steps\"\":4}}\",r\nb,4,1,0.25,full,m,,d1,\"{{\"\"max_steps\"\":4}}\",r\n")).unwrap();
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
            (format!("{HEADER}a,4,2,0.5,full,m,,d1,b,r\nb,4,1,0.25,full,m,,d1,b,r\na,4,3,0.75,full,m,,d1,b,r\n"), "row 4, column `task`: task `a` appears twice (first in row 2)"),
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
            ("task,trials,passes,arm,model,model_identity,suite_digest,budget,run_id\na,2,1,full,m,,d1,b,r\n".to_string(), "row 1, column `pass_rate`: missing"),
            (HEADER.to_string(), "the baseline holds no task"),
        ];
        for (body, want) in cases {
            let err = read(&body).expect_err(want);
            assert!(err.starts_with(want), "want `{want}`, got `{err}`");
        }
    }

    #[test]
    fn decision_rule() {
        assert_eq!(decide(&[-0.3, -0.2, -0.4, -0.25], 0.05, 0.05).verdict, Verdict::Fail);
        assert_eq!(decide(&[0.0, 0.01, -0.01, 0.0, 0.02], 0.05, 0.05).verdict, Verdict::Pass);
        let d = decide(&[0.3, -0.3, 0.2, -0.4], 0.05, 0.05);
        assert_eq!(d.verdict, Verdict::Inconclusive);
        assert!(trials_hint(&d, 2.0).unwrap() > 2);
        assert_eq!(Verdict::Inconclusive.exit_code(), 3);
    }
}
