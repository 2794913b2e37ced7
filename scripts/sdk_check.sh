#!/usr/bin/env bash
# The stock SDKs against the HTTP ingress of the real binary: starts `serve` with
# scripts/sdk_config.toml (an ingress on a free loopback port, scripted providers that fall
# back, cut an answer and call a tool) and runs scripts/sdk_clients.py with OpenAI's and
# Anthropic's Python SDKs; then buf curl calls the gRPC API over gRPC-Web on the same port.
# Used by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${1:-target/debug/model-runtime}
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore openai anthropic

dir=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$dir"' EXIT

"$binary" serve --config scripts/sdk_config.toml --listen 127.0.0.1:0 >/dev/null 2>"$dir/log" &
server=$!
addr=""
for _ in $(seq 1 100); do
  addr=$(grep 'HTTP ingress serving' "$dir/log" | grep -o 'addr=[^ ]*' | head -n 1 | cut -d= -f2 || true)
  [ -n "$addr" ] && grep -q 'model-runtime serving' "$dir/log" && break
  sleep 0.1
done
if [ -z "$addr" ]; then
  echo "server did not start:" >&2
  cat "$dir/log" >&2
  exit 1
fi
timeout 120 python3 scripts/sdk_clients.py "http://$addr/v1"

# gRPC-Web on the same port, as a browser calls it: buf curl over HTTP/1.1, the schema read
# through reflection over gRPC-Web too, an execution's events streamed to its end.
out=$(timeout 120 npx --yes @bufbuild/buf curl --protocol grpcweb \
  "http://$addr/model_runtime.v1.ModelRuntime/Execute" \
  -d '{"ability":"chat","input":{"messages":[{"role":"ROLE_USER","content":[{"text":"hello over grpc-web"}]}]}}')
if ! grep -q '"text": "hello over grpc-web"' <<<"$out" || ! grep -q '"completed"' <<<"$out"; then
  echo "FAIL gRPC-Web Execute through the ingress:" >&2
  echo "$out" >&2
  exit 1
fi
echo "ok   gRPC-Web: buf curl streamed $(grep -c '"sequence"' <<<"$out") events through the ingress"
kill -TERM "$server"
wait "$server"
server=""
