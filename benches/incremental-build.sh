#!/usr/bin/env bash
# The edit-compile loop on the report: `cargo build` (debug, the default
# features) once to warm up, then N rounds of two rebuilds each: after
# touching the report module (its time stamp only), and after an edit (a new
# public function appended, so its crate's interface changes; taken out again
# at the end). Prints each wall time and the medians. The report module is
# found where the checkout keeps it (crates/report/src/report/mod.rs in the
# workspace, src/report/mod.rs in the single crate it was before), so the same
# script measures both layouts. Run on an idle machine.
# Usage: benches/incremental-build.sh [rounds]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
report=crates/report/src/report/mod.rs
[ -f "$report" ] || report=src/report/mod.rs
saved=$(mktemp)
cp -p "$report" "$saved"
trap 'cp -p "$saved" "$report"; rm -f "$saved"' EXIT
cargo build --quiet
timed() {
  local start end
  start=$(date +%s.%N)
  cargo build --quiet
  end=$(date +%s.%N)
  python3 -c "print(f'{$end - $start:.1f}')"
}
touched=() edited=()
for i in $(seq "$rounds"); do
  touch "$report"
  t=$(timed)
  printf '\npub fn incremental_build_edit_%s() -> u32 {\n    %s\n}\n' "$i" "$i" >> "$report"
  e=$(timed)
  echo "round $i ($report): touched $t s, edited $e s"
  touched+=("$t") edited+=("$e")
done
median() { python3 -c "import statistics, sys; print(f'{statistics.median(map(float, sys.argv[1:])):.1f}')" "$@"; }
echo "median of $rounds: touched $(median "${touched[@]}") s, edited $(median "${edited[@]}") s"
