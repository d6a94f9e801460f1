//! Reading Harbor job folders (harbor's `TrialResult` / `TrialConfig`,
//! schema version 1): a job folder holds one folder per trial, each with its
//! `result.json` (and `config.json`); a trial folder without `result.json`
//! never finished. The task is `task_name` with `task_checksum`; the arm is
//! the agent (name, version, model, kwargs, environment variables, import
//! path, timeouts). The status comes from `exception_info.exception_type`
//! (docs/import.md has the table).

use super::{ImportMap, ImportedFrom, ImportedTrial, Read, SourceFacts, Tool};
use ablate_core::error::InputError;
use ablate_core::experiment::components::ComponentValue;
use ablate_core::record::{BudgetLimit, EndReason, Tokens, TrialStatus};
use indexmap::IndexMap;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Exceptions of the verifier: no reward could be read (`grader_error`).
pub(crate) const GRADER_ERRORS: [&str; 6] = [
    "VerifierTimeoutError",
    "RewardFileNotFoundError",
    "RewardFileEmptyError",
    "VerifierOutputParseError",
    "AddTestsDirError",
    "DownloadVerifierDirError",
];

/// Exceptions of the model's provider: limits, authentication, unknown model,
/// server and connection failures (litellm's class names, and harbor's own
/// for installed agents) (`provider_error`).
pub(crate) const PROVIDER_ERRORS: [&str; 26] = [
    "RateLimitError",
    "ApiRateLimitError",
    "ApiUsageLimitError",
    "AuthenticationError",
    "AgentAuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ModelNotFoundError",
    "ApiProviderResourceNotFoundError",
    "InternalServerError",
    "ServiceUnavailableError",
    "APIConnectionError",
    "ApiConnectionError",
    "APIError",
    "ApiError",
    "ApiInternalServerError",
    "ApiOverloadedError",
    "ApiConnectionClosedError",
    "ApiResponseStalledError",
    "UnknownApiError",
    "NetworkConnectionError",
    "Timeout",
    "BadRequestError",
    "UnprocessableEntityError",
    "UnsupportedParamsError",
    "UnsupportedModelParametersError",
];

/// The model's context or output length ran out (`budget_exhausted`, graded as recorded).
pub(crate) const LENGTH_ERRORS: [&str; 4] = [
    "ContextLengthExceededError",
    "ContextWindowExceededError",
    "OutputLengthExceededError",
    "OutputTokenExceededError",
];

/// The agent ended by itself in a way its record grades: the reward counts
/// when the verifier gave one, else `harness_error`.
pub(crate) const GRADED_EXITS: [&str; 3] =
    ["NonZeroAgentExitCodeError", "AgentSafetyRefusalError", "ContentPolicyViolationError"];

pub fn read(inputs: &[PathBuf], map: &ImportMap) -> Result<Read, InputError> {
    let threshold = map.threshold();
    let reward_key = map.raw.pass.reward.clone();
    let mut trials = Vec::new();
    let mut sources = Vec::new();
    let mut versions: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut timeout: Option<f64> = None;
    // Each trial's own id (result.json `id`; for an unfinished one, its job id and trial name): given twice, refused.
    let mut seen: std::collections::HashMap<String, PathBuf> = std::collections::HashMap::new();
    for input in inputs {
        let first = trials.len();
        let job = read_job(input, threshold, reward_key.as_deref(), &mut trials)?;
        for (t, key) in trials[first..].iter().zip(&job.keys) {
            if let Some(other) = seen.insert(key.clone(), t.path()) {
                return Err(InputError::new(
                    t.path(),
                    format!(
                        "the same trial ({key}) as {}: a job folder given twice, or copied; import each trial once",
                        other.display()
                    ),
                ));
            }
        }
        sources.push(SourceFacts {
            path: input.display().to_string(),
            kind: "folder".into(),
            sha256: super::folder_digest(&job.files),
            files: job.files.len(),
        });
        if let Some(v) = job.version
            && !versions.contains(&v)
        {
            versions.push(v);
        }
        if !names.contains(&job.name) {
            names.push(job.name);
        }
        timeout = timeout.or(job.agent_timeout);
    }
    let name = experiment_name(&names, &trials);
    Ok(Read {
        tool: Tool::Harbor,
        trials,
        sources,
        tool_versions: versions,
        name,
        name_field: "agent",
        pass_rule: format!(
            "reward `{}` at least {threshold} passes; an agent timeout is `timeout` with its reward kept as the final state's; a reward the trial's exception makes invalid (reward_valid false) is not counted",
            reward_key.as_deref().unwrap_or("reward")
        ),
        budget: ablate_core::experiment::config::Budget {
            max_steps: 0,
            max_output_tokens_per_step: 0,
            max_total_tokens: 0,
            max_working_seconds: timeout.unwrap_or(0.0),
            max_cost_usd: None,
        },
    })
}

struct Job {
    name: String,
    version: Option<String>,
    /// (path relative to the job folder, sha256) of every file read.
    files: Vec<(String, String)>,
    /// Each trial's own id, in the order the trials were read.
    keys: Vec<String>,
    agent_timeout: Option<f64>,
}

fn read_json(
    root: &Path,
    rel: &str,
    files: &mut Vec<(String, String)>,
) -> Result<Option<Value>, InputError> {
    let path = root.join(rel);
    let bytes = match super::read_bounded(&path, super::JSON_FILE_CAP) {
        Ok(b) => b,
        Err(super::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(InputError::new(&path, format!("cannot read: {e}"))),
    };
    files.push((rel.to_string(), ablate_core::digest::sha256_hex(&bytes)));
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| InputError::new(&path, format!("not JSON: {e}")))
}

fn read_job(
    dir: &Path,
    threshold: f64,
    reward_key: Option<&str>,
    out: &mut Vec<ImportedTrial>,
) -> Result<Job, InputError> {
    let meta = std::fs::metadata(dir)
        .map_err(|e| InputError::new(dir, format!("cannot read the job folder: {e}")))?;
    if !meta.is_dir() {
        return Err(InputError::new(
            dir,
            "not a folder: give Harbor job folders (jobs/<job name>)",
        ));
    }
    let mut files = Vec::new();
    let config = read_json(dir, "config.json", &mut files)?;
    let lock = read_json(dir, "lock.json", &mut files)?;
    let name = config
        .as_ref()
        .and_then(|c| c.get("job_name").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "harbor".into())
        });
    let version = lock
        .as_ref()
        .and_then(|l| l.pointer("/harbor/version"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let trial_dirs = trial_dirs(dir)?;
    let first = out.len();
    let read = read_trials(dir, &trial_dirs, threshold, reward_key, &mut files, out)?;
    fill_from_finished(&mut out[first..], &read.agents);
    Ok(Job { name, version, files, keys: read.keys, agent_timeout: read.agent_timeout })
}

/// A job folder's trial folders, by name: refused when it holds job folders
/// instead, a folder that is not a trial's, or none.
fn trial_dirs(dir: &Path) -> Result<Vec<String>, InputError> {
    let mut subdirs: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| InputError::new(dir, format!("cannot list the job folder: {e}")))?
        .filter_map(|e| e.ok())
        .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    subdirs.sort();
    // A job's own config.json names the job (`job_name`); a trial's names the trial.
    let job_config = |d: &str| {
        super::read_bounded(&dir.join(d).join("config.json"), super::JSON_FILE_CAP)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .is_some_and(|c| c.get("job_name").is_some())
    };
    if let Some(job) = subdirs.iter().find(|d| job_config(d)) {
        return Err(InputError::new(
            dir,
            format!(
                "this folder holds job folders ({job}, ...), not trials: give those (jobs/<job name>) instead"
            ),
        ));
    }
    let is_trial = |d: &str| {
        dir.join(d).join("result.json").is_file() || dir.join(d).join("config.json").is_file()
    };
    if let Some(other) = subdirs.iter().find(|d| !is_trial(d)) {
        return Err(InputError::new(
            dir.join(other),
            "neither result.json nor config.json: not a Harbor trial folder (a job folder holds only trial folders)",
        ));
    }
    if subdirs.is_empty() {
        return Err(InputError::new(
            dir,
            "no trial folder (a folder with result.json or config.json) in this job folder",
        ));
    }
    Ok(subdirs)
}

/// What a job's trial folders give beside their trials.
struct JobTrials {
    /// Each trial's own id, in the order the trials were read.
    keys: Vec<String>,
    /// Each trial's agent config as text, and whether its record says who the agent is (agent_info).
    agents: Vec<(String, bool)>,
    agent_timeout: Option<f64>,
}

/// Each trial folder of a job as a trial into `out` (passing at `threshold`
/// of the reward `reward_key`), every file read noted in `files`.
fn read_trials(
    dir: &Path,
    trial_dirs: &[String],
    threshold: f64,
    reward_key: Option<&str>,
    files: &mut Vec<(String, String)>,
    out: &mut Vec<ImportedTrial>,
) -> Result<JobTrials, InputError> {
    let mut agent_timeout = None;
    let mut agents: Vec<(String, bool)> = Vec::new();
    let mut keys = Vec::new();
    for d in trial_dirs {
        let result = read_json(dir, &format!("{d}/result.json"), files)?;
        let trial_config = read_json(dir, &format!("{d}/config.json"), files)?;
        let trial = match &result {
            Some(r) => trial(dir, d, r, threshold, reward_key)?,
            None => unfinished(
                dir,
                d,
                trial_config.as_ref().expect("a trial folder has one of the two"),
            )?,
        };
        let agent_config = match &result {
            Some(r) => r.pointer("/config/agent"),
            None => trial_config.as_ref().and_then(|c| c.get("agent")),
        };
        let own_id =
            result.as_ref().and_then(|r| r.get("id")).and_then(Value::as_str).map(str::to_string);
        let job_id = trial_config
            .as_ref()
            .and_then(|c| c.get("job_id"))
            .and_then(Value::as_str)
            .unwrap_or("");
        keys.push(own_id.unwrap_or_else(|| format!("{job_id}/{d}")));
        let known_agent =
            result.as_ref().is_some_and(|r| r.get("agent_info").is_some_and(|a| !a.is_null()));
        agents.push((agent_config.map(Value::to_string).unwrap_or_default(), known_agent));
        if agent_timeout.is_none() {
            agent_timeout = trial_config
                .as_ref()
                .and_then(|c| c.pointer("/agent/override_timeout_sec"))
                .and_then(Value::as_f64);
        }
        out.push(trial);
    }
    Ok(JobTrials { keys, agents, agent_timeout })
}

/// A job's trials that lack what its finished ones know, given it from them:
/// an unfinished trial takes the checksum its task has in this job's finished
/// trials, and a trial whose record does not say who the agent is (unfinished,
/// or failed before the agent started) the identity of one that does, run
/// with the same agent config (`agents`, as [`JobTrials`] has them).
fn fill_from_finished(trials: &mut [ImportedTrial], agents: &[(String, bool)]) {
    let known: std::collections::HashMap<String, String> = trials
        .iter()
        .filter(|t| !t.task_digest.is_empty())
        .map(|t| (t.task.clone(), t.task_digest.clone()))
        .collect();
    for t in trials.iter_mut() {
        if t.task_digest.is_empty()
            && let Some(d) = known.get(&t.task)
        {
            t.task_digest = d.clone();
        }
    }
    for i in 0..agents.len() {
        if !agents[i].1
            && let Some(j) = agents.iter().position(|(a, finished)| *finished && *a == agents[i].0)
        {
            let (identity, model) = (trials[j].identity.clone(), trials[j].model.clone());
            trials[i].identity = identity;
            trials[i].model = model;
        }
    }
}

/// The agent's identity from a trial's config (`result.json`'s `config`, or `config.json`).
fn identity(config: &Value, agent_info: Option<&Value>) -> IndexMap<String, ComponentValue> {
    let agent = config.get("agent").unwrap_or(&Value::Null);
    let mut id = IndexMap::new();
    let name = agent_info
        .and_then(|a| a.get("name"))
        .filter(|v| !v.is_null())
        .or_else(|| agent.get("name"))
        .cloned()
        .unwrap_or(Value::Null);
    id.insert("agent".to_string(), super::component_value(&name));
    if let Some(v) = agent_info.and_then(|a| a.get("version")).filter(|v| !v.is_null()) {
        id.insert("agent_version".into(), super::component_value(v));
    }
    if let Some(v) = agent.get("import_path").filter(|v| !v.is_null()) {
        id.insert("import_path".into(), super::component_value(v));
    }
    let model = agent
        .get("model_name")
        .filter(|v| !v.is_null())
        .cloned()
        .or_else(|| agent_info.and_then(|a| a.pointer("/model_info/name")).cloned())
        .unwrap_or(Value::Null);
    id.insert("model".into(), super::component_value(&model));
    for (group, key) in [("kwargs", "kwargs"), ("env", "env")] {
        if let Some(o) = agent.get(key).and_then(Value::as_object) {
            for (k, v) in o {
                id.insert(format!("{group}.{k}"), super::component_value(v));
            }
        }
    }
    for k in ["override_timeout_sec", "max_timeout_sec", "base_url", "mcp_servers", "skills"] {
        if let Some(v) = agent.get(k).filter(|v| !v.is_null() && *v != &Value::Array(Vec::new())) {
            id.insert(format!("agent.{k}"), super::component_value(v));
        }
    }
    for k in [
        "timeout_multiplier",
        "agent_timeout_multiplier",
        "extra_instructions",
        "extra_instruction_paths",
    ] {
        if let Some(v) = config.get(k).filter(|v| !v.is_null() && *v != &Value::Array(Vec::new())) {
            id.insert(k.into(), super::component_value(v));
        }
    }
    if let Some(v) = config.pointer("/environment/type").filter(|v| !v.is_null()) {
        id.insert("environment".into(), super::component_value(v));
    }
    id
}

/// The model an agent ran, or `(no model)` when its config names none (Harbor's oracle).
fn model_of(id: &IndexMap<String, ComponentValue>) -> String {
    id.get("model")
        .filter(|v| !v.is_null())
        .map(ablate_core::experiment::value_text)
        .unwrap_or_else(|| NO_MODEL.into())
}

/// What an agent without a model shows as.
pub(crate) const NO_MODEL: &str = "(no model)";

/// Longest experiment name made of several jobs' agents.
const NAME_CHARS: usize = 60;

/// The experiment's name: the job's own for one job; for several, their
/// agents' names (each once, cut at 60 characters) and the job count.
fn experiment_name(jobs: &[String], trials: &[ImportedTrial]) -> String {
    if let [one] = jobs {
        return one.clone();
    }
    let mut agents: Vec<String> = Vec::new();
    for t in trials {
        let a = t.identity.get("agent").filter(|v| !v.is_null());
        if let Some(a) = a.map(ablate_core::experiment::value_text)
            && !agents.contains(&a)
        {
            agents.push(a);
        }
    }
    let mut list = agents.join(", ");
    if list.chars().count() > NAME_CHARS {
        list = list.chars().take(NAME_CHARS - 1).collect::<String>() + "…";
    }
    if list.is_empty() {
        list = "harbor".into();
    }
    format!("{list} ({} jobs)", jobs.len())
}

fn trial(
    job: &Path,
    dir: &str,
    r: &Value,
    threshold: f64,
    reward_key: Option<&str>,
) -> Result<ImportedTrial, InputError> {
    let file = format!("{dir}/result.json");
    let record = TrialResult { path: job.join(&file), r };
    let (task, checksum, config) = record.task()?;
    let identity = identity(config, r.get("agent_info"));
    let exception = r.get("exception_info").filter(|e| !e.is_null());
    let exception_type = exception.and_then(|e| e.get("exception_type")).and_then(Value::as_str);
    let reward = record.reward(reward_key)?;
    let reward_valid = reward_valid(r, exception, reward);
    let graded_pass = reward.filter(|_| reward_valid).map(|x| x >= threshold);
    let (status, end_reason) = status_of(exception_type, graded_pass);
    // The final state of a trial whose status says it has none (docs/import.md): not counted.
    let graded_pass = match (status, exception_type) {
        (TrialStatus::ProviderError | TrialStatus::GraderError | TrialStatus::Interrupted, _)
        | (_, Some("BudgetExceededError")) => None,
        _ => graded_pass,
    };
    let error = error_of(status, exception);
    let agent = r.get("agent_result").filter(|a| !a.is_null());
    let (tokens, cost_usd) = record.usage(agent)?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_string();
    let (started_at, finished_at) = (text(r.get("started_at")), text(r.get("finished_at")));
    let wall = super::seconds_between(&started_at, &finished_at).unwrap_or(0.0);
    let model = model_of(&identity);
    let id = r
        .get("trial_name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or(dir)
        .chars()
        .take(200)
        .collect();
    Ok(ImportedTrial {
        from: ImportedFrom {
            file,
            id,
            detail: Value::Object(detail(r, exception_type, reward, reward_valid)),
        },
        input: job.to_path_buf(),
        task,
        task_digest: checksum,
        identity,
        model,
        repeat: None,
        sort_key: dir.to_string(),
        status,
        end_reason,
        graded_pass,
        steps: agent
            .and_then(|a| a.pointer("/metadata/n_episodes"))
            .and_then(Value::as_u64)
            .unwrap_or(0) as u32,
        tokens,
        cost_usd,
        working_seconds: phase_seconds(r, "agent_execution").unwrap_or(0.0),
        wall_seconds: wall,
        started_at,
        finished_at,
        error,
    })
}

/// A trial's result.json as read: its path (for errors) and its record.
struct TrialResult<'a> {
    path: PathBuf,
    r: &'a Value,
}

impl<'a> TrialResult<'a> {
    fn err(&self, key: &str, message: String) -> InputError {
        InputError::at(&self.path, key, message)
    }

    /// The record's schema version checked, its task, the task's checksum and the trial's config.
    fn task(&self) -> Result<(String, String, &'a Value), InputError> {
        let r = self.r;
        if let Some(v) = r.get("schema_version").filter(|v| !v.is_null())
            && v.as_u64() != Some(1)
        {
            return Err(self.err(
                "schema_version",
                format!("{v} is not a schema version this importer reads (it reads 1)"),
            ));
        }
        let task = r
            .get("task_name")
            .and_then(Value::as_str)
            .ok_or_else(|| self.err("task_name", "missing or not text".into()))?
            .to_string();
        let checksum = r
            .get("task_checksum")
            .and_then(Value::as_str)
            .ok_or_else(|| self.err("task_checksum", "missing or not text".into()))?
            .to_string();
        let config = r
            .get("config")
            .filter(|c| c.is_object())
            .ok_or_else(|| self.err("config", "missing: the trial's config".into()))?;
        Ok((task, checksum, config))
    }

    /// The verifier's reward that decides (`reward_key`, else `reward`, else
    /// the only one); None when the verifier gave none.
    fn reward(&self, reward_key: Option<&str>) -> Result<Option<f64>, InputError> {
        let rewards = self
            .r
            .pointer("/verifier_result/rewards")
            .filter(|v| !v.is_null() && v.as_object().is_none_or(|o| !o.is_empty()));
        match rewards {
            None => Ok(None),
            Some(Value::Object(o)) => {
                let key = match reward_key {
                    Some(k) => k.to_string(),
                    None if o.contains_key("reward") => "reward".to_string(),
                    None if o.len() == 1 => o.keys().next().cloned().unwrap_or_default(),
                    None => {
                        let keys = o.keys().cloned().collect::<Vec<_>>().join(", ");
                        return Err(self.err(
                            "verifier_result.rewards",
                            format!(
                                "several rewards ({keys}) and none named `reward`: name the one that decides in the map file: [pass] reward = \"...\""
                            ),
                        ));
                    }
                };
                match o.get(&key) {
                    Some(v) => Ok(Some(v.as_f64().ok_or_else(|| {
                        self.err(
                            &format!("verifier_result.rewards.{key}"),
                            format!("{v} is not a number"),
                        )
                    })?)),
                    None => Err(self.err(
                        "verifier_result.rewards",
                        format!("no reward `{key}` (the map's pass.reward)"),
                    )),
                }
            }
            Some(other) => {
                Err(self
                    .err("verifier_result.rewards", format!("{other} is not a table of rewards")))
            }
        }
    }

    /// The agent's tokens and cost (`agent_result`); a negative count or cost is refused.
    fn usage(&self, agent: Option<&Value>) -> Result<(Tokens, Option<f64>), InputError> {
        let field = |k: &str| agent.and_then(|a| a.get(k));
        let n =
            |k: &str| super::count(field(k)).map_err(|m| self.err(&format!("agent_result.{k}"), m));
        let tokens = Tokens {
            input: n("n_input_tokens")?,
            output: n("n_output_tokens")?,
            cached: n("n_cache_tokens")?,
        };
        let cost_usd =
            super::cost(field("cost_usd")).map_err(|m| self.err("agent_result.cost_usd", m))?;
        Ok((tokens, cost_usd))
    }
}

/// Harbor's reward_valid; for records without it, valid when no exception or
/// one its policy grades with a valid reward.
fn reward_valid(r: &Value, exception: Option<&Value>, reward: Option<f64>) -> bool {
    let exception_type = exception.and_then(|e| e.get("exception_type")).and_then(Value::as_str);
    let policy_keeps =
        exception.and_then(|e| e.pointer("/policy/has_valid_reward")).and_then(Value::as_bool);
    r.get("reward_valid").and_then(Value::as_bool).unwrap_or_else(|| {
        reward.is_some()
            && exception_type.is_none_or(|t| {
                policy_keeps.unwrap_or(
                    t == "AgentTimeoutError"
                        || GRADED_EXITS.contains(&t)
                        || LENGTH_ERRORS.contains(&t),
                )
            })
    })
}

/// A trial's status and end from its exception's type and its grade.
fn status_of(exception_type: Option<&str>, graded_pass: Option<bool>) -> (TrialStatus, EndReason) {
    match exception_type {
        None => match graded_pass {
            Some(true) => (TrialStatus::Passed, EndReason::ModelDone),
            Some(false) => (TrialStatus::Failed, EndReason::ModelDone),
            None => (TrialStatus::GraderError, EndReason::ModelDone),
        },
        Some("AgentTimeoutError") => {
            (TrialStatus::Timeout, EndReason::Budget { limit: BudgetLimit::WorkingSeconds })
        }
        Some(t) if GRADER_ERRORS.contains(&t) => (TrialStatus::GraderError, EndReason::ModelDone),
        Some(t) if PROVIDER_ERRORS.contains(&t) => {
            (TrialStatus::ProviderError, EndReason::ProviderError)
        }
        Some(t) if LENGTH_ERRORS.contains(&t) => {
            (TrialStatus::BudgetExhausted, EndReason::Budget { limit: BudgetLimit::TotalTokens })
        }
        Some("BudgetExceededError") => {
            (TrialStatus::BudgetExhausted, EndReason::Budget { limit: BudgetLimit::Cost })
        }
        Some("CancelledError") => (TrialStatus::Interrupted, EndReason::Interrupted),
        Some(t) if GRADED_EXITS.contains(&t) => match graded_pass {
            Some(true) => (TrialStatus::Passed, EndReason::ModelDone),
            Some(false) => (TrialStatus::Failed, EndReason::ModelDone),
            None => (TrialStatus::HarnessError, EndReason::HarnessError),
        },
        Some(_) => (TrialStatus::HarnessError, EndReason::HarnessError),
    }
}

/// A trial's error: its exception (`type: message`), none for a graded one,
/// and for a grader error without exception the missing reward.
fn error_of(status: TrialStatus, exception: Option<&Value>) -> Option<String> {
    let exception_type = exception.and_then(|e| e.get("exception_type")).and_then(Value::as_str);
    let message = exception.map(|e| {
        let t = exception_type.unwrap_or("exception");
        let m = e.get("exception_message").and_then(Value::as_str).unwrap_or("");
        if m.is_empty() { t.to_string() } else { format!("{t}: {m}") }
    });
    match status {
        TrialStatus::GraderError if message.is_none() => {
            Some("no reward in verifier_result".to_string())
        }
        TrialStatus::Passed | TrialStatus::Failed => None,
        _ => message,
    }
}

/// What the trial's record shows beside its figures: its exception's type,
/// its reward and whether it is valid, how long each phase took.
fn detail(
    r: &Value,
    exception_type: Option<&str>,
    reward: Option<f64>,
    reward_valid: bool,
) -> serde_json::Map<String, Value> {
    let mut detail = serde_json::Map::new();
    if let Some(t) = exception_type {
        detail.insert("exception_type".into(), Value::String(t.into()));
    }
    if let Some(x) = reward {
        detail.insert("reward".into(), serde_json::json!(x));
    }
    detail.insert("reward_valid".into(), Value::Bool(reward_valid));
    for p in ["environment_setup", "agent_setup", "agent_execution", "verifier"] {
        if let Some(s) = phase_seconds(r, p) {
            detail.insert(format!("{p}_seconds"), serde_json::json!(s));
        }
    }
    detail
}

/// How long a phase of the trial (`environment_setup`, `agent_execution`, ...) took.
fn phase_seconds(r: &Value, name: &str) -> Option<f64> {
    let p = r.get(name).filter(|p| !p.is_null())?;
    super::seconds_between(p.get("started_at")?.as_str()?, p.get("finished_at")?.as_str()?)
}

/// A trial folder without `result.json`: started and never finished (`interrupted`).
fn unfinished(job: &Path, dir: &str, config: &Value) -> Result<ImportedTrial, InputError> {
    let file = format!("{dir}/config.json");
    let path = job.join(&file);
    let task = config
        .pointer("/task/name")
        .and_then(Value::as_str)
        .or_else(|| {
            config
                .pointer("/task/path")
                .and_then(Value::as_str)
                .and_then(|p| p.trim_end_matches('/').rsplit('/').next())
        })
        .ok_or_else(|| {
            InputError::at(
                &path,
                "task",
                "neither task.name nor task.path: cannot tell which task this unfinished trial ran",
            )
        })?
        .to_string();
    let identity = identity(config, None);
    let model = model_of(&identity);
    Ok(ImportedTrial::unfinished(
        ImportedFrom {
            file,
            id: dir.to_string(),
            detail: serde_json::json!({"missing": "result.json"}),
        },
        job.to_path_buf(),
        task,
        String::new(),
        identity,
        model,
        None,
        "the trial folder has no result.json: the trial never finished".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(agent: Option<&str>, model: Option<&str>) -> ImportedTrial {
        let mut identity = IndexMap::new();
        identity.insert("agent".to_string(), agent.map_or(Value::Null, Value::from));
        identity.insert("model".to_string(), model.map_or(Value::Null, Value::from));
        let model = model_of(&identity);
        let from = ImportedFrom { file: String::new(), id: String::new(), detail: Value::Null };
        ImportedTrial::unfinished(
            from,
            Default::default(),
            "t".into(),
            String::new(),
            identity,
            model,
            None,
            String::new(),
        )
    }

    #[test]
    fn names_read_well_and_a_missing_model_says_so() {
        let jobs: Vec<String> = (0..40).map(|i| format!("2026-12-0{}__job-{i}", i % 9)).collect();
        let t = [trial(Some("oracle"), None), trial(Some("terminus-2"), Some("openai/gpt-4o"))];
        assert_eq!(experiment_name(&jobs, &t), "oracle, terminus-2 (40 jobs)");
        assert_eq!(experiment_name(&jobs[..1], &t), "2026-12-00__job-0");
        assert_eq!(t[0].model, "(no model)");
        let many: Vec<ImportedTrial> =
            (0..20).map(|i| trial(Some(&format!("agent-number-{i}")), None)).collect();
        let name = experiment_name(&jobs, &many);
        // 60 characters of the list (the last an ellipsis), then " (40 jobs)".
        assert_eq!(name.chars().count(), 60 + " (40 jobs)".len(), "{name}");
        assert!(name.starts_with("agent-number-0, agent-number-1,") && name.contains("… (40"));
    }
}
