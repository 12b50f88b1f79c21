#!/usr/bin/env bash
# mqtt-latency.sh [RUNS] — how long an event takes from the tracker to a subscriber, and a
# snapshot from the event's start to the `update` that announces it (`has_snapshot`), on loopback: a throwaway mosquitto, the
# bundled clip played in real time RUNS times (default 3) by `lookout run` with MQTT on,
# `mosquitto_sub` stamping each arrival (%U). An event's `after.frame_time` is the wall clock
# when the tracker thread handed it to MQTT. Prints p50/p95/max of both.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
target=${CARGO_TARGET_DIR:-target}
cargo build --quiet --bin lookout
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\n' "$port" > "$tmp/m.conf"
mosquitto -c "$tmp/m.conf" 2>/dev/null & broker=$!
trap 'pkill -P $$ mosquitto_sub 2>/dev/null; kill $broker 2>/dev/null; rm -rf "$tmp"' EXIT
sleep 0.5
printf '[mqtt]\nhost = "127.0.0.1"\nport = %s\ncamera = "demo"\n' "$port" > "$tmp/c.toml"
mosquitto_sub -p "$port" -t 'lookout/events' -F '%U %p' > "$tmp/events.txt" &
sleep 0.3
for _ in $(seq "$runs"); do
  "$target/debug/lookout" run --config "$tmp/c.toml" 2>/dev/null
done
sleep 1
python3 - "$tmp/events.txt" <<'PY'
import json, sys
ev, start, snap = [], {}, {}
for line in open(sys.argv[1]):
    t, _, body = line.partition(" ")
    m, t = json.loads(body), float(t)
    a = m["after"]
    if m["type"] == "new":
        ev.append((t - a["frame_time"]) * 1000)
        start[a["id"]] = a["start_time"]
    if a["has_snapshot"] and a["id"] not in snap:
        snap[a["id"]] = t
first = [(snap[i] - start[i]) * 1000 for i in snap if i in start]
def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p * (len(v) - 1))))] if v else float("nan")
for name, v in (("event -> subscriber", ev), ("event start -> its snapshot announced", first)):
    print(f"{name}: n={len(v)} p50={q(v, .5):.1f} ms p95={q(v, .95):.1f} ms max={max(v) if v else float('nan'):.1f} ms")
PY
