//! The CI regression gate on pass rate.
//!
//! Pooled pass counts of the candidate and the baseline over the tasks both
//! hold (when each side has the same trials on every task, so that pooling
//! weighs every task the same, as the report does; otherwise, a partial run,
//! tasks are the strata: `decide_stratified`), and two exact unconditional tests (`ExactTest`): FAIL when "not
//! worse" is rejected at alpha (a significant regression), PASS when "worse by
//! the margin or more" is rejected at alpha (non-inferior), INCONCLUSIVE
//! otherwise; the one-sided bounds that invert the same tests are printed
//! beside. A baseline is a per-task CSV (`ablate baseline save`) or a run
//! folder; it must match the candidate's suite, tasks, model and budget.
//! docs/statistics.md describes the rule.
//!
//! Its stages, down the pipeline: `baseline` (the per-task rows of a
//! baseline file or a run folder, and the drift between two), `decision`
//! (the exact tests, the verdict and its operating characteristics),
//! `render` (the terminal report, Markdown and JUnit); `run` below chains
//! them for `ablate gate`.

mod baseline;
mod decision;
mod render;

pub use baseline::{
    BaselineRow, NoBaseline, baseline_of_run, drifts, pair, read_baseline, write_baseline,
};
pub(crate) use decision::size_hint;
pub use decision::{
    Characteristic, Decision, ExactTest, GateTest, Method, STRATIFIED_FROM_TRIALS, Verdict,
    characteristics, decide, decide_stratified, gate_test, regression_p,
    stratified_characteristics,
};
pub use render::{junit, markdown, render};

use ablate_core::error::InputError;
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

/// What the gate found: the drifts between baseline and candidate, and the
/// verdict with its report to print (None when a drift refused the
/// comparison). The command line turns it into the exit status.
#[derive(Debug)]
pub struct GateOutcome {
    pub drifts: Vec<String>,
    pub decided: Option<(Verdict, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("{path}: {source}")]
    Write { path: std::path::PathBuf, source: std::io::Error },
}

/// A run the gate can read: loaded, and deciding on pass or fail (a run whose
/// experiment names a primary outcome is refused by name).
fn load_run(dir: &Path) -> Result<crate::report::load::RunData, InputError> {
    crate::report::load::load(dir).map_err(|e| InputError::new(dir, e.to_string()))
}

/// The gate's pipeline: check the options, read the baseline and the
/// candidate, refuse a drift (unless allowed), decide, and write the
/// Markdown and JUnit outputs asked for.
pub fn run(o: &GateOptions) -> Result<GateOutcome, GateError> {
    if !(o.margin >= 0.0 && o.margin < 1.0) {
        return Err(InputError::at(
            &o.candidate,
            "--margin",
            format!("{} is not in [0, 1)", o.margin),
        )
        .into());
    }
    if !(o.alpha > 0.0 && o.alpha < 0.5) {
        return Err(InputError::at(
            &o.candidate,
            "--alpha",
            format!("{} is not in (0, 0.5)", o.alpha),
        )
        .into());
    }
    let load = load_run;
    let base = if o.baseline.is_dir() {
        baseline_of_run(&load(&o.baseline)?, o.arm.as_deref(), o.model.as_deref())
            .map_err(|e| InputError::new(&o.baseline, e.to_string()))?
    } else {
        read_baseline(&o.baseline)?
    };
    let arm = o.arm.clone().or_else(|| Some(base[0].arm.clone()));
    let model = o.model.clone().or_else(|| Some(base[0].model.clone()));
    let cand = baseline_of_run(&load(&o.candidate)?, arm.as_deref(), model.as_deref())
        .map_err(|e| InputError::new(&o.candidate, e.to_string()))?;
    same_outcome(&o.candidate, &base[0], &cand[0])?;
    let drifts = drifts(&base, &cand);
    if !drifts.is_empty() && !o.allow_drift {
        return Ok(GateOutcome { drifts, decided: None });
    }
    let pairs = pair(&base, &cand);
    // The test from the trial counts alone: tasks as strata for a partial run and for complete
    // runs with enough trials a task, the pooled exact tests below.
    let test = gate_test(&pairs);
    let (decision, oc) = match test {
        GateTest::PooledExact => {
            let d = decide(&pairs, o.alpha, o.margin);
            let oc = characteristics(&d);
            (d, oc)
        }
        GateTest::Stratified => (
            decide_stratified(&pairs, o.alpha, o.margin, test),
            stratified_characteristics(&pairs, o.alpha, o.margin),
        ),
        GateTest::StratifiedPartial => {
            (decide_stratified(&pairs, o.alpha, o.margin, test), Vec::new())
        }
    };
    let pooled = decision.test == GateTest::PooledExact;
    let hint = (pooled && decision.verdict == Verdict::Inconclusive)
        .then(|| size_hint(&decision))
        .flatten();
    fn written(path: &Path) -> impl Fn(std::io::Error) -> GateError + '_ {
        move |source| GateError::Write { path: path.to_path_buf(), source }
    }
    let with_partial = |text: String| partial_note(text, pairs.len(), base.len());
    if let Some(path) = &o.markdown {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(written(path))?;
        let text = with_partial(markdown(&decision, &pairs, &oc, hint));
        f.write_all(text.as_bytes()).map_err(written(path))?;
    }
    if let Some(path) = &o.junit {
        std::fs::write(path, junit(&decision, &pairs)).map_err(written(path))?;
    }
    Ok(GateOutcome {
        drifts,
        decided: Some((decision.verdict, with_partial(render(&decision, &pairs, &oc, hint)))),
    })
}

/// One outcome on both sides: a baseline of one primary says nothing about another.
fn same_outcome(
    candidate: &Path,
    base: &BaselineRow,
    cand: &BaselineRow,
) -> Result<(), InputError> {
    if base.primary == cand.primary {
        return Ok(());
    }
    let name = |p: &str| if p.is_empty() { "pass_rate".to_string() } else { p.to_string() };
    Err(InputError::at(
        candidate,
        "experiment.primary",
        format!(
            "the candidate decides on `{}`, the baseline on `{}`: the gate compares one outcome",
            name(&cand.primary),
            name(&base.primary)
        ),
    ))
}

/// A partial candidate is decided on the tasks it has, and the gate says so
/// under its verdict's line: `text` with that line when `paired` is fewer than
/// the baseline's tasks.
fn partial_note(text: String, paired: usize, baseline: usize) -> String {
    match text.find('\n') {
        Some(i) if paired < baseline => format!(
            "{}  the candidate has {paired} of the baseline's {baseline} tasks (a partial run): decided on those\n{}",
            &text[..=i],
            &text[i + 1..]
        ),
        _ => text,
    }
}
