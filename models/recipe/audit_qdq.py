"""Audit of every quantized activation of an INT8 NanoDet file against FP32 on camera-like data.

  audit_qdq.py FP32.onnx INT8.onnx [--size S] [--md]

For each activation the INT8 graph quantizes (a QuantizeLinear on a non-constant, or a
QLinearConv output) it prints the representable range (scale and zero point), the range the
FP32 model's same tensor takes on the evaluation data (every 5th frame of the bundled clip and
the photos in tests/data, letterboxed as lookout does by default), the share of FP32 values
outside the range (clipped), and what the tensor feeds. Then, per model output, the largest
value the output can carry: the quantization ceiling the decoder sees (for cls_s, the largest
score; 1.0 when no quantization follows the last float op), and the largest FP32 value seen.
Exits 1 if a cls output cannot carry 0.99, or a tensor feeding an output clips FP32 values.
"""
import sys, os, collections, argparse, numpy as np, onnx
from onnx import numpy_helper, helper
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanodet_common import load_rgb, letterbox_rgb, to_input, clip_rgb, OUTS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIP = os.path.join(REPO, 'tests', 'data', 'demo', 'vtest-640x480-10fps.mjpeg')
PHOTOS = [os.path.join(REPO, 'tests', 'data', n) for n in ('astronaut.jpg', 'chelsea.jpg', 'coffee.jpg')]


def eval_inputs(size):
    """The gate's images (every 5th clip frame + the photos), letterboxed to size x size."""
    rgbs = clip_rgb(CLIP, every=5) + [load_rgb(p) for p in PHOTOS]
    return [to_input(letterbox_rgb(rgb, size, size)[0]) for rgb in rgbs]


def qrange(scale, zp, dtype):
    lo, hi = (-128, 127) if dtype == np.int8 else (0, 255)
    return (lo - int(zp)) * float(scale), (hi - int(zp)) * float(scale)


def quantized_tensors(m):
    """-> {float tensor name in FP32: (range lo, hi, scale, what produces it)} for every
    activation the INT8 graph quantizes."""
    g = m.graph
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    out = {}
    for n in g.node:
        if n.op_type == 'QuantizeLinear' and n.input[0] not in inits:
            s, z = inits[n.input[1]], inits[n.input[2]]
            out[n.input[0]] = qrange(s, z, z.dtype) + (float(s), 'Q', n.output[0])
        elif n.op_type == 'QLinearConv':
            s, z = inits[n.input[6]], inits[n.input[7]]
            name = n.output[0]
            for suffix in ('_QuantizeLinear_Output',):
                if name.endswith(suffix):
                    name = name[:-len(suffix)]
            out[name] = qrange(s, z, z.dtype) + (float(s), 'QLinearConv', n.output[0])
    return out


def output_ceilings(m):
    """Largest value each graph output can carry, walking back through shape ops and Sigmoid to
    the nearest quantization: None when nothing quantized limits it."""
    g = m.graph
    prod = {o: n for n in g.node for o in n.output}
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    res = {}
    for o in g.output:
        t, sig = o.name, 0
        ceiling = None
        while t in prod:
            n = prod[t]
            if n.op_type in ('DequantizeLinear', 'QLinearConv'):
                si, zi = (1, 2) if n.op_type == 'DequantizeLinear' else (6, 7)
                z = inits[n.input[zi]]
                ceiling = qrange(inits[n.input[si]], z, z.dtype)[1]
                break
            if n.op_type == 'Sigmoid':
                sig += 1
            elif n.op_type not in ('Transpose', 'Reshape', 'Split', 'Flatten', 'Identity', 'QuantizeLinear'):
                break
            t = n.input[0]
        if ceiling is not None:
            for _ in range(sig):
                ceiling = 1.0 / (1.0 + np.exp(-ceiling))
        res[o.name] = ceiling if ceiling is not None else (1.0 if o.name.startswith('cls') else float('inf'))
    return res


PASS = ('Split', 'Sigmoid', 'Reshape', 'Transpose', 'QuantizeLinear', 'DequantizeLinear')


def feeds_output(m):
    """Float tensor names from which an output is reached through float/shape ops only."""
    g = m.graph
    cons = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            cons[i].append(n)
    outs = {o.name for o in g.output}
    memo = {}

    def reach(t, depth=0):
        if t in outs:
            return True
        if depth > 12:
            return False
        if t not in memo:
            memo[t] = any(reach(o, depth + 1) for c in cons[t] if c.op_type in PASS for o in c.output)
        return memo[t]
    return reach


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('fp32'); ap.add_argument('int8'); ap.add_argument('--size', type=int, default=416)
    ap.add_argument('--md', action='store_true', help='Markdown table')
    a = ap.parse_args()
    import onnxruntime as ort
    mi = onnx.load(a.int8)
    qt = quantized_tensors(mi)
    mf = onnx.load(a.fp32)
    known = {v for n in mf.graph.node for v in n.output}
    names = [t for t in qt if t in known and t not in OUTS]
    for t in names:
        mf.graph.output.append(helper.make_empty_tensor_value_info(t))
    so = ort.SessionOptions(); so.intra_op_num_threads = 2
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(mf.SerializeToString(), so, providers=['CPUExecutionProvider'])
    want = names + OUTS
    lo = {t: np.inf for t in want}; hi = {t: -np.inf for t in want}
    clipped = collections.Counter(); total = collections.Counter()
    for x in eval_inputs(a.size):
        vals = dict(zip(want, s.run(want, {'input': x})))
        for t in want:
            v = vals[t]
            lo[t] = min(lo[t], float(v.min())); hi[t] = max(hi[t], float(v.max()))
            if t in qt:
                r0, r1 = qt[t][:2]
                clipped[t] += int(((v < r0 - qt[t][2] / 2) | (v > r1 + qt[t][2] / 2)).sum()); total[t] += v.size
    reach = feeds_output(mi)
    bad = []
    rows = sorted(names, key=lambda t: -clipped[t] / max(total[t], 1))
    print('| tensor | made by | representable | FP32 seen | clipped | feeds an output |' if a.md else
          '%-58s %-11s %-19s %-19s %-9s %s' % ('tensor', 'made by', 'representable', 'FP32 seen', 'clipped', 'to output'))
    if a.md:
        print('|---|---|---|---|---|---|')
    for t in rows:
        r0, r1, sc, kind, qname = qt[t]
        share = clipped[t] / max(total[t], 1)
        out = reach(qname)
        if out and share > 0:
            bad.append('%s clips %.4f%% of its FP32 values and feeds an output' % (t, 100 * share))
        cells = (t[-56:], kind, '[%.2f, %.2f]' % (r0, r1), '[%.2f, %.2f]' % (lo[t], hi[t]), '%.4f%%' % (100 * share), 'yes' if out else '')
        print(('| %s | %s | %s | %s | %s | %s |' if a.md else '%-58s %-11s %-19s %-19s %-9s %s') % cells)
    print()
    ceil = output_ceilings(mi)
    for o in OUTS:
        c = ceil[o]
        print('output %-7s ceiling %-8s FP32 max seen %.4f' % (o, '%.4f' % c if np.isfinite(c) else 'none', hi[o]))
        if o.startswith('cls') and c < 0.99:
            bad.append('%s cannot carry a score above %.3f' % (o, c))
    if bad:
        print('AUDIT FAILED:\n  ' + '\n  '.join(bad))
        sys.exit(1)
    print('AUDIT OK')


if __name__ == '__main__':
    main()
