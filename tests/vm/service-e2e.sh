#!/usr/bin/env bash
# tests/vm/service-e2e.sh [DEB]
#
# lookout's Debian package as a systemd service on an emulated arm64 machine with a V4L2
# camera (the kernel's `vivid` driver as /dev/video0). It boots the cached guest through the
# harness's vm-e2e.sh, whose service is a driver (tests/vm/service/job.sh) that runs, in one
# boot:
#   0. apt-get install ./lookout_*_arm64.deb → files in place, /etc/lookout/lookout.toml a
#                                 conffile, the unit enabled and started (READY=1) with the
#                                 shipped config on /dev/video0
#   then, with the installed conffile set to stats every 5 s and a small model input, and a
#   drop-in with a longer start timeout (the unit file itself is the packaged one):
#   1. start on /dev/video0     → READY=1 reached (systemctl start returns 0, unit active),
#                                 stats in the journal with FPS, DETECT_FPS, MODEL_TIME_MS,
#                                 MODEL_TIME_P95_MS, TRACK_TIME_MS, FRAME_AGE_MS,
#                                 FRAME_AGE_P95_MS, FRAMES_DROPPED, TRACKS, LOOKOUT_EVENT=stats;
#                                 the sandbox allows thread pinning and /proc/cpuinfo
#   2. reload, valid file       → "reloaded", same process, still active
#   3. reload, invalid file     → "reload_rejected" naming the key, same process, still active
#   4. rmmod vivid / modprobe   → the camera loss is logged, frames flow again afterwards
#   5. systemctl stop           → exit status 0, Result=success
#   6. bad configuration        → exit status 78, Result=exit-code, no restart (NRestarts=0)
#   and, through scenarios 1-5, MQTT to a broker on the host: a mosquitto on a free loopback
#   port, reached by the guest as 10.0.2.100:1883 (qemu's user network, restrict=on, one
#   forward; the unit's IPAddressAllow= private ranges let it through) → `online` (retained),
#   Home Assistant discovery configs, stats, and `offline` on the clean stop, as recorded by
#   mosquitto_sub on the host (mqtt.txt). Without mosquitto on the host the MQTT part is
#   skipped loudly (MQTT=0 skips it on purpose).
#
# DEB: an arm64 package; default: `scripts/deb.sh aarch64-unknown-linux-gnu --profile dev`
# (the dev-profile binary the ARM tests build, stripped; release packages have the same
# contents, built with fat LTO).
# Env: VM_DIR (default /var/cache/lookout-ci/vm-<first 12 hex of sha256(vm-build.sh)>),
#      HARNESS (.ci/harness), OUT (./vm-service-out),
#      RUN_WAIT (40: seconds of scenario 1 after READY), TIMEOUT_S (1500),
#      MODEL_INPUT ("128, 128": [model] input_size in the guest; "" = the model's 416x416).
# Exit: 0 every assertion held; 1 an assertion failed (each printed); 2 VM/setup problem.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${HARNESS:-}" ]; then
  HARNESS=$ROOT/.ci/harness
fi
KEY=$(sha256sum "$HARNESS/vm-build.sh" | cut -c1-12)
export VM_DIR=${VM_DIR:-/var/cache/lookout-ci/vm-$KEY}
OUT=$(mkdir -p "${OUT:-./vm-service-out}" && cd "${OUT:-./vm-service-out}" && pwd)
RUN_WAIT=${RUN_WAIT:-40}
MODEL_INPUT=${MODEL_INPUT:-128, 128}
# Two webcam-type vivid devices (/dev/video0, /dev/video1): the scenarios use the first; the
# two-camera scenario both.
VIVID_OPTS=${VIVID_OPTS:-n_devs=2 node_types=0x1,0x1 num_inputs=1,1 input_types=0x0,0x0}
TARGET=aarch64-unknown-linux-gnu
say() { echo "[service-e2e] $*"; }

DEB=${1:-}
if [ -z "$DEB" ]; then
  say "building the arm64 package (scripts/deb.sh $TARGET --profile dev)"
  (cd "$ROOT" && bash scripts/deb.sh $TARGET --profile dev >/dev/null) || { say "FAIL: building the package failed"; exit 2; }
  DEB=$(ls -t "${CARGO_TARGET_DIR:-$ROOT/target}"/debian/dev/lookout_*_arm64.deb | head -1)
fi
[ -s "$DEB" ] || { say "FAIL: no package at $DEB"; exit 2; }
[ -s "$VM_DIR/rootfs.img" ] || { say "no VM image in $VM_DIR (run $HARNESS/vm-build.sh with OUT_DIR=$VM_DIR)"; exit 2; }

WORK=$(mktemp -d /tmp/lookout-vm-service.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/extra" "$WORK/pkg"
# Under its Debian name (package_version_arch.deb), whatever the file is called here.
cp "$DEB" "$WORK/extra/$(dpkg-deb -f "$DEB" Package)_$(dpkg-deb -f "$DEB" Version)_$(dpkg-deb -f "$DEB" Architecture).deb"
# vm-e2e.sh wants a binary to install as its edge-daemon: the package's own (unused by the job).
dpkg-deb -x "$DEB" "$WORK/pkg"
[ -x "$WORK/pkg/usr/bin/lookout" ] || { say "FAIL: $DEB has no usr/bin/lookout"; exit 2; }
cp "$ROOT/tests/vm/service/job.sh" "$WORK/extra/job.sh"
chmod 755 "$WORK/extra/job.sh"
# Under TCG one 416x416 inference takes ~85 s (model load ~40 s): the scenarios after the
# install run with a small input, set in the installed conffile by the job.
echo "$MODEL_INPUT" > "$WORK/extra/model-input"
grep -q '^input_size = \[\]$' "$ROOT/systemd/lookout.toml" || { say "FAIL: the shipped config has no 'input_size = []' line to change"; exit 2; }
grep -q '^stats_interval = 10.0$' "$ROOT/systemd/lookout.toml" || { say "FAIL: the shipped config has no 'stats_interval = 10.0' line to change"; exit 2; }
grep -q '^spec = "/dev/video0"$' "$ROOT/systemd/lookout.toml" || { say "FAIL: the shipped config does not name /dev/video0"; exit 2; }
echo "$VIVID_OPTS" > "$WORK/extra/vivid-opts"
grep -q '^host = ""$' "$ROOT/systemd/lookout.toml" || { say "FAIL: the shipped config has no 'host = \"\"' line ([mqtt]) to change"; exit 2; }

# The broker, on the host's loopback; the guest reaches it through qemu's forward.
BROKER_PID= SUB_PID= GUEST_FWD=
stop_broker() {
  [ -n "$SUB_PID" ] && kill "$SUB_PID" 2>/dev/null || true
  [ -n "$BROKER_PID" ] && kill "$BROKER_PID" 2>/dev/null || true
  [ -n "$BROKER_PID" ] && wait "$BROKER_PID" 2>/dev/null || true
}
trap 'stop_broker; rm -rf "$WORK"' EXIT
if [ "${MQTT:-1}" = 1 ] && command -v mosquitto >/dev/null && command -v mosquitto_sub >/dev/null; then
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest file %s\n' \
    "$PORT" "$OUT/mosquitto.log" > "$WORK/mosquitto.conf"
  : > "$OUT/mosquitto.log"; chmod 666 "$OUT/mosquitto.log"
  mosquitto -c "$WORK/mosquitto.conf" > /dev/null 2>&1 &
  BROKER_PID=$!
  for _ in $(seq 1 50); do
    mosquitto_sub -h 127.0.0.1 -p "$PORT" -t x -W 1 -E > /dev/null 2>&1 && break
    sleep 0.1
  done
  # Every message, with arrival time (µs) and retain flag; payloads on one line each.
  mosquitto_sub -h 127.0.0.1 -p "$PORT" -F '%U %r %t %p' -t 'lookout/#' -t 'homeassistant/#' \
    > "$OUT/mqtt.txt" 2> "$OUT/mqtt-sub.err" &
  SUB_PID=$!
  echo "10.0.2.100" > "$WORK/extra/mqtt-host"
  GUEST_FWD="1883=$PORT"
  say "broker: mosquitto PID $BROKER_PID on 127.0.0.1:$PORT, the guest's 10.0.2.100:1883"
else
  rm -f "$OUT/mqtt.txt"
  echo "*** MQTT PART SKIPPED: $( [ "${MQTT:-1}" = 1 ] && echo 'mosquitto / mosquitto_sub not installed (apt install mosquitto mosquitto-clients)' || echo 'MQTT=0' ) ***"
fi
echo "$RUN_WAIT" > "$WORK/extra/run-wait"

cat > "$WORK/lookout-e2e.service" <<'EOF'
[Unit]
Description=lookout service scenarios (tests/vm/service-e2e.sh)
After=systemd-udevd.service
[Service]
Type=oneshot
ExecStart=/opt/edge-extra/job.sh
TimeoutStartSec=infinity
StandardOutput=journal+console
EOF
echo "# the driver needs no config; lookout's is in EXTRA_FILES_DIR" > "$WORK/config.toml"

say "VM_DIR=$VM_DIR DEB=$DEB OUT=$OUT"
rc=0
OUT="$OUT" GUEST_FWD="$GUEST_FWD" SERVICE=lookout-e2e RUN_S=${RUN_S:-1200} TIMEOUT_S=${TIMEOUT_S:-1500} CHECK_V4L2=0 \
  ALLOW_STOPPED=0 VIVID_OPTS="$VIVID_OPTS" EXTRA_FILES_DIR="$WORK/extra" \
  "$HARNESS/vm-e2e.sh" "$WORK/pkg/usr/bin/lookout" "$WORK/config.toml" "$WORK/lookout-e2e.service" || rc=$?
if [ "$rc" = 2 ]; then say "FAIL: VM problem (see $OUT/console.log)"; exit 2; fi
[ -s "$OUT/steps.txt" ] || { say "FAIL: the guest job did not run (see $OUT/console.log, $OUT/journal.json)"; exit 2; }
grep -q '^DONE' "$OUT/steps.txt" || say "warning: the guest job did not finish (rc=$rc); checking what it produced"

stop_broker
st=0
python3 "$ROOT/tests/vm/service/check.py" "$OUT" || st=$?
if [ $st = 0 ]; then say "PASS (artifacts in $OUT)"; else say "FAILED (artifacts in $OUT)"; fi
exit $st
