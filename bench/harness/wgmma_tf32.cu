// optiml prototype: batched GEMM, fp32 in memory, TF32 tensor cores through
// Hopper's warpgroup MMA (wgmma.mma_async, sm_90a only), fp32 accumulate.
// Standalone for now (bench/harness/wgmma_harness.cu includes it; see
// bench/harness/WGMMA_NOTES.md for the design, the shared-memory layouts and
// the descriptor math worked out). No #include, inline PTX only, so NVRTC
// compiles it as is (-arch=sm_90a); macros specialise it.
//
// Entry point (same ABI as matmul_tf32.cu; bias / alpha / beta are accepted
// and ignored: no epilogue yet):
//   extern "C" __global__ void optiml_matmul(A, B, C, bias, batch, M, N, K,
//                                            strideA, strideB, strideC,
//                                            alpha, beta)
//   C[z] (M x N, ldc = N) = A[z] (M x K, lda = K) * B[z] (K x N, ldb = N),
//   X[z] = X + z * strideX (stride 0 = broadcast). Any M, N, K >= 0, any
//   4-byte alignment; K = 0 gives C = 0.
//   block = OPTIML_THREADS (1-D), dynamic shared memory = OPTIML_DYN_SMEM_BYTES
//   (raise cudaFuncAttributeMaxDynamicSharedMemorySize to it first).
//   grid: ANY grid. Output tiles (BM x BN of one batch item) are numbered
//   t = (z * tiles_m + tile_m) * tiles_n + tile_n and block b (linear index
//   x + gx * (y + gy * z)) does t = b, b + #blocks, ... So both the
//   matmul_tf32.cu grid (ceil(N/BN), ceil(M/BM), min(batch, 65535)) and a
//   persistent 1-D grid of (#SMs) blocks are valid; the persistent grid lets
//   the producer fetch the next tile while the consumers store the last.
//
// Why the operands are swapped. wgmma with .tf32 needs both shared-memory
// operands K-major (the transpose immediates exist only for f16/bf16), and
// operand B of wgmma must come from shared memory. Row-major A (M x K) is
// K-major; row-major B (K x N) is N-major. So each block computes the
// TRANSPOSED tile, C^T (BN x BM) = B^T (BN x K) * A^T (K x BM):
//   * wgmma operand "A" (64 x 8 per instruction) = B^T, loaded by the
//     consumers from shared memory into registers (any layout can be read
//     that way), rounded to TF32 there (cvt.rna);
//   * wgmma operand "B" (8 x BM) = A^T, which is exactly row-major A:
//     K-major, read by the tensor cores from shared memory through a matrix
//     descriptor (128-byte swizzle). These elements are not rounded: the
//     tensor core reads the top 19 bits of each fp32 (truncation).
//   * the accumulator holds C^T: each thread owns 2x2 blocks of C (rows m,
//     m+1, columns n, n+1), stored with 8-byte stores.
//
// Block: OPTIML_CONSUMERS consumer warpgroups (each 64 columns of C =
// one m64 wgmma row block, all BM rows of C = the wgmma N), then one producer
// warpgroup (128 threads). BN = 64 * OPTIML_CONSUMERS, BK = 32 (one 128-byte
// swizzle atom of fp32). STAGES-deep ring of (A, B) k-tiles with full/empty
// mbarriers. The producer fills a stage with cp.async (16-byte chunks when
// the operand's rows are 16-byte aligned, else 4-byte elements; zero fill
// outside the matrix) straight into the swizzled layouts, and its copies
// arrive on the stage's full barrier (cp.async.mbarrier.arrive.noinc). See
// WGMMA_NOTES.md for why cp.async rather than TMA.
//
// Macros:
//   OPTIML_BM          rows of C per block = wgmma N: 64, 128 or 256 (default 256)
//   OPTIML_CONSUMERS   consumer warpgroups, 1 or 2 (default 2); BN = 64 * this
//   OPTIML_STAGES      ring depth, 1..8 (default 4)
//   OPTIML_WAIT_DEPTH  wgmma groups left in flight across k-tiles: 1 (default)
//                      or 0 (wait for each k-tile's MMAs before the next)
//   OPTIML_TF32_ROUND  1 (default): cvt.rna the register operand (B);
//                      0: raw fp32 bits (truncation, like operand A)
//   OPTIML_SETMAXNREG  1: producer drops to OPTIML_PRODUCER_REGS registers,
//                      consumers rise to OPTIML_CONSUMER_REGS (default on
//                      for BM = 256 with 2 consumers, needed for 128
//                      accumulators + fragments under the 168 cap)
//
// Shared memory: OPTIML_SMEM_BYTES = STAGES * (BM + BN) * 128 + 1024 (the
// 1024 is for aligning the ring to the 128-byte-swizzle period at run time)
// dynamic, plus 16 * STAGES bytes of static mbarriers.
// Default BM 256, 2 consumers, 4 stages: 197632 B dynamic, 384 threads.

#ifndef OPTIML_BM
#define OPTIML_BM 256
#endif
#ifndef OPTIML_CONSUMERS
#define OPTIML_CONSUMERS 2
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
#ifndef OPTIML_SETMAXNREG
#if OPTIML_BM == 256 && OPTIML_CONSUMERS == 2
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

#define OPTIML_BN (64 * OPTIML_CONSUMERS)
#define OPTIML_BK 32
#define OPTIML_THREADS (128 * (OPTIML_CONSUMERS + 1))
#define OPTIML_A_STAGE_BYTES (OPTIML_BM * 128)
#define OPTIML_B_STAGE_BYTES (OPTIML_BN * 128)
#define OPTIML_SMEM_BYTES (OPTIML_STAGES * (OPTIML_A_STAGE_BYTES + OPTIML_B_STAGE_BYTES) + 1024)
#define OPTIML_DYN_SMEM_BYTES OPTIML_SMEM_BYTES

#if OPTIML_BM != 64 && OPTIML_BM != 128 && OPTIML_BM != 256
#error "OPTIML_BM must be 64, 128 or 256"
#endif
#if OPTIML_CONSUMERS != 1 && OPTIML_CONSUMERS != 2
#error "OPTIML_CONSUMERS must be 1 or 2"
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
#if OPTIML_SETMAXNREG && (OPTIML_PRODUCER_REGS * 128 + OPTIML_CONSUMER_REGS * 128 * OPTIML_CONSUMERS > 65536)
#error "setmaxnreg budget exceeds 64K registers"
#endif
// wgmma and setmaxnreg exist only in the arch-specific sm_90a target (the
// host pass of nvcc has no __CUDA_ARCH__ and is let through).
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "wgmma_tf32.cu needs the sm_90a target (-gencode=arch=compute_90a,code=sm_90a / NVRTC -arch=sm_90a)"
#endif

namespace optiml_wg {

constexpr int BM = OPTIML_BM;
constexpr int BN = OPTIML_BN;
constexpr int BK = OPTIML_BK;
constexpr int STAGES = OPTIML_STAGES;
constexpr int NCONS = OPTIML_CONSUMERS;
constexpr unsigned A_STAGE = OPTIML_A_STAGE_BYTES;
constexpr unsigned B_STAGE = OPTIML_B_STAGE_BYTES;

// ---------------------------------------------------------------- PTX wrappers
__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Blocks until the phase with the given parity of the barrier has completed
// (a fresh barrier counts its "previous" phase, parity 1, as completed).
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
// Arrives when pred != 0. The predicate is applied inside the asm so that
// no divergent branch appears while wgmma groups are in flight (ptxas
// serialises wgmma around divergent code it has to guard).
__device__ __forceinline__ void mbar_arrive_if(unsigned bar, bool pred) {
    asm volatile("{\n\t.reg .pred p;\n\t.reg .b64 st;\n\tsetp.ne.b32 p, %1, 0;\n\t"
                 "@p mbarrier.arrive.shared::cta.b64 st, [%0];\n\t}\n" ::"r"(bar), "r"((int)pred) : "memory");
}
// The barrier's arrival fires when all of this thread's earlier cp.async
// copies have landed; counts as one of the barrier's expected arrivals.
__device__ __forceinline__ void cp_async_arrive_noinc(unsigned bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}
// 16-byte copy; bytes past src_size are zero-filled (src_size 0: no read).
__device__ __forceinline__ void cp16(unsigned dst, const float* src, unsigned src_size) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_size) : "memory");
}
__device__ __forceinline__ void cp4(unsigned dst, const float* src, unsigned src_size) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_size) : "memory");
}
// Orders this thread's view of generic-proxy shared memory writes (the
// cp.async data it has acquired through the full barrier) before its
// following async-proxy accesses (wgmma's descriptor reads).
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
__device__ __forceinline__ void lds64(unsigned addr, float& x, float& y) {
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(x), "=f"(y) : "r"(addr) : "memory");
}
__device__ __forceinline__ unsigned to_tf32(float x) {
#if OPTIML_TF32_ROUND
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
                                         unsigned long long desc) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %13, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7"
        "}, {%8, %9, %10, %11}, %12, p, 1, 1;\n\t}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1)
        : "memory");
}

__device__ __forceinline__ void wgmma_rs_n64(float (&d)[32], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned long long desc) {
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
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1)
        : "memory");
}

__device__ __forceinline__ void wgmma_rs_n128(float (&d)[64], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned long long desc) {
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
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1)
        : "memory");
}

__device__ __forceinline__ void wgmma_rs_n256(float (&d)[128], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned long long desc) {
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
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1)
        : "memory");
}

// One k8 step for the whole block tile of this warpgroup: D (64 x BM) += a (64 x 8) * desc (8 x BM).
__device__ __forceinline__ void mma_k8(float (&acc)[BM / 2], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                       unsigned long long desc) {
#if OPTIML_BM == 256
    wgmma_rs_n256(acc, a0, a1, a2, a3, desc);
#elif OPTIML_BM == 128
    wgmma_rs_n128(acc, a0, a1, a2, a3, desc);
#else
    wgmma_rs_n64(acc, a0, a1, a2, a3, desc);
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

// A k-tile of A (BM rows of M x 32 of K) into one stage: row r (m) at
// r * 128 bytes, its 16-byte chunk c (k = 4c .. 4c+3) at chunk position
// c ^ (r & 7) (the 128-byte swizzle the descriptor names). Thread p
// (0..127) owns chunk c = p & 7 of rows r0 + 16 i, r0 = p >> 3: a warp reads
// 4 whole 128-byte row segments per pass. (r0 + 16 i) & 7 == r0 & 7, so the
// thread's swizzled offset is the same for every i.
//   dst: stage + this thread's offset; src: &A[m0 + r0][k0 + 4c];
//   step16 = 16 * K (elements); rows_left = M - m0 - r0; kleft = K - k0 - 4c.
template <bool VEC>
__device__ __forceinline__ void load_A(unsigned dst, const float* src, long long step16, int rows_left, int kleft,
                                       const float* dummy) {
#pragma unroll
    for (int i = 0; i < BM / 16; ++i) {
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

// A k-tile of B (32 of K x BN of N) into one stage as BN / 32 boxes of
// 32 k-rows x 128 bytes (32 n): box b at b * 4096, k-row r at r * 128, its
// 16-byte chunk c (n = 32 b + 4c .. +3) at chunk position c ^ (r & 7).
// Thread p owns chunk cn = p % (BN/4) (box cn >> 3, c = cn & 7) of k-rows
// r0 + RSTEP i, r0 = p / (BN/4): a warp reads whole 128-byte row segments.
// RSTEP is 4 or 8, so (r0 + RSTEP i) & 7 is r0 & 7 for even multiples of 4
// and (r0 & 7) ^ 4 for odd ones: two precomputed offsets dstE / dstO.
//   src: &B[k0 + r0][n0 + 4cn]; stepR = RSTEP * N; krows_left = K - k0 - r0;
//   cols_left = N - n0 - 4cn.
constexpr int B_CPR = BN / 4;         // 16-byte chunks per k-row of the tile
constexpr int B_RSTEP = 128 / B_CPR;  // k-rows per pass (4 or 8)
template <bool VEC>
__device__ __forceinline__ void load_B(unsigned dstE, unsigned dstO, const float* src, long long stepR,
                                       int krows_left, int cols_left, const float* dummy) {
#pragma unroll
    for (int i = 0; i < BK / B_RSTEP; ++i) {
        const unsigned dst = (((B_RSTEP * i) & 4) ? dstO : dstE) + (unsigned)(B_RSTEP * i * 128);
        const bool rok = B_RSTEP * i < krows_left;
        if (VEC) {  // N % 4 == 0
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

__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull;
}

// ---------------------------------------------------------------- consumer k-tile
// Makes the 16 registers look used here, so that they stay allocated (and
// untouched) until this point. wgmma reads its register operand A
// asynchronously, until the wgmma.wait_group that retires it; ptxas does not
// extend the operand's live range for that (seen in SASS: with one fragment
// set, the next k-tile's LDS overwrote the registers of the group still in
// flight). So the k loop is unrolled by two with two fragment sets, and each
// step keeps the OTHER set alive until after the wait that retires the group
// reading it.
__device__ __forceinline__ void keep_alive(const unsigned (&f)[16]) {
    asm volatile("" ::"r"(f[0]), "r"(f[1]), "r"(f[2]), "r"(f[3]), "r"(f[4]), "r"(f[5]), "r"(f[6]), "r"(f[7]),
                 "r"(f[8]), "r"(f[9]), "r"(f[10]), "r"(f[11]), "r"(f[12]), "r"(f[13]), "r"(f[14]), "r"(f[15]));
}

// One k-tile: wait for the stage, load this thread's register-operand
// fragments (B^T) into `cur`, issue the 4 k8 wgmmas against the A stage,
// then retire the previous k-tile's group (WAIT_DEPTH 1) or this one (0) and
// release the retired group's stage to the producer (lane 0 of each warp).
struct Consumer {
    unsigned full0, empty0, sA0, sB0, off0, off1;
    bool leader;   // lane 0 of the warp
    unsigned it;   // k-tiles consumed by this block so far (ring position)
    unsigned prev; // stage of the group still in flight (WAIT_DEPTH 1)

    __device__ __forceinline__ void step(float (&acc)[BM / 2], unsigned (&cur)[16], const unsigned (&other)[16],
                                         bool first) {
        const unsigned s = it % STAGES;
        const unsigned ph = (it / STAGES) & 1u;
        mbar_wait(full0 + 8u * s, ph);
        fence_proxy_async();
        const unsigned sb = sB0 + s * B_STAGE;
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
            float x0, y0, x1, y1;
            lds64(sb + off0 + ks * 1024u, x0, y0);
            lds64(sb + off1 + ks * 1024u, x1, y1);
            cur[4 * ks + 0] = to_tf32(x0);  // (row g,     k t)
            cur[4 * ks + 1] = to_tf32(y0);  // (row g + 8, k t)
            cur[4 * ks + 2] = to_tf32(x1);  // (row g,     k t + 4)
            cur[4 * ks + 3] = to_tf32(y1);  // (row g + 8, k t + 4)
        }
        const unsigned long long desc = make_desc(sA0 + s * A_STAGE);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
            mma_k8(acc, cur[4 * ks + 0], cur[4 * ks + 1], cur[4 * ks + 2], cur[4 * ks + 3], desc + 2ull * ks);
        wgmma_commit();
#if OPTIML_WAIT_DEPTH == 1
        wgmma_wait<1>();  // the previous k-tile's group is done:
        keep_alive(other);  // its fragments may be overwritten from here on,
        mbar_arrive_if(empty0 + 8u * prev, leader && !first);  // and its stage refilled
#else
        wgmma_wait<0>();
        keep_alive(other);
        mbar_arrive_if(empty0 + 8u * s, leader);
#endif
        (void)first;
        prev = s;
        ++it;
    }
};

// ---------------------------------------------------------------- consumer epilogue
__device__ __forceinline__ void store2(float* __restrict__ row, int n, int N, bool vec2, float x, float y) {
    if (vec2) {  // N even, row 8-byte aligned, n even: n < N implies n + 1 < N
        if (n < N) *reinterpret_cast<float2*>(row + n) = make_float2(x, y);
    } else {
        if (n < N) row[n] = x;
        if (n + 1 < N) row[n + 1] = y;
    }
}

}  // namespace optiml_wg

extern "C" __global__ void __launch_bounds__(OPTIML_THREADS, 1) optiml_matmul(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    const float* __restrict__ bias,
    int batch, int M, int N, int K,
    long long strideA, long long strideB, long long strideC,
    float alpha, float beta) {
    using namespace optiml_wg;
    (void)bias; (void)alpha; (void)beta;
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
            mbar_init(full0 + 8u * s, 128u);          // one (async) arrival per producer thread
            mbar_init(empty0 + 8u * s, 4u * NCONS);   // one arrival per consumer warp
        }
    }
    __syncthreads();

    if (M <= 0 || N <= 0 || batch <= 0) return;
    const long long tiles_n = (N + BN - 1) / BN;
    const long long tiles_m = (M + BM - 1) / BM;
    const long long per_item = tiles_n * tiles_m;
    const long long total = per_item * (long long)batch;
    const long long nblk = (long long)gridDim.x * gridDim.y * gridDim.z;
    const long long bid = (long long)blockIdx.x + (long long)gridDim.x * ((long long)blockIdx.y + (long long)gridDim.y * blockIdx.z);
    const int ktiles = (K + BK - 1) / BK;

    if (tid >= 128 * NCONS) {
        // ======================= producer warpgroup =======================
#if OPTIML_SETMAXNREG
        setmaxnreg_dec<OPTIML_PRODUCER_REGS>();
#endif
        const int p = tid - 128 * NCONS;
        // this thread's fixed offsets inside a stage (see load_A / load_B)
        const int ac = p & 7, ar0 = p >> 3;
        const unsigned offA = (unsigned)(ar0 * 128) + ((unsigned)(ac ^ (ar0 & 7)) << 4);
        const int bcn = p % B_CPR, br0 = p / B_CPR;
        const int bbox = bcn >> 3, bc = bcn & 7;
        const unsigned offBE = (unsigned)(bbox * 4096 + br0 * 128) + ((unsigned)(bc ^ (br0 & 7)) << 4);
        const unsigned offBO = (unsigned)(bbox * 4096 + br0 * 128) + ((unsigned)(bc ^ ((br0 & 7) ^ 4)) << 4);
        unsigned it = 0;
        for (long long tile = bid; tile < total; tile += nblk) {
            const long long z = tile / per_item;
            const long long r = tile - z * per_item;
            const int m0 = (int)(r / tiles_n) * BM;
            const int n0 = (int)(r % tiles_n) * BN;
            const float* Az = A + z * strideA;
            const float* Bz = B + z * strideB;
            const bool vecA = (K & 3) == 0 && aligned16(Az);
            const bool vecB = (N & 3) == 0 && aligned16(Bz);
            const float* Arow = Az + (long long)(m0 + ar0) * K + 4 * ac;   // k0 = 0
            const float* Brow = Bz + (long long)br0 * N + n0 + 4 * bcn;    // k0 = 0
            const int rows_left = M - m0 - ar0;
            const int cols_left = N - n0 - 4 * bcn;
            for (int kt = 0; kt < ktiles; ++kt, ++it) {
                const unsigned s = it % STAGES;
                const unsigned ph = (it / STAGES) & 1u;
                const int k0 = kt * BK;
                mbar_wait(empty0 + 8u * s, ph ^ 1u);
                const unsigned sa = sA0 + s * A_STAGE + offA;
                const unsigned sbE = sB0 + s * B_STAGE + offBE;
                const unsigned sbO = sB0 + s * B_STAGE + offBO;
                const float* srcA = opaque_ptr(Arow) + k0;
                const float* srcB = opaque_ptr(Brow) + (long long)k0 * N;
                const long long stepA = opaque64(16ll * K);
                const long long stepB = opaque64((long long)B_RSTEP * N);
                const int kleftA = K - k0 - 4 * ac;
                const int krowsB = K - k0 - br0;
                if (vecA) load_A<true>(sa, srcA, stepA, rows_left, kleftA, Az);
                else      load_A<false>(sa, srcA, stepA, rows_left, kleftA, Az);
                if (vecB) load_B<true>(sbE, sbO, srcB, stepB, krowsB, cols_left, Bz);
                else      load_B<false>(sbE, sbO, srcB, stepB, krowsB, cols_left, Bz);
                cp_async_arrive_noinc(full0 + 8u * s);
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
        // Register operand (B^T, 64 x 8 per k8 step, rows = n): warp w of
        // warpgroup wg reads box 2wg + (w >> 1), n-offset 8 (w & 1) in it.
        // Fragment row g is column nb of the box, row g + 8 is column nb + 1,
        // nb = 8(w&1) + 16((g>>1)&1) + 4(g>>2) + 2(g&1), so (a0, a1) and
        // (a2, a3) are 8-byte words at k-rows t and t + 4 (conflict-free:
        // see WGMMA_NOTES.md).
        const int box = 2 * wg + (w >> 1);
        const int nb = 8 * (w & 1) + 16 * ((g >> 1) & 1) + 4 * (g >> 2) + 2 * (g & 1);
        const int ch = nb >> 2;
        const unsigned within = (unsigned)(nb & 3) * 4u;
        const unsigned off0 = (unsigned)(box * 4096 + t * 128) + ((unsigned)(ch ^ t) << 4) + within;
        const unsigned off1 = (unsigned)(box * 4096 + (t + 4) * 128) + ((unsigned)(ch ^ (t + 4)) << 4) + within;

        Consumer cons;
        cons.full0 = full0; cons.empty0 = empty0; cons.sA0 = sA0; cons.sB0 = sB0;
        cons.off0 = off0; cons.off1 = off1;
        cons.leader = lane == 0;
        cons.it = 0;
        cons.prev = 0;
        float acc[BM / 2];
        unsigned fa[16], fb[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) fa[i] = fb[i] = 0u;
        for (long long tile = bid; tile < total; tile += nblk) {
            const long long z = tile / per_item;
            const long long r = tile - z * per_item;
            const int m0 = (int)(r / tiles_n) * BM;
            const int n0 = (int)(r % tiles_n) * BN;
#pragma unroll
            for (int i = 0; i < BM / 2; ++i) acc[i] = 0.f;
            // Pairs of k-tiles, then an odd last one: on every path through
            // this code a fragment set is rewritten only after the wait that
            // retires the group reading it (fa and fb alternate strictly).
            int kt = 0;
            for (; kt + 1 < ktiles; kt += 2) {
                cons.step(acc, fa, fb, kt == 0);
                cons.step(acc, fb, fa, false);
            }
            if (kt < ktiles) cons.step(acc, fa, fb, kt == 0);
#if OPTIML_WAIT_DEPTH == 1
            wgmma_wait<0>();
            keep_alive(fa);
            keep_alive(fb);
            mbar_arrive_if(empty0 + 8u * cons.prev, ktiles > 0 && lane == 0);
#endif
            // ---- epilogue: accumulator element (row, col) of this warpgroup
            // is C[m0 + col][n0 + 64 wg + row]; thread holds rows g, g+8 ->
            // columns n, n+1 of C, and cols 8j + 2t, +1 -> rows m, m+1.
            float* Cz = C + z * strideC;
            const bool vec2 = (N & 1) == 0 && (reinterpret_cast<unsigned long long>(Cz) & 7ull) == 0ull;
            const int n = n0 + 32 * box + nb;
            const int mb = m0 + 2 * t;
#pragma unroll
            for (int j = 0; j < BM / 8; ++j) {
                const int m = mb + 8 * j;
                if (m < M) store2(Cz + (long long)m * N, n, N, vec2, acc[4 * j + 0], acc[4 * j + 2]);
                if (m + 1 < M) store2(Cz + (long long)(m + 1) * N, n, N, vec2, acc[4 * j + 1], acc[4 * j + 3]);
            }
        }
    }
}
