#!/usr/bin/env bash
# test.sh — the test suite on this machine (no camera, network or Pi needed).
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=1 bash scripts/setup.sh
# On a CPU with AMX, the tests run without tract's AMX int8 kernels. Several tests run tract's
# own int8 path as the reference lookout's ops are compared with, and tract's packing leaves
# nothing after a packed matrix, while its AMX kernel reads up to 960 bytes past one
# (src/detect/int8/fast_pack.rs, PANEL_SLACK): those reference runs then fault now and then
# (SIGSEGV). lookout's own packing keeps that slack, so the daemon itself uses AMX.
if grep -qw amx_int8 /proc/cpuinfo 2>/dev/null; then
  export TRACT_CPU_ISA=${TRACT_CPU_ISA:--amx-int8}
fi
exec cargo test --all-targets --no-fail-fast "$@"
