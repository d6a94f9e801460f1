//! The gate's outputs: the terminal report, the Markdown summary (a CI job
//! summary) and JUnit XML (one case per task, one for the verdict).

use super::baseline::BaselineRow;
use super::decision::{Characteristic, Decision, GateTest, Method, Verdict, task_regressed};
use crate::report::analysis::ESTIMAND_THESE_TASKS;
use std::fmt::Write;

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// What the gate says when it tested with tasks as strata.
pub(crate) const STRATIFIED_WORDS: &str = "tasks as strata, each weighing the same, a t test on the mean per-task difference; its error rates are simulated (docs/statistics.md, \"The gate\"), not exact";

/// Why the gate tested as it did, for a stratified test.
fn stratified_why(test: GateTest) -> Option<String> {
    match test {
        GateTest::PooledExact => None,
        GateTest::Stratified => Some(format!(
            "every task has at least {} trials a side: {STRATIFIED_WORDS}",
            super::decision::STRATIFIED_FROM_TRIALS
        )),
        GateTest::StratifiedPartial => {
            Some(format!("the tasks' trial counts differ (a partial run): {STRATIFIED_WORDS}"))
        }
    }
}

/// How the gate counts trials that ended in an infrastructure error (said in its output and docs).
pub(crate) const INFRASTRUCTURE_COUNTS: &str = "every finished trial counts: one that ended in an infrastructure error (provider, harness, grader) counts as not passed, as a failure does";

pub fn render(
    d: &Decision,
    pairs: &[(&BaselineRow, &BaselineRow)],
    oc: &[Characteristic],
    hint: Option<u64>,
) -> String {
    let pp = |x: f64| if x.is_finite() { format!("{:+.1} pp", x * 100.0) } else { "n/a".into() };
    let (base, cand) = d.tallies();
    let mut s = format!(
        "gate: {}  candidate - baseline over {} tasks: {base} -> {cand} ({}), one-sided {:.0}% bounds [{}, {}], margin {:.1} pp\n",
        d.verdict.name(),
        d.n_tasks,
        pp(d.mean),
        (1.0 - d.alpha) * 100.0,
        pp(d.lower),
        pp(d.upper),
        d.margin * 100.0
    );
    let exact = d.test.p_name();
    let why = match d.verdict {
        Verdict::Fail => format!("\"not worse\" is rejected ({exact} {:.4} <= {}): a significant regression", d.p_regression, d.alpha),
        Verdict::Pass => format!(
            "\"worse by {:.1} pp or more\" is rejected ({exact} {:.4} <= {}): not worse than the baseline by more than the margin",
            d.margin * 100.0,
            d.p_non_inferior,
            d.alpha
        ),
        Verdict::Inconclusive => format!(
            "neither a regression (p {:.3}) nor non-inferiority (p {:.3}) is shown at {}{}",
            d.p_regression,
            d.p_non_inferior,
            d.alpha,
            match (d.test, hint) {
                (GateTest::Stratified | GateTest::StratifiedPartial, _) => String::new(),
                (_, Some(k)) => format!("; about {k} times the candidate's trials per task would let an unchanged candidate PASS in 80% of runs"),
                (_, None) => "; even 32 times the candidate's trials per task would not let an unchanged candidate PASS in 80% of runs: the baseline needs more tasks or trials too".into(),
            }
        ),
    };
    if let Some(why) = stratified_why(d.test) {
        let _ = writeln!(s, "  {why}");
    }
    let _ = writeln!(s, "  {why}");
    let _ = writeln!(s, "  in the report's words: {}", d.words());
    let _ = writeln!(
        s,
        "  estimand: {ESTIMAND_THESE_TASKS} (the {} over the suite's own tasks, each weighing the same; the trials are the random part)",
        d.scored.as_ref().map_or("pass rate".to_string(), |x| format!(
            "mean of the primary outcome `{}`",
            x.primary
        ))
    );
    if d.scored.is_some() {
        let _ = writeln!(
            s,
            "  a score in [0, 1] per trial, tested stratified at any trial count: a score's variance is at most a pass's at its mean, so the test is conservative on scores"
        );
    }
    let _ = writeln!(s, "  {INFRASTRUCTURE_COUNTS}");
    write_characteristics(&mut s, d, oc);
    let red: Vec<String> = pairs
        .iter()
        .filter(|(b, c)| task_regressed(b, c, d.alpha, pairs.len()))
        .map(|(b, c)| format!("{} {} -> {}", b.task, b.tally(), c.tally()))
        .collect();
    if !red.is_empty() {
        let _ = writeln!(
            s,
            "  tasks that regressed by the gate's rule (exact test at alpha/{}): {}",
            pairs.len(),
            red.join(", ")
        );
    }
    s
}

/// The operating characteristics under the verdict: how they were computed,
/// each drop's FAIL and PASS rates, and what the test guarantees.
fn write_characteristics(s: &mut String, d: &Decision, oc: &[Characteristic]) {
    let Some(first) = oc.first() else { return };
    let rate = if d.baseline_trials == 0 {
        f64::NAN
    } else {
        d.baseline_passes as f64 / d.baseline_trials as f64
    };
    let how = match first.method {
        Method::Exact => format!("every task at the baseline's {}; exact", pct(rate)),
        Method::Normal => {
            format!("every task at the baseline's {}; Normal approximation", pct(rate))
        }
        Method::Simulated { draws } => format!(
            "each task at its own baseline rate, the drop shared in proportion to it; simulated, {draws} draws"
        ),
    };
    let _ = writeln!(
        s,
        "  operating characteristics at this size ({} baseline and {} candidate trials, {how}):",
        d.baseline_trials, d.candidate_trials,
    );
    for c in oc {
        let what = if c.drop == 0.0 {
            "no change".to_string()
        } else {
            format!("a drop of {:.0} pp", c.drop * 100.0)
        };
        let _ = writeln!(
            s,
            "    {what:<16} caught (FAIL) in {:>6} of runs, PASS in {:>6}",
            pct(c.p_fail),
            pct(c.p_pass)
        );
    }
    let (margin, alpha) = (d.margin * 100.0, d.alpha * 100.0);
    let _ = match first.method {
        Method::Simulated { .. } => writeln!(
            s,
            "    a true drop of {margin:.1} pp or more PASSes in about {alpha:.0}% of runs or fewer (simulated, not guaranteed)"
        ),
        _ => writeln!(
            s,
            "    a true drop of {margin:.1} pp or more PASSes in at most {alpha:.0}% of runs (the test's level), whatever the size"
        ),
    };
}

pub fn markdown(
    d: &Decision,
    pairs: &[(&BaselineRow, &BaselineRow)],
    oc: &[Characteristic],
    hint: Option<u64>,
) -> String {
    let icon = match d.verdict {
        Verdict::Pass => "✅",
        Verdict::Fail => "❌",
        Verdict::Inconclusive => "⚠️",
    };
    let mut s = format!("## ablate gate: {icon} {}\n\n", d.verdict.name());
    let _ = writeln!(s, "```\n{}```\n", render(d, pairs, oc, hint));
    s.push_str("| task | baseline | candidate | change | regressed |\n|---|---|---|---|---|\n");
    for (b, c) in pairs {
        let _ = writeln!(
            s,
            "| {} | {} ({:.0}%) | {} ({:.0}%) | {:+.0} pp | {} |",
            b.task,
            b.tally(),
            b.successes() / f64::from(b.trials) * 100.0,
            c.tally(),
            c.successes() / f64::from(c.trials) * 100.0,
            (c.successes() / f64::from(c.trials) - b.successes() / f64::from(b.trials)) * 100.0,
            if task_regressed(b, c, d.alpha, pairs.len()) { "yes" } else { "no" }
        );
    }
    s
}

/// JUnit XML: one test case per task with its counts, failed only where the
/// gate's own rule says the task regressed ([`task_regressed`]), and one test
/// case for the overall verdict (failed on FAIL, skipped on INCONCLUSIVE).
pub fn junit(d: &Decision, pairs: &[(&BaselineRow, &BaselineRow)]) -> String {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let red: Vec<bool> =
        pairs.iter().map(|(b, c)| task_regressed(b, c, d.alpha, pairs.len())).collect();
    let (base, cand) = d.tallies();
    let summary = format!(
        "baseline {base}, candidate {cand}, difference {:+.1} pp, one-sided bounds [{:+.1}, {:+.1}] pp, margin {:.1} pp",
        d.mean * 100.0,
        d.lower * 100.0,
        d.upper * 100.0,
        d.margin * 100.0
    );
    let case = |name: String, status: TestCaseStatus, out: &str| {
        let mut case = TestCase::new(name, status);
        case.set_classname("ablate.gate").set_system_out(out);
        case
    };
    let mut suite = TestSuite::new(format!("ablate gate: {}", d.verdict.name()));
    let overall = match d.verdict {
        Verdict::Fail => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!(
                "significant regression ({} {:.4})",
                d.test.p_name(),
                d.p_regression
            ))
            .set_description(summary.as_str());
            s
        }
        Verdict::Inconclusive => {
            let mut s = TestCaseStatus::skipped();
            s.set_message("inconclusive: the data cannot decide");
            s
        }
        Verdict::Pass => TestCaseStatus::success(),
    };
    suite.add_test_case(case(format!("overall: {}", d.verdict.name()), overall, &summary));
    for ((b, c), red) in pairs.iter().zip(red) {
        let counts = format!("baseline {}, candidate {}", b.tally(), c.tally());
        let status = if red {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!("regressed: {counts}")).set_description(counts.as_str());
            s
        } else {
            TestCaseStatus::success()
        };
        suite.add_test_case(case(b.task.clone(), status, &counts));
    }
    let mut report = Report::new("ablate gate");
    report.add_test_suite(suite);
    report.to_string().unwrap_or_else(|e| format!("<!-- cannot write JUnit: {e} -->\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::decide;

    #[test]
    fn a_red_task_is_a_task_the_rule_says_regressed() {
        let row = |task: &str, trials, passes| BaselineRow {
            task: task.into(),
            trials,
            passes,
            pass_rate: passes as f64 / trials as f64,
            arm: "a".into(),
            model: "m".into(),
            model_identity: String::new(),
            suite_digest: String::new(),
            budget: String::new(),
            run_id: String::new(),
            resources: String::new(),
            primary: String::new(),
            score: passes as f64,
        };
        // scripts/gate_reference.py: 2/2 -> 1/2 has exact p 0.3135 (no evidence at 0.05/2);
        // 10/10 -> 0/10 has 0.0010010 (red); pooled, 12/12 -> 1/12 has 0.0010014: FAIL.
        let (b1, c1, b2, c2) = (row("a", 2, 2), row("a", 2, 1), row("b", 10, 10), row("b", 10, 0));
        assert!((crate::gate::regression_p(2, 2, 1, 2, 0.0) - 0.3135).abs() < 1e-9);
        assert!(
            (crate::gate::regression_p(10, 10, 0, 10, 0.0) - 0.0010009536743164063).abs() < 1e-9
        );
        assert!(!task_regressed(&b1, &c1, 0.05, 2));
        assert!(task_regressed(&b2, &c2, 0.05, 2));
        let pairs = vec![(&b1, &c1), (&b2, &c2)];
        let d = decide(&pairs, 0.05, 0.05);
        assert_eq!(d.verdict, Verdict::Fail, "{d:?}");
        assert!((d.p_regression - 0.0010014181021035257).abs() < 1e-9, "{d:?}");
        let xml = junit(&d, &pairs);
        assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
        assert_eq!(xml.matches("<failure ").count(), 2, "the red task and the verdict: {xml}");
        assert!(
            xml.contains("baseline 2/2, candidate 1/2") && xml.contains("name=\"overall: "),
            "{xml}"
        );
    }
}
