#!/usr/bin/env bash
# Run the example notebook headless on two synthetic runs (make test).
#   ABLATE: the binary (default target/debug/ablate); VENV: the Python environment
#   (default .venv-examples, made and filled from examples/notebook/requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
ABLATE=${ABLATE:-target/debug/ablate}
VENV=${VENV:-.venv-examples}
if [ ! -x "$VENV/bin/jupyter" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet -r examples/notebook/requirements.txt
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in 1 2; do
    "$ABLATE" synth-run examples/notebook/synthetic.toml --records 300 --seed "$s" --out "$tmp/run-$s" 2>/dev/null
    NO_COLOR=1 "$ABLATE" report "$tmp/run-$s" > /dev/null 2>&1
done
ABLATE_RUNS="$tmp/run-1:$tmp/run-2" ABLATE_NOTEBOOK_OUT="$tmp" \
    "$VENV/bin/jupyter" nbconvert --to notebook --execute examples/notebook/runs.ipynb \
    --output-dir "$tmp" --output executed.ipynb --ExecutePreprocessor.timeout=300
for f in pass_rates.png forest.png frontier.png executed.ipynb; do
    test -s "$tmp/$f" || { echo "notebook: $f missing" >&2; exit 1; }
done
echo "notebook: examples/notebook/runs.ipynb ran on two runs; pass_rates.png, forest.png and frontier.png drawn"
