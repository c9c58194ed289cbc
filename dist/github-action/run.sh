#!/usr/bin/env bash
# Runs `maia exec --json` for the action (inputs as INPUT_* variables, the
# key as LITELLM_API_KEY): writes the proxy's URL (and model) into
# ~/.maia/settings.json (merged with what is there), keeps the events and
# the answer's text in files named by the step's outputs, adds the answer
# to the job summary, and exits with maia's status.
set -uo pipefail

prompt="${INPUT_PROMPT:?the prompt input is required}"
url="${INPUT_LITELLM_URL:?the litellm-url input is required}"
out="${RUNNER_TEMP:-/tmp}/maia-run-$$"
mkdir -p "$out" "$HOME/.maia"

settings="$HOME/.maia/settings.json"
[ -s "$settings" ] || echo '{}' > "$settings"
if ! jq --arg url "$url" --arg model "${INPUT_MODEL:-}" \
    '. + {LiteLLM_URL: $url} + (if $model == "" then {} else {model: $model} end)' \
    "$settings" > "$out/settings.json"; then
  echo "::error::$settings is not JSON"
  exit 1
fi
mv "$out/settings.json" "$settings"

args=(exec --json --mode "${INPUT_MODE:-read-only}" --cwd "${INPUT_WORKING_DIRECTORY:-.}")
while IFS= read -r rule; do
  rule="${rule#"${rule%%[![:space:]]*}"}"
  rule="${rule%"${rule##*[![:space:]]}"}"
  [ -n "$rule" ] && args+=(--allow "$rule")
done <<< "${INPUT_ALLOW:-}"
args+=("$prompt")

maia "${args[@]}" > "$out/events.jsonl"
status=$?
jq -j 'select(.type == "text") | .text' "$out/events.jsonl" > "$out/answer.md" || true
{
  echo "answer=$out/answer.md"
  echo "events=$out/events.jsonl"
  echo "exit-code=$status"
} >> "${GITHUB_OUTPUT:-/dev/null}"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  { echo "### MAIA"; echo; cat "$out/answer.md"; echo; } >> "$GITHUB_STEP_SUMMARY"
fi
if [ "$status" != 0 ]; then
  message="$(jq -r 'select(.type == "error" or .type == "turn_failed") | .message' "$out/events.jsonl" | tail -n 1)"
  echo "::error::maia exec exited with status $status${message:+: $message}"
fi
exit "$status"
