"""Shared constants and reference pre/post-processing for the lookout model recipe.

The preprocessing contract (see models/README.md): f32 NCHW [1,3,H,W], channel order **BGR**,
value = (px - MEAN_BGR) / STD_BGR. Reference decode: GFL/DFL (reg_max 10), class-wise NMS.
"""
import numpy as np
from PIL import Image

COCO80 = ['person', 'bicycle', 'car', 'motorcycle', 'airplane', 'bus', 'train', 'truck', 'boat',
          'traffic light', 'fire hydrant', 'stop sign', 'parking meter', 'bench', 'bird', 'cat', 'dog',
          'horse', 'sheep', 'cow', 'elephant', 'bear', 'zebra', 'giraffe', 'backpack', 'umbrella',
          'handbag', 'tie', 'suitcase', 'frisbee', 'skis', 'snowboard', 'sports ball', 'kite',
          'baseball bat', 'baseball glove', 'skateboard', 'surfboard', 'tennis racket', 'bottle',
          'wine glass', 'cup', 'fork', 'knife', 'spoon', 'bowl', 'banana', 'apple', 'sandwich', 'orange',
          'broccoli', 'carrot', 'hot dog', 'pizza', 'donut', 'cake', 'chair', 'couch', 'potted plant',
          'bed', 'dining table', 'toilet', 'tv', 'laptop', 'mouse', 'remote', 'keyboard', 'cell phone',
          'microwave', 'oven', 'toaster', 'sink', 'refrigerator', 'book', 'clock', 'vase', 'scissors',
          'teddy bear', 'hair drier', 'toothbrush']
MEAN_BGR = np.array([103.53, 116.28, 123.675], np.float32)
STD_BGR = np.array([57.375, 57.12, 58.395], np.float32)
OUTS = ['cls_8', 'reg_8', 'cls_16', 'reg_16', 'cls_32', 'reg_32']
STRIDES = (8, 16, 32)
REG_MAX = 10
SCORE_THR = 0.35
IOU_THR = 0.6


def load_rgb(path):
    return np.asarray(Image.open(path).convert('RGB'))


def resize_rgb(rgb, w, h):
    """PIL bilinear resize of an RGB u8 image to w x h (what the golden PNGs hold)."""
    return np.asarray(Image.fromarray(rgb).resize((w, h), Image.BILINEAR))


def to_input(rgb_model_size):
    """RGB u8 HxWx3 at model size -> f32 NCHW BGR (px - mean) / std, computed in f32."""
    x = (rgb_model_size[:, :, ::-1].astype(np.float32) - MEAN_BGR) / STD_BGR
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None]).astype(np.float32)


def preprocess(rgb, w=416, h=416):
    """Stretch-resize (PIL bilinear) to w x h and normalize."""
    return to_input(resize_rgb(rgb, w, h))


def letterbox_rgb(rgb, w=416, h=416):
    """Keep the aspect ratio, centre, pad black: the same mapping as lookout's
    preprocess::Mapping (size rounded, offsets floored). Returns (image, scale, pad_x, pad_y)."""
    ih, iw = rgb.shape[:2]
    s = min(w / iw, h / ih)
    nw, nh = int(round(iw * s)), int(round(ih * s))
    px, py = (w - nw) // 2, (h - nh) // 2
    out = np.zeros((h, w, 3), np.uint8)
    out[py:py + nh, px:px + nw] = resize_rgb(rgb, nw, nh)
    return out, s, px, py


def split_flat(flat, w=416, h=416):
    """Split the concatenated raw output layout (cls_8, reg_8, cls_16, reg_16, cls_32, reg_32)."""
    out, p = {}, 0
    for o in OUTS:
        s = int(o.split('_')[1]); c = 80 if o.startswith('cls') else 44
        n = (w // s) * (h // s) * c
        out[o] = flat[p:p + n].reshape(1, (w // s) * (h // s), c); p += n
    assert p == flat.size, (p, flat.size)
    return out


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0])); iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    i = ix * iy; u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - i
    return i / u if u > 0 else 0.0


def decode(outs, w=416, h=416, score_thr=SCORE_THR, iou_thr=IOU_THR):
    """GFL/DFL decode + class-wise NMS. Boxes in model-input pixels, clamped to the input.
    Returns a list of [x0, y0, x1, y1, score, class_id], best first."""
    dets = []
    for s in STRIDES:
        cls = outs['cls_%d' % s][0]; reg = outs['reg_%d' % s][0]
        n = w // s
        for idx in np.nonzero(cls.max(1) > score_thr)[0]:
            c = int(cls[idx].argmax()); sc = float(cls[idx, c])
            y, x = divmod(int(idx), n)
            cx, cy = (x + 0.5) * s, (y + 0.5) * s
            d = reg[idx].reshape(4, REG_MAX + 1).astype(np.float64)
            e = np.exp(d - d.max(1, keepdims=True)); p = e / e.sum(1, keepdims=True)
            dist = (p * np.arange(REG_MAX + 1)).sum(1) * s
            dets.append([max(cx - dist[0], 0.0), max(cy - dist[1], 0.0), min(cx + dist[2], float(w)),
                         min(cy + dist[3], float(h)), sc, c])
    dets.sort(key=lambda d: -d[4])
    keep = []
    for d in dets:
        if all(k[5] != d[5] or iou(k, d) <= iou_thr for k in keep):
            keep.append(d)
    return keep


def fmt(dets, k=6):
    return ', '.join('%s %.2f [%.0f %.0f %.0f %.0f]' % (COCO80[int(d[5])], d[4], d[0], d[1], d[2], d[3])
                     for d in dets[:k])


def clip_jpegs(path):
    """The frames of a concatenated-JPEG (MJPEG) file, as bytes, in order: split at each
    SOI marker (FF D8 FF) that follows an EOI (FF D9), like lookout's MJPEG replay."""
    data = open(path, 'rb').read()
    out, start = [], data.find(b'\xff\xd8\xff')
    while start >= 0:
        end = data.find(b'\xff\xd9\xff\xd8\xff', start + 3)
        stop = len(data) if end < 0 else end + 2
        out.append(data[start:stop])
        start = -1 if end < 0 else end + 2
    return out


def clip_rgb(path, every=1, offset=0):
    """Decoded RGB frames `offset, offset+every, ...` of an MJPEG file (Pillow)."""
    import io
    frames = clip_jpegs(path)
    return [np.asarray(Image.open(io.BytesIO(frames[i])).convert('RGB'))
            for i in range(offset, len(frames), every)]
