#!/usr/bin/env bash
# input-sizes.sh — `lookout bench --sweep input-size` on every ground-truth recording in
# tests/data/truth/ (and the bundled clip), then the sizes' figures summed over all of them.
#
#   scripts/input-sizes.sh [int8|fp32]      (default int8; env LOOKOUT=path to a built
#                                            lookout binary, OUT=directory for the JSON reports)
#
# Without LOOKOUT it builds a release binary first (the dev build's unoptimised int8 ops take a
# quarter of an hour per recording; a release build under a minute). Prints one table per
# recording, then the summed table (scripts/truth/sum_input_sizes.py): recall by the true
# object's height, false boxes per frame, events per object, missed objects and false events
# at the fixed interval and adaptive, model time relative to the model file's size (the
# lowest and highest of the recordings' interleaved timings).
set -euo pipefail
cd "$(dirname "$0")/.."
prec=${1:-int8}
OUT=${OUT:-$(mktemp -d /tmp/lookout-sizes.XXXXXX)}
mkdir -p "$OUT"
if [ -z "${LOOKOUT:-}" ]; then
  cargo build --release --quiet
  LOOKOUT=target/release/lookout
fi
for gt in tests/data/truth/*.gt.txt; do
  name=$(basename "$gt" .gt.txt)
  src=tests/data/truth/$name.mjpeg
  [ -f "$src" ] || src=tests/data/demo/$name.mjpeg
  echo "== $name ($prec)" >&2
  "$LOOKOUT" bench --sweep input-size --precision "$prec" --source "$src" --truth "$gt" --json \
    > "$OUT/$name-$prec.json" 2> "$OUT/$name-$prec.log"
done
python3 scripts/truth/sum_input_sizes.py "$OUT"/*-"$prec".json
echo "(reports in $OUT)" >&2
