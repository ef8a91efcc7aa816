// Correctness + timing harness for the simt2 SGEMM prototype (simt2.cu),
// next to the product template (product_tu.cu, separate TU) and cuBLAS.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Xptxas -v <SIMT2_* / OPTIML_HAS_* flags>
//        simt2_harness.cu product_tu.cu -lcublas -o h
//   ./h [--quick] [--shapes all|main] [--big] [--seed S] [--rounds R]
//
// Correctness (fresh random inputs per case, seeded by --seed and the case):
// reference = GPU kernel accumulating in double; per element also
// S = sum_k |a||b| (times |alpha|), and the check is
//   relative L2 ||out - ref|| / ||ref|| <= 1e-5, no NaN/Inf, and every element
//   |out - ref| <= (K + 8) * 2^-23 * S' + 2^-20 * |ref| + 1e-30
// (S' = |alpha| S + |beta C_old| + |bias|; gelu / relu are 1.13-Lipschitz: x 1.25),
// C poisoned with NaN (random when OPTIML_HAS_BETA) and a guard margin of
// 4096 floats before and after C (and between batch items when padded)
// must stay bit-identical.
// Timing: ABAB-alternated rounds (the order simt2 / product / cuBLAS rotates
// every round), L2 flushed (256 MB memset) before every timed launch,
// 5 warm-ups each, median per kernel; ratio = cublas_ms / ours_ms.
// Exit: 0 all correct, 1 a correctness failure, 2 CUDA / cuBLAS error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>
#include <string>
#include <cuda_runtime.h>
#include <cublas_v2.h>

#include "simt2.cu"

#ifndef HARNESS_NAME
#define HARNESS_NAME "simt2"
#endif

extern "C" int product_launch(const float* A, const float* B, float* C, const float* bias, int batch, int M, int N,
                              int K, long long sA, long long sB, long long sC, float alpha, float beta,
                              cudaStream_t st);
extern "C" int product_regs();
extern "C" const char* product_desc();

#define CK(x)                                                                                              \
    do {                                                                                                   \
        cudaError_t e_ = (x);                                                                              \
        if (e_ != cudaSuccess) {                                                                           \
            fprintf(stderr, "CUDA error '%s' at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e_)); \
            exit(2);                                                                                       \
        }                                                                                                  \
    } while (0)
#define CB(x)                                                                                              \
    do {                                                                                                   \
        cublasStatus_t s_ = (x);                                                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                 \
            fprintf(stderr, "cuBLAS error %d '%s' at %s:%d\n", (int)s_, #x, __FILE__, __LINE__);          \
            exit(2);                                                                                       \
        }                                                                                                  \
    } while (0)

static const double kTol = 1e-5;
static const float kAlpha = 0.75f, kBeta = 0.5f;  // used only when the flags are on
static const long long kGuard = 4096;               // floats of guard before / after C

// ---------------------------------------------------------------- helpers ---
__global__ void fill_uniform_kernel(float* p, size_t n, unsigned long long seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long z = seed * 0xD1B54A32D192ED03ull + 0x9E3779B97F4A7C15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        p[i] = 2.f * ((float)(z >> 40) * (1.0f / 16777216.0f)) - 1.f;
    }
}
static void fill_uniform(float* p, size_t n, unsigned long long seed) {
    if (n == 0) return;
    fill_uniform_kernel<<<2048, 256>>>(p, n, seed);
    CK(cudaGetLastError());
}

// one warp per output: lanes split K, double accumulation. R = reference,
// Bd = per-element error bound.
__global__ void ref_kernel(const float* A, const float* B, const float* C0, const float* bias, double* R, double* Bd,
                           int batch, int M, int N, int K, long long sA, long long sB, long long sC, float alpha,
                           float beta) {
    const long long total = (long long)batch * M * N;
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long idx = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; idx < total; idx += warps) {
        const int n = (int)(idx % N);
        const int m = (int)((idx / N) % M);
        const long long z = idx / ((long long)M * N);
        const float* Az = A + z * sA;
        const float* Bz = B + z * sB;
        double acc = 0.0, s = 0.0;
        for (int k = lane; k < K; k += 32) {
            const double a = Az[(long long)m * K + k], b = Bz[(long long)k * N + n];
            acc += a * b;
            s += fabs(a * b);
        }
        for (int o = 16; o > 0; o >>= 1) {
            acc += __shfl_xor_sync(0xffffffffu, acc, o);
            s += __shfl_xor_sync(0xffffffffu, s, o);
        }
        if (lane != 0) continue;
        double v = acc, sp = s;
        if (OPTIML_HAS_ALPHA) { v *= (double)alpha; sp *= fabs((double)alpha); }
        if (OPTIML_HAS_BETA) {
            const double o = (double)beta * (double)C0[z * sC + (long long)m * N + n];
            v += o; sp += fabs(o);
        }
        if (OPTIML_HAS_BIAS) { v += (double)bias[n]; sp += fabs((double)bias[n]); }
        double bound = (K + 8) * 1.1920928955078125e-07 * sp;
        if (OPTIML_ACT == 1) v = v > 0.0 ? v : 0.0;
        if (OPTIML_ACT == 2) v = 0.5 * v * (1.0 + erf(v * 0.70710678118654752440));
        if (OPTIML_ACT != 0) bound *= 1.25;
        R[idx] = v;
        Bd[idx] = bound + 9.5367431640625e-07 * fabs(v) + 1e-30;
    }
}

// acc: [0] sum d^2, [1] sum ref^2, [2] max |d|; cnt: [0] NaN/Inf, [1] elements over their bound
__global__ void compare_kernel(const float* out, long long sOut, const double* ref, const double* bnd, int batch, int M,
                               int N, double* acc, unsigned long long* cnt) {
    double d2 = 0.0, r2 = 0.0, mx = 0.0;
    unsigned long long nn = 0, over = 0;
    const long long per = (long long)M * N, total = (long long)batch * per;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const float o = out[(idx / per) * sOut + idx % per];
        const double rf = ref[idx];
        if (!isfinite(o)) { ++nn; continue; }
        const double d = (double)o - rf;
        d2 += d * d; r2 += rf * rf; mx = fmax(mx, fabs(d));
        if (bnd && fabs(d) > bnd[idx]) ++over;
    }
    for (int o = 16; o > 0; o >>= 1) {
        d2 += __shfl_xor_sync(0xffffffffu, d2, o);
        r2 += __shfl_xor_sync(0xffffffffu, r2, o);
        mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        nn += __shfl_xor_sync(0xffffffffu, nn, o);
        over += __shfl_xor_sync(0xffffffffu, over, o);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&acc[0], d2);
        atomicAdd(&acc[1], r2);
        atomicMax(reinterpret_cast<unsigned long long*>(&acc[2]), (unsigned long long)__double_as_longlong(mx));
        atomicAdd(&cnt[0], nn);
        atomicAdd(&cnt[1], over);
    }
}
__global__ void f2d_kernel(const float* in, long long sIn, double* out, int batch, long long per) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < batch * per;
         i += (long long)gridDim.x * blockDim.x)
        out[i] = in[(i / per) * sIn + i % per];
}
// elements of the C allocation that are not outputs and changed bitwise
__global__ void guard_kernel(const float* C, const float* C0, long long total, long long off, long long sC, int batch,
                             long long per, unsigned long long* cnt) {
    unsigned long long bad = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long j = i - off;
        bool is_out = false;
        if (j >= 0) {
            const long long z = sC > 0 ? j / sC : 0, r = sC > 0 ? j % sC : j;
            is_out = z < batch && r < per;
        }
        if (!is_out && __float_as_uint(C[i]) != __float_as_uint(C0[i])) ++bad;
    }
    if (bad) atomicAdd(cnt, bad);
}

struct Stats { double rel, maxabs; unsigned long long nans, over, guard; };

static Stats compare(const float* out, long long sOut, const double* ref, const double* bnd, int batch, int M, int N) {
    double* d_acc;
    unsigned long long* d_cnt;
    CK(cudaMalloc(&d_acc, 3 * sizeof(double)));
    CK(cudaMalloc(&d_cnt, 2 * sizeof(unsigned long long)));
    CK(cudaMemset(d_acc, 0, 3 * sizeof(double)));
    CK(cudaMemset(d_cnt, 0, 2 * sizeof(unsigned long long)));
    compare_kernel<<<1024, 256>>>(out, sOut, ref, bnd, batch, M, N, d_acc, d_cnt);
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
    s.over = c[1];
    s.guard = 0;
    return s;
}

// ------------------------------------------------------------- launchers ---
static void launch_simt2(const float* A, const float* B, float* C, const float* bias, int batch, int M, int N, int K,
                         long long sA, long long sB, long long sC, float alpha, float beta, cudaStream_t st = 0) {
    if (M <= 0 || N <= 0 || batch <= 0) return;
    dim3 grid((unsigned)((N + SIMT2_BN - 1) / SIMT2_BN), (unsigned)((M + SIMT2_BM - 1) / SIMT2_BM),
              (unsigned)std::min(batch, 65535));
    optiml_matmul<<<grid, SIMT2_THREADS, SIMT2_SMEM_BYTES, st>>>(A, B, C, bias, batch, M, N, K, sA, sB, sC, alpha,
                                                                  beta);
}
static void launch_product(const float* A, const float* B, float* C, const float* bias, int batch, int M, int N,
                           int K, long long sA, long long sB, long long sC, float alpha, float beta) {
    const int e = product_launch(A, B, C, bias, batch, M, N, K, sA, sB, sC, alpha, beta, 0);
    if (e != 0) { fprintf(stderr, "product launch failed: %d\n", e); exit(2); }
}

// ------------------------------------------------------------ test cases ---
struct Case {
    const char* name;
    int batch, M, N, K;
    int offA, offB, offC;        // element offsets of the base pointers (odd -> scalar path)
    long long padA, padB, padC;  // extra elements between batch items
    bool bcastA, bcastB;         // stride 0
};

static bool run_case(const Case& c, unsigned long long seed, bool product) {
    const long long MK = (long long)c.M * c.K, KN = (long long)c.K * c.N, MN = (long long)c.M * c.N;
    const long long sA = c.bcastA ? 0 : MK + c.padA, sB = c.bcastB ? 0 : KN + c.padB, sC = MN + c.padC;
    const size_t nA = (size_t)(c.offA + (c.bcastA ? MK : (c.batch - 1) * sA + MK)) + 1;
    const size_t nB = (size_t)(c.offB + (c.bcastB ? KN : (c.batch - 1) * sB + KN)) + 1;
    const long long offC = kGuard + c.offC;
    const size_t nC = (size_t)(offC + (c.batch - 1) * sC + MN + kGuard);
    const size_t nR = (size_t)c.batch * MN + 1;
    float *A, *B, *C, *C0, *bias;
    double *R, *Bd;
    CK(cudaMalloc(&A, nA * 4));
    CK(cudaMalloc(&B, nB * 4));
    CK(cudaMalloc(&C, nC * 4));
    CK(cudaMalloc(&C0, nC * 4));
    CK(cudaMalloc(&bias, ((size_t)c.N + 1) * 4));
    CK(cudaMalloc(&R, nR * 8));
    CK(cudaMalloc(&Bd, nR * 8));
    fill_uniform(A, nA, seed * 8 + 0);
    fill_uniform(B, nB, seed * 8 + 1);
    fill_uniform(bias, (size_t)c.N + 1, seed * 8 + 2);
    if (OPTIML_HAS_BETA) fill_uniform(C, nC, seed * 8 + 3);
    else CK(cudaMemset(C, 0xFF, nC * 4));  // NaN poison
    CK(cudaMemcpy(C0, C, nC * 4, cudaMemcpyDeviceToDevice));
    const float* Ap = A + c.offA;
    const float* Bp = B + c.offB;
    float* Cp = C + offC;
    if (product) launch_product(Ap, Bp, Cp, bias, c.batch, c.M, c.N, c.K, sA, sB, sC, kAlpha, kBeta);
    else launch_simt2(Ap, Bp, Cp, bias, c.batch, c.M, c.N, c.K, sA, sB, sC, kAlpha, kBeta);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    ref_kernel<<<8192, 256>>>(Ap, Bp, C0 + offC, bias, R, Bd, c.batch, c.M, c.N, c.K, sA, sB, sC, kAlpha, kBeta);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    Stats s = compare(Cp, sC, R, Bd, c.batch, c.M, c.N);
    unsigned long long* d_g;
    CK(cudaMalloc(&d_g, 8));
    CK(cudaMemset(d_g, 0, 8));
    guard_kernel<<<1024, 256>>>(C, C0, (long long)nC, offC, sC, c.batch, MN, d_g);
    CK(cudaGetLastError());
    CK(cudaMemcpy(&s.guard, d_g, 8, cudaMemcpyDeviceToHost));
    CK(cudaFree(d_g));
    const bool ok = s.rel <= kTol && s.nans == 0 && s.over == 0 && s.guard == 0;
    printf("  %-4s %-8s %-30s b=%-6d M=%-5d N=%-5d K=%-5d rel=%.3e maxabs=%.3e nan=%llu over_bound=%llu guard=%llu\n",
           ok ? "ok" : "FAIL", product ? "product" : "simt2", c.name, c.batch, c.M, c.N, c.K, s.rel, s.maxabs,
           s.nans, s.over, s.guard);
    CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(C0)); CK(cudaFree(bias));
    CK(cudaFree(R)); CK(cudaFree(Bd));
    return ok;
}

static bool run_correctness(unsigned long long seed0) {
    const int BM = SIMT2_BM, BN = SIMT2_BN, BK = SIMT2_BK;
    // name, batch, M, N, K, offA, offB, offC, padA, padB, padC, bcastA, bcastB
    const Case cases[] = {
        {"exact tile", 1, BM, BN, 4 * BK, 0, 0, 0, 0, 0, 0, false, false},
        {"exact tiles 2x3, K=1 tile", 2, 2 * BM, 3 * BN, BK, 0, 0, 0, 0, 0, 0, false, false},
        {"1024^3 batch 2", 2, 1024, 1024, 1024, 0, 0, 0, 0, 0, 0, false, false},
        {"odd small", 3, 77, 45, 33, 0, 0, 0, 0, 0, 0, false, false},
        {"1x1x1", 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, false, false},
        {"odd N, K=1000", 1, 129, 257, 1000, 0, 0, 0, 0, 0, 0, false, false},
        {"N%4==0 partial tiles, K%BK!=0", 2, 256 + 36, 132, 20, 0, 0, 0, 0, 0, 0, false, false},
        {"K%4==0, K<BK", 1, 130, 72, 4, 0, 0, 0, 0, 0, 0, false, false},
        {"K < 4", 1, 130, 70, 3, 0, 0, 0, 0, 0, 0, false, false},
        {"K = 0", 2, 5, 7, 0, 0, 0, 0, 0, 0, 0, false, false},
        {"K = 0 full tile", 1, BM, BN, 0, 0, 0, 0, 0, 0, 0, false, false},
        {"K = S*BK+4 (ring wraps)", 1, 64, 128, 5 * BK + 4, 0, 0, 0, 0, 0, 0, false, false},
        {"long K (ring wraps often)", 1, 96, 136, 4100, 0, 0, 0, 0, 0, 0, false, false},
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
        {"mid 300x200x129", 2, 300, 200, 129, 0, 0, 0, 0, 0, 0, false, false},
        {"mid 300x200x128", 2, 300, 200, 128, 0, 0, 0, 0, 0, 0, false, false},
        {"batch > 65535 (grid-z loop)", 70000, 3, 5, 8, 0, 0, 0, 0, 0, 0, false, false},
        {"batch 65537 + tiles", 65537, 4, 8, 4, 0, 0, 0, 0, 0, 0, false, false},
        {"batch 600, several tiles", 600, 2 * BM + 8, BN + 4, 3 * BK, 0, 0, 0, 0, 0, 0, false, false},
    };
    bool all = true;
    unsigned long long seed = seed0 * 1000;
    for (const Case& c : cases) all = run_case(c, ++seed, false) && all;
    // the product on a few cases (sanity of the comparison baseline)
    all = run_case(cases[2], ++seed, true) && all;
    all = run_case(cases[3], ++seed, true) && all;
    return all;
}

// ---------------------------------------------------------------- timing ---
struct Shape { const char* name; int batch, M, N, K; };
struct Timing { Shape s; double ms[3]; double tf[3]; double rel_vs_cublas[2]; };

int main(int argc, char** argv) {
    bool quick = false, big = false, all_shapes = true;
    unsigned long long seed = 1;
    int rounds = 10;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--big")) big = true;
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) all_shapes = strcmp(argv[++i], "main") != 0;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], 0, 10);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    }
    CK(cudaSetDevice(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    if (SIMT2_SMEM_BYTES > 48 * 1024)
        CK(cudaFuncSetAttribute(optiml_matmul, cudaFuncAttributeMaxDynamicSharedMemorySize, SIMT2_SMEM_BYTES));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, optiml_matmul));
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, optiml_matmul, SIMT2_THREADS, SIMT2_SMEM_BYTES));
    printf("== simt2 config %s: BM=%d BN=%d BK=%d WM=%d WN=%d TM=%d TN=%d threads=%d stages=%d min_blocks=%d "
           "a_swz=%d a_early=%d group_m=%d | alpha=%d beta=%d bias=%d act=%d\n",
           HARNESS_NAME, SIMT2_BM, SIMT2_BN, SIMT2_BK, SIMT2_WM, SIMT2_WN, SIMT2_TM, SIMT2_TN, SIMT2_THREADS,
           SIMT2_STAGES, SIMT2_MIN_BLOCKS, SIMT2_A_SWZ, SIMT2_A_EARLY, SIMT2_GROUP_M, OPTIML_HAS_ALPHA,
           OPTIML_HAS_BETA, OPTIML_HAS_BIAS, OPTIML_ACT);
    printf("   device %s (sm_%d%d, %d SMs, L2 %d MB); simt2: %d regs, %d B dyn smem, %zu B local, %d blocks/SM; "
           "%s: %d regs\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.l2CacheSize >> 20, fa.numRegs,
           SIMT2_SMEM_BYTES, fa.localSizeBytes, occ, product_desc(), product_regs());

    printf("-- correctness (rel tol %.0e, per-element bound, guard, seed %llu)\n", kTol, seed);
    const bool correct = run_correctness(seed);
    printf("-- correctness %s\n", correct ? "PASSED" : "FAILED");

    std::vector<Timing> timings;
    const bool plain = !OPTIML_HAS_ALPHA && !OPTIML_HAS_BETA && !OPTIML_HAS_BIAS && OPTIML_ACT == 0;
    if (!quick && plain) {
        std::vector<Shape> shapes = {{"b256x1024^3", 256, 1024, 1024, 1024}, {"4096^3", 1, 4096, 4096, 4096}};
        if (all_shapes) {
            shapes.push_back({"b16x1024^3", 16, 1024, 1024, 1024});
            shapes.push_back({"2048^3", 1, 2048, 2048, 2048});
        }
        if (big) shapes.push_back({"8192^3", 1, 8192, 8192, 8192});
        size_t maxA = 0, maxB = 0, maxC = 0;
        for (auto& s : shapes) {
            maxA = std::max(maxA, (size_t)s.batch * s.M * s.K);
            maxB = std::max(maxB, (size_t)s.batch * s.K * s.N);
            maxC = std::max(maxC, (size_t)s.batch * s.M * s.N);
        }
        float *A, *B, *C, *C2, *C3, *flush;
        const size_t flushBytes = 256ull << 20;  // > 5x the 50 MB L2
        CK(cudaMalloc(&A, maxA * 4));
        CK(cudaMalloc(&B, maxB * 4));
        CK(cudaMalloc(&C, maxC * 4));
        CK(cudaMalloc(&C2, maxC * 4));
        CK(cudaMalloc(&C3, maxC * 4));
        CK(cudaMalloc(&flush, flushBytes));
        fill_uniform(A, maxA, seed * 7 + 101);
        fill_uniform(B, maxB, seed * 7 + 102);
        cublasHandle_t h;
        CB(cublasCreate(&h));
        CB(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // plain FP32 (no TF32)
        const float one = 1.f, zero = 0.f;
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        for (const Shape& s : shapes) {
            const long long sA = (long long)s.M * s.K, sB = (long long)s.K * s.N, sC = (long long)s.M * s.N;
            // row-major C = A B  <=>  column-major C^T = B^T A^T: B first, m = N, n = M
            auto run = [&](int w) {
                if (w == 0) launch_simt2(A, B, C, nullptr, s.batch, s.M, s.N, s.K, sA, sB, sC, 1.f, 0.f);
                else if (w == 1) launch_product(A, B, C3, nullptr, s.batch, s.M, s.N, s.K, sA, sB, sC, 1.f, 0.f);
                else CB(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, s.N, s.M, s.K, &one, B, s.N, sB, A,
                                                  s.K, sA, &zero, C2, s.N, sC, s.batch));
            };
            for (int w = 0; w < 3; ++w)
                for (int i = 0; i < 5; ++i) run(w);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            std::vector<float> t[3];
            for (int r = 0; r < rounds; ++r) {
                for (int q = 0; q < 3; ++q) {
                    const int w = (r & 1) ? 2 - q : (q + r / 2) % 3;  // alternate / rotate the order
                    CK(cudaMemsetAsync(flush, r & 0xff, flushBytes));
                    CK(cudaEventRecord(e0));
                    run(w);
                    CK(cudaEventRecord(e1));
                    CK(cudaEventSynchronize(e1));
                    float ms = 0.f;
                    CK(cudaEventElapsedTime(&ms, e0, e1));
                    t[w].push_back(ms);
                }
            }
            CK(cudaGetLastError());
            Timing tm;
            tm.s = s;
            const double flop = 2.0 * s.batch * (double)s.M * s.N * s.K;
            for (int w = 0; w < 3; ++w) {
                std::sort(t[w].begin(), t[w].end());
                const size_t n = t[w].size();
                tm.ms[w] = n % 2 ? t[w][n / 2] : 0.5 * (t[w][n / 2 - 1] + t[w][n / 2]);
                tm.tf[w] = flop / (tm.ms[w] * 1e-3) / 1e12;
            }
            // outputs of the last runs vs cuBLAS (sanity at scale)
            double* Rd;
            const long long per = sC;
            const long long tot = (long long)s.batch * per;
            const int chunkB = (int)std::max(1LL, std::min((long long)s.batch, (64LL << 20) / std::max(1LL, per)));
            CK(cudaMalloc(&Rd, (size_t)chunkB * per * 8));
            for (int which = 0; which < 2; ++which) {
                double d2 = 0, r2 = 0;
                unsigned long long nans = 0;
                for (int z0 = 0; z0 < s.batch; z0 += chunkB) {
                    const int nb = std::min(chunkB, s.batch - z0);
                    f2d_kernel<<<2048, 256>>>(C2 + (long long)z0 * per, per, Rd, nb, per);
                    CK(cudaGetLastError());
                    Stats st = compare((which ? C3 : C) + (long long)z0 * per, per, Rd, nullptr, nb, s.M, s.N);
                    d2 += st.rel * st.rel;  // RMS over chunks of the per-chunk relative L2 error
                    r2 += 1.0;
                    nans += st.nans;
                }
                tm.rel_vs_cublas[which] = nans ? 1e30 : sqrt(d2 / r2);
            }
            (void)tot;
            CK(cudaFree(Rd));
            printf("   TIMING %-12s simt2 %8.3f ms %6.2f TF | product %8.3f ms %6.2f TF | cublas %8.3f ms %6.2f TF | "
                   "ratio cublas/simt2 %.3f  cublas/product %.3f | rel_vs_cublas simt2 %.1e product %.1e (%zu rounds)\n",
                   s.name, tm.ms[0], tm.tf[0], tm.ms[1], tm.tf[1], tm.ms[2], tm.tf[2], tm.ms[2] / tm.ms[0],
                   tm.ms[2] / tm.ms[1], tm.rel_vs_cublas[0], tm.rel_vs_cublas[1], t[0].size());
            fflush(stdout);
            timings.push_back(tm);
        }
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
        CB(cublasDestroy(h));
        CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(C2)); CK(cudaFree(C3)); CK(cudaFree(flush));
    }

    printf("JSON {\"config\":\"%s\",\"regs\":%d,\"local_bytes\":%zu,\"blocks_per_sm\":%d,\"smem\":%d,\"correct\":%s,"
           "\"timings\":[",
           HARNESS_NAME, fa.numRegs, fa.localSizeBytes, occ, SIMT2_SMEM_BYTES, correct ? "true" : "false");
    for (size_t i = 0; i < timings.size(); ++i) {
        const Timing& t = timings[i];
        printf("%s{\"shape\":\"%s\",\"simt2_ms\":%.4f,\"product_ms\":%.4f,\"cublas_ms\":%.4f,\"simt2_tf\":%.3f,"
               "\"product_tf\":%.3f,\"cublas_tf\":%.3f,\"ratio\":%.4f,\"ratio_product\":%.4f,\"rel_simt2\":%.2e,"
               "\"rel_product\":%.2e}",
               i ? "," : "", t.s.name, t.ms[0], t.ms[1], t.ms[2], t.tf[0], t.tf[1], t.tf[2], t.ms[2] / t.ms[0],
               t.ms[2] / t.ms[1], t.rel_vs_cublas[0], t.rel_vs_cublas[1]);
    }
    printf("]}\n");
    if (!timings.empty()) {
        printf("-- summary %s (TFLOP/s; ratio = cublas_ms / ms, >1 = faster than cuBLAS)\n", HARNESS_NAME);
        printf("   %-12s %8s %8s %8s %8s %8s\n", "shape", "simt2", "product", "cublas", "r_simt2", "r_prod");
        for (const Timing& t : timings)
            printf("   %-12s %8.2f %8.2f %8.2f %8.3f %8.3f\n", t.s.name, t.tf[0], t.tf[1], t.tf[2], t.ms[2] / t.ms[0],
                   t.ms[2] / t.ms[1]);
    }
    return correct ? 0 : 1;
}
