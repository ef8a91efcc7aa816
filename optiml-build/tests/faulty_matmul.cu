// A plain matmul with the optiml_matmul ABI, and the ways a candidate can be wrong (FAULT selects one).
// The evaluator's fault-injection test feeds each to the gate; every one must be rejected.
//
//   0 correct            4 skip-work: stops the reduction at k = 64
//   1 out-of-bounds      5 stale: after the gate's launches, returns without writing (reuses old output)
//   2 hang               6 partial: writes only whole 16x16 tiles
//   3 race               7 side-stream: launches its work as a child grid (rejected at compile)
//                        8 trap
//                        9 writes into its input: flips the lowest bit of elements of A (the output moves by
//                          about 1e-7, within the gate's tolerance)
//                       10 forges its verdict: skips work as 4 does, and its first launch prints the bytes of a
//                          "measured" response frame (FORGED_BYTES, made by the test) with device printf
//                       11 detects the poison: computes only when its output holds NaN (as the gate's buffers
//                          did before every run), and otherwise returns at once, keeping whatever C held
//                       12 replays a kept output: computes into C and a __device__ copy while the gate's shapes
//                          and the first runs go by, then copies the kept output into C without computing
//                       13 another parameter list: declares one more parameter than its launch passes (the
//                          driver would read past the argument list)
//                       14 one past the end: computes C correctly, and its last thread also writes the element just
//                          past C's end (inside the allocation, so the driver sees nothing)
//                       15 one before the start: as 14, the element just before C's first
//                       16 wrong in one tile of the dispatch shape only: off by 0.5 in the 16 x 16 tile (13, 21) of
//                          batch item 2 when the shape is 4 x 512 x 512 (the sampled check missed it most times)
//                       17 writes into its input at the dispatch shape only: flips the lowest bit of one element
//                          of A in batch item 1
//                       18 rounds A to bf16: passes TF32's tolerance on ordinary inputs (about 1.6e-3 relative L2
//                          against 2e-3; rounding B too gives about 2.3e-3, and fails it); under a TF32 spec, the
//                          TF32-exact inputs show it
//                       19 reads past the end of B: one volatile read 64 KiB past it, whose value is never used
//                          (no output changes, no guard is written, the memory is mapped): only compute-sanitizer's
//                          memcheck sees it
#ifndef FAULT
#define FAULT 0
#endif

#if FAULT == 18
// Round to nearest even to bf16's 8 significant bits, kept in a float.
__device__ __forceinline__ float optiml_bf16(float x) {
    unsigned u = __float_as_uint(x);
    return __uint_as_float((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}
#endif

__device__ unsigned int optiml_calls;
__device__ unsigned int optiml_never_set;
#if FAULT == 12
__device__ float optiml_kept[1 << 20];
#endif
#if FAULT == 10
__device__ unsigned int optiml_printed;
__device__ const unsigned char optiml_forged[] = {FORGED_BYTES};
#endif

extern "C" __global__ void optiml_matmul(const float* A, const float* B, float* C, const float* bias,
                                         int batch, int M, int N, int K, long long sa, long long sb,
                                         long long sc, float alpha, float beta
#if FAULT == 13
                                         , int extra
#endif
                                         ) {
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
#if FAULT == 5
    // Launches so far (one thread per launch counts): the gate's shapes come first, then the timed shape.
    if (atomicAdd(&optiml_calls, 0) >= STALE_AFTER) return;
#endif
#if FAULT == 12
    if (atomicAdd(&optiml_calls, 0) >= STALE_AFTER) {
        for (int z = blockIdx.z; z < batch; z += gridDim.z) {
            const long long at = ((long long)z * M + row) * N + col;
            if (row < M && col < N && at < (1 << 20)) C[z * sc + (long long)row * N + col] = optiml_kept[at];
        }
        return;
    }
#endif
#if FAULT == 11
    if (M > 0 && N > 0 && C[0] == C[0]) return;  // not NaN: not a gate's buffer
#endif
#if FAULT == 7
    if (K < 0) optiml_matmul<<<1, 1>>>(A, B, C, bias, batch, M, N, K, sa, sb, sc, alpha, beta);
#endif
#if FAULT == 3
    __shared__ float acc[16][16];
#endif
#if FAULT == 10
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 &&
        atomicAdd(&optiml_printed, 1u) == 0)
        for (int i = 0; i < (int)sizeof(optiml_forged); ++i) printf("%c", optiml_forged[i]);
#endif
    for (int z = blockIdx.z; z < batch; z += gridDim.z) {
        const float* a = A + z * sa;
        const float* b = B + z * sb;
        float* c = C + z * sc;
#if FAULT == 3
        // Every thread of a row adds into the same shared accumulators without atomics: updates are lost.
        acc[ty][tx] = 0.0f;
        __syncthreads();
        if (row < M) {
            for (int k = tx; k < K; k += 16)
                for (int j = 0; j < 16; ++j)
                    if (blockIdx.x * 16 + j < N) acc[ty][j] += a[(long long)row * K + k] * b[(long long)k * N + blockIdx.x * 16 + j];
        }
        __syncthreads();
        if (row < M && col < N) c[(long long)row * N + col] = acc[ty][tx];
        __syncthreads();
        continue;
#endif
        if (row >= M || col >= N) continue;
#if FAULT == 6
        if (blockIdx.y * 16 + 16 > M || blockIdx.x * 16 + 16 > N) continue;
#endif
        float s = 0.0f;
#if FAULT == 4 || FAULT == 10
        int kend = K < 64 ? K : 64;
#else
        int kend = K;
#endif
#if FAULT == 19
        if (row == 0 && col == 0) {
            const float far = ((volatile const float*)b)[(long long)K * N + 16384];
            if (far == 1.5e-30f && K < 0) s += far;
        }
#endif
#if FAULT == 18
        for (int k = 0; k < kend; ++k)
            s += optiml_bf16(a[(long long)row * K + k]) * b[(long long)k * N + col];
#else
        for (int k = 0; k < kend; ++k) s += a[(long long)row * K + k] * b[(long long)k * N + col];
#endif
#if FAULT == 1
        c[(long long)row * N + col + (1ll << 34)] = s;
#elif FAULT == 2
        // An atomic read is a side effect, so the compiler keeps the loop (an empty one it may delete).
        if (row == 0 && col == 0)
            while (atomicAdd(&optiml_never_set, 0) == 0) {
            }
        c[(long long)row * N + col] = s;
#elif FAULT == 8
        if (row == M - 1 && col == N - 1) __trap();
        c[(long long)row * N + col] = s;
#elif FAULT == 9
        if (col < K) atomicXor(reinterpret_cast<unsigned int*>(const_cast<float*>(a)) + (long long)row * K + col, 1u);
        c[(long long)row * N + col] = s;
#elif FAULT == 14
        if (z == batch - 1 && row == M - 1 && col == N - 1) c[(long long)row * N + col + 1] = s;
        c[(long long)row * N + col] = s;
#elif FAULT == 15
        if (z == 0 && row == 0 && col == 0) c[-1] = s;
        c[(long long)row * N + col] = s;
#elif FAULT == 16
        if (batch == 4 && M == 512 && N == 512 && z == 2 && blockIdx.y == 13 && blockIdx.x == 21) s += 0.5f;
        c[(long long)row * N + col] = s;
#elif FAULT == 17
        if (batch == 4 && M == 512 && N == 512 && z == 1 && row == 7 && col == 9)
            atomicXor(reinterpret_cast<unsigned int*>(const_cast<float*>(a)) + 5, 1u);
        c[(long long)row * N + col] = s;
#elif FAULT == 12
        const long long at = ((long long)z * M + row) * N + col;
        if (at < (1 << 20)) optiml_kept[at] = s;
        c[(long long)row * N + col] = s;
#else
        c[(long long)row * N + col] = s;
#endif
    }
#if FAULT == 5 || FAULT == 12
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) atomicAdd(&optiml_calls, 1);
#endif
}
