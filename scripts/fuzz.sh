#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ (cargo-fuzz, libFuzzer) for a bounded time; exits non-zero
# on a crash, after running the other targets. Used by .ci/run; usable by hand:
#   scripts/fuzz.sh                    # each target 60 s (LOOKOUT_FUZZ_SECONDS to change)
#   scripts/fuzz.sh decode y4m         # only these targets
# Needs the nightly toolchain (cargo fuzz builds with -Z flags). Without one it says so
# loudly and skips (exit 0), unless LOOKOUT_FUZZ_REQUIRED=1, which makes that a failure.
# Installs cargo-fuzz $CARGO_FUZZ_VERSION (pinned) if it is missing.
#
# Built with `--sanitizer none`: the targets drive safe Rust (what a fuzzer finds there is a
# panic: an index out of bounds, an overflow, a failed assertion), and AddressSanitizer would
# instrument tract and the image codecs too, for a much longer cold build and ~2x slower
# executions. lookout itself is built with overflow checks and debug assertions
# (fuzz/Cargo.toml). Coverage instrumentation (what libFuzzer needs) stays on.
#
# Environment:
#   LOOKOUT_FUZZ_SECONDS      seconds per target (default 60)
#   LOOKOUT_FUZZ_TARGET_DIR   cargo target dir of the fuzz build (default $CARGO_TARGET_DIR
#                             or fuzz/target); the working corpora live in it, under corpus/
#   LOOKOUT_FUZZ_BUILD_CAP    seconds the build may take (default 0 = no cap; .ci/run: 900)
#   LOOKOUT_FUZZ_REQUIRED=1   a missing nightly toolchain (or a build past its cap) fails
#                             instead of skipping
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CARGO_FUZZ_VERSION=0.13.2
SECS=${LOOKOUT_FUZZ_SECONDS:-60}
TDIR=${LOOKOUT_FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:-$ROOT/fuzz/target}}
ALL_TARGETS=(mjpeg mjpeg_stream y4m config frame_convert decode mqtt_incoming)
if [ $# -gt 0 ]; then TARGETS=("$@"); else TARGETS=("${ALL_TARGETS[@]}"); fi
t_start=$(date +%s)

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
  echo "!!! FUZZING SKIPPED: no nightly Rust toolchain (\`rustup toolchain list\` shows none)."
  echo "!!! cargo fuzz needs one: rustup toolchain install nightly --profile minimal"
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
  [ "${LOOKOUT_FUZZ_REQUIRED:-0}" = 1 ] && exit 1
  exit 0
fi
echo "nightly: $(rustc +nightly --version)"

if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
  echo "installing cargo-fuzz $CARGO_FUZZ_VERSION (found: $(cargo fuzz --version 2>/dev/null || echo none))"
  CARGO_TARGET_DIR="$TDIR/cargo-install" cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

FLAGS=(--release --sanitizer none --target-dir "$TDIR")
echo "building ${#TARGETS[@]} fuzz target(s) into $TDIR"
t_build=$(date +%s)
# A cold build (nightly; tract instrumented but unoptimised, fuzz/Cargo.toml) took ≈18 min on
# a loaded 2-core machine. LOOKOUT_FUZZ_BUILD_CAP (seconds) bounds it: past the cap the build stops, what it compiled stays cached in $TDIR for
# the next run, and fuzzing is skipped this time, loudly (a failure with LOOKOUT_FUZZ_REQUIRED=1).
CAP=${LOOKOUT_FUZZ_BUILD_CAP:-0}
for t in "${TARGETS[@]}"; do
  left=0
  if [ "$CAP" -gt 0 ]; then
    left=$(( CAP - ($(date +%s) - t_build) ))
    [ "$left" -lt 1 ] && left=1
  fi
  rc=0
  timeout "$left" cargo +nightly fuzz build "${FLAGS[@]}" "$t" || rc=$?
  if [ "$rc" != 0 ]; then
    if [ "$rc" = 124 ]; then
      echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
      echo "!!! FUZZING SKIPPED THIS RUN: the fuzz build passed its ${CAP}s cap (cold cache)."
      echo "!!! What it compiled is kept in $TDIR; the next run continues from there."
      echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
      [ "${LOOKOUT_FUZZ_REQUIRED:-0}" = 1 ] && exit 1
      exit 0
    fi
    exit "$rc"
  fi
done
build_s=$(( $(date +%s) - t_build ))
echo "fuzz build: ${build_s}s"

failed=()
summary=()
for t in "${TARGETS[@]}"; do
  # New inputs go to the working corpus (kept in the target dir between runs); the committed
  # seeds in fuzz/corpus/$t are read only.
  work="$TDIR/corpus/$t"
  mkdir -p "$work" "$ROOT/fuzz/artifacts/$t"
  log="$TDIR/fuzz-$t.log"
  echo "── $t: ${SECS}s"
  if cargo +nightly fuzz run "${FLAGS[@]}" "$t" "$work" "fuzz/corpus/$t" -- \
       -max_total_time="$SECS" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$ROOT/fuzz/artifacts/$t/" >"$log" 2>&1; then
    status=ok
  else
    status=CRASH
    failed+=("$t")
    tail -60 "$log"
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  line="$(printf '%-14s %-6s %12s executions  coverage %6s  (log %s)' "$t" "$status" "${execs:-?}" "${cov:-?}" "$log")"
  echo "$line"
  summary+=("$line")
done

echo
echo "fuzz summary (${SECS}s per target, build ${build_s}s, total $(( $(date +%s) - t_start ))s):"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "!!! fuzz targets that crashed: ${failed[*]} — the inputs are in fuzz/artifacts/<target>/;"
  echo "!!! reproduce with: cargo +nightly fuzz run ${FLAGS[*]} TARGET fuzz/artifacts/TARGET/crash-..."
  exit 1
fi
