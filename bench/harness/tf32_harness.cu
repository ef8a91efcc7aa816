// Standalone correctness + performance harness for the optiml TF32
// tensor-core matmul template (optiml-build/src/families/matmul/cuda/matmul_tf32.cu).
//
// One binary per kernel configuration: the OPTIML_* macros are passed with -D
// on the nvcc command line (see run_tf32.sh), exactly as the Rust side will
// define them before handing the template to NVRTC.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -I ../../optiml-build/src/cuda \
//        -DOPTIML_BM=128 -DOPTIML_BN=128 -DOPTIML_BK=32 -DOPTIML_WM=64 -DOPTIML_WN=64 \
//        -DOPTIML_STAGES=3 -DOPTIML_THREADS=128 -DHARNESS_NAME='"default"' \
//        tf32_harness.cu -lcublas -o h_default
//   ./h_default              # correctness cases + timing (batch 16 and 256 x 1024^3)
//   ./h_default --quick      # correctness cases only
//   ./h_default --small      # only the small correctness cases (for compute-sanitizer)
//   ./h_default --huge       # also the 64-bit offset cases (several GB of host + device memory)
//   ./h_default --seed N     # input seed (default: time-based, printed)
//
// Correctness (the TESTPLAN of design.md §4): fresh random inputs per case
// (uniform[-1,1], uniform[0,1], exponent spread 2^-8..2^8, {-1,0,1}), C
// poisoned with NaN (random when OPTIML_HAS_BETA), reference in float64 on the
// CPU over every output (or, for big cases, a sample of rows x columns of
// every 3rd batch item that always includes the first and last 16 rows and
// columns). A case passes when
//   * no output is NaN/Inf (every output is checked, sampled or not),
//   * every element of the C allocation that is not an output is bitwise unchanged,
//   * ||out - ref||_2 / ||ref||_2 <= 1e-3 (skipped for cases with < 64 outputs,
//     where one ill-conditioned element dominates the norm), and
//   * max |out - ref| / D <= 1.25e-3 + (K + 16) * 2^-22 for every checked
//     element, D = |alpha| sum_k |a_k b_k| + |beta c_old| + |bias| (the
//     worst-case TF32 rounding of both inputs, 2 * 2^-11, plus fp32
//     accumulation, with slack for gelu's slope <= 1.13).
// Also printed: the relative error against a float64 reference over inputs
// rounded to TF32 exactly as cvt.rna does ("rel_t32"): ~1e-7 when the kernel
// rounds like cvt.rna (OPTIML_TF32_ROUND=1; =2, cvt.rn, differs only on exact
// ties, about one input in 8192, by one TF32 ulp), ~1e-4 with
// OPTIML_TF32_ROUND=0 (truncation).
//
// Timing (design.md §5): batched 1024^3 at batch 16 and 256, CUDA events on
// the default stream, median of 20 after 5 warm-up runs and a clock warm-up;
// working sets (192 MiB, 3 GiB) exceed the 60 MiB L2, so no flush. cuBLAS
// TF32 (cublasGemmStridedBatchedEx, CUBLAS_COMPUTE_32F_FAST_TF32) in the same
// process on the same stream; cuBLAS FP32 SGEMM at batch 16 for reference.
// For configurations with no epilogue flags the full 1024^3 outputs are also
// compared with cuBLAS TF32 (rel <= 2e-3) and cuBLAS FP32 (rel <= 1e-3).
// Exit code: 0 all good, 1 correctness failure, 2 CUDA/cuBLAS error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <cmath>
#include <ctime>
#include <vector>
#include <algorithm>
#include <string>
#include <cuda_runtime.h>
#include <cublas_v2.h>

#include "../../optiml-build/src/families/matmul/cuda/matmul_tf32.cu"

#ifndef HARNESS_NAME
#define HARNESS_NAME "unnamed"
#endif

#include "check.cuh"

static const double kRelTol = 1e-3;
static const float kAlpha = 0.75f;  // used only when OPTIML_HAS_ALPHA
static const float kBeta = 0.5f;    // used only when OPTIML_HAS_BETA

// ------------------------------------------------------------ host RNG ---
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
// dist 0: uniform[-1,1]; 1: uniform[0,1]; 2: +-u * 2^e, e in [-8,8]; 3: {-1,0,1}
static void fill_host(float* p, size_t n, uint64_t seed, int dist) {
    for (size_t i = 0; i < n; ++i) {
        const uint64_t z = mix64(seed * 0xD1B54A32D192ED03ull + 0x9E3779B97F4A7C15ull * (i + 1));
        const float u = (float)(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
        switch (dist) {
        case 1: p[i] = u; break;
        case 2: {
            const int e = (int)((z >> 8) % 17ull) - 8;
            p[i] = ((z & 1) ? -1.f : 1.f) * (0.5f + 0.5f * u) * ldexpf(1.f, e);
            break;
        }
        case 3: p[i] = (float)((int)(z % 3ull) - 1); break;
        default: p[i] = 2.f * u - 1.f; break;
        }
    }
}

// cvt.rna.tf32.f32 on the host: round the 13 dropped bits to nearest, ties
// away from zero (sign-magnitude, so adding half an ulp to the magnitude bits
// does it). Finite inputs only.
static inline double tf32_rna(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x1000u) & 0xFFFFE000u;
    float r;
    memcpy(&r, &u, 4);
    return (double)r;
}

static double epilogue_ref(double acc, double old, double bias) {
    double v = acc;
    if (OPTIML_HAS_ALPHA) v *= (double)kAlpha;
    if (OPTIML_HAS_BETA) v += (double)kBeta * old;
    if (OPTIML_HAS_BIAS) v += bias;
    if (OPTIML_ACT == 1) v = v > 0.0 ? v : 0.0;
    if (OPTIML_ACT == 2) v = 0.5 * v * (1.0 + erf(v * 0.70710678118654752440));
    return v;
}

// ------------------------------------------------------------ launching ---
static dim3 optiml_grid(int batch, int M, int N) {
    return dim3((unsigned)((N + OPTIML_BN - 1) / OPTIML_BN), (unsigned)((M + OPTIML_BM - 1) / OPTIML_BM),
                (unsigned)std::min(batch, 65535));
}

static void launch_optiml(const float* A, const float* B, float* C, const float* bias, int batch, int M, int N,
                          int K, long long sA, long long sB, long long sC, float alpha, float beta,
                          cudaStream_t st = 0) {
    if (M <= 0 || N <= 0 || batch <= 0) return;
    optiml_matmul<<<optiml_grid(batch, M, N), OPTIML_THREADS, OPTIML_DYN_SMEM_BYTES, st>>>(
        A, B, C, bias, batch, M, N, K, sA, sB, sC, alpha, beta);
}

// ------------------------------------------------------------ test cases ---
struct Case {
    const char* name;
    int batch, M, N, K;
    int offA, offB, offC;        // element offsets of the base pointers (odd -> only 4-byte aligned)
    long long padA, padB, padC;  // extra elements between batch items
    bool bcastA, bcastB;         // stride 0
    int dist;                    // input distribution (fill_host)
    bool huge;                   // only with --huge
};

struct Result {
    double rel, rel_t32, maxscaled, bound;
    unsigned long long nans, guard, checked;
    bool ok;
};

// picks up to ~64 indices of [0, n): the first and last 16 and a spread in between
static std::vector<int> sample_idx(int n, bool full) {
    std::vector<int> v;
    if (full || n <= 64) {
        for (int i = 0; i < n; ++i) v.push_back(i);
        return v;
    }
    for (int i = 0; i < 16; ++i) v.push_back(i);
    for (int j = 0; j < 32; ++j) v.push_back((int)(((long long)j * n) / 32 + (j * 7) % 16));
    for (int i = n - 16; i < n; ++i) v.push_back(i);
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    v.erase(std::remove_if(v.begin(), v.end(), [n](int x) { return x < 0 || x >= n; }), v.end());
    return v;
}

static bool g_small = false, g_huge = false;

static bool run_case(const Case& c, uint64_t seed) {
    const long long MK = (long long)c.M * c.K, KN = (long long)c.K * c.N, MN = (long long)c.M * c.N;
    const long long sA = c.bcastA ? 0 : MK + c.padA;
    const long long sB = c.bcastB ? 0 : KN + c.padB;
    const long long sC = MN + c.padC;
    const size_t nA = (size_t)(c.offA + (c.bcastA ? MK : (c.batch - 1) * sA + MK)) + 1;
    const size_t nB = (size_t)(c.offB + (c.bcastB ? KN : (c.batch - 1) * sB + KN)) + 1;
    const size_t nC = (size_t)(c.offC + (c.batch - 1) * sC + MN) + 67;  // + tail guard
    const size_t nBias = (size_t)c.N + 1;

    std::vector<float> hA(nA), hB(nB), hC0(nC), hC(nC), hBias(nBias);
    fill_host(hA.data(), nA, seed * 8 + 0, c.dist);
    fill_host(hB.data(), nB, seed * 8 + 1, c.dist);
    fill_host(hBias.data(), nBias, seed * 8 + 2, 0);
    if (OPTIML_HAS_BETA)
        fill_host(hC0.data(), nC, seed * 8 + 3, 0);
    else
        memset(hC0.data(), 0xFF, nC * 4);  // 0xFFFFFFFF = NaN

    float *A, *B, *C, *bias;
    CK(cudaMalloc(&A, nA * 4));
    CK(cudaMalloc(&B, nB * 4));
    CK(cudaMalloc(&C, nC * 4));
    CK(cudaMalloc(&bias, nBias * 4));
    CK(cudaMemcpy(A, hA.data(), nA * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, hB.data(), nB * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(C, hC0.data(), nC * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(bias, hBias.data(), nBias * 4, cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());

    launch_optiml(A + c.offA, B + c.offB, C + c.offC, bias, c.batch, c.M, c.N, c.K, sA, sB, sC, kAlpha, kBeta);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hC.data(), C, nC * 4, cudaMemcpyDeviceToHost));
    CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(bias));

    Result r = {0, 0, 0, 0, 0, 0, 0, false};
    // guard region and NaN scan over the whole allocation
    for (size_t i = 0; i < nC; ++i) {
        const long long j = (long long)i - c.offC;
        bool is_out = false;
        if (j >= 0) {
            const long long z = j / sC, rr = j % sC;
            is_out = z < c.batch && rr < MN;
        }
        if (!is_out) {
            if (memcmp(&hC[i], &hC0[i], 4) != 0) ++r.guard;
        } else if (!std::isfinite(hC[i])) {
            ++r.nans;
        }
    }

    // float64 reference over all outputs, or a sample for big problems
    const double work = (double)c.batch * (double)MN * (double)std::max(c.K, 1);
    const bool full = work <= 2e8;
    std::vector<int> zs;
    if (full || c.batch <= 3) {
        for (int z = 0; z < c.batch; ++z) zs.push_back(z);
    } else {
        zs = {0, c.batch / 2, c.batch - 1};
    }
    const std::vector<int> ms = sample_idx(c.M, full), ns = sample_idx(c.N, full);
    const float* Ap = hA.data() + c.offA;
    const float* Bp = hB.data() + c.offB;
    const float* Cp = hC.data() + c.offC;
    const float* C0p = hC0.data() + c.offC;
    double d2 = 0, r2 = 0, t2 = 0, maxs = 0;
    const double bound = 1.25e-3 + (double)(c.K + 16) * ldexp(1.0, -22);
    std::vector<double> acc(ns.size()), acct(ns.size()), absum(ns.size());
    for (int z : zs) {
        const float* Az = Ap + (long long)z * sA;
        const float* Bz = Bp + (long long)z * sB;
        for (int m : ms) {
            std::fill(acc.begin(), acc.end(), 0.0);
            std::fill(acct.begin(), acct.end(), 0.0);
            std::fill(absum.begin(), absum.end(), 0.0);
            for (int k = 0; k < c.K; ++k) {
                const float a = OPTIML_TRANS_A ? Az[(long long)k * c.M + m] : Az[(long long)m * c.K + k];
                const double ad = a, at = tf32_rna(a);
                for (size_t q = 0; q < ns.size(); ++q) {
                    const int n = ns[q];
                    const float b = OPTIML_TRANS_B ? Bz[(long long)n * c.K + k] : Bz[(long long)k * c.N + n];
                    acc[q] += ad * (double)b;
                    acct[q] += at * tf32_rna(b);
                    absum[q] += fabs(ad * (double)b);
                }
            }
            for (size_t q = 0; q < ns.size(); ++q) {
                const int n = ns[q];
                const long long idx = (long long)z * sC + (long long)m * c.N + n;
                const double old = C0p[idx], bv = hBias[n];
                const double ref = epilogue_ref(acc[q], old, bv);
                const double reft = epilogue_ref(acct[q], old, bv);
                const float o = Cp[idx];
                ++r.checked;
                if (!std::isfinite(o)) continue;  // counted in r.nans already
                const double d = (double)o - ref;
                d2 += d * d;
                r2 += ref * ref;
                t2 += ((double)o - reft) * ((double)o - reft);
                const double D = (OPTIML_HAS_ALPHA ? fabs((double)kAlpha) : 1.0) * absum[q] +
                                 (OPTIML_HAS_BETA ? fabs((double)kBeta * old) : 0.0) +
                                 (OPTIML_HAS_BIAS ? fabs(bv) : 0.0) + 1e-30;
                maxs = std::max(maxs, fabs(d) / D);
            }
        }
    }
    r.rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
    r.rel_t32 = r2 > 0 ? sqrt(t2 / r2) : sqrt(t2);
    r.maxscaled = maxs;
    r.bound = bound;
    const bool rel_ok = r.rel <= kRelTol || (long long)c.batch * MN < 64;
    r.ok = r.nans == 0 && r.guard == 0 && rel_ok && r.maxscaled <= bound;
    printf("  %-4s %-30s b=%-6d M=%-5d N=%-9d K=%-8d rel=%.2e rel_t32=%.2e maxsc=%.2e (<=%.2e) nan=%llu guard=%llu "
           "checked=%llu%s\n",
           r.ok ? "ok" : "FAIL", c.name, c.batch, c.M, c.N, c.K, r.rel, r.rel_t32, r.maxscaled, bound, r.nans,
           r.guard, r.checked, full ? "" : " (sampled)");
    fflush(stdout);
    return r.ok;
}

static bool run_correctness(uint64_t seed0) {
    // name, batch, M, N, K, offA, offB, offC, padA, padB, padC, bcastA, bcastB, dist, huge
    const Case cases[] = {
        {"1x1x1", 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"127x129x65", 1, 127, 129, 65, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"130x67x257", 2, 130, 67, 257, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"odd small", 3, 77, 45, 33, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"K = 0", 2, 5, 7, 0, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"K = 0, several tiles", 1, 130, 260, 0, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"K < 8", 1, 130, 70, 3, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"K = 4 (one chunk)", 2, 64, 64, 4, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"K % BK != 0, ld % 4 == 0", 2, 256, 128, 100, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"exact tile 128^3", 1, 128, 128, 128, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"multi tile 256x384x96", 2, 256, 384, 96, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"odd N, K=1000", 1, 129, 257, 1000, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"1024^3 batch 2", 2, 1024, 1024, 1024, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"N%4==0 partial tiles", 2, 256, 132, 20, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"misaligned ptrs (+1 elt)", 4, 64, 64, 64, 1, 1, 1, 0, 0, 0, false, false, 0, false},
        {"misaligned C only", 2, 100, 96, 64, 0, 0, 3, 0, 0, 0, false, false, 0, false},
        {"misaligned A only", 2, 96, 100, 68, 2, 0, 0, 0, 0, 0, false, false, 0, false},
        {"misaligned B only", 2, 96, 100, 68, 0, 2, 0, 0, 0, 0, false, false, 0, false},
        {"padded batch strides", 3, 100, 100, 100, 0, 0, 0, 3, 5, 7, false, false, 0, false},
        {"padded strides %4==0", 3, 64, 72, 40, 4, 8, 4, 4, 8, 12, false, false, 0, false},
        {"broadcast B (strideB=0)", 5, 100, 60, 40, 0, 0, 0, 0, 0, 0, false, true, 0, false},
        {"broadcast A (strideA=0)", 3, 33, 128, 64, 0, 0, 0, 0, 0, 0, true, false, 0, false},
        {"tall skinny", 1, 1000, 3, 17, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"short wide", 1, 3, 1000, 2, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"M=513 N=1 K=255", 2, 513, 1, 255, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"batch > 65535 (grid-z loop)", 70000, 3, 5, 7, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"batch 65537 4x4x4", 65537, 4, 4, 4, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"mid 300x200x129", 2, 300, 200, 129, 0, 0, 0, 0, 0, 0, false, false, 0, false},
        {"positive inputs", 2, 200, 136, 300, 0, 0, 0, 0, 0, 0, false, false, 1, false},
        {"exponent spread 2^+-8", 2, 160, 96, 200, 0, 0, 0, 0, 0, 0, false, false, 2, false},
        {"ints, K=4097", 1, 96, 80, 4097, 0, 0, 0, 0, 0, 0, false, false, 3, false},
        // 64-bit offsets: tile rows x ld beyond 2^32 elements
        {"huge K (64-bit offsets)", 1, 2, 3, 34000000, 0, 0, 0, 0, 0, 0, false, false, 3, true},
        {"huge N (64-bit offsets)", 1, 1, 540000000, 1, 0, 0, 0, 0, 0, 0, false, false, 3, true},
    };
    bool all = true;
    uint64_t seed = seed0;
    for (const Case& c : cases) {
        ++seed;
        if (c.huge && !g_huge) continue;
        if (g_small && (c.batch > 16 || (double)c.batch * c.M * c.N * (double)c.K > 5e7)) continue;
        all = run_case(c, seed) && all;
    }
    return all;
}

// ---------------------------------------------------------------- GPU compare ---
__global__ void fill_uniform_kernel(float* p, size_t n, unsigned long long seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long z = seed * 0xD1B54A32D192ED03ull + 0x9E3779B97F4A7C15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float u = (float)(z >> 40) * (1.0f / 16777216.0f);
        p[i] = 2.f * u - 1.f;
    }
}

// acc[0] += sum (x-y)^2, acc[1] += sum y^2, cnt[0] += #non-finite x
__global__ void compare_kernel(const float* x, const float* y, size_t n, double* acc, unsigned long long* cnt) {
    __shared__ double s_d[256], s_r[256];
    __shared__ unsigned long long s_n[256];
    double d2 = 0.0, r2 = 0.0;
    unsigned long long nn = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float o = x[i];
        const double r = (double)y[i];
        if (!isfinite(o)) { ++nn; continue; }
        d2 += ((double)o - r) * ((double)o - r);
        r2 += r * r;
    }
    const int t = threadIdx.x;
    s_d[t] = d2; s_r[t] = r2; s_n[t] = nn;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if (t < o) { s_d[t] += s_d[t + o]; s_r[t] += s_r[t + o]; s_n[t] += s_n[t + o]; }
        __syncthreads();
    }
    if (t == 0) {
        atomicAdd(&acc[0], s_d[0]);
        atomicAdd(&acc[1], s_r[0]);
        atomicAdd(&cnt[0], s_n[0]);
    }
}

// relative L2 difference of x against y over n elements; non-finite x -> 1e30
static double rel_diff(const float* x, const float* y, size_t n) {
    double* d_acc;
    unsigned long long* d_cnt;
    CK(cudaMalloc(&d_acc, 2 * sizeof(double)));
    CK(cudaMalloc(&d_cnt, sizeof(unsigned long long)));
    CK(cudaMemset(d_acc, 0, 2 * sizeof(double)));
    CK(cudaMemset(d_cnt, 0, sizeof(unsigned long long)));
    compare_kernel<<<1024, 256>>>(x, y, n, d_acc, d_cnt);
    CK(cudaGetLastError());
    double h[2];
    unsigned long long cnt;
    CK(cudaMemcpy(h, d_acc, sizeof(h), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&cnt, d_cnt, sizeof(cnt), cudaMemcpyDeviceToHost));
    CK(cudaFree(d_acc));
    CK(cudaFree(d_cnt));
    if (cnt) return 1e30;
    return h[1] > 0 ? sqrt(h[0] / h[1]) : sqrt(h[0]);
}

// ---------------------------------------------------------------- timing ---
struct Spread {
    float med, lo, hi;
};
template <class F>
static Spread time_ms(F f, int warm = 5, int iters = 20) {
    for (int i = 0; i < warm; ++i) f();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int i = 0; i < iters; ++i) {
        CK(cudaEventRecord(e0));
        f();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0.f;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    std::sort(t.begin(), t.end());
    return {0.5f * (t[iters / 2 - 1] + t[iters / 2]), t.front(), t.back()};
}

struct Timing {
    int batch;
    Spread opt, cub, opt2;
    double tf_opt, tf_cub;
    double rel_vs_cublas_tf32, rel_vs_cublas_fp32;  // -1 when not comparable (epilogue flags)
    float ms_sgemm;                                 // -1 when not measured
};

int main(int argc, char** argv) {
    bool quick = false;
    uint64_t seed = (uint64_t)time(nullptr);
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--small")) quick = g_small = true;
        else if (!strcmp(argv[i], "--huge")) g_huge = true;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], nullptr, 10);
        else {
            fprintf(stderr, "usage: %s [--quick] [--small] [--huge] [--seed N]\n", argv[0]);
            return 2;
        }
    }

    int dev = 0;
    CK(cudaSetDevice(dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    if ((size_t)OPTIML_SMEM_BYTES > prop.sharedMemPerBlockOptin) {
        printf("== config %s needs %d B shared memory, device allows %zu: SKIPPED as failure\n", HARNESS_NAME,
               (int)OPTIML_SMEM_BYTES, prop.sharedMemPerBlockOptin);
        return 1;
    }
    if (OPTIML_DYN_SMEM_BYTES > 0)
        CK(cudaFuncSetAttribute(optiml_matmul, cudaFuncAttributeMaxDynamicSharedMemorySize, OPTIML_DYN_SMEM_BYTES));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, optiml_matmul));
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, optiml_matmul, OPTIML_THREADS, OPTIML_DYN_SMEM_BYTES));
    printf("== config %s: BM=%d BN=%d BK=%d WM=%d WN=%d STAGES=%d THREADS=%d TRANS_A=%d TRANS_B=%d ALPHA=%d BETA=%d "
           "BIAS=%d ACT=%d ROUND=%d FRAG_PIPE=%d GROUP_M=%d MIN_BLOCKS=%d FRAG_LOAD=%d KLOOP=%d ZFILL=%d\n",
           HARNESS_NAME, OPTIML_BM, OPTIML_BN, OPTIML_BK, OPTIML_WM, OPTIML_WN, OPTIML_STAGES, OPTIML_THREADS,
           OPTIML_TRANS_A, OPTIML_TRANS_B, OPTIML_HAS_ALPHA, OPTIML_HAS_BETA, OPTIML_HAS_BIAS, OPTIML_ACT,
           OPTIML_TF32_ROUND, OPTIML_FRAG_PIPE, OPTIML_GROUP_M, OPTIML_MIN_BLOCKS, OPTIML_FRAG_LOAD, OPTIML_KLOOP,
           OPTIML_ZFILL);
    printf("   device %s (sm_%d%d, %d SMs); kernel: %d regs, %zu B static smem, %d B dynamic smem, %zu B local, "
           "%d blocks/SM; seed %llu\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, fa.numRegs, fa.sharedSizeBytes,
           (int)OPTIML_DYN_SMEM_BYTES, fa.localSizeBytes, occ, (unsigned long long)seed);

    printf("-- correctness (rel tol %.0e, scaled max-abs per case)\n", kRelTol);
    bool correct = run_correctness(seed * 1000);
    printf("-- correctness %s\n", correct ? "PASSED" : "FAILED");

    std::vector<Timing> timings;
    if (!quick) {
        const int M = 1024, N = 1024, K = 1024;
        const int batches[2] = {16, 256};
        const int maxb = 256;
        const size_t per = (size_t)M * K;  // all three matrices are 1024x1024
        float *A, *B, *C, *C2, *C3, *bias;
        CK(cudaMalloc(&A, per * maxb * 4));
        CK(cudaMalloc(&B, per * maxb * 4));
        CK(cudaMalloc(&C, per * maxb * 4));
        CK(cudaMalloc(&C2, per * maxb * 4));
        CK(cudaMalloc(&C3, per * 16 * 4));
        CK(cudaMalloc(&bias, N * 4));
        fill_uniform_kernel<<<2048, 256>>>(A, per * maxb, seed + 101);
        fill_uniform_kernel<<<2048, 256>>>(B, per * maxb, seed + 102);
        fill_uniform_kernel<<<2048, 256>>>(C, per * maxb, seed + 103);
        fill_uniform_kernel<<<2048, 256>>>(bias, N, seed + 104);
        CK(cudaGetLastError());
        CK(cudaMemset(C2, 0, per * maxb * 4));

        cublasHandle_t h;
        CB(cublasCreate(&h));
        const float one = 1.f, zero = 0.f;
        // Row-major C = op(A) op(B)  <=>  column-major C^T = op(B)^T op(A)^T:
        // pass B first, A second, m = N, n = M; the column-major view of a
        // row-major buffer is its transpose, so the row-major flags carry over.
        const cublasOperation_t opB = OPTIML_TRANS_B ? CUBLAS_OP_T : CUBLAS_OP_N;
        const cublasOperation_t opA = OPTIML_TRANS_A ? CUBLAS_OP_T : CUBLAS_OP_N;
        const int ldb = OPTIML_TRANS_B ? K : N;  // B stored N x K (ld K) or K x N (ld N)
        const int lda = OPTIML_TRANS_A ? M : K;  // A stored K x M (ld M) or M x K (ld K)
        const long long s = (long long)per;
        const bool plain = !OPTIML_HAS_ALPHA && !OPTIML_HAS_BETA && !OPTIML_HAS_BIAS && OPTIML_ACT == 0;

        // Bring the GPU to its steady clocks before the first measurement.
        {
            cudaEvent_t w0, w1;
            CK(cudaEventCreate(&w0));
            CK(cudaEventCreate(&w1));
            CK(cudaEventRecord(w0));
            for (float el = 0.f; el < 500.f;) {
                for (int r = 0; r < 4; ++r)
                    launch_optiml(A, B, C, bias, maxb, M, N, K, s, s, s, kAlpha, kBeta);
                CK(cudaEventRecord(w1));
                CK(cudaEventSynchronize(w1));
                CK(cudaEventElapsedTime(&el, w0, w1));
            }
            CK(cudaGetLastError());
            CK(cudaEventDestroy(w0));
            CK(cudaEventDestroy(w1));
        }
        for (int bi = 0; bi < 2; ++bi) {
            const int batch = batches[bi];
            auto run_opt = [&]() { launch_optiml(A, B, C, bias, batch, M, N, K, s, s, s, kAlpha, kBeta); };
            auto run_cub = [&]() {
                CB(cublasGemmStridedBatchedEx(h, opB, opA, N, M, K, &one, B, CUDA_R_32F, ldb, s, A, CUDA_R_32F, lda,
                                              s, &zero, C2, CUDA_R_32F, N, s, batch, CUBLAS_COMPUTE_32F_FAST_TF32,
                                              CUBLAS_GEMM_DEFAULT));
            };
            auto run_sgemm = [&]() {
                CB(cublasGemmStridedBatchedEx(h, opB, opA, N, M, K, &one, B, CUDA_R_32F, ldb, s, A, CUDA_R_32F, lda,
                                              s, &zero, C3, CUDA_R_32F, N, s, batch, CUBLAS_COMPUTE_32F_PEDANTIC,
                                              CUBLAS_GEMM_DEFAULT));
            };
            Timing t;
            t.batch = batch;
            t.opt = time_ms(run_opt);
            t.cub = time_ms(run_cub);
            t.opt2 = time_ms(run_opt);  // second sample of the same kernel: the noise floor
            t.ms_sgemm = batch <= 16 ? time_ms(run_sgemm).med : -1.f;
            const double flop = 2.0 * batch * (double)M * N * K;
            t.tf_opt = flop / (t.opt.med * 1e-3) / 1e12;
            t.tf_cub = flop / (t.cub.med * 1e-3) / 1e12;
            t.rel_vs_cublas_tf32 = t.rel_vs_cublas_fp32 = -1.0;
            if (plain) {
                // fresh outputs: poison, run each once, compare every element
                CK(cudaMemset(C, 0xFF, per * batch * 4));
                CK(cudaMemset(C2, 0xFF, per * batch * 4));
                run_opt();
                run_cub();
                CK(cudaGetLastError());
                CK(cudaDeviceSynchronize());
                t.rel_vs_cublas_tf32 = rel_diff(C, C2, per * batch);
                if (batch <= 16) {
                    CK(cudaMemset(C3, 0xFF, per * batch * 4));
                    run_sgemm();
                    CK(cudaDeviceSynchronize());
                    t.rel_vs_cublas_fp32 = rel_diff(C, C3, per * batch);
                }
                const bool ok = t.rel_vs_cublas_tf32 <= 2e-3 &&
                                (t.rel_vs_cublas_fp32 < 0 || t.rel_vs_cublas_fp32 <= kRelTol);
                if (!ok) {
                    printf("   FAIL full 1024^3 batch %d check: rel vs cuBLAS TF32 %.3e (<= 2e-3), vs cuBLAS FP32 "
                           "%.3e (<= 1e-3)\n",
                           batch, t.rel_vs_cublas_tf32, t.rel_vs_cublas_fp32);
                    correct = false;
                }
            }
            printf("   TIMING %-14s batch=%-4d %dx%dx%d  optiml %8.3f ms %7.2f TFLOP/s (min %.3f max %.3f, again "
                   "%.3f) | cublas_tf32 %8.3f ms %7.2f TFLOP/s (min %.3f max %.3f) | ratio %.3f | rel_vs_tf32 %s%.2e"
                   " rel_vs_fp32 %.2e | sgemm %.3f ms\n",
                   HARNESS_NAME, batch, M, N, K, t.opt.med, t.tf_opt, t.opt.lo, t.opt.hi, t.opt2.med, t.cub.med,
                   t.tf_cub, t.cub.lo, t.cub.hi, t.tf_opt / t.tf_cub, plain ? "" : "(n/a) ", t.rel_vs_cublas_tf32,
                   t.rel_vs_cublas_fp32, t.ms_sgemm);
            fflush(stdout);
            timings.push_back(t);
        }
        CB(cublasDestroy(h));
        CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(C2)); CK(cudaFree(C3)); CK(cudaFree(bias));
    }

    // Machine-readable summary: one line on stdout, and $OUT/tf32_<config>.json when OUT is set.
    std::string js;
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "{\"config\":\"%s\",\"BM\":%d,\"BN\":%d,\"BK\":%d,\"WM\":%d,\"WN\":%d,\"stages\":%d,\"threads\":%d,"
             "\"trans_a\":%d,\"trans_b\":%d,\"alpha\":%d,\"beta\":%d,\"bias\":%d,\"act\":%d,\"round\":%d,"
             "\"frag_pipe\":%d,\"group_m\":%d,\"frag_load\":%d,\"kloop\":%d,\"zfill\":%d,\"min_blocks\":%d,"
             "\"regs\":%d,\"local_bytes\":%zu,\"smem_bytes\":%d,\"blocks_per_sm\":%d,"
             "\"device\":\"%s\",\"seed\":%llu,\"correct\":%s,\"timings\":[",
             HARNESS_NAME, OPTIML_BM, OPTIML_BN, OPTIML_BK, OPTIML_WM, OPTIML_WN, OPTIML_STAGES, OPTIML_THREADS,
             OPTIML_TRANS_A, OPTIML_TRANS_B, OPTIML_HAS_ALPHA, OPTIML_HAS_BETA, OPTIML_HAS_BIAS, OPTIML_ACT,
             OPTIML_TF32_ROUND, OPTIML_FRAG_PIPE, OPTIML_GROUP_M, OPTIML_FRAG_LOAD, OPTIML_KLOOP, OPTIML_ZFILL,
             OPTIML_MIN_BLOCKS, fa.numRegs, fa.localSizeBytes,
             (int)OPTIML_SMEM_BYTES, occ, prop.name, (unsigned long long)seed, correct ? "true" : "false");
    js += buf;
    for (size_t i = 0; i < timings.size(); ++i) {
        const Timing& t = timings[i];
        snprintf(buf, sizeof(buf),
                 "%s{\"batch\":%d,\"M\":1024,\"N\":1024,\"K\":1024,\"optiml_ms\":%.4f,\"optiml_ms_min\":%.4f,"
                 "\"optiml_ms_max\":%.4f,\"optiml_ms_again\":%.4f,\"optiml_tflops\":%.3f,\"cublas_tf32_ms\":%.4f,"
                 "\"cublas_tf32_tflops\":%.3f,\"ratio\":%.4f,\"rel_vs_cublas_tf32\":%.3e,\"rel_vs_cublas_fp32\":%.3e,"
                 "\"sgemm_ms\":%.4f}",
                 i ? "," : "", t.batch, t.opt.med, t.opt.lo, t.opt.hi, t.opt2.med, t.tf_opt, t.cub.med, t.tf_cub,
                 t.tf_opt / t.tf_cub, t.rel_vs_cublas_tf32, t.rel_vs_cublas_fp32, t.ms_sgemm);
        js += buf;
    }
    js += "]}";
    printf("JSON %s\n", js.c_str());
    if (const char* out = getenv("OUT")) {
        if (*out) {
            const std::string path = std::string(out) + "/tf32_" + HARNESS_NAME + ".json";
            if (FILE* f = fopen(path.c_str(), "w")) {
                fprintf(f, "%s\n", js.c_str());
                fclose(f);
            } else {
                fprintf(stderr, "cannot write %s\n", path.c_str());
            }
        }
    }
    return correct ? 0 : 1;
}
