#!/usr/bin/env bash
# tests/vm/v4l2-capture.sh [BIN]
#
# Real V4L2 capture test: boots the cached arm64 guest (built by .ci/harness/vm-build.sh)
# through .ci/harness/vm-e2e.sh, which loads the `vivid` virtual camera as /dev/video0.
# Inside, a oneshot unit runs the aarch64 lookout binary BIN:
#   lookout devices [--json]
#   lookout capture /dev/video0 --format F --size 640x480 --frames N --json   for F in $FORMATS
#   camera loss (LOSS_TEST=1): capture 40 frames while vivid's platform device is unbound
#   and bound again (an unplug) → the source reports the loss and reopens the camera
# and writes its outputs to the job share; this script then asserts on them on the host.
#
# BIN defaults to $CARGO_TARGET_DIR/aarch64-unknown-linux-gnu/debug/lookout (the dev profile:
# dependencies at opt-level 3, shared with the aarch64 test build), built if missing.
# Env: VM_DIR (default /var/cache/lookout-ci/vm-<first 12 hex of sha256(vm-build.sh)>),
#      HARNESS (.ci/harness), OUT (./vm-capture-out), FRAMES (20),
#      FORMATS ("YUYV NV12 GREY"), LOSS_TEST (1), RUN_S (300), TIMEOUT_S (900).
# Exit: 0 all assertions held; 1 an assertion failed (each failure printed); 2 VM/setup problem.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${HARNESS:-}" ]; then
  HARNESS=$ROOT/.ci/harness
fi
KEY=$(sha256sum "$HARNESS/vm-build.sh" | cut -c1-12)
export VM_DIR=${VM_DIR:-/var/cache/lookout-ci/vm-$KEY}
OUT=$(mkdir -p "${OUT:-./vm-capture-out}" && cd "${OUT:-./vm-capture-out}" && pwd)
FRAMES=${FRAMES:-20}
FORMATS=${FORMATS:-YUYV NV12 GREY}
LOSS_TEST=${LOSS_TEST:-1}
export VIVID_OPTS=${VIVID_OPTS:-n_devs=1 node_types=0x1 num_inputs=1 input_types=0x0}
BIN=${1:-${CARGO_TARGET_DIR:-$ROOT/target}/aarch64-unknown-linux-gnu/debug/lookout}

if [ -z "${1:-}" ]; then
  echo "[v4l2-capture] building $BIN"
  (cd "$ROOT" && cargo build --target aarch64-unknown-linux-gnu --bin lookout) || {
    echo "[v4l2-capture] FAIL: cross build failed"; exit 2; }
fi
[ -s "$VM_DIR/rootfs.img" ] || { echo "[v4l2-capture] no VM image in $VM_DIR (run $HARNESS/vm-build.sh with OUT_DIR=$VM_DIR)"; exit 2; }

WORK=$(mktemp -d /tmp/lookout-vm-capture.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# A dev-profile binary carries ~600 MB of debug info: strip a copy so it fits the guest's disk.
aarch64-linux-gnu-strip -o "$WORK/lookout" "$BIN" && BIN="$WORK/lookout"
mkdir -p "$WORK/extra"

# The guest-side job, run by the unit. vm-e2e.sh installs BIN as /usr/local/bin/edge-daemon and
# copies EXTRA_FILES_DIR to /opt/edge-extra; /mnt/job/out is copied back to $OUT afterwards.
cat > "$WORK/extra/capture-job.sh" <<EOF
#!/bin/sh
B=/usr/local/bin/edge-daemon
O=/mnt/job/out
: > \$O/rcs
\$B devices > \$O/devices.txt 2>&1; echo "devices \$?" >> \$O/rcs
\$B devices --json > \$O/devices.json 2> \$O/devices.err; echo "devices-json \$?" >> \$O/rcs
for f in $FORMATS; do
  \$B capture /dev/video0 --format \$f --size 640x480 --frames $FRAMES --json \
    > \$O/capture-\$f.json 2> \$O/capture-\$f.err
  echo "capture-\$f \$?" >> \$O/rcs
done
if [ "$LOSS_TEST" = 1 ]; then
  \$B capture /dev/video0 --format YUYV --size 640x480 --frames 40 --json \
    > \$O/loss.json 2> \$O/loss.err &
  pid=\$!
  sleep 4
  # Unplug: unbind the vivid platform device (rmmod refuses while the node is open), then
  # plug it back in. The capture must report the loss and reopen the camera.
  dev=\$(basename "\$(readlink -f /sys/class/video4linux/video0/device)")
  echo "unbinding \$dev" > \$O/loss-unplug.txt
  echo "\$dev" > /sys/bus/platform/drivers/vivid/unbind 2>> \$O/loss-unplug.txt || echo "unbind failed" >> \$O/loss-unplug.txt
  sleep 2
  echo "\$dev" > /sys/bus/platform/drivers/vivid/bind 2>> \$O/loss-unplug.txt || echo "bind failed" >> \$O/loss-unplug.txt
  wait \$pid; echo "loss \$?" >> \$O/rcs
fi
exit 0
EOF
chmod 755 "$WORK/extra/capture-job.sh"

cat > "$WORK/lookout-capture.service" <<'EOF'
[Unit]
Description=lookout V4L2 capture test (tests/vm/v4l2-capture.sh)
After=systemd-udevd.service
[Service]
Type=oneshot
ExecStart=/opt/edge-extra/capture-job.sh
TimeoutStartSec=infinity
EOF
echo "# capture test needs no config" > "$WORK/config.toml"

echo "[v4l2-capture] VM_DIR=$VM_DIR BIN=$BIN OUT=$OUT"
rc=0
OUT="$OUT" RUN_S=${RUN_S:-300} TIMEOUT_S=${TIMEOUT_S:-900} CHECK_V4L2=0 ALLOW_STOPPED=0 \
  EXTRA_FILES_DIR="$WORK/extra" \
  "$HARNESS/vm-e2e.sh" "$BIN" "$WORK/config.toml" "$WORK/lookout-capture.service" || rc=$?
if [ "$rc" = 2 ]; then echo "[v4l2-capture] FAIL: VM problem (see $OUT/console.log)"; exit 2; fi
[ -s "$OUT/rcs" ] || { echo "[v4l2-capture] FAIL: the guest job did not run (see $OUT/job.log, $OUT/console.log)"; exit 2; }

st=0
FRAMES="$FRAMES" FORMATS="$FORMATS" LOSS_TEST="$LOSS_TEST" python3 - "$OUT" <<'PY' || st=$?
import json, os, sys
out = sys.argv[1]
frames = int(os.environ["FRAMES"])
formats = os.environ["FORMATS"].split()
fails = []
def fail(msg):
    fails.append(msg)
    print("[v4l2-capture] FAIL:", msg)
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except Exception as e:
        err = ""
        p = os.path.join(out, name.replace(".json", ".err"))
        if os.path.exists(p):
            err = open(p).read().strip()[-400:]
        fail(f"{name}: not readable JSON ({e}); stderr: {err!r}")
        return None
rcs = dict(l.split() for l in open(os.path.join(out, "rcs")) if l.strip())
for k, v in rcs.items():
    if k != "loss" and v != "0":
        fail(f"`{k}` exited with status {v}")
text = open(os.path.join(out, "devices.txt")).read()
if "/dev/video0" not in text:
    fail("`lookout devices` does not list /dev/video0:\n" + text[:400])
devs = load("devices.json")
if devs is not None:
    v0 = [d for d in devs if d["path"] == "/dev/video0"]
    if not v0:
        fail(f"devices --json has no /dev/video0: {[d['path'] for d in devs]}")
    else:
        d = v0[0]
        if d["driver"] != "vivid":
            fail(f"/dev/video0 driver is {d['driver']!r}, expected vivid")
        offered = {f["fourcc"]: f for f in d["formats"]}
        for f in formats:
            if f not in offered:
                fail(f"vivid format {f} missing from the listing ({len(offered)} formats listed)")
                continue
            sizes = [(s.get("width"), s.get("height")) for s in offered[f]["sizes"]]
            if (640, 480) not in sizes:
                fail(f"{f}: 640x480 not listed: {sizes[:8]}")
            rates = [r for s in offered[f]["sizes"] for r in s["rates"]]
            if not rates:
                fail(f"{f}: no frame rates listed")
        print(f"[v4l2-capture] devices: /dev/video0 {d['card']!r} driver {d['driver']}, {len(offered)} formats")
for f in formats:
    r = load(f"capture-{f}.json")
    if r is None:
        continue
    summary = (f"{f}: {r['frames']} frames {r['format']} {r['width']}x{r['height']} seq {r['first_seq']}..{r['last_seq']} "
               f"dropped {r['stats']['dropped_stale']} corrupt {r['stats']['corrupt']} "
               f"mean interval {r['mean_interval_ms']} ms")
    print("[v4l2-capture]", summary)
    if r["frames"] < frames:
        fail(f"{f}: {r['frames']} frames, expected {frames}")
    fourcc = {"YUYV": "YUYV", "NV12": "NV12", "GREY": "GREY"}.get(f, f)
    if r["format"] != fourcc or (r["width"], r["height"]) != (640, 480):
        fail(f"{f}: negotiated {r['format']} {r['width']}x{r['height']}, expected {fourcc} 640x480")
    if not r["seq_increasing"]:
        fail(f"{f}: sequence numbers not strictly increasing")
    if not r["timestamps_monotonic"]:
        fail(f"{f}: capture timestamps went backwards")
    if not (r["last_captured_at"] or 0) > (r["first_captured_at"] or 0):
        fail(f"{f}: timestamps did not advance ({r['first_captured_at']} .. {r['last_captured_at']})")
    if r["stats"]["corrupt"] != 0:
        fail(f"{f}: {r['stats']['corrupt']} corrupt frames")
if os.environ["LOSS_TEST"] == "1":
    err = open(os.path.join(out, "loss.err")).read() if os.path.exists(os.path.join(out, "loss.err")) else ""
    unplug = open(os.path.join(out, "loss-unplug.txt")).read() if os.path.exists(os.path.join(out, "loss-unplug.txt")) else ""
    try:
        r = json.load(open(os.path.join(out, "loss.json")))
    except Exception:
        r = None
    if "bind failed" in unplug:
        fail(f"camera loss: could not unbind/bind vivid in the guest: {unplug.strip()[:300]}")
    elif r is None:
        fail(f"camera loss: capture did not survive (rc {rcs.get('loss')}): {err.strip()[-400:]}")
    else:
        lost = [e for e in r["errors"] if "camera lost" in e]
        print(f"[v4l2-capture] loss: {r['frames']} frames, reopens {r['stats']['reopens']}, errors {r['errors'][:3]}")
        if not lost:
            fail(f"camera loss: no 'camera lost' error reported: {r['errors']}")
        if r["stats"]["reopens"] < 1:
            fail("camera loss: the source did not reopen the camera")
        if r["frames"] < 40:
            fail(f"camera loss: {r['frames']} frames, expected 40 after the reopen")
        if not r["seq_increasing"]:
            fail("camera loss: sequence numbers not increasing across the reopen")
sys.exit(1 if fails else 0)
PY
if [ $st = 0 ]; then echo "[v4l2-capture] PASS (artifacts in $OUT)"; else echo "[v4l2-capture] FAILED (artifacts in $OUT)"; fi
exit $st
