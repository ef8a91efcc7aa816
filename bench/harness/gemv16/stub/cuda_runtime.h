// Minimal stand-ins for the CUDA runtime API and the device builtins gemv_16.cu
// uses: only for `g++ -fsyntax-only` of harness.cu's CUDA path on a machine
// without the CUDA toolkit (hostcheck.sh). Not a runtime. Signatures as in the
// CUDA runtime API documentation.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <math.h>
#define __global__
#define __device__
#define __host__
#define __shared__
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
// optiml/epilogue.cuh (#included by the templates) calls these CUDA intrinsics from inline functions that are
// compiled whatever OPTIML_ACT selects; exp2f, erff, expf, fmaf, fminf, fmaxf, fabsf come from <math.h>.
// Host meaning: __expf = expf, __fdividef = a / b. noexcept: glibc's <math.h> already declares __expf.
inline float __expf(float x) noexcept { return expf(x); }
inline float __fdividef(float a, float b) noexcept { return a / b; }
typedef int cudaError_t;
enum { cudaSuccess = 0 };
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 { unsigned x, y, z; };
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
uint4 make_uint4(unsigned, unsigned, unsigned, unsigned);
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
const char* cudaGetErrorString(cudaError_t);
cudaError_t cudaMalloc(void**, size_t);
cudaError_t cudaFree(void*);
cudaError_t cudaMemcpy(void*, const void*, size_t, cudaMemcpyKind);
cudaError_t cudaMemcpyAsync(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t = 0);
cudaError_t cudaMemset(void*, int, size_t);
cudaError_t cudaMemsetAsync(void*, int, size_t, cudaStream_t = 0);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaGetLastError();
cudaError_t cudaEventCreate(cudaEvent_t*);
cudaError_t cudaEventDestroy(cudaEvent_t);
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t);
cudaError_t cudaEventElapsedTime(float*, cudaEvent_t, cudaEvent_t);
void __syncthreads();
float __uint_as_float(unsigned);
unsigned __float_as_uint(float);
unsigned short __ldg(const unsigned short*);
unsigned __ldg(const unsigned*);
uint2 __ldg(const uint2*);
uint4 __ldg(const uint4*);
float __ldg(const float*);
unsigned short __ldcs(const unsigned short*);
uint4 __ldcs(const uint4*);
template <class T> T __shfl_xor_sync(unsigned, T, int, int = 32);
template <class T> T __shfl_sync(unsigned, T, int, int = 32);
template <class... T> void cuda_launch_cfg(T...);  // hostcheck.sh: stands for <<<...>>>
