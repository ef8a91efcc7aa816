#!/usr/bin/env bash
# The plain-f32 matrix products of KernelBench Level 1 and the main job, tuned at their shapes on a CUDA machine
# (every search evaluates the 3xTF32 schedules as roots beside the SIMT ones; the gate's exact bound decides),
# into the repository's `.optiml`, in one call. Stage here first:
#
#   ../shared/gpu/stage build -p optiml-build --bin cargo-optiml
#   (device) OUT=$OUT bash bench/harness/tune_fp32_gpu.sh      # JOBS="p1:1x4096x4096x4096 …" to choose, TMO a job's limit (s)
#
# $OUT gets each tune's log, the search logs, and `cache.tgz`: the entry folders the tunes rewrote, whole. Here,
# replace those folders with them (a tune may drop files an entry had), then check and commit:
#
#   tar tzf cache.tgz | cut -d/ -f1-3 | sort -u | xargs rm -rf && tar xzf cache.tgz
#   cargo optiml prepare --check
#
# Session 43 ran these jobs (all but `bmm` and `p3`) with the defaults below
# (`bench/results/2026-12-07-h100-tf32x3-tune.md`).
set -uo pipefail
OUT=${OUT:-/tmp/optiml-fp32-tune}
mkdir -p "$OUT/logs"
JOBS=${JOBS:-"p1:1x4096x4096x4096,1x2048x4096x8192,1x8205x5921x2949 p3:128x512x2048x1024 p10:16x1024x768x2048 \
p16:1x2048x4096x8192 p17:1x2048x4096x8192 p18:1x2048x4096x8192 bmm:16x1024x1024x1024,256x1024x1024x1024"}
marker=$(mktemp); sleep 1
status=0
for job in $JOBS; do
    kernel=${job%%:*}; shapes=${job#*:}
    start=$(date +%s)
    timeout "${TMO:-600}" bash target/gpu/run.sh cargo-optiml optiml tune --dir examples --arch sm_90 \
        --kernel "$kernel" --shape "$shapes" \
        --budget "${BUDGET:-10}" --time "${TIME:-45}" --profile off --log-dir "$OUT/logs" > "$OUT/tune-$kernel.log" 2>&1
    rc=$?; [[ $rc == 0 ]] || status=1
    echo "$kernel $shapes: rc $rc in $(( $(date +%s) - start )) s"
    grep -E "^$kernel sm_90 [0-9x]+: [0-9.]+ ms" "$OUT/tune-$kernel.log"
done
# The entry folders any tune rewrote (a tune replaces its entry's files; unpacking the folders whole keeps them
# consistent).
find .optiml/sm_* -newer "$marker" -type f | xargs -r -n1 dirname | sort -u > "$OUT/changed.txt"
tar czf "$OUT/cache.tgz" $(cat "$OUT/changed.txt")
echo "$(wc -l < "$OUT/changed.txt") entries changed: $OUT/cache.tgz"
exit $status
