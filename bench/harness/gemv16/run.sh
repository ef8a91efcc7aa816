#!/usr/bin/env bash
# GPU run of the 16-bit GEMV (gemv_16.cu, optiml_gemv) on an H200 (sm_90):
# builds harness.cu for every config of configs.txt in parallel
# (nvcc -O3 -std=c++17 -arch=sm_$ARCH -Xptxas -v, the launcher's
# OPTIML_GEMV_THREADS=512 / OPTIML_GEMV_COL_TX=8 unless a config sets them),
# runs each binary (correctness: 77 cases x 5-6 grids against float64, see
# harness.cu; timing of 8192x1x8192 and 1x8192x8192 with the config's TRANS
# flags for the *_plain and perf_* configs: median of 20 CUDA-event timings after 3
# warm-ups, L2 flushed by a 256 MiB memset before each, against a
# device-to-device copy of the same byte count), and prints a short summary.
#
#   OUT=$OUT bash bench/harness/gemv16/run.sh          # from the repo root
#
# Env: OUT (default /tmp/gemv16_out): build_*.log (ptxas -v), run_*.log,
#      summary.txt; NVCC; ARCH (default 90); CONFIGS="name ..." (subset);
#      QUICK=1 (correctness only); TMO (per binary, s, default 120);
#      SANITIZE=1 (also compute-sanitizer memcheck --no-timing on
#      bf16_nn_full and fp16_tt_full, ~1-2 min); SEED.
# Exit status: 0 if every config built, passed every check (including the
# checks of the timed outputs) and the sanitizer (if run) was clean; 1 otherwise.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TPL="$(cd "$HERE/../../../optiml-build/src/families/matmul/cuda" && pwd)"
CUDA_INC="$(cd "$HERE/../../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
SANBIN="$(command -v compute-sanitizer || echo "$(dirname "$NVCC")/compute-sanitizer")"
OUTDIR="${OUT:-/tmp/gemv16_out}"
ARCH="${ARCH:-90}"
TMO="${TMO:-120}"
LAUNCHER="-DOPTIML_GEMV_THREADS=512 -DOPTIML_GEMV_COL_TX=8"
mkdir -p "$OUTDIR"
rm -f "$OUTDIR"/build_*.log "$OUTDIR"/run_*.log "$OUTDIR"/san_*.log "$OUTDIR"/timing.txt  # no stale results
BIN="$(mktemp -d "${TMPDIR:-/tmp}/gemv16_bin.XXXXXX")"

declare -A FLAGS
ORDER=()
while IFS='|' read -r name flags; do
  case "$name" in \#*) continue;; esac
  name="${name//[[:space:]]/}"
  [ -z "$name" ] && continue
  FLAGS[$name]="$flags"; ORDER+=("$name")
done < "$HERE/configs.txt"
if [ -n "${CONFIGS:-}" ]; then read -r -a ORDER <<< "$CONFIGS"; fi
for n in "${ORDER[@]}"; do [ -z "${FLAGS[$n]:-}" ] && { echo "unknown config '$n'"; exit 1; }; done

{
  echo "nvcc: $("$NVCC" --version 2>/dev/null | tail -1)"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>/dev/null || true
} | tee "$OUTDIR/summary.txt"
t0=$(date +%s)
pids=()
for n in "${ORDER[@]}"; do
  f="${FLAGS[$n]}"; l=""
  for d in $LAUNCHER; do [[ " $f" == *" ${d%%=*}="* ]] || l="$l $d"; done
  # shellcheck disable=SC2086
  ( timeout 600 "$NVCC" -O3 -std=c++17 -arch=sm_$ARCH -Xptxas -v -I "$HERE" -I "$TPL" -I "$CUDA_INC" $l $f -DHARNESS_NAME="\"$n\"" \
      -x cu "$HERE/harness.cu" -o "$BIN/h_$n" > "$OUTDIR/build_$n.log" 2>&1 ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "built ${#ORDER[@]} configs in $(( $(date +%s) - t0 )) s" | tee -a "$OUTDIR/summary.txt"

status=0
printf '%-24s %-5s %-22s %s\n' config regs "ptxas spill/stack" result | tee -a "$OUTDIR/summary.txt"
for n in "${ORDER[@]}"; do
  info=$(grep -A3 "Compiling entry function 'optiml_gemv'" "$OUTDIR/build_$n.log" 2>/dev/null)
  regs=$(echo "$info" | grep -oE "Used [0-9]+ registers" | grep -oE "[0-9]+" | head -1)
  spill=$(echo "$info" | grep -oE "[0-9]+ bytes stack frame, [0-9]+ bytes spill stores, [0-9]+ bytes spill loads" | head -1 |
          sed -E 's/([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads/\2+\3 \/ \1/')
  if [ ! -x "$BIN/h_$n" ]; then
    printf '%-24s %-5s %-22s %s\n' "$n" "-" "-" "BUILD FAILED" | tee -a "$OUTDIR/summary.txt"
    tail -5 "$OUTDIR/build_$n.log"; status=1; continue
  fi
  args="--quiet"
  [ "${QUICK:-0}" = 1 ] && args="$args --no-timing"
  case "$n" in *_plain|perf_*) ;; *) args="$args --no-timing";; esac  # timing: plain + perf configs
  [ -n "${SEED:-}" ] && args="$args --seed $SEED"
  # shellcheck disable=SC2086
  timeout "$TMO" "$BIN/h_$n" $args > "$OUTDIR/run_$n.log" 2>&1; rc=$?
  res=$(grep -E "^-- .*failed$" "$OUTDIR/run_$n.log" | sed 's/^-- [^:]*: //')
  if [ $rc -eq 0 ]; then r="PASS ($res)"; else r="FAIL rc=$rc ($res)"; status=1; fi
  [ "$spill" != "0+0 / 0" ] && { r="$r; SPILL/STACK"; status=1; }
  printf '%-24s %-5s %-22s %s\n' "$n" "${regs:-?}" "${spill:-?}" "$r" | tee -a "$OUTDIR/summary.txt"
  [ $rc -ne 0 ] && grep -E "FAIL|ERROR" "$OUTDIR/run_$n.log" | head -5
done

if [ "${QUICK:-0}" != 1 ]; then
  {
    echo
    echo "timing: GB/s = GEMV compulsory bytes / median time; copy = cudaMemcpyAsync D2D of half those bytes (read + write the same total)"
    printf '%-14s %-12s %-4s %-4s %10s %10s %10s %8s\n' config shape type mode "us" "GB/s" "copy GB/s" "of copy"
    # TIMING name shape type mode M= N= K= <us> us <GB/s> GB/s | copy <us> us <GB/s> GB/s | <pct>% of copy | check ...
    grep -h "^TIMING" "$OUTDIR"/run_*.log | awk '{ printf "%-14s %-12s %-4s %-4s %10s %10s %10s %8s %s\n", $2, $3, $4, $5, $9, $11, $17, $20, ($25 == "ok" ? "" : "CHECK " $25) }'
  } | tee -a "$OUTDIR/summary.txt"
  grep -h "^TIMING" "$OUTDIR"/run_*.log > "$OUTDIR/timing.txt"
fi

if [ "${SANITIZE:-0}" = 1 ]; then
  for n in bf16_nn_full fp16_tt_full; do
    [ -x "$BIN/h_$n" ] || continue
    timeout 900 "$SANBIN" --tool memcheck --error-exitcode 3 "$BIN/h_$n" --quiet --no-timing > "$OUTDIR/san_$n.log" 2>&1; rc=$?
    echo "compute-sanitizer memcheck $n: rc=$rc $(grep -E 'ERROR SUMMARY' "$OUTDIR/san_$n.log" | tail -1)" | tee -a "$OUTDIR/summary.txt"
    [ $rc -ne 0 ] && status=1
  done
fi
rm -rf "$BIN"
echo "gemv16: $([ $status -eq 0 ] && echo ALL PASSED || echo FAILURES) (logs in $OUTDIR)" | tee -a "$OUTDIR/summary.txt"
exit $status
