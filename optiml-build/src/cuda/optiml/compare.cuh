// optiml/compare.cuh: the gate's rule for one output element, on the GPU, and the block sums of its relative L2
// condition. Both float64 references (the matmul family's, families/matmul/cuda/reference.cu, and the tensor
// programs', families/tensor/cuda/reference.cu) compare through it, as `Comparison::check` does on the host.
#ifndef OPTIML_COMPARE_CUH
#define OPTIML_COMPARE_CUH

// Whether output `o` fails against reference `r` whose error scale is `g` (the magnitude its terms carry): a
// non-finite output fails; otherwise |o - r| may reach scaled_abs·max(g, |r|) plus an absolute floor. An element
// whose reference is large enough against its scale and the floor also adds its squared error, less `forgive`
// times max(g, |r|) (Tolerance::forgive in fp32 roundings, times 2^-24), and its squared reference to *diff2
// and *ref2 (the relative L2 condition).
__device__ __forceinline__ bool optiml_cmp_fails(float o, double r, double g, double scaled_abs, double abs_tol,
                                                 double forgive, double* diff2, double* ref2) {
    if (!isfinite(o)) return true;
    const double d = fabs((double)o - r);
    if (fabs(r) >= g / 1024.0 && scaled_abs * fabs(r) >= abs_tol && fabs(r) >= 1.1754943508222875e-38) {
        const double excess = fmax(d - forgive * fmax(g, fabs(r)), 0.0);
        *diff2 += excess * excess;
        *ref2 += r * r;
    }
    return d > scaled_abs * fmax(g, fabs(r)) + fmax(abs_tol, 1.1754943508222875e-38);
}

// The block's sums of every thread's `diff2` and `ref2`, in a fixed tree order (repeated runs give the same
// bits), to partial[2·block] and partial[2·block + 1]. Every thread of a 256-thread block calls it.
__device__ __forceinline__ void optiml_cmp_partials(double diff2, double ref2, double* partial) {
    __shared__ double sd[256], sr[256];
    sd[threadIdx.x] = diff2;
    sr[threadIdx.x] = ref2;
    __syncthreads();
    for (int o = 128; o > 0; o >>= 1) {
        if (threadIdx.x < o) {
            sd[threadIdx.x] += sd[threadIdx.x + o];
            sr[threadIdx.x] += sr[threadIdx.x + o];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[2 * blockIdx.x] = sd[0];
        partial[2 * blockIdx.x + 1] = sr[0];
    }
}

#endif
