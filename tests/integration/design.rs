//! Designed experiments on synthetic runs: a factorial design's effects, harness x model, the
//! variance by source and the tasks that carry an effect, against scripts/design_reference.py
//! (Yates's algorithm and the textbook ANOVA, no code shared with ablate) and known truths.

use ablate_synth as synth;
use std::path::{Path, PathBuf};
use std::process::Command;

const CONFIG: &str = r#"
[experiment]
name = "design"
suite = "../tasks/core"
trials = 6
seed = 5

[budget]
max_steps = 3
max_output_tokens_per_step = 256
max_total_tokens = 12000
max_working_seconds = 90

[[models]]
name = "m1"
provider = "openai"
model = "m1"
endpoint = "http://127.0.0.1:1"
temperature = 0.7

[[models]]
name = "m2"
provider = "openai"
model = "m2"
endpoint = "http://127.0.0.1:1"
temperature = 0.7

[arms.bare]

[matrix.factorial]
from = "bare"
components = ["feedback", "tools", "acceptance"]
"#;

/// 14 tasks x 8 runs x 2 models x 6 trials. Under m1, feedback adds 40 pp; tools with
/// acceptance together add 50 pp (an interaction); under m2 feedback does nothing. Every
/// task has the same rates.
fn generate(dir: &Path) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/design.toml");
    let exp = ablate::experiment::config::load_str(&path, CONFIG).unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let run = dir.join("run");
    let rate = |_: &str, arm: &str, model: &str| {
        let on = |c: &str| arm.contains(c);
        let mut p = 0.05;
        if on("feedback") && model == "m1" {
            p += 0.4;
        }
        if on("tools") && on("acceptance") {
            p += 0.5;
        }
        p
    };
    synth::write_run_by_model(&run, &exp, &suite, &plan, 9, rate).unwrap();
    run
}

fn report(run: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ablate")).arg("report").arg(run).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(run.join("report.json")).unwrap()).unwrap()
}

fn effect<'a>(r: &'a serde_json::Value, model: &str, name: &str) -> &'a serde_json::Value {
    r["factorial"]["effects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| {
            let t = &e["term"];
            let n = match t["kind"].as_str().unwrap() {
                "main" => t["component"].as_str().unwrap().to_string(),
                _ => format!("{} x {}", t["a"].as_str().unwrap(), t["b"].as_str().unwrap()),
            };
            e["model"] == model && n == name
        })
        .unwrap_or_else(|| panic!("no effect {name} for {model}"))
}

/// Every effect, per-task contrast, between-task spread and variance component of the report
/// equals scripts/design_reference.py's; the verdicts find what the rates put there.
#[test]
fn a_factorial_run_matches_an_independent_recomputation() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path());
    let r = report(&run);
    let made = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/design_reference.py"))
        .arg(&run)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&made.stdout);
    assert!(made.status.success(), "{stdout}{}", String::from_utf8_lossy(&made.stderr));
    // 2 models x 6 effects x (estimate + 14 tasks + tau) + 6 variance components.
    assert_eq!(stdout.trim(), format!("compared {} numbers", 2 * 6 * (1 + 14 + 1) + 6));

    // The truths: feedback +40 pp under m1, 0 under m2; tools and acceptance each +25 pp (half
    // of the 50 pp they add together); their interaction +50 pp (with acceptance on, tools adds
    // 50 pp more than with it off).
    let f1 = effect(&r, "m1", "feedback");
    assert_eq!(f1["verdict"], "helps", "{f1}");
    assert!(f1["lo"].as_f64().unwrap() <= 0.4 && 0.4 <= f1["hi"].as_f64().unwrap(), "{f1}");
    let f2 = effect(&r, "m2", "feedback");
    assert_eq!(f2["verdict"], "no detectable effect", "{f2}");
    let ta = effect(&r, "m1", "tools x acceptance");
    assert!(ta["lo"].as_f64().unwrap() > 0.0, "{ta}");
    assert!(ta["lo"].as_f64().unwrap() <= 0.5 && 0.5 <= ta["hi"].as_f64().unwrap(), "{ta}");
    let (on, off) =
        (ta["conditional"][0].as_f64().unwrap(), ta["conditional"][1].as_f64().unwrap());
    assert!((on - off - ta["estimate"].as_f64().unwrap()).abs() < 1e-12, "{ta}");
    // Harness x model: feedback's effect differs between the models; tools' does not.
    let diffs = r["factorial"]["model_differences"].as_array().unwrap();
    let fd = diffs.iter().find(|d| d["effect"] == "feedback").unwrap();
    assert_eq!(fd["verdict"], "helps", "{fd}");
    let td = diffs.iter().find(|d| d["effect"] == "tools").unwrap();
    assert_eq!(td["verdict"], "no detectable effect", "{td}");
    // The exports: factorial.csv has a row per model and effect; report.md says it in words.
    let csv = std::fs::read_to_string(run.join("factorial.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 6, "{csv}");
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        md.contains("## Factorial design") && md.contains("tools changes the outcome by"),
        "{md}"
    );
    assert!(md.contains("## Harness or model: variance by source"), "{md}");
}

/// A factorial design is refused with the sequential design (also when `--until-decided` sets it
/// after the config was read: the plan refuses it) and with a budget sweep, each by name.
#[test]
fn a_factorial_design_refuses_what_it_cannot_run_with() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/design.toml");
    let mut exp = ablate::experiment::config::load_str(&path, CONFIG).unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    exp.sequential = Some(Default::default());
    let err = ablate::plan::build(&exp, &suite).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("matrix.factorial"), "{err}");
    assert!(err.to_string().contains("sequential design"), "{err}");
    let swept = format!("{CONFIG}\n[matrix.budget]\nmax_steps = [1, 2]\n");
    let err = ablate::experiment::config::load_str(&path, &swept).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("matrix.factorial"), "{err}");
    assert!(err.to_string().contains("budget sweep"), "{err}");
}

/// `ablate plan --pilot` on a factorial run sizes each effect: the variance of its per-task
/// contrasts is the sample variance of report.json's per-task contrasts (computed here), and an
/// interaction, on its doubled scale, needs more tasks than the main effect it involves.
#[test]
fn a_pilot_of_a_factorial_design_sizes_its_effects() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path());
    let r = report(&run);
    let out = Command::new(env!("CARGO_BIN_EXE_ablate"))
        .args(["plan", "--pilot"])
        .arg(&run)
        .args(["--mde", "0.2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("each of the 6 effects of the factorial design at 0.0083"), "{text}");
    let var_of = |model: &str, name: &str| {
        let d: Vec<f64> = effect(&r, model, name)["tasks"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["effect"].as_f64().unwrap())
            .collect();
        let m = d.iter().sum::<f64>() / d.len() as f64;
        d.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (d.len() as f64 - 1.0)
    };
    for (name, label) in
        [("tools", "factorial: tools"), ("tools x acceptance", "factorial: tools x acceptance")]
    {
        let want = format!("{label} [m1]: var(d) {:.4}", var_of("m1", name));
        assert!(text.contains(&want), "{want}\n{text}");
    }
    let tasks = |label: &str| -> u64 {
        let line =
            text.lines().skip_while(|l| !l.contains(&format!("{label} [m2]"))).nth(1).unwrap();
        line.trim().strip_prefix("-> ").unwrap().split(' ').next().unwrap().parse().unwrap()
    };
    assert!(tasks("factorial: tools x acceptance") > tasks("factorial: tools"), "{text}");
}

/// A factorial design shards like any plan: three shards partition its trials, and each shard's
/// manifest carries the design (the merged run's manifest is a shard's, so its report has it).
#[test]
fn a_factorial_design_shards() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/design.toml");
    let exp = ablate::experiment::config::load_str(&path, CONFIG).unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let order = ablate::plan::order(&exp, &suite).unwrap();
    let mut ids: Vec<String> = Vec::new();
    for k in 1..=3 {
        let shard: ablate::plan::Shard = format!("{k}/3").parse().unwrap();
        ids.extend(plan.shard(Some(shard)).into_iter().map(|t| t.id));
        let m = ablate::plan::manifest(
            format!("s{k}"),
            &exp,
            &suite,
            &order,
            Some(shard),
            ablate::runner::facts::runner_facts(&exp),
        );
        assert_eq!(m.experiment.factorial, exp.factorial, "shard {k}");
    }
    ids.sort();
    let mut all: Vec<String> = plan.trials.iter().map(|t| t.id.clone()).collect();
    all.sort();
    assert_eq!(ids, all);
    assert_eq!(all.len(), 14 * 8 * 2 * 6);
}
