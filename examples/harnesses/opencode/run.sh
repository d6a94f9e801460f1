#!/bin/sh
# opencode (npm opencode-ai, pinned by `make agents`) as an external harness,
# headless (`opencode run`). $1 is its program. Its provider is configured in an
# opencode.json under XDG_CONFIG_HOME: an OpenAI-compatible provider at the
# trial's gateway. The arm's component:
#   agent  build (opencode's default agent) | plan
set -eu
opencode="$1"
# A fixed path (the jail's /tmp is private to the trial): a random one would enter the
# prompt and make every trial's requests differ (docs/delivery.md, "Pitfalls").
home=/tmp/ablate-agent-home
mkdir -p "$home"
mkdir -p "$home/config/opencode"
cat > "$home/config/opencode/opencode.json" <<JSON
{
  "\$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "model": "ablate/$ABLATE_MODEL",
  "provider": {
    "ablate": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "ablate gateway",
      "options": {"baseURL": "$OPENAI_BASE_URL", "apiKey": "$OPENAI_API_KEY"},
      "models": {"$ABLATE_MODEL": {"name": "$ABLATE_MODEL"}}
    }
  }
}
JSON
export HOME="$home" XDG_CONFIG_HOME="$home/config" XDG_DATA_HOME="$home/data" \
  XDG_CACHE_HOME="$home/cache" XDG_STATE_HOME="$home/state" OPENCODE_DISABLE_AUTOUPDATE=1 \
  OPENCODE_DISABLE_LSP_DOWNLOAD=1
exec "$opencode" run --model "ablate/$ABLATE_MODEL" --agent "${ABLATE_COMPONENT_AGENT:-build}" \
  "$ABLATE_TASK_PROMPT"
