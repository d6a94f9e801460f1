#!/usr/bin/env bash
# Peak memory (max RSS) of `ablate run` as the plan grows, against a scripted
# endpoint (tests/fixtures/scripted_endpoint.py) on the tiny suite.
#
# Every trial is graded for real (sandbox + Python), about 0.1 s of CPU each,
# so a plan of 100,000 trials would take hours here. The bench therefore
# measures what grows with the plan without running all of it: for each size N
# it starts a run of an N-trial plan, writes records for all but the last
# RUN_NOW planned trials (copies of a real record with each trial's own id,
# task, arm and repeat), and times `ablate run --resume` of that folder, which
# reads the N-trial manifest and the records, runs the last RUN_NOW trials for
# real, and rewrites the exports of all N. Equal work at every N: a peak that
# grows with N is memory held per planned or recorded trial. The first run's
# own peak (new_run_MB: planning N trials, writing the manifest, the first
# trials) is reported too.
#
# Usage: benches/run-memory.sh [sizes...]   (default 1000 10000 100000; idle machine)
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("${@:-1000 10000 100000}")
run_now=${RUN_NOW:-200}
cargo build --release --quiet
bin=$PWD/target/release/ablate
work=$(mktemp -d)
endpoint=
cleanup() {
  [ -n "$endpoint" ] && kill "$endpoint" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
export WORK=$work
cat >"$work/hwm.py" <<'PY'
import time


def hwm(p):
    # ablate's own peak resident set (VmHWM), read until it exits: the
    # sandboxed graders it runs are other processes and are not counted.
    peak = 0
    while p.poll() is None:
        try:
            for line in open(f"/proc/{p.pid}/status"):
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) / 1024)
        except (FileNotFoundError, ProcessLookupError):
            pass
        time.sleep(0.02)
    return peak
PY
python3 tests/fixtures/scripted_endpoint.py "$work/port" &
endpoint=$!
for i in $(seq 50); do [ -f "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")

printf '%-10s %-12s %-10s %-12s %-10s %-10s\n' planned new_run_MB run_now jsonl_MB seconds resume_MB
for n in ${sizes[@]}; do
  # 2 tasks x 2 arms a repeat.
  trials=$(( (n + 3) / 4 ))
  sed -e "s|@NAME@|memory|" -e "s|@SUITE@|$PWD/tests/fixtures/suites/tiny|" -e "s|@TRIALS@|$trials|" -e "s|@SEED@|5|" \
    -e "s|@STEPS@|1|" -e "s|@ENDPOINT@|http://127.0.0.1:$port|" tests/fixtures/scripted-experiment.toml.in >"$work/exp-$n.toml"
  dir="$work/results/mem-$n"
  # A real new run of the plan, stopped after its first records (a template
  # record): its peak is what starting a run of N trials costs (the plan, the
  # manifest written, the first trials).
  new_peak=$(python3 - "$bin" "$work/exp-$n.toml" "$work/results" "mem-$n" "$dir" <<'PY'
import os, signal, subprocess, sys, time
sys.path.insert(0, os.environ["WORK"])
from hwm import hwm
bin, cfg, results, run_id, run = sys.argv[1:]
p = subprocess.Popen([bin, "run", cfg, "--results", results, "--run-id", run_id, "--plain", "-j", "2"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def stop():
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if sum(1 for _ in open(f"{run}/trials.jsonl")) >= 2:
                break
        except FileNotFoundError:
            pass
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
import threading
threading.Thread(target=stop, daemon=True).start()
print(f"{hwm(p):.0f}")
PY
)
  python3 - "$dir" "$run_now" <<'PY'
import json, sys
run, run_now = sys.argv[1], int(sys.argv[2])
m = json.load(open(f"{run}/manifest.json"))
template = json.loads(open(f"{run}/trials.jsonl").readline())
plan = m["plan"]
done = plan[: max(0, len(plan) - run_now)]
with open(f"{run}/trials.jsonl", "w") as out:
    for t in done:
        r = dict(template)
        r.update(trial_id=t["id"], task=t["task"], arm=t["arm"], model=t["model"], repeat=t["repeat"], seed=t["seed"], attempt=1)
        out.write(json.dumps(r) + "\n")
open(f"{run}/attempts.jsonl", "w").close()
PY
  recs=$(wc -l <"$dir/trials.jsonl")
  mb=$(du -m "$dir/trials.jsonl" | cut -f1)
  python3 - "$bin" "$work/exp-$n.toml" "$dir" "$n" "$run_now" "$mb" "$new_peak" <<'PY'
import os, subprocess, sys, time
sys.path.insert(0, os.environ["WORK"])
from hwm import hwm
bin, cfg, run, n, run_now, mb, new_peak = sys.argv[1:]
t = time.perf_counter()
p = subprocess.Popen([bin, "run", cfg, "--resume", run, "--plain", "-j", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
peak = hwm(p)
dt = time.perf_counter() - t
print(f"{n:<10} {new_peak:<12} {run_now:<10} {mb:<12} {dt:<10.1f} {peak:<10.0f}")
PY
  [ -n "${KEEP:-}" ] || rm -rf "$dir"
done
