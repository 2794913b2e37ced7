#!/usr/bin/env bash
# Before/after for a hot-path change: two server binaries under the same load tool, runs
# interleaved (A, B, bare tonic, A, B, bare, ...) so noise from a shared machine lands on
# all three alike. Prints each run and the mean throughput and p99 per binary.
#
#   cp target/release/model-runtime /tmp/before   # build, keep the old binary
#   ...change, cargo build --release...
#   benches/ab.sh /tmp/before target/release/model-runtime
#   DURATION=3s ROUNDS=4 LEVELS="64" benches/ab.sh A B
#   CONFIG_B=/tmp/off.toml benches/ab.sh BIN BIN   # one binary, two configs (default: bench.toml)
#   WARMUP=5s benches/ab.sh A B       # how long each server runs before the rounds (2s)
#   PIN=1 benches/ab.sh A B           # one core each: every server (bare tonic's threads
#                                     # too) on core 1, the load tool on core 0, one worker each
#
# Unpinned (the default), the servers and the load tool share both cores and the scheduler
# moves them; PIN=1 (two cores needed) is the layout of provider.sh and the peer harness,
# where the server under test has a core of its own. Bare tonic runs inside the load tool's
# process: with PIN=1 its threads (named bare-tonic) are moved to core 1 as they appear, in
# the run's first milliseconds.
#
# Needs jq. Loopback only; each run bounded by DURATION.
set -euo pipefail

[[ $# -eq 2 ]] || { echo "usage: $0 BIN_A BIN_B" >&2; exit 2; }
A=$(realpath "$1")
B=$(realpath "$2")
DURATION=${DURATION:-3s}
ROUNDS=${ROUNDS:-3}
LEVELS=${LEVELS:-"64"}
cd "$(dirname "$0")/.."
source benches/lib.sh
command -v jq >/dev/null || { echo "ab.sh needs jq" >&2; exit 2; }
# The client: this tree's load tool, the same for every run.
CLIENT=${CLIENT:-target/release/model-runtime}
[[ -x "$CLIENT" ]] || cargo build --release --quiet

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT INT TERM


server=()
client=()
if [[ ${PIN:-0} == 1 ]]; then
    server=(taskset -c 1)
    client=(env TOKIO_WORKER_THREADS=1 taskset -c 0)
fi

# Not called inside $(...): a server started there would hold the substitution open.
start() { # start NAME BIN CONFIG: serve on a free port; its address lands in $work/NAME.addr
    RUST_LOG=info "${server[@]}" "$2" serve --config "$3" 2>"$work/$1.log" &
    pids+=($!)
    server_addr "$work/$1.log" "$!" >"$work/$1.addr" || exit 1
}
start a "$A" "${CONFIG_A:-benches/bench.toml}"
start b "$B" "${CONFIG_B:-benches/bench.toml}"
addr_a=$(cat "$work/a.addr")
addr_b=$(cat "$work/b.addr")

# Warm-up, not measured: each server fills its store first (the bench config's 20 000
# executions), so the first round does not pay for the pages a filling store faults in.
for addr in "$addr_a" "$addr_b"; do
    "${client[@]}" "$CLIENT" bench --addr "$addr" --concurrency 64 --duration "${WARMUP:-2s}" >/dev/null
done

echo "A = $A ($addr_a)"
echo "B = $B ($addr_b)"
echo "$(nproc) cores, ${DURATION} per run, ${ROUNDS} rounds; load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %-5s %-5s %12s %10s %10s %s\n' conc round who "exec/s" "p50 us" "p99 us" errors
for c in $LEVELS; do
    for r in $(seq "$ROUNDS"); do
        for who in a b bare; do
            case $who in
                a) target=(--addr "$addr_a") ;;
                b) target=(--addr "$addr_b") ;;
                bare) target=(--baseline --deltas 16) ;;
            esac
            "${client[@]}" "$CLIENT" bench --json --timeout 10s "${target[@]}" \
                --concurrency "$c" --duration "$DURATION" >"$work/$who-$c-$r.out" &
            if [[ $who == bare && ${PIN:-0} == 1 ]]; then pin_bare $! 1; fi
            wait $!
            tail -1 "$work/$who-$c-$r.out" >"$work/$who-$c-$r.json"
            jq -r --arg c "$c" --arg r "$r" --arg who "$who" \
                '"\($c)\t\($r)\t\($who)\t\(.executions_per_sec | floor)\t\(.ttc_us.p50)\t\(.ttc_us.p99)\t\(.errors | tostring)"' \
                "$work/$who-$c-$r.json" | awk -F'\t' '{printf "%-5s %-5s %-5s %12s %10s %10s %s\n", $1, $2, $3, $4, $5, $6, $7}'
        done
    done
    for who in a b bare; do
        jq -r -s --arg c "$c" --arg who "$who" '
            "\($c) mean \($who): \(map(.executions_per_sec) | add / length | floor)/s, p99 \(map(.ttc_us.p99) | add / length | round) us"
        ' "$work"/"$who"-"$c"-*.json
    done
done
