//! The sequential design's budgets of money and running time
//! (`experiment.max_cost_usd`, `experiment.max_seconds`): what the recorded
//! trials spent.
//!
//! Counted from the final records alone: money is the sum of their costs,
//! running time the length of the union of their `[started_at, finished_at]`
//! spans. So a resumed run counts what an uninterrupted one with the same
//! records did, time when no trial ran (between a kill and the resume) is
//! not counted, and trials running side by side count once. Trials under
//! way count when they finish: once a budget is spent no trial starts, and
//! the ones under way finish, so a run ends at most about one trial's
//! length (or cost) past its budget.

/// A budget of the whole experiment that the recorded trials have spent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Spent {
    /// `spent` US dollars of the `max` allowed.
    Money { spent: f64, max: f64 },
    /// `spent` seconds of running time of the `max` allowed.
    Time { spent: f64, max: f64 },
}

impl std::fmt::Display for Spent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Spent::Money { spent, max } => write!(f, "money budget spent: ${spent:.4} of ${max}"),
            Spent::Time { spent, max } => {
                write!(f, "time budget spent: {spent:.0} s of running time of {max} s")
            }
        }
    }
}

/// What the recorded trials spent, against the budgets.
#[derive(Debug, Clone, Default)]
pub struct Spend {
    max_cost_usd: Option<f64>,
    max_seconds: Option<f64>,
    cost_usd: f64,
    /// Disjoint spans of running time, sorted (seconds on any one clock).
    spans: Vec<(f64, f64)>,
    /// The spans' total length.
    seconds: f64,
}

impl Spend {
    pub fn new(max_cost_usd: Option<f64>, max_seconds: Option<f64>) -> Spend {
        Spend { max_cost_usd, max_seconds, ..Spend::default() }
    }

    /// A final record: it ran from `started` to `finished` (seconds) and cost
    /// `cost_usd` (None: no prices). A span that does not read (not finite,
    /// or ending before it starts) adds no time.
    pub fn add(&mut self, started: f64, finished: f64, cost_usd: Option<f64>) {
        if let Some(c) = cost_usd.filter(|c| c.is_finite() && *c > 0.0) {
            self.cost_usd += c;
        }
        if !(started.is_finite() && finished.is_finite() && finished >= started) {
            return;
        }
        // The spans this one touches are merged with it into one.
        let first = self.spans.partition_point(|&(_, hi)| hi < started);
        let end = self.spans.partition_point(|&(lo, _)| lo <= finished);
        let (mut lo, mut hi) = (started, finished);
        for &(a, b) in &self.spans[first..end] {
            lo = lo.min(a);
            hi = hi.max(b);
            self.seconds -= b - a;
        }
        self.seconds += hi - lo;
        self.spans.splice(first..end, [(lo, hi)]);
    }

    pub fn cost_usd(&self) -> f64 {
        self.cost_usd
    }

    /// The running time the records cover, in seconds.
    pub fn seconds(&self) -> f64 {
        self.seconds
    }

    /// The budget spent, if one is (money first).
    pub fn spent(&self) -> Option<Spent> {
        if let Some(max) = self.max_cost_usd
            && self.cost_usd >= max
        {
            return Some(Spent::Money { spent: self.cost_usd, max });
        }
        if let Some(max) = self.max_seconds
            && self.seconds >= max
        {
            return Some(Spent::Time { spent: self.seconds, max });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The union's length against a hand computation: [0, 10] ∪ [5, 12] ∪
    /// [20, 25] ∪ [30, 31] ∪ [24, 30.5] = [0, 12] ∪ [20, 31] = 12 + 11 = 23 s.
    #[test]
    fn running_time_is_the_union_of_the_spans() {
        let mut s = Spend::new(None, Some(23.0));
        for (a, b) in [(20.0, 25.0), (0.0, 10.0), (30.0, 31.0), (5.0, 12.0)] {
            s.add(a, b, None);
            assert!(s.spent().is_none());
        }
        // [0,12] ∪ [20,25] ∪ [30,31]: 12 + 5 + 1 = 18.
        assert_eq!(s.seconds(), 18.0);
        s.add(24.0, 30.5, None);
        assert_eq!(s.seconds(), 23.0);
        assert_eq!(s.spans, vec![(0.0, 12.0), (20.0, 31.0)]);
        assert_eq!(s.spent(), Some(Spent::Time { spent: 23.0, max: 23.0 }));
        // A span inside another adds nothing; a reversed or unreadable one adds nothing.
        s.add(1.0, 2.0, None);
        s.add(50.0, 40.0, None);
        s.add(f64::NAN, 60.0, None);
        assert_eq!(s.seconds(), 23.0);
        // A span covering everything replaces it: [-1, 40] = 41 s.
        s.add(-1.0, 40.0, None);
        assert_eq!((s.seconds(), s.spans.len()), (41.0, 1));
    }

    #[test]
    fn money_is_the_sum_of_the_costs() {
        let mut s = Spend::new(Some(1.0), None);
        s.add(0.0, 1.0, Some(0.25));
        s.add(0.0, 1.0, None);
        s.add(0.0, 1.0, Some(f64::NAN));
        s.add(0.0, 1.0, Some(0.5));
        assert!(s.spent().is_none());
        s.add(0.0, 1.0, Some(0.25));
        assert_eq!(s.spent(), Some(Spent::Money { spent: 1.0, max: 1.0 }));
        assert_eq!(Spend::new(None, None).spent(), None);
    }
}
