// Stage 1 of the staged attention prototype: S = scale · q kᵀ per item, 16-bit q and k, fp32 S (the product's
// wgmma template, NT layout: k is stored keys × features, which is K-major for the wgmma B operand).
#include <cuda_runtime.h>
#include <cstdio>
#define OPTIML_KERNEL optiml_attn_scores
#define OPTIML_TU_LAUNCH attn_scores_launch
#define OPTIML_TRANS_A 0
#define OPTIML_TRANS_B 1
#define OPTIML_C_F32 1
#define OPTIML_HAS_ALPHA 1
#include "matmul_wgmma_16.cu"
#include "gemm_tu.cuh"
