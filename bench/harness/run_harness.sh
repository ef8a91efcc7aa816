#!/usr/bin/env bash
# Build and run the optiml SGEMM harness for several kernel configurations.
#
#   bash bench/harness/run_harness.sh            # from the repository root
#
# Env:
#   OUT      if set, logs, per-config JSON and summary are written there
#   ARCH     SM number for -gencode (default 90 = H100/H200)
#   NVCC     nvcc to use (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
#   QUICK=1  correctness only (no timing)
#   SANITIZE=memcheck|racecheck|synccheck|initcheck  run each config's small
#            correctness cases under compute-sanitizer instead (no timing)
#   CONFIGS  space-separated config names to run (default: the ORDER list below)
#   EXTRA_DEFS  extra nvcc flags for every config (e.g. -DOPTIML_MIN_BLOCKS=1)
#   EXTRA_CONFIGS="name1:flags1;name2:flags2"  ad-hoc configs, run after CONFIGS
#            (flags = the full -D list; use with CONFIGS=' ' to run only them)
# Exit status: 0 if every config built and passed correctness, 1 otherwise.
set -u

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CUDA_INC="$(cd "$HERE/../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
ARCH="${ARCH:-90}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
OUTDIR="${OUT:-}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/optiml_harness.XXXXXX")"
LOGDIR="${OUTDIR:-$WORK}"
mkdir -p "$LOGDIR"

# name | -D flags (all OPTIML_* macros, as the Rust side always defines them)
tile() { # BM BN BK TM TN
  local th=$(( ($1 / $4) * ($2 / $5) ))
  echo "-DOPTIML_BM=$1 -DOPTIML_BN=$2 -DOPTIML_BK=$3 -DOPTIML_TM=$4 -DOPTIML_TN=$5 -DOPTIML_THREADS=$th"
}
flags() { # TRANS_A TRANS_B ALPHA BETA BIAS ACT
  echo "-DOPTIML_TRANS_A=$1 -DOPTIML_TRANS_B=$2 -DOPTIML_HAS_ALPHA=$3 -DOPTIML_HAS_BETA=$4 -DOPTIML_HAS_BIAS=$5 -DOPTIML_ACT=$6"
}
declare -A CFG
ORDER=(default bk16 bk16_mb2 m128n64 m64n64_t4 m64n128 tAtB tA tB epilogue regstage)
CFG[default]="$(tile 128 128 8 8 8) $(flags 0 0 0 0 0 0)"
CFG[bk16]="$(tile 128 128 16 8 8) $(flags 0 0 0 0 0 0)"
CFG[m128n64]="$(tile 128 64 8 8 8) $(flags 0 0 0 0 0 0)"
CFG[m64n64_t4]="$(tile 64 64 8 4 4) $(flags 0 0 0 0 0 0)"
CFG[m64n128]="$(tile 64 128 8 8 8) $(flags 0 0 0 0 0 0)"
CFG[tAtB]="$(tile 128 128 8 8 8) $(flags 1 1 0 0 0 0)"
CFG[tA]="$(tile 128 128 8 8 8) $(flags 1 0 0 0 0 0)"
CFG[tB]="$(tile 128 128 8 8 8) $(flags 0 1 0 0 0 0)"
CFG[epilogue]="$(tile 128 128 8 8 8) $(flags 0 0 1 1 1 2)"
# register-staged fallback path (what sm < 80 compiles), forced on sm_90
CFG[regstage]="$(tile 128 128 8 8 8) $(flags 1 0 1 1 1 1) -DOPTIML_CP_ASYNC=0"
# BK=16 at 2 blocks/SM (128 registers): a bit faster than the default
# 1 block/SM for BK=16, but ptxas spills with several epilogue flag sets
CFG[bk16_mb2]="$(tile 128 128 16 8 8) $(flags 0 0 0 0 0 0) -DOPTIML_MIN_BLOCKS=2"
# not run by default (select with CONFIGS=...)
CFG[default_mb1]="$(tile 128 128 8 8 8) $(flags 0 0 0 0 0 0) -DOPTIML_MIN_BLOCKS=1"
CFG[relu_bias]="$(tile 128 128 8 8 8) $(flags 0 0 0 0 1 1)"

# EXTRA_CONFIGS="name1:flags1;name2:flags2" adds (and runs) ad-hoc configs
if [ -n "${EXTRA_CONFIGS:-}" ]; then
  IFS=';' read -r -a _extra <<< "$EXTRA_CONFIGS"
  [ -z "${CONFIGS:-}" ] && CONFIGS=""
  for e in "${_extra[@]}"; do
    CFG[${e%%:*}]="${e#*:}"
    CONFIGS="${CONFIGS} ${e%%:*}"
  done
fi
if [ -n "${CONFIGS:-}" ]; then
  read -r -a ORDER <<< "$CONFIGS"
fi

echo "nvcc: $NVCC ($("$NVCC" --version 2>/dev/null | tail -1))"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null || true
echo "building ${#ORDER[@]} configs for sm_$ARCH in parallel ..."

t0=$(date +%s)
pids=()
for name in "${ORDER[@]}"; do
  # shellcheck disable=SC2086
  ( "$NVCC" -O3 -std=c++17 -gencode="arch=compute_$ARCH,code=sm_$ARCH" -Xptxas -v -I "$CUDA_INC" \
      ${CFG[$name]} ${EXTRA_DEFS:-} -DHARNESS_NAME="\"$name\"" \
      "$HERE/matmul_harness.cu" -lcublas -o "$WORK/h_$name" > "$LOGDIR/build_$name.log" 2>&1 \
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
    summary+=("$(printf '%-10s BUILD FAILED' "$name")")
    tail -20 "$LOGDIR/build_$name.log"
    continue
  fi
  args=()
  [ "${QUICK:-0}" = "1" ] && args+=(--quick)
  if [ -n "${SANITIZE:-}" ]; then
    CS="$(command -v compute-sanitizer || echo "$(dirname "$NVCC")/compute-sanitizer")"
    "$CS" --tool "$SANITIZE" --error-exitcode 3 "$WORK/h_$name" --small 2>&1 | tee "$LOGDIR/run_$name.log"
  else
    "$WORK/h_$name" "${args[@]}" 2>&1 | tee "$LOGDIR/run_$name.log"
  fi
  rc=${PIPESTATUS[0]}
  [ "$rc" -ne 0 ] && status=1
  grep '^JSON ' "$LOGDIR/run_$name.log" | sed 's/^JSON //' >> "$LOGDIR/results.jsonl"
  corr=$(grep -q -- '-- correctness PASSED' "$LOGDIR/run_$name.log" && echo PASS || echo FAIL)
  worst=$(grep -E '^  (ok|FAIL) ' "$LOGDIR/run_$name.log" | sed -n 's/.*rel=\([0-9.e+-]*\).*/\1/p' | sort -g | tail -1)
  line=$(printf '%-10s rc=%d corr=%s worst_rel=%s' "$name" "$rc" "$corr" "${worst:-?}")
  while read -r tl; do
    b=$(echo "$tl" | sed -n 's/.*batch=\([0-9]*\).*/\1/p')
    o=$(echo "$tl" | sed -n 's/.*optiml *[0-9.]* ms *\([0-9.]*\) TFLOP.*/\1/p')
    c=$(echo "$tl" | sed -n 's/.*cublas *[0-9.]* ms *\([0-9.]*\) TFLOP.*/\1/p')
    r=$(echo "$tl" | sed -n 's/.*ratio \([0-9.]*\).*/\1/p')
    line+=$(printf ' | b%s: %s TF (cublas %s, x%s)' "$b" "$o" "$c" "$r")
  done < <(grep 'TIMING' "$LOGDIR/run_$name.log")
  summary+=("$line")
done

{
  echo
  echo "================ summary (sm_$ARCH, 1024^3 FP32, TFLOP/s) ================"
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
