//! `ablate import` on runs made by the tools themselves: Inspect eval logs
//! written by `inspect_ai.eval` with its offline mock model, and Harbor job
//! folders written with harbor's own pydantic result models
//! (tests/fixtures/import/make_*.py, run with target/import-venv: make
//! import-venv installs inspect-ai and harbor from PyPI). The imported run's
//! report is checked against `scripts/import_reference.py`, which reads the
//! source files itself and recomputes the pass rates and each paired effect
//! from docs/import.md and docs/statistics.md, and against the outcome tables
//! written at the top of the two generators. Without the venv the tests are
//! skipped loudly; with CI set they fail.

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn venv_python() -> Option<PathBuf> {
    let p = root().join("target/import-venv/bin/python");
    let works = p.exists()
        && Command::new(&p)
            .args(["-c", "import inspect_ai, harbor"])
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .output()
            .is_ok_and(|o| o.status.success());
    if works {
        return Some(p);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "target/import-venv is missing or does not import inspect_ai and harbor: run make import-venv (make test does)"
        );
    }
    eprintln!(
        "\n*** SKIPPED: the import tests need target/import-venv with inspect-ai and harbor (make import-venv; PyPI, Python >= 3.12) ***\n"
    );
    None
}

/// Run a generator into `out`.
fn generate(python: &Path, script: &str, out: &Path, extra: &[&str]) {
    let o = common::output_within(
        Command::new(python)
            .arg(root().join("tests/fixtures/import").join(script))
            .arg(out)
            .args(extra)
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("INSPECT_DISPLAY", "none"),
        Duration::from_secs(300),
    );
    assert!(
        o.status.success(),
        "{script} failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn ablate(args: &[&str]) -> (i32, String, String) {
    common::code_and_output(
        Command::new(env!("CARGO_BIN_EXE_ablate")).args(args),
        Duration::from_secs(120),
    )
}

fn ok(args: &[&str]) -> String {
    let (code, out, err) = ablate(args);
    assert_eq!(code, 0, "ablate {args:?}: exit {code}\n{out}\n{err}");
    out
}

/// Exit 2 and a message on stderr holding every one of `needles`.
fn refused(args: &[&str], needles: &[&str]) -> String {
    let (code, out, err) = ablate(args);
    assert_eq!(code, 2, "ablate {args:?} should be refused (exit 2), got {code}\n{out}\n{err}");
    for n in needles {
        assert!(err.contains(n), "ablate {args:?}: stderr lacks `{n}`:\n{err}");
    }
    err
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

fn reference(args: &[&str]) -> Value {
    let o = common::output_within(
        Command::new("python3").arg(root().join("scripts/import_reference.py")).args(args),
        Duration::from_secs(300),
    );
    assert!(
        o.status.success(),
        "import_reference.py {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Whole numbers as integers, however written (docs/import.md: `0` and `0.0` are one value).
fn norm(v: &Value) -> Value {
    match v {
        Value::Number(n) if n.as_f64().is_some_and(|x| x.fract() == 0.0) => {
            Value::from(n.as_f64().unwrap() as i64)
        }
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), norm(v))).collect()),
        other => other.clone(),
    }
}

/// Each arm's component values, by name, from the manifest.
fn arm_values(run: &Path) -> Vec<(String, Value)> {
    let m = json(&run.join("manifest.json"));
    m["experiment"]["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["name"].as_str().unwrap().to_string(), a["values"].clone()))
        .collect()
}

/// The report's arms and effects checked against the reference's, matched by component values.
fn matches_reference(run: &Path, reference: &Value) {
    let report = json(&run.join("report.json"));
    let arms = arm_values(run);
    let name_of = |values: &Value| -> String {
        arms.iter()
            .find(|(_, v)| norm(v) == norm(values))
            .unwrap_or_else(|| panic!("no arm with values {values}; arms: {arms:?}"))
            .0
            .clone()
    };
    let ref_arms = reference["arms"].as_array().unwrap();
    assert_eq!(ref_arms.len(), arms.len(), "arms: reference {ref_arms:?}, ablate {arms:?}");
    for ra in ref_arms {
        let name = name_of(&ra["values"]);
        let arm = report["arms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["arm"] == name.as_str())
            .unwrap_or_else(|| panic!("report has no arm {name}"));
        let (want, got) =
            (ra["pass_rate"].as_f64().unwrap(), arm["pass_rate"]["mean"].as_f64().unwrap());
        assert!((want - got).abs() < 1e-9, "arm {name}: pass rate {got}, reference {want}");
    }
    let ref_cmp = reference["comparisons"].as_array().unwrap();
    let effects: Vec<&Value> = report["ablations"]
        .as_array()
        .unwrap()
        .iter()
        .chain(report["combined"].as_array().unwrap())
        .collect();
    assert_eq!(
        ref_cmp.len(),
        effects.len(),
        "comparisons: reference {ref_cmp:?}\nablate {effects:?}"
    );
    for rc in ref_cmp {
        let (control, treatment) = (name_of(&rc["control"]), name_of(&rc["treatment"]));
        let e = effects
            .iter()
            .find(|e| e["control"] == control.as_str() && e["treatment"] == treatment.as_str())
            .unwrap_or_else(|| {
                panic!("report has no effect {treatment} vs {control}: {effects:?}")
            });
        assert_eq!(e["kind"], rc["kind"], "{treatment} vs {control}: {e}");
        for (field, tol) in [
            ("delta", 1e-9),
            ("lo", 1e-6),
            ("hi", 1e-6),
            ("p_value", 1e-6),
            ("interval_level", 1e-12),
        ] {
            let (want, got) = (rc[field].as_f64().unwrap(), e[field].as_f64().unwrap());
            assert!(
                (want - got).abs() < tol,
                "{treatment} vs {control}: {field} {got}, reference {want}\nablate: {e}\nreference: {rc}"
            );
        }
    }
}

fn statuses(run: &Path) -> std::collections::BTreeMap<(String, String), usize> {
    let text = std::fs::read_to_string(run.join("trials.jsonl")).unwrap();
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        *out.entry((
            r["arm"].as_str().unwrap().to_string(),
            r["status"].as_str().unwrap().to_string(),
        ))
        .or_default() += 1;
    }
    out
}

#[test]
fn inspect_logs_written_by_inspect_import_as_a_run_whose_report_is_recomputed_from_the_logs() {
    let Some(python) = venv_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    generate(&python, "make_inspect_logs.py", &logs, &[]);
    let (short, long, hint) = (
        logs.join("qa__style-short.eval"),
        logs.join("qa__style-long.json"),
        logs.join("qa__style-long-hint.eval"),
    );
    let run = tmp.path().join("imported");
    let out = ok(&["import", "inspect", s(&short), s(&long), s(&hint), "-o", s(&run)]);
    assert!(out.contains("90 trials of 10 tasks imported"), "{out}");

    // Arms and components: the solver arguments that differ; the single-factor guard on each pair.
    let m = json(&run.join("manifest.json"));
    assert_eq!(m["experiment"]["harness_kind"]["kind"], "imported");
    assert_eq!(
        m["imported"]["components"],
        serde_json::json!({"solver_args.style": "solver_args.style", "solver_args.hint": "solver_args.hint"})
    );
    assert_eq!(m["imported"]["shared"]["model"], "mockllm/model");
    assert_eq!(m["imported"]["sources"].as_array().unwrap().len(), 3);
    let comparisons = m["experiment"]["comparisons"].as_array().unwrap();
    let kinds: Vec<(String, String)> = comparisons
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["kind"]["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(kinds.iter().filter(|(_, k)| k == "ablation").count(), 2, "{kinds:?}");
    assert_eq!(kinds.iter().filter(|(_, k)| k == "combined").count(), 1, "{kinds:?}");
    let combined = comparisons.iter().find(|c| c["kind"]["kind"] == "combined").unwrap();
    assert_eq!(
        combined["differs"].as_array().unwrap().len(),
        2,
        "short vs long-hint differ in style and hint: {combined}"
    );

    // Statuses as the generator's table says: one errored epoch in short and long, kept as harness_error.
    let st = statuses(&run);
    let arms = arm_values(&run);
    let arm = |style: &str, hint: bool| {
        arms.iter()
            .find(|(_, v)| v["solver_args.style"] == style && v["solver_args.hint"] == hint)
            .map(|(n, _)| n.clone())
            .unwrap()
    };
    let count = |arm: &str, status: &str| {
        st.get(&(arm.to_string(), status.to_string())).copied().unwrap_or(0)
    };
    // The table (make_inspect_logs.py): short 11 C, 18 I, 1 E; long 22 C, 7 I, 1 E; long-hint 25 C, 5 I.
    assert_eq!(
        (
            count(&arm("short", false), "passed"),
            count(&arm("short", false), "failed"),
            count(&arm("short", false), "harness_error")
        ),
        (11, 18, 1)
    );
    assert_eq!(
        (
            count(&arm("long", false), "passed"),
            count(&arm("long", false), "failed"),
            count(&arm("long", false), "harness_error")
        ),
        (22, 7, 1)
    );
    assert_eq!((count(&arm("long", true), "passed"), count(&arm("long", true), "failed")), (25, 5));

    // The report, against the table by hand and against the independent recomputation.
    ok(&["report", s(&run)]);
    let report = json(&run.join("report.json"));
    let rate = |name: &str| {
        report["arms"].as_array().unwrap().iter().find(|a| a["arm"] == name).unwrap()["pass_rate"]["mean"].as_f64().unwrap()
    };
    // short: per-sample fractions 3,2,0,0,1,0,1,0,1,3 thirds -> 11/30; long: 3,3,2,1,3,2,2,1,2,3 thirds -> 22/30
    // (the errored epoch of s03 counts as a failed trial).
    assert!((rate(&arm("short", false)) - 11.0 / 30.0).abs() < 1e-12);
    assert!((rate(&arm("long", false)) - 22.0 / 30.0).abs() < 1e-12);
    let jsons: Vec<PathBuf> =
        [&short, &long, &hint].iter().map(|p| p.with_extension("json")).collect();
    matches_reference(&run, &reference(&["inspect", s(&jsons[0]), s(&jsons[1]), s(&jsons[2])]));

    // The same inputs again: the same bytes.
    let before = (
        std::fs::read(run.join("manifest.json")).unwrap(),
        std::fs::read(run.join("trials.jsonl")).unwrap(),
    );
    refused(
        &["import", "inspect", s(&short), s(&long), s(&hint), "-o", s(&run)],
        &["exists and is not empty", "--force"],
    );
    ok(&["import", "inspect", s(&short), s(&long), s(&hint), "-o", s(&run), "--force"]);
    assert_eq!(
        before,
        (
            std::fs::read(run.join("manifest.json")).unwrap(),
            std::fs::read(run.join("trials.jsonl")).unwrap()
        ),
        "a second import differs"
    );

    // The gate and the baseline read it like any run.
    let baseline = tmp.path().join("baseline.csv");
    ok(&[
        "baseline",
        "save",
        s(&run),
        "--arm",
        &arm("short", false),
        "--model",
        "mockllm/model",
        "-o",
        s(&baseline),
    ]);
    let (code, out, err) = ablate(&[
        "gate",
        "--baseline",
        s(&baseline),
        "--candidate",
        s(&run),
        "--arm",
        &arm("long", false),
    ]);
    assert!(matches!(code, 0 | 1 | 3), "gate on an imported run: exit {code}\n{out}\n{err}");
    assert!(out.contains("PASS") || out.contains("FAIL") || out.contains("INCONCLUSIVE"), "{out}");

    // A numeric scorer and the map's threshold: 0.75 passes at 0.5 and fails at the default 1.0.
    let numeric = logs.join("qa_numeric__style-short.json");
    let strict = tmp.path().join("numeric-strict");
    ok(&["import", "inspect", s(&numeric), "-o", s(&strict)]);
    assert_eq!(
        statuses(&strict)
            .iter()
            .filter(|((_, st), _)| st == "passed")
            .map(|(_, n)| n)
            .sum::<usize>(),
        0
    );
    let map = tmp.path().join("map.toml");
    std::fs::write(&map, "name = \"numeric\"\n[pass]\nthreshold = 0.5\n").unwrap();
    let lenient = tmp.path().join("numeric-lenient");
    ok(&["import", "inspect", s(&numeric), "-o", s(&lenient), "--map", s(&map)]);
    assert_eq!(
        statuses(&lenient)
            .iter()
            .filter(|((_, st), _)| st == "passed")
            .map(|(_, n)| n)
            .sum::<usize>(),
        11
    );

    // A message limit is a budget stop with its score kept; a retried error stays an error.
    let extras = tmp.path().join("extras");
    ok(&[
        "import",
        "inspect",
        s(&logs.join("extras/qa_extras__retry-limit.json")),
        "-o",
        s(&extras),
    ]);
    let st = statuses(&extras);
    assert_eq!(
        st.iter().filter(|((_, s), _)| s == "budget_exhausted").map(|(_, n)| n).sum::<usize>(),
        29,
        "{st:?}"
    );
    assert_eq!(
        st.iter().filter(|((_, s), _)| s == "harness_error").map(|(_, n)| n).sum::<usize>(),
        1,
        "{st:?}"
    );

    // Bad input names the file and the key, and writes nothing.
    let bad = tmp.path().join("v9.json");
    let mut log = json(&long);
    log["version"] = Value::from(9);
    std::fs::write(&bad, serde_json::to_vec(&log).unwrap()).unwrap();
    let nothing = tmp.path().join("nothing");
    refused(&["import", "inspect", s(&bad), "-o", s(&nothing)], &["v9.json", "version", "9"]);
    let torn = tmp.path().join("torn.json");
    let text = std::fs::read(&long).unwrap();
    std::fs::write(&torn, &text[..text.len() / 2]).unwrap();
    refused(&["import", "inspect", s(&torn), "-o", s(&nothing)], &["torn.json", "not JSON"]);
    refused(
        &["import", "inspect", s(&long), s(&long), "-o", s(&nothing)],
        &["is also in", "qa__style-long.json"],
    );
    std::fs::write(&map, "[pass]\nthreshhold = 0.5\n").unwrap();
    refused(
        &["import", "inspect", s(&long), "-o", s(&nothing), "--map", s(&map)],
        &["map.toml", "threshhold"],
    );
    std::fs::write(&map, "[arms]\nno-such-arm = \"x\"\n").unwrap();
    refused(
        &["import", "inspect", s(&long), s(&short), "-o", s(&nothing), "--map", s(&map)],
        &["map.toml", "no-such-arm", "derived arms"],
    );
    assert!(!nothing.exists(), "a refused import wrote its output");
    let not_imported = tmp.path().join("mine");
    std::fs::create_dir(&not_imported).unwrap();
    std::fs::write(not_imported.join("notes.txt"), "mine").unwrap();
    refused(
        &["import", "inspect", s(&long), "-o", s(&not_imported), "--force"],
        &["not an imported run"],
    );
    assert_eq!(std::fs::read_to_string(not_imported.join("notes.txt")).unwrap(), "mine");

    // A FIFO named like a log is refused at once; a 2 GiB file is refused without being read.
    let odd = tmp.path().join("odd");
    std::fs::create_dir(&odd).unwrap();
    let fifo = odd.join("fifo.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    refused(
        &["import", "inspect", s(&fifo), "-o", s(&nothing)],
        &["fifo.json", "not a regular file"],
    );
    let big = odd.join("big.json");
    std::fs::File::create(&big).unwrap().set_len(2 << 30).unwrap();
    refused(
        &["import", "inspect", s(&big), "-o", s(&nothing)],
        &["big.json", "2147483648 bytes, over the"],
    );
    // An .eval archive of 1 MB whose header decompresses to 1.1 GiB: refused before it is inflated.
    let bomb = odd.join("bomb.eval");
    let made = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:\n    with z.open('header.json', 'w', force_zip64=True) as f:\n        for _ in range(1126):\n            f.write(bytes(1 << 20))\n",
            s(&bomb),
        ])
        .status()
        .unwrap();
    assert!(made.success());
    assert!(std::fs::metadata(&bomb).unwrap().len() < 4 << 20);
    refused(
        &["import", "inspect", s(&bomb), "-o", s(&nothing)],
        &["bomb.eval", "decompresses to more than"],
    );
}

#[test]
fn harbor_jobs_written_with_harbors_models_import_as_a_run_whose_report_is_recomputed_from_the_jobs()
 {
    let Some(python) = venv_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("jobs");
    generate(&python, "make_harbor_jobs.py", &jobs, &[]);
    let (a, b, c) = (jobs.join("job-a"), jobs.join("job-b"), jobs.join("job-c"));
    let run = tmp.path().join("imported");
    let out = ok(&["import", "harbor", s(&a), s(&b), s(&c), "-o", s(&run)]);
    assert!(out.contains("18 trials of 3 tasks imported"), "{out}");

    let m = json(&run.join("manifest.json"));
    // Three jobs of one agent: named by the agent and the job count, not every job name joined.
    assert_eq!(m["experiment"]["name"], "terminus-2 (3 jobs)");
    assert_eq!(m["imported"]["tool"], "harbor");
    assert_eq!(m["imported"]["tool_versions"], serde_json::json!(["0.26.0"]));
    let components: Vec<&str> =
        m["imported"]["components"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(components, ["kwargs.temperature", "model"], "(keys read back sorted)");
    assert_eq!(m["models"][0]["name"], "mixed", "arms differ in the model: it is a component");
    // job-a vs job-b: the temperature alone (an ablation); job-b vs job-c: the model alone; job-a vs job-c: both (combined).
    let comparisons = m["experiment"]["comparisons"].as_array().unwrap();
    let mut kinds: Vec<String> = comparisons
        .iter()
        .map(|c| match c["kind"]["component"].as_str() {
            Some(component) => format!("ablation {component}"),
            None => format!("combined {}", c["differs"].as_array().unwrap().len()),
        })
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["ablation kwargs.temperature", "ablation model", "combined 2"]);

    // Statuses from Harbor's exception types (the generator's table).
    let arms = arm_values(&run);
    let arm = |model: &str, t: f64| {
        arms.iter()
            .find(|(_, v)| v["model"] == model && v["kwargs.temperature"] == t)
            .map(|(n, _)| n.clone())
            .unwrap()
    };
    let (ja, jb, jc) =
        (arm("openai/gpt-4o-mini", 0.0), arm("openai/gpt-4o-mini", 0.7), arm("openai/gpt-4o", 0.7));
    let st = statuses(&run);
    let count = |arm: &str, status: &str| {
        st.get(&(arm.to_string(), status.to_string())).copied().unwrap_or(0)
    };
    assert_eq!(
        [
            count(&ja, "passed"),
            count(&ja, "failed"),
            count(&ja, "timeout"),
            count(&ja, "grader_error")
        ],
        [2, 1, 1, 2],
        "{st:?}"
    );
    assert_eq!([count(&jb, "passed"), count(&jb, "provider_error")], [4, 2], "{st:?}");
    assert_eq!([count(&jc, "passed"), count(&jc, "failed")], [4, 2], "{st:?}");
    let records: Vec<Value> = std::fs::read_to_string(run.join("trials.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let timeout = records.iter().find(|r| r["status"] == "timeout").unwrap();
    assert_eq!(
        timeout["graded_pass"], true,
        "the agent timed out and the verifier's reward 1.0 is kept: {timeout}"
    );
    assert_eq!(timeout["imported"]["detail"]["exception_type"], "AgentTimeoutError");
    assert!(
        timeout["tokens"]["input"].as_u64().unwrap() > 0
            && timeout["cost_usd"].as_f64().unwrap() > 0.0,
        "{timeout}"
    );

    ok(&["report", s(&run)]);
    let report = json(&run.join("report.json"));
    let arm_report = report["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["arm"] == ja.as_str())
        .unwrap()
        .clone();
    // job-a by task: hello-world 1 of 2 passed (the other timed out passing), fix-git 0 of 2, count-lines 1 of 2:
    // every started trial (1/2 + 0 + 1/2) / 3 = 1/3; the final state counting (2/2 + 0 + 1/2) / 3 = 1/2.
    assert!(
        (arm_report["pass_rate"]["mean"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-12,
        "{arm_report}"
    );
    assert!(
        (arm_report["pass_rate_final_state"]["mean"].as_f64().unwrap() - 0.5).abs() < 1e-12,
        "{arm_report}"
    );
    matches_reference(&run, &reference(&["harbor", s(&a), s(&b), s(&c)]));

    // A trial folder without result.json never finished: kept as interrupted.
    let cut = tmp.path().join("cut");
    copy_dir(&jobs, &cut);
    let victim = std::fs::read_dir(cut.join("job-c"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("result.json").is_file())
        .min()
        .unwrap();
    std::fs::remove_file(victim.join("result.json")).unwrap();
    let partial = tmp.path().join("partial");
    ok(&["import", "harbor", s(&cut.join("job-b")), s(&cut.join("job-c")), "-o", s(&partial)]);
    assert_eq!(
        statuses(&partial)
            .iter()
            .filter(|((_, s), _)| s == "interrupted")
            .map(|(_, n)| n)
            .sum::<usize>(),
        1
    );
    assert_eq!(arm_values(&partial).len(), 2, "the unfinished trial joins its agent's arm");

    // A task seen with two checksums is refused, naming both trials.
    let conflict = tmp.path().join("conflict");
    generate(&python, "make_harbor_jobs.py", &conflict, &["--conflict"]);
    let err = refused(
        &[
            "import",
            "harbor",
            s(&conflict.join("job-a")),
            s(&conflict.join("job-b")),
            "-o",
            s(&tmp.path().join("x")),
        ],
        &["count-lines", "checksum"],
    );
    assert!(err.contains("job-a") && err.contains("job-b"), "{err}");
    refused(&["import", "harbor", s(&jobs), "-o", s(&tmp.path().join("x"))], &["give those"]);
    refused(
        &["import", "harbor", s(&a), s(&a), "-o", s(&tmp.path().join("x"))],
        &["the same trial", "job-a"],
    );
    std::fs::create_dir(cut.join("job-b/notes")).unwrap();
    refused(
        &["import", "harbor", s(&cut.join("job-b")), "-o", s(&tmp.path().join("x"))],
        &["notes", "not a Harbor trial folder"],
    );
    refused(
        &["run", "--resume", s(&run), s(&root().join("configs/core.toml"))],
        &["imported from harbor"],
    );

    // Hostile sources: a negative count or cost is refused naming the field; a FIFO or a file
    // over the cap is refused at once, never waited on or read whole.
    let trial_result = |job: &Path| {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(job)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("result.json").is_file())
            .collect();
        dirs.sort();
        dirs[0].join("result.json")
    };
    let edits: [(&str, &str, &str); 2] = [
        ("negative-tokens", "/agent_result/n_input_tokens", "agent_result.n_input_tokens"),
        ("negative-cost", "/agent_result/cost_usd", "agent_result.cost_usd"),
    ];
    for (name, pointer, field) in edits {
        let copy = tmp.path().join(name);
        copy_dir(&a, &copy);
        let result = trial_result(&copy);
        let mut v = json(&result);
        if v.pointer("/agent_result").is_none_or(Value::is_null) {
            v["agent_result"] = serde_json::json!({});
        }
        let leaf = pointer.rsplit('/').next().unwrap();
        v["agent_result"][leaf] = serde_json::json!(-5);
        std::fs::write(&result, serde_json::to_vec(&v).unwrap()).unwrap();
        refused(
            &["import", "harbor", s(&copy), "-o", s(&tmp.path().join("x"))],
            &[result.file_name().unwrap().to_str().unwrap(), field, "-5"],
        );
    }
    let fifo = tmp.path().join("fifo-job");
    copy_dir(&a, &fifo);
    let result = trial_result(&fifo);
    std::fs::remove_file(&result).unwrap();
    let c = std::ffi::CString::new(result.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    refused(
        &["import", "harbor", s(&fifo), "-o", s(&tmp.path().join("x"))],
        &["result.json", "not a regular file"],
    );
    let huge = tmp.path().join("huge-job");
    copy_dir(&a, &huge);
    let result = trial_result(&huge);
    // A sparse file of 65 MiB: over the 64 MiB a Harbor JSON file may have.
    std::fs::File::create(&result).unwrap().set_len(65 << 20).unwrap();
    refused(
        &["import", "harbor", s(&huge), "-o", s(&tmp.path().join("x"))],
        &["result.json", "68157440 bytes, over the 67108864"],
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}
