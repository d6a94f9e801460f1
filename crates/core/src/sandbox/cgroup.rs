//! A memory cgroup of its own for each jail (as root, where the kernel's
//! memory controller can be written): the jail's processes and its private
//! `/tmp` (a tmpfs: its pages are charged to the cgroup of the process that
//! writes them) share one limit, `memory_mb`. rlimits bound each process's
//! address space but not a tmpfs, which would otherwise take host memory
//! outside any limit (N jails at `-j N`, N times).
//!
//! Where no memory controller can be used (not root, no writable hierarchy)
//! the jail's `/tmp` is still capped at `memory_mb` by its size, and the
//! manifest says which (`Isolation::Bubblewrap::memory_cgroup`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// Which memory controller this process can make groups under.
#[derive(Debug, Clone)]
enum Controller {
    /// cgroup v1: `memory.limit_in_bytes` under this folder.
    V1(PathBuf),
    /// cgroup v2: `memory.max` under this folder.
    V2(PathBuf),
}

fn controller() -> Option<&'static Controller> {
    static C: OnceLock<Option<Controller>> = OnceLock::new();
    C.get_or_init(find).as_ref()
}

/// The folder of this process's own memory cgroup, if groups can be made under it.
/// Only root may make groups; asked of the process itself, since `isolation`, which sits on
/// this module, holds the jail's own test.
fn find() -> Option<Controller> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let rel = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "memory") {
            let dir = Path::new("/sys/fs/cgroup/memory").join(rel);
            if dir.join("memory.limit_in_bytes").exists() && probe(&dir, "memory.limit_in_bytes") {
                return Some(Controller::V1(dir));
            }
        }
        if controllers.is_empty() {
            let dir = Path::new("/sys/fs/cgroup").join(rel);
            let enabled =
                std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
            if enabled.split_whitespace().any(|c| c == "memory") && probe(&dir, "memory.max") {
                return Some(Controller::V2(dir));
            }
        }
    }
    None
}

/// Whether a child group with a memory limit can be made under `dir`.
fn probe(dir: &Path, limit_file: &str) -> bool {
    let test = dir.join(format!("ablate-probe-{}", std::process::id()));
    let ok = std::fs::create_dir(&test).is_ok()
        && std::fs::write(test.join(limit_file), "67108864").is_ok();
    let _ = std::fs::remove_dir(&test);
    ok
}

/// Whether jails get a memory cgroup here.
pub fn available() -> bool {
    controller().is_some()
}

/// One jail's memory cgroup; removed when dropped.
#[derive(Debug)]
pub struct MemoryGroup {
    dir: PathBuf,
    /// `cgroup.procs` as a C string, for the forked child to write itself into.
    procs: std::ffi::CString,
}

impl MemoryGroup {
    /// A new group limited to `limit_mb` MiB (processes and tmpfs pages
    /// together), or None where groups cannot be made.
    pub fn create(limit_mb: u64) -> Option<MemoryGroup> {
        static N: AtomicU32 = AtomicU32::new(0);
        let (parent, limit_file) = match controller()? {
            Controller::V1(d) => (d, "memory.limit_in_bytes"),
            Controller::V2(d) => (d, "memory.max"),
        };
        let dir = parent.join(format!(
            "ablate-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).ok()?;
        let bytes = limit_mb.saturating_mul(1 << 20).to_string();
        let group = MemoryGroup {
            procs: std::ffi::CString::new(
                dir.join("cgroup.procs").into_os_string().into_encoded_bytes(),
            )
            .ok()?,
            dir,
        };
        if std::fs::write(group.dir.join(limit_file), &bytes).is_err() {
            return None;
        }
        // v1: no swap beyond the limit either, where swap accounting exists.
        let _ = std::fs::write(group.dir.join("memory.memsw.limit_in_bytes"), &bytes);
        let _ = std::fs::write(group.dir.join("memory.swap.max"), "0");
        Some(group)
    }

    /// The group's `cgroup.procs`, for `join` in a forked child.
    pub fn procs(&self) -> std::ffi::CString {
        self.procs.clone()
    }
}

/// Move the calling process into the group whose `cgroup.procs` is `procs`.
/// Called in the forked child before exec: only open, write and close
/// (async-signal-safe system calls).
pub fn join(procs: &std::ffi::CStr) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(procs, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    // "0" names the writing process itself (v1 and v2).
    rustix::io::write(&fd, b"0")?;
    Ok(())
}

impl Drop for MemoryGroup {
    fn drop(&mut self) {
        // The jail's processes are killed before this; the kernel may take a
        // moment to let go of them.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
