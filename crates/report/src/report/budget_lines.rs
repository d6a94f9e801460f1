//! A budget sweep's curves (`analysis::budget`) in sentences, the same in the terminal,
//! report.md and report.html: the sweep in a heading line, then each curve's points and what
//! they show (where an effect changes sign, where a curve stops growing).

use super::analysis::budget::{BudgetCurves, Curve, NotDrawnWhy, Step};
use super::format::{margin_pp, pct, pp};
use ablate_core::experiment::matrix::{BudgetKey, BudgetLevel};

/// The heading line, then a block of lines for each curve (the first line of each unindented).
pub fn lines(c: &BudgetCurves, primary: &str) -> Vec<String> {
    let levels: Vec<String> = c.levels.iter().map(|&v| level(c.key, v)).collect();
    let outcome =
        if primary == "pass_rate" { "pass rate".to_string() } else { primary.to_string() };
    let mut out = vec![format!(
        "budget sweep of {} at {}: {outcome} and each effect against the budget; each curve's band is simultaneous over its levels (Bonferroni), each step's interval over its steps; unadjusted across curves",
        c.key.name(),
        levels.join(", ")
    )];
    for curve in &c.arms {
        out.push(format!(
            "arm {} ({}), {outcome}: {}",
            curve.of,
            curve.model,
            points(c.key, curve, pct)
        ));
        out.push(format!("  {}", growth(c.key, curve, "rises", "falls")));
    }
    for curve in &c.effects {
        out.push(format!(
            "{} ({}), effect in pp: {}",
            curve.of,
            curve.model,
            points(c.key, curve, pp)
        ));
        out.push(format!("  {}", sign(c.key, curve)));
        out.push(format!("  {}", growth(c.key, curve, "grows", "shrinks")));
    }
    for n in &c.not_drawn {
        let why = match &n.why {
            NotDrawnWhy::PrimaryUnusable => {
                format!("a trial's {outcome} is missing or outside [0, 1]")
            }
            NotDrawnWhy::Refused { level: l } => {
                format!("its comparison at {} was refused", level(c.key, *l))
            }
            NotDrawnWhy::Withheld { level: l, verdict } => {
                format!("at {}, {verdict}", level(c.key, *l))
            }
        };
        out.push(format!("{} ({}): no curve; {why}", n.of, n.model));
    }
    out
}

/// `4000 tokens`.
fn level(key: BudgetKey, value: f64) -> String {
    BudgetLevel { key, value }.to_string()
}

/// `4000 tokens 40.0% [20.0%, 60.0%]; ...` with the band's level.
fn points(key: BudgetKey, c: &Curve, f: fn(f64) -> String) -> String {
    let each: Vec<String> = c
        .points
        .iter()
        .map(|p| {
            let band = if p.lo.is_finite() {
                format!(" [{}, {}]", f(p.lo), f(p.hi))
            } else {
                String::new()
            };
            format!("{} {}{band}", level(key, p.level), f(p.estimate))
        })
        .collect();
    format!("{} ({}% band)", each.join("; "), margin_pp(c.band_level))
}

/// Where an effect's band lies wholly above or below zero, and whether it changes sign.
fn sign(key: BudgetKey, c: &Curve) -> String {
    let at =
        |levels: Vec<f64>| levels.iter().map(|&v| level(key, v)).collect::<Vec<_>>().join(", ");
    match (c.above_zero(), c.below_zero()) {
        (up, down) if !up.is_empty() && !down.is_empty() => {
            format!("the effect changes sign: it hurts at {} and helps at {}", at(down), at(up))
        }
        (up, _) if !up.is_empty() => {
            format!("helps at {}; no level where it detectably hurts", at(up))
        }
        (_, down) if !down.is_empty() => {
            format!("hurts at {}; no level where it detectably helps", at(down))
        }
        _ => "no level shows a detectable effect, so no sign change is shown".to_string(),
    }
}

/// The steps that rise or fall detectably, and the level past which the curve stops growing.
fn growth(key: BudgetKey, c: &Curve, rises: &str, falls: &str) -> String {
    if c.steps.is_empty() {
        return "one level: no step between levels".to_string();
    }
    if c.steps.iter().all(|s| !s.lo.is_finite()) {
        return "steps: no interval (fewer than two tasks)".to_string();
    }
    let step = |s: &Step| {
        format!(
            "{} to {} ({} pp [{}, {}])",
            level(key, s.from),
            level(key, s.to),
            pp(s.change),
            pp(s.lo),
            pp(s.hi)
        )
    };
    let list = |v: Vec<Step>| v.iter().map(step).collect::<Vec<_>>().join(", ");
    let mut parts = Vec::new();
    let (up, down) = (c.rises(), c.falls());
    if up.is_empty() {
        parts.push(format!("no step {rises} detectably"));
    } else {
        parts.push(format!("{rises} detectably from {}", list(up)));
    }
    if !down.is_empty() {
        parts.push(format!("{falls} detectably from {}", list(down)));
    }
    if let Some(at) = c.stops_growing_at() {
        parts.push(format!(
            "stops {} past {}: no later step {rises} detectably",
            growing(rises),
            level(key, at)
        ));
    }
    parts.join("; ")
}

/// `rises` -> `rising`, `grows` -> `growing`.
fn growing(verb: &str) -> String {
    match verb {
        "rises" => "rising".into(),
        "grows" => "growing".into(),
        other => other.into(),
    }
}
