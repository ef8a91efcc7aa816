// Correctness + timing harness for matmul_mma_16.cu (16-bit GEMM on
// mma.sync m16n8k16 tensor cores, fp32 accumulation). One binary per kernel
// configuration (OPTIML_* / OPTIML_M16_* macros from -D; see run.sh and
// configs.txt):
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_80,code=[sm_80,compute_80] -Xptxas -v
//        -I optiml-build/src/families/matmul/cuda -I optiml-build/src/cuda <-D...> -DHARNESS_NAME='"bf16_nn"'
//        bench/harness/mma16/harness.cu -lcublas -o h
//   ./h [--no-timing] [--small] [--tight] [--seed N]
//     --no-timing  correctness only
//     --small      correctness only, without the big cases (batch 70000, the
//                  tall M > 65535 * BM case); for compute-sanitizer
//     --tight      no guard elements around the operands (a read past a
//                  matrix end leaves the allocation: compute-sanitizer memcheck
//                  on the GPU, AddressSanitizer in the EMU build)
//
// The same file builds on the CPU without CUDA (-DHARNESS_EMU, g++, see
// run_emu.sh): the unmodified kernel source then runs on OPTIML_M16_THREADS
// host threads per block with the PTX (ldmatrix, mma.sync, cp.async)
// emulated in emu_shim.h, which also checks alignment, bounds, races and
// ldmatrix bank conflicts.
//
// 1. Host 16-bit conversions (RNE, written here) are self-tested.
// 2. Correctness, per case (batch x M x N x K; broadcast operands, padded
//    batch strides, odd base pointers): inputs uniform [-1, 1) rounded to the
//    16-bit type on the host; bias uniform fp32; C_old (HAS_BETA) random
//    16-bit, alpha = 0.75, beta = -0.5 (HAS_ALPHA / HAS_BETA). Reference in
//    float64 from the rounded values, every element. Guards of A and B and
//    the gaps between batch items hold NaN (any read outside the matrices
//    that is used turns an output into NaN); C's guards and gaps hold a
//    sentinel checked bitwise; C itself is NaN before the launch unless
//    HAS_BETA. Each case runs with the launcher's grid (ceil(N/BN),
//    ceil(M/BM), min(batch, 65535)) and with a small grid (<= 2 x 2 x 3) that
//    exercises the kernel's grid-stride loops.
//    Pass, per element:  |out - ref| <= rel * max(|ref|, T) + abs
//      rel = 8e-3 (bf16) / 1e-3 (fp16), abs = 0 (bf16) / 2^-24 (fp16),
//      T = |alpha| sum_k |a_k b_k| + |beta C_old| + |bias|  (sum of |terms|)
//    plus no NaN / Inf where the reference is finite, and the relative L2
//    error <= 5e-3 (bf16) / 1e-3 (fp16).
// 3. Timing (not with --no-timing / --small, not in EMU builds): 4096^3 and
//    1024^3 x 256 (batched), inputs generated on the device; CUDA events
//    around each of 20 single launches after 3 warm-ups, median; the same for
//    cublasGemmStridedBatchedEx (CUDA_R_16BF / CUDA_R_16F, CUBLAS_COMPUTE_32F,
//    default algorithm, alpha 1, beta 0: the plain product; row-major
//    C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so B is passed
//    first). Prints TFLOP/s of both and the ratio. The timed output is
//    checked: sampled rows against float64 (the bound above) and, for the
//    plain product, the whole output against cuBLAS's (relative L2 <= 1e-2,
//    max |diff| <= 2 rel max|cublas|).
// Output: "  PASS ..." / "  FAIL ..." per case and grid, "   TIMING ..."
// lines, final "-- correctness PASSED" / "-- correctness FAILED (n)".
// Exit status: 0 all good, 1 correctness failure, 2 CUDA / cuBLAS error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <cmath>
#include <vector>
#include <string>
#include <algorithm>

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
    const uint32_t e = (a >> 23) - 112u;
    const uint32_t m = a & 0x7FFFFFu;
    uint32_t h = (e << 10) | (m >> 13);
    const uint32_t rem = m & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return (uint16_t)(sign | h);
}
static float h_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0) {
        const float v = (float)m * 5.9604644775390625e-8f;
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
#else
#include <cuda_runtime.h>
#include <cublas_v2.h>
#endif
#include "matmul_mma_16.cu"  // optiml-build/src/families/matmul/cuda (-I)

#ifndef HARNESS_EMU
#include "../check.cuh"
static void* dmalloc(size_t bytes) {
    void* p = nullptr;
    CK(cudaMalloc(&p, bytes ? bytes : 16));
    return p;
}
static void dfree(void* p) { CK(cudaFree(p)); }
static void h2d(void* d, const void* h, size_t bytes) { if (bytes) CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice)); }
static void d2h(void* h, const void* d, size_t bytes) { if (bytes) CK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost)); }
#else
static void* dmalloc(size_t bytes) { return malloc(bytes ? bytes : 16); }
static void dfree(void* p) { free(p); }
static void h2d(void* d, const void* h, size_t bytes) { if (bytes) memcpy(d, h, bytes); }
static void d2h(void* h, const void* d, size_t bytes) { if (bytes) memcpy(h, d, bytes); }
#endif

static const int kBM = OPTIML_M16_BM, kBN = OPTIML_M16_BN, kThreads = OPTIML_M16_THREADS;
static const size_t kSmem = OPTIML_M16_SMEM_BYTES;

struct Grid {
    unsigned x, y, z;
};
// the launcher's grid: (ceil(N/BN), ceil(M/BM) capped at 65535, min(batch, 65535))
static Grid full_grid(int batch, int M, int N) {
    return Grid{(unsigned)((N + kBN - 1) / kBN), (unsigned)std::min((M + kBM - 1) / kBM, 65535),
                (unsigned)std::min(batch, 65535)};
}
static void launch(Grid g, const uint16_t* A, const uint16_t* B, uint16_t* C, const float* bias, int batch, int M,
                   int N, int K, long long sA, long long sB, long long sC, float alpha, float beta) {
    if (batch <= 0 || M <= 0 || N <= 0) return;  // nothing to write; a zero grid dimension is a launch error
#ifdef HARNESS_EMU
    emu_launch(g.x, g.y, g.z, kThreads, kSmem, [&] {
        OPTIML_MMA16_ENTRY(A, B, C, bias, batch, M, N, K, sA, sB, sC, alpha, beta);
    });
#else
    OPTIML_MMA16_ENTRY<<<dim3(g.x, g.y, g.z), kThreads, kSmem>>>(A, B, C, bias, batch, M, N, K, sA, sB, sC, alpha,
                                                                  beta);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
#endif
}

// ------------------------------------------------------------ host RNG ---
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline float urand(uint64_t seed, uint64_t i) {  // uniform [-1, 1)
    const uint64_t z = mix64(seed * 0xD1B54A32D192ED03ull + 0x9E3779B97F4A7C15ull * (i + 1));
    return 2.f * ((float)(z >> 40) * (1.0f / 16777216.0f)) - 1.f;
}

// ------------------------------------------------------------ constants ---
static const char* kType = OPTIML_DTYPE == 0 ? "bf16" : "fp16";
static const uint16_t kNaN16 = OPTIML_DTYPE == 0 ? 0x7FFF : 0x7E00;     // C poison / A, B gap fill
static const uint16_t kSentinel = OPTIML_DTYPE == 0 ? 0xFFBF : 0xFDEF;  // C guards (a NaN, bitwise checked)
static const double kRel = OPTIML_DTYPE == 0 ? 8e-3 : 1e-3;
static const double kAbs = OPTIML_DTYPE == 0 ? 0.0 : 5.9604644775390625e-8;  // 2^-24 for fp16
static const double kRelL2 = OPTIML_DTYPE == 0 ? 5e-3 : 1e-3;
static size_t kGuard = 256;  // 0 with --tight
static const float kAlpha = OPTIML_HAS_ALPHA ? 0.75f : 1.f;
static const float kBeta = OPTIML_HAS_BETA ? -0.5f : 0.f;

static double act_ref(double v) {
#if OPTIML_ACT == 1
    return v > 0 ? v : 0.0;
#elif OPTIML_ACT == 2
    return 0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440));
#else
    return v;
#endif
}

// ------------------------------------------------------------ self-test of the conversions ---
static int selftest_conversions() {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; ++h) {  // round trip of every pattern
        const float f = h_from16((uint16_t)h);
        if (std::isnan(f)) {
            if (!std::isnan(h_from16(h_to16(f)))) ++bad;
            continue;
        }
        if (h_to16(f) != h) ++bad;
    }
    const uint32_t top = OPTIML_DTYPE == 0 ? 0x7F7Fu : 0x7BFFu;
    for (uint32_t h = 0; h < top; ++h) {  // every midpoint between adjacent positive finite values: ties to even
        const double lo = h_from16((uint16_t)h), hi = h_from16((uint16_t)(h + 1));
        const float mid = (float)((lo + hi) * 0.5);
        if ((double)mid != (lo + hi) * 0.5) { ++bad; continue; }
        const uint16_t want = (h & 1u) ? (uint16_t)(h + 1) : (uint16_t)h;
        if (h_to16(mid) != want || h_to16(-mid) != (uint16_t)(want | 0x8000u)) ++bad;
    }
    printf("== selftest of host %s conversions (round trip, midpoints): %s (%d bad)\n", kType, bad ? "FAIL" : "ok",
           bad);
    return bad;
}

// ------------------------------------------------------------ correctness ---
struct Case {
    const char* name;
    int batch, M, N, K;
    bool bcA, bcB;               // stride 0 (broadcast)
    long long padA, padB, padC;  // extra elements between batch items
    int offA, offB, offC;        // element offsets of the base pointers (odd = 2-byte aligned only)
    bool big;                    // skipped by --small and in EMU builds
};

struct Operand {
    std::vector<uint16_t> h;  // whole buffer: guard | off | span | guard
    size_t base;              // index of element 0 of item 0
    long long stride;
    size_t len;               // elements of one matrix
};
static Operand make_operand(int batch, size_t len, bool bcast, long long pad, int off, uint16_t fill) {
    Operand o;
    o.len = len;
    o.stride = bcast ? 0 : (long long)len + pad;
    const size_t span = (bcast || batch <= 1) ? len : (size_t)(batch - 1) * (size_t)o.stride + len;
    o.base = kGuard + (size_t)off;
    o.h.assign(o.base + span + kGuard, fill);
    return o;
}

struct CheckStats {
    long long n = 0, nbad = 0, nexact = 0, nonfinite = 0;
    double worst_ratio = 0, se = 0, sr = 0;
    int bad_z = -1, bad_m = -1, bad_n = -1;
    double bad_out = 0, bad_ref = 0;
};
static void check_elem(CheckStats& st, int z, int m, int n, float out, double ref, double T) {
    const double tol = kRel * std::max(std::fabs(ref), T) + kAbs;
    const double err = std::fabs((double)out - ref);
    const double ratio = err == 0 ? 0.0 : (tol > 0 && !std::isnan(err) ? err / tol : INFINITY);
    st.n++;
    if (!std::isfinite(out) && std::isfinite(ref)) st.nonfinite++;
    if (h_to16((float)ref) == h_to16(out)) st.nexact++;
    if (!(err <= tol)) {
        if (st.nbad++ == 0 || ratio > st.worst_ratio) {
            st.bad_z = z; st.bad_m = m; st.bad_n = n; st.bad_out = out; st.bad_ref = ref;
        }
    }
    if (ratio > st.worst_ratio) st.worst_ratio = ratio;
    st.se += std::isfinite(err) ? err * err : INFINITY;
    st.sr += ref * ref;
}
static bool report(const CheckStats& st, const char* label, bool guards_ok, long long guard_bad) {
    const double rl2 = st.sr > 0 ? std::sqrt(st.se / st.sr) : (st.se == 0 ? 0.0 : INFINITY);
    const bool ok = st.nbad == 0 && st.nonfinite == 0 && guards_ok && rl2 <= kRelL2;
    printf("  %s %-50s err/tol %-9.3g rel_l2 %-9.3g exact %5.1f%%", ok ? "PASS" : "FAIL", label, st.worst_ratio, rl2,
           st.n ? 100.0 * st.nexact / st.n : 100.0);
    if (st.nbad) printf("  [%lld bad, e.g. z=%d m=%d n=%d out=%.7g ref=%.7g]", st.nbad, st.bad_z, st.bad_m, st.bad_n,
                        st.bad_out, st.bad_ref);
    if (st.nonfinite) printf("  [%lld non-finite]", st.nonfinite);
    if (!guards_ok) printf("  [%lld guard / gap elements of C overwritten]", guard_bad);
    printf("\n");
    return ok;
}

static bool run_case(const Case& c, uint64_t seed, bool emu) {
    const int batch = c.batch, M = c.M, N = c.N, K = c.K;
    const size_t lenA = (size_t)M * K, lenB = (size_t)K * N, lenC = (size_t)M * N;
    Operand A = make_operand(batch, lenA, c.bcA, c.padA, c.offA, kNaN16);
    Operand B = make_operand(batch, lenB, c.bcB, c.padB, c.offB, kNaN16);
    Operand Cb = make_operand(batch, lenC, false, c.padC, c.offC, kSentinel);
    const int itemsA = c.bcA ? 1 : batch, itemsB = c.bcB ? 1 : batch;
    for (int z = 0; z < itemsA; ++z)
        for (size_t i = 0; i < lenA; ++i) A.h[A.base + (size_t)z * A.stride + i] = h_to16(urand(seed * 8 + 1, z * lenA + i));
    for (int z = 0; z < itemsB; ++z)
        for (size_t i = 0; i < lenB; ++i) B.h[B.base + (size_t)z * B.stride + i] = h_to16(urand(seed * 8 + 2, z * lenB + i));
    std::vector<uint16_t> cold(Cb.h.size(), kSentinel);  // C before the launch
    for (int z = 0; z < batch; ++z)
        for (size_t i = 0; i < lenC; ++i)
            cold[Cb.base + (size_t)z * Cb.stride + i] = OPTIML_HAS_BETA ? h_to16(urand(seed * 8 + 3, z * lenC + i)) : kNaN16;
    std::vector<float> bias(std::max(N, 1));
    for (int n = 0; n < N; ++n) bias[n] = urand(seed * 8 + 4, n);

    // float64 reference and error scale T for every element
    std::vector<double> ref(lenC * batch), tmag(lenC * batch);
    std::vector<double> arow(K), bcol((size_t)K * N);
    for (int z = 0; z < batch; ++z) {
        const size_t za = A.base + (c.bcA ? 0 : (size_t)z * A.stride), zb = B.base + (c.bcB ? 0 : (size_t)z * B.stride);
        for (int k = 0; k < K; ++k)
            for (int n = 0; n < N; ++n)
                bcol[(size_t)n * K + k] = h_from16(B.h[zb + (OPTIML_TRANS_B ? (size_t)n * K + k : (size_t)k * N + n)]);
        for (int m = 0; m < M; ++m) {
            for (int k = 0; k < K; ++k)
                arow[k] = h_from16(A.h[za + (OPTIML_TRANS_A ? (size_t)k * M + m : (size_t)m * K + k)]);
            for (int n = 0; n < N; ++n) {
                double s = 0, sa = 0;
                const double* bc = bcol.data() + (size_t)n * K;
                for (int k = 0; k < K; ++k) {
                    s += arow[k] * bc[k];
                    sa += std::fabs(arow[k] * bc[k]);
                }
                double v = s, T = sa;
                if (OPTIML_HAS_ALPHA) { v *= kAlpha; T *= std::fabs(kAlpha); }
                if (OPTIML_HAS_BETA) {
                    const double o = h_from16(cold[Cb.base + (size_t)z * Cb.stride + (size_t)m * N + n]);
                    v += (double)kBeta * o;
                    T += std::fabs((double)kBeta * o);
                }
                if (OPTIML_HAS_BIAS) { v += bias[n]; T += std::fabs((double)bias[n]); }
                ref[(size_t)z * lenC + (size_t)m * N + n] = act_ref(v);
                tmag[(size_t)z * lenC + (size_t)m * N + n] = T;
            }
        }
    }

    uint16_t* dA = (uint16_t*)dmalloc(A.h.size() * 2);
    uint16_t* dB = (uint16_t*)dmalloc(B.h.size() * 2);
    uint16_t* dC = (uint16_t*)dmalloc(Cb.h.size() * 2);
    float* dbias = (float*)dmalloc(bias.size() * 4);
    h2d(dA, A.h.data(), A.h.size() * 2);
    h2d(dB, B.h.data(), B.h.size() * 2);
    h2d(dbias, bias.data(), bias.size() * 4);

    const Grid fg = full_grid(batch, M, N);
    const Grid sg{std::min(fg.x, 2u), std::min(fg.y, 2u), std::min(fg.z, 3u)};
    bool all_ok = true;
    for (int variant = 0; variant < 2; ++variant) {
        const Grid g = variant == 0 ? fg : sg;
        char label[160];
        snprintf(label, sizeof label, "%-26s grid %ux%ux%u%s", c.name, g.x, g.y, g.z, variant ? " (small)" : "");
        if (emu && (unsigned long long)g.x * g.y * g.z > 24) {
            printf("  skip %-50s (EMU: > 24 blocks; the small grid covers the same work)\n", label);
            continue;
        }
        if (variant == 1 && g.x == fg.x && g.y == fg.y && g.z == fg.z) continue;  // same as the full grid
        h2d(dC, cold.data(), cold.size() * 2);
        launch(g, dA + A.base, dB + B.base, dC + Cb.base, dbias, batch, M, N, K, c.bcA ? 0 : A.stride,
               c.bcB ? 0 : B.stride, Cb.stride, kAlpha, kBeta);
        std::vector<uint16_t> out(Cb.h.size());
        d2h(out.data(), dC, out.size() * 2);
        std::vector<char> inside(out.size(), 0);
        for (int z = 0; z < batch; ++z)
            std::fill(inside.begin() + Cb.base + (size_t)z * Cb.stride,
                      inside.begin() + Cb.base + (size_t)z * Cb.stride + lenC, 1);
        long long guard_bad = 0;
        for (size_t i = 0; i < out.size(); ++i)
            if (!inside[i] && out[i] != cold[i]) guard_bad++;
        CheckStats st;
        for (int z = 0; z < batch; ++z)
            for (int m = 0; m < M; ++m)
                for (int n = 0; n < N; ++n) {
                    const size_t r = (size_t)z * lenC + (size_t)m * N + n;
                    check_elem(st, z, m, n, h_from16(out[Cb.base + (size_t)z * Cb.stride + (size_t)m * N + n]), ref[r],
                               tmag[r]);
                }
        all_ok &= report(st, label, guard_bad == 0, guard_bad);
    }
    dfree(dA);
    dfree(dB);
    dfree(dC);
    dfree(dbias);
    return all_ok;
}

// ------------------------------------------------------------ timing vs cuBLAS ---
#ifndef HARNESS_EMU
// device-side inputs: uniform [-1, 1) rounded to the 16-bit type (the
// kernel's own conversion)
__global__ void fill16(uint16_t* p, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = seed * 0xD1B54A32D192ED03ull + 0x9E3779B97F4A7C15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        p[i] = optiml_m16_to16(2.f * ((float)(z >> 40) * (1.0f / 16777216.0f)) - 1.f);
    }
}
static void dfill(uint16_t* p, size_t n, uint64_t seed) {
    fill16<<<1024, 256>>>(p, n, seed);
    CK(cudaGetLastError());
}

static double median_ms(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Times batch x (M x N x K) with contiguous operands against cuBLAS; checks
// the output. Returns false on a correctness failure.
static bool time_vs_cublas(cublasHandle_t hb, int batch, int M, int N, int K, uint64_t seed) {
    const size_t lenA = (size_t)M * K, lenB = (size_t)K * N, lenC = (size_t)M * N;
    uint16_t* dA = (uint16_t*)dmalloc(lenA * batch * 2);
    uint16_t* dB = (uint16_t*)dmalloc(lenB * batch * 2);
    uint16_t* dC = (uint16_t*)dmalloc(lenC * batch * 2);
    uint16_t* dR = (uint16_t*)dmalloc(lenC * batch * 2);  // cuBLAS
    uint16_t* dC0 = OPTIML_HAS_BETA ? (uint16_t*)dmalloc(lenC * batch * 2) : nullptr;
    float* dbias = (float*)dmalloc((size_t)N * 4);
    dfill(dA, lenA * batch, seed * 8 + 5);
    dfill(dB, lenB * batch, seed * 8 + 6);
    if (OPTIML_HAS_BETA) dfill(dC0, lenC * batch, seed * 8 + 7);
    std::vector<float> bias(N);
    for (int n = 0; n < N; ++n) bias[n] = urand(seed * 8 + 4, n);
    h2d(dbias, bias.data(), (size_t)N * 4);
    CK(cudaDeviceSynchronize());

    const Grid g = full_grid(batch, M, N);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto run_mine = [&] {
        OPTIML_MMA16_ENTRY<<<dim3(g.x, g.y, g.z), kThreads, kSmem>>>(dA, dB, dC, dbias, batch, M, N, K, (long long)lenA,
                                                                      (long long)lenB, (long long)lenC, kAlpha, kBeta);
    };
    const cudaDataType_t dt = OPTIML_DTYPE == 0 ? CUDA_R_16BF : CUDA_R_16F;
    const float one = 1.f, zero = 0.f;
    auto run_cublas = [&] {
        CB(cublasGemmStridedBatchedEx(hb, OPTIML_TRANS_B ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      OPTIML_TRANS_A ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one, dB, dt,
                                      OPTIML_TRANS_B ? K : N, (long long)lenB, dA, dt, OPTIML_TRANS_A ? M : K,
                                      (long long)lenA, &zero, dR, dt, N, (long long)lenC, batch, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
    };
    auto time = [&](auto fn) {
        for (int w = 0; w < 3; ++w) fn();
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<float> ms;
        for (int r = 0; r < 20; ++r) {
            CK(cudaEventRecord(e0));
            fn();
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float t = 0;
            CK(cudaEventElapsedTime(&t, e0, e1));
            ms.push_back(t);
        }
        CK(cudaGetLastError());
        return median_ms(ms);
    };
    const double t_mine = time(run_mine), t_cublas = time(run_cublas);
    const double flop = 2.0 * M * N * (double)K * batch;
    char shape[64];
    snprintf(shape, sizeof shape, "%dx%dx%d%s", M, N, K, batch > 1 ? (" x" + std::to_string(batch)).c_str() : "");
    printf("   TIMING %-22s %s %-14s mma16 %8.3f ms %7.1f TFLOP/s | cuBLAS %8.3f ms %7.1f TFLOP/s | ratio %.3f%s\n",
           shape, kType, HARNESS_NAME, t_mine, flop / (t_mine * 1e-3) / 1e12, t_cublas,
           flop / (t_cublas * 1e-3) / 1e12, t_cublas / t_mine,
           (OPTIML_HAS_ALPHA || OPTIML_HAS_BETA || OPTIML_HAS_BIAS || OPTIML_ACT) ? " (cuBLAS: plain product)" : "");
    fflush(stdout);

    // checked launch (C_old re-uploaded: with beta every launch read the previous result)
    if (OPTIML_HAS_BETA) CK(cudaMemcpy(dC, dC0, lenC * batch * 2, cudaMemcpyDeviceToDevice));
    run_mine();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    bool ok = true;
    // (a) the whole output against cuBLAS (plain product only)
    if (!(OPTIML_HAS_ALPHA || OPTIML_HAS_BETA || OPTIML_HAS_BIAS || OPTIML_ACT)) {
        std::vector<uint16_t> hc(lenC * batch), hr(lenC * batch);
        d2h(hc.data(), dC, hc.size() * 2);
        d2h(hr.data(), dR, hr.size() * 2);
        double se = 0, sr = 0, mx = 0, mref = 0;
        long long nonfinite = 0;
        for (size_t i = 0; i < hc.size(); ++i) {
            const double a = h_from16(hc[i]), b = h_from16(hr[i]);
            if (!std::isfinite(a)) nonfinite++;
            se += (a - b) * (a - b);
            sr += b * b;
            mx = std::max(mx, std::fabs(a - b));
            mref = std::max(mref, std::fabs(b));
        }
        const double rl2 = sr > 0 ? std::sqrt(se / sr) : 0;
        const bool good = nonfinite == 0 && rl2 <= 1e-2 && mx <= 2 * kRel * mref;
        printf("  %s %-50s rel_l2 %-9.3g max|diff| %-9.3g max|cublas| %-9.3g\n", good ? "PASS" : "FAIL",
               ("timed " + std::string(shape) + " vs cuBLAS").c_str(), rl2, mx, mref);
        ok &= good;
    }
    // (b) sampled rows of the first and last batch items against float64
    {
        CheckStats st;
        std::vector<int> items = {0};
        if (batch > 1) items.push_back(batch - 1);
        std::vector<uint16_t> hA(lenA), hB(lenB), hC(lenC), hC0(OPTIML_HAS_BETA ? lenC : 0);
        for (int z : items) {
            d2h(hA.data(), dA + (size_t)z * lenA, lenA * 2);
            d2h(hB.data(), dB + (size_t)z * lenB, lenB * 2);
            d2h(hC.data(), dC + (size_t)z * lenC, lenC * 2);
            if (OPTIML_HAS_BETA) d2h(hC0.data(), dC0 + (size_t)z * lenC, lenC * 2);
            std::vector<double> bf(lenB);  // B as stored
            for (size_t i = 0; i < lenB; ++i) bf[i] = h_from16(hB[i]);
            std::vector<int> rows = {0, M / 2 + 1, M - 1, (int)(mix64(seed + z) % (uint64_t)M)};
            std::vector<double> arow(K), s(N), sa(N);
            for (int m : rows) {
                for (int k = 0; k < K; ++k)
                    arow[k] = h_from16(hA[OPTIML_TRANS_A ? (size_t)k * M + m : (size_t)m * K + k]);
                std::fill(s.begin(), s.end(), 0.0);
                std::fill(sa.begin(), sa.end(), 0.0);
                for (int k = 0; k < K; ++k)
                    for (int n = 0; n < N; ++n) {
                        const double p = arow[k] * bf[OPTIML_TRANS_B ? (size_t)n * K + k : (size_t)k * N + n];
                        s[n] += p;
                        sa[n] += std::fabs(p);
                    }
                for (int n = 0; n < N; ++n) {
                    double v = s[n], T = sa[n];
                    if (OPTIML_HAS_ALPHA) { v *= kAlpha; T *= std::fabs(kAlpha); }
                    if (OPTIML_HAS_BETA) {
                        const double o = h_from16(hC0[(size_t)m * N + n]);
                        v += (double)kBeta * o;
                        T += std::fabs((double)kBeta * o);
                    }
                    if (OPTIML_HAS_BIAS) { v += bias[n]; T += std::fabs((double)bias[n]); }
                    check_elem(st, z, m, n, h_from16(hC[(size_t)m * N + n]), act_ref(v), T);
                }
            }
        }
        ok &= report(st, ("timed " + std::string(shape) + " sampled rows").c_str(), true, 0);
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    dfree(dA);
    dfree(dB);
    dfree(dC);
    dfree(dR);
    if (dC0) dfree(dC0);
    dfree(dbias);
    return ok;
}
#endif

int main(int argc, char** argv) {
    bool timing = true, small = false;
    uint64_t seed = 1;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--no-timing")) timing = false;
        else if (!strcmp(argv[i], "--small")) { small = true; timing = false; }
        else if (!strcmp(argv[i], "--tight")) kGuard = 0;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], nullptr, 10);
        else { printf("unknown argument %s\n", argv[i]); return 2; }
    }
#ifdef HARNESS_EMU
    const bool emu = true;
    timing = false;
    small = true;
    printf("== %s [%s] CPU EMULATION (%d host threads per block, cp.async %s)\n", HARNESS_NAME, kType, kThreads,
           getenv("EMU_CP") && !strcmp(getenv("EMU_CP"), "eager") ? "eager" : "lazy");
#else
    const bool emu = false;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaFuncSetAttribute(OPTIML_MMA16_ENTRY, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmem));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, OPTIML_MMA16_ENTRY));
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, OPTIML_MMA16_ENTRY, kThreads, kSmem));
    printf("== %s [%s]   device %s (sm_%d%d, %d SMs); kernel: %d registers, %zu B local, %zu B dynamic smem, "
           "%d blocks/SM\n",
           HARNESS_NAME, kType, prop.name, prop.major, prop.minor, prop.multiProcessorCount, fa.numRegs,
           (size_t)fa.localSizeBytes, kSmem, occ);
#endif
    if (kGuard == 0) printf("   --tight: no guard elements (only the per-case pointer offsets and stride gaps)\n");
    printf("   config: TRANS_A %d TRANS_B %d HAS_ALPHA %d (alpha %g) HAS_BETA %d (beta %g) HAS_BIAS %d ACT %d; tile "
           "%dx%dx%d warps %dx%d stages %d, %d threads; seed %llu\n",
           OPTIML_TRANS_A, OPTIML_TRANS_B, OPTIML_HAS_ALPHA, kAlpha, OPTIML_HAS_BETA, kBeta, OPTIML_HAS_BIAS, OPTIML_ACT,
           OPTIML_M16_BM, OPTIML_M16_BN, OPTIML_M16_BK, OPTIML_M16_WM, OPTIML_M16_WN, OPTIML_M16_STAGES, kThreads,
           (unsigned long long)seed);
    int fails = selftest_conversions() ? 1 : 0;

    // Copy paths (per operand, per batch item): A's ld is K (TRANS_A 0) or M,
    // B's is N (TRANS_B 0) or K; ld % 8 == 0 and a 16-byte base -> 16-byte
    // cp.async; ld even and a 4-byte base -> 4-byte cp.async; else 16-bit loads.
    //                name                          batch       M    N    K   bcA    bcB   padA padB padC offA offB offC big
    const Case cases[] = {
        {"1x1x1x1",                                     1,      1,   1,   1, false, false,  0,  0,  0,  0,  0,  0, false},
        {"1x77x45x33 (odd: 16-bit loads)",              1,     77,  45,  33, false, false,  0,  0,  0,  0,  0,  0, false},
        {"1x129x257x100 (ld%8=4 / odd)",                1,    129, 257, 100, false, false,  0,  0,  0,  0,  0,  0, false},
        {"2x136x200x72 (16B, partial)",                 2,    136, 200,  72, false, false,  0,  0,  0,  0,  0,  0, false},
        {"1x256x128x512 (16B, 16 k-tiles)",             1,    256, 128, 512, false, false,  0,  0,  0,  0,  0,  0, false},
        {"1x67x200x0 (K=0)",                            1,     67, 200,   0, false, false,  0,  0,  0,  0,  0,  0, false},
        {"1x1x1x0 (K=0)",                               1,      1,   1,   0, false, false,  0,  0,  0,  0,  0,  0, false},
        {"5x130x72x64 bcast B",                         5,    130,  72,  64, false, true,   0,  0,  0,  0,  0,  0, false},
        {"3x65x64x40 bcast A",                          3,     65,  64,  40, true,  false,  0,  0,  0,  0,  0,  0, false},
        {"2x64x64x64 odd/4B/odd ptrs",                  2,     64,  64,  64, false, false,  0,  0,  0,  1,  2,  1, false},
        {"2x64x64x64 4B/odd/4B ptrs",                   2,     64,  64,  64, false, false,  0,  0,  0,  2,  1,  2, false},
        {"2x96x80x48 pad (per-item paths)",             2,     96,  80,  48, false, false,  8,  4,  2,  0,  0,  0, false},
        {"2x50x70x1001 (K odd, 32 k-tiles)",            2,     50,  70, 1001, false, false, 0,  0,  0,  0,  0,  0, false},
        {"1x1x300x513 (M=1)",                           1,      1, 300, 513, false, false,  0,  0,  0,  0,  0,  0, false},
        {"1x300x1x257 (N=1)",                           1,    300,   1, 257, false, false,  0,  0,  0,  0,  0,  0, false},
        {"1x40x24x30 (K<BK, ld%8!=0)",                  1,     40,  24,  30, false, false,  0,  0,  0,  0,  0,  0, false},
        {"1x45x47x39 (extents = 7 mod 8)",              1,     45,  47,  39, false, false,  0,  0,  0,  0,  0,  0, false},
        {"1x37x41x52 odd ptrs (K = 20 mod 32)",         1,     37,  41,  52, false, false,  0,  0,  0,  1,  1,  1, false},
        {"1x128x128x39 (full tiles, K = 7 mod 8)",      1,    128, 128,  39, false, false,  0,  0,  0,  0,  0,  0, false},
        {"2x63x72x40 (M = 64 - 1)",                     2,     63,  72,  40, false, false,  0,  0,  0,  0,  0,  0, false},
        {"70000x3x2x5 (batch>65535)",               70000,      3,   2,   5, false, false,  0,  0,  0,  0,  0,  0, true},
        {"1x(65535*BM+37)x3x8 (grid.y capped)",         1, 65535 * OPTIML_M16_BM + 37, 3, 8, false, false, 0, 0, 0, 0, 0, 0, true},
    };
    for (const Case& c : cases) {
        if ((small || emu) && c.big) {
            printf("  skip %s (%s)\n", c.name, emu ? "EMU" : "--small");
            continue;
        }
        if (!run_case(c, seed, emu)) fails++;
        fflush(stdout);
    }
#ifdef HARNESS_EMU
    printf("   EMU: races %lld, uninitialised reads %lld, faults %lld; ldmatrix phases %lld, wavefronts %lld (%.3f per "
           "phase, 1 = conflict-free); cp.async bytes %lld, st.shared.v4 %lld\n",
           emu_races.load(), emu_uninit.load(), emu_faults.load(), emu_ldsm_phases.load(), emu_ldsm_wavefronts.load(),
           emu_ldsm_phases.load() ? (double)emu_ldsm_wavefronts.load() / emu_ldsm_phases.load() : 0.0,
           emu_cp_bytes.load(), emu_sts.load());
    if (emu_races.load() || emu_uninit.load() || emu_faults.load()) fails++;
    // every supported tile is designed free of ldmatrix bank conflicts
    if (emu_ldsm_wavefronts.load() != emu_ldsm_phases.load() && !getenv("EMU_ALLOW_CONFLICTS")) {
        printf("   EMU: ldmatrix bank conflicts (%lld extra wavefronts)\n",
               emu_ldsm_wavefronts.load() - emu_ldsm_phases.load());
        fails++;
    }
    (void)timing;
#else
    if (timing) {
        cublasHandle_t hb;
        CB(cublasCreate(&hb));
        if (!time_vs_cublas(hb, 1, 4096, 4096, 4096, seed)) fails++;
        if (!time_vs_cublas(hb, 256, 1024, 1024, 1024, seed)) fails++;
        CB(cublasDestroy(hb));
    }
#endif
    printf(fails ? "-- correctness FAILED (%d)\n" : "-- correctness PASSED\n", fails);
    return fails ? 1 : 0;
}
