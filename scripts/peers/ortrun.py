"""Guest-side runner (aarch64 CPython under qemu): onnxruntime, 1 thread, K inferences.
Usage: ortrun.py MODEL.onnx INPUT.npy K
Options as in scripts/peer_compare.py: intra_op 1, inter_op 1, sequential, all graph
optimizations, CPUExecutionProvider. Prints the output sums (a numerics check, not timed)."""
import sys

import numpy as np
import onnxruntime as ort

model, inp_path, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
so = ort.SessionOptions()
so.intra_op_num_threads = 1
so.inter_op_num_threads = 1
so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
sess = ort.InferenceSession(model, so, providers=['CPUExecutionProvider'])
x = np.load(inp_path)
inp = sess.get_inputs()[0].name
names = [o.name for o in sess.get_outputs()]
for _ in range(k):
    out = sess.run(names, {inp: x})
print(' '.join('%s=%.4f' % (n, float(o.astype(np.float64).sum())) for n, o in zip(names, out)))
if 'cls_8' in names:
    print('max cls_8 %.5f' % float(out[names.index('cls_8')].max()))
print('onnxruntime', ort.__version__, 'numpy', np.__version__, 'K', k)
