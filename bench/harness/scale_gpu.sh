#!/usr/bin/env bash
# Issue 18's last measurement, on a host with several GPUs of one model: the same tuning jobs once on one GPU
# (`--devices 0`) and once on every GPU (`--devices all`), same seed, each from a copy of the committed cache;
# the ratio of wall times, and each job's winner and time side by side (the same winners within timing noise is
# the claim). Stage here first:
#
#   ../shared/gpu/stage build -p optiml-build --bin cargo-optiml
#   (device, a multi-GPU kind) OUT=$OUT bash bench/harness/scale_gpu.sh    # KERNELS=… BUDGET=… TIME=…
#
# $OUT gets both runs' logs, scale.json and scale.md. More jobs than GPUs keep every GPU busy: the default takes
# 16 kernels (one job each at its configured shapes).
set -uo pipefail
OUT=${OUT:-/tmp/optiml-scale}
mkdir -p "$OUT"
KERNELS=${KERNELS:-bmm,bmm_shared_b,gemm_nt,gemm_tn,gemm_bias_gelu,p1,p3,p10,p16,p17,p23,p24,p36,p40,p47,p89}
n=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
if (( n < 2 )); then
    echo "scale_gpu.sh: $n GPU on this host; the measurement needs several (bench/harness/shard_gpu.sh is the one-GPU check)"
    exit 2
fi
args=(--dir examples --arch sm_90 --kernel "$KERNELS" --budget "${BUDGET:-6}" --time "${TIME:-30}"
      --profile off --no-sanitize --seed 7 --no-llm)
declare -A wall
for run in one all; do
    devices=0; [[ $run == all ]] && devices=all
    rm -rf "$OUT/$run"; cp -r .optiml "$OUT/$run"
    start=$(date +%s%N)
    bash target/gpu/run.sh cargo-optiml optiml tune "${args[@]}" --devices "$devices" --cache-dir "$OUT/$run" \
        --log-dir "$OUT/$run-logs" > "$OUT/$run.log" 2>&1
    rc=$?
    wall[$run]=$(( ($(date +%s%N) - start) / 1000000 ))   # ms
    echo "--devices $devices: rc $rc in ${wall[$run]} ms"
    (( rc == 0 )) || { tail -20 "$OUT/$run.log"; exit 1; }
done
# Each job's summary line: "<kernel> sm_90 <shape>: <ms> ms (<x>× the default), path: …".
python3 - "$OUT" "$n" "${wall[one]}" "${wall[all]}" <<'PY'
import json, re, sys
out, n, one, alls = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) / 1e3, float(sys.argv[4]) / 1e3
line = re.compile(r"^(\S+) (sm_\d+a?) (\S+): ([0-9.]+) ms \(")
def jobs(run):
    found = {}
    for l in open(f"{out}/{run}.log", encoding="utf-8", errors="replace"):
        m = line.match(l)
        if m:
            found[(m[1], m[2], m[3])] = float(m[4])
    return found
a, b = jobs("one"), jobs("all")
rows = []
for key in sorted(set(a) | set(b)):
    t1, tn = a.get(key), b.get(key)
    rows.append({"kernel": key[0], "arch": key[1], "shape": key[2], "one_gpu_ms": t1, "all_gpus_ms": tn,
                 "ratio": (tn / t1) if t1 and tn else None})
within = [r for r in rows if r["ratio"] is not None and abs(r["ratio"] - 1) <= 0.05]
result = {"gpus": n, "jobs": len(rows), "one_gpu_wall_s": one, "all_gpus_wall_s": alls,
          "wall_ratio": alls / one, "ideal_ratio": 1 / n, "winners_within_5_percent": len(within), "rows": rows}
json.dump(result, open(f"{out}/scale.json", "w"), indent=1)
gpu = open(f"{out}/gpus.txt").readline().split(",")[1].strip()
with open(f"{out}/scale.md", "w") as f:
    f.write(f"# Tuning on {n} × {gpu}: one GPU against all of them\n\n")
    f.write(f"{len(rows)} jobs; wall time {one:.0f} s on one GPU, {alls:.0f} s on {n}: **{alls / one:.3f}** "
            f"of the one-GPU time (ideal {1 / n:.3f}). Winners' times within 5%: {len(within)} of {len(rows)}.\n\n")
    f.write("| kernel | shape | one GPU ms | all GPUs ms | ratio |\n|---|---|---:|---:|---:|\n")
    for r in rows:
        fmt = lambda v: "—" if v is None else f"{v:.4f}"
        f.write(f"| `{r['kernel']}` | {r['shape']} | {fmt(r['one_gpu_ms'])} | {fmt(r['all_gpus_ms'])} | "
                f"{fmt(r['ratio'])} |\n")
print(open(f"{out}/scale.md").read())
PY
