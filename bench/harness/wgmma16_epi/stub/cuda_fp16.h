#pragma once
#define __CUDA_FP16_TYPES_EXIST__
struct __half { unsigned short x; };
__half __float2half_rn(float);
float __half2float(__half);
