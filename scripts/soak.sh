#!/usr/bin/env bash
# soak.sh — run the daemon's pipeline for a long time and watch what grows.
#
#   scripts/soak.sh [SECONDS]          (default 3600; env LOOKOUT=path to a built lookout binary,
#                                       SOAK_CSV=file, SOAK_WARMUP=seconds (default 120))
#
# `lookout run` plays the bundled clip looped, as fast as the machine allows (the pipeline at
# full load, detection every `detect_every` frames as in production), with stats every 10 s.
# Every 10 s this samples the process: resident memory (VmRSS), open file descriptors, threads,
# and the last stats line's fps and frame age (p50, p95), into a CSV. At the end it stops lookout
# with SIGTERM (a clean stop must follow) and prints the growth from the end of the warm-up to
# the end. Resident memory is read every half second and the lowest of each 10 s is the
# sample (what is in flight at one instant comes and goes); even so the samples swing between
# two levels about 1.5 MB apart as the allocator's arenas shift, so growth is the rise of the
# floor: the lowest sample of the second half after the warm-up against the lowest of the
# first half (a leak lifts every sample, the floor with them). The least-squares line through
# the same samples is printed beside it. lookout runs with the MALLOC_* settings of
# systemd/lookout.service's Environment=, as deployed.
# Exit 1 if the floor of RSS or of the FD count rose more than 1 %, the frame age p95 drifted (last
# quarter's median > 1.5 × the first quarter's after warm-up, and > 5 ms apart), the thread
# count changed, or lookout did not stop cleanly.
set -euo pipefail
SECS=${1:-3600}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LOOKOUT=${LOOKOUT:-}
if [ -z "$LOOKOUT" ]; then
  (cd "$ROOT" && cargo build --release --quiet)
  LOOKOUT="${CARGO_TARGET_DIR:-$ROOT/target}/release/lookout"
fi
WARMUP=${SOAK_WARMUP:-120}
work=$(mktemp -d)
CSV=${SOAK_CSV:-$work/soak.csv}
cat > "$work/soak.toml" <<'EOF'
# soak: the bundled clip, looped, unpaced; stats every 10 s
[source]
spec = "demo"
realtime = false
loop = true
[pipeline]
stats_interval = 10.0
EOF
# The allocator settings the systemd unit runs lookout with (its MALLOC_* Environment=), so
# the soak measures the daemon as it is deployed.
unit_env=$(sed -n 's/^Environment=//p' "$ROOT/systemd/lookout.service" | tr ' ' '\n' | grep '^MALLOC_' || true)
echo "soak: $LOOKOUT run on the looped bundled clip for ${SECS} s; samples every 10 s -> $CSV; environment of the unit: $(echo $unit_env)" >&2
env $unit_env "$LOOKOUT" run --config "$work/soak.toml" 2> "$work/lookout.log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
echo "t_s,rss_kb,fds,threads,fps,frame_age_p50_ms,frame_age_p95_ms" > "$CSV"
t0=$(date +%s)
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$2"; }
while :; do
  # Resident memory is read every half second and the lowest of the 20 readings is recorded:
  # what is in flight at one instant (a frame, an inference's tensors: a few MB) says nothing.
  rss=
  for _ in $(seq 1 20); do
    sleep 0.5
    r=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    if [ -n "$r" ] && { [ -z "$rss" ] || [ "$r" -lt "$rss" ]; }; then rss=$r; fi
  done
  kill -0 "$pid" 2>/dev/null || { echo "soak: lookout exited early:" >&2; tail -5 "$work/lookout.log" >&2; exit 1; }
  t=$(( $(date +%s) - t0 ))
  thr=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status")
  fds=$(ls "/proc/$pid/fd" | wc -l)
  last=$(grep 'LOOKOUT_EVENT=stats' "$work/lookout.log" | tail -1 || true)
  echo "$t,$rss,$fds,$thr,$(field FPS "$last"),$(field FRAME_AGE_MS "$last"),$(field FRAME_AGE_P95_MS "$last")" >> "$CSV"
  [ "$t" -ge "$SECS" ] && break
done
kill -TERM "$pid"
stopped=0
for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || { stopped=1; break; }; sleep 0.1; done
wait "$pid" 2>/dev/null && status=0 || status=$?
trap - EXIT
python3 - "$CSV" "$WARMUP" "$stopped" "$status" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1]))]
warm, stopped, status = int(sys.argv[2]), sys.argv[3] == '1', int(sys.argv[4])
after = [r for r in rows if int(r['t_s']) >= warm] or rows
def f(r, k):
    try: return float(r[k])
    except ValueError: return None
q = max(1, len(after) // 4)
def line(k):
    # A least-squares line through the samples after the warm-up: its value at the end of the
    # warm-up and at the end (shown for reference; a swing between allocator states tilts it).
    ts = [float(r['t_s']) for r in after]
    vs = [f(r, k) for r in after]
    n = len(ts)
    mt, mv = sum(ts) / n, sum(vs) / n
    var = sum((t - mt) ** 2 for t in ts)
    slope = sum((t - mt) * (v - mv) for t, v in zip(ts, vs)) / var if var else 0.0
    return mv + slope * (ts[0] - mt), mv + slope * (ts[-1] - mt)
def growth(k):
    # The rise of the floor: the lowest sample of the second half against the lowest of the
    # first half. What is in flight, or parked in an arena for a while, lifts single samples;
    # what leaks lifts all of them.
    vs = [f(r, k) for r in after]
    h = max(1, len(vs) // 2)
    a, b = min(vs[:h]), min(vs[h:] or vs[-1:])
    return a, b, (100.0 * (b - a) / a if a else 0.0)
bad = []
print('soak: %d samples over %s s; growth after the warm-up (%s s), %d samples: lowest of the first half -> lowest of the second half (least-squares line):' % (len(rows), rows[-1]['t_s'], after[0]['t_s'], len(after)))
for k, unit in (('rss_kb', 'kB'), ('fds', ''), ('threads', '')):
    a, b, g = growth(k)
    la, lb = line(k)
    lo, hi = min(f(r, k) for r in after), max(f(r, k) for r in after)
    print('  %-8s %10.0f -> %10.0f %s (%+.2f %%; line %.0f -> %.0f; samples %.0f..%.0f)' % (k, a, b, unit, g, la, lb, lo, hi))
    if k != 'threads' and g > 1.0:
        bad.append('%s grew %.2f %%' % (k, g))
    if k == 'threads' and lo != hi:
        bad.append('thread count changed (%d..%d)' % (lo, hi))
p95 = [f(r, 'frame_age_p95_ms') for r in after]
p95 = [x for x in p95 if x is not None]
if len(p95) >= 2 * q:
    first, last = statistics.median(p95[:q]), statistics.median(p95[-q:])
    print('  frame age p95: first quarter median %.1f ms, last quarter %.1f ms' % (first, last))
    if last > 1.5 * first and last - first > 5:
        bad.append('frame age p95 drifted %.1f -> %.1f ms' % (first, last))
fps = [f(r, 'fps') for r in after if f(r, 'fps')]
if fps:
    print('  fps: median %.1f (min %.1f, max %.1f)' % (statistics.median(fps), min(fps), max(fps)))
print('  stop: %s (exit status %d)' % ('clean' if stopped and status == 0 else 'NOT clean', status))
if not (stopped and status == 0):
    bad.append('lookout did not stop cleanly on SIGTERM (status %d)' % status)
if bad:
    print('soak: FAILED: ' + '; '.join(bad)); sys.exit(1)
print('soak: OK')
PY
