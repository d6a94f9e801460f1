//! One trial's container: made fresh from the task's image with its limits
//! always set, used through `exec` (the agent's shell, the verifier), and
//! removed when the trial ends (or, after a kill, by `sweep`).

use super::{ContainerError, Engine};
use crate::record::VerifierRecord;
use crate::sandbox::process::{Capture, ProcessOutcome};
use crate::suite::harbor::{ContainerTask, NetworkMode};
use crate::suite::{ContainerSettings, Task};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Labels every container of ablate's carries.
pub(crate) const LABEL_SCRATCH: &str = "ablate.scratch";
pub(crate) const LABEL_TRIAL: &str = "ablate.trial";

use crate::record::design::Resources;

/// Bytes of a verifier's reward file read.
const REWARD_CAP: usize = 64 * 1024;

/// What a trial's container is made with.
pub struct Spec<'a> {
    pub task: &'a Task,
    /// The task's container settings (what its `TaskKind::Container` holds).
    pub container: &'a ContainerTask,
    pub image_id: &'a str,
    pub settings: &'a ContainerSettings,
    /// The resources the trial's arm sets over the task's and the suite's.
    pub resources: Resources,
    pub trial_id: &'a str,
    pub attempt: u32,
    /// Read-only binds: (host path, path in the container).
    pub binds: Vec<(PathBuf, String)>,
    /// Variables set in the container beside the task's `[environment].env`.
    pub env: Vec<(String, String)>,
    /// The variables of ablate's environment the experiment passes (`pass_env`):
    /// the task's `${VAR}` are resolved from these alone.
    pub passed_env: &'a BTreeMap<String, String>,
}

/// The limits a trial's container runs under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub cpus: f64,
    pub memory_mb: u64,
    pub pids: u64,
}

/// A trial's limits: what its arm sets, else the task's, else the suite's.
pub fn limits(task: &ContainerTask, settings: &ContainerSettings, arm: &Resources) -> Limits {
    Limits {
        cpus: arm.cpus.or(task.cpus).unwrap_or(settings.cpus),
        memory_mb: arm.memory_mb.or(task.memory_mb).unwrap_or(settings.memory_mb),
        pids: arm.pids.unwrap_or(settings.pids_limit),
    }
}

pub struct TrialContainer {
    engine: &'static Engine,
    pub id: String,
    pub name: String,
    workdir: Option<String>,
    agent_user: Option<String>,
    removed: bool,
    /// The host folders bound at /tests and /logs/verifier.
    verifier_dirs: super::outside::VerifierDirs,
    /// The host pid of the container's first process (a static init from the host, where there is one).
    first_pid: Option<u32>,
    /// The task's `[verifier].env` and `[solution].env`, resolved from the passed variables.
    verifier_env: Vec<(String, String)>,
    solution_env: Vec<(String, String)>,
    /// The task's `[verifier]` user and timeout.
    verifier_user: Option<String>,
    verifier_timeout_sec: f64,
}

/// The command a container runs as its first process: nothing but waiting.
const IDLE: &str = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done";

/// The limits a container is always run with.
fn limit_args(l: &Limits) -> Vec<String> {
    vec![
        "--memory".into(),
        format!("{}m", l.memory_mb),
        "--memory-swap".into(),
        format!("{}m", l.memory_mb),
        "--cpus".into(),
        format!("{}", l.cpus),
        "--pids-limit".into(),
        l.pids.to_string(),
        // Both limits together: one --ulimit replaces the engine's defaults.
        "--ulimit".into(),
        "nofile=20000:20000".into(),
        "--ulimit".into(),
        "nproc=32768:32768".into(),
    ]
}

/// The image and the container's first process, which runs nothing of the
/// image's (a replaced `sleep` is never restarted): the host's static init,
/// bound read-only, where there is one; else the image's `sh` waiting.
fn first_process(image_id: &str) -> Vec<String> {
    match super::outside::static_init() {
        Some(init) => vec![
            "--volume".into(),
            format!("{}:{}:ro", init.display(), super::outside::INIT_IN_CONTAINER),
            "--entrypoint".into(),
            super::outside::INIT_IN_CONTAINER.into(),
            image_id.to_string(),
            "-P".into(),
        ],
        None => vec![
            "--entrypoint".into(),
            "/bin/sh".into(),
            image_id.to_string(),
            "-c".into(),
            IDLE.into(),
        ],
    }
}

impl TrialContainer {
    /// A fresh container of the task's image: its limits, no network (or the
    /// engine's default where the task's network is public and allowed), the
    /// labels that let a later ablate process remove it.
    pub async fn start(
        engine: &'static Engine,
        spec: &Spec<'_>,
    ) -> Result<TrialContainer, ContainerError> {
        let task = spec.container;
        let l = limits(task, spec.settings, &spec.resources);
        let scratch = crate::sandbox::scratch::dir()?;
        let scratch_name =
            scratch.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let name =
            format!("ablate-{}-{}-{:08x}", spec.trial_id, spec.attempt, rand::random::<u32>());
        let mut args: Vec<String> = vec!["run".into(), "-d".into(), "--name".into(), name.clone()];
        args.extend(["--label".into(), format!("{LABEL_SCRATCH}={scratch_name}")]);
        args.extend(["--label".into(), format!("{LABEL_TRIAL}={}", spec.trial_id)]);
        if task.network == NetworkMode::None {
            args.extend(["--network".into(), "none".into()]);
        }
        args.extend(limit_args(&l));
        if let Some(w) = &task.workdir {
            args.extend(["--workdir".into(), w.clone()]);
        }
        let resolve = |table: &[(String, String)]| {
            crate::suite::harbor::resolve_env(table, spec.passed_env)
                .map_err(|e| ContainerError::Unexpected(format!("task `{}`: {e}", spec.task.id)))
        };
        let (env, verifier_env, solution_env) =
            (resolve(&task.env)?, resolve(&task.verifier_env)?, resolve(&task.solution_env)?);
        for (k, v) in env.iter().chain(&spec.env) {
            args.extend(["--env".into(), format!("{k}={v}")]);
        }
        for (host, inside) in &spec.binds {
            args.extend(["--volume".into(), format!("{}:{inside}:ro", host.display())]);
        }
        // The verifier's folders are the host's: cleared, filled and read there.
        let verifier_dirs = super::outside::VerifierDirs::new()?;
        args.extend(["--volume".into(), format!("{}:/tests", verifier_dirs.tests().display())]);
        let logs = verifier_dirs.logs();
        args.extend(["--volume".into(), format!("{}:/logs/verifier", logs.display())]);
        args.extend(first_process(spec.image_id));
        let out = engine.command(&args, Duration::from_secs(300), 64 * 1024, None).await?;
        if !out.ok() {
            // A container that was made but did not start is removed all the same.
            let _ = engine.remove(&name).await;
            let what = "the trial's container did not start".into();
            return Err(ContainerError::Failed { what, output: out });
        }
        let mut c = TrialContainer {
            engine,
            id: out.stdout.trim().to_string(),
            name,
            workdir: task.workdir.clone(),
            agent_user: task.agent_user.clone(),
            removed: false,
            verifier_dirs,
            first_pid: None,
            verifier_env,
            solution_env,
            verifier_user: task.verifier_user.clone(),
            verifier_timeout_sec: task.verifier_timeout_sec,
        };
        c.first_pid = c.pid().await.ok();
        // The folders Harbor's tasks expect (before the agent has run anything).
        let prep = c.exec_root("mkdir -p /logs/agent", Duration::from_secs(60)).await;
        if prep.exit_code != Some(0) {
            return Err(ContainerError::InContainer {
                what: "cannot prepare the trial's container",
                stderr: prep.stderr.text().trim().to_string(),
            });
        }
        Ok(c)
    }

    /// The host pid of the container's first process (its network namespace is the trial's),
    /// as read when the container started.
    pub async fn pid(&self) -> Result<u32, ContainerError> {
        match self.first_pid {
            Some(pid) => Ok(pid),
            None => self.engine.pid(&self.name).await,
        }
    }

    /// Run `argv` in the container as `user` (None: the image's), in
    /// `workdir` (None: the task's, else the image's), with `env`, for at
    /// most `timeout` (killed inside the container, and the client with it).
    pub async fn exec(
        &self,
        argv: &[String],
        user: Option<&str>,
        env: &[(String, String)],
        timeout: Duration,
        cap: usize,
        stdin: Option<&[u8]>,
    ) -> ProcessOutcome {
        self.handle().exec_with(argv, user, env, timeout, cap, stdin, true).await
    }

    /// A handle that runs commands in this container (for the gateway's exec
    /// endpoint); it does not keep the container alive.
    pub fn handle(&self) -> ContainerExec {
        ContainerExec {
            engine: self.engine,
            name: self.name.clone(),
            workdir: self.workdir.clone(),
            agent_user: self.agent_user.clone(),
        }
    }

    /// A script as root, without the `timeout` wrapper (it may stop every
    /// other process of the container, which would be the wrapper too).
    async fn exec_root(&self, script: &str, timeout: Duration) -> ProcessOutcome {
        self.handle()
            .exec_with(
                &["sh".into(), "-c".into(), script.into()],
                Some("0"),
                &[],
                timeout,
                64 * 1024,
                None,
                false,
            )
            .await
    }

    /// The task's agent user (None: the image's).
    pub fn agent_user(&self) -> Option<&str> {
        self.agent_user.as_deref()
    }

    /// The task's working folder, when task.toml names one (else the image's WORKDIR).
    pub fn workdir(&self) -> Option<&str> {
        self.workdir.as_deref()
    }

    /// Run `argv` as the agent until it exits, `stop` completes or `timeout`
    /// passes; then every process it left in the container is stopped.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn exec_until(
        &self,
        argv: &[String],
        env: &[(String, String)],
        timeout: Duration,
        cap: usize,
        stop: impl std::future::Future<Output = ()>,
    ) -> std::io::Result<ProcessOutcome> {
        let mut args: Vec<String> = vec![self.engine.program.clone()];
        args.extend(self.handle().exec_args(self.agent_user.as_deref(), env, false));
        args.extend(argv.iter().cloned());
        let env_host = engine_env();
        let out = crate::sandbox::process::run_until(
            &args,
            Path::new("/"),
            &env_host,
            timeout,
            cap,
            None,
            None,
            stop,
        )
        .await;
        self.stop_all().await;
        out
    }

    /// Copy a host folder's contents into the container's folder `to`.
    pub(crate) async fn copy_in(&self, from: &Path, to: &str) -> Result<(), ContainerError> {
        self.engine.copy_in(from, &self.name, to).await
    }

    /// Stop every process of the container but its first: from the host,
    /// through the container's freezer cgroup (a fork bomb cannot outrun it,
    /// and no binary of the container runs); where that cgroup cannot be
    /// written (a rootless engine), `kill -9 -1` in the container.
    pub(crate) async fn stop_all(&self) {
        if let Some(first) = self.first_pid {
            let done = tokio::task::spawn_blocking(move || super::outside::stop_all_but(first));
            if matches!(done.await, Ok(Ok(()))) {
                return;
            }
        }
        let _ = self.exec_root("kill -9 -1 2>/dev/null; true", Duration::from_secs(30)).await;
    }

    /// The agent's shell: `bash -lc CMD` as the task's agent user.
    pub async fn shell(
        &self,
        command: &str,
        timeout: Duration,
        cap: usize,
        stdin: Option<&[u8]>,
    ) -> ProcessOutcome {
        self.handle().shell(command, timeout, cap, stdin).await
    }

    /// Run the task's oracle, `solution/solve.sh`, as Harbor does (for `suite check`).
    pub(crate) async fn run_oracle(
        &self,
        task: &Task,
        timeout: Duration,
    ) -> Result<ProcessOutcome, ContainerError> {
        self.engine.copy_in(&task.dir.join("solution"), &self.name, "/solution").await?;
        let mut env = vec![("DEBIAN_FRONTEND".to_string(), "noninteractive".to_string())];
        env.extend(self.solution_env.iter().cloned());
        Ok(self
            .exec(
                &["bash".into(), "/solution/solve.sh".into()],
                self.agent_user.as_deref(),
                &env,
                timeout,
                64 * 1024,
                None,
            )
            .await)
    }

    /// Harbor's verifier, without its holes: every process the agent left is
    /// stopped, a fresh /logs/verifier made, the task's tests copied to /tests
    /// (the agent never saw them), `bash /tests/test.sh` run under the verifier
    /// timeout, and the reward read from reward.json (first) or reward.txt.
    /// A missing, empty or unreadable reward, or a verifier timeout, is an
    /// error of the verification (never a reward of 0).
    pub async fn verify(&self, task: &Task, threshold: f64) -> VerifierRecord {
        let started = Instant::now();
        let mut rec = VerifierRecord {
            mode: "shared".into(),
            command: vec!["bash".into(), "/tests/test.sh".into()],
            exit_code: None,
            timed_out: false,
            reward: None,
            rewards: BTreeMap::new(),
            reward_file: None,
            threshold,
            passed: false,
            error: None,
            output: String::new(),
            duration_ms: 0,
        };
        self.stop_all().await;
        if let Err(e) = self.verifier_dirs.reset(&task.dir.join("tests")) {
            rec.error = Some(format!("cannot prepare the verifier's folders: {e}"));
            return rec;
        }
        let mut env = vec![("TEST_DIR".to_string(), "/tests".to_string())];
        env.extend(self.verifier_env.iter().cloned());
        let out = self
            .exec(
                &rec.command.clone(),
                self.verifier_user.as_deref(),
                &env,
                Duration::from_secs_f64(self.verifier_timeout_sec),
                64 * 1024,
                None,
            )
            .await;
        rec.exit_code = out.exit_code;
        rec.timed_out = out.timed_out;
        rec.output = crate::sandbox::process::tail(
            &format!("{}{}", out.stdout.text(), out.stderr.text()),
            4096,
        )
        .to_string();
        rec.duration_ms = started.elapsed().as_millis() as u64;
        if out.timed_out {
            rec.error =
                Some(format!("the verifier ran past its {} s timeout", self.verifier_timeout_sec));
            return rec;
        }
        // Nothing the verifier started writes on after it is read.
        self.stop_all().await;
        match self.read_reward() {
            Ok((file, rewards, reward)) => {
                rec.reward_file = Some(file);
                rec.rewards = rewards;
                rec.reward = Some(reward);
                rec.passed = reward >= threshold;
            }
            Err(e) => rec.error = Some(e.to_string()),
        }
        rec
    }

    /// (file, every value, the reward) from /logs/verifier, read on the host:
    /// reward.json when it is there (a regular file), else reward.txt.
    fn read_reward(&self) -> Result<(String, BTreeMap<String, f64>, f64), RewardError> {
        let logs = self.verifier_dirs.logs();
        for file in ["reward.json", "reward.txt"] {
            let path = logs.join(file);
            if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file()) {
                continue;
            }
            let body = crate::sandbox::read_regular(&path, REWARD_CAP as u64)
                .map_err(|e| RewardError::Unreadable { stderr: e.to_string() })?;
            return if file == "reward.json" {
                let (values, reward) = parse_reward_json(&body)?;
                Ok((file.into(), values, reward))
            } else {
                let r = parse_reward_txt(&body)?;
                Ok((file.into(), BTreeMap::from([("reward".to_string(), r)]), r))
            };
        }
        Err(RewardError::Missing)
    }

    /// Remove the container and everything in it.
    pub async fn remove(mut self) -> Result<(), ContainerError> {
        self.removed = true;
        self.engine.remove(&self.name).await
    }
}

impl Drop for TrialContainer {
    /// A container whose trial ended without `remove` (a panic, a cancelled
    /// future) is removed all the same.
    fn drop(&mut self) {
        if !self.removed {
            let _ = std::process::Command::new(&self.engine.program)
                .args(["rm", "-f", &self.name])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

/// The variables the engine's client is run with (nothing else of ablate's environment).
fn engine_env() -> Vec<(String, String)> {
    ["PATH", "HOME", "DOCKER_HOST", "CONTAINER_HOST"]
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect()
}

/// What it takes to run a command in a trial's container: the engine, the
/// container's name, the task's working folder and agent user.
#[derive(Clone)]
pub struct ContainerExec {
    engine: &'static Engine,
    name: String,
    workdir: Option<String>,
    agent_user: Option<String>,
}

impl ContainerExec {
    /// `exec [-i] [--user U] [--workdir W] [--env K=V ...] NAME`.
    fn exec_args(&self, user: Option<&str>, env: &[(String, String)], stdin: bool) -> Vec<String> {
        let mut args: Vec<String> = vec!["exec".into()];
        if stdin {
            args.push("-i".into());
        }
        if let Some(u) = user {
            args.extend(["--user".into(), u.to_string()]);
        }
        if let Some(w) = &self.workdir {
            args.extend(["--workdir".into(), w.clone()]);
        }
        for (k, v) in env {
            args.extend(["--env".into(), format!("{k}={v}")]);
        }
        args.push(self.name.clone());
        args
    }

    /// The agent's shell: `bash -lc CMD` as the task's agent user, in its working folder.
    pub async fn shell(
        &self,
        command: &str,
        timeout: Duration,
        cap: usize,
        stdin: Option<&[u8]>,
    ) -> ProcessOutcome {
        let argv = ["bash".to_string(), "-lc".to_string(), command.to_string()];
        self.exec_with(&argv, self.agent_user.as_deref(), &[], timeout, cap, stdin, true).await
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn exec_with(
        &self,
        argv: &[String],
        user: Option<&str>,
        env: &[(String, String)],
        timeout: Duration,
        cap: usize,
        stdin: Option<&[u8]>,
        inner_timeout: bool,
    ) -> ProcessOutcome {
        let mut args = self.exec_args(user, env, stdin.is_some());
        // `timeout` inside the container ends the command there; the client's own
        // deadline (a little later) is the backstop.
        if inner_timeout {
            let secs = timeout.as_secs_f64().max(1.0);
            args.extend(["timeout".into(), "-k".into(), "2".into(), format!("{secs:.1}")]);
        }
        args.extend(argv.iter().cloned());
        let mut full = vec![self.engine.program.clone()];
        full.extend(args);
        let env_host = engine_env();
        let started = Instant::now();
        match crate::sandbox::process::run_limited(
            &full,
            Path::new("/"),
            &env_host,
            timeout + Duration::from_secs(10),
            cap,
            None,
            stdin,
        )
        .await
        {
            Ok(mut out) => {
                // `timeout` exits 124 (137 after its kill) when the command ran out of time.
                if matches!(out.exit_code, Some(124) | Some(137))
                    && started.elapsed() + Duration::from_millis(500) >= timeout
                {
                    out.timed_out = true;
                    out.exit_code = None;
                }
                out
            }
            Err(e) => {
                let mut stderr = Capture::new(cap);
                stderr.push(format!("cannot run {}: {e}", self.engine.program).as_bytes());
                ProcessOutcome {
                    exit_code: Some(127),
                    timed_out: false,
                    stopped: false,
                    stdout: Capture::new(cap),
                    stderr,
                    duration: started.elapsed(),
                }
            }
        }
    }
}

/// Why the verifier's reward could not be read: the trial's grader error.
#[derive(Debug, thiserror::Error)]
pub enum RewardError {
    #[error("the verifier wrote no reward (neither /logs/verifier/reward.json nor reward.txt)")]
    Missing,
    #[error("cannot read the reward: {stderr}")]
    Unreadable { stderr: String },
    #[error("the verifier's {file} is empty")]
    Empty { file: &'static str },
    #[error("reward.txt is not a number: {text:?}")]
    NotANumber { text: String },
    #[error("reward.json is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("reward.json is not a map of numbers: {text}")]
    NotAMap { text: String },
    #[error("reward.json's `{key}` is not a number: {value}")]
    ValueNotANumber { key: String, value: serde_json::Value },
    #[error("reward.json holds no value")]
    NoValue,
    #[error("reward.json holds {} values and none named `reward`: {}", .keys.len(), .keys.join(", "))]
    NoneNamedReward { keys: Vec<String> },
}

/// reward.txt: one number.
pub(crate) fn parse_reward_txt(bytes: &[u8]) -> Result<f64, RewardError> {
    let text = String::from_utf8_lossy(bytes);
    if text.trim().is_empty() {
        return Err(RewardError::Empty { file: "reward.txt" });
    }
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|r| r.is_finite())
        .ok_or_else(|| RewardError::NotANumber { text: shorten(text.trim()) })
}

/// reward.json: a flat map of numbers; the reward is its `reward` key, or its one value.
pub(crate) fn parse_reward_json(bytes: &[u8]) -> Result<(BTreeMap<String, f64>, f64), RewardError> {
    let text = String::from_utf8_lossy(bytes);
    if text.trim().is_empty() {
        return Err(RewardError::Empty { file: "reward.json" });
    }
    let v: serde_json::Value = serde_json::from_str(&text).map_err(RewardError::NotJson)?;
    let obj = v.as_object().ok_or_else(|| RewardError::NotAMap { text: shorten(text.trim()) })?;
    let mut values = BTreeMap::new();
    for (k, v) in obj {
        let x = v
            .as_f64()
            .filter(|x| x.is_finite())
            .ok_or_else(|| RewardError::ValueNotANumber { key: k.clone(), value: v.clone() })?;
        values.insert(k.clone(), x);
    }
    let reward = match (values.get("reward"), values.len()) {
        (Some(r), _) => *r,
        (None, 1) => *values.values().next().expect("one value"),
        (None, 0) => return Err(RewardError::NoValue),
        (None, _) => {
            return Err(RewardError::NoneNamedReward { keys: values.keys().cloned().collect() });
        }
    };
    Ok((values, reward))
}

fn shorten(s: &str) -> String {
    let mut end = s.len().min(80);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// The verifier's reward file precedence, as the manifest states the rule.
pub(crate) const REWARD_RULE: &str = "reward.json's `reward` (or its one value), else reward.txt; passed when it reaches the threshold";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reward_files_are_read_as_harbor_writes_them_and_nothing_else_is_a_reward() {
        assert_eq!(parse_reward_txt(b"1\n").unwrap(), 1.0);
        assert_eq!(parse_reward_txt(b" 0.25 ").unwrap(), 0.25);
        assert!(parse_reward_txt(b"").unwrap_err().to_string().contains("empty"));
        assert!(parse_reward_txt(b"passed").unwrap_err().to_string().contains("not a number"));
        assert!(parse_reward_txt(b"nan").is_err());
        let (v, r) = parse_reward_json(br#"{"reward": 0.5, "tests": 3}"#).unwrap();
        assert_eq!((r, v.len()), (0.5, 2));
        assert_eq!(parse_reward_json(br#"{"accuracy": 1}"#).unwrap().1, 1.0);
        assert!(
            parse_reward_json(br#"{"a": 1, "b": 0}"#)
                .unwrap_err()
                .to_string()
                .contains("none named `reward`")
        );
        assert!(
            parse_reward_json(br#"{"reward": "1"}"#)
                .unwrap_err()
                .to_string()
                .contains("not a number")
        );
        assert!(parse_reward_json(b"[1]").unwrap_err().to_string().contains("not a map"));
        assert!(parse_reward_json(b"").unwrap_err().to_string().contains("empty"));
    }
}
