#!/usr/bin/env bash
# Build and run the optiml TF32 tensor-core matmul harness (tf32_harness.cu)
# for several kernel configurations, next to cuBLAS TF32.
#
#   bash bench/harness/run_tf32.sh            # from the repository root
#
# Env:
#   OUT      if set, build/run logs, tf32_<config>.json, results.jsonl and
#            summary.txt are written there
#   ARCH     SM number for -gencode (default 90 = H100/H200; 80 = A100)
#   NVCC     nvcc to use (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
#   QUICK=1  correctness only (no timing)
#   SANITIZE=memcheck|racecheck|synccheck|initcheck  run each config's small
#            correctness cases under compute-sanitizer instead (no timing)
#   CONFIGS  space-separated config names to run (default: the ORDER list below)
#   HUGE     configs that also run the 64-bit offset cases (several GB;
#            default "default tAtB"; HUGE=' ' for none)
#   Config names: old_* = the original fragment scheme (OPTIML_FRAG_LOAD=0
#            OPTIML_KLOOP=0 OPTIML_ZFILL=0); *_rn = OPTIML_TF32_ROUND=2;
#            see bench/harness/TF32_NOTES.md for what each one tests.
#   SEED     input seed passed to every binary (default: time-based per binary)
#   EXTRA_DEFS  extra nvcc flags for every config (e.g. -DOPTIML_MIN_BLOCKS=2)
#   EXTRA_CONFIGS="name1:flags1;name2:flags2"  ad-hoc configs, run after CONFIGS
#            (flags = the full -D list; use with CONFIGS=' ' to run only them)
# Exit status: 0 if every config built and passed correctness, 1 otherwise.
set -u

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CUDA_INC="$(cd "$HERE/../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
ARCH="${ARCH:-90}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
OUTDIR="${OUT:-}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/optiml_tf32.XXXXXX")"
LOGDIR="${OUTDIR:-$WORK}"
mkdir -p "$LOGDIR"
HUGE_LIST=" ${HUGE-default tAtB} "

tile() { # BM BN BK WM WN STAGES
  local th=$(( ($1 / $4) * ($2 / $5) * 32 ))
  echo "-DOPTIML_BM=$1 -DOPTIML_BN=$2 -DOPTIML_BK=$3 -DOPTIML_WM=$4 -DOPTIML_WN=$5 -DOPTIML_STAGES=$6 -DOPTIML_THREADS=$th"
}
flags() { # TRANS_A TRANS_B ALPHA BETA BIAS ACT
  echo "-DOPTIML_TRANS_A=$1 -DOPTIML_TRANS_B=$2 -DOPTIML_HAS_ALPHA=$3 -DOPTIML_HAS_BETA=$4 -DOPTIML_HAS_BIAS=$5 -DOPTIML_ACT=$6"
}
declare -A CFG
# The original scheme (64-bit LDS fragments with register shuffles, barrier at
# the top of each k-tile, predicated zero stores): reproducible via OLD.
OLD="-DOPTIML_FRAG_LOAD=0 -DOPTIML_KLOOP=0 -DOPTIML_ZFILL=0"
RN="-DOPTIML_TF32_ROUND=2"   # cvt.rn (one F2FP on sm_90) instead of cvt.rna (FSETP + IADD)
ORDER=(old_default old_tAtB old_epilogue
       default rn noround kloop0 kloop0_rn zfill0 s2 s4
       tA tB tAtB rn_tB epilogue epilogue_rn epi_tAtB_relu
       m128n256 m256n128 m128n256_rn m256n128_rn m128n256_k0 m128n256s4 m128n256_tAtB
       w64x32mb2 w64x32mb2_rn)
CFG[old_default]="$(tile 128 128 32 64 64 3) $(flags 0 0 0 0 0 0) $OLD"
CFG[old_tAtB]="$(tile 128 128 32 64 64 3) $(flags 1 1 0 0 0 0) $OLD"
CFG[old_epilogue]="$(tile 128 128 32 64 64 3) $(flags 0 0 1 1 1 2) $OLD"
# new defaults: ldmatrix / in-place fragments (P/Q role swap for A K-contiguous
# + B N-contiguous), barrier before the last k8 step, cp.async zero-fill
CFG[default]="$(tile 128 128 32 64 64 3) $(flags 0 0 0 0 0 0)"
CFG[rn]="$(tile 128 128 32 64 64 3) $(flags 0 0 0 0 0 0) $RN"
# raw fp32 bits into the MMA (hardware truncation): speed of skipping cvt;
# fails the strict rounding check by design
CFG[noround]="$(tile 128 128 32 64 64 3) $(flags 0 0 0 0 0 0) -DOPTIML_TF32_ROUND=0"
CFG[kloop0]="$(tile 128 128 32 64 64 3) $(flags 0 0 0 0 0 0) -DOPTIML_KLOOP=0"
CFG[kloop0_rn]="$(tile 128 128 32 64 64 3) $(flags 0 0 0 0 0 0) -DOPTIML_KLOOP=0 $RN"
CFG[zfill0]="$(tile 128 128 32 64 64 3) $(flags 0 0 0 0 0 0) -DOPTIML_ZFILL=0"
CFG[s2]="$(tile 128 128 32 64 64 2) $(flags 0 0 0 0 0 0)"
# 4 stages of 128x128x32 = 143 KB: 1 block (4 warps) per SM
CFG[s4]="$(tile 128 128 32 64 64 4) $(flags 0 0 0 0 0 0)"
CFG[tA]="$(tile 128 128 32 64 64 3) $(flags 1 0 0 0 0 0)"
CFG[tB]="$(tile 128 128 32 64 64 3) $(flags 0 1 0 0 0 0)"
CFG[tAtB]="$(tile 128 128 32 64 64 3) $(flags 1 1 0 0 0 0)"
CFG[rn_tB]="$(tile 128 128 32 64 64 3) $(flags 0 1 0 0 0 0) $RN"
CFG[epilogue]="$(tile 128 128 32 64 64 3) $(flags 0 0 1 1 1 2)"
CFG[epilogue_rn]="$(tile 128 128 32 64 64 3) $(flags 0 0 1 1 1 2) $RN"
CFG[epi_tAtB_relu]="$(tile 128 128 32 64 64 3) $(flags 1 1 1 1 1 1)"
# 8 warps of 64x64, one block per SM: a quarter less L2->SM traffic per FLOP
CFG[m128n256]="$(tile 128 256 32 64 64 3) $(flags 0 0 0 0 0 0)"
CFG[m256n128]="$(tile 256 128 32 64 64 3) $(flags 0 0 0 0 0 0)"
CFG[m128n256_rn]="$(tile 128 256 32 64 64 3) $(flags 0 0 0 0 0 0) $RN"
CFG[m256n128_rn]="$(tile 256 128 32 64 64 3) $(flags 0 0 0 0 0 0) $RN"
CFG[m128n256_k0]="$(tile 128 256 32 64 64 3) $(flags 0 0 0 0 0 0) -DOPTIML_KLOOP=0"
CFG[m128n256s4]="$(tile 128 256 32 64 64 4) $(flags 0 0 0 0 0 0)"
CFG[m128n256_tAtB]="$(tile 128 256 32 64 64 3) $(flags 1 1 0 0 0 0)"
# 8 warps of 64x32 capped at 128 registers: 2 blocks = 16 warps per SM (the
# OPTIML_KLOOP 1 loop spills under that cap)
CFG[w64x32mb2]="$(tile 128 128 32 64 32 3) $(flags 0 0 0 0 0 0) -DOPTIML_MIN_BLOCKS=2 -DOPTIML_KLOOP=0"
CFG[w64x32mb2_rn]="$(tile 128 128 32 64 32 3) $(flags 0 0 0 0 0 0) -DOPTIML_MIN_BLOCKS=2 -DOPTIML_KLOOP=0 $RN"
# not run by default (select with CONFIGS=...)
CFG[bk16s4]="$(tile 128 128 16 64 64 4) $(flags 0 0 0 0 0 0)"
CFG[w64x32]="$(tile 128 128 32 64 32 3) $(flags 0 0 0 0 0 0)"
CFG[m64n64]="$(tile 64 64 32 32 32 3) $(flags 0 0 0 0 0 0)"
CFG[nopipe]="$(tile 128 128 32 64 64 3) $(flags 0 0 0 0 0 0) -DOPTIML_FRAG_PIPE=0 -DOPTIML_KLOOP=0"
CFG[group8]="$(tile 128 128 32 64 64 3) $(flags 0 0 0 0 0 0) -DOPTIML_GROUP_M=8"
CFG[w64x32_mb2]="${CFG[w64x32mb2]}"
CFG[small]="$(tile 32 32 16 16 16 2) $(flags 0 0 0 0 0 0)"
CFG[s4_tB]="$(tile 128 128 32 64 64 4) $(flags 0 1 0 0 0 0)"
CFG[old_tA]="$(tile 128 128 32 64 64 3) $(flags 1 0 0 0 0 0) $OLD"
CFG[old_tB]="$(tile 128 128 32 64 64 3) $(flags 0 1 0 0 0 0) $OLD"
CFG[old_noround]="$(tile 128 128 32 64 64 3) $(flags 0 0 0 0 0 0) -DOPTIML_TF32_ROUND=0 $OLD"

if [ -n "${EXTRA_CONFIGS:-}" ]; then
  IFS=';' read -r -a _extra <<< "$EXTRA_CONFIGS"
  [ -z "${CONFIGS:-}" ] && CONFIGS="${ORDER[*]}"
  for e in "${_extra[@]}"; do
    CFG[${e%%:*}]="${e#*:}"
    CONFIGS="${CONFIGS} ${e%%:*}"
  done
fi
if [ -n "${CONFIGS:-}" ]; then
  read -r -a ORDER <<< "$CONFIGS"
fi
for name in "${ORDER[@]}"; do
  if [ -z "${CFG[$name]:-}" ]; then echo "unknown config '$name'"; exit 1; fi
done

echo "nvcc: $NVCC ($("$NVCC" --version 2>/dev/null | tail -1))"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null || true
echo "building ${#ORDER[@]} configs for sm_$ARCH in parallel ..."

t0=$(date +%s)
pids=()
for name in "${ORDER[@]}"; do
  # shellcheck disable=SC2086
  ( "$NVCC" -O3 -std=c++17 -gencode="arch=compute_$ARCH,code=sm_$ARCH" -Xptxas -v -I "$CUDA_INC" \
      ${CFG[$name]} ${EXTRA_DEFS:-} -DHARNESS_NAME="\"$name\"" \
      "$HERE/tf32_harness.cu" -lcublas -o "$WORK/h_$name" > "$LOGDIR/build_$name.log" 2>&1 \
    && echo "  built $name" || echo "  BUILD FAILED $name (see $LOGDIR/build_$name.log)" ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "build time: $(( $(date +%s) - t0 )) s"

status=0
summary=()
: > "$LOGDIR/results.jsonl"
for name in "${ORDER[@]}"; do
  if [ ! -x "$WORK/h_$name" ]; then
    status=1
    summary+=("$(printf '%-15s BUILD FAILED' "$name")")
    tail -20 "$LOGDIR/build_$name.log"
    continue
  fi
  args=()
  [ "${QUICK:-0}" = "1" ] && args+=(--quick)
  [ -n "${SEED:-}" ] && args+=(--seed "$SEED")
  case "$HUGE_LIST" in *" $name "*) [ -z "${SANITIZE:-}" ] && args+=(--huge) ;; esac
  if [ -n "${SANITIZE:-}" ]; then
    CS="$(command -v compute-sanitizer || echo "$(dirname "$NVCC")/compute-sanitizer")"
    "$CS" --tool "$SANITIZE" --error-exitcode 3 "$WORK/h_$name" --small "${args[@]}" 2>&1 | tee "$LOGDIR/run_$name.log"
  else
    "$WORK/h_$name" "${args[@]}" 2>&1 | tee "$LOGDIR/run_$name.log"
  fi
  rc=${PIPESTATUS[0]}
  [ "$rc" -ne 0 ] && status=1
  grep '^JSON ' "$LOGDIR/run_$name.log" | sed 's/^JSON //' >> "$LOGDIR/results.jsonl"
  corr=$(grep -q -- '-- correctness PASSED' "$LOGDIR/run_$name.log" && echo PASS || echo FAIL)
  nfail=$(grep -cE '^  FAIL |^   FAIL ' "$LOGDIR/run_$name.log")
  worst=$(grep -E '^  (ok|FAIL) ' "$LOGDIR/run_$name.log" | sed -n 's/.* rel=\([0-9.e+-]*\).*/\1/p' | sort -g | tail -1)
  line=$(printf '%-15s rc=%d corr=%s fails=%s worst_rel=%s' "$name" "$rc" "$corr" "$nfail" "${worst:-?}")
  while read -r tl; do
    b=$(echo "$tl" | sed -n 's/.*batch=\([0-9]*\).*/\1/p')
    o=$(echo "$tl" | sed -n 's/.*optiml *[0-9.]* ms *\([0-9.]*\) TFLOP.*/\1/p')
    c=$(echo "$tl" | sed -n 's/.*cublas_tf32 *[0-9.]* ms *\([0-9.]*\) TFLOP.*/\1/p')
    r=$(echo "$tl" | sed -n 's/.*ratio \([0-9.]*\).*/\1/p')
    line+=$(printf ' | b%s: %s TF (cublas %s, x%s)' "$b" "$o" "$c" "$r")
  done < <(grep 'TIMING' "$LOGDIR/run_$name.log")
  summary+=("$line")
done

{
  echo
  echo "================ summary (sm_$ARCH, 1024^3 TF32, TFLOP/s; target >= 0.8x cuBLAS TF32) ================"
  for l in "${summary[@]}"; do echo "$l"; done
  echo "total time: $(( $(date +%s) - t0 )) s; overall status: $([ $status -eq 0 ] && echo OK || echo FAILED)"
} | tee "$LOGDIR/summary.txt"

# register / spill report from ptxas (-Xptxas -v) for the optiml kernel
for name in "${ORDER[@]}"; do
  [ -f "$LOGDIR/build_$name.log" ] || continue
  r=$(grep -A3 "Compiling entry function 'optiml_matmul'" "$LOGDIR/build_$name.log" | grep -E "Used|spill" | tr -s ' ' | tr '\n' ' ')
  echo "ptxas $name: $r"
done | tee -a "$LOGDIR/summary.txt"

if [ -n "$OUTDIR" ]; then rm -rf "$WORK"; else rm -f "$WORK"/h_*; echo "logs in $LOGDIR"; fi
exit $status
