//! The harness every benchmark example shares, so that a program holds only its kernels, its cases, how it
//! launches them and its reference:
//!
//! - [`device`]: the GPU (or saying plainly there is none), its description and the run's date.
//! - [`fill`]: random inputs (32- and 16-bit, seeds kept for the error messages) and NaN-poisoned outputs.
//! - [`check`]: outputs against a float64 reference, in full or sampled, and how far two outputs lie apart.
//! - [`time`](mod@time): CUDA-event timing, alone or in alternating rounds against a baseline, medians, L2 flushed when asked.
//! - [`matmul`]: the products' shapes, operands and float64 reference, and cuBLAS computing the same product.
//! - [`library`]: the best library call for a product (cuBLAS with a workspace, cuBLASLt's heuristic's algorithms),
//!   the baseline a matmul row is judged against.
//! - [`report`]: dates, geometric means, markdown tables and the JSON + markdown files a run leaves.
//! - [`sweep`]: the matmul sweeps' driver: case → check → time against cuBLAS → row → table, per element type.

pub mod check;
pub mod device;
pub mod fill;
pub mod library;
pub mod matmul;
pub mod report;
pub mod sweep;
pub mod time;

pub use check::{check_sampled, gelu, rel_diff, silu};
pub use device::{BoxError, Device, arg_value, describe, gpu_or_explain};
pub use fill::{Element, poisoned, random};
pub use matmul::{CublasGemm, GemmShape, Operands, check_matmul, cublas_gemm};
pub use report::{geomean, show_geomean, today};
pub use time::{Stats, copy_bandwidth, time, time_pair};
