"""Interleaved A/B timing of model forms in tract with the team's tractcheck harness
(shared/model/int8/tractcheck, built outside the repo). Research tool: the shipped files do not
depend on it.

  bench_tract.py TRACTCHECK INPUT.f32 ROUNDS ITERS MODEL.onnx[:ENV=V,...] ...

Each round runs every model once per thread count (1, then 2), in an order rotated by one per
round, so drift of this shared machine hits all models alike. A run = load + optimize + 3 warm-up
+ ITERS timed inferences; its median is one sample. Prints per model and thread count the
median over rounds of the run medians, and the median over rounds of each run's fastest inference. 1-thread runs are pinned to one core
(taskset -c 1); all runs get nice -5 for their few seconds."""
import sys, os, re, subprocess, statistics, collections

tc, inp, rounds, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
specs = sys.argv[5:]
threads = [int(t) for t in os.environ.get('THREADS', '1,2').split(',')]
res = collections.defaultdict(list)
mins = collections.defaultdict(list)
for r in range(rounds):
    order = specs[r % len(specs):] + specs[:r % len(specs)]
    for th in threads:
        for spec in order:
            path, _, envs = spec.partition(':')
            env = dict(os.environ)
            for kv in filter(None, envs.split(',')):
                k, v = kv.split('='); env[k] = v
            W = env.get('W', '416'); H = env.get('H', '416')
            cmd = ['nice', '-n', '-5'] + (['taskset', '-c', '1'] if th == 1 else []) + [tc, path, str(th), str(iters), '%s@%sx%s' % (inp, W, H)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True)
            m = re.search(r'TIMING \S+ threads=\d+ median ([\d.]+) ms \(min ([\d.]+)', out.stdout)
            if not m:
                print('FAILED', spec, th, out.stdout[-500:], out.stderr[-1500:], flush=True); continue
            res[spec, th].append(float(m.group(1))); mins[spec, th].append(float(m.group(2)))
            print('round %d %-70s t=%d %6.1f ms' % (r, spec, th, float(m.group(1))), flush=True)
print('\nSUMMARY (median of %d interleaved runs, each the median of %d inferences; [median over runs of the\n fastest inference of each run]; ratios to the first model)' % (rounds, iters))
base = {th: statistics.median(res[specs[0], th]) for th in threads if res[specs[0], th]}
bmin = {th: statistics.median(mins[specs[0], th]) for th in threads if mins[specs[0], th]}
for spec in specs:
    row = []
    for th in threads:
        v = res[spec, th]
        if v:
            md = statistics.median(v); mn = statistics.median(mins[spec, th])
            row.append('t%d %6.1f ms x%.2f [%5.1f x%.2f]' % (th, md, md / base[th], mn, mn / bmin[th]))
    size = os.path.getsize(spec.partition(':')[0])
    print('%-75s %s  %d bytes' % (spec, '  '.join(row), size))
