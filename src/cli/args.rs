//! The first stage of the command line: clap reads the flags into each
//! command's arguments (`*Args`, plain data, shown by `--help`). The second
//! stage, `resolve`, turns them into the core options they name, reading and
//! checking every input (configs, suites, run folders) before anything is
//! written; a bad one is an error naming the file (and the key). A flag's
//! value out of range is refused by clap itself, naming the flag.

use super::CommandError;
use ablate::experiment::config::{self, Experiment};
use ablate::plan::{self, Plan, Shard};
use ablate::record::merge::MergeOptions;
use ablate::report::ReportError;
use ablate::report::load::RunData;
use ablate::suite::{self, Suite};
use ablate::{InputError, gate};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "ablate",
    version,
    about = "Does this harness component help this model on these tasks, and by how much?"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Run candidate code without the bubblewrap sandbox when it is not available
    /// (recorded in the manifest as isolation: none). Never needed on Linux with bubblewrap.
    #[arg(long, global = true)]
    pub unsandboxed: bool,
    /// The bubblewrap program that sandboxes candidate code [default: bwrap on PATH]
    #[arg(long, global = true, env = "ABLATE_BWRAP", value_name = "PATH", hide_env_values = true)]
    pub bwrap: Option<PathBuf>,
    /// The Python that runs task checks and Python harnesses [default: python3 on PATH, resolved once to the real interpreter]
    #[arg(long, global = true, env = "ABLATE_PYTHON", value_name = "PATH", hide_env_values = true)]
    pub python: Option<PathBuf>,
    /// The container engine of container (Harbor) tasks [default: docker when `docker info` answers, else podman]
    #[arg(
        long,
        global = true,
        env = "ABLATE_ENGINE",
        value_name = "ENGINE",
        hide_env_values = true
    )]
    pub engine: Option<ablate::flags::EngineArg>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Task suites.
    Suite {
        #[command(subcommand)]
        command: SuiteCommand,
    },
    /// Run an experiment: every planned trial, recorded in results/<run-id>/.
    Run(RunArgs),
    /// Analyse a run folder: print the report and write trials.csv, arms.csv,
    /// effects.csv, report.json, report.md and report.html into it.
    Report(ReportArgs),
    /// Put the shard folders of one experiment (`run --shard K/N`) back together as one run
    /// folder, which report, gate, export and run --resume read like any run.
    Merge(MergeArgs),
    /// Per-task baselines for `ablate gate`.
    Baseline {
        #[command(subcommand)]
        command: BaselineCommand,
    },
    /// CI regression gate on pass rate: PASS (exit 0), FAIL (1), INCONCLUSIVE (3); usage error or drift (2).
    Gate(GateArgs),
    /// One typed dataset of many runs' trials, arms or effects (docs/exports.md): Parquet when
    /// FILE ends in .parquet, else CSV. Needs a build with the `polars` feature.
    Export(ExportArgs),
    /// Write a synthetic run folder (for benchmarks and tests of `report`).
    #[command(hide = true)]
    SynthRun(SynthRunArgs),
    /// Print the arms, comparisons and trial plan of a config, without running.
    Plan(PlanArgs),
    /// Bring runs made by another tool into a run folder that report, gate, baseline save and
    /// export read like any run: Harbor job folders or Inspect eval logs (docs/import.md).
    Import(ImportRunArgs),
}

#[derive(Subcommand)]
pub enum SuiteCommand {
    /// Prove every task: the stub fails every test, the solution passes every test.
    Check {
        /// Suite folder (holds suite.toml).
        dir: PathBuf,
    },
    /// Write a suite from a JSONL problems file (plain or gzip): one task folder per line.
    Import(ImportArgs),
}

#[derive(Subcommand)]
pub enum BaselineCommand {
    /// Save the per-task pass counts of one arm and model of a run (commit the file).
    Save(BaselineSaveArgs),
}

// A flag's value is checked by clap as it reads it: the error names the flag
// and exits 2, before any file is read.

/// `--jobs`: at least 1.
fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// `--run-id`: a plain folder name.
fn parse_run_id(s: &str) -> Result<String, String> {
    ablate::record::folder::check_run_id(s).map(|()| s.to_string()).map_err(|e| e.to_string())
}

/// `--trials`: 1 to the config's own limit.
fn parse_trials(s: &str) -> Result<u32, String> {
    let max = ablate::experiment::config::MAX_TRIALS;
    match s.parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be from 1 to {max}")),
    }
}

/// A fraction: `s` parsed as f64 and accepted by `ok`, else `range` is named.
fn fraction(s: &str, ok: impl Fn(f64) -> bool, range: &str, example: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if ok(x) => Ok(x),
        _ => Err(format!("{s} is not in {range}; give a fraction such as {example}")),
    }
}

/// `report --margin`: in (0, 1).
fn parse_margin(s: &str) -> Result<f64, String> {
    fraction(s, |m| m > 0.0 && m < 1.0, "(0, 1)", "0.05")
}

/// `gate --margin`: in [0, 1).
fn parse_gate_margin(s: &str) -> Result<f64, String> {
    fraction(s, |m| (0.0..1.0).contains(&m), "[0, 1)", "0.05")
}

/// `gate --alpha`: in (0, 0.5).
fn parse_alpha(s: &str) -> Result<f64, String> {
    fraction(s, |a| a > 0.0 && a < 0.5, "(0, 0.5)", "0.05")
}

/// `plan --mde`: in (0, 1].
fn parse_mde(s: &str) -> Result<f64, String> {
    fraction(s, |m| m > 0.0 && m <= 1.0, "(0, 1]", "0.10")
}

#[derive(Args)]
pub struct RunArgs {
    /// Experiment config (TOML).
    config: PathBuf,
    /// Trials at once (default: what the embedded model decodes together, 4, when the
    /// experiment uses the local provider; otherwise 1).
    #[arg(long, short = 'j', value_parser = parse_jobs)]
    jobs: Option<usize>,
    /// Run only shard K of N (K/N).
    #[arg(long)]
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
    #[arg(long, conflicts_with = "resume", value_parser = parse_run_id)]
    run_id: Option<String>,
    /// Trials per (task, arm, model), instead of the config's
    /// (a different experiment: its trial ids differ).
    #[arg(long, value_parser = parse_trials)]
    trials: Option<u32>,
    /// Run until decided: the sequential design for this config (tasks in a
    /// seeded order, each comparison stopped once decided; a different
    /// experiment from the fixed one: its trial ids differ; resume with it too).
    #[arg(long)]
    until_decided: bool,
    /// With --resume: go on when a model's identity (GGUF sha256, Ollama
    /// digest) differs from the one the run started with, warning instead
    /// of refusing.
    #[arg(long, requires = "resume")]
    allow_model_change: bool,
    #[command(flatten)]
    engine: ablate::flags::EngineFlags,
}

/// `ablate run`, resolved: the experiment (with `--trials`) and its suite
/// loaded, `--jobs` checked or chosen.
pub struct RunRequest {
    pub exp: Experiment,
    pub suite: Suite,
    pub jobs: usize,
    pub shard: Option<Shard>,
    pub resume: Option<PathBuf>,
    pub results: PathBuf,
    pub plain: bool,
    pub run_id: Option<String>,
    pub allow_model_change: bool,
    pub engine: ablate::model::EngineSettings,
    pub container_engine: Option<ablate::container::EngineKind>,
}

impl RunArgs {
    pub fn resolve(self) -> Result<RunRequest, InputError> {
        let mut exp = config::load(&self.config)?;
        if let Some(n) = self.trials {
            exp.trials = n;
        }
        if self.until_decided && exp.sequential.is_none() {
            exp.sequential = Some(Default::default());
        }
        let engine = self.engine.settings();
        let jobs = match self.jobs {
            Some(n) => n,
            None => ablate::runner::default_jobs(&exp, &engine),
        };
        let suite = exp.load_suite()?;
        Ok(RunRequest {
            exp,
            suite,
            jobs,
            shard: self.shard,
            resume: self.resume,
            results: self.results,
            plain: self.plain,
            run_id: self.run_id,
            allow_model_change: self.allow_model_change,
            engine,
            container_engine: None,
        })
    }
}

#[derive(Args)]
pub struct ReportArgs {
    /// Run folder (results/<run-id>).
    pub run: PathBuf,
    /// No colour, even on a terminal (NO_COLOR is honoured too).
    #[arg(long)]
    pub no_color: bool,
    /// Equivalence margin as a fraction (0.05 = ±5 pp): each effect reads helps / hurts /
    /// equivalent within ±margin / undecided. Printed only; the run's exports keep the
    /// experiment's own margin.
    #[arg(long, value_name = "FRACTION", value_parser = parse_margin)]
    pub margin: Option<f64>,
}

#[derive(Args)]
pub struct MergeArgs {
    /// The merged run folder (must not exist; its name is the run id).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: PathBuf,
    /// Shard folders: one per shard index 1..N.
    #[arg(required = true, value_name = "SHARD_DIR")]
    shards: Vec<PathBuf>,
    /// Merge what exists when shards or trials are missing (the manifest says so).
    #[arg(long)]
    allow_partial: bool,
}

impl MergeArgs {
    /// The shard folders themselves are checked by the merge, which reads them.
    pub fn resolve(self) -> MergeOptions {
        MergeOptions { out: self.output, shards: self.shards, allow_partial: self.allow_partial }
    }
}

#[derive(Args)]
pub struct GateArgs {
    /// A baseline file (`ablate baseline save`) or a run folder.
    #[arg(long)]
    baseline: PathBuf,
    /// The run folder to judge.
    #[arg(long)]
    candidate: PathBuf,
    /// Largest drop in pass rate accepted as non-inferior (0.05 = 5 pp).
    #[arg(long, default_value_t = 0.05, value_parser = parse_gate_margin)]
    margin: f64,
    /// Level of the exact one-sided tests: a drop beyond the margin PASSes in at most alpha of runs.
    #[arg(long, default_value_t = 0.05, value_parser = parse_alpha)]
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
}

impl GateArgs {
    /// `gate::run` checks its options (margin and alpha in range, the files) as its first stage.
    pub fn resolve(self) -> gate::GateOptions {
        let GateArgs {
            baseline,
            candidate,
            margin,
            alpha,
            arm,
            model,
            allow_drift,
            markdown,
            junit,
        } = self;
        gate::GateOptions {
            baseline,
            candidate,
            margin,
            alpha,
            arm,
            model,
            allow_drift,
            markdown,
            junit,
        }
    }
}

#[derive(Args)]
pub struct ExportArgs {
    /// Run folders.
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Output file (.parquet or .csv).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// The table to export.
    #[arg(long, value_enum, default_value = "trials")]
    pub table: ablate::flags::TableArg,
}

#[derive(Args)]
pub struct SynthRunArgs {
    pub config: PathBuf,
    /// At least this many trial records.
    #[arg(long)]
    pub records: usize,
    #[arg(long)]
    pub out: PathBuf,
    /// Seed of the drawn outcomes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Args)]
pub struct PlanArgs {
    /// Experiment config (TOML).
    #[arg(required_unless_present = "pilot")]
    config: Option<PathBuf>,
    /// Show only shard K of N (K/N).
    #[arg(long)]
    shard: Option<Shard>,
    /// Print the plan as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Size the experiment from a pilot run folder instead: trials per
    /// task (or tasks) needed for 80% power on each ablation.
    #[arg(long, value_name = "RUN", requires = "mde")]
    pilot: Option<PathBuf>,
    /// Smallest effect worth detecting, as a fraction (0.10 = 10 pp).
    #[arg(long, value_parser = parse_mde)]
    mde: Option<f64>,
}

/// `ablate plan`, resolved: a config's plan, or the sizing from a pilot run.
#[expect(clippy::large_enum_variant, reason = "made once per command")]
pub enum PlanRequest {
    Plan { exp: Experiment, suite: Suite, plan: Plan, shard: Option<Shard>, json: bool },
    Pilot { data: RunData, mde: f64 },
}

impl PlanArgs {
    pub fn resolve(self) -> Result<PlanRequest, CommandError> {
        if let Some(run) = self.pilot {
            let mde = self.mde.unwrap_or(0.1);
            return Ok(PlanRequest::Pilot { data: load_run(&run)?, mde });
        }
        let config = self.config.expect("clap requires a config without --pilot");
        let exp = config::load(&config)?;
        let suite = exp.load_suite()?;
        let plan = plan::build(&exp, &suite)?;
        Ok(PlanRequest::Plan { exp, suite, plan, shard: self.shard, json: self.json })
    }
}

#[derive(Args)]
pub struct ImportArgs {
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
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ImportFormat {
    Humaneval,
    Jsonl,
}

impl ImportArgs {
    /// The importer checks the source line by line as it reads it.
    pub fn resolve(self) -> suite::import::ImportOptions {
        let format = match self.format {
            ImportFormat::Humaneval => suite::import::Format::HumanEval,
            ImportFormat::Jsonl => suite::import::Format::Jsonl,
        };
        suite::import::ImportOptions {
            format,
            source: self.source,
            out: self.output,
            force: self.force,
            name: self.name,
        }
    }
}

#[derive(Args)]
pub struct BaselineSaveArgs {
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
}

/// `ablate baseline save`, resolved: the arm and model's per-task counts.
pub struct BaselineSave {
    pub rows: Vec<gate::BaselineRow>,
    pub output: PathBuf,
}

impl BaselineSaveArgs {
    pub fn resolve(self) -> Result<BaselineSave, CommandError> {
        let data = load_run(&self.run)?;
        let rows = gate::baseline_of_run(&data, self.arm.as_deref(), self.model.as_deref())
            .map_err(|e| InputError::new(&self.run, e.to_string()))?;
        Ok(BaselineSave { rows, output: self.output })
    }
}

fn load_run(run: &std::path::Path) -> Result<RunData, ReportError> {
    ablate::report::require_manifest(run)?;
    Ok(ablate::report::load::load(run)?)
}

#[derive(Args)]
pub struct ImportRunArgs {
    /// `harbor` (job folders: one folder per trial with config.json and result.json) or
    /// `inspect` (eval logs: `.eval` or `.json`).
    tool: ImportTool,
    /// Harbor job folders, or Inspect log files (or folders of them).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The run folder to write (must not exist, or be empty).
    #[arg(short = 'o', long)]
    output: PathBuf,
    /// A TOML file naming components, arms and comparisons and setting the pass rule (docs/import.md).
    #[arg(long, value_name = "MAP.toml")]
    map: Option<PathBuf>,
    /// Replace a run folder an earlier import wrote at --output.
    #[arg(long)]
    force: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ImportTool {
    Harbor,
    Inspect,
}

impl ImportRunArgs {
    pub fn resolve(self) -> ablate::import::ImportOptions {
        let tool = match self.tool {
            ImportTool::Harbor => ablate::import::Tool::Harbor,
            ImportTool::Inspect => ablate::import::Tool::Inspect,
        };
        ablate::import::ImportOptions {
            tool,
            inputs: self.inputs,
            out: self.output,
            map: self.map,
            force: self.force,
        }
    }
}
