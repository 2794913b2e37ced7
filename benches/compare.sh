#!/usr/bin/env bash
# Runtime vs bare tonic, side by side on this machine, in one run.
#
# Server CPU per execution (cpu rt / cpu bare, microseconds) is printed beside the rates: on
# a small machine the load tool shares the cores, so the ratio alone hides where CPU goes.
#
# Builds release, starts `model-runtime serve` on 127.0.0.1 (a free port) with the scripted
# echo model at zero delay, then at each concurrency runs the runtime (A) and the bare tonic
# baseline streaming the same 22 messages (B) interleaved A/B/A/B, so machine noise (other
# builds on a shared box) lands on both. Prints per concurrency the throughput ratio
# runtime/bare and the p99 time-to-completion difference; then, open loop at half the
# runtime's peak rate, the p99 the runtime adds. Stops the server on every way out.
#
#   benches/compare.sh                      # 5 s per run, 2 rounds, concurrency 1 16 64 256
#   DURATION=2s ROUNDS=3 LEVELS="16 64" benches/compare.sh
#
# Needs jq. Loopback only; every run is bounded by DURATION and a per-call timeout.
set -euo pipefail

DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-2}
LEVELS=${LEVELS:-"1 16 64 256"}
DELTAS=16
# Open-loop workers: enough that arrivals never wait for a free worker at half peak.
OPEN_CONCURRENCY=${OPEN_CONCURRENCY:-256}

cd "$(dirname "$0")/.."
source benches/lib.sh
command -v jq >/dev/null || { echo "compare.sh needs jq" >&2; exit 2; }
cargo build --release --quiet
BIN=target/release/model-runtime

work=$(mktemp -d)
server_pid=""
cleanup() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT INT TERM


RUST_LOG=info "$BIN" serve --config benches/bench.toml 2>"$work/server.log" &
server_pid=$!
addr=$(server_addr "$work/server.log" "$server_pid") || exit 1

prompt=$("$BIN" bench --baseline --deltas "$DELTAS" --executions 1 --json | jq -r '.deltas')
[[ "$prompt" == "$DELTAS" ]] || { echo "baseline self-check failed" >&2; exit 1; }

# run NAME ARGS...: one bench run, its JSON kept as $work/NAME.json.
run() {
    local name=$1
    shift
    "$BIN" bench --json --timeout 10s "$@" | tail -1 >"$work/$name.json"
}
field() { jq -r "$2" "$work/$1.json"; }
# CPU ticks (1/100 s) the server process has used: its CPU per execution beside the bare
# server's (which the load tool reports for its own in-process threads).
server_ticks() { cpu_ticks "$server_pid" | awk '{ print $1 + $2 }'; }

echo "model-runtime vs bare tonic: $(nproc) cores, ${DURATION} per run, ${ROUNDS} A/B rounds, ${DELTAS} deltas"
echo "server $addr (pid $server_pid)"
printf '%-6s %-5s %10s %10s %7s %10s %11s %9s %8s %8s %s\n' \
    conc round "runtime/s" "bare/s" ratio "p99 rt us" "p99 bare us" "added us" "cpu rt" "cpu bare" errors
peak=0
for c in $LEVELS; do
    for r in $(seq "$ROUNDS"); do
        t0=$(server_ticks)
        run "rt-$c-$r" --addr "$addr" --concurrency "$c" --duration "$DURATION"
        t1=$(server_ticks)
        run "bare-$c-$r" --baseline --deltas "$DELTAS" --concurrency "$c" --duration "$DURATION"
        rt=$(field "rt-$c-$r" .executions_per_sec)
        bare=$(field "bare-$c-$r" .executions_per_sec)
        p_rt=$(field "rt-$c-$r" .ttc_us.p99)
        p_bare=$(field "bare-$c-$r" .ttc_us.p99)
        errors=$(jq -c -s '[.[].errors] | add' "$work/rt-$c-$r.json" "$work/bare-$c-$r.json")
        cpu_rt=$(jq -n "($t1 - $t0) * 10000 / $(field "rt-$c-$r" .executions)")
        cpu_bare=$(field "bare-$c-$r" '.cpu_us_per_execution.bare_server // 0')
        printf '%-6s %-5s %10.0f %10.0f %7.3f %10.0f %11.0f %9.0f %8.1f %8.1f %s\n' "$c" "$r" "$rt" "$bare" \
            "$(jq -n "$rt / $bare")" "$p_rt" "$p_bare" "$(jq -n "$p_rt - $p_bare")" "$cpu_rt" "$cpu_bare" "$errors"
        peak=$(jq -n "[$peak, $rt] | max")
    done
    # The mean over rounds: the figure to quote.
    jq -r -s --arg c "$c" '
        (map(select(.mode == "server")) | map(.executions_per_sec) | add / length) as $rt |
        (map(select(.mode == "baseline")) | map(.executions_per_sec) | add / length) as $bare |
        (map(select(.mode == "server")) | map(.ttc_us.p99) | add / length) as $prt |
        (map(select(.mode == "baseline")) | map(.ttc_us.p99) | add / length) as $pbare |
        "\($c) mean   runtime \($rt | floor)/s  bare \($bare | floor)/s  ratio \(($rt / $bare) * 1000 | round / 1000)  p99 added \(($prt - $pbare) | round) us"
    ' "$work"/rt-"$c"-*.json "$work"/bare-"$c"-*.json
done

rate=$(jq -n "$peak / 2 | floor")
echo
echo "open loop at half the runtime's peak (${rate}/s), concurrency ${OPEN_CONCURRENCY}: time to completion from the intended start"
printf '%-5s %-8s %10s %10s %10s %10s %s\n' round mode "p50 us" "p99 us" "p99.9 us" "lag p99" errors
for r in $(seq "$ROUNDS"); do
    run "open-rt-$r" --addr "$addr" --rate "$rate" --concurrency "$OPEN_CONCURRENCY" --duration "$DURATION"
    run "open-bare-$r" --baseline --deltas "$DELTAS" --rate "$rate" --concurrency "$OPEN_CONCURRENCY" --duration "$DURATION"
    for mode in rt bare; do
        f="open-$mode-$r"
        printf '%-5s %-8s %10s %10s %10s %10s %s\n' "$r" "$mode" "$(field "$f" .ttc_us.p50)" \
            "$(field "$f" .ttc_us.p99)" "$(field "$f" .ttc_us.p999)" "$(field "$f" .start_lag_us.p99)" \
            "$(jq -c .errors "$work/$f.json")"
    done
done
jq -s -r '
    (map(select(.mode == "server")) | map(.ttc_us.p99) | add / length) as $rt |
    (map(select(.mode == "baseline")) | map(.ttc_us.p99) | add / length) as $bare |
    "mean   p99 runtime \($rt | round) us  bare \($bare | round) us  added \(($rt - $bare) | round) us"
' "$work"/open-rt-*.json "$work"/open-bare-*.json
