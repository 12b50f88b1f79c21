#!/usr/bin/env bash
# scripts/deb.sh TARGET [--no-build]
#
# Builds the Debian package for one target, e.g.
#   scripts/deb.sh aarch64-unknown-linux-gnu          → target/debian/lookout_<v>-1_arm64.deb
#   scripts/deb.sh armv7-unknown-linux-gnueabihf      → target/debian/lookout_<v>-1_armhf.deb
# with cargo-deb (pinned below; installed from crates.io if missing). The package holds
# /usr/bin/lookout, /etc/lookout/lookout.toml (a conffile), the systemd unit (enabled and
# started on install; a DynamicUser, so no user is created), the INT8 models in
# /usr/share/lookout/models and the licences/NOTICE in /usr/share/doc/lookout.
#
# The release profile uses fat LTO: a cold ARM release build takes 10-15 min on 2 cores.
# --no-build packages the binary already in target/TARGET/release/lookout.
# Prints the package's control data, its contents and the newest glibc symbol version the
# binary needs (the oldest distribution it runs on).
set -euo pipefail
CARGO_DEB_VERSION=3.8.0
[ $# -ge 1 ] || { sed -n '2,16p' "$0"; exit 2; }
TARGET=$1
BUILD=1
[ "${2:-}" = "--no-build" ] && BUILD=0
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
  echo "deb.sh: cargo build --release --target $TARGET (fat LTO: this takes a while)"
  cargo build --release --target "$TARGET" --bin lookout
fi
BIN=$TARGET_DIR/$TARGET/release/lookout
[ -x "$BIN" ] || { echo "deb.sh: no binary at $BIN (build it, or drop --no-build)" >&2; exit 1; }

# The binary is stripped by the release profile (strip = true), so cargo-deb need not run a
# target strip tool.
DEB=$(cargo deb --target "$TARGET" --no-build --no-strip 2>&1 | tee /dev/stderr | grep -E '\.deb$' | tail -1)
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
fi
