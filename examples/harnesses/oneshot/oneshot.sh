#!/bin/sh
# The bare baseline as a shell command: one model call, the reply's last fenced
# code block becomes the (first) editable file, no tests, no second call.
# One component, ABLATE_COMPONENT_FILE_CONTEXT: "inline" pastes the file's
# current content into the prompt, "none" sends the task text alone.
# An external harness for ablate in another language than Python
# (docs/external-harness.md): it needs only sh, curl and jq, and reads the
# Ollama API at $OLLAMA_HOST (ablate's gateway during a trial).
set -eu
file=$(printf '%s\n' "$ABLATE_EDITABLE" | head -n 1)
if [ "${ABLATE_COMPONENT_FILE_CONTEXT:-inline}" = inline ]; then
  context=$(printf -- '--- %s ---\n```python\n%s\n```' "$file" "$(cat "$file")")
else
  context=""
fi
prompt=$(printf '%s\n\nEditable file: %s\n\n%s\n\nReply with the complete new file in one fenced code block.' \
  "$ABLATE_TASK_PROMPT" "$file" "$context")
body=$(jq -n --arg model "$ABLATE_MODEL" --arg prompt "$prompt" \
  '{model: $model, stream: false, messages: [{role: "user", content: $prompt}]}')
reply=$(curl -sS --fail-with-body -X POST "$OLLAMA_HOST/api/chat" -H 'Content-Type: application/json' -d "$body")
# The last ``` block of the reply, without its fences.
printf '%s' "$reply" | jq -r '.message.content' | awk '
  /^```/ { if (inside) { inside = 0; last = block } else { inside = 1; block = "" } next }
  inside { block = block $0 "\n" }
  END { printf "%s", last }' > "$file.new"
if [ -s "$file.new" ]; then mv "$file.new" "$file"; else rm -f "$file.new"; fi
