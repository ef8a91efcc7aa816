#!/usr/bin/env python3
"""Offline NVRTC check of matmul16_simt.cu (no GPU needed).

Compiles every combination OPTIML_DTYPE {0 bf16, 1 fp16} x TRANS_A {0,1} x
TRANS_B {0,1} x epilogue {none, alpha+beta+bias+gelu} for sm_80 and sm_90
(--ptxas-options=-v, -default-device, --std=c++17), plus extras (relu,
alpha+bias only, without -default-device, sm_75 (and sm_70 when the NVRTC
still knows it; CUDA 13 dropped it) = pre-sm_80 bf16
rounding path, sm_90a, sm_100 when the NVRTC knows it). For each: registers,
spill stores / loads, stack frame, static smem from the ptxas log, and PTX
properties:
  * no vector global access (ld/st.global.v*: only 2-byte alignment assumed),
  * C is read (ld.global.u16 without .nc) only when HAS_BETA = 1,
  * global stores are st.global.u16 only,
  * the expected 16-bit conversions are present.
Exit status 1 on any compile error, spill, stack frame, smem > 48 KiB or PTX
property violation.

Usage: python3 bench/harness/simt16/nvrtc_simt16.py [--show-log] [--ptx-out DIR]
Env NVRTC_LIB overrides the library (default: the repo's .tools NVRTC 13).
"""
import itertools
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ next to nvrtc_check.py
sys.path.insert(0, os.path.join(HERE, ".."))
import nvrtc_check as nc  # noqa: E402

KERNEL = "optiml_matmul16_simt"
FULL_EPI = {"OPTIML_HAS_ALPHA": 1, "OPTIML_HAS_BETA": 1, "OPTIML_HAS_BIAS": 1, "OPTIML_ACT": 2}


def ptx_props(ptx, defs):
    """list of violated properties (empty = ok)"""
    bad = []
    if re.search(r"\b(ld|st)\.global(\.nc)?\.v\d", ptx):
        bad.append("vector global access")
    c_reads = len(re.findall(r"\bld\.global\.(u16|b16)\b", ptx))  # non-.nc 16-bit loads = C old
    if defs.get("OPTIML_HAS_BETA", 0) and c_reads == 0:
        bad.append("HAS_BETA but no C read")
    if not defs.get("OPTIML_HAS_BETA", 0) and c_reads:
        bad.append("C read without HAS_BETA (%d)" % c_reads)
    stores = re.findall(r"\bst\.global\.(\S+)\s", ptx)
    if any(s not in ("u16", "b16") for s in stores) or not stores:
        bad.append("global stores %s" % sorted(set(stores)))
    dt = defs.get("OPTIML_DTYPE", 0)
    if dt == 1 and ("cvt.f32.f16" not in ptx or "cvt.rn.f16.f32" not in ptx):
        bad.append("fp16 cvt missing")
    return bad


def build_jobs():
    jobs = []  # (label, defs dict, extra opts, arch, expect_cvt_bf16)
    for arch in ("sm_80", "sm_90"):
        for dt, ta, tb, epi in itertools.product((0, 1), (0, 1), (0, 1), (0, 1)):
            defs = {"OPTIML_DTYPE": dt, "OPTIML_TRANS_A": ta, "OPTIML_TRANS_B": tb}
            if epi:
                defs.update(FULL_EPI)
            jobs.append(("%s tA%d tB%d %-4s" % ("bf16" if dt == 0 else "fp16", ta, tb, "full" if epi else "none"),
                         defs, ["-default-device"], arch))
    extras = []
    for dt in (0, 1):
        tn = "bf16" if dt == 0 else "fp16"
        extras.append(("%s tA0 tB0 relu" % tn, {"OPTIML_DTYPE": dt, "OPTIML_ACT": 1}, ["-default-device"], "sm_90"))
        extras.append(("%s tA1 tB0 a+bias" % tn, {"OPTIML_DTYPE": dt, "OPTIML_TRANS_A": 1, "OPTIML_HAS_ALPHA": 1,
                                                 "OPTIML_HAS_BIAS": 1}, ["-default-device"], "sm_90"))
        for arch in ("sm_70", "sm_75", "sm_80", "sm_90"):
            d = {"OPTIML_DTYPE": dt}
            d.update(FULL_EPI)
            extras.append(("%s tA0 tB1 full no-dd" % tn, d, [], arch))
        for arch in ("sm_70", "sm_75", "sm_90a", "sm_100"):
            d = {"OPTIML_DTYPE": dt, "OPTIML_TRANS_A": 1, "OPTIML_TRANS_B": 1}
            d.update(FULL_EPI)
            extras.append(("%s tA1 tB1 full" % tn, d, ["-default-device"], arch))
    return jobs, extras


def run(jobs, src, show_log, ptx_out, optional_arch=("sm_70", "sm_100")):
    rows, fails = [], 0
    for label, defs, extra, arch in jobs:
        opts = ["--std=c++17", "--ptxas-options=-v", nc.INCLUDE_OPT, "-arch=%s" % arch] + extra + \
               ["-D%s=%d" % kv for kv in sorted(defs.items())]
        rc, log, ptx = nc._NV.compile(src, "matmul16_simt.cu", opts, want_ptx=True, want_cubin=True)
        if rc != 0:
            if arch in optional_arch and "invalid value for --gpu-architecture" in log:
                rows.append((label, arch, "n/a (arch unknown to this NVRTC)"))
                continue
            fails += 1
            rows.append((label, arch, "COMPILE ERROR"))
            print(log)
            continue
        info = nc.parse_ptxas(log, KERNEL)
        bad = ptx_props(ptx, defs)
        dt = defs.get("OPTIML_DTYPE", 0)
        if dt == 0:
            cvt = "cvt.rn.bf16.f32" in ptx
            pre80 = arch in ("sm_70", "sm_75")
            if cvt == pre80:
                bad.append("bf16 rounding path (cvt.rn.bf16.f32 present=%s on %s)" % (cvt, arch))
        if (not info or info.get("spill_st", 1) or info.get("spill_ld", 1) or info.get("stack", 1)
                or info.get("smem", 0) > 48 * 1024):
            bad.append("spill/stack/smem")
        if bad:
            fails += 1
        rows.append((label, arch, "regs=%3s spill_st=%s spill_ld=%s stack=%s smem=%s %s" % (
            info.get("regs"), info.get("spill_st"), info.get("spill_ld"), info.get("stack"), info.get("smem"),
            "ok" if not bad else "FAIL: " + "; ".join(bad))))
        if show_log:
            print(log)
        if ptx_out:
            os.makedirs(ptx_out, exist_ok=True)
            fn = re.sub(r"[^A-Za-z0-9]+", "_", label + "_" + arch).strip("_")
            open(os.path.join(ptx_out, fn + ".ptx"), "w").write(ptx)
    return rows, fails


def main():
    show_log = "--show-log" in sys.argv
    ptx_out = sys.argv[sys.argv.index("--ptx-out") + 1] if "--ptx-out" in sys.argv else None
    lib = os.environ.get("NVRTC_LIB", nc.DEFAULT_LIB)
    nc._worker_init(lib)
    src = open(os.path.join(HERE, "../../../optiml-build/src/families/matmul/cuda", "matmul16_simt.cu")).read()
    jobs, extras = build_jobs()
    print("NVRTC %d.%d, kernel %s" % (nc._NV.version + (KERNEL,)))
    print("full = alpha + beta + bias + gelu(erff); none = plain product; all with -default-device unless 'no-dd'")
    print()
    rows, fails = run(jobs, src, show_log, ptx_out)
    rows2, fails2 = run(extras, src, show_log, ptx_out)
    print("| config | arch | result |")
    print("|---|---|---|")
    for label, arch, res in rows:
        print("| %s | %s | %s |" % (label, arch, res))
    print()
    print("extras:")
    print("| config | arch | result |")
    print("|---|---|---|")
    for label, arch, res in rows2:
        print("| %s | %s | %s |" % (label, arch, res))
    n = len(rows) + len(rows2)
    print()
    print("%d compilations, %d failures" % (n, fails + fails2))
    return 1 if fails + fails2 else 0


if __name__ == "__main__":
    sys.exit(main())
