//! The `ablate` command line. clap lives here only; each subcommand converts
//! its flags into core types and runs the pipeline of ARCHITECTURE.md.

use ablate::error::Exit;
use ablate::experiment::config;
use ablate::plan::Shard;
use ablate::record::lock::{LockError, RunLock};
use ablate::report::live::{FinalExports, LiveExports};
use ablate::runner::events::{Reporter, Reporters};
use ablate::runner::progress::{Progress, ProgressMode};
use ablate::runner::{RunError, RunOptions};
use ablate::{InputError, gate, plan, suite};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(name = "ablate", version, about = "Does this harness component help this model on these tasks, and by how much?")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Run candidate code without the bubblewrap sandbox when it is not available
    /// (recorded in the manifest as isolation: none). Never needed on Linux with bubblewrap.
    #[arg(long, global = true)]
    unsandboxed: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Task suites.
    Suite {
        #[command(subcommand)]
        command: SuiteCommand,
    },
    /// Run an experiment: every planned trial, recorded in results/<run-id>/.
    Run {
        /// Experiment config (TOML).
        config: PathBuf,
        /// Trials at once (default: what the embedded model decodes together, 4, when the
        /// experiment uses the local provider; otherwise 1).
        #[arg(long, short = 'j')]
        jobs: Option<usize>,
        /// Run only shard K of N (K/N).
        #[arg(long, value_parser = parse_shard)]
        shard: Option<Shard>,
        /// Continue a run folder: run only planned trials without a final record.
        #[arg(long, value_name = "DIR")]
        resume: Option<PathBuf>,
        /// Parent folder of new run folders.
        #[arg(long, default_value = "results")]
        results: PathBuf,
        /// One line per trial on stderr, even on a terminal.
        #[arg(long)]
        plain: bool,
        /// Name of the run folder under --results (default: <UTC time>-<experiment>).
        #[arg(long, conflicts_with = "resume")]
        run_id: Option<String>,
        /// Trials per (task, arm, model), instead of the config's
        /// (a different experiment: its trial ids differ).
        #[arg(long)]
        trials: Option<u32>,
        /// With --resume: go on when a model's identity (GGUF sha256, Ollama
        /// digest) differs from the one the run started with, warning instead
        /// of refusing.
        #[arg(long, requires = "resume")]
        allow_model_change: bool,
        #[command(flatten)]
        engine: ablate::model::EngineSettings,
    },
    /// Analyse a run folder: print the report and write trials.csv, arms.csv,
    /// effects.csv, report.json, report.md and report.html into it.
    Report {
        /// Run folder (results/<run-id>).
        run: PathBuf,
        /// No colour, even on a terminal (NO_COLOR is honoured too).
        #[arg(long)]
        no_color: bool,
    },
    /// Put the shard folders of one experiment (`run --shard K/N`) back together as one run
    /// folder, which report, gate, export and run --resume read like any run.
    Merge {
        /// The merged run folder (must not exist; its name is the run id).
        #[arg(short = 'o', long = "output", value_name = "OUT")]
        output: PathBuf,
        /// Shard folders: one per shard index 1..N.
        #[arg(required = true, value_name = "SHARD_DIR")]
        shards: Vec<PathBuf>,
        /// Merge what exists when shards or trials are missing (the manifest says so).
        #[arg(long)]
        allow_partial: bool,
    },
    /// Per-task baselines for `ablate gate`.
    Baseline {
        #[command(subcommand)]
        command: BaselineCommand,
    },
    /// CI regression gate on pass rate: PASS (exit 0), FAIL (1), INCONCLUSIVE (3); usage error or drift (2).
    Gate {
        /// A baseline file (`ablate baseline save`) or a run folder.
        #[arg(long)]
        baseline: PathBuf,
        /// The run folder to judge.
        #[arg(long)]
        candidate: PathBuf,
        /// Largest drop in pass rate accepted as non-inferior (0.05 = 5 pp).
        #[arg(long, default_value_t = 0.05)]
        margin: f64,
        /// Level of the exact one-sided tests: a drop beyond the margin PASSes in at most alpha of runs.
        #[arg(long, default_value_t = 0.05)]
        alpha: f64,
        /// Arm of the candidate (default: the baseline's arm).
        #[arg(long)]
        arm: Option<String>,
        /// Model of the candidate (default: the baseline's model).
        #[arg(long)]
        model: Option<String>,
        /// Compare despite a different suite, task set, model or budget (each drift is printed).
        #[arg(long)]
        allow_drift: bool,
        /// Append a Markdown summary here (e.g. $GITHUB_STEP_SUMMARY).
        #[arg(long, value_name = "FILE")]
        markdown: Option<PathBuf>,
        /// Write JUnit XML here: one test case per task with its counts, failed only where the gate's rule says it regressed, and one for the verdict.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
    },
    /// One typed dataset of many runs' trials, arms or effects (docs/exports.md): Parquet when
    /// FILE ends in .parquet, else CSV. Needs a build with the `polars` feature.
    Export {
        /// Run folders.
        #[arg(required = true)]
        runs: Vec<PathBuf>,
        /// Output file (.parquet or .csv).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
        /// The table to export.
        #[arg(long, value_enum, default_value = "trials")]
        table: ablate::export::Table,
    },
    /// Write a synthetic run folder (for benchmarks and tests of `report`).
    #[command(hide = true)]
    SynthRun {
        config: PathBuf,
        /// At least this many trial records.
        #[arg(long)]
        records: usize,
        #[arg(long)]
        out: PathBuf,
        /// Seed of the drawn outcomes.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Print the arms, comparisons and trial plan of a config, without running.
    Plan {
        /// Experiment config (TOML).
        #[arg(required_unless_present = "pilot")]
        config: Option<PathBuf>,
        /// Show only shard K of N (K/N).
        #[arg(long, value_parser = parse_shard)]
        shard: Option<Shard>,
        /// Print the plan as JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Size the experiment from a pilot run folder instead: trials per
        /// task (or tasks) needed for 80% power on each ablation.
        #[arg(long, value_name = "RUN", requires = "mde")]
        pilot: Option<PathBuf>,
        /// Smallest effect worth detecting, as a fraction (0.10 = 10 pp).
        #[arg(long)]
        mde: Option<f64>,
    },
}

#[derive(Subcommand)]
enum SuiteCommand {
    /// Prove every task: the stub fails every test, the solution passes every test.
    Check {
        /// Suite folder (holds suite.toml).
        dir: PathBuf,
    },
    /// Write a suite from a JSONL problems file (plain or gzip): one task folder per line.
    Import {
        /// `humaneval` (HumanEval.jsonl.gz) or `jsonl` (ablate's schema, docs/suites.md).
        format: ImportFormat,
        /// The problems file.
        source: PathBuf,
        /// The suite folder to write (must not exist, or be empty).
        #[arg(short = 'o', long)]
        output: PathBuf,
        /// Replace an existing suite folder at --output.
        #[arg(long)]
        force: bool,
        /// Suite name (default: humaneval, or the source's file name without extensions).
        #[arg(long)]
        name: Option<String>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ImportFormat {
    Humaneval,
    Jsonl,
}

#[derive(Subcommand)]
enum BaselineCommand {
    /// Save the per-task pass counts of one arm and model of a run (commit the file).
    Save {
        /// Run folder.
        run: PathBuf,
        /// Output CSV, e.g. results/baseline/NAME.csv.
        #[arg(short = 'o', long)]
        output: PathBuf,
        /// Arm to save (needed when the run has several).
        #[arg(long)]
        arm: Option<String>,
        /// Model to save (needed when the run has several).
        #[arg(long)]
        model: Option<String>,
    },
}

fn parse_shard(s: &str) -> Result<Shard, String> {
    s.parse()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(code) => code,
        Err(err) => {
            if let Some(input) = input_error(&err) {
                eprintln!("error: {input}");
                Exit::Usage
            } else {
                eprintln!("error: {err:#}");
                Exit::Failure
            }
        }
    };
    code.into()
}

/// The bad input behind an error, wherever a stage wrapped it: a usage error (exit 2).
fn input_error(err: &anyhow::Error) -> Option<&InputError> {
    err.downcast_ref::<InputError>()
        .or_else(|| match err.downcast_ref::<RunError>() {
            Some(RunError::Input(e)) => Some(e),
            _ => None,
        })
        .or_else(|| match err.downcast_ref::<gate::GateError>() {
            Some(gate::GateError::Input(e)) => Some(e),
            _ => None,
        })
}

fn run(cli: Cli) -> anyhow::Result<Exit> {
    if matches!(cli.command, Command::Suite { command: SuiteCommand::Check { .. } } | Command::Run { .. }) {
        // Candidate code runs only under the sandbox, or where the user opted out.
        if let Err(e) = ablate::sandbox::isolation::init(cli.unsandboxed) {
            eprintln!("error: {e}");
            return Ok(Exit::Usage);
        }
    }
    match cli.command {
        Command::Suite { command: SuiteCommand::Check { dir } } => suite_check(dir),
        Command::Suite { command: SuiteCommand::Import { format, source, output, force, name } } => {
            let format = match format {
                ImportFormat::Humaneval => suite::import::Format::HumanEval,
                ImportFormat::Jsonl => suite::import::Format::Jsonl,
            };
            suite_import(suite::import::ImportOptions { format, source, out: output, force, name })
        }
        Command::Plan { pilot: Some(run), mde, .. } => pilot_cmd(&run, mde.unwrap_or(0.1)),
        Command::Plan { config, shard, json, .. } => plan_cmd(config.expect("clap requires it"), shard, json),
        Command::Report { run, no_color } => report_cmd(&run, no_color),
        Command::Merge { output, shards, allow_partial } => merge_cmd(output, shards, allow_partial),
        Command::Baseline { command: BaselineCommand::Save { run, output, arm, model } } => baseline_save(&run, &output, arm, model),
        Command::Gate { baseline, candidate, margin, alpha, arm, model, allow_drift, markdown, junit } => {
            gate_cmd(gate::GateOptions { baseline, candidate, margin, alpha, arm, model, allow_drift, markdown, junit })
        }
        Command::SynthRun { config, records, out, seed } => synth_cmd(&config, records, &out, seed),
        Command::Export { runs, output, table } => export_cmd(&runs, table, &output),
        Command::Run { config, jobs, shard, resume, results, plain, trials, run_id, allow_model_change, engine } => {
            // The run's reporters: the progress, and the exports (their warnings shown by the progress).
            let progress: Arc<dyn Reporter> = Arc::new(Progress::new(if plain { ProgressMode::Lines } else { ProgressMode::Auto }));
            let exports = Arc::new(LiveExports::new(Reporters::new(vec![progress.clone()])));
            let reporters = vec![progress, exports.clone() as Arc<dyn Reporter>];
            let opts = RunOptions { jobs: 1, shard, results_dir: results, resume, run_id, allow_model_change, reporters, engine };
            run_cmd(config, trials, jobs, opts, &exports)
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

fn suite_check(dir: PathBuf) -> anyhow::Result<Exit> {
    let report = runtime()?.block_on(ablate::grader::suite_check::check_suite(&dir));
    for p in &report.problems {
        println!("error: {p}");
    }
    for t in &report.tasks {
        let status = if t.problems.is_empty() { "ok  " } else { "FAIL" };
        let stub = t.stub.as_ref().map(|r| format!("stub {}/{}", r.passed, r.total)).unwrap_or_else(|| "stub -".into());
        let sol = t.solution.as_ref().map(|r| format!("solution {}/{}", r.passed, r.total)).unwrap_or_else(|| "solution -".into());
        println!("{status} {:<24} {stub:<14} {sol}", t.id);
        for p in &t.problems {
            println!("     {}: {p}", t.id);
        }
    }
    let failed: Vec<&str> = report.tasks.iter().filter(|t| !t.problems.is_empty()).map(|t| t.id.as_str()).collect();
    match (&report.suite, report.ok()) {
        (Some(s), true) => {
            println!("{} tasks ok; suite {} {} digest {}", s.tasks.len(), s.name, s.version, s.digest);
            Ok(Exit::Ok)
        }
        _ => {
            println!("{} of {} tasks have problems: {}", failed.len(), report.tasks.len(), failed.join(", "));
            Ok(Exit::Failure)
        }
    }
}

fn suite_import(opts: suite::import::ImportOptions) -> anyhow::Result<Exit> {
    let done = suite::import::import(&opts)?;
    let suite = suite::load(&opts.out)?;
    println!(
        "{} tasks written to {}; suite {} {} digest {}; source sha256 {}",
        done.tasks,
        opts.out.display(),
        suite.name,
        suite.version,
        suite.digest,
        done.source_sha256
    );
    println!("prove it: ablate suite check {}", opts.out.display());
    Ok(Exit::Ok)
}

fn plan_cmd(config_path: PathBuf, shard: Option<Shard>, json: bool) -> anyhow::Result<Exit> {
    let exp = config::load(&config_path)?;
    let suite = suite::load(&exp.suite_path)?;
    let plan = plan::build(&exp, &suite)?;
    if json {
        let out = serde_json::json!({
            "experiment": exp,
            "suite": { "name": suite.name, "version": suite.version, "digest": suite.digest },
            "config_digest": plan.config_digest,
            "shard": shard,
            "trials": plan.shard(shard),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", plan::render::render(&exp, &suite, &plan, shard));
    }
    Ok(Exit::Ok)
}

fn run_cmd(config_path: PathBuf, trials: Option<u32>, jobs: Option<usize>, mut opts: RunOptions, exports: &LiveExports) -> anyhow::Result<Exit> {
    let mut exp = config::load(&config_path)?;
    if let Some(n) = trials {
        if n == 0 {
            return Err(InputError::at(&config_path, "--trials", "must be at least 1").into());
        }
        exp.trials = n;
    }
    opts.jobs = match jobs {
        Some(0) => return Err(InputError::at(&config_path, "--jobs", "must be at least 1").into()),
        Some(n) => n,
        None => ablate::runner::default_jobs(&exp, &opts.engine),
    };
    let suite = suite::load(&exp.suite_path)?;
    let result = runtime()?.block_on(ablate::runner::run(exp, suite, opts));
    let summary = match result {
        Ok(s) => s,
        Err(e @ RunError::Lock(LockError::InUse { .. })) => {
            eprintln!("error: {e}");
            return Ok(Exit::Usage);
        }
        Err(RunError::Interrupted { .. }) => {
            eprintln!("{}", result.unwrap_err());
            return Ok(Exit::Interrupted);
        }
        Err(e) => return Err(e.into()),
    };
    // The exports reporter writes the final exports while `summary` holds the run's
    // lock, and hands over their analysis: printed as is; if they could not be
    // written, try once more and say why.
    let done = exports.finish();
    eprintln!("recorded in {}", summary.dir.display());
    let report = match done {
        Ok(FinalExports { report: Ok(report), summary: counts }) => {
            eprint!("{}", counts.unwrap_or_default());
            report
        }
        Ok(FinalExports { report: Err(e), .. }) | Err(e) => {
            eprintln!("warning: {e}");
            return write_report(&summary.dir, false);
        }
    };
    print!("{}", ablate::report::terminal::render(&report, colour(false)));
    eprintln!("wrote trials.csv, arms.csv, effects.csv, report.json, report.md, report.html in {}", summary.dir.display());
    Ok(Exit::Ok)
}

fn colour(no_color: bool) -> bool {
    use std::io::IsTerminal;
    !no_color && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

/// `ablate report`: nothing is written into a folder without a manifest; the
/// exports are written under the folder's lock, and while a run holds it the
/// report is printed only (the run rewrites the exports itself).
fn report_cmd(run: &std::path::Path, no_color: bool) -> anyhow::Result<Exit> {
    if let Err(e) = ablate::report::require_manifest(run) {
        eprintln!("error: {e}");
        return Ok(Exit::Usage);
    }
    match RunLock::acquire(run) {
        Ok(_lock) => write_report(run, no_color),
        Err(LockError::InUse { holder, .. }) => {
            let report = ablate::report::analyse_dir(run).map_err(|e| InputError::new(run, e))?;
            print!("{}", ablate::report::terminal::render(&report, colour(no_color)));
            eprintln!("note: {} is in use by {holder}; the exports were not written (that run rewrites them)", run.display());
            Ok(Exit::Ok)
        }
        Err(e) => Err(e.into()),
    }
}

/// Analyse `run` and write its exports; the caller holds the folder's lock.
fn write_report(run: &std::path::Path, no_color: bool) -> anyhow::Result<Exit> {
    let report = ablate::report::report_dir(run).map_err(|e| InputError::new(run, e))?;
    print!("{}", ablate::report::terminal::render(&report, colour(no_color)));
    eprintln!("wrote trials.csv, arms.csv, effects.csv, report.json, report.md, report.html in {}", run.display());
    Ok(Exit::Ok)
}

/// `ablate merge`: missing shards or trials are named and refuse the merge
/// (exit 1) unless `--allow-partial`; a shard still being written is a usage error.
fn merge_cmd(out: PathBuf, shards: Vec<PathBuf>, allow_partial: bool) -> anyhow::Result<Exit> {
    use ablate::record::merge::{MergeError, MergeOptions, merge};
    let summary = match merge(&MergeOptions { out, shards, allow_partial }) {
        Ok(s) => s,
        Err(MergeError::Input(e)) => return Err(e.into()),
        Err(MergeError::Incomplete(lines)) => {
            for l in lines {
                eprintln!("error: {l}");
            }
            return Ok(Exit::Failure);
        }
        Err(e @ MergeError::Lock(_)) => {
            eprintln!("error: {e}");
            return Ok(Exit::Usage);
        }
        Err(e) => return Err(e.into()),
    };
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

fn pilot_cmd(run: &std::path::Path, mde: f64) -> anyhow::Result<Exit> {
    if !(mde > 0.0 && mde <= 1.0) {
        return Err(InputError::at(run, "--mde", format!("{mde} is not in (0, 1]; give a fraction such as 0.10")).into());
    }
    let data = ablate::report::load::load(run).map_err(|e| InputError::new(run, e.to_string()))?;
    let alpha = data.manifest.experiment.alpha;
    let rows = ablate::report::power::plan(&data, mde, alpha, 0.8);
    print!("{}", ablate::report::power::render(&rows, mde, alpha, 0.8));
    Ok(Exit::Ok)
}

#[cfg(feature = "polars")]
fn export_cmd(runs: &[PathBuf], table: ablate::export::Table, output: &std::path::Path) -> anyhow::Result<Exit> {
    let n = ablate::export::export(runs, table, output)?;
    eprintln!("wrote {n} rows of {} runs to {}", runs.len(), output.display());
    Ok(Exit::Ok)
}

#[cfg(not(feature = "polars"))]
fn export_cmd(_runs: &[PathBuf], _table: ablate::export::Table, output: &std::path::Path) -> anyhow::Result<Exit> {
    Err(InputError::new(output, "this ablate was built without the `polars` feature: build with `cargo build --release --features polars`").into())
}

fn synth_cmd(config_path: &std::path::Path, records: usize, out: &std::path::Path, seed: u64) -> anyhow::Result<Exit> {
    let mut exp = config::load(config_path)?;
    let suite = suite::load(&exp.suite_path)?;
    let per_repeat = plan::build(&exp, &suite)?.trials.len() / exp.trials as usize;
    exp.trials = records.div_ceil(per_repeat.max(1)) as u32;
    let plan = plan::build(&exp, &suite)?;
    // Arms get distinct rates so that the report has effects to find.
    let n = ablate::report::synth::write_run(out, &exp, &suite, &plan, seed, |task, arm| {
        let t = (task.len() % 5) as f64 / 10.0;
        let a = (arm.len() % 4) as f64 / 10.0;
        (0.2 + t + a).min(0.95)
    })?;
    eprintln!("wrote {n} records to {}", out.display());
    Ok(Exit::Ok)
}

fn load_run(run: &std::path::Path) -> anyhow::Result<ablate::report::load::RunData> {
    Ok(ablate::report::load::load(run).map_err(|e| InputError::new(run, e.to_string()))?)
}

fn baseline_save(run: &std::path::Path, output: &std::path::Path, arm: Option<String>, model: Option<String>) -> anyhow::Result<Exit> {
    let data = load_run(run)?;
    let rows = gate::baseline_of_run(&data, arm.as_deref(), model.as_deref()).map_err(|e| InputError::new(run, e))?;
    gate::write_baseline(output, &rows)?;
    let (n, p): (u32, u32) = rows.iter().fold((0, 0), |(n, p), r| (n + r.trials, p + r.passes));
    println!("saved {} tasks ({p}/{n} trials passed) of arm `{}`, model `{}` to {}", rows.len(), rows[0].arm, rows[0].model, output.display());
    Ok(Exit::Ok)
}

fn gate_cmd(opts: gate::GateOptions) -> anyhow::Result<Exit> {
    let outcome = gate::run(&opts)?;
    for d in &outcome.drifts {
        eprintln!("drift: {d}");
    }
    match &outcome.decided {
        None => eprintln!("error: the baseline does not match the candidate; refusing to compare (use --allow-drift to compare anyway)"),
        Some(text) => print!("{text}"),
    }
    Ok(outcome.exit)
}
