#!/usr/bin/env bash
# The provider path, measured without the peers: `serve` pinned to one core, with a provider
# of each adapter below at `model-runtime mock-upstream` (20 content chunks, a finish and
# usage, at zero delay); the mock and this tree's load tool share the other core.
#
#   benches/provider.sh [BIN]        # BIN: the server binary (default: this tree's release build)
#
# For each adapter (`openai` chat completions, `openai-responses`, `anthropic`, `gemini`,
# `bedrock`: SigV4-signed, its reply in AWS's binary event stream): executions/s and the
# server's CPU per execution at concurrency 32 (from its /proc times over the run, and
# split into user and system time), the mock's own CPU per execution over the same run and
# the server's as a multiple of it (the issue's goal is put both ways: 35 us, 2.5x the
# mock), and time to first output at concurrency 1. Then bare tonic (benches/ab.sh's floor)
# streaming as many events an execution on the server's core: the gRPC half alone, as a
# multiple of the mock, and the first error-free adapter's CPU as a multiple of it. INSTR=1
# also gives instructions per execution under callgrind (benches/instructions.sh's method).
# Knobs: DUR (10s), CONC (32), SERVER_CPU (0), OTHER_CPU (1), ABILITIES (all five).
# Loopback only; bounded.
set -euo pipefail

cd "$(dirname "$0")/.."
source benches/lib.sh
load_setup "$@"
DUR=${DUR:-10s}
CONC=${CONC:-32}
SERVER_CPU=${SERVER_CPU:-0}
OTHER_CPU=${OTHER_CPU:-1}

start_mock taskset -c "$OTHER_CPU"
mock_pid=${pids[-1]}

# mock_provider NAME ADAPTER BASE_PATH [SETTING...]: provider NAME of ADAPTER at the mock
# (`base_url` http://$mock$BASE_PATH, each SETTING one more line of its table), its model,
# and a policy and an ability both called NAME.
mock_provider() {
    local name=$1 adapter=$2 path=$3
    shift 3
    printf '[providers.%s]\nadapter = "%s"\nbase_url = "http://%s%s"\n' "$name" "$adapter" "$mock" "$path"
    # As many calls at once as the load sends: the server keeps room for a descriptor per
    # call a provider may make, and more than `ulimit -n` leaves would shrink the client
    # connections it serves (its log says so; checked below).
    printf 'max_concurrency = %s\nqueue_capacity = 65536\n' "$CONC"
    printf '%s\n' "$@"
    printf '\n[[providers.%s.models]]\nname = "mock-model"\ncapabilities = ["text", "streaming"]\n\n' "$name"
    printf '[policies.%s]\ntargets = ["%s/mock-model"]\n\n' "$name" "$name"
    printf '[abilities.%s]\npolicy = "%s"\n\n' "$name" "$name"
}

{
    cat <<TOML
[server]
listen = "127.0.0.1:0"
drain_timeout = "2s"
default_deadline = "60s"

[store]
kind = "memory"
max_executions = 20000
retention = "10s"

TOML
    mock_provider openai openai /v1
    mock_provider anthropic anthropic /v1 'api_key_env = "MOCK_ANTHROPIC_KEY"'
    mock_provider responses openai-responses /v1
    mock_provider gemini gemini /v1beta 'api_key_env = "MOCK_ANTHROPIC_KEY"'
    mock_provider bedrock bedrock "" 'region = "us-east-1"' 'aws_credentials = "environment"'
} >"$work/provider.toml"

export AWS_ACCESS_KEY_ID=AKIDMOCK AWS_SECRET_ACCESS_KEY=mock-secret
MOCK_ANTHROPIC_KEY=mock RUST_LOG=info taskset -c "$SERVER_CPU" "$BIN" serve --config "$work/provider.toml" 2>"$work/server.log" &
server=$!
pids+=("$server")
addr=$(server_addr "$work/server.log" "$server")
until_healthy "$CLIENT" "$addr"
# The load tool opens a connection per 64 callers; a server short of descriptors serves
# fewer (it logs how many), and the calls past them would fail.
serving=$(sed -n 's/.*open-file limit.* serving=\([0-9]*\).*/\1/p' "$work/server.log")
if [[ -n $serving ]] && ((serving < (CONC + 63) / 64)); then
    echo "the server serves $serving client connection(s), fewer than CONC=$CONC needs: raise ulimit -n" >&2
    exit 1
fi

tick=$(getconf CLK_TCK)

drive() { # drive ABILITY CONC DURATION: the load tool's report
    taskset -c "$OTHER_CPU" "$CLIENT" bench --addr "$addr" --ability "$1" --concurrency "$2" --duration "$3"
}

printf "%-10s %12s %15s %15s %13s %8s %16s\n" adapter "exec/s c=$CONC" "server cpu/exec" "(user + system)" "mock cpu/exec" "x mock" "first output c=1"
ABILITIES=${ABILITIES:-openai responses anthropic gemini bedrock}
for ability in $ABILITIES; do
    drive "$ability" 4 1s >/dev/null # warm the connections
    read -r user0 system0 < <(cpu_ticks "$server")
    read -r mock_user0 mock_system0 < <(cpu_ticks "$mock_pid")
    report=$(drive "$ability" "$CONC" "$DUR")
    read -r user1 system1 < <(cpu_ticks "$server")
    read -r mock_user1 mock_system1 < <(cpu_ticks "$mock_pid")
    # A run with failed calls still prints its row, but its figures count the failures too:
    # the load tool's errors go beside it, and it is not the bare line's measure (below).
    clean=false
    if grep -q "^  errors *none" <<<"$report"; then
        clean=true
    else
        { echo "$ability: the run had errors; its row counts failed calls too:"; sed -n '/^  errors/,$p' <<<"$report"; } >&2
    fi
    executions=$(awk '/^  executions/ {print $2}' <<<"$report")
    rate=$(awk '/^  executions/ {print $(NF-1)}' <<<"$report")
    # The system part (the socket calls, and on loopback the peer's receive they pay for)
    # is not in callgrind's counts (INSTR=1).
    read -r cpu split server_us < <(awk -v u=$((user1 - user0)) -v s=$((system1 - system0)) -v hz="$tick" -v n="$executions" \
        'BEGIN {f = 1e6 / hz / n; printf "%.0f_us %.0f+%.0f_us %.3f\n", (u + s) * f, u * f, s * f, (u + s) * f}')
    # A mock that used no tick over the run (too short a run) has no ratio: `-`.
    read -r mock_cpu ratio < <(awk -v m=$((mock_user1 + mock_system1 - mock_user0 - mock_system0)) \
        -v s=$((user1 + system1 - user0 - system0)) -v hz="$tick" -v n="$executions" \
        'BEGIN {printf "%.1f_us %s\n", m * 1e6 / hz / n, (m > 0 ? sprintf("%.2fx", s / m) : "-")}')
    first=$(drive "$ability" 1 3s | awk '/^  first output/ {print $3 " us p50"}')
    printf "%-10s %12s %15s %15s %13s %8s %16s\n" "$ability" "$rate" "${cpu/_/ }" "${split/_/ }" "${mock_cpu/_/ }" "$ratio" "$first"
    if [[ -z ${floor_ability:-} ]] && $clean; then
        # The first adapter whose run had no error: its events per execution, its CPU and
        # the mock's are the bare run's measure.
        floor_ability=$ability
        floor_events=$(awk '/^  events/ {e = $2} /^  executions/ {n = $2} END {printf "%.0f", e / n}' <<<"$report")
        floor_mock=${mock_cpu%_us}
        floor_server=$server_us
    fi
done
[[ -n ${floor_ability:-} ]] || { echo "no adapter's run was free of errors: no bare tonic line" >&2; exit 1; }

# The gRPC half alone: the bare tonic server (benches/ab.sh's floor) streaming as many events
# per execution as that adapter's executions had (text deltas, plus the six others an
# execution has), on the server's core, driven by the same load tool at the same concurrency.
# Beside the mock's CPU it puts a floor under the goal: the runtime streams those events and
# also writes the mock's request and reads its reply, so bare tonic plus a provider side as
# cheap as the mock is about as low as it can go.
bare_report=$work/bare.txt
TOKIO_WORKER_THREADS=1 taskset -c "$OTHER_CPU" "$CLIENT" bench --baseline --deltas "$((floor_events - 6))" \
    --concurrency "$CONC" --duration "$DUR" >"$bare_report" &
pin_bare $! "$SERVER_CPU"
wait $!
bare=$(awk '/^  cpu\/execution/ {print $(NF-3)}' "$bare_report")
awk -v bare="${bare:-0}" -v mock="$floor_mock" -v server="$floor_server" -v events="$floor_events" \
    -v conc="$CONC" -v first="$floor_ability" 'BEGIN {
    if (bare <= 0) { print "bare tonic: no CPU figure (its report has no cpu/execution line)"; exit }
    printf "bare tonic (%d events an execution, c=%s): %s us", events, conc, bare
    if (mock > 0) printf " = %.2fx the mock", bare / mock
    printf "; %s costs %.2fx bare tonic\n", first, server / bare
}'

if [[ ${INSTR:-0} == 1 ]]; then
    for ability in $ABILITIES; do
        CONFIG="$work/provider.toml" ABILITY=$ability MOCK_ANTHROPIC_KEY=mock \
            benches/instructions.sh "$BIN" | sed "s/^/$ability: /"
    done
fi
