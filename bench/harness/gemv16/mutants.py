#!/usr/bin/env python3
"""Mutation test of the gemv16 emulation harness: each mutant is a deliberate
bug in a copy of gemv_16.cu, or of optiml/epilogue.cuh when the text lives
there (the repository files are never modified); the copy is included instead
of the real one (-I order), built like run_emu.sh
(ASan + UBSan) for one config, and run with --stop. A mutant is KILLED when
the run exits non-zero: a failed check, an emulator abort (warp divergence
at a shuffle, deadlock, barrier with exited threads), a sanitizer error, or a
timeout; it SURVIVES when the harness passes. Every mutant here changes the behaviour for some
case of the harness, so every one must be killed (exit status 1 otherwise).
(Equivalent mutants are left out, e.g. storing a dot-mode row from lane 1
instead of lane 0: the butterfly gives every lane the same bits.)

Usage: python3 bench/harness/gemv16/mutants.py [-j N] [name-substring ...]
"""
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
TPL = os.path.abspath(os.path.join(HERE, "../../../optiml-build/src/families/matmul/cuda"))
CUDA_INC = os.path.abspath(os.path.join(HERE, "../../../optiml-build/src/cuda"))  # optiml/epilogue.cuh
EPILOGUE = "optiml/epilogue.cuh"
SAN = "-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined".split()
LAUNCHER = ["-DOPTIML_GEMV_THREADS=512", "-DOPTIML_GEMV_COL_TX=8"]
NN = ["-DOPTIML_DTYPE=0", "-DOPTIML_TRANS_A=0", "-DOPTIML_TRANS_B=0"]
TT = ["-DOPTIML_DTYPE=1", "-DOPTIML_TRANS_A=1", "-DOPTIML_TRANS_B=1"]
FULL = ["-DOPTIML_HAS_ALPHA=1", "-DOPTIML_HAS_BETA=1", "-DOPTIML_HAS_BIAS=1", "-DOPTIML_ACT=2"]

# (name, old text, new text, config flags); `old` must occur exactly once in gemv_16.cu, or (when it is not
# there at all) exactly once in optiml/epilogue.cuh, whose mutated copy then shadows the real one
MUTANTS = [
    ("dot head lane <= h", "if (lane < h) acc", "if (lane <= h) acc", NN),
    ("dot tail drops last", "if (lane < K - t0)", "if (lane < K - t0 - 1)", NN),
    ("dot head mask &3", "(reinterpret_cast<unsigned long long>(w) >> 1)) & 7u)",
     "(reinterpret_cast<unsigned long long>(w) >> 1)) & 3u)", NN),
    ("dot x repack shift", "(w12 >> 16) | (w34 << 16)", "(w12 >> 16) | (w34 << 8)", NN),
    ("dot x class 4 as 8", "else if (xa == 8u)", "else if (xa == 8u || xa == 4u)", NN),
    ("dot x class 2 as 4", "else if ((xa & 3u) == 0u)", "else if ((xa & 1u) == 0u)", NN),
    ("dot body over-step", "a[i] = i < left ? optiml_g16_ldm8(w + 8", "a[i] = i <= left ? optiml_g16_ldm8(w + 8", NN),
    ("dot body stride", "v += 32 * U)", "v += 32 * U - 32)", NN),
    ("warp sum short", "for (int o = 16; o > 0; o >>= 1)", "for (int o = 16; o > 1; o >>= 1)", NN),
    ("dot tile store invalid", "if (valid && lane == 0)", "if (lane == 0)", NN),
    ("dot tile rows", "const bool valid = warp < L - r0;", "const bool valid = warp <= L - r0;", NN),
    ("col aligned tx bound", "if (8 * tx < rem) {", "if (8 * tx <= rem) {", NN),
    ("col aligned butterfly", "for (int o = TXT; o < 32; o <<= 1)", "for (int o = TXT; o < 16; o <<= 1)", NN),
    ("col aligned test &3", "if ((L & 7) == 0 && optiml_g16_aligned16(W))", "if ((L & 3) == 0 && optiml_g16_aligned16(W))",
     NN),
    ("col aligned no base test", "if ((L & 7) == 0 && optiml_g16_aligned16(W))", "if ((L & 7) == 0)", NN),
    ("col aligned rows", "int left = tk < K ? (K - 1 - tk) / TK + 1 : 0;", "int left = tk < K ? (K - tk) / TK + 1 : 0;",
     NN),
    ("col scalar col_ok", "col_ok[c] = lane + 32 * c < rem;", "col_ok[c] = lane + 32 * c <= rem;", NN),
    ("col scalar shfl src", "__shfl_sync(0xffffffffu, xl, i)", "__shfl_sync(0xffffffffu, xl, i ^ 1)", NN),
    ("col scalar rest", "const int nr = s < steps ? SR : rest;", "const int nr = SR;", NN),
    ("col scalar x lane", "optiml_g16_from16(__ldg(xp + lane * WARPS))", "optiml_g16_from16(__ldg(xp + lane))", NN),
    ("col divergent shfl", "const float xf = __shfl_sync(0xffffffffu, xl, i);\n                if (i < nr) {",
     "if (lane < 31) {\n                const float xf = __shfl_sync(0xffffffffu, xl, i);\n                if (i < nr) {", NN,
     "}\n"),
    ("col no first barrier", "    __syncthreads();\n    // fixed-order sum", "    // fixed-order sum", NN),
    ("col no second barrier", "    __syncthreads();  // red is reused by the next tile / batch item\n", "", NN),
    ("col final sum skips", "for (int q = 1; q < OPTIML_G16_WARPS; ++q)", "for (int q = 2; q < OPTIML_G16_WARPS; ++q)",
     NN),
    ("col final bound", "t < COLS && t < rem;", "t < COLS && t <= rem;", NN),
    ("z loop step 1", "z = optiml_g16_next(z, (int)gridDim.z, batch))", "z = optiml_g16_next(z, 1, batch))", NN),
    ("tile loop skips", "t = optiml_g16_next(t, (int)gridDim.x, tiles))",
     "t = optiml_g16_next(t, (int)gridDim.x + 1, tiles))", NN),
    ("vector stride", "X + (long long)z * strideX;", "X + (long long)z * strideW;", NN),
    ("dot for M==1 only", "if (OPTIML_TRANS_A == 0 || M == 1)", "if (OPTIML_TRANS_A == 0 && M == 1)", NN),
    ("epilogue beta", "v = fmaf(beta, optiml_g16_from16(Cz[o]), v);", "v = fmaf(beta, optiml_g16_from16(Cz[o + 1]), v);",
     NN + FULL),
    ("epilogue bias index", "bias + (bias_per_out ? o : 0)", "bias + (bias_per_out ? 0 : o)", NN + FULL),
    ("epilogue gelu", "0.5f * v * (1.f + erff(v * 0.70710678118654752f))", "0.5f * v * (1.f + erff(v))", NN + FULL),
    ("fp16 col pair swap", "optiml_g16_unpack(a[i].y, e0, e1);\n                    acc[2] = fmaf(e0, xf, acc[2]);\n                    acc[3] = fmaf(e1, xf, acc[3]);",
     "optiml_g16_unpack(a[i].y, e1, e0);\n                    acc[2] = fmaf(e0, xf, acc[2]);\n                    acc[3] = fmaf(e1, xf, acc[3]);", TT),
    ("dot x class 8 as 16", "if (xa == 0u)\n", "if ((xa & 7u) == 0u)\n", NN),
]


def run(m, src, hdr, work):
    name, old, new, flags = m[:4]
    tail = m[4] if len(m) > 4 else None
    target, text = "gemv_16.cu", src
    if src.count(old) == 0 and hdr.count(old) == 1:  # the activations live in optiml/epilogue.cuh
        target, text = EPILOGUE, hdr
    if text.count(old) != 1:
        return name, "BAD MUTANT (text found %d times)" % text.count(old), False
    mutated = text.replace(old, new)
    if tail:  # close a block opened by the mutation right after the next occurrence of `tail` following it
        i = mutated.index(new) + len(new)
        j = mutated.index("            }\n", i) + len("            }\n")
        mutated = mutated[:j] + "            " + tail + mutated[j:]
    d = tempfile.mkdtemp(dir=work)
    os.makedirs(os.path.join(d, "optiml"))
    open(os.path.join(d, target), "w").write(mutated)
    exe = os.path.join(d, "h")
    # -I d first: the mutated gemv_16.cu, and d/optiml/epilogue.cuh (a mutated header) ahead of CUDA_INC
    b = subprocess.run(["g++", "-std=c++17"] + SAN + ["-DHARNESS_EMU"] + LAUNCHER + flags +
                       ['-DHARNESS_NAME="mutant"', "-I", d, "-I", HERE, "-I", TPL, "-I", CUDA_INC, "-x", "c++",
                        os.path.join(HERE, "harness.cu"), "-o", exe], capture_output=True, text=True)
    if b.returncode != 0:
        return name, "killed (build error)", True
    try:
        r = subprocess.run([exe, "--quiet", "--stop"], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return name, "killed (timeout)", True
    out = r.stdout + r.stderr
    if r.returncode == 0:
        return name, "SURVIVED", False
    why = "exit %d" % r.returncode
    for pat, label in (("runtime error", "UBSan"), ("AddressSanitizer", "ASan"), ("emu: ", "emulator"),
                       ("FAIL", "check")):
        if pat in out:
            line = next(l for l in out.splitlines() if pat in l)
            why = "%s: %s" % (label, re.sub(r"\s+", " ", line.strip())[:110])
            break
    return name, "killed (%s)" % why, True


def main():
    args = sys.argv[1:]
    nj = os.cpu_count() or 1
    if "-j" in args:
        i = args.index("-j")
        nj = int(args[i + 1])
        del args[i:i + 2]
    src = open(os.path.join(TPL, "gemv_16.cu")).read()
    hdr = open(os.path.join(CUDA_INC, EPILOGUE)).read()
    ms = [m for m in MUTANTS if not args or any(a in m[0] for a in args)]
    work = tempfile.mkdtemp(prefix="gemv16_mut.")
    with ThreadPoolExecutor(nj) as ex:
        res = list(ex.map(lambda m: run(m, src, hdr, work), ms))
    subprocess.run(["rm", "-rf", work])
    killed = 0
    for name, what, k in res:
        print("%-26s %s" % (name, what))
        killed += k
    print("mutants: %d, killed %d, survived %d" % (len(res), killed, len(res) - killed))
    return 0 if killed == len(res) else 1


if __name__ == "__main__":
    sys.exit(main())
