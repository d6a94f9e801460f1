//! Errors of bad input (config, task files): they name the file and the key path.

use std::fmt;
use std::path::{Path, PathBuf};

/// A problem with a file the user wrote: a config, a task or a suite file.
/// The CLI maps it to exit code 2 (usage error).
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    pub file: PathBuf,
    /// Dotted key path inside the file (`arms.full.feedback`), when known.
    pub key: Option<String>,
    pub message: String,
}

impl InputError {
    pub fn new(file: impl AsRef<Path>, message: impl Into<String>) -> Self {
        InputError { file: file.as_ref().to_path_buf(), key: None, message: message.into() }
    }

    pub fn at(file: impl AsRef<Path>, key: impl Into<String>, message: impl Into<String>) -> Self {
        InputError {
            file: file.as_ref().to_path_buf(),
            key: Some(key.into()),
            message: message.into(),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) if !key.is_empty() => {
                write!(f, "{}: key `{}`: {}", self.file.display(), key, self.message)
            }
            _ => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for InputError {}

/// Parse a TOML file into `T`, reporting syntax errors with line and column and
/// type errors with the dotted key path, both naming the file.
pub(crate) fn parse_toml_file<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<T, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError::new(path, format!("cannot read file: {e}")))?;
    parse_toml_str(path, &text)
}

pub fn parse_toml_str<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
) -> Result<T, InputError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        let message = e.message().to_string();
        match e.span() {
            Some(span) => {
                let (line, col) = line_col(text, span.start);
                let err = InputError::new(
                    path,
                    format!("invalid TOML at line {line}, column {col}: {message}"),
                );
                match duplicate_key(text, &message, span) {
                    Some(key) => InputError { key: Some(key), ..err },
                    None => err,
                }
            }
            None => InputError::new(path, format!("invalid TOML: {message}")),
        }
    })?;
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let key = key_at("", e.path());
        InputError { file: path.to_path_buf(), key: Some(key), message: e.into_inner().to_string() }
    })
}

/// The key a serde_path_to_error `path` names below `prefix`: `prefix.a.b`, `prefix[2]` for
/// an index, `prefix` itself (empty when `prefix` is) for the root.
pub fn key_at(prefix: &str, path: &serde_path_to_error::Path) -> String {
    let inner = path.to_string();
    match (prefix, inner.as_str()) {
        (prefix, "." | "") => prefix.to_string(),
        ("", inner) => inner.to_string(),
        (prefix, inner) if inner.starts_with('[') => format!("{prefix}{inner}"),
        (prefix, inner) => format!("{prefix}.{inner}"),
    }
}

/// The dotted key a "duplicate key" error is about: the key at the error's
/// span under the nearest table header above it (`[experiment]` + `name` ->
/// `experiment.name`).
fn duplicate_key(text: &str, message: &str, span: std::ops::Range<usize>) -> Option<String> {
    if !message.contains("duplicate key") {
        return None;
    }
    let raw = text.get(span.clone())?.trim();
    let key = raw
        .split('=')
        .next()?
        .trim()
        .trim_matches(|c| c == '"' || c == '\'' || c == '[' || c == ']')
        .trim();
    if key.is_empty() {
        return None;
    }
    if raw.starts_with('[') {
        return Some(key.to_string());
    }
    let header =
        text[..span.start].lines().rev().map(str::trim).find(|l| l.starts_with('[')).map(|l| {
            l.trim_start_matches('[')
                .trim_end_matches(']')
                .trim_start_matches('[')
                .trim_end_matches(']')
                .trim()
                .to_string()
        });
    Some(match header {
        Some(h) if !h.is_empty() => format!("{h}.{key}"),
        _ => key.to_string(),
    })
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, col)
}

/// The exit status of every command, in one place (docs/getting-started.md lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Success (and `gate` PASS).
    Ok = 0,
    /// The command ran and found a failure: `suite check` found a broken task,
    /// a run could not complete, `gate` FAIL.
    Failure = 1,
    /// Bad input: a config, task or flag error, or a baseline that does not
    /// match the candidate. Nothing was run.
    Usage = 2,
    /// `gate` INCONCLUSIVE: neither a regression nor non-inferiority is shown.
    Inconclusive = 3,
    /// `run` stopped by Ctrl-C (128 + SIGINT); what was recorded stays.
    Interrupted = 130,
}

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        inner: Inner,
    }
    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        count: u32,
    }

    #[test]
    fn type_error_names_file_and_key_path() {
        let err = parse_toml_str::<Outer>(Path::new("x.toml"), "[inner]\ncount = \"three\"\n")
            .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("inner.count"));
        assert!(err.to_string().starts_with("x.toml: key `inner.count`:"), "{err}");
    }

    #[test]
    fn key_at_joins_a_path_below_its_prefix() {
        let path_of = |json: &str| {
            let mut de = serde_json::Deserializer::from_str(json);
            serde_path_to_error::deserialize::<_, Vec<Outer>>(&mut de).unwrap_err().path().clone()
        };
        let deep = path_of(r#"[{"inner": {"count": "x"}}]"#);
        assert_eq!(key_at("", &deep), "[0].inner.count");
        assert_eq!(key_at("runs", &deep), "runs[0].inner.count");
        let root = path_of("3");
        assert_eq!(key_at("", &root), "");
        assert_eq!(key_at("runs", &root), "runs");
    }

    #[test]
    fn syntax_error_gives_line() {
        let err =
            parse_toml_str::<Outer>(Path::new("x.toml"), "[inner]\ncount = = 3\n").unwrap_err();
        assert!(err.message.contains("line 2"), "{err}");
    }

    #[test]
    fn unknown_key_is_an_error() {
        let err = parse_toml_str::<Outer>(Path::new("x.toml"), "[inner]\ncount = 3\ncuont = 4\n")
            .unwrap_err();
        assert!(err.message.contains("cuont"), "{err}");
        assert_eq!(err.key.as_deref(), Some("inner.cuont"));
    }
}
