#!/usr/bin/env bash
# The three stores side by side through the server (issue 25), same binary, same run:
# executions/s at concurrency 64 and first output at concurrency 1, each execution the
# scripted echo of a 20-word prompt (20 text deltas; 26 events with routing, attempt, usage
# and the end). PostgreSQL is the one at MODEL_RUNTIME_BENCH_POSTGRES_URL (default: this
# machine's, loopback, `sslmode=disable`), in a fresh schema dropped afterwards. The row
# `memory+redis` is the memory store with the provider's permits leased in Redis
# (MODEL_RUNTIME_BENCH_REDIS_URL, default this machine's): the global limiter's cost.
#
#   benches/stores.sh [BIN]        DUR=5s by default; STORES="memory file postgres memory+redis"
#   PROVIDER=openai benches/stores.sh [BIN]   # each store behind the openai adapter instead,
#                                   # at `model-runtime mock-upstream` (20 chunks, zero delay)
#   ROUNDS=5 STORES="memory postgres memory+redis" benches/stores.sh [BIN]
#                                   # the stores in turn, five times over (a fresh schema
#                                   # each round); then each store's executions/s at c=64 per
#                                   # round, as a ratio of the memory store's in the same round,
#                                   # and the mean ratio: a 5 s run moves by more than the
#                                   # gaps these goals measure
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh

BIN=${1:-target/release/model-runtime}
DUR=${DUR:-5s}
STORES=${STORES:-memory file postgres memory+redis}
ROUNDS=${ROUNDS:-1}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a whole number from 1: $ROUNDS" >&2; exit 2; }
export MODEL_RUNTIME_BENCH_REDIS_URL=${MODEL_RUNTIME_BENCH_REDIS_URL:-redis://127.0.0.1:6379}
export MODEL_RUNTIME_BENCH_POSTGRES_URL=${MODEL_RUNTIME_BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
export MODEL_RUNTIME_BENCH_STORE_KEY=${MODEL_RUNTIME_BENCH_STORE_KEY:-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')}
PROMPT="one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"
[[ -x "$BIN" ]] || cargo build --release --quiet

work=$(mktemp -d)
schemas=()
pid=""
mock=""
pids=()
# drop_schemas: drops the PostgreSQL schemas made so far (a server using one is stopped first).
drop_schemas() {
    if [[ ${#schemas[@]} -gt 0 ]] && command -v psql >/dev/null; then
        for schema in "${schemas[@]}"; do
            psql "$MODEL_RUNTIME_BENCH_POSTGRES_URL" -qc "DROP SCHEMA IF EXISTS \"$schema\" CASCADE" >/dev/null 2>&1 || true
        done
    fi
    schemas=()
}
cleanup() {
    [[ -z "$pid" ]] || pids+=("$pid")
    load_cleanup
    drop_schemas
}
trap cleanup EXIT INT TERM

if [[ ${PROVIDER:-scripted} == openai ]]; then
    CLIENT=$BIN start_mock
fi

store_table() {
    case $1 in
        memory | memory+redis) printf 'kind = "memory"\n' ;;
        file) printf 'kind = "file"\npath = "%s/journal-%s"\nkey_env = "MODEL_RUNTIME_BENCH_STORE_KEY"\n' "$work" "$round" ;;
        postgres) postgres_table "$schema" ;;
    esac
}

declare -A rates # "store round" -> executions/s at c=64
for round in $(seq "$ROUNDS"); do
    schema="mr_bench_$(date +%s)_$round"
    [[ " $STORES " != *" postgres "* ]] || schemas+=("$schema")
    [[ $ROUNDS == 1 ]] || echo "round $round"
    for store in $STORES; do
        # bench.toml with its [store] table's kind replaced by this store's keys.
        limiter=""
        if [[ $store == *+redis ]]; then
            limiter="limiter = { kind = \"redis\", url_env = \"MODEL_RUNTIME_BENCH_REDIS_URL\", key = \"mr-bench-$$-$round\" }"
        fi
        awk -v table="$(store_table "$store")" -v limiter="$limiter" '
            /^kind = "memory"$/ && !done { print table; done = 1; next }
            /^queue_capacity/ && limiter != "" { print; print limiter; next }
            { print }' benches/bench.toml > "$work/$store.toml"
        if [[ -n "$mock" ]]; then
            # The scripted provider replaced by the openai adapter at the mock, same names.
            sed -i -e 's|^adapter = "scripted"$|adapter = "openai"\nbase_url = "http://'"$mock"'/v1"|' \
                -e '/^script = /d' "$work/$store.toml"
        fi
        RUST_LOG=warn,model_runtime=info "$BIN" serve --config "$work/$store.toml" 2>"$work/$store.log" &
        pid=$!
        addr=$(server_addr "$work/$store.log" "$pid") || exit 1
        until_healthy "$BIN" "$addr"
        # One execution first: a new limiter key gives its first permit only after a third of
        # its lease (README, "What Redis must keep"), which is not what is measured.
        "$BIN" bench --addr "$addr" --concurrency 1 --executions 1 >/dev/null 2>&1
        for c in 64 1; do
            printf '%-9s c=%-3s ' "$store" "$c"
            line=$("$BIN" bench --addr "$addr" --concurrency "$c" --duration "$DUR" --prompt "$PROMPT" 2>&1 | tr '\n' ' ')
            echo "$line"
            if [[ $c == 64 ]]; then
                rates["$store $round"]=$(awk '{ for (i = 2; i <= NF; i++) if ($i == "/s") { print $(i - 1); exit } }' <<<"$line")
            fi
        done
        kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=""
    done
    # The round's schema goes with it: the next round's database holds no other's rows.
    drop_schemas
done

# Each store's rate at c=64 against the memory store's of the same round.
if [[ " $STORES " == *" memory "* ]]; then
    echo "executions/s at c=64 as a ratio of the memory store's in the same round:"
    for store in $STORES; do
        [[ $store != memory ]] || continue
        ratios=""
        for round in $(seq "$ROUNDS"); do
            ratios+="$(awk -v a="${rates["$store $round"]:-0}" -v m="${rates["memory $round"]:-0}" \
                'BEGIN { if (m > 0 && a > 0) printf "%.3f", a / m; else printf "-" }') "
        done
        ratios=${ratios% }
        awk -v store="$store" -v ratios="$ratios" 'BEGIN {
            n = split(ratios, r, " "); k = 0; sum = 0
            for (i = 1; i <= n; i++) if (r[i] != "-") { sum += r[i]; k++ }
            printf "  %-13s %s", store, ratios
            if (k > 0) printf " mean %.3fx", sum / k
            printf "\n"
        }'
    done
fi
