// The attention family's exact fp32 kernel: y = softmax(q kᵀ · scale) v over the last two axes, for every item of
// the batch (the leading axes). One block owns a tile of OPTIML_BR queries and OPTIML_EC value features of one
// item and walks the keys in chunks of OPTIML_BC:
//   1. the chunk's scores S = q kᵀ · scale (OPTIML_BR x OPTIML_BC), the features in stages of OPTIML_DK;
//   2. an online softmax per query row (the running max m and denominator l, as FlashAttention keeps them):
//      S becomes exp(S - m_new) in shared memory, and the accumulated output rows are rescaled by exp(m_old - m_new);
//   3. the output tile accumulates P v, the chunk's keys in stages of OPTIML_CK.
// The output is the accumulator divided by l. No score matrix goes to memory: a wide head (1024 features) keeps
// the whole output tile in registers, which is why the tile has few rows.
//
// Exactness: f32 arithmetic throughout (FMA products, expf, a true division at the end), the same function as the
// float64 reference up to rounding. Any extents are correct: rows, keys and features past the end load as zero
// (scores of absent keys are -inf, so their weight is exactly 0) and are never stored. The grid loops over the
// tiles, so any grid is correct.
//
// Loads go global -> shared with cp.async (4 bytes each, zero-filled past the end), two stages in flight.
//
// ABI (the tensor program's): q, k, v, y, every dimension's extent as a long long in program order (OPTIML_DIMS),
// then the scale when it is a run-time parameter (OPTIML_PARAMS). OPTIML_Q/K/V/Y name the buffers, OPTIML_BATCH,
// OPTIML_LQ, OPTIML_LK, OPTIML_D and OPTIML_DV the extents, OPTIML_SCALE the scale.
//
// Options, set by the generated header:
//   OPTIML_THREADS  threads per block
//   OPTIML_BR       query rows per tile; OPTIML_THREADS / OPTIML_BR threads share a row in the softmax
//   OPTIML_BC       keys per chunk
//   OPTIML_EC       value features per tile
//   OPTIML_DK       query/key features per shared-memory stage of the scores
//   OPTIML_CK       keys per shared-memory stage of P v
//   OPTIML_SC       score columns per thread (a multiple of 4, read as float4)
//   OPTIML_OC       output columns per thread (a multiple of 4, read as float4)

#define OPTIML_SX (OPTIML_BC / OPTIML_SC)        // threads across a score tile's columns
#define OPTIML_SY (OPTIML_THREADS / OPTIML_SX)   // ... and its rows
#define OPTIML_SR (OPTIML_BR / OPTIML_SY)        // score rows per thread
#define OPTIML_OX (OPTIML_EC / OPTIML_OC)        // threads across an output tile's columns
#define OPTIML_OY (OPTIML_THREADS / OPTIML_OX)   // ... and its rows
#define OPTIML_OR (OPTIML_BR / OPTIML_OY)        // output rows per thread
#define OPTIML_RT (OPTIML_THREADS / OPTIML_BR)   // threads per row in the softmax

// Shared strides in floats: q and k stages are stored feature-major (a feature's rows, then its keys, are
// contiguous, read as float4), padded by 4 to spread the transposing stores over banks; the scores row by row,
// padded by 1 (read one element at a time).
#define OPTIML_QS (OPTIML_BR + 4)
#define OPTIML_KS (OPTIML_BC + 4)
#define OPTIML_SS (OPTIML_BC + 1)

#if OPTIML_SX * OPTIML_SC != OPTIML_BC || OPTIML_SY * OPTIML_SX != OPTIML_THREADS || OPTIML_SR * OPTIML_SY != OPTIML_BR
#error "the score tile must split evenly over the threads"
#endif
#if OPTIML_OX * OPTIML_OC != OPTIML_EC || OPTIML_OY * OPTIML_OX != OPTIML_THREADS || OPTIML_OR * OPTIML_OY != OPTIML_BR
#error "the output tile must split evenly over the threads"
#endif
#if OPTIML_SC % 4 != 0 || OPTIML_OC % 4 != 0 || OPTIML_BR % 4 != 0
#error "score and output columns per thread, and rows per tile, are multiples of 4"
#endif
#if OPTIML_RT * OPTIML_BR != OPTIML_THREADS || OPTIML_RT > 32 || (OPTIML_RT & (OPTIML_RT - 1)) != 0
#error "the threads sharing a softmax row are a power of two within a warp"
#endif
#if (OPTIML_BR * OPTIML_DK) % OPTIML_THREADS != 0 || (OPTIML_BC * OPTIML_DK) % OPTIML_THREADS != 0 || \
    (OPTIML_CK * OPTIML_EC) % OPTIML_THREADS != 0 || OPTIML_BC % OPTIML_CK != 0
#error "every stage's elements split evenly over the threads"
#endif

// NVRTC has no math.h: -inf by its bits.
#define OPTIML_NEG_INF __int_as_float(0xff800000)

namespace optiml_attn {

// A 4-byte global -> shared copy in flight; `valid` false writes zero and reads nothing (the source is then the
// buffer's base, a valid address). Before sm_80 (no cp.async) the copy is a plain load and store.
__device__ __forceinline__ void copy4(float* dst, const float* src, bool valid) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
#else
    *dst = valid ? *src : 0.f;
#endif
}
__device__ __forceinline__ void commit() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void wait() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// N consecutive floats of shared memory, 16-byte aligned when N is a multiple of 4.
template <int N>
__device__ __forceinline__ void lds(float (&r)[N], const float* p) {
    if (N % 4 == 0) {
#pragma unroll
        for (int x = 0; x < N / 4; ++x) {
            const float4 t = reinterpret_cast<const float4*>(p)[x];
            r[4 * x] = t.x;
            r[4 * x + 1] = t.y;
            r[4 * x + 2] = t.z;
            r[4 * x + 3] = t.w;
        }
    } else {
#pragma unroll
        for (int x = 0; x < N; ++x) r[x] = p[x];
    }
}

}  // namespace optiml_attn

extern "C" __global__ void __launch_bounds__(OPTIML_THREADS, 1)
optiml_attention(const float* __restrict__ in0, const float* __restrict__ in1, const float* __restrict__ in2,
                 float* __restrict__ out0, OPTIML_DIMS OPTIML_PARAMS) {
    using namespace optiml_attn;
    extern __shared__ __align__(16) float smem[];
    float* const q_s = smem;                                  // [2][DK][QS]
    float* const k_s = q_s + 2 * OPTIML_DK * OPTIML_QS;        // [2][DK][KS]
    float* const v_s = k_s + 2 * OPTIML_DK * OPTIML_KS;        // [2][CK][EC]
    float* const s_s = v_s + 2 * OPTIML_CK * OPTIML_EC;        // [BR][SS]
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
    const long long col_tiles = (dv + OPTIML_EC - 1) / OPTIML_EC;
    const long long tiles = batch * row_tiles * col_tiles;
    const long long stages = (dd + OPTIML_DK - 1) / OPTIML_DK;

    const int tid = threadIdx.x;
    const int sy = tid / OPTIML_SX, sx = tid % OPTIML_SX;
    const int oy = tid / OPTIML_OX, ox = tid % OPTIML_OX;
    const int rr = tid / OPTIML_RT, rp = tid % OPTIML_RT;

    // Tiles of one item are adjacent, so the blocks running together share its keys and values in L2.
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long ct = t % col_tiles, rt = (t / col_tiles) % row_tiles, item = t / (col_tiles * row_tiles);
        const long long i0 = rt * OPTIML_BR, e0 = ct * OPTIML_EC;
        const float* const qb = q + item * lq * dd;
        const float* const kb = k + item * lk * dd;
        const float* const vb = v + item * lk * dv;
        float* const yb = y + item * lq * dv;

        __syncthreads();  // the previous tile's last reads of the row state are done
        if (tid < OPTIML_BR) {
            row_m[tid] = OPTIML_NEG_INF;
            row_l[tid] = 0.f;
        }
        float acc[OPTIML_OR][OPTIML_OC];
#pragma unroll
        for (int a = 0; a < OPTIML_OR; ++a)
#pragma unroll
            for (int c = 0; c < OPTIML_OC; ++c) acc[a][c] = 0.f;

        for (long long j0 = 0; j0 < lk; j0 += OPTIML_BC) {
            // 1. Scores of this chunk's keys.
            auto load_qk = [&](long long stage, int buf) {
                const long long f0 = stage * OPTIML_DK;
                float* const qd = q_s + buf * OPTIML_DK * OPTIML_QS;
                float* const kd = k_s + buf * OPTIML_DK * OPTIML_KS;
#pragma unroll 4
                for (int n = 0; n < OPTIML_BR * OPTIML_DK / OPTIML_THREADS; ++n) {
                    const int idx = tid + n * OPTIML_THREADS;
                    const int r = idx / OPTIML_DK, f = idx % OPTIML_DK;
                    const bool ok = i0 + r < lq && f0 + f < dd;
                    copy4(qd + f * OPTIML_QS + r, ok ? qb + (i0 + r) * dd + f0 + f : q, ok);
                }
#pragma unroll 4
                for (int n = 0; n < OPTIML_BC * OPTIML_DK / OPTIML_THREADS; ++n) {
                    const int idx = tid + n * OPTIML_THREADS;
                    const int c = idx / OPTIML_DK, f = idx % OPTIML_DK;
                    const bool ok = j0 + c < lk && f0 + f < dd;
                    copy4(kd + f * OPTIML_KS + c, ok ? kb + (j0 + c) * dd + f0 + f : k, ok);
                }
                commit();
            };
            float sacc[OPTIML_SR][OPTIML_SC];
#pragma unroll
            for (int a = 0; a < OPTIML_SR; ++a)
#pragma unroll
                for (int c = 0; c < OPTIML_SC; ++c) sacc[a][c] = 0.f;
            if (stages > 0) load_qk(0, 0);
            for (long long st = 0; st < stages; ++st) {
                const int buf = (int)(st & 1);
                if (st + 1 < stages) {
                    load_qk(st + 1, buf ^ 1);  // its buffer was last read before the barrier closing st - 1
                    wait<1>();
                } else {
                    wait<0>();
                }
                __syncthreads();
                const float* const qd = q_s + buf * OPTIML_DK * OPTIML_QS + sy * OPTIML_SR;
                const float* const kd = k_s + buf * OPTIML_DK * OPTIML_KS + sx * 4;
#pragma unroll
                for (int f = 0; f < OPTIML_DK; ++f) {
                    float qa[OPTIML_SR], kc[OPTIML_SC];
                    lds(qa, qd + f * OPTIML_QS);
                    // Columns interleave by 4 across the threads: a warp reads consecutive float4s.
#pragma unroll
                    for (int x = 0; x < OPTIML_SC / 4; ++x) {
                        float4 t4 = *reinterpret_cast<const float4*>(kd + f * OPTIML_KS + x * OPTIML_SX * 4);
                        kc[4 * x] = t4.x;
                        kc[4 * x + 1] = t4.y;
                        kc[4 * x + 2] = t4.z;
                        kc[4 * x + 3] = t4.w;
                    }
#pragma unroll
                    for (int a = 0; a < OPTIML_SR; ++a)
#pragma unroll
                        for (int c = 0; c < OPTIML_SC; ++c) sacc[a][c] = fmaf(qa[a], kc[c], sacc[a][c]);
                }
                __syncthreads();
            }
            // The previous chunk's P v is done with the scores (the stages' barriers say so too, unless the
            // features are empty).
            __syncthreads();
#pragma unroll
            for (int a = 0; a < OPTIML_SR; ++a)
#pragma unroll
                for (int x = 0; x < OPTIML_SC / 4; ++x)
#pragma unroll
                    for (int w = 0; w < 4; ++w) {
                        const int c = x * OPTIML_SX * 4 + sx * 4 + w;
                        s_s[(sy * OPTIML_SR + a) * OPTIML_SS + c] =
                            j0 + c < lk ? sacc[a][4 * x + w] * scale : OPTIML_NEG_INF;
                    }
            __syncthreads();

            // 2. Online softmax: OPTIML_RT neighbouring lanes per row.
            {
                float* const srow = s_s + rr * OPTIML_SS;
                float mx = OPTIML_NEG_INF;
                for (int c = rp; c < OPTIML_BC; c += OPTIML_RT) mx = fmaxf(mx, srow[c]);
#pragma unroll
                for (int o = OPTIML_RT / 2; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
                const float m_old = row_m[rr];
                const float m_new = fmaxf(m_old, mx);
                float sum = 0.f;
                for (int c = rp; c < OPTIML_BC; c += OPTIML_RT) {
                    const float p = expf(srow[c] - m_new);
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

            // 3. acc = acc · alpha + P v over this chunk's keys.
#pragma unroll
            for (int a = 0; a < OPTIML_OR; ++a) {
                const float alpha = row_a[oy * OPTIML_OR + a];
#pragma unroll
                for (int c = 0; c < OPTIML_OC; ++c) acc[a][c] *= alpha;
            }
            const long long keys = lk - j0 < OPTIML_BC ? lk - j0 : OPTIML_BC;
            const int vstages = (int)((keys + OPTIML_CK - 1) / OPTIML_CK);
            auto load_v = [&](int stage, int buf) {
                float* const vd = v_s + buf * OPTIML_CK * OPTIML_EC;
#pragma unroll 4
                for (int n = 0; n < OPTIML_CK * OPTIML_EC / OPTIML_THREADS; ++n) {
                    const int idx = tid + n * OPTIML_THREADS;
                    const int kk = idx / OPTIML_EC, c = idx % OPTIML_EC;
                    const long long j = j0 + stage * OPTIML_CK + kk;
                    const bool ok = j < lk && e0 + c < dv;
                    copy4(vd + kk * OPTIML_EC + c, ok ? vb + j * dv + e0 + c : v, ok);
                }
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
                const float* const vd = v_s + buf * OPTIML_CK * OPTIML_EC + ox * 4;
                const float* const pd = s_s + oy * OPTIML_OR * OPTIML_SS + st * OPTIML_CK;
#pragma unroll
                for (int kk = 0; kk < OPTIML_CK; ++kk) {
                    float pa[OPTIML_OR];
#pragma unroll
                    for (int a = 0; a < OPTIML_OR; ++a) pa[a] = pd[a * OPTIML_SS + kk];
#pragma unroll
                    for (int x = 0; x < OPTIML_OC / 4; ++x) {
                        // A group of columns wholly past the features is skipped by the whole warp.
                        if (e0 + x * OPTIML_OX * 4 >= dv) continue;
                        const float4 t4 = *reinterpret_cast<const float4*>(vd + kk * OPTIML_EC + x * OPTIML_OX * 4);
#pragma unroll
                        for (int a = 0; a < OPTIML_OR; ++a) {
                            acc[a][4 * x] = fmaf(pa[a], t4.x, acc[a][4 * x]);
                            acc[a][4 * x + 1] = fmaf(pa[a], t4.y, acc[a][4 * x + 1]);
                            acc[a][4 * x + 2] = fmaf(pa[a], t4.z, acc[a][4 * x + 2]);
                            acc[a][4 * x + 3] = fmaf(pa[a], t4.w, acc[a][4 * x + 3]);
                        }
                    }
                }
                __syncthreads();
            }
        }

        // The output: the accumulator over the denominator (row_l is final: the last softmax's barrier).
#pragma unroll
        for (int a = 0; a < OPTIML_OR; ++a) {
            const int r = oy * OPTIML_OR + a;
            if (i0 + r >= lq) continue;
            const float l = row_l[r];
            float* const yr = yb + (i0 + r) * dv + e0;
#pragma unroll
            for (int x = 0; x < OPTIML_OC / 4; ++x)
#pragma unroll
                for (int w = 0; w < 4; ++w) {
                    const int c = x * OPTIML_OX * 4 + ox * 4 + w;
                    if (e0 + c < dv) yr[c] = acc[a][4 * x + w] / l;
                }
        }
    }
}
