// One split factor of the split-K prototype (or the product template), with
// its kernels renamed so that several instances link into one harness binary.
//   nvcc -c -DSK_TAG=<S> (or -DSK_TAG=0 = product template optiml_matmul)
//        <the config's -DOPTIML_* flags> splitk_inst.cu
// Exports `SkImpl sk_impl_<TAG>()` (see splitk_common.h).
#include <cuda_runtime.h>
#include "splitk_common.h"

#define SK_CAT2(a, b) a##b
#define SK_CAT(a, b) SK_CAT2(a, b)
#define optiml_mm SK_CAT(optiml_mm_i, SK_TAG)
#define optiml_matmul SK_CAT(optiml_matmul_i, SK_TAG)
#define optiml_splitk_reduce SK_CAT(optiml_splitk_reduce_i, SK_TAG)

#if SK_TAG == 0
#include "../../../optiml-build/src/experts/templates/matmul_f32.cu"
#define SK_S 1
#else
#define OPTIML_SPLIT_K SK_TAG
#include "matmul_f32_splitk.cu"
#define SK_S OPTIML_SPLIT_K
#endif

static cudaError_t sk_launch(const float* A, const float* B, float* C, const float* bias, float* W, int batch, int M,
                             int N, int K, long long sA, long long sB, long long sC, float alpha, float beta,
                             cudaStream_t st) {
    if (M <= 0 || N <= 0 || batch <= 0) return cudaSuccess;
    const unsigned gx = (unsigned)((N + OPTIML_BN - 1) / OPTIML_BN), gy = (unsigned)((M + OPTIML_BM - 1) / OPTIML_BM);
#if SK_S == 1
    (void)W;
    optiml_matmul<<<dim3(gx, gy, (unsigned)(batch < 65535 ? batch : 65535)), OPTIML_THREADS, 0, st>>>(
        A, B, C, bias, batch, M, N, K, sA, sB, sC, alpha, beta);
    return cudaGetLastError();
#else
    const int zmax = 65535 / SK_S;
    const unsigned gz = (unsigned)((batch < zmax ? batch : zmax) * SK_S);
    // launch 1: partials into W ([S][batch][M][N]); C, strideC, alpha, beta, bias ignored
    optiml_matmul<<<dim3(gx, gy, gz), OPTIML_THREADS, 0, st>>>(A, B, W, bias, batch, M, N, K, sA, sB, 0, alpha,
                                                                beta);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    // launch 2: fixed-order reduction + epilogue
    const long long groups = (long long)batch * M * ((N + 3) / 4);
    long long g = (groups + OPTIML_REDUCE_THREADS - 1) / OPTIML_REDUCE_THREADS;
    if (g > 65535) g = 65535;
    optiml_splitk_reduce<<<(unsigned)g, OPTIML_REDUCE_THREADS, 0, st>>>(W, C, bias, batch, M, N, sC, alpha, beta);
    return cudaGetLastError();
#endif
}

static void sk_attrs(int* regs, int* local, int* occ, int* rregs) {
    cudaFuncAttributes fa;
    *regs = *local = *occ = *rregs = -1;
    if (cudaFuncGetAttributes(&fa, optiml_matmul) == cudaSuccess) {
        *regs = fa.numRegs;
        *local = (int)fa.localSizeBytes;
    }
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(occ, optiml_matmul, OPTIML_THREADS, 0);
#if SK_S > 1
    if (cudaFuncGetAttributes(&fa, optiml_splitk_reduce) == cudaSuccess) *rregs = fa.numRegs;
#endif
}

SkImpl SK_CAT(sk_impl_, SK_TAG)() {
    SkImpl r;
    r.split = SK_S;
    r.product = SK_TAG == 0;
    r.launch = sk_launch;
    r.attrs = sk_attrs;
    return r;
}
