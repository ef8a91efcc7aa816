// The product SGEMM template, compiled in its own translation unit with its
// tuned macros and its entry renamed, so simt2_harness.cu can time it in the
// same process (no -rdc needed: the launch happens in this TU).
#ifndef OPTIML_BM
#define OPTIML_BM 64
#define OPTIML_BN 128
#define OPTIML_BK 16
#define OPTIML_TM 8
#define OPTIML_TN 8
#define OPTIML_THREADS 128
#define OPTIML_MIN_BLOCKS 1
#endif
#define optiml_matmul product_matmul
#include "../../../../optiml-build/src/families/matmul/cuda/matmul_f32.cu"
#undef optiml_matmul
#include <cuda_runtime.h>

// 0 on success, else the CUDA error code of the launch
extern "C" int product_launch(const float* A, const float* B, float* C, const float* bias, int batch, int M, int N,
                              int K, long long sA, long long sB, long long sC, float alpha, float beta,
                              cudaStream_t st) {
    if (M <= 0 || N <= 0 || batch <= 0) return 0;
    dim3 grid((unsigned)((N + OPTIML_BN - 1) / OPTIML_BN), (unsigned)((M + OPTIML_BM - 1) / OPTIML_BM),
              (unsigned)(batch < 65535 ? batch : 65535));
    product_matmul<<<grid, OPTIML_THREADS, 0, st>>>(A, B, C, bias, batch, M, N, K, sA, sB, sC, alpha, beta);
    return (int)cudaGetLastError();
}
extern "C" int product_regs() {
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, product_matmul) != cudaSuccess) return -1;
    return fa.numRegs;
}
extern "C" const char* product_desc() {
    return "product matmul_f32.cu BM=64 BN=128 BK=16 TM=8 TN=8 THREADS=128 MIN_BLOCKS=1";
}
