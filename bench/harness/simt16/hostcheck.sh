#!/usr/bin/env bash
# Offline syntax check of harness.cu's CUDA path (+ matmul16_simt.cu) with g++
# and the stub headers in stub/ (no CUDA toolkit needed): the <<<...>>> launch
# syntax is removed, CUDA keywords are empty macros. Catches host-side typos and
# type errors; says nothing about device code (nvrtc_simt16.py does that) and
# nothing about behaviour (emu/run_emu.sh runs the kernel on the CPU).
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CUDA_INC="$(cd "$HERE/../../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
TMP="$(mktemp -d)"
sed -E 's/<<<[^>]*>>>//' "$HERE/harness.cu" > "$TMP/h.cpp"
cp "$HERE/../../../optiml-build/src/families/matmul/cuda/matmul16_simt.cu" "$TMP/"
fails=0
while IFS='|' read -r name mode flags desc; do
  name=$(echo "$name" | xargs); [ -z "$name" ] && continue; case "$name" in \#*) continue;; esac
  # shellcheck disable=SC2086
  out=$(g++ -std=c++17 -fsyntax-only -Wall -Wextra -Wno-unused-function -Wno-unknown-pragmas -I "$HERE/stub" -I "$HERE" -I "$CUDA_INC" \
        -include "$HERE/stub/cuda_runtime.h" $flags -DHARNESS_NAME="\"$name\"" -x c++ "$TMP/h.cpp" 2>&1)
  n=$(echo "$out" | grep -c 'error')
  w=$(echo "$out" | grep -c 'warning')
  echo "== $name: $n errors, $w warnings"
  [ "$n" -ne 0 ] && fails=$((fails + 1))
  echo "$out" | grep -E "error|warning" | head -8
done < <(grep -v '^#' "$HERE/configs.txt")
rm -rf "$TMP"
echo "hostcheck: $fails configs with errors"
[ "$fails" -eq 0 ]
