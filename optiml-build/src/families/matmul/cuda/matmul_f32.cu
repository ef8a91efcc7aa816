// optiml: batched SGEMM template, fp32 FFMA (no tensor cores), row-major.
//
// Compiled by NVRTC at build time; specialised ONLY through preprocessor
// macros defined before this text. The optiml/ headers (defaults.cuh, epilogue.cuh, which NVRTC
// gets in memory; nvcc needs -I optiml-build/src/cuda), no standard library.
// Every function is explicitly annotated so the file also compiles with
// nvcc (bench/harness/matmul_harness.cu includes it) and with or without
// NVRTC's -default-device.
//
// Entry point (ABI relied on by the Rust launcher):
//   extern "C" __global__ void optiml_matmul(A, B, C, bias, batch, M, N, K,
//                                            strideA, strideB, strideC,
//                                            alpha, beta)
//   grid  = (ceil(N / OPTIML_BN), ceil(M / OPTIML_BM), min(batch, 65535))
//   block = OPTIML_THREADS (1-D), dynamic shared memory = 0 (all static, < 48 KiB)
//   Blocks loop over batch items z = blockIdx.z, z + gridDim.z, ...
//
// C[z] (M x N, ldc = N) = epilogue(op(A[z]) * op(B[z]))
//   OPTIML_TRANS_A 0: A is M x K (lda = K); 1: A stored K x M (lda = M)
//   OPTIML_TRANS_B 0: B is K x N (ldb = N); 1: B stored N x K (ldb = K)
//   X[z] = X + z * strideX (stride 0 = broadcast that operand)
// Epilogue per element: v = acc; v *= alpha (HAS_ALPHA); v += beta * C_old
// (HAS_BETA; otherwise C is never read); v += bias[n] (HAS_BIAS); v = optiml_act_exact(v)
// (OPTIML_ACT: optiml/epilogue.cuh; an erfcf gelu would not cancel for v < -5 but spills the
// 128-register default with NT + full epilogue).
// Pointers need only 4-byte alignment; 16-byte paths are chosen at run time.
//
// Design (register-blocked SGEMM, exact fp32 FFMA):
//  * block tile BM x BN, k-tile BK, per-thread TM x TN accumulators; a
//    thread's TM rows are TM/4 groups of 4 consecutive rows spaced TY*4 apart
//    (same for columns) and a warp is 4 x 8 threads by default, so every
//    shared-memory fragment read is a broadcast / conflict-free LDS.128 and
//    every C store of a warp writes whole 128-byte lines (float4 when
//    N % 4 == 0 etc.). OPTIML_WARP_N trades these: 8 x 4 lanes read more A
//    and less B per step and store 64-byte rows; 2 x 16 the opposite.
//  * shared memory double buffered, both operands stored k-major
//    ([BK][BM+4], [BK][BN+4]); one __syncthreads per k-tile. Fragments are
//    register double buffered (LDS of step k+1 before the FFMAs of step k).
//  * global loads always run along the contiguous dimension of the stored
//    matrix. M/N-contiguous operands: cp.async 16-byte chunks straight into
//    shared memory (sm_80+). K-contiguous operands (A not transposed, B
//    transposed): float4 global loads into registers issued at the start of
//    a k-tile, transposed into shared memory after its FFMAs.
//  * three specialisations chosen per batch item at run time: all 16-byte
//    (ld % 4 == 0, stride % 4 == 0, base 16-byte aligned for both operands),
//    scalar (4-byte cp.async / loads, every element predicated), and scalar
//    with 64-bit per-thread offsets for leading dimensions >= ~2^25.
//  * register budget: 2 blocks x 256 threads per SM (<= 128 registers) with
//    no spills; values not needed by the main loop are recomputed after it.
//
// ---------------------------------------------------------------------------
// Split-K (OPTIML_SPLIT_K = 1 compiles it in; 0, the default, leaves the
// ABI above untouched)
// ---------------------------------------------------------------------------
// optiml_matmul takes one more parameter, `int splits` (S), after beta.
// S = 1: the plain kernel above (C is C, the epilogue is applied).
// S > 1: the product is computed in two launches on the same stream, so a
// problem with few output tiles and a long K still fills the GPU:
//  Launch 1: optiml_matmul with C -> the workspace W (float*, 16-byte
//   alignment recommended); strideC, bias, alpha, beta are ignored.
//   grid  = (ceil(N / BN), ceil(M / BM), Z * S) with Z = min(batch, 65535 / S)
//   (any Z >= 1 is correct: blocks walk batch items z = blockIdx.z / S, + Z,
//   ...; blocks with blockIdx.z >= (gridDim.z / S) * S exit).
//   Split s = blockIdx.z % S owns the K range [kb(s), kb(s + 1)) with
//   T = ceil(K / BK) k-tiles, kb(s) = min(K, floor(s * T / S) * BK): whole,
//   balanced k-tiles starting at multiples of BK, so 16-byte paths stay
//   aligned; an empty range (T < S, K = 0) writes its tile of zeros.
//   It writes its raw partial sum for every (z, m, n) to
//   W[((s * batch + z) * M + m) * N + n]: W is [S][batch][M][N], every
//   element written, so W needs no initialisation.
//  Launch 2: extern "C" __global__ void optiml_splitk_reduce(
//                const float* W, float* C, const float* bias, int batch,
//                int M, int N, long long strideC, float alpha, float beta,
//                int splits)
//   grid = (G, 1, 1), any G >= 1 (grid-stride loop); block =
//   OPTIML_REDUCE_THREADS (256). A thread owns 4 consecutive columns of one
//   row: v = ((W[0] + W[1]) + W[2]) + ... + W[S-1] in that fixed order (no
//   atomics: the bits depend only on S and the schedule), then the epilogue
//   above, C[z * strideC + m * N + n] = v. 16-byte accesses where aligned.
//
// ---------------------------------------------------------------------------
// Triangular products (OPTIML_TRIANGLE = 1: upper, 2: lower; 0, the default,
// compiles none of it)
// ---------------------------------------------------------------------------
// C = triu(triu(A) * triu(B)) (upper) or tril(tril(A) * tril(B)) (lower), as
// BLAS's trmm reads a triangular operand: only A's and B's triangle is read
// (the other is taken as zero, whatever it holds) and C's other triangle is
// written exactly 0. For the upper triangle A[i][k] = 0 for k < i and
// B[k][j] = 0 for k > j, so the block tile rows [bm, bm + BM) x columns
// [bn, bn + BN) only needs k in [bm, bn + BN): tiles wholly below the
// diagonal compute nothing and the others walk a shortened K range (about a
// sixth of the full product's FFMAs for square matrices). The k-tiles that
// cross a diagonal are masked in shared memory after they land. Not
// transposed, no alpha, beta, bias or activation (the spec refuses them).
// The lower triangle walks tile rows bottom-up, so its longest tiles start
// first, as the upper triangle's do in launch order.
//
// Optional tuning macros (the launcher need not define them):
//   OPTIML_MIN_BLOCKS  __launch_bounds__ min blocks per SM (see below)
//   OPTIML_ASYNC_MODE  1 (default): cp.async for M/N-contiguous operands,
//                      0: register staging only, 2: cp.async for everything
//                      (default for 1024-thread blocks)
//   OPTIML_CP_ASYNC    0 forces the pre-sm_80 code path
//   OPTIML_WARP_N      lanes of a warp along N (4, 8 or 16; default 8, or
//                      BN / TN when that is smaller): the warp is
//                      (32 / WARP_N) x WARP_N threads of the thread grid
//   OPTIML_GROUP_M     block rasterization: consecutive blocks walk down
//                      groups of GROUP_M tile rows before moving to the next
//                      tile column (default 1: row-major, as launched)

#ifndef OPTIML_BM
#define OPTIML_BM 128
#endif
#ifndef OPTIML_BN
#define OPTIML_BN 128
#endif
#ifndef OPTIML_BK
#define OPTIML_BK 8
#endif
#ifndef OPTIML_TM
#define OPTIML_TM 8
#endif
#ifndef OPTIML_TN
#define OPTIML_TN 8
#endif
#ifndef OPTIML_THREADS
#define OPTIML_THREADS ((OPTIML_BM / OPTIML_TM) * (OPTIML_BN / OPTIML_TN))
#endif
// cp.async (global -> shared without registers) needs sm_80+. Off for the
// host pass of nvcc and for older archs (register-staged fallback).
#ifndef OPTIML_CP_ASYNC
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
#define OPTIML_CP_ASYNC 1
#else
#define OPTIML_CP_ASYNC 0
#endif
#endif

#ifndef OPTIML_ASYNC_MODE
#if OPTIML_THREADS >= 1024
#define OPTIML_ASYNC_MODE 2  // 64-register budget: no staging registers at all
#else
#define OPTIML_ASYNC_MODE 1
#endif
#endif

// Minimum resident blocks per SM requested from ptxas via __launch_bounds__
// (caps registers at 65536 / (THREADS * MIN_BLOCKS)). Default: 16 warps per
// SM where the kernel fits without spills (2 blocks of 256 threads at <= 128
// registers: measured ~1.5x faster on H200 than 1 block at ~150 registers).
// 8x8 register tiles fit that budget only with BK = 8, 256 threads and
// cp.async (sm_80+, OPTIML_ASYNC_MODE != 0); otherwise (larger per-thread
// load share, or all loads staged through registers) they get ~170.
#ifndef OPTIML_MIN_BLOCKS
#if OPTIML_THREADS >= 512
#define OPTIML_MIN_BLOCKS 1
#elif (OPTIML_TM * OPTIML_TN >= 64) && (OPTIML_THREADS < 256 || OPTIML_BK > 8 || !OPTIML_CP_ASYNC || OPTIML_ASYNC_MODE == 0)
#define OPTIML_MIN_BLOCKS (65536 / (OPTIML_THREADS * 168) > 0 ? 65536 / (OPTIML_THREADS * 168) : 1)
#else
#define OPTIML_MIN_BLOCKS (512 / OPTIML_THREADS)
#endif
#endif
#include "optiml/defaults.cuh"  // OPTIML_DTYPE, OPTIML_TRANS_A/B, OPTIML_HAS_ALPHA/BETA/BIAS
#include "optiml/epilogue.cuh"  // OPTIML_ACT and the activations

#ifndef OPTIML_SPLIT_K
#define OPTIML_SPLIT_K 0
#endif
#ifndef OPTIML_REDUCE_THREADS
#define OPTIML_REDUCE_THREADS 256
#endif

#ifndef OPTIML_WARP_N
#define OPTIML_WARP_N ((OPTIML_BN / OPTIML_TN) < 8 ? (OPTIML_BN / OPTIML_TN) : 8)
#endif
#ifndef OPTIML_GROUP_M
#define OPTIML_GROUP_M 1
#endif
#ifndef OPTIML_TRIANGLE
#define OPTIML_TRIANGLE 0
#endif


#if (OPTIML_ASYNC_MODE < 0) || (OPTIML_ASYNC_MODE > 2)
#error "OPTIML_ASYNC_MODE must be 0, 1 or 2"
#endif
#if (OPTIML_TRANS_A != 0 && OPTIML_TRANS_A != 1) || (OPTIML_TRANS_B != 0 && OPTIML_TRANS_B != 1)
#error "OPTIML_TRANS_A / OPTIML_TRANS_B must be 0 or 1"
#endif
#if (OPTIML_SPLIT_K != 0) && (OPTIML_SPLIT_K != 1)
#error "OPTIML_SPLIT_K must be 0 or 1"
#endif
#if OPTIML_THREADS != ((OPTIML_BM / OPTIML_TM) * (OPTIML_BN / OPTIML_TN))
#error "OPTIML_THREADS must equal (OPTIML_BM / OPTIML_TM) * (OPTIML_BN / OPTIML_TN)"
#endif

namespace optiml_mm {

struct Cfg {
    static constexpr int BM = OPTIML_BM;
    static constexpr int BN = OPTIML_BN;
    static constexpr int BK = OPTIML_BK;
    static constexpr int TM = OPTIML_TM;
    static constexpr int TN = OPTIML_TN;
    static constexpr int THREADS = OPTIML_THREADS;
    static constexpr int TX = BN / TN;              // threads along N
    static constexpr int TY = BM / TM;              // threads along M
    static constexpr int LX = OPTIML_WARP_N;        // lanes of a warp along N
    static constexpr int LY = 32 / LX;              // lanes of a warp along M
    static constexpr int WARPS_X = TX / LX;
    static constexpr int PAD = 4;                   // keeps rows 16-byte aligned
    static constexpr int LDSA = BM + PAD;
    static constexpr int LDSB = BN + PAD;
    static constexpr int SMEM_BYTES = 2 * BK * (LDSA + LDSB) * 4;
};

static_assert(Cfg::BM > 0 && Cfg::BN > 0 && Cfg::BK > 0 && Cfg::TM > 0 && Cfg::TN > 0,
              "tile sizes must be positive");
static_assert(Cfg::TM % 4 == 0 && Cfg::TN % 4 == 0, "OPTIML_TM and OPTIML_TN must be multiples of 4");
static_assert(Cfg::TM <= 16 && Cfg::TN <= 16, "OPTIML_TM / OPTIML_TN larger than 16 would spill");
static_assert(Cfg::BM % Cfg::TM == 0 && Cfg::BN % Cfg::TN == 0, "BM % TM and BN % TN must be 0");
static_assert(Cfg::BK % 4 == 0, "OPTIML_BK must be a multiple of 4");
static_assert(Cfg::BM % 4 == 0 && Cfg::BN % 4 == 0, "BM and BN must be multiples of 4");
static_assert(Cfg::THREADS % 32 == 0, "OPTIML_THREADS must be a multiple of 32");
static_assert(Cfg::THREADS <= 1024, "OPTIML_THREADS must be <= 1024");
static_assert(Cfg::LX > 0 && 32 % Cfg::LX == 0, "OPTIML_WARP_N must divide 32");
static_assert(OPTIML_GROUP_M >= 1, "OPTIML_GROUP_M must be >= 1");
#if OPTIML_TRIANGLE < 0 || OPTIML_TRIANGLE > 2
#error "OPTIML_TRIANGLE must be 0, 1 (upper) or 2 (lower)"
#endif
#if OPTIML_TRIANGLE && (OPTIML_TRANS_A || OPTIML_TRANS_B || OPTIML_HAS_ALPHA || OPTIML_HAS_BETA || OPTIML_HAS_BIAS)
#error "a triangular product takes untransposed operands and no alpha, beta or bias"
#endif
static_assert(Cfg::TX % Cfg::LX == 0 && Cfg::TY % Cfg::LY == 0,
              "thread grid (BM/TM) x (BN/TN) cannot be tiled by 32-thread warps");
static_assert(Cfg::SMEM_BYTES <= 48 * 1024, "static shared memory must stay <= 48 KiB");

// Per-thread offsets relative to the block's tile origin fit in 32 bits:
// KCONTIG operand: rows < TILE, columns < BK; otherwise rows < BK, columns < TILE.
__device__ __forceinline__ bool narrow_ok(bool kcontig, int tile, int ld) {
    const long long span = kcontig ? (long long)tile * ld + Cfg::BK : (long long)Cfg::BK * ld + tile;
    return span < 4294967296ll;
}

__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull;
}

__device__ __forceinline__ void cp_async_commit() {
#if OPTIML_CP_ASYNC
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if OPTIML_CP_ASYNC
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

template <bool WIDE> struct OffsetType { typedef unsigned int T; };
template <> struct OffsetType<true> { typedef long long T; };

// Moves one operand tile (TILE rows/cols of M or N, BK of K) per k-step
// into shared memory, stored k-major: sm[k * (TILE + PAD) + t].
//  KCONTIG = true : the stored matrix is contiguous along K (A not transposed,
//                   B transposed). A thread reads 4 consecutive k of one row
//                   (a warp covers whole 32/64-byte row segments) and
//                   scatters them into 4 smem rows (transpose on the fly).
//  KCONTIG = false: contiguous along M/N. A thread reads 4 consecutive m/n
//                   of one k and writes them as one 16-byte chunk.
//  VEC: rows are 16-byte aligned and ld % 4 == 0 (checked at run time by the
//       kernel): 16-byte loads, one predicate per 4 elements. Otherwise 4
//       scalar loads, each predicated on its own.
// Elements outside the matrix are written as zeros and never read.
//  ASYNC (sm_80+): cp.async straight into shared memory, no staging
//       registers (only used for M/N-contiguous operands by default).
//       Otherwise through registers: start() issues the global loads before
//       the FFMAs of the current tile, finish() stores them afterwards.
// Slot s = tid + i * THREADS (i < LOADS) covers 4 elements. All slots of a
// thread share the position along K (KCONTIG) / along the tile (otherwise),
// so they differ by a fixed multiple of ld.
template <int TILE, bool KCONTIG, bool VEC, bool ASYNC, bool WIDE>
struct TileLoader {
    static constexpr int BK = Cfg::BK;
    static constexpr int THREADS = Cfg::THREADS;
    static constexpr int LDS = TILE + Cfg::PAD;
    static constexpr int SLOTS = TILE * BK / 4;
    static constexpr int LOADS = (SLOTS + THREADS - 1) / THREADS;
    static constexpr bool EXACT = (SLOTS % THREADS) == 0;
    static constexpr int PER_ROW = KCONTIG ? BK / 4 : TILE / 4;  // slots per stored row
    static_assert(THREADS % PER_ROW == 0, "THREADS must be a multiple of the slots per tile row");
    static constexpr int ISTEP = THREADS / PER_ROW;               // stored rows between slots i, i+1

    // Address of slot 0 = base + off. `base` (the block's tile origin,
    // advanced by one k-tile per start()) is the same for the whole block,
    // so it can live in uniform registers; `off` is this thread's fixed
    // offset, 32-bit unless the matrix is so wide that it does not fit
    // (WIDE, checked by the kernel).
    typedef typename OffsetType<WIDE>::T Off;
    const float* base;
    Off off;
    int t0;           // position along TILE of slot 0 (KCONTIG: row; else: first column)
    int k0s;          // position along K of slot 0 within the tile (KCONTIG: first k; else: k row)
    int sm_off;       // element offset of slot 0 inside a shared buffer
    float4 reg[ASYNC ? 1 : LOADS];

    __device__ __forceinline__ bool slot_exists(int i) const {
        return EXACT || (int)threadIdx.x + i * THREADS < SLOTS;
    }

    __device__ __forceinline__ void init(const float* __restrict__ mat, int ld, int tile0, int R, int tid) {
        if (KCONTIG) {
            t0 = tid / PER_ROW;
            k0s = (tid % PER_ROW) * 4;
            base = mat + (long long)tile0 * ld;
            const int row = tile0 + t0 < R ? t0 : 0;  // clamped: off stays in range
            off = (Off)row * (Off)ld + (Off)k0s;
        } else {
            t0 = (tid % PER_ROW) * 4;
            k0s = tid / PER_ROW;
            base = mat + tile0;
            const int col = tile0 + t0 < R ? t0 : 0;
            off = (Off)k0s * (Off)ld + (Off)col;
        }
        sm_off = k0s * LDS + t0;
    }

    // element j of slot i is inside the matrix (the tile starts at kpos)
    __device__ __forceinline__ bool valid(int i, int j, int kpos, int K, int tile0, int R) const {
        if (KCONTIG) {
            const bool row = tile0 + t0 + i * ISTEP < R;
            return slot_exists(i) && row && kpos + k0s + (VEC ? 0 : j) < K;
        } else {
            const bool col = tile0 + t0 + (VEC ? 0 : j) < R;
            return slot_exists(i) && col && kpos + k0s + i * ISTEP < K;
        }
    }

    __device__ __forceinline__ Off slot_offset(int i, int ld) const {
        return (Off)(i * ISTEP) * (Off)ld;
    }

    // Load the k-tile starting at kpos (the pointer must be at that tile).
    __device__ __forceinline__ void start(float* sm_buf, int kpos, int K, int ld, int tile0, int R) {
#pragma unroll
        for (int i = 0; i < LOADS; ++i) {
            const float* q = base + (off + slot_offset(i, ld));
            if (ASYNC) {
#if OPTIML_CP_ASYNC
                const unsigned d = (unsigned)__cvta_generic_to_shared(sm_buf + sm_off + (KCONTIG ? i * ISTEP : i * ISTEP * LDS));
                if (slot_exists(i)) {
                    if (!KCONTIG && VEC) {
                        const int v = valid(i, 0, kpos, K, tile0, R);
                        asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %2, 0;\n\t"
                                     "@p cp.async.cg.shared.global [%0], [%1], 16;\n\t"
                                     "@!p st.shared.v4.u32 [%0], {0, 0, 0, 0};\n\t}\n"
                                     :: "r"(d), "l"(q), "r"(v) : "memory");
                    } else {
#pragma unroll
                        for (int j = 0; j < 4; ++j) {
                            const int v = valid(i, j, kpos, K, tile0, R);
                            const unsigned dj = d + 4u * (unsigned)(KCONTIG ? j * LDS : j);
                            asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %2, 0;\n\t"
                                         "@p cp.async.ca.shared.global [%0], [%1], 4;\n\t"
                                         "@!p st.shared.u32 [%0], 0;\n\t}\n"
                                         :: "r"(dj), "l"(q + j), "r"(v) : "memory");
                        }
                    }
                }
#endif
            } else {
                float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
                if (VEC) {
                    if (valid(i, 0, kpos, K, tile0, R)) r = __ldg(reinterpret_cast<const float4*>(q));
                } else {
                    if (valid(i, 0, kpos, K, tile0, R)) r.x = __ldg(q + 0);
                    if (valid(i, 1, kpos, K, tile0, R)) r.y = __ldg(q + 1);
                    if (valid(i, 2, kpos, K, tile0, R)) r.z = __ldg(q + 2);
                    if (valid(i, 3, kpos, K, tile0, R)) r.w = __ldg(q + 3);
                }
                reg[ASYNC ? 0 : i] = r;
            }
        }
        // next k-tile (addresses may run past the matrix; they are only
        // dereferenced under valid())
        base += KCONTIG ? (long long)BK : (long long)BK * ld;
    }

    __device__ __forceinline__ void finish(float* sm_buf) const {
#pragma unroll
        for (int i = 0; i < LOADS; ++i) {
            if (ASYNC || !slot_exists(i)) continue;
            const float4 r = reg[ASYNC ? 0 : i];
            if (KCONTIG) {
                float* q = sm_buf + sm_off + i * ISTEP;
                q[0 * LDS] = r.x;
                q[1 * LDS] = r.y;
                q[2 * LDS] = r.z;
                q[3 * LDS] = r.w;
            } else {
                *reinterpret_cast<float4*>(sm_buf + sm_off + i * ISTEP * LDS) = r;
            }
        }
    }
};


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
    return optiml_act_exact(v);
}

// Fragments of one k step: TM/4 (TN/4) float4 reads, spaced TY*4 (TX*4)
// apart; `as`/`bs` already point at this thread's row/col and the k row.
__device__ __forceinline__ void load_frags(float (&a)[Cfg::TM], float (&b)[Cfg::TN],
                                           const float* as, const float* bs) {
#pragma unroll
    for (int c = 0; c < Cfg::TM / 4; ++c) {
        const float4 t4 = *reinterpret_cast<const float4*>(as + c * (Cfg::TY * 4));
        a[c * 4 + 0] = t4.x; a[c * 4 + 1] = t4.y; a[c * 4 + 2] = t4.z; a[c * 4 + 3] = t4.w;
    }
#pragma unroll
    for (int c = 0; c < Cfg::TN / 4; ++c) {
        const float4 t4 = *reinterpret_cast<const float4*>(bs + c * (Cfg::TX * 4));
        b[c * 4 + 0] = t4.x; b[c * 4 + 1] = t4.y; b[c * 4 + 2] = t4.z; b[c * 4 + 3] = t4.w;
    }
}

// Returns v unchanged, but the optimizer can no longer see where it came
// from: values derived from it are neither hoisted out of the batch loop
// nor kept live across the main loop (they are recomputed where used).
__device__ __forceinline__ int opaque(int v) {
    asm volatile("" : "+r"(v));
    return v;
}

// The (column, row) block tile of C this block computes. GROUP_M > 1
// reorders the tiles so that the blocks resident at the same time share
// rows of A and columns of B in L2: blocks are dispatched in launch order
// (x fastest), and each run of GROUP_M launched rows (GROUP_M * gridDim.x
// consecutive blocks) is remapped column-major onto those same tile rows.
// It is a bijection within every run, including the last, shorter one, so
// the grid and the set of tiles are unchanged. Indices stay < GROUP_M *
// gridDim.x (no overflow). Reads blockIdx through opaque() so that callers
// recompute it instead of keeping it live across the main loop.
__device__ __forceinline__ int2 block_tile() {
    const int bx = opaque((int)blockIdx.x);
#if OPTIML_TRIANGLE == 2
    const int by = (int)gridDim.y - 1 - opaque((int)blockIdx.y);
#else
    const int by = opaque((int)blockIdx.y);
#endif
#if OPTIML_GROUP_M > 1
    constexpr int G = OPTIML_GROUP_M;
    const int first = by - by % G;
    const int local = (by - first) * (int)gridDim.x + bx;
    const int rows = (int)gridDim.y - first;
    if (rows >= G) return make_int2(local / G, first + local % G);
    return make_int2(local / rows, first + local % rows);
#else
    return make_int2(bx, by);
#endif
}

#if OPTIML_TRIANGLE
// Whether element (m, n) of C lies outside the kept triangle (it is written 0).
__device__ __forceinline__ bool outside_triangle(int m, int n) {
    return OPTIML_TRIANGLE == 1 ? n < m : n > m;
}

// Zeroes the elements of one landed k-tile (absolute k of its first row: k0)
// that lie in the operands' unread triangles. All threads take part; the
// caller puts a barrier before (the tile has landed) and after.
__device__ __forceinline__ void mask_tile(float* __restrict__ sa, float* __restrict__ sb, int k0, int bm, int bn,
                                          int tid) {
    constexpr int BK = Cfg::BK, BM = Cfg::BM, BN = Cfg::BN;
    for (int e = tid; e < BK * BM; e += Cfg::THREADS) {
        const int kk = e / BM, m = e - kk * BM;
        const int k = k0 + kk, i = bm + m;
        if (OPTIML_TRIANGLE == 1 ? k < i : k > i) sa[kk * Cfg::LDSA + m] = 0.f;
    }
    for (int e = tid; e < BK * BN; e += Cfg::THREADS) {
        const int kk = e / BN, n = e - kk * BN;
        const int k = k0 + kk, j = bn + n;
        if (OPTIML_TRIANGLE == 1 ? k > j : k < j) sb[kk * Cfg::LDSB + n] = 0.f;
    }
}
#endif

// One (batch item z, block tile) of C.
template <bool VEC, bool WIDE>
__device__ __forceinline__ void gemm_block(const float* __restrict__ A, const float* __restrict__ B,
                                           float* __restrict__ C, const float* __restrict__ bias,
                                           int z, int M, int N, int K, long long strideC,
                                           float alpha, float beta,
                                           float* __restrict__ sA, float* __restrict__ sB
#if OPTIML_SPLIT_K
                                           , int KE, int kb, int batch, int split
#endif
                                           ) {
    constexpr int BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;
    constexpr int TX = Cfg::TX, TY = Cfg::TY, LX = Cfg::LX, LY = Cfg::LY;
    constexpr int LDSA = Cfg::LDSA, LDSB = Cfg::LDSB;
    const int lda = OPTIML_TRANS_A ? M : K;
    const int ldb = OPTIML_TRANS_B ? K : N;

    // A and B already point at batch item z. Without the opaque tid the
    // optimizer hoists z-invariant 64-bit row offsets out of the batch loop
    // and keeps them live across the main loop (-> spills at 128 registers).
    const int tid = opaque((int)threadIdx.x);
    const int2 tile = block_tile();
    const int bm = tile.y * Cfg::BM;
    const int bn = tile.x * Cfg::BN;
#if OPTIML_SPLIT_K
#define OPTIML_KE_ KE  // this split's K extent (A, B point at its start); K gives lda/ldb
#define OPTIML_KB_ kb  // the absolute k that A and B point at
#else
#define OPTIML_KE_ K
#define OPTIML_KB_ 0
#endif
#if OPTIML_TRIANGLE
    // Only k in [lo, hi) meets this tile's rows of A and columns of B inside
    // their triangles; A and B move to lo. (lo - kb is a multiple of 4: the
    // 16-byte paths stay aligned.)
    const int tri_lo = OPTIML_TRIANGLE == 1 ? bm : bn;
    const int tri_hi = OPTIML_TRIANGLE == 1 ? bn + Cfg::BN : bm + Cfg::BM;
    const int lo = OPTIML_KB_ > tri_lo ? OPTIML_KB_ : tri_lo;
    const int hi = OPTIML_KB_ + OPTIML_KE_ < tri_hi ? OPTIML_KB_ + OPTIML_KE_ : tri_hi;
    const int kext = hi > lo ? hi - lo : 0;
    A += lo - OPTIML_KB_;
    B += (long long)(lo - OPTIML_KB_) * N;
    // k-tiles t < t_a hold A's diagonal, t >= t_b B's (upper; the lower
    // triangle swaps the operands' roles): only those are masked.
    const int t_a = OPTIML_TRIANGLE == 1 ? (bm + Cfg::BM - lo + BK - 1) / BK : (bn + Cfg::BN - lo + BK - 1) / BK;
    const int t_b = OPTIML_TRIANGLE == 1 ? (bn - lo) / BK : (bm - lo) / BK;
#undef OPTIML_KE_
#define OPTIML_KE_ kext
#endif

    constexpr bool VA = VEC, VB = VEC;
    constexpr bool KA = OPTIML_TRANS_A == 0;  // A contiguous along K
    constexpr bool KB = OPTIML_TRANS_B != 0;  // B contiguous along K
    // cp.async for M/N-contiguous operands (16-byte chunks) and, on the
    // scalar fallback path, for everything (no staging registers there).
    constexpr bool ASYNC_A = OPTIML_CP_ASYNC && (OPTIML_ASYNC_MODE == 2 || (OPTIML_ASYNC_MODE == 1 && (!KA || !VA)));
    constexpr bool ASYNC_B = OPTIML_CP_ASYNC && (OPTIML_ASYNC_MODE == 2 || (OPTIML_ASYNC_MODE == 1 && (!KB || !VB)));
    constexpr bool ANY_ASYNC = ASYNC_A || ASYNC_B;
    TileLoader<Cfg::BM, KA, VA, ASYNC_A, WIDE> la;
    TileLoader<Cfg::BN, KB, VB, ASYNC_B, WIDE> lb;
    la.init(A, lda, bm, M, tid);
    lb.init(B, ldb, bn, N, tid);

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    const int ntiles = (OPTIML_KE_ + BK - 1) / BK;
    if (ntiles > 0) {
        // a thread's fragment rows/cols: a warp is LY x LX lanes
        const int warp = tid >> 5, lane = tid & 31;
        const int tx = (warp % Cfg::WARPS_X) * LX + (lane % LX);
        const int ty = (warp / Cfg::WARPS_X) * LY + (lane / LX);
        const float* const as0 = sA + ty * 4;  // + buffer * BK * LDSA + k * LDSA + c * TY * 4
        const float* const bs0 = sB + tx * 4;

        // prologue: tile 0 -> buffer 0, fragments of k = 0
        la.start(sA, 0, OPTIML_KE_, lda, bm, M);
        lb.start(sB, 0, OPTIML_KE_, ldb, bn, N);
        la.finish(sA);
        lb.finish(sB);
        if (ANY_ASYNC) {
            cp_async_commit();
            cp_async_wait_all();
        }
        __syncthreads();
#if OPTIML_TRIANGLE
        if (0 < t_a || 0 >= t_b) {
            mask_tile(sA, sB, lo, bm, bn, tid);
            __syncthreads();
        }
#endif

        // Register double buffering of the fragments: the LDS.128 of step
        // k + 1 are issued before the FFMAs of step k.
        float fa[2][TM], fb[2][TN];
        load_frags(fa[0], fb[0], as0, bs0);

        for (int t = 0; t < ntiles; ++t) {
            const int cur = t & 1;
            const int knext = (t + 1) * BK;
            const bool more = knext < OPTIML_KE_;
            float* const sa_next = sA + (cur ^ 1) * (BK * LDSA);
            float* const sb_next = sB + (cur ^ 1) * (BK * LDSB);
            // Global loads (or cp.async) of tile t + 1 go out first, so they
            // are in flight during the whole tile. Buffer cur ^ 1 held tile
            // t - 1, which every thread finished reading before the barrier
            // that ended the previous iteration.
            if (more) {
                la.start(sa_next, knext, OPTIML_KE_, lda, bm, M);
                lb.start(sb_next, knext, OPTIML_KE_, ldb, bn, N);
                if (ANY_ASYNC) cp_async_commit();
            }
            const float* const as = as0 + cur * (BK * LDSA);
            const float* const bs = bs0 + cur * (BK * LDSB);
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                if (k < BK - 1)
                    load_frags(fa[(k + 1) & 1], fb[(k + 1) & 1], as + (k + 1) * LDSA, bs + (k + 1) * LDSB);
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(fa[k & 1][i], fb[k & 1][j], acc[i][j]);
            }
            // publish tile t + 1, then fetch its first fragments
            if (more) {
                la.finish(sa_next);
                lb.finish(sb_next);
                if (ANY_ASYNC) cp_async_wait_all();
            }
            __syncthreads();
#if OPTIML_TRIANGLE
            if (more && (t + 1 < t_a || t + 1 >= t_b)) {
                const int2 mt = block_tile();
                mask_tile(sA + (cur ^ 1) * (BK * LDSA), sB + (cur ^ 1) * (BK * LDSB), lo + knext,
                          mt.y * Cfg::BM, mt.x * Cfg::BN, opaque((int)threadIdx.x));
                __syncthreads();
            }
#endif
            if (more) load_frags(fa[0], fb[0], as0 + (cur ^ 1) * (BK * LDSA), bs0 + (cur ^ 1) * (BK * LDSB));
        }
        // (the barrier of the last step also guarantees that all threads are
        // done with the buffers before the next batch item overwrites them)
    }

    // ---------------- epilogue ----------------
    // Everything here is recomputed from fresh opaque copies so that none of
    // it is live (in registers) during the main loop.
    const int etid = opaque((int)threadIdx.x);
    const int ewarp = etid >> 5, elane = etid & 31;
    const int tx = (ewarp % Cfg::WARPS_X) * LX + (elane % LX);
    const int ty = (ewarp / Cfg::WARPS_X) * LY + (elane / LX);
    const int2 etile = block_tile();
    const int em = etile.y * Cfg::BM;
    const int en = etile.x * Cfg::BN;
    const int ez = z;
#undef OPTIML_KE_
#undef OPTIML_KB_
#if OPTIML_SPLIT_K
    // Split-K partial (split >= 0): raw accumulators to W[split][z] (C is the
    // workspace W), no epilogue; every element of the tile inside M x N is
    // written. split < 0: the plain epilogue below.
    if (split >= 0) {
        const int es = split;
        const long long plane = (long long)M * N;
        const bool vecW = (N % 4 == 0) && aligned16(C);
        C += ((long long)es * batch + ez) * plane;
        (void)bias; (void)alpha; (void)beta; (void)strideC;
#pragma unroll
        for (int c = 0; c < TN / 4; ++c) {
            const int n0 = en + c * (TX * 4) + tx * 4;
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int m = em + (i / 4) * (TY * 4) + ty * 4 + (i % 4);
                if (m >= M) continue;
                float* __restrict__ wrow = C + (long long)m * N;
                if (vecW && n0 < N) {
                    *reinterpret_cast<float4*>(wrow + n0) =
                        make_float4(acc[i][c * 4 + 0], acc[i][c * 4 + 1], acc[i][c * 4 + 2], acc[i][c * 4 + 3]);
                } else {
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        if (n0 + j < N) wrow[n0 + j] = acc[i][c * 4 + j];
                }
            }
        }
        return;
    }
#endif
    // 16-byte stores (and beta loads) when every row of C is 16-byte aligned
    const bool vecC = (N % 4 == 0) && (strideC % 4 == 0) && aligned16(C);
    C += (long long)ez * strideC;
    // Column groups outermost: only 4 bias values are live at a time, and
    // the accumulators die group by group.
#pragma unroll
    for (int c = 0; c < TN / 4; ++c) {
        const int n0 = en + c * (TX * 4) + tx * 4;
        float bv[4] = {0.f, 0.f, 0.f, 0.f};
#if OPTIML_HAS_BIAS
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (n0 + j < N) bv[j] = __ldg(bias + n0 + j);
#endif
        (void)bias;
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int m = em + (i / 4) * (TY * 4) + ty * 4 + (i % 4);
            if (m >= M) continue;
            float* __restrict__ crow = C + (long long)m * N;
            if (vecC && n0 < N) {
                // N % 4 == 0 on this path, so n0 + 3 < N
                float4 old = make_float4(0.f, 0.f, 0.f, 0.f);
#if OPTIML_HAS_BETA
                old = *reinterpret_cast<const float4*>(crow + n0);
#endif
                float4 o;
                o.x = epilogue(acc[i][c * 4 + 0], alpha, beta, old.x, bv[0]);
                o.y = epilogue(acc[i][c * 4 + 1], alpha, beta, old.y, bv[1]);
                o.z = epilogue(acc[i][c * 4 + 2], alpha, beta, old.z, bv[2]);
                o.w = epilogue(acc[i][c * 4 + 3], alpha, beta, old.w, bv[3]);
#if OPTIML_TRIANGLE
                if (outside_triangle(m, n0 + 0)) o.x = 0.f;
                if (outside_triangle(m, n0 + 1)) o.y = 0.f;
                if (outside_triangle(m, n0 + 2)) o.z = 0.f;
                if (outside_triangle(m, n0 + 3)) o.w = 0.f;
#endif
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
                        float v = epilogue(acc[i][c * 4 + j], alpha, beta, old, bv[j]);
#if OPTIML_TRIANGLE
                        if (outside_triangle(m, n)) v = 0.f;
#endif
                        crow[n] = v;
                    }
                }
            }
        }
    }
}

}  // namespace optiml_mm

extern "C" __global__ void __launch_bounds__(OPTIML_THREADS, OPTIML_MIN_BLOCKS) optiml_matmul(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    const float* __restrict__ bias,
    int batch, int M, int N, int K,
    long long strideA, long long strideB, long long strideC,
    float alpha, float beta
#if OPTIML_SPLIT_K
    , int splits
#endif
    ) {
    using optiml_mm::Cfg;
    __shared__ __align__(16) float sA[2 * Cfg::BK * Cfg::LDSA];
    __shared__ __align__(16) float sB[2 * Cfg::BK * Cfg::LDSB];

    {
        const int2 tile = optiml_mm::block_tile();
        if (tile.y * Cfg::BM >= M || tile.x * Cfg::BN >= N) return;  // block-uniform
    }

#if OPTIML_SPLIT_K
    if (splits > 1) {
        // Split-K partial pass: C is the workspace W (see the header). Block z
        // index = batch slot * S + split; Z = gridDim.z / S batch items in flight.
        const int S = splits;
        const int zs = (int)gridDim.z / S;
        if ((int)blockIdx.z >= zs * S) return;  // block-uniform (gridDim.z not a multiple of S)
        for (int z = (int)blockIdx.z / S; z < batch; z = (batch - z > zs) ? z + zs : batch) {
            const int k = optiml_mm::opaque(K);
            // K range of split s: whole k-tiles, balanced (floor(T/S) or
            // ceil(T/S) tiles each), starting at a multiple of BK (so 16-byte
            // alignment of the operand rows is preserved); may be empty.
            const int s = optiml_mm::opaque((int)blockIdx.z) % S;
            const long long T = ((long long)k + Cfg::BK - 1) / Cfg::BK;
            const long long t0 = (long long)s * T / S, t1 = (long long)(s + 1) * T / S;
            const long long kb = t0 * Cfg::BK < k ? t0 * Cfg::BK : (long long)k;
            const long long ke = t1 * Cfg::BK < k ? t1 * Cfg::BK : (long long)k;
            const int KE = (int)(ke - kb);
            const float* Az = A + (long long)z * strideA + (OPTIML_TRANS_A ? kb * M : kb);
            const float* Bz = B + (long long)z * strideB + (OPTIML_TRANS_B ? kb : kb * N);
            const int lda = OPTIML_TRANS_A ? M : k;
            const int ldb = OPTIML_TRANS_B ? k : N;
            // kb % 4 == 0: Az / Bz keep the 16-byte alignment of A / B
            const bool vec = (lda % 4 == 0) && (strideA % 4 == 0) && optiml_mm::aligned16(A) &&
                             (ldb % 4 == 0) && (strideB % 4 == 0) && optiml_mm::aligned16(B);
            const bool narrow = optiml_mm::narrow_ok(OPTIML_TRANS_A == 0, Cfg::BM, lda) &&
                                optiml_mm::narrow_ok(OPTIML_TRANS_B != 0, Cfg::BN, ldb);
            if (!narrow)
                optiml_mm::gemm_block<false, true>(Az, Bz, C, bias, z, M, N, K, strideC, alpha, beta, sA, sB, KE, (int)kb, batch, s);
            else if (vec)
                optiml_mm::gemm_block<true, false>(Az, Bz, C, bias, z, M, N, K, strideC, alpha, beta, sA, sB, KE, (int)kb, batch, s);
            else
                optiml_mm::gemm_block<false, false>(Az, Bz, C, bias, z, M, N, K, strideC, alpha, beta, sA, sB, KE, (int)kb, batch, s);
        }
        return;
    }
#define OPTIML_PLAIN_ARGS_ , K, 0, batch, -1
#else
#define OPTIML_PLAIN_ARGS_
#endif
    const int gz = (int)gridDim.z;
    for (int z = blockIdx.z; z < batch; z = (batch - z > gz) ? z + gz : batch) {
        const float* Az = A + (long long)z * strideA;
        const float* Bz = B + (long long)z * strideB;
        // 16-byte loads are legal when every row of every batch item starts
        // 16-byte aligned (for the K-contiguous operands ld = K, so this also
        // guarantees that a vector never straddles the end of a row).
        // (Evaluated per batch item from an opaque copy of K: a flag hoisted
        // out of this loop would stay live across the main loop.)
        const int k = optiml_mm::opaque(K);
        const int lda = OPTIML_TRANS_A ? M : k;
        const int ldb = OPTIML_TRANS_B ? k : N;
        const bool vec = (lda % 4 == 0) && (strideA % 4 == 0) && optiml_mm::aligned16(A) &&
                         (ldb % 4 == 0) && (strideB % 4 == 0) && optiml_mm::aligned16(B);
        const bool narrow = optiml_mm::narrow_ok(OPTIML_TRANS_A == 0, Cfg::BM, lda) &&
                            optiml_mm::narrow_ok(OPTIML_TRANS_B != 0, Cfg::BN, ldb);
        // Three instantiations: both operands vectorised, both scalar, and
        // (only for absurdly wide matrices, ld >= ~2^25) scalar with 64-bit
        // per-thread offsets. Mixed vector/scalar would double the code for
        // a rare case.
        if (!narrow)
            optiml_mm::gemm_block<false, true>(Az, Bz, C, bias, z, M, N, K, strideC, alpha, beta, sA, sB OPTIML_PLAIN_ARGS_);
        else if (vec)
            optiml_mm::gemm_block<true, false>(Az, Bz, C, bias, z, M, N, K, strideC, alpha, beta, sA, sB OPTIML_PLAIN_ARGS_);
        else
            optiml_mm::gemm_block<false, false>(Az, Bz, C, bias, z, M, N, K, strideC, alpha, beta, sA, sB OPTIML_PLAIN_ARGS_);
    }
#undef OPTIML_PLAIN_ARGS_
}

#if OPTIML_SPLIT_K
#define OPTIML_SPLITK_NS optiml_mm
#include "optiml/splitk.cuh"  // optiml_splitk_reduce
#endif
