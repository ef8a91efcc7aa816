// Minimal stand-ins for the CUDA runtime API and device builtins: only for
// `g++ -fsyntax-only` of harness.cu's CUDA path on a machine without the CUDA
// toolkit (hostcheck.sh). Not a runtime.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cmath>
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
typedef void* cudaStream_t;
typedef void* cudaEvent_t;
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
struct uint3s { unsigned x, y, z; };
extern uint3s threadIdx, blockIdx, blockDim, gridDim;
struct cudaDeviceProp { char name[256]; int major, minor, multiProcessorCount; };
struct cudaFuncAttributes { int numRegs; size_t sharedSizeBytes, localSizeBytes; };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
const char* cudaGetErrorString(cudaError_t);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp*, int);
template <class F> cudaError_t cudaFuncGetAttributes(cudaFuncAttributes*, F);
template <class F> cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int);
template <class F> cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int*, F, int, size_t);
cudaError_t cudaMalloc(void**, size_t);
cudaError_t cudaFree(void*);
cudaError_t cudaMemcpy(void*, const void*, size_t, cudaMemcpyKind);
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
