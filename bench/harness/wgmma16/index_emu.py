#!/usr/bin/env python3
"""Offline emulation of wgmma16.cu's index math (no GPU): (1) the grouped
tile order is a bijection onto the tiles of every batch item; (2) the
epilogue's quad transpose gives each thread the 8 contiguous columns it
stores, and every (row, column) of the 64 x BN warpgroup tile is written
exactly once with the value of the right accumulator."""
import itertools

def tile_coord(tile, tiles_m, tiles_n, G, TM, BN):
    per = tiles_m * tiles_n
    z, r = divmod(tile, per)
    gsz = G * tiles_n
    grp = r // gsz
    first_m = grp * G
    gm = min(G, tiles_m - first_m)
    rr = r - grp * gsz
    return z, (first_m + rr % gm) * TM, (rr // gm) * BN

for (M, N, G, TM, BN, batch) in [(1024, 1024, 8, 128, 256, 3), (264, 520, 8, 128, 256, 2), (8192, 8192, 8, 128, 256, 1),
                                  (1000, 1000, 8, 128, 256, 1), (3, 97, 1, 64, 64, 4), (1000, 136, 3, 128, 128, 2)]:
    tm, tn = -(-M // TM), -(-N // BN)
    seen = set(tile_coord(t, tm, tn, G, TM, BN) for t in range(tm * tn * batch))
    want = set((z, i * TM, j * BN) for z in range(batch) for i in range(tm) for j in range(tn))
    assert seen == want, (M, N, G)
print("tile order: bijective on all test shapes")

def quad_transpose(W):  # W[t] = list of 4 words of lane t of the quad
    W = [list(w) for w in W]
    # stage 1 (xor 2)
    S = [(W[t][0], W[t][1]) if t & 2 else (W[t][2], W[t][3]) for t in range(4)]
    R = [S[t ^ 2] for t in range(4)]
    for t in range(4):
        if t & 2: W[t][0], W[t][1] = R[t]
        else: W[t][2], W[t][3] = R[t]
    S = [(W[t][0], W[t][2]) if t & 1 else (W[t][1], W[t][3]) for t in range(4)]
    R = [S[t ^ 1] for t in range(4)]
    for t in range(4):
        if t & 1: W[t][0], W[t][2] = R[t]
        else: W[t][1], W[t][3] = R[t]
    return W

for BN in (64, 128, 256):
    written = {}
    for w, g, t in itertools.product(range(4), range(8), range(4)):
        pass
    # per quad (w, g): lanes t = 0..3
    for w, g in itertools.product(range(4), range(8)):
        row0 = 16 * w + g
        for jq in range(BN // 32):
            for h in range(2):
                # before: lane t word jj = accumulator pair (4j + 2h, 4j + 2h + 1), cols 8j + 2t, +1
                W = [[(("acc", w, g, t, 4 * (4 * jq + jj) + 2 * h), ("acc", w, g, t, 4 * (4 * jq + jj) + 2 * h + 1),
                       8 * (4 * jq + jj) + 2 * t) for jj in range(4)] for t in range(4)]
                Wt = quad_transpose(W)
                for t in range(4):
                    c16 = 32 * jq + 8 * t
                    for r in range(4):
                        lo, hi, col = Wt[t][r]
                        assert col == c16 + 2 * r, (BN, w, g, jq, t, r, col, c16)
                        for e, v in ((0, lo), (1, hi)):
                            key = (row0 + 8 * h, c16 + 2 * r + e)
                            assert key not in written
                            written[key] = v
    assert len(written) == 64 * BN
    # the PTX accumulator layout: d[4j + q] = (row 16w + g + 8(q >> 1), col 8j + 2t + (q & 1))
    for (row, col), (_, w, g, t, i) in written.items():
        j, q = divmod(i, 4)
        assert (16 * w + g + 8 * (q >> 1), 8 * j + 2 * t + (q & 1)) == (row, col)
    print("epilogue BN=%d: quad transpose + 16-byte stores cover the 64 x %d tile once, right accumulators" % (BN, BN))
