#!/usr/bin/env bash
# reload-memory.sh — send the daemon many SIGHUPs and measure what its memory does.
#
#   scripts/reload-memory.sh [RELOADS] [MODE]    (defaults: 1000 same)
#
#   MODE  same    the configuration file does not change ("nothing changed" reloads)
#         models  each SIGHUP switches the file's model between models/nanodet-g-416-int8.onnx
#                 and models/nanodet-g-320-int8.onnx (a reload that reads another model than
#                 the running one loads it; SIGHUPs during a load make one reload)
#
#   env   LOOKOUT=path to a built lookout binary (default: `cargo build --release`, then
#                 $CARGO_TARGET_DIR/release/lookout)
#         RELOAD_INTERVAL=seconds between SIGHUPs (default 0.3)
#         RELOAD_WARMUP=reloads before the first sample (default 100)
#
# lookout runs as the systemd unit runs it (the MALLOC_* settings of its Environment=) on the
# bundled clip, real time, looped, stats every second. After one loop of the clip (25 s) and
# the warm-up reloads it samples RssAnon and VmRSS of /proc/PID/status every 0.1 s for 5 s
# (the pipeline running, no reload under way), sends RELOADS SIGHUPs one every RELOAD_INTERVAL, waits until the last reload is
# done, samples again, stops lookout with SIGTERM and prints the least and the median of
# each set of samples and their growth. Exit 1 if lookout did not survive or did not stop
# cleanly.
set -euo pipefail
RELOADS=${1:-1000}
MODE=${2:-same}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
INTERVAL=${RELOAD_INTERVAL:-0.3}
WARMUP=${RELOAD_WARMUP:-100}
case "$MODE" in
  same | models) ;;
  *) echo "reload-memory: MODE is same or models, not '$MODE'" >&2; exit 64 ;;
esac
LOOKOUT=${LOOKOUT:-}
if [ -z "$LOOKOUT" ]; then
  (cd "$ROOT" && cargo build --release --quiet)
  LOOKOUT="${CARGO_TARGET_DIR:-$ROOT/target}/release/lookout"
fi
work=$(mktemp -d)
cfg="$work/live.toml"
write_config() { # $1: model file, or "" for the built-in one
  {
    echo '[source]'
    echo 'spec = "demo"'
    echo 'realtime = true'
    echo 'loop = true'
    echo '[pipeline]'
    echo 'stats_interval = 1.0'
    if [ -n "$1" ]; then
      echo '[model]'
      echo "file = \"$1\""
    fi
  } > "$cfg.new"
  mv "$cfg.new" "$cfg"
}
models=("$ROOT/models/nanodet-g-416-int8.onnx" "$ROOT/models/nanodet-g-320-int8.onnx")
if [ "$MODE" = models ]; then write_config "${models[0]}"; else write_config ""; fi
unit_env=$(sed -n 's/^Environment=//p' "$ROOT/systemd/lookout.service" | tr ' ' '\n' | grep '^MALLOC_' || true)
echo "reload-memory: $LOOKOUT, $RELOADS reloads ($MODE) one every ${INTERVAL} s after $WARMUP warm-up reloads; environment of the unit: $(echo $unit_env)" >&2
env $unit_env "$LOOKOUT" run --config "$cfg" 2> "$work/lookout.log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT

alive() {
  kill -0 "$pid" 2>/dev/null || { echo "reload-memory: lookout exited:" >&2; tail -5 "$work/lookout.log" >&2; exit 1; }
}
count() { grep -c "$1" "$work/lookout.log" || true; }
wait_for_count() { # $1: pattern, $2: count, $3: timeout in seconds
  local t=0
  while [ "$(count "$1")" -lt "$2" ]; do
    alive
    sleep 0.1
    t=$((t + 1))
    [ "$t" -lt $(($3 * 10)) ] || { echo "reload-memory: no '$1' #$2 within $3 s" >&2; exit 1; }
  done
}
# Sends $1 SIGHUPs, one every INTERVAL, switching the model first in `models` mode; then
# waits until every reload lookout took is done (SIGHUPs that came during a reload are one).
sent=0
reloads() {
  for _ in $(seq 1 "$1"); do
    alive
    if [ "$MODE" = models ]; then write_config "${models[$(((sent + 1) % 2))]}"; fi
    kill -HUP "$pid"
    sent=$((sent + 1))
    sleep "$INTERVAL"
  done
  # The last SIGHUP is taken and done: "reloaded" logged after it, then a stats line.
  local before
  before=$(count 'LOOKOUT_EVENT=reloaded\|reloaded:')
  kill -HUP "$pid"
  wait_for_count 'reloaded:' $((before + 1)) 300
  local stats
  stats=$(count 'LOOKOUT_EVENT=stats')
  wait_for_count 'LOOKOUT_EVENT=stats' $((stats + 2)) 60
}
# 50 samples, 0.1 s apart, of RssAnon and VmRSS (KiB): "least median" of each.
sample() {
  local a=() v=()
  for _ in $(seq 1 50); do
    alive
    a+=("$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status")")
    v+=("$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")")
    sleep 0.1
  done
  local sa sv
  sa=$(printf '%s\n' "${a[@]}" | sort -n)
  sv=$(printf '%s\n' "${v[@]}" | sort -n)
  echo "$(head -1 <<<"$sa") $(sed -n 25p <<<"$sa") $(head -1 <<<"$sv") $(sed -n 25p <<<"$sv")"
}

# One whole loop of the 20 s clip first (its pages in the binary are then all mapped in: a
# reload that loads a model leaves little playing time between reloads).
wait_for_count 'LOOKOUT_EVENT=stats' 25 300
reloads "$WARMUP"
read -r a0 am0 v0 vm0 <<<"$(sample)"
t0=$(date +%s)
reloads "$RELOADS"
read -r a1 am1 v1 vm1 <<<"$(sample)"
secs=$(($(date +%s) - t0))
done_reloads=$(count 'reloaded:')
model_loads=$(count 'reloaded: model')
threads=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status")
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
trap 'rm -rf "$work"' EXIT
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
diff_kb() { echo $(($2 - $1)); }
echo "reload-memory: $RELOADS SIGHUPs ($MODE) in $secs s; $done_reloads reloads done in all, $model_loads of them loading a model (warm-up included; SIGHUPs that come during a reload make one); $threads threads at the end"
echo "  RssAnon least  $(mb "$a0") -> $(mb "$a1") MB ($(diff_kb "$a0" "$a1") KiB)"
echo "  RssAnon median $(mb "$am0") -> $(mb "$am1") MB ($(diff_kb "$am0" "$am1") KiB)"
echo "  VmRSS   least  $(mb "$v0") -> $(mb "$v1") MB ($(diff_kb "$v0" "$v1") KiB)"
echo "  VmRSS   median $(mb "$vm0") -> $(mb "$vm1") MB ($(diff_kb "$vm0" "$vm1") KiB)"
if [ "$status" -ne 0 ]; then
  echo "reload-memory: lookout exited $status on SIGTERM" >&2
  exit 1
fi
