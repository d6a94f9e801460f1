//! The outcome the verdicts decide on (`[experiment] primary`): the pass rate
//! by default, or a score in [0, 1] every trial records.

use crate::report::load::{Row, RunData};

/// The primary outcome of a run, written under its `name`.
#[derive(Debug, Clone, PartialEq)]
pub enum Primary {
    PassRate,
    /// The fraction of a task's tests that pass.
    TestsPassed,
    /// A recorded metric (`reward.KEY`, `harness.NAME`); `id` its name's id
    /// among the run's metrics (None: no trial recorded it).
    Metric {
        name: String,
        id: Option<u32>,
    },
}

impl Primary {
    pub fn of(data: &RunData) -> Primary {
        match data.manifest.experiment.primary.as_deref() {
            None | Some("pass_rate") => Primary::PassRate,
            Some("tests_passed") => Primary::TestsPassed,
            Some(name) => {
                Primary::Metric { name: name.to_string(), id: data.metric_names.get(name) }
            }
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Primary::PassRate => "pass_rate",
            Primary::TestsPassed => "tests_passed",
            Primary::Metric { name, .. } => name,
        }
    }

    /// A trial's value (NaN: it recorded none).
    pub fn value(&self, data: &RunData, r: &Row) -> f64 {
        match self {
            Primary::PassRate => r.passed(),
            Primary::TestsPassed => r.test_fraction(),
            Primary::Metric { id, .. } => id
                .and_then(|id| data.metrics.get(&r.ordinal)?.iter().find(|(k, _)| *k == id))
                .map_or(f64::NAN, |(_, v)| *v),
        }
    }
}

/// Why a comparison's primary values cannot be decided on: trials without a
/// value, or with one outside [0, 1] (the inference is for scores in [0, 1]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unusable {
    pub missing: usize,
    pub outside: usize,
}

/// [`Unusable`] when some value of either arm is missing or outside [0, 1].
pub(crate) fn unusable(arms: [&[Vec<f64>]; 2]) -> Option<Unusable> {
    let values = arms.into_iter().flatten().flatten();
    let (missing, outside) = values.fold((0, 0), |(m, o), &v| {
        if v.is_nan() {
            (m + 1, o)
        } else if !(0.0..=1.0).contains(&v) {
            (m, o + 1)
        } else {
            (m, o)
        }
    });
    (missing + outside > 0).then_some(Unusable { missing, outside })
}

/// The primary outcome in a sentence, when the verdicts decide on something
/// other than the pass rate.
pub fn note(r: &super::Report) -> Option<String> {
    (r.primary != "pass_rate").then(|| {
        format!(
            "primary outcome: {}: every effect below (delta, control and treatment rates, interval, verdict) is on it, a score in [0, 1]; the arms' pass rates are shown as always",
            r.primary
        )
    })
}
