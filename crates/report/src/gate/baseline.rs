//! Baselines: the per-task pass counts of one arm and model of a run
//! (`ablate baseline save` writes them as CSV), read back row by row with
//! errors naming row and column, and the drift between a baseline and a
//! candidate (suite, tasks, model, budget).

use crate::report::load::RunData;
use ablate_core::error::InputError;
use ablate_core::record::TrialStatus;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

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
    /// The container resources the arm sets, as JSON; empty when it sets none (and in
    /// baselines saved before the column existed, which read as none).
    #[serde(default)]
    pub resources: String,
    /// The run's primary outcome (`[experiment] primary`), empty for the pass rate; and the sum
    /// of its scores over the task's trials (the passes, for the pass rate). Baselines saved
    /// before these columns existed read as the pass rate.
    #[serde(default)]
    pub primary: String,
    #[serde(default)]
    pub score: f64,
}

impl BaselineRow {
    /// What the gate's tests count a task's trials as: its passes, or its primary's score sum.
    pub fn successes(&self) -> f64 {
        if self.primary.is_empty() { f64::from(self.passes) } else { self.score }
    }

    /// `11/12`, or a score sum `8.25/12`.
    pub(crate) fn tally(&self) -> String {
        if self.primary.is_empty() {
            format!("{}/{}", self.passes, self.trials)
        } else {
            format!("{:.2}/{}", self.score, self.trials)
        }
    }
}

/// Why a run gives no baseline: no one (arm, model) is chosen, or it has no finished trial; `what` is `arm` or
/// `model`, `has` the run's names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoBaseline {
    #[error("the run has no {what} `{want}`; it has: {has}")]
    NoSuch { what: &'static str, want: String, has: String },
    #[error("the run has several {what}s ({has}); choose one with --{what}")]
    Several { what: &'static str, has: String },
    #[error("no finished trials for arm `{arm}` and model `{model}`")]
    NoTrials { arm: String, model: String },
    #[error(
        "a trial of task `{task}` has no score of the run's primary outcome `{primary}` in [0, 1]: the gate decides on it"
    )]
    Unscored { primary: String, task: String },
}

/// Per-task pass counts of one (arm, model) of a run, with its identity.
pub fn baseline_of_run(
    data: &RunData,
    arm: Option<&str>,
    model: Option<&str>,
) -> Result<Vec<BaselineRow>, NoBaseline> {
    let pick = |names: &crate::report::load::Names,
                want: Option<&str>,
                what: &'static str|
     -> Result<u32, NoBaseline> {
        let has = || names.list.join(", ");
        match want {
            Some(w) => {
                names.get(w).ok_or_else(|| NoBaseline::NoSuch { what, want: w.into(), has: has() })
            }
            None if names.list.len() == 1 => Ok(0),
            None => Err(NoBaseline::Several { what, has: has() }),
        }
    };
    let arm_i = pick(&data.arms, arm, "arm")?;
    let model_i = pick(&data.models, model, "model")?;
    let model_name = data.models.name(model_i).to_string();
    let identity = data
        .manifest
        .models
        .iter()
        .find(|m| m.name == model_name)
        .and_then(|m| m.identity.clone())
        .unwrap_or_default();
    let (budget, resources) = arm_facts(data, arm_i);
    let primary = crate::report::analysis::primary::Primary::of(data);
    let primary_name = if primary == crate::report::analysis::primary::Primary::PassRate {
        String::new()
    } else {
        primary.name().to_string()
    };
    let per_task = tally(data, (arm_i, model_i), &primary)?;
    if per_task.is_empty() {
        return Err(NoBaseline::NoTrials {
            arm: data.arms.name(arm_i).to_string(),
            model: model_name,
        });
    }
    Ok(per_task
        .into_iter()
        .map(|(t, (n, p, score))| BaselineRow {
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
            resources: resources.clone(),
            primary: primary_name.clone(),
            score,
        })
        .collect())
}

/// The arm's budget (a budget sweep's arm at its level) and the container resources it sets,
/// as JSON (empty when it sets none).
fn arm_facts(data: &RunData, arm: u32) -> (String, String) {
    let settings = data.arm_settings.iter().find(|a| a.name == data.arms.name(arm));
    let budget = settings
        .map_or_else(|| data.manifest.budget.clone(), |a| a.budget_under(&data.manifest.budget));
    let resources = settings
        .filter(|a| !a.resources.is_empty())
        .map(|a| serde_json::to_string(&a.resources).unwrap_or_default())
        .unwrap_or_default();
    (serde_json::to_string(&budget).unwrap_or_default(), resources)
}

/// Per task of one (arm, model): trials, passes and the primary's score sum. A trial that ended
/// in an infrastructure error scores 0, as it counts as not passed; one without a score in
/// [0, 1] gives no baseline.
fn tally(
    data: &RunData,
    (arm, model): (u32, u32),
    primary: &crate::report::analysis::primary::Primary,
) -> Result<BTreeMap<u32, (u32, u32, f64)>, NoBaseline> {
    let mut per_task: BTreeMap<u32, (u32, u32, f64)> = BTreeMap::new();
    for r in data.trials.iter().filter(|r| r.arm == arm && r.model == model) {
        let e = per_task.entry(r.task).or_default();
        e.0 += 1;
        if r.status == TrialStatus::Passed {
            e.1 += 1;
        }
        let score = if r.status.is_infrastructure_error() { 0.0 } else { primary.value(data, r) };
        if !(0.0..=1.0).contains(&score) {
            let task = data.tasks.name(r.task).to_string();
            return Err(NoBaseline::Unscored { primary: primary.name().to_string(), task });
        }
        e.2 += score;
    }
    Ok(per_task)
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
pub(crate) const BASELINE_COLUMNS: [&str; 10] = [
    "task",
    "trials",
    "passes",
    "pass_rate",
    "arm",
    "model",
    "model_identity",
    "suite_digest",
    "budget",
    "run_id",
];

/// How far a baseline's `pass_rate` may stray from passes / trials: a
/// hand-edited file may round it to two decimals.
const PASS_RATE_TOLERANCE: f64 = 0.005;

/// Read a baseline file and check it row by row: every column present, counts
/// that are whole numbers with passes <= trials, a pass rate that agrees with
/// them, each task once, and one arm, model, suite and budget throughout. An
/// error names the file, the row (as a spreadsheet numbers it: the header is
/// row 1) and the column. The pass rate used is passes / trials.
pub fn read_baseline(path: &Path) -> Result<Vec<BaselineRow>, InputError> {
    let mut r = csv::Reader::from_path(path)
        .map_err(|e| InputError::new(path, format!("cannot read: {e}")))?;
    let headers = r
        .headers()
        .map_err(|e| InputError::new(path, format!("cannot read the header row: {e}")))?
        .clone();
    for col in BASELINE_COLUMNS {
        if !headers.iter().any(|h| h == col) {
            return Err(bad(
                path,
                1,
                col,
                format!("missing; a baseline has the columns {}", BASELINE_COLUMNS.join(",")),
            ));
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
        let fields = Fields { path, headers: &headers, record: &record, row };
        let current = fields.baseline_row(&mut first_row_of)?;
        if let Some(first) = rows.first() {
            fields.same_run(first, &current, &first_row_of)?;
        }
        rows.push(current);
    }
    if rows.is_empty() {
        return Err(InputError::new(path, "the baseline holds no task"));
    }
    Ok(rows)
}

/// An error at a row and column of a baseline file.
fn bad(path: &Path, row: u64, col: &str, msg: String) -> InputError {
    InputError::new(path, format!("row {row}, column `{col}`: {msg}"))
}

/// One row of a baseline file as it is read: its fields by column name, and
/// its number for errors.
struct Fields<'a> {
    path: &'a Path,
    headers: &'a csv::StringRecord,
    record: &'a csv::StringRecord,
    row: u64,
}

impl Fields<'_> {
    fn bad(&self, col: &str, msg: String) -> InputError {
        bad(self.path, self.row, col, msg)
    }

    /// The column's field, trimmed (empty when the row has none).
    fn field(&self, col: &str) -> &str {
        self.headers
            .iter()
            .position(|h| h == col)
            .and_then(|i| self.record.get(i))
            .unwrap_or("")
            .trim()
    }

    fn count(&self, col: &str) -> Result<u32, InputError> {
        let v = self.field(col);
        v.parse::<u32>()
            .map_err(|_| self.bad(col, format!("`{v}` is not a whole number of at least 0")))
    }

    /// The row checked: its task new (noted in `first_row_of`), its counts and
    /// pass rate, its score.
    fn baseline_row(
        &self,
        first_row_of: &mut BTreeMap<String, u64>,
    ) -> Result<BaselineRow, InputError> {
        let task = self.field("task").to_string();
        if task.is_empty() {
            return Err(self.bad("task", "empty".into()));
        }
        if let Some(first) = first_row_of.get(&task) {
            return Err(
                self.bad("task", format!("task `{task}` appears twice (first in row {first})"))
            );
        }
        first_row_of.insert(task.clone(), self.row);
        let (trials, passes, expected) = self.counts()?;
        let text = |col: &str| self.field(col).to_string();
        let primary = text("primary");
        let score = self.score(&primary, trials, passes)?;
        Ok(BaselineRow {
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
            resources: text("resources"),
            primary,
            score,
        })
    }

    /// Trials and passes, whole numbers with passes <= trials, and the pass
    /// rate they give, which the row's `pass_rate` must agree with.
    fn counts(&self) -> Result<(u32, u32, f64), InputError> {
        let trials = self.count("trials")?;
        let passes = self.count("passes")?;
        if trials == 0 {
            return Err(self.bad("trials", "0: a task of a baseline has at least one trial".into()));
        }
        if passes > trials {
            return Err(self.bad("passes", format!("{passes} passes of {trials} trials")));
        }
        let rate_text = self.field("pass_rate");
        let rate: f64 = rate_text
            .parse()
            .map_err(|_| self.bad("pass_rate", format!("`{rate_text}` is not a number")))?;
        let expected = passes as f64 / trials as f64;
        if !rate.is_finite() || (rate - expected).abs() > PASS_RATE_TOLERANCE {
            return Err(self.bad(
                "pass_rate",
                format!(
                    "{rate_text} contradicts passes / trials = {passes}/{trials} = {expected:.3}"
                ),
            ));
        }
        Ok((trials, passes, expected))
    }

    /// The task's score sum: its passes for the pass rate, else the row's
    /// `score`, from 0 to its trials.
    fn score(&self, primary: &str, trials: u32, passes: u32) -> Result<f64, InputError> {
        if primary.is_empty() {
            return Ok(f64::from(passes));
        }
        let v = self.field("score");
        match v.parse::<f64>() {
            Ok(x) if (0.0..=f64::from(trials)).contains(&x) => Ok(x),
            _ => Err(self
                .bad("score", format!("`{v}` is not a score sum from 0 to the {trials} trials"))),
        }
    }

    /// The row is of the same arm, model and run as the file's first row.
    fn same_run(
        &self,
        first: &BaselineRow,
        current: &BaselineRow,
        first_row_of: &BTreeMap<String, u64>,
    ) -> Result<(), InputError> {
        let same = [
            ("arm", &first.arm, &current.arm),
            ("model", &first.model, &current.model),
            ("model_identity", &first.model_identity, &current.model_identity),
            ("suite_digest", &first.suite_digest, &current.suite_digest),
            ("budget", &first.budget, &current.budget),
            ("resources", &first.resources, &current.resources),
            ("primary", &first.primary, &current.primary),
        ];
        if let Some((col, a, b)) = same.iter().find(|(_, a, b)| a != b) {
            let first_row = first_row_of[&first.task];
            return Err(self.bad(
                col,
                format!(
                    "`{b}` differs from row {first_row}'s `{a}`: a baseline is one arm and model of one run"
                ),
            ));
        }
        Ok(())
    }
}

/// Differences between what was fixed for the baseline and for the candidate.
pub fn drifts(base: &[BaselineRow], cand: &[BaselineRow]) -> Vec<String> {
    let mut out = Vec::new();
    let (b, c) = (&base[0], &cand[0]);
    if b.suite_digest != c.suite_digest {
        out.push(format!(
            "suite digest: baseline {} vs candidate {}",
            short(&b.suite_digest),
            short(&c.suite_digest)
        ));
    }
    let bt: Vec<&str> = base.iter().map(|r| r.task.as_str()).collect();
    let ct: Vec<&str> = cand.iter().map(|r| r.task.as_str()).collect();
    // A candidate with fewer of the baseline's tasks is a partial run, decided on the tasks it
    // has (`pair`); a task the baseline lacks is a drift.
    let only_b: Vec<&str> = bt.iter().copied().filter(|t| !ct.contains(t)).collect();
    let only_c: Vec<&str> = ct.iter().copied().filter(|t| !bt.contains(t)).collect();
    if !only_c.is_empty() {
        out.push(format!(
            "task set: only in baseline [{}], only in candidate [{}]",
            only_b.join(", "),
            only_c.join(", ")
        ));
    }
    if b.model != c.model || b.model_identity != c.model_identity {
        out.push(format!(
            "model: baseline {} ({}) vs candidate {} ({})",
            b.model,
            or_none(&b.model_identity),
            c.model,
            or_none(&c.model_identity)
        ));
    }
    if b.budget != c.budget {
        out.push(format!("budget: baseline {} vs candidate {}", b.budget, c.budget));
    }
    if b.resources != c.resources {
        let text =
            |r: &str| if r.is_empty() { "the tasks' own".to_string() } else { r.to_string() };
        out.push(format!(
            "container resources: baseline {} vs candidate {}",
            text(&b.resources),
            text(&c.resources)
        ));
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
pub fn pair<'a>(
    base: &'a [BaselineRow],
    cand: &'a [BaselineRow],
) -> Vec<(&'a BaselineRow, &'a BaselineRow)> {
    base.iter().filter_map(|b| cand.iter().find(|c| c.task == b.task).map(|c| (b, c))).collect()
}

/// Why the paired rows cannot be pooled with each task weighing the same:
/// the tasks' trial counts differ within the baseline or within the
/// candidate (a partial or interrupted run has this shape). Pooled counts
/// weigh each task by its trials, so baseline 24/24 and 0/24 against a
/// candidate's 2/2 and 0/24 would read as -42 pp with no task changed; the
/// gate refuses instead (the report weighs every task the same). The flag
/// says whether the candidate is among the sides at fault (the file to name).
pub(crate) fn unequal_trials(pairs: &[(&BaselineRow, &BaselineRow)]) -> Option<(bool, String)> {
    let side = |name: &str, rows: Vec<&BaselineRow>| -> Option<String> {
        let first = rows.first()?.trials;
        if rows.iter().all(|r| r.trials == first) {
            return None;
        }
        let mut counts: Vec<(u32, Vec<&str>)> = Vec::new();
        for r in &rows {
            match counts.iter_mut().find(|(n, _)| *n == r.trials) {
                Some((_, tasks)) => tasks.push(&r.task),
                None => counts.push((r.trials, vec![&r.task])),
            }
        }
        counts.sort_by_key(|(_, tasks)| std::cmp::Reverse(tasks.len()));
        let listed = counts
            .iter()
            .map(|(n, tasks)| {
                let shown = if tasks.len() > 4 {
                    format!("{} and {} more", tasks[..4].join(", "), tasks.len() - 4)
                } else {
                    tasks.join(", ")
                };
                format!("{n} trials: {shown}")
            })
            .collect::<Vec<_>>()
            .join("; ");
        Some(format!("the {name}'s tasks have unequal trial counts ({listed})"))
    };
    let candidate = side("candidate", pairs.iter().map(|p| p.1).collect());
    let in_candidate = candidate.is_some();
    let problems: Vec<String> = [side("baseline", pairs.iter().map(|p| p.0).collect()), candidate]
        .into_iter()
        .flatten()
        .collect();
    (!problems.is_empty()).then(|| {
        (
            in_candidate,
            format!(
                "{}: pooled pass counts would weigh the tasks unequally; the gate compares every task with the same weight, so each side needs the same trials on every task (resume an interrupted run: ablate run --resume)",
                problems.join("; ")
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn different_arm_set_container_resources_are_a_drift() {
        let row = |resources: &str| BaselineRow {
            task: "t".into(),
            trials: 1,
            passes: 1,
            pass_rate: 1.0,
            arm: "a".into(),
            model: "m".into(),
            model_identity: String::new(),
            suite_digest: "d".into(),
            budget: "b".into(),
            run_id: "r".into(),
            resources: resources.into(),
            primary: String::new(),
            score: 1.0,
        };
        assert!(drifts(&[row("")], &[row("")]).is_empty());
        assert_eq!(
            drifts(&[row("")], &[row("{\"cpus\":2.0}")]),
            ["container resources: baseline the tasks' own vs candidate {\"cpus\":2.0}"]
        );
    }

    const HEADER: &str =
        "task,trials,passes,pass_rate,arm,model,model_identity,suite_digest,budget,run_id\n";

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
