//! The grader's runner reports each test on a result file of its own
//! (runner.py); this module reads that file and judges it against the exit
//! code and the printed summary. What a candidate can forge by printing,
//! exiting early or patching the framework shows up as a contradiction here.

use super::parse::Parsed;
use crate::record::RunnerReport;
use serde::Deserialize;
use std::collections::HashSet;

#[derive(Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
enum Event {
    Ready {
        modules: Vec<String>,
    },
    Start {
        loaded: u32,
        #[serde(default)]
        canaries: u32,
    },
    Test {
        id: String,
        outcome: Outcome,
    },
    Fixture {
        id: String,
        outcome: Outcome,
    },
    End {
        ran: Option<u32>,
        tampered: Vec<String>,
        #[serde(default)]
        denied: Vec<String>,
    },
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    Passed,
    Failed,
    Error,
    Skipped,
    ExpectedFailure,
    UnexpectedSuccess,
    NotRun,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Error => "error",
            Outcome::Skipped => "skipped",
            Outcome::ExpectedFailure => "expected_failure",
            Outcome::UnexpectedSuccess => "unexpected_success",
            Outcome::NotRun => "not_run",
        }
    }
}

/// The last part of a test id (`tests.test_m.T.test_a` -> `test_a`; pytest's `f.py::test_a` -> `test_a`).
fn short_name(id: &str) -> &str {
    id.rsplit(['.', ':']).next().unwrap_or(id)
}

/// A fresh key for one check's result file (hex, given to the runner on stdin).
pub(crate) fn new_key() -> String {
    use rand::RngExt;
    let bytes: [u8; 32] = rand::rng().random();
    hex::encode(bytes)
}

const ADJECTIVES: [&str; 48] = [
    "basic", "blank", "bold", "brief", "broad", "calm", "clean", "clear", "close", "cold",
    "common", "dense", "direct", "double", "early", "empty", "even", "exact", "fair", "final",
    "first", "flat", "full", "given", "great", "half", "hidden", "inner", "large", "late", "level",
    "light", "local", "long", "lower", "mixed", "narrow", "nested", "odd", "open", "outer",
    "plain", "quick", "raw", "short", "simple", "single", "small",
];
const NOUNS: [&str; 48] = [
    "array", "base", "batch", "block", "border", "bound", "branch", "buffer", "case", "chain",
    "char", "chunk", "count", "cycle", "digit", "edge", "entry", "field", "flag", "frame", "gap",
    "group", "header", "index", "input", "item", "key", "label", "layer", "limit", "line", "list",
    "mark", "match", "node", "order", "pair", "path", "range", "record", "row", "run", "sample",
    "slice", "space", "step", "token", "value",
];

/// Names for the runner's canaries: `test_<adjective>_<noun>`, drawn at
/// random, none of them a word the task's test files contain (so no real
/// test can be taken for a canary).
pub fn canary_names(n: usize, test_sources: &str) -> Vec<String> {
    use rand::seq::SliceRandom;
    let mut all: Vec<String> = ADJECTIVES
        .iter()
        .flat_map(|a| NOUNS.iter().map(move |b| format!("test_{a}_{b}")))
        .filter(|name| !test_sources.contains(name.as_str()))
        .collect();
    all.shuffle(&mut rand::rng());
    all.truncate(n);
    all
}

/// The signature of a line: sha256(key + previous signature + payload), hex.
pub fn sign(key: &str, prev: &str, payload: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(key.as_bytes());
    h.update(prev.as_bytes());
    h.update(payload.as_bytes());
    hex::encode(h.finalize())
}

/// Read the result file, checking each line's signature with `key`; `cap`
/// is the size it was read up to. A test whose name is one of `canaries` is
/// a canary: it must not pass.
pub fn read(bytes: &[u8], cap: u64, key: &str, canaries: &HashSet<String>) -> RunnerReport {
    let mut reader =
        Reader { r: RunnerReport::default(), canaries, ids: HashSet::new(), announced: None };
    if bytes.len() as u64 >= cap {
        reader.r.anomalies.push(format!("the result file reached {cap} bytes"));
    }
    let mut prev = String::new();
    let text = String::from_utf8_lossy(bytes);
    for (n, line) in text.lines().enumerate() {
        let r = &mut reader.r;
        if line.trim().is_empty() {
            continue;
        }
        let Some((sig, payload)) =
            line.split_once(' ').filter(|(sig, payload)| *sig == sign(key, &prev, payload))
        else {
            r.anomalies.push(format!("line {} is not signed by the runner", n + 1));
            continue;
        };
        prev = sig.to_string();
        let event: Event = match serde_json::from_str(payload) {
            Ok(e) => e,
            Err(_) => {
                r.anomalies.push(format!("line {} is not a runner event", n + 1));
                continue;
            }
        };
        if r.finished {
            r.anomalies.push(format!("line {} comes after the end", n + 1));
            continue;
        }
        reader.event(n, event);
    }
    reader.finish()
}

/// A result file being read: the report so far, and what checking the next line needs.
struct Reader<'a> {
    r: RunnerReport,
    /// The names of the tests that must not pass.
    canaries: &'a HashSet<String>,
    /// The ids of the tests reported so far.
    ids: HashSet<String>,
    /// The number of canaries the start announced.
    announced: Option<u32>,
}

impl Reader<'_> {
    /// Take the event of line `n` (from 0), signed and before the end.
    fn event(&mut self, n: usize, event: Event) {
        let r = &mut self.r;
        match event {
            Event::Ready { modules } => r.grader_modules = modules,
            Event::Start { loaded, canaries } => {
                if r.loaded.is_some() {
                    r.anomalies.push(format!("line {}: a second start", n + 1));
                }
                r.loaded = Some(loaded);
                self.announced = Some(canaries);
            }
            Event::Test { id, outcome } => self.test(n, id, outcome),
            Event::Fixture { id, outcome } => {
                if outcome == Outcome::Error {
                    r.fixture_errors.push(id);
                }
            }
            Event::End { ran, tampered, denied } => {
                r.finished = true;
                r.tampered = tampered;
                r.denied = denied;
                let ran_tests = r.tests - r.not_run;
                if let Some(ran) = ran
                    && ran != ran_tests
                {
                    r.anomalies.push(format!(
                        "the end counts {ran} tests run, the file holds {ran_tests}"
                    ));
                }
            }
        }
    }

    /// A test's outcome, counted once: a canary's apart (it must not pass).
    fn test(&mut self, n: usize, id: String, outcome: Outcome) {
        let r = &mut self.r;
        if r.loaded.is_none() {
            r.anomalies.push(format!("line {}: a test before the start", n + 1));
        }
        if !self.ids.insert(id.clone()) {
            r.anomalies.push(format!("line {}: test `{id}` reported twice", n + 1));
            return;
        }
        let short = short_name(&id).to_string();
        if self.canaries.contains(&short) {
            r.canaries += 1;
            match outcome {
                Outcome::Failed | Outcome::Error => r.canaries_failed += 1,
                Outcome::Skipped | Outcome::NotRun => {}
                Outcome::Passed | Outcome::ExpectedFailure | Outcome::UnexpectedSuccess => {
                    r.canaries_turned.push(format!("{short}: {}", outcome.name()))
                }
            }
            return;
        }
        r.tests += 1;
        match outcome {
            Outcome::Passed | Outcome::ExpectedFailure => r.passed += 1,
            Outcome::Failed | Outcome::Error | Outcome::UnexpectedSuccess => r.failed.push(short),
            Outcome::NotRun => {
                r.not_run += 1;
                r.failed.push(short);
            }
            Outcome::Skipped => {}
        }
    }

    /// The report, with the counts of a finished file checked against its start.
    fn finish(self) -> RunnerReport {
        let mut r = self.r;
        if r.finished && r.loaded.is_some_and(|l| l != r.tests) {
            let loaded = r.loaded.unwrap_or(0);
            r.anomalies.push(format!("{loaded} tests were collected and {} reported", r.tests));
        }
        if r.finished && self.announced.is_some_and(|a| a != r.canaries) {
            r.anomalies.push(format!(
                "{} canaries were announced and {} reported",
                self.announced.unwrap_or(0),
                r.canaries
            ));
        }
        r
    }
}

/// The forgery a check shows, if any. `declared` is the task's test count;
/// `text` is the printed summary as parsed.
/// `expect_canaries`: the runner was given canaries and runs unittest, so a
/// run that passed tests without running one was tampered with.
pub fn judge(
    declared: u32,
    exit_code: Option<i32>,
    timed_out: bool,
    text: &Parsed,
    runner: &RunnerReport,
    expect_canaries: bool,
) -> Option<String> {
    if !runner.canaries_turned.is_empty() {
        return Some(format!(
            "{} of {} canaries (tests that must fail) were reported otherwise: {}; something turned failing tests into passes",
            runner.canaries_turned.len(),
            runner.canaries,
            runner.canaries_turned.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    if !runner.tampered.is_empty() {
        return Some(format!(
            "the test framework was changed while the tests ran: {}",
            runner.tampered.join(", ")
        ));
    }
    if !runner.anomalies.is_empty() {
        return Some(format!(
            "the grader's result file was written by something other than its runner: {}",
            runner.anomalies.join("; ")
        ));
    }
    if expect_canaries && runner.finished && runner.passed > 0 && runner.canaries == 0 {
        return Some(format!(
            "{} tests passed and no canary (a test that must fail) ran: the runner's canaries were removed",
            runner.passed
        ));
    }
    let text_claims_pass = text.total.is_some_and(|t| t > 0 && text.passed == t);
    let claims = exit_code == Some(0) || text_claims_pass;
    if claims && !timed_out && !runner.finished {
        let what = if exit_code == Some(0) { "exited 0" } else { "printed a passing summary" };
        return Some(format!(
            "the check {what} but ended before the grader's runner finished ({} of {declared} tests reported)",
            runner.tests
        ));
    }
    if runner.finished {
        if exit_code == Some(0) && runner.passed < runner.tests {
            return Some(format!(
                "the check exited 0 though the runner saw {} of {} tests pass",
                runner.passed, runner.tests
            ));
        }
        if let Some(t) = text.total
            && (t != runner.tests - runner.not_run
                || (text_claims_pass && runner.passed != runner.tests))
        {
            return Some(format!(
                "the printed summary (Ran {t}, {} passed) contradicts the grader's runner ({} of {} passed)",
                text.passed, runner.passed, runner.tests
            ));
        }
        if runner.tests > declared {
            return Some(format!(
                "the runner reported {} tests; the task declares {declared}",
                runner.tests
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "k3y";

    /// The lines signed as the runner signs them (sha256 chain, checked by hand below).
    fn lines(ls: &[&str]) -> Vec<u8> {
        let mut prev = String::new();
        let mut out = String::new();
        for l in ls {
            let sig = sign(KEY, &prev, l);
            out.push_str(&format!("{sig} {l}\n"));
            prev = sig;
        }
        out.into_bytes()
    }

    fn read(bytes: &[u8], cap: u64) -> RunnerReport {
        super::read(bytes, cap, KEY, &HashSet::new())
    }

    #[test]
    fn signature_is_sha256_of_key_previous_and_payload() {
        // sha256("abc") from FIPS 180-2, appendix B.1.
        assert_eq!(
            sign("a", "b", "c"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // A line without the key, and a correct line moved out of order.
        let good = lines(&[START2, A_OK]);
        let text = String::from_utf8(good).unwrap();
        let mut ls: Vec<&str> = text.lines().collect();
        ls.swap(0, 1);
        let r = read(ls.join("\n").as_bytes(), 1 << 20);
        // The test line no longer follows its predecessor's signature.
        assert_eq!(r.anomalies, vec!["line 1 is not signed by the runner".to_string()]);
        // Signed with a guessed key: the one line is refused, and nothing of it is read.
        let forged = format!("{} {}\n", sign("guess", "", START2), START2);
        let r = read(forged.as_bytes(), 1 << 20);
        assert_eq!(r.anomalies, vec!["line 1 is not signed by the runner".to_string()]);
        assert_eq!((r.loaded, r.tests, r.finished), (None, 0, false));
    }

    const START2: &str = r#"{"event": "start", "loaded": 2}"#;
    const START2C: &str = r#"{"event": "start", "loaded": 2, "canaries": 2}"#;
    const CANARY_FAILED: &str =
        r#"{"event": "test", "id": "tests.test_m.T.test_quiet_row", "outcome": "failed"}"#;
    const CANARY_ERROR: &str =
        r#"{"event": "test", "id": "tests.test_m.T.test_odd_key", "outcome": "error"}"#;
    const CANARY_PASSED: &str =
        r#"{"event": "test", "id": "tests.test_m.T.test_odd_key", "outcome": "passed"}"#;
    const A_OK: &str = r#"{"event": "test", "id": "tests.test_m.T.test_a", "outcome": "passed"}"#;
    const B_OK: &str = r#"{"event": "test", "id": "tests.test_m.T.test_b", "outcome": "passed"}"#;
    const B_FAIL: &str = r#"{"event": "test", "id": "tests.test_m.T.test_b", "outcome": "failed"}"#;
    const END2: &str = r#"{"event": "end", "ran": 2, "tampered": []}"#;

    fn text(total: Option<u32>, passed: u32) -> Parsed {
        Parsed { total, passed, failed_tests: Vec::new() }
    }

    #[test]
    fn honest_pass_and_honest_fail() {
        let r = read(&lines(&[START2, A_OK, B_OK, END2]), 1 << 20);
        assert_eq!((r.loaded, r.tests, r.passed, r.finished), (Some(2), 2, 2, true));
        assert_eq!(judge(2, Some(0), false, &text(Some(2), 2), &r, false), None);
        let r = read(&lines(&[START2, A_OK, B_FAIL, END2]), 1 << 20);
        assert_eq!((r.passed, r.failed.clone()), (1, vec!["test_b".to_string()]));
        assert_eq!(judge(2, Some(1), false, &text(Some(2), 1), &r, false), None);
    }

    #[test]
    fn early_exit_after_printing_a_summary_is_forgery() {
        // print("Ran 2 tests ... OK"); os._exit(0) while the tests load.
        let r = read(b"", 1 << 20);
        let v = judge(2, Some(0), false, &text(Some(2), 2), &r, false).unwrap();
        assert!(v.contains("exited 0") && v.contains("0 of 2"), "{v}");
        // A crash that claims nothing is a plain failure.
        assert_eq!(judge(2, Some(1), false, &text(None, 0), &r, false), None);
        // A hang is a timeout, not a forgery.
        assert_eq!(judge(2, None, true, &text(None, 0), &r, false), None);
    }

    #[test]
    fn summary_contradicting_the_runner_is_forgery() {
        // atexit prints "Ran 1000 tests OK" after real failures.
        let r = read(&lines(&[START2, A_OK, B_FAIL, END2]), 1 << 20);
        let v = judge(2, Some(1), false, &text(Some(1000), 1000), &r, false).unwrap();
        assert!(v.contains("Ran 1000") && v.contains("1 of 2"), "{v}");
        let v = judge(2, Some(1), false, &text(Some(2), 2), &r, false).unwrap();
        assert!(v.contains("contradicts"), "{v}");
        // exit forced to 0 over failures
        let v = judge(2, Some(0), false, &text(Some(2), 1), &r, false).unwrap();
        assert!(v.contains("exited 0 though"), "{v}");
    }

    #[test]
    fn tampering_and_written_lines_are_forgery() {
        let end = r#"{"event": "end", "ran": 2, "tampered": ["unittest.TestCase.run"]}"#;
        let r = read(&lines(&[START2, A_OK, B_OK, end]), 1 << 20);
        assert!(
            judge(2, Some(1), false, &text(Some(2), 2), &r, false)
                .unwrap()
                .contains("unittest.TestCase.run")
        );
        // the same test twice, and junk
        // (the duplicate is not counted: the end's 2 and the start's 2 then disagree with the 1 test held)
        let r = read(&lines(&[START2, A_OK, A_OK, "garbage", END2]), 1 << 20);
        let anomalies = [
            "line 3: test `tests.test_m.T.test_a` reported twice",
            "line 4 is not a runner event",
            "the end counts 2 tests run, the file holds 1",
            "2 tests were collected and 1 reported",
        ];
        assert_eq!(r.anomalies, anomalies);
        assert_eq!(
            judge(2, Some(0), false, &text(Some(2), 2), &r, false).as_deref(),
            Some(
                format!(
                    "the grader's result file was written by something other than its runner: {}",
                    anomalies.join("; ")
                )
                .as_str()
            )
        );
        // lines after the end
        let r = read(&lines(&[START2, A_OK, B_OK, END2, A_OK]), 1 << 20);
        assert_eq!(
            judge(2, Some(0), false, &text(Some(2), 2), &r, false).as_deref(),
            Some(
                "the grader's result file was written by something other than its runner: line 5 comes after the end"
            )
        );
        // more tests than declared
        let c = r#"{"event": "test", "id": "c", "outcome": "passed"}"#;
        let r = read(
            &lines(&[
                r#"{"event": "start", "loaded": 3}"#,
                A_OK,
                B_OK,
                c,
                r#"{"event": "end", "ran": 3, "tampered": []}"#,
            ]),
            1 << 20,
        );
        assert!(
            judge(2, Some(0), false, &text(Some(3), 3), &r, false).unwrap().contains("declares 2")
        );
    }

    fn pool() -> HashSet<String> {
        ["test_quiet_row", "test_odd_key"].iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn canaries_must_fail_and_are_not_counted_as_tests() {
        let r = super::read(
            &lines(&[START2C, CANARY_FAILED, A_OK, CANARY_ERROR, B_OK, END2]),
            1 << 20,
            KEY,
            &pool(),
        );
        assert_eq!((r.tests, r.passed, r.canaries, r.canaries_failed), (2, 2, 2, 2));
        assert_eq!(judge(2, Some(0), false, &text(Some(2), 2), &r, true), None);
        // A canary reported passed: whatever turned it, the check is a forgery.
        let r = super::read(
            &lines(&[START2C, CANARY_FAILED, A_OK, CANARY_PASSED, B_OK, END2]),
            1 << 20,
            KEY,
            &pool(),
        );
        assert_eq!(r.canaries_turned, vec!["test_odd_key: passed".to_string()]);
        let v = judge(2, Some(0), false, &text(Some(2), 2), &r, true).unwrap();
        assert!(v.starts_with("1 of 2 canaries (tests that must fail) were reported otherwise: test_odd_key: passed"), "{v}");
        // Canaries announced but not all reported.
        let r =
            super::read(&lines(&[START2C, CANARY_FAILED, A_OK, B_OK, END2]), 1 << 20, KEY, &pool());
        assert_eq!(r.anomalies, vec!["2 canaries were announced and 1 reported".to_string()]);
        // Tests that pass with no canary at all, where canaries were given: removed.
        let r = super::read(&lines(&[START2, A_OK, B_OK, END2]), 1 << 20, KEY, &pool());
        let v = judge(2, Some(0), false, &text(Some(2), 2), &r, true).unwrap();
        assert!(v.contains("no canary"), "{v}");
    }

    #[test]
    fn a_fixture_that_raises_leaves_its_tests_not_run_a_failure_not_a_forgery() {
        // setUpClass raised: unittest prints "Ran 0 tests ... FAILED (errors=1)" and exits 1.
        let fixture =
            r#"{"event": "fixture", "id": "setUpClass (tests.test_m.T)", "outcome": "error"}"#;
        let a = r#"{"event": "test", "id": "tests.test_m.T.test_a", "outcome": "not_run"}"#;
        let b = r#"{"event": "test", "id": "tests.test_m.T.test_b", "outcome": "not_run"}"#;
        let end = r#"{"event": "end", "ran": 0, "tampered": []}"#;
        let r = read(&lines(&[START2, fixture, a, b, end]), 1 << 20);
        assert_eq!((r.tests, r.passed, r.not_run, r.anomalies.len()), (2, 0, 2, 0));
        assert_eq!(r.fixture_errors, vec!["setUpClass (tests.test_m.T)".to_string()]);
        assert_eq!(r.failed, vec!["test_a".to_string(), "test_b".to_string()]);
        let printed = Parsed { total: Some(0), passed: 0, failed_tests: vec![] };
        assert_eq!(judge(2, Some(1), false, &printed, &r, true), None);
    }
}
