//! Whether a comparison's arms ran on the same infrastructure: the container
//! engine and limits each trial of a container task recorded. Arms whose
//! trials of one task ran under different engines or limits compare the
//! infrastructure as much as the harness: no verdict.

use super::{EffectReport, EffectVerdict};
use crate::report::load::{Row, RunData};
use std::collections::{BTreeMap, BTreeSet};

/// The analysis's rows by (model, arm).
pub(super) type Groups<'a> = BTreeMap<(u32, u32), Vec<&'a Row>>;

/// Per task, what the (model, arm)'s trials ran on, as the comparison compares it.
fn runs_by_task(
    data: &RunData,
    groups: &Groups<'_>,
    (model, arm): (u32, u32),
    by_design: &[String],
) -> BTreeMap<u32, BTreeSet<String>> {
    let mut out: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    for r in groups.get(&(model, arm)).into_iter().flatten() {
        if let Some(c) = r.container {
            let run = &data.container_run_values[c as usize];
            out.entry(r.task).or_default().insert(run.describe_except(by_design));
        }
    }
    out
}

/// Replace `e`'s verdict when a task both arms ran has trials on different
/// container runs in the two arms (a verdict that the delivery check already
/// withheld stays as it is). Limits the comparison's arms set differently (an ablation of
/// `resources.cpus`, say) are its treatment, not a difference of infrastructure.
pub fn check(data: &RunData, groups: &Groups<'_>, e: &mut EffectReport) {
    let ids = (data.models.get(&e.model), data.arms.get(&e.control), data.arms.get(&e.treatment));
    let (Some(m), Some(c), Some(t)) = ids else { return };
    if matches!(e.verdict, EffectVerdict::NotComparable { .. } | EffectVerdict::NotDelivered { .. })
    {
        return;
    }
    let cr = runs_by_task(data, groups, (m, c), &e.components);
    let tr = runs_by_task(data, groups, (m, t), &e.components);
    let differs = cr.iter().find(|(task, runs)| tr.get(task).is_some_and(|t| t != *runs));
    if let Some((task, runs)) = differs {
        let words = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join("; ");
        e.verdict = EffectVerdict::ContainersDiffer {
            task: data.tasks.name(*task).to_string(),
            control: words(runs),
            treatment: words(&tr[task]),
        };
    }
}
