"""PyTorch's side of the staged attention prototype, in the same device call: scaled_dot_product_attention with its
own backend choice, torch.compile of it, and the same three stages written in PyTorch (q kᵀ, a softmax in fp32,
P v in the storage type), on q, k, v of [items, L, D] random normal values in bf16, f16, and f32 with TF32 allowed
(where SDPA's math backend, forced, was PyTorch's fastest call before). CUDA events, a 512 MiB L2 flush before each
run, the candidates in alternating rounds, medians. Prints one JSON object."""

import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def staged(q, k, v, scale):
    # What a user writes by hand: the scores come out of the product in the storage type (PyTorch's 16-bit
    # matmul has no fp32 output), then a softmax in fp32.
    s = torch.matmul(q, k.transpose(-2, -1)).float()
    return torch.matmul(torch.softmax(s * scale, dim=-1).to(q.dtype), v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1024)
    ap.add_argument("--len", type=int, default=512)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    torch.manual_seed(0)
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "items": a.items, "L": a.len,
           "D": a.dim, "rows": []}
    for name, dtype in (("bf16", torch.bfloat16), ("f16", torch.float16), ("tf32", torch.float32)):
        tf32 = name == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        # KernelBench 97's layout: [batch, heads, L, D] with batch · heads = items.
        shape = (a.items // 32, 32, a.len, a.dim) if a.items % 32 == 0 else (1, a.items, a.len, a.dim)
        q, k, v = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3))
        scale = 1.0 / a.dim ** 0.5
        compiled = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v))
        cands = {
            "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
            "compile": lambda: compiled(q, k, v),
            "staged_torch": lambda: staged(q, k, v, scale),
        }
        if tf32:
            def math():
                with sdpa_kernel(SDPBackend.MATH):
                    return F.scaled_dot_product_attention(q, k, v)
            cands["sdpa_math"] = math
        for f in cands.values():  # warm-up (and compilation)
            f()
        torch.cuda.synchronize()
        times = {n: [] for n in cands}
        for r in range(a.runs):
            order = list(cands) if r % 2 == 0 else list(reversed(cands))
            for n in order:
                flush.zero_()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                cands[n]()
                e.record()
                e.synchronize()
                times[n].append(s.elapsed_time(e))
        # Error against float64 on two items.
        q64, k64, v64 = (t.reshape(-1, a.len, a.dim)[:2].double() for t in (q, k, v))
        ref = torch.softmax(q64 @ k64.transpose(-2, -1) * scale, dim=-1) @ v64
        errs = {}
        for n, f in cands.items():
            got = f().reshape(-1, a.len, a.dim)[:2].double()
            errs[n] = float((got - ref).norm() / ref.norm())
        row = {"dtype": name}
        for n in cands:
            row[f"{n}_ms"] = statistics.median(times[n])
            row[f"{n}_rel_l2_vs_f64"] = errs[n]
        out["rows"].append(row)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
