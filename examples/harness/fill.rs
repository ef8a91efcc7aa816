//! Inputs and outputs before a launch: random values from a seed that an error message can name, and output
//! buffers full of NaN, so that anything a kernel fails to write fails the check instead of passing as stale data.

use optiml::cudarc::driver::{CudaSlice, CudaStream, DeviceRepr};
use optiml::half::{bf16, f16};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

use crate::BoxError;

/// An element type the examples' kernels read and write: fp32, or a 16-bit float (`bf16`, `f16`) stored 16-bit and
/// multiplied and accumulated in fp32.
pub trait Element: DeviceRepr + Copy + Into<f64> {
    /// How the examples print the type.
    const NAME: &'static str;
    /// The NaN a poisoned buffer holds.
    const NAN: Self;
    /// 1 and 0, cuBLAS's alpha and beta (cudarc widens 16-bit ones to fp32 for the fp32 compute type).
    const ONE: Self;
    /// See [`Element::ONE`].
    const ZERO: Self;
    /// `x` rounded to nearest.
    fn from_f32(x: f32) -> Self;
}

impl Element for f32 {
    const NAME: &'static str = "fp32";
    const NAN: Self = f32::NAN;
    const ONE: Self = 1.0;
    const ZERO: Self = 0.0;
    fn from_f32(x: f32) -> Self {
        x
    }
}

/// The 16-bit types: `half`'s constants and rounding.
macro_rules! element16 {
    ($($t:ident: $name:literal),*) => {$(
        impl Element for $t {
            const NAME: &'static str = $name;
            const NAN: Self = $t::NAN;
            const ONE: Self = $t::ONE;
            const ZERO: Self = $t::ZERO;
            fn from_f32(x: f32) -> Self {
                $t::from_f32(x)
            }
        }
    )*};
}

element16!(bf16: "bf16", f16: "fp16");

/// `len` values uniform in [-1, 1) from a fresh seed (returned, so a failure can name it and be replayed),
/// rounded to `T`: the values a kernel and its baseline both read, and the reference reads back exactly. |x| < 1
/// keeps a K-term product below K in magnitude, far inside fp16's range (65504) for every K the examples use.
pub fn random<T: Element>(len: usize) -> (Vec<T>, u64) {
    let seed = rand::random();
    let mut rng = StdRng::seed_from_u64(seed);
    (
        (0..len)
            .map(|_| T::from_f32(rng.random_range(-1.0f32..1.0)))
            .collect(),
        seed,
    )
}

/// A device buffer of `len` NaNs: anything the kernel fails to write stays NaN and fails the check.
pub fn poisoned<T: Element>(
    stream: &Arc<CudaStream>,
    len: usize,
) -> Result<CudaSlice<T>, BoxError> {
    Ok(stream.clone_htod(&vec![T::NAN; len])?)
}
