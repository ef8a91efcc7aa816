// Minimal stand-ins for the CUDA runtime API: only for `g++ -fsyntax-only`
// of simt2_harness.cu / product_tu.cu without a CUDA toolkit (hostcheck.sh).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cmath>
#define __global__
#define __device__
#define __host__
#define __shared__
#define __forceinline__ inline
#define __noinline__
#define __restrict__
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
typedef int cudaError_t;
enum { cudaSuccess = 0 };
typedef void* cudaStream_t;
typedef void* cudaEvent_t;
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
struct uint3s { unsigned x, y, z; };
extern uint3s threadIdx, blockIdx, blockDim, gridDim;
struct cudaDeviceProp { char name[256]; int major, minor, multiProcessorCount, l2CacheSize; };
struct cudaFuncAttributes { int numRegs; size_t sharedSizeBytes, localSizeBytes; };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
const char* cudaGetErrorString(cudaError_t);
cudaError_t cudaSetDevice(int);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp*, int);
template <class F> cudaError_t cudaFuncGetAttributes(cudaFuncAttributes*, F);
template <class F> cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int);
template <class F> cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int*, F, int, size_t);
cudaError_t cudaMalloc(void**, size_t);
template <class T> cudaError_t cudaMalloc(T** p, size_t n) { return cudaMalloc((void**)p, n); }
cudaError_t cudaFree(void*);
cudaError_t cudaMemcpy(void*, const void*, size_t, cudaMemcpyKind);
cudaError_t cudaMemset(void*, int, size_t);
cudaError_t cudaMemsetAsync(void*, int, size_t, cudaStream_t = 0);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaGetLastError();
cudaError_t cudaEventCreate(cudaEvent_t*);
cudaError_t cudaEventDestroy(cudaEvent_t);
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t);
cudaError_t cudaEventElapsedTime(float*, cudaEvent_t, cudaEvent_t);
// device builtins used by the kernels
unsigned long long __cvta_generic_to_shared(const void*);
double __shfl_xor_sync(unsigned, double, int);
unsigned long long __shfl_xor_sync(unsigned, unsigned long long, int);
unsigned __float_as_uint(float);
long long __double_as_longlong(double);
void __syncthreads();
double atomicAdd(double*, double);
unsigned long long atomicAdd(unsigned long long*, unsigned long long);
unsigned long long atomicMax(unsigned long long*, unsigned long long);
struct float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
struct int2 { int x, y; };
inline int2 make_int2(int x, int y) { return {x, y}; }
float __ldg(const float*);
float4 __ldg(const float4*);
using std::isfinite;
// the kernel launch syntax is removed by hostcheck.sh (sed) before compiling
