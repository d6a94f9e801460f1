//! What an imported run's records say of their source (`ablate import`,
//! docs/import.md): the manifest's `imported` and each trial's `imported`.

use super::design::ComponentValue;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// The tool a run came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    Harbor,
    Inspect,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Harbor => "harbor",
            Tool::Inspect => "inspect",
        }
    }
}

/// One input as given on the command line, and the digest of what was read of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceFacts {
    /// As given.
    pub path: String,
    /// `file`: sha256 of the file; `folder`: the sha256 over the files read
    /// (each path relative to the folder, NUL, its sha256, newline, sorted).
    pub kind: String,
    pub sha256: String,
    /// Files read from it.
    pub files: usize,
}

/// What the manifest of an imported run records about its sources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportFacts {
    pub tool: Tool,
    pub importer_version: u32,
    /// The version of the tool that wrote the sources, when they say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_versions: Vec<String>,
    pub sources: Vec<SourceFacts>,
    /// The map file and its sha256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<(String, String)>,
    /// How a trial's outcome became passed or failed.
    pub pass_rule: String,
    /// The identity fields every trial shares (not components).
    pub shared: IndexMap<String, ComponentValue>,
    /// Component name -> the source's field it was derived from.
    pub components: IndexMap<String, String>,
    /// Component name -> the other fields the map named as that component,
    /// which change together with its field in every trial.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub aliased: IndexMap<String, Vec<String>>,
    /// Components with names of their own whose fields always change
    /// together (perfectly aliased): a comparison of them is combined.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moving_together: Vec<Vec<String>>,
}

/// Where a record came from, kept in its trial record (`imported`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportedFrom {
    /// The file the trial was read from, relative to its input as given.
    pub file: String,
    /// The source's own name of the trial (Harbor's trial name; Inspect's `id` and `epoch`).
    pub id: String,
    /// What the source said that decided the status: exception type, reward, score, limit.
    pub detail: serde_json::Value,
}
