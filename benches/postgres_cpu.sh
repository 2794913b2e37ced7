#!/usr/bin/env bash
# Where one PostgreSQL replica's time goes (issue 45): N executions of the scripted echo of a
# 20-word prompt at concurrency CONC (64), after WARM of warm-up, on benches/bench.toml with a
# PostgreSQL store. The store holds 20 000 executions: with the defaults it fills 15 000 into
# the run, and lets executions go as it creates from then on. Per execution: the CPU of the
# server (and of its store thread alone), of every `postgres` process on this machine (the
# database must be this machine's, and nothing else should use it), user and system apart, and
# the machine's idle time; executions/s; and the transactions that wrote per execution (each
# execution's create and append are each a row of a statement that commits once for all its
# rows). A larger CONC makes larger batches, so runs at two concurrencies split a cost between
# what each execution pays and what each commit pays. When the database has the
# pg_stat_statements extension (preloaded, and created in the URL's database), also each
# statement's executor time per execution and its calls, by its `/* model-runtime: KIND */`
# tag. PostgreSQL is the one at MODEL_RUNTIME_BENCH_POSTGRES_URL (default: this machine's), in
# a fresh schema dropped after. IDLE=1 (needs `perf`, the right to trace the scheduler, and
# python3) also records every CPU's scheduler switches for 2 s from a second into the run
# (give N for a run of 4 s or more) and says where the idle time sits (benches/idle_split.py):
# both cores at once, or one core while the other runs the server, PostgreSQL or the load
# tool.
#
#   benches/postgres_cpu.sh [BIN]        N=30000 WARM=5000 CONC=64 IDLE=0
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh

load_setup "$@"
N=${N:-30000}
WARM=${WARM:-5000}
CONC=${CONC:-64}
export MODEL_RUNTIME_BENCH_POSTGRES_URL=${MODEL_RUNTIME_BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
PROMPT="one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"
command -v psql >/dev/null || { echo "psql is needed to read the database" >&2; exit 1; }
IDLE=${IDLE:-0}
if [[ $IDLE == 1 ]]; then
    for tool in perf python3; do
        command -v "$tool" >/dev/null || { echo "IDLE=1 needs $tool" >&2; exit 1; }
    done
fi
sql() { psql "$MODEL_RUNTIME_BENCH_POSTGRES_URL" -tAqc "$1"; }

schema="mr_cpu_$(date +%s)"
cleanup() {
    load_cleanup
    sql "DROP SCHEMA IF EXISTS \"$schema\" CASCADE" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
awk -v table="$(postgres_table "$schema")" '
    /^kind = "memory"$/ && !done { print table; done = 1; next }
    { print }' benches/bench.toml > "$work/postgres.toml"
RUST_LOG=warn,model_runtime=info "$BIN" serve --config "$work/postgres.toml" 2>"$work/server.log" &
server=$!
pids+=("$server")
addr=$(server_addr "$work/server.log" "$server") || exit 1
until_healthy "$CLIENT" "$addr"
"$CLIENT" bench --addr "$addr" --concurrency "$CONC" --executions "$WARM" --prompt "$PROMPT" >"$work/bench.txt" ||
    { cat "$work/bench.txt" >&2; exit 1; }

# CPU ticks: the server's and its store thread's, every PostgreSQL process's user and system
# time with its reaped children's (so a backend or worker that ends within the run still
# counts, through the postmaster), and the machine's idle.
ticks() { cpu_ticks "$1" | awk '{ print $1 + $2 }'; } # ticks PID[/task/TID]: user + system
store_thread=$(awk '$2 == "postgres-store" { print $1 }' < <(ps -T -o spid=,comm= -p "$server"))
[[ -n $store_thread ]] || { echo "the server has no postgres-store thread" >&2; exit 1; }
postgres_ticks() { # "USER SYSTEM"
    local user=0 system=0 pid pids times
    pids=$(pgrep -x postgres) || { echo "no postgres process on this machine" >&2; exit 1; }
    for pid in $pids; do
        times=$(awk '{ print $14 + $16, $15 + $17 }' "/proc/$pid/stat" 2>/dev/null) || continue
        user=$((user + ${times% *})) system=$((system + ${times#* }))
    done
    echo "$user $system"
}
idle_ticks() { awk '/^cpu / { print $5 + $6 }' /proc/stat; }
# The cluster's transactions that wrote, counted by their ids: each takes one when it first
# writes, the statements' reports need no time to arrive (pg_stat_database's counts can
# wait ten seconds on an idle backend), and this query takes the next id itself.
write_id() { sql "SELECT pg_current_xact_id()"; }
statements=false
if sql "SELECT pg_stat_statements_reset()" >/dev/null 2>&1; then
    statements=true
else
    echo "(no pg_stat_statements in that database: no time by statement)"
fi

x0=$(write_id)
s0=$(ticks "$server"); t0s=$(ticks "$server/task/$store_thread"); p0=$(postgres_ticks); i0=$(idle_ticks)
read -r pu0 ps0 <<<"$p0"
t0=$(date +%s.%N)
"$CLIENT" bench --addr "$addr" --concurrency "$CONC" --executions "$N" --prompt "$PROMPT" >"$work/bench.txt" &
client=$!
pids+=("$client")
if [[ $IDLE == 1 ]]; then
    # The threads' ids are read while both processes run, to name them in the switches.
    sleep 1
    ls "/proc/$server/task" "/proc/$client/task" >"$work/threads.txt" ||
        { echo "the run ended within a second: give IDLE=1 a larger N" >&2; exit 1; }
    perf record -a -e sched:sched_switch -o "$work/sched.data" -- sleep 2 >"$work/perf.log" 2>&1 &
    tracing=$!
    pids+=("$tracing")
fi
wait "$client" || { cat "$work/bench.txt" >&2; exit 1; }
t1=$(date +%s.%N)
s1=$(ticks "$server"); t1s=$(ticks "$server/task/$store_thread"); p1=$(postgres_ticks); i1=$(idle_ticks)
read -r pu1 ps1 <<<"$p1"
x1=$(write_id)
grep -q "errors *none" "$work/bench.txt" || { cat "$work/bench.txt" >&2; exit 1; }

# The writing transactions counted are the whole cluster's: the server's few others (its
# lease's renewals, letting executions go) and autovacuum's among them.
awk -v n="$N" -v tick="$(getconf CLK_TCK)" -v s=$((s1 - s0)) -v st=$((t1s - t0s)) \
    -v pu=$((pu1 - pu0)) -v ps=$((ps1 - ps0)) -v i=$((i1 - i0)) -v c=$((x1 - x0 - 1)) \
    -v t0="$t0" -v t1="$t1" 'BEGIN {
        us = 1e6 / tick / n
        printf "executions/s %.0f\n", n / (t1 - t0)
        printf "per execution: server %.1f us (its store thread %.1f), PostgreSQL %.1f us (%.1f user + %.1f system), idle %.1f us\n",
            s * us, st * us, (pu + ps) * us, pu * us, ps * us, i * us
        printf "writing transactions per execution %.3f (a create and an append each: %.1f executions a statement)\n",
            c / n, (c > 0 ? 2 * n / c : 0)
    }'
if $statements; then
    echo "executor time per execution by statement (pg_stat_statements):"
    sql "SELECT coalesce(substring(query from '/\* model-runtime: ([a-z-]+) \*/'), 'other'),
                sum(calls), round((sum(total_exec_time) * 1000 / $N)::numeric, 2)
         FROM pg_stat_statements GROUP BY 1 ORDER BY 3 DESC LIMIT 12" |
        awk -F'|' '{ printf "  %-16s %8.2f us  (%d calls)\n", $1, $3, $2 }'
fi
if [[ $IDLE == 1 ]]; then
    wait "$tracing" || { echo "perf could not record the scheduler's switches:" >&2; cat "$work/perf.log" >&2; exit 1; }
    awk -v t0="$t0" -v t1="$t1" 'BEGIN { if (t1 - t0 < 3.5) print "(the run lasted under 3.5 s: the record may hold its end)" }'
    # `ls` of two directories: each one's name line, then its entries.
    names=$(awk -v server="/proc/$server/task:" '
        /:$/ { name = ($0 == server) ? "server" : "load-tool"; next }
        NF { ids[name] = ids[name] (ids[name] == "" ? "" : ",") $1 }
        END { print "server=" ids["server"], "load-tool=" ids["load-tool"] }' "$work/threads.txt")
    perf script -i "$work/sched.data" -F cpu,time,event,trace >"$work/sched.txt" 2>>"$work/perf.log" ||
        { cat "$work/perf.log" >&2; exit 1; }
    # shellcheck disable=SC2086 # two NAME=TIDS words
    python3 benches/idle_split.py "$work/sched.txt" $names
fi
