// Trusted support kernels of the evaluation worker: fresh inputs, poisoning, the written-element check and
// the fp32 ceiling. Kept deliberately simple; nothing here is tuned or generated.

typedef unsigned long long u64;

__device__ __forceinline__ u64 optiml_mix(u64 x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// A uniform in (0, 1), never 0 or 1, from (seed, index, lane).
__device__ __forceinline__ float optiml_unit(u64 seed, u64 i, u64 lane) {
    u64 h = optiml_mix(seed ^ optiml_mix(i * 8 + lane));
    return ((float)(h >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

__device__ __forceinline__ float optiml_normal(u64 seed, u64 i, u64 lane) {
    float u1 = optiml_unit(seed, i, lane), u2 = optiml_unit(seed, i, lane + 1);
    return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

// dist 0: uniform (-1, 1); 1: standard normal; 2: Student's t, 3 degrees of freedom, clipped at 1e4; 3: near
// constant; 4: large; 5: log-normal (plan.rs, Distribution).
extern "C" __global__ void optiml_fill(float* p, long long n, u64 seed, int dist) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float v;
        if (dist == 0) {
            v = 2.0f * optiml_unit(seed, i, 0) - 1.0f;
        } else if (dist == 1) {
            v = optiml_normal(seed, i, 0);
        } else if (dist == 3) {
            // Near-constant: a one-pass variance (E[x²] − E[x]²) loses every digit here.
            v = 3.0f + 1e-3f * optiml_normal(seed, i, 0);
        } else if (dist == 4) {
            // Large: exp of these overflows unless the row maximum is subtracted first.
            v = 1e3f * optiml_normal(seed, i, 0);
        } else if (dist == 5) {
            // Positive: log-normal, for the logarithm or square root of an input.
            v = expf(2.0f * optiml_normal(seed, i, 0));
        } else {
            float z = optiml_normal(seed, i, 0);
            float a = optiml_normal(seed, i, 2), b = optiml_normal(seed, i, 4),
                  c = optiml_normal(seed, i, 6);
            v = z / sqrtf((a * a + b * b + c * c) / 3.0f + 1e-12f);
            v = fminf(fmaxf(v, -1e4f), 1e4f);
        }
        p[i] = v;
    }
}

extern "C" __global__ void optiml_fill_const(float* p, long long n, float v) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        p[i] = v;
    }
}

// Counts NaN and infinite elements: a poisoned output that still holds NaN was not written.
extern "C" __global__ void optiml_count_nonfinite(const float* p, long long n, u64* count) {
    u64 local = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        local += isfinite(p[i]) ? 0 : 1;
    }
    for (int o = 16; o > 0; o >>= 1) local += __shfl_down_sync(0xffffffffu, local, o);
    if ((threadIdx.x & 31) == 0 && local) atomicAdd(count, local);
}

// Eight independent FMA chains per thread: the fp32 ceiling the SM SOL figure is measured against.
extern "C" __global__ void optiml_fma_peak(float* out, int iters, float seed) {
    float a0 = seed + threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5,
          a6 = a0 + 6, a7 = a0 + 7;
    const float m = 0.9999f, c = 0.0001f;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < 16; ++u) {
            a0 = fmaf(a0, m, c); a1 = fmaf(a1, m, c); a2 = fmaf(a2, m, c); a3 = fmaf(a3, m, c);
            a4 = fmaf(a4, m, c); a5 = fmaf(a5, m, c); a6 = fmaf(a6, m, c); a7 = fmaf(a7, m, c);
        }
    }
    float s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    // Never true for these inputs, but the compiler cannot know: the chains stay live.
    if (s == 1234.5f) out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// ---- 16-bit (bf16 / fp16) operands: the checks work on f32 values that the 16-bit type holds exactly.
// dtype 0: bf16, 1: fp16. Round to nearest even; NaN stays NaN, overflow gives infinity.

__device__ __forceinline__ unsigned short optiml_to16_bits(float x, int dtype) {
    if (dtype == 0) {
        unsigned u = __float_as_uint(x);
        if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)0x7fc0;  // a quiet NaN
        u += 0x7fffu + ((u >> 16) & 1u);
        return (unsigned short)(u >> 16);
    }
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    return h;
}

__device__ __forceinline__ float optiml_from16_bits(unsigned short h, int dtype) {
    if (dtype == 0) return __uint_as_float(((unsigned)h) << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// Rounds f32 values in place to values of the 16-bit type, first clamped to [-clip, clip] (fp16's range is
// small: heavy-tailed inputs would overflow correct outputs).
extern "C" __global__ void optiml_round16(float* p, long long n, int dtype, float clip) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float v = p[i];
        if (v == v) v = fminf(fmaxf(v, -clip), clip);
        p[i] = optiml_from16_bits(optiml_to16_bits(v, dtype), dtype);
    }
}

extern "C" __global__ void optiml_to16(const float* src, unsigned short* dst, long long n, int dtype) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        dst[i] = optiml_to16_bits(src[i], dtype);
    }
}

// A boolean mask (one byte, 0 or 1) from f32 values: true where positive.
extern "C" __global__ void optiml_to_mask(const float* src, unsigned char* dst, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        dst[i] = src[i] > 0.f ? 1 : 0;
    }
}

extern "C" __global__ void optiml_from16(const unsigned short* src, float* dst, long long n, int dtype) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        dst[i] = optiml_from16_bits(src[i], dtype);
    }
}

// ---- A gate's outputs, in their stored type. code 0: f32, 1: bf16, 2: fp16, 3: i32, 4: i64. Floats are poisoned
// with NaN, integers (indices) with -1, which no arg reduction returns. Checking an output at a large size must
// cost about what its kernel does: unwritten elements are counted here, and only the compared elements cross to
// the host.

extern "C" __global__ void optiml_poison(void* p, long long n, int code) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        switch (code) {
            case 0: ((unsigned*)p)[i] = 0x7fc00000u; break;
            case 1: ((unsigned short*)p)[i] = (unsigned short)0x7fc0; break;
            case 2: ((unsigned short*)p)[i] = (unsigned short)0x7e00; break;
            case 3: ((int*)p)[i] = -1; break;
            default: ((long long*)p)[i] = -1; break;
        }
    }
}

// What the last timed run's outputs hold instead of the poison: finite values (small integers as floats, indices
// 0..999) from a hash of the position and `seed`, so that a kernel which computes only when it sees the poison
// leaves them, and the check after that run fails.
extern "C" __global__ void optiml_decoy(void* p, long long n, int code, u64 seed) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        u64 h = (u64)i * 0x9E3779B97F4A7C15ull ^ seed;
        h ^= h >> 31;
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
        const int v = (int)(h % 1000u);
        const float f = (float)(v - 500) * 0.015625f;  // exact in bf16 and fp16 too
        switch (code) {
            case 0: ((float*)p)[i] = f; break;
            case 1: ((unsigned short*)p)[i] = optiml_to16_bits(f, 0); break;
            case 2: ((unsigned short*)p)[i] = optiml_to16_bits(f, 1); break;
            case 3: ((int*)p)[i] = v; break;
            default: ((long long*)p)[i] = v; break;
        }
    }
}

// An element a kernel did not write: still NaN or -1, or any non-finite float (an all-ones exponent in 16 bits).
__device__ __forceinline__ bool optiml_is_poisoned(const void* p, long long i, int code) {
    switch (code) {
        case 0: return !isfinite(((const float*)p)[i]);
        case 1: return (((const unsigned short*)p)[i] & 0x7f80u) == 0x7f80u;
        case 2: return (((const unsigned short*)p)[i] & 0x7c00u) == 0x7c00u;
        case 3: return ((const int*)p)[i] == -1;
        default: return ((const long long*)p)[i] == -1;
    }
}

extern "C" __global__ void optiml_count_poisoned(const void* p, long long n, int code, u64* count) {
    u64 local = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        local += optiml_is_poisoned(p, i, code) ? 1 : 0;
    }
    for (int o = 16; o > 0; o >>= 1) local += __shfl_down_sync(0xffffffffu, local, o);
    if ((threadIdx.x & 31) == 0 && local) atomicAdd(count, local);
}

// out[i] = p[at[i]] widened exactly to double (p[i] when `at` is null): the elements a reference computed, in its
// order.
extern "C" __global__ void optiml_gather(const void* p, int code, const long long* at, long long n,
                                         double* out) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        long long j = at ? at[i] : i;
        double v;
        switch (code) {
            case 0: v = ((const float*)p)[j]; break;
            case 1: v = optiml_from16_bits(((const unsigned short*)p)[j], 0); break;
            case 2: v = optiml_from16_bits(((const unsigned short*)p)[j], 1); break;
            case 3: v = ((const int*)p)[j]; break;
            default: v = (double)((const long long*)p)[j]; break;
        }
        out[i] = v;
    }
}

// Rounds f32 values in place to TF32's 10 mantissa bits, to nearest even: inputs on which a TF32 tensor-core
// product is exact, so a kernel that rounds them further (to bf16's 7 bits) shows an error far above
// accumulation's.
extern "C" __global__ void optiml_round_tf32(float* p, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        unsigned u = __float_as_uint(p[i]);
        if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
        p[i] = __uint_as_float(u);
    }
}

// A digest of `n` bytes: the wrapping sum over 32-bit words of a hash of (word, position), added into *sum (a
// sum, so the blocks' order does not matter). A buffer whose digest changed across a launch was written.
extern "C" __global__ void optiml_digest(const unsigned char* p, long long n, u64* sum) {
    const long long words = n / 4;
    u64 local = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < words;
         i += (long long)gridDim.x * blockDim.x) {
        local += optiml_mix(((const unsigned*)p)[i] ^ ((u64)i << 32));
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (long long i = words * 4; i < n; ++i) local += optiml_mix(((u64)p[i] << 8) ^ ((u64)i << 32) ^ 1u);
    }
    for (int o = 16; o > 0; o >>= 1) local += __shfl_down_sync(0xffffffffu, local, o);
    if ((threadIdx.x & 31) == 0 && local) atomicAdd(sum, local);
}
