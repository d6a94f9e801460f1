//! How numbers are written in every rendering (terminal, Markdown, CSV notes,
//! HTML): percentages, percentage points, p-values and pass-rate intervals.

use super::interval::{Interval, IntervalMethod};
use ablate_core::record::TrialStatus;

/// Attempts by status, as `failed 2, passed 8` (`StatusCounts::iter`'s order).
pub fn statuses(counts: impl IntoIterator<Item = (TrialStatus, usize)>) -> String {
    let each: Vec<String> = counts.into_iter().map(|(s, n)| format!("{} {n}", s.name())).collect();
    each.join(", ")
}

/// `n` with its noun, singular for 1: `1 task`, `2 tasks`.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// Where the candidate's code ran while each task's checks ran, in one line:
/// `grading: 14 tasks out of process`, or each mode with its count and the
/// in-process tasks named. None when no task is a Python task.
pub fn grading(
    modes: &std::collections::BTreeMap<String, ablate_core::record::GradingMode>,
) -> Option<String> {
    use ablate_core::record::GradingMode;
    if modes.is_empty() {
        return None;
    }
    let inside: Vec<&str> = modes
        .iter()
        .filter(|(_, m)| **m == GradingMode::InProcess)
        .map(|(t, _)| t.as_str())
        .collect();
    let outside = modes.len() - inside.len();
    Some(match (outside, inside.len()) {
        (_, 0) => format!("grading: {} out of process", count(outside, "task")),
        (0, _) => format!("grading: {} in process", count(inside.len(), "task")),
        _ => format!(
            "grading: {} out of process, {} in process ({})",
            count(outside, "task"),
            inside.len(),
            inside.join(", ")
        ),
    })
}

pub(crate) fn pct(x: f64) -> String {
    if x.is_finite() { format!("{:.1}%", x * 100.0) } else { "n/a".into() }
}

pub fn pp(x: f64) -> String {
    if x.is_finite() { format!("{:+.1}", x * 100.0) } else { "n/a".into() }
}

pub fn interval(i: &Interval) -> String {
    if i.method == IntervalMethod::Wilson && i.lo.is_finite() {
        format!("{}  [{}, {}] (Wilson, one task)", pct(i.mean), pct(i.lo), pct(i.hi))
    } else if i.lo.is_finite() {
        format!("{}  [{}, {}]", pct(i.mean), pct(i.lo.max(0.0)), pct(i.hi.min(1.0)))
    } else {
        format!("{}  [no interval]", pct(i.mean))
    }
}

pub fn p(x: f64) -> String {
    if !x.is_finite() {
        "n/a".into()
    } else if x < 0.001 {
        "<0.001".into()
    } else {
        format!("{x:.3}")
    }
}

/// A margin in percentage points, as few digits as it needs (5, 2.5).
pub fn margin_pp(margin: f64) -> String {
    let v = margin * 100.0;
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
