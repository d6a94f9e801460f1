#!/bin/sh
# Claude Code (npm @anthropic-ai/claude-code, pinned by `make agents`) as an
# external harness, headless. $1 is its program. It reads ANTHROPIC_BASE_URL and
# ANTHROPIC_API_KEY, which ablate sets to the trial's gateway (the Messages API).
# The arm's components:
#   append_system_prompt  none, or a file of the harness files appended to its system prompt
#   disallowed_tools      none, or a tool list for --disallowedTools (WebFetch, ...)
set -eu
claude="$1"
here=$(dirname "$0")
# A fixed path (the jail's /tmp is private to the trial): a random one would enter the
# prompt and make every trial's requests differ (docs/delivery.md, "Pitfalls").
home=/tmp/ablate-agent-home
mkdir -p "$home"
# No telemetry, update checks or error reports: the sandbox has no network but the gateway.
export HOME="$home" CLAUDE_CONFIG_DIR="$home/.claude" DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 \
  DISABLE_ERROR_REPORTING=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 IS_SANDBOX=1
append=${ABLATE_COMPONENT_APPEND_SYSTEM_PROMPT:-none}
tools=${ABLATE_COMPONENT_DISALLOWED_TOOLS:-none}
set -- -p "$ABLATE_TASK_PROMPT" --output-format json --dangerously-skip-permissions \
  --model "$ABLATE_MODEL"
if [ "$append" != none ]; then set -- "$@" --append-system-prompt "$(cat "$here/$append")"; fi
if [ "$tools" != none ]; then set -- "$@" --disallowedTools "$tools"; fi
exec "$claude" "$@"
