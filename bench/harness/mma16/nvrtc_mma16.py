#!/usr/bin/env python3
"""Offline NVRTC check of matmul_mma_16.cu (no GPU needed).

Compiles (--ptxas-options=-v, --std=c++17, -default-device unless 'no-dd'):
  * every OPTIML_DTYPE {bf16, fp16} x TRANS_A x TRANS_B x epilogue {none,
    full = alpha + beta + bias + erf gelu} with the default tile (128x128x32,
    64x64 warps, 4 stages) for sm_80, sm_86, sm_89 and sm_90;
  * other tiles (BK 64 / 16, 128x256, 256x128, 64x64, 2 stages, ...) for
    sm_80 and sm_90 (bf16 NN and TT, plain and full);
  * extras: relu, alpha + bias, without -default-device, a renamed entry
    (OPTIML_MMA16_ENTRY), one module holding this kernel and matmul16_simt.cu
    (the text after the simt template), this kernel after
    matmul_wgmma_16.cu for sm_90a (entry renamed; the wgmma template defines
    OPTIML_BN / OPTIML_BK / OPTIML_STAGES, which must not leak in), sm_100 /
    sm_120 when the NVRTC knows them, and sm_75, which must be refused
    (#error: mma.sync bf16 and cp.async need sm_80).
For each: registers, spill stores / loads, stack frame, static smem (must be
0: the kernel uses only dynamic shared memory), and PTX properties:
  * mma.sync m16n8k16 of the right type (.bf16 / .f16), 2 x MT*NT*BK/16 of them
    (the fast and the generic main loop) + 0 elsewhere;
  * ldmatrix .trans present iff an operand is M/N-contiguous, absent otherwise;
  * cp.async 16 and 4 bytes present, wait_group / commit present;
  * C is read (ld.global.u16 / .u32 without .nc) only with HAS_BETA;
  * A / B are read only by cp.async or ld.global.nc.u16;
  * no local memory (ld/st.local).
With nvdisasm (NVDISASM, /tmp/nvd/*/nvidia/cu13/bin/nvdisasm or the CUDA
toolkit's): per kernel HMMA / LDSM / LDGSTS / BAR / STL / LDL counts, and the
fast main loop (the loop holding the most HMMA): instructions, HMMA, LDSM,
LDGSTS, other. Exit 1 on any failure.

Usage: python3 bench/harness/mma16/nvrtc_mma16.py [-j N] [--quick] [--show-log] [--filter REGEX]
"""
import collections
import glob
import itertools
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(HERE, ".."))
import nvrtc_check as nc  # noqa: E402

TPL = os.path.abspath(os.path.join(HERE, "../../../optiml-build/src/families/matmul/cuda"))
FULL = {"OPTIML_HAS_ALPHA": 1, "OPTIML_HAS_BETA": 1, "OPTIML_HAS_BIAS": 1, "OPTIML_ACT": 2}
TILES = {  # name: (BM, BN, BK, WM, WN, STAGES)
    "128x128x32 s4": (128, 128, 32, 64, 64, 4),
    "128x128x64 s3": (128, 128, 64, 64, 64, 3),
    "128x128x32 s3": (128, 128, 32, 64, 64, 3),
    "128x256x32 s3": (128, 256, 32, 64, 64, 3),
    "256x128x32 s3": (256, 128, 32, 64, 64, 3),
    "128x128x16 s4": (128, 128, 16, 64, 64, 4),
    "64x64x32 s4 w32": (64, 64, 32, 32, 32, 4),
    "128x128x32 s2": (128, 128, 32, 64, 64, 2),
}


def tile_defs(t):
    bm, bn, bk, wm, wn, st = TILES[t]
    return {"OPTIML_M16_BM": bm, "OPTIML_M16_BN": bn, "OPTIML_M16_BK": bk, "OPTIML_M16_WM": wm, "OPTIML_M16_WN": wn,
            "OPTIML_M16_STAGES": st}


def smem_bytes(t):
    bm, bn, bk, wm, wn, st = TILES[t]
    return 2 * st * bk * (bm + bn)


def find_nvdisasm():
    for c in [os.environ.get("NVDISASM", "")] + glob.glob("/tmp/nvd/*/nvidia/cu13/bin/nvdisasm") + \
            ["/usr/local/cuda/bin/nvdisasm"]:
        if c and os.path.exists(c):
            return c
    return None


def sass_stats(sass, kernel):
    """op counts of `kernel`, and of its two shortest loops holding HMMA"""
    body, on = [], False
    for ln in sass.splitlines():
        if re.match(r"^\s*\.text\.", ln) or re.match(r"^\s*\.section\s+\.text\.", ln):
            on = ("." + kernel) in ln
        if on:
            body.append(ln)
    ops = collections.Counter()
    labels, insts = {}, []
    for ln in body:
        m = re.match(r"^\s*(\.L_x_\d+):", ln)
        if m:
            labels[m.group(1)] = len(insts)
            continue
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)(.*)", ln)
        if m:
            op = m.group(2).split(".")[0]
            t = re.search(r"\((\.L_x_\d+)\)", m.group(3))
            insts.append((op, t.group(1) if t else None))
            ops[op] += 1
    loops = []
    for i, (op, tgt) in enumerate(insts):
        if op == "BRA" and tgt in labels and labels[tgt] <= i:
            loop = collections.Counter(o for o, _ in insts[labels[tgt]:i + 1])
            loop["_len"] = i + 1 - labels[tgt]
            if loop["HMMA"]:
                loops.append(loop)
    # the k loops: the shortest loops holding HMMA (the fast one first; the
    # generic one, with its run-time copy modes, is longer)
    loops.sort(key=lambda l: l["_len"])
    best = loops[:2]
    return ops, best


def ptx_props(ptx, defs, expect_fail=False):
    bad = []
    dt = defs.get("OPTIML_DTYPE", 0)
    ty = "bf16" if dt == 0 else "f16"
    mmas = re.findall(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.(\w+)\.(\w+)\.f32", ptx)
    if not mmas or any(a != ty or b != ty for a, b in mmas):
        bad.append("mma.sync type (%s)" % sorted(set(mmas)))
    bm, bn, bk, wm, wn = (defs.get("OPTIML_M16_BM", 128), defs.get("OPTIML_M16_BN", 128), defs.get("OPTIML_M16_BK", 32),
                          defs.get("OPTIML_M16_WM", 64), defs.get("OPTIML_M16_WN", 64))
    want = 2 * (wm // 16) * (wn // 8) * (bk // 16)
    if len(mmas) != want:
        bad.append("mma.sync count %d, want %d" % (len(mmas), want))
    ta, tb = defs.get("OPTIML_TRANS_A", 0), defs.get("OPTIML_TRANS_B", 0)
    has_t = "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx
    has_n = re.search(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16", ptx) is not None
    if has_t != (ta == 1 or tb == 0):
        bad.append("ldmatrix .trans presence %s" % has_t)
    if has_n != (ta == 0 or tb == 1):
        bad.append("ldmatrix (non-trans) presence %s" % has_n)
    for pat in (r"cp\.async\.cg\.shared\.global \[[^\]]+\], \[[^\]]+\], 16, ", r"cp\.async\.ca\.shared\.global \[[^\]]+\], \[[^\]]+\], 4, ",
                r"cp\.async\.commit_group", r"cp\.async\.wait_group"):
        if not re.search(pat, ptx):
            bad.append("missing " + pat.split("\\")[0] + "...")
    c_reads = len(re.findall(r"\bld\.global\.(u16|b16|u32|b32)\b", ptx))  # coherent global loads: C_old only
    if defs.get("OPTIML_HAS_BETA", 0) and c_reads == 0:
        bad.append("HAS_BETA but no C read")
    if not defs.get("OPTIML_HAS_BETA", 0) and c_reads:
        bad.append("C read without HAS_BETA (%d coherent loads)" % c_reads)
    nc_other = [x for x in re.findall(r"\bld\.global\.nc\.(\w+)", ptx) if x not in ("u16", "f32")]
    if nc_other:
        bad.append("unexpected ld.global.nc types %s" % sorted(set(nc_other)))
    if re.search(r"\b(ld|st)\.local", ptx):
        bad.append("local memory in PTX")
    return bad


def build_jobs(quick):
    jobs = []  # (label, defs, extra opts, arch, kernel, source-kind, expect_compile_error)
    archs = ["sm_80", "sm_86", "sm_89", "sm_90"]
    for arch in archs:
        for dt, ta, tb, epi in itertools.product((0, 1), (0, 1), (0, 1), (0, 1)):
            if quick and arch in ("sm_86", "sm_89") and (dt or epi):
                continue
            d = {"OPTIML_DTYPE": dt, "OPTIML_TRANS_A": ta, "OPTIML_TRANS_B": tb}
            if epi:
                d.update(FULL)
            jobs.append(("%s tA%d tB%d %-4s 128x128x32 s4" % ("bf16" if dt == 0 else "fp16", ta, tb, "full" if epi else "none"),
                         d, ["-default-device"], arch, "optiml_matmul", "mma", False))
    for t in TILES:
        if t == "128x128x32 s4":
            continue
        for arch in ("sm_80", "sm_90"):
            for ta, tb, epi in ((0, 0, 0), (1, 1, 0), (0, 0, 1), (1, 1, 1)):
                if quick and epi:
                    continue
                d = {"OPTIML_DTYPE": 0, "OPTIML_TRANS_A": ta, "OPTIML_TRANS_B": tb}
                d.update(tile_defs(t))
                if epi:
                    d.update(FULL)
                jobs.append(("bf16 tA%d tB%d %-4s %s" % (ta, tb, "full" if epi else "none", t), d, ["-default-device"],
                             arch, "optiml_matmul", "mma", False))
    ex = []
    ex.append(("bf16 tA1 tB0 relu+bias", {"OPTIML_TRANS_A": 1, "OPTIML_HAS_BIAS": 1, "OPTIML_ACT": 1}, ["-default-device"], "sm_86", "optiml_matmul", "mma", False))
    ex.append(("fp16 tA0 tB1 alpha", {"OPTIML_DTYPE": 1, "OPTIML_TRANS_B": 1, "OPTIML_HAS_ALPHA": 1}, ["-default-device"], "sm_89", "optiml_matmul", "mma", False))
    for arch in ("sm_80", "sm_90"):
        d = {"OPTIML_DTYPE": 1}
        d.update(FULL)
        ex.append(("fp16 tA0 tB0 full no-dd", d, [], arch, "optiml_matmul", "mma", False))
    ex.append(("bf16 renamed entry", {"OPTIML_MMA16_ENTRY": "optiml_mma16_x"}, ["-default-device"], "sm_80", "optiml_mma16_x", "mma", False))
    d = {"OPTIML_DTYPE": 0, "OPTIML_TRANS_A": 1}
    d.update(FULL)
    ex.append(("module: mma16 + simt16", d, ["-default-device"], "sm_80", "optiml_matmul", "mma+simt", False))
    ex.append(("module: wgmma16 + mma16 (sm_90a)", dict(d, OPTIML_MMA16_ENTRY="optiml_matmul_mma16"), ["-default-device"],
               "sm_90a", "optiml_matmul_mma16", "wgmma+mma", False))
    for arch in ("sm_100", "sm_120"):
        ex.append(("bf16 tA1 tB1 full", dict(FULL, OPTIML_TRANS_A=1, OPTIML_TRANS_B=1), ["-default-device"], arch, "optiml_matmul", "mma", False))
    ex.append(("sm_75 must be refused", {}, ["-default-device"], "sm_75", "optiml_matmul", "mma", True))
    return jobs, ex


_NVD = None


def _init(lib):
    global _NVD
    nc._worker_init(lib)
    _NVD = find_nvdisasm()


def run_job(job):
    label, defs, extra, arch, kernel, kind, expect_fail = job
    src = open(os.path.join(TPL, "matmul_mma_16.cu")).read()
    if kind == "mma+simt":
        src = src + "\n" + open(os.path.join(TPL, "matmul16_simt.cu")).read()
    elif kind == "wgmma+mma":
        src = open(os.path.join(TPL, "matmul_wgmma_16.cu")).read() + "\n" + src
    opts = ["--std=c++17", "--ptxas-options=-v", nc.INCLUDE_OPT, "-arch=%s" % arch] + extra + \
           ["-D%s=%s" % kv for kv in sorted(defs.items())]
    rc, log, ptx = nc._NV.compile(src, "matmul_mma_16.cu", opts, want_ptx=True, want_cubin=True)
    res = dict(label=label, arch=arch, defs=defs, kind=kind)
    if expect_fail:
        ok = rc != 0 and "needs sm_80" in log
        res["line"] = "refused as expected (#error)" if ok else "NOT REFUSED (rc=%d)" % rc
        res["bad"] = not ok
        return res
    if rc != 0:
        if arch in ("sm_100", "sm_120") and "invalid value for --gpu-architecture" in log:
            res["line"], res["bad"] = "n/a (arch unknown to this NVRTC)", False
            return res
        res["line"], res["bad"], res["log"] = "COMPILE ERROR", True, log
        return res
    info = nc.parse_ptxas(log, kernel)
    bad = ptx_props(ptx, defs) if kind == "mma" or kind == "mma+simt" else []
    if kind == "mma+simt":
        bad = [b for b in bad if not b.startswith("C read") and not b.startswith("unexpected")]  # the simt kernel reads too
        if "optiml_matmul16_simt" not in log:
            bad.append("simt kernel missing")
    if (not info or info.get("spill_st", 1) or info.get("spill_ld", 1) or info.get("stack", 1)
            or info.get("smem", 1) != 0):
        bad.append("spill/stack/static smem")
    line = "regs=%3s spill=%s/%s stack=%s static_smem=%s" % (info.get("regs"), info.get("spill_st"), info.get("spill_ld"),
                                                            info.get("stack"), info.get("smem"))
    if _NVD and nc._NV.last_cubin:
        fd, path = tempfile.mkstemp(suffix=".cubin")
        os.write(fd, nc._NV.last_cubin)
        os.close(fd)
        sass = subprocess.run([_NVD, "-c", path], capture_output=True, text=True).stdout
        os.unlink(path)
        ops, loop = sass_stats(sass, kernel)
        line += " | SASS HMMA=%d LDSM=%d LDGSTS=%d BAR=%d STL=%d LDL=%d" % (
            ops["HMMA"], ops["LDSM"], ops["LDGSTS"], ops["BAR"], ops["STL"], ops["LDL"])
        for name, loop in zip(("fast k-loop", "generic k-loop"), loop):
            line += " | %s %d instr: HMMA %d, LDSM %d, LDGSTS %d, BAR %d, other %d" % (
                name, loop["_len"], loop["HMMA"], loop["LDSM"], loop["LDGSTS"], loop["BAR"],
                loop["_len"] - loop["HMMA"] - loop["LDSM"] - loop["LDGSTS"] - loop["BAR"])
        if ops["STL"] or ops["LDL"]:
            bad.append("local memory in SASS")
        if ops["HMMA"] == 0:
            bad.append("no HMMA in SASS")
    res["line"] = line + ("  ok" if not bad else "  FAIL: " + "; ".join(bad))
    res["bad"] = bool(bad)
    res["regs"] = info.get("regs")
    return res


def main():
    args = sys.argv[1:]
    quick = "--quick" in args
    show = "--show-log" in args
    jobsn = int(args[args.index("-j") + 1]) if "-j" in args else (os.cpu_count() or 1)
    filt = args[args.index("--filter") + 1] if "--filter" in args else None
    lib = os.environ.get("NVRTC_LIB", nc.DEFAULT_LIB)
    jobs, extras = build_jobs(quick)
    alljobs = jobs + extras
    if filt:
        alljobs = [j for j in alljobs if re.search(filt, j[0] + " " + j[3])]
    nc._worker_init(lib)
    print("NVRTC %d.%d, nvdisasm: %s" % (nc._NV.version + (find_nvdisasm() or "not found",)))
    print("full = alpha + beta + bias + gelu(erff); none = plain product; -default-device unless 'no-dd'")
    print("dynamic smem per block (launch): %s" % ", ".join("%s: %d B" % (t, smem_bytes(t)) for t in TILES))
    print()
    if jobsn > 1:
        import multiprocessing
        pool = multiprocessing.Pool(jobsn, initializer=_init, initargs=(lib,))
        results = pool.imap(run_job, alljobs)
    else:
        _init(lib)
        results = map(run_job, alljobs)
    fails, worst = 0, {}
    print("| config | arch | result |")
    print("|---|---|---|")
    for r in results:
        print("| %s | %s | %s |" % (r["label"], r["arch"], r["line"]), flush=True)
        if r.get("bad"):
            fails += 1
            if r.get("log"):
                print(r["log"][:4000])
        if r.get("regs") is not None and r["regs"] > worst.get(r["arch"], (0, ""))[0]:
            worst[r["arch"]] = (r["regs"], r["label"])
    print()
    for arch, (regs, label) in sorted(worst.items()):
        print("max registers %s: %d (%s)" % (arch, regs, label))
    print("%d compilations, %d failures" % (len(alljobs), fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
