#!/bin/sh
# Peer comparison tract (lookout) vs onnxruntime, same network, photos and threads.
# Makes (once) a virtualenv with pinned onnxruntime/numpy/pillow, then runs peer_compare.py.
#
#   scripts/peer_compare.sh [--threads 1,2] [--runs 10] [--lookout PATH] [--ort-int8 FILE] [--json OUT]
#
# Environment: PEER_VENV (default ~/.cache/lookout/peer-venv), PYTHON (default python3).
# On a Raspberry Pi over SSH (64-bit OS; onnxruntime ships aarch64 wheels):
#   ssh pi@raspberrypi 'cd lookout && cargo build --release && scripts/peer_compare.sh --threads 1,2,4'
# or copy a cross-built binary (cross build --release --target aarch64-unknown-linux-gnu) and run
#   scripts/peer_compare.sh --lookout ./lookout --threads 1,2,4 --ort-int8 nanodet_int8_qdq_pc_u8.onnx
# (copy the u8 form from the recipe's work dir, or regenerate it: models/recipe/make_models.sh WORKDIR).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${PEER_VENV:-$HOME/.cache/lookout/peer-venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
    echo "peer_compare: creating $VENV (onnxruntime 1.31.1, numpy, pillow)" >&2
    "$PY" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "onnxruntime==1.31.1" "numpy==2.4.6" "pillow==13.0.0"
fi
exec "$VENV/bin/python" "$HERE/peer_compare.py" "$@"
