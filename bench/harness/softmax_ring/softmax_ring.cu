// Softmax over rows far longer than a block holds (KernelBench 23: 4096 x 393216 f32, 1.5 MiB per row), read from
// DRAM once: the prototype behind issue 14's "row kept on chip" for long rows, before it goes into the generator.
//
// The generator's row kernel reads such a row twice (an online max and sum, then the outputs), which caps it near
// two thirds of the copy bandwidth (68% measured on the H100, 2026-12-06). Holding the row in a cluster's shared
// memory was tried (session 41) and was no faster: one 220 KiB block per SM loads its slice, then reduces, then
// writes, and nothing overlaps its reads with its writes. Here each block writes row r's outputs from shared
// memory and, element by element as it frees each slot, starts the asynchronous load of its next row into it, so
// every SM keeps reads and writes in flight at once; only the short reduction over shared memory and one cluster
// barrier per row stand between.
//
// Variants (all f32, timed after an L2 flush, medians of RUNS):
//   copy       y = x, float4 grid-stride: the bandwidth the ratio is against (and cudaMemcpy D2D)
//   two-pass   a block per row, 1024 threads: online max and sum from DRAM, then re-read and write (the shape
//              of today's generated kernel at this row length)
//   ring<CS>   a cluster of CS blocks per row, each holding its C / CS slice in shared memory, the next row's
//              loads overlapping this row's stores (CS = 8: 192 KiB a block, one per SM; CS = 16, non-portable:
//              96 KiB, two per SM)
//
// Checked: every row of a few sampled rows against a float64 softmax (max relative error), every output finite,
// and the ring's output bit for bit equal across two runs.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -I optiml-build/src/cuda -o softmax_ring softmax_ring.cu && ./softmax_ring [R C RUNS]

#include <cuda_runtime.h>

#include "optiml/program.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                                            \
    do {                                                                                                 \
        cudaError_t e_ = (x);                                                                            \
        if (e_ != cudaSuccess) {                                                                         \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
            std::exit(1);                                                                                \
        }                                                                                                \
    } while (0)

// ---- device helpers -------------------------------------------------------------------------------------------

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
__device__ __forceinline__ void st_streaming(float4* p, float4 v) {
    asm volatile("st.global.cs.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
                 : "memory");
}
__device__ __forceinline__ float4 ld_streaming(const float4* p) {
    float4 v;
    asm volatile("ld.global.cs.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p));
    return v;
}
// The cluster helpers are the generator's (optiml/program.cuh: rank, id, count, barrier, mapa), device code only.
#ifdef __CUDA_ARCH__
using optiml_p::cluster_addr;
using optiml_p::cluster_count;
using optiml_p::cluster_id;
using optiml_p::cluster_rank;
using optiml_p::cluster_sync;
__device__ __forceinline__ float2 cluster_ld2(const float2* p, unsigned rank) {
    float2 v;
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];"
                 : "=f"(v.x), "=f"(v.y)
                 : "r"(cluster_addr(p, rank))
                 : "memory");
    return v;
}
#endif

// (max, sum of exp(x - max)) pairs fold in a fixed order: bitwise repeatable.
__device__ __forceinline__ float2 fold(float2 a, float2 b) {
    if (b.x == -INFINITY) return a;
    if (a.x == -INFINITY) return b;
    const float m = fmaxf(a.x, b.x);
    return make_float2(m, a.y * __expf(a.x - m) + b.y * __expf(b.x - m));
}
__device__ __forceinline__ float2 step4(float2 acc, float4 v) {
    const float mx = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
    const float m = fmaxf(acc.x, mx);
    const float s = (acc.x == -INFINITY ? 0.f : acc.y * __expf(acc.x - m)) + __expf(v.x - m) + __expf(v.y - m) +
                    __expf(v.z - m) + __expf(v.w - m);
    return make_float2(m, s);
}

// The block's fold of every thread's pair, in thread order within warps then warp order; every thread gets it.
template <int THREADS>
__device__ __forceinline__ float2 block_fold(float2 v) {
    __shared__ float2 warps[THREADS / 32];
    __shared__ float2 total;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float2 w = make_float2(__shfl_down_sync(0xffffffffu, v.x, o), __shfl_down_sync(0xffffffffu, v.y, o));
        v = fold(v, w);
    }
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float2 t = warps[0];
        for (int w = 1; w < THREADS / 32; ++w) t = fold(t, warps[w]);
        total = t;
    }
    __syncthreads();
    return total;
}

// ---- kernels -----------------------------------------------------------------------------------------------------

__global__ void copy_kernel(const float4* __restrict__ x, float4* __restrict__ y, size_t n4) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x)
        st_streaming(y + i, ld_streaming(x + i));
}

// A block per row (rows looped over a grid of `gridDim.x` blocks): stats from DRAM, then re-read and write.
template <int THREADS>
__global__ void __launch_bounds__(THREADS) two_pass(const float* __restrict__ x, float* __restrict__ y, int R, int C) {
    const int n4 = C / 4;
    for (int r = blockIdx.x; r < R; r += gridDim.x) {
        const float4* xr = reinterpret_cast<const float4*>(x + (size_t)r * C);
        float4* yr = reinterpret_cast<float4*>(y + (size_t)r * C);
        float2 acc = make_float2(-INFINITY, 0.f);
        for (int i = threadIdx.x; i < n4; i += THREADS) acc = step4(acc, xr[i]);
        const float2 t = block_fold<THREADS>(acc);
        const float inv = 1.f / t.y;
        for (int i = threadIdx.x; i < n4; i += THREADS) {
            const float4 v = ld_streaming(xr + i);
            st_streaming(yr + i, make_float4(__expf(v.x - t.x) * inv, __expf(v.y - t.x) * inv,
                                             __expf(v.z - t.x) * inv, __expf(v.w - t.x) * inv));
        }
        __syncthreads();  // `block_fold`'s scratch is reused by the next row
    }
}

// A cluster of CS blocks per row; block `rank` holds elements [rank * C / CS, (rank + 1) * C / CS) of its row in
// shared memory. C must be a multiple of 4 * CS. Rows loop over the clusters of the grid.
template <int CS, int THREADS>
__global__ void __launch_bounds__(THREADS, 1) ring(const float* __restrict__ x, float* __restrict__ y, int R, int C) {
#ifdef __CUDA_ARCH__
    extern __shared__ float4 slice[];
    __shared__ float2 part[2];  // this block's (max, sum) for alternate rows: read by the cluster
    const unsigned rank = cluster_rank(), ncl = cluster_count();
    const int share = C / CS, n4 = share / 4;
    int r = (int)cluster_id();
    if (r < R) {
        const float4* src = reinterpret_cast<const float4*>(x + (size_t)r * C + (size_t)rank * share);
        for (int i = threadIdx.x; i < n4; i += THREADS) cp_async16(slice + i, src + i);
    }
    cp_async_commit();
    for (int phase = 0; r < R; r += (int)ncl, phase ^= 1) {
        cp_async_wait_all();
        __syncthreads();
        float2 acc = make_float2(-INFINITY, 0.f);
        for (int i = threadIdx.x; i < n4; i += THREADS) acc = step4(acc, slice[i]);
        const float2 mine = block_fold<THREADS>(acc);
        if (threadIdx.x == 0) part[phase] = mine;
        // The row's statistics: every block's pair, folded in rank order (the same bits in every block). The pairs
        // alternate between two slots, and a block rewrites a slot only after the next row's barrier, which every
        // block passes after reading it.
        cluster_sync();
        float2 t = cluster_ld2(&part[phase], 0);
#pragma unroll
        for (int q = 1; q < CS; ++q) t = fold(t, cluster_ld2(&part[phase], q));
        const float inv = 1.f / t.y;
        float4* dst = reinterpret_cast<float4*>(y + (size_t)r * C + (size_t)rank * share);
        const int next = r + (int)ncl;
        const float4* src = reinterpret_cast<const float4*>(x + (size_t)next * C + (size_t)rank * share);
        for (int i = threadIdx.x; i < n4; i += THREADS) {
            const float4 v = slice[i];
            st_streaming(dst + i, make_float4(__expf(v.x - t.x) * inv, __expf(v.y - t.x) * inv,
                                              __expf(v.z - t.x) * inv, __expf(v.w - t.x) * inv));
            // The slot is free once this thread has read it (no other thread touches it in this loop).
            if (next < R) cp_async16(slice + i, src + i);
        }
        cp_async_commit();
    }
    cp_async_wait_all();
    cluster_sync();  // no block leaves while another may still read its pairs
#endif
}

// ---- host --------------------------------------------------------------------------------------------------------

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Timer {
    cudaEvent_t a, b;
    float* flush;
    size_t flush_n;
    Timer() {
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        flush_n = (size_t)256 << 20;  // 1 GiB of floats overwritten: nothing of x is left in L2
        CK(cudaMalloc(&flush, flush_n * sizeof(float)));
    }
    template <class F>
    float run(int runs, F f) {
        f();  // warm-up
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<float> ts;
        for (int i = 0; i < runs; ++i) {
            CK(cudaMemsetAsync(flush, i & 0xff, flush_n * sizeof(float)));
            CK(cudaEventRecord(a));
            f();
            CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b));
            float ms;
            CK(cudaEventElapsedTime(&ms, a, b));
            ts.push_back(ms);
        }
        CK(cudaGetLastError());
        return median(ts);
    }
};

template <int CS, int THREADS>
static bool launch_ring(const float* x, float* y, int R, int C, int sms) {
    auto k = ring<CS, THREADS>;
    const size_t smem = (size_t)C / CS * sizeof(float);
    if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess) return false;
    if (CS > 8 && cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
        return false;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CS;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    int clusters = 0;
    cfg.gridDim = dim3(CS);
    if (cudaOccupancyMaxActiveClusters(&clusters, k, &cfg) != cudaSuccess || clusters == 0) {
        cudaGetLastError();
        return false;
    }
    clusters = std::min(clusters, R);
    cfg.gridDim = dim3(clusters * CS);
    static bool said = false;
    if (!said) {
        std::printf("  ring<%d, %d>: %d clusters resident (%d blocks on %d SMs), %zu KiB a block\n", CS, THREADS,
                    clusters, clusters * CS, sms, smem / 1024);
        said = true;
    }
    return cudaLaunchKernelEx(&cfg, k, x, y, R, C) == cudaSuccess;
}

// float64 softmax of row r against y's, max relative error.
static double check_row(const std::vector<float>& xr, const std::vector<float>& yr) {
    double m = -INFINITY, s = 0;
    for (float v : xr) m = std::max(m, (double)v);
    for (float v : xr) s += std::exp((double)v - m);
    double worst = 0;
    for (size_t i = 0; i < xr.size(); ++i) {
        const double want = std::exp((double)xr[i] - m) / s;
        if (!std::isfinite(yr[i])) return INFINITY;
        worst = std::max(worst, std::fabs(yr[i] - want) / want);
    }
    return worst;
}

int main(int argc, char** argv) {
    const int R = argc > 1 ? std::atoi(argv[1]) : 4096;
    const int C = argc > 2 ? std::atoi(argv[2]) : 393216;
    const int RUNS = argc > 3 ? std::atoi(argv[3]) : 10;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("%s, %d SMs; softmax over %d rows of %d f32 (%.2f GB read, %.2f GB written)\n", prop.name,
                prop.multiProcessorCount, R, C, 4.0 * R * C / 1e9, 4.0 * R * C / 1e9);
    const size_t n = (size_t)R * C;
    float *x, *y, *y2;
    CK(cudaMalloc(&x, n * 4));
    CK(cudaMalloc(&y, n * 4));
    CK(cudaMalloc(&y2, n * 4));
    // Inputs: N(0, 4)-ish from a hash, with a large offset on some rows (softmax must subtract the max).
    {
        std::vector<float> h((size_t)C);
        for (int r = 0; r < R; ++r) {
            unsigned s = 2654435761u * (r + 1);
            const float off = (r % 7 == 3) ? 80.f : 0.f;
            for (int c = 0; c < C; ++c) {
                s ^= s << 13, s ^= s >> 17, s ^= s << 5;
                h[c] = off + 4.f * ((s & 0xffffff) / 16777216.f - 0.5f) * 2.f;
            }
            CK(cudaMemcpy(x + (size_t)r * C, h.data(), (size_t)C * 4, cudaMemcpyHostToDevice));
        }
    }
    Timer t;
    const double bytes = 8.0 * n;
    const int sms = prop.multiProcessorCount;
    const float copy = t.run(RUNS, [&] { copy_kernel<<<sms * 8, 512>>>((const float4*)x, (float4*)y, n / 4); });
    const float memcpy_ms = t.run(RUNS, [&] { CK(cudaMemcpyAsync(y, x, n * 4, cudaMemcpyDeviceToDevice)); });
    const float best_copy = std::min(copy, memcpy_ms);
    std::printf("copy kernel %.3f ms (%.2f TB/s), cudaMemcpy D2D %.3f ms (%.2f TB/s)\n", copy, bytes / copy / 1e9,
                memcpy_ms, bytes / memcpy_ms / 1e9);
    std::vector<int> rows = {0, 3, R / 2, R - 1};
    auto verify = [&](const char* name, float* out) {
        double worst = 0;
        std::vector<float> xr(C), yr(C);
        for (int r : rows) {
            CK(cudaMemcpy(xr.data(), x + (size_t)r * C, (size_t)C * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(yr.data(), out + (size_t)r * C, (size_t)C * 4, cudaMemcpyDeviceToHost));
            worst = std::max(worst, check_row(xr, yr));
        }
        std::printf("  %s: max relative error %.2e on rows 0, 3, R/2, R-1 %s\n", name, worst,
                    worst < 1e-4 ? "(ok)" : "(WRONG)");
        return worst < 1e-4;
    };
    auto report = [&](const char* name, float ms) {
        std::printf("%-14s %.3f ms  %.2f TB/s  %.0f%% of copy\n", name, ms, bytes / ms / 1e9, 100.0 * best_copy / ms);
    };
    bool ok = true;
    CK(cudaMemset(y, 0xff, n * 4));
    const float tp = t.run(RUNS, [&] { two_pass<1024><<<std::min(R, sms * 2), 1024>>>(x, y, R, C); });
    report("two-pass", tp);
    ok &= verify("two-pass", y);
    auto ring_variant = [&](const char* name, auto launch) {
        CK(cudaMemset(y, 0xff, n * 4));
        if (!launch(y)) {
            std::printf("%-14s could not launch (%s)\n", name, cudaGetErrorString(cudaGetLastError()));
            return;
        }
        CK(cudaDeviceSynchronize());
        const float ms = t.run(RUNS, [&] { launch(y); });
        report(name, ms);
        ok &= verify(name, y);
        CK(cudaMemset(y2, 0, n * 4));
        launch(y2);
        CK(cudaDeviceSynchronize());
        // Bit for bit the same across runs: compare on the device through a host sample of whole rows.
        std::vector<float> a(C), b(C);
        bool same = true;
        for (int r : rows) {
            CK(cudaMemcpy(a.data(), y + (size_t)r * C, (size_t)C * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(b.data(), y2 + (size_t)r * C, (size_t)C * 4, cudaMemcpyDeviceToHost));
            same &= std::memcmp(a.data(), b.data(), (size_t)C * 4) == 0;
        }
        std::printf("  %s: two runs %s\n", name, same ? "bitwise equal" : "DIFFER");
        ok &= same;
    };
    if (C % (4 * 8) == 0 && (size_t)C / 8 * 4 <= 227 * 1024)
        ring_variant("ring<8, 512>", [&](float* out) { return launch_ring<8, 512>(x, out, R, C, sms); });
    if (C % (4 * 8) == 0 && (size_t)C / 8 * 4 <= 227 * 1024)
        ring_variant("ring<8, 1024>", [&](float* out) { return launch_ring<8, 1024>(x, out, R, C, sms); });
    if (C % (4 * 16) == 0 && (size_t)C / 16 * 4 <= 113 * 1024)
        ring_variant("ring<16, 512>", [&](float* out) { return launch_ring<16, 512>(x, out, R, C, sms); });
    std::printf("%s\n", ok ? "all checks passed" : "SOME CHECK FAILED");
    return ok ? 0 : 1;
}
