#!/usr/bin/python3
"""Ground-truth tool for lookout's recordings: propose, correct, check by looking.

The truth files in tests/data/truth/ are  proposal + recorded corrections:

  detect   run lookout's own detector (FP32 model, low threshold) on every frame of a recording
  propose  link the detections over time with hindsight (offline, both directions, gaps filled
           by interpolation) into a MOT-format proposal
  apply    apply a corrections file to the proposal and write the truth file
  sheets   draw what a person checks: per id a contact sheet of its crops over time, and
           overview frames with every id drawn
  zoom     a region enlarged over a range of frames, with ids (for crowds)
  all      detect (if not cached) + propose + apply + sheets

Everything but the truth file goes to a work directory (default target/truth/<stem>/), never
into the repository. See tests/data/truth/README.md for the format and the corrections syntax.

Needs python3 with numpy and PIL (Debian: python3-numpy python3-pil), ffmpeg, and a built
lookout binary (default target/debug/lookout; LOOKOUT=... to choose another).
"""
import argparse
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
W, H = 640, 480
PERSON = 0
VEHICLES = {1, 2, 3, 5, 7}  # bicycle, car, motorcycle, bus, truck
ANIMALS = set(range(14, 24))  # bird .. giraffe
KEEP = {PERSON} | VEHICLES | ANIMALS


def die(msg):
    sys.exit(f"truth.py: {msg}")


def stem_of(rec):
    base = os.path.basename(rec)
    return base[: -len(".mjpeg")] if base.endswith(".mjpeg") else os.path.splitext(base)[0]


def workdir(args, rec):
    d = os.path.join(args.work, stem_of(rec))
    os.makedirs(d, exist_ok=True)
    return d


# ---------------------------------------------------------------- detect


def extract_frames(rec, wd):
    fdir = os.path.join(wd, "frames")
    if os.path.isdir(fdir) and os.listdir(fdir):
        return fdir
    os.makedirs(fdir, exist_ok=True)
    # The recordings are concatenated JPEGs: copy each one out as it is (no re-encoding).
    cmd = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-f", "mjpeg",
           "-i", rec, "-c:v", "copy", "-f", "image2", os.path.join(fdir, "%04d.jpg")]
    if subprocess.run(cmd).returncode != 0:
        die(f"ffmpeg could not split {rec} into frames")
    return fdir


def frame_files(wd):
    fdir = os.path.join(wd, "frames")
    return sorted(os.path.join(fdir, f) for f in os.listdir(fdir) if f.endswith(".jpg"))


def cmd_detect(args):
    for rec in args.recordings:
        wd = workdir(args, rec)
        out = os.path.join(wd, "detections.jsonl")
        if os.path.exists(out) and not args.force:
            print(f"{stem_of(rec)}: detections cached in {out}")
            continue
        extract_frames(rec, wd)
        files = frame_files(wd)
        lines = []
        for i in range(0, len(files), 50):
            cmd = [args.lookout, "detect", "--model", args.model, "--threshold", str(args.threshold),
                   "--threads", str(args.threads), "--json"] + files[i : i + 50]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                die(f"lookout detect failed on {files[i]}: {p.stderr.strip()}")
            lines += [ln for ln in p.stdout.splitlines() if ln.strip()]
            print(f"{stem_of(rec)}: {min(i + 50, len(files))}/{len(files)} frames", file=sys.stderr)
        with open(out + ".tmp", "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(out + ".tmp", out)


def load_detections(wd):
    """Detections per 1-based frame: list of (x1, y1, x2, y2, score, class)."""
    path = os.path.join(wd, "detections.jsonl")
    if not os.path.exists(path):
        die(f"{path} missing: run `truth.py detect` first")
    per_frame = {}
    with open(path) as f:
        for line in f:
            obj = json.loads(line)
            n = int(os.path.basename(obj["file"]).split(".")[0])
            per_frame[n] = [(*d["box"], d["score"], d["class_id"]) for d in obj["detections"]
                            if d["class_id"] in KEEP]
    return per_frame


# ---------------------------------------------------------------- propose


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / u if u > 0 else 0.0


def group(cls):
    return "vehicle" if cls in VEHICLES else "animal" if cls in ANIMALS else "person"


def nms(dets, thr=0.6):
    """Class-group NMS: a van boxed as `car` and `truck` is one object."""
    dets = sorted(dets, key=lambda d: -d[4])
    kept = []
    for d in dets:
        if all(group(d[5]) != group(k[5]) or iou(d, k) < thr for k in kept):
            kept.append(d)
    return kept


class Track:
    def __init__(self, tid, frame, det):
        self.id = tid
        self.boxes = {frame: det}  # frame -> (x1, y1, x2, y2, score, class)

    @property
    def first(self):
        return min(self.boxes)

    @property
    def last(self):
        return max(self.boxes)

    def velocity(self, at_end=True, span=5):
        fs = sorted(self.boxes)
        fs = fs[-span:] if at_end else fs[:span]
        if len(fs) < 2:
            return (0.0, 0.0, 0.0, 0.0)
        a, b = self.boxes[fs[0]], self.boxes[fs[-1]]
        dt = fs[-1] - fs[0]
        return tuple((b[k] - a[k]) / dt for k in range(4))

    def predict(self, frame):
        """Box extrapolated to `frame` from the nearer end (constant velocity, size kept)."""
        at_end = frame > self.last
        ref = self.last if at_end else self.first
        v = self.velocity(at_end)
        dt = frame - ref
        b = self.boxes[ref]
        cx = (b[0] + b[2]) / 2 + (v[0] + v[2]) / 2 * dt
        cy = (b[1] + b[3]) / 2 + (v[1] + v[3]) / 2 * dt
        w, h = b[2] - b[0], b[3] - b[1]
        return (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)

    def group(self):
        votes = {}
        for b in self.boxes.values():
            votes[group(b[5])] = votes.get(group(b[5]), 0) + b[4]
        return max(votes, key=votes.get)

    def cls(self):
        votes = {}
        for b in self.boxes.values():
            votes[b[5]] = votes.get(b[5], 0) + b[4]
        return max(votes, key=votes.get)


def match_cost(pred, box):
    """0 (perfect) .. 1 (no match): 1 - IoU, relaxed by centre distance relative to height."""
    i = iou(pred, box)
    h = max(pred[3] - pred[1], box[3] - box[1], 1.0)
    dc = math.hypot((pred[0] + pred[2] - box[0] - box[2]) / 2, (pred[1] + pred[3] - box[1] - box[3]) / 2)
    hr = min(pred[3] - pred[1], box[3] - box[1]) / h
    near = max(0.0, 1.0 - dc / (0.6 * h)) * hr
    return 1.0 - max(i, 0.8 * near)


def link_forward(per_frame, frames, max_gap):
    """Online pass: greedy matching of each frame's detections to live tracks."""
    tracks, live, next_id = [], [], 1
    for f in frames:
        dets = nms(per_frame.get(f, []))
        live = [t for t in live if f - t.last <= max_gap]
        pairs = []
        for ti, t in enumerate(live):
            p = t.predict(f)
            for di, d in enumerate(dets):
                if group(d[5]) != t.group():
                    continue
                c = match_cost(p, d)
                gap = f - t.last
                if c < 0.7 - 0.02 * (gap - 1):
                    pairs.append((c, ti, di))
        used_t, used_d = set(), set()
        for c, ti, di in sorted(pairs):
            if ti in used_t or di in used_d:
                continue
            live[ti].boxes[f] = dets[di]
            used_t.add(ti)
            used_d.add(di)
        for di, d in enumerate(dets):
            if di not in used_d:
                t = Track(next_id, f, d)
                next_id += 1
                tracks.append(t)
                live.append(t)
    return tracks


def merge_tracklets(tracks, max_gap):
    """Hindsight: join a tracklet that ends to one that starts later if each one's extrapolation
    (the first forward, the second backward) lands on the other."""
    changed = True
    while changed:
        changed = False
        cands = []
        for a in tracks:
            for b in tracks:
                if a is b or a.group() != b.group():
                    continue
                gap = b.first - a.last
                if gap < 1 or gap > max_gap:
                    continue
                c1 = match_cost(a.predict(b.first), b.boxes[b.first])
                c2 = match_cost(b.predict(a.last), a.boxes[a.last])
                c = (c1 + c2) / 2
                if c < 0.6:
                    cands.append((c + 0.01 * gap, a, b))
        for c, a, b in sorted(cands, key=lambda x: x[0]):
            if a in tracks and b in tracks:
                a.boxes.update(b.boxes)
                tracks.remove(b)
                changed = True
                break
    return tracks


def interpolate(track):
    fs = sorted(track.boxes)
    out = {}
    for f0, f1 in zip(fs, fs[1:]):
        a, b = track.boxes[f0], track.boxes[f1]
        out[f0] = (a[:4], True)
        for f in range(f0 + 1, f1):
            t = (f - f0) / (f1 - f0)
            out[f] = (tuple(a[k] + (b[k] - a[k]) * t for k in range(4)), False)
    out[fs[-1]] = (track.boxes[fs[-1]][:4], True)
    return out


def clip(box):
    x1, y1, x2, y2 = box
    return (max(0.0, min(W, x1)), max(0.0, min(H, y1)), max(0.0, min(W, x2)), max(0.0, min(H, y2)))


def write_mot(path, rows):
    """rows: (frame, id, x1, y1, x2, y2, conf, cls, vis), sorted and written as MOT lines."""
    rows = sorted(rows, key=lambda r: (r[0], r[1]))
    with open(path + ".tmp", "w") as f:
        for fr, tid, x1, y1, x2, y2, conf, cls, vis in rows:
            x1, y1, x2, y2 = clip((x1, y1, x2, y2))
            f.write(f"{fr},{tid},{fmt(x1)},{fmt(y1)},{fmt(x2 - x1)},{fmt(y2 - y1)},{conf},{cls},{vis:.2f}\n")
    os.replace(path + ".tmp", path)


def fmt(v):
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def read_mot(path):
    rows = []
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            if not line.strip():
                continue
            p = line.strip().split(",")
            if len(p) != 9:
                die(f"{path}:{ln}: expected 9 fields frame,id,x,y,w,h,conf,class,visibility")
            fr, tid = int(p[0]), int(p[1])
            x, y, w, h = map(float, p[2:6])
            rows.append([fr, tid, x, y, x + w, y + h, int(p[6]), int(p[7]), float(p[8])])
    return rows


def visibility(rows):
    """Fraction of each box not covered by boxes nearer the camera (lower bottom edge)."""
    by_frame = {}
    for r in rows:
        by_frame.setdefault(r[0], []).append(r)
    for fr, rs in by_frame.items():
        for r in rs:
            area = max((r[4] - r[2]) * (r[5] - r[3]), 1e-6)
            fronts = [o for o in rs if o is not r and o[5] > r[5] + 2]
            # covered area (approximate: union by sampling a grid over the box)
            if not fronts:
                vis = 1.0
            else:
                n, cov = 0, 0
                for i in range(10):
                    for j in range(10):
                        px = r[2] + (i + 0.5) / 10 * (r[4] - r[2])
                        py = r[3] + (j + 0.5) / 10 * (r[5] - r[3])
                        n += 1
                        if any(o[2] <= px <= o[4] and o[3] <= py <= o[5] for o in fronts):
                            cov += 1
                vis = 1.0 - cov / n
            # the part outside the frame does not count as visible
            x1, y1, x2, y2 = clip(r[2:6])
            inside = max(0.0, x2 - x1) * max(0.0, y2 - y1) / area
            r[8] = round(min(vis, inside), 2)
    return rows


def cmd_propose(args):
    for rec in args.recordings:
        wd = workdir(args, rec)
        per_frame = load_detections(wd)
        if not per_frame:
            die(f"no detections file content for {rec}")
        frames = sorted(per_frame)
        # keep detections that are confident enough to seed or extend a track
        tracks = link_forward(per_frame, frames, args.max_gap)
        tracks = merge_tracklets(tracks, args.merge_gap)
        kept, dropped = [], []
        for t in tracks:
            why = weak(t, args)
            (dropped if why else kept).append((t, why))
        kept = [t for t, _ in kept]
        kept.sort(key=lambda t: (t.first, t.id))
        rows, summary = [], []
        for new_id, t in enumerate(kept, 1):
            cls = t.cls()
            for f, (box, _) in interpolate(t).items():
                conf = 1 if box[3] - box[1] >= 15 else 0
                rows.append([f, new_id, *box, conf, cls, 1.0])
            scores = [b[4] for b in t.boxes.values()]
            summary.append(f"{new_id}\tclass {cls}\tframes {t.first}-{t.last}\tdetected {len(t.boxes)}"
                           f"\tmean score {sum(scores) / len(scores):.2f}\tmax {max(scores):.2f}")
        rows = visibility(rows)
        write_mot(os.path.join(wd, "proposal.gt.txt"), rows)
        with open(os.path.join(wd, "proposal-ids.txt"), "w") as f:
            f.write("\n".join(summary) + "\n")
        with open(os.path.join(wd, "dropped.txt"), "w") as f:
            for t, why in dropped:
                b = t.boxes[t.first]
                f.write(f"class {t.cls()}\tframes {t.first}-{t.last}\t{why}\tfirst box "
                        f"{b[0]:.0f},{b[1]:.0f},{b[2]:.0f},{b[3]:.0f}\n")
        print(f"{stem_of(rec)}: {len(kept)} ids proposed, {len(dropped)} weak or static tracklets "
              f"dropped (listed in {wd}/dropped.txt) -> {wd}/proposal.gt.txt")


def weak(t, args):
    """Why a tracklet is left out of the proposal ('' = kept). A person checks what is left out
    by looking for unboxed people on the overview frames."""
    scores = [b[4] for b in t.boxes.values()]
    strong = sum(s >= args.seed for s in scores)
    if strong < 3 and not (len(scores) >= 20 and sum(scores) / len(scores) >= 0.3):
        return f"fewer than 3 detections >= {args.seed}"
    if t.group() == "animal" and max(scores) < 0.5:
        return "animal below 0.5"
    if t.group() == "person" and len(scores) >= 20 and sum(scores) / len(scores) < 0.5:
        cs = [((b[0] + b[2]) / 2, (b[1] + b[3]) / 2) for b in t.boxes.values()]
        hs = sorted(b[3] - b[1] for b in t.boxes.values())
        span = max(max(c[0] for c in cs) - min(c[0] for c in cs), max(c[1] for c in cs) - min(c[1] for c in cs))
        if span < 0.4 * hs[len(hs) // 2]:
            return "static person-shaped thing (moves less than 0.4 of its height)"
    return ""


# ---------------------------------------------------------------- apply corrections

CORR_HELP = """corrections file: one command a line, `#` starts a comment (give every line its reason)
  merge A B [C ...]            ids B, C ... become A (boxes on the same frame: A's kept)
  split A F NEW                frames >= F of id A become id NEW
  delete A [F1 F2]             remove id A (or only its frames F1..F2)
  ignore A [F1 F2]             conf=0 for id A (or only frames F1..F2)
  score A [F1 F2]              conf=1 for id A (or only frames F1..F2)
  class A C                    class of id A becomes C (COCO index)
  vis A F1 F2 V                visibility V for id A on frames F1..F2
  box A F x y w h              set (or add) A's box on frame F; frames between this box and the
                               nearest other set/kept boxes of A are re-interpolated when
                               followed by `interp A F1 F2`
  interp A F1 F2               replace A's boxes strictly between F1 and F2 by linear
                               interpolation of its boxes on F1 and F2 (filling missing frames)
  hold A F1 F2                 A's box on F1 is copied to every frame F1..F2 (a parked vehicle)
  shift A F1 F2 dx dy [dw dh]  move (and resize) A's boxes on F1..F2
"""


def cmd_apply(args):
    for rec in args.recordings:
        wd = workdir(args, rec)
        stem = stem_of(rec)
        prop = os.path.join(wd, "proposal.gt.txt")
        if not os.path.exists(prop):
            die(f"{prop} missing: run `truth.py propose` first")
        rows = read_mot(prop)
        corr = args.corrections or os.path.join(ROOT, "tests", "data", "truth", f"{stem}.corrections.txt")
        n, explicit = 0, {}
        if os.path.exists(corr):
            rows, n, explicit = apply_corrections(rows, corr)
        out = args.out or os.path.join(ROOT, "tests", "data", "truth", f"{stem}.gt.txt")
        rows, filled = fill_gaps(rows, args.fill_gap)
        rows = [r for r in rows if r[4] - r[2] > 0.5 and r[5] - r[3] > 0.5]
        write_mot(out, final_visibility(rows, filled, explicit))
        ids = sorted({r[1] for r in rows})
        print(f"{stem}: {n} corrections applied, {len(ids)} ids, {len(rows)} boxes -> {out}")


def final_visibility(rows, filled, explicit):
    """Visibility of the corrected boxes, computed again (the proposal's values count boxes the
    corrections removed): the geometric fraction not hidden by nearer boxes or the frame edge,
    halved on frames filled by fill_gaps (an object the detector missed is usually partly
    hidden); a `vis` correction sets it outright (explicit: id(row) -> (row, value))."""
    rows = visibility(rows)
    for r in rows:
        if id(r) in filled:
            r[8] = round(r[8] / 2, 2)
        if id(r) in explicit:
            r[8] = explicit[id(r)][1]
    return rows


def fill_gaps(rows, max_gap):
    """Frames an id misses between two of its boxes (up to max_gap) get interpolated boxes: the
    object was there, hidden or missed by the detector. Returns the rows and the new ones (by
    id(), for final_visibility to halve)."""
    tracks = {}
    for r in rows:
        tracks.setdefault(r[1], {})[r[0]] = r
    out, filled = list(rows), {}
    for tid, t in tracks.items():
        fs = sorted(t)
        for f0, f1 in zip(fs, fs[1:]):
            if 1 < f1 - f0 <= max_gap:
                a, b = t[f0], t[f1]
                for f in range(f0 + 1, f1):
                    s = (f - f0) / (f1 - f0)
                    box = [a[k] + (b[k] - a[k]) * s for k in range(2, 6)]
                    out.append([f, tid, *box, min(a[6], b[6]), a[7], 1.0])
                    filled[id(out[-1])] = out[-1]
    return out, filled


def apply_corrections(rows, path):
    tracks = {}
    for r in rows:
        tracks.setdefault(r[1], {})[r[0]] = r
    n, explicit = 0, {}
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            p = line.split()
            op, a = p[0], [float(x) for x in p[1:]]
            where = f"{path}:{ln}"
            try:
                apply_one(tracks, op, a, explicit)
            except (KeyError, IndexError, ValueError) as e:
                die(f"{where}: `{line}`: {e!r}")
            n += 1
    out = []
    for tid, fr in tracks.items():
        for f, r in fr.items():
            r[0], r[1] = f, tid
            out.append(r)
    return out, n, explicit


def frange(track, a, i):
    if len(a) > i + 1:
        return [f for f in track if a[i] <= f <= a[i + 1]]
    return list(track)


def apply_one(tracks, op, a, explicit):
    """One correction on tracks (id -> frame -> row); a `vis` is also noted in explicit (by
    id() of the row, which it keeps alive) so that it outlasts the visibility computed at the end."""
    tid = int(a[0]) if a else None
    if op == "merge":
        dst = tracks[tid]
        for o in a[1:]:
            for f, r in tracks.pop(int(o)).items():
                dst.setdefault(f, r)
    elif op == "split":
        src, f0, new = tracks[tid], int(a[1]), int(a[2])
        if new in tracks:
            raise ValueError(f"id {new} exists")
        tracks[new] = {f: r for f, r in src.items() if f >= f0}
        for f in tracks[new]:
            del src[f]
    elif op == "delete":
        t = tracks[tid]
        for f in frange(t, a, 1):
            del t[f]
        if not t:
            del tracks[tid]
    elif op in ("ignore", "score"):
        t = tracks[tid]
        for f in frange(t, a, 1):
            t[f][6] = 0 if op == "ignore" else 1
    elif op == "class":
        for r in tracks[tid].values():
            r[7] = int(a[1])
    elif op == "vis":
        t = tracks[tid]
        for f in frange(t, a, 1):
            t[f][8] = a[3]
            explicit[id(t[f])] = (t[f], a[3])
    elif op == "box":
        t = tracks.setdefault(tid, {})
        f = int(a[1])
        x, y, w, h = a[2:6]
        tmpl = next(iter(t.values()), None)
        cls = tmpl[7] if tmpl else 0
        t[f] = [f, tid, x, y, x + w, y + h, 1 if h >= 15 else 0, cls, 1.0]
    elif op == "interp":
        t = tracks[tid]
        f1, f2 = int(a[1]), int(a[2])
        b1, b2 = t[f1], t[f2]
        for f in range(f1 + 1, f2):
            s = (f - f1) / (f2 - f1)
            box = [b1[k] + (b2[k] - b1[k]) * s for k in range(2, 6)]
            t[f] = [f, tid, *box, b1[6], b1[7], b1[8]]
    elif op == "hold":
        t = tracks[tid]
        f1, f2 = int(a[1]), int(a[2])
        b = t[f1]
        for f in range(f1, f2 + 1):
            t[f] = [f, tid, *b[2:6], b[6], b[7], b[8]]
    elif op == "shift":
        t = tracks[tid]
        dx, dy = a[3], a[4]
        dw, dh = (a[5], a[6]) if len(a) > 6 else (0, 0)
        for f in frange(t, a, 1):
            r = t[f]
            r[2] += dx
            r[3] += dy
            r[4] += dx + dw
            r[5] += dy + dh
    else:
        raise ValueError(f"unknown command {op}")


# ---------------------------------------------------------------- sheets


def colour(tid):
    h = (tid * 0.618034) % 1.0
    import colorsys

    r, g, b = colorsys.hsv_to_rgb(h, 0.9, 1.0)
    return (int(r * 255), int(g * 255), int(b * 255))


def cmd_sheets(args):
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default()
    for rec in args.recordings:
        wd = workdir(args, rec)
        stem = stem_of(rec)
        src = args.file or os.path.join(ROOT, "tests", "data", "truth", f"{stem}.gt.txt")
        if not os.path.exists(src):
            src = os.path.join(wd, "proposal.gt.txt")
        rows = read_mot(src)
        extract_frames(rec, wd)
        files = frame_files(wd)
        by_frame, by_id = {}, {}
        for r in rows:
            by_frame.setdefault(r[0], []).append(r)
            by_id.setdefault(r[1], []).append(r)
        sdir = os.path.join(wd, "sheets")
        os.makedirs(sdir, exist_ok=True)
        for old in os.listdir(sdir):
            os.remove(os.path.join(sdir, old))
        cache = {}

        def img(f):
            if f not in cache:
                if len(cache) > 64:
                    cache.clear()
                cache[f] = Image.open(files[f - 1]).convert("RGB")
            return cache[f]

        # per id: crops every `step` frames (and first/last), 96 px tall, frame number under each
        ch = 112
        for tid, rs in sorted(by_id.items()):
            rs.sort(key=lambda r: r[0])
            step = args.step
            pick = [r for i, r in enumerate(rs) if i % step == 0 or i == len(rs) - 1]
            tiles = []
            for r in pick:
                x1, y1, x2, y2 = r[2:6]
                w, h = x2 - x1, y2 - y1
                m = max(w, h) * 0.25 + 4
                box = (int(max(0, x1 - m)), int(max(0, y1 - m)), int(min(W, x2 + m)), int(min(H, y2 + m)))
                crop = img(r[0]).crop(box)
                s = 96 / max(crop.height, 1)
                crop = crop.resize((max(1, int(crop.width * s)), 96))
                d = ImageDraw.Draw(crop)
                d.rectangle(((x1 - box[0]) * s, (y1 - box[1]) * s, (x2 - box[0]) * s, (y2 - box[1]) * s),
                            outline=(255, 0, 0) if r[6] else (128, 128, 128))
                tile = Image.new("RGB", (max(crop.width, 40), ch), (0, 0, 0))
                tile.paste(crop, (0, 0))
                ImageDraw.Draw(tile).text((2, 98), f"{r[0]}{'' if r[6] else ' i'} {r[8]:.1f}", fill=(255, 255, 0), font=font)
                tiles.append(tile)
            width = 1400
            rows_t, cur, cw = [], [], 0
            for t in tiles:
                if cw + t.width + 2 > width and cur:
                    rows_t.append(cur)
                    cur, cw = [], 0
                cur.append(t)
                cw += t.width + 2
            rows_t.append(cur)
            sheet = Image.new("RGB", (width, 16 + len(rows_t) * (ch + 2)), (40, 40, 40))
            d = ImageDraw.Draw(sheet)
            conf1 = sum(r[6] for r in rs)
            d.text((4, 2), f"{stem} id {tid} class {rs[0][7]}  frames {rs[0][0]}-{rs[-1][0]} "
                   f"({len(rs)} boxes, {conf1} scored)  every {step}th box", fill=(255, 255, 255), font=font)
            y = 16
            for rt in rows_t:
                x = 0
                for t in rt:
                    sheet.paste(t, (x, y))
                    x += t.width + 2
                y += ch + 2
            sheet.save(os.path.join(sdir, f"id{tid:03d}.png"))
        # the id sheets stacked into pages of about 1000 px (fewer images to look through)
        page, ph, first = [], 0, None
        names = sorted(f for f in os.listdir(sdir) if f.startswith("id"))
        for k, name in enumerate(names):
            im = Image.open(os.path.join(sdir, name))
            page.append(im)
            ph += im.height + 6
            if ph > 1000 or k == len(names) - 1:
                out = Image.new("RGB", (1400, ph), (0, 0, 0))
                y = 0
                for p_im in page:
                    out.paste(p_im, (0, y))
                    y += p_im.height + 6
                out.save(os.path.join(sdir, f"page-{names[k - len(page) + 1][2:5]}-{name[2:5]}.png"))
                page, ph = [], 0
        # overview: 2x2 frames per image (every `ostep` frames), every box with its id
        n = len(files)
        picks = list(range(1, n + 1, args.ostep))
        for k in range(0, len(picks), 4):
            ov = Image.new("RGB", (1280, 960), (0, 0, 0))
            for j, f in enumerate(picks[k : k + 4]):
                im = img(f).copy()
                d = ImageDraw.Draw(im)
                for r in by_frame.get(f, []):
                    c = colour(r[1]) if r[6] else (160, 160, 160)
                    d.rectangle(r[2:6], outline=c, width=2)
                    d.rectangle((r[2], r[3] - 11, r[2] + 22, r[3]), fill=(0, 0, 0))
                    d.text((r[2] + 1, r[3] - 11), str(r[1]), fill=c, font=font)
                d.rectangle((0, 0, 60, 12), fill=(0, 0, 0))
                d.text((2, 1), f"f {f}", fill=(255, 255, 255), font=font)
                ov.paste(im, ((j % 2) * 640, (j // 2) * 480))
            ov.save(os.path.join(sdir, f"overview{picks[k]:04d}.png"))
        print(f"{stem}: {len(by_id)} id sheets + overviews from {src} -> {sdir}")


def cmd_zoom(args):
    """A region of the frame, enlarged, over a range of frames, every box in it with its id:
    for crowds, where the per-id crops are too small to tell people apart."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default()
    rx, ry, rw, rh = (float(v) for v in args.region.split(","))
    f1, f2 = (int(v) for v in args.frames.split("-"))
    for rec in args.recordings:
        wd = workdir(args, rec)
        stem = stem_of(rec)
        src = args.file or os.path.join(ROOT, "tests", "data", "truth", f"{stem}.gt.txt")
        if not os.path.exists(src):
            src = os.path.join(wd, "proposal.gt.txt")
        by_frame = {}
        for r in read_mot(src):
            by_frame.setdefault(r[0], []).append(r)
        extract_frames(rec, wd)
        files = frame_files(wd)
        s = min(3.0, 1300 / (rw * 4), 900 / (rh * 3))
        tw, th = int(rw * s), int(rh * s)
        frames = list(range(f1, min(f2, len(files)) + 1, args.step))
        cols = max(1, 1300 // (tw + 4))
        out = Image.new("RGB", (cols * (tw + 4), ((len(frames) + cols - 1) // cols) * (th + 4)), (0, 0, 0))
        for k, f in enumerate(frames):
            im = Image.open(files[f - 1]).convert("RGB").crop((int(rx), int(ry), int(rx + rw), int(ry + rh)))
            im = im.resize((tw, th))
            d = ImageDraw.Draw(im)
            for r in by_frame.get(f, []):
                b = [(r[2] - rx) * s, (r[3] - ry) * s, (r[4] - rx) * s, (r[5] - ry) * s]
                if b[2] < 0 or b[0] > tw or b[3] < 0 or b[1] > th:
                    continue
                c = colour(r[1]) if r[6] else (160, 160, 160)
                d.rectangle(b, outline=c, width=2)
                d.rectangle((b[0], b[1], b[0] + 20, b[1] + 11), fill=(0, 0, 0))
                d.text((b[0] + 1, b[1]), str(r[1]), fill=c, font=font)
            d.rectangle((0, 0, 40, 11), fill=(0, 0, 0))
            d.text((1, 0), f"f{f}", fill=(255, 255, 255), font=font)
            out.paste(im, ((k % cols) * (tw + 4), (k // cols) * (th + 4)))
        name = os.path.join(wd, "sheets", f"zoom-{int(rx)}-{int(ry)}-{f1}-{f2}.png")
        os.makedirs(os.path.dirname(name), exist_ok=True)
        out.save(name)
        print(name)


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=CORR_HELP)
    ap.add_argument("command", choices=["detect", "propose", "apply", "sheets", "zoom", "all"])
    ap.add_argument("recordings", nargs="+", help="MJPEG recordings (640x480 concatenated JPEGs)")
    ap.add_argument("--work", default=os.path.join(ROOT, "target", "truth"), help="work directory")
    ap.add_argument("--lookout", default=os.environ.get("LOOKOUT", os.path.join(ROOT, "target", "debug", "lookout")))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "nanodet-g-416-fp32.onnx"))
    ap.add_argument("--threshold", type=float, default=0.2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--force", action="store_true", help="detect again even if cached")
    ap.add_argument("--max-gap", type=int, default=5, help="frames a track waits for a detection (online pass)")
    ap.add_argument("--merge-gap", type=int, default=20, help="largest gap (frames) joined in hindsight")
    ap.add_argument("--seed", type=float, default=0.4, help="a kept tracklet has 3 detections at least this sure")
    ap.add_argument("--fill-gap", type=int, default=40, help="apply: gaps up to this many frames are interpolated")
    ap.add_argument("--corrections", help="corrections file (default tests/data/truth/<stem>.corrections.txt)")
    ap.add_argument("--out", help="truth file to write (default tests/data/truth/<stem>.gt.txt)")
    ap.add_argument("--file", help="MOT file to draw (default the truth file, else the proposal)")
    ap.add_argument("--step", type=int, default=5, help="contact sheets: every Nth box of an id")
    ap.add_argument("--ostep", type=int, default=10, help="overviews: every Nth frame")
    ap.add_argument("--region", default="0,0,640,480", help="zoom: x,y,w,h of the region")
    ap.add_argument("--frames", default="1-200", help="zoom: first-last frame")
    args = ap.parse_args()
    for rec in args.recordings:
        if not os.path.isfile(rec):
            die(f"{rec}: no such recording")
    if args.command in ("detect", "all"):
        if not os.access(args.lookout, os.X_OK):
            die(f"{args.lookout}: no lookout binary (cargo build, or LOOKOUT=path)")
        cmd_detect(args)
    if args.command in ("propose", "all"):
        cmd_propose(args)
    if args.command in ("apply", "all"):
        cmd_apply(args)
    if args.command in ("sheets", "all"):
        cmd_sheets(args)
    if args.command == "zoom":
        cmd_zoom(args)


if __name__ == "__main__":
    main()
