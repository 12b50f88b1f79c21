#!/usr/bin/env bash
# make_truth.sh — rebuild every ground-truth file in tests/data/truth/ from its recording:
# lookout's FP32 detector on every frame (cached), the linked proposal, the recorded corrections
# (tests/data/truth/<stem>.corrections.txt: one per checked recording), and the contact sheets
# to check it by looking. Work files and sheets go to target/truth/<stem>/ (WORK=... to change).
# Needs: a built lookout (cargo build), ffmpeg, python3 with numpy and PIL.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-$ROOT/target/truth}
PY=${PYTHON:-/usr/bin/python3}
RECS=()
for corr in "$ROOT"/tests/data/truth/*.corrections.txt; do
  stem=$(basename "$corr" .corrections.txt)
  for dir in tests/data/truth tests/data/demo; do
    [ -f "$ROOT/$dir/$stem.mjpeg" ] && RECS+=("$ROOT/$dir/$stem.mjpeg")
  done
done
"$PY" "$ROOT/scripts/truth/truth.py" all --work "$WORK" "${RECS[@]}" "$@"
