#!/usr/bin/env bash
# Offline syntax check of harness.cu's CUDA path (+ matmul_mma_16.cu) with g++
# and the stub headers in stub/ (no CUDA toolkit needed): the <<<...>>> launch
# syntax is removed, CUDA keywords are empty macros, the inline PTX is only
# parsed. Catches host-side typos and type errors of the GPU build (which
# cannot be compiled here); says nothing about device code (nvrtc_mma16.py)
# or behaviour (run_emu.sh).
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CUDA_INC="$(cd "$HERE/../../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
TMP="$(mktemp -d)"
sed -E 's/<<<[^>]*>>>//' "$HERE/harness.cu" > "$TMP/h.cpp"
fails=0
while IFS='|' read -r name mode flags desc; do
  name=$(echo "$name" | xargs); [ -z "$name" ] && continue; case "$name" in \#*) continue;; esac
  # shellcheck disable=SC2086
  out=$(g++ -std=c++17 -fsyntax-only -Wall -Wextra -Wno-unused-function -Wno-unknown-pragmas -I "$HERE/stub" -I "$HERE" \
        -I "$HERE/../../../optiml-build/src/families/matmul/cuda" -I "$CUDA_INC" -include "$HERE/stub/cuda_runtime.h" $flags \
        -DHARNESS_NAME="\"$name\"" -x c++ "$TMP/h.cpp" 2>&1)
  n=$(echo "$out" | grep -c 'error')
  w=$(echo "$out" | grep -c 'warning')
  echo "== $name: $n errors, $w warnings"
  [ "$n" -ne 0 ] && fails=$((fails + 1))
  echo "$out" | grep -E "error|warning" | head -8
done < <(grep -v '^#' "$HERE/configs.txt")
rm -rf "$TMP"
echo "hostcheck: $fails configs with errors"
[ "$fails" -eq 0 ]
