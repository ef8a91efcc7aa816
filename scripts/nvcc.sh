#!/usr/bin/env bash
# Installs nvcc from the pinned PyPI wheels (nvcc, ptxas, fatbinary, nvlink; cicc; the runtime and crt headers;
# no CUDA toolkit needed) into .tools/nvcc/ of this checkout, once, and prints the NVCC value that points at it.
# Only `Builder::cuda_files` (a crate's own .cu files, through `cc`) and its tests use it: optiml's kernels need
# NVRTC alone (scripts/nvrtc.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc="$root/.tools/nvcc/nvidia/cu13/bin/nvcc"
if [[ ! -x $nvcc ]]; then
  # One install: pip --target does not merge a second install into the shared nvidia/ folder.
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$root/.tools/nvcc" \
    nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96 >&2
fi
echo "$nvcc"
