// Prototype for issue 17 §3: fp32-accurate matmul on the TF32 tensor cores ("3xTF32"), measured before it
// becomes a schedule of the matmul family.
//
// Each fp32 operand x splits into big = rna_tf32(x) and small = rna_tf32(x - big), both exact in TF32, and
//   A·B ≈ small_A·big_B + big_A·small_B + big_A·big_B      (small·small, ~2^-22 |ab|, dropped)
// Here that is one TF32 GEMM over K' = 3K: a split kernel writes A' = [small_A | big_A | big_A] (M × 3K) and
// B' = [big_B ; small_B ; big_B] (3K × N), and optiml's own wgmma TF32 template (matmul_wgmma_tf32.cu, TMA, NN,
// its default tile) multiplies them, the small terms first so that they are summed before the big ones swamp
// them. Both splits are exact, so the template's truncation of the shared-memory operand and rounding of the
// register operand change nothing.
//
// Built with -DOPTIML_TF32X3=1 it times the template's own split instead (the family's 3xTF32 kernel, no extra
// memory), in place of the 1xTF32 column, and skips the split-and-3K path.
//
// Timed (CUDA events, medians of 20, the ops rotated each round): cuBLAS SGEMM (exact fp32, 32 MiB workspace),
// cuBLAS TF32, optiml 1xTF32 at K, optiml 3xTF32 (split + GEMM at 3K, and the GEMM alone). Errors on sampled rows
// against float64 on the CPU: max |out − ref| / Σ|a·b| and relative L2, for uniform [-1, 1) operands and for
// operands spread over 2^±8.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I optiml-build/src/cuda [-DOPTIML_TF32X3=1 \
//        -DOPTIML_PROMOTE_KT=4 -DOPTIML_QN=128 -DOPTIML_SETMAXNREG=1] bench/harness/tf32x3/harness.cu -lcublas \
//        -o tf32x3 && ./tf32x3            (or bench/harness/tf32x3/run.sh for several builds)
#include <cuda.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define OPTIML_TMA 1
// The template's own macros choose the variant: OPTIML_TF32X3 (the split in the kernel), OPTIML_PROMOTE_KT, the
// tile (run.sh builds several).
#include "../../../optiml-build/src/families/matmul/cuda/matmul_wgmma_tf32.cu"
#ifndef OPTIML_PROMOTE_KT
#define OPTIML_PROMOTE_KT 0
#endif
#ifndef OPTIML_TF32X3
#define OPTIML_TF32X3 0
#endif

#include "../check.cuh"

static int g_sms = 132;

// ------------------------------------------------------------------ split ---
__device__ __forceinline__ float tf32_rna(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return __uint_as_float(r);
}

// The big and small TF32 parts of four floats.
__device__ __forceinline__ void split4(float4 x, float4& big, float4& small) {
    big.x = tf32_rna(x.x), small.x = tf32_rna(x.x - big.x);
    big.y = tf32_rna(x.y), small.y = tf32_rna(x.y - big.y);
    big.z = tf32_rna(x.z), small.z = tf32_rna(x.z - big.z);
    big.w = tf32_rna(x.w), small.w = tf32_rna(x.w - big.w);
}

// Each of `items` runs of `len` float4s (packed) → three runs in a row: the small part in slot `small_at`, the big
// part in the other two. A (rows × K) is rows runs of K with the small part first, [small | big | big]; B
// (batch × K × N) is batch runs of K·N with it second, [big ; small ; big].
__global__ void split(const float4* __restrict__ in, float4* __restrict__ out, long long items, long long len,
                      int small_at) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < items * len;
         i += (long long)gridDim.x * blockDim.x) {
        const long long item = i / len, at = i % len;
        float4 big, small;
        split4(in[i], big, small);
        float4* o = out + item * 3 * len + at;
        for (int slot = 0; slot < 3; ++slot) o[slot * len] = slot == small_at ? small : big;
    }
}

// ------------------------------------------------------------------- TMA ---
#include "../tma_encode.cuh"

// optiml's TF32 GEMM, NN, packed items: C[z] (M × N) = A[z] (M × K) · B[z] (K × N), persistent grid.
static void gemm_tf32(const float* A, const float* B, float* C, int batch, int M, int N, int K) {
    const long long sA = (long long)M * K, sB = (long long)K * N, sC = (long long)M * N;
    const long long tiles = (long long)((N + OPTIML_TILE_N - 1) / OPTIML_TILE_N) *
                            ((M + OPTIML_TILE_M - 1) / OPTIML_TILE_M) * batch;
    optiml_wg::TmaMap tq, tp;
    memset(&tq, 0, sizeof(tq));
    memset(&tp, 0, sizeof(tp));
    // NN computes Cᵀ = Bᵀ·Aᵀ: Q is A (K-major, M rows), P is B (stored K × N).
    const int use = make_map(&tq, A, K, M, batch, sA, 32, OPTIML_QN) && make_map(&tp, B, N, K, batch, sB, 32, 32);
    optiml_matmul<<<(unsigned)std::min<long long>(tiles, g_sms), OPTIML_THREADS, OPTIML_DYN_SMEM_BYTES>>>(
        A, B, C, nullptr, batch, M, N, K, sA, sB, sC, 1.f, 0.f, tq, tp, use);
}

static void gemm_3x(const float* A, const float* B, float* A3, float* B3, float* C, int batch, int M, int N, int K) {
    split<<<g_sms * 8, 256>>>((const float4*)A, (float4*)A3, (long long)batch * M, K / 4, 0);
    split<<<g_sms * 8, 256>>>((const float4*)B, (float4*)B3, batch, (long long)K * N / 4, 1);
    gemm_tf32(A3, B3, C, batch, M, N, 3 * K);
}

// cuBLAS, row-major C = A·B as column-major Cᵀ = Bᵀ·Aᵀ.
static void cublas(cublasHandle_t h, const float* A, const float* B, float* C, int batch, int M, int N, int K) {
    const float one = 1.f, zero = 0.f;
    CB(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, (long long)K * N, A, K,
                                 (long long)M * K, &zero, C, N, (long long)M * N, batch));
}

// ---------------------------------------------------------------- inputs ---
static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
// dist 0: uniform [-1, 1); 1: ±(0.5 + 0.5u)·2^e, e in [-8, 8].
static void fill(std::vector<float>& v, uint64_t seed, int dist) {
    for (size_t i = 0; i < v.size(); ++i) {
        const uint64_t z = mix(seed * 0xD1B54A32D192ED03ull + 0x9E3779B97F4A7C15ull * (i + 1));
        const float u = (float)(z >> 40) * (1.0f / 16777216.0f);
        v[i] = dist == 0 ? 2.f * u - 1.f
                         : ((z & 1) ? -1.f : 1.f) * (0.5f + 0.5f * u) * ldexpf(1.f, (int)((z >> 8) % 17ull) - 8);
    }
}

struct Err {
    double max_scaled = 0, l2_num = 0, l2_den = 0;
};

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    g_sms = prop.multiProcessorCount;
    CK(cudaFuncSetAttribute(optiml_matmul, cudaFuncAttributeMaxDynamicSharedMemorySize, OPTIML_DYN_SMEM_BYTES));
    cublasHandle_t exact, tf32;
    CB(cublasCreate(&exact));
    CB(cublasCreate(&tf32));
    CB(cublasSetMathMode(tf32, CUBLAS_TF32_TENSOR_OP_MATH));
    void *ws0, *ws1;
    CK(cudaMalloc(&ws0, 32 << 20));
    CK(cudaMalloc(&ws1, 32 << 20));
    CB(cublasSetWorkspace(exact, ws0, 32 << 20));
    CB(cublasSetWorkspace(tf32, ws1, 32 << 20));
    printf("%s, %d SMs; optiml TF32 tile %d x %d, %d stages, %d threads, accumulator promoted every %d k-tiles "
           "(0: never)\n",
           prop.name, g_sms, OPTIML_TILE_M, OPTIML_TILE_N, OPTIML_STAGES, OPTIML_THREADS, OPTIML_PROMOTE_KT);
    struct Shape {
        int batch, m, n, k;
    };
    const Shape shapes[] = {{1, 4096, 4096, 4096}, {256, 1024, 1024, 1024}, {1, 2048, 2048, 2048},
                            {16, 1024, 1024, 1024}, {1, 8192, 8192, 8192}};
    // With OPTIML_TF32X3 the template itself splits (3xTF32 in the kernel): its column replaces 1xTF32, and the
    // split-and-3K path (ops 3, 4) is not run.
    const char* names[] = {"cuBLAS SGEMM", "cuBLAS TF32", OPTIML_TF32X3 ? "optiml 3xTF32 (in kernel)" : "optiml 1xTF32",
                           "optiml 3xTF32", "  3x GEMM only"};
    const int ops = OPTIML_TF32X3 ? 3 : 5, outs = OPTIML_TF32X3 ? 3 : 4;
    for (const Shape& s : shapes) {
        const size_t na = (size_t)s.batch * s.m * s.k, nb = (size_t)s.batch * s.k * s.n, nc = (size_t)s.batch * s.m * s.n;
        float *A, *B, *C[4], *A3, *B3;
        CK(cudaMalloc(&A, na * 4));
        CK(cudaMalloc(&B, nb * 4));
        CK(cudaMalloc(&A3, 3 * na * 4));
        CK(cudaMalloc(&B3, 3 * nb * 4));
        for (auto& c : C) CK(cudaMalloc(&c, nc * 4));
        const double flops = 2.0 * s.batch * s.m * (double)s.n * s.k;
        printf("\n== %d x %d x %d x %d\n", s.batch, s.m, s.n, s.k);
        for (int dist = 0; dist < 2; ++dist) {
            std::vector<float> ha(na), hb(nb);
            fill(ha, 1000 + dist * 7 + s.m, dist);
            fill(hb, 2000 + dist * 11 + s.k, dist);
            CK(cudaMemcpy(A, ha.data(), na * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(B, hb.data(), nb * 4, cudaMemcpyHostToDevice));
            for (auto& c : C) CK(cudaMemset(c, 0xff, nc * 4));  // NaN: every output must be written
            cublas(exact, A, B, C[0], s.batch, s.m, s.n, s.k);
            cublas(tf32, A, B, C[1], s.batch, s.m, s.n, s.k);
            gemm_tf32(A, B, C[2], s.batch, s.m, s.n, s.k);
            if (!OPTIML_TF32X3) gemm_3x(A, B, A3, B3, C[3], s.batch, s.m, s.n, s.k);
            CK(cudaDeviceSynchronize());
            // Sampled rows of sampled items against float64.
            Err err[4];
            const int rows = 48;
            std::vector<float> out(s.n);
            std::vector<double> ref(s.n), mag(s.n);
            for (int t = 0; t < rows; ++t) {
                const int z = (int)(mix(t * 31 + 7) % s.batch), i = (int)(mix(t * 17 + 3) % s.m);
                std::fill(ref.begin(), ref.end(), 0.0);
                std::fill(mag.begin(), mag.end(), 0.0);
                const float* a = ha.data() + ((size_t)z * s.m + i) * s.k;
                const float* b = hb.data() + (size_t)z * s.k * s.n;
                for (int p = 0; p < s.k; ++p) {
                    const double ap = a[p];
                    const float* bp = b + (size_t)p * s.n;
                    for (int j = 0; j < s.n; ++j) {
                        const double v = ap * bp[j];
                        ref[j] += v;
                        mag[j] += fabs(v);
                    }
                }
                for (int w = 0; w < outs; ++w) {
                    CK(cudaMemcpy(out.data(), C[w] + ((size_t)z * s.m + i) * s.n, s.n * 4, cudaMemcpyDeviceToHost));
                    for (int j = 0; j < s.n; ++j) {
                        const double d = std::isfinite(out[j]) ? fabs(out[j] - ref[j]) : INFINITY;
                        err[w].max_scaled = std::max(err[w].max_scaled, d / mag[j]);
                        err[w].l2_num += d * d;
                        err[w].l2_den += ref[j] * ref[j];
                    }
                }
            }
            printf("  %s operands: max |err|/sum|ab|, rel L2 (%d rows):", dist ? "2^+-8" : "uniform", rows);
            for (int w = 0; w < outs; ++w)
                printf("  %s %.2e %.2e;", names[w], err[w].max_scaled, sqrt(err[w].l2_num / err[w].l2_den));
            printf("\n");
        }
        // Timing: 5 warm-up rounds, then 20 rounds, each op once per round, the order rotated.
        std::vector<float> times[5];
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        auto op = [&](int w) {
            switch (w) {
            case 0: cublas(exact, A, B, C[0], s.batch, s.m, s.n, s.k); break;
            case 1: cublas(tf32, A, B, C[1], s.batch, s.m, s.n, s.k); break;
            case 2: gemm_tf32(A, B, C[2], s.batch, s.m, s.n, s.k); break;
            case 3: gemm_3x(A, B, A3, B3, C[3], s.batch, s.m, s.n, s.k); break;
            default: gemm_tf32(A3, B3, C[3], s.batch, s.m, s.n, 3 * s.k); break;
            }
        };
        for (int r = 0; r < 25; ++r) {
            for (int q = 0; q < ops; ++q) {
                const int w = (q + r) % ops;
                CK(cudaEventRecord(e0));
                op(w);
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                if (r >= 5) times[w].push_back(ms);
            }
        }
        CK(cudaGetLastError());
        double med[5] = {0, 0, 0, 0, 0};
        for (int w = 0; w < ops; ++w) {
            std::sort(times[w].begin(), times[w].end());
            med[w] = times[w][times[w].size() / 2];
            printf("  %-16s %8.4f ms %7.1f TFLOP/s  (%.2fx cuBLAS SGEMM)\n", names[w], med[w], flops / med[w] / 1e9,
                   med[0] / med[w]);
        }
        printf("JSON {\"tf32x3_in_kernel\":%d,\"promote_kt\":%d,\"tile_m\":%d,\"tile_n\":%d,\"batch\":%d,\"m\":%d,\"n\":%d,\"k\":%d,\"sgemm_ms\":%.5f,\"cublas_tf32_ms\":%.5f,"
               "\"optiml_tf32_ms\":%.5f,\"optiml_3xtf32_ms\":%.5f,\"gemm3x_only_ms\":%.5f}\n",
               OPTIML_TF32X3, OPTIML_PROMOTE_KT, OPTIML_TILE_M, OPTIML_TILE_N, s.batch, s.m, s.n, s.k, med[0], med[1], med[2],
               med[3], med[4]);
        for (auto c : C) CK(cudaFree(c));
        CK(cudaFree(A));
        CK(cudaFree(B));
        CK(cudaFree(A3));
        CK(cudaFree(B3));
    }
    return 0;
}
