//! `ablate baseline save` and `ablate gate`: verdicts, exit codes, drift refusal, CI outputs.

use crate::common;

use ablate_synth as synth;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A synthetic run of the full suite, arm `full` only, `trials` per task.
fn run(
    dir: &Path,
    name: &str,
    trials: u32,
    seed: u64,
    max_steps: u32,
    rate: impl Fn(&str) -> f64,
) -> PathBuf {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/core.toml");
    let mut exp = ablate::experiment::config::load(&cfg).unwrap();
    exp.trials = trials;
    exp.tasks.clear();
    exp.budget.max_steps = max_steps;
    exp.arms.retain(|a| a.name == "full");
    exp.comparisons.clear();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let out = dir.join(name);
    synth::write_run(&out, &exp, &suite, &plan, seed, |task, _| rate(task)).unwrap();
    out
}

/// `ablate gate --baseline BASELINE --candidate CANDIDATE EXTRA...`: exit code, stdout, stderr.
fn gate(baseline: &Path, candidate: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "gate",
        "--baseline",
        baseline.to_str().unwrap(),
        "--candidate",
        candidate.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    ablate(&args)
}

/// Keep only the records of `run`'s trials.jsonl that `keep` accepts (an interrupted or partial run).
fn keep_records(run: &Path, mut keep: impl FnMut(&str) -> bool) {
    let records = std::fs::read_to_string(run.join("trials.jsonl")).unwrap();
    let lines: Vec<&str> = records.lines().filter(|l| keep(l)).collect();
    std::fs::write(run.join("trials.jsonl"), lines.join("\n") + "\n").unwrap();
}

/// Per task, (passed, trials) of a run's records, read from trials.jsonl.
fn passes(run: &Path) -> BTreeMap<String, (u64, u64)> {
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for line in std::fs::read_to_string(run.join("trials.jsonl")).unwrap().lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let e = out.entry(r["task"].as_str().unwrap().to_string()).or_default();
        e.0 += (r["status"] == "passed") as u64;
        e.1 += 1;
    }
    out
}

/// The 40 pp drop's tasks (baseline seed 1, candidate seed 3, 40 trials a side): passes of each,
/// and the exact regression p-value of that pair by scripts/gate_reference.py.
const WORSE: [(&str, u64, u64, f64); 14] = [
    ("balanced-brackets", 15, 3, 0.0017219069823860228),
    ("camel-to-snake", 6, 0, 0.009272303055400378),
    ("count-vowels", 28, 9, 0.001009461753399226),
    ("expression-evaluator", 27, 14, 0.0034349042259486143),
    ("fizzbuzz-list", 32, 15, 0.0010508388413207489),
    ("ini-parser", 15, 0, 0.0010126652091532998),
    ("is-prime", 14, 0, 0.0010203737510305422),
    ("merge-intervals", 13, 0, 0.0010434123478386334),
    ("parse-duration", 3, 0, 0.06090362462095102),
    ("reverse-words", 31, 15, 0.0011408997370224469),
    ("roman-to-int", 27, 9, 0.0010240137049161583),
    ("run-length", 23, 1, 0.0010000294189243157),
    ("semver-compare", 7, 0, 0.005564968635345468),
    ("word-frequency", 4, 0, 0.03371900060008142),
];

/// The unchanged candidate's tasks (baseline seed 1, candidate seed 2, 40 trials a side): passes
/// of each.
const SAME: [(&str, u64, u64); 14] = [
    ("balanced-brackets", 15, 21),
    ("camel-to-snake", 6, 10),
    ("count-vowels", 28, 25),
    ("expression-evaluator", 27, 27),
    ("fizzbuzz-list", 32, 32),
    ("ini-parser", 15, 21),
    ("is-prime", 14, 11),
    ("merge-intervals", 13, 8),
    ("parse-duration", 3, 6),
    ("reverse-words", 31, 32),
    ("roman-to-int", 27, 25),
    ("run-length", 23, 17),
    ("semver-compare", 7, 6),
    ("word-frequency", 4, 8),
];

/// The shipped gate's operating characteristics (drops 0, 10 and 20 pp: P(FAIL), P(PASS)) by
/// scripts/gate_reference.py's own simulation of the stratified test, 50,000 draws.
const REF_OC: [(f64, f64); 3] = [(0.04238, 0.83272), (0.35598, 0.35208), (0.81058, 0.05344)];

/// docs/gate.md, where the shipped gate's operating characteristics are stated.
fn gate_doc() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/gate.md")).unwrap()
}

/// The FAIL and PASS cells (without `%`) of docs/gate.md's table row whose first cell is `change`.
fn gate_doc_row(doc: &str, change: &str) -> (String, String) {
    let row = doc
        .lines()
        .find(|l| l.starts_with(&format!("| {change} |")))
        .unwrap_or_else(|| panic!("docs/gate.md has no table row `| {change} |`"));
    let cells: Vec<&str> = row.split('|').map(|c| c.trim().trim_end_matches('%')).collect();
    (cells[2].to_string(), cells[3].to_string())
}

fn task_rate(task: &str) -> f64 {
    0.15 + (task.len() % 7) as f64 * 0.1
}

fn ablate(args: &[&str]) -> (i32, String, String) {
    common::code_and_output(
        Command::new(env!("CARGO_BIN_EXE_ablate")).args(args),
        Duration::from_secs(60),
    )
}

#[test]
fn pass_fail_and_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let base_run = run(dir.path(), "base", 40, 1, 4, task_rate);
    let baseline = dir.path().join("baseline/core.csv");
    let (code, out, err) =
        ablate(&["baseline", "save", base_run.to_str().unwrap(), "-o", baseline.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("saved 14 tasks"), "{out}");
    let text = std::fs::read_to_string(&baseline).unwrap();
    assert!(
        text.starts_with(
            "task,trials,passes,pass_rate,arm,model,model_identity,suite_digest,budget,run_id"
        ),
        "{text}"
    );

    // Same true rates, many trials: non-inferior.
    let same = run(dir.path(), "same", 40, 2, 4, task_rate);
    let md = dir.path().join("summary.md");
    let junit = dir.path().join("junit.xml");
    let (code, out, _) = gate(
        &baseline,
        &same,
        &["--markdown", md.to_str().unwrap(), "--junit", junit.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("gate: PASS"), "{out}");
    let mdtext = std::fs::read_to_string(&md).unwrap();
    assert!(
        mdtext.contains("## ablate gate: ✅ PASS") && mdtext.contains("| parse-duration |"),
        "{mdtext}"
    );
    // 40 trials a task a side: tasks as strata. The per-task counts (baseline seed 1, candidate
    // seed 2) are those of SAME; a plain-Python reimplementation of docs/statistics.md's
    // stratified test on them (its own regularized incomplete beta for the t tail) gives the mean
    // difference +0.714 pp, "worse by 5 pp or more" p 0.015139, "not worse" p 0.60667, "no
    // better" p 0.39333 and "better by 5 pp or more" p 0.052046: a PASS, non-inferior (neither
    // helps nor equivalence is shown).
    assert_eq!(
        passes(&base_run)
            .into_iter()
            .zip(passes(&same))
            .map(|((t, b), (_, c))| (t, b.0, c.0))
            .collect::<Vec<_>>(),
        SAME.map(|(t, b, c)| (t.to_string(), b, c))
    );
    assert!(out.contains("every task has at least 5 trials a side: tasks as strata"), "{out}");
    assert!(out.contains("(p 0.0151 <= 0.05)"), "{out}");
    assert!(
        out.contains("\n  in the report's words: non-inferior: not worse by 5 pp or more"),
        "{out}"
    );
    assert!(
        out.contains(
            "operating characteristics at this size (560 baseline and 560 candidate trials, each task at its own baseline rate"
        ) && out.contains("simulated, 2000 draws"),
        "{out}"
    );
    assert!(
        out.contains("a drop of 20 pp") && out.contains("(simulated, not guaranteed)"),
        "{out}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 15, "14 tasks and the verdict");
    assert_eq!(xml.matches("<failure ").count(), 0, "no task regressed by the rule: {xml}");
    assert!(
        xml.contains("name=\"overall: PASS\"")
            && xml.contains("baseline ")
            && xml.contains(", candidate "),
        "{xml}"
    );

    // A 40 pp drop everywhere: a significant regression, and the JUnit cases fail.
    let worse = run(dir.path(), "worse", 40, 3, 4, |t| (task_rate(t) - 0.4).max(0.0));
    let (code, out, _) = gate(&baseline, &worse, &["--junit", junit.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with("gate: FAIL") && out.contains("tasks that regressed by the gate's rule"),
        "{out}"
    );
    assert!(out.contains("\n  in the report's words: hurts\n"), "{out}");
    assert!(
        out.contains("\n  estimand: these tasks (the pass rate over the suite's own tasks"),
        "{out}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    // Each task's case: its counts (as the records have them) and red exactly when its own exact
    // regression test rejects at alpha/14 (p-values from scripts/gate_reference.py).
    let (base_counts, worse_counts) = (passes(&base_run), passes(&worse));
    let cases: Vec<(String, u64, u64, bool)> = xml
        .split("<testcase name=\"")
        .skip(1)
        .filter(|c| !c.starts_with("overall"))
        .map(|c| {
            let name = c.split('"').next().unwrap().to_string();
            let counts = c
                .split("<system-out>baseline ")
                .nth(1)
                .unwrap()
                .split("</system-out>")
                .next()
                .unwrap();
            let (b, cand) = counts.split_once(", candidate ").unwrap();
            let n = |s: &str| -> u64 { s.strip_suffix("/40").unwrap().parse().unwrap() };
            (name, n(b), n(cand), c.split("</testcase>").next().unwrap().contains("<failure "))
        })
        .collect();
    assert_eq!(cases.len(), 14, "{xml}");
    for ((name, b, c, red), (want_name, want_b, want_c, p)) in cases.iter().zip(WORSE) {
        assert_eq!((name.as_str(), *b, *c), (want_name, want_b, want_c), "{xml}");
        assert_eq!(
            (base_counts[name], worse_counts[name]),
            ((*b, 40), (*c, 40)),
            "{name}: the counts of the records"
        );
        let got = ablate::gate::regression_p(*b, 40, *c, 40, 0.0);
        assert!((got - p).abs() < 1e-9, "{name} {b}/40 -> {c}/40: p {got}, reference {p}");
        assert_eq!(*red, p <= 0.05 / 14.0, "{name}: p {p}");
    }
    let red: Vec<&str> = cases.iter().filter(|c| c.3).map(|c| c.0.as_str()).collect();
    assert_eq!(
        red,
        [
            "balanced-brackets",
            "count-vowels",
            "expression-evaluator",
            "fizzbuzz-list",
            "ini-parser",
            "is-prime",
            "merge-intervals",
            "reverse-words",
            "roman-to-int",
            "run-length"
        ]
    );
    assert_eq!(xml.matches("<failure ").count(), 10 + 1, "the red tasks and the verdict");
    let overall = xml
        .split("<testcase ")
        .find(|c| c.starts_with("name=\"overall: FAIL\""))
        .expect("the overall case");
    assert!(overall.contains("<failure message=\"significant regression"), "{xml}");

    // A run folder works as the baseline too; one trial per task is too little to decide.
    let few = run(dir.path(), "few", 1, 4, 4, task_rate);
    let (code, out, _) = gate(&base_run, &few, &[]);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.starts_with("gate: INCONCLUSIVE")
            && out.contains("times the candidate's trials per task would"),
        "{out}"
    );
}

#[test]
fn drift_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let base_run = run(dir.path(), "base", 5, 1, 4, task_rate);
    let other_budget = run(dir.path(), "other", 5, 2, 6, task_rate);
    let (code, _, err) = gate(&base_run, &other_budget, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("drift: budget")
            && err.contains("\"max_steps\":4")
            && err.contains("refusing to compare"),
        "{err}"
    );
    let (code, out, err) = gate(&base_run, &other_budget, &["--allow-drift"]);
    // Compared anyway: 5 trials a task is too little to decide either way.
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains("drift: budget"), "{err}");
    let total = |run: &Path| passes(run).values().fold((0, 0), |(p, n), (tp, tn)| (p + tp, n + tn));
    let ((b, nb), (c, nc)) = (total(&base_run), total(&other_budget));
    assert_eq!((nb, nc), (70, 70));
    assert!(
        out.starts_with(&format!(
            "gate: INCONCLUSIVE  candidate - baseline over 14 tasks: {b}/{nb} -> {c}/{nc} ("
        )),
        "{out}"
    );

    let (code, _, err) = gate(&base_run, &base_run, &["--margin", "2"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = gate(Path::new("/nonexistent.csv"), &base_run, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent.csv"), "{err}");
}

#[test]
fn a_baseline_whose_rate_contradicts_its_counts_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cand = run(dir.path(), "cand", 3, 1, 4, task_rate);
    // 11 passes of 12 with a pass rate of 0: once compared as 0 and gave PASS at +91.7 pp.
    let baseline = dir.path().join("bad.csv");
    std::fs::write(&baseline, "task,trials,passes,pass_rate,arm,model,model_identity,suite_digest,budget,run_id\nparse-duration,12,11,0,full,m,,d,b,r\n")
        .unwrap();
    let (code, out, err) = gate(&baseline, &cand, &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.is_empty(), "no verdict: {out}");
    assert_eq!(
        err.trim(),
        format!(
            "error: {}: row 2, column `pass_rate`: 0 contradicts passes / trials = 11/12 = 0.917",
            baseline.display()
        )
    );
}

/// The shipped gate's committed baseline still loads, and at its size (4 tasks: 24 trials each in
/// the baseline, 12 in a candidate; margin 20 pp, as `make gate`) the gate PASSes a candidate
/// 20 pp worse in at most alpha of runs. docs/gate.md's table is these characteristics.
#[test]
fn the_shipped_baseline_loads_and_its_characteristics_are_printed() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("results/baseline/gate.csv");
    let rows = ablate::gate::read_baseline(&base).unwrap();
    assert_eq!(rows.len(), 4);
    // A candidate of configs/gate.toml: 12 trials a task, at the baseline's rates.
    let cand: Vec<_> = rows
        .iter()
        .map(|r| {
            let mut c = r.clone();
            c.trials = 12;
            c.passes = r.passes / 2;
            c
        })
        .collect();
    let pairs: Vec<_> = rows.iter().zip(cand.iter()).collect();
    let (alpha, margin) = (0.05, 0.20);
    // 24 and 12 trials a task: the gate tests with tasks as strata.
    assert_eq!(ablate::gate::gate_test(&pairs), ablate::gate::GateTest::Stratified);
    let d =
        ablate::gate::decide_stratified(&pairs, alpha, margin, ablate::gate::GateTest::Stratified);
    assert_eq!((d.baseline_passes, d.baseline_trials, d.candidate_trials), (63, 96, 48));
    let oc = ablate::gate::stratified_characteristics(&pairs, alpha, margin);
    for c in &oc {
        println!(
            "shipped gate (63/96 baseline, 48-trial candidate, margin 20 pp): drop {:.2}: FAIL {:.1}%, PASS {:.1}%",
            c.drop,
            c.p_fail * 100.0,
            c.p_pass * 100.0
        );
    }
    // (drop, P(FAIL), P(PASS)) by scripts/gate_reference.py's own simulation of the stratified
    // test at these rates (50,000 draws, standard error at most 0.23 pp): ablate's 2,000 draws
    // within 3 of their standard errors of it, and docs/gate.md's table as ablate prints them.
    let doc = gate_doc();
    let table = [
        (0.0, REF_OC[0].0, REF_OC[0].1, gate_doc_row(&doc, "none")),
        (0.10, REF_OC[1].0, REF_OC[1].1, gate_doc_row(&doc, "drop of 10 pp")),
        (0.20, REF_OC[2].0, REF_OC[2].1, gate_doc_row(&doc, "drop of 20 pp (the margin)")),
    ];
    for (drop, fail, pass, (doc_fail, doc_pass)) in table {
        let c = oc.iter().find(|c| (c.drop - drop).abs() < 1e-12).unwrap();
        let within = |got: f64, want: f64| {
            (got - want).abs()
                <= 3.0 * (want * (1.0 - want) * (1.0 / 2000.0 + 1.0 / 50000.0)).sqrt()
        };
        assert!(within(c.p_fail, fail) && within(c.p_pass, pass), "drop {drop}: {c:?}");
        assert_eq!(
            (format!("{:.1}", c.p_fail * 100.0), format!("{:.1}", c.p_pass * 100.0)),
            (doc_fail, doc_pass),
            "docs/gate.md's row for a drop of {drop}"
        );
    }
    // The pooled exact rule at these sizes (the gate's rule below 5 trials a task).
    let d = ablate::gate::decide(&pairs, alpha, margin);
    let oc = ablate::gate::characteristics(&d);
    let at_margin = oc.iter().find(|c| (c.drop - margin).abs() < 1e-12).unwrap();
    assert!(
        at_margin.method == ablate::gate::Method::Exact && at_margin.p_pass <= alpha,
        "{at_margin:?}"
    );
    // At the default margin of 5 pp the same sizes rarely PASS an unchanged project (docs/gate.md):
    // scripts/gate_reference.py's simulation 0.1504 (50,000 draws).
    let tight = ablate::gate::stratified_characteristics(&pairs, alpha, 0.05)[0].clone();
    println!("at margin 5 pp: no change PASSes {:.1}%", tight.p_pass * 100.0);
    let se = (0.1504f64 * 0.8496 * (1.0 / 2000.0 + 1.0 / 50000.0)).sqrt();
    assert!(tight.drop == 0.0 && (tight.p_pass - 0.1504).abs() <= 3.0 * se, "{tight:?}");
    let stated = format!("unchanged project in {:.1}% of runs", tight.p_pass * 100.0);
    assert!(doc.replace('\n', " ").contains(&stated), "docs/gate.md does not say `{stated}`");
}

/// A candidate whose tasks have unequal trial counts (an interrupted run: one task with 2 of its
/// 24 trials) would pool as a change with no task changed: baseline 24/24 and 0/24 on each side of
/// 2/2 and 0/24. The gate tests it with tasks as strata instead. By hand, over the 14 tasks,
/// every task's difference is 0. Under a drop of the margin, 5 pp, the restricted rates give
/// is-prime the variance floors 0.0008167 (24 trials: 0.02 x 0.98 / 24) and 0.0694444 (2 trials:
/// (1/6)(5/6)/2), and each other task (48/47) 0.034694 x 0.965306 / 24 = 0.0014251 (baseline
/// (24 x 0.05 + 0.5) / 49) plus the floor 0.0008167: 0.0994043 in all, se = sqrt(0.0994043) / 14
/// = 0.0225203 on 2.048 Welch-Satterthwaite df (the 2-trial task's term dominates), t = 2.2202,
/// p = P(T_2.048 > 2.2202) = 0.0768 (scripts/gate_reference.py's t tail; at 2 df, 0.5 (1 - t /
/// sqrt(t^2 + 2)) = 0.078): undecided.
#[test]
fn unequal_trials_per_task_are_decided_with_tasks_as_strata() {
    let dir = tempfile::tempdir().unwrap();
    let rate = |t: &str| if t == "is-prime" { 1.0 } else { 0.0 };
    let base_run = run(dir.path(), "base", 24, 1, 4, rate);
    let cand = run(dir.path(), "cand", 24, 2, 4, rate);
    let mut kept = 0;
    keep_records(&cand, |l| {
        if !l.contains("\"task\":\"is-prime\"") {
            return true;
        }
        kept += 1;
        kept <= 2
    });
    assert_eq!(passes(&cand)["is-prime"], (2, 2));
    for extra in [&[][..], &["--allow-drift"][..]] {
        let (code, out, err) = gate(&base_run, &cand, extra);
        assert_eq!(code, 3, "{out}{err}");
        assert!(out.contains("gate: INCONCLUSIVE") && out.contains("(+0.0 pp)"), "{out}");
        assert!(out.contains("nor non-inferiority (p 0.077)"), "{out}");
        assert!(out.contains("tasks as strata, each weighing the same"), "{out}");
    }
}

/// A partial candidate run, which has reached only some of the baseline's tasks, is decided on
/// the tasks it has (not refused as a drift), and the gate says how many. The tasks it has are
/// unchanged (every task passes on both sides): 13 of 14 tasks at 12 trials a side, tasks as
/// strata: a PASS.
#[test]
fn a_partial_candidate_is_decided_on_the_tasks_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let base_run = run(dir.path(), "base", 12, 1, 4, |_| 1.0);
    let cand = run(dir.path(), "cand", 12, 2, 4, |_| 1.0);
    keep_records(&cand, |l| !l.contains("\"task\":\"is-prime\""));
    let (code, out, err) = gate(&base_run, &cand, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("gate: PASS") && out.contains("over 13 tasks"), "{out}");
    assert!(out.contains("the candidate has 13 of the baseline's 14 tasks"), "{out}");
}
