// optiml: batched GEMM with 16-bit inputs (bf16 or fp16) and fp32
// accumulation on CUDA cores (FFMA, no tensor cores): the simple, any-shape
// fallback companion of the bf16/fp16 tensor-core kernel (used when TMA cannot
// address an operand, for matrix-vector products, and on GPUs without wgmma).
// Correctness for every shape first, speed second.
//
// Compiled by NVRTC; specialised ONLY through preprocessor macros defined
// before this text. The optiml/ headers (defaults.cuh, epilogue.cuh: in memory for NVRTC, -I optiml-build/src/cuda for nvcc), no standard library, 16-bit conversions in
// inline PTX. Every function is annotated so the file also compiles with nvcc
// (bench/harness/simt16/harness.cu includes it) and with or without NVRTC's
// -default-device. Any arch >= sm_70 (bf16 output rounding uses the sm_80
// cvt.rn.bf16.f32 when available, an integer round-to-nearest-even before).
//
// Entry point (ABI):
//   extern "C" __global__ void optiml_matmul16_simt(   (OPTIML_SIMT16_ENTRY)
//       const unsigned short* A, const unsigned short* B, unsigned short* C,
//       const float* bias, int batch, int M, int N, int K,
//       long long strideA, long long strideB, long long strideC,  // elements
//       float alpha, float beta)
//   A, B, C hold raw 16-bit patterns: bf16 (OPTIML_DTYPE_BF16) or fp16 (OPTIML_DTYPE_F16).
//   grid  = (ceil(N / 64), ceil(M / 64), min(batch, 65535)), block = 256 (1-D),
//   dynamic shared memory = 0 (static: 2 x 16 x 68 floats = 8704 bytes).
//   ANY grid (x, y, z) >= 1 is also correct: blocks walk batch items
//   z = blockIdx.z, + gridDim.z, ..., tile rows blockIdx.y, + gridDim.y, ...
//   and tile columns blockIdx.x, + gridDim.x, ... (so M > 65535 * 64 works
//   with grid.y capped at 65535). Do not launch when batch, M or N is 0 (a
//   zero grid dimension is a launch error; there is nothing to write).
//
// C[z] (M x N, ldc = N) = epilogue(op(A[z]) * op(B[z])), fp32 accumulation
//   OPTIML_TRANS_A 0: A is M x K (lda = K); 1: A stored K x M (lda = M)
//   OPTIML_TRANS_B 0: B is K x N (ldb = N); 1: B stored N x K (ldb = K)
//   X[z] = X + z * strideX (stride 0 = the same matrix for every batch item;
//   strideC 0 with batch > 1 is a race, as for any GEMM). C must not overlap
//   A or B (the pointers are __restrict__).
// Epilogue per element, fp32: v = acc; v *= alpha (OPTIML_HAS_ALPHA);
//   v = fmaf(beta, C_old, v) (OPTIML_HAS_BETA; otherwise C is never read);
//   v += bias[n] (OPTIML_HAS_BIAS, fp32, 4-byte aligned); v = optiml_act_exact(v)
//   (OPTIML_ACT: the CUDA-core forms of optiml/epilogue.cuh); then rounded to the 16-bit type, round to nearest even (overflow gives +-inf, NaN stays NaN).
//   K = 0: C = epilogue(0). NaN/Inf inputs propagate as in a plain dot product
//   (out-of-range operand elements are never read; they enter as +0).
//
// Requirements: only 2-byte alignment of A, B, C (scalar 16-bit loads and
// stores only), 4-byte alignment of bias; any M, N, K >= 0 and batch >= 0;
// offsets are 64-bit (row * ld in long long), so a matrix may exceed 2^31
// elements. Every global load and store is predicated on bounds.
//
// Design: block tile 64 x 64, k-slices of 16 staged through static shared
// memory as fp32 (converted on load), both operands k-major
// (As[k][m], Bs[k][n], rows padded to 68 floats, 16-byte aligned), 256
// threads as 16 x 16, thread (ty, tx) computing the 4 x 4 register tile rows
// 4 ty .. 4 ty + 3, columns 4 tx .. 4 tx + 3. Global loads run along the
// contiguous dimension of the stored operand (k for A non-transposed and B
// transposed, m / n otherwise), 4 elements per thread per operand per slice,
// held in registers while the previous slice is multiplied (one slice of
// register prefetch, two barriers per slice). Every shared element of a slice
// is rewritten each slice (zeros outside the matrix), so partial tiles need no
// special case in the inner loop.
//
// Macros (all optional):
//   OPTIML_DTYPE      OPTIML_DTYPE_BF16 (default) or OPTIML_DTYPE_F16 (optiml/defaults.cuh)
//   OPTIML_TRANS_A/B, OPTIML_HAS_ALPHA/BETA/BIAS, OPTIML_ACT: as above (OPTIML_ACT_NONE)

// The entry point's name: the companion of the tensor-core kernel in one module, or the module's own
// optiml_matmul on GPUs without wgmma.
#ifndef OPTIML_SIMT16_ENTRY
#define OPTIML_SIMT16_ENTRY optiml_matmul16_simt
#endif
#include "optiml/defaults.cuh"  // OPTIML_DTYPE, OPTIML_TRANS_A/B, OPTIML_HAS_ALPHA/BETA/BIAS
#include "optiml/epilogue.cuh"  // OPTIML_ACT and the activations

#if OPTIML_DTYPE != OPTIML_DTYPE_BF16 && OPTIML_DTYPE != OPTIML_DTYPE_F16
#error "OPTIML_DTYPE must be OPTIML_DTYPE_BF16 or OPTIML_DTYPE_F16"
#endif

// Fixed geometry (the launcher relies on 64 x 64 tiles and 256 threads).
#define OPTIML_S16_TM 64      // block tile rows (M)
#define OPTIML_S16_TN 64      // block tile columns (N)
#define OPTIML_S16_BK 16      // k-slice depth
#define OPTIML_S16_LD 68      // padded shared row (floats), multiple of 4
#define OPTIML_S16_THREADS 256

// ---------------------------------------------------------------- 16-bit <-> f32
// OPTIML_SIMT16_EMU: offline CPU emulation hook (bench/harness/simt16/emu);
// it provides optiml_emu_from16 / optiml_emu_to16. Never defined by optiml.
__device__ __forceinline__ float optiml_s16_from16(unsigned short u) {
#if defined(OPTIML_SIMT16_EMU)
    return optiml_emu_from16(u);
#elif OPTIML_DTYPE == OPTIML_DTYPE_BF16
    float r;  // bf16 -> f32 is exact: the bits move to the upper half
    asm("mov.b32 %0, {%2, %1};" : "=f"(r) : "h"(u), "h"((unsigned short)0));
    return r;
#else
    float r;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(u));
    return r;
#endif
}

__device__ __forceinline__ unsigned short optiml_s16_to16(float x) {
#if defined(OPTIML_SIMT16_EMU)
    return optiml_emu_to16(x);
#elif OPTIML_DTYPE == OPTIML_DTYPE_BF16
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
#else
    // pre-sm_80: round to nearest even on the bits; NaN -> quiet NaN
    const unsigned u = __float_as_uint(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (unsigned short)((u >> 16) | 0x0040u);
    return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
#endif
#else
    unsigned short r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
#endif
}

// ---------------------------------------------------------------- epilogue

// ---------------------------------------------------------------- global -> registers
// Thread `tid` loads 4 elements of the A slice (64 m x 16 k) and 4 of the B
// slice (16 k x 64 n) of k-slice starting at k0; rem_* = elements left in
// that dimension from the tile / slice origin (rem_m, rem_n >= 1; rem_k >= 1).
// Out-of-range elements are NOT read and load as 0 (the +0 bit pattern).
//   contiguous along k (A TRANS_A 0, B TRANS_B 1): lk = tid & 15,
//       lmn = (tid >> 4) + 16 i     (a warp reads 2 rows x 32 bytes)
//   contiguous along m / n (A TRANS_A 1, B TRANS_B 0): lmn = tid & 63,
//       lk = (tid >> 6) + 4 i       (a warp reads 64 contiguous bytes)
// Both cover the 64 x 16 slice exactly once (i = 0..3).
__device__ __forceinline__ void optiml_s16_load_a(unsigned short (&ra)[4], const unsigned short* __restrict__ Az,
                                                  int tid, int m0, int k0, int rem_m, int rem_k, int M, int K) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#if OPTIML_TRANS_A == 0
        const int lk = tid & 15, lm = (tid >> 4) + 16 * i;
        ra[i] = 0;
        if (lm < rem_m && lk < rem_k) ra[i] = Az[((long long)m0 + lm) * (long long)K + ((long long)k0 + lk)];
        (void)M;
#else
        const int lm = tid & 63, lk = (tid >> 6) + 4 * i;
        ra[i] = 0;
        if (lm < rem_m && lk < rem_k) ra[i] = Az[((long long)k0 + lk) * (long long)M + ((long long)m0 + lm)];
        (void)K;
#endif
    }
}
__device__ __forceinline__ void optiml_s16_load_b(unsigned short (&rb)[4], const unsigned short* __restrict__ Bz,
                                                  int tid, int n0, int k0, int rem_n, int rem_k, int N, int K) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#if OPTIML_TRANS_B == 0
        const int ln = tid & 63, lk = (tid >> 6) + 4 * i;
        rb[i] = 0;
        if (ln < rem_n && lk < rem_k) rb[i] = Bz[((long long)k0 + lk) * (long long)N + ((long long)n0 + ln)];
        (void)K;
#else
        const int lk = tid & 15, ln = (tid >> 4) + 16 * i;
        rb[i] = 0;
        if (ln < rem_n && lk < rem_k) rb[i] = Bz[((long long)n0 + ln) * (long long)K + ((long long)k0 + lk)];
        (void)N;
#endif
    }
}
// registers -> shared (fp32), the same (lk, lm / ln) mapping as the loads
__device__ __forceinline__ void optiml_s16_store_slice(float (*As)[OPTIML_S16_LD], float (*Bs)[OPTIML_S16_LD],
                                                       const unsigned short (&ra)[4], const unsigned short (&rb)[4],
                                                       int tid) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#if OPTIML_TRANS_A == 0
        As[tid & 15][(tid >> 4) + 16 * i] = optiml_s16_from16(ra[i]);
#else
        As[(tid >> 6) + 4 * i][tid & 63] = optiml_s16_from16(ra[i]);
#endif
#if OPTIML_TRANS_B == 0
        Bs[(tid >> 6) + 4 * i][tid & 63] = optiml_s16_from16(rb[i]);
#else
        Bs[tid & 15][(tid >> 4) + 16 * i] = optiml_s16_from16(rb[i]);
#endif
    }
}

// cur + step, or `limit` when that would reach / pass it (grid-stride loops
// that cannot overflow int for any batch / grid size)
__device__ __forceinline__ int optiml_s16_next(int cur, int step, int limit) {
    return limit - cur > step ? cur + step : limit;
}

// ---------------------------------------------------------------- kernel
extern "C" __global__ void __launch_bounds__(OPTIML_S16_THREADS)
OPTIML_SIMT16_ENTRY(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                     unsigned short* __restrict__ C, const float* __restrict__ bias, int batch, int M, int N, int K,
                     long long strideA, long long strideB, long long strideC, float alpha, float beta) {
    __shared__ __align__(16) float As[OPTIML_S16_BK][OPTIML_S16_LD];
    __shared__ __align__(16) float Bs[OPTIML_S16_BK][OPTIML_S16_LD];

    const int tid = (int)threadIdx.x;
    const int tx = tid & 15, ty = tid >> 4;
    // tile / slice counts without overflow for any int >= 0
    const int tiles_m = M / OPTIML_S16_TM + ((M % OPTIML_S16_TM) != 0);
    const int tiles_n = N / OPTIML_S16_TN + ((N % OPTIML_S16_TN) != 0);
    const int slices = K / OPTIML_S16_BK + ((K % OPTIML_S16_BK) != 0);
    (void)alpha; (void)beta; (void)bias;

    // all loop bounds are block-uniform, so the barriers inside are legal
    for (int z = (int)blockIdx.z; z < batch; z = optiml_s16_next(z, (int)gridDim.z, batch)) {
        const unsigned short* __restrict__ Az = A + (long long)z * strideA;
        const unsigned short* __restrict__ Bz = B + (long long)z * strideB;
        unsigned short* __restrict__ Cz = C + (long long)z * strideC;
        for (int mt = (int)blockIdx.y; mt < tiles_m; mt = optiml_s16_next(mt, (int)gridDim.y, tiles_m)) {
            const int m0 = mt * OPTIML_S16_TM;  // < M
            const int rem_m = M - m0;           // >= 1
            for (int nt = (int)blockIdx.x; nt < tiles_n; nt = optiml_s16_next(nt, (int)gridDim.x, tiles_n)) {
                const int n0 = nt * OPTIML_S16_TN;  // < N
                const int rem_n = N - n0;           // >= 1

                float acc[4][4];
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;

                unsigned short ra[4], rb[4];
                if (slices > 0) {
                    optiml_s16_load_a(ra, Az, tid, m0, 0, rem_m, K, M, K);
                    optiml_s16_load_b(rb, Bz, tid, n0, 0, rem_n, K, N, K);
                }
                for (int s = 0; s < slices; ++s) {
                    __syncthreads();  // every thread is done reading the previous slice / tile
                    optiml_s16_store_slice(As, Bs, ra, rb, tid);
                    __syncthreads();  // slice s visible
                    if (s + 1 < slices) {  // prefetch slice s + 1 while multiplying slice s
                        const int k1 = (s + 1) * OPTIML_S16_BK;  // < K
                        optiml_s16_load_a(ra, Az, tid, m0, k1, rem_m, K - k1, M, K);
                        optiml_s16_load_b(rb, Bz, tid, n0, k1, rem_n, K - k1, N, K);
                    }
#pragma unroll
                    for (int kk = 0; kk < OPTIML_S16_BK; ++kk) {
                        float a[4], b[4];
#pragma unroll
                        for (int i = 0; i < 4; ++i) a[i] = As[kk][4 * ty + i];
#pragma unroll
                        for (int j = 0; j < 4; ++j) b[j] = Bs[kk][4 * tx + j];
#pragma unroll
                        for (int i = 0; i < 4; ++i)
#pragma unroll
                            for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
                    }
                }

                // epilogue + predicated 16-bit stores (C old read only with HAS_BETA)
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int lm = 4 * ty + i;
                    if (lm < rem_m) {
                        unsigned short* __restrict__ crow = Cz + ((long long)m0 + lm) * (long long)N + n0;
#pragma unroll
                        for (int j = 0; j < 4; ++j) {
                            const int ln = 4 * tx + j;
                            if (ln < rem_n) {
                                float v = acc[i][j];
#if OPTIML_HAS_ALPHA
                                v *= alpha;
#endif
#if OPTIML_HAS_BETA
                                v = fmaf(beta, optiml_s16_from16(crow[ln]), v);
#endif
#if OPTIML_HAS_BIAS
                                v += bias[n0 + ln];
#endif
                                crow[ln] = optiml_s16_to16(optiml_act_exact(v));
                            }
                        }
                    }
                }
            }
        }
    }
}
