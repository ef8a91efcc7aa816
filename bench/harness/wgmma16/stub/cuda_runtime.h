// Minimal stand-ins for the CUDA runtime API: only for `g++ -fsyntax-only`
// of wgmma16_harness.cu on a machine without the CUDA toolkit (hostcheck.sh).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <math.h>  // the global-namespace float functions optiml/epilogue.cuh calls
#define __global__
#define __device__
#define __host__
#define __shared__
#define __forceinline__ inline
#define __restrict__
#define __grid_constant__
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
struct cudaDeviceProp { char name[256]; int major, minor, multiProcessorCount, l2CacheSize; size_t sharedMemPerBlockOptin; };
struct cudaFuncAttributes { int numRegs; size_t sharedSizeBytes, localSizeBytes; };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost };
enum cudaDriverEntryPointQueryResult { cudaDriverEntryPointSuccess };
enum { cudaEnableDefault = 0 };
const char* cudaGetErrorString(cudaError_t);
cudaError_t cudaSetDevice(int);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp*, int);
template <class F> cudaError_t cudaFuncGetAttributes(cudaFuncAttributes*, F);
template <class F> cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int);
cudaError_t cudaMalloc(void**, size_t);
template <class T> cudaError_t cudaMalloc(T** p, size_t n) { return cudaMalloc((void**)p, n); }
cudaError_t cudaFree(void*);
cudaError_t cudaMemcpy(void*, const void*, size_t, cudaMemcpyKind);
cudaError_t cudaMemset(void*, int, size_t);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaGetLastError();
cudaError_t cudaEventCreate(cudaEvent_t*);
cudaError_t cudaEventDestroy(cudaEvent_t);
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t);
cudaError_t cudaEventElapsedTime(float*, cudaEvent_t, cudaEvent_t);
cudaError_t cudaGetDriverEntryPointByVersion(const char*, void**, unsigned, unsigned long long, cudaDriverEntryPointQueryResult*);
// device builtins used by the kernel and the harness kernels
unsigned __cvta_generic_to_shared(const void*);
unsigned __shfl_xor_sync(unsigned, unsigned, int);
float __uint_as_float(unsigned);
void __syncthreads();
double atomicAdd(double*, double);
unsigned long long atomicAdd(unsigned long long*, unsigned long long);
inline int min(int a, int b) { return a < b ? a : b; }
struct float2 { float x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
using std::isfinite;
// the kernel launch syntax is removed by hostcheck.sh (sed) before compiling
