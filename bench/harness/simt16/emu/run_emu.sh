#!/usr/bin/env bash
# Offline CPU emulation of matmul16_simt.cu (no GPU, no CUDA toolkit): builds
# harness.cu with g++ -DHARNESS_EMU (emu/emu_shim.h: 256 host threads per
# block, pthread barrier = __syncthreads) under AddressSanitizer +
# UndefinedBehaviorSanitizer, for every dtype x layout x epilogue {none, full}
# plus relu / alpha+bias, and runs each twice: --small (256-element guards,
# NaN-filled gaps) and --small --tight (no guards: any read past a matrix end
# is an ASan heap-buffer-overflow). FULL=1 also runs the batch-70000 case for
# one config (slow in emulation: ~1.5 min).
#   bash bench/harness/simt16/emu/run_emu.sh
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CUDA_INC="$(cd "$HERE/../../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
BIN="$(mktemp -d)"
SAN="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined"
FULL_EPI="-DOPTIML_HAS_ALPHA=1 -DOPTIML_HAS_BETA=1 -DOPTIML_HAS_BIAS=1 -DOPTIML_ACT=2"
cfgs=()
for dt in 0 1; do for ta in 0 1; do for tb in 0 1; do for epi in none full; do
  f="-DOPTIML_DTYPE=$dt -DOPTIML_TRANS_A=$ta -DOPTIML_TRANS_B=$tb"
  [ "$epi" = full ] && f="$f $FULL_EPI"
  cfgs+=("$([ $dt = 0 ] && echo bf16 || echo fp16)_$([ $ta = 0 ] && echo n || echo t)$([ $tb = 0 ] && echo n || echo t)_$epi|$f")
done; done; done; done
cfgs+=("bf16_tn_relu_bias|-DOPTIML_DTYPE=0 -DOPTIML_TRANS_A=1 -DOPTIML_ACT=1 -DOPTIML_HAS_BIAS=1")
cfgs+=("fp16_nt_alpha|-DOPTIML_DTYPE=1 -DOPTIML_TRANS_B=1 -DOPTIML_HAS_ALPHA=1")
status=0
for c in "${cfgs[@]}"; do
  name="${c%%|*}"; flags="${c#*|}"
  # shellcheck disable=SC2086
  if ! g++ -std=c++17 $SAN -pthread -Wall -Wextra -Wno-unused-function -Wno-unknown-pragmas -DHARNESS_EMU \
       $flags -DHARNESS_NAME="\"$name\"" -I "$HERE" -I "$HERE/../../../optiml-build/src/families/matmul/cuda" -I "$CUDA_INC" -x c++ "$HERE/harness.cu" -o "$BIN/$name" > "$BIN/$name.build" 2>&1; then
    echo "$name: BUILD FAILED"; cat "$BIN/$name.build"; status=1; continue
  fi
  w=$(grep -c "warning" "$BIN/$name.build")
  for mode in "--small" "--small --tight"; do
    # shellcheck disable=SC2086
    timeout 600 "$BIN/$name" $mode > "$BIN/$name.log" 2>&1; rc=$?
    np=$(grep -c "^  PASS" "$BIN/$name.log"); nf=$(grep -c "^  FAIL" "$BIN/$name.log")
    san=$(grep -cE "ERROR: AddressSanitizer|runtime error" "$BIN/$name.log")
    printf '%-20s %-16s rc=%-3s pass=%-3s fail=%-3s sanitizer=%-2s warnings=%s %s\n' "$name" "$mode" "$rc" "$np" "$nf" "$san" "$w" \
      "$(grep -q -- '-- correctness PASSED' "$BIN/$name.log" && echo PASSED || echo FAILED)"
    if [ "$rc" -ne 0 ]; then status=1; grep -E "FAIL|ERROR|runtime error" "$BIN/$name.log" | head -5; fi
  done
done
if [ "${FULL:-0}" = 1 ]; then
  timeout 900 "$BIN/bf16_nn_full" > "$BIN/full.log" 2>&1; rc=$?
  grep -E "70000|^-- " "$BIN/full.log"; [ "$rc" -ne 0 ] && status=1
fi
rm -rf "$BIN"
echo "emu: $([ $status -eq 0 ] && echo ALL PASSED || echo FAILURES)"
exit $status
