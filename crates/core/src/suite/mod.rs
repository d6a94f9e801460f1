//! Task suites: `suite.toml` plus one folder per task (README, "Concepts"; imported suites: docs/suites.md).
//!
//! ```text
//! tasks/core/suite.toml                 name, version, description
//! tasks/core/<id>/task.toml             id, difficulty, tests, prompt, editable, [check]
//! tasks/core/<id>/workspace/            what the agent starts with (stub)
//! tasks/core/<id>/tests/                the checks; never writable by the agent
//! tasks/core/<id>/solution/             reference versions of the editable files
//! ```

pub mod harbor;
pub mod import;

use crate::digest;
use crate::error::{InputError, parse_toml_file};
use serde::{Deserialize, Serialize};
use std::path::{Component as PathComponent, Path, PathBuf};
use std::time::Duration;

pub use crate::record::GradingMode;
pub use crate::record::design::SuiteSource;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    name: String,
    version: String,
    #[serde(default)]
    description: String,
    /// Where an imported suite came from (`ablate suite import`).
    source: Option<SuiteSource>,
    /// Settings of the suite's container (Harbor) tasks.
    containers: Option<ContainerSettings>,
    /// Every task must grade in this mode (`[check] mode`), or the suite does not load.
    require_mode: Option<GradingMode>,
}

/// A suite's settings for its container tasks (`[containers]` in suite.toml).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerSettings {
    /// A trial passes when its reward reaches this (Harbor's tasks give 1 for
    /// solved, 0 otherwise).
    #[serde(default = "default_threshold")]
    pub reward_threshold: f64,
    /// Limits where a task's task.toml gives none.
    #[serde(default = "default_cpus")]
    pub cpus: f64,
    #[serde(default = "default_memory_mb")]
    pub memory_mb: u64,
    #[serde(default = "default_pids")]
    pub pids_limit: u64,
}

fn default_threshold() -> f64 {
    1.0
}
fn default_cpus() -> f64 {
    1.0
}
fn default_memory_mb() -> u64 {
    2048
}
fn default_pids() -> u64 {
    512
}

impl Default for ContainerSettings {
    fn default() -> Self {
        ContainerSettings {
            reward_threshold: default_threshold(),
            cpus: default_cpus(),
            memory_mb: default_memory_mb(),
            pids_limit: default_pids(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    id: String,
    difficulty: Difficulty,
    /// Exact number of test cases the checks hold.
    tests: u32,
    prompt: String,
    editable: Vec<String>,
    check: RawCheck,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    command: Vec<String>,
    timeout_seconds: f64,
    parser: OutputParser,
    /// Where the candidate's code runs (docs/sandbox.md); in process when unset.
    mode: Option<GradingMode>,
    /// Sandbox limits (docs/sandbox.md); unset keys keep the defaults.
    memory_mb: Option<u64>,
    file_size_mb: Option<u64>,
    cpu_seconds: Option<u64>,
    processes: Option<u64>,
    open_files: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Difficulty {
    Easy,
    Medium,
    Hard,
}

/// How passed/total is read from a check's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputParser {
    /// Python `unittest -v`: per-test lines, `Ran N tests`, `OK` / `FAILED (...)`.
    Unittest,
    /// pytest: the final `=== 3 failed, 10 passed in 0.1s ===` line.
    Pytest,
}

/// The checks of a task: an argv list run in the sandbox root.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckSpec {
    pub command: Vec<String>,
    #[serde(with = "secs")]
    pub timeout: Duration,
    pub parser: OutputParser,
    /// Number of test cases declared in task.toml; the grader never reports a
    /// smaller denominator (a candidate that breaks the import runs "1 test").
    pub tests: u32,
    /// Resource limits of the check's process tree in the sandbox.
    pub limits: Limits,
    /// Where the candidate's code runs while the checks run.
    pub mode: GradingMode,
}

mod secs {
    use serde::Serializer;
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Task {
    pub id: String,
    pub difficulty: Difficulty,
    /// The prompt (a Harbor task's instruction.md).
    pub prompt: String,
    /// Paths, relative to the workspace, that the agent may write (none for a container task).
    pub editable: Vec<String>,
    /// The checks (for a container task: its verifier, one "test" that passes
    /// when the reward reaches the suite's threshold).
    pub check: CheckSpec,
    /// How the task runs: in the jail (Python) or in a container of its image (Harbor).
    #[serde(flatten)]
    pub kind: TaskKind,
    #[serde(skip)]
    pub dir: PathBuf,
    /// sha256 over every file of the task folder.
    pub digest: String,
}

/// How a task runs: what ablate starts for its trials and what grades them.
#[derive(Debug, Clone)]
pub enum TaskKind {
    /// A Python task: a copy of its workspace in the bubblewrap jail, graded by the test runner.
    Python,
    /// A Harbor task: a container of its own image, graded by its verifier.
    Container(Box<harbor::ContainerTask>),
}

impl TaskKind {
    /// The kind as an external harness is told it (`ABLATE_TASK_KIND`, the trial file's `kind`).
    pub fn name(&self) -> &'static str {
        match self {
            TaskKind::Python => "python",
            TaskKind::Container(_) => "container",
        }
    }
}

/// Written into its task's fields: a Python task adds none, a Harbor task its `container`.
impl Serialize for TaskKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut fields = s.serialize_map(None)?;
        match self {
            TaskKind::Python => {}
            TaskKind::Container(c) => fields.serialize_entry("container", c)?,
        }
        fields.end()
    }
}

impl Task {
    /// The task's own bound on the agent's working time (a Harbor task's agent timeout).
    pub fn agent_timeout_sec(&self) -> Option<f64> {
        match &self.kind {
            TaskKind::Python => None,
            TaskKind::Container(c) => c.agent_timeout_sec,
        }
    }
    /// The test command a harness is shown: a Python task's own; none for a
    /// container task, whose tests stay hidden until its verifier runs.
    pub(crate) fn shown_test_command(&self) -> Option<&[String]> {
        match &self.kind {
            TaskKind::Python => Some(&self.check.command),
            TaskKind::Container(_) => None,
        }
    }
    pub fn workspace_dir(&self) -> PathBuf {
        self.dir.join("workspace")
    }
    pub(crate) fn tests_dir(&self) -> PathBuf {
        self.dir.join("tests")
    }
    pub fn solution_dir(&self) -> PathBuf {
        self.dir.join("solution")
    }
    pub(crate) fn toml_path(&self) -> PathBuf {
        self.dir.join("task.toml")
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Suite {
    pub name: String,
    pub version: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SuiteSource>,
    /// Settings of the container tasks (defaults where suite.toml has none).
    pub containers: ContainerSettings,
    #[serde(skip)]
    pub root: PathBuf,
    pub tasks: Vec<Task>,
    /// sha256 over `suite.toml` and every file of every task.
    pub digest: String,
}

impl Suite {
    pub fn task(&self, id: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id == id)
    }
}

/// Load and validate a suite folder. Tasks are sorted by id.
pub fn load(root: &Path) -> Result<Suite, InputError> {
    let suite_toml = root.join("suite.toml");
    let raw = read_suite_toml(root, &suite_toml)?;
    let containers = check_suite_toml(&suite_toml, &raw)?;
    let tasks = load_tasks(root)?;
    check_required_mode(raw.require_mode, &tasks)?;
    let digest = suite_digest(&suite_toml, &tasks)?;
    Ok(Suite {
        name: raw.name,
        version: raw.version,
        description: raw.description,
        source: raw.source,
        containers,
        root: root.to_path_buf(),
        tasks,
        digest,
    })
}

/// suite.toml, or for a Harbor dataset as cloned (which has none) its folder's name.
fn read_suite_toml(root: &Path, suite_toml: &Path) -> Result<RawSuite, InputError> {
    let raw: RawSuite = if suite_toml.is_file() {
        parse_toml_file(suite_toml)?
    } else if is_harbor_dataset(root) {
        // A Harbor dataset as cloned: its folder's name, and the digest of its files.
        let name = root
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "harbor".into());
        RawSuite {
            name,
            version: "harbor".into(),
            description: String::new(),
            source: None,
            containers: None,
            require_mode: None,
        }
    } else {
        return Err(InputError::new(
            suite_toml,
            "no suite.toml here: is this a task suite folder (or a Harbor dataset)?",
        ));
    };
    Ok(raw)
}

/// suite.toml's `[containers]` settings (defaults where it has none), and its source's digest.
fn check_suite_toml(suite_toml: &Path, raw: &RawSuite) -> Result<ContainerSettings, InputError> {
    let containers = raw.containers.clone().unwrap_or_default();
    if !(containers.reward_threshold.is_finite()) {
        return Err(InputError::at(suite_toml, "containers.reward_threshold", "must be a number"));
    }
    if !(containers.cpus.is_finite() && containers.cpus > 0.0) {
        return Err(InputError::at(suite_toml, "containers.cpus", "must be a positive number"));
    }
    if containers.memory_mb == 0 || containers.pids_limit == 0 {
        let key = if containers.memory_mb == 0 {
            "containers.memory_mb"
        } else {
            "containers.pids_limit"
        };
        return Err(InputError::at(suite_toml, key, "must be at least 1"));
    }
    if let Some(src) = &raw.source
        && (src.sha256.len() != 64
            || !src.sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    {
        return Err(InputError::at(
            suite_toml,
            "source.sha256",
            "expected 64 lowercase hex digits",
        ));
    }
    Ok(containers)
}

/// Every task folder of the suite, sorted by name, loaded as a Python or a Harbor task.
fn load_tasks(root: &Path) -> Result<Vec<Task>, InputError> {
    let mut task_dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .map_err(|e| InputError::new(root, format!("cannot list suite folder: {e}")))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir() && !digest::is_ignored(&p.file_name().unwrap_or_default().to_string_lossy())
        })
        .collect();
    task_dirs.sort();
    let mut tasks = Vec::new();
    for dir in task_dirs {
        if !dir.join("task.toml").is_file() {
            return Err(InputError::new(&dir, "task folder has no task.toml"));
        }
        if harbor::lacks_instruction(&dir) {
            return Err(InputError::new(
                dir.join("instruction.md"),
                "missing: a Harbor task (task.toml beside environment/ or tests/test.sh) has its prompt in instruction.md",
            ));
        }
        tasks.push(if harbor::is_harbor_task(&dir) {
            load_harbor_task(&dir)?
        } else {
            load_task(&dir)?
        });
    }
    if tasks.is_empty() {
        return Err(InputError::new(root, "suite holds no tasks"));
    }
    Ok(tasks)
}

/// suite.toml's `require_mode`: every task grades in that mode.
fn check_required_mode(required: Option<GradingMode>, tasks: &[Task]) -> Result<(), InputError> {
    if let Some(required) = required
        && let Some(task) = tasks.iter().find(|t| t.check.mode != required)
    {
        let why = match task.kind {
            TaskKind::Python => {
                "declare it under [check] or grade the task in the mode the suite requires"
            }
            TaskKind::Container(_) => {
                "a container task's verifier runs in its container, not in either mode"
            }
        };
        return Err(InputError::at(
            task.toml_path(),
            "check.mode",
            format!(
                "suite.toml requires require_mode = \"{}\" of every task; this task grades {} ({why})",
                required.name(),
                task.check.mode.name()
            ),
        ));
    }
    Ok(())
}

/// sha256 over suite.toml (empty for a Harbor dataset) and every task's digest.
fn suite_digest(suite_toml: &Path, tasks: &[Task]) -> Result<String, InputError> {
    let suite_bytes = if suite_toml.is_file() {
        std::fs::read(suite_toml).map_err(|e| InputError::new(suite_toml, e.to_string()))?
    } else {
        Vec::new()
    };
    let suite_file_digest = digest::sha256_hex(&suite_bytes);
    let mut parts = vec![("suite.toml", suite_file_digest.as_str())];
    parts.extend(tasks.iter().map(|t| (t.id.as_str(), t.digest.as_str())));
    Ok(digest::digest_parts(parts))
}

/// A folder without suite.toml whose task folders are all Harbor tasks.
pub(crate) fn is_harbor_dataset(root: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(root) else { return false };
    let dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir() && !digest::is_ignored(&p.file_name().unwrap_or_default().to_string_lossy())
        })
        .collect();
    !dirs.is_empty() && dirs.iter().all(|d| harbor::is_harbor_task(d))
}

/// A Harbor task folder as a task of the suite: its folder name is its id.
pub(crate) fn load_harbor_task(dir: &Path) -> Result<Task, InputError> {
    let (container, instruction, difficulty) = harbor::load(dir)?;
    let id = dir.file_name().unwrap_or_default().to_string_lossy().to_string();
    if !is_slug(&id) {
        return Err(InputError::new(
            dir,
            "a task folder's name is its id: use lowercase letters, digits and '-' only",
        ));
    }
    for sub in ["environment", "tests", "solution"] {
        if std::fs::symlink_metadata(dir.join(sub)).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(InputError::new(
                dir.join(sub),
                format!(
                    "`{sub}` is a symbolic link: a task's folders must be folders of its own (links are never followed)"
                ),
            ));
        }
    }
    let digest = digest::tree_digest(dir)
        .map_err(|e| InputError::new(dir, format!("cannot read task files: {e}")))?;
    let difficulty = match difficulty.as_deref() {
        Some("easy") => Difficulty::Easy,
        Some("hard") => Difficulty::Hard,
        _ => Difficulty::Medium,
    };
    Ok(Task {
        id,
        difficulty,
        prompt: instruction,
        editable: Vec::new(),
        check: CheckSpec {
            command: vec!["bash".into(), "/tests/test.sh".into()],
            timeout: Duration::from_secs_f64(container.verifier_timeout_sec),
            parser: OutputParser::Unittest,
            tests: 1,
            limits: Limits::default(),
            mode: GradingMode::InProcess,
        },
        kind: TaskKind::Container(Box::new(container)),
        dir: dir.to_path_buf(),
        digest,
    })
}

/// The standard-library modules the grader's runner has imported before a
/// task's code loads (its `ready` line on CPython 3.11, Debian's and pyenv's
/// builds together, and what runner.py imports itself: keep the two in step).
/// An editable file named like one of them would be the grader's module for
/// every check, so a task may not have one.
pub(crate) const GRADER_MODULES: &[&str] = &[
    "abc",
    "argparse",
    "ast",
    "atexit",
    "binascii",
    "bisect",
    "builtins",
    "bz2",
    "codecs",
    "collections",
    "contextlib",
    "copy",
    "copyreg",
    "dataclasses",
    "difflib",
    "dis",
    "encodings",
    "enum",
    "errno",
    "fnmatch",
    "functools",
    "genericpath",
    "gettext",
    "hashlib",
    "heapq",
    "importlib",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "keyword",
    "linecache",
    "locale",
    "logging",
    "lzma",
    "marshal",
    "math",
    "ntpath",
    "opcode",
    "operator",
    "os",
    "pathlib",
    "posix",
    "posixpath",
    "pprint",
    "random",
    "re",
    "reprlib",
    "shutil",
    "signal",
    "site",
    "stat",
    "string",
    "struct",
    "sys",
    "tempfile",
    "textwrap",
    "threading",
    "time",
    "token",
    "tokenize",
    "traceback",
    "types",
    "typing",
    "unittest",
    "urllib",
    "warnings",
    "weakref",
    "zipfile",
    "zipimport",
    "zlib",
];

/// The grader module a workspace file would stand for (`unittest.py`,
/// `json/...`), if any: only files at the top of the workspace are on sys.path.
pub(crate) fn grader_module_named_by(rel: &str) -> Option<&'static str> {
    let top = rel.split('/').next().unwrap_or(rel);
    let stem = if rel.contains('/') {
        top
    } else {
        top.strip_suffix(".py").or_else(|| top.strip_suffix(".pyc")).unwrap_or(top)
    };
    GRADER_MODULES.iter().copied().find(|m| *m == stem)
}

/// Load one task folder and check its shape (not its behaviour: see `check`).
pub fn load_task(dir: &Path) -> Result<Task, InputError> {
    let file = dir.join("task.toml");
    let raw: RawTask = parse_toml_file(&file)?;
    check_task_header(&file, dir, &raw)?;
    check_editable(&file, dir, &raw.editable)?;
    let mode = check_command(&file, &raw)?;
    let limits = check_limits(&file, &raw.check)?;
    check_task_folders(dir)?;
    let digest = digest::tree_digest(dir)
        .map_err(|e| InputError::new(dir, format!("cannot read task files: {e}")))?;
    Ok(Task {
        id: raw.id,
        difficulty: raw.difficulty,
        prompt: raw.prompt,
        editable: raw.editable,
        check: CheckSpec {
            command: raw.check.command,
            timeout: Duration::from_secs_f64(raw.check.timeout_seconds),
            parser: raw.check.parser,
            tests: raw.tests,
            limits,
            mode,
        },
        kind: TaskKind::Python,
        dir: dir.to_path_buf(),
        digest,
    })
}

/// task.toml's id (its folder's name, a slug), its number of tests and its prompt.
fn check_task_header(file: &Path, dir: &Path, raw: &RawTask) -> Result<(), InputError> {
    let dir_name = dir.file_name().unwrap_or_default().to_string_lossy().to_string();
    if raw.id != dir_name {
        return Err(InputError::at(
            file,
            "id",
            format!("id `{}` differs from its folder name `{dir_name}`", raw.id),
        ));
    }
    if !is_slug(&raw.id) {
        return Err(InputError::at(file, "id", "use lowercase letters, digits and '-' only"));
    }
    if raw.tests == 0 {
        return Err(InputError::at(file, "tests", "a task needs at least one test"));
    }
    if raw.prompt.trim().is_empty() {
        return Err(InputError::at(file, "prompt", "the prompt is empty"));
    }
    Ok(())
}

/// task.toml's `editable`: files of the workspace, each with a reference version, never a
/// test, a standard module the grader imports or a symbolic link.
fn check_editable(file: &Path, dir: &Path, editable: &[String]) -> Result<(), InputError> {
    if editable.is_empty() {
        return Err(InputError::at(file, "editable", "name at least one editable file"));
    }
    for (i, rel) in editable.iter().enumerate() {
        let key = format!("editable[{i}]");
        if !is_plain_relative(rel) {
            return Err(InputError::at(
                file,
                key,
                format!("`{rel}` must be a relative path inside the workspace"),
            ));
        }
        if rel.starts_with("tests/") || rel == "tests" {
            return Err(InputError::at(file, key, "tests are never editable"));
        }
        if let Some(m) = grader_module_named_by(rel) {
            return Err(InputError::at(
                file,
                key,
                format!(
                    "`{rel}` would stand for the standard module `{m}` the grader imports; name it otherwise"
                ),
            ));
        }
        for sub in ["workspace", "solution"] {
            if std::fs::symlink_metadata(dir.join(sub).join(rel))
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                return Err(InputError::at(
                    file,
                    key.clone(),
                    format!(
                        "`{sub}/{rel}` is a symbolic link: an editable file must be a file of the task's own (links are never followed)"
                    ),
                ));
            }
        }
        if !dir.join("workspace").join(rel).is_file() {
            return Err(InputError::at(file, key, format!("`{rel}` is not in workspace/")));
        }
        if !dir.join("solution").join(rel).is_file() {
            return Err(InputError::at(
                file,
                key,
                format!("`{rel}` has no reference version in solution/"),
            ));
        }
    }
    Ok(())
}

/// `[check]`'s command (the grader's runner's) and timeout, and the grading mode, which
/// grades out of process only Python modules at the top of the workspace.
fn check_command(file: &Path, raw: &RawTask) -> Result<GradingMode, InputError> {
    if raw.check.command.is_empty() {
        return Err(InputError::at(file, "check.command", "the check command is empty"));
    }
    if !(raw.check.timeout_seconds > 0.0 && raw.check.timeout_seconds <= 3600.0) {
        return Err(InputError::at(file, "check.timeout_seconds", "must be in (0, 3600]"));
    }
    runner_mode(&raw.check.command, raw.check.parser)
        .map_err(|e| InputError::at(file, "check.command", e.to_string()))?;
    let mode = raw.check.mode.unwrap_or_default();
    if mode == GradingMode::OutOfProcess
        && let Some((i, rel)) =
            raw.editable.iter().enumerate().find(|(_, rel)| remote_module(rel).is_none())
    {
        return Err(InputError::at(
            file,
            format!("editable[{i}]"),
            format!(
                "`{rel}`: check.mode = \"out_of_process\" grades Python modules at the top of the workspace only (`name.py`); use mode \"in_process\" for this task"
            ),
        ));
    }
    Ok(mode)
}

/// `[check]`'s sandbox limits: each one set in range, the defaults for the others.
fn check_limits(file: &Path, check: &RawCheck) -> Result<Limits, InputError> {
    let mut limits = Limits::default();
    for (key, value, slot, max) in [
        ("check.memory_mb", check.memory_mb, &mut limits.memory_mb, 65_536),
        ("check.file_size_mb", check.file_size_mb, &mut limits.file_size_mb, 65_536),
        ("check.cpu_seconds", check.cpu_seconds, &mut limits.cpu_seconds, 86_400),
        ("check.processes", check.processes, &mut limits.processes, 4_096),
        ("check.open_files", check.open_files, &mut limits.open_files, 65_536),
    ] {
        if let Some(v) = value {
            if v == 0 || v > max {
                return Err(InputError::at(file, key, format!("must be in 1..={max}")));
            }
            *slot = v;
        }
    }
    Ok(limits)
}

/// The task's own folders (never symbolic links), tests/ among them.
fn check_task_folders(dir: &Path) -> Result<(), InputError> {
    for sub in ["workspace", "tests", "solution"] {
        if std::fs::symlink_metadata(dir.join(sub)).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(InputError::new(
                dir.join(sub),
                format!(
                    "`{sub}` is a symbolic link: a task's folders must be folders of its own (links are never followed)"
                ),
            ));
        }
    }
    if !dir.join("tests").is_dir() {
        return Err(InputError::new(dir, "task has no tests/ folder"));
    }
    Ok(())
}

/// The module an editable file is, for out-of-process grading: `name.py` at
/// the top of the workspace, `name` an identifier.
pub(crate) fn remote_module(rel: &str) -> Option<&str> {
    rel.strip_suffix(".py").filter(|stem| is_ascii_name(stem))
}

/// A letter or `_`, then letters, digits and `_` (ASCII): a module's or a variable's name.
pub(crate) fn is_ascii_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(crate) fn is_slug(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A relative path with only normal components (no `..`, no root, no `.`).
pub(crate) fn is_plain_relative(p: &str) -> bool {
    let path = Path::new(p);
    !p.is_empty() && path.components().all(|c| matches!(c, PathComponent::Normal(_)))
}

/// Resource limits of one check process tree. Defaults suit unit-test checks;
/// a task can change them under `[check]` in task.toml.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Address space of each process (RLIMIT_AS), MiB.
    pub memory_mb: u64,
    /// Largest file a process may write (RLIMIT_FSIZE), MiB.
    pub file_size_mb: u64,
    /// CPU time of each process (RLIMIT_CPU), seconds.
    pub cpu_seconds: u64,
    /// Processes and threads of the jail's uid (RLIMIT_NPROC).
    pub processes: u64,
    /// Open file descriptors per process (RLIMIT_NOFILE).
    pub open_files: u64,
    /// Whether `memory_mb` also bounds each process's address space
    /// (RLIMIT_AS) where a memory cgroup already holds the jail. Runtimes
    /// that reserve far more address space than they use (Bun, the JVM)
    /// need it off; without a cgroup the rlimit is always set.
    #[serde(skip, default = "address_space_limited")]
    pub address_space: bool,
}

fn address_space_limited() -> bool {
    true
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_mb: 1024,
            file_size_mb: 64,
            cpu_seconds: 60,
            processes: 64,
            open_files: 256,
            address_space: true,
        }
    }
}

/// Which of the grader's runner modes a task's command is: the command must be
/// `python3 -m unittest ...` (parser unittest) or `python3 -m pytest ...`
/// (parser pytest); the grader runs it through its own runner. Returns the
/// mode and the arguments after the module name.
pub(crate) fn runner_mode(
    command: &[String],
    parser: OutputParser,
) -> Result<(&'static str, &[String]), NotTheRunnersCommand> {
    let want = match parser {
        OutputParser::Unittest => "unittest",
        OutputParser::Pytest => "pytest",
    };
    let ok_python = command.first().is_some_and(|p| p == "python3" || p == "python");
    if !ok_python || command.len() < 3 || command[1] != "-m" || command[2] != want {
        return Err(NotTheRunnersCommand { want });
    }
    Ok((want, &command[3..]))
}

/// A check command the grader cannot run through its own runner: `want` is the parser's module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "with parser = \"{want}\" the command must be [\"python3\", \"-m\", \"{want}\", ...]: the grader runs the tests through its own runner (docs/sandbox.md)"
)]
pub(crate) struct NotTheRunnersCommand {
    pub want: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every module the grader's runner imports before a task's code loads (each `import` line
    /// of runner.py before its pytest mode, which imports after the task's code) is one a task's
    /// editable file may not be named like.
    #[test]
    fn the_runners_own_imports_are_grader_modules() {
        let runner = crate::grader::RUNNER_PY;
        let unittest_part = &runner[..runner.find("def run_pytest(").unwrap()];
        let mut seen = 0;
        for line in unittest_part.lines().map(str::trim) {
            let Some(names) = line.strip_prefix("import ") else { continue };
            let names = names.split('#').next().unwrap();
            for name in names.split(',').map(|n| n.trim().split('.').next().unwrap()) {
                seen += 1;
                assert!(
                    GRADER_MODULES.contains(&name),
                    "runner.py imports {name}: add it to GRADER_MODULES"
                );
            }
        }
        assert!(seen > 30, "{seen} imports read");
    }

    fn write_task(root: &Path, id: &str, toml_text: &str) {
        let dir = root.join(id);
        for sub in ["workspace", "tests", "solution"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        std::fs::write(dir.join("task.toml"), toml_text).unwrap();
        std::fs::write(dir.join("workspace/m.py"), "def f():\n    raise NotImplementedError\n")
            .unwrap();
        std::fs::write(dir.join("solution/m.py"), "def f():\n    return 1\n").unwrap();
        std::fs::write(dir.join("tests/test_m.py"), "").unwrap();
    }

    const GOOD: &str = r#"
id = "t1"
difficulty = "easy"
tests = 1
prompt = "write f"
editable = ["m.py"]
[check]
command = ["python3", "-m", "unittest"]
timeout_seconds = 5
parser = "unittest"
"#;

    #[test]
    fn loads_a_task_and_digest_tracks_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("suite.toml"), "name = \"s\"\nversion = \"1\"\n").unwrap();
        write_task(dir.path(), "t1", GOOD);
        // The digests as documented, from Python's hashlib: a task's is the tree digest of its
        // folder (path, NUL, sha256 hex of the bytes, newline, in path order: solution/m.py,
        // task.toml, tests/test_m.py, workspace/m.py); the suite's digests the parts
        // ("suite.toml", sha256 of suite.toml) and ("t1", the task's digest) as name, NUL, value, newline.
        let s1 = load(dir.path()).unwrap();
        assert_eq!(s1.tasks.len(), 1);
        assert_eq!(s1.tasks[0].check.tests, 1);
        assert_eq!(
            s1.tasks[0].digest,
            "6d874fcc8f98d29f5b3f157e76ed79273226eda722ff286b194df5f55a2a0aff"
        );
        assert_eq!(s1.digest, "45917b64b5f72c87b712cd585dec948cd14aee32af709a2e0e6910de644bd79c");
        std::fs::write(dir.path().join("t1/tests/test_m.py"), "# changed").unwrap();
        let s2 = load(dir.path()).unwrap();
        assert_eq!(
            s2.tasks[0].digest,
            "bb2de6ba9465b9cdddcc23a702c2901ce827a4a5a78c9321971179cc7c788b78"
        );
        assert_eq!(s2.digest, "d0d3ddb33564cd28dd4f0812710780148446c10cf7b6262d814d08efd513a842");
    }

    #[test]
    fn a_symlinked_editable_file_and_a_missing_instruction_are_named() {
        let dir = tempfile::tempdir().unwrap();
        write_task(dir.path(), "t1", GOOD);
        let ws = dir.path().join("t1/workspace/m.py");
        std::fs::remove_file(&ws).unwrap();
        std::os::unix::fs::symlink(dir.path().join("t1/solution/m.py"), &ws).unwrap();
        let err = load_task(&dir.path().join("t1")).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("editable[0]"));
        assert!(err.to_string().contains("`workspace/m.py` is a symbolic link"), "{err}");

        // A Harbor task folder without instruction.md: named as such, not read as another format.
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("suite.toml"), "name = \"s\"\nversion = \"1\"\n").unwrap();
        let task = root.path().join("h");
        std::fs::create_dir_all(task.join("environment")).unwrap();
        std::fs::create_dir_all(task.join("tests")).unwrap();
        std::fs::write(task.join("task.toml"), "version = \"1.0\"\n").unwrap();
        std::fs::write(task.join("tests/test.sh"), "true\n").unwrap();
        let err = load(root.path()).unwrap_err();
        assert!(err.file.ends_with("h/instruction.md"), "{err}");
        assert!(err.to_string().contains("missing"), "{err}");
    }

    #[test]
    fn task_errors_name_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        write_task(dir.path(), "t1", &GOOD.replace("\"m.py\"", "\"../m.py\""));
        let err = load_task(&dir.path().join("t1")).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("editable[0]"));
        assert!(err.file.ends_with("t1/task.toml"));

        write_task(dir.path(), "t1", &GOOD.replace("parser = \"unittest\"", "parser = \"junit\""));
        let err = load_task(&dir.path().join("t1")).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("check.parser"), "{err}");

        write_task(dir.path(), "t1", &GOOD.replace("id = \"t1\"", "id = \"t2\""));
        let err = load_task(&dir.path().join("t1")).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("id"));

        write_task(dir.path(), "t1", &format!("{GOOD}\nextra = 1\n"));
        let err = load_task(&dir.path().join("t1")).unwrap_err();
        assert!(err.to_string().contains("extra"), "{err}");
    }

    #[test]
    fn a_task_is_written_with_its_container_only_when_it_has_one() {
        let dir = tempfile::tempdir().unwrap();
        write_task(dir.path(), "t1", GOOD);
        let python = serde_json::to_value(load_task(&dir.path().join("t1")).unwrap()).unwrap();
        assert!(python.get("container").is_none() && python.get("id").is_some(), "{python}");
        let hello = load_harbor_task(&crate::repo_root().join("tasks/terminal/hello-file"));
        let harbor = serde_json::to_value(hello.unwrap()).unwrap();
        assert!(harbor["container"]["verifier_timeout_sec"].is_number(), "{harbor}");
    }

    #[test]
    fn plain_relative_paths() {
        assert!(is_plain_relative("a/b.py"));
        assert!(!is_plain_relative("../b.py"));
        assert!(!is_plain_relative("/etc/passwd"));
        assert!(!is_plain_relative("./b.py"));
        assert!(!is_plain_relative(""));
    }
}
