// optiml prototype: batched GEMM with 16-bit inputs (bf16 or fp16), fp32
// accumulation, Hopper warpgroup MMA (wgmma.mma_async, sm_90a only), TMA
// (cp.async.bulk.tensor) loads into 128-byte-swizzled shared memory, both
// wgmma operands from shared-memory descriptors (SS form) in ALL four layouts
// (the 16-bit wgmma has the transpose immediates imm-trans-a / imm-trans-b).
// The optiml/ headers (defaults.cuh, epilogue.cuh, sm90.cuh; -I optiml-build/src/cuda for nvcc), inline PTX only: NVRTC compiles it as is
// (-arch=sm_90a). See bench/harness/wgmma16/WGMMA16_NOTES.md for the design,
// the layouts and the descriptor math (measured on the H200 in
// bench/results/2026-11-30-h200-tensor-core-prototypes.md).
//
// Entry point (OPTIML_KERNEL, default optiml_matmul, for both dtypes):
//   extern "C" __global__ void optiml_matmul(
//       const T16* A, const T16* B, TC* C, const float* bias,
//       int batch, int M, int N, int K,
//       long long strideA, long long strideB, long long strideC,   // elements
//       float alpha, float beta,
//       const __grid_constant__ TmaMap tmA,   // CUtensorMap of A (below)
//       const __grid_constant__ TmaMap tmB)   // CUtensorMap of B
//   T16 = __nv_bfloat16 / __half (unsigned short when compiled without
//   cuda_bf16.h / cuda_fp16.h, e.g. by NVRTC: same ABI, a pointer);
//   TC = T16 (OPTIML_C_F32 0, default) or float (OPTIML_C_F32 1).
//   C[z] (M x N, ldc = N) = epilogue(op(A[z]) * op(B[z])), f32 accumulation.
//     OPTIML_TRANS_A 0: A is M x K (lda = K); 1: A stored K x M (lda = M)
//     OPTIML_TRANS_B 0: B is K x N (ldb = N); 1: B stored N x K (ldb = K)
//     X[z] = X + z * strideX (stride 0 = broadcast that operand)
//   Epilogue per element (fp32): v = acc; v *= alpha (OPTIML_HAS_ALPHA);
//   v += beta * C_old (OPTIML_HAS_BETA; else C is never read); v += bias[n]
//   (OPTIML_HAS_BIAS, bias fp32, 4-byte aligned); v = optiml_act_fast(v) (OPTIML_ACT:
//   the tensor-core forms of optiml/epilogue.cuh); rounded to TC (rn).
//   A and B are read ONLY through the tensor maps (the pointers are kept for
//   the ABI); the maps must describe the same A, B (host: WGMMA16_NOTES.md):
//     map of an operand stored R rows x L (L contiguous, R x L row-major):
//       rank 3, dims {L, R, batch'}, strides (bytes) {2 L, 2 stride'},
//       box {64, BOXR, 1}, element strides 1, SWIZZLE_128B, interleave none,
//       OOB fill NONE (zeros), data type BFLOAT16 / FLOAT16;
//       batch' = batch, stride' = strideX; for a broadcast (strideX == 0)
//       batch' = 1 (the kernel then uses batch coordinate 0).
//     A, TRANS_A 0: L = K, R = M, BOXR = TILE_M     (one box per stage)
//     A, TRANS_A 1: L = M, R = K, BOXR = 64          (TILE_M / 64 boxes)
//     B, TRANS_B 1: L = K, R = N, BOXR = TILE_N     (one box per stage)
//     B, TRANS_B 0: L = N, R = K, BOXR = 64          (TILE_N / 64 boxes)
//   TMA requirements (the launcher must check, else use another kernel):
//   A, B 16-byte aligned; L % 8 == 0 for both maps (lda, ldb multiples of 8
//   elements); strideA, strideB % 8 == 0 (or 0); M, N, K >= 1 for the maps
//   (K == 0 is allowed: no TMA is issued, the maps may be zero bytes).
//   C: any alignment (the 16-byte vector store path is taken at run time when
//   N % 8 == 0 and C[z] is 16-byte aligned; 4-/2-byte paths otherwise).
//   block = OPTIML_THREADS (1-D) = 128 * (OPTIML_CONSUMERS + 1);
//   dynamic shared memory = OPTIML_DYN_SMEM_BYTES (raise
//   cudaFuncAttributeMaxDynamicSharedMemorySize first);
//   grid: any (x, y, z). Block b (linear index) does tiles b, b + #blocks, ...
//   of batch-major, then grouped (OPTIML_GROUP_M tile rows) tile order;
//   persistent grid = #SMs blocks (what the launcher should use), or the
//   full grid (ceil(N/TILE_N), ceil(M/TILE_M), min(batch, 65535)).
//
// Block: OPTIML_CONSUMERS (1 or 2) consumer warpgroups, each 64 rows of the
// tile x TILE_N = OPTIML_BN columns (one m64nBNk16 wgmma per 16 of K), then
// one producer warpgroup whose thread 0 issues the TMA copies (setmaxnreg:
// producer 40 registers, consumers 232 with 2 consumers and BN 256).
// BK = 64 (one 128-byte swizzle row of 16-bit elements). STAGES-deep ring
// with full (TMA transaction count) / empty (one arrival per consumer warp)
// mbarriers.
//
// Macros:
//   OPTIML_DTYPE       0 bf16 (default), 1 fp16 (inputs; accumulation is f32)
//   OPTIML_C_F32       0 (default): C has the input type; 1: C is float
//   OPTIML_TRANS_A/B, OPTIML_HAS_ALPHA/BETA/BIAS, OPTIML_ACT: as above
//   OPTIML_BN          tile N = wgmma N: 64, 128 or 256 (default 256)
//   OPTIML_CONSUMERS   1 or 2 (default 2): tile M = 64 * this
//   OPTIML_STAGES      2..8 (default 4: 4 x 48 KB = 192 KB)
//   OPTIML_GROUP_M     tile rows per raster group (default 8; 1 = row-major)
//   OPTIML_EPI_VEC     1 (default): 16-bit C stored 16 bytes per thread after a
//                      4x4 quad transpose (shfl); 0: 4-byte bf16x2 stores
//   OPTIML_MN_DESC_SWAP 0 (default): MN-major descriptor LBO = 8192 (next
//                      64-element MN block), SBO = 1024 (next 8 k rows), as
//                      read from the PTX ISA; 1: the two exchanged (debug knob,
//                      in case the GPU probe says the reading is wrong)
//   OPTIML_SETMAXNREG, OPTIML_PRODUCER_REGS, OPTIML_CONSUMER_REGS

#ifndef OPTIML_C_F32
#define OPTIML_C_F32 0
#endif
#include "optiml/defaults.cuh"  // OPTIML_DTYPE, OPTIML_TRANS_A/B, OPTIML_HAS_ALPHA/BETA/BIAS
#include "optiml/epilogue.cuh"  // OPTIML_ACT and the activations
#ifndef OPTIML_BN
#define OPTIML_BN 256
#endif
#ifndef OPTIML_CONSUMERS
#define OPTIML_CONSUMERS 2
#endif
#ifndef OPTIML_STAGES
#define OPTIML_STAGES 4
#endif
#ifndef OPTIML_GROUP_M
#define OPTIML_GROUP_M 8
#endif
#ifndef OPTIML_EPI_VEC
#define OPTIML_EPI_VEC 1
#endif
#ifndef OPTIML_MN_DESC_SWAP
#define OPTIML_MN_DESC_SWAP 0
#endif
#ifndef OPTIML_SETMAXNREG
#if OPTIML_BN == 256 && OPTIML_CONSUMERS == 2
#define OPTIML_SETMAXNREG 1
#else
#define OPTIML_SETMAXNREG 0
#endif
#endif
#ifndef OPTIML_PRODUCER_REGS
#define OPTIML_PRODUCER_REGS 40
#endif
#ifndef OPTIML_CONSUMER_REGS
#define OPTIML_CONSUMER_REGS 232
#endif

// The entry point: optiml_matmul, the name every optiml matmul module exports.
#ifndef OPTIML_KERNEL
#define OPTIML_KERNEL optiml_matmul
#endif
#if OPTIML_DTYPE == OPTIML_DTYPE_BF16
#define OPTIML_WG_T "bf16"
#elif OPTIML_DTYPE == OPTIML_DTYPE_F16
#define OPTIML_WG_T "f16"
#else
#error "OPTIML_DTYPE must be 0 (bf16) or 1 (fp16)"
#endif

#define OPTIML_BK 64
#define OPTIML_TILE_M (64 * OPTIML_CONSUMERS)
#define OPTIML_TILE_N OPTIML_BN
#define OPTIML_THREADS (128 * (OPTIML_CONSUMERS + 1))
#define OPTIML_A_STAGE_BYTES (OPTIML_TILE_M * 128)
#define OPTIML_B_STAGE_BYTES (OPTIML_TILE_N * 128)
#define OPTIML_STAGE_BYTES (OPTIML_A_STAGE_BYTES + OPTIML_B_STAGE_BYTES)
#define OPTIML_DYN_SMEM_BYTES (OPTIML_STAGES * OPTIML_STAGE_BYTES + 1024)
// box rows of the maps (see the ABI above)
#define OPTIML_A_BOXR (OPTIML_TRANS_A ? 64 : OPTIML_TILE_M)
#define OPTIML_B_BOXR (OPTIML_TRANS_B ? OPTIML_TILE_N : 64)
// wgmma transpose immediates: 1 = MN-major operand in shared memory
#define OPTIML_TNSP_A (OPTIML_TRANS_A ? 1 : 0)
#define OPTIML_TNSP_B (OPTIML_TRANS_B ? 0 : 1)

#if OPTIML_BN != 64 && OPTIML_BN != 128 && OPTIML_BN != 256
#error "OPTIML_BN must be 64, 128 or 256"
#endif
#if OPTIML_CONSUMERS != 1 && OPTIML_CONSUMERS != 2
#error "OPTIML_CONSUMERS must be 1 or 2"
#endif
#if OPTIML_STAGES < 2 || OPTIML_STAGES > 8
#error "OPTIML_STAGES must be 2..8"
#endif
#if OPTIML_DYN_SMEM_BYTES > 232448
#error "shared memory per block exceeds 227 KB: fewer OPTIML_STAGES"
#endif
// setmaxnreg only moves registers within what the block was launched with: OPTIML_THREADS times the per-thread
// count __launch_bounds__(OPTIML_THREADS, 1) allows (168 for 384 threads: 64512, not the 65536 of the file).
// Past it the consumers' setmaxnreg.inc waits forever (48 / 232 with two consumers hung on an H100).
#if OPTIML_SETMAXNREG && (OPTIML_PRODUCER_REGS * 128 + OPTIML_CONSUMER_REGS * 128 * OPTIML_CONSUMERS > OPTIML_THREADS * ((65536 / OPTIML_THREADS) & ~7))
#error "setmaxnreg budget exceeds the block's launch-time registers"
#endif
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "wgmma16.cu needs the sm_90a target (-gencode=arch=compute_90a,code=sm_90a / NVRTC -arch=sm_90a)"
#endif

// 16-bit element types of the ABI: the CUDA types when their headers were
// included first (nvcc harness), else 2-byte storage (NVRTC: no headers).
#if OPTIML_DTYPE == OPTIML_DTYPE_BF16 && defined(__CUDA_BF16_TYPES_EXIST__)
typedef __nv_bfloat16 optiml_t16;
#elif OPTIML_DTYPE == OPTIML_DTYPE_F16 && defined(__CUDA_FP16_TYPES_EXIST__)
typedef __half optiml_t16;
#else
typedef unsigned short optiml_t16;
#endif
#if OPTIML_C_F32
typedef float optiml_tc;
#else
typedef optiml_t16 optiml_tc;
#endif

#include "optiml/sm90.cuh"  // TmaMap and the PTX wrappers (mbarrier, TMA, wgmma, setmaxnreg)

namespace optiml_wg16 {

constexpr int BN = OPTIML_BN;
constexpr int BK = OPTIML_BK;
constexpr int STAGES = OPTIML_STAGES;
constexpr int NCONS = OPTIML_CONSUMERS;
constexpr int TILE_M = OPTIML_TILE_M;
constexpr unsigned A_STAGE = OPTIML_A_STAGE_BYTES;
constexpr unsigned B_STAGE = OPTIML_B_STAGE_BYTES;

using namespace optiml_sm90;

// ---------------------------------------------------------------- descriptors
// Shared-memory matrix descriptor, 128-byte swizzle (layout type 1, bits
// 62-63), base offset 0 (every operand base is 1024-byte aligned; the k16
// steps of a K-major operand add 32/64/96 bytes inside the 128-byte row, as
// in the TF32 prototype), address field = (addr & 0x3FFFF) >> 4.
// K-major (TMA box {64 k, R rows}: row r at 128 r, chunk c at c ^ (r & 7)):
//   LBO unused for swizzled K-major (1), SBO = 1024 (next 8 rows);
//   k16 step = +32 bytes = +2.
// MN-major (TMA boxes {64 mn, 64 k}, box b at 8192 b: k-row r at 128 r):
//   swizzle atom = 8 k-rows x 64 mn elements (1024 B); PTX ISA (matrix
//   descriptor, MN-major, swizzled): LBO = offset between (swizzle bytes / 16)
//   = 8 "rows" of 16 bytes along MN and the next 8 (= next 64-element MN
//   block = next box, 8192 B); SBO = offset from the first 8 "columns" (k)
//   to the next 8 (1024 B). k16 step = 16 k-rows = +2048 bytes = +128.
__device__ __forceinline__ unsigned long long desc_kmajor(unsigned saddr) {
    return (unsigned long long)((saddr & 0x3FFFFu) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) |
           (1ull << 62);
}
__device__ __forceinline__ unsigned long long desc_mnmajor(unsigned saddr) {
#if OPTIML_MN_DESC_SWAP
    const unsigned long long lbo = 1024 >> 4, sbo = 8192 >> 4;
#else
    const unsigned long long lbo = 8192 >> 4, sbo = 1024 >> 4;
#endif
    return (unsigned long long)((saddr & 0x3FFFFu) >> 4) | (lbo << 16) | (sbo << 32) | (1ull << 62);
}
template <int MN_MAJOR>
__device__ __forceinline__ unsigned long long make_desc(unsigned saddr) {
    return MN_MAJOR ? desc_mnmajor(saddr) : desc_kmajor(saddr);
}
// descriptor increment per k16 step (address field units of 16 bytes)
template <int MN_MAJOR>
struct KStep {
    static constexpr unsigned long long v = MN_MAJOR ? 128ull : 2ull;
};

// ---- GENERATED by gen_wgmma_ops.py (do not edit by hand)
template <int TA, int TB>
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %34, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." OPTIML_WG_T "." OPTIML_WG_T " {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,\n"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1, %35, %36;\n\t}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB)
        : "memory");
}

template <int TA, int TB>
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." OPTIML_WG_T "." OPTIML_WG_T " {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,\n"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,\n"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,\n"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, %67, %68;\n\t}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB)
        : "memory");
}

template <int TA, int TB>
__device__ __forceinline__ void wgmma_ss_n256(float (&d)[128], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." OPTIML_WG_T "." OPTIML_WG_T " {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,\n"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,\n"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,\n"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,\n"
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,\n"
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,\n"
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,\n"
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, %131, %132;\n\t}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB)
        : "memory");
}
// ---- END GENERATED

// One k16 step of this warpgroup: D (64 x BN) += A (64 x 16) * B (16 x BN).
__device__ __forceinline__ void mma_k16(float (&d)[BN / 2], unsigned long long da, unsigned long long db) {
#if OPTIML_BN == 256
    wgmma_ss_n256<OPTIML_TNSP_A, OPTIML_TNSP_B>(d, da, db);
#elif OPTIML_BN == 128
    wgmma_ss_n128<OPTIML_TNSP_A, OPTIML_TNSP_B>(d, da, db);
#else
    wgmma_ss_n64<OPTIML_TNSP_A, OPTIML_TNSP_B>(d, da, db);
#endif
}

// ---------------------------------------------------------------- tile order
// Tiles of one batch item in groups of OPTIML_GROUP_M tile rows: inside a
// group the tile row changes fastest (the blocks running at the same time
// share B column panels and a few A row panels: L2 reuse on large shapes).
struct TileCoord {
    int z, m0, n0;
};
__device__ __forceinline__ TileCoord tile_coord(long long tile, int tiles_m, int tiles_n) {
    const long long per_item = (long long)tiles_m * tiles_n;
    TileCoord c;
    const long long z = tile / per_item;
    const int r = (int)(tile - z * per_item);
    const int gsz = OPTIML_GROUP_M * tiles_n;
    const int grp = r / gsz;
    const int first_m = grp * OPTIML_GROUP_M;
    const int gm = min(OPTIML_GROUP_M, tiles_m - first_m);
    const int rr = r - grp * gsz;
    c.z = (int)z;
    c.m0 = (first_m + rr % gm) * TILE_M;
    c.n0 = (rr / gm) * BN;
    return c;
}

// ---------------------------------------------------------------- consumer k-tile
struct Consumer {
    unsigned full0, empty0, sA0, sB0, offA;
    bool leader;   // lane 0 of the warp
    unsigned it;   // k-tiles consumed by this block so far (ring position)
    unsigned prev; // stage of the group still in flight

    // retire the previous k-tile's group (one group stays in flight), release its stage
    __device__ __forceinline__ void retire(unsigned s, bool first) {
        wgmma_wait<1>();
        mbar_arrive_if(empty0 + 8u * prev, leader && !first);
        prev = s;
        ++it;
    }
    __device__ __forceinline__ void step(float (&acc)[BN / 2], bool first) {
        const unsigned s = it % STAGES;
        const unsigned ph = (it / STAGES) & 1u;
        mbar_wait(full0 + 8u * s, ph);
        const unsigned long long da = make_desc<OPTIML_TNSP_A>(sA0 + s * A_STAGE + offA);
        const unsigned long long db = make_desc<OPTIML_TNSP_B>(sB0 + s * B_STAGE);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks)
            mma_k16(acc, da + KStep<OPTIML_TNSP_A>::v * ks, db + KStep<OPTIML_TNSP_B>::v * ks);
        wgmma_commit();
        retire(s, first);
    }
};

// ---------------------------------------------------------------- epilogue
__device__ __forceinline__ float epilogue(float acc, float alpha, float beta, float old, float bias) {
    float v = acc;
#if OPTIML_HAS_ALPHA
    v *= alpha;
#endif
#if OPTIML_HAS_BETA
    v = fmaf(beta, old, v);
#endif
#if OPTIML_HAS_BIAS
    v += bias;
#endif
    (void)alpha; (void)beta; (void)old; (void)bias;
    return optiml_act_fast(v);
}
// 16-bit conversions (rn), PTX only (no cuda_bf16.h under NVRTC)
__device__ __forceinline__ unsigned pack2(float lo, float hi) {  // lo at the lower address
    unsigned r;
#if OPTIML_DTYPE == OPTIML_DTYPE_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}
__device__ __forceinline__ float from16(unsigned short u) {
#if OPTIML_DTYPE == OPTIML_DTYPE_BF16
    return __uint_as_float((unsigned)u << 16);
#else
    float r;
    asm("{\n\t.reg .b16 h;\n\tmov.b16 h, %1;\n\tcvt.f32.f16 %0, h;\n\t}\n" : "=f"(r) : "h"(u));
    return r;
#endif
}
__device__ __forceinline__ unsigned short to16(float x) {
    return (unsigned short)(pack2(x, 0.f) & 0xFFFFu);
}
__device__ __forceinline__ float bias_at(const float* __restrict__ bias, int n, int N) {
#if OPTIML_HAS_BIAS
    return n < N ? bias[n] : 0.f;
#else
    (void)bias; (void)n; (void)N;
    return 0.f;
#endif
}
// 4x4 transpose of 32-bit words inside each quad of lanes (t = lane & 3):
// in: w[c] = M[t][c]; out: w[r] = M[r][t].
__device__ __forceinline__ void quad_transpose(unsigned (&w)[4], int t) {
    const bool b1 = (t & 2) != 0, b0 = (t & 1) != 0;
    {
        const unsigned s0 = b1 ? w[0] : w[2], s1 = b1 ? w[1] : w[3];
        const unsigned r0 = __shfl_xor_sync(0xFFFFFFFFu, s0, 2), r1 = __shfl_xor_sync(0xFFFFFFFFu, s1, 2);
        if (b1) { w[0] = r0; w[1] = r1; } else { w[2] = r0; w[3] = r1; }
    }
    {
        const unsigned s0 = b0 ? w[0] : w[1], s1 = b0 ? w[2] : w[3];
        const unsigned r0 = __shfl_xor_sync(0xFFFFFFFFu, s0, 1), r1 = __shfl_xor_sync(0xFFFFFFFFu, s1, 1);
        if (b0) { w[0] = r0; w[2] = r1; } else { w[1] = r0; w[3] = r1; }
    }
}
__device__ __forceinline__ void st_global_v4(void* p, const unsigned (&w)[4]) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
}

// The tile's outputs of this thread: rows row0 (+8), columns n0 + 8 j + 2 t (+1),
// acc[4 j + 2 h + e] = (row0 + 8 h, n0 + 8 j + 2 t + e).
__device__ __forceinline__ void store_tile(float (&acc)[BN / 2], optiml_tc* __restrict__ Cz,
                                           const float* __restrict__ bias, int M, int N, int row0, int n0, int t,
                                           float alpha, float beta) {
    (void)alpha; (void)beta;
#if OPTIML_C_F32
    float* C = reinterpret_cast<float*>(Cz);
    const bool vec2 = (N & 1) == 0 && (reinterpret_cast<unsigned long long>(C) & 7ull) == 0ull;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = n0 + 8 * j + 2 * t;
        const float bx = bias_at(bias, col, N), by = bias_at(bias, col + 1, N);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = row0 + 8 * h;
            if (row >= M) continue;
            float* p = C + (long long)row * N + col;
            if (vec2) {
                if (col < N) {
                    float2 o = make_float2(0.f, 0.f);
#if OPTIML_HAS_BETA
                    o = *reinterpret_cast<const float2*>(p);
#endif
                    *reinterpret_cast<float2*>(p) = make_float2(epilogue(acc[4 * j + 2 * h], alpha, beta, o.x, bx),
                                                                epilogue(acc[4 * j + 2 * h + 1], alpha, beta, o.y, by));
                }
            } else {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    if (col + e < N) {
                        float o = 0.f;
#if OPTIML_HAS_BETA
                        o = p[e];
#endif
                        p[e] = epilogue(acc[4 * j + 2 * h + e], alpha, beta, o, e ? by : bx);
                    }
                }
            }
        }
    }
#else
    unsigned short* C = reinterpret_cast<unsigned short*>(Cz);
#if OPTIML_EPI_VEC
    const bool vec16 = (N & 7) == 0 && (reinterpret_cast<unsigned long long>(C) & 15ull) == 0ull;
    if (vec16) {
        // per group of 4 j: pack the pairs, transpose in the quad, one 16-byte store per row
#pragma unroll
        for (int jq = 0; jq < BN / 32; ++jq) {
            unsigned w0[4], w1[4];
#pragma unroll
            for (int jj = 0; jj < 4; ++jj) {
                const int j = 4 * jq + jj;
                const int col = n0 + 8 * j + 2 * t;
                const float bx = bias_at(bias, col, N), by = bias_at(bias, col + 1, N);
                float o0x = 0.f, o0y = 0.f, o1x = 0.f, o1y = 0.f;
#if OPTIML_HAS_BETA
                if (col < N) {
                    if (row0 < M) {
                        const unsigned u = *reinterpret_cast<const unsigned*>(C + (long long)row0 * N + col);
                        o0x = from16((unsigned short)(u & 0xFFFFu)); o0y = from16((unsigned short)(u >> 16));
                    }
                    if (row0 + 8 < M) {
                        const unsigned u = *reinterpret_cast<const unsigned*>(C + (long long)(row0 + 8) * N + col);
                        o1x = from16((unsigned short)(u & 0xFFFFu)); o1y = from16((unsigned short)(u >> 16));
                    }
                }
#endif
                w0[jj] = pack2(epilogue(acc[4 * j + 0], alpha, beta, o0x, bx), epilogue(acc[4 * j + 1], alpha, beta, o0y, by));
                w1[jj] = pack2(epilogue(acc[4 * j + 2], alpha, beta, o1x, bx), epilogue(acc[4 * j + 3], alpha, beta, o1y, by));
            }
            quad_transpose(w0, t);
            quad_transpose(w1, t);
            const int c16 = n0 + 32 * jq + 8 * t;  // this thread now holds columns c16 .. c16 + 7
            if (c16 < N) {
                if (row0 < M) st_global_v4(C + (long long)row0 * N + c16, w0);
                if (row0 + 8 < M) st_global_v4(C + (long long)(row0 + 8) * N + c16, w1);
            }
        }
        return;
    }
#endif
    const bool vec2 = (N & 1) == 0 && (reinterpret_cast<unsigned long long>(C) & 3ull) == 0ull;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = n0 + 8 * j + 2 * t;
        const float bx = bias_at(bias, col, N), by = bias_at(bias, col + 1, N);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = row0 + 8 * h;
            if (row >= M) continue;
            unsigned short* p = C + (long long)row * N + col;
            if (vec2) {
                if (col < N) {
                    float ox = 0.f, oy = 0.f;
#if OPTIML_HAS_BETA
                    const unsigned u = *reinterpret_cast<const unsigned*>(p);
                    ox = from16((unsigned short)(u & 0xFFFFu)); oy = from16((unsigned short)(u >> 16));
#endif
                    *reinterpret_cast<unsigned*>(p) = pack2(epilogue(acc[4 * j + 2 * h], alpha, beta, ox, bx),
                                                            epilogue(acc[4 * j + 2 * h + 1], alpha, beta, oy, by));
                }
            } else {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    if (col + e < N) {
                        float o = 0.f;
#if OPTIML_HAS_BETA
                        o = from16(p[e]);
#endif
                        p[e] = to16(epilogue(acc[4 * j + 2 * h + e], alpha, beta, o, e ? by : bx));
                    }
                }
            }
        }
    }
#endif
}

}  // namespace optiml_wg16

extern "C" __global__ void __launch_bounds__(OPTIML_THREADS, 1) OPTIML_KERNEL(
    const optiml_t16* __restrict__ A, const optiml_t16* __restrict__ B, optiml_tc* __restrict__ C,
    const float* __restrict__ bias, int batch, int M, int N, int K, long long strideA, long long strideB,
    long long strideC, float alpha, float beta, const __grid_constant__ optiml_wg16::TmaMap tmA,
    const __grid_constant__ optiml_wg16::TmaMap tmB) {
    using namespace optiml_wg16;
    (void)A; (void)B;
    __shared__ __align__(8) unsigned long long bars[2 * STAGES];  // full[0..S-1], empty[0..S-1]
    extern __shared__ __align__(16) unsigned char optiml_dsmem[];  // aligned to 1024 below

    const int tid = (int)threadIdx.x;
    const unsigned ring = (smem_u32(optiml_dsmem) + 1023u) & ~1023u;  // 1024-aligned (swizzle period)
    const unsigned sA0 = ring;                                         // STAGES x A_STAGE
    const unsigned sB0 = ring + STAGES * A_STAGE;                      // STAGES x B_STAGE
    const unsigned full0 = smem_u32(&bars[0]);
    const unsigned empty0 = smem_u32(&bars[STAGES]);

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full0 + 8u * s, 1u);             // the producer's arrive.expect_tx (+ the TMA bytes)
            mbar_init(empty0 + 8u * s, 4u * NCONS);    // one arrival per consumer warp
        }
        fence_mbar_init();
    }
    __syncthreads();

    if (M <= 0 || N <= 0 || batch <= 0) return;
    const int tiles_m = (M + TILE_M - 1) / TILE_M;
    const int tiles_n = (N + BN - 1) / BN;
    const long long total = (long long)tiles_m * tiles_n * (long long)batch;
    const long long nblk = (long long)gridDim.x * gridDim.y * gridDim.z;
    const long long bid = (long long)blockIdx.x + (long long)gridDim.x * ((long long)blockIdx.y + (long long)gridDim.y * blockIdx.z);
    const int ktiles = (K + BK - 1) / BK;

    if (tid >= 128 * NCONS) {
        // ======================= producer warpgroup (one thread issues TMA) =======================
#if OPTIML_SETMAXNREG
        setmaxnreg_dec<OPTIML_PRODUCER_REGS>();
#endif
        if (tid == 128 * NCONS && ktiles > 0) {
            prefetch_tmap(&tmA);
            prefetch_tmap(&tmB);
            unsigned it = 0;
            for (long long tile = bid; tile < total; tile += nblk) {
                const TileCoord tc = tile_coord(tile, tiles_m, tiles_n);
                const int za = strideA != 0 ? tc.z : 0;
                const int zb = strideB != 0 ? tc.z : 0;
                for (int kt = 0; kt < ktiles; ++kt, ++it) {
                    const unsigned s = it % STAGES;
                    const unsigned ph = (it / STAGES) & 1u;
                    const unsigned bar = full0 + 8u * s;
                    const int k0 = kt * BK;
                    mbar_wait(empty0 + 8u * s, ph ^ 1u);
                    mbar_arrive_expect_tx(bar, A_STAGE + B_STAGE);
                    const unsigned sa = sA0 + s * A_STAGE, sb = sB0 + s * B_STAGE;
#if OPTIML_TRANS_A
#pragma unroll
                    for (int b = 0; b < TILE_M / 64; ++b) tma_load_3d(sa + 8192u * b, &tmA, tc.m0 + 64 * b, k0, za, bar);
#else
                    tma_load_3d(sa, &tmA, k0, tc.m0, za, bar);
#endif
#if OPTIML_TRANS_B
                    tma_load_3d(sb, &tmB, k0, tc.n0, zb, bar);
#else
#pragma unroll
                    for (int b = 0; b < BN / 64; ++b) tma_load_3d(sb + 8192u * b, &tmB, tc.n0 + 64 * b, k0, zb, bar);
#endif
                }
            }
        }
    } else {
        // ======================= consumer warpgroups =======================
#if OPTIML_SETMAXNREG
        setmaxnreg_inc<OPTIML_CONSUMER_REGS>();
#endif
        const int wg = tid >> 7, w = (tid >> 5) & 3, lane = tid & 31;
        const int g = lane >> 2, t = lane & 3;
        Consumer cons;
        cons.full0 = full0; cons.empty0 = empty0; cons.sA0 = sA0; cons.sB0 = sB0;
        cons.offA = 8192u * wg;  // 64 rows K-major (64 x 128 B) or the wg-th 64-wide M box: 8192 B both ways
        cons.leader = lane == 0;
        cons.it = 0;
        cons.prev = 0;
        float acc[BN / 2];
        for (long long tile = bid; tile < total; tile += nblk) {
            const TileCoord tc = tile_coord(tile, tiles_m, tiles_n);
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
            // pairs of k-tiles, then an odd last one (the TF32 prototype's loop
            // shape; a plain loop made ptxas serialise the wgmmas, C7515)
            int kt = 0;
            for (; kt + 1 < ktiles; kt += 2) {
                cons.step(acc, kt == 0);
                cons.step(acc, false);
            }
            if (kt < ktiles) cons.step(acc, kt == 0);
            wgmma_wait<0>();
            mbar_arrive_if(empty0 + 8u * cons.prev, ktiles > 0 && lane == 0);
            optiml_tc* Cz = C + (long long)tc.z * strideC;
            store_tile(acc, Cz, bias, M, N, tc.m0 + 64 * wg + 16 * w + g, tc.n0, t, alpha, beta);
        }
    }
}
