#!/usr/bin/env python3
"""The PyTorch side of the transpose table, in the same device call as optiml's side.

The `transpose` example (Rust, optiml's generated wrappers) checks every output bit for bit against the host's
transposition, times each case with L2 flushed and writes `ours.json`. This script times what a PyTorch user
writes instead, `x.transpose(-2, -1).contiguous()`, eagerly and under `torch.compile` (default mode), in
alternating rounds with L2 flushed and events, on fresh tensors of the same shapes and dtypes, takes medians and
writes the table as JSON and markdown.

    python3 bench/harness/transpose.py --ours DIR/ours.json --out DIR [--runs 20]
"""
import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernelbench import Flush, copy_tbps, time_once  # noqa: E402

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def transposed(x):
    return x.transpose(-2, -1).contiguous()


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    if not xs:
        return float("nan")
    p = 1.0
    for x in xs:
        p *= x
    return p ** (1.0 / len(xs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    with open(args.ours) as f:
        ours = json.load(f)
    flush = Flush()
    meta = {"date": ours["date"], "gpu": torch.cuda.get_device_name(), "optiml_gpu": ours["gpu"],
            "torch": torch.__version__, "runs": args.runs, "copy_tbps": ours["copy_tbps"],
            "torch_copy_tbps": copy_tbps(flush)}
    compiled = torch.compile(transposed)
    rows = []
    for case in ours["cases"]:
        shape = [case["rows"], case["cols"]] if case["batch"] == 1 else [case["batch"], case["rows"], case["cols"]]
        x = torch.randn(shape, device="cuda").to(DTYPES[case["dtype"]])
        for _ in range(3):
            out_e = transposed(x)
            out_c = compiled(x)
        torch.cuda.synchronize()
        assert torch.equal(out_e, x.mT) and torch.equal(out_c, x.mT), case
        eager, comp = [], []
        for i in range(args.runs):
            order = [(transposed, eager), (compiled, comp)]
            for fn, times in order if i % 2 == 0 else order[::-1]:
                ms, _ = time_once(fn, (x,), flush)
                times.append(ms)
        row = dict(case)
        row.update({"eager_ms": statistics.median(eager), "compile_ms": statistics.median(comp)})
        row["vs_eager"] = row["eager_ms"] / case["optiml_ms"]
        row["vs_compile"] = row["compile_ms"] / case["optiml_ms"]
        row["tbps"] = case["min_bytes"] / (case["optiml_ms"] * 1e-3) / 1e12
        row["fraction_of_copy"] = row["tbps"] / ours["copy_tbps"]
        row["eager_fraction_of_copy"] = case["min_bytes"] / (row["eager_ms"] * 1e-3) / 1e12 / ours["copy_tbps"]
        row["compile_fraction_of_copy"] = case["min_bytes"] / (row["compile_ms"] * 1e-3) / 1e12 / ours["copy_tbps"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        del x, out_e, out_c
        torch.cuda.empty_cache()
    write(rows, meta, args.out)


def write(rows, meta, out):
    os.makedirs(out, exist_ok=True)
    stem = f"{meta['date']}-h200-transpose"
    meta["geomean_vs_eager"] = geomean(r["vs_eager"] for r in rows)
    meta["geomean_vs_compile"] = geomean(r["vs_compile"] for r in rows)
    with open(os.path.join(out, stem + ".json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    lines = [
        f"# Transposes on {meta['gpu']}, {meta['date']}",
        "",
        f"PyTorch {meta['torch']}: `x.transpose(-2, -1).contiguous()`, eager and `torch.compile` (default mode), "
        f"timed in alternating rounds in the same device call as optiml, L2 flushed, medians of {meta['runs']}. "
        f"Copy bandwidth {meta['copy_tbps']:.2f} TB/s (optiml's side; PyTorch's copy {meta['torch_copy_tbps']:.2f}). "
        "optiml's outputs are checked bit for bit against the host's transposition; bytes are one read and one write "
        "of the tensor. Ratios are PyTorch's time over optiml's.",
        "",
        "| spec | shape | dtype | optiml ms | eager ms | compile ms | × eager | × compile | TB/s | % of copy "
        "| eager % of copy | compile % of copy |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        shape = f"{r['rows']}×{r['cols']}" if r["batch"] == 1 else f"{r['batch']}×{r['rows']}×{r['cols']}"
        lines.append(
            f"| {r['spec']} | {shape} | {r['dtype']} | {r['optiml_ms']:.4f} | {r['eager_ms']:.4f} | "
            f"{r['compile_ms']:.4f} | {r['vs_eager']:.2f} | {r['vs_compile']:.2f} | {r['tbps']:.2f} | "
            f"{100 * r['fraction_of_copy']:.0f}% | {100 * r['eager_fraction_of_copy']:.0f}% | "
            f"{100 * r['compile_fraction_of_copy']:.0f}% |")
    lines += ["", f"Geometric mean: {meta['geomean_vs_eager']:.2f}× eager, {meta['geomean_vs_compile']:.2f}× "
              "torch.compile.", ""]
    with open(os.path.join(out, stem + ".md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
