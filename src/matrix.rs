//! The matrix: arms and the comparisons between them, and the single-factor
//! guard.
//!
//! An *ablation* compares two arms that differ in exactly one component; the
//! effect is `treatment - control`, with the component present in the
//! treatment for generated comparisons (so a positive effect means it helps).
//! Anything else is a *combined* comparison, reported apart and labelled as not
//! attributable to one component.

use crate::error::InputError;
use crate::harness::{Component, ComponentDiff, Components};
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Arm {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub components: Components,
    pub origin: ArmOrigin,
}

/// Where an arm came from: the config, or a sweep of the matrix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ArmOrigin {
    Declared,
    LeaveOneOut { from: String, component: Component },
    AddOneIn { from: String, component: Component },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ComparisonKind {
    /// Exactly one component differs: the effect is attributable to it.
    Ablation { component: Component },
    /// Several components differ: not attributable to one component.
    Combined,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ComparisonOrigin {
    LeaveOneOut,
    AddOneIn,
    Pair,
    Combined,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    pub name: String,
    pub control: String,
    pub treatment: String,
    pub kind: ComparisonKind,
    pub origin: ComparisonOrigin,
    /// Every component that differs between control and treatment.
    pub differs: Vec<ComponentDiff>,
}

impl Comparison {
    pub fn is_ablation(&self) -> bool {
        matches!(self.kind, ComparisonKind::Ablation { .. })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMatrix {
    /// From a control arm, switch each component to its bare value in turn.
    pub leave_one_out: Option<RawSweep>,
    /// From a base arm (usually bare), switch each component to its full value in turn.
    pub add_one_in: Option<RawSweep>,
    /// Explicit ablations; each must differ in exactly one component.
    #[serde(default)]
    pub pairs: Vec<RawPair>,
    /// Explicit combined comparisons (e.g. bare vs full).
    #[serde(default)]
    pub combined: Vec<RawPair>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSweep {
    pub from: String,
    /// Components to sweep; absent: every component the sweep would change.
    pub components: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPair {
    pub control: String,
    pub treatment: String,
    pub name: Option<String>,
}

pub fn is_arm_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Why a comparison labelled as an ablation is not one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GuardError {
    #[error("comparison `{name}` is labelled an ablation but no component differs between `{control}` and `{treatment}`")]
    NoneDiffer { name: String, control: String, treatment: String },
    #[error(
        "comparison `{name}` is labelled an ablation but `{control}` and `{treatment}` differ in {n} components: {list}; make them differ in exactly one, or declare it under [[matrix.combined]]",
        n = differs.len(),
        list = describe(differs)
    )]
    SeveralDiffer { name: String, control: String, treatment: String, differs: Vec<ComponentDiff> },
}

fn describe(d: &[ComponentDiff]) -> String {
    d.iter().map(|d| format!("{} ({} vs {})", d.component, d.control, d.treatment)).collect::<Vec<_>>().join(", ")
}

/// The single-factor guard: an ablation's arms differ in exactly one component.
/// Used when the config is loaded and again when a run is analysed.
pub fn guard(name: &str, control: &Arm, treatment: &Arm) -> Result<Component, GuardError> {
    let differs = control.components.diff(&treatment.components);
    match differs.as_slice() {
        [one] => Ok(one.component),
        [] => Err(GuardError::NoneDiffer {
            name: name.to_string(),
            control: control.name.clone(),
            treatment: treatment.name.clone(),
        }),
        _ => Err(GuardError::SeveralDiffer {
            name: name.to_string(),
            control: control.name.clone(),
            treatment: treatment.name.clone(),
            differs,
        }),
    }
}

/// Expand sweeps into arms and comparisons, and apply the guard. Generated arms
/// reuse an arm with identical settings when one exists.
pub fn expand(file: &Path, mut arms: Vec<Arm>, raw: &RawMatrix) -> Result<(Vec<Arm>, Vec<Comparison>), InputError> {
    let mut comparisons: Vec<Comparison> = Vec::new();
    let arm_names = |arms: &[Arm]| arms.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ");

    for (key, sweep, leave_out) in [("matrix.leave_one_out", &raw.leave_one_out, true), ("matrix.add_one_in", &raw.add_one_in, false)] {
        let Some(sweep) = sweep else { continue };
        let Some(from) = arms.iter().find(|a| a.name == sweep.from).cloned() else {
            return Err(InputError::at(file, format!("{key}.from"), format!("no arm named `{}`; arms: {}", sweep.from, arm_names(&arms))));
        };
        // Leave-one-out switches to the bare value, add-one-in to the full one.
        let target = if leave_out { Components::bare() } else { Components::full() };
        let components: Vec<Component> = match &sweep.components {
            Some(names) => {
                let mut out = Vec::new();
                for (i, n) in names.iter().enumerate() {
                    let c = Component::parse(n).map_err(|m| InputError::at(file, format!("{key}.components[{i}]"), m))?;
                    if from.components.value(c) == target.value(c) {
                        return Err(InputError::at(
                            file,
                            format!("{key}.components[{i}]"),
                            format!("`{c}` is already {} in arm `{}`; the sweep would not change it", target.value(c), from.name),
                        ));
                    }
                    out.push(c);
                }
                out
            }
            None => Component::ALL.into_iter().filter(|&c| from.components.value(c) != target.value(c)).collect(),
        };
        if components.is_empty() {
            return Err(InputError::at(file, key, format!("arm `{}` has no component to sweep", from.name)));
        }
        for c in components {
            let settings = from.components.with_from(c, &target);
            let slug = c.name().replace('_', "-");
            let generated_name = if leave_out { format!("{}-minus-{slug}", from.name) } else { format!("{}-plus-{slug}", from.name) };
            let arm = match arms.iter().find(|a| a.components == settings) {
                Some(existing) => existing.clone(),
                None => {
                    if arms.iter().any(|a| a.name == generated_name) {
                        return Err(InputError::at(
                            file,
                            format!("arms.{generated_name}"),
                            format!("this name is taken by the sweep in {key}, with other settings; rename the arm"),
                        ));
                    }
                    let origin = if leave_out {
                        ArmOrigin::LeaveOneOut { from: from.name.clone(), component: c }
                    } else {
                        ArmOrigin::AddOneIn { from: from.name.clone(), component: c }
                    };
                    let arm = Arm { name: generated_name, description: String::new(), components: settings, origin };
                    arms.push(arm.clone());
                    arm
                }
            };
            // The treatment holds the component at its full/"with" value.
            let (control, treatment, origin) = if leave_out {
                (arm, from.clone(), ComparisonOrigin::LeaveOneOut)
            } else {
                (from.clone(), arm, ComparisonOrigin::AddOneIn)
            };
            let name = format!("{c}: {} vs {}", treatment.name, control.name);
            push_ablation(file, key, &mut comparisons, name, &control, &treatment, origin)?;
        }
    }

    for (i, pair) in raw.pairs.iter().enumerate() {
        let key = format!("matrix.pairs[{i}]");
        let (control, treatment) = pair_arms(file, &key, &arms, pair)?;
        let name = pair.name.clone().unwrap_or_else(|| format!("{} vs {}", treatment.name, control.name));
        push_ablation(file, &key, &mut comparisons, name, &control, &treatment, ComparisonOrigin::Pair)?;
    }

    for (i, pair) in raw.combined.iter().enumerate() {
        let key = format!("matrix.combined[{i}]");
        let (control, treatment) = pair_arms(file, &key, &arms, pair)?;
        let differs = control.components.diff(&treatment.components);
        if differs.is_empty() {
            return Err(InputError::at(file, key, format!("`{}` and `{}` have identical settings; nothing to compare", control.name, treatment.name)));
        }
        let name = pair.name.clone().unwrap_or_else(|| format!("{} vs {} (combined)", treatment.name, control.name));
        comparisons.push(Comparison {
            name,
            control: control.name.clone(),
            treatment: treatment.name.clone(),
            kind: ComparisonKind::Combined,
            origin: ComparisonOrigin::Combined,
            differs,
        });
    }
    Ok((arms, comparisons))
}

fn pair_arms(file: &Path, key: &str, arms: &[Arm], pair: &RawPair) -> Result<(Arm, Arm), InputError> {
    let names = arms.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ");
    let find = |field: &str, name: &str| {
        arms.iter()
            .find(|a| a.name == name)
            .cloned()
            .ok_or_else(|| InputError::at(file, format!("{key}.{field}"), format!("no arm named `{name}`; arms: {names}")))
    };
    Ok((find("control", &pair.control)?, find("treatment", &pair.treatment)?))
}

fn push_ablation(
    file: &Path,
    key: &str,
    comparisons: &mut Vec<Comparison>,
    name: String,
    control: &Arm,
    treatment: &Arm,
    origin: ComparisonOrigin,
) -> Result<(), InputError> {
    let component = guard(&name, control, treatment).map_err(|e| InputError::at(file, key, e.to_string()))?;
    if comparisons.iter().any(|c| c.control == control.name && c.treatment == treatment.name) {
        return Ok(());
    }
    comparisons.push(Comparison {
        name,
        control: control.name.clone(),
        treatment: treatment.name.clone(),
        kind: ComparisonKind::Ablation { component },
        origin,
        differs: control.components.diff(&treatment.components),
    });
    Ok(())
}
