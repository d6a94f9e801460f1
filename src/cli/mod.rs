//! The command line in two stages: `args` (clap reads each command's
//! flags; `resolve` turns them into the core options they name, reading and
//! checking every input first), then here each command runs its pipeline and
//! prints. Every command ends in one typed `Exit`, or a `CommandError` that
//! `error` maps to one.

/// `print!` to stdout, except that when what reads it has gone (`ablate report RUN | head -1`)
/// the command ends quietly with status 0, as ripgrep does. SIGPIPE stays ignored (Rust's
/// default): the gateway and the harnesses write to sockets and pipes whose far end may close.
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::write_out(format_args!($($arg)*)) };
}

/// `println!` as [`out!`].
macro_rules! outln {
    ($($arg:tt)*) => { $crate::cli::write_out(format_args!("{}\n", format_args!($($arg)*))) };
}

pub mod args;
pub mod error;

use ablate::error::Exit;
use ablate::record::events::{Reporter, Reporters};
use ablate::record::lock::{LockError, RunLock};
use ablate::record::merge::{MergeOptions, merge};
use ablate::report::live::{FinalExports, LiveExports};
use ablate::runner::RunOptions;
use ablate::runner::progress::{Progress, ProgressMode};
use ablate::{gate, plan, suite};
use args::{BaselineCommand, BaselineSave, Cli, Command, PlanRequest, RunRequest, SuiteCommand};
pub use error::CommandError;
use error::write_error;
use std::path::PathBuf;
use std::sync::Arc;

/// Run the command `cli` names: its arguments resolved, then its pipeline.
pub fn run(cli: Cli) -> Result<Exit, CommandError> {
    if matches!(
        cli.command,
        Command::Suite { command: SuiteCommand::Check { .. } } | Command::Run(_)
    ) {
        // Candidate code runs only under the sandbox, or where the user opted out, and
        // with the Python named (shown to run before anything starts).
        ablate::sandbox::isolation::init(cli.unsandboxed, cli.bwrap.as_deref())
            .map_err(|e| CommandError::Setup(e.to_string()))?;
        if let Some(python) = &cli.python {
            ablate::grader::use_python(&python.to_string_lossy())
                .map_err(|e| CommandError::Setup(format!("--python (or ABLATE_PYTHON): {e}")))?;
        }
        ablate::grader::preflight().map_err(|e| CommandError::Setup(e.to_string()))?;
    }
    let container_engine = cli.engine.map(Into::into);
    match cli.command {
        Command::Suite { command: SuiteCommand::Check { dir } } => {
            suite_check(dir, container_engine)
        }
        Command::Suite { command: SuiteCommand::Import(a) } => suite_import(a.resolve()),
        Command::Plan(a) => plan_cmd(a.resolve()?),
        Command::Import(a) => import_cmd(a.resolve()),
        Command::Report(a) => report_cmd(&a.run, a.no_color, a.margin),
        Command::Merge(a) => merge_cmd(a.resolve()),
        Command::Baseline { command: BaselineCommand::Save(a) } => baseline_save(a.resolve()?),
        Command::Gate(a) => gate_cmd(a.resolve()),
        Command::SynthRun(a) => synth_cmd(&a.config, a.records, &a.out, a.seed),
        Command::Export(a) => export_cmd(&a.runs, a.table.into(), &a.output),
        Command::Run(a) => {
            let mut req = a.resolve()?;
            req.container_engine = container_engine;
            run_cmd(req)
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, CommandError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CommandError::Internal(format!("cannot start the async runtime: {e}")))
}

/// An engine's image id as `sha256:` and its first 12 hex digits.
fn short_id(id: &str) -> &str {
    let end = if id.starts_with("sha256:") { 19 } else { 12 };
    &id[..end.min(id.len())]
}

fn suite_check(
    dir: PathBuf,
    container_engine: Option<ablate::container::EngineKind>,
) -> Result<Exit, CommandError> {
    let report =
        runtime()?.block_on(ablate::grader::suite_check::check_suite(&dir, container_engine));
    for p in &report.problems {
        outln!("error: {p}");
    }
    for t in &report.tasks {
        let status = if t.problems.is_empty() { "ok  " } else { "FAIL" };
        let stub = t
            .stub
            .as_ref()
            .map(|r| format!("stub {}/{}", r.passed, r.total))
            .unwrap_or_else(|| "stub -".into());
        let sol = t
            .solution
            .as_ref()
            .map(|r| format!("solution {}/{}", r.passed, r.total))
            .unwrap_or_else(|| "solution -".into());
        let mode = t.mode.map_or("verifier", |m| m.name());
        outln!("{status} {:<24} {mode:<15} {stub:<14} {sol}", t.id);
        if let Some(img) = &t.image {
            outln!("     {}: image {} ({})", t.id, short_id(&img.id), img.name);
            for b in &img.bases {
                let id = b.id.as_deref().map_or("not on this machine", short_id);
                outln!("     {}: built on {} ({id})", t.id, b.name);
            }
        }
        for p in &t.problems {
            outln!("     {}: {p}", t.id);
        }
    }
    let failed: Vec<&str> =
        report.tasks.iter().filter(|t| !t.problems.is_empty()).map(|t| t.id.as_str()).collect();
    match (&report.suite, report.ok()) {
        (Some(s), true) => {
            outln!(
                "{} tasks ok; suite {} {} digest {}",
                s.tasks.len(),
                s.name,
                s.version,
                s.digest
            );
            Ok(Exit::Ok)
        }
        _ => {
            outln!(
                "{} of {} tasks have problems: {}",
                failed.len(),
                report.tasks.len(),
                failed.join(", ")
            );
            Ok(Exit::Failure)
        }
    }
}

fn suite_import(opts: suite::import::ImportOptions) -> Result<Exit, CommandError> {
    let done = suite::import::import(&opts)?;
    let suite = suite::load(&opts.out)?;
    outln!(
        "{} tasks written to {}; suite {} {} digest {}; source sha256 {}",
        done.tasks,
        opts.out.display(),
        suite.name,
        suite.version,
        suite.digest,
        done.source_sha256
    );
    outln!("prove it: ablate suite check {}", opts.out.display());
    Ok(Exit::Ok)
}

/// `ablate import`: another tool's runs as a run folder.
fn import_cmd(opts: ablate::import::ImportOptions) -> Result<Exit, CommandError> {
    let done = ablate::import::import(&opts)?;
    let statuses = done
        .statuses
        .iter()
        .map(|(s, n)| format!("{n} {}", s.name()))
        .collect::<Vec<_>>()
        .join(", ");
    outln!(
        "{} trials of {} tasks imported into {} ({statuses})",
        done.trials,
        done.tasks,
        opts.out.display()
    );
    outln!("arms: {}", done.arms.join(", "));
    for note in &done.notes {
        outln!("note: {note}");
    }
    for c in &done.comparisons {
        let kind = match &c.kind {
            ablate::experiment::matrix::ComparisonKind::Ablation { component } => {
                format!("ablation of `{component}`")
            }
            ablate::experiment::matrix::ComparisonKind::Combined => {
                format!(
                    "not an ablation: {} differ",
                    c.differs.iter().map(|d| d.component.as_str()).collect::<Vec<_>>().join(", ")
                )
            }
        };
        outln!("comparison {}: {kind}", c.name);
    }
    outln!("report: ablate report {}", opts.out.display());
    Ok(Exit::Ok)
}

/// `ablate plan`: the plan as text or JSON, or the sizing from a pilot run.
fn plan_cmd(req: PlanRequest) -> Result<Exit, CommandError> {
    match req {
        PlanRequest::Pilot { data, mde } => {
            let alpha = data.manifest.experiment.alpha;
            let rows = ablate::report::power::plan(&data, mde, alpha, 0.8);
            out!("{}", ablate::report::power::render(&rows, mde, alpha, 0.8));
            let factorial = ablate::report::power::factorial_plan(&data, mde, alpha, 0.8);
            if data.manifest.experiment.factorial.is_some() {
                out!("{}", ablate::report::power::render_factorial(&factorial, mde, alpha, 0.8));
            }
        }
        PlanRequest::Plan { exp, suite, plan, shard, json: true } => {
            let out = serde_json::json!({
                "experiment": exp,
                "suite": { "name": suite.name, "version": suite.version, "digest": suite.digest },
                "config_digest": plan.config_digest,
                "shard": shard,
                "trials": plan.shard(shard),
            });
            outln!(
                "{}",
                serde_json::to_string_pretty(&out)
                    .map_err(|e| CommandError::Internal(e.to_string()))?
            );
        }
        PlanRequest::Plan { exp, suite, plan, shard, json: false } => {
            out!("{}", plan::render::render(&exp, &suite, &plan, shard));
            if let Some(w) = margin_warning(&exp, &suite) {
                outln!("warning: {w}");
            }
            if let Some(d) = &exp.sequential {
                let tasks = if exp.tasks.is_empty() { suite.tasks.len() } else { exp.tasks.len() };
                let max_tasks = d.max_tasks.map_or(tasks, |n| (n as usize).min(tasks));
                let ablations =
                    exp.comparisons.iter().filter(|c| c.is_ablation()).count() * exp.models.len();
                let level = exp.alpha / ablations.max(1) as f64;
                let p = ablate::report::power::sequential_projection(
                    exp.trials, max_tasks, level, exp.margin, 0.5, 0.25,
                );
                out!("{}", ablate::report::power::render_projection(&p, exp.trials, exp.margin));
            }
        }
    }
    Ok(Exit::Ok)
}

/// The warning of an experiment whose margin cannot be shown within its
/// budget of tasks even with no change at all (`report::power::margin_warning`),
/// at its ablations' level.
fn margin_warning(
    exp: &ablate::experiment::config::Experiment,
    suite: &ablate::suite::Suite,
) -> Option<String> {
    let margin = exp.margin?;
    let tasks = if exp.tasks.is_empty() { suite.tasks.len() } else { exp.tasks.len() };
    let budget = exp.sequential.as_ref().and_then(|d| d.max_tasks);
    let tasks = budget.map_or(tasks, |n| (n as usize).min(tasks));
    let ablations = exp.comparisons.iter().filter(|c| c.is_ablation()).count() * exp.models.len();
    let level = exp.alpha / ablations.max(1) as f64;
    ablate::report::power::margin_warning(margin, tasks, level, exp.sequential.is_some())
}

/// `ablate run`: the run with its reporters (the progress, and the exports,
/// whose warnings the progress shows), then the counts and the report.
fn run_cmd(req: RunRequest) -> Result<Exit, CommandError> {
    if let Some(w) = margin_warning(&req.exp, &req.suite) {
        eprintln!("warning: {w}");
    }
    let progress: Arc<dyn Reporter> =
        Arc::new(Progress::new(if req.plain { ProgressMode::Lines } else { ProgressMode::Auto }));
    let exports = Arc::new(LiveExports::new(Reporters::new(vec![progress.clone()])));
    let opts = RunOptions {
        jobs: req.jobs,
        shard: req.shard,
        results_dir: req.results,
        resume: req.resume,
        run_id: req.run_id,
        allow_model_change: req.allow_model_change,
        reporters: vec![progress, exports.clone()],
        engine: req.engine,
        container_engine: req.container_engine,
    };
    let summary = runtime()?.block_on(ablate::runner::run(req.exp, req.suite, opts))?;
    // The exports reporter writes the final exports while `summary` holds the run's
    // lock, and hands over their analysis: printed as is; if they could not be
    // written, try once more and say why.
    let done = exports.finish();
    eprintln!("recorded in {}", summary.dir.display());
    let written =
        done.map_err(|e| e.to_string()).and_then(|FinalExports { report, summary: counts }| {
            report.map(|report| (report, counts)).map_err(|e| e.to_string())
        });
    let report = match written {
        Ok((report, counts)) => {
            eprint!("{}", counts.unwrap_or_default());
            report
        }
        Err(e) => {
            eprintln!("warning: {e}");
            return write_report(&summary.dir, false);
        }
    };
    out!("{}", ablate::report::terminal::render(&report, colour(false)));
    eprintln!(
        "wrote trials.csv, arms.csv, effects.csv, report.json, report.md, report.html in {}",
        summary.dir.display()
    );
    Ok(Exit::Ok)
}

fn baseline_save(save: BaselineSave) -> Result<Exit, CommandError> {
    let BaselineSave { rows, output } = save;
    gate::write_baseline(&output, &rows).map_err(write_error(&output))?;
    let (n, p): (u32, u32) = rows.iter().fold((0, 0), |(n, p), r| (n + r.trials, p + r.passes));
    outln!(
        "saved {} tasks ({p}/{n} trials passed) of arm `{}`, model `{}` to {}",
        rows.len(),
        rows[0].arm,
        rows[0].model,
        output.display()
    );
    Ok(Exit::Ok)
}

fn colour(no_color: bool) -> bool {
    use std::io::IsTerminal;
    !no_color
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::io::stdout().is_terminal()
}

/// `ablate report`: nothing is written into a folder without a manifest; the
/// exports are written under the folder's lock, and while a run holds it the
/// report is printed only (the run rewrites the exports itself).
fn report_cmd(
    run: &std::path::Path,
    no_color: bool,
    margin: Option<f64>,
) -> Result<Exit, CommandError> {
    ablate::report::require_manifest(run)?;
    if let Some(m) = margin {
        let report = ablate::report::analyse_dir(run, Some(m))?;
        out!("{}", ablate::report::terminal::render(&report, colour(no_color)));
        eprintln!(
            "note: margin ±{} pp from the command line; the exports in {} were not rewritten (they keep the experiment's own margin)",
            ablate::report::format::margin_pp(m),
            run.display()
        );
        return Ok(Exit::Ok);
    }
    match RunLock::acquire(run) {
        Ok(_lock) => write_report(run, no_color),
        Err(LockError::InUse { holder, .. }) => {
            let report = ablate::report::analyse_dir(run, None)?;
            out!("{}", ablate::report::terminal::render(&report, colour(no_color)));
            eprintln!(
                "note: {} is in use by {holder}; the exports were not written (that run rewrites them)",
                run.display()
            );
            Ok(Exit::Ok)
        }
        Err(e) => Err(e.into()),
    }
}

/// Analyse `run` and write its exports; the caller holds the folder's lock.
fn write_report(run: &std::path::Path, no_color: bool) -> Result<Exit, CommandError> {
    let report = ablate::report::report_dir(run)?;
    out!("{}", ablate::report::terminal::render(&report, colour(no_color)));
    eprintln!(
        "wrote trials.csv, arms.csv, effects.csv, report.json, report.md, report.html in {}",
        run.display()
    );
    Ok(Exit::Ok)
}

/// `ablate merge`: missing shards or trials are named and refuse the merge
/// (exit 1) unless `--allow-partial`; a shard still being written is a usage error.
fn merge_cmd(opts: MergeOptions) -> Result<Exit, CommandError> {
    let summary = merge(&opts)?;
    for l in &summary.missing {
        eprintln!("warning: {l}");
    }
    let partial = if summary.missing.is_empty() { "" } else { " (partial: --allow-partial)" };
    eprintln!(
        "merged {} records of {} planned trials (shards of {}) into {}{partial}",
        summary.records,
        summary.planned,
        summary.shard_count,
        summary.dir.display()
    );
    // The merged folder's lock (in `summary`) is held while its exports are written.
    write_report(&summary.dir, false)
}

#[cfg(feature = "polars")]
fn export_cmd(
    runs: &[PathBuf],
    table: ablate::export::Table,
    output: &std::path::Path,
) -> Result<Exit, CommandError> {
    let n = ablate::export::export(runs, table, output)?;
    eprintln!("wrote {n} rows of {} runs to {}", runs.len(), output.display());
    Ok(Exit::Ok)
}

#[cfg(not(feature = "polars"))]
fn export_cmd(
    _runs: &[PathBuf],
    _table: ablate::export::Table,
    output: &std::path::Path,
) -> Result<Exit, CommandError> {
    Err(ablate::InputError::new(output, "this ablate was built without the `polars` feature: build with `cargo build --release --features polars`").into())
}

fn synth_cmd(
    config_path: &std::path::Path,
    records: usize,
    out: &std::path::Path,
    seed: u64,
) -> Result<Exit, CommandError> {
    let mut exp = ablate::experiment::config::load(config_path)?;
    let suite = suite::load(&exp.suite_path)?;
    let per_repeat = plan::build(&exp, &suite)?.trials.len() / exp.trials as usize;
    exp.trials = records.div_ceil(per_repeat.max(1)) as u32;
    let plan = plan::build(&exp, &suite)?;
    // Arms get distinct rates so that the report has effects to find.
    let n = ablate_synth::write_run(out, &exp, &suite, &plan, seed, |task, arm| {
        let t = (task.len() % 5) as f64 / 10.0;
        let a = (arm.len() % 4) as f64 / 10.0;
        (0.2 + t + a).min(0.95)
    })
    .map_err(write_error(out))?;
    eprintln!("wrote {n} records to {}", out.display());
    Ok(Exit::Ok)
}

fn gate_cmd(opts: gate::GateOptions) -> Result<Exit, CommandError> {
    let outcome = gate::run(&opts)?;
    for d in &outcome.drifts {
        eprintln!("drift: {d}");
    }
    match &outcome.decided {
        None => eprintln!(
            "error: the baseline does not match the candidate; refusing to compare (use --allow-drift to compare anyway)"
        ),
        Some((_, text)) => out!("{text}"),
    }
    Ok(error::gate_exit(outcome.decided.as_ref().map(|(verdict, _)| *verdict)))
}

/// Write to stdout; a closed stdout ends the command quietly (status 0), any other failure to
/// print panics as `print!` does.
pub fn write_out(args: std::fmt::Arguments) {
    use std::io::Write;
    match std::io::stdout().write_fmt(args) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ablate::sandbox::scratch::remove();
            std::process::exit(0);
        }
        Err(e) => panic!("failed printing to stdout: {e}"),
    }
}
