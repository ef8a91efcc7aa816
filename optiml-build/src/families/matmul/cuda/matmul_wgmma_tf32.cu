// optiml: batched GEMM template, fp32 in memory, TF32 tensor cores through
// Hopper's warpgroup MMA (wgmma.mma_async, sm_90a only), fp32 accumulate.
// Generated for specs that allow TF32 on sm_90 (optiml-build/src/experts/
// matmul_tf32.rs); bench/harness/wgmma_harness.cu includes it too, and
// bench/harness/WGMMA_NOTES.md has the design, the shared-memory layouts and
// the descriptor math worked out. The optiml/ headers (defaults.cuh, epilogue.cuh, sm90.cuh), inline PTX only, so NVRTC
// compiles it as is (-arch=sm_90a); macros specialise it. The launcher
// (optiml-runtime/src/matmul.rs, Launch::Wgmma) builds the tensor maps.
//
// Entry point (the ABI of optiml-build/src/experts/templates/matmul_tf32.cu):
//   extern "C" __global__ void optiml_matmul(A, B, C, bias, batch, M, N, K,
//                                            strideA, strideB, strideC,
//                                            alpha, beta)
//   C[z] (M x N, ldc = N) = epilogue(op(A[z]) * op(B[z]))
//     OPTIML_TRANS_A 0: A is M x K (lda = K); 1: A stored K x M (lda = M)
//     OPTIML_TRANS_B 0: B is K x N (ldb = N); 1: B stored N x K (ldb = K)
//     X[z] = X + z * strideX (stride 0 = broadcast that operand)
//   Epilogue per element: v = acc; v *= alpha (OPTIML_HAS_ALPHA); v += beta *
//   C_old (OPTIML_HAS_BETA; otherwise C is never read); v += bias[n]
//   (OPTIML_HAS_BIAS); v = optiml_act_fast(v) (OPTIML_ACT: the tensor-core forms of
//   optiml/epilogue.cuh). Any M, N, K >= 0, any 4-byte alignment; K = 0
//   gives C = epilogue(0).
//   block = OPTIML_THREADS (1-D), dynamic shared memory = OPTIML_DYN_SMEM_BYTES
//   (raise cudaFuncAttributeMaxDynamicSharedMemorySize to it first).
//   grid: ANY grid. The block tile is OPTIML_TILE_M x OPTIML_TILE_N of C; the
//   tiles are numbered t = (z * tiles_q + tile_q) * tiles_p + tile_p (P, Q
//   below) and block b (linear index x + gx * (y + gy * z)) does t = b,
//   b + #blocks, ... So both the matmul_tf32.cu grid (ceil(N/TILE_N),
//   ceil(M/TILE_M), min(batch, 65535)) and a persistent 1-D grid of (#SMs)
//   blocks (the default the launcher should use) are valid.
//
// Operands "P" and "Q". wgmma computes D (64 x n) += A (64 x 8) * B (8 x n)
// per warpgroup; for .tf32 both shared-memory operands must be K-major (the
// transpose immediates exist for f16/bf16 only), and wgmma's B must be in
// shared memory; wgmma's A may come from registers (any smem layout can be
// read into registers). Call wgmma's A operand P (64 rows per consumer
// warpgroup, PW = 64 * CONSUMERS rows per block) and its B operand Q (QN
// rows, the wide side). Per layout (WGMMA_NOTES.md has the reasoning):
//   TA TB  orientation        Q (smem, K-major)     P
//   0  0   C^T = B^T A^T     A, stored K-major      B^T, N-major: registers (RS),
//                                                   or SS after a transposing load
//   0  1   C^T = B^T A^T     A, stored K-major      B^T, stored K-major: SS
//   1  1   C   = A B          B^T, stored K-major   A, M-major: registers (RS)
//                                                   or SS after a transposing load
//   1  0   C^T = B^T A^T     A, M-major: the        B^T as in 0 0
//                             producer transposes it
//   OPTIML_SWAP = !(TA && TB): 1 -> the accumulator holds C^T (P = n, Q = m).
// Register (RS) form: the consumers load their P fragments from shared memory
// (LDS.64) and round them to TF32 (cvt.rna); Q reaches the tensor core
// unrounded (it uses the top 19 bits: truncation). SS form: both operands
// from shared memory descriptors, both truncated, no LDS/cvt per k-tile.
//
// Block: OPTIML_CONSUMERS consumer warpgroups (each 64 P rows = one m64
// wgmma row block x all QN columns), then one producer warpgroup (128
// threads). BK = 32 (one 128-byte swizzle atom of fp32). STAGES-deep ring of
// (Q, P) k-tiles with full/empty mbarriers. The producer fills a stage with
// cp.async (16-byte chunks when the operand's rows are 16-byte aligned, else
// 4-byte elements; zero fill outside the matrix; 4-byte transposing copies
// for an MN-major operand that must be K-major in smem) and its copies arrive
// on the stage's full barrier (cp.async.mbarrier.arrive.noinc).
//
// Macros:
//   OPTIML_TRANS_A/B, OPTIML_HAS_ALPHA/BETA/BIAS, OPTIML_ACT: the ABI above
//   OPTIML_QN          Q rows per block = wgmma N: 64, 128 or 256 (default 256;
//                      OPTIML_BM is accepted as the old name)
//   OPTIML_CONSUMERS   consumer warpgroups, 1 or 2 (default 2); PW = 64 * this
//   OPTIML_PINGPONG    1 (with 2 consumers): each consumer warpgroup computes
//                      its own tiles of QN x 64 (PW = 64), the block's tiles
//                      alternating between them, and their main loops take
//                      turns (named barriers 1 and 2): one warpgroup's
//                      epilogue runs while the other's MMAs keep the tensor
//                      cores busy. 0 (default): both share each tile.
//   OPTIML_STAGES      ring depth, 1..8 (default 4)
//   OPTIML_WAIT_DEPTH  wgmma groups left in flight across k-tiles: 1 (default)
//                      or 0 (wait for each k-tile's MMAs before the next)
//   OPTIML_SS          0 (default): P from registers where it is MN-major in
//                      memory, SS where it is K-major (TRANS_B = 1 with
//                      TRANS_A = 0); 1: always SS (an MN-major P is
//                      transposed by the producer: 4-byte cp.async)
//   OPTIML_TMA         1: the kernel takes three more parameters after beta,
//                      (const __grid_constant__ TmaMap tmQ, tmP, int use_tma):
//                      with use_tma != 0 one producer thread loads each stage
//                      with cp.async.bulk.tensor (3-D maps built on the host:
//                      Q {K, Qdim, batch} box {32, QN, 1}; P in the RS form
//                      {Pdim, K, batch} box {32, 32, 1}, P in the SS form
//                      (K-major: NT) {K, Pdim, batch} box {32, 16, 1} with
//                      element strides {1, 2, 1}, so one box brings the even
//                      or the odd rows of 16 (the SS P row order, perm16);
//                      all SWIZZLE_128B, fp32, OOB zero fill; batch
//                      coordinate 0 when that stride is 0), the full barrier
//                      completing on the transaction bytes; use_tma == 0:
//                      the cp.async path. Needs a K-major Q (NN, NT, TT; TN
//                      transposes A in the producer and has no TMA path).
//                      The launcher (optiml-runtime) encodes the maps.
//   OPTIML_TF32_ROUND  1 (default): cvt.rna the register operand (RS only);
//                      2: cvt.rn (ties to even, one F2FP on sm_90);
//                      0: raw fp32 bits (truncation, like the smem operands)
//   OPTIML_SETMAXNREG  1: producer drops to OPTIML_PRODUCER_REGS registers,
//                      consumers rise to OPTIML_CONSUMER_REGS (default on
//                      for QN = 256 with 2 consumers, needed for 128
//                      accumulators (+ fragments) under the 168 cap).
//                      Defaults 40 / 232 for RS with a K-major Q (the
//                      original m256), else 72 / 216.
//   OPTIML_TF32X3      1: fp32-accurate products on the TF32 tensor cores
//                      ("3xTF32", issue 17): each element x splits into big
//                      = rna_tf32(x) and small = rna_tf32(x - big), both
//                      exact TF32 (so neither the smem operands' truncation
//                      nor any rounding changes them), and each k8 step
//                      issues small_P big_Q, big_P small_Q, big_P big_Q, the
//                      small terms first (small_P small_Q, under 2^-22 |pq|,
//                      is dropped). The consumers split each landed stage:
//                      Q (and P in the SS form) in shared memory, big in
//                      place and small into a second ring, then a fence and
//                      a barrier of all consumers (named barrier 3); P in the
//                      RS form in registers. Needs PINGPONG 0; the rings
//                      take STAGES more Q stages (and P stages in SS).
//   OPTIML_PROMOTE_KT  n > 0 (even): every n k-tiles the consumers wait for
//                      their MMAs, add the accumulator into an fp32 register
//                      sum (round to nearest) and restart it (wgmma's scale-d
//                      0 on the next k8 step: a register write inside the
//                      loop would serialise every wgmma, ptxas C7515). The
//                      tensor core's own fp32 accumulation does not round to
//                      nearest, so its error grows with K faster than an FMA
//                      loop's; 3xTF32 needs this to stay within fp32's error.
//                      Costs QN / 2 registers (the sum). 0 (default): never.
//   OPTIML_X3_SPLIT_ACC 1 (with OPTIML_TF32X3): the two small products go
//                      into an accumulator of their own, the big one into
//                      the other, added (round to nearest) at each promotion
//                      and at the end. The big accumulator then takes 4 of
//                      each k-tile's 12 truncating k8 additions, and the
//                      small one's truncations are 2^-11 of the big's: at
//                      small K, where promotion does not shorten the chain,
//                      this is what keeps 3xTF32 near the SIMT kernel's
//                      error. Costs QN / 2 registers more.
//   OPTIML_SPLIT_K     1: the kernel takes one more parameter right after
//                      beta (before OPTIML_TMA's three), `int splits` (S),
//                      and the module holds
//                      optiml_splitk_reduce (optiml/splitk.cuh). S <= 1: the
//                      plain kernel. S > 1: launch 1 of matmul_f32.cu's
//                      split-K ABI: C is the workspace W [S][batch][M][N],
//                      every element written with its split's raw partial
//                      sum (alpha, beta, bias and the activation are the
//                      reduction's); the tiles are numbered
//                      t = ((z * S + s) * tiles_q + tile_q) * tiles_p + tile_p
//                      and split s takes k-tiles [s T / S, (s + 1) T / S) of
//                      the T = ceil(K / 32) (an empty range writes zeros).
//                      Needs PINGPONG 0 (its ring order assumes equal k-tile
//                      counts per tile). 0 (default): none of it.
//   OPTIML_TRANSPOSE_A 1 (TN only: OPTIML_TRANS_A 1, OPTIML_TRANS_B 0): the
//                      module also holds optiml_transpose_a(const float* A,
//                      float* At, int batch, int K, int M, long long
//                      strideA), which the launcher runs first to copy A,
//                      stored K x M per item, into a packed M x K workspace
//                      (256-thread blocks, at least ceil(M / 32) along x: 32 x
//                      32 tiles through shared memory, blocks loop over K and
//                      items); optiml_matmul
//                      then reads that copy as the NN kernel would (TMA
//                      included). OPTIML_TRANS_A still says how A is stored,
//                      for the module's matrix-vector kernel. TF32 wgmma takes
//                      both shared-memory operands K-major, and the copy at
//                      the bandwidth costs less than the producer's 4-byte
//                      transposing loads.
//
// Tile of C: OPTIML_TILE_M x OPTIML_TILE_N = QN x PW (SWAP) or PW x QN.
// Shared memory: OPTIML_SMEM_BYTES = STAGES * (QN + PW) * 128 + 1024 (the
// 1024 is for aligning the ring to the 128-byte-swizzle period at run time)
// dynamic, plus 16 * STAGES bytes of static mbarriers.
// Default QN 256, 2 consumers, 4 stages: 197632 B dynamic, 384 threads.

#include "optiml/defaults.cuh"  // OPTIML_DTYPE, OPTIML_TRANS_A/B, OPTIML_HAS_ALPHA/BETA/BIAS
#include "optiml/epilogue.cuh"  // OPTIML_ACT and the activations
#ifndef OPTIML_QN
#ifdef OPTIML_BM
#define OPTIML_QN OPTIML_BM
#else
#define OPTIML_QN 256
#endif
#endif
#ifndef OPTIML_CONSUMERS
#define OPTIML_CONSUMERS 2
#endif
#ifndef OPTIML_PINGPONG
#define OPTIML_PINGPONG 0
#endif
#ifndef OPTIML_STAGES
#define OPTIML_STAGES 4
#endif
#ifndef OPTIML_WAIT_DEPTH
#define OPTIML_WAIT_DEPTH 1
#endif
#ifndef OPTIML_TF32_ROUND
#define OPTIML_TF32_ROUND 1
#endif
#ifndef OPTIML_SS
#define OPTIML_SS 0
#endif
#ifndef OPTIML_TMA
#define OPTIML_TMA 0
#endif
#ifndef OPTIML_SPLIT_K
#define OPTIML_SPLIT_K 0
#endif
#ifndef OPTIML_TRANSPOSE_A
#define OPTIML_TRANSPOSE_A 0
#endif
#if OPTIML_TRANSPOSE_A && !(OPTIML_TRANS_A && !OPTIML_TRANS_B)
#error "OPTIML_TRANSPOSE_A turns a TN product into the NN kernel's: needs OPTIML_TRANS_A 1 and OPTIML_TRANS_B 0"
#endif
// Epilogue (WGMMA_NOTES.md, "Round 3"): 2 (EXPERIMENTAL: spills with HAS_BETA) = register passes: old C
// read for the whole tile before any store (acc = alpha acc + beta C_old in
// place, branch-free predicated loads), then bias + activation on all
// accumulators, then the stores; 1 = round 2's per-element path (load old C,
// compute, store, next row: every load waits behind the previous stores; default).
#ifndef OPTIML_EPI
#define OPTIML_EPI 1
#endif
// gelu: 1 (default) = 0.5 v erfc(-v/sqrt 2) with erfc from Abramowitz-Stegun
// 7.1.26 (|error| <= 1.5e-7 on erfc, 7e-8 |v| on gelu; rcp.approx + ex2.approx:
// 18 instructions, 2 MUFU); 0 = libdevice erfcf (~50 instructions, 3 MUFU).
#ifndef OPTIML_EPI_JB
#define OPTIML_EPI_JB 8   // OPTIML_EPI 2: j per batch of old-C loads (2 JB loads of 8 bytes)
#endif
// OPTIML_C_PREFETCH 1 (default with HAS_BETA): the producer asks L2 for the
// tile's C block (cp.async.bulk.prefetch.L2 per row when rows are 16-byte
// aligned, prefetch.global.L2 per 128 bytes otherwise) when it loads k-tile
// ktiles - OPTIML_C_PREFETCH_KT of that tile, so the epilogue's C_old loads hit L2.
#ifndef OPTIML_C_PREFETCH
// TMA + prefetch spills the 40-register producer (48 B); a split product's first launch reads no C.
#define OPTIML_C_PREFETCH (OPTIML_HAS_BETA && !OPTIML_TMA && !OPTIML_SPLIT_K)
#endif
#ifndef OPTIML_C_PREFETCH_KT
#define OPTIML_C_PREFETCH_KT 8
#endif
#ifndef OPTIML_TF32X3
#define OPTIML_TF32X3 0
#endif
#ifndef OPTIML_PROMOTE_KT
#define OPTIML_PROMOTE_KT 0
#endif
#ifndef OPTIML_X3_SPLIT_ACC
#define OPTIML_X3_SPLIT_ACC 0
#endif
#if OPTIML_SPLIT_K && OPTIML_C_PREFETCH
#error "OPTIML_C_PREFETCH warms C for the epilogue, which a split product's first launch does not run: needs OPTIML_SPLIT_K 0"
#endif
#if OPTIML_SPLIT_K && OPTIML_PINGPONG
#error "OPTIML_SPLIT_K gives tiles unequal k-tile counts, which ping-pong's ring order cannot take: needs OPTIML_PINGPONG 0"
#endif
#if OPTIML_X3_SPLIT_ACC && !OPTIML_TF32X3
#error "OPTIML_X3_SPLIT_ACC splits 3xTF32's products: needs OPTIML_TF32X3"
#endif
// The consumers' accumulators as the k-tile steps take them: the big products' `acc`, and with
// OPTIML_X3_SPLIT_ACC the small products' `accs`.
#if OPTIML_X3_SPLIT_ACC
#define OPTIML_ACCS_PARAM , float (&accs)[QN / 2]
#define OPTIML_ACCS , accs
#define OPTIML_SMALL_ACC accs
#else
#define OPTIML_ACCS_PARAM
#define OPTIML_ACCS
#define OPTIML_SMALL_ACC acc
#endif

// orientation and operand storage (see the table above), as the kernel reads A: stored M x K where the launcher
// transposed it first
#if OPTIML_TRANSPOSE_A
#define OPTIML_KERNEL_TRANS_A 0
#else
#define OPTIML_KERNEL_TRANS_A OPTIML_TRANS_A
#endif
#define OPTIML_SWAP ((OPTIML_KERNEL_TRANS_A && OPTIML_TRANS_B) ? 0 : 1)
#if OPTIML_SWAP
#define OPTIML_P_KMAJOR (OPTIML_TRANS_B ? 1 : 0)   // P = B^T: B stored N x K
#define OPTIML_Q_KMAJOR (OPTIML_KERNEL_TRANS_A ? 0 : 1)   // Q = A: A stored M x K
#else
#define OPTIML_P_KMAJOR 0                          // P = A stored K x M
#define OPTIML_Q_KMAJOR 1                          // Q = B^T: B stored N x K
#endif
#define OPTIML_P_SMEM ((OPTIML_P_KMAJOR || OPTIML_SS) ? 1 : 0)  // SS form

#ifndef OPTIML_SETMAXNREG
#if OPTIML_QN == 256 && OPTIML_CONSUMERS == 2
#define OPTIML_SETMAXNREG 1
#else
#define OPTIML_SETMAXNREG 0
#endif
#endif
#if !OPTIML_P_SMEM && OPTIML_Q_KMAJOR
// (with OPTIML_SPLIT_K the split's tile decode spills the 40-register producer, 40 bytes with two consumers,
// read once per tile; 48 would leave the consumers 224, too few for their accumulators)
#define OPTIML_DEF_PRODUCER_REGS 40
#define OPTIML_DEF_CONSUMER_REGS 232
#else
#define OPTIML_DEF_PRODUCER_REGS 72
#define OPTIML_DEF_CONSUMER_REGS 216
#endif
#ifndef OPTIML_PRODUCER_REGS
#define OPTIML_PRODUCER_REGS OPTIML_DEF_PRODUCER_REGS
#endif
#ifndef OPTIML_CONSUMER_REGS
#define OPTIML_CONSUMER_REGS OPTIML_DEF_CONSUMER_REGS
#endif

#define OPTIML_PW (OPTIML_PINGPONG ? 64 : 64 * OPTIML_CONSUMERS)
#define OPTIML_BK 32
#define OPTIML_THREADS (128 * (OPTIML_CONSUMERS + 1))
#define OPTIML_Q_STAGE_BYTES (OPTIML_QN * 128)
#define OPTIML_P_STAGE_BYTES (OPTIML_PW * 128)
#define OPTIML_SMEM_BYTES                                                                                  \
    (OPTIML_STAGES * (OPTIML_Q_STAGE_BYTES + OPTIML_P_STAGE_BYTES) +                                    \
     OPTIML_TF32X3 * OPTIML_STAGES * (OPTIML_Q_STAGE_BYTES + OPTIML_P_SMEM * OPTIML_P_STAGE_BYTES) + 1024)
#define OPTIML_DYN_SMEM_BYTES OPTIML_SMEM_BYTES
#if OPTIML_SWAP
#define OPTIML_TILE_M OPTIML_QN
#define OPTIML_TILE_N OPTIML_PW
#else
#define OPTIML_TILE_M OPTIML_PW
#define OPTIML_TILE_N OPTIML_QN
#endif

#if OPTIML_QN != 64 && OPTIML_QN != 128 && OPTIML_QN != 256
#error "OPTIML_QN must be 64, 128 or 256"
#endif
#if OPTIML_CONSUMERS != 1 && OPTIML_CONSUMERS != 2
#error "OPTIML_CONSUMERS must be 1 or 2"
#endif
#if OPTIML_PINGPONG && OPTIML_CONSUMERS != 2
#error "OPTIML_PINGPONG alternates two consumer warpgroups: needs OPTIML_CONSUMERS 2"
#endif
#if OPTIML_STAGES < 1 || OPTIML_STAGES > 8
#error "OPTIML_STAGES must be 1..8"
#endif
#if OPTIML_WAIT_DEPTH != 0 && OPTIML_WAIT_DEPTH != 1
#error "OPTIML_WAIT_DEPTH must be 0 or 1"
#endif
#if OPTIML_WAIT_DEPTH == 1 && OPTIML_STAGES < 2
#error "OPTIML_WAIT_DEPTH 1 holds a stage across the next k-tile: needs OPTIML_STAGES >= 2"
#endif
#if OPTIML_TMA && (!OPTIML_Q_KMAJOR || (OPTIML_P_SMEM && !OPTIML_P_KMAJOR))
#error "OPTIML_TMA needs a K-major Q and a P that is either in registers or K-major in memory (NN, NT, TT with OPTIML_SS 0)"
#endif
#if OPTIML_EPI != 1 && OPTIML_EPI != 2
#error "OPTIML_EPI must be 1 or 2"
#endif
#if OPTIML_TF32X3 && OPTIML_PINGPONG
#error "OPTIML_TF32X3 splits each stage with every consumer warpgroup: needs OPTIML_PINGPONG 0"
#endif
#if OPTIML_PROMOTE_KT < 0 || OPTIML_PROMOTE_KT % 2
#error "OPTIML_PROMOTE_KT must be 0 or a positive even number (the main loop takes k-tiles in pairs)"
#endif
// setmaxnreg only moves registers within what the block was launched with: OPTIML_THREADS times the per-thread
// count __launch_bounds__(OPTIML_THREADS, 1) allows (168 for 384 threads: 64512, not the 65536 of the file).
// Past it the consumers' setmaxnreg.inc waits forever (48 / 232 with two consumers hung on an H100).
#if OPTIML_SETMAXNREG && (OPTIML_PRODUCER_REGS * 128 + OPTIML_CONSUMER_REGS * 128 * OPTIML_CONSUMERS > OPTIML_THREADS * ((65536 / OPTIML_THREADS) & ~7))
#error "setmaxnreg budget exceeds the block's launch-time registers"
#endif
// wgmma and setmaxnreg exist only in the arch-specific sm_90a target (the
// host pass of nvcc has no __CUDA_ARCH__ and is let through).
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "matmul_wgmma_tf32.cu needs the sm_90a target (-gencode=arch=compute_90a,code=sm_90a / NVRTC -arch=sm_90a)"
#endif

#include "optiml/sm90.cuh"  // TmaMap and the PTX wrappers (mbarrier, TMA, wgmma, setmaxnreg)

namespace optiml_wg {

constexpr int QN = OPTIML_QN;
constexpr int PW = OPTIML_PW;
constexpr int BK = OPTIML_BK;
constexpr int STAGES = OPTIML_STAGES;
constexpr int NCONS = OPTIML_CONSUMERS;
constexpr unsigned Q_STAGE = OPTIML_Q_STAGE_BYTES;
constexpr unsigned P_STAGE = OPTIML_P_STAGE_BYTES;

using namespace optiml_sm90;

// ---------------------------------------------------------------- PTX wrappers of this template
__device__ __forceinline__ void lds64(unsigned addr, float& x, float& y) {
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(x), "=f"(y) : "r"(addr) : "memory");
}
__device__ __forceinline__ unsigned to_tf32(float x) {
#if OPTIML_TF32_ROUND == 2
    unsigned r;  // round to nearest even: one instruction on sm_90 (cvt.rna takes ~3)
    asm("cvt.rn.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
#elif OPTIML_TF32_ROUND
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
#else
    return __float_as_uint(x);
#endif
}

// wgmma shared-memory matrix descriptor for a K-major operand stored with the
// 128-byte swizzle: rows of 128 bytes (32 fp32 along K), 8-row groups of
// 1024 bytes (stride byte offset = 1024), leading byte offset unused for
// swizzled K-major layouts (encoded 1), base offset 0 (the ring is
// 1024-byte aligned), layout type 1 = 128B swizzle in bits 62-63.
// Advancing 8 along K inside the 128-byte row = +32 bytes = +2 in the
// start-address field (the swizzle is applied to the final address bits).
__device__ __forceinline__ unsigned long long make_desc(unsigned saddr) {
    return (unsigned long long)((saddr & 0x3FFFFu) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) |
           (1ull << 62);
}

// ---------------------------------------------------------------- wgmma (A from registers)
__device__ __forceinline__ void wgmma_rs_n16(float (&d)[8], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned long long desc, int scale_d = 1) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %13, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7"
        "}, {%8, %9, %10, %11}, %12, p, 1, 1;\n\t}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(scale_d)
        : "memory");
}

__device__ __forceinline__ void wgmma_rs_n64(float (&d)[32], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned long long desc, int scale_d = 1) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %37, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %36, p, 1, 1;\n\t}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(scale_d)
        : "memory");
}

__device__ __forceinline__ void wgmma_rs_n128(float (&d)[64], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned long long desc, int scale_d = 1) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %69, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, p, 1, 1;\n\t}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(scale_d)
        : "memory");
}

__device__ __forceinline__ void wgmma_rs_n256(float (&d)[128], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned long long desc, int scale_d = 1) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %133, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, {%128, %129, %130, %131}, %132, p, 1, 1;\n\t}\n"
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
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(scale_d)
        : "memory");
}


// ---------------------------------------------------------------- wgmma (both operands from shared memory)
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], unsigned long long descA, unsigned long long descB, int scale_d = 1) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %34, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1;\n\t}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(descA), "l"(descB), "r"(scale_d)
        : "memory");
}

__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], unsigned long long descA, unsigned long long descB, int scale_d = 1) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1;\n\t}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(descA), "l"(descB), "r"(scale_d)
        : "memory");
}

__device__ __forceinline__ void wgmma_ss_n256(float (&d)[128], unsigned long long descA, unsigned long long descB, int scale_d = 1) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1;\n\t}\n"
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
        : "l"(descA), "l"(descB), "r"(scale_d)
        : "memory");
}

// One k8 step for the whole block tile of this warpgroup: D (64 x QN) += a (64 x 8) * desc (8 x QN) (scale_d 0:
// D = a * desc).
__device__ __forceinline__ void mma_k8(float (&acc)[QN / 2], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                       unsigned long long desc, int scale_d = 1) {
#if OPTIML_QN == 256
    wgmma_rs_n256(acc, a0, a1, a2, a3, desc, scale_d);
#elif OPTIML_QN == 128
    wgmma_rs_n128(acc, a0, a1, a2, a3, desc, scale_d);
#else
    wgmma_rs_n64(acc, a0, a1, a2, a3, desc, scale_d);
#endif
}
// The same, both operands from shared memory (SS form).
__device__ __forceinline__ void mma_ss_k8(float (&acc)[QN / 2], unsigned long long descP, unsigned long long descQ,
                                          int scale_d = 1) {
#if OPTIML_QN == 256
    wgmma_ss_n256(acc, descP, descQ, scale_d);
#elif OPTIML_QN == 128
    wgmma_ss_n128(acc, descP, descQ, scale_d);
#else
    wgmma_ss_n64(acc, descP, descQ, scale_d);
#endif
}

// ---------------------------------------------------------------- producer
// Returns v unchanged but hides where it came from, so that address math
// derived from it is redone inside the k loop instead of being hoisted out
// of it and kept live (the producer runs on OPTIML_PRODUCER_REGS registers).
__device__ __forceinline__ long long opaque64(long long v) {
    asm volatile("" : "+l"(v));
    return v;
}
__device__ __forceinline__ const float* opaque_ptr(const float* p) {
    asm volatile("" : "+l"(p));
    return p;
}
__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull;
}

// Row permutation of the SS P stage (within each 16 rows): stage row R holds
// P row perm(R) = 16 (R / 16) + 2 (R % 8) + (R % 16) / 8, so that wgmma rows
// g and g + 8 of each warp (stage rows 16w + g, 16w + g + 8) are P rows
// 16w + 2g and 16w + 2g + 1: every thread owns adjacent pairs of P (8-byte
// stores of C when P = n).
__device__ __forceinline__ constexpr int perm16(int r) { return 2 * (r & 7) + ((r >> 3) & 1); }

// A k-tile of a K-major operand (ROWS rows x 32 of K, row r of the source at
// src0 + r * K) into one stage: stage row R at R * 128 bytes, its 16-byte
// chunk c (k = 4c .. 4c+3) at chunk position c ^ (R & 7) (the 128-byte
// swizzle the descriptor names). Thread p (0..127) owns chunk c = p & 7 of
// stage rows R = r0 + 16 i, r0 = p >> 3: a warp reads 4 whole 128-byte row
// segments per pass. (r0 + 16 i) & 7 == r0 & 7, so the thread's swizzled
// offset is the same for every i. PERM: stage row R holds source row
// 16 (R / 16) + perm16(R % 16) (the SS P layout), else row R.
//   dst: stage + this thread's offset; src: &X[row0 + srow(r0)][k0 + 4c];
//   step16 = 16 * K (elements); rows_left = rows - row0 - srow(r0);
//   kleft = K - k0 - 4c.
template <int ROWS, bool VEC>
__device__ __forceinline__ void load_kmajor(unsigned dst, const float* src, long long step16, int rows_left,
                                            int kleft, const float* dummy) {
#pragma unroll
    for (int i = 0; i < ROWS / 16; ++i) {
        const bool rok = 16 * i < rows_left;
        if (VEC) {  // K % 4 == 0: a chunk is wholly inside or outside
            const bool ok = rok && kleft > 0;
            cp16(dst + (unsigned)(i * 16 * 128), ok ? src : dummy, ok ? 16u : 0u);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const bool ok = rok && e < kleft;
                cp4(dst + (unsigned)(i * 16 * 128 + 4 * e), ok ? src + e : dummy, ok ? 4u : 0u);
            }
        }
        src += step16;
    }
}

// A k-tile of an MN-major operand (stored K rows x `ld` contiguous, element
// (r, k) at k * ld + r) TRANSPOSED into the K-major stage layout above
// (ROWS stage rows x 32 of K), with 4-byte cp.async. Producer warp wi, lane
// (dr = lane & 7, kk = lane >> 3): one copy per (j, c) puts element
// (row(R), k0 + 4c + kk) at stage row R = 32 j + 8 wi + dr, chunk c, word kk.
// Smem: the 32 lanes write 8 rows x 4 words of swizzled chunk c ^ dr: all 32
// banks. Global: 4 k-rows x 8 rows (32 bytes each, 64 with PERM).
// Source row(R) = R (identity) or 16 (R / 16) + perm16(R % 16) (PERM) =
// 32 j + [16 (wi >> 1) + (wi & 1) + 2 dr] for R = 32 j + 8 wi + dr.
//   dst: stage + (8 wi + dr) * 128 + 4 kk; xr = dr << 4 (the swizzle term);
//   src: &X[k0 + kk][row0 + row(8 wi + dr)]; ld4 = 4 * ld;
//   rows_left = rows - row0 - row(8 wi + dr); kleft = K - k0 - kk.
template <int ROWS>
__device__ __forceinline__ void load_transposed(unsigned dst, unsigned xr, const float* src, long long ld4,
                                                int rows_left, int kleft, const float* dummy) {
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        const unsigned d = dst + (((unsigned)c << 4) ^ xr);
        const bool kok = 4 * c < kleft;
#pragma unroll
        for (int j = 0; j < ROWS / 32; ++j) {
            const bool ok = kok && 32 * j < rows_left;
            cp4(d + (unsigned)(j * 4096), ok ? src + 32 * j : dummy, ok ? 4u : 0u);
        }
        src += ld4;
    }
}

// A k-tile of the MN-major P operand for the register (RS) path: 32 of K x
// PW of P, as PW / 32 boxes of 32 k-rows x 128 bytes (32 P rows): box b at
// b * 4096, k-row r at r * 128, its 16-byte chunk c (P rows 32 b + 4c .. +3)
// at chunk position c ^ (r & 7). Thread p owns chunk cn = p % (PW/4) (box
// cn >> 3, c = cn & 7) of k-rows r0 + RSTEP i, r0 = p / (PW/4): a warp reads
// whole 128-byte row segments. RSTEP is 4 or 8, so (r0 + RSTEP i) & 7 is
// r0 & 7 for even multiples of 4 and (r0 & 7) ^ 4 for odd ones: two
// precomputed offsets dstE / dstO.
//   src: &X[k0 + r0][p0 + 4cn] (stored K x ld); stepR = RSTEP * ld;
//   krows_left = K - k0 - r0; cols_left = ld - p0 - 4cn.
#define OPTIML_P_CPR (OPTIML_PW / 4)          // 16-byte chunks per k-row of the tile
#define OPTIML_P_RSTEP (128 / OPTIML_P_CPR)   // k-rows per pass (4 or 8)
template <bool VEC>
__device__ __forceinline__ void load_boxes(unsigned dstE, unsigned dstO, const float* src, long long stepR,
                                           int krows_left, int cols_left, const float* dummy) {
#pragma unroll
    for (int i = 0; i < BK / OPTIML_P_RSTEP; ++i) {
        const unsigned dst = (((OPTIML_P_RSTEP * i) & 4) ? dstO : dstE) + (unsigned)(OPTIML_P_RSTEP * i * 128);
        const bool rok = OPTIML_P_RSTEP * i < krows_left;
        if (VEC) {  // ld % 4 == 0
            const bool ok = rok && cols_left > 0;
            cp16(dst, ok ? src : dummy, ok ? 16u : 0u);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const bool ok = rok && e < cols_left;
                cp4(dst + 4u * e, ok ? src + e : dummy, ok ? 4u : 0u);
            }
        }
        src += stepR;
    }
}

// ---------------------------------------------------------------- consumer k-tile
// Makes the 16 registers look used here, so that they stay allocated (and
// untouched) until this point. wgmma reads its register operand A
// asynchronously, until the wgmma.wait_group that retires it; ptxas does not
// extend the operand's live range for that (seen in SASS: with one fragment
// set, the next k-tile's LDS overwrote the registers of the group still in
// flight). So the RS k loop is unrolled by two with two fragment sets, and
// each step keeps the OTHER set alive until after the wait that retires the
// group reading it.
__device__ __forceinline__ void keep_alive(const unsigned (&f)[16]) {
    asm volatile("" ::"r"(f[0]), "r"(f[1]), "r"(f[2]), "r"(f[3]), "r"(f[4]), "r"(f[5]), "r"(f[6]), "r"(f[7]),
                 "r"(f[8]), "r"(f[9]), "r"(f[10]), "r"(f[11]), "r"(f[12]), "r"(f[13]), "r"(f[14]), "r"(f[15]));
}

// A fragment set's registers (a macro: a namespace-scope constant here would be emitted as a global, changing
// every variant's PTX). With OPTIML_TF32X3: the big parts (0..15), then the small parts (16..31).
#define OPTIML_FRAGS (OPTIML_TF32X3 ? 32 : 16)
#if OPTIML_TF32X3
__device__ __forceinline__ void keep_alive(const unsigned (&f)[32]) {
    keep_alive(*reinterpret_cast<const unsigned(*)[16]>(&f[0]));
    keep_alive(*reinterpret_cast<const unsigned(*)[16]>(&f[16]));
}
// x = big + small + (under 2^-22 |x|): big = rna_tf32(x), small = rna_tf32(x - big), both exact TF32 (x - big is
// exact in fp32). Bits, as wgmma's register operands take them.
__device__ __forceinline__ void split_tf32(float x, unsigned& big, unsigned& small) {
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(big) : "f"(x));
    const float rest = x - __uint_as_float(big);
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(small) : "f"(rest));
}
// 16-byte chunks first, first + step, ... (< chunks) of the stage at `big`: each element's big part in place, its
// small part at the same offset from `small`. Elementwise, so the swizzle does not matter.
__device__ __forceinline__ void split_chunks(unsigned big, unsigned small, int chunks, int first, int step) {
#pragma unroll 1
    for (int c = first; c < chunks; c += step) {
        const unsigned at = 16u * (unsigned)c;
        float v[4];
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                     : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
                     : "r"(big + at)
                     : "memory");
        unsigned b[4], t[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) split_tf32(v[e], b[e], t[e]);
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(big + at), "r"(b[0]), "r"(b[1]), "r"(b[2]),
                     "r"(b[3])
                     : "memory");
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(small + at), "r"(t[0]), "r"(t[1]), "r"(t[2]),
                     "r"(t[3])
                     : "memory");
    }
}
#endif

struct Consumer {
    unsigned full0, empty0, sQ0, sP0, off0, off1;
    bool leader;   // lane 0 of the warp
    unsigned it;   // k-tiles consumed by this block so far (ring position)
    unsigned prev; // stage of the group still in flight (WAIT_DEPTH 1)
#if OPTIML_TF32X3
    unsigned sQs0, sPs0;  // the rings of small parts (sPs0: SS only)
    int ctid;             // this thread among all consumer threads

    // Splits landed stage s (after its full barrier): Q with every consumer thread, P (SS form) with this
    // warpgroup's, its 64 stage rows at off0. The fence makes the generic-proxy stores visible to wgmma's reads,
    // the barrier waits for every consumer's share.
    __device__ __forceinline__ void split(unsigned s) {
        split_chunks(sQ0 + s * Q_STAGE, sQs0 + s * Q_STAGE, (int)(Q_STAGE / 16u), ctid, 128 * NCONS);
#if OPTIML_P_SMEM
        split_chunks(sP0 + s * P_STAGE + off0, sPs0 + s * P_STAGE + off0, 64 * 128 / 16, ctid & 127, 128);
#endif
        fence_proxy_async();
        named_bar_sync(3, 128 * NCONS);
    }
#endif

    // retire the previous group (WAIT_DEPTH 1) or this one (0), release its stage
    __device__ __forceinline__ void retire(unsigned s, bool first) {
#if OPTIML_WAIT_DEPTH == 1
        wgmma_wait<1>();
        mbar_arrive_if(empty0 + 8u * prev, leader && !first);
#else
        wgmma_wait<0>();
        mbar_arrive_if(empty0 + 8u * s, leader);
#endif
        (void)first;
        prev = s;
        ++it;
    }

    // RS k-tile: load this thread's register-operand fragments (P rows from
    // the box layout) into `cur`, issue the 4 k8 wgmmas against the Q stage.
    // (restart 0: the first k8 step overwrites the accumulator, after a promotion.)
    __device__ __forceinline__ void step_rs(float (&acc)[QN / 2] OPTIML_ACCS_PARAM, unsigned (&cur)[OPTIML_FRAGS],
                                            const unsigned (&other)[OPTIML_FRAGS], bool first, int restart = 1) {
        const unsigned s = it % STAGES;
        const unsigned ph = (it / STAGES) & 1u;
        mbar_wait(full0 + 8u * s, ph);
        fence_proxy_async();
#if OPTIML_TF32X3
        split(s);
#endif
        const unsigned sp = sP0 + s * P_STAGE;
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
            float x0, y0, x1, y1;
            lds64(sp + off0 + ks * 1024u, x0, y0);
            lds64(sp + off1 + ks * 1024u, x1, y1);
#if OPTIML_TF32X3
            split_tf32(x0, cur[4 * ks + 0], cur[16 + 4 * ks + 0]);
            split_tf32(y0, cur[4 * ks + 1], cur[16 + 4 * ks + 1]);
            split_tf32(x1, cur[4 * ks + 2], cur[16 + 4 * ks + 2]);
            split_tf32(y1, cur[4 * ks + 3], cur[16 + 4 * ks + 3]);
#else
            cur[4 * ks + 0] = to_tf32(x0);  // (row g,     k t)
            cur[4 * ks + 1] = to_tf32(y0);  // (row g + 8, k t)
            cur[4 * ks + 2] = to_tf32(x1);  // (row g,     k t + 4)
            cur[4 * ks + 3] = to_tf32(y1);  // (row g + 8, k t + 4)
#endif
        }
        const unsigned long long desc = make_desc(sQ0 + s * Q_STAGE);
        wgmma_fence();
#if OPTIML_TF32X3
        // Two groups: the small parts' products, then the big parts'. The wait below (one group left in
        // flight) retires the first, so only the big parts stay in use across the next k-tile: 16 registers
        // fewer than one group of all three products would hold.
        const unsigned long long descs = make_desc(sQs0 + s * Q_STAGE);
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
            mma_k8(OPTIML_SMALL_ACC, cur[16 + 4 * ks + 0], cur[16 + 4 * ks + 1], cur[16 + 4 * ks + 2],
                   cur[16 + 4 * ks + 3], desc + 2ull * ks, ks == 0 ? restart : 1);
        wgmma_commit();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
            mma_k8(OPTIML_SMALL_ACC, cur[4 * ks + 0], cur[4 * ks + 1], cur[4 * ks + 2], cur[4 * ks + 3],
                   descs + 2ull * ks);
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
            mma_k8(acc, cur[4 * ks + 0], cur[4 * ks + 1], cur[4 * ks + 2], cur[4 * ks + 3], desc + 2ull * ks,
                   OPTIML_X3_SPLIT_ACC && ks == 0 ? restart : 1);
#else
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
            mma_k8(acc, cur[4 * ks + 0], cur[4 * ks + 1], cur[4 * ks + 2], cur[4 * ks + 3], desc + 2ull * ks,
                   ks == 0 ? restart : 1);
#endif
        wgmma_commit();
        retire(s, first);
#if OPTIML_TF32X3
        // The retired groups read `other` and this set's small parts: both may be overwritten from here on.
        keep_alive(*reinterpret_cast<const unsigned(*)[16]>(&other[0]));
        keep_alive(*reinterpret_cast<const unsigned(*)[16]>(&cur[16]));
#else
        keep_alive(other);  // the group reading `other` is retired: it may be overwritten from here on
#endif
    }

    // SS k-tile: off0 = this warpgroup's 64-row slice of the P stage.
    __device__ __forceinline__ void step_ss(float (&acc)[QN / 2] OPTIML_ACCS_PARAM, bool first, int restart = 1) {
        const unsigned s = it % STAGES;
        const unsigned ph = (it / STAGES) & 1u;
        mbar_wait(full0 + 8u * s, ph);
        fence_proxy_async();
#if OPTIML_TF32X3
        split(s);
#endif
        const unsigned long long dq = make_desc(sQ0 + s * Q_STAGE);
        const unsigned long long dp = make_desc(sP0 + s * P_STAGE + off0);
        wgmma_fence();
#if OPTIML_TF32X3
        const unsigned long long dqs = make_desc(sQs0 + s * Q_STAGE);
        const unsigned long long dps = make_desc(sPs0 + s * P_STAGE + off0);
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
            mma_ss_k8(OPTIML_SMALL_ACC, dps + 2ull * ks, dq + 2ull * ks, ks == 0 ? restart : 1);
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) mma_ss_k8(OPTIML_SMALL_ACC, dp + 2ull * ks, dqs + 2ull * ks);
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
            mma_ss_k8(acc, dp + 2ull * ks, dq + 2ull * ks, OPTIML_X3_SPLIT_ACC && ks == 0 ? restart : 1);
#else
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) mma_ss_k8(acc, dp + 2ull * ks, dq + 2ull * ks, ks == 0 ? restart : 1);
#endif
        wgmma_commit();
        retire(s, first);
    }
};

// ---------------------------------------------------------------- consumer epilogue
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
// Columns n, n + 1 of one row of C: x, y (+ bias bx, by). vec2: N even and
// the row 8-byte aligned (n is even), so n < N implies n + 1 < N.
__device__ __forceinline__ void store2(float* __restrict__ row, int n, int N, bool vec2, float x, float y, float bx,
                                       float by, float alpha, float beta) {
    if (vec2) {
        if (n < N) {
            float ox = 0.f, oy = 0.f;
#if OPTIML_HAS_BETA
            const float2 o = *reinterpret_cast<const float2*>(row + n);
            ox = o.x;
            oy = o.y;
#endif
            *reinterpret_cast<float2*>(row + n) =
                make_float2(epilogue(x, alpha, beta, ox, bx), epilogue(y, alpha, beta, oy, by));
        }
    } else {
        if (n < N) {
            float o = 0.f;
#if OPTIML_HAS_BETA
            o = row[n];
#endif
            row[n] = epilogue(x, alpha, beta, o, bx);
        }
        if (n + 1 < N) {
            float o = 0.f;
#if OPTIML_HAS_BETA
            o = row[n + 1];
#endif
            row[n + 1] = epilogue(y, alpha, beta, o, by);
        }
    }
}
__device__ __forceinline__ float bias_at(const float* __restrict__ bias, int n, int N) {
#if OPTIML_HAS_BIAS
    return n < N ? bias[n] : 0.f;
#else
    (void)bias; (void)n; (void)N;
    return 0.f;
#endif
}


// ---- OPTIML_EPI 2: the whole tile in register passes.
// Predicated loads (0 where !ok): no branch, so ptxas can issue a whole
// batch of them back to back (nothing is stored before the last one).
__device__ __forceinline__ float2 ldg2_if(const float* p, bool ok) {
    float2 r;
    asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %3, 0;\n\tmov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\t"
        "@q ld.global.v2.f32 {%0, %1}, [%2];\n\t}\n"
        : "=f"(r.x), "=f"(r.y)
        : "l"(p), "r"((int)ok));
    return r;
}
__device__ __forceinline__ float ldg_if(const float* p, bool ok) {
    float r;
    asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %2, 0;\n\tmov.b32 %0, 0;\n\t"
        "@q ld.global.f32 %0, [%1];\n\t}\n"
        : "=f"(r)
        : "l"(p), "r"((int)ok));
    return r;
}
// Returns p, made to depend on v (no instruction).
__device__ __forceinline__ const float* fence_after(const float* p, float v) {
    asm volatile("" : "+l"(p) : "f"(v));
    return p;
}
// Accumulator pairs. acc[4j + e] is (P row pp + (e >> 1), Q row qb + 8j + (e & 1)).
// Pair h (0, 1) of j = two adjacent columns of one row of C:
//   SWAP 1 (C[q][p]): row qb + 8j + h, columns pp, pp + 1: acc[4j + h], acc[4j + 2 + h]
//   SWAP 0 (C[p][q]): row pp + h, columns qb + 8j, + 1:    acc[4j + 2h], acc[4j + 2h + 1]
#if OPTIML_SWAP
#define OPTIML_PAIR_ROW(j, h) (qb + 8 * (j) + (h))
#define OPTIML_PAIR_COL(j, h) (pp)
#define OPTIML_PAIR_X(j, h) (4 * (j) + (h))
#define OPTIML_PAIR_Y(j, h) (4 * (j) + 2 + (h))
#else
#define OPTIML_PAIR_ROW(j, h) (pp + (h))
#define OPTIML_PAIR_COL(j, h) (qb + 8 * (j))
#define OPTIML_PAIR_X(j, h) (4 * (j) + 2 * (h))
#define OPTIML_PAIR_Y(j, h) (4 * (j) + 2 * (h) + 1)
#endif
#if OPTIML_SPLIT_K
// A split's raw partial sums of the tile into its slice Wz of the workspace (M x N, row-major): the pairs of
// the epilogue below, without it.
__device__ __forceinline__ void store_partials(const float (&acc)[QN / 2], float* __restrict__ Wz, int M, int N,
                                               int pp, int qb) {
    const bool vec2 = (N & 1) == 0 && (reinterpret_cast<unsigned long long>(Wz) & 7ull) == 0ull;
#pragma unroll
    for (int j = 0; j < QN / 8; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = OPTIML_PAIR_ROW(j, h), c = OPTIML_PAIR_COL(j, h);
            if (r >= M || c >= N) continue;
            float* w = Wz + (long long)r * N + c;
            const float x = acc[OPTIML_PAIR_X(j, h)], y = acc[OPTIML_PAIR_Y(j, h)];
            if (vec2) {
                *reinterpret_cast<float2*>(w) = make_float2(x, y);
            } else {
                w[0] = x;
                if (c + 1 < N) w[1] = y;
            }
        }
    }
}
#endif

// v = act(alpha acc + beta C_old + bias) for the tile, stored to C[z] (Cz).
// vec2: N even and Cz 8-byte aligned (columns come in even pairs).
__device__ __forceinline__ void epilogue_tile(float (&acc)[QN / 2], float* __restrict__ Cz,
                                              const float* __restrict__ bias, int M, int N, int pp, int qb,
                                              float alpha, float beta) {
    (void)bias; (void)alpha; (void)beta;
    // pass 1: acc = alpha acc + beta C_old (loads only; no store in between)
#if OPTIML_HAS_BETA
#pragma unroll
    for (int j = 0; j < QN / 8; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = OPTIML_PAIR_ROW(j, h), c = OPTIML_PAIR_COL(j, h);
            const float2 o = ldg2_if(Cz + (long long)r * N + c, r < M && c < N);
#if OPTIML_HAS_ALPHA
            acc[OPTIML_PAIR_X(j, h)] = fmaf(beta, o.x, alpha * acc[OPTIML_PAIR_X(j, h)]);
            acc[OPTIML_PAIR_Y(j, h)] = fmaf(beta, o.y, alpha * acc[OPTIML_PAIR_Y(j, h)]);
#else
            acc[OPTIML_PAIR_X(j, h)] = fmaf(beta, o.x, acc[OPTIML_PAIR_X(j, h)]);
            acc[OPTIML_PAIR_Y(j, h)] = fmaf(beta, o.y, acc[OPTIML_PAIR_Y(j, h)]);
#endif
        }
    }
#elif OPTIML_HAS_ALPHA
#pragma unroll
    for (int i = 0; i < QN / 2; ++i) acc[i] *= alpha;
#endif
    // pass 2: bias, activation, store
#if OPTIML_SWAP
    const float b0 = bias_at(bias, pp, N), b1 = bias_at(bias, pp + 1, N);
#endif
#pragma unroll
    for (int j = 0; j < QN / 8; ++j) {
#if !OPTIML_SWAP
        const float b0 = bias_at(bias, qb + 8 * j, N), b1 = bias_at(bias, qb + 8 * j + 1, N);
#endif
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float x = acc[OPTIML_PAIR_X(j, h)], y = acc[OPTIML_PAIR_Y(j, h)];
#if OPTIML_HAS_BIAS
            x += b0;
            y += b1;
#endif
            const int r = OPTIML_PAIR_ROW(j, h), c = OPTIML_PAIR_COL(j, h);
            if (r < M && c < N)
                *reinterpret_cast<float2*>(Cz + (long long)r * N + c) = make_float2(optiml_act_fast(x), optiml_act_fast(y));
        }
    }
}

// ---- L2 prefetch of a tile's C block (issued by the producer, OPTIML_C_PREFETCH)
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
}
__device__ __forceinline__ void prefetch_l2(const void* p) {
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}
// Rows first, first + step, ... of the tile (tile index `tile`, C tile rows
// TILE_M from row0, TILE_N columns from col0) of C[z].
__device__ __forceinline__ void prefetch_c_tile(const float* C, long long strideC, int M, int N, long long tile,
                                                long long per_item, long long tiles_p, int first, int step) {
    const long long z = tile / per_item;
    const long long rr = tile - z * per_item;
    const int q0 = (int)(rr / tiles_p) * QN;
    const int p0 = (int)(rr % tiles_p) * PW;
#if OPTIML_SWAP
    const int row0 = q0, col0 = p0;
#else
    const int row0 = p0, col0 = q0;
#endif
    const float* Cz = C + z * strideC;
    const int nrows = min(OPTIML_TILE_M, M - row0);
    const int ncols = min(OPTIML_TILE_N, N - col0);
    const bool bulk = (N & 3) == 0 && aligned16(Cz);  // row0 * N + col0 is a multiple of 4: 16-byte rows
    for (int r = first; r < nrows; r += step) {
        const float* p = Cz + (long long)(row0 + r) * N + col0;
        if (bulk) {
            prefetch_l2_bulk(p, 4u * (unsigned)ncols);
        } else {
            for (int c = 0; c < ncols; c += 32) prefetch_l2(p + c);
            prefetch_l2(p + ncols - 1);
        }
    }
}

}  // namespace optiml_wg

// The tile's value at accumulator register i since the last restart: with OPTIML_X3_SPLIT_ACC the big products'
// and the small products' accumulators, added (round to nearest).
#if OPTIML_X3_SPLIT_ACC
#define OPTIML_ACC_AT(i) __fadd_rn(acc[i], accs[i])
#else
#define OPTIML_ACC_AT(i) acc[i]
#endif
// Accumulator promotion (OPTIML_PROMOTE_KT) in the consumers' main loops: `sum` holds the promoted partial sums;
// `restart` is 0 from a promotion until the next k-tile step has restarted `acc` (scale-d 0), so a promotion
// right before the end leaves an `acc` that is already in `sum`. WAIT retires every group in flight.
#if OPTIML_PROMOTE_KT
#define OPTIML_PROMOTE_START                                                                                   \
    float sum[QN / 2];                                                                                         \
    _Pragma("unroll") for (int i = 0; i < QN / 2; ++i) sum[i] = 0.f;                                          \
    int restart = 1;
#define OPTIML_PROMOTE_EVERY(WAIT)                                                                             \
    restart = 1;                                                                                               \
    if ((kt + 2) % OPTIML_PROMOTE_KT == 0) {                                                                   \
        WAIT;                                                                                                  \
        _Pragma("unroll") for (int i = 0; i < QN / 2; ++i) sum[i] = __fadd_rn(sum[i], OPTIML_ACC_AT(i));      \
        restart = 0;                                                                                           \
    }
// (after the main loop's last wait: every group is retired)
#define OPTIML_PROMOTE_END                                                                                     \
    if (kt < ktiles) restart = 1;                                                                              \
    _Pragma("unroll") for (int i = 0; i < QN / 2; ++i) acc[i] = restart ? __fadd_rn(sum[i], OPTIML_ACC_AT(i)) \
                                                                         : sum[i];
#elif OPTIML_X3_SPLIT_ACC
#define OPTIML_PROMOTE_END _Pragma("unroll") for (int i = 0; i < QN / 2; ++i) acc[i] = OPTIML_ACC_AT(i);
#else
#define OPTIML_PROMOTE_END
#endif

// A tile's batch item z and row r of it (and with OPTIML_SPLIT_K its split sk, its first k-tile kt0 and its
// k-tile count); OPTIML_KT0 turns a k-tile of the tile's range into one of K's.
#if OPTIML_SPLIT_K
#define OPTIML_TILE_Z                                                                                          \
    const long long zs = tile / per_item;                                                                      \
    const long long r = tile - zs * per_item;                                                                  \
    const long long z = zs / S;                                                                                \
    const int sk = (int)(zs - z * S);                                                                          \
    const int kt0 = (int)((long long)sk * kt_all / S);                                                         \
    const int ktiles = (int)((long long)(sk + 1) * kt_all / S) - kt0;
#define OPTIML_KT0 kt0 +
#else
#define OPTIML_TILE_Z                                                                                          \
    const long long z = tile / per_item;                                                                       \
    const long long r = tile - z * per_item;
#define OPTIML_KT0
#endif

extern "C" __global__ void __launch_bounds__(OPTIML_THREADS, 1) optiml_matmul(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    const float* __restrict__ bias,
    int batch, int M, int N, int K,
    long long strideA, long long strideB, long long strideC,
    float alpha, float beta
#if OPTIML_SPLIT_K
    , int splits
#endif
#if OPTIML_TMA
    , const __grid_constant__ optiml_wg::TmaMap tmQ, const __grid_constant__ optiml_wg::TmaMap tmP, int use_tma
#endif
    ) {
    using namespace optiml_wg;
#if !OPTIML_TMA
    const int use_tma = 0;
#endif
    __shared__ __align__(8) unsigned long long bars[2 * STAGES];  // full[0..S-1], empty[0..S-1]
    extern __shared__ __align__(16) unsigned char optiml_dsmem[];  // aligned to 1024 below

    const int tid = (int)threadIdx.x;
    const unsigned ring = (smem_u32(optiml_dsmem) + 1023u) & ~1023u;  // 1024-aligned (swizzle period)
    const unsigned sQ0 = ring;                                         // STAGES x Q_STAGE
    const unsigned sP0 = ring + STAGES * Q_STAGE;                      // STAGES x P_STAGE
    const unsigned full0 = smem_u32(&bars[0]);
    const unsigned empty0 = smem_u32(&bars[STAGES]);

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full0 + 8u * s, use_tma ? 1u : 128u);  // TMA: one thread; else one (async) arrival per producer thread
            // one arrival per warp of the warpgroup(s) consuming the stage
            mbar_init(empty0 + 8u * s, OPTIML_PINGPONG ? 4u : 4u * NCONS);
        }
    }
    __syncthreads();

    if (M <= 0 || N <= 0 || batch <= 0) return;
    // P / Q operands (see the table at the top)
#if OPTIML_SWAP
    const int Pdim = N, Qdim = M;
    const float* const Pbase = B;
    const float* const Qbase = A;
    const long long strideP = strideB, strideQ = strideA;
#else
    const int Pdim = M, Qdim = N;
    const float* const Pbase = A;
    const float* const Qbase = B;
    const long long strideP = strideA, strideQ = strideB;
#endif
    const long long tiles_p = (Pdim + PW - 1) / PW;
    const long long tiles_q = (Qdim + QN - 1) / QN;
    const long long per_item = tiles_p * tiles_q;
#if OPTIML_SPLIT_K
    const int S = splits > 1 ? splits : 1;
    const long long total = per_item * (long long)batch * S;
#else
    const long long total = per_item * (long long)batch;
#endif
    const long long nblk = (long long)gridDim.x * gridDim.y * gridDim.z;
    const long long bid = (long long)blockIdx.x + (long long)gridDim.x * ((long long)blockIdx.y + (long long)gridDim.y * blockIdx.z);
#if OPTIML_SPLIT_K
    const int kt_all = (K + BK - 1) / BK;
#else
    const int ktiles = (K + BK - 1) / BK;
#endif

    if (tid >= 128 * NCONS) {
        // ======================= producer warpgroup =======================
#if OPTIML_SETMAXNREG
        setmaxnreg_dec<OPTIML_PRODUCER_REGS>();
#endif
        const int p = tid - 128 * NCONS;
        const int pw = p >> 5, plane = p & 31;
        // this thread's fixed offsets / rows inside a stage
        // K-major direct loads (load_kmajor): chunk kc of stage rows kr0 + 16 i
        const int kc = p & 7, kr0 = p >> 3;
        const unsigned offK = (unsigned)(kr0 * 128) + ((unsigned)(kc ^ (kr0 & 7)) << 4);
        // transposing loads (load_transposed): stage row 8 pw + tdr (+ 32 j), word tkk of the chunk
        const int tdr = plane & 7, tkk = plane >> 3;
        const unsigned offT = (unsigned)((8 * pw + tdr) * 128 + 4 * tkk);
        const unsigned xrT = (unsigned)tdr << 4;
        (void)offK; (void)offT; (void)xrT;
#if !OPTIML_P_SMEM
        // P boxes for the register path (load_boxes)
        const int bcn = p % OPTIML_P_CPR, br0 = p / OPTIML_P_CPR;
        const int bbox = bcn >> 3, bc = bcn & 7;
        const unsigned offBE = (unsigned)(bbox * 4096 + br0 * 128) + ((unsigned)(bc ^ (br0 & 7)) << 4);
        const unsigned offBO = (unsigned)(bbox * 4096 + br0 * 128) + ((unsigned)(bc ^ ((br0 & 7) ^ 4)) << 4);
#endif
        unsigned it = 0;
#if OPTIML_C_PREFETCH
        const int pf_kt = ktiles > OPTIML_C_PREFETCH_KT ? ktiles - OPTIML_C_PREFETCH_KT : 0;
#endif
#if OPTIML_TMA
        if (use_tma) {
            // one thread issues every copy: Q as one box {32 k, QN rows}, P as
            // PW / 32 boxes {32 p, 32 k rows} (the RS box layout, which is
            // TMA's 128-byte swizzle of a 128-byte-wide box), or, K-major in
            // the SS form, as 2 PW / 16 boxes of 8 rows {32 k, every other
            // row}: the even rows of each 16 to stage rows 16g .. 16g + 7,
            // the odd ones to 16g + 8 .. 16g + 15 (perm16). Each 8-row box
            // lands 1024-byte aligned, where TMA's address-based swizzle is
            // the layout's chunk ^ (row & 7).
            // (warp 0 when it also prefetches C: lane 0 issues the copies)
            if (OPTIML_C_PREFETCH ? p < 32 : p == 0) {
                for (long long tile = bid; tile < total; tile += nblk) {
                    OPTIML_TILE_Z
                    const int q0 = (int)(r / tiles_p) * QN;
                    const int p0 = (int)(r % tiles_p) * PW;
                    const int zq = strideQ != 0 ? (int)z : 0;
                    const int zp = strideP != 0 ? (int)z : 0;
                    for (int kt = 0; kt < ktiles; ++kt, ++it) {
                        const unsigned s = it % STAGES;
                        const unsigned ph = (it / STAGES) & 1u;
                        const unsigned bar = full0 + 8u * s;
                        mbar_wait(empty0 + 8u * s, ph ^ 1u);
                        if (plane == 0) {
                            mbar_arrive_expect_tx(bar, Q_STAGE + P_STAGE);
                            tma_load_3d(sQ0 + s * Q_STAGE, &tmQ, (OPTIML_KT0 kt) * BK, q0, zq, bar);
#if OPTIML_P_SMEM
#pragma unroll
                            for (int h = 0; h < PW / 8; ++h)
                                tma_load_3d(sP0 + s * P_STAGE + 1024u * h, &tmP, (OPTIML_KT0 kt) * BK,
                                            p0 + 16 * (h >> 1) + (h & 1), zp, bar);
#else
#pragma unroll
                            for (int b = 0; b < PW / 32; ++b)
                                tma_load_3d(sP0 + s * P_STAGE + 4096u * b, &tmP, p0 + 32 * b, (OPTIML_KT0 kt) * BK, zp,
                                            bar);
#endif
                        }
#if OPTIML_C_PREFETCH
                        if (kt == pf_kt) prefetch_c_tile(C, strideC, M, N, tile, per_item, tiles_p, plane, 32);
#endif
                    }
                }
            }
        } else
#endif
        for (long long tile = bid; tile < total; tile += nblk) {
            OPTIML_TILE_Z
            const int q0 = (int)(r / tiles_p) * QN;
            const int p0 = (int)(r % tiles_p) * PW;
            const float* Pz = Pbase + z * strideP;
            const float* Qz = Qbase + z * strideQ;
            // ---- Q: QN rows of Qdim (identity row order)
#if OPTIML_Q_KMAJOR
            const bool vecQ = (K & 3) == 0 && aligned16(Qz);
            const float* Qrow = Qz + (long long)(q0 + kr0) * K + 4 * kc;  // k0 = 0
            const int qrows_left = Qdim - q0 - kr0;
#else
            const float* Qrow = Qz + (long long)tkk * Qdim + q0 + 8 * pw + tdr;  // k0 = 0
            const int qrows_left = Qdim - q0 - (8 * pw + tdr);
#endif
            // ---- P: PW rows of Pdim
#if OPTIML_P_SMEM && OPTIML_P_KMAJOR
            const bool vecP = (K & 3) == 0 && aligned16(Pz);
            const int psr = perm16(kr0);  // source row of stage row kr0 (kr0 < 16)
            const float* Prow = Pz + (long long)(p0 + psr) * K + 4 * kc;
            const int prows_left = Pdim - p0 - psr;
#elif OPTIML_P_SMEM
            const int psr = 16 * (pw >> 1) + (pw & 1) + 2 * tdr;  // source row of stage row 8 pw + tdr
            const float* Prow = Pz + (long long)tkk * Pdim + p0 + psr;
            const int prows_left = Pdim - p0 - psr;
#else
            const bool vecP = (Pdim & 3) == 0 && aligned16(Pz);
            const float* Prow = Pz + (long long)br0 * Pdim + p0 + 4 * bcn;
            const int pcols_left = Pdim - p0 - 4 * bcn;
#endif
            for (int kt = 0; kt < ktiles; ++kt, ++it) {
                const unsigned s = it % STAGES;
                const unsigned ph = (it / STAGES) & 1u;
                const int k0 = (OPTIML_KT0 kt) * BK;
                mbar_wait(empty0 + 8u * s, ph ^ 1u);
                const unsigned sq = sQ0 + s * Q_STAGE;
                const unsigned sp = sP0 + s * P_STAGE;
#if OPTIML_Q_KMAJOR
                {
                    const float* src = opaque_ptr(Qrow) + k0;
                    const long long step = opaque64(16ll * K);
                    const int kleft = K - k0 - 4 * kc;
                    if (vecQ) load_kmajor<QN, true>(sq + offK, src, step, qrows_left, kleft, Qz);
                    else      load_kmajor<QN, false>(sq + offK, src, step, qrows_left, kleft, Qz);
                }
#else
                {
                    const float* src = opaque_ptr(Qrow) + (long long)k0 * Qdim;
                    const long long ld4 = opaque64(4ll * Qdim);
                    load_transposed<QN>(sq + offT, xrT, src, ld4, qrows_left, K - k0 - tkk, Qz);
                }
#endif
#if OPTIML_P_SMEM && OPTIML_P_KMAJOR
                {
                    const float* src = opaque_ptr(Prow) + k0;
                    const long long step = opaque64(16ll * K);
                    const int kleft = K - k0 - 4 * kc;
                    if (vecP) load_kmajor<PW, true>(sp + offK, src, step, prows_left, kleft, Pz);
                    else      load_kmajor<PW, false>(sp + offK, src, step, prows_left, kleft, Pz);
                }
#elif OPTIML_P_SMEM
                {
                    const float* src = opaque_ptr(Prow) + (long long)k0 * Pdim;
                    const long long ld4 = opaque64(4ll * Pdim);
                    load_transposed<PW>(sp + offT, xrT, src, ld4, prows_left, K - k0 - tkk, Pz);
                }
#else
                {
                    const float* src = opaque_ptr(Prow) + (long long)k0 * Pdim;
                    const long long stepR = opaque64((long long)OPTIML_P_RSTEP * Pdim);
                    const int krows = K - k0 - br0;
                    if (vecP) load_boxes<true>(sp + offBE, sp + offBO, src, stepR, krows, pcols_left, Pz);
                    else      load_boxes<false>(sp + offBE, sp + offBO, src, stepR, krows, pcols_left, Pz);
                }
#endif
                cp_async_arrive_noinc(full0 + 8u * s);
#if OPTIML_C_PREFETCH
                if (kt == pf_kt) prefetch_c_tile(C, strideC, M, N, tile, per_item, tiles_p, p, 128);
#endif
            }
        }
        cp_async_wait_all();
    } else {
        // ======================= consumer warpgroups =======================
#if OPTIML_SETMAXNREG
        setmaxnreg_inc<OPTIML_CONSUMER_REGS>();
#endif
        const int wg = tid >> 7, w = (tid >> 5) & 3, lane = tid & 31;
        const int g = lane >> 2, t = lane & 3;
        // The warpgroup's 64 rows of the tile's P rows (ping-pong: all of them).
        const int wgp = OPTIML_PINGPONG ? 0 : wg;
        Consumer cons;
        cons.full0 = full0; cons.empty0 = empty0; cons.sQ0 = sQ0; cons.sP0 = sP0;
        cons.leader = lane == 0;
        cons.it = 0;
        cons.prev = 0;
#if OPTIML_TF32X3
        cons.sQs0 = sP0 + STAGES * P_STAGE;  // after the rings of both operands (1024-aligned: 8 KB multiples)
        cons.sPs0 = cons.sQs0 + STAGES * Q_STAGE;
        cons.ctid = tid;
#endif
#if OPTIML_P_SMEM
        // SS: this warpgroup's 64 stage rows; wgmma rows g, g + 8 of warp w
        // are stage rows 64 wg + 16 w + g (+8) = P rows pl, pl + 1 (perm16).
        cons.off0 = (unsigned)(wgp * 64 * 128);
        cons.off1 = 0u;
        const int pl = 64 * wgp + 16 * w + 2 * g;
#else
        // RS: warp w of warpgroup wg reads box 2wg + (w >> 1), P offset
        // 8 (w & 1) in it. Fragment row g is P row nb of the box, row g + 8 is
        // nb + 1, nb = 8(w&1) + 16((g>>1)&1) + 4(g>>2) + 2(g&1), so (a0, a1)
        // and (a2, a3) are 8-byte words at k-rows t and t + 4 (conflict-free:
        // see WGMMA_NOTES.md).
        const int box = 2 * wgp + (w >> 1);
        const int nb = 8 * (w & 1) + 16 * ((g >> 1) & 1) + 4 * (g >> 2) + 2 * (g & 1);
        const int ch = nb >> 2;
        const unsigned within = (unsigned)(nb & 3) * 4u;
        cons.off0 = (unsigned)(box * 4096 + t * 128) + ((unsigned)(ch ^ t) << 4) + within;
        cons.off1 = (unsigned)(box * 4096 + (t + 4) * 128) + ((unsigned)(ch ^ (t + 4)) << 4) + within;
        const int pl = 32 * box + nb;
        unsigned fa[OPTIML_FRAGS], fb[OPTIML_FRAGS];
#pragma unroll
        for (int i = 0; i < OPTIML_FRAGS; ++i) fa[i] = fb[i] = 0u;
#endif
        float acc[QN / 2];
#if OPTIML_X3_SPLIT_ACC
        float accs[QN / 2];
#endif
        long long i = -1;  // the tile's index in this block's sequence
        for (long long tile = bid; tile < total; tile += nblk) {
            ++i;
#if OPTIML_PINGPONG
            // Tiles alternate between the warpgroups; the ring holds them in order, so this one's k-tiles start
            // after the i earlier tiles'. Its main loop waits for the other warpgroup's previous one to end
            // (which also keeps its mbarrier waits within one phase of the producer's).
            if ((i & 1) != wg) continue;
            cons.it = (unsigned)(i * ktiles);
            if (i > 0) named_bar_sync(1 + wg, 256);
#endif
            OPTIML_TILE_Z
            const int q0 = (int)(r / tiles_p) * QN;
            const int p0 = (int)(r % tiles_p) * PW;
#pragma unroll
            for (int i = 0; i < QN / 2; ++i) acc[i] = 0.f;
#if OPTIML_X3_SPLIT_ACC
#pragma unroll
            for (int i = 0; i < QN / 2; ++i) accs[i] = 0.f;
#endif
#if OPTIML_P_SMEM
            // pairs of k-tiles, then an odd last one (the RS loop's shape; a
            // plain loop made ptxas serialise the wgmmas, C7515)
            int kt = 0;
#if OPTIML_PROMOTE_KT
            OPTIML_PROMOTE_START
            for (; kt + 1 < ktiles; kt += 2) {
                cons.step_ss(acc OPTIML_ACCS, kt == 0, restart);
                cons.step_ss(acc OPTIML_ACCS, false);
                OPTIML_PROMOTE_EVERY(wgmma_wait<0>())
            }
            if (kt < ktiles) cons.step_ss(acc OPTIML_ACCS, kt == 0, restart);
#else
            for (; kt + 1 < ktiles; kt += 2) {
                cons.step_ss(acc OPTIML_ACCS, kt == 0);
                cons.step_ss(acc OPTIML_ACCS, false);
            }
            if (kt < ktiles) cons.step_ss(acc OPTIML_ACCS, kt == 0);
#endif
#if OPTIML_WAIT_DEPTH == 1
            wgmma_wait<0>();
            mbar_arrive_if(empty0 + 8u * cons.prev, ktiles > 0 && lane == 0);
#endif
            OPTIML_PROMOTE_END
#else
            // Pairs of k-tiles, then an odd last one: on every path through
            // this code a fragment set is rewritten only after the wait that
            // retires the group reading it (fa and fb alternate strictly).
            int kt = 0;
#if OPTIML_PROMOTE_KT
            OPTIML_PROMOTE_START
            for (; kt + 1 < ktiles; kt += 2) {
                cons.step_rs(acc OPTIML_ACCS, fa, fb, kt == 0, restart);
                cons.step_rs(acc OPTIML_ACCS, fb, fa, false);
                OPTIML_PROMOTE_EVERY(wgmma_wait<0>(); keep_alive(fa); keep_alive(fb))
            }
            if (kt < ktiles) cons.step_rs(acc OPTIML_ACCS, fa, fb, kt == 0, restart);
#else
            for (; kt + 1 < ktiles; kt += 2) {
                cons.step_rs(acc OPTIML_ACCS, fa, fb, kt == 0);
                cons.step_rs(acc OPTIML_ACCS, fb, fa, false);
            }
            if (kt < ktiles) cons.step_rs(acc OPTIML_ACCS, fa, fb, kt == 0);
#endif
#if OPTIML_WAIT_DEPTH == 1
            wgmma_wait<0>();
            keep_alive(fa);
            keep_alive(fb);
            mbar_arrive_if(empty0 + 8u * cons.prev, ktiles > 0 && lane == 0);
#endif
            OPTIML_PROMOTE_END
#endif
#if OPTIML_PINGPONG
            // Main loop done: the other warpgroup may start its tile (if it has one) during this epilogue.
            if (tile + nblk < total) named_bar_arrive(2 - wg, 256);
#endif
#if OPTIML_SPLIT_K
            if (S > 1) {
                // Launch 1 of a split product: the raw partial sums into this split's slice of W (C is W).
                store_partials(acc, C + ((long long)sk * batch + z) * ((long long)M * N), M, N, p0 + pl, q0 + 2 * t);
                continue;
            }
#endif
#if OPTIML_EPI == 2
            {
                float* Cz = C + z * strideC;
                const bool vec2 = (N & 1) == 0 && (reinterpret_cast<unsigned long long>(Cz) & 7ull) == 0ull;
                if (vec2) {
                    epilogue_tile(acc, Cz, bias, M, N, p0 + pl, q0 + 2 * t, alpha, beta);
                    continue;
                }
            }
#endif
#if 1
            // ---- epilogue (OPTIML_EPI 1, and the scalar case of 2). Accumulator d[4j + e] is (P row pl + (e >> 1),
            // Q row 8j + 2t + (e & 1)) of the tile: this thread owns P rows
            // pp, pp + 1 and Q rows qq, qq + 1 for each j.
            float* Cz = C + z * strideC;
            const bool vec2 = (N & 1) == 0 && (reinterpret_cast<unsigned long long>(Cz) & 7ull) == 0ull;
            const int pp = p0 + pl;
            const int qb = q0 + 2 * t;
#if OPTIML_SWAP
            // C[q][p]: row q gets (d0, d2) at columns pp, pp + 1; row q + 1 (d1, d3)
            const float b0 = bias_at(bias, pp, N), b1 = bias_at(bias, pp + 1, N);
#pragma unroll
            for (int j = 0; j < QN / 8; ++j) {
                const int m = qb + 8 * j;
                if (m < M)
                    store2(Cz + (long long)m * N, pp, N, vec2, acc[4 * j + 0], acc[4 * j + 2], b0, b1, alpha, beta);
                if (m + 1 < M)
                    store2(Cz + (long long)(m + 1) * N, pp, N, vec2, acc[4 * j + 1], acc[4 * j + 3], b0, b1, alpha,
                           beta);
            }
#else
            // C[p][q]: row pp gets (d0, d1) at columns q, q + 1; row pp + 1 (d2, d3)
#pragma unroll
            for (int j = 0; j < QN / 8; ++j) {
                const int n = qb + 8 * j;
                const float b0 = bias_at(bias, n, N), b1 = bias_at(bias, n + 1, N);
                if (pp < M)
                    store2(Cz + (long long)pp * N, n, N, vec2, acc[4 * j + 0], acc[4 * j + 1], b0, b1, alpha, beta);
                if (pp + 1 < M)
                    store2(Cz + (long long)(pp + 1) * N, n, N, vec2, acc[4 * j + 2], acc[4 * j + 3], b0, b1, alpha,
                           beta);
            }
#endif
#endif  // OPTIML_EPI
        }
    }
}

#if OPTIML_SPLIT_K
#define OPTIML_SPLITK_NS optiml_wg
#include "optiml/splitk.cuh"  // optiml_splitk_reduce, with this template's epilogue
#endif

#if OPTIML_TRANSPOSE_A
// A stored K x M per item -> At, M x K packed: 32 x 32 tiles through shared memory (padded: no bank conflicts),
// loads coalesced along M, stores along K; 32 x 8 threads, four elements each.
extern "C" __global__ void __launch_bounds__(256) optiml_transpose_a(const float* __restrict__ A,
                                                                   float* __restrict__ At, int batch, int K,
                                                                   int M, long long strideA) {
    __shared__ float tile[32][33];
    const int tx = (int)threadIdx.x & 31, ty = (int)threadIdx.x >> 5;
    const int m0 = (int)blockIdx.x * 32;
    for (long long z = blockIdx.z; z < batch; z += gridDim.z) {
        const float* Az = A + z * strideA;
        float* Atz = At + z * (long long)M * K;
        for (long long k0 = (long long)blockIdx.y * 32; k0 < K; k0 += (long long)gridDim.y * 32) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const long long k = k0 + ty + 8 * i;
                const int m = m0 + tx;
                if (k < K && m < M) tile[ty + 8 * i][tx] = Az[k * M + m];
            }
            __syncthreads();
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int m = m0 + ty + 8 * i;
                const long long k = k0 + tx;
                if (m < M && k < K) Atz[(long long)m * K + k] = tile[tx][ty + 8 * i];
            }
            __syncthreads();
        }
    }
}
#endif
