#!/usr/bin/env bash
# Build and run the simt2 SGEMM prototype for every config of configs.txt,
# next to the product template (product_tu.cu) and cuBLAS, in one process each.
#
#   OUT=$OUT bash bench/harness/archive/simt2/run_simt2.sh        # from the repository root
#
# Env: OUT (default /tmp/simt2_out), NVCC, CONFIGS="name ..." (subset),
#      QUICK=1 (correctness only), SEED, ROUNDS (timing rounds, default 10),
#      TMO (per-binary timeout in s, default 40), BIG=1 (adds 8192^3).
# Per config: build log (ptxas -v), run log, SASS counts; then everything is
# packed into $OUT/simt2.tgz and only $OUT/summary.txt stays loose.
# Exit status: 0 if every config built and passed correctness, 1 otherwise.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
CUOBJDUMP="$(command -v cuobjdump || echo "$(dirname "$NVCC")/cuobjdump")"
OUTDIR="${OUT:-/tmp/simt2_out}"
mkdir -p "$OUTDIR"
WORK="$OUTDIR/simt2"
rm -rf "$WORK"; mkdir -p "$WORK"
BIN="$(mktemp -d "${TMPDIR:-/tmp}/simt2_bin.XXXXXX")"
TMO="${TMO:-40}"

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
} | tee "$WORK/env.txt"
echo "building ${#ORDER[@]} configs for sm_90 in parallel ..."
t0=$(date +%s)
pids=()
for n in "${ORDER[@]}"; do
  # shellcheck disable=SC2086
  ( timeout 900 "$NVCC" -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Xptxas -v ${FLAGS[$n]} \
      -DHARNESS_NAME="\"$n\"" "$HERE/simt2_harness.cu" "$HERE/product_tu.cu" -lcublas -o "$BIN/h_$n" \
      > "$WORK/build_$n.log" 2>&1 \
    && echo "  built $n" || echo "  BUILD FAILED $n (see build_$n.log)" ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "build time: $(( $(date +%s) - t0 )) s"

status=0
lines=()
tables=()
t1=$(date +%s)
for n in "${ORDER[@]}"; do
  echo
  echo "################ $n [${MODE[$n]}]: ${DESC[$n]}"
  info=$(grep -A4 "Compiling entry function 'optiml_matmul'" "$WORK/build_$n.log" 2>/dev/null)
  preg=$(echo "$info" | grep -oE "Used [0-9]+ registers" | grep -oE "[0-9]+" | head -1)
  pspill=$(echo "$info" | grep -oE "[0-9]+ bytes spill stores" | grep -oE "^[0-9]+" | head -1)
  if [ ! -x "$BIN/h_$n" ]; then
    status=1; lines+=("$(printf '%-15s BUILD FAILED' "$n")"); tail -30 "$WORK/build_$n.log"; continue
  fi
  sc="?"
  if [ -x "$CUOBJDUMP" ] || command -v "$CUOBJDUMP" > /dev/null 2>&1; then
    "$CUOBJDUMP" -sass -fun optiml_matmul "$BIN/h_$n" > "$WORK/sass_$n.txt" 2>&1 \
      || "$CUOBJDUMP" -sass "$BIN/h_$n" > "$WORK/sass_$n.txt" 2>&1
    c() { grep -cE "$1" "$WORK/sass_$n.txt"; }
    sc="FFMA=$(c '\bFFMA\b') LDS=$(c '\bLDS') LDGSTS=$(c 'LDGSTS') LDG=$(c '\bLDG\.') STL=$(c '\bSTL') LDL=$(c '\bLDL') BAR=$(c 'BAR\.SYNC')"
    echo "  SASS (optiml_matmul, both instantiations): $sc"
  fi
  args=()
  case "${MODE[$n]}" in q) args+=(--quick);; t) args+=(--shapes main);; esac
  [ "${QUICK:-0}" = "1" ] && args=(--quick)
  [ "${BIG:-0}" = "1" ] && args+=(--big)
  [ -n "${SEED:-}" ] && args+=(--seed "$SEED")
  [ -n "${ROUNDS:-}" ] && args+=(--rounds "$ROUNDS")
  ts=$(date +%s)
  timeout -k 5 "$TMO" "$BIN/h_$n" "${args[@]}" > "$WORK/run_$n.log" 2>&1
  rc=$?
  grep -E "^(==|   device|-- correctness|  FAIL|   TIMING)" "$WORK/run_$n.log"
  [ "$rc" -ne 0 ] && { status=1; echo "  rc=$rc"; tail -5 "$WORK/run_$n.log"; }
  corr=$(grep -q -- '-- correctness PASSED' "$WORK/run_$n.log" && echo PASS || echo FAIL)
  worst=$(grep -E '^  (ok|FAIL) +simt2' "$WORK/run_$n.log" | sed -n 's/.*rel=\([0-9.e+-]*\).*/\1/p' | sort -g | tail -1)
  l=$(printf '%-15s rc=%-3d %s worst_rel=%-9s regs=%-3s spill=%-2s %4ss' "$n" "$rc" "$corr" "${worst:-?}" "${preg:-?}" "${pspill:-?}" "$(( $(date +%s) - ts ))")
  while read -r tl; do
    sh=$(echo "$tl" | awk '{print $2}')
    r=$(echo "$tl" | sed -n 's/.*cublas\/simt2 \([0-9.]*\).*/\1/p')
    tf=$(echo "$tl" | sed -n 's/.*simt2 *[0-9.]* ms *\([0-9.]*\) TF.*/\1/p')
    l+=$(printf ' | %s %sTF x%s' "$sh" "$tf" "$r")
  done < <(grep 'TIMING' "$WORK/run_$n.log")
  lines+=("$l")
  grep 'TIMING' "$WORK/run_$n.log" | sed "s/^ *TIMING/$n/" >> "$WORK/timings.txt"
  grep '^JSON ' "$WORK/run_$n.log" | sed 's/^JSON //' >> "$WORK/results.jsonl"
done
echo "run time: $(( $(date +%s) - t1 )) s"

# pack everything; only summary.txt stays loose
{
  echo "================ simt2 summary (sm_90; TFLOP/s; x = cublas_ms / simt2_ms) ================"
  cat "$WORK/env.txt"
  for l in "${lines[@]}"; do echo "$l"; done
  echo "---- all timings (simt2 | product | cublas) ----"
  [ -f "$WORK/timings.txt" ] && cat "$WORK/timings.txt"
  echo "overall: $([ $status -eq 0 ] && echo OK || echo FAILED); logs in simt2.tgz"
} > "$OUTDIR/summary.txt"
cp "$OUTDIR/summary.txt" "$WORK/"
tar -czf "$OUTDIR/simt2.tgz" -C "$OUTDIR" simt2 && rm -rf "$WORK"
rm -rf "$BIN"
echo
cat "$OUTDIR/summary.txt"
exit $status
