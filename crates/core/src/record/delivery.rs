//! The delivery record of a trial (the manipulation check of experimental
//! science): for each model-facing field of its model calls, the distinct
//! values the harness *asked* for and the distinct values that *reached the
//! model*. The report compares two arms field by field: arms that asked
//! differently and reached the model identically were not given different
//! treatments, whatever their pass rates say (docs/delivery.md).
//!
//! Asked and reached are compared only with their own kind across arms, never
//! with each other: an asked value is what the harness sent in its API's own
//! terms, a reached one what the provider's request carried.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// A field the call did not carry (asked), or that did not reach the model (reached).
pub(crate) const NOT_SET: &str = "(not set)";
/// A field that reached the model as the experiment fixes it, whatever was asked.
pub(crate) const FIXED: &str = "(fixed by the experiment)";
/// Distinct values kept per field and side; beyond, `overflow` is set.
pub const MAX_VALUES: usize = 32;
/// Longest value kept as its JSON text; longer ones are kept as a digest.
pub(crate) const MAX_SHOWN: usize = 80;

/// Per model-facing field of a trial's model calls, what was asked and what reached the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub fields: BTreeMap<String, FieldSeen>,
}

/// The distinct values of one field over a trial's (or an arm's) model calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FieldSeen {
    pub asked: BTreeSet<String>,
    pub reached: BTreeSet<String>,
    /// More than MAX_VALUES distinct values on a side: the sets are incomplete.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overflow: bool,
}

impl FieldSeen {
    fn add(set: &mut BTreeSet<String>, overflow: &mut bool, v: String) {
        if set.len() < MAX_VALUES || set.contains(&v) {
            set.insert(v);
        } else {
            *overflow = true;
        }
    }
}

impl Delivery {
    /// One call's `field`: the value asked (None: not in the request) and the value that reached
    /// the model (None: it did not).
    pub fn note(&mut self, field: &str, asked: Option<String>, reached: Option<String>) {
        let f = self.fields.entry(field.to_string()).or_default();
        let asked = asked.unwrap_or_else(|| NOT_SET.to_string());
        let reached = reached.unwrap_or_else(|| NOT_SET.to_string());
        FieldSeen::add(&mut f.asked, &mut f.overflow, asked);
        FieldSeen::add(&mut f.reached, &mut f.overflow, reached);
    }

    /// Another trial's (or call's) record added to this one.
    pub fn merge(&mut self, other: &Delivery) {
        for (field, seen) in &other.fields {
            let f = self.fields.entry(field.clone()).or_default();
            f.overflow |= seen.overflow;
            for v in &seen.asked {
                FieldSeen::add(&mut f.asked, &mut f.overflow, v.clone());
            }
            for v in &seen.reached {
                FieldSeen::add(&mut f.reached, &mut f.overflow, v.clone());
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// A value as the record keeps it: its JSON text when short, else its size and digest.
pub fn shown(v: &Value) -> String {
    match v {
        Value::String(s) if s.len() <= MAX_SHOWN => s.clone(),
        _ => text_shown(&v.to_string()),
    }
}

/// A text as the record keeps it: as it is when short, else its size and digest.
pub(crate) fn text_shown(s: &str) -> String {
    if s.len() <= MAX_SHOWN {
        return s.to_string();
    }
    let digest = crate::digest::sha256_hex(s.as_bytes());
    format!("{} bytes, sha256:{}", s.len(), &digest[..16])
}

/// Why two arms' records show the treatment did not reach the model, or that
/// they cannot tell: the outcome of the check of one comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeliveryCheck {
    /// Some field the arms asked differently also reached the model differently.
    Delivered { fields: Vec<String> },
    /// The arms asked alike and reached the model alike in every recorded field.
    Identical,
    /// The arms asked differently in these fields and reached the model
    /// identically in all of them: the treatment never reached the model.
    NotDelivered { fields: Vec<Undelivered> },
    /// No delivery record in one arm or both (a builtin loop of an older
    /// version, an import): nothing can be said.
    Unrecorded,
}

/// A field the arms asked differently that reached the model identically.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Undelivered {
    pub field: String,
    pub control: Vec<String>,
    pub treatment: Vec<String>,
    /// What reached the model in both arms.
    pub reached: Vec<String>,
}

impl DeliveryCheck {
    /// Compare two arms' records, field by field.
    pub fn of(control: Option<&Delivery>, treatment: Option<&Delivery>) -> DeliveryCheck {
        let (Some(c), Some(t)) = (control, treatment) else {
            return DeliveryCheck::Unrecorded;
        };
        let empty = FieldSeen::default();
        let names: BTreeSet<&String> = c.fields.keys().chain(t.fields.keys()).collect();
        let (mut delivered, mut undelivered) = (Vec::new(), Vec::new());
        for name in names {
            let a = c.fields.get(name).unwrap_or(&empty);
            let b = t.fields.get(name).unwrap_or(&empty);
            // Incomplete sets cannot show two arms alike.
            let reached_alike = a.reached == b.reached && !a.overflow && !b.overflow;
            if a.asked == b.asked && reached_alike {
                continue;
            }
            if reached_alike {
                undelivered.push(Undelivered {
                    field: name.clone(),
                    control: a.asked.iter().cloned().collect(),
                    treatment: b.asked.iter().cloned().collect(),
                    reached: a.reached.iter().cloned().collect(),
                });
            } else {
                delivered.push(name.clone());
            }
        }
        match (delivered.is_empty(), undelivered.is_empty()) {
            (true, true) => DeliveryCheck::Identical,
            (true, false) => DeliveryCheck::NotDelivered { fields: undelivered },
            // One field reached the model differently: the arms were treated differently.
            (false, _) => DeliveryCheck::Delivered { fields: delivered },
        }
    }
}

impl std::fmt::Display for Undelivered {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let list = |v: &[String]| v.join(", ");
        write!(
            f,
            "{} (asked {} vs {}; reached the model as {} in both arms)",
            self.field,
            list(&self.control),
            list(&self.treatment),
            list(&self.reached)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(field: &str, asked: &str, reached: Option<&str>) -> Delivery {
        let mut d = Delivery::default();
        d.note(field, Some(asked.into()), reached.map(str::to_string));
        d
    }

    #[test]
    fn a_setting_dropped_in_both_arms_is_not_delivered() {
        let c = one("reasoning", "effort=low", None);
        let t = one("reasoning", "effort=high", None);
        let check = DeliveryCheck::of(Some(&c), Some(&t));
        let DeliveryCheck::NotDelivered { fields } = &check else { panic!("{check:?}") };
        assert_eq!(fields.len(), 1);
        assert_eq!(
            fields[0].to_string(),
            "reasoning (asked effort=low vs effort=high; reached the model as (not set) in both arms)"
        );
    }

    #[test]
    fn a_setting_forwarded_is_delivered_and_alike_arms_are_identical() {
        let c = one("reasoning", "effort=low", Some("effort=low"));
        let t = one("reasoning", "effort=high", Some("effort=high"));
        assert_eq!(
            DeliveryCheck::of(Some(&c), Some(&t)),
            DeliveryCheck::Delivered { fields: vec!["reasoning".into()] }
        );
        assert_eq!(DeliveryCheck::of(Some(&c), Some(&c.clone())), DeliveryCheck::Identical);
        assert_eq!(DeliveryCheck::of(None, Some(&c)), DeliveryCheck::Unrecorded);
    }

    #[test]
    fn one_field_delivered_outweighs_another_dropped() {
        // A harness setting that changes the prompt and a dropped temperature:
        // the arms did reach the model differently.
        let mut c = one("temperature", "0.2", Some(FIXED));
        c.note("system", Some("a".into()), Some("a".into()));
        let mut t = one("temperature", "0.9", Some(FIXED));
        t.note("system", Some("b".into()), Some("b".into()));
        assert_eq!(
            DeliveryCheck::of(Some(&c), Some(&t)),
            DeliveryCheck::Delivered { fields: vec!["system".into()] }
        );
    }

    #[test]
    fn overflowing_sets_never_count_as_alike() {
        let mut c = Delivery::default();
        let mut t = Delivery::default();
        for i in 0..=MAX_VALUES {
            c.note("x", Some(format!("a{i}")), Some(format!("r{i}")));
            t.note("x", Some(format!("b{i}")), Some(format!("r{i}")));
        }
        assert!(c.fields["x"].overflow);
        assert_eq!(c.fields["x"].asked.len(), MAX_VALUES);
        assert_eq!(
            DeliveryCheck::of(Some(&c), Some(&t)),
            DeliveryCheck::Delivered { fields: vec!["x".into()] }
        );
    }

    #[test]
    fn long_values_are_kept_as_size_and_digest() {
        let long = "x".repeat(200);
        // sha256 of 200 'x' bytes, from `printf 'x%.0s' $(seq 200) | sha256sum`.
        assert_eq!(text_shown(&long), "200 bytes, sha256:aa20c23e32018340");
        assert_eq!(shown(&serde_json::json!(0.5)), "0.5");
        assert_eq!(shown(&serde_json::json!("high")), "high");
    }
}
