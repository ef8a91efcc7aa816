// Included by scores_tf32.cu and values_tf32.cu after the product's TF32 wgmma template (matmul_wgmma_tf32.cu, its
// cp.async producer: no tensor maps): a host launcher for this translation unit's instance. The template's entry
// names are fixed (optiml_matmul, optiml_transpose_a), so each unit renames them with macros before including it.

// C[z] = alpha · op(A[z]) · op(B[z]) for z < batch on a persistent grid of at most `sms` blocks; 0 on success.
extern "C" int OPTIML_TU_LAUNCH(const void* A, const void* B, void* C, int batch, int M, int N, int K, long long sA,
                                long long sB, long long sC, float alpha, int sms, cudaStream_t st) {
    static bool ready = false;
    if (!ready) {
        if (cudaFuncSetAttribute(optiml_matmul, cudaFuncAttributeMaxDynamicSharedMemorySize, OPTIML_DYN_SMEM_BYTES) !=
            cudaSuccess)
            return 1;
        ready = true;
    }
    const long long tiles =
        (long long)((M + OPTIML_TILE_M - 1) / OPTIML_TILE_M) * ((N + OPTIML_TILE_N - 1) / OPTIML_TILE_N) * batch;
    const unsigned grid = (unsigned)(tiles < sms ? tiles : sms);
    optiml_matmul<<<grid, OPTIML_THREADS, OPTIML_DYN_SMEM_BYTES, st>>>((const float*)A, (const float*)B, (float*)C,
                                                                       nullptr, batch, M, N, K, sA, sB, sC, alpha,
                                                                       0.f);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
