#!/usr/bin/env python3
"""Peer comparison: lookout's engine (tract) against onnxruntime on the same network, the same
photos and the same thread count.

Rows, for every thread count asked for:
  * FP32 vs FP32: models/nanodet-g-416-fp32.onnx in both engines;
  * INT8, each engine's best form: tract runs the shipped s8-symmetric file
    (models/nanodet-g-416-int8.onnx); onnxruntime runs the per-channel u8 QDQ form
    (nanodet_int8_qdq_pc_u8.onnx, from the recipe's work dir — onnxruntime has no fast path for
    s8 activations).

tract is timed by `lookout bench --inference-only RUNS --threads T --model FILE --json`: the
network alone (`Detector::run_raw`) on the golden photos (models/golden/<img>-416x416.png, the
exact model input), 3 warm-ups then RUNS timed runs per photo. onnxruntime gets the same input
tensors, the same warm-ups and runs, `intra_op_num_threads=T`, `inter_op_num_threads=1`,
sequential execution, all graph optimizations. Reported: the median ms per run, the ratio
tract/ORT, and whether the detections agree (top detection same class with IoU >= 0.9; and how
many of ORT's detections tract finds again, same class, IoU >= 0.5).

Run it with scripts/peer_compare.sh (it makes the venv). Needs no network besides PyPI for
the venv; the models and photos come from the repository.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from PIL import Image

REPO = Path(__file__).resolve().parent.parent
MEAN_BGR = np.array([103.53, 116.28, 123.675], np.float32)
STD_BGR = np.array([57.375, 57.12, 58.395], np.float32)
OUTS = ['cls_8', 'reg_8', 'cls_16', 'reg_16', 'cls_32', 'reg_32']
STRIDES = (8, 16, 32)
REG_MAX = 10
U8_FORM = 'nanodet_int8_qdq_pc_u8.onnx'
U8_DIRS = ['/var/cache/lookout-models/work/forms', '/var/cache/lookout-models/fresh/forms',
           '/var/cache/lookout-models/work/v']


def to_input(png):
    """The golden PNG (already at model size) -> f32 NCHW BGR (px - mean) / std, in f32."""
    rgb = np.asarray(Image.open(png).convert('RGB'))
    x = (rgb[:, :, ::-1].astype(np.float32) - MEAN_BGR) / STD_BGR
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None]).astype(np.float32)


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    i = ix * iy
    u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - i
    return i / u if u > 0 else 0.0


def decode(outs, w, h, score_thr=0.35, iou_thr=0.6):
    """GFL/DFL decode + class-wise NMS, as lookout and models/README.md define it.
    Returns [(class_id, score, [x0, y0, x1, y1])], best first, boxes in input pixels."""
    dets = []
    for s in STRIDES:
        cls = outs['cls_%d' % s].reshape(-1, 80)
        reg = outs['reg_%d' % s].reshape(-1, 4 * (REG_MAX + 1))
        n = w // s
        for idx in np.nonzero(cls.max(1) > score_thr)[0]:
            c = int(cls[idx].argmax())
            y, x = divmod(int(idx), n)
            cx, cy = (x + 0.5) * s, (y + 0.5) * s
            d = reg[idx].reshape(4, REG_MAX + 1).astype(np.float64)
            e = np.exp(d - d.max(1, keepdims=True))
            dist = ((e / e.sum(1, keepdims=True)) * np.arange(REG_MAX + 1)).sum(1) * s
            dets.append((c, float(cls[idx, c]), [max(cx - dist[0], 0.0), max(cy - dist[1], 0.0),
                                                 min(cx + dist[2], float(w)), min(cy + dist[3], float(h))]))
    dets.sort(key=lambda d: -d[1])
    keep = []
    for d in dets:
        if all(k[0] != d[0] or iou(k[2], d[2]) <= iou_thr for k in keep):
            keep.append(d)
    return keep


def time_ort(model, photos, threads, runs):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(str(model), so, providers=['CPUExecutionProvider'])
    load_ms = (time.perf_counter() - t0) * 1e3
    inp = sess.get_inputs()[0].name
    all_ms, dets = [], {}
    for name, x in photos:
        for _ in range(3):
            out = sess.run(OUTS, {inp: x})
        for _ in range(runs):
            t0 = time.perf_counter()
            out = sess.run(OUTS, {inp: x})
            all_ms.append((time.perf_counter() - t0) * 1e3)
        h, w = x.shape[2], x.shape[3]
        dets[name] = decode(dict(zip(OUTS, out)), w, h)
    return statistics.median(all_ms), min(all_ms), load_ms, dets


def time_tract(lookout, model, threads, runs, golden):
    cmd = [str(lookout), 'bench', '--inference-only', str(runs), '--threads', str(threads),
           '--model', str(model), '--json']
    env = dict(os.environ, LOOKOUT_GOLDEN_DIR=str(golden))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode not in (0, 2):
        sys.exit('lookout bench failed (%d): %s\n%s' % (p.returncode, ' '.join(cmd), p.stderr))
    doc = json.loads(p.stdout)
    inf = doc['inference']
    dets = {i['image']: [(d['class_id'], d['score'], d['box']) for d in i['detections']]
            for i in inf['images']}
    return inf['median_ms'], inf['min_ms'], inf['model']['load_time_ms'], dets, doc['self_check']['status']


def agreement(tract, ref):
    """(photos whose top detection agrees, photos), (ref detections found again, ref detections)."""
    top_ok, found, total = 0, 0, 0
    for img, r in ref.items():
        t = tract.get(img, [])
        if not r and not t:
            top_ok += 1
        elif r and t and r[0][0] == t[0][0] and iou(r[0][2], t[0][2]) >= 0.9:
            top_ok += 1
        for d in r:
            total += 1
            if any(x[0] == d[0] and iou(x[2], d[2]) >= 0.5 for x in t):
                found += 1
    return top_ok, len(ref), found, total


def find_u8(arg):
    if arg:
        return Path(arg)
    for d in ([os.environ['LOOKOUT_MODEL_WORK'] + '/forms'] if os.environ.get('LOOKOUT_MODEL_WORK') else []) + U8_DIRS:
        p = Path(d) / U8_FORM
        if p.is_file():
            return p
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--lookout', default=None, help='lookout binary (default: target/release/lookout, then target/debug/lookout, then PATH)')
    ap.add_argument('--threads', default='1,2', help='comma-separated thread counts (default 1,2)')
    ap.add_argument('--runs', type=int, default=10, help='timed runs per photo (default 10)')
    ap.add_argument('--models', default=str(REPO / 'models'), help='directory with the shipped .onnx files')
    ap.add_argument('--golden', default=str(REPO / 'models' / 'golden'), help='golden directory (photos)')
    ap.add_argument('--ort-int8', default=None, help='onnxruntime INT8 form (default: %s in the recipe work dir)' % U8_FORM)
    ap.add_argument('--json', default=None, help='also write the rows as JSON to this file')
    a = ap.parse_args()

    lookout = a.lookout
    if lookout is None:
        for c in (REPO / 'target/release/lookout', REPO / 'target/debug/lookout'):
            if c.is_file():
                lookout = c
                break
        else:
            lookout = 'lookout'
    models, golden = Path(a.models), Path(a.golden)
    photos = [(p.name[:-len('-416x416.png')], to_input(p)) for p in sorted(golden.glob('*-416x416.png'))]
    if not photos:
        sys.exit('no golden photos (*-416x416.png) in %s' % golden)
    u8 = find_u8(a.ort_int8)
    pairs = [('FP32', models / 'nanodet-g-416-fp32.onnx', models / 'nanodet-g-416-fp32.onnx')]
    if u8 is None:
        print('note: %s not found (looked in %s); the INT8 row is skipped. Regenerate it with\n'
              '  models/recipe/make_models.sh /var/cache/lookout-models/work   (writes work/forms/%s)\n'
              'or pass --ort-int8 FILE.' % (U8_FORM, ', '.join(U8_DIRS), U8_FORM), file=sys.stderr)
    else:
        pairs.append(('INT8 best', models / 'nanodet-g-416-int8.onnx', u8))
    print('lookout: %s | onnxruntime %s | numpy %s | %d photos x %d runs (+3 warm-up each)'
          % (lookout, ort.__version__, np.__version__, len(photos), a.runs))
    rows = []
    hdr = '%-10s %3s  %-30s %9s  %-30s %9s  %6s  %-9s %-9s' % (
        'precision', 'thr', 'tract model', 'tract ms', 'onnxruntime model', 'ORT ms', 'ratio', 'top-1', 'found')
    print(hdr)
    print('-' * len(hdr))
    for threads in [int(t) for t in a.threads.split(',') if t.strip()]:
        for label, tract_model, ort_model in pairs:
            t_med, t_min, t_load, t_dets, check = time_tract(lookout, tract_model, threads, a.runs, golden)
            o_med, o_min, o_load, o_dets = time_ort(ort_model, photos, threads, a.runs)
            top_ok, n, found, total = agreement(t_dets, o_dets)
            row = dict(precision=label, threads=threads, tract_model=tract_model.name, tract_ms=round(t_med, 2),
                       tract_min_ms=round(t_min, 2), tract_load_ms=t_load, tract_self_check=check,
                       ort_model=ort_model.name, ort_ms=round(o_med, 2), ort_min_ms=round(o_min, 2),
                       ort_load_ms=round(o_load, 1), ratio=round(t_med / o_med, 2),
                       top1_agree=[top_ok, n], found=[found, total])
            rows.append(row)
            print('%-10s %3d  %-30s %9.1f  %-30s %9.1f  %6.2f  %-9s %-9s' % (
                label, threads, tract_model.name, t_med, ort_model.name, o_med, t_med / o_med,
                '%d/%d' % (top_ok, n), '%d/%d' % (found, total)))
    print('ms = median per run over all photos; ratio = tract / onnxruntime (< 1: tract faster);\n'
          'top-1 = photos whose top detection has the same class and IoU >= 0.9 in both engines;\n'
          'found = onnxruntime detections that tract finds again (same class, IoU >= 0.5).')
    if a.json:
        Path(a.json).write_text(json.dumps(dict(onnxruntime=ort.__version__, runs=a.runs, rows=rows), indent=2))


if __name__ == '__main__':
    main()
