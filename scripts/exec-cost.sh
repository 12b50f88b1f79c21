#!/usr/bin/env bash
# What the command source costs: `lookout bench` on the bundled clip read directly and through
# `exec:cat` (the same bytes through a pipe, a child process and its restarts), interleaved,
# PAIRS pairs of SECONDS each. Prints, per run and as medians, the CPU per processed frame
# of the per-frame path (capture + tracking with the JPEG decode: the stages the source
# touches; the model's share depends on how many detections fit in the run's wall time) and
# of the whole process (and of capture alone, where the two differ), then the exec/file ratio of each.
#   scripts/exec-cost.sh [PAIRS] [SECONDS]     (default 3 pairs of 10 s; debug build)
# LOOKOUT=path/to/lookout picks the binary (default: target/debug/lookout, built first).
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=${1:-3}
seconds=${2:-10}
clip=tests/data/demo/vtest-640x480-10fps.mjpeg
if [[ -z "${LOOKOUT:-}" ]]; then
  cargo build -q
  LOOKOUT="${CARGO_TARGET_DIR:-target}/debug/lookout"
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for i in $(seq "$pairs"); do
  for kind in file exec; do
    spec=$clip
    [[ $kind == exec ]] && spec="exec:cat $clip"
    "$LOOKOUT" bench --source "$spec" --seconds "$seconds" --json >"$out/$kind-$i.json" 2>/dev/null
  done
done
python3 - "$out" "$pairs" <<'PY'
import json, statistics, sys
out, pairs = sys.argv[1], int(sys.argv[2])
rows = {"file": [], "exec": []}
for i in range(1, pairs + 1):
    for kind in rows:
        run = json.load(open(f"{out}/{kind}-{i}.json"))["runs"][0]
        n = run["frames"]["processed"]
        stages = {s["name"]: s for s in run["stages"]}
        capture = stages["capture"]["cpu_ms"] / n
        path = capture + stages["track"]["cpu_ms"] / n
        whole = run["cpu"]["process_s"] * 1000 / n
        rows[kind].append((capture, path, whole))
        print(f"{kind} #{i}: {n} frames, {run['frames']['detections']} detections, CPU per frame: "
              f"capture {capture:.3f} ms, capture+tracking {path:.3f} ms, process {whole:.3f} ms")
med = {k: [statistics.median(r[j] for r in v) for j in range(3)] for k, v in rows.items()}
for j, what in enumerate(["capture", "capture+tracking", "whole process"]):
    print(f"median {what}: file {med['file'][j]:.3f} ms, exec {med['exec'][j]:.3f} ms, "
          f"exec/file {med['exec'][j] / med['file'][j]:.3f}")
PY
