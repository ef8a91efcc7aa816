// Correctness + bandwidth harness for the optiml fp32 GEMV kernel (gemv_f32.cu).
//
// One binary per kernel configuration: the OPTIML_* / OPTIML_GEMV_* macros are
// passed with -D (see run_gemv.sh and gemv_configs.txt).
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I ../../../optiml-build/src/cuda -DHARNESS_NAME='"default"' gemv_harness.cu -lcublas -o h
//   ./h            correctness (fp64 host reference) + timing
//   ./h --quick    correctness only
//   ./h --small    small correctness cases only (for compute-sanitizer)
//   ./h --no-flush do not flush L2 between timed runs
//   ./h --light    skip the two ~67M-MAC odd correctness cases (host reference time)
//
// Correctness: inputs uniform[-1,1) (splitmix64, fresh per case) generated on
// the host, reference in double on the host with the generic matmul index
// formula (independent of the kernel's dot / column mode logic). Checks:
// relative L2 error <= 1e-5 (reference norm floored at 1e-3 x the norm of the
// per-element magnitudes below); per element |out - ref| <= 1e-5 * (|alpha| *
// sum_k |a_k b_k| + |beta c_old| + |bias|) * (1.2 for gelu) + 1e-6 |ref|;
// every output finite; every element of the C allocation that is not an
// output (64-float head margin, batch padding, 67-float tail) bit-identical.
// Timing: CUDA events, 3 warm-ups, median of 21 runs, L2 flushed (256 MiB
// memset) before every timed run; every benchmark matrix is >= 256 MiB
// anyway (H200 L2 = 50 MB). Same-run references: a float4 copy kernel and a
// float4 read-only (sum) kernel moving the same byte count, and cuBLAS
// (cublasSgemv / cublasSgemvStridedBatched, FP32 math, same alpha/beta).
// Exit code: 0 all good, 1 correctness failure, 2 CUDA/cuBLAS error.
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

#include "../../../optiml-build/src/families/matmul/cuda/gemv_f32.cu"  // the product template
#include "gemv_launch.h"

#ifndef HARNESS_NAME
#define HARNESS_NAME "unnamed"
#endif

#include "../check.cuh"

static const double kTol = 1e-5;
static const float kAlpha = 0.75f;  // used only when OPTIML_HAS_ALPHA
static const float kBeta = 0.5f;    // used only when OPTIML_HAS_BETA
static const long long kHead = 64;  // guard floats before C
static const long long kTail = 67;  // guard floats after the last output

static void launch_gemv(const float* A, const float* B, float* C, const float* bias, int batch, int M, int N, int K,
                        long long sA, long long sB, long long sC, float alpha, float beta, int gx_cap = 0,
                        cudaStream_t st = 0) {
    if (batch <= 0 || !gemv_applicable(M, N)) return;
    optiml_gemv<<<gemv_grid(batch, M, N, gx_cap), OPTIML_GEMV_THREADS, 0, st>>>(A, B, C, bias, batch, M, N, K, sA,
                                                                                 sB, sC, alpha, beta);
}

// ------------------------------------------------------------ host data ---
static uint64_t g_rng = 0x1234567ull;
static inline float urand() {  // splitmix64 -> uniform [-1, 1)
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}
static void fill_host(std::vector<float>& v) {
    for (float& f : v) f = urand();
}

static double gelu_d(double v) { return 0.5 * v * (1.0 + erf(v * 0.70710678118654752440)); }

// ------------------------------------------------------------ test cases ---
struct Case {
    const char* name;
    int batch, M, N, K;
    int offA, offB, offC;        // element offsets of the base pointers (odd -> only 4-byte aligned)
    long long padA, padB, padC;  // extra elements between batch items
    bool bcastA, bcastB;         // stride 0
    int gx_cap;                  // > 0: launch with grid.x capped (tile loop)
};

static bool run_case(const Case& c) {
    const int L = gemv_len(c.M, c.N);
    const long long MK = (long long)c.M * c.K, KN = (long long)c.K * c.N, MN = (long long)c.M * c.N;
    const long long sA = c.bcastA ? 0 : MK + c.padA;
    const long long sB = c.bcastB ? 0 : KN + c.padB;
    const long long sC = MN + c.padC;
    const size_t nA = (size_t)(c.offA + (c.bcastA ? MK : (c.batch - 1) * sA + MK)) + 1;
    const size_t nB = (size_t)(c.offB + (c.bcastB ? KN : (c.batch - 1) * sB + KN)) + 1;
    const size_t nC = (size_t)(kHead + c.offC + (c.batch - 1) * sC + MN + kTail);
    std::vector<float> hA(nA), hB(nB), hC0(nC), hbias((size_t)c.N + 1), hC(nC);
    fill_host(hA);
    fill_host(hB);
    fill_host(hbias);
    if (OPTIML_HAS_BETA)
        fill_host(hC0);
    else
        for (float& f : hC0) { uint32_t u = 0xFFFFFFFFu; memcpy(&f, &u, 4); }  // NaN poison

    float *A, *B, *C, *bias;
    CK(cudaMalloc(&A, nA * 4));
    CK(cudaMalloc(&B, nB * 4));
    CK(cudaMalloc(&C, nC * 4));
    CK(cudaMalloc(&bias, hbias.size() * 4));
    CK(cudaMemcpy(A, hA.data(), nA * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, hB.data(), nB * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(C, hC0.data(), nC * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(bias, hbias.data(), hbias.size() * 4, cudaMemcpyHostToDevice));
    const long long c0 = kHead + c.offC;
    launch_gemv(A + c.offA, B + c.offB, C + c0, bias, c.batch, c.M, c.N, c.K, sA, sB, sC, kAlpha, kBeta, c.gx_cap);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hC.data(), C, nC * 4, cudaMemcpyDeviceToHost));
    CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(bias));

    // reference + checks
    const float* Ap = hA.data() + c.offA;
    const float* Bp = hB.data() + c.offB;
    std::vector<char> is_out(nC, 0);
    double e2 = 0, r2 = 0, s2 = 0, maxabs = 0, worst = 0;  // worst = max |err| / bound
    unsigned long long nonfinite = 0, over = 0, guard = 0;
    for (int z = 0; z < c.batch; ++z) {
        const float* Az = Ap + (long long)z * sA;
        const float* Bz = Bp + (long long)z * sB;
        for (int m = 0; m < c.M; ++m)
            for (int n = 0; n < c.N; ++n) {
                double acc = 0, absacc = 0;
                for (int k = 0; k < c.K; ++k) {
                    const double a = OPTIML_TRANS_A ? Az[(long long)k * c.M + m] : Az[(long long)m * c.K + k];
                    const double b = OPTIML_TRANS_B ? Bz[(long long)n * c.K + k] : Bz[(long long)k * c.N + n];
                    acc += a * b;
                    absacc += fabs(a * b);
                }
                const long long ci = c0 + (long long)z * sC + (long long)m * c.N + n;
                double v = acc, scale = absacc;
                if (OPTIML_HAS_ALPHA) { v *= (double)kAlpha; scale *= fabs((double)kAlpha); }
                if (OPTIML_HAS_BETA) { v += (double)kBeta * hC0[ci]; scale += fabs((double)kBeta * hC0[ci]); }
                if (OPTIML_HAS_BIAS) { v += (double)hbias[n]; scale += fabs((double)hbias[n]); }
                if (OPTIML_ACT == 1) v = v > 0 ? v : 0;
                if (OPTIML_ACT == 2) { v = gelu_d(v); scale *= 1.2; }
                is_out[ci] = 1;
                const float o = hC[ci];
                if (!std::isfinite(o)) { ++nonfinite; continue; }
                const double d = fabs((double)o - v);
                const double bound = kTol * scale + 1e-6 * fabs(v);
                e2 += d * d;
                r2 += v * v;
                s2 += scale * scale;
                maxabs = std::max(maxabs, d);
                if (d > bound) ++over;
                if (bound > 0) worst = std::max(worst, d / bound);
                else if (d > 0) worst = 1e30;
            }
    }
    for (size_t i = 0; i < nC; ++i)
        if (!is_out[i] && memcmp(&hC[i], &hC0[i], 4) != 0) ++guard;
    // relative L2; the reference norm is floored at 1e-3 x the norm of the
    // magnitudes, so a few outputs squashed to ~0 by gelu (whose fp32 formula
    // cancels there, exactly as in the matmul template) do not make it meaningless
    const double den = std::max(sqrt(r2), 1e-3 * sqrt(s2));
    const double rel = den > 0 ? sqrt(e2) / den : sqrt(e2);
    const bool ok = rel <= kTol && nonfinite == 0 && over == 0 && guard == 0;
    printf("  %-4s %-36s %s batch=%-6d M=%-5d N=%-5d K=%-5d rel=%.2e maxabs=%.2e worst/bound=%.3f nonfinite=%llu "
           "over=%llu guard=%llu\n",
           ok ? "ok" : "FAIL", c.name, gemv_is_dot(c.M, c.N) ? "dot" : "col", c.batch, c.M, c.N, c.K, rel, maxabs,
           worst, nonfinite, over, guard);
    (void)L;
    return ok;
}

static bool g_small = false;
static bool g_light = false;  // --light: skip the ~67M-MAC odd cases (knob-variant configs)

static bool run_correctness() {
    // name, batch, M, N, K, offA, offB, offC, padA, padB, padC, bcastA, bcastB, gx_cap
    const Case cases[] = {
        // N == 1 (matrix x vector)
        {"mv odd small", 3, 77, 1, 33, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv 1x1x1", 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv M=1 N=1 K=1000 (dot)", 2, 1, 1, 1000, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv K=0", 2, 5, 1, 0, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv K=1", 2, 70, 1, 1, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv K=2", 1, 70, 1, 2, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv K=3", 1, 70, 1, 3, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv K=5", 1, 70, 1, 5, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv K=7", 1, 70, 1, 7, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv M=513 K=255", 2, 513, 1, 255, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv 1024^2 batch 4", 4, 1024, 1, 1024, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv misaligned A (+1)", 2, 100, 1, 1024, 1, 0, 0, 0, 0, 0, false, false, 0},
        {"mv misaligned B (+1)", 2, 100, 1, 1024, 0, 1, 0, 0, 0, 0, false, false, 0},
        {"mv misaligned C (+1)", 2, 100, 1, 1024, 0, 0, 1, 0, 0, 0, false, false, 0},
        {"mv all +1, K=1027", 3, 129, 1, 1027, 1, 1, 1, 0, 0, 0, false, false, 0},
        {"mv A+2 B+3 K=1030", 2, 131, 1, 1030, 2, 3, 0, 0, 0, 0, false, false, 0},
        {"mv padded strides", 3, 100, 1, 100, 0, 0, 0, 3, 5, 7, false, false, 0},
        {"mv padded strides %4", 3, 64, 1, 256, 4, 8, 4, 4, 8, 12, false, false, 0},
        {"mv broadcast B", 5, 100, 1, 300, 0, 0, 0, 0, 0, 0, false, true, 0},
        {"mv broadcast A", 3, 100, 1, 300, 0, 0, 0, 0, 0, 0, true, false, 0},
        {"mv long rows M=37 K=16387", 1, 37, 1, 16387, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv grid.x capped at 3", 2, 1000, 1, 300, 0, 0, 0, 0, 0, 0, false, false, 3},
        {"mv batch 70000 (grid-z loop)", 70000, 3, 1, 5, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv batch 65537", 65537, 4, 1, 8, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"mv odd 8191x8193", 1, 8191, 1, 8193, 0, 0, 0, 0, 0, 0, false, false, 0},
        // M == 1 (vector x matrix)
        {"vm odd small", 3, 1, 77, 33, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"vm K=0", 2, 1, 5, 0, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"vm K=1", 2, 1, 70, 1, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"vm K=3", 1, 1, 70, 3, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"vm N=513 K=255", 2, 1, 513, 255, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"vm 1024^2 batch 4", 4, 1, 1024, 1024, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"vm all +1, K=1027", 3, 1, 129, 1027, 1, 1, 1, 0, 0, 0, false, false, 0},
        {"vm misaligned B (+1) N%4=0", 2, 1, 256, 300, 0, 1, 0, 0, 0, 0, false, false, 0},
        {"vm padded strides", 3, 1, 100, 100, 0, 0, 0, 3, 5, 7, false, false, 0},
        {"vm broadcast B", 5, 1, 100, 300, 0, 0, 0, 0, 0, 0, false, true, 0},
        {"vm grid.x capped at 2", 2, 1, 1000, 300, 0, 0, 0, 0, 0, 0, false, false, 2},
        {"vm batch 70000", 70000, 1, 3, 5, 0, 0, 0, 0, 0, 0, false, false, 0},
        {"vm odd 8193x8191", 1, 1, 8193, 8191, 0, 0, 0, 0, 0, 0, false, false, 0},
    };
    bool all = true;
    for (const Case& c : cases) {
        const double macs = (double)c.batch * c.M * c.N * (double)c.K;
        if ((g_small && macs > 5e6) || (g_light && macs > 2e7)) continue;
        all = run_case(c) && all;
    }
    return all;
}

// ------------------------------------------------------ reference kernels ---
__global__ void fill_uniform_kernel(float* p, size_t n, unsigned long long seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long z = seed * 0xD1B54A32D192ED03ull + 0x9E3779B97F4A7C15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        p[i] = (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
    }
}

// simple float4 grid-stride copy, 4 independent loads in flight per thread
__global__ void copy4_kernel(const float4* __restrict__ s, float4* __restrict__ d, size_t n) {
    const size_t st = (size_t)gridDim.x * blockDim.x;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i + 3 * st < n; i += 4 * st) {
        const float4 a = s[i], b = s[i + st], c = s[i + 2 * st], e = s[i + 3 * st];
        d[i] = a; d[i + st] = b; d[i + 2 * st] = c; d[i + 3 * st] = e;
    }
    for (; i < n; i += st) d[i] = s[i];
}

// read-only float4 stream (sum), one store per thread only if the sum is a magic value
__global__ void read4_kernel(const float4* __restrict__ s, float* __restrict__ d, size_t n) {
    const size_t st = (size_t)gridDim.x * blockDim.x;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    float acc = 0.f;
    for (; i + 3 * st < n; i += 4 * st) {
        const float4 a = __ldg(s + i), b = __ldg(s + i + st), c = __ldg(s + i + 2 * st), e = __ldg(s + i + 3 * st);
        acc += (a.x + a.y + a.z + a.w) + (b.x + b.y + b.z + b.w) + (c.x + c.y + c.z + c.w) + (e.x + e.y + e.z + e.w);
    }
    for (; i < n; i += st) { const float4 a = __ldg(s + i); acc += a.x + a.y + a.z + a.w; }
    if (acc == 1234567.f) d[0] = acc;
}

// ---------------------------------------------------------------- timing ---
static float* g_flush = nullptr;
static const size_t kFlushBytes = 256ull << 20;
static bool g_do_flush = true;

template <class F>
static float median_ms(F f, int warm = 3, int iters = 21) {
    for (int i = 0; i < warm; ++i) f();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int i = 0; i < iters; ++i) {
        if (g_do_flush) CK(cudaMemsetAsync(g_flush, i & 0xFF, kFlushBytes));
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
    return t[iters / 2];
}

struct Shape {
    const char* name;
    int batch, M, N, K;
};

struct Result {
    std::string shape;
    bool dot;
    double bytes, ms, gbps, copy_gbps, read_gbps, cub_ms, rel_cub;
};

int main(int argc, char** argv) {
    bool quick = false;
    for (int i = 1; i < argc; ++i)
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--small")) quick = g_small = true;
        else if (!strcmp(argv[i], "--no-flush")) g_do_flush = false;
        else if (!strcmp(argv[i], "--light")) g_light = true;

    CK(cudaSetDevice(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, optiml_gemv));
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, optiml_gemv, OPTIML_GEMV_THREADS, 0));
    printf("== config %s: THREADS=%d UNROLL=%d RPW=%d KSPLIT=%d COL_TX=%d LOAD=%d MIN_BLOCKS=%d (dot rows/block %d, "
           "col cols/block %d) TRANS_A=%d TRANS_B=%d ALPHA=%d BETA=%d BIAS=%d ACT=%d\n",
           HARNESS_NAME, OPTIML_GEMV_THREADS, OPTIML_GEMV_UNROLL, OPTIML_GEMV_RPW, OPTIML_GEMV_KSPLIT,
           OPTIML_GEMV_COL_TX, OPTIML_GEMV_LOAD, OPTIML_GEMV_MIN_BLOCKS, OPTIML_GEMV_DOT_ROWS, OPTIML_GEMV_COL_COLS,
           OPTIML_TRANS_A, OPTIML_TRANS_B, OPTIML_HAS_ALPHA, OPTIML_HAS_BETA, OPTIML_HAS_BIAS, OPTIML_ACT);
    printf("   device %s (sm_%d%d, %d SMs, L2 %d MB); kernel: %d regs, %zu B static smem, %zu B local, %d blocks/SM\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.l2CacheSize >> 20, fa.numRegs,
           fa.sharedSizeBytes, fa.localSizeBytes, occ);

    printf("-- correctness (tol %.0e, fp64 host reference)\n", kTol);
    const bool correct = run_correctness();
    printf("-- correctness %s\n", correct ? "PASSED" : "FAILED");

    std::vector<Result> results;
    if (!quick) {
        const Shape shapes[] = {
            {"mv 16384x16384", 1, 16384, 1, 16384},
            {"mv 8192x8192", 1, 8192, 1, 8192},
            {"mv 4096x16384", 1, 4096, 1, 16384},
            {"mv 16384x4096", 1, 16384, 1, 4096},
            {"vm 1x16384 K16384", 1, 1, 16384, 16384},
            {"mv b64 1024x1024", 64, 1024, 1, 1024},
            {"mv odd 8191x8193", 1, 8191, 1, 8193},
            {"vm odd 1x8193 K8191", 1, 1, 8193, 8191},
        };
        size_t maxW = 0, maxX = 0, maxY = 0;
        for (const Shape& s : shapes) {
            const int L = gemv_len(s.M, s.N);
            maxW = std::max(maxW, (size_t)s.batch * L * (size_t)s.K);
            maxX = std::max(maxX, (size_t)s.batch * s.K);
            maxY = std::max(maxY, (size_t)s.batch * L);
        }
        float *W, *X, *Y, *Y2, *Yinit, *bias, *cs, *cd;
        CK(cudaMalloc(&W, maxW * 4));
        CK(cudaMalloc(&X, maxX * 4));
        CK(cudaMalloc(&Y, maxY * 4));
        CK(cudaMalloc(&Y2, maxY * 4));
        CK(cudaMalloc(&Yinit, maxY * 4));
        CK(cudaMalloc(&bias, maxY * 4));
        CK(cudaMalloc((void**)&g_flush, kFlushBytes));
        // copy / read reference buffers: a copy of bytes/2 moves `bytes`
        const size_t maxCopy = (maxW + maxX + 2 * maxY) * 4 / 2 + 64;
        CK(cudaMalloc(&cs, maxCopy));
        CK(cudaMalloc(&cd, maxCopy));
        fill_uniform_kernel<<<4096, 256>>>(W, maxW, 11);
        fill_uniform_kernel<<<256, 256>>>(X, maxX, 12);
        fill_uniform_kernel<<<256, 256>>>(Yinit, maxY, 13);
        fill_uniform_kernel<<<256, 256>>>(bias, maxY, 14);
        fill_uniform_kernel<<<4096, 256>>>(cs, maxCopy / 4, 15);
        CK(cudaGetLastError());
        CK(cudaMemcpy(Y, Yinit, maxY * 4, cudaMemcpyDeviceToDevice));

        cublasHandle_t h;
        CB(cublasCreate(&h));
        CB(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
        const float alpha = OPTIML_HAS_ALPHA ? kAlpha : 1.f;
        const float beta = OPTIML_HAS_BETA ? kBeta : 0.f;
        const bool cmp_cub = !OPTIML_HAS_BIAS && OPTIML_ACT == 0;  // cuBLAS computes the same thing
        const int sms = prop.multiProcessorCount;

        // steady clocks before the first measurement
        {
            cudaEvent_t w0, w1;
            CK(cudaEventCreate(&w0));
            CK(cudaEventCreate(&w1));
            CK(cudaEventRecord(w0));
            for (float el = 0.f; el < 300.f;) {
                for (int r = 0; r < 8; ++r) copy4_kernel<<<sms * 8, 256>>>((const float4*)cs, (float4*)cd, maxCopy / 32);
                CK(cudaEventRecord(w1));
                CK(cudaEventSynchronize(w1));
                CK(cudaEventElapsedTime(&el, w0, w1));
            }
            CK(cudaEventDestroy(w0));
            CK(cudaEventDestroy(w1));
        }

        printf("-- timing (median of 21 after 3 warm-ups, L2 %s; GB/s = 1e9 B/s)\n",
               g_do_flush ? "flushed before each run" : "not flushed");
        for (const Shape& s : shapes) {
            const int L = gemv_len(s.M, s.N);
            const bool dot = gemv_is_dot(s.M, s.N);
            const bool colvec = s.N == 1;
            const long long sW = (long long)L * s.K, sX = s.K, sY = L;
            const float* A = colvec ? W : X;
            const float* B = colvec ? X : W;
            const long long sA = colvec ? sW : sX, sB = colvec ? sX : sW;
            const double bytes =
                4.0 * s.batch * ((double)L * s.K + s.K + L + (OPTIML_HAS_BETA ? L : 0));
            auto run_opt = [&]() { launch_gemv(A, B, Y, bias, s.batch, s.M, s.N, s.K, sA, sB, sY, kAlpha, kBeta); };
            // cuBLAS is column-major: a row-major L x K matrix (dot mode) is a
            // column-major K x L one -> OP_T; a row-major K x L (column mode)
            // is column-major L x K -> OP_N.
            const cublasOperation_t op = dot ? CUBLAS_OP_T : CUBLAS_OP_N;
            const int cm = dot ? s.K : L, cn = dot ? L : s.K, lda = dot ? s.K : L;
            auto run_cub = [&]() {
                if (s.batch == 1)
                    CB(cublasSgemv(h, op, cm, cn, &alpha, W, lda, X, 1, &beta, Y2, 1));
                else
                    CB(cublasSgemvStridedBatched(h, op, cm, cn, &alpha, W, lda, sW, X, 1, sX, &beta, Y2, 1, sY,
                                                 s.batch));
            };
            const size_t n4c = (size_t)(bytes / 32);  // float4s copied: read + write = bytes
            const size_t n4r = std::min((size_t)(bytes / 16), maxW / 4);  // float4s read (from W)
            auto run_copy = [&]() { copy4_kernel<<<sms * 8, 256>>>((const float4*)cs, (float4*)cd, n4c); };
            auto run_read = [&]() {
                read4_kernel<<<sms * 8, 256>>>((const float4*)W, cd, n4r);
            };
            Result r;
            r.shape = s.name;
            r.dot = dot;
            r.bytes = bytes;
            r.ms = median_ms(run_opt);
            r.cub_ms = median_ms(run_cub);
            const double copy_ms = median_ms(run_copy);
            const double read_ms = median_ms(run_read);
            r.gbps = bytes / (r.ms * 1e-3) / 1e9;
            r.copy_gbps = (double)n4c * 32 / (copy_ms * 1e-3) / 1e9;
            r.read_gbps = (double)n4r * 16 / (read_ms * 1e-3) / 1e9;
            r.rel_cub = -1;
            if (cmp_cub) {
                CK(cudaMemcpy(Y, Yinit, (size_t)s.batch * L * 4, cudaMemcpyDeviceToDevice));
                CK(cudaMemcpy(Y2, Yinit, (size_t)s.batch * L * 4, cudaMemcpyDeviceToDevice));
                run_opt();
                run_cub();
                CK(cudaDeviceSynchronize());
                std::vector<float> y1((size_t)s.batch * L), y2((size_t)s.batch * L);
                CK(cudaMemcpy(y1.data(), Y, y1.size() * 4, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(y2.data(), Y2, y2.size() * 4, cudaMemcpyDeviceToHost));
                double e2 = 0, r2 = 0;
                for (size_t i = 0; i < y1.size(); ++i) {
                    const double d = (double)y1[i] - y2[i];
                    e2 += std::isfinite(y1[i]) ? d * d : 1e30;
                    r2 += (double)y2[i] * y2[i];
                }
                r.rel_cub = sqrt(e2 / std::max(r2, 1e-300));
            }
            CK(cudaGetLastError());
            printf("   TIMING %-10s %-22s %s %8.4f ms %7.1f GB/s | copy %7.1f GB/s frac %.3f | read %7.1f GB/s frac "
                   "%.3f | cublas %8.4f ms ratio(cub/ours) %.3f | rel_vs_cublas %s%.1e\n",
                   HARNESS_NAME, s.name, dot ? "dot" : "col", r.ms, r.gbps, r.copy_gbps, r.gbps / r.copy_gbps,
                   r.read_gbps, r.gbps / r.read_gbps, r.cub_ms, r.cub_ms / r.ms, cmp_cub ? "" : "(n/a) ", r.rel_cub);
            fflush(stdout);
            results.push_back(r);
        }
        CB(cublasDestroy(h));
        CK(cudaFree(W)); CK(cudaFree(X)); CK(cudaFree(Y)); CK(cudaFree(Y2)); CK(cudaFree(Yinit));
        CK(cudaFree(bias)); CK(cudaFree(cs)); CK(cudaFree(cd)); CK(cudaFree(g_flush));

        printf("-- summary %s\n", HARNESS_NAME);
        printf("   %-22s %10s %9s %9s %9s %9s %10s %9s\n", "shape", "MB", "ms", "GB/s", "frac_copy", "frac_read",
               "cublas_ms", "cub/ours");
        for (const Result& r : results)
            printf("   %-22s %10.1f %9.4f %9.1f %9.3f %9.3f %10.4f %9.3f\n", r.shape.c_str(), r.bytes / 1e6, r.ms,
                   r.gbps, r.gbps / r.copy_gbps, r.gbps / r.read_gbps, r.cub_ms, r.cub_ms / r.ms);
    }
    for (const Result& r : results)
        printf("RESULT config=%s shape=\"%s\" mode=%s MB=%.1f ms=%.4f gbps=%.1f copy_gbps=%.1f frac_copy=%.3f read_gbps=%.1f "
               "frac_read=%.3f cublas_ms=%.4f ratio=%.3f rel_vs_cublas=%.1e\n",
               HARNESS_NAME, r.shape.c_str(), r.dot ? "dot" : "col", r.bytes / 1e6, r.ms, r.gbps, r.copy_gbps, r.gbps / r.copy_gbps,
               r.read_gbps, r.gbps / r.read_gbps, r.cub_ms, r.cub_ms / r.ms, r.rel_cub);
    printf("STATUS config=%s correct=%s regs=%d local=%zu blocks_per_sm=%d\n", HARNESS_NAME,
           correct ? "true" : "false", fa.numRegs, fa.localSizeBytes, occ);
    return correct ? 0 : 1;
}
