// A hand-written row softmax, as an application might already have one: one block of 256 threads per row,
// looping over rows. Named as the seed of `softmax_seeded` in src/lib.rs; optiml verifies it against the
// spec's float64 reference and keeps it only where it is faster than the generated kernels.

__device__ float block_reduce(float v, bool is_max) {
    __shared__ float partial[8];
    for (int o = 16; o > 0; o >>= 1) {
        float other = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = partial[lane % 8];
    for (int o = 4; o > 0; o >>= 1) {
        float other = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    __syncthreads();  // partial[] is reused by the next call
    return v;
}

extern "C" __global__ void softmax_rows(const float* x, float* y, long long rows, long long cols) {
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* in = x + r * cols;
        float* out = y + r * cols;
        float m = -__int_as_float(0x7f800000);  // -inf: NVRTC has no <math.h> for INFINITY
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
        m = block_reduce(m, true);
        float s = 0.0f;
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(in[c] - m);
        s = block_reduce(s, false);
        float inv = 1.0f / s;
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(in[c] - m) * inv;
    }
}
