//! ablate's pipeline up to the record, one module per stage (ARCHITECTURE.md):
//! `suite` -> `experiment` (config, matrix) -> `plan` -> `runner` (with
//! `harness`, `model`, `sandbox`, `grader`) writing the `record`. The report
//! crate reads the record; a module uses only those below it in the layers
//! block that `tests/integration/layers.rs` checks.

pub mod container;
pub mod digest;
pub mod error;
pub mod experiment;
pub mod gateway;
pub mod grader;
pub mod harness;
pub mod model;
pub mod plan;
pub mod record;
pub mod runner;
pub mod sandbox;
pub mod sequential;
pub mod suite;

pub use error::InputError;

/// The workspace's root folder (its fixtures, configs and docs), for tests.
#[cfg(test)]
pub(crate) fn repo_root() -> &'static std::path::Path {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}
