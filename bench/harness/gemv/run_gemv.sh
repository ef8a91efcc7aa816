#!/usr/bin/env bash
# Build and run the optiml fp32 GEMV harness (gemv_harness.cu) for every
# config of gemv_configs.txt, next to cuBLAS and a same-byte-count copy kernel.
#
#   OUT=/tmp/gemv_out bash bench/harness/gemv/run_gemv.sh      # from the repo root
#
# Env:
#   OUT      output folder (default /tmp/gemv_out): build_<cfg>.log, run_<cfg>.log,
#            results.txt (RESULT lines), summary.txt
#   ARCH     SM number (default 90)
#   NVCC     nvcc to use (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
#   CONFIGS  space-separated config names (default: all of gemv_configs.txt)
#   QUICK=1  correctness only (no timing)
#   SANITIZE=1  also run the default config's --small cases under compute-sanitizer memcheck
#   TIMEOUT  per-binary timeout in seconds (default 120)
#   FULL     configs that run every correctness case (default: "default tAtB epi_gelu epi_tAtB_relu");
#            the others get --light (skips the two 8191x8193-sized host-reference cases)
# Exit status: 0 if every config built and passed correctness, 1 otherwise.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CUDA_INC="$(cd "$HERE/../../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
ARCH="${ARCH:-90}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
OUTDIR="${OUT:-/tmp/gemv_out}"
TIMEOUT="${TIMEOUT:-120}"
mkdir -p "$OUTDIR/bin"
declare -A FLAGS
ORDER=()
while read -r name flags; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  FLAGS[$name]="$flags"; ORDER+=("$name")
done < "$HERE/gemv_configs.txt"
if [ -n "${CONFIGS:-}" ]; then read -r -a ORDER <<< "$CONFIGS"; fi

echo "== nvcc: $NVCC ($("$NVCC" --version | tail -1)), sm_$ARCH, ${#ORDER[@]} configs, out $OUTDIR"
# ---- build all configs in parallel
pids=()
for c in "${ORDER[@]}"; do
  ( "$NVCC" -O3 -std=c++17 -arch=sm_$ARCH -lineinfo -Xptxas -v -I "$CUDA_INC" ${FLAGS[$c]} -DHARNESS_NAME="\"$c\"" \
      "$HERE/gemv_harness.cu" -lcublas -o "$OUTDIR/bin/gemv_$c" > "$OUTDIR/build_$c.log" 2>&1 ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
fail=0
for c in "${ORDER[@]}"; do
  if [ ! -x "$OUTDIR/bin/gemv_$c" ]; then echo "BUILD FAIL $c"; tail -30 "$OUTDIR/build_$c.log"; fail=1; fi
  regs=$(grep -A2 "optiml_gemv" "$OUTDIR/build_$c.log" | grep -o "Used [0-9]* registers" | head -1)
  spill=$(grep -A2 "optiml_gemv" "$OUTDIR/build_$c.log" | grep -o "[0-9]* bytes spill stores" | head -1)
  echo "   built $c: ${regs:-?}, ${spill:-?}"
done

# ---- run (sequentially: one GPU)
: > "$OUTDIR/results.txt"
FULL_LIST=" ${FULL:-default tAtB epi_gelu epi_tAtB_relu} "
for c in "${ORDER[@]}"; do
  [ -x "$OUTDIR/bin/gemv_$c" ] || continue
  args=(); [ "${QUICK:-0}" = 1 ] && args+=(--quick)
  [[ "$FULL_LIST" == *" $c "* ]] || args+=(--light)
  t0=$(date +%s.%N)
  timeout "$TIMEOUT" "$OUTDIR/bin/gemv_$c" "${args[@]}" > "$OUTDIR/run_$c.log" 2>&1; rc=$?
  t1=$(date +%s.%N)
  st=$(grep '^STATUS' "$OUTDIR/run_$c.log")
  printf "   ran %-16s rc=%d %.1fs %s\n" "$c" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$st"
  if [ $rc -ne 0 ]; then fail=1; grep -E "FAIL|error" "$OUTDIR/run_$c.log" | head -20; fi
  grep '^RESULT' "$OUTDIR/run_$c.log" >> "$OUTDIR/results.txt"
done
if [ "${SANITIZE:-0}" = 1 ] && [ -x "$OUTDIR/bin/gemv_default" ]; then
  SAN="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  timeout 300 "$SAN" --tool memcheck "$OUTDIR/bin/gemv_default" --small > "$OUTDIR/sanitize_default.log" 2>&1
  echo "   compute-sanitizer memcheck default --small: rc=$? ($(grep -c 'Invalid' "$OUTDIR/sanitize_default.log") invalid accesses)"
fi

# ---- summary: one row per (shape, config), shapes in harness order
{
  echo
  echo "== GEMV summary (GB/s counts 4*(L*K + K + L [+L if beta]) bytes per batch item; frac_copy = ours / float4 copy kernel"
  echo "   of the same byte count, same run; ratio = cublas_ms / ours_ms, > 1 means faster than cuBLAS)"
  printf "%-22s %-15s %4s %9s %8s %9s %9s %10s %7s %9s\n" shape config mode ms GB/s frac_copy frac_read cublas_ms ratio rel_cub
  awk '
    function val(k,   i, a) { for (i = 1; i <= NF; ++i) { split($i, a, "="); if (a[1] == k) return a[2] } return "" }
    {
      match($0, /shape="[^"]*"/); sh = substr($0, RSTART + 7, RLENGTH - 8)
      if (!(sh in seen)) { seen[sh] = 1; order[++n] = sh }
      cfg = val("config")
      line[sh] = line[sh] sprintf("%-22s %-15s %4s %9s %8s %9s %9s %10s %7s %9s\n", sh, cfg, val("mode"), val("ms"), val("gbps"),
                                  val("frac_copy"), val("frac_read"), val("cublas_ms"), val("ratio"), val("rel_vs_cublas"))
      if (val("frac_copy") + 0 > best[sh] + 0) { best[sh] = val("frac_copy"); bestc[sh] = cfg }
    }
    END {
      for (i = 1; i <= n; ++i) printf "%s", line[order[i]]
      print ""
      print "best config per shape (by frac_copy):"
      for (i = 1; i <= n; ++i) printf "  %-22s %-15s frac_copy %s\n", order[i], bestc[order[i]], best[order[i]]
    }' "$OUTDIR/results.txt"
  echo
  [ $fail -eq 0 ] && echo "ALL CONFIGS BUILT AND PASSED CORRECTNESS" || echo "SOME CONFIGS FAILED (see above / $OUTDIR)"
} | tee "$OUTDIR/summary.txt"
exit $fail
