#!/usr/bin/env bash
# The gate's own checks on a CUDA machine, one test at a time with a limit each, from executables staged in
# target/gpu (issue 19: every fault of the injection suite, the TF32 bound, memcheck, the GPU float64 references,
# and the sweeps that show no correct kernel is refused). Stage them here first:
#
#   ../shared/gpu/stage --fresh test -p optiml-build --lib --test eval_gpu --test tensor_gpu
#   (device) OUT=$OUT bash bench/harness/gate_gpu.sh            # or TESTS="name name" for some of them
#
# Each test's log lands in $OUT (default /tmp/optiml-gate) as <test>.log; the summary line of each is printed. The
# limits add up to about half an hour: split the list across device calls (10 minutes each) with TESTS.
set -uo pipefail
OUT=${OUT:-/tmp/optiml-gate}
mkdir -p "$OUT"
bin() { basename "$(ls target/gpu/bin/"$1"-* | head -1)"; }
E=$(bin eval_gpu); T=$(bin tensor_gpu); L=$(bin optiml_build)
# test, binary, limit in seconds (sizes measured on an H100 or H200).
ALL="
families::tensor::reference::tests::the_gpu_reference_is_the_host_interpreter $L 120
elementwise_phrases_pass_the_gate_and_a_half_written_output_does_not $T 120
a_seed_passes_the_gate_and_a_broken_seed_does_not $T 120
a_sixteen_bit_seed_passes_the_gate_and_a_mistyped_one_does_not $T 90
a_tf32_spec_rejects_a_kernel_that_rounds_an_operand_to_bf16 $E 90
the_sanitizer_clears_a_correct_kernel_and_finds_a_read_past_an_input $E 120
every_kind_of_broken_candidate_is_rejected_and_the_worker_recovers $E 180
split_k_and_shared_operands_pass_the_gate_in_every_layout_and_split_k_fills_the_gpu $E 120
tf32_kernels_pass_the_tf32_gate_in_every_layout_and_beat_exact_fp32 $E 120
sixteen_bit_kernels_pass_their_gate_in_every_layout_with_the_simt_fallback $E 180
three_tf32_products_pass_the_exact_bound_in_every_layout_and_beat_simt $E 240
three_tf32_split_k_fills_the_gpu_where_tiles_are_few $E 120
rows_held_on_chip_load_the_next_row_during_the_last_pass $T 300
every_target_program_passes_the_gate_across_its_schedule_space $T 400
attention_passes_its_gate_across_its_schedule_space $T 300
staged_attention_passes_its_gate_beside_the_fused_kernel $T 300
"
status=0
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
while read -r name binary limit; do
  [[ -n $name ]] || continue
  if [[ -n ${TESTS:-} ]] && [[ " $TESTS " != *" $name "* ]]; then continue; fi
  log="$OUT/${name##*::}.log"
  start=$(date +%s)
  timeout "$limit" bash target/gpu/run.sh "$binary" --include-ignored --exact "$name" --nocapture --test-threads 1 \
    >"$log" 2>&1
  rc=$?
  [[ $rc == 0 ]] || status=1
  echo "== $name: rc $rc, $(( $(date +%s) - start )) s; $(grep -E '^test result' "$log" | tail -1)"
  grep -E 'panicked|Rejected\(' "$log" | head -3
done <<<"$ALL"
exit $status
