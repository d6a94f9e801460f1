//! What the runner records about itself in a new run's manifest
//! (`record::RunnerFacts`): the host, the Python the grader runs and the
//! sandbox in force; for the builtin harness, the digests of its texts.

use crate::experiment::config::Experiment;
use crate::harness::prompts;
use crate::record::{HostFacts, RunnerFacts};

pub fn runner_facts(exp: &Experiment) -> RunnerFacts {
    let host = HostFacts {
        os: std::env::consts::OS.to_string(),
        arch: std::env::consts::ARCH.to_string(),
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        hostname: std::fs::read_to_string("/etc/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        python: crate::grader::python().to_string(),
        isolation: crate::sandbox::isolation::current().ok().cloned(),
    };
    // The builtin prompt is recorded for the builtin harness only.
    let builtin_prompts = match exp.harness_kind.is_builtin() {
        true => vec![
            ("builtin".to_string(), crate::digest::sha256_hex(prompts::DEFAULT_SYSTEM.as_bytes())),
            ("builtin-texts".to_string(), prompts::builtin_texts_sha256()),
        ],
        false => Vec::new(),
    };
    RunnerFacts { host, builtin_prompts }
}
