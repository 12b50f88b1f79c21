#!/usr/bin/env bash
# outlets-cost.sh [PAIRS] [SECONDS] — what MQTT + snapshots + metrics cost the pipeline:
# `lookout bench` on the bundled clip (looped, as fast as the machine allows) with the outlets
# off and on, in PAIRS (default 5) interleaved pairs of SECONDS (default 20) each, the order
# alternating, against a throwaway mosquitto on loopback (snapshots and Home Assistant
# discovery on, as they are by default with MQTT; `/metrics` served on a free loopback port).
# Prints each run's fps and frame age, and the median of the on/off ratios.
# Builds the release binary without fat LTO (CARGO_PROFILE_RELEASE_LTO=false,
# CODEGEN_UNITS=16) unless LOOKOUT=path is given. BENCH_ARGS adds arguments to every run:
# "--realtime" plays the clip at its 10 fps, as a camera delivers it (events at a real scene's
# rate; then fps is the camera's and what the outlets cost shows as frame age and CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=${1:-5}
secs=${2:-20}
if [ -z "${LOOKOUT:-}" ]; then
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 cargo build --release --quiet --bin lookout
  LOOKOUT=${CARGO_TARGET_DIR:-target}/release/lookout
fi
read -r -a extra <<< "${BENCH_ARGS:-}"
tmp=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\n' "$port" > "$tmp/m.conf"
mosquitto -c "$tmp/m.conf" 2>/dev/null & broker=$!
trap 'kill $broker 2>/dev/null; rm -rf "$tmp"' EXIT
sleep 0.5
: > "$tmp/off.toml"
printf '[mqtt]\nhost = "127.0.0.1"\nport = %s\ncamera = "demo"\n[metrics]\nenabled = true\nlisten = "127.0.0.1:%s"\n' \
  "$port" "$(free_port)" > "$tmp/on.toml"
echo "outlets-cost: $LOOKOUT bench, $pairs pairs of ${secs} s, broker 127.0.0.1:$port" >&2
for i in $(seq "$pairs"); do
  if [ $((i % 2)) = 1 ]; then order="off on"; else order="on off"; fi
  for w in $order; do
    "$LOOKOUT" bench --config "$tmp/$w.toml" --seconds "$secs" --json "${extra[@]}" 2>/dev/null > "$tmp/$w-$i.json"
  done
done
python3 - "$tmp" "$pairs" <<'PY'
import json, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
def run(w, i):
    r = json.load(open(f"{d}/{w}-{i}.json"))["runs"][0]
    cpu = 1000 * r["cpu"]["process_s"] / max(r["frames"]["processed"], 1)
    return r["fps"], r["frame_age"]["p50_ms"], r["frame_age"]["p95_ms"], r["frames"]["dropped"], r["detect_fps"], cpu
ratios = {"fps": [], "frame age p50": [], "frame age p95": [], "CPU per frame": []}
print("pair  off: fps  age p50/p95 ms  dropped  det/s  CPU ms/frame |  on: fps  age p50/p95 ms  dropped  det/s  CPU ms/frame")
for i in range(1, n + 1):
    a, b = run("off", i), run("on", i)
    print(f"{i:4}  {a[0]:9.1f}  {a[1]:6.1f}/{a[2]:6.1f}  {a[3]:7}  {a[4]:5.2f}  {a[5]:12.2f} | {b[0]:8.1f}  {b[1]:6.1f}/{b[2]:6.1f}  {b[3]:7}  {b[4]:5.2f}  {b[5]:12.2f}")
    for k, j in (("fps", 0), ("frame age p50", 1), ("frame age p95", 2), ("CPU per frame", 5)):
        ratios[k].append(b[j] / a[j] if a[j] else float("nan"))
for k, v in ratios.items():
    print(f"on/off {k}: median {statistics.median(v):.3f} (pairs {min(v):.3f}..{max(v):.3f})")
PY
