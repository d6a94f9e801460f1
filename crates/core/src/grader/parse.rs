//! Reading passed/total from a check's output.

use crate::suite::OutputParser;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parsed {
    /// Test count the runner reported; None when no summary was found.
    pub total: Option<u32>,
    pub passed: u32,
    /// Names of failed or errored tests, in output order.
    pub failed_tests: Vec<String>,
}

pub fn parse(parser: OutputParser, output: &str) -> Parsed {
    match parser {
        OutputParser::Unittest => parse_unittest(output),
        OutputParser::Pytest => parse_pytest(output),
    }
}

/// Python unittest (`-v` or not): `Ran N tests` and then `OK` or
/// `FAILED (failures=a, errors=b, skipped=c, unexpected successes=d)`.
/// Skipped tests do not count as passed. Failed names come from the
/// `FAIL: name (...)` / `ERROR: name (...)` headers.
pub(crate) fn parse_unittest(output: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut not_passed = 0u32;
    for line in output.lines() {
        let line = line.trim_end();
        if let Some(rest) = line.strip_prefix("Ran ") {
            if let Some(n) = rest.split_whitespace().next().and_then(|n| n.parse().ok()) {
                parsed.total = Some(n);
                not_passed = 0;
            }
        } else if (line.starts_with("OK") || line.starts_with("FAILED")) && parsed.total.is_some() {
            if let (Some(open), Some(close)) = (line.find('('), line.rfind(')')) {
                for item in line[open + 1..close].split(',') {
                    let mut kv = item.trim().splitn(2, '=');
                    let key = kv.next().unwrap_or("").trim();
                    let value: u32 = kv.next().and_then(|v| v.trim().parse().ok()).unwrap_or(0);
                    if matches!(key, "failures" | "errors" | "skipped" | "unexpected successes") {
                        not_passed += value;
                    }
                }
            }
        } else if let Some(rest) =
            line.strip_prefix("FAIL: ").or_else(|| line.strip_prefix("ERROR: "))
        {
            let name = rest.split_whitespace().next().unwrap_or(rest).to_string();
            if !parsed.failed_tests.contains(&name) {
                parsed.failed_tests.push(name);
            }
        }
    }
    if let Some(total) = parsed.total {
        parsed.passed = total.saturating_sub(not_passed);
    }
    parsed
}

/// pytest: the last `=== 1 failed, 12 passed, 1 error in 0.12s ===` line, and
/// `FAILED path::name` / `ERROR path::name` lines of the short summary.
pub(crate) fn parse_pytest(output: &str) -> Parsed {
    let mut parsed = Parsed::default();
    for line in output.lines() {
        let trimmed = line.trim().trim_matches('=').trim();
        if let Some(rest) = line.strip_prefix("FAILED ").or_else(|| line.strip_prefix("ERROR ")) {
            let id = rest.split(" - ").next().unwrap_or(rest).trim();
            let name = id.rsplit("::").next().unwrap_or(id).to_string();
            if !parsed.failed_tests.contains(&name) {
                parsed.failed_tests.push(name);
            }
            continue;
        }
        if !(line.starts_with('=') && trimmed.contains(" in ")) {
            continue;
        }
        let counts = trimmed.rsplit_once(" in ").map(|(c, _)| c).unwrap_or(trimmed);
        let mut total = 0u32;
        let mut passed = 0u32;
        let mut any = false;
        for item in counts.split(',') {
            let mut words = item.split_whitespace();
            let (Some(n), Some(kind)) =
                (words.next().and_then(|n| n.parse::<u32>().ok()), words.next())
            else {
                continue;
            };
            any = true;
            match kind {
                "passed" => {
                    passed += n;
                    total += n;
                }
                "failed" | "error" | "errors" | "skipped" | "xfailed" | "xpassed" => total += n,
                _ => {}
            }
        }
        if any {
            parsed.total = Some(total);
            parsed.passed = passed;
        }
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNITTEST_MIXED: &str = "\
test_a (tests.test_m.T.test_a) ... ok
test_b (tests.test_m.T.test_b) ... FAIL
test_c (tests.test_m.T.test_c) ... ERROR
test_d (tests.test_m.T.test_d) ... skipped 'no'

======================================================================
ERROR: test_c (tests.test_m.T.test_c)
----------------------------------------------------------------------
Traceback (most recent call last):
NotImplementedError

======================================================================
FAIL: test_b (tests.test_m.T.test_b)
----------------------------------------------------------------------
AssertionError: 1 != 2

----------------------------------------------------------------------
Ran 4 tests in 0.001s

FAILED (failures=1, errors=1, skipped=1)
";

    #[test]
    fn unittest_counts_and_names() {
        let p = parse_unittest(UNITTEST_MIXED);
        assert_eq!(p.total, Some(4));
        assert_eq!(p.passed, 1);
        assert_eq!(p.failed_tests, vec!["test_c", "test_b"]);
    }

    #[test]
    fn unittest_ok_and_missing_summary() {
        let p = parse_unittest("..\n----\nRan 2 tests in 0.000s\n\nOK\n");
        assert_eq!((p.total, p.passed), (Some(2), 2));
        let p = parse_unittest("Ran 3 tests in 0.1s\n\nOK (skipped=1)\n");
        assert_eq!((p.total, p.passed), (Some(3), 2));
        let p = parse_unittest("Traceback: SyntaxError\n");
        assert_eq!((p.total, p.passed), (None, 0));
    }

    #[test]
    fn pytest_summary_line() {
        let out = "tests/test_m.py ..F.E\n=========================== short test summary info ============================\nFAILED tests/test_m.py::test_b - AssertionError: x\nERROR tests/test_m.py::test_e - NameError\n==================== 1 failed, 3 passed, 1 error in 0.12s ====================\n";
        let p = parse_pytest(out);
        assert_eq!((p.total, p.passed), (Some(5), 3));
        assert_eq!(p.failed_tests, vec!["test_b", "test_e"]);
        let p = parse_pytest("============ 13 passed in 0.05s ============\n");
        assert_eq!((p.total, p.passed), (Some(13), 13));
        let p = parse_pytest("no tests ran\n");
        assert_eq!(p.total, None);
    }
}
