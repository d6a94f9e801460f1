#!/usr/bin/env bash
# Cost of the sandbox per check: `ablate suite check tasks/core` (14 tasks, a
# stub and a solution check each: 28 checks) with bubblewrap and with
# --unsandboxed, alternated for ROUNDS rounds; prints the mean wall time of the
# whole command and per check, and the difference.
# Usage: benches/sandbox.sh [ROUNDS]   (idle machine; uses the release build when present)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
bin=target/release/ablate
[ -x "$bin" ] || { cargo build --quiet; bin=target/debug/ablate; }
python3 - "$bin" "$rounds" <<'PY'
import statistics, subprocess, sys, time
bin, rounds = sys.argv[1], int(sys.argv[2])
checks = 28
times = {"bubblewrap": [], "none": []}
for _ in range(rounds):
    for mode, extra in (("bubblewrap", []), ("none", ["--unsandboxed"])):
        t = time.perf_counter()
        subprocess.run([bin, "suite", "check", "tasks/core", *extra], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times[mode].append(time.perf_counter() - t)
print(f"{'isolation':<12} {'runs':>4} {'mean s':>8} {'sd s':>6} {'ms/check':>9}")
for mode, ts in times.items():
    print(f"{mode:<12} {len(ts):>4} {statistics.mean(ts):>8.2f} {statistics.stdev(ts):>6.2f} {1000 * statistics.mean(ts) / checks:>9.1f}")
d = statistics.mean(times["bubblewrap"]) - statistics.mean(times["none"])
print(f"sandbox cost: {1000 * d / checks:.1f} ms per check")
PY
