//! An interval estimate as the report states it: its bounds, its standard error, the tasks it
//! rests on and how it was made.

use super::stats;
use serde::Serialize;

/// An interval estimate, for export (NaN becomes null in JSON).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Interval {
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
    pub se: f64,
    pub n_tasks: usize,
    pub method: IntervalMethod,
}

/// How a pass rate's interval was made (written under its `name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalMethod {
    /// Tasks as the unit, Wilson on the effective sample size.
    ClusteredWilson,
    /// One task: Wilson over its trials.
    Wilson,
}

impl IntervalMethod {
    pub fn name(self) -> &'static str {
        match self {
            IntervalMethod::ClusteredWilson => "clustered_wilson",
            IntervalMethod::Wilson => "wilson",
        }
    }
}

impl From<stats::Estimate> for Interval {
    fn from(e: stats::Estimate) -> Self {
        Interval {
            mean: e.mean,
            lo: e.lo,
            hi: e.hi,
            se: e.se,
            n_tasks: e.n_tasks,
            method: IntervalMethod::ClusteredWilson,
        }
    }
}
