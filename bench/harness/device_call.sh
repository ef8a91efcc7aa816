#!/usr/bin/env bash
# One device call's steps, each under a limit, within the call's ten minutes; each step's output packed into
# $OUT/<step>.tgz right after it (a call returns at most 8 files, so whole folders travel as one archive each,
# and a call cut short still returns what ran). Bundles from bench/harness/bundle.sh (carry target/bundles):
#
#   OUT=$OUT BUNDLES="tests" TOTAL=585 bash bench/harness/device_call.sh gate:420 kb:150
#
# Steps (name:limit in seconds; a step gets at most what the call has left):
#   gate     bench/harness/gate_gpu.sh (TESTS: the tests to run; default the three never run on a GPU)
#   kb       bench/harness/kernelbench_gpu.sh (ONLY, RUNS)
#   heldout  bench/harness/heldout_gpu.sh with STEP=after (the rebuilt binary against the library and torch)
#   shard    bench/harness/shard_gpu.sh (issue 18's one-GPU check)
#   matmul   bench/harness/matmul_gpu.sh (the main job and both sweeps against the best library call)
#   tune     bench/harness/tune_fp32_gpu.sh (JOBS="kernel:shapes …"); returns the rewritten cache entries
set -uo pipefail
OUT=${OUT:-/tmp/out}; work=/tmp/device-call; mkdir -p "$OUT" "$work"
start=$(date +%s); TOTAL=${TOTAL:-585}
for b in ${BUNDLES:-tests}; do mkdir -p target/gpu && tar xzf "target/bundles/$b.tgz" -C target/gpu; done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
left() { echo $(( TOTAL - ($(date +%s) - start) )); }
step() {
    local name=$1 limit=$2 l s rc; l=$(left)
    if (( l < 20 )); then echo "== $name skipped: $l s left"; return; fi
    (( limit > l - 10 )) && limit=$(( l - 10 ))
    s=$(date +%s); mkdir -p "$work/$name"
    case $name in
        gate) TESTS="${TESTS:-three_tf32_split_k_fills_the_gpu_where_tiles_are_few rows_held_on_chip_load_the_next_row_during_the_last_pass staged_attention_passes_its_gate_beside_the_fused_kernel}" \
              OUT=$work/gate timeout "$limit" bash bench/harness/gate_gpu.sh ;;
        kb) OUT=$work/kb timeout "$limit" bash bench/harness/kernelbench_gpu.sh > "$work/kb/kb.log" 2>&1
            rc=$?; grep -E "^\| [0-9]|Geometric" "$work/kb/"*kernelbench-l1.md 2>/dev/null | cut -c1-200; (exit $rc) ;;
        heldout) OUT=$work/heldout STEP=after timeout "$limit" bash bench/harness/heldout_gpu.sh ;;
        shard) OUT=$work/shard timeout "$limit" bash bench/harness/shard_gpu.sh ;;
        matmul) OUT=$work/matmul timeout "$limit" bash bench/harness/matmul_gpu.sh ;;
        tune) OUT=$work/tune timeout "$limit" bash bench/harness/tune_fp32_gpu.sh ;;
        *) echo "unknown step $name"; false ;;
    esac
    rc=$?
    echo "== $name rc $rc in $(( $(date +%s) - s )) s"
    tar czf "$OUT/$name.tgz" -C "$work" "$name"
}
for st in "$@"; do step "${st%%:*}" "${st#*:}"; done
