// optiml/epilogue.cuh: the activations every template applies, each written once per precision class. Handed
// to NVRTC in memory by optiml-build (templates write #include "optiml/epilogue.cuh"); nvcc harnesses add
// -I optiml-build/src/cuda. Hashed into the generator version of every family whose templates include it.
//
//   OPTIML_ACT   OPTIML_ACT_NONE (default), OPTIML_ACT_RELU, OPTIML_ACT_GELU or OPTIML_ACT_SILU
//
// Two classes, chosen by the template, not by a macro, because one module can hold both (a TF32 module holds
// the tensor-core kernel and the CUDA-core matrix-vector kernel):
//   optiml_act_exact  CUDA-core kernels held to fp32's tolerance (1e-5): exact erf gelu; silu through expf and
//                     the fast division (2 ulp; an IEEE division's slow path spilled the 128-register default
//                     of the SIMT matmul with NT + the full epilogue).
//   optiml_act_fast   tensor-core kernels, held to TF32's or a 16-bit output's tolerance (>= 5e-4): gelu with
//                     erfc from Abramowitz-Stegun 7.1.26 (|error| <= 7e-8 |v|) through rcp/ex2.approx; silu
//                     through __expf (~1e-6 relative). With expf and an IEEE division the H200's bf16 4096^3
//                     bias + silu kernel took 0.239 ms against 0.190 ms with gelu.
//
// NaN policy: relu(NaN) = 0 (fmaxf returns its other operand when one is NaN), where the float64 reference
// keeps NaN; the gate never feeds NaN, so no check depends on the difference. gelu and silu propagate NaN.
// Limits: silu(v) for v < -88 is -0 (exp(-v) = inf, v / inf); gelu(+inf) = inf.
#ifndef OPTIML_EPILOGUE_CUH
#define OPTIML_EPILOGUE_CUH

#define OPTIML_ACT_NONE 0
#define OPTIML_ACT_RELU 1
#define OPTIML_ACT_GELU 2
#define OPTIML_ACT_SILU 3

#ifndef OPTIML_ACT
#define OPTIML_ACT OPTIML_ACT_NONE
#endif
#if OPTIML_ACT < OPTIML_ACT_NONE || OPTIML_ACT > OPTIML_ACT_SILU
#error "OPTIML_ACT must be OPTIML_ACT_NONE, OPTIML_ACT_RELU, OPTIML_ACT_GELU or OPTIML_ACT_SILU"
#endif

__device__ __forceinline__ float optiml_relu(float v) { return fmaxf(v, 0.f); }

// ---------------------------------------------------------------- exact class
__device__ __forceinline__ float optiml_gelu_exact(float v) {
    return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
}
__device__ __forceinline__ float optiml_silu_exact(float v) { return __fdividef(v, 1.f + expf(-v)); }

__device__ __forceinline__ float optiml_act_exact(float v) {
#if OPTIML_ACT == OPTIML_ACT_RELU
    return optiml_relu(v);
#elif OPTIML_ACT == OPTIML_ACT_GELU
    return optiml_gelu_exact(v);
#elif OPTIML_ACT == OPTIML_ACT_SILU
    return optiml_silu_exact(v);
#else
    return v;
#endif
}

// ---------------------------------------------------------------- fast class
#ifdef __CUDA_ARCH__
__device__ __forceinline__ float optiml_rcp_approx(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ float optiml_ex2_approx(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}
#else
// Host emulation of the templates (bench/harness): the same functions without the PTX instructions.
__device__ __forceinline__ float optiml_rcp_approx(float x) { return 1.f / x; }
__device__ __forceinline__ float optiml_ex2_approx(float x) { return exp2f(x); }
#endif

// gelu(v) = 0.5 v erfc(-v / sqrt 2). With a = |v| / sqrt 2 and E = erfc(a)
// (A-S 7.1.26: t = 1 / (1 + p a), E = t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^(-a^2),
// relative accuracy kept for large a), h = 0.5 v E: gelu = h for v < 0,
// v - h (= 0.5 v (2 - E)) otherwise. v is clamped to +-10 inside h only
// (|h(10)| < 1e-22), so +inf gives inf and NaN stays NaN (v - h).
__device__ __forceinline__ float optiml_gelu_fast(float v) {
    const float vc = fminf(fmaxf(v, -10.f), 10.f);
    const float t = optiml_rcp_approx(fmaf(fabsf(vc), 0.3275911f * 0.70710678118654752f, 1.f));
    float q = fmaf(1.061405429f, t, -1.453152027f);
    q = fmaf(q, t, 1.421413741f);
    q = fmaf(q, t, -0.284496736f);
    q = fmaf(q, t, 0.254829592f);
    const float e = optiml_ex2_approx(vc * vc * -0.72134752044448170f);  // e^(-v^2 / 2)
    const float h = (0.5f * vc) * (q * t) * e;
    return v < 0.f ? h : v - h;
}
__device__ __forceinline__ float optiml_silu_fast(float v) { return __fdividef(v, 1.f + __expf(-v)); }

__device__ __forceinline__ float optiml_act_fast(float v) {
#if OPTIML_ACT == OPTIML_ACT_RELU
    return optiml_relu(v);
#elif OPTIML_ACT == OPTIML_ACT_GELU
    return optiml_gelu_fast(v);
#elif OPTIML_ACT == OPTIML_ACT_SILU
    return optiml_silu_fast(v);
#else
    return v;
#endif
}

#endif  // OPTIML_EPILOGUE_CUH
