//! The counts printed at the end of `ablate run`: per arm and model, how many
//! final trials passed and how every attempt ended.

use super::RunSummary;
use crate::record::{TrialRecord, TrialStatus};
use std::collections::BTreeMap;
use std::fmt::Write;

pub fn render(summary: &RunSummary) -> String {
    let mut s = String::new();
    // The latest final attempt of each trial counts; interrupted attempts are shown apart.
    let mut latest: BTreeMap<&str, &TrialRecord> = BTreeMap::new();
    for r in summary.records.iter().filter(|r| r.status.is_final()) {
        let e = latest.entry(r.trial_id.as_str()).or_insert(r);
        if r.attempt > e.attempt {
            *e = r;
        }
    }
    let mut groups: BTreeMap<(&str, &str), Vec<&TrialRecord>> = BTreeMap::new();
    for r in latest.values() {
        groups.entry((r.arm.as_str(), r.model.as_str())).or_default().push(r);
    }
    let interrupted = summary.records.iter().filter(|r| r.status == TrialStatus::Interrupted).count();
    let _ = writeln!(s, "{} of {} planned trials recorded ({} run now, {interrupted} interrupted attempts)", latest.len(), summary.planned, summary.ran_now);
    for ((arm, model), rs) in &groups {
        let passed = rs.iter().filter(|r| r.status == TrialStatus::Passed).count();
        let tests: f64 = rs.iter().map(|r| if r.tests_total > 0 { r.tests_passed as f64 / r.tests_total as f64 } else { 0.0 }).sum::<f64>() / rs.len() as f64;
        let tokens: u64 = rs.iter().map(|r| r.tokens.total()).sum();
        let mut statuses: BTreeMap<&str, usize> = BTreeMap::new();
        for r in rs {
            *statuses.entry(r.status.name()).or_default() += 1;
        }
        let statuses = statuses.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
        let _ = writeln!(
            s,
            "  {arm:<28} {model:<20} passed {passed}/{}  tests {:.0}%  {:.0} tokens/trial  [{statuses}]",
            rs.len(),
            tests * 100.0,
            tokens as f64 / rs.len() as f64
        );
    }
    s
}
