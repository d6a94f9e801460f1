//! Each trial works in its own temporary copy of the task workspace.
//!
//! The harness writes only the task's editable files. Every path that comes
//! from a model (tool arguments, file names in replies) is resolved here; an
//! absolute path, a `..`, or a symlink on the way is refused, and only regular
//! files are read (a FIFO or a device the candidate left would block or never
//! end). The tests are put back from the suite before final grading, and a
//! changed or replaced test folder is reported. Candidate code itself runs in
//! the jail of isolation.rs, under the sandbox's own uid.

pub mod cgroup;
pub mod isolation;
pub mod netns;
pub mod process;
pub mod scratch;

use crate::digest;
use crate::suite::Task;
use sha2::{Digest, Sha256};
use std::path::{Component, Path, PathBuf};

/// Why a path from the model was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathRefusal {
    #[error("`{0}` is an absolute path; use a path relative to the workspace")]
    Absolute(String),
    #[error("`{0}` leaves the workspace")]
    Escapes(String),
    #[error("`{0}` goes through a symbolic link")]
    Symlink(String),
    #[error("`{0}` is not an editable file of this task (editable: {1})")]
    NotEditable(String, String),
    #[error("`{0}` does not exist")]
    Missing(String),
    #[error("the path is empty")]
    Empty,
}

pub struct Sandbox {
    dir: tempfile::TempDir,
    /// Canonical path of `dir`, for containment checks.
    root: PathBuf,
    editable: Vec<String>,
    /// The task's workspace and tests as shipped (empty for `Sandbox::empty`).
    workspace_src: PathBuf,
    tests_src: PathBuf,
    /// The task's own files (workspace and tests as shipped): what may be shown to a model.
    task_files: Vec<String>,
    /// The uid candidate code runs under in the jail, held while the sandbox lives.
    uid: isolation::UidLease,
}

/// Bytes of an editable file taken into the graded snapshot; a larger file is graded as empty.
pub(crate) const SNAPSHOT_FILE_CAP: u64 = 64 << 20;

/// The editable files as they will be graded: each name with its bytes (a
/// missing file, or anything but a regular file within the cap, as empty),
/// and why a file was taken as empty.
pub struct Snapshot {
    pub files: Vec<(String, Vec<u8>)>,
    pub notes: Vec<String>,
}

impl Snapshot {
    /// sha256 over the files (name, NUL, sha256 hex of the bytes, newline, in
    /// declared order): the identity of the graded snapshot.
    pub fn sha256(&self) -> String {
        let mut hasher = Sha256::new();
        for (name, bytes) in &self.files {
            hasher.update(name.as_bytes());
            hasher.update([0u8]);
            hasher.update(digest::sha256_hex(bytes).as_bytes());
            hasher.update([b'\n']);
        }
        hex::encode(hasher.finalize())
    }
}

/// Bytes of one file read for a model or a digest; more is cut (reads) or refused.
pub(crate) const READ_CAP: u64 = 1 << 20;

/// Read a regular file, not following a final symlink, at most `cap` bytes
/// (a longer file gives its first `cap` bytes). A FIFO, socket or device is refused.
pub(crate) fn read_regular(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let (file, _) = digest::open_regular(path, false)?;
    let mut buf = Vec::new();
    file.take(cap).read_to_end(&mut buf)?;
    Ok(buf)
}

impl Sandbox {
    /// A fresh copy of the task's workspace with its tests under `tests/`.
    pub fn create(task: &Task) -> std::io::Result<Sandbox> {
        Sandbox::copied(
            &format!("ws-{}-", task.id),
            task.workspace_dir(),
            task.tests_dir(),
            task.editable.clone(),
        )
    }

    /// A copy of `workspace_src` with `tests_src` under `tests/`, under a uid of its own.
    fn copied(
        label: &str,
        workspace_src: PathBuf,
        tests_src: PathBuf,
        editable: Vec<String>,
    ) -> std::io::Result<Sandbox> {
        let dir = scratch::tempdir(label)?;
        copy_tree(&workspace_src, dir.path())?;
        copy_tree(&tests_src, &dir.path().join("tests"))?;
        let root = dir.path().canonicalize()?;
        let mut task_files: Vec<String> = digest::list_files(&workspace_src)?
            .iter()
            .map(|p| p.to_string_lossy().replace('\\', "/"))
            .collect();
        task_files.extend(
            digest::list_files(&tests_src)?
                .iter()
                .map(|p| format!("tests/{}", p.to_string_lossy().replace('\\', "/"))),
        );
        for e in &editable {
            if !task_files.contains(e) {
                task_files.push(e.clone());
            }
        }
        let uid = isolation::lease_uid()?;
        Ok(Sandbox { dir, root, editable, workspace_src, tests_src, task_files, uid })
    }

    /// An empty workspace with a uid of its own: the working folder of a
    /// harness that runs on the host for a container task (the task's files
    /// are in the container; none of them is copied here).
    pub fn empty(label: &str) -> std::io::Result<Sandbox> {
        let dir = scratch::tempdir(&format!("ws-{label}-"))?;
        let root = dir.path().canonicalize()?;
        let uid = isolation::lease_uid()?;
        Ok(Sandbox {
            dir,
            root,
            editable: Vec::new(),
            workspace_src: PathBuf::new(),
            tests_src: PathBuf::new(),
            task_files: Vec::new(),
            uid,
        })
    }

    /// The tests' side of out-of-process grading: a fresh copy of the task's
    /// workspace as shipped without its editable files (the candidate's
    /// modules are asked of the candidate's own process), with its tests,
    /// under a uid of its own.
    pub fn tests_side(&self) -> std::io::Result<Sandbox> {
        let mut side = Sandbox::copied(
            "tests-side-",
            self.workspace_src.clone(),
            self.tests_src.clone(),
            Vec::new(),
        )?;
        for name in &self.editable {
            match std::fs::remove_file(side.root.join(name)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        side.task_files.retain(|f| !self.editable.contains(f));
        Ok(side)
    }

    /// The modules of the candidate this sandbox holds, as out-of-process
    /// grading asks them (`suite::remote_module` of each editable file).
    pub(crate) fn candidate_modules(&self) -> Vec<String> {
        self.editable
            .iter()
            .filter_map(|e| crate::suite::remote_module(e))
            .map(str::to_string)
            .collect()
    }

    /// The uid candidate code of this sandbox runs under.
    pub fn uid(&self) -> u32 {
        self.uid.uid()
    }

    /// Before candidate code runs: the workspace (but not its tests) belongs to
    /// the sandbox's uid, so that the candidate can write there and nowhere else.
    /// Only what ablate wrote is given over (the folder, the task's files, the
    /// editable files and their folders); whatever the candidate made is its
    /// own already, however deep it goes.
    pub fn hand_over(&self) -> std::io::Result<()> {
        if !isolation::is_root() {
            return Ok(());
        }
        let uid = self.uid();
        std::os::unix::fs::lchown(&self.root, Some(uid), Some(uid))?;
        let mut done = std::collections::HashSet::new();
        for name in self.task_files.iter().chain(&self.editable) {
            if name.starts_with("tests/") {
                continue;
            }
            let mut path = self.root.clone();
            for part in Path::new(name).components() {
                let Component::Normal(part) = part else { break };
                path.push(part);
                if !done.insert(path.clone()) {
                    continue;
                }
                match std::fs::symlink_metadata(&path) {
                    // A link is given over itself (never its target).
                    Ok(_) => std::os::unix::fs::lchown(&path, Some(uid), Some(uid))?,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// The editable files as the trial left them, read without following links.
    pub fn snapshot(&self) -> Snapshot {
        let mut files = Vec::new();
        let mut notes = Vec::new();
        for name in &self.editable {
            let path = self.root.join(name);
            let bytes = match std::fs::symlink_metadata(&path) {
                Err(_) => Vec::new(),
                Ok(m) if !m.file_type().is_file() => {
                    notes.push(format!("`{name}` is not a regular file: graded as empty"));
                    Vec::new()
                }
                Ok(m) if m.len() > SNAPSHOT_FILE_CAP => {
                    notes.push(format!(
                        "`{name}` has {} bytes, over {SNAPSHOT_FILE_CAP}: graded as empty",
                        m.len()
                    ));
                    Vec::new()
                }
                Ok(_) => read_regular(&path, SNAPSHOT_FILE_CAP).unwrap_or_else(|e| {
                    notes.push(format!("`{name}` cannot be read ({e}): graded as empty"));
                    Vec::new()
                }),
            };
            files.push((name.clone(), bytes));
        }
        Snapshot { files, notes }
    }

    /// The identity of the snapshot as it is now (`Snapshot::sha256`).
    pub fn snapshot_sha256(&self) -> String {
        self.snapshot().sha256()
    }

    /// A fresh sandbox for final grading: the task's own workspace and tests as
    /// shipped, with the snapshot's editable files written over them, and
    /// nothing else of what the trial left (no other file, no bytecode cache,
    /// no folder it made).
    pub(crate) fn graded_copy(task: &Task, snapshot: &Snapshot) -> std::io::Result<Sandbox> {
        let fresh = Sandbox::create(task)?;
        for (name, bytes) in &snapshot.files {
            let path = fresh.root.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            write_nofollow(&path, bytes)?;
        }
        Ok(fresh)
    }

    /// Files at the top of the workspace that the trial made and that are
    /// named like a module of `modules` (the grader's own imports): `name.py`,
    /// `name.pyc`, `name/__init__.py`, an extension module `name.*.so`.
    pub fn planted_modules(&self, modules: &[String]) -> Vec<String> {
        let mut found = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.root) else { return found };
        let mut names: Vec<String> =
            entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        for entry in names {
            if self.task_files.contains(&entry) || self.editable.contains(&entry) {
                continue;
            }
            let module =
                if let Some(m) = entry.strip_suffix(".py").or_else(|| entry.strip_suffix(".pyc")) {
                    Some(m)
                } else if entry.ends_with(".so") {
                    entry.split('.').next()
                } else if self.root.join(&entry).join("__init__.py").exists()
                    || self.root.join(&entry).join("__init__.pyc").exists()
                {
                    Some(entry.as_str())
                } else {
                    None
                };
            if let Some(m) = module
                && modules.iter().any(|g| g == m)
            {
                found.push(entry.clone());
            }
        }
        found
    }

    /// The task's own files as they are now, for showing to a model: regular
    /// files only, each cut at `cap` bytes. Files the candidate created are not shown.
    pub(crate) fn task_files(&self, cap: u64) -> Vec<(String, String)> {
        self.task_files
            .iter()
            .filter_map(|name| {
                let text = read_cut(&self.resolve(name).ok()?, cap).ok()?;
                Some((name.clone(), text))
            })
            .collect()
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Overlay the reference solution (used by `suite check`).
    pub(crate) fn apply_solution(&self, task: &Task) -> std::io::Result<()> {
        copy_tree(&task.solution_dir(), &self.root)
    }

    /// Resolve a model-supplied path for reading; it must stay inside the sandbox.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, PathRefusal> {
        let rel = rel.trim();
        if rel.is_empty() {
            return Err(PathRefusal::Empty);
        }
        let path = Path::new(rel);
        if path.is_absolute() {
            return Err(PathRefusal::Absolute(rel.to_string()));
        }
        let mut current = self.root.clone();
        for comp in path.components() {
            match comp {
                Component::Normal(part) => {
                    current.push(part);
                    if let Ok(meta) = std::fs::symlink_metadata(&current)
                        && meta.file_type().is_symlink()
                    {
                        return Err(PathRefusal::Symlink(rel.to_string()));
                    }
                }
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(PathRefusal::Escapes(rel.to_string()));
                }
            }
        }
        if !current.starts_with(&self.root) {
            return Err(PathRefusal::Escapes(rel.to_string()));
        }
        Ok(current)
    }

    /// Normalise a path to its editable name (`./a.py` -> `a.py`) if it is one.
    pub(crate) fn editable_name(&self, rel: &str) -> Result<String, PathRefusal> {
        let resolved = self.resolve(rel)?;
        let name = resolved
            .strip_prefix(&self.root)
            .unwrap_or(&resolved)
            .to_string_lossy()
            .replace('\\', "/");
        if self.editable.contains(&name) {
            Ok(name)
        } else {
            Err(PathRefusal::NotEditable(rel.to_string(), self.editable.join(", ")))
        }
    }

    /// Write one editable file. Only the task's editable files can be written.
    pub(crate) fn write_editable(&self, rel: &str, content: &str) -> Result<String, PathRefusal> {
        let name = self.editable_name(rel)?;
        let path = self.root.join(&name);
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        write_nofollow(&path, content.as_bytes())
            .map_err(|_| PathRefusal::Escapes(rel.to_string()))?;
        Ok(name)
    }

    /// Read a file for the model: regular files only, cut at READ_CAP bytes.
    pub fn read(&self, rel: &str) -> Result<String, PathRefusal> {
        read_cut(&self.resolve(rel)?, READ_CAP).map_err(|_| PathRefusal::Missing(rel.to_string()))
    }

    pub fn editable(&self) -> &[String] {
        &self.editable
    }

    /// Files in the sandbox, relative, sorted (caches skipped), at most 1,000.
    pub fn list(&self) -> Vec<String> {
        digest::list_files(&self.root)
            .unwrap_or_default()
            .into_iter()
            .take(1000)
            .map(|p| p.to_string_lossy().replace('\\', "/"))
            .collect()
    }

    /// Put the suite's tests back; returns the test files that had changed,
    /// been removed, or been added, and `tests/` itself when it was replaced
    /// (by a file, a symlink, anything but a folder).
    pub(crate) fn restore_tests(&self) -> std::io::Result<Vec<String>> {
        let tests_dir = self.root.join("tests");
        let mut changed = Vec::new();
        let original = digest::list_files(&self.tests_src)?;
        let kind = std::fs::symlink_metadata(&tests_dir).ok().map(|m| m.file_type());
        if kind.is_some_and(|k| !k.is_dir()) {
            changed.push("tests/ (replaced by something that is not a folder)".to_string());
            std::fs::remove_file(&tests_dir)?;
        }
        let current = if kind.is_some_and(|k| k.is_dir()) {
            digest::list_files(&tests_dir)?
        } else {
            Vec::new()
        };
        for rel in &original {
            let a = std::fs::read(self.tests_src.join(rel))?;
            let b = if current.contains(rel) {
                read_regular(&tests_dir.join(rel), a.len() as u64 + 1).ok()
            } else {
                None
            };
            if b.as_deref() != Some(a.as_slice()) {
                changed.push(format!("tests/{}", rel.display()));
            }
        }
        for rel in &current {
            if !original.contains(rel) {
                changed.push(format!("tests/{}", rel.display()));
            }
        }
        if kind.is_some_and(|k| k.is_dir()) {
            std::fs::remove_dir_all(&tests_dir)?;
        }
        copy_tree(&self.tests_src, &tests_dir)?;
        Ok(changed)
    }

    /// Keep the directory (for debugging) instead of deleting it on drop.
    pub fn keep(self) -> PathBuf {
        self.dir.keep()
    }
}

/// A regular file as text for a model, cut at `cap` bytes with a marker saying so.
fn read_cut(path: &Path, cap: u64) -> std::io::Result<String> {
    let bytes = read_regular(path, cap + 1)?;
    let mut text = String::from_utf8_lossy(&bytes[..bytes.len().min(cap as usize)]).into_owned();
    if bytes.len() as u64 > cap {
        text.push_str(&format!("\n[... cut at {cap} bytes ...]"));
    }
    Ok(text)
}

/// Write a file without following a symlink in its place.
fn write_nofollow(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    f.write_all(bytes)
}

/// Copy a tree of regular files (symlinks and caches are not copied).
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for rel in digest::list_files(from)? {
        let src = from.join(&rel);
        if std::fs::symlink_metadata(&src)?.file_type().is_symlink() {
            continue;
        }
        let dst = to.join(&rel);
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(&src, &dst)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::{CheckSpec, Difficulty, OutputParser, TaskKind};
    use std::time::Duration;

    fn task(dir: &Path) -> Task {
        for sub in ["workspace", "tests", "solution"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        std::fs::write(dir.join("workspace/m.py"), "stub").unwrap();
        std::fs::write(dir.join("solution/m.py"), "solved").unwrap();
        std::fs::write(dir.join("tests/test_m.py"), "tests").unwrap();
        Task {
            id: "t".into(),
            difficulty: Difficulty::Easy,
            prompt: "p".into(),
            editable: vec!["m.py".into()],
            check: CheckSpec {
                command: vec!["true".into()],
                timeout: Duration::from_secs(1),
                parser: OutputParser::Unittest,
                tests: 1,
                limits: Default::default(),
                mode: Default::default(),
            },
            kind: TaskKind::Python,
            dir: dir.to_path_buf(),
            digest: String::new(),
        }
    }

    #[test]
    fn refuses_escapes_absolute_symlinks_and_non_editable() {
        let src = tempfile::tempdir().unwrap();
        let sb = Sandbox::create(&task(src.path())).unwrap();
        assert!(matches!(sb.resolve("../etc/passwd"), Err(PathRefusal::Escapes(_))));
        assert!(matches!(sb.resolve("/etc/passwd"), Err(PathRefusal::Absolute(_))));
        assert!(matches!(
            sb.write_editable("tests/test_m.py", "x"),
            Err(PathRefusal::NotEditable(..))
        ));
        std::os::unix::fs::symlink("/etc", sb.path().join("link")).unwrap();
        assert!(matches!(sb.resolve("link/passwd"), Err(PathRefusal::Symlink(_))));
        assert_eq!(sb.write_editable("./m.py", "new").unwrap(), "m.py");
        assert_eq!(sb.read("m.py").unwrap(), "new");
        assert_eq!(std::fs::read_to_string(src.path().join("workspace/m.py")).unwrap(), "stub");
    }

    #[test]
    fn tests_replaced_by_a_file_or_a_symlink_are_reported_and_restored() {
        let src = tempfile::tempdir().unwrap();
        let t = task(src.path());
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep.txt"), "host").unwrap();
        for replace in ["file", "symlink"] {
            let sb = Sandbox::create(&t).unwrap();
            let tests = sb.path().join("tests");
            std::fs::remove_dir_all(&tests).unwrap();
            if replace == "file" {
                std::fs::write(&tests, "not a folder").unwrap();
            } else {
                std::os::unix::fs::symlink(outside.path(), &tests).unwrap();
            }
            let changed = sb.restore_tests().unwrap();
            assert_eq!(
                changed,
                vec![
                    "tests/ (replaced by something that is not a folder)".to_string(),
                    "tests/test_m.py".to_string()
                ],
                "{replace}"
            );
            assert_eq!(std::fs::read_to_string(tests.join("test_m.py")).unwrap(), "tests");
            // The link was removed, never followed.
            assert_eq!(std::fs::read_to_string(outside.path().join("keep.txt")).unwrap(), "host");
        }
    }

    #[test]
    fn reads_refuse_fifos_and_cut_large_files() {
        let src = tempfile::tempdir().unwrap();
        let sb = Sandbox::create(&task(src.path())).unwrap();
        let fifo = sb.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        assert!(matches!(sb.read("pipe"), Err(PathRefusal::Missing(_))));
        std::fs::write(sb.path().join("big"), vec![b'x'; READ_CAP as usize + 10]).unwrap();
        let text = sb.read("big").unwrap();
        assert!(
            text.starts_with("xxx")
                && text.ends_with(&format!("[... cut at {READ_CAP} bytes ...]"))
        );
        assert_eq!(
            text.len(),
            READ_CAP as usize + format!("\n[... cut at {READ_CAP} bytes ...]").len()
        );
        // Only the task's own files are shown to a model.
        let shown: Vec<String> =
            sb.task_files(3).into_iter().map(|(n, c)| format!("{n}={c}")).collect();
        assert_eq!(
            shown,
            vec![
                "m.py=stu\n[... cut at 3 bytes ...]".to_string(),
                "tests/test_m.py=tes\n[... cut at 3 bytes ...]".to_string()
            ]
        );
    }

    #[test]
    fn restore_reports_changed_tests_and_snapshot_tracks_edits() {
        let src = tempfile::tempdir().unwrap();
        let t = task(src.path());
        let sb = Sandbox::create(&t).unwrap();
        assert!(sb.restore_tests().unwrap().is_empty());
        std::fs::write(sb.path().join("tests/test_m.py"), "def test(): pass").unwrap();
        std::fs::write(sb.path().join("tests/extra.py"), "x").unwrap();
        let changed = sb.restore_tests().unwrap();
        assert_eq!(changed, vec!["tests/test_m.py".to_string(), "tests/extra.py".to_string()]);
        assert_eq!(std::fs::read_to_string(sb.path().join("tests/test_m.py")).unwrap(), "tests");
        assert!(!sb.path().join("tests/extra.py").exists());
        // The editable files as digested (name, NUL, sha256 hex of the bytes, newline), in Python:
        // hashlib.sha256(b"m.py\0" + hashlib.sha256(b"stub").hexdigest().encode() + b"\n").hexdigest().
        assert_eq!(
            sb.snapshot_sha256(),
            "07a3f6fd1e4f0c32278f0c5fb720d471cd2972d9a24904d17d68e694a02566d6",
            "m.py = \"stub\""
        );
        sb.apply_solution(&t).unwrap();
        assert_eq!(
            sb.snapshot_sha256(),
            "7cf80338eb005456868ba5f468e21efb2865c4fc641d839215f610f9bfdb74d6",
            "m.py = \"solved\""
        );
    }
}
