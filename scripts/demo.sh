#!/usr/bin/env bash
# demo.sh — the main job on the embedded defaults: the bundled INT8 model on the bundled clip
# (no camera needed). Extra arguments go to `lookout run` (e.g. --tracks-out tracks.jsonl).
# The first run builds lookout: it says so and shows cargo's progress (never a silent
# terminal); later runs start at once.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
target=${CARGO_TARGET_DIR:-target}
if [ ! -x "$target/debug/lookout" ]; then
  echo "demo: first build of lookout and its dependencies (most of it is tract, the inference" >&2
  echo "demo: engine): about 10-15 min on 2 cores, less on more. Later runs start at once." >&2
fi
# Not --quiet: cargo shows its progress bar (or one "Compiling …" line per crate without a
# terminal) for a first build, and one "Finished" line when nothing changed.
cargo build --bin lookout
exec cargo run --quiet --bin lookout -- run "$@"
