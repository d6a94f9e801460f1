#!/usr/bin/env bash
# The time `make ablate` takes to a decision, measured: runs configs/ablate.toml once for each
# experiment seed given (the seed draws the problems' order), each into results/ablate-seed-<k>,
# and prints each run's decision, problems and running time. Run it on an idle machine: the
# embedded model on two busy cores slows by 10x and more.
#
#   scripts/ablate-seeds.sh 1 2 3
set -euo pipefail
cd "$(dirname "$0")/.."
ablate=${ABLATE:-target/release/ablate}
[ $# -gt 0 ] || { echo "usage: scripts/ablate-seeds.sh SEED..." >&2; exit 2; }
for k in "$@"; do
  cfg="configs/.ablate-seed-$k.toml"
  sed "s/^seed = .*/seed = $k/" configs/ablate.toml >"$cfg"
  start=$(date +%s)
  status=0
  "$ablate" run "$cfg" --run-id "ablate-seed-$k" --plain >"results/ablate-seed-$k.log" 2>&1 || status=$?
  rm -f "$cfg"
  [ "$status" = 0 ] || { echo "seed $k: run failed (exit $status): $(tail -3 "results/ablate-seed-$k.log")" >&2; exit 1; }
  line=$(grep -E '^  combined +harness vs bare' "results/ablate-seed-$k.log" | sed 's/  */ /g')
  echo "seed $k: $(( $(date +%s) - start )) s:$line"
done
