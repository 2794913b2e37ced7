#!/usr/bin/env bash
# Resident memory per idle queued execution: a server whose only model never answers
# (`hang = true`) with max_concurrency 1, so every execution but the first waits in the
# admission queue; submit N (default 50000) and read the server's VmRSS from /proc before
# and after. Loopback only; bounded by N and a timeout; stops the server on every way out.
#
#   benches/memory.sh                 # this tree's release binary, 50000 executions
#   N=20000 benches/memory.sh /tmp/other-model-runtime
set -euo pipefail

N=${N:-50000}
cd "$(dirname "$0")/.."
source benches/lib.sh
resident_setup "$@"

cat >"$work/queue.toml" <<TOML
[server]
listen = "127.0.0.1:0"
drain_timeout = "1s"
default_deadline = "10m"
max_deadline = "10m"

[store]
kind = "memory"
max_executions = $((N + 10000))
retention = "10m"

[providers.slow]
adapter = "scripted"
max_concurrency = 1
queue_capacity = $((N + 10000))

[[providers.slow.models]]
name = "never"
capabilities = ["text", "streaming"]
script = { hang = true }

[policies.default]
targets = ["slow/never"]
max_attempts = 1
retry_budget = "10m"

[abilities.chat]
policy = "default"
requires = ["text"]
TOML

resident_serve "$work/queue.toml"

# Warm up connections and the code paths with a few, so "before" is a running server.
"$CLIENT" bench --addr "$addr" --rpc submit --executions 100 --concurrency 4 --json >/dev/null
sleep 1
before=$(rss)
"$CLIENT" bench --addr "$addr" --rpc submit --executions "$N" --concurrency 64 --timeout 10s --json \
    | tail -1 >"$work/submit.json"
sleep 2
after=$(rss)
ok=$(jq -r .succeeded "$work/submit.json")
errors=$(jq -c .errors "$work/submit.json")
echo "binary: $BIN"
echo "submitted: $ok of $N (errors: $errors); queued behind one hanging call"
echo "VmRSS before: ${before} KiB, after: ${after} KiB"
awk -v b="$before" -v a="$after" -v n="$ok" \
    'BEGIN { printf "per queued execution: %.2f KiB (%.0f bytes)\n", (a - b) / n, (a - b) * 1024 / n }'
