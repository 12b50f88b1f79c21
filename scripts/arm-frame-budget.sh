#!/usr/bin/env bash
# arm-frame-budget.sh - what one frame of the whole daemon costs, split by pipeline stage
# (capture, JPEG luma decode + gray plane, tracker + events, detector preprocessing, model,
# decode + NMS, everything else), on the Pi 4 and Pi 5 CPU models of the ARM instruction proxy
# (armcost: qemu-user + a counting TCG plugin), at a fixed detection interval N = 5 and with
# the adaptive schedule. Prints one Markdown table per board (per frame at N = 5, per frame
# adaptive, per detection, per frame with no detection), the frames and detections measured,
# and a 15 fps estimate of the share of one core. Guest instructions, not time. A measurement
# script, not a test.
#
# Usage: scripts/arm-frame-budget.sh [options]
#   --boards LIST       comma-separated boards, pi4 and/or pi5 (default pi4,pi5)
#   --schedules LIST    comma-separated, fixed (N = 5) and/or adaptive (default fixed,adaptive)
#   --out DIR           runs, tables and the binary's copy go here (default: a new directory
#                       from mktemp -d, kept and named at the end). Runs that finished with the
#                       same binary and settings are reused, so an interrupted measurement resumes
#   --reuse DIR         run nothing: split the runs already in DIR (a --out DIR, or its runs/)
#   --period S          seconds between the paced frames (default 2.5)
#   --frames BIG,SMALL  frames of the two runs of each pair (default 200,40)
#   --jobs N            paced runs at once (default 2; a paced run keeps about one core busy
#                       while it detects, and idles between frames)
#   --fresh             measure again even the runs that finished
#   -h, --help          this text
#
# Needs: armcost.sh (the instruction counter, with its plugin: its build-plugin.sh installs
# qemu-user and builds it) on PATH or as ARMCOST=path/to/armcost.sh; python3 (standard library
# only), nm (binutils), mkfifo. Without LOOKOUT_ARM_BIN: cargo and the aarch64 cross linker
# (docs/development.md).
#
# Time: about 11 minutes for one board and both schedules with the default --jobs 2, about 22
# for both boards (twice that with --jobs 1): each paced 200-frame run takes ~8.6 minutes (199
# periods of 2.5 s plus start-up), each 40-frame run ~2, each unpaced no-detection run ~15 s.
# Splitting the runs takes seconds.
#
# Method. Each measured quantity is the difference of a 200-frame and a 40-frame run of
# `lookout bench --threads 1 --precision int8 --json`: frames 41-200 of the bundled clip, without
# start-up, model loading and shutdown.
# - Paced runs (fixed, adaptive). Under emulation one detection takes seconds of wall time, and a
#   file played as fast as possible asks for detections while the detector is busy; lookout skips
#   those (never queues them), so such a run measures almost no detections. Here the clip goes
#   through a FIFO (budget/feeder.py), one frame every PERIOD seconds, so the detector is idle
#   whenever the schedule asks. The FIFO is read by the same MJPEG reader as a file. The two
#   wall-clock settings, pipeline.idle_detect_interval and stats_interval (10 s by default), are
#   scaled by PERIOD / 0.1 s in a generated configuration so that they fall on the same frames as
#   at the clip's 10 fps.
# - The no-detection pair: the bundled clip unpaced with --detect-every 1000 (the first frame's
#   detection is still running when the runs end, so nothing is tracked; split.py warns if not).
#   It gives the per-frame floor, the tracker's JPEG luma share of the shared JPEG code and
#   libc's per-frame level.
# - budget/split.py attributes every executed block to its function and the functions to stages
#   by name (rules in its header; generic code by its callers in the binary's call graph).
#
# Runs: DIR/runs/BOARD_nodet_F (unpaced, no detection), BOARD_fixedP_F and BOARD_adaptP_F
# (paced), each with armcost's summary.txt, tbs.txt and command.txt, lookout's stdout.json and
# stderr.txt, cmd.txt and, for paced runs, feeder.log. Tables: DIR/budget-BOARD.md; every
# function's stage and count: DIR/functions-BOARD.tsv.
#
# Environment:
#   LOOKOUT_ARM_BIN  lookout aarch64 binary with its symbol table (bench profile, not stripped).
#                    Default: built first with `CARGO_PROFILE_BENCH_STRIP=false cargo build
#                    --profile bench --target aarch64-unknown-linux-gnu --bin lookout` into
#                    ${CARGO_TARGET_DIR:-target}/aarch64-unknown-linux-gnu/release/lookout.
#                    Measured runs use a copy in DIR/bin/, which --reuse reads the symbols from.
#   ARMCOST          armcost.sh (default: the one on PATH)
#   NM               nm for the symbol tables (default nm)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit "${1:-0}"; }

BOARDS=pi4,pi5 SCHEDULES=fixed,adaptive OUT='' REUSE='' PERIOD=2.5 FRAMES=200,40 JOBS=2 FRESH=0
while [ $# -gt 0 ]; do
  case "$1" in
    --boards) BOARDS=$2; shift 2 ;;
    --schedules) SCHEDULES=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --reuse) REUSE=$2; shift 2 ;;
    --period) PERIOD=$2; shift 2 ;;
    --frames) FRAMES=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --fresh) FRESH=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "arm-frame-budget: unknown option $1" >&2; usage 2 >&2 ;;
  esac
done

T_START=$SECONDS
say() { echo "== [$(date +%T) +$((SECONDS - T_START))s] $*" >&2; }
die() { echo "arm-frame-budget: $*" >&2; exit 1; }

BIG=${FRAMES%,*} SMALL=${FRAMES#*,}
[[ $BIG =~ ^[0-9]+$ && $SMALL =~ ^[0-9]+$ && $BIG -gt $SMALL && $SMALL -gt 0 ]] \
  || die "--frames $FRAMES: want BIG,SMALL with BIG > SMALL > 0"
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "--jobs $JOBS: want a positive number"
awk -v p="$PERIOD" 'BEGIN { exit !(p + 0 > 0 && p + 0 <= 36) }' || die "--period $PERIOD: want 0 < S <= 36"
for b in ${BOARDS//,/ }; do case $b in pi4|pi5) ;; *) die "board $b: only pi4 and pi5" ;; esac; done
for s in ${SCHEDULES//,/ }; do case $s in fixed|adaptive) ;; *) die "schedule $s: only fixed and adaptive" ;; esac; done
python3 -c 'import sys; sys.exit(sys.version_info < (3, 6))' || die "python3 (3.6 or later) is needed"
SPLIT=$HERE/budget/split.py FEEDER=$HERE/budget/feeder.py
CLIP=$REPO/tests/data/demo/vtest-640x480-10fps.mjpeg

tag() { case $1 in fixed) echo fixedP ;; adaptive) echo adaptP ;; esac; }

# ---------------------------------------------------------------- where the runs are
if [ -n "$REUSE" ]; then
  [ -d "$REUSE" ] || die "--reuse $REUSE: no such directory"
  RUNS=$(cd "$REUSE" && pwd); [ -d "$RUNS/runs" ] && RUNS=$RUNS/runs
  [ -n "$OUT" ] && { mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd); }
else
  if [ -z "$OUT" ]; then OUT=$(mktemp -d -t lookout-frame-budget.XXXXXX); fi
  mkdir -p "$OUT/runs" "$OUT/bin"; OUT=$(cd "$OUT" && pwd); RUNS=$OUT/runs
fi

# ---------------------------------------------------------------- measuring
if [ -z "$REUSE" ]; then
  ARMCOST=${ARMCOST:-$(command -v armcost.sh || true)}
  if [ -z "$ARMCOST" ] || [ ! -x "$ARMCOST" ]; then die "armcost.sh (the instruction counter: qemu-user with a counting plugin) not found: put it on PATH or set ARMCOST=path/to/armcost.sh"; fi
  command -v mkfifo >/dev/null || die "mkfifo (coreutils) is needed"
  [ -f "$CLIP" ] || die "no $CLIP"

  if [ -z "${LOOKOUT_ARM_BIN:-}" ]; then
    LOOKOUT_ARM_BIN=${CARGO_TARGET_DIR:-$REPO/target}/aarch64-unknown-linux-gnu/release/lookout
    say "lookout: CARGO_PROFILE_BENCH_STRIP=false cargo build --profile bench --target aarch64-unknown-linux-gnu --bin lookout"
    (cd "$REPO" && CARGO_PROFILE_BENCH_STRIP=false nice -n 19 cargo build --profile bench \
       --target aarch64-unknown-linux-gnu --bin lookout)
  fi
  if [ ! -f "$LOOKOUT_ARM_BIN" ] || [ ! -x "$LOOKOUT_ARM_BIN" ]; then die "LOOKOUT_ARM_BIN=$LOOKOUT_ARM_BIN is not an executable"; fi
  python3 "$SPLIT" --check-binary "$LOOKOUT_ARM_BIN" \
    || die "$LOOKOUT_ARM_BIN has no symbol table (stripped): build it with CARGO_PROFILE_BENCH_STRIP=false"
  SHA=$(sha256sum "$LOOKOUT_ARM_BIN" | cut -c1-16)
  BIN=$OUT/bin/lookout-$SHA   # the runs' symbols are read from this path later
  [ -x "$BIN" ] || { cp "$LOOKOUT_ARM_BIN" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"; }

  TMP=$(mktemp -d -t lookout-frame-budget-fifo.XXXXXX)
  PACED_TOML=$OUT/paced.toml
  SCALE=$(awk -v p="$PERIOD" 'BEGIN { printf "%g", p / 0.1 }')
  cat > "$PACED_TOML" <<EOF
# Paced runs of scripts/arm-frame-budget.sh: one frame every $PERIOD s instead of the clip's 0.1 s.
# The pipeline's wall-clock settings (10 s by default) are scaled by $SCALE so that they fall on
# the same frames as at 10 fps.
[pipeline]
idle_detect_interval = $(awk -v s="$SCALE" 'BEGIN { printf "%.1f", 10 * s }')
stats_interval = $(awk -v s="$SCALE" 'BEGIN { printf "%.1f", 10 * s }')
EOF

  JOB_PIDS=()
  # shellcheck disable=SC2317  # called by the EXIT trap
  cleanup() {
    local p
    for p in "${JOB_PIDS[@]}"; do kill -- "-$p" 2>/dev/null || true; done
    rm -rf "$TMP"
  }
  trap cleanup EXIT
  trap 'exit 130' INT TERM

  # measure NAME BOARD KIND FRAMES: one armcost run into $RUNS/NAME (KIND nodet|fixed|adaptive)
  measure() {
    local name=$1 board=$2 kind=$3 frames=$4 d=$RUNS/$1 fifo='' fpid='' rc=0
    local args=(bench --threads 1 --json --precision int8 --frames "$frames")
    case $kind in
      nodet) args+=(--source demo --schedule fixed --detect-every 1000) ;;
      *) fifo=$TMP/$name.mjpeg
         args+=(-c "$PACED_TOML" --source "$fifo" --schedule "$kind" --detect-every 5) ;;
    esac
    local key="board=$board kind=$kind frames=$frames period=$PERIOD binary=$SHA"
    if [ "$FRESH" = 0 ] && [ -e "$d/ok" ] && [ "$(cat "$d/key.txt" 2>/dev/null)" = "$key" ]; then
      say "  reuse $name"; return 0
    fi
    rm -rf "$d"; mkdir -p "$d"; echo "$key" > "$d/key.txt"
    {
      [ -n "$fifo" ] && echo "python3 scripts/budget/feeder.py $fifo $CLIP $frames $PERIOD &"
      echo "cd $REPO && $ARMCOST --board $board --keep $d --env LOOKOUT_GOLDEN_DIR=$REPO/models/golden -- $BIN ${args[*]}"
    } > "$d/cmd.txt"
    if [ -n "$fifo" ]; then
      rm -f "$fifo"; mkfifo "$fifo"
      python3 "$FEEDER" "$fifo" "$CLIP" "$frames" "$PERIOD" --log "$d/feeder.log" & fpid=$!
    fi
    say "  $name: $board, $kind, $frames frames${fifo:+, paced at $PERIOD s}"
    local t0=$SECONDS
    (cd "$REPO" && exec "$ARMCOST" --board "$board" --keep "$d" --env "LOOKOUT_GOLDEN_DIR=$REPO/models/golden" \
       -- "$BIN" "${args[@]}") > "$d/stdout.json" 2> "$d/stderr.txt" || rc=$?
    if [ -n "$fpid" ]; then kill "$fpid" 2>/dev/null || true; wait "$fpid" 2>/dev/null || true; rm -f "$fifo"; fi
    echo "rc=$rc wall=$((SECONDS - t0))s" > "$d/done.txt"
    # lookout bench exits 2 when its self-check against models/golden is not "passed": the
    # counts are still the pipeline's (the self-check runs before it, in both runs alike).
    local processed
    processed=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["runs"][0]["frames"]["processed"])' \
                "$d/stdout.json" 2>/dev/null || echo "?")
    if { [ "$rc" = 0 ] || [ "$rc" = 2 ]; } && [ -s "$d/summary.txt" ] && [ -s "$d/tbs.txt" ] && [ "$processed" = "$frames" ]; then
      touch "$d/ok"; say "  $name: done, $(awk '$1 == "insns" { print $2 }' "$d/summary.txt") instructions, rc $rc, $((SECONDS - t0)) s"
    else
      say "  $name: FAILED (rc $rc, $processed frames processed); last lines of $d/stderr.txt:"
      tail -5 "$d/stderr.txt" | sed 's/^/      /' >&2
    fi
  }

  say "measuring: boards $BOARDS, schedules $SCHEDULES, frames $BIG - $SMALL, period $PERIOD s, $JOBS at once; runs in $RUNS"
  say "binary $LOOKOUT_ARM_BIN (sha256 $SHA...), armcost $ARMCOST"
  # The short unpaced runs first, one at a time (the first armcost run of a board also makes
  # its overlay); then the paced ones, longest first, JOBS at once.
  for b in ${BOARDS//,/ }; do
    for f in "$BIG" "$SMALL"; do measure "${b}_nodet_$f" "$b" nodet "$f"; done
  done
  QUEUE=()
  for f in "$BIG" "$SMALL"; do
    for b in ${BOARDS//,/ }; do
      for s in ${SCHEDULES//,/ }; do QUEUE+=("${b}_$(tag "$s")_$f $b $s $f"); done
    done
  done
  set -m   # each job in its own process group, so that cleanup can end the job's qemu and feeder
  for job in "${QUEUE[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
    # shellcheck disable=SC2086  # job = NAME BOARD KIND FRAMES, split on purpose
    measure $job & JOB_PIDS+=($!)
  done
  wait || true
  set +m
  JOB_PIDS=()
fi

# ---------------------------------------------------------------- splitting
missing=()
for b in ${BOARDS//,/ }; do
  needed=("${b}_nodet_$BIG" "${b}_nodet_$SMALL")
  for s in ${SCHEDULES//,/ }; do needed+=("${b}_$(tag "$s")_$BIG" "${b}_$(tag "$s")_$SMALL"); done
  for n in "${needed[@]}"; do
    if [ ! -s "$RUNS/$n/tbs.txt" ] || [ ! -s "$RUNS/$n/stdout.json" ]; then missing+=("$n");
    elif [ ! -e "$RUNS/$n/ok" ] && { [ -z "$REUSE" ] || [ -e "$RUNS/$n/key.txt" ]; }; then
      missing+=("$n (failed or interrupted)")   # key.txt: made by this script, which marks success with ok
    fi
  done
done
[ ${#missing[@]} = 0 ] || die "runs missing in $RUNS: ${missing[*]}"

for b in ${BOARDS//,/ }; do
  pairs=()
  for s in ${SCHEDULES//,/ }; do
    case $s in fixed) label="at N = 5" ;; adaptive) label=adaptive ;; esac
    pairs+=(--pair "$label" "$RUNS/${b}_$(tag "$s")_$BIG" "$RUNS/${b}_$(tag "$s")_$SMALL")
  done
  extra=()
  [ -n "$OUT" ] && extra=(--functions "$OUT/functions-$b.tsv" --json "$OUT/budget-$b.json")
  say "splitting $b"
  if [ -n "$OUT" ]; then
    python3 "$SPLIT" --board "$b" --base "$RUNS/${b}_nodet_$BIG" "$RUNS/${b}_nodet_$SMALL" "${pairs[@]}" "${extra[@]}" \
      | tee "$OUT/budget-$b.md"
  else
    python3 "$SPLIT" --board "$b" --base "$RUNS/${b}_nodet_$BIG" "$RUNS/${b}_nodet_$SMALL" "${pairs[@]}"
  fi
done
[ -n "$OUT" ] && say "tables in $OUT/budget-*.md, per-function stages in $OUT/functions-*.tsv, runs in $RUNS"
exit 0
