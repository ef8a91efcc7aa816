// Stage 3 of the staged attention prototype for a `tf32` spec: y = P v per item on TF32 tensor cores (the
// product's TF32 wgmma template, NN: v reaches the tensor cores through registers, its RS form).
#include <cuda_runtime.h>
#define optiml_matmul optiml_attn_values_tf32
#define optiml_transpose_a optiml_attn_values_tf32_transpose
#define OPTIML_TU_LAUNCH attn_values_launch
#define OPTIML_TRANS_A 0
#define OPTIML_TRANS_B 0
#include "matmul_wgmma_tf32.cu"
#include "gemm_tu_tf32.cuh"
