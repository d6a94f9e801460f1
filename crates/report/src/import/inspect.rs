//! Reading Inspect eval logs (inspect_ai, log format version 2; version 1's
//! single `score` is read as a scorer named `score`): the `.eval` archive (a
//! zip of JSON members, Deflate or Zstandard) and the `.json` log. A sample
//! (`id`, `epoch`) is a trial: the id is the task, the epoch - 1 its repeat.
//! The arm is the eval's task and its arguments, the solver and its
//! arguments (or the plan's steps and their parameters), the model and its
//! generate config, and the limits. docs/import.md has the whole mapping.

use super::{ImportMap, ImportedFrom, ImportedTrial, Read, SourceFacts, Tool};
use ablate_core::error::InputError;
use ablate_core::experiment::components::ComponentValue;
use ablate_core::record::{BudgetLimit, EndReason, Tokens, TrialStatus};
use indexmap::IndexMap;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Files `inspect eval-set` writes into a log folder that are not logs.
pub(crate) const NOT_LOGS: [&str; 2] = ["eval-set.json", "logs.json"];

/// Most epochs a log may declare: beyond it the declaration is not believed.
pub(crate) const MAX_EPOCHS: u64 = 100_000;

/// Log format versions read.
pub(crate) const VERSIONS: [u64; 2] = [1, 2];

/// One log as read: its header (everything but the samples) and its samples.
struct Log {
    /// The input as given, and the file within it (a folder's logs).
    input: PathBuf,
    file: String,
    header: Value,
    samples: Vec<Value>,
}

impl Log {
    fn path(&self) -> PathBuf {
        if self.file.is_empty() { self.input.clone() } else { self.input.join(&self.file) }
    }
    fn err(&self, key: &str, message: impl Into<String>) -> InputError {
        InputError::at(self.path(), key, message)
    }
}

pub fn read(inputs: &[PathBuf], map: &ImportMap) -> Result<Read, InputError> {
    let (logs, sources) = read_inputs(inputs)?;
    let scorer = choose_scorer(&logs, map)?;
    let threshold = map.threshold();
    let mut trials = Vec::new();
    let mut versions = Vec::new();
    let mut budget = ablate_core::experiment::config::Budget {
        max_steps: 0,
        max_output_tokens_per_step: 0,
        max_total_tokens: 0,
        max_working_seconds: 0.0,
        max_cost_usd: None,
    };
    for (i, log) in logs.iter().enumerate() {
        if let Some(v) = log.header.pointer("/eval/packages/inspect_ai").and_then(Value::as_str)
            && !versions.iter().any(|x: &String| x == v)
        {
            versions.push(v.to_string());
        }
        if i == 0 {
            budget = budget_of(&log.header);
        }
        read_samples(log, &scorer, threshold, &mut trials)?;
    }
    let name = logs
        .first()
        .and_then(|l| l.header.pointer("/eval/task").and_then(Value::as_str))
        .unwrap_or("inspect")
        .to_string();
    Ok(Read {
        tool: Tool::Inspect,
        trials,
        sources,
        tool_versions: versions,
        name,
        name_field: "solver",
        pass_rule: format!(
            "scorer `{scorer}`: a value read as Inspect's value_to_float reads it (C 1, P 0.5, I and N 0, numbers and booleans as numbers, yes/true 1, no/false 0) passes at {threshold} or above; an errored sample keeps its status and fails"
        ),
        budget,
    })
}

/// Every log of the inputs (a log file, or a folder of them), in the inputs'
/// order, and what each input was.
fn read_inputs(inputs: &[PathBuf]) -> Result<(Vec<Log>, Vec<SourceFacts>), InputError> {
    let mut logs = Vec::new();
    let mut sources = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input)
            .map_err(|e| InputError::new(input, format!("cannot read: {e}")))?;
        if meta.is_dir() {
            sources.push(read_folder(input, &mut logs)?);
        } else {
            let (log, sha) = read_log(input, "")?;
            logs.push(log);
            sources.push(SourceFacts {
                path: input.display().to_string(),
                kind: "file".into(),
                sha256: sha,
                files: 1,
            });
        }
    }
    Ok((logs, sources))
}

/// A folder's logs (`.eval` and `.json`, by name) into `logs`; what the folder was.
fn read_folder(input: &Path, logs: &mut Vec<Log>) -> Result<SourceFacts, InputError> {
    let mut names: Vec<String> = std::fs::read_dir(input)
        .map_err(|e| InputError::new(input, format!("cannot list the folder: {e}")))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".eval") || n.ends_with(".json"))
        // What `inspect eval-set` writes beside its logs.
        .filter(|n| !NOT_LOGS.contains(&n.as_str()))
        .collect();
    names.sort();
    if names.is_empty() {
        return Err(InputError::new(input, "no Inspect log (`.eval` or `.json`) in this folder"));
    }
    let mut digests = Vec::new();
    for name in names {
        let (log, sha) = read_log(input, &name)?;
        digests.push((name, sha));
        logs.push(log);
    }
    Ok(SourceFacts {
        path: input.display().to_string(),
        kind: "folder".into(),
        sha256: super::folder_digest(&digests),
        files: digests.len(),
    })
}

/// Read one log (`dir/name`, or the file `dir` when `name` is empty); its sha256.
fn read_log(dir: &Path, name: &str) -> Result<(Log, String), InputError> {
    let path = if name.is_empty() { dir.to_path_buf() } else { dir.join(name) };
    let bytes = super::read_bounded(&path, super::LOG_CAP)
        .map_err(|e| InputError::new(&path, format!("cannot read: {e}")))?;
    let sha = ablate_core::digest::sha256_hex(&bytes);
    let mut log = if bytes.starts_with(b"PK\x03\x04") {
        read_eval_archive(&path, &bytes)?
    } else {
        let mut v = parse_json(&path, "", &bytes)?;
        let samples = match v.as_object_mut().and_then(|o| o.remove("samples")) {
            Some(Value::Array(s)) => s,
            None | Some(Value::Null) => {
                return Err(InputError::at(
                    &path,
                    "samples",
                    "missing: the log holds no samples (written with log_samples=False?), so it has no trials",
                ));
            }
            Some(_) => return Err(InputError::at(&path, "samples", "not a list")),
        };
        Log { input: PathBuf::new(), file: String::new(), header: v, samples }
    };
    log.input = dir.to_path_buf();
    log.file = name.to_string();
    let version = log.header.get("version").and_then(Value::as_u64);
    match version {
        Some(v) if VERSIONS.contains(&v) => {}
        Some(v) => {
            return Err(log.err(
                "version",
                format!(
                    "log format version {v} is not one this importer reads (it reads {VERSIONS:?})"
                ),
            ));
        }
        None => return Err(log.err("version", "missing: not an Inspect eval log")),
    }
    if !log.header.get("eval").is_some_and(Value::is_object) {
        return Err(log.err("eval", "missing: not an Inspect eval log"));
    }
    Ok((log, sha))
}

/// An `.eval` archive: `header.json` (or, for a log still being written or
/// crashed, `_journal/start.json` with status `started`) and every
/// `samples/*.json` member (the last of a repeated name wins).
fn read_eval_archive(path: &Path, bytes: &[u8]) -> Result<Log, InputError> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| InputError::new(path, format!("not a readable `.eval` archive: {e}")))?;
    let all: Vec<String> = (0..zip.len())
        .map(|i| {
            zip.name_for_index(i).and_then(Result::ok).map(|n| n.into_owned()).unwrap_or_default()
        })
        .collect();
    // Every member's bytes decompressed count against one cap (a zip bomb is refused, not read).
    let mut left = super::LOG_CAP;
    let mut member = |name: &str| -> Result<Option<Vec<u8>>, InputError> {
        use std::io::Read as _;
        let Some(index) = all.iter().rposition(|n| n == name) else { return Ok(None) };
        let f = zip
            .by_index(index)
            .map_err(|e| InputError::new(path, format!("archive member `{name}`: {e}")))?;
        let too_large = || {
            InputError::new(
                path,
                format!(
                    "archive member `{name}`: the archive decompresses to more than the {} bytes an import reads",
                    super::LOG_CAP
                ),
            )
        };
        // What the archive declares is refused before anything is decompressed; `take` holds
        // an archive that declares less than it holds.
        if f.size() > left {
            return Err(too_large());
        }
        let mut out = Vec::new();
        f.take(left + 1)
            .read_to_end(&mut out)
            .map_err(|e| InputError::new(path, format!("archive member `{name}`: {e}")))?;
        if out.len() as u64 > left {
            return Err(too_large());
        }
        left -= out.len() as u64;
        Ok(Some(out))
    };
    let header = match member("header.json")? {
        Some(b) => parse_json(path, "header.json", &b)?,
        None => match member("_journal/start.json")? {
            Some(b) => {
                let mut v = parse_json(path, "_journal/start.json", &b)?;
                if let Some(o) = v.as_object_mut() {
                    o.insert("status".into(), Value::String("started".into()));
                }
                v
            }
            None => {
                return Err(InputError::new(
                    path,
                    "the archive has neither header.json nor _journal/start.json: not an Inspect eval log",
                ));
            }
        },
    };
    let mut names: Vec<String> =
        all.iter().filter(|n| n.starts_with("samples/") && n.ends_with(".json")).cloned().collect();
    names.sort();
    names.dedup();
    if names.is_empty() && header.get("status").and_then(Value::as_str) == Some("success") {
        return Err(InputError::new(
            path,
            "no `samples/` member: the log holds no samples (written with log_samples=False?), so it has no trials",
        ));
    }
    let mut samples = Vec::with_capacity(names.len());
    for name in names {
        let b = member(&name)?.expect("listed");
        samples.push(parse_json(path, &name, &b)?);
    }
    Ok(Log { input: PathBuf::new(), file: String::new(), header, samples })
}

/// JSON as Inspect writes it: bare `NaN`, `Infinity` and `-Infinity` (an
/// unscored value) are read as null.
fn parse_json(path: &Path, member: &str, bytes: &[u8]) -> Result<Value, InputError> {
    let clean = non_finite_as_null(bytes);
    serde_json::from_slice(&clean).map_err(|e| {
        let at =
            if member.is_empty() { String::new() } else { format!("archive member `{member}`: ") };
        InputError::new(path, format!("{at}not JSON: {e}"))
    })
}

/// `NaN`, `Infinity`, `-Infinity` outside strings, replaced by `null`.
pub(crate) fn non_finite_as_null(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let tokens: [&[u8]; 3] = [b"-Infinity", b"Infinity", b"NaN"];
    let mut out: Option<Vec<u8>> = None;
    let (mut i, mut in_string, mut escaped) = (0, false, false);
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if let Some(t) = tokens.iter().find(|t| bytes[i..].starts_with(t)) {
            let o = out.get_or_insert_with(|| bytes[..i].to_vec());
            o.extend_from_slice(b"null");
            i += t.len();
            continue;
        }
        if let Some(o) = &mut out {
            o.push(b);
        }
        i += 1;
    }
    match out {
        Some(o) => std::borrow::Cow::Owned(o),
        None => std::borrow::Cow::Borrowed(bytes),
    }
}

/// The scorer whose score decides: the map's `[pass] scorer`, or the one
/// scorer every log has.
fn choose_scorer(logs: &[Log], map: &ImportMap) -> Result<String, InputError> {
    let names_of = |log: &Log| -> Vec<String> {
        let mut names: Vec<String> = log
            .header
            .pointer("/eval/scorers")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.get("name").and_then(Value::as_str).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        for s in &log.samples {
            if let Some(o) = s.get("scores").and_then(Value::as_object) {
                for k in o.keys() {
                    if !names.contains(k) {
                        names.push(k.clone());
                    }
                }
            }
            if s.get("score").is_some_and(|v| !v.is_null()) && !names.iter().any(|n| n == "score") {
                names.push("score".into());
            }
        }
        names
    };
    if let Some(s) = &map.raw.pass.scorer {
        for log in logs {
            let names = names_of(log);
            if !names.contains(s) {
                return Err(log.err(
                    "eval.scorers",
                    format!(
                        "no scorer `{s}` (the map's pass.scorer); scorers: {}",
                        names.join(", ")
                    ),
                ));
            }
        }
        return Ok(s.clone());
    }
    let mut all: Vec<String> = Vec::new();
    for log in logs {
        for n in names_of(log) {
            if !all.contains(&n) {
                all.push(n);
            }
        }
    }
    match all.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(logs[0].err(
            "eval.scorers",
            "no scorer: no sample was scored (nothing decides passed or failed)",
        )),
        many => Err(InputError::at(
            map.file(),
            "pass.scorer",
            format!(
                "the logs have {} scorers ({}); name the one that decides passed or failed in the map file: [pass] scorer = \"...\"",
                many.len(),
                many.join(", ")
            ),
        )),
    }
}

/// The arm's identity: task and arguments, solver and arguments (or the
/// plan's steps), model and generate config, limits.
fn identity(log: &Log) -> IndexMap<String, ComponentValue> {
    let h = &log.header;
    let mut id = IndexMap::new();
    let eval = &h["eval"];
    id.insert("task".to_string(), super::component_value(&eval["task"]));
    if let Some(v) = eval.get("task_version").filter(|v| !v.is_null()) {
        id.insert("task_version".into(), super::component_value(v));
    }
    if let Some(args) = eval.get("task_args").and_then(Value::as_object) {
        for (k, v) in args {
            id.insert(format!("task_args.{k}"), super::component_value(v));
        }
    }
    match eval.get("solver").and_then(Value::as_str) {
        Some(solver) => {
            id.insert("solver".into(), Value::String(solver.into()));
            if let Some(args) = eval.get("solver_args").and_then(Value::as_object) {
                for (k, v) in args {
                    id.insert(format!("solver_args.{k}"), super::component_value(v));
                }
            }
        }
        None => {
            let steps: Vec<&Value> = h
                .pointer("/plan/steps")
                .and_then(Value::as_array)
                .map(|s| s.iter().collect())
                .unwrap_or_default();
            let names: Vec<&str> =
                steps.iter().filter_map(|s| s.get("solver").and_then(Value::as_str)).collect();
            id.insert("solver".into(), Value::String(names.join(", ")));
            for (i, step) in steps.iter().enumerate() {
                let name = step.get("solver").and_then(Value::as_str).unwrap_or("step");
                let label = if names.iter().filter(|n| **n == name).count() > 1 {
                    format!("{name}#{}", i + 1)
                } else {
                    name.to_string()
                };
                if let Some(params) = step.get("params").and_then(Value::as_object) {
                    for (k, v) in params {
                        id.insert(format!("{label}.{k}"), super::component_value(v));
                    }
                }
            }
        }
    }
    id.insert("model".into(), super::component_value(&eval["model"]));
    if let Some(args) = eval.get("model_args").and_then(Value::as_object) {
        for (k, v) in args {
            id.insert(format!("model_args.{k}"), super::component_value(v));
        }
    }
    if let Some(cfg) = eval.get("model_generate_config").and_then(Value::as_object) {
        for (k, v) in cfg {
            if !v.is_null() {
                id.insert(format!("generate.{k}"), super::component_value(v));
            }
        }
    }
    if let Some(cfg) = eval.get("config").and_then(Value::as_object) {
        for k in ["message_limit", "token_limit", "time_limit", "working_limit", "cost_limit"] {
            if let Some(v) = cfg.get(k).filter(|v| !v.is_null()) {
                id.insert(format!("config.{k}"), super::component_value(v));
            }
        }
    }
    id
}

fn budget_of(h: &Value) -> ablate_core::experiment::config::Budget {
    let cfg = h.pointer("/eval/config");
    let num = |k: &str| cfg.and_then(|c| c.get(k)).and_then(Value::as_f64);
    ablate_core::experiment::config::Budget {
        max_steps: num("message_limit").map_or(0, |v| v as u32),
        max_output_tokens_per_step: h
            .pointer("/eval/model_generate_config/max_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0) as u32,
        max_total_tokens: num("token_limit").map_or(0, |v| v as u64),
        max_working_seconds: num("working_limit").or(num("time_limit")).unwrap_or(0.0),
        max_cost_usd: num("cost_limit"),
    }
}

/// The digest of a sample's task: its input, choices and target (messages
/// without their per-run `id`s).
fn task_digest(sample: &Value) -> String {
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(o) => Value::Object(
                o.iter()
                    .filter(|(k, _)| k.as_str() != "id")
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    let key = serde_json::json!({
        "input": strip(sample.get("input").unwrap_or(&Value::Null)),
        "choices": sample.get("choices").cloned().unwrap_or(Value::Null),
        "target": sample.get("target").cloned().unwrap_or(Value::Null),
    });
    ablate_core::digest::sha256_hex(key.to_string().as_bytes())
}

/// A score value as Inspect's `value_to_float` reads it; None for a value it
/// cannot read (a list, a table, other text, null: unscored).
pub(crate) fn score_value(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) => match s.as_str() {
            "C" => Some(1.0),
            "P" => Some(0.5),
            "I" | "N" => Some(0.0),
            other => match other.to_lowercase().as_str() {
                "yes" | "true" => Some(1.0),
                "no" | "false" => Some(0.0),
                lower => lower.parse::<f64>().ok().filter(|x| x.is_finite()),
            },
        },
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// Error messages of model API failures (the exception's class name ends in one of these): `provider_error`.
const PROVIDER_ERRORS: [&str; 11] = [
    "RateLimitError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "APIConnectionError",
    "APITimeoutError",
    "InternalServerError",
    "ServiceUnavailableError",
    "OverloadedError",
    "APIStatusError",
    "APIError",
];

fn error_status(message: &str) -> TrialStatus {
    let class = message.split(['(', ':']).next().unwrap_or("").trim();
    if PROVIDER_ERRORS.iter().any(|p| class.ends_with(p)) {
        TrialStatus::ProviderError
    } else {
        TrialStatus::HarnessError
    }
}

fn read_samples(
    log: &Log,
    scorer: &str,
    threshold: f64,
    out: &mut Vec<ImportedTrial>,
) -> Result<(), InputError> {
    let identity = identity(log);
    let model = log.header.pointer("/eval/model").and_then(Value::as_str).unwrap_or("").to_string();
    let status = log.header.get("status").and_then(Value::as_str).unwrap_or("started");
    let samples = Samples { log, scorer, threshold, identity, model };
    let mut seen: std::collections::HashSet<(String, u32)> = std::collections::HashSet::new();
    for (i, s) in log.samples.iter().enumerate() {
        let (id, epoch) = sample_key(log, i, s)?;
        seen.insert((id.clone(), epoch));
        out.push(samples.trial(i, s, id, epoch)?);
    }
    // A log that did not finish: the planned samples it lacks never finished.
    if status != "success" {
        samples.unfinished(status, &seen, out)?;
    }
    Ok(())
}

/// A sample's id and epoch (from 1 to [`MAX_EPOCHS`]).
fn sample_key(log: &Log, i: usize, s: &Value) -> Result<(String, u32), InputError> {
    let key = |field: &str| format!("samples[{i}].{field}");
    let id = match s.get("id") {
        Some(Value::String(x)) => x.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => return Err(log.err(&key("id"), "missing or not a string or number")),
    };
    let epoch = s
        .get("epoch")
        .and_then(Value::as_u64)
        .filter(|&e| (1..=MAX_EPOCHS).contains(&e))
        .ok_or_else(|| {
            log.err(&key("epoch"), format!("missing or not a whole number from 1 to {MAX_EPOCHS}"))
        })? as u32;
    Ok((id, epoch))
}

/// A sample's error: its message, and the exception's class: the traceback's
/// last line (`openai.RateLimitError: ...`), else the message's repr.
fn sample_error(s: &Value) -> (Option<String>, Option<String>) {
    let error_value = s.get("error").filter(|e| !e.is_null());
    let error = error_value.map(|e| {
        e.get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| e.to_string())
    });
    let error_class = error_value.map(|e| {
        let last = e
            .get("traceback")
            .and_then(Value::as_str)
            .and_then(|t| t.lines().rev().find(|l| !l.trim().is_empty()))
            .unwrap_or("");
        let from_traceback = last.split(':').next().unwrap_or("").trim();
        if !from_traceback.is_empty() && !from_traceback.contains(' ') {
            from_traceback.to_string()
        } else {
            error.clone().unwrap_or_default()
        }
    });
    (error, error_class)
}

/// A sample's status and end: an error's (a provider's or the harness's), a
/// limit's (noted in `detail` too), else its grade's.
fn sample_status(
    error: &Option<String>,
    error_class: &Option<String>,
    limit: Option<&Value>,
    graded_pass: Option<bool>,
    detail: &mut serde_json::Map<String, Value>,
) -> (TrialStatus, EndReason) {
    if let (Some(message), Some(class)) = (error, error_class) {
        let st = error_status(class);
        detail.insert("error".into(), Value::String(message.clone()));
        (
            st,
            if st == TrialStatus::ProviderError {
                EndReason::ProviderError
            } else {
                EndReason::HarnessError
            },
        )
    } else if let Some(l) = limit {
        let kind = l.get("type").and_then(Value::as_str).unwrap_or("");
        detail.insert("limit".into(), l.clone());
        limit_status(kind)
    } else {
        match graded_pass {
            Some(true) => (TrialStatus::Passed, EndReason::ModelDone),
            Some(false) => (TrialStatus::Failed, EndReason::ModelDone),
            None => (TrialStatus::GraderError, EndReason::ModelDone),
        }
    }
}

/// The status and end of a sample that hit a limit (its `limit.type`).
fn limit_status(kind: &str) -> (TrialStatus, EndReason) {
    match kind {
        "time" | "working" => {
            (TrialStatus::Timeout, EndReason::Budget { limit: BudgetLimit::WorkingSeconds })
        }
        "token" | "context" => {
            (TrialStatus::BudgetExhausted, EndReason::Budget { limit: BudgetLimit::TotalTokens })
        }
        "cost" => (TrialStatus::BudgetExhausted, EndReason::Budget { limit: BudgetLimit::Cost }),
        "message" | "turn" | "custom" => {
            (TrialStatus::BudgetExhausted, EndReason::Budget { limit: BudgetLimit::Steps })
        }
        _ => (TrialStatus::HarnessError, EndReason::HarnessError),
    }
}

/// What every sample of one log reads: the log, the scorer that decides and
/// its threshold, and the log's arm and model.
struct Samples<'a> {
    log: &'a Log,
    scorer: &'a str,
    threshold: f64,
    identity: IndexMap<String, ComponentValue>,
    model: String,
}

impl Samples<'_> {
    /// Sample `i` of the log (`id`, `epoch`) as a trial.
    fn trial(
        &self,
        i: usize,
        s: &Value,
        id: String,
        epoch: u32,
    ) -> Result<ImportedTrial, InputError> {
        let (log, scorer) = (self.log, self.scorer);
        let key = |field: &str| format!("samples[{i}].{field}");
        let mut detail = serde_json::Map::new();
        let (tokens, cost) = usage(s).map_err(|(field, m)| log.err(&key(&field), m))?;
        let score = s
            .get("scores")
            .and_then(|o| o.get(scorer))
            .or_else(|| (scorer == "score").then(|| s.get("score")).flatten())
            .filter(|v| !v.is_null());
        let value = score.and_then(|sc| sc.get("value"));
        if let Some(v) = value {
            detail.insert("score".into(), v.clone());
        }
        let number = value.and_then(score_value);
        let graded_pass = number.map(|x| x >= self.threshold);
        let (error, error_class) = sample_error(s);
        let limit = s.get("limit").filter(|l| !l.is_null());
        let (status, end_reason) =
            sample_status(&error, &error_class, limit, graded_pass, &mut detail);
        let error = error.or_else(|| match (status, value) {
            (TrialStatus::GraderError, None) => Some(format!("no `{scorer}` score")),
            (TrialStatus::GraderError, Some(v)) => {
                Some(format!("the `{scorer}` score {v} cannot be read as a number"))
            }
            _ => None,
        });
        let steps = s.get("events").and_then(Value::as_array).map_or(0, |e| {
            e.iter().filter(|e| e.get("event").and_then(Value::as_str) == Some("model")).count()
        }) as u32;
        let text = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        Ok(ImportedTrial {
            from: ImportedFrom {
                file: log.file.clone(),
                id: format!("sample {id} epoch {epoch}"),
                detail: Value::Object(detail),
            },
            input: log.input.clone(),
            task: id,
            task_digest: task_digest(s),
            identity: self.identity.clone(),
            model: self.model.clone(),
            repeat: Some(epoch - 1),
            sort_key: String::new(),
            status,
            end_reason,
            graded_pass: if error.is_some() && status.is_infrastructure_error() {
                None
            } else {
                graded_pass
            },
            steps,
            tokens,
            cost_usd: cost,
            working_seconds: s.get("working_time").and_then(Value::as_f64).unwrap_or(0.0),
            wall_seconds: s.get("total_time").and_then(Value::as_f64).unwrap_or(0.0),
            started_at: text("started_at"),
            finished_at: text("completed_at"),
            error,
        })
    }

    /// The planned samples (`eval.dataset.sample_ids` by `eval.config.epochs`)
    /// a log that did not finish lacks, as unfinished trials; one whose task
    /// has no finished sample in the log is left out.
    fn unfinished(
        &self,
        status: &str,
        seen: &std::collections::HashSet<(String, u32)>,
        out: &mut Vec<ImportedTrial>,
    ) -> Result<(), InputError> {
        let log = self.log;
        let ids: Vec<String> = log
            .header
            .pointer("/eval/dataset/sample_ids")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| {
                        v.as_str().map(str::to_string).or_else(|| v.as_u64().map(|n| n.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let epochs = log.header.pointer("/eval/config/epochs").and_then(Value::as_u64).unwrap_or(1);
        if epochs > MAX_EPOCHS {
            return Err(log.err(
                "eval.config.epochs",
                format!("{epochs} epochs: more than {MAX_EPOCHS} is not believed"),
            ));
        }
        let epochs = epochs as u32;
        let digests: std::collections::HashMap<String, String> = out
            .iter()
            .filter(|t| t.input == log.input && t.from.file == log.file)
            .map(|t| (t.task.clone(), t.task_digest.clone()))
            .collect();
        for id in &ids {
            for epoch in 1..=epochs {
                if seen.contains(&(id.clone(), epoch)) {
                    continue;
                }
                // Without a finished sample of the task its input is unknown: it pairs by id alone.
                let Some(digest) = digests.get(id).cloned() else { continue };
                out.push(ImportedTrial::unfinished(
                    ImportedFrom {
                        file: log.file.clone(),
                        id: format!("sample {id} epoch {epoch}"),
                        detail: serde_json::json!({"missing": format!("not in the log, whose status is `{status}`")}),
                    },
                    log.input.clone(),
                    id.clone(),
                    digest,
                    self.identity.clone(),
                    self.model.clone(),
                    Some(epoch - 1),
                    format!("the sample is not in the log (the eval's status is `{status}`)"),
                ));
            }
        }
        Ok(())
    }
}

/// Tokens over every model the sample used, and their cost when every model
/// gives one; a negative count or cost is refused: (its field, why).
fn usage(s: &Value) -> Result<(Tokens, Option<f64>), (String, String)> {
    let mut t = Tokens::default();
    let mut cost = Some(0.0);
    let Some(m) = s.get("model_usage").and_then(Value::as_object) else { return Ok((t, None)) };
    for (model, u) in m {
        let field = |k: &str| format!("model_usage.{model}.{k}");
        let n = |k: &str| super::count(u.get(k)).map_err(|e| (field(k), e));
        t.add(Tokens {
            input: n("input_tokens")?,
            output: n("output_tokens")?,
            cached: n("input_tokens_cache_read")?,
        });
        let c = super::cost(u.get("total_cost")).map_err(|e| (field("total_cost"), e))?;
        cost = cost.zip(c).map(|(a, b)| a + b);
    }
    Ok((t, cost))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_numbers_outside_strings_read_as_null() {
        let raw =
            br#"{"a": NaN, "b": "NaN and Infinity", "c": [-Infinity, Infinity], "d": "\"NaN"}"#;
        let v: Value = serde_json::from_slice(&non_finite_as_null(raw)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"a": null, "b": "NaN and Infinity", "c": [null, null], "d": "\"NaN"})
        );
        assert!(matches!(non_finite_as_null(b"{\"a\": 1}"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn score_values_read_as_inspects_value_to_float() {
        // inspect_ai/scorer/_metric.py value_to_float: C 1, P 0.5, I/N 0, numbers, yes/true/no/false, numeric text.
        let cases = [
            (serde_json::json!("C"), Some(1.0)),
            (serde_json::json!("P"), Some(0.5)),
            (serde_json::json!("I"), Some(0.0)),
            (serde_json::json!("N"), Some(0.0)),
            (serde_json::json!(0.75), Some(0.75)),
            (serde_json::json!(true), Some(1.0)),
            (serde_json::json!("Yes"), Some(1.0)),
            (serde_json::json!("false"), Some(0.0)),
            (serde_json::json!("0.25"), Some(0.25)),
            (serde_json::json!("nan"), None),
            (serde_json::json!("c"), None),
            (serde_json::json!([1, 0]), None),
            (Value::Null, None),
        ];
        for (v, want) in cases {
            assert_eq!(score_value(&v), want, "{v}");
        }
    }

    #[test]
    fn api_errors_are_provider_errors() {
        assert_eq!(error_status("RateLimitError('Error code: 429')"), TrialStatus::ProviderError);
        assert_eq!(error_status("openai.AuthenticationError: bad key"), TrialStatus::ProviderError);
        assert_eq!(
            error_status("RuntimeError('deliberate solver failure')"),
            TrialStatus::HarnessError
        );
        // inspect stores an openai exception's `.message` ("Error code: 429 ..."); the class comes from the traceback.
        assert_eq!(error_status("openai.RateLimitError"), TrialStatus::ProviderError);
    }
}
