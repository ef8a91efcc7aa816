// The staged attention's middle stage, device code only (NVRTC compiles it as it is; the prototype's host program
// and nvrtc_module.py's one-module form both include it): P = softmax(S) per row, fp32 scores in, weights rounded
// to 16 bits out (OPTIML_DTYPE 0: bf16, 1: f16), normalised, as FlashAttention rounds its weights; fp32 weights for
// the TF32 products (OPTIML_DTYPE 2), which round them themselves.
#pragma once

namespace optiml_attn_softmax {

typedef unsigned short h16;

__device__ __forceinline__ h16 to16(float f) {
#if OPTIML_DTYPE == 0
    unsigned b = __float_as_uint(f);
    if ((b & 0x7f800000u) == 0x7f800000u) return (h16)((b >> 16) | ((b & 0xffffu) ? 0x40u : 0u));  // inf, NaN
    b += 0x7fffu + ((b >> 16) & 1u);  // round to nearest even
    return (h16)(b >> 16);
#else
    unsigned short r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
    return r;
#endif
}

// Four weights stored at `P + i` (i a multiple of 4): 16-bit pairs, or fp32 as they are.
__device__ __forceinline__ void store4(h16* P, long long i, float a, float b, float c, float d) {
    uint2 w;
    w.x = (unsigned)to16(a) | ((unsigned)to16(b) << 16);
    w.y = (unsigned)to16(c) | ((unsigned)to16(d) << 16);
    __stcs(reinterpret_cast<uint2*>(P + i), w);
}
__device__ __forceinline__ void store4(float* P, long long i, float a, float b, float c, float d) {
    __stcs(reinterpret_cast<float4*>(P + i), make_float4(a, b, c, d));
}

// One warp per row of L scores (L a multiple of 128, at most 32 · PER_LANE): the row in registers, its max and
// sum over the warp, then the weights. Streaming loads and stores: S is read once, P once by the next stage.
template <int PER_LANE, class Out>
__device__ __forceinline__ void softmax_row(const float* __restrict__ S, Out* __restrict__ P, long long rows, int L) {
    const int lane = threadIdx.x & 31;
    const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    const float neg_inf = __int_as_float(0xff800000);
    const float4* s = reinterpret_cast<const float4*>(S + row * L);
    float v[PER_LANE];
    const int chunks = L / 128;  // float4 chunks per lane
    float m = neg_inf;
#pragma unroll
    for (int c = 0; c < PER_LANE / 4; ++c) {
        float4 x = make_float4(neg_inf, neg_inf, neg_inf, neg_inf);
        if (c < chunks) x = __ldcs(s + c * 32 + lane);
        v[4 * c] = x.x, v[4 * c + 1] = x.y, v[4 * c + 2] = x.z, v[4 * c + 3] = x.w;
        m = fmaxf(m, fmaxf(fmaxf(x.x, x.y), fmaxf(x.z, x.w)));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
        v[i] = (i / 4 < chunks) ? expf(v[i] - m) : 0.f;
        sum += v[i];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const float inv = 1.f / sum;
#pragma unroll
    for (int c = 0; c < PER_LANE / 4; ++c) {
        if (c >= chunks) break;
        store4(P, row * L + 4 * (c * 32 + lane), v[4 * c] * inv, v[4 * c + 1] * inv, v[4 * c + 2] * inv,
               v[4 * c + 3] * inv);
    }
}

}  // namespace optiml_attn_softmax
