// The host side of TMA for the standalone harnesses (wgmma_harness.cu, wgmma16/, tf32x3/): the driver's
// cuTensorMapEncodeTiled, fetched through the runtime (no -lcuda; cuda.h only supplies the types), and the rank-3
// fp32 map the wgmma TF32 template loads. Include it after the template, which defines the map type.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

typedef CUresult (*EncodeTiledFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                  const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled, looked up once; a missing entry point ends the harness (exit 2, as a CUDA error).
static EncodeTiledFn get_encode() {
    static EncodeTiledFn encode = nullptr;
    if (!encode) {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult q;
        const cudaError_t e =
            cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
        if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || fn == nullptr) {
            printf("CUDA ERROR cuTensorMapEncodeTiled not found (%s, query result %d)\n", cudaGetErrorString(e),
                   (int)q);
            exit(2);
        }
        encode = (EncodeTiledFn)fn;
    }
    return encode;
}

// 3-D map {cols, rows, batch} of a row-major fp32 operand (cols contiguous), batch items `stride` elements apart
// (stride 0: one item, coordinate 0), box {box0, box1, 1}, 128-byte swizzle, out-of-bounds elements read as zero.
// False where TMA cannot describe it (a base not 16-byte aligned, a row or batch stride not a multiple of 4
// elements, an empty operand) or the encoder refuses it.
template <class Map>
static bool make_map(Map* m, const float* base, long long cols, long long rows, int batch, long long stride,
                     unsigned box0, unsigned box1) {
    static_assert(sizeof(Map) == sizeof(CUtensorMap), "the map type must be a CUtensorMap");
    if ((reinterpret_cast<uintptr_t>(base) & 15) || (cols & 3) || (stride & 3) || cols <= 0 || rows <= 0) return false;
    const bool bc = stride == 0;
    const cuuint64_t dims[3] = {(cuuint64_t)cols, (cuuint64_t)rows, (cuuint64_t)(bc ? 1 : batch)};
    const cuuint64_t strides[2] = {(cuuint64_t)cols * 4, (cuuint64_t)(bc ? cols * rows * 4 : stride * 4)};
    const cuuint32_t box[3] = {box0, box1, 1};
    const cuuint32_t estr[3] = {1, 1, 1};
    return get_encode()(reinterpret_cast<CUtensorMap*>(m), CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<float*>(base),
                        dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}
