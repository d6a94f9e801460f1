//! The counts printed at the end of `ablate run`: per arm and model, how many
//! final trials passed and how every attempt ended.

use super::analysis::StatusCounts;
use super::load::{Row, RunData};
use ablate_core::record::TrialStatus;
use std::collections::BTreeMap;
use std::fmt::Write;

/// From the rows the final export read back from the run folder (the run
/// holds no records while it runs): `planned` trials in the run, `already`
/// of them recorded before this invocation (the rest of the records it ran).
pub fn render(data: &RunData, planned: u64, already: u64) -> String {
    let ran_now = (data.trials.len() as u64).saturating_sub(already);
    let mut s = String::new();
    // The latest final attempt of each trial counts; interrupted attempts are shown apart.
    let mut groups: BTreeMap<(&str, &str), Vec<&Row>> = BTreeMap::new();
    for r in &data.trials {
        groups.entry((data.arms.name(r.arm), data.models.name(r.model))).or_default().push(r);
    }
    let interrupted: usize = data.interrupted.values().sum();
    let _ = writeln!(
        s,
        "{} of {} planned trials recorded ({} run now, {interrupted} interrupted attempts)",
        data.trials.len(),
        planned,
        ran_now
    );
    for ((arm, model), rs) in &groups {
        let passed = rs.iter().filter(|r| r.status == TrialStatus::Passed).count();
        let tests: f64 = rs.iter().map(|r| r.test_fraction()).sum::<f64>() / rs.len() as f64;
        let tokens: u64 = rs.iter().map(|r| r.tokens_input + r.tokens_output).sum();
        let statuses = StatusCounts::of(rs.iter().map(|r| r.status), None);
        let statuses = super::format::statuses(statuses.iter());
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
