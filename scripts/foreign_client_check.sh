#!/usr/bin/env bash
# Starts the server on a free loopback port and runs scripts/foreign_client.py against it: a
# Python client that knows the API only through server reflection (v1alpha). Then the same
# over a Unix socket (sidecar mode) as grpcio reaches one, `unix:PATH`, with no
# `grpc.default_authority`: grpcio then sends the socket's path, percent-encoded, as the
# `:authority`, which the server must accept. Then scripts/retry_pushback.py: grpcio's retry
# policy waits for the server's pushback; and scripts/connection_age.py: grpcio moves to a new
# connection when the server's ages out, and resumes a stream cut by it; and the Python
# client (clients/python) resumes a stream across a server's restart. Used by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${1:-target/debug/model-runtime}
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore grpcio grpcio-reflection protobuf

dir=$(mktemp -d)
servers=()
trap 'for s in "${servers[@]}"; do kill "$s" 2>/dev/null || true; done; rm -rf "$dir"' EXIT

# Starts `serve --listen $1` logging to $2 (on the config $3, if given); sets `addr` to the
# address it logs once serving.
serve() {
  "$binary" serve --listen "$1" ${3:+--config "$3"} >/dev/null 2>"$2" &
  servers+=($!)
  addr=""
  for _ in $(seq 1 100); do
    addr=$(grep 'model-runtime serving' "$2" | grep -o 'addr=[^ ]*' | head -n 1 | cut -d= -f2 || true)
    [ -n "$addr" ] && break
    sleep 0.1
  done
  if [ -z "$addr" ]; then
    echo "server did not start:" >&2
    cat "$2" >&2
    exit 1
  fi
}

serve 127.0.0.1:0 "$dir/tcp.log"
timeout 60 python3 scripts/foreign_client.py "$addr" "hello from a foreign client"

serve "unix:$dir/mr.sock" "$dir/unix.log"
timeout 60 python3 scripts/foreign_client.py "$addr" "hello over the sidecar socket"

serve 127.0.0.1:0 "$dir/full.log" scripts/retry_pushback.toml
timeout 60 python3 scripts/retry_pushback.py "$addr"

serve 127.0.0.1:0 "$dir/age.log" scripts/connection_age.toml
timeout 60 python3 scripts/connection_age.py "$addr"

# The Python client as a user installs it, its generated code current with proto/, against a
# server killed and restarted under its stream.
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore 'grpcio-tools==1.85.1' ./clients/python
python3 -m grpc_tools.protoc -I proto --python_out="$dir" --pyi_out="$dir" --grpc_python_out="$dir" proto/model_runtime/v1/*.proto
touch "$dir/model_runtime/__init__.py" "$dir/model_runtime/v1/__init__.py"
if ! diff -r -x __pycache__ "$dir/model_runtime" clients/python/src/model_runtime >/dev/null; then
  echo "clients/python's generated code is behind proto/: run scripts/generate_clients.sh" >&2
  exit 1
fi
timeout 120 python3 scripts/python_client_check.py "$binary"

for s in "${servers[@]}"; do
  kill -TERM "$s"
  wait "$s"
done
servers=()
