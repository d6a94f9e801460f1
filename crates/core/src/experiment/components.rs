//! The harness components an arm sets (README, "Concepts"; configs/README.md, the arm keys).
//!
//! Every component has a value in the `bare` preset (its "off" value) and in
//! the `full` preset. Leave-one-out switches a component to its bare value;
//! add-one-in switches it to its full value.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How code is taken from a model's reply when it does not use a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EditFormat {
    /// The last fenced code block is the new file (default).
    LastFenced,
    /// The first fenced code block is the new file.
    FirstFenced,
}

impl fmt::Display for EditFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EditFormat::LastFenced => "last_fenced",
            EditFormat::FirstFenced => "first_fenced",
        })
    }
}

/// Which system prompt the arm uses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Instructions {
    /// The prompt built into ablate (see harness::prompts::DEFAULT_SYSTEM).
    Builtin,
    /// A prompt file, as written in the config (relative to the config's folder).
    File(String),
}

impl fmt::Display for Instructions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Instructions::Builtin => f.write_str("builtin"),
            Instructions::File(p) => f.write_str(p),
        }
    }
}

/// One harness component. The names are the config keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    Feedback,
    LoopGuard,
    Tools,
    Acceptance,
    ProgressHandoff,
    EditFormat,
    Instructions,
}

impl Component {
    pub const ALL: [Component; 7] = [
        Component::Feedback,
        Component::LoopGuard,
        Component::Tools,
        Component::Acceptance,
        Component::ProgressHandoff,
        Component::EditFormat,
        Component::Instructions,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Component::Feedback => "feedback",
            Component::LoopGuard => "loop_guard",
            Component::Tools => "tools",
            Component::Acceptance => "acceptance",
            Component::ProgressHandoff => "progress_handoff",
            Component::EditFormat => "edit_format",
            Component::Instructions => "instructions",
        }
    }

    /// Parse a component name; the error lists the valid names.
    pub fn parse(name: &str) -> Result<Component, String> {
        Component::ALL.into_iter().find(|c| c.name() == name).ok_or_else(|| {
            format!("no component named `{name}`; valid components: {}", Component::valid_names())
        })
    }

    pub fn valid_names() -> String {
        Component::ALL.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The full setting of every component: what defines an arm.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Components {
    /// The harness runs the checks after each edit and sends a summary.
    pub feedback: bool,
    /// A repeated submission is not re-run; the model is told so.
    pub loop_guard: bool,
    /// read_file / list_files / run_tests by tool calling; off: files inline.
    pub tools: bool,
    /// A "done" is accepted only when the checks pass (fail-closed).
    pub acceptance: bool,
    /// Sessions carry a progress file across the conversation reset.
    pub progress_handoff: bool,
    pub edit_format: EditFormat,
    pub instructions: Instructions,
}

/// One component whose value differs between two arms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentDiff {
    /// The component's name: a builtin one (`feedback`) or one an external
    /// harness declares.
    pub component: String,
    pub control: String,
    pub treatment: String,
}

impl Components {
    /// Everything off: one call, files inline, no feedback.
    pub fn bare() -> Components {
        Components {
            feedback: false,
            loop_guard: false,
            tools: false,
            acceptance: false,
            progress_handoff: false,
            edit_format: EditFormat::LastFenced,
            instructions: Instructions::Builtin,
        }
    }

    /// Every on/off component on; edit_format and instructions as in bare.
    pub fn full() -> Components {
        Components {
            feedback: true,
            loop_guard: true,
            tools: true,
            acceptance: true,
            progress_handoff: true,
            ..Components::bare()
        }
    }

    /// The value of one component, as text (for plans, records and diffs).
    pub fn value(&self, c: Component) -> String {
        match c {
            Component::Feedback => self.feedback.to_string(),
            Component::LoopGuard => self.loop_guard.to_string(),
            Component::Tools => self.tools.to_string(),
            Component::Acceptance => self.acceptance.to_string(),
            Component::ProgressHandoff => self.progress_handoff.to_string(),
            Component::EditFormat => self.edit_format.to_string(),
            Component::Instructions => self.instructions.to_string(),
        }
    }

    /// A copy with component `c` taken from `other`.
    pub fn with_from(&self, c: Component, other: &Components) -> Components {
        let mut out = self.clone();
        match c {
            Component::Feedback => out.feedback = other.feedback,
            Component::LoopGuard => out.loop_guard = other.loop_guard,
            Component::Tools => out.tools = other.tools,
            Component::Acceptance => out.acceptance = other.acceptance,
            Component::ProgressHandoff => out.progress_handoff = other.progress_handoff,
            Component::EditFormat => out.edit_format = other.edit_format,
            Component::Instructions => out.instructions = other.instructions.clone(),
        }
        out
    }

    /// Every component whose value differs, in the canonical order.
    pub fn diff(&self, treatment: &Components) -> Vec<ComponentDiff> {
        Component::ALL
            .into_iter()
            .filter(|&c| self.value(c) != treatment.value(c))
            .map(|c| ComponentDiff {
                component: c.name().to_string(),
                control: self.value(c),
                treatment: treatment.value(c),
            })
            .collect()
    }

    /// (name, value as text) of every component, in the canonical order.
    pub fn values(&self) -> Vec<(String, String)> {
        Component::ALL.iter().map(|&c| (c.name().to_string(), self.value(c))).collect()
    }

    /// `feedback=on loop_guard=off ...` for display.
    pub fn summary(&self) -> String {
        summary(&self.values())
    }
}

/// `name=value ...`, with `on`/`off` for true/false.
fn summary(values: &[(String, String)]) -> String {
    values
        .iter()
        .map(|(name, v)| {
            let v = match v.as_str() {
                "true" => "on",
                "false" => "off",
                _ => v,
            };
            format!("{name}={v}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The value of a component an external harness declares: a boolean, a
/// string or an integer (as written in the config).
pub type ComponentValue = serde_json::Value;

/// A component value as text: `true`, `map`, `3` (strings without quotes).
pub fn value_text(v: &ComponentValue) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What defines an arm: the builtin components, or the values of the
/// components an external harness declares (every declared component, in the
/// declared order). In the recorded experiment the first is the arm's
/// `components` object, the second its `values` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ArmSettings {
    #[serde(rename = "components")]
    Builtin(Components),
    #[serde(rename = "values")]
    External(IndexMap<String, ComponentValue>),
}

impl ArmSettings {
    pub fn builtin(&self) -> Option<&Components> {
        match self {
            ArmSettings::Builtin(c) => Some(c),
            ArmSettings::External(_) => None,
        }
    }

    pub fn external(&self) -> Option<&IndexMap<String, ComponentValue>> {
        match self {
            ArmSettings::Builtin(_) => None,
            ArmSettings::External(v) => Some(v),
        }
    }

    /// (name, value as text) of every component, in the canonical order
    /// (builtin) or the declared order (external).
    pub fn component_values(&self) -> Vec<(String, String)> {
        match self {
            ArmSettings::Builtin(c) => c.values(),
            ArmSettings::External(v) => v.iter().map(|(k, v)| (k.clone(), value_text(v))).collect(),
        }
    }

    /// The value of one component as text; None when the arm has no such component.
    pub fn value_of(&self, name: &str) -> Option<String> {
        match self {
            ArmSettings::Builtin(c) => Component::parse(name).ok().map(|c2| c.value(c2)),
            ArmSettings::External(v) => v.get(name).map(value_text),
        }
    }

    /// Every component whose value differs, in this arm's order (then any
    /// component only `treatment` has). A component one arm lacks differs,
    /// shown as `unset`.
    pub fn diff(&self, treatment: &ArmSettings) -> Vec<ComponentDiff> {
        match (self, treatment) {
            (ArmSettings::Builtin(a), ArmSettings::Builtin(b)) => a.diff(b),
            (ArmSettings::External(a), ArmSettings::External(b)) => {
                let names = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
                let text = |v: Option<&ComponentValue>| {
                    v.map(value_text).unwrap_or_else(|| "unset".into())
                };
                names
                    .filter(|k| a.get(*k) != b.get(*k))
                    .map(|k| ComponentDiff {
                        component: k.clone(),
                        control: text(a.get(k)),
                        treatment: text(b.get(k)),
                    })
                    .collect()
            }
            _ => {
                // A builtin arm against an external one: nothing is shared.
                let (a, b) = (self.component_values(), treatment.component_values());
                let get = |list: &[(String, String)], k: &str| {
                    list.iter()
                        .find(|(n, _)| n == k)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_else(|| "unset".into())
                };
                let mut names: Vec<&String> = a.iter().map(|(n, _)| n).collect();
                names.extend(b.iter().map(|(n, _)| n).filter(|n| !a.iter().any(|(m, _)| m == *n)));
                names
                    .into_iter()
                    .map(|k| ComponentDiff {
                        component: k.clone(),
                        control: get(&a, k),
                        treatment: get(&b, k),
                    })
                    .collect()
            }
        }
    }

    /// `feedback=on context=map ...` for display.
    pub fn summary(&self) -> String {
        summary(&self.component_values())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_lists_every_differing_component() {
        let bare = Components::bare();
        let full = Components::full();
        let names: Vec<_> = bare.diff(&full).iter().map(|d| d.component.clone()).collect();
        assert_eq!(
            names,
            vec!["feedback", "loop_guard", "tools", "acceptance", "progress_handoff"]
        );
        assert!(bare.diff(&bare).is_empty());
        let one = full.with_from(Component::Tools, &bare);
        let d = full.diff(&one);
        assert_eq!(d.len(), 1);
        assert_eq!(
            d[0],
            ComponentDiff {
                component: "tools".into(),
                control: "true".into(),
                treatment: "false".into()
            }
        );
    }

    #[test]
    fn unknown_component_lists_valid_names() {
        let err = Component::parse("feedbak").unwrap_err();
        assert!(
            err.contains("feedbak") && err.contains("loop_guard") && err.contains("instructions"),
            "{err}"
        );
        assert_eq!(Component::parse("edit_format").unwrap(), Component::EditFormat);
    }
}
