// The transpose family's kernel: y[b, c, r] = x[b, r, c], a tile of OPTIML_TILE_ROWS x OPTIML_TILE_COLS elements
// of x at a time through shared memory, so that both the reads of x and the writes of y are runs of whole
// chunks.
// The elements are moved as bits (a transpose computes nothing), so one kernel serves every element type of a
// size. The entry point takes the tensor program ABI: x, y, then every dimension's extent as a `long long` in
// program order (OPTIML_DIMS; OPTIML_BATCH, OPTIML_ROWS and OPTIML_COLS name them). The grid loops over the
// tiles, so any grid is correct and the launcher may cap it at a few blocks per SM.
//
// Options, set by the generated header:
//   OPTIML_ELEM_BYTES   2 or 4
//   OPTIML_CHUNK_BYTES  4, 8 or 16: the bytes one thread moves per global load or store
//   OPTIML_TILE_ROWS    rows of x per tile (32, 64 or 128)
//   OPTIML_TILE_COLS    columns of x per tile (32, 64 or 128)
//   OPTIML_THREADS      threads per block, dividing the chunks of a tile
//   OPTIML_PAD          4-byte words of padding per shared row (1 moves a column's elements to distinct banks)

#if OPTIML_ELEM_BYTES == 4
typedef unsigned int optiml_e;
#elif OPTIML_ELEM_BYTES == 2
typedef unsigned short optiml_e;
#else
#error "OPTIML_ELEM_BYTES must be 2 or 4"
#endif

#if OPTIML_CHUNK_BYTES == 16
typedef uint4 optiml_chunk;
#elif OPTIML_CHUNK_BYTES == 8
typedef uint2 optiml_chunk;
#elif OPTIML_CHUNK_BYTES == 4
typedef unsigned int optiml_chunk;
#else
#error "OPTIML_CHUNK_BYTES must be 4, 8 or 16"
#endif

// Elements per chunk; chunks per row of x's tile and of y's; each thread's chunks per tile.
#define OPTIML_V (OPTIML_CHUNK_BYTES / OPTIML_ELEM_BYTES)
#define OPTIML_X_ROW (OPTIML_TILE_COLS / OPTIML_V)
#define OPTIML_Y_ROW (OPTIML_TILE_ROWS / OPTIML_V)
#define OPTIML_ITERS (OPTIML_TILE_ROWS * OPTIML_X_ROW / OPTIML_THREADS)
// Padding in elements: OPTIML_PAD 4-byte bank words.
#define OPTIML_PAD_ELEMS (OPTIML_PAD * 4 / OPTIML_ELEM_BYTES)

// Rows of chunks the block's threads cover at once, in x's tile and in y's.
#define OPTIML_X_STEP (OPTIML_THREADS / OPTIML_X_ROW)
#define OPTIML_Y_STEP (OPTIML_THREADS / OPTIML_Y_ROW)

#if OPTIML_ITERS < 1 || OPTIML_ITERS * OPTIML_THREADS != OPTIML_TILE_ROWS * OPTIML_X_ROW
#error "OPTIML_THREADS must divide the chunks of a tile"
#endif
#if OPTIML_THREADS % OPTIML_TILE_ROWS != 0 || OPTIML_THREADS % OPTIML_TILE_COLS != 0
#error "a tile row's elements (so its chunks too) must divide OPTIML_THREADS"
#endif

union optiml_pack {
    optiml_chunk v;
    optiml_e e[OPTIML_V];
    // As 4-byte words: a chunk's elements are adjacent in a shared row too, and a row (padded by whole words)
    // keeps them word-aligned, so two 16-bit elements are stored with one instruction.
    unsigned int w[OPTIML_CHUNK_BYTES / 4];
};

// Elements each thread moves per batch on the element-by-element paths: all loaded, then all stored, so that a
// batch's loads are in flight together.
#define OPTIML_BATCH_ELEMS 4

extern "C" __global__ void __launch_bounds__(OPTIML_THREADS)
optiml_transpose(const optiml_e* __restrict__ x, optiml_e* __restrict__ y, OPTIML_DIMS) {
    __shared__ optiml_e tile[OPTIML_TILE_ROWS][OPTIML_TILE_COLS + OPTIML_PAD_ELEMS];
    const long long rows = OPTIML_ROWS, cols = OPTIML_COLS, batch = OPTIML_BATCH;
    const long long tile_rows = (rows + OPTIML_TILE_ROWS - 1) / OPTIML_TILE_ROWS;
    const long long tile_cols = (cols + OPTIML_TILE_COLS - 1) / OPTIML_TILE_COLS;
    const long long per_item = tile_rows * tile_cols;
    const long long tiles = batch * per_item;
    // Whole chunks need rows that are chunk multiples and aligned buffers; otherwise each thread moves single
    // elements, consecutive threads consecutive ones, so that a warp's accesses stay one contiguous run.
    const bool whole_x = cols % OPTIML_V == 0 && (unsigned long long)x % OPTIML_CHUNK_BYTES == 0;
    const bool whole_y = rows % OPTIML_V == 0 && (unsigned long long)y % OPTIML_CHUNK_BYTES == 0;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long item = t / per_item;
        const long long at = t - item * per_item;
        // Neighbouring blocks take neighbouring tiles of one band of rows.
        const long long r0 = (at / tile_cols) * OPTIML_TILE_ROWS;
        const long long c0 = (at % tile_cols) * OPTIML_TILE_COLS;
        const optiml_e* xs = x + item * rows * cols;
        optiml_e* ys = y + item * rows * cols;
        if (whole_x) {
            // A thread's chunks lie in one column of chunks, OPTIML_X_STEP rows apart: one address and a stride.
            const int i0 = threadIdx.x / OPTIML_X_ROW, j = (threadIdx.x % OPTIML_X_ROW) * OPTIML_V;
            const optiml_e* src = xs + (r0 + i0) * cols + c0 + j;
            const long long step = OPTIML_X_STEP * cols;
            // Every load of the tile is issued before the first shared-memory store.
            optiml_pack p[OPTIML_ITERS];
#pragma unroll
            for (int it = 0; it < OPTIML_ITERS; ++it) {
                if (r0 + i0 + it * OPTIML_X_STEP < rows && c0 + j < cols) {
                    p[it].v = *reinterpret_cast<const optiml_chunk*>(src + it * step);
                }
            }
#pragma unroll
            for (int it = 0; it < OPTIML_ITERS; ++it) {
                unsigned int* row = reinterpret_cast<unsigned int*>(&tile[i0 + it * OPTIML_X_STEP][j]);
#pragma unroll
                for (int w = 0; w < OPTIML_CHUNK_BYTES / 4; ++w) {
                    row[w] = p[it].w[w];
                }
            }
        } else {
            // Consecutive threads take consecutive elements of a row; a thread's elements lie in one column,
            // OPTIML_THREADS / OPTIML_TILE_COLS rows apart.
            const int i0 = threadIdx.x / OPTIML_TILE_COLS, j = threadIdx.x % OPTIML_TILE_COLS;
            const int rows_apart = OPTIML_THREADS / OPTIML_TILE_COLS;
#pragma unroll 1
            for (int i1 = i0; i1 < OPTIML_TILE_ROWS; i1 += OPTIML_BATCH_ELEMS * rows_apart) {
                optiml_e v[OPTIML_BATCH_ELEMS];
                const optiml_e* src = xs + (r0 + i1) * cols + c0 + j;
#pragma unroll
                for (int b = 0; b < OPTIML_BATCH_ELEMS; ++b) {
                    const int i = i1 + b * rows_apart;
                    v[b] = (i < OPTIML_TILE_ROWS && r0 + i < rows && c0 + j < cols)
                               ? src[(long long)b * rows_apart * cols]
                               : (optiml_e)0;
                }
#pragma unroll
                for (int b = 0; b < OPTIML_BATCH_ELEMS; ++b) {
                    const int i = i1 + b * rows_apart;
                    if (i < OPTIML_TILE_ROWS) {
                        tile[i][j] = v[b];
                    }
                }
            }
        }
        __syncthreads();
        // Row i of y's tile is column c0 + i of x; it runs along x's rows. Elements of the tile outside x were
        // never written, and are never read into y.
        if (whole_y) {
            const int i0 = threadIdx.x / OPTIML_Y_ROW, j = (threadIdx.x % OPTIML_Y_ROW) * OPTIML_V;
            optiml_e* dst = ys + (c0 + i0) * rows + r0 + j;
            const long long step = OPTIML_Y_STEP * rows;
            optiml_pack p[OPTIML_ITERS];
#pragma unroll
            for (int it = 0; it < OPTIML_ITERS; ++it) {
#pragma unroll
                for (int e = 0; e < OPTIML_V; ++e) {
                    p[it].e[e] = tile[j + e][i0 + it * OPTIML_Y_STEP];
                }
            }
#pragma unroll
            for (int it = 0; it < OPTIML_ITERS; ++it) {
                if (c0 + i0 + it * OPTIML_Y_STEP < cols && r0 + j < rows) {
                    *reinterpret_cast<optiml_chunk*>(dst + it * step) = p[it].v;
                }
            }
        } else {
            const int i0 = threadIdx.x / OPTIML_TILE_ROWS, j = threadIdx.x % OPTIML_TILE_ROWS;
            const int rows_apart = OPTIML_THREADS / OPTIML_TILE_ROWS;
#pragma unroll 1
            for (int i1 = i0; i1 < OPTIML_TILE_COLS; i1 += OPTIML_BATCH_ELEMS * rows_apart) {
                optiml_e v[OPTIML_BATCH_ELEMS];
                optiml_e* dst = ys + (c0 + i1) * rows + r0 + j;
#pragma unroll
                for (int b = 0; b < OPTIML_BATCH_ELEMS; ++b) {
                    const int i = i1 + b * rows_apart;
                    v[b] = i < OPTIML_TILE_COLS ? tile[j][i] : (optiml_e)0;
                }
#pragma unroll
                for (int b = 0; b < OPTIML_BATCH_ELEMS; ++b) {
                    const int i = i1 + b * rows_apart;
                    if (i < OPTIML_TILE_COLS && c0 + i < cols && r0 + j < rows) {
                        dst[(long long)b * rows_apart * rows] = v[b];
                    }
                }
            }
        }
        // The next tile's stores to shared memory wait for every read of this one.
        __syncthreads();
    }
}
