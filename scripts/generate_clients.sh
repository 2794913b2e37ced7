#!/usr/bin/env bash
# Regenerates the Python client's wire types from proto/ (clients/python/src/model_runtime/):
# grpcio-tools' protoc (from PyPI, no system protoc) writes the messages and the stubs. The
# generated files are committed, so installing the client needs no generator;
# scripts/foreign_client_check.sh (in CI) fails when they fall behind proto/. Run after
# changing proto/.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore 'grpcio-tools==1.85.1'
out=clients/python/src
rm -rf "$out/model_runtime"
python3 -m grpc_tools.protoc -I proto --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
  proto/model_runtime/v1/*.proto
touch "$out/model_runtime/__init__.py" "$out/model_runtime/v1/__init__.py"
