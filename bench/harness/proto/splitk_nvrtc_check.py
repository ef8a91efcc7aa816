#!/usr/bin/env python3
"""Compile-check the split-K prototype (matmul_f32_splitk.cu) with NVRTC, no GPU.

For tilings x flag sets x OPTIML_SPLIT_K x archs: compile to CUBIN with
--ptxas-options=-v and report registers / spills / stack of optiml_matmul and
optiml_splitk_reduce. Fails on compile errors, spills, stack frames.
Also checks that OPTIML_SPLIT_K=1 gives PTX identical to the product template
(optiml-build/src/experts/templates/matmul_f32.cu) for every flag set tested.

  python3 bench/harness/proto/splitk_nvrtc_check.py [--quick] [-j N] [--filter RE]
"""
import argparse
import itertools
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import nvrtc_check as nc  # noqa: E402

PROTO = os.path.join(HERE, "matmul_f32_splitk.cu")
PRODUCT = os.path.join(nc.TEMPLATES, "matmul_f32.cu")

TILINGS = [(128, 128, 8, 8, 8), (128, 128, 16, 8, 8), (64, 64, 8, 4, 4), (64, 128, 8, 8, 8),
           (128, 64, 8, 8, 8), (64, 64, 8, 8, 8), (64, 64, 16, 4, 4)]
SPLITS = [1, 2, 3, 4, 8, 16, 32]
# (TRANS_A, TRANS_B, HAS_ALPHA, HAS_BETA, HAS_BIAS, ACT)
FLAGS = [(0, 0, 0, 0, 0, 0), (1, 1, 0, 0, 0, 0), (1, 0, 0, 0, 0, 0), (0, 1, 0, 0, 0, 0),
         (0, 0, 1, 1, 1, 2), (1, 1, 1, 1, 1, 1)]


def defs(t, f, sk):
    bm, bn, bk, tm, tn = t
    th = (bm // tm) * (bn // tn)
    return nc.mm_defines((bm, bn, bk, tm, tn, th), f) + ["-DOPTIML_SPLIT_K=%d" % sk]


def job(args):
    label, src, opts, arch, kernels, want_ptx = args
    rc, log, ptx = nc._NV.compile(src, "mm.cu", opts + ["-arch=" + arch], want_ptx=want_ptx, want_cubin=False)
    infos = {k: nc.parse_ptxas(log, k) for k in kernels} if rc == 0 else {}
    if ptx:
        ptx = "\n".join(l for l in ptx.splitlines() if not l.startswith("//"))
    return label, arch, rc, log, infos, ptx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--filter", default=None)
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--arch", action="append", default=None)
    a = ap.parse_args()
    archs = a.arch or nc.ARCHS
    lib = os.environ.get("NVRTC_LIB", nc.DEFAULT_LIB)
    proto, prod = open(PROTO).read(), open(PRODUCT).read()
    base = ["--std=c++17", "--ptxas-options=-v", "-default-device"]
    jobs = []
    for t in TILINGS:
        for sk in SPLITS:
            if a.quick and (t != TILINGS[0] or sk not in (1, 2, 3, 32)):
                continue
            flags = FLAGS if (t == TILINGS[0] or sk in (1, 16)) else FLAGS[:1] + FLAGS[4:5]
            for f in flags:
                label = "%dx%dx%d %dx%d S%-2d tA%d tB%d a%d b%d bias%d act%d" % (t + (sk,) + f)
                ks = ["optiml_matmul"] + (["optiml_splitk_reduce"] if sk > 1 else [])
                for arch in archs:
                    jobs.append((label, proto, base + defs(t, f, sk), arch, ks, sk == 1))
                    if sk == 1:
                        jobs.append(("PRODUCT " + label, prod, base + defs(t, f, 1)[:-1], arch, ks, True))
    # without -default-device and with the pre-sm_80 path
    for sk in (1, 4):
        for extra, tag in (([], "no-dd"), (["-DOPTIML_CP_ASYNC=0"], "cp0")):
            o = ["--std=c++17", "--ptxas-options=-v"] + (["-default-device"] if tag != "no-dd" else []) + extra
            label = "128x128x8 8x8 S%-2d %s epilogue" % (sk, tag)
            for arch in archs:
                jobs.append((label, proto, o + defs(TILINGS[0], FLAGS[5], sk), arch,
                             ["optiml_matmul"] + (["optiml_splitk_reduce"] if sk > 1 else []), False))
    if a.filter:
        jobs = [j for j in jobs if re.search(a.filter, j[0])]
    import multiprocessing
    pool = multiprocessing.Pool(a.jobs, initializer=nc._worker_init, initargs=(lib,))
    fails = 0
    ptxs = {}
    for label, arch, rc, log, infos, ptx in pool.imap(job, jobs):
        if rc != 0:
            fails += 1
            print("FAIL %-50s %s compile error\n%s" % (label, arch, log), flush=True)
            continue
        if ptx is not None:
            ptxs[(label, arch)] = ptx
        parts = []
        bad = False
        for k, info in infos.items():
            b = (not info or info.get("spill_st", 1) or info.get("spill_ld", 1) or info.get("stack", 1))
            bad = bad or b
            parts.append("%s: regs=%s spill=%s/%s stack=%s smem=%s" % (
                "mm" if k == "optiml_matmul" else "reduce", info.get("regs"), info.get("spill_st"),
                info.get("spill_ld"), info.get("stack"), info.get("smem")))
        fails += bool(bad)
        print("%s %-50s %s %s" % ("FAIL" if bad else "ok  ", label, arch, " | ".join(parts)), flush=True)
        if bad:
            print(log)
    # S = 1 must be the product template bit for bit (PTX text, comments stripped)
    same = diff = 0
    for (label, arch), ptx in ptxs.items():
        if label.startswith("PRODUCT "):
            continue
        other = ptxs.get(("PRODUCT " + label, arch))
        if other is None:
            continue
        if other == ptx:
            same += 1
        else:
            diff += 1
            fails += 1
            print("FAIL S=1 PTX differs from the product template: %s %s" % (label, arch))
            import difflib
            print("\n".join(list(difflib.unified_diff(other.splitlines(), ptx.splitlines(), lineterm=""))[:40]))
    print("S=1 vs product PTX: %d identical, %d different" % (same, diff))
    print("%d compilations, %d failures" % (len(jobs), fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
