//! The delivery check of every comparison (the manipulation check of
//! experimental science; docs/delivery.md): a verdict is a claim about an
//! experiment, so a comparison whose treatment never reached the model, or
//! one of whose arms never reached the model at all, gets none.

use super::{EffectReport, EffectVerdict};
use crate::report::load::RunData;
use crate::report::warnings::DeliveryNote;
use ablate_core::experiment::components::Component;
use ablate_core::record::delivery::DeliveryCheck;

/// Check `e` against its arms' delivery records; replace its verdict where
/// the experiment did not happen, and note what the check shows beside it.
pub fn check(data: &RunData, e: &mut EffectReport) {
    let ids = (data.models.get(&e.model), data.arms.get(&e.control), data.arms.get(&e.treatment));
    let (Some(m), Some(c), Some(t)) = ids else { return };
    let (dc, dt) = (data.delivery.get(&(m, c)), data.delivery.get(&(m, t)));
    // An imported run's sources may not count model calls (docs/import.md).
    if data.manifest.imported.is_none() {
        for (arm, d) in [(&e.control, dc), (&e.treatment, dt)] {
            if d.is_some_and(|d| d.trials > 0 && d.reached_model == 0) {
                e.verdict = EffectVerdict::NotComparable { arm: arm.clone() };
                (e.delta, e.lo, e.hi, e.p_value, e.p_adjusted) =
                    (f64::NAN, f64::NAN, f64::NAN, f64::NAN, None);
                (e.p_mid, e.p_exact) = (f64::NAN, f64::NAN);
                e.excl_infra = None;
                return;
            }
        }
    }
    e.delivery =
        DeliveryCheck::of(dc.and_then(|d| d.record.as_ref()), dt.and_then(|d| d.record.as_ref()));
    e.delivery_note = match &e.delivery {
        DeliveryCheck::NotDelivered { fields } => {
            e.verdict = EffectVerdict::NotDelivered { fields: fields.clone() };
            None
        }
        DeliveryCheck::Identical if acts_on_requests(&e.components) => {
            Some(DeliveryNote::IdenticalRequests { components: e.components.clone() })
        }
        DeliveryCheck::Unrecorded if acts_on_requests(&e.components) => {
            Some(DeliveryNote::Unrecorded)
        }
        DeliveryCheck::Unrecorded => None,
        DeliveryCheck::Identical | DeliveryCheck::Delivered { .. } => None,
    };
}

/// Whether a change of these components should show in the requests: a
/// builtin component says where it acts; an external harness's components
/// may act anywhere, so they are taken to act on the requests.
fn acts_on_requests(components: &[String]) -> bool {
    components.iter().any(|name| Component::parse(name).map_or(true, Component::model_facing))
}
