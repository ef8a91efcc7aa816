#!/usr/bin/env bash
# Build and run the wgmma TF32 prototype harness (wgmma_harness.cu, which
# includes the product template matmul_wgmma_tf32.cu) for several configurations, next to cuBLAS TF32.
#
#   OUT=$OUT bash bench/harness/run_wgmma.sh     # from the repository root
#
# Each config is built (in parallel) and run independently: a failure in one
# does not stop the others; every binary runs under `timeout`. Per config:
# build log (ptxas -v), run log, SASS (cuobjdump --dump-sass) and the HGMMA
# count, JSON. A summary table is printed last.
# Default ORDER: the timed configs (m256 = round 1's kernel, then one per idea,
# then the other layouts against cuBLAS in the same layout), then q_* configs
# (probe + correctness only: every layout, the fused epilogue, small tiles,
# TMA). Predictions per config: WGMMA_NOTES.md, "Predictions for this run".
#
# Env:
#   OUT       if set, logs / sass / json / summary.txt are written there
#   NVCC      nvcc to use (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
#   CONFIGS   space-separated config names (default: the ORDER list below)
#   QUICK=1   probe + correctness only (no timing) for every config (q_* configs always)
#   SEED      input seed passed to every binary
#   TMO       per-binary timeout in seconds (default 60)
#   EXTRA_DEFS  extra nvcc flags for every config
# Exit status: 0 if every config built and passed, 1 otherwise.
set -u

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CUDA_INC="$(cd "$HERE/../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
CUOBJDUMP="$(command -v cuobjdump || echo "$(dirname "$NVCC")/cuobjdump")"
OUTDIR="${OUT:-}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/optiml_wgmma.XXXXXX")"
LOGDIR="${OUTDIR:-$WORK}"
mkdir -p "$LOGDIR"
TMO="${TMO:-90}"

declare -A CFG DESC QK
# QK[name]=1: probe + correctness only (no timing) for that config.
ORDER=(m256 m256noround m256rn m256tma ssT nt tn tt epi epi_old epi_erfc epi_nopf epi_tma epi_beta epi_bias_gelu
       q_dbg q_tma_dbg q_tt_tma q_nt_dbg q_tn_dbg q_tt_dbg q_ssT_dbg q_nt_epi q_tn_epi q_tt_epi q_ssT_tt q_ssT_tn q_m128_nt)
# ---- timed (1024^3, b16 and b256, next to cuBLAS TF32 in the same layout)
CFG[m256]="-DOPTIML_BM=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4"
DESC[m256]="NN, 256x128 tile (m64n256k8), 2 consumers, 4 stages, RS (B^T via LDS+cvt), setmaxnreg 40/232: the first run's m256"
CFG[m256noround]="-DOPTIML_BM=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_TF32_ROUND=0"
DESC[m256noround]="m256 without cvt.rna on the register operand"
CFG[m256rn]="-DOPTIML_QN=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_TF32_ROUND=2"
DESC[m256rn]="m256 rounding the register operand with cvt.rn (one F2FP) instead of cvt.rna (~3 ALU ops)"
CFG[m256tma]="-DOPTIML_QN=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_TMA=1"
DESC[m256tma]="m256 with the TMA producer (one thread, 1 + 4 cp.async.bulk.tensor per stage, expect_tx); cp.async fallback"
CFG[ssT]="-DOPTIML_QN=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_SS=1"
DESC[ssT]="NN, SS form: the producer transposes B into K-major smem (4-byte cp.async); no LDS/cvt in the consumers; 72/216"
CFG[nt]="-DOPTIML_QN=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_TRANS_B=1"
DESC[nt]="NT (B stored N x K): both operands K-major, SS form with 16-byte cp.async only (cuBLAS in the same layout)"
CFG[tn]="-DOPTIML_QN=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_TRANS_A=1"
DESC[tn]="TN (A stored K x M): RS, the producer transposes A (Q) with 4-byte cp.async"
CFG[tt]="-DOPTIML_QN=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_TRANS_A=1 -DOPTIML_TRANS_B=1"
DESC[tt]="TT: C = A B orientation (tile 128x256), Q = B K-major, P = A via registers (RS)"
CFG[epi]="-DOPTIML_QN=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_HAS_ALPHA=1 -DOPTIML_HAS_BETA=1 -DOPTIML_HAS_BIAS=1 -DOPTIML_ACT=2"
DESC[epi]="m256 + full epilogue (alpha, beta (reads C), bias, gelu A-S erfc) + L2 prefetch of C by the producer: round 3 default"
EPI="-DOPTIML_QN=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_HAS_ALPHA=1 -DOPTIML_HAS_BETA=1 -DOPTIML_HAS_BIAS=1 -DOPTIML_ACT=2"
CFG[epi_erfc]="$EPI -DOPTIML_GELU=0"; DESC[epi_erfc]="epi with libdevice erfcf gelu (round 2 math) + prefetch"
CFG[epi_nopf]="$EPI -DOPTIML_C_PREFETCH=0"; DESC[epi_nopf]="epi without the C prefetch (fast gelu only)"
CFG[epi_old]="$EPI -DOPTIML_GELU=0 -DOPTIML_C_PREFETCH=0"; DESC[epi_old]="round 2's epi exactly (73 TF)"
CFG[epi_tma]="$EPI -DOPTIML_TMA=1"; DESC[epi_tma]="epi (fast gelu) with the TMA producer, no C prefetch (it spills the 40-reg producer)"
CFG[epi_beta]="-DOPTIML_QN=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_HAS_BETA=1"; DESC[epi_beta]="beta only (+ prefetch)"
CFG[epi_bias_gelu]="-DOPTIML_QN=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_HAS_BIAS=1 -DOPTIML_ACT=2"; DESC[epi_bias_gelu]="bias + fast gelu, C never read"
# ---- correctness only: every layout, the epilogue, small tiles / 1 stage / 1 consumer
DBG="-DOPTIML_QN=64 -DOPTIML_CONSUMERS=1 -DOPTIML_STAGES=1 -DOPTIML_WAIT_DEPTH=0"
CFG[q_dbg]="$DBG"; QK[q_dbg]=1; DESC[q_dbg]="NN 64x64, 1 consumer, 1 stage, wait 0 (simplest pipeline)"
CFG[q_nt_dbg]="$DBG -DOPTIML_TRANS_B=1 -DOPTIML_HAS_BIAS=1"; QK[q_nt_dbg]=1; DESC[q_nt_dbg]="NT SS, 64x64, 1 stage, bias"
CFG[q_tn_dbg]="$DBG -DOPTIML_TRANS_A=1 -DOPTIML_ACT=1"; QK[q_tn_dbg]=1; DESC[q_tn_dbg]="TN RS, 64x64, 1 stage, relu"
CFG[q_tt_dbg]="$DBG -DOPTIML_TRANS_A=1 -DOPTIML_TRANS_B=1 -DOPTIML_HAS_ALPHA=1"; QK[q_tt_dbg]=1; DESC[q_tt_dbg]="TT RS, 64x64, 1 stage, alpha"
CFG[q_ssT_dbg]="$DBG -DOPTIML_SS=1 -DOPTIML_HAS_BETA=1"; QK[q_ssT_dbg]=1; DESC[q_ssT_dbg]="NN SS (B transposed by the producer), 64x64, 1 stage, beta"
CFG[q_nt_epi]="-DOPTIML_TRANS_B=1 -DOPTIML_HAS_ALPHA=1 -DOPTIML_HAS_BETA=1 -DOPTIML_HAS_BIAS=1 -DOPTIML_ACT=1"
QK[q_nt_epi]=1; DESC[q_nt_epi]="NT SS 256x128 + alpha, beta, bias, relu"
CFG[q_tn_epi]="-DOPTIML_TRANS_A=1 -DOPTIML_HAS_BETA=1 -DOPTIML_HAS_BIAS=1 -DOPTIML_ACT=2"
QK[q_tn_epi]=1; DESC[q_tn_epi]="TN RS 256x128 + beta, bias, gelu"
CFG[q_tt_epi]="-DOPTIML_TRANS_A=1 -DOPTIML_TRANS_B=1 -DOPTIML_HAS_ALPHA=1 -DOPTIML_HAS_BETA=1 -DOPTIML_HAS_BIAS=1 -DOPTIML_ACT=2"
QK[q_tt_epi]=1; DESC[q_tt_epi]="TT RS 128x256 + alpha, beta, bias (per column of the C = A B accumulator), gelu"
CFG[q_ssT_tt]="-DOPTIML_TRANS_A=1 -DOPTIML_TRANS_B=1 -DOPTIML_SS=1 -DOPTIML_HAS_BIAS=1 -DOPTIML_ACT=1"
QK[q_ssT_tt]=1; DESC[q_ssT_tt]="TT SS (A transposed by the producer, P rows permuted), bias, relu"
CFG[q_ssT_tn]="-DOPTIML_TRANS_A=1 -DOPTIML_SS=1 -DOPTIML_STAGES=3 -DOPTIML_HAS_ALPHA=1"
QK[q_ssT_tn]=1; DESC[q_ssT_tn]="TN SS: both operands transposed by the producer, 3 stages, alpha"
CFG[q_m128_nt]="-DOPTIML_QN=128 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=2 -DOPTIML_TRANS_B=1 -DOPTIML_HAS_BETA=1"
QK[q_m128_nt]=1; DESC[q_m128_nt]="NT SS 128x128, 2 stages (wait 1 at the minimum depth), beta"
CFG[q_tma_dbg]="$DBG -DOPTIML_TMA=1 -DOPTIML_HAS_BIAS=1"; QK[q_tma_dbg]=1; DESC[q_tma_dbg]="NN RS + TMA, 64x64, 1 stage, bias"
CFG[q_tt_tma]="-DOPTIML_TRANS_A=1 -DOPTIML_TRANS_B=1 -DOPTIML_TMA=1 -DOPTIML_HAS_ALPHA=1 -DOPTIML_HAS_BETA=1 -DOPTIML_ACT=1"
QK[q_tt_tma]=1; DESC[q_tt_tma]="TT RS + TMA (Q = B, P = A boxes), alpha, beta, relu"
# ---- not run by default (CONFIGS="..." to pick)
CFG[debug]="-DOPTIML_BM=64 -DOPTIML_CONSUMERS=1 -DOPTIML_STAGES=1 -DOPTIML_WAIT_DEPTH=0"
DESC[debug]="64x64 tile, 1 consumer WG, 1 stage, wait 0 (timed)"
CFG[small]="-DOPTIML_BM=64 -DOPTIML_CONSUMERS=1 -DOPTIML_STAGES=2 -DOPTIML_WAIT_DEPTH=1"
DESC[small]="64x64 tile, 1 consumer, 2 stages, wait 1"
CFG[m128]="-DOPTIML_BM=128 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4"
DESC[m128]="128x128 tile (m64n128k8), 2 consumers, 4 stages, no setmaxnreg"
CFG[m256s3]="-DOPTIML_BM=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=3"
DESC[m256s3]="m256 with 3 stages"
CFG[m256w0]="-DOPTIML_BM=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_WAIT_DEPTH=0"
DESC[m256w0]="m256 retiring each k-tile's wgmmas before the next (WG ping-pong only)"
CFG[ntw0]="-DOPTIML_QN=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_TRANS_B=1 -DOPTIML_WAIT_DEPTH=0"
DESC[ntw0]="nt with wait depth 0"
CFG[ssTnoreg]="-DOPTIML_QN=256 -DOPTIML_CONSUMERS=2 -DOPTIML_STAGES=4 -DOPTIML_SS=1 -DOPTIML_PRODUCER_REGS=40 -DOPTIML_CONSUMER_REGS=232"
DESC[ssTnoreg]="ssT with the RS register split 40/232"
CFG[m256c1]="-DOPTIML_BM=256 -DOPTIML_CONSUMERS=1 -DOPTIML_STAGES=4"
DESC[m256c1]="256x64 tile, 1 consumer"

if [ -n "${CONFIGS:-}" ]; then
  read -r -a ORDER <<< "$CONFIGS"
fi
for name in "${ORDER[@]}"; do
  if [ -z "${CFG[$name]:-}" ]; then echo "unknown config '$name'"; exit 1; fi
done

echo "nvcc: $NVCC ($("$NVCC" --version 2>/dev/null | tail -1))"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null || true
echo "building ${#ORDER[@]} configs for sm_90a in parallel ..."

t0=$(date +%s)
pids=()
for name in "${ORDER[@]}"; do
  # shellcheck disable=SC2086
  ( timeout 300 "$NVCC" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -I "$CUDA_INC" \
      ${CFG[$name]} ${EXTRA_DEFS:-} -DHARNESS_NAME="\"$name\"" \
      "$HERE/wgmma_harness.cu" -lcublas -o "$WORK/h_$name" > "$LOGDIR/build_$name.log" 2>&1 \
    && echo "  built $name" || echo "  BUILD FAILED $name (see $LOGDIR/build_$name.log)" ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "build time: $(( $(date +%s) - t0 )) s"

status=0
summary=()
: > "$LOGDIR/results.jsonl"
for name in "${ORDER[@]}"; do
  echo
  echo "################ $name: ${DESC[$name]}"
  # ptxas report for the optiml kernel
  preg=$(grep -A4 "Compiling entry function 'optiml_matmul'" "$LOGDIR/build_$name.log" 2>/dev/null \
         | grep -oE "Used [0-9]+ registers" | grep -oE "[0-9]+" | head -1)
  pspill=$(grep -A4 "Compiling entry function 'optiml_matmul'" "$LOGDIR/build_$name.log" 2>/dev/null \
         | grep -oE "[0-9]+ bytes spill stores" | grep -oE "^[0-9]+" | head -1)
  pwarn=$(grep -cE "C75[0-9][0-9]" "$LOGDIR/build_$name.log" 2>/dev/null)
  if [ ! -x "$WORK/h_$name" ]; then
    status=1
    summary+=("$(printf '%-12s BUILD FAILED' "$name")")
    tail -30 "$LOGDIR/build_$name.log"
    continue
  fi
  grep -E "C75[0-9][0-9]|optiml_matmul|Used|spill" "$LOGDIR/build_$name.log" | head -8
  hg="?"
  if [ -x "$CUOBJDUMP" ] || command -v cuobjdump > /dev/null; then
    "$CUOBJDUMP" --dump-sass "$WORK/h_$name" > "$LOGDIR/sass_$name.txt" 2>&1
    hg=$(grep -c HGMMA "$LOGDIR/sass_$name.txt")
    echo "  SASS: HGMMA x$hg, WARPGROUP.DEPBAR x$(grep -c 'WARPGROUP.DEPBAR' "$LOGDIR/sass_$name.txt"), STL x$(grep -cE '\bSTL' "$LOGDIR/sass_$name.txt")"
    grep -m4 HGMMA "$LOGDIR/sass_$name.txt" | sed 's/^/    /'
  fi
  args=()
  { [ "${QUICK:-0}" = "1" ] || [ -n "${QK[$name]:-}" ]; } && args+=(--quick)
  [ -n "${SEED:-}" ] && args+=(--seed "$SEED")
  timeout -k 5 "$TMO" "$WORK/h_$name" "${args[@]}" > "$LOGDIR/run_$name.log" 2>&1
  rc=$?
  # failing lines and timing lines to the console; full log in run_$name.log
  grep -E "^==|^   device|MISMATCH|FAIL|^-- |TIMING|CUDA ERROR|cuBLAS error" "$LOGDIR/run_$name.log" | head -60
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo "  TIMEOUT after ${TMO}s (rc $rc)" && tail -5 "$LOGDIR/run_$name.log"
  [ "$rc" -ne 0 ] && status=1
  grep '^JSON ' "$LOGDIR/run_$name.log" | sed 's/^JSON //' >> "$LOGDIR/results.jsonl"
  probe=$(grep -q -- '-- probe .* PASSED' "$LOGDIR/run_$name.log" && grep -q -- '-- probe_ss .* PASSED' "$LOGDIR/run_$name.log" && echo ok || echo FAIL)
  corr=$(grep -q -- '-- correctness PASSED' "$LOGDIR/run_$name.log" && echo PASS || echo FAIL)
  nfail=$(grep -cE '^  FAIL |^   FAIL ' "$LOGDIR/run_$name.log")
  worst=$(sed -n 's/.*worst rel \([0-9.e+-]*\), worst scaled \([0-9.e+-]*\).*/\1\/\2/p' "$LOGDIR/run_$name.log" | head -1)
  line=$(printf '%-12s rc=%-3d regs=%-3s spill=%-3s C75xx=%-2s HGMMA=%-3s probe=%-4s corr=%s fails=%-2s rel/sc=%-17s' \
         "$name" "$rc" "${preg:-?}" "${pspill:-?}" "${pwarn:-?}" "$hg" "$probe" "$corr" "$nfail" "${worst:-?}")
  while read -r tl; do
    b=$(echo "$tl" | sed -n 's/.*batch=\([0-9]*\).*/\1/p')
    o=$(echo "$tl" | sed -n 's/.*optiml *[0-9.]* ms *\([0-9.]*\) TFLOP.*/\1/p')
    gr=$(echo "$tl" | sed -n 's/.*| grid *[0-9.]* ms *\([0-9.]*\) TF.*/\1/p')
    c=$(echo "$tl" | sed -n 's/.*cublas_tf32 *[0-9.]* ms *\([0-9.]*\) TFLOP.*/\1/p')
    r=$(echo "$tl" | sed -n 's/.*ratio \([0-9.]*\).*/\1/p')
    line+=$(printf ' | b%s: %s TF (grid %s; cublas %s; x%s)' "$b" "$o" "$gr" "$c" "$r")
  done < <(grep 'TIMING' "$LOGDIR/run_$name.log")
  summary+=("$line")
done

{
  echo
  echo "================ summary (sm_90a wgmma TF32 prototype, 1024^3, TFLOP/s; target >= 0.95x cuBLAS TF32) ================"
  for l in "${summary[@]}"; do echo "$l"; done
  echo "total time: $(( $(date +%s) - t0 )) s; overall status: $([ $status -eq 0 ] && echo OK || echo FAILED)"
  echo "logs: $LOGDIR (build_*.log, run_*.log, sass_*.txt, results.jsonl)"
} | tee "$LOGDIR/summary.txt"

if [ -n "$OUTDIR" ]; then rm -rf "$WORK"; else rm -f "$WORK"/h_*; fi
exit $status
