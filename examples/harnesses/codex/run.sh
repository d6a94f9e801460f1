#!/bin/sh
# Codex CLI (npm @openai/codex, pinned by `make agents`) as an external harness.
# $1 is the codex binary. Codex reads its endpoint from $CODEX_HOME/config.toml,
# not from the environment: this writes one that points it at the trial's
# gateway (the Responses API), with the arm's components:
#   effort        model_reasoning_effort (low | medium | high)
#   instructions  builtin, or a file of developer instructions in the harness files
#   web_search    default (Codex's own) | disabled
set -eu
codex="$1"
# A fixed path (the jail's /tmp is private to the trial): a random one would enter the
# prompt and make every trial's requests differ (docs/delivery.md, "Pitfalls").
home=/tmp/ablate-agent-home
mkdir -p "$home"
{
  echo "model = \"$ABLATE_MODEL\""
  echo "model_provider = \"ablate\""
  echo "model_reasoning_effort = \"${ABLATE_COMPONENT_EFFORT:-medium}\""
  if [ "${ABLATE_COMPONENT_WEB_SEARCH:-default}" = disabled ]; then echo 'web_search = "disabled"'; fi
  instructions=${ABLATE_COMPONENT_INSTRUCTIONS:-builtin}
  if [ "$instructions" != builtin ]; then
    printf 'developer_instructions = """%s"""\n' "$(cat "$(dirname "$0")/$instructions")"
  fi
  echo "[model_providers.ablate]"
  echo "name = \"ablate gateway\""
  echo "base_url = \"$OPENAI_BASE_URL\""
  echo "env_key = \"OPENAI_API_KEY\""
  echo "wire_api = \"responses\""
} > "$home/config.toml"
export CODEX_HOME="$home" HOME="$home"
exec "$codex" exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox \
  "$ABLATE_TASK_PROMPT"
