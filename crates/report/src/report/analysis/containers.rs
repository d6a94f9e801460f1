//! Whether a comparison's arms ran on the same infrastructure: the container
//! engine and limits each trial of a container task recorded. Arms whose
//! trials of one task ran under different engines or limits compare the
//! infrastructure as much as the harness: no verdict.

use super::{EffectReport, EffectVerdict};
use crate::report::load::{Row, RunData};
use std::collections::{BTreeMap, BTreeSet};

/// The analysis's rows by (model, arm).
pub(super) type Groups<'a> = BTreeMap<(u32, u32), Vec<&'a Row>>;

/// Per task, the container runs (ids in `RunData::container_runs`) of the (model, arm)'s trials.
fn runs_by_task(groups: &Groups<'_>, model: u32, arm: u32) -> BTreeMap<u32, BTreeSet<u32>> {
    let mut out: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for r in groups.get(&(model, arm)).into_iter().flatten() {
        if let Some(c) = r.container {
            out.entry(r.task).or_default().insert(c);
        }
    }
    out
}

/// Replace `e`'s verdict when a task both arms ran has trials on different
/// container runs in the two arms (a verdict that the delivery check already
/// withheld stays as it is).
pub fn check(data: &RunData, groups: &Groups<'_>, e: &mut EffectReport) {
    let ids = (data.models.get(&e.model), data.arms.get(&e.control), data.arms.get(&e.treatment));
    let (Some(m), Some(c), Some(t)) = ids else { return };
    if matches!(e.verdict, EffectVerdict::NotComparable { .. } | EffectVerdict::NotDelivered { .. })
    {
        return;
    }
    let (cr, tr) = (runs_by_task(groups, m, c), runs_by_task(groups, m, t));
    let differs = cr.iter().find(|(task, runs)| tr.get(task).is_some_and(|t| t != *runs));
    if let Some((task, runs)) = differs {
        let words = |set: &BTreeSet<u32>| {
            set.iter().map(|&i| data.container_runs.name(i)).collect::<Vec<_>>().join("; ")
        };
        e.verdict = EffectVerdict::ContainersDiffer {
            task: data.tasks.name(*task).to_string(),
            control: words(runs),
            treatment: words(&tr[task]),
        };
    }
}
