#!/usr/bin/env bash
# The INT8 accuracy gate (tests/int8_gate.rs) on any INT8 files: lookout's own detector (tract)
# on every 5th frame of the bundled clip and the photos, letterboxed, against the FP32 model.
# Prints one Markdown row per file (recall of FP32's detections ≥ 0.4, |Δscore| median / p95,
# extra detections, the lowest score ceiling) and each file's score distribution.
#
#   models/recipe/gate_forms.sh FILE[@SIZE] ...     (SIZE: the model's input side, default 416)
#
# Used by make_models.sh to compare calibrations; without arguments it runs the gate on the
# shipped files exactly as `cargo test` does.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
list=""
for f in "$@"; do
  p="${f%@*}"; s=""; [ "$p" != "$f" ] && s="@${f##*@}"
  list="${list:+$list,}$(cd "$(dirname "$p")" && pwd)/$(basename "$p")$s"
done
cd "$REPO"
LOOKOUT_GATE_MODELS="$list" LOOKOUT_GATE_ONLY_REPORT="${LOOKOUT_GATE_ONLY_REPORT:-${list:+1}}" \
  cargo test --quiet --test int8_gate -- --nocapture --test-threads 1 \
  int8_models_keep_fp32_detections 2>&1 | grep -v -E '^(running|test result|$)'
