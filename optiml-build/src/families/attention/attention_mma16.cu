// The attention family's tensor-core kernel for 16-bit storage (bf16 or f16, sm_80+): y = softmax(q kᵀ · scale) v
// with q, k, v and y in 16 bits, every product on mma.sync m16n8k16 with fp32 accumulation. The structure is
// attention_mma.cu's (read its header first); what differs:
//   - q, k and v stages stay 16-bit in shared memory, so a fragment register is two elements read at once;
//   - the products are accumulated on the tensor cores directly: their truncating adds bias a sum by about 2⁻²³
//     per add (2⁻¹⁷ over a head of 1024 features), far inside 16-bit storage's rounding, so the exact kernel's
//     per-stage promotion, which costs a second set of accumulators, buys nothing here;
//   - the weights P = exp(S − m) are rounded to 16 bits for P v, as FlashAttention does (at most 2⁻⁹ of each
//     weight in bf16); the denominator sums them unrounded in fp32;
//   - y is 16-bit: a sequence longer than one chunk keeps its unnormalised partial output in y between chunks,
//     rounded to 16 bits once per chunk.
//
// ABI (the tensor program's, 16-bit elements as unsigned short): q, k, v, y, every dimension's extent as a long
// long (OPTIML_DIMS), then the scale when it is a run-time parameter (OPTIML_PARAMS, an f32).
//
// Options (as attention_mma.cu's, plus):
//   OPTIML_HALF     0 for bf16, 1 for f16
// OPTIML_DK and OPTIML_CK are multiples of 16 (one mma's depth).

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800

#define OPTIML_MT (OPTIML_BR / 32)            // 16-row fragments per warp
#define OPTIML_NS (OPTIML_SK / 32)            // 8-key score fragments per warp
#define OPTIML_NO (OPTIML_EC / 32)            // 8-feature output fragments per warp
#define OPTIML_RT (OPTIML_THREADS / OPTIML_BR) // threads per row in the softmax

// Shared strides in 16-bit elements: rows 16 bytes past a multiple of 32 words apart, so the 8 rows of a fragment
// read fall in distinct banks, and every row starts 16-byte aligned for the copies. The scores are fp32, as in
// the 32-bit kernel.
#define OPTIML_QS (OPTIML_DK + 8)
#define OPTIML_VS (OPTIML_EC + 8)
#define OPTIML_SS (OPTIML_BC + 4)

#if OPTIML_THREADS != 256 || (OPTIML_BR != 32 && OPTIML_BR != 64)
#error "8 warps, 32 or 64 queries per tile"
#endif
#if OPTIML_SK % 32 != 0 || OPTIML_BC % OPTIML_SK != 0 || OPTIML_EC % 32 != 0 || OPTIML_DK % 16 != 0 || \
    OPTIML_CK % 16 != 0 || OPTIML_BC % OPTIML_CK != 0 || OPTIML_BC % 32 != 0
#error "tiles split evenly into warps and fragments, stages into whole mma depths"
#endif
#if OPTIML_RT > 32 || (OPTIML_RT & (OPTIML_RT - 1)) != 0
#error "the threads sharing a softmax row are a power of two within a warp"
#endif

#define OPTIML_NEG_INF __int_as_float(0xff800000)

namespace optiml_attn_mma16 {

typedef unsigned short h16;

// Two floats as a 16-bit pair (lo at the lower address), rounded to nearest; PTX only (NVRTC has no cuda_bf16.h).
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
    unsigned r;
#if OPTIML_HALF
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}
__device__ __forceinline__ float from16(h16 u) {
#if OPTIML_HALF
    float r;
    asm("{\n\t.reg .b16 h;\n\tmov.b16 h, %1;\n\tcvt.f32.f16 %0, h;\n\t}\n" : "=f"(r) : "h"(u));
    return r;
#else
    return __uint_as_float((unsigned)u << 16);
#endif
}
__device__ __forceinline__ h16 to16(float x) { return (h16)(pack2(x, 0.f) & 0xFFFFu); }

__device__ __forceinline__ void copy16(h16* dst, const h16* src, bool valid) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// A ROWS x COLS tile of a row-major matrix into shared memory (row stride `ds` elements), as attention_mma.cu's
// load_tile: with `vec`, 16-byte copies of 8 elements (`src` and `ss` 16-byte aligned, `cols` a multiple of 8 or
// at least COLS); without, element by element through registers (a copy of 2 bytes has no cp.async), which the
// barrier before the tile's first read orders like the copies.
template <int ROWS, int COLS>
__device__ __forceinline__ void load_tile(h16* dst, int ds, const h16* src, long long ss, long long rows,
                                          long long cols, bool vec, const h16* base) {
    const int tid = threadIdx.x;
    if (vec) {
#pragma unroll
        for (int n = 0; n < (ROWS * COLS / 8 + OPTIML_THREADS - 1) / OPTIML_THREADS; ++n) {
            const int idx = tid + n * OPTIML_THREADS;
            if ((ROWS * COLS / 8) % OPTIML_THREADS != 0 && idx >= ROWS * COLS / 8) break;
            const int r = idx / (COLS / 8), c = (idx % (COLS / 8)) * 8;
            const bool ok = r < rows && c < cols;
            copy16(dst + r * ds + c, ok ? src + r * ss + c : base, ok);
        }
    } else {
        for (int idx = tid; idx < ROWS * COLS; idx += OPTIML_THREADS) {
            const int r = idx / COLS, c = idx % COLS;
            dst[r * ds + c] = r < rows && c < cols ? src[r * ss + c] : (h16)0;
        }
    }
}

__device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if OPTIML_HALF
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

template <int M, int N>
__device__ __forceinline__ void zero(float (&c)[M][N][4]) {
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
        for (int n = 0; n < N; ++n)
#pragma unroll
            for (int x = 0; x < 4; ++x) c[m][n][x] = 0.f;
}

// Four 8 x 8 matrices of 16-bit elements from shared memory, one instruction for the warp: lane l gives the
// address of row l % 8 of matrix l / 8 (16-byte aligned), and lane (g, t) receives elements 2t, 2t + 1 of row g of
// each matrix in r[0..3] (ldsm4), or with `.trans` rows 2t, 2t + 1 of column g (ldsm4t): the mma fragments.
__device__ __forceinline__ void ldsm4(unsigned (&r)[4], const h16* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
__device__ __forceinline__ void ldsm4t(unsigned (&r)[4], const h16* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

}  // namespace optiml_attn_mma16

extern "C" __global__ void __launch_bounds__(OPTIML_THREADS, 1)
optiml_attention(const unsigned short* __restrict__ in0, const unsigned short* __restrict__ in1,
                 const unsigned short* __restrict__ in2, unsigned short* __restrict__ out0, OPTIML_DIMS OPTIML_PARAMS) {
    using namespace optiml_attn_mma16;
    extern __shared__ __align__(16) unsigned char smem_bytes[];
    // The stage area serves the score passes (two stages of q and k) and the output tiles (two of v) in turn.
    constexpr int QK_STAGE = (OPTIML_BR + OPTIML_SK) * OPTIML_QS;
    constexpr int V_STAGE = OPTIML_CK * OPTIML_VS;
    constexpr int STAGES = 2 * (QK_STAGE > V_STAGE ? QK_STAGE : V_STAGE);  // a multiple of 8 elements
    h16* const stage = reinterpret_cast<h16*>(smem_bytes);
    float* const s_s = reinterpret_cast<float*>(smem_bytes + 2 * STAGES);  // [BR][SS]
    float* const row_m = s_s + OPTIML_BR * OPTIML_SS;
    float* const row_l = row_m + OPTIML_BR;
    float* const row_a = row_l + OPTIML_BR;

    const h16* const q = OPTIML_Q;
    const h16* const k = OPTIML_K;
    const h16* const v = OPTIML_V;
    h16* const y = OPTIML_Y;
    const long long lq = OPTIML_LQ, lk = OPTIML_LK, dd = OPTIML_D, dv = OPTIML_DV, batch = OPTIML_BATCH;
    const float scale = OPTIML_SCALE;
    const long long row_tiles = (lq + OPTIML_BR - 1) / OPTIML_BR;
    const long long tiles = batch * row_tiles;
    const long long dstages = (dd + OPTIML_DK - 1) / OPTIML_DK;
    const bool qk_vec = dd % 8 == 0 && ((size_t)q & 15) == 0 && ((size_t)k & 15) == 0;
    const bool v_vec = dv % 8 == 0 && ((size_t)v & 15) == 0;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wr = warp >> 2, wc = warp & 3;
    const int rbase = wr * (OPTIML_BR / 2);
    const int rr = tid / OPTIML_RT, rp = tid % OPTIML_RT;

    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const long long item = tile / row_tiles, i0 = (tile % row_tiles) * OPTIML_BR;
        const long long rows = lq - i0 < OPTIML_BR ? lq - i0 : OPTIML_BR;
        const h16* const qb = q + (item * lq + i0) * dd;
        const h16* const kb = k + item * lk * dd;
        const h16* const vb = v + item * lk * dv;
        h16* const yb = y + (item * lq + i0) * dv;

        __syncthreads();
        if (tid < OPTIML_BR) {
            row_m[tid] = OPTIML_NEG_INF;
            row_l[tid] = 0.f;
        }

        for (long long j0 = 0; j0 < lk; j0 += OPTIML_BC) {
            const long long keys = lk - j0 < OPTIML_BC ? lk - j0 : OPTIML_BC;
            const bool first = j0 == 0, last = j0 + OPTIML_BC >= lk;

            // 1. Scores, a pass of OPTIML_SK keys at a time.
            for (int p0 = 0; p0 < keys; p0 += OPTIML_SK) {
                const h16* const kp = kb + (j0 + p0) * dd;
                auto load_qk = [&](long long st, int buf) {
                    h16* const qd = stage + buf * QK_STAGE;
                    const long long f0 = st * OPTIML_DK;
                    load_tile<OPTIML_BR, OPTIML_DK>(qd, OPTIML_QS, qb + f0, dd, rows, dd - f0, qk_vec, q);
                    load_tile<OPTIML_SK, OPTIML_DK>(qd + OPTIML_BR * OPTIML_QS, OPTIML_QS, kp + f0, dd,
                                                    keys - p0, dd - f0, qk_vec, k);
                    commit();
                };
                float acc[OPTIML_MT][OPTIML_NS][4];
                zero(acc);
                if (dstages > 0) load_qk(0, 0);
                for (long long st = 0; st < dstages; ++st) {
                    const int buf = (int)(st & 1);
                    if (st + 1 < dstages) {
                        load_qk(st + 1, buf ^ 1);
                        wait<1>();
                    } else {
                        wait<0>();
                    }
                    __syncthreads();
                    const h16* const qd = stage + buf * QK_STAGE + rbase * OPTIML_QS;
                    const h16* const kd = stage + buf * QK_STAGE + (OPTIML_BR + wc * (OPTIML_SK / 4)) * OPTIML_QS;
#pragma unroll
                    for (int kk = 0; kk < OPTIML_DK; kk += 16) {
                        // A (16 queries x 16 features): lane (g, t) holds rows g and g + 8, features 2t, 2t + 1
                        // and 2t + 8, 2t + 9: the four 8 x 8 quarters, top left, bottom left, top right, bottom
                        // right.
                        unsigned a[OPTIML_MT][4];
#pragma unroll
                        for (int m = 0; m < OPTIML_MT; ++m)
                            ldsm4(a[m], qd + (m * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)) * OPTIML_QS + kk +
                                            8 * (lane >> 4));
#pragma unroll
                        for (int n = 0; n < OPTIML_NS; n += 2) {
                            // B (16 features x 8 keys, column-major) of two key fragments: lane (g, t) holds key
                            // g, features 2t, 2t + 1 and 2t + 8, 2t + 9, adjacent in a key's row.
                            unsigned b[4];
                            ldsm4(b, kd + (n * 8 + (lane & 7) + 8 * (lane >> 4)) * OPTIML_QS + kk +
                                         8 * ((lane >> 3) & 1));
                            const unsigned b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
                            for (int m = 0; m < OPTIML_MT; ++m) {
                                mma(acc[m][n], a[m], b0);
                                mma(acc[m][n + 1], a[m], b1);
                            }
                        }
                    }
                    __syncthreads();
                }
#pragma unroll
                for (int m = 0; m < OPTIML_MT; ++m)
#pragma unroll
                    for (int n = 0; n < OPTIML_NS; ++n) {
                        const int r = rbase + m * 16 + g, c = p0 + wc * (OPTIML_SK / 4) + n * 8 + 2 * t;
                        s_s[r * OPTIML_SS + c] = acc[m][n][0] * scale;
                        s_s[r * OPTIML_SS + c + 1] = acc[m][n][1] * scale;
                        s_s[(r + 8) * OPTIML_SS + c] = acc[m][n][2] * scale;
                        s_s[(r + 8) * OPTIML_SS + c + 1] = acc[m][n][3] * scale;
                    }
            }
            __syncthreads();

            // 2. Online softmax, as in attention_mma.cu.
            {
                float* const srow = s_s + rr * OPTIML_SS;
                float mx = OPTIML_NEG_INF;
                for (int c = rp; c < keys; c += OPTIML_RT) mx = fmaxf(mx, srow[c]);
#pragma unroll
                for (int o = OPTIML_RT / 2; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
                const float m_old = row_m[rr];
                const float m_new = fmaxf(m_old, mx);
                float sum = 0.f;
                for (int c = rp; c < OPTIML_BC; c += OPTIML_RT) {
                    const float p = c < keys ? expf(srow[c] - m_new) : 0.f;
                    srow[c] = p;
                    sum += p;
                }
#pragma unroll
                for (int o = OPTIML_RT / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
                if (rp == 0) {
                    const float alpha = expf(m_old - m_new);
                    row_l[rr] = row_l[rr] * alpha + sum;
                    row_m[rr] = m_new;
                    row_a[rr] = alpha;
                }
            }
            __syncthreads();

            // 3. Each output tile: O = O · alpha + P v over this chunk's keys.
            const int vstages = (int)((keys + OPTIML_CK - 1) / OPTIML_CK);
            for (long long e0 = 0; e0 < dv; e0 += OPTIML_EC) {
                const int cbase = wc * (OPTIML_EC / 4);
                float acc[OPTIML_MT][OPTIML_NO][4];
#pragma unroll
                for (int m = 0; m < OPTIML_MT; ++m) {
                    const int r = rbase + m * 16 + g;
                    const float a0 = first ? 0.f : row_a[r], a1 = first ? 0.f : row_a[r + 8];
#pragma unroll
                    for (int n = 0; n < OPTIML_NO; ++n) {
                        const long long c = e0 + cbase + n * 8 + 2 * t;
#pragma unroll
                        for (int x = 0; x < 4; ++x) {
                            const long long rx = r + (x >> 1) * 8, cx = c + (x & 1);
                            acc[m][n][x] = !first && rx < rows && cx < dv
                                               ? from16(yb[rx * dv + cx]) * (x < 2 ? a0 : a1)
                                               : 0.f;
                        }
                    }
                }
                auto load_v = [&](int st, int buf) {
                    load_tile<OPTIML_CK, OPTIML_EC>(stage + buf * V_STAGE, OPTIML_VS,
                                                    vb + (j0 + st * OPTIML_CK) * dv + e0, dv,
                                                    keys - st * OPTIML_CK, dv - e0, v_vec, v);
                    commit();
                };
                load_v(0, 0);
                for (int st = 0; st < vstages; ++st) {
                    const int buf = st & 1;
                    if (st + 1 < vstages) {
                        load_v(st + 1, buf ^ 1);
                        wait<1>();
                    } else {
                        wait<0>();
                    }
                    __syncthreads();
                    const h16* const vd = stage + buf * V_STAGE + cbase;
                    const float* const pd = s_s + rbase * OPTIML_SS + st * OPTIML_CK;
#pragma unroll
                    for (int kk = 0; kk < OPTIML_CK; kk += 16) {
                        // A (16 queries x 16 keys) from the fp32 weights, rounded to 16 bits.
                        unsigned a[OPTIML_MT][4];
#pragma unroll
                        for (int m = 0; m < OPTIML_MT; ++m) {
                            // Adjacent weights as one 8-byte read (even offsets of an 8-byte-aligned array).
                            const float* const p = pd + (m * 16 + g) * OPTIML_SS + kk + 2 * t;
                            const float2 w0 = *reinterpret_cast<const float2*>(p);
                            const float2 w1 = *reinterpret_cast<const float2*>(p + 8 * OPTIML_SS);
                            const float2 w2 = *reinterpret_cast<const float2*>(p + 8);
                            const float2 w3 = *reinterpret_cast<const float2*>(p + 8 * OPTIML_SS + 8);
                            a[m][0] = pack2(w0.x, w0.y);
                            a[m][1] = pack2(w1.x, w1.y);
                            a[m][2] = pack2(w2.x, w2.y);
                            a[m][3] = pack2(w3.x, w3.y);
                        }
#pragma unroll
                        for (int n = 0; n < OPTIML_NO; n += 2) {
                            // B (16 keys x 8 features) of two feature fragments, from the row-major stage
                            // transposed: lane (g, t) holds feature g of keys 2t, 2t + 1 and 2t + 8, 2t + 9.
                            unsigned b[4];
                            ldsm4t(b, vd + (kk + (lane & 7) + 8 * ((lane >> 3) & 1)) * OPTIML_VS +
                                          (n + (lane >> 4)) * 8);
                            const unsigned b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
                            for (int m = 0; m < OPTIML_MT; ++m) {
                                mma(acc[m][n], a[m], b0);
                                mma(acc[m][n + 1], a[m], b1);
                            }
                        }
                    }
                    __syncthreads();
                }
#pragma unroll
                for (int m = 0; m < OPTIML_MT; ++m) {
                    const int r = rbase + m * 16 + g;
                    const float l0 = last ? row_l[r] : 1.f, l1 = last ? row_l[r + 8] : 1.f;
#pragma unroll
                    for (int n = 0; n < OPTIML_NO; ++n) {
                        const long long c = e0 + cbase + n * 8 + 2 * t;
#pragma unroll
                        for (int x = 0; x < 4; ++x) {
                            const long long rx = r + (x >> 1) * 8, cx = c + (x & 1);
                            if (rx < rows && cx < dv) {
                                const float o = acc[m][n][x];
                                yb[rx * dv + cx] = to16(last ? o / (x < 2 ? l0 : l1) : o);
                            }
                        }
                    }
                }
            }
        }
    }
}

#else
#error "the 16-bit tensor-core attention kernel needs sm_80 or newer (mma.sync .bf16/.f16, cp.async)"
#endif
