//! The costs and reliability of a comparison and of an arm (`analysis::costs`)
//! in sentences, the same in the terminal, report.md and report.html.

use super::analysis::ArmReport;
use super::analysis::EffectReport;
use super::analysis::costs::Spend;
use super::format::{pct, pp};
use super::stats::Span;

/// The comparison's trade-off in one line: "+X pp [lo, hi] at Y x the tokens
/// [lo, hi]" (and the cost, when the trials recorded one). None without a
/// tokens ratio.
pub(crate) fn tradeoff(e: &EffectReport) -> Option<String> {
    let ratio = |o: Spend| {
        let r = e.costs.per_trial(o)?.ratio;
        r.estimate
            .is_finite()
            .then(|| format!("{} the {}{}", times(r.estimate), o.words(), bracket(r, times)))
    };
    let tokens = ratio(Spend::Tokens)?;
    let cost = ratio(Spend::Cost).map(|c| format!(" and {c}")).unwrap_or_default();
    let interval =
        if e.lo.is_finite() { format!(" [{}, {}]", pp(e.lo), pp(e.hi)) } else { String::new() };
    Some(format!("{} pp{interval} at {tokens}{cost}", pp(e.delta)))
}

/// A comparison's costs and reliability, a sentence a line: the trade-off,
/// then each spend per trial, the tokens and cost per solved task, and
/// pass^k at the largest k.
pub fn effect(e: &EffectReport) -> Vec<String> {
    let c = &e.costs;
    let mut out = Vec::new();
    if let Some(t) = tradeoff(e) {
        out.push(format!("trade-off: {t}"));
    }
    if c.per_trial.is_empty() {
        return out;
    }
    out.push(format!(
        "costs ({} intervals, unadjusted, paired over {}{}): {} -> {}",
        super::format::margin_pp(c.level) + "%",
        super::format::count(c.n_tasks, "task"),
        if e.sequential.is_some() {
            "; fixed-design intervals, a description after a sequential stop"
        } else {
            ""
        },
        e.control,
        e.treatment
    ));
    for s in &c.per_trial {
        let v = |x: f64| value(s.outcome, x);
        out.push(format!(
            "  {} per trial: {} -> {}, {}{}, {}{}",
            s.outcome.words(),
            v(s.control),
            v(s.treatment),
            signed(s.outcome, s.difference.estimate),
            bracket(s.difference, |x| signed(s.outcome, x)),
            times(s.ratio.estimate),
            bracket(s.ratio, times)
        ));
    }
    for s in c.per_solved.iter().filter(|s| s.outcome != Spend::WorkingSeconds) {
        let v = |x: f64| value(s.outcome, x);
        let label = format!("{} per solved task", s.outcome.words());
        let change = format!("{}{}", times(s.ratio.estimate), bracket(s.ratio, times));
        out.push(arms_and_change(&label, (s.control, s.treatment), v, &change));
    }
    for m in &c.metrics {
        let v = |x: f64| if x.is_finite() { format!("{x:.3}") } else { "n/a".into() };
        let d = |x: f64| if x.is_finite() { format!("{x:+.3}") } else { "n/a".into() };
        out.push(format!(
            "  {}: {} -> {}, {}{}",
            m.name,
            v(m.control),
            v(m.treatment),
            d(m.difference.estimate),
            bracket(m.difference, d)
        ));
    }
    // The largest k both arms reached (every k: report.json).
    if let Some(h) = c.pass_hat_k.last() {
        let change = format!("{} pp{}", pp(h.difference.estimate), bracket(h.difference, pp));
        out.push(arms_and_change(&format!("pass^{}", h.k), (h.control, h.treatment), pct, &change));
    }
    out
}

/// What an arm's containers ran on, its infrastructure errors, spend per
/// solved task and reliability, as (label, text) lines.
pub fn arm(arm: &ArmReport) -> Vec<(String, String)> {
    let a = &arm.costs;
    let mut out = Vec::new();
    if !arm.containers.is_empty() {
        out.push(("Containers".to_string(), arm.containers.join("; ")));
    }
    if a.infra_errors.estimate > 0.0 {
        let e = a.infra_errors;
        out.push((
            "Infra errors".to_string(),
            format!("{}{} of trials", pct(e.estimate), bracket(e, pct)),
        ));
    }
    let solved: Vec<String> = a
        .per_solved
        .iter()
        .filter(|(_, s)| s.estimate.is_finite())
        .map(|(o, s)| {
            format!("{} {}{}", value(*o, s.estimate), o.words(), bracket(*s, |x| value(*o, x)))
        })
        .collect();
    if !a.per_solved.is_empty() {
        let text = if solved.is_empty() { "none solved".to_string() } else { solved.join(", ") };
        out.push(("Per solved task".to_string(), text));
    }
    for r in &a.reliability {
        out.push((
            format!("pass^{}", r.k),
            format!(
                "{}{}, consistency {}{}",
                pct(r.pass_hat_k.estimate),
                bracket(r.pass_hat_k, pct),
                pct(r.consistency.estimate),
                bracket(r.consistency, pct)
            ),
        ));
    }
    out
}

/// "  label: control [lo, hi] -> treatment [lo, hi], change", each arm's value in `f`'s format.
fn arms_and_change(
    label: &str,
    (c, t): (Span, Span),
    f: impl Fn(f64) -> String,
    change: &str,
) -> String {
    format!(
        "  {label}: {}{} -> {}{}, {change}",
        f(c.estimate),
        bracket(c, &f),
        f(t.estimate),
        bracket(t, &f)
    )
}

/// A ratio as a multiple: "1.80x".
pub fn times(x: f64) -> String {
    if !x.is_finite() {
        "n/a".into()
    } else if x >= 100.0 {
        format!("{x:.0}x")
    } else if x >= 0.1 {
        format!("{x:.2}x")
    } else {
        format!("{x:.3}x")
    }
}

/// A quantity in its unit: 1460 tokens, $0.0123, 12.5 s, 2.40 steps.
pub fn value(o: Spend, x: f64) -> String {
    if !x.is_finite() {
        return "n/a".into();
    }
    match o {
        Spend::Tokens => format!("{x:.0}"),
        Spend::Cost => format!("${x:.4}"),
        Spend::WorkingSeconds => format!("{x:.1} s"),
        Spend::Steps => format!("{x:.2}"),
    }
}

/// A difference in its unit, with its sign.
fn signed(o: Spend, x: f64) -> String {
    let v = value(o, x.abs());
    if !x.is_finite() {
        v
    } else if x < 0.0 {
        format!("-{v}")
    } else {
        format!("+{v}")
    }
}

/// " [lo, hi]" of a span in `f`'s format, or nothing without an interval.
pub(crate) fn bracket(s: Span, f: impl Fn(f64) -> String) -> String {
    if s.lo.is_finite() { format!(" [{}, {}]", f(s.lo), f(s.hi)) } else { String::new() }
}
