#!/usr/bin/env bash
# A Python environment of pinned packages from PyPI, for a harness or a test:
# made from the interpreter the checks use (python3 on PATH, or $PYTHON), its
# files readable by every user, as the sandbox needs. Does nothing when the
# pins are installed already.
#   scripts/venv.sh [--optional] DIR MODULES PIN...
# MODULES: what must import (comma-separated). With --optional, a failed
# install (offline) warns and exits 0, unless CI is set.
#   target/sdk-venv: openai, anthropic, ollama, google-genai (tests/integration/: sdk.rs, request_fields.rs)
#   target/harness-venv: smolagents (examples/harnesses/smol; make harness-venv)
#   target/agents/venv: aider, mini-swe-agent (examples/harnesses; make agents)
set -euo pipefail
cd "$(dirname "$0")/.."
optional=
if [ "${1:-}" = --optional ]; then optional=1; shift; fi
venv=$1 modules=$2
shift 2
want=$(printf '%s\n' "$@")
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/pins.txt" 2>/dev/null)" = "$want" ] \
   && "$venv/bin/python" -c "import $modules" 2>/dev/null; then
  exit 0
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"${PYTHON:-python3}" -m venv "$venv"
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"; then
  rm -rf "$venv"
  if [ -n "$optional" ] && [ -z "${CI:-}" ]; then
    echo "*** cannot install $* from PyPI: what needs $venv will be SKIPPED ***" >&2
    exit 0
  fi
  echo "cannot install $* from PyPI" >&2
  exit 1
fi
"$venv/bin/python" -c "import $modules"
chmod -R a+rX "$venv"
printf '%s\n' "$want" > "$venv/pins.txt"
echo "made $venv: $*" >&2
