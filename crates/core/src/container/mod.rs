//! Container tasks' environment: a container engine behind one small
//! interface, the docker CLI or the podman CLI (the subset both share: build,
//! run, exec, cp, rm, inspect, ps). docs/harbor.md is the user-facing account.
//!
//! `engine` finds and describes the engine; `image` builds and caches a task's
//! image; `trial` is one trial's container (made, used, removed); `sweep`
//! removes what killed ablate processes left.

pub mod image;
pub mod outside;
pub mod sweep;
pub mod trial;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// Which container engine's CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    Docker,
    Podman,
}

impl EngineKind {
    pub fn program(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
        }
    }
}

/// The engine in use: what the manifest records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Engine {
    pub kind: EngineKind,
    pub program: String,
    /// The engine's (server's) version, as it reports it.
    pub version: String,
}

/// Why a container step failed. Its message is what the trial's record, or
/// the run's setup error, says.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    /// No engine answers (or not the one named): each one's reason.
    #[error(
        "{why}. Container (Harbor) tasks need docker or podman: scripts/install-deps.sh installs and configures podman on Debian"
    )]
    NoEngine { why: ProbeError },
    /// The engine's CLI, or this process's scratch folder, could not be used.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// An engine command ran and failed: what it was for (empty when the
    /// command is the step), then its exit and first line.
    #[error("{}{}", context(.what), .output.why())]
    Failed { what: String, output: Output },
    /// A command inside the container failed: what it was for, its stderr.
    #[error("{what}: {stderr}")]
    InContainer { what: &'static str, stderr: String },
    /// The engine answered, but not with what it should have.
    #[error("{0}")]
    Unexpected(String),
    /// The verifier's reward could not be read.
    #[error(transparent)]
    Reward(#[from] trial::RewardError),
}

fn context(what: &str) -> String {
    if what.is_empty() { String::new() } else { format!("{what}: ") }
}

/// Why no engine answers, as probed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot run `{program}`: {reason}")]
    CannotRun { program: &'static str, reason: String },
    #[error("`{program} info` failed: {first_line}")]
    InfoFailed { program: &'static str, first_line: String },
    #[error("no container engine answers here: docker: {docker}; podman: {podman}")]
    Neither { docker: Box<ProbeError>, podman: Box<ProbeError> },
}

static ENGINE: OnceLock<Result<Engine, ProbeError>> = OnceLock::new();

/// The engine for this process, found once: the one named (`--engine`), else
/// docker when `docker info` answers, else podman when `podman info` does.
/// Detected by what runs, not by a program that exists.
pub fn init(choice: Option<EngineKind>) -> Result<&'static Engine, ContainerError> {
    ENGINE
        .get_or_init(|| match choice {
            Some(kind) => probe(kind),
            None => probe(EngineKind::Docker).or_else(|docker| {
                probe(EngineKind::Podman).map_err(|podman| ProbeError::Neither {
                    docker: Box::new(docker),
                    podman: Box::new(podman),
                })
            }),
        })
        .as_ref()
        .map_err(|why| ContainerError::NoEngine { why: why.clone() })
}

/// The engine `init` found (None before, or when there is none).
pub fn current() -> Option<&'static Engine> {
    ENGINE.get().and_then(|r| r.as_ref().ok())
}

fn probe(kind: EngineKind) -> Result<Engine, ProbeError> {
    let format = match kind {
        EngineKind::Docker => "{{.ServerVersion}}",
        EngineKind::Podman => "{{.Version.Version}}",
    };
    let out = std::process::Command::new(kind.program())
        .args(["info", "--format", format])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| ProbeError::CannotRun { program: kind.program(), reason: e.to_string() })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(ProbeError::InfoFailed {
            program: kind.program(),
            first_line: err.lines().next().unwrap_or("").trim().to_string(),
        });
    }
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(Engine { kind, program: kind.program().to_string(), version })
}

/// What one engine command gave.
#[derive(Debug, Clone)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

impl Output {
    pub fn ok(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }

    /// The first line of stderr (or stdout), for a message.
    pub fn why(&self) -> String {
        let line = self
            .stderr
            .lines()
            .chain(self.stdout.lines())
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("");
        if self.timed_out {
            format!("timed out ({line})")
        } else {
            format!(
                "exit {}: {line}",
                self.code.map(|c| c.to_string()).unwrap_or("by a signal".into())
            )
        }
    }
}

impl Engine {
    /// Run the engine's CLI with `args` (output capped at `cap` bytes a stream), within `timeout`.
    pub async fn command(
        &self,
        args: &[String],
        timeout: Duration,
        cap: usize,
        stdin: Option<&[u8]>,
    ) -> std::io::Result<Output> {
        let mut argv = vec![self.program.clone()];
        argv.extend(args.iter().cloned());
        let env: Vec<(String, String)> =
            ["PATH", "HOME", "DOCKER_HOST", "CONTAINER_HOST", "XDG_RUNTIME_DIR"]
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
                .collect();
        // In this process's folder: the paths it is given may be relative to it.
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let out =
            crate::sandbox::process::run_limited(&argv, &cwd, &env, timeout, cap, None, stdin)
                .await?;
        Ok(Output {
            code: out.exit_code,
            stdout: out.stdout.text(),
            stderr: out.stderr.text(),
            timed_out: out.timed_out,
        })
    }

    /// The id of a local image, None when the engine does not have it.
    pub async fn image_id(&self, name: &str) -> Option<String> {
        let args = vec![
            "image".into(),
            "inspect".into(),
            "--format".into(),
            "{{.Id}}".into(),
            name.into(),
        ];
        let out = self.command(&args, Duration::from_secs(60), 64 * 1024, None).await.ok()?;
        out.ok().then(|| out.stdout.trim().to_string()).filter(|s| !s.is_empty())
    }

    /// The host pid of a running container's first process.
    pub async fn pid(&self, container: &str) -> Result<u32, ContainerError> {
        let args =
            vec!["inspect".into(), "--format".into(), "{{.State.Pid}}".into(), container.into()];
        let out = self.command(&args, Duration::from_secs(60), 64 * 1024, None).await?;
        if !out.ok() {
            return Err(ContainerError::Failed { what: String::new(), output: out });
        }
        out.stdout.trim().parse::<u32>().ok().filter(|p| *p > 0).ok_or_else(|| {
            ContainerError::Unexpected(format!(
                "no pid for container {container}: {}",
                out.stdout.trim()
            ))
        })
    }

    /// Remove a container and everything in it, whatever it is doing.
    pub async fn remove(&self, container: &str) -> Result<(), ContainerError> {
        let args = vec!["rm".into(), "-f".into(), container.into()];
        let out = self.command(&args, Duration::from_secs(120), 64 * 1024, None).await?;
        if out.ok()
            || out.stderr.contains("no such container")
            || out.stderr.contains("No such container")
        {
            Ok(())
        } else {
            Err(ContainerError::Failed { what: String::new(), output: out })
        }
    }

    /// Copy a host folder's contents into a container's folder (made first).
    pub(crate) async fn copy_in(
        &self,
        from: &Path,
        container: &str,
        to: &str,
    ) -> Result<(), ContainerError> {
        let mkdir = vec!["exec".into(), container.into(), "mkdir".into(), "-p".into(), to.into()];
        let out = self.command(&mkdir, Duration::from_secs(60), 64 * 1024, None).await?;
        if !out.ok() {
            return Err(ContainerError::Failed { what: format!("mkdir -p {to}"), output: out });
        }
        self.copy_into(from, container, to).await
    }

    /// Copy a host folder's contents into a container's folder that exists.
    pub(crate) async fn copy_into(
        &self,
        from: &Path,
        container: &str,
        to: &str,
    ) -> Result<(), ContainerError> {
        let args = vec!["cp".into(), format!("{}/.", from.display()), format!("{container}:{to}")];
        let out = self.command(&args, Duration::from_secs(120), 64 * 1024, None).await?;
        if out.ok() {
            Ok(())
        } else {
            let what = format!("cp {} {container}:{to}", from.display());
            Err(ContainerError::Failed { what, output: out })
        }
    }

    /// Read a regular file of a container, at most `cap` bytes (None when it is not there).
    pub async fn read_file(
        &self,
        container: &str,
        path: &str,
        cap: usize,
    ) -> Result<Option<Vec<u8>>, ContainerError> {
        let script = format!(
            "if [ -f {p} ] && [ ! -L {p} ]; then head -c {cap} {p}; else exit 3; fi",
            p = shell_quote(path),
            cap = cap
        );
        let args = vec!["exec".into(), container.into(), "sh".into(), "-c".into(), script];
        let out = self.command(&args, Duration::from_secs(60), cap + 1024, None).await?;
        match out.code {
            Some(0) => Ok(Some(out.stdout.into_bytes())),
            Some(3) => Ok(None),
            _ => Err(ContainerError::Failed { what: String::new(), output: out }),
        }
    }
}

/// A string as one word for `sh`.
pub(crate) fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Where a task's build log and image facts go in the run folder.
pub(crate) fn images_dir(run_dir: &Path) -> PathBuf {
    run_dir.join("images")
}
