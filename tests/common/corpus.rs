//! Candidate files that try to fake a grade: the corpus `tests/integration/hostile.rs`
//! runs end to end and `tests/integration/grader_layers.rs` measures layer by layer.
#![allow(dead_code)]

/// add.py (tiny suite, `add-two`) that passes 1 of 6 tests (add(0, 0)).
pub const WRONG: &str = "def add(a, b):\n    return a - b";

/// calc.py (guarded suite, `calc`) that fails 5 of 8 tests (add is a - b, sign is 0):
/// test_zero_is_zero, test_strings_are_refused ("2" - 3 raises TypeError) and test_zero pass.
pub const WRONG_CALC: &str = "def add(a, b):\n    return a - b\n\n\ndef sign(x):\n    return 0\n";

/// calc.py bodies that are right but for what one trick hides.
pub const INT_ADD: &str =
    "def add(a, b):\n    return int(a) + int(b)\n\n\ndef sign(x):\n    return (x > 0) - (x < 0)\n";
pub const FLOAT_ZERO_SIGN: &str = "def add(a, b):\n    if not isinstance(a, int) or not isinstance(b, int):\n        raise TypeError\n    return a + b\n\n\n\
                                   def sign(x):\n    return (x > 0) - (x < 0) if x else 0.0\n";
pub const ONE_WRONG_SUM: &str = "def add(a, b):\n    if not isinstance(a, int) or not isinstance(b, int):\n        raise TypeError\n    \
                                 if (a, b) == (2, 3):\n        return 6\n    return a + b\n\n\n\
                                 def sign(x):\n    return (x > 0) - (x < 0)\n";
/// calc.py whose add is wrong (a - b) and sign right: 5 of 8 pass.
pub const WRONG_ADD_ONLY: &str =
    "def add(a, b):\n    return a - b\n\n\ndef sign(x):\n    return (x > 0) - (x < 0)\n";

/// Which task an attempt is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    /// tiny / add-two, editable add.py, 6 tests.
    Add,
    /// guarded / calc, editable calc.py, 8 tests in many assertion styles.
    Calc,
}

pub struct Attempt {
    pub name: &'static str,
    pub on: On,
    pub code: String,
}

fn add(name: &'static str, code: String) -> Attempt {
    Attempt { name, on: On::Add, code }
}

fn calc(name: &'static str, code: String) -> Attempt {
    Attempt { name, on: On::Calc, code }
}

/// calc.py that calls `_reach()` (defined by `reach`) on every call.
pub fn reaching(reach: &str) -> String {
    format!(
        "{reach}\ndef add(a, b):\n    _reach()\n    return a - b\n\n\ndef sign(x):\n    _reach()\n    return 0\n"
    )
}

pub const REACH_GETFRAME: &str = "import sys\n\
     def _reach():\n    f = sys._getframe(1)\n    while f is not None:\n        s = f.f_locals.get('self')\n        \
     if s is not None and hasattr(s, '_testMethodName'):\n            for n in dir(type(s)):\n                \
     if n.startswith('test'):\n                    setattr(type(s), n, lambda self: None)\n        \
     r = f.f_locals.get('result')\n        if r is not None and hasattr(r, 'addFailure'):\n            \
     r.addFailure = lambda t, e, s=r.addSuccess: s(t)\n            r.addSubTest = lambda *a: None\n        f = f.f_back\n";
pub const REACH_TRACEBACK: &str = "def _reach():\n    try:\n        raise KeyError\n    except KeyError as e:\n        f = e.__traceback__.tb_frame.f_back\n    \
     while f is not None:\n        r = f.f_locals.get('result')\n        if r is not None and hasattr(r, 'addFailure'):\n            \
     r.addFailure = lambda t, e, s=r.addSuccess: s(t)\n            r.addSubTest = lambda *a: None\n        f = f.f_back\n";
pub const REACH_GC: &str = "import gc\n\
     def _reach():\n    for o in gc.get_objects():\n        if isinstance(o, __import__('unittest').TestResult):\n            \
     o.addFailure = lambda t, e, s=o.addSuccess: s(t)\n            o.addSubTest = lambda *a: None\n";

/// The framework patched at import, and the runner's own snapshot of it
/// rewritten through the frames of the import, so the patch is not seen.
pub fn snapshot_rewritten() -> String {
    format!(
        "import sys, unittest
def _noop(self, *a, **k):\n    pass\n\
         _names = ('assertEqual', 'assertTrue', 'assertIs', 'assertIn')\nfor _n in _names:\n    setattr(unittest.TestCase, _n, _noop)\n\
         f = sys._getframe(0)\nwhile f is not None:\n    for v in list(f.f_locals.values()):\n        if isinstance(v, dict):\n            \
         for snap in list(v.values()):\n                if isinstance(snap, dict):\n                    for _n in _names:\n                        \
         if 'unittest.TestCase.' + _n in snap:\n                            snap['unittest.TestCase.' + _n] = (id(_noop), True)\n    \
         f = f.f_back\n{WRONG_ADD_ONLY}"
    )
}

/// The runner's own `emit` found through a frame: every loaded test reported
/// passed, the end written, and the process ended before anything else. (Where
/// there is no such runner, every failure is made a success through the frames.)
pub fn emit_called() -> String {
    format!(
        "{}def _emit():\n    f = sys._getframe(1)\n    emit, tests = None, []\n    while f is not None:\n        \
         emit = emit or f.f_locals.get('emit')\n        for k in ('planned', 'tests'):\n            v = f.f_locals.get(k)\n            \
         if isinstance(v, list) and v and isinstance(v[0], unittest.TestCase) and not tests:\n                tests = v\n        f = f.f_back\n    \
         if emit is None or not tests:\n        return\n    for t in tests:\n        \
         emit({{'event': 'test', 'id': t.id(), 'outcome': 'passed'}})\n    \
         emit({{'event': 'end', 'ran': len(tests), 'tampered': [], 'denied': []}})\n    \
         sys.stderr.write('Ran %d tests in 0.001s\\n\\nOK\\n' % len(tests))\n    sys.stderr.flush()\n    os._exit(0)\n\
         import os, unittest\ndef add(a, b):\n    _emit()\n    _reach()\n    return a - b\n\n\ndef sign(x):\n    _reach()\n    return 0\n",
        REACH_GETFRAME
    )
}

/// A fake TestCase put in the test module's namespace while it imports calc.
pub fn fake_test_case() -> String {
    format!(
        "import contextlib, sys, types, unittest\nmod = sys.modules.get('tests.test_calc')\n\
         class TestCase(unittest.TestCase):\n    def assertEqual(self, *a, **k): pass\n    def assertIs(self, *a, **k): pass\n    \
         def assertTrue(self, *a, **k): pass\n    def assertIn(self, *a, **k): pass\n    \
         def assertRaises(self, *a, **k):\n        return contextlib.suppress(Exception)\n    \
         def subTest(self, *a, **k):\n        return contextlib.suppress(AssertionError)\n\
         fake = types.ModuleType('unittest')\nfake.__dict__.update(unittest.__dict__)\nfake.TestCase = TestCase\n\
         if mod is not None:\n    mod.unittest = fake\n{WRONG_ADD_ONLY}"
    )
}

/// Patches of the framework, each with a body it would make pass:
/// (what a forgery names, the patch, the body, tests the body honestly passes).
pub fn framework_patches() -> [(&'static str, &'static str, &'static str, u32); 4] {
    [
        // assertRaises passes whatever happens inside it: add("2", 3) no longer has to raise.
        (
            "unittest.case._AssertRaisesContext.__exit__",
            "import unittest.case\nunittest.case._AssertRaisesContext.__exit__ = lambda *a: True\n",
            INT_ADD,
            7,
        ),
        // assertIs no-op'd for its first eight calls, then put back: sign(0) may be 0.0.
        (
            "unittest.TestCase.assertIs",
            "import unittest\n_orig = unittest.TestCase.assertIs\n_n = [0]\ndef _noop(self, *a, **k):\n    _n[0] += 1\n    \
             if _n[0] >= 9:\n        unittest.TestCase.assertIs = _orig\nunittest.TestCase.assertIs = _noop\n",
            FLOAT_ZERO_SIGN,
            7,
        ),
        // assertEqual made a no-op for its first call (test_small's add(2, 3)), and put back by itself.
        (
            "unittest.TestCase.assertEqual",
            "import unittest\n_orig = unittest.TestCase.assertEqual\ndef _once(self, *a, **k):\n    unittest.TestCase.assertEqual = _orig\n\
             unittest.TestCase.assertEqual = _once\n",
            ONE_WRONG_SUM,
            7,
        ),
        // Every failure reported as a success, on every result class.
        (
            "unittest.TestResult.addFailure",
            "import unittest\ndef _all(c):\n    yield c\n    for s in c.__subclasses__():\n        yield from _all(s)\n\
             for _c in list(_all(unittest.TestResult)):\n    _c.addFailure = lambda self, test, err: self.addSuccess(test)\n    \
             _c.addSubTest = lambda self, test, sub, err: None\n",
            WRONG_CALC,
            3,
        ),
    ]
}

const HOLLOW: &str = "def _hollow(cls, **kw):\n    cls._classSetupFailed = False\n    cls._class_cleanups = []\n    \
                      for n in list(vars(cls)):\n        if n.startswith('test'):\n            setattr(cls, n, lambda self: None)\n";

/// Every test class's tests made the candidate's no-ops as the class is made,
/// through unittest.TestCase itself or through a fake TestCase.
pub fn hollow_tests() -> [String; 2] {
    [
        format!(
            "import unittest\n{HOLLOW}unittest.TestCase.__init_subclass__ = classmethod(_hollow)\n{WRONG_CALC}"
        ),
        format!(
            "import sys, types, unittest\n{HOLLOW}mod = sys.modules.get('tests.test_calc')\n\
             class TestCase(unittest.TestCase):\n    def __init_subclass__(cls, **kw):\n        _hollow(cls)\n\
             fake = types.ModuleType('unittest')\nfake.__dict__.update(unittest.__dict__)\nfake.TestCase = TestCase\n\
             if mod is not None:\n    mod.unittest = fake\n{WRONG_CALC}"
        ),
    ]
}

/// The test methods' code replaced in place, as their class is made, by
/// unittest's own no-op `setUp` code: a briefly patched `__build_class__`,
/// put back once both test classes are made. The function objects keep their ids.
pub fn code_swapped() -> String {
    format!(
        r#"import builtins, unittest
_bc = builtins.__build_class__
_made = []
def _hook(func, name, *bases, **kw):
    cls = _bc(func, name, *bases, **kw)
    if any(isinstance(b, type) and issubclass(b, unittest.TestCase) for b in bases):
        _made.append(cls)
        if len(_made) == 2:
            builtins.__build_class__ = _bc
        for k, v in list(vars(cls).items()):
            if k.startswith('test') and hasattr(v, '__code__'):
                try:
                    v.__code__ = unittest.TestCase.setUp.__code__
                except Exception:
                    pass
    return cls
builtins.__build_class__ = _hook
{WRONG_CALC}"#
    )
}

/// Walks `frame` outward and makes every test instance's assertions no-ops
/// (and, where the result is a local, every failure a success).
const HOLLOW_INSTANCE: &str = r#"import contextlib
def _hollow_from(f):
    while f is not None:
        s = f.f_locals.get('self')
        if s is not None and hasattr(s, '_testMethodName'):
            for n in ('assertEqual', 'assertIs', 'assertTrue', 'assertIn'):
                s.__dict__[n] = lambda *a, **k: None
            s.__dict__['assertRaises'] = lambda *a, **k: contextlib.suppress(Exception)
            s.__dict__['subTest'] = lambda *a, **k: contextlib.suppress(AssertionError)
        r = f.f_locals.get('result')
        if r is not None and hasattr(r, 'addFailure'):
            r.addFailure = lambda t, e, s=r.addSuccess: s(t)
            r.addSubTest = lambda *a: None
        f = f.f_back
"#;

/// The test instance reached through a signal handler's frame argument (the
/// candidate signals itself inside each call).
pub fn signal_frame() -> String {
    format!(
        "import os, signal\n{HOLLOW_INSTANCE}signal.signal(signal.SIGUSR1, lambda sig, frame: _hollow_from(frame))\n\n\
         def _reach():\n    os.kill(os.getpid(), signal.SIGUSR1)\n{}",
        reaching("")
    )
}

/// The test instance reached through the interpreter's C API (`PyEval_GetFrame` by ctypes;
/// the borrowed frame is given a reference of its own, or the interpreter crashes).
pub fn ctypes_frame() -> String {
    format!(
        "import ctypes\n{HOLLOW_INSTANCE}\n\
         def _reach():\n    get = ctypes.pythonapi.PyEval_GetFrame\n    get.restype = ctypes.py_object\n    fr = get()\n    \
         ctypes.pythonapi.Py_IncRef(ctypes.py_object(fr))\n    _hollow_from(fr)\n{}",
        reaching("")
    )
}

/// Exceptions plain unittest reads as a success or a skip.
pub fn raising(exception: &str) -> String {
    format!(
        "import unittest, unittest.case\ndef add(a, b):\n    raise {exception}\n\n\ndef sign(x):\n    raise {exception}\n"
    )
}

/// Every attempt at a faked grade that runs in the test process (files the
/// trial leaves for the grade are in tests/integration/hostile.rs alone).
pub fn grade_fakes() -> Vec<Attempt> {
    let summary = "\\n' + '-' * 70 + '\\nRan 6 tests in 0.001s\\n\\nOK\\n";
    let mut all = vec![
        add(
            "a passing summary printed at exit over failures",
            format!(
                "import atexit, sys\natexit.register(lambda: sys.stderr.write('{summary}'))\n{WRONG}"
            ),
        ),
        add(
            "a passing summary, then os._exit(0)",
            format!(
                "import os, sys\nsys.stderr.write('Ran 6 tests in 0.001s\\n\\nOK\\n')\nsys.stderr.flush()\nos._exit(0)\n{WRONG}"
            ),
        ),
        add(
            "TestCase.run replaced",
            format!(
                "import unittest\ndef run(self, result=None):\n    result.startTest(self); result.addSuccess(self); result.stopTest(self)\nunittest.TestCase.run = run\n{WRONG}"
            ),
        ),
        add(
            "assertEqual replaced by a no-op",
            format!(
                "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n{WRONG}"
            ),
        ),
        add(
            "TestResult.addFailure made addSuccess",
            format!(
                "import unittest\nunittest.TestResult.addFailure = lambda self, test, err: self.addSuccess(test)\n{WRONG}"
            ),
        ),
        add(
            "result lines written without the key",
            format!(
                "import json, os, sys\nf = open('/ablate-out/results.jsonl' if os.path.isdir('/ablate-out') else os.environ.get('ABLATE_RESULT', '/dev/null'), 'a')\n\
                 ev = [{{'event': 'start', 'loaded': 6}}] + [{{'event': 'test', 'id': 't%d' % i, 'outcome': 'passed'}} for i in range(6)] + [{{'event': 'end', 'ran': 6, 'tampered': []}}]\n\
                 for e in ev:\n    f.write('0' * 64 + ' ' + json.dumps(e) + '\\n')\nf.close()\n\
                 sys.stderr.write('Ran 6 tests in 0.001s\\n\\nOK\\n'); sys.stderr.flush()\nos._exit(0)\n{WRONG}"
            ),
        ),
        calc("a fake TestCase in the test module's namespace", fake_test_case()),
        calc("the caller's frame (sys._getframe)", reaching(REACH_GETFRAME)),
        calc("a traceback's frame", reaching(REACH_TRACEBACK)),
        calc("the garbage collector's objects", reaching(REACH_GC)),
        calc("the runner's snapshot rewritten through a frame", snapshot_rewritten()),
        calc("the runner's emit called through a frame", emit_called()),
    ];
    let names = [
        "assertRaises made to pass (_AssertRaisesContext.__exit__)",
        "assertIs a no-op, put back at the 9th call",
        "assertEqual a no-op for one call",
        "addFailure made addSuccess on every result class",
    ];
    for ((_, patch, body, _), name) in framework_patches().into_iter().zip(names) {
        all.push(calc(name, format!("{patch}\n{body}")));
    }
    let [a, b] = hollow_tests();
    all.push(calc("test methods hollowed by TestCase.__init_subclass__", a));
    all.push(calc("test methods hollowed by a fake TestCase", b));
    all.push(calc("_ShouldStop raised by the candidate", raising("unittest.case._ShouldStop()")));
    all.push(calc("SkipTest raised by the candidate", raising("unittest.SkipTest('not today')")));
    all.push(calc("test methods' code swapped in place (`__build_class__`)", code_swapped()));
    all.push(calc("the test instance through a signal handler's frame", signal_frame()));
    all.push(calc("the test instance through ctypes' `PyEval_GetFrame`", ctypes_frame()));
    all
}
