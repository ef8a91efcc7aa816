#!/usr/bin/env bash
# Offline syntax check of simt2_harness.cu (+ simt2.cu) and product_tu.cu with
# g++ and the stub headers in stub/ (no CUDA toolkit needed): the <<<...>>>
# launch syntax and inline PTX are removed, CUDA keywords are empty macros.
# Host-side typos and type errors only; nvrtc_simt2.py checks the device code.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TMP="$(mktemp -d)"
for f in simt2_harness.cu simt2.cu product_tu.cu; do
  sed -E 's/<<<[^>]*>>>//; s/asm volatile\((.*)\);/(void)0;/' "$HERE/$f" > "$TMP/$f"
done
sed -E 's/asm volatile\((.*)\);/(void)0;/' "$HERE/../../../../optiml-build/src/families/matmul/cuda/matmul_f32.cu" > "$TMP/matmul_f32.cu"
sed -i 's#../../../../optiml-build/src/families/matmul/cuda/matmul_f32.cu#matmul_f32.cu#' "$TMP/product_tu.cu"
fails=0
while IFS='|' read -r name mode flags desc; do
  name=$(echo "$name" | xargs); [ -z "$name" ] && continue; case "$name" in \#*) continue;; esac
  for f in simt2_harness.cu product_tu.cu; do
    # shellcheck disable=SC2086
    out=$(g++ -std=c++17 -fsyntax-only -Wall -Wno-unused-function -Wno-unknown-pragmas -Wno-unused-variable \
          -I "$HERE/stub" -include "$HERE/stub/cuda_runtime.h" $flags -DHARNESS_NAME="\"$name\"" -x c++ "$TMP/$f" 2>&1)
    n=$(echo "$out" | grep -c 'error')
    w=$(echo "$out" | grep -c 'warning')
    echo "== $name $f: $n errors, $w warnings"
    [ "$n" -ne 0 ] && fails=$((fails + 1))
    echo "$out" | grep -E "error|warning" | head -8
  done
done < <(grep -v '^#' "$HERE/configs.txt")
rm -rf "$TMP"
echo "hostcheck: $fails files with errors"
[ "$fails" -eq 0 ]
