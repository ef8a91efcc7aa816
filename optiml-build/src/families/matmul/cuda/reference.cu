// The matmul gate's float64 reference on the GPU (trusted support code, appended to support.cu): the dispatch
// shape is checked on every element, which the host reference cannot afford at 4096³ and beyond. Plain tiles, no
// tuning: its only job is to be obviously right. Tested against the host reference (plan.rs) in eval_gpu.rs.

#include "optiml/compare.cuh"

#define OPTIML_REF_T 64
#define OPTIML_REF_K 16

// Whether a triangular product reads op(A)[i][p] (tri 1: upper, 2: lower; everything without one).
__device__ __forceinline__ bool optiml_ref_keeps(int tri, long long i, long long j) {
    return tri == 0 || (tri == 1 ? j >= i : j <= i);
}

// acc = Σ_p op(A)[i][p]·op(B)[p][j] and mag = Σ_p |op(A)[i][p]·op(B)[p][j]| before the epilogue, for rows
// [row0, row0 + rows) of items [item0, item0 + items), written at ((z·rows + i − row0)·n + j). Every product of
// two floats is exact in double (48 of its 53 bits). flags: 1 A transposed, 2 B transposed, 4 A shared, 8 B
// shared. 256 threads, a 64 × 64 tile, 4 × 4 elements a thread, 16 rows of k a stage.
extern "C" __global__ void __launch_bounds__(256) optiml_matmul_reference(
    const float* A, const float* B, double* acc, double* mag, long long item0, int items, int row0, int rows,
    int m, int n, int k, int flags, int tri) {
    __shared__ double sa[OPTIML_REF_K][OPTIML_REF_T + 1];
    __shared__ double sb[OPTIML_REF_K][OPTIML_REF_T + 1];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const bool ta = flags & 1, tb = flags & 2;
    for (int z = blockIdx.z; z < items; z += gridDim.z) {
        const long long item = item0 + z;
        const float* a = A + ((flags & 4) ? 0 : item * (long long)m * k);
        const float* b = B + ((flags & 8) ? 0 : item * (long long)k * n);
        const int i0 = row0 + blockIdx.y * OPTIML_REF_T, j0 = blockIdx.x * OPTIML_REF_T;
        double s[4][4], g[4][4];
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 4; ++c) s[r][c] = g[r][c] = 0.0;
        for (int p0 = 0; p0 < k; p0 += OPTIML_REF_K) {
            for (int e = threadIdx.x; e < OPTIML_REF_T * OPTIML_REF_K; e += 256) {
                // The stored layout's contiguous index varies fastest, so a warp reads consecutive floats.
                const int ii = ta ? e % OPTIML_REF_T : e / OPTIML_REF_K;
                const int pp = ta ? e / OPTIML_REF_T : e % OPTIML_REF_K;
                const int i = i0 + ii, p = p0 + pp;
                double v = 0.0;
                if (i < row0 + rows && p < k && optiml_ref_keeps(tri, i, p))
                    v = ta ? a[(long long)p * m + i] : a[(long long)i * k + p];
                sa[pp][ii] = v;
            }
            for (int e = threadIdx.x; e < OPTIML_REF_T * OPTIML_REF_K; e += 256) {
                const int jj = tb ? e / OPTIML_REF_K : e % OPTIML_REF_T;
                const int pp = tb ? e % OPTIML_REF_K : e / OPTIML_REF_T;
                const int j = j0 + jj, p = p0 + pp;
                double v = 0.0;
                if (j < n && p < k && optiml_ref_keeps(tri, p, j))
                    v = tb ? b[(long long)j * k + p] : b[(long long)p * n + j];
                sb[pp][jj] = v;
            }
            __syncthreads();
            for (int pp = 0; pp < OPTIML_REF_K; ++pp) {
                double x[4], y[4];
                for (int r = 0; r < 4; ++r) x[r] = sa[pp][ty + 16 * r];
                for (int c = 0; c < 4; ++c) y[c] = sb[pp][tx + 16 * c];
                for (int r = 0; r < 4; ++r)
                    for (int c = 0; c < 4; ++c) {
                        s[r][c] = fma(x[r], y[c], s[r][c]);
                        g[r][c] = fma(fabs(x[r]), fabs(y[c]), g[r][c]);
                    }
            }
            __syncthreads();
        }
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 4; ++c) {
                const int i = i0 + ty + 16 * r, j = j0 + tx + 16 * c;
                if (i < row0 + rows && j < n) {
                    const long long at = ((long long)z * rows + (i - row0)) * n + j;
                    acc[at] = s[r][c];
                    mag[at] = g[r][c];
                }
            }
    }
}

// The epilogue in float64, as the host reference applies it (optiml_spec::reference): act 0 none, 1 relu (NaN
// kept), 2 the exact gelu, 3 silu.
__device__ __forceinline__ double optiml_ref_act(int act, double v) {
    switch (act) {
        case 1: return v != v ? v : fmax(v, 0.0);
        case 2: return 0.5 * v * (1.0 + erf(v / 1.4142135623730951));
        case 3: return v * (1.0 / (1.0 + exp(-v)));
        default: return v;
    }
}

// Compares C's rows [row0, row0 + rows) of items [item0, item0 + items) with the reference of the same rows
// (optiml_matmul_reference's layout) as eval::plan::Comparison::check does: the epilogue applied
// (v = alpha·acc + beta·c0 + bias[j], flags 16 alpha, 32 beta, 64 bias), an element out of its bound, not
// finite, or nonzero outside the triangle fails, and *first becomes the smallest flattened index
// (item·m + i)·n + j of a failing element. The conditioned elements' squared error and squared reference go to
// partial[2·block] and partial[2·block + 1], summed by the host in block order (the same sum on every run).
// Launched with 256 threads.
extern "C" __global__ void __launch_bounds__(256) optiml_matmul_compare(
    const float* out, const double* acc, const double* mag, const float* c0, const float* bias,
    long long item0, int items, int row0, int rows, int m, int n, int flags, double alpha, double beta, int act,
    int tri, double scaled_abs, double abs_tol, double forgive, double* partial, u64* first) {
    double diff2 = 0.0, ref2 = 0.0;
    const long long len = (long long)items * rows * n;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
         e += (long long)gridDim.x * blockDim.x) {
        const long long z = e / ((long long)rows * n), rem = e % ((long long)rows * n);
        const long long i = row0 + rem / n, j = rem % n;
        const long long at = ((item0 + z) * m + i) * n + j;
        const float o = out[at];
        bool bad;
        if (tri != 0 && !optiml_ref_keeps(tri, i, j)) {
            bad = o != 0.0f;
        } else {
            double r = acc[e], g = mag[e];
            if (flags & 16) {
                r *= alpha;
                g *= fabs(alpha);
            }
            if (flags & 32) {
                const double c = beta * (double)c0[at];
                r += c;
                g += fabs(c);
            }
            if (flags & 64) {
                r += (double)bias[j];
                g += fabs((double)bias[j]);
            }
            r = optiml_ref_act(act, r);
            bad = optiml_cmp_fails(o, r, g, scaled_abs, abs_tol, forgive, &diff2, &ref2);
        }
        if (bad) atomicMin(first, (u64)at);
    }
    optiml_cmp_partials(diff2, ref2, partial);
}
