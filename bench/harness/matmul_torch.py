"""PyTorch's `torch.matmul` beside a matmul sweep, in the same device call (issue 17): the third column.

Reads the JSON a sweep wrote (`matmul-sweep.json` or `matmul16-sweep.json`), times `torch.matmul` on every
measured row's problem (same shape, layout and element type; TF32 rows with `allow_tf32`, the others without; a
fused-epilogue row as the plain product, as the library runs it), and writes the JSON back with `torch_ms`,
`torch_flushed_ms`, `speed_vs_torch` and `torch_vs_library` per row, plus `<stem>-torch.md` beside it.

Timing: CUDA events, 5 warm-up runs, then 30 runs, medians: back to back, as the sweep times optiml and the
library (`torch_ms`, what the ratio uses), and each after overwriting a 512 MiB buffer so that no operand is left
in L2 (`torch_flushed_ms`).

    python3 bench/harness/matmul_torch.py --sweep OUT/matmul-sweep.json
"""
import argparse
import json
import pathlib

import torch

WARMUP, RUNS = 5, 30
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def median(ts):
    ts = sorted(ts)
    return ts[len(ts) // 2]


def timed(fn, flush=None):
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(RUNS):
        if flush is not None:
            flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    return median(ts)


def precision(row):
    return row.get("precision") or row.get("dtype")


def problem(row):
    """The row's operands (uniform [-1, 1), as the sweep draws them) and the product to time."""
    b, m, n, k = row["batch"], row["m"], row["n"], row["k"]
    dt = DTYPES[precision(row)]
    a = torch.rand(b, k, m, device="cuda").mul_(2).sub_(1).to(dt).transpose(1, 2) if row["trans_a"] \
        else torch.rand(b, m, k, device="cuda").mul_(2).sub_(1).to(dt)
    items = 1 if row.get("shared_b") else b
    bm = torch.rand(items, n, k, device="cuda").mul_(2).sub_(1).to(dt).transpose(1, 2) if row["trans_b"] \
        else torch.rand(items, k, n, device="cuda").mul_(2).sub_(1).to(dt)
    if row.get("shared_b"):
        bm = bm[0]
    if b == 1:
        a = a[0]
        bm = bm if bm.dim() == 2 else bm[0]
    return lambda: torch.matmul(a, bm)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", required=True)
    args = ap.parse_args()
    path = pathlib.Path(args.sweep)
    doc = json.loads(path.read_text())
    flush = torch.empty(128 << 20, device="cuda")
    lines = [
        f"# torch.matmul beside {path.name} — {doc.get('gpu')}, {doc.get('date')}",
        "",
        f"PyTorch {torch.__version__}, in the same device call as the sweep. torch ms: CUDA events, {WARMUP} warm-up "
        f"runs, median of {RUNS} back-to-back runs (as the sweep times optiml and the library); flushed: each run "
        "after overwriting 512 MiB (no operand left in L2). Fused-epilogue rows: PyTorch runs the plain product, "
        "as the library does. Ratios above 1: optiml is faster.",
        "",
        "| case | kernel | batch × m × n × k | precision | optiml ms | library ms (call) | torch ms | torch ms, flushed "
        "| optiml / torch | library / torch |",
        "|---|---|---|---|---:|---|---:|---:|---:|---:|",
    ]
    ratios = {}
    for row in doc["rows"]:
        if "optiml" not in row:
            continue
        p = precision(row)
        torch.backends.cuda.matmul.allow_tf32 = p == "tf32"
        try:
            fn = problem(row)
            ms = timed(fn)
            flushed = timed(fn, flush)
        except Exception as e:  # a row PyTorch cannot run is reported, not fatal
            row["torch_error"] = str(e)[:200]
            continue
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        ours, lib = row["optiml"]["median_ms"], row["library"]["median_ms"]
        row.update(torch_ms=ms, torch_flushed_ms=flushed, speed_vs_torch=ms / ours, torch_vs_library=lib / ms)
        gemv = row["m"] == 1 or row["n"] == 1
        if not gemv:
            ratios.setdefault(p, []).append(ms / ours)
        shape = f"{row['batch']}×{row['m']}×{row['n']}×{row['k']}"
        lines.append(
            f"| {row['case']} | `{row['kernel']}` | {shape} | {p} | {ours:.4f} | {lib:.4f} ({row['library_call']}) "
            f"| {ms:.4f} | {flushed:.4f} | {ms / ours:.2f}× | {ms / lib:.2f}× |"
        )
        print(lines[-1], flush=True)
    lines.append("")
    for p, rs in ratios.items():
        g = 1.0
        for r in rs:
            g *= r
        g **= 1 / len(rs)
        doc[f"geomean_{p}_speed_vs_torch"] = g
        lines.append(f"Geometric mean of optiml / torch.matmul over the {len(rs)} {p} matrix-matrix rows: **{g:.2f}×**.")
    doc["torch"] = {"version": torch.__version__, "method": lines[2]}
    path.write_text(json.dumps(doc, indent=1))
    (path.parent / f"{path.stem}-torch.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-len(ratios):]))


if __name__ == "__main__":
    main()
