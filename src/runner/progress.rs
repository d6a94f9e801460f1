//! Progress on stderr: an indicatif bar on a terminal, plain lines otherwise.

use crate::record::{TrialRecord, TrialStatus};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar when stderr is a terminal, lines otherwise.
    Auto,
    Lines,
    Quiet,
}

pub struct Progress {
    bar: Option<ProgressBar>,
    mode: ProgressMode,
    state: Mutex<State>,
    start: Instant,
}

struct State {
    done: u64,
    total: u64,
    passed: u64,
    errors: u64,
}

impl Progress {
    pub fn new(mode: ProgressMode, total: u64, already_done: u64) -> Progress {
        let bar = (mode == ProgressMode::Auto && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} trials  {msg}  ETA {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_position(already_done);
            bar
        });
        Progress { bar, mode, state: Mutex::new(State { done: already_done, total, passed: 0, errors: 0 }), start: Instant::now() }
    }

    pub fn trial_done(&self, r: &TrialRecord) {
        let mut s = self.state.lock().unwrap();
        s.done += 1;
        if r.status == TrialStatus::Passed {
            s.passed += 1;
        }
        if r.status.is_infrastructure_error() {
            s.errors += 1;
        }
        let msg = format!("{} passed, {} errors", s.passed, s.errors);
        match (&self.bar, self.mode) {
            (Some(bar), _) => {
                bar.set_position(s.done);
                bar.set_message(msg);
            }
            (None, ProgressMode::Quiet) => {}
            (None, _) => {
                eprintln!(
                    "[{}/{}] {:<16} {} / {} / {} / r{}  {}/{} tests, {} steps, {:.1} s  ({msg}, {:.0} s elapsed)",
                    s.done,
                    s.total,
                    r.status.name(),
                    r.task,
                    r.arm,
                    r.model,
                    r.repeat,
                    r.tests_passed,
                    r.tests_total,
                    r.steps,
                    r.wall_seconds,
                    self.start.elapsed().as_secs_f64()
                );
            }
        }
    }

    /// A warning during the run: above the bar on a terminal (printing
    /// around it would tear it), a plain line otherwise.
    pub fn warn(&self, message: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("warning: {message}")),
            None => eprintln!("warning: {message}"),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
