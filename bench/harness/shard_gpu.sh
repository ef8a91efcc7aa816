#!/usr/bin/env bash
# Issue 18 on one GPU, for the mechanism: `cargo optiml tune --shard 1/2` and `--shard 2/2`, then `cargo optiml
# merge`, and `--devices 0,0` (two workers sharing the GPU), each against one plain run of the same jobs with the
# same seed; each cache must hold the same entries, shapes and (within timing noise) winners. Last, one job on
# two workers, whose search times its candidates two at a time. Stage here first:
#
#   ../shared/gpu/stage build --release -p optiml-build --bin cargo-optiml
#   (device) OUT=$OUT bash bench/harness/shard_gpu.sh      # KERNELS=… to choose; SIDE=1 runs the shards side by side
#
# SIDE=1 runs both shards at once on the one GPU (two workers sharing it: the winners may then differ by noise,
# the entries and shapes may not). $OUT gets each run's log, the three caches' variant tables and the comparison.
set -uo pipefail
OUT=${OUT:-/tmp/optiml-shard}
mkdir -p "$OUT"
KERNELS=${KERNELS:-bmm,gemm_nt,gemm_tn,bmm_shared_b}
opt() { bash target/gpu/run.sh cargo-optiml optiml "$@"; }
args=(--dir examples --arch sm_90 --kernel "$KERNELS" --budget 4 --time 30 --profile off --no-sanitize --seed 7)
rm -rf "$OUT/whole" "$OUT/merged" "$OUT/pair" "$OUT/s1" "$OUT/s2"
cp -r .optiml "$OUT/whole"
cp -r .optiml "$OUT/merged"
cp -r .optiml "$OUT/pair"
start=$(date +%s)
opt tune "${args[@]}" --cache-dir "$OUT/whole" > "$OUT/whole.log" 2>&1; echo "unsharded rc $? in $(( $(date +%s) - start )) s"
start=$(date +%s)
if [[ ${SIDE:-0} == 1 ]]; then
    opt tune "${args[@]}" --shard 1/2 --cache-dir "$OUT/s1" > "$OUT/s1.log" 2>&1 &
    opt tune "${args[@]}" --shard 2/2 --cache-dir "$OUT/s2" > "$OUT/s2.log" 2>&1
    wait
else
    opt tune "${args[@]}" --shard 1/2 --cache-dir "$OUT/s1" > "$OUT/s1.log" 2>&1
    opt tune "${args[@]}" --shard 2/2 --cache-dir "$OUT/s2" > "$OUT/s2.log" 2>&1
fi
echo "shards done in $(( $(date +%s) - start )) s"
grep -h "^shard " "$OUT/s1.log" "$OUT/s2.log"
opt merge "$OUT/s1" "$OUT/s2" --dir examples --cache-dir "$OUT/merged" > "$OUT/merge.log" 2>&1; echo "merge rc $?"
tail -3 "$OUT/merge.log"
opt merge "$OUT/s1" "$OUT/s2" --dir examples --cache-dir "$OUT/merged" 2>&1 | tail -1   # again: nothing written
start=$(date +%s)
opt tune "${args[@]}" --devices 0,0 --cache-dir "$OUT/pair" > "$OUT/pair.log" 2>&1; echo "two workers rc $? in $(( $(date +%s) - start )) s"
# One job on two workers: its search times two candidates at a time (a batch per round), against the same job
# alone in the unsharded run.
one=(--dir examples --arch sm_90 --kernel bmm --budget 8 --time 30 --profile off --no-sanitize --seed 7)
rm -rf "$OUT/spread"; cp -r .optiml "$OUT/spread"
start=$(date +%s)
opt tune "${one[@]}" --devices 0,0 --cache-dir "$OUT/spread" > "$OUT/spread.log" 2>&1; echo "one job, two workers rc $? in $(( $(date +%s) - start )) s"
grep -E "^gpu 0\+0|bmm sm_90" "$OUT/spread.log" | tail -4
# Each entry's variant table (variant, tuned for, schedule), per key, for the entries either run changed.
table() {
    for r in "$1"/sm_90/*/report.md; do
        key=$(basename "$(dirname "$r")")
        cmp -s "$r" ".optiml/sm_90/$key/report.md" && continue
        awk -v k="$key" -F'|' '/^\| v[0-9]+ \|/ { print k, $3, "|", $4 }' "$r"
    done | sort
}
table "$OUT/whole" > "$OUT/whole.txt"
status=0
for run in merged pair; do
    table "$OUT/$run" > "$OUT/$run.txt"
    if diff -u "$OUT/whole.txt" "$OUT/$run.txt" > "$OUT/$run.diff"; then
        echo "$run: same entries, shapes and winners ($(wc -l < "$OUT/whole.txt") variants)"
    else
        shapes() { awk -F'|' '{ print $1 }' "$1" | sort; }
        if diff -q <(shapes "$OUT/whole.txt") <(shapes "$OUT/$run.txt") > /dev/null; then
            echo "$run: same entries and shapes; winners differ (timing noise?): $OUT/$run.diff"
        else
            echo "$run: DIFFERENT entries or shapes: $OUT/$run.diff"; status=1
        fi
    fi
done
exit $status
