#!/usr/bin/env python3
"""Compile-check gemv_f32.cu with NVRTC (no GPU needed).

Compiles every config of gemv_configs.txt (sm_80, sm_90; with and without
-default-device), all 2^6*3 flag combinations at the default knobs (sm_90),
and a knob sweep (sm_90): THREADS x UNROLL x RPW x KSPLIT, LOAD modes,
COL_TX values. Parses `--ptxas-options=-v`, reports registers / spills /
stack / smem, and fails on any compile error, spill, stack frame, or > 48 KiB
static smem.

  python3 bench/harness/gemv/gemv_nvrtc_check.py [--quick] [--show-log] [--ptx-out DIR] [-j N]
"""
import argparse
import itertools
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from nvrtc_check import Nvrtc, parse_ptxas, DEFAULT_LIB, INCLUDE_OPT  # noqa: E402

KERNEL = "optiml_gemv"


def read_configs():
    out = []
    for ln in open(os.path.join(HERE, "gemv_configs.txt")):
        ln = ln.strip()
        if not ln or ln.startswith("#"):
            continue
        name, _, flags = ln.partition(" ")
        out.append((name, flags.split()))
    return out


_NV = None


def _init(lib):
    global _NV
    _NV = Nvrtc(lib)


def _job(job):
    label, src, opts, ptx_out = job
    rc, log, ptx = _NV.compile(src, "gemv_f32.cu", opts, want_ptx=bool(ptx_out))
    if ptx_out and ptx:
        os.makedirs(ptx_out, exist_ok=True)
        fn = re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_")
        open(os.path.join(ptx_out, fn + ".ptx"), "w").write(ptx)
    return label, rc, log, parse_ptxas(log, KERNEL) if rc == 0 else {}, opts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--show-log", action="store_true")
    ap.add_argument("--ptx-out", default=None)
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    lib = os.environ.get("NVRTC_LIB", DEFAULT_LIB)
    nv = Nvrtc(lib)
    print("NVRTC %d.%d, %d workers" % (nv.version + (args.jobs,)))
    src = open(os.path.join(HERE, "../../../optiml-build/src/families/matmul/cuda/gemv_f32.cu")).read()  # the product template
    base = ["--std=c++17", "--ptxas-options=-v", INCLUDE_OPT]  # INCLUDE_OPT: optiml/epilogue.cuh
    specs = []
    for name, flags in read_configs():
        for arch in ("sm_90", "sm_80"):
            specs.append(("cfg %-14s %s" % (name, arch), base + ["-default-device", "-arch=" + arch] + ["-D" + f[2:] for f in flags]))
        specs.append(("cfg %-14s sm_90 no-dd" % name, base + ["-arch=sm_90"] + ["-D" + f[2:] for f in flags]))
    if not args.quick:
        for ta, tb, a, b, bias, act in itertools.product([0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1, 2]):
            d = ["-DOPTIML_TRANS_A=%d" % ta, "-DOPTIML_TRANS_B=%d" % tb, "-DOPTIML_HAS_ALPHA=%d" % a,
                 "-DOPTIML_HAS_BETA=%d" % b, "-DOPTIML_HAS_BIAS=%d" % bias, "-DOPTIML_ACT=%d" % act]
            specs.append(("flags tA%d tB%d a%d b%d bias%d act%d" % (ta, tb, a, b, bias, act),
                          base + ["-default-device", "-arch=sm_90"] + d))
        for th, u, rpw, ks in itertools.product([128, 256, 512, 1024], [1, 2, 4, 8, 16], [1, 2, 4], [1, 2, 4]):
            if (th // 32) % ks or u * rpw > 8 or (th == 1024 and (rpw > 1 or ks > 1)):
                continue  # outside the supported knob space (see gemv_f32.cu)
            d = ["-DOPTIML_GEMV_THREADS=%d" % th, "-DOPTIML_GEMV_UNROLL=%d" % u, "-DOPTIML_GEMV_RPW=%d" % rpw,
                 "-DOPTIML_GEMV_KSPLIT=%d" % ks, "-DOPTIML_HAS_BETA=1", "-DOPTIML_HAS_BIAS=1"]
            specs.append(("knob t%-4d u%-2d rpw%d ks%d" % (th, u, rpw, ks), base + ["-default-device", "-arch=sm_90"] + d))
        for ld, tx, u in itertools.product([0, 1, 2], [1, 4, 8, 16, 32, 64], [4, 8]):
            d = ["-DOPTIML_GEMV_LOAD=%d" % ld, "-DOPTIML_GEMV_COL_TX=%d" % tx, "-DOPTIML_GEMV_UNROLL=%d" % u,
                 "-DOPTIML_TRANS_A=1"]
            specs.append(("knob load%d tx%-2d u%d tA" % (ld, tx, u), base + ["-default-device", "-arch=sm_90"] + d))
    jobs = [(label, src, opts, args.ptx_out) for label, opts in specs]
    if args.jobs > 1:
        import multiprocessing
        results = multiprocessing.Pool(args.jobs, initializer=_init, initargs=(lib,)).imap(_job, jobs)
    else:
        _init(lib)
        results = map(_job, jobs)
    failures = 0
    worst = 0
    for label, rc, log, info, opts in results:
        if rc != 0:
            failures += 1
            print("FAIL  %-44s compile error rc=%d\n%s" % (label, rc, log), flush=True)
            continue
        bad = (not info or info.get("spill_st", 1) != 0 or info.get("spill_ld", 1) != 0
               or info.get("stack", 1) != 0 or info.get("smem", 0) > 48 * 1024)
        failures += bad
        worst = max(worst, info.get("regs", 0))
        print("%s  %-44s regs=%3s spill_st=%s spill_ld=%s stack=%s smem=%s" % (
            "FAIL" if bad else "ok  ", label, info.get("regs"), info.get("spill_st"), info.get("spill_ld"),
            info.get("stack"), info.get("smem")), flush=True)
        if args.show_log or bad:
            print(log)
    print("%d compilations, %d failures, max regs %d" % (len(jobs), failures, worst))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
