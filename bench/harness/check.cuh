// The harnesses' error checks: CK for a CUDA runtime call, CB for a cuBLAS call (defined when cublas_v2.h was
// included first). Either prints the call, the file and line and the error (on stdout, where the harnesses'
// reports go, flushed, and on stderr), then exits with status 2.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define OPTIML_HARNESS_FAIL(what, fmt, ...)                                                      \
    do {                                                                                        \
        printf("%s error at %s:%d: " fmt "\n", what, __FILE__, __LINE__, __VA_ARGS__);          \
        fflush(stdout);                                                                         \
        fprintf(stderr, "%s error at %s:%d: " fmt "\n", what, __FILE__, __LINE__, __VA_ARGS__); \
        exit(2);                                                                                \
    } while (0)

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) OPTIML_HARNESS_FAIL("CUDA", "%s: %s", #x, cudaGetErrorString(e_)); \
    } while (0)

#ifdef CUBLAS_V2_H_
#define CB(x)                                                                                   \
    do {                                                                                        \
        cublasStatus_t s_ = (x);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) OPTIML_HARNESS_FAIL("cuBLAS", "%s: status %d", #x, (int)s_); \
    } while (0)
#endif
