// The attention family's tensor-core kernel for exact fp32 (sm_80+): y = softmax(q kᵀ · scale) v, every product on
// mma.sync m16n8k8 TF32 in the 3xTF32 form. Each fp32 operand x is split into a TF32 big part b = rna(x) and a
// TF32 small part s = rna(x − b), and a product is accumulated in fp32 as s·b' + b·s' + b·b' (the s·s' term,
// about 2⁻²² of the product, is dropped): fp32-level error at three tensor-core products per product, several
// times the throughput of fp32 FMA. With OPTIML_TF32_ONCE (a `tf32` spec) only b·b' is computed: plain TF32, the
// rounding the spec allows, at three times the rate.
//
// One block owns OPTIML_BR queries of one item and all of its value features. It walks the keys in chunks of
// OPTIML_BC, held in shared memory as a score row per query:
//   1. the chunk's scores S = q kᵀ · scale, in passes of OPTIML_SK keys, the features streamed in stages of
//      OPTIML_DK;
//   2. an online softmax per query row (the running max m and denominator l): S becomes P = exp(S − m_new), and
//      alpha = exp(m_old − m_new) rescales what earlier chunks accumulated;
//   3. for each tile of OPTIML_EC value features, O = O · alpha + P v, the keys streamed in stages of OPTIML_CK.
//      O lives in registers during the tile; between chunks it is kept, unnormalised, in y itself (each thread
//      reads back exactly what it wrote), and the last chunk stores O / l. A sequence no longer than one chunk
//      never reads y.
// So the scores are computed once however wide the head is, and no score matrix goes to memory.
//
// Any extents are correct: rows, keys and features past the end load as zero, scores of absent keys are never
// read, and nothing past the end is stored. Loads are 16-byte cp.async when every row of q, k and v starts
// 16-byte aligned (feature counts multiple of 4, aligned buffers), else 4-byte ones. The grid loops over the tiles.
//
// ABI (the tensor program's): q, k, v, y, every dimension's extent as a long long in program order (OPTIML_DIMS),
// then the scale when it is a run-time parameter (OPTIML_PARAMS). OPTIML_Q/K/V/Y name the buffers, OPTIML_BATCH,
// OPTIML_LQ, OPTIML_LK, OPTIML_D and OPTIML_DV the extents, OPTIML_SCALE the scale.
//
// Options, set by the generated header (the 8 warps are 2 across the rows by 4 across the columns of every tile):
//   OPTIML_THREADS  256
//   OPTIML_BR       queries per tile: 32 or 64 (16 or 32 rows per warp)
//   OPTIML_BC       keys per chunk (a multiple of OPTIML_SK)
//   OPTIML_SK       keys per score pass (a multiple of 32: 8 columns per warp and fragment)
//   OPTIML_EC       value features per output tile (a multiple of 32)
//   OPTIML_DK       query and key features per stage (a multiple of 8)
//   OPTIML_CK       keys per value stage (a multiple of 8, dividing OPTIML_BC)

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800

#define OPTIML_MT (OPTIML_BR / 32)            // 16-row fragments per warp
#define OPTIML_NS (OPTIML_SK / 32)            // 8-key score fragments per warp
#define OPTIML_NO (OPTIML_EC / 32)            // 8-feature output fragments per warp
#define OPTIML_RT (OPTIML_THREADS / OPTIML_BR) // threads per row in the softmax

// Shared strides in floats, chosen so that a warp's fragment reads hit 32 distinct banks: rows of q and k stages
// and of the scores are ≡ 4 (mod 32) floats apart, rows of the value stages ≡ 8.
#define OPTIML_QS (OPTIML_DK + 4)
#define OPTIML_SS (OPTIML_BC + 4)
#define OPTIML_VS (OPTIML_EC + 8)

#if OPTIML_THREADS != 256 || (OPTIML_BR != 32 && OPTIML_BR != 64)
#error "8 warps, 32 or 64 queries per tile"
#endif
#if OPTIML_SK % 32 != 0 || OPTIML_BC % OPTIML_SK != 0 || OPTIML_EC % 32 != 0 || OPTIML_DK % 8 != 0 || \
    OPTIML_CK % 8 != 0 || OPTIML_BC % OPTIML_CK != 0 || OPTIML_DK % 4 != 0 || OPTIML_BC % 32 != 0
#error "tiles split evenly into warps and fragments"
#endif
#if OPTIML_RT > 32 || (OPTIML_RT & (OPTIML_RT - 1)) != 0
#error "the threads sharing a softmax row are a power of two within a warp"
#endif

// NVRTC has no math.h: -inf by its bits.
#define OPTIML_NEG_INF __int_as_float(0xff800000)

namespace optiml_attn_mma {

// Global -> shared copies in flight; `valid` false writes zeros and reads nothing (the source is then the buffer's
// base, a valid address).
__device__ __forceinline__ void copy16(float* dst, const float* src, bool valid) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void copy4(float* dst, const float* src, bool valid) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// A ROWS x COLS tile of a row-major matrix into shared memory (row stride `ds` floats): `src` is the tile's first
// element, `ss` the matrix's row stride, `rows` and `cols` how many of the tile's rows and columns exist. With
// `vec`, `src` and `ss` are 16-byte aligned and `cols` is a multiple of 4 or at least COLS.
template <int ROWS, int COLS>
__device__ __forceinline__ void load_tile(float* dst, int ds, const float* src, long long ss, long long rows,
                                          long long cols, bool vec, const float* base) {
    const int tid = threadIdx.x;
    if (vec) {
#pragma unroll
        for (int n = 0; n < (ROWS * COLS / 4 + OPTIML_THREADS - 1) / OPTIML_THREADS; ++n) {
            const int idx = tid + n * OPTIML_THREADS;
            if ((ROWS * COLS / 4) % OPTIML_THREADS != 0 && idx >= ROWS * COLS / 4) break;
            const int r = idx / (COLS / 4), c = (idx % (COLS / 4)) * 4;
            const bool ok = r < rows && c < cols;
            copy16(dst + r * ds + c, ok ? src + r * ss + c : base, ok);
        }
    } else {
        for (int idx = tid; idx < ROWS * COLS; idx += OPTIML_THREADS) {
            const int r = idx / COLS, c = idx % COLS;
            const bool ok = r < rows && c < cols;
            copy4(dst + r * ds + c, ok ? src + r * ss + c : base, ok);
        }
    }
}

// x as a TF32 big part and the TF32 rounding of what it leaves.
__device__ __forceinline__ void split(float x, unsigned& big, unsigned& small) {
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(big) : "f"(x));
    const float rest = x - __uint_as_float(big);
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(small) : "f"(rest));
}

__device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// c += a·b in 3xTF32, the small terms first (or in TF32 alone: the small parts are then never computed).
__device__ __forceinline__ void mma3(float (&c)[4], const unsigned (&ab)[4], const unsigned (&as)[4],
                                     const unsigned (&bb)[2], const unsigned (&bs)[2]) {
#ifndef OPTIML_TF32_ONCE
    mma(c, as, bb);
    mma(c, ab, bs);
#endif
    mma(c, ab, bb);
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

// acc += part in IEEE fp32. The tensor cores align and truncate (round toward zero) when they add into an
// accumulator, a bias that grows with every product: a whole head (1024 features, 384 products per element) in
// one accumulator measured 4.5x the error of fp32 FMA on KernelBench 97. So each stage's few products start
// from zero and the stage's sum is added here, rounded to nearest.
template <int M, int N>
__device__ __forceinline__ void promote(float (&acc)[M][N][4], const float (&part)[M][N][4]) {
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
        for (int n = 0; n < N; ++n)
#pragma unroll
            for (int x = 0; x < 4; ++x) acc[m][n][x] += part[m][n][x];
}

// The A fragment (16 x 8, row-major) at `p` (row stride `s`), split: lane (g, t) holds rows g and g + 8,
// columns t and t + 4.
__device__ __forceinline__ void frag_a(unsigned (&big)[4], unsigned (&small)[4], const float* p, int s, int g,
                                       int t) {
    split(p[g * s + t], big[0], small[0]);
    split(p[(g + 8) * s + t], big[1], small[1]);
    split(p[g * s + t + 4], big[2], small[2]);
    split(p[(g + 8) * s + t + 4], big[3], small[3]);
}

}  // namespace optiml_attn_mma

extern "C" __global__ void __launch_bounds__(OPTIML_THREADS, 1)
optiml_attention(const float* __restrict__ in0, const float* __restrict__ in1, const float* __restrict__ in2,
                 float* __restrict__ out0, OPTIML_DIMS OPTIML_PARAMS) {
    using namespace optiml_attn_mma;
    extern __shared__ __align__(16) float smem[];
    // The stage area serves the score passes (two stages of q and k) and the output tiles (two of v) in turn.
    constexpr int QK_STAGE = (OPTIML_BR + OPTIML_SK) * OPTIML_QS;
    constexpr int V_STAGE = OPTIML_CK * OPTIML_VS;
    constexpr int STAGES = 2 * (QK_STAGE > V_STAGE ? QK_STAGE : V_STAGE);
    float* const stage = smem;
    float* const s_s = stage + STAGES;                         // [BR][SS]
    float* const row_m = s_s + OPTIML_BR * OPTIML_SS;          // running max per row
    float* const row_l = row_m + OPTIML_BR;                    // running denominator
    float* const row_a = row_l + OPTIML_BR;                    // this chunk's rescale exp(m_old - m_new)

    const float* const q = OPTIML_Q;
    const float* const k = OPTIML_K;
    const float* const v = OPTIML_V;
    float* const y = OPTIML_Y;
    const long long lq = OPTIML_LQ, lk = OPTIML_LK, dd = OPTIML_D, dv = OPTIML_DV, batch = OPTIML_BATCH;
    const float scale = OPTIML_SCALE;
    const long long row_tiles = (lq + OPTIML_BR - 1) / OPTIML_BR;
    const long long tiles = batch * row_tiles;
    const long long dstages = (dd + OPTIML_DK - 1) / OPTIML_DK;
    const bool qk_vec = dd % 4 == 0 && ((size_t)q & 15) == 0 && ((size_t)k & 15) == 0;
    const bool v_vec = dv % 4 == 0 && ((size_t)v & 15) == 0;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wr = warp >> 2, wc = warp & 3;     // the warp's row half and column quarter
    const int rbase = wr * (OPTIML_BR / 2);     // its first row in the tile
    const int rr = tid / OPTIML_RT, rp = tid % OPTIML_RT;

    // Tiles of one item are adjacent, so the blocks running together share its keys and values in L2.
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const long long item = tile / row_tiles, i0 = (tile % row_tiles) * OPTIML_BR;
        const long long rows = lq - i0 < OPTIML_BR ? lq - i0 : OPTIML_BR;
        const float* const qb = q + (item * lq + i0) * dd;
        const float* const kb = k + item * lk * dd;
        const float* const vb = v + item * lk * dv;
        float* const yb = y + (item * lq + i0) * dv;

        __syncthreads();  // the previous tile's last reads of the row state are done
        if (tid < OPTIML_BR) {
            row_m[tid] = OPTIML_NEG_INF;
            row_l[tid] = 0.f;
        }

        for (long long j0 = 0; j0 < lk; j0 += OPTIML_BC) {
            const long long keys = lk - j0 < OPTIML_BC ? lk - j0 : OPTIML_BC;
            const bool first = j0 == 0, last = j0 + OPTIML_BC >= lk;

            // 1. Scores, a pass of OPTIML_SK keys at a time (passes wholly past the keys are skipped).
            for (int p0 = 0; p0 < keys; p0 += OPTIML_SK) {
                const float* const kp = kb + (j0 + p0) * dd;
                auto load_qk = [&](long long st, int buf) {
                    float* const qd = stage + buf * QK_STAGE;
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
                        load_qk(st + 1, buf ^ 1);  // its buffer was last read before the barrier closing st - 1
                        wait<1>();
                    } else {
                        wait<0>();
                    }
                    __syncthreads();
                    const float* const qd = stage + buf * QK_STAGE + rbase * OPTIML_QS;
                    const float* const kd = stage + buf * QK_STAGE + (OPTIML_BR + wc * (OPTIML_SK / 4)) * OPTIML_QS;
                    float part[OPTIML_MT][OPTIML_NS][4];
                    zero(part);
#pragma unroll
                    for (int kk = 0; kk < OPTIML_DK; kk += 8) {
                        unsigned ab[OPTIML_MT][4], as[OPTIML_MT][4];
#pragma unroll
                        for (int m = 0; m < OPTIML_MT; ++m)
                            frag_a(ab[m], as[m], qd + m * 16 * OPTIML_QS + kk, OPTIML_QS, g, t);
#pragma unroll
                        for (int n = 0; n < OPTIML_NS; ++n) {
                            // B (8 features x 8 keys, column-major): lane (g, t) holds key g, features t, t + 4.
                            const float* const kr = kd + (n * 8 + g) * OPTIML_QS + kk + t;
                            unsigned bb[2], bs[2];
                            split(kr[0], bb[0], bs[0]);
                            split(kr[4], bb[1], bs[1]);
#pragma unroll
                            for (int m = 0; m < OPTIML_MT; ++m) mma3(part[m][n], ab[m], as[m], bb, bs);
                        }
                    }
                    promote(acc, part);
                    __syncthreads();
                }
                // Scaled scores of this pass; absent keys' columns are never read.
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

            // 2. Online softmax: OPTIML_RT neighbouring lanes per row. Weights of absent keys (up to the next
            // multiple of OPTIML_CK) are 0, so the value stages may run over them.
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
                    const float alpha = expf(m_old - m_new);  // 0 for the first chunk (m_old = -inf)
                    row_l[rr] = row_l[rr] * alpha + sum;
                    row_m[rr] = m_new;
                    row_a[rr] = alpha;
                }
            }
            __syncthreads();

            // 3. Each output tile: O = O · alpha + P v over this chunk's keys.
            const int vstages = (int)((keys + OPTIML_CK - 1) / OPTIML_CK);
            for (long long e0 = 0; e0 < dv; e0 += OPTIML_EC) {
                const int cbase = wc * (OPTIML_EC / 4);  // the warp's first column in the tile
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
                            // What earlier chunks kept in y: this thread's own stores.
                            acc[m][n][x] = !first && rx < rows && cx < dv ? yb[rx * dv + cx] * (x < 2 ? a0 : a1)
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
                    const float* const vd = stage + buf * V_STAGE + cbase;
                    const float* const pd = s_s + rbase * OPTIML_SS + st * OPTIML_CK;
                    float part[OPTIML_MT][OPTIML_NO][4];
                    zero(part);
#pragma unroll
                    for (int kk = 0; kk < OPTIML_CK; kk += 8) {
                        unsigned ab[OPTIML_MT][4], as[OPTIML_MT][4];
#pragma unroll
                        for (int m = 0; m < OPTIML_MT; ++m)
                            frag_a(ab[m], as[m], pd + m * 16 * OPTIML_SS + kk, OPTIML_SS, g, t);
#pragma unroll
                        for (int n = 0; n < OPTIML_NO; ++n) {
                            // B (8 keys x 8 features): lane (g, t) holds feature g of keys t and t + 4.
                            const float* const vr = vd + (kk + t) * OPTIML_VS + n * 8 + g;
                            unsigned bb[2], bs[2];
                            split(vr[0], bb[0], bs[0]);
                            split(vr[4 * OPTIML_VS], bb[1], bs[1]);
#pragma unroll
                            for (int m = 0; m < OPTIML_MT; ++m) mma3(part[m][n], ab[m], as[m], bb, bs);
                        }
                    }
                    promote(acc, part);
                    __syncthreads();
                }
                // Kept unnormalised for the next chunk, or final: over the denominator (row_l is final after the
                // last softmax's barrier).
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
                                yb[rx * dv + cx] = last ? o / (x < 2 ? l0 : l1) : o;
                            }
                        }
                    }
                }
            }
        }
    }
}

#else
#error "the tensor-core attention kernel needs sm_80 or newer (mma.sync .tf32, cp.async)"
#endif
