//! What is recorded of each trial a run plans, kept in 20 bytes a planned
//! trial however many records the folder holds: the sorted plan keys of the
//! trials it plans (a merged folder of some shards plans fewer than its
//! order), their trial ids as the sorted numbers they spell, and per id the
//! highest attempt recorded with a bit set once a final record exists. Read
//! line by line from trials.jsonl and attempts.jsonl, so a resumed run of a
//! million trials keeps ids and counts, not records.

use crate::plan::TrialSpec;
use crate::record::{AttemptStart, RecordKey, jsonl, trial_number};
use std::path::Path;

const FINAL: u32 = 1 << 31;

pub(super) struct Ledger {
    plan_keys: Vec<u64>,
    ids: Vec<u64>,
    known: Vec<u32>,
}

impl Ledger {
    /// `plan_keys` sorted; `ids` in any order.
    pub(super) fn new(plan_keys: Vec<u64>, mut ids: Vec<u64>) -> Ledger {
        ids.sort_unstable();
        ids.dedup();
        let known = vec![0u32; ids.len()];
        Ledger { plan_keys, ids, known }
    }

    pub(super) fn plans(&self, key: u64) -> bool {
        self.plan_keys.binary_search(&key).is_ok()
    }

    fn position(&self, id: &str) -> Option<usize> {
        self.ids.binary_search(&trial_number(id)).ok()
    }

    fn raise(&mut self, p: usize, attempt: u32, is_final: bool) {
        let k = &mut self.known[p];
        *k = (*k & !FINAL).max(attempt.min(FINAL - 1))
            | (*k & FINAL)
            | if is_final { FINAL } else { 0 };
    }

    pub(super) fn planned(&self) -> usize {
        self.plan_keys.len()
    }

    /// Planned trials with a final record.
    pub(super) fn finished(&self) -> usize {
        self.known.iter().filter(|&&k| k & FINAL != 0).count()
    }

    /// The attempt to run next of a planned trial; None when it has a final
    /// record (or is not this run's).
    pub(super) fn next_attempt(&self, spec: &TrialSpec) -> Option<u32> {
        let k = self.known[self.position(&spec.id)?];
        (self.plans(spec.plan_key()) && k & FINAL == 0).then_some((k & !FINAL) + 1)
    }

    /// Note every record of `trials.jsonl`; the number of records outside the
    /// plan. `retries`: a sequential design's re-runs of a trial whose attempt
    /// ended in an infrastructure error; such a record, within them, leaves its
    /// trial to run again.
    pub(super) fn read_records(
        &mut self,
        trials: &Path,
        retries: Option<u32>,
    ) -> std::io::Result<usize> {
        let mut unplanned = 0usize;
        jsonl::for_each::<RecordKey>(trials, |r| {
            let again = r.status.is_infrastructure_error()
                && retries.is_some_and(|n| crate::sequential::runs_again(r.attempt, n));
            match self.position(&r.trial_id).filter(|_| self.plans(r.plan_key())) {
                Some(p) => self.raise(p, r.attempt, r.status.is_final() && !again),
                None => unplanned += 1,
            }
        })?;
        Ok(unplanned)
    }

    /// Attempts started after the last recorded one of their trial: they
    /// never finished. (Attempts are numbered in the order they start, each
    /// recorded before the next.) They count as attempts from now on.
    pub(super) fn take_unfinished(
        &mut self,
        attempts: &Path,
    ) -> std::io::Result<Vec<AttemptStart>> {
        let mut starts = Vec::new();
        jsonl::for_each::<AttemptStart>(attempts, |a| {
            if let Some(p) = self.position(&a.trial_id)
                && a.attempt > self.known[p] & !FINAL
            {
                starts.push(a);
            }
        })?;
        for a in &starts {
            if let Some(p) = self.position(&a.trial_id) {
                self.raise(p, a.attempt, false);
            }
        }
        Ok(starts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_attempt_and_the_final_mark_are_kept_apart() {
        let mut l = Ledger::new(vec![], vec![7, 3, 7]);
        assert_eq!(l.ids, vec![3, 7], "sorted, once each");
        l.raise(0, 2, false);
        l.raise(0, 1, true);
        assert_eq!(
            (l.known[0] & !FINAL, l.known[0] & FINAL != 0),
            (2, true),
            "a lower final attempt keeps the highest attempt"
        );
        l.raise(1, 5, false);
        l.raise(1, 4, false);
        assert_eq!(l.known[1], 5);
        assert_eq!(l.finished(), 1);
    }
}
