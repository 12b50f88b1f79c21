"""Guest-side runner (aarch64 CPython under qemu): ncnn, 1 thread, K inferences.
Usage: ncnnrun.py MODEL.param MODEL.bin INPUT.npy K [default|fp32]
default: ncnn's default Option (Winograd on; fp16 storage/arithmetic where the CPU has asimdhp,
e.g. a Pi 5). fp32: fp16 packed/storage/arithmetic and bf16 storage off (true FP32 numerics).
Blobs as pnnx names them: in0 -> out0..out5 (= cls_8, reg_8, cls_16, reg_16, cls_32, reg_32)."""
import sys

import numpy as np
import ncnn

param, binf, inp_path, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
mode = sys.argv[5] if len(sys.argv) > 5 else 'default'
net = ncnn.Net()
net.opt.num_threads = 1
net.opt.use_winograd_convolution = True
if mode == 'fp32':
    net.opt.use_fp16_packed = False
    net.opt.use_fp16_storage = False
    net.opt.use_fp16_arithmetic = False
    net.opt.use_bf16_storage = False
elif mode != 'default':
    sys.exit('mode must be default or fp32')
net.load_param(param)
net.load_model(binf)
x = np.ascontiguousarray(np.load(inp_path)[0])
blobs = ['out0', 'out1', 'out2', 'out3', 'out4', 'out5']
for _ in range(k):
    ex = net.create_extractor()
    ex.input('in0', ncnn.Mat(x).clone())
    out = []
    for n in blobs:
        ret, m = ex.extract(n)
        if ret != 0:
            sys.exit('extract %s failed: %d' % (n, ret))
        out.append(np.array(m))
labels = ['cls_8', 'reg_8', 'cls_16', 'reg_16', 'cls_32', 'reg_32']
print(' '.join('%s=%.4f' % (n, float(o.astype(np.float64).sum())) for n, o in zip(labels, out)))
print('max cls_8 %.5f' % float(out[0].max()))
print('ncnn', ncnn.__version__, 'numpy', np.__version__, 'mode', mode, 'K', k)
