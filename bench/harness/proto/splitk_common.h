// Shared between splitk_harness.cu and the splitk_inst.cu instances.
#pragma once
#include <cuda_runtime.h>
typedef cudaError_t (*SkLaunchFn)(const float* A, const float* B, float* C, const float* bias, float* W, int batch,
                                  int M, int N, int K, long long sA, long long sB, long long sC, float alpha,
                                  float beta, cudaStream_t st);
struct SkImpl {
    int split;     // OPTIML_SPLIT_K (1 for the product template)
    bool product;  // the unmodified product template
    SkLaunchFn launch;
    void (*attrs)(int* regs, int* local, int* occ, int* reduce_regs);
};
// workspace floats needed by an implementation
static inline size_t sk_ws_floats(const SkImpl& s, int batch, int M, int N) {
    return s.split > 1 ? (size_t)s.split * (size_t)batch * (size_t)M * (size_t)N : 0;
}
SkImpl sk_impl_0();
SkImpl sk_impl_1();
SkImpl sk_impl_2();
SkImpl sk_impl_3();
SkImpl sk_impl_4();
SkImpl sk_impl_8();
SkImpl sk_impl_16();
SkImpl sk_impl_32();
