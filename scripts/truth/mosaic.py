#!/usr/bin/env python3
"""mosaic.py — the ground truth of a 2x2 mosaic of four recordings, each shrunk to half size.

A camera that sees people from twice as far sees them half as tall. Four stretches of the
hand-checked recordings, each scaled to half width and height and placed in one quadrant of a
frame of the original size, make a recording of distant people whose truth follows exactly
from the checked truth: every box halved and moved into its quadrant, every identity kept
(numbered apart per quadrant). Boxes that become shorter than 15 px are kept unscored
(conf 0), as the truth's convention has it for objects under 15 px tall.

Usage: mosaic.py WIDTH HEIGHT FRAMES TL.gt.txt TR.gt.txt BL.gt.txt BR.gt.txt > mosaic.gt.txt
"""
import sys

MIN_SCORED_HEIGHT = 15.0
ID_STRIDE = 1000


def main() -> None:
    if len(sys.argv) != 8:
        sys.exit(__doc__)
    width, height, frames = (int(a) for a in sys.argv[1:4])
    out = []
    for quadrant, path in enumerate(sys.argv[4:8]):
        ox = (quadrant % 2) * width / 2
        oy = (quadrant // 2) * height / 2
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                fields = line.split(",")
                if len(fields) != 9:
                    sys.exit(f"{path}:{n}: expected 9 fields, found {len(fields)}")
                frame, ident = int(fields[0]), int(fields[1])
                if frame > frames:
                    continue
                x, y, w, h = (float(v) / 2 for v in fields[2:6])
                conf = int(fields[6]) if h >= MIN_SCORED_HEIGHT else 0
                out.append((frame, quadrant * ID_STRIDE + ident, x + ox, y + oy, w, h,
                            conf, fields[7], fields[8]))
    out.sort(key=lambda r: (r[0], r[1]))
    for r in out:
        print(f"{r[0]},{r[1]},{r[2]:.1f},{r[3]:.1f},{r[4]:.1f},{r[5]:.1f},{r[6]},{r[7]},{r[8]}")


if __name__ == "__main__":
    main()
