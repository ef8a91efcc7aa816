// The middle stage of the attention family's staged form (Launch::Attention, sm_90a): the weights P = softmax(S)
// of fp32 scores S, normalised, rounded to 16 bits for 16-bit storage (FlashAttention rounds its weights the
// same way) or kept in fp32 for TF32 products. The stages around it are a wgmma matmul template (16-bit or TF32)
// instantiated twice in the same module (S = scale · q kᵀ with an fp32 output, then y = P v);
// bench/harness/attention_staged has the arithmetic and the prototype.
//
// ABI: optiml_attn_softmax(const float* S, W* P, long long rows, int keys, int pitch): `rows` rows of `keys`
// scores, contiguous; the weights of row r at P + r * pitch (W: unsigned short, or float with OPTIML_SOFTMAX_F32,
// where P may be S itself: a warp has read its whole row before it writes). One warp per row, 8 warps a block
// (256 threads), a grid of ⌈rows / 8⌉ blocks; at most 1024 keys (32 a lane, held in registers). Streaming loads
// and stores: S is read once, P once by the next stage.
//
// Options: OPTIML_SOFTMAX_F32 1 for fp32 weights; else OPTIML_SOFTMAX_F16 1 for f16, 0 for bf16.

namespace optiml_attn_weights {

#if OPTIML_SOFTMAX_F32
typedef float weight;
__device__ __forceinline__ float to_weight(float f) { return f; }
#else
typedef unsigned short weight;
__device__ __forceinline__ unsigned short to_weight(float f) {
    unsigned short r;
#if OPTIML_SOFTMAX_F16
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
#else
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
#endif
    return r;
}
#endif

}  // namespace optiml_attn_weights

// No __restrict__: with fp32 weights P may be S.
extern "C" __global__ void __launch_bounds__(256) optiml_attn_softmax(const float* S, optiml_attn_weights::weight* P,
                                                                      long long rows, int keys, int pitch) {
    const int lane = threadIdx.x & 31;
    const long long row = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (row >= rows) return;
    const float neg_inf = __int_as_float(0xff800000);
    const float* s = S + row * keys;
    float v[32];
    float m = neg_inf;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        const int c = i * 32 + lane;
        v[i] = c < keys ? __ldcs(s + c) : neg_inf;
        m = fmaxf(m, v[i]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        v[i] = i * 32 + lane < keys ? __expf(v[i] - m) : 0.f;
        sum += v[i];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const float inv = 1.f / sum;
    optiml_attn_weights::weight* p = P + row * pitch;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        const int c = i * 32 + lane;
        if (c < keys) __stcs(p + c, optiml_attn_weights::to_weight(v[i] * inv));
    }
}
