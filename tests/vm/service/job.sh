#!/bin/sh
# tests/vm/service/job.sh — runs INSIDE the arm64 guest, as the oneshot unit
# lookout-e2e.service that ../service-e2e.sh hands to the harness (vm-e2e.sh).
#
# It installs the Debian package (lookout_*_arm64.deb from the job's extra files) with
# `apt-get install ./lookout_*.deb`, as a Pi owner would: the package enables and starts the
# unit with the shipped /etc/lookout/lookout.toml on /dev/video0. It records that, then stops
# the service, applies the test's settings to the conffile (stats every 5 s, a small model
# input) and a drop-in (below), and drives the scenarios with systemctl, writing to the job
# share (/mnt/job/out):
#   steps.txt            "MARK <phase> <realtime µs>" lines and the results of each step
#   lookout-journal.json journalctl -u lookout -o json (the assertions run on the host)
#   install.txt          apt-get's output; dpkg -L lookout; dpkg-query's conffiles
#   security.txt         systemd-analyze security lookout.service (online, guest systemd)
#   proc-*.txt           /proc views of the running daemon (user, groups, seccomp, affinity)
# The only change to the unit is a drop-in (zz-e2e.conf): a longer start timeout, since
# TCG emulation is 10-20x slower than a Pi, and an ExecStopPost that records how the main
# process ended (a unit that stops cleanly is garbage-collected at once).
set -u
X=/opt/edge-extra
O=/mnt/job/out
S=$O/steps.txt
: > "$S"
now() { date +%s%6N; }
mark() { echo "MARK $1 $(now)" >> "$S"; echo "[job] $1"; }
note() { echo "$*" >> "$S"; }
show() {
  note "SHOW $1 $(systemctl show lookout -p ActiveState,SubState,Result,ExecMainStatus,ExecMainCode,NRestarts,MainPID | tr '\n' ' ')"
}
exits() { note "EXITS $1 $(tr '\n' ';' < /run/lookout-exit 2>/dev/null)"; }
VIVID_OPTS=$(cat $X/vivid-opts)
RUN_WAIT=$(cat $X/run-wait)

# --- 0. install the package: enabled and started with the shipped configuration ---
DEB=$(ls $X/lookout_*_arm64.deb 2>/dev/null | head -1)
note "DEB ${DEB##*/}"
mark install
# (apt wants a path with a slash to take a file; this guest is offline: the dependencies,
# libc6 and libgcc-s1, are already there.)
DEBIAN_FRONTEND=noninteractive apt-get install -y "$DEB" > $O/install.txt 2>&1
note "INSTALL_RC $?"
mark installed
note "ENABLED $(systemctl is-enabled lookout 2>&1)"
note "INSTALL_ACTIVE $(systemctl is-active lookout 2>&1)"
show installed
{ echo "== dpkg -L lookout"; dpkg -L lookout; echo "== conffiles"; dpkg-query -W -f='${Conffiles}\n' lookout; } >> $O/install.txt 2>&1
systemctl stop lookout
note "INSTALL_STOP_RC $?"

# The test's settings, in the installed conffile: stats every 5 s so a short emulated run sees
# several reports, and a small model input (under TCG one 416x416 inference takes ~85 s).
sed -i -e 's/^stats_interval = 10.0$/stats_interval = 5.0/' \
       -e "s/^input_size = \[\]$/input_size = [$(cat $X/model-input)]/" /etc/lookout/lookout.toml
# MQTT to the host's broker (service-e2e.sh forwards 10.0.2.100:1883 to it): the guest's
# network card gets a static address from systemd-networkd, the conffile the broker's address.
if [ -s $X/mqtt-host ]; then
  mkdir -p /etc/systemd/network
  printf '[Match]\nName=e*\n[Network]\nAddress=10.0.2.15/24\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n' \
    > /etc/systemd/network/10-e2e.network
  systemctl start systemd-networkd
  for _ in $(seq 1 60); do
    grep -qs up /sys/class/net/e*/operstate && break
    sleep 1
  done
  note "NET $(for n in /sys/class/net/e*; do echo "${n##*/}=$(cat $n/operstate)"; done | tr '\n' ' ')"
  sed -i "s/^host = \"\"$/host = \"$(cat $X/mqtt-host)\"/" /etc/lookout/lookout.toml
fi
grep -E '^(stats_interval|input_size|spec|host) ' /etc/lookout/lookout.toml | tr '\n' ' ' | sed 's/^/TEST_SETTINGS /' >> "$S"; echo >> "$S"
mkdir -p /etc/systemd/system/lookout.service.d
cat > /etc/systemd/system/lookout.service.d/zz-e2e.conf <<'UNIT'
[Service]
TimeoutStartSec=900
ExecStopPost=+/bin/sh -c 'echo "SERVICE_RESULT=$SERVICE_RESULT EXIT_CODE=$EXIT_CODE EXIT_STATUS=$EXIT_STATUS" >> /run/lookout-exit'
UNIT
systemctl daemon-reload
rm -f /run/lookout-exit
systemd-analyze security lookout.service > $O/security.txt 2>&1
/usr/bin/lookout check-config /etc/lookout/lookout.toml > $O/check-config.txt 2>&1
note "CHECK_CONFIG_RC $?"

# --- 1. start on /dev/video0: `systemctl start` of a Type=notify unit returns after READY=1 ---
mark start
systemctl start lookout
note "START_RC $?"
mark ready
show ready
PID=$(systemctl show -p MainPID --value lookout)
if [ -n "$PID" ] && [ "$PID" != 0 ]; then
  grep -E '^(Uid|Gid|Groups|NoNewPrivs|Seccomp|Cpus_allowed_list):' /proc/$PID/status > $O/proc-status.txt 2>&1
  for t in /proc/$PID/task/*; do
    echo "$(cat $t/comm 2>/dev/null) $(grep Cpus_allowed_list $t/status 2>/dev/null)"
  done > $O/proc-threads.txt
  ps -o user=,group=,supgrp= -p "$PID" > $O/proc-user.txt 2>&1
  # The sandbox as the kernel sees it: capabilities, namespaces (own vs PID 1's), mounts.
  grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/$PID/status > $O/proc-caps.txt 2>&1
  for ns in net ipc uts mnt user; do
    echo "$ns $(readlink /proc/$PID/ns/$ns) $(readlink /proc/1/ns/$ns)"
  done > $O/proc-ns.txt
  cat /proc/$PID/mountinfo > $O/proc-mountinfo.txt 2>&1
  getent passwd lookout > $O/passwd-lookout.txt 2>&1
fi
sleep "$RUN_WAIT"
mark run_end
show run_end

# --- 2. reload with a valid change (SIGHUP through ExecReload) ---
sed -i 's/^detect_every = 5$/detect_every = 4/' /etc/lookout/lookout.toml
mark reload_ok
systemctl reload lookout
note "RELOAD_OK_RC $?"
sleep 15
show reload_ok

# --- 3. reload with an invalid file: rejected, the running configuration stays ---
cp /etc/lookout/lookout.toml /tmp/good.toml
sed -i 's/^threshold = 0.35$/threshold = 7.0/' /etc/lookout/lookout.toml
mark reload_bad
systemctl reload lookout
note "RELOAD_BAD_RC $?"
sleep 15
show reload_bad
cp /tmp/good.toml /etc/lookout/lookout.toml

# --- 4. camera loss while streaming, then the camera comes back ---
# An open /dev/video0 pins the vivid module (rmmod: "in use"), so the camera is unplugged by
# unbinding the vivid platform device from its driver (the node vanishes, reads fail with
# ENODEV, as when a USB camera is pulled) and plugged back by binding it again. rmmod is
# tried first in case nothing holds the module.
VDEV=$(ls -d /sys/bus/platform/drivers/vivid/vivid* 2>/dev/null | head -1)
VDEV=${VDEV##*/}
note "VIVID_DEVICE ${VDEV:-none}"
# unplug LOG: removes the camera (rmmod, else unbind), prints how (rmmod|unbind|failed).
unplug() {
  if rmmod vivid >> "$1" 2>&1; then
    echo rmmod
  elif [ -n "$VDEV" ] && echo "$VDEV" > /sys/bus/platform/drivers/vivid/unbind 2>> "$1"; then
    echo unbind
  else
    echo failed
  fi
}
# plug HOW: brings the camera back the way unplug removed it.
plug() {
  case $1 in
    rmmod) modprobe vivid $VIVID_OPTS ;;
    unbind) echo "$VDEV" > /sys/bus/platform/drivers/vivid/bind ;;
  esac
}
mark rmmod
: > $O/rmmod.txt
HOW=$(unplug $O/rmmod.txt)
note "LOSS_HOW $HOW"
ls -l /dev/video* >> $O/rmmod.txt 2>&1
sleep 10
mark modprobe
plug $HOW
note "PLUG_RC $?"
udevadm settle -t 30 || true
ls -l /dev/video* >> $O/rmmod.txt 2>&1
sleep 40
mark loss_end
show loss_end

# --- 5. systemctl stop: SIGTERM, clean exit ---
mark stop
systemctl stop lookout
note "STOP_RC $?"
mark stopped
exits stop
show stop

# --- 5b. camera missing at start (a USB camera that enumerates late): lookout starts anyway
# (READY, STATUS saying it waits, watchdog fed), then streams when the camera appears ---
mark late_unplug
LATE_HOW=$(unplug $O/late.txt)
note "LATE_HOW $LATE_HOW"
ls -l /dev/video* >> $O/late.txt 2>&1
rm -f /run/lookout-exit
mark late_start
# Bounded: a start that never reports READY must not eat the job's time budget.
timeout 300 systemctl start lookout
note "LATE_START_RC $?"
sleep 45
note "LATE_STATUS $(systemctl show -p StatusText --value lookout | tr ' ' '_')"
mark late_plug
show late_waiting
plug $LATE_HOW
note "LATE_PLUG_RC $?"
udevadm settle -t 30 || true
sleep 60
mark late_end
show late_end
systemctl stop lookout
exits late

# --- 5c. two cameras: the two vivid devices as two [[camera]] tables sharing one detector ---
# The conffile's [source] table is replaced by the cameras (a config has one or the other).
cp /etc/lookout/lookout.toml /tmp/one-camera.toml
awk '/^\[/ { skip = ($0 == "[source]") } !skip' /tmp/one-camera.toml > /etc/lookout/lookout.toml
printf '\n[[camera]]\nname = "door"\n[camera.source]\nspec = "/dev/video0"\nfps = 10\n' >> /etc/lookout/lookout.toml
printf '\n[[camera]]\nname = "yard"\n[camera.source]\nspec = "/dev/video1"\nfps = 10\n' >> /etc/lookout/lookout.toml
ls -l /dev/video* > $O/two-cameras.txt 2>&1
/usr/bin/lookout check-config /etc/lookout/lookout.toml >> $O/two-cameras.txt 2>&1
note "TWO_CHECK_RC $?"
rm -f /run/lookout-exit
mark two_cams
timeout 300 systemctl start lookout
note "TWO_START_RC $?"
sleep "$RUN_WAIT"
mark two_cams_stop
systemctl stop lookout
mark two_cams_end
exits two_cams
cp /tmp/one-camera.toml /etc/lookout/lookout.toml

# --- 6. bad configuration: exit 78, no restart loop ---
rm -f /run/lookout-exit
sed -i 's/^threshold = 0.35$/threshold = 7.0/' /etc/lookout/lookout.toml
systemctl reset-failed lookout 2>/dev/null
mark badcfg
systemctl start lookout
note "BADCFG_START_RC $?"
sleep 25
mark badcfg_end
show badcfg
exits badcfg

journalctl --no-pager -o json -u lookout > $O/lookout-journal.json
journalctl --no-pager -o short-monotonic -u lookout > $O/lookout-journal.txt
note "DONE"
exit 0
