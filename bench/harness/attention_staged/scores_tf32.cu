// Stage 1 of the staged attention prototype for a `tf32` spec: S = scale · q kᵀ per item on TF32 tensor cores
// (the product's TF32 wgmma template, NT: both operands K-major, its SS form).
#include <cuda_runtime.h>
#define optiml_matmul optiml_attn_scores_tf32
#define optiml_transpose_a optiml_attn_scores_tf32_transpose
#define OPTIML_TU_LAUNCH attn_scores_launch
#define OPTIML_TRANS_A 0
#define OPTIML_TRANS_B 1
#define OPTIML_HAS_ALPHA 1
#include "matmul_wgmma_tf32.cu"
#include "gemm_tu_tf32.cuh"
