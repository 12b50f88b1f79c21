"""Host-side: the model input for the peers, made exactly as scripts/peer_compare.py makes it
(its to_input: golden PNG at model size -> f32 NCHW BGR (px - mean) / std).
Usage: mkinput.py GOLDEN.png OUT.npy   (run with a Python that has numpy, pillow, onnxruntime:
peer_compare.py imports onnxruntime at the top)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from peer_compare import to_input  # noqa: E402

x = to_input(sys.argv[1])
np.save(sys.argv[2], x)
print('%s: shape %s dtype %s sum %.4f' % (sys.argv[2], x.shape, x.dtype, float(x.astype(np.float64).sum())))
