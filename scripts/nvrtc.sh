#!/usr/bin/env bash
# Installs the pinned NVRTC (the PyPI wheel nvidia-cuda-nvrtc==13.0.88, no CUDA toolkit needed) into
# .tools/nvrtc/ of this checkout, once, and prints the OPTIML_NVRTC value that points at it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib="$root/.tools/nvrtc/nvidia/cu13/lib/libnvrtc.so.13"
if [[ ! -f $lib ]]; then
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$root/.tools/nvrtc" \
    nvidia-cuda-nvrtc==13.0.88 >&2
fi
echo "$lib"
