#!/usr/bin/env bash
# The no-behaviour-change run on a CUDA machine, from executables staged in target/gpu: every GPU test, then the
# two matmul sweeps and the main example, whose tables are compared with the current runs in
# bench/results/INDEX.md. Stage them here first:
#
#   ../shared/gpu/stage --fresh test -p optiml-test-kernels
#   ../shared/gpu/stage test -p optiml-build --test eval_gpu --test dispatch_gpu
#   ../shared/gpu/stage build -p optiml-build --bin cargo-optiml
#   ../shared/gpu/stage build -p optiml-examples --examples
#   (device) STEPS="tests" bash bench/harness/regression_gpu.sh; STEPS="sweeps" bash bench/harness/regression_gpu.sh
#
# Steps (env STEPS, default both): `tests` (every staged test binary with --include-ignored, one thread for the
# evaluator's fault injection), `sweeps` (matmul_sweep, matmul16_sweep, batched_matmul, elementwise). Everything lands in
# /tmp/optiml-regression; $OUT (default /tmp) gets one archive of it, regression-<steps>.tgz, and the logs and
# tables as flat files (the device tool hands back few files).
set -uo pipefail
OUT=${OUT:-/tmp}
dir=/tmp/optiml-regression
STEPS=${STEPS:-tests sweeps}
mkdir -p "$dir"
run=target/gpu/run.sh
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$dir/gpu.txt"
for step in $STEPS; do
  start=$(date +%s)
  case $step in
    tests)
      while read -r t; do
        [[ -n $t ]] || continue
        echo "=== $t" | tee -a "$dir/tests.log"
        bash $run "$t" --include-ignored --test-threads 1 >>"$dir/tests.log" 2>&1 || { status=1; echo "FAILED: $t"; }
      done <target/gpu/tests.txt
      grep -E '^test result|FAILED|panicked' "$dir/tests.log";;
    sweeps)
      bash $run matmul_sweep --out "$dir/sweep" >"$dir/sweep.log" 2>&1 || status=1
      grep -i 'geometric' "$dir/sweep.log"
      bash $run matmul16_sweep --out "$dir/sweep16" >"$dir/sweep16.log" 2>&1 || status=1
      grep -i 'geometric' "$dir/sweep16.log"
      bash $run batched_matmul --json "$dir/bmm.json" >"$dir/bmm.log" 2>&1 || status=1
      tail -12 "$dir/bmm.log"
      bash $run elementwise >"$dir/elementwise.log" 2>&1 || status=1
      tail -12 "$dir/elementwise.log";;
    *) echo "unknown step $step"; status=1;;
  esac
  echo "== $step: $(( $(date +%s) - start )) s"
done
tar -C /tmp -czf "$OUT/regression-${STEPS// /-}.tgz" optiml-regression
for f in "$dir"/*.log "$dir"/sweep/*.md "$dir"/sweep16/*.md; do [[ -f $f ]] && cp "$f" "$OUT/"; done
exit $status
