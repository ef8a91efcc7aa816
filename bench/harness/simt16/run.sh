#!/usr/bin/env bash
# Build and run the simt16 fallback GEMM (harness.cu including matmul16_simt.cu)
# for every config of configs.txt on a GPU (written for an H200, sm_90).
#
#   OUT=$OUT bash bench/harness/simt16/run.sh       # from the repo root
#
# Configs are built in parallel (nvcc -O3 -std=c++17
# -gencode=arch=compute_90,code=sm_90 -Xptxas -v); each binary runs under
# `timeout`, one after the other. Then compute-sanitizer (memcheck with
# --tight: no guard elements, so any read past a matrix end is outside the
# allocation; racecheck and synccheck on the shared-memory staging) runs on
# SAN_CONFIGS with --small (all cases but batch 70000, no timing).
# Per config: build_<name>.log (ptxas -v), run_<name>.log, sass_<name>.txt
# (cuobjdump -sass), san_<tool>_<name>.log. Everything is packed into
# $OUT/simt16.tgz and only $OUT/summary.txt stays loose.
# Env: OUT (default /tmp/simt16_out), NVCC, CONFIGS="name ..." (subset),
#      QUICK=1 (correctness only), SEED, TMO (per-binary timeout, s, default 60),
#      SANITIZE (1 default, 0 skips compute-sanitizer), SAN_CONFIGS (default
#      "bf16_nn_full fp16_tt_full": NN and TT together use all four global
#      load variants and the full epilogue), TMO_SAN (per sanitizer run, s,
#      default 180), ARCH (default 90),
#      EXTRA_DEFS (extra nvcc flags for every config).
# Exit status: 0 if every config built and passed (and sanitizers were clean), 1 otherwise.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
TPL="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../optiml-build/src/families/matmul/cuda" && pwd)"  # the product templates the harness includes
CUDA_INC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
CUOBJDUMP="$(command -v cuobjdump || echo "$(dirname "$NVCC")/cuobjdump")"
SANBIN="$(command -v compute-sanitizer || echo "$(dirname "$NVCC")/compute-sanitizer")"
OUTDIR="${OUT:-/tmp/simt16_out}"
ARCH="${ARCH:-90}"
mkdir -p "$OUTDIR"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/simt16_logs.XXXXXX")"   # logs, tarred into $OUTDIR at the end
BIN="$(mktemp -d "${TMPDIR:-/tmp}/simt16_bin.XXXXXX")"
TMO="${TMO:-60}"
TMO_SAN="${TMO_SAN:-180}"

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
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader 2>/dev/null || true
echo "building ${#ORDER[@]} configs for sm_$ARCH in parallel ..."
} | tee "$WORK/console.txt"
t0=$(date +%s)
pids=()
for n in "${ORDER[@]}"; do
  # shellcheck disable=SC2086
  ( timeout 600 "$NVCC" -O3 -std=c++17 -gencode=arch=compute_$ARCH,code=sm_$ARCH -Xptxas -v -I "$TPL" -I "$CUDA_INC" ${FLAGS[$n]} ${EXTRA_DEFS:-} \
      -DHARNESS_NAME="\"$n\"" "$HERE/harness.cu" -o "$BIN/h_$n" > "$WORK/build_$n.log" 2>&1 \
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
  {
  echo
  echo "################ $n [${MODE[$n]}]: ${DESC[$n]}"
  } | tee -a "$WORK/console.txt"
  info=$(grep -A4 "Compiling entry function 'optiml_matmul16_simt'" "$WORK/build_$n.log" 2>/dev/null)
  preg=$(echo "$info" | grep -oE "Used [0-9]+ registers" | grep -oE "[0-9]+" | head -1)
  pspill=$(echo "$info" | grep -oE "[0-9]+ bytes spill stores" | grep -oE "^[0-9]+" | head -1)
  if [ ! -x "$BIN/h_$n" ]; then
    status=1; summary+=("$(printf '%-14s BUILD FAILED' "$n")"); tail -30 "$WORK/build_$n.log"; continue
  fi
  ffma="?"; ldg="?"; stg="?"; stl="?"
  if command -v "$CUOBJDUMP" > /dev/null 2>&1 || [ -x "$CUOBJDUMP" ]; then
    "$CUOBJDUMP" -sass -fun optiml_matmul16_simt "$BIN/h_$n" > "$WORK/sass_$n.txt" 2>&1 || \
      "$CUOBJDUMP" -sass "$BIN/h_$n" > "$WORK/sass_$n.txt" 2>&1
    ffma=$(grep -c "FFMA" "$WORK/sass_$n.txt"); ldg=$(grep -cE "\bLDG" "$WORK/sass_$n.txt")
    stg=$(grep -cE "\bSTG" "$WORK/sass_$n.txt"); stl=$(grep -cE "\bSTL" "$WORK/sass_$n.txt")
    echo "  SASS: FFMA x$ffma LDG x$ldg STG x$stg STL x$stl ($(grep -oE 'LDG\.[A-Z0-9.]+' "$WORK/sass_$n.txt" | sort -u | tr '\n' ' '))" | tee -a "$WORK/console.txt"
  fi
  args=()
  case "${MODE[$n]}" in q) args+=(--no-timing);; esac
  [ "${QUICK:-0}" = "1" ] && args=(--no-timing)
  [ -n "${SEED:-}" ] && args+=(--seed "$SEED")
  timeout -k 5 "$TMO" "$BIN/h_$n" "${args[@]}" > "$WORK/run_$n.log" 2>&1
  rc=$?
  grep -E "^==|^   config|FAIL|skip|TIMING|CUDA ERROR|^-- " "$WORK/run_$n.log" | head -60 | tee -a "$WORK/console.txt"
  { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && echo "  TIMEOUT after ${TMO}s (rc $rc)" && tail -5 "$WORK/run_$n.log"
  [ "$rc" -ne 0 ] && status=1
  corr=$(grep -q -- '-- correctness PASSED' "$WORK/run_$n.log" && echo PASS || echo FAIL)
  npass=$(grep -cE '^  PASS ' "$WORK/run_$n.log")
  nfail=$(grep -cE '^  FAIL ' "$WORK/run_$n.log")
  worst=$(sed -n 's/.* err\/tol \([0-9.e+-]*\|inf\) .*/\1/p' "$WORK/run_$n.log" | sort -g | tail -1)
  summary+=("$(printf '%-14s %s rc=%-3d regs=%-3s spill=%-3s STL=%-3s corr=%s pass=%-3s fails=%-3s worst_err/tol=%-8s' \
    "$n" "${MODE[$n]}" "$rc" "${preg:-?}" "${pspill:-?}" "$stl" "$corr" "$npass" "$nfail" "${worst:-?}")")
  while read -r tl; do
    tsum+=("$(printf '%-14s %s' "$n" "$(echo "$tl" | sed 's/^ *TIMING *//')")")
  done < <(grep '   TIMING ' "$WORK/run_$n.log")
  printf '  -> %s\n' "${summary[-1]}" | tee -a "$WORK/console.txt"
done

sansum=()
if [ "${SANITIZE:-1}" = "1" ]; then
  if [ -x "$SANBIN" ] || command -v "$SANBIN" > /dev/null 2>&1; then
    for n in ${SAN_CONFIGS:-bf16_nn_full fp16_tt_full}; do
      [ -x "$BIN/h_$n" ] || { sansum+=("$(printf '%-14s not built' "$n")"); continue; }
      for tool in memcheck racecheck synccheck; do
        targs=(--small); [ "$tool" = memcheck ] && targs+=(--tight)
        timeout -k 5 "$TMO_SAN" "$SANBIN" --tool "$tool" --error-exitcode 99 "$BIN/h_$n" "${targs[@]}" \
          > "$WORK/san_${tool}_$n.log" 2>&1
        rc=$?
        es=$(grep -oE "ERROR SUMMARY: [0-9]+ errors?" "$WORK/san_${tool}_$n.log" | tail -1)
        hz=$(grep -oE "RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?, [0-9]+ warnings?\)" "$WORK/san_${tool}_$n.log" | tail -1)
        corr=$(grep -q -- '-- correctness PASSED' "$WORK/san_${tool}_$n.log" && echo PASS || echo FAIL)
        line=$(printf '%-14s %-9s rc=%-3d %s %s corr=%s' "$n" "$tool" "$rc" "${es:-no summary}" "$hz" "$corr")
        { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && line="$line TIMEOUT(${TMO_SAN}s)"
        [ "$rc" -ne 0 ] && status=1
        sansum+=("$line")
        echo "  sanitizer: $line" | tee -a "$WORK/console.txt"
      done
    done
  else
    sansum+=("compute-sanitizer not found ($SANBIN): skipped")
  fi
fi

{
  echo
  echo "================ summary: simt16 (16-bit SIMT fallback GEMM, fp32 accumulation), sm_$ARCH ================"
  for l in "${summary[@]}"; do echo "$l"; done
  echo "---- timing (median of 7 single launches; GEMM: TFLOP/s; GEMV shapes: GB/s of compulsory traffic)"
  for l in "${tsum[@]}"; do echo "$l"; done
  echo "---- compute-sanitizer (--small; memcheck with --tight)"
  for l in "${sansum[@]}"; do echo "$l"; done
  echo "run time $(( $(date +%s) - t1 )) s (build $(( t1 - t0 )) s); overall status: $([ $status -eq 0 ] && echo OK || echo FAILED)"
  echo "all logs: simt16.tgz (build_*.log, run_*.log, sass_*.txt, san_*.log, console.txt, summary.txt)"
} | tee "$WORK/summary.txt"
cp "$WORK/summary.txt" "$OUTDIR/summary.txt"
tar -czf "$OUTDIR/simt16.tgz" -C "$WORK" .
rm -rf "$BIN" "$WORK"
exit $status
