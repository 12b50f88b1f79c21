#!/usr/bin/env bash
# scripts/cross-image.sh [TARGET...]
#
# Builds, from Debian packages alone, the container images `cross` uses for the Pi targets
# (Cross.toml names them):
#   localhost/lookout-cross:aarch64-unknown-linux-gnu      Pi 3/4/5, Zero 2 W (64-bit OS)
#   localhost/lookout-cross:armv7-unknown-linux-gnueabihf  Pi 2/3/4 (32-bit OS)
# (both by default). Each is a Debian base made by debootstrap and imported
# (localhost/lookout-cross-base:<suite>), plus the host gcc (build scripts), libclang (bindgen
# on <linux/videodev2.h>), pkg-config, and the target's cross gcc, binutils, C library and
# kernel headers. No image registry is contacted; packages come from the Debian mirror.
# `cross` mounts the host's Rust toolchain into the image, so no Rust is installed in it.
#
# Idempotent: an image whose label `org.lookout.cross-image.key` matches this script's
# recipe is kept ("up to date"); the engine's own storage is the cache. debootstrap keeps the
# downloaded packages in $LOOKOUT_CROSS_CACHE/debs (default ~/.cache/lookout-cross).
#
# Environment:
#   CROSS_CONTAINER_ENGINE  podman or docker (default: podman when installed, else docker),
#                           the same variable `cross` reads
#   LOOKOUT_CROSS_SUITE     Debian suite of the images (default bookworm, glibc 2.36)
#   LOOKOUT_CROSS_MIRROR    Debian mirror (default http://deb.debian.org/debian)
#   LOOKOUT_CROSS_CACHE     debootstrap's package cache (default ~/.cache/lookout-cross)
# Needs root (or sudo) for debootstrap, Linux, and debootstrap installed (apt install
# debootstrap). Cold: ~6 min and ~1.2 GB per image on 2 cores; warm: a second.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf)
SUITE=${LOOKOUT_CROSS_SUITE:-bookworm}
MIRROR=${LOOKOUT_CROSS_MIRROR:-http://deb.debian.org/debian}
CACHE=${LOOKOUT_CROSS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lookout-cross}
ENGINE=${CROSS_CONTAINER_ENGINE:-}
if [ -z "$ENGINE" ]; then
  if command -v podman >/dev/null; then ENGINE=podman
  elif command -v docker >/dev/null; then ENGINE=docker
  else echo "cross-image.sh: neither podman nor docker is installed (apt install podman)" >&2; exit 1
  fi
fi
T0=$(date +%s)
say() { echo "[cross-image $(( $(date +%s) - T0 ))s] $*"; }
sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
LABEL=org.lookout.cross-image.key
# The recipe's key: this script and the suite; a changed recipe rebuilds the images.
KEY=$(cat "$0" | sha256sum | cut -c1-16)-$SUITE
BASE=localhost/lookout-cross-base:$SUITE

# image_key IMAGE: the key label of a local image, empty when there is no such image.
image_key() {
  "$ENGINE" image inspect --format "{{ index .Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null || true
}

# Common to both targets: the host C compiler (build scripts, proc-macro links), libclang for
# bindgen and pkg-config.
COMMON_PKGS="gcc libc6-dev libclang-dev pkg-config"
target_pkgs() {
  case $1 in
    aarch64-unknown-linux-gnu) echo "gcc-aarch64-linux-gnu libc6-dev-arm64-cross linux-libc-dev-arm64-cross" ;;
    armv7-unknown-linux-gnueabihf) echo "gcc-arm-linux-gnueabihf libc6-dev-armhf-cross linux-libc-dev-armhf-cross" ;;
    *) echo "cross-image.sh: unsupported target $1 (aarch64-unknown-linux-gnu, armv7-unknown-linux-gnueabihf)" >&2; return 1 ;;
  esac
}
for t in "${TARGETS[@]}"; do target_pkgs "$t" >/dev/null; done

todo=()
for t in "${TARGETS[@]}"; do
  if [ "$(image_key "localhost/lookout-cross:$t")" = "$KEY" ]; then
    say "localhost/lookout-cross:$t is up to date ($KEY)"
  else
    todo+=("$t")
  fi
done
[ ${#todo[@]} -gt 0 ] || exit 0

if [ "$(image_key "$BASE")" != "$KEY" ]; then
  command -v debootstrap >/dev/null || { echo "cross-image.sh: debootstrap is not installed (apt install debootstrap)" >&2; exit 1; }
  root=$(mktemp -d "${TMPDIR:-/tmp}/lookout-cross-rootfs.XXXXXX")
  trap '$sudo rm -rf "$root"' EXIT
  $sudo mkdir -p "$CACHE/debs"
  say "debootstrap --variant=minbase $SUITE (the base image $BASE)"
  $sudo debootstrap --variant=minbase --cache-dir="$CACHE/debs" "$SUITE" "$root" "$MIRROR" >"$root.log" 2>&1 \
    || { tail -n 30 "$root.log" >&2; echo "cross-image.sh: debootstrap failed (log above)" >&2; exit 1; }
  rm -f "$root.log"
  $sudo rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  say "importing the base into $ENGINE"
  $sudo tar -C "$root" --numeric-owner -c . | "$ENGINE" import --change "LABEL $LABEL=$KEY" - "$BASE" >/dev/null
  $sudo rm -rf "$root"
  trap - EXIT
fi

ctx=$(mktemp -d "${TMPDIR:-/tmp}/lookout-cross-ctx.XXXXXX")
for t in "${todo[@]}"; do
  say "building localhost/lookout-cross:$t ($(target_pkgs "$t"))"
  # The first RUN is the same for every target, so the engine's layer cache shares it.
  cat >"$ctx/Containerfile" <<EOF
FROM $BASE
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends $COMMON_PKGS && rm -rf /var/lib/apt/lists/*
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends $(target_pkgs "$t") && rm -rf /var/lib/apt/lists/*
EOF
  "$ENGINE" build --network host --label "$LABEL=$KEY" -t "localhost/lookout-cross:$t" -f "$ctx/Containerfile" "$ctx" >"$ctx/build.log" 2>&1 \
    || { tail -n 30 "$ctx/build.log" >&2; echo "cross-image.sh: $ENGINE build of $t failed (log above)" >&2; rm -rf "$ctx"; exit 1; }
  say "localhost/lookout-cross:$t built"
done
rm -rf "$ctx"
"$ENGINE" images --filter "reference=localhost/lookout-cross*"
