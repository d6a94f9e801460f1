#!/usr/bin/env bash
# Print the oldest interpreter of at least Python MAJOR.MINOR (default 3.12): python3,
# python3.12, python3.13, python3.14 on PATH, else one under pyenv's versions. Exit 1 when there
# is none.
#   scripts/find-python.sh [3.12]
set -euo pipefail
want=${1:-3.12}
ok() { "$1" -c "import sys; sys.exit(0 if sys.version_info[:2] >= tuple(map(int, '$want'.split('.'))) else 1)" 2>/dev/null; }
for c in python3 python3.12 python3.13 python3.14; do
  p=$(command -v "$c" 2>/dev/null) || continue
  if ok "$p"; then echo "$p"; exit 0; fi
done
root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
for p in $(ls -d "$root"/versions/3.*/bin/python 2>/dev/null | sort -V); do
  if ok "$p"; then echo "$p"; exit 0; fi
done
exit 1
