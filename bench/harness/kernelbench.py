#!/usr/bin/env python3
"""The PyTorch side of the KernelBench Level 1 table, in the same device call as optiml's side.

The `kernelbench` example (Rust, optiml's generated wrappers) writes `ours.json`: per problem, the specs, the
inputs (shape and seed of a counter hash both sides compute bit for bit), optiml's median time, the minimum
bytes, and sampled output elements. This script rebuilds the same inputs in PyTorch, times eager and
`torch.compile` (default mode) in alternating rounds with L2 flushed and events, takes medians, checks optiml's
sampled outputs against PyTorch's, measures the copy bandwidth in the same process, and writes the table as JSON
and markdown.

    python3 bench/harness/kernelbench.py --ours DIR/ours.json --out DIR [--runs 20] [--only 19,23]
"""
import argparse
import datetime
import json
import math
import os
import re
import statistics
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError:  # --render needs neither
    np = torch = F = None

MASK = 0xFFFFFFFF


def hashed(shape, seed):
    """U(0, 1), the odd multiples of 2^-24, from a xorshift counter hash, exactly as the Rust side's fill kernel."""
    n = math.prod(shape)
    out = torch.empty(n, dtype=torch.float32, device="cuda")
    chunk = 1 << 27
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        h = (torch.arange(s, e, dtype=torch.int64, device="cuda") & MASK) ^ seed
        for _ in range(2):
            h ^= (h << 13) & MASK
            h ^= h >> 17
            h ^= (h << 5) & MASK
        out[s:e] = (((h >> 9) << 1) | 1).to(torch.float32) * (1.0 / 16777216.0)
        del h
    return out.view(shape)


def hashed_targets(shape, seed, classes):
    """Class indices below `classes`: the hash's top 24 bits modulo the class count, as the Rust side's kernel."""
    n = math.prod(shape)
    h = (torch.arange(n, dtype=torch.int64, device="cuda") & MASK) ^ seed
    for _ in range(2):
        h ^= (h << 13) & MASK
        h ^= h >> 17
        h ^= (h << 5) & MASK
    return ((h >> 8) % classes).view(shape)


def made(t):
    """An input as `ours.json` describes it: hashed values, a mask true where they are at least one half, or
    class indices."""
    if t.get("dtype") == "i64":
        return hashed_targets(t["shape"], t["seed"], t["classes"])
    values = hashed(t["shape"], t["seed"])
    if t.get("dtype") == "bool":
        return values >= 0.5
    # KernelBench 14 and 15 pass triangular matrices (optiml's kernels read only that triangle of theirs).
    if t.get("triangle") == "upper":
        return torch.triu(values)
    if t.get("triangle") == "lower":
        return torch.tril(values)
    return values


def exclusive_cumsum(x, dim):
    """KernelBench 92: zeros, then the cumulative sum of all but the last element along `dim`."""
    first = torch.zeros_like(x.select(dim, 0).unsqueeze(dim))
    return torch.cat((first, torch.cumsum(x.narrow(dim, 0, x.size(dim) - 1), dim=dim)), dim=dim)


def transposed_both(a, b):
    """KernelBench 18: A and B both stored transposed."""
    return torch.matmul(a.T, b.T)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


# KernelBench Level 1 forwards (v0.1), by problem number; `p` are the scalar parameters optiml took.
def forward(problem, p):
    return {
        1: torch.matmul,
        2: torch.matmul,
        3: torch.bmm,
        4: torch.matmul,
        5: lambda a: a * p[0],
        6: torch.matmul,
        7: torch.matmul,
        8: torch.matmul,
        9: torch.matmul,
        10: torch.matmul,
        11: lambda a, b: torch.einsum("bijl,lk->bijk", a, b),
        13: torch.matmul,
        14: lambda a, b: torch.triu(torch.matmul(a, b)),
        15: lambda a, b: torch.tril(torch.matmul(a, b)),
        16: lambda a, b: torch.matmul(a.T, b),
        17: lambda a, b: torch.matmul(a, b.T),
        18: transposed_both,
        12: lambda a, b: a.unsqueeze(1) * b,
        19: torch.relu,
        20: lambda x: F.leaky_relu(x, negative_slope=0.01),
        21: torch.sigmoid,
        22: torch.tanh,
        23: lambda x: torch.softmax(x, dim=1),
        24: lambda x: torch.log_softmax(x, dim=1),
        25: lambda x: x * torch.sigmoid(x),
        26: F.gelu,
        27: torch.selu,
        28: F.hardsigmoid,
        29: F.softplus,
        30: lambda x: x / (1 + torch.abs(x)),
        31: lambda x: F.elu(x, alpha=1.0),
        32: lambda x: F.hardtanh(x, min_val=-1.0, max_val=1.0),
        33: lambda x: F.batch_norm(x, None, None, training=True, eps=1e-5),
        34: lambda x: F.instance_norm(x, eps=1e-5),
        35: lambda x: F.group_norm(x, 8, eps=1e-5),
        36: lambda x: x / torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + 1e-5),
        37: lambda x: x / torch.norm(x, p="fro"),
        38: lambda x: x / torch.mean(torch.abs(x), dim=1, keepdim=True),
        39: lambda x: x / torch.norm(x, p=2, dim=1, keepdim=True),
        40: lambda x, w, b: F.layer_norm(x, x.shape[1:], w, b, eps=1e-5),
        47: lambda x: torch.sum(x, dim=1, keepdim=True),
        48: lambda x: torch.mean(x, dim=1),
        49: lambda x: torch.max(x, dim=1)[0],
        51: lambda x: torch.argmax(x, dim=1),
        52: lambda x: torch.argmin(x, dim=1),
        53: lambda x: torch.min(x, dim=1)[0],
        88: gelu_tanh,
        89: lambda x: torch.cumsum(x, dim=1),
        90: lambda x: torch.cumprod(x, dim=1),
        91: lambda x: torch.cumsum(x.flip(1), dim=1).flip(1),
        92: lambda x: exclusive_cumsum(x, 1),
        93: lambda x, m: torch.cumsum(x * m, dim=1),
        94: lambda x, t: torch.mean((x - t) ** 2),
        96: F.smooth_l1_loss,
        100: lambda x, t: torch.mean(torch.clamp(1 - x * t, min=0)),
        95: lambda x, t: F.cross_entropy(x, t),
        98: lambda x, t: F.kl_div(torch.log(x), t, reduction="batchmean"),
        99: lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=1.0),
        # PyTorch's default scale, 1/sqrt(features), is the scale optiml's kernel was given (p[0]).
        97: lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
    }[problem]


class Flush:
    """Overwrites 512 MiB between timed runs, so no run finds its inputs in the 60 MiB L2."""

    def __init__(self):
        self.buf = torch.empty(128 << 20, dtype=torch.float32, device="cuda")

    def __call__(self):
        self.buf.zero_()


def time_once(fn, args, flush):
    flush()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = fn(*args)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end), out


def copy_tbps(flush):
    """The copy bandwidth of this device: a 2 GiB device-to-device copy, median of 9 (bytes read + written)."""
    n = 512 << 20
    src = torch.empty(n, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    times = []
    for _ in range(10):
        ms, _ = time_once(lambda: dst.copy_(src), (), flush)
        times.append(ms)
    del src, dst
    return 2 * 4 * n / (statistics.median(times[1:]) * 1e-3) / 1e12


def check(ours_out, torch_out, out_dir):
    """Max absolute and relative error of optiml's sampled elements against PyTorch's, and whether they agree."""
    raw = np.fromfile(os.path.join(out_dir, ours_out["samples"]), dtype=np.float64)
    count = raw.size // 2
    positions = torch.from_numpy(raw[:count].astype(np.int64)).cuda()
    ours = torch.from_numpy(raw[count:]).cuda()
    ref = torch_out.reshape(-1)[positions].to(torch.float64)
    if ours_out["dtype"] in ("i64", "i32"):
        wrong = int((ours != ref).sum())
        return {"max_abs_error": float((ours - ref).abs().max()), "max_rel_error": 0.0, "agrees": wrong == 0,
                "checked": count}
    err = (ours - ref).abs()
    rel = err / ref.abs().clamp_min(1e-30)
    # KernelBench's allclose on `main` is rtol = atol = 1e-4; optiml's own gate is far stricter. This check only
    # confirms both computed the same function on the same inputs.
    agrees = bool((err <= 1e-4 + 1e-4 * ref.abs()).all())
    return {"max_abs_error": float(err.max()), "max_rel_error": float(rel.max()), "agrees": agrees, "checked": count}


def f64_errors(ours_out, torch_out, ref, out_dir):
    """The largest error relative to |reference| of optiml's sampled elements and of PyTorch's same elements,
    against a float64 evaluation of the forward: which of the two fp32 results is nearer the exact one."""
    raw = np.fromfile(os.path.join(out_dir, ours_out["samples"]), dtype=np.float64)
    count = raw.size // 2
    positions = torch.from_numpy(raw[:count].astype(np.int64)).cuda()
    ours = torch.from_numpy(raw[count:]).cuda()
    exact = ref.reshape(-1)[positions]
    theirs = torch_out.reshape(-1)[positions].to(torch.float64)
    scale = exact.abs().clamp_min(1e-30)
    return float(((ours - exact).abs() / scale).max()), float(((theirs - exact).abs() / scale).max())


def correct(row):
    """Correct: agrees with PyTorch, and where both spellings lower to one program, they give the same bits
    (spellings that lower to different programs are other kernels, so there only PyTorch's check counts). A
    product whose sampled elements miss PyTorch's by more than the tolerance is still correct when they are as
    near the float64 result as PyTorch's own (fp32 sums of a million terms differ by more than 1e-4 relative
    between two summation orders)."""
    agrees = row["agrees_with_torch"] or (
        "ours_rel_error_vs_f64" in row and row["ours_rel_error_vs_f64"] <= row["torch_rel_error_vs_f64"])
    return agrees and (row["spellings_agree"] or not row["words_equals_index"])


def write(rows, meta, out):
    """The table so far, as JSON and markdown."""
    measured = [r for r in rows if "vs_compile" in r]

    def geomean(rs):
        return math.exp(sum(math.log(r["vs_compile"]) for r in rs) / len(rs)) if rs else None

    geo = geomean(measured)
    memory = [r for r in measured if not r.get("compute_bound")]
    compute = [r for r in measured if r.get("compute_bound")]
    result = dict(meta)
    result.update({
        "reference": "PyTorch eager and torch.compile (default mode), same device call, L2 flushed, medians",
        "geomean_vs_compile": geo,
        "geomean_vs_compile_memory_bound": geomean(memory),
        "geomean_vs_compile_matmul": geomean(compute),
        "rows": rows,
    })
    os.makedirs(out, exist_ok=True)
    # The card in the name: "NVIDIA H200" -> h200, "NVIDIA H100 80GB HBM3" -> h100.
    card = re.search(r"\b([A-Z]\d{2,4})\b", result["gpu"])
    card = card.group(1).lower() if card else "gpu"
    stamp = f"{result['date']}-{card}-kernelbench-l1"
    with open(os.path.join(out, stamp + ".json"), "w") as f:
        json.dump(result, f, indent=1)
    copy = result["copy_tbps"]
    with open(os.path.join(out, stamp + ".md"), "w") as f:
        f.write(f"# KernelBench Level 1 on {result['gpu']}, {result['date']}\n\n")
        f.write(f"PyTorch {result['torch']}; copy bandwidth {copy:.2f} TB/s measured in the same run; medians of "
                f"{result['runs']}, L2 flushed. Ratios are PyTorch's time over optiml's (above 1: optiml is faster). "
                f"optiml runs what its committed cache holds (a variant tuned on the H200 where the cache has one for "
                f"the shape, else the default schedule). Correct: optiml's sampled outputs agree with "
                f"PyTorch's (|d| <= 1e-4 + 1e-4 |ref|), and both spellings give the same bits where they lower to "
                f"one program.\n\n")
        f.write("| # | spec (plain words) | correct | optiml ms | eager ms | compile ms | × eager | × compile "
                "| TB/s (TFLOP/s) | % of copy | max rel err |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            if "vs_compile" not in r:
                f.write(f"| {r['problem']} | {r['spec']} | no | {r.get('error', '')} |||||||\n")
                continue
            if r.get("compute_bound"):
                rate = f"({r['tflops']:.1f}) | compute-bound"
            else:
                rate = f"{r['tbps']:.2f} | {100 * r['fraction_of_copy']:.0f}%"
            err = f"{r['max_rel_error']:.1e}"
            if "ours_rel_error_vs_f64" in r:
                err += f" (vs f64: ours {r['ours_rel_error_vs_f64']:.1e}, PyTorch's {r['torch_rel_error_vs_f64']:.1e})"
            f.write(f"| {r['problem']} | {r['spec']} | {'yes' if r['correct'] else 'NO'} | {r['optiml_ms']:.3f} "
                    f"| {r['eager_ms']:.3f} | {r['compile_ms']:.3f} | {r['vs_eager']:.2f} | {r['vs_compile']:.2f} "
                    f"| {rate} | {err} |\n")
        if geo:
            f.write(f"\nGeometric mean over {len(measured)} problems: {geo:.2f}× torch.compile")
            if memory and compute:
                f.write(f" (memory-bound {len(memory)}: {geomean(memory):.2f}×; matmul {len(compute)}: "
                        f"{geomean(compute):.2f}×)")
            f.write(".\n")


def render(path, out):
    """Re-renders a results JSON (after a change of the table's rules), recomputing `correct`."""
    with open(path) as f:
        result = json.load(f)
    rows = result.pop("rows")
    for r in rows:
        if "vs_compile" in r:
            r.setdefault("agrees_with_torch", r["max_abs_error"] <= 1e-4)
            r["correct"] = correct(r)
    meta = {k: result[k] for k in ("date", "gpu", "torch", "copy_tbps", "runs")}
    write(rows, meta, out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours")
    ap.add_argument("--render", help="re-render this results JSON into --out instead of measuring")
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    if args.render:
        render(args.render, args.out)
        return
    out_dir = os.path.dirname(os.path.abspath(args.ours))
    with open(args.ours) as f:
        ours = json.load(f)
    only = {int(x) for x in args.only.split(",") if x}
    flush = Flush()
    copy = copy_tbps(flush)
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "copy_tbps": copy, "runs": args.runs}
    rows = []
    for prob in ours["problems"]:
        n = prob["problem"]
        if only and n not in only:
            continue
        row = {k: prob.get(k) for k in ("problem", "name", "spec", "spec_index", "optiml_ms", "optiml_host_us",
                                         "min_bytes", "words_equals_index", "spellings_agree")}
        if prob.get("error"):
            row.update({"correct": False, "error": prob["error"]})
            rows.append(row)
            print(f"{n}: {prob['error']}", flush=True)
            write(rows, meta, args.out)
            continue
        try:
            inputs = [made(t) for t in prob["inputs"]]
            fn = forward(n, prob["params"])
            compiled = torch.compile(fn)
            # Warm up both (compilation happens here), then alternate rounds.
            for _ in range(3):
                fn(*inputs)
                out_c = compiled(*inputs)
            torch.cuda.synchronize()
            eager, comp = [], []
            for _ in range(args.runs):
                ms, out_e = time_once(fn, inputs, flush)
                eager.append(ms)
                ms, out_c = time_once(compiled, inputs, flush)
                comp.append(ms)
            eager_ms, compile_ms = statistics.median(eager), statistics.median(comp)
            checks = [check(o, out_e, out_dir) for o in prob["outputs"]]
            agree = all(c["agrees"] for c in checks)
            tbps = prob["min_bytes"] / (prob["optiml_ms"] * 1e-3) / 1e12
            row.update({
                "agrees_with_torch": agree,
                "eager_ms": eager_ms,
                "compile_ms": compile_ms,
                "vs_eager": eager_ms / prob["optiml_ms"],
                "vs_compile": compile_ms / prob["optiml_ms"],
                "tbps": tbps,
                "fraction_of_copy": tbps / copy,
                "max_abs_error": max(c["max_abs_error"] for c in checks),
                "max_rel_error": max(c["max_rel_error"] for c in checks),
                "checked_elements": sum(c["checked"] for c in checks),
            })
            if prob.get("flops"):
                row["compute_bound"] = True
                row["tflops"] = prob["flops"] / (prob["optiml_ms"] * 1e-3) / 1e12
                # The exact result, to say which fp32 result is nearer it (float64 on the GPU; seconds).
                ref = fn(*[t.double() for t in inputs])
                ours_err, torch_err = f64_errors(prob["outputs"][0], out_e, ref, out_dir)
                row.update({"ours_rel_error_vs_f64": ours_err, "torch_rel_error_vs_f64": torch_err})
                del ref
            row["correct"] = correct(row)
            del inputs, out_e, out_c, compiled
        except Exception as e:  # one problem's failure must not lose the others' numbers
            row.update({"correct": False, "error": f"torch side: {type(e).__name__}: {e}"})
        torch.cuda.empty_cache()
        torch._dynamo.reset()
        rows.append(row)
        print(json.dumps(row), flush=True)
        # Written after every problem: a run cut short still leaves the problems it finished.
        write(rows, meta, args.out)


if __name__ == "__main__":
    main()
