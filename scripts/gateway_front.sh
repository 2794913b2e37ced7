#!/usr/bin/env bash
# A gateway in front: LiteLLM's proxy pointed at the runtime's HTTP ingress as an
# OpenAI-compatible backend, as a platform team would run it, and OpenAI's SDK through it: a
# whole answer, a stream, and a stream the runtime cuts after output (the gateway must not
# hand its client a cut answer as a whole one). Not part of CI: LiteLLM is large and comes
# from PyPI. Needs LiteLLM (`pip install 'litellm[proxy]'`; ../shared/peer-harness/setup.sh
# puts one in $PEERS_DIR/venv).
#
#   scripts/gateway_front.sh [target/release/model-runtime]
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${1:-target/debug/model-runtime}
peers=${PEERS_DIR:-$HOME/.cache/mrt-peers}
litellm=${LITELLM:-$peers/venv/bin/litellm}
python=${PYTHON:-$peers/venv/bin/python}
port=${LITELLM_PORT:-4011}
[ -x "$litellm" ] || { echo "no LiteLLM at $litellm: set LITELLM" >&2; exit 2; }

dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"' EXIT

"$binary" serve --config scripts/sdk_config.toml --listen 127.0.0.1:0 >/dev/null 2>"$dir/runtime.log" &
pids+=($!)
addr=""
for _ in $(seq 1 100); do
  addr=$(grep 'HTTP ingress serving' "$dir/runtime.log" | grep -o 'addr=[^ ]*' | head -n 1 | cut -d= -f2 || true)
  [ -n "$addr" ] && break
  sleep 0.1
done
[ -n "$addr" ] || { cat "$dir/runtime.log" >&2; exit 1; }

cat > "$dir/litellm.yaml" <<YAML
model_list:
  - model_name: chat
    litellm_params: {model: openai/chat, api_base: "http://$addr/v1", api_key: unused}
  - model_name: cut
    litellm_params: {model: openai/cut, api_base: "http://$addr/v1", api_key: unused}
litellm_settings:
  num_retries: 0
general_settings:
  disable_spend_logs: true
YAML
# LiteLLM's proxy takes requests only with its master key.
key="sk-$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
LITELLM_MASTER_KEY="$key" LITELLM_LOG=ERROR "$litellm" --config "$dir/litellm.yaml" --host 127.0.0.1 --port "$port" \
  >"$dir/litellm.log" 2>&1 &
pids+=($!)
up=""
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$port/health/liveliness" >/dev/null && { up=1; break; }
  sleep 0.5
done
[ -n "$up" ] || { echo "LiteLLM did not start:" >&2; tail -20 "$dir/litellm.log" >&2; exit 1; }

"$python" - "http://127.0.0.1:$port/v1" "$key" <<'PY'
import sys

import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0)
user = [{"role": "user", "content": "hello through a gateway"}]
whole = client.chat.completions.create(model="chat", messages=user)
assert whole.choices[0].message.content == "hello through a gateway", whole
print("ok   a whole answer through LiteLLM")
text = "".join(
    c.choices[0].delta.content or ""
    for c in client.chat.completions.create(model="chat", messages=user, stream=True)
    if c.choices
)
assert text == "hello through a gateway", text
print("ok   a stream through LiteLLM")
seen, finished = "", None
try:
    for c in client.chat.completions.create(
        model="cut", messages=[{"role": "user", "content": "one two three four"}], stream=True
    ):
        if c.choices:
            seen += c.choices[0].delta.content or ""
            finished = c.choices[0].finish_reason or finished
    print(f"FAIL a cut stream ended normally through LiteLLM (text {seen!r}, finish {finished})")
    sys.exit(1)
except openai.APIError as e:
    print(f"ok   a cut stream raises through LiteLLM after {seen!r}: {type(e).__name__}")
PY
