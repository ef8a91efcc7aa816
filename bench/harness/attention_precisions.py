#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention at KernelBench 97's shape at each precision optiml's attention specs
allow (exact fp32, fp32 with TF32 allowed, bf16, f16), for the table beside optiml's times measured in the same
device call (`tensor_gpu`'s attention sweeps print them).

For each precision: eager with PyTorch's own choice of backend, eager with each SDPA backend forced (flash,
memory-efficient, cuDNN, math; those that refuse the shape or dtype are listed as such), and `torch.compile`
(default mode) of the default call. Rounds alternate, L2 is flushed before every timed run (512 MiB written),
times are CUDA events, medians. The best of them is the reference a user would pick. Also each result's error
against float64 on the first two heads, so a faster reference is not a less accurate one unnoticed.

    python3 bench/harness/attention_precisions.py --out DIR [--runs 10]
"""
import argparse
import datetime
import json
import os
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPE = (32, 32, 512, 1024)
SCALE = 1.0 / 32.0  # 1/sqrt(1024), PyTorch's default for 1024 features
PRECISIONS = {
    "f32": (torch.float32, False),
    "tf32": (torch.float32, True),
    "bf16": (torch.bfloat16, False),
    "f16": (torch.float16, False),
}
BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}


class Flush:
    def __init__(self):
        self.buf = torch.empty(128 << 20, dtype=torch.float32, device="cuda")

    def __call__(self):
        self.buf.zero_()


def time_once(fn, flush):
    flush()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end), out


def rel_l2(out, ref):
    d = (out[:, :2].double() - ref).norm()
    return (d / ref.norm()).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    flush = Flush()
    gen = torch.Generator(device="cuda").manual_seed(97)
    base = [torch.randn(SHAPE, device="cuda", generator=gen) for _ in range(3)]
    ref = F.scaled_dot_product_attention(*[t[:, :2].double() for t in base], scale=SCALE)
    flops = 2 * SHAPE[0] * SHAPE[1] * SHAPE[2] * SHAPE[2] * 2 * SHAPE[3]
    rows = []
    for name, (dtype, tf32) in PRECISIONS.items():
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        q, k, v = [t.to(dtype) for t in base]
        default = lambda: F.scaled_dot_product_attention(q, k, v, scale=SCALE)
        candidates = {"eager (default backend)": default}
        for bname, backend in BACKENDS.items():
            def forced(backend=backend):
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, scale=SCALE)
            candidates[f"eager ({bname})"] = forced
        compiled = torch.compile(default)
        candidates["torch.compile"] = compiled
        usable, refused = {}, {}
        for label, fn in candidates.items():
            try:
                for _ in range(2):
                    out = fn()
                torch.cuda.synchronize()
                usable[label] = (fn, rel_l2(out, ref))
                del out
            except Exception as e:  # a backend that refuses this shape or dtype
                refused[label] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        times = {label: [] for label in usable}
        for _ in range(args.runs):
            for label, (fn, _) in usable.items():
                ms, out = time_once(fn, flush)
                times[label].append(ms)
                del out
        for label, (_, err) in usable.items():
            ms = statistics.median(times[label])
            rows.append({"precision": name, "reference": label, "ms": ms, "tflops": flops / (ms * 1e-3) / 1e12,
                         "rel_l2_vs_f64_two_heads": err})
            print(f"{name:5} {label:26} {ms:9.3f} ms {flops / (ms * 1e-3) / 1e12:7.1f} TFLOP/s  err {err:.2e}",
                  flush=True)
        for label, why in refused.items():
            rows.append({"precision": name, "reference": label, "refused": why})
            print(f"{name:5} {label:26} refused: {why}", flush=True)
        del q, k, v, compiled, candidates, usable
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "runs": args.runs, "shape": SHAPE, "scale": SCALE,
            "method": "CUDA events, L2 flushed (512 MiB) before each run, alternating rounds, medians"}
    with open(os.path.join(args.out, "torch_attention.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
