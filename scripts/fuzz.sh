#!/usr/bin/env bash
# Fuzzes request decoding and validation (`request`), the SSE parser with each adapter's
# decoding (`stream`), AWS's event-stream parser with Bedrock's decoding (`eventstream`), the
# file store's journal reader (`journal`), the Unix socket's `:authority` shim (`authority`)
# and the provider HTTP/1.1
# client's reading of a response: head, framing, connection reuse (`h1`), each for a bounded
# time; not part of CI. Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
#
#   scripts/fuzz.sh             # each target for 60 s
#   SECONDS_EACH=600 scripts/fuzz.sh request
#
# A crash leaves its input under fuzz/artifacts/TARGET/. Copy it to fuzz/regressions/TARGET/
# and commit it with the fix: `cargo test fuzz_regressions` (and `-p model-runtime-h1` for h1)
# replays every file there.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${SECONDS_EACH:-60}
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(request stream eventstream journal authority h1)
for target in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$target"
    # Seed from the regressions, so known shapes are where the search starts.
    cp -n fuzz/regressions/"$target"/* "fuzz/corpus/$target/" 2>/dev/null || true
    echo "== $target for ${SECONDS_EACH}s"
    cargo +nightly fuzz run "$target" "fuzz/corpus/$target" -- \
        -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=10
done
