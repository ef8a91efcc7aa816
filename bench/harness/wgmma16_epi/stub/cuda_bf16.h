#pragma once
#define __CUDA_BF16_TYPES_EXIST__
struct __nv_bfloat16 { unsigned short x; };
__nv_bfloat16 __float2bfloat16_rn(float);
