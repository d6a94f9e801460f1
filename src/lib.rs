//! ablate: ablation benchmarking for LLM agent harnesses.
//!
//! The crate mirrors the pipeline of ARCHITECTURE.md, one module per stage:
//! `suite` -> `experiment` (config, matrix) -> `plan` -> `runner` (with `harness`,
//! `model`, `sandbox`, `grader`) writing the `record` -> `report` -> `gate`.
//! A module uses only those above it in `tests/layers.rs`'s order.

pub mod container;
pub mod digest;
pub mod error;
pub mod experiment;
pub mod export;
pub mod gate;
pub mod gateway;
pub mod grader;
pub mod harness;
pub mod import;
pub mod model;
pub mod plan;
pub mod record;
pub mod report;
pub mod runner;
pub mod sandbox;
pub mod sequential;
pub mod suite;

pub use error::InputError;
