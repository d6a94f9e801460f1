//! The isolation every process that runs candidate code gets: bubblewrap
//! namespaces, a per-trial unprivileged uid, rlimits and a cleared environment.
//!
//! Inside the jail a check sees a read-only system (`/usr`, `/etc`, the Python
//! installation), its own workspace at `/workspace` (the only writable place
//! besides a private `/tmp`), its tests read-only at `/workspace/tests`, and the
//! grader's runner read-only at `/ablate`. No network (a new, empty network
//! namespace), no other process (a new pid namespace, so nothing outside can be
//! seen or signalled), no suite, no results folder. When ablate dies, bwrap dies
//! (`--die-with-parent`), and with it the pid namespace and everything in it.
//! docs/sandbox.md holds the threat model.

use crate::record::Isolation;
use crate::suite::Limits;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// Where the workspace, the runner and its result file appear inside the jail.
pub(crate) const JAIL_WORKSPACE: &str = "/workspace";
pub(crate) const JAIL_RUNNER_DIR: &str = "/ablate";
pub(crate) const JAIL_OUT_DIR: &str = "/ablate-out";

/// The variables a check gets (everything else of ablate's environment,
/// API keys among them, stays out).
pub(crate) fn check_env(python_bin_dir: Option<&Path>) -> Vec<(String, String)> {
    let mut path = String::new();
    if let Some(dir) = python_bin_dir {
        path.push_str(&dir.to_string_lossy());
        path.push(':');
    }
    path.push_str("/usr/local/bin:/usr/bin:/bin");
    [
        ("PATH", path.as_str()),
        ("HOME", "/tmp"),
        ("TMPDIR", "/tmp"),
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C.UTF-8"),
        ("PYTHONDONTWRITEBYTECODE", "1"),
        ("PYTHONHASHSEED", "0"),
        ("PYTHONUNBUFFERED", "1"),
        ("PYTHONNOUSERSITE", "1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

static CHOSEN: OnceLock<Isolation> = OnceLock::new();

/// No sandbox here, and none was waived: why, and how to get one.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "no sandbox for candidate code: {reason}. Install bubblewrap (Debian: apt-get install bubblewrap), \
     or pass --unsandboxed to run candidate code without isolation (recorded as isolation: none)"
)]
pub struct NoSandbox {
    /// Why bubblewrap cannot build the jail here (as probed).
    pub reason: String,
}

/// Decide the isolation for this process, once: bubblewrap (the `bwrap`
/// given, else `bwrap` on PATH) when it works here; otherwise an error that
/// says how to get it, unless `allow_none`.
pub fn init(
    allow_none: bool,
    bwrap: Option<&std::path::Path>,
) -> Result<&'static Isolation, NoSandbox> {
    if let Some(i) = CHOSEN.get() {
        return Ok(i);
    }
    let found = match probe(bwrap) {
        Ok(iso) => iso,
        Err(why) if allow_none => Isolation::None { reason: why.to_string() },
        Err(why) => return Err(NoSandbox { reason: why.to_string() }),
    };
    if let Isolation::None { reason } = &found {
        eprintln!(
            "WARNING: candidate code runs WITHOUT a sandbox ({reason}); the manifest records isolation: none"
        );
    }
    Ok(CHOSEN.get_or_init(|| found))
}

/// The isolation in force; bubblewrap (on PATH) is required unless `init`
/// chose otherwise first.
pub fn current() -> Result<&'static Isolation, NoSandbox> {
    init(false, None)
}

fn bwrap_on_path() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|d| d.join("bwrap")).find(|p| p.is_file())
    })
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Why bubblewrap cannot build the jail here, as probed (the manifest records it as text when
/// the sandbox is waived: `Isolation::None`).
#[derive(Debug, thiserror::Error)]
enum ProbeError {
    #[error("bwrap (bubblewrap) is not on PATH")]
    NotOnPath,
    #[error("cannot run {bwrap}: {source}")]
    CannotRun { bwrap: String, source: std::io::Error },
    #[error("{0}")]
    TempDir(std::io::Error),
    #[error("no jail uid: {0}")]
    NoJailUid(std::io::Error),
    #[error("bubblewrap cannot create the sandbox here ({status}): {stderr}")]
    Refused { status: std::process::ExitStatus, stderr: String },
}

/// Find bwrap and prove it can build the jail here (namespaces may be refused).
fn probe(given: Option<&std::path::Path>) -> Result<Isolation, ProbeError> {
    let bwrap = match given {
        Some(p) => p.to_path_buf(),
        None => bwrap_on_path().ok_or(ProbeError::NotOnPath)?,
    };
    let cannot_run = |source| ProbeError::CannotRun { bwrap: bwrap.display().to_string(), source };
    let version =
        std::process::Command::new(&bwrap).arg("--version").output().map_err(cannot_run)?;
    let version = String::from_utf8_lossy(&version.stdout)
        .trim()
        .trim_start_matches("bubblewrap ")
        .to_string();
    let uid_switch = is_root();
    let dir = tempfile::tempdir().map_err(ProbeError::TempDir)?;
    let lease = lease_uid().map_err(ProbeError::NoJailUid)?;
    let jail = Jail::of(dir.path(), lease.uid());
    let argv = jail.argv(&bwrap, uid_switch, &["/bin/true".to_string()], &check_env(None), None);
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .output()
        .map_err(cannot_run)?;
    if !out.status.success() {
        return Err(ProbeError::Refused {
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(Isolation::Bubblewrap {
        bwrap: bwrap.display().to_string(),
        version,
        uid_switch,
        memory_cgroup: super::cgroup::available(),
    })
}

/// The first jail uid and the number of them: a range far above ordinary accounts.
pub const UID_BASE: u32 = 200_000;
pub const UID_SLOTS: u32 = 4096;

/// A jail uid held by this process: as root, an OS lock on
/// `<uid dir>/<uid>` that no other ablate process on the machine can take
/// while it is held (released when dropped, or when the process ends however
/// it ends), so two concurrent runs never share a uid and the process limit
/// counts only that jail's processes. Without root the jail runs in a user
/// namespace of its own and the uid is only a label.
#[derive(Debug)]
pub struct UidLease {
    uid: u32,
    _lock: Option<std::fs::File>,
}

impl UidLease {
    pub fn uid(&self) -> u32 {
        self.uid
    }
}

/// Where the uid locks live: /run (root's, cleared at boot) when present.
pub(crate) fn uid_dir() -> PathBuf {
    let run = Path::new("/run");
    if run.is_dir() { run.join("ablate-uids") } else { std::env::temp_dir().join("ablate-uids") }
}

static LEASED: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Every uid this process has leased so far (for tests that look for leftovers).
pub fn leased_uids() -> Vec<u32> {
    LEASED.lock().unwrap().clone()
}

/// Take `uid` if no other process holds it; None when it is held.
pub fn try_lease(uid: u32) -> std::io::Result<Option<UidLease>> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = uid_dir();
    if let Err(e) = std::fs::create_dir(&dir)
        && e.kind() != std::io::ErrorKind::AlreadyExists
    {
        return Err(std::io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())));
    }
    let path = dir.join(uid.to_string());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => {
            LEASED.lock().unwrap().push(uid);
            Ok(Some(UidLease { uid, _lock: Some(file) }))
        }
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// A uid of its own for a sandbox: as root, one no other live ablate process
/// holds (tried from a random slot on); otherwise the next label.
pub(crate) fn lease_uid() -> std::io::Result<UidLease> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    if !is_root() {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        return Ok(UidLease { uid: UID_BASE + n % UID_SLOTS, _lock: None });
    }
    let start = rand::random::<u32>() % UID_SLOTS;
    for i in 0..UID_SLOTS {
        let uid = UID_BASE + (start + i) % UID_SLOTS;
        if let Some(lease) = try_lease(uid)? {
            return Ok(lease);
        }
    }
    Err(std::io::Error::other(format!(
        "all {UID_SLOTS} jail uids ({UID_BASE} and up) are held by other ablate processes"
    )))
}

/// One end of a socket pair, given to a jail's process as its file descriptor
/// 3 (`Jail::channel`); ablate's own copy is closed as soon as the process has
/// started, so that the other end sees the end of the stream when it exits.
pub struct ChannelEnd(std::sync::Mutex<Option<std::os::fd::OwnedFd>>);

impl ChannelEnd {
    pub fn new(fd: impl Into<std::os::fd::OwnedFd>) -> ChannelEnd {
        ChannelEnd(std::sync::Mutex::new(Some(fd.into())))
    }

    pub(super) fn raw(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.0.lock().unwrap().as_ref().map(|fd| fd.as_raw_fd())
    }

    pub(super) fn close(&self) {
        self.0.lock().unwrap().take();
    }
}

/// What one check sees: host paths bound into the jail.
pub struct Jail<'a> {
    /// Bound read-write at /workspace.
    pub workspace: &'a Path,
    /// Bound read-only over /workspace/tests.
    pub tests: Option<&'a Path>,
    /// The grader's runner, read-only at /ablate.
    pub runner_dir: Option<&'a Path>,
    /// The runner's result file lives here, read-write at /ablate-out.
    pub out_dir: Option<&'a Path>,
    pub uid: u32,
    /// Python installations outside /usr (pyenv, a venv), bound read-only.
    pub python_prefixes: &'a [PathBuf],
    /// More read-only binds: (host path, path in the jail).
    pub ro_binds: &'a [(PathBuf, String)],
    /// Join this network namespace (netns.rs) instead of an empty one of the jail's own.
    pub netns: Option<std::os::fd::RawFd>,
    /// Given to the jail's process as its file descriptor 3: the channel of
    /// out-of-process grading (grader/remote.py).
    pub channel: Option<&'a ChannelEnd>,
}

impl<'a> Jail<'a> {
    /// A jail of `workspace` alone, run as `uid`: no tests, runner or output folder, no Python
    /// installation, no more binds, a network namespace of its own (empty). The setup probes
    /// start from it and add what they check.
    pub fn of(workspace: &'a Path, uid: u32) -> Jail<'a> {
        Jail {
            workspace,
            tests: None,
            runner_dir: None,
            out_dir: None,
            uid,
            python_prefixes: &[],
            ro_binds: &[],
            netns: None,
            channel: None,
        }
    }

    /// The full argv: bwrap, its options, then (as root) setpriv to the jail's
    /// uid. With `limits`, the private /tmp holds at most `memory_mb`.
    pub fn argv(
        &self,
        bwrap: &Path,
        uid_switch: bool,
        command: &[String],
        env: &[(String, String)],
        limits: Option<&Limits>,
    ) -> Vec<String> {
        let mut a: Vec<String> = vec![bwrap.display().to_string()];
        self.push_namespaces(&mut a, uid_switch);
        push_system(&mut a);
        push_scratch(&mut a, limits);
        self.push_installations(&mut a);
        self.push_binds(&mut a);
        self.push_command(&mut a, uid_switch, command, env);
        a
    }

    /// The namespaces the jail leaves (the network one unless it joins `netns`, the user one
    /// unless root switches uid), and a clear environment.
    fn push_namespaces(&self, a: &mut Vec<String>, uid_switch: bool) {
        let mut push = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
        push(&["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]);
        if self.netns.is_none() {
            push(&["--unshare-net"]);
        }
        if !uid_switch {
            push(&["--unshare-user"]);
        }
        push(&["--die-with-parent", "--new-session", "--clearenv"]);
    }

    /// Python installations outside /usr bound read-only, after the private /tmp, so that an
    /// installation under the host's /tmp is bound over it, not hidden by it. Folders bwrap
    /// makes on the way to a bind copy their host modes (0700 for /root): made here as 0755
    /// first, so the jail's uid can pass; for the more read-only binds too.
    fn push_installations(&self, a: &mut Vec<String>) {
        let mut made: Vec<PathBuf> =
            vec![PathBuf::from("/tmp"), PathBuf::from("/dev"), PathBuf::from("/proc")];
        let mut traversable = |a: &mut Vec<String>, path: &Path| {
            let mut cur = PathBuf::from("/");
            let parts: Vec<_> = path.components().skip(1).collect();
            for part in parts.iter().take(parts.len().saturating_sub(1)) {
                cur.push(part);
                if cur.starts_with("/usr") || cur.starts_with("/etc") || made.contains(&cur) {
                    continue;
                }
                made.push(cur.clone());
                a.extend([
                    "--perms".into(),
                    "0755".into(),
                    "--dir".into(),
                    cur.display().to_string(),
                ]);
            }
        };
        for prefix in self.python_prefixes {
            if prefix.starts_with("/usr") || !prefix.is_dir() {
                continue;
            }
            traversable(a, prefix);
            let p = prefix.display().to_string();
            a.extend(["--ro-bind".to_string(), p.clone(), p]);
        }
        for (_, jail) in self.ro_binds {
            traversable(a, Path::new(jail));
        }
    }

    /// The workspace, the tests over it, the runner, its output folder, the more read-only
    /// binds.
    fn push_binds(&self, a: &mut Vec<String>) {
        let s = |p: &Path| p.display().to_string();
        a.extend(["--bind".into(), s(self.workspace), JAIL_WORKSPACE.into()]);
        if let Some(tests) = self.tests {
            a.extend(["--ro-bind".into(), s(tests), format!("{JAIL_WORKSPACE}/tests")]);
        }
        if let Some(dir) = self.runner_dir {
            a.extend(["--ro-bind".into(), s(dir), JAIL_RUNNER_DIR.into()]);
        }
        if let Some(dir) = self.out_dir {
            a.extend(["--bind".into(), s(dir), JAIL_OUT_DIR.into()]);
        }
        for (host, jail) in self.ro_binds {
            a.extend(["--ro-bind".into(), s(host), jail.clone()]);
        }
    }

    /// In the workspace, with `env`: the command, as root through setpriv to the jail's uid.
    fn push_command(
        &self,
        a: &mut Vec<String>,
        uid_switch: bool,
        command: &[String],
        env: &[(String, String)],
    ) {
        a.extend(["--chdir".into(), JAIL_WORKSPACE.into()]);
        for (k, v) in env {
            a.extend(["--setenv".into(), k.clone(), v.clone()]);
        }
        a.push("--".into());
        if uid_switch {
            let uid = self.uid.to_string();
            a.extend([
                "setpriv".into(),
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--clear-groups".into(),
                "--no-new-privs".into(),
                "--bounding-set=-all".into(),
                "--inh-caps=-all".into(),
                "--".into(),
            ]);
        }
        a.extend(command.iter().cloned());
    }
}

/// The host's system, read-only: /usr, /etc, and the top folders (/bin, /lib...) as the
/// symlinks or folders they are.
fn push_system(a: &mut Vec<String>) {
    a.extend(["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"].map(String::from));
    for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        match std::fs::symlink_metadata(top) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(top) {
                    a.extend([
                        "--symlink".to_string(),
                        target.display().to_string(),
                        top.to_string(),
                    ]);
                }
            }
            Ok(m) if m.is_dir() => {
                a.extend(["--ro-bind".to_string(), top.to_string(), top.to_string()])
            }
            _ => {}
        }
    }
}

/// /dev, /proc, and a private /tmp and /dev/shm, each capped at `memory_mb` with `limits`.
fn push_scratch(a: &mut Vec<String>, limits: Option<&Limits>) {
    a.extend(["--dev".into(), "/dev".into(), "--proc".into(), "/proc".into()]);
    if let Some(l) = limits {
        a.extend(["--size".into(), l.memory_mb.saturating_mul(1 << 20).to_string()]);
    }
    a.extend(["--perms".into(), "1777".into(), "--tmpfs".into(), "/tmp".into()]);
    // A writable /dev/shm of its own (multiprocessing's semaphores live there), capped as /tmp.
    if let Some(l) = limits {
        a.extend(["--size".into(), l.memory_mb.saturating_mul(1 << 20).to_string()]);
    }
    a.extend(["--perms".into(), "1777".into(), "--tmpfs".into(), "/dev/shm".into()]);
}

/// Set the limits in a forked child before exec (async-signal-safe calls only).
/// `processes` is left out when the limit cannot be per-sandbox (no uid of its
/// own): RLIMIT_NPROC counts every process of the user. The address space is
/// left unbounded only where a memory cgroup holds the jail (`grouped`) and the
/// limits say so (`Limits::address_space`).
pub(crate) fn apply_rlimits(l: &Limits, processes: bool, grouped: bool) -> std::io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    // setrlimit is one system call (async-signal-safe); rustix makes it without libc.
    let set = |res, value: u64| {
        setrlimit(res, Rlimit { current: Some(value), maximum: Some(value) })
            .map_err(std::io::Error::from)
    };
    if l.address_space || !grouped {
        set(Resource::As, l.memory_mb.saturating_mul(1 << 20))?;
    }
    set(Resource::Fsize, l.file_size_mb.saturating_mul(1 << 20))?;
    set(Resource::Cpu, l.cpu_seconds)?;
    if processes {
        set(Resource::Nproc, l.processes)?;
    }
    set(Resource::Nofile, l.open_files)?;
    set(Resource::Core, 0)?;
    Ok(())
}
