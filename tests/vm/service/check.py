#!/usr/bin/env python3
"""Host-side assertions of tests/vm/service-e2e.sh on what tests/vm/service/job.sh collected.

Usage: check.py OUT_DIR   (exit 0: all held; 1: a failure, each printed)
"""
import json
import os
import sys

STATS_FIELDS = ["FPS", "DETECT_FPS", "MODEL_TIME_MS", "MODEL_TIME_P95_MS", "TRACK_TIME_MS",
                "FRAME_AGE_MS", "FRAME_AGE_P95_MS", "FRAMES_DROPPED", "TRACKS"]

out = sys.argv[1]
fails = []


def fail(msg):
    fails.append(msg)
    print("[service-e2e] FAIL:", msg)


def info(msg):
    print("[service-e2e]", msg)


def read(name):
    p = os.path.join(out, name)
    return open(p, errors="replace").read() if os.path.exists(p) else ""


# --- steps.txt: marks (phase -> realtime µs), results, `systemctl show` snapshots ----------------
marks, notes, shows, exits = {}, {}, {}, {}
for line in read("steps.txt").splitlines():
    parts = line.split(" ", 2)
    if parts[0] == "MARK" and len(parts) == 3:
        marks[parts[1]] = int(parts[2])
    elif parts[0] == "SHOW" and len(parts) == 3:
        shows[parts[1]] = dict(kv.split("=", 1) for kv in parts[2].split() if "=" in kv)
    elif parts[0] == "EXITS":
        exits[parts[1]] = parts[2] if len(parts) == 3 else ""
    elif len(parts) >= 2:
        notes[parts[0]] = parts[1]

# --- the journal -------------------------------------------------------------------------------
entries = []
for line in read("lookout-journal.json").splitlines():
    try:
        entries.append(json.loads(line))
    except ValueError:
        pass
own = [e for e in entries if e.get("SYSLOG_IDENTIFIER") == "lookout" or "LOOKOUT_EVENT" in e]
info(f"journal: {len(entries)} entries, {len(own)} from lookout; phases: {sorted(marks, key=marks.get)}")


def t(e):
    return int(e.get("__REALTIME_TIMESTAMP", 0))


def between(a, b, event=None):
    lo, hi = marks.get(a), marks.get(b)
    if lo is None:
        return []
    return [e for e in own if t(e) >= lo and (hi is None or t(e) < hi)
            and (event is None or e.get("LOOKOUT_EVENT") == event)]


def msg(e):
    m = e.get("MESSAGE", "")
    return m if isinstance(m, str) else str(m)


def stat_line(e):
    return " ".join(f"{k}={e.get(k)}" for k in ["FPS", "DETECT_FPS", "MODEL_TIME_MS", "FRAME_AGE_MS",
                                                 "FRAMES_DROPPED", "TRACKS"])


def fps(e):
    try:
        return float(e.get("FPS", "0"))
    except ValueError:
        return 0.0


# --- 0. the package: installs, enables and starts the unit with the shipped config ---------------
inst = read("install.txt")
if not notes.get("DEB"):
    fail("install: the guest found no lookout_*_arm64.deb to install")
elif notes.get("INSTALL_RC") != "0":
    fail(f"install: apt-get install ./{notes.get('DEB')} rc {notes.get('INSTALL_RC')}: {inst[-600:]}")
else:
    info(f"install: {notes.get('DEB')} installed in {(marks['installed'] - marks['install']) / 1e6:.1f} s "
         f"(emulated; includes the start of the service)")
for path in ["/usr/bin/lookout", "/etc/lookout/lookout.toml", "/lib/systemd/system/lookout.service",
             "/usr/share/lookout/models/nanodet-g-320-int8.onnx", "/usr/share/doc/lookout/NOTICE"]:
    alt = path.replace("/lib/systemd", "/usr/lib/systemd")
    if notes.get("INSTALL_RC") == "0" and path not in inst and alt not in inst:
        fail(f"install: the package does not install {path}")
if notes.get("INSTALL_RC") == "0" and "/etc/lookout/lookout.toml" not in inst.split("== conffiles", 1)[-1]:
    fail("install: /etc/lookout/lookout.toml is not a conffile")
if notes.get("ENABLED") != "enabled":
    fail(f"install: the unit is not enabled after installing (is-enabled: {notes.get('ENABLED')})")
if notes.get("INSTALL_ACTIVE") != "active":
    fail(f"install: the unit is not running after installing (is-active: {notes.get('INSTALL_ACTIVE')})")
first = between("install", "installed")
if notes.get("INSTALL_ACTIVE") == "active":
    if not any("/etc/lookout/lookout.toml" in msg(e) for e in first):
        fail("install: the started service did not log its configuration /etc/lookout/lookout.toml")
    if not any("loaded" in msg(e) and "model" in msg(e) for e in first):
        fail("install: the started service did not log its model load")
    else:
        info("install: enabled, started (READY=1) with the shipped configuration: "
             + next(msg(e) for e in first if "loaded" in msg(e) and "model" in msg(e)))

# --- 1. start: READY, stats, sandbox ------------------------------------------------------------
if notes.get("CHECK_CONFIG_RC") != "0":
    fail(f"`lookout check-config /etc/lookout/lookout.toml` in the guest: rc {notes.get('CHECK_CONFIG_RC')}: "
         f"{read('check-config.txt')[-300:]}")
ready = shows.get("ready", {})
if notes.get("START_RC") != "0" or ready.get("ActiveState") != "active":
    fail(f"start: systemctl start rc {notes.get('START_RC')}, state {ready} (READY=1 not reached)")
else:
    secs = (marks["ready"] - marks["start"]) / 1e6
    info(f"start: READY=1 after {secs:.1f} s (emulated), MainPID {ready.get('MainPID')}")
stats = between("start", "run_end", "stats")
if len(stats) < 2:
    fail(f"start: {len(stats)} stats entries in the first run (expected >= 2 at stats_interval = 5 s)")
for e in stats:
    missing = [f for f in STATS_FIELDS if f not in e]
    if missing:
        fail(f"stats entry without {missing}: {msg(e)}")
        break
if stats:
    info(f"stats: {len(stats)} entries, last: {stat_line(stats[-1])}")
    if not any(fps(e) > 0 for e in stats):
        fail("stats: FPS stayed 0: no frames processed from /dev/video0")
    if not any(float(e.get("DETECT_FPS", "0") or 0) > 0 for e in stats):
        fail("stats: DETECT_FPS stayed 0: the detector never ran")
starts = between("start", "run_end", "start")
if starts and "/dev/video0" not in msg(starts[0]):
    fail(f"start: the source is not /dev/video0: {msg(starts[0])}")
for e in own:
    m = msg(e)
    if "could not pin" in m:
        fail(f"sandbox: thread pinning refused: {m}")
        break
for e in own:
    if "/proc/cpuinfo" in msg(e):
        fail(f"sandbox: tract could not read /proc/cpuinfo: {msg(e)}")
        break
for e in entries:
    if "Failed to set up" in msg(e) or "Failed at step" in msg(e):
        fail(f"systemd could not set up the sandbox: {msg(e)}")
status = read("proc-status.txt")
info("process: " + " | ".join(l.strip() for l in status.splitlines()))
info("threads: " + " | ".join(l.strip() for l in read("proc-threads.txt").splitlines()))
if status and "Seccomp:\t2" not in status:
    fail("sandbox: the daemon does not run under a seccomp filter")
if status and "NoNewPrivs:\t1" not in status:
    fail("sandbox: NoNewPrivs is not set")
if status:
    uid = next((l.split()[1] for l in status.splitlines() if l.startswith("Uid:")), "0")
    if uid == "0":
        fail("sandbox: the daemon runs as root")
# Each hardening setting, as the kernel applies it to the running daemon.
pw = read("passwd-lookout.txt").strip().split(":")
if len(pw) < 3:
    fail("package: no system user `lookout` after installing")
elif status:
    uid = next((l.split()[1] for l in status.splitlines() if l.startswith("Uid:")), "?")
    if uid != pw[2]:
        fail(f"sandbox: the daemon runs as uid {uid}, not the package's user lookout ({pw[2]})")
    else:
        info(f"sandbox: runs as the system user lookout (uid {uid})")
caps = dict(l.split(":", 1) for l in read("proc-caps.txt").splitlines() if ":" in l)
for k in ["CapPrm", "CapEff", "CapBnd", "CapAmb"]:
    if caps and int(caps.get(k, "1").strip() or "1", 16) != 0:
        fail(f"sandbox: {k} = {caps.get(k, '?').strip()} (CapabilityBoundingSet= should leave none)")
ns = {l.split()[0]: l.split()[1:] for l in read("proc-ns.txt").splitlines() if len(l.split()) == 3}
# Not the net namespace: the unit leaves PrivateNetwork= off so the metrics exporter can be
# scraped on the host's loopback (IPAddressDeny=any + IPAddressAllow=localhost instead).
for name, setting in [("ipc", "PrivateIPC"), ("uts", "ProtectHostname"),
                      ("mnt", "ProtectSystem/PrivateTmp"), ("user", "PrivateUsers")]:
    if ns and (name not in ns or ns[name][0] == ns[name][1]):
        fail(f"sandbox: the daemon shares PID 1's {name} namespace ({setting} not applied)")
mounts = {}
for l in read("proc-mountinfo.txt").splitlines():
    f = l.split()
    if len(f) > 5:
        mounts[f[4]] = f[5]  # mount point -> per-mount options
for point, setting in [("/", "ProtectSystem=strict"), ("/usr", "ProtectSystem=strict"),
                       ("/proc/sys", "ProtectKernelTunables"), ("/sys/fs/cgroup", "ProtectControlGroups")]:
    opts = mounts.get(point)
    if mounts and (opts is None or "ro" not in opts.split(",")):
        # "/usr" is on "/" in this guest: the root mount's flag covers it.
        if point == "/usr" and opts is None and "ro" in mounts.get("/", "").split(","):
            continue
        fail(f"sandbox: {point} is not read-only for the daemon ({setting}): {opts}")
for point, setting in [("/tmp", "PrivateTmp"), ("/home", "ProtectHome")]:
    if mounts and point not in mounts:
        fail(f"sandbox: no own mount at {point} ({setting})")
# StateDirectory=: with DynamicUser=yes it lives in /var/lib/private/lookout (/var/lib/lookout
# links there), the only writable place under the read-only /var/lib.
state = mounts.get("/var/lib/lookout") or mounts.get("/var/lib/private/lookout")
if mounts and (state is None or "rw" not in state.split(",")):
    fail(f"sandbox: the state directory /var/lib/lookout is not a writable mount ({state})")
if mounts and ns and caps:
    info("sandbox: no capabilities; own ipc/uts/mnt/user namespaces; / /proc/sys /sys/fs/cgroup "
         "read-only; private /tmp, hidden /home, writable /var/lib/lookout")
sec = [l for l in read("security.txt").splitlines() if "Overall exposure level" in l]
info("guest " + (sec[0].strip() if sec else "systemd-analyze security: no result"))
if run_end := shows.get("run_end"):
    if run_end.get("ActiveState") != "active" or run_end.get("MainPID") != ready.get("MainPID"):
        fail(f"start: the service did not keep running: {run_end}")

# --- 2./3. reloads ------------------------------------------------------------------------------
ok = between("reload_ok", "reload_bad")
if not any(e.get("LOOKOUT_EVENT") == "reloaded" for e in ok):
    fail("reload (valid file): no LOOKOUT_EVENT=reloaded in the journal: "
         + "; ".join(msg(e) for e in ok[:6]))
else:
    info("reload ok: " + next(msg(e) for e in ok if e.get("LOOKOUT_EVENT") == "reloaded"))
s = shows.get("reload_ok", {})
if s.get("ActiveState") != "active" or s.get("MainPID") != ready.get("MainPID"):
    fail(f"reload (valid file): service not active in the same process: {s}")
bad = between("reload_bad", "rmmod")
rej = [e for e in bad if e.get("LOOKOUT_EVENT") == "reload_rejected"]
if not rej:
    fail("reload (invalid file): no LOOKOUT_EVENT=reload_rejected: " + "; ".join(msg(e) for e in bad[:6]))
else:
    keys = {e.get("CONFIG_KEY") for e in rej}
    info(f"reload rejected: keys {sorted(k for k in keys if k)}: {msg(rej[0])}")
    if "model.threshold" not in keys:
        fail(f"reload (invalid file): the rejection does not name model.threshold: {keys}")
s = shows.get("reload_bad", {})
if s.get("ActiveState") != "active" or s.get("MainPID") != ready.get("MainPID"):
    fail(f"reload (invalid file): service not active in the same process: {s}")
if not any(fps(e) > 0 for e in between("reload_bad", "rmmod", "stats")):
    fail("reload (invalid file): no frames processed after the rejected reload")

# --- 4. camera loss ------------------------------------------------------------------------------
how = notes.get("LOSS_HOW")
if how not in ("rmmod", "unbind"):
    fail(f"camera loss: could not remove the camera in the guest: {read('rmmod.txt').strip()[:300]}")
elif notes.get("PLUG_RC") != "0":
    fail(f"camera loss: could not bring the camera back ({how}): {read('rmmod.txt').strip()[:300]}")
else:
    info(f"camera loss: camera removed by {how}")
    lost = [e for e in between("rmmod", "loss_end") if e.get("LOOKOUT_EVENT") in ("source_error", "fatal")
            or "camera" in msg(e).lower()]
    if not lost:
        fail("camera loss: nothing logged after rmmod vivid")
    else:
        info(f"camera loss: {msg(lost[0])}")
    after = [e for e in between("modprobe", "loss_end", "stats") if fps(e) > 0]
    s = shows.get("loss_end", {})
    restarts = int(s.get("NRestarts", "0") or 0)
    if not after:
        fail(f"camera loss: no frames processed after modprobe vivid (state {s})")
    else:
        how = "same process" if s.get("MainPID") == ready.get("MainPID") else f"after {restarts} restart(s)"
        info(f"camera loss: recovered ({how}): {stat_line(after[-1])}")
    if s.get("ActiveState") != "active":
        fail(f"camera loss: service not active at the end: {s}")

# --- 5. stop --------------------------------------------------------------------------------------
e5 = exits.get("stop", "")
if notes.get("STOP_RC") != "0" or "SERVICE_RESULT=success" not in e5 or "EXIT_STATUS=0" not in e5:
    fail(f"stop: not a clean exit: systemctl stop rc {notes.get('STOP_RC')}, {e5!r}, {shows.get('stop')}")
else:
    secs = (marks["stopped"] - marks["stop"]) / 1e6
    summary = [e for e in between("stop", "stopped") if e.get("LOOKOUT_EVENT") == "summary"]
    info(f"stop: clean exit in {secs:.1f} s ({e5.strip(';')})"
         + (f"; {msg(summary[0])}" if summary else ""))

# --- 5b. camera missing at start -------------------------------------------------------------------
# Held on its first full run (2026-11-26, a fresh-clone `CI=true .ci/run` here: started without
# the camera, STATUS "waiting for the camera to appear", the camera appeared after 14 attempts,
# frames in the same process, NRestarts=0), so its findings are failures like the others.
LATE_CAMERA_FATAL = True
_fail = fail


def fail(msg):  # noqa: F811 (scoped override for scenario 5b)
    if LATE_CAMERA_FATAL:
        _fail(msg)
    else:
        print("[service-e2e] LATE-CAMERA WARN (informational):", msg)


late_how = notes.get("LATE_HOW")
if late_how not in ("rmmod", "unbind"):
    fail(f"late camera: could not remove the camera before the start: {read('late.txt').strip()[:300]}")
else:
    w = shows.get("late_waiting", {})
    if notes.get("LATE_START_RC") != "0" or w.get("ActiveState") != "active":
        fail(f"late camera: the service did not start without its camera (rc {notes.get('LATE_START_RC')}, {w})")
    if "waiting_for_the_camera" not in notes.get("LATE_STATUS", ""):
        fail(f"late camera: STATUS does not say it waits: {notes.get('LATE_STATUS')!r}")
    waiting = [e for e in between("late_start", "late_plug") if e.get("LOOKOUT_EVENT") == "camera_waiting"]
    if not waiting:
        fail("late camera: no LOOKOUT_EVENT=camera_waiting after the start")
    else:
        info(f"late camera: started without it, STATUS {notes.get('LATE_STATUS', '').replace('_', ' ')!r}: "
             f"{msg(waiting[0])}")
    appeared = [e for e in between("late_plug", "late_end") if e.get("LOOKOUT_EVENT") == "camera_appeared"]
    after = [e for e in between("late_plug", "late_end", "stats") if fps(e) > 0]
    e = shows.get("late_end", {})
    if not appeared or not after:
        fail(f"late camera: not streaming after the camera appeared (appeared: {len(appeared)}, "
             f"stats with frames: {len(after)}, state {e})")
    else:
        info(f"late camera: {msg(appeared[0])}; {stat_line(after[-1])}")
    if e.get("MainPID") != w.get("MainPID") or e.get("NRestarts") not in ("0", None):
        fail(f"late camera: restarted while waiting (watchdog not fed?): {w} -> {e}")

fail = _fail

# --- 5c. two cameras sharing one detector --------------------------------------------------------
two = between("two_cams", "two_cams_end")
if notes.get("TWO_CHECK_RC") != "0":
    fail(f"two cameras: check-config refused the two-camera file: {read('two-cameras.txt')[-400:]}")
elif notes.get("TWO_START_RC") != "0":
    fail(f"two cameras: systemctl start rc {notes.get('TWO_START_RC')}: {read('two-cameras.txt')[-300:]}")
else:
    streaming = {}
    for e in two:
        if e.get("LOOKOUT_EVENT") == "stats" and fps(e) > 0:
            streaming.setdefault(e.get("CAMERA"), []).append(e)
    loads = [e for e in two if "loaded" in msg(e) and "model" in msg(e)]
    detected = [c for c, es in streaming.items()
                if any(float(e.get("DETECT_FPS", "0") or 0) > 0 for e in es)]
    if sorted(streaming) != ["door", "yard"]:
        fail(f"two cameras: stats with frames from {sorted(streaming)}, expected door and yard "
             f"({read('two-cameras.txt').strip()[:300]})")
    elif len(loads) != 1:
        fail(f"two cameras: the model was loaded {len(loads)} times, expected once: "
             + "; ".join(msg(e) for e in loads[:3]))
    elif not detected:
        fail("two cameras: DETECT_FPS stayed 0 on both cameras: the shared detector never ran")
    else:
        info("two cameras: one model load, both streaming: "
             + "; ".join(f"{c}: {stat_line(es[-1])}" for c, es in sorted(streaming.items()))
             + f"; detections on {sorted(detected)}")
    e5c = exits.get("two_cams", "")
    if "SERVICE_RESULT=success" not in e5c or "EXIT_STATUS=0" not in e5c:
        fail(f"two cameras: the stop was not clean: {e5c!r}")

# --- 6. bad configuration ---------------------------------------------------------------------------
s = shows.get("badcfg", {})
e6 = exits.get("badcfg", "")
cfg_errors = [e for e in between("badcfg", "badcfg_end") if e.get("LOOKOUT_EVENT") == "config_error"]
if notes.get("BADCFG_START_RC") == "0":
    fail("bad config: systemctl start succeeded")
if s.get("ExecMainStatus") != "78" or s.get("Result") != "exit-code":
    fail(f"bad config: expected exit status 78 and Result=exit-code, got {s}")
if s.get("NRestarts") not in ("0", None) or e6.count("EXIT_STATUS=") > 1:
    fail(f"bad config: restarted ({s.get('NRestarts')} restarts; exits {e6!r})")
if not cfg_errors or not any(e.get("CONFIG_KEY") == "model.threshold" for e in cfg_errors):
    fail("bad config: no config_error naming model.threshold: " + "; ".join(msg(e) for e in cfg_errors[:3]))
else:
    info(f"bad config: exit 78, {s.get('ActiveState')}/{s.get('Result')}, NRestarts={s.get('NRestarts')}: "
         f"{msg(cfg_errors[0])}")

# --- MQTT to the host's broker, through scenarios 1-5 -----------------------------------------------
# mqtt.txt: "<arrival time> <retain flag> <topic> <payload>" per message (mosquitto_sub on the host).
if os.path.exists(os.path.join(out, "mqtt.txt")):
    msgs = []
    for line in read("mqtt.txt").splitlines():
        parts = line.split(" ", 3)
        if len(parts) >= 3:
            msgs.append((parts[2], parts[3] if len(parts) == 4 else ""))
    topics = [tp for tp, _ in msgs]
    avail = [p for tp, p in msgs if tp == "lookout/available"]
    connected = between("start", "run_end", "mqtt_connected")
    if not connected:
        fail("mqtt: no mqtt_connected in the journal of the first run (network card: "
             f"{notes.get('NET')}; broker log: {read('mosquitto.log')[-300:]!r})")
    else:
        info(f"mqtt: {msg(connected[0])} (guest network: {notes.get('NET')})")
    if "online" not in avail:
        fail(f"mqtt: no `online` on lookout/available (got {avail})")
    elif "offline" not in avail[avail.index("online"):]:
        fail(f"mqtt: no `offline` on lookout/available after `online` (clean stop; got {avail})")
    configs = [tp for tp in topics if tp.startswith("homeassistant/") and tp.endswith("/config")]
    if not any(tp.startswith("homeassistant/binary_sensor/") for tp in configs):
        fail(f"mqtt: no Home Assistant binary_sensor discovery config ({len(configs)} configs)")
    stats_msgs = []
    for tp, p in msgs:
        if tp == "lookout/stats":
            try:
                stats_msgs.append(json.loads(p))
            except ValueError:
                fail(f"mqtt: lookout/stats is not JSON: {p[:200]!r}")
    if not stats_msgs or not any(float(m.get("fps", 0) or 0) > 0 for m in stats_msgs):
        fail(f"mqtt: no lookout/stats with fps > 0 ({len(stats_msgs)} stats messages)")
    if not fails or all(not f.startswith("mqtt:") for f in fails):
        info(f"mqtt: {len(msgs)} messages from the guest: availability {avail}, {len(configs)} "
             f"discovery configs, {len(stats_msgs)} stats (last fps {stats_msgs[-1].get('fps') if stats_msgs else None})")
else:
    info("mqtt: not checked (no broker on the host; see the note above)")

if "DONE" not in notes and "DONE" not in read("steps.txt"):
    fail("the guest job did not finish")
print(f"[service-e2e] {'all assertions held' if not fails else f'{len(fails)} failure(s)'}")
sys.exit(1 if fails else 0)
