// Declaration-only stand-in for the cuBLAS API used by gemv_harness.cu (syntax check only).
#pragma once
#define CUBLAS_V2_H_  // as the real header does: check.cuh defines CB after it
typedef struct cublasContext* cublasHandle_t;
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0 };
cublasStatus_t cublasCreate(cublasHandle_t*);
cublasStatus_t cublasDestroy(cublasHandle_t);
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t);
cublasStatus_t cublasSgemv(cublasHandle_t, cublasOperation_t, int m, int n, const float* alpha, const float* A, int lda,
                           const float* x, int incx, const float* beta, float* y, int incy);
cublasStatus_t cublasSgemvStridedBatched(cublasHandle_t, cublasOperation_t, int m, int n, const float* alpha,
                                         const float* A, int lda, long long strideA, const float* x, int incx,
                                         long long stridex, const float* beta, float* y, int incy, long long stridey,
                                         int batchCount);
