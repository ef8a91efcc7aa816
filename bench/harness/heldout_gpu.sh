#!/usr/bin/env bash
# Issue 17's held-out shapes (bench/heldout: a crate of its own, whose cache starts with the untuned defaults).
# Stage here first, then run on the device from the repository root:
#
#   ../shared/gpu/stage build --manifest-path bench/heldout/Cargo.toml --target-dir target
#   ../shared/gpu/stage build -p optiml-build --bin cargo-optiml
#   (device) OUT=$OUT bash bench/harness/heldout_gpu.sh          # STEP=before (default) or STEP=after; TUNE=0
#
# before: the crate's binary with its untuned cache beside the best library call, torch.matmul in the same call,
#         then `cargo optiml tune --shape` at each row's shape into bench/heldout/.optiml, returned as
#         $OUT/heldout-cache.tgz (unpack it over the checkout, commit, stage the binary again);
# after:  the binary built from the tuned cache, and torch.matmul again, in one call.
set -uo pipefail
OUT=${OUT:-/tmp/optiml-heldout}
STEP=${STEP:-before}
d=$OUT/$STEP; mkdir -p "$d"
# Neither the per-user cache nor the repository's (pre-tuned at other shapes) may serve these kernels.
export OPTIML_PRETUNED=off OPTIML_USER_CACHE=off
start=$(date +%s)
timeout 240 bash target/gpu/run.sh optiml-heldout --out "$d" > "$d/run.log" 2>&1; echo "held-out run rc $? in $(( $(date +%s) - start )) s"
grep -E "^(irregular|batched|A|large|geometric)" "$d/run.log" | cut -c1-220
timeout 120 python3 bench/harness/matmul_torch.py --sweep "$d/heldout.json" > "$d/torch.log" 2>&1; echo "torch rc $?"
tail -8 "$d/torch.log"
[[ $STEP == before && ${TUNE:-1} == 1 ]] || exit 0   # TUNE=0: the untuned table only
# One tune per kernel, each at its rows' shapes (batch×m×n×k).
tune() {
    local kernel=$1 shapes=$2 s; s=$(date +%s)
    timeout "${TMO:-150}" bash target/gpu/run.sh cargo-optiml optiml tune --dir bench/heldout \
        --cache-dir bench/heldout/.optiml --arch sm_90 --kernel "$kernel" --shape "$shapes" \
        --budget "${BUDGET:-8}" --time "${TIME:-35}" --profile off --log-dir "$d/logs" > "$d/tune-$kernel.log" 2>&1
    echo "tune $kernel $shapes rc $? in $(( $(date +%s) - s )) s"
    grep -E "ms|winner|→|rror|kept" "$d/tune-$kernel.log" | tail -6 | cut -c1-220
    # After each tune, so that a call cut short still returns what it tuned.
    tar czf "$OUT/heldout-cache.tgz" bench/heldout/.optiml
    tar czf "$OUT/heldout-logs.tgz" -C "$OUT" "$STEP"
}
tune gemm 1x8205x5921x2949,1x512x512x262144
tune bmm 128x512x2048x1024
tune gemm_tn 1x2048x2048x8192
tune gemm_nt 1x8192x8192x8192
