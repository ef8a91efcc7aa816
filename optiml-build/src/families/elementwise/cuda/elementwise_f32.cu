// optiml: elementwise map over n fp32 elements.
//
// Compiled by NVRTC at build time; specialised ONLY through preprocessor
// macros. One #include (optiml/epilogue.cuh, in memory for NVRTC), no standard library; everything is explicitly
// annotated so the file also compiles with nvcc and without -default-device.
//
//   OPTIML_OP      1 relu (fmaxf(v, 0): NaN -> 0, as in the matmul epilogue),
//                  2 gelu (exact erf), 3 silu (the CUDA-core forms of optiml/epilogue.cuh), 4 sigmoid, 5 tanh,
//                  6 add, 7 mul
//   OPTIML_BINARY  ops 6/7 only: 1 = out = x (+|*) y   (tensor operand)
//                                2 = out = x (+|*) s   (scalar operand)
//                  ignored for the unary ops 1..5
//   OPTIML_THREADS block size (default 256); the kernel uses blockDim.x.
//
// Grid-stride loop: any grid size covers all n. float4 path when x, out (and
// y for BINARY 1) have the same address modulo 16 and are 4-byte aligned: a
// scalar head brings them to 16-byte alignment, a scalar tail finishes.
// Otherwise everything runs scalar. In-place use (out == x, or out == y) is
// supported: each element is read and then written by the same thread, and
// the pointers are deliberately NOT __restrict__ so the compiler keeps that
// order. Partially overlapping (shifted) out/x is not supported.

#ifndef OPTIML_OP
#define OPTIML_OP 1
#endif
#ifndef OPTIML_BINARY
#define OPTIML_BINARY 0
#endif
#ifndef OPTIML_THREADS
#define OPTIML_THREADS 256
#endif

#if OPTIML_OP < 1 || OPTIML_OP > 7
#error "OPTIML_OP must be 1..7"
#endif
#if OPTIML_OP >= 6
#if OPTIML_BINARY != 1 && OPTIML_BINARY != 2
#error "OPTIML_OP 6/7 (add/mul) need OPTIML_BINARY 1 (tensor) or 2 (scalar)"
#endif
#define OPTIML_EW_TENSOR_Y (OPTIML_BINARY == 1)
#else
#define OPTIML_EW_TENSOR_Y 0
#endif

#include "optiml/epilogue.cuh"  // relu, gelu and silu, as the matmul epilogues compute them

namespace optiml_ew {

// Numerically stable logistic: never evaluates exp of a positive argument.
__device__ __forceinline__ float sigmoid(float v) {
    const float e = expf(-fabsf(v));       // in (0, 1]
    const float r = 1.f / (1.f + e);       // sigmoid(|v|)
    return v >= 0.f ? r : e * r;           // NaN propagates through e
}

__device__ __forceinline__ float apply(float v, float w) {
    (void)w;
#if OPTIML_OP == 1
    return optiml_relu(v);
#elif OPTIML_OP == 2
    return optiml_gelu_exact(v);
#elif OPTIML_OP == 3
    return optiml_silu_exact(v);
#elif OPTIML_OP == 4
    return sigmoid(v);
#elif OPTIML_OP == 5
    return tanhf(v);
#elif OPTIML_OP == 6
    return v + w;
#else
    return v * w;
#endif
}

__device__ __forceinline__ float4 apply4(float4 a, float4 b) {
    float4 r;
    r.x = apply(a.x, b.x);
    r.y = apply(a.y, b.y);
    r.z = apply(a.z, b.z);
    r.w = apply(a.w, b.w);
    return r;
}

__device__ __forceinline__ void scalar_range(const float* x, const float* y, float* out, float s,
                                             long long begin, long long end, long long tid, long long nth) {
    for (long long i = begin + tid; i < end; i += nth) {
#if OPTIML_EW_TENSOR_Y
        const float w = y[i];
#else
        const float w = s;
#endif
        out[i] = apply(x[i], w);
    }
    (void)y; (void)s;
}

}  // namespace optiml_ew

extern "C" __global__ void __launch_bounds__(OPTIML_THREADS) optiml_elementwise(
    const float* x, const float* y, float* out, long long n, float s) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long nth = (long long)gridDim.x * blockDim.x;
    if (n <= 0) return;

    const unsigned long long ax = reinterpret_cast<unsigned long long>(x) & 15ull;
    const unsigned long long ao = reinterpret_cast<unsigned long long>(out) & 15ull;
#if OPTIML_EW_TENSOR_Y
    const unsigned long long ay = reinterpret_cast<unsigned long long>(y) & 15ull;
#else
    const unsigned long long ay = ax;
#endif
    const bool vec = (ax == ao) && (ay == ax) && ((ax & 3ull) == 0ull);
    if (!vec) {
        optiml_ew::scalar_range(x, y, out, s, 0, n, tid, nth);
        return;
    }

    long long head = (long long)(((16ull - ax) & 15ull) >> 2);  // 0..3 elements
    if (head > n) head = n;
    optiml_ew::scalar_range(x, y, out, s, 0, head, tid, nth);

    const long long n4 = (n - head) >> 2;
    const float4* x4 = reinterpret_cast<const float4*>(x + head);
    float4* o4 = reinterpret_cast<float4*>(out + head);
#if OPTIML_EW_TENSOR_Y
    const float4* y4 = reinterpret_cast<const float4*>(y + head);
#endif

    long long i = tid;
    // 4 independent 16-byte loads in flight per thread, then compute, then store.
    for (; i + 3 * nth < n4; i += 4 * nth) {
        float4 a[4], b[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            a[u] = x4[i + u * nth];
#if OPTIML_EW_TENSOR_Y
            b[u] = y4[i + u * nth];
#else
            b[u] = make_float4(s, s, s, s);
#endif
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) o4[i + u * nth] = optiml_ew::apply4(a[u], b[u]);
    }
    for (; i < n4; i += nth) {
        const float4 a = x4[i];
#if OPTIML_EW_TENSOR_Y
        const float4 b = y4[i];
#else
        const float4 b = make_float4(s, s, s, s);
#endif
        o4[i] = optiml_ew::apply4(a, b);
    }

    optiml_ew::scalar_range(x, y, out, s, head + n4 * 4, n, tid, nth);
}
