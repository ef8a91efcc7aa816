//! Verified, tuned CUDA kernels from a one-line spec, generated at `cargo build` time.
//!
//! ```toml
//! # Cargo.toml
//! [dependencies]
//! optiml = "0.1"
//! [build-dependencies]
//! optiml-build = "0.1"
//! ```
//!
//! ```ignore
//! // build.rs: scans the crate's sources for #[optiml::kernel], generates, compiles and caches each kernel
//! fn main() {
//!     optiml_build::Builder::new().compile().unwrap_or_else(|e| e.exit());
//! }
//! ```
//!
//! ```ignore
//! // src/lib.rs
//! use optiml::cudarc::driver::CudaSlice;
//!
//! #[optiml::kernel("batched matmul, f32")]
//! pub fn bmm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, batch: usize, m: usize, n: usize, k: usize);
//!
//! // anywhere: typed, bounds-checked, launches the generated kernel on `stream`
//! bmm(&stream, &a, &b, &mut c, 256, 1024, 1024, 1024)?;
//! ```
//!
//! (Both snippets are `ignore`d here because a doctest has no build script; `examples/` builds exactly this.)
//!
//! A build on a machine without a GPU or CUDA toolkit takes kernels from the cache: `target/optiml/`, then the
//! committed `.optiml/` folder that `cargo optiml prepare` fills. See `optiml_build` for the cache, the
//! environment variables and the spec language.

pub use optiml_macros::kernel;
pub use optiml_runtime as runtime;
pub use optiml_runtime::Error;

/// The cudarc this crate was built against: take `CudaStream`, `CudaSlice` and friends from here so that the
/// generated functions and your code agree on one version.
pub use optiml_runtime::cudarc;

/// The `half` crate this crate was built against: the element types of bf16 and f16 matmul buffers
/// (`CudaSlice<optiml::half::bf16>`).
pub use optiml_runtime::half;
