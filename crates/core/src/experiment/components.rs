//! The harness components an arm sets (README, "Concepts"; configs/README.md, the arm keys).
//!
//! Every component has a value in the `bare` preset (its "off" value) and in
//! the `full` preset. Leave-one-out switches a component to its bare value;
//! add-one-in switches it to its full value.

use crate::error::InputError;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

pub use crate::record::design::{ComponentDiff, ComponentValue, value_text};

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

/// What a component's value is read from in an arm's table, and how.
pub(crate) trait Setting: Sized {
    /// The value as the config writes it.
    type Raw: serde::de::DeserializeOwned;
    /// The value the arm holds; `at` is the arm being read (a file it names is read here).
    fn from_raw(raw: Self::Raw, at: &mut ArmInput<'_>) -> Result<Self, InputError>;
}

/// The arm being read, for a setting that reads more than its own value.
pub(crate) struct ArmInput<'a> {
    /// The config file and the arm's key in it (`arms.<name>`).
    pub path: &'a Path,
    pub key: &'a str,
    /// The config's folder, against which a file an arm names is read.
    pub config_dir: &'a Path,
    /// The sha256 of every prompt file the arms read, by the name the config gives it.
    pub prompt_digests: &'a mut IndexMap<String, String>,
    /// The models whose API cannot start the assistant's turn with a text.
    pub without_prefill: &'a [String],
}

impl Setting for bool {
    type Raw = bool;
    fn from_raw(raw: bool, _: &mut ArmInput<'_>) -> Result<bool, InputError> {
        Ok(raw)
    }
}

impl Setting for EditFormat {
    type Raw = EditFormat;
    fn from_raw(raw: EditFormat, _: &mut ArmInput<'_>) -> Result<EditFormat, InputError> {
        Ok(raw)
    }
}

/// The builtin components, each declared once: its variant, its config key (the field), its value
/// type, its `bare` and `full` values and its line in configs/README.md (the doc). From this come
/// `Component` (`ALL`, `name`, `doc`), `Components` (`bare`, `full`, `value`, `with_from`) and the
/// keys an arm's table may set (`RawArm`). A component's behaviour in the builtin loops is its
/// hook (`harness::hooks`).
macro_rules! builtin_components {
    ($(
        #[doc = $doc:literal]
        $(#[cfg($cfg:meta)])?
        $variant:ident $field:ident : $ty:ty = $bare:expr, $full:expr;
    )*) => {
        /// One harness component. The names are the config keys.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Component {
            $($(#[cfg($cfg)])? $variant,)*
        }

        impl Component {
            /// Every builtin component, in the canonical order.
            pub const ALL: &'static [Component] = &[$($(#[cfg($cfg)])? Component::$variant,)*];

            pub fn name(self) -> &'static str {
                match self {
                    $($(#[cfg($cfg)])? Component::$variant => stringify!($field),)*
                }
            }

            /// What the component does, as configs/README.md says it.
            pub fn doc(self) -> &'static str {
                match self {
                    $($(#[cfg($cfg)])? Component::$variant => $doc.trim(),)*
                }
            }
        }

        /// The full setting of every component: what defines an arm. A component a record
        /// does not hold (a run made before it was added) reads as its `bare` value: the
        /// harness then did not have it. A key that is no component is refused, naming it.
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(default = "Components::bare", deny_unknown_fields)]
        pub struct Components {
            $(#[doc = $doc] $(#[cfg($cfg)])? pub $field: $ty,)*
        }

        impl Components {
            /// The `bare` preset: every on/off component off, the others at their first value.
            pub fn bare() -> Components {
                Components { $($(#[cfg($cfg)])? $field: $bare,)* }
            }

            /// The `full` preset: every on/off component on.
            pub fn full() -> Components {
                Components { $($(#[cfg($cfg)])? $field: $full,)* }
            }

            /// The value of one component, as text (for plans, records and diffs).
            pub fn value(&self, c: Component) -> String {
                match c {
                    $($(#[cfg($cfg)])? Component::$variant => self.$field.to_string(),)*
                }
            }

            /// A copy with component `c` taken from `other`.
            pub fn with_from(&self, c: Component, other: &Components) -> Components {
                let mut out = self.clone();
                match c {
                    $($(#[cfg($cfg)])? Component::$variant => out.$field = other.$field.clone(),)*
                }
                out
            }
        }

        /// A builtin arm's table as the config writes it.
        #[derive(Debug, Deserialize, Default)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct RawArm {
            /// Preset the arm starts from: `bare` (default) or `full`.
            #[serde(default)]
            base: Preset,
            #[serde(default)]
            pub(crate) description: String,
            $($(#[cfg($cfg)])? $field: Option<<$ty as Setting>::Raw>,)*
        }

        impl RawArm {
            /// The arm's components: its preset with each key it sets.
            pub(crate) fn components(self, at: &mut ArmInput<'_>) -> Result<Components, InputError> {
                let mut c = match self.base {
                    Preset::Bare => Components::bare(),
                    Preset::Full => Components::full(),
                };
                $($(#[cfg($cfg)])?
                if let Some(raw) = self.$field {
                    c.$field = <$ty as Setting>::from_raw(raw, at)?;
                })*
                Ok(c)
            }
        }
    };
}

builtin_components! {
    /// the harness runs the checks after each edit and sends a summary
    Feedback feedback: bool = false, true;
    /// a repeated submission is not re-run; the model is told
    LoopGuard loop_guard: bool = false, true;
    /// read_file / list_files / run_tests by tool calling; off: files inline
    Tools tools: bool = false, true;
    /// a "done" is accepted only when the checks pass
    Acceptance acceptance: bool = false, true;
    /// a progress file crosses each session boundary
    ProgressHandoff progress_handoff: bool = false, true;
    /// last_fenced | first_fenced
    EditFormat edit_format: EditFormat = EditFormat::LastFenced, EditFormat::LastFenced;
    /// system prompt file; absent: the builtin prompt
    Instructions instructions: Instructions = Instructions::Builtin, Instructions::Builtin;
    /// a reminder opens each session (a component of the test build only)
    #[cfg(test)]
    Reminder reminder: bool = false, true;
}

/// The preset an arm starts from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Preset {
    #[default]
    Bare,
    Full,
}

impl Component {
    /// Whether the component acts through the model's requests (the system
    /// prompt, the tool set), where the delivery check expects the arms'
    /// requests to differ; the others act in the loop (what is checked, when
    /// it stops, what it carries over), which the requests need not show.
    pub fn model_facing(self) -> bool {
        match self {
            Component::Tools | Component::Instructions => true,
            Component::Feedback
            | Component::LoopGuard
            | Component::Acceptance
            | Component::ProgressHandoff
            | Component::EditFormat => false,
            #[cfg(test)]
            Component::Reminder => false,
        }
    }

    /// Parse a component name; the error lists the valid names.
    pub fn parse(name: &str) -> Result<Component, UnknownComponent> {
        Component::ALL
            .iter()
            .copied()
            .find(|c| c.name() == name)
            .ok_or_else(|| UnknownComponent(name.to_string()))
    }

    pub(crate) fn valid_names() -> String {
        Component::ALL.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
    }
}

/// A name that is no builtin component; the message lists the valid names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no component named `{}`; valid components: {}", .0, Component::valid_names())]
pub struct UnknownComponent(pub String);

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Components {
    /// Every component whose value differs, in the canonical order.
    pub fn diff(&self, treatment: &Components) -> Vec<ComponentDiff> {
        Component::ALL
            .iter()
            .copied()
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
    pub(crate) fn value_of(&self, name: &str) -> Option<String> {
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
            // The last one is the test build's own (`harness::reminder`).
            vec!["feedback", "loop_guard", "tools", "acceptance", "progress_handoff", "reminder"]
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
    fn a_record_made_before_a_component_was_added_reads_it_as_bare() {
        // The test build's `reminder` stands for a component added after the run was recorded.
        let mut old = serde_json::to_value(Components::full()).unwrap();
        old.as_object_mut().unwrap().remove("reminder");
        let read: Components = serde_json::from_value(old).unwrap();
        assert_eq!(read, Components { reminder: false, ..Components::full() });
        // A key that is no component (a typo, or a later version's component) is not dropped.
        let err = serde_json::from_value::<Components>(serde_json::json!({"feedbak": true}))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("unknown field `feedbak`, expected one of `feedback`"), "{err}");
    }

    #[test]
    fn unknown_component_lists_valid_names() {
        let err = Component::parse("feedbak").unwrap_err().to_string();
        assert!(
            err.contains("feedbak") && err.contains("loop_guard") && err.contains("instructions"),
            "{err}"
        );
        assert_eq!(Component::parse("edit_format").unwrap(), Component::EditFormat);
    }
}
