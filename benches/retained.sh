#!/usr/bin/env bash
# Resident memory per finished execution the store keeps: a server whose echo model streams
# one text delta per prompt word runs N executions of D deltas each to the end (Execute), and
# keeps them for the retention; the server's VmRSS from /proc before and after, over N.
#
#   benches/retained.sh                       # this tree's binary: 20000 x 16 deltas
#   N=10 D=99000 C=1 benches/retained.sh BIN  # long replies, one at a time (just under the
#                                             # default 100 000 events per execution)
#
# The config uses only keys every version since the first has, so an older binary runs the
# same workload. Loopback only; bounded by N and timeouts; stops the server on every way out.
set -euo pipefail

N=${N:-20000}
D=${D:-16}
cd "$(dirname "$0")/.."
source benches/lib.sh
resident_setup "$@"

cat >"$work/retained.toml" <<TOML
[server]
listen = "127.0.0.1:0"
drain_timeout = "1s"
default_deadline = "10m"
max_deadline = "10m"
max_input_bytes = 4000000

[store]
kind = "memory"
max_executions = $((N + 1000))
retention = "10m"

[providers.scripted]
adapter = "scripted"
max_concurrency = 64
queue_capacity = 1024

[[providers.scripted.models]]
name = "echo"
capabilities = ["text", "streaming"]
script = { chunk = "word" }

[policies.default]
targets = ["scripted/echo"]
max_attempts = 1
retry_budget = "10m"

[abilities.chat]
policy = "default"
requires = ["text"]
TOML

resident_serve "$work/retained.toml"

# Warm up connections and the code paths, so "before" is a running server.
"$CLIENT" bench --addr "$addr" --deltas 16 --executions 100 --concurrency 4 --json >/dev/null
sleep 1
before=$(rss)
concurrency=${C:-$((N < 16 ? N : 16))}
"$CLIENT" bench --addr "$addr" --deltas "$D" --executions "$N" --concurrency "$concurrency" \
    --timeout 10m --json | tail -1 >"$work/run.json"
sleep 2
after=$(rss)
ok=$(jq -r .succeeded "$work/run.json")
errors=$(jq -c .errors "$work/run.json")
echo "binary: $BIN"
echo "executions: $ok of $N (errors: $errors), $D text deltas each, kept for the retention"
echo "VmRSS before: ${before} KiB, after: ${after} KiB"
awk -v b="$before" -v a="$after" -v n="$ok" -v d="$D" 'BEGIN {
    per = (a - b) * 1024 / n
    printf "per execution: %.1f KiB (%.0f bytes), %.0f bytes per delta\n", per / 1024, per, per / d
}'
