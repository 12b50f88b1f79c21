#!/usr/bin/env bash
# Does a camera find less when it shares the detector with three others? Each of the four
# street recordings with a ground truth (tests/data/truth/) is played alone, then all four at
# once as four cameras of one daemon (one model, the shared detector), each at its own 10 fps
# (`--realtime`), with the adaptive schedule, ROUNDS times interleaved. Every run is scored
# against the recordings' ground truth (`lookout bench --truth`). Prints, per recording, the
# box recall (the share of true boxes a track's box was on), events per true object, false
# and missed events and frames dropped, alone and together, and the difference of the medians.
#   scripts/cameras-coverage.sh [ROUNDS] [SECONDS]   (default 3 rounds of 20 s; debug build)
# LOOKOUT=path/to/lookout picks the binary (default: target/debug/lookout, built first);
# BENCH_ARGS adds arguments to every run (e.g. "--threads 2", "--model FILE").
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-20}
truth=tests/data/truth
names=(vtest-640x480-10fps vtest-200-399 vtest-400-599 vtest-600-794)
src() { [[ $1 == vtest-640x480-10fps ]] && echo tests/data/demo/$1.mjpeg || echo $truth/$1.mjpeg; }
if [[ -z "${LOOKOUT:-}" ]]; then
  cargo build -q
  LOOKOUT="${CARGO_TARGET_DIR:-target}/debug/lookout"
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
read -r -a extra <<< "${BENCH_ARGS:-}"
common=(--realtime --seconds "$seconds" --schedule adaptive --json "${extra[@]}")
for i in $(seq "$rounds"); do
  together=()
  for n in "${names[@]}"; do
    "$LOOKOUT" bench --source "$(src "$n")" --truth "$truth/$n.gt.txt" "${common[@]}" \
      >"$out/alone-$n-$i.json" 2>/dev/null
    together+=(--source "$(src "$n")" --truth "$truth/$n.gt.txt")
  done
  "$LOOKOUT" bench "${together[@]}" "${common[@]}" >"$out/together-$i.json" 2>/dev/null
  echo "round $i of $rounds done" >&2
done
python3 - "$out" "$rounds" "${names[@]}" <<'PY'
import json, statistics, sys
out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def fig(c):
    t = c["truth"]
    return {"recall": t["recall"], "events/object": t["events_per_object"],
            "false": t["false_events"], "missed": t["missed"],
            "dropped": c["frames"]["dropped"], "detect/s": c["detect_fps"] or 0.0}
alone = {n: [] for n in names}
together = {n: [] for n in names}
for i in range(1, rounds + 1):
    for n in names:
        alone[n].append(fig(json.load(open(f"{out}/alone-{n}-{i}.json"))["runs"][0]["cameras"][0]))
    cams = json.load(open(f"{out}/together-{i}.json"))["runs"][0]["cameras"]
    for n, c in zip(names, cams):
        together[n].append(fig(c))
keys = ["recall", "events/object", "false", "missed", "dropped", "detect/s"]
print("| recording | " + " | ".join(f"{k} alone / together" for k in keys) + " | recall: together − alone (points) |")
print("|---|" + "---|" * (len(keys) + 1))
for n in names:
    cells = []
    for k in keys:
        a = [r[k] for r in alone[n]]
        t = [r[k] for r in together[n]]
        fmt = "{:.2f}" if isinstance(a[0], float) else "{}"
        cells.append(fmt.format(statistics.median(a)) + " / " + fmt.format(statistics.median(t))
                     + " (" + ", ".join(fmt.format(x) for x in a) + " / " + ", ".join(fmt.format(x) for x in t) + ")")
    diff = 100 * (statistics.median(r["recall"] for r in together[n]) - statistics.median(r["recall"] for r in alone[n]))
    print(f"| {n} | " + " | ".join(cells) + f" | {diff:+.1f} |")
PY
