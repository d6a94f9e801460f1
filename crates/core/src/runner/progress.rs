//! The progress reporter: an indicatif bar on stderr when it is a terminal,
//! plain lines otherwise, nothing when quiet; warnings above the bar.

use crate::record::events::{Event, Reporter};
use crate::record::{TrialRecord, TrialStatus};
use crate::sequential::DecidedComparison;
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
    bar: Mutex<Option<ProgressBar>>,
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
    pub fn new(mode: ProgressMode) -> Progress {
        Progress {
            bar: Mutex::new(None),
            mode,
            state: Mutex::new(State { done: 0, total: 0, passed: 0, errors: 0 }),
            start: Instant::now(),
        }
    }

    fn started(&self, total: u64, already_done: u64) {
        let bar = (self.mode == ProgressMode::Auto && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} trials  {msg}  ETA {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_position(already_done);
            bar
        });
        *self.bar.lock().unwrap() = bar;
        *self.state.lock().unwrap() = State { done: already_done, total, passed: 0, errors: 0 };
    }

    fn trial_done(&self, r: &TrialRecord) {
        let mut s = self.state.lock().unwrap();
        s.done += 1;
        if r.status == TrialStatus::Passed {
            s.passed += 1;
        }
        if r.status.is_infrastructure_error() {
            s.errors += 1;
        }
        let msg = format!("{} passed, {} errors", s.passed, s.errors);
        match (&*self.bar.lock().unwrap(), self.mode) {
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

    /// A warning: above the bar on a terminal (printing around it would tear
    /// it), a plain line otherwise; shown even when quiet.
    fn warn(&self, message: &str) {
        match &*self.bar.lock().unwrap() {
            Some(bar) => bar.suspend(|| eprintln!("warning: {message}")),
            None => eprintln!("warning: {message}"),
        }
    }

    /// What the run states as it starts: a plain line (not when quiet).
    fn note(&self, message: &str) {
        if self.mode != ProgressMode::Quiet {
            eprintln!("{message}");
        }
    }

    /// A sequential run's decision: a line above the bar, or a plain line (not when quiet).
    fn decided(&self, decided: &DecidedComparison) {
        let message = decision_line(decided);
        match (&*self.bar.lock().unwrap(), self.mode) {
            (Some(bar), _) => bar.suspend(|| eprintln!("decided: {message}")),
            (None, ProgressMode::Quiet) => {}
            (None, _) => eprintln!("decided: {message}"),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &*self.bar.lock().unwrap() {
            bar.finish();
        }
    }
}

/// A decided comparison as the progress writes it: "NAME on MODEL: DECISION after N tasks".
fn decision_line(d: &DecidedComparison) -> String {
    format!("{} on {}: {} after {} tasks", d.name, d.model, d.decision.name(), d.tasks)
}

impl Reporter for Progress {
    fn report(&self, event: &Event<'_>) {
        match event {
            Event::Started { planned, already, .. } => self.started(*planned, *already),
            Event::TrialFinished(r) => self.trial_done(r),
            Event::Warning(m) => self.warn(m),
            Event::Note(m) => self.note(m),
            Event::Decided(d) => self.decided(d),
            Event::Finished { .. } => self.finish(),
        }
    }
}
