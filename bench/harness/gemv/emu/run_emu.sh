#!/usr/bin/env bash
# Builds and runs the CPU emulation test (gemv_emu_test.cpp) for every config
# of ../gemv_configs.txt under ASan + UBSan. No GPU needed.
#   bash bench/harness/gemv/emu/run_emu.sh [config ...]     (default: all)
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CUDA_INC="$(cd "$HERE/../../../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
WORK="${EMU_WORK:-$(mktemp -d /tmp/gemv_emu.XXXXXX)}"
JOBS="${JOBS:-2}"
mapfile -t LINES < <(grep -v '^\s*#' "$HERE/../gemv_configs.txt" | grep -v '^\s*$')
want=" $* "
run_one() {
  local name="$1"; shift
  g++ -std=c++20 -O1 -g -pthread -fsanitize=address,undefined -fno-sanitize-recover=undefined \
      -DEMU_NAME="\"$name\"" -I "$CUDA_INC" "$@" "$HERE/gemv_emu_test.cpp" -o "$WORK/emu_$name" >"$WORK/build_$name.log" 2>&1 \
    || { echo "BUILD FAIL $name"; cat "$WORK/build_$name.log"; return 1; }
  timeout 600 "$WORK/emu_$name" >"$WORK/run_$name.log" 2>&1; local rc=$?
  tail -1 "$WORK/run_$name.log" | grep -q PASSED && [ $rc -eq 0 ] && echo "PASS $name" || { echo "FAIL $name (rc=$rc)"; cat "$WORK/run_$name.log"; return 1; }
}
fails=0
pids=()
for ln in "${LINES[@]}"; do
  name="${ln%% *}"; flags="${ln#* }"
  [ "$want" != "  " ] && [[ "$want" != *" $name "* ]] && continue
  run_one "$name" $flags &
  pids+=($!)
  if [ ${#pids[@]} -ge "$JOBS" ]; then wait "${pids[0]}" || fails=$((fails+1)); pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || fails=$((fails+1)); done
echo "emu: $fails failing config(s); logs in $WORK"
exit $((fails > 0))
