#!/usr/bin/env bash
# Run shard K of N of an experiment into RESULTS/<ID>-shard-K-of-N, or continue
# it (--resume) when that folder already has a manifest: a shard that was
# preempted, requeued or retried picks up where it stopped and never runs a
# finished trial twice. The one way every launcher runs a shard: Slurm
# (deploy/slurm), Kubernetes (deploy/k8s) and scripts/local-shards.sh.
#
#   deploy/shard-run.sh K N CONFIG RESULTS ID
#
# ABLATE: the ablate binary (default: ablate on PATH). ABLATE_JOBS: trials at
# once in this shard (default: ablate's own default, see `ablate run --help`).
set -euo pipefail
if [ $# -ne 5 ]; then
  echo "usage: $0 K N CONFIG RESULTS ID" >&2
  exit 2
fi
k=$1 n=$2 config=$3 results=$4 id=$5
ablate=${ABLATE:-ablate}
name="$id-shard-$k-of-$n"
jobs=()
if [ -n "${ABLATE_JOBS:-}" ]; then jobs=(-j "$ABLATE_JOBS"); fi
if [ -f "$results/$name/manifest.json" ]; then
  exec "$ablate" run "$config" --resume "$results/$name" --plain "${jobs[@]}"
fi
exec "$ablate" run "$config" --shard "$k/$n" --results "$results" --run-id "$name" --plain "${jobs[@]}"
