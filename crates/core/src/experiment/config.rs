//! Experiment configuration: TOML in `configs/`, parsed into serde-only raw
//! structs (unknown keys are errors) and converted to a validated `Experiment`.
//! Every error names the file and the key path. `configs/README.md` documents
//! every key.

use super::components::{ArmInput, RawArm};
use super::matrix::{self, Arm, Comparison, RawMatrix};
use crate::digest;
use crate::error::{InputError, parse_toml_str};
use crate::experiment::{
    ArmSettings, ComponentValue, DeclaredComponent, ExternalHarness, HarnessKind, RunsIn,
};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub(crate) use crate::record::design::MAX_BUDGET_SECONDS;
pub use crate::record::design::{Budget, Price, SequentialDesign};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    experiment: RawExperiment,
    budget: Budget,
    #[serde(default)]
    harness: RawHarness,
    #[serde(default)]
    gateway: RawGateway,
    models: Vec<RawModel>,
    /// Read as tables first: the keys an arm may have depend on the harness.
    arms: IndexMap<String, toml::Table>,
    #[serde(default)]
    matrix: RawMatrix,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExperiment {
    name: String,
    #[serde(default)]
    description: String,
    /// Suite folder, relative to the config file's folder.
    suite: String,
    /// Subset of task ids; empty means every task of the suite.
    #[serde(default)]
    tasks: Vec<String>,
    /// Trials per (task, arm, model).
    trials: u32,
    seed: u64,
    #[serde(default = "default_alpha")]
    alpha: f64,
    /// "Equivalent" means |delta| below this (a fraction, 0.05 = 5 pp).
    #[serde(default)]
    margin: Option<f64>,
    /// The outcome the verdicts decide on (the pass rate when absent).
    primary: Option<String>,
    /// Container tasks whose task.toml asks for a public network may have it.
    #[serde(default)]
    allow_network: bool,
    /// Variables of ablate's environment a container task's `env` may name.
    #[serde(default)]
    pass_env: Vec<String>,
    /// When image builds pull the images their Dockerfiles build on.
    #[serde(default)]
    pull: crate::record::design::PullPolicy,
    /// A CA bundle image builds see (read-only, for the build's steps only).
    #[serde(default)]
    build_ca_bundle: Option<PathBuf>,
    /// "fixed" (every planned trial runs) or "sequential" (run until decided).
    #[serde(default)]
    design: RawDesign,
    /// The sequential design's budget: at most this many tasks enter.
    #[serde(default)]
    max_tasks: Option<u32>,
    /// The sequential design's budget: at most this many trials start.
    #[serde(default)]
    max_trials: Option<u64>,
    /// The sequential design's budget: no trial starts once the recorded
    /// trials cost this much (from the models' prices).
    #[serde(default)]
    max_cost_usd: Option<f64>,
    /// The sequential design's budget: no trial starts once the experiment
    /// has run this long (the time covered by its recorded trials).
    #[serde(default)]
    max_seconds: Option<f64>,
    /// The sequential design: re-runs of a trial whose attempt ended in an
    /// infrastructure error (default 2), so that an outage never decides.
    #[serde(default)]
    infra_retries: Option<u32>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RawDesign {
    #[default]
    Fixed,
    Sequential,
}

fn default_alpha() -> f64 {
    0.05
}

pub(crate) const BUDGET_KEYS: [&str; 5] = [
    "max_steps",
    "max_output_tokens_per_step",
    "max_total_tokens",
    "max_working_seconds",
    "max_cost_usd",
];

/// Harness constants shared by every arm (they are outside any component, so
/// they stay fixed across the matrix).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HarnessSettings {
    /// Steps per session; at a boundary the conversation is reset (progress_handoff
    /// decides whether a progress file crosses it).
    pub session_steps: u32,
    /// Bytes of check output tail that feedback and run_tests show the model.
    pub feedback_tail_bytes: usize,
}

impl Default for HarnessSettings {
    fn default() -> Self {
        HarnessSettings { session_steps: 4, feedback_tail_bytes: 1500 }
    }
}

/// `[harness]` as written: the builtin loop's constants, or an external
/// harness (`kind = "external"`) with its command, files and components.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHarness {
    #[serde(default)]
    kind: RawHarnessKind,
    session_steps: Option<u32>,
    feedback_tail_bytes: Option<usize>,
    command: Option<Vec<String>>,
    files: Option<Vec<String>>,
    components: Option<IndexMap<String, Vec<toml::Value>>>,
    runs_in: Option<RunsIn>,
    python: Option<String>,
    mounts: Option<Vec<String>>,
    memory_mb: Option<u64>,
    hosted_tools: Option<crate::record::harness_kind::HostedTools>,
}

/// `[gateway]` as written: the policies of the gateway in front of an external harness.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGateway {
    hosted_tools: Option<crate::record::harness_kind::HostedTools>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RawHarnessKind {
    #[default]
    Builtin,
    External,
}

/// Keys of an external arm besides its components; no component may take these names.
const EXTERNAL_ARM_KEYS: [&str; 3] = ["description", "base", "resources"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// Any OpenAI-compatible `/v1/chat/completions` endpoint.
    Openai,
    /// Ollama's `/api/chat`.
    Ollama,
    /// In-process llama.cpp on a GGUF file.
    Local,
}

impl Provider {
    pub fn name(self) -> &'static str {
        match self {
            Provider::Openai => "openai",
            Provider::Ollama => "ollama",
            Provider::Local => "local",
        }
    }
}

/// How failed model requests are retried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, tag = "backoff", rename_all = "snake_case")]
pub enum RetryPolicy {
    /// No retries.
    None,
    /// Exponential backoff with full jitter; Retry-After wins when given.
    Exponential { max_attempts: u32, base_ms: u64, max_ms: u64 },
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::Exponential { max_attempts: 4, base_ms: 500, max_ms: 30_000 }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    /// Label in plans and reports; defaults to `model`.
    name: Option<String>,
    provider: Provider,
    model: String,
    endpoint: Option<String>,
    api_key_env: Option<String>,
    /// GGUF file for the local provider, relative to the config's folder.
    path: Option<String>,
    temperature: f64,
    #[serde(default = "default_top_p")]
    top_p: f64,
    context_tokens: Option<u32>,
    #[serde(default = "default_request_timeout")]
    request_timeout_seconds: f64,
    price: Option<Price>,
    #[serde(default)]
    retry: RetryPolicy,
    /// Largest reply body read from the endpoint; a larger one is a provider error.
    #[serde(default = "default_max_response_bytes")]
    max_response_bytes: u64,
    /// false: the endpoint ignores reasoning settings (docs/delivery.md).
    #[serde(default = "default_reasoning")]
    reasoning: bool,
}

fn default_reasoning() -> bool {
    true
}

fn default_max_response_bytes() -> u64 {
    DEFAULT_MAX_RESPONSE_BYTES
}

/// The embedded model's context when its spec gives none (`model::local`).
pub(crate) const DEFAULT_LOCAL_CONTEXT_TOKENS: u32 = 4096;

fn default_top_p() -> f64 {
    1.0
}
fn default_request_timeout() -> f64 {
    300.0
}

/// A fixed model: everything needed to call it the same way in every arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    pub name: String,
    pub provider: Provider,
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub endpoint: Option<String>,
    /// Name of the environment variable holding the API key (never its value).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub api_key_env: Option<String>,
    /// GGUF path as written in the config.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path: Option<String>,
    /// GGUF path resolved against the config's folder.
    #[serde(skip)]
    pub resolved_path: Option<PathBuf>,
    pub temperature: f64,
    pub top_p: f64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub context_tokens: Option<u32>,
    pub request_timeout_seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub price: Option<Price>,
    pub retry: RetryPolicy,
    /// Largest reply body read from an HTTP endpoint.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: u64,
    /// Whether the endpoint takes reasoning settings: false, they are not sent
    /// and the delivery record says they did not reach the model (left out of
    /// the record when true, so older runs keep their digests).
    #[serde(default = "default_reasoning", skip_serializing_if = "is_true")]
    pub reasoning: bool,
}

fn is_true(b: &bool) -> bool {
    *b
}

/// A validated experiment: what `plan` expands and `run` executes.
#[derive(Debug, Clone, Serialize)]
pub struct Experiment {
    pub name: String,
    pub description: String,
    /// Suite folder as written in the config.
    pub suite: String,
    #[serde(skip)]
    pub suite_path: PathBuf,
    pub tasks: Vec<String>,
    pub trials: u32,
    pub seed: u64,
    pub alpha: f64,
    /// The equivalence margin: comparisons then say helps, hurts, equivalent within ±margin or undecided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<f64>,
    /// The outcome the verdicts decide on (`Primary`); None: the pass rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<String>,
    /// Container tasks may have the public network their task.toml asks for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_network: bool,
    /// The variables of ablate's environment a container task's `env` tables
    /// may name (`${VAR}`); never a model's key. Names only: values never
    /// reach a record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_env: Vec<String>,
    /// When image builds pull their base images (`missing` unless set).
    #[serde(default, skip_serializing_if = "crate::record::design::PullPolicy::is_missing")]
    pub pull: crate::record::design::PullPolicy,
    /// A CA bundle (e.g. the host's, behind a TLS-intercepting proxy) mounted
    /// read-only over the image's during builds, pip pointed at it; never left
    /// in the image. As written in the config (resolved from its folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_ca_bundle: Option<PathBuf>,
    /// Run until decided (None: the fixed design, every planned trial).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequential: Option<SequentialDesign>,
    pub budget: Budget,
    pub harness: HarnessSettings,
    /// Builtin (left out of the recorded experiment, so builtin configs
    /// keep their digests) or an external harness.
    #[serde(skip_serializing_if = "HarnessKind::is_builtin")]
    pub harness_kind: HarnessKind,
    pub models: Vec<ModelSpec>,
    pub arms: Vec<Arm>,
    pub comparisons: Vec<Comparison>,
    /// A two-level factorial design over components (`[matrix.factorial]`); its runs are arms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factorial: Option<super::factorial::FactorialDesign>,
    /// sha256 of every instructions file the arms use, by path as written.
    pub prompt_digests: IndexMap<String, String>,
    #[serde(skip)]
    pub config_path: PathBuf,
    #[serde(skip)]
    pub config_dir: PathBuf,
    /// sha256 of the config file's bytes.
    #[serde(skip)]
    pub file_digest: String,
}

impl Experiment {
    /// The experiment as the manifest records it (`record::RecordedExperiment`): the text it
    /// serialises to, read back as the record's types. Through text, not a JSON value, so that
    /// the record's maps keep the order written (a value would sort a builtin arm's components).
    pub fn recorded(&self) -> crate::record::RecordedExperiment {
        serde_json::to_string(self)
            .and_then(|text| serde_json::from_str(&text))
            .expect("an experiment reads back as recorded")
    }

    /// The experiment's suite; a folder that holds none is refused naming `experiment.suite`.
    pub fn load_suite(&self) -> Result<crate::suite::Suite, InputError> {
        let p = &self.suite_path;
        if !p.join("suite.toml").is_file() && !crate::suite::is_harbor_dataset(p) {
            return Err(InputError::at(
                &self.config_path,
                "experiment.suite",
                format!(
                    "no task suite at {} (a folder holding suite.toml, or Harbor task folders)",
                    p.display()
                ),
            ));
        }
        let suite = crate::suite::load(p)?;
        self.passed_env(&suite)?;
        Ok(suite)
    }

    /// The variables `pass_env` names that are set, after every task's `env`
    /// is checked to name no other (a variable it names with a default may be
    /// absent): the error names the task's file and key.
    pub fn passed_env(
        &self,
        suite: &crate::suite::Suite,
    ) -> Result<std::collections::BTreeMap<String, String>, InputError> {
        let exp = self;
        let tasks = suite.tasks.iter().filter_map(|t| match &t.kind {
            crate::suite::TaskKind::Python => None,
            crate::suite::TaskKind::Container(c) => Some((t, c)),
        });
        let passed: std::collections::BTreeMap<String, String> = exp
            .pass_env
            .iter()
            .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
            .collect();
        for (t, c) in tasks.filter(|(t, _)| exp.tasks.is_empty() || exp.tasks.contains(&t.id)) {
            for r in c.env_refs().into_iter().filter(|r| !r.has_default) {
                let why = if !exp.pass_env.contains(&r.name) {
                    format!(
                        "needs ${{{}}}, a variable of ablate's environment: name it in pass_env under [experiment] in {} to pass it (a model's key is never passed)",
                        r.name,
                        exp.config_path.display()
                    )
                } else if !passed.contains_key(&r.name) {
                    format!("needs ${{{}}}, which pass_env names but is not set", r.name)
                } else {
                    continue;
                };
                return Err(InputError::at(t.toml_path(), r.key, why));
            }
        }
        Ok(passed)
    }

    /// sha256 of the resolved experiment (canonical JSON of this struct): the
    /// part of trial ids that pins them to this exact experiment. Comments and
    /// key order in the file do not change it; any setting does.
    pub fn config_digest(&self) -> String {
        let json = serde_json::to_string(self).expect("experiment serializes");
        digest::sha256_hex(json.as_bytes())
    }

    pub fn arm(&self, name: &str) -> Option<&Arm> {
        self.arms.iter().find(|a| a.name == name)
    }

    pub fn model(&self, name: &str) -> Option<&ModelSpec> {
        self.models.iter().find(|m| m.name == name)
    }

    /// Resolve a path written in the config against the config's folder.
    pub fn resolve(&self, rel: &str) -> PathBuf {
        self.config_dir.join(rel)
    }
}

/// The most re-runs `experiment.infra_retries` may give one trial.
pub(crate) const MAX_INFRA_RETRIES: u32 = 10;

/// The longest running-time budget of a whole experiment (`experiment.max_seconds`): a year.
pub(crate) const MAX_EXPERIMENT_SECONDS: f64 = 365.0 * 86_400.0;
/// Longest request timeout (and retry backoff): 1 day.
pub(crate) const MAX_TIMEOUT_SECONDS: f64 = 86_400.0;
pub(crate) const MAX_RETRY_ATTEMPTS: u32 = 100;
/// Default cap on a model reply body: 8 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 8 << 20;
/// Largest cap a config may set: 256 MiB.
pub(crate) const MAX_RESPONSE_BYTES_LIMIT: u64 = 256 << 20;

/// A duration in seconds must be finite, above 0 and at most `max`: `inf`,
/// `nan` and `1e300` are valid TOML floats but no usable time.
fn check_seconds(path: &Path, key: &str, v: f64, max: f64) -> Result<(), InputError> {
    if v.is_finite() && v > 0.0 && v <= max {
        return Ok(());
    }
    Err(InputError::at(
        path,
        key,
        format!("{v} is not a duration in (0, {max}] seconds ({} days)", max / 86_400.0),
    ))
}

/// Read, parse and validate a config file.
pub fn load(path: &Path) -> Result<Experiment, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError::new(path, format!("cannot read config: {e}")))?;
    load_str(path, &text)
}

/// The most trials of one task, arm and model an experiment may ask for.
pub const MAX_TRIALS: u32 = 100_000;

pub fn load_str(path: &Path, text: &str) -> Result<Experiment, InputError> {
    reject_arm_budget_keys(path, text)?;
    let raw: RawConfig = parse_toml_str(path, text)?;
    let config_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let config_dir =
        if config_dir.as_os_str().is_empty() { PathBuf::from(".") } else { config_dir };
    let at = |key: &str, msg: String| InputError::at(path, key, msg);

    check_experiment(path, &raw.experiment)?;
    let suite_path = config_dir.join(&raw.experiment.suite);
    let sequential = sequential_design(path, &raw.experiment)?;
    check_budget(path, &raw.budget)?;
    let (harness, harness_kind) = validate_harness(path, &config_dir, raw.harness, raw.gateway)?;
    if harness.session_steps == 0 {
        return Err(at("harness.session_steps", "must be at least 1".into()));
    }

    let models = validate_models(path, &config_dir, raw.models)?;
    check_prices(path, &raw.budget, sequential.as_ref(), &models)?;

    let (arms, prompt_digests) =
        declared_arms(path, &config_dir, raw.arms, &harness_kind, &models)?;
    let (arms, comparisons, factorial) = expand_arms(path, arms, &raw.matrix, &harness_kind)?;
    check_budget_sweep(path, &arms, &models)?;
    check_pass_env(path, &raw.experiment.pass_env, &models)?;

    Ok(Experiment {
        name: raw.experiment.name,
        description: raw.experiment.description,
        suite_path,
        suite: raw.experiment.suite,
        tasks: raw.experiment.tasks,
        trials: raw.experiment.trials,
        seed: raw.experiment.seed,
        alpha: raw.experiment.alpha,
        margin: raw.experiment.margin,
        primary: super::primary::check(path, &raw.experiment.primary)?,
        allow_network: raw.experiment.allow_network,
        pass_env: raw.experiment.pass_env,
        pull: raw.experiment.pull,
        build_ca_bundle: ca_bundle(path, &config_dir, raw.experiment.build_ca_bundle)?,
        sequential,
        budget: raw.budget,
        harness,
        harness_kind,
        models,
        arms,
        comparisons,
        factorial,
        prompt_digests,
        config_path: path.to_path_buf(),
        config_dir,
        file_digest: digest::sha256_hex(text.as_bytes()),
    })
}

/// `[experiment]`: a name, a number of trials, alpha and the margin, each in range.
fn check_experiment(path: &Path, e: &RawExperiment) -> Result<(), InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    if e.name.trim().is_empty() {
        return Err(at("experiment.name", "must not be empty".into()));
    }
    if e.trials == 0 {
        return Err(at("experiment.trials", "must be at least 1".into()));
    }
    if e.trials > MAX_TRIALS {
        return Err(at(
            "experiment.trials",
            format!("{} is more than {MAX_TRIALS} trials of each task, arm and model", e.trials),
        ));
    }
    if !(e.alpha > 0.0 && e.alpha < 0.5) {
        return Err(at("experiment.alpha", format!("{} is not in (0, 0.5)", e.alpha)));
    }
    if let Some(m) = e.margin
        && !(m > 0.0 && m < 1.0)
    {
        return Err(at(
            "experiment.margin",
            format!("{m} is not in (0, 1): the margin is a fraction (0.05 = 5 pp)"),
        ));
    }
    Ok(())
}

/// `experiment.design`: the sequential design and its budget, or None for the fixed design
/// (which refuses the sequential design's keys).
fn sequential_design(
    path: &Path,
    e: &RawExperiment,
) -> Result<Option<SequentialDesign>, InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    let design = match e.design {
        RawDesign::Fixed => {
            if e.max_tasks.is_some() {
                return Err(at("experiment.max_tasks", "is the budget of a sequential design: set design = \"sequential\" or leave it out".into()));
            }
            for (key, set) in [
                ("experiment.max_trials", e.max_trials.is_some()),
                ("experiment.max_cost_usd", e.max_cost_usd.is_some()),
                ("experiment.max_seconds", e.max_seconds.is_some()),
                ("experiment.infra_retries", e.infra_retries.is_some()),
            ] {
                if set {
                    return Err(at(key, "is the budget of a sequential design: set design = \"sequential\" or leave it out".into()));
                }
            }
            None
        }
        RawDesign::Sequential => {
            if e.max_tasks == Some(0) {
                return Err(at("experiment.max_tasks", "must be at least 1".into()));
            }
            if e.max_trials == Some(0) {
                return Err(at("experiment.max_trials", "must be at least 1".into()));
            }
            if let Some(c) = e.max_cost_usd
                && !(c.is_finite() && c > 0.0)
            {
                return Err(at(
                    "experiment.max_cost_usd",
                    format!(
                        "{c} is not a positive finite amount (leave it out for no money limit)"
                    ),
                ));
            }
            if let Some(t) = e.max_seconds {
                check_seconds(path, "experiment.max_seconds", t, MAX_EXPERIMENT_SECONDS)?;
            }
            if let Some(r) = e.infra_retries
                && r > MAX_INFRA_RETRIES
            {
                return Err(at(
                    "experiment.infra_retries",
                    format!("{r} is more than {MAX_INFRA_RETRIES} re-runs of one trial"),
                ));
            }
            Some(SequentialDesign {
                max_tasks: e.max_tasks,
                max_trials: e.max_trials,
                max_cost_usd: e.max_cost_usd,
                max_seconds: e.max_seconds,
                infra_retries: e.infra_retries,
            })
        }
    };
    Ok(design)
}

/// `[budget]`: every limit at least 1, the working time a duration, the money a positive amount.
fn check_budget(path: &Path, b: &Budget) -> Result<(), InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    if b.max_steps == 0 {
        return Err(at("budget.max_steps", "must be at least 1".into()));
    }
    if b.max_output_tokens_per_step == 0 {
        return Err(at("budget.max_output_tokens_per_step", "must be at least 1".into()));
    }
    if b.max_total_tokens == 0 {
        return Err(at("budget.max_total_tokens", "must be at least 1".into()));
    }
    check_seconds(path, "budget.max_working_seconds", b.max_working_seconds, MAX_BUDGET_SECONDS)?;
    if let Some(c) = b.max_cost_usd
        && !(c.is_finite() && c > 0.0)
    {
        return Err(at(
            "budget.max_cost_usd",
            format!("{c} is not a positive finite amount (leave it out for no money limit)"),
        ));
    }
    Ok(())
}

/// A money limit (`budget.max_cost_usd`, `experiment.max_cost_usd`) needs every model's price.
fn check_prices(
    path: &Path,
    b: &Budget,
    sequential: Option<&SequentialDesign>,
    models: &[ModelSpec],
) -> Result<(), InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    if b.max_cost_usd.is_some()
        && let Some((i, m)) = models.iter().enumerate().find(|(_, m)| m.price.is_none())
    {
        return Err(at(
            &format!("models[{i}].price"),
            format!("model `{}` has no price, but budget.max_cost_usd is set", m.name),
        ));
    }
    if sequential.is_some_and(|d| d.max_cost_usd.is_some())
        && let Some((i, m)) = models.iter().enumerate().find(|(_, m)| m.price.is_none())
    {
        return Err(at(
            &format!("models[{i}].price"),
            format!("model `{}` has no price, but experiment.max_cost_usd is set", m.name),
        ));
    }
    Ok(())
}

/// `[arms.NAME]`: each declared arm, and the digests of the instructions files they use.
fn declared_arms(
    path: &Path,
    config_dir: &Path,
    raw_arms: IndexMap<String, toml::Table>,
    harness_kind: &HarnessKind,
    models: &[ModelSpec],
) -> Result<(Vec<Arm>, IndexMap<String, String>), InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    let mut prompt_digests = IndexMap::new();
    // Models whose API cannot start the assistant's turn with a text (only the embedded engine can).
    let without_prefill: Vec<String> = models
        .iter()
        .filter(|m| m.provider != Provider::Local)
        .map(|m| format!("`{}` ({})", m.name, m.provider.name()))
        .collect();
    let mut arms = Vec::new();
    for (name, mut table) in raw_arms {
        let key = format!("arms.{name}");
        if !matrix::is_arm_name(&name) {
            return Err(at(&key, "arm names use lowercase letters, digits, '-' and '_'".into()));
        }
        let resources = arm_resources(path, &key, table.remove("resources"))?;
        let (description, settings) = match harness_kind {
            HarnessKind::Builtin => {
                builtin_arm(path, config_dir, &key, table, &mut prompt_digests, &without_prefill)?
            }
            HarnessKind::External(ext) => external_arm(path, &key, table, ext)?,
            HarnessKind::Imported(_) => {
                return Err(at("harness", "a config cannot name an imported harness".into()));
            }
        };
        let origin = matrix::ArmOrigin::Declared;
        arms.push(Arm { name, description, settings, origin, budget: None, resources });
    }
    if arms.is_empty() {
        return Err(at("arms", "declare at least one arm".into()));
    }

    Ok((arms, prompt_digests))
}

/// The arms after `[matrix]`, the comparisons between them, and the factorial design if any.
type ExpandedArms = (Vec<Arm>, Vec<Comparison>, Option<super::factorial::FactorialDesign>);

/// The declared arms expanded by `[matrix]`: its sweeps, the factorial design, the budget sweep.
fn expand_arms(
    path: &Path,
    arms: Vec<Arm>,
    raw: &RawMatrix,
    harness_kind: &HarnessKind,
) -> Result<ExpandedArms, InputError> {
    let (mut arms, comparisons) = matrix::expand(path, arms, raw, harness_kind)?;
    let factorial = match &raw.factorial {
        Some(_) if raw.budget.is_some() => {
            return Err(super::factorial::refuse_budget_sweep(path));
        }
        Some(f) => Some(super::factorial::expand(path, f, &mut arms, harness_kind)?),
        None => None,
    };
    let (arms, comparisons) = match &raw.budget {
        Some(table) => {
            let sweep = super::budget_sweep::parse(path, table)?;
            super::budget_sweep::apply(path, &sweep, arms, comparisons)?
        }
        None => (arms, comparisons),
    };
    Ok((arms, comparisons, factorial))
}

/// The builtin loop's constants and the harness kind from `[harness]`.
fn validate_harness(
    path: &Path,
    config_dir: &Path,
    raw: RawHarness,
    gateway: RawGateway,
) -> Result<(HarnessSettings, HarnessKind), InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    if raw.hosted_tools.is_some() {
        return Err(at(
            "harness.hosted_tools",
            "the hosted-tool policy is the gateway's: write it as `[gateway] hosted_tools`".into(),
        ));
    }
    let defaults = HarnessSettings::default();
    let settings = HarnessSettings {
        session_steps: raw.session_steps.unwrap_or(defaults.session_steps),
        feedback_tail_bytes: raw.feedback_tail_bytes.unwrap_or(defaults.feedback_tail_bytes),
    };
    if raw.kind == RawHarnessKind::Builtin {
        reject_external_keys(path, &raw, &gateway)?;
        return Ok((settings, HarnessKind::Builtin));
    }
    reject_loop_settings(path, &raw)?;
    let command = harness_command(path, raw.command)?;
    let files = raw.files.unwrap_or_default();
    let files_digest = harness_files_digest(path, config_dir, &files)?;
    let components = declared_components(path, raw.components)?;
    let runs_in = raw.runs_in.unwrap_or_default();
    let python = harness_python(path, config_dir, raw.python)?;
    let mounts = harness_mounts(path, config_dir, raw.mounts)?;
    if let Some(m) = raw.memory_mb.filter(|m| !(64..=1 << 20).contains(m)) {
        return Err(at("harness.memory_mb", format!("{m} is not in [64, 1048576] (MiB)")));
    }
    Ok((
        settings,
        HarnessKind::External(ExternalHarness {
            command,
            files,
            files_digest,
            components,
            runs_in,
            python,
            mounts,
            memory_mb: raw.memory_mb,
            hosted_tools: gateway.hosted_tools.unwrap_or_default(),
        }),
    ))
}

/// The builtin harness refuses the keys of an external one.
fn reject_external_keys(
    path: &Path,
    raw: &RawHarness,
    gateway: &RawGateway,
) -> Result<(), InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    // Each key as the config names it; the message names it within its table.
    for (key, given) in [
        ("harness.command", raw.command.is_some()),
        ("harness.files", raw.files.is_some()),
        ("harness.components", raw.components.is_some()),
        ("harness.runs_in", raw.runs_in.is_some()),
        ("harness.python", raw.python.is_some()),
        ("harness.mounts", raw.mounts.is_some()),
        ("harness.memory_mb", raw.memory_mb.is_some()),
        ("gateway.hosted_tools", gateway.hosted_tools.is_some()),
    ] {
        if given {
            let k = key.strip_prefix("harness.").unwrap_or(key);
            return Err(at(
                key,
                format!(
                    "`{k}` is for an external harness; set harness.kind = \"external\" (the builtin harness has its own components)"
                ),
            ));
        }
    }
    Ok(())
}

/// An external harness refuses the settings of the builtin agent loop.
fn reject_loop_settings(path: &Path, raw: &RawHarness) -> Result<(), InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    for (k, given) in [
        ("session_steps", raw.session_steps.is_some()),
        ("feedback_tail_bytes", raw.feedback_tail_bytes.is_some()),
    ] {
        if given {
            return Err(at(
                &format!("harness.{k}"),
                format!(
                    "`{k}` is a setting of the builtin agent loop; an external harness does not use it"
                ),
            ));
        }
    }
    Ok(())
}

/// `harness.command`: the argv of an external harness, naming a program.
fn harness_command(path: &Path, command: Option<Vec<String>>) -> Result<Vec<String>, InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    let Some(command) = command else {
        return Err(at(
            "harness.command",
            "an external harness needs `command`: the argv run in the trial's workspace, e.g. [\"python3\", \"agent.py\"]".into(),
        ));
    };
    if command.is_empty() || command[0].trim().is_empty() {
        return Err(at(
            "harness.command",
            "must name a program: a non-empty argv whose first element is not empty".into(),
        ));
    }
    Ok(command)
}

/// `harness.files`: the digest of the files (and folders) the harness is made of.
fn harness_files_digest(
    path: &Path,
    config_dir: &Path,
    files: &[String],
) -> Result<String, InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    let mut parts: Vec<(String, String)> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let key = format!("harness.files[{i}]");
        if f.trim().is_empty() {
            return Err(at(&key, "must not be empty".into()));
        }
        let full = config_dir.join(f);
        let meta = std::fs::metadata(&full)
            .map_err(|e| at(&key, format!("cannot read `{}`: {e}", full.display())))?;
        let d = if meta.is_dir() { digest::tree_digest(&full) } else { digest::sha256_file(&full) };
        let d = d.map_err(|e| at(&key, format!("cannot read `{}`: {e}", full.display())))?;
        parts.push((f.clone(), d));
    }
    Ok(digest::digest_parts(parts.iter().map(|(f, d)| (f.as_str(), d.as_str()))))
}

/// `harness.components`: each component an external harness declares, with its values.
fn declared_components(
    path: &Path,
    raw_components: Option<IndexMap<String, Vec<toml::Value>>>,
) -> Result<Vec<DeclaredComponent>, InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    let Some(raw_components) = raw_components else {
        return Err(at(
            "harness.components",
            "an external harness declares its components: components.<name> = [values], e.g. components.feedback = [true, false]".into(),
        ));
    };
    if raw_components.is_empty() {
        return Err(at("harness.components", "declare at least one component".into()));
    }
    let mut components = Vec::new();
    for (name, values) in raw_components {
        let key = format!("harness.components.{name}");
        if !is_component_name(&name) {
            return Err(at(&key, "component names are snake_case: a lowercase letter, then lowercase letters, digits and '_'".into()));
        }
        if EXTERNAL_ARM_KEYS.contains(&name.as_str()) || BUDGET_KEYS.contains(&name.as_str()) {
            return Err(at(
                &key,
                format!("`{name}` is an arm key of its own; name the component otherwise"),
            ));
        }
        let out = component_values(path, &key, &values)?;
        components.push(DeclaredComponent { name, values: out });
    }
    Ok(components)
}

/// `harness.components.NAME`: at least two distinct values, all of one type.
fn component_values(
    path: &Path,
    key: &str,
    values: &[toml::Value],
) -> Result<Vec<ComponentValue>, InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    let mut out: Vec<ComponentValue> = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let vkey = format!("{key}[{i}]");
        let Some(v) = component_value(v) else {
            return Err(at(&vkey, format!("{v} is not a boolean, a string or an integer")));
        };
        if let Some(first) = out.first()
            && value_type(first) != value_type(&v)
        {
            return Err(at(
                &vkey,
                format!(
                    "{v} is a {} but {first} is a {}; the values of a component are of one type",
                    value_type(&v),
                    value_type(first)
                ),
            ));
        }
        if out.contains(&v) {
            return Err(at(&vkey, format!("{v} is listed twice")));
        }
        out.push(v);
    }
    if out.len() < 2 {
        return Err(at(key, "list at least two distinct values (the first is the value of an arm that does not set it)".into()));
    }
    Ok(out)
}

/// What the harness needs of this machine, an interpreter and folders, at an absolute path.
fn absolute_path(
    path: &Path,
    config_dir: &Path,
    key: &str,
    p: &str,
) -> Result<PathBuf, InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    if p.trim().is_empty() {
        return Err(at(key, "must not be empty".into()));
    }
    let full = config_dir.join(p);
    std::path::absolute(&full)
        .map_err(|e| at(key, format!("cannot resolve `{}`: {e}", full.display())))
}

/// `harness.python`: the interpreter, a file, at its absolute path.
fn harness_python(
    path: &Path,
    config_dir: &Path,
    python: Option<String>,
) -> Result<Option<String>, InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    let python = match python {
        None => None,
        Some(p) => {
            let full = absolute_path(path, config_dir, "harness.python", &p)?;
            let meta = std::fs::metadata(&full).map_err(|e| {
                at("harness.python", format!("cannot use `{}`: {e}", full.display()))
            })?;
            if !meta.is_file() {
                return Err(at(
                    "harness.python",
                    format!(
                        "`{}` is not a file: name the interpreter, e.g. \".venv/bin/python\"",
                        full.display()
                    ),
                ));
            }
            Some(full.display().to_string())
        }
    };
    Ok(python)
}

/// `harness.mounts`: folders, at their absolute paths.
fn harness_mounts(
    path: &Path,
    config_dir: &Path,
    raw_mounts: Option<Vec<String>>,
) -> Result<Vec<String>, InputError> {
    let at = |key: &str, msg: String| InputError::at(path, key, msg);
    let mut mounts = Vec::new();
    for (i, m) in raw_mounts.unwrap_or_default().iter().enumerate() {
        let key = format!("harness.mounts[{i}]");
        let full = absolute_path(path, config_dir, &key, m)?;
        let meta = std::fs::metadata(&full)
            .map_err(|e| at(&key, format!("cannot use `{}`: {e}", full.display())))?;
        if !meta.is_dir() {
            return Err(at(
                &key,
                format!(
                    "`{}` is not a folder: mounts are folders, shown read-only at their own paths",
                    full.display()
                ),
            ));
        }
        mounts.push(full.display().to_string());
    }
    Ok(mounts)
}

fn is_component_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// A TOML value as a component value: booleans, strings and integers only.
fn component_value(v: &toml::Value) -> Option<ComponentValue> {
    match v {
        toml::Value::Boolean(b) => Some(ComponentValue::Bool(*b)),
        toml::Value::String(s) => Some(ComponentValue::String(s.clone())),
        toml::Value::Integer(n) => Some(ComponentValue::from(*n)),
        _ => None,
    }
}

fn value_type(v: &ComponentValue) -> &'static str {
    match v {
        ComponentValue::Bool(_) => "boolean",
        ComponentValue::String(_) => "string",
        _ => "integer",
    }
}

/// A builtin arm: a preset and the builtin components it sets.
fn builtin_arm(
    path: &Path,
    config_dir: &Path,
    key: &str,
    table: toml::Table,
    prompt_digests: &mut IndexMap<String, String>,
    without_prefill: &[String],
) -> Result<(String, ArmSettings), InputError> {
    let mut raw_arm: RawArm =
        serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
            InputError::at(path, crate::error::key_at(key, e.path()), e.into_inner().to_string())
        })?;
    let mut at = ArmInput { path, key, config_dir, prompt_digests, without_prefill };
    let description = std::mem::take(&mut raw_arm.description);
    let c = raw_arm.components(&mut at)?;
    Ok((description, ArmSettings::Builtin(c)))
}

/// An external arm: a value for each declared component (the first of its
/// list when the arm does not set it), and a description.
fn external_arm(
    path: &Path,
    key: &str,
    table: toml::Table,
    ext: &ExternalHarness,
) -> Result<(String, ArmSettings), InputError> {
    let mut description = String::new();
    let mut set: IndexMap<String, ComponentValue> = IndexMap::new();
    for (k, v) in table {
        let vkey = format!("{key}.{k}");
        if k == "description" {
            let toml::Value::String(d) = v else {
                return Err(InputError::at(
                    path,
                    vkey,
                    format!("invalid type: {v}, expected a string"),
                ));
            };
            description = d;
            continue;
        }
        if k == "base" {
            return Err(InputError::at(
                path,
                vkey,
                "the presets bare and full are for the builtin harness; an external arm sets its declared components (an unset one takes the first value of its list)",
            ));
        }
        let Some(d) = ext.component(&k) else {
            return Err(InputError::at(
                path,
                vkey,
                format!(
                    "`{k}` is not a component of this harness; declared components: {} (and `description`)",
                    ext.names()
                ),
            ));
        };
        match component_value(&v).filter(|cv| d.values.contains(cv)) {
            Some(cv) => {
                set.insert(k, cv);
            }
            None => {
                return Err(InputError::at(
                    path,
                    vkey,
                    format!(
                        "{v} is not a value of component `{k}`; allowed values: {}",
                        d.allowed()
                    ),
                ));
            }
        }
    }
    let values = ext
        .components
        .iter()
        .map(|d| (d.name.clone(), set.get(&d.name).unwrap_or(d.default_value()).clone()))
        .collect();
    Ok((description, ArmSettings::External(values)))
}

/// `[arms.NAME] resources`: the container resources the arm sets, each in range.
fn arm_resources(
    path: &Path,
    key: &str,
    value: Option<toml::Value>,
) -> Result<matrix::Resources, InputError> {
    let Some(value) = value else { return Ok(matrix::Resources::default()) };
    let key = format!("{key}.resources");
    let r: matrix::Resources = serde_path_to_error::deserialize(value).map_err(|e| {
        InputError::at(path, crate::error::key_at(&key, e.path()), e.into_inner().to_string())
    })?;
    if r.is_empty() {
        return Err(InputError::at(path, key, "sets no resource: cpus, memory_mb or pids"));
    }
    let out_of = |name: &str, msg: String| Err(InputError::at(path, format!("{key}.{name}"), msg));
    if let Some(c) = r.cpus
        && !(c.is_finite() && (0.01..=1024.0).contains(&c))
    {
        return out_of("cpus", format!("{c} is not a number of cpus from 0.01 to 1024"));
    }
    if let Some(m) = r.memory_mb
        && !(16..=1 << 20).contains(&m)
    {
        return out_of("memory_mb", format!("{m} is not from 16 MB to 1 TB"));
    }
    if let Some(p) = r.pids
        && !(16..=1 << 22).contains(&p)
    {
        return out_of("pids", format!("{p} is not from 16 to 4194304 processes"));
    }
    Ok(r)
}

/// A sweep of money needs every model's price. (The plan refuses a sweep with the sequential
/// design, which `--until-decided` may set after this check: `plan::order`.)
fn check_budget_sweep(path: &Path, arms: &[Arm], models: &[ModelSpec]) -> Result<(), InputError> {
    let Some(level) = arms.iter().find_map(|a| a.budget.as_ref().map(|b| b.level)) else {
        return Ok(());
    };
    if level.key == matrix::BudgetKey::MaxCostUsd
        && let Some((i, m)) = models.iter().enumerate().find(|(_, m)| m.price.is_none())
    {
        return Err(InputError::at(
            path,
            format!("models[{i}].price"),
            format!("model `{}` has no price, but matrix.budget sweeps max_cost_usd", m.name),
        ));
    }
    Ok(())
}

/// A budget key inside an arm gets its own message: the budget is
/// experiment-level by design, not a typo.
fn reject_arm_budget_keys(path: &Path, text: &str) -> Result<(), InputError> {
    let Ok(table) = text.parse::<toml::Table>() else { return Ok(()) };
    let Some(toml::Value::Table(arms)) = table.get("arms") else { return Ok(()) };
    for (name, arm) in arms {
        if let toml::Value::Table(arm) = arm {
            for key in arm.keys() {
                if BUDGET_KEYS.contains(&key.as_str()) {
                    return Err(InputError::at(
                        path,
                        format!("arms.{name}.{key}"),
                        "the budget is experiment-level ([budget]); an arm cannot override it",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// `[experiment] build_ca_bundle`: a regular file, resolved from the config's folder.
fn ca_bundle(
    path: &Path,
    config_dir: &Path,
    bundle: Option<PathBuf>,
) -> Result<Option<PathBuf>, InputError> {
    let Some(b) = bundle else { return Ok(None) };
    let full = config_dir.join(&b);
    if !std::fs::metadata(&full).is_ok_and(|m| m.is_file()) {
        return Err(InputError::at(
            path,
            "experiment.build_ca_bundle",
            format!("{} is not a file (a PEM bundle of CA certificates)", full.display()),
        ));
    }
    Ok(Some(full))
}

/// `[experiment] pass_env`: variable names, none of them a model's key.
fn check_pass_env(path: &Path, names: &[String], models: &[ModelSpec]) -> Result<(), InputError> {
    for (i, name) in names.iter().enumerate() {
        let key = format!("experiment.pass_env[{i}]");
        if !crate::suite::is_ascii_name(name) {
            return Err(InputError::at(path, key, format!("`{name}` is not a variable name")));
        }
        if let Some(m) = models.iter().find(|m| m.api_key_env.as_deref() == Some(name.as_str())) {
            return Err(InputError::at(
                path,
                key,
                format!(
                    "`{name}` holds the key of model `{}`: a model's key never reaches a container",
                    m.name
                ),
            ));
        }
    }
    Ok(())
}

fn validate_models(
    path: &Path,
    config_dir: &Path,
    raw: Vec<RawModel>,
) -> Result<Vec<ModelSpec>, InputError> {
    if raw.is_empty() {
        return Err(InputError::at(path, "models", "declare at least one [[models]] entry"));
    }
    let mut out: Vec<ModelSpec> = Vec::new();
    for (i, m) in raw.into_iter().enumerate() {
        let spec = validate_model(path, config_dir, i, m, &out)?;
        out.push(spec);
    }
    Ok(out)
}

/// `models[i]`: one model, checked key by key; `before` are the models declared before it.
fn validate_model(
    path: &Path,
    config_dir: &Path,
    i: usize,
    m: RawModel,
    before: &[ModelSpec],
) -> Result<ModelSpec, InputError> {
    let key = |k: &str| format!("models[{i}].{k}");
    let name = model_name(path, i, &m, before)?;
    check_sampling(path, i, &m)?;
    check_retry(path, i, &m.retry)?;
    check_price(path, i, m.price.as_ref())?;
    if !(1..=MAX_RESPONSE_BYTES_LIMIT).contains(&m.max_response_bytes) {
        return Err(InputError::at(
            path,
            key("max_response_bytes"),
            format!("{} is not in [1, {MAX_RESPONSE_BYTES_LIMIT}]", m.max_response_bytes),
        ));
    }
    let resolved_path = model_location(path, config_dir, i, &m)?;
    Ok(ModelSpec {
        name,
        provider: m.provider,
        model: m.model,
        endpoint: m.endpoint.map(|e| e.trim_end_matches('/').to_string()),
        api_key_env: m.api_key_env,
        path: m.path,
        resolved_path,
        temperature: m.temperature,
        top_p: m.top_p,
        context_tokens: m.context_tokens,
        request_timeout_seconds: m.request_timeout_seconds,
        price: m.price,
        retry: m.retry,
        max_response_bytes: m.max_response_bytes,
        reasoning: m.reasoning,
    })
}

/// `models[i].name` (or its `model`): not empty, and no earlier model's name.
fn model_name(
    path: &Path,
    i: usize,
    m: &RawModel,
    before: &[ModelSpec],
) -> Result<String, InputError> {
    let key = |k: &str| format!("models[{i}].{k}");
    if m.model.trim().is_empty() {
        return Err(InputError::at(path, key("model"), "must not be empty"));
    }
    if m.name.as_ref().is_some_and(|n| n.trim().is_empty()) {
        return Err(InputError::at(
            path,
            key("name"),
            "must not be empty (leave it out to use `model`)",
        ));
    }
    let name = m.name.clone().unwrap_or_else(|| m.model.clone());
    if before.iter().any(|o| o.name == name) {
        return Err(InputError::at(
            path,
            key("name"),
            format!("model name `{name}` is used twice; give each a distinct `name`"),
        ));
    }
    Ok(name)
}

/// `models[i]`'s temperature, top_p and request timeout, each in range.
fn check_sampling(path: &Path, i: usize, m: &RawModel) -> Result<(), InputError> {
    let key = |k: &str| format!("models[{i}].{k}");
    if !(0.0..=2.0).contains(&m.temperature) {
        return Err(InputError::at(
            path,
            key("temperature"),
            format!("{} is not in [0, 2]", m.temperature),
        ));
    }
    if !(m.top_p > 0.0 && m.top_p <= 1.0) {
        return Err(InputError::at(path, key("top_p"), format!("{} is not in (0, 1]", m.top_p)));
    }
    check_seconds(
        path,
        &key("request_timeout_seconds"),
        m.request_timeout_seconds,
        MAX_TIMEOUT_SECONDS,
    )?;
    Ok(())
}

/// `models[i].retry`: an exponential backoff within bounds.
fn check_retry(path: &Path, i: usize, retry: &RetryPolicy) -> Result<(), InputError> {
    let key = |k: &str| format!("models[{i}].{k}");
    if let RetryPolicy::Exponential { max_attempts, base_ms, max_ms } = *retry {
        if max_attempts == 0 || base_ms == 0 || max_ms < base_ms {
            return Err(InputError::at(
                path,
                key("retry"),
                "need max_attempts >= 1 and 0 < base_ms <= max_ms",
            ));
        }
        if max_attempts > MAX_RETRY_ATTEMPTS {
            return Err(InputError::at(
                path,
                key("retry.max_attempts"),
                format!("{max_attempts} is above {MAX_RETRY_ATTEMPTS}"),
            ));
        }
        let max_backoff_ms = (MAX_TIMEOUT_SECONDS * 1000.0) as u64;
        if max_ms > max_backoff_ms {
            return Err(InputError::at(
                path,
                key("retry.max_ms"),
                format!("{max_ms} ms is above one day ({max_backoff_ms} ms)"),
            ));
        }
    }
    Ok(())
}

/// `models[i].price`: every price finite and at least 0.
fn check_price(path: &Path, i: usize, price: Option<&Price>) -> Result<(), InputError> {
    let key = |k: &str| format!("models[{i}].{k}");
    if let Some(p) = price {
        let prices = [
            ("input_per_mtok", Some(p.input_per_mtok)),
            ("output_per_mtok", Some(p.output_per_mtok)),
            ("cached_input_per_mtok", p.cached_input_per_mtok),
        ];
        for (k, v) in prices {
            if let Some(v) = v.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err(InputError::at(
                    path,
                    key(&format!("price.{k}")),
                    format!("{v} is not a finite price of at least 0"),
                ));
            }
        }
    }
    Ok(())
}

/// Where `models[i]` is: an HTTP provider's endpoint (None), or the local provider's GGUF file
/// resolved from the config's folder.
fn model_location(
    path: &Path,
    config_dir: &Path,
    i: usize,
    m: &RawModel,
) -> Result<Option<PathBuf>, InputError> {
    let key = |k: &str| format!("models[{i}].{k}");
    let mut resolved_path = None;
    match m.provider {
        Provider::Openai | Provider::Ollama => {
            let Some(endpoint) = &m.endpoint else {
                return Err(InputError::at(
                    path,
                    key("endpoint"),
                    "an HTTP provider needs an endpoint (base URL)",
                ));
            };
            if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                return Err(InputError::at(
                    path,
                    key("endpoint"),
                    format!("`{endpoint}` is not an http(s) URL"),
                ));
            }
        }
        Provider::Local => {
            let Some(p) = &m.path else {
                return Err(InputError::at(
                    path,
                    key("path"),
                    "the local provider needs the GGUF file's path",
                ));
            };
            resolved_path = Some(config_dir.join(p));
        }
    }
    Ok(resolved_path)
}
