#!/usr/bin/env bash
# How often the shipped gate PASSes on an unchanged project: runs
# configs/gate.toml N times, each with another experiment seed (run k uses
# seed k; the committed config's seed is one draw of these), and gates each run
# against the committed baseline (results/baseline/gate.csv). Prints each
# verdict and the counts. The baseline was made with a seed none of these use.
#
#   scripts/gate-pass-rate.sh [N]      (default 5; each run is one `make gate`)
# MARGIN: the gate's margin (default 0.20, as `make gate`).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5}
margin=${MARGIN:-0.20}
ablate=${ABLATE:-target/release/ablate}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0 inconclusive=0
for k in $(seq 1 "$n"); do
  sed "s/^seed = .*/seed = $k/" configs/gate.toml >"configs/.gate-seed-$k.toml"
  start=$(date +%s)
  "$ablate" run "configs/.gate-seed-$k.toml" --results "$work" --run-id "seed-$k" --plain >"$work/run-$k.log" 2>&1 || { rm -f "configs/.gate-seed-$k.toml"; echo "run $k failed: $(tail -3 "$work/run-$k.log")" >&2; exit 1; }
  rm -f "configs/.gate-seed-$k.toml"
  set +e
  "$ablate" gate --baseline results/baseline/gate.csv --candidate "$work/seed-$k" --margin "$margin" >"$work/gate-$k.txt" 2>&1
  code=$?
  set -e
  case $code in
    0) verdict=PASS; pass=$((pass + 1)) ;;
    1) verdict=FAIL; fail=$((fail + 1)) ;;
    3) verdict=INCONCLUSIVE; inconclusive=$((inconclusive + 1)) ;;
    *) echo "gate exit $code: $(cat "$work/gate-$k.txt")" >&2; exit 1 ;;
  esac
  counts=$(python3 -c "import csv,sys; r=list(csv.DictReader(open('$work/seed-$k/arms.csv'))); print(r[0]['passed'] + '/' + r[0]['trials'])")
  cp "$work/gate-$k.txt" "${GATE_LOG_DIR:-$work}/gate-seed-$k.txt" 2>/dev/null || true
  echo "seed $k: $verdict (candidate $counts, $(( $(date +%s) - start )) s)"
done
echo "PASS $pass, FAIL $fail, INCONCLUSIVE $inconclusive of $n runs"
