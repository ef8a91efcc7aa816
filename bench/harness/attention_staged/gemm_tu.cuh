// Included by scores.cu and values.cu after the product's wgmma template (matmul_wgmma_16.cu, compiled once per
// translation unit with that unit's options): a host launcher for this unit's instance, so that two instances
// of one template (other layouts, other output types) live in one program without their macros meeting.
#include "../tma_encode.cuh"

// Rank-3 map of a 16-bit operand stored R x L (L contiguous), batch items `stride` elements apart, box {64, boxR,
// 1}, 128-byte swizzle, out-of-bounds elements read as zero (the template's ABI).
static bool tu_map(optiml_wg16::TmaMap* m, const void* base, long long L, long long R, int batch, long long stride,
                   unsigned boxR) {
    const cuuint64_t dims[3] = {(cuuint64_t)L, (cuuint64_t)R, (cuuint64_t)batch};
    const cuuint64_t strides[2] = {(cuuint64_t)L * 2, (cuuint64_t)stride * 2};
    const cuuint32_t box[3] = {64, boxR, 1};
    const cuuint32_t estr[3] = {1, 1, 1};
    const CUresult r = get_encode()(
        reinterpret_cast<CUtensorMap*>(m),
        OPTIML_DTYPE == 0 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3,
        const_cast<void*>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        std::printf("cuTensorMapEncodeTiled failed (%d): L=%lld R=%lld batch=%d stride=%lld box=64x%u\n", (int)r, L, R,
                    batch, stride, boxR);
    return r == CUDA_SUCCESS;
}

// C[z] = alpha · op(A[z]) · op(B[z]) for z < batch on a persistent grid of at most `sms` blocks; 0 on success.
extern "C" int OPTIML_TU_LAUNCH(const void* A, const void* B, void* C, int batch, int M, int N, int K, long long sA,
                                long long sB, long long sC, float alpha, int sms, cudaStream_t st) {
    static bool ready = false;
    if (!ready) {
        if (cudaFuncSetAttribute(OPTIML_KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, OPTIML_DYN_SMEM_BYTES) !=
            cudaSuccess)
            return 1;
        ready = true;
    }
    optiml_wg16::TmaMap ta, tb;
    const bool a = OPTIML_TRANS_A ? tu_map(&ta, A, M, K, batch, sA, OPTIML_A_BOXR)
                                  : tu_map(&ta, A, K, M, batch, sA, OPTIML_A_BOXR);
    const bool b = OPTIML_TRANS_B ? tu_map(&tb, B, K, N, batch, sB, OPTIML_B_BOXR)
                                  : tu_map(&tb, B, N, K, batch, sB, OPTIML_B_BOXR);
    if (!a || !b) return 2;
    const long long tiles =
        (long long)((M + OPTIML_TILE_M - 1) / OPTIML_TILE_M) * ((N + OPTIML_TILE_N - 1) / OPTIML_TILE_N) * batch;
    const unsigned grid = (unsigned)(tiles < sms ? tiles : sms);
    OPTIML_KERNEL<<<grid, OPTIML_THREADS, OPTIML_DYN_SMEM_BYTES, st>>>(
        (const optiml_t16*)A, (const optiml_t16*)B, (optiml_tc*)C, nullptr, batch, M, N, K, sA, sB, sC, alpha, 0.f, ta,
        tb);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
