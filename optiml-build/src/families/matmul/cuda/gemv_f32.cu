// optiml: batched fp32 GEMV (matrix x vector / vector x matrix), row-major,
// same ABI and flag macros as the matmul template (matmul_f32.cu), so it can
// become a second entry of that template.
//
// Compiled by NVRTC at build time; specialised ONLY through preprocessor
// macros defined before this text. The optiml/ headers (defaults.cuh, epilogue.cuh: in memory for NVRTC, -I optiml-build/src/cuda for nvcc), no standard library.
// Every function is explicitly annotated so the file also compiles with
// nvcc (bench/harness/gemv/gemv_harness.cu includes it) and with or without
// NVRTC's -default-device.
//
// Entry point:
//   extern "C" __global__ void optiml_gemv(A, B, C, bias, batch, M, N, K,
//                                          strideA, strideB, strideC,
//                                          alpha, beta)
// computes, like optiml_matmul, C[z] (M x N, ldc = N) = epilogue(op(A[z]) * op(B[z]))
// but only for the matrix-vector cases N == 1 or M == 1 (anything else:
// the kernel returns without writing; the launcher must use optiml_matmul).
//   N == 1: C is an M-vector, op(B) the K-vector B[z] (K x 1 and 1 x K
//           row-major are the same memory, so TRANS_B does not matter);
//           the matrix operand is A: TRANS_A 0 -> M x K (lda = K),
//           TRANS_A 1 -> stored K x M (lda = M).
//   M == 1: C is an N-vector, op(A) the K-vector A[z]; the matrix operand
//           is B: TRANS_B 0 -> K x N (ldb = N), TRANS_B 1 -> stored N x K.
//   (M == N == 1: a single dot product; N == 1 rules apply, and A is a
//   contiguous K-vector whatever TRANS_A says.)
// X[z] = X + z * strideX (stride 0 = broadcast that operand).
// Epilogue per element, exactly as optiml_matmul: v = acc; v *= alpha
// (HAS_ALPHA); v += beta * C_old (HAS_BETA; otherwise C is never read);
// v += bias[n] (HAS_BIAS; n is the column of C: for N == 1 that is always
// bias[0]); v = optiml_act_exact(v) (OPTIML_ACT: optiml/epilogue.cuh).
// Pointers need only 4-byte alignment; 16-byte paths are chosen at run time.
// K == 0 gives epilogue(0). Deterministic: no atomics, fixed reduction order
// (the result bits do not depend on the grid size or on scheduling).
// Accuracy: a lane sums a few float products per step in float (the UNROLL
// loads of one step) and adds that partial to a double accumulator, and the
// warp / split / column partials are added in double; the sum is rounded to
// float once, before the epilogue. A long dot product (KernelBench's K = 2^20)
// summed in one float per lane drifts by 2e-4 relative; this stays within
// an ulp or two of the exact sum. The double work is one convert and one add
// per UNROLL float4 loads, free in a kernel bound by DRAM.
//
// Launch:
//   grid  = (ceil(L / TILE), 1, min(batch, 65535)), block = OPTIML_GEMV_THREADS,
//   dynamic shared memory = 0, where L = (N == 1 ? M : N) is the output length
//   and TILE = OPTIML_GEMV_DOT_ROWS in "dot" mode, OPTIML_GEMV_COL_COLS in
//   "column" mode:
//     dot mode    = the matrix operand is contiguous along K:
//                   (N == 1 && (!TRANS_A || M == 1)) || (M == 1 && N != 1 && TRANS_B)
//     column mode = contiguous along the output (the other two cases).
//   Any grid.x >= 1 is correct (blocks loop over tiles x, x + gridDim.x, ...),
//   and blocks loop over batch items z = blockIdx.z, z + gridDim.z, ...
//   grid.y must be 1 (blocks with blockIdx.y > 0 do nothing).
//
// Design (memory bound: ~4 bytes of matrix per FMA; the goal is DRAM
// bandwidth, i.e. enough independent 16-byte loads in flight per SM):
//  * dot mode: a row of the matrix is a contiguous K-run; OPTIML_GEMV_KSPLIT
//    warps share one row (split K, interleaved by 512-byte warp chunks) and
//    each warp handles OPTIML_GEMV_RPW rows. Per loop step a lane issues
//    UNROLL (x RPW) independent 16-byte loads of the matrix plus UNROLL
//    16-byte loads of the vector (L1 hits after the first warp), then FMAs.
//    A warp's loads of one step cover UNROLL * 512 contiguous bytes of a row.
//    Rows that do not start 16-byte aligned (K % 4 != 0, or a misaligned
//    base) peel 0..3 head elements so that the body still uses 16-byte
//    loads of the matrix; the vector is then loaded as float4 when x + head
//    is 16-byte aligned, else as 4 scalars. 0..3 tail elements are scalar.
//    Reduction: xor-butterfly shuffles (bit-identical on all lanes), then
//    for KSPLIT > 1 a fixed-order sum over the KSPLIT partials in shared memory.
//  * column mode: the matrix is K x L row-major. A block covers COL_COLS =
//    4 * COL_TX consecutive outputs; COL_TX threads along the output (4
//    consecutive columns each, one float4 per k row) times TK = THREADS /
//    COL_TX threads along K (k = tk, tk + TK, ...). Per step a thread has
//    UNROLL independent 16-byte loads (UNROLL k rows) in flight; a warp
//    reads 32 / COL_TX row segments of 16 * COL_TX contiguous bytes. When
//    rows are not all 16-byte aligned (L % 4 != 0 or misaligned base) each
//    thread takes the columns tx + c * COL_TX (c < 4) with scalar loads (a
//    warp instruction still reads contiguous 4 * COL_TX-byte segments).
//    The TK partial sums are added in shared memory in fixed tk order.
//  * 64-bit arithmetic for every row / batch offset; per-row indices are int.
//
// Tuning macros (all optional):
//   OPTIML_GEMV_THREADS    block size (multiple of 32, <= 1024; default 256)
//   OPTIML_GEMV_UNROLL     independent 16-byte matrix loads per thread per
//                          row per step (default 4)
//   OPTIML_GEMV_RPW        dot mode: rows per warp (default 1)
//   OPTIML_GEMV_KSPLIT     dot mode: warps per row (power of two dividing the
//                          warp count; default 1)
//   OPTIML_GEMV_COL_TX     column mode: threads along the output (divides
//                          THREADS; 4 columns each; default 16)
//   OPTIML_GEMV_LOAD       matrix loads: 0 ld.global.nc (__ldg, default),
//                          1 ld.global.cs (__ldcs, evict-first),
//                          2 ld.global.nc.L1::no_allocate.L2::256B
//   OPTIML_GEMV_MIN_BLOCKS __launch_bounds__ min blocks per SM
// Derived (read-only): OPTIML_GEMV_DOT_ROWS, OPTIML_GEMV_COL_COLS (tile sizes).

#ifndef OPTIML_GEMV_THREADS
#define OPTIML_GEMV_THREADS 256
#endif
#ifndef OPTIML_GEMV_UNROLL
#define OPTIML_GEMV_UNROLL 4
#endif
#ifndef OPTIML_GEMV_RPW
#define OPTIML_GEMV_RPW 1
#endif
#ifndef OPTIML_GEMV_KSPLIT
#define OPTIML_GEMV_KSPLIT 1
#endif
#ifndef OPTIML_GEMV_COL_TX
#define OPTIML_GEMV_COL_TX 16
#endif
#ifndef OPTIML_GEMV_LOAD
#define OPTIML_GEMV_LOAD 0
#endif
// Default: 32 warps per SM (<= 64 registers) for the plain warp-per-row
// kernel with UNROLL <= 4; otherwise let ptxas take up to 128 registers
// (RPW > 1 / KSPLIT > 1 spill a few bytes at 64). Either way ~64 KB of
// matrix loads can be in flight per SM. 1024-thread blocks are capped at 64
// registers by the hardware: only RPW 1, KSPLIT 1, UNROLL <= 8 fit there.
// Supported (spill-free, see gemv_nvrtc_check.py) knob space:
// UNROLL * RPW <= 8; THREADS 1024 only with RPW 1, KSPLIT 1.
#ifndef OPTIML_GEMV_MIN_BLOCKS
#if OPTIML_GEMV_THREADS >= 1024
#define OPTIML_GEMV_MIN_BLOCKS 1
#elif OPTIML_GEMV_UNROLL <= 4 && OPTIML_GEMV_RPW == 1 && OPTIML_GEMV_KSPLIT == 1
#define OPTIML_GEMV_MIN_BLOCKS (1024 / OPTIML_GEMV_THREADS)
#else
#define OPTIML_GEMV_MIN_BLOCKS (512 / OPTIML_GEMV_THREADS > 0 ? 512 / OPTIML_GEMV_THREADS : 1)
#endif
#endif

#define OPTIML_GEMV_DOT_ROWS ((OPTIML_GEMV_THREADS / 32) * OPTIML_GEMV_RPW / OPTIML_GEMV_KSPLIT)
#define OPTIML_GEMV_COL_COLS (4 * OPTIML_GEMV_COL_TX)

#include "optiml/defaults.cuh"  // OPTIML_DTYPE, OPTIML_TRANS_A/B, OPTIML_HAS_ALPHA/BETA/BIAS
#include "optiml/epilogue.cuh"  // OPTIML_ACT and the activations

#if (OPTIML_TRANS_A != 0 && OPTIML_TRANS_A != 1) || (OPTIML_TRANS_B != 0 && OPTIML_TRANS_B != 1)
#error "OPTIML_TRANS_A / OPTIML_TRANS_B must be 0 or 1"
#endif
#if (OPTIML_GEMV_LOAD < 0) || (OPTIML_GEMV_LOAD > 2)
#error "OPTIML_GEMV_LOAD must be 0, 1 or 2"
#endif

namespace optiml_gv {

struct Cfg {
    static constexpr int THREADS = OPTIML_GEMV_THREADS;
    static constexpr int WARPS = THREADS / 32;
    static constexpr int U = OPTIML_GEMV_UNROLL;
    static constexpr int RPW = OPTIML_GEMV_RPW;
    static constexpr int KSPLIT = OPTIML_GEMV_KSPLIT;
    static constexpr int DOT_ROWS = OPTIML_GEMV_DOT_ROWS;
    static constexpr int TX = OPTIML_GEMV_COL_TX;
    static constexpr int TK = THREADS / TX;
    static constexpr int COLS = OPTIML_GEMV_COL_COLS;
    // shared scratch (doubles): column mode TK x COLS partials (= 4 * THREADS);
    // dot mode DOT_ROWS x KSPLIT = WARPS * RPW partials (fits since RPW <= 8)
    static constexpr int RED = 4 * THREADS;
};

static_assert(Cfg::THREADS % 32 == 0 && Cfg::THREADS >= 32 && Cfg::THREADS <= 1024,
              "OPTIML_GEMV_THREADS must be a multiple of 32 in [32, 1024]");
static_assert(Cfg::U >= 1 && Cfg::U <= 16, "OPTIML_GEMV_UNROLL must be in [1, 16]");
static_assert(Cfg::RPW >= 1 && Cfg::RPW <= 8, "OPTIML_GEMV_RPW must be in [1, 8]");
static_assert(Cfg::KSPLIT >= 1 && Cfg::WARPS % Cfg::KSPLIT == 0 && (Cfg::KSPLIT & (Cfg::KSPLIT - 1)) == 0,
              "OPTIML_GEMV_KSPLIT must be a power of two dividing the warp count");
static_assert(Cfg::TX >= 1 && Cfg::THREADS % Cfg::TX == 0, "OPTIML_GEMV_COL_TX must divide OPTIML_GEMV_THREADS");
static_assert(Cfg::TX >= 32 ? Cfg::TX % 32 == 0 : 32 % Cfg::TX == 0,
              "OPTIML_GEMV_COL_TX must divide 32 or be a multiple of 32");
static_assert(Cfg::WARPS * Cfg::RPW <= Cfg::RED, "shared scratch too small");

__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull;
}

// Matrix loads (read once: streaming hint selectable), vector loads (reused
// by every row / column group: plain read-only cached loads).
__device__ __forceinline__ float4 ldm4(const float* p) {
#if OPTIML_GEMV_LOAD == 1
    return __ldcs(reinterpret_cast<const float4*>(p));
#elif OPTIML_GEMV_LOAD == 2 && defined(__CUDA_ARCH__)
    float4 r;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
        : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
        : "l"(p));
    return r;
#else
    return __ldg(reinterpret_cast<const float4*>(p));
#endif
}
__device__ __forceinline__ float ldm1(const float* p) {
#if OPTIML_GEMV_LOAD == 1
    return __ldcs(p);
#elif OPTIML_GEMV_LOAD == 2 && defined(__CUDA_ARCH__)
    float r;
    asm("ld.global.nc.L1::no_allocate.L2::256B.f32 %0, [%1];" : "=f"(r) : "l"(p));
    return r;
#else
    return __ldg(p);
#endif
}
template <bool XVEC>
__device__ __forceinline__ float4 ldx4(const float* __restrict__ x) {
    if (XVEC) return __ldg(reinterpret_cast<const float4*>(x));
    return make_float4(__ldg(x + 0), __ldg(x + 1), __ldg(x + 2), __ldg(x + 3));
}

__device__ __forceinline__ float dot4(float4 a, float4 b, float acc) {
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
    acc = fmaf(a.z, b.z, acc);
    acc = fmaf(a.w, b.w, acc);
    return acc;
}

// Full-warp sum; every lane gets the same bits (a + b == b + a in IEEE).
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
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
    return optiml_act_exact(v);
}

// Output o of the current batch item (Cz already offset): C is contiguous
// (N == 1: element m of column 0; M == 1: element n of row 0).
// bias is indexed by the column of C: bias[0] when N == 1, bias[o] when M == 1.
__device__ __forceinline__ void store_out(float* __restrict__ Cz, const float* __restrict__ bias, bool bias_per_out,
                                          int o, double sum, float alpha, float beta) {
    const float acc = (float)sum;
    float old = 0.f, bv = 0.f;
#if OPTIML_HAS_BETA
    old = Cz[o];
#endif
#if OPTIML_HAS_BIAS
    bv = __ldg(bias + (bias_per_out ? o : 0));
#endif
    (void)bias; (void)bias_per_out;
    Cz[o] = epilogue(acc, alpha, beta, old, bv);
}

// ------------------------------------------------------------- dot mode ---
// Body of one row: nv float4 chunks at w4 (16-byte aligned), vector at x
// (16-byte aligned iff XVEC). This lane takes chunks v0, v0 + S, ... with
// S = 32 * KSPLIT; UNROLL of them per step, all loads issued before the FMAs.
template <bool XVEC>
__device__ __forceinline__ double dot_body(const float* __restrict__ w4, const float* __restrict__ x, int nv, int v0,
                                           double acc) {
    constexpr int U = Cfg::U;
    constexpr int S = 32 * Cfg::KSPLIT;
    int v = v0;
#pragma unroll 1
    for (; v + (U - 1) * S < nv; v += U * S) {
        float4 a[U], b[U];
#pragma unroll
        for (int i = 0; i < U; ++i) a[i] = ldm4(w4 + 4 * (v + i * S));
#pragma unroll
        for (int i = 0; i < U; ++i) b[i] = ldx4<XVEC>(x + 4 * (v + i * S));
        float p = 0.f;
#pragma unroll
        for (int i = 0; i < U; ++i) p = dot4(a[i], b[i], p);
        acc += (double)p;
    }
    for (; v < nv; v += S) acc += (double)dot4(ldm4(w4 + 4 * v), ldx4<XVEC>(x + 4 * v), 0.f);
    return acc;
}

// This lane's partial sum of one row w (any 4-byte alignment) with x.
// Head (0..3 elements up to the first 16-byte boundary of w) and tail (0..3)
// are done by split 0, lanes 0..2.
__device__ __forceinline__ double dot_row(const float* __restrict__ w, const float* __restrict__ x, int K, int s,
                                          int lane) {
    int h = (int)((0u - (unsigned)(reinterpret_cast<unsigned long long>(w) >> 2)) & 3u);
    if (h > K) h = K;
    const int nv = (K - h) >> 2;
    const int t0 = h + 4 * nv;
    const int v0 = s * 32 + lane;
    double acc = 0.0;
    if (s == 0) {
        if (lane < h) acc += (double)__ldg(w + lane) * (double)__ldg(x + lane);
        if (lane < K - t0) acc += (double)ldm1(w + t0 + lane) * (double)__ldg(x + t0 + lane);
    }
    if (aligned16(x + h))
        acc = dot_body<true>(w + h, x + h, nv, v0, acc);
    else
        acc = dot_body<false>(w + h, x + h, nv, v0, acc);
    return acc;
}

// One tile of DOT_ROWS outputs: W is L x K (ld K), x a K-vector.
__device__ __forceinline__ void dot_tile(const float* __restrict__ W, const float* __restrict__ x,
                                         float* __restrict__ Cz, const float* __restrict__ bias, bool bias_per_out,
                                         int L, int K, int tile, float alpha, float beta, double* __restrict__ red) {
    constexpr int RPW = Cfg::RPW, KSPLIT = Cfg::KSPLIT, U = Cfg::U;
    const int tid = (int)threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int g = warp / KSPLIT;  // row group of this warp
    const int s = warp % KSPLIT;  // K split index
    const int row0 = tile * Cfg::DOT_ROWS + g * RPW;

    double acc[RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) acc[r] = 0.0;

    if (row0 < L) {  // warp-uniform
        if (RPW > 1 && (K & 3) == 0 && aligned16(W) && aligned16(x)) {
            // all rows 16-byte aligned: RPW rows at once, sharing the x loads
            // (rows past L are clamped to L - 1: loaded, never stored)
            constexpr int S = 32 * KSPLIT;
            const int nv = K >> 2;
            const float* wr[RPW];
#pragma unroll
            for (int r = 0; r < RPW; ++r) wr[r] = W + (long long)(row0 + r < L ? row0 + r : L - 1) * K;
            int v = s * 32 + lane;
#pragma unroll 1
            for (; v + (U - 1) * S < nv; v += U * S) {
                float4 a[RPW][U], b[U];
#pragma unroll
                for (int i = 0; i < U; ++i)
#pragma unroll
                    for (int r = 0; r < RPW; ++r) a[r][i] = ldm4(wr[r] + 4 * (v + i * S));
#pragma unroll
                for (int i = 0; i < U; ++i) b[i] = ldx4<true>(x + 4 * (v + i * S));
#pragma unroll
                for (int r = 0; r < RPW; ++r) {
                    float p = 0.f;
#pragma unroll
                    for (int i = 0; i < U; ++i) p = dot4(a[r][i], b[i], p);
                    acc[r] += (double)p;
                }
            }
            for (; v < nv; v += S) {
                const float4 b = ldx4<true>(x + 4 * v);
#pragma unroll
                for (int r = 0; r < RPW; ++r) acc[r] += (double)dot4(ldm4(wr[r] + 4 * v), b, 0.f);
            }
        } else {
#pragma unroll
            for (int r = 0; r < RPW; ++r)
                if (row0 + r < L) acc[r] = dot_row(W + (long long)(row0 + r) * K, x, K, s, lane);
        }
    }
#pragma unroll
    for (int r = 0; r < RPW; ++r) acc[r] = warp_sum(acc[r]);

    if (KSPLIT == 1) {
#pragma unroll
        for (int r = 0; r < RPW; ++r)
            if (lane == r && row0 + r < L) store_out(Cz, bias, bias_per_out, row0 + r, acc[r], alpha, beta);
    } else {
#pragma unroll
        for (int r = 0; r < RPW; ++r)
            if (lane == r) red[(g * RPW + r) * KSPLIT + s] = acc[r];
        __syncthreads();
        if (tid < Cfg::DOT_ROWS) {
            const int row = tile * Cfg::DOT_ROWS + tid;
            if (row < L) {
                double v = red[tid * KSPLIT];
#pragma unroll
                for (int q = 1; q < KSPLIT; ++q) v += red[tid * KSPLIT + q];
                store_out(Cz, bias, bias_per_out, row, v, alpha, beta);
            }
        }
        __syncthreads();  // red is reused by the next tile / batch item
    }
}

// ---------------------------------------------------------- column mode ---
// One tile of COLS outputs: W is K x L (ld L), x a K-vector.
__device__ __forceinline__ void col_tile(const float* __restrict__ W, const float* __restrict__ x,
                                         float* __restrict__ Cz, const float* __restrict__ bias, bool bias_per_out,
                                         int L, int K, int tile, float alpha, float beta, double* __restrict__ red) {
    constexpr int U = Cfg::U, TX = Cfg::TX, TK = Cfg::TK, COLS = Cfg::COLS;
    const int tid = (int)threadIdx.x;
    const int tx = tid % TX, tk = tid / TX;
    const int c0 = tile * COLS;
    const long long step = (long long)TK * L;  // elements between this thread's k rows
    double acc[4] = {0.0, 0.0, 0.0, 0.0};

    if ((L & 3) == 0 && aligned16(W)) {
        // every row 16-byte aligned: columns j .. j + 3 (all < L or all >= L)
        const int j = c0 + 4 * tx;
        if (j < L) {
            const float* p = W + (long long)tk * L + j;
            int k = tk;
            for (; k + (U - 1) * TK < K; k += U * TK, p += U * step) {
                float4 a[U];
                float xv[U];
#pragma unroll
                for (int i = 0; i < U; ++i) a[i] = ldm4(p + i * step);
#pragma unroll
                for (int i = 0; i < U; ++i) xv[i] = __ldg(x + k + i * TK);
                float s[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
                for (int i = 0; i < U; ++i) {
                    s[0] = fmaf(a[i].x, xv[i], s[0]);
                    s[1] = fmaf(a[i].y, xv[i], s[1]);
                    s[2] = fmaf(a[i].z, xv[i], s[2]);
                    s[3] = fmaf(a[i].w, xv[i], s[3]);
                }
#pragma unroll
                for (int c = 0; c < 4; ++c) acc[c] += (double)s[c];
            }
            for (; k < K; k += TK, p += step) {
                const float4 a = ldm4(p);
                const double xv = (double)__ldg(x + k);
                acc[0] += (double)a.x * xv;
                acc[1] += (double)a.y * xv;
                acc[2] += (double)a.z * xv;
                acc[3] += (double)a.w * xv;
            }
        }
#pragma unroll
        for (int c = 0; c < 4; ++c) red[tk * COLS + 4 * tx + c] = acc[c];
    } else {
        // scalar: columns c0 + tx + c * TX (c < 4); columns past L are
        // clamped to L - 1 (loaded, never stored)
        int jc[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int j = c0 + tx + c * TX;
            jc[c] = j < L ? j : L - 1;
        }
        const float* p = W + (long long)tk * L;
        int k = tk;
        for (; k + (U - 1) * TK < K; k += U * TK, p += U * step) {
            float a[U][4], xv[U];
#pragma unroll
            for (int i = 0; i < U; ++i)
#pragma unroll
                for (int c = 0; c < 4; ++c) a[i][c] = ldm1(p + i * step + jc[c]);
#pragma unroll
            for (int i = 0; i < U; ++i) xv[i] = __ldg(x + k + i * TK);
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                float s = 0.f;
#pragma unroll
                for (int i = 0; i < U; ++i) s = fmaf(a[i][c], xv[i], s);
                acc[c] += (double)s;
            }
        }
        for (; k < K; k += TK, p += step) {
            const double xv = (double)__ldg(x + k);
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[c] += (double)ldm1(p + jc[c]) * xv;
        }
#pragma unroll
        for (int c = 0; c < 4; ++c) red[tk * COLS + tx + c * TX] = acc[c];
    }
    __syncthreads();
    // fixed-order sum over the TK partials of each column (threads t < COLS)
    for (int t = tid; t < COLS; t += Cfg::THREADS) {
        const int col = c0 + t;
        if (col < L) {
            double v = red[t];
#pragma unroll 4
            for (int q = 1; q < TK; ++q) v += red[q * COLS + t];
            store_out(Cz, bias, bias_per_out, col, v, alpha, beta);
        }
    }
    __syncthreads();  // red is reused by the next tile / batch item
}

// Every (batch item, tile) of this block, in dot or column mode.
template <bool DOT>
__device__ __forceinline__ void tiles(const float* __restrict__ W, const float* __restrict__ X, float* __restrict__ C,
                                      const float* __restrict__ bias, bool bias_per_out, int batch, int L, int K,
                                      int tiles, long long strideW, long long strideX, long long strideC, float alpha,
                                      float beta, double* __restrict__ red) {
    const int gz = (int)gridDim.z;
    for (int z = blockIdx.z; z < batch; z = (batch - z > gz) ? z + gz : batch) {
        const float* Wz = W + (long long)z * strideW;
        const float* Xz = X + (long long)z * strideX;
        float* Cz = C + (long long)z * strideC;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            if (DOT)
                dot_tile(Wz, Xz, Cz, bias, bias_per_out, L, K, t, alpha, beta, red);
            else
                col_tile(Wz, Xz, Cz, bias, bias_per_out, L, K, t, alpha, beta, red);
        }
    }
}

}  // namespace optiml_gv

extern "C" __global__ void __launch_bounds__(OPTIML_GEMV_THREADS, OPTIML_GEMV_MIN_BLOCKS) optiml_gemv(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    const float* __restrict__ bias,
    int batch, int M, int N, int K,
    long long strideA, long long strideB, long long strideC,
    float alpha, float beta) {
    using optiml_gv::Cfg;
    __shared__ __align__(16) double red[Cfg::RED];

    // all block-uniform
    if (blockIdx.y != 0 || batch <= 0 || M <= 0 || N <= 0 || K < 0) return;
    const bool colvec = (N == 1);             // C is M x 1 (else 1 x N)
    if (!colvec && M != 1) return;            // not a matrix-vector product
    const int L = colvec ? M : N;             // outputs per batch item
    const bool dot = colvec ? (OPTIML_TRANS_A == 0 || M == 1) : (OPTIML_TRANS_B != 0);
    const float* W = colvec ? A : B;          // the matrix operand
    const float* X = colvec ? B : A;          // the vector operand
    const long long strideW = colvec ? strideA : strideB;
    const long long strideX = colvec ? strideB : strideA;
    const int tile_sz = dot ? Cfg::DOT_ROWS : Cfg::COLS;
    const int tiles = (int)(((long long)L + tile_sz - 1) / tile_sz);

    // One loop nest per mode, so that ptxas allocates each mode's registers on
    // its own (one nest with the branch inside spills under the 64-register cap).
    if (dot)
        optiml_gv::tiles<true>(W, X, C, bias, !colvec, batch, L, K, tiles, strideW, strideX, strideC, alpha, beta, red);
    else
        optiml_gv::tiles<false>(W, X, C, bias, !colvec, batch, L, K, tiles, strideW, strideX, strideC, alpha, beta, red);
}
