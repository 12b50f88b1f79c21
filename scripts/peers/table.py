"""Host-side: the peer table from armcost summaries. Plain python3, no packages.
Usage: table.py ROWS.tsv OUT.md
ROWS.tsv lines: key<TAB>engine<TAB>form<TAB>board<TAB>dir_lo<TAB>dir_hi<TAB>divisor[<TAB>note]
per image = (insns(dir_hi) - insns(dir_lo)) / divisor. A row whose summaries are missing is
printed as not run, with its note. The ratio column is lookout INT8 (key lookout-int8, same
board) / the row's per-image count (< 1: lookout executes fewer instructions)."""
import os
import sys


def summary(d):
    p = os.path.join(d, 'summary.txt')
    if not os.path.isfile(p) or not os.path.isfile(os.path.join(d, 'ok')):
        return None
    v = {}
    for line in open(p):
        f = line.split()
        if len(f) >= 2:
            v[f[0]] = f[1]
    return v


rows, per = [], {}
for line in open(sys.argv[1]):
    if not line.strip():
        continue
    f = line.rstrip('\n').split('\t')
    key, engine, form, board, lo, hi, div = f[:7]
    note = f[7] if len(f) > 7 else ''
    a, b = summary(lo), summary(hi)
    if a and b:
        p = (int(b['insns']) - int(a['insns'])) / float(div)
        per[(key, board)] = p
        rows.append((key, engine, form, board, p, int(a['insns']), '%s/%s' % (a.get('vcpus', '?'), b.get('vcpus', '?')), note))
    else:
        rows.append((key, engine, form, board, None, None, '', note or 'not run'))

out = ['| engine | form | board | per image (M) | lookout INT8 ÷ row | low run total (M) | guest threads lo/hi |',
       '|---|---|---|---|---|---|---|']
for key, engine, form, board, p, n1, vc, note in rows:
    if p is None:
        out.append("| %s | %s | %s | – (%s) | | | |" % (engine, form, board, note))
        continue
    base = per.get(('lookout-int8', board))
    ratio = '%.2f' % (base / p) if base else '–'
    out.append('| %s | %s | %s | **%.1f** | %s | %.1f | %s |' % (engine, form, board, p / 1e6, ratio, n1 / 1e6, vc))
text = '\n'.join(out) + '\n'
sys.stdout.write(text)
with open(sys.argv[2], 'w') as fh:
    fh.write(text)
