#!/usr/bin/env bash
# Instructions per execution under callgrind: a count that does not move with the load of a
# shared machine, for before/after comparisons of CPU-bound changes. (It counts instructions,
# not cycles: cache misses and system calls are not in it, so confirm with benches/ab.sh.)
#
#   benches/instructions.sh BIN...     # each server binary: its instructions per execution
#   benches/instructions.sh --bare     # the bare tonic baseline server's
#   benches/instructions.sh --clients BIN...   # each binary's load tool (the client side)
#   METRICS=1 benches/instructions.sh BIN...   # with server.metrics_listen set (metrics on)
#   CONFIG=FILE ABILITY=NAME benches/instructions.sh BIN...   # another config (provider.sh)
#   EXTRA="--label tenant=acme" benches/instructions.sh BIN...  # more load tool arguments
#
# A server runs under valgrind --tool=callgrind with benches/bench.toml; this tree's load tool
# (native) sends N executions at concurrency 16; the figure is the difference between runs of
# N and N/4 executions over the 3N/4 between them, so start-up and shutdown cancel out. The
# bare baseline runs inside the load tool, so its figure is (load tool + bare) minus (load tool
# alone against a native server). Needs valgrind. Loopback only; bounded by N and timeouts.
set -euo pipefail

N=${N:-4000}
cd "$(dirname "$0")/.."
source benches/lib.sh
command -v valgrind >/dev/null || { echo "instructions.sh needs valgrind" >&2; exit 2; }
[[ $# -ge 1 ]] || { echo "usage: $0 BIN... | --bare" >&2; exit 2; }
CLIENT=target/release/model-runtime
[[ -x "$CLIENT" ]] || cargo build --release --quiet

work=$(mktemp -d)
pid=""
cleanup() {
    if [[ -n "$pid" ]]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

config=${CONFIG:-benches/bench.toml}
if [[ ${METRICS:-0} == 1 ]]; then
    sed 's/^\[server\]$/[server]\nmetrics_listen = "127.0.0.1:0"/' "$config" >"$work/metrics.toml"
    config=$work/metrics.toml
fi

total() { grep -h "^summary:\|^totals:" "$work"/cg.* | head -1 | awk '{print $2}'; }

serve() { # serve LAUNCHER... : start a server, its address in $work/addr
    RUST_LOG=info "$@" serve --config "$config" 2>"$work/log" &
    pid=$!
    # Slow to start under valgrind.
    server_addr "$work/log" "$pid" 600 >"$work/addr" || exit 1
}

stop() { kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }

drive() { # drive COUNT: COUNT executions against the server at $work/addr
    local extra
    read -ra extra <<<"${EXTRA:-}"
    "$CLIENT" bench --addr "$(cat "$work/addr")" --ability "${ABILITY:-chat}" --concurrency 16 --executions "$1" --timeout 60s "${extra[@]}" >/dev/null
}

server_run() { # server_run BIN COUNT -> the server's total instructions
    rm -f "$work"/cg.*
    serve valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" "$1"
    drive "$2"
    stop
    total
}

bench_run() { # bench_run ARGS... -> the load tool's total instructions (${TOOL:-$CLIENT}'s)
    rm -f "$work"/cg.*
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" "${TOOL:-$CLIENT}" bench --concurrency 16 --timeout 60s "$@" >/dev/null 2>"$work/vg.log"
    total
}

M=$((N - N / 4))
if [[ $1 == --bare ]]; then
    serve "$CLIENT"
    addr=$(cat "$work/addr")
    c1=$(bench_run --addr "$addr" --executions $((N / 4)))
    c2=$(bench_run --addr "$addr" --executions "$N")
    stop
    b1=$(bench_run --baseline --deltas 16 --executions $((N / 4)))
    b2=$(bench_run --baseline --deltas 16 --executions "$N")
    echo "load tool: $(((c2 - c1) / M)) instructions per execution"
    echo "bare tonic server: $((((b2 - b1) - (c2 - c1)) / M)) instructions per execution"
    exit 0
fi
if [[ $1 == --clients ]]; then
    # The same native server for every load tool: only the client side differs.
    shift
    serve "$CLIENT"
    addr=$(cat "$work/addr")
    for bin in "$@"; do
        c1=$(TOOL=$bin bench_run --addr "$addr" --executions $((N / 4)))
        c2=$(TOOL=$bin bench_run --addr "$addr" --executions "$N")
        echo "$bin load tool: $(((c2 - c1) / M)) instructions per execution"
    done
    stop
    exit 0
fi
for bin in "$@"; do
    a=$(server_run "$bin" $((N / 4)))
    b=$(server_run "$bin" "$N")
    echo "$bin: $(((b - a) / M)) instructions per execution"
done
