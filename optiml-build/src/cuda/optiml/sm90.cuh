// optiml/sm90.cuh: the Hopper PTX wrappers the warp-specialised templates share (matmul_wgmma_tf32.cu,
// matmul_wgmma_16.cu): the TMA descriptor type, mbarriers, TMA and cp.async loads, named barriers, wgmma fences
// and groups, setmaxnreg. Handed to NVRTC in memory by optiml-build; nvcc harnesses add -I optiml-build/src/cuda.
// Everything is __forceinline__: a template that includes this compiles to the same machine code as when the
// wrappers were its own. Names live in namespace optiml_sm90; a template opens it with a using-directive.
#ifndef OPTIML_SM90_CUH
#define OPTIML_SM90_CUH

namespace optiml_sm90 {

// CUtensorMap: 128 opaque bytes, 64-byte aligned (built by cuTensorMapEncodeTiled on the host)
struct __align__(64) TmaMap {
    unsigned long long v[16];
};

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (TMA complete_tx).
__device__ __forceinline__ void fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Starts fetching a tensor map's descriptor into the cache ahead of its first TMA load.
__device__ __forceinline__ void prefetch_tmap(const void* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
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
// Arrives on the barrier (one of its expected arrivals) and adds `bytes` to
// the transaction count the current phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n\t}\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}
// TMA: box at coordinates (c0, c1, c2) of the 3-D tensor map into shared
// memory at dst; completes `box bytes` of transactions on the barrier.
__device__ __forceinline__ void tma_load_3d(unsigned dst, const void* map, int c0, int c1, int c2, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
            dst),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
        : "memory");
}
// Named barriers 1 and 2 (0 is __syncthreads): `threads` arrivals complete
// one; sync waits for it, arrive does not.
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
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

}  // namespace optiml_sm90

#endif  // OPTIML_SM90_CUH
