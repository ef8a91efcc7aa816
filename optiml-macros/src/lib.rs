//! `#[optiml::kernel("…")]`. Use it through the `optiml` crate. This crate is a shim: the expansion lives in a
//! module on `proc-macro2`, and the spec logic in `optiml-spec`, so both can be tested without a compiler session.

mod expand;

use proc_macro::TokenStream;

/// Turns a bodyless function signature into a typed, bounds-checked launcher of the kernel the spec names.
///
/// ```text
/// #[optiml::kernel("batched matmul, f32")]
/// pub fn bmm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, batch: usize, m: usize, n: usize, k: usize);
/// // becomes
/// pub fn bmm(stream: &CudaStream, a: &CudaSlice<f32>, …, k: usize) -> Result<(), optiml::Error>;
/// ```
///
/// The kernel itself is generated, compiled and cached by `optiml_build::Builder` in the crate's `build.rs`; see
/// the `optiml` crate docs.
#[proc_macro_attribute]
pub fn kernel(args: TokenStream, input: TokenStream) -> TokenStream {
    expand::kernel(args.into(), input.into())
        .unwrap_or_else(|e| e.to_compile_error())
        .into()
}
