//! The map file of an import (`--map MAP.toml`): what the source does not
//! say and the user wants to name: the experiment's name, component and arm
//! names, the comparisons, and the pass rule. Every key is optional; an
//! unknown key is refused, naming the file and the key (docs/import.md).

use ablate_core::error::InputError;
use indexmap::IndexMap;
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMap {
    /// The experiment's name (default: the job or task name of the sources).
    pub name: Option<String>,
    /// Significance level of the report (default 0.05).
    pub alpha: Option<f64>,
    /// Equivalence margin (as `[experiment] margin`).
    pub margin: Option<f64>,
    /// The seed of the analysis's random orders (the equivalence test's; default 0).
    pub seed: Option<u64>,
    /// Field of the source's agent identity -> component name
    /// (`"kwargs.temperature" = "temperature"`).
    #[serde(default)]
    pub components: IndexMap<String, String>,
    /// Derived arm name -> the name to use.
    #[serde(default)]
    pub arms: IndexMap<String, String>,
    /// The comparisons to report (default: every pair of arms, up to 15
    /// pairs; beyond that the pairs that differ in one component).
    #[serde(default)]
    pub comparisons: Vec<RawComparison>,
    #[serde(default)]
    pub pass: RawPass,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawComparison {
    pub control: String,
    pub treatment: String,
    pub name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPass {
    /// A reward (Harbor) or numeric score (Inspect) at least this passes (default 1.0).
    pub threshold: Option<f64>,
    /// Inspect: the scorer whose score decides (needed when a log has several).
    pub scorer: Option<String>,
    /// Harbor: the reward (a key of reward.json) that decides, when there are several and none is named `reward`.
    pub reward: Option<String>,
}

/// A map file as read, with where it came from.
#[derive(Debug, Clone, Default)]
pub struct ImportMap {
    pub path: Option<PathBuf>,
    pub sha256: Option<String>,
    pub raw: RawMap,
}

impl ImportMap {
    /// Read and check `path`; no map gives the defaults.
    pub fn load(path: Option<&Path>) -> Result<ImportMap, InputError> {
        let Some(path) = path else { return Ok(ImportMap::default()) };
        let bytes = super::read_bounded(path, 1 << 20)
            .map_err(|e| InputError::new(path, format!("cannot read the map file: {e}")))?;
        let text = String::from_utf8(bytes.clone())
            .map_err(|_| InputError::new(path, "the map file is not UTF-8"))?;
        let raw: RawMap = ablate_core::error::parse_toml_str(path, &text)?;
        if let Some(a) = raw.alpha
            && !(a > 0.0 && a < 1.0)
        {
            return Err(InputError::at(path, "alpha", format!("{a} is not in (0, 1)")));
        }
        if let Some(m) = raw.margin
            && !(m > 0.0 && m < 1.0)
        {
            return Err(InputError::at(path, "margin", format!("{m} is not in (0, 1)")));
        }
        if let Some(t) = raw.pass.threshold
            && !t.is_finite()
        {
            return Err(InputError::at(path, "pass.threshold", "not a finite number"));
        }
        for (field, name) in &raw.components {
            if name.trim().is_empty() {
                return Err(InputError::at(
                    path,
                    format!("components.\"{field}\""),
                    "an empty component name",
                ));
            }
        }
        for (from, to) in &raw.arms {
            if !ablate_core::experiment::matrix::is_arm_name(to) {
                return Err(InputError::at(
                    path,
                    format!("arms.\"{from}\""),
                    format!("`{to}` is not an arm name (lowercase letters, digits, `-` and `_`)"),
                ));
            }
        }
        Ok(ImportMap {
            path: Some(path.to_path_buf()),
            sha256: Some(ablate_core::digest::sha256_hex(&bytes)),
            raw,
        })
    }

    /// The file errors about the map name (`--map` when there is none).
    pub fn file(&self) -> PathBuf {
        self.path.clone().unwrap_or_else(|| PathBuf::from("--map"))
    }

    pub fn threshold(&self) -> f64 {
        self.raw.pass.threshold.unwrap_or(1.0)
    }
}
