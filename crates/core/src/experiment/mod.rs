//! The experiment: what a config file asks for, validated, before anything
//! runs. `config` reads the TOML into an `Experiment`; `components` are the
//! settings of a builtin arm and `harness_kind` says which harness runs the
//! arms (the builtin loop or an external command with its declared
//! components); `instructions` reads an arm's prompt file; `matrix` expands
//! the sweeps into arms and comparisons and guards that each ablation differs
//! in one component; `budget_sweep` repeats every arm and comparison at each
//! level of a `[matrix.budget]` key. Later stages (plan, runner, harness, record, report)
//! read these types; this module reads none of theirs.

pub mod budget_sweep;
pub mod components;
pub mod config;
pub mod factorial;
pub mod instructions;
pub mod matrix;
pub mod primary;

pub use crate::record::harness_kind::{
    DeclaredComponent, ExternalHarness, HarnessKind, ImportedHarness, RunsIn,
};
pub use components::{
    ArmSettings, Component, ComponentDiff, ComponentValue, Components, EditFormat, Instructions,
    value_text,
};
