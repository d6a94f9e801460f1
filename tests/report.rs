//! `ablate report` on generated run folders: files, key numbers, the guard.

mod common;

use ablate::report::synth;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn generate(dir: &Path, trials: u32, rate: impl Fn(&str, &str) -> f64) -> PathBuf {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/ablate.toml");
    let mut exp = ablate::experiment::config::load(&cfg).unwrap();
    exp.trials = trials;
    // Every task of the suite (14): enough for a verdict after the family's adjustment.
    exp.tasks.clear();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let run = dir.join("run");
    synth::write_run(&run, &exp, &suite, &plan, 11, rate).unwrap();
    run
}

fn rate(_task: &str, arm: &str) -> f64 {
    match arm {
        "full" => 0.9,
        "full-minus-feedback" => 0.1,
        "bare" => 0.2,
        _ => 0.85,
    }
}

fn ablate(args: &[&str]) -> (i32, String, String) {
    let out = common::output_within(Command::new(env!("CARGO_BIN_EXE_ablate")).args(args).env("NO_COLOR", "1"), Duration::from_secs(60));
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn csv_rows(path: &Path) -> Vec<HashMap<String, String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let headers = r.headers().unwrap().clone();
    r.records().map(|rec| headers.iter().zip(rec.unwrap().iter()).map(|(h, v)| (h.to_string(), v.to_string())).collect()).collect()
}

#[test]
fn report_writes_every_file_with_the_right_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 4, rate);
    let (code, out, err) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for f in ["trials.csv", "arms.csv", "effects.csv", "report.json", "report.md", "report.html"] {
        assert!(run.join(f).is_file(), "{f} written");
    }
    let trials = csv_rows(&run.join("trials.csv"));
    assert_eq!(trials.len(), 14 * 7 * 4, "14 tasks x 7 arms of configs/ablate.toml");
    let components = ["component.feedback", "component.loop_guard", "component.tools"];
    for c in components {
        assert!(trials[0].contains_key(c), "{c} in trials.csv: {:?}", trials[0].keys());
    }
    assert!(trials.iter().all(|t| t["counted"] == "true"), "one attempt per trial: every row counts");

    // The pass rate of an arm is the mean of its per-task means, recomputed here from trials.csv.
    let mut per_task: HashMap<(String, String), (f64, f64)> = HashMap::new();
    for t in &trials {
        let e = per_task.entry((t["arm"].clone(), t["task"].clone())).or_default();
        e.0 += if t["status"] == "passed" { 1.0 } else { 0.0 };
        e.1 += 1.0;
    }
    let arms = csv_rows(&run.join("arms.csv"));
    assert_eq!(arms.len(), 7);
    for a in &arms {
        let means: Vec<f64> = per_task.iter().filter(|((arm, _), _)| *arm == a["arm"]).map(|(_, (p, n))| p / n).collect();
        let expect = means.iter().sum::<f64>() / means.len() as f64;
        let got: f64 = a["pass_rate"].parse().unwrap();
        assert!((got - expect).abs() < 1e-9, "{}: {got} vs {expect}", a["arm"]);
        let (lo, hi): (f64, f64) = (a["pass_rate_lo"].parse().unwrap(), a["pass_rate_hi"].parse().unwrap());
        assert!(lo <= got && got <= hi);
        assert_eq!(a["trials"], "56");
    }

    let effects = csv_rows(&run.join("effects.csv"));
    assert_eq!(effects.len(), 6, "5 ablations + 1 combined");
    let fb = effects.iter().find(|e| e["components"] == "feedback").unwrap();
    assert_eq!(fb["kind"], "ablation");
    assert_eq!((fb["treatment"].as_str(), fb["control"].as_str()), ("full", "full-minus-feedback"));
    let delta: f64 = fb["delta"].parse().unwrap();
    assert!(delta > 0.5, "{delta}");
    assert_eq!(fb["verdict"], "helps");
    let (p, padj): (f64, f64) = (fb["p_value"].parse().unwrap(), fb["p_adjusted"].parse().unwrap());
    assert!((padj - (5.0 * p).min(1.0)).abs() < 1e-12, "Bonferroni over 5 ablations");
    assert_eq!(fb["interval_level"], "0.99");
    assert_eq!(fb["method"], "sign_flip_exact+mover");
    // The verdict is read from the interval, which agrees with the adjusted p-value.
    for e in &effects {
        let (lo, hi): (f64, f64) = (e["lo"].parse().unwrap(), e["hi"].parse().unwrap());
        let level = 1.0 - e["interval_level"].parse::<f64>().unwrap();
        let p: f64 = e["p_value"].parse().unwrap();
        assert_eq!(e["verdict"].starts_with("helps"), lo > 0.0, "{e:?}");
        assert_eq!(e["verdict"].starts_with("hurts"), hi < 0.0, "{e:?}");
        assert_eq!(lo > 0.0 || hi < 0.0, p <= level + 1e-9, "{e:?}");
    }
    let combined = effects.iter().find(|e| e["kind"] == "combined").unwrap();
    assert_eq!(combined["p_adjusted"], "", "combined comparisons are not in the family");

    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["ablations"].as_array().unwrap().len(), 5);
    let ks: Vec<u64> = json["arms"][0]["pass_at_k"].as_array().unwrap().iter().map(|t| t[0].as_u64().unwrap()).collect();
    assert_eq!(ks, vec![1, 2, 3], "pass@k for k in 1, 2, 3 with 4 trials per task");
    let (at1, hat1) = (json["arms"][0]["pass_at_k"][0][1].as_f64().unwrap(), json["arms"][0]["pass_at_k"][0][2].as_f64().unwrap());
    assert!((at1 - hat1).abs() < 1e-12, "pass@1 = pass^1");
    assert!((at1 - json["arms"][0]["pass_rate"]["mean"].as_f64().unwrap()).abs() < 1e-12, "pass@1 is the pass rate");

    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("forest plot") && !html.contains("<script"));
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(md.contains("## Ablations") && md.contains("## Combined comparisons"));

    assert!(out.contains("Arm full "), "{out}");
    assert!(out.contains("Ablations (treatment - control"), "{out}");
    assert!(out.contains("helps"), "{out}");
    assert!(out.contains("not attributable"), "{out}");
    assert!(!out.contains("\x1b["), "no colour when NO_COLOR is set");
}

#[test]
fn analysis_refuses_an_ablation_whose_arms_differ_in_two_components() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 1, rate);
    let mpath = run.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&mpath).unwrap()).unwrap();
    // Edit the recorded arm so that the feedback ablation's control differs in tools too.
    for arm in m["experiment"]["arms"].as_array_mut().unwrap() {
        if arm["name"] == "full-minus-feedback" {
            arm["components"]["tools"] = serde_json::json!(false);
        }
    }
    std::fs::write(&mpath, serde_json::to_string(&m).unwrap()).unwrap();
    let (code, out, _) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("refused: not shown as an ablation") && out.contains("differ in 2 components"), "{out}");
    let effects = csv_rows(&run.join("effects.csv"));
    assert!(effects.iter().all(|e| e["components"] != "feedback"), "not reported as an ablation");
}

#[test]
fn one_trial_per_task_and_a_torn_line_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 1, rate);
    let mut f = std::fs::OpenOptions::new().append(true).open(run.join("trials.jsonl")).unwrap();
    std::io::Write::write_all(&mut f, b"{\"trial_id\":\"ab").unwrap();
    let (code, out, _) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("unreadable lines in trials.jsonl: [99]"), "{out}");
    let effects = csv_rows(&run.join("effects.csv"));
    assert!(effects.iter().all(|e| e["n_tasks"] == "14"));
    assert_eq!(csv_rows(&run.join("trials.csv")).len(), 98);
}

#[test]
fn plan_from_a_pilot_sizes_each_ablation() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 3, |task, arm| {
        if arm == "full" {
            0.7
        } else if task.len() % 2 == 0 {
            0.2
        } else {
            0.6
        }
    });
    let (code, out, err) = ablate(&["plan", "--pilot", run.to_str().unwrap(), "--mde", "0.10"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("80% power to detect a paired effect of 10.0 pp"), "{out}");
    assert_eq!(out.matches("var(d)").count(), 5, "one line per ablation: {out}");
    assert!(out.contains("tasks at 3.0 trials per task"), "{out}");
    // A larger effect needs fewer tasks.
    let needed = |o: &str| -> u64 { o.lines().find(|l| l.contains("tasks at")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap() };
    let (_, out2, _) = ablate(&["plan", "--pilot", run.to_str().unwrap(), "--mde", "0.30"]);
    assert!(needed(&out2) < needed(&out), "{out2}");
    let (code, _, _) = ablate(&["plan", "--pilot", run.to_str().unwrap(), "--mde", "0"]);
    assert_eq!(code, 2);
}

/// A synthetic run of any config, `rate(task, arm)` per trial.
fn generate_from(dir: &Path, config: &str, rate: impl Fn(&str, &str) -> f64) -> PathBuf {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join(config);
    let exp = ablate::experiment::config::load(&cfg).unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let run = dir.join("run");
    synth::write_run(&run, &exp, &suite, &plan, 5, rate).unwrap();
    run
}

#[test]
fn the_one_task_seed_demo_gets_an_answer_for_that_task() {
    let dir = tempfile::tempdir().unwrap();
    // configs/seed-demo.toml: one task, 5 trials per arm and model; bare never passes, the harness always.
    let run = generate_from(dir.path(), "configs/seed-demo.toml", |_, arm| if arm == "bare" { 0.0 } else { 1.0 });
    let (code, out, err) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let effects = csv_rows(&run.join("effects.csv"));
    assert_eq!(effects.len(), 2, "one combined comparison per model");
    for e in &effects {
        assert_eq!(e["scope"], "one task: parse-duration");
        assert_eq!(e["method"], "newcombe_one_task");
        // Newcombe 1998 method 10, 5/5 - 0/5: lo = 1 - sqrt(2) * 3.8415/8.8415 = 0.38555 (hand).
        let lo: f64 = e["lo"].parse().unwrap();
        assert!((lo - 0.385548).abs() < 1e-5, "{lo}");
        assert_eq!(e["verdict"], "helps (this task only)");
    }
    assert!(out.contains("says nothing about other tasks"), "{out}");
}

#[test]
fn infrastructure_errors_in_one_arm_are_flagged_with_the_effect_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 4, |_, arm| if arm == "full" || arm == "full-minus-feedback" { 0.5 } else { 0.6 });
    // Turn every third record of full-minus-feedback into a provider error.
    let path = run.join("trials.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut n = 0;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            // The generator's own occasional provider errors become plain failures.
            if v["status"] == "provider_error" {
                v["status"] = serde_json::json!("failed");
            }
            if v["arm"] == "full-minus-feedback" {
                n += 1;
                if n % 3 == 0 {
                    v["status"] = serde_json::json!("provider_error");
                }
            }
            serde_json::to_string(&v).unwrap()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let (code, out, err) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let effects = csv_rows(&run.join("effects.csv"));
    let fb = effects.iter().find(|e| e["components"] == "feedback").unwrap();
    assert_eq!((fb["infra_errors_control"].as_str(), fb["infra_differs"].as_str()), ("18", "true"), "56 trials, every third");
    assert!(!fb["delta_excl_infra"].is_empty() && fb["delta_excl_infra"] != fb["delta"], "{fb:?}");
    assert!(out.contains("infrastructure errors differ (0 in full, 18 in full-minus-feedback)"), "{out}");
    let other = effects.iter().find(|e| e["components"] == "tools").unwrap();
    assert_eq!(other["infra_differs"], "false");
}

/// The columns of a CSV, in file order.
fn csv_header(path: &Path) -> Vec<String> {
    csv::Reader::from_path(path).unwrap().headers().unwrap().iter().map(String::from).collect()
}

#[test]
fn exports_are_typed_identified_and_mark_the_counted_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 2, rate);
    // An interrupted-then-rerun trial: its first record becomes attempt 1 (failed) and a
    // second record, attempt 2 (passed), follows: only attempt 2 counts.
    let path = run.join("trials.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let mut again = first.clone();
    again["attempt"] = serde_json::json!(2);
    again["status"] = serde_json::json!("passed");
    let mut once = first.clone();
    once["status"] = serde_json::json!("failed");
    let rest: Vec<&str> = text.lines().skip(1).collect();
    std::fs::write(&path, format!("{}\n{}\n{}\n", serde_json::to_string(&once).unwrap(), rest.join("\n"), serde_json::to_string(&again).unwrap())).unwrap();
    let (code, _, err) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");

    let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    let ids = [
        manifest["run_id"].as_str().unwrap(),
        manifest["experiment"]["name"].as_str().unwrap(),
        manifest["config_digest"].as_str().unwrap(),
        manifest["suite"]["digest"].as_str().unwrap(),
    ];
    // Column types as docs/exports.md states them.
    let floats: &[&str] = &[
        "alpha",
        "pass_rate",
        "pass_rate_lo",
        "pass_rate_hi",
        "pass_rate_excl_infra",
        "tests_passed_fraction",
        "tokens_per_trial",
        "working_seconds_per_trial",
        "steps_per_trial",
        "working_seconds",
        "wall_seconds",
        "rate_limit_wait_seconds",
        "control_rate",
        "treatment_rate",
        "delta",
        "lo",
        "hi",
        "interval_level",
        "p_value",
        "p_adjusted",
        "mde",
        "cost_usd",
    ];
    let ints: &[&str] =
        &["trials", "tasks", "repeat", "seed", "attempt", "steps", "tokens_input", "passed", "failed", "n_tasks", "family_size", "infra_errors_control"];
    let bools: &[&str] = &["counted", "infra_differs"];
    for file in ["trials.csv", "arms.csv", "effects.csv"] {
        let header = csv_header(&run.join(file));
        assert_eq!(&header[..4], ["run_id", "experiment", "config_digest", "suite_digest"], "{file}");
        let rows = csv_rows(&run.join(file));
        for row in &rows {
            assert_eq!([row["run_id"].as_str(), &row["experiment"], &row["config_digest"], &row["suite_digest"]], ids, "{file}");
            for (col, v) in row.iter().filter(|(_, v)| !v.is_empty()) {
                if floats.contains(&col.as_str()) {
                    assert!(v.parse::<f64>().is_ok() && (v.contains('.') || v.contains('e')), "{file} {col} = {v}: not a float");
                } else if ints.contains(&col.as_str()) {
                    assert!(v.parse::<i64>().is_ok(), "{file} {col} = {v}: not an integer");
                } else if bools.contains(&col.as_str()) {
                    assert!(v == "true" || v == "false", "{file} {col} = {v}");
                }
            }
        }
        if file == "trials.csv" {
            // docs/exports.md's order: the run's four, then trials.csv's own.
            let expected = "run_id,experiment,config_digest,suite_digest,trial_id,task,arm,model,repeat,seed,attempt,counted,status,end_reason,\
                            budget_limit,tests_passed,tests_total,steps,sessions,tokens_input,tokens_output,tokens_cached,working_seconds,wall_seconds,\
                            rate_limit_wait_seconds,cost_usd,loop_guard_hits,invalid_tool_calls,unparsed_replies,path_refusals,snapshot_sha256,\
                            finished_at,system_fingerprints";
            let expected: Vec<&str> = expected.split(',').collect();
            assert_eq!(header[..expected.len()], expected[..]);
            // The two attempts of the rerun trial: only the second counts.
            let tid = first["trial_id"].as_str().unwrap();
            let of: Vec<(&str, &str)> = rows.iter().filter(|r| r["trial_id"] == tid).map(|r| (r["attempt"].as_str(), r["counted"].as_str())).collect();
            assert_eq!(of, vec![("1", "false"), ("2", "true")]);
            assert_eq!(rows.iter().filter(|r| r["counted"] == "true").count(), 14 * 7 * 2);
        }
    }
    // Component values as columns: the ablated arm differs from full in its component only.
    let arms = csv_rows(&run.join("arms.csv"));
    let full = arms.iter().find(|a| a["arm"] == "full").unwrap();
    let minus = arms.iter().find(|a| a["arm"] == "full-minus-feedback").unwrap();
    assert_ne!(full["component.feedback"], minus["component.feedback"]);
    assert_eq!(full["component.tools"], minus["component.tools"]);
    assert!(!full["component.feedback"].is_empty());
    // Effect rows carry both rates, the interval's level and method, and the adjustment.
    let effects = csv_rows(&run.join("effects.csv"));
    for e in &effects {
        let (c, t, d): (f64, f64, f64) = (e["control_rate"].parse().unwrap(), e["treatment_rate"].parse().unwrap(), e["delta"].parse().unwrap());
        assert!((t - c - d).abs() < 1e-9, "{e:?}");
        assert!(!e["method"].is_empty() && !e["adjustment"].is_empty());
    }
    // The counted rows give the report's pass rate (the naive count over every row would not).
    let trials = csv_rows(&run.join("trials.csv"));
    let mut per_task: HashMap<String, (f64, f64)> = HashMap::new();
    for t in trials.iter().filter(|t| t["arm"] == first["arm"].as_str().unwrap() && t["counted"] == "true") {
        let e = per_task.entry(t["task"].clone()).or_default();
        e.0 += (t["status"] == "passed") as u8 as f64;
        e.1 += 1.0;
    }
    let expect = per_task.values().map(|(p, n)| p / n).sum::<f64>() / per_task.len() as f64;
    let arm = arms.iter().find(|a| a["arm"] == first["arm"].as_str().unwrap()).unwrap();
    assert!((arm["pass_rate"].parse::<f64>().unwrap() - expect).abs() < 1e-12);
}
