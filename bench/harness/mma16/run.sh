#!/usr/bin/env bash
# GPU run of matmul_mma_16.cu (16-bit GEMM on mma.sync m16n8k16): builds
# harness.cu (which includes the template) for every config of configs.txt in
# parallel, runs each (correctness on odd shapes for all; timing against
# cuBLAS for the T configs), prints a summary. From the repo root:
#
#   OUT=$OUT bash bench/harness/mma16/run.sh
#
# Build: nvcc -O3 -std=c++17 $GENCODE -Xptxas -v -lcublas. Default GENCODE:
# sm_80 SASS (the Ampere target; its ptxas -v is reported) plus native SASS
# for the GPU found (nvidia-smi compute_cap), e.g. on an H200
#   -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
# (an sm_80 cubin does not run on sm_90; compute_90 SASS from the same source
# is what a compute_80 PTX JIT would produce there, without the JIT time).
# Knobs: GENCODE (nvcc -gencode flags), CONFIGS="name ..." (subset of
# configs.txt), QUICK=1 (correctness only), SEED, TMO (per binary, s, 120),
# SANITIZE=1 (also compute-sanitizer memcheck --tight and racecheck on
# bf16_nn and fp16_tt_full with --small; adds minutes), EXTRA_DEFS, NVCC, OUT.
# Only $OUT/summary.txt stays loose; all logs (build_*.log with ptxas -v,
# run_*.log, sass_*.txt) are in $OUT/mma16.tgz. Exit 0 = all built and passed.
# Expected wall time on an H200 host (16+ cores): build ~1-2 min, runs ~1 min.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
TPL="$(cd "$HERE/../../../optiml-build/src/families/matmul/cuda" && pwd)"
CUDA_INC="$(cd "$HERE/../../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
CUOBJDUMP="$(command -v cuobjdump || echo "$(dirname "$NVCC")/cuobjdump")"
SANBIN="$(command -v compute-sanitizer || echo "$(dirname "$NVCC")/compute-sanitizer")"
OUTDIR="${OUT:-/tmp/mma16_out}"
mkdir -p "$OUTDIR"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/mma16_logs.XXXXXX")"
BIN="$(mktemp -d "${TMPDIR:-/tmp}/mma16_bin.XXXXXX")"
TMO="${TMO:-120}"
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
if [ -z "${GENCODE:-}" ]; then
  GENCODE="-gencode arch=compute_80,code=sm_80"
  [ -n "$CC" ] && [ "$CC" != 80 ] && GENCODE="$GENCODE -gencode arch=compute_$CC,code=sm_$CC"
fi

declare -A FLAGS MODE DESC
ORDER=()
while IFS='|' read -r name mode flags desc; do
  name=$(echo "$name" | xargs)
  [ -z "$name" ] && continue
  case "$name" in \#*) continue;; esac
  FLAGS[$name]="$flags"; MODE[$name]=$(echo "$mode" | xargs); DESC[$name]=$(echo "$desc" | xargs)
  ORDER+=("$name")
done < "$HERE/configs.txt"
if [ -n "${CONFIGS:-}" ]; then read -r -a ORDER <<< "$CONFIGS"; fi
for n in "${ORDER[@]}"; do [ -z "${MODE[$n]:-}" ] && { echo "unknown config '$n'"; exit 1; }; done

{
echo "nvcc: $NVCC ($("$NVCC" --version 2>/dev/null | tail -1))"
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader 2>/dev/null || true
echo "GENCODE: $GENCODE"
echo "building ${#ORDER[@]} configs in parallel ..."
} | tee "$WORK/console.txt"
t0=$(date +%s)
pids=()
for n in "${ORDER[@]}"; do
  # shellcheck disable=SC2086
  ( timeout 900 "$NVCC" -O3 -std=c++17 $GENCODE -Xptxas -v -I "$TPL" -I "$CUDA_INC" ${FLAGS[$n]} ${EXTRA_DEFS:-} \
      -DHARNESS_NAME="\"$n\"" "$HERE/harness.cu" -lcublas -o "$BIN/h_$n" > "$WORK/build_$n.log" 2>&1 \
    && echo "  built $n" || echo "  BUILD FAILED $n (see build_$n.log)" ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "build time: $(( $(date +%s) - t0 )) s" | tee -a "$WORK/console.txt"

status=0
summary=()
tsum=()
t1=$(date +%s)
for n in "${ORDER[@]}"; do
  { echo; echo "################ $n [${MODE[$n]}]: ${DESC[$n]}"; } | tee -a "$WORK/console.txt"
  # ptxas -v of the kernel, per arch: "sm_80 regs/spill"
  ptx=$(awk '/Compiling entry function .optiml_matmul. for/ {a=$NF} /bytes spill stores/ && a {s=$5"/"$9} /Used [0-9]+ registers/ && a {print a":"$5"r,spill="s; a=""}' \
        "$WORK/build_$n.log" 2>/dev/null | tr -d "'" | tr '\n' ' ')
  if [ ! -x "$BIN/h_$n" ]; then
    status=1; summary+=("$(printf '%-14s BUILD FAILED' "$n")"); tail -30 "$WORK/build_$n.log"; continue
  fi
  hmma="?"
  if [ -x "$CUOBJDUMP" ] || command -v "$CUOBJDUMP" > /dev/null 2>&1; then
    "$CUOBJDUMP" -sass -fun optiml_matmul "$BIN/h_$n" > "$WORK/sass_$n.txt" 2>&1 || true
    hmma=$(grep -c "HMMA" "$WORK/sass_$n.txt")
  fi
  args=()
  case "${MODE[$n]}" in q) args+=(--no-timing);; esac
  [ "${QUICK:-0}" = "1" ] && args=(--no-timing)
  [ -n "${SEED:-}" ] && args+=(--seed "$SEED")
  timeout -k 5 "$TMO" "$BIN/h_$n" "${args[@]}" > "$WORK/run_$n.log" 2>&1
  rc=$?
  grep -E "^==|^   config|FAIL|TIMING|CUDA ERROR|CUBLAS ERROR|^-- " "$WORK/run_$n.log" | head -40 | tee -a "$WORK/console.txt"
  { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && echo "  TIMEOUT after ${TMO}s (rc $rc)" | tee -a "$WORK/console.txt"
  [ "$rc" -ne 0 ] && status=1
  corr=$(grep -q -- '-- correctness PASSED' "$WORK/run_$n.log" && echo PASS || echo FAIL)
  npass=$(grep -cE '^  PASS ' "$WORK/run_$n.log")
  nfail=$(grep -cE '^  FAIL ' "$WORK/run_$n.log")
  worst=$(sed -n 's/.* err\/tol \([0-9.e+-]*\|inf\) .*/\1/p' "$WORK/run_$n.log" | sort -g | tail -1)
  summary+=("$(printf '%-14s %s rc=%-3d corr=%s pass=%-3s fail=%-3s worst_err/tol=%-8s SASS_HMMA=%-4s ptxas: %s' \
    "$n" "${MODE[$n]}" "$rc" "$corr" "$npass" "$nfail" "${worst:-?}" "$hmma" "$ptx")")
  while read -r tl; do tsum+=("$(echo "$tl" | sed 's/^ *TIMING *//')"); done < <(grep '   TIMING ' "$WORK/run_$n.log")
  printf '  -> %s\n' "${summary[-1]}" | tee -a "$WORK/console.txt"
done

sansum=()
if [ "${SANITIZE:-0}" = "1" ]; then
  for n in bf16_nn fp16_tt_full; do
    [ -x "$BIN/h_$n" ] || continue
    for tool in memcheck racecheck; do
      targs=(--small); [ "$tool" = memcheck ] && targs+=(--tight)
      timeout -k 5 300 "$SANBIN" --tool "$tool" --error-exitcode 99 "$BIN/h_$n" "${targs[@]}" > "$WORK/san_${tool}_$n.log" 2>&1
      rc=$?
      es=$(grep -oE "ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?, [0-9]+ warnings?\)" "$WORK/san_${tool}_$n.log" | tail -1)
      [ "$rc" -ne 0 ] && status=1
      sansum+=("$(printf '%-14s %-9s rc=%-3d %s' "$n" "$tool" "$rc" "${es:-no summary}")")
    done
  done
fi

{
  echo
  echo "================ summary: mma16 (matmul_mma_16.cu, mma.sync m16n8k16, fp32 accumulation) ================"
  echo "GENCODE: $GENCODE"
  for l in "${summary[@]}"; do echo "$l"; done
  echo "---- timing (CUDA events, median of 20 single launches after 3 warm-ups; ratio = cuBLAS time / mma16 time)"
  for l in "${tsum[@]}"; do echo "$l"; done
  if [ ${#sansum[@]} -gt 0 ]; then echo "---- compute-sanitizer (--small; memcheck --tight)"; for l in "${sansum[@]}"; do echo "$l"; done; fi
  echo "run time $(( $(date +%s) - t1 )) s (build $(( t1 - t0 )) s); overall status: $([ $status -eq 0 ] && echo OK || echo FAILED)"
  echo "all logs: mma16.tgz (build_*.log, run_*.log, sass_*.txt, console.txt, summary.txt)"
} | tee "$WORK/summary.txt"
cp "$WORK/summary.txt" "$OUTDIR/summary.txt"
tar -czf "$OUTDIR/mma16.tgz" -C "$WORK" .
rm -rf "$BIN" "$WORK"
exit $status
