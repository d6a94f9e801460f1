//! The terminal report, in the spirit of hyperfine: one block per arm, then
//! one line per effect. Colour only when asked (a terminal without NO_COLOR).

use super::analysis::{
    ArmReport, ESTIMAND_TASKS_LIKE_THESE, ESTIMAND_THIS_TASK, EffectKind, EffectReport,
    EffectVerdict, Report, estimand_note,
};
use super::format::{count, interval, p, pct, pp};
use std::fmt::Write;

struct Paint(bool);
impl Paint {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.0 { format!("\x1b[{code}m{s}\x1b[0m") } else { s.to_string() }
    }
    fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }
    fn green(&self, s: &str) -> String {
        self.wrap("32", s)
    }
    fn red(&self, s: &str) -> String {
        self.wrap("31", s)
    }
    fn yellow(&self, s: &str) -> String {
        self.wrap("33", s)
    }
    fn dim(&self, s: &str) -> String {
        self.wrap("2", s)
    }
}

fn arm_block(s: &mut String, a: &ArmReport, c: &Paint, level: f64) {
    let _ = writeln!(
        s,
        "{} {}",
        c.bold(&format!("Arm {}", a.arm)),
        c.dim(&format!(
            "({}, {} over {})",
            a.model,
            count(a.trials, "trial"),
            count(a.tasks, "task")
        ))
    );
    let estimand =
        if a.pass_rate.n_tasks == 1 { ESTIMAND_THIS_TASK } else { ESTIMAND_TASKS_LIKE_THESE };
    let _ = writeln!(
        s,
        "  Pass rate:       {}  {:.0}% CI, {estimand}",
        c.green(&interval(&a.pass_rate)),
        level * 100.0
    );
    let _ = writeln!(
        s,
        "  Excl. infra:     {}  ({} trials)",
        interval(&a.pass_rate_excl_infra),
        a.trials_excl_infra
    );
    if a.stopped_but_passing > 0 {
        let n = count(a.stopped_but_passing, "trial");
        let _ = writeln!(
            s,
            "  Final state:     {}  ({n} stopped by time or budget with a passing state count as passed, as Harbor scores)",
            interval(&a.pass_rate_final_state)
        );
    }
    let _ = writeln!(s, "  Tests passed:    {}", interval(&a.tests_passed));
    let _ = writeln!(s, "  Task range:      {} … {}", pct(a.min_task_rate), pct(a.max_task_rate));
    let _ = writeln!(s, "  Statuses:        {}", super::format::statuses(a.statuses.iter()));
    let mut per = format!(
        "{:.0} tokens, {:.1} steps, {:.1} s",
        a.tokens_per_trial, a.steps_per_trial, a.working_seconds_per_trial
    );
    if let Some(cost) = a.cost_per_trial {
        per.push_str(&format!(", ${cost:.4}"));
    }
    let _ = writeln!(s, "  Per trial:       {per}");
    if !a.pass_at_k.is_empty() {
        let at = a
            .pass_at_k
            .iter()
            .map(|(k, v, _)| format!("@{k} {}", pct(*v)))
            .collect::<Vec<_>>()
            .join("  ");
        let _ = writeln!(s, "  pass@k:          {at}");
    }
    for (label, text) in super::cost_lines::arm(a) {
        let _ = writeln!(s, "  {:<17}{text}", format!("{label}:"));
    }
    for w in &a.warnings {
        let _ = writeln!(s, "  {} {w}", c.yellow("warning:"));
    }
    s.push('\n');
}

fn effect_line(s: &mut String, e: &EffectReport, c: &Paint, width: usize) {
    let verdict = match &e.verdict {
        EffectVerdict::Helps { .. } => c.green(&e.verdict.to_string()),
        EffectVerdict::Hurts { .. } => c.red(&e.verdict.to_string()),
        EffectVerdict::NotDelivered { .. } | EffectVerdict::NotComparable { .. } => {
            c.yellow(&e.verdict.to_string())
        }
        v => v.to_string(),
    };
    let label =
        if e.kind == EffectKind::Ablation { e.components.join(",") } else { "combined".into() };
    let ci =
        if e.lo.is_finite() { format!("[{}, {}]", pp(e.lo), pp(e.hi)) } else { "[n/a]".into() };
    let adjusted = e.p_adjusted.map(|h| format!(" (adj. {})", p(h))).unwrap_or_default();
    let _ = writeln!(
        s,
        "  {:<16} {:<width$} {:>7} pp {:<18} p {}{adjusted}  {}",
        label,
        format!("{} vs {} [{}]", e.treatment, e.control, e.model),
        pp(e.delta),
        ci,
        p(e.p_value),
        verdict,
    );
    if e.scope != "tasks" {
        let _ = writeln!(
            s,
            "  {:<16} {}",
            "",
            c.dim(&format!(
                "{}: the trials of one task ({}); says nothing about other tasks",
                e.scope, e.method
            ))
        );
    }
    if let Some(note) = super::analysis::sequential_note(e) {
        let _ = writeln!(s, "  {:<16} {}", "", c.dim(&note));
    }
    for line in super::cost_lines::effect(e) {
        let _ = writeln!(s, "  {:<16} {}", "", c.dim(&line));
    }
    if let Some(note) = &e.delivery_note {
        let _ = writeln!(s, "  {:<16} {}", "", c.dim(&format!("delivery: {note}")));
    }
    if e.infra_differs {
        let _ = writeln!(
            s,
            "  {:<16} {} infrastructure errors differ ({} in {}, {} in {}); {}",
            "",
            c.yellow("warning:"),
            e.infra_errors_treatment,
            e.treatment,
            e.infra_errors_control,
            e.control,
            super::export::excl_note(e)
        );
    }
}

/// The inferences behind a list of effects, in words.
fn methods(effects: &[EffectReport]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in effects {
        let m = e.method.words();
        if !seen.contains(&m) {
            seen.push(m);
        }
    }
    seen.join("; ")
}

pub fn render(r: &Report, colour: bool) -> String {
    let c = Paint(colour);
    let level = 1.0 - r.alpha;
    let mut s = head(r, &c);
    for a in &r.arms {
        arm_block(&mut s, a, &c, level);
    }
    effect_sections(&mut s, r, &c);
    design_sections(&mut s, r, &c);
    for refused in &r.refused {
        let _ = writeln!(s, "{} {refused}", c.yellow("refused:"));
    }
    for change in super::analysis::fingerprint_changes(r) {
        let _ = writeln!(s, "{} {change}", c.yellow("warning:"));
    }
    if !r.unreadable_lines.is_empty() {
        let _ = writeln!(
            s,
            "{} unreadable lines in trials.jsonl: {:?} (kept everything else)",
            c.yellow("warning:"),
            r.unreadable_lines
        );
    }
    s
}

/// The run's heading: what ran, on what suite, how many trials, where they came from, how they
/// were graded, and what the verdicts decide on.
fn head(r: &Report, c: &Paint) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}  run {}  suite {}  {} of {} trials recorded{}\n",
        c.bold(&r.experiment),
        r.run_id,
        r.suite,
        r.recorded_trials,
        r.planned_trials,
        if r.interrupted_attempts > 0 {
            format!(", {} interrupted attempts", r.interrupted_attempts)
        } else {
            String::new()
        }
    );
    if let Some(imported) = &r.imported {
        let _ = writeln!(s, "{}\n", c.dim(imported));
    }
    if let Some(line) = super::format::grading(&r.grading) {
        let _ = writeln!(s, "{}\n", c.dim(&line));
    }
    if let Some(line) = super::analysis::primary::note(r) {
        let _ = writeln!(s, "{}\n", c.bold(&line));
    }
    s
}

/// The ablations' lines and the combined comparisons', each under its heading when there are any.
fn effect_sections(s: &mut String, r: &Report, c: &Paint) {
    let level = 1.0 - r.alpha;
    let width = r
        .ablations
        .iter()
        .chain(&r.combined)
        .map(|e| e.treatment.len() + e.control.len() + e.model.len() + 7)
        .max()
        .unwrap_or(20);
    if !r.ablations.is_empty() {
        let _ = writeln!(
            s,
            "{}",
            c.bold(&format!(
                "Ablations (treatment - control, paired over tasks; {}, i.e. {:.0}% adjusted for {} ({}); {}):",
                super::export::interval_levels(&r.ablations),
                level * 100.0,
                count(r.ablations.first().map_or(0, |e| e.family_size), "ablation"),
                super::export::adjustment(&r.ablations),
                methods(&r.ablations)
            ))
        );
        if let Some(note) = estimand_note(&r.ablations) {
            let _ = writeln!(s, "  {}", c.dim(note));
        }
        for e in &r.ablations {
            effect_line(s, e, c, width);
        }
        s.push('\n');
    }
    if !r.combined.is_empty() {
        let _ = writeln!(
            s,
            "{}",
            c.bold(
                "Combined comparisons (several components differ: not attributable to one component; each at alpha, unadjusted, outside the ablations' family):"
            )
        );
        if let Some(note) = estimand_note(&r.combined) {
            let _ = writeln!(s, "  {}", c.dim(note));
        }
        for e in &r.combined {
            effect_line(s, e, c, width);
        }
        s.push('\n');
    }
}

/// A budget sweep's curves, then the designs' sections (`design_lines`), each under its heading.
fn design_sections(s: &mut String, r: &Report, c: &Paint) {
    if let Some(curves) = &r.budget_curves {
        let lines = super::budget_lines::lines(curves, &r.primary);
        let _ = writeln!(s, "{}", c.bold("Budget curves:"));
        for l in lines {
            let _ = writeln!(s, "  {l}");
        }
        s.push('\n');
    }
    for (heading, lines) in super::design_lines::sections(r) {
        let _ = writeln!(s, "{}", c.bold(&format!("{heading}:")));
        for l in lines {
            let _ = writeln!(s, "  {l}");
        }
        s.push('\n');
    }
}
