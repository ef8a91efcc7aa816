#!/usr/bin/env python3
"""Mutation test of the harness (CPU emulation, no GPU): applies one
deliberate bug at a time to a copy of matmul16_simt.cu (in a temp folder;
a pattern that is not in it is looked up in optiml/epilogue.cuh, whose mutated
copy in the temp folder then shadows the real one), builds harness.cu
-DHARNESS_EMU and checks that the harness FAILS.
Mutants marked 'tight' only read out of bounds without using the value
(e.g. rows >= M): they are run with --tight under AddressSanitizer.
Usage: python3 bench/harness/simt16/emu/mutants.py   (~3 min on 2 cores)
Exit 1 if a mutant survives or the unmodified control fails."""
import os, shutil, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUDA_INC = os.path.abspath(os.path.join(HERE, "../../../optiml-build/src/cuda"))  # optiml/epilogue.cuh
EPILOGUE = "optiml/epilogue.cuh"
FULL = "-DOPTIML_HAS_ALPHA=1 -DOPTIML_HAS_BETA=1 -DOPTIML_HAS_BIAS=1 -DOPTIML_ACT=2"
# (name, old, new, flags, tight)
MUTANTS = [
    ("control (no change)", "", "", FULL, False),
    ("A pred lk<=rem_k (tA0)", "if (lm < rem_m && lk < rem_k) ra[i] = Az[((long long)m0 + lm) * (long long)K",
     "if (lm < rem_m && lk <= rem_k) ra[i] = Az[((long long)m0 + lm) * (long long)K", "-DOPTIML_TRANS_A=0", False),
    ("A pred lm<=rem_m (tA1)", "if (lm < rem_m && lk < rem_k) ra[i] = Az[((long long)k0 + lk) * (long long)M",
     "if (lm <= rem_m && lk < rem_k) ra[i] = Az[((long long)k0 + lk) * (long long)M", "-DOPTIML_TRANS_A=1", True),
    ("B pred ln<=rem_n (tB0)", "if (ln < rem_n && lk < rem_k) rb[i] = Bz[((long long)k0 + lk) * (long long)N",
     "if (ln <= rem_n && lk < rem_k) rb[i] = Bz[((long long)k0 + lk) * (long long)N", "-DOPTIML_TRANS_B=0", True),
    ("B pred lk<=rem_k (tB1)", "if (ln < rem_n && lk < rem_k) rb[i] = Bz[((long long)n0 + ln) * (long long)K",
     "if (ln < rem_n && lk <= rem_k) rb[i] = Bz[((long long)n0 + ln) * (long long)K", "-DOPTIML_TRANS_B=1", False),
    ("B ldb N instead of K (tB1)", "rb[i] = Bz[((long long)n0 + ln) * (long long)K",
     "rb[i] = Bz[((long long)n0 + ln) * (long long)N", "-DOPTIML_TRANS_B=1", False),
    ("A lda K instead of M (tA1)", "ra[i] = Az[((long long)k0 + lk) * (long long)M",
     "ra[i] = Az[((long long)k0 + lk) * (long long)K", "-DOPTIML_TRANS_A=1", False),
    ("store ln<=rem_n", "if (ln < rem_n) {", "if (ln <= rem_n) {", "", False),
    ("store lm<=rem_m", "if (lm < rem_m) {\n", "if (lm <= rem_m) {\n", "", False),
    ("slices drop remainder", "const int slices = K / OPTIML_S16_BK + ((K % OPTIML_S16_BK) != 0);",
     "const int slices = K / OPTIML_S16_BK;", "", False),
    ("no first barrier", "__syncthreads();  // every thread", "//", "", False),
    ("no second barrier", "__syncthreads();  // slice s visible", "//", "", False),
    ("bias[ln]", "v += bias[n0 + ln];", "v += bias[ln];", FULL, False),
    ("C z*strideA", "unsigned short* __restrict__ Cz = C + (long long)z * strideC;",
     "unsigned short* __restrict__ Cz = C + (long long)z * strideA;", "", False),
    ("B z*strideA", "const unsigned short* __restrict__ Bz = B + (long long)z * strideB;",
     "const unsigned short* __restrict__ Bz = B + (long long)z * strideA;", "", False),
    ("beta not applied", "v = fmaf(beta, optiml_s16_from16(crow[ln]), v);", "v = fmaf(beta, 0.f, v);", FULL, False),
    ("alpha applied twice", "v *= alpha;", "v *= alpha * alpha;", FULL, False),
    ("grid stride x wrong", "optiml_s16_next(nt, (int)gridDim.x, tiles_n)",
     "optiml_s16_next(nt, 1 + (int)gridDim.x, tiles_n)", "", False),
    ("grid stride z wrong", "optiml_s16_next(z, (int)gridDim.z, batch)", "optiml_s16_next(z, 2 * (int)gridDim.z, batch)",
     "", False),
    ("prefetch k1 off by one", "const int k1 = (s + 1) * OPTIML_S16_BK;", "const int k1 = (s + 1) * OPTIML_S16_BK + 1;",
     "", False),
    ("gelu tanh approximation", "return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));",
     "return 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));", FULL, False),
    ("output truncation (to16 of x*(1-2^-9))", "return optiml_emu_to16(x);", "return optiml_emu_to16(x * 0.998046875f);",
     "", False),
]


def main():
    src = open(os.path.join(HERE, "../../../optiml-build/src/families/matmul/cuda", "matmul16_simt.cu")).read()
    hdr = open(os.path.join(CUDA_INC, EPILOGUE)).read()
    bad = 0
    for name, old, new, flags, tight in MUTANTS:
        in_hdr = bool(old) and src.count(old) < 1 and hdr.count(old) >= 1  # the activations: optiml/epilogue.cuh
        if old and src.count(old) < 1 and not in_hdr:
            print("%-40s pattern not found (kernel changed?)" % name)
            bad += 1
            continue
        for dt in (0, 1):
            with tempfile.TemporaryDirectory() as d:
                for f in ("harness.cu", "emu"):
                    p = os.path.join(HERE, f)
                    (shutil.copytree if os.path.isdir(p) else shutil.copy)(p, os.path.join(d, f))
                open(os.path.join(d, "matmul16_simt.cu"), "w").write(src.replace(old, new, 1) if old and not in_hdr else src)
                if in_hdr:  # d/optiml/epilogue.cuh: found before -I CUDA_INC (next to the including template)
                    os.makedirs(os.path.join(d, "optiml"))
                    open(os.path.join(d, EPILOGUE), "w").write(hdr.replace(old, new, 1))
                san = "-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined" if tight else "-O2"
                cmd = ("g++ -std=c++17 %s -pthread -w -DHARNESS_EMU -DOPTIML_DTYPE=%d %s -I '%s' -x c++ harness.cu -o h && "
                       "timeout 600 ./h --small %s" % (san, dt, flags, CUDA_INC, "--tight" if tight else ""))
                r = subprocess.run(cmd, shell=True, cwd=d, capture_output=True, text=True)
                out = r.stdout + r.stderr
                nf = out.count("  FAIL ")
                asan = "AddressSanitizer" in out
                control = not old
                ok = (r.returncode == 0) if control else (r.returncode != 0)
                bad += not ok
                print("%-40s %s rc=%-4s FAIL-lines=%-3d asan=%d  %s" % (
                    name, "bf16" if dt == 0 else "fp16", r.returncode, nf, asan,
                    ("ok (passes)" if ok else "*** CONTROL FAILS ***") if control else
                    ("detected" if ok else "*** SURVIVED ***")), flush=True)
    print("mutants: %s" % ("all detected, control clean" if not bad else "%d problems" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
