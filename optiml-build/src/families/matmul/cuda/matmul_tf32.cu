// optiml: batched GEMM template, fp32 in memory, TF32 tensor cores
// (mma.sync m16n8k8, sm_80+; also the legacy tensor-core path on sm_90).
//
// Compiled by NVRTC at build time; specialised ONLY through preprocessor
// macros defined before this text. The optiml/ headers (defaults.cuh, epilogue.cuh: in memory for NVRTC, -I optiml-build/src/cuda for nvcc), no standard library, inline
// PTX for everything the CUDA headers would provide. Every function is
// annotated so the file also compiles with nvcc (bench/harness/tf32_harness.cu
// includes it) and with or without NVRTC's -default-device.
//
// Entry point (same ABI as matmul_f32.cu):
//   extern "C" __global__ void optiml_matmul(A, B, C, bias, batch, M, N, K,
//                                            strideA, strideB, strideC,
//                                            alpha, beta)
//   grid  = (ceil(N / OPTIML_BN), ceil(M / OPTIML_BM), min(batch, 65535))
//   block = OPTIML_THREADS (1-D) = (BM / WM) * (BN / WN) * 32
//   dynamic shared memory = OPTIML_DYN_SMEM_BYTES (see below)
//   Blocks loop over batch items z = blockIdx.z, z + gridDim.z, ...
//
// C[z] (M x N, ldc = N) = epilogue(op(A[z]) * op(B[z]))
//   OPTIML_TRANS_A 0: A is M x K (lda = K); 1: A stored K x M (lda = M)
//   OPTIML_TRANS_B 0: B is K x N (ldb = N); 1: B stored N x K (ldb = K)
//   X[z] = X + z * strideX (stride 0 = broadcast that operand)
// Epilogue per element: v = acc; v *= alpha (HAS_ALPHA); v += beta * C_old
// (HAS_BETA; otherwise C is never read); v += bias[n] (HAS_BIAS); v = act(v)
// (= optiml_act_fast(v): OPTIML_ACT, the tensor-core forms of optiml/epilogue.cuh).
// Pointers need only 4-byte alignment; 16-byte paths are chosen at run time.
// K = 0 gives C = epilogue(0).
//
// Numerics: every A and B element is rounded to TF32 as it leaves shared
// memory (OPTIML_TF32_ROUND 1, the default: cvt.rna, 10-bit mantissa, ties
// away from zero; 2: cvt.rn, ties to even, one instruction on sm_90); products
// are accumulated in fp32 by the tensor cores. Expect ||C - C_exact|| /
// ||C_exact|| around 3e-4 for random data (the TESTPLAN's tf32 tolerance is 1e-3).
//
// Shared memory (bytes; the Rust launcher computes the same expression):
//   OPTIML_SMEM_BYTES = 4 * STAGES * (A_STAGE + B_STAGE)
//     A_STAGE = TRANS_A ? BK * (BM + PMN) : BM * (BK + 4)
//     B_STAGE = TRANS_B ? BN * (BK + 4) : BK * (BN + PMN)
//     PMN = OPTIML_MN_PAD = 8 (OPTIML_FRAG_LOAD 1, the default) or 4 (FRAG_LOAD 0)
//   <= 48 KiB: static shared memory, launch with 0 dynamic bytes.
//   >  48 KiB: dynamic; launch with OPTIML_DYN_SMEM_BYTES = OPTIML_SMEM_BYTES
//      after raising CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to it
//      (227 KiB per block at most on sm_90, 163 KiB on sm_80).
//   Default 128x128x32, 3 stages, no transposes: 107520 B (2 blocks per SM).
//
// Design:
//  * block tile BM x BN, k-tile BK; warps in a (BM/WM) x (BN/WN) grid, each
//    owning a WM x WN warp tile = (WM/16)*(WN/8) m16n8k8 MMAs per 8 of K,
//    accumulators in registers (WM*WN/32 floats per thread).
//  * STAGES-deep cp.async ring: stage t % STAGES holds k-tile t; tiles
//    t+1 .. t+STAGES-1 are in flight while tile t is multiplied, one
//    __syncthreads per k-tile (it both publishes the next tile and retires
//    the stage that is refilled next). Every operand is copied in its stored
//    layout (16-byte chunks along the contiguous dimension), so no transposes
//    and no staging registers: K-contiguous operands as [tile][BK + 4],
//    M/N-contiguous ones as [BK][tile + PMN].
//  * OPTIML_KLOOP 1 (default): the barrier sits before the last k8 step of
//    tile t (whose fragments are then already in registers, so tile t's
//    stage is free): wait for tile t+1, barrier, refill tile t's stage with
//    tile t+STAGES, load tile t+1's first fragments, then the last MMAs of
//    tile t (no fragment-load bubble at tile boundaries). The prologue
//    issues STAGES tiles. The loop body is branch-free (one basic block for
//    ptxas): past the last tile the refills are all out of range in k, i.e.
//    zero-filled, and the prefetched fragments unused.
//    0: the barrier at the top of each tile (the original loop; STAGES-1
//    tiles in flight, the stage of tile t-1 refilled after the barrier).
//
//  Fragments, OPTIML_FRAG_LOAD 1 (default). Per k8 step a thread uses k and
//  k+4 (tig, tig+4: the PTX order). Each operand is read in the form that
//  lands its fragment registers in place, so the MMA needs no register moves:
//  * "P" feeds the MMA's A slot (16 rows per tile, a register quad), "Q" its
//    B slot (8 columns per tile, a register pair). P = A and Q = B, except
//    for TRANS_A = TRANS_B = 0, where P = B^T, Q = A^T (the warp computes
//    C^T, the epilogue stores it transposed): an M/N-contiguous operand is
//    cheap as P and dear as Q, a K-contiguous one cheap as either.
//  * K-contiguous operand: ldmatrix.x4 (b16 8x8 matrices = 8 rows x 4 fp32
//    of K); lane l of the warp receives row l/4, word l%4 of each matrix,
//    which is the m16n8k8 TF32 fragment layout. As P, one ldmatrix per m16
//    tile (matrices: rows 0-7 / 8-15 x k 0-3 / 4-7). As Q, one per pair of n8
//    tiles; the row addresses are free, so for P = A the pair's columns are
//    interleaved (tile 2p+h, column c -> 16p + 4(c/2) + 2(h ^ c/4) + c%2)
//    and each thread ends up owning 4 consecutive columns of C: float4
//    stores. Row stride BK+4 = 4 (mod 8) floats, so 8 rows whose indices
//    differ mod 8 hit 8 different 16-byte bank groups (true for 8
//    consecutive rows and for the interleaved ones: hence the h ^ c/4).
//  * M/N-contiguous operand as P: rows 2g, 2g+1 of each m16 tile hold the
//    MMA rows g, g+8, so one 64-bit LDS per k row (k = tig and tig+4) gives
//    the (a0, a1) and (a2, a3) pairs. Row stride tile + 8 = 8 (mod 16) floats:
//    a half-warp's 8-byte reads cover all 32 banks. As Q (TRANS_A=1,
//    TRANS_B=0 only) two 32-bit LDS per n8 tile (conflict-free likewise).
//  * Epilogue: float4 stores (P = A, Q = B K-contiguous), else float2.
//
//  Fragments, OPTIML_FRAG_LOAD 0 (the original scheme; all pads 4): 64-bit
//  LDS in every layout; within each k8 step a thread takes k = 2*tig,
//  2*tig+1, and within each 16 rows of M (and 16 columns of N, spanning two
//  n8 MMAs) the adjacent pair 2*g, 2*g+1: both halves of a fragment are one
//  8-byte word in either storage order, and the row stride of every smem
//  array is 4 (mod 8) floats. K-contiguous operands then need register moves
//  to assemble the MMA's register quad / pair (see TF32_NOTES.md).
//
//  * Edges: chunks outside the matrix are zero-filled in shared memory
//    (both operands, so nothing but zeros meets the padding); C stores are
//    predicated per row and column. Two specialisations chosen per batch
//    item at run time: 16-byte cp.async when every row of both operands is
//    16-byte aligned (ld % 4 == 0, stride % 4 == 0, 16-byte base), else
//    4-byte cp.async with a predicate per element. Global offsets are
//    64-bit, so no separate wide path.
//
// Macros (all optional; the defaults are the H200 starting point):
//   OPTIML_BM, OPTIML_BN   block tile (multiples of WM / WN)
//   OPTIML_BK              k-tile (multiple of 8)
//   OPTIML_WM, OPTIML_WN   warp tile (multiples of 16)
//   OPTIML_STAGES          cp.async pipeline depth, 2..4
//   OPTIML_THREADS         must equal (BM/WM)*(BN/WN)*32 (defaulted to it)
//   OPTIML_MIN_BLOCKS      __launch_bounds__ min blocks per SM (default 1:
//                          register cap 255 for 128 and 256 threads)
//   OPTIML_GROUP_M         block rasterization as in matmul_f32.cu (default 1)
//   OPTIML_TF32_ROUND      1 (default): cvt.rna.tf32 on every fragment
//                          element (2 instructions on sm_80/sm_90);
//                          2: cvt.rn.tf32 (ties to even; one F2FP on sm_90,
//                          cvt.rna on sm_80, which has no cvt.rn.tf32);
//                          0: hand raw fp32 bits to the MMA (the tensor core
//                          then uses the top 19 bits: truncation). Fewer
//                          instructions; numerically worse; experimental.
//   OPTIML_FRAG_PIPE       1 (default): fragments of k-step s+1 loaded
//                          before the MMAs of step s; 0: one fragment set
//                          (and the OPTIML_KLOOP 0 loop).
//   OPTIML_FRAG_LOAD       1 (default): ldmatrix / in-place fragments, see
//                          above; 0: the original 64-bit LDS scheme.
//   OPTIML_KLOOP           1 (default): barrier before the last k8 step,
//                          next tile's first fragments prefetched; 0: the
//                          original loop. 1 needs OPTIML_FRAG_PIPE 1.
//   OPTIML_ZFILL           1 (default): out-of-range chunks zero-filled by
//                          cp.async itself (src-size 0); 0: predicated
//                          cp.async + predicated zero store (the original).
//   The original kernel: OPTIML_FRAG_LOAD=0 OPTIML_KLOOP=0 OPTIML_ZFILL=0.
//   OPTIML_TRANS_A/B, OPTIML_HAS_ALPHA/BETA/BIAS, OPTIML_ACT: as above.

#ifndef OPTIML_BM
#define OPTIML_BM 128
#endif
#ifndef OPTIML_BN
#define OPTIML_BN 128
#endif
#ifndef OPTIML_BK
#define OPTIML_BK 32
#endif
#ifndef OPTIML_WM
#define OPTIML_WM 64
#endif
#ifndef OPTIML_WN
#define OPTIML_WN 64
#endif
#ifndef OPTIML_STAGES
#define OPTIML_STAGES 3
#endif
#ifndef OPTIML_THREADS
#define OPTIML_THREADS ((OPTIML_BM / OPTIML_WM) * (OPTIML_BN / OPTIML_WN) * 32)
#endif
#ifndef OPTIML_MIN_BLOCKS
#define OPTIML_MIN_BLOCKS 1
#endif
#ifndef OPTIML_GROUP_M
#define OPTIML_GROUP_M 1
#endif
#ifndef OPTIML_TF32_ROUND
#define OPTIML_TF32_ROUND 1
#endif
#ifndef OPTIML_FRAG_PIPE
#define OPTIML_FRAG_PIPE 1
#endif
#ifndef OPTIML_FRAG_LOAD
#define OPTIML_FRAG_LOAD 1
#endif
#ifndef OPTIML_KLOOP
#define OPTIML_KLOOP 1
#endif
#ifndef OPTIML_ZFILL
#define OPTIML_ZFILL 1
#endif
#include "optiml/defaults.cuh"  // OPTIML_DTYPE, OPTIML_TRANS_A/B, OPTIML_HAS_ALPHA/BETA/BIAS
#include "optiml/epilogue.cuh"  // OPTIML_ACT and the activations

// Byte counts usable by a host program that includes this file (and mirrored
// by the Rust launcher): see the header comment.
#define OPTIML_MN_PAD (OPTIML_FRAG_LOAD ? 8 : 4)
#define OPTIML_A_STAGE_FLOATS \
    (OPTIML_TRANS_A ? OPTIML_BK * (OPTIML_BM + OPTIML_MN_PAD) : OPTIML_BM * (OPTIML_BK + 4))
#define OPTIML_B_STAGE_FLOATS \
    (OPTIML_TRANS_B ? OPTIML_BN * (OPTIML_BK + 4) : OPTIML_BK * (OPTIML_BN + OPTIML_MN_PAD))
#define OPTIML_SMEM_BYTES (4 * OPTIML_STAGES * (OPTIML_A_STAGE_FLOATS + OPTIML_B_STAGE_FLOATS))
#define OPTIML_DYN_SMEM_BYTES (OPTIML_SMEM_BYTES > 49152 ? OPTIML_SMEM_BYTES : 0)

#if (OPTIML_TRANS_A != 0 && OPTIML_TRANS_A != 1) || (OPTIML_TRANS_B != 0 && OPTIML_TRANS_B != 1)
#error "OPTIML_TRANS_A / OPTIML_TRANS_B must be 0 or 1"
#endif
#if (OPTIML_TF32_ROUND < 0) || (OPTIML_TF32_ROUND > 2)
#error "OPTIML_TF32_ROUND must be 0 (none), 1 (cvt.rna) or 2 (cvt.rn)"
#endif
#if (OPTIML_FRAG_LOAD != 0 && OPTIML_FRAG_LOAD != 1) || (OPTIML_KLOOP != 0 && OPTIML_KLOOP != 1)
#error "OPTIML_FRAG_LOAD / OPTIML_KLOOP must be 0 or 1"
#endif
#if OPTIML_KLOOP && !OPTIML_FRAG_PIPE
#error "OPTIML_KLOOP 1 needs OPTIML_FRAG_PIPE 1 (use OPTIML_KLOOP 0 with OPTIML_FRAG_PIPE 0)"
#endif
#if OPTIML_THREADS != ((OPTIML_BM / OPTIML_WM) * (OPTIML_BN / OPTIML_WN) * 32)
#error "OPTIML_THREADS must equal (OPTIML_BM / OPTIML_WM) * (OPTIML_BN / OPTIML_WN) * 32"
#endif
#if (OPTIML_STAGES < 2) || (OPTIML_STAGES > 4)
#error "OPTIML_STAGES must be 2, 3 or 4"
#endif
// mma.sync with .tf32 and cp.async exist from sm_80 on (the host pass of
// nvcc has no __CUDA_ARCH__ and is let through).
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 800)
#error "matmul_tf32.cu needs sm_80 or newer (mma.sync .tf32, cp.async)"
#endif

namespace optiml_tf32 {

struct Cfg {
    static constexpr int BM = OPTIML_BM;
    static constexpr int BN = OPTIML_BN;
    static constexpr int BK = OPTIML_BK;
    static constexpr int WM = OPTIML_WM;
    static constexpr int WN = OPTIML_WN;
    static constexpr int STAGES = OPTIML_STAGES;
    static constexpr int THREADS = OPTIML_THREADS;
    static constexpr int WARPS_N = BN / WN;
    static constexpr int KSTEPS = BK / 8;
    static constexpr bool KA = OPTIML_TRANS_A == 0;  // A stored K-contiguous
    static constexpr bool KB = OPTIML_TRANS_B != 0;  // B stored K-contiguous
    static constexpr bool V2 = OPTIML_FRAG_LOAD != 0;
    static constexpr int PADK = 4;                // K-contiguous rows: BK + 4 = 4 (mod 8)
    static constexpr int PADMN = OPTIML_MN_PAD;   // M/N-contiguous rows: 8 (mod 16) or, legacy, 4 (mod 8)
    static constexpr int LDA = KA ? BK + PADK : BM + PADMN;
    static constexpr int LDB = KB ? BK + PADK : BN + PADMN;
    static constexpr int A_STAGE = OPTIML_A_STAGE_FLOATS;
    static constexpr int B_STAGE = OPTIML_B_STAGE_FLOATS;
    static constexpr int SMEM_FLOATS = STAGES * (A_STAGE + B_STAGE);
    // MMA roles (see the header): P feeds the A slot, Q the B slot.
    static constexpr bool SWAP = V2 && KA && !KB;
    static constexpr bool P_KC = SWAP ? KB : KA;  // P stored K-contiguous
    static constexpr bool Q_KC = SWAP ? KA : KB;
    static constexpr int LDP = SWAP ? LDB : LDA;
    static constexpr int LDQ = SWAP ? LDA : LDB;
    static constexpr int P_BASE = SWAP ? STAGES * A_STAGE : 0;  // floats from the smem start
    static constexpr int Q_BASE = SWAP ? 0 : STAGES * A_STAGE;
    static constexpr int P_STAGE = SWAP ? B_STAGE : A_STAGE;
    static constexpr int Q_STAGE = SWAP ? A_STAGE : B_STAGE;
    static constexpr int WP = SWAP ? WN : WM;     // warp tile along P / Q
    static constexpr int WQ = SWAP ? WM : WN;
    static constexpr int MT = WP / 16;   // m16 MMA tiles per warp
    static constexpr int NT = WQ / 8;    // n8 MMA tiles per warp
    // Q K-contiguous and P = A: interleaved columns, float4 epilogue.
    static constexpr bool Q_PERM = V2 && Q_KC && !SWAP;
};

static_assert(Cfg::WM % 16 == 0 && Cfg::WN % 16 == 0, "OPTIML_WM and OPTIML_WN must be multiples of 16");
static_assert(Cfg::BM % Cfg::WM == 0 && Cfg::BN % Cfg::WN == 0, "BM % WM and BN % WN must be 0");
static_assert(Cfg::BK % 8 == 0 && Cfg::BK > 0, "OPTIML_BK must be a positive multiple of 8");
static_assert(Cfg::THREADS <= 1024, "OPTIML_THREADS must be <= 1024");
static_assert(Cfg::MT * Cfg::NT * 4 <= 128, "warp tile larger than 64x64 (128 accumulators) would spill");
static_assert(Cfg::NT % 2 == 0, "n8 tiles come in pairs");
static_assert((Cfg::KA ? Cfg::LDA % 8 == 4 : (Cfg::V2 ? Cfg::LDA % 16 == 8 : Cfg::LDA % 8 == 4)) &&
                  (Cfg::KB ? Cfg::LDB % 8 == 4 : (Cfg::V2 ? Cfg::LDB % 16 == 8 : Cfg::LDB % 8 == 4)),
              "smem row strides: see the header");
static_assert(Cfg::A_STAGE == (Cfg::KA ? Cfg::BM : Cfg::BK) * Cfg::LDA, "A stage size mismatch");
static_assert(Cfg::B_STAGE == (Cfg::KB ? Cfg::BN : Cfg::BK) * Cfg::LDB, "B stage size mismatch");
static_assert(OPTIML_SMEM_BYTES <= 227 * 1024, "shared memory exceeds 227 KiB per block");
static_assert(OPTIML_GROUP_M >= 1, "OPTIML_GROUP_M must be >= 1");

__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull;
}
__device__ __forceinline__ bool aligned8(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 7ull) == 0ull;
}

// Returns v unchanged, but hides where it came from, so that values derived
// from it are recomputed where used instead of being kept live across the
// main loop (the accumulators need every register).
__device__ __forceinline__ int opaque(int v) {
    asm volatile("" : "+r"(v));
    return v;
}

__device__ __forceinline__ long long opaque64(long long v) {
    asm volatile("" : "+l"(v));
    return v;
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Out-of-range chunks are zeros in shared memory, written by the same
// thread, so the barrier that publishes the stage covers them too; the
// global address is never dereferenced then. OPTIML_ZFILL 1 (default): the
// copy's src-size operand is 0 for them (cp.async zero-fills; one predicated
// LDGSTS.ZFILL per chunk); 0: a predicated cp.async plus a predicated zero
// store. OFF is a compile-time byte offset folded into the shared address
// (one base register per thread instead of one per chunk).
template <int OFF>
__device__ __forceinline__ void cp16(unsigned dst, const float* src, bool valid) {
#if OPTIML_ZFILL
    asm volatile("cp.async.cg.shared.global [%0+%3], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(valid ? 16 : 0), "n"(OFF) : "memory");
#else
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %2, 0;\n\t"
                 "@p cp.async.cg.shared.global [%0+%3], [%1], 16;\n\t"
                 "@!p st.shared.v4.u32 [%0+%3], {0, 0, 0, 0};\n\t}\n"
                 :: "r"(dst), "l"(src), "r"((int)valid), "n"(OFF) : "memory");
#endif
}
template <int OFF>
__device__ __forceinline__ void cp4(unsigned dst, const float* src, bool valid) {
#if OPTIML_ZFILL
    asm volatile("cp.async.ca.shared.global [%0+%3], [%1], 4, %2;\n"
                 :: "r"(dst), "l"(src), "r"(valid ? 4 : 0), "n"(OFF) : "memory");
#else
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %2, 0;\n\t"
                 "@p cp.async.ca.shared.global [%0+%3], [%1], 4;\n\t"
                 "@!p st.shared.u32 [%0+%3], 0;\n\t}\n"
                 :: "r"(dst), "l"(src), "r"((int)valid), "n"(OFF) : "memory");
#endif
}

// fp32 bits -> TF32 operand bits (OPTIML_TF32_ROUND, see the header).
__device__ __forceinline__ unsigned to_tf32(unsigned x) {
#if OPTIML_TF32_ROUND == 2 && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    unsigned r;
    asm("cvt.rn.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(x)));
    return r;
#elif OPTIML_TF32_ROUND && OPTIML_FRAG_LOAD && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 1000)
    // cvt.rna.tf32.f32 without its final masking of the 13 dropped bits:
    // add half an ulp of TF32 to the magnitude unless x is Inf or NaN. The
    // sm_8x / sm_90 MMA ignores the dropped bits (ptxas itself omits the mask
    // when a cvt feeds an MMA directly, but not when the value crosses the
    // loop back edge, as the prefetched first fragments of a tile do; and
    // OPTIML_TF32_ROUND 0 measures as truncation). Same MMA input bits as
    // cvt.rna. (OPTIML_FRAG_LOAD 0 keeps the plain cvt.rna of the original.)
    unsigned r;
    asm("{\n\t.reg .pred p;\n\t.reg .f32 a;\n\t"
        "mov.b32 a, %1;\n\tabs.f32 a, a;\n\t"
        "setp.geu.f32 p, a, 0f7F800000;\n\t"
        "mov.b32 %0, %1;\n\t"
        "@!p add.u32 %0, %0, 4096;\n\t}\n"
        : "=r"(r) : "r"(x));
    return r;
#elif OPTIML_TF32_ROUND
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(x)));
    return r;
#else
    return x;
#endif
}
__device__ __forceinline__ unsigned to_tf32(float x) { return to_tf32(__float_as_uint(x)); }

// Four 8x8 b16 matrices (= 8 rows x 4 fp32 each) from shared memory; lane l
// gives the row address of row l%8 of matrix l/8 and receives, per matrix,
// the 32-bit word l%4 of row l/4. Volatile: it reads what cp.async and a
// barrier published, so it must stay behind that barrier.
__device__ __forceinline__ void ldsm4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// d += a * b, one m16n8k8 TF32 MMA (fp32 accumulate). Not volatile: the
// compiler may interleave it with the fragment loads.
__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Copies one k-tile of one operand (TILE rows or columns of M / N, BK of K)
// from its stored layout into a shared stage of the same layout.
//   KC: stored K-contiguous -> smem [TILE][BK + 4], rows are tile0 + r < R
//   else: stored M/N-contiguous -> smem [BK][TILE + PMN], rows are k
// A thread owns one 16-byte column slot and every RSTEP-th row from r0.
// VEC: every row of the operand starts 16-byte aligned (so R and K edges
// fall on chunk boundaries of the contiguous dimension): one 16-byte
// cp.async per chunk. Otherwise four 4-byte ones, each predicated.
// Everything is derived from an opaque thread index on every call: if the
// compiler could see that the per-chunk predicates, shared offsets and
// 64-bit row addresses are loop-invariant it would hoist all of them out of
// the k loop and keep them live next to the 128 accumulators -> spills.
template <int TILE, bool KC, bool VEC>
struct TileCopy {
    static constexpr int ROWS = KC ? TILE : Cfg::BK;
    static constexpr int COLS = KC ? Cfg::BK : TILE;
    static constexpr int LDS = COLS + (KC ? Cfg::PADK : Cfg::PADMN);
    static constexpr int CPR = COLS / 4;  // 16-byte chunks per row
    static constexpr int THREADS = Cfg::THREADS;
    static_assert(THREADS % CPR == 0,
                  "OPTIML_THREADS must be a multiple of the 16-byte chunks per stored tile row (BK/4 or BM/4, BN/4)");
    static constexpr int RSTEP = THREADS / CPR;
    static constexpr int ITERS = (ROWS + RSTEP - 1) / RSTEP;
    static constexpr bool EXACT = ROWS % RSTEP == 0;

    // Chunks I.. of this thread; src points at chunk I. A recursive template
    // rather than a loop so that OFF is a constant expression.
    template <int I>
    __device__ __forceinline__ static void chunks(unsigned dst, const float* src, long long step, int rrem,
                                                  bool col_ok, int crem, int rown) {
        if constexpr (I < ITERS) {
            constexpr int OFF = 4 * (I * RSTEP * LDS);
            const bool row_ok = I * RSTEP < rrem;
            // (only when RSTEP does not divide the tile's rows: threads whose
            // last chunk would fall past the stage own no such chunk)
            if (!EXACT && I * RSTEP >= rown) return;
            if constexpr (VEC) {
                cp16<OFF>(dst, src, row_ok && col_ok);
            } else {
                cp4<OFF + 0>(dst, src + 0, row_ok && 0 < crem);
                cp4<OFF + 4>(dst, src + 1, row_ok && 1 < crem);
                cp4<OFF + 8>(dst, src + 2, row_ok && 2 < crem);
                cp4<OFF + 12>(dst, src + 3, row_ok && 3 < crem);
            }
            chunks<I + 1>(dst, src + step, step, rrem, col_ok, crem, rown);
        }
    }

    // sdst: shared address of the stage; X: the operand of this batch item.
    __device__ __forceinline__ static void run(unsigned sdst, const float* __restrict__ X, long long ld, int tile0,
                                               int R, int kpos, int K) {
        const int tid = opaque((int)threadIdx.x);
        const int r0 = tid / CPR, c0 = (tid % CPR) * 4;
        const int row0 = (KC ? tile0 : kpos) + r0;   // stored row of chunk 0
        const int col0 = (KC ? kpos : tile0) + c0;   // stored column of the slot
        // rows of the matrix left from row0: chunk i is inside iff i * RSTEP < rrem
        const int rrem = (KC ? R : K) - row0;
        const int crem = (KC ? K : R) - col0;       // columns left from col0
        const bool col_ok = crem > 0;
        const unsigned dst = sdst + 4u * (unsigned)(r0 * LDS + c0);
        const float* src = X + (long long)row0 * ld + col0;
        chunks<0>(dst, src, (long long)RSTEP * ld, rrem, col_ok, crem, ROWS - r0);
    }
};

// Where this thread's fragments of one stage start: generic pointers (LDS
// paths) and 32-bit shared addresses (ldmatrix) of its P and Q origins.
struct StageSrc {
    const float* p;
    const float* q;
    unsigned pu, qu;
};

// ---------------- OPTIML_FRAG_LOAD 0: the original fragment scheme ----------------
// Fragments of k8 step `s` of the current stage, converted to TF32.
// a[i]: m16 tile i of the warp; logical rows g / g+8 are the physical rows
// 2g / 2g+1 of that tile, logical k tig / tig+4 the physical k 2tig / 2tig+1.
// b[j], j = 2p + h: n8 tile j holds the physical columns 16p + 2g + h.
// `sa` / `sb` already include this thread's offsets (see gemm_block).
template <int S>
__device__ __forceinline__ void load_frags_v1(unsigned (&a)[Cfg::MT][4], unsigned (&b)[Cfg::NT][2],
                                              const float* sa, const float* sb) {
    constexpr int LDA = Cfg::LDA, LDB = Cfg::LDB;
#pragma unroll
    for (int i = 0; i < Cfg::MT; ++i) {
        if (Cfg::KA) {  // [m][k]: row 2g -> (a0, a2), row 2g+1 -> (a1, a3)
            const float2 lo = *reinterpret_cast<const float2*>(sa + (16 * i) * LDA + 8 * S);
            const float2 hi = *reinterpret_cast<const float2*>(sa + (16 * i + 1) * LDA + 8 * S);
            a[i][0] = to_tf32(lo.x); a[i][2] = to_tf32(lo.y);
            a[i][1] = to_tf32(hi.x); a[i][3] = to_tf32(hi.y);
        } else {        // [k][m]: k row 2tig -> (a0, a1), k row 2tig+1 -> (a2, a3)
            const float2 k0 = *reinterpret_cast<const float2*>(sa + (8 * S) * LDA + 16 * i);
            const float2 k1 = *reinterpret_cast<const float2*>(sa + (8 * S + 1) * LDA + 16 * i);
            a[i][0] = to_tf32(k0.x); a[i][1] = to_tf32(k0.y);
            a[i][2] = to_tf32(k1.x); a[i][3] = to_tf32(k1.y);
        }
    }
#pragma unroll
    for (int p = 0; p < Cfg::NT / 2; ++p) {
        if (Cfg::KB) {  // [n][k]: row 16p+2g+h -> (b0, b1) of tile 2p+h
            const float2 v0 = *reinterpret_cast<const float2*>(sb + (16 * p) * LDB + 8 * S);
            const float2 v1 = *reinterpret_cast<const float2*>(sb + (16 * p + 1) * LDB + 8 * S);
            b[2 * p][0] = to_tf32(v0.x); b[2 * p][1] = to_tf32(v0.y);
            b[2 * p + 1][0] = to_tf32(v1.x); b[2 * p + 1][1] = to_tf32(v1.y);
        } else {        // [k][n]: k row 2tig -> b0 of tiles 2p, 2p+1; 2tig+1 -> b1
            const float2 k0 = *reinterpret_cast<const float2*>(sb + (8 * S) * LDB + 16 * p);
            const float2 k1 = *reinterpret_cast<const float2*>(sb + (8 * S + 1) * LDB + 16 * p);
            b[2 * p][0] = to_tf32(k0.x); b[2 * p + 1][0] = to_tf32(k0.y);
            b[2 * p][1] = to_tf32(k1.x); b[2 * p + 1][1] = to_tf32(k1.y);
        }
    }
}

// ---------------- OPTIML_FRAG_LOAD 1: fragments in place ----------------
// k8 step S of the stage `src` points into (this thread's offsets included,
// see frag_offsets). P tile i: MMA rows g, g+8 = physical rows 16i+g, 16i+g+8
// (K-contiguous, ldmatrix) or 16i+2g, 16i+2g+1 (M/N-contiguous, LDS.64).
// Q tile j = 2p+h, MMA column c: physical 16p + 4(c/2) + 2(h ^ c/4) + c%2
// (Q_PERM) or 8j + c.
template <int S>
__device__ __forceinline__ void load_frags_v2(unsigned (&a)[Cfg::MT][4], unsigned (&b)[Cfg::NT][2],
                                              const StageSrc& src) {
    constexpr int LDP = Cfg::LDP, LDQ = Cfg::LDQ;
#pragma unroll
    for (int i = 0; i < Cfg::MT; ++i) {
        if constexpr (Cfg::P_KC) {
            ldsm4(a[i][0], a[i][1], a[i][2], a[i][3], src.pu + 4u * (unsigned)(16 * i * LDP + 8 * S));
#pragma unroll
            for (int q = 0; q < 4; ++q) a[i][q] = to_tf32(a[i][q]);
        } else {
            const float2 k0 = *reinterpret_cast<const float2*>(src.p + (8 * S) * LDP + 16 * i);
            const float2 k1 = *reinterpret_cast<const float2*>(src.p + (8 * S + 4) * LDP + 16 * i);
            a[i][0] = to_tf32(k0.x); a[i][1] = to_tf32(k0.y);
            a[i][2] = to_tf32(k1.x); a[i][3] = to_tf32(k1.y);
        }
    }
#pragma unroll
    for (int p = 0; p < Cfg::NT / 2; ++p) {
        if constexpr (Cfg::Q_KC) {
            ldsm4(b[2 * p][0], b[2 * p][1], b[2 * p + 1][0], b[2 * p + 1][1],
                  src.qu + 4u * (unsigned)(16 * p * LDQ + 8 * S));
#pragma unroll
            for (int q = 0; q < 4; ++q) b[2 * p + (q >> 1)][q & 1] = to_tf32(b[2 * p + (q >> 1)][q & 1]);
        } else {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                b[2 * p + h][0] = to_tf32(src.q[(8 * S) * LDQ + 16 * p + 8 * h]);
                b[2 * p + h][1] = to_tf32(src.q[(8 * S + 4) * LDQ + 16 * p + 8 * h]);
            }
        }
    }
}

template <int S>
__device__ __forceinline__ void load_frags(unsigned (&a)[Cfg::MT][4], unsigned (&b)[Cfg::NT][2],
                                           const StageSrc& src) {
    if constexpr (Cfg::V2) load_frags_v2<S>(a, b, src);
    else load_frags_v1<S>(a, b, src.p, src.q);
}

// This thread's P / Q offsets (floats) inside a stage.
__device__ __forceinline__ int2 frag_offsets(int tid) {
    const int warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, tig = lane & 3;
    const int wm0 = (warp / Cfg::WARPS_N) * Cfg::WM;
    const int wn0 = (warp % Cfg::WARPS_N) * Cfg::WN;
    if constexpr (!Cfg::V2) {
        const int aoff = Cfg::KA ? (wm0 + 2 * g) * Cfg::LDA + 2 * tig : (2 * tig) * Cfg::LDA + wm0 + 2 * g;
        const int boff = Cfg::KB ? (wn0 + 2 * g) * Cfg::LDB + 2 * tig : (2 * tig) * Cfg::LDB + wn0 + 2 * g;
        return make_int2(aoff, boff);
    } else {
        const int p0 = Cfg::SWAP ? wn0 : wm0;
        const int q0 = Cfg::SWAP ? wm0 : wn0;
        int poff, qoff;
        if constexpr (Cfg::P_KC) {  // matrix l/8: rows +8 for odd, k +4 for l >= 16
            poff = (p0 + (lane & 7) + 8 * ((lane >> 3) & 1)) * Cfg::LDP + 4 * (lane >> 4);
        } else {
            poff = tig * Cfg::LDP + p0 + 2 * g;
        }
        if constexpr (Cfg::Q_KC) {  // matrix l/8 = 2h + khalf: tile 2p+h, k +4*khalf, column c = l%8
            const int c = lane & 7, h = (lane >> 4) & 1, kh = (lane >> 3) & 1;
            const int col = Cfg::Q_PERM ? 4 * (c >> 1) + 2 * (h ^ (c >> 2)) + (c & 1) : 8 * h + c;
            qoff = (q0 + col) * Cfg::LDQ + 4 * kh;
        } else {
            qoff = tig * Cfg::LDQ + q0 + g;
        }
        return make_int2(poff, qoff);
    }
}

__device__ __forceinline__ StageSrc stage_src(const float* smem, unsigned smem_u, int stage, int2 off) {
    StageSrc s;
    const int po = Cfg::P_BASE + stage * Cfg::P_STAGE + off.x;
    const int qo = Cfg::Q_BASE + stage * Cfg::Q_STAGE + off.y;
    s.p = smem + po;
    s.q = smem + qo;
    s.pu = smem_u + 4u * (unsigned)po;
    s.qu = smem_u + 4u * (unsigned)qo;
    return s;
}

__device__ __forceinline__ void mma_step(float (&acc)[Cfg::MT][Cfg::NT][4], const unsigned (&a)[Cfg::MT][4],
                                         const unsigned (&b)[Cfg::NT][2]) {
#pragma unroll
    for (int i = 0; i < Cfg::MT; ++i)
#pragma unroll
        for (int jj = 0; jj < Cfg::NT; ++jj) {
            // serpentine order: consecutive MMAs share an operand
            const int j = (i & 1) ? Cfg::NT - 1 - jj : jj;
            mma(acc[i][j], a[i], b[j]);
        }
}

// k-steps S..KSTEPS-1 of one stage (unrolled, no barriers inside).
// OPTIML_FRAG_PIPE 1: fragments double buffered in registers, the loads of
// step s+1 written before the MMAs of step s. 0: one fragment set, ptxas
// alone decides how far to hoist the loads.
template <int S>
struct Steps {
    __device__ __forceinline__ static void run(float (&acc)[Cfg::MT][Cfg::NT][4], const StageSrc& src) {
        unsigned fa[Cfg::MT][4], fb[Cfg::NT][2];
        load_frags<S>(fa, fb, src);
        mma_step(acc, fa, fb);
        Steps<S + 1>::run(acc, src);
    }
    __device__ __forceinline__ static void run_pipe(float (&acc)[Cfg::MT][Cfg::NT][4], unsigned (&fa)[2][Cfg::MT][4],
                                                    unsigned (&fb)[2][Cfg::NT][2], const StageSrc& src) {
        if constexpr (S + 1 < Cfg::KSTEPS) load_frags<S + 1>(fa[(S + 1) & 1], fb[(S + 1) & 1], src);
        mma_step(acc, fa[S & 1], fb[S & 1]);
        Steps<S + 1>::run_pipe(acc, fa, fb, src);
    }
};
template <>
struct Steps<Cfg::KSTEPS> {
    __device__ __forceinline__ static void run(float (&)[Cfg::MT][Cfg::NT][4], const StageSrc&) {}
    __device__ __forceinline__ static void run_pipe(float (&)[Cfg::MT][Cfg::NT][4], unsigned (&)[2][Cfg::MT][4],
                                                    unsigned (&)[2][Cfg::NT][2], const StageSrc&) {}
};

// OPTIML_KLOOP 1: k-steps S..KSTEPS-1 of tile t (in `cur`); the fragments of
// step S are in buffer S & 1. Before the MMAs of the last step: wait for
// tile t+1, barrier (every warp now holds the last fragments of tile t in
// registers, so tile t's stage is free), refill that stage (`refill`: tile
// t+STAGES, commit), load tile t+1's step-0 fragments from `nxt` into
// buffer 0. Branch-free, so that the whole tile is one basic block for
// ptxas: after the last tile the barrier is redundant, the refills are
// zero-filled (their k is past K) and the prefetched fragments unused.
template <int S>
struct KSteps {
    template <class Refill>
    __device__ __forceinline__ static void run(float (&acc)[Cfg::MT][Cfg::NT][4], unsigned (&fa)[2][Cfg::MT][4],
                                               unsigned (&fb)[2][Cfg::NT][2], const StageSrc& cur,
                                               const StageSrc& nxt, const Refill& refill) {
        if constexpr (S + 1 < Cfg::KSTEPS) {
            load_frags<S + 1>(fa[(S + 1) & 1], fb[(S + 1) & 1], cur);
            mma_step(acc, fa[S & 1], fb[S & 1]);
            KSteps<S + 1>::run(acc, fa, fb, cur, nxt, refill);
        } else {
            // (S + 1) & 1 is 0 for an even KSTEPS; for an odd one the
            // prefetch goes to buffer 1 and is moved to buffer 0 after the
            // MMAs that still read buffer 0.
            constexpr int NB = (S + 1) & 1;
            cp_async_wait<Cfg::STAGES - 2>();
            __syncthreads();
            refill();
            load_frags<0>(fa[NB], fb[NB], nxt);
            mma_step(acc, fa[S & 1], fb[S & 1]);
            if constexpr (NB != 0) {
#pragma unroll
                for (int i = 0; i < Cfg::MT; ++i)
#pragma unroll
                    for (int q = 0; q < 4; ++q) fa[0][i][q] = fa[1][i][q];
#pragma unroll
                for (int j = 0; j < Cfg::NT; ++j)
#pragma unroll
                    for (int q = 0; q < 2; ++q) fb[0][j][q] = fb[1][j][q];
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
    return optiml_act_fast(v);
}

// bias[n0 .. n0+V-1] (0 past N, or without OPTIML_HAS_BIAS).
template <int V>
__device__ __forceinline__ void load_bias(float (&bv)[V], const float* __restrict__ bias, int n0, int N) {
#pragma unroll
    for (int q = 0; q < V; ++q) {
        bv[q] = 0.f;
#if OPTIML_HAS_BIAS
        if (n0 + q < N) bv[q] = __ldg(bias + n0 + q);
#endif
    }
    (void)bias; (void)n0; (void)N;
}

// C row `crow`, columns n0 .. n0+V-1 (V = 2 or 4; n0 % V == 0). vecC: N % V
// == 0 and C 4V-byte aligned, so n0 < N means the whole vector is inside.
template <int V>
__device__ __forceinline__ void store_vec(float* __restrict__ crow, int n0, int N, const float (&v)[V],
                                          const float (&bv)[V], float alpha, float beta, bool vecC) {
    if (vecC && n0 < N) {
        if constexpr (V == 4) {
            float4 old = make_float4(0.f, 0.f, 0.f, 0.f);
#if OPTIML_HAS_BETA
            old = *reinterpret_cast<const float4*>(crow + n0);
#endif
            float4 o;
            o.x = epilogue(v[0], alpha, beta, old.x, bv[0]);
            o.y = epilogue(v[1], alpha, beta, old.y, bv[1]);
            o.z = epilogue(v[2], alpha, beta, old.z, bv[2]);
            o.w = epilogue(v[3], alpha, beta, old.w, bv[3]);
            *reinterpret_cast<float4*>(crow + n0) = o;
        } else {
            float2 old = make_float2(0.f, 0.f);
#if OPTIML_HAS_BETA
            old = *reinterpret_cast<const float2*>(crow + n0);
#endif
            float2 o;
            o.x = epilogue(v[0], alpha, beta, old.x, bv[0]);
            o.y = epilogue(v[1], alpha, beta, old.y, bv[1]);
            *reinterpret_cast<float2*>(crow + n0) = o;
        }
    } else {
#pragma unroll
        for (int q = 0; q < V; ++q) {
            const int n = n0 + q;
            if (n < N) {
                float old = 0.f;
#if OPTIML_HAS_BETA
                old = crow[n];
#endif
                crow[n] = epilogue(v[q], alpha, beta, old, bv[q]);
            }
        }
    }
}

// OPTIML_FRAG_LOAD 1 with OPTIML_HAS_BETA: C_old is read in a pass of its
// own before any store (acc = alpha * acc + beta * C_old in place), so the
// loads are not serialised behind stores to the same array; the store pass
// then only adds the bias and applies the activation.
__device__ __forceinline__ float epilogue_tail(float v, float bias) {
#if OPTIML_HAS_BIAS
    v += bias;
#endif
    (void)bias;
    return optiml_act_fast(v);
}
__device__ __forceinline__ float epilogue_head(float acc, float alpha, float beta, float old) {
    float v = acc;
#if OPTIML_HAS_ALPHA
    v *= alpha;
#endif
    (void)alpha;
    return v + beta * old;
}

template <int V, bool FAST>
__device__ __forceinline__ void load_old(float (&old)[V], const float* __restrict__ crow, int n0, int N, bool vecC) {
    if (FAST || (vecC && n0 < N)) {
        if constexpr (V == 4) {
            const float4 o = *reinterpret_cast<const float4*>(crow + n0);
            old[0] = o.x; old[1] = o.y; old[2] = o.z; old[3] = o.w;
        } else {
            const float2 o = *reinterpret_cast<const float2*>(crow + n0);
            old[0] = o.x; old[1] = o.y;
        }
    } else {
#pragma unroll
        for (int q = 0; q < V; ++q) old[q] = n0 + q < N ? crow[n0 + q] : 0.f;
    }
}

// Store pass of OPTIML_FRAG_LOAD 1: full epilogue, or (BETA_DONE) only the
// tail after the C_old pass.
template <int V, bool BETA_DONE, bool FAST>
__device__ __forceinline__ void store_vec2(float* __restrict__ crow, int n0, int N, const float (&v)[V],
                                           const float (&bv)[V], float alpha, float beta, bool vecC) {
    if constexpr (!BETA_DONE) {
        if constexpr (FAST) {  // (without OPTIML_HAS_BETA: C_old is not read)
            float o[V];
#pragma unroll
            for (int q = 0; q < V; ++q) o[q] = epilogue(v[q], alpha, beta, 0.f, bv[q]);
            if constexpr (V == 4) *reinterpret_cast<float4*>(crow + n0) = make_float4(o[0], o[1], o[2], o[3]);
            else *reinterpret_cast<float2*>(crow + n0) = make_float2(o[0], o[1]);
        } else {
            store_vec<V>(crow, n0, N, v, bv, alpha, beta, vecC);
        }
    } else {
        float o[V];
#pragma unroll
        for (int q = 0; q < V; ++q) o[q] = epilogue_tail(v[q], bv[q]);
        if (FAST || (vecC && n0 < N)) {
            if constexpr (V == 4) *reinterpret_cast<float4*>(crow + n0) = make_float4(o[0], o[1], o[2], o[3]);
            else *reinterpret_cast<float2*>(crow + n0) = make_float2(o[0], o[1]);
        } else {
#pragma unroll
            for (int q = 0; q < V; ++q)
                if (n0 + q < N) crow[n0 + q] = o[q];
        }
    }
}

// The (column, row) block tile of C; see matmul_f32.cu for GROUP_M.
__device__ __forceinline__ int2 block_tile() {
    const int bx = opaque((int)blockIdx.x);
    const int by = opaque((int)blockIdx.y);
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

// OPTIML_FRAG_LOAD 1 epilogue. PASS_OLD: the C_old pass (only with
// OPTIML_HAS_BETA): acc = epilogue_head(acc, C_old) in place, no stores.
// Otherwise the store pass (BETA_DONE: C_old already folded in). FAST: the
// warp tile lies inside C and C allows vector accesses: no predicates, no
// branches (so that ptxas can batch the C_old loads). ONLY >= 0: only that
// iteration of the outer loop (the C_old path goes chunk by chunk, each
// chunk's loads batched, then its stores: all 128 C_old values at once would
// not fit next to the accumulators).
template <bool PASS_OLD, bool BETA_DONE, bool FAST, int ONLY = -1>
__device__ __forceinline__ void epi_pass(float (&acc)[Cfg::MT][Cfg::NT][4], float* __restrict__ C,
                                         const float* __restrict__ bias, int M, int N, float alpha, float beta,
                                         int mw, int nw, int eg, int etig) {
    constexpr int MT = Cfg::MT, NT = Cfg::NT;
    if constexpr (Cfg::SWAP) {
        // P = n, Q = m: acc[i][j][e + 2h] is C[mw + 8j + 2tig + e][nw + 16i + 2g + h].
        const bool vecC = FAST || ((N % 2 == 0) && aligned8(C));
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            if (ONLY >= 0 && i != ONLY) continue;
            const int n0 = nw + 16 * i + 2 * eg;
            float bv[2];
            if constexpr (!PASS_OLD) load_bias<2>(bv, bias, n0, N);
#pragma unroll
            for (int j = 0; j < NT; ++j) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int m = mw + 8 * j + 2 * etig + e;
                    if (!FAST && m >= M) continue;
                    if constexpr (PASS_OLD) {
                        float old[2];
                        load_old<2, FAST>(old, C + (long long)m * N, n0, N, vecC);
                        acc[i][j][e] = epilogue_head(acc[i][j][e], alpha, beta, old[0]);
                        acc[i][j][e + 2] = epilogue_head(acc[i][j][e + 2], alpha, beta, old[1]);
                    } else {
                        const float v[2] = {acc[i][j][e], acc[i][j][e + 2]};
                        store_vec2<2, BETA_DONE, FAST>(C + (long long)m * N, n0, N, v, bv, alpha, beta, vecC);
                    }
                }
            }
        }
    } else if constexpr (Cfg::Q_PERM) {
        // P = m: MMA row g + 8h is row 16i + g + 8h (P K-contiguous) or
        // 16i + 2g + h; Q = n: columns 16p + 4tig + q hold
        // acc[i][2p + q/2][q%2 + 2h] once store_tile has swapped the tile
        // pairs of the threads with tig/2 = 1.
        const bool vecC = FAST || ((N % 4 == 0) && aligned16(C));
#pragma unroll
        for (int p = 0; p < NT / 2; ++p) {
            if (ONLY >= 0 && p != ONLY) continue;
            const int n0 = nw + 16 * p + 4 * etig;
            float bv[4];
            if constexpr (!PASS_OLD) load_bias<4>(bv, bias, n0, N);
#pragma unroll
            for (int i = 0; i < MT; ++i) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int m = mw + 16 * i + (Cfg::P_KC ? eg + 8 * h : 2 * eg + h);
                    if (!FAST && m >= M) continue;
                    if constexpr (PASS_OLD) {
                        float old[4];
                        load_old<4, FAST>(old, C + (long long)m * N, n0, N, vecC);
#pragma unroll
                        for (int q = 0; q < 4; ++q) {
                            float& a = acc[i][2 * p + (q >> 1)][(q & 1) + 2 * h];
                            a = epilogue_head(a, alpha, beta, old[q]);
                        }
                    } else {
                        float v[4];
#pragma unroll
                        for (int q = 0; q < 4; ++q) v[q] = acc[i][2 * p + (q >> 1)][(q & 1) + 2 * h];
                        store_vec2<4, BETA_DONE, FAST>(C + (long long)m * N, n0, N, v, bv, alpha, beta, vecC);
                    }
                }
            }
        }
    } else {
        // P = m (M-contiguous A: rows 16i + 2g + h), Q = n natural (N-contiguous
        // B): acc[i][j][e + 2h] is C[mw + 16i + 2g + h][nw + 8j + 2tig + e].
        const bool vecC = FAST || ((N % 2 == 0) && aligned8(C));
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            if (ONLY >= 0 && j != ONLY) continue;
            const int n0 = nw + 8 * j + 2 * etig;
            float bv[2];
            if constexpr (!PASS_OLD) load_bias<2>(bv, bias, n0, N);
#pragma unroll
            for (int i = 0; i < MT; ++i) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int m = mw + 16 * i + (Cfg::P_KC ? eg + 8 * h : 2 * eg + h);
                    if (!FAST && m >= M) continue;
                    if constexpr (PASS_OLD) {
                        float old[2];
                        load_old<2, FAST>(old, C + (long long)m * N, n0, N, vecC);
                        acc[i][j][2 * h] = epilogue_head(acc[i][j][2 * h], alpha, beta, old[0]);
                        acc[i][j][2 * h + 1] = epilogue_head(acc[i][j][2 * h + 1], alpha, beta, old[1]);
                    } else {
                        const float v[2] = {acc[i][j][2 * h], acc[i][j][2 * h + 1]};
                        store_vec2<2, BETA_DONE, FAST>(C + (long long)m * N, n0, N, v, bv, alpha, beta, vecC);
                    }
                }
            }
        }
    }
}

// C_old path: outer iteration c's loads, then its stores, c = 0, 1, ...
template <int CH, bool FAST>
struct EpiChunks {
    static constexpr int OUTER = Cfg::SWAP ? Cfg::MT : (Cfg::Q_PERM ? Cfg::NT / 2 : Cfg::NT);
    __device__ __forceinline__ static void run(float (&acc)[Cfg::MT][Cfg::NT][4], float* __restrict__ C,
                                               const float* __restrict__ bias, int M, int N, float alpha,
                                               float beta, int mw, int nw, int eg, int etig) {
        if constexpr (CH < OUTER) {
            epi_pass<true, false, FAST, CH>(acc, C, bias, M, N, alpha, beta, mw, nw, eg, etig);
            epi_pass<false, true, FAST, CH>(acc, C, bias, M, N, alpha, beta, mw, nw, eg, etig);
            EpiChunks<CH + 1, FAST>::run(acc, C, bias, M, N, alpha, beta, mw, nw, eg, etig);
        }
    }
};

template <bool HAS_BETA>
__device__ __forceinline__ void store_tile_v2(float (&acc)[Cfg::MT][Cfg::NT][4], float* __restrict__ C,
                                              const float* __restrict__ bias, int M, int N, float alpha, float beta,
                                              int mw, int nw, int eg, int etig) {
    if constexpr (Cfg::Q_PERM) {
        // Columns 16p + 4tig + {0..3} are tiles (2p + (q/2 ^ tig/2)): swap the
        // tile pair of the threads with tig/2 = 1 (selects, not indexing: the
        // accumulators must stay in registers).
        const bool sw = (etig >> 1) != 0;
#pragma unroll
        for (int i = 0; i < Cfg::MT; ++i)
#pragma unroll
            for (int p = 0; p < Cfg::NT / 2; ++p)
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const float x = acc[i][2 * p][q], y = acc[i][2 * p + 1][q];
                    acc[i][2 * p][q] = sw ? y : x;
                    acc[i][2 * p + 1][q] = sw ? x : y;
                }
    }
    if constexpr (HAS_BETA) {
        // (only the C_old path has a branch-free variant: without C_old
        // there are no loads to batch, and a second copy of the store pass
        // made ptxas spill)
        constexpr int V = Cfg::Q_PERM ? 4 : 2;  // C vector width
        const bool fast = (mw + Cfg::WM <= M) && (nw + Cfg::WN <= N) && (N % V == 0) &&
                          ((reinterpret_cast<unsigned long long>(C) & (4ull * V - 1ull)) == 0ull);
        if (fast) EpiChunks<0, true>::run(acc, C, bias, M, N, alpha, beta, mw, nw, eg, etig);
        else EpiChunks<0, false>::run(acc, C, bias, M, N, alpha, beta, mw, nw, eg, etig);
    } else {
        epi_pass<false, false, false>(acc, C, bias, M, N, alpha, beta, mw, nw, eg, etig);
    }
}

// Writes the accumulators of this thread (see the fragment mappings above).
__device__ __forceinline__ void store_tile(float (&acc)[Cfg::MT][Cfg::NT][4], float* __restrict__ C,
                                           const float* __restrict__ bias, int M, int N, float alpha, float beta) {
    constexpr int MT = Cfg::MT, NT = Cfg::NT;
    const int etid = opaque((int)threadIdx.x);
    const int ewarp = etid >> 5, elane = etid & 31;
    const int eg = elane >> 2, etig = elane & 3;
    const int2 etile = block_tile();
    const int mw = etile.y * Cfg::BM + (ewarp / Cfg::WARPS_N) * Cfg::WM;  // warp tile origin in C
    const int nw = etile.x * Cfg::BN + (ewarp % Cfg::WARPS_N) * Cfg::WN;
    if constexpr (!Cfg::V2) {
        // Thread (g, tig) owns, for each m16 tile i and each 16-column group
        // p, rows 16i + 2g + {0, 1} and columns 16p + 4tig + {0..3}:
        //   column 4tig + q is n8 tile 2p + (q & 1), accumulator (q >> 1) + 2r.
        const int row0 = mw + 2 * eg;
        const int col0 = nw + 4 * etig;
        const bool vecC = (N % 4 == 0) && aligned16(C);  // C[z] alignment: checked by the caller via strideC
#pragma unroll
        for (int p = 0; p < NT / 2; ++p) {
            const int n0 = col0 + 16 * p;
            float bv[4];
            load_bias<4>(bv, bias, n0, N);
#pragma unroll
            for (int i = 0; i < MT; ++i) {
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const int m = row0 + 16 * i + r;
                    if (m >= M) continue;
                    float v[4];
#pragma unroll
                    for (int q = 0; q < 4; ++q) v[q] = acc[i][2 * p + (q & 1)][(q >> 1) + 2 * r];
                    store_vec<4>(C + (long long)m * N, n0, N, v, bv, alpha, beta, vecC);
                }
            }
        }
    } else {
        store_tile_v2<OPTIML_HAS_BETA != 0>(acc, C, bias, M, N, alpha, beta, mw, nw, eg, etig);
    }
}

// One (batch item, block tile) of C. A, B, C already point at the item.
template <bool VEC>
__device__ __forceinline__ void gemm_block(const float* __restrict__ A, const float* __restrict__ B,
                                           float* __restrict__ C, const float* __restrict__ bias, int M, int N,
                                           int K, float alpha, float beta, float* __restrict__ smem) {
    constexpr int STAGES = Cfg::STAGES, BK = Cfg::BK;
    constexpr int MT = Cfg::MT, NT = Cfg::NT;
    const long long lda = OPTIML_TRANS_A ? M : K;
    const long long ldb = OPTIML_TRANS_B ? K : N;
    const int tid = opaque((int)threadIdx.x);
    const int2 tile = block_tile();
    const int bm = tile.y * Cfg::BM;
    const int bn = tile.x * Cfg::BN;

    const unsigned smem_u = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned sA_u = smem_u;
    const unsigned sB_u = smem_u + 4u * (unsigned)(STAGES * Cfg::A_STAGE);

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;

    const int ktiles = (K + BK - 1) / BK;
    if (ktiles > 0) {
        // Prologue: tiles 0 .. STAGES-2 in flight. A group is committed even
        // when it is empty so that the wait_group counts below stay exact.
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < ktiles) {
                TileCopy<Cfg::BM, Cfg::KA, VEC>::run(sA_u + 4u * (unsigned)(s * Cfg::A_STAGE), A, lda, bm, M, s * BK, K);
                TileCopy<Cfg::BN, Cfg::KB, VEC>::run(sB_u + 4u * (unsigned)(s * Cfg::B_STAGE), B, ldb, bn, N, s * BK, K);
            }
            cp_async_commit();
        }

        // This thread's fragment origins inside a stage (see load_frags).
        const int2 foff = frag_offsets(tid);

#if OPTIML_KLOOP
        // Tiles 0 .. STAGES-1 in flight (the prologue above issued all but
        // the last); tile t's fragments are loaded after the barrier inside
        // tile t-1 (before its last k8 step), right after tile t-1's stage
        // was refilled with tile t-1+STAGES. Groups stay one per tile.
        {
            constexpr int s = STAGES - 1;
            if (s < ktiles) {
                TileCopy<Cfg::BM, Cfg::KA, VEC>::run(sA_u + 4u * (unsigned)(s * Cfg::A_STAGE), A, lda, bm, M, s * BK, K);
                TileCopy<Cfg::BN, Cfg::KB, VEC>::run(sB_u + 4u * (unsigned)(s * Cfg::B_STAGE), B, ldb, bn, N, s * BK, K);
            }
            cp_async_commit();
        }
        unsigned fa[2][MT][4], fb[2][NT][2];
        cp_async_wait<STAGES - 1>();
        __syncthreads();
        load_frags<0>(fa[0], fb[0], stage_src(smem, smem_u, 0, foff));
        int rd = 0;  // stage holding tile t
        for (int t = 0; t < ktiles; ++t) {
            const int nx = rd + 1 == STAGES ? 0 : rd + 1;
            const int tn = t + STAGES;  // refills rd once tile t is in registers
            // (unconditional: past the last tile every chunk is out of range
            // in k and zero-filled without a global access)
            auto refill = [&]() {
                TileCopy<Cfg::BM, Cfg::KA, VEC>::run(sA_u + 4u * (unsigned)(rd * Cfg::A_STAGE), A, lda, bm, M, tn * BK, K);
                TileCopy<Cfg::BN, Cfg::KB, VEC>::run(sB_u + 4u * (unsigned)(rd * Cfg::B_STAGE), B, ldb, bn, N, tn * BK, K);
                cp_async_commit();
            };
            KSteps<0>::run(acc, fa, fb, stage_src(smem, smem_u, rd, foff), stage_src(smem, smem_u, nx, foff), refill);
            rd = nx;
        }
#else
        int rd = 0;              // stage holding tile t
        int wr = STAGES - 1;     // stage receiving tile t + STAGES - 1
        for (int t = 0; t < ktiles; ++t) {
            // Tile t has landed for this thread; the barrier makes it visible
            // to all and guarantees every warp is done with tile t - 1,
            // whose stage (wr) is refilled right after.
            cp_async_wait<STAGES - 2>();
            __syncthreads();
            const int tn = t + STAGES - 1;
            if (tn < ktiles) {
                TileCopy<Cfg::BM, Cfg::KA, VEC>::run(sA_u + 4u * (unsigned)(wr * Cfg::A_STAGE), A, lda, bm, M, tn * BK, K);
                TileCopy<Cfg::BN, Cfg::KB, VEC>::run(sB_u + 4u * (unsigned)(wr * Cfg::B_STAGE), B, ldb, bn, N, tn * BK, K);
            }
            cp_async_commit();

            const StageSrc src = stage_src(smem, smem_u, rd, foff);
#if OPTIML_FRAG_PIPE
            unsigned fa[2][MT][4], fb[2][NT][2];
            load_frags<0>(fa[0], fb[0], src);
            Steps<0>::run_pipe(acc, fa, fb, src);
#else
            Steps<0>::run(acc, src);
#endif

            rd = rd + 1 == STAGES ? 0 : rd + 1;
            wr = wr + 1 == STAGES ? 0 : wr + 1;
        }
#endif
        // Only empty groups can be pending; the barrier keeps the next batch
        // item's prologue from overwriting a stage another warp still reads.
        cp_async_wait<0>();
        __syncthreads();
    }

    store_tile(acc, C, bias, M, N, alpha, beta);
}

}  // namespace optiml_tf32

extern "C" __global__ void __launch_bounds__(OPTIML_THREADS, OPTIML_MIN_BLOCKS) optiml_matmul(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    const float* __restrict__ bias,
    int batch, int M, int N, int K,
    long long strideA, long long strideB, long long strideC,
    float alpha, float beta) {
    using optiml_tf32::Cfg;
#if OPTIML_DYN_SMEM_BYTES > 0
    extern __shared__ __align__(16) float optiml_smem[];
#else
    __shared__ __align__(16) float optiml_smem[Cfg::SMEM_FLOATS];
#endif

    {
        const int2 tile = optiml_tf32::block_tile();
        if (tile.y * Cfg::BM >= M || tile.x * Cfg::BN >= N) return;  // block-uniform
    }

    const int gz = (int)gridDim.z;
    for (int z = blockIdx.z; z < batch; z = (batch - z > gz) ? z + gz : batch) {
        const float* Az = A + (long long)z * strideA;
        const float* Bz = B + (long long)z * strideB;
        float* Cz = C + (long long)z * strideC;
        // 16-byte copies need every row of every batch item 16-byte aligned.
        // Recomputed per item from an opaque K: a flag hoisted out of this
        // loop would stay live across the main loop.
        const int k = optiml_tf32::opaque(K);
        const int lda = OPTIML_TRANS_A ? M : k;
        const int ldb = OPTIML_TRANS_B ? k : N;
        const bool vec = (lda % 4 == 0) && (strideA % 4 == 0) && optiml_tf32::aligned16(A) &&
                         (ldb % 4 == 0) && (strideB % 4 == 0) && optiml_tf32::aligned16(B);
        // (vecC in the epilogue tests Cz itself, so strideC % 4 != 0 falls
        // back to scalar stores on the items that need it.)
        if (vec)
            optiml_tf32::gemm_block<true>(Az, Bz, Cz, bias, M, N, K, alpha, beta, optiml_smem);
        else
            optiml_tf32::gemm_block<false>(Az, Bz, Cz, bias, M, N, K, alpha, beta, optiml_smem);
    }
}
