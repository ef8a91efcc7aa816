// optiml: batched GEMM with 16-bit inputs (bf16 or fp16), fp32 accumulation,
// on tensor cores with mma.sync.aligned.m16n8k16 (sm_80 and newer: Ampere /
// Ada, which have no wgmma; also runs on sm_90). The 16-bit counterpart of
// matmul_tf32.cu, and a drop-in replacement for matmul16_simt.cu as a module's
// entry: same ABI, same semantics, same epilogue formulas.
//
// Compiled by NVRTC; specialised ONLY through preprocessor macros defined
// before this text. The optiml/ headers (defaults.cuh, epilogue.cuh: in memory for NVRTC, -I optiml-build/src/cuda for nvcc), no standard library; everything the CUDA
// headers would provide is inline PTX. Every function is annotated, so the
// file also compiles with nvcc (bench/harness/mma16/harness.cu includes it)
// and with or without NVRTC's -default-device. The text may follow other
// templates in one module (shared OPTIML_* flags have #ifndef defaults here
// and there; everything else is prefixed OPTIML_M16_ / optiml_m16_).
//
// Entry point (ABI of matmul16_simt.cu / matmul_f32.cu):
//   extern "C" __global__ void optiml_matmul(           (OPTIML_MMA16_ENTRY)
//       const unsigned short* A, const unsigned short* B, unsigned short* C,
//       const float* bias, int batch, int M, int N, int K,
//       long long strideA, long long strideB, long long strideC,  // elements
//       float alpha, float beta)
//   A, B, C hold raw 16-bit patterns: bf16 (OPTIML_DTYPE_BF16) or fp16 (OPTIML_DTYPE_F16).
//
// Launch (the Rust launcher computes exactly this):
//   grid  = (ceil(N / BN), ceil(M / BM), min(batch, 65535))
//   block = OPTIML_M16_THREADS = (BM / WM) * (BN / WN) * 32   (1-D)
//   smem_bytes = 2 * STAGES * BK * (BM + BN)   (= OPTIML_M16_SMEM_BYTES)
//     always DYNAMIC shared memory (the kernel declares no static shared
//     memory); when smem_bytes > 49152, first raise
//     CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to smem_bytes.
//     BM, BN, BK, WM, WN, STAGES = OPTIML_M16_BM, ..._BN, ..._BK, ..._WM,
//     ..._WN, ..._STAGES. Default 128 x 128 x 32, 64 x 64 warps, 4 stages:
//     128 threads, smem_bytes = 65536.
//   ANY grid (x, y, z) >= 1 is correct: blocks walk batch items z =
//   blockIdx.z, + gridDim.z, ..., tile rows (blockIdx.y-derived), +
//   gridDim.y, ..., and tile columns, + gridDim.x, ... (so M > 65535 * BM
//   works with grid.y capped at 65535, batch > 65535 with grid.z capped).
//   Do not launch when batch, M or N is 0 (a zero grid dimension is a launch
//   error; there is nothing to write). K = 0 is fine.
//
// C[z] (M x N, ldc = N) = epilogue(op(A[z]) * op(B[z])), fp32 accumulation
//   OPTIML_TRANS_A 0: A is M x K (lda = K); 1: A stored K x M (lda = M)
//   OPTIML_TRANS_B 0: B is K x N (ldb = N); 1: B stored N x K (ldb = K)
//   X[z] = X + z * strideX (stride 0 = the same matrix for every batch item;
//   strideC 0 with batch > 1 is a race, as for any GEMM). C must not overlap
//   A or B (the pointers are __restrict__).
// Epilogue per element, fp32: v = acc;
//   v *= alpha (OPTIML_HAS_ALPHA); v = fmaf(beta, C_old, v) (OPTIML_HAS_BETA;
//   otherwise C is never read); v += bias[n] (OPTIML_HAS_BIAS, fp32, 4-byte
//   aligned); v = optiml_act_fast(v) (OPTIML_ACT: the tensor-core forms of
//   optiml/epilogue.cuh); then rounded once to the 16-bit type, round to nearest even (cvt.rn; overflow gives +-inf).
//   K = 0: C = epilogue(0). Out-of-range operand elements are never read;
//   they enter the shared tiles as +0.
//
// Requirements: 2-byte alignment of A, B, C, 4-byte alignment of bias; any
// M, N, K >= 0, batch >= 0; offsets are 64-bit. Faster paths are chosen at
// run time, per operand and per batch item:
//   * operand copies: 16-byte cp.async when the item's base is 16-byte
//     aligned and its leading dimension is a multiple of 8 elements (every
//     stored row then starts 16-byte aligned, and the contiguous extent is a
//     multiple of 8, so a 16-byte chunk is entirely inside or outside);
//     else 4-byte cp.async (base 4-byte aligned, ld even); else 16-bit
//     loads (ld.global.nc) through registers + one st.shared.v4 per chunk.
//     Items with both operands 16-byte copyable run the fast main loop
//     (below); the others a generic one that picks each operand's copy at
//     run time (correct for everything, slower: see NOTES.md).
//   * C: 32-bit (bf16x2 / f16x2) loads / stores when N is even and C[z] is
//     4-byte aligned, else 16-bit ones.
//
// Design (see bench/harness/mma16/NOTES.md):
//  * Block tile BM x BN, k-tile BK (16, 32 or 64); warps in a (BM/WM) x
//    (BN/WN) grid, each owning a WM x WN warp tile = (WM/16) x (WN/8)
//    m16n8k16 MMAs per 16 of K; fp32 accumulators in registers (WM*WN/32 per
//    thread: 128 for 64 x 64).
//  * Fast main loop: STAGES-deep cp.async ring, as matmul_tf32.cu's
//    OPTIML_KLOOP 1: the prologue issues tiles 0 .. STAGES-1 (one commit
//    group per tile); inside tile t the barrier sits before the MMAs of the
//    last k16 step (whose fragments are already in registers): wait for tile
//    t+1, barrier, refill tile t's stage with tile t+STAGES, then the last
//    MMAs of tile t, which load tile t+1's first fragments. One barrier per
//    k-tile. Branch-free body: refills past the last tile are zero-filled.
//    One fragment set per warp (not a double buffer): during the MMAs of
//    step s, a[i] is reloaded for the next step right after the MMAs of row
//    i, and each b pair right after its last use in the last row; rows
//    alternate direction so the first pair freed is the first one needed.
//  * Generic main loop (some operand not 16-byte copyable): matmul_tf32.cu's
//    OPTIML_KLOOP 0 (STAGES-1 tiles in flight; at the top of tile t: wait,
//    barrier, refill the stage of tile t-1; then each k16 step loads its own
//    fragments), which keeps fewer registers live where the copies run.
//  * Every operand is copied in its stored layout: K-contiguous operands
//    (A with TRANS_A 0, B with TRANS_B 1) as [tile rows][BK], M/N-contiguous
//    ones (A with TRANS_A 1, B with TRANS_B 0) as [BK][tile]. No padding: the
//    16-byte chunk c of stored row r sits at chunk c ^ f(r) of that row,
//    f(r) = (r / max(1, 8/CPR)) % min(CPR, 8), CPR = 16-byte chunks per row.
//    Then any 8 consecutive rows at one logical chunk, and any 8 consecutive
//    chunks of a row (or of two / four short rows), cover the 8 distinct
//    16-byte bank groups: ldmatrix and the 16-byte cp.async / st.shared.v4
//    stores are free of bank conflicts. A thread copies the chunks of one
//    chunk column, every THREADS/CPR rows (one swizzle term per thread).
//  * Fragments by ldmatrix.x4: K-contiguous operands without .trans,
//    M/N-contiguous ones with .trans (A feeds the MMA's row-major A
//    fragments, B its column-major B fragments). One ldmatrix.x4 per m16
//    tile of A and per pair of n8 tiles of B per k16 step; one base offset
//    per operand and thread (other steps / tiles: + 16 rows, XOR 32 bytes).
//  * Epilogue straight from the accumulators: thread (g = lane/4,
//    t = lane%4) holds rows g, g+8 x columns 2t, 2t+1 of every m16n8 tile:
//    one 32-bit store of two 16-bit results per row (cvt.rn.bf16x2.f32 /
//    cvt.rn.f16x2.f32). Warp tiles inside C (with 32-bit C access): no
//    tests or branches, 16 rows at a time (their C_old words and bias values
//    in flight together, then the stores). Edge tiles: every row and column
//    tested; with HAS_BETA a first pass folds alpha / beta * C_old into the
//    accumulators, a second adds bias, activates, rounds and stores.
//  * Block rasterization: OPTIML_M16_GROUP_M tile rows per group (blocks
//    that run together share B panels in L2); a bijection of the launched
//    grid, so any grid stays correct.
//
// Registers (NVRTC 13 ptxas, no spills, no stack): default tile 223-254 on
// sm_80 / 86 / 89 / 90 (2 blocks of 128 threads per SM). BK = 64 with
// HAS_BETA spills a few words of outer-loop state on sm_80 / sm_90 (outside
// the k loop); prefer BK = 32.
//
// Macros (all optional):
//   OPTIML_DTYPE           OPTIML_DTYPE_BF16 (default) or OPTIML_DTYPE_F16 (optiml/defaults.cuh)
//   OPTIML_TRANS_A/B, OPTIML_HAS_ALPHA/BETA/BIAS, OPTIML_ACT: as above (OPTIML_ACT_NONE)
//   OPTIML_MMA16_ENTRY     the entry point's name (default optiml_matmul)
//   OPTIML_M16_BM, _BN     block tile (multiples of WM / WN; 128, 128)
//   OPTIML_M16_BK          k-tile: 16, 32 (default) or 64
//   OPTIML_M16_WM, _WN     warp tile (multiples of 16, WM*WN <= 4096; 64, 64)
//   OPTIML_M16_STAGES      cp.async ring depth, 2..8 (default 4; sm_86 /
//                          sm_89 (99 KiB per SM): 3 keeps 2 blocks per SM)
//   OPTIML_M16_THREADS     must equal (BM/WM)*(BN/WN)*32 (defaulted to it)
//   OPTIML_M16_MIN_BLOCKS  __launch_bounds__ min blocks per SM (default 1)
//   OPTIML_M16_GROUP_M     tile rows per raster group (default 8; 1 = none)
//   OPTIML_M16_EMU         offline CPU emulation hook (bench/harness/mma16):
//                          the PTX helpers below call host functions.
//                          Never defined by optiml.
// Tile constraints: a tile row of a stored operand must be 2, 4, 8 or a
// multiple of 8 16-byte chunks (BK in {16, 32, 64}; BM, BN in {16, 32, 64}
// or multiples of 64), and THREADS a multiple of those chunk counts
// (static_asserts below).

#include "optiml/defaults.cuh"  // OPTIML_DTYPE, OPTIML_TRANS_A/B, OPTIML_HAS_ALPHA/BETA/BIAS
#include "optiml/epilogue.cuh"  // OPTIML_ACT and the activations
#ifndef OPTIML_MMA16_ENTRY
#define OPTIML_MMA16_ENTRY optiml_matmul
#endif
#ifndef OPTIML_M16_BM
#define OPTIML_M16_BM 128
#endif
#ifndef OPTIML_M16_BN
#define OPTIML_M16_BN 128
#endif
#ifndef OPTIML_M16_BK
#define OPTIML_M16_BK 32
#endif
#ifndef OPTIML_M16_WM
#define OPTIML_M16_WM 64
#endif
#ifndef OPTIML_M16_WN
#define OPTIML_M16_WN 64
#endif
#ifndef OPTIML_M16_STAGES
#define OPTIML_M16_STAGES 4
#endif
#ifndef OPTIML_M16_THREADS
#define OPTIML_M16_THREADS ((OPTIML_M16_BM / OPTIML_M16_WM) * (OPTIML_M16_BN / OPTIML_M16_WN) * 32)
#endif
#ifndef OPTIML_M16_MIN_BLOCKS
#define OPTIML_M16_MIN_BLOCKS 1
#endif
#ifndef OPTIML_M16_GROUP_M
#define OPTIML_M16_GROUP_M 8
#endif

// Dynamic shared memory of one block, bytes (see the header).
#define OPTIML_M16_SMEM_BYTES (2 * OPTIML_M16_STAGES * OPTIML_M16_BK * (OPTIML_M16_BM + OPTIML_M16_BN))

#if OPTIML_DTYPE != OPTIML_DTYPE_BF16 && OPTIML_DTYPE != OPTIML_DTYPE_F16
#error "OPTIML_DTYPE must be OPTIML_DTYPE_BF16 or OPTIML_DTYPE_F16"
#endif
#if (OPTIML_TRANS_A != 0 && OPTIML_TRANS_A != 1) || (OPTIML_TRANS_B != 0 && OPTIML_TRANS_B != 1)
#error "OPTIML_TRANS_A / OPTIML_TRANS_B must be 0 or 1"
#endif
#if OPTIML_M16_BK != 16 && OPTIML_M16_BK != 32 && OPTIML_M16_BK != 64
#error "OPTIML_M16_BK must be 16, 32 or 64"
#endif
#if (OPTIML_M16_STAGES < 2) || (OPTIML_M16_STAGES > 8)
#error "OPTIML_M16_STAGES must be 2..8"
#endif
#if OPTIML_M16_THREADS != ((OPTIML_M16_BM / OPTIML_M16_WM) * (OPTIML_M16_BN / OPTIML_M16_WN) * 32)
#error "OPTIML_M16_THREADS must equal (BM / WM) * (BN / WN) * 32"
#endif
#if OPTIML_M16_SMEM_BYTES > 232448
#error "OPTIML_M16_SMEM_BYTES exceeds 227 KiB (the sm_90 maximum; sm_80: 163 KiB, sm_86 / sm_89: 99 KiB)"
#endif
// mma.sync m16n8k16 bf16, cp.async and cvt.rn.bf16x2 exist from sm_80 on
// (the host pass of nvcc has no __CUDA_ARCH__ and is let through).
#if !defined(OPTIML_M16_EMU) && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 800)
#error "matmul_mma_16.cu needs sm_80 or newer (mma.sync m16n8k16 .bf16, cp.async)"
#endif

struct optiml_m16_cfg {
    static constexpr int BM = OPTIML_M16_BM;
    static constexpr int BN = OPTIML_M16_BN;
    static constexpr int BK = OPTIML_M16_BK;
    static constexpr int WM = OPTIML_M16_WM;
    static constexpr int WN = OPTIML_M16_WN;
    static constexpr int STAGES = OPTIML_M16_STAGES;
    static constexpr int THREADS = OPTIML_M16_THREADS;
    static constexpr int WARPS_N = BN / WN;
    static constexpr int MT = WM / 16;       // m16 MMA tiles per warp
    static constexpr int NT = WN / 8;        // n8 MMA tiles per warp
    static constexpr int KSTEPS = BK / 16;   // k16 steps per k-tile
    static constexpr bool KA = OPTIML_TRANS_A == 0;  // A stored K-contiguous
    static constexpr bool KB = OPTIML_TRANS_B != 0;  // B stored K-contiguous
    static constexpr int A_STAGE = 2 * BM * BK;      // bytes
    static constexpr int B_STAGE = 2 * BN * BK;
    static constexpr int B_BASE = STAGES * A_STAGE;  // B ring after the A ring
};

static_assert(optiml_m16_cfg::WM % 16 == 0 && optiml_m16_cfg::WN % 16 == 0,
              "OPTIML_M16_WM and OPTIML_M16_WN must be multiples of 16");
static_assert(optiml_m16_cfg::BM % optiml_m16_cfg::WM == 0 && optiml_m16_cfg::BN % optiml_m16_cfg::WN == 0,
              "OPTIML_M16_BM % WM and BN % WN must be 0");
static_assert(optiml_m16_cfg::THREADS <= 1024, "OPTIML_M16_THREADS must be <= 1024");
static_assert(optiml_m16_cfg::MT * optiml_m16_cfg::NT * 4 <= 128,
              "warp tile larger than 64 x 64 (128 accumulators per thread) would spill");
static_assert(optiml_m16_cfg::STAGES * (optiml_m16_cfg::A_STAGE + optiml_m16_cfg::B_STAGE) == OPTIML_M16_SMEM_BYTES,
              "shared memory formula mismatch");

// ---------------------------------------------------------------- PTX helpers
// (OPTIML_M16_EMU: host implementations from bench/harness/mma16/emu_shim.h)

// Returns v unchanged but hides where it came from (values derived from it
// are recomputed where used instead of being kept live across the k loop).
__device__ __forceinline__ int optiml_m16_opaque(int v) {
#if !defined(OPTIML_M16_EMU)
    asm volatile("" : "+r"(v));
#endif
    return v;
}

#if !defined(OPTIML_M16_EMU)
__device__ __forceinline__ unsigned optiml_m16_smem_addr(const void* p) {
    unsigned r;
    asm("{\n\t.reg .u64 t;\n\tcvta.to.shared.u64 t, %1;\n\tcvt.u32.u64 %0, t;\n\t}\n" : "=r"(r) : "l"(p));
    return r;
}
#endif

__device__ __forceinline__ void optiml_m16_cp_commit() {
#if defined(OPTIML_M16_EMU)
    optiml_emu_m16_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void optiml_m16_cp_wait() {
#if defined(OPTIML_M16_EMU)
    optiml_emu_m16_wait(N);
#else
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
// 16 bytes global -> shared; !valid: zero-fill (src-size 0, nothing is read).
__device__ __forceinline__ void optiml_m16_cp16(unsigned dst, const unsigned short* src, bool valid) {
#if defined(OPTIML_M16_EMU)
    optiml_emu_m16_cp(dst, src, 16, valid ? 16 : 0);
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
#endif
}
// 4 bytes global -> shared; !valid: zero-fill.
__device__ __forceinline__ void optiml_m16_cp4(unsigned dst, const unsigned short* src, bool valid) {
#if defined(OPTIML_M16_EMU)
    optiml_emu_m16_cp(dst, src, 4, valid ? 4 : 0);
#else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0)
                 : "memory");
#endif
}
// 16-bit global load through the non-coherent (read-only) path: A and B are
// never written by the kernel (C must not overlap them).
__device__ __forceinline__ unsigned short optiml_m16_ldg16(const unsigned short* p) {
#if defined(OPTIML_M16_EMU)
    return *p;
#else
    unsigned short v;  // volatile: never executed speculatively (it may sit behind a bounds test)
    asm volatile("ld.global.nc.u16 %0, [%1];\n" : "=h"(v) : "l"(p));
    return v;
#endif
}
// 16 bytes (one swizzled chunk) to shared memory, 16-byte aligned.
__device__ __forceinline__ void optiml_m16_sts128(unsigned dst, unsigned a, unsigned b, unsigned c, unsigned d) {
#if defined(OPTIML_M16_EMU)
    optiml_emu_m16_sts128(dst, a, b, c, d);
#else
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
#endif
}

// Four 8x8 b16 matrices: lane l gives the address of row l%8 of matrix l/8
// and receives, in register j, row l/4, elements 2(l%4), 2(l%4)+1 of matrix
// j (.trans: elements [2(l%4)][l/4], [2(l%4)+1][l/4], low half first).
// Volatile: it reads what cp.async and a barrier published.
__device__ __forceinline__ void optiml_m16_ldsm4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3,
                                                 unsigned addr) {
#if defined(OPTIML_M16_EMU)
    optiml_emu_m16_ldsm4(r0, r1, r2, r3, addr, false);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
#endif
}
__device__ __forceinline__ void optiml_m16_ldsm4_t(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3,
                                                   unsigned addr) {
#if defined(OPTIML_M16_EMU)
    optiml_emu_m16_ldsm4(r0, r1, r2, r3, addr, true);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
#endif
}

// d += a * b, one m16n8k16 MMA, fp32 accumulation. Not volatile: the
// compiler may interleave it with the fragment loads.
__device__ __forceinline__ void optiml_m16_mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if defined(OPTIML_M16_EMU)
    optiml_emu_m16_mma(d, a, b);
#elif OPTIML_DTYPE == OPTIML_DTYPE_BF16
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// 16-bit <-> fp32 (round to nearest even; NaN stays NaN, overflow -> inf).
__device__ __forceinline__ float optiml_m16_from16(unsigned short u) {
#if defined(OPTIML_M16_EMU)
    return optiml_emu_m16_from16(u);
#elif OPTIML_DTYPE == OPTIML_DTYPE_BF16
    float r;  // exact: the bits move to the upper half
    asm("mov.b32 %0, {%2, %1};\n" : "=f"(r) : "h"(u), "h"((unsigned short)0));
    return r;
#else
    float r;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(r) : "h"(u));
    return r;
#endif
}
__device__ __forceinline__ unsigned short optiml_m16_to16(float x) {
#if defined(OPTIML_M16_EMU)
    return optiml_emu_m16_to16(x);
#elif OPTIML_DTYPE == OPTIML_DTYPE_BF16
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
    return r;
#else
    unsigned short r;
    asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
    return r;
#endif
}
// (lo, hi) -> one 32-bit word, lo in the low half (the lower address).
__device__ __forceinline__ unsigned optiml_m16_pack2(float lo, float hi) {
#if defined(OPTIML_M16_EMU)
    return (unsigned)optiml_emu_m16_to16(lo) | ((unsigned)optiml_emu_m16_to16(hi) << 16);
#elif OPTIML_DTYPE == OPTIML_DTYPE_BF16
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#endif
}
__device__ __forceinline__ void optiml_m16_unpack2(unsigned w, float& lo, float& hi) {
    lo = optiml_m16_from16((unsigned short)(w & 0xFFFFu));
    hi = optiml_m16_from16((unsigned short)(w >> 16));
}
// 32-bit global access to two 16-bit elements (4-byte aligned).
__device__ __forceinline__ unsigned optiml_m16_ld32(const unsigned short* p) {
#if defined(OPTIML_M16_EMU)
    unsigned v;
    optiml_emu_m16_galign(p, 4);
    __builtin_memcpy(&v, p, 4);
    return v;
#else
    return *reinterpret_cast<const unsigned*>(p);
#endif
}
__device__ __forceinline__ void optiml_m16_st32(unsigned short* p, unsigned v) {
#if defined(OPTIML_M16_EMU)
    optiml_emu_m16_galign(p, 4);
    __builtin_memcpy(p, &v, 4);
#else
    *reinterpret_cast<unsigned*>(p) = v;
#endif
}

__device__ __forceinline__ bool optiml_m16_aligned(const void* p, unsigned long long bytes) {
    return (reinterpret_cast<unsigned long long>(p) & (bytes - 1ull)) == 0ull;
}

// Copy mode of one operand of one batch item: 16 (16-byte cp.async), 4
// (4-byte cp.async) or 2 (16-bit loads through registers). ld = leading
// dimension = the contiguous extent of the stored matrix.
__device__ __forceinline__ int optiml_m16_mode(const unsigned short* X, int ld) {
    if ((ld & 7) == 0 && optiml_m16_aligned(X, 16)) return 16;
    if ((ld & 1) == 0 && optiml_m16_aligned(X, 4)) return 4;
    return 2;
}

// cur + step, or `limit` when that would reach / pass it (grid-stride loops
// that cannot overflow int for any size)
__device__ __forceinline__ int optiml_m16_next(int cur, int step, int limit) {
    return limit - cur > step ? cur + step : limit;
}

// ---------------------------------------------------------------- shared layout
// One stored operand tile in shared memory: ROWS rows of COLS 16-bit
// elements, unpadded; 16-byte chunk c of row r at chunk c ^ swz(r).
//   KC (K-contiguous): rows = TILE (m or n), cols = BK (k)
//   else:              rows = BK (k), cols = TILE (m or n)
template <bool KC, int TILE>
struct optiml_m16_geom {
    static constexpr int ROWS = KC ? TILE : optiml_m16_cfg::BK;
    static constexpr int COLS = KC ? optiml_m16_cfg::BK : TILE;
    static constexpr int ROWBYTES = 2 * COLS;
    static constexpr int CPR = COLS / 8;                 // 16-byte chunks per row
    static constexpr int RDIV = CPR >= 8 ? 1 : 8 / CPR;  // rows per 128-byte line
    static constexpr int RMOD = CPR >= 8 ? 8 : CPR;
    static_assert(CPR >= 2 && ((CPR & (CPR - 1)) == 0 || CPR % 8 == 0),
                  "a stored tile row must be 2, 4, 8 or a multiple of 8 16-byte chunks");
    static_assert(optiml_m16_cfg::THREADS % CPR == 0, "OPTIML_M16_THREADS must be a multiple of the chunks per row");
    __device__ __forceinline__ static int swz(int r) { return (r / RDIV) % RMOD; }
    // byte offset of chunk c of row r
    __device__ __forceinline__ static int chunk(int r, int c) { return r * ROWBYTES + ((c ^ swz(r)) << 4); }
};
using optiml_m16_ga = optiml_m16_geom<optiml_m16_cfg::KA, optiml_m16_cfg::BM>;
using optiml_m16_gb = optiml_m16_geom<optiml_m16_cfg::KB, optiml_m16_cfg::BN>;

// Copies one k-tile of one operand (TILE rows / columns of M / N from tile0,
// BK of K from kpos) from its stored layout into a shared stage (sdst).
// X: the operand of this batch item, ld its leading dimension, R = M or N.
// Elements outside the matrix are written as +0 and never read. MODE: 16,
// 4 or 2 (see optiml_m16_mode).
//
// Every mode uses the same thread mapping, by 16-byte chunks of the stored
// tile: thread tid owns chunk column c0 = tid % CPR of rows r0 = tid / CPR,
// + RSTEP, + 2 RSTEP, ... (RSTEP = THREADS / CPR). A chunk is one 16-byte
// cp.async (MODE 16), four 4-byte ones (MODE 4) or eight 16-bit loads and
// one st.shared.v4 (MODE 2; the lanes of a warp then read 2 of every 16
// bytes per instruction, the rest of the line from L1 for the next ones;
// interior tiles keep the loads of up to 4 chunks in flight). The swizzle
// has a period of 8 rows, so for RSTEP % 8 == 0 (CPR <= THREADS / 8) all
// chunks of a thread share one swizzle term and their shared offsets differ
// by compile-time constants (few registers, nothing for ptxas to hoist).
template <bool KC, int TILE>
struct optiml_m16_copy {
    using G = optiml_m16_geom<KC, TILE>;
    static constexpr int THREADS = optiml_m16_cfg::THREADS;
    static constexpr int CPR = G::CPR;
    static constexpr int RSTEP = THREADS / CPR;  // (THREADS % CPR == 0: see optiml_m16_geom)
    static constexpr int ITERS = (G::ROWS + RSTEP - 1) / RSTEP;
    static constexpr bool EXACT = G::ROWS % RSTEP == 0;  // every thread owns ITERS chunks
    static constexpr bool SAME_SWZ = RSTEP % 8 == 0;

    template <int MODE>
    __device__ __forceinline__ static void run(unsigned sdst, const unsigned short* __restrict__ X, int ld, int tile0,
                                               int R, int kpos, int K) {
        const unsigned tid = (unsigned)optiml_m16_opaque((int)threadIdx.x);
        const int r0 = (int)(tid / (unsigned)CPR), c0 = (int)(tid % (unsigned)CPR);
        const int row0 = KC ? tile0 : kpos;                // first stored row of the tile
        const int col0 = (KC ? kpos : tile0) + 8 * c0;     // first stored column of this thread's chunks
        const int rrem = (KC ? R : K) - row0 - r0;         // rows left from this thread's first row (may be <= 0)
        const int crem = (KC ? K : R) - col0;              // columns left from its chunk start (may be <= 0)
        const long long ldl = ld;
        // this thread's first chunk (only dereferenced where inside the matrix)
        const unsigned short* __restrict__ src = X + ((long long)row0 + r0) * ldl + col0;
        const unsigned dst0 = sdst + (unsigned)G::chunk(r0, c0);
        if constexpr (MODE == 2) {
            // Interior tiles (every chunk of this thread inside the matrix):
            // the 16-bit loads of up to 4 chunks in flight together, at
            // immediate offsets, then one 16-byte shared store per chunk.
            if ((EXACT || r0 + (ITERS - 1) * RSTEP < G::ROWS) && (ITERS - 1) * RSTEP < rrem && crem >= 8) {
                constexpr int NB = ITERS < 4 ? ITERS : 4;
#pragma unroll
                for (int i0 = 0; i0 < ITERS; i0 += NB) {
                    unsigned w[NB][4];
#pragma unroll
                    for (int q = 0; q < NB; ++q) {
                        const unsigned short* s = src + (long long)((i0 + q) * RSTEP) * ldl;
#pragma unroll
                        for (int e = 0; e < 8; e += 2)
                            w[q][e >> 1] = (unsigned)optiml_m16_ldg16(s + e) | ((unsigned)optiml_m16_ldg16(s + e + 1) << 16);
                    }
#pragma unroll
                    for (int q = 0; q < NB; ++q) {
                        const int dr = (i0 + q) * RSTEP;
                        const unsigned dst = SAME_SWZ ? dst0 + (unsigned)(dr * G::ROWBYTES) : sdst + (unsigned)G::chunk(r0 + dr, c0);
                        optiml_m16_sts128(dst, w[q][0], w[q][1], w[q][2], w[q][3]);
                    }
                }
                return;
            }
        }
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            const int dr = it * RSTEP;  // row offset from r0
            const bool mine = EXACT || r0 + dr < G::ROWS;
            const unsigned dst = SAME_SWZ ? dst0 + (unsigned)(dr * G::ROWBYTES) : sdst + (unsigned)G::chunk(r0 + dr, c0);
            const unsigned short* s = src + (long long)dr * ldl;
            const bool rok = dr < rrem;
            if constexpr (MODE == 16) {
                if (mine) optiml_m16_cp16(dst, s, rok && 0 < crem);
            } else if constexpr (MODE == 4) {
#pragma unroll
                for (int e = 0; e < 8; e += 2)
                    if (mine) optiml_m16_cp4(dst + 2u * (unsigned)e, s + e, rok && e < crem);
            } else if (mine) {
                // edge tiles: chunk by chunk, each element predicated (zero outside)
                unsigned w[4];
#pragma unroll
                for (int e = 0; e < 8; e += 2) {
                    const unsigned lo = rok && e < crem ? (unsigned)optiml_m16_ldg16(s + e) : 0u;
                    const unsigned hi = rok && e + 1 < crem ? (unsigned)optiml_m16_ldg16(s + e + 1) : 0u;
                    w[e >> 1] = lo | (hi << 16);
                }
                optiml_m16_sts128(dst, w[0], w[1], w[2], w[3]);
            }
        }
    }

    // FAST: MODE 16; else the run-time mode.
    template <bool FAST>
    __device__ __forceinline__ static void any(int mode, unsigned sdst, const unsigned short* __restrict__ X, int ld,
                                               int tile0, int R, int kpos, int K) {
        if constexpr (FAST) {
            (void)mode;
            run<16>(sdst, X, ld, tile0, R, kpos, K);
        } else {
            if (mode == 16) run<16>(sdst, X, ld, tile0, R, kpos, K);
            else if (mode == 4) run<4>(sdst, X, ld, tile0, R, kpos, K);
            else run<2>(sdst, X, ld, tile0, R, kpos, K);
        }
    }
};

// ---------------------------------------------------------------- fragments
// This thread's ldmatrix byte offsets inside a stage, for k16 step 0 and
// m16 tile / n8 pair 0.
//  A, K-contiguous ([m][k]): lane l addresses row 16i + l%8 (+8 for l/8 odd)
//    at k chunk 2s (+1 for l >= 16): registers a0..a3.
//  A, M-contiguous ([k][m], .trans): lane l addresses k row 16s + l%8 (+8
//    for l >= 16) at m chunk 2i (+1 for l/8 odd): registers a0..a3.
//  B, K-contiguous ([n][k]): lane l addresses row 16p + l%8 (+8 for l >= 16)
//    at k chunk 2s (+1 for l/8 odd): b[2p][0], b[2p][1], b[2p+1][0], b[2p+1][1].
//  B, N-contiguous ([k][n], .trans): lane l addresses k row 16s + l%8 (+8
//    for l/8 odd) at n chunk 2p (+1 for l >= 16): the same registers.
// Other steps / tiles: a whole number of 16 rows further (+16 rows keeps the
// swizzle term: its period is 8 rows) and the logical chunk XOR 2s (or 2i,
// 2p), which is the byte offset XOR 32s: chunk(r, c ^ 2x) = chunk(r, c) ^ 32x
// because c + 2x never carries (c's bit 1.. are 0 for x's range: k chunks
// 2s + h; m / n chunks (wm0/8) + 2i + h with wm0/8 a multiple of WM/8), the
// swizzle is an XOR and r * ROWBYTES has no bits below ROWBYTES.
struct optiml_m16_frag_off {
    int a, b;
};

__device__ __forceinline__ optiml_m16_frag_off optiml_m16_frag_offsets(int tid) {
    using C = optiml_m16_cfg;
    using GA = optiml_m16_ga;
    using GB = optiml_m16_gb;
    const int warp = tid >> 5, l = tid & 31;
    const int wm0 = (warp / C::WARPS_N) * C::WM;
    const int wn0 = (warp % C::WARPS_N) * C::WN;
    optiml_m16_frag_off o;
    if constexpr (C::KA) o.a = GA::chunk(wm0 + (l & 7) + 8 * ((l >> 3) & 1), l >> 4);
    else o.a = GA::chunk((l & 7) + 8 * (l >> 4), (wm0 >> 3) + ((l >> 3) & 1));
    if constexpr (C::KB) o.b = GB::chunk(wn0 + (l & 7) + 8 * (l >> 4), (l >> 3) & 1);
    else o.b = GB::chunk((l & 7) + 8 * ((l >> 3) & 1), (wn0 >> 3) + (l >> 4));
    return o;
}

// Fragments of m16 tile i of A / of the pair p of n8 tiles of B for k16
// step s (compile-time after unrolling) of the stage whose A / B tiles start
// at shared addresses sa / sb.
__device__ __forceinline__ void optiml_m16_load_a(unsigned (&a)[4], unsigned sa, int i, int s,
                                                  const optiml_m16_frag_off& o) {
    if constexpr (optiml_m16_cfg::KA)
        optiml_m16_ldsm4(a[0], a[1], a[2], a[3], sa + (unsigned)((o.a ^ (32 * s)) + 16 * i * optiml_m16_ga::ROWBYTES));
    else
        optiml_m16_ldsm4_t(a[0], a[1], a[2], a[3], sa + (unsigned)((o.a ^ (32 * i)) + 16 * s * optiml_m16_ga::ROWBYTES));
}
__device__ __forceinline__ void optiml_m16_load_b(unsigned (&b)[optiml_m16_cfg::NT][2], unsigned sb, int p, int s,
                                                  const optiml_m16_frag_off& o) {
    if constexpr (optiml_m16_cfg::KB)
        optiml_m16_ldsm4(b[2 * p][0], b[2 * p][1], b[2 * p + 1][0], b[2 * p + 1][1],
                         sb + (unsigned)((o.b ^ (32 * s)) + 16 * p * optiml_m16_gb::ROWBYTES));
    else
        optiml_m16_ldsm4_t(b[2 * p][0], b[2 * p][1], b[2 * p + 1][0], b[2 * p + 1][1],
                           sb + (unsigned)((o.b ^ (32 * p)) + 16 * s * optiml_m16_gb::ROWBYTES));
}
__device__ __forceinline__ void optiml_m16_load_frags(unsigned (&a)[optiml_m16_cfg::MT][4],
                                                      unsigned (&b)[optiml_m16_cfg::NT][2], unsigned sa, unsigned sb,
                                                      int s, const optiml_m16_frag_off& o) {
#pragma unroll
    for (int i = 0; i < optiml_m16_cfg::MT; ++i) optiml_m16_load_a(a[i], sa, i, s, o);
#pragma unroll
    for (int p = 0; p < optiml_m16_cfg::NT / 2; ++p) optiml_m16_load_b(b, sb, p, s, o);
}

// The MMAs of k16 step s (fragments a, b), with the fragments of the next
// step (k16 step ns of the stage at na / nb) loaded into the same arrays as
// soon as their current values are dead: a[i] after the MMAs of row i, the
// pair p of b after its last use in the last row. One fragment set instead
// of a double buffer (32 registers fewer), and still every load ahead of
// its use by the rest of the step: row i runs over j ascending when
// (i + s (MT-1)) is even, else descending, so the last row of step s and the
// first row of step s+1 run the same way, and the first b pair freed is the
// first one needed. (Consecutive MMAs share an operand.)
__device__ __forceinline__ void optiml_m16_step(float (&acc)[optiml_m16_cfg::MT][optiml_m16_cfg::NT][4],
                                                unsigned (&a)[optiml_m16_cfg::MT][4],
                                                unsigned (&b)[optiml_m16_cfg::NT][2], int s, unsigned na, unsigned nb,
                                                int ns, const optiml_m16_frag_off& o) {
    using C = optiml_m16_cfg;
#pragma unroll
    for (int i = 0; i < C::MT; ++i) {
        const bool asc = ((i + s * (C::MT - 1)) & 1) == 0;
#pragma unroll
        for (int jj = 0; jj < C::NT; ++jj) {
            const int j = asc ? jj : C::NT - 1 - jj;
            optiml_m16_mma(acc[i][j], a[i], b[j]);
            if (i == C::MT - 1 && (jj & 1) != 0) optiml_m16_load_b(b, nb, j >> 1, ns, o);
        }
        optiml_m16_load_a(a[i], na, i, ns, o);
    }
}

// The MMAs of one k16 step (fragments already loaded), serpentine order.
__device__ __forceinline__ void optiml_m16_mma_all(float (&acc)[optiml_m16_cfg::MT][optiml_m16_cfg::NT][4],
                                                   const unsigned (&a)[optiml_m16_cfg::MT][4],
                                                   const unsigned (&b)[optiml_m16_cfg::NT][2]) {
    using C = optiml_m16_cfg;
#pragma unroll
    for (int i = 0; i < C::MT; ++i)
#pragma unroll
        for (int jj = 0; jj < C::NT; ++jj) {
            const int j = (i & 1) ? C::NT - 1 - jj : jj;
            optiml_m16_mma(acc[i][j], a[i], b[j]);
        }
}

// ---------------------------------------------------------------- epilogue

// The epilogue of this thread's accumulators: acc[i][j][2h + e] is C row
// bm + wm0 + 16i + 8h, column bn + wn0 + 8j + e (wm0, wn0: this thread's
// origin, g and 2t included).
__device__ __forceinline__ float optiml_m16_epi1(float v, float alpha, float beta, float old, float bias) {
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

// FULL: the warp tile lies inside C and C allows 32-bit accesses. Row block
// by row block (16 rows of the warp tile): its C_old words (HAS_BETA) and
// bias values are loaded together, with no bounds tests or branches, so they
// are in flight at once, then its results are stored (the stores keep the
// next block's loads behind them: 16 + 8 live values, not 128).
__device__ __forceinline__ void optiml_m16_epi_full(float (&acc)[optiml_m16_cfg::MT][optiml_m16_cfg::NT][4],
                                                    unsigned short* __restrict__ ctile,
                                                    const float* __restrict__ bias, int N, int bn, float alpha,
                                                    float beta, int wm0, int wn0) {
    using Cf = optiml_m16_cfg;
    (void)bias; (void)bn;
#pragma unroll
    for (int i = 0; i < Cf::MT; ++i) {
        unsigned short* __restrict__ r0 = ctile + (long long)(wm0 + 16 * i) * N + wn0;
        unsigned short* __restrict__ r1 = r0 + 8LL * N;
        unsigned old[2][Cf::NT];
        float bv[Cf::NT][2];
#pragma unroll
        for (int j = 0; j < Cf::NT; ++j) {
#if OPTIML_HAS_BETA
            old[0][j] = optiml_m16_ld32(r0 + 8 * j);
            old[1][j] = optiml_m16_ld32(r1 + 8 * j);
#else
            old[0][j] = old[1][j] = 0u;
#endif
#if OPTIML_HAS_BIAS
            bv[j][0] = bias[(long long)bn + wn0 + 8 * j];
            bv[j][1] = bias[(long long)bn + wn0 + 8 * j + 1];
#else
            bv[j][0] = bv[j][1] = 0.f;
#endif
        }
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int j = 0; j < Cf::NT; ++j) {
                float o0, o1;
                optiml_m16_unpack2(old[h][j], o0, o1);
                const float v0 = optiml_m16_epi1(acc[i][j][2 * h], alpha, beta, o0, bv[j][0]);
                const float v1 = optiml_m16_epi1(acc[i][j][2 * h + 1], alpha, beta, o1, bv[j][1]);
                optiml_m16_st32((h ? r1 : r0) + 8 * j, optiml_m16_pack2(v0, v1));
            }
    }
}

// Edge tiles (or C without 32-bit access): every row and column tested. With
// HAS_BETA a first pass reads C_old (loads only) and folds alpha / beta into
// the accumulators; the second adds bias, activates, rounds and stores.
__device__ __forceinline__ void optiml_m16_epi_edge(float (&acc)[optiml_m16_cfg::MT][optiml_m16_cfg::NT][4],
                                                    unsigned short* __restrict__ ctile,
                                                    const float* __restrict__ bias, int N, int bn, int mrem,
                                                    int nrem, float alpha, float beta, int wm0, int wn0, bool vecC) {
    using Cf = optiml_m16_cfg;
    (void)alpha; (void)beta; (void)bias; (void)bn;
#if OPTIML_HAS_BETA
#pragma unroll
    for (int i = 0; i < Cf::MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int lm = wm0 + 16 * i + 8 * h;
            if (lm >= mrem) continue;
            const unsigned short* __restrict__ crow = ctile + (long long)lm * N;
#pragma unroll
            for (int j = 0; j < Cf::NT; ++j) {
                const int ln = wn0 + 8 * j;
                float o0 = 0.f, o1 = 0.f;
                if (vecC) {
                    if (ln < nrem) optiml_m16_unpack2(optiml_m16_ld32(crow + ln), o0, o1);
                } else {
                    if (ln < nrem) o0 = optiml_m16_from16(crow[ln]);
                    if (ln + 1 < nrem) o1 = optiml_m16_from16(crow[ln + 1]);
                }
                float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
#if OPTIML_HAS_ALPHA
                v0 *= alpha;
                v1 *= alpha;
#endif
                acc[i][j][2 * h] = fmaf(beta, o0, v0);
                acc[i][j][2 * h + 1] = fmaf(beta, o1, v1);
            }
        }
#endif
#pragma unroll
    for (int j = 0; j < Cf::NT; ++j) {
        const int ln = wn0 + 8 * j;
        float b0 = 0.f, b1 = 0.f;
#if OPTIML_HAS_BIAS
        if (ln < nrem) b0 = bias[(long long)bn + ln];
        if (ln + 1 < nrem) b1 = bias[(long long)bn + ln + 1];
#endif
#pragma unroll
        for (int i = 0; i < Cf::MT; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int lm = wm0 + 16 * i + 8 * h;
                if (lm >= mrem) continue;
                unsigned short* __restrict__ crow = ctile + (long long)lm * N;
                float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
#if OPTIML_HAS_ALPHA && !OPTIML_HAS_BETA
                v0 *= alpha;
                v1 *= alpha;
#endif
#if OPTIML_HAS_BIAS
                v0 += b0;
                v1 += b1;
#endif
                v0 = optiml_act_fast(v0);
                v1 = optiml_act_fast(v1);
                if (vecC) {
                    if (ln < nrem) optiml_m16_st32(crow + ln, optiml_m16_pack2(v0, v1));
                } else {
                    if (ln < nrem) crow[ln] = optiml_m16_to16(v0);
                    if (ln + 1 < nrem) crow[ln + 1] = optiml_m16_to16(v1);
                }
            }
        (void)b0; (void)b1;
    }
}

// Writes the accumulators of this thread. mrem = M - bm,
// nrem = N - bn (>= 1).
__device__ __forceinline__ void optiml_m16_store(float (&acc)[optiml_m16_cfg::MT][optiml_m16_cfg::NT][4],
                                                 unsigned short* __restrict__ C, const float* __restrict__ bias,
                                                 int N, int bm, int bn, int mrem, int nrem, float alpha, float beta) {
    using Cf = optiml_m16_cfg;
    const int tid = optiml_m16_opaque((int)threadIdx.x);
    const int warp = tid >> 5, lane = tid & 31;
    const int wm = (warp / Cf::WARPS_N) * Cf::WM, wn = (warp % Cf::WARPS_N) * Cf::WN;  // warp tile origin
    const int wm0 = wm + (lane >> 2);       // + 16 i + 8 h
    const int wn0 = wn + 2 * (lane & 3);    // + 8 j + e
    // C[z] of this item is 4-byte aligned and N even: every (row, even column)
    // pair is one aligned 32-bit word, and nrem is even.
    const bool vecC = ((N & 1) == 0) && optiml_m16_aligned(C, 4);
    unsigned short* __restrict__ ctile = C + (long long)bm * N + bn;
    if (vecC && wm + Cf::WM <= mrem && wn + Cf::WN <= nrem)  // warp-uniform
        optiml_m16_epi_full(acc, ctile, bias, N, bn, alpha, beta, wm0, wn0);
    else
        optiml_m16_epi_edge(acc, ctile, bias, N, bn, mrem, nrem, alpha, beta, wm0, wn0, vecC);
}

// ---------------------------------------------------------------- one tile
// The C tile at (bm, bn) of one batch item (A, B, C already point at it).
// FAST: both operands with 16-byte cp.async (modeA / modeB unused); else
// the run-time modes. smem: shared address of the A ring (the B ring follows).
template <bool FAST>
__device__ __forceinline__ void optiml_m16_tile(const unsigned short* __restrict__ A,
                                                const unsigned short* __restrict__ B, unsigned short* __restrict__ C,
                                                const float* __restrict__ bias, int M, int N, int K, float alpha,
                                                float beta, int bm, int bn, int modeA, int modeB, unsigned smem) {
    using Cf = optiml_m16_cfg;
    using CA = optiml_m16_copy<Cf::KA, Cf::BM>;
    using CB = optiml_m16_copy<Cf::KB, Cf::BN>;
    constexpr int MT = Cf::MT, NT = Cf::NT, BK = Cf::BK, STAGES = Cf::STAGES, KSTEPS = Cf::KSTEPS;
    const int lda = OPTIML_TRANS_A ? M : K;
    const int ldb = OPTIML_TRANS_B ? K : N;
    const unsigned sA = smem, sB = smem + (unsigned)Cf::B_BASE;

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;

    const int ktiles = K / BK + ((K % BK) != 0);
    if constexpr (FAST) {
      if (ktiles > 0) {  // block-uniform
        // Prologue: tiles 0 .. STAGES-1 in flight, one commit group per tile
        // (tiles past the end: all chunks zero-filled, nothing read).
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            const int kpos = s < ktiles ? s * BK : K;
            CA::template any<FAST>(modeA, sA + (unsigned)(s * Cf::A_STAGE), A, lda, bm, M, kpos, K);
            CB::template any<FAST>(modeB, sB + (unsigned)(s * Cf::B_STAGE), B, ldb, bn, N, kpos, K);
            optiml_m16_cp_commit();
        }
        const optiml_m16_frag_off fo = optiml_m16_frag_offsets(optiml_m16_opaque((int)threadIdx.x));
        unsigned fa[MT][4], fb[NT][2];
        optiml_m16_cp_wait<STAGES - 1>();  // tile 0 landed (this thread's part)
        __syncthreads();                   // ... everyone's
        optiml_m16_load_frags(fa, fb, sA, sB, 0, fo);
        int rd = 0;  // stage holding tile t
        for (int t = 0; t < ktiles; ++t) {
            const int nx = rd + 1 == STAGES ? 0 : rd + 1;
            const unsigned ca = sA + (unsigned)(rd * Cf::A_STAGE);
            const unsigned cb = sB + (unsigned)(rd * Cf::B_STAGE);
#pragma unroll
            for (int s = 0; s < KSTEPS; ++s) {
                if (s + 1 < KSTEPS) {
                    optiml_m16_step(acc, fa, fb, s, ca, cb, s + 1, fo);
                } else {
                    // Committed: tiles 0 .. t+STAGES-1. Wait for tile t+1; the
                    // barrier publishes it and guarantees every warp holds the
                    // last fragments of tile t in registers, so tile t's stage
                    // (rd) is refilled with tile t+STAGES. The MMAs of the last
                    // step then load tile t+1's first fragments (after the last
                    // tile: unused).
                    optiml_m16_cp_wait<STAGES - 2>();
                    __syncthreads();
                    const int tn = t + STAGES;
                    const int kpos = tn < ktiles ? tn * BK : K;
                    CA::template any<FAST>(modeA, ca, A, lda, bm, M, kpos, K);
                    CB::template any<FAST>(modeB, cb, B, ldb, bn, N, kpos, K);
                    optiml_m16_cp_commit();
                    optiml_m16_step(acc, fa, fb, s, sA + (unsigned)(nx * Cf::A_STAGE),
                                    sB + (unsigned)(nx * Cf::B_STAGE), 0, fo);
                }
            }
            rd = nx;
        }
        // Only zero-fill groups can be pending; the barrier keeps the next
        // tile's prologue from overwriting a stage another warp still reads.
        optiml_m16_cp_wait<0>();
        __syncthreads();
      }
    } else {
      if (ktiles > 0) {  // block-uniform
        // Generic copies (some operand not 16-byte copyable): the simpler
        // loop of matmul_tf32.cu's OPTIML_KLOOP 0, which keeps fewer
        // registers live where the copies run (the 16-bit path holds its
        // loads in registers): STAGES-1 tiles in flight; at the top of tile
        // t, wait for it, barrier (every warp is done with tile t-1), refill
        // tile t-1's stage with tile t+STAGES-1, then the k16 steps of tile
        // t, each loading its own fragments.
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            const int kpos = s < ktiles ? s * BK : K;
            CA::template any<FAST>(modeA, sA + (unsigned)(s * Cf::A_STAGE), A, lda, bm, M, kpos, K);
            CB::template any<FAST>(modeB, sB + (unsigned)(s * Cf::B_STAGE), B, ldb, bn, N, kpos, K);
            optiml_m16_cp_commit();
        }
        const optiml_m16_frag_off fo = optiml_m16_frag_offsets(optiml_m16_opaque((int)threadIdx.x));
        int rd = 0;           // stage holding tile t
        int wr = STAGES - 1;  // stage receiving tile t + STAGES - 1
        for (int t = 0; t < ktiles; ++t) {
            optiml_m16_cp_wait<STAGES - 2>();  // committed: tiles 0 .. t+STAGES-2
            __syncthreads();
            const int tn = t + STAGES - 1;
            const int kpos = tn < ktiles ? tn * BK : K;
            CA::template any<FAST>(modeA, sA + (unsigned)(wr * Cf::A_STAGE), A, lda, bm, M, kpos, K);
            CB::template any<FAST>(modeB, sB + (unsigned)(wr * Cf::B_STAGE), B, ldb, bn, N, kpos, K);
            optiml_m16_cp_commit();
            const unsigned ca = sA + (unsigned)(rd * Cf::A_STAGE);
            const unsigned cb = sB + (unsigned)(rd * Cf::B_STAGE);
#pragma unroll
            for (int s = 0; s < KSTEPS; ++s) {
                unsigned fa[MT][4], fb[NT][2];
                optiml_m16_load_frags(fa, fb, ca, cb, s, fo);
                optiml_m16_mma_all(acc, fa, fb);
            }
            rd = rd + 1 == STAGES ? 0 : rd + 1;
            wr = wr + 1 == STAGES ? 0 : wr + 1;
        }
        optiml_m16_cp_wait<0>();
        __syncthreads();
      }
    }
    optiml_m16_store(acc, C, bias, N, bm, bn, M - bm, N - bn, alpha, beta);
}

// Every tile of one batch item that this block owns: rows by, by + gy, ...,
// columns bx, bx + gx, ... (all loop bounds block-uniform).
template <bool FAST>
__device__ __forceinline__ void optiml_m16_tiles(const unsigned short* __restrict__ A,
                                                 const unsigned short* __restrict__ B, unsigned short* __restrict__ C,
                                                 const float* __restrict__ bias, int M, int N, int K, float alpha,
                                                 float beta, int bx, int by, int modeA, int modeB, unsigned smem) {
    using Cf = optiml_m16_cfg;
    const int tiles_m = M / Cf::BM + ((M % Cf::BM) != 0);
    const int tiles_n = N / Cf::BN + ((N % Cf::BN) != 0);
    for (int mt = by; mt < tiles_m; mt = optiml_m16_next(mt, (int)gridDim.y, tiles_m))
        for (int nt = bx; nt < tiles_n; nt = optiml_m16_next(nt, (int)gridDim.x, tiles_n))
            optiml_m16_tile<FAST>(A, B, C, bias, M, N, K, alpha, beta, mt * Cf::BM, nt * Cf::BN, modeA, modeB, smem);
}

// ---------------------------------------------------------------- kernel
extern "C" __global__ void __launch_bounds__(OPTIML_M16_THREADS, OPTIML_M16_MIN_BLOCKS)
OPTIML_MMA16_ENTRY(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                   unsigned short* __restrict__ C, const float* __restrict__ bias, int batch, int M, int N, int K,
                   long long strideA, long long strideB, long long strideC, float alpha, float beta) {
#if defined(OPTIML_M16_EMU)
    const unsigned smem = optiml_emu_m16_smem_base();
#else
    extern __shared__ __align__(128) unsigned char optiml_m16_dsmem[];
    const unsigned smem = optiml_m16_smem_addr(optiml_m16_dsmem);
#endif
    // Block raster: groups of GROUP_M rows of the launched grid, walked
    // column by column (a bijection of the grid, so any grid stays correct;
    // skipped for grids too wide for 32-bit index math).
    int bx = (int)blockIdx.x, by = (int)blockIdx.y;
#if OPTIML_M16_GROUP_M > 1
    {
        constexpr int G = OPTIML_M16_GROUP_M;
        const int gx = (int)gridDim.x, gy = (int)gridDim.y;
        if (gx <= 0x7FFFFFFF / G) {
            const int first = by - by % G;
            const int rows = gy - first < G ? gy - first : G;
            const int local = (by - first) * gx + bx;
            bx = local / rows;
            by = first + local % rows;
        }
    }
#endif
    for (int z = (int)blockIdx.z; z < batch; z = optiml_m16_next(z, (int)gridDim.z, batch)) {
        const unsigned short* __restrict__ Az = A + (long long)z * strideA;
        const unsigned short* __restrict__ Bz = B + (long long)z * strideB;
        unsigned short* __restrict__ Cz = C + (long long)z * strideC;
        const int modeA = optiml_m16_mode(Az, OPTIML_TRANS_A ? M : K);
        const int modeB = optiml_m16_mode(Bz, OPTIML_TRANS_B ? K : N);
        if (modeA == 16 && modeB == 16)
            optiml_m16_tiles<true>(Az, Bz, Cz, bias, M, N, K, alpha, beta, bx, by, 16, 16, smem);
        else
            optiml_m16_tiles<false>(Az, Bz, Cz, bias, M, N, K, alpha, beta, bx, by, modeA, modeB, smem);
    }
}
