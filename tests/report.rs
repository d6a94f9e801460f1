//! `ablate report` on generated run folders: files, key numbers, the guard.

use ablate::report::synth;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn generate(dir: &Path, trials: u32, rate: impl Fn(&str, &str) -> f64) -> PathBuf {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/ablate.toml");
    let mut exp = ablate::config::load(&cfg).unwrap();
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
    let out = Command::new(env!("CARGO_BIN_EXE_ablate")).args(args).env("NO_COLOR", "1").output().unwrap();
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
    assert_eq!(trials[0].len(), ablate::report::export::TRIALS_COLUMNS.len());

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
    let run = generate(dir.path(), 3, |task, arm| if arm == "full" { 0.7 } else if task.len() % 2 == 0 { 0.2 } else { 0.6 });
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
    let exp = ablate::config::load(&cfg).unwrap();
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
