//! A step of the analysis: a sequential run's comparisons, replayed from the
//! records by the runner's own rule, with the estimate after the stop.

use super::*;

/// A sequential run's comparisons: the decisions replayed from the records
/// in the run's task order, by the runner's own rule (`ablate_core::sequential`);
/// each effect's interval, level, verdict and method become the confidence
/// sequence's at the stopping time (the fixed-design inference is not valid
/// after stopping on the data, so none of it is shown).
pub(super) fn effects(
    data: &RunData,
    order: &[String],
    ablations: &mut [EffectReport],
    combined: &mut [EffectReport],
) {
    let exp = &data.manifest.experiment;
    let design = exp.sequential.clone().unwrap_or_default();
    let models: Vec<String> = data.manifest.models.iter().map(|m| m.name.clone()).collect();
    let models = if models.is_empty() { data.models.list.clone() } else { models };
    let Some(mut monitor) = data.manifest.sequential_monitor(&models, true) else { return };
    let primary = super::primary::Primary::of(data);
    record_outcomes(data, &primary, &mut monitor);
    let budget_spent = budget_spent(data, &design, &mut monitor);
    let position = order.iter().enumerate().map(|(i, t)| (t.as_str(), i)).collect();
    let replay =
        Replay { data, order, design: &design, monitor: &monitor, primary, position, budget_spent };
    for effect in ablations.iter_mut().chain(combined.iter_mut()) {
        replay.apply(effect);
    }
}

/// Every final record's outcome into the replayed monitor, in the records' order.
fn record_outcomes(
    data: &RunData,
    primary: &super::primary::Primary,
    monitor: &mut ablate_core::sequential::Monitor,
) {
    for r in data.trials.iter().filter(|r| r.status.is_final()) {
        let score = primary.value(data, r);
        monitor.record_outcome(
            data.tasks.name(r.task),
            data.arms.name(r.arm),
            data.models.name(r.model),
            r.repeat,
            r.status.outcome(r.attempt, (!score.is_nan()).then_some(score)),
        );
    }
}

/// What every comparison of a sequential run reads: the records, the run's
/// task order, the replayed monitor and the budget it spent.
struct Replay<'a> {
    data: &'a RunData,
    order: &'a [String],
    design: &'a ablate_core::experiment::config::SequentialDesign,
    monitor: &'a ablate_core::sequential::Monitor,
    primary: super::primary::Primary,
    /// Each task's place in the run's order.
    position: std::collections::HashMap<&'a str, usize>,
    budget_spent: Option<ablate_core::sequential::spend::Spent>,
}

impl Replay<'_> {
    /// One effect's figures, verdict and sequence from its comparison's
    /// sequence at the stopping time (unchanged without one).
    fn apply(&self, effect: &mut EffectReport) {
        use ablate_core::sequential::Decision;
        let data = self.data;
        let Some((spec, seq)) = self
            .monitor
            .comparisons()
            .find(|(c, _)| c.name == effect.name && c.model == effect.model)
        else {
            return;
        };
        let used = seq.tasks();
        let all_in = seq.decision == Decision::Undecided && used == self.order.len();
        // The interval is always the inference on tasks like these; with every task in, the
        // suite's own mean as run is a separate, labelled description.
        let interval = seq.interval(false);
        let these_tasks = all_in.then(|| seq.interval(true)).map(|i| (i.lo, i.hi));
        let ((control_rate, nc), (treatment_rate, nt)) = (
            self.rate(&effect.model, used, &effect.control),
            self.rate(&effect.model, used, &effect.treatment),
        );
        effect.control_rate = control_rate;
        effect.treatment_rate = treatment_rate;
        effect.delta = seq.mean();
        effect.lo = interval.lo;
        effect.hi = interval.hi;
        effect.p_value = f64::NAN;
        (effect.p_mid, effect.p_exact) = (f64::NAN, f64::NAN);
        effect.p_adjusted = None;
        effect.interval_level = 1.0 - spec.alpha;
        effect.method = stats::InferenceMethod::BettingCs { without_replacement: false };
        effect.estimand = ESTIMAND_TASKS_LIKE_THESE;
        effect.scope = "tasks".into();
        effect.n_tasks = used;
        effect.mde = f64::NAN;
        effect.excl_infra = None;
        let projected_tasks = (seq.decision == Decision::Undecided)
            .then(|| seq.projected_tasks(PROJECTION_CAP))
            .flatten();
        effect.verdict = self.verdict(effect, seq, projected_tasks);
        effect.sequential = Some(SequentialEffect {
            decided_after_tasks: seq.decided_at,
            tasks: used,
            trials: nc + nt,
            projected_tasks,
            history: seq.history(),
            delta_bias_reduced: bias_reduced_delta(seq, spec.alpha, self.monitor.max_tasks(), data),
            these_tasks,
            budget_spent: self.budget_spent.filter(|_| seq.decision == Decision::Undecided),
        });
    }

    /// An arm's rate over the first `used` tasks of the order (the mean of its
    /// tasks' means, on `model`'s final trials), with the trials it took.
    fn rate(&self, model: &str, used: usize, arm: &str) -> (f64, usize) {
        let data = self.data;
        let in_sequence = |r: &&Row| {
            data.models.name(r.model) == model
                && self.position.get(data.tasks.name(r.task)).is_some_and(|&k| k < used)
                && r.status.is_final()
        };
        let rows: Vec<&Row> = data
            .trials
            .iter()
            .filter(in_sequence)
            .filter(|r| data.arms.name(r.arm) == arm)
            .collect();
        let per_task = by_task(&rows, data.tasks.list.len(), |r| self.primary.value(data, r));
        let means: Vec<f64> =
            per_task.iter().filter(|t| !t.is_empty()).map(|t| stats::mean(t)).collect();
        (stats::mean(&means), rows.len())
    }

    /// The verdict of an effect's sequence: its decision, or why it stopped undecided.
    fn verdict(
        &self,
        effect: &EffectReport,
        seq: &ablate_core::sequential::Sequence,
        projected_tasks: Option<usize>,
    ) -> EffectVerdict {
        use ablate_core::sequential::Decision;
        let used = seq.tasks();
        match seq.decision {
            Decision::Helps => EffectVerdict::Helps { one_task: false },
            Decision::Hurts => EffectVerdict::Hurts { one_task: false },
            Decision::Equivalent => EffectVerdict::Equivalent {
                margin: self.data.manifest.experiment.margin.unwrap_or(f64::NAN),
                one_task: false,
            },
            Decision::Undecided if self.monitor.stalled_unscorable(&effect.name, &effect.model) => {
                self.primary_unusable(effect)
            }
            Decision::Undecided
                if let Some(k) = self.monitor.stalled_at(&effect.name, &effect.model) =>
            {
                EffectVerdict::InfrastructureStopped {
                    task: self.order[k].clone(),
                    retries: self.design.retries(),
                }
            }
            Decision::Undecided if used == 0 => EffectVerdict::NotEnoughData,
            Decision::Undecided => EffectVerdict::UndecidedAtBudget {
                projected_tasks,
                tasks: used,
                every_task: used == self.order.len(),
            },
        }
    }

    /// The verdict of a comparison that stalled on unscorable trials: how many
    /// of its arms' values (infrastructure errors left out) are missing or outside [0, 1].
    fn primary_unusable(&self, effect: &EffectReport) -> EffectVerdict {
        let data = self.data;
        let values = |arm: &str| -> Vec<Vec<f64>> {
            let rows = data.trials.iter().filter(|r| {
                data.arms.name(r.arm) == arm
                    && data.models.name(r.model) == effect.model
                    && !r.status.is_infrastructure_error()
            });
            vec![rows.map(|r| self.primary.value(data, r)).collect()]
        };
        let (c, t) = (values(&effect.control), values(&effect.treatment));
        let u = super::primary::unusable([&c, &t])
            .unwrap_or(super::primary::Unusable { missing: 0, outside: 0 });
        EffectVerdict::PrimaryUnusable {
            primary: self.primary.name().to_string(),
            missing: u.missing,
            outside: u.outside,
        }
    }
}

/// The experiment's budget of money or running time the records spent, as
/// the runner counts it (`ablate_core::sequential::spend`: every final record's
/// cost and the union of their spans, into the run's own rule), read again
/// from trials.jsonl only when the design has such a budget.
fn budget_spent(
    data: &RunData,
    design: &ablate_core::experiment::config::SequentialDesign,
    monitor: &mut ablate_core::sequential::Monitor,
) -> Option<ablate_core::sequential::spend::Spent> {
    if design.max_cost_usd.is_none() && design.max_seconds.is_none() {
        return None;
    }
    ablate_core::record::jsonl::for_each::<ablate_core::record::TrialRecord>(
        &data.dir.join("trials.jsonl"),
        |r| ablate_core::record::feed_spend(monitor, &r),
    )
    .ok()?;
    monitor.spent()
}

/// The bias-reduced estimate of a sequential comparison (`report::stopping`):
/// the differences its sequence took, resampled through its rule (a decided
/// comparison up to the design's budget of tasks, an undecided one up to the
/// tasks it took).
fn bias_reduced_delta(
    seq: &ablate_core::sequential::Sequence,
    alpha: f64,
    max_tasks: usize,
    data: &RunData,
) -> f64 {
    use ablate_core::sequential::Decision;
    let rule = crate::report::stopping::StoppingRule {
        alpha,
        margin: data.manifest.experiment.margin,
        sizing: ablate_core::sequential::bets_for(max_tasks),
        horizon: if seq.decision == Decision::Undecided { seq.tasks() } else { max_tasks },
    };
    crate::report::stopping::bias_reduced(seq.differences(), &rule, data.manifest.experiment.seed)
}
