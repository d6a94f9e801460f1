#!/usr/bin/env bash
# Render a run's report.html in headless Chromium and save report.png beside it.
# Usage: scripts/screenshot.sh RUN_DIR   (installs Debian's chromium when missing)
set -euo pipefail
run=${1:?usage: scripts/screenshot.sh RUN_DIR}
html=$(cd "$run" && pwd)/report.html
[ -f "$html" ] || { echo "no report.html in $run (run: ablate report $run)" >&2; exit 2; }
if ! command -v chromium >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# The background-networking flags keep Chromium from calling out of a closed network.
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size=1200,1300 \
  --screenshot="$(dirname "$html")/report.png" "file://$html" 2>/dev/null
echo "wrote $(dirname "$html")/report.png"
