// simt2: next-generation prototype of optiml's fp32 SIMT SGEMM (exact FFMA,
// no tensor cores), NN layout first. Not part of the product (yet).
//
// Same ABI as optiml-build/src/families/matmul/cuda/matmul_f32.cu:
//   extern "C" __global__ void optiml_matmul(A, B, C, bias, batch, M, N, K,
//                                            strideA, strideB, strideC,
//                                            alpha, beta)
//   grid  = (ceil(N / SIMT2_BN), ceil(M / SIMT2_BM), min(batch, 65535))
//   block = SIMT2_THREADS = (BM / WM) * (BN / WN) * 32 (1-D)
//   DYNAMIC shared memory = SIMT2_SMEM_BYTES (the one ABI difference: the
//   launcher passes it as the 3rd launch parameter and, above 48 KiB, raises
//   cudaFuncAttributeMaxDynamicSharedMemorySize once).
//   Blocks loop over batch items z = blockIdx.z, z + gridDim.z, ...
// C[z] (M x N, ldc = N) = epilogue(A[z] (M x K, lda = K) * B[z] (K x N, ldb = N)),
// X[z] = X + z * strideX (0 = broadcast). Epilogue exactly as the product:
// v = acc; v *= alpha (OPTIML_HAS_ALPHA); v += beta * C_old (OPTIML_HAS_BETA,
// otherwise C is never read); v += bias[n] (OPTIML_HAS_BIAS); v = act(v)
// (OPTIML_ACT 0 none, 1 relu, 2 exact erf gelu). Any M, N, K >= 0, batch >= 1.
// Pointers need 4-byte alignment; the 16-byte path is chosen per batch item.
// No #include, no standard library (NVRTC-compatible, like the product).
//
// Design (see SIMT2_NOTES.md for the arithmetic):
//  * warp tiling: block BM x BN = (BM/WM) x (BN/WN) warps; a warp's WM x WN
//    tile is LY x LX lanes (LX = WN/TN along N, lanes consecutive along N),
//    each lane TM x TN accumulators in 4x4 sub-tiles: rows
//    wm0 + q*LY*4 + ly*4 + r (q < TM/4, r < 4), cols wn0 + p*LX*4 + lx*4 + c.
//  * both operands go global -> shared with cp.async.cg 16 B (zero-fill
//    predication, no staging registers), SIMT2_STAGES-deep ring (2..4), one
//    __syncthreads per k-tile.
//  * B (N-contiguous) is stored k-major [BK][BN]: a k-step's B fragment is
//    TN/4 LDS.128 (8 consecutive lanes read 128 contiguous bytes).
//  * A (K-contiguous) is stored as it lies, m-major [BM][BK] (no transpose):
//    one LDS.128 gives 4 consecutive k of one row, so a thread reads its TM
//    rows once per 4 k-steps: TM LDS.128 per 4 k = TM/4 per k-step, the same
//    count as a k-major layout. Rows are XOR-swizzled in 16-byte chunks
//    (chunk ^ ((row >> 2) & (BK/4 - 1))) so the LY rows a warp reads together
//    (4 apart) and the cp.async writes (2 rows per 128 B) hit distinct banks.
//  * fragments are register double buffered: B of step k+1 and A of group
//    g+1 are read before the FFMAs of step k (A at the last step of group g,
//    or SIMT2_A_EARLY=1: at its first step); across k-tiles the first
//    fragments of tile t+1 are read right after the barrier, before the
//    FFMAs of tile t's last step.
//  * two instantiations per batch item: 16-byte (K % 4 == 0, N % 4 == 0,
//    strides % 4 == 0, A and B 16-byte aligned) and scalar (4-byte cp.async,
//    each element predicated); partial M / N / K tiles are zero-filled on both.
//
// Knobs (all optional):
//   SIMT2_BM, SIMT2_BN, SIMT2_BK   block tile (BK in {8, 16, 32})
//   SIMT2_WM, SIMT2_WN             warp tile
//   SIMT2_TM, SIMT2_TN             thread tile (multiples of 4); (WM/TM)*(WN/TN) == 32
//   SIMT2_STAGES                   cp.async ring depth (2..4)
//   SIMT2_MIN_BLOCKS               __launch_bounds__ min blocks per SM
//   SIMT2_A_SWZ                    1: XOR swizzle of A rows (default); 0: pad rows by 4 floats
//   SIMT2_B_PAD                    floats of padding per B row (default 0)
//   SIMT2_A_EARLY                  1: read A group g+1 at the first step of group g
//   SIMT2_GROUP_M                  block rasterization (as the product's OPTIML_GROUP_M)

#ifndef SIMT2_BM
#define SIMT2_BM 128
#endif
#ifndef SIMT2_BN
#define SIMT2_BN 128
#endif
#ifndef SIMT2_BK
#define SIMT2_BK 16
#endif
#ifndef SIMT2_WM
#define SIMT2_WM 32
#endif
#ifndef SIMT2_WN
#define SIMT2_WN 64
#endif
#ifndef SIMT2_TM
#define SIMT2_TM 8
#endif
#ifndef SIMT2_TN
#define SIMT2_TN 8
#endif
#ifndef SIMT2_STAGES
#define SIMT2_STAGES 3
#endif
#ifndef SIMT2_MIN_BLOCKS
#define SIMT2_MIN_BLOCKS 1
#endif
#ifndef SIMT2_A_SWZ
#define SIMT2_A_SWZ 1
#endif
#ifndef SIMT2_B_PAD
#define SIMT2_B_PAD 0
#endif
#ifndef SIMT2_A_EARLY
#define SIMT2_A_EARLY 0
#endif
#ifndef SIMT2_GROUP_M
#define SIMT2_GROUP_M 1
#endif
#define SIMT2_THREADS ((SIMT2_BM / SIMT2_WM) * (SIMT2_BN / SIMT2_WN) * 32)
#define SIMT2_APITCH (SIMT2_BK + (SIMT2_A_SWZ ? 0 : 4))
#define SIMT2_BPITCH (SIMT2_BN + SIMT2_B_PAD)
#define SIMT2_STAGE_FLOATS (SIMT2_BM * SIMT2_APITCH + SIMT2_BK * SIMT2_BPITCH)
#define SIMT2_SMEM_BYTES (SIMT2_STAGES * SIMT2_STAGE_FLOATS * 4)

#ifndef OPTIML_HAS_ALPHA
#define OPTIML_HAS_ALPHA 0
#endif
#ifndef OPTIML_HAS_BETA
#define OPTIML_HAS_BETA 0
#endif
#ifndef OPTIML_HAS_BIAS
#define OPTIML_HAS_BIAS 0
#endif
#ifndef OPTIML_ACT
#define OPTIML_ACT 0
#endif
#if (OPTIML_ACT < 0) || (OPTIML_ACT > 2)
#error "OPTIML_ACT must be 0 (none), 1 (relu) or 2 (gelu)"
#endif

namespace simt2 {

struct Cfg {
    static constexpr int BM = SIMT2_BM, BN = SIMT2_BN, BK = SIMT2_BK;
    static constexpr int WM = SIMT2_WM, WN = SIMT2_WN, TM = SIMT2_TM, TN = SIMT2_TN;
    static constexpr int S = SIMT2_STAGES;
    static constexpr int THREADS = SIMT2_THREADS;
    static constexpr int WARPS_N = BN / WN;
    static constexpr int LX = WN / TN, LY = WM / TM;  // lanes along N / M
    static constexpr int CH = BK / 4;                 // 16-byte chunks per A row
    static constexpr int G = BK / 4;                  // 4-k groups per tile
    static constexpr int APITCH = SIMT2_APITCH, BPITCH = SIMT2_BPITCH;
    static constexpr int A_STAGE = BM * APITCH;       // floats
    static constexpr int STAGE = SIMT2_STAGE_FLOATS;
    static constexpr int BCH = BN / 4;                // 16-byte chunks per B row
    static constexpr int LA = BM * CH / THREADS;      // A chunks per thread per tile
    static constexpr int LB = BK * BCH / THREADS;     // B chunks per thread per tile
    static constexpr int ARSTEP = THREADS / CH;       // A rows between a thread's chunks
    static constexpr int BKSTEP = THREADS / BCH;      // B k-rows between a thread's chunks
};

static_assert(Cfg::BK == 8 || Cfg::BK == 16 || Cfg::BK == 32, "SIMT2_BK must be 8, 16 or 32");
static_assert(Cfg::TM % 4 == 0 && Cfg::TN % 4 == 0, "SIMT2_TM / SIMT2_TN must be multiples of 4");
static_assert(Cfg::WM % Cfg::TM == 0 && Cfg::WN % Cfg::TN == 0, "warp tile must be a multiple of the thread tile");
static_assert(Cfg::LX * Cfg::LY == 32, "(WM / TM) * (WN / TN) must be 32");
static_assert(Cfg::BM % Cfg::WM == 0 && Cfg::BN % Cfg::WN == 0, "block tile must be a multiple of the warp tile");
static_assert(Cfg::S >= 2 && Cfg::S <= 4, "SIMT2_STAGES must be 2..4");
static_assert(Cfg::THREADS % Cfg::CH == 0 && (Cfg::BM * Cfg::CH) % Cfg::THREADS == 0 && Cfg::LA >= 1,
              "A tile chunks must split evenly over the threads");
static_assert(Cfg::THREADS % Cfg::BCH == 0 && (Cfg::BK * Cfg::BCH) % Cfg::THREADS == 0 && Cfg::LB >= 1,
              "B tile chunks must split evenly over the threads");
static_assert(Cfg::THREADS <= 1024, "too many threads");
static_assert(!SIMT2_A_SWZ || Cfg::ARSTEP % (4 * Cfg::CH) == 0,
              "A chunks of a thread must share the swizzle (THREADS / (BK / 4) rows apart, a multiple of BK)");
static_assert(Cfg::G % 2 == 0, "BK / 4 must be even (fragment buffer parity)");
static_assert(Cfg::BPITCH % 4 == 0, "SIMT2_B_PAD must keep rows 16-byte aligned");

__device__ __forceinline__ int opaque(int v) {
    asm volatile("" : "+r"(v));
    return v;
}
__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull;
}
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
// 16-byte async copy; valid == false -> 16 zero bytes, nothing read.
__device__ __forceinline__ void cp16(unsigned dst, const float* src, bool valid) {
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(n) : "memory");
}
// 4-byte async copy; valid == false -> zero.
__device__ __forceinline__ void cp4(unsigned dst, const float* src, bool valid) {
    const int n = valid ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }

template <int KK>
__device__ __forceinline__ float comp(const float4& v) {
    return KK == 0 ? v.x : (KK == 1 ? v.y : (KK == 2 ? v.z : v.w));
}

// physical 16-byte chunk of logical chunk c in A row r
__device__ __forceinline__ int a_chunk(int r, int c) {
#if SIMT2_A_SWZ
    return c ^ ((r >> 2) & (Cfg::CH - 1));
#else
    (void)r;
    return c;
#endif
}

__device__ __forceinline__ float epilogue_act(float v) {
#if OPTIML_ACT == 1
    return fmaxf(v, 0.f);
#elif OPTIML_ACT == 2
    return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
#else
    return v;
#endif
}
__device__ __forceinline__ float epilogue(float acc, float alpha, float beta, float old, float bias) {
    float v = acc;
#if OPTIML_HAS_ALPHA
    v *= alpha;
#endif
#if OPTIML_HAS_BETA
    v += beta * old;
#endif
#if OPTIML_HAS_BIAS
    v += bias;
#endif
    (void)alpha; (void)beta; (void)old; (void)bias;
    return epilogue_act(v);
}

// (column, row) block tile; GROUP_M > 1: runs of GROUP_M tile rows are walked
// column-major (a bijection of the launched grid, as in the product).
__device__ __forceinline__ int2 block_tile() {
    const int bx = opaque((int)blockIdx.x);
    const int by = opaque((int)blockIdx.y);
#if SIMT2_GROUP_M > 1
    constexpr int GM = SIMT2_GROUP_M;
    const int first = by - by % GM;
    const int local = (by - first) * (int)gridDim.x + bx;
    const int rows = (int)gridDim.y - first;
    if (rows >= GM) return make_int2(local / GM, first + local % GM);
    return make_int2(local / rows, first + local % rows);
#else
    return make_int2(bx, by);
#endif
}

// Global -> shared copies of one k-tile (all of this thread's chunks).
// Tiles are issued strictly in order 0, 1, 2, ...: the source pointers and the
// k position advance by one k-tile per issue(). Sources of zero-filled chunks
// (src-size 0: nothing is read) stay inside the matrix along M / N (clamped
// row / column) and run at most BK elements past it along K.
template <bool VEC>
struct Loader {
    const float* a;   // A chunk 0 of this thread at the next tile (row clamped into the matrix)
    const float* b;   // B chunk 0 at the next tile (column clamped)
    long long astep;  // elements between A chunks l and l + 1 (ARSTEP rows)
    long long bstep;  // elements between B chunks l and l + 1 (BKSTEP rows)
    long long bnext;  // BK rows of B
    int kpos;         // k of the next tile
    int ak;           // k offset (4 * chunk) of this thread's A chunks
    int bk;           // tile-local k row of B chunk 0
    int bcol;         // tile-local column of B chunks (global: bn + bcol)
    unsigned sa, sb;  // shared byte addresses (stage 0) of chunk 0
    bool rowok[Cfg::LA];
    bool colok[VEC ? 1 : 4];

    __device__ __forceinline__ void init(const float* A, const float* B, int M, int N, int K, int bm, int bn,
                                         int tid, unsigned smem0) {
        const int arow = tid / Cfg::CH;
        const int ca = tid % Cfg::CH;
        ak = ca * 4;
        const int r = bm + arow < M ? bm + arow : 0;
        a = A + (long long)r * K + ak;
        astep = (long long)Cfg::ARSTEP * K;
#pragma unroll
        for (int l = 0; l < Cfg::LA; ++l) rowok[l] = bm + arow + l * Cfg::ARSTEP < M;
        bk = tid / Cfg::BCH;
        bcol = (tid % Cfg::BCH) * 4;
        const int c = bn + bcol < N ? bn + bcol : 0;
        b = B + (long long)bk * N + c;
        bstep = (long long)Cfg::BKSTEP * N;
        bnext = (long long)Cfg::BK * N;
#pragma unroll
        for (int e = 0; e < (VEC ? 1 : 4); ++e) colok[e] = bn + bcol + e < N;
        kpos = 0;
        // all A chunks of a thread share the swizzle (ARSTEP % (4 * CH) == 0, asserted)
        sa = smem0 + 4u * (unsigned)(arow * Cfg::APITCH + a_chunk(arow, ca) * 4);
        sb = smem0 + 4u * (unsigned)(Cfg::A_STAGE + bk * Cfg::BPITCH + bcol);
    }

    // next k-tile into stage st
    __device__ __forceinline__ void issue(int st, int K) {
        const unsigned so = 4u * (unsigned)(st * Cfg::STAGE);
#pragma unroll
        for (int l = 0; l < Cfg::LA; ++l) {
            const float* src = a + l * astep;
            const unsigned dst = sa + so + 4u * (unsigned)(l * Cfg::ARSTEP * Cfg::APITCH);
            if (VEC) {
                cp16(dst, src, rowok[l] && kpos + ak < K);  // K % 4 == 0: whole chunk in or out
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) cp4(dst + 4u * e, src + e, rowok[l] && kpos + ak + e < K);
            }
        }
#pragma unroll
        for (int l = 0; l < Cfg::LB; ++l) {
            const bool kok = kpos + bk + l * Cfg::BKSTEP < K;
            const float* src = b + l * bstep;
            const unsigned dst = sb + so + 4u * (unsigned)(l * Cfg::BKSTEP * Cfg::BPITCH);
            if (VEC) {
                cp16(dst, src, kok && colok[0]);  // N % 4 == 0: whole chunk in or out
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) cp4(dst + 4u * e, src + e, kok && colok[e]);
            }
        }
        a += Cfg::BK;
        b += bnext;
        kpos += Cfg::BK;
    }
};

// A fragments of 4-k group g: TM float4, element i = row i of the thread
template <int GI>
__device__ __forceinline__ void load_a(float4 (&f)[Cfg::TM], const float* sa, const int (&arow_off)[Cfg::TM / 4],
                                       const int (&aswz)[Cfg::TM / 4]) {
#pragma unroll
    for (int i = 0; i < Cfg::TM; ++i) {
        const int q = i / 4, r = i % 4;
        f[i] = *reinterpret_cast<const float4*>(sa + arow_off[q] + r * Cfg::APITCH + ((GI ^ aswz[q]) << 2));
    }
}
// B fragment of k row kk: TN floats as TN/4 float4
__device__ __forceinline__ void load_b(float4 (&f)[Cfg::TN / 4], const float* sbk) {
#pragma unroll
    for (int p = 0; p < Cfg::TN / 4; ++p)
        f[p] = *reinterpret_cast<const float4*>(sbk + p * (Cfg::LX * 4));
}

template <int KK>
__device__ __forceinline__ void fma_step(float (&acc)[Cfg::TM][Cfg::TN], const float4 (&fa)[Cfg::TM],
                                         const float4 (&fb)[Cfg::TN / 4]) {
#pragma unroll
    for (int i = 0; i < Cfg::TM; ++i) {
        const float a = comp<KK>(fa[i]);
#pragma unroll
        for (int p = 0; p < Cfg::TN / 4; ++p) {
            acc[i][p * 4 + 0] = fmaf(a, fb[p].x, acc[i][p * 4 + 0]);
            acc[i][p * 4 + 1] = fmaf(a, fb[p].y, acc[i][p * 4 + 1]);
            acc[i][p * 4 + 2] = fmaf(a, fb[p].z, acc[i][p * 4 + 2]);
            acc[i][p * 4 + 3] = fmaf(a, fb[p].w, acc[i][p * 4 + 3]);
        }
    }
}

// One (batch item, block tile) of C.
template <bool VEC>
__device__ __forceinline__ void gemm_tile(const float* __restrict__ A, const float* __restrict__ B,
                                          float* __restrict__ C, const float* __restrict__ bias, int M, int N, int K,
                                          float alpha, float beta, bool vecC, float* smem) {
    constexpr int BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN, S = Cfg::S, G = Cfg::G;
    const int tid = opaque((int)threadIdx.x);
    const int2 tile = block_tile();
    const int bm = tile.y * Cfg::BM, bn = tile.x * Cfg::BN;

    Loader<VEC> ld;
    ld.init(A, B, M, N, K, bm, bn, tid, smem_addr(smem));

    // fragment read positions
    const int warp = tid >> 5, lane = tid & 31;
    const int wm0 = (warp / Cfg::WARPS_N) * Cfg::WM, wn0 = (warp % Cfg::WARPS_N) * Cfg::WN;
    const int ly = lane / Cfg::LX, lx = lane % Cfg::LX;
    const int ar0 = wm0 + ly * 4;  // multiple of 4
    int arow_off[TM / 4], aswz[TM / 4];
#pragma unroll
    for (int q = 0; q < TM / 4; ++q) {
        const int r = ar0 + q * Cfg::LY * 4;
        arow_off[q] = r * Cfg::APITCH;
#if SIMT2_A_SWZ
        aswz[q] = (r >> 2) & (Cfg::CH - 1);
#else
        aswz[q] = 0;
#endif
    }
    const int bc0 = Cfg::A_STAGE + wn0 + lx * 4;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    const int ntiles = (K + BK - 1) / BK;
    // prologue: tiles 0 .. S-2 (empty groups past the end keep the counting uniform)
#pragma unroll
    for (int p = 0; p < S - 1; ++p) {
        if (p < ntiles) ld.issue(p, K);
        cp_commit();
    }

    if (ntiles > 0) {
        float4 fa[2][TM];
        float4 fb[2][TN / 4];
        cp_wait<S - 2>();
        __syncthreads();
        load_a<0>(fa[0], smem, arow_off, aswz);
        load_b(fb[0], smem + bc0);

        int rs = 0;  // stage being read (tile t)
        for (int t = 0; t < ntiles; ++t) {
            // tile t + S - 1 -> stage (t + S - 1) % S, freed by the barrier that ended tile t - 1
            {
                const int ws = rs == 0 ? S - 1 : rs - 1;
                if (t + S - 1 < ntiles) ld.issue(ws, K);
                cp_commit();
            }
            const float* sa = smem + rs * Cfg::STAGE;
            const float* sb = sa + bc0;
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                const int g = k / 4, kk = k % 4;
                if (k == BK - 1) {
                    // tile t + 1 has landed (this thread's copies), then barrier:
                    // everybody's copies are visible and everybody is done reading stage rs
                    cp_wait<S - 2>();
                    __syncthreads();
                    rs = rs == S - 1 ? 0 : rs + 1;
                    if (t + 1 < ntiles) {
                        const float* na = smem + rs * Cfg::STAGE;
                        load_a<0>(fa[0], na, arow_off, aswz);
                        load_b(fb[0], na + bc0);
                    }
                } else {
                    load_b(fb[(k + 1) & 1], sb + (k + 1) * Cfg::BPITCH);
#if SIMT2_A_EARLY
                    if (kk == 0 && g + 1 < G) {
#else
                    if (kk == 3) {
#endif
                        // (g + 1 < G here; compile-time group index via a switch)
                        switch (g + 1) {
                            case 1: load_a<1>(fa[1], sa, arow_off, aswz); break;
                            case 2: load_a<2>(fa[0], sa, arow_off, aswz); break;
                            case 3: load_a<3>(fa[1], sa, arow_off, aswz); break;
                            case 4: load_a<4>(fa[0], sa, arow_off, aswz); break;
                            case 5: load_a<5>(fa[1], sa, arow_off, aswz); break;
                            case 6: load_a<6>(fa[0], sa, arow_off, aswz); break;
                            case 7: load_a<7>(fa[1], sa, arow_off, aswz); break;
                            default: break;
                        }
                    }
                }
                switch (kk) {
                    case 0: fma_step<0>(acc, fa[g & 1], fb[k & 1]); break;
                    case 1: fma_step<1>(acc, fa[g & 1], fb[k & 1]); break;
                    case 2: fma_step<2>(acc, fa[g & 1], fb[k & 1]); break;
                    default: fma_step<3>(acc, fa[g & 1], fb[k & 1]); break;
                }
            }
        }
    }
    (void)G;

    // ---------------- epilogue (registers -> C, 16-byte stores when vecC) ----------------
#pragma unroll
    for (int p = 0; p < TN / 4; ++p) {
        const int n0 = bn + wn0 + p * (Cfg::LX * 4) + lx * 4;
        float bv[4] = {0.f, 0.f, 0.f, 0.f};
#if OPTIML_HAS_BIAS
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (n0 + j < N) bv[j] = __ldg(bias + n0 + j);
#endif
        (void)bias;
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int m = bm + ar0 + (i / 4) * (Cfg::LY * 4) + (i % 4);
            if (m >= M) continue;
            float* __restrict__ crow = C + (long long)m * N;
            if (vecC && n0 < N) {
                float4 old = make_float4(0.f, 0.f, 0.f, 0.f);
#if OPTIML_HAS_BETA
                old = *reinterpret_cast<const float4*>(crow + n0);
#endif
                float4 o;
                o.x = epilogue(acc[i][p * 4 + 0], alpha, beta, old.x, bv[0]);
                o.y = epilogue(acc[i][p * 4 + 1], alpha, beta, old.y, bv[1]);
                o.z = epilogue(acc[i][p * 4 + 2], alpha, beta, old.z, bv[2]);
                o.w = epilogue(acc[i][p * 4 + 3], alpha, beta, old.w, bv[3]);
                *reinterpret_cast<float4*>(crow + n0) = o;
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int n = n0 + j;
                    if (n < N) {
                        float old = 0.f;
#if OPTIML_HAS_BETA
                        old = crow[n];
#endif
                        crow[n] = epilogue(acc[i][p * 4 + j], alpha, beta, old, bv[j]);
                    }
                }
            }
        }
    }
}

}  // namespace simt2

extern "C" __global__ void __launch_bounds__(SIMT2_THREADS, SIMT2_MIN_BLOCKS) optiml_matmul(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    const float* __restrict__ bias, int batch, int M, int N, int K,
    long long strideA, long long strideB, long long strideC, float alpha, float beta) {
    extern __shared__ __align__(16) float simt2_smem[];
    {
        const int2 tile = simt2::block_tile();
        if (tile.y * SIMT2_BM >= M || tile.x * SIMT2_BN >= N) return;  // block-uniform
    }
    const int gz = (int)gridDim.z;
    for (int z = blockIdx.z; z < batch; z = (batch - z > gz) ? z + gz : batch) {
        const float* Az = A + (long long)z * strideA;
        const float* Bz = B + (long long)z * strideB;
        float* Cz = C + (long long)z * strideC;
        const int k = simt2::opaque(K);
        const bool vec = (k % 4 == 0) && (N % 4 == 0) && (strideA % 4 == 0) && (strideB % 4 == 0) &&
                         simt2::aligned16(A) && simt2::aligned16(B);
        const bool vecC = (N % 4 == 0) && (strideC % 4 == 0) && simt2::aligned16(C);
        if (vec)
            simt2::gemm_tile<true>(Az, Bz, Cz, bias, M, N, k, alpha, beta, vecC, simt2_smem);
        else
            simt2::gemm_tile<false>(Az, Bz, Cz, bias, M, N, k, alpha, beta, vecC, simt2_smem);
    }
}
