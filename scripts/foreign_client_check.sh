#!/usr/bin/env bash
# Starts the server on a free loopback port and runs scripts/foreign_client.py against it: a
# Python client that knows the API only through server reflection (v1alpha). Used by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${1:-target/debug/model-runtime}
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore grpcio grpcio-reflection protobuf

log=$(mktemp)
"$binary" serve --listen 127.0.0.1:0 2>"$log" &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -f "$log"' EXIT

addr=""
for _ in $(seq 1 100); do
  addr=$(grep 'model-runtime serving' "$log" | grep -o 'addr=127\.0\.0\.1:[0-9]*' | head -n 1 | cut -d= -f2 || true)
  [ -n "$addr" ] && break
  sleep 0.1
done
if [ -z "$addr" ]; then
  echo "server did not start:" >&2
  cat "$log" >&2
  exit 1
fi

timeout 60 python3 scripts/foreign_client.py "$addr" "hello from a foreign client"
kill -TERM "$server"
wait "$server"
