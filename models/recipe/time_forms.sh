#!/usr/bin/env bash
# Interleaved timing of model files in tract, through lookout itself (`lookout bench
# --inference-only`: the model alone on the golden photos, after the golden self-check).
#
#   models/recipe/time_forms.sh [-r ROUNDS] [-n RUNS] [-t THREADS,...] FILE ...
#
# Each round runs every (file, threads) pair once, the order rotated every round, so slow
# phases of a shared machine hit every file alike. One run = load + 3 warm-ups + RUNS timed
# inferences on each golden photo; a run's figure is the median over its inferences. Prints,
# per file and thread count, the median over rounds of the run medians, and its ratio to the
# first file at 1 thread (list FP32 first). 1-thread runs are pinned to one core (taskset).
# Needs a built lookout (cargo build --release) — LOOKOUT=path overrides target/release/lookout.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
LOOKOUT="${LOOKOUT:-$REPO/target/release/lookout}"
rounds=5 runs=5 threads=1,2
while getopts "r:n:t:" o; do
  case $o in r) rounds=$OPTARG ;; n) runs=$OPTARG ;; t) threads=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-r ROUNDS] [-n RUNS] [-t 1,2] FILE..." >&2; exit 2; }
[ -x "$LOOKOUT" ] || { echo "no lookout binary at $LOOKOUT: cargo build --release first" >&2; exit 2; }
out=$(mktemp)
pairs=()
for f in "$@"; do for t in ${threads//,/ }; do pairs+=("$f|$t"); done; done
n=${#pairs[@]}
for ((r = 0; r < rounds; r++)); do
  for ((k = 0; k < n; k++)); do
    p=${pairs[$(((k + r) % n))]}; f=${p%|*}; t=${p#*|}
    pin=(); [ "$t" = 1 ] && pin=(taskset -c 1)
    ms=$(cd "$REPO" && "${pin[@]}" "$LOOKOUT" bench --inference-only "$runs" --model "$f" --threads "$t" --json 2>/dev/null \
         | python3 -c 'import json,sys; print(json.load(sys.stdin)["inference"]["median_ms"])')
    echo "$f $t $ms" >> "$out"
    echo "round $((r + 1))/$rounds: $(basename "$f") ${t}t ${ms} ms" >&2
  done
done
python3 - "$out" "$@" <<'PY'
import sys, statistics, collections, os
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f, t, ms = line.split(); rows[f, int(t)].append(float(ms))
files = sys.argv[2:]
ts = sorted({t for _, t in rows})
ref = statistics.median(rows[files[0], ts[0]])
print('| file | ' + ' | '.join('%d thread%s median ms (× %s %dt)' % (t, '' if t == 1 else 's', os.path.basename(files[0]), ts[0]) for t in ts) + ' | rounds |')
print('|---|' + '---|' * len(ts) + '---|')
for f in files:
    cells = []
    for t in ts:
        m = statistics.median(rows[f, t]); cells.append('%.1f (%.2f)' % (m, m / ref))
    print('| %s | %s | %d |' % (os.path.basename(f), ' | '.join(cells), len(rows[f, ts[0]])))
PY
rm -f "$out"
