#!/usr/bin/env bash
# The 3xTF32 harness in several builds (issue 17 §3), one device call: each variant is the harness compiled with
# its own template macros (all built in parallel), then run one after another. Logs land in
# $OUT/tf32x3-<variant>.log and .build.log (default OUT /tmp/tf32x3).
#
#   (device) OUT=$OUT bash bench/harness/tf32x3/run.sh [VARIANTS_FILE]
#
# A variants file holds one build per line: a name, then -D flags. The default set: the split-and-3K prototype
# with and without accumulator promotion (OPTIML_PROMOTE_KT), then the template's own split (OPTIML_TF32X3).
# QN 128 where the accumulator is promoted: acc and sum take 64 registers each (256 at QN 256).
set -uo pipefail
OUT=${OUT:-/tmp/tf32x3}
mkdir -p "$OUT"
dir=$(mktemp -d)
if [[ $# -gt 0 ]]; then
  VARIANTS=$(cat "$1")
else
  VARIANTS="
base
q128c1 -DOPTIML_QN=128 -DOPTIML_CONSUMERS=1
q128c1-p4 -DOPTIML_QN=128 -DOPTIML_CONSUMERS=1 -DOPTIML_PROMOTE_KT=4
q128c2-p4 -DOPTIML_QN=128 -DOPTIML_CONSUMERS=2 -DOPTIML_SETMAXNREG=1 -DOPTIML_PROMOTE_KT=4
x3-q128c2 -DOPTIML_TF32X3=1 -DOPTIML_QN=128 -DOPTIML_CONSUMERS=2 -DOPTIML_SETMAXNREG=1
x3-q128c2-p4 -DOPTIML_TF32X3=1 -DOPTIML_QN=128 -DOPTIML_CONSUMERS=2 -DOPTIML_SETMAXNREG=1 -DOPTIML_PROMOTE_KT=4
x3-q128c2-p8 -DOPTIML_TF32X3=1 -DOPTIML_QN=128 -DOPTIML_CONSUMERS=2 -DOPTIML_SETMAXNREG=1 -DOPTIML_PROMOTE_KT=8
x3-q128c1-p4 -DOPTIML_TF32X3=1 -DOPTIML_QN=128 -DOPTIML_CONSUMERS=1 -DOPTIML_PROMOTE_KT=4
x3-q128c2-s3-p4 -DOPTIML_TF32X3=1 -DOPTIML_QN=128 -DOPTIML_CONSUMERS=2 -DOPTIML_SETMAXNREG=1 -DOPTIML_STAGES=3 -DOPTIML_PROMOTE_KT=4
"
fi
while read -r name flags; do
  [[ -n $name ]] || continue
  # shellcheck disable=SC2086  # the flags are words
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I optiml-build/src/cuda $flags -Xptxas -v \
    bench/harness/tf32x3/harness.cu -lcublas -o "$dir/$name" >"$OUT/tf32x3-$name.build.log" 2>&1 &
done <<<"$VARIANTS"
wait
status=0
while read -r name flags; do
  [[ -n $name ]] || continue
  if [[ ! -x $dir/$name ]]; then
    echo "== $name: build failed"; tail -5 "$OUT/tf32x3-$name.build.log"; status=1; continue
  fi
  start=$(date +%s)
  timeout 120 "$dir/$name" >"$OUT/tf32x3-$name.log" 2>&1 || status=1
  regs=$(grep -A2 'optiml_matmul' "$OUT/tf32x3-$name.build.log" | grep -Eo 'Used [0-9]+ registers|[0-9]+ bytes spill stores' | tr '\n' ' ')
  echo "== $name ($(( $(date +%s) - start )) s; $regs): $flags"
  grep -E 'operands|3xTF32 ' "$OUT/tf32x3-$name.log" | sed 's/^/   /'
done <<<"$VARIANTS"
exit $status
