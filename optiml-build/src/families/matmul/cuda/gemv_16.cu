// optiml: batched GEMV (matrix x vector / vector x matrix) with 16-bit
// operands (bf16 or fp16 stored, fp32 accumulation, output rounded once to the
// 16-bit type): the memory-bound companion of the 16-bit matmul kernels
// (matmul_wgmma_16.cu, matmul16_simt.cu) for the calls with N == 1 or M == 1.
// The 16-bit sibling of gemv_f32.cu: same ABI shape, same launcher, same two
// modes; what differs is 8 elements per 16-byte load and the conversions.
//
// Compiled by NVRTC; specialised ONLY through preprocessor macros defined
// before this text. The optiml/ headers (defaults.cuh, epilogue.cuh: in memory for NVRTC, -I optiml-build/src/cuda for nvcc), no standard library, 16-bit conversions in
// inline PTX. It may be concatenated into one translation unit with
// matmul_wgmma_16.cu and matmul16_simt.cu, before or after them: the shared
// flags use the same #ifndef defaults, and everything defined here is named
// optiml_g16_* / OPTIML_G16_* (plus the entry point optiml_gemv). Every
// function is annotated so the file also compiles with nvcc
// (bench/harness/gemv16/harness.cu includes it) and with or without NVRTC's
// -default-device. Any arch >= sm_70 (bf16 output rounding uses the sm_80
// cvt.rn.bf16.f32 when available, an integer round-to-nearest-even before).
//
// Entry point (ABI, the one of gemv_f32.cu's optiml_gemv with 16-bit A, B, C):
//   extern "C" __global__ void optiml_gemv(
//       const unsigned short* A, const unsigned short* B, unsigned short* C,
//       const float* bias, int batch, int M, int N, int K,
//       long long strideA, long long strideB, long long strideC,  // elements
//       float alpha, float beta)
//   A, B, C hold raw 16-bit patterns: bf16 (OPTIML_DTYPE_BF16) or fp16 (OPTIML_DTYPE_F16).
// computes, like the matmul kernels, C[z] (M x N, ldc = N) =
// epilogue(op(A[z]) * op(B[z])) but only for the matrix-vector cases N == 1
// or M == 1 (anything else: the kernel returns without writing; the launcher
// must use a matmul kernel).
//   N == 1: C is an M-vector, op(B) the K-vector B[z] (K x 1 and 1 x K
//           row-major are the same memory, so TRANS_B does not matter);
//           the matrix operand is A: TRANS_A 0 -> M x K (lda = K),
//           TRANS_A 1 -> stored K x M (lda = M).
//   M == 1: C is an N-vector, op(A) the K-vector A[z]; the matrix operand
//           is B: TRANS_B 0 -> K x N (ldb = N), TRANS_B 1 -> stored N x K.
//   (M == N == 1: a single dot product; N == 1 rules apply, and A is a
//   contiguous K-vector whatever TRANS_A says.)
// X[z] = X + z * strideX (stride 0 = broadcast that operand; strideC 0 with
// batch > 1 is a race, as for any GEMM). C must not overlap A, B or bias.
// Epilogue per element, fp32, the formulas of matmul16_simt.cu: v = acc;
// v *= alpha (OPTIML_HAS_ALPHA); v = fmaf(beta, C_old, v) (OPTIML_HAS_BETA,
// C_old read as 16-bit; otherwise C is never read); v += bias[n]
// (OPTIML_HAS_BIAS, fp32, 4-byte aligned; n is the column of C: for N == 1
// that is always bias[0]); v = optiml_act_exact(v) (OPTIML_ACT, the CUDA-core
// forms of optiml/epilogue.cuh); then rounded once to the 16-bit type, round to nearest even (overflow gives +-inf, NaN stays NaN).
// K == 0 gives epilogue(0). NaN / Inf in the operands propagate as in a plain
// dot product (elements outside the operands are never read).
// Alignment: A, B, C need only 2-byte alignment (any element offset, any odd
// K / M / N); 16-byte loads are used wherever a run is 16-byte aligned and
// the head / tail elements are peeled (chosen at run time, per row). bias:
// 4-byte alignment. Offsets are 64-bit (row * ld and z * stride in long
// long); every global access is bounds-checked (no read past a row, a matrix
// or a vector, not even of a clamped index).
// Deterministic: no atomics, and a fixed reduction order that depends only on
// the shape and the alignments, never on the grid or on scheduling.
//
// Launch:
//   block = OPTIML_GEMV_THREADS (1-D), dynamic shared memory = 0,
//   grid  = (any x >= 1, 1, any z >= 1): blocks loop over output tiles
//   x = blockIdx.x, + gridDim.x, ... and batch items z = blockIdx.z,
//   + gridDim.z, ...; blocks with blockIdx.y > 0 do nothing. The optiml
//   launcher uses grid = (ceil(L / 16), 1, min(batch, 65535)), L = (N == 1 ?
//   M : N) the output length, 16 = min(THREADS / 32, 4 * COL_TX) at its
//   constants (512, 8). The ideal grid.x is ceil(L / OPTIML_G16_DOT_ROWS) in
//   dot mode (= 16 at 512 threads: exactly the launcher's) and
//   ceil(L / OPTIML_G16_COL_COLS) in column mode (= 32 at COL_TX 8: the
//   launcher starts twice as many blocks; the second half finds no tile and
//   returns at once). Do not launch with batch, M or N == 0 (a zero grid
//   dimension is a launch error; there is nothing to write).
//     dot mode    = the matrix operand is contiguous along K:
//                   (N == 1 && (!TRANS_A || M == 1)) || (M == 1 && N != 1 && TRANS_B)
//     column mode = contiguous along the output (the other two cases).
//
// Design (memory bound: 2 bytes of matrix per FMA; the goal is DRAM
// bandwidth, i.e. enough independent 16-byte loads in flight per SM; at the
// launcher's 512 threads and the 64-register cap, 2 blocks = 32 warps per
// SM, UNROLL 4: 64 KB of matrix loads in flight per SM in both modes):
//  * dot mode: one warp per row, DOT_ROWS = THREADS / 32 rows per tile. A row
//    is a contiguous K-run; its 0..7 head elements up to the first 16-byte
//    boundary and its 0..7 tail elements are scalar (lanes 0..7), the body is
//    16-byte chunks (8 elements), lane l takes chunks l, l + 32, ... (a warp
//    instruction reads 512 contiguous bytes), UNROLL chunks per step, all
//    loads issued before the FMAs; the last, partial step is predicated (no
//    remainder loop: at most one more memory latency per row). The vector
//    chunk that pairs with a matrix chunk sits at the same byte offset
//    A = (x + head) mod 16 for the whole row; it is loaded as one 16-byte
//    load when A == 0, two 8-byte loads when A == 8, four 4-byte loads when
//    A % 4 == 0, else 2 + 4 + 4 + 4 + 2 bytes repacked into element pairs
//    (L1 hits; never outside the vector). The body is a template on that
//    class (4 instantiations, chosen per row). Reduction: xor butterfly
//    (bit-identical on all lanes), lane 0 stores.
//  * column mode: the matrix is K x L row-major, a tile is COL_COLS =
//    4 * COL_TX consecutive outputs. When every row is 16-byte aligned
//    (L % 8 == 0 and an aligned base): COL_TX / 2 threads along the output
//    (8 columns, one 16-byte load per k row each) times TK = THREADS /
//    (COL_TX / 2) threads along K (k = tk, tk + TK, ...), UNROLL k rows per
//    step (predicated last step). A warp instruction reads 32 / (COL_TX / 2)
//    row segments of 2 * COL_COLS contiguous bytes (64 B at COL_TX 8).
//    Otherwise (odd L, ...) a warp reads one k row per instruction, lane l
//    taking columns l, l + 32, ... of the tile with 2-byte loads (64
//    contiguous bytes per instruction at COL_TX 8), SROWS loads per thread per
//    step; the vector element of each row comes by a shuffle from one lane's
//    load (one vector load per 32 rows instead of one per row).
//    Partials: xor butterfly over the k-threads of a warp, then a fixed-order
//    sum over the warps in shared memory (WARPS x COL_COLS floats, 2 KB).
//  * The operand roles (N == 1 or M == 1) and the mode are template
//    parameters of the batch / tile loop nest (optiml_g16_run), so choosing
//    them costs no registers; 64 registers, no spill, at the launcher's
//    geometry (bench/harness/gemv16/nvrtc_gemv16.py).
// Limitation (the ABI has no workspace): no split-K across blocks, so the
// parallelism is ceil(L / tile) blocks per batch item: short outputs with
// long K (e.g. L = 1024, K = 1M) use few SMs.
//
// Tuning macros (all optional; the launcher sets THREADS and COL_TX):
//   OPTIML_GEMV_THREADS  block size (multiple of 32, 32..1024; default 512)
//   OPTIML_GEMV_COL_TX   column mode: tile = 4 * COL_TX outputs (8, 16 or 32;
//                        default 8)
//   OPTIML_G16_UNROLL    16-byte matrix loads per thread per step (1..8,
//                        default 4)
//   OPTIML_G16_SROWS     column mode, unaligned rows: 2-byte matrix loads per
//                        thread per step (default 32; a multiple of
//                        COL_COLS / 32, at most 32 rows)
//   OPTIML_G16_LOAD      matrix loads: 0 ld.global.nc, 1 ld.global.cs
//                        (evict-first), 2 (default)
//                        ld.global.nc.L1::no_allocate.L2::256B (sm_80+;
//                        0 below). H200, bf16 8192 x 8192: 2 keeps the
//                        vector in L1 and reaches 90.9 % (dot) / 86.2 %
//                        (column) of the copy bandwidth against 83.3 % /
//                        78.5 % with 0 (bench/harness/gemv16)
//   OPTIML_G16_MIN_BLOCKS __launch_bounds__ min blocks per SM (default
//                        1024 / THREADS: a 64-register cap; 512 / THREADS
//                        when UNROLL > 4 or COL_TX > 16)
// Derived (read-only): OPTIML_G16_DOT_ROWS, OPTIML_G16_COL_COLS (tile sizes).

#include "optiml/defaults.cuh"  // OPTIML_DTYPE, OPTIML_TRANS_A/B, OPTIML_HAS_ALPHA/BETA/BIAS
#include "optiml/epilogue.cuh"  // OPTIML_ACT and the activations
#ifndef OPTIML_GEMV_THREADS
#define OPTIML_GEMV_THREADS 512
#endif
#ifndef OPTIML_GEMV_COL_TX
#define OPTIML_GEMV_COL_TX 8
#endif
#ifndef OPTIML_G16_UNROLL
#define OPTIML_G16_UNROLL 4
#endif
#ifndef OPTIML_G16_SROWS
#define OPTIML_G16_SROWS 32
#endif
#ifndef OPTIML_G16_LOAD
#define OPTIML_G16_LOAD 2
#endif
// Default: a 64-register cap (1024 threads per SM: 2 blocks of 512) for the
// launcher's geometry; larger UNROLL / COL_TX get up to 128 registers (half
// the warps, the same bytes in flight). 1024-thread blocks are capped at 64
// registers by the hardware: only UNROLL <= 4 and COL_TX <= 16 fit there.
#ifndef OPTIML_G16_MIN_BLOCKS
#if OPTIML_GEMV_THREADS >= 1024
#define OPTIML_G16_MIN_BLOCKS 1
#elif OPTIML_G16_UNROLL <= 4 && OPTIML_GEMV_COL_TX <= 16
#define OPTIML_G16_MIN_BLOCKS (1024 / OPTIML_GEMV_THREADS)
#else
#define OPTIML_G16_MIN_BLOCKS (OPTIML_GEMV_THREADS <= 512 ? 512 / OPTIML_GEMV_THREADS : 1)
#endif
#endif

#define OPTIML_G16_DOT_ROWS (OPTIML_GEMV_THREADS / 32)
#define OPTIML_G16_COL_COLS (4 * OPTIML_GEMV_COL_TX)

#if OPTIML_DTYPE != OPTIML_DTYPE_BF16 && OPTIML_DTYPE != OPTIML_DTYPE_F16
#error "OPTIML_DTYPE must be OPTIML_DTYPE_BF16 or OPTIML_DTYPE_F16"
#endif
#if (OPTIML_TRANS_A != 0 && OPTIML_TRANS_A != 1) || (OPTIML_TRANS_B != 0 && OPTIML_TRANS_B != 1)
#error "OPTIML_TRANS_A / OPTIML_TRANS_B must be 0 or 1"
#endif
#if OPTIML_G16_LOAD < 0 || OPTIML_G16_LOAD > 2
#error "OPTIML_G16_LOAD must be 0, 1 or 2"
#endif
#if OPTIML_GEMV_THREADS % 32 != 0 || OPTIML_GEMV_THREADS < 32 || OPTIML_GEMV_THREADS > 1024
#error "OPTIML_GEMV_THREADS must be a multiple of 32 in [32, 1024]"
#endif
#if OPTIML_GEMV_COL_TX != 8 && OPTIML_GEMV_COL_TX != 16 && OPTIML_GEMV_COL_TX != 32
#error "OPTIML_GEMV_COL_TX must be 8, 16 or 32 for gemv_16.cu"
#endif
#if OPTIML_G16_UNROLL < 1 || OPTIML_G16_UNROLL > 8
#error "OPTIML_G16_UNROLL must be in [1, 8]"
#endif
#if OPTIML_G16_SROWS % (OPTIML_G16_COL_COLS / 32) != 0 || OPTIML_G16_SROWS < 1 || \
    OPTIML_G16_SROWS / (OPTIML_G16_COL_COLS / 32) > 32
#error "OPTIML_G16_SROWS must be a multiple of COL_COLS / 32 with at most 32 rows"
#endif

#define OPTIML_G16_WARPS (OPTIML_GEMV_THREADS / 32)
#define OPTIML_G16_TXT (OPTIML_GEMV_COL_TX / 2)                       // aligned column path: threads along L
#define OPTIML_G16_TK (OPTIML_GEMV_THREADS / OPTIML_G16_TXT)          // aligned column path: threads along K
#define OPTIML_G16_CPT (OPTIML_G16_COL_COLS / 32)                     // scalar column path: columns per lane
#define OPTIML_G16_SR (OPTIML_G16_SROWS / OPTIML_G16_CPT)             // scalar column path: rows per step
#define OPTIML_G16_RED (OPTIML_G16_WARPS * OPTIML_G16_COL_COLS)       // shared partials (floats)

// ---------------------------------------------------------------- 16-bit <-> f32
// OPTIML_G16_EMU: offline CPU emulation hook (bench/harness/gemv16); it
// provides optiml_g16_emu_h2f / optiml_g16_emu_f2h for the fp16 PTX
// conversions (bf16 uses plain bit operations, which the emulation runs as
// they are). Never defined by optiml.
__device__ __forceinline__ float optiml_g16_from16(unsigned short u) {
#if OPTIML_DTYPE == OPTIML_DTYPE_BF16
    return __uint_as_float((unsigned)u << 16);  // exact: the bits move to the upper half
#elif defined(OPTIML_G16_EMU)
    return optiml_g16_emu_h2f(u);
#else
    float r;
    asm("{\n\t.reg .b16 h;\n\tmov.b16 h, %1;\n\tcvt.f32.f16 %0, h;\n\t}" : "=f"(r) : "h"(u));
    return r;
#endif
}
// The two elements of a 32-bit word (lo at the lower address).
__device__ __forceinline__ void optiml_g16_unpack(unsigned w, float& lo, float& hi) {
#if OPTIML_DTYPE == OPTIML_DTYPE_BF16
    lo = __uint_as_float(w << 16);
    hi = __uint_as_float(w & 0xFFFF0000u);
#elif defined(OPTIML_G16_EMU)
    lo = optiml_g16_emu_h2f((unsigned short)(w & 0xFFFFu));
    hi = optiml_g16_emu_h2f((unsigned short)(w >> 16));
#else
    asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, h;\n\t}"
        : "=f"(lo), "=f"(hi)
        : "r"(w));
#endif
}
__device__ __forceinline__ unsigned short optiml_g16_to16(float x) {
#if OPTIML_DTYPE == OPTIML_DTYPE_F16 && defined(OPTIML_G16_EMU)
    return optiml_g16_emu_f2h(x);
#elif OPTIML_DTYPE == OPTIML_DTYPE_F16
    unsigned short r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
#elif defined(OPTIML_G16_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800)
    // pre-sm_80 (and the emulation): round to nearest even on the bits; NaN -> quiet NaN
    const unsigned u = __float_as_uint(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (unsigned short)((u >> 16) | 0x0040u);
    return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
#else
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
#endif
}

// ---------------------------------------------------------------- loads
__device__ __forceinline__ bool optiml_g16_aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull;
}
// Matrix loads (each element read once: the streaming hint is selectable).
__device__ __forceinline__ uint4 optiml_g16_ldm8(const unsigned short* p) {  // 16-byte aligned
#if OPTIML_G16_LOAD == 1
    return __ldcs(reinterpret_cast<const uint4*>(p));
#elif OPTIML_G16_LOAD == 2 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
#else
    return __ldg(reinterpret_cast<const uint4*>(p));
#endif
}
__device__ __forceinline__ unsigned short optiml_g16_ldm1(const unsigned short* p) {
#if OPTIML_G16_LOAD == 1
    return __ldcs(p);
#elif OPTIML_G16_LOAD == 2 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned short r;
    asm("ld.global.nc.L1::no_allocate.L2::256B.u16 %0, [%1];" : "=h"(r) : "l"(p));
    return r;
#else
    return __ldg(p);
#endif
}

// Dot mode, vector chunk: 8 elements at p whose byte address is XA mod 16,
// returned as 4 words of element pairs (the layout of a 16-byte load). XA is a
// compile-time class: 0 (16-byte aligned: one 16-byte load), 8 (two 8-byte
// loads), 4 (4-byte aligned: four 4-byte loads), 2 (2-byte aligned only:
// element 0 and 7 as 2-byte loads, elements 1..6 as three 4-byte loads at
// p + 1, repacked). Every load lies inside the chunk.
template <int XA>
__device__ __forceinline__ uint4 optiml_g16_ldx8(const unsigned short* __restrict__ p) {
    if (XA == 0) return __ldg(reinterpret_cast<const uint4*>(p));
    if (XA == 8) {
        const uint2 lo = __ldg(reinterpret_cast<const uint2*>(p));
        const uint2 hi = __ldg(reinterpret_cast<const uint2*>(p + 4));
        return make_uint4(lo.x, lo.y, hi.x, hi.y);
    }
    if (XA == 4) {
        const unsigned* q = reinterpret_cast<const unsigned*>(p);
        return make_uint4(__ldg(q), __ldg(q + 1), __ldg(q + 2), __ldg(q + 3));
    }
    const unsigned e0 = __ldg(p), e7 = __ldg(p + 7);
    const unsigned* q = reinterpret_cast<const unsigned*>(p + 1);  // 4-byte aligned
    const unsigned w12 = __ldg(q), w34 = __ldg(q + 1), w56 = __ldg(q + 2);
    return make_uint4(e0 | (w12 << 16), (w12 >> 16) | (w34 << 16), (w34 >> 16) | (w56 << 16), (w56 >> 16) | (e7 << 16));
}

__device__ __forceinline__ float optiml_g16_dot2(unsigned a, unsigned b, float acc) {
    float a0, a1, b0, b1;
    optiml_g16_unpack(a, a0, a1);
    optiml_g16_unpack(b, b0, b1);
    acc = fmaf(a0, b0, acc);
    return fmaf(a1, b1, acc);
}
__device__ __forceinline__ float optiml_g16_dot8(uint4 a, uint4 b, float acc) {
    acc = optiml_g16_dot2(a.x, b.x, acc);
    acc = optiml_g16_dot2(a.y, b.y, acc);
    acc = optiml_g16_dot2(a.z, b.z, acc);
    return optiml_g16_dot2(a.w, b.w, acc);
}

// ---------------------------------------------------------------- epilogue
// Output o of the current batch item (Cz already offset; C is contiguous).
// bias is indexed by the column of C: bias[o] when M == 1, bias[0] when N == 1.
__device__ __forceinline__ void optiml_g16_store(unsigned short* __restrict__ Cz, const float* __restrict__ bias,
                                                 bool bias_per_out, int o, float acc, float alpha, float beta) {
    float v = acc;
#if OPTIML_HAS_ALPHA
    v *= alpha;
#endif
#if OPTIML_HAS_BETA
    v = fmaf(beta, optiml_g16_from16(Cz[o]), v);
#endif
#if OPTIML_HAS_BIAS
    v += __ldg(bias + (bias_per_out ? o : 0));
#endif
    (void)alpha; (void)beta; (void)bias; (void)bias_per_out;
    Cz[o] = optiml_g16_to16(optiml_act_exact(v));
}

// Full-warp sum; every lane gets the same bits (a + b == b + a in IEEE).
__device__ __forceinline__ float optiml_g16_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// cur + step, or `limit` when that would reach / pass it (grid-stride loops
// that cannot overflow int for any size / grid)
__device__ __forceinline__ int optiml_g16_next(int cur, int step, int limit) {
    return limit - cur > step ? cur + step : limit;
}

// ------------------------------------------------------------- dot mode ---
// Body of one row: nv 16-byte chunks at w (16-byte aligned), the vector at x
// (byte address XA mod 16). Lane takes chunks lane, lane + 32, ...; UNROLL per
// step, loads first; the last, partial step is predicated.
template <int XA>
__device__ __forceinline__ float optiml_g16_dot_body(const unsigned short* __restrict__ w,
                                                     const unsigned short* __restrict__ x, int nv, int lane,
                                                     float acc) {
    constexpr int U = OPTIML_G16_UNROLL;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    int left = lane < nv ? (nv - 1 - lane) / 32 + 1 : 0;  // chunks of this lane not done yet
    int v = lane;
#pragma unroll 1
    for (; left > 0; left -= U, v += 32 * U) {
        // chunks past the row load as +0: fmaf(+0, +0, acc) == acc exactly
        // (acc starts at +0.f and a sum that starts at +0 is never -0)
        uint4 a[U], b[U];
#pragma unroll
        for (int i = 0; i < U; ++i) a[i] = i < left ? optiml_g16_ldm8(w + 8 * (v + 32 * i)) : zero;
#pragma unroll
        for (int i = 0; i < U; ++i) b[i] = i < left ? optiml_g16_ldx8<XA>(x + 8 * (v + 32 * i)) : zero;
#pragma unroll
        for (int i = 0; i < U; ++i) acc = optiml_g16_dot8(a[i], b[i], acc);
    }
    return acc;
}

// This lane's partial sum of one row w (any 2-byte alignment) with x.
// Head (0..7 elements up to the first 16-byte boundary of w) and tail (0..7)
// are done by lanes 0..6, then the 16-byte body.
__device__ __forceinline__ float optiml_g16_dot_row(const unsigned short* __restrict__ w,
                                                    const unsigned short* __restrict__ x, int K, int lane) {
    int h = (int)((0u - (unsigned)(reinterpret_cast<unsigned long long>(w) >> 1)) & 7u);
    if (h > K) h = K;
    const int nv = (K - h) >> 3;
    const int t0 = h + 8 * nv;
    float acc = 0.f;
    if (lane < h) acc = fmaf(optiml_g16_from16(optiml_g16_ldm1(w + lane)), optiml_g16_from16(__ldg(x + lane)), acc);
    if (lane < K - t0)
        acc = fmaf(optiml_g16_from16(optiml_g16_ldm1(w + t0 + lane)), optiml_g16_from16(__ldg(x + t0 + lane)), acc);
    if (nv > 0) {
        const unsigned short* __restrict__ wb = w + h;
        const unsigned short* __restrict__ xb = x + h;
        const unsigned xa = (unsigned)(reinterpret_cast<unsigned long long>(xb) & 15ull);
        if (xa == 0u)
            acc = optiml_g16_dot_body<0>(wb, xb, nv, lane, acc);
        else if (xa == 8u)
            acc = optiml_g16_dot_body<8>(wb, xb, nv, lane, acc);
        else if ((xa & 3u) == 0u)
            acc = optiml_g16_dot_body<4>(wb, xb, nv, lane, acc);
        else
            acc = optiml_g16_dot_body<2>(wb, xb, nv, lane, acc);
    }
    return acc;
}

// One tile of DOT_ROWS outputs: W is L x K (ld K), x a K-vector; warp = row.
__device__ __forceinline__ void optiml_g16_dot_tile(const unsigned short* __restrict__ W,
                                                    const unsigned short* __restrict__ x,
                                                    unsigned short* __restrict__ Cz, const float* __restrict__ bias,
                                                    bool bias_per_out, int L, int K, int tile, float alpha,
                                                    float beta) {
    const int tid = (int)threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int r0 = tile * OPTIML_G16_DOT_ROWS;  // < L
    const bool valid = warp < L - r0;            // warp-uniform
    const int row = r0 + (valid ? warp : 0);
    float acc = 0.f;
    if (valid) acc = optiml_g16_dot_row(W + (long long)row * (long long)K, x, K, lane);
    acc = optiml_g16_warp_sum(acc);  // every lane of every warp (no divergence)
    if (valid && lane == 0) optiml_g16_store(Cz, bias, bias_per_out, row, acc, alpha, beta);
}

// ---------------------------------------------------------- column mode ---
// One tile of COL_COLS outputs: W is K x L (ld L), x a K-vector.
__device__ __forceinline__ void optiml_g16_col_tile(const unsigned short* __restrict__ W,
                                                    const unsigned short* __restrict__ x,
                                                    unsigned short* __restrict__ Cz, const float* __restrict__ bias,
                                                    bool bias_per_out, int L, int K, int tile, float alpha,
                                                    float beta, float* __restrict__ red) {
    constexpr int U = OPTIML_G16_UNROLL, COLS = OPTIML_G16_COL_COLS;
    const int tid = (int)threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int c0 = tile * COLS;  // < L
    const int rem = L - c0;      // outputs left from c0 (>= 1)

    if ((L & 7) == 0 && optiml_g16_aligned16(W)) {
        // every row 16-byte aligned: thread (tx, tk) takes the 8 columns
        // c0 + 8 tx .. + 7 (all < L or all >= L) of rows tk, tk + TK, ...
        constexpr int TXT = OPTIML_G16_TXT, TK = OPTIML_G16_TK;
        const int tx = tid % TXT, tk = tid / TXT;
        float acc[8];
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[c] = 0.f;
        if (8 * tx < rem) {
            int left = tk < K ? (K - 1 - tk) / TK + 1 : 0;        // rows of this thread not done yet
            const long long step = (long long)TK * (long long)L;  // elements between this thread's rows
            const unsigned short* __restrict__ p = W + (long long)tk * (long long)L + c0 + 8 * tx;
            const unsigned short* __restrict__ xp = x + tk;
#pragma unroll 1
            for (; left > 0; left -= U, p += U * step, xp += U * TK) {
                // rows past K load as +0 (exact, see optiml_g16_dot_body)
                uint4 a[U];
                unsigned short xv[U];
#pragma unroll
                for (int i = 0; i < U; ++i) a[i] = i < left ? optiml_g16_ldm8(p + i * step) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
                for (int i = 0; i < U; ++i) xv[i] = i < left ? __ldg(xp + i * TK) : (unsigned short)0;
#pragma unroll
                for (int i = 0; i < U; ++i) {
                    const float xf = optiml_g16_from16(xv[i]);
                    float e0, e1;
                    optiml_g16_unpack(a[i].x, e0, e1);
                    acc[0] = fmaf(e0, xf, acc[0]);
                    acc[1] = fmaf(e1, xf, acc[1]);
                    optiml_g16_unpack(a[i].y, e0, e1);
                    acc[2] = fmaf(e0, xf, acc[2]);
                    acc[3] = fmaf(e1, xf, acc[3]);
                    optiml_g16_unpack(a[i].z, e0, e1);
                    acc[4] = fmaf(e0, xf, acc[4]);
                    acc[5] = fmaf(e1, xf, acc[5]);
                    optiml_g16_unpack(a[i].w, e0, e1);
                    acc[6] = fmaf(e0, xf, acc[6]);
                    acc[7] = fmaf(e1, xf, acc[7]);
                }
            }
        }
        // sum over the 32 / TXT k-threads of this warp (lanes with the same tx)
#pragma unroll
        for (int o = TXT; o < 32; o <<= 1)
#pragma unroll
            for (int c = 0; c < 8; ++c) acc[c] += __shfl_xor_sync(0xffffffffu, acc[c], o);
        if (lane < TXT) {
#pragma unroll
            for (int c = 0; c < 8; ++c) red[warp * COLS + 8 * lane + c] = acc[c];
        }
    } else {
        // rows not all 16-byte aligned: warp w reads rows w, w + WARPS, ...,
        // lane l the columns c0 + l + 32 c (c < CPT) with 2-byte loads; SR rows
        // per step, row i's vector element comes from lane i by a shuffle.
        constexpr int CPT = OPTIML_G16_CPT, SR = OPTIML_G16_SR, WARPS = OPTIML_G16_WARPS;
        float acc[CPT];
        bool col_ok[CPT];
#pragma unroll
        for (int c = 0; c < CPT; ++c) {
            acc[c] = 0.f;
            col_ok[c] = lane + 32 * c < rem;
        }
        const int mine = warp < K ? (K - 1 - warp) / WARPS + 1 : 0;  // rows of this warp (warp-uniform)
        const int steps = mine / SR, rest = mine % SR;
        const long long step = (long long)WARPS * (long long)L;
        const unsigned short* __restrict__ p = W + (long long)warp * (long long)L + c0 + lane;
        const unsigned short* __restrict__ xp = x + warp;
#pragma unroll 1
        for (int s = 0; s <= steps; ++s, p += SR * step, xp += SR * WARPS) {
            const int nr = s < steps ? SR : rest;  // rows in this step (warp-uniform)
            if (nr == 0) break;
            unsigned short a[SR][CPT];
#pragma unroll
            for (int i = 0; i < SR; ++i)
#pragma unroll
                for (int c = 0; c < CPT; ++c)
                    a[i][c] = (i < nr && col_ok[c]) ? optiml_g16_ldm1(p + i * step + 32 * c) : (unsigned short)0;
            const float xl = lane < nr ? optiml_g16_from16(__ldg(xp + lane * WARPS)) : 0.f;
#pragma unroll
            for (int i = 0; i < SR; ++i) {
                const float xf = __shfl_sync(0xffffffffu, xl, i);
                if (i < nr) {
#pragma unroll
                    for (int c = 0; c < CPT; ++c) acc[c] = fmaf(optiml_g16_from16(a[i][c]), xf, acc[c]);
                }
            }
        }
#pragma unroll
        for (int c = 0; c < CPT; ++c) red[warp * COLS + lane + 32 * c] = acc[c];
    }
    __syncthreads();
    // fixed-order sum over the warps' partials of each column
    for (int t = tid; t < COLS && t < rem; t += OPTIML_GEMV_THREADS) {
        float v = red[t];
#pragma unroll 4
        for (int q = 1; q < OPTIML_G16_WARPS; ++q) v += red[q * COLS + t];
        optiml_g16_store(Cz, bias, bias_per_out, c0 + t, v, alpha, beta);
    }
    __syncthreads();  // red is reused by the next tile / batch item
}

// ------------------------------------------------------------ batch loop ---
// COLVEC: N == 1 (the matrix is A, the vector B; else the matrix is B, the
// vector A). DOT: dot mode (else column mode). Compile-time, so that the
// operand selection costs no registers.
template <bool COLVEC, bool DOT>
__device__ __forceinline__ void optiml_g16_run(const unsigned short* __restrict__ A,
                                               const unsigned short* __restrict__ B, unsigned short* __restrict__ C,
                                               const float* __restrict__ bias, int batch, int L, int K,
                                               long long strideA, long long strideB, long long strideC, float alpha,
                                               float beta, float* __restrict__ red) {
    const unsigned short* __restrict__ W = COLVEC ? A : B;  // the matrix operand
    const unsigned short* __restrict__ X = COLVEC ? B : A;  // the vector operand
    const long long strideW = COLVEC ? strideA : strideB;
    const long long strideX = COLVEC ? strideB : strideA;
    constexpr int TILE = DOT ? OPTIML_G16_DOT_ROWS : OPTIML_G16_COL_COLS;
    const int tiles = L / TILE + (L % TILE != 0);
    for (int z = (int)blockIdx.z; z < batch; z = optiml_g16_next(z, (int)gridDim.z, batch)) {
        const unsigned short* __restrict__ Wz = W + (long long)z * strideW;
        const unsigned short* __restrict__ Xz = X + (long long)z * strideX;
        unsigned short* __restrict__ Cz = C + (long long)z * strideC;
        for (int t = (int)blockIdx.x; t < tiles; t = optiml_g16_next(t, (int)gridDim.x, tiles)) {
            if (DOT)
                optiml_g16_dot_tile(Wz, Xz, Cz, bias, !COLVEC, L, K, t, alpha, beta);
            else
                optiml_g16_col_tile(Wz, Xz, Cz, bias, !COLVEC, L, K, t, alpha, beta, red);
        }
    }
}

// ---------------------------------------------------------------- kernel
extern "C" __global__ void __launch_bounds__(OPTIML_GEMV_THREADS, OPTIML_G16_MIN_BLOCKS)
optiml_gemv(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
            unsigned short* __restrict__ C, const float* __restrict__ bias, int batch, int M, int N, int K,
            long long strideA, long long strideB, long long strideC, float alpha, float beta) {
    __shared__ __align__(16) float optiml_g16_red[OPTIML_G16_RED];

    // all block-uniform
    if (blockIdx.y != 0 || batch <= 0 || M <= 0 || N <= 0 || K < 0) return;
    if (N == 1) {  // C is M x 1: the matrix is A
        if (OPTIML_TRANS_A == 0 || M == 1)
            optiml_g16_run<true, true>(A, B, C, bias, batch, M, K, strideA, strideB, strideC, alpha, beta,
                                       optiml_g16_red);
        else
            optiml_g16_run<true, false>(A, B, C, bias, batch, M, K, strideA, strideB, strideC, alpha, beta,
                                        optiml_g16_red);
    } else if (M == 1) {  // C is 1 x N: the matrix is B
        optiml_g16_run<false, OPTIML_TRANS_B != 0>(A, B, C, bias, batch, N, K, strideA, strideB, strideC, alpha,
                                                    beta, optiml_g16_red);
    }
    // else: not a matrix-vector product, nothing is written
}
