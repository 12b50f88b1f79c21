#!/usr/bin/env bash
# demo.sh — the main job on the embedded defaults: the bundled INT8 model on the bundled clip
# (no camera needed). Extra arguments go to `lookout run` (e.g. --tracks-out tracks.jsonl).
#   scripts/demo.sh --mqtt   the same with MQTT on: starts a throwaway mosquitto on a free
#                            loopback port (installs mosquitto when missing), and prints every
#                            message that arrives — events, counts, snapshots (their size),
#                            stats, Home Assistant's discovery — beside lookout's own lines.
# The first run builds lookout: it says so and shows cargo's progress (never a silent
# terminal); later runs start at once.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
target=${CARGO_TARGET_DIR:-target}
if [ ! -x "$target/debug/lookout" ]; then
  echo "demo: first build of lookout and its dependencies (most of it is tract, the inference" >&2
  echo "demo: engine): about 10-15 min on 2 cores, less on more. Later runs start at once." >&2
fi
# Not --quiet: cargo shows its progress bar (or one "Compiling …" line per crate without a
# terminal) for a first build, and one "Finished" line when nothing changed.
cargo build --bin lookout
if [ "${1:-}" != --mqtt ]; then
  exec cargo run --quiet --bin lookout -- run "$@"
fi
shift
TESTS=1 bash scripts/setup.sh   # mosquitto and mosquitto-clients
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\n' "$port" > "$tmp/mosquitto.conf"
mosquitto -c "$tmp/mosquitto.conf" 2>"$tmp/broker.log" & broker=$!
cleanup() { pkill -P $$ mosquitto_sub 2>/dev/null; kill "$broker" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
for _ in $(seq 50); do mosquitto_sub -p "$port" -t x -C 1 -W 1 >/dev/null 2>&1 && break; [ $? = 27 ] && break; sleep 0.1; done
cat > "$tmp/lookout.toml" <<EOF2
[mqtt]
host = "127.0.0.1"
port = $port
camera = "demo"
[pipeline]
stats_interval = 5.0
EOF2
echo "demo: mosquitto on 127.0.0.1:$port; what arrives is printed as 'mqtt> TOPIC PAYLOAD'" >&2
# Payloads shortened; a snapshot (binary JPEG) shows as its size.
mosquitto_sub -p "$port" -t '#' -T '+/+/+/snapshot' -v | cut -c1-160 | sed -u 's/^/mqtt> /' &
mosquitto_sub -p "$port" -t '+/+/+/snapshot' -F 'mqtt> %t <JPEG, %l bytes>' &
cargo run --quiet --bin lookout -- run --config "$tmp/lookout.toml" "$@"
sleep 1
