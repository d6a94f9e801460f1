#!/bin/sh
# Gemini CLI (npm @google/gemini-cli, pinned by `make agents`) as an external
# harness, headless. $1 is its bundle, run by the machine's node. It reads
# GOOGLE_GEMINI_BASE_URL and GEMINI_API_KEY, which ablate sets to the trial's
# gateway (the Gemini API). The arm's component:
#   system_md  builtin, or a file of the harness files that replaces its system prompt
set -eu
gemini="$1"
here=$(dirname "$0")
# A fixed path (the jail's /tmp is private to the trial), never a random one (docs/delivery.md).
home=/tmp/ablate-agent-home
mkdir -p "$home/.gemini"
# An API key, no folder-trust prompt, no update checks or usage statistics.
cat > "$home/.gemini/settings.json" <<JSON
{"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
 "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
 "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false}}
JSON
export HOME="$home"
system=${ABLATE_COMPONENT_SYSTEM_MD:-builtin}
if [ "$system" != builtin ]; then export GEMINI_SYSTEM_MD="$here/$system"; fi
exec node "$gemini" -p "$ABLATE_TASK_PROMPT" -m "$ABLATE_MODEL" --yolo --output-format json
