#!/usr/bin/env bash
# Stages every executable the device calls use and packs them into two archives under target/bundles, each
# small enough to travel with the checkout (a call carries 64 MiB in all, the tracked tree included):
#   tests.tgz: the GPU test binaries (eval_gpu, tensor_gpu, the library's) and the `kernelbench` example;
#   tools.tgz: cargo-optiml, the held-out crate's binary, the matmul sweeps and the main job.
# Then, on the device, with carry ["target/bundles"]:
#   OUT=$OUT BUNDLES="tests" bash bench/harness/device_call.sh gate:420 kb:150
set -euo pipefail
root=$(git rev-parse --show-toplevel); cd "$root"
stage=${STAGE:-../shared/gpu/stage}
"$stage" --fresh test -p optiml-build --lib --test eval_gpu --test tensor_gpu
"$stage" build -p optiml-build --bin cargo-optiml
"$stage" build -p optiml-examples --example kernelbench --example matmul_sweep --example matmul16_sweep \
    --example batched_matmul
"$stage" build --manifest-path bench/heldout/Cargo.toml --target-dir target
mkdir -p target/bundles
cd target/gpu
common=(origin run.sh tests.txt)
tar czf ../bundles/tests.tgz "${common[@]}" bin/eval_gpu-* bin/tensor_gpu-* bin/optiml_build-* bin/kernelbench
tar czf ../bundles/tools.tgz "${common[@]}" bin/cargo-optiml bin/optiml-heldout bin/matmul_sweep \
    bin/matmul16_sweep bin/batched_matmul
cd "$root"
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
for b in target/bundles/*.tgz; do
    size=$(stat -c %s "$b")
    echo "$b: $(( size >> 20 )) MiB; with the tracked tree $(( (size + tree) >> 20 )) MiB of the 64 a call carries"
done
