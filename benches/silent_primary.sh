#!/usr/bin/env bash
# Time to fallback against a silent primary: 50 consecutive executions (concurrency 1) whose
# first target takes the request and never answers (first byte timeout 2s, unknown outcomes
# fall back) and whose second is `model-runtime mock-upstream`. Once with the primary's
# health off (every execution waits out the timeout), once on (after `consecutive_failures`
# executions the primary is ejected and skipped). Reports the load tool's latency figures
# and how many requests reached the silent primary.
#
#   benches/silent_primary.sh [BIN]    # BIN: the server binary (default: this tree's release build)
#
# Loopback only; bounded (N executions, each at most the 2s timeout plus the fallback).
set -euo pipefail

cd "$(dirname "$0")/.."
source benches/lib.sh
load_setup "$@"
N=${N:-50}

start_mock

# The silent primary: accepts, reads, never answers; counts the requests it took.
python3 - "$work/silent" <<'PY' &
import socket, sys, threading
out = sys.argv[1]
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1024)
open(out + ".addr", "w").write("127.0.0.1:%d" % server.getsockname()[1])
held, count = [], 0
def serve(conn):
    global count
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    count += 1
    open(out + ".count", "w").write(str(count))
while True:
    conn, _ = server.accept()
    held.append(conn)
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
PY
pids+=($!)
for _ in $(seq 50); do [[ -s "$work/silent.addr" ]] && break; sleep 0.1; done
silent=$(cat "$work/silent.addr")

cat >"$work/silent.toml" <<TOML
[server]
listen = "127.0.0.1:0"
drain_timeout = "2s"
default_deadline = "60s"

[providers.silent_off]
adapter = "openai"
base_url = "http://$silent/v1"
timeouts = { connect = "1s", first_byte = "2s", idle = "2s" }
on_unknown_outcome = "fallback"
health = "off"

[[providers.silent_off.models]]
name = "m"
capabilities = ["text"]

[providers.silent_on]
adapter = "openai"
base_url = "http://$silent/v1"
timeouts = { connect = "1s", first_byte = "2s", idle = "2s" }
on_unknown_outcome = "fallback"

[[providers.silent_on.models]]
name = "m"
capabilities = ["text"]

[providers.mock]
adapter = "openai"
base_url = "http://$mock/v1"

[[providers.mock.models]]
name = "m"
capabilities = ["text"]

[policies.off]
targets = ["silent_off/m", "mock/m"]

[policies.on]
targets = ["silent_on/m", "mock/m"]

[abilities.off]
policy = "off"

[abilities.on]
policy = "on"
TOML

RUST_LOG=info "$BIN" serve --config "$work/silent.toml" 2>"$work/server.log" &
server=$!
pids+=("$server")
addr=$(server_addr "$work/server.log" "$server")

for ability in off on; do
    before=$(cat "$work/silent.count" 2>/dev/null || echo 0)
    start=$(date +%s.%N)
    report=$("$CLIENT" bench --addr "$addr" --ability "$ability" --concurrency 1 --executions "$N")
    took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f s", e - s}')
    after=$(cat "$work/silent.count" 2>/dev/null || echo 0)
    echo "health $ability: $N executions in $took; the silent primary took $((after - before)) requests"
    grep -E "latency|first output|executions" <<<"$report" | sed 's/^/  /'
done
