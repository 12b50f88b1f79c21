#!/usr/bin/env bash
# make_clip.sh — regenerate tests/data/demo/vtest-640x480-10fps.mjpeg, the demo clip bundled
# into the lookout binary (`lookout run` with no config, source spec `demo`).
#
# Source: OpenCV's sample video vtest.avi (768x576, 10 fps, MS-MPEG4v3) as shipped in Debian 12's
# `opencv-doc` package. Output: frames 0-199 (20 s at 10 fps) scaled to 640x480, stored as
# concatenated baseline JPEGs ("MJPEG" the way a UVC camera sends it; no container).
# Needs: apt-get, dpkg-deb, ffmpeg (installed from Debian if missing). Runs as root or with sudo.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$HERE/vtest-640x480-10fps.mjpeg}
QSCALE=${QSCALE:-12}         # ffmpeg -q:v (2 = best .. 31 = worst); 12 keeps the clip under 4 MB
EXPECT_SHA=45cddc9490be69345cbdab64ca583be65987e864ca408038e648db99e10516cf
WORK=$(mktemp -d /tmp/lookout-clip.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

command -v ffmpeg >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null; }
cd "$WORK"
apt-get download opencv-doc >/dev/null 2>&1 || { echo "apt-get download opencv-doc failed" >&2; exit 1; }
dpkg-deb -x opencv-doc_*.deb x
SRC=x/usr/share/doc/opencv-doc/examples/data/vtest.avi
[ -s "$SRC" ] || { echo "vtest.avi not found at $SRC in $(ls opencv-doc_*.deb)" >&2; exit 1; }
GOT=$(sha256sum "$SRC" | cut -d' ' -f1)
[ "$GOT" = "$EXPECT_SHA" ] || echo "warning: vtest.avi sha256 $GOT differs from the recorded $EXPECT_SHA" >&2

ffmpeg -nostdin -hide_banner -loglevel error -y -i "$SRC" \
  -vf "select=lt(n\,200),scale=640:480:flags=bicubic,format=yuvj420p" -vsync passthrough \
  -c:v mjpeg -q:v "$QSCALE" -f mjpeg "$OUT"
echo "wrote $OUT ($(stat -c %s "$OUT") bytes) from $(ls opencv-doc_*.deb), ffmpeg $(ffmpeg -version | head -1 | cut -d' ' -f3)"
sha256sum "$OUT"
