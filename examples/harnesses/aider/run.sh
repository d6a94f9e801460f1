#!/bin/sh
# aider (PyPI aider-chat, pinned by `make agents` into target/agents/venv) as an
# external harness, one message, no git. $1 is its program. It reaches the
# trial's gateway through litellm's OpenAI provider (OPENAI_API_BASE and
# OPENAI_API_KEY, which ablate sets), and edits the task's editable files.
# The arm's component:
#   edit_format  whole | diff (how aider asks the model to write its edits)
set -eu
aider="$1"
# A fixed path (the jail's /tmp is private to the trial), never a random one (docs/delivery.md).
home=/tmp/ablate-agent-home
mkdir -p "$home"
# No update checks, analytics or model-price downloads: the sandbox has no network but the gateway.
export HOME="$home" LITELLM_LOCAL_MODEL_COST_MAP=True AIDER_ANALYTICS=false
# The editable files, one a line, as arguments.
old_ifs=$IFS
IFS='
'
set -- $ABLATE_EDITABLE
IFS=$old_ifs
exec "$aider" --model "openai/$ABLATE_MODEL" --edit-format "${ABLATE_COMPONENT_EDIT_FORMAT:-whole}" \
  --yes-always --no-git --no-auto-commits --no-check-update --no-analytics --no-show-model-warnings \
  --no-pretty --no-stream --map-tokens 0 --no-suggest-shell-commands --no-detect-urls \
  --message "$ABLATE_TASK_PROMPT" "$@"
