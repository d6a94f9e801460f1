//! Run folder names and their creation. A new run folder is made with
//! `create_dir` under its final name, so two runs started at once never share
//! one: the second finds the name taken and takes the next suffix.

use std::io;
use std::path::{Path, PathBuf};

/// Write `path` whole or not at all: `write` fills a temporary file in the
/// same folder (buffered), which is synced and then renamed over `path`. A
/// reader sees the old file or the new one, never half of one; a crash
/// leaves at most a hidden `.<name>.<random>.tmp` behind. The one way the
/// record and the report write a file in place.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut dyn io::Write) -> io::Result<()>,
) -> io::Result<()> {
    use std::io::Write as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut tmp =
        tempfile::Builder::new().prefix(&format!(".{name}.")).suffix(".tmp").tempfile_in(dir)?;
    {
        let mut w = io::BufWriter::with_capacity(1 << 16, tmp.as_file_mut());
        write(&mut w)?;
        w.flush()?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Longest experiment name kept in a folder name (in bytes, ASCII after sanitising).
const MAX_NAME: usize = 100;

/// An experiment name as a piece of a folder name: ASCII letters, digits,
/// `-` and `_`; everything else (`/`, `\`, `.`, spaces, non-ASCII) becomes
/// `-`. So no name can climb out of `--results` or hide the folder.
pub(crate) fn sanitise(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
        .take(MAX_NAME)
        .collect();
    if s.is_empty() { "run".into() } else { s }
}

/// The default name of a new run folder: `<stamp>-<sanitised name>`; the
/// n-th (n >= 2) candidate appends `-n`.
pub fn candidate(stamp: &str, exp_name: &str, n: u32) -> String {
    let base = format!("{stamp}-{}", sanitise(exp_name));
    if n <= 1 { base } else { format!("{base}-{n}") }
}

/// A `--run-id` must be a plain folder name: not empty, no `/`, `\`, `..`,
/// no leading `.`, no NUL or other control character, at most 200 bytes.
pub fn check_run_id(id: &str) -> Result<(), BadRunId> {
    let why = if id.is_empty() {
        "it is empty"
    } else if id.contains('/') || id.contains('\\') {
        "it contains a path separator"
    } else if id.contains("..") {
        "it contains `..`"
    } else if id.starts_with('.') {
        "it starts with `.` (hidden)"
    } else if id.chars().any(char::is_control) {
        "it contains a control character"
    } else if id.len() > 200 {
        "it is longer than 200 bytes"
    } else {
        return Ok(());
    };
    Err(BadRunId { id: id.to_string(), why })
}

/// A run id that is no plain folder name, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{}` is not a plain folder name: {why}", .id.escape_debug())]
pub struct BadRunId {
    pub id: String,
    pub why: &'static str,
}

/// Create `parent/<name>` atomically (`create_dir`, never "check then
/// create"); the parent is created when missing. `AlreadyExists` when the
/// folder exists.
pub(crate) fn create_named(parent: &Path, name: &str) -> io::Result<PathBuf> {
    std::fs::create_dir_all(parent)?;
    let dir = parent.join(name);
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

/// Create a new run folder under `parent` named `candidate(stamp, exp_name, n)`
/// for the first n (1, 2, 3, ...) whose folder does not exist yet. Returns
/// the run id (the folder name) and the folder.
pub(crate) fn create_new(
    parent: &Path,
    stamp: &str,
    exp_name: &str,
) -> io::Result<(String, PathBuf)> {
    for n in 1..=10_000 {
        let name = candidate(stamp, exp_name, n);
        match create_named(parent, &name) {
            Ok(dir) => return Ok((name, dir)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("10000 run folders named {} exist", candidate(stamp, exp_name, 1)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_leave_the_parent() {
        assert_eq!(sanitise("../../etc"), "------etc");
        assert_eq!(sanitise("a\\b c.d"), "a-b-c-d");
        assert_eq!(sanitise(""), "run");
        assert_eq!(sanitise("ok_name-1"), "ok_name-1");
        assert_eq!(sanitise(&"x".repeat(300)).len(), MAX_NAME);
        // Every candidate, suffixes included, is sanitised.
        assert_eq!(candidate("S", "../x", 1), "S----x");
        assert_eq!(candidate("S", "../x", 3), "S----x-3");
    }

    #[test]
    fn run_ids_must_be_plain_names() {
        // The first rule broken is named; the id is shown escaped (escape_debug), so a control
        // character cannot corrupt the message.
        for (bad, message) in [
            ("", "`` is not a plain folder name: it is empty"),
            ("a/b", "`a/b` is not a plain folder name: it contains a path separator"),
            ("a\\b", "`a\\\\b` is not a plain folder name: it contains a path separator"),
            ("..", "`..` is not a plain folder name: it contains `..`"),
            ("../x", "`../x` is not a plain folder name: it contains a path separator"),
            ("x..y", "`x..y` is not a plain folder name: it contains `..`"),
            (".hidden", "`.hidden` is not a plain folder name: it starts with `.` (hidden)"),
            ("a\0b", "`a\\0b` is not a plain folder name: it contains a control character"),
            ("a\nb", "`a\\nb` is not a plain folder name: it contains a control character"),
            ("\u{7f}", "`\\u{7f}` is not a plain folder name: it contains a control character"),
        ] {
            let refused = check_run_id(bad).err().map(|e| e.to_string());
            assert_eq!(refused.as_deref(), Some(message), "{bad:?} refused");
        }
        let long = "x".repeat(201);
        assert_eq!(
            check_run_id(&long).err().map(|e| e.to_string()),
            Some(format!("`{long}` is not a plain folder name: it is longer than 200 bytes"))
        );
        assert_eq!(check_run_id(&"x".repeat(200)), Ok(()));
        for good in ["candidate", "2026-run_1", "a.b"] {
            assert_eq!(check_run_id(good), Ok(()), "{good:?} accepted");
        }
    }

    #[test]
    fn taken_names_get_the_next_suffix() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("results");
        let (a, da) = create_new(&parent, "S", "exp").unwrap();
        let (b, db) = create_new(&parent, "S", "exp").unwrap();
        std::fs::create_dir(parent.join("S-exp-3")).unwrap();
        let (c, _) = create_new(&parent, "S", "exp").unwrap();
        assert_eq!((a.as_str(), b.as_str(), c.as_str()), ("S-exp", "S-exp-2", "S-exp-4"));
        assert_ne!(da, db);
        assert_eq!(
            create_named(&parent, "S-exp").unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
    }

    #[test]
    fn concurrent_creators_get_distinct_folders() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().to_path_buf();
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let parent = parent.clone();
                std::thread::spawn(move || create_new(&parent, "S", "exp").unwrap().0)
            })
            .collect();
        let mut names: Vec<String> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 8);
    }
}

#[cfg(test)]
mod atomic_tests {
    use super::write_atomic;

    #[test]
    fn an_atomic_write_replaces_the_file_whole_and_a_failed_one_leaves_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(&path, "old").unwrap();
        write_atomic(&path, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let failed = write_atomic(&path, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("disk full"))
        });
        assert!(failed.is_err());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "new",
            "a failed write leaves the old file"
        );
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["report.json"], "no temporary file left behind");
    }
}
