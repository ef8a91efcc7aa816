#!/usr/bin/env bash
# Split-K prototype: build and run splitk_harness.cu for several configs.
#
#   OUT=$OUT bash bench/harness/proto/run_splitk.sh      # from the repository root
#
# Each config = one binary holding every split factor: splitk_inst.cu is
# compiled once per SK_TAG (0 = product template, 1 2 3 4 8 16 32 = the
# prototype with OPTIML_SPLIT_K = tag), all in parallel, then linked with
# splitk_harness.cu. Timing configs run correctness + timing; the others
# correctness only (--quick). HUGE configs also run the 64-bit offset cases.
# Env: OUT (logs/summary), ARCH (default 90), NVCC, CONFIGS, HUGE (default
#      "default tAtB"), SEED (default: time-based), JOBS (default nproc).
# Exit status: 0 if every config built and passed, 1 otherwise.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ARCH="${ARCH:-90}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
OUTDIR="${OUT:-}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/optiml_splitk.XXXXXX")"
LOGDIR="${OUTDIR:-$WORK}"
mkdir -p "$LOGDIR"
HUGE_LIST=" ${HUGE-default tAtB} "
JOBS="${JOBS:-$(nproc)}"
SEED="${SEED:-$(date +%s)}"
TAGS="0 1 2 3 4 8 16 32"

tile() { # BM BN BK TM TN
  local th=$(( ($1 / $4) * ($2 / $5) ))
  echo "-DOPTIML_BM=$1 -DOPTIML_BN=$2 -DOPTIML_BK=$3 -DOPTIML_TM=$4 -DOPTIML_TN=$5 -DOPTIML_THREADS=$th"
}
flags() { # TRANS_A TRANS_B ALPHA BETA BIAS ACT
  echo "-DOPTIML_TRANS_A=$1 -DOPTIML_TRANS_B=$2 -DOPTIML_HAS_ALPHA=$3 -DOPTIML_HAS_BETA=$4 -DOPTIML_HAS_BIAS=$5 -DOPTIML_ACT=$6"
}
declare -A CFG TIMED
ORDER=(default m64n64_t4 m64n128 bk16 tAtB tA tB epilogue epi_tAtB regstage)
CFG[default]="$(tile 128 128 8 8 8) $(flags 0 0 0 0 0 0)"; TIMED[default]=1
CFG[m64n64_t4]="$(tile 64 64 8 4 4) $(flags 0 0 0 0 0 0)"; TIMED[m64n64_t4]=1
CFG[m64n128]="$(tile 64 128 8 8 8) $(flags 0 0 0 0 0 0)"; TIMED[m64n128]=1
CFG[bk16]="$(tile 128 128 16 8 8) $(flags 0 0 0 0 0 0)"; TIMED[bk16]=1
CFG[tAtB]="$(tile 128 128 8 8 8) $(flags 1 1 0 0 0 0)"
CFG[tA]="$(tile 128 128 8 8 8) $(flags 1 0 0 0 0 0)"
CFG[tB]="$(tile 128 128 8 8 8) $(flags 0 1 0 0 0 0)"
CFG[epilogue]="$(tile 128 128 8 8 8) $(flags 0 0 1 1 1 2)"
CFG[epi_tAtB]="$(tile 64 64 8 4 4) $(flags 1 1 1 1 1 1)"
CFG[regstage]="$(tile 128 128 8 8 8) $(flags 1 0 1 1 1 1) -DOPTIML_CP_ASYNC=0"
[ -n "${CONFIGS:-}" ] && read -r -a ORDER <<< "$CONFIGS"

echo "nvcc: $NVCC ($("$NVCC" --version 2>/dev/null | tail -1)); seed $SEED; $JOBS build jobs"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null || true
t0=$(date +%s)
NVFLAGS="-O3 -std=c++17 -gencode=arch=compute_$ARCH,code=sm_$ARCH"
# all objects of all configs through one pool of $JOBS parallel jobs
jobfile="$WORK/jobs.txt"; : > "$jobfile"
for name in "${ORDER[@]}"; do
  mkdir -p "$WORK/$name"
  for tag in $TAGS; do
    echo "$NVCC $NVFLAGS -Xptxas -v ${CFG[$name]} -DSK_TAG=$tag -c $HERE/splitk_inst.cu -o $WORK/$name/inst_$tag.o > $LOGDIR/build_${name}_$tag.log 2>&1 || echo BUILD FAILED $name tag $tag" >> "$jobfile"
  done
  echo "$NVCC $NVFLAGS ${CFG[$name]} -DHARNESS_NAME='\"$name\"' -c $HERE/splitk_harness.cu -o $WORK/$name/main.o > $LOGDIR/build_${name}_main.log 2>&1 || echo BUILD FAILED $name main" >> "$jobfile"
done
echo "building $(wc -l < "$jobfile") objects for ${#ORDER[@]} configs (sm_$ARCH) ..."
running=0
while IFS= read -r job; do
  if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
  bash -c "$job" &
  running=$((running + 1))
done < "$jobfile"
wait
for name in "${ORDER[@]}"; do
  objs=("$WORK/$name/main.o")
  for tag in $TAGS; do objs+=("$WORK/$name/inst_$tag.o"); done
  "$NVCC" -gencode="arch=compute_$ARCH,code=sm_$ARCH" "${objs[@]}" -lcublas -o "$WORK/splitk_h_$name" \
    > "$LOGDIR/link_$name.log" 2>&1 || echo "LINK FAILED $name"
done
echo "build time: $(( $(date +%s) - t0 )) s"

status=0
summary=()
for name in "${ORDER[@]}"; do
  if [ ! -x "$WORK/splitk_h_$name" ]; then
    status=1; summary+=("$(printf '%-10s BUILD FAILED' "$name")"); tail -20 "$LOGDIR"/build_"$name"_*.log "$LOGDIR/link_$name.log"; continue
  fi
  args=(--seed "$SEED")
  if [ "${TIMED[$name]:-0}" = 1 ]; then args+=(--time); else args+=(--quick); fi
  case "$HUGE_LIST" in *" $name "*) args+=(--huge) ;; esac
  "$WORK/splitk_h_$name" "${args[@]}" > "$LOGDIR/run_$name.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  grep -E '^  FAIL|^CUDA|^cuBLAS' "$LOGDIR/run_$name.log" | head -20
  grep '^JSON ' "$LOGDIR/run_$name.log" | sed 's/^JSON //' >> "$LOGDIR/results.jsonl"
  nok=$(grep -c '^  ok ' "$LOGDIR/run_$name.log"); nfail=$(grep -c '^  FAIL ' "$LOGDIR/run_$name.log")
  worst=$(grep -E '^  (ok|FAIL) ' "$LOGDIR/run_$name.log" | sed -n 's/.*rel=\([0-9.e+-]*\).*/\1/p' | sort -g | tail -1)
  summary+=("$(printf '%-10s rc=%d checks ok=%s fail=%s worst_rel=%s %s' "$name" "$rc" "$nok" "$nfail" "${worst:-?}" \
     "$(grep -- '-- correctness' "$LOGDIR/run_$name.log" | tail -1 | sed 's/^-- //')")")
  echo "ran $name rc=$rc ($(( $(date +%s) - t0 )) s)"
done

for name in "${ORDER[@]}"; do
  for tag in $TAGS; do
    f="$LOGDIR/build_${name}_$tag.log"; [ -f "$f" ] || continue
    r=$(grep -E "Used|spill" "$f" | grep -B0 -E "Used" | sed 's/.*Used \([0-9]*\) registers.*/\1/' | tr '\n' '/')
    sp=$(grep -E "bytes spill" "$f" | grep -v " 0 bytes spill stores, 0 bytes spill loads" | wc -l)
    echo "ptxas $name tag$tag: regs(per kernel)=$r spilling_kernels=$sp"
  done
done > "$LOGDIR/ptxas.txt"

{
  echo
  grep -h -A8 -- '-- summary' "$LOGDIR"/run_*.log
  echo
  echo "================ split-K summary (sm_$ARCH) ================"
  for l in "${summary[@]}"; do echo "$l"; done
  echo "spilling kernels: $(awk '{s+=substr($NF, index($NF,"=")+1)} END {print s+0}' "$LOGDIR/ptxas.txt")"
  echo "total time: $(( $(date +%s) - t0 )) s; overall status: $([ $status -eq 0 ] && echo OK || echo FAILED)"
} | tee "$LOGDIR/summary.txt"
if [ -n "$OUTDIR" ]; then rm -rf "$WORK"; else echo "logs in $LOGDIR"; fi
exit $status
