//! The integration tests that need no model, container, CLI agent or Harbor, as one test
//! binary: one link after a change to the library instead of one per file. Each file is a
//! module; `make test-fast` runs each module in a process of its own (scripts/test-fast.py),
//! `cargo test --test integration MODULE::` runs one.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/source.rs"]
mod source;

mod cli;
mod config_matrix;
mod crash;
mod delivery;
mod deploy;
mod design;
mod endpoints;
mod external;
mod external_harness;
mod folders;
mod gate;
mod gateway;
mod grader_layers;
mod grading;
mod hostile;
mod install_deps;
mod layers;
mod measures;
mod merge;
mod plan;
mod properties;
mod report;
mod request_fields;
mod resume;
mod sdk;
mod sequential;
mod snapshots;
mod suite_import;
mod trials;
mod visibility;
