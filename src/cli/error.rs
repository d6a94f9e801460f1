//! Why a command did not succeed: each stage's own error, and the one mapping
//! from them to the exit status (`CommandError::exit`; docs/getting-started.md, "Commands");
//! the gate's verdict too (`gate_exit`), so that every status is decided here.

use ablate::InputError;
use ablate::error::Exit;
use ablate::export::ExportError;
use ablate::gate::{GateError, Verdict};
use ablate::record::lock::LockError;
use ablate::record::merge::MergeError;
use ablate::report::ReportError;
use ablate::runner::RunError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// A config, task, suite or run file, or a flag's value, is wrong: nothing ran.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The machine cannot run candidate code as asked (the sandbox, the Python named).
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Export(#[from] ExportError),
    /// A file the command writes could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The command could not start its work (the async runtime, a JSON rendering).
    #[error("{0}")]
    Internal(String),
}

impl CommandError {
    /// The exit status, decided here only: bad input and a folder another run
    /// holds are usage errors (2), Ctrl-C is 130, any other failure is 1.
    pub fn exit(&self) -> Exit {
        use CommandError as E;
        match self {
            E::Input(_) | E::Setup(_) => Exit::Usage,
            E::Run(RunError::Input(_) | RunError::Lock(LockError::InUse { .. })) => Exit::Usage,
            E::Run(RunError::Interrupted { .. }) => Exit::Interrupted,
            E::Run(
                RunError::Setup(_)
                | RunError::Model(_)
                | RunError::Sandbox(_)
                | RunError::Container(_)
                | RunError::Lock(LockError::Io { .. })
                | RunError::Io { .. },
            ) => Exit::Failure,
            E::Report(ReportError::NotARun { .. } | ReportError::Load(_)) => Exit::Usage,
            E::Report(ReportError::Write { .. }) => Exit::Failure,
            E::Merge(MergeError::Input(_) | MergeError::Lock(_)) => Exit::Usage,
            E::Merge(MergeError::Incomplete(_) | MergeError::Io { .. }) => Exit::Failure,
            E::Gate(GateError::Input(_)) => Exit::Usage,
            E::Gate(GateError::Write { .. }) => Exit::Failure,
            E::Lock(LockError::InUse { .. }) => Exit::Usage,
            E::Lock(LockError::Io { .. }) => Exit::Failure,
            E::Export(ExportError::Run(ReportError::NotARun { .. } | ReportError::Load(_))) => {
                Exit::Usage
            }
            E::Export(
                ExportError::Run(ReportError::Write { .. })
                | ExportError::Write { .. }
                | ExportError::Frame(_),
            ) => Exit::Failure,
            E::Write { .. } | E::Internal(_) => Exit::Failure,
        }
    }

    /// What the user reads on stderr: `error: ` before each line; an
    /// interrupted run says what was kept and how to go on, as a note.
    pub fn message(&self) -> String {
        match self {
            CommandError::Run(e @ RunError::Interrupted { .. }) => e.to_string(),
            e => e
                .to_string()
                .lines()
                .map(|l| format!("error: {l}\n"))
                .collect::<String>()
                .trim_end()
                .to_string(),
        }
    }
}

/// The gate's exit status: its verdict (PASS 0, FAIL 1, INCONCLUSIVE 3), or
/// a usage error (2) when a drift between baseline and candidate refused the
/// comparison (`None`).
pub fn gate_exit(verdict: Option<Verdict>) -> Exit {
    match verdict {
        Some(Verdict::Pass) => Exit::Ok,
        Some(Verdict::Fail) => Exit::Failure,
        Some(Verdict::Inconclusive) => Exit::Inconclusive,
        None => Exit::Usage,
    }
}

/// A file written by a command.
pub fn write_error(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> CommandError {
    let path = path.into();
    move |source| CommandError::Write { path, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statuses docs/getting-started.md gives under "Commands": gate PASS 0, FAIL 1, INCONCLUSIVE 3, a
    /// baseline that does not match 2; bad input 2, a file not written 1, Ctrl-C 130.
    #[test]
    fn each_outcome_has_the_readme_status() {
        let codes: Vec<u8> =
            [Some(Verdict::Pass), Some(Verdict::Fail), Some(Verdict::Inconclusive), None]
                .into_iter()
                .map(|v| gate_exit(v).code())
                .collect();
        assert_eq!(codes, vec![0, 1, 3, 2]);
        let io = || std::io::Error::other("disk full");
        let cases: Vec<(CommandError, u8)> = vec![
            (InputError::new("x.toml", "bad").into(), 2),
            (CommandError::Write { path: "out.csv".into(), source: io() }, 1),
            (ReportError::Write { dir: "run".into(), source: io() }.into(), 1),
            (ReportError::NotARun { dir: "run".into() }.into(), 2),
            (
                RunError::Interrupted { recorded: 3, config: "c.toml".into(), dir: "run".into() }
                    .into(),
                130,
            ),
            (
                RunError::Lock(LockError::InUse { dir: "run".into(), holder: "pid 1".into() })
                    .into(),
                2,
            ),
            (MergeError::Incomplete(vec!["shard 2 is missing".into()]).into(), 1),
        ];
        for (err, code) in cases {
            assert_eq!(err.exit().code(), code, "{err}");
        }
    }
}
