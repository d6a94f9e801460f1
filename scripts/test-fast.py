#!/usr/bin/env python3
"""make test-fast: build the test binaries cargo selects from ARGS (once, as `cargo test` would),
then run them JOBS at a time (default 3, which measured faster than 2 on two cores), the slowest
of the last run first (their times are kept in cargo's output folder, test-fast-times.json),
each one's output printed whole when it ends and a line for each. The integration binary
(tests/integration/) is run one module at a time, each module in a process of its own as when
each file was a binary. Exits 1 when any fails. Test filters follow `--`, as with cargo test.
    scripts/test-fast.py [CARGO TEST ARGS] [-- TEST ARGS]"""
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

# The test binary whose modules run as processes of their own.
SPLIT_BY_MODULE = "integration"


def binaries(cargo_args):
    """(executable, package folder, name) of every test binary cargo builds for `cargo_args`."""
    build = subprocess.run(
        [os.environ.get("CARGO", "cargo"), "test", "--no-run",
         "--message-format=json-render-diagnostics", *cargo_args],
        stdout=subprocess.PIPE, text=True)
    if build.returncode != 0:
        sys.exit(build.returncode)
    found = []
    for line in build.stdout.splitlines():
        message = json.loads(line)
        if message.get("reason") == "compiler-artifact" and message.get("executable") \
                and message["profile"]["test"]:
            folder = os.path.dirname(message["manifest_path"])
            found.append((message["executable"], folder, message["target"]["name"]))
    return found


def modules(executable, folder, test_args):
    """The tests of `executable` that `test_args` select, by their first path segment."""
    listed = subprocess.run([executable, "--list", "--format", "terse", *test_args], cwd=folder,
                            stdout=subprocess.PIPE, text=True, check=True)
    by_module = defaultdict(list)
    for line in listed.stdout.splitlines():
        if line.endswith(": test"):
            name = line[: -len(": test")]
            by_module[name.split("::")[0]].append(name)
    return by_module


def units(found, test_args):
    """What runs as one process: (executable, folder, label, key, args). A binary with its
    arguments, or one module of the integration binary with its tests named exactly."""
    for executable, folder, name in found:
        key = same_binary(executable)
        if name != SPLIT_BY_MODULE:
            yield executable, folder, name, key, test_args
            continue
        for module, tests in sorted(modules(executable, folder, test_args).items()):
            yield executable, folder, module, f"{key}::{module}", [*test_args, "--exact", *tests]


def times_file():
    """Where each unit's last time is kept: cargo's output folder."""
    return os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "test-fast-times.json")


def same_binary(executable):
    """A test binary's path without cargo's hash: the same binary across builds."""
    return executable.rsplit("-", 1)[0]


def last_times():
    """Each unit's time in the last run that ran it ({} before the first)."""
    try:
        with open(times_file()) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def slowest_first(found, last):
    """`found` with the units slowest in the last run first (unknown ones first of all), so
    that the longest do not start last and leave the other jobs idle at the end."""
    return sorted(found, key=lambda u: -last.get(u[3], float("inf")))


def keep_times(times):
    try:
        with open(times_file(), "w") as f:
            json.dump(times, f, indent=0, sort_keys=True)
    except OSError:
        pass


def run(unit):
    executable, folder, label, key, args = unit
    started = time.monotonic()
    done = subprocess.run([executable, *args], cwd=folder, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    return key, label, done.returncode, time.monotonic() - started, done.stdout


def main():
    args = sys.argv[1:]
    split = args.index("--") if "--" in args else len(args)
    cargo_args, test_args = args[:split], args[split + 1:]
    jobs = int(os.environ.get("JOBS", "3"))
    started = time.monotonic()
    # A run of some units keeps the others' times.
    failed, times = [], last_times()
    todo = slowest_first(list(units(binaries(cargo_args), test_args)), times)
    with ThreadPoolExecutor(jobs) as pool:
        for key, label, code, seconds, output in pool.map(run, todo):
            times[key] = round(seconds, 1)
            summary = [l for l in output.splitlines() if l.startswith("test result:")]
            if code != 0:
                failed.append(label)
                print(output)
            print(f"{'ok  ' if code == 0 else 'FAIL'} {label:<24} {seconds:6.1f} s  "
                  f"{summary[-1] if summary else ''}", flush=True)
    keep_times(times)
    print(f"test-fast: {len(failed)} failed{': ' + ', '.join(failed) if failed else ''}; "
          f"{time.monotonic() - started:.0f} s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
