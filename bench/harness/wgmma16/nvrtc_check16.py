#!/usr/bin/env python3
"""Offline check of wgmma16.cu (no GPU): compile every config of configs.txt
with NVRTC 13 for sm_90a (bf16/fp16 types are not needed: the kernel's only
#include is optiml/epilogue.cuh, found through nc.INCLUDE_OPT), then disassemble the CUBIN with nvdisasm when one is found and
report registers, spills, stack, C75xx warnings, HGMMA count/shape and the
SASS of interest. Exit 1 on any failure.
  python3 bench/harness/wgmma16/nvrtc_check16.py [names...]
Env: NVRTC_LIB (default .tools/nvrtc/.../libnvrtc.so.13), NVDISASM (default:
first found of $PATH, /tmp/nvd/x/nvidia/cu13/bin/nvdisasm), OUTD (cubin/sass
folder, default /tmp/wgmma16_nvrtc)."""
import collections, multiprocessing, os, re, shutil, subprocess, sys
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import nvrtc_check as nc  # the project's ctypes NVRTC driver (bench/harness/nvrtc_check.py)
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
LIB = os.environ.get("NVRTC_LIB", os.path.join(ROOT, ".tools/nvrtc/nvidia/cu13/lib/libnvrtc.so.13"))
SRC = open(os.path.join(ROOT, "optiml-build/src/families/matmul/cuda/matmul_wgmma_16.cu")).read()
OUTD = os.environ.get("OUTD", "/tmp/wgmma16_nvrtc")
NVDISASM = os.environ.get("NVDISASM") or shutil.which("nvdisasm") or "/tmp/nvd/x/nvidia/cu13/bin/nvdisasm"

def configs():
    out = []
    for ln in open(os.path.join(HERE, "configs.txt")):
        if not ln.strip() or ln.startswith("#"): continue
        name, mode, flags, desc = [x.strip() for x in ln.split("|", 3)]
        out.append((name, mode, flags.split()))
    return out

NV = None
def init():
    global NV
    NV = nc.Nvrtc(LIB)

def job(cfg):
    name, mode, flags = cfg
    opts = ["--std=c++17", "--ptxas-options=-v", nc.INCLUDE_OPT, "-arch=sm_90a", "-default-device"] + flags
    rc, log, ptx = NV.compile(SRC, "wgmma16.cu", opts, want_ptx=True, want_cubin=True)
    kern = "optiml_matmul_f16" if "-DOPTIML_DTYPE=1" in flags else "optiml_matmul_bf16"
    info = nc.parse_ptxas(log, kern) if rc == 0 else {}
    warn = [l for l in log.splitlines() if re.search(r"C75\d\d|warning", l)]
    res = dict(name=name, rc=rc, info=info, warn=warn, log=log if rc else "")
    if rc == 0:
        os.makedirs(OUTD, exist_ok=True)
        open(os.path.join(OUTD, name + ".ptx"), "w").write(ptx)
        res["ptx_wgmma"] = sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16\.f32\.\w+\.\w+)", ptx)))
        res["ptx_trans"] = sorted(set(re.findall(r"wgmma\.mma_async[^;]*p, 1, 1, (\d), (\d);", ptx)))
        cub = NV.last_cubin
        if cub and os.path.exists(NVDISASM):
            cp = os.path.join(OUTD, name + ".cubin")
            open(cp, "wb").write(cub)
            sass = subprocess.run([NVDISASM, "-c", cp], capture_output=True, text=True).stdout
            open(os.path.join(OUTD, name + ".sass"), "w").write(sass)
            ops = re.findall(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass)
            c = collections.Counter(o.split(".")[0] for a, o in ops)
            res["sass"] = dict(n=len(ops), HGMMA=c["HGMMA"], STL=c["STL"], LDL=c["LDL"], UTMALDG=c["UTMALDG"],
                               STG=c["STG"], SHFL=c["SHFL"], SETMAXREG=c["USETMAXREG"],
                               WARPGROUP_DEPBAR=c["WARPGROUP"] )
            res["hgmma_shapes"] = sorted(set(re.sub(r"R\d+|UR\d+", "R", m) for m in re.findall(r"(HGMMA\.\S+ [^;]*);", sass)))
            res["stg_kinds"] = sorted(set(o for a, o in ops if o.startswith("STG")))
    return res

if __name__ == "__main__":
    cfgs = configs()
    if sys.argv[1:]:
        cfgs = [c for c in cfgs if c[0] in sys.argv[1:]]
    print("NVRTC %s, nvdisasm %s" % (nc.Nvrtc(LIB).version, NVDISASM if os.path.exists(NVDISASM) else "NOT FOUND"))
    fails = 0
    with multiprocessing.Pool(min(16, os.cpu_count() or 1), initializer=init) as pool:
        for r in pool.imap(job, cfgs):
            i = r["info"]
            bad = r["rc"] != 0 or i.get("spill_st", 1) or i.get("spill_ld", 1) or i.get("stack", 1) or r["warn"]
            s = r.get("sass")
            if s is not None and (s["HGMMA"] == 0 or s["STL"] or s["LDL"]):
                bad = True
            fails += bool(bad)
            print("%s %-14s rc=%d regs=%s spill=%s/%s stack=%s smem=%s | ptx %s trans %s" % (
                "FAIL" if bad else "ok  ", r["name"], r["rc"], i.get("regs"), i.get("spill_st"), i.get("spill_ld"),
                i.get("stack"), i.get("smem"), r.get("ptx_wgmma"), r.get("ptx_trans")), flush=True)
            if s is not None:
                print("     SASS n=%(n)d HGMMA=%(HGMMA)d UTMALDG=%(UTMALDG)d STG=%(STG)d SHFL=%(SHFL)d STL=%(STL)d LDL=%(LDL)d "
                      "USETMAXREG=%(SETMAXREG)d WARPGROUP.*=%(WARPGROUP_DEPBAR)d" % s)
                print("     %s | %s" % (", ".join(r["hgmma_shapes"]), ", ".join(r["stg_kinds"])))
            for w in r["warn"][:6]:
                print("     " + w)
            if r["rc"]:
                print(r["log"][:4000])
    print("%d configs, %d failures" % (len(cfgs), fails))
    sys.exit(1 if fails else 0)
