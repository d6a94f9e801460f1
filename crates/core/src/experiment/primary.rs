//! `[experiment] primary`: the outcome an experiment's verdicts decide on.

use crate::error::InputError;
use std::path::Path;

/// `[experiment] primary`, checked: `pass_rate` (the default, recorded as
/// none), `tests_passed` (the fraction of a task's tests that pass),
/// `reward.KEY` (a verifier's reward.json key) or `harness.NAME` (an external
/// harness's reported metric): a score in [0, 1], higher better, that the
/// report's verdicts, the sequential design's rule and the gate decide on.
pub fn check(path: &Path, primary: &Option<String>) -> Result<Option<String>, InputError> {
    let Some(name) = primary.as_deref().filter(|p| *p != "pass_rate") else { return Ok(None) };
    let at = |why: String| InputError::at(path, "experiment.primary", why);
    let known = name == "tests_passed"
        || ["reward.", "harness."]
            .iter()
            .any(|p| name.strip_prefix(p).is_some_and(crate::record::is_metric_name));
    if !known {
        return Err(at(format!(
            "`{name}` is not an outcome a verdict can decide on: pass_rate, tests_passed, reward.KEY (a verifier's reward.json) or harness.NAME (an external harness's `ablate-metric` line)"
        )));
    }
    Ok(Some(name.to_string()))
}
