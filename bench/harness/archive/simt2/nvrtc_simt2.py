#!/usr/bin/env python3
"""Offline check of simt2.cu: compile every config of configs.txt with NVRTC
for sm_90 (ptxas -v), report registers / spills / stack / smem, and (when an
nvdisasm is found) disassemble the cubin and count FFMA / LDS / LDGSTS / BAR
per kernel and in the main loop (the basic block holding the most FFMAs).
Usage: python3 bench/harness/archive/simt2/nvrtc_simt2.py [--sass-dir DIR] [name ...]
Exit 1 on a compile error or any spill."""
import os, re, subprocess, sys, glob, collections
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))  # bench/harness/nvrtc_check.py
import nvrtc_check as nc

def configs():
    out = []
    for ln in open(os.path.join(HERE, "configs.txt")):
        ln = ln.strip()
        if not ln or ln.startswith("#"):
            continue
        name, mode, flags, desc = [x.strip() for x in ln.split("|")]
        out.append((name, mode, flags.split(), desc))
    return out

def find_nvdisasm():
    for c in [os.environ.get("NVDISASM", "")] + glob.glob("/tmp/nvd/*/nvidia/cu13/bin/nvdisasm") + ["/usr/local/cuda/bin/nvdisasm"]:
        if c and os.path.exists(c):
            return c
    return None

def sass_stats(sass):
    """per-kernel op counts, and per loop (a backward BRA to an earlier label)
    the op counts of its whole body [label, branch], innermost loops first"""
    ops = collections.Counter()
    lines = sass.splitlines()
    labels, insts = {}, []  # label -> index of next instruction; list of (op, full, target)
    for ln in lines:
        m = re.match(r"^\s*(\.L_x_\d+):", ln)
        if m:
            labels[m.group(1)] = len(insts)
            continue
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)(.*)", ln)
        if m:
            full = m.group(2)
            t = re.search(r"\((\.L_x_\d+)\)", m.group(3))
            insts.append((full.split(".")[0], full, t.group(1) if t else None, bool(m.group(1))))
            ops[full.split(".")[0]] += 1
    loops = []
    for i, (op, full, tgt, pred) in enumerate(insts):
        if op == "BRA" and tgt in labels and labels[tgt] <= i:
            body = collections.Counter()
            for op2, full2, _, _ in insts[labels[tgt]:i + 1]:
                body[op2] += 1
                if op2 == "LDS":
                    body["LDS:" + full2] += 1
            body["_len"] = i + 1 - labels[tgt]
            loops.append(body)
    loops.sort(key=lambda b: -b["FFMA"])
    return ops, loops

def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    sass_dir = None
    if "--sass-dir" in sys.argv:
        sass_dir = sys.argv[sys.argv.index("--sass-dir") + 1]
        args = [a for a in args if a != sass_dir]
    nc._worker_init(nc.DEFAULT_LIB)
    src = open(os.path.join(HERE, "simt2.cu")).read()
    nvd = find_nvdisasm()
    bad = 0
    for name, mode, flags, desc in configs():
        if args and name not in args:
            continue
        rc, log, _ = nc._NV.compile(src, "simt2.cu", flags + ["-arch=sm_90", "--ptxas-options=-v", "-std=c++17"],
                                    want_ptx=False, want_cubin=True)
        if rc != 0:
            print("%-14s COMPILE ERROR\n%s" % (name, log)); bad += 1; continue
        info = nc.parse_ptxas(log, "optiml_matmul")
        spill = info.get("spill_st", 0) + info.get("spill_ld", 0)
        line = "%-14s regs=%3s spill_st=%s spill_ld=%s stack=%s" % (
            name, info.get("regs"), info.get("spill_st"), info.get("spill_ld"), info.get("stack"))
        if spill or info.get("stack", 0):
            bad += 1; line += "  <-- SPILL/STACK"
        if nvd and nc._NV.last_cubin:
            tmp = "/tmp/simt2_%s.cubin" % name
            open(tmp, "wb").write(nc._NV.last_cubin)
            sass = subprocess.run([nvd, "-c", tmp], capture_output=True, text=True).stdout
            if sass_dir:
                os.makedirs(sass_dir, exist_ok=True)
                open(os.path.join(sass_dir, name + ".sass"), "w").write(sass)
            ops, loops = sass_stats(sass)
            line += " | kernel FFMA=%d LDS=%d LDGSTS=%d STL=%d LDL=%d BAR=%d" % (
                ops["FFMA"], ops["LDS"], ops["LDGSTS"], ops["STL"], ops["LDL"], ops["BAR"])
            # main loops: the innermost loops holding FFMAs (the batch loop, which
            # contains them, is skipped: it has more instructions than FFMA-holding inner loops)
            inner = [l for l in loops if l["FFMA"] >= 64 and l["BAR"] <= 2]
            for li, loop in enumerate(inner):
                lds = ",".join("%s:%d" % (k[4:], v) for k, v in sorted(loop.items()) if k.startswith("LDS:"))
                other = loop["_len"] - loop["FFMA"] - loop["LDS"]
                top = ",".join("%s:%d" % (k, v) for k, v in loop.most_common(12)
                               if k not in ("FFMA", "LDS", "_len") and not k.startswith("LDS:"))
                line += "\n      loop%d: %d instr, FFMA=%d (%.1f%%) LDS=%d [%s] LDGSTS=%d BAR=%d other=%d {%s}" % (
                    li, loop["_len"], loop["FFMA"], 100.0 * loop["FFMA"] / max(1, loop["_len"]), loop["LDS"], lds,
                    loop["LDGSTS"], loop["BAR"], other, top)
        print(line, flush=True)
    sys.exit(1 if bad else 0)

main()
