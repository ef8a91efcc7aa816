// optiml: the split-K reduction of the f32 matmul templates (matmul_f32.cu's SIMT kernel, matmul_wgmma_tf32.cu's
// tensor-core one): launch 2 of a split product, whose ABI matmul_f32.cu's header describes. A template includes
// it where OPTIML_SPLIT_K is on, after defining OPTIML_SPLITK_NS, the namespace whose aligned16(p) and
// epilogue(acc, alpha, beta, old, bias) it calls (and outside_triangle(m, n) with OPTIML_TRIANGLE); the
// reduction applies that template's epilogue, so a split product ends as the unsplit one would.
#ifndef OPTIML_SPLITK_CUH
#define OPTIML_SPLITK_CUH

#ifndef OPTIML_REDUCE_THREADS
#define OPTIML_REDUCE_THREADS 256
#endif

namespace OPTIML_SPLITK_NS {

// The reduction's index type: 32-bit when the whole grid-stride range fits, 64-bit otherwise.
template <bool WIDE> struct SplitkIndex { typedef unsigned int T; };
template <> struct SplitkIndex<true> { typedef long long T; };

// One thread = 4 consecutive columns (n0 .. n0 + 3) of one row of one batch
// item; idx = (z * M + m) * ceil(N / 4) + n0 / 4.
// Not inlined: with both index widths inlined into the entry, ptxas (CUDA 13.0)
// spilled 4 bytes at 40 registers for some epilogues (alpha + beta + bias +
// gelu); as calls, every epilogue on sm_80 and sm_90 compiles to 40-48
// registers without spills.
template <bool WIDE>
__device__ __noinline__ void splitk_reduce_body(const float* __restrict__ W, float* __restrict__ C,
                                                   const float* __restrict__ bias, int batch, int M, int N,
                                                   long long strideC, float alpha, float beta, int S) {
    typedef typename SplitkIndex<WIDE>::T I;
    const int G4 = N / 4 + (N % 4 != 0);
    const I total = (I)batch * (I)M * (I)G4;
    const long long plane = (long long)batch * M * N;  // one split's slice of W
    const bool vecW = (N % 4 == 0) && aligned16(W);
    const bool vecC = vecW && (strideC % 4 == 0) && aligned16(C);
    const I step = (I)gridDim.x * (I)blockDim.x;
    for (I idx = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; idx < total; idx += step) {
        const I row = idx / (I)G4;  // z * M + m
        const int n0 = (int)(idx - row * (I)G4) * 4;
        const int z = (int)(row / (I)M);
        const int m = (int)(row - (I)z * (I)M);
        const float* __restrict__ w = W + (long long)row * N + n0;
        // fixed summation order s = 0, 1, ..., S - 1 on both paths
        float v[4];
        // (the loads do not depend on the sums, so the unrolled loop keeps
        // several 16-byte loads in flight per thread)
        if (vecW) {
            const float4 p0 = __ldg(reinterpret_cast<const float4*>(w));
            v[0] = p0.x; v[1] = p0.y; v[2] = p0.z; v[3] = p0.w;
#pragma unroll 8
            for (int s = 1; s < S; ++s) {
                const float4 p = __ldg(reinterpret_cast<const float4*>(w + s * plane));
                v[0] += p.x; v[1] += p.y; v[2] += p.z; v[3] += p.w;
            }
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                v[j] = 0.f;
                if (n0 + j < N) {
                    v[j] = __ldg(w + j);
#pragma unroll 8
                    for (int s = 1; s < S; ++s) v[j] += __ldg(w + s * plane + j);
                }
            }
        }
        float bv[4] = {0.f, 0.f, 0.f, 0.f};
#if OPTIML_HAS_BIAS
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (n0 + j < N) bv[j] = __ldg(bias + n0 + j);
#endif
        (void)bias;
#if OPTIML_TRIANGLE
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (outside_triangle(m, n0 + j)) v[j] = 0.f;
#endif
        float* __restrict__ c = C + (long long)z * strideC + (long long)m * N + n0;
        if (vecC) {
            float4 old = make_float4(0.f, 0.f, 0.f, 0.f);
#if OPTIML_HAS_BETA
            old = *reinterpret_cast<const float4*>(c);
#endif
            float4 o;
            o.x = epilogue(v[0], alpha, beta, old.x, bv[0]);
            o.y = epilogue(v[1], alpha, beta, old.y, bv[1]);
            o.z = epilogue(v[2], alpha, beta, old.z, bv[2]);
            o.w = epilogue(v[3], alpha, beta, old.w, bv[3]);
            *reinterpret_cast<float4*>(c) = o;
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (n0 + j < N) {
                    float old = 0.f;
#if OPTIML_HAS_BETA
                    old = c[j];
#endif
                    c[j] = epilogue(v[j], alpha, beta, old, bv[j]);
                }
            }
        }
    }
}

}  // namespace OPTIML_SPLITK_NS

extern "C" __global__ void __launch_bounds__(OPTIML_REDUCE_THREADS) optiml_splitk_reduce(
    const float* __restrict__ W, float* __restrict__ C, const float* __restrict__ bias,
    int batch, int M, int N, long long strideC, float alpha, float beta, int splits) {
    if (batch <= 0 || M <= 0 || N <= 0 || splits <= 0) return;
    const long long total = (long long)batch * M * (N / 4 + (N % 4 != 0));
    const long long span = total + (long long)gridDim.x * blockDim.x;  // largest idx + step
    if (span < 4294967296ll)
        OPTIML_SPLITK_NS::splitk_reduce_body<false>(W, C, bias, batch, M, N, strideC, alpha, beta, splits);
    else
        OPTIML_SPLITK_NS::splitk_reduce_body<true>(W, C, bias, batch, M, N, strideC, alpha, beta, splits);
}

#endif  // OPTIML_SPLITK_CUH
