//! Files written next to the records: trials.csv, arms.csv, effects.csv,
//! report.json, report.md, report.html. Each is written to a temporary file
//! and renamed, so a reader never sees half a file and a crash loses nothing.

use super::analysis::{EffectKind, EffectReport, Report};
use super::cells::{self, Cell, Kind};
use super::format::{count, p, pct, pp};
use super::html;
use super::rows::{self, ArmRow, CostCells, EffectRow, RunCells, TrialRow};
use ablate_core::record::TrialRecord;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

fn atomic_write(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    ablate_core::record::folder::write_atomic(&dir.join(name), |w| w.write_all(bytes))
}

pub(crate) use super::rows::component_column;
pub use super::rows::num;

/// trials.csv: one row per recorded attempt, written while the run is loaded
/// (see `report_dir`) to a temporary file that `finish` renames.
pub struct TrialsCsv {
    writer: csv::Writer<std::fs::File>,
    tmp: std::path::PathBuf,
    error: Option<csv::Error>,
}

impl TrialsCsv {
    pub fn create(dir: &Path) -> std::io::Result<TrialsCsv> {
        let tmp = dir.join(".trials.csv.tmp");
        let writer = csv::Writer::from_path(&tmp).map_err(std::io::Error::other)?;
        Ok(TrialsCsv { writer, tmp, error: None })
    }

    pub fn push(&mut self, r: &TrialRecord) {
        if self.error.is_none()
            && let Err(e) = self.writer.serialize(TrialRow::of(r))
        {
            self.error = Some(e);
        }
    }

    /// Remove the temporary file: nothing is left behind.
    pub(crate) fn discard(self) {
        let TrialsCsv { writer, tmp, .. } = self;
        drop(writer);
        let _ = std::fs::remove_file(tmp);
    }

    /// Second pass: the run's identity, the `counted` flag (the attempt the
    /// analysis counts: the last final attempt of its trial) and the arm's
    /// component values, into trials.csv.
    pub fn finish(
        mut self,
        dir: &Path,
        data: &super::load::RunData,
        report: &Report,
    ) -> std::io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(std::io::Error::other(e));
        }
        self.writer.flush()?;
        drop(self.writer);
        let counted = |i: usize| is_counted(data, i);
        let values = arm_component_values(data, report);
        let no_arm = vec![String::new(); report.component_names.len()];
        let result = ablate_core::record::folder::write_atomic(&dir.join("trials.csv"), |out| {
            let mut reader = csv::Reader::from_path(&self.tmp)?;
            let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(out);
            let mut header = rows::trials_columns();
            header.extend(report.component_names.iter().map(|n| component_column(n)));
            w.write_record(&header)?;
            // The first pass wrote TrialRow's columns, `counted` empty: the cells pass through as
            // written, `counted` filled in. No trial (an empty shard): no row, and no header to read.
            let at =
                |headers: &csv::StringRecord, name: &str| headers.iter().position(|h| h == name);
            let (Some(counted_at), Some(arm_at)) =
                (at(reader.headers()?, "counted"), at(reader.headers()?, "arm"))
            else {
                w.flush()?;
                return Ok(());
            };
            let run = RunCells::of(report);
            let mut rec = csv::StringRecord::new();
            let mut i = 0;
            while reader.read_record(&mut rec)? {
                let flag = if counted(i) { "true" } else { "false" };
                let cells: Vec<&str> = rec
                    .iter()
                    .enumerate()
                    .map(|(j, c)| if j == counted_at { flag } else { c })
                    .collect();
                w.serialize((&run, cells, values.get(&rec[arm_at]).unwrap_or(&no_arm)))?;
                i += 1;
            }
            w.flush()?;
            Ok(())
        });
        let _ = std::fs::remove_file(&self.tmp);
        result
    }
}

/// Whether the `i`-th record loaded is the attempt the analysis counts (the
/// last final attempt of its trial): trials.csv's `counted`.
fn is_counted(data: &super::load::RunData, i: usize) -> bool {
    u32::try_from(i).is_ok_and(|i| data.counted.binary_search(&i).is_ok())
}

/// Each arm's component values, in the order of the report's component
/// columns (empty where the arm has no such component), once an arm.
fn arm_component_values(
    data: &super::load::RunData,
    report: &Report,
) -> HashMap<String, Vec<String>> {
    data.arm_settings
        .iter()
        .map(|a| {
            let v = a.component_values();
            let cells = report
                .component_names
                .iter()
                .map(|n| v.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()).unwrap_or_default())
                .collect();
            (a.name.clone(), cells)
        })
        .collect()
}

/// One of the CSV files as typed columns: each column's name and type, and
/// the rows' cells under them (what `ablate export` builds its frame from).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(not(any(test, feature = "polars")), allow(dead_code))]
pub(crate) struct TypedTable {
    pub columns: Vec<(String, Kind)>,
    pub rows: Vec<Vec<Cell>>,
    /// The columns after the row type's (component values, recorded metrics),
    /// which the rows' value lists fill in order.
    components: Vec<String>,
}

#[cfg_attr(not(any(test, feature = "polars")), allow(dead_code))]
impl TypedTable {
    /// The table of `R`'s columns then `components` (category columns).
    fn new<R: serde::Serialize + Default>(components: &[String]) -> TypedTable {
        let extra: Vec<(String, Kind)> =
            components.iter().map(|n| (component_column(n), Kind::Category)).collect();
        TypedTable::with_extra::<R>(extra)
    }

    /// The table of `R`'s columns then `extra` (name, type).
    fn with_extra<R: serde::Serialize + Default>(extra: Vec<(String, Kind)>) -> TypedTable {
        let mut columns = cells::schema::<R>();
        let components = extra.iter().map(|(n, _)| n.clone()).collect();
        columns.extend(extra);
        TypedTable { columns, rows: Vec::new(), components }
    }

    fn push<T: serde::Serialize + ?Sized>(&mut self, row: &T) {
        let row = cells::cells(row, &self.components);
        debug_assert!(row.iter().map(|(n, ..)| n).eq(self.columns.iter().map(|(n, _)| n)));
        self.rows.push(row.into_iter().map(|(_, _, cell)| cell).collect());
    }
}

/// trials.csv as typed columns, from the run's records in the order they
/// were loaded (`trials`, one `TrialRow::of` a record), with the same
/// `counted` flags and component values the file gets.
#[cfg_attr(not(any(test, feature = "polars")), allow(dead_code))]
pub(crate) fn trials_table(
    data: &super::load::RunData,
    report: &Report,
    trials: Vec<TrialRow>,
) -> TypedTable {
    let mut out = TypedTable::new::<(RunCells, TrialRow)>(&report.component_names);
    let values = arm_component_values(data, report);
    let no_arm = vec![String::new(); report.component_names.len()];
    let run = RunCells::of(report);
    for (i, mut row) in trials.into_iter().enumerate() {
        row.counted = Some(is_counted(data, i));
        let v = values.get(&row.arm).unwrap_or(&no_arm);
        out.push(&(&run, &row, v));
    }
    out
}

/// The component values of arm `a` in the order of the report's component columns.
fn arm_values<'a>(r: &Report, a: &'a super::analysis::ArmReport) -> Vec<&'a str> {
    r.component_names
        .iter()
        .map(|n| a.components.iter().find(|(k, _)| k == n).map_or("", |(_, v)| v.as_str()))
        .collect()
}

/// arms.csv as typed columns.
#[cfg_attr(not(any(test, feature = "polars")), allow(dead_code))]
pub(crate) fn arms_table(r: &Report) -> TypedTable {
    let mut out = TypedTable::new::<(RunCells, ArmRow)>(&r.component_names);
    let run = RunCells::of(r);
    for a in &r.arms {
        out.push(&(&run, ArmRow::of(r, a), arm_values(r, a)));
    }
    out
}

/// effects.csv as typed columns.
#[cfg_attr(not(any(test, feature = "polars")), allow(dead_code))]
pub(crate) fn effects_table(r: &Report) -> TypedTable {
    let names = rows::metric_names(r);
    let extra = rows::metric_columns(&names).into_iter().map(|c| (c, Kind::Float)).collect();
    let mut out = TypedTable::with_extra::<(RunCells, EffectRow, CostCells)>(extra);
    let run = RunCells::of(r);
    for e in r.ablations.iter().chain(&r.combined) {
        let metrics = rows::metric_cells(e, &names);
        out.push(&(&run, EffectRow::of(r, e), CostCells::of(&e.costs), metrics));
    }
    out
}

/// arms.csv: one row per (arm, model), then its component values.
pub(crate) fn arms_csv(r: &Report) -> Vec<u8> {
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
    let mut header = rows::arms_columns();
    header.extend(r.component_names.iter().map(|n| component_column(n)));
    w.write_record(&header).expect("writing to memory");
    let run = RunCells::of(r);
    for a in &r.arms {
        w.serialize((&run, ArmRow::of(r, a), arm_values(r, a))).expect("writing to memory");
    }
    w.into_inner().unwrap_or_default()
}

/// effects.csv: one row per comparison.
pub(crate) fn effects_csv(r: &Report) -> Vec<u8> {
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
    let names = rows::metric_names(r);
    let mut header = rows::effects_columns();
    header.extend(rows::metric_columns(&names));
    w.write_record(&header).expect("writing to memory");
    let run = RunCells::of(r);
    for e in r.ablations.iter().chain(&r.combined) {
        let metrics = rows::metric_cells(e, &names);
        w.serialize((&run, EffectRow::of(r, e), CostCells::of(&e.costs), metrics))
            .expect("writing to memory");
    }
    w.into_inner().unwrap_or_default()
}

fn md_effect(s: &mut String, e: &EffectReport) {
    let ci = if e.lo.is_finite() { format!("[{}, {}]", pp(e.lo), pp(e.hi)) } else { "n/a".into() };
    let _ = writeln!(
        s,
        "| {} | {} vs {} | {} | {} pp | {ci} | {} | {} | {} |",
        if e.kind == EffectKind::Ablation {
            e.components.join(", ")
        } else {
            format!("combined ({})", e.components.join(", "))
        },
        e.treatment,
        e.control,
        e.model,
        pp(e.delta),
        p(e.p_value),
        e.p_adjusted.map(p).unwrap_or_else(|| "-".into()),
        e.verdict
    );
}

/// The table of `effects` (one row each), then a note for each whose arms
/// differ in infrastructure errors: a note between rows would end the table.
fn md_effects(s: &mut String, header: &str, effects: &[EffectReport]) {
    let _ = writeln!(s, "{header}");
    for e in effects {
        md_effect(s, e);
    }
    for e in effects {
        if let Some(note) = &e.delivery_note {
            let _ = writeln!(s, "\n> **Delivery** in {}: {note}", e.name);
        }
    }
    for e in effects.iter().filter(|e| e.infra_differs) {
        let _ = writeln!(
            s,
            "\n> **Infrastructure errors differ** in {} ({} vs {}): {}",
            e.name,
            e.infra_errors_treatment,
            e.infra_errors_control,
            excl_note(e)
        );
    }
    let notes: Vec<String> = effects
        .iter()
        .filter_map(|e| {
            super::analysis::sequential_note(e).map(|n| format!("- {} ({}): {n}", e.name, e.model))
        })
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(s, "\n{}", notes.join("\n"));
    }
    for e in effects {
        let lines = super::cost_lines::effect(e);
        if !lines.is_empty() {
            let _ = writeln!(s, "\n**Costs and reliability**, {} ({}):\n", e.name, e.model);
            for l in lines {
                let depth = l.len() - l.trim_start().len();
                let _ = writeln!(s, "{}- {}", " ".repeat(depth), l.trim_start());
            }
        }
    }
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

pub fn markdown(r: &Report) -> String {
    let mut s = md_head(r);
    md_arms(&mut s, r);
    md_arm_notes(&mut s, r);
    md_effect_sections(&mut s, r);
    md_design_sections(&mut s, r);
    for x in &r.refused {
        let _ = writeln!(s, "\n> **Refused**: {x}");
    }
    for x in super::analysis::fingerprint_changes(r) {
        let _ = writeln!(s, "\n> **Warning**: {x}");
    }
    s
}

/// The report's title and the run's heading: what ran, on what suite, how many trials, where
/// they came from, how they were graded, and what the verdicts decide on.
fn md_head(r: &Report) -> String {
    let mut s = format!(
        "# {}\n\nRun `{}`, suite {} (`{}`), {} of {} trials recorded.\n\n",
        r.experiment,
        r.run_id,
        r.suite,
        &r.suite_digest[..12.min(r.suite_digest.len())],
        r.recorded_trials,
        r.planned_trials
    );
    if let Some(imported) = &r.imported {
        let _ = writeln!(s, "{imported}\n");
    }
    if let Some(line) = super::format::grading(&r.grading) {
        let _ = writeln!(s, "{}\n", capitalized(&line));
    }
    if let Some(line) = super::analysis::primary::note(r) {
        let _ = writeln!(s, "**{}**\n", capitalized(&line));
    }
    s
}

/// A rate and its interval (clipped to [0, 1]), or the rate alone without one.
fn md_ci(i: &super::analysis::Interval) -> String {
    if i.lo.is_finite() {
        format!("{} [{}, {}]", pct(i.mean), pct(i.lo.max(0.0)), pct(i.hi.min(1.0)))
    } else {
        pct(i.mean)
    }
}

/// The arms' table: each arm's trials, pass rates with their intervals, statuses and tokens.
fn md_arms(s: &mut String, r: &Report) {
    let level = (1.0 - r.alpha) * 100.0;
    let _ = writeln!(
        s,
        "## Arms\n\n| arm | model | trials | tasks | pass rate ({level:.0}% CI, {}) | excl. infra errors | tests passed | statuses | tokens/trial |\n|---|---|---|---|---|---|---|---|---|",
        super::analysis::arms_estimand(&r.arms)
    );
    for a in &r.arms {
        let statuses = super::format::statuses(a.statuses.iter());
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {statuses} | {:.0} |",
            a.arm,
            a.model,
            a.trials,
            a.tasks,
            md_ci(&a.pass_rate),
            md_ci(&a.pass_rate_excl_infra),
            md_ci(&a.tests_passed),
            a.tokens_per_trial
        );
    }
}

/// Below the arms' table: each arm's pass rate counting the final state of its stopped trials,
/// its costs and reliability, then its warnings.
fn md_arm_notes(s: &mut String, r: &Report) {
    for a in r.arms.iter().filter(|a| a.stopped_but_passing > 0) {
        let _ = writeln!(
            s,
            "\nArm {} / {}: counting the final state of its {} trial(s) stopped by time or budget whose state passes (as Harbor scores: the reward counts), the pass rate is {}.",
            a.arm,
            a.model,
            a.stopped_but_passing,
            md_ci(&a.pass_rate_final_state)
        );
    }
    for a in &r.arms {
        let lines = super::cost_lines::arm(a);
        if !lines.is_empty() {
            let text: Vec<String> = lines.iter().map(|(l, t)| format!("{l}: {t}")).collect();
            let _ = writeln!(s, "\nArm {} / {}: {}.", a.arm, a.model, text.join("; "));
        }
    }
    for a in r.arms.iter().filter(|a| !a.warnings.is_empty()) {
        for w in &a.warnings {
            let _ = writeln!(s, "\n> **Warning** ({} / {}): {w}", a.arm, a.model);
        }
    }
}

/// The ablations' section and the combined comparisons', each when there are any.
fn md_effect_sections(s: &mut String, r: &Report) {
    let header = "| component | treatment vs control | model | delta | CI | p | adjusted p | verdict |\n|---|---|---|---|---|---|---|---|";
    if !r.ablations.is_empty() {
        let _ = writeln!(
            s,
            "\n## Ablations\n\nDelta = treatment - control, paired over tasks; {}, intervals and verdicts adjusted for {} ({}).{}\n",
            interval_levels(&r.ablations),
            count(r.ablations.first().map_or(0, |e| e.family_size), "ablation"),
            adjustment(&r.ablations),
            super::analysis::estimand_note(&r.ablations)
                .map(|n| format!(" {n}."))
                .unwrap_or_default()
        );
        md_effects(s, header, &r.ablations);
    }
    if !r.combined.is_empty() {
        let _ = writeln!(
            s,
            "\n## Combined comparisons\n\nSeveral components differ: not attributable to one component. Each is tested at alpha on its own, unadjusted, outside the ablations' family.{}\n",
            super::analysis::estimand_note(&r.combined)
                .map(|n| format!(" {n}."))
                .unwrap_or_default()
        );
        md_effects(s, header, &r.combined);
    }
}

/// A budget sweep's curves, then the designs' sections (`design_lines`), as nested lists.
fn md_design_sections(s: &mut String, r: &Report) {
    if let Some(curves) = &r.budget_curves {
        let _ = writeln!(s, "\n## Budget curves\n");
        for l in super::budget_lines::lines(curves, &r.primary) {
            let depth = l.len() - l.trim_start().len();
            let _ = writeln!(s, "{}- {}", " ".repeat(depth), l.trim_start());
        }
    }
    for (heading, lines) in super::design_lines::sections(r) {
        let _ = writeln!(s, "\n## {heading}\n");
        for l in lines {
            let depth = l.len() - l.trim_start().len();
            let _ = writeln!(s, "{}- {}", " ".repeat(depth), l.trim_start());
        }
    }
}

/// factorial.csv: one row per effect of a factorial design and model (docs/exports.md).
pub(crate) fn factorial_csv(f: &super::analysis::factorial::Factorial) -> Vec<u8> {
    use super::analysis::factorial::Term;
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "model",
        "kind",
        "term",
        "aliases",
        "estimate",
        "lo",
        "hi",
        "p_value",
        "n_tasks",
        "interval_level",
        "verdict",
        "with_b_on",
        "with_b_off",
        "carried_by",
    ])
    .expect("writing to memory");
    for e in &f.effects {
        let (kind, aliases) = match &e.term {
            Term::Main { .. } => ("main", String::new()),
            Term::Interaction { aliases, .. } => ("interaction", aliases.join("; ")),
        };
        let (on, off) = e
            .conditional
            .map_or((String::new(), String::new()), |(a, b)| (a.to_string(), b.to_string()));
        let name = match &e.term {
            Term::Main { component } => component.clone(),
            Term::Interaction { a, b, .. } => format!("{a} x {b}"),
        };
        w.write_record([
            e.model.clone(),
            kind.into(),
            name,
            aliases,
            e.estimate.to_string(),
            e.lo.to_string(),
            e.hi.to_string(),
            e.p_value.to_string(),
            e.n_tasks.to_string(),
            f.interval_level.to_string(),
            e.verdict.to_string(),
            on,
            off,
            e.tasks.carried_by.join("; "),
        ])
        .expect("writing to memory");
    }
    w.into_inner().unwrap_or_default()
}

/// Write the exports derived from the analysis (trials.csv is streamed apart).
pub(crate) fn write_derived(dir: &Path, r: &Report) -> std::io::Result<()> {
    atomic_write(dir, "arms.csv", &arms_csv(r))?;
    atomic_write(dir, "effects.csv", &effects_csv(r))?;
    if let Some(f) = &r.factorial {
        atomic_write(dir, "factorial.csv", &factorial_csv(f))?;
    }
    atomic_write(
        dir,
        "report.json",
        &serde_json::to_vec_pretty(r).map_err(std::io::Error::other)?,
    )?;
    atomic_write(dir, "report.md", markdown(r).as_bytes())?;
    atomic_write(dir, "report.html", html::render(r).as_bytes())
}

/// "without them: +x pp [lo, hi], p" for an effect whose arms differ in infrastructure errors.
pub(crate) fn excl_note(e: &EffectReport) -> String {
    match &e.excl_infra {
        Some(x) => format!(
            "without them {} pp [{}, {}], p {}{}",
            pp(x.delta),
            pp(x.lo),
            pp(x.hi),
            p(x.p_value),
            if x.verdict_changes { " — the verdict changes" } else { "" }
        ),
        None => String::new(),
    }
}

/// The levels of a list of effects' intervals: "95.0% intervals", or with
/// Holm's steps "98.3% to 99.0% intervals (each at its Holm step's level)".
pub(crate) fn interval_levels(effects: &[EffectReport]) -> String {
    let levels = effects.iter().map(|e| e.interval_level).filter(|l| l.is_finite());
    let (lo, hi) =
        levels.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), l| (a.min(l), b.max(l)));
    if !lo.is_finite() {
        return "intervals".into();
    }
    if hi - lo < 5e-4 {
        format!("{:.1}% intervals", lo * 100.0)
    } else {
        format!(
            "{:.1}% to {:.1}% intervals (each at its Holm step's level)",
            lo * 100.0,
            hi * 100.0
        )
    }
}

/// How a family of ablations is adjusted (`analysis::family_adjustment`), as a heading names it.
pub fn adjustment(effects: &[EffectReport]) -> &'static str {
    match effects.first().map(super::analysis::family_adjustment) {
        Some("bonferroni") => "Bonferroni",
        _ => "Holm",
    }
}
