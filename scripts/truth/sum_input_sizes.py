#!/usr/bin/env python3
"""sum_input_sizes.py — sums `lookout bench --sweep input-size --json` reports of several
recordings into one table per input size (Markdown), after one table per recording.

Usage: sum_input_sizes.py REPORT.json...
"""
import json
import sys

BINS = ("small", "middle", "large")


def pct(found: int, boxes: int) -> str:
    return f"{100 * found / boxes:.1f} % ({found}/{boxes})" if boxes else "–"


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    total = {}
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            rep = json.load(f)["input_size"]
        if rep is None:
            sys.exit(f"{path}: not an input-size report")
        print(f"\n{rep['source']} ({rep['frames']} frames, auto {rep['auto'][0]}x{rep['auto'][1]})\n")
        print("| input | model × declared | recall < 24 px | 24–48 px | > 48 px | false boxes / frame |")
        print("|---|---|---|---|---|---|")
        for r in rep["rows"]:
            d = r["detections"]
            key = (r["width"], r["height"])
            t = total.setdefault(key, {"found": [0, 0, 0], "boxes": [0, 0, 0], "false": 0,
                                       "frames": 0, "vs": [], "ev": [[0.0, 0], [0.0, 0]],
                                       "missed": [0, 0], "to_find": 0, "false_ev": [0, 0]})
            t["vs"].append(r["model_vs_declared"])
            if d is None:
                continue
            for i, b in enumerate(BINS):
                t["found"][i] += d[b]["found"]
                t["boxes"][i] += d[b]["boxes"]
            t["false"] += d["false_boxes"]
            t["frames"] += d["frames"]
            for i, e in enumerate((r["events_fixed"], r["events_adaptive"])):
                t["ev"][i][0] += e["events_per_object"] * e["objects"]
                t["ev"][i][1] += e["objects"]
                t["missed"][i] += e["missed"]
                t["false_ev"][i] += e["false_events"]
            t["to_find"] += r["events_fixed"]["objects_to_find"]
            cells = [pct(d[b]["found"], d[b]["boxes"]) for b in BINS]
            print(f"| {key[0]}x{key[1]} | {r['model_vs_declared']:.2f} | {' | '.join(cells)} | {d['false_boxes_per_frame']:.2f} |")
    print(f"\nAll {len(sys.argv) - 1} recordings\n")
    print("| input | model × declared | recall < 24 px | 24–48 px | > 48 px | false boxes / frame | events / object (fixed, adaptive) | missed (fixed, adaptive) | false events |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key, t in sorted(total.items(), key=lambda kv: (kv[0][0] * kv[0][1], kv[0][0])):
        vs = sorted(t["vs"])
        cells = [pct(t["found"][i], t["boxes"][i]) for i in range(3)]
        ev = [f"{s / n:.2f}" if n else "–" for s, n in t["ev"]]
        fb = t["false"] / t["frames"] if t["frames"] else 0.0
        print(f"| {key[0]}x{key[1]} | {vs[0]:.2f}–{vs[-1]:.2f} | {' | '.join(cells)} | {fb:.2f} | "
              f"{ev[0]}, {ev[1]} | {t['missed'][0]}, {t['missed'][1]} of {t['to_find']} | "
              f"{t['false_ev'][0]}, {t['false_ev'][1]} |")


if __name__ == "__main__":
    main()
