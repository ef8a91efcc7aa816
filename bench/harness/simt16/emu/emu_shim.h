// CPU emulation of the CUDA execution model, just enough to run
// matmul16_simt.cu unchanged on the host (harness.cu -DHARNESS_EMU, g++):
//  * a block = 256 std::threads; __syncthreads = a pthread barrier over them;
//  * __shared__ = static (one copy, shared by the threads; blocks run one
//    after the other, separated by a barrier, so a block never sees another
//    block's writes in flight);
//  * threadIdx / blockIdx thread_local, gridDim / blockDim global;
//  * the kernel's 16-bit conversions come from the harness's host RNE
//    conversions through the OPTIML_SIMT16_EMU hook (the inline PTX is not
//    emulated: the GPU run checks it).
// Checks the kernel's index math, predicates, shared-memory staging and
// barrier structure (with -fsanitize=address,undefined: out-of-allocation
// accesses and int overflow), not the PTX.
// Needs h_from16 / h_to16 declared before this header.
#pragma once
#include <pthread.h>
#include <math.h>
#include <thread>
#include <vector>

#define OPTIML_SIMT16_EMU 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
// optiml/epilogue.cuh (#included by the templates) calls these CUDA intrinsics from inline functions that are
// compiled whatever OPTIML_ACT selects; exp2f, erff, expf, fmaf, fminf, fmaxf, fabsf come from <math.h>.
// Host meaning: __expf = expf, __fdividef = a / b. noexcept: glibc's <math.h> already declares __expf.
inline float __expf(float x) noexcept { return expf(x); }
inline float __fdividef(float a, float b) noexcept { return a / b; }

struct emu_dim3 {
    unsigned x, y, z;
};
static thread_local emu_dim3 threadIdx, blockIdx;
static emu_dim3 gridDim, blockDim;
static pthread_barrier_t emu_bar;
static inline void __syncthreads() { pthread_barrier_wait(&emu_bar); }
static inline float optiml_emu_from16(unsigned short u) { return h_from16(u); }
static inline unsigned short optiml_emu_to16(float x) { return h_to16(x); }

// Runs body() for every block of the grid (x fastest) with `threads` threads.
template <class F>
static void emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned threads, F body) {
    gridDim = emu_dim3{gx, gy, gz};
    blockDim = emu_dim3{threads, 1, 1};
    pthread_barrier_init(&emu_bar, nullptr, threads);
    std::vector<std::thread> ts;
    ts.reserve(threads);
    for (unsigned t = 0; t < threads; ++t) {
        ts.emplace_back([=, &body] {
            threadIdx = emu_dim3{t, 0, 0};
            for (unsigned z = 0; z < gz; ++z)
                for (unsigned y = 0; y < gy; ++y)
                    for (unsigned x = 0; x < gx; ++x) {
                        blockIdx = emu_dim3{x, y, z};
                        body();
                        pthread_barrier_wait(&emu_bar);  // block boundary: shared memory is reused
                    }
        });
    }
    for (auto& th : ts) th.join();
    pthread_barrier_destroy(&emu_bar);
}
