#!/usr/bin/env bash
# make_recordings.sh — regenerate the ground-truth recordings in tests/data/truth/ (640x480,
# 10 fps, concatenated baseline JPEGs, like tests/data/demo/vtest-640x480-10fps.mjpeg).
#
# Sources: Debian 12's `opencv-doc` package (OpenCV's sample data; see README.md here):
#   vtest-200-399.mjpeg, vtest-400-599.mjpeg, vtest-600-794.mjpeg
#                        frames 200-399, 400-599, 600-794 of examples/data/vtest.avi
#   tree-wind.mjpeg      examples/data/tree.avi, 0-12 s (a tree in wind; no person, vehicle, animal)
#   vtest-mosaic-half.mjpeg  the bundled clip and the three stretches at half size in a 2x2 mosaic
#                        (distant people), with its truth made from theirs
#   plaza-empty-day.mjpeg, plaza-empty-night.mjpeg
#                        the per-pixel median of vtest.avi (the plaza with nobody in it), cropped
#                        to leave out the parked vehicles, played for 12 s with sensor noise and
#                        brightness flicker; the night one darkened, desaturated and noisier
# Needs: apt-get, dpkg-deb, ffmpeg, python3 with numpy and PIL (python3-numpy, python3-pil).
# Set OPENCV_DOC_DEB=/path/to/opencv-doc_*.deb to use a downloaded package instead of apt-get.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
OUT=${OUT:-$HERE}
QSCALE=${QSCALE:-15}   # ffmpeg -q:v for the vtest stretches; 15 keeps each under 3.5 MB
EXPECT_VTEST=45cddc9490be69345cbdab64ca583be65987e864ca408038e648db99e10516cf
EXPECT_TREE=4666099d0f704e310047b2f0a5ec9f936cb76a7271de9a2e70a0c57f82ac82dc
PY=${PYTHON:-/usr/bin/python3}
WORK=$(mktemp -d /tmp/lookout-truth.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

command -v ffmpeg >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null; }
"$PY" -c 'import numpy, PIL' 2>/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-numpy python3-pil >/dev/null; }
cd "$WORK"
if [ -n "${OPENCV_DOC_DEB:-}" ]; then
  cp "$OPENCV_DOC_DEB" .
else
  apt-get download opencv-doc >/dev/null 2>&1 || { echo "apt-get download opencv-doc failed" >&2; exit 1; }
fi
DEB=$(ls opencv-doc_*.deb)
dpkg-deb -x "$DEB" x
DATA=x/usr/share/doc/opencv-doc/examples/data
check() { # file expected-sha256
  [ -s "$1" ] || { echo "$1 not found in $DEB" >&2; exit 1; }
  local got; got=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$got" = "$2" ] || echo "warning: $1 sha256 $got differs from the recorded $2" >&2
}
check "$DATA/vtest.avi" "$EXPECT_VTEST"
check "$DATA/tree.avi" "$EXPECT_TREE"
ff() { ffmpeg -nostdin -hide_banner -loglevel error -y "$@"; }

# The further stretches of vtest.avi: same recipe as tests/data/demo/make_clip.sh.
for range in 200-399 400-599 600-794; do
  first=${range%-*} last=${range#*-}
  ff -i "$DATA/vtest.avi" \
    -vf "select=between(n\,$first\,$last),scale=640:480:flags=bicubic,format=yuvj420p" -vsync passthrough \
    -c:v mjpeg -q:v "$QSCALE" -f mjpeg "$OUT/vtest-$range.mjpeg"
done

# A tree in wind. tree.avi is 320x240 with about 2.5 distinct frames a second (its 15 fps
# stream repeats frames); fps=10 keeps that cadence. A hand enters after 22 s: we keep 0-12 s.
ff -i "$DATA/tree.avi" \
  -vf "fps=10,trim=end_frame=120,scale=640:480:flags=bicubic,format=yuvj420p" \
  -c:v mjpeg -q:v 14 -f mjpeg "$OUT/tree-wind.mjpeg"

# The empty plaza: median of every 3rd frame of vtest.avi, cropped (600x450 at 0,126: the lawn,
# road and lamp post; the van and car at the top right are left out), 12 s of it.
ff -i "$DATA/vtest.avi" -vf "select=not(mod(n\,3))" -vsync passthrough -f rawvideo -pix_fmt rgb24 - |
  "$PY" "$ROOT/scripts/truth/median_frame.py" 768 576 median.png
FLICKER="0.025*sin(2*PI*t/3.7)+0.012*sin(2*PI*t*1.3)"
ff -loop 1 -framerate 10 -i median.png \
  -vf "crop=600:450:0:126,scale=640:480:flags=bicubic,eq=brightness='$FLICKER':eval=frame,noise=alls=7:allf=t,format=yuvj420p" \
  -frames:v 120 -c:v mjpeg -q:v 14 -f mjpeg "$OUT/plaza-empty-day.mjpeg"
ff -loop 1 -framerate 10 -i median.png \
  -vf "crop=600:450:0:126,scale=640:480:flags=bicubic,eq=gamma=0.55:contrast=0.7:saturation=0.25:brightness='-0.08+$FLICKER':eval=frame,noise=alls=14:allf=t,format=yuvj420p" \
  -frames:v 120 -c:v mjpeg -q:v 14 -f mjpeg "$OUT/plaza-empty-night.mjpeg"

# Distant people: the bundled clip and the three stretches at half size, one per quadrant,
# and their truth (scripts/truth/mosaic.py: boxes halved and moved, ids kept per quadrant).
DEMO="$ROOT/tests/data/demo/vtest-640x480-10fps.mjpeg"
ff -f mjpeg -framerate 10 -i "$DEMO" -f mjpeg -framerate 10 -i "$OUT/vtest-200-399.mjpeg" \
  -f mjpeg -framerate 10 -i "$OUT/vtest-400-599.mjpeg" -f mjpeg -framerate 10 -i "$OUT/vtest-600-794.mjpeg" \
  -filter_complex "[0:v]scale=320:240:flags=area[a];[1:v]scale=320:240:flags=area[b];[2:v]scale=320:240:flags=area[c];[3:v]scale=320:240:flags=area[d];[a][b][c][d]xstack=inputs=4:layout=0_0|w0_0|0_h0|w0_h0:shortest=1,format=yuvj420p" \
  -frames:v 195 -c:v mjpeg -q:v "$QSCALE" -f mjpeg "$OUT/vtest-mosaic-half.mjpeg"
"$PY" "$ROOT/scripts/truth/mosaic.py" 640 480 195 "$HERE/vtest-640x480-10fps.gt.txt" \
  "$HERE/vtest-200-399.gt.txt" "$HERE/vtest-400-599.gt.txt" "$HERE/vtest-600-794.gt.txt" \
  > "$OUT/vtest-mosaic-half.gt.txt"

echo "from $DEB, ffmpeg $(ffmpeg -version | head -1 | cut -d' ' -f3):"
for f in vtest-200-399 vtest-400-599 vtest-600-794 tree-wind plaza-empty-day plaza-empty-night vtest-mosaic-half; do
  printf '%s  %9s bytes  %s.mjpeg\n' "$(sha256sum "$OUT/$f.mjpeg" | cut -d' ' -f1)" "$(stat -c %s "$OUT/$f.mjpeg")" "$f"
done
