//! One scratch folder per ablate process, for everything it makes in the
//! system's temporary folder (trial workspaces, the grader's runner and result
//! files, staged harness files, trial files).
//!
//! The folder (`ablate-scratch-<pid>-<random>`) holds a `.lock` file that the
//! process keeps locked (an OS advisory lock) for its whole life. The folder is
//! removed when the process ends normally (`remove`, called by the command
//! line on every exit path); after a `kill -9` it stays, unlocked, and the next
//! ablate process that starts removes it (`sweep`). A folder whose lock is
//! held belongs to a live process and is never touched, so runs, tests and
//! jails of other ablate processes on the same machine are safe.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The name every scratch folder starts with.
pub(crate) const PREFIX: &str = "ablate-scratch-";
const LOCK: &str = ".lock";

struct Scratch {
    path: PathBuf,
    _lock: File,
}

static SCRATCH: Mutex<Option<Scratch>> = Mutex::new(None);

fn temp_root() -> PathBuf {
    std::env::temp_dir()
}

/// This process's scratch folder, made and locked on first use.
pub fn dir() -> std::io::Result<PathBuf> {
    let mut guard = SCRATCH.lock().unwrap();
    if let Some(s) = guard.as_ref() {
        return Ok(s.path.clone());
    }
    let root = temp_root();
    // Made under a name `sweep` ignores, locked, then renamed into place: a
    // sweeper can never see it unlocked.
    let fresh = tempfile::Builder::new().prefix(".ablate-new-").tempdir_in(&root)?;
    let lock = File::create(fresh.path().join(LOCK))?;
    lock.try_lock().map_err(|e| {
        std::io::Error::other(format!("cannot lock {}: {e}", fresh.path().join(LOCK).display()))
    })?;
    let name = format!("{PREFIX}{}-{:08x}", std::process::id(), rand::random::<u32>());
    let path = root.join(name);
    std::fs::rename(fresh.path(), &path)?;
    let _ = fresh.keep();
    *guard = Some(Scratch { path: path.clone(), _lock: lock });
    Ok(path)
}

/// A temporary folder inside the scratch folder (removed when dropped).
pub fn tempdir(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix(prefix).tempdir_in(dir()?)
}

/// Remove this process's scratch folder (at exit). Safe to call more than once.
pub fn remove() {
    if let Some(s) = SCRATCH.lock().unwrap().take() {
        let _ = std::fs::remove_dir_all(&s.path);
    }
}

/// Whether the scratch folder `name` (in the system's temporary folder)
/// belongs to a live ablate process: it exists and its lock is held.
pub(crate) fn is_live(name: &str) -> bool {
    if !name.starts_with(PREFIX) || name.contains('/') {
        return false;
    }
    match File::open(temp_root().join(name).join(LOCK)) {
        Ok(lock) => lock.try_lock().is_err(),
        Err(_) => false,
    }
}

/// Remove the scratch folders of ablate processes that are gone (their lock
/// is free); returns the folders removed.
pub fn sweep() -> Vec<PathBuf> {
    sweep_in(&temp_root())
}

fn sweep_in(root: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let own = SCRATCH.lock().unwrap().as_ref().map(|s| s.path.clone());
    let Ok(entries) = std::fs::read_dir(root) else { return removed };
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with(PREFIX) || Some(e.path()) == own {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else { continue };
        if !meta.is_dir() {
            continue;
        }
        // A folder without a lock file is half made or not ours: left alone.
        let Ok(lock) = File::open(e.path().join(LOCK)) else { continue };
        if lock.try_lock().is_ok() && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_whose_lock_is_held_is_kept_and_a_free_one_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let live = root.path().join(format!("{PREFIX}1-live"));
        let dead = root.path().join(format!("{PREFIX}2-dead"));
        let other = root.path().join("ablate-something-else");
        for d in [&live, &dead, &other] {
            std::fs::create_dir_all(d.join("deep/er")).unwrap();
            File::create(d.join(LOCK)).unwrap();
        }
        let held = File::open(live.join(LOCK)).unwrap();
        held.try_lock().unwrap();
        let removed = sweep_in(root.path());
        assert_eq!(removed, vec![dead.clone()]);
        assert!(live.is_dir() && other.is_dir() && !dead.exists());
        drop(held);
        assert_eq!(sweep_in(root.path()), vec![live.clone()]);
    }
}
