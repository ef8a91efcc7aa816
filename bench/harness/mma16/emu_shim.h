// CPU emulation of the CUDA execution model and of the PTX that
// matmul_mma_16.cu uses, just enough to run the UNMODIFIED kernel source on
// the host (harness.cu -DHARNESS_EMU, g++; see run_emu.sh):
//  * a block = OPTIML_M16_THREADS std::threads; __syncthreads = a pthread
//    barrier over them (+ a block-wide epoch counter for the race checker);
//  * dynamic shared memory = one host buffer (blocks run one after the
//    other), poisoned with 0xFF bytes (a NaN in bf16 and fp16) before every
//    block, so a read of anything the kernel did not write shows up as NaN;
//  * the kernel's PTX helpers (OPTIML_M16_EMU hook) call the functions below:
//    - ldmatrix.x4 (.trans): warp-collective: every lane posts its row
//      address, then every lane assembles its 4 registers from the 4 posted
//      8x8 matrices exactly as the PTX ISA specifies (non-trans: lane l gets
//      row l/4, elements 2(l%4), 2(l%4)+1 of matrix j in register j; .trans:
//      elements [2(l%4)][l/4] and [2(l%4)+1][l/4]; lower element in the low
//      half). Row addresses must be 16-byte aligned and inside the buffer.
//    - mma.m16n8k16 .row.col f32 += bf16/fp16: warp-collective: every lane
//      posts its a[4], b[2], c[4]; every lane rebuilds the 16x16 A, 16x8 B
//      from the fragments (PTX ISA "Matrix Fragments for mma.m16n8k16 with
//      floating point type": a_i row = g (+8 for a2,a3,a6,a7), column 2t + i%2
//      (+8 for i >= 4); b_i row 2t + i%2 (+8 for i >= 2), column g; c_i row g
//      (+8 for i >= 2), column 2t + i%2; g = lane/4, t = lane%4) and computes
//      its 4 outputs: products exact in fp32, summed in fp32 in k order (the
//      tensor core's summation order differs; the harness tolerance covers it).
//    - cp.async (16 / 4 bytes, src-size 0 = zero fill): checked for
//      alignment (dst and src aligned to the copy size, as the PTX requires)
//      and bounds; performed at issue (EMU_CP=eager) or only at the
//      cp.async.wait_group that retires its group (EMU_CP=lazy, the default:
//      a read of a stage before its wait + barrier sees stale data or poison).
//    - commit / wait_group: per-thread group bookkeeping; every group must be
//      retired when the block ends.
//    - st.shared.v4.u32 (the 16-bit path's chunks): checked and performed.
//    - 32-bit global accesses of the epilogue: checked for 4-byte alignment.
//  * race checker (lazy mode): per 2-byte shared element, the epoch
//    (barrier interval) of its last write and the writer's warp, and per
//    warp the epoch of its last read. A read by warp x of an element written
//    by another warp in the same epoch, a write (cp.async: anywhere between
//    its issue and its wait) to an element another warp read in an epoch
//    inside that window, and a read of an element never written in this
//    block are reported (EMU RACE / EMU UNINIT lines, counted).
//  * ldmatrix bank conflicts: per 8-lane phase, the number of shared
//    memory wavefronts (max addresses sharing a 16-byte bank group) is
//    accumulated; 1 per phase is conflict-free.
//  * 16-bit conversions: the harness's host RNE conversions.
// Needs h_from16 / h_to16 and OPTIML_DTYPE declared before this header.
#pragma once
#include <pthread.h>
#include <math.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#define OPTIML_M16_EMU 1
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

// ------------------------------------------------------------ block state
static pthread_barrier_t emu_bar;
static std::atomic<int> emu_epoch{0};
static unsigned char* emu_smem = nullptr;
static size_t emu_smem_size = 0;
static bool emu_lazy = true;
static std::atomic<long long> emu_races{0}, emu_uninit{0}, emu_faults{0};
static std::atomic<long long> emu_ldsm_phases{0}, emu_ldsm_wavefronts{0};
static std::atomic<long long> emu_cp_bytes{0}, emu_sts{0};
// race checker arrays (per 2-byte element)
static std::vector<std::atomic<int>> emu_wepoch;   // epoch of the last write (-1: none in this block)
static std::vector<std::atomic<int>> emu_wwarp;    // warp of the last write
static std::vector<std::atomic<int>> emu_repoch;   // [elem * 32 + warp]: epoch of that warp's last read (-1)

static void emu_report(std::atomic<long long>& ctr, const char* what, unsigned off) {
    if (ctr.fetch_add(1) < 5)
        printf("EMU %s: shared byte %u, thread %u, block (%u,%u,%u), epoch %d\n", what, off, threadIdx.x, blockIdx.x,
               blockIdx.y, blockIdx.z, emu_epoch.load());
}

static inline void __syncthreads() {
    if (pthread_barrier_wait(&emu_bar) == PTHREAD_BARRIER_SERIAL_THREAD) emu_epoch.fetch_add(1);
    pthread_barrier_wait(&emu_bar);  // everyone sees the new epoch
}

static bool emu_check(unsigned off, unsigned bytes, unsigned align, const char* what) {
    if (off % align != 0 || (size_t)off + bytes > emu_smem_size) {
        if (emu_faults.fetch_add(1) < 5)
            printf("EMU FAULT %s: shared offset %u (+%u) misaligned (%u) or outside %zu bytes, thread %u\n", what, off,
                   bytes, align, emu_smem_size, threadIdx.x);
        return false;
    }
    return true;
}

// a write of [off, off+bytes) by this thread's warp, possibly landing
// anywhere in epochs [e1, now]
static void emu_note_write(unsigned off, unsigned bytes, int e1) {
    const int now = emu_epoch.load(), w = (int)(threadIdx.x / 32);
    for (unsigned e = off / 2; e < (off + bytes) / 2; ++e) {
        for (int x = 0; x < 32; ++x)
            if (x != w && emu_repoch[e * 32 + x].load(std::memory_order_relaxed) >= e1) {
                emu_report(emu_races, "RACE (write after another warp's read, no barrier between)", e * 2);
                break;
            }
        emu_wepoch[e].store(now, std::memory_order_relaxed);
        emu_wwarp[e].store(w, std::memory_order_relaxed);
    }
}
static void emu_note_read(unsigned off, unsigned bytes, int w) {
    const int now = emu_epoch.load();
    for (unsigned e = off / 2; e < (off + bytes) / 2; ++e) {
        const int we = emu_wepoch[e].load(std::memory_order_relaxed);
        if (we < 0) emu_report(emu_uninit, "UNINIT (read of shared memory not written in this block)", e * 2);
        else if (we >= now && emu_wwarp[e].load(std::memory_order_relaxed) != w)
            emu_report(emu_races, "RACE (read of another warp's write, no barrier between)", e * 2);
        emu_repoch[e * 32 + w].store(now, std::memory_order_relaxed);
    }
}

// ------------------------------------------------------------ cp.async
struct EmuCp {
    unsigned dst;
    const void* src;
    int bytes, srcsize, issue_epoch;
    unsigned group;
};
static thread_local std::vector<EmuCp> emu_pending;
static thread_local unsigned emu_groups = 0;  // groups committed so far by this thread

static void emu_do_cp(const EmuCp& c) {
    if (c.srcsize) memcpy(emu_smem + c.dst, c.src, (size_t)c.bytes);
    else memset(emu_smem + c.dst, 0, (size_t)c.bytes);
    emu_cp_bytes.fetch_add(c.bytes);
    if (emu_lazy) emu_note_write(c.dst, (unsigned)c.bytes, c.issue_epoch);
}
static inline unsigned optiml_emu_m16_smem_base() { return 0u; }
static inline void optiml_emu_m16_cp(unsigned dst, const void* src, int bytes, int srcsize) {
    if (!emu_check(dst, (unsigned)bytes, (unsigned)bytes, "cp.async dst")) return;
    if (srcsize != 0 && srcsize != bytes) {
        emu_report(emu_faults, "FAULT cp.async src-size", dst);
        return;
    }
    if (srcsize && ((unsigned long long)src % (unsigned)bytes) != 0) {
        emu_report(emu_faults, "FAULT cp.async global source misaligned", dst);
        return;
    }
    const EmuCp c{dst, src, bytes, srcsize, emu_epoch.load(), emu_groups};
    if (emu_lazy) emu_pending.push_back(c);
    else emu_do_cp(c);
}
static inline void optiml_emu_m16_commit() { ++emu_groups; }
static inline void optiml_emu_m16_wait(int n) {
    // retire every copy of a committed group older than the n most recent
    std::vector<EmuCp> keep;
    for (const EmuCp& c : emu_pending) {
        if (c.group + (unsigned)n < emu_groups) emu_do_cp(c);
        else keep.push_back(c);
    }
    emu_pending.swap(keep);
}
static inline void optiml_emu_m16_sts128(unsigned dst, unsigned a, unsigned b, unsigned c, unsigned d) {
    if (!emu_check(dst, 16, 16, "st.shared.v4.u32")) return;
    const unsigned v[4] = {a, b, c, d};
    memcpy(emu_smem + dst, v, 16);
    emu_sts.fetch_add(1);
    if (emu_lazy) emu_note_write(dst, 16, emu_epoch.load());
}

// ------------------------------------------------------------ warp collectives
struct EmuWarp {
    pthread_barrier_t bar;
    unsigned addr[32];
    unsigned a[32][4], b[32][2];
    float c[32][4];
};
static EmuWarp emu_warps[32];

static inline unsigned short emu_ld16(unsigned off) {
    unsigned short v;
    memcpy(&v, emu_smem + off, 2);
    return v;
}
static inline void optiml_emu_m16_ldsm4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned addr,
                                        bool trans) {
    const unsigned l = threadIdx.x & 31, w = threadIdx.x / 32;
    EmuWarp& W = emu_warps[w];
    W.addr[l] = addr;
    pthread_barrier_wait(&W.bar);
    bool ok = true;
    for (int q = 0; q < 32; ++q) ok &= emu_check(W.addr[q], 16, 16, "ldmatrix row address");
    unsigned r[4] = {0, 0, 0, 0};
    if (ok) {
        for (int j = 0; j < 4; ++j) {
            // matrix j: rows at W.addr[8j + row]; element (row, col) = 16 bits at addr + 2 col
            unsigned lo, hi;
            if (!trans) {
                lo = emu_ld16(W.addr[8 * j + l / 4] + 2 * (2 * (l % 4)));
                hi = emu_ld16(W.addr[8 * j + l / 4] + 2 * (2 * (l % 4) + 1));
            } else {
                lo = emu_ld16(W.addr[8 * j + 2 * (l % 4)] + 2 * (l / 4));
                hi = emu_ld16(W.addr[8 * j + 2 * (l % 4) + 1] + 2 * (l / 4));
            }
            r[j] = lo | (hi << 16);
        }
        if (l == 0) {  // bookkeeping once per warp instruction
            for (int j = 0; j < 4; ++j) {
                int cnt[8] = {0, 0, 0, 0, 0, 0, 0, 0}, mx = 0;
                for (int q = 0; q < 8; ++q) mx = std::max(mx, ++cnt[(W.addr[8 * j + q] >> 4) & 7]);
                emu_ldsm_phases.fetch_add(1);
                emu_ldsm_wavefronts.fetch_add(mx);
            }
            if (emu_lazy)
                for (int q = 0; q < 32; ++q) emu_note_read(W.addr[q], 16, (int)w);
        }
    }
    pthread_barrier_wait(&W.bar);  // addresses are reused by the next call
    r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}

static inline float emu_h2f(unsigned bits16) { return h_from16((uint16_t)bits16); }
static inline void optiml_emu_m16_mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    const unsigned l = threadIdx.x & 31, w = threadIdx.x / 32;
    EmuWarp& W = emu_warps[w];
    for (int q = 0; q < 4; ++q) W.a[l][q] = a[q], W.c[l][q] = d[q];
    for (int q = 0; q < 2; ++q) W.b[l][q] = b[q];
    pthread_barrier_wait(&W.bar);
    // rebuild A (16 x 16) and B (16 x 8) from the 32 lanes' fragments
    float A[16][16], B[16][8];
    for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        for (int i = 0; i < 8; ++i) {  // a_i: register i/2, half i%2
            const int row = g + (((i >> 1) & 1) ? 8 : 0);
            const int col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
            A[row][col] = emu_h2f((W.a[lane][i / 2] >> (16 * (i & 1))) & 0xFFFFu);
        }
        for (int i = 0; i < 4; ++i) {  // b_i: register i/2, half i%2
            const int row = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
            B[row][g] = emu_h2f((W.b[lane][i / 2] >> (16 * (i & 1))) & 0xFFFFu);
        }
    }
    float out[4];
    {
        const int g = l / 4, t = l % 4;
        for (int i = 0; i < 4; ++i) {
            const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
            float s = W.c[l][i];
            for (int k = 0; k < 16; ++k) s += A[row][k] * B[k][col];
            out[i] = s;
        }
    }
    pthread_barrier_wait(&W.bar);
    for (int q = 0; q < 4; ++q) d[q] = out[q];
}

// 32-bit global accesses of the epilogue must be 4-byte aligned
static inline void optiml_emu_m16_galign(const void* p, unsigned a) {
    if ((unsigned long long)p % a) emu_report(emu_faults, "FAULT misaligned global access", 0);
}
static inline float optiml_emu_m16_from16(unsigned short u) { return h_from16(u); }
static inline unsigned short optiml_emu_m16_to16(float x) { return h_to16(x); }

// ------------------------------------------------------------ launch
// Runs body() for every block of the grid (x fastest) with `threads`
// threads and `smem` bytes of dynamic shared memory.
template <class F>
static void emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned threads, size_t smem, F body) {
    gridDim = emu_dim3{gx, gy, gz};
    blockDim = emu_dim3{threads, 1, 1};
    const char* m = getenv("EMU_CP");
    emu_lazy = !(m && !strcmp(m, "eager"));
    std::vector<unsigned char> buf(smem + 16);
    emu_smem = buf.data();
    emu_smem_size = smem;
    std::vector<std::atomic<int>> we(smem / 2), ww(smem / 2), re(smem / 2 * 32);
    emu_wepoch.swap(we);
    emu_wwarp.swap(ww);
    emu_repoch.swap(re);
    pthread_barrier_init(&emu_bar, nullptr, threads);
    for (unsigned w = 0; w < threads / 32; ++w) pthread_barrier_init(&emu_warps[w].bar, nullptr, 32);
    auto reset_block = [&] {
        memset(emu_smem, 0xFF, smem);
        for (auto& x : emu_wepoch) x.store(-1);
        for (auto& x : emu_repoch) x.store(-1);
    };
    reset_block();
    std::vector<std::thread> ts;
    ts.reserve(threads);
    for (unsigned t = 0; t < threads; ++t) {
        ts.emplace_back([=, &body, &reset_block] {
            threadIdx = emu_dim3{t, 0, 0};
            emu_pending.clear();
            emu_groups = 0;
            for (unsigned z = 0; z < gz; ++z)
                for (unsigned y = 0; y < gy; ++y)
                    for (unsigned x = 0; x < gx; ++x) {
                        blockIdx = emu_dim3{x, y, z};
                        body();
                        if (!emu_pending.empty()) {
                            emu_report(emu_faults, "FAULT cp.async group never waited for", emu_pending[0].dst);
                            emu_pending.clear();
                        }
                        // block boundary: shared memory is reused
                        if (pthread_barrier_wait(&emu_bar) == PTHREAD_BARRIER_SERIAL_THREAD) reset_block();
                        pthread_barrier_wait(&emu_bar);
                    }
        });
    }
    for (auto& th : ts) th.join();
    pthread_barrier_destroy(&emu_bar);
    for (unsigned w = 0; w < threads / 32; ++w) pthread_barrier_destroy(&emu_warps[w].bar);
    emu_smem = nullptr;
}
