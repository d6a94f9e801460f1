#!/usr/bin/env bash
# The CLI agents of examples/harnesses, pinned, into one folder that their
# configs mount read-only into the sandbox (`mounts`): from npm, Codex CLI
# 0.171.0 (@openai/codex), Claude Code 2.1.332 (@anthropic-ai/claude-code),
# opencode 1.18.33 (opencode-ai) and Gemini CLI 0.61.0 (@google/gemini-cli, a
# bundle the machine's node runs); from PyPI, in DIR/venv, aider 0.86.2
# (aider-chat) and mini-swe-agent 2.4.6.
# Detected by what runs: each program must answer --version, else the folder
# is installed anew. Offline, the agents' tests are skipped loudly, unless CI
# is set (then this fails).
#   scripts/agents.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/agents}
pins=(@openai/codex@0.171.0 @anthropic-ai/claude-code@2.1.332 opencode-ai@1.18.33
  @google/gemini-cli@0.61.0)
programs=(
  node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
  node_modules/@anthropic-ai/claude-code-linux-x64/claude
  node_modules/opencode-linux-x64/bin/opencode
  node_modules/@google/gemini-cli/bundle/gemini.js
)
answers() {
  for p in "${programs[@]}"; do
    case $p in
      *.js) run=(node "$dir/$p") ;;
      *) run=("$dir/$p") ;;
    esac
    HOME=$(mktemp -d) "${run[@]}" --version >/dev/null 2>&1 || return 1
  done
}
python_agents() {
  bash scripts/venv.sh --optional "$dir/venv" "aider, minisweagent" aider-chat==0.86.2 mini-swe-agent==2.4.6
}
if [ -f "$dir/pins.txt" ] && [ "$(cat "$dir/pins.txt")" = "${pins[*]}" ] && answers; then
  python_agents
  exit 0
fi
rm -rf "$dir"
mkdir -p "$dir"
if ! npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${pins[@]}" >&2; then
  rm -rf "$dir"
  if [ -z "${CI:-}" ]; then
    echo "*** cannot install the agents from npm: tests/agents.rs will be SKIPPED ***" >&2
    exit 0
  fi
  exit 1
fi
# The sandbox runs them as another user: every file readable, every program runnable.
chmod -R a+rX "$dir"
answers || { echo "the agents installed in $dir do not answer --version" >&2; exit 1; }
echo "${pins[*]}" > "$dir/pins.txt"
echo "made $dir: ${pins[*]}"
python_agents
