//! Files written next to the records: trials.csv, arms.csv, effects.csv,
//! report.json, report.md, report.html. Each is written to a temporary file
//! and renamed, so a reader never sees half a file and a crash loses nothing.

use super::analysis::{EffectKind, EffectReport, Report};
use super::format::{p, pct, pp};
use super::html;
use crate::record::{EndReason, TrialRecord};
use std::fmt::Write as _;
use std::path::Path;

fn atomic_write(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, dir.join(name))
}

/// A float cell: always written as a float (`3.0`, never `3`), so that a
/// column's type does not depend on the data; empty (null) when not finite.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return String::new();
    }
    let s = format!("{x}");
    if s.contains('.') || s.contains('e') { s } else { format!("{s}.0") }
}

/// The columns every CSV starts with: which run, experiment, config and suite.
pub const RUN_COLUMNS: [&str; 4] = ["run_id", "experiment", "config_digest", "suite_digest"];

/// The name of a component's column.
pub fn component_column(name: &str) -> String {
    format!("component.{name}")
}

fn run_cells(r: &Report) -> Vec<String> {
    vec![r.run_id.clone(), r.experiment.clone(), r.config_digest.clone(), r.suite_digest.clone()]
}

fn opt(x: Option<f64>) -> String {
    x.map(num).unwrap_or_default()
}

/// Columns of the first pass over the records (the record's own fields).
const TRIALS_BASE: [&str; 29] = [
    "run_id",
    "trial_id",
    "task",
    "arm",
    "model",
    "repeat",
    "seed",
    "attempt",
    "status",
    "end_reason",
    "budget_limit",
    "tests_passed",
    "tests_total",
    "steps",
    "sessions",
    "tokens_input",
    "tokens_output",
    "tokens_cached",
    "working_seconds",
    "wall_seconds",
    "rate_limit_wait_seconds",
    "cost_usd",
    "loop_guard_hits",
    "invalid_tool_calls",
    "unparsed_replies",
    "path_refusals",
    "snapshot_sha256",
    "finished_at",
    "system_fingerprints",
];

/// Position of `attempt` in `TRIALS_BASE`: trials.csv puts `counted` after it.
const ATTEMPT: usize = 7;

/// Columns of trials.csv, documented in docs/exports.md: the run's columns,
/// then the record's own (`TRIALS_BASE` after its run_id) with `counted`
/// after `attempt`; then one `component.<name>` column per component of the
/// run's arms.
pub const TRIALS_COLUMNS: [&str; RUN_COLUMNS.len() + TRIALS_BASE.len()] = {
    let mut out = [""; RUN_COLUMNS.len() + TRIALS_BASE.len()];
    let mut i = 0;
    while i < RUN_COLUMNS.len() {
        out[i] = RUN_COLUMNS[i];
        i += 1;
    }
    let mut j = 1;
    while j < TRIALS_BASE.len() {
        out[i] = TRIALS_BASE[j];
        i += 1;
        if j == ATTEMPT {
            out[i] = "counted";
            i += 1;
        }
        j += 1;
    }
    out
};

fn end_reason(e: &EndReason) -> (&'static str, &'static str) {
    match e {
        EndReason::ChecksPassed => ("checks_passed", ""),
        EndReason::ModelDone => ("model_done", ""),
        EndReason::Budget { limit } => ("budget", limit.name()),
        EndReason::ProviderError => ("provider_error", ""),
        EndReason::RequestTimeout => ("request_timeout", ""),
        EndReason::HarnessError => ("harness_error", ""),
        EndReason::Interrupted => ("interrupted", ""),
        EndReason::CommandExited => ("command_exited", ""),
    }
}

fn trial_row(r: &TrialRecord) -> Vec<String> {
    let (reason, limit) = end_reason(&r.end_reason);
    vec![
        r.run_id.clone(),
        r.trial_id.clone(),
        r.task.clone(),
        r.arm.clone(),
        r.model.clone(),
        r.repeat.to_string(),
        r.seed.to_string(),
        r.attempt.to_string(),
        r.status.name().to_string(),
        reason.to_string(),
        limit.to_string(),
        r.tests_passed.to_string(),
        r.tests_total.to_string(),
        r.steps.to_string(),
        r.sessions.to_string(),
        r.tokens.input.to_string(),
        r.tokens.output.to_string(),
        r.tokens.cached.to_string(),
        num(r.working_seconds),
        num(r.wall_seconds),
        num(r.rate_limit_wait_seconds),
        opt(r.cost_usd),
        r.incidents.loop_guard_hits.to_string(),
        r.incidents.invalid_tool_calls.to_string(),
        r.incidents.unparsed_replies.to_string(),
        r.incidents.path_refusals.to_string(),
        r.grade.as_ref().map(|g| g.snapshot_sha256.clone()).unwrap_or_default(),
        r.finished_at.clone(),
        r.system_fingerprints.join(" "),
    ]
}

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
        let mut writer = csv::Writer::from_path(&tmp).map_err(std::io::Error::other)?;
        writer.write_record(TRIALS_BASE).map_err(std::io::Error::other)?;
        Ok(TrialsCsv { writer, tmp, error: None })
    }

    pub fn push(&mut self, r: &TrialRecord) {
        if self.error.is_none()
            && let Err(e) = self.writer.write_record(trial_row(r))
        {
            self.error = Some(e);
        }
    }

    /// Remove the temporary file: nothing is left behind.
    pub fn discard(self) {
        let TrialsCsv { writer, tmp, .. } = self;
        drop(writer);
        let _ = std::fs::remove_file(tmp);
    }

    /// Second pass: the run's identity, the `counted` flag (the attempt the
    /// analysis counts: the last final attempt of its trial) and the arm's
    /// component values, into trials.csv.
    pub fn finish(mut self, dir: &Path, data: &super::load::RunData, report: &Report) -> std::io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(std::io::Error::other(e));
        }
        self.writer.flush()?;
        drop(self.writer);
        let counted = |i: usize| u32::try_from(i).is_ok_and(|i| data.counted.binary_search(&i).is_ok());
        let arms = data.manifest.arms();
        let values_of = |arm: &str| -> Vec<String> {
            let values = arms.iter().find(|a| a.name == arm).map(|a| a.component_values()).unwrap_or_default();
            report.component_names.iter().map(|n| values.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()).unwrap_or_default()).collect()
        };
        let out_tmp = dir.join(".trials.csv.final.tmp");
        let result = (|| -> Result<(), csv::Error> {
            let mut reader = csv::Reader::from_path(&self.tmp)?;
            let mut w = csv::Writer::from_path(&out_tmp)?;
            let mut header: Vec<String> = TRIALS_COLUMNS.iter().map(|c| c.to_string()).collect();
            header.extend(report.component_names.iter().map(|n| component_column(n)));
            w.write_record(&header)?;
            for (i, rec) in reader.records().enumerate() {
                let rec = rec?;
                let mut row = run_cells(report);
                row.extend(rec.iter().skip(1).take(ATTEMPT).map(String::from)); // trial_id .. attempt
                row.push(counted(i).to_string());
                row.extend(rec.iter().skip(ATTEMPT + 1).map(String::from));
                row.extend(values_of(rec.get(3).unwrap_or("")));
                w.write_record(&row)?;
            }
            w.flush()?;
            Ok(())
        })();
        let _ = std::fs::remove_file(&self.tmp);
        result.map_err(std::io::Error::other)?;
        std::fs::rename(out_tmp, dir.join("trials.csv"))
    }
}

/// Columns of arms.csv, documented in docs/exports.md; then one
/// `component.<name>` column per component.
pub const ARMS_COLUMNS: [&str; 37] = [
    "run_id",
    "experiment",
    "config_digest",
    "suite_digest",
    "alpha",
    "arm",
    "model",
    "trials",
    "tasks",
    "pass_rate",
    "pass_rate_lo",
    "pass_rate_hi",
    "pass_rate_method",
    "pass_rate_excl_infra",
    "pass_rate_excl_infra_lo",
    "pass_rate_excl_infra_hi",
    "trials_excl_infra",
    "tests_passed_fraction",
    "tests_passed_fraction_lo",
    "tests_passed_fraction_hi",
    "passed",
    "failed",
    "timeout",
    "budget_exhausted",
    "provider_error",
    "harness_error",
    "grader_error",
    "policy_violation",
    "interrupted",
    "tokens_per_trial",
    "working_seconds_per_trial",
    "steps_per_trial",
    "cost_per_trial",
    "tokens_per_solved",
    "working_seconds_per_solved",
    "cost_per_solved",
    "interval_level",
];

pub fn arms_csv(r: &Report) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = ARMS_COLUMNS.iter().map(|c| c.to_string()).collect();
    header.extend(r.component_names.iter().map(|n| component_column(n)));
    w.write_record(&header).expect("writing to memory");
    for a in &r.arms {
        let s = |k: &str| a.statuses.get(k).copied().unwrap_or(0).to_string();
        let mut row = run_cells(r);
        row.extend([
            num(r.alpha),
            a.arm.clone(),
            a.model.clone(),
            a.trials.to_string(),
            a.tasks.to_string(),
            num(a.pass_rate.mean),
            num(a.pass_rate.lo),
            num(a.pass_rate.hi),
            a.pass_rate.method.name().to_string(),
            num(a.pass_rate_excl_infra.mean),
            num(a.pass_rate_excl_infra.lo),
            num(a.pass_rate_excl_infra.hi),
            a.trials_excl_infra.to_string(),
            num(a.tests_passed.mean),
            num(a.tests_passed.lo),
            num(a.tests_passed.hi),
            s("passed"),
            s("failed"),
            s("timeout"),
            s("budget_exhausted"),
            s("provider_error"),
            s("harness_error"),
            s("grader_error"),
            s("policy_violation"),
            s("interrupted"),
            num(a.tokens_per_trial),
            num(a.working_seconds_per_trial),
            num(a.steps_per_trial),
            opt(a.cost_per_trial),
            opt(a.tokens_per_solved),
            opt(a.working_seconds_per_solved),
            opt(a.cost_per_solved),
            num(1.0 - r.alpha),
        ]);
        row.extend(r.component_names.iter().map(|n| a.components.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()).unwrap_or_default()));
        w.write_record(&row).expect("a row has one cell per column of its header");
    }
    w.into_inner().unwrap_or_default()
}

pub fn effects_csv(r: &Report) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(EFFECTS_COLUMNS).expect("writing to memory");
    for e in r.ablations.iter().chain(&r.combined) {
        let x = e.excl_infra.as_ref();
        let mut row = run_cells(r);
        row.extend([
            num(r.alpha),
            e.name.clone(),
            e.kind.name().to_string(),
            e.components.join(";"),
            e.model.clone(),
            e.control.clone(),
            e.treatment.clone(),
            num(e.control_rate),
            num(e.treatment_rate),
            num(e.delta),
            num(e.lo),
            num(e.hi),
            num(e.interval_level),
            e.method.name().to_string(),
            e.scope.clone(),
            num(e.p_value),
            opt(e.p_adjusted),
            e.family_size.to_string(),
            e.n_tasks.to_string(),
            num(e.mde),
            e.infra_errors_control.to_string(),
            e.infra_errors_treatment.to_string(),
            e.infra_differs.to_string(),
            opt(x.map(|x| x.delta)),
            opt(x.map(|x| x.lo)),
            opt(x.map(|x| x.hi)),
            opt(x.map(|x| x.p_value)),
            if e.family_size > 1 { "bonferroni".into() } else { "none".into() },
            e.verdict.to_string(),
        ]);
        w.write_record(&row).expect("a row has one cell per column of its header");
    }
    w.into_inner().unwrap_or_default()
}

/// Columns of effects.csv, documented in docs/exports.md.
pub const EFFECTS_COLUMNS: [&str; 33] = [
    "run_id",
    "experiment",
    "config_digest",
    "suite_digest",
    "alpha",
    "name",
    "kind",
    "components",
    "model",
    "control",
    "treatment",
    "control_rate",
    "treatment_rate",
    "delta",
    "lo",
    "hi",
    "interval_level",
    "method",
    "scope",
    "p_value",
    "p_adjusted",
    "family_size",
    "n_tasks",
    "mde",
    "infra_errors_control",
    "infra_errors_treatment",
    "infra_differs",
    "delta_excl_infra",
    "lo_excl_infra",
    "hi_excl_infra",
    "p_value_excl_infra",
    "adjustment",
    "verdict",
];

fn md_effect(s: &mut String, e: &EffectReport) {
    let ci = if e.lo.is_finite() { format!("[{}, {}]", pp(e.lo), pp(e.hi)) } else { "n/a".into() };
    let _ = writeln!(
        s,
        "| {} | {} vs {} | {} | {} pp | {ci} | {} | {} | {} |",
        if e.kind == EffectKind::Ablation { e.components.join(", ") } else { format!("combined ({})", e.components.join(", ")) },
        e.treatment,
        e.control,
        e.model,
        pp(e.delta),
        p(e.p_value),
        e.p_adjusted.map(p).unwrap_or_else(|| "-".into()),
        e.verdict
    );
    if e.infra_differs {
        let _ = writeln!(s, "\n> **Infrastructure errors differ** ({} vs {}): {}\n", e.infra_errors_treatment, e.infra_errors_control, excl_note(e));
    }
}

pub fn markdown(r: &Report) -> String {
    let mut s = format!(
        "# {}\n\nRun `{}`, suite {} (`{}`), {} of {} trials recorded.\n\n",
        r.experiment,
        r.run_id,
        r.suite,
        &r.suite_digest[..12.min(r.suite_digest.len())],
        r.recorded_trials,
        r.planned_trials
    );
    let level = (1.0 - r.alpha) * 100.0;
    let _ = writeln!(
        s,
        "## Arms\n\n| arm | model | trials | tasks | pass rate ({level:.0}% CI) | excl. infra errors | tests passed | statuses | tokens/trial |\n|---|---|---|---|---|---|---|---|---|"
    );
    for a in &r.arms {
        let ci = |i: &super::analysis::Interval| {
            if i.lo.is_finite() { format!("{} [{}, {}]", pct(i.mean), pct(i.lo.max(0.0)), pct(i.hi.min(1.0))) } else { pct(i.mean) }
        };
        let statuses = a.statuses.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {statuses} | {:.0} |",
            a.arm,
            a.model,
            a.trials,
            a.tasks,
            ci(&a.pass_rate),
            ci(&a.pass_rate_excl_infra),
            ci(&a.tests_passed),
            a.tokens_per_trial
        );
    }
    for a in r.arms.iter().filter(|a| !a.warnings.is_empty()) {
        for w in &a.warnings {
            let _ = writeln!(s, "\n> **Warning** ({} / {}): {w}", a.arm, a.model);
        }
    }
    let header = "| component | treatment vs control | model | delta | CI | p | adjusted p | verdict |\n|---|---|---|---|---|---|---|---|";
    if !r.ablations.is_empty() {
        let _ = writeln!(
            s,
            "\n## Ablations\n\nDelta = treatment - control, paired over tasks; intervals and verdicts adjusted for the {} ablations (Bonferroni).\n\n{header}",
            r.ablations.first().map_or(0, |e| e.family_size)
        );
        for e in &r.ablations {
            md_effect(&mut s, e);
        }
    }
    if !r.combined.is_empty() {
        let _ = writeln!(s, "\n## Combined comparisons\n\nSeveral components differ: not attributable to one component.\n\n{header}");
        for e in &r.combined {
            md_effect(&mut s, e);
        }
    }
    for x in &r.refused {
        let _ = writeln!(s, "\n> **Refused**: {x}");
    }
    for x in super::analysis::fingerprint_changes(r) {
        let _ = writeln!(s, "\n> **Warning**: {x}");
    }
    s
}

/// Write the exports derived from the analysis (trials.csv is streamed apart).
pub fn write_derived(dir: &Path, r: &Report) -> std::io::Result<()> {
    atomic_write(dir, "arms.csv", &arms_csv(r))?;
    atomic_write(dir, "effects.csv", &effects_csv(r))?;
    atomic_write(dir, "report.json", &serde_json::to_vec_pretty(r).map_err(std::io::Error::other)?)?;
    atomic_write(dir, "report.md", markdown(r).as_bytes())?;
    atomic_write(dir, "report.html", html::render(r).as_bytes())
}

/// "without them: +x pp [lo, hi], p" for an effect whose arms differ in infrastructure errors.
pub fn excl_note(e: &EffectReport) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// trials.csv's columns as docs/exports.md lists them: the run's four,
    /// the record's from trial_id to attempt, counted, then the rest.
    #[test]
    fn trials_columns_put_counted_after_attempt() {
        assert_eq!(TRIALS_BASE[ATTEMPT], "attempt");
        assert_eq!(TRIALS_COLUMNS.len(), 33);
        assert_eq!(TRIALS_COLUMNS[..5], ["run_id", "experiment", "config_digest", "suite_digest", "trial_id"]);
        assert_eq!(TRIALS_COLUMNS[10..13], ["attempt", "counted", "status"]);
        assert_eq!(TRIALS_COLUMNS[31..], ["finished_at", "system_fingerprints"]);
    }
}
