//! ablate's reading of a run's record (ARCHITECTURE.md): the `report` and
//! its statistics, the regression `gate`, the `export` of many runs and the
//! `import` of other tools' runs. It sits on the core crate's `record` and
//! never on its runner.

pub mod export;
pub mod gate;
pub mod import;
pub mod report;

/// The workspace's root folder (its fixtures, configs and docs), for tests.
#[cfg(test)]
pub(crate) fn repo_root() -> &'static std::path::Path {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}
