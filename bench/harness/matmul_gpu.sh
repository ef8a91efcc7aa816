#!/usr/bin/env bash
# The matmul tables against the best library call (issue 17), in one device call: the main job, both sweeps (each
# row beside the fastest of cuBLAS with a 32 MiB workspace and cuBLASLt's heuristic algorithms,
# examples/harness/library.rs), then torch.matmul beside each sweep's rows (bench/harness/matmul_torch.py).
# Stage first (tar target/gpu if it nears the 64 MiB a call carries):
#
#   ../shared/gpu/stage --fresh build -p optiml-examples --example matmul_sweep --example matmul16_sweep \
#       --example batched_matmul
#   (device) OUT=$OUT bash bench/harness/matmul_gpu.sh
#
# Results land in $OUT (default /tmp/optiml-matmul): bmm/, f32/ and 16/, each with its log, JSON and markdown
# (the sweeps' JSON gain torch columns, and <stem>-torch.md beside them).
set -uo pipefail
OUT=${OUT:-/tmp/optiml-matmul}
mkdir -p "$OUT/f32" "$OUT/16" "$OUT/bmm"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
status=0
step() {  # name, limit in seconds, command...
  local name=$1 limit=$2 start
  shift 2
  start=$(date +%s)
  timeout "$limit" "$@" || status=1
  echo "== $name: $(( $(date +%s) - start )) s"
}
step batched_matmul 60 bash -c "bash target/gpu/run.sh batched_matmul --json $OUT/bmm/batched-matmul.json > $OUT/bmm/run.log 2>&1"
tail -4 "$OUT/bmm/run.log"
step matmul_sweep 240 bash -c "bash target/gpu/run.sh matmul_sweep --out $OUT/f32 > $OUT/f32/sweep.log 2>&1"
tail -8 "$OUT/f32/sweep.log"
step matmul16_sweep 180 bash -c "bash target/gpu/run.sh matmul16_sweep --out $OUT/16 > $OUT/16/sweep.log 2>&1"
tail -6 "$OUT/16/sweep.log"
for f in "$OUT/f32/matmul-sweep.json" "$OUT/16/matmul16-sweep.json"; do
  [[ -f $f ]] || continue
  step "torch.matmul beside $(basename "$f")" 60 bash -c "python3 bench/harness/matmul_torch.py --sweep $f > ${f%.json}-torch.log 2>&1"
  tail -3 "${f%.json}-torch.log"
done
exit $status
