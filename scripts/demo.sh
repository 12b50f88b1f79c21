#!/usr/bin/env bash
# demo.sh — the main job on the embedded defaults: the bundled INT8 model on the bundled clip
# (no camera needed). Extra arguments go to `lookout run` (e.g. --tracks-out tracks.jsonl).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec cargo run --quiet -- run "$@"
