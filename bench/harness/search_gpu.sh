#!/usr/bin/env bash
# The search's measurements on a CUDA machine, from executables staged in target/gpu (see bench/README.md):
#
#   ../shared/gpu/stage --fresh test -p optiml-build --test eval_gpu
#   ../shared/gpu/stage build -p optiml-build --bin cargo-optiml
#   ../shared/gpu/stage build -p optiml-examples --examples
#   (device) STEPS="faults tune compare" bash bench/harness/search_gpu.sh
#
# Steps (env STEPS, default all):
#   faults   the evaluator's fault-injection tests (optiml-build/tests/eval_gpu.rs)
#   tune     `cargo optiml tune` of the KERNELS (default bmm; comma separated) of the package in DIR (default
#            examples) at their configured shapes into $OUT/cache (a copy of .optiml/); DIR=tests/kernels
#            KERNELS=softmax_seeded tunes the kernel with a user's seed
#   compare  MCTS against random search and exhaustive enumeration (examples/search_compare.rs); SPECS, SEEDS,
#            EXHAUSTIVE (the specs enumerated; set it empty for none)
# Everything lands in $OUT (default /tmp/optiml-search).
set -uo pipefail
OUT=${OUT:-/tmp/optiml-search}
STEPS=${STEPS:-faults tune compare}
mkdir -p "$OUT"
run=target/gpu/run.sh
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
for step in $STEPS; do
  start=$(date +%s)
  case $step in
    faults)
      t=$(basename "$(ls target/gpu/bin/eval_gpu-* | head -1)")
      bash $run "$t" --include-ignored --nocapture --test-threads 1 >"$OUT/faults.log" 2>&1 || status=1
      tail -5 "$OUT/faults.log";;
    tune)
      rm -rf "$OUT/cache" && cp -r .optiml "$OUT/cache"
      bash $run cargo-optiml optiml tune --dir "${DIR:-examples}" --cache-dir "$OUT/cache" --kernel "${KERNELS:-bmm}" \
        --budget "${BUDGET:-48}" --log-dir "$OUT/logs" 2>&1 | tee "$OUT/tune.log" | grep -v '^\s*$' | tail -12
      [[ ${PIPESTATUS[0]} == 0 ]] || status=1
      # Hand the tuned cache back as one archive now (the device tool returns shallow trees only, and a later
      # step may run out of time).
      tar -C "$OUT" -czf "$OUT/tune-out.tgz" cache logs && rm -rf "$OUT/cache";;
    compare)
      # REFERENCES: "name=ms name=ms" (exhaustive bests of an earlier run); a step limit keeps the archive step alive.
      refs=(); for r in ${REFERENCES:-}; do refs+=(--reference "$r"); done
      timeout "${COMPARE_LIMIT:-1800}" bash $run search_compare --out "$OUT/compare" --seeds "${SEEDS:-5}" --budget 32 \
        ${SPECS:+--specs "$SPECS"} ${EXHAUSTIVE+--exhaustive "$EXHAUSTIVE"} "${refs[@]}" \
        >"$OUT/compare.log" 2>&1 || status=1
      tail -20 "$OUT/compare.log"
      tar -C "$OUT" -czf "$OUT/compare-logs.tgz" compare/logs && rm -rf "$OUT/compare/logs";;
    *) echo "unknown step $step"; status=1;;
  esac
  echo "== $step: $(( $(date +%s) - start )) s"
done
exit $status
