//! What a run says as it goes. The runner emits events; reporters consume
//! them (nextest-style), each given in `RunOptions::reporters`: the progress
//! bar or lines (`runner::progress`), the exports kept current and written at
//! the end (`report::live`), or any other. The runner never prints and never
//! writes anything but its records. The events live with the records, below
//! both the runner and the report, so neither needs the other.

use crate::record::TrialRecord;
use crate::sequential::DecidedComparison;
use std::path::Path;
use std::sync::Arc;

/// One thing that happened in a run, in the order it happened.
#[derive(Debug)]
pub enum Event<'a> {
    /// Trials are about to run in the run folder `dir`: `planned` in the run,
    /// `already` recorded before (a resume).
    Started { dir: &'a Path, planned: u64, already: u64 },
    /// An attempt ended and its record was written.
    TrialFinished(&'a TrialRecord),
    /// Something the user should know that does not stop the run.
    Warning(&'a str),
    /// What the run states as it starts (the images' pull policy).
    Note(&'a str),
    /// A sequential run decided a comparison (its trials are no longer started).
    Decided(&'a DecidedComparison),
    /// No more trials will run: all done, or `interrupted` (Ctrl-C; trials under
    /// way were stopped). The run's lock is still held.
    Finished { interrupted: bool },
}

/// A consumer of a run's events. Called from the runner's tasks: keep it quick.
pub trait Reporter: Send + Sync {
    fn report(&self, event: &Event<'_>);
}

/// The reporters of one run, each given every event.
#[derive(Clone, Default)]
pub struct Reporters(Vec<Arc<dyn Reporter>>);

impl Reporters {
    pub fn new(reporters: Vec<Arc<dyn Reporter>>) -> Reporters {
        Reporters(reporters)
    }

    pub fn emit(&self, event: &Event<'_>) {
        for r in &self.0 {
            r.report(event);
        }
    }

    pub fn warn(&self, message: &str) {
        self.emit(&Event::Warning(message));
    }

    pub fn note(&self, message: &str) {
        self.emit(&Event::Note(message));
    }
}
