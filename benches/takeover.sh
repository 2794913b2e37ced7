#!/usr/bin/env bash
# A takeover's time (issue 38): replica A runs N executions that never end (a scripted model
# that hangs), replica B runs nothing; A is killed with SIGKILL, and the time until B has
# ended all N is read from the database: when A's registration is gone (B claimed it: the
# lease's share, a lease after A's last renewal plus up to a third for B's next round), and
# when the last execution ended (the endings' share). PostgreSQL is the one at
# MODEL_RUNTIME_BENCH_POSTGRES_URL (default: this machine's), in a fresh schema dropped after.
#
#   benches/takeover.sh [BIN]        N=2000 LEASE=3s ROUNDS=3
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh

BIN=${1:-target/release/model-runtime}
N=${N:-2000}
LEASE=${LEASE:-3s}
ROUNDS=${ROUNDS:-3}
export MODEL_RUNTIME_BENCH_POSTGRES_URL=${MODEL_RUNTIME_BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
[[ -x "$BIN" ]] || cargo build --release --quiet
command -v psql >/dev/null || { echo "psql is needed to read the database" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

sql() { psql "$MODEL_RUNTIME_BENCH_POSTGRES_URL" -tAqc "$1"; }
now() { date +%s.%N; }

for round in $(seq "$ROUNDS"); do
    schema="mr_takeover_$(date +%s)_$round"
    cat >"$work/config.toml" <<EOF
[server]
listen = "127.0.0.1:0"
drain_timeout = "1s"
default_deadline = "10m"
max_deadline = "10m"

[store]
kind = "postgres"
url_env = "MODEL_RUNTIME_BENCH_POSTGRES_URL"
schema = "$schema"
lease = "$LEASE"
max_executions = $((N * 4))

[providers.scripted]
adapter = "scripted"
max_concurrency = $((N * 2))
queue_capacity = $((N * 2))

[[providers.scripted.models]]
name = "stuck"
capabilities = ["text"]
script = { hang = true }

[policies.hang]
targets = ["scripted/stuck"]

[abilities.chat]
policy = "hang"
EOF
    pids=()
    for name in a b; do
        RUST_LOG=warn,model_runtime=info "$BIN" serve --config "$work/config.toml" 2>"$work/$name.log" &
        pids+=($!)
        addr=$(server_addr "$work/$name.log" "$!") || exit 1
        until_healthy "$BIN" "$addr"
        [[ $name == a ]] && a_addr=$addr
    done
    "$BIN" bench --addr "$a_addr" --rpc submit --concurrency 64 --executions "$N" >/dev/null
    for _ in $(seq 600); do
        [[ $(sql "SELECT count(*) FROM \"$schema\".executions WHERE state = 2") -ge $N ]] && break
        sleep 0.1
    done
    kill -KILL "${pids[0]}"
    wait "${pids[0]}" 2>/dev/null || true
    killed=$(now)
    claimed=""
    while true; do
        left=$(sql "SELECT count(*) FROM \"$schema\".executions WHERE ended_at IS NULL")
        if [[ -z $claimed && $(sql "SELECT count(*) FROM \"$schema\".replicas") -le 1 ]]; then
            claimed=$(now)
        fi
        [[ $left -eq 0 && -n $claimed ]] && break
        sleep 0.02
    done
    ended=$(now)
    failed=$(sql "SELECT count(*) FROM \"$schema\".executions WHERE state = 4")
    awk -v n="$failed" -v lease="$LEASE" -v k="$killed" -v c="$claimed" -v e="$ended" 'BEGIN {
        printf "%d executions ended, lease %s: claimed %.2f s after the kill, all ended %.2f s after it (ending took %.2f s)\n",
            n, lease, c - k, e - k, e - c }'
    kill -TERM "${pids[1]}"; wait "${pids[1]}" 2>/dev/null || true
    sql "SET client_min_messages = warning; DROP SCHEMA \"$schema\" CASCADE" >/dev/null
done
