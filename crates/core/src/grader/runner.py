"""ablate's test runner: runs a task's checks and reports each test's outcome
on a result file of its own, which the printed output does not touch.

Usage: python3 -I -B runner.py RESULT_FILE unittest ARGS...
       python3 -I -B runner.py RESULT_FILE pytest ARGS...
(ARGS as for `python3 -m unittest` / `python3 -m pytest`)

The first line of standard input is JSON, read before any task code is
imported: {"key": KEY, "canaries": [NAME, ...], "remote": [MODULE, ...]};
standard input is then closed. With "remote" (out-of-process grading), each
MODULE is the candidate's, asked of its own process on file descriptor 3
(remote.py): no code of the candidate runs in this process.

Each line of the result file is `SIG JSON`, where SIG is
sha256(key + previous SIG + JSON) in hex: a line that task code writes into
the file without the key breaks the chain.

The interpreter starts isolated (-I: no user site, no PYTHON* variables, no
script or working folder on sys.path) and writes no bytecode (-B). The
framework and the standard library modules it uses are imported first; then
bytecode is looked for only in an empty folder (sys.pycache_prefix), so a
__pycache__ left in the workspace is never used, and only then is the
working folder put on sys.path, so a workspace file named like a module
already imported changes nothing.

How a unittest outcome is decided (by construction, not by detection):
- Each test is run by this runner's own `run` (the logic of TestCase.run,
  written here), bound to the test instance: its outcome is what the test's
  own code raised, recorded in variables of this runner. The TestResult that
  prints the summary is told afterwards, for the printed output only.
- Every assertion method, `fail`, `subTest`, `assertRaises` and
  `failureException` is bound to each test instance as it was before any
  task code was imported (unless the task's own tests/ override it), and the
  test method, its skip and expected-failure marks are read once, after
  loading: replacing them on unittest's classes, or on the test class while
  tests run, changes nothing.
- An audit hook (PEP 578; it cannot be removed) refuses frames and the
  garbage collector's object graph to code in the workspace outside tests/:
  that code cannot reach the test instance, the result or this runner.
- Canaries: test methods that must fail, added to every test class the task
  loads (named from the list on standard input, so they look like any test),
  one of each assertion style the task's own tests use before every test and
  after each class's last test. The grader (crates/core/src/grader/channel.rs) knows
  their names and requires every one to fail: a manipulation that turns
  failures into passes, whatever it is, turns a canary too.
- The framework's classes, the test classes, `builtins`, and `os`/`sys`
  entry points are compared with their state after loading at every test's
  start and end; a change is reported as `tampered`.

Result events, one a line:
  {"event": "ready", "modules": [...]}          the framework is loaded: the top-level
                                                modules imported so far
  {"event": "start", "loaded": N, "canaries": M}  after collection, before any test runs
  {"event": "test", "id": ..., "outcome": ...}  one per test (and canary) when it ends:
                                                passed, failed, error, skipped,
                                                expected_failure, unexpected_success, or
                                                not_run (a class or module fixture failed)
  {"event": "fixture", "id": ..., "outcome": ...}  a class or module fixture that failed
                                                (error) or skipped its tests (skipped)
  {"event": "end", "ran": N, "tampered": [...], "denied": [...]}
                                                after the last test; `denied`: the
                                                introspection the task's code was refused
"""
import builtins
import hashlib
import json
import os
import sys


def _open_channel(path):
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)


def _emitter(fd, key, write=os.write, dumps=json.dumps, sha256=hashlib.sha256):
    chain = [b""]

    def emit(obj):
        payload = dumps(obj).encode()
        sig = sha256(key + chain[0] + payload).hexdigest().encode()
        chain[0] = sig
        write(fd, sig + b" " + payload + b"\n")
    return emit


def _read_setup():
    line = sys.stdin.buffer.readline()
    # Nothing of the key stays reachable through file descriptors.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        setup = json.loads(line)
        layers = setup.get("layers")
        layers = frozenset(LAYERS if layers is None else [str(x) for x in layers])
        remote = [str(m) for m in setup.get("remote", [])]
        return setup["key"].encode(), [str(n) for n in setup.get("canaries", [])], layers, remote
    except (ValueError, KeyError, TypeError, AttributeError):
        return line.strip(), [], frozenset(LAYERS), []


def _install_remote(here, modules):
    """Out-of-process grading: the candidate's modules are asked of its own
    process on file descriptor 3 (remote.py); none of its code runs here."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_ablate_remote", os.path.join(here, "remote.py"))
    remote = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(remote)
    remote.install(3, modules)


# The runner's defences. ablate always runs with all of them; the grader's
# tests measure what each one catches by turning others off (standard input's
# "layers"): "decide" (each outcome decided by this runner's own `run`, with
# the framework's methods bound to each test), "guard" (no frames or object
# graph for the task's code), "watch" (the framework compared at every test),
# "canaries". Without "decide", tests run through unittest's own
# TestCase.run and their outcomes are read from what the result is told.
LAYERS = ("decide", "guard", "watch", "canaries")


# Attributes of these modules that the task's code has no business replacing.
_NAMED = {
    "os": ["_exit", "write", "kill", "fork", "exit"],
    "sys": ["exit", "excepthook", "displayhook", "addaudithook"],
}


def _snapshotter(named=_NAMED, vars=vars, getattr=getattr, isinstance=isinstance, type=type, id=id,
                 code_kinds=(type(_emitter), classmethod, staticmethod, property)):
    def snapshot(objects):
        """Identity of the watched attributes. For a class: all of them, so an
        added method counts; for a module: all (or the named ones), and an
        attribute added later (a submodule imported) does not count."""
        snap = {}
        for label, obj in objects:
            names = named.get(label)
            items = [(n, getattr(obj, n, None)) for n in names] if names else list(vars(obj).items())
            if label.startswith("class "):
                # A test class's own state (a counter, a patcher started in
                # setUpClass) is the tests' business; its methods are not.
                items = [(k, v) for k, v in items if isinstance(v, code_kinds)]
            is_class = isinstance(obj, type)
            for key, value in items:
                snap[label + "." + key] = (id(value), is_class)
        return snap
    return snapshot


def _changed(before, after, sorted=sorted):
    changed = [k for k in before if before[k][0] != after.get(k, (None,))[0]]
    added = [k for k in after if k not in before and after[k][1]]
    return sorted(changed + added)


def _no_bytecode():
    """From here on, bytecode is read only from a folder that does not exist:
    modules imported later (the task's) are compiled from their source."""
    sys.pycache_prefix = "/ablate-no-pycache-%d/none" % os.getpid()


# --- the task's code may not look into the runner --------------------------

_FRAME_EVENTS = frozenset([
    "sys._getframe", "sys._current_frames", "sys._current_exceptions",
    "gc.get_referrers", "gc.get_referents", "gc.get_objects",
    "sys.settrace", "sys.setprofile",
])
_FRAME_ATTRS = frozenset(["tb_frame", "gi_frame", "cr_frame", "ag_frame"])
# (file name suffix, function name) of standard-library functions that read a
# frame and give none of it back to their caller.
_CONSUMERS = frozenset([
    ("logging/__init__.py", "findCaller"),
    ("collections/__init__.py", "namedtuple"),
    ("enum.py", "_create_"),
    ("typing.py", "_caller"),
    ("traceback.py", "_extract_from_extended_frame_gen"),
    ("traceback.py", "extract_stack"),
    ("traceback.py", "format_stack"),
    ("traceback.py", "print_stack"),
    ("warnings.py", "warn"),
    ("asyncio/coroutines.py", "_format_coroutine"),
])
# Refused to everyone, whatever frame asks: no honest test or solution swaps a
# function's code, looks up the interpreter's own C API through ctypes, or
# makes an object from a raw address. ctypes itself is not loaded (its
# memmove writes any address), nor is the process's memory file opened.
_NEVER = frozenset(["ctypes.cdata", "ctypes.PyObj_FromPtr"])
_NEVER_IMPORTED = frozenset(["ctypes", "_ctypes"])


def _install_guard(workspace, denied, unittest_file):
    """Refuse frame and gc introspection to code in `workspace` outside its
    tests/ (unless a consumer above asked on its behalf); each refusal is
    recorded in `denied`."""
    tests = os.path.join(workspace, "tests") + os.sep
    prefix = workspace.rstrip(os.sep) + os.sep
    inside = [False]
    getframe = sys._getframe
    frame_events = _FRAME_EVENTS
    frame_attrs = _FRAME_ATTRS
    consumers = _CONSUMERS
    basename = os.path.basename
    RuntimeError_ = RuntimeError

    never = _NEVER
    never_imported = _NEVER_IMPORTED
    own = (tests, os.path.dirname(unittest_file) + os.sep, os.path.abspath(__file__))

    def guarded_code(fn):
        """A function of the tests, of unittest or of this runner: its code
        is what decides outcomes, and no honest code replaces it."""
        name = getattr(getattr(fn, "__code__", None), "co_filename", "") or ""
        return name.startswith(own)

    def refuse(what):
        if len(denied) < 20:
            denied.append(what)
        raise RuntimeError_("ablate's grader refuses %s" % what)

    def hook(event, args):
        if inside[0]:
            return
        if event == "object.__setattr__" and args[1] == "__code__" and guarded_code(args[0]):
            refuse("replacing the code of %s" % getattr(args[0], "__qualname__", "a function"))
        if event in never or (event == "ctypes.dlsym" and str(args[1]).lstrip("_").startswith("Py")):
            refuse("%s %s" % (event, args[1] if event == "ctypes.dlsym" else ""))
        if event == "import" and args[0] in never_imported:
            refuse("importing %s (grade the task out of process to use it)" % args[0])
        if event == "open" and isinstance(args[0], str) and args[0].startswith("/proc/") \
                and args[0].rstrip("/").endswith("/mem"):
            refuse("opening %s" % args[0])
        if event not in frame_events and not (event == "object.__getattr__" and args[1] in frame_attrs):
            return
        inside[0] = True
        try:
            f = getframe(1)
            while f is not None:
                code = f.f_code
                name = code.co_filename
                if name.startswith(prefix) and not name.startswith(tests):
                    what = event if event != "object.__getattr__" else args[1]
                    if len(denied) < 20:
                        denied.append("%s from %s:%d" % (what, basename(name), f.f_lineno))
                    raise RuntimeError_("ablate's grader refuses %s to the task's code" % what)
                for suffix, func in consumers:
                    if code.co_name == func and name.endswith(suffix):
                        return
                f = f.f_back
        finally:
            inside[0] = False

    sys.addaudithook(hook)


# --- canaries ---------------------------------------------------------------

def _canary_recipes():
    """Assertion style -> a test body that must fail under an honest framework."""
    import warnings

    def ctx_raises(self, v):
        with self.assertRaises(ValueError):
            pass

    def call_raises(self, v):
        self.assertRaises(ValueError, int, str(v))

    def ctx_raises_regex(self, v):
        with self.assertRaisesRegex(ValueError, "^never-%d$" % v):
            raise ValueError("canary %d" % v)

    def ctx_warns(self, v):
        with self.assertWarns(UserWarning):
            pass

    def ctx_warns_regex(self, v):
        with self.assertWarnsRegex(UserWarning, "^never$"):
            warnings.warn("canary %d" % v, UserWarning)

    def ctx_logs(self, v):
        with self.assertLogs("ablate.canary.%d" % v, level="INFO"):
            pass

    def subtest(self, v):
        with self.subTest(case=v):
            self.assertEqual(v, v + 1)

    def plain_assert(self, v):
        assert v == v + 1, "canary"

    def fail(self, v):
        self.fail("canary %d" % v)

    def raise_failure(self, v):
        raise self.failureException("canary %d" % v)

    r = {
        "assertEqual": lambda s, v: s.assertEqual(v, v + 1),
        "assertNotEqual": lambda s, v: s.assertNotEqual(v, v),
        "assertTrue": lambda s, v: s.assertTrue(v - v),
        "assertFalse": lambda s, v: s.assertFalse(v + 1),
        "assertIs": lambda s, v: s.assertIs([v], [v]),
        "assertIsNot": lambda s, v: s.assertIsNot(s, s),
        "assertIsNone": lambda s, v: s.assertIsNone(v),
        "assertIsNotNone": lambda s, v: s.assertIsNotNone(None),
        "assertIn": lambda s, v: s.assertIn(v, [v + 1]),
        "assertNotIn": lambda s, v: s.assertNotIn(v, [v]),
        "assertIsInstance": lambda s, v: s.assertIsInstance(v, str),
        "assertNotIsInstance": lambda s, v: s.assertNotIsInstance(v, int),
        "assertAlmostEqual": lambda s, v: s.assertAlmostEqual(v + 0.5, v + 1.5),
        "assertNotAlmostEqual": lambda s, v: s.assertNotAlmostEqual(v + 0.5, v + 0.5),
        "assertGreater": lambda s, v: s.assertGreater(v, v + 1),
        "assertGreaterEqual": lambda s, v: s.assertGreaterEqual(v, v + 1),
        "assertLess": lambda s, v: s.assertLess(v + 1, v),
        "assertLessEqual": lambda s, v: s.assertLessEqual(v + 1, v),
        "assertRegex": lambda s, v: s.assertRegex("a%d" % v, "^b"),
        "assertNotRegex": lambda s, v: s.assertNotRegex("a%d" % v, "^a"),
        "assertCountEqual": lambda s, v: s.assertCountEqual([v, v], [v]),
        "assertListEqual": lambda s, v: s.assertListEqual([v], [v + 1]),
        "assertTupleEqual": lambda s, v: s.assertTupleEqual((v,), (v + 1,)),
        "assertSetEqual": lambda s, v: s.assertSetEqual({v}, {v + 1}),
        "assertDictEqual": lambda s, v: s.assertDictEqual({"k": v}, {"k": v + 1}),
        "assertSequenceEqual": lambda s, v: s.assertSequenceEqual([v], [v + 1]),
        "assertMultiLineEqual": lambda s, v: s.assertMultiLineEqual("a\n%d" % v, "b\n%d" % v),
        "assertRaises": ctx_raises,
        "assertRaises()": call_raises,
        "assertRaisesRegex": ctx_raises_regex,
        "assertWarns": ctx_warns,
        "assertWarnsRegex": ctx_warns_regex,
        "assertLogs": ctx_logs,
        "subTest": subtest,
        "assert": plain_assert,
        "fail": fail,
        "failureException": raise_failure,
    }
    # Deprecated spellings, where this Python still has them.
    import unittest
    args = {
        "assertEqual": lambda v: (v, v + 1), "assertNotEqual": lambda v: (v, v), "assertTrue": lambda v: (v - v,),
        "assertFalse": lambda v: (v + 1,), "assertAlmostEqual": lambda v: (v + 0.5, v + 1.5),
        "assertNotAlmostEqual": lambda v: (v + 0.5, v + 0.5), "assertRegex": lambda v: ("a", "^b"),
        "assertNotRegex": lambda v: ("a", "^a"),
    }
    aliases = {
        "assertEquals": "assertEqual", "failUnlessEqual": "assertEqual", "assertNotEquals": "assertNotEqual",
        "failIfEqual": "assertNotEqual", "assert_": "assertTrue", "failUnless": "assertTrue", "failIf": "assertFalse",
        "assertAlmostEquals": "assertAlmostEqual", "failUnlessAlmostEqual": "assertAlmostEqual",
        "assertNotAlmostEquals": "assertNotAlmostEqual", "failIfAlmostEqual": "assertNotAlmostEqual",
        "assertRegexpMatches": "assertRegex", "assertNotRegexpMatches": "assertNotRegex",
    }
    for old, new in aliases.items():
        if hasattr(unittest.TestCase, old):
            r[old] = (lambda name, make: lambda s, v: getattr(s, name)(*make(v)))(old, args[new])
    return r


# Styles every grading run has, whatever the tests use.
_BASE_STYLES = ["assertEqual", "assertTrue", "assertRaises", "subTest", "assert", "fail"]
# At most this many canaries a run (groups beyond the first and last get fewer styles).
_CANARY_CAP = 400


def _styles_used(workspace, recipes):
    """The assertion styles the task's tests are written in."""
    import re
    found = set(_BASE_STYLES)
    word = re.compile(r"\.(assert[A-Za-z_]*|fail[A-Za-z]*|subTest|failureException)\b")
    bare = re.compile(r"^\s*assert\b", re.M)
    call_raises = re.compile(r"\.assertRaises\s*\(\s*[\w.]+\s*,")
    for root, dirs, files in os.walk(os.path.join(workspace, "tests")):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            try:
                with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                    text = f.read(1 << 20)
            except OSError:
                continue
            found.update(m.group(1) for m in word.finditer(text))
            if call_raises.search(text):
                found.add("assertRaises()")
            if bare.search(text):
                found.add("assert")
    return sorted(s for s in found if s in recipes)


def run_unittest(emit, args, canary_names, workspace, denied, layers=frozenset(LAYERS)):
    import random
    import re
    import types
    import unittest
    import unittest.case
    import unittest.loader
    import unittest.main
    import unittest.result
    import unittest.runner
    import unittest.suite
    import unittest.util
    import argparse, difflib, fnmatch, importlib, importlib.machinery, importlib.util, inspect  # noqa: F401,E401
    import io, linecache, logging, pprint, signal, time, traceback, tokenize, warnings  # noqa: F401,E401
    import collections, contextlib, functools  # noqa: F401,E401
    # Imported lazily by the framework (gettext's locale, argparse's shutil): loaded here, they
    # come from the interpreter's bytecode rather than its source on every check.
    import locale, shutil  # noqa: F401,E401

    # Everything the outcome depends on, captured before any task code runs.
    TestCase = unittest.TestCase
    SkipTest = unittest.SkipTest
    SubTest = unittest.case._SubTest
    ChainMap = unittest.case._OrderedChainMap
    sentinel = unittest.case._subtest_msg_sentinel
    ErrorHolder = unittest.suite._ErrorHolder
    strclass = unittest.util.strclass
    MethodType = types.MethodType
    issubclass_, isinstance_, getattr_, id_, type_, str_, len_ = issubclass, isinstance, getattr, id, type, str, len
    BaseException_, KeyboardInterrupt_ = BaseException, KeyboardInterrupt
    re_compile = re.compile
    original = {n: v for n, v in vars(TestCase).items()
                if callable(v) and (n.startswith(("assert", "fail", "_formatMessage", "_getAssertEqualityFunc",
                                                  "_baseAssertEqual", "_truncateMessage", "skipTest", "addCleanup",
                                                  "enterContext", "_callCleanup"))
                                   or n in ("failureException",))}

    recipes = _canary_recipes()
    styles = _styles_used(workspace, recipes)
    rng = random.Random(int.from_bytes(os.urandom(16), "big"))
    canary_set = frozenset(canary_names)
    truth = {}          # test id -> outcome, decided by `run` below
    canary_truth = {}
    info = {}           # id(instance) -> (test id, is canary, method, skip reason, expecting failure, failure class)
    snapshot = _snapshotter()
    tests_dir = os.path.join(workspace, "tests") + os.sep
    workspace_prefix = workspace.rstrip(os.sep) + os.sep

    def candidate_class(cls):
        """A class defined in the workspace outside tests/ (the task's code)."""
        mod = sys.modules.get(cls.__module__)
        f = getattr_(mod, "__file__", None) or ""
        return f.startswith(workspace_prefix) and not f.startswith(tests_dir)

    def overrider(cls, name):
        """The class whose `name` an instance of `cls` would use, ignoring
        classes the task's code defined."""
        for c in cls.__mro__:
            if c is TestCase:
                return TestCase
            if name in vars(c) and not candidate_class(c):
                return c
        return TestCase

    class Stop(BaseException_):
        """Ends a test after an expected failure in a subtest."""

    class Outcome(object):
        __slots__ = ("result", "success", "failed", "skipped", "expected", "expecting", "result_supports_subtests")

    def describe(et, ev, tb):
        return (et, ev, tb)

    def part(test, oc, fexc, call, *a):
        """One part of a test (setUp, the method, tearDown, a cleanup):
        what it raised goes into `oc`, and to the printing result."""
        try:
            call(*a)
        except Stop:
            pass
        except SkipTest as e:
            oc.success = False
            oc.skipped = str_(e)
        except BaseException_ as e:
            exc = describe(type_(e), e, e.__traceback__)
            if oc.expecting:
                oc.expected = exc
            else:
                oc.success = False
                kind = "failed" if isinstance_(e, fexc) else "error"
                if oc.failed != "error":
                    oc.failed = kind
                if not info[id_(test)][1]:
                    (oc.result.addFailure if kind == "failed" else oc.result.addError)(test, exc)

    class Sub(object):
        """subTest: a failure marks the test failed and the block ends."""
        __slots__ = ("test", "msg", "params", "parent", "sub")

        def __init__(self, test, msg, params):
            self.test, self.msg, self.params = test, msg, params

        def __enter__(self):
            test = self.test
            self.parent = test._subtest
            pm = ChainMap(self.params) if self.parent is None else self.parent.params.new_child(self.params)
            self.sub = SubTest(test, self.msg, pm)
            test._subtest = self.sub
            return None

        def __exit__(self, et, ev, tb):
            test = self.test
            test._subtest = self.parent
            oc = test._outcome
            entry = info.get(id_(test))
            canary = entry[1] if entry else False
            if not isinstance_(oc, Outcome):
                return False
            if et is None:
                if not canary:
                    oc.result.addSubTest(test, self.sub, None)
                return False
            if issubclass_(et, SkipTest):
                # Unittest counts a test whose subtests skip as a success; here
                # the test is skipped: it did not verify what it was written to.
                if oc.skipped is None:
                    oc.skipped = str_(ev)
                if not canary:
                    oc.result.addSkip(self.sub, str_(ev))
                return True
            if oc.expecting:
                oc.expected = (et, ev, tb)
                raise Stop()
            fexc = entry[5] if entry else AssertionError
            oc.success = False
            kind = "failed" if issubclass_(et, fexc) else "error"
            if oc.failed != "error":
                oc.failed = kind
            if not canary:
                oc.result.addSubTest(test, self.sub, (et, ev, tb))
            return True

    def sub_test(self, msg=sentinel, **params):
        return Sub(self, msg, params)

    class Raises(object):
        """assertRaises / assertRaisesRegex, as unittest has them."""
        __slots__ = ("test", "expected", "regex", "msg", "obj_name", "exception")

        def __init__(self, test, expected, regex):
            self.test, self.expected = test, expected
            self.regex = re_compile(regex) if regex is not None else None
            self.msg, self.obj_name, self.exception = None, None, None

        def __enter__(self):
            return self

        def fail(self, standard):
            entry = info.get(id_(self.test))
            fexc = entry[5] if entry else AssertionError
            raise fexc(original["_formatMessage"](self.test, self.msg, standard))

        def __exit__(self, et, ev, tb):
            if et is None:
                name = getattr_(self.expected, "__name__", None) or str_(self.expected)
                self.fail("%s not raised by %s" % (name, self.obj_name) if self.obj_name else "%s not raised" % name)
            if not issubclass_(et, self.expected):
                return False
            self.exception = ev.with_traceback(None)
            if self.regex is not None and not self.regex.search(str_(ev)):
                self.fail('"%s" does not match "%s"' % (self.regex.pattern, str_(ev)))
            return True

    def handle_raises(ctx, name, args, kwargs):
        exp = ctx.expected
        ok = (isinstance_(exp, type_) and issubclass_(exp, BaseException_)) or (
            isinstance_(exp, tuple) and len_(exp) > 0
            and all(isinstance_(e, type_) and issubclass_(e, BaseException_) for e in exp))
        if not ok:
            raise TypeError("%s() arg 1 must be an exception type or tuple of exception types" % name)
        if not args:
            ctx.msg = kwargs.pop("msg", None)
            if kwargs:
                raise TypeError("%r is an invalid keyword argument for this function" % (next(iter(kwargs)),))
            return ctx
        call, *rest = args
        ctx.obj_name = getattr_(call, "__name__", None) or str_(call)
        with ctx:
            call(*rest, **kwargs)
        return None

    def assert_raises(self, expected, *args, **kwargs):
        return handle_raises(Raises(self, expected, None), "assertRaises", args, kwargs)

    def assert_raises_regex(self, expected, regex, *args, **kwargs):
        return handle_raises(Raises(self, expected, regex), "assertRaisesRegex", args, kwargs)

    def do_cleanups(self):
        oc = self._outcome
        entry = info.get(id_(self))
        fexc = entry[5] if entry else AssertionError
        while self._cleanups:
            function, a, kw = self._cleanups.pop()
            if isinstance_(oc, Outcome):
                part(self, oc, fexc, lambda: function(*a, **kw))
            else:
                function(*a, **kw)
        return True

    def run(self, result=None):
        """TestCase.run, deciding the outcome here."""
        tid, canary, method, skip, expecting, fexc = info[id_(self)]
        if not canary:
            check_tamper()
            result.startTest(self)
        oc = Outcome()
        oc.result, oc.success, oc.failed, oc.skipped, oc.expected, oc.expecting = result, True, None, None, None, False
        oc.result_supports_subtests = True
        try:
            if skip is not None:
                outcome = "skipped"
                if not canary:
                    result.addSkip(self, skip)
            else:
                self._outcome = oc
                part(self, oc, fexc, self.setUp)
                if oc.success:
                    oc.expecting = expecting
                    part(self, oc, fexc, method)
                    oc.expecting = False
                    part(self, oc, fexc, self.tearDown)
                do_cleanups(self)
                if oc.skipped is not None and oc.failed is None:
                    outcome = "skipped"
                    if not canary:
                        result.addSkip(self, oc.skipped)
                elif oc.failed is not None:
                    outcome = oc.failed
                elif expecting:
                    if oc.expected is not None:
                        outcome = "expected_failure"
                        if not canary:
                            result.addExpectedFailure(self, oc.expected)
                    else:
                        outcome = "unexpected_success"
                        if not canary:
                            result.addUnexpectedSuccess(self)
                else:
                    outcome = "passed"
                    if not canary:
                        result.addSuccess(self)
        finally:
            self._outcome = None
            oc.expected = None
        pin_name, pinned = pins.get(id_(self), ("", ()))
        if not canary and "watch" in layers and pinned_now(self, pin_name) != pinned:
            tampered.add("the outcome-deciding methods of %s's instance" % tid)
        if canary:
            canary_truth[tid] = outcome
        else:
            truth.setdefault(tid, outcome)
            result.stopTest(self)
        emit({"event": "test", "id": tid, "outcome": outcome})
        if not canary:
            check_tamper()
        return result

    class Recorder(unittest.TestResult):
        """What unittest's own TestCase.run tells a result, noted (the worst
        outcome wins) and passed on to the printing result (measurement only)."""

        def __init__(self, real, canary):
            unittest.TestResult.__init__(self)
            self.real, self.canary, self.outcome = real, canary, None

        def note(self, outcome):
            rank = ["passed", "expected_failure", "skipped", "unexpected_success", "failed", "error"]
            if self.outcome is None or rank.index(outcome) > rank.index(self.outcome):
                self.outcome = outcome

        def forward(self, name, *a):
            if not self.canary:
                getattr_(self.real, name)(*a)

        def startTest(self, t):
            self.forward("startTest", t)

        def stopTest(self, t):
            self.forward("stopTest", t)

        def addSuccess(self, t):
            self.note("passed")
            self.forward("addSuccess", t)

        def addFailure(self, t, err):
            self.note("failed")
            self.forward("addFailure", t, err)

        def addError(self, t, err):
            self.note("error")
            self.forward("addError", t, err)

        def addSkip(self, t, why):
            self.note("skipped")
            self.forward("addSkip", t, why)

        def addExpectedFailure(self, t, err):
            self.note("expected_failure")
            self.forward("addExpectedFailure", t, err)

        def addUnexpectedSuccess(self, t):
            self.note("unexpected_success")
            self.forward("addUnexpectedSuccess", t)

        def addSubTest(self, t, sub, err):
            if err is not None:
                self.note("failed" if issubclass_(err[0], t.failureException) else "error")
            self.forward("addSubTest", t, sub, err)

    def run_plain(self, result=None):
        """unittest's own TestCase.run, its outcome read from what it tells the result."""
        tid, canary = info[id_(self)][0], info[id_(self)][1]
        if not canary:
            check_tamper()
        rec = Recorder(result, canary)
        type_(self).run(self, rec)
        outcome = rec.outcome or "error"
        if canary:
            canary_truth[tid] = outcome
        else:
            truth.setdefault(tid, outcome)
        emit({"event": "test", "id": tid, "outcome": outcome})
        if not canary:
            check_tamper()
        return result

    pins = {}           # id(instance) -> (test method name, identities of what `pin` bound on it)
    fixed_pins = tuple(original) + ("subTest", "assertRaises", "failUnlessRaises", "assertRaisesRegex",
                                    "assertRaisesRegexp", "doCleanups", "run")

    def pinned_now(test, name):
        d = test.__dict__
        return tuple(id_(d.get(k)) for k in fixed_pins + (name,))

    def pin(test, canary):
        """Bind the outcome-deciding methods to the instance, as they were
        before any task code ran, and read its method and marks once."""
        cls = type_(test)
        d = test.__dict__
        if "decide" not in layers:
            d["run"] = MethodType(run_plain, test)
            tid = "%s.%s" % (strclass(cls), test._testMethodName)
            info[id_(test)] = (tid, canary, None, None, False, AssertionError)
            return tid
        for name, fn in original.items():
            if overrider(cls, name) is TestCase:
                d[name] = fn if name == "failureException" else MethodType(fn, test)
        for name, fn in (("subTest", sub_test), ("assertRaises", assert_raises), ("failUnlessRaises", assert_raises),
                         ("assertRaisesRegex", assert_raises_regex), ("doCleanups", do_cleanups), ("run", run)):
            if name == "run" or overrider(cls, name) is TestCase:
                d[name] = MethodType(fn, test)
        if "assertRaisesRegexp" in original and overrider(cls, "assertRaisesRegexp") is TestCase:
            d["assertRaisesRegexp"] = MethodType(assert_raises_regex, test)
        fexc = d.get("failureException") or getattr_(cls, "failureException", AssertionError)
        name = test._testMethodName
        try:
            method = getattr_(cls, name)
        except AttributeError:
            method = None
        bound = MethodType(method, test) if isinstance_(method, types.FunctionType) else getattr_(test, name)
        d[name] = bound
        skip = None
        if getattr_(cls, "__unittest_skip__", False) or getattr_(method, "__unittest_skip__", False):
            skip = getattr_(cls, "__unittest_skip_why__", "") or getattr_(method, "__unittest_skip_why__", "")
        expecting = bool(getattr_(test, "__unittest_expecting_failure__", False)
                         or getattr_(method, "__unittest_expecting_failure__", False))
        tid = "%s.%s" % (strclass(cls), name)
        info[id_(test)] = (tid, canary, bound, skip, expecting, fexc)
        pins[id_(test)] = (name, pinned_now(test, name))
        code = getattr_(method, "__code__", None)
        where = getattr_(code, "co_filename", "") or ""
        if "watch" in layers and not canary and where.startswith(workspace_prefix) and not where.startswith(tests_dir):
            tampered.add("test method %s runs code from %s" % (tid, os.path.basename(where)))
        return tid

    class AblateResult(unittest.TextTestResult):
        """Prints as unittest does; reports class and module fixtures."""
        def addError(self, test, err):
            if isinstance_(test, ErrorHolder):
                fixtures.append(test.id())
                emit({"event": "fixture", "id": test.id(), "outcome": "error"})
            super().addError(test, err)

        def addSkip(self, test, reason):
            if isinstance_(test, ErrorHolder):
                emit({"event": "fixture", "id": test.id(), "outcome": "skipped"})
            super().addSkip(test, reason)

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
        ("unittest.case._AssertRaisesContext", unittest.case._AssertRaisesContext),
        ("unittest.case._AssertWarnsContext", unittest.case._AssertWarnsContext),
        ("unittest.case._SubTest", unittest.case._SubTest),
        ("unittest.suite", unittest.suite),
        ("unittest.suite._ErrorHolder", unittest.suite._ErrorHolder),
        ("unittest.result", unittest.result),
        ("contextlib._GeneratorContextManager", contextlib._GeneratorContextManager),
        ("AblateResult", AblateResult),
        ("AblateRunner", AblateRunner),
        ("builtins", builtins),
        ("os", os),
        ("sys", sys),
    ]
    volatile = {"builtins._"}
    # What unittest's suite itself sets on a test class while it runs.
    class_volatile = {"_classSetupFailed", "tearDown_exceptions"}
    before = {label: snapshot([(label, obj)]) for label, obj in watched}
    tampered = set()
    fixtures = []
    classes = []

    seen_prints = {}

    def fingerprint(label, obj, named=_NAMED, tuple=tuple, map=map):
        names = named.get(label)
        if names:
            return tuple(id_(getattr_(obj, n, None)) for n in names)
        d = vars(obj)
        return (tuple(d), tuple(map(id_, d.values())))

    def check_tamper(changed=_changed):
        """Compare every watched object with its state after loading; only
        an object whose attributes moved is compared key by key."""
        if "watch" not in layers:
            return
        for label, obj in watched + classes:
            fp = fingerprint(label, obj)
            if seen_prints.get(label) == fp:
                continue
            seen_prints[label] = fp
            now = snapshot([(label, obj)])
            for k in changed(before[label], now):
                if k not in volatile and k.rsplit(".", 1)[-1] not in class_volatile:
                    tampered.add(k)

    def flatten(suite, out):
        for t in suite:
            if isinstance_(t, unittest.TestSuite):
                flatten(t, out)
            else:
                out.append(t)
        return out

    def with_canaries(tests):
        """Every real test preceded by a group of canaries of its own class,
        and a group after each class's last test."""
        if "canaries" not in layers:
            return tests, []
        pool = list(canary_names)
        rng.shuffle(pool)
        plan, groups = [], []
        for i, t in enumerate(tests):
            cls = type_(t)
            target = isinstance_(t, TestCase) and not cls.__module__.startswith("unittest")
            if target:
                groups.append((cls, len_(plan)))
                plan.append(None)
            plan.append(t)
            nxt = tests[i + 1] if i + 1 < len_(tests) else None
            if target and (nxt is None or type_(nxt) is not cls):
                groups.append((cls, len_(plan)))
                plan.append(None)
        per = max(1, min(len_(styles), _CANARY_CAP // max(1, len_(groups))))
        taken_by = {}
        made_all = []
        for gi, (cls, pos) in enumerate(groups):
            full = per >= len_(styles) or gi in (0, len_(groups) - 1)
            chosen = list(styles) if full else rng.sample(styles, per)
            rng.shuffle(chosen)
            made = []
            taken = taken_by.setdefault(cls, set(dir(cls)))
            for style in chosen:
                while pool and pool[-1] in taken:
                    pool.pop()
                if not pool:
                    break
                name = pool.pop()
                taken.add(name)
                value = rng.randrange(1, 1 << 30)

                def canary(self, _body=recipes[style], _v=value):
                    _body(self, _v)
                canary.__name__ = name
                canary.__qualname__ = cls.__qualname__ + "." + name
                setattr(cls, name, canary)
                made.append(cls(name))
            plan[pos] = made
            made_all.extend(made)
        flat = []
        for item in plan:
            if isinstance_(item, list):
                flat.extend(item)
            elif item is not None:
                flat.append(item)
        return flat, made_all

    class AblateProgram(unittest.TestProgram):
        def runTests(self):
            tests = flatten(self.test, [])
            planned, made = with_canaries(tests)
            made_ids = set(id_(c) for c in made)
            real = []
            for t in planned:
                if isinstance_(t, TestCase):
                    tid = pin(t, id_(t) in made_ids)
                    if id_(t) not in made_ids:
                        real.append(tid)
                else:
                    real.append(t.id())
            seen = set()
            for c in (type_(t) for t in planned if isinstance_(t, TestCase)):
                if c not in seen and not c.__module__.startswith("unittest"):
                    seen.add(c)
                    classes.append(("class " + strclass(c), c))
            before.update({label: snapshot([(label, c)]) for label, c in classes})
            emit({"event": "start", "loaded": len_(tests), "canaries": len_(made)})
            self.test = unittest.TestSuite(planned)
            runner = AblateRunner(verbosity=self.verbosity, failfast=False, buffer=self.buffer,
                                  warnings=self.warnings, tb_locals=self.tb_locals)
            self.result = runner.run(self.test)
            state["ran"] = self.result.testsRun
            # Tests that never ran: a class or module fixture failed.
            for tid in real:
                if tid not in truth:
                    truth[tid] = "not_run"
                    emit({"event": "test", "id": tid, "outcome": "not_run"})
            for c in made:
                tid = info[id_(c)][0]
                if tid not in canary_truth:
                    canary_truth[tid] = "not_run"
                    emit({"event": "test", "id": tid, "outcome": "not_run"})

    state = {"ran": None}
    emit({"event": "ready", "modules": sorted({m.split(".")[0] for m in sys.modules})})
    _no_bytecode()
    # As `python3 -m unittest` has it: the working folder first on sys.path.
    sys.path.insert(0, workspace)
    if "guard" in layers:
        _install_guard(workspace, denied, unittest.__file__)
    program = AblateProgram(module=None, argv=["python3 -m unittest"] + args, testRunner=AblateRunner, exit=False)
    check_tamper()
    emit({"event": "end", "ran": state["ran"], "tampered": sorted(tampered), "denied": list(denied)})
    ok = (state["ran"] is not None and not tampered and not fixtures
          and all(o in ("passed", "expected_failure") for o in truth.values()))
    return 0 if ok else 1


def run_pytest(emit, args, canary_names, workspace, denied):
    import pytest

    seen = set()

    class AblatePlugin:
        def pytest_collection_finish(self, session):
            emit({"event": "start", "loaded": len(session.items), "canaries": 0})

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
    snapshot = _snapshotter()
    watched = [("pytest", pytest), ("AblatePlugin", AblatePlugin), ("builtins", builtins)]
    before = snapshot(watched)
    emit({"event": "ready", "modules": sorted({m.split(".")[0] for m in sys.modules})})
    _no_bytecode()
    sys.path.insert(0, workspace)
    import unittest
    _install_guard(workspace, denied, unittest.__file__)
    code = pytest.main(args, plugins=[plugin])
    tampered = [k for k in _changed(before, snapshot(watched)) if k != "builtins._"]
    emit({"event": "end", "ran": len(seen), "tampered": tampered, "denied": list(denied)})
    return int(code) if not tampered else 1


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in ("unittest", "pytest"):
        sys.stderr.write(__doc__)
        return 2
    out, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    workspace = os.getcwd()
    # Nothing of the runner's folder or the working folder on sys.path yet.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) not in (here, workspace)]
    key, canary_names, layers, remote = _read_setup()
    if remote:
        _install_remote(here, remote)
    emit = _emitter(_open_channel(out), key)
    denied = []
    if mode == "unittest":
        return run_unittest(emit, args, canary_names, workspace, denied, layers)
    return run_pytest(emit, args, canary_names, workspace, denied)


if __name__ == "__main__":
    sys.exit(main())
