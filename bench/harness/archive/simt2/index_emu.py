#!/usr/bin/env python3
"""Emulates simt2.cu's index math for each config of configs.txt (no GPU):
cp.async writes (Loader) vs fragment reads (load_a / load_b / fma_step):
every (row, k) / (k, col) of a tile is written exactly once and every thread
reads, for accumulator (i, j) at step k, exactly A[row_i][k] and B[k][col_j];
the accumulators cover the BM x BN tile once. Also counts shared-memory
bank conflicts (distinct 16-byte addresses in one bank group) per LDS.128 and
per cp.async warp write, per whole warp and per 8-lane phase."""
import os, re, collections
HERE = os.path.dirname(os.path.abspath(__file__))

def parse(flags):
    d = dict(BM=128, BN=128, BK=16, WM=32, WN=64, TM=8, TN=8, STAGES=3, A_SWZ=1, B_PAD=0)
    for m in re.finditer(r"-DSIMT2_(\w+)=(\d+)", flags):
        d[m.group(1)] = int(m.group(2))
    return d

def conflicts(addrs_by_lane):
    """max over the warp / over 8-lane phases of distinct 16B chunks per 128B bank window position"""
    def ways(lanes):
        per_bank = collections.defaultdict(set)
        for a in lanes:
            per_bank[(a // 16) % 8].add(a // 16)  # 16-byte unit index within 128 B (4 banks each)
        return max(len(v) for v in per_bank.values())
    whole = ways(addrs_by_lane)
    phase = max(ways(addrs_by_lane[p * 8:(p + 1) * 8]) for p in range(4))
    return whole, phase

def check(name, c):
    BM, BN, BK, WM, WN, TM, TN = (c[k] for k in "BM BN BK WM WN TM TN".split())
    CH = BK // 4; BCH = BN // 4
    TH = (BM // WM) * (BN // WN) * 32
    LX, LY = WN // TN, WM // TM
    AP = BK + (0 if c["A_SWZ"] else 4); BP = BN + c["B_PAD"]
    A_STAGE = BM * AP
    swz = (lambda r, ch: ch ^ ((r >> 2) & (CH - 1))) if c["A_SWZ"] else (lambda r, ch: ch)
    LA = BM * CH // TH; LB = BK * BCH // TH; ARSTEP = TH // CH; BKSTEP = TH // BCH
    sm = {}
    wr_conf = [0, 0]
    # writes (VEC path); value tags ('A', r, k) / ('B', k, n)
    for l in range(LA):
        addrs = []
        for tid in range(TH):
            arow, ca = tid // CH, tid % CH
            r = arow + l * ARSTEP
            dst = 4 * (arow * AP + swz(arow, ca) * 4) + 4 * (l * ARSTEP * AP)
            for e in range(4):
                assert dst + 4 * e not in sm, "A overwrite"
                sm[dst + 4 * e] = ("A", r, ca * 4 + e)
            addrs.append(dst)
            if tid % 32 == 31:
                w = conflicts(addrs); wr_conf = [max(wr_conf[0], w[0]), max(wr_conf[1], w[1])]; addrs = []
    for l in range(LB):
        addrs = []
        for tid in range(TH):
            bk, bcol = tid // BCH, (tid % BCH) * 4
            dst = 4 * (A_STAGE + bk * BP + bcol) + 4 * (l * BKSTEP * BP)
            for e in range(4):
                assert dst + 4 * e not in sm, "B overwrite"
                sm[dst + 4 * e] = ("B", bk + l * BKSTEP, bcol + e)
            addrs.append(dst)
            if tid % 32 == 31:
                w = conflicts(addrs); wr_conf = [max(wr_conf[0], w[0]), max(wr_conf[1], w[1])]; addrs = []
    assert sum(1 for v in sm.values() if v[0] == "A") == BM * BK
    assert sum(1 for v in sm.values() if v[0] == "B") == BK * BN
    covered = collections.Counter()
    rd_a = [0, 0]; rd_b = [0, 0]
    for warp in range(TH // 32):
        wm0 = (warp // (BN // WN)) * WM; wn0 = (warp % (BN // WN)) * WN
        for g in range(BK // 4):
            for i in range(TM):
                addrs = []
                for lane in range(32):
                    ly, lx = lane // LX, lane % LX
                    ar0 = wm0 + ly * 4
                    q, r = i // 4, i % 4
                    row = ar0 + q * LY * 4
                    off = row * AP + r * AP + ((g ^ (((row >> 2) & (CH - 1)) if c["A_SWZ"] else 0)) << 2)
                    for kk in range(4):
                        assert sm[4 * (off + kk)] == ("A", row + r, 4 * g + kk), (name, "A read")
                    addrs.append(4 * off)
                w = conflicts(addrs); rd_a = [max(rd_a[0], w[0]), max(rd_a[1], w[1])]
        for k in range(BK):
            for p in range(TN // 4):
                addrs = []
                for lane in range(32):
                    lx = lane % LX
                    off = A_STAGE + wn0 + lx * 4 + k * BP + p * LX * 4
                    for e in range(4):
                        assert sm[4 * (off + e)] == ("B", k, wn0 + p * LX * 4 + lx * 4 + e), (name, "B read")
                    addrs.append(4 * off)
                w = conflicts(addrs); rd_b = [max(rd_b[0], w[0]), max(rd_b[1], w[1])]
        for lane in range(32):
            ly, lx = lane // LX, lane % LX
            for i in range(TM):
                for j in range(TN):
                    covered[(wm0 + ly * 4 + (i // 4) * LY * 4 + i % 4, wn0 + (j // 4) * LX * 4 + lx * 4 + j % 4)] += 1
    assert len(covered) == BM * BN and set(covered.values()) == {1}, (name, "C coverage")
    print("%-15s ok  threads=%d  conflicts (ways: whole warp / 8-lane phase): A LDS.128 %d/%d  B LDS.128 %d/%d  "
          "cp.async writes %d/%d" % (name, TH, rd_a[0], rd_a[1], rd_b[0], rd_b[1], wr_conf[0], wr_conf[1]))

for ln in open(os.path.join(HERE, "configs.txt")):
    if ln.strip() and not ln.startswith("#"):
        name, mode, flags, desc = [x.strip() for x in ln.split("|")]
        check(name, parse(flags))
