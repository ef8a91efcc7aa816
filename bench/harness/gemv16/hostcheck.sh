#!/usr/bin/env bash
# Offline syntax check of harness.cu's CUDA path (+ gemv_16.cu) with g++ and
# the stub header stub/cuda_runtime.h (no CUDA toolkit needed): kernel
# launches <<<grid, block>>> are rewritten to a plain call after a use of the
# launch configuration (so the argument list is type-checked), CUDA keywords
# are empty macros, and the kernel's inline PTX is parsed as GNU asm (never
# run). Catches host-side typos and type errors; says nothing about device
# code (nvrtc_gemv16.py does that) or behaviour (run_emu.sh does that).
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TPL="$(cd "$HERE/../../../optiml-build/src/families/matmul/cuda" && pwd)"
CUDA_INC="$(cd "$HERE/../../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
TMP="$(mktemp -d)"
sed -E "s/optiml_gemv<<<([^>]*)>>>/(cuda_launch_cfg(\1), optiml_gemv)/" "$HERE/harness.cu" > "$TMP/h.cpp"
n_launch=$(grep -c "cuda_launch_cfg(" "$TMP/h.cpp")
fails=0
for cfg in "-DOPTIML_DTYPE=0" "-DOPTIML_DTYPE=1 -DOPTIML_TRANS_A=1 -DOPTIML_TRANS_B=1 -DOPTIML_HAS_ALPHA=1 -DOPTIML_HAS_BETA=1 -DOPTIML_HAS_BIAS=1 -DOPTIML_ACT=2"; do
  # shellcheck disable=SC2086
  out=$(g++ -std=c++17 -fsyntax-only -Wall -Wextra -Wno-unknown-pragmas -I "$HERE/stub" -I "$HERE" -I "$TPL" -I "$CUDA_INC" \
        -DOPTIML_GEMV_THREADS=512 -DOPTIML_GEMV_COL_TX=8 $cfg -x c++ "$TMP/h.cpp" 2>&1)
  n=$(echo "$out" | grep -c 'error'); w=$(echo "$out" | grep -c 'warning')
  echo "== $cfg: $n errors, $w warnings ($n_launch launches rewritten)"
  echo "$out" | grep -E "error|warning" | head -8
  [ "$n" -ne 0 ] || [ "$w" -ne 0 ] && fails=$((fails + 1))
done
rm -rf "$TMP"
echo "hostcheck: $fails failing"
[ "$fails" -eq 0 ]
