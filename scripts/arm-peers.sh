#!/usr/bin/env bash
# arm-peers.sh - the "peer table": guest instructions per image of onnxruntime (FP32 and INT8)
# and ncnn (FP32) running the same network as lookout (NanoDet-g 416), under the ARM instruction
# proxy (armcost: qemu-user + a counting TCG plugin) on the Pi 4 and Pi 5 CPU models, printed
# beside lookout's own rows. Instruction counts, not time. A measurement script, not a test.
#
# Usage: scripts/arm-peers.sh [options]      (as root: the setup uses dpkg/apt-get)
#   --boards LIST    comma-separated boards, pi4 and/or pi5 (default pi4,pi5)
#   --rows LIST      comma-separated rows (default all, in this order):
#                    lookout-int8, lookout-fp32, ort-fp32, ort-int8, ncnn, ncnn-fp32
#                    (ncnn-fp32 = fp16/bf16 off; run on pi5 only: on pi4, with no asimdhp,
#                    ncnn's default already is its FP32 path)
#   --out FILE       write the markdown table to FILE too (default $PEER_DIR/table.md)
#   --ort-int8 FILE  onnxruntime's INT8 model (per-channel u8-activation QDQ). Default: make it
#                    with models/recipe/int8_forms.py ... qdq_pc_u8 into $PEER_DIR/forms
#                    (x86 venv from models/recipe/requirements-ort.txt, a few CPU minutes)
#   --no-make-int8   do not make it: without --ort-int8 the ORT INT8 row is skipped
#   --setup-only     set up the work dir and exit
#   --fresh          forget earlier measurements (by default finished runs are reused, so an
#                    interrupted run resumes; a changed binary or model gets new run dirs)
#   --repeat         also repeat each 1-inference run and print the run-to-run delta
#   -h, --help       this text
#
# Method (see the armcost README): each peer runs K = 1 and K = 3 inferences in one process on
# the same tensor; per image = (n3 - n1) / 2, which cancels start-up, imports and model load.
# lookout runs `bench --inference-only R --threads 1 --precision P --json` with
# LOOKOUT_GOLDEN_DIR=models/golden: P photos x (3 warm-ups + R) inferences, so per image =
# (r3 - r1) / (2 x photos) = (r3 - r1) / 6 with the 3 golden photos. The peers get chelsea's
# tensor made by scripts/peer_compare.py's to_input (no JPEG decode, no NMS), as lookout's
# --inference-only does. Runs are serial (one qemu at a time); the ORT ones take minutes each.
#
# Environment:
#   PEER_DIR         work dir (default $HOME/.cache/lookout-peers): arm64 CPython sysroot,
#                    wheels, site dirs, x86 venv, ncnn model, input tensor, runs/
#   LOOKOUT_ARM_BIN  lookout aarch64 binary. Default: target/aarch64-unknown-linux-gnu/release/
#                    lookout, built first with
#                    `cargo build --profile bench --target aarch64-unknown-linux-gnu --bin lookout`
#   ARMCOST          armcost.sh, the instruction counter's runner (default: the one on PATH)
#   ARMCOST_CACHE    armcost's plugin/overlay cache (default /var/cache/armcost)
#   ARMCOST_PLUGIN   the plugin (default: $ARMCOST_CACHE/libarmcount-<installed qemu>.so)
#   PYTHON           host python3.11 for the x86 venv (default python3)
#
# What it changes on the machine: `dpkg --add-architecture arm64` and `apt-get update` (apt
# then also lists arm64 packages; nothing is installed for arm64: the .debs are only extracted
# into $PEER_DIR/sysroot); armcost adds board overlays under $ARMCOST_CACHE. Everything else
# stays in $PEER_DIR. Network: Debian's apt mirrors and PyPI only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit "${1:-0}"; }

# Pins (checked against PyPI / Debian bookworm when this script was written).
ORT_VERSION=1.31.1
NUMPY_VERSION=2.4.6
NCNN_VERSION=1.0.20261020
PNNX_VERSION=20261020
DEBS=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib python3.11 libexpat1 zlib1g
      libffi8 libssl3 libbz2-1.0 liblzma5 libsqlite3-0 libstdc++6 libgcc-s1 libc6 libncursesw6
      libtinfo6 libreadline8 libuuid1 libnsl2 libtirpc3 libdb5.3 libgomp1)
ARM_PLATFORMS=(--platform manylinux2014_aarch64 --platform manylinux_2_17_aarch64
               --platform manylinux_2_27_aarch64 --platform manylinux_2_28_aarch64)

BOARDS=pi4,pi5 ROWS=lookout-int8,lookout-fp32,ort-fp32,ort-int8,ncnn,ncnn-fp32
OUT= ORT_INT8= MAKE_INT8=1 SETUP_ONLY=0 FRESH=0 REPEAT=0
while [ $# -gt 0 ]; do
  case "$1" in
    --boards) BOARDS=$2; shift 2 ;;
    --rows) ROWS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --ort-int8) ORT_INT8=$2; shift 2 ;;
    --no-make-int8) MAKE_INT8=0; shift ;;
    --setup-only) SETUP_ONLY=1; shift ;;
    --fresh) FRESH=1; shift ;;
    --repeat) REPEAT=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "arm-peers: unknown option $1" >&2; usage 2 >&2 ;;
  esac
done

PEER_DIR=${PEER_DIR:-$HOME/.cache/lookout-peers}
mkdir -p "$PEER_DIR"; PEER_DIR=$(cd "$PEER_DIR" && pwd)
OUT=${OUT:-$PEER_DIR/table.md}
PY=${PYTHON:-python3}
SYSROOT=$PEER_DIR/sysroot VENV=$PEER_DIR/venv-x86 RUNS=$PEER_DIR/runs
FP32_ONNX=$REPO/models/nanodet-g-416-fp32.onnx GOLDEN=$REPO/models/golden
T_START=$SECONDS
say() { echo "== [$(date +%T) +$((SECONDS - T_START))s] $*"; }
die() { echo "arm-peers: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
[ "$FRESH" = 1 ] && { say "--fresh: removing $RUNS"; rm -rf "$RUNS"; }

# ---------------------------------------------------------------- armcost
ARMCOST=${ARMCOST:-$(command -v armcost.sh || true)}
[ -n "$ARMCOST" ] && [ -x "$ARMCOST" ] || die "armcost.sh (the instruction counter: qemu-user with a counting plugin) not found: put it on PATH or set ARMCOST=path/to/armcost.sh"
export ARMCOST_CACHE=${ARMCOST_CACHE:-/var/cache/armcost}
QTAG=$(dpkg-query -W -f='${source:Version}' qemu-user 2>/dev/null | tr -c 'A-Za-z0-9.+-' '_' || true)
export ARMCOST_PLUGIN=${ARMCOST_PLUGIN:-$ARMCOST_CACHE/libarmcount-$QTAG.so}   # build-plugin.sh's name
[ -f "$ARMCOST_PLUGIN" ] || die "no armcost plugin $ARMCOST_PLUGIN: run $(dirname "$ARMCOST")/build-plugin.sh (or set ARMCOST_PLUGIN)"
command -v qemu-aarch64 >/dev/null || die "qemu-aarch64 missing (armcost's build-plugin.sh installs qemu-user)"

# ---------------------------------------------------------------- 1. arm64 CPython sysroot
setup_sysroot() {
  if [ -x "$SYSROOT/usr/bin/python3.11" ] && [ -e "$SYSROOT/.complete" ]; then
    say "1a. arm64 sysroot: present ($SYSROOT)"; return
  fi
  say "1a. arm64 CPython 3.11 sysroot from Debian arm64 .debs (extracted, not installed)"
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    say "    dpkg --add-architecture arm64"; as_root dpkg --add-architecture arm64
  fi
  if ! apt-cache show libc6:arm64 >/dev/null 2>&1; then
    say "    apt-get update"; as_root apt-get update -qq
  fi
  mkdir -p "$PEER_DIR/debs"; rm -rf "$SYSROOT.tmp"; mkdir -p "$SYSROOT.tmp"
  (cd "$PEER_DIR/debs" && rm -f ./*.deb && apt-get download -q -o APT::Sandbox::User=root "${DEBS[@]/%/:arm64}")
  for d in "$PEER_DIR"/debs/*.deb; do dpkg -x "$d" "$SYSROOT.tmp"; done
  rm -rf "$SYSROOT"; mv "$SYSROOT.tmp" "$SYSROOT"; touch "$SYSROOT/.complete"
}
debs_manifest() {
  for d in "$PEER_DIR"/debs/*.deb; do dpkg-deb -W --showformat='${Package} ${Version}\n' "$d"; done > "$PEER_DIR/debs.txt"
  say "    sysroot: $(grep -E '^(python3.11|libc6) ' "$PEER_DIR/debs.txt" | paste -sd';' | sed 's/;/; /')"
}

# ---------------------------------------------------------------- 1b. x86 venv (to_input, int8_forms, pip)
setup_venv() {
  if [ -e "$VENV/.complete" ]; then say "1b. x86 venv: present ($VENV)"; return; fi
  say "1b. x86 venv from models/recipe/requirements-ort.txt (onnxruntime, onnx, numpy, pillow, scikit-image)"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q -r "$REPO/models/recipe/requirements-ort.txt"
  touch "$VENV/.complete"
}

unzip_to() { "$VENV/bin/python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"; }

# ---------------------------------------------------------------- 1c. aarch64 wheels + pnnx
setup_wheels() {
  local w=$PEER_DIR/wheels
  mkdir -p "$w"
  if [ ! -e "$PEER_DIR/site/.complete" ]; then
    say "1c. aarch64 wheels: onnxruntime==$ORT_VERSION numpy==$NUMPY_VERSION -> site/"
    "$VENV/bin/pip" download -q --no-deps --only-binary=:all: "${ARM_PLATFORMS[@]}" --python-version 3.11 \
      --implementation cp --abi cp311 -d "$w/arm" "onnxruntime==$ORT_VERSION" "numpy==$NUMPY_VERSION"
    rm -rf "$PEER_DIR/site"; mkdir -p "$PEER_DIR/site"
    for f in "$w"/arm/onnxruntime-"$ORT_VERSION"-*.whl "$w"/arm/numpy-"$NUMPY_VERSION"-*.whl; do unzip_to "$f" "$PEER_DIR/site"; done
    touch "$PEER_DIR/site/.complete"
  else say "1c. aarch64 onnxruntime/numpy site: present"; fi
  if [ ! -e "$PEER_DIR/ncnnsite/.complete" ]; then
    say "1c. aarch64 wheel: ncnn==$NCNN_VERSION -> ncnnsite/"
    "$VENV/bin/pip" download -q --no-deps --only-binary=:all: "${ARM_PLATFORMS[@]}" --python-version 3.11 \
      --implementation cp --abi cp311 -d "$w/arm" "ncnn==$NCNN_VERSION"
    rm -rf "$PEER_DIR/ncnnsite"; mkdir -p "$PEER_DIR/ncnnsite"
    unzip_to "$(ls "$w"/arm/ncnn-"$NCNN_VERSION"-*.whl | head -1)" "$PEER_DIR/ncnnsite"
    touch "$PEER_DIR/ncnnsite/.complete"
  else say "1c. aarch64 ncnn site: present"; fi
  if [ ! -e "$PEER_DIR/pnnx/.complete" ]; then
    say "1c. x86_64 wheel: pnnx==$PNNX_VERSION -> pnnx/"
    "$VENV/bin/pip" download -q --no-deps --only-binary=:all: -d "$w/x86" "pnnx==$PNNX_VERSION"
    rm -rf "$PEER_DIR/pnnx"; mkdir -p "$PEER_DIR/pnnx"
    unzip_to "$(ls "$w"/x86/pnnx-"$PNNX_VERSION"-*.whl | head -1)" "$PEER_DIR/pnnx"
    touch "$PEER_DIR/pnnx/.complete"
  else say "1c. pnnx: present"; fi
  ls "$w"/arm "$w"/x86 | grep '\.whl$' > "$PEER_DIR/wheels.txt"
  # .pyc files once, on the host (same CPython 3.11 bytecode magic as the guest's 3.11.2), so
  # that the measured runs (PYTHONDONTWRITEBYTECODE=1) all read the same cached bytecode.
  if [ ! -e "$PEER_DIR/.pyc-done" ]; then
    say "1d. byte-compiling the guest's stdlib and site dirs (host python, once)"
    "$VENV/bin/python" -m compileall -q -j 2 "$SYSROOT/usr/lib/python3.11" "$PEER_DIR/site" "$PEER_DIR/ncnnsite" >/dev/null 2>&1 || true
    touch "$PEER_DIR/.pyc-done"
  fi
}

# ---------------------------------------------------------------- 1e. ncnn model via pnnx
setup_ncnn_model() {
  local d=$PEER_DIR/ncnn
  if [ -s "$d/nanodet_g_416_fp32.ncnn.param" ] && [ -s "$d/nanodet_g_416_fp32.ncnn.bin" ]; then
    say "1e. ncnn model: present"; return
  fi
  say "1e. pnnx: models/nanodet-g-416-fp32.onnx -> ncnn param/bin (fp16 weights, pnnx default)"
  local exe; exe=$(find "$PEER_DIR/pnnx" -type f -name pnnx | head -1)
  [ -n "$exe" ] || die "no pnnx executable in the pnnx wheel ($PEER_DIR/pnnx)"
  chmod +x "$exe"; rm -rf "$d"; mkdir -p "$d"
  cp "$FP32_ONNX" "$d/nanodet_g_416_fp32.onnx"
  (cd "$d" && "$exe" nanodet_g_416_fp32.onnx 'inputshape=[1,3,416,416]' > pnnx.log 2>&1) \
    || { tail -20 "$d/pnnx.log"; die "pnnx failed"; }
  [ -s "$d/nanodet_g_416_fp32.ncnn.param" ] || { tail -20 "$d/pnnx.log"; die "pnnx wrote no ncnn param"; }
}

# ---------------------------------------------------------------- 2. ORT INT8 form
setup_ort_int8() {
  if [ -n "$ORT_INT8" ]; then
    [ -f "$ORT_INT8" ] || die "--ort-int8 $ORT_INT8: no such file"
    ORT_INT8=$(cd "$(dirname "$ORT_INT8")" && pwd)/$(basename "$ORT_INT8"); say "2. ORT INT8 model: $ORT_INT8 (given)"; return
  fi
  local f=$PEER_DIR/forms/nanodet_int8_qdq_pc_u8.onnx
  if [ -s "$f" ]; then ORT_INT8=$f; say "2. ORT INT8 model: present ($f)"; return; fi
  if [ "$MAKE_INT8" = 0 ]; then
    say "2. ORT INT8 model: none (--no-make-int8 and no --ort-int8): the ORT INT8 row is skipped"; return
  fi
  say "2. making the ORT INT8 form: int8_forms.py $FP32_ONNX forms qdq_pc_u8 (calibration, a few minutes)"
  (cd "$REPO" && nice -n 10 "$VENV/bin/python" models/recipe/int8_forms.py "$FP32_ONNX" "$PEER_DIR/forms" qdq_pc_u8 \
     > "$PEER_DIR/int8_forms.log" 2>&1) || { tail -20 "$PEER_DIR/int8_forms.log"; die "int8_forms.py failed"; }
  ORT_INT8=$f
}

# ---------------------------------------------------------------- 3. input tensor
setup_input() {
  if [ -s "$PEER_DIR/chelsea.npy" ]; then say "3. input tensor: present ($PEER_DIR/chelsea.npy)"; return; fi
  say "3. input tensor: peer_compare.to_input(models/golden/chelsea-416x416.png) -> chelsea.npy"
  "$VENV/bin/python" "$HERE/peers/mkinput.py" "$GOLDEN/chelsea-416x416.png" "$PEER_DIR/chelsea.npy"
}

# ---------------------------------------------------------------- lookout binary
lookout_bin() {
  if [ -n "${LOOKOUT_ARM_BIN:-}" ]; then
    [ -x "$LOOKOUT_ARM_BIN" ] || die "LOOKOUT_ARM_BIN=$LOOKOUT_ARM_BIN is not an executable"
    return
  fi
  LOOKOUT_ARM_BIN=${CARGO_TARGET_DIR:-$REPO/target}/aarch64-unknown-linux-gnu/release/lookout
  say "lookout: cargo build --profile bench --target aarch64-unknown-linux-gnu --bin lookout (slow, once)"
  (cd "$REPO" && nice -n 19 cargo build --profile bench --target aarch64-unknown-linux-gnu --bin lookout)
  [ -x "$LOOKOUT_ARM_BIN" ] || die "no $LOOKOUT_ARM_BIN after the build"
}

setup_sysroot; debs_manifest; setup_venv; setup_wheels; setup_ncnn_model; setup_ort_int8; setup_input
if [ "$SETUP_ONLY" = 1 ]; then say "setup done in $PEER_DIR"; exit 0; fi
case ",$ROWS," in *,lookout-*) lookout_bin ;; esac

# ---------------------------------------------------------------- 4/5. measurements
insns() { awk '$1=="insns"{print $2}' "$1/summary.txt"; }
FAILED=()
# measure DIR BOARD LDPREFIX|- OK_RCS [armcost --env ...] -- PROGRAM ARGS...
measure() {
  local d=$1 board=$2 ldp=$3 okrc=$4; shift 4
  if [ -e "$d/ok" ]; then say "    reuse ${d#"$RUNS"/}: $(insns "$d") insns"; return 0; fi
  rm -rf "$d"; mkdir -p "$d"
  local t0=$SECONDS rc=0
  (
    if [ "$ldp" != - ]; then export QEMU_LD_PREFIX=$ldp; else unset QEMU_LD_PREFIX; fi
    cd "$REPO" && exec "$ARMCOST" --arch aarch64 --board "$board" --keep "$d" --mix=60 "$@"
  ) > "$d/stdout.txt" 2> "$d/stderr.txt" || rc=$?
  echo $((SECONDS - t0)) > "$d/wall_s"
  # OK_RCS: lookout bench exits 2 when its self-check is not "ok" (peer_compare.py accepts 0 and 2)
  if [ -s "$d/summary.txt" ] && [[ ",$okrc," == *",$rc,"* ]]; then
    touch "$d/ok"; say "    ${d#"$RUNS"/}: $(insns "$d") insns, rc $rc, $((SECONDS - t0)) s wall"
  else
    say "    ${d#"$RUNS"/}: FAILED (rc $rc), last lines of $d/stderr.txt:"; tail -5 "$d/stderr.txt" | sed 's/^/      /'
    FAILED+=("${d#"$RUNS"/}"); return 1
  fi
}
peer_env() {  # PENV = armcost --env options for a python peer run in DIR
  local d=$1 path=$2
  rm -rf "$d.home"; mkdir -p "$d.home"  # a fresh HOME per run: ORT's telemetry writes a db there
  PENV=(--env "HOME=$d.home" --env "PYTHONPATH=$path" --env PYTHONDONTWRITEBYTECODE=1 --env PYTHONHASHSEED=0
        --env OPENBLAS_NUM_THREADS=1 --env OMP_NUM_THREADS=1)
}
sha8() { sha256sum "$1" | cut -c1-8; }

NPHOTOS=$(ls "$GOLDEN"/*-416x416.png | wc -l)
TSV=$PEER_DIR/rows.tsv; : > "$TSV"
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$TSV"; }
PY_ARM=$SYSROOT/usr/bin/python3.11
KS=(1 3); [ "$REPEAT" = 1 ] && KS+=(1b)
run_peer() {  # run_peer KEY BOARD SITEPATH RUNNER ARGS-BEFORE-K... ; K and extra args in PEER_TAIL
  local key=$1 board=$2 site=$3; shift 3
  local base=$RUNS/$board/$key k
  for k in "${KS[@]}"; do
    say "  $board $key K=${k%b}${k//[0-9]/ (repeat)}"
    peer_env "$base/k$k" "$site"
    measure "$base/k$k" "$board" "$SYSROOT" 0 "${PENV[@]}" -- "$PY_ARM" "$@" "${k%b}" "${PEER_TAIL[@]}" || true
  done
}
run_lookout() {  # run_lookout KEY BOARD PRECISION; sets LK_BASE
  local key=$1 board=$2 prec=$3 r
  LK_BASE=$RUNS/$board/$key-$(sha8 "$LOOKOUT_ARM_BIN")
  local base=$LK_BASE
  for r in "${KS[@]}"; do
    say "  $board $key: lookout bench --inference-only ${r%b} --threads 1 --precision $prec ($NPHOTOS photos)${r//[0-9]/ (repeat)}"
    measure "$base/r$r" "$board" - 0,2 --env "LOOKOUT_GOLDEN_DIR=$GOLDEN" -- "$LOOKOUT_ARM_BIN" bench \
      --inference-only "${r%b}" --threads 1 --precision "$prec" --json || true
  done
}

ORTV="onnxruntime $ORT_VERSION" NCNNV="ncnn $NCNN_VERSION"
say "measuring: boards $BOARDS, rows $ROWS (armcost $ARMCOST, plugin $(basename "$ARMCOST_PLUGIN"))"
for board in ${BOARDS//,/ }; do
  case $board in pi4|pi5) ;; *) die "board $board: only pi4 and pi5" ;; esac
  for key in ${ROWS//,/ }; do
    PEER_TAIL=()
    case $key in
      lookout-int8|lookout-fp32)
        prec=${key#lookout-}; run_lookout "$key" "$board" "$prec"; b=$LK_BASE
        row "$key" "lookout ($(basename "$LOOKOUT_ARM_BIN"))" "${prec^^} (--precision $prec, network only, $NPHOTOS golden photos)" \
            "$board" "$b/r1" "$b/r3" $((2 * NPHOTOS)) ;;
      ort-fp32)
        run_peer "$key" "$board" "$PEER_DIR/site" "$HERE/peers/ortrun.py" "$FP32_ONNX" "$PEER_DIR/chelsea.npy"
        row "$key" "$ORTV" "FP32 (nanodet-g-416-fp32.onnx)" "$board" "$RUNS/$board/$key/k1" "$RUNS/$board/$key/k3" 2 ;;
      ort-int8)
        if [ -z "$ORT_INT8" ]; then
          say "  $board ort-int8: SKIPPED (no INT8 model: pass --ort-int8 FILE or drop --no-make-int8)"
          row "$key" "$ORTV" "INT8 QDQ per-channel u8" "$board" - - 2 "skipped: no --ort-int8 model"; continue
        fi
        k8=$key-$(sha8 "$ORT_INT8")
        run_peer "$k8" "$board" "$PEER_DIR/site" "$HERE/peers/ortrun.py" "$ORT_INT8" "$PEER_DIR/chelsea.npy"
        row "$key" "$ORTV" "INT8 QDQ per-channel, u8 act / s8 w ($(basename "$ORT_INT8"))" "$board" \
            "$RUNS/$board/$k8/k1" "$RUNS/$board/$k8/k3" 2 ;;
      ncnn|ncnn-fp32)
        mode=default; [ "$key" = ncnn-fp32 ] && mode=fp32
        if [ "$mode" = fp32 ] && [ "$board" = pi4 ]; then
          say "  pi4 ncnn-fp32: not run (no asimdhp on the A72: ncnn's default is already its FP32 path)"
          row "$key" "$NCNNV" "FP32, fp16/bf16 off" "$board" - - 2 "not run: on pi4 (no fp16 on A72) it is the default row's path"
          continue
        fi
        PEER_TAIL=("$mode")
        run_peer "$key" "$board" "$PEER_DIR/ncnnsite:$PEER_DIR/site" "$HERE/peers/ncnnrun.py" \
          "$PEER_DIR/ncnn/nanodet_g_416_fp32.ncnn.param" "$PEER_DIR/ncnn/nanodet_g_416_fp32.ncnn.bin" "$PEER_DIR/chelsea.npy"
        if [ "$mode" = fp32 ]; then form="FP32 via pnnx, fp16/bf16 off (true FP32)"
        elif [ "$board" = pi5 ]; then form="FP32 via pnnx, default Option (fp16 arithmetic on A76)"
        else form="FP32 via pnnx, default Option (FP32 on A72)"; fi
        row "$key" "$NCNNV" "$form" "$board" "$RUNS/$board/$key/k1" "$RUNS/$board/$key/k3" 2 ;;
      *) die "unknown row $key" ;;
    esac
  done
done

# ---------------------------------------------------------------- 6. table
say "table (guest instructions per image, (n3 - n1) / 2; lookout (r3 - r1) / $((2 * NPHOTOS)))"
mkdir -p "$(dirname "$OUT")"
python3 "$HERE/peers/table.py" "$TSV" "$OUT"
{
  echo
  echo "Counts from armcost (qemu-user $(qemu-aarch64 --version | head -1 | awk '{print $3}'), $(basename "$ARMCOST_PLUGIN")); pi4 = -cpu cortex-a72, pi5 = cortex-a76."
  echo "Peers: chelsea-416x416.png via peer_compare.to_input, 1 thread, K = 1 vs 3 inferences. lookout: bench --inference-only 1 vs 3 on $NPHOTOS golden photos."
  echo "Ratio: lookout INT8 per image on the same board / the row's (< 1: lookout executes fewer instructions). Counts are not time."
  echo "Sysroot: $(grep -E '^(python3.11|libc6) ' "$PEER_DIR/debs.txt" 2>/dev/null | paste -sd';' | sed 's/;/; /'); wheels: $(paste -sd' ' "$PEER_DIR/wheels.txt")."
} >> "$OUT"
if [ "$REPEAT" = 1 ]; then
  say "repeat deltas (second 1-inference run - first):"
  find "$RUNS" -name 'k1b' -o -name 'r1b' | sort | while read -r d; do
    a=${d%b}; [ -e "$d/ok" ] && [ -e "$a/ok" ] && echo "  ${d#"$RUNS"/}: $(( $(insns "$d") - $(insns "$a") ))"
  done
fi
[ ${#FAILED[@]} = 0 ] || say "FAILED runs: ${FAILED[*]}"
say "wrote $OUT (runs in $RUNS)"
