//! The matrix: arms and the comparisons between them, and the single-factor
//! guard.
//!
//! An *ablation* compares two arms that differ in exactly one component; the
//! effect is `treatment - control`, with the component present in the
//! treatment for generated comparisons (so a positive effect means it helps).
//! Anything else is a *combined* comparison, reported apart and labelled as not
//! attributable to one component.

use crate::error::InputError;
use crate::experiment::{
    ArmSettings, Component, ComponentDiff, ComponentValue, Components, HarnessKind, value_text,
};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub use crate::record::design::Resources;
pub use crate::record::design::{
    ArmOrigin, AtBudget, BudgetKey, BudgetLevel, Comparison, ComparisonKind, ComparisonOrigin,
};
use crate::record::design::{Budget, RecordedArm, RecordedSettings};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Arm {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `components` (builtin) or `values` (external) in the recorded experiment.
    #[serde(flatten)]
    pub settings: ArmSettings,
    pub origin: ArmOrigin,
    /// The arm a budget sweep repeats at one level (`[matrix.budget]`); None runs at `[budget]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<AtBudget>,
    /// The container resources the arm sets over the task's (`[arms.NAME] resources`).
    #[serde(default, skip_serializing_if = "Resources::is_empty")]
    pub resources: Resources,
}

impl Arm {
    /// The builtin components of a builtin arm; None for an external arm.
    pub fn builtin_components(&self) -> Option<&Components> {
        self.settings.builtin()
    }

    /// (name, value as text) of every component, in the canonical (builtin)
    /// or declared (external) order.
    pub fn component_values(&self) -> Vec<(String, String)> {
        let mut values = self.settings.component_values();
        values.extend(self.resources_set());
        values
    }

    /// The container resources the arm sets, as components (`resources.cpus`, `2`).
    pub(crate) fn resources_set(&self) -> Vec<(String, String)> {
        let set = self.resources.entries().into_iter();
        set.filter_map(|(name, value)| Some((name.to_string(), value?))).collect()
    }

    /// Every component that differs from `other`'s (the harness's, then the resources the arms
    /// set), `self` as the control.
    pub fn diff(&self, other: &Arm) -> Vec<ComponentDiff> {
        let mut d = self.settings.diff(&other.settings);
        d.extend(self.resources.diff(&other.resources));
        d
    }

    /// The budget this arm's trials run under: the experiment's, at the arm's sweep level.
    pub fn budget_under(&self, experiment: &Budget) -> Budget {
        match &self.budget {
            Some(at) => experiment.at(&at.level),
            None => experiment.clone(),
        }
    }

    /// The arm as the record holds it: each component's value by its name, a builtin arm's in
    /// the registry's order (as the struct writes its fields).
    pub fn recorded(&self) -> RecordedArm {
        let settings = match &self.settings {
            ArmSettings::Builtin(c) => RecordedSettings::Builtin(
                serde_json::to_string(c)
                    .and_then(|text| serde_json::from_str(&text))
                    .expect("a struct of components is a JSON object"),
            ),
            ArmSettings::External(values) => RecordedSettings::External(values.clone()),
        };
        RecordedArm {
            name: self.name.clone(),
            description: self.description.clone(),
            settings,
            origin: self.origin.clone(),
            budget: self.budget.clone(),
            resources: self.resources,
        }
    }

    /// The arm a record holds, read back: a builtin arm's components through the registry (one
    /// the record lacks, from a run made before it existed, is its `bare` value; a key that is no
    /// component is refused, naming it), an external arm's values as they are. The error's path
    /// names the component whose value is wrong.
    pub fn from_recorded(
        arm: &RecordedArm,
    ) -> Result<Arm, serde_path_to_error::Error<serde_json::Error>> {
        let settings = match &arm.settings {
            RecordedSettings::Builtin(values) => {
                ArmSettings::Builtin(serde_path_to_error::deserialize(serde_json::Value::Object(
                    values.clone().into_iter().collect(),
                ))?)
            }
            RecordedSettings::External(values) => ArmSettings::External(values.clone()),
        };
        Ok(Arm {
            name: arm.name.clone(),
            description: arm.description.clone(),
            settings,
            origin: arm.origin.clone(),
            budget: arm.budget.clone(),
            resources: arm.resources,
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMatrix {
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
    /// A budget sweep: one `[budget]` key and its levels (`budget_sweep`, applied after `expand`).
    pub budget: Option<toml::Table>,
    /// A two-level factorial design over named components (`factorial`, applied after `expand`).
    pub factorial: Option<RawFactorial>,
}

/// `[matrix.factorial]` as the config writes it (`factorial::expand` reads it).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFactorial {
    /// The arm whose other components every run keeps.
    pub from: String,
    /// The factors, in order: the last `fraction` (or the generated ones) come from the rest.
    pub components: Vec<String>,
    /// A fraction 2^-p with the documented generators (Montgomery's Table 8.14).
    pub fraction: Option<u32>,
    /// A fraction with these generators: `"loop_guard = feedback * tools * acceptance"`.
    pub generators: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSweep {
    pub from: String,
    /// Components to sweep; absent: every component the sweep would change.
    pub components: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPair {
    pub control: String,
    pub treatment: String,
    pub name: Option<String>,
}

pub fn is_arm_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Why a comparison labelled as an ablation is not one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GuardError {
    #[error(
        "comparison `{name}` is labelled an ablation but no component differs between `{control}` and `{treatment}`"
    )]
    NoneDiffer { name: String, control: String, treatment: String },
    #[error(
        "comparison `{name}` is labelled an ablation but `{control}` and `{treatment}` differ in {n} components: {list}; make them differ in exactly one, or declare it under [[matrix.combined]]",
        n = differs.len(),
        list = describe(differs)
    )]
    SeveralDiffer { name: String, control: String, treatment: String, differs: Vec<ComponentDiff> },
    #[error(
        "comparison `{name}` compares `{control}` ({control_budget}) with `{treatment}` ({treatment_budget}): arms compared run under one budget"
    )]
    BudgetsDiffer {
        name: String,
        control: String,
        treatment: String,
        control_budget: String,
        treatment_budget: String,
    },
}

/// An arm's budget in the guard's message: its sweep level, or the experiment's.
fn budget_text(arm: &Arm) -> String {
    arm.budget.as_ref().map_or("the experiment's budget".to_string(), |b| format!("at {}", b.level))
}

fn describe(d: &[ComponentDiff]) -> String {
    d.iter()
        .map(|d| format!("{} ({} vs {})", d.component, d.control, d.treatment))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The single-factor guard: an ablation's arms differ in exactly one component.
/// Used when the config is loaded and again when a run is analysed.
pub fn guard(name: &str, control: &Arm, treatment: &Arm) -> Result<String, GuardError> {
    if control.budget.as_ref().map(|b| b.level) != treatment.budget.as_ref().map(|b| b.level) {
        return Err(GuardError::BudgetsDiffer {
            name: name.to_string(),
            control: control.name.clone(),
            treatment: treatment.name.clone(),
            control_budget: budget_text(control),
            treatment_budget: budget_text(treatment),
        });
    }
    let differs = control.diff(treatment);
    match differs.as_slice() {
        [one] => Ok(one.component.clone()),
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
pub(crate) fn expand(
    file: &Path,
    arms: Vec<Arm>,
    raw: &RawMatrix,
    harness: &HarnessKind,
) -> Result<(Vec<Arm>, Vec<Comparison>), InputError> {
    let mut e = Expansion { file, arms, comparisons: Vec::new() };
    for (key, sweep, leave_out) in [
        ("matrix.leave_one_out", &raw.leave_one_out, true),
        ("matrix.add_one_in", &raw.add_one_in, false),
    ] {
        let Some(sweep) = sweep else { continue };
        e.sweep(key, sweep, leave_out, harness)?;
    }
    for (i, pair) in raw.pairs.iter().enumerate() {
        e.pair(&format!("matrix.pairs[{i}]"), pair)?;
    }
    for (i, pair) in raw.combined.iter().enumerate() {
        e.combined(format!("matrix.combined[{i}]"), pair)?;
    }
    Ok((e.arms, e.comparisons))
}

/// The arms and comparisons of a matrix as `expand` builds them up.
struct Expansion<'a> {
    file: &'a Path,
    arms: Vec<Arm>,
    comparisons: Vec<Comparison>,
}

impl Expansion<'_> {
    /// A leave-one-out or add-one-in sweep from one arm: for each component, the arm with
    /// it switched, and the ablation between that arm and the arm swept from.
    fn sweep(
        &mut self,
        key: &str,
        sweep: &RawSweep,
        leave_out: bool,
        harness: &HarnessKind,
    ) -> Result<(), InputError> {
        let file = self.file;
        let arm_names =
            |arms: &[Arm]| arms.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ");
        let Some(from) = self.arms.iter().find(|a| a.name == sweep.from).cloned() else {
            return Err(InputError::at(
                file,
                format!("{key}.from"),
                format!("no arm named `{}`; arms: {}", sweep.from, arm_names(&self.arms)),
            ));
        };
        let variants = match &from.settings {
            ArmSettings::Builtin(c) => {
                builtin_variants(file, key, &from.name, c, sweep, leave_out)?
            }
            ArmSettings::External(values) => {
                external_variants(file, key, &from.name, values, sweep, harness)?
            }
        };
        if variants.is_empty() {
            return Err(InputError::at(
                file,
                key,
                format!("arm `{}` has no component to sweep", from.name),
            ));
        }
        for variant in variants {
            let c = variant.component.clone();
            let arm = self.variant_arm(key, &from, leave_out, variant)?;
            // The treatment holds the component at its full/"with" value
            // (external: leave-one-out's treatment is the arm swept from).
            let (control, treatment, origin) = if leave_out {
                (arm, from.clone(), ComparisonOrigin::LeaveOneOut)
            } else {
                (from.clone(), arm, ComparisonOrigin::AddOneIn)
            };
            let name = format!("{c}: {} vs {}", treatment.name, control.name);
            push_ablation(file, key, &mut self.comparisons, name, &control, &treatment, origin)?;
        }
        Ok(())
    }

    /// A variant's arm: an arm with its settings and the resources of the arm swept from
    /// when one exists, else a new arm under the variant's name.
    fn variant_arm(
        &mut self,
        key: &str,
        from: &Arm,
        leave_out: bool,
        variant: Variant,
    ) -> Result<Arm, InputError> {
        let Variant { component: c, settings, name: generated_name } = variant;
        let same = |a: &&Arm| a.settings == settings && a.resources == from.resources;
        if let Some(existing) = self.arms.iter().find(same) {
            return Ok(existing.clone());
        }
        if self.arms.iter().any(|a| a.name == generated_name) {
            return Err(InputError::at(
                self.file,
                format!("arms.{generated_name}"),
                format!(
                    "this name is taken by the sweep in {key}, with other settings; rename the arm"
                ),
            ));
        }
        let origin = if leave_out {
            ArmOrigin::LeaveOneOut { from: from.name.clone(), component: c.clone() }
        } else {
            ArmOrigin::AddOneIn { from: from.name.clone(), component: c.clone() }
        };
        let arm = Arm {
            name: generated_name,
            description: String::new(),
            settings,
            origin,
            budget: None,
            resources: from.resources,
        };
        self.arms.push(arm.clone());
        Ok(arm)
    }

    /// An explicit ablation (`[[matrix.pairs]]`).
    fn pair(&mut self, key: &str, pair: &RawPair) -> Result<(), InputError> {
        let (control, treatment) = pair_arms(self.file, key, &self.arms, pair)?;
        let name =
            pair.name.clone().unwrap_or_else(|| format!("{} vs {}", treatment.name, control.name));
        push_ablation(
            self.file,
            key,
            &mut self.comparisons,
            name,
            &control,
            &treatment,
            ComparisonOrigin::Pair,
        )
    }

    /// An explicit combined comparison (`[[matrix.combined]]`): its arms differ somewhere.
    fn combined(&mut self, key: String, pair: &RawPair) -> Result<(), InputError> {
        let (control, treatment) = pair_arms(self.file, &key, &self.arms, pair)?;
        let differs = control.diff(&treatment);
        if differs.is_empty() {
            return Err(InputError::at(
                self.file,
                key,
                format!(
                    "`{}` and `{}` have identical settings; nothing to compare",
                    control.name, treatment.name
                ),
            ));
        }
        let name = pair
            .name
            .clone()
            .unwrap_or_else(|| format!("{} vs {} (combined)", treatment.name, control.name));
        self.comparisons.push(Comparison {
            name,
            control: control.name.clone(),
            treatment: treatment.name.clone(),
            kind: ComparisonKind::Combined,
            origin: ComparisonOrigin::Combined,
            differs,
            budget: None,
        });
        Ok(())
    }
}

fn pair_arms(
    file: &Path,
    key: &str,
    arms: &[Arm],
    pair: &RawPair,
) -> Result<(Arm, Arm), InputError> {
    let names = arms.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ");
    let find = |field: &str, name: &str| {
        arms.iter().find(|a| a.name == name).cloned().ok_or_else(|| {
            InputError::at(
                file,
                format!("{key}.{field}"),
                format!("no arm named `{name}`; arms: {names}"),
            )
        })
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
    let component =
        guard(&name, control, treatment).map_err(|e| InputError::at(file, key, e.to_string()))?;
    if comparisons.iter().any(|c| c.control == control.name && c.treatment == treatment.name) {
        return Ok(());
    }
    comparisons.push(Comparison {
        name,
        control: control.name.clone(),
        treatment: treatment.name.clone(),
        kind: ComparisonKind::Ablation { component },
        origin,
        differs: control.diff(treatment),
        budget: None,
    });
    Ok(())
}

/// An arm a sweep generates: the arm swept from with one component changed.
struct Variant {
    component: String,
    settings: ArmSettings,
    name: String,
}

/// Builtin sweeps: leave-one-out switches each component to its bare value,
/// add-one-in to its full value (components already there are skipped).
fn builtin_variants(
    file: &Path,
    key: &str,
    from: &str,
    c0: &Components,
    sweep: &RawSweep,
    leave_out: bool,
) -> Result<Vec<Variant>, InputError> {
    let target = if leave_out { Components::bare() } else { Components::full() };
    let components: Vec<Component> = match &sweep.components {
        Some(names) => {
            let mut out = Vec::new();
            for (i, n) in names.iter().enumerate() {
                let c = Component::parse(n).map_err(|e| {
                    InputError::at(file, format!("{key}.components[{i}]"), e.to_string())
                })?;
                if c0.value(c) == target.value(c) {
                    return Err(InputError::at(
                        file,
                        format!("{key}.components[{i}]"),
                        format!(
                            "`{c}` is already {} in arm `{from}`; the sweep would not change it",
                            target.value(c)
                        ),
                    ));
                }
                out.push(c);
            }
            out
        }
        None => {
            Component::ALL.iter().copied().filter(|&c| c0.value(c) != target.value(c)).collect()
        }
    };
    Ok(components
        .into_iter()
        .map(|c| {
            let slug = c.name().replace('_', "-");
            let name = if leave_out {
                format!("{from}-minus-{slug}")
            } else {
                format!("{from}-plus-{slug}")
            };
            Variant {
                component: c.name().to_string(),
                settings: ArmSettings::Builtin(c0.with_from(c, &target)),
                name,
            }
        })
        .collect())
}

/// External sweeps: for each declared component (in the declared order, or
/// the sweep's `components`) and each of its values other than the arm's, an
/// arm differing only there. Both sweeps generate the same arms; they differ
/// in which side is the control.
fn external_variants(
    file: &Path,
    key: &str,
    from: &str,
    values: &indexmap::IndexMap<String, ComponentValue>,
    sweep: &RawSweep,
    harness: &HarnessKind,
) -> Result<Vec<Variant>, InputError> {
    let Some(ext) = harness.external() else {
        return Err(InputError::at(
            file,
            key,
            format!("arm `{from}` sets external components but the harness is builtin"),
        ));
    };
    let declared: Vec<&crate::experiment::DeclaredComponent> = match &sweep.components {
        Some(names) => {
            let mut out = Vec::new();
            for (i, n) in names.iter().enumerate() {
                let d = ext.component(n).ok_or_else(|| {
                    InputError::at(
                        file,
                        format!("{key}.components[{i}]"),
                        format!("no component named `{n}`; declared components: {}", ext.names()),
                    )
                })?;
                out.push(d);
            }
            out
        }
        None => ext.components.iter().collect(),
    };
    let mut out = Vec::new();
    for d in declared {
        let current = values.get(&d.name);
        for v in d.values.iter().filter(|v| Some(*v) != current) {
            let mut settings = values.clone();
            settings.insert(d.name.clone(), v.clone());
            let slug = d.name.replace('_', "-");
            let name = match v {
                ComponentValue::Bool(false) => format!("{from}-minus-{slug}"),
                ComponentValue::Bool(true) => format!("{from}-plus-{slug}"),
                other => format!("{from}-{slug}-{}", slugify(&value_text(other))),
            };
            out.push(Variant {
                component: d.name.clone(),
                settings: ArmSettings::External(settings),
                name,
            });
        }
    }
    Ok(out)
}

/// A value as part of an arm name: lowercase letters and digits, other runs
/// of characters as one `-` (a leading minus sign as `neg`); `value` when
/// nothing is left.
pub fn slugify(text: &str) -> String {
    let (neg, body) = match text.strip_prefix('-') {
        Some(rest) if !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit()) => (true, rest),
        _ => (false, text),
    };
    let mut out = String::new();
    for ch in body.chars().flat_map(char::to_lowercase) {
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() {
            out.push(ch);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-').to_string();
    match (neg, out.is_empty()) {
        (true, _) => format!("neg{out}"),
        (false, true) => "value".to_string(),
        (false, false) => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::Instructions;
    use serde_json::json;

    fn recorded(components: serde_json::Value) -> RecordedArm {
        serde_json::from_value(json!({
            "name": "a", "components": components, "origin": {"kind": "declared"}
        }))
        .unwrap()
    }

    #[test]
    fn a_recorded_arm_reads_back_through_the_registry() {
        let arm = Arm {
            name: "a".into(),
            description: "d".into(),
            settings: ArmSettings::Builtin(Components {
                tools: true,
                instructions: Instructions::File("p.md".into()),
                ..Components::bare()
            }),
            origin: ArmOrigin::LeaveOneOut { from: "full".into(), component: "feedback".into() },
            budget: None,
            resources: Resources::default(),
        };
        let rec = arm.recorded();
        let RecordedSettings::Builtin(values) = &rec.settings else { panic!("builtin") };
        assert_eq!(
            values.keys().map(String::as_str).collect::<Vec<_>>(),
            // configs/README.md's order, then the test build's own component.
            [
                "feedback",
                "loop_guard",
                "tools",
                "acceptance",
                "progress_handoff",
                "edit_format",
                "instructions",
                "reminder"
            ]
        );
        let written = serde_json::to_value(&rec).unwrap();
        assert_eq!(written["components"]["tools"], json!(true));
        assert_eq!(written["components"]["instructions"], json!({"file": "p.md"}));
        assert_eq!(Arm::from_recorded(&rec).unwrap(), arm);
        // A component the record lacks (a run made before it existed) is its bare value.
        let old = Arm::from_recorded(&recorded(json!({"feedback": true}))).unwrap();
        assert_eq!(
            old.builtin_components(),
            Some(&Components { feedback: true, ..Components::bare() })
        );
        // A key that is no component is refused, naming it.
        let err = Arm::from_recorded(&recorded(json!({"feedbak": true}))).unwrap_err();
        assert!(err.inner().to_string().starts_with("unknown field `feedbak`"), "{err}");
        // A value of the wrong type is refused, its path naming the component.
        let err = Arm::from_recorded(&recorded(json!({"feedback": "yes"}))).unwrap_err();
        assert_eq!(err.path().to_string(), "feedback");
        // An external arm's values come back as they are.
        let ext = Arm {
            settings: ArmSettings::External([("context".to_string(), json!("map"))].into()),
            ..arm
        };
        assert_eq!(Arm::from_recorded(&ext.recorded()).unwrap(), ext);
    }
}
