//! `ablate suite import FORMAT SOURCE -o DIR`: a suite from a JSONL problems
//! file (docs/suites.md).
//!
//! Two formats:
//! - `humaneval`: the lines of OpenAI's `HumanEval.jsonl(.gz)` (`task_id`,
//!   `prompt`, `entry_point`, `canonical_solution`, `test`);
//! - `jsonl`: ablate's own schema (`id`, `prompt`, `solution`, tests as
//!   unittest code or assert lines, ...), for MBPP-style or private data.
//!
//! The whole source is read and every line validated before anything is
//! written; a problem names the source file, the line and the field. The
//! suite is written into a temporary folder beside `DIR` and renamed into
//! place at the end, so an import that fails leaves nothing half-written.
//! The output depends only on the source bytes and the importer version
//! (recorded in `suite.toml`, which the suite digest covers): importing the
//! same file twice gives the same digest, another file another one.

use super::{Difficulty, GradingMode, is_plain_relative, is_slug};
use crate::digest;
use crate::error::InputError;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Version of the importers' output. Any change to what they write (file
/// layout, test wrapper, prompt text) must bump it: it is part of every
/// imported suite's `suite.toml`, and so of its digest.
pub const IMPORTER_VERSION: u32 = 2;

/// Largest decompressed source read (a guard against a gzip bomb).
const MAX_SOURCE_BYTES: u64 = 1 << 30;

/// Check timeout of imported tasks unless a line sets its own.
const DEFAULT_TIMEOUT_SECONDS: f64 = 10.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    HumanEval,
    Jsonl,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::HumanEval => "humaneval",
            Format::Jsonl => "jsonl",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ImportOptions {
    pub format: Format,
    pub source: PathBuf,
    pub out: PathBuf,
    /// Replace an existing suite folder at `out`.
    pub force: bool,
    /// Suite name; default: `humaneval`, or the source's file stem.
    pub name: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Imported {
    pub tasks: usize,
    pub source_sha256: String,
    pub name: String,
    pub version: String,
}

/// One problem, ready to be written as a task folder.
#[derive(Debug, Clone, PartialEq)]
struct Problem {
    /// Folder name and task id.
    id: String,
    /// The id as the source spells it.
    source_id: String,
    line: usize,
    difficulty: Difficulty,
    prompt: String,
    /// The editable file, e.g. `has_close_elements.py`.
    file: String,
    stub: String,
    solution: String,
    /// `tests/test_<module>.py`.
    test_file: String,
    test_code: String,
    tests: u32,
    timeout_seconds: f64,
    /// Where the candidate's code runs while the checks run.
    mode: GradingMode,
}

/// Read, validate and write. Nothing is written unless every line is valid.
pub fn import(opts: &ImportOptions) -> Result<Imported, InputError> {
    let bytes = read_source(&opts.source)?;
    let source_sha256 = digest::sha256_hex(&bytes);
    let text = decompress(&opts.source, &bytes)?;
    let problems = parse(opts.format, &opts.source, &text)?;
    let name = match &opts.name {
        Some(n) => n.clone(),
        None => match opts.format {
            Format::HumanEval => "humaneval".to_string(),
            Format::Jsonl => slugify(source_stem(&opts.source).as_str()),
        },
    };
    if !is_slug(&name) {
        return Err(InputError::new(
            &opts.source,
            format!("suite name `{name}`: use lowercase letters, digits and '-' only (--name)"),
        ));
    }
    let version = format!("{}-{}", IMPORTER_VERSION, &source_sha256[..12]);
    let file_name =
        opts.source.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let suite_toml =
        suite_toml(opts.format, &name, &version, &file_name, &source_sha256, problems.len());
    write_suite(&opts.out, opts.force, &suite_toml, &problems)?;
    Ok(Imported { tasks: problems.len(), source_sha256, name, version })
}

fn read_source(path: &Path) -> Result<Vec<u8>, InputError> {
    std::fs::read(path)
        .map_err(|e| InputError::new(path, format!("cannot read the source file: {e}")))
}

fn source_stem(path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    let name = name.strip_suffix(".jsonl").or_else(|| name.strip_suffix(".json")).unwrap_or(name);
    name.to_string()
}

/// The text of the source: gzip (by its magic bytes, whatever the file's
/// name) is decompressed.
pub(crate) fn decompress(path: &Path, bytes: &[u8]) -> Result<Vec<u8>, InputError> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes)
            .take(MAX_SOURCE_BYTES + 1)
            .read_to_end(&mut out)
            .map_err(|e| InputError::new(path, format!("not a valid gzip file: {e}")))?;
        if out.len() as u64 > MAX_SOURCE_BYTES {
            return Err(InputError::new(
                path,
                format!("decompresses to more than {MAX_SOURCE_BYTES} bytes"),
            ));
        }
        Ok(out)
    } else {
        Ok(bytes.to_vec())
    }
}

/// Every problem of the source, validated, in file order. Blank lines are
/// skipped; line numbers count from 1 as in an editor.
fn parse(format: Format, path: &Path, text: &[u8]) -> Result<Vec<Problem>, InputError> {
    let mut problems: Vec<Problem> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let Ok(s) = std::str::from_utf8(raw) else {
            return Err(InputError::new(path, format!("line {line}: not valid UTF-8")));
        };
        if s.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(s)
            .map_err(|e| InputError::new(path, format!("line {line}: not a JSON object: {e}")))?;
        let Value::Object(obj) = value else {
            return Err(InputError::new(path, format!("line {line}: not a JSON object")));
        };
        let fields = Fields { path, line, obj: &obj };
        let p = match format {
            Format::HumanEval => humaneval_problem(&fields)?,
            Format::Jsonl => jsonl_problem(&fields)?,
        };
        let id_key = if format == Format::HumanEval { "task_id" } else { "id" };
        if let Some(first) = seen.insert(p.id.clone(), line) {
            return Err(fields.err(
                id_key,
                format!("`{}` gives the task id `{}`, as line {first} does", p.source_id, p.id),
            ));
        }
        problems.push(p);
    }
    if problems.is_empty() {
        return Err(InputError::new(path, "holds no problems (no non-blank line)"));
    }
    Ok(problems)
}

/// The fields of one line, with errors naming the file, line and field.
struct Fields<'a> {
    path: &'a Path,
    line: usize,
    obj: &'a Map<String, Value>,
}

impl Fields<'_> {
    fn err(&self, field: &str, message: impl Into<String>) -> InputError {
        InputError::new(
            self.path,
            format!("line {}, field `{field}`: {}", self.line, message.into()),
        )
    }

    fn only(&self, allowed: &[&str]) -> Result<(), InputError> {
        for k in self.obj.keys() {
            if !allowed.contains(&k.as_str()) {
                return Err(
                    self.err(k, format!("unknown field; expected one of: {}", allowed.join(", ")))
                );
            }
        }
        Ok(())
    }

    fn opt_str(&self, field: &str) -> Result<Option<&str>, InputError> {
        match self.obj.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Err(self.err(field, "is empty")),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(other) => {
                Err(self.err(field, format!("expected a string, found {}", kind(other))))
            }
        }
    }

    fn str(&self, field: &str) -> Result<&str, InputError> {
        self.opt_str(field)?.ok_or_else(|| self.err(field, "missing"))
    }

    fn identifier(&self, field: &str, s: &str) -> Result<(), InputError> {
        if is_identifier(s) {
            Ok(())
        } else {
            Err(self.err(field, format!("`{s}` is not a Python identifier")))
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

const PY_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// An ASCII Python identifier that is not a keyword.
pub(crate) fn is_identifier(s: &str) -> bool {
    super::is_ascii_name(s) && !PY_KEYWORDS.contains(&s)
}

/// A task id from a source id: lowercase, runs of other characters as one
/// `-`, and a trailing number padded to 3 digits so that folders sort in the
/// source's order (`HumanEval/7` -> `humaneval-007`).
pub fn slugify(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches('-').to_string();
    match out.rsplit_once('-') {
        Some((head, tail))
            if !tail.is_empty() && tail.len() < 3 && tail.chars().all(|c| c.is_ascii_digit()) =>
        {
            format!("{head}-{tail:0>3}")
        }
        _ => out,
    }
}

/// The body indentation of a function's continuation (the first indented
/// line of `code`), four spaces when there is none.
fn body_indent(code: &str) -> String {
    code.lines()
        .find(|l| !l.trim().is_empty())
        .map(|l| l[..l.len() - l.trim_start().len()].to_string())
        .filter(|i| !i.is_empty())
        .unwrap_or_else(|| "    ".to_string())
}

fn with_newline(s: &str) -> String {
    if s.ends_with('\n') { s.to_string() } else { format!("{s}\n") }
}

/// The last non-blank line closes a docstring.
fn ends_with_docstring(code: &str) -> bool {
    code.lines().rev().find(|l| !l.trim().is_empty()).is_some_and(|l| {
        let l = l.trim_end();
        l.ends_with("\"\"\"") || l.ends_with("'''")
    })
}

fn defines(code: &str, name: &str) -> bool {
    code.lines().any(|l| {
        l.trim_start().strip_prefix("def ").is_some_and(|r| {
            r.trim_start().strip_prefix(name).is_some_and(|r| r.trim_start().starts_with('('))
        })
    })
}

/// One HumanEval line. The test module holds the problem's `test` code
/// verbatim after a star import of the candidate's module (as HumanEval's own
/// harness runs prompt, completion and test in one namespace, so tests may
/// use the prompt's helpers and imports), and one unittest case calling
/// `check(<entry_point>)`.
fn humaneval_problem(f: &Fields) -> Result<Problem, InputError> {
    f.only(&["task_id", "prompt", "entry_point", "canonical_solution", "test"])?;
    let source_id = f.str("task_id")?;
    let prompt = f.str("prompt")?;
    let entry = f.str("entry_point")?;
    let canonical = f.str("canonical_solution")?;
    let test = f.str("test")?;
    f.identifier("entry_point", entry)?;
    let id = slugify(source_id);
    if !is_slug(&id) || id.is_empty() {
        return Err(f.err("task_id", format!("`{source_id}` gives no usable task id")));
    }
    if !defines(prompt, entry) {
        return Err(f.err("prompt", format!("does not define the entry point `def {entry}(`")));
    }
    if !defines(test, "check") {
        return Err(f.err("test", "does not define `def check(`"));
    }
    let prompt = with_newline(prompt);
    // An entry point named like a module the grader imports gets another file name.
    let module = if super::grader_module_named_by(entry).is_some() {
        format!("{entry}_solution")
    } else {
        entry.to_string()
    };
    let file = format!("{module}.py");
    // The workspace holds the prompt as the dataset gives it: a function whose
    // body is its docstring returns None, and fails (`suite check` proves it).
    // A prompt that does not end in a docstring gets a body that raises.
    let stub = if ends_with_docstring(&prompt) {
        prompt.clone()
    } else {
        format!("{prompt}{}raise NotImplementedError\n", body_indent(canonical))
    };
    let solution = with_newline(&format!("{prompt}{canonical}"));
    let mut test_code = String::new();
    let _ = write!(
        test_code,
        "# {source_id}: the problem's `test` code, run as one unittest case.\nimport unittest\n\nfrom {module} import *  # noqa: F401,F403 (names of the prompt, as in HumanEval's own harness)\nfrom {module} import {entry}\n\n{test}\n\n\nclass TestCheck(unittest.TestCase):\n    def test_check(self):\n        check({entry})\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n",
        test = test.trim_end()
    );
    let task_prompt = format!(
        "Complete the function `{entry}` in `{file}`: write its body so that it does what its docstring says. Keep its name and signature."
    );
    Ok(Problem {
        id,
        source_id: source_id.to_string(),
        line: f.line,
        difficulty: Difficulty::Medium,
        prompt: task_prompt,
        file,
        stub,
        solution,
        test_file: format!("tests/test_{entry}.py"),
        test_code,
        tests: 1,
        timeout_seconds: DEFAULT_TIMEOUT_SECONDS,
        // HumanEval's checks call the entry point with plain data only.
        mode: GradingMode::OutOfProcess,
    })
}

/// The fields of ablate's JSONL schema (docs/suites.md).
const JSONL_FIELDS: &[&str] = &[
    "id",
    "prompt",
    "solution",
    "entry_point",
    "file",
    "stub",
    "tests",
    "test_count",
    "asserts",
    "test_setup",
    "difficulty",
    "timeout_seconds",
    "mode",
];

fn jsonl_problem(f: &Fields) -> Result<Problem, InputError> {
    f.only(JSONL_FIELDS)?;
    let source_id = match f.obj.get("id") {
        Some(Value::Number(n)) if n.is_u64() => n.to_string(),
        _ => f.str("id")?.to_string(),
    };
    let id = slugify(&source_id);
    if id.is_empty() {
        return Err(f.err("id", format!("`{source_id}` gives no usable task id")));
    }
    let prompt = f.str("prompt")?;
    let solution = f.str("solution")?;
    let entry = f.opt_str("entry_point")?;
    if let Some(e) = entry {
        f.identifier("entry_point", e)?;
        if !defines(solution, e) {
            return Err(f.err("solution", format!("does not define the entry point `def {e}(`")));
        }
    }
    let file = jsonl_file(f, entry)?;
    let module = file.strip_suffix(".py").expect("checked").to_string();
    let stub = match (f.opt_str("stub")?, entry) {
        (Some(s), _) => with_newline(s),
        (None, Some(e)) => format!("def {e}(*args, **kwargs):\n    raise NotImplementedError\n"),
        (None, None) => return Err(f.err("stub", "missing: give `stub` or `entry_point`")),
    };
    let difficulty = jsonl_difficulty(f)?;
    let timeout_seconds = jsonl_timeout(f)?;
    let mode = jsonl_mode(f)?;
    let count = jsonl_test_count(f)?;
    let setup = f.opt_str("test_setup")?;
    let asserts = jsonl_asserts(f)?;
    let (test_code, tests) = jsonl_tests(f, &module, count, setup, asserts)?;
    Ok(Problem {
        id,
        source_id,
        line: f.line,
        difficulty,
        prompt: prompt.to_string(),
        file,
        stub,
        solution: with_newline(solution),
        test_file: format!("tests/test_{module}.py"),
        test_code,
        tests,
        timeout_seconds,
        mode,
    })
}

/// The solution's file: `file` (a plain `<identifier>.py`, not a module the grader
/// imports), else named after the entry point.
fn jsonl_file(f: &Fields, entry: Option<&str>) -> Result<String, InputError> {
    Ok(match (f.opt_str("file")?, entry) {
        (Some(file), _) => {
            let module = file.strip_suffix(".py").filter(|m| is_identifier(m));
            if module.is_none() || !is_plain_relative(file) {
                return Err(f.err(
                    "file",
                    format!("`{file}` must be a file name `<python identifier>.py` (no folder)"),
                ));
            }
            if let Some(m) = super::grader_module_named_by(file) {
                return Err(f.err("file", format!("`{file}` would stand for the standard module `{m}` the grader imports; name it otherwise")));
            }
            file.to_string()
        }
        (None, Some(e)) if super::grader_module_named_by(e).is_some() => format!("{e}_solution.py"),
        (None, Some(e)) => format!("{e}.py"),
        (None, None) => return Err(f.err("file", "missing: give `file` or `entry_point`")),
    })
}

/// `difficulty`: easy, medium (the default) or hard.
fn jsonl_difficulty(f: &Fields) -> Result<Difficulty, InputError> {
    Ok(match f.opt_str("difficulty")? {
        None => Difficulty::Medium,
        Some("easy") => Difficulty::Easy,
        Some("medium") => Difficulty::Medium,
        Some("hard") => Difficulty::Hard,
        Some(other) => {
            return Err(f.err("difficulty", format!("`{other}`: expected easy, medium or hard")));
        }
    })
}

/// `timeout_seconds`: in (0, 3600], the default when not given.
fn jsonl_timeout(f: &Fields) -> Result<f64, InputError> {
    Ok(match f.obj.get("timeout_seconds") {
        None | Some(Value::Null) => DEFAULT_TIMEOUT_SECONDS,
        Some(Value::Number(n)) => match n.as_f64() {
            Some(t) if t > 0.0 && t <= 3600.0 => t,
            _ => return Err(f.err("timeout_seconds", "must be in (0, 3600]")),
        },
        Some(other) => {
            return Err(
                f.err("timeout_seconds", format!("expected a number, found {}", kind(other)))
            );
        }
    })
}

/// `mode`: in_process (the default) or out_of_process.
fn jsonl_mode(f: &Fields) -> Result<GradingMode, InputError> {
    Ok(match f.opt_str("mode")? {
        None | Some("in_process") => GradingMode::InProcess,
        Some("out_of_process") => GradingMode::OutOfProcess,
        Some(other) => {
            return Err(f.err("mode", format!("`{other}`: expected in_process or out_of_process")));
        }
    })
}

/// `test_count`, when given: an integer in 1..=10000.
fn jsonl_test_count(f: &Fields) -> Result<Option<u32>, InputError> {
    Ok(match f.obj.get("test_count") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(c) if (1..=10_000).contains(&c) => Some(c as u32),
            _ => return Err(f.err("test_count", "must be an integer in 1..=10000")),
        },
        Some(other) => {
            return Err(f.err("test_count", format!("expected an integer, found {}", kind(other))));
        }
    })
}

/// `asserts`, when given: a non-empty array of one-line `assert ...` statements, trimmed.
fn jsonl_asserts(f: &Fields) -> Result<Option<Vec<String>>, InputError> {
    Ok(match f.obj.get("asserts") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let mut lines = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let key = format!("asserts[{i}]");
                let Value::String(s) = item else {
                    return Err(f.err(&key, format!("expected a string, found {}", kind(item))));
                };
                let s = s.trim();
                if !s.starts_with("assert ") && !s.starts_with("assert(") {
                    return Err(f.err(&key, "must be one `assert ...` statement"));
                }
                if s.contains('\n') {
                    return Err(f.err(&key, "must be one line"));
                }
                lines.push(s.to_string());
            }
            if lines.is_empty() {
                return Err(f.err("asserts", "is empty"));
            }
            Some(lines)
        }
        Some(other) => {
            return Err(
                f.err("asserts", format!("expected an array of strings, found {}", kind(other)))
            );
        }
    })
}

/// The test module and its number of test cases: `tests` as given (with `test_count`),
/// or one unittest case per line of `asserts` (after `test_setup`).
fn jsonl_tests(
    f: &Fields,
    module: &str,
    count: Option<u32>,
    setup: Option<&str>,
    asserts: Option<Vec<String>>,
) -> Result<(String, u32), InputError> {
    Ok(match (f.opt_str("tests")?, asserts) {
        (Some(_), Some(_)) => {
            return Err(
                f.err("asserts", "give either `tests` (unittest code) or `asserts`, not both")
            );
        }
        (None, None) => {
            return Err(f.err(
                "tests",
                "missing: give `tests` (unittest code, with `test_count`) or `asserts`",
            ));
        }
        (Some(code), None) => {
            let Some(n) = count else {
                return Err(f.err(
                    "test_count",
                    "missing: `tests` needs the number of test cases it holds",
                ));
            };
            if setup.is_some() {
                return Err(f.err("test_setup", "goes with `asserts` only; put it in `tests`"));
            }
            (with_newline(code), n)
        }
        (None, Some(lines)) => {
            if let Some(n) = count
                && n as usize != lines.len()
            {
                return Err(f.err(
                    "test_count",
                    format!("is {n} but `asserts` holds {} lines", lines.len()),
                ));
            }
            (asserts_module(module, setup, &lines), lines.len() as u32)
        }
    })
}

/// A unittest module of one test case per assert line, after a star import of the
/// solution's module and the setup code.
fn asserts_module(module: &str, setup: Option<&str>, lines: &[String]) -> String {
    let width = lines.len().to_string().len();
    let mut code = format!("import unittest\n\nfrom {module} import *  # noqa: F401,F403\n");
    if let Some(s) = setup {
        let _ = write!(code, "\n{}\n", s.trim_end());
    }
    code.push_str("\n\nclass TestAsserts(unittest.TestCase):\n");
    for (i, l) in lines.iter().enumerate() {
        let _ = write!(code, "    def test_{:0width$}(self):\n        {l}\n\n", i + 1);
    }
    code.push_str("\nif __name__ == \"__main__\":\n    unittest.main()\n");
    code
}

/// A TOML basic string (JSON escaping is valid TOML).
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

fn suite_toml(
    format: Format,
    name: &str,
    version: &str,
    file_name: &str,
    sha: &str,
    n: usize,
) -> String {
    let description = format!(
        "{n} problems imported by `ablate suite import {}` (importer version {IMPORTER_VERSION}) from {file_name}, sha256 {sha}.",
        format.name()
    );
    // HumanEval's checks call the entry point with plain data: every task grades out of process.
    let required = match format {
        Format::HumanEval => "require_mode = \"out_of_process\"\n",
        Format::Jsonl => "",
    };
    format!(
        "# Written by `ablate suite import {fmt}`; re-import instead of editing.\nname = {}\nversion = {}\ndescription = {}\n{required}\n[source]\nfile = {}\nsha256 = {}\nimporter = {}\nimporter_version = {IMPORTER_VERSION}\n",
        toml_str(name),
        toml_str(version),
        toml_str(&description),
        toml_str(file_name),
        toml_str(sha),
        toml_str(format.name()),
        fmt = format.name(),
    )
}

fn task_toml(p: &Problem) -> String {
    let difficulty = match p.difficulty {
        Difficulty::Easy => "easy",
        Difficulty::Medium => "medium",
        Difficulty::Hard => "hard",
    };
    format!(
        "# {source} (line {line} of the source)\nid = {id}\ndifficulty = \"{difficulty}\"\ntests = {tests}\nprompt = {prompt}\neditable = [{file}]\n\n[check]\ncommand = [\"python3\", \"-m\", \"unittest\", \"discover\", \"-v\", \"-s\", \"tests\", \"-t\", \".\"]\ntimeout_seconds = {timeout:?}\nparser = \"unittest\"\nmode = \"{mode}\"\n",
        source = p.source_id.replace('\n', " "),
        line = p.line,
        id = toml_str(&p.id),
        tests = p.tests,
        prompt = toml_str(&p.prompt),
        file = toml_str(&p.file),
        timeout = p.timeout_seconds,
        mode = p.mode.name(),
    )
}

fn io_err(path: &Path, what: &str, e: std::io::Error) -> InputError {
    InputError::new(path, format!("{what}: {e}"))
}

/// Write the suite into a temporary folder beside `out`, check that it loads,
/// then move it into place (replacing an existing suite folder only with
/// `force`).
fn write_suite(
    out: &Path,
    force: bool,
    suite_toml: &str,
    problems: &[Problem],
) -> Result<(), InputError> {
    let existing = match std::fs::symlink_metadata(out) {
        Ok(m) if m.is_dir() => {
            let empty = std::fs::read_dir(out)
                .map_err(|e| io_err(out, "cannot list the output folder", e))?
                .next()
                .is_none();
            if !empty && !force {
                return Err(InputError::new(
                    out,
                    "the output folder exists and is not empty (--force replaces a suite folder)",
                ));
            }
            if !empty && !out.join("suite.toml").is_file() {
                return Err(InputError::new(
                    out,
                    "refusing to replace a folder that is not a suite (it has no suite.toml)",
                ));
            }
            true
        }
        Ok(_) => return Err(InputError::new(out, "exists and is not a folder")),
        Err(_) => false,
    };
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .map_err(|e| io_err(&parent, "cannot create the output's parent folder", e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".ablate-import-")
        .tempdir_in(&parent)
        .map_err(|e| io_err(&parent, "cannot create a temporary folder", e))?;
    let root = tmp.path();
    let write = |rel: &Path, text: &str| -> Result<(), InputError> {
        let path = root.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io_err(dir, "cannot create folder", e))?;
        }
        std::fs::write(&path, text).map_err(|e| io_err(&path, "cannot write", e))
    };
    write(Path::new("suite.toml"), suite_toml)?;
    for p in problems {
        let dir = Path::new(&p.id);
        write(&dir.join("task.toml"), &task_toml(p))?;
        write(&dir.join("workspace").join(&p.file), &p.stub)?;
        write(&dir.join("solution").join(&p.file), &p.solution)?;
        write(&dir.join("tests/__init__.py"), "")?;
        write(&dir.join(&p.test_file), &p.test_code)?;
    }
    // What was written must load as a suite; a failure here is a bug of the importer.
    super::load(root)
        .map_err(|e| InputError::new(out, format!("the imported suite does not load: {e}")))?;
    move_into_place(tmp.keep(), out, &parent, existing, "suite")
}

/// Move `root`, a folder written beside `out` (in `parent`), into place as
/// `out`. An existing `out` is moved aside first, put back when the move
/// fails, and removed once the new folder is in place; `root` never stays
/// behind. `what` names the folder in errors.
pub fn move_into_place(
    root: PathBuf,
    out: &Path,
    parent: &Path,
    existing: bool,
    what: &str,
) -> Result<(), InputError> {
    let aside = if existing {
        let aside = parent.join(format!(".ablate-replaced-{}", std::process::id()));
        std::fs::rename(out, &aside).map_err(|e| {
            let _ = std::fs::remove_dir_all(&root);
            io_err(out, "cannot move the old folder aside", e)
        })?;
        Some(aside)
    } else {
        None
    };
    if let Err(e) = std::fs::rename(&root, out) {
        if let Some(aside) = &aside {
            let _ = std::fs::rename(aside, out);
        }
        let _ = std::fs::remove_dir_all(&root);
        return Err(io_err(out, &format!("cannot move the imported {what} into place"), e));
    }
    if let Some(aside) = aside {
        std::fs::remove_dir_all(&aside)
            .map_err(|e| io_err(&aside, "imported, but cannot remove the replaced folder", e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_pad_the_trailing_number() {
        assert_eq!(slugify("HumanEval/0"), "humaneval-000");
        assert_eq!(slugify("HumanEval/163"), "humaneval-163");
        assert_eq!(slugify("Mbpp/1234"), "mbpp-1234");
        assert_eq!(slugify("  Add two numbers! "), "add-two-numbers");
        assert_eq!(slugify("12"), "12");
        assert_eq!(slugify("///"), "");
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("has_close_elements"));
        assert!(is_identifier("_f1"));
        assert!(!is_identifier("1f"));
        assert!(!is_identifier("lambda"));
        assert!(!is_identifier("f-g"));
        assert!(!is_identifier(""));
    }

    #[test]
    fn stub_indent_follows_the_solution() {
        assert_eq!(body_indent("\n\n  return 1\n"), "  ");
        assert_eq!(body_indent("    x = 1\n    return x\n"), "    ");
        assert_eq!(body_indent("return 1\n"), "    ");
    }

    #[test]
    fn docstring_endings() {
        assert!(ends_with_docstring("def f():\n    \"\"\" Doc.\n    \"\"\"\n\n"));
        assert!(ends_with_docstring("def f():\n    '''Doc.'''\n"));
        assert!(!ends_with_docstring("def f():\n"));
        assert!(!ends_with_docstring("def f():\n    x = \"\"\n"));
    }

    #[test]
    fn defines_finds_a_def_line() {
        assert!(defines("import x\n\ndef add(a, b):\n    pass\n", "add"));
        assert!(defines("class A:\n    def add (self):\n        pass\n", "add"));
        assert!(!defines("def adder(a):\n    pass\n", "add"));
        assert!(!defines("# def add(a)\n", "add"));
    }
}
