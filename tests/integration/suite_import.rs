//! `ablate suite import`: HumanEval-shaped and JSONL-schema sources written for
//! the tests (tests/fixtures/imports/), through the real binary.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn ablate(args: &[&str]) -> (i32, String, String) {
    common::code_and_output(
        Command::new(env!("CARGO_BIN_EXE_ablate"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR")),
        Duration::from_secs(60),
    )
}

/// `sha256sum tests/fixtures/imports/humaneval-mini.jsonl`.
const HUMANEVAL_MINI_SHA256: &str =
    "656f984480976b4589c20ac5f094f0b87010cd88b480902fe549d13a6accd1b4";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/imports").join(name)
}

fn gzip(text: &[u8], to: &Path) {
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(to).unwrap(),
        flate2::Compression::default(),
    );
    enc.write_all(text).unwrap();
    enc.finish().unwrap();
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Names in `dir` (to see that nothing temporary was left).
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn humaneval_import_writes_prompt_stub_solution_and_check_and_the_suite_proves() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("HumanEval.jsonl.gz");
    let plain = std::fs::read(fixture("humaneval-mini.jsonl")).unwrap();
    gzip(&plain, &src);
    let out = tmp.path().join("suite");
    let (code, stdout, err) = ablate(&["suite", "import", "humaneval", s(&src), "-o", s(&out)]);
    assert_eq!(code, 0, "{stdout}{err}");
    assert!(stdout.contains("3 tasks written"), "{stdout}");
    assert_eq!(names(&out), ["mini-000", "mini-001", "mini-002", "suite.toml"]);

    // The files, against what the fixture says by hand.
    let t = out.join("mini-001");
    let prompt = "\n\ndef square(x: int) -> int:\n    return x * x\n\n\ndef sum_squares(xs: list) -> int:\n    \"\"\" Return the sum of square(x) for x in xs.\n    >>> sum_squares([1, 2])\n    5\n    \"\"\"\n";
    assert_eq!(
        read(t.join("workspace/sum_squares.py")),
        prompt,
        "the workspace holds the prompt as given"
    );
    assert_eq!(
        read(t.join("solution/sum_squares.py")),
        format!("{prompt}    return sum(square(x) for x in xs)\n")
    );
    let test = read(t.join("tests/test_sum_squares.py"));
    assert!(test.contains("from sum_squares import *"), "{test}");
    assert!(test.contains("def check(candidate):\n    assert candidate([]) == 0\n"), "{test}");
    assert!(test.contains("    def test_check(self):\n        check(sum_squares)\n"), "{test}");
    let task = read(t.join("task.toml"));
    assert!(
        task.contains("id = \"mini-001\"")
            && task.contains("tests = 1")
            && task.contains("editable = [\"sum_squares.py\"]"),
        "{task}"
    );
    assert!(
        task.contains("parser = \"unittest\"")
            && task.contains("\"python3\", \"-m\", \"unittest\""),
        "{task}"
    );

    // suite.toml names the source's sha256 (computed here with the sha2 crate, not ablate's digest code) and the importer version.
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(std::fs::read(&src).unwrap()));
    let suite = ablate::suite::load(&out).unwrap();
    let source = suite.source.clone().expect("source recorded");
    assert_eq!(source.sha256, sha);
    assert_eq!(source.importer, "humaneval");
    assert_eq!(source.importer_version, 2);
    assert_eq!(source.file, "HumanEval.jsonl.gz");
    assert!(
        suite.description.contains(&sha) && suite.description.contains("importer version 2"),
        "{}",
        suite.description
    );
    assert_eq!(suite.version, format!("2-{}", &sha[..12]));
    // HumanEval's tasks grade out of process, and the suite requires it.
    assert!(suite.tasks.iter().all(|t| t.check.mode == ablate::suite::GradingMode::OutOfProcess));
    assert!(
        std::fs::read_to_string(out.join("suite.toml"))
            .unwrap()
            .contains("require_mode = \"out_of_process\"")
    );

    // Every task proves: stub fails, canonical solution passes (through the sandbox).
    let (code, stdout, err) = ablate(&["suite", "check", s(&out)]);
    assert_eq!(code, 0, "{stdout}{err}");
    assert!(stdout.contains("3 tasks ok; suite humaneval"), "{stdout}");
    assert!(
        stdout.contains("mini-001")
            && stdout.contains("stub 0/1")
            && stdout.contains("solution 1/1"),
        "{stdout}"
    );
}

#[test]
fn the_same_source_gives_the_same_digest_and_another_source_another() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = std::fs::read_to_string(fixture("humaneval-mini.jsonl")).unwrap();
    let src = tmp.path().join("a.jsonl.gz");
    gzip(plain.as_bytes(), &src);
    let import = |src: &Path, out: &str| {
        let out = tmp.path().join(out);
        let (code, stdout, err) = ablate(&["suite", "import", "humaneval", s(src), "-o", s(&out)]);
        assert_eq!(code, 0, "{stdout}{err}");
        ablate::suite::load(&out).unwrap()
    };
    let first = import(&src, "one");
    let second = import(&src, "two");
    assert_eq!(first.digest, second.digest);
    assert_eq!(
        first.tasks.iter().map(|t| &t.digest).collect::<Vec<_>>(),
        second.tasks.iter().map(|t| &t.digest).collect::<Vec<_>>()
    );

    // One changed character of one test: another source sha256, another suite digest and version.
    let changed = plain.replace("candidate(0, 0) == 0", "candidate(0, 0) == 0 ");
    assert_ne!(changed, plain);
    let src2 = tmp.path().join("b.jsonl.gz");
    gzip(changed.as_bytes(), &src2);
    let third = import(&src2, "three");
    assert_ne!(first.digest, third.digest);
    assert_ne!(first.version, third.version);

    // The same bytes, not gzipped: the recorded sha256 is the file's own, so the digest differs too.
    let src3 = tmp.path().join("a.jsonl");
    std::fs::write(&src3, &plain).unwrap();
    let fourth = import(&src3, "four");
    assert_ne!(first.digest, fourth.digest);
    assert_eq!(fourth.source.unwrap().sha256, HUMANEVAL_MINI_SHA256);
}

/// A malformed line: exit 2, the message names the file, the line and the field, and
/// nothing is written (no output folder, no temporary folder).
fn refused(lines: &str, want: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("bad.jsonl");
    std::fs::write(&src, lines).unwrap();
    let out = tmp.path().join("suite");
    let (code, stdout, err) = ablate(&["suite", "import", "humaneval", s(&src), "-o", s(&out)]);
    assert_eq!(code, 2, "{stdout}{err}");
    assert!(err.contains("bad.jsonl"), "{err}");
    for w in want {
        assert!(err.contains(w), "want `{w}` in: {err}");
    }
    assert_eq!(names(tmp.path()), ["bad.jsonl"], "nothing written");
}

#[test]
fn malformed_humaneval_lines_name_the_line_and_the_field() {
    let good: Vec<String> = std::fs::read_to_string(fixture("humaneval-mini.jsonl"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let with_line2 = |f: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        let mut v: serde_json::Value = serde_json::from_str(&good[1]).unwrap();
        f(v.as_object_mut().unwrap());
        format!("{}\n{}\n{}\n", good[0], v, good[2])
    };
    refused(
        &with_line2(&|o| drop(o.remove("entry_point"))),
        &["line 2, field `entry_point`", "missing"],
    );
    refused(
        &with_line2(&|o| drop(o.insert("prompt".into(), serde_json::json!(7)))),
        &["line 2, field `prompt`", "expected a string, found a number"],
    );
    refused(
        &with_line2(&|o| drop(o.insert("canonical_solution".into(), serde_json::json!("  ")))),
        &["line 2, field `canonical_solution`", "empty"],
    );
    refused(
        &with_line2(&|o| drop(o.insert("entry_point".into(), serde_json::json!("sum-squares")))),
        &["line 2, field `entry_point`", "not a Python identifier"],
    );
    refused(
        &with_line2(&|o| drop(o.insert("entry_point".into(), serde_json::json!("cube")))),
        &["line 2, field `prompt`", "def cube("],
    );
    refused(
        &with_line2(&|o| drop(o.insert("test".into(), serde_json::json!("assert True\n")))),
        &["line 2, field `test`", "def check("],
    );
    refused(
        &with_line2(&|o| drop(o.insert("extra".into(), serde_json::json!(1)))),
        &["line 2, field `extra`", "unknown field"],
    );
    refused(
        &with_line2(&|o| drop(o.insert("task_id".into(), serde_json::json!("Mini/0")))),
        &["line 2, field `task_id`", "as line 1 does"],
    );
    refused(
        &format!("{}\n{{\"task_id\": \"x\",\n{}\n", good[0], good[2]),
        &["line 2", "not a JSON object"],
    );
    refused(&format!("{}\n[1, 2]\n", good[0]), &["line 2", "not a JSON object"]);
    refused("\n\n", &["holds no problems"]);
}

#[test]
fn an_existing_folder_is_kept_unless_forced_and_only_a_suite_is_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixture("humaneval-mini.jsonl");
    let out = tmp.path().join("suite");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let (code, _, err) = ablate(&["suite", "import", "humaneval", s(&src), "-o", s(&out)]);
    assert_eq!(code, 2);
    assert!(err.contains("exists and is not empty") && err.contains("--force"), "{err}");
    let (code, _, err) =
        ablate(&["suite", "import", "humaneval", s(&src), "-o", s(&out), "--force"]);
    assert_eq!(code, 2, "not a suite: refused even with --force");
    assert!(err.contains("not a suite"), "{err}");
    assert_eq!(read(out.join("notes.txt")), "mine");

    // An empty folder is fine; a suite folder is replaced with --force, leaving nothing of the old one.
    std::fs::remove_file(out.join("notes.txt")).unwrap();
    let (code, stdout, err) = ablate(&["suite", "import", "humaneval", s(&src), "-o", s(&out)]);
    assert_eq!(code, 0, "{stdout}{err}");
    std::fs::write(out.join("stale.txt"), "old").unwrap();
    let (code, _, _) = ablate(&["suite", "import", "humaneval", s(&src), "-o", s(&out)]);
    assert_eq!(code, 2, "a suite folder needs --force");
    let (code, stdout, err) =
        ablate(&["suite", "import", "humaneval", s(&src), "-o", s(&out), "--force"]);
    assert_eq!(code, 0, "{stdout}{err}");
    assert!(!out.join("stale.txt").exists());
    assert_eq!(names(tmp.path()), ["suite"], "no temporary or replaced folder left");
}

#[test]
fn a_broken_canonical_solution_or_a_passing_stub_is_reported_by_suite_check() {
    let tmp = tempfile::tempdir().unwrap();
    let good: Vec<String> = std::fs::read_to_string(fixture("humaneval-mini.jsonl"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let mut wrong: serde_json::Value = serde_json::from_str(&good[0]).unwrap();
    wrong["canonical_solution"] = serde_json::json!("    return a - b\n");
    // A check that never calls the candidate: the stub passes.
    let mut lax: serde_json::Value = serde_json::from_str(&good[2]).unwrap();
    lax["test"] = serde_json::json!("\n\ndef check(candidate):\n    assert True\n");
    let src = tmp.path().join("x.jsonl");
    std::fs::write(&src, format!("{wrong}\n{}\n{lax}\n", good[1])).unwrap();
    let out = tmp.path().join("suite");
    let (code, stdout, err) = ablate(&["suite", "import", "humaneval", s(&src), "-o", s(&out)]);
    assert_eq!(code, 0, "the importer writes them: {stdout}{err}");
    let (code, stdout, _) = ablate(&["suite", "check", s(&out)]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("FAIL mini-000") && stdout.contains("solution passes 0 of 1"),
        "{stdout}"
    );
    assert!(stdout.contains("FAIL mini-002") && stdout.contains("stub passes 1 of 1"), "{stdout}");
    assert!(stdout.contains("ok   mini-001"), "{stdout}");
    assert!(stdout.contains("2 of 3 tasks have problems: mini-000, mini-002"), "{stdout}");
}

#[test]
fn jsonl_import_turns_asserts_and_unittest_code_into_tasks_that_prove() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("mine");
    let (code, stdout, err) =
        ablate(&["suite", "import", "jsonl", s(&fixture("mini.jsonl")), "-o", s(&out)]);
    assert_eq!(code, 0, "{stdout}{err}");
    assert_eq!(names(&out), ["mbpp-002", "mbpp-003", "suite.toml", "word-count"]);
    let suite = ablate::suite::load(&out).unwrap();
    assert_eq!(suite.name, "mini", "named after the source file");
    let tests: Vec<(String, u32)> =
        suite.tasks.iter().map(|t| (t.id.clone(), t.check.tests)).collect();
    assert_eq!(
        tests,
        [("mbpp-002".to_string(), 3), ("mbpp-003".to_string(), 2), ("word-count".to_string(), 2)]
    );
    assert_eq!(suite.task("mbpp-003").unwrap().check.timeout.as_secs_f64(), 5.0);
    assert_eq!(format!("{:?}", suite.task("word-count").unwrap().difficulty), "Hard");
    assert_eq!(suite.task("word-count").unwrap().editable, ["words.py"]);
    assert_eq!(
        read(out.join("mbpp-002/workspace/similar_elements.py")),
        "def similar_elements(*args, **kwargs):\n    raise NotImplementedError\n"
    );
    let test = read(out.join("mbpp-003/tests/test_is_not_prime.py"));
    assert!(test.contains("CASES = {2: False"), "{test}");
    assert!(
        test.contains("    def test_1(self):\n        assert all(is_not_prime(n) == want"),
        "{test}"
    );

    let (code, stdout, err) = ablate(&["suite", "check", s(&out)]);
    assert_eq!(code, 0, "{stdout}{err}");
    assert!(
        stdout.contains("mbpp-002")
            && stdout.contains("stub 0/3")
            && stdout.contains("solution 3/3"),
        "{stdout}"
    );
    assert!(stdout.contains("word-count") && stdout.contains("solution 2/2"), "{stdout}");
}

#[test]
fn malformed_jsonl_lines_name_the_line_and_the_field() {
    let good: Vec<String> =
        std::fs::read_to_string(fixture("mini.jsonl")).unwrap().lines().map(String::from).collect();
    let cases: Vec<(usize, serde_json::Value, &[&str])> = vec![
        (
            0,
            serde_json::json!({"asserts": ["similar_elements((1,), (1,))"]}),
            &["line 1, field `asserts[0]`", "assert"],
        ),
        (
            0,
            serde_json::json!({"asserts": [3]}),
            &["line 1, field `asserts[0]`", "expected a string"],
        ),
        (0, serde_json::json!({"test_count": 4}), &["line 1, field `test_count`", "holds 3"]),
        (
            0,
            serde_json::json!({"tests": "import unittest\n"}),
            &["line 1, field `asserts`", "not both"],
        ),
        (
            1,
            serde_json::json!({"difficulty": "extreme"}),
            &["line 2, field `difficulty`", "easy, medium or hard"],
        ),
        (1, serde_json::json!({"timeout_seconds": 0}), &["line 2, field `timeout_seconds`"]),
        (
            1,
            serde_json::json!({"entry_point": "prime_check"}),
            &["line 2, field `solution`", "def prime_check("],
        ),
        (2, serde_json::json!({"test_count": null}), &["line 3, field `test_count`", "missing"]),
        (2, serde_json::json!({"file": "../words.py"}), &["line 3, field `file`"]),
        (2, serde_json::json!({"file": "my-words.py"}), &["line 3, field `file`"]),
        (2, serde_json::json!({"stub": null}), &["line 3, field `stub`", "missing"]),
        (2, serde_json::json!({"solution": null}), &["line 3, field `solution`", "missing"]),
        (2, serde_json::json!({"id": "Mbpp 2"}), &["line 3, field `id`", "as line 1 does"]),
        (
            2,
            serde_json::json!({"text": "MBPP's own key"}),
            &["line 3, field `text`", "unknown field"],
        ),
    ];
    for (line, patch, want) in cases {
        let mut lines = good.clone();
        let mut v: serde_json::Value = serde_json::from_str(&lines[line]).unwrap();
        for (k, val) in patch.as_object().unwrap() {
            if val.is_null() {
                v.as_object_mut().unwrap().remove(k);
            } else {
                v[k] = val.clone();
            }
        }
        lines[line] = v.to_string();
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("bad.jsonl");
        std::fs::write(&src, lines.join("\n")).unwrap();
        let (code, stdout, err) =
            ablate(&["suite", "import", "jsonl", s(&src), "-o", s(&tmp.path().join("out"))]);
        assert_eq!(code, 2, "{patch}: {stdout}{err}");
        for w in want {
            assert!(err.contains(w), "{patch}: want `{w}` in: {err}");
        }
        assert_eq!(names(tmp.path()), ["bad.jsonl"], "{patch}: nothing written");
    }
}

#[test]
fn a_corrupt_gzip_is_an_error_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("HumanEval.jsonl.gz");
    gzip(&std::fs::read(fixture("humaneval-mini.jsonl")).unwrap(), &src);
    let mut bytes = std::fs::read(&src).unwrap();
    let n = bytes.len();
    bytes.truncate(n - 6);
    std::fs::write(&src, bytes).unwrap();
    let (code, _, err) =
        ablate(&["suite", "import", "humaneval", s(&src), "-o", s(&tmp.path().join("out"))]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("HumanEval.jsonl.gz") && err.contains("not a valid gzip file"), "{err}");
}

#[test]
fn a_prompt_without_a_docstring_gets_a_stub_that_raises() {
    let tmp = tempfile::tempdir().unwrap();
    let good: Vec<String> = std::fs::read_to_string(fixture("humaneval-mini.jsonl"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let mut bare: serde_json::Value = serde_json::from_str(&good[0]).unwrap();
    bare["prompt"] = serde_json::json!("def add_pair(a, b):\n");
    let src = tmp.path().join("x.jsonl");
    std::fs::write(&src, format!("{bare}\n")).unwrap();
    let out = tmp.path().join("suite");
    let (code, stdout, err) = ablate(&["suite", "import", "humaneval", s(&src), "-o", s(&out)]);
    assert_eq!(code, 0, "{stdout}{err}");
    assert_eq!(
        read(out.join("mini-000/workspace/add_pair.py")),
        "def add_pair(a, b):\n    raise NotImplementedError\n"
    );
    assert_eq!(
        read(out.join("mini-000/solution/add_pair.py")),
        "def add_pair(a, b):\n    return a + b\n"
    );
    let (code, stdout, _) = ablate(&["suite", "check", s(&out)]);
    assert_eq!(code, 0, "{stdout}");
}

/// configs/humaneval.toml's bare arm sends EvalPlus's instruct prompt, built here from the
/// fixture's own `prompt` field by EvalPlus's formula, and nothing else.
#[test]
fn the_humaneval_config_bare_arm_sends_the_evalplus_prompt() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exp = ablate::experiment::config::load(&root.join("configs/humaneval.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(exp.models[0].temperature, 0.0, "greedy");
    let bare = exp.arm("bare").unwrap().builtin_components().unwrap().clone();
    let ablate::experiment::Instructions::File(file) = &bare.instructions else {
        panic!("bare has a prompt file")
    };
    let prompts = ablate::experiment::instructions::load_instructions(&exp.resolve(file)).unwrap();
    assert_eq!(prompts.system_message(bare.tools), None, "no system message, as EvalPlus");

    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("suite");
    let (code, stdout, err) = ablate(&[
        "suite",
        "import",
        "humaneval",
        s(&fixture("humaneval-mini.jsonl")),
        "-o",
        s(&out),
    ]);
    assert_eq!(code, 0, "{stdout}{err}");
    let line: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(fixture("humaneval-mini.jsonl")).unwrap().lines().nth(2).unwrap(),
    )
    .unwrap();
    let evalplus = format!(
        "Please provide a self-contained Python script that solves the following problem in a markdown code block:\n```\n{}\n```\n",
        line["prompt"].as_str().unwrap().trim()
    );
    let task = ablate::suite::load(&out).unwrap().task("mini-002").unwrap().clone();
    let files = vec![("sort_desc.py".to_string(), read(task.workspace_dir().join("sort_desc.py")))];
    assert_eq!(prompts.first_message(&task, &files, bare.tools), evalplus);
}

/// A run's manifest names an imported suite's source sha256 and importer; a hand-written suite's
/// manifest has no `source` (manifests of such suites are as before).
#[test]
fn the_manifest_records_an_imported_suites_source() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("suite");
    let src = fixture("humaneval-mini.jsonl");
    let (code, stdout, err) = ablate(&["suite", "import", "humaneval", s(&src), "-o", s(&out)]);
    assert_eq!(code, 0, "{stdout}{err}");
    let manifest_suite = |suite_dir: &Path| {
        let text = format!(
            "[experiment]\nname = \"p\"\nsuite = \"{}\"\ntrials = 1\nseed = 1\n\n[budget]\nmax_steps = 1\nmax_output_tokens_per_step = 10\nmax_total_tokens = 100\nmax_working_seconds = 10\n\n[[models]]\nname = \"m\"\nprovider = \"openai\"\nmodel = \"m\"\nendpoint = \"http://127.0.0.1:1\"\ntemperature = 0.0\n\n[arms.b]\n",
            suite_dir.display()
        );
        let exp = ablate::experiment::config::load_str(&tmp.path().join("x.toml"), &text).unwrap();
        let suite = ablate::suite::load(&exp.suite_path).unwrap();
        let plan = ablate::plan::order(&exp, &suite).unwrap();
        serde_json::to_value(ablate::plan::manifest(
            "r".into(),
            &exp,
            &suite,
            &plan,
            None,
            Default::default(),
        ))
        .unwrap()["suite"]
            .clone()
    };
    let m = manifest_suite(&out);
    assert_eq!(m["source"]["sha256"], serde_json::json!(HUMANEVAL_MINI_SHA256));
    assert_eq!(m["source"]["importer"], serde_json::json!("humaneval"));
    assert_eq!(m["source"]["importer_version"], serde_json::json!(2));
    let tiny =
        manifest_suite(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/suites/tiny"));
    assert!(tiny.get("source").is_none(), "{tiny}");
}
