#!/usr/bin/env bash
# mqtt-outage.sh [MINUTES] — the broker away for MINUTES (default 10) while lookout runs:
# memory before and after, frames dropped, messages counted as dropped, and how long after the
# broker's return lookout's state is there again. The bundled clip looped in real time with
# MQTT and snapshots on; a throwaway mosquitto on a free loopback port, killed and restarted
# (empty: no persistence) on the same port.
set -euo pipefail
cd "$(dirname "$0")/.."
mins=${1:-10}
target=${CARGO_TARGET_DIR:-target}
cargo build --quiet --bin lookout
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\n' "$port" > "$tmp/m.conf"
mosquitto -c "$tmp/m.conf" 2>/dev/null & broker=$!
printf '[source]\nloop = true\n[pipeline]\nstats_interval = 10.0\npin_threads = false\n[mqtt]\nhost = "127.0.0.1"\nport = %s\ncamera = "demo"\n' "$port" > "$tmp/c.toml"
"$target/debug/lookout" run --config "$tmp/c.toml" 2>"$tmp/log" & daemon=$!
trap 'kill $daemon $broker 2>/dev/null; rm -rf "$tmp"' EXIT
rss() { awk '/^VmRSS/ {print $2}' "/proc/$daemon/status"; }
sleep 60
before=$(rss)
kill "$broker"; wait "$broker" 2>/dev/null || true
echo "broker down for $mins min (RSS before: $before kB)"
sleep $((mins * 60))
after=$(rss)
echo "RSS at the end of the outage: $after kB (growth $((after - before)) kB)"
mosquitto -c "$tmp/m.conf" 2>/dev/null & broker=$!
back=$(date +%s.%N)
# The broker listens within moments; until then the subscriber's connection is refused.
until mosquitto_sub -p "$port" -t "homeassistant/sensor/+/demo_person_count/config" -C 1 -W 30 >/dev/null 2>&1; do
  sleep 0.05
done
took=$(python3 -c "import time; print(f'{time.time() - $back:.1f}')")
sleep 12
kill -TERM "$daemon"; wait "$daemon" || true
echo "discovery published again ${took} s after the broker's return"
grep -o 'MQTT_DROPPED=[0-9]*' "$tmp/log" | tail -1 || true
grep -o 'FRAMES_DROPPED=[0-9]*' "$tmp/log" | tail -1 || true
grep 'summary' "$tmp/log" | sed 's/ LOOKOUT_EVENT.*//' || true
