#!/usr/bin/env bash
# test.sh — the test suite on this machine (no camera, network or Pi needed).
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=1 bash scripts/setup.sh
exec cargo test --all-targets --no-fail-fast "$@"
