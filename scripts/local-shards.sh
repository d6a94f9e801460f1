#!/usr/bin/env bash
# Run an experiment as N shards in parallel processes on this machine, then
# merge them into one run folder: the path a cluster takes (deploy/slurm,
# deploy/k8s), for users without one and for the tests.
#
#   scripts/local-shards.sh N CONFIG [RESULTS [ID]]
#
# Shard k runs into RESULTS/ID-shard-k-of-N (its log beside it, .log); the
# merged run is RESULTS/ID. Run it again with the same ID to finish shards that
# were stopped. ABLATE (default target/release/ablate) and ABLATE_JOBS (trials
# at once per shard) as in deploy/shard-run.sh.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 4 ]; then
  echo "usage: $0 N CONFIG [RESULTS [ID]]" >&2
  exit 2
fi
n=$1 config=$2 results=${3:-results}
id=${4:-$(date -u +%Y%m%dT%H%M%SZ)-$(basename "$config" .toml)}
case $n in '' | *[!0-9]* | 0) echo "N must be a positive integer, not '$n'" >&2; exit 2 ;; esac
export ABLATE=${ABLATE:-target/release/ablate}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$results"
pids=()
for k in $(seq 1 "$n"); do
  bash "$here/deploy/shard-run.sh" "$k" "$n" "$config" "$results" "$id" >"$results/$id-shard-$k-of-$n.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "shard $((i + 1))/$n failed: $results/$id-shard-$((i + 1))-of-$n.log" >&2
    failed=1
  fi
done
if [ $failed -ne 0 ]; then
  echo "not merged; run again with ID $id to finish the shards" >&2
  exit 1
fi
shards=()
for k in $(seq 1 "$n"); do shards+=("$results/$id-shard-$k-of-$n"); done
exec "$ABLATE" merge -o "$results/$id" "${shards[@]}"
