//! Known values of the sequential rule. The sequences' expected ends come from
//! `scripts/betting_cs_reference.py` (the formulas written again in plain
//! Python: products, a grid scan and halving), printed by running it.

use super::betting::{Bets, BettingCs};
use super::*;

const D1: [f64; 20] = [
    0.2, 0.1, 0.3, -0.1, 0.2, 0.4, 0.0, 0.2, 0.1, 0.3, 0.2, 0.1, 0.3, 0.2, 0.0, 0.2, 0.1, 0.3, 0.2,
    0.2,
];
const D2: [f64; 25] = [
    1., 0., 0., 1., 0., -1., 1., 0., 1., 1., 0., 0., 1., 0., 1., 1., 0., 1., 0., 1., 1., 0., 1.,
    1., 0.,
];

fn x(d: &[f64]) -> Vec<f64> {
    d.iter().map(|d| (d + 1.0) / 2.0).collect()
}

/// The running intersection after t observations, against the reference's (lo, hi) for each listed t.
fn check(
    xs: &[f64],
    alpha: f64,
    sizing: Bets,
    population: Option<usize>,
    expected: &[(usize, f64, f64)],
) {
    let mut cs = BettingCs::new(alpha, sizing, population, &[], true);
    for &v in xs {
        cs.push(v);
    }
    for &(t, lo, hi) in expected {
        let (l, h) = cs.history()[t - 1];
        assert!(
            (l - lo).abs() < 1e-7 && (h - hi).abs() < 1e-7,
            "t = {t}: [{l:.9}, {h:.9}], reference [{lo:.9}, {hi:.9}]"
        );
    }
    // The untracked form recomputes the same running intersection.
    let mut plain = BettingCs::new(alpha, sizing, population, &[], false);
    for &v in xs {
        plain.push(v);
    }
    let (l, h) = plain.interval();
    let (el, eh) = cs.interval();
    assert!((l - el).abs() < 1e-12 && (h - eh).abs() < 1e-12);
}

#[test]
fn sequences_match_the_reference() {
    check(
        &x(&D1),
        0.05,
        Bets::Uniform,
        None,
        &[
            (1, 0.0, 1.0),
            (5, 0.178083147, 0.866108633),
            (10, 0.307634971, 0.782760768),
            (20, 0.416865164, 0.708151585),
        ],
    );
    check(
        &x(&D2),
        0.01,
        Bets::Uniform,
        None,
        &[
            (1, 0.0, 1.0),
            (5, 0.139648865, 1.0),
            (10, 0.258105375, 0.976268729),
            (25, 0.475448278, 0.901921466),
        ],
    );
}

#[test]
fn without_replacement_matches_the_reference_and_ends_at_the_population_mean() {
    check(
        &x(&D1),
        0.05,
        Bets::Uniform,
        Some(20),
        &[
            (1, 0.03, 0.98),
            (5, 0.223160901, 0.839083689),
            (10, 0.381053281, 0.728545229),
            (20, 0.5875, 0.5875),
        ],
    );
    check(
        &x(&D2),
        0.05,
        Bets::Uniform,
        Some(30),
        &[
            (1, 0.033333333, 1.0),
            (5, 0.248261571, 0.95),
            (10, 0.384318951, 0.897403948),
            (25, 0.629756768, 0.783333333),
        ],
    );
}

#[test]
fn bets_sized_for_a_horizon_match_the_reference() {
    check(
        &x(&D1),
        0.05,
        Bets::Horizon(40),
        None,
        &[(5, 0.0, 1.0), (10, 0.292274743, 0.834639570), (20, 0.414950309, 0.712608037)],
    );
    check(
        &x(&D2),
        0.025,
        Bets::Horizon(25),
        Some(30),
        &[(5, 0.116666667, 0.95), (10, 0.343905121, 0.9), (25, 0.628773983, 0.783333333)],
    );
}

#[test]
fn followed_points_agree_with_the_interval() {
    // A point has left the sequence exactly when the running interval no longer holds it.
    let xs = x(&D2);
    let points: Vec<f64> = (0..=40).map(|i| i as f64 / 40.0).collect();
    let mut cs = BettingCs::new(0.05, Bets::Uniform, None, &points, true);
    for &v in &xs {
        cs.push(v);
        let (lo, hi) = cs.interval();
        for p in cs.points() {
            if (p.m - lo).abs() < 1e-6 || (p.m - hi).abs() < 1e-6 {
                continue;
            }
            assert_eq!(p.above, p.m < lo, "m = {} [{lo}, {hi}]", p.m);
            assert_eq!(p.below, p.m > hi, "m = {} [{lo}, {hi}]", p.m);
        }
    }
}

fn spec(name: &str, control: &str, treatment: &str, alpha: f64) -> ComparisonSpec {
    ComparisonSpec {
        name: name.into(),
        control: control.into(),
        treatment: treatment.into(),
        model: "m".into(),
        alpha,
    }
}

#[test]
fn a_large_effect_is_decided_and_its_arm_stops_being_needed() {
    // Every task: full passes, -a fails; -b the same as full. 40 tasks, one trial, margin 20 pp.
    let tasks: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
    let comparisons =
        vec![spec("-a", "full", "minus-a", 0.025), spec("-b", "full", "minus-b", 0.025)];
    let mut m = Monitor::new(&tasks, 1, 40, None, Some(0.2), Bets::Uniform, comparisons, true);
    let mut stopped_at = None;
    for (k, t) in tasks.iter().enumerate() {
        m.record(t, "full", "m", 0, 1.0);
        m.record(t, "minus-b", "m", 0, 1.0);
        if m.needs(t, "minus-a", "m") {
            m.record(t, "minus-a", "m", 0, 0.0);
        } else if stopped_at.is_none() {
            stopped_at = Some(k);
        }
    }
    let seqs: Vec<&Sequence> = m.comparisons().map(|(_, s)| s).collect();
    // By hand. -a: d = -1, x = 0 every task. The bet l_t^2 = 2 ln 80 / (s2_{t-1} t ln(1 + t)) with
    // s2_{t-1} <= 0.41 / t stays above 1, so the downward bet at m = 1/2 is its truncation
    // 0.5 / (1 - 0.5) = 1 and each factor is 1 + 1 * 0.5 = 1.5: 0.5 * 1.5^k >= 1 / 0.025 = 40
    // first at k = 11 (1.5^10 = 57.7, 1.5^11 = 86.5).
    assert_eq!((seqs[0].decision, seqs[0].decided_at), (Decision::Hurts, Some(11)));
    assert_eq!(stopped_at, Some(11), "minus-a is not needed after its decision");
    // -b: d = 0, x = 1/2 every task, s2_{t-1} = 0.25 / t, l_t^2 = 35.06 / ln(1 + t) > 1.25^2: the bets
    // at 0.4 and 0.6 are their truncation 0.5 / 0.4 = 1.25, each factor 1 + 1.25 * 0.1 = 1.125, and
    // 0.5 * 1.125^k >= 40 first at k = 38 (1.125^37 = 78.2, 1.125^38 = 88.0).
    assert_eq!(
        (seqs[1].decision, seqs[1].decided_at),
        (Decision::Equivalent, Some(38)),
        "{:?}",
        seqs[1].interval(false)
    );
    assert!(m.finished());
    assert!(!m.needs("t39", "full", "m"), "every comparison is decided");
}

#[test]
fn decisions_do_not_depend_on_the_order_records_arrive_in() {
    let tasks: Vec<String> = (0..30).map(|i| format!("t{i}")).collect();
    let outcome = |k: usize, arm: &str, r: u32| -> f64 {
        let h = (k * 7 + r as usize * 3 + arm.len()) % 5;
        if arm == "full" { (h < 4) as u8 as f64 } else { (h < 2) as u8 as f64 }
    };
    let mut records = Vec::new();
    for (k, t) in tasks.iter().enumerate() {
        for arm in ["full", "minus-a"] {
            for r in 0..3 {
                records.push((t.clone(), arm, r, outcome(k, arm, r)));
            }
        }
    }
    let run = |recs: &[(String, &str, u32, f64)]| {
        let mut m = Monitor::new(
            &tasks,
            3,
            30,
            None,
            None,
            Bets::Horizon(30),
            vec![spec("-a", "full", "minus-a", 0.05)],
            true,
        );
        for (t, arm, r, v) in recs {
            m.record(t, arm, "m", *r, *v);
        }
        let (_, s) = m.comparisons().next().unwrap();
        (s.decision, s.decided_at, s.tasks(), s.interval(false))
    };
    let forward = run(&records);
    let mut shuffled = records.clone();
    shuffled.reverse();
    shuffled.swap(3, 40);
    assert_eq!(forward, run(&shuffled));
}

#[test]
fn a_budget_of_trials_counts_what_the_tasks_needed_whatever_order_records_come_in() {
    // a -> b: d = -1 every task (decided after 11 tasks, by the hand computation above); a -> c: d = 0,
    // no margin, never decided. One trial. Tasks 0..10 need a, b and c (33 trials), later tasks a and c
    // (2 each): a budget of 40 trials lets tasks 11, 12 and 13 in (39), not task 14 (41).
    let tasks: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
    let comparisons = || vec![spec("-b", "a", "b", 0.025), spec("-c", "a", "c", 0.025)];
    let mut records = Vec::new();
    for t in &tasks {
        records.push((t.clone(), "a", 1.0));
        records.push((t.clone(), "b", 0.0));
        records.push((t.clone(), "c", 1.0));
    }
    let replay = |recs: &[(String, &str, f64)]| {
        let mut m =
            Monitor::new(&tasks, 1, 40, Some(40), None, Bets::Uniform, comparisons(), false);
        for (t, arm, v) in recs {
            m.record(t, arm, "m", 0, *v);
        }
        let seqs: Vec<(Decision, Option<usize>, usize)> =
            m.comparisons().map(|(_, s)| (s.decision, s.decided_at, s.tasks())).collect();
        (
            seqs,
            m.finished(),
            m.gate("t13", "c", "m"),
            m.gate("t14", "c", "m"),
            m.gate("t11", "b", "m"),
        )
    };
    let forward = replay(&records);
    assert_eq!(forward.0, vec![(Decision::Hurts, Some(11), 11), (Decision::Undecided, None, 14)]);
    assert!(forward.1, "every comparison decided or at its budget");
    assert_eq!((forward.2, forward.3, forward.4), (Gate::Run, Gate::Skip, Gate::Skip));
    // Records of later tasks first (trials finishing out of order, or started and not needed): the same.
    let mut backward = records.clone();
    backward.reverse();
    assert_eq!(replay(&backward), forward);

    // Before -b is decided, whether task 14's trials fall inside the budget is not known yet: wait.
    let mut m = Monitor::new(&tasks, 1, 40, Some(40), None, Bets::Uniform, comparisons(), false);
    for (t, arm, v) in &records[..3 * 5] {
        m.record(t, arm, "m", 0, *v);
    }
    assert_eq!(
        m.gate("t12", "c", "m"),
        Gate::Run,
        "13 tasks of 3 trials are 39 even if nothing is decided"
    );
    assert_eq!(
        m.gate("t13", "c", "m"),
        Gate::Wait,
        "42 if -b stays open, 39 if it is decided by task 11"
    );
}

/// A shard follows its own tasks (every count-th of the order from the
/// index-th), those among the first `max_tasks`, with its share of the
/// budget of trials (rounded up) and money; and no trial starts once a
/// budget of money or time is spent. By hand: 10 tasks, shard 2 of 3 owns
/// t1, t4, t7; of the first 5 tasks, t1 and t4; 10 trials over 3 shards is 4.
#[test]
fn a_shard_follows_its_own_tasks_with_its_share_of_the_budgets() {
    let order: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
    assert_eq!(own_tasks(&order, Some((2, 3))), ["t1", "t4", "t7"]);
    assert_eq!(own_tasks(&order, Some((1, 1))), order);
    assert_eq!(own_tasks(&order, None), order);
    let run = |max_tasks, max_trials, max_cost_usd| RunDesign {
        task_order: &order,
        shard: Some((2, 3)),
        trials: 1,
        max_tasks,
        max_trials,
        max_cost_usd,
        max_seconds: None,
        margin: None,
        alpha: 0.05,
        infra_retries: 2,
        primary: None,
    };
    let named: Vec<Named<'_>> = vec![("x", "c", "t", true)];
    let models = vec!["m".to_string()];
    let m = Monitor::for_run(&run(Some(5), None, None), &named, &models, false);
    assert_eq!((m.tasks(), m.max_tasks()), (3, 2));
    assert_eq!(
        [
            m.gate("t1", "c", "m"),
            m.gate("t4", "t", "m"),
            m.gate("t7", "c", "m"),
            m.gate("t0", "c", "m")
        ],
        [Gate::Run, Gate::Run, Gate::Skip, Gate::Skip]
    );
    // Budget of trials: 4 for this shard; each task needs 2 (c and t): t1 and t4 fit; t7 fits only
    // if the comparison is decided before t4 (then t4 is not needed): wait for the trials under way.
    let m = Monitor::for_run(&run(None, Some(10), None), &named, &models, false);
    assert_eq!(
        [m.gate("t1", "c", "m"), m.gate("t4", "c", "m"), m.gate("t7", "c", "m")],
        [Gate::Run, Gate::Run, Gate::Wait]
    );
    // Money: $3 over 3 shards is $1 here; a record costing $1 spends it and nothing starts.
    let mut m = Monitor::for_run(&run(None, None, Some(3.0)), &named, &models, false);
    m.spend(0.0, 1.0, Some(0.5));
    assert_eq!(m.gate("t1", "c", "m"), Gate::Run);
    m.spend(1.0, 2.0, Some(0.5));
    assert_eq!(m.spent(), Some(Spent::Money { spent: 1.0, max: 1.0 }));
    assert_eq!(m.gate("t1", "c", "m"), Gate::Skip);
    assert!(m.finished());
}

/// An outage cannot decide: the treatment's first 12 tasks end in provider errors, which as
/// failures beside passing controls would be "hurts" after 11 tasks (by hand, the test above).
/// Recorded as infrastructure, no task enters until a re-run scores it; with the re-runs scoring
/// like the control, the comparison is never decided against the treatment. A task whose trial
/// still errs after the 2 re-runs stops the comparison there: no decision, no more trials.
#[test]
fn infrastructure_errors_delay_a_decision_and_never_make_one() {
    let tasks: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
    let comparisons = vec![spec("-a", "full", "minus-a", 0.025)];
    let mut m = Monitor::new(&tasks, 1, 40, None, None, Bets::Uniform, comparisons, false);
    for t in &tasks[..12] {
        m.record(t, "full", "m", 0, 1.0);
        assert!(
            m.record_outcome(t, "minus-a", "m", 0, Outcome::Infrastructure { attempt: 1 })
                .is_empty()
        );
        assert!(m.retry(1) && m.needs(t, "minus-a", "m"), "the trial runs again");
    }
    let seq = |m: &Monitor| m.comparisons().next().unwrap().1.clone();
    assert_eq!((seq(&m).tasks(), seq(&m).decision), (0, Decision::Undecided));
    for t in &tasks[..12] {
        m.record(t, "minus-a", "m", 0, 1.0);
    }
    assert_eq!((seq(&m).tasks(), seq(&m).decision), (12, Decision::Undecided));
    // Task 12: the treatment errs on its first attempt and both re-runs.
    m.record(&tasks[12], "full", "m", 0, 1.0);
    for attempt in 1..=3 {
        m.record_outcome(&tasks[12], "minus-a", "m", 0, Outcome::Infrastructure { attempt });
    }
    assert!(!m.retry(3));
    assert_eq!(m.stalled_at("-a", "m"), Some(12));
    assert_eq!((seq(&m).tasks(), seq(&m).decision), (12, Decision::Undecided));
    assert!(m.finished() && !m.needs(&tasks[13], "full", "m"), "no trial serves it any more");
}

/// A trial without a score of the primary outcome keeps its task out for good: the comparison
/// stops there undecided, says it stopped for want of a score (not an outage), and no trial
/// serves it any more. The record's score is what the rule takes: the pass value for the pass
/// rate, a reward.json key or a harness metric otherwise, none when the record has no such key.
#[test]
fn a_trial_without_a_score_stops_its_comparison_undecided() {
    let tasks: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
    let comparisons = vec![spec("-a", "full", "minus-a", 0.025)];
    let mut m = Monitor::new(&tasks, 1, 10, None, None, Bets::Uniform, comparisons, false);
    for t in &tasks[..3] {
        m.record(t, "full", "m", 0, 0.75);
        m.record(t, "minus-a", "m", 0, 0.25);
    }
    m.record(&tasks[3], "full", "m", 0, 0.75);
    m.record_outcome(&tasks[3], "minus-a", "m", 0, Outcome::Unscorable);
    let seq = m.comparisons().next().unwrap().1.clone();
    assert_eq!((seq.tasks(), seq.decision), (3, Decision::Undecided));
    assert_eq!(m.stalled_at("-a", "m"), Some(3));
    assert!(m.stalled_unscorable("-a", "m"));
    assert!(m.finished() && !m.needs(&tasks[4], "full", "m"));
    // The same stop from errors that used up their re-runs is not for want of a score.
    let comparisons = vec![spec("-a", "full", "minus-a", 0.025)];
    let mut m = Monitor::new(&tasks, 1, 10, None, None, Bets::Uniform, comparisons, false);
    m.record(&tasks[0], "full", "m", 0, 1.0);
    m.record_outcome(&tasks[0], "minus-a", "m", 0, Outcome::Infrastructure { attempt: 3 });
    assert_eq!(m.stalled_at("-a", "m"), Some(0));
    assert!(!m.stalled_unscorable("-a", "m"));
}

#[test]
fn a_records_score_is_its_primary_outcomes_value() {
    use crate::record::design::TrialSpec;
    use crate::record::{EndReason, TrialRecord, TrialStatus};
    let spec = TrialSpec {
        id: "x".into(),
        order: 0,
        task: "t".into(),
        arm: "a".into(),
        model: "m".into(),
        repeat: 0,
        seed: 1,
    };
    let mut r = TrialRecord::blank(
        "run",
        &spec,
        1,
        TrialStatus::Failed,
        EndReason::ModelDone,
        String::new(),
    );
    (r.tests_passed, r.tests_total) = (3, 4);
    r.harness_command = Some(
        serde_json::from_value(serde_json::json!({
            "command": ["h"], "exit_code": 0, "wall_seconds": 1.0, "stdout_tail": "",
            "stderr_tail": "", "metrics": {"solved": 0.5}
        }))
        .unwrap(),
    );
    assert_eq!(r.score(None), Some(0.0));
    assert_eq!(r.score(Some("tests_passed")), Some(0.75));
    assert_eq!(r.score(Some("harness.solved")), Some(0.5));
    assert_eq!(r.score(Some("harness.other")), None);
    assert_eq!(r.score(Some("reward.accuracy")), None, "no verifier ran");
    // Into the rule: a score outside [0, 1] or none is unscorable; an outage stays an outage.
    assert_eq!(TrialStatus::Failed.outcome(1, Some(1.5)), Outcome::Unscorable);
    assert_eq!(TrialStatus::Failed.outcome(1, None), Outcome::Unscorable);
    assert_eq!(TrialStatus::ProviderError.outcome(2, None), Outcome::Infrastructure { attempt: 2 });
    assert_eq!(TrialStatus::Passed.outcome(1, Some(1.0)), Outcome::Scored(1.0));
}
