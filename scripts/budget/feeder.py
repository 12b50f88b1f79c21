#!/usr/bin/env python3
"""Feed an MJPEG clip into a FIFO one frame at a time, slowly: the paced source of
scripts/arm-frame-budget.sh. Plain python3, standard library only.

Usage: feeder.py FIFO CLIP FRAMES PERIOD [--log FILE]

Opens FIFO for writing (this blocks until the reader opens it), shrinks the pipe buffer to one
page, and writes the first FRAMES JPEG frames of CLIP (looping over the clip if FRAMES is more
than it has), then waits PERIOD seconds before the next one. With a one-page pipe a write of
a frame (tens of kB) returns only once the reader has taken nearly all of it, so the period
runs from the moment the reader took the frame. After the last frame the FIFO is held open
(no end of file: the reader ends at its own frame limit) until the process is killed.

Why: under emulation one detection takes seconds of wall time. A file source played as fast as
possible then asks for detections while the detector is still busy, and lookout skips them
(a busy detector is never queued), so an unpaced run measures almost no detections. Pacing
the frames leaves the detector idle whenever the schedule asks for one.
"""
import argparse
import fcntl
import os
import sys
import time

F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, a constant of Linux (named in Python 3.10+)
SOI = b"\xff\xd8\xff"  # start of a JPEG image, as lookout's MJPEG reader splits frames


def frames_of(clip):
    """The JPEG images of an MJPEG file (concatenated JPEGs), in order."""
    data = open(clip, "rb").read()
    starts = []
    i = data.find(SOI)
    while i >= 0:
        starts.append(i)
        i = data.find(SOI, i + 1)
    return [data[a:b] for a, b in zip(starts, starts[1:] + [len(data)])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fifo")
    ap.add_argument("clip")
    ap.add_argument("frames", type=int)
    ap.add_argument("period", type=float, help="seconds between frames")
    ap.add_argument("--log", help="one line per frame written (default: FIFO.log)")
    a = ap.parse_args()
    frames = frames_of(a.clip)
    if not frames:
        sys.exit(f"feeder: no JPEG frame in {a.clip}")
    fd = os.open(a.fifo, os.O_WRONLY)  # blocks until lookout opens the FIFO
    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, 4096)
    except OSError as e:
        print(f"feeder: F_SETPIPE_SZ failed ({e}): frames are paced less tightly", file=sys.stderr)
    log = open(a.log or a.fifo + ".log", "w")
    t0 = time.time()
    for k in range(a.frames):
        view = memoryview(frames[k % len(frames)])
        while view:
            view = view[os.write(fd, view):]
        print(f"{time.time() - t0:.2f} frame {k} written", file=log, flush=True)
        if k + 1 < a.frames:
            time.sleep(a.period)
    print("all written; holding the FIFO open", file=log, flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
