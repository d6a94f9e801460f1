//! report.html: one self-contained file (inline CSS and SVG, no scripts, no
//! external resources) with the tables and a forest plot of every effect.

use super::analysis::{EffectKind, EffectReport, Interval, Report};
use super::format::{p, pct, pp};
use std::fmt::Write;

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn ci(i: &Interval) -> String {
    if i.lo.is_finite() {
        format!(
            "{} <span class=ci>[{}, {}]</span>",
            pct(i.mean),
            pct(i.lo.max(0.0)),
            pct(i.hi.min(1.0))
        )
    } else {
        pct(i.mean)
    }
}

/// Forest plot: one row per effect, a dot at the delta, a bar for its CI,
/// a line at zero. The x range covers every interval (at least ±10 pp).
pub(crate) fn forest_svg(effects: &[&EffectReport]) -> String {
    let row_h = 26.0;
    // About 6.6 px per character at 12 px sans-serif.
    let label_w =
        effects.iter().map(|e| forest_label(e).chars().count()).max().unwrap_or(20) as f64 * 6.6
            + 20.0;
    let plot_w = 420.0;
    let right_w = 150.0;
    let top = 30.0;
    let h = top + row_h * effects.len() as f64 + 30.0;
    let w = label_w + plot_w + right_w;
    let f = Forest { label_w, plot_w, extent: forest_extent(effects) };
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12" role="img" aria-label="forest plot of effects">"#
    );
    forest_axes(&mut s, &f, top, h);
    for (i, e) in effects.iter().enumerate() {
        forest_row(&mut s, &f, e, top + row_h * i as f64 + row_h / 2.0);
    }
    s.push_str("</svg>");
    s
}

/// The forest plot's columns: the labels' width, the plot's, and its x range (±`extent`).
struct Forest {
    label_w: f64,
    plot_w: f64,
    extent: f64,
}

impl Forest {
    /// The x of an effect of `v`.
    fn x(&self, v: f64) -> f64 {
        self.label_w + (v + self.extent) / (2.0 * self.extent) * self.plot_w
    }
}

/// An effect's row label: its component (or `combined`), its arms and its model.
fn forest_label(e: &EffectReport) -> String {
    let l = if e.kind == EffectKind::Ablation {
        format!("{} ({} vs {})", e.components.join(","), e.treatment, e.control)
    } else {
        format!("combined: {} vs {}", e.treatment, e.control)
    };
    format!("{l} · {}", e.model)
}

/// The forest plot's half-range: every finite interval end and delta, at least 0.1, rounded up
/// to a tenth.
fn forest_extent(effects: &[&EffectReport]) -> f64 {
    let mut extent: f64 = 0.1;
    for e in effects {
        for v in [e.lo, e.hi, e.delta] {
            if v.is_finite() {
                extent = extent.max(v.abs());
            }
        }
    }
    (extent * 10.0).ceil() / 10.0
}

/// The forest plot's line at zero, its ticks along the bottom (`h` the plot's height) and its
/// title above the rows (which start at `top`).
fn forest_axes(s: &mut String, f: &Forest, top: f64, h: f64) {
    let extent = f.extent;
    let _ = write!(
        s,
        r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#888" stroke-dasharray="4 3"/>"##,
        f.x(0.0),
        top - 10.0,
        h - 25.0
    );
    for tick in [-extent, -extent / 2.0, 0.0, extent / 2.0, extent] {
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" text-anchor="middle" fill="#555">{} pp</text>"##,
            f.x(tick),
            h - 8.0,
            pp(tick)
        );
    }
    let _ = write!(
        s,
        r##"<text x="{}" y="16" text-anchor="middle" fill="#333">effect = treatment − control (pp)</text>"##,
        f.x(0.0)
    );
}

/// One effect's row at height `y`: its label, its interval's bar, its dot, its delta and verdict.
fn forest_row(s: &mut String, f: &Forest, e: &EffectReport, y: f64) {
    let extent = f.extent;
    let colour = match e.verdict.short() {
        "helps" => "#1a7f37",
        "hurts" => "#cf222e",
        _ => "#444",
    };
    let _ = write!(
        s,
        r#"<text x="6" y="{}" fill="{colour}">{}</text>"#,
        y + 4.0,
        esc(&forest_label(e))
    );
    if e.lo.is_finite() && e.hi.is_finite() {
        let _ = write!(
            s,
            r#"<line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="{colour}" stroke-width="2"/>"#,
            f.x(e.lo.max(-extent)),
            f.x(e.hi.min(extent))
        );
    }
    if e.delta.is_finite() {
        let _ = write!(
            s,
            r#"<circle cx="{}" cy="{y}" r="5" fill="{colour}"><title>{} pp, p {}</title></circle>"#,
            f.x(e.delta),
            pp(e.delta),
            p(e.p_value)
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" fill="{colour}">{} pp {}</text>"#,
        f.label_w + f.plot_w + 10.0,
        y + 4.0,
        pp(e.delta),
        e.verdict.short()
    );
}

/// A sequential comparison's confidence sequence over tasks: its running
/// interval after each task (a band), zero and the margins as lines, and the
/// task it was decided at.
pub(crate) fn sequence_svg(e: &EffectReport, margin: Option<f64>) -> Option<String> {
    let q = e.sequential.as_ref()?;
    if q.history.is_empty() {
        return None;
    }
    let (w, h, left, top, bottom) = (560.0, 220.0, 50.0, 14.0, 30.0);
    let n = q.history.len() as f64;
    let x = |t: f64| left + (t / n.max(1.0)) * (w - left - 10.0);
    let y = |v: f64| top + (1.0 - (v.clamp(-1.0, 1.0) + 1.0) / 2.0) * (h - top - bottom);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11" role="img" aria-label="confidence sequence of {}">"#,
        esc(&e.name)
    );
    let mut band = String::new();
    for (i, (lo, _)) in q.history.iter().enumerate() {
        let _ = write!(band, "{:.1},{:.1} ", x(i as f64 + 1.0), y(*lo));
    }
    for (i, (_, hi)) in q.history.iter().enumerate().rev() {
        let _ = write!(band, "{:.1},{:.1} ", x(i as f64 + 1.0), y(*hi));
    }
    let _ = write!(
        s,
        r##"<polygon points="{band}" fill="#9ecae1" fill-opacity="0.6" stroke="#3182bd"/>"##
    );
    let _ = write!(
        s,
        r##"<line x1="{left}" y1="{0}" x2="{1}" y2="{0}" stroke="#333"/>"##,
        y(0.0),
        w - 10.0
    );
    for v in [-1.0, -0.5, 0.0, 0.5, 1.0] {
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end" fill="#555">{} pp</text>"##,
            left - 4.0,
            y(v) + 4.0,
            pp(v)
        );
    }
    if let Some(m) = margin {
        for v in [-m, m] {
            let _ = write!(
                s,
                r##"<line x1="{left}" y1="{0}" x2="{1}" y2="{0}" stroke="#9a6700" stroke-dasharray="4 3"/>"##,
                y(v),
                w - 10.0
            );
        }
    }
    if let Some(k) = q.decided_after_tasks {
        let _ = write!(
            s,
            r##"<line x1="{0}" y1="{top}" x2="{0}" y2="{1}" stroke="#1a7f37" stroke-dasharray="2 2"/>"##,
            x(k as f64),
            h - bottom
        );
    }
    let _ = write!(
        s,
        r##"<text x="{}" y="{}" text-anchor="middle" fill="#555">tasks in the order they entered (1 to {})</text>"##,
        (left + w) / 2.0,
        h - 8.0,
        q.history.len()
    );
    s.push_str("</svg>");
    Some(s)
}

fn effect_rows(s: &mut String, effects: &[EffectReport]) {
    for e in effects {
        let ci =
            if e.lo.is_finite() { format!("[{}, {}]", pp(e.lo), pp(e.hi)) } else { "n/a".into() };
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{} vs {}</td><td>{}</td><td class=num>{} pp</td><td class=num>{ci}</td><td class=num>{}</td><td class=num>{}</td><td>{}</td></tr>",
            esc(&e.components.join(", ")),
            esc(&e.treatment),
            esc(&e.control),
            esc(&e.model),
            pp(e.delta),
            p(e.p_value),
            e.p_adjusted.map(p).unwrap_or_else(|| "-".into()),
            esc(&e.verdict.to_string())
        );
        if let Some(note) = &e.delivery_note {
            let _ = writeln!(
                s,
                "<tr><td></td><td colspan=7 class=warn>delivery: {}</td></tr>",
                esc(&note.to_string())
            );
        }
    }
}

/// The frontier plot's frame, its pass-rate and spend ticks and the spend's label, for the plot
/// area `(left, top, width, height)` and a spend axis from 0 to `top_cost`.
fn frontier_axes(
    s: &mut String,
    spend: super::analysis::costs::Spend,
    top_cost: f64,
    (left, top, pw, ph): (f64, f64, f64, f64),
) {
    let x = |v: f64| left + (v / top_cost).clamp(0.0, 1.0) * pw;
    let y = |v: f64| top + (1.0 - v.clamp(0.0, 1.0)) * ph;
    let _ = write!(
        s,
        r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#bbb"/>"##
    );
    for t in [0.0, 0.25, 0.5, 0.75, 1.0] {
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end" fill="#555">{}</text><text x="{}" y="{}" text-anchor="middle" fill="#555">{}</text>"##,
            left - 6.0,
            y(t) + 4.0,
            super::format::pct(t),
            x(t * top_cost),
            top + ph + 16.0,
            esc(&super::cost_lines::value(spend, t * top_cost))
        );
    }
    let _ = write!(
        s,
        r##"<text x="{}" y="{}" text-anchor="middle" fill="#333">{} per trial</text>"##,
        left + pw / 2.0,
        top + ph + 36.0,
        spend.words()
    );
}

/// Each arm's pass rate against its spend per trial (the cost when every arm
/// recorded one, else tokens), both with their intervals as bars; the arms no
/// other arm beats on both with confidence (`costs::beaten_by`) filled, the
/// others hollow. None without arms.
pub(crate) fn frontier_svg(r: &Report) -> Option<String> {
    use super::analysis::costs::frontier_spend;
    if r.arms.is_empty() {
        return None;
    }
    let spend = frontier_spend(&r.arms);
    let cost = |a: &super::analysis::ArmReport| {
        a.costs.per_trial.iter().find(|(o, _)| *o == spend).map(|(_, s)| *s)
    };
    let top_cost = r
        .arms
        .iter()
        .filter_map(cost)
        .flat_map(|s| [s.estimate, s.hi])
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.1;
    let (left, top, pw, ph) = (60.0, 20.0, 520.0, 300.0);
    let (w, h) = (left + pw + 220.0, top + ph + 50.0);
    let x = |v: f64| left + (v / top_cost).clamp(0.0, 1.0) * pw;
    let y = |v: f64| top + (1.0 - v.clamp(0.0, 1.0)) * ph;
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12" role="img" aria-label="pass rate against {} per trial">"#,
        spend.words()
    );
    frontier_axes(&mut s, spend, top_cost, (left, top, pw, ph));
    for (a, beaten) in r.arms.iter().map(|a| (a, &a.beaten_by)) {
        let Some(c) = cost(a) else { continue };
        let (px, py) = (x(c.estimate), y(a.pass_rate.mean));
        let colour = if beaten.is_none() { "#0969da" } else { "#888" };
        for (x1, y1, x2, y2) in
            [(x(c.lo), py, x(c.hi), py), (px, y(a.pass_rate.lo), px, y(a.pass_rate.hi))]
        {
            if [x1, y1, x2, y2].iter().all(|v| v.is_finite()) {
                let _ = write!(
                    s,
                    r#"<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{colour}"/>"#
                );
            }
        }
        let fill = if beaten.is_none() { colour } else { "white" };
        let note = match beaten {
            None => "on the frontier".to_string(),
            Some(j) => format!("beaten by {} ({})", r.arms[*j].arm, r.arms[*j].model),
        };
        let _ = write!(
            s,
            r#"<circle cx="{px}" cy="{py}" r="5" fill="{fill}" stroke="{colour}" stroke-width="2"><title>{}: {}</title></circle><text x="{}" y="{}" fill="{colour}">{} · {}</text>"#,
            esc(&a.arm),
            esc(&note),
            px + 8.0,
            py - 6.0,
            esc(&a.arm),
            esc(&a.model)
        );
    }
    s.push_str("</svg>");
    Some(s)
}

/// Each arm's spend per solved task and reliability, then each comparison's
/// costs (`cost_lines`), as lists.
fn cost_sections(s: &mut String, r: &Report) {
    let list = |s: &mut String, lines: Vec<String>| {
        s.push_str("<ul>");
        for l in lines {
            let _ = write!(s, "<li>{}</li>", esc(l.trim_start()));
        }
        s.push_str("</ul>\n");
    };
    s.push_str("<h2>Costs and reliability</h2>\n");
    if let Some(svg) = frontier_svg(r) {
        let spend = super::analysis::costs::frontier_spend(&r.arms).words();
        let _ = writeln!(
            s,
            "<p>Pass rate against {spend} per trial, each with its {}% interval. Filled: no other arm has both a higher pass rate and a lower {spend} with confidence (its intervals wholly above and wholly below); hollow: some arm does.</p>{svg}",
            super::format::margin_pp(1.0 - r.alpha)
        );
    }
    for a in &r.arms {
        let _ = writeln!(s, "<h3>Arm {} ({})</h3>", esc(&a.arm), esc(&a.model));
        list(s, super::cost_lines::arm(a).into_iter().map(|(l, t)| format!("{l}: {t}")).collect());
    }
    for e in r.ablations.iter().chain(&r.combined) {
        let _ = writeln!(s, "<h3>{} ({})</h3>", esc(&e.name), esc(&e.model));
        list(s, super::cost_lines::effect(e));
    }
}

/// A budget sweep's curves: a chart of each arm's outcome and one of each effect against the
/// level (levels evenly spaced, each point with its simultaneous band), then the sentences.
fn budget_section(s: &mut String, c: &super::analysis::budget::BudgetCurves, primary: &str) {
    s.push_str("<h2>Budget curves</h2>\n");
    let _ = writeln!(s, "{}", budget_svg(c, &c.arms, false));
    if !c.effects.is_empty() {
        let _ = writeln!(s, "{}", budget_svg(c, &c.effects, true));
    }
    s.push_str("<ul>");
    for l in super::budget_lines::lines(c, primary) {
        let _ = write!(s, "<li>{}</li>", esc(l.trim_start()));
    }
    s.push_str("</ul>\n");
}

/// Curves against the sweep's levels: each curve's points joined, each with its band as a bar.
/// Outcomes span [0, 1]; effects span [-1, 1] with a line at zero.
pub(crate) fn budget_svg(
    c: &super::analysis::budget::BudgetCurves,
    curves: &[super::analysis::budget::Curve],
    effect: bool,
) -> String {
    const COLOURS: [&str; 6] = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#57606a"];
    let (left, top, pw, ph) = (60.0, 20.0, 480.0, 240.0);
    let (w, h) = (left + pw + 260.0, top + ph + 50.0);
    let n = c.levels.len().max(2) as f64;
    let x = |level: f64| {
        let i = c.levels.iter().position(|&l| l == level).unwrap_or(0) as f64;
        left + pw * (0.5 + i) / n
    };
    let (lo_v, hi_v) = if effect { (-1.0, 1.0) } else { (0.0, 1.0) };
    let y = |v: f64| top + (1.0 - (v.clamp(lo_v, hi_v) - lo_v) / (hi_v - lo_v)) * ph;
    let what = if effect { "effect" } else { "outcome" };
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12" role="img" aria-label="{what} against {}">"#,
        c.key.name()
    );
    let _ = write!(
        s,
        r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#ccc"/><text x="{left}" y="{}" >{}</text>"##,
        top + ph + 40.0,
        esc(c.key.name())
    );
    for &l in &c.levels {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{l}</text>"#,
            x(l),
            top + ph + 16.0
        );
    }
    let ticks: &[f64] =
        if effect { &[-1.0, -0.5, 0.0, 0.5, 1.0] } else { &[0.0, 0.25, 0.5, 0.75, 1.0] };
    for &t in ticks {
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end">{:+.0}{}</text><line x1="{left}" y1="{1}" x2="{}" y2="{1}" stroke="{}"/>"##,
            left - 6.0,
            y(t),
            t * 100.0,
            if effect { " pp" } else { "%" },
            left + pw,
            if effect && t == 0.0 { "#888" } else { "#eee" }
        );
    }
    for (i, curve) in curves.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        // Each curve a few pixels aside, so that bands at one level do not hide each other.
        let xi = |level: f64| x(level) + i as f64 * 4.0 - 8.0;
        let path: Vec<String> =
            curve.points.iter().map(|p| format!("{},{}", xi(p.level), y(p.estimate))).collect();
        let _ =
            write!(s, r#"<polyline points="{}" fill="none" stroke="{colour}"/>"#, path.join(" "));
        for p in curve.points.iter().filter(|p| p.lo.is_finite()) {
            let _ = write!(
                s,
                r#"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="{colour}" stroke-width="3" opacity="0.5"/><circle cx="{0}" cy="{3}" r="4" fill="{colour}"/>"#,
                xi(p.level),
                y(p.lo),
                y(p.hi),
                y(p.estimate)
            );
        }
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" fill="{colour}">{} · {}</text>"#,
            left + pw + 10.0,
            top + 16.0 * (i as f64 + 1.0),
            esc(&curve.of),
            esc(&curve.model)
        );
    }
    s.push_str("</svg>");
    s
}

pub fn render(r: &Report) -> String {
    let mut s = head(r);
    let effects: Vec<&EffectReport> = r.ablations.iter().chain(&r.combined).collect();
    if !effects.is_empty() {
        let level = (1.0 - r.alpha) * 100.0;
        let _ = writeln!(s, "<h2>Effects ({level:.0}% CI)</h2>{}", forest_svg(&effects));
    }
    arm_table(&mut s, r);
    arm_notes(&mut s, r);
    effect_tables(&mut s, r);
    cost_sections(&mut s, r);
    design_sections(&mut s, r);
    if let Some(curves) = &r.budget_curves {
        budget_section(&mut s, curves, &r.primary);
    }
    sequence_section(&mut s, r);
    for x in &r.refused {
        let _ = writeln!(s, "<p class=warn>Refused: {}</p>", esc(&x.to_string()));
    }
    s.push_str("</body></html>\n");
    s
}

/// The page's head (title, style) and the run's heading: what ran, on what suite, how many
/// trials, where they came from, how they were graded, and what the verdicts decide on.
fn head(r: &Report) -> String {
    let mut s = String::from("<!doctype html>\n<html lang=en><head><meta charset=utf-8>");
    let _ = write!(s, "<title>{} — ablate report</title>", esc(&r.experiment));
    s.push_str("<style>body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}table{border-collapse:collapse;margin:1em 0}th,td{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}.ci{color:#666}.warn{color:#9a6700}h1{font-size:1.5em}</style></head><body>\n");
    let _ = writeln!(
        s,
        "<h1>{}</h1><p>Run <code>{}</code>, suite {} (<code>{}</code>), {} of {} trials recorded{}.</p>",
        esc(&r.experiment),
        esc(&r.run_id),
        esc(&r.suite),
        esc(&r.suite_digest[..12.min(r.suite_digest.len())]),
        r.recorded_trials,
        r.planned_trials,
        if r.interrupted_attempts > 0 {
            format!(", {} interrupted attempts", r.interrupted_attempts)
        } else {
            String::new()
        }
    );
    if let Some(imported) = &r.imported {
        let _ = writeln!(s, "<p>{}</p>", esc(imported));
    }
    if let Some(line) = super::format::grading(&r.grading) {
        let _ = writeln!(s, "<p>{}</p>", esc(&line));
    }
    if let Some(line) = super::analysis::primary::note(r) {
        let _ = writeln!(s, "<p><strong>{}</strong></p>", esc(&line));
    }
    s
}

/// The arms' table: each arm's trials, pass rates with their intervals, statuses and spend.
fn arm_table(s: &mut String, r: &Report) {
    let level = (1.0 - r.alpha) * 100.0;
    let _ = writeln!(
        s,
        "<h2>Arms</h2><table><tr><th>arm</th><th>model</th><th>trials</th><th>tasks</th><th>pass rate ({level:.0}% CI, {})</th><th>excl. infra errors</th><th>tests passed</th><th>statuses</th><th>tokens / trial</th><th>s / trial</th></tr>",
        super::analysis::arms_estimand(&r.arms)
    );
    for a in &r.arms {
        let statuses = super::format::statuses(a.statuses.iter());
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td class=num>{}</td><td class=num>{}</td><td class=num>{}</td><td class=num>{}</td><td class=num>{}</td><td>{}</td><td class=num>{:.0}</td><td class=num>{:.1}</td></tr>",
            esc(&a.arm),
            esc(&a.model),
            a.trials,
            a.tasks,
            ci(&a.pass_rate),
            ci(&a.pass_rate_excl_infra),
            ci(&a.tests_passed),
            esc(&statuses),
            a.tokens_per_trial,
            a.working_seconds_per_trial
        );
    }
    s.push_str("</table>\n");
}

/// Below the arms' table: each arm's pass rate counting the final state of its stopped trials,
/// then its warnings.
fn arm_notes(s: &mut String, r: &Report) {
    for a in r.arms.iter().filter(|a| a.stopped_but_passing > 0) {
        let _ = writeln!(
            s,
            "<p>Arm {} / {}: counting the final state of its {} trial(s) stopped by time or budget whose state passes (as Harbor scores: the reward counts), the pass rate is {}.</p>",
            esc(&a.arm),
            esc(&a.model),
            a.stopped_but_passing,
            ci(&a.pass_rate_final_state)
        );
    }
    for a in &r.arms {
        for w in &a.warnings {
            let _ = writeln!(
                s,
                "<p class=warn>Warning ({} / {}): {}</p>",
                esc(&a.arm),
                esc(&a.model),
                esc(&w.to_string())
            );
        }
    }
}

/// The ablations' table and the combined comparisons', each when there are any.
fn effect_tables(s: &mut String, r: &Report) {
    let head = "<tr><th>component</th><th>treatment vs control</th><th>model</th><th>delta</th><th>CI</th><th>p</th><th>adjusted p</th><th>verdict</th></tr>";
    if !r.ablations.is_empty() {
        let _ = writeln!(
            s,
            "<h2>Ablations</h2><p>Delta = treatment − control, paired over tasks{}.</p><table>{head}",
            super::analysis::estimand_note(&r.ablations)
                .map(|n| format!("; {n}"))
                .unwrap_or_default()
        );
        effect_rows(s, &r.ablations);
        s.push_str("</table>\n");
    }
    if !r.combined.is_empty() {
        let _ = writeln!(
            s,
            "<h2>Combined comparisons</h2><p>Several components differ: not attributable to one component. Each is tested at alpha on its own, unadjusted, outside the ablations' family{}.</p><table>{head}",
            super::analysis::estimand_note(&r.combined)
                .map(|n| format!("; {n}"))
                .unwrap_or_default()
        );
        effect_rows(s, &r.combined);
        s.push_str("</table>\n");
    }
}

/// The designs' sections (`design_lines`): a heading and a list each.
fn design_sections(s: &mut String, r: &Report) {
    for (heading, lines) in super::design_lines::sections(r) {
        let _ = writeln!(s, "<h2>{}</h2>\n<ul>", esc(heading));
        for l in lines {
            let _ = write!(s, "<li>{}</li>", esc(l.trim_start()));
        }
        s.push_str("</ul>\n");
    }
}

/// A sequential run's comparisons: each one's course and its confidence sequence's plot.
fn sequence_section(s: &mut String, r: &Report) {
    let sequences: Vec<&EffectReport> =
        r.ablations.iter().chain(&r.combined).filter(|e| e.sequential.is_some()).collect();
    if !sequences.is_empty() {
        s.push_str("<h2>Confidence sequences</h2><p>Each comparison's running interval after each task in the order tasks entered (dashed: the margins; green: where it was decided).</p>\n");
        for e in sequences {
            let note = super::analysis::sequential_note(e).unwrap_or_default();
            let _ =
                writeln!(s, "<h3>{} ({})</h3><p>{}</p>", esc(&e.name), esc(&e.model), esc(&note));
            if let Some(svg) = sequence_svg(e, r.margin) {
                s.push_str(&svg);
                s.push('\n');
            }
        }
    }
}
