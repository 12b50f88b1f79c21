"""INT8 graph forms of NanoDet-g for tract, all made from the cleaned fp32 ONNX.
Usage: int8_forms.py nanodet_fp32.onnx OUTDIR VARIANT [VARIANT ...]   (env CALIB_SIZE, default 416)
Writes OUTDIR/nanodet_int8_<VARIANT>.onnx. Every variant is a base static quantization
(onnxruntime.quantization, 57 calibration samples from scikit-image's photos) followed by
graph rewrites, named by suffixes (see VARIANTS at the bottom; models/README.md has the timings).
Adapted from the team's int8/make_variants.py.

Variants (onnxruntime.quantization static, MinMax, same 57 calibration samples as the recipe):
  qop_pt_s8sym   QOperator, Conv only, per-tensor s8 weights, s8 symmetric activations (zp 0)
  qop_pc_s8sym   QOperator, Conv only, per-channel s8 weights, s8 symmetric activations
  qop_pt_u8      QOperator, Conv only, per-tensor weights, u8 asymmetric activations
  qdq_pt_u8      QDQ, per-tensor weights, u8 activations
  qdq_pt_s8sym   QDQ, per-tensor weights, s8 symmetric activations
  hyb_pt_s8sym   QDQ per-tensor s8sym, then every DQ->Conv->Q rewritten as QLinearConv;
                 LeakyRelu/Concat/MaxPool/Resize/Add stay as DQ->op->Q (tract turns
                 DQ->elementwise->Q into a 256-entry lookup table)
  hyb_pc_s8sym   same, per-channel weights
  hyb_pt_u8      same as hyb_pt_s8sym with u8 asymmetric activations
  hyb_pt_s8sym_p2  hyb_pt_s8sym with every activation scale rounded up to a power of two
  hyb_pt_s8sym_f1  hyb_pt_s8sym with the stem conv (3->32, stride 2) left in float
  hyb_pt_s8sym_cat_i2c   hyb_pt_s8sym_cat with stride-1 3x3 convs as int8 Pad -> 9 Slices -> Concat
                 -> 1x1 QLinearConv (im2col done by graph ops instead of tract's eager Im2col)
  hyb_pt_s8sym_cat_i2cs  same, stride-2 convs too (strided Slices); the 3-channel stem stays
  hyb_pt_s8sym_cat_i2cs_stem  same, stem conv rewritten too
  hyb_pt_s8sym_cat_i2c_fq  hyb_pt_s8sym_cat_i2c without the Q->DQ round trips between float ops
                 (Resize->Add, Add->Resize, Split->Sigmoid/Reshape)
  *_cat          hybrid + Concat and MaxPool moved to int8 (shared scale for their inputs/output,
                 biases re-quantized), removing the DQ->Concat->Q float round trips
"""
import sys, os, collections, numpy as np, onnx
from onnx import helper, numpy_helper
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanodet_common import load_rgb, preprocess, letterbox_rgb, to_input, clip_rgb
from set_input_size import declare
from onnxruntime.quantization import (quantize_static, QuantFormat, QuantType, CalibrationDataReader,
                                      CalibrationMethod)
from onnxruntime.quantization.shape_inference import quant_pre_process
import skimage

D = os.path.join(os.path.dirname(skimage.__file__), 'data')
CALIB = ['astronaut.png', 'chelsea.png', 'coffee.png', 'rocket.jpg', 'motorcycle_left.png',
         'motorcycle_right.png', 'hubble_deep_field.jpg', 'retina.jpg', 'brick.png', 'grass.png',
         'gravel.png', 'color.png', 'logo.png', 'ihc.png', 'camera.png', 'page.png', 'moon.png', 'text.png', 'coins.png']
_CACHE = []


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIP = os.path.join(REPO, 'tests', 'data', 'demo', 'vtest-640x480-10fps.mjpeg')


def calib_shapes():
    """The input sizes the clip's frames are calibrated at: env CALIB_SHAPES (`WxH,...`);
    default, for the 416 file, the sizes lookout runs it at — its own 416x416 (`input_size =
    []`), 416x320 and 416x256 (`"auto"` for a 4:3 and a 16:9 camera) and 512x384 (the larger
    size models/README.md suggests for distant people) — and SxS otherwise."""
    S = int(os.environ.get('CALIB_SIZE', 416))
    default = '416x416,416x320,416x256,512x384' if S == 416 else '%dx%d' % (S, S)
    return [tuple(int(v) for v in s.split('x')) for s in os.environ.get('CALIB_SHAPES', default).split(',')]


def samples():
    """Calibration inputs (env CALIB_SIZE, default 416).
    CALIB_SET=camera (default): what lookout feeds the model on a camera — the bundled clip's
    frames 2, 7, 12, ... (40 frames; the accuracy gate evaluates frames 0, 5, 10, ..., so no
    calibration frame is an evaluation frame) letterboxed at each of calib_shapes() (for the
    416 file 160 inputs: calibrating at the camera's shapes, not only the square, keeps objects
    at the frame's edge as FP32 scores them when no padding band is above them), and the 19
    scikit-image photos as is and mirrored, letterboxed at SxS (198 inputs in all).
    CALIB_SET=photos: the first recipe's set — the photos as is, mirrored and centre-cropped,
    **stretch**-resized (57 inputs); kept to reproduce the old forms."""
    if not _CACHE:
        S = int(os.environ.get('CALIB_SIZE', 416))
        kind = os.environ.get('CALIB_SET', 'camera')
        if kind == 'camera':
            for rgb in clip_rgb(CLIP, every=5, offset=2):
                for w, h in calib_shapes():
                    _CACHE.append(to_input(letterbox_rgb(rgb, w, h)[0]))
        for n in CALIB:
            p = os.path.join(D, n)
            if not os.path.exists(p):
                continue
            rgb = load_rgb(p); h, w = rgb.shape[:2]
            flip = np.ascontiguousarray(rgb[:, ::-1])
            if kind == 'camera':
                _CACHE.extend([to_input(letterbox_rgb(rgb, S, S)[0]), to_input(letterbox_rgb(flip, S, S)[0])])
            else:
                _CACHE.extend([preprocess(rgb, S, S), preprocess(flip, S, S),
                               preprocess(np.ascontiguousarray(rgb[h // 8:h - h // 8, w // 6:w - w // 6]), S, S)])
    return _CACHE


class Reader(CalibrationDataReader):
    def __init__(self):
        self.it = iter([{'input': x} for x in samples()])

    def get_next(self):
        return next(self.it, None)




CALIB_METHODS = {'minmax': (CalibrationMethod.MinMax, {}),
                 'pct': (CalibrationMethod.Percentile, {'CalibPercentile': 99.999}),
                 'entropy': (CalibrationMethod.Entropy, {}),
                 # the same, but the head convs' outputs (the logits the decoder reads) get their
                 # full calibrated range (MinMax): a percentile or entropy range clips the largest
                 # box-regression logits
                 'pcth': (CalibrationMethod.Percentile, {'CalibPercentile': 99.999}),
                 'p4h': (CalibrationMethod.Percentile, {'CalibPercentile': 99.99}),
                 'p6h': (CalibrationMethod.Percentile, {'CalibPercentile': 99.9999}),
                 'entropyh': (CalibrationMethod.Entropy, {})}


def head_tensors(path):
    """The tensors the decoder reads before any reshaping: walking back from each graph output
    through Transpose/Reshape/Sigmoid/Split to the first op that computes (the head Convs)."""
    g = onnx.load(path).graph
    prod = {o: n for n in g.node for o in n.output}
    heads = set()
    for o in g.output:
        t = o.name
        while t in prod and prod[t].op_type in ('Transpose', 'Reshape', 'Sigmoid', 'Split', 'Flatten'):
            t = prod[t].input[0]
        heads.add(t)
    return sorted(heads)


def head_overrides(pre):
    """TensorQuantOverrides giving the head tensors their MinMax range over the calibration set."""
    import onnxruntime as ort
    heads = head_tensors(pre)
    m = onnx.load(pre)
    for t in heads:
        if t not in {o.name for o in m.graph.output}:
            m.graph.output.append(helper.make_empty_tensor_value_info(t))
    s = ort.InferenceSession(m.SerializeToString(), providers=['CPUExecutionProvider'])
    lo = {t: np.inf for t in heads}; hi = {t: -np.inf for t in heads}
    for x in samples():
        for t, v in zip(heads, s.run(heads, {'input': x})):
            lo[t] = min(lo[t], float(v.min())); hi[t] = max(hi[t], float(v.max()))
    print('  head ranges (MinMax):', ', '.join('%s [%.2f, %.2f]' % (t, lo[t], hi[t]) for t in heads), flush=True)
    return {t: [{'rmin': np.float32(lo[t]), 'rmax': np.float32(hi[t])}] for t in heads}


def quant(pre, out, fmt, per_channel, act, sym, ops=None, exclude=None, calib='minmax'):
    method, extra = CALIB_METHODS[calib]
    extra = dict(extra)
    if sym:
        extra['ActivationSymmetric'] = True
    if calib.endswith('h'):  # pcth, p4h, p6h, entropyh
        extra['TensorQuantOverrides'] = head_overrides(pre)
    kw = dict(quant_format=fmt, per_channel=per_channel, activation_type=act, weight_type=QuantType.QInt8,
              calibrate_method=method, extra_options=extra)
    if ops:
        kw['op_types_to_quantize'] = ops
    if exclude:
        kw['nodes_to_exclude'] = exclude
    if method == CalibrationMethod.Entropy:
        _entropy_bins()
    quantize_static(pre, out, Reader(), **kw)


def _entropy_bins():
    """onnxruntime's Entropy calibrator defaults to 128 histogram bins and 128 quantized bins,
    so its KL search has one candidate — the full range, i.e. MinMax (the files came out
    byte-identical). quantize_static does not pass bin counts through, so wrap the factory it
    calls: 2048 bins over the range, thresholds searched in steps of one bin down to 256
    quantized bins (the int8 levels)."""
    qz = sys.modules['onnxruntime.quantization.quantize']
    if getattr(qz.create_calibrator, '_lookout', False):
        return
    orig = qz.create_calibrator

    def create(*a, **k):
        k['extra_options'] = {**(k.get('extra_options') or {}), 'num_bins': 2048, 'num_quantized_bins': 256}
        return orig(*a, **k)
    create._lookout = True
    qz.create_calibrator = create


def qdq_conv_to_qlinearconv(path_in, path_out, pow2=False):
    """Rewrite DQ(x)->Conv(DQ(w), DQ(b))->Q into QLinearConv; keep all other Q/DQ."""
    m = onnx.load(path_in)
    g = m.graph
    prod = {o: n for n in g.node for o in n.output}
    cons = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            cons[i].append(n)
    inits = {i.name: i for i in g.initializer}
    if pow2:  # round every activation scale (scalar initializer used by Q/DQ on a non-constant) up to 2^k
        for n in g.node:
            if n.op_type in ('QuantizeLinear', 'DequantizeLinear') and n.input[0] not in inits:
                s = inits[n.input[1]]
                a = numpy_helper.to_array(s)
                if a.size == 1:
                    a2 = (2.0 ** np.ceil(np.log2(a))).astype(a.dtype)
                    s.CopyFrom(numpy_helper.from_array(a2, s.name))
        # bias scale must stay x_scale * w_scale: recompute the int32 bias from the float bias
        for n in g.node:
            if n.op_type != 'Conv' or len(n.input) < 3:
                continue
            dqx, dqw, dqb = prod.get(n.input[0]), prod.get(n.input[1]), prod.get(n.input[2])
            xs = numpy_helper.to_array(inits[dqx.input[1]])
            ws = numpy_helper.to_array(inits[dqw.input[1]])
            bq = inits[dqb.input[0]]; bs = inits[dqb.input[1]]
            bf = numpy_helper.to_array(bq).astype(np.float64) * numpy_helper.to_array(bs)
            nbs = (xs * ws).astype(np.float32)
            nbq = np.round(bf / nbs).astype(np.int32)
            bq.CopyFrom(numpy_helper.from_array(nbq, bq.name)); bs.CopyFrom(numpy_helper.from_array(nbs, bs.name))
    new_nodes, drop = [], set()
    converted = 0
    for n in g.node:
        if n.op_type != 'Conv':
            continue
        dqx = prod.get(n.input[0]); dqw = prod.get(n.input[1])
        dqb = prod.get(n.input[2]) if len(n.input) > 2 else None
        outs = cons[n.output[0]]
        if not (dqx and dqx.op_type == 'DequantizeLinear' and dqw and dqw.op_type == 'DequantizeLinear'
                and len(outs) == 1 and outs[0].op_type == 'QuantizeLinear' and n.output[0] not in [o.name for o in g.output]):
            continue
        q = outs[0]
        inputs = [dqx.input[0], dqx.input[1], dqx.input[2], dqw.input[0], dqw.input[1], dqw.input[2], q.input[1], q.input[2]]
        if dqb is not None:
            inputs.append(dqb.input[0])
        qc = helper.make_node('QLinearConv', inputs, [q.output[0]], name=n.name + '_qlinear')
        qc.attribute.extend(n.attribute)
        new_nodes.append((n, qc))
        drop.update([id(n), id(q)])
        converted += 1
    repl = {id(n): qc for n, qc in new_nodes}
    nodes = []
    for n in g.node:
        if id(n) in repl:
            nodes.append(repl[id(n)])
        elif id(n) not in drop:
            nodes.append(n)
    # drop now-unused DequantizeLinear nodes (weights / biases / inputs consumed only by the old Conv)
    while True:
        used = {i for n in nodes for i in n.input} | {o.name for o in g.output}
        keep = [n for n in nodes if not (n.op_type == 'DequantizeLinear' and n.output[0] not in used)]
        if len(keep) == len(nodes):
            break
        nodes = keep
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in nodes for i in n.input}
    keep_inits = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(keep_inits)
    onnx.checker.check_model(m)
    onnx.save(m, path_out)
    return converted


def int8_concat(path_in, path_out, ops=('Concat', 'MaxPool')):
    """For symmetric s8 graphs: make DQ(a),DQ(b)->Concat->Q (and DQ->MaxPool->Q) run on int8 by
    giving all those tensors one shared scale (the largest of the group), so the op no longer needs
    a float round trip. Biases of QLinearConvs whose input scale changed are re-quantized."""
    m = onnx.load(path_in)
    g = m.graph
    prod = {o: n for n in g.node for o in n.output}
    cons = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            cons[i].append(n)
    inits = {i.name: i for i in g.initializer}
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]; x = parent[x]
        return x

    def union(a, b):
        parent[find(a)] = find(b)
    outs_names = {o.name for o in g.output}
    cands = []
    for n in g.node:
        if n.op_type not in ops:
            continue
        ins = [n.input[0]] if n.op_type == 'MaxPool' else list(n.input)
        dqs = [prod.get(i) for i in ins]
        if not all(d is not None and d.op_type == 'DequantizeLinear' for d in dqs):
            continue
        oc = cons[n.output[0]]
        if len(oc) != 1 or oc[0].op_type != 'QuantizeLinear' or n.output[0] in outs_names:
            continue
        q = oc[0]
        for d in dqs:
            union(d.input[0], q.output[0])
        cands.append((n, dqs, q))
    # every place a quantized tensor's scale is named
    refs = collections.defaultdict(list)
    for n in g.node:
        if n.op_type == 'QuantizeLinear':
            refs[n.output[0]].append((n, 1, 2))
        elif n.op_type == 'DequantizeLinear' and n.input[0] not in inits:
            refs[n.input[0]].append((n, 1, 2))
        elif n.op_type == 'QLinearConv':
            refs[n.input[0]].append((n, 1, 2)); refs[n.output[0]].append((n, 6, 7))
    groups = collections.defaultdict(set)
    for t in list(parent):
        groups[find(t)].add(t)
    old_xs = {id(n): float(numpy_helper.to_array(inits[n.input[1]])) for n in g.node if n.op_type == 'QLinearConv'}
    for k, (root, ts) in enumerate(groups.items()):
        sc = []
        for t in ts:
            for n, si, zi in refs[t]:
                sc.append(float(numpy_helper.to_array(inits[n.input[si]])))
                assert not numpy_helper.to_array(inits[n.input[zi]]).any(), 'needs symmetric activations'
        s = np.float32(max(sc))
        name = 'shared_scale_%d' % k
        g.initializer.append(numpy_helper.from_array(np.array(s, np.float32), name))
        for t in ts:
            for n, si, zi in refs[t]:
                n.input[si] = name
    inits = {i.name: i for i in g.initializer}
    for n in g.node:  # re-quantize biases of QLinearConvs whose input scale changed
        if n.op_type == 'QLinearConv' and len(n.input) > 8:
            xs_new = float(numpy_helper.to_array(inits[n.input[1]]))
            if xs_new == old_xs[id(n)]:
                continue
            ws = numpy_helper.to_array(inits[n.input[4]]).astype(np.float64)
            b = inits[n.input[8]]
            bf = numpy_helper.to_array(b).astype(np.float64) * old_xs[id(n)] * ws
            nb = numpy_helper.from_array(np.round(bf / (xs_new * ws)).astype(np.int32), b.name + '_rq')
            g.initializer.append(nb); n.input[8] = nb.name
    drop = set()
    for n, dqs, q in cands:
        k = 0
        for i in range(len(n.input)):
            if n.op_type == 'MaxPool' and i > 0:
                break
            n.input[i] = dqs[k].input[0]; k += 1
        n.output[0] = q.output[0]
        drop.add(id(q))
    nodes = [n for n in g.node if id(n) not in drop]
    while True:
        used = {i for n in nodes for i in n.input} | outs_names
        keep = [n for n in nodes if not (n.op_type == 'DequantizeLinear' and n.output[0] not in used)]
        if len(keep) == len(nodes):
            break
        nodes = keep
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in nodes for i in n.input}
    keep_inits = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(keep_inits)
    onnx.checker.check_model(m)
    onnx.save(m, path_out)
    return len(cands)


def im2col_in_graph(path_in, path_out, strided=False, skip_stem=True):
    """Experiment: express each stride-1 3x3 QLinearConv as int8 Pad -> 9 Slices -> Concat ->
    1x1 QLinearConv (weights re-laid out tap-major), so tract takes the einsum path (activation
    packing by OptMatMulPack) instead of its eager quantized Im2col."""
    m = onnx.load(path_in)
    m = onnx.shape_inference.infer_shapes(m)
    g = m.graph
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in list(g.value_info) + list(g.input)}
    inits = {i.name: i for i in g.initializer}
    out_nodes, k = [], 0
    c64 = lambda name, v: g.initializer.append(numpy_helper.from_array(np.array(v, np.int64), name))
    for n in g.node:
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        st = list(a.get('strides', [1, 1]))
        if (n.op_type != 'QLinearConv' or list(a.get('kernel_shape', [])) != [3, 3] or a.get('group', 1) != 1
                or st[0] != st[1] or (st[0] > 1 and not strided) or list(a.get('dilations', [1, 1])) != [1, 1]
                or n.input[0] not in shapes or n.output[0] not in shapes or (skip_stem and shapes[n.input[0]][1] < 8)):
            out_nodes.append(n); continue
        _, C, H, W = shapes[n.input[0]]
        _, _, Ho, Wo = shapes[n.output[0]]
        pads = list(a.get('pads', [0] * 4)); s_ = st[0]
        p = 'i2c%d_' % k; k += 1
        src = n.input[0]
        if any(pads):
            c64(p + 'pads', [0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]])
            out_nodes.append(helper.make_node('Pad', [n.input[0], p + 'pads', n.input[2]], [p + 'xp'], mode='constant'))
            src = p + 'xp'
        taps = []
        c64(p + 'axes', [2, 3]); c64(p + 'steps', [s_, s_])
        for t in range(9):
            ky, kx = divmod(t, 3)
            # ends as offsets from the padded size, so the graph is not pinned to one input size
            # (set_input_size.py can re-declare it); INT64_MAX = "to the end"
            ends = []
            for kk, L, O in ((ky, H + pads[0] + pads[2], Ho), (kx, W + pads[1] + pads[3], Wo)):
                e = kk + (O - 1) * s_ + 1
                ends.append(e - L if e < L else np.iinfo(np.int64).max)
            c64(p + 's%d' % t, [ky, kx]); c64(p + 'e%d' % t, ends)
            ins = [src, p + 's%d' % t, p + 'e%d' % t, p + 'axes'] + ([p + 'steps'] if s_ > 1 else [])
            out_nodes.append(helper.make_node('Slice', ins, [p + 't%d' % t]))
            taps.append(p + 't%d' % t)
        out_nodes.append(helper.make_node('Concat', taps, [p + 'cat'], axis=1))
        w = numpy_helper.to_array(inits[n.input[3]])
        w2 = np.ascontiguousarray(w.transpose(0, 2, 3, 1).reshape(w.shape[0], 9 * C, 1, 1))
        g.initializer.append(numpy_helper.from_array(w2, p + 'w'))
        ins = list(n.input); ins[0] = p + 'cat'; ins[3] = p + 'w'
        out_nodes.append(helper.make_node('QLinearConv', ins, list(n.output), name=n.name + '_1x1',
                                          kernel_shape=[1, 1], pads=[0, 0, 0, 0], strides=[1, 1]))
    del g.node[:]
    g.node.extend(out_nodes)
    del g.value_info[:]
    used = {i for n in out_nodes for i in n.input}
    keep = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    onnx.checker.check_model(m)
    onnx.save(m, path_out)
    return k


def float_outputs(path_in, path_out):
    """Every graph output computed in float: a QuantizeLinear -> DequantizeLinear pair right before
    an output (after the heads' last float op: the Sigmoid of cls_s, the Transpose of reg_s) is
    removed. After the Sigmoid such a pair caps the score at 127 x its scale (0.29..0.82 with the
    old calibration, issue #7). Run `fq` after it: it then also drops the exact Split -> Q -> DQ
    round trip before each Sigmoid, which thereby runs in float on the dequantized logits."""
    m = onnx.load(path_in)
    g = m.graph
    prod = {o: n for n in g.node for o in n.output}
    inits = {i.name for i in g.initializer}
    drop, k = set(), 0
    for o in g.output:
        d = prod.get(o.name)
        if d is None or d.op_type != 'DequantizeLinear':
            continue
        q = prod.get(d.input[0])
        if q is None or q.op_type != 'QuantizeLinear' or q.input[0] in inits:
            continue
        src = prod.get(q.input[0])
        if src is None:
            continue
        x = q.input[0]
        for n in g.node:  # the float tensor takes the output's name
            for i, v in enumerate(n.input):
                if v == x:
                    n.input[i] = o.name
        src.output[list(src.output).index(x)] = o.name
        drop.update([id(q), id(d)])
        k += 1
    nodes = [n for n in g.node if id(n) not in drop]
    del g.node[:]
    g.node.extend(nodes)
    drop_unused_initializers(g)
    onnx.checker.check_model(m)
    onnx.save(m, path_out)
    return k


def drop_unused_initializers(g):
    """Removes the initializers no node reads any more (after a rewrite dropped their users)."""
    used = {i for n in g.node for i in n.input}
    keep = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)


def drop_float_qdq(path_in, path_out):
    """Remove Q->DQ round trips between two float ops (e.g. Resize->Q->DQ->Add, Split->Q->DQ->Sigmoid):
    a QuantizeLinear whose input comes from a float op (not a DequantizeLinear) and whose every consumer
    is a DequantizeLinear feeding only float ops that are not the head of a DQ->op->Q lookup-table
    chain and not a QLinearConv. Keeps every int8 path; makes the float paths closer to FP32."""
    m = onnx.load(path_in)
    g = m.graph
    prod = {o: n for n in g.node for o in n.output}
    cons = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            cons[i].append(n)
    inits = {i.name: i for i in g.initializer}
    rename, drop = {}, set()
    for q in g.node:
        if q.op_type != 'QuantizeLinear' or q.input[0] in inits or q.input[0] == 'input':
            continue
        src = prod.get(q.input[0])
        if src is None or src.op_type in ('DequantizeLinear', 'QLinearConv'):
            continue
        dqs = cons[q.output[0]]
        if not dqs or any(d.op_type != 'DequantizeLinear' for d in dqs):
            continue
        ok = not any(d.output[0] in {o.name for o in g.output} for d in dqs)
        for d in dqs:
            for c in cons[d.output[0]]:
                # a DQ->elementwise->Q chain becomes a tract LookupTable: keep it
                if c.op_type in ('QLinearConv', 'QuantizeLinear'):
                    ok = False
                if c.op_type in ('LeakyRelu', 'Sigmoid', 'Relu') and all(x.op_type == 'QuantizeLinear' for x in cons[c.output[0]]):
                    ok = False
        if not ok:
            continue
        for d in dqs:
            rename[d.output[0]] = q.input[0]; drop.add(id(d))
        drop.add(id(q))
    nodes = [n for n in g.node if id(n) not in drop]
    for n in nodes:
        for i, x in enumerate(n.input):
            if x in rename:
                n.input[i] = rename[x]
    outs = {o.name for o in g.output}
    assert not (set(rename) & outs)
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in nodes for i in n.input}
    keep = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    onnx.checker.check_model(m)
    onnx.save(m, path_out)
    return len(rename)


def head_score_bias(path_in, path_out, fp32_path, min_score=0.3):
    """Empirical bias correction of the class logits, head by head: per-tensor int8 leaves the
    heads' class logits a little low on average (measured: 0.10 logit at stride 8, 0.2 at stride
    32, i.e. scores ~0.03 under FP32's). For each `cls_s` output, the median of (FP32 logit -
    INT8 logit) over the calibration inputs, where FP32's score is >= min_score (the scores that
    matter), is added to the int32 bias of the head conv's class channels (a whole number of
    bias steps, x_scale * w_scale). Three numbers; the box-regression channels are untouched."""
    import onnxruntime as ort
    m = onnx.load(path_in); g = m.graph
    prod = {o: n for n in g.node for o in n.output}
    inits = {i.name: i for i in g.initializer}
    heads = {}
    for o in OUT_NAMES[0::2]:  # cls_8, cls_16, cls_32
        t, idx = o, None
        while t in prod and prod[t].op_type != 'QLinearConv':
            n = prod[t]
            if n.op_type == 'Split':
                idx = list(n.output).index(t)
                sizes = numpy_helper.to_array(inits[n.input[1]]).tolist() if len(n.input) > 1 else None
            t = n.input[0]
        conv = prod.get(t)
        assert conv is not None and idx is not None and sizes, 'no head conv/Split found for ' + o
        heads[o] = (conv, sum(sizes[:idx]), sum(sizes[:idx + 1]))
    so = ort.SessionOptions(); so.intra_op_num_threads = 2
    sf = ort.InferenceSession(fp32_path, so, providers=['CPUExecutionProvider'])
    sq = ort.InferenceSession(path_in, so, providers=['CPUExecutionProvider'])
    names = list(heads)
    diffs = {o: [] for o in names}
    logit = lambda p: np.log(np.clip(p, 1e-6, 1 - 1e-6) / (1 - np.clip(p, 1e-6, 1 - 1e-6)))
    for x in samples():
        for o, a, b in zip(names, sf.run(names, {'input': x}), sq.run(names, {'input': x})):
            sel = a >= min_score
            diffs[o].append((logit(a[sel]) - logit(b[sel])).astype(np.float64))
    for o in names:
        conv, c0, c1 = heads[o]
        d = np.concatenate(diffs[o])
        shift = float(np.median(d)) if d.size >= 100 else 0.0  # too few to estimate: leave it
        xs = float(numpy_helper.to_array(inits[conv.input[1]]))
        ws = float(numpy_helper.to_array(inits[conv.input[4]]))
        b = numpy_helper.to_array(inits[conv.input[8]]).astype(np.int64).copy()
        steps = int(round(shift / (xs * ws)))
        b[c0:c1] += steps
        name = conv.input[8] + '_hs'
        g.initializer.append(numpy_helper.from_array(b.astype(np.int32), name)); conv.input[8] = name
        print('  %s: %d FP32 scores >= %.1f, median logit shift %+.3f -> %+d bias steps on channels %d..%d'
              % (o, d.size, min_score, shift, steps, c0, c1 - 1), flush=True)
    drop_unused_initializers(g)
    onnx.checker.check_model(m); onnx.save(m, path_out)
    return len(names)


OUT_NAMES = ('cls_8', 'reg_8', 'cls_16', 'reg_16', 'cls_32', 'reg_32')


def stem_conv_names(path):
    """tf2onnx names nodes non-deterministically: find the 3-channel stem Conv by structure."""
    m = onnx.load(path)
    return [n.name for n in m.graph.node if n.op_type == 'Conv' and n.input[0] == m.graph.input[0].name]


def _resize_scales(g, n):
    inits = {i.name: i for i in g.initializer}
    if n.op_type != 'Resize' or len(n.input) < 3 or n.input[2] not in inits:
        return None
    return [float(v) for v in numpy_helper.to_array(inits[n.input[2]])]


def resize_down_to_avgpool(path_in, path_out):
    """Resize x0.5, linear, half_pixel samples at (2i+0.5): exactly the mean of the 2x2 block,
    i.e. AveragePool 2x2 stride 2 (for even sizes, which the multiple-of-32 input guarantees).
    Exact rewrite; tract's pooling is cheaper than its generic Resize."""
    m = onnx.load(path_in); g = m.graph; k = 0
    for n in g.node:
        sc = _resize_scales(g, n)
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        if sc == [1.0, 1.0, 0.5, 0.5] and a.get('mode') == b'linear' and a.get('coordinate_transformation_mode') == b'half_pixel':
            x = n.input[0]
            del n.input[:]; n.input.append(x); del n.attribute[:]
            n.op_type = 'AveragePool'
            n.attribute.extend([helper.make_attribute('kernel_shape', [2, 2]), helper.make_attribute('strides', [2, 2])])
            k += 1
    used = {i for n in g.node for i in n.input}
    keep = [i for i in g.initializer if i.name in used]
    del g.initializer[:]; g.initializer.extend(keep)
    onnx.checker.check_model(m); onnx.save(m, path_out)
    return k


def upsample_nearest_int8(path_in, path_out):
    """APPROXIMATION: replace DQ -> Resize x2 (bilinear) by an int8 nearest-neighbour upsample
    (Reshape -> Expand -> Reshape on the quantized tensor) -> DQ. Data movement only, no float.
    Changes the model's maths (nearest instead of bilinear): ship only if detections hold."""
    m = onnx.load(path_in); g = m.graph
    prod = {o: n for n in g.node for o in n.output}
    c64 = lambda name, v: g.initializer.append(numpy_helper.from_array(np.array(v, np.int64), name))
    c64('nn_r6', [0, 0, 0, 1, -1, 1]); c64('nn_e6', [1, 1, 1, 2, 1, 2]); c64('nn_m4', [1, 1, 2, 2])
    out, k = [], 0
    for n in g.node:
        sc = _resize_scales(g, n)
        dq = prod.get(n.input[0])
        if sc != [1.0, 1.0, 2.0, 2.0]:
            out.append(n); continue
        p = 'nn%d_' % k; k += 1
        # on the int8 tensor when the input is dequantized, else (after a float Add) in float
        q = dq.input[0] if dq is not None and dq.op_type == 'DequantizeLinear' else n.input[0]
        last = [p + 'u'] if q != n.input[0] else [n.output[0]]
        out += [helper.make_node('Reshape', [q, 'nn_r6'], [p + 'r']),
                helper.make_node('Expand', [p + 'r', 'nn_e6'], [p + 'e']),
                helper.make_node('Shape', [q], [p + 's']),
                helper.make_node('Mul', [p + 's', 'nn_m4'], [p + 's2']),
                helper.make_node('Reshape', [p + 'e', p + 's2'], last)]
        if q != n.input[0]:
            out.append(helper.make_node('DequantizeLinear', [p + 'u', dq.input[1], dq.input[2]], [n.output[0]]))
    del g.node[:]; g.node.extend(out)
    # drop DQs left without consumers
    used = {i for n in g.node for i in n.input} | {o.name for o in g.output}
    keepn = [n for n in g.node if not (n.op_type == 'DequantizeLinear' and n.output[0] not in used)]
    del g.node[:]; g.node.extend(keepn)
    used = {i for n in g.node for i in n.input}
    keep = [i for i in g.initializer if i.name in used]
    del g.initializer[:]; g.initializer.extend(keep)
    onnx.checker.check_model(m); onnx.save(m, path_out)
    return k


# Variant = base quantization + rewrite steps. Base keys: <fmt>_<pt|pc>_<u8|s8sym>[_f1][_<calib>]
#   fmt qop (QOperator, Conv only) or qdq; pt per-tensor / pc per-channel weights; u8 asymmetric or
#   s8 symmetric activations; f1 = stem conv left in float; calib minmax (default) / pct / entropy.
# Steps: hyb (DQ->Conv->Q => QLinearConv), p2 (power-of-two scales, with hyb), cat (int8 Concat/MaxPool),
#   i2c / i2cs / i2cs_stem (im2col in the graph: stride-1 3x3 / + stride-2 / + stem), fq (drop float
#   Q->DQ round trips), pool (Resize x0.5 -> AveragePool, exact), nn (int8 nearest upsample, approx.)
def parse(name):
    """'hyb_pt_s8sym_cat_i2c_fq' -> (base key, steps)."""
    t = name.split('_')
    fmt = t[0]; assert fmt in ('qop', 'qdq', 'hyb'), name
    base = ['qdq' if fmt == 'hyb' else fmt, t[1], t[2]]
    rest = t[3:]
    steps = ['hyb'] if fmt == 'hyb' else []
    for x in rest:
        if x in ('f1',) + tuple(CALIB_METHODS):
            base.append(x)
        elif x == 'stem' and steps and steps[-1] == 'i2cs':
            steps[-1] = 'i2cs_stem'
        else:
            steps.append(x)
    return '_'.join(base), steps


def make_base(pre, out, key):
    t = key.split('_')
    fmt = {'qop': QuantFormat.QOperator, 'qdq': QuantFormat.QDQ}[t[0]]
    pc = {'pt': False, 'pc': True}[t[1]]
    act, sym = {'u8': (QuantType.QUInt8, False), 's8sym': (QuantType.QInt8, True), 's8': (QuantType.QInt8, False)}[t[2]]
    calib = next((x for x in t[3:] if x in CALIB_METHODS), 'minmax')
    exclude = stem_conv_names(pre) if 'f1' in t[3:] else None
    ops = ['Conv'] if fmt == QuantFormat.QOperator else None
    quant(pre, out, fmt, pc, act, sym, ops, exclude, calib)


def make(src, outdir, name):
    os.makedirs(outdir, exist_ok=True)
    o = lambda n: os.path.join(outdir, 'nanodet_int8_%s.onnx' % n)
    if os.path.exists(o(name)):
        return o(name)
    pre = os.path.join(outdir, 'nanodet_fp32_pre.onnx')
    if not os.path.exists(pre):
        quant_pre_process(src, pre, skip_symbolic_shape=True)
    base, steps = parse(name)
    if not os.path.exists(o(base)):
        make_base(pre, o(base), base)
        print(base, 'quantized', flush=True)
    cur = base
    for i, st in enumerate(steps):
        nxt = '_'.join([base] + steps[:i + 1])
        if st == 'hyb' and i + 1 < len(steps) and steps[i + 1] == 'p2':
            continue
        if os.path.exists(o(nxt)):
            cur = nxt; continue
        if st in ('hyb', 'p2'):
            r = qdq_conv_to_qlinearconv(o(cur), o(nxt), pow2=(st == 'p2'))
        elif st == 'cat':
            r = int8_concat(o(cur), o(nxt))
        elif st in ('i2c', 'i2cs', 'i2cs_stem'):
            r = im2col_in_graph(o(cur), o(nxt), strided=(st != 'i2c'), skip_stem=(st != 'i2cs_stem'))
        elif st == 'fo':
            r = float_outputs(o(cur), o(nxt))
        elif st == 'fq':  # to a fixed point: removing one pair can expose the next
            r = k = drop_float_qdq(o(cur), o(nxt))
            while k:
                k = drop_float_qdq(o(nxt), o(nxt)); r += k
        elif st == 'hs':
            r = head_score_bias(o(cur), o(nxt), src)
        elif st == 'pool':
            r = resize_down_to_avgpool(o(cur), o(nxt))
        elif st == 'nn':
            r = upsample_nearest_int8(o(cur), o(nxt))
        else:
            raise SystemExit('unknown step %r in %s' % (st, name))
        print('  %s: %s -> %s' % (st, nxt, r), flush=True)
        cur = nxt
    if o(cur) != o(name):
        import shutil
        shutil.copyfile(o(cur), o(name))
    return o(name)


def streamed_histograms():
    """onnxruntime's histogram calibration (Percentile, Entropy) keeps every calibration input's
    every tensor in memory and stacks them, which needs ~20 GB for the 416 file's 198 inputs and
    fails when the inputs differ in size. Build the same histograms one input at a time instead:
    a first pass finds each tensor's range over all inputs, a second adds up each input's
    histogram over that range — the bins and counts onnxruntime's one-shot `np.histogram` gives."""
    from onnxruntime.quantization import calibrate

    def collect_data(self, data_reader):
        feeds = []
        while (x := data_reader.get_next()):
            feeds.append(x)
        if not feeds:
            raise ValueError('No data is collected.')
        names = [n for n in (o.name for o in self.infer_session.get_outputs()) if n in self.tensors_to_calibrate]
        absolute = self.method == 'percentile' and self.symmetric  # onnxruntime's collect_absolute_value
        lo, hi, alo, ahi = {}, {}, {}, {}

        def widen(d, n, value, pick):
            d[n] = pick(d[n], value) if n in d else value
        for x in feeds:
            for n, v in zip(names, self.infer_session.run(names, x)):
                v = v.ravel()
                widen(lo, n, np.nanmin(v), min); widen(hi, n, np.nanmax(v), max)
                if absolute:
                    a = np.absolute(v)
                    widen(alo, n, a.min(), min); widen(ahi, n, a.max(), max)
        rng = {}
        for n in names:
            if absolute:
                rng[n] = (alo[n], ahi[n])
            else:
                t = np.array(max(abs(lo[n]), abs(hi[n])), dtype=lo[n].dtype)
                rng[n] = (-t, t)
        counts, edges = {}, {}
        for x in feeds:
            for n, v in zip(names, self.infer_session.run(names, x)):
                v = v.ravel()
                h, e = np.histogram(np.absolute(v) if absolute else v, self.num_bins, range=rng[n])
                counts[n] = counts[n] + h if n in counts else h
                edges[n] = e
        if not self.collector:
            self.collector = calibrate.HistogramCollector(
                method=self.method, symmetric=self.symmetric, num_bins=self.num_bins,
                num_quantized_bins=self.num_quantized_bins, percentile=self.percentile, scenario=self.scenario)
        for n in names:
            if absolute:
                self.collector.histogram_dict[n] = (counts[n], edges[n].astype(lo[n].dtype), lo[n], hi[n])
            else:
                self.collector.histogram_dict[n] = (counts[n], edges[n], lo[n], hi[n], rng[n][1])
        self.clear_collected_data()
    calibrate.HistogramCalibrater.collect_data = collect_data


def main():
    src, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    S = int(os.environ.get('CALIB_SIZE', 416))
    mixed = len(set(calib_shapes())) > 1
    streamed_histograms()
    if mixed:  # one graph run at several sizes: calibrate a copy with its size left free
        src = os.path.join(outdir, 'nanodet_fp32_free_size.onnx')
        declare(sys.argv[1], src, 0, 0)
    for name in sys.argv[3:]:
        p = make(src, outdir, name)
        if mixed:
            declare(p, p, S, S)
        mm = onnx.load(p)
        print(name, os.path.getsize(p), dict(collections.Counter(n.op_type for n in mm.graph.node)), flush=True)


if __name__ == '__main__':
    main()
