#!/usr/bin/env python3
"""Offline NVRTC check of gemv_16.cu (16-bit GEMV, optiml_gemv; no GPU needed).

Compiles, with the launcher's constants (OPTIML_GEMV_THREADS=512,
OPTIML_GEMV_COL_TX=8) and the generator's options (--std=c++17,
-default-device, --ptxas-options=-v):
  1. gemv_16.cu alone, every OPTIML_DTYPE {0 bf16, 1 fp16} x TRANS_A {0,1} x
     TRANS_B {0,1} x epilogue {plain, full = alpha + beta + bias + gelu}, for
     sm_80 and sm_90 (32 compilations);
  2. the product's translation unit for the 16-bit module: the defines, then
     matmul_wgmma_16.cu, matmul16_simt.cu, gemv_16.cu concatenated, for
     -arch=sm_90a, the same 16 flag sets; plus gemv_16.cu FIRST (before the
     two others) for 4 of them, and the SIMT-only module (matmul16_simt.cu
     as optiml_matmul, then gemv_16.cu) for sm_80;
  3. extras: sm_75 (pre-sm_80 bf16 rounding path), sm_100 when this NVRTC
     knows it, no -default-device, the template's own defaults (no launcher
     macros), knobs (LOAD 1/2, UNROLL 1/2/8, COL_TX 16/32, THREADS
     128/256/1024, SROWS 16/8, COL_TX 16 + UNROLL 8), relu.
For each: ptxas registers / spill stores / spill loads / stack frame / static
smem of optiml_gemv, and PTX properties of the optiml_gemv entry:
  * the matrix body loads are 16-byte (ld.global.nc.v4 / .cs.v4 / L2::256B
    per OPTIML_G16_LOAD), and the x vector too (ld.global.nc.v4 count >= 2);
  * no atomics / reductions (determinism), no .local (no stack);
  * global stores are 16-bit only; C is read (non-.nc 16-bit load) only with
    HAS_BETA;
  * fp16: cvt.f32.f16 and cvt.rn.f16.f32 present; bf16: cvt.rn.bf16.f32
    present exactly when arch >= sm_80.
Exit status 1 on any compile error, spill, stack frame, smem > 48 KiB, or
PTX property violation.

Usage: python3 bench/harness/gemv16/nvrtc_gemv16.py [--show-log] [--ptx-out DIR] [-j N]
Env NVRTC_LIB overrides the library (default: the repo's .tools NVRTC 13).
"""
import itertools
import multiprocessing
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ next to nvrtc_check.py
sys.path.insert(0, os.path.join(HERE, ".."))
import nvrtc_check as nc  # noqa: E402

TPL = os.path.join(HERE, "../../../optiml-build/src/families/matmul/cuda")
KERNEL = "optiml_gemv"
LAUNCHER = {"OPTIML_GEMV_THREADS": 512, "OPTIML_GEMV_COL_TX": 8}
FULL_EPI = {"OPTIML_HAS_ALPHA": 1, "OPTIML_HAS_BETA": 1, "OPTIML_HAS_BIAS": 1, "OPTIML_ACT": 2}
OPTIONAL_ARCH = ("sm_100",)


def read(name):
    return open(os.path.join(TPL, name)).read()


def entry_ptx(ptx, name):
    """the PTX text of .entry `name` (up to the next .entry / end)"""
    m = re.search(r"\.entry\s+%s\s*\(" % re.escape(name), ptx)
    if not m:
        return None
    n = re.search(r"\.entry\s+\w+\s*\(", ptx[m.end():])
    return ptx[m.start(): m.end() + n.start()] if n else ptx[m.start():]


def ptx_props(ptx, defs, arch):
    bad = []
    e = entry_ptx(ptx, KERNEL)
    if e is None:
        return ["no .entry optiml_gemv"]
    load = defs.get("OPTIML_G16_LOAD", 2)
    if load == 2 and int(re.sub(r"\D", "", arch)) < 80:
        load = 0  # the template falls back to ld.global.nc below sm_80
    v4 = {0: r"ld\.global\.nc\.v4\.(u32|b32)", 1: r"ld\.global\.cs\.v4\.(u32|b32)",
          2: r"ld\.global\.nc\.L1::no_allocate\.L2::256B\.v4\.(u32|b32)"}[load]
    if not re.search(v4, e):
        bad.append("no 16-byte matrix load (%s)" % v4)
    if len(re.findall(r"ld\.global\.nc\.v4\.(u32|b32)", e)) < (2 if load == 0 else 1):
        bad.append("no 16-byte vector load")
    if re.search(r"\b(atom|red)\.", e):
        bad.append("atomic")
    if ".local" in e:
        bad.append(".local")
    stores = re.findall(r"\bst\.global\.(\S+)\s", e)
    if not stores or any(s not in ("u16", "b16") for s in stores):
        bad.append("global stores %s" % sorted(set(stores)))
    c_reads = len(re.findall(r"\bld\.global\.(u16|b16)\b", e))  # non-.nc, non-.cs 16-bit loads = C_old
    if defs.get("OPTIML_HAS_BETA", 0) and c_reads == 0:
        bad.append("HAS_BETA but no C read")
    if not defs.get("OPTIML_HAS_BETA", 0) and c_reads:
        bad.append("C read without HAS_BETA (%d)" % c_reads)
    if defs.get("OPTIML_DTYPE", 0) == 1:
        if "cvt.f32.f16" not in e or "cvt.rn.f16.f32" not in e:
            bad.append("fp16 cvt missing")
    else:
        cvt = "cvt.rn.bf16.f32" in e
        pre80 = int(re.sub(r"\D", "", arch)) < 80
        if cvt == pre80:
            bad.append("bf16 rounding path (cvt.rn.bf16.f32 present=%s on %s)" % (cvt, arch))
    return bad


def defines_text(defs):
    return "".join("#define %s %d\n" % kv for kv in sorted(defs.items()))


def flag_sets():
    for dt, ta, tb, epi in itertools.product((0, 1), (0, 1), (0, 1), (0, 1)):
        d = {"OPTIML_DTYPE": dt, "OPTIML_TRANS_A": ta, "OPTIML_TRANS_B": tb}
        if epi:
            d.update(FULL_EPI)
        yield "%s tA%d tB%d %-5s" % ("bf16" if dt == 0 else "fp16", ta, tb, "full" if epi else "plain"), d


def build_jobs():
    """(group, label, source kind, defs, extra opts, arch)"""
    jobs = []
    for arch in ("sm_80", "sm_90"):
        for label, d in flag_sets():
            d2 = dict(LAUNCHER, **d)
            jobs.append(("alone", label, "alone", d2, ["-default-device"], arch))
    for label, d in flag_sets():
        d2 = dict(LAUNCHER, **d)
        jobs.append(("module", label + " wgmma+simt+gemv", "module", d2, ["-default-device"], "sm_90a"))
    for label, d in list(flag_sets())[::4]:
        d2 = dict(LAUNCHER, **d)
        jobs.append(("module", label + " gemv FIRST", "module_rev", d2, ["-default-device"], "sm_90a"))
        jobs.append(("module", label + " simt-module", "simt_module", d2, ["-default-device"], "sm_80"))
    ex = []
    for dt in (0, 1):
        tn = "bf16" if dt == 0 else "fp16"
        full = dict(LAUNCHER, OPTIML_DTYPE=dt, **FULL_EPI)
        ex.append((tn + " full sm_75", dict(full, OPTIML_TRANS_A=1), ["-default-device"], "sm_75"))
        ex.append((tn + " full sm_100", dict(full, OPTIML_TRANS_B=1), ["-default-device"], "sm_100"))
        ex.append((tn + " full no-dd", dict(full, OPTIML_TRANS_A=1, OPTIML_TRANS_B=1), [], "sm_90"))
        ex.append((tn + " template defaults", {"OPTIML_DTYPE": dt}, ["-default-device"], "sm_90"))
        ex.append((tn + " relu", dict(LAUNCHER, OPTIML_DTYPE=dt, OPTIML_ACT=1, OPTIML_TRANS_A=1), ["-default-device"],
                   "sm_90"))
        for k, v in (("OPTIML_G16_LOAD", 0), ("OPTIML_G16_LOAD", 1), ("OPTIML_G16_UNROLL", 1),
                     ("OPTIML_G16_UNROLL", 2), ("OPTIML_G16_UNROLL", 8), ("OPTIML_GEMV_COL_TX", 16),
                     ("OPTIML_GEMV_COL_TX", 32), ("OPTIML_GEMV_THREADS", 128), ("OPTIML_GEMV_THREADS", 256),
                     ("OPTIML_GEMV_THREADS", 1024), ("OPTIML_G16_SROWS", 16), ("OPTIML_G16_SROWS", 8)):
            for ta in (0, 1):
                d = dict(LAUNCHER, OPTIML_DTYPE=dt, OPTIML_TRANS_A=ta, OPTIML_TRANS_B=ta, **FULL_EPI)
                d[k] = v
                ex.append(("%s tA%d tB%d full %s=%d" % (tn, ta, ta, k.replace("OPTIML_", ""), v), d,
                           ["-default-device"], "sm_90"))
        for ta in (0, 1):  # the perf_*_tx16_u8 configs of configs.txt
            d = dict(LAUNCHER, OPTIML_DTYPE=dt, OPTIML_TRANS_A=ta, OPTIML_TRANS_B=ta, OPTIML_GEMV_COL_TX=16,
                     OPTIML_G16_UNROLL=8, **FULL_EPI)
            ex.append(("%s tA%d tB%d full COL_TX=16 UNROLL=8" % (tn, ta, ta), d, ["-default-device"], "sm_90"))
    for label, d, extra, arch in ex:
        jobs.append(("extra", label, "alone", d, extra, arch))
    return jobs


def source(kind, defs):
    g = read("gemv_16.cu")
    if kind == "alone":
        return g, ["-D%s=%d" % kv for kv in sorted(defs.items())]
    if kind == "module":  # as optiml-build's 16-bit sm_90 candidate: defines, wgmma, simt, then the GEMV
        return defines_text(defs) + read("matmul_wgmma_16.cu") + "\n" + read("matmul16_simt.cu") + "\n" + g, []
    if kind == "module_rev":
        return defines_text(defs) + g + "\n" + read("matmul_wgmma_16.cu") + "\n" + read("matmul16_simt.cu"), []
    if kind == "simt_module":  # the SIMT-only module (GPUs without wgmma): simt as optiml_matmul, then the GEMV
        return (defines_text(defs) + "#define OPTIML_SIMT16_ENTRY optiml_matmul\n" + read("matmul16_simt.cu") + "\n"
                + g), []
    raise ValueError(kind)


def compile_job(job):
    group, label, kind, defs, extra, arch = job
    src, dflags = source(kind, defs)
    opts = ["--std=c++17", "--ptxas-options=-v", nc.INCLUDE_OPT, "-arch=%s" % arch] + extra + dflags
    rc, log, ptx = nc._NV.compile(src, "gemv_16.cu", opts, want_ptx=True, want_cubin=True)
    return job, rc, log, ptx


def main():
    show_log = "--show-log" in sys.argv
    ptx_out = sys.argv[sys.argv.index("--ptx-out") + 1] if "--ptx-out" in sys.argv else None
    nj = int(sys.argv[sys.argv.index("-j") + 1]) if "-j" in sys.argv else (os.cpu_count() or 1)
    lib = os.environ.get("NVRTC_LIB", nc.DEFAULT_LIB)
    nc._worker_init(lib)
    print("NVRTC %d.%d, kernel %s (launcher: THREADS=512, COL_TX=8 unless a row says otherwise)" % (
        nc._NV.version + (KERNEL,)))
    jobs = build_jobs()
    if nj > 1:
        pool = multiprocessing.Pool(nj, initializer=nc._worker_init, initargs=(lib,))
        results = pool.imap(compile_job, jobs)
    else:
        results = map(compile_job, jobs)
    rows, fails = {}, 0
    for job, rc, log, ptx in results:
        group, label, kind, defs, extra, arch = job
        if rc != 0:
            if arch in OPTIONAL_ARCH and "invalid value for --gpu-architecture" in log:
                rows.setdefault(group, []).append((label, arch, "n/a (arch unknown to this NVRTC)"))
                continue
            fails += 1
            rows.setdefault(group, []).append((label, arch, "COMPILE ERROR"))
            print(log)
            continue
        info = nc.parse_ptxas(log, KERNEL)
        bad = ptx_props(ptx, defs, arch)
        if kind != "alone":
            want = ["optiml_matmul"] + (["optiml_matmul16_simt"] if kind != "simt_module" else [])
            for w in want:
                if entry_ptx(ptx, w) is None:
                    bad.append("module lacks .entry %s" % w)
        if (not info or info.get("spill_st", 1) or info.get("spill_ld", 1) or info.get("stack", 1)
                or info.get("smem", 0) > 48 * 1024):
            bad.append("spill/stack/smem")
        if bad:
            fails += 1
        rows.setdefault(group, []).append((label, arch, "regs=%3s spill_st=%s spill_ld=%s stack=%s smem=%s %s" % (
            info.get("regs"), info.get("spill_st"), info.get("spill_ld"), info.get("stack"), info.get("smem"),
            "ok" if not bad else "FAIL: " + "; ".join(bad))))
        if show_log:
            print(log)
        if ptx_out:
            os.makedirs(ptx_out, exist_ok=True)
            fn = re.sub(r"[^A-Za-z0-9]+", "_", group + "_" + label + "_" + arch).strip("_")
            open(os.path.join(ptx_out, fn + ".ptx"), "w").write(ptx)
    n = 0
    for group in ("alone", "module", "extra"):
        print()
        print("%s:" % {"alone": "gemv_16.cu alone (launcher constants, -default-device)",
                       "module": "in the product's translation unit (defines + templates concatenated)",
                       "extra": "extras"}[group])
        print("| config | arch | optiml_gemv |")
        print("|---|---|---|")
        for label, arch, res in rows.get(group, []):
            print("| %s | %s | %s |" % (label, arch, res))
            n += 1
    print()
    print("%d compilations, %d failures" % (n, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
