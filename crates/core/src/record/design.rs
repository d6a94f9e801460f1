//! The run's design as the record holds it: the types `manifest.json` writes for the experiment
//! (arms, comparisons, budget, sequential design), the suite's source and the plan's specs and
//! shards. The layers above convert into them (`Experiment::recorded`); the record reads and
//! writes them without knowing the experiment, the suite or the plan.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// The sequential design (`design = "sequential"` or `run --until-decided`):
/// tasks enter in the plan's order, every comparison's confidence sequence is
/// updated after each task, and trials that serve only decided comparisons
/// are not started (`crate::sequential`). The budget of the whole experiment:
/// at most `max_tasks` tasks (default: every task) and `max_trials` trials;
/// no trial starts once the recorded trials cost `max_cost_usd` or cover
/// `max_seconds` of running time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequentialDesign {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tasks: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_trials: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_seconds: Option<f64>,
    /// Re-runs of a trial whose attempt ended in an infrastructure error
    /// (None: `sequential::DEFAULT_INFRA_RETRIES`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra_retries: Option<u32>,
}

impl SequentialDesign {
    /// Re-runs of a trial whose attempt ended in an infrastructure error.
    pub fn retries(&self) -> u32 {
        self.infra_retries.unwrap_or(crate::sequential::DEFAULT_INFRA_RETRIES)
    }
}

/// The experiment-level budget. Every arm gets exactly this; an arm cannot
/// override it. A budget sweep (`[matrix.budget]`) runs every arm again at each of
/// one key's levels: the swept arm carries its [`BudgetLevel`], which
/// [`Budget::at`] applies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Model calls per trial.
    pub max_steps: u32,
    /// max_tokens of each model call.
    pub max_output_tokens_per_step: u32,
    /// Input + output tokens over the whole trial.
    pub max_total_tokens: u64,
    /// Working time of a trial (model calls, checks, tools), excluding time
    /// spent waiting on rate limits.
    pub max_working_seconds: f64,
    /// Money per trial, from the model's prices; absent means no money limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

/// Longest working-time budget of a trial: 7 days.
pub(crate) const MAX_BUDGET_SECONDS: f64 = 7.0 * 86_400.0;

impl Budget {
    /// This budget with one key at a sweep's level.
    pub fn at(&self, level: &BudgetLevel) -> Budget {
        let mut b = self.clone();
        let v = level.value;
        match level.key {
            BudgetKey::MaxSteps => b.max_steps = v as u32,
            BudgetKey::MaxOutputTokensPerStep => b.max_output_tokens_per_step = v as u32,
            BudgetKey::MaxTotalTokens => b.max_total_tokens = v as u64,
            BudgetKey::MaxWorkingSeconds => b.max_working_seconds = v,
            BudgetKey::MaxCostUsd => b.max_cost_usd = Some(v),
        }
        b
    }
}

/// A key of `[budget]` a sweep may vary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKey {
    MaxSteps,
    MaxOutputTokensPerStep,
    MaxTotalTokens,
    MaxWorkingSeconds,
    MaxCostUsd,
}

impl BudgetKey {
    pub const ALL: [BudgetKey; 5] = [
        BudgetKey::MaxSteps,
        BudgetKey::MaxOutputTokensPerStep,
        BudgetKey::MaxTotalTokens,
        BudgetKey::MaxWorkingSeconds,
        BudgetKey::MaxCostUsd,
    ];

    /// The key as `[budget]` writes it.
    pub fn name(self) -> &'static str {
        match self {
            BudgetKey::MaxSteps => "max_steps",
            BudgetKey::MaxOutputTokensPerStep => "max_output_tokens_per_step",
            BudgetKey::MaxTotalTokens => "max_total_tokens",
            BudgetKey::MaxWorkingSeconds => "max_working_seconds",
            BudgetKey::MaxCostUsd => "max_cost_usd",
        }
    }

    /// What a level counts, in a swept arm's name and in sentences: `4000 tokens`.
    pub fn unit(self) -> &'static str {
        match self {
            BudgetKey::MaxSteps => "steps",
            BudgetKey::MaxOutputTokensPerStep => "step-tokens",
            BudgetKey::MaxTotalTokens => "tokens",
            BudgetKey::MaxWorkingSeconds => "seconds",
            BudgetKey::MaxCostUsd => "usd",
        }
    }

    /// Whether the key's levels are whole numbers (all but seconds and money).
    pub(crate) fn is_integer(self) -> bool {
        !matches!(self, BudgetKey::MaxWorkingSeconds | BudgetKey::MaxCostUsd)
    }

    pub fn parse(name: &str) -> Option<BudgetKey> {
        BudgetKey::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// One level of a budget sweep: the key and its value there.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetLevel {
    pub key: BudgetKey,
    pub value: f64,
}

impl BudgetLevel {
    /// The value as written (`4000`, `0.5`).
    pub fn value_text(&self) -> String {
        format!("{}", self.value)
    }
}

impl std::fmt::Display for BudgetLevel {
    /// `4000 tokens`, `1 step`, `0.5 usd`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = self.key.unit();
        let unit = if self.value == 1.0 { unit.strip_suffix('s').unwrap_or(unit) } else { unit };
        write!(f, "{} {unit}", self.value_text())
    }
}

/// An arm or comparison a budget sweep made: the arm or comparison it repeats (`of`) at a level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AtBudget {
    pub of: String,
    pub level: BudgetLevel,
}

/// The container resources an arm sets (`[arms.NAME] resources`), over the task's and the
/// suite's: a resource so set is ablated like a component (`resources.cpus`, ...), and a
/// comparison of arms that set different ones is about them. Container tasks only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
}

impl Resources {
    pub fn is_empty(&self) -> bool {
        *self == Resources::default()
    }

    /// Each resource as a component: its name (`resources.cpus`) and its value as text, None when
    /// the arm leaves it to the task and the suite.
    pub fn entries(&self) -> [(&'static str, Option<String>); 3] {
        [
            ("resources.cpus", self.cpus.map(|c| c.to_string())),
            ("resources.memory_mb", self.memory_mb.map(|m| m.to_string())),
            ("resources.pids", self.pids.map(|p| p.to_string())),
        ]
    }

    /// [`Resources::entries`] with an unset one as `the task's`.
    pub fn values(&self) -> [(&'static str, String); 3] {
        self.entries().map(|(name, v)| (name, v.unwrap_or_else(|| "the task's".to_string())))
    }

    /// The resources that differ between two arms, as components.
    pub fn diff(&self, other: &Resources) -> Vec<ComponentDiff> {
        self.values()
            .into_iter()
            .zip(other.values())
            .filter(|(a, b)| a.1 != b.1)
            .map(|((name, control), (_, treatment))| ComponentDiff {
                component: name.to_string(),
                control,
                treatment,
            })
            .collect()
    }
}

/// Prices in USD per million tokens, for the money budget and cost columns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    #[serde(default)]
    pub cached_input_per_mtok: Option<f64>,
}

/// One component whose value differs between two arms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentDiff {
    /// The component's name: a builtin one (`feedback`) or one an external
    /// harness declares.
    pub component: String,
    pub control: String,
    pub treatment: String,
}

/// The value of a component an external harness declares: a boolean, a
/// string or an integer (as written in the config).
pub type ComponentValue = serde_json::Value;

/// A component value as text: `true`, `map`, `3` (strings without quotes).
pub fn value_text(v: &ComponentValue) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Where an arm came from: the config, or a sweep of the matrix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ArmOrigin {
    Declared,
    LeaveOneOut {
        from: String,
        component: String,
    },
    AddOneIn {
        from: String,
        component: String,
    },
    /// A run of `[matrix.factorial]` from the arm `from`.
    Factorial {
        from: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ComparisonKind {
    /// Exactly one component differs: the effect is attributable to it.
    Ablation { component: String },
    /// Several components differ: not attributable to one component.
    Combined,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ComparisonOrigin {
    LeaveOneOut,
    AddOneIn,
    Pair,
    Combined,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    pub name: String,
    pub control: String,
    pub treatment: String,
    pub kind: ComparisonKind,
    pub origin: ComparisonOrigin,
    /// Every component that differs between control and treatment.
    pub differs: Vec<ComponentDiff>,
    /// The comparison a budget sweep repeats at one level (both arms at it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<AtBudget>,
}

impl Comparison {
    pub fn is_ablation(&self) -> bool {
        matches!(self.kind, ComparisonKind::Ablation { .. })
    }
}

/// The source of an imported suite, as `suite.toml` records it. The suite
/// digest covers `suite.toml`, so it changes with the source file and with
/// the importer version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteSource {
    /// The source file's name when imported.
    pub file: String,
    /// sha256 of the source file's bytes (compressed, as fetched).
    pub sha256: String,
    /// The importer: `humaneval` or `jsonl`.
    pub importer: String,
    pub importer_version: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TrialSpec {
    pub id: String,
    /// Position in the execution order (0-based).
    pub order: u32,
    pub task: String,
    pub arm: String,
    pub model: String,
    /// Repeat index within (task, arm, model), 0-based.
    pub repeat: u32,
    /// Sampling seed sent to the model.
    pub seed: u64,
}

/// A deterministic part of the plan: `K/N` takes every trial whose position
/// in the execution order is K-1 modulo N (in the sequential design, every
/// trial of each task whose position in the task order is K-1 modulo N).
/// Every trial is in exactly one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1-based.
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// Whether position `at` (0-based, of the trial order or, in the
    /// sequential design, of the task order) is this shard's: K-1 modulo N.
    pub(crate) fn owns(&self, at: usize) -> bool {
        at % self.count as usize == self.index as usize - 1
    }
}

/// An arm as the manifest records it: its name, and the value of each of its components by the
/// component's name, under `components` (the builtin harness, whose registry reads them back:
/// `experiment::Arm::from_recorded`) or `values` (an external or imported harness's declared
/// components).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedArm {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(flatten)]
    pub settings: RecordedSettings,
    pub origin: ArmOrigin,
    /// The arm a budget sweep repeats at one level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<AtBudget>,
    /// The container resources the arm sets.
    #[serde(default, skip_serializing_if = "Resources::is_empty")]
    pub resources: Resources,
}

/// A recorded arm's component values by name: the builtin components' or an external harness's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RecordedSettings {
    #[serde(rename = "components")]
    Builtin(IndexMap<String, ComponentValue>),
    #[serde(rename = "values")]
    External(IndexMap<String, ComponentValue>),
}

/// When an image build pulls the images its Dockerfile builds on
/// (`[experiment] pull`; docs/harbor.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PullPolicy {
    /// Never: a base image the engine lacks is refused by name before any trial.
    Never,
    /// When the engine lacks it (docker's default).
    #[default]
    Missing,
    /// Every build asks the registry for a newer one.
    Always,
}

impl PullPolicy {
    pub fn name(self) -> &'static str {
        match self {
            PullPolicy::Never => "never",
            PullPolicy::Missing => "missing",
            PullPolicy::Always => "always",
        }
    }

    pub fn is_missing(&self) -> bool {
        *self == PullPolicy::Missing
    }
}

/// A two-level factorial design over named components (`[matrix.factorial]`,
/// `experiment::factorial`): every run is an arm that sets each factor's component to its low or
/// high value and keeps the rest of `from`. A fractional design's generated factors are products
/// of base factors (`generators`); the design's algebra (its defining relation, resolution and
/// aliases) is `experiment::factorial`'s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactorialDesign {
    /// The arm whose other components every run keeps.
    pub from: String,
    pub factors: Vec<Factor>,
    /// Each generated factor as a product of base factors; empty: the full design.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generators: Vec<Generator>,
    /// The runs, in standard order: each an arm and each factor's level.
    pub runs: Vec<FactorialRun>,
}

/// A factor: a component and its two values as text (`low` is "off", `high` is "on").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Factor {
    pub component: String,
    pub low: String,
    pub high: String,
}

/// A generated factor (its index in `factors`) and the base factors whose product sets it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generator {
    pub factor: usize,
    pub product: Vec<usize>,
}

/// A run of the design: its arm, and each factor at its high value (`true`) or low.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactorialRun {
    pub arm: String,
    pub high: Vec<bool>,
}
