#!/usr/bin/env bash
# setup.sh — install what building lookout needs on Debian/Ubuntu/Raspberry Pi OS, once.
#   libclang-dev : the `v4l` crate runs bindgen on <linux/videodev2.h> at build time
#   pkg-config, gcc : C parts of dependencies (tract-linalg's assembly kernels)
# With CROSS=1 also the ARM cross toolchains and qemu-user (cross builds and ARM tests).
# Idempotent; uses sudo when not root. Prints nothing when everything is there.
set -euo pipefail
pkgs=(libclang-dev gcc pkg-config)
if [ "${CROSS:-0}" = 1 ]; then
  pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user)
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null; then
  echo "setup: cargo not found: install Rust from https://rustup.rs first" >&2; exit 1
fi
if [ "${CROSS:-0}" = 1 ]; then
  rustup target add aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf >/dev/null 2>&1
fi
