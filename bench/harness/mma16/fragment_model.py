#!/usr/bin/env python3
"""Offline model of matmul_mma_16.cu's shared-memory layout, copy mapping,
ldmatrix addresses and MMA fragments, checked against an INDEPENDENT encoding
of the PTX semantics: NVIDIA CuTe's layouts of the instructions
(cute/atom/mma_traits_sm80.hpp: MMA_Traits<SM80_16x8x16_F32BF16BF16F32_TN>
ALayout / BLayout / CLayout; cute/atom/copy_traits_sm75.hpp:
Copy_Traits<SM75_U32x4_LDSM_N> and <SM75_U16x8_LDSM_T> Src/DstLayout).

1. The emulator's reading of the PTX ISA (emu_shim.h: ldmatrix .x4 with /
   without .trans, mma.m16n8k16 A / B / C fragments) is restated here and
   compared with the CuTe layouts for every lane, register and half.
2. For every tile configuration below and all four layouts (TRANS_A/B), one
   block of the kernel is modelled with the kernel's own index formulas
   (optiml_m16_geom::chunk, optiml_m16_copy's thread -> chunk mapping,
   optiml_m16_frag_offsets, optiml_m16_load_a / load_b, the epilogue's
   (row, column) of each accumulator): every shared element holds an ID of
   the global (m or n, k) element it came from; the ldmatrix instructions of
   every warp, k16 step and tile are evaluated with the CuTe copy layouts, and
   each fragment register half must hold exactly the element the CuTe MMA
   layout requires at that lane / value (so the MMA computes
   C[m][n] += sum_k A[m][k] B[k][n] for the right m, n, k); the accumulator
   positions (CuTe CLayout) must be where the epilogue stores them. Also:
   the copy mapping writes every 16-byte chunk of a stage exactly once, and
   shared-memory bank conflicts are counted for every ldmatrix (per 8-lane
   phase) and every 16-byte cp.async / st.shared.v4 (per 8-lane phase of a
   warp instruction): all must be conflict-free.
Partial tiles, predicates and the pipeline are exercised by the emulation
(run_emu.sh), which runs the kernel source itself.

Usage: python3 bench/harness/mma16/fragment_model.py     (exit 1 on any mismatch)
"""
import itertools
import sys


# ------------------------------------------------------------------ CuTe layouts
def flatten(shape, stride):
    if isinstance(shape, tuple):
        out = []
        for s, d in zip(shape, stride):
            out += flatten(s, d)
        return out
    return [(shape, stride)]


def layout(shape, stride):
    """CuTe Layout(shape, stride) as a function of a 1-D index (colexicographic)."""
    modes = flatten(shape, stride)

    def f(i):
        r = 0
        for s, d in modes:
            r += (i % s) * d
            i //= s
        return r
    return f


def tv_layout(tshape, tstride, vshape, vstride):
    ft, fv = layout(tshape, tstride), layout(vshape, vstride)
    return lambda t, v: ft(t) + fv(v)


# MMA_Traits<SM80_16x8x16_F32BF16BF16F32_TN> (same for F16): (thread, value) -> flat coordinate
CUTE_A = tv_layout((4, 8), (32, 1), (2, 2, 2), (16, 8, 128))   # -> m + 16 k
CUTE_B = tv_layout((4, 8), (16, 1), (2, 2), (8, 64))           # -> n + 8 k
CUTE_C = tv_layout((4, 8), (32, 1), (2, 2), (16, 8))           # -> m + 16 n
# Copy_Traits<SM75_U32x4_LDSM_N>: DstLayout (thr, bit) -> bit of the source (row r = lane r's address, 128 bits)
CUTE_LDSM_N = tv_layout(32, 32, (32, 4), (1, 1024))
# Copy_Traits<SM75_U16x8_LDSM_T>
CUTE_LDSM_T = tv_layout((4, 8), (256, 16), (16, 2, 4), (1, 128, 1024))


def cute_ldsm(lane, reg, half, trans):
    """(source row = the lane whose address is used, element 0..7 of that row)"""
    if trans:
        bit = CUTE_LDSM_T(lane, 16 * half + 32 * reg)      # value = v0 (bit) + 16 v1 (half) + 32 v2 (reg)
    else:
        bit = CUTE_LDSM_N(lane, 16 * half + 32 * reg)      # value = bit + 32 reg
    return bit // 128, (bit % 128) // 16


# ------------------------------------------------------------------ 1. the emulator's reading of the PTX ISA
def emu_ldsm(lane, reg, half, trans):  # emu_shim.h optiml_emu_m16_ldsm4
    if not trans:
        return 8 * reg + lane // 4, 2 * (lane % 4) + half
    return 8 * reg + 2 * (lane % 4) + half, lane // 4


def emu_a(lane, i):  # value i = a_i (register i/2, half i%2) -> (row m, col k)
    g, t = lane // 4, lane % 4
    return g + (8 if (i >> 1) & 1 else 0), 2 * t + (i & 1) + (8 if i >= 4 else 0)


def emu_b(lane, i):  # b_i -> (row k, col n)
    g, t = lane // 4, lane % 4
    return 2 * t + (i & 1) + (8 if i >= 2 else 0), g


def emu_c(lane, i):  # c_i -> (row m, col n)
    g, t = lane // 4, lane % 4
    return g + (8 if i >= 2 else 0), 2 * t + (i & 1)


def check_ptx_semantics():
    bad = 0
    for lane in range(32):
        for reg, half, tr in itertools.product(range(4), range(2), (False, True)):
            bad += cute_ldsm(lane, reg, half, tr) != emu_ldsm(lane, reg, half, tr)
        for i in range(8):
            c = CUTE_A(lane, i)
            bad += (c % 16, c // 16) != emu_a(lane, i)
        for i in range(4):
            c = CUTE_B(lane, i)
            bad += (c // 8, c % 8) != emu_b(lane, i)
            c = CUTE_C(lane, i)
            bad += (c % 16, c // 16) != emu_c(lane, i)
    return bad


# ------------------------------------------------------------------ 2. model of one block of the kernel
class Geom:  # optiml_m16_geom<KC, TILE>
    def __init__(self, kc, tile, bk):
        self.rows, self.cols = (tile, bk) if kc else (bk, tile)
        self.rowbytes = 2 * self.cols
        self.cpr = self.cols // 8
        self.rdiv = 1 if self.cpr >= 8 else 8 // self.cpr
        self.rmod = 8 if self.cpr >= 8 else self.cpr

    def swz(self, r):
        return (r // self.rdiv) % self.rmod

    def chunk(self, r, c):
        return r * self.rowbytes + ((c ^ self.swz(r)) << 4)


def model(cfg, ta, tb):
    bm, bn, bk, wm, wn = cfg
    threads = (bm // wm) * (bn // wn) * 32
    warps_n = bn // wn
    mt, nt, ksteps = wm // 16, wn // 8, bk // 16
    ka, kb = ta == 0, tb == 1
    ga, gb = Geom(ka, bm, bk), Geom(kb, bn, bk)
    errs = []
    stats = {"ldsm_phases": 0, "ldsm_wavefronts": 0, "st_phases": 0, "st_wavefronts": 0}

    def wavefronts(addrs):  # 16-byte accesses of one 8-lane phase
        cnt = {}
        for a in set(addrs):
            cnt[(a >> 4) & 7] = cnt.get((a >> 4) & 7, 0) + 1
        return max(cnt.values())

    # (a) the copy: stage image of element IDs; A element (m, k) -> ('A', m, k), etc.
    def copy_stage(g, kc, name):
        img = {}
        rstep = threads // g.cpr
        iters = (g.rows + rstep - 1) // rstep
        per_instr = {}
        for tid in range(threads):
            r0, c0 = tid // g.cpr, tid % g.cpr
            for it in range(iters):
                r = r0 + it * rstep
                if r >= g.rows:
                    continue
                off = g.chunk(r, c0)
                if rstep % 8 == 0 and off != g.chunk(r0, c0) + it * rstep * g.rowbytes:
                    errs.append("%s: SAME_SWZ offset assumption broken" % name)
                per_instr.setdefault((it, tid // 32), []).append((tid % 32, off))
                for e in range(8):
                    byte = off + 2 * e
                    if byte in img:
                        errs.append("%s: shared byte %d written twice" % (name, byte))
                    # stored (row r, column 8 c0 + e): K-contiguous: (m|n = r, k = col); else (k = r, m|n = col)
                    col = 8 * c0 + e
                    img[byte] = (name, r, col) if kc else (name, col, r)
        if len(img) != g.rows * g.cols:
            errs.append("%s: %d of %d elements written" % (name, len(img), g.rows * g.cols))
        for lst in per_instr.values():
            lst.sort()
            for p in range(0, len(lst), 8):
                stats["st_phases"] += 1
                stats["st_wavefronts"] += wavefronts([o for _, o in lst[p:p + 8]])
        return img

    imgA, imgB = copy_stage(ga, ka, "A"), copy_stage(gb, kb, "B")

    # (b) fragment offsets (optiml_m16_frag_offsets) and ldmatrix (optiml_m16_load_a / load_b)
    for warp in range(threads // 32):
        wm0, wn0 = (warp // warps_n) * wm, (warp % warps_n) * wn

        def offs(l):
            if ka:
                r = wm0 + (l & 7) + 8 * ((l >> 3) & 1)
                oa = [ga.chunk(r, 2 * s + (l >> 4)) for s in range(ksteps)]
            else:
                r = (l & 7) + 8 * (l >> 4)
                oa = [ga.chunk(r, (wm0 >> 3) + 2 * i + ((l >> 3) & 1)) for i in range(mt)]
            if kb:
                r = wn0 + (l & 7) + 8 * (l >> 4)
                ob = [gb.chunk(r, 2 * s + ((l >> 3) & 1)) for s in range(ksteps)]
            else:
                r = (l & 7) + 8 * ((l >> 3) & 1)
                ob = [gb.chunk(r, (wn0 >> 3) + 2 * p + (l >> 4)) for p in range(nt // 2)]
            return oa, ob

        O = [offs(l) for l in range(32)]
        for s in range(ksteps):
            # A: tile i -> registers a[i][0..3]
            for i in range(mt):
                addr = [O[l][0][s] + 16 * i * ga.rowbytes if ka else O[l][0][i] + 16 * s * ga.rowbytes for l in range(32)]
                for p in range(4):
                    stats["ldsm_phases"] += 1
                    stats["ldsm_wavefronts"] += wavefronts(addr[8 * p:8 * p + 8])
                for lane in range(32):
                    for v in range(8):  # MMA A value v = register v/2, half v%2
                        srow, el = cute_ldsm(lane, v // 2, v % 2, not ka)
                        got = imgA.get(addr[srow] + 2 * el)
                        c = CUTE_A(lane, v)
                        want = ("A", wm0 + 16 * i + c % 16, 16 * s + c // 16)
                        if got != want:
                            errs.append("A warp %d s %d i %d lane %d v %d: %s, want %s" % (warp, s, i, lane, v, got, want))
            # B: pair p -> b[2p][0], b[2p][1], b[2p+1][0], b[2p+1][1]
            for p in range(nt // 2):
                addr = [O[l][1][s] + 16 * p * gb.rowbytes if kb else O[l][1][p] + 16 * s * gb.rowbytes for l in range(32)]
                for q in range(4):
                    stats["ldsm_phases"] += 1
                    stats["ldsm_wavefronts"] += wavefronts(addr[8 * q:8 * q + 8])
                regs = [(2 * p, 0), (2 * p, 1), (2 * p + 1, 0), (2 * p + 1, 1)]  # ldmatrix register -> (n8 tile, b reg)
                for lane in range(32):
                    for reg in range(4):
                        j, br = regs[reg]
                        for half in range(2):
                            srow, el = cute_ldsm(lane, reg, half, not kb)
                            got = imgB.get(addr[srow] + 2 * el)
                            c = CUTE_B(lane, 2 * br + half)
                            want = ("B", wn0 + 8 * j + c % 8, 16 * s + c // 8)
                            if got != want:
                                errs.append("B warp %d s %d j %d lane %d reg %d: %s, want %s" % (warp, s, j, lane, reg, got, want))
        # (c) accumulators: CuTe C position vs the epilogue's (row, column)
        for lane in range(32):
            g, t4 = lane >> 2, lane & 3
            for i, j, h, e in itertools.product(range(mt), range(nt), range(2), range(2)):
                c = CUTE_C(lane, 2 * h + e)
                want = (wm0 + 16 * i + c % 16, wn0 + 8 * j + c // 16)
                got = (wm0 + g + 16 * i + 8 * h, wn0 + 2 * t4 + 8 * j + e)  # optiml_m16_store: lm, ln + e
                if got != want:
                    errs.append("C warp %d lane %d: epilogue %s, MMA %s" % (warp, lane, got, want))
    return errs, stats


CONFIGS = [  # (BM, BN, BK, WM, WN) as in nvrtc_mma16.py / run_emu.sh
    (128, 128, 32, 64, 64), (128, 128, 64, 64, 64), (128, 128, 16, 64, 64), (128, 256, 32, 64, 64),
    (256, 128, 32, 64, 64), (64, 64, 32, 32, 32), (64, 128, 32, 16, 64), (32, 64, 32, 32, 32),
]


def main():
    bad = check_ptx_semantics()
    print("1. emulator's PTX semantics (ldmatrix N/T, mma A/B/C fragments) vs CuTe layouts: %s (%d mismatches)"
          % ("ok" if bad == 0 else "FAIL", bad))
    fails = 1 if bad else 0
    print("2. one block of the kernel, every warp / k16 step / tile, element by element:")
    for cfg in CONFIGS:
        for ta, tb in itertools.product((0, 1), (0, 1)):
            errs, st = model(cfg, ta, tb)
            ldsm = st["ldsm_wavefronts"] / max(1, st["ldsm_phases"])
            stw = st["st_wavefronts"] / max(1, st["st_phases"])
            ok = not errs and st["ldsm_wavefronts"] == st["ldsm_phases"] and st["st_wavefronts"] == st["st_phases"]
            fails += not ok
            print("   %-22s tA%d tB%d: %s  ldmatrix %d phases, %.3f wavefronts/phase; 16-byte stores %d phases, %.3f "
                  "wavefronts/phase" % ("%dx%dx%d w%dx%d" % cfg, ta, tb, "ok  " if ok else "FAIL", st["ldsm_phases"], ldsm,
                                        st["st_phases"], stw))
            for e in errs[:5]:
                print("      " + e)
    print("fragment model: %s" % ("ALL OK" if not fails else "%d FAILURES" % fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
