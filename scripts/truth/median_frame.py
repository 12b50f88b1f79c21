#!/usr/bin/python3
"""Per-pixel median of raw RGB24 frames read from stdin, written as one PNG.

Usage: ffmpeg ... -f rawvideo -pix_fmt rgb24 - | median_frame.py WIDTH HEIGHT OUT.png

Used by tests/data/truth/make_recordings.sh to make the empty plaza: the median over many
frames of a scene where people keep moving is the scene without them.
"""
import sys

import numpy as np
from PIL import Image


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: median_frame.py WIDTH HEIGHT OUT.png  (raw rgb24 frames on stdin)")
    w, h, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    raw = np.frombuffer(sys.stdin.buffer.read(), np.uint8)
    n = raw.size // (w * h * 3)
    if n == 0:
        sys.exit("median_frame.py: no complete frame on stdin")
    frames = raw[: n * w * h * 3].reshape(n, h, w, 3)
    out = np.empty((h, w, 3), np.uint8)
    for y in range(0, h, 48):  # in bands of rows: bounded memory
        out[y : y + 48] = np.median(frames[:, y : y + 48], axis=0).astype(np.uint8)
    Image.fromarray(out).save(out_path)
    print(f"median of {n} frames -> {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
