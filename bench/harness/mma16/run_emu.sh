#!/usr/bin/env bash
# Offline CPU emulation of matmul_mma_16.cu (no GPU, no CUDA toolkit):
# builds harness.cu with g++ -DHARNESS_EMU (emu_shim.h: OPTIML_M16_THREADS
# host threads per block; ldmatrix / mma.sync / cp.async emulated from the
# PTX ISA's definitions; alignment, bounds, race and bank-conflict checks)
# for every config of configs.txt plus the tile variants below, and runs each
# with cp.async performed lazily (at the retiring wait_group: catches reads
# before wait + barrier; race checker on) and eagerly (at issue: catches
# refills of a stage that is still being read, as wrong results).
#   bash bench/harness/mma16/run_emu.sh            # everything (~10 min on 2 cores)
#   SAN=1 bash ...      also AddressSanitizer + UBSan (slower)
#   TIGHT=1 bash ...    harness --tight: no guard elements, so a read past a
#                       matrix end leaves the allocation (use with SAN=1)
#   ONLY="bf16_nn t_bk16" bash ...                 a subset
#   JOBS=N (default nproc) parallel runs
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TPL="$(cd "$HERE/../../../optiml-build/src/families/matmul/cuda" && pwd)"
CUDA_INC="$(cd "$HERE/../../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
BIN="$(mktemp -d)"
OPT="-O2"
[ "${SAN:-0}" = 1 ] && OPT="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined"
cfgs=()
while IFS='|' read -r name mode flags desc; do
  name=$(echo "$name" | xargs); [ -z "$name" ] && continue; case "$name" in \#*) continue;; esac
  cfgs+=("$name|$flags")
done < "$HERE/configs.txt"
# tile variants (emulation only; the GPU run covers bk64 / 256 from configs.txt)
cfgs+=("t_bk16_tn|-DOPTIML_DTYPE=0 -DOPTIML_TRANS_A=1 -DOPTIML_M16_BK=16 -DOPTIML_M16_STAGES=4")
cfgs+=("t_bk16_nt|-DOPTIML_DTYPE=1 -DOPTIML_TRANS_B=1 -DOPTIML_M16_BK=16 -DOPTIML_M16_STAGES=3 -DOPTIML_HAS_BIAS=1 -DOPTIML_ACT=1")
cfgs+=("t_64x64_nn|-DOPTIML_DTYPE=0 -DOPTIML_M16_BM=64 -DOPTIML_M16_BN=64 -DOPTIML_M16_WM=32 -DOPTIML_M16_WN=32")
cfgs+=("t_64x64_tt|-DOPTIML_DTYPE=1 -DOPTIML_TRANS_A=1 -DOPTIML_TRANS_B=1 -DOPTIML_M16_BM=64 -DOPTIML_M16_BN=64 -DOPTIML_M16_WM=32 -DOPTIML_M16_WN=32 -DOPTIML_HAS_BETA=1")
cfgs+=("t_s2_g1_tn|-DOPTIML_DTYPE=0 -DOPTIML_TRANS_A=1 -DOPTIML_M16_STAGES=2 -DOPTIML_M16_GROUP_M=1")
cfgs+=("t_s5_g3_nt|-DOPTIML_DTYPE=0 -DOPTIML_TRANS_B=1 -DOPTIML_M16_STAGES=5 -DOPTIML_M16_GROUP_M=3")
cfgs+=("t_mt1_nn|-DOPTIML_DTYPE=0 -DOPTIML_M16_BM=64 -DOPTIML_M16_WM=16 -DOPTIML_HAS_ALPHA=1")
cfgs+=("t_32x64_tn|-DOPTIML_DTYPE=1 -DOPTIML_TRANS_A=1 -DOPTIML_M16_BM=32 -DOPTIML_M16_BN=64 -DOPTIML_M16_WM=32 -DOPTIML_M16_WN=32")
cfgs+=("t_256x128_tn|-DOPTIML_DTYPE=0 -DOPTIML_TRANS_A=1 -DOPTIML_M16_BM=256 -DOPTIML_M16_STAGES=3")
if [ -n "${ONLY:-}" ]; then
  sel=(); for c in "${cfgs[@]}"; do for o in $ONLY; do [ "${c%%|*}" = "$o" ] && sel+=("$c"); done; done; cfgs=("${sel[@]}")
fi
export BIN HERE TPL CUDA_INC OPT TIGHT
build_run() {  # $1 = "name|flags"
  local name="${1%%|*}" flags="${1#*|}" st=0
  # shellcheck disable=SC2086
  if ! g++ -std=c++17 $OPT -pthread -Wall -Wextra -Wno-unused-function -Wno-unknown-pragmas -DHARNESS_EMU \
       $flags -DHARNESS_NAME="\"$name\"" -I "$HERE" -I "$TPL" -I "$CUDA_INC" -x c++ "$HERE/harness.cu" -o "$BIN/$name" > "$BIN/$name.build" 2>&1; then
    echo "$name: BUILD FAILED"; cat "$BIN/$name.build"; return 1
  fi
  local w; w=$(grep -c "warning" "$BIN/$name.build")
  for cp in lazy eager; do
    # shellcheck disable=SC2046
    EMU_CP=$cp timeout 1200 "$BIN/$name" $([ "${TIGHT:-0}" = 1 ] && echo --tight) > "$BIN/$name.$cp.log" 2>&1; local rc=$?
    local np nf san emu
    np=$(grep -c "^  PASS" "$BIN/$name.$cp.log"); nf=$(grep -c "^  FAIL" "$BIN/$name.$cp.log")
    san=$(grep -cE "ERROR: AddressSanitizer|runtime error" "$BIN/$name.$cp.log")
    emu=$(grep -oE "races [0-9]+, uninitialised reads [0-9]+, faults [0-9]+; ldmatrix phases [0-9]+, wavefronts [0-9]+ \([0-9.]+" "$BIN/$name.$cp.log" | sed 's/ldmatrix phases [0-9]*, wavefronts [0-9]* (/wavefronts\/phase /')
    printf '%-14s %-5s rc=%-3s pass=%-3s fail=%-3s san=%-2s warn=%s %s | %s\n' "$name" "$cp" "$rc" "$np" "$nf" "$san" "$w" \
      "$(grep -q -- '-- correctness PASSED' "$BIN/$name.$cp.log" && echo PASSED || echo FAILED)" "$emu"
    if [ "$rc" -ne 0 ]; then st=1; grep -E "FAIL|ERROR|runtime error|EMU " "$BIN/$name.$cp.log" | head -8; fi
  done
  return $st
}
export -f build_run
status=0
printf '%s\n' "${cfgs[@]}" | xargs -P "${JOBS:-$(nproc)}" -I{} bash -c 'build_run "$@"' _ {} || status=1
rm -rf "$BIN"
echo "emu: $([ $status -eq 0 ] && echo ALL PASSED || echo FAILURES)"
exit $status
