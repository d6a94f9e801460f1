//! Running a check as its own process group, with a timeout and capped output.
//!
//! A candidate solution may loop forever, fork children or print without end;
//! none of that may stall the run. The child leads a new process group, the
//! whole group is killed on timeout (and after a normal exit, to reap strays),
//! and each output stream keeps at most `cap` bytes (head and tail). With a
//! `Confinement` the child is the bubblewrap jail of isolation.rs: killing its
//! leader ends the jail's pid namespace, so nothing inside survives.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::isolation::{ChannelEnd, Jail, apply_rlimits};
use crate::record::Isolation;
use crate::suite::Limits;

/// How a candidate process is confined: the isolation in force, what it sees,
/// and its limits.
pub struct Confinement<'a> {
    pub isolation: &'a Isolation,
    pub jail: Jail<'a>,
    pub limits: Limits,
}

/// Bounded capture of one output stream: the first and last `cap / 2` bytes.
#[derive(Debug, Clone, Default)]
pub struct Capture {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    cap: usize,
    pub total_bytes: u64,
}

impl Capture {
    pub fn new(cap: usize) -> Self {
        Capture { cap: cap.max(2), ..Default::default() }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total_bytes += bytes.len() as u64;
        let half = self.cap / 2;
        if self.head.len() < half {
            let take = (half - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(self.cap - half);
        self.tail.drain(..excess);
    }

    pub fn truncated(&self) -> bool {
        self.total_bytes > (self.head.len() + self.tail.len()) as u64
    }

    /// The kept text; an omission marker stands where bytes were dropped.
    pub fn text(&self) -> String {
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.truncated() {
            let omitted = self.total_bytes - (self.head.len() + self.tail.len()) as u64;
            out.push_str(&format!("\n[... {omitted} bytes omitted ...]\n"));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        out.push_str(&String::from_utf8_lossy(&tail));
        out
    }
}

/// The last `max_bytes` bytes of `s`, starting on a char boundary.
pub fn tail(s: &str, max_bytes: usize) -> &str {
    let mut start = s.len().saturating_sub(max_bytes);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

#[derive(Debug, Clone)]
pub struct ProcessOutcome {
    /// Exit code, or None when killed by a signal (including our timeout kill).
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// Ended early because the caller's stop signal fired (see `run_until`).
    pub stopped: bool,
    pub stdout: Capture,
    pub stderr: Capture,
    pub duration: Duration,
}

/// Spawn `argv` in `cwd` as a new process group and wait at most `timeout`.
/// Only the variables in `env` are set: nothing of ablate's environment passes.
/// With `confine`, the command runs inside the jail (where `cwd` is its
/// workspace) under the limits. Returns Err only when the process cannot be
/// started at all.
pub async fn run_limited(
    argv: &[String],
    cwd: &Path,
    env: &[(String, String)],
    timeout: Duration,
    cap: usize,
    confine: Option<&Confinement<'_>>,
    stdin: Option<&[u8]>,
) -> std::io::Result<ProcessOutcome> {
    run_until(argv, cwd, env, timeout, cap, confine, stdin, std::future::pending()).await
}

/// `run_limited`, also ended (the whole group killed) as soon as `stop`
/// completes: an external harness is stopped when its budget runs out.
#[allow(clippy::too_many_arguments)]
pub async fn run_until(
    argv: &[String],
    cwd: &Path,
    env: &[(String, String)],
    timeout: Duration,
    cap: usize,
    confine: Option<&Confinement<'_>>,
    stdin: Option<&[u8]>,
    stop: impl std::future::Future<Output = ()>,
) -> std::io::Result<ProcessOutcome> {
    if argv.is_empty() {
        return Err(std::io::Error::other("empty command"));
    }
    let full: Vec<String> = match confine.map(|c| (c, c.isolation)) {
        Some((c, Isolation::Bubblewrap { bwrap, uid_switch, .. })) => {
            c.jail.argv(Path::new(bwrap), *uid_switch, argv, env, Some(&c.limits))
        }
        _ => argv.to_vec(),
    };
    // The jail's processes and its /tmp under one memory limit, where cgroups can be made.
    let group = confine
        .filter(|c| c.isolation.is_isolated())
        .and_then(|c| super::cgroup::MemoryGroup::create(c.limits.memory_mb));
    let procs = group.as_ref().map(super::cgroup::MemoryGroup::procs);
    let mut cmd = command(&full, cwd, env, confine, stdin.is_some());
    if let Some(c) = confine {
        confine_child(&mut cmd, c, procs);
    }
    let start = Instant::now();
    let child = cmd.spawn();
    if let Some(end) = confine.and_then(|c| c.jail.channel) {
        end.close();
    }
    let mut child = child?;
    let pgid = child.id().map(|id| id as i32);
    if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
        use tokio::io::AsyncWriteExt;
        // Small (a line); a child that never reads cannot block us past the pipe buffer.
        let _ = tokio::time::timeout(Duration::from_secs(5), pipe.write_all(data)).await;
        drop(pipe);
    }
    let out_task = tokio::spawn(read_capped(child.stdout.take(), cap));
    let err_task = tokio::spawn(read_capped(child.stderr.take(), cap));

    let (exit_code, timed_out, stopped) = tokio::select! {
        waited = tokio::time::timeout(timeout, child.wait()) => match waited {
            Ok(status) => (status?.code(), false, false),
            Err(_) => {
                kill_group(pgid);
                let _ = child.wait().await;
                (None, true, false)
            }
        },
        _ = stop => {
            kill_group(pgid);
            let _ = child.wait().await;
            (None, false, true)
        }
    };
    // Reap anything the check left behind in its group.
    kill_group(pgid);
    let duration = start.elapsed();
    let (stdout, stderr) = captures(out_task, err_task, cap).await;
    drop(group);
    Ok(ProcessOutcome { exit_code, timed_out, stopped, stdout, stderr, duration })
}

/// The command of `full` (program, then arguments) in `cwd`, as a new process group with
/// piped output. Only the variables in `env` are set, and none when the jail sets them.
fn command(
    full: &[String],
    cwd: &Path,
    env: &[(String, String)],
    confine: Option<&Confinement<'_>>,
    piped_stdin: bool,
) -> Command {
    let (program, args) = full.split_first().expect("argv is not empty");
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .stdin(if piped_stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if !matches!(confine.map(|c| c.isolation), Some(Isolation::Bubblewrap { .. })) {
        for (k, v) in env {
            cmd.env(k, v);
        }
    }
    cmd
}

/// In the child, before exec: join the jail's network namespace, take the channel as fd 3,
/// join the memory cgroup (`procs`), and apply the limits.
fn confine_child(cmd: &mut Command, c: &Confinement<'_>, procs: Option<std::ffi::CString>) {
    let limits = c.limits;
    let per_uid = matches!(c.isolation, Isolation::Bubblewrap { uid_switch: true, .. });
    let netns = c.jail.netns.filter(|_| c.isolation.is_isolated());
    let channel = c.jail.channel.and_then(ChannelEnd::raw);
    let grouped = procs.is_some();
    // SAFETY: the closure runs in the forked child and calls only setns, dup2,
    // fcntl and setrlimit; the namespace's and the channel's fds stay open (in
    // `c.jail`) until the child has run.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(fd) = netns {
                // The namespace's fd is open for as long as the jail's trial runs.
                super::netns::join(std::os::fd::BorrowedFd::borrow_raw(fd))?;
            }
            if let Some(fd) = channel {
                give_as_fd3(fd)?;
            }
            if let Some(procs) = &procs {
                super::cgroup::join(procs)?;
            }
            apply_rlimits(&limits, per_uid, grouped)
        });
    }
}

/// What the readers of stdout and stderr captured. Pipes close once the group is dead; a
/// process that escaped the group could hold them open, so the wait for EOF is bounded.
async fn captures(
    out_task: tokio::task::JoinHandle<Capture>,
    err_task: tokio::task::JoinHandle<Capture>,
    cap: usize,
) -> (Capture, Capture) {
    let grace = Duration::from_secs(2);
    let stdout = tokio::time::timeout(grace, out_task)
        .await
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or_else(|| Capture::new(cap));
    let stderr = tokio::time::timeout(grace, err_task)
        .await
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or_else(|| Capture::new(cap));
    (stdout, stderr)
}

/// In the forked child: `fd` becomes file descriptor 3, kept open across exec.
fn give_as_fd3(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    if fd != 3 && unsafe { libc::dup2(fd, 3) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // dup2 clears close-on-exec on the new fd, but not when `fd` is already 3.
    if unsafe { libc::fcntl(3, libc::F_SETFD, 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn kill_group(pgid: Option<i32>) {
    if let Some(pgid) = pgid.and_then(rustix::process::Pid::from_raw) {
        // A group that no longer exists gives ESRCH, which is fine.
        let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
    }
}

async fn read_capped<R: AsyncRead + Unpin>(stream: Option<R>, cap: usize) -> Capture {
    let mut capture = Capture::new(cap);
    let Some(mut stream) = stream else { return capture };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => capture.push(&buf[..n]),
        }
    }
    capture
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn capture_keeps_head_and_tail() {
        let mut c = Capture::new(10);
        c.push(b"0123456789abcdefghij");
        assert!(c.truncated());
        // Cap 10: the first 5 and the last 5 of the 20 bytes, 20 - 10 = 10 omitted.
        assert_eq!(c.text(), "01234\n[... 10 bytes omitted ...]\nfghij");
    }

    #[tokio::test]
    async fn exit_code_and_output() {
        let dir = tempfile::tempdir().unwrap();
        let out = run_limited(
            &sh("echo hi; echo err >&2; exit 3"),
            dir.path(),
            &[],
            Duration::from_secs(5),
            1000,
            None,
            None,
        )
        .await
        .unwrap();
        assert_eq!(out.exit_code, Some(3));
        assert!(!out.timed_out);
        assert_eq!(out.stdout.text(), "hi\n");
        assert_eq!(out.stderr.text(), "err\n");
    }

    #[tokio::test]
    async fn hanging_group_is_killed_at_timeout() {
        let dir = tempfile::tempdir().unwrap();
        // The child forks a grandchild that also sleeps; both must die.
        let start = Instant::now();
        let out = run_limited(
            &sh("sleep 30 & sleep 30; echo never"),
            dir.path(),
            &[],
            Duration::from_millis(300),
            1000,
            None,
            None,
        )
        .await
        .unwrap();
        assert!(out.timed_out);
        assert_eq!(out.exit_code, None);
        assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
        assert!(!out.stdout.text().contains("never"));
    }

    #[tokio::test]
    async fn flooding_output_is_capped() {
        let dir = tempfile::tempdir().unwrap();
        let out = run_limited(
            &sh("yes flood | head -c 5000000"),
            dir.path(),
            &[("PATH".into(), "/usr/bin:/bin".into())],
            Duration::from_secs(20),
            4096,
            None,
            None,
        )
        .await
        .unwrap();
        assert_eq!(out.stdout.total_bytes, 5_000_000);
        // Cap 4096: the first and the last 2048 bytes. 2048 = 341 * 6 + 2 and 5_000_000 - 2048 is a
        // multiple of 6, so both are "flood\n" x 341 + "fl"; 5_000_000 - 4096 = 4_995_904 omitted, and
        // the text is 2048 + 33 + 2048 = 4129 bytes (Python: ("flood\n" * 833334)[:5000000]).
        let kept = format!("{}fl", "flood\n".repeat(341));
        let text = out.stdout.text();
        assert_eq!(text.len(), 4129);
        assert_eq!(text, format!("{kept}\n[... 4995904 bytes omitted ...]\n{kept}"));
    }
}
