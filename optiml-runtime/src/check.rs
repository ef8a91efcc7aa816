//! Argument checks shared by the launchers.

use crate::Error;
use cudarc::driver::{CudaSlice, CudaStream};

/// `dims` multiplied, or [`Error::Dimension`] naming `arg` on overflow.
pub(crate) fn product(
    kernel: &'static str,
    arg: &'static str,
    dims: &[usize],
) -> Result<usize, Error> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| Error::Dimension {
            kernel,
            arg,
            value: format!("{dims:?}"),
            reason: "addresses more elements than fit in usize",
        })
}

/// `buf` lives in `stream`'s context and holds at least `needed` elements.
pub(crate) fn buffer<T>(
    kernel: &'static str,
    stream: &CudaStream,
    arg: &'static str,
    buf: &CudaSlice<T>,
    needed: usize,
) -> Result<(), Error> {
    if buf.stream().context() != stream.context() {
        return Err(Error::ContextMismatch { kernel, arg });
    }
    if buf.len() < needed {
        return Err(Error::Shape {
            kernel,
            arg,
            expected: needed,
            got: buf.len(),
        });
    }
    Ok(())
}
