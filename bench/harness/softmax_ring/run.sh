#!/usr/bin/env bash
# Builds and runs the long-row softmax prototype on the device: OUT=$OUT bash bench/harness/softmax_ring/run.sh
# [R C RUNS] (default KernelBench 23's 4096 x 393216, 10 runs). Writes $OUT/softmax_ring.log.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/softmax_ring}; mkdir -p "$OUT"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
"$NVCC" -O3 -std=c++17 -arch=sm_90a -I "$here/../../../optiml-build/src/cuda" -o "$OUT/softmax_ring" "$here/softmax_ring.cu" || exit 1
"$OUT/softmax_ring" "$@" 2>&1 | tee "$OUT/softmax_ring.log"
