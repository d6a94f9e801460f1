//! A budget sweep (`[matrix.budget]`): every arm, and so every comparison, again at each level of
//! one `[budget]` key. Each swept arm runs its own trials under its level (the agent is told
//! that budget, and nothing is truncated after the fact); each comparison is repeated per level
//! between its arms at that level, so that arms compared always share a budget (the guard holds
//! it). The report draws the curves (`report::analysis::budget`).

use super::matrix::{Arm, AtBudget, BudgetKey, BudgetLevel, Comparison, slugify};
use crate::error::InputError;
use std::path::Path;

/// The most levels one sweep may have.
pub(crate) const MAX_LEVELS: usize = 20;

/// A sweep as checked: the key and its levels, strictly increasing.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetSweep {
    pub key: BudgetKey,
    pub levels: Vec<f64>,
}

/// `[matrix.budget]` read: exactly one key of `[budget]`, with two or more increasing levels.
pub fn parse(file: &Path, table: &toml::Table) -> Result<BudgetSweep, InputError> {
    let at = |key: String, msg: String| InputError::at(file, key, msg);
    let keys = || BudgetKey::ALL.map(BudgetKey::name).join(", ");
    let mut entries = table.iter();
    let (Some((name, value)), None) = (entries.next(), entries.next()) else {
        let named: Vec<&str> = table.keys().map(String::as_str).collect();
        return Err(at(
            "matrix.budget".into(),
            match named.as_slice() {
                [] => format!("name one budget key and its levels ({})", keys()),
                _ => format!(
                    "a sweep varies one key, so that each curve has one axis; it names {}",
                    named.join(" and ")
                ),
            },
        ));
    };
    let key_path = format!("matrix.budget.{name}");
    let key = BudgetKey::parse(name).ok_or_else(|| {
        at(key_path.clone(), format!("`{name}` is no budget key; keys: {}", keys()))
    })?;
    let Some(values) = value.as_array() else {
        return Err(at(key_path, "must be a list of levels, such as [4000, 8000, 16000]".into()));
    };
    if !(2..=MAX_LEVELS).contains(&values.len()) {
        return Err(at(
            key_path,
            format!("has {} levels; a sweep has 2 to {MAX_LEVELS}", values.len()),
        ));
    }
    let mut levels = Vec::new();
    for (i, v) in values.iter().enumerate() {
        levels.push(level(key, v).map_err(|msg| at(format!("{key_path}[{i}]"), msg))?);
    }
    if let Some(i) = (1..levels.len()).find(|&i| levels[i] <= levels[i - 1]) {
        return Err(at(
            format!("{key_path}[{i}]"),
            format!(
                "{} does not follow {}: write the levels in increasing order, each once",
                levels[i],
                levels[i - 1]
            ),
        ));
    }
    Ok(BudgetSweep { key, levels })
}

/// One level's value: a positive number, whole for the keys that count, within the key's range.
fn level(key: BudgetKey, v: &toml::Value) -> Result<f64, String> {
    let x = match v {
        toml::Value::Integer(i) => *i as f64,
        toml::Value::Float(f) if !key.is_integer() || f.fract() == 0.0 => *f,
        toml::Value::Float(f) => {
            return Err(format!("{f} is not a whole number of {}", key.unit()));
        }
        other => return Err(format!("{other} is not a number")),
    };
    // Whole numbers from 1; seconds and money from a thousandth (a level names its arm).
    let (min, max) = match key {
        BudgetKey::MaxSteps | BudgetKey::MaxOutputTokensPerStep => (1.0, u32::MAX as f64),
        BudgetKey::MaxTotalTokens => (1.0, 1e15),
        BudgetKey::MaxWorkingSeconds => (0.001, crate::record::design::MAX_BUDGET_SECONDS),
        BudgetKey::MaxCostUsd => (0.001, 1e9),
    };
    if !(x.is_finite() && (min..=max).contains(&x)) {
        return Err(format!("{x} is not a level from {min} to {max}"));
    }
    Ok(x)
}

/// The arms and comparisons at every level: each arm as `NAME-at-LEVEL-UNIT` (a name taken by
/// another arm is refused), each comparison between its arms at the level, named with it.
pub fn apply(
    file: &Path,
    sweep: &BudgetSweep,
    arms: Vec<Arm>,
    comparisons: Vec<Comparison>,
) -> Result<(Vec<Arm>, Vec<Comparison>), InputError> {
    let levels: Vec<BudgetLevel> =
        sweep.levels.iter().map(|&value| BudgetLevel { key: sweep.key, value }).collect();
    let name_at = |arm: &str, l: &BudgetLevel| {
        format!("{arm}-at-{}-{}", slugify(&l.value_text()), l.key.unit())
    };
    let mut swept = Vec::new();
    for arm in &arms {
        for l in &levels {
            let name = name_at(&arm.name, l);
            if arms.iter().any(|a| a.name == name) {
                return Err(InputError::at(
                    file,
                    format!("arms.{name}"),
                    "this name is taken by the budget sweep in matrix.budget; rename the arm",
                ));
            }
            let budget = Some(AtBudget { of: arm.name.clone(), level: *l });
            swept.push(Arm { name, budget, ..arm.clone() });
        }
    }
    let mut repeated = Vec::new();
    for c in &comparisons {
        for l in &levels {
            repeated.push(Comparison {
                name: format!("{} at {l}", c.name),
                control: name_at(&c.control, l),
                treatment: name_at(&c.treatment, l),
                budget: Some(AtBudget { of: c.name.clone(), level: *l }),
                ..c.clone()
            });
        }
    }
    Ok((swept, repeated))
}
