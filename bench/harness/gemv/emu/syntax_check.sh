#!/usr/bin/env bash
# g++ -fsyntax-only of gemv_harness.cu (host + device code) against the stub
# headers in emu/stub, for every config of ../gemv_configs.txt. Kernel
# launches `k<<<g, b, s, st>>>(args)` are rewritten to `(emu_cfg(g, b, s, st), k)(args)`
# so the argument lists are still type-checked against the kernel signatures.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CUDA_INC="$(cd "$HERE/../../../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
TMP="$(mktemp -d /tmp/gemv_syntax.XXXXXX)"
TPL="$HERE/../../../../optiml-build/src/families/matmul/cuda"  # the product template the harness includes
sed -E -e 's/([A-Za-z_][A-Za-z0-9_]*)<<<(.*)>>>\(/(emu_cfg(\2), \1)(/' \
    -e 's#^\#include ".*/gemv_f32\.cu".*#\#include "gemv_f32.cu"#' "$HERE/../gemv_harness.cu" > "$TMP/gemv_harness_host.cpp"
cp "$TPL/gemv_f32.cu" "$HERE/../gemv_launch.h" "$TMP/"
fails=0
while read -r name flags; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  if g++ -std=c++20 -fsyntax-only -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas -I "$HERE/stub" -I "$HERE/.." -I "$CUDA_INC" $flags -DHARNESS_NAME="\"$name\"" \
       "$TMP/gemv_harness_host.cpp" > "$TMP/$name.log" 2>&1 && [ ! -s "$TMP/$name.log" ]; then
    echo "ok   $name"
  else
    echo "FAIL $name"; cat "$TMP/$name.log"; fails=$((fails+1))
  fi
done < "$HERE/../gemv_configs.txt"
grep -c 'emu_cfg' "$TMP/gemv_harness_host.cpp" | sed 's/^/launches rewritten: /'
echo "syntax check: $fails failing config(s)"
exit $((fails > 0))
