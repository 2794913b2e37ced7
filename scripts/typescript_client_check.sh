#!/usr/bin/env bash
# The TypeScript client (clients/typescript) as the npm workspace builds it: installs the
# locked packages, fails when its generated wire types fall behind proto/ (buf.gen.yaml, the
# protobuf-es plugin), compiles it, and runs its check against the real binary (a stream
# resumed across a killed and restarted server; gRPC-Web on the ingress). Used by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${1:-target/debug/model-runtime}
npm ci --no-audit --no-fund --loglevel=error
npx buf generate
if ! git diff --quiet -- clients/typescript/src/gen; then
  echo "clients/typescript's generated code is behind proto/: run 'npx buf generate'" >&2
  git diff --stat -- clients/typescript/src/gen >&2
  exit 1
fi
npx tsc -p clients/typescript
timeout 120 node clients/typescript/dist/check.js "$binary"
