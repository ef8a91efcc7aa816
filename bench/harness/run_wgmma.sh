#!/usr/bin/env bash
# Build and run the wgmma TF32 prototype harness (wgmma_harness.cu, which
# includes wgmma_tf32.cu) for several configurations, next to cuBLAS TF32.
#
#   OUT=$OUT bash bench/harness/run_wgmma.sh     # from the repository root
#
# Each config is built (in parallel) and run independently: a failure in one
# does not stop the others; every binary runs under `timeout`. Per config:
# build log (ptxas -v), run log, SASS (cuobjdump --dump-sass) and the HGMMA
# count, JSON. A summary table is printed last.
#
# Env:
#   OUT       if set, logs / sass / json / summary.txt are written there
#   NVCC      nvcc to use (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
#   CONFIGS   space-separated config names (default: the ORDER list below)
#   QUICK=1   probe + correctness only (no timing)
#   SEED      input seed passed to every binary
#   TMO       per-binary timeout in seconds (default 60)
#   EXTRA_DEFS  extra nvcc flags for every config
# Exit status: 0 if every config built and passed, 1 otherwise.
set -u

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
CUOBJDUMP="$(command -v cuobjdump || echo "$(dirname "$NVCC")/cuobjdump")"
OUTDIR="${OUT:-}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/optiml_wgmma.XXXXXX")"
LOGDIR="${OUTDIR:-$WORK}"
mkdir -p "$LOGDIR"
TMO="${TMO:-60}"

declare -A CFG DESC
ORDER=(debug small m128 m256 m256s3 m256w0 m256noround)
CFG[debug]="-DOPTIML_BM=64 -DOPTIML_CONSUMERS=1 -DOPTIML_STAGES=1 -DOPTIML_WAIT_DEPTH=0"
DESC[debug]="64x64 tile, 1 consumer WG, 1 stage, wait 0: simplest pipeline (localizes layout bugs)"
CFG[small]="-DOPTIML_BM=64 -DOPTIML_CONSUMERS=1 -DOPTIML_STAGES=2 -DOPTIML_WAIT_DEPTH=1"
DESC[small]="64x64 tile, 1 consumer, 2 stages, wait 1: ring + double-buffered fragments, small"
CFG[m128]="-DOPTIML_BM=128 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4"
DESC[m128]="128x128 tile (m64n128k8), 2 consumers, 4 stages, no setmaxnreg"
CFG[m256]="-DOPTIML_BM=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4"
DESC[m256]="256x128 tile (m64n256k8), 2 consumers, 4 stages, setmaxnreg 40/232: main candidate"
CFG[m256s3]="-DOPTIML_BM=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=3"
DESC[m256s3]="m256 with 3 stages"
CFG[m256w0]="-DOPTIML_BM=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_WAIT_DEPTH=0"
DESC[m256w0]="m256 retiring each k-tile's wgmmas before the next (WG ping-pong only)"
CFG[m256noround]="-DOPTIML_BM=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_TF32_ROUND=0"
DESC[m256noround]="m256 without cvt.rna on the register operand (speed of the conversion)"
# not run by default
CFG[m256c1]="-DOPTIML_BM=256 -DOPTIML_CONSUMERS=1 -DOPTIML_STAGES=4"
DESC[m256c1]="256x64 tile, 1 consumer"
CFG[m128s6]="-DOPTIML_BM=128 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=6"
DESC[m128s6]="m128 with 6 stages"

if [ -n "${CONFIGS:-}" ]; then
  read -r -a ORDER <<< "$CONFIGS"
fi
for name in "${ORDER[@]}"; do
  if [ -z "${CFG[$name]:-}" ]; then echo "unknown config '$name'"; exit 1; fi
done

echo "nvcc: $NVCC ($("$NVCC" --version 2>/dev/null | tail -1))"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null || true
echo "building ${#ORDER[@]} configs for sm_90a in parallel ..."

t0=$(date +%s)
pids=()
for name in "${ORDER[@]}"; do
  # shellcheck disable=SC2086
  ( timeout 300 "$NVCC" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v \
      ${CFG[$name]} ${EXTRA_DEFS:-} -DHARNESS_NAME="\"$name\"" \
      "$HERE/wgmma_harness.cu" -lcublas -o "$WORK/h_$name" > "$LOGDIR/build_$name.log" 2>&1 \
    && echo "  built $name" || echo "  BUILD FAILED $name (see $LOGDIR/build_$name.log)" ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "build time: $(( $(date +%s) - t0 )) s"

status=0
summary=()
: > "$LOGDIR/results.jsonl"
for name in "${ORDER[@]}"; do
  echo
  echo "################ $name: ${DESC[$name]}"
  # ptxas report for the optiml kernel
  preg=$(grep -A4 "Compiling entry function 'optiml_matmul'" "$LOGDIR/build_$name.log" 2>/dev/null \
         | grep -oE "Used [0-9]+ registers" | grep -oE "[0-9]+" | head -1)
  pspill=$(grep -A4 "Compiling entry function 'optiml_matmul'" "$LOGDIR/build_$name.log" 2>/dev/null \
         | grep -oE "[0-9]+ bytes spill stores" | grep -oE "^[0-9]+" | head -1)
  pwarn=$(grep -cE "C75[0-9][0-9]" "$LOGDIR/build_$name.log" 2>/dev/null)
  if [ ! -x "$WORK/h_$name" ]; then
    status=1
    summary+=("$(printf '%-12s BUILD FAILED' "$name")")
    tail -30 "$LOGDIR/build_$name.log"
    continue
  fi
  grep -E "C75[0-9][0-9]|optiml_matmul|Used|spill" "$LOGDIR/build_$name.log" | head -8
  hg="?"
  if [ -x "$CUOBJDUMP" ] || command -v cuobjdump > /dev/null; then
    "$CUOBJDUMP" --dump-sass "$WORK/h_$name" > "$LOGDIR/sass_$name.txt" 2>&1
    hg=$(grep -c HGMMA "$LOGDIR/sass_$name.txt")
    echo "  SASS: HGMMA x$hg, WARPGROUP.DEPBAR x$(grep -c 'WARPGROUP.DEPBAR' "$LOGDIR/sass_$name.txt"), STL x$(grep -cE '\bSTL' "$LOGDIR/sass_$name.txt")"
    grep -m4 HGMMA "$LOGDIR/sass_$name.txt" | sed 's/^/    /'
  fi
  args=()
  [ "${QUICK:-0}" = "1" ] && args+=(--quick)
  [ -n "${SEED:-}" ] && args+=(--seed "$SEED")
  timeout -k 5 "$TMO" "$WORK/h_$name" "${args[@]}" > "$LOGDIR/run_$name.log" 2>&1
  rc=$?
  # failing lines and timing lines to the console; full log in run_$name.log
  grep -E "^==|^   device|probe|FAIL|^-- |TIMING|CUDA ERROR|cuBLAS error" "$LOGDIR/run_$name.log" | head -60
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo "  TIMEOUT after ${TMO}s (rc $rc)" && tail -5 "$LOGDIR/run_$name.log"
  [ "$rc" -ne 0 ] && status=1
  grep '^JSON ' "$LOGDIR/run_$name.log" | sed 's/^JSON //' >> "$LOGDIR/results.jsonl"
  probe=$(grep -q -- '-- probe .* PASSED' "$LOGDIR/run_$name.log" && echo ok || echo FAIL)
  corr=$(grep -q -- '-- correctness PASSED' "$LOGDIR/run_$name.log" && echo PASS || echo FAIL)
  nfail=$(grep -cE '^  FAIL |^   FAIL ' "$LOGDIR/run_$name.log")
  worst=$(sed -n 's/.*worst rel \([0-9.e+-]*\), worst scaled \([0-9.e+-]*\).*/\1\/\2/p' "$LOGDIR/run_$name.log" | head -1)
  line=$(printf '%-12s rc=%-3d regs=%-3s spill=%-3s C75xx=%-2s HGMMA=%-3s probe=%-4s corr=%s fails=%-2s rel/sc=%-17s' \
         "$name" "$rc" "${preg:-?}" "${pspill:-?}" "${pwarn:-?}" "$hg" "$probe" "$corr" "$nfail" "${worst:-?}")
  while read -r tl; do
    b=$(echo "$tl" | sed -n 's/.*batch=\([0-9]*\).*/\1/p')
    o=$(echo "$tl" | sed -n 's/.*optiml *[0-9.]* ms *\([0-9.]*\) TFLOP.*/\1/p')
    gr=$(echo "$tl" | sed -n 's/.*| grid *[0-9.]* ms *\([0-9.]*\) TF.*/\1/p')
    c=$(echo "$tl" | sed -n 's/.*cublas_tf32 *[0-9.]* ms *\([0-9.]*\) TFLOP.*/\1/p')
    r=$(echo "$tl" | sed -n 's/.*ratio \([0-9.]*\).*/\1/p')
    line+=$(printf ' | b%s: %s TF (grid %s; cublas %s; x%s)' "$b" "$o" "$gr" "$c" "$r")
  done < <(grep 'TIMING' "$LOGDIR/run_$name.log")
  summary+=("$line")
done

{
  echo
  echo "================ summary (sm_90a wgmma TF32 prototype, 1024^3, TFLOP/s; target >= 0.95x cuBLAS TF32) ================"
  for l in "${summary[@]}"; do echo "$l"; done
  echo "total time: $(( $(date +%s) - t0 )) s; overall status: $([ $status -eq 0 ] && echo OK || echo FAILED)"
  echo "logs: $LOGDIR (build_*.log, run_*.log, sass_*.txt, results.jsonl)"
} | tee "$LOGDIR/summary.txt"

if [ -n "$OUTDIR" ]; then rm -rf "$WORK"; else rm -f "$WORK"/h_*; fi
exit $status
