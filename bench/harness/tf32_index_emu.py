# Emulates the index math of matmul_tf32.cu (no GPU needed):
#  1. one block tile, several k-tiles, no edges: TileCopy chunk -> smem
#     placement, the fragment loads of both schemes (OPTIML_FRAG_LOAD 0: 64-bit
#     LDS; 1: ldmatrix.x4 / LDS.64 / LDS.32 with the P/Q role swap), PTX
#     m16n8k8 semantics, the epilogue's placement (every C element written
#     exactly once). Checks C == A @ B exactly (integer data).
#  2. the cp.async / barrier schedule of both main loops (OPTIML_KLOOP 0, 1)
#     for STAGES 2..4 and 1..9 k-tiles: every fragment read finds its tile
#     landed and published, and no refill of a stage overlaps a read of it.
#  3. shared-memory bank conflicts of every fragment load and of the
#     cp.async stores for the H200 configs (wavefronts per instruction).
# Exit status 1 on any failure.
import itertools, sys
import numpy as np

FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg)


class Cfg:
    def __init__(self, BM, BN, BK, WM, WN, TA, TB, V2=True):
        self.BM, self.BN, self.BK, self.WM, self.WN, self.TA, self.TB, self.V2 = BM, BN, BK, WM, WN, TA, TB, V2
        self.KA = TA == 0
        self.KB = TB == 1
        self.PADK = 4
        self.PADMN = 8 if V2 else 4
        self.LDA = BK + self.PADK if self.KA else BM + self.PADMN
        self.LDB = BK + self.PADK if self.KB else BN + self.PADMN
        self.THREADS = (BM // WM) * (BN // WN) * 32
        self.WARPS_N = BN // WN
        self.SWAP = V2 and self.KA and not self.KB
        self.P_KC = self.KB if self.SWAP else self.KA
        self.Q_KC = self.KA if self.SWAP else self.KB
        self.LDP = self.LDB if self.SWAP else self.LDA
        self.LDQ = self.LDA if self.SWAP else self.LDB
        self.WP = WN if self.SWAP else WM
        self.WQ = WM if self.SWAP else WN
        self.MT = self.WP // 16
        self.NT = self.WQ // 8
        self.Q_PERM = V2 and self.Q_KC and not self.SWAP

    def __str__(self):
        return "BM=%d BN=%d BK=%d WM=%d WN=%d TA=%d TB=%d V2=%d" % (
            self.BM, self.BN, self.BK, self.WM, self.WN, self.TA, self.TB, self.V2)


POISON = -999999


def tile_copy(c, TILE, KC, X, kpos):
    """TileCopy::run for all threads: returns the smem stage (flat) and the
    list of (tid, chunk index, smem float offset) of the 16-byte stores."""
    ROWS = TILE if KC else c.BK
    COLS = c.BK if KC else TILE
    LDS = COLS + (c.PADK if KC else c.PADMN)
    CPR = COLS // 4
    assert c.THREADS % CPR == 0
    RSTEP = c.THREADS // CPR
    ITERS = -(-ROWS // RSTEP)
    sm = np.full(ROWS * LDS, POISON, np.int64)
    stores = []
    for tid in range(c.THREADS):
        r0, c0 = tid // CPR, (tid % CPR) * 4
        for I in range(ITERS):
            if I * RSTEP >= ROWS - r0:
                continue
            r = r0 + I * RSTEP
            off = r * LDS + c0
            stores.append((tid, I, off))
            for j in range(4):
                srow = (0 if KC else kpos) + r
                scol = (kpos if KC else 0) + c0 + j
                assert sm[off + j] == POISON
                sm[off + j] = X[srow, scol]
    return sm, stores


def frag_offsets(c, tid):
    warp, lane = tid >> 5, tid & 31
    g, tig = lane >> 2, lane & 3
    wm0 = (warp // c.WARPS_N) * c.WM
    wn0 = (warp % c.WARPS_N) * c.WN
    if not c.V2:
        aoff = (wm0 + 2 * g) * c.LDA + 2 * tig if c.KA else (2 * tig) * c.LDA + wm0 + 2 * g
        boff = (wn0 + 2 * g) * c.LDB + 2 * tig if c.KB else (2 * tig) * c.LDB + wn0 + 2 * g
        return aoff, boff
    p0 = wn0 if c.SWAP else wm0
    q0 = wm0 if c.SWAP else wn0
    if c.P_KC:
        poff = (p0 + (lane & 7) + 8 * ((lane >> 3) & 1)) * c.LDP + 4 * (lane >> 4)
    else:
        poff = tig * c.LDP + p0 + 2 * g
    if c.Q_KC:
        cc, h, kh = lane & 7, (lane >> 4) & 1, (lane >> 3) & 1
        col = 4 * (cc >> 1) + 2 * (h ^ (cc >> 2)) + (cc & 1) if c.Q_PERM else 8 * h + cc
        qoff = (q0 + col) * c.LDQ + 4 * kh
    else:
        qoff = tig * c.LDQ + q0 + g
    return poff, qoff


def ldsm4(sm, addrs):
    """ldmatrix.x4 .b16 on 32-bit data: addrs[l] = float offset given by lane l
    (row l%8 of matrix l//8); returns r[lane][matrix] = word lane%4 of row lane//4."""
    r = np.zeros((32, 4), np.int64)
    for L in range(32):
        for mi in range(4):
            row = addrs[8 * mi + L // 4]
            assert row % 4 == 0, "ldmatrix row address not 16-byte aligned"
            r[L, mi] = sm[row + L % 4]
    return r


def load_frags(c, sP, sQ, S, offs):
    """Fragments of k8 step S for the 32 lanes of one warp: a[lane][MT][4], b[lane][NT][2].
    offs[lane] = (poff, qoff). Also returns the list of load instructions
    (kind, [per-lane float offset]) for the bank analysis."""
    a = np.zeros((32, c.MT, 4), np.int64)
    b = np.zeros((32, c.NT, 2), np.int64)
    insts = []
    if not c.V2:
        LDA, LDB = c.LDA, c.LDB
        for i in range(c.MT):
            if c.KA:
                lo = [offs[L][0] + 16 * i * LDA + 8 * S for L in range(32)]
                hi = [offs[L][0] + (16 * i + 1) * LDA + 8 * S for L in range(32)]
                for L in range(32):
                    a[L, i, 0], a[L, i, 2] = sP[lo[L]], sP[lo[L] + 1]
                    a[L, i, 1], a[L, i, 3] = sP[hi[L]], sP[hi[L] + 1]
            else:
                lo = [offs[L][0] + 8 * S * LDA + 16 * i for L in range(32)]
                hi = [offs[L][0] + (8 * S + 1) * LDA + 16 * i for L in range(32)]
                for L in range(32):
                    a[L, i, 0], a[L, i, 1] = sP[lo[L]], sP[lo[L] + 1]
                    a[L, i, 2], a[L, i, 3] = sP[hi[L]], sP[hi[L] + 1]
            insts += [("P", "lds64", lo), ("P", "lds64", hi)]
        for p in range(c.NT // 2):
            if c.KB:
                v0 = [offs[L][1] + 16 * p * LDB + 8 * S for L in range(32)]
                v1 = [offs[L][1] + (16 * p + 1) * LDB + 8 * S for L in range(32)]
                for L in range(32):
                    b[L, 2 * p, 0], b[L, 2 * p, 1] = sQ[v0[L]], sQ[v0[L] + 1]
                    b[L, 2 * p + 1, 0], b[L, 2 * p + 1, 1] = sQ[v1[L]], sQ[v1[L] + 1]
            else:
                v0 = [offs[L][1] + 8 * S * LDB + 16 * p for L in range(32)]
                v1 = [offs[L][1] + (8 * S + 1) * LDB + 16 * p for L in range(32)]
                for L in range(32):
                    b[L, 2 * p, 0], b[L, 2 * p + 1, 0] = sQ[v0[L]], sQ[v0[L] + 1]
                    b[L, 2 * p, 1], b[L, 2 * p + 1, 1] = sQ[v1[L]], sQ[v1[L] + 1]
            insts += [("Q", "lds64", v0), ("Q", "lds64", v1)]
        return a, b, insts
    LDP, LDQ = c.LDP, c.LDQ
    for i in range(c.MT):
        if c.P_KC:
            ad = [offs[L][0] + 16 * i * LDP + 8 * S for L in range(32)]
            a[:, i, :] = ldsm4(sP, ad)
            insts.append(("P", "ldsm", ad))
        else:
            k0 = [offs[L][0] + 8 * S * LDP + 16 * i for L in range(32)]
            k1 = [offs[L][0] + (8 * S + 4) * LDP + 16 * i for L in range(32)]
            for L in range(32):
                a[L, i, 0], a[L, i, 1] = sP[k0[L]], sP[k0[L] + 1]
                a[L, i, 2], a[L, i, 3] = sP[k1[L]], sP[k1[L] + 1]
            insts += [("P", "lds64", k0), ("P", "lds64", k1)]
    for p in range(c.NT // 2):
        if c.Q_KC:
            ad = [offs[L][1] + 16 * p * LDQ + 8 * S for L in range(32)]
            r = ldsm4(sQ, ad)
            b[:, 2 * p, 0], b[:, 2 * p, 1] = r[:, 0], r[:, 1]
            b[:, 2 * p + 1, 0], b[:, 2 * p + 1, 1] = r[:, 2], r[:, 3]
            insts.append(("Q", "ldsm", ad))
        else:
            for h in range(2):
                j = 2 * p + h
                k0 = [offs[L][1] + 8 * S * LDQ + 16 * p + 8 * h for L in range(32)]
                k1 = [offs[L][1] + (8 * S + 4) * LDQ + 16 * p + 8 * h for L in range(32)]
                for L in range(32):
                    b[L, j, 0], b[L, j, 1] = sQ[k0[L]], sQ[k1[L]]
                insts += [("Q", "lds32", k0), ("Q", "lds32", k1)]
    return a, b, insts


def mma_warp(a, b, acc_w, i, j):
    """PTX mma.m16n8k8 .row.col tf32: fragments of all 32 lanes."""
    Am = np.zeros((16, 8), np.int64)
    Bm = np.zeros((8, 8), np.int64)
    for L in range(32):
        gg, tt = L >> 2, L & 3
        Am[gg, tt], Am[gg + 8, tt], Am[gg, tt + 4], Am[gg + 8, tt + 4] = a[L, i]
        Bm[tt, gg], Bm[tt + 4, gg] = b[L, j]
    assert (Am > POISON).all() and (Bm > POISON).all(), "fragment read an unwritten smem word"
    Cm = Am @ Bm
    for L in range(32):
        gg, tt = L >> 2, L & 3
        acc_w[L, i, j] += [Cm[gg, 2 * tt], Cm[gg, 2 * tt + 1], Cm[gg + 8, 2 * tt], Cm[gg + 8, 2 * tt + 1]]


def epilogue_positions(c, tid):
    """[(m, n, i, j, q)] of every accumulator of thread tid, as store_tile
    writes them (block-tile coordinates)."""
    warp, lane = tid >> 5, tid & 31
    g, tig = lane >> 2, lane & 3
    mw = (warp // c.WARPS_N) * c.WM
    nw = (warp % c.WARPS_N) * c.WN
    out = []
    if not c.V2:
        row0, col0 = mw + 2 * g, nw + 4 * tig
        for p in range(c.NT // 2):
            n0 = col0 + 16 * p
            for i in range(c.MT):
                for r in range(2):
                    m = row0 + 16 * i + r
                    for q in range(4):
                        out.append((m, n0 + q, i, 2 * p + (q & 1), (q >> 1) + 2 * r))
    elif c.SWAP:
        for i in range(c.MT):
            n0 = nw + 16 * i + 2 * g
            for j in range(c.NT):
                for e in range(2):
                    m = mw + 8 * j + 2 * tig + e
                    out.append((m, n0, i, j, e))
                    out.append((m, n0 + 1, i, j, e + 2))
    elif c.Q_PERM:
        for p in range(c.NT // 2):
            n0 = nw + 16 * p + 4 * tig
            for i in range(c.MT):
                for h in range(2):
                    m = mw + 16 * i + (g + 8 * h if c.P_KC else 2 * g + h)
                    for q in range(4):
                        out.append((m, n0 + q, i, 2 * p + ((q >> 1) ^ (tig >> 1)), (q & 1) + 2 * h))
    else:
        for j in range(c.NT):
            n0 = nw + 8 * j + 2 * tig
            for i in range(c.MT):
                for h in range(2):
                    m = mw + 16 * i + (g + 8 * h if c.P_KC else 2 * g + h)
                    out.append((m, n0, i, j, 2 * h))
                    out.append((m, n0 + 1, i, j, 2 * h + 1))
    return out


def run_block(c, K, seed=1):
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 4, (c.BM, K)).astype(np.int64)
    B = rng.integers(-3, 4, (K, c.BN)).astype(np.int64)
    Ast = A.T.copy() if c.TA else A
    Bst = B.T.copy() if c.TB else B
    acc = np.zeros((c.THREADS, c.MT, c.NT, 4), np.int64)
    for kt in range(K // c.BK):
        kpos = kt * c.BK
        sA, _ = tile_copy(c, c.BM, c.KA, Ast, kpos)
        sB, _ = tile_copy(c, c.BN, c.KB, Bst, kpos)
        sP, sQ = (sB, sA) if c.SWAP else (sA, sB)
        for S in range(c.BK // 8):
            for w in range(c.THREADS // 32):
                offs = [frag_offsets(c, 32 * w + L) for L in range(32)]
                a, b, _ = load_frags(c, sP, sQ, S, offs)
                acc_w = acc[32 * w:32 * w + 32]
                for i in range(c.MT):
                    for j in range(c.NT):
                        mma_warp(a, b, acc_w, i, j)
    C = np.full((c.BM, c.BN), -10 ** 9, np.int64)
    for tid in range(c.THREADS):
        for (m, n, i, j, q) in epilogue_positions(c, tid):
            assert C[m, n] == -10 ** 9, "C element written twice"
            C[m, n] = acc[tid, i, j, q]
    ok = (C == A @ B).all()
    check(ok, "index emulation mismatch: %s K=%d" % (c, K))
    return ok


# ---------------------------------------------------------------- banks ---
def wavefronts(kind, offs):
    """Shared-memory wavefronts of one warp instruction (4-byte banks, 32 banks,
    128 bytes per wavefront). lds32: one phase of 32 lanes; lds64: two
    half-warp phases; lds128 / cp16 stores: four quarter-warp phases; ldsm:
    four phases of 8 rows x 16 bytes."""
    def phase_cost(words):
        banks = {}
        for wd in set(words):
            banks.setdefault(wd % 32, set()).add(wd)
        return max(len(v) for v in banks.values())
    if kind == "lds32":
        return phase_cost(offs)
    if kind == "lds64":
        return sum(phase_cost([o + e for o in offs[h * 16:(h + 1) * 16] for e in range(2)]) for h in range(2))
    if kind in ("lds128", "st128"):
        return sum(phase_cost([o + e for o in offs[q * 8:(q + 1) * 8] for e in range(4)]) for q in range(4))
    if kind == "ldsm":
        return sum(phase_cost([o + e for o in offs[q * 8:(q + 1) * 8] for e in range(4)]) for q in range(4))
    raise ValueError(kind)


IDEAL = {"lds32": 1, "lds64": 2, "lds128": 4, "st128": 4, "ldsm": 4}


def bank_report(c, strict):
    """Max wavefronts / ideal over every fragment load of warp 0..n and the
    cp.async stores (16-byte chunks, per warp)."""
    rng = np.zeros((1,))
    worst = {}
    K = c.BK
    X = np.zeros((max(c.BM, c.BN, K) + 1, max(c.BM, c.BN, K) + 1), np.int64)
    sA, stA = tile_copy(c, c.BM, c.KA, X, 0)
    sB, stB = tile_copy(c, c.BN, c.KB, X, 0)
    sP, sQ = (sB, sA) if c.SWAP else (sA, sB)
    for S in range(c.BK // 8):
        for w in range(c.THREADS // 32):
            offs = [frag_offsets(c, 32 * w + L) for L in range(32)]
            _, _, insts = load_frags(c, sP, sQ, S, offs)
            for (op, kind, o) in insts:
                key = op + ":" + kind
                worst[key] = max(worst.get(key, 0), wavefronts(kind, o) / IDEAL[kind])
    for name, st in (("A", stA), ("B", stB)):
        by = {}
        for (tid, I, off) in st:
            by.setdefault((tid >> 5, I), {})[tid & 31] = off
        for (w, I), d in by.items():
            offs = [d.get(L) for L in range(32)]
            offs = [o if o is not None else None for o in offs]
            # lanes without a chunk: drop them from their phase
            ph = 0
            for q in range(4):
                lane_offs = [offs[L] for L in range(8 * q, 8 * q + 8) if offs[L] is not None]
                if lane_offs:
                    words = [o + e for o in lane_offs for e in range(4)]
                    banks = {}
                    for wd in words:
                        banks.setdefault(wd % 32, set()).add(wd)
                    ph += max(len(v) for v in banks.values())
            key = "store" + name
            worst[key] = max(worst.get(key, 0), ph / 4)
    line = " ".join("%s=%.2g" % (k, v) for k, v in sorted(worst.items()))
    print("  banks %-48s %s" % (c, line))
    if strict:
        for k, v in worst.items():
            check(v <= 1.0, "bank conflicts %s: %s x%.2f" % (c, k, v))
    return worst


# ------------------------------------------------------------- pipeline ---
def simulate_schedule(STAGES, KSTEPS, ktiles, kloop):
    """Program order of one thread of gemm_block (all threads run the same
    order): returns a list of events. cp.async groups complete in order; a
    wait_group<n> completes all but the newest n committed groups."""
    ev = []
    pending = []   # (tile, stage) of the group being built
    groups = []    # committed groups: list of [(tile, stage)]

    def issue(tile, stage):
        pending.append((tile, stage))
        ev.append(("copy", tile, stage))

    def commit():
        groups.append(list(pending))
        pending.clear()
        ev.append(("commit", len(groups) - 1))

    def wait(n):
        ev.append(("wait", max(0, len(groups) - n)))  # groups [0, x) complete

    def barrier():
        ev.append(("bar",))

    def read(tile, stage):
        ev.append(("read", tile, stage))

    if kloop == 0:
        for s in range(STAGES - 1):
            if s < ktiles:
                issue(s, s)
            commit()
        rd, wr = 0, STAGES - 1
        for t in range(ktiles):
            wait(STAGES - 2)
            barrier()
            tn = t + STAGES - 1
            if tn < ktiles:
                issue(tn, wr)
            commit()
            for S in range(KSTEPS):
                read(t, rd)
            rd = (rd + 1) % STAGES
            wr = (wr + 1) % STAGES
    else:
        for s in range(STAGES):
            issue(s, s)  # tiles >= ktiles are zero-filled, still a write
            commit()
        wait(STAGES - 1)
        barrier()
        read(0, 0)  # step 0 of tile 0
        rd = 0
        for t in range(ktiles):
            nx = (rd + 1) % STAGES
            for S in range(KSTEPS):
                if S + 1 < KSTEPS:
                    read(t, rd)  # step S+1
                else:
                    wait(STAGES - 2)
                    barrier()
                    issue(t + STAGES, rd)
                    commit()
                    read(t + 1, nx)  # step 0 of tile t+1 (unused past the end)
            rd = nx
    wait(0)
    barrier()
    return ev, groups


def check_schedule(STAGES, KSTEPS, ktiles, kloop):
    ev, groups = simulate_schedule(STAGES, KSTEPS, ktiles, kloop)
    group_of = {}
    for gi, gr in enumerate(groups):
        for (tile, stage) in gr:
            group_of[(tile, stage)] = gi
    epoch = 0
    complete = 0        # groups complete for this thread
    published = 0       # groups complete for every thread at the last barrier
    writes = {}         # stage -> list of (tile, issue epoch)
    reads = {}          # stage -> list of (tile, epoch)
    tag = "STAGES=%d KSTEPS=%d ktiles=%d KLOOP=%d" % (STAGES, KSTEPS, ktiles, kloop)
    for e in ev:
        if e[0] == "copy":
            writes.setdefault(e[2], []).append((e[1], epoch))
        elif e[0] == "wait":
            complete = max(complete, e[1])
        elif e[0] == "bar":
            epoch += 1
            published = complete
        elif e[0] == "read":
            tile, stage = e[1], e[2]
            if tile >= ktiles:   # the unused prefetch past the last tile
                reads.setdefault(stage, []).append((tile, epoch))
                continue
            g = group_of.get((tile, stage))
            check(g is not None, tag + ": tile %d never copied to stage %d" % (tile, stage))
            if g is not None:
                check(g < published, tag + ": tile %d read before it was waited for and published" % tile)
            reads.setdefault(stage, []).append((tile, epoch))
    # each read of (tile, stage) at epoch er: the write of that tile was issued
    # at an earlier epoch, and every other write to the stage is either at an
    # epoch before that tile's write or after the read's epoch (a barrier in
    # between), so no write races a read.
    for stage, rl in reads.items():
        wl = writes.get(stage, [])
        for (tile, er) in rl:
            mine = [ew for (wt, ew) in wl if wt == tile]
            if tile < ktiles:
                check(len(mine) == 1 and mine[0] < er, tag + ": tile %d stage %d write/read epochs" % (tile, stage))
            for (wt, ew) in wl:
                if wt == tile:
                    continue
                if mine and ew <= mine[0]:
                    continue
                check(ew > er, tag + ": refill of stage %d (tile %d, epoch %d) races the read of tile %d (epoch %d)"
                      % (stage, wt, ew, tile, er))
    # after the final wait<0> + barrier nothing is pending
    check(complete == len(groups), tag + ": groups left pending")


def main():
    n = 0
    print("== index emulation (C == A @ B, integer data)")
    tilings = [
        (32, 64, 16, 16, 32), (64, 32, 32, 32, 16), (32, 32, 8, 32, 32), (64, 64, 16, 32, 64),
        (64, 64, 16, 64, 32), (32, 64, 24, 16, 64), (128, 64, 32, 64, 64),
    ]
    for V2 in (False, True):
        for (BM, BN, BK, WM, WN) in tilings:
            for TA, TB in itertools.product([0, 1], [0, 1]):
                c = Cfg(BM, BN, BK, WM, WN, TA, TB, V2)
                if c.THREADS % (c.BK // 4) or c.THREADS % (BM // 4) or c.THREADS % (BN // 4):
                    continue
                ok = run_block(c, 2 * BK, seed=n)
                n += 1
                print("  %-52s %s" % (c, "OK" if ok else "MISMATCH"))
    print("== cp.async / barrier schedule")
    for kloop in (0, 1):
        for STAGES in (2, 3, 4):
            for KSTEPS in (1, 2, 3, 4):
                for kt in range(1, 10):
                    check_schedule(STAGES, KSTEPS, kt, kloop)
    print("  %s" % ("OK" if not FAILS else "FAILURES above"))
    print("== shared-memory wavefronts per instruction / ideal (1 = conflict-free)")
    for V2 in (False, True):
        for (BM, BN, BK, WM, WN) in [(128, 128, 32, 64, 64), (128, 256, 32, 64, 64), (256, 128, 32, 64, 64),
                                     (128, 128, 16, 64, 64), (128, 128, 32, 64, 32), (64, 64, 32, 32, 32)]:
            for TA, TB in itertools.product([0, 1], [0, 1]):
                c = Cfg(BM, BN, BK, WM, WN, TA, TB, V2)
                # fragment loads must be conflict-free in the new scheme
                w = bank_report(c, strict=False)
                if V2:
                    for k, v in w.items():
                        if not k.startswith("store"):
                            check(v <= 1.0, "bank conflicts %s: %s x%.2f" % (c, k, v))
                    if BK % 32 == 0:
                        for k, v in w.items():
                            if k.startswith("store"):
                                check(v <= 1.0, "store bank conflicts %s: %s x%.2f" % (c, k, v))
    print("ALL OK" if not FAILS else "FAIL (%d)" % len(FAILS))
    return 0 if not FAILS else 1


if __name__ == "__main__":
    sys.exit(main())
