#!/usr/bin/env bash
# Benchmark of `ablate report` on generated runs of 10k, 100k and 1M trial
# records: wall time and peak memory (max RSS) of the whole command, which
# reads trials.jsonl, analyses it and writes every export.
# Usage: benches/report.sh [sizes...]   (release build; run on an idle machine)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/ablate
sizes=("${@:-10000 100000 1000000}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-10s %-12s %-10s %-12s\n' records jsonl_MB seconds peak_MB
for n in ${sizes[@]}; do
  dir="$work/run-$n"
  "$bin" synth-run configs/core.toml --records "$n" --out "$dir" 2>/dev/null
  recs=$(wc -l < "$dir/trials.jsonl")
  mb=$(du -m "$dir/trials.jsonl" | cut -f1)
  python3 - "$bin" "$dir" "$recs" "$mb" <<'PY'
import resource, subprocess, sys, time
bin, run, recs, mb = sys.argv[1:]
t = time.perf_counter()
subprocess.run([bin, "report", "--no-color", run], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
dt = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"{recs:<10} {mb:<12} {dt:<10.2f} {peak:<12.0f}")
PY
done
