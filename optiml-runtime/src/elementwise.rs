//! Launching generated elementwise kernels: `out[i] = f(x[i])`, `x[i] ⊕ y[i]` or `x[i] ⊕ s`.

use crate::kernel::{KernelModule, Target};
use crate::launch::Launch;
use crate::{Error, check};
use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

/// The arguments of one elementwise launch.
pub struct ElementwiseArgs<'a> {
    /// The input.
    pub x: &'a CudaSlice<f32>,
    /// The second tensor, for binary kernels with a tensor operand.
    pub y: Option<&'a CudaSlice<f32>>,
    /// The output.
    pub out: &'a mut CudaSlice<f32>,
    /// Elements to process; `None` means all of `out`, and then every buffer must have `out`'s length.
    pub n: Option<usize>,
    /// The scalar operand (ignored by kernels without one).
    pub s: f32,
}

/// Checks `args` and launches `kernel` on `stream`.
///
/// # Errors
/// [`Error::Shape`] when a buffer is shorter than `n`, [`Error::LengthMismatch`] when `n` is not given and the
/// buffers differ in length, [`Error::ContextMismatch`], and the loading errors of [`KernelModule::load`].
pub fn launch(
    kernel: &'static KernelModule,
    stream: &CudaStream,
    args: ElementwiseArgs<'_>,
) -> Result<(), Error> {
    let name = kernel.name();
    let n = check_args(name, stream, &args)?;
    if n == 0 {
        return Ok(());
    }
    let loaded = kernel.load(stream)?;
    launch_checked(name, stream, loaded.target(None), n, args)
}

/// Checks `args` and launches a function loaded by someone else (the evaluation worker), exactly as
/// [`launch`] would.
///
/// # Errors
/// As [`launch`], less the loading errors.
pub fn launch_target(
    name: &'static str,
    stream: &CudaStream,
    target: Target<'_>,
    args: ElementwiseArgs<'_>,
) -> Result<(), Error> {
    let n = check_args(name, stream, &args)?;
    if n == 0 {
        return Ok(());
    }
    launch_checked(name, stream, target, n, args)
}

/// Checks the buffers; returns the element count.
fn check_args(
    name: &'static str,
    stream: &CudaStream,
    args: &ElementwiseArgs<'_>,
) -> Result<usize, Error> {
    let n = match args.n {
        Some(n) => n,
        None => {
            let len = args.out.len();
            for (arg, buf) in [("x", Some(args.x)), ("y", args.y)] {
                if let Some(buf) = buf
                    && buf.len() != len
                {
                    return Err(Error::LengthMismatch {
                        kernel: name,
                        arg,
                        got: buf.len(),
                        other: "out",
                        expected: len,
                    });
                }
            }
            len
        }
    };
    check::buffer(name, stream, "x", args.x, n)?;
    if let Some(y) = args.y {
        check::buffer(name, stream, "y", y, n)?;
    }
    check::buffer(name, stream, "out", args.out, n)?;
    Ok(n)
}

fn launch_checked(
    name: &'static str,
    stream: &CudaStream,
    target: Target<'_>,
    n: usize,
    args: ElementwiseArgs<'_>,
) -> Result<(), Error> {
    let Launch::Elementwise {
        threads,
        per_thread,
        blocks_per_sm,
    } = target.launch
    else {
        return Err(Error::NoVariant {
            kernel: name,
            device: "this launcher".into(),
            available: "a non-elementwise variant".into(),
        });
    };
    let per_block = (threads as usize) * (per_thread as usize);
    let blocks = n
        .div_ceil(per_block)
        .min((target.sm_count * blocks_per_sm) as usize)
        .max(1);
    let cfg = LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    };
    let null: u64 = 0;
    let len = n as i64;
    let mut builder = stream.launch_builder(target.function);
    builder.arg(args.x);
    match args.y {
        Some(y) => builder.arg(y),
        None => builder.arg(&null),
    };
    builder.arg(&mut *args.out).arg(&len).arg(&args.s);
    // SAFETY: the argument list matches the `optiml_elementwise` ABI (x, y, out pointers, i64 length, f32
    // scalar); every buffer holds at least `n` elements in the stream's context, and the kernel's grid-stride
    // loop touches indices below `n` only.
    unsafe { builder.launch(cfg) }.map_err(Error::driver(name, "launch"))?;
    Ok(())
}
