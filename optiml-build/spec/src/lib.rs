//! The kernel spec model shared by `#[optiml::kernel]` and `optiml-build`.
//!
//! Both consumers run the same stages, so they cannot disagree about what a kernel means:
//!
//! ```text
//! "batched matmul, f32" ──parse──▶ Spec ──check against the fn signature──▶ Binding ──▶ KernelId (sha256)
//! ```
//!
//! * [`parse`] turns the spec text into a typed [`Spec`] (or a [`SpecError`] naming the word it could not place);
//! * [`signature::bind`] checks a bodyless `fn` signature against the spec and returns a [`Binding`] that says which
//!   parameter plays which role (or every mistake at once, each spanned to its token);
//! * [`KernelId`] hashes the canonical spec and binding; the macro and the build script name generated files by it.
//!
//! ```
//! let spec = optiml_spec::parse("bmm, float32, B transposed").unwrap();
//! assert_eq!(spec.canonical(), "matmul batched f32 row-major a:n b:t batch=? m=? n=? k=?");
//! // A 3-D tensor times one matrix: B is shared by every batch item.
//! let spec = optiml_spec::parse("batched matmul, B shared").unwrap();
//! assert_eq!(spec.canonical(), "matmul batched f32 row-major a:n b:n:shared batch=? m=? n=? k=?");
//! ```

pub mod env;
pub mod error;
mod key;
mod model;
mod parse;
pub mod program;
pub mod reference;
mod seed;
pub mod signature;

pub use error::{Errors, SpecError};
pub use key::{KernelId, sha256_hex};
pub use model::{
    Activation, DType, Dim, Family, Layout, MatmulNames, MatmulSpec, Precision, Spec, Triangle,
};
pub use parse::{MAX_SPEC_CHARS, parse};
pub use seed::{KernelArgs, Seed, SeedError};
pub use signature::{Access, Binding, Kind, Param, Role, bind};

/// The version of the spec model and its canonical form; part of every key, so a change here invalidates caches.
pub const SPEC_FORMAT: u32 = 1;
