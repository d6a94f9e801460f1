//! What the analysis warns of and notes, as the numbers that decide them, and
//! the sentence each is written as: the terminal, the Markdown, the HTML and
//! report.json all write these words (`Display`; serialized as the sentence).

use ablate_core::experiment::matrix::GuardError;
use ablate_core::sequential::spend::Spent;
use serde::{Serialize, Serializer};
use std::fmt;

/// What an arm's trials call into question (`ArmReport::warnings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArmWarning {
    /// More than a tenth of the arm's `trials` (`stopped` of them) ended in an
    /// infrastructure error, a timeout or a budget stop.
    ManyStopped { stopped: usize, trials: usize },
    /// None of the arm's `trials` made a model call.
    NoModelCall { trials: usize },
    /// More than a tenth of the arm's `trials` (`silent` of them), not all, made no model call.
    ManyWithoutModelCall { silent: usize, trials: usize },
    /// The arm ran one task: its interval is Wilson's over that task's trials.
    OneTask,
}

/// `part` of `whole` in percent.
fn percent(part: usize, whole: usize) -> f64 {
    100.0 * part as f64 / whole as f64
}

impl fmt::Display for ArmWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ArmWarning::ManyStopped { stopped, trials } => write!(
                f,
                "{stopped} of {trials} trials ({:.0}%) ended in an error, a timeout or a budget stop: the pass rate measures the budget and the infrastructure as much as the harness",
                percent(stopped, trials)
            ),
            ArmWarning::NoModelCall { trials } => write!(
                f,
                "no trial of this arm made a model call ({trials} of {trials}): its pass rate is not the model's; look at the traces for the requests the gateway refused (an endpoint it lacks, a wrong key) and at the harness's stderr"
            ),
            ArmWarning::ManyWithoutModelCall { silent, trials } => write!(
                f,
                "{silent} of {trials} trials ({:.0}%) made no model call",
                percent(silent, trials)
            ),
            ArmWarning::OneTask => f.write_str(
                "one task: the interval is Wilson's over its trials and speaks for that task only, not for a suite",
            ),
        }
    }
}

/// What the variance decomposition could not separate (`Decomposition::notes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarianceNote {
    /// `tasks`, fewer than `fewest`: the shares have no intervals.
    NoIntervals {
        tasks: usize,
        fewest: usize,
    },
    /// One trial a cell: trial noise is inside task x configuration.
    OneTrialACell,
    OneArm,
    OneModel,
}

impl fmt::Display for VarianceNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            VarianceNote::NoIntervals { tasks, fewest } => write!(
                f,
                "no intervals under {fewest} tasks: the shares describe these {tasks} tasks"
            ),
            VarianceNote::OneTrialACell => f.write_str(
                "one trial a cell: trial noise cannot be told apart from task x configuration; both are in task x configuration",
            ),
            VarianceNote::OneArm => f.write_str("one arm: no arm component"),
            VarianceNote::OneModel => f.write_str("one model: no model or arm x model component"),
        }
    }
}

/// A comparison the analysis-time guard did not show (`Report::refused`).
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The comparison names an arm the manifest does not have.
    ArmMissing { comparison: String },
    /// Its arms run under different budgets: not shown at all.
    BudgetsDiffer(GuardError),
    /// Labelled an ablation, but its arms do not differ in exactly one component.
    NotAnAblation(GuardError),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::ArmMissing { comparison } => {
                write!(f, "{comparison}: an arm is missing from the manifest")
            }
            Refusal::BudgetsDiffer(e) => write!(f, "not shown: {e}"),
            Refusal::NotAnAblation(e) => write!(f, "not shown as an ablation: {e}"),
        }
    }
}

/// What the delivery check adds beside a comparison's verdict (`EffectReport::delivery_note`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryNote {
    /// The arms' requests were the same in every recorded field, though `components` act
    /// through the request.
    IdenticalRequests { components: Vec<String> },
    /// No delivery record, for components that act through the request.
    Unrecorded,
}

impl fmt::Display for DeliveryNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeliveryNote::IdenticalRequests { components } => write!(
                f,
                "the arms' requests reached the model identically in every recorded field, though {} acts through the request",
                components.join(", ")
            ),
            DeliveryNote::Unrecorded => f.write_str(
                "no delivery record: whether the treatment reached the model is not known",
            ),
        }
    }
}

/// report.json holds each one's sentence.
macro_rules! serialized_as_sentence {
    ($($kind:ty),*) => {$(
        impl Serialize for $kind {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    )*};
}
serialized_as_sentence!(Refusal, DeliveryNote, ArmWarning, VarianceNote);

/// report.json holds the sentence: `budget_spent` of a sequential comparison.
pub(crate) fn spent_as_sentence<S: Serializer>(
    spent: &Option<Spent>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match spent {
        Some(spent) => s.collect_str(spent),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_json_holds_the_sentences() {
        let w = [ArmWarning::ManyStopped { stopped: 3, trials: 10 }, ArmWarning::OneTask];
        let json = serde_json::to_value(w).unwrap();
        assert_eq!(json[1], w[1].to_string());
        assert!(json[0].as_str().unwrap().starts_with("3 of 10 trials (30%) ended in an error"));
        assert_eq!(
            serde_json::to_value(VarianceNote::NoIntervals { tasks: 4, fewest: 10 }).unwrap(),
            "no intervals under 10 tasks: the shares describe these 4 tasks"
        );
        let note = DeliveryNote::IdenticalRequests { components: vec!["tools".into()] };
        assert_eq!(
            serde_json::to_value(Some(note)).unwrap(),
            "the arms' requests reached the model identically in every recorded field, though tools acts through the request"
        );
        assert_eq!(
            serde_json::to_value(Refusal::ArmMissing { comparison: "-tools".into() }).unwrap(),
            "-tools: an arm is missing from the manifest"
        );
        #[derive(Serialize)]
        struct Spend {
            #[serde(serialize_with = "spent_as_sentence")]
            spent: Option<Spent>,
        }
        let spent = Some(Spent::Money { spent: 7.0, max: 7.0 });
        assert_eq!(
            serde_json::to_value(Spend { spent }).unwrap()["spent"],
            "money budget spent: $7.0000 of $7"
        );
        assert!(serde_json::to_value(Spend { spent: None }).unwrap()["spent"].is_null());
    }
}
