// Host-side launch geometry for optiml_gemv (gemv_f32.cu): what the Rust
// launcher has to compute. Shared by gemv_harness.cu and the CPU emulation
// test (emu/gemv_emu_test.cpp). Include after gemv_f32.cu (needs its macros).
#pragma once

// The kernel handles N == 1 or M == 1 only.
static inline bool gemv_applicable(int M, int N) { return M >= 1 && N >= 1 && (N == 1 || M == 1); }

// Output length (C is M x 1 or 1 x N).
static inline int gemv_len(int M, int N) { return N == 1 ? M : N; }

// dot mode: the matrix operand is contiguous along K (same rule as the kernel).
static inline bool gemv_is_dot(int M, int N) {
    return N == 1 ? (OPTIML_TRANS_A == 0 || M == 1) : (OPTIML_TRANS_B != 0);
}

// Outputs per block in the mode used for (M, N).
static inline int gemv_tile(int M, int N) { return gemv_is_dot(M, N) ? OPTIML_GEMV_DOT_ROWS : OPTIML_GEMV_COL_COLS; }

// grid = (ceil(L / TILE), 1, min(batch, 65535)); gx_cap > 0 caps grid.x
// (any grid.x >= 1 is correct: the kernel loops over tiles).
static inline dim3 gemv_grid(int batch, int M, int N, int gx_cap = 0) {
    const long long L = gemv_len(M, N), T = gemv_tile(M, N);
    long long gx = (L + T - 1) / T;
    if (gx < 1) gx = 1;
    if (gx_cap > 0 && gx > gx_cap) gx = gx_cap;
    const int gz = batch < 65535 ? batch : 65535;
    return dim3((unsigned)gx, 1u, (unsigned)(gz < 1 ? 1 : gz));
}
