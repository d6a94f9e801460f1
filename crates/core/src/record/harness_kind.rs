//! Which harness runs the trials: the builtin agent loop, or an external
//! command (any agent) that declares its own components.

use super::design::ComponentValue;
use serde::{Deserialize, Serialize};

/// The harness under test. Builtin arms set `Components`; external arms set
/// the components the external harness declares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HarnessKind {
    /// ablate's own agent loop (`harness::agent`).
    #[default]
    Builtin,
    /// A command run in the trial's workspace.
    External(ExternalHarness),
    /// Another tool ran the trials (`ablate import`): nothing here can run
    /// them again. Its components are the fields of the agent's identity
    /// that differ between arms.
    Imported(ImportedHarness),
}

impl HarnessKind {
    pub fn is_builtin(&self) -> bool {
        matches!(self, HarnessKind::Builtin)
    }

    pub fn external(&self) -> Option<&ExternalHarness> {
        match self {
            HarnessKind::Builtin | HarnessKind::Imported(_) => None,
            HarnessKind::External(e) => Some(e),
        }
    }
}

/// The harness of an imported run: the tool that ran it, and the components
/// derived from its records (docs/import.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportedHarness {
    /// `harbor` or `inspect`.
    pub tool: String,
    /// The component names, in the order of the source's fields.
    pub components: Vec<String>,
}

/// An external harness as resolved from `[harness]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExternalHarness {
    /// argv, run in the trial's workspace; never empty.
    pub command: Vec<String>,
    /// Files and folders that make up the harness, as written (relative to
    /// the config's folder).
    pub files: Vec<String>,
    /// sha256 over `files`: each path as written and the sha256 of the file
    /// or the tree digest of the folder.
    pub files_digest: String,
    /// The components the harness exposes, in the declared order.
    pub components: Vec<DeclaredComponent>,
    /// Where the command runs on a container task (a Python task's harness
    /// always runs in the jail with the workspace).
    #[serde(default)]
    pub runs_in: RunsIn,
    /// The interpreter `python3` / `python` / `{python}` in the command name
    /// (absolute; its installation is shown read-only in the sandbox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// Folders the sandbox shows read-only at their own paths (absolute).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<String>,
    /// The jail's memory in MiB (`[harness] memory_mb`; None: 4096).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// What the gateway does with a hosted tool the harness offers (`[gateway] hosted_tools`).
    #[serde(default, skip_serializing_if = "HostedTools::is_omit")]
    pub hosted_tools: HostedTools,
}

/// What the gateway does with a tool a provider runs on its own servers
/// (`web_search`, `file_search`, ...), which no model it forwards to runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostedTools {
    /// Left out of what reaches the model; the delivery record shows it asked and not reached.
    #[default]
    Omit,
    /// The call is refused (400 naming the tool); a trial that never reached the model is
    /// `harness_error`.
    Refuse,
}

impl HostedTools {
    pub fn is_omit(&self) -> bool {
        *self == HostedTools::Omit
    }
}

/// Where an external harness runs on a container task (`[harness] runs_in`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunsIn {
    /// In the trial's container, as Harbor's installed agents run: its files at
    /// /harness, the gateway on the container's loopback.
    #[default]
    Container,
    /// On the host in the sandbox, reaching the container only through the
    /// gateway's exec endpoint.
    Host,
}

impl RunsIn {
    pub fn name(self) -> &'static str {
        match self {
            RunsIn::Container => "container",
            RunsIn::Host => "host",
        }
    }
}

impl ExternalHarness {
    pub fn component(&self, name: &str) -> Option<&DeclaredComponent> {
        self.components.iter().find(|c| c.name == name)
    }

    /// `a, b, c`: the declared names, for messages.
    pub fn names(&self) -> String {
        self.components.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
    }
}

/// One component an external harness declares, with the values an arm may give it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeclaredComponent {
    pub name: String,
    /// At least two distinct values of one type (boolean, string or
    /// integer); the first is the value of an arm that does not set it.
    pub values: Vec<ComponentValue>,
}

impl DeclaredComponent {
    /// The value an arm that does not set this component takes.
    pub fn default_value(&self) -> &ComponentValue {
        &self.values[0]
    }

    /// `true, false` / `"map", "full"`: the allowed values, for messages.
    pub fn allowed(&self) -> String {
        self.values.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
    }

    /// `[true, false]` / `["map", "full"]` for display.
    pub(crate) fn display_values(&self) -> String {
        format!("[{}]", self.allowed())
    }
}
