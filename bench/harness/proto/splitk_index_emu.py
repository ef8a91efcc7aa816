#!/usr/bin/env python3
"""Exhaustive emulation of the split-K index / partition math of
matmul_f32_splitk.cu (no GPU). Integer data, exact arithmetic.

Emulates, line by line in the kernel's formulas:
  launch 1 (optiml_matmul, S > 1): grid (gx, gy, Z*S [+ extra]), the block
    z loop (z = blockIdx.z / S, + Z, ...), the split's K range (balanced
    whole k-tiles), the pointer offsets of A/B (both transposes) including
    the k-tile loop bounds of the loaders, and the partial-tile epilogue
    (thread -> (m, n) map) writing W[((s*batch + z)*M + m)*N + n];
  launch 2 (optiml_splitk_reduce): grid-stride over idx, (row, n0, z, m)
    decode, W reads of every split in fixed order, C writes with strideC.
Checks: every W element written exactly once per launch, W reads only
written elements, every C output written exactly once, nothing else
written, K ranges disjoint, covering [0, K), starting at multiples of BK,
balanced; the result equals A @ B exactly (integer inputs).

  python3 bench/harness/proto/splitk_index_emu.py [--quick]
"""
import itertools
import sys

import numpy as np


def k_range(s, S, K, BK):
    T = (K + BK - 1) // BK
    t0, t1 = s * T // S, (s + 1) * T // S
    kb = min(t0 * BK, K)
    ke = min(t1 * BK, K)
    return kb, ke


def launch1(A, B, batch, M, N, K, S, cfg, zcap, extra_z, transA, transB, strideA, strideB):
    BM, BN, BK, TM, TN, LX = cfg
    TX, TY = BN // TN, BM // TM
    LY = 32 // LX
    WARPS_X = TX // LX
    THREADS = TX * TY
    W = np.full(S * batch * M * N, np.nan)
    writes = np.zeros(S * batch * M * N, dtype=np.int64)
    gx, gy = -(-N // BN), -(-M // BM)
    Z = min(batch, zcap // S) if zcap // S >= 1 else 1
    gz = Z * S + extra_z
    lda = M if transA else K
    ldb = K if transB else N
    for bz in range(gz):
        zs = gz // S
        if bz >= zs * S:
            continue
        z = bz // S
        while z < batch:
            s = bz % S
            T = (K + BK - 1) // BK
            t0, t1 = s * T // S, (s + 1) * T // S
            kb = t0 * BK if t0 * BK < K else K
            ke = t1 * BK if t1 * BK < K else K
            KE = ke - kb
            assert kb % BK == 0 or kb == K
            aoff = z * strideA + (kb * M if transA else kb)
            boff = z * strideB + (kb if transB else kb * N)
            for by in range(gy):
                for bx in range(gx):
                    bm, bn = by * BM, bx * BN
                    if bm >= M or bn >= N:
                        continue
                    # main loop: tiles kpos = 0, BK, ... < KE; element (row r, local k)
                    # of a loader is read iff kpos + k < KE (and r < R): emulate the
                    # accumulation per output with the same bounds
                    ntiles = (KE + BK - 1) // BK
                    acc = {}
                    for tid in range(THREADS):
                        warp, lane = tid >> 5, tid & 31
                        tx = (warp % WARPS_X) * LX + (lane % LX)
                        ty = (warp // WARPS_X) * LY + (lane // LX)
                        for c in range(TN // 4):
                            n0 = bn + c * (TX * 4) + tx * 4
                            for i in range(TM):
                                m = bm + (i // 4) * (TY * 4) + ty * 4 + (i % 4)
                                if m >= M:
                                    continue
                                for j in range(4):
                                    n = n0 + j
                                    if n >= N:
                                        continue
                                    v = 0
                                    for t in range(ntiles):
                                        for kk in range(BK):
                                            kl = t * BK + kk
                                            if kl >= KE:
                                                continue
                                            ai = aoff + (kl * lda + m if transA else m * lda + kl)
                                            bi = boff + (n * ldb + kl if transB else kl * ldb + n)
                                            v += A[ai] * B[bi]
                                    # W index (64-bit in the kernel)
                                    widx = ((s * batch + z) * M * N) + m * N + n
                                    W[widx] = v
                                    writes[widx] += 1
            z = z + zs if batch - z > zs else batch
    return W, writes


def launch2(W, C, batch, M, N, S, strideC, grid, threads, epi):
    G4 = N // 4 + (N % 4 != 0)
    total = batch * M * G4
    plane = batch * M * N
    step = grid * threads
    cw = np.zeros(len(C), dtype=np.int64)
    for start in range(step):
        idx = start
        while idx < total:
            row = idx // G4
            n0 = (idx - row * G4) * 4
            z = row // M
            m = row - z * M
            w = row * N + n0
            for j in range(4):
                if n0 + j < N:
                    vals = [W[w + s * plane + j] for s in range(S)]
                    assert not any(np.isnan(vals)), "read of an unwritten W element"
                    v = vals[0]
                    for q in vals[1:]:
                        v += q
                    ci = z * strideC + m * N + n0 + j
                    C[ci] = epi(v, C[ci], n0 + j)
                    cw[ci] += 1
            idx += step
    return cw


def check(batch, M, N, K, S, cfg, zcap, extra_z, transA, transB, padA, padB, padC, grid, rng):
    BK = cfg[2]
    # K ranges
    rs = [k_range(s, S, K, BK) for s in range(S)]
    assert rs[0][0] == 0 and rs[-1][1] == K
    for (a0, a1), (b0, b1) in zip(rs, rs[1:]):
        assert a1 == b0 and a0 <= a1
    T = (K + BK - 1) // BK
    nt = [-(-(e - b) // BK) for b, e in rs]
    assert max(nt) - min(nt) <= 1 and max(nt) == -(-T // S), (nt, T, S)
    sA = M * K + padA
    sB = K * N + padB
    sC = M * N + padC
    A = rng.integers(-3, 4, size=max(1, batch * sA)).astype(np.float64)
    B = rng.integers(-3, 4, size=max(1, batch * sB)).astype(np.float64)
    W, wr = launch1(A, B, batch, M, N, K, S, cfg, zcap, extra_z, transA, transB, sA, sB)
    assert (wr == 1).all(), "W element written %s times" % (set(wr.tolist()))
    C = np.full(batch * sC + 3, 7.0)
    bias = rng.integers(-3, 4, size=N).astype(np.float64)
    epi = lambda v, old, n: 2 * v + 0.5 * old + bias[n]  # noqa: E731
    C0 = C.copy()
    cw = launch2(W, C, batch, M, N, S, sC, grid, 32, epi)
    for z in range(batch):
        Az = A[z * sA: z * sA + M * K]
        Bz = B[z * sB: z * sB + K * N]
        Am = Az.reshape(K, M).T if transA else Az.reshape(M, K)
        Bm = Bz.reshape(N, K).T if transB else Bz.reshape(K, N)
        ref = 2 * (Am @ Bm) + 0.5 * 7.0 + bias[None, :]
        got = C[z * sC: z * sC + M * N].reshape(M, N)
        assert np.array_equal(got, ref), (batch, M, N, K, S, z)
        assert (cw[z * sC: z * sC + M * N] == 1).all()
        cw[z * sC: z * sC + M * N] = 0
    assert (cw == 0).all(), "write outside the outputs"
    mask = np.ones(len(C), bool)
    for z in range(batch):
        mask[z * sC: z * sC + M * N] = False
    assert np.array_equal(C[mask], C0[mask])


def main():
    quick = "--quick" in sys.argv
    rng = np.random.default_rng(1)
    # (BM, BN, BK, TM, TN, WARP_N): scaled-down tiles that keep the formulas
    cfgs = [(16, 32, 8, 4, 4, 8), (32, 16, 4, 4, 4, 4), (16, 16, 8, 4, 4, 4)]
    n = 0
    # K range properties alone, large sweep (cheap)
    for K in range(0, 600):
        for S in (1, 2, 3, 4, 5, 8, 16, 32, 64):
            for BK in (4, 8, 16):
                rs = [k_range(s, S, K, BK) for s in range(S)]
                assert rs[0][0] == 0 and rs[-1][1] == K
                assert all(a[1] == b[0] for a, b in zip(rs, rs[1:]))
                assert all(b % BK == 0 or b == K for b, _ in rs)
                T = (K + BK - 1) // BK
                nt = [-(-(e - b) // BK) for b, e in rs]
                assert max(nt) == -(-T // S) and min(nt) == T // S
                n += 1
    print("k-range properties: %d (K, S, BK) combinations ok" % n, flush=True)
    n = 0
    shapes = [(1, 1, 1, 1), (2, 5, 7, 0), (3, 17, 9, 13), (1, 33, 35, 40), (2, 16, 32, 8), (4, 3, 5, 3),
              (1, 20, 4, 100), (70, 3, 5, 7)]
    splits = [1, 2, 3, 4, 8, 16]
    for (batch, M, N, K), S, cfg in itertools.product(shapes, splits, cfgs):
        if quick and cfg != cfgs[0]:
            continue
        for zcap, extra_z in ((65535, 0), (S * 2, 0), (S * 3, 1), (S, S - 1)):
            if batch * M * N * max(K, 1) * S > 400000 and zcap != 65535:
                continue
            for tA, tB in ((0, 0), (1, 1), (1, 0), (0, 1)):
                pads = (0, 0, 0) if (tA, tB) != (0, 0) else (1, 3, 2)
                grid = 1 + (batch * M * N) % 5
                check(batch, M, N, K, S, cfg, zcap, extra_z, tA, tB, *pads, grid, rng)
                n += 1
    print("emulated launches: %d cases ok" % n)
    # 64-bit W offsets: the index formulas in Python are exact; show which
    # shapes of the harness exceed 2^31 so the 64-bit paths get exercised
    for S, batch, M, N in ((8, 1, 1, 540000000), (16, 1, 1, 540000000)):
        last = ((S - 1) * batch + 0) * M * N + (M - 1) * N + N - 1
        print("W max index S=%d M=%d N=%d: %d (%s 2^31)" % (S, M, N, last, ">" if last >= 2**31 else "<"))
    print("ALL OK")


if __name__ == "__main__":
    main()
