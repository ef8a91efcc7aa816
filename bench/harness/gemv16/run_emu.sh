#!/usr/bin/env bash
# Offline CPU emulation of gemv_16.cu (no GPU, no CUDA toolkit): builds
# harness.cu with g++ -DHARNESS_EMU (emu_shim.h: one fiber per CUDA thread,
# real __syncthreads / warp-shuffle semantics, divergence and deadlock
# detection) under AddressSanitizer + UndefinedBehaviorSanitizer for every
# config of configs.txt, and runs each (76 cases x 5-6 grids, see harness.cu).
#   bash bench/harness/gemv16/run_emu.sh [config ...]      (default: all)
# Env: JOBS (parallel configs, default: nproc), KEEP=1 keeps the logs dir.
# About 50 s per config per core.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TPL="$(cd "$HERE/../../../optiml-build/src/families/matmul/cuda" && pwd)"
CUDA_INC="$(cd "$HERE/../../../optiml-build/src/cuda" && pwd)"  # optiml/epilogue.cuh, which the templates #include
WORK="$(mktemp -d "${TMPDIR:-/tmp}/gemv16_emu.XXXXXX")"
JOBS="${JOBS:-$(nproc)}"
SAN="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined"
LAUNCHER="-DOPTIML_GEMV_THREADS=512 -DOPTIML_GEMV_COL_TX=8"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
declare -A FLAGS
ORDER=()
while IFS='|' read -r name flags; do
  case "$name" in \#*) continue;; esac
  name="${name//[[:space:]]/}"
  [ -z "$name" ] && continue
  FLAGS[$name]="$flags"; ORDER+=("$name")
done < "$HERE/configs.txt"
[ $# -gt 0 ] && ORDER=("$@")
run_one() {
  local n="$1" f="${FLAGS[$1]:-}"
  [ -z "$f" ] && { echo "unknown config $n"; return 1; }
  # the launcher's constants unless the config sets its own
  local l="" d
  for d in $LAUNCHER; do [[ " $f" == *" ${d%%=*}="* ]] || l="$l $d"; done
  # shellcheck disable=SC2086
  if ! g++ -std=c++17 $SAN -Wall -Wextra -Wno-unknown-pragmas -DHARNESS_EMU $l $f -DHARNESS_NAME="\"$n\"" \
       -I "$HERE" -I "$TPL" -I "$CUDA_INC" -x c++ "$HERE/harness.cu" -o "$WORK/$n" > "$WORK/$n.build" 2>&1; then
    echo "$n: BUILD FAILED"; cat "$WORK/$n.build"; return 1
  fi
  local w; w=$(grep -c "warning" "$WORK/$n.build")
  local t0; t0=$(date +%s)
  timeout 1200 "$WORK/$n" --quiet > "$WORK/$n.log" 2>&1; local rc=$?
  local san; san=$(grep -cE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error|emu: " "$WORK/$n.log")
  printf '%-24s rc=%-3s sanitizer/emu errors=%-2s build warnings=%-2s %3ss  %s | %s | %s\n' "$n" "$rc" "$san" "$w" \
    "$(( $(date +%s) - t0 ))" "$(grep -E '^-- .*failed$' "$WORK/$n.log" | sed 's/^-- [^:]*: //')" \
    "$(grep -E '^-- .*worst' "$WORK/$n.log" | sed 's/^-- [^:]*: //; s/|out - ref| \/ bound/err\/bound/')" \
    "$(grep -E '^-- .*16-byte' "$WORK/$n.log" | sed 's/^-- [^:]*: //; s/ of the matrix bytes read by 16-byte loads over all cases (launcher grid)/ 16-byte loads/')"
  if [ "$rc" -ne 0 ] || [ "$san" -ne 0 ] || [ "$w" -ne 0 ]; then
    grep -E "FAIL|ERROR|runtime error|emu: |warning" "$WORK/$n.log" "$WORK/$n.build" | head -8; return 1
  fi
}
fails=0; pids=()
for n in "${ORDER[@]}"; do
  run_one "$n" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$JOBS" ]; then wait "${pids[0]}" || fails=$((fails+1)); pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || fails=$((fails+1)); done
[ "${KEEP:-0}" = 1 ] && echo "logs: $WORK" || rm -rf "$WORK"
echo "emu: ${#ORDER[@]} configs, $fails failing"
exit $((fails > 0))
