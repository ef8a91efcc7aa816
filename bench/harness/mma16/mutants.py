#!/usr/bin/env python3
"""Mutation test of the offline emulation: each mutant is a deliberate bug in
a copy of matmul_mma_16.cu; the emulated harness (harness.cu -DHARNESS_EMU,
emu_shim.h, cp.async lazy) must FAIL for every mutant in at least one of two
configs: bf16 NN (A K-contiguous, B N-contiguous) and fp16 TT (A
M-contiguous, B K-contiguous), both with the full epilogue. The unmutated
kernel (control) must pass both. Usage:
  python3 bench/harness/mma16/mutants.py [-j N] [name-substring ...]
"""
import os, re, subprocess, sys, tempfile, shutil
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
TPL = os.path.abspath(os.path.join(HERE, "../../../optiml-build/src/families/matmul/cuda"))
CUDA_INC = os.path.abspath(os.path.join(HERE, "../../../optiml-build/src/cuda"))  # optiml/epilogue.cuh
SRC = open(os.path.join(TPL, "matmul_mma_16.cu")).read()
FULL = "-DOPTIML_HAS_ALPHA=1 -DOPTIML_HAS_BETA=1 -DOPTIML_HAS_BIAS=1 -DOPTIML_ACT=2"
CONFIGS = [("bf16_nn_full", "-DOPTIML_DTYPE=0 " + FULL), ("fp16_tt_full", "-DOPTIML_DTYPE=1 -DOPTIML_TRANS_A=1 -DOPTIML_TRANS_B=1 " + FULL)]

# (name, old, new, count): `old` must occur exactly `count` times (default 1); all are replaced
MUTANTS = [
    ("copy: unswizzled shared destination", "const unsigned dst0 = sdst + (unsigned)G::chunk(r0, c0);",
     "const unsigned dst0 = sdst + (unsigned)(r0 * G::ROWBYTES + (c0 << 4));"),
    ("swizzle term: rows per 128-byte line ignored (bank conflicts only)", "return (r / RDIV) % RMOD;", "return r % RMOD;"),
    ("A (M-contiguous): ldmatrix without .trans",
     "optiml_m16_ldsm4_t(a[0], a[1], a[2], a[3], sa + (unsigned)((o.a ^ (32 * i)) + 16 * s * optiml_m16_ga::ROWBYTES));",
     "optiml_m16_ldsm4(a[0], a[1], a[2], a[3], sa + (unsigned)((o.a ^ (32 * i)) + 16 * s * optiml_m16_ga::ROWBYTES));"),
    ("B (N-contiguous): ldmatrix without .trans",
     "optiml_m16_ldsm4_t(b[2 * p][0], b[2 * p][1], b[2 * p + 1][0], b[2 * p + 1][1],",
     "optiml_m16_ldsm4(b[2 * p][0], b[2 * p][1], b[2 * p + 1][0], b[2 * p + 1][1],"),
    ("B (K-contiguous): pair registers swapped",
     "optiml_m16_ldsm4(b[2 * p][0], b[2 * p][1], b[2 * p + 1][0], b[2 * p + 1][1],",
     "optiml_m16_ldsm4(b[2 * p][0], b[2 * p + 1][0], b[2 * p][1], b[2 * p + 1][1],"),
    ("A (K-contiguous): matrix order (rows+8 vs k+8) swapped",
     "o.a = GA::chunk(wm0 + (l & 7) + 8 * ((l >> 3) & 1), l >> 4);", "o.a = GA::chunk(wm0 + (l & 7) + 8 * (l >> 4), (l >> 3) & 1);"),
    ("A (M-contiguous): column chunk of the upper matrices",
     "o.a = GA::chunk((l & 7) + 8 * (l >> 4), (wm0 >> 3) + ((l >> 3) & 1));", "o.a = GA::chunk((l & 7) + 8 * (l >> 4), (wm0 >> 3) + (l >> 4));"),
    ("B (K-contiguous): k chunk of the upper matrices",
     "o.b = GB::chunk(wn0 + (l & 7) + 8 * (l >> 4), (l >> 3) & 1);", "o.b = GB::chunk(wn0 + (l & 7) + 8 * (l >> 4), l >> 4);"),
    ("B (N-contiguous): n chunk of the pair", "o.b = GB::chunk((l & 7) + 8 * ((l >> 3) & 1), (wn0 >> 3) + (l >> 4));",
     "o.b = GB::chunk((l & 7) + 8 * ((l >> 3) & 1), (wn0 >> 3) + ((l >> 3) & 1));"),
    ("k16 step of K-contiguous A: XOR 16 s instead of 32 s", "(o.a ^ (32 * s)) + 16 * i", "(o.a ^ (16 * s)) + 16 * i"),
    ("m16 tile of M-contiguous A: added instead of XOR", "(o.a ^ (32 * i)) + 16 * s", "(o.a + (32 * i)) + 16 * s"),
    ("fast loop: wait one group short", "optiml_m16_cp_wait<STAGES - 2>();\n                    __syncthreads();",
     "optiml_m16_cp_wait<STAGES - 1>();\n                    __syncthreads();"),
    ("fast loop: no barrier before the refill",
     "optiml_m16_cp_wait<STAGES - 2>();\n                    __syncthreads();", "optiml_m16_cp_wait<STAGES - 2>();"),
    ("fast loop: prologue without wait", "optiml_m16_cp_wait<STAGES - 1>();  // tile 0", "optiml_m16_cp_wait<STAGES>();  // tile 0"),
    ("fast loop: refill with the wrong k-tile", "const int tn = t + STAGES;", "const int tn = t + STAGES - 1;"),
    ("fast loop: next fragments from the current stage",
     "optiml_m16_step(acc, fa, fb, s, sA + (unsigned)(nx * Cf::A_STAGE),\n                                    sB + (unsigned)(nx * Cf::B_STAGE), 0, fo);",
     "optiml_m16_step(acc, fa, fb, s, sA + (unsigned)(rd * Cf::A_STAGE),\n                                    sB + (unsigned)(rd * Cf::B_STAGE), 0, fo);"),
    ("fast loop: no barrier after the last tile", "optiml_m16_cp_wait<0>();\n        __syncthreads();\n      }\n    } else {",
     "optiml_m16_cp_wait<0>();\n      }\n    } else {"),
    ("generic loop: wait one group short", "optiml_m16_cp_wait<STAGES - 2>();  // committed: tiles 0 .. t+STAGES-2",
     "optiml_m16_cp_wait<STAGES - 1>();  // committed: tiles 0 .. t+STAGES-2"),
    ("generic loop: no barrier before the refill",
     "optiml_m16_cp_wait<STAGES - 2>();  // committed: tiles 0 .. t+STAGES-2\n            __syncthreads();",
     "optiml_m16_cp_wait<STAGES - 2>();  // committed: tiles 0 .. t+STAGES-2"),
    ("generic loop: refill into the stage being read", "wr = wr + 1 == STAGES ? 0 : wr + 1;", "wr = rd + 1 == STAGES ? 0 : rd + 1;"),
    ("generic loop: refill with the wrong k-tile", "const int tn = t + STAGES - 1;", "const int tn = t + STAGES - 2;"),
    ("step: b pair reloaded before its last use", "if (i == C::MT - 1 && (jj & 1) != 0)", "if (i == C::MT - 1 && (jj & 1) == 0)"),
    ("step: a reloaded before the row", "optiml_m16_load_a(a[i], na, i, ns, o);\n    }",
     "optiml_m16_load_a(a[(i + 1) % C::MT], na, (i + 1) % C::MT, ns, o);\n    }"),
    ("copy: row predicate off by one", "const bool rok = dr < rrem;", "const bool rok = dr <= rrem;"),
    ("copy: 4-byte column predicate off by one", "s + e, rok && e < crem);", "s + e, rok && e <= crem);"),
    ("copy: 16-bit path, column-edge chunk taken as interior", "(ITERS - 1) * RSTEP < rrem && crem >= 8) {",
     "(ITERS - 1) * RSTEP < rrem && crem >= 7) {"),
    ("copy: 16-bit path, row-edge tile taken as interior", "(ITERS - 1) * RSTEP < rrem && crem >= 8) {",
     "(ITERS - 2) * RSTEP < rrem && crem >= 8) {"),
    ("copy: 16-bit path, edge column predicate off by one", "const unsigned hi = rok && e + 1 < crem ?", "const unsigned hi = rok && e + 1 <= crem ?"),
    ("copy: 16-bit path element order", "w[e >> 1] = lo | (hi << 16);", "w[e >> 1] = hi | (lo << 16);"),
    ("copy: 4-byte path unit order", "optiml_m16_cp4(dst + 2u * (unsigned)e,", "optiml_m16_cp4(dst + 2u * (unsigned)(e ^ 2),"),
    ("mode: 16-byte path without the base alignment test", "if ((ld & 7) == 0 && optiml_m16_aligned(X, 16)) return 16;",
     "if ((ld & 7) == 0) return 16;"),
    ("mode: 4-byte path for odd ld", "if ((ld & 1) == 0 && optiml_m16_aligned(X, 4)) return 4;",
     "if (optiml_m16_aligned(X, 4)) return 4;"),
    ("k tiles: remainder dropped", "const int ktiles = K / BK + ((K % BK) != 0);", "const int ktiles = K / BK;"),
    ("epilogue: row predicate off by one", "if (lm >= mrem) continue;\n                unsigned short*", "if (lm > mrem) continue;\n                unsigned short*"),
    ("epilogue: 32-bit C path without alignment test", "const bool vecC = ((N & 1) == 0) && optiml_m16_aligned(C, 4);",
     "const bool vecC = ((N & 1) == 0);"),
    ("epilogue: rows g+8 stored at g", "const int lm = wm0 + 16 * i + 8 * h;\n                if (lm >= mrem) continue;\n                unsigned short*",
     "const int lm = wm0 + 16 * i;\n                if (lm >= mrem) continue;\n                unsigned short*"),
    ("epilogue: bias of column n+1", "if (ln + 1 < nrem) b1 = bias[(long long)bn + ln + 1];", "if (ln + 1 < nrem) b1 = bias[(long long)bn + ln];"),
    ("epilogue: C_old of the wrong column", "acc[i][j][2 * h + 1] = fmaf(beta, o1, v1);", "acc[i][j][2 * h + 1] = fmaf(beta, o0, v1);"),
    ("epilogue: alpha applied twice with beta", "#if OPTIML_HAS_ALPHA && !OPTIML_HAS_BETA", "#if OPTIML_HAS_ALPHA"),
    ("epilogue (full tiles): second row of the pair", "unsigned short* __restrict__ r1 = r0 + 8LL * N;",
     "unsigned short* __restrict__ r1 = r0 + 9LL * N;"),
    ("epilogue (full tiles): bias of column n+1", "bv[j][1] = bias[(long long)bn + wn0 + 8 * j + 1];",
     "bv[j][1] = bias[(long long)bn + wn0 + 8 * j];"),
    ("epilogue (full tiles): C_old of the other row", "old[1][j] = optiml_m16_ld32(r1 + 8 * j);",
     "old[1][j] = optiml_m16_ld32(r0 + 8 * j);"),
    ("epilogue: full-tile test off by one", "if (vecC && wm + Cf::WM <= mrem && wn + Cf::WN <= nrem)",
     "if (vecC && wm + Cf::WM <= mrem + 1 && wn + Cf::WN <= nrem)"),
    ("epilogue: scalar C path, second column dropped", "if (ln + 1 < nrem) crow[ln + 1] = optiml_m16_to16(v1);", ""),
    ("raster: group mapping not a bijection", "by = first + local % rows;", "by = first + local % G;"),
    ("batch loop: items skipped", "z = optiml_m16_next(z, (int)gridDim.z, batch)", "z = optiml_m16_next(z, 2 * (int)gridDim.z, batch)"),
    ("tile loop: columns skipped", "nt = optiml_m16_next(nt, (int)gridDim.x, tiles_n)", "nt = optiml_m16_next(nt, 2 * (int)gridDim.x, tiles_n)"),
    ("tile loop: rows skipped", "mt = optiml_m16_next(mt, (int)gridDim.y, tiles_m)", "mt = optiml_m16_next(mt, 2 * (int)gridDim.y, tiles_m)"),
]
# the pack-order mutant is PTX only (the emulation packs on the host): not applicable offline
MUTANTS.append(("emulated pack order (host path of optiml_m16_pack2)",
                "return (unsigned)optiml_emu_m16_to16(lo) | ((unsigned)optiml_emu_m16_to16(hi) << 16);",
                "return (unsigned)optiml_emu_m16_to16(hi) | ((unsigned)optiml_emu_m16_to16(lo) << 16);"))


def build_and_run(tmp, tag, src, flags):
    d = os.path.join(tmp, tag)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "matmul_mma_16.cu"), "w").write(src)
    exe = os.path.join(d, "h")
    cmd = ("g++ -std=c++17 -O2 -pthread -w -DHARNESS_EMU %s -DHARNESS_NAME='\"m\"' -I %s -I %s -I %s -x c++ %s -o %s"
           % (flags, d, HERE, CUDA_INC, os.path.join(HERE, "harness.cu"), exe))
    b = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if b.returncode:
        return "build-error", b.stderr[-400:]
    try:
        r = subprocess.run([exe], capture_output=True, text=True, timeout=900, env=dict(os.environ, EMU_CP="lazy"))
    except subprocess.TimeoutExpired:
        return "timeout", ""
    first = next((l for l in r.stdout.splitlines() if l.startswith("  FAIL") or l.startswith("EMU ")), "")
    return ("fail" if r.returncode else "pass"), first.strip()[:150]


def run_mutant(tmp, idx, m):
    name, old, new = m[0], m[1], m[2]
    n = SRC.count(old)
    if n != 1:
        return name, "BAD MUTANT (pattern found %d times)" % n, False
    src = SRC.replace(old, new)
    for cname, flags in CONFIGS:
        st, why = build_and_run(tmp, "m%02d_%s" % (idx, cname), src, flags)
        if st == "build-error":
            return name, "build error: " + why, False
        if st in ("fail", "timeout"):
            return name, "detected by %s (%s)" % (cname, why or st), True
    return name, "NOT DETECTED", False


def main():
    args = sys.argv[1:]
    jobs = os.cpu_count() or 1
    if "-j" in args:
        jobs = int(args[args.index("-j") + 1])
        args = [a for i, a in enumerate(args) if a != "-j" and (i == 0 or args[i - 1] != "-j")]
    sel = [(i, m) for i, m in enumerate(MUTANTS) if not args or any(a in m[0] for a in args)]
    tmp = tempfile.mkdtemp()
    ok = True
    try:
        for cname, flags in CONFIGS:
            st, why = build_and_run(tmp, "control_" + cname, SRC, flags)
            print("control %-14s %s %s" % (cname, st, why), flush=True)
            ok &= st == "pass"
        with ThreadPoolExecutor(jobs) as ex:
            for name, res, good in ex.map(lambda im: run_mutant(tmp, im[0], im[1]), sel):
                print("%-58s %s" % (name, res), flush=True)
                ok &= good
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("mutants: %d, %s" % (len(sel), "all detected, control clean" if ok else "PROBLEMS"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
