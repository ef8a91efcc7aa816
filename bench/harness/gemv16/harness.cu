// Correctness + timing harness for gemv_16.cu (16-bit GEMV, optiml_gemv).
// One binary per kernel configuration (OPTIML_* macros from -D; see run.sh):
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -Xptxas -v -I <templates> -I <repo>/optiml-build/src/cuda <-D...>
//        -DHARNESS_NAME='"bf16_nn_plain"' harness.cu -o h
//   ./h [--no-timing] [--seed N] [--quiet] [--stop]
//
// The same file builds on the CPU without CUDA (-DHARNESS_EMU, g++, see
// run_emu.sh): the unmodified kernel source then runs on emu_shim.h (one
// fiber per CUDA thread, real __syncthreads / warp-shuffle semantics) under
// ASan + UBSan, and the harness also counts the kernel's reads of the matrix
// operand per element.
//
// 1. Host 16-bit conversions (RNE, written here) are self-tested first: every
//    16-bit pattern round-trips, every midpoint rounds to the even neighbour.
// 2. Correctness, per case (both shapes N == 1 and M == 1 with this config's
//    TRANS flags, i.e. both modes across the configs; every residue of K, M,
//    N mod 8 incl. 0, 1, 2, 7, 9 and K = 0; base pointers offset by 0..7
//    elements; batch 3 with padded strides and with a broadcast (stride 0)
//    operand; batch 70; NaN / Inf inputs; a non-GEMV shape): inputs uniform
//    [-1, 1) rounded to the 16-bit type (the kernel gets exactly those bits),
//    bias fp32, C_old random 16-bit (HAS_BETA) or NaN. Padding between batch
//    items holds NaN (a read of it that reaches an output makes it NaN).
//    C has guard elements before / after and in the gaps, which must stay
//    bitwise unchanged. Reference: float64 on the rounded inputs, generic
//    matmul indexing (independent of the kernel's modes), epilogue in float64
//    (gelu exact with erf). Pass, per element (out = output as double):
//        |out - ref| <= tol * max(|ref|, T) (+ 2^-24 for fp16)
//      tol = 8e-3 (bf16) / 1e-3 (fp16),
//      T = |alpha| sum_k |a b| + |beta C_old| + |bias| (x 1.2 with gelu,
//          its Lipschitz constant is 1.13);
//    a non-finite reference must come out as the same non-finite value (NaN:
//    any NaN). Every case runs on several grids: the launcher's
//    (ceil(L / 16), 1, min(batch, 65535)), 1 x 1 x 1, 2 x 1 x 2, 3 x 1 x 3,
//    the ideal tile grid, and an oversized one (grid.y = 2, grid.z > batch);
//    all must give bitwise identical C (determinism + the grid loops; EMU:
//    the odd-numbered grids run with the reverse fiber schedule).
//    EMU only: every element of the matrix operand is read exactly once per
//    batch item that uses it (padding never), and when every row is 16-byte
//    aligned all matrix bytes come from 16-byte loads.
// 3. Timing (GPU, not --no-timing): 8192 x 1 x 8192 (N == 1) and 1 x 8192 x
//    8192 (M == 1) with this config's TRANS flags: CUDA events around single
//    launches (launcher grid), 3 warm-ups, median of 20, L2 flushed before
//    every timed run by a 256 MiB cudaMemsetAsync. Reference: a
//    device-to-device cudaMemcpyAsync of half the GEMV's byte count (so both
//    move the same bytes through DRAM: read + write), timed the same way.
//    GB/s counts the GEMV's compulsory bytes: 2 (L K + K + L (+ L with beta))
//    (+ 4 L for a per-output bias). The timed outputs are checked in full.
// Output: "  FAIL ..." lines, per-mode case counts, "TIMING ..." lines,
// and a final "-- <name> PASSED" / "-- <name> FAILED".
// Exit status: 0 all good, 1 correctness failure, 2 CUDA error.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#ifndef OPTIML_DTYPE
#define OPTIML_DTYPE 0
#endif
#ifndef HARNESS_NAME
#define HARNESS_NAME "unnamed"
#endif

// ------------------------------------------------------------ host 16-bit conversions (RNE) ---
static inline uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t h_f32_to_bf16(float f) {
    const uint32_t u = f2u(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);  // NaN stays (quiet) NaN
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);                   // overflow -> inf
}
static float h_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }
static uint16_t h_f32_to_f16(float f) {
    const uint32_t u = f2u(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);   // NaN
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  // >= 65520 (incl. inf) -> inf
    if (a < 0x38800000u) {                                    // < 2^-14: subnormal or zero
        const double s = (double)u2f(a) * 16777216.0;         // exact; nearbyint: ties to even
        return (uint16_t)(sign | (uint16_t)std::nearbyint(s));
    }
    const uint32_t e = (a >> 23) - 112u;  // rebias 127 -> 15
    const uint32_t m = a & 0x7FFFFFu;
    uint32_t h = (e << 10) | (m >> 13);
    const uint32_t rem = m & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may roll into the exponent: correct
    return (uint16_t)(sign | h);
}
static float h_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0) {
        const float v = (float)m * 5.9604644775390625e-8f;  // m * 2^-24, exact
        return sign ? -v : v;
    }
    if (e == 31) return u2f(sign | 0x7F800000u | (m << 13));
    return u2f(sign | ((e + 112u) << 23) | (m << 13));
}
static inline uint16_t h_to16(float x) { return OPTIML_DTYPE == 0 ? h_f32_to_bf16(x) : h_f32_to_f16(x); }
static inline float h_from16(uint16_t u) { return OPTIML_DTYPE == 0 ? h_bf16_to_f32(u) : h_f16_to_f32(u); }

// ------------------------------------------------------------ backend: CUDA or CPU emulation ---
#ifdef HARNESS_EMU
#include "emu_shim.h"
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#include <new>
#else
#include <cuda_runtime.h>
#endif

#include "gemv_16.cu"  // optiml-build/src/families/matmul/cuda (-I)

struct Grid {
    unsigned x, y, z;
};

#ifdef HARNESS_EMU
static void* dmalloc(size_t bytes) { return ::operator new(bytes ? bytes : 1, std::align_val_t(256)); }
static void dfree(void* p) { ::operator delete(p, std::align_val_t(256)); }
static void h2d(void* d, const void* h, size_t bytes) { if (bytes) memcpy(d, h, bytes); }
static void d2h(void* h, const void* d, size_t bytes) { if (bytes) memcpy(h, d, bytes); }
// bytes before the kernel's pointer inside an allocation: unreadable (ASan)
static void dpoison(void* p, size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
    if (bytes) ASAN_POISON_MEMORY_REGION(p, bytes);
#else
    (void)p; (void)bytes;
#endif
}
static void dunpoison(void* p, size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
    if (bytes) ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#else
    (void)p; (void)bytes;
#endif
}
// read counting per element of two buffers (0: the matrix operand, 1: the
// vector operand) and matrix bytes per load width
struct Track {
    const char* lo = nullptr;
    size_t n = 0;  // elements
    std::vector<uint32_t> reads;
};
static Track g_tr[2];
static double g_bytes_w[5];  // matrix bytes by load width 1, 2, 4, 8, 16 (index log2)
static void track_hook(const void* p, unsigned bytes) {
    const char* c = static_cast<const char*>(p);
    for (int t = 0; t < 2; ++t) {
        Track& tr = g_tr[t];
        if (c < tr.lo || c >= tr.lo + 2 * tr.n) continue;
        const size_t e0 = (size_t)(c - tr.lo) / 2;
        for (size_t e = e0; e < e0 + (bytes + 1) / 2 && e < tr.n; ++e) ++tr.reads[e];
        if (t == 0) {
            int w = 0;
            while ((1u << w) < bytes) ++w;
            g_bytes_w[w] += bytes;
        }
    }
}
static void track_begin(const void* w, size_t nw, const void* x, size_t nx) {
    g_tr[0].lo = static_cast<const char*>(w);
    g_tr[0].n = nw;
    g_tr[0].reads.assign(nw, 0);
    g_tr[1].lo = static_cast<const char*>(x);
    g_tr[1].n = nx;
    g_tr[1].reads.assign(nx, 0);
    for (double& b : g_bytes_w) b = 0;
    emu_load_hook = track_hook;
}
static void track_end() { emu_load_hook = nullptr; }
static void launch(Grid g, const uint16_t* A, const uint16_t* B, uint16_t* C, const float* bias, int batch, int M,
                   int N, int K, long long sA, long long sB, long long sC, float alpha, float beta) {
    emu_launch(dim3(g.x, g.y, g.z), OPTIML_GEMV_THREADS,
               [&] { optiml_gemv(A, B, C, bias, batch, M, N, K, sA, sB, sC, alpha, beta); });
}
#else
#include "../check.cuh"
static void* dmalloc(size_t bytes) {
    void* p = nullptr;
    CK(cudaMalloc(&p, bytes ? bytes : 16));
    return p;
}
static void dfree(void* p) { CK(cudaFree(p)); }
static void h2d(void* d, const void* h, size_t bytes) { if (bytes) CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice)); }
static void d2h(void* h, const void* d, size_t bytes) { if (bytes) CK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost)); }
static void dpoison(void*, size_t) {}
static void dunpoison(void*, size_t) {}
static void launch(Grid g, const uint16_t* A, const uint16_t* B, uint16_t* C, const float* bias, int batch, int M,
                   int N, int K, long long sA, long long sB, long long sC, float alpha, float beta) {
    optiml_gemv<<<dim3(g.x, g.y, g.z), OPTIML_GEMV_THREADS>>>(A, B, C, bias, batch, M, N, K, sA, sB, sC, alpha, beta);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
}
#endif

// ------------------------------------------------------------ host RNG ---
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t g_seed = 1;
static inline float urand(uint64_t stream, uint64_t i) {  // uniform [-1, 1)
    const uint64_t z = mix64(g_seed * 0xD1B54A32D192ED03ull + stream * 0x2545F4914F6CDD1Dull + 0x9E3779B97F4A7C15ull * (i + 1));
    return 2.f * ((float)(z >> 40) * (1.0f / 16777216.0f)) - 1.f;
}

// ------------------------------------------------------------ constants / geometry ---
static const char* kType = OPTIML_DTYPE == 0 ? "bf16" : "fp16";
static const uint16_t kNaN16 = OPTIML_DTYPE == 0 ? 0x7FFF : 0x7E00;     // C poison / padding fill
static const uint16_t kSentinel = OPTIML_DTYPE == 0 ? 0xFFBF : 0xFDEF;  // C guards (a NaN, bitwise checked)
static const uint16_t kInf16 = OPTIML_DTYPE == 0 ? 0x7F80 : 0x7C00;
static const double kTol = OPTIML_DTYPE == 0 ? 8e-3 : 1e-3;
static const double kAbs = OPTIML_DTYPE == 0 ? 0.0 : 5.9604644775390625e-8;  // 2^-24 (fp16)
static const float kAlpha = 0.75f, kBeta = -0.5f;
static const int kGuard = 8;

// the kernel's mode for a shape (same rule as gemv_16.cu)
static bool is_dot(int M, int N) { return N == 1 ? (OPTIML_TRANS_A == 0 || M == 1) : (OPTIML_TRANS_B != 0); }
static int out_len(int M, int N) { return N == 1 ? M : N; }
static Grid launcher_grid(int batch, int M, int N) {  // what optiml-runtime's launch_gemv does
    const long long L = out_len(M, N);
    return Grid{(unsigned)std::max(1LL, (L + 15) / 16), 1u, (unsigned)std::max(1, std::min(batch, 65535))};
}
static Grid ideal_grid(int batch, int M, int N) {  // one block per tile
    const long long L = out_len(M, N), T = is_dot(M, N) ? OPTIML_G16_DOT_ROWS : OPTIML_G16_COL_COLS;
    return Grid{(unsigned)std::max(1LL, (L + T - 1) / T), 1u, (unsigned)std::max(1, std::min(batch, 65535))};
}

// ------------------------------------------------------------ one case ---
struct Case {
    std::string name;
    int batch, M, N, K;
    int offA, offB, offC;     // element offsets of the kernel's pointers in their allocations
    long long padA, padB, padC;  // extra elements between batch items
    bool bcastA, bcastB;      // stride 0
    int special;              // 1: NaN / Inf in the matrix operand
};

static int g_fail = 0, g_cases = 0;
static bool g_quiet = false, g_stop = false;  // --stop: exit at the first failing case (mutation test)
static int g_mode_cases[2] = {0, 0};  // [dot]
static double g_vec_bytes = 0, g_all_bytes = 0;
static double g_worst = 0;  // largest |out - ref| / bound over all cases  // EMU: matrix bytes from 16-byte loads / all (launcher grid)

static double act_ref(double v) {
    if (OPTIML_ACT == 1) return v > 0 ? v : 0.0;  // fmaxf(NaN, 0) = 0, like NaN > 0 false
    if (OPTIML_ACT == 2) return 0.5 * v * (1.0 + erf(v * 0.70710678118654752440));
    return v;
}

// Runs one case on the given grids; returns true if it passed.
static bool run_case(const Case& c, bool extra_grids = true) {
    const long long MK = (long long)c.M * c.K, KN = (long long)c.K * c.N, MN = (long long)c.M * c.N;
    const long long sA = c.bcastA ? 0 : MK + c.padA;
    const long long sB = c.bcastB ? 0 : KN + c.padB;
    const long long sC = MN + c.padC;
    const size_t nA = (size_t)(c.offA + (c.bcastA ? MK : (c.batch - 1) * sA + MK));
    const size_t nB = (size_t)(c.offB + (c.bcastB ? KN : (c.batch - 1) * sB + KN));
    const size_t nC = (size_t)(kGuard + c.offC + (c.batch - 1) * sC + MN + kGuard + 1);
    const size_t nBias = (size_t)std::max(c.N, 1);
    const uint64_t tag = std::hash<std::string>{}(c.name);

    // host data: matrices rounded to 16 bit, padding NaN
    std::vector<uint16_t> hA(nA, kNaN16), hB(nB, kNaN16), hC0(nC, kSentinel), hC(nC);
    std::vector<float> hbias(nBias);
    std::vector<char> is_out(nC, 0);
    for (int z = 0; z < (c.bcastA ? 1 : c.batch); ++z)
        for (long long i = 0; i < MK; ++i) hA[c.offA + z * sA + i] = h_to16(urand(tag + 1, z * MK + i));
    for (int z = 0; z < (c.bcastB ? 1 : c.batch); ++z)
        for (long long i = 0; i < KN; ++i) hB[c.offB + z * sB + i] = h_to16(urand(tag + 2, z * KN + i));
    for (size_t i = 0; i < nBias; ++i) hbias[i] = urand(tag + 3, i);
    const long long c0 = kGuard + c.offC;
    for (int z = 0; z < c.batch; ++z)
        for (long long i = 0; i < MN; ++i) {
            hC0[c0 + z * sC + i] = OPTIML_HAS_BETA ? h_to16(urand(tag + 4, z * MN + i)) : kNaN16;
            is_out[c0 + z * sC + i] = 1;
        }
    std::vector<uint16_t>& W = c.N == 1 ? hA : hB;  // the matrix operand
    if (c.special) {  // NaN / Inf in the matrix operand of batch item 0
        const int L = out_len(c.M, c.N), off = c.N == 1 ? c.offA : c.offB;
        auto at = [&](int o, int k) -> uint16_t& {  // element (output o, reduction index k)
            if (c.N == 1) return W[off + (OPTIML_TRANS_A && c.M > 1 ? (long long)k * c.M + o : (long long)o * c.K + k)];
            return W[off + (OPTIML_TRANS_B ? (long long)o * c.K + k : (long long)k * c.N + o)];
        };
        if (L >= 4 && c.K >= 6) {
            at(1, 3) = kNaN16;
            at(2, 5) = kInf16;
            at(3, 0) = kInf16;
            at(3, 1) = (uint16_t)(kInf16 | 0x8000u);  // -inf: +inf + -inf = NaN
        }
    }

    // device buffers: exact sizes; the bytes before each kernel pointer unreadable (EMU)
    uint16_t* dA = (uint16_t*)dmalloc(nA * 2);
    uint16_t* dB = (uint16_t*)dmalloc(nB * 2);
    uint16_t* dC = (uint16_t*)dmalloc(nC * 2);
    float* dbias = (float*)dmalloc(nBias * 4);
    h2d(dA, hA.data(), nA * 2);
    h2d(dB, hB.data(), nB * 2);
    h2d(dbias, hbias.data(), nBias * 4);
    dpoison(dA, (size_t)c.offA * 2);
    dpoison(dB, (size_t)c.offB * 2);

    // reference (generic matmul indexing) and per-element bound
    std::vector<double> ref(nC, 0.0), bound(nC, 0.0);
    for (int z = 0; z < c.batch; ++z) {
        const uint16_t* Az = hA.data() + c.offA + z * sA;
        const uint16_t* Bz = hB.data() + c.offB + z * sB;
        for (int m = 0; m < c.M; ++m)
            for (int n = 0; n < c.N; ++n) {
                double acc = 0, mag = 0;
                for (int k = 0; k < c.K; ++k) {
                    const double a = h_from16(OPTIML_TRANS_A ? Az[(long long)k * c.M + m] : Az[(long long)m * c.K + k]);
                    const double b = h_from16(OPTIML_TRANS_B ? Bz[(long long)n * c.K + k] : Bz[(long long)k * c.N + n]);
                    acc += a * b;
                    mag += std::fabs(a * b);
                }
                const long long ci = c0 + z * sC + (long long)m * c.N + n;
                double v = acc;
                if (OPTIML_HAS_ALPHA) { v *= kAlpha; mag *= std::fabs(kAlpha); }
                if (OPTIML_HAS_BETA) {
                    const double old = h_from16(hC0[ci]);
                    v += kBeta * old;
                    mag += std::fabs(kBeta * old);
                }
                if (OPTIML_HAS_BIAS) {
                    const double bv = hbias[c.N == 1 ? 0 : n];
                    v += bv;
                    mag += std::fabs(bv);
                }
                v = act_ref(v);
                if (OPTIML_ACT == 2) mag *= 1.2;
                ref[ci] = v;
                bound[ci] = kTol * std::max(std::fabs(v), mag) + kAbs;
            }
    }

    const int L = out_len(c.M, c.N);
    const bool dot = is_dot(c.M, c.N);
    (void)L;
    std::vector<Grid> grids = {launcher_grid(c.batch, c.M, c.N)};
    if (extra_grids) {
        const Grid g0 = grids[0], gi = ideal_grid(c.batch, c.M, c.N);
        grids.push_back(Grid{1, 1, 1});
        grids.push_back(Grid{2, 1, (unsigned)std::min(c.batch, 2)});
        grids.push_back(Grid{3, 1, (unsigned)std::min(c.batch, 3)});
        if (gi.x != g0.x) grids.push_back(gi);
        grids.push_back(Grid{g0.x + 3, 2, (unsigned)std::min(c.batch + 2, 65535)});
    }
    bool ok = true;
    std::vector<uint16_t> first;
    double worst = 0;
    const uint16_t* Wdev = c.N == 1 ? dA : dB;
    const int offW = c.N == 1 ? c.offA : c.offB;
    const long long sW = c.N == 1 ? sA : sB, spanW = c.N == 1 ? MK : KN;
    const size_t nW = c.N == 1 ? nA : nB;
    const uint16_t* Xdev = c.N == 1 ? dB : dA;
    const int offX = c.N == 1 ? c.offB : c.offA;
    const long long sX = c.N == 1 ? sB : sA;
    const size_t nX = c.N == 1 ? nB : nA;
    (void)Xdev; (void)offX; (void)sX; (void)nX; (void)Wdev; (void)offW; (void)sW; (void)spanW; (void)nW;
    for (size_t gidx = 0; gidx < grids.size(); ++gidx) {
        const Grid g = grids[gidx];
        h2d(dC, hC0.data(), nC * 2);
#ifdef HARNESS_EMU
        g16emu::reverse = (gidx % 2) == 1;  // alternate the fiber schedule between the grids
        track_begin(Wdev, nW, Xdev, nX);
#endif
        launch(g, dA + c.offA, dB + c.offB, dC + c0, dbias, c.batch, c.M, c.N, c.K, sA, sB, sC, kAlpha, kBeta);
#ifdef HARNESS_EMU
        track_end();
        {  // every matrix element read exactly once per batch item using it, padding never;
           // the vector operand only inside its batch items' K elements
            std::vector<uint32_t> want(nW, 0);
            std::vector<char> xin(nX, 0);
            for (int z = 0; z < c.batch; ++z) {
                for (long long i = 0; i < spanW; ++i) ++want[offW + z * sW + i];
                for (long long i = 0; i < c.K; ++i) xin[offX + z * sX + i] = 1;
            }
            size_t bad = 0, first_bad = 0, xbad = 0, first_xbad = 0;
            for (size_t i = 0; i < nW; ++i)
                if (want[i] != g_tr[0].reads[i]) { if (!bad) first_bad = i; ++bad; }
            for (size_t i = 0; i < nX; ++i)
                if (!xin[i] && g_tr[1].reads[i]) { if (!xbad) first_xbad = i; ++xbad; }
            if (bad) {
                printf("  FAIL %-34s grid (%u,%u,%u): %zu matrix elements read a wrong number of times (first: element %zu read %u, want %u)\n",
                       c.name.c_str(), g.x, g.y, g.z, bad, first_bad, g_tr[0].reads[first_bad], want[first_bad]);
                ok = false;
            }
            if (xbad) {
                printf("  FAIL %-34s grid (%u,%u,%u): %zu vector elements outside the vector read (first: element %zu)\n",
                       c.name.c_str(), g.x, g.y, g.z, xbad, first_xbad);
                ok = false;
            }
            double total = 0;
            for (double b : g_bytes_w) total += b;
            const bool rows_aligned = ((reinterpret_cast<uintptr_t>(Wdev + offW) & 15) == 0) &&
                                      ((dot ? c.K : L) % 8 == 0) && (sW % 8 == 0);
            if (rows_aligned && total > 0 && g_bytes_w[4] != total) {
                printf("  FAIL %-34s every row is 16-byte aligned but only %.0f of %.0f matrix bytes came from 16-byte loads\n",
                       c.name.c_str(), g_bytes_w[4], total);
                ok = false;
            }
            if (gidx == 0) g_vec_bytes += g_bytes_w[4], g_all_bytes += total;
        }
#endif
        d2h(hC.data(), dC, nC * 2);
        if (gidx == 0) {
            size_t guard = 0;
            for (size_t i = 0; i < nC; ++i) {
                if (!is_out[i]) {
                    if (hC[i] != hC0[i]) ++guard;
                    continue;
                }
                const double o = h_from16(hC[i]), r = ref[i];
                bool good;
                if (std::isnan(r)) good = std::isnan(o);
                else if (std::isinf(r)) good = o == r;
                else {
                    good = std::isfinite(o) && std::fabs(o - r) <= bound[i];
                    if (bound[i] > 0) worst = std::max(worst, std::fabs(o - r) / bound[i]);
                }
                if (!good && ok) {
                    const long long e = (long long)i - c0;
                    printf("  FAIL %-34s z=%lld o=%lld: got %.8g (0x%04x), want %.8g (bound %.3g)\n", c.name.c_str(),
                           e / sC, e % sC, o, hC[i], r, bound[i]);
                }
                ok = ok && good;
            }
            if (guard) {
                printf("  FAIL %-34s %zu guard / gap elements of C written\n", c.name.c_str(), guard);
                ok = false;
            }
            first = hC;
        } else if (memcmp(hC.data(), first.data(), nC * 2) != 0) {
            printf("  FAIL %-34s grid (%u,%u,%u) gives different bits than the launcher grid\n", c.name.c_str(), g.x,
                   g.y, g.z);
            ok = false;
        }
    }
    dunpoison(dA, (size_t)c.offA * 2);
    dunpoison(dB, (size_t)c.offB * 2);
    dfree(dA);
    dfree(dB);
    dfree(dC);
    dfree(dbias);
    ++g_cases;
    ++g_mode_cases[dot ? 1 : 0];
    g_worst = std::max(g_worst, worst);
    if (!ok) ++g_fail;
    if (!g_quiet || !ok)
        printf("  %-4s %-34s %s batch=%-2d M=%-5d N=%-5d K=%-5d off=%d/%d/%d grids=%zu worst/bound=%.3f\n",
               ok ? "ok" : "FAIL", c.name.c_str(), dot ? "dot" : "col", c.batch, c.M, c.N, c.K, c.offA, c.offB, c.offC,
               grids.size(), worst);
    return ok;
}

// the non-GEMV shape (M, N > 1) must write nothing
static bool run_non_gemv() {
    const int nA = 12, nB = 12, nC = 9;
    uint16_t* dA = (uint16_t*)dmalloc(nA * 2);
    uint16_t* dB = (uint16_t*)dmalloc(nB * 2);
    uint16_t* dC = (uint16_t*)dmalloc(nC * 2);
    float* dbias = (float*)dmalloc(3 * 4);
    std::vector<uint16_t> one(12, h_to16(1.f)), cs(nC, kSentinel), out(nC);
    std::vector<float> b(3, 1.f);
    h2d(dA, one.data(), nA * 2);
    h2d(dB, one.data(), nB * 2);
    h2d(dC, cs.data(), nC * 2);
    h2d(dbias, b.data(), 12);
    launch(Grid{2, 1, 1}, dA, dB, dC, dbias, 1, 3, 3, 4, 12, 12, 9, kAlpha, kBeta);
    d2h(out.data(), dC, nC * 2);
    const bool ok = out == cs;
    dfree(dA);
    dfree(dB);
    dfree(dC);
    dfree(dbias);
    ++g_cases;
    if (!ok) ++g_fail;
    if (!g_quiet || !ok) printf("  %-4s %-34s\n", ok ? "ok" : "FAIL", "M=N=3: not a GEMV, nothing written");
    return ok;
}

static bool selftest_conversions() {
    int bad = 0;
    for (uint32_t u = 0; u < 65536; ++u) {
        const float f = h_from16((uint16_t)u);
        if (std::isnan(f)) continue;
        if (h_to16(f) != u) ++bad;
        // midpoint to the next value up (same sign): rounds to the even one
        const uint16_t nx = (uint16_t)(u + 1);
        const float g = h_from16(nx);
        if ((u & 0x7FFFu) == (OPTIML_DTYPE == 0 ? 0x7F7Fu : 0x7BFFu) || std::isnan(g) || std::isinf(g)) continue;
        const double mid = 0.5 * ((double)f + (double)g);
        if ((double)(float)mid != mid) continue;  // not representable in fp32 (never for 16-bit neighbours)
        const uint16_t want = (u & 1u) ? nx : (uint16_t)u;
        if (h_to16((float)mid) != want) ++bad;
    }
    printf("-- host %s conversions self-test: %s\n", kType, bad ? "FAILED" : "ok");
    return bad == 0;
}

static std::vector<Case> cases() {
    std::vector<Case> v;
    auto add = [&](std::string name, int batch, int M, int N, int K, int oa, int ob, int oc, long long pa = 0,
                   long long pb = 0, long long pc = 0, bool ba = false, bool bb = false, int sp = 0) {
        v.push_back(Case{name, batch, M, N, K, oa, ob, oc, pa, pb, pc, ba, bb, sp});
    };
    // the two shapes: N == 1 ("mv", C = op(A) b) and M == 1 ("vm", C = a op(B))
    auto both = [&](const std::string& name, int batch, int L, int K, int oa, int ob, int oc, long long pa = 0,
                    long long pb = 0, long long pc = 0, bool ba = false, bool bb = false, int sp = 0) {
        add("mv " + name, batch, L, 1, K, oa, ob, oc, pa, pb, pc, ba, bb, sp);
        add("vm " + name, batch, 1, L, K, oa, ob, oc, pa, pb, pc, ba, bb, sp);
    };
    // 1. every residue mod 8 of L and K, pointers offset by 0..7 elements
    for (int r = 0; r < 8; ++r)
        both("residues r=" + std::to_string(r), 1, 24 + 9 * r, 1030 + 3 * r, r, (3 * r + 5) & 7, (5 * r + 1) & 7);
    // 2. all-aligned (the 16-byte paths end to end; multi-step and partial-step loops)
    both("aligned 64x2048", 1, 64, 2048, 0, 0, 0);
    both("aligned 40x1000", 2, 40, 1000, 0, 0, 0);
    both("aligned 256x520", 1, 256, 520, 8, 8, 0);
    // 3. small K (0, 1, 2, 7, 9, ...) and tiny L
    const int ks[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17};
    const int ls[] = {1, 2, 7, 9, 33, 16, 5};
    for (int i = 0; i < 10; ++i)
        both("K=" + std::to_string(ks[i]) + " L=" + std::to_string(ls[i % 7]), 2, ls[i % 7], ks[i], i & 7,
             (i * 3) & 7, (i * 5) & 7);
    for (int l : {1, 2, 7, 9}) both("tiny L=" + std::to_string(l), 1, l, 333, l & 3, 1, 2);
    // 4. M == N == 1: one dot product
    for (int k : {0, 1, 9, 1000, 2053}) add("dot 1x1 K=" + std::to_string(k), 2, 1, 1, k, k & 7, 3, 1);
    // 5. batch: padded strides (odd / multiples of 8), broadcast operands, many items
    both("batch3 padded", 3, 50, 300, 1, 2, 3, 3, 5, 7);
    both("batch3 padded %8", 3, 64, 256, 0, 0, 0, 8, 16, 8);
    both("batch3 broadcast A", 3, 50, 301, 2, 1, 0, 0, 0, 0, true, false);
    both("batch3 broadcast B", 3, 50, 299, 0, 3, 1, 0, 0, 0, false, true);
    both("batch70", 70, 3, 5, 1, 1, 1);
    // 6. many tiles, long rows
    both("300x129", 1, 300, 129, 0, 0, 0);
    both("1000x40", 1, 1000, 40, 5, 0, 2);
    both("20x4100", 1, 20, 4100, 3, 6, 0);
    // 7. NaN / Inf propagation
    both("NaN/Inf 40x100", 1, 40, 100, 0, 0, 0, 0, 0, 0, false, false, 1);
    both("NaN/Inf 37x101 odd", 2, 37, 101, 1, 2, 3, 0, 0, 0, false, false, 1);
    return v;
}

#ifndef HARNESS_EMU
// ------------------------------------------------------------ timing (GPU) ---
static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}
static void time_shape(const char* label, int M, int N, int K) {
    const int L = out_len(M, N);
    const bool dot = is_dot(M, N);
    const size_t nA = (size_t)M * K, nB = (size_t)K * N, nC = (size_t)M * N;
    std::vector<uint16_t> hA(nA), hB(nB), hC0(nC), hC(nC);
    std::vector<float> hbias(std::max(N, 1));
    for (size_t i = 0; i < nA; ++i) hA[i] = h_to16(urand(101, i));
    for (size_t i = 0; i < nB; ++i) hB[i] = h_to16(urand(102, i));
    for (size_t i = 0; i < nC; ++i) hC0[i] = h_to16(urand(103, i));
    for (size_t i = 0; i < hbias.size(); ++i) hbias[i] = urand(104, i);
    uint16_t *dA = (uint16_t*)dmalloc(nA * 2), *dB = (uint16_t*)dmalloc(nB * 2), *dC = (uint16_t*)dmalloc(nC * 2);
    float* dbias = (float*)dmalloc(hbias.size() * 4);
    h2d(dA, hA.data(), nA * 2);
    h2d(dB, hB.data(), nB * 2);
    h2d(dbias, hbias.data(), hbias.size() * 4);
    const double bytes = 2.0 * ((double)L * K + K + L + (OPTIML_HAS_BETA ? L : 0)) +
                         (OPTIML_HAS_BIAS && N > 1 ? 4.0 * L : 0.0);
    const size_t flush_bytes = 256u << 20;
    void* flush = dmalloc(flush_bytes);
    const size_t half = ((size_t)(bytes / 2) + 255) & ~(size_t)255;
    void* cs = dmalloc(half);
    void* cd = dmalloc(half);
    CK(cudaMemset(cs, 1, half));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const Grid g = launcher_grid(1, M, N);
    std::vector<float> tk, tc;
    for (int it = 0; it < 23; ++it) {  // 3 warm-ups + 20 timed, GEMV and copy alternating
        h2d(dC, hC0.data(), nC * 2);
        CK(cudaMemsetAsync(flush, it & 0xFF, flush_bytes));
        CK(cudaEventRecord(e0));
        optiml_gemv<<<dim3(g.x, g.y, g.z), OPTIML_GEMV_THREADS>>>(dA, dB, dC, dbias, 1, M, N, K, (long long)nA,
                                                                   (long long)nB, (long long)nC, kAlpha, kBeta);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (it >= 3) tk.push_back(ms);
        CK(cudaMemsetAsync(flush, (it + 1) & 0xFF, flush_bytes));
        CK(cudaEventRecord(e0));
        CK(cudaMemcpyAsync(cd, cs, half, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (it >= 3) tc.push_back(ms);
    }
    // the timed output (computed from hC0 each run with beta) checked in full
    d2h(hC.data(), dC, nC * 2);
    size_t bad = 0;
    double worst = 0;
    for (int o = 0; o < L; ++o) {
        double acc = 0, mag = 0;
        for (int k = 0; k < K; ++k) {
            const int m = N == 1 ? o : 0, n = N == 1 ? 0 : o;
            const double a = h_from16(OPTIML_TRANS_A ? hA[(size_t)k * M + m] : hA[(size_t)m * K + k]);
            const double b = h_from16(OPTIML_TRANS_B ? hB[(size_t)n * K + k] : hB[(size_t)k * N + n]);
            acc += a * b;
            mag += std::fabs(a * b);
        }
        double v = acc;
        if (OPTIML_HAS_ALPHA) { v *= kAlpha; mag *= std::fabs(kAlpha); }
        if (OPTIML_HAS_BETA) { v += kBeta * (double)h_from16(hC0[o]); mag += std::fabs(kBeta * (double)h_from16(hC0[o])); }
        if (OPTIML_HAS_BIAS) { const double bv = hbias[N == 1 ? 0 : o]; v += bv; mag += std::fabs(bv); }
        v = act_ref(v);
        if (OPTIML_ACT == 2) mag *= 1.2;
        const double bound = kTol * std::max(std::fabs(v), mag) + kAbs, out = h_from16(hC[o]);
        if (!(std::fabs(out - v) <= bound)) ++bad;
        else if (bound > 0) worst = std::max(worst, std::fabs(out - v) / bound);
    }
    ++g_cases;
    ++g_mode_cases[dot ? 1 : 0];
    if (bad) {
        ++g_fail;
        printf("  FAIL timed %s: %zu of %d outputs over the bound\n", label, bad, L);
    }
    const double mk = median(tk), mc = median(tc);
    printf("TIMING %-14s %-18s %s %s M=%d N=%d K=%d  %8.2f us %7.1f GB/s | copy %8.2f us %7.1f GB/s | %5.1f%% of copy | check %s (worst/bound %.3f)\n",
           HARNESS_NAME, label, kType, dot ? "dot" : "col", M, N, K, mk * 1e3, bytes / (mk * 1e-3) * 1e-9, mc * 1e3,
           bytes / (mc * 1e-3) * 1e-9, 100.0 * mc / mk, bad ? "FAIL" : "ok", worst);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    dfree(flush);
    dfree(cs);
    dfree(cd);
    dfree(dA);
    dfree(dB);
    dfree(dC);
    dfree(dbias);
}
#endif

int main(int argc, char** argv) {
    bool timing = true;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--no-timing")) timing = false;
        else if (!strcmp(argv[i], "--quiet")) g_quiet = true;
        else if (!strcmp(argv[i], "--stop")) g_stop = true;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) g_seed = strtoull(argv[++i], nullptr, 10);
        else {
            printf("usage: %s [--no-timing] [--quiet] [--stop] [--seed N]\n", argv[0]);
            return 1;
        }
    }
#ifdef HARNESS_EMU
    timing = false;
#endif
    printf("== %s: %s tA=%d tB=%d alpha=%d beta=%d bias=%d act=%d THREADS=%d COL_TX=%d UNROLL=%d SROWS=%d LOAD=%d "
           "(tiles: dot %d rows, column %d outputs) seed=%llu\n",
           HARNESS_NAME, kType, OPTIML_TRANS_A, OPTIML_TRANS_B, OPTIML_HAS_ALPHA, OPTIML_HAS_BETA, OPTIML_HAS_BIAS,
           OPTIML_ACT, OPTIML_GEMV_THREADS, OPTIML_GEMV_COL_TX, OPTIML_G16_UNROLL, OPTIML_G16_SROWS, OPTIML_G16_LOAD,
           OPTIML_G16_DOT_ROWS, OPTIML_G16_COL_COLS, (unsigned long long)g_seed);
    bool ok = selftest_conversions();
    for (const Case& c : cases()) {
        ok = run_case(c) && ok;
        if (!ok && g_stop) {
            printf("-- %s FAILED (stopped at the first failure)\n", HARNESS_NAME);
            return 1;
        }
    }
    ok = run_non_gemv() && ok;
#ifndef HARNESS_EMU
    if (timing) {
        time_shape("8192x1x8192", 8192, 1, 8192);
        time_shape("1x8192x8192", 1, 8192, 8192);
        ok = ok && g_fail == 0;
    }
#endif
    (void)timing;
    printf("-- %s: %d cases (%d dot mode, %d column mode), %d failed\n", HARNESS_NAME, g_cases, g_mode_cases[1],
           g_mode_cases[0], g_fail);
    printf("-- %s: worst |out - ref| / bound %.3f\n", HARNESS_NAME, g_worst);
#ifdef HARNESS_EMU
    printf("-- %s: %.1f%% of the matrix bytes read by 16-byte loads over all cases (launcher grid)\n", HARNESS_NAME,
           g_all_bytes > 0 ? 100.0 * g_vec_bytes / g_all_bytes : 0.0);
#endif
    printf("-- %s %s\n", HARNESS_NAME, ok && g_fail == 0 ? "PASSED" : "FAILED");
    return ok && g_fail == 0 ? 0 : 1;
}
