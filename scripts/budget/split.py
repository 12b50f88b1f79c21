#!/usr/bin/env python3
"""Split armcost run pairs into lookout's pipeline stages: the per-frame (and per-detection)
instruction table of scripts/arm-frame-budget.sh. Plain python3, standard library only; needs
`nm` (binutils) to read the binaries' symbol tables.

Usage:
  split.py --board pi4|pi5 --base BIG SMALL --pair LABEL BIG SMALL [--pair LABEL BIG SMALL]
           [--fps 15] [--functions FILE.tsv] [--json FILE]
  split.py --check-binary BIN        exit 0 if BIN has a symbol table (is not stripped)

BIG and SMALL are armcost run directories (`armcost.sh --keep DIR`: tbs.txt, plus the
program's stdout as stdout.json: lookout bench --json) of the same command with more and
fewer frames. A pair's difference, BIG - SMALL, is what the frames in between cost, without
start-up, model loading and shutdown. --base is a pair with no detections (--detect-every
1000 on the unpaced demo clip): the per-frame floor, and the reference that splits the shared
JPEG code and libc. Each --pair (e.g. "at N = 5" and "adaptive") becomes one column; one
--pair alone is the table of one schedule. The symbols are read from the files named in
tbs.txt's #map lines, so the binary must still be at the path it ran from.

How the difference is split (instructions are attributed per function: each block executed
to the symbol it lies in; monomorphizations of one generic function are kept apart by
address). Rules, first match wins, on the demangled name:
  JPEG  zune_jpeg::, zune_core::, lookout::preprocess::jpeg:: - shared by the tracker's luma
        decode and the detector's colour decode: the base pair's count (scaled to the pair's
        frames) goes to stage 2, the rest to stage 4
  1 capture + MJPEG read      lookout::source::, lookout::pipeline::capture, lookout::files::,
                              memchr
  2 JPEG luma + gray plane    lookout::preprocess::gray (and the JPEG luma part)
  3 tracker + events          lookout::track::, lookout::events::, lookout::schedule:: (the
                              adaptive planner), pathfinding::, hypotf
  4 detector preprocessing    lookout::detect::int8::input, lookout::preprocess::,
                              lookout::quantize:: (and the JPEG colour part)
  6 decode + NMS              lookout::detect::{decode,nms,ceiling}, lookout::vocab::,
                              detect_round, expf
  5 model                     other lookout::detect::, tract, arm64simd_*, non_linear_*
  generic code (Map::fold, Fn::call, sort helpers, ...): the stage of its callers, found from
        the direct calls and tail calls (BL/B) in the binary's .text: breadth first, at most 6
        levels, only through functions with at most 6 callers, and only when the first level
        that reaches named code reaches exactly one stage. Primitives with many callers
        (allocation, locks, clocks, I/O, formatting) and stripped libraries stay in 7.
        This matters: by name alone, 0.3-0.4 M per frame of stage 3 (the Map::fold closure of
        the tracker's pyramid) and up to 2.3 M per frame of the Pi 5's stage 5 (Fn::call from
        the int8 packing) would fall into 7. Code reached only through function pointers
        (e.g. a FnOnce::call_once thunk into zune_jpeg's IDCT, ~0.002 M per frame) stays in 7.
  7 everything else           the rest: allocation, PLT stubs, thread waits and clocks,
                              stats, and all of libc.so.6 (mostly memcpy/memset: the
                              detector's copies are libc code called from the model).
libc.so.6 is stripped, so its code is not named; it is shown as a part of stage 7, split into
its level in the base pair and the rest (above that level), which is the detections' share.
Summing all of libc here, rather than only its memcpy/memset (found by address in one libc
build), moves nothing between stages 1-6 and 7; it adds libc's malloc/free above the level to
the detector's per-detection sum (4 + 5 + 6 + libc above the level), by under 0.2 %.

Per detection = (stage in the pair - the same stage in the base pair, scaled to the pair's
frames) / detections executed, pooled over the pairs. Detections executed = entries of
lookout::pipeline::detection::Bench::detect in the trace (the JSON counts results applied to
the tracker, not one still running when the frame limit ends the run).
"""
import argparse
import bisect
import collections
import json
import os
import re
import struct
import subprocess
import sys

M = 1e6

# --------------------------------------------------------------------------- stage rules
STAGES = [
    ("1", "1 capture + MJPEG read"),
    ("2", "2 JPEG luma decode + gray plane"),
    ("3", "3 tracker + events (incl. the adaptive planner)"),
    ("4", "4 detector preprocessing (colour JPEG decode, letterbox, quantize)"),
    ("5", "5 model"),
    ("6", "6 decode + NMS"),
    ("7", "7 everything else (allocation, libc, PLT stubs, waits, stats)"),
]
NAME_RULES = [
    ("jpeg", re.compile(r"zune_jpeg::|zune_core::|lookout::preprocess::jpeg::")),
    ("1", re.compile(r"lookout::source::|lookout::pipeline::capture|lookout::files::|memchr")),
    ("2", re.compile(r"lookout::preprocess::gray")),
    ("3", re.compile(r"lookout::track::|lookout::events::|pathfinding::|lookout::schedule::|hypotf")),
    ("4", re.compile(r"lookout::detect::int8::input|lookout::preprocess::|lookout::quantize::")),
    ("6", re.compile(r"lookout::detect::(decode|nms|ceiling)|lookout::vocab::|detect_round|expf@")),
    ("5", re.compile(r"lookout::detect::|tract_|tract::|arm64simd_|non_linear_")),
]
# Primitives called from everywhere: never resolved through their callers.
PRIMITIVES = re.compile(
    r"std::sys|std::thread::functions|std::time|Timespec|Instant|__rust|__rdl|__aarch64|"
    r"alloc::raw_vec|alloc::alloc|alloc::sync|^~|^\[|std::sync|Condvar|Mutex|std::io|"
    r"core::fmt|parking_lot|futex")
MAX_DEPTH, MAX_CALLERS = 6, 6
LIBC = "[libc.so.6]"
DETECT_FN = "lookout::pipeline::detection::Bench::detect"
# Core models of the estimate: instructions per cycle and clock (GHz), assumed, not measured.
BOARDS = {"pi4": ("Pi 4", "cortex-a72", 1.0, 1.8), "pi5": ("Pi 5", "cortex-a76", 1.5, 2.4)}


def by_name(name):
    for stage, rx in NAME_RULES:
        if rx.search(name):
            return stage
    return None


# --------------------------------------------------------------------------- ELF and symbols
def elf_headers(data):
    """(PT_LOAD segments [(offset, vaddr, filesz)], sections [(name, addr, offset, size,
    flags)]) of a little-endian 64-bit ELF image."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return [], []
    phoff, shoff = struct.unpack_from("<QQ", data, 32)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 54)
    loads = []
    for i in range(phnum):
        p_type, _fl, off, vaddr, _pa, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            loads.append((off, vaddr, filesz))
    raw = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    sections = []
    if raw and shstrndx < len(raw):
        stroff = raw[shstrndx][4]
        for name, _t, flags, addr, off, size in raw:
            end = data.index(b"\0", stroff + name)
            sections.append((data[stroff + name:end].decode(errors="replace"), addr, off, size, flags))
    return loads, sections


def has_symtab(path):
    with open(path, "rb") as f:
        return any(s[0] == ".symtab" for s in elf_headers(f.read())[1])


class SymTab:
    """Function symbols of one ELF file: the static table if it has one, else the dynamic
    one ("approximate": a stripped library's code is named after the nearest exported
    symbol, marked '~', and the file's name)."""

    def __init__(self, path, nm):
        self.path, self.base = path, os.path.basename(path)
        syms = self._nm(nm, [path])
        self.approx = not syms
        if self.approx:
            syms = self._nm(nm, ["-D", path])
        with open(path, "rb") as f:
            data = f.read()
        self.loads, sections = elf_headers(data)
        for name, addr, _off, size, _fl in sections:
            if name in (".plt", ".plt.sec", ".plt.got", ".iplt") and size:
                syms.append((addr, f"[{name} stubs]", "t"))
        syms.sort()
        names, last = [], None
        for _a, n, t in syms:  # assembler-local labels (".loop") belong to the symbol before
            if n.startswith(".") and last:
                n = last
            elif t in "TWi":
                last = n
            names.append(re.sub(r"::h[0-9a-f]{16}$", "", n))
        self.addrs, self.names = [a for a, _, _ in syms], names
        self.exec_sections = [(a, o, s) for _n, a, o, s, fl in sections if fl & 4 and s]  # SHF_EXECINSTR
        self._data = data if not self.approx else None
        self._callers = None

    @staticmethod
    def _nm(nm, args):
        try:
            out = subprocess.run([nm, "-C", "--defined-only"] + args, capture_output=True,
                                 text=True, errors="replace").stdout
        except FileNotFoundError:
            sys.exit(f"split.py: {nm} not found (binutils)")
        syms = []
        for line in out.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[1] in "TtWwiI" and not parts[2].startswith("$"):
                try:
                    syms.append((int(parts[0], 16), parts[2], parts[1]))
                except ValueError:
                    pass
        return syms

    def file_to_vaddr(self, off):
        for p_off, vaddr, filesz in self.loads:
            if p_off <= off < p_off + filesz:
                return off - p_off + vaddr
        return None

    def lookup(self, vaddr):
        """(function name, its address or 0 if approximate, vaddr is its first instruction)."""
        i = bisect.bisect_right(self.addrs, vaddr) - 1
        if i < 0:
            return f"[{self.base}]", 0, False
        if self.approx:
            return f"~{self.names[i]} [{self.base}]", 0, False
        return self.names[i], self.addrs[i], self.addrs[i] == vaddr

    def name_at(self, addr):
        i = bisect.bisect_right(self.addrs, addr) - 1
        return self.names[i] if i >= 0 else "?"

    def callers(self, addr):
        """Start addresses of the functions with a direct call (BL) or branch (B) to addr."""
        if self._callers is None:
            self._callers = collections.defaultdict(set)
            starts = set(self.addrs)
            for sec_addr, off, size in self.exec_sections:
                words = memoryview(self._data)[off:off + size - size % 4].cast("I")
                for k, w in enumerate(words):
                    op = w >> 26
                    if op != 0x25 and op != 0x05:  # BL imm26, B imm26
                        continue
                    src = sec_addr + 4 * k
                    imm = w & 0x3FFFFFF
                    dst = src + 4 * (imm - (1 << 26) if imm & (1 << 25) else imm)
                    if dst in starts:
                        i = bisect.bisect_right(self.addrs, src) - 1
                        if i >= 0 and self.addrs[i] != dst:
                            self._callers[dst].add(self.addrs[i])
            self._data = None
        return self._callers.get(addr, ())


class Symbolizer:
    def __init__(self, nm):
        self.nm, self.tabs, self.cache = nm, {}, {}

    def tab(self, path):
        if path not in self.tabs:
            self.tabs[path] = SymTab(path, self.nm) if os.path.isfile(path) else None
        return self.tabs[path]

    def sym(self, maps, starts, gaddr):
        """(name, address, is entry, SymTab or None) of a guest address."""
        i = bisect.bisect_right(starts, gaddr) - 1
        if i < 0 or gaddr >= maps[i][1]:
            return f"?0x{gaddr:x}", 0, False, None
        gstart, _gend, off, path = maps[i]
        t = self.tab(path)
        if t is None:
            return f"[{os.path.basename(path)}]", 0, False, None
        v = t.file_to_vaddr(gaddr - gstart + off)
        if v is None:
            return f"[{t.base}]", 0, False, None
        return t.lookup(v) + (t,)


# --------------------------------------------------------------------------- runs
class Run:
    """One armcost run: its tbs.txt and lookout's JSON."""

    def __init__(self, path):
        self.dir = path if os.path.isdir(path) else os.path.dirname(path) or "."
        self.tbs = os.path.join(path, "tbs.txt") if os.path.isdir(path) else path
        if not os.path.isfile(self.tbs):
            sys.exit(f"split.py: no {self.tbs}")
        js = os.path.join(self.dir, "stdout.json")
        if not os.path.isfile(js):
            sys.exit(f"split.py: no {js} (lookout bench --json output) beside {self.tbs}")
        run = json.load(open(js))["runs"][0]
        fr = run["frames"]
        self.processed, self.dropped = fr["processed"], fr["dropped"]
        self.skipped, self.applied = fr.get("detect_skipped", 0), fr.get("detections", 0)
        self.detect_every = run.get("detect_every")

    def profile(self, symb, tabs_of):
        """{(name, address): [instructions, entries]}; tabs_of[(name, address)] = SymTab."""
        maps, blocks = [], []
        with open(self.tbs) as f:
            for line in f:
                if line.startswith("#map "):
                    _, s, e, perms, off, p = line.rstrip("\n").split(" ", 5)
                    if not perms.startswith("---"):
                        maps.append((int(s, 16), int(e, 16), int(off, 16), p))
                elif not line.startswith("#"):
                    v = line.split(None, 4)
                    blocks.append((int(v[0], 16), int(v[1]), int(v[2]), int(v[3])))
        maps.sort()
        starts = [m[0] for m in maps]
        prof = collections.defaultdict(lambda: [0, 0])
        for gaddr, nbytes, n, execs in blocks:
            name, addr, entry, tab = symb.sym(maps, starts, gaddr)
            key = (name, addr)
            tabs_of.setdefault(key, tab)
            if entry:
                prof[key][1] += execs
            last = symb.sym(maps, starts, gaddr + max(nbytes - 1, 0))
            if (last[0], last[1]) == key or n <= 1:
                prof[key][0] += execs * n
            else:  # a block across a symbol boundary: per instruction (A64: 4 bytes each)
                step = nbytes / n
                for k in range(n):
                    s = symb.sym(maps, starts, gaddr + int(k * step))
                    tabs_of.setdefault(s[:2], s[3])
                    prof[s[:2]][0] += execs
        return prof


def difference(big, small, symb, tabs_of):
    d = big.profile(symb, tabs_of)
    for k, (ins, ent) in small.profile(symb, tabs_of).items():
        d[k][0] -= ins
        d[k][1] -= ent
    return {k: v for k, v in d.items() if v[0] or v[1]}


# --------------------------------------------------------------------------- classification
class Classifier:
    def __init__(self, tabs_of):
        self.tabs_of, self.memo = tabs_of, {}

    def stage(self, key):
        """(stage, reason) of one function."""
        if key not in self.memo:
            self.memo[key] = self._stage(*key)
        return self.memo[key]

    def _stage(self, name, addr):
        s = by_name(name)
        if s is not None:
            return s, ""
        tab = self.tabs_of.get((name, addr))
        if not addr or tab is None or PRIMITIVES.search(name):
            return "7", ""
        seen, frontier = {addr}, [addr]
        for _depth in range(MAX_DEPTH):
            found, nxt = set(), []
            for f in frontier:
                callers = tab.callers(f)
                if len(callers) > MAX_CALLERS:
                    return "7", f"many callers ({len(callers)})"
                for c in callers:
                    if c in seen:
                        continue
                    seen.add(c)
                    cn = tab.name_at(c)
                    cs = by_name(cn)
                    if cs is not None:
                        found.add((cs, cn))
                    elif not PRIMITIVES.search(cn):
                        nxt.append(c)
            if found:
                stages = {s for s, _ in found}
                if len(stages) == 1:
                    return stages.pop(), "via " + "; ".join(sorted({n[:80] for _, n in found}))[:200]
                return "7", "callers in several stages"
            frontier = nxt
            if not frontier:
                break
        return "7", "no caller with a stage"


def split(diff, frames, base, base_frames, cls):
    """{row: instructions} of one difference and [(row, function, instructions, reason)].
    Rows: "1".."7" (7 includes libc), "libc_level", "libc_above"."""
    rows, detail = collections.Counter(), []
    scale = frames / base_frames if base_frames else 0.0

    def add(row, key, ins, why):
        rows[row] += ins
        detail.append((row, key, ins, why))

    for key, (ins, _ent) in diff.items():
        name = key[0]
        stage, why = cls.stage(key)
        if stage == "jpeg":
            luma = base.get(key, (0, 0))[0] * scale
            add("2", key, luma, "JPEG code, luma part (the base pair's count)")
            add("4", key, ins - luma, "JPEG code, colour part (the rest)")
        elif name.endswith(LIBC):
            level = base.get(key, (0, 0))[0] * scale
            add("7", key, ins, "libc")
            rows["libc_level"] += level
            rows["libc_above"] += ins - level
        else:
            add(stage, key, ins, why)
    return rows, detail


def detections(diff, big, small):
    n = sum(ent for (name, _a), (_i, ent) in diff.items() if name == DETECT_FN)
    if n == 0 and big.applied != small.applied:
        print(f"split.py: warning: no entry of {DETECT_FN} in the trace; using the JSON's "
              f"detections (results applied, not those still running at the end)", file=sys.stderr)
        n = big.applied - small.applied
    return n


# --------------------------------------------------------------------------- output
def fm(x, d=3):
    return f"{x / M:,.{d}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--board", choices=sorted(BOARDS))
    ap.add_argument("--base", nargs=2, metavar=("BIG", "SMALL"))
    ap.add_argument("--pair", nargs=3, action="append", default=[], metavar=("LABEL", "BIG", "SMALL"))
    ap.add_argument("--fps", type=float, default=15.0, help="frame rate of the estimate (default 15)")
    ap.add_argument("--functions", help="write every function's stage and count per frame here (TSV)")
    ap.add_argument("--json", help="write the stage sums here")
    ap.add_argument("--nm", default=os.environ.get("NM", "nm"))
    ap.add_argument("--check-binary", metavar="BIN")
    a = ap.parse_args()
    if a.check_binary:
        sys.exit(0 if has_symtab(a.check_binary) else 1)
    if not (a.board and a.base and a.pair):
        ap.error("--board, --base and at least one --pair are needed")

    symb, tabs_of = Symbolizer(a.nm), {}
    cls = Classifier(tabs_of)
    b_big, b_small = Run(a.base[0]), Run(a.base[1])
    base = difference(b_big, b_small, symb, tabs_of)
    fb = b_big.processed - b_small.processed
    base_rows, base_detail = split(base, fb, base, fb, cls)
    base_dets = detections(base, b_big, b_small)
    if b_big.applied or b_small.applied or base_dets:
        print("split.py: warning: the no-detection pair has detections (executed or applied to the "
              "tracker): its floor includes them, and the per-detection figures lose them",
              file=sys.stderr)

    pairs = []
    for label, big_p, small_p in a.pair:
        big, small = Run(big_p), Run(small_p)
        d = difference(big, small, symb, tabs_of)
        f = big.processed - small.processed
        rows, detail = split(d, f, base, fb, cls)
        if big.skipped or small.skipped or big.dropped or small.dropped:
            print(f"split.py: warning: {label}: {big.skipped} + {small.skipped} detection requests skipped "
                  f"(the detector was busy: a longer --period avoids that), {big.dropped} + "
                  f"{small.dropped} frames dropped", file=sys.stderr)
        pairs.append(dict(label=label, big=big, small=small, frames=f, rows=rows, detail=detail,
                          dets=detections(d, big, small), total=sum(v[0] for v in d.values())))
    base_total = sum(v[0] for v in base.values())

    name, core, ipc, ghz = BOARDS[a.board]
    print(f"### {name} ({core}, armcost --board {a.board})\n")
    print("Guest instructions, M = 10^6, counted under the ARM instruction proxy (a count, not a time).\n")
    hdr = "| stage | " + " | ".join(f"per frame {p['label']}" for p in pairs) + \
          " | per detection | per frame, no detection |"
    print(hdr)
    print("|---" + "|---:" * (len(pairs) + 2) + "|")
    dsum = sum(p["dets"] for p in pairs)

    def per_det(row_of):
        if not dsum:
            return ""
        extra = sum(row_of(p["rows"], p["total"]) - row_of(base_rows, base_total) * p["frames"] / fb for p in pairs)
        return fm(extra / dsum, 2)

    def line(label, row_of, det):
        cells = [fm(row_of(p["rows"], p["total"]) / p["frames"]) for p in pairs]
        print(f"| {label} | " + " | ".join(cells) + f" | {per_det(row_of) if det else ''} | "
              f"{fm(row_of(base_rows, base_total) / fb)} |")

    for key, label in STAGES:
        line(f"**{label}**", lambda r, t, k=key: r[k], key in "456")
        if key == "7":
            line("&nbsp;&nbsp;of which libc.so.6 above the no-detection level",
                 lambda r, t: r["libc_above"], True)
    line("**total**", lambda r, t: t, True)
    detector = lambda r, t: r["4"] + r["5"] + r["6"] + r["libc_above"]
    print("| detector thread, per detection: 4 + 5 + 6 + its libc | " + " | ".join("" for _ in pairs) +
          f" | {per_det(detector)} | |")
    print()
    for p in pairs:
        b, s = p["big"], p["small"]
        print(f"- {p['label']}: frames {s.processed + 1}–{b.processed} of the clip "
              f"({p['frames']} frames = {b.processed}-frame run − {s.processed}-frame run), "
              f"{p['dets']} detections executed ({p['dets'] / p['frames']:.3f} per frame); "
              f"frames dropped {b.dropped} + {s.dropped}, detection requests skipped "
              f"{b.skipped} + {s.skipped} (both runs)")
    print(f"- no detection: {fb} frames ({b_big.processed}-frame − {b_small.processed}-frame run, "
          f"--detect-every 1000, unpaced), {base_dets} detections executed, "
          f"{b_big.applied} + {b_small.applied} applied to the tracker")
    print("- per detection = (stage − the same stage with no detection) ÷ detections executed, pooled over "
          "the columns; blank for the per-frame stages (the tracker's extra work follows what the "
          "detections found, on every frame). The total's per-detection figure is everything the "
          "detections add, the tracking of what they found included.")
    rate = ipc * ghz * 1e9
    print(f"\n**Estimate, not a measurement**: {name} at {a.fps:g} fps, assuming every frame costs what "
          f"this clip's frames (640×480 MJPEG) cost here, the same detections per frame, every requested "
          f"detection runs, and one core retires IPC {ipc:g} × {ghz:g} GHz = {rate / 1e9:g} G instructions/s "
          f"(summed over threads):\n")
    print("| | instructions / s | share of one core |")
    print("|---|---:|---:|")
    for lab, per_frame in [(p["label"], p["total"] / p["frames"]) for p in pairs] + \
            [("no detection, no tracks", base_total / fb)]:
        ips = per_frame * a.fps
        share = 100 * ips / rate
        print(f"| {lab} ({per_frame / M:.1f} M/frame) | {ips / 1e9:.3f} G/s | {share:.{0 if share >= 10 else 1}f} % |")
    print()

    if a.functions:
        with open(a.functions, "w") as f:
            f.write("stage\tfunction\taddress\t" + "\t".join(p["label"] for p in pairs) +
                    "\tno detection\treason\n")
            per = collections.defaultdict(lambda: [0.0] * (len(pairs) + 1))
            why = {}
            for i, det in enumerate([p["detail"] for p in pairs] + [base_detail]):
                frames = pairs[i]["frames"] if i < len(pairs) else fb
                for row, key, ins, w in det:
                    per[(row, key)][i] += ins / frames
                    why.setdefault((row, key), w)
            for (row, key), v in sorted(per.items(), key=lambda kv: (kv[0][0], -max(map(abs, kv[1])))):
                f.write(f"{row}\t{key[0]}\t{key[1]:x}\t" + "\t".join(f"{x:.1f}" for x in v) +
                        f"\t{why[(row, key)]}\n")
    if a.json:
        out = {"board": a.board, "base": {"frames": fb, "total": base_total, "rows": base_rows},
               "pairs": [{k: p[k] for k in ("label", "frames", "dets", "total", "rows")} for p in pairs]}
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
