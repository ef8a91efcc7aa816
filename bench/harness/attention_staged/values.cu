// Stage 3 of the staged attention prototype: y = P v per item, 16-bit P, v and y (the product's wgmma template,
// NN layout: v is stored keys × features, MN-major for the wgmma B operand, which the 16-bit wgmma transposes).
#include <cuda_runtime.h>
#include <cstdio>
#define OPTIML_KERNEL optiml_attn_values
#define OPTIML_TU_LAUNCH attn_values_launch
#define OPTIML_TRANS_A 0
#define OPTIML_TRANS_B 0
#define OPTIML_C_F32 0
#include "matmul_wgmma_16.cu"
#include "gemm_tu.cuh"
