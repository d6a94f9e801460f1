//! The exports of a run kept current while it runs: a reporter of the run's
//! events (`record::events`) that rewrites every export after trials finish,
//! and writes them a last time when the run ends, while the run still holds
//! its folder's lock.
//!
//! The rewrites happen on a thread of the reporter's own, so neither the
//! runner's tasks nor the progress wait for them. After a trial, the exports
//! are rewritten once at least max(2 s, 10 x the last rewrite) has passed: a
//! long run costs little and a crash loses at most that window. Trials that
//! finish while a rewrite is under way are covered by the next one.

use super::analysis::Report;
use ablate_core::record::events::{Event, Reporter, Reporters};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the last export of a run gives the caller to print.
#[derive(Debug)]
pub struct FinalExports {
    /// The analysis whose exports were written, or why they could not be.
    pub report: Result<Report, super::ReportError>,
    /// The counts per arm and model (`summary::render`), drawn from the
    /// same read of the folder; None when it could not be read.
    pub summary: Option<String>,
}

/// Why a run has no final export to hand over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoFinalExport {
    #[error("the run wrote no records")]
    NoRecords,
    #[error("the run ended before its final export")]
    EndedEarly,
    #[error("the exports' thread panicked")]
    Panicked,
}

enum Message {
    TrialFinished,
    /// The run ended: write the final exports (unless interrupted) and stop.
    Finished {
        interrupted: bool,
    },
}

/// Give it to `RunOptions::reporters`; after the run, `finish` waits for the
/// final exports. Warnings (a rewrite that failed during the run) go to `warn`.
pub struct LiveExports {
    warn: Reporters,
    sender: Mutex<Option<Sender<Message>>>,
    worker: Mutex<Option<JoinHandle<Option<FinalExports>>>>,
}

impl LiveExports {
    pub fn new(warn: Reporters) -> LiveExports {
        LiveExports { warn, sender: Mutex::new(None), worker: Mutex::new(None) }
    }

    /// Wait for the final exports of the run that ended. Err when the run
    /// never started or was interrupted (no final export was written).
    pub fn finish(&self) -> Result<FinalExports, NoFinalExport> {
        // A sender left (no Finished seen) is dropped, which stops the worker.
        drop(self.sender.lock().unwrap().take());
        let worker = self.worker.lock().unwrap().take().ok_or(NoFinalExport::NoRecords)?;
        match worker.join() {
            Ok(Some(done)) => Ok(done),
            Ok(None) => Err(NoFinalExport::EndedEarly),
            Err(_) => Err(NoFinalExport::Panicked),
        }
    }

    fn send(&self, message: Message) {
        if let Some(tx) = &*self.sender.lock().unwrap() {
            let _ = tx.send(message);
        }
    }
}

impl Reporter for LiveExports {
    fn report(&self, event: &Event<'_>) {
        match event {
            Event::Started { dir, planned, already } => {
                let (tx, rx) = channel();
                let job = Job {
                    dir: dir.to_path_buf(),
                    planned: *planned,
                    already: *already,
                    warn: self.warn.clone(),
                };
                match std::thread::Builder::new().name("exports".into()).spawn(move || job.serve(rx)) {
                    Ok(handle) => {
                        *self.sender.lock().unwrap() = Some(tx);
                        *self.worker.lock().unwrap() = Some(handle);
                    }
                    Err(e) => self.warn.warn(&format!("cannot start the exports' thread: {e}; the exports are written by `ablate report`")),
                }
            }
            Event::TrialFinished(_) => self.send(Message::TrialFinished),
            Event::Warning(_) | Event::Note(_) | Event::Decided(_) => {}
            Event::Finished { interrupted } => {
                self.send(Message::Finished { interrupted: *interrupted });
                drop(self.sender.lock().unwrap().take());
            }
        }
    }
}

struct Job {
    dir: PathBuf,
    planned: u64,
    /// Trials with a final record when the run started.
    already: u64,
    warn: Reporters,
}

impl Job {
    fn serve(self, rx: Receiver<Message>) -> Option<FinalExports> {
        let mut last: Option<Instant> = None;
        let mut took = Duration::ZERO;
        while let Ok(mut message) = rx.recv() {
            // Trials that finished during the last rewrite need one rewrite, not one each.
            while matches!(message, Message::TrialFinished) {
                match rx.try_recv() {
                    Ok(next) => message = next,
                    Err(_) => break,
                }
            }
            match message {
                Message::TrialFinished => {
                    if last.is_some_and(|t| t.elapsed() < (took * 10).max(Duration::from_secs(2))) {
                        continue;
                    }
                    let start = Instant::now();
                    let written = export(&self.dir, |_| ());
                    took = start.elapsed();
                    last = Some(Instant::now());
                    if let Err(e) = written {
                        // The records are intact; only the derived files are stale.
                        self.warn.warn(&e.to_string());
                    }
                }
                Message::Finished { interrupted: true } => return None,
                Message::Finished { interrupted: false } => {
                    let (planned, already) = (self.planned, self.already);
                    return Some(
                        match export(&self.dir, |data| {
                            super::summary::render(data, planned, already)
                        }) {
                            Ok((report, summary)) => {
                                FinalExports { report: Ok(report), summary: Some(summary) }
                            }
                            Err(e) => FinalExports { report: Err(e), summary: None },
                        },
                    );
                }
            }
        }
        None
    }
}

/// One rewrite of every export (`report_dir_with`).
fn export<T>(
    dir: &Path,
    with: impl FnOnce(&super::load::RunData) -> T,
) -> Result<(Report, T), super::ReportError> {
    let result = super::report_dir_with(dir, with);
    // The analysis freed its rows, but glibc keeps freed memory in the arena
    // of the thread that used it: hand it back now (benches/run-memory.sh at
    // 100,000 trials: resume peak 29-34 MB with this, 37 MB without).
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic run folder of `configs/core.toml`'s `full` arm, every
    /// trial passed, and a reporter told that it started with `already`
    /// trials recorded: (its temporary home, the folder, records, reporter).
    fn started(trials: u32, already: u64) -> (tempfile::TempDir, PathBuf, usize, LiveExports) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let n = folder(&dir, trials);
        let live = LiveExports::new(Reporters::default());
        live.report(&Event::Started { dir: &dir, planned: n as u64, already });
        (tmp, dir, n, live)
    }

    fn folder(dir: &Path, trials: u32) -> usize {
        let cfg = crate::repo_root().join("configs/core.toml");
        let mut exp = ablate_core::experiment::config::load(&cfg).unwrap();
        exp.trials = trials;
        exp.arms.retain(|a| a.name == "full");
        exp.comparisons.clear();
        let suite = ablate_core::suite::load(&exp.suite_path).unwrap();
        let plan = ablate_core::plan::build(&exp, &suite).unwrap();
        ablate_synth::write_run(dir, &exp, &suite, &plan, 1, |_, _| 1.0).unwrap()
    }

    #[test]
    fn the_final_exports_are_written_when_the_run_finishes_and_handed_over() {
        let (_tmp, dir, n, live) = started(2, 1);
        live.report(&Event::Finished { interrupted: false });
        let done = live.finish().expect("the final export");
        let report = done.report.expect("written");
        assert_eq!((report.planned_trials, report.recorded_trials), (n, n));
        assert_eq!(report.arms.len(), 1);
        assert_eq!(report.arms[0].pass_rate.mean, 1.0, "every synthetic trial passed");
        let summary = done.summary.expect("the counts");
        // Run now: recorded - already.
        assert!(
            summary.starts_with(&format!(
                "{n} of {n} planned trials recorded ({} run now, 0 interrupted attempts)\n",
                n - 1
            )),
            "{summary}"
        );
        for f in
            ["trials.csv", "arms.csv", "effects.csv", "report.json", "report.md", "report.html"]
        {
            assert!(dir.join(f).is_file(), "{f} written");
        }
        // One line per record in trials.csv, plus its header.
        assert_eq!(std::fs::read_to_string(dir.join("trials.csv")).unwrap().lines().count(), n + 1);
    }

    /// A run that ends before its plan (a sequential run decided, or out of
    /// budget) ran what it recorded, not what it planned.
    #[test]
    fn the_counts_of_a_run_that_stopped_early_say_what_ran() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let n = folder(&dir, 2);
        let live = LiveExports::new(Reporters::default());
        live.report(&Event::Started { dir: &dir, planned: n as u64 + 5, already: 1 });
        live.report(&Event::Finished { interrupted: false });
        let summary = live.finish().unwrap().summary.expect("the counts");
        assert!(
            summary.starts_with(&format!(
                "{n} of {} planned trials recorded ({} run now, 0 interrupted attempts)\n",
                n + 5,
                n - 1
            )),
            "{summary}"
        );
    }

    #[test]
    fn an_interrupted_run_gets_no_final_export_and_says_so() {
        let (_tmp, dir, _, live) = started(1, 0);
        live.report(&Event::Finished { interrupted: true });
        assert_eq!(live.finish().unwrap_err().to_string(), "the run ended before its final export");
        assert!(!dir.join("report.json").exists(), "nothing written: no trial finished");
        // A reporter never started has nothing to hand over.
        assert_eq!(
            LiveExports::new(Reporters::default()).finish().unwrap_err().to_string(),
            "the run wrote no records"
        );
    }

    #[test]
    fn a_finished_trial_rewrites_the_exports_once_the_clock_allows() {
        let (_tmp, dir, _, live) = started(1, 0);
        let rec = ablate_core::record::jsonl::read::<ablate_core::record::TrialRecord>(
            &dir.join("trials.jsonl"),
        )
        .unwrap()
        .records
        .remove(0);
        live.report(&Event::TrialFinished(&rec));
        // The first finished trial is exported at once (no export before it).
        let deadline = Instant::now() + Duration::from_secs(60);
        while !dir.join("report.json").exists() {
            assert!(
                Instant::now() < deadline,
                "the exports were not written within 60 s of a finished trial"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        live.report(&Event::Finished { interrupted: false });
        assert!(live.finish().unwrap().report.is_ok());
    }
}
