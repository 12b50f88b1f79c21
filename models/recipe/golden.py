"""Golden data for lookout's tests and runtime self-check.
Usage: golden.py MODELS_DIR PHOTOS_DIR GOLDEN_DIR
For each photo (PHOTOS_DIR/<img>.jpg, decoded by Pillow) and input size S in (416, 320):
  GOLDEN_DIR/<img>-SxS.png      the stretch-resized RGB u8 image at model size (Pillow bilinear);
                                the model input is exactly (f32(px_bgr) - mean) / std, NCHW
  GOLDEN_DIR/ort-fp32-416-<img>.f32  onnxruntime raw outputs of nanodet-g-416-fp32.onnx on the
                                416 PNG: little-endian f32, cls_8, reg_8, cls_16, reg_16, cls_32, reg_32
  GOLDEN_DIR/detections.json    {model file: {img: [{class_id, label, score, box:[x0,y0,x1,y1]}]}}:
                                onnxruntime detections of every shipped model (GFL decode, class-wise
                                NMS IoU 0.6, score > 0.35, boxes in model-input pixels)."""
import os, sys, json, numpy as np
import onnxruntime as ort
from PIL import Image
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanodet_common import load_rgb, resize_rgb, to_input, decode, OUTS, COCO80

models, photos, golden = sys.argv[1:4]
os.makedirs(golden, exist_ok=True)
IMGS = ['astronaut', 'chelsea', 'coffee']
MODELS = {'nanodet-g-416-fp32.onnx': 416, 'nanodet-g-416-int8.onnx': 416, 'nanodet-g-320-int8.onnx': 320}
so = ort.SessionOptions(); so.intra_op_num_threads = 2
inputs = {}
for img in IMGS:
    rgb = load_rgb(os.path.join(photos, img + '.jpg'))
    for S in (416, 320):
        p = os.path.join(golden, '%s-%dx%d.png' % (img, S, S))
        Image.fromarray(resize_rgb(rgb, S, S)).save(p, optimize=True)
        back = np.asarray(Image.open(p).convert('RGB'))   # the input is defined by the PNG
        inputs[img, S] = to_input(back)
det = {}
for mf, S in MODELS.items():
    sess = ort.InferenceSession(os.path.join(models, mf), so, providers=['CPUExecutionProvider'])
    det[mf] = {}
    for img in IMGS:
        o = dict(zip(OUTS, sess.run(OUTS, {'input': inputs[img, S]})))
        if mf == 'nanodet-g-416-fp32.onnx':
            np.concatenate([o[k].ravel() for k in OUTS]).astype('<f4').tofile(os.path.join(golden, 'ort-fp32-416-%s.f32' % img))
        det[mf][img] = [{'class_id': int(d[5]), 'label': COCO80[int(d[5])], 'score': round(float(d[4]), 6),
                         'box': [round(float(v), 3) for v in d[:4]]} for d in decode(o, S, S)]
        print('%-26s %-10s %s' % (mf, img, ', '.join('%s %.2f' % (d['label'], d['score']) for d in det[mf][img][:4])))
with open(os.path.join(golden, 'detections.json'), 'w') as f:
    json.dump(det, f, indent=1)
    f.write('\n')
