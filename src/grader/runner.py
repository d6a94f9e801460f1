"""ablate's test runner: runs a task's checks and reports each test's outcome
on a result file of its own, which the printed output does not touch.

Usage: python3 runner.py RESULT_FILE unittest ARGS...   (ARGS as for `python3 -m unittest`)
       python3 runner.py RESULT_FILE pytest ARGS...     (ARGS as for `python3 -m pytest`)

The first line of standard input is a secret key, read before any task code is
imported; standard input is then closed. Each line of the result file is
`SIG JSON`, where SIG is sha256(key + previous SIG + JSON) in hex: a line that
task code writes into the file without the key breaks the chain.

Result events, one a line:
  {"event": "start", "loaded": N}              after collection, before any test runs
  {"event": "test", "id": ..., "outcome": ...}  one per test: passed, failed, error,
                                                skipped, expected_failure, unexpected_success
  {"event": "end", "ran": N, "tampered": [...]} after the last test; `tampered` names the
                                                test framework's attributes that changed
                                                while the task's code was loaded or ran

The grader (src/grader/mod.rs) cross-checks this with the exit code and the
printed summary: a process that prints a summary and exits early leaves no
"end"; one that patches the framework is named in "tampered".
"""
import builtins
import hashlib
import json
import os
import sys

_write = os.write
_dumps = json.dumps
_sha256 = hashlib.sha256
_id = id


def _open_channel(path):
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)


def _emitter(fd, key):
    chain = [b""]

    def emit(obj):
        payload = _dumps(obj).encode()
        sig = _sha256(key + chain[0] + payload).hexdigest().encode()
        chain[0] = sig
        _write(fd, sig + b" " + payload + b"\n")
    return emit


def _read_key():
    key = sys.stdin.buffer.readline().strip()
    # Nothing of the key stays reachable through file descriptors.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return key


# Attributes of these modules that the task's code has no business replacing.
_NAMED = {
    "os": ["_exit", "write", "kill", "fork", "exit"],
    "sys": ["exit", "excepthook", "displayhook"],
}


def _snapshot(objects):
    """Identity of the watched attributes. For a class: all of them, so an
    added method counts; for a module: all (or the _NAMED ones), and an
    attribute added later (a submodule imported) does not count."""
    snap = {}
    for label, obj in objects:
        names = _NAMED.get(label)
        items = [(n, getattr(obj, n, None)) for n in names] if names else list(vars(obj).items())
        is_class = isinstance(obj, type)
        for key, value in items:
            snap[label + "." + key] = (_id(value), is_class)
    return snap


def _changed(before, after):
    changed = [k for k in before if before[k][0] != after.get(k, (None,))[0]]
    added = [k for k in after if k not in before and after[k][1]]
    return sorted(changed + added)


def run_unittest(emit, args):
    import unittest
    import unittest.case
    import unittest.loader
    import unittest.main
    import unittest.result
    import unittest.runner
    import unittest.suite

    outcomes = {}

    class AblateResult(unittest.TextTestResult):
        def _record(self, test, outcome):
            tid = test.id()
            outcomes[tid] = outcome
            emit({"event": "test", "id": tid, "outcome": outcome})

        def addSuccess(self, test):
            super().addSuccess(test)
            self._record(test, "passed")

        def addFailure(self, test, err):
            super().addFailure(test, err)
            self._record(test, "failed")

        def addError(self, test, err):
            super().addError(test, err)
            self._record(test, "error")

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            self._record(test, "skipped")

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            self._record(test, "expected_failure")

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            self._record(test, "unexpected_success")

        def addSubTest(self, test, subtest, err):
            super().addSubTest(test, subtest, err)
            if err is not None:
                outcome = "failed" if issubclass(err[0], test.failureException) else "error"
                emit({"event": "subtest", "id": test.id(), "outcome": outcome})

    class AblateRunner(unittest.TextTestRunner):
        resultclass = AblateResult

    watched = [
        ("unittest", unittest),
        ("unittest.TestCase", unittest.TestCase),
        ("unittest.TestResult", unittest.TestResult),
        ("unittest.TextTestResult", unittest.TextTestResult),
        ("unittest.TextTestRunner", unittest.TextTestRunner),
        ("unittest.TestSuite", unittest.TestSuite),
        ("unittest.TestLoader", unittest.TestLoader),
        ("unittest.TestProgram", unittest.TestProgram),
        ("unittest.case", unittest.case),
        ("unittest.case._Outcome", unittest.case._Outcome),
        ("unittest.suite", unittest.suite),
        ("unittest.result", unittest.result),
        ("AblateResult", AblateResult),
        ("AblateRunner", AblateRunner),
        ("builtins", builtins),
        ("os", os),
        ("sys", sys),
    ]
    volatile = {"builtins._"}
    before = _snapshot(watched)
    state = {"ran": None}

    class AblateProgram(unittest.TestProgram):
        def runTests(self):
            emit({"event": "start", "loaded": self.test.countTestCases()})
            super().runTests()
            state["ran"] = self.result.testsRun

    program = AblateProgram(module=None, argv=["python3 -m unittest"] + args, testRunner=AblateRunner, exit=False)
    after = _snapshot(watched)
    tampered = [k for k in _changed(before, after) if k not in volatile]
    emit({"event": "end", "ran": state["ran"], "tampered": tampered})
    result = program.result
    return 0 if result.wasSuccessful() and not tampered else 1


def run_pytest(emit, args):
    import pytest

    seen = set()

    class AblatePlugin:
        def pytest_collection_finish(self, session):
            emit({"event": "start", "loaded": len(session.items)})

        def pytest_runtest_logreport(self, report):
            if report.nodeid in seen:
                return
            if report.when == "call" or report.outcome != "passed":
                if hasattr(report, "wasxfail"):
                    outcome = "expected_failure" if report.skipped else "unexpected_success"
                else:
                    outcome = {"passed": "passed", "failed": "failed", "skipped": "skipped"}[report.outcome]
                    if report.when != "call" and outcome == "failed":
                        outcome = "error"
                seen.add(report.nodeid)
                emit({"event": "test", "id": report.nodeid, "outcome": outcome})

    plugin = AblatePlugin()
    watched = [("pytest", pytest), ("AblatePlugin", AblatePlugin), ("builtins", builtins)]
    before = _snapshot(watched)
    code = pytest.main(args, plugins=[plugin])
    tampered = [k for k in _changed(before, _snapshot(watched)) if k != "builtins._"]
    emit({"event": "end", "ran": len(seen), "tampered": tampered})
    return int(code) if not tampered else 1


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in ("unittest", "pytest"):
        sys.stderr.write(__doc__)
        return 2
    out, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    # As with `python3 -m`, the working directory comes first on sys.path, and
    # the runner's own folder not at all.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.getcwd()] + [p for p in sys.path[1:] if os.path.abspath(p or ".") != here]
    emit = _emitter(_open_channel(out), _read_key())
    if mode == "unittest":
        return run_unittest(emit, args)
    return run_pytest(emit, args)


if __name__ == "__main__":
    sys.exit(main())
