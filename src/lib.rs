//! ablate: ablation benchmarking for LLM agent harnesses.
//!
//! The pipeline of ARCHITECTURE.md, one module per stage: `suite` ->
//! `experiment` (config, matrix) -> `plan` -> `runner` (with `harness`,
//! `model`, `sandbox`, `grader`) writing the `record` (crate `ablate-core`)
//! -> `report` -> `gate` (crate `ablate-report`). This library re-exports both
//! crates' modules under one path; the command line (`main.rs`, `cli`) sits on
//! top. A module uses only those below it in the order that
//! `tests/integration/layers.rs` checks, and the crate boundary makes the
//! compiler hold the cut between the two.

pub use ablate_core::{
    InputError, container, digest, error, experiment, gateway, grader, harness, model, plan,
    record, runner, sandbox, sequential, suite,
};
pub use ablate_report::{export, gate, import, report};

/// The command line's flags for settings the library holds as plain types.
pub mod flags;
