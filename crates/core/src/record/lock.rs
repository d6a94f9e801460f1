//! One writer per run folder: `<run>/.lock`, an OS advisory lock held by
//! `ablate run` (new or `--resume`) for its whole life and by `ablate report`
//! while it writes the exports. The operating system releases the lock when
//! the process ends, however it ends, so a killed run leaves no stale lock.
//! The file also names its holder (pid, host, start time, command line) for
//! the message that refuses a second writer; only the OS lock counts.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Name of the lock file inside a run folder.
pub(crate) const LOCK_FILE: &str = ".lock";

/// Who holds a run folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub hostname: String,
    pub started_at: String,
    /// The command line, arguments joined by spaces.
    pub command: String,
}

impl Holder {
    /// This process.
    pub fn current() -> Holder {
        Holder {
            pid: std::process::id(),
            hostname: hostname(),
            started_at: super::now_rfc3339(),
            command: command_line(),
        }
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} on host {} since {} ({})",
            self.pid, self.hostname, self.started_at, self.command
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the folder.
    #[error("{} is in use by {holder}", dir.display())]
    InUse { dir: PathBuf, holder: String },
    #[error("cannot lock {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

/// The lock of one run folder; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct RunLock {
    file: File,
    dir: PathBuf,
}

impl RunLock {
    /// Take the lock of `dir` (an existing folder) without waiting, and write
    /// this process into the lock file. Refused with `LockError::InUse` naming
    /// the holder when another process has it.
    pub fn acquire(dir: &Path) -> Result<RunLock, LockError> {
        let path = dir.join(LOCK_FILE);
        let io = |source| LockError::Io { path: path.clone(), source };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        // A lock held while the file names nobody is either a holder between
        // taking the lock and writing its name, or a lock already released
        // whose open file a child process forked at that moment (by any thread
        // of this process) still shares until it execs. Both pass in moments:
        // the lock itself is tried again, not only the file read.
        let mut tries = 0;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => match read_holder(&mut file) {
                    Some(holder) => {
                        return Err(LockError::InUse { dir: dir.to_path_buf(), holder });
                    }
                    None if tries < UNNAMED_RETRIES => {
                        tries += 1;
                        std::thread::sleep(UNNAMED_PAUSE);
                    }
                    None => {
                        return Err(LockError::InUse {
                            dir: dir.to_path_buf(),
                            holder: "another process (its lock file names no holder)".into(),
                        });
                    }
                },
                Err(TryLockError::Error(e)) => return Err(io(e)),
            }
        }
        let text =
            serde_json::to_string(&Holder::current()).map_err(|e| io(std::io::Error::other(e)))?;
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(format!("{text}\n").as_bytes()).map_err(io)?;
        file.sync_data().map_err(io)?;
        Ok(RunLock { file, dir: dir.to_path_buf() })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // The file stays (removing it would let a process that opened it
        // before the removal lock a file nobody else sees); emptied, it names
        // no holder. The lock goes with the file handle.
        let _ = self.file.set_len(0);
    }
}

/// How often, and how far apart, a lock held by nobody named is tried again
/// before it is refused (3 s in all).
const UNNAMED_RETRIES: u32 = 60;
const UNNAMED_PAUSE: Duration = Duration::from_millis(50);

/// The holder a locked lock file names, if it names one yet.
fn read_holder(file: &mut File) -> Option<String> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).and_then(|_| file.read_to_string(&mut text)).ok()?;
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(match serde_json::from_str::<Holder>(text) {
        Ok(h) => h.to_string(),
        Err(_) => format!("another process ({text})"),
    })
}

/// The host name (gethostname), or `unknown`.
pub fn hostname() -> String {
    let name = rustix::system::uname().nodename().to_string_lossy().trim().to_string();
    if name.is_empty() { "unknown".into() } else { name }
}

fn command_line() -> String {
    let mut args = std::env::args();
    let program = args
        .next()
        .map(|p| Path::new(&p).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or(p))
        .unwrap_or_default();
    std::iter::once(program).chain(args).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_and_named_then_the_lock_is_free_again() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path()).unwrap();
        // A second open file description conflicts even inside one process.
        let err = RunLock::acquire(dir.path()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, LockError::InUse { .. }), "{msg}");
        assert!(
            msg.starts_with(&format!(
                "{} is in use by pid {} on host {}",
                dir.path().display(),
                std::process::id(),
                hostname()
            )),
            "{msg}"
        );
        assert!(msg.contains(" since 20"), "{msg}");
        drop(first);
        let again = RunLock::acquire(dir.path()).unwrap();
        let holder: Holder = serde_json::from_str(
            std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap().trim(),
        )
        .unwrap();
        assert_eq!(holder.pid, std::process::id());
        drop(again);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap(),
            "",
            "released: names no holder"
        );
    }

    #[test]
    fn a_lock_held_for_a_moment_by_nobody_named_is_waited_for() {
        // As a child forked while the lock was held shares it until it execs:
        // held, the file empty, released 300 ms later.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let other = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        other.try_lock().unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(other);
        });
        let lock = RunLock::acquire(dir.path()).unwrap();
        release.join().unwrap();
        let holder: Holder =
            serde_json::from_str(std::fs::read_to_string(&path).unwrap().trim()).unwrap();
        assert_eq!(holder.pid, std::process::id());
        drop(lock);
        // Held for good by nobody named: refused after the wait, and said so.
        let stuck = OpenOptions::new().read(true).write(true).open(&path).unwrap();
        stuck.try_lock().unwrap();
        let err = RunLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(
            err.ends_with("is in use by another process (its lock file names no holder)"),
            "{err}"
        );
    }

    #[test]
    fn stale_holder_text_without_a_lock_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(LOCK_FILE),
            "{\"pid\":1,\"hostname\":\"h\",\"started_at\":\"t\",\"command\":\"c\"}\n",
        )
        .unwrap();
        let lock = RunLock::acquire(dir.path()).unwrap();
        assert_eq!(lock.dir(), dir.path());
    }
}
