"""Detection agreement of model forms, on tract's raw outputs (dumped by the team's
tractcheck harness) and on onnxruntime's, against onnxruntime FP32. Research tool, not needed
to regenerate the shipped files.

  eval_forms.py inputs IODIR [W H]           write inputs lb_<img>.f32 / st_<img>.f32 (10 photos)
  eval_forms.py check FP32.onnx IODIR TAG... compare tract dumps IODIR/tract_<TAG>_{lb,st}_<img>.f32
                                             (ORT=1 also runs onnxruntime on IODIR/../TAG.onnx)
Both preprocessings are checked: lb_ (letterbox, what lookout does by default) and st_ (stretch).
Criteria ("detections kept"): person in astronaut (lb and st), cat in chelsea (lb), cup in coffee
(st) at score > 0.35 -- the detections FP32 itself makes: with letterbox FP32 sees coffee as
"dining table 0.51" (cup 0.27) and with stretch chelsea as "person 0.59" (cat 0.40) -- and the top
detection of each of the three photos, both preprocessings, has the same class as onnxruntime
FP32's with IoU >= 0.9. Also counts FP32 detections found again (same class, IoU >= 0.5) and
extra ones over the 10 photos x 2 preprocessings.
"""
import sys, os, numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanodet_common import preprocess, load_rgb, letterbox_rgb, to_input, decode, split_flat, iou, fmt, OUTS, COCO80
import skimage

D = os.path.join(os.path.dirname(skimage.__file__), 'data')
IMGS = ['astronaut.png', 'chelsea.png', 'coffee.png', 'rocket.jpg', 'motorcycle_left.png',
        'motorcycle_right.png', 'hubble_deep_field.jpg', 'color.png', 'logo.png', 'ihc.png']
MUST = {'lb_astronaut': 'person', 'lb_chelsea': 'cat', 'st_astronaut': 'person', 'st_coffee': 'cup'}
KEY = ['lb_astronaut', 'lb_chelsea', 'lb_coffee', 'st_astronaut', 'st_chelsea', 'st_coffee']
stem = lambda n: n.rsplit('.', 1)[0]


def agree(ref, dets):
    used, hit = set(), 0
    for r in ref:
        for j, d in enumerate(dets):
            if j not in used and d[5] == r[5] and iou(r, d) >= 0.5:
                used.add(j); hit += 1; break
    return hit, len(ref), len(dets) - len(used)


def judge(ref_d, dets):
    """-> (ok, found, total, extra, notes) over the images in ref_d."""
    F = N = E = 0; ok = True; notes = []
    for img, r in ref_d.items():
        d = dets[img]
        h, n, e = agree(r, d); F += h; N += n; E += e
        if img in MUST:
            must = COCO80.index(MUST[img])
            if not any(x[5] == must for x in d):
                ok = False; notes.append('%s: no %s' % (img, MUST[img]))
        if img in KEY and r:  # FP32 finding nothing has no top detection to compare
            if not d or d[0][5] != r[0][5] or iou(d[0], r[0]) < 0.9:
                ok = False; notes.append('%s: top %s vs %s' % (img, fmt(d[:1]), fmt(r[:1])))
    return ok, F, N, E, notes


def main():
    cmd = sys.argv[1]
    if cmd == 'inputs':
        io = sys.argv[2]; W, H = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (416, 416)
        os.makedirs(io, exist_ok=True)
        for n in IMGS:
            rgb = load_rgb(os.path.join(D, n))
            im, s, px, py = letterbox_rgb(rgb, W, H)
            to_input(im).tofile(os.path.join(io, 'lb_%s.f32' % stem(n)))
            preprocess(rgb, W, H).tofile(os.path.join(io, 'st_%s.f32' % stem(n)))
        return
    import onnxruntime as ort
    fp32, io, tags = sys.argv[2], sys.argv[3], sys.argv[4:]
    W = int(os.environ.get('W', 416)); H = int(os.environ.get('H', 416))
    so = ort.SessionOptions(); so.intra_op_num_threads = 2
    xs = {'%s_%s' % (pp, stem(n)): np.fromfile(os.path.join(io, '%s_%s.f32' % (pp, stem(n))), np.float32).reshape(1, 3, H, W)
          for pp in ('lb', 'st') for n in IMGS}
    s = ort.InferenceSession(fp32, so, providers=['CPUExecutionProvider'])
    ref = {k: decode(dict(zip(OUTS, s.run(OUTS, {'input': x}))), W, H) for k, x in xs.items()}
    for tag in tags:
        p = lambda k: os.path.join(io, 'tract_%s_%s.f32' % (tag, k))
        if all(os.path.exists(p(k)) for k in xs):
            dets = {k: decode(split_flat(np.fromfile(p(k), np.float32), W, H), W, H) for k in xs}
            ok, F, N, E, notes = judge(ref, dets)
            print('RESULT tract %-40s kept=%s found %d/%d extra %d %s' % (tag, 'yes' if ok else 'NO', F, N, E, '; '.join(notes)))
            for k in KEY:
                print('    %-13s %s' % (k, fmt(dets[k], 3)))
        if os.environ.get('ORT'):
            mp = os.path.join(os.path.dirname(os.path.abspath(io)), tag + '.onnx')
            if not os.path.exists(mp):
                mp = os.path.join(os.environ['ORT'], tag + '.onnx')
            s = ort.InferenceSession(mp, so, providers=['CPUExecutionProvider'])
            dets = {k: decode(dict(zip(OUTS, s.run(OUTS, {'input': x}))), W, H) for k, x in xs.items()}
            ok, F, N, E, notes = judge(ref, dets)
            print('RESULT ort   %-40s kept=%s found %d/%d extra %d %s' % (tag, 'yes' if ok else 'NO', F, N, E, '; '.join(notes)))
    print('FP32 reference (onnxruntime):')
    for k in KEY:
        print('    %-13s %s' % (k, fmt(ref[k], 3)))


if __name__ == '__main__':
    main()
