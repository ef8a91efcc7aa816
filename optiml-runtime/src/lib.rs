//! Loads and launches the kernels that `optiml-build` generated; the functions `#[optiml::kernel]` expands to
//! call into this crate, and users reach it as `optiml::runtime`.
//!
//! * [`probe`] finds the CUDA driver and devices without panicking when there is none;
//! * [`KernelModule`] holds a kernel's compiled variants (CUBIN per architecture, PTX as the fallback) and loads
//!   the right one once per CUDA context;
//! * [`matmul`] and [`program`] check a launch's arguments against its dimensions and launch it, so a wrong
//!   length is an [`Error`], never an out-of-bounds access;
//! * [`dispatch`] picks the variant a matmul call launches at a shape nobody tuned: the fastest of the default and
//!   the nearest tuned variants, timed on the first call there.
//!
//! ```no_run
//! # fn main() -> Result<(), optiml_runtime::Error> {
//! let ctx = optiml_runtime::probe::context(0)?; // Err(Error::NoDriver) on a machine without CUDA
//! let stream = ctx.default_stream();
//! # let _ = stream; Ok(()) }
//! ```

/// The cudarc version the runtime is built against.
pub use cudarc;

/// The `half` crate whose `bf16` and `f16` are the elements of 16-bit matmul buffers (`CudaSlice<half::bf16>`).
pub use half;

mod arch;
mod args;
mod attention;
mod check;
pub mod dispatch;
mod error;
mod kernel;
mod launch;
pub mod matmul;
pub mod probe;
pub mod program;
mod workspace;

pub use arch::{Arch, ArchParseError};
pub use args::{Args, Function, Param};
pub use error::Error;
pub use kernel::{
    Artifacts, KernelModule, Loaded, LoadedVariant, Target, Variant, load_companions,
};
pub use launch::{
    ATTN_MAX_KEYS, ATTN_SCORES_ENTRY, ATTN_SCORES_SLOT, ATTN_SOFTMAX_ENTRY, ATTN_SOFTMAX_SLOT,
    ATTN_SOFTMAX_THREADS, ATTN_VALUES_ENTRY, ATTN_VALUES_SLOT, COMPANION_SLOTS, Companion,
    Companions, Half, Kernel16, Launch, ProgramLaunch, StagedAttention, TreeLaunch, Wgmma16,
};

/// The product of several dimension arguments that a kernel takes as one (a matmul batching over `b` and `h`
/// launches `b · h` products), or which one overflowed.
///
/// # Errors
/// [`Error::Dimension`] naming `arg` when the product does not fit a `usize`.
pub fn dims_product(
    kernel: &'static str,
    arg: &'static str,
    dims: &[usize],
) -> Result<usize, Error> {
    check::product(kernel, arg, dims)
}

/// Converts a dimension argument of any primitive integer type to `usize`, or says which one was out of range.
///
/// # Errors
/// [`Error::Dimension`] when `value` is negative or does not fit a `usize`.
pub fn dim<T: TryInto<usize> + Copy + std::fmt::Display>(
    kernel: &'static str,
    name: &'static str,
    value: T,
) -> Result<usize, Error> {
    value.try_into().map_err(|_| Error::Dimension {
        kernel,
        arg: name,
        value: value.to_string(),
        reason: "must be a non-negative integer that fits in usize",
    })
}
