//! A designed experiment's findings in sentences, the same in the terminal, report.md and
//! report.html: a factorial design's effects (`analysis::factorial`), each effect compared
//! between models (`analysis::models`), the variance decomposition (`analysis::variance`) and the
//! tasks that carry a detected effect (`analysis::tasks`). The first line of a block is
//! unindented; its details are indented by two spaces.

use super::analysis::factorial::{Factorial, FactorialEffect, Term};
use super::analysis::models::ModelDifference;
use super::analysis::tasks::TaskEffects;
use super::analysis::variance::Decomposition;
use super::analysis::{EffectReport, EffectVerdict};
use super::format::{pct, pp};

/// `[-3.1, +12.5]`, or `(no interval)`.
fn ci(lo: f64, hi: f64) -> String {
    if lo.is_finite() { format!("[{}, {}]", pp(lo), pp(hi)) } else { "(no interval)".into() }
}

/// The design's heading, then each model's effects: main effects, then interactions in words.
pub fn factorial(f: &Factorial) -> Vec<String> {
    let factors: Vec<String> =
        f.factors.iter().map(|x| format!("{} {}/{}", x.component, x.low, x.high)).collect();
    let mut out = vec![format!(
        "factorial design {} from `{}`, {} runs, factors (low/high): {}; each effect a contrast over every run on each task; intervals at {:.2}% (Bonferroni over {} effects: the design's under every model)",
        f.design,
        f.from,
        f.runs,
        factors.join(", "),
        100.0 * f.interval_level,
        f.family_size
    )];
    for e in &f.effects {
        out.push(effect(e));
        out.extend(carried(&e.tasks, &e.verdict).map(|l| format!("  {l}")));
    }
    for why in &f.not_estimated {
        out.push(format!("not estimated: {why}"));
    }
    out
}

/// A main effect: `feedback (m): +12.5 pp [..], helps`; an interaction: A's effect with B on
/// and off, and the difference.
fn effect(e: &FactorialEffect) -> String {
    let verdict = verdict_words(&e.verdict);
    match &e.term {
        Term::Main { component } => format!(
            "{component} ({}): main effect {} pp {}, {verdict}, {} tasks",
            e.model,
            pp(e.estimate),
            ci(e.lo, e.hi),
            e.n_tasks
        ),
        Term::Interaction { a, b, aliases } => {
            let (on, off) = e.conditional.unwrap_or((f64::NAN, f64::NAN));
            let alias = if aliases.is_empty() {
                String::new()
            } else {
                format!(" (aliased with {}: the design cannot tell them apart)", aliases.join(", "))
            };
            let reading = match e.verdict {
                EffectVerdict::Helps { .. } => format!(": {a} does better with {b} on"),
                EffectVerdict::Hurts { .. } => format!(": {a} does better with {b} off"),
                _ => String::new(),
            };
            format!(
                "{a} x {b} ({}): {a} changes the outcome by {} pp with {b} on and by {} pp with {b} off; difference {} pp {}, {verdict}{reading}{alias}, {} tasks",
                e.model,
                pp(on),
                pp(off),
                pp(e.estimate),
                ci(e.lo, e.hi),
                e.n_tasks
            )
        }
    }
}

/// The verdict as a phrase for an effect of the design.
fn verdict_words(v: &EffectVerdict) -> String {
    match v {
        EffectVerdict::Helps { .. } => "above 0".into(),
        EffectVerdict::Hurts { .. } => "below 0".into(),
        EffectVerdict::NoDetectableEffect { .. } => "not detectably different from 0".into(),
        other => other.to_string(),
    }
}

/// The tasks that carry a detected effect (`v` still detects it), when one or two do.
pub fn carried(t: &TaskEffects, v: &EffectVerdict) -> Option<String> {
    if !matches!(v, EffectVerdict::Helps { .. } | EffectVerdict::Hurts { .. }) {
        return None;
    }
    match (t.carried_by.as_slice(), t.together) {
        ([], _) => None,
        ([one], _) => {
            Some(format!("carried by task {one}: without it, the effect is not detected"))
        }
        ([a, b], true) => {
            Some(format!("carried by tasks {a} and {b}: without both, the effect is not detected"))
        }
        (many, _) => Some(format!(
            "carried by single tasks: without any one of {}, the effect is not detected",
            many.join(", ")
        )),
    }
}

/// The comparisons' tasks: a line for each detected effect one or two tasks carry.
pub(crate) fn carried_comparisons(effects: &[&EffectReport]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| {
            carried(&e.tasks, &e.verdict).map(|l| format!("{} ({}): {l}", e.name, e.model))
        })
        .collect()
}

/// Each effect compared between two models.
pub fn model_differences(d: &[ModelDifference]) -> Vec<String> {
    let Some(first) = d.first() else { return vec![] };
    let mut out = vec![format!(
        "each effect under two models: the difference of its per-task effects over the tasks both ran; intervals at {:.2}% (Bonferroni over {})",
        100.0 * first.interval_level,
        first.family_size
    )];
    for x in d {
        let finding = match x.verdict {
            EffectVerdict::Helps { .. } => format!(": larger under {}", x.model_a),
            EffectVerdict::Hurts { .. } => format!(": larger under {}", x.model_b),
            EffectVerdict::NoDetectableEffect { .. } => ": no detectable difference".into(),
            ref other => format!(": {other}"),
        };
        out.push(format!(
            "{}: {} pp under {}, {} pp under {}; difference {} pp {}{finding}, {} tasks",
            x.effect,
            pp(x.effect_a),
            x.model_a,
            pp(x.effect_b),
            x.model_b,
            pp(x.difference),
            ci(x.lo, x.hi),
            x.n_tasks
        ));
    }
    out
}

/// The variance decomposition: each component's share with its interval, and what a next
/// experiment needs.
pub fn variance(d: &Decomposition) -> Vec<String> {
    let mut out = vec![format!(
        "variance of the outcome by source over {} tasks x {} arms x {} models, {:.1} trials a cell (method of moments{}):",
        d.tasks,
        d.arms,
        d.models,
        d.trials_per_cell,
        if d.components.iter().any(|c| c.lo.is_finite()) {
            format!("; intervals {:.0}%, tasks resampled", 100.0 * d.level)
        } else {
            String::new()
        }
    )];
    for s in &d.components {
        // A source the layout does not have (one arm, one model) is said in a note, not as 0%.
        let absent = match s.component {
            "arm" => d.arms < 2,
            "model" => d.models < 2,
            "arm x model" => d.arms < 2 || d.models < 2,
            _ => false,
        };
        if absent {
            continue;
        }
        let interval = if s.lo.is_finite() {
            format!(" [{}, {}]", pct(s.lo), pct(s.hi))
        } else {
            String::new()
        };
        out.push(format!("  {:<21} {:>6}{interval}", s.component, pct(s.share)));
    }
    for n in &d.notes {
        out.push(format!("  {n}"));
    }
    let next: Vec<String> = d
        .next
        .iter()
        .map(|n| match n.tasks {
            Some(t) => format!(
                "{t} tasks at {}",
                super::format::count(n.trials_per_task as usize, "trial")
            ),
            None => format!(
                "no task count at {}",
                super::format::count(n.trials_per_task as usize, "trial")
            ),
        })
        .collect();
    if !next.is_empty() {
        out.push(format!(
            "  a 10 pp difference between two arms, 80% power at this alpha, with these components: {}",
            next.join(", ")
        ));
    }
    out
}

/// Every designed-experiment section of a report with something to say, as (heading, lines).
pub(crate) fn sections(r: &super::analysis::Report) -> Vec<(&'static str, Vec<String>)> {
    let mut out = Vec::new();
    if let Some(f) = &r.factorial {
        out.push(("Factorial design", factorial(f)));
    }
    if let Some(f) = &r.factorial
        && !f.model_differences.is_empty()
    {
        out.push(("Factorial effects by model", model_differences(&f.model_differences)));
    }
    if !r.model_differences.is_empty() {
        out.push(("Comparisons by model", model_differences(&r.model_differences)));
    }
    let effects: Vec<&EffectReport> = r.ablations.iter().chain(&r.combined).collect();
    let carried = carried_comparisons(&effects);
    if !carried.is_empty() {
        out.push(("Effects carried by few tasks", carried));
    }
    if let Some(d) = &r.variance {
        out.push(("Harness or model: variance by source", variance(d)));
    }
    out
}
