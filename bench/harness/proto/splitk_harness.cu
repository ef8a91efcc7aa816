// Split-K prototype harness: correctness (vs float64), bitwise determinism,
// "split 1 == product template" and timing against cuBLAS, for every split
// factor of one kernel configuration in one binary.
//
// Built by run_splitk.sh: splitk_inst.cu is compiled once per split factor
// (SK_TAG = 1 2 3 4 8 16 32, and 0 = the unmodified product template) with
// the config's -DOPTIML_* flags, and linked with this file (same flags).
//   ./splitk_h_<cfg> [--quick] [--huge] [--time]
//   --quick: correctness only; --huge: also the 64-bit offset cases (GBs);
//   --time: timing of the benchmark shapes (plain flag configs only)
// Exit code: 0 all good, 1 correctness/determinism failure, 2 CUDA/cuBLAS error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <string>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "splitk_common.h"

#ifndef HARNESS_NAME
#define HARNESS_NAME "unnamed"
#endif
#ifndef OPTIML_TRANS_A
#define OPTIML_TRANS_A 0
#endif
#ifndef OPTIML_TRANS_B
#define OPTIML_TRANS_B 0
#endif
#ifndef OPTIML_HAS_ALPHA
#define OPTIML_HAS_ALPHA 0
#endif
#ifndef OPTIML_HAS_BETA
#define OPTIML_HAS_BETA 0
#endif
#ifndef OPTIML_HAS_BIAS
#define OPTIML_HAS_BIAS 0
#endif
#ifndef OPTIML_ACT
#define OPTIML_ACT 0
#endif

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "CUDA error '%s' at %s:%d: %s\n", #x, __FILE__, __LINE__,            \
                    cudaGetErrorString(e_));                                                    \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)
#define CB(x)                                                                                   \
    do {                                                                                        \
        cublasStatus_t s_ = (x);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                      \
            fprintf(stderr, "cuBLAS error %d '%s' at %s:%d\n", (int)s_, #x, __FILE__, __LINE__); \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)

static const double kTol = 1e-5;
static const float kAlpha = 0.75f;  // used only when OPTIML_HAS_ALPHA
static const float kBeta = 0.5f;    // used only when OPTIML_HAS_BETA

// ---------------------------------------------------------------- helpers ---
__global__ void fill_uniform_kernel(float* p, size_t n, unsigned long long seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long z = seed * 0xD1B54A32D192ED03ull + 0x9E3779B97F4A7C15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float u = (float)(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
        p[i] = 2.f * u - 1.f;
    }
}
static void fill_uniform(float* p, size_t n, unsigned long long seed) {
    if (n == 0) return;
    fill_uniform_kernel<<<2048, 256>>>(p, n, seed);
    CK(cudaGetLastError());
}

// Naive reference: one warp per output (lanes split K, double accumulation,
// shuffle reduction), same epilogue.
__global__ void ref_gemm_kernel(const float* A, const float* B, const float* C0, const float* bias, double* R,
                                int batch, int M, int N, int K, long long sA, long long sB, long long sC,
                                float alpha, float beta) {
    const long long total = (long long)batch * M * N;
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long idx = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; idx < total; idx += warps) {
        const int n = (int)(idx % N);
        const int m = (int)((idx / N) % M);
        const long long z = idx / ((long long)M * N);
        const float* Az = A + z * sA;
        const float* Bz = B + z * sB;
        double acc = 0.0;
        for (int k = lane; k < K; k += 32) {
            const float a = OPTIML_TRANS_A ? Az[(long long)k * M + m] : Az[(long long)m * K + k];
            const float b = OPTIML_TRANS_B ? Bz[(long long)n * K + k] : Bz[(long long)k * N + n];
            acc += (double)a * (double)b;
        }
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane != 0) continue;
        double v = acc;
        if (OPTIML_HAS_ALPHA) v *= (double)alpha;
        if (OPTIML_HAS_BETA) v += (double)beta * (double)C0[z * sC + (long long)m * N + n];
        if (OPTIML_HAS_BIAS) v += (double)bias[n];
        if (OPTIML_ACT == 1) v = v > 0.0 ? v : 0.0;
        if (OPTIML_ACT == 2) v = 0.5 * v * (1.0 + erf(v * 0.70710678118654752440));
        R[idx] = v;
    }
}

// values in {-1, 0, 1}: products and (short) sums are exact in fp32
__global__ void fill_int_kernel(float* p, size_t n, unsigned long long seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long z = seed * 0xD1B54A32D192ED03ull + 0x9E3779B97F4A7C15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        p[i] = (float)((int)(z % 3ull) - 1);
    }
}

// acc[0] += sum (out-ref)^2, acc[1] += sum ref^2, acc[2] = max |out-ref| (as bits), cnt[0] += #NaN/Inf in out
template <typename T>
__global__ void compare_kernel(const float* out, long long sOut, const T* ref, long long sRef, int batch, int M,
                               int N, double* acc, unsigned long long* cnt) {
    __shared__ double s_d[256], s_r[256], s_m[256];
    __shared__ unsigned long long s_n[256];
    double d2 = 0.0, r2 = 0.0, mx = 0.0;
    unsigned long long nn = 0;
    const long long per = (long long)M * N;
    const long long total = (long long)batch * per;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const long long z = idx / per, r = idx % per;
        const float o = out[z * sOut + r];
        const double rf = (double)ref[z * sRef + r];
        if (!isfinite(o)) { ++nn; continue; }
        const double d = (double)o - rf;
        d2 += d * d;
        r2 += rf * rf;
        mx = fmax(mx, fabs(d));
    }
    const int t = threadIdx.x;
    s_d[t] = d2; s_r[t] = r2; s_m[t] = mx; s_n[t] = nn;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if (t < o) {
            s_d[t] += s_d[t + o]; s_r[t] += s_r[t + o];
            s_m[t] = fmax(s_m[t], s_m[t + o]); s_n[t] += s_n[t + o];
        }
        __syncthreads();
    }
    if (t == 0) {
        atomicAdd(&acc[0], s_d[0]);
        atomicAdd(&acc[1], s_r[0]);
        atomicMax(reinterpret_cast<unsigned long long*>(&acc[2]), (unsigned long long)__double_as_longlong(s_m[0]));
        atomicAdd(&cnt[0], s_n[0]);
    }
}

// Counts elements of the C allocation that are not outputs and changed bitwise.
__global__ void guard_kernel(const float* C, const float* C0, size_t total, long long off, long long sC, int batch,
                             long long per, unsigned long long* cnt) {
    unsigned long long bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const long long j = (long long)i - off;
        bool is_out = false;
        if (j >= 0) {
            const long long z = sC > 0 ? j / sC : 0;
            const long long r = sC > 0 ? j % sC : j;
            is_out = z < batch && r < per;
        }
        if (!is_out && __float_as_uint(C[i]) != __float_as_uint(C0[i])) ++bad;
    }
    if (bad) atomicAdd(cnt, bad);
}

struct Stats {
    double rel, maxabs;
    unsigned long long nans, guard;
};

template <typename T>
static Stats compare(const float* out, long long sOut, const T* ref, long long sRef, int batch, int M, int N) {
    double* d_acc;
    unsigned long long* d_cnt;
    CK(cudaMalloc(&d_acc, 3 * sizeof(double)));
    CK(cudaMalloc(&d_cnt, 2 * sizeof(unsigned long long)));
    CK(cudaMemset(d_acc, 0, 3 * sizeof(double)));
    CK(cudaMemset(d_cnt, 0, 2 * sizeof(unsigned long long)));
    compare_kernel<T><<<1024, 256>>>(out, sOut, ref, sRef, batch, M, N, d_acc, d_cnt);
    CK(cudaGetLastError());
    double h[3];
    unsigned long long c[2];
    CK(cudaMemcpy(h, d_acc, sizeof(h), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(c, d_cnt, sizeof(c), cudaMemcpyDeviceToHost));
    CK(cudaFree(d_acc));
    CK(cudaFree(d_cnt));
    Stats s;
    const double en = sqrt(h[0]), rn = sqrt(h[1]);
    s.rel = rn > 0 ? en / rn : en;
    s.maxabs = h[2];
    s.nans = c[0];
    s.guard = 0;
    return s;
}

static unsigned long long g_seed = 1;

// ------------------------------------------------------------ implementations ---
static std::vector<SkImpl> g_impls;  // [0] = product template, then S = 1, 2, 3, 4, 8, 16, 32
static const double kMaxWsBytes = 40e9;  // skip an implementation whose workspace would be larger

static const char* impl_name(const SkImpl& s) {
    static char buf[8][16];
    static int k = 0;
    char* b = buf[k++ & 7];
    if (s.product) snprintf(b, 16, "product");
    else snprintf(b, 16, "S%d", s.split);
    return b;
}

// Grows on demand; poisoned before each use.
static float* g_ws = nullptr;
static size_t g_ws_floats = 0;
static float* workspace(size_t n) {
    if (n > g_ws_floats) {
        if (g_ws) CK(cudaFree(g_ws));
        g_ws = nullptr;
        g_ws_floats = 0;
        CK(cudaMalloc(&g_ws, std::max<size_t>(n, 1) * 4));
        g_ws_floats = n;
    }
    return g_ws;
}

__global__ void bits_diff_kernel(const float* a, const float* b, size_t n, unsigned long long* cnt) {
    unsigned long long bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (__float_as_uint(a[i]) != __float_as_uint(b[i])) ++bad;
    if (bad) atomicAdd(cnt, bad);
}
static unsigned long long bits_diff(const float* a, const float* b, size_t n) {
    unsigned long long* d;
    unsigned long long h = 0;
    CK(cudaMalloc(&d, 8));
    CK(cudaMemset(d, 0, 8));
    bits_diff_kernel<<<1024, 256>>>(a, b, n, d);
    CK(cudaGetLastError());
    CK(cudaMemcpy(&h, d, 8, cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    return h;
}

// ------------------------------------------------------------ test cases ---
struct Case {
    const char* name;
    int batch, M, N, K;
    int offA, offB, offC;        // element offsets of the base pointers (1 -> only 4-byte aligned)
    long long padA, padB, padC;  // extra elements between batch items
    bool bcastA, bcastB;         // stride 0
    bool ints;                   // inputs in {-1,0,1} (exact; for the huge-K case)
    bool huge;                   // only with --huge
};

static int g_fail_corr = 0, g_fail_det = 0, g_fail_s1 = 0;

static bool run_case(const Case& c, unsigned long long seed) {
    const long long MK = (long long)c.M * c.K, KN = (long long)c.K * c.N, MN = (long long)c.M * c.N;
    const long long sA = c.bcastA ? 0 : MK + c.padA;
    const long long sB = c.bcastB ? 0 : KN + c.padB;
    const long long sC = MN + c.padC;
    const size_t nA = (size_t)(c.offA + (c.bcastA ? MK : (c.batch - 1) * sA + MK)) + 1;
    const size_t nB = (size_t)(c.offB + (c.bcastB ? KN : (c.batch - 1) * sB + KN)) + 1;
    const size_t nC = (size_t)(c.offC + (c.batch - 1) * sC + MN) + 67;  // + tail guard
    const size_t nR = (size_t)c.batch * MN + 1;

    float *A, *B, *C, *C0, *C1, *Cprod, *bias;
    double* R;
    CK(cudaMalloc(&A, nA * 4));
    CK(cudaMalloc(&B, nB * 4));
    CK(cudaMalloc(&C, nC * 4));
    CK(cudaMalloc(&C0, nC * 4));
    CK(cudaMalloc(&C1, nC * 4));
    CK(cudaMalloc(&Cprod, nC * 4));
    CK(cudaMalloc(&bias, ((size_t)c.N + 1) * 4));
    CK(cudaMalloc(&R, nR * 8));
    if (c.ints) {
        fill_int_kernel<<<2048, 256>>>(A, nA, seed * 4 + 0);
        fill_int_kernel<<<2048, 256>>>(B, nB, seed * 4 + 1);
        CK(cudaGetLastError());
    } else {
        fill_uniform(A, nA, seed * 4 + 0);
        fill_uniform(B, nB, seed * 4 + 1);
    }
    fill_uniform(bias, (size_t)c.N + 1, seed * 4 + 2);
    if (OPTIML_HAS_BETA)
        fill_uniform(C0, nC, seed * 4 + 3);
    else
        CK(cudaMemset(C0, 0xFF, nC * 4));  // 0xFFFFFFFF = NaN
    const float* Ap = A + c.offA;
    const float* Bp = B + c.offB;
    const float* C0p = C0 + c.offC;
    ref_gemm_kernel<<<8192, 256>>>(Ap, Bp, C0p, bias, R, c.batch, c.M, c.N, c.K, sA, sB, sC, kAlpha, kBeta);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    bool all = true;
    bool have_prod = false;
    for (const SkImpl& im : g_impls) {
        const size_t ws = sk_ws_floats(im, c.batch, c.M, c.N);
        if ((double)ws * 4 > kMaxWsBytes) {
            printf("  skip %-8s %-30s (workspace %.1f GB)\n", impl_name(im), c.name, ws * 4e-9);
            continue;
        }
        float* W = ws ? workspace(ws) : nullptr;
        unsigned long long diff_runs = 0;
        Stats s{};
        for (int run = 0; run < 2; ++run) {
            // run 0: W poisoned with NaN; run 1: with a huge finite value (-1.7e38-ish):
            // any unwritten partial changes the result bits -> caught as non-determinism
            if (ws) CK(cudaMemset(W, run == 0 ? 0xFF : 0xFE, ws * 4));
            CK(cudaMemcpy(C, C0, nC * 4, cudaMemcpyDeviceToDevice));
            CK(im.launch(Ap, Bp, C + c.offC, bias, W, c.batch, c.M, c.N, c.K, sA, sB, sC, kAlpha, kBeta, 0));
            CK(cudaDeviceSynchronize());
            if (run == 0) {
                s = compare<double>(C + c.offC, sC, R, MN, c.batch, c.M, c.N);
                unsigned long long* d_g;
                CK(cudaMalloc(&d_g, 8));
                CK(cudaMemset(d_g, 0, 8));
                guard_kernel<<<1024, 256>>>(C, C0, nC, c.offC, sC, c.batch, MN, d_g);
                CK(cudaGetLastError());
                CK(cudaMemcpy(&s.guard, d_g, 8, cudaMemcpyDeviceToHost));
                CK(cudaFree(d_g));
                CK(cudaMemcpy(C1, C, nC * 4, cudaMemcpyDeviceToDevice));
            } else {
                diff_runs = bits_diff(C, C1, nC);
            }
        }
        // split 1 must be the product template bit for bit
        long long diff_prod = -1;
        if (im.product) {
            CK(cudaMemcpy(Cprod, C1, nC * 4, cudaMemcpyDeviceToDevice));
            have_prod = true;
        } else if (im.split == 1 && have_prod) {
            diff_prod = (long long)bits_diff(C1, Cprod, nC);
        }
        const bool ok_corr = s.rel <= kTol && s.nans == 0 && s.guard == 0;
        const bool ok_det = diff_runs == 0;
        const bool ok_s1 = diff_prod <= 0;
        g_fail_corr += !ok_corr;
        g_fail_det += !ok_det;
        g_fail_s1 += !ok_s1;
        const bool ok = ok_corr && ok_det && ok_s1;
        all = all && ok;
        printf("  %-4s %-8s %-30s b=%-6d M=%-5d N=%-9d K=%-8d rel=%.3e maxabs=%.3e nan=%llu guard=%llu "
               "rerun_bitdiff=%llu%s\n",
               ok ? "ok" : "FAIL", impl_name(im), c.name, c.batch, c.M, c.N, c.K, s.rel, s.maxabs, s.nans, s.guard,
               diff_runs,
               diff_prod >= 0 ? (diff_prod == 0 ? " ==product" : " DIFFERS-FROM-PRODUCT") : "");
    }
    fflush(stdout);
    CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(C0)); CK(cudaFree(C1)); CK(cudaFree(Cprod));
    CK(cudaFree(bias)); CK(cudaFree(R));
    return all;
}

static bool g_huge = false;

static bool run_correctness() {
    // name, batch, M, N, K, offA, offB, offC, padA, padB, padC, bcastA, bcastB, ints, huge
    const Case cases[] = {
        {"odd small", 3, 77, 45, 33, 0, 0, 0, 0, 0, 0, false, false},
        {"1x1x1", 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, false, false},
        {"K = 0", 2, 5, 7, 0, 0, 0, 0, 0, 0, 0, false, false},
        {"K = 0 tile", 1, 130, 132, 0, 0, 0, 0, 0, 0, 0, false, false},
        {"K = 2 (< S)", 2, 65, 66, 2, 0, 0, 0, 0, 0, 0, false, false},
        {"K = 5 (< S, < BK)", 1, 33, 40, 5, 0, 0, 0, 0, 0, 0, false, false},
        {"K = 12 (T < S)", 1, 70, 68, 12, 0, 0, 0, 0, 0, 0, false, false},
        {"K < BK", 1, 130, 70, 3, 0, 0, 0, 0, 0, 0, false, false},
        {"odd N, K=1000", 1, 129, 257, 1000, 0, 0, 0, 0, 0, 0, false, false},
        {"K=1001 odd", 2, 131, 67, 1001, 0, 0, 0, 0, 0, 0, false, false},
        {"K=4100", 1, 256, 256, 4100, 0, 0, 0, 0, 0, 0, false, false},
        {"large K 16384", 1, 256, 256, 16384, 0, 0, 0, 0, 0, 0, false, false},
        {"1024^3 batch 2", 2, 1024, 1024, 1024, 0, 0, 0, 0, 0, 0, false, false},
        {"exact tile 128^3", 1, 128, 128, 128, 0, 0, 0, 0, 0, 0, false, false},
        {"N%4==0 partial tiles", 2, 256, 132, 20, 0, 0, 0, 0, 0, 0, false, false},
        {"misaligned ptrs (+1 elt)", 4, 64, 64, 64, 1, 1, 1, 0, 0, 0, false, false},
        {"misaligned C only", 2, 100, 96, 64, 0, 0, 3, 0, 0, 0, false, false},
        {"misaligned A only", 2, 96, 100, 68, 2, 0, 0, 0, 0, 0, false, false},
        {"padded batch strides", 3, 100, 100, 100, 0, 0, 0, 3, 5, 7, false, false},
        {"padded strides %4==0", 3, 64, 72, 40, 4, 8, 4, 4, 8, 12, false, false},
        {"broadcast B (strideB=0)", 5, 100, 60, 40, 0, 0, 0, 0, 0, 0, false, true},
        {"broadcast A (strideA=0)", 3, 33, 128, 64, 0, 0, 0, 0, 0, 0, true, false},
        {"tall skinny", 1, 1000, 3, 17, 0, 0, 0, 0, 0, 0, false, false},
        {"short wide", 1, 3, 1000, 2, 0, 0, 0, 0, 0, 0, false, false},
        {"M=513 N=1 K=255", 2, 513, 1, 255, 0, 0, 0, 0, 0, 0, false, false},
        {"batched 64x255x257x129", 64, 255, 257, 129, 0, 0, 0, 0, 0, 0, false, false},
        {"batch > 65535 (grid-z loop)", 70000, 3, 5, 7, 0, 0, 0, 0, 0, 0, false, false},
        {"batch 65537 K=40", 65537, 4, 4, 40, 0, 0, 0, 0, 0, 0, false, false},
        {"mid 300x200x129", 2, 300, 200, 129, 0, 0, 0, 0, 0, 0, false, false},
        // ld so large that per-thread offsets need 64 bits (wide path), and
        // split planes of W beyond 2^31 elements
        {"huge K (64-bit offsets)", 1, 2, 3, 34000000, 0, 0, 0, 0, 0, 0, false, false, true, true},
        {"huge N (64-bit offsets)", 1, 1, 540000000, 1, 0, 0, 0, 0, 0, 0, false, false, true, true},
    };
    bool all = true;
    unsigned long long seed = g_seed;
    for (const Case& c : cases) {
        ++seed;
        if (c.huge && !g_huge) continue;
        all = run_case(c, seed) && all;
    }
    return all;
}
// ---------------------------------------------------------------- timing ---
template <class F>
static float median_ms(F f, int warm = 5, int iters = 20) {
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
    return 0.5f * (t[iters / 2 - 1] + t[iters / 2]);
}


struct Shape {
    const char* name;
    int batch, M, N, K;
};

int main(int argc, char** argv) {
    bool quick = false, do_time = false;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--huge")) g_huge = true;
        else if (!strcmp(argv[i], "--time")) do_time = true;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) g_seed = strtoull(argv[++i], nullptr, 10);
    }
    if (quick) do_time = false;
    g_impls = {sk_impl_0(), sk_impl_1(), sk_impl_2(), sk_impl_3(), sk_impl_4(), sk_impl_8(), sk_impl_16(),
               sk_impl_32()};

    CK(cudaSetDevice(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("== config %s: BM=%d BN=%d BK=%d TM=%d TN=%d TRANS_A=%d TRANS_B=%d ALPHA=%d BETA=%d BIAS=%d ACT=%d seed=%llu\n",
           HARNESS_NAME, OPTIML_BM, OPTIML_BN, OPTIML_BK, OPTIML_TM, OPTIML_TN, OPTIML_TRANS_A, OPTIML_TRANS_B,
           OPTIML_HAS_ALPHA, OPTIML_HAS_BETA, OPTIML_HAS_BIAS, OPTIML_ACT, g_seed);
    printf("   device %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    for (const SkImpl& im : g_impls) {
        int regs, local, occ, rregs;
        im.attrs(&regs, &local, &occ, &rregs);
        printf("   %-8s matmul %d regs, %d B local, %d blocks/SM; reduce %d regs\n", impl_name(im), regs, local, occ,
               rregs);
    }

    printf("-- correctness (tol %.0e)\n", kTol);
    const bool correct = run_correctness();
    printf("-- correctness %s (failures: accuracy/guard %d, determinism %d, S1-vs-product %d)\n",
           correct ? "PASSED" : "FAILED", g_fail_corr, g_fail_det, g_fail_s1);

    const Shape shapes[] = {
        {"256x256x65536", 1, 256, 256, 65536},
        {"512x512x16384", 1, 512, 512, 16384},
        {"1000^3", 1, 1000, 1000, 1000},
        {"b64 255x257x129", 64, 255, 257, 129},
        {"4096^3", 1, 4096, 4096, 4096},
    };
    const int NS = sizeof(shapes) / sizeof(shapes[0]);
    const int NI = (int)g_impls.size();
    std::vector<float> ms((size_t)NS * NI, -1.f), ms_cub(NS, -1.f);
    std::vector<int> det((size_t)NS * NI, -1);
    bool det_ok = true;
    if (do_time) {
        size_t mA = 0, mB = 0, mC = 0, mW = 0;
        for (const Shape& s : shapes) {
            mA = std::max(mA, (size_t)s.batch * s.M * s.K);
            mB = std::max(mB, (size_t)s.batch * s.K * s.N);
            mC = std::max(mC, (size_t)s.batch * s.M * s.N);
            for (const SkImpl& im : g_impls) mW = std::max(mW, sk_ws_floats(im, s.batch, s.M, s.N));
        }
        float *A, *B, *C, *C2, *C3, *bias;
        CK(cudaMalloc(&A, mA * 4));
        CK(cudaMalloc(&B, mB * 4));
        CK(cudaMalloc(&C, mC * 4));
        CK(cudaMalloc(&C2, mC * 4));
        CK(cudaMalloc(&C3, mC * 4));
        CK(cudaMalloc(&bias, 4096 * 4));
        float* W = workspace(mW);
        fill_uniform(A, mA, 101);
        fill_uniform(B, mB, 102);
        fill_uniform(C, mC, 103);
        fill_uniform(bias, 4096, 104);
        cublasHandle_t h;
        CB(cublasCreate(&h));
        CB(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // plain FP32 (no TF32)
        const float one = 1.f, zero = 0.f;
        const cublasOperation_t opB = OPTIML_TRANS_B ? CUBLAS_OP_T : CUBLAS_OP_N;
        const cublasOperation_t opA = OPTIML_TRANS_A ? CUBLAS_OP_T : CUBLAS_OP_N;
        const bool plain = !OPTIML_HAS_ALPHA && !OPTIML_HAS_BETA && !OPTIML_HAS_BIAS && OPTIML_ACT == 0;
        // steady clocks before the first measurement
        {
            cudaEvent_t w0, w1;
            CK(cudaEventCreate(&w0));
            CK(cudaEventCreate(&w1));
            CK(cudaEventRecord(w0));
            for (float el = 0.f; el < 400.f;) {
                for (int r = 0; r < 4; ++r)
                    CK(g_impls[1].launch(A, B, C, bias, nullptr, 1, 4096, 4096, 1024, 0, 0, 0, kAlpha, kBeta, 0));
                CK(cudaEventRecord(w1));
                CK(cudaEventSynchronize(w1));
                CK(cudaEventElapsedTime(&el, w0, w1));
            }
            CK(cudaEventDestroy(w0));
            CK(cudaEventDestroy(w1));
        }
        for (int si = 0; si < NS; ++si) {
            const Shape& sh = shapes[si];
            const int M = sh.M, N = sh.N, K = sh.K, batch = sh.batch;
            const long long sA = (long long)M * K, sB = (long long)K * N, sC = (long long)M * N;
            const int ldb = OPTIML_TRANS_B ? K : N, lda = OPTIML_TRANS_A ? M : K;
            auto run_cub = [&]() {
                if (batch == 1)
                    CB(cublasSgemm(h, opB, opA, N, M, K, &one, B, ldb, A, lda, &zero, C2, N));
                else
                    CB(cublasSgemmStridedBatched(h, opB, opA, N, M, K, &one, B, ldb, sB, A, lda, sA, &zero, C2, N,
                                                 sC, batch));
            };
            const double flop = 2.0 * batch * (double)M * N * K;
            // fewer repetitions for the slow (unsplit, tiny grid) runs
            ms_cub[si] = median_ms(run_cub);
            printf("   TIMING %-16s cublas   %9.4f ms %6.2f TFLOP/s\n", sh.name, ms_cub[si],
                   flop / (ms_cub[si] * 1e-3) / 1e12);
            for (int ii = 0; ii < NI; ++ii) {
                const SkImpl& im = g_impls[ii];
                auto run_opt = [&]() {
                    CK(im.launch(A, B, C, bias, W, batch, M, N, K, sA, sB, sC, kAlpha, kBeta, 0));
                };
                const float t = median_ms(run_opt, 3, 12);
                ms[(size_t)si * NI + ii] = t;
                // determinism: two more runs, bitwise equal (C restored first when beta reads it)
                CK(cudaMemcpy(C3, C, (size_t)batch * sC * 4, cudaMemcpyDeviceToDevice));
                run_opt();
                CK(cudaDeviceSynchronize());
                float* Ckeep = nullptr;
                CK(cudaMalloc(&Ckeep, (size_t)batch * sC * 4));
                CK(cudaMemcpy(Ckeep, C, (size_t)batch * sC * 4, cudaMemcpyDeviceToDevice));
                CK(cudaMemcpy(C, C3, (size_t)batch * sC * 4, cudaMemcpyDeviceToDevice));
                run_opt();
                CK(cudaDeviceSynchronize());
                const unsigned long long d = bits_diff(C, Ckeep, (size_t)batch * sC);
                CK(cudaFree(Ckeep));
                det[(size_t)si * NI + ii] = d == 0;
                det_ok = det_ok && d == 0;
                double rel = -1.0;
                if (plain) {
                    run_cub();
                    CK(cudaDeviceSynchronize());
                    Stats st = compare<float>(C, sC, C2, sC, batch, M, N);
                    rel = st.nans ? 1e30 : st.rel;
                }
                printf("   TIMING %-16s %-8s %9.4f ms %6.2f TFLOP/s | x%.3f of cublas | rel_vs_cublas %.2e | "
                       "deterministic %s\n",
                       sh.name, impl_name(im), t, flop / (t * 1e-3) / 1e12, ms_cub[si] / t, rel,
                       d == 0 ? "yes" : "NO");
                fflush(stdout);
            }
        }
        CB(cublasDestroy(h));
        CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(C2)); CK(cudaFree(C3)); CK(cudaFree(bias));

        printf("-- summary %s: speed vs cuBLAS (cublas_ms / ms; >1 = faster), best split marked *\n", HARNESS_NAME);
        printf("   %-16s %9s", "shape", "cublas_ms");
        for (const SkImpl& im : g_impls) printf(" %8s", impl_name(im));
        printf("\n");
        for (int si = 0; si < NS; ++si) {
            int best = 1;
            for (int ii = 1; ii < NI; ++ii)
                if (ms[(size_t)si * NI + ii] < ms[(size_t)si * NI + best]) best = ii;
            printf("   %-16s %9.4f", shapes[si].name, ms_cub[si]);
            for (int ii = 0; ii < NI; ++ii)
                printf(" %7.3f%s", ms_cub[si] / ms[(size_t)si * NI + ii], ii == best ? "*" : " ");
            printf("\n");
        }
        printf("JSON {\"config\":\"%s\",\"BM\":%d,\"BN\":%d,\"BK\":%d,\"TM\":%d,\"TN\":%d,\"correct\":%s,"
               "\"deterministic\":%s,\"shapes\":[",
               HARNESS_NAME, OPTIML_BM, OPTIML_BN, OPTIML_BK, OPTIML_TM, OPTIML_TN, correct ? "true" : "false",
               det_ok ? "true" : "false");
        for (int si = 0; si < NS; ++si) {
            printf("%s{\"shape\":\"%s\",\"batch\":%d,\"M\":%d,\"N\":%d,\"K\":%d,\"cublas_ms\":%.5f,\"ms\":{", si ? "," : "",
                   shapes[si].name, shapes[si].batch, shapes[si].M, shapes[si].N, shapes[si].K, ms_cub[si]);
            for (int ii = 0; ii < NI; ++ii)
                printf("%s\"%s\":%.5f", ii ? "," : "", impl_name(g_impls[ii]), ms[(size_t)si * NI + ii]);
            printf("}}");
        }
        printf("]}\n");
    }
    if (g_ws) CK(cudaFree(g_ws));
    return (correct && det_ok) ? 0 : 1;
}
