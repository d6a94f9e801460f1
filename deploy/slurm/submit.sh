#!/usr/bin/env bash
# Submit an ablate experiment to Slurm as an array of N shards and a merge
# that runs after all of them succeeded (job logs in RESULTS). RESULTS must be storage every node
# sees (the shards write there, the merge reads there). Prints the two job ids.
#
#   deploy/slurm/submit.sh N CONFIG RESULTS ID [extra sbatch options for the shards...]
#
# ablate must be on the nodes' PATH, or ABLATE set to it (exported to the jobs).
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 N CONFIG RESULTS ID [sbatch options...]" >&2
  exit 2
fi
n=$1 config=$2 results=$3 id=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
export ABLATE_DEPLOY="$(dirname "$here")"
mkdir -p "$results"
# Job logs go beside the run folders.
array=$(sbatch --parsable --export=ALL --chdir="$PWD" --output="$results/slurm-%x-%A_%a.out" --array="1-$n" "$@" "$here/shard.sbatch" "$config" "$results" "$id")
array=${array%%;*}
merge=$(sbatch --parsable --export=ALL --chdir="$PWD" --output="$results/slurm-%x-%j.out" --dependency="afterok:$array" "$here/merge.sbatch" "$n" "$results" "$id")
merge=${merge%%;*}
echo "array job $array (shards 1-$n), merge job $merge -> $results/$id"
