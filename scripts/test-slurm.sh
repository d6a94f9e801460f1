#!/usr/bin/env bash
# The Slurm deployment (deploy/slurm) proven on this machine: a single-node
# Slurm from Debian's packages (slurmctld + slurmd, munge authentication,
# proctrack/linuxproc and task/none, so no cgroups), private to this test
# (its own config, state, ports and munge socket under a temporary folder).
# It runs a small experiment against a scripted endpoint twice: unsharded, and
# as a Slurm array of 3 shards plus a dependent merge job; then checks that
# the merged run's arms.csv and effects.csv equal the unsharded run's, column
# for column, except run_id and the measured times.
#
#   bash scripts/test-slurm.sh [ABLATE]     (as root; default target/debug/ablate)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ablate=$(realpath "${1:-$here/target/debug/ablate}")
n=3
if [ "$(id -u)" -ne 0 ]; then
  # slurmd and munged run as root here; CI runs as root, so there it always runs.
  echo "test-slurm: SKIPPED: needs root (run make test as root, or make test-slurm)" >&2
  exit 0
fi
for p in slurmctld slurmd sbatch munged mungekey; do
  command -v "$p" >/dev/null || { echo "test-slurm: $p is missing (scripts/install-deps.sh installs slurm-wlm and munge)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/ablate-slurm.XXXXXX)
chmod 0755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.5
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
fail() {
  echo "test-slurm: FAILED: $*" >&2
  for f in "$work"/log/*; do echo "--- $f" >&2; tail -20 "$f" >&2; done
  exit 1
}
mkdir -p "$work"/{log,state,spool,munge,results}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# munge: a key and a daemon of this test's own.
mungekey --create --keyfile="$work/munge/munge.key" --force
chmod 0400 "$work/munge/munge.key"
munged --force --key-file="$work/munge/munge.key" --socket="$work/munge/munge.socket" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/log/munged.log" --seed-file="$work/munge/seed" --foreground &
pids+=($!)

host=$(hostname -s)
cpus=$(nproc)
cat >"$work/slurm.conf" <<CONF
ClusterName=ablate-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/munge.socket
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF="$work/slurm.conf"
for i in $(seq 50); do [ -S "$work/munge/munge.socket" ] && break; sleep 0.1; done
slurmctld -D -i -f "$SLURM_CONF" >"$work/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$work/log/slurmd.out" 2>&1 &
pids+=($!)
up=0
for i in $(seq 120); do
  if sinfo -h -N -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then up=1; break; fi
  sleep 0.5
done
[ $up = 1 ] || fail "the single-node Slurm did not come up in 60 s (sinfo: $(sinfo -h -N -o '%N %T' 2>&1 | head -3))"
echo "test-slurm: single-node Slurm up: $(sinfo -h -N -o '%N %T %c CPUs')"

# The scripted endpoint and the experiment.
python3 "$here/tests/fixtures/scripted_endpoint.py" "$work/port" >"$work/log/endpoint.log" 2>&1 &
pids+=($!)
for i in $(seq 50); do [ -f "$work/port" ] && break; sleep 0.1; done
[ -f "$work/port" ] || fail "the scripted endpoint did not start"
sed -e "s|@NAME@|slurm-test|" -e "s|@SUITE@|$here/tests/fixtures/suites/tiny|" -e "s|@TRIALS@|4|" -e "s|@SEED@|11|" \
  -e "s|@STEPS@|2|" -e "s|@ENDPOINT@|http://127.0.0.1:$(cat "$work/port")|" \
  "$here/tests/fixtures/scripted-experiment.toml.in" >"$work/exp.toml"

"$ablate" run "$work/exp.toml" --results "$work/results" --run-id whole --plain -j 2 >"$work/log/whole.log" 2>&1 || fail "the unsharded run failed"

start=$(date +%s)
ABLATE="$ablate" bash "$here/deploy/slurm/submit.sh" "$n" "$work/exp.toml" "$work/results" sharded >"$work/log/submit.log" 2>&1 \
  || fail "sbatch refused the jobs: $(cat "$work/log/submit.log")"
cat "$work/log/submit.log"
merge_job=$(sed -n 's/.*merge job \([0-9]*\).*/\1/p' "$work/log/submit.log")
done_=0
for i in $(seq 600); do
  state=$(scontrol show job "$merge_job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case $state in
    COMPLETED) done_=1; break ;;
    FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) fail "the merge job ended $state" ;;
  esac
  sleep 0.5
done
[ $done_ = 1 ] || fail "the merge job did not complete in 300 s (state: ${state:-unknown}; $(squeue -h 2>&1 | head -5))"
echo "test-slurm: array of $n shards and the merge completed in $(( $(date +%s) - start )) s"

python3 - "$work/results/whole" "$work/results/sharded" <<'PY'
import csv, json, sys
whole, merged = sys.argv[1], sys.argv[2]
times = ("working_seconds", "wall_seconds")
def rows(run, name):
    with open(f"{run}/{name}") as f:
        r = list(csv.DictReader(f))
    return [{k: v for k, v in row.items() if k != "run_id" and not any(t in k for t in times)} for row in r]
for name in ("arms.csv", "effects.csv"):
    a, b = rows(whole, name), rows(merged, name)
    assert a == b, f"{name} differs:\n{a}\n{b}"
    assert a, f"{name} is empty"
m = json.load(open(f"{merged}/manifest.json"))
assert m["merged"]["shard_count"] == 3 and not m["merged"]["partial"], m["merged"]
assert len(m["plan"]) == 16, len(m["plan"])
assert [s["records"] > 0 for s in m["merged"]["shards"]] == [True] * 3, m["merged"]["shards"]
rates = sorted(row["pass_rate"] for row in rows(whole, "arms.csv"))
print(f"test-slurm: merged report equals the unsharded one (arms.csv, effects.csv; pass rates {rates}); 16 trials from {len(m['merged']['shards'])} shards")
PY
echo "test-slurm: ok"
