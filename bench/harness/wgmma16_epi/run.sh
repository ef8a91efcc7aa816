#!/usr/bin/env bash
# Build and run the wgmma16_epi prototype (harness.cu including wgmma16_epi.cu)
# for every config of configs.txt, next to cuBLAS.
#
#   OUT=$OUT bash bench/harness/wgmma16_epi/run.sh       # from the repo root
#
# Configs are built in parallel (nvcc -O3 -gencode=arch=compute_90a,code=sm_90a
# -lcublas -lcuda); each binary runs under `timeout`, one after the other.
# Per config: build_<name>.log (ptxas -v), run_<name>.log, sass_<name>.txt
# (cuobjdump -sass), HGMMA / UTMALDG / UTMASTG counts. At the end everything is
# packed into $OUT/wgmma16_epi.tgz and only $OUT/summary.txt stays loose (the
# device tool returns a limited number of files).
# Modes (configs.txt column 2): T all 6 shapes, t = b256x1024^3 + 4096^3,
# s = t + 1000^3, q = correctness only (+ split-K correctness).
# Env: OUT (default /tmp/wgmma16_epi_out), NVCC, CONFIGS="name ..." (subset),
#      QUICK=1 (correctness only), SEED, TMO (per-binary timeout, s, default 45),
#      EXTRA_DEFS (extra nvcc flags for every config).
# Exit status: 0 if every config built and passed, 1 otherwise.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
CUOBJDUMP="$(command -v cuobjdump || echo "$(dirname "$NVCC")/cuobjdump")"
OUTDIR="${OUT:-/tmp/wgmma16_epi_out}"
mkdir -p "$OUTDIR"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/wgmma16_epi_logs.XXXXXX")"   # logs, tarred into $OUTDIR at the end
BIN="$(mktemp -d "${TMPDIR:-/tmp}/wgmma16_epi_bin.XXXXXX")"
: > "$WORK/results.jsonl"
TMO="${TMO:-45}"

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
echo "building ${#ORDER[@]} configs for sm_90a in parallel ..."
} | tee "$WORK/console.txt"
t0=$(date +%s)
pids=()
for n in "${ORDER[@]}"; do
  # shellcheck disable=SC2086
  ( timeout 600 "$NVCC" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v ${FLAGS[$n]} ${EXTRA_DEFS:-} \
      -DHARNESS_NAME="\"$n\"" "$HERE/harness.cu" -lcublas -lcuda -o "$BIN/h_$n" > "$WORK/build_$n.log" 2>&1 \
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
  kern=$(grep -oE "Compiling entry function '[a-z0-9_]+'" "$WORK/build_$n.log" 2>/dev/null | grep -oE "optiml_matmul_(bf16|f16)" | head -1)
  info=$(grep -A4 "Compiling entry function '${kern:-optiml_matmul}" "$WORK/build_$n.log" 2>/dev/null)
  preg=$(echo "$info" | grep -oE "Used [0-9]+ registers" | grep -oE "[0-9]+" | head -1)
  pspill=$(echo "$info" | grep -oE "[0-9]+ bytes spill stores" | grep -oE "^[0-9]+" | head -1)
  pwarn=$(grep -cE "C75[0-9][0-9]" "$WORK/build_$n.log" 2>/dev/null)
  if [ ! -x "$BIN/h_$n" ]; then
    status=1; summary+=("$(printf '%-12s BUILD FAILED' "$n")"); tail -30 "$WORK/build_$n.log"; continue
  fi
  hg="?"; ldg="?"; stg="?"
  if command -v "$CUOBJDUMP" > /dev/null 2>&1 || [ -x "$CUOBJDUMP" ]; then
    "$CUOBJDUMP" -sass "$BIN/h_$n" > "$WORK/sass_$n.txt" 2>&1
    hg=$(grep -c "HGMMA" "$WORK/sass_$n.txt"); ldg=$(grep -c UTMALDG "$WORK/sass_$n.txt"); stg=$(grep -c UTMASTG "$WORK/sass_$n.txt")
    echo "  SASS: HGMMA x$hg ($(grep -oE 'HGMMA\.[0-9x]+\.F32[.A-Z0-9]*' "$WORK/sass_$n.txt" | sort -u | tr '\n' ' ')), UTMALDG x$ldg, UTMASTG x$stg, STL x$(grep -cE '\bSTL' "$WORK/sass_$n.txt")" | tee -a "$WORK/console.txt"
  fi
  args=()
  case "${MODE[$n]}" in q) args+=(--quick --sk-corr);; T) args+=(--full-shapes);; s) args+=(--small);; esac
  [ "${QUICK:-0}" = "1" ] && args=(--quick)
  [ -n "${SEED:-}" ] && args+=(--seed "$SEED")
  timeout -k 5 "$TMO" "$BIN/h_$n" "${args[@]}" > "$WORK/run_$n.log" 2>&1
  rc=$?
  grep -E "^==|^   device|FAIL|skip|TIMING|CUDA ERROR|cuBLAS error|^-- " "$WORK/run_$n.log" | head -70 | tee -a "$WORK/console.txt"
  { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && echo "  TIMEOUT after ${TMO}s (rc $rc)" && tail -5 "$WORK/run_$n.log"
  [ "$rc" -ne 0 ] && status=1
  corr=$(grep -q -- '-- correctness PASSED' "$WORK/run_$n.log" && echo PASS || echo FAIL)
  nfail=$(grep -cE '^  FAIL ' "$WORK/run_$n.log")
  worst=$(sed -n 's/.*worst rel \([0-9.e+-]*\).*/\1/p' "$WORK/run_$n.log" | head -1)
  summary+=("$(printf '%-12s %s rc=%-3d regs=%-3s spill=%-3s C75xx=%-2s HGMMA=%-3s UTMALDG=%-3s UTMASTG=%-3s corr=%s fails=%-2s worst_rel=%-9s' \
    "$n" "${MODE[$n]}" "$rc" "${preg:-?}" "${pspill:-?}" "${pwarn:-?}" "$hg" "$ldg" "$stg" "$corr" "$nfail" "${worst:-?}")")
  while read -r tl; do
    shp=$(echo "$tl" | awk '{print $3}')
    o=$(echo "$tl" | sed -n 's/.* ours *[0-9.]* ms *\([0-9.]*\) TFLOP.*/\1/p')
    c=$(echo "$tl" | sed -n 's/.*| cublas *[0-9.]* ms *\([0-9.]*\) TFLOP.*/\1/p')
    r=$(echo "$tl" | sed -n 's/.*ratio(cublas_ms\/ours_ms) \([0-9.]*\).*/\1/p')
    sp=$(echo "$tl" | sed -n 's/.*splits \([0-9]*\) c_tma \([0-9]*\).*/sk=\1 tmaC=\2/p')
    note=$(echo "$tl" | grep -q "NOTE cuBLAS" && echo "(cuBLAS: alpha/beta only)")
    tsum+=("$(printf '%-12s %-12s ours %7s TF  cuBLAS %7s TF  ratio %-6s %s %s' "$n" "$shp" "$o" "$c" "$r" "$sp" "$note")")
  done < <(grep '   TIMING .* ms' "$WORK/run_$n.log")
  grep '^JSON ' "$WORK/run_$n.log" | sed 's/^JSON //' >> "$WORK/results.jsonl"
done

{
  echo
  echo "================ summary: wgmma16_epi (overlapped TMA epilogue + split-K), sm_90a ================"
  for l in "${summary[@]}"; do echo "$l"; done
  echo "---- timing (TFLOP/s, ratio = cublas_ms / ours_ms, ABAB-alternated medians; epi: beta 0.5 both sides)"
  for l in "${tsum[@]}"; do echo "$l"; done
  echo "run time $(( $(date +%s) - t1 )) s (build $(( t1 - t0 )) s); overall status: $([ $status -eq 0 ] && echo OK || echo FAILED)"
  echo "all logs: wgmma16_epi.tgz (build_*.log, run_*.log, sass_*.txt, results.jsonl, console.txt, summary.txt)"
} | tee "$WORK/summary.txt"
cp "$WORK/summary.txt" "$OUTDIR/summary.txt"
tar -czf "$OUTDIR/wgmma16_epi.tgz" -C "$WORK" .
rm -rf "$BIN" "$WORK"
exit $status
