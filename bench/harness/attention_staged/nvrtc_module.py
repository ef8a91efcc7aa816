#!/usr/bin/env python3
"""Offline check (no GPU) of the form the staged attention would take in the product: ONE module, as a cache entry
holds one, with the 16-bit wgmma template instantiated twice (the scores as NT with fp32 output and alpha, the
values as NN) and the softmax kernel, compiled by NVRTC for sm_90a. The shared headers are included once at file
scope, each instance sits in a namespace of its own with every option set explicitly, and every macro an instance
defined is undefined before the next. Reports each entry's registers and spills; exit 1 on an error or a spill.
  python3 bench/harness/attention_staged/nvrtc_module.py [--dtype 0|1] [--source FILE]"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import nvrtc_check as nc  # noqa: E402  (the project's ctypes NVRTC driver)

ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
TEMPLATE = open(os.path.join(ROOT, "optiml-build/src/families/matmul/cuda/matmul_wgmma_16.cu")).read()
OPTIONS = ["OPTIML_KERNEL", "OPTIML_TRANS_A", "OPTIML_TRANS_B", "OPTIML_C_F32", "OPTIML_HAS_ALPHA", "OPTIML_HAS_BETA",
           "OPTIML_HAS_BIAS", "OPTIML_BN", "OPTIML_CONSUMERS", "OPTIML_STAGES", "OPTIML_GROUP_M", "OPTIML_SETMAXNREG",
           "OPTIML_PRODUCER_REGS", "OPTIML_CONSUMER_REGS", "OPTIML_EPI_VEC", "OPTIML_MN_DESC_SWAP"]
# Macros of the shared headers: defined once at file scope, never undefined.
HEADERS = ["optiml/defaults.cuh", "optiml/epilogue.cuh", "optiml/sm90.cuh"]


def instance(namespace, options):
    defined = sorted(set(re.findall(r"^\s*#\s*define\s+(\w+)", TEMPLATE, re.M)) - set(OPTIONS))
    lines = [f"#undef {o}" for o in OPTIONS] + [f"#define {k} {v}" for k, v in options.items()]
    lines += [f"namespace {namespace} {{", TEMPLATE, f"}}  // namespace {namespace}"]
    lines += [f"#undef {m}" for m in defined] + [f"#undef {o}" for o in OPTIONS]
    return "\n".join(lines)


def softmax():
    # The prototype's middle stage (softmax.cuh, device code only) behind extern "C" entries.
    entries = "\n".join(
        f'extern "C" __global__ void __launch_bounds__(256) optiml_attn_softmax{n}(const float* S, '
        f"optiml_attn_softmax::h16* P, long long rows, int L) {{ optiml_attn_softmax::softmax_row<{n}>(S, P, rows, L); }}"
        for n in (16, 32))
    return open(os.path.join(HERE, "softmax.cuh")).read() + "\n" + entries


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", type=int, default=0)
    ap.add_argument("--source", help="also write the module's source here")
    a = ap.parse_args()
    common = {"OPTIML_HAS_BETA": 0, "OPTIML_HAS_BIAS": 0, "OPTIML_BN": 256, "OPTIML_CONSUMERS": 2,
              "OPTIML_STAGES": 4, "OPTIML_GROUP_M": 8, "OPTIML_SETMAXNREG": 1, "OPTIML_PRODUCER_REGS": 40,
              "OPTIML_CONSUMER_REGS": 232, "OPTIML_EPI_VEC": 1, "OPTIML_MN_DESC_SWAP": 0}
    src = [f"#define OPTIML_DTYPE {a.dtype}"] + [f'#include "{h}"' for h in HEADERS]
    src.append(instance("optiml_stage_scores", {"OPTIML_KERNEL": "optiml_attn_scores", "OPTIML_TRANS_A": 0,
                                                "OPTIML_TRANS_B": 1, "OPTIML_C_F32": 1, "OPTIML_HAS_ALPHA": 1,
                                                **common}))
    src.append(instance("optiml_stage_values", {"OPTIML_KERNEL": "optiml_attn_values", "OPTIML_TRANS_A": 0,
                                                "OPTIML_TRANS_B": 0, "OPTIML_C_F32": 0, "OPTIML_HAS_ALPHA": 0,
                                                **common}))
    src.append(softmax())
    src = "\n".join(src) + "\n"
    if a.source:
        open(a.source, "w").write(src)
    nv = nc.Nvrtc(os.environ.get("NVRTC_LIB", nc.DEFAULT_LIB))
    opts = ["--std=c++17", "--ptxas-options=-v", nc.INCLUDE_OPT, "-arch=sm_90a", "-default-device"]
    rc, log, _ = nv.compile(src, "attention_staged_module.cu", opts, want_cubin=True)
    if rc != 0:
        print(log[-4000:])
        return 1
    bad = 0
    for k in ["optiml_attn_scores", "optiml_attn_values", "optiml_attn_softmax16", "optiml_attn_softmax32"]:
        info = nc.parse_ptxas(log, k)
        print(k, info)
        if not info or info.get("spill_st", 0) or info.get("spill_ld", 0) or info.get("stack", 0):
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
