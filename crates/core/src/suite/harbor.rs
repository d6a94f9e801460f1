//! Harbor tasks, read as they are (docs/harbor.md maps every key).
//!
//! ```text
//! <task>/task.toml            schema_version, [task], [metadata], [agent], [verifier], [environment], [solution]
//! <task>/instruction.md       the prompt
//! <task>/environment/         the image's build context (a Dockerfile), unless [environment].docker_image
//! <task>/tests/test.sh        the verifier: writes /logs/verifier/reward.json or reward.txt
//! <task>/solution/solve.sh    the oracle (`ablate suite check` runs it)
//! ```
//!
//! Every key Harbor's task format has is either honoured or refused at load,
//! naming the file and the key: this version never runs a task another way
//! than its task.toml says.

use crate::error::{InputError, parse_toml_str};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The schema versions this reader knows (Harbor's `schema_version`, or
/// `version` before 1.1).
pub(crate) const SCHEMA_VERSIONS: [&str; 5] = ["1.0", "1.1", "1.2", "1.3", "1.4"];

/// Harbor's defaults where task.toml says nothing.
pub(crate) const DEFAULT_VERIFIER_TIMEOUT_SEC: f64 = 600.0;
pub(crate) const DEFAULT_BUILD_TIMEOUT_SEC: f64 = 600.0;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHarbor {
    schema_version: Option<String>,
    version: Option<String>,
    source: Option<String>,
    task: Option<RawPackage>,
    metadata: Option<toml::Table>,
    verifier: Option<RawVerifier>,
    agent: Option<RawAgent>,
    environment: Option<RawEnvironment>,
    solution: Option<RawSolution>,
    steps: Option<toml::Value>,
    multi_step_reward_strategy: Option<toml::Value>,
    artifacts: Option<Vec<toml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPackage {
    name: String,
    version: Option<String>,
    description: Option<String>,
    authors: Option<Vec<toml::Value>>,
    keywords: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVerifier {
    timeout_sec: Option<f64>,
    env: Option<BTreeMap<String, String>>,
    user: Option<toml::Value>,
    network_mode: Option<String>,
    allowed_hosts: Option<Vec<String>>,
    environment_mode: Option<String>,
    environment: Option<toml::Value>,
    collect: Option<toml::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    timeout_sec: Option<f64>,
    user: Option<toml::Value>,
    network_mode: Option<String>,
    allowed_hosts: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnvironment {
    build_timeout_sec: Option<f64>,
    docker_image: Option<String>,
    os: Option<String>,
    cpus: Option<f64>,
    memory_mb: Option<u64>,
    storage_mb: Option<u64>,
    memory: Option<String>,
    storage: Option<String>,
    gpus: Option<u64>,
    gpu_types: Option<Vec<String>>,
    tpu: Option<toml::Value>,
    allow_internet: Option<bool>,
    network_mode: Option<String>,
    allowed_hosts: Option<Vec<String>>,
    mcp_servers: Option<Vec<toml::Value>>,
    env: Option<BTreeMap<String, String>>,
    skills_dir: Option<String>,
    healthcheck: Option<toml::Value>,
    workdir: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSolution {
    env: Option<BTreeMap<String, String>>,
}

/// Where the task's image comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImageSource {
    /// Built from `environment/` (its Dockerfile).
    Build {
        #[serde(skip)]
        context: PathBuf,
    },
    /// `[environment].docker_image`, used when the engine has it; else built
    /// from `environment/` when it holds a Dockerfile.
    Named {
        name: String,
        #[serde(skip)]
        fallback: Option<PathBuf>,
    },
}

/// What a container task's network may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// Nothing but the trial's model gateway (`no-network`).
    None,
    /// The engine's default network (`public`): only when the experiment allows it.
    Public,
}

/// A Harbor task as ablate runs it.
#[derive(Debug, Clone, Serialize)]
pub struct ContainerTask {
    pub schema_version: String,
    /// `[task].name` (`org/name`), when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub image: ImageSource,
    pub build_timeout_sec: f64,
    /// `[agent].timeout_sec` (None: no limit of the task's own).
    pub agent_timeout_sec: Option<f64>,
    pub verifier_timeout_sec: f64,
    pub agent_user: Option<String>,
    pub verifier_user: Option<String>,
    pub verifier_env: Vec<(String, String)>,
    pub solution_env: Vec<(String, String)>,
    /// `[environment].env` as written: `${VAR}` is resolved per trial from the
    /// variables the experiment passes (`pass_env`), never kept resolved.
    pub env: Vec<(String, String)>,
    pub workdir: Option<String>,
    pub cpus: Option<f64>,
    pub memory_mb: Option<u64>,
    pub storage_mb: Option<u64>,
    pub network: NetworkMode,
    /// `[metadata]` as written (kept in the manifest).
    pub metadata: serde_json::Value,
    pub has_solution: bool,
}

/// A user as the engine's `--user` takes it: a name or uid, optionally `:` a group or gid.
fn is_user_spec(s: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    };
    match s.split_once(':') {
        Some((u, g)) => part(u) && part(g),
        None => part(s),
    }
}

/// An absolute path with no `..` and no control characters.
fn is_container_path(p: &str) -> bool {
    p.starts_with('/') && !p.chars().any(char::is_control) && !p.split('/').any(|c| c == "..")
}

/// A folder with task.toml and Harbor's other parts (`environment/` or
/// `tests/test.sh`) but no instruction.md: a Harbor task missing its prompt.
pub(crate) fn lacks_instruction(dir: &Path) -> bool {
    dir.join("task.toml").is_file()
        && !dir.join("instruction.md").exists()
        && (dir.join("environment").is_dir() || dir.join("tests").join("test.sh").is_file())
}

/// Is `dir` a Harbor task folder (instruction.md beside task.toml)?
pub(crate) fn is_harbor_task(dir: &Path) -> bool {
    dir.join("task.toml").is_file() && dir.join("instruction.md").is_file()
}

/// task.toml as its errors name it: the file, and the key at fault.
struct TaskToml<'a> {
    file: &'a Path,
}

impl TaskToml<'_> {
    fn at(&self, key: &str, msg: String) -> InputError {
        InputError::at(self.file, key, msg)
    }

    fn refuse(&self, key: &str, what: &str) -> InputError {
        self.at(key, format!("{what} is not run by this version of ablate (docs/harbor.md)"))
    }

    /// A `user` key: a user name or uid.
    fn user(&self, key: &str, v: &Option<toml::Value>) -> Result<Option<String>, InputError> {
        match v {
            None => Ok(None),
            Some(toml::Value::String(s)) if is_user_spec(s) => Ok(Some(s.clone())),
            Some(toml::Value::Integer(n)) if *n >= 0 => Ok(Some(n.to_string())),
            Some(other) => Err(self.at(key, format!("`{other}` is not a user name or uid"))),
        }
    }

    /// A number of seconds, `default` when not given.
    fn positive(
        &self,
        key: &str,
        v: Option<f64>,
        default: Option<f64>,
    ) -> Result<Option<f64>, InputError> {
        match v {
            Some(x) if !(x.is_finite() && x > 0.0) => {
                Err(self.at(key, format!("{x} is not a positive number of seconds")))
            }
            Some(x) => Ok(Some(x)),
            None => Ok(default),
        }
    }

    /// Whether a network setting is public; an allowlist is refused.
    fn public(
        &self,
        key: &str,
        mode: &Option<String>,
        hosts: &Option<Vec<String>>,
    ) -> Result<bool, InputError> {
        if hosts.as_ref().is_some_and(|h| !h.is_empty()) {
            return Err(
                self.refuse(&key.replace("network_mode", "allowed_hosts"), "an allowlist network")
            );
        }
        match mode.as_deref() {
            None | Some("no-network") => Ok(false),
            Some("public") => Ok(true),
            Some("allowlist") => Err(self.refuse(key, "an allowlist network")),
            Some(other) => Err(self.at(
                key,
                format!("unknown network mode `{other}` (public, no-network, allowlist)"),
            )),
        }
    }

    /// An `env` table, each value's `${VAR}` references checked (kept unresolved).
    fn env(
        &self,
        key: &str,
        vars: Option<BTreeMap<String, String>>,
    ) -> Result<Vec<(String, String)>, InputError> {
        vars.unwrap_or_default()
            .into_iter()
            .map(|(k, v)| {
                template_parts(&v)
                    .map(|_| (k.clone(), v.clone()))
                    .map_err(|e| self.at(&format!("{key}.{k}"), e.to_string()))
            })
            .collect()
    }
}

/// Read a Harbor task folder: its task.toml, checked key by key, and its instruction.
pub fn load(dir: &Path) -> Result<(ContainerTask, String, Option<String>), InputError> {
    let file = dir.join("task.toml");
    let text = std::fs::read_to_string(&file)
        .map_err(|e| InputError::new(&file, format!("cannot read: {e}")))?;
    let raw: RawHarbor = parse_toml_str(&file, &text)?;
    let t = TaskToml { file: &file };

    let schema_version = schema_version(&t, &raw)?;
    refuse_multi_step(&t, &raw, dir)?;
    let verifier = raw.verifier.unwrap_or_default();
    check_verifier(&t, &verifier)?;
    let verifier_public =
        t.public("verifier.network_mode", &verifier.network_mode, &verifier.allowed_hosts)?;
    let agent = raw.agent.unwrap_or_default();
    let agent_public = t.public("agent.network_mode", &agent.network_mode, &agent.allowed_hosts)?;

    let env_raw = raw.environment.unwrap_or_default();
    refuse_environment_features(&t, &env_raw)?;
    let env_public = environment_public(&t, &env_raw)?;
    // Each phase's own mode, else the environment's; the container has one
    // network for both phases: public when either phase is.
    let phase = |mode: &Option<String>, own: bool| if mode.is_some() { own } else { env_public };
    let public =
        phase(&agent.network_mode, agent_public) || phase(&verifier.network_mode, verifier_public);
    let network = if public { NetworkMode::Public } else { NetworkMode::None };
    let (memory_mb, storage_mb) = resources(&t, &env_raw)?;
    let image = image(&t, &env_raw, dir)?;
    let instruction = verifier_and_instruction(dir)?;
    let (metadata, difficulty) = metadata(raw.metadata);
    let _ = (raw.source, raw.task.as_ref().map(|t| (&t.description, &t.authors, &t.keywords)));
    let task = ContainerTask {
        schema_version,
        name: raw.task.as_ref().map(|t| t.name.clone()),
        version: raw.task.as_ref().and_then(|t| t.version.clone()),
        image,
        build_timeout_sec: t
            .positive(
                "environment.build_timeout_sec",
                env_raw.build_timeout_sec,
                Some(DEFAULT_BUILD_TIMEOUT_SEC),
            )?
            .unwrap_or_default(),
        agent_timeout_sec: t.positive("agent.timeout_sec", agent.timeout_sec, None)?,
        verifier_timeout_sec: t
            .positive(
                "verifier.timeout_sec",
                verifier.timeout_sec,
                Some(DEFAULT_VERIFIER_TIMEOUT_SEC),
            )?
            .unwrap_or_default(),
        agent_user: t.user("agent.user", &agent.user)?,
        verifier_user: t.user("verifier.user", &verifier.user)?,
        verifier_env: t.env("verifier.env", verifier.env)?,
        solution_env: t.env("solution.env", raw.solution.and_then(|s| s.env))?,
        env: t.env("environment.env", env_raw.env)?,
        workdir: env_raw.workdir.filter(|w| !w.trim().is_empty()),
        cpus: env_raw.cpus,
        memory_mb,
        storage_mb,
        network,
        metadata,
        has_solution: dir.join("solution").join("solve.sh").is_file(),
    };
    Ok((task, instruction, difficulty))
}

/// `schema_version` (or `version` before 1.1), one this reader knows; "1.0" when absent.
fn schema_version(t: &TaskToml, raw: &RawHarbor) -> Result<String, InputError> {
    let (version_key, schema_version) = match (&raw.schema_version, &raw.version) {
        (Some(v), _) => ("schema_version", v.clone()),
        (None, Some(v)) => ("version", v.clone()),
        (None, None) => ("schema_version", "1.0".to_string()),
    };
    if !SCHEMA_VERSIONS.contains(&schema_version.as_str()) {
        return Err(t.at(
            version_key,
            format!(
                "unknown schema version `{schema_version}`; this version reads {}",
                SCHEMA_VERSIONS.join(", ")
            ),
        ));
    }
    Ok(schema_version)
}

/// Refuse a multi-step task (`[[steps]]`, its reward strategy, `steps/`) and artifacts.
fn refuse_multi_step(t: &TaskToml, raw: &RawHarbor, dir: &Path) -> Result<(), InputError> {
    if raw.steps.as_ref().is_some_and(|s| !matches!(s, toml::Value::Array(a) if a.is_empty())) {
        return Err(t.refuse("steps", "a multi-step task ([[steps]])"));
    }
    if raw.multi_step_reward_strategy.is_some() {
        return Err(t.refuse("multi_step_reward_strategy", "a multi-step task"));
    }
    if raw.artifacts.as_ref().is_some_and(|a| !a.is_empty()) {
        return Err(t.refuse("artifacts", "collecting artifacts"));
    }
    if dir.join("steps").is_dir() {
        return Err(InputError::new(
            dir.join("steps"),
            "a multi-step task (steps/) is not run by this version of ablate (docs/harbor.md)",
        ));
    }
    Ok(())
}

/// `[verifier]`: refuse a separate verifier environment and collecting files.
fn check_verifier(t: &TaskToml, verifier: &RawVerifier) -> Result<(), InputError> {
    if verifier.environment.is_some() {
        return Err(t.refuse("verifier.environment", "a separate verifier environment"));
    }
    match verifier.environment_mode.as_deref() {
        None | Some("shared") => {}
        Some("separate") => {
            return Err(t.refuse("verifier.environment_mode", "a separate verifier environment"));
        }
        Some(other) => {
            return Err(t.at(
                "verifier.environment_mode",
                format!("unknown mode `{other}` (shared, separate)"),
            ));
        }
    }
    if verifier.collect.is_some() {
        return Err(t.refuse("verifier.collect", "collecting files after the verifier"));
    }
    Ok(())
}

/// `[environment]`: refuse what this version does not run (Windows, GPUs, a TPU, MCP
/// servers, skills, a healthcheck).
fn refuse_environment_features(t: &TaskToml, env_raw: &RawEnvironment) -> Result<(), InputError> {
    match env_raw.os.as_deref() {
        None | Some("linux") => {}
        Some("windows") => return Err(t.refuse("environment.os", "a Windows environment")),
        Some(other) => {
            return Err(t.at("environment.os", format!("unknown os `{other}` (linux, windows)")));
        }
    }
    if env_raw.gpus.is_some_and(|g| g > 0) {
        return Err(t.refuse("environment.gpus", "a GPU"));
    }
    if env_raw.gpu_types.as_ref().is_some_and(|g| !g.is_empty()) {
        return Err(t.refuse("environment.gpu_types", "a GPU"));
    }
    if env_raw.tpu.is_some() {
        return Err(t.refuse("environment.tpu", "a TPU"));
    }
    if env_raw.mcp_servers.as_ref().is_some_and(|m| !m.is_empty()) {
        return Err(t.refuse("environment.mcp_servers", "an MCP server"));
    }
    if env_raw.skills_dir.is_some() {
        return Err(t.refuse("environment.skills_dir", "a skills folder"));
    }
    if env_raw.healthcheck.is_some() {
        return Err(t.refuse("environment.healthcheck", "a healthcheck"));
    }
    Ok(())
}

/// The environment's own network: Harbor's default is public.
fn environment_public(t: &TaskToml, env_raw: &RawEnvironment) -> Result<bool, InputError> {
    Ok(match (&env_raw.network_mode, env_raw.allow_internet) {
        (Some(_), _) => {
            t.public("environment.network_mode", &env_raw.network_mode, &env_raw.allowed_hosts)?
        }
        (None, Some(false)) => {
            t.public("environment.allowed_hosts", &None, &env_raw.allowed_hosts)?
        }
        (None, _) => {
            t.public("environment.network_mode", &None, &env_raw.allowed_hosts)?;
            true
        }
    })
}

/// `[environment]`'s memory and storage in MB, its cpus and workdir checked.
fn resources(
    t: &TaskToml,
    env_raw: &RawEnvironment,
) -> Result<(Option<u64>, Option<u64>), InputError> {
    let memory_mb = match (env_raw.memory_mb, &env_raw.memory) {
        (Some(m), _) => Some(m),
        (None, Some(s)) => Some(size_mb(s).map_err(|e| t.at("environment.memory", e.to_string()))?),
        (None, None) => None,
    };
    let storage_mb = match (env_raw.storage_mb, &env_raw.storage) {
        (Some(m), _) => Some(m),
        (None, Some(s)) => {
            Some(size_mb(s).map_err(|e| t.at("environment.storage", e.to_string()))?)
        }
        (None, None) => None,
    };
    if memory_mb == Some(0) {
        return Err(t.at("environment.memory_mb", "must be at least 1".into()));
    }
    if let Some(c) = env_raw.cpus
        && !(c.is_finite() && (0.01..=1024.0).contains(&c))
    {
        return Err(
            t.at("environment.cpus", format!("{c} is not a number of cpus from 0.01 to 1024"))
        );
    }
    if let Some(w) = env_raw.workdir.as_deref().filter(|w| !w.trim().is_empty())
        && !is_container_path(w)
    {
        return Err(t.at(
            "environment.workdir",
            format!(
                "`{w}` is not an absolute path in the container (no `..`, no control characters)"
            ),
        ));
    }
    Ok((memory_mb, storage_mb))
}

/// Where the image comes from: `[environment].docker_image` or `environment/`'s
/// Dockerfile (a compose file refused).
fn image(t: &TaskToml, env_raw: &RawEnvironment, dir: &Path) -> Result<ImageSource, InputError> {
    let env_dir = dir.join("environment");
    if env_dir.join("docker-compose.yaml").exists() || env_dir.join("docker-compose.yml").exists() {
        return Err(InputError::new(
            env_dir.join("docker-compose.yaml"),
            "a compose file is not run by this version of ablate (docs/harbor.md)",
        ));
    }
    let dockerfile = env_dir.join("Dockerfile");
    Ok(match (&env_raw.docker_image, dockerfile.is_file()) {
        (Some(name), has_file) => {
            if name.trim().is_empty() {
                return Err(t.at("environment.docker_image", "is empty".into()));
            }
            ImageSource::Named { name: name.clone(), fallback: has_file.then(|| env_dir.clone()) }
        }
        (None, true) => ImageSource::Build { context: env_dir.clone() },
        (None, false) => {
            return Err(InputError::new(
                &dockerfile,
                "no Dockerfile here and no [environment].docker_image in task.toml: the task has no image",
            ));
        }
    })
}

/// `[metadata]` as JSON (null when absent), and its `difficulty`.
fn metadata(raw: Option<toml::Table>) -> (serde_json::Value, Option<String>) {
    let metadata =
        raw.map(|m| serde_json::to_value(m).unwrap_or_default()).unwrap_or(serde_json::Value::Null);
    let difficulty =
        metadata.get("difficulty").and_then(serde_json::Value::as_str).map(str::to_string);
    (metadata, difficulty)
}

/// Check tests/test.sh is there, and read instruction.md (not empty).
fn verifier_and_instruction(dir: &Path) -> Result<String, InputError> {
    if !dir.join("tests").join("test.sh").is_file() {
        return Err(InputError::new(
            dir.join("tests").join("test.sh"),
            "a Harbor task needs tests/test.sh (its verifier)",
        ));
    }
    let instruction = std::fs::read_to_string(dir.join("instruction.md"))
        .map_err(|e| InputError::new(dir.join("instruction.md"), format!("cannot read: {e}")))?;
    if instruction.trim().is_empty() {
        return Err(InputError::new(dir.join("instruction.md"), "the instruction is empty"));
    }
    Ok(instruction)
}

/// A size Harbor's deprecated `memory` or `storage` cannot mean.
#[derive(Debug, thiserror::Error)]
enum BadSize {
    #[error("`{0}` is not a size like 4G or 512M")]
    Unreadable(String),
    #[error("`{0}` is not a size of at least 1M")]
    BelowOneMb(String),
}

/// "4G", "512M", "1024K" in MB (Harbor's deprecated `memory` and `storage`).
fn size_mb(s: &str) -> Result<u64, BadSize> {
    let t = s.trim().to_ascii_uppercase();
    let (num, unit) = t.split_at(t.len().saturating_sub(1));
    let n: f64 = num.parse().map_err(|_| BadSize::Unreadable(s.to_string()))?;
    let mb = match unit {
        "G" => n * 1024.0,
        "M" => n,
        "K" => n / 1024.0,
        _ => return Err(BadSize::Unreadable(s.to_string())),
    };
    if !(mb.is_finite() && mb >= 1.0) {
        return Err(BadSize::BelowOneMb(s.to_string()));
    }
    Ok(mb as u64)
}

/// An `env` value whose `${VAR}` cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadTemplate {
    #[error("`{0}`: an unclosed ${{")]
    Unclosed(String),
    #[error("`{value}` needs ${{{name}}}, which is not passed to containers")]
    Unset { value: String, name: String },
}

/// A variable an `env` value names: `${VAR}` or `${VAR:-default}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EnvRef {
    /// The task.toml key: `environment.env.K`, `verifier.env.K`, `solution.env.K`.
    pub key: String,
    pub name: String,
    pub has_default: bool,
}

/// A `${name}` or `${name:-default}` reference.
type Reference<'a> = (&'a str, Option<&'a str>);

/// The pieces of a value: literal text, each followed by the reference after it.
fn template_parts(v: &str) -> Result<Vec<(&str, Option<Reference<'_>>)>, BadTemplate> {
    let mut parts = Vec::new();
    let mut rest = v;
    while let Some(i) = rest.find("${") {
        let after = &rest[i + 2..];
        let end = after.find('}').ok_or_else(|| BadTemplate::Unclosed(v.to_string()))?;
        let inner = &after[..end];
        let reference = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        parts.push((&rest[..i], Some(reference)));
        rest = &after[end + 1..];
    }
    parts.push((rest, None));
    Ok(parts)
}

/// `${VAR}` and `${VAR:-default}` as Harbor resolves `env` tables, from
/// `passed` alone (the variables the experiment passes to containers): a
/// variable it does not hold is unset.
pub(crate) fn resolve_template(
    v: &str,
    passed: &BTreeMap<String, String>,
) -> Result<String, BadTemplate> {
    let mut out = String::new();
    for (text, reference) in template_parts(v)? {
        out.push_str(text);
        let Some((name, default)) = reference else { continue };
        match (passed.get(name), default) {
            (Some(val), _) => out.push_str(val),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(BadTemplate::Unset { value: v.to_string(), name: name.to_string() });
            }
        }
    }
    Ok(out)
}

/// A table of `env` values resolved from `passed`.
pub(crate) fn resolve_env(
    table: &[(String, String)],
    passed: &BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, BadTemplate> {
    table.iter().map(|(k, v)| Ok((k.clone(), resolve_template(v, passed)?))).collect()
}

impl ContainerTask {
    /// Every variable the task's `env` tables name.
    pub(crate) fn env_refs(&self) -> Vec<EnvRef> {
        let tables = [
            ("environment.env", &self.env),
            ("verifier.env", &self.verifier_env),
            ("solution.env", &self.solution_env),
        ];
        let mut refs = Vec::new();
        for (table, vars) in tables {
            for (k, v) in vars {
                for (_, reference) in template_parts(v).unwrap_or_default() {
                    if let Some((name, default)) = reference {
                        refs.push(EnvRef {
                            key: format!("{table}.{k}"),
                            name: name.to_string(),
                            has_default: default.is_some(),
                        });
                    }
                }
            }
        }
        refs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_templates_read_as_harbor_writes_them() {
        // 4G = 4 x 1024 MB; 1024K = 1 MB.
        assert_eq!((size_mb("4G").unwrap(), size_mb(" 512m ").unwrap()), (4096, 512));
        assert_eq!(size_mb("1024K").unwrap(), 1);
        assert_eq!(size_mb("4GB").unwrap_err().to_string(), "`4GB` is not a size like 4G or 512M");
        assert_eq!(size_mb("512K").unwrap_err().to_string(), "`512K` is not a size of at least 1M");
        let passed = BTreeMap::from([("K".to_string(), "v".to_string())]);
        assert_eq!(resolve_template("a${ABLATE_TEST_SURELY_UNSET:-b}c", &passed).unwrap(), "abc");
        assert_eq!(resolve_template("<${K}>${K:-d}", &passed).unwrap(), "<v>v");
        assert_eq!(
            resolve_template("${x", &passed).unwrap_err().to_string(),
            "`${x`: an unclosed ${"
        );
        // PATH is set in ablate's environment, but not passed: unset.
        assert_eq!(
            resolve_template("${PATH}", &passed).unwrap_err().to_string(),
            "`${PATH}` needs ${PATH}, which is not passed to containers"
        );
    }

    fn task(toml_text: &str) -> Result<ContainerTask, InputError> {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["environment", "tests", "solution"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        std::fs::write(dir.path().join("environment/Dockerfile"), "FROM scratch\n").unwrap();
        std::fs::write(dir.path().join("tests/test.sh"), "echo 1 > /logs/verifier/reward.txt\n")
            .unwrap();
        std::fs::write(dir.path().join("instruction.md"), "Do it.\n").unwrap();
        std::fs::write(dir.path().join("task.toml"), toml_text).unwrap();
        load(dir.path()).map(|(t, _, _)| t)
    }

    fn key_of(r: Result<ContainerTask, InputError>) -> String {
        r.expect_err("refused").key.unwrap_or_default()
    }

    #[test]
    fn harbor_defaults_and_the_keys_that_are_honoured() {
        let t = task("version = \"1.0\"\n[environment]\nallow_internet = false\nmemory = \"4G\"\ncpus = 2\n[agent]\ntimeout_sec = 120\n").unwrap();
        assert_eq!(
            (t.schema_version.as_str(), t.memory_mb, t.cpus, t.agent_timeout_sec),
            ("1.0", Some(4096), Some(2.0), Some(120.0))
        );
        assert_eq!(
            (t.verifier_timeout_sec, t.build_timeout_sec, t.network),
            (600.0, 600.0, NetworkMode::None)
        );
        // Harbor's default network is public.
        assert_eq!(task("schema_version = \"1.1\"\n").unwrap().network, NetworkMode::Public);
    }

    #[test]
    fn what_this_version_does_not_run_is_refused_by_key() {
        for (text, key) in [
            ("schema_version = \"2.0\"\n", "schema_version"),
            ("[[steps]]\nname = \"a\"\n", "steps"),
            ("[environment]\nallow_internet = false\ngpus = 1\n", "environment.gpus"),
            ("[environment]\nallow_internet = false\nos = \"windows\"\n", "environment.os"),
            (
                "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n",
                "environment.allowed_hosts",
            ),
            (
                "[environment]\nallow_internet = false\nmcp_servers = [{name = \"x\", url = \"http://x\"}]\n",
                "environment.mcp_servers",
            ),
            ("[verifier]\nenvironment_mode = \"separate\"\n", "verifier.environment_mode"),
            (
                "[environment]\nallow_internet = false\nhealthcheck = {command = \"true\"}\n",
                "environment.healthcheck",
            ),
            ("[environment]\nallow_internet = false\nflux = 1\n", "environment.flux"),
        ] {
            assert_eq!(key_of(task(text)), key, "{text}");
        }
    }

    #[test]
    fn cpus_users_and_the_working_folder_are_checked_at_load() {
        let env = "[environment]\nallow_internet = false\n";
        for (text, key) in [
            (format!("{env}cpus = 0.001\n"), "environment.cpus"),
            (format!("{env}cpus = 1e9\n"), "environment.cpus"),
            (format!("{env}workdir = \"app\"\n"), "environment.workdir"),
            (format!("{env}workdir = \"/app/../etc\"\n"), "environment.workdir"),
            (format!("{env}workdir = \"/app\\nx\"\n"), "environment.workdir"),
            (format!("{env}[agent]\nuser = \"root; true\"\n"), "agent.user"),
            (format!("{env}[verifier]\nuser = \"a:b:c\"\n"), "verifier.user"),
            (format!("{env}[agent]\nuser = \"\"\n"), "agent.user"),
        ] {
            assert_eq!(key_of(task(&text)), key, "{text}");
        }
        let t = task(&format!(
            "{env}cpus = 0.5\nworkdir = \"/app\"\n[agent]\nuser = \"1000:1000\"\n[verifier]\nuser = \"root\"\n"
        ))
        .unwrap();
        assert_eq!(
            (t.cpus, t.workdir.as_deref(), t.agent_user.as_deref(), t.verifier_user.as_deref()),
            (Some(0.5), Some("/app"), Some("1000:1000"), Some("root"))
        );
    }
}
