//! What ablate does to a trial's container from the host, never with the
//! container's own binaries (which a root agent may have replaced): the first
//! process is a static init from the host, bound read-only; every other
//! process is stopped through the container's freezer cgroup; the verifier's
//! folders (`/tests`, `/logs/verifier`) are host folders bound in, cleared,
//! filled and read on the host.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where a static init may be on the host (podman's catatonit; `-P` makes it
/// a process that waits and runs nothing).
const STATIC_INITS: &[&str] = &["/usr/libexec/podman/catatonit", "/usr/bin/catatonit"];

/// The path the static init is bound at inside the container.
pub(crate) const INIT_IN_CONTAINER: &str = "/.ablate-init";

/// The host's static init, when there is one that runs.
pub(crate) fn static_init() -> Option<PathBuf> {
    STATIC_INITS
        .iter()
        .map(PathBuf::from)
        .filter_map(|p| p.canonicalize().ok())
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
}

/// A trial's verifier folders on the host: bound at /tests and /logs/verifier.
pub struct VerifierDirs {
    dir: tempfile::TempDir,
}

impl VerifierDirs {
    pub fn new() -> std::io::Result<VerifierDirs> {
        let dir = crate::sandbox::scratch::tempdir("verifier-")?;
        for sub in ["tests", "logs"] {
            std::fs::create_dir(dir.path().join(sub))?;
        }
        let v = VerifierDirs { dir };
        v.open_up()?;
        Ok(v)
    }

    pub fn tests(&self) -> PathBuf {
        self.dir.path().join("tests")
    }

    pub fn logs(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    /// Both folders writable by any user of the container (its verifier user may not be root).
    fn open_up(&self) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        for d in [self.dir.path().to_path_buf(), self.tests(), self.logs()] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777))?;
        }
        Ok(())
    }

    /// Before the verifier: whatever the agent left in either folder removed
    /// (links never followed), the task's tests copied in.
    pub fn reset(&self, task_tests: &Path) -> std::io::Result<()> {
        // Emptied, not replaced: the container's bind holds the folder itself.
        for d in [self.tests(), self.logs()] {
            for entry in std::fs::read_dir(&d)? {
                let path = entry?.path();
                match std::fs::symlink_metadata(&path)?.is_dir() {
                    true => std::fs::remove_dir_all(&path)?,
                    false => std::fs::remove_file(&path)?,
                }
            }
        }
        crate::sandbox::copy_tree(task_tests, &self.tests())?;
        self.open_up()
    }
}

/// Every process of the container but `first` (its init), killed from the
/// host: the container's freezer cgroup frozen (a fork bomb stops forking),
/// each of its processes sent SIGKILL, thawed, until only `first` is left.
/// Err when the container's freezer cannot be written (the caller then falls
/// back to the engine).
pub(crate) fn stop_all_but(first: u32) -> std::io::Result<()> {
    let group = freezer_of(first)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        group.freeze(true)?;
        let pids = group.pids()?;
        for &pid in pids.iter().filter(|&&p| p != first) {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        group.freeze(false)?;
        if pids.iter().all(|&p| p == first) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(std::io::Error::other("processes of the container outlive SIGKILL"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A container's freezer: cgroup v1's `freezer.state` or v2's `cgroup.freeze`.
struct Freezer {
    dir: PathBuf,
    v2: bool,
}

fn freezer_of(pid: u32) -> std::io::Result<Freezer> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        let (Some(controllers), Some(path)) = (controllers, path) else { continue };
        let path = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "freezer") {
            return Ok(Freezer { dir: Path::new("/sys/fs/cgroup/freezer").join(path), v2: false });
        }
        if controllers.is_empty() {
            let dir = Path::new("/sys/fs/cgroup").join(path);
            if dir.join("cgroup.freeze").is_file() {
                return Ok(Freezer { dir, v2: true });
            }
        }
    }
    Err(std::io::Error::other(format!("no freezer cgroup for pid {pid}")))
}

impl Freezer {
    fn freeze(&self, on: bool) -> std::io::Result<()> {
        let (file, value) = match (self.v2, on) {
            (true, on) => ("cgroup.freeze", if on { "1" } else { "0" }),
            (false, true) => ("freezer.state", "FROZEN"),
            (false, false) => ("freezer.state", "THAWED"),
        };
        std::fs::write(self.dir.join(file), value)?;
        if !on || self.v2 {
            return Ok(());
        }
        // v1 freezes asynchronously: FREEZING until every task is frozen.
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(self.dir.join(file))?.trim() != "FROZEN" {
            if Instant::now() > deadline {
                return Err(std::io::Error::other("the container's cgroup does not freeze"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// Every process of the cgroup and of the cgroups below it.
    fn pids(&self) -> std::io::Result<Vec<u32>> {
        let mut out = Vec::new();
        let mut stack = vec![self.dir.clone()];
        while let Some(d) = stack.pop() {
            let text = std::fs::read_to_string(d.join("cgroup.procs"))?;
            out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            for e in std::fs::read_dir(&d)?.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
        Ok(out)
    }
}
