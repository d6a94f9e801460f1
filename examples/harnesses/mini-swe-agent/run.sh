#!/bin/sh
# mini-swe-agent (PyPI mini-swe-agent, pinned by `make agents` into
# target/agents/venv) as an external harness: its `mini` command, no
# confirmation, exiting when the model submits. $1 is its program. It reaches the
# trial's gateway through litellm's OpenAI provider (OPENAI_API_BASE and
# OPENAI_API_KEY, which ablate sets). The arm's component:
#   config  mini (its bash-tool config) | mini_textbased (commands in fenced blocks)
set -eu
mini="$1"
# A fixed path (the jail's /tmp is private to the trial), never a random one (docs/delivery.md).
home=/tmp/ablate-agent-home
mkdir -p "$home"
config_dir=$(dirname "$(dirname "$mini")")/lib
config=$(find "$config_dir" -path '*/minisweagent/config/'"${ABLATE_COMPONENT_CONFIG:-mini}"'.yaml' | head -1)
# No model-price downloads and no cost limit (the trial's budget is ablate's).
export HOME="$home" LITELLM_LOCAL_MODEL_COST_MAP=True MSWEA_COST_TRACKING=ignore_errors \
  MSWEA_CONFIGURED=true MSWEA_GLOBAL_CONFIG_DIR="$home"
exec "$mini" --yolo --exit-immediately --cost-limit 0 --model "openai/$ABLATE_MODEL" \
  --config "$config" --output "$home/trajectory.json" --task "$ABLATE_TASK_PROMPT"
