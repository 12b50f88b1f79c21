#!/usr/bin/env bash
# setup.sh — install what building lookout needs on Debian/Ubuntu/Raspberry Pi OS, once.
#   libclang-dev : the `v4l` crate runs bindgen on <linux/videodev2.h> at build time
#   pkg-config, gcc : C parts of dependencies (tract-linalg's assembly kernels)
#   (TESTS=1) ffmpeg: the YUV4MPEG2 and RTSP-shaped `exec:` source tests
#                  (tests/exec_source.rs, skipped with a notice without it)
# With CROSS=1 also the ARM cross toolchains and qemu-user (cross builds and ARM tests).
# With TESTS=1 (scripts/test.sh) also what the tests run for real: mosquitto and its clients
# (the MQTT tests start their own broker on a free loopback port; Debian's package also
# starts a system broker on 127.0.0.1:1883, which the tests leave alone).
# With TEST_TOOLS=1 also prometheus, for its promtool that lints /metrics in tests/metrics.rs
# (opt-in: the Debian package also installs and starts a Prometheus server; CI sets it).
# Idempotent; uses sudo when not root. Prints nothing when everything is there.
# When another apt/dpkg holds the package lock (Raspberry Pi OS runs unattended upgrades
# after boot), it says so and waits for it, up to APT_LOCK_WAIT seconds (default 600).
set -euo pipefail
pkgs=(libclang-dev gcc pkg-config)
if [ "${CROSS:-0}" = 1 ]; then
  pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user)
fi
if [ "${TESTS:-0}" = 1 ]; then
  pkgs+=(mosquitto mosquitto-clients ffmpeg)
fi
if [ "${TEST_TOOLS:-0}" = 1 ]; then
  pkgs+=(prometheus)
fi
lock_wait=${APT_LOCK_WAIT:-600}

# apt_get ARGS...: apt-get that waits for the apt/dpkg locks instead of failing. apt ≥ 1.9.11
# waits for the dpkg lock itself (DPkg::Lock::Timeout, polled briefly here so the wait can be
# announced); the package-lists lock of `apt-get update` is not covered by that option, so a
# lock failure is retried until the deadline. Other failures print apt's errors and stop.
apt_get() {
  local deadline=$(( $(date +%s) + lock_wait )) told=0 err rc
  err=$(mktemp)
  while :; do
    rc=0
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=5 "$@" 2>"$err" || rc=$?
    if [ "$rc" = 0 ]; then rm -f "$err"; return 0; fi
    if ! grep -qiE 'could not get lock|unable to lock|unable to acquire the dpkg frontend lock' "$err" \
       || [ "$(date +%s)" -ge "$deadline" ]; then
      cat "$err" >&2; rm -f "$err"
      [ "$told" = 0 ] || echo "setup: gave up waiting for the package lock after ${lock_wait}s" >&2
      return "$rc"
    fi
    if [ "$told" = 0 ]; then
      echo "setup: another apt/dpkg process holds the package lock ($(grep -m1 -io 'held by process.*' "$err" || echo 'e.g. unattended upgrades after boot')); waiting for it (up to ${lock_wait}s)..." >&2
      told=1
    fi
    sleep 5
  done
}

missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  echo "setup: installing ${missing[*]} (apt; a minute or two)" >&2
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null; then
  echo "setup: cargo not found: install Rust (rustup) first" >&2; exit 1
fi
if [ "${CROSS:-0}" = 1 ]; then
  rustup target add aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf >/dev/null 2>&1
fi
