#!/usr/bin/env bash
# KernelBench Level 1 on a CUDA machine, in one call: optiml's side (the `kernelbench` example, staged in
# target/gpu, timing its generated kernels through their wrappers), then PyTorch's side (eager and torch.compile on
# the same inputs, checking optiml's sampled outputs), which writes the table. Stage first:
#
#   ../shared/gpu/stage build -p optiml-examples --example kernelbench   (stage builds in release)
#   (device) ONLY=19,23 RUNS=20 bash bench/harness/kernelbench_gpu.sh
#
# Results land in $OUT (default /tmp/kernelbench): ours.json, the samples, and <date>-<card>-kernelbench-l1.{json,md} (h200, h100…).
set -uo pipefail
OUT=${OUT:-/tmp/kernelbench}
work=/tmp/kernelbench-work
mkdir -p "$OUT" "$work"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
status=0
bash target/gpu/run.sh kernelbench --out "$work" ${ONLY:+--only "$ONLY"} --runs "${RUNS:-20}" \
  2>&1 | tee "$OUT/ours.log" || status=1
cp "$work/ours.json" "$OUT/" 2>/dev/null
python3 bench/harness/kernelbench.py --ours "$work/ours.json" --out "$OUT" --runs "${RUNS:-20}" \
  ${ONLY:+--only "$ONLY"} 2>&1 | tee "$OUT/torch.log" || status=1
exit $status
