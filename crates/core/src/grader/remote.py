"""ablate's out-of-process grading: the candidate's modules run in a process
of their own (`serve`), the tests in another (the runner, after `install`),
and only plain data crosses between them, on file descriptor 3.

Usage (the candidate's side): python3 -I -B remote.py serve MODULE...
The tests' side imports this file and calls `install(3, [MODULE, ...])`
before any test module is imported: each MODULE becomes, in the tests'
process, a module whose attributes are asked of the candidate's process.

Frames: a 4-byte big-endian length, then UTF-8 JSON. A request is
{"seq": N, "op": "get" | "call" | "names", "module": M, "name": X,
 "args": [...], "kwargs": [...]}; its answer is {"seq": N, "value": V},
{"seq": N, "function": true} (a callable attribute) or
{"seq": N, "raise": [TYPE NAME, ARGS or null, MESSAGE]}.

Values are encoded by their exact type, and only these types cross: None,
bool, int, float, str, bytes, complex, list, tuple, dict, set, frozenset.
A subclass of any of them (an object whose __eq__ always answers True), a
class, a generator or anything else does not: in the tests' process it is
the candidate's failure (`CandidateError`), never a value. Decoding builds
only those types: nothing the candidate sends is executed or looked up.
"""
import builtins
import json
import os
import struct
import sys

MAX_FRAME = 16 << 20
MAX_DEPTH = 200


class NotPlainData(TypeError):
    pass


def encode(x, depth=0):
    if depth > MAX_DEPTH:
        raise NotPlainData("nested deeper than %d" % MAX_DEPTH)
    t = type(x)
    if x is None or t is bool or t is str:
        return x
    if t is int:
        return ["i", hex(x)]
    if t is float:
        return ["f", x.hex()]
    if t is bytes:
        return ["b", x.hex()]
    if t is complex:
        return ["c", x.real.hex(), x.imag.hex()]
    if t is list or t is tuple or t is set or t is frozenset:
        tag = {list: "l", tuple: "t", set: "s", frozenset: "z"}[t]
        return [tag, [encode(v, depth + 1) for v in x]]
    if t is dict:
        return ["d", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in x.items()]]
    raise NotPlainData("%s is not plain data" % t.__name__)


_SEQUENCES = {"l": list, "t": tuple, "s": set, "z": frozenset}


def decode(v, depth=0):
    if depth > MAX_DEPTH:
        raise NotPlainData("nested deeper than %d" % MAX_DEPTH)
    t = type(v)
    if v is None or t is bool or t is str:
        return v
    if t is not list or not v or type(v[0]) is not str:
        raise NotPlainData("not an encoded value")
    tag = v[0]
    if len(v) == 2 and tag == "i" and type(v[1]) is str:
        return int(v[1], 16)
    if len(v) == 2 and tag == "f" and type(v[1]) is str:
        return float.fromhex(v[1])
    if len(v) == 2 and tag == "b" and type(v[1]) is str:
        return bytes.fromhex(v[1])
    if len(v) == 3 and tag == "c" and type(v[1]) is str and type(v[2]) is str:
        return complex(float.fromhex(v[1]), float.fromhex(v[2]))
    if len(v) == 2 and tag in _SEQUENCES and type(v[1]) is list:
        return _SEQUENCES[tag](decode(x, depth + 1) for x in v[1])
    if len(v) == 2 and tag == "d" and type(v[1]) is list:
        out = {}
        for pair in v[1]:
            if type(pair) is not list or len(pair) != 2:
                raise NotPlainData("not an encoded dict item")
            out[decode(pair[0], depth + 1)] = decode(pair[1], depth + 1)
        return out
    raise NotPlainData("not an encoded value")


def read_frame(fd):
    head = _read_exactly(fd, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    if n > MAX_FRAME:
        raise NotPlainData("a frame of %d bytes, over %d" % (n, MAX_FRAME))
    body = _read_exactly(fd, n)
    if body is None:
        raise EOFError("the frame ends early")
    return body


def _read_exactly(fd, n):
    chunks, got = [], 0
    while got < n:
        b = os.read(fd, min(n - got, 1 << 20))
        if not b:
            if got == 0:
                return None
            raise EOFError("the frame ends early")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def write_frame(fd, payload):
    data = struct.pack(">I", len(payload)) + payload
    while data:
        n = os.write(fd, data)
        data = data[n:]


# --- the candidate's side ------------------------------------------------------

def _describe(e):
    try:
        args = encode(e.args)
    except Exception:
        args = None
    try:
        message = str(e)
    except Exception:
        message = ""
    return [type(e).__name__, args, message]


def _public_names(mod):
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n in vars(mod) if not n.startswith("_")]
    out = []
    for n in names:
        if type(n) is not str:
            continue
        v = getattr(mod, n, None)
        if callable(v) and not isinstance(v, type) and type(v).__name__ in ("function", "builtin_function_or_method"):
            out.append(n)
            continue
        try:
            encode(v)
            out.append(n)
        except NotPlainData:
            pass
    return out


def _answer(msg, modules):
    import importlib
    op, name = msg.get("op"), msg.get("name")
    module = msg.get("module")
    if module not in modules:
        raise ImportError("%r is not the candidate's module" % (module,))
    mod = importlib.import_module(module)
    if op == "names":
        return {"value": encode(_public_names(mod))}
    value = getattr(mod, name)
    if op == "get":
        return {"function": True} if callable(value) else {"value": encode(value)}
    if op == "call":
        args, kwargs = decode(msg.get("args")), decode(msg.get("kwargs"))
        return {"value": encode(value(*args, **kwargs))}
    raise ValueError("unknown request %r" % (op,))


def serve(fd, modules):
    sys.path.insert(0, os.getcwd())
    while True:
        frame = read_frame(fd)
        if frame is None:
            return 0
        msg = json.loads(frame)
        try:
            reply = _answer(msg, modules)
        except BaseException as e:  # the candidate's own exceptions, SystemExit included
            reply = {"raise": _describe(e)}
        reply["seq"] = msg.get("seq")
        write_frame(fd, json.dumps(reply).encode())


# --- the tests' side -----------------------------------------------------------

class CandidateError(Exception):
    """What the candidate's process raised that is not a builtin exception, or
    an answer that is not plain data, or the process gone."""


class _Channel(object):
    def __init__(self, fd):
        import threading
        self.fd, self.seq, self.lock, self.broken = fd, 0, threading.Lock(), None

    def ask(self, request):
        with self.lock:
            if self.broken:
                raise CandidateError(self.broken)
            self.seq += 1
            request["seq"] = self.seq
            try:
                write_frame(self.fd, json.dumps(request).encode())
                frame = read_frame(self.fd)
                if frame is None:
                    raise EOFError("the candidate's process ended")
                reply = json.loads(frame)
                if type(reply) is not dict or reply.get("seq") != self.seq:
                    raise NotPlainData("an answer out of order")
            except (OSError, EOFError, ValueError, RecursionError, NotPlainData) as e:
                self.broken = "the channel to the candidate's process failed: %s" % (e,)
                raise CandidateError(self.broken)
        return reply

    def result(self, request):
        reply = self.ask(request)
        if "raise" in reply:
            raise _rebuilt(reply["raise"])
        if reply.get("function") is True:
            return _FUNCTION
        try:
            return decode(reply.get("value"))
        except (NotPlainData, RecursionError, ValueError, TypeError, OverflowError) as e:
            raise CandidateError("the candidate's answer is not plain data: %s" % (e,))


_FUNCTION = object()


def _rebuilt(described):
    """The candidate's exception, as a builtin exception of the same name
    where there is one, else a CandidateError naming it."""
    try:
        name, args, message = described
        name, message = str(name), str(message)
    except (TypeError, ValueError):
        return CandidateError("an exception that cannot be read")
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == "builtins":
        try:
            decoded = decode(args) if args is not None else (message,)
            return cls(*decoded) if type(decoded) is tuple else cls(message)
        except Exception:
            return cls(message)
    return CandidateError("%s: %s" % (name, message))


def install(fd, modules):
    import types
    channel = _Channel(fd)

    class RemoteFunction(object):
        __slots__ = ("_module", "__name__", "__qualname__")

        def __init__(self, module, name):
            self._module, self.__name__, self.__qualname__ = module, name, name

        def __call__(self, *args, **kwargs):
            try:
                request = {"op": "call", "module": self._module, "name": self.__name__,
                           "args": encode(args), "kwargs": encode(kwargs)}
            except NotPlainData as e:
                raise TypeError("out-of-process grading passes only plain data to the candidate: %s" % (e,))
            return channel.result(request)

        def __repr__(self):
            return "<the candidate's %s.%s>" % (self._module, self.__name__)

    class RemoteModule(types.ModuleType):
        def __getattr__(self, name):
            mod = self.__name__
            if name == "__all__":
                return channel.result({"op": "names", "module": mod})
            if name.startswith("__"):
                raise AttributeError(name)
            value = channel.result({"op": "get", "module": mod, "name": name})
            if value is _FUNCTION:
                value = RemoteFunction(mod, name)
                object.__setattr__(self, name, value)
            return value

    for m in modules:
        sys.modules[m] = RemoteModule(m)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "serve":
        sys.stderr.write(__doc__)
        sys.exit(2)
    sys.exit(serve(3, frozenset(sys.argv[2:])))
