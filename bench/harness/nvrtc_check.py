#!/usr/bin/env python3
"""Compile-check the optiml CUDA templates with NVRTC (no GPU needed).

For every supported matmul tiling config x flag combination, compile to CUBIN for each arch with `--ptxas-options=-v`,
parse the ptxas log and report registers / spill stores / spill loads /
stack frame / static shared memory. Fails (exit 1) on any compile error,
any spill, any non-zero stack frame, or static smem > 48 KiB.

Usage:
  python3 bench/harness/nvrtc_check.py               # full sweep
  python3 bench/harness/nvrtc_check.py --quick       # default tilings, few flag sets
  python3 bench/harness/nvrtc_check.py --show-log    # print ptxas logs
  python3 bench/harness/nvrtc_check.py --ptx-out DIR # also write PTX files
Env NVRTC_LIB overrides the library path.
"""
import argparse
import ctypes
import itertools
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
FAMILIES = os.path.join(ROOT, "optiml-build", "src", "families")
MATMUL_CUDA = os.path.join(FAMILIES, "matmul", "cuda")
DEFAULT_LIB = os.path.join(ROOT, ".tools", "nvrtc", "nvidia", "cu13", "lib", "libnvrtc.so.13")
# The templates #include "optiml/epilogue.cuh"; optiml-build hands it to NVRTC in memory, the harness
# checkers point NVRTC at the repository's copy (every checker adds INCLUDE_OPT to its options).
CUDA_INCLUDE = os.path.join(ROOT, "optiml-build", "src", "cuda")
INCLUDE_OPT = "--include-path=" + CUDA_INCLUDE

ARCHS = ["sm_80", "sm_90"]


class Nvrtc:
    def __init__(self, path):
        # libnvrtc dlopen()s libnvrtc-builtins.so.<ver> by soname; preload it
        # globally from the same folder so no LD_LIBRARY_PATH is needed.
        libdir = os.path.dirname(path)
        for fn in sorted(os.listdir(libdir)):
            if fn.startswith("libnvrtc-builtins.so"):
                ctypes.CDLL(os.path.join(libdir, fn), mode=ctypes.RTLD_GLOBAL)
                break
        self.lib = ctypes.CDLL(path)
        L = self.lib
        L.nvrtcGetErrorString.restype = ctypes.c_char_p
        L.nvrtcCreateProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_char_p,
                                         ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        L.nvrtcCompileProgram.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        L.nvrtcGetProgramLogSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        L.nvrtcGetProgramLog.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        L.nvrtcGetPTXSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        L.nvrtcGetPTX.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        L.nvrtcGetCUBINSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        L.nvrtcGetCUBIN.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        L.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        major, minor = ctypes.c_int(), ctypes.c_int()
        L.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = (major.value, minor.value)

    def compile(self, src, name, opts, want_ptx=False, want_cubin=False):
        L = self.lib
        prog = ctypes.c_void_p()
        r = L.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None, None)
        if r != 0:
            raise RuntimeError("nvrtcCreateProgram: %s" % L.nvrtcGetErrorString(r))
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = L.nvrtcCompileProgram(prog, len(opts), arr)
        n = ctypes.c_size_t()
        L.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value + 1)
        L.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        ptx = None
        if rc == 0 and want_ptx:
            n = ctypes.c_size_t()
            L.nvrtcGetPTXSize(prog, ctypes.byref(n))
            pbuf = ctypes.create_string_buffer(n.value + 1)
            L.nvrtcGetPTX(prog, pbuf)
            ptx = pbuf.value.decode(errors="replace")
        self.last_cubin = None
        if rc == 0 and want_cubin:
            n = ctypes.c_size_t()
            L.nvrtcGetCUBINSize(prog, ctypes.byref(n))
            cbuf = ctypes.create_string_buffer(n.value)
            L.nvrtcGetCUBIN(prog, cbuf)
            self.last_cubin = cbuf.raw[:n.value]
        L.nvrtcDestroyProgram(ctypes.byref(prog))
        return rc, log, ptx


def parse_ptxas(log, kernel):
    """Return dict(regs, spill_st, spill_ld, stack, smem) for `kernel`."""
    info = {}
    # ptxas prints blocks: "Compiling entry function 'X' for 'sm_90'" then
    # "Function properties for X", "N bytes stack frame, N bytes spill stores, N bytes spill loads",
    # "Used N registers, ... N bytes smem ..."
    lines = log.splitlines()
    cur = None
    for ln in lines:
        m = re.search(r"Function properties for (\S+)", ln)
        if m:
            cur = m.group(1)
            continue
        m = re.search(r"Compiling entry function '([^']+)'", ln)
        if m:
            cur = m.group(1)
            continue
        if cur != kernel:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", ln)
        if m:
            info["stack"], info["spill_st"], info["spill_ld"] = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", ln)
        if m:
            info["regs"] = int(m.group(1))
            m2 = re.search(r"(\d+) bytes smem", ln)
            info["smem"] = int(m2.group(1)) if m2 else 0
    return info


MM_TILINGS = []
for bm, bn, bk, tm, tn in itertools.product([64, 128], [64, 128], [8, 16], [4, 8], [4, 8]):
    threads = (bm // tm) * (bn // tn)
    MM_TILINGS.append((bm, bn, bk, tm, tn, threads))

# the default tilings (template default BK=8, and BK=16) get every flag combination
FULL_TILINGS = [(128, 128, 8, 8, 8, 256), (128, 128, 16, 8, 8, 256)]
DEFAULT_TILING = FULL_TILINGS[0]

# (TRANS_A, TRANS_B, HAS_ALPHA, HAS_BETA, HAS_BIAS, ACT)
ALL_FLAGS = list(itertools.product([0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1, 2]))
# for the non-default tilings, a representative subset
SOME_FLAGS = [
    (0, 0, 0, 0, 0, 0),
    (1, 0, 0, 0, 0, 0),
    (0, 1, 0, 0, 0, 0),
    (1, 1, 0, 0, 0, 0),
    (0, 0, 1, 1, 1, 2),
    (1, 1, 1, 1, 1, 1),
]


def mm_defines(t, f):
    bm, bn, bk, tm, tn, th = t
    ta, tb, ha, hb, hbias, act = f
    return ["-DOPTIML_BM=%d" % bm, "-DOPTIML_BN=%d" % bn, "-DOPTIML_BK=%d" % bk,
            "-DOPTIML_TM=%d" % tm, "-DOPTIML_TN=%d" % tn, "-DOPTIML_THREADS=%d" % th,
            "-DOPTIML_TRANS_A=%d" % ta, "-DOPTIML_TRANS_B=%d" % tb,
            "-DOPTIML_HAS_ALPHA=%d" % ha, "-DOPTIML_HAS_BETA=%d" % hb,
            "-DOPTIML_HAS_BIAS=%d" % hbias, "-DOPTIML_ACT=%d" % act]


_NV = None


def _worker_init(lib):
    global _NV
    _NV = Nvrtc(lib)


def _compile_job(job):
    """job: (label, src, kernel, opts, arch, ptx_out, cubin_out) -> result dict"""
    label, src, kernel, opts, arch, ptx_out, cubin_out = job
    rc, log, ptx = _NV.compile(src, kernel + ".cu", opts, want_ptx=bool(ptx_out), want_cubin=bool(cubin_out))
    fn = re.sub(r"[^A-Za-z0-9]+", "_", label + "_" + arch).strip("_")
    if ptx_out and ptx:
        os.makedirs(ptx_out, exist_ok=True)
        open(os.path.join(ptx_out, fn + ".ptx"), "w").write(ptx)
    if cubin_out and _NV.last_cubin:
        os.makedirs(cubin_out, exist_ok=True)
        open(os.path.join(cubin_out, fn + ".cubin"), "wb").write(_NV.last_cubin)
    return dict(label=label, kernel=kernel, arch=arch, rc=rc, log=log,
                info=parse_ptxas(log, kernel) if rc == 0 else {})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="default tilings with a few flag sets only")
    ap.add_argument("--show-log", action="store_true")
    ap.add_argument("--ptx-out", default=None)
    ap.add_argument("--cubin-out", default=None, help="write CUBINs (inspect with cuobjdump -sass)")
    ap.add_argument("--filter", default=None, help="regex on the job label")
    ap.add_argument("-D", dest="extra_defs", action="append", default=[],
                    help="extra NAME=VALUE define for every compilation")
    ap.add_argument("--arch", action="append", default=None)
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    archs = args.arch or ARCHS
    lib = os.environ.get("NVRTC_LIB", DEFAULT_LIB)

    nv = Nvrtc(lib)
    print("NVRTC %d.%d, archs %s, %d workers" % (nv.version + (",".join(archs), args.jobs)))
    mm_src = open(os.path.join(MATMUL_CUDA, "matmul_f32.cu")).read()

    base = ["--std=c++17", "--ptxas-options=-v", INCLUDE_OPT]
    dd = ["-default-device"]
    extra = ["-D" + d for d in args.extra_defs]

    specs = []  # (label, src, kernel, opts-without-arch)
    for t in MM_TILINGS:
        if args.quick and t not in FULL_TILINGS:
            continue
        flags = (ALL_FLAGS if not args.quick else SOME_FLAGS) if t in FULL_TILINGS else SOME_FLAGS
        for f in flags:
            label = "mm %3dx%3dx%2d %dx%d t%4d tA%d tB%d a%d b%d bias%d act%d" % (t + f)
            specs.append((label, mm_src, "optiml_matmul", base + dd + extra + mm_defines(t, f)))
    # everything is annotated: also compile without -default-device, and
    # with the pre-sm_80 (register staging) code path forced
    for f in SOME_FLAGS:
        label = "mm %3dx%3dx%2d %dx%d t%4d tA%d tB%d a%d b%d bias%d act%d" % (DEFAULT_TILING + f)
        specs.append((label + " no-dd", mm_src, "optiml_matmul", base + extra + mm_defines(DEFAULT_TILING, f)))
        specs.append((label + " cp0", mm_src, "optiml_matmul",
                      base + dd + extra + ["-DOPTIML_CP_ASYNC=0"] + mm_defines(DEFAULT_TILING, f)))
    if args.filter:
        specs = [sp for sp in specs if re.search(args.filter, sp[0])]

    jobs = [(label, src, kernel, opts + ["-arch=%s" % arch], arch, args.ptx_out, args.cubin_out)
            for (label, src, kernel, opts) in specs for arch in archs]
    if args.jobs > 1 and len(jobs) > 1:
        import multiprocessing
        pool = multiprocessing.Pool(args.jobs, initializer=_worker_init, initargs=(lib,))
        results = pool.imap(_compile_job, jobs)
    else:
        _worker_init(lib)
        results = map(_compile_job, jobs)

    failures = 0
    worst = {}
    for r in results:
        label, arch, info = r["label"], r["arch"], r["info"]
        if r["rc"] != 0:
            failures += 1
            print("FAIL  %-66s %s  compile error rc=%d\n%s" % (label, arch, r["rc"], r["log"]), flush=True)
            continue
        bad = (not info or info.get("spill_st", 1) != 0 or info.get("spill_ld", 1) != 0
               or info.get("stack", 1) != 0 or info.get("smem", 0) > 48 * 1024)
        if bad:
            failures += 1
        print("%s  %-66s %s  regs=%3s spill_st=%s spill_ld=%s stack=%s smem=%s" % (
            "FAIL" if bad else "ok  ", label, arch, info.get("regs"), info.get("spill_st"),
            info.get("spill_ld"), info.get("stack"), info.get("smem")), flush=True)
        if args.show_log or bad:
            print(r["log"])
        key = (r["kernel"], arch)
        if info.get("regs") is not None and info["regs"] > worst.get(key, (0, ""))[0]:
            worst[key] = (info["regs"], label)
    print()
    for (kernel, arch), (regs, label) in sorted(worst.items()):
        print("max regs %-20s %s: %d (%s)" % (kernel, arch, regs, label))
    print("%d compilations, %d failures" % (len(jobs), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
