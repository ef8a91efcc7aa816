# Emulates the index math of matmul_tf32.cu for one block tile (no edges):
# TileCopy chunk -> smem placement, load_frags offsets, PTX m16n8k8 semantics,
# epilogue placement. Checks C == A @ B exactly (integer data).
import numpy as np, itertools
def run(BM, BN, BK, WM, WN, TA, TB, K):
    PAD=4; KA = TA==0; KB = TB==1
    LDA = BK+PAD if KA else BM+PAD; LDB = BK+PAD if KB else BN+PAD
    THREADS = (BM//WM)*(BN//WN)*32; WARPS_N = BN//WN; MT=WM//16; NT=WN//8
    rng = np.random.default_rng(1)
    A = rng.integers(-3,4,(BM,K)).astype(np.int64); B = rng.integers(-3,4,(K,BN)).astype(np.int64)
    Ast = A.T.copy() if TA else A      # stored matrix
    Bst = B.T.copy() if TB else B
    acc = np.zeros((THREADS, MT, NT, 4), np.int64)
    def copy(TILE, KC, X, kpos):
        ROWS = TILE if KC else BK; COLS = BK if KC else TILE; LDS = COLS+PAD; CPR = COLS//4
        assert THREADS % CPR == 0; RSTEP = THREADS//CPR; ITERS = -(-ROWS//RSTEP)
        sm = np.full(ROWS*LDS, -999999, np.int64)
        for tid in range(THREADS):
            r0, c0 = tid//CPR, (tid%CPR)*4
            for I in range(ITERS):
                if I*RSTEP >= ROWS - r0: continue
                r = r0 + I*RSTEP
                for j in range(4):
                    # stored row/col of the element
                    srow = (0 if KC else kpos) + r; scol = (kpos if KC else 0) + c0 + j
                    sm[r*LDS + c0 + j] = X[srow, scol]
        return sm
    for kt in range(K//BK):
        kpos = kt*BK
        sA = copy(BM, KA, Ast, kpos); sB = copy(BN, KB, Bst, kpos)
        for S in range(BK//8):
          for tid in range(THREADS):
            warp, lane = tid>>5, tid&31; g, tig = lane>>2, lane&3
            wm0 = (warp//WARPS_N)*WM; wn0 = (warp%WARPS_N)*WN
            aoff = (wm0+2*g)*LDA + 2*tig if KA else (2*tig)*LDA + wm0 + 2*g
            boff = (wn0+2*g)*LDB + 2*tig if KB else (2*tig)*LDB + wn0 + 2*g
            if True:
                a = np.zeros((MT,4),np.int64); b = np.zeros((NT,2),np.int64)
                for i in range(MT):
                    if KA:
                        lo = aoff + (16*i)*LDA + 8*S; hi = aoff + (16*i+1)*LDA + 8*S
                        a[i,0]=sA[lo]; a[i,2]=sA[lo+1]; a[i,1]=sA[hi]; a[i,3]=sA[hi+1]
                    else:
                        k0 = aoff + (8*S)*LDA + 16*i; k1 = aoff + (8*S+1)*LDA + 16*i
                        a[i,0]=sA[k0]; a[i,1]=sA[k0+1]; a[i,2]=sA[k1]; a[i,3]=sA[k1+1]
                for p in range(NT//2):
                    if KB:
                        v0 = boff + (16*p)*LDB + 8*S; v1 = boff + (16*p+1)*LDB + 8*S
                        b[2*p,0]=sB[v0]; b[2*p,1]=sB[v0+1]; b[2*p+1,0]=sB[v1]; b[2*p+1,1]=sB[v1+1]
                    else:
                        k0 = boff + (8*S)*LDB + 16*p; k1 = boff + (8*S+1)*LDB + 16*p
                        b[2*p,0]=sB[k0]; b[2*p+1,0]=sB[k0+1]; b[2*p,1]=sB[k1]; b[2*p+1,1]=sB[k1+1]
                FR = (a, b)
                if tid % 32 == 0: frags = {}
                frags[lane] = (a.copy(), b.copy())
                if lane == 31:
                    # execute the warp's MMAs with PTX semantics
                    for i in range(MT):
                        for j in range(NT):
                            Am = np.zeros((16,8),np.int64); Bm = np.zeros((8,8),np.int64)
                            for L in range(32):
                                gg, tt = L>>2, L&3; aa, bb = frags[L]
                                Am[gg,tt]=aa[i,0]; Am[gg+8,tt]=aa[i,1]; Am[gg,tt+4]=aa[i,2]; Am[gg+8,tt+4]=aa[i,3]
                                Bm[tt,gg]=bb[j,0]; Bm[tt+4,gg]=bb[j,1]
                            assert (Am > -999999).all() and (Bm > -999999).all()
                            Cm = Am @ Bm
                            for L in range(32):
                                gg, tt = L>>2, L&3; t2 = warp*32+L
                                acc[t2,i,j,0]+=Cm[gg,2*tt]; acc[t2,i,j,1]+=Cm[gg,2*tt+1]
                                acc[t2,i,j,2]+=Cm[gg+8,2*tt]; acc[t2,i,j,3]+=Cm[gg+8,2*tt+1]
    C = np.full((BM,BN), -10**9, np.int64)
    for tid in range(THREADS):
        warp, lane = tid>>5, tid&31; g, tig = lane>>2, lane&3
        row0 = (warp//WARPS_N)*WM + 2*g; col0 = (warp%WARPS_N)*WN + 4*tig
        for p in range(NT//2):
            n0 = col0 + 16*p
            for i in range(MT):
                for r in range(2):
                    m = row0 + 16*i + r
                    for q in range(4):
                        assert C[m, n0+q] == -10**9
                        C[m, n0+q] = acc[tid, i, 2*p+(q&1), (q>>1)+2*r]
    ok = (C == A @ B).all()
    print(BM,BN,BK,WM,WN,TA,TB,K, "OK" if ok else "MISMATCH")
    return ok
allok = True
for TA, TB in itertools.product([0,1],[0,1]):
    allok &= run(32, 64, 16, 16, 32, TA, TB, 32)
    allok &= run(64, 32, 32, 32, 16, TA, TB, 64)
    allok &= run(32, 32, 8, 32, 32, TA, TB, 16)
print("ALL OK" if allok else "FAIL")
