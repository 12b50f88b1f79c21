#!/usr/bin/env bash
# scripts/deb.sh TARGET [--no-build] [--profile PROFILE]
#
# Builds the Debian package for one target, e.g.
#   scripts/deb.sh aarch64-unknown-linux-gnu          → target/debian/lookout_<v>-1_arm64.deb
#   scripts/deb.sh armv7-unknown-linux-gnueabihf      → target/debian/lookout_<v>-1_armhf.deb
# with cargo-deb (pinned below; installed from crates.io if missing). The package holds
# /usr/bin/lookout, /etc/lookout/lookout.toml (a conffile), the systemd unit (enabled and
# started on install; postinst creates the system user `lookout` it runs as), the INT8 models in
# /usr/share/lookout/models and the licences/NOTICE in /usr/share/doc/lookout.
#
# The release profile uses fat LTO: a cold ARM release build takes 10-15 min on 2 cores.
# --no-build packages the binary already in target/TARGET/release/lookout.
# --profile dev packages the dev-profile binary (dependencies optimised, tract's debug
# assertions on; stripped by cargo-deb) into target/debian/dev/: what CI installs in the
# emulated Pi, reusing the build of the ARM tests. Release packages are what you deploy.
# Prints the package's control data, its contents and the newest glibc symbol version the
# binary needs (the oldest distribution it runs on).
set -euo pipefail
CARGO_DEB_VERSION=3.8.0
[ $# -ge 1 ] || { sed -n '2,19p' "$0"; exit 2; }
TARGET=$1; shift
BUILD=1
PROFILE=release
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --profile) PROFILE=${2:?--profile needs a name}; shift ;;
    *) echo "deb.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
case "$PROFILE" in release) PDIR=release ;; dev) PDIR=debug ;; *) PDIR=$PROFILE ;; esac
cd "$(dirname "$0")/.."
TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}

case "$TARGET" in
  aarch64-unknown-linux-gnu) OBJDUMP=aarch64-linux-gnu-objdump ;;
  armv7-unknown-linux-gnueabihf|arm-unknown-linux-gnueabihf) OBJDUMP=arm-linux-gnueabihf-objdump ;;
  x86_64-unknown-linux-gnu) OBJDUMP=objdump ;;
  *) echo "deb.sh: unsupported target $TARGET (aarch64-unknown-linux-gnu, armv7-unknown-linux-gnueabihf, arm-unknown-linux-gnueabihf, x86_64-unknown-linux-gnu)" >&2; exit 2 ;;
esac

if ! cargo deb --version 2>/dev/null | grep -q " $CARGO_DEB_VERSION\b"; then
  echo "deb.sh: installing cargo-deb $CARGO_DEB_VERSION"
  cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked
fi

if [ $BUILD = 1 ]; then
  echo "deb.sh: cargo build --profile $PROFILE --target $TARGET$([ "$PROFILE" = release ] && echo ' (fat LTO: this takes a while)')"
  cargo build --profile "$PROFILE" --target "$TARGET" --bin lookout
fi
BIN=$TARGET_DIR/$TARGET/$PDIR/lookout
[ -x "$BIN" ] || { echo "deb.sh: no binary at $BIN (build it, or drop --no-build)" >&2; exit 1; }

# A release binary is stripped by its profile (strip = true), so cargo-deb need not run a
# target strip tool; a dev binary carries ~600 MB of debug info and is stripped here.
# (cargo deb's output goes through a file: `tee /dev/stderr` would truncate a log file that
# stderr is redirected to.)
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
if [ "$PROFILE" = release ]; then
  cargo deb --target "$TARGET" --no-build --no-strip > "$LOG" 2>&1 || { cat "$LOG" >&2; exit 1; }
else
  mkdir -p "$TARGET_DIR/debian/$PROFILE"
  cargo deb --target "$TARGET" --profile "$PROFILE" --no-build --strip \
    -o "$TARGET_DIR/debian/$PROFILE/" > "$LOG" 2>&1 || { cat "$LOG" >&2; exit 1; }
fi
cat "$LOG" >&2
DEB=$(grep -E '\.deb$' "$LOG" | tail -1)
[ -f "$DEB" ] || { echo "deb.sh: cargo deb did not report a .deb" >&2; exit 1; }

echo
echo "== $DEB"
dpkg-deb -I "$DEB"
echo "== contents"
dpkg-deb -c "$DEB"
echo "== conffiles"
dpkg-deb -f "$DEB" >/dev/null && dpkg-deb --ctrl-tarfile "$DEB" | tar -xOf - ./conffiles 2>/dev/null || echo "(none)"
if command -v "$OBJDUMP" >/dev/null; then
  floor=$("$OBJDUMP" -T "$BIN" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  echo "== glibc floor: $floor (the binary needs a C library at least this new)"
  # The package's Depends (Cargo.toml) must promise at least that much.
  want=$(dpkg-deb -f "$DEB" Depends | sed -n 's/.*libc6 (>= \([0-9.]*\)).*/\1/p')
  if [ -n "$want" ] && [ "$(printf '%s\n%s\n' "${floor#GLIBC_}" "$want" | sort -V | tail -1)" != "$want" ]; then
    echo "deb.sh: the binary needs $floor but the package depends on libc6 >= $want: raise it in Cargo.toml" >&2
    exit 1
  fi
fi
