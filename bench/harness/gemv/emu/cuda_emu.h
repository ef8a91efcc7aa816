// Minimal CPU emulation of the CUDA device features gemv_f32.cu uses, so the
// kernel source itself can run on the host (one std::thread per CUDA thread,
// one block at a time) under AddressSanitizer / UBSan. Test-only.
//  * __shared__ -> function-static (correct because blocks run one at a time)
//  * __syncthreads -> std::barrier over the block
//  * __shfl_xor_sync -> per-warp exchange slots + std::barrier over the warp
//    (deadlocks, i.e. the test times out, if a warp's lanes do not all call it)
//  * float4 is alignas(16): UBSan -fsanitize=alignment flags misaligned float4 loads
#pragma once
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <math.h>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
// optiml/epilogue.cuh (#included by the templates) calls these CUDA intrinsics from inline functions that are
// compiled whatever OPTIML_ACT selects; exp2f, erff, expf, fmaf, fminf, fmaxf, fabsf come from <math.h>.
// Host meaning: __expf = expf, __fdividef = a / b. noexcept: glibc's <math.h> already declares __expf.
inline float __expf(float x) noexcept { return expf(x); }
inline float __fdividef(float a, float b) noexcept { return a / b; }

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 { unsigned x, y, z; };
struct alignas(16) float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline dim3 gridDim, blockDim;

inline float __ldg(const float* p) { return *p; }
inline float4 __ldg(const float4* p) { return *p; }
inline float __ldcs(const float* p) { return *p; }
inline float4 __ldcs(const float4* p) { return *p; }

struct EmuWarp {
    std::barrier<> bar{32};
    float v[32];
};
inline std::barrier<>* g_emu_block_bar = nullptr;
inline std::vector<EmuWarp*> g_emu_warps;

inline void __syncthreads() { g_emu_block_bar->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned mask, float v, int o) {
    if (mask != 0xffffffffu) { fprintf(stderr, "emu: partial shuffle mask\n"); abort(); }
    const unsigned t = threadIdx.x;
    EmuWarp& w = *g_emu_warps[t / 32];
    w.v[t % 32] = v;
    w.bar.arrive_and_wait();
    const float r = w.v[(t % 32) ^ (unsigned)o];
    w.bar.arrive_and_wait();
    return r;
}

// Runs body() as every thread of every block; blocks in launch order (x fastest).
inline void emu_launch(dim3 grid, dim3 block, const std::function<void()>& body) {
    if (block.y != 1 || block.z != 1 || block.x % 32 != 0) { fprintf(stderr, "emu: 1-D blocks of whole warps only\n"); abort(); }
    gridDim = grid;
    blockDim = block;
    const unsigned nw = block.x / 32;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                std::barrier<> bb((std::ptrdiff_t)block.x);
                g_emu_block_bar = &bb;
                g_emu_warps.clear();
                for (unsigned w = 0; w < nw; ++w) g_emu_warps.push_back(new EmuWarp());
                std::vector<std::thread> th;
                th.reserve(block.x);
                for (unsigned t = 0; t < block.x; ++t)
                    th.emplace_back([&, t, x, y, z]() {
                        threadIdx = uint3{t, 0, 0};
                        blockIdx = uint3{x, y, z};
                        body();
                        // a thread that returns early must not leave its block's barrier short
                    });
                for (auto& t : th) t.join();
                for (auto* w : g_emu_warps) delete w;
                g_emu_warps.clear();
            }
}
