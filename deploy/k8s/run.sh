#!/usr/bin/env bash
# Run an experiment on Kubernetes: the Indexed Job of N shards, then (once it
# has completed) the merge Job. The model Service, the results claim and the
# ablate-experiment ConfigMap must exist (model-server.yaml, storage.yaml).
#
#   deploy/k8s/run.sh N RUN_ID [kubectl options, e.g. -n ablate]
#
# N sets completions, parallelism and the shard count together, so they
# cannot disagree.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 N RUN_ID [kubectl options]" >&2
  exit 2
fi
n=$1 id=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
set_n() {
  sed -e "s/^  completions: 4$/  completions: $n/" -e "s/^  parallelism: 4$/  parallelism: $n/" \
      -e "s/{name: SHARDS, value: \"4\"}/{name: SHARDS, value: \"$n\"}/" \
      -e "s/{name: RUN_ID, value: \"experiment\"}/{name: RUN_ID, value: \"$id\"}/" "$1"
}
set_n "$here/shards-job.yaml" | kubectl apply "$@" -f -
kubectl wait "$@" --for=condition=complete --timeout=-1s job/ablate-shards
set_n "$here/merge-job.yaml" | kubectl apply "$@" -f -
kubectl wait "$@" --for=condition=complete --timeout=-1s job/ablate-merge
echo "merged run: /results/$id on the ablate-results claim"
