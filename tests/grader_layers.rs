//! What each of the grader runner's defences catches of the corpus of faked
//! grades (tests/common/corpus.rs), measured by running the runner with some
//! of them turned off (its standard input's "layers"; ablate itself always
//! runs with all of them). The table this prints is the one in
//! docs/sandbox.md ("What each defence catches"); `cargo test --test
//! grader_layers -- --nocapture` shows it.
//!
//! The runner is started here outside the jail (the attempts only try to
//! fake the grade of their own process), with the arguments and input ablate
//! gives it, and its result file judged by ablate's own channel code.

mod common;

use ablate::grader::{channel, parse};
use ablate::suite::OutputParser;
use common::corpus::{On, grade_fakes};
use common::*;
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Graded passed: the fake worked.
    Passed,
    /// A forgery was seen: policy_violation.
    Caught,
    /// Graded failed: the fake did nothing.
    Failed,
}

impl Verdict {
    fn cell(self) -> &'static str {
        match self {
            Verdict::Passed => "PASSED",
            Verdict::Caught => "caught",
            Verdict::Failed => "failed",
        }
    }
}

fn task_of(on: On) -> (std::path::PathBuf, &'static str, u32) {
    match on {
        On::Add => (fixture("tiny").join("add-two"), "add.py", 6),
        On::Calc => (fixture("guarded").join("calc"), "calc.py", 8),
    }
}

/// A workspace of the task with the candidate's file.
fn workspace(on: On, code: &str) -> tempfile::TempDir {
    let (task, file, _) = task_of(on);
    let ws = tempfile::tempdir().unwrap();
    ablate::sandbox::copy_tree(&task.join("workspace"), ws.path()).unwrap();
    ablate::sandbox::copy_tree(&task.join("tests"), &ws.path().join("tests")).unwrap();
    std::fs::write(ws.path().join(file), code).unwrap();
    ws
}

/// Plain `python3 -m unittest`: passed when it exits 0 or its last line says OK.
fn plain(on: On, code: &str) -> Verdict {
    let ws = workspace(on, code);
    let out = output_within(
        std::process::Command::new(ablate::grader::python())
            .args(["-m", "unittest", "discover", "-s", "tests", "-t", "."])
            .current_dir(ws.path()),
        Duration::from_secs(30),
    );
    let last = String::from_utf8_lossy(&out.stderr)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string();
    if out.status.success() || last.starts_with("OK") { Verdict::Passed } else { Verdict::Failed }
}

/// The grader's runner with `layers` (None: all), judged as ablate judges a check.
fn graded(on: On, code: &str, layers: Option<&[&str]>) -> Verdict {
    let (_, _, declared) = task_of(on);
    let ws = workspace(on, code);
    let out_dir = tempfile::tempdir().unwrap();
    let runner = out_dir.path().join("runner.py");
    std::fs::write(&runner, ablate::grader::RUNNER_PY).unwrap();
    let result = out_dir.path().join("results.jsonl");
    let tests_text: String = std::fs::read_dir(ws.path().join("tests"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    let canaries = channel::canary_names(512, &tests_text);
    let mut setup = serde_json::json!({"key": "k3y", "canaries": canaries});
    if let Some(l) = layers {
        setup["layers"] = serde_json::json!(l);
    }
    let mut cmd = std::process::Command::new(ablate::grader::python());
    cmd.args(["-I", "-B"])
        .arg(&runner)
        .arg(&result)
        .args(["unittest", "discover", "-v", "-s", "tests", "-t", "."])
        .current_dir(ws.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("ABLATE_RESULT", &result);
    let out = with_stdin(&mut cmd, format!("{setup}\n"));
    let output =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&result).unwrap_or_default();
    let set: HashSet<String> = canaries.into_iter().collect();
    let report = channel::read(&bytes, 4 << 20, "k3y", &set);
    let text = parse::parse(OutputParser::Unittest, &output);
    let canaries_on = layers.is_none_or(|l| l.contains(&"canaries"));
    if channel::judge(declared, out.status.code(), false, &text, &report, canaries_on).is_some() {
        return Verdict::Caught;
    }
    let all = out.status.code() == Some(0)
        && report.finished
        && report.tests == declared
        && report.passed == declared
        && report.fixture_errors.is_empty();
    if all { Verdict::Passed } else { Verdict::Failed }
}

/// Run `cmd` with `input` on its standard input, within a deadline.
fn with_stdin(cmd: &mut std::process::Command, input: String) -> std::process::Output {
    use std::io::Write;
    use std::os::unix::process::CommandExt;
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        if !flag.load(std::sync::atomic::Ordering::SeqCst) {
            // SAFETY: kill(2) of the group of our own child.
            unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
        }
    });
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    out
}

#[test]
fn what_each_defence_catches() {
    let columns: [(&str, Option<&[&str]>); 4] = [
        ("runner, no defence", Some(&[])),
        ("canaries alone", Some(&["canaries"])),
        ("all but canaries", Some(&["decide", "guard", "watch"])),
        ("all (ablate)", None),
    ];
    let corpus = grade_fakes();
    let mut table = String::from("| attempt | plain unittest |");
    for (name, _) in &columns {
        table.push_str(&format!(" {name} |"));
    }
    table.push_str(&format!("\n|---|---|{}\n", "---|".repeat(columns.len())));
    let mut counts = [(0, 0, 0); 4];
    for a in &corpus {
        let p = plain(a.on, &a.code);
        assert_eq!(p, Verdict::Passed, "`{}` does not fool plain unittest", a.name);
        table.push_str(&format!("| {} | {} |", a.name, p.cell()));
        for (i, (_, layers)) in columns.iter().enumerate() {
            let v = graded(a.on, &a.code, *layers);
            match v {
                Verdict::Passed => counts[i].0 += 1,
                Verdict::Caught => counts[i].1 += 1,
                Verdict::Failed => counts[i].2 += 1,
            }
            table.push_str(&format!(" {} |", v.cell()));
        }
        table.push('\n');
    }
    table.push_str(&format!("| **{} attempts** | {} passed |", corpus.len(), corpus.len()));
    for (passed, caught, failed) in &counts {
        table.push_str(&format!(" {passed} passed, {caught} caught, {failed} failed |"));
    }
    println!("{table}");
    // With every defence, no attempt passes.
    assert_eq!(counts[3].0, 0, "{table}");
    // The figures docs/sandbox.md states.
    assert_eq!(counts, EXPECTED, "{table}");
}

/// (passed, caught, failed) of the 20 attempts per column: the runner with no defence, canaries
/// alone, all but canaries, all (docs/sandbox.md).
const EXPECTED: [(u32, u32, u32); 4] = [(12, 7, 1), (3, 16, 1), (0, 13, 7), (0, 13, 7)];

#[test]
fn honest_code_passes_with_every_defence() {
    // The reference solutions pass under every column, so no defence accuses honest code.
    for on in [On::Add, On::Calc] {
        let (task, file, _) = task_of(on);
        let code = std::fs::read_to_string(task.join("solution").join(file)).unwrap();
        for layers in [Some(&[][..]), Some(&["canaries"][..]), None] {
            assert_eq!(graded(on, &code, layers), Verdict::Passed, "{on:?} {layers:?}");
        }
        let _ = Path::new(file);
    }
}
