// Declaration-only stand-in for the CUDA runtime API used by gemv_harness.cu,
// for `g++ -fsyntax-only` on a machine without the CUDA toolkit (see
// emu/syntax_check.sh). Device builtins come from cuda_emu.h.
#pragma once
#include <cstddef>
#include "../cuda_emu.h"
enum cudaError_t { cudaSuccess = 0 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
typedef struct CUevent_st* cudaEvent_t;
typedef struct CUstream_st* cudaStream_t;
struct cudaDeviceProp { char name[256]; int major, minor, multiProcessorCount, l2CacheSize; };
struct cudaFuncAttributes { size_t sharedSizeBytes, localSizeBytes; int numRegs; };
const char* cudaGetErrorString(cudaError_t);
cudaError_t cudaGetLastError();
cudaError_t cudaSetDevice(int);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp*, int);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMalloc(void**, size_t);
template <class T> cudaError_t cudaMalloc(T** p, size_t n) { return cudaMalloc((void**)p, n); }
cudaError_t cudaFree(void*);
cudaError_t cudaMemcpy(void*, const void*, size_t, cudaMemcpyKind);
cudaError_t cudaMemsetAsync(void*, int, size_t, cudaStream_t = 0);
cudaError_t cudaEventCreate(cudaEvent_t*);
cudaError_t cudaEventDestroy(cudaEvent_t);
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t);
cudaError_t cudaEventElapsedTime(float*, cudaEvent_t, cudaEvent_t);
template <class T> cudaError_t cudaFuncGetAttributes(cudaFuncAttributes*, T*);
template <class T> cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int*, T, int, size_t);
// stand-in for `kernel<<<grid, block, smem, stream>>>`: see syntax_check.sh
inline int emu_cfg(dim3, dim3 = dim3(), size_t = 0, cudaStream_t = 0) { return 0; }
