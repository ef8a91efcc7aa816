#!/usr/bin/env bash
# Builds and runs the staged attention prototype on the device, bf16, f16 and TF32, then PyTorch's SDPA (its
# math backend too for TF32, and the same three stages written in PyTorch) on the same shape in the same call:
#   OUT=$OUT bash bench/harness/attention_staged/run.sh [items L D RUNS]
# Writes $OUT/attention_staged.log and $OUT/torch.json.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
OUT=${OUT:-/tmp/attention_staged}; mkdir -p "$OUT"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
flags=(-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I "$root/optiml-build/src/cuda"
       -I "$root/optiml-build/src/families/matmul/cuda" -I "$here")
status=0
for dtype in 0 1 2; do   # bf16, f16, f32 with TF32 products
    bin=$OUT/attention_staged_$dtype
    tus=("$here/scores.cu" "$here/values.cu")
    [[ $dtype == 2 ]] && tus=("$here/scores_tf32.cu" "$here/values_tf32.cu")
    "$NVCC" "${flags[@]}" -DOPTIML_DTYPE=$dtype -Xptxas -v -o "$bin" "$here/attention_staged.cu" "${tus[@]}" \
        > "$OUT/build_$dtype.log" 2>&1 || { echo "build $dtype failed"; tail -20 "$OUT/build_$dtype.log"; status=1; continue; }
    grep -E "spill|registers" "$OUT/build_$dtype.log" | sort -u | head -8
    timeout 240 "$bin" "$@" 2>&1 | tee -a "$OUT/attention_staged.log" || status=1
done
timeout 240 python3 "$here/sdpa.py" ${1:+--items "$1"} ${2:+--len "$2"} ${3:+--dim "$3"} > "$OUT/torch.json" \
    2> "$OUT/torch.log" || status=1
cat "$OUT/torch.json"
exit $status
