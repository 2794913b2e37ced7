# Shared by the load scripts (sourced, not run).

# server_addr LOG PID [TRIES]: waits for the server PID to log its address in LOG and prints
# it; fails, showing the log, if the server exits or says nothing for TRIES tenths of a
# second (default 100).
server_addr() {
    local log=$1 pid=$2 tries=${3:-100} addr
    for _ in $(seq "$tries"); do
        addr=$(sed -n 's/.*model-runtime serving.*addr=\([0-9.:]*\).*/\1/p' "$log" | head -1)
        if [[ -n "$addr" ]]; then
            echo "$addr"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "the server did not report its address; its log:" >&2
    cat "$log" >&2
    return 1
}

# until_healthy BIN ADDR: waits until the server at ADDR says it serves, at most 10 s (then
# the run goes on, and its calls say why).
until_healthy() {
    for _ in $(seq 100); do "$1" health --addr "$2" >/dev/null 2>&1 && break; sleep 0.1; done
}

# postgres_table SCHEMA: a config's [store] keys for a PostgreSQL store in SCHEMA, at
# MODEL_RUNTIME_BENCH_POSTGRES_URL, with a pool of 16.
postgres_table() {
    printf 'kind = "postgres"\nurl_env = "MODEL_RUNTIME_BENCH_POSTGRES_URL"\nschema = "%s"\npool_size = 16\n' "$1"
}

# resident_setup [BIN]: for the resident-memory scripts: BIN (the argument, or this tree's
# release binary), CLIENT (this tree's release binary, built when missing or when BIN is),
# a work directory $work, and on every way out the server $pid killed and $work removed.
resident_setup() {
    BIN=${1:-target/release/model-runtime}
    CLIENT=target/release/model-runtime
    if [[ $# -lt 1 || ! -x "$CLIENT" ]]; then cargo build --release --quiet; fi
    work=$(mktemp -d)
    pid=""
    trap resident_cleanup EXIT INT TERM
}

resident_cleanup() {
    if [[ -n "$pid" ]]; then kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}

# resident_serve CONFIG: starts BIN on CONFIG (its log in $work), setting $pid and $addr.
resident_serve() {
    RUST_LOG=warn,model_runtime=info "$BIN" serve --config "$1" 2>"$work/server.log" &
    pid=$!
    addr=$(server_addr "$work/server.log" "$pid") || exit 1
}

# rss: the server's resident memory in KiB.
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }

# cpu_ticks PID[/task/TID]: user and system clock ticks a process (or one of its threads) has
# used (read past its name, which may hold spaces).
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12, $13 }' "/proc/$1/stat"; }

# start_mock [PREFIX...]: starts "$CLIENT mock-upstream" on a free loopback port (under
# PREFIX, e.g. `taskset -c 1`), its log in $work; adds its pid to `pids` and sets $mock to its
# address. Fails, showing the log, if it does not start.
start_mock() {
    "$@" "$CLIENT" mock-upstream --listen 127.0.0.1:0 >"$work/mock.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 50); do grep -q "addr=" "$work/mock.log" && break; sleep 0.1; done
    mock=$(sed -n 's/.*addr=\([0-9.:]*\).*/\1/p' "$work/mock.log")
    [[ -n "$mock" ]] || { echo "the mock did not start" >&2; cat "$work/mock.log" >&2; return 1; }
}

# load_setup [BIN]: for the scripts that drive a server with the load tool: BIN (the
# argument, or this tree's release binary) and CLIENT (this tree's, built when either is
# missing), a work directory $work, and `pids`, every one of which is stopped (and $work
# removed) on every way out.
load_setup() {
    BIN=${1:-target/release/model-runtime}
    CLIENT=target/release/model-runtime
    [[ -x "$CLIENT" && -x "$BIN" ]] || cargo build --release --quiet
    work=$(mktemp -d)
    pids=()
    trap load_cleanup EXIT INT TERM
}

load_cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}

# pin_bare PID CORE: moves the bare tonic threads of the load tool PID to CORE as they
# appear, until it exits. Each thread is moved once, and the threads are read with builtins:
# a look forks only its `sleep`, every 10 ms until the first thread is moved, every 200 ms
# after, so the run it watches is not disturbed.
pin_bare() {
    local task comm pause=0.01
    local -A moved=()
    while kill -0 "$1" 2>/dev/null; do
        for task in /proc/"$1"/task/*; do
            [[ -z ${moved[$task]:-} ]] || continue
            comm=""
            { read -r comm <"$task/comm"; } 2>/dev/null || true
            if [[ $comm == bare-tonic* ]]; then
                taskset -p -c "$2" "${task##*/}" >/dev/null 2>&1 || true
                moved[$task]=1
                pause=0.2
            fi
        done
        sleep "$pause"
    done
}
