#!/usr/bin/env python3
"""Renders the batched_matmul example's JSON (`-- --json FILE`) as the markdown table kept in bench/results/.

    python3 bench/render.py FILE.json ["which kernel the example embedded: default, or tuned (and how)"]
"""
import json
import sys


def main(path, kernel=None):
    doc = json.load(open(path))
    print(f"# Batched matmul f32 — {doc['gpu']}, {doc['date']}\n")
    print(f"Method: {doc['method']}." + (f" Kernel: {kernel}." if kernel else "") + "\n")
    # Runs before issue 17 named their baseline `cublas` (cuBLAS without a workspace); later ones `library`.
    lib = "library" if "library" in doc["rows"][0] else "cublas"
    print(f"| batch × size | optiml ms (min–max) | TFLOP/s | {lib} ms (min–max) | TFLOP/s | call | naive TFLOP/s | optiml / {lib} | max sampled rel. error |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in doc["rows"]:
        o, c = r["optiml"], r[lib]
        naive = f"{r['naive_tflops']:.1f}" if r.get("naive_tflops") else "-"
        print(
            f"| {r['batch']} × {r['m']}³ | {o['median_ms']:.3f} ({o['min_ms']:.3f}–{o['max_ms']:.3f}) | {r['optiml_tflops']:.1f} "
            f"| {c['median_ms']:.3f} ({c['min_ms']:.3f}–{c['max_ms']:.3f}) | {r[lib + '_tflops']:.1f} "
            f"| {r.get('library_call', 'cuBLAS, no workspace')} | {naive} "
            f"| {r['speed_vs_' + lib]:.2f}× | {r['max_rel_err_sampled']:.1e} |"
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
