#!/usr/bin/env bash
# Issue 45's goals in one run, on one binary: each goal's figure beside the goal, taken by the
# script that measures it (instructions.sh, ab.sh, provider.sh, stores.sh), whose whole
# reports are kept in OUT. The added time to first output at c=1 over the mock alone is the
# peer harness's (../shared/peer-harness/run_side.sh, which runs the mock alone beside the
# runtime); this script gives the runtime's own first output at c=1, not the difference.
#
#   benches/goals.sh [BIN]      N=8000 DUR=5s ROUNDS=3 OUT=(a new directory, kept)
#
# About 12 minutes on a two-core VM. Needs what the scripts need: valgrind, jq, and
# PostgreSQL and Redis where stores.sh finds them (MODEL_RUNTIME_BENCH_POSTGRES_URL and
# MODEL_RUNTIME_BENCH_REDIS_URL); a script that fails leaves its goals unmeasured, says so,
# and the others still run. Loopback only; every run bounded.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -ge 1 ]]; then
    BIN=$1
else
    BIN=target/release/model-runtime
    [[ -x "$BIN" ]] || cargo build --release --quiet
fi
[[ -x "$BIN" ]] || { echo "no server binary at $BIN" >&2; exit 2; }
BIN=$(realpath "$BIN")
N=${N:-8000}
DUR=${DUR:-5s}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-$(mktemp -d -t goals.XXXXXX)}
mkdir -p "$OUT"

# measure NAME COMMAND...: runs COMMAND, its report in $OUT/NAME.txt and on stderr as it
# goes; whether it succeeded.
measure() {
    local name=$1 status
    shift
    echo "== $name: $*" >&2
    "$@" 2>&1 | tee "$OUT/$name.txt" >&2
    status=${PIPESTATUS[0]}
    ((status == 0)) || echo "!! $name failed: its goals are not measured (report: $OUT/$name.txt)" >&2
    return "$status"
}

ok_instr=true ok_ab=true ok_provider=true ok_stores=true
N=$N measure instructions benches/instructions.sh "$BIN" || ok_instr=false
N=$N measure instructions-bare benches/instructions.sh --bare || ok_instr=false
DURATION=3s ROUNDS=4 LEVELS=64 measure ab benches/ab.sh "$BIN" "$BIN" || ok_ab=false
ABILITIES="openai responses anthropic gemini bedrock" CONC=32 SERVER_CPU=0 OTHER_CPU=1 DUR=$DUR \
    measure provider benches/provider.sh "$BIN" || ok_provider=false
ROUNDS=$ROUNDS STORES="memory postgres memory+redis" DUR=$DUR \
    measure stores benches/stores.sh "$BIN" || ok_stores=false

# met FIGURE OP LIMIT: yes or no; `?` for a figure a report did not give.
met() {
    awk -v f="$1" -v l="$3" -v op="$2" 'BEGIN {
        if (f !~ /^[0-9.]+$/) print "?"; else print ((op == "<=" ? f + 0 <= l + 0 : f + 0 >= l + 0) ? "yes" : "no") }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else printf "?" }'; }
row() { printf '| %s | %s | %s |\n' "$@"; }

{
    echo "Issue 45's goals, measured $(date -u +%Y-%m-%d) on $BIN (sha256 $(sha256sum "$BIN" | cut -c1-12)), by the scripts of this tree at $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "(\`N=$N DUR=$DUR ROUNDS=$ROUNDS benches/goals.sh\`; reports in $OUT)"
    echo
    row goal figure met
    row --- --- ---

    if $ok_instr; then
        ours=$(awk '/ instructions per execution$/ { v = $(NF-3) } END { print v }' "$OUT/instructions.txt")
        bare=$(awk '/^bare tonic server: / { print $(NF-3) }' "$OUT/instructions-bare.txt")
        x=$(ratio "$ours" "$bare")
        row "hot path <= 1.08x bare tonic's instructions" "$ours against $bare: **${x}x**" "$(met "$x" "<=" 1.08)"
    else
        row "hot path <= 1.08x bare tonic's instructions" "not measured" -
    fi

    if $ok_ab; then
        read -r a b bare < <(awk '/^64 mean (a|b|bare):/ { sub("/s,", "", $4); v[$3] = $4 }
            END { print v["a:"], v["b:"], v["bare:"] }' "$OUT/ab.txt")
        xa=$(ratio "$a" "$bare") xb=$(ratio "$b" "$bare")
        row ">= 0.85x bare tonic's rate at c=64" \
            "$a and $b against $bare executions/s (the binary as A and as B): **${xa}x and ${xb}x**" \
            "$(met "$xa" ">=" 0.85) and $(met "$xb" ">=" 0.85)"
    else
        row ">= 0.85x bare tonic's rate at c=64" "not measured" -
    fi

    # An adapter's row in provider.sh's report: NAME RATE CPU us USER+SYSTEM us MOCK us
    # MULTIPLE FIRST us p50.
    cpu=""
    if $ok_provider; then
        read -r cpu mock multiple first < <(awk '$1 == "openai" && $4 == "us" { print $3, $7, $9, $10 }' "$OUT/provider.txt") || true
    fi
    if [[ -n $cpu ]]; then
        floor=$(sed -n 's/^bare tonic (.*): .* = \([0-9.]*x\) the mock.*/\1/p' "$OUT/provider.txt")
        row "\`openai\` <= 35 us a streamed execution" "$cpu us (the mock $mock us)" "$(met "$cpu" "<=" 35)"
        row "\`openai\` <= 2.5x the mock's own cost" "**$multiple** (bare tonic streaming as many events: ${floor:-?} the mock)" "$(met "${multiple%x}" "<=" 2.5)"
        adapters=$(awk -v base="$cpu" 'base > 0 && $4 == "us" && $1 != "openai" && $1 != "adapter" {
            printf "%s%s %.2fx", sep, $1, $3 / base; sep = ", "; if ($3 / base > worst) worst = $3 / base }
            END { printf "|%.3f", worst }' "$OUT/provider.txt")
        if [[ -n ${adapters%|*} ]]; then
            row "every adapter within 1.3x of \`openai\`" "${adapters%|*}" "$(met "${adapters##*|}" "<=" 1.3)"
        else
            row "every adapter within 1.3x of \`openai\`" "only \`openai\` ran" -
        fi
        row "first output at c=1 (the added time over the mock alone: the peer harness)" "\`openai\` $first us p50 through the runtime" -
    else
        row "the provider path (35 us, 2.5x the mock, adapters within 1.3x)" "not measured (no \`openai\` row)" -
    fi

    if $ok_stores; then
        for store in memory+redis postgres; do
            # "  STORE  RATIO... mean MEANx": the mean, then the rounds' ratios.
            line=$(awk -v s="$store" '$1 == s && $(NF-1) == "mean" {
                r = $2; for (i = 3; i < NF - 1; i++) r = r ", " $i; print $NF "|" r }' "$OUT/stores.txt")
            mean=${line%%|*} rounds=${line#*|}
            if [[ $store == postgres ]]; then
                goal="one PostgreSQL replica >= 0.4x the memory store" limit=0.4
            else
                goal="the Redis limiter >= 0.7x the local gate" limit=0.7
            fi
            row "$goal" "mean **$mean** over $ROUNDS rounds ($rounds)" "$(met "${mean%x}" ">=" "$limit")"
        done
    else
        row "the Redis limiter >= 0.7x, one PostgreSQL replica >= 0.4x" "not measured" -
    fi
} | tee "$OUT/goals.md"
