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

use crate::common;

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

/// Out-of-process grading as ablate does it (grader/remote.py), outside the
/// jail: the candidate's module served from its own process and workspace,
/// the tests on a copy without it, the runner with no defence at all.
fn graded_out_of_process(on: On, code: &str) -> Verdict {
    use std::os::unix::process::CommandExt;
    let (task, file, declared) = task_of(on);
    let candidate = workspace(on, code);
    let tests_side = tempfile::tempdir().unwrap();
    ablate::sandbox::copy_tree(&task.join("workspace"), tests_side.path()).unwrap();
    std::fs::remove_file(tests_side.path().join(file)).unwrap();
    ablate::sandbox::copy_tree(&task.join("tests"), &tests_side.path().join("tests")).unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    std::fs::write(out_dir.path().join("runner.py"), ablate::grader::RUNNER_PY).unwrap();
    std::fs::write(out_dir.path().join("remote.py"), ablate::grader::REMOTE_PY).unwrap();
    let result = out_dir.path().join("results.jsonl");
    let module = file.strip_suffix(".py").unwrap();
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let as_fd3 = |s: &std::os::unix::net::UnixStream| {
        let fd = std::os::fd::AsRawFd::as_raw_fd(s);
        move || {
            // SAFETY: dup2 and fcntl in the forked child, on fds it holds.
            unsafe {
                libc::dup2(fd, 3);
                libc::fcntl(3, libc::F_SETFD, 0);
            }
            Ok(())
        }
    };
    let mut serve = std::process::Command::new(ablate::grader::python());
    serve
        .args(["-I", "-B"])
        .arg(out_dir.path().join("remote.py"))
        .args(["serve", module])
        .current_dir(candidate.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the closure only calls dup2 and fcntl.
    let mut server = unsafe { serve.pre_exec(as_fd3(&theirs)) }.spawn().unwrap();
    drop(theirs);
    let tests_text: String = std::fs::read_dir(tests_side.path().join("tests"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    let canaries = channel::canary_names(512, &tests_text);
    let setup =
        serde_json::json!({"key": "k3y", "canaries": canaries, "layers": [], "remote": [module]});
    let mut cmd = std::process::Command::new(ablate::grader::python());
    cmd.args(["-I", "-B"])
        .arg(out_dir.path().join("runner.py"))
        .arg(&result)
        .args(["unittest", "discover", "-v", "-s", "tests", "-t", "."])
        .current_dir(tests_side.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin");
    // SAFETY: as above.
    unsafe { cmd.pre_exec(as_fd3(&ours)) };
    let out = with_stdin(&mut cmd, format!("{setup}\n"));
    drop(ours);
    let _ = server.kill();
    let _ = server.wait();
    let output =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let report =
        channel::read(&std::fs::read(&result).unwrap_or_default(), 4 << 20, "k3y", &HashSet::new());
    let text = parse::parse(OutputParser::Unittest, &output);
    if channel::judge(declared, out.status.code(), false, &text, &report, false).is_some() {
        return Verdict::Caught;
    }
    let all = out.status.code() == Some(0)
        && report.finished
        && report.tests == declared
        && report.passed == declared;
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
    let columns: [(&str, Option<&[&str]>); 5] = [
        ("runner, no defence", Some(&[])),
        ("canaries alone", Some(&["canaries"])),
        ("all but canaries", Some(&["decide", "guard", "watch"])),
        ("all (in process)", None),
        ("out of process, no runner defence", Some(&["out_of_process"])),
    ];
    let corpus = grade_fakes();
    let mut table = String::from("| attempt | plain unittest |");
    for (name, _) in &columns {
        table.push_str(&format!(" {name} |"));
    }
    table.push_str(&format!("\n|---|---|{}\n", "---|".repeat(columns.len())));
    let mut counts = [(0, 0, 0); 5];
    for a in &corpus {
        let p = plain(a.on, &a.code);
        assert_eq!(p, Verdict::Passed, "`{}` does not fool plain unittest", a.name);
        table.push_str(&format!("| {} | {} |", a.name, p.cell()));
        for (i, (_, layers)) in columns.iter().enumerate() {
            let v = match layers {
                Some(["out_of_process"]) => graded_out_of_process(a.on, &a.code),
                _ => graded(a.on, &a.code, *layers),
            };
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
    // With every defence in process, and out of process with none, no attempt passes.
    assert_eq!(counts[3].0, 0, "{table}");
    assert_eq!(counts[4].0, 0, "{table}");
    // The figures docs/sandbox.md states.
    assert_eq!(counts, EXPECTED, "{table}");
}

/// (passed, caught, failed) of the 23 attempts per column: the runner with no defence, canaries
/// alone, all but canaries, all in process, out of process with no runner defence (docs/sandbox.md).
const EXPECTED: [(u32, u32, u32); 5] = [(13, 9, 1), (4, 18, 1), (0, 14, 9), (0, 14, 9), (0, 0, 23)];

#[test]
fn honest_code_passes_with_every_defence() {
    // The reference solutions pass under every column, so no defence accuses honest code.
    for on in [On::Add, On::Calc] {
        let (task, file, _) = task_of(on);
        let code = std::fs::read_to_string(task.join("solution").join(file)).unwrap();
        for layers in [Some(&[][..]), Some(&["canaries"][..]), None] {
            assert_eq!(graded(on, &code, layers), Verdict::Passed, "{on:?} {layers:?}");
        }
        assert_eq!(graded_out_of_process(on, &code), Verdict::Passed, "{on:?} out of process");
        let _ = Path::new(file);
    }
}
