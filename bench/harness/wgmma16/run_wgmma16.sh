#!/usr/bin/env bash
# Build and run the bf16/fp16 wgmma prototype (wgmma16_harness.cu including
# wgmma16.cu) for every config of configs.txt, next to cuBLAS.
#
#   OUT=$OUT bash bench/harness/wgmma16/run_wgmma16.sh       # from the repo root
#
# Configs are built in parallel; each binary runs under `timeout`, one after
# the other (one GPU user at a time). Per config in $OUT: build_<name>.log
# (ptxas -v), run_<name>.log, sass_<name>.txt (cuobjdump -sass) and the HGMMA
# count. A summary is printed last (and written to $OUT/summary.txt).
# Modes (configs.txt column 2): T = correctness + all 6 timing shapes,
# t = correctness + b256x1024^3 and 4096^3, q = correctness only.
# Env: OUT (default /tmp/wgmma16_out), NVCC, CONFIGS="name ..." (subset),
#      QUICK=1 (correctness only for all), SEED, TMO (per-binary timeout, s, default 60),
#      EXTRA_DEFS (extra nvcc flags for every config).
# Exit status: 0 if every config built and passed, 1 otherwise.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
TPL="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../optiml-build/src/families/matmul/cuda" && pwd)"  # the product templates the harness includes
CUDA_INC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
CUOBJDUMP="$(command -v cuobjdump || echo "$(dirname "$NVCC")/cuobjdump")"
OUTDIR="${OUT:-/tmp/wgmma16_out}"
mkdir -p "$OUTDIR"
: > "$OUTDIR/results.jsonl"
BIN="$(mktemp -d "${TMPDIR:-/tmp}/wgmma16_bin.XXXXXX")"
TMO="${TMO:-60}"

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

echo "nvcc: $NVCC ($("$NVCC" --version 2>/dev/null | tail -1))"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader 2>/dev/null || true
echo "building ${#ORDER[@]} configs for sm_90a in parallel ..."
t0=$(date +%s)
pids=()
for n in "${ORDER[@]}"; do
  # shellcheck disable=SC2086
  ( timeout 600 "$NVCC" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -I "$TPL" -I "$CUDA_INC" ${FLAGS[$n]} ${EXTRA_DEFS:-} \
      -DHARNESS_NAME="\"$n\"" "$HERE/wgmma16_harness.cu" -lcublas -lcuda -o "$BIN/h_$n" > "$OUTDIR/build_$n.log" 2>&1 \
    && echo "  built $n" || echo "  BUILD FAILED $n (see $OUTDIR/build_$n.log)" ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "build time: $(( $(date +%s) - t0 )) s"

status=0
summary=()
tsum=()
t1=$(date +%s)
for n in "${ORDER[@]}"; do
  echo
  echo "################ $n [${MODE[$n]}]: ${DESC[$n]}"
  kern=$(grep -oE "Compiling entry function '[a-z0-9_]+'" "$OUTDIR/build_$n.log" 2>/dev/null | grep -oE "optiml_matmul_(bf16|f16)" | head -1)
  info=$(grep -A4 "Compiling entry function '${kern:-optiml_matmul}" "$OUTDIR/build_$n.log" 2>/dev/null)
  preg=$(echo "$info" | grep -oE "Used [0-9]+ registers" | grep -oE "[0-9]+" | head -1)
  pspill=$(echo "$info" | grep -oE "[0-9]+ bytes spill stores" | grep -oE "^[0-9]+" | head -1)
  pwarn=$(grep -cE "C75[0-9][0-9]" "$OUTDIR/build_$n.log" 2>/dev/null)
  if [ ! -x "$BIN/h_$n" ]; then
    status=1; summary+=("$(printf '%-14s BUILD FAILED' "$n")"); tail -30 "$OUTDIR/build_$n.log"; continue
  fi
  hg="?"
  if command -v "$CUOBJDUMP" > /dev/null 2>&1 || [ -x "$CUOBJDUMP" ]; then
    "$CUOBJDUMP" -sass "$BIN/h_$n" > "$OUTDIR/sass_$n.txt" 2>&1
    hg=$(grep -c "HGMMA" "$OUTDIR/sass_$n.txt")
    echo "  SASS: HGMMA x$hg ($(grep -oE 'HGMMA\.[0-9x]+\.F32[.A-Z0-9]*' "$OUTDIR/sass_$n.txt" | sort -u | tr '\n' ' ')), UTMALDG x$(grep -c UTMALDG "$OUTDIR/sass_$n.txt"), STL x$(grep -cE '\bSTL' "$OUTDIR/sass_$n.txt")"
  fi
  args=()
  case "${MODE[$n]}" in q) args+=(--quick);; T) args+=(--full-shapes);; esac
  [ "${QUICK:-0}" = "1" ] && args=(--quick)
  [ -n "${SEED:-}" ] && args+=(--seed "$SEED")
  timeout -k 5 "$TMO" "$BIN/h_$n" "${args[@]}" > "$OUTDIR/run_$n.log" 2>&1
  rc=$?
  grep -E "^==|^   device|FAIL|skip|TIMING|CUDA ERROR|cuBLAS error|^-- " "$OUTDIR/run_$n.log" | head -70
  { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && echo "  TIMEOUT after ${TMO}s (rc $rc)" && tail -5 "$OUTDIR/run_$n.log"
  [ "$rc" -ne 0 ] && status=1
  corr=$(grep -q -- '-- correctness PASSED' "$OUTDIR/run_$n.log" && echo PASS || echo FAIL)
  nfail=$(grep -cE '^  FAIL ' "$OUTDIR/run_$n.log")
  worst=$(sed -n 's/.*worst rel \([0-9.e+-]*\).*/\1/p' "$OUTDIR/run_$n.log" | head -1)
  summary+=("$(printf '%-14s %s rc=%-3d regs=%-3s spill=%-3s C75xx=%-2s HGMMA=%-3s corr=%s fails=%-2s worst_rel=%-9s' \
    "$n" "${MODE[$n]}" "$rc" "${preg:-?}" "${pspill:-?}" "${pwarn:-?}" "$hg" "$corr" "$nfail" "${worst:-?}")")
  while read -r tl; do
    shp=$(echo "$tl" | awk '{print $3}')
    o=$(echo "$tl" | sed -n 's/.* ours *[0-9.]* ms *\([0-9.]*\) TFLOP.*/\1/p')
    c=$(echo "$tl" | sed -n 's/.*| cublas *[0-9.]* ms *\([0-9.]*\) TFLOP.*/\1/p')
    r=$(echo "$tl" | sed -n 's/.*ratio(cublas_ms\/ours_ms) \([0-9.]*\).*/\1/p')
    tsum+=("$(printf '%-14s %-14s ours %7s TF  cuBLAS %7s TF  ratio %s' "$n" "$shp" "$o" "$c" "$r")")
  done < <(grep '   TIMING .* ms' "$OUTDIR/run_$n.log")
  grep '^JSON ' "$OUTDIR/run_$n.log" | sed 's/^JSON //' >> "$OUTDIR/results.jsonl"
done

{
  echo
  echo "================ summary: sm_90a wgmma bf16/fp16 prototype (targets: ratio >= 0.95 on b256x1024^3 and 4096^3) ================"
  for l in "${summary[@]}"; do echo "$l"; done
  echo "---- timing (TFLOP/s, ratio = cublas_ms / ours_ms, ABAB-alternated medians)"
  for l in "${tsum[@]}"; do echo "$l"; done
  echo "run time $(( $(date +%s) - t1 )) s (build $(( t1 - t0 )) s); overall status: $([ $status -eq 0 ] && echo OK || echo FAILED)"
  echo "logs: $OUTDIR (build_*.log, run_*.log, sass_*.txt, results.jsonl, summary.txt)"
} | tee "$OUTDIR/summary.txt"
rm -rf "$BIN"
exit $status
