// Correctness + timing harness for matmul16_simt.cu (16-bit SIMT fallback GEMM).
// One binary per kernel configuration (OPTIML_* macros from -D; see run.sh /
// configs.txt):
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Xptxas -v <-D...>
//        -I <repo>/optiml-build/src/families/matmul/cuda -I <repo>/optiml-build/src/cuda
//        -DHARNESS_NAME='"nn_bf16"' harness.cu -o h_nn_bf16
//   ./h_nn_bf16 [--no-timing] [--small] [--seed N] [--selftest-only]
//     --no-timing   correctness only
//     --small       correctness only, without the batch-70000 case (for
//                   compute-sanitizer runs)
//     --tight       no guard elements around the operands: every buffer ends
//                   at its last element, so a read / write past a matrix end
//                   is outside the allocation (compute-sanitizer memcheck on
//                   the GPU, AddressSanitizer in the EMU build report it).
//                   Guards catch writes and used reads; --tight catches the
//                   unused out-of-bounds reads (e.g. of rows >= M).
//
// The same file also builds on the CPU without CUDA (-DHARNESS_EMU, g++, see
// emu/run_emu.sh): the kernel source then runs with 256 host threads per block
// (pthread barrier = __syncthreads, static = __shared__) and host 16-bit
// conversions instead of the inline PTX ones.
//
// 1. Host 16-bit conversions (round to nearest even, written here, not taken
//    from cuda_bf16.h / cuda_fp16.h) are self-tested first: every 16-bit
//    pattern round-trips, every midpoint between adjacent values rounds to the
//    even one, random floats round to a nearest neighbour.
// 2. Correctness, per case (batch x M x N x K, broadcast / padded strides,
//    misaligned base pointers): fresh random inputs uniform [-1, 1) rounded to
//    the 16-bit type on the host (the device gets exactly those bits), bias
//    uniform [-1, 1) fp32, C_old (HAS_BETA) random 16-bit. Reference in float64
//    from the rounded values (every element). Buffers: 256-element guards
//    before / after every operand; gaps between batch items (padded strides)
//    and the guards of A and B hold NaN, so any element the kernel reads
//    outside the matrices and uses turns its output into NaN. C: guards and
//    gaps hold a sentinel that must stay bitwise unchanged; the C matrices are
//    filled with NaN (0x7FFF bf16 / 0x7E00 fp16) before each launch (random
//    C_old when HAS_BETA). Every case runs twice: with the launcher's grid
//    (ceil(N/64), ceil(M/64), min(batch, 65535)) and with a small grid
//    (<= 2 x 2 x 3 blocks), which exercises the kernel's grid-stride loops.
//    Pass criteria, per element (out = kernel output as float):
//        |out - ref| <= u * (|ref| + E) + E + F
//      u = 2^-8 (bf16) / 2^-11 (fp16): unit roundoff of the final rounding
//          (precision 8 / 11 bits), |rn(x) - x| <= u |x|;
//      E = 1.2 (K + 8) 2^-24 T, T = |alpha| sum_k |a b| + |beta C_old| + |bias|:
//          worst-case fp32 error of the sequential FMA accumulation (products
//          of 16-bit values are exact in fp32; each of the K adds rounds once,
//          <= 2^-24 of the running sum of |terms|), of the epilogue operations
//          (a few roundings of T) and erff (<= 2 ulp), times 1.2 >= the gelu
//          Lipschitz constant 1.13;
//      F = 2^-25 for fp16 (half the subnormal spacing), 0 for bf16;
//    plus no NaN / Inf where the reference is finite, and relative L2 error
//    sqrt(sum (out - ref)^2 / sum ref^2) <= 5e-3 (bf16) / 1e-3 (fp16) (when the
//    reference is all zero: every output must be +-0). The fraction of outputs
//    equal to rn16(ref) is printed for information.
// 3. Timing (skipped by --no-timing / --small and in EMU builds): 4096^3
//    (batch 1) and two matrix-vector shapes; CUDA events around single
//    launches after warm-ups, median of 7; TFLOP/s (GEMM) and GB/s (GEMV,
//    compulsory bytes). Sampled rows of each timed output are checked against
//    float64 with the bound above (counts as correctness).
// Output: "  PASS ..." / "  FAIL ..." per case and grid, "   TIMING ..." lines,
// final "-- correctness PASSED" / "-- correctness FAILED".
// Exit status: 0 all good, 1 correctness failure, 2 CUDA error.
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
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);  // NaN
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); // >= 65520 (incl. inf) -> inf
    if (a < 0x38800000u) {                                   // < 2^-14: subnormal or zero
        // |f| * 2^24 is exact in double; nearbyint rounds ties to even (default
        // rounding mode). 1024 = 0x400 is the smallest normal: the right encoding.
        const double s = (double)u2f(a) * 16777216.0;
        return (uint16_t)(sign | (uint16_t)std::nearbyint(s));
    }
    const uint32_t e = (a >> 23) - 112u;  // rebias 127 -> 15: 1..30
    const uint32_t m = a & 0x7FFFFFu;
    uint32_t h = (e << 10) | (m >> 13);
    const uint32_t rem = m & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may roll into the exponent: correct
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
#include "emu/emu_shim.h"
#else
#include <cuda_runtime.h>
#endif
#include "matmul16_simt.cu"  // optiml-build/src/families/matmul/cuda (-I)

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

struct Grid {
    unsigned x, y, z;
};
static Grid full_grid(int batch, int M, int N) {
    return Grid{(unsigned)((N + 63) / 64), (unsigned)((M + 63) / 64), (unsigned)std::min(batch, 65535)};
}
static void launch(Grid g, const uint16_t* A, const uint16_t* B, uint16_t* C, const float* bias, int batch, int M,
                   int N, int K, long long sA, long long sB, long long sC, float alpha, float beta) {
    (void)g;
    if (batch <= 0 || M <= 0 || N <= 0) return;  // nothing to write; a zero grid dimension is a launch error
#ifdef HARNESS_EMU
    emu_launch(g.x, g.y, g.z, 256, [&] {
        optiml_matmul16_simt(A, B, C, bias, batch, M, N, K, sA, sB, sC, alpha, beta);
    });
#else
    optiml_matmul16_simt<<<dim3(g.x, g.y, g.z), 256>>>(A, B, C, bias, batch, M, N, K, sA, sB, sC, alpha, beta);
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
static const double kU = OPTIML_DTYPE == 0 ? 0.00390625 : 0.00048828125;  // 2^-8 / 2^-11
static const double kF = OPTIML_DTYPE == 0 ? 0.0 : 2.98023223876953125e-8; // 2^-25 for fp16
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
    for (uint32_t h = 0; h < 65536; ++h) {  // round trip of every finite / inf pattern
        const float f = h_from16((uint16_t)h);
        if (std::isnan(f)) {
            if (!std::isnan(h_from16(h_to16(f)))) ++bad;
            continue;
        }
        if (h_to16(f) != h) {
            if (bad++ < 5) printf("  selftest: round trip %04x -> %a -> %04x\n", h, f, h_to16(f));
        }
    }
    const uint32_t top = OPTIML_DTYPE == 0 ? 0x7F7Fu : 0x7BFFu;  // largest finite positive pattern
    for (uint32_t h = 0; h < top; ++h) {  // every midpoint between adjacent positive finite values
        const double lo = h_from16((uint16_t)h), hi = h_from16((uint16_t)(h + 1));
        const float mid = (float)((lo + hi) * 0.5);
        if ((double)mid != (lo + hi) * 0.5) { ++bad; continue; }  // exact in float (<= 12 significant bits)
        const uint16_t want = (h & 1u) ? (uint16_t)(h + 1) : (uint16_t)h;
        for (int s = 0; s < 2; ++s) {
            const float x = s ? -mid : mid;
            const uint16_t w = s ? (uint16_t)(want | 0x8000u) : want;
            if (h_to16(x) != w) {
                if (bad++ < 5) printf("  selftest: midpoint %a -> %04x, want %04x\n", x, h_to16(x), w);
            }
        }
    }
    // random floats over the whole exponent range of the type (incl. its
    // subnormals, underflow to 0 and overflow to inf): the result must be a
    // nearest representable value, the even one on a tie
    const double maxf = OPTIML_DTYPE == 0 ? 3.3895313892515355e38 : 65504.0;
    const double half_ulp_top = OPTIML_DTYPE == 0 ? std::ldexp(1.0, 119) : 16.0;
    const int emin = OPTIML_DTYPE == 0 ? -149 : -27, emax = OPTIML_DTYPE == 0 ? 127 : 16;
    for (uint64_t i = 0; i < 2000000; ++i) {
        const uint64_t r = mix64(i + 12345);
        const float frac = (float)((r >> 32) & 0x7FFFFFu) * (1.0f / 8388608.0f);
        const int e = emin + (int)((r >> 8) % (uint64_t)(emax - emin + 1));
        const float x = std::ldexp(1.0f + frac, e) * ((r & 1) ? -1.f : 1.f);
        if (std::isinf(x)) continue;
        const uint16_t h = h_to16(x);
        const double v = h_from16(h), ax = std::fabs((double)x);
        if (std::isinf(v) != (ax >= maxf + half_ulp_top)) {
            if (bad++ < 5) printf("  selftest: %a -> %04x (overflow threshold)\n", x, h);
            continue;
        }
        if (std::isinf(v)) continue;
        const double d = std::fabs(v - (double)x);
        for (int nb = -1; nb <= 1; nb += 2) {
            const uint32_t mag = (uint32_t)(h & 0x7FFFu);
            if (nb < 0 && mag == 0) continue;
            const uint16_t hn = (uint16_t)((h & 0x8000u) | (mag + nb));
            const double vn = h_from16(hn);
            if (std::isnan(vn) || std::isinf(vn)) continue;
            const double dn = std::fabs(vn - (double)x);
            if (dn < d || (dn == d && (h & 1u))) {
                if (bad++ < 5) printf("  selftest: %a -> %04x not nearest-even (neighbour %04x)\n", x, h, hn);
            }
        }
    }
    printf("== selftest of host %s conversions (round trip, midpoints, 2M random): %s (%d bad)\n", kType,
           bad ? "FAIL" : "ok", bad);
    return bad;
}

// ------------------------------------------------------------ correctness ---
struct Case {
    const char* name;
    int batch, M, N, K;
    bool bcA, bcB;          // stride 0 (broadcast)
    long long padA, padB, padC;  // extra elements between batch items
    int offA, offB, offC;   // element offsets of the base pointers (odd = 2-byte aligned only)
    bool big;               // skipped by --small
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
static void check_elem(CheckStats& st, int z, int m, int n, float out, double ref, double T, int K) {
    const double E = 1.2 * (K + 8) * 5.9604644775390625e-8 * T;
    const double tol = kU * (std::fabs(ref) + E) + E + kF;
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
    printf("  %s %-52s err/tol %-9.3g rel_l2 %-9.3g exact %5.1f%%", ok ? "PASS" : "FAIL", label, st.worst_ratio, rl2,
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

    auto a_at = [&](int z, int m, int k) -> double {
        const size_t zb = A.base + (c.bcA ? 0 : (size_t)z * A.stride);
        return h_from16(A.h[zb + (OPTIML_TRANS_A ? (size_t)k * M + m : (size_t)m * K + k)]);
    };
    auto b_at = [&](int z, int k, int n) -> double {
        const size_t zb = B.base + (c.bcB ? 0 : (size_t)z * B.stride);
        return h_from16(B.h[zb + (OPTIML_TRANS_B ? (size_t)n * K + k : (size_t)k * N + n)]);
    };
    // float64 reference and error scale T for every element
    std::vector<double> ref(lenC * batch), tmag(lenC * batch);
    std::vector<double> arow(K), bcol((size_t)K * N);
    for (int z = 0; z < batch; ++z) {
        for (int k = 0; k < K; ++k)
            for (int n = 0; n < N; ++n) bcol[(size_t)n * K + k] = b_at(z, k, n);
        for (int m = 0; m < M; ++m) {
            for (int k = 0; k < K; ++k) arow[k] = a_at(z, m, k);
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
        snprintf(label, sizeof label, "%-28s grid %ux%ux%u%s", c.name, g.x, g.y, g.z, variant ? " (small)" : "");
        if (emu && (unsigned long long)g.x * g.y * g.z > 64) {
            printf("  skip %-52s (EMU: > 64 blocks; the small grid covers the same work)\n", label);
            continue;
        }
        if (variant == 1 && g.x == fg.x && g.y == fg.y && g.z == fg.z) continue;  // same as the full grid
        h2d(dC, cold.data(), cold.size() * 2);
        launch(g, dA + A.base, dB + B.base, dC + Cb.base, dbias, batch, M, N, K, c.bcA ? 0 : A.stride,
               c.bcB ? 0 : B.stride, Cb.stride, kAlpha, kBeta);
        std::vector<uint16_t> out(Cb.h.size());
        d2h(out.data(), dC, out.size() * 2);
        // guards and gaps: every element outside the C matrices must be unchanged
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
                    check_elem(st, z, m, n, h_from16(out[Cb.base + (size_t)z * Cb.stride + (size_t)m * N + n]),
                               ref[r], tmag[r], K);
                }
        all_ok &= report(st, label, guard_bad == 0, guard_bad);
    }
    dfree(dA);
    dfree(dB);
    dfree(dC);
    dfree(dbias);
    return all_ok;
}

// ------------------------------------------------------------ timing ---
#ifndef HARNESS_EMU
// Times one shape (batch 1, contiguous operands, the configured epilogue),
// then checks `nrows` sampled rows of the last output against float64.
static bool time_shape(int M, int N, int K, uint64_t seed, bool gemv) {
    const size_t lenA = (size_t)M * K, lenB = (size_t)K * N, lenC = (size_t)M * N;
    std::vector<uint16_t> hA(lenA), hB(lenB), hC(lenC);
    for (size_t i = 0; i < lenA; ++i) hA[i] = h_to16(urand(seed * 8 + 5, i));
    for (size_t i = 0; i < lenB; ++i) hB[i] = h_to16(urand(seed * 8 + 6, i));
    for (size_t i = 0; i < lenC; ++i) hC[i] = OPTIML_HAS_BETA ? h_to16(urand(seed * 8 + 7, i)) : kNaN16;
    std::vector<float> bias(N);
    for (int n = 0; n < N; ++n) bias[n] = urand(seed * 8 + 4, n);
    uint16_t* dA = (uint16_t*)dmalloc(lenA * 2);
    uint16_t* dB = (uint16_t*)dmalloc(lenB * 2);
    uint16_t* dC = (uint16_t*)dmalloc(lenC * 2);
    float* dbias = (float*)dmalloc((size_t)N * 4);
    h2d(dA, hA.data(), lenA * 2);
    h2d(dB, hB.data(), lenB * 2);
    h2d(dbias, bias.data(), (size_t)N * 4);
    const Grid g = full_grid(1, M, N);
    // C_old is the same for every launch only without beta; with beta each
    // launch reads the previous result: re-upload before the checked launch.
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    h2d(dC, hC.data(), lenC * 2);
    for (int w = 0; w < 3; ++w) launch(g, dA, dB, dC, dbias, 1, M, N, K, 0, 0, 0, kAlpha, kBeta);
    std::vector<float> ms;
    for (int r = 0; r < 7; ++r) {
        CK(cudaEventRecord(e0));
        optiml_matmul16_simt<<<dim3(g.x, g.y, g.z), 256>>>(dA, dB, dC, dbias, 1, M, N, K, 0, 0, 0, kAlpha, kBeta);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        float t = 0;
        CK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    const double flop = 2.0 * M * N * (double)K;
    const double bytes = 2.0 * ((double)lenA + lenB + lenC) + (OPTIML_HAS_BETA ? 2.0 * lenC : 0.0);
    printf("   TIMING %-16s %s %-5s median %8.3f ms (min %8.3f)  %7.2f TFLOP/s  %7.1f GB/s%s\n",
           (std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K)).c_str(), kType, HARNESS_NAME, med,
           ms[0], flop / (med * 1e-3) / 1e12, bytes / (med * 1e-3) / 1e9, gemv ? "  (GEMV: GB/s is the figure)" : "");
    // checked launch from the original C_old
    h2d(dC, hC.data(), lenC * 2);
    launch(g, dA, dB, dC, dbias, 1, M, N, K, 0, 0, 0, kAlpha, kBeta);
    std::vector<uint16_t> out(lenC);
    d2h(out.data(), dC, lenC * 2);
    std::vector<int> rows = {0, 1, 63, 64, M / 2, M - 1};
    for (int i = 0; i < 2; ++i) rows.push_back((int)(mix64(seed + i) % (uint64_t)M));
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    std::vector<float> bf(lenB);  // B as float, stored as given
    for (size_t i = 0; i < lenB; ++i) bf[i] = h_from16(hB[i]);
    CheckStats st;
    std::vector<double> arow(K), s(N), sa(N);
    for (int m : rows) {
        if (m < 0 || m >= M) continue;
        for (int k = 0; k < K; ++k) arow[k] = h_from16(hA[OPTIML_TRANS_A ? (size_t)k * M + m : (size_t)m * K + k]);
        std::fill(s.begin(), s.end(), 0.0);
        std::fill(sa.begin(), sa.end(), 0.0);
        if (OPTIML_TRANS_B) {  // B stored N x K: contiguous along k
            for (int n = 0; n < N; ++n)
                for (int k = 0; k < K; ++k) {
                    const double p = arow[k] * bf[(size_t)n * K + k];
                    s[n] += p;
                    sa[n] += std::fabs(p);
                }
        } else {  // B stored K x N: contiguous along n
            for (int k = 0; k < K; ++k)
                for (int n = 0; n < N; ++n) {
                    const double p = arow[k] * bf[(size_t)k * N + n];
                    s[n] += p;
                    sa[n] += std::fabs(p);
                }
        }
        for (int n = 0; n < N; ++n) {
            double v = s[n], T = sa[n];
            if (OPTIML_HAS_ALPHA) { v *= kAlpha; T *= std::fabs(kAlpha); }
            if (OPTIML_HAS_BETA) {
                const double o = h_from16(hC[(size_t)m * N + n]);
                v += (double)kBeta * o;
                T += std::fabs((double)kBeta * o);
            }
            if (OPTIML_HAS_BIAS) { v += bias[n]; T += std::fabs((double)bias[n]); }
            check_elem(st, 0, m, n, h_from16(out[(size_t)m * N + n]), act_ref(v), T, K);
        }
    }
    char label[96];
    snprintf(label, sizeof label, "timed %dx%dx%d (sampled rows)", M, N, K);
    const bool ok = report(st, label, true, 0);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    dfree(dA);
    dfree(dB);
    dfree(dC);
    dfree(dbias);
    return ok;
}
#endif

int main(int argc, char** argv) {
    bool timing = true, small = false, selftest_only = false;
    uint64_t seed = 1;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--no-timing")) timing = false;
        else if (!strcmp(argv[i], "--small")) { small = true; timing = false; }
        else if (!strcmp(argv[i], "--selftest-only")) selftest_only = true;
        else if (!strcmp(argv[i], "--tight")) kGuard = 0;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], nullptr, 10);
        else { printf("unknown argument %s\n", argv[i]); return 2; }
    }
#ifdef HARNESS_EMU
    const bool emu = true;
    timing = false;
    printf("== %s [%s] CPU EMULATION (256 host threads per block)\n", HARNESS_NAME, kType);
#else
    const bool emu = false;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, optiml_matmul16_simt));
    printf("== %s [%s]   device %s (sm_%d%d, %d SMs); kernel: %d registers, %zu B static smem, %zu B local\n",
           HARNESS_NAME, kType, prop.name, prop.major, prop.minor, prop.multiProcessorCount, fa.numRegs,
           (size_t)fa.sharedSizeBytes, (size_t)fa.localSizeBytes);
#endif
    if (kGuard == 0) printf("   --tight: no guard elements (only the per-case pointer offsets and stride gaps)\n");
    printf("   config: TRANS_A %d TRANS_B %d HAS_ALPHA %d (alpha %g) HAS_BETA %d (beta %g) HAS_BIAS %d ACT %d; seed %llu\n",
           OPTIML_TRANS_A, OPTIML_TRANS_B, OPTIML_HAS_ALPHA, kAlpha, OPTIML_HAS_BETA, kBeta, OPTIML_HAS_BIAS, OPTIML_ACT,
           (unsigned long long)seed);
    int fails = selftest_conversions() ? 1 : 0;
    if (selftest_only) return fails ? 1 : 0;

    //                name                     batch    M    N    K   bcA    bcB   padA padB padC offA offB offC big
    const Case cases[] = {
        {"1x1x1x1",                               1,   1,   1,   1, false, false,  0,  0,  0,  0,  0,  0, false},
        {"2x127x129x65",                          2, 127, 129,  65, false, false,  0,  0,  0,  0,  0,  0, false},
        {"3x130x67x257",                          3, 130,  67, 257, false, false,  0,  0,  0,  0,  0,  0, false},
        {"1x67x200x0 (K=0)",                      1,  67, 200,   0, false, false,  0,  0,  0,  0,  0,  0, false},
        {"2x257x33x31",                           2, 257,  33,  31, false, false,  0,  0,  0,  0,  0,  0, false},
        {"1x5x300x513",                           1,   5, 300, 513, false, false,  0,  0,  0,  0,  0,  0, false},
        {"3x300x1x257 (N=1)",                     3, 300,   1, 257, false, false,  0,  0,  0,  0,  0,  0, false},
        {"2x1x129x515 (M=1)",                     2,   1, 129, 515, false, false,  0,  0,  0,  0,  0,  0, false},
        {"70000x3x2x5 (batch>65535)",         70000,   3,   2,   5, false, false,  0,  0,  0,  0,  0,  0, true},
        {"4x70x90x40 bcast B",                    4,  70,  90,  40, false, true,   0,  0,  0,  0,  0,  0, false},
        {"3x65x64x17 bcast A",                    3,  65,  64,  17, true,  false,  0,  0,  0,  0,  0,  0, false},
        {"2x64x64x16 pad+odd ptrs",               2,  64,  64,  16, false, false,  5,  7,  9,  1,  3,  1, false},
        {"3x33x65x1 (K=1) odd ptrs",              3,  33,  65,   1, false, false,  1,  0,  3,  1,  1,  1, false},
        {"2x129x63x129 pad",                      2, 129,  63, 129, false, false, 11, 13,  1,  0,  0,  0, false},
        {"1x200x1x300 GEMV odd ptrs",             1, 200,   1, 300, false, false,  0,  0,  0,  3,  1,  1, false},
        {"1x1x1x0 (K=0)",                         1,   1,   1,   0, false, false,  0,  0,  0,  0,  0,  0, false},
    };
    for (const Case& c : cases) {
        if (small && c.big) {
            printf("  skip %s (--small)\n", c.name);
            continue;
        }
        if (!run_case(c, seed, emu)) fails++;
        fflush(stdout);
    }
#ifndef HARNESS_EMU
    if (timing) {
        if (!time_shape(4096, 4096, 4096, seed, false)) fails++;
        if (!time_shape(8192, 1, 8192, seed, true)) fails++;
        if (!time_shape(1, 8192, 8192, seed, true)) fails++;
    }
#else
    (void)timing;
#endif
    printf(fails ? "-- correctness FAILED (%d)\n" : "-- correctness PASSED\n", fails);
    return fails ? 1 : 0;
}
