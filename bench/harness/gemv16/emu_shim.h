// CPU emulation of the CUDA execution model, enough to run gemv_16.cu
// unchanged on the host (harness.cu -DHARNESS_EMU, g++), under ASan + UBSan.
//
//  * One block at a time; its THREADS CUDA threads are user-level fibers
//    (ucontext) on one OS thread, scheduled round-robin: a fiber runs until
//    it reaches __syncthreads, a warp shuffle, or its end. Deterministic and
//    fast (no OS-thread barriers), annotated for AddressSanitizer
//    (__sanitizer_start/finish_switch_fiber). g16emu::reverse = true
//    switches to another legal schedule: warp-serial, last warp first (each
//    warp runs, its shuffles resolved at once, until it waits at
//    __syncthreads or ends). The harness alternates the two, so a missing
//    barrier that one order hides shows in the other, and the results must
//    be the same bits under both.
//  * __syncthreads: released when every thread of the block waits at it; all
//    must wait at the same call site, and none may have exited (a barrier
//    with exited threads is reported as an error: the kernel must not rely on
//    it).
//  * __shfl_xor_sync / __shfl_sync (full mask only): resolved when all 32
//    lanes of the warp wait at the same call site with the same kind;
//    a warp whose lanes are split between a shuffle and anything else
//    (another site, __syncthreads, exit) is a divergence error; no progress
//    at all is a deadlock error. Both abort the test.
//  * __shared__ = function-static (shared by the fibers; blocks run one after
//    the other). threadIdx = the current fiber's; blockIdx / gridDim /
//    blockDim global.
//  * uint4 / uint2 are alignas(16) / alignas(8): UBSan (-fsanitize=alignment)
//    flags any misaligned vector load. __ldg / __ldcs of every width report
//    each load to emu_load_hook (the harness counts matrix reads per element).
//  * fp16 <-> f32 conversions (inline PTX in the kernel) come from the
//    harness's host conversions through the OPTIML_G16_EMU hook; bf16 uses
//    the kernel's own bit operations (including the pre-sm_80 integer
//    round-to-nearest-even path for the output).
// Needs h_from16 / h_to16 declared before this header.
#pragma once
#include <sys/mman.h>
#include <ucontext.h>

#include <cmath>
#include <math.h>  // the global-namespace float functions optiml/epilogue.cuh calls
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#define OPTIML_G16_EMU 1
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

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned x, y;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }

static inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float optiml_g16_emu_h2f(unsigned short u) { return h_from16(u); }
static inline unsigned short optiml_g16_emu_f2h(float x) { return h_to16(x); }

// load hook: (address, bytes) of every __ldg / __ldcs
static void (*emu_load_hook)(const void*, unsigned) = nullptr;
template <class T>
static inline T emu_ld(const T* p) {
    if (emu_load_hook) emu_load_hook(p, (unsigned)sizeof(T));
    return *p;
}
static inline unsigned short __ldg(const unsigned short* p) { return emu_ld(p); }
static inline unsigned __ldg(const unsigned* p) { return emu_ld(p); }
static inline uint2 __ldg(const uint2* p) { return emu_ld(p); }
static inline uint4 __ldg(const uint4* p) { return emu_ld(p); }
static inline float __ldg(const float* p) { return emu_ld(p); }
static inline unsigned short __ldcs(const unsigned short* p) { return emu_ld(p); }
static inline uint4 __ldcs(const uint4* p) { return emu_ld(p); }

static uint3 blockIdx;
static dim3 gridDim, blockDim;

namespace g16emu {

enum State { RUNNABLE, AT_SYNC, AT_SHFL, DONE };
enum ShflKind { XOR, IDX };

struct Fiber {
    ucontext_t ctx;
    char* stack = nullptr;  // usable part (above the guard page)
    size_t size = 0;
    uint3 tid{0, 0, 0};
    State state = DONE;
    const void* site = nullptr;  // call site of the pending barrier / shuffle
    int kind = 0;
    uint32_t val = 0;  // shuffle operand bits
    int arg = 0;       // lane mask (xor) or source lane (idx)
    uint32_t res = 0;  // shuffle result bits
};

static const size_t kStack = 256 * 1024;
static const size_t kPage = 4096;
static std::vector<Fiber> fibers;
static Fiber* cur = nullptr;
static ucontext_t sched_ctx;
static const std::function<void()>* body = nullptr;
static bool reverse = false;  // warp-serial, last warp first (see above)
#if defined(__SANITIZE_ADDRESS__)
static const void* main_bottom = nullptr;
static size_t main_size = 0;
#endif

[[noreturn]] static void fail(const char* what) {
    fprintf(stderr, "emu: %s (block %u,%u,%u)\n", what, blockIdx.x, blockIdx.y, blockIdx.z);
    fflush(stderr);
    abort();
}

// fiber -> scheduler
static void yield_to_sched(bool dying) {
#if defined(__SANITIZE_ADDRESS__)
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(dying ? nullptr : &fake, main_bottom, main_size);
    swapcontext(&cur->ctx, &sched_ctx);
    __sanitizer_finish_switch_fiber(fake, &main_bottom, &main_size);
#else
    (void)dying;
    swapcontext(&cur->ctx, &sched_ctx);
#endif
}

static void trampoline() {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(nullptr, &main_bottom, &main_size);
#endif
    (*body)();
    cur->state = DONE;
    yield_to_sched(true);
    fail("finished fiber resumed");
}

// scheduler -> fiber f
static void resume(Fiber& f) {
    cur = &f;
#if defined(__SANITIZE_ADDRESS__)
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, f.stack, f.size);
    swapcontext(&sched_ctx, &f.ctx);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    swapcontext(&sched_ctx, &f.ctx);
#endif
    cur = nullptr;
}

static void ensure_fibers(unsigned n) {
    if (fibers.size() >= n) return;
    const size_t old = fibers.size();
    fibers.resize(n);
    for (size_t i = old; i < n; ++i) {
        void* m = mmap(nullptr, kStack + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) fail("mmap");
        mprotect(m, kPage, PROT_NONE);  // guard page below the stack
        fibers[i].stack = static_cast<char*>(m) + kPage;
        fibers[i].size = kStack;
    }
}

// A warp whose 32 lanes all wait at one shuffle: exchange, make them
// runnable, return true. No lane waiting: false. Some but not all lanes (or
// different call sites): a divergence error.
static bool resolve_shuffle(Fiber* lanes) {
    unsigned at = 0;
    for (unsigned l = 0; l < 32; ++l) at += lanes[l].state == AT_SHFL;
    if (at == 0) return false;
    if (at != 32) {
        for (unsigned l = 0; l < 32; ++l)
            if (lanes[l].state == RUNNABLE) return false;  // the others are still on their way (warp-serial schedule)
        fail("warp shuffle reached by only part of a warp (divergence / exited lanes)");
    }
    for (unsigned l = 1; l < 32; ++l)
        if (lanes[l].site != lanes[0].site || lanes[l].kind != lanes[0].kind)
            fail("lanes of a warp wait at different shuffles");
    for (unsigned l = 0; l < 32; ++l) {
        const unsigned src = lanes[l].kind == XOR ? (l ^ (unsigned)lanes[l].arg) & 31u : (unsigned)lanes[l].arg & 31u;
        lanes[l].res = lanes[src].val;
    }
    for (unsigned l = 0; l < 32; ++l) lanes[l].state = RUNNABLE;
    return true;
}

static void run_block(unsigned nthreads) {
    ensure_fibers(nthreads);
    for (unsigned t = 0; t < nthreads; ++t) {
        Fiber& f = fibers[t];
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = f.size;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, trampoline, 0);
        f.tid = uint3{t, 0, 0};
        f.state = RUNNABLE;
        f.site = nullptr;
    }
    const unsigned nwarps = (nthreads + 31) / 32;
    for (;;) {
        if (!reverse) {
            for (unsigned t = 0; t < nthreads; ++t)
                if (fibers[t].state == RUNNABLE) resume(fibers[t]);
        } else {
            // warp-serial, last warp first: a warp runs (its shuffles resolved
            // at once) until it waits at __syncthreads or ends, then the next
            for (unsigned w = nwarps; w-- > 0;) {
                for (;;) {
                    for (unsigned l = 32; l-- > 0;)
                        if (fibers[32 * w + l].state == RUNNABLE) resume(fibers[32 * w + l]);
                    if (!resolve_shuffle(&fibers[32 * w])) break;
                }
            }
        }
        // everyone is now waiting or done
        unsigned done = 0, sync = 0, released = 0;
        for (unsigned t = 0; t < nthreads; ++t) {
            done += fibers[t].state == DONE;
            sync += fibers[t].state == AT_SYNC;
        }
        if (done == nthreads) return;
        for (unsigned w = 0; w < nwarps; ++w) released += resolve_shuffle(&fibers[32 * w]) ? 32 : 0;
        if (released) continue;
        if (sync == 0) fail("deadlock");
        if (sync + done != nthreads) fail("deadlock (barrier and shuffle waits mixed)");
        if (done) fail("__syncthreads with exited threads");
        for (unsigned t = 1; t < nthreads; ++t)
            if (fibers[t].site != fibers[0].site) fail("threads wait at different __syncthreads");
        for (unsigned t = 0; t < nthreads; ++t) fibers[t].state = RUNNABLE;
    }
}

}  // namespace g16emu

#define threadIdx (::g16emu::cur->tid)

__attribute__((noinline)) static void __syncthreads() {
    g16emu::cur->state = g16emu::AT_SYNC;
    g16emu::cur->site = __builtin_return_address(0);
    g16emu::yield_to_sched(false);
}
template <class T>
__attribute__((noinline)) static T emu_shfl(unsigned mask, T v, int arg, int kind, const void* site) {
    static_assert(sizeof(T) == 4, "32-bit shuffles only");
    if (mask != 0xffffffffu) g16emu::fail("partial shuffle mask");
    if (g16emu::cur->tid.x / 32 * 32 + 32 > blockDim.x) g16emu::fail("shuffle in a partial warp");
    uint32_t bits;
    memcpy(&bits, &v, 4);
    g16emu::cur->state = g16emu::AT_SHFL;
    g16emu::cur->site = site;
    g16emu::cur->kind = kind;
    g16emu::cur->val = bits;
    g16emu::cur->arg = arg;
    g16emu::yield_to_sched(false);
    T r;
    memcpy(&r, &g16emu::cur->res, 4);
    return r;
}
template <class T>
__attribute__((noinline)) static T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
    return emu_shfl(mask, v, lane_mask, g16emu::XOR, __builtin_return_address(0));
}
template <class T>
__attribute__((noinline)) static T __shfl_sync(unsigned mask, T v, int src) {
    return emu_shfl(mask, v, src, g16emu::IDX, __builtin_return_address(0));
}

// Runs body() as every thread of every block of the grid (x fastest, then y, z).
static void emu_launch(dim3 grid, unsigned threads, const std::function<void()>& body) {
    if (threads == 0 || threads % 32 != 0) g16emu::fail("1-D blocks of whole warps only");
    gridDim = grid;
    blockDim = dim3(threads, 1, 1);
    g16emu::body = &body;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                blockIdx = uint3{x, y, z};
                g16emu::run_block(threads);
            }
    g16emu::body = nullptr;
}
