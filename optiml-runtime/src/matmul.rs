//! Launching generated matmul kernels: `C = act(alpha · op(A) · op(B) + beta · C + bias)` over a batch.

use crate::kernel::{KernelModule, Launch, Target};
use crate::{Error, check};
use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

/// The arguments of one matmul launch. Matrices are row-major and packed: batch item `i` of `A` starts at
/// `i · m · k`, of `B` at `i · k · n`, of `C` at `i · m · n`.
pub struct MatmulArgs<'a> {
    /// `m × k` (or `k × m` when the spec transposes A), per batch item.
    pub a: &'a CudaSlice<f32>,
    /// `k × n` (or `n × k` when the spec transposes B), per batch item.
    pub b: &'a CudaSlice<f32>,
    /// `m × n`, per batch item.
    pub c: &'a mut CudaSlice<f32>,
    /// Length `n`, when the spec has a bias.
    pub bias: Option<&'a CudaSlice<f32>>,
    /// Number of matrices.
    pub batch: usize,
    /// Rows of `C`.
    pub m: usize,
    /// Columns of `C`.
    pub n: usize,
    /// Reduction dimension.
    pub k: usize,
    /// Scale of the product (1 when the spec has no alpha).
    pub alpha: f32,
    /// Scale of the old `C` (ignored unless the spec has beta).
    pub beta: f32,
}

/// Largest `m`, `n`, `k` or batch the kernels index with 32-bit block coordinates.
const MAX_DIM: usize = i32::MAX as usize;

/// Checks `args` against each other and launches `kernel` on `stream`.
///
/// # Errors
/// [`Error::Dimension`] for a dimension over `i32::MAX`, [`Error::Shape`] for a buffer shorter than its
/// dimensions need, [`Error::ContextMismatch`] for a buffer of another context, and the loading errors of
/// [`KernelModule::load`]. Nothing is launched unless every check passes.
pub fn launch(
    kernel: &'static KernelModule,
    stream: &CudaStream,
    args: MatmulArgs<'_>,
) -> Result<(), Error> {
    let name = kernel.name();
    if !check_args(name, stream, &args)? {
        return Ok(());
    }
    let loaded = kernel.load(stream)?;
    let shape = [args.batch, args.m, args.n, args.k].map(|d| d as u64);
    launch_checked(name, stream, loaded.target(Some(shape)), args)
}

/// Checks `args` and launches a function loaded by someone else (the evaluation worker times candidates
/// through this, so a candidate is launched exactly as the generated wrapper would launch it).
///
/// # Errors
/// As [`launch`], less the loading errors.
pub fn launch_target(
    name: &'static str,
    stream: &CudaStream,
    target: Target<'_>,
    args: MatmulArgs<'_>,
) -> Result<(), Error> {
    if !check_args(name, stream, &args)? {
        return Ok(());
    }
    launch_checked(name, stream, target, args)
}

/// Checks every buffer against the dimensions; `Ok(false)` when there is nothing to compute.
fn check_args(
    name: &'static str,
    stream: &CudaStream,
    args: &MatmulArgs<'_>,
) -> Result<bool, Error> {
    for (arg, v) in [
        ("batch", args.batch),
        ("m", args.m),
        ("n", args.n),
        ("k", args.k),
    ] {
        if v > MAX_DIM {
            return Err(Error::Dimension {
                kernel: name,
                arg,
                value: v.to_string(),
                reason: "is over i32::MAX",
            });
        }
    }
    let per_a = check::product(name, "a", &[args.m, args.k])?;
    let per_b = check::product(name, "b", &[args.k, args.n])?;
    let per_c = check::product(name, "c", &[args.m, args.n])?;
    check::buffer(
        name,
        stream,
        "a",
        args.a,
        check::product(name, "a", &[args.batch, per_a])?,
    )?;
    check::buffer(
        name,
        stream,
        "b",
        args.b,
        check::product(name, "b", &[args.batch, per_b])?,
    )?;
    check::buffer(
        name,
        stream,
        "c",
        args.c,
        check::product(name, "c", &[args.batch, per_c])?,
    )?;
    if let Some(bias) = args.bias {
        check::buffer(name, stream, "bias", bias, args.n)?;
    }
    Ok(args.batch > 0 && args.m > 0 && args.n > 0)
}

fn launch_checked(
    name: &'static str,
    stream: &CudaStream,
    target: Target<'_>,
    args: MatmulArgs<'_>,
) -> Result<(), Error> {
    let Launch::Matmul {
        bm,
        bn,
        threads,
        smem_bytes,
    } = target.launch
    else {
        return Err(Error::NoVariant {
            kernel: name,
            device: "this launcher".into(),
            available: "a non-matmul variant".into(),
        });
    };
    let cfg = LaunchConfig {
        grid_dim: (
            args.n.div_ceil(bn as usize) as u32,
            args.m.div_ceil(bm as usize) as u32,
            args.batch.min(65535) as u32,
        ),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: smem_bytes,
    };
    if cfg.grid_dim.1 > 65535 {
        return Err(Error::Dimension {
            kernel: name,
            arg: "m",
            value: args.m.to_string(),
            reason: "needs more than 65535 row blocks",
        });
    }
    let (batch, m, n, k) = (
        args.batch as i32,
        args.m as i32,
        args.n as i32,
        args.k as i32,
    );
    let (sa, sb, sc) = (
        (args.m * args.k) as i64,
        (args.k * args.n) as i64,
        (args.m * args.n) as i64,
    );
    let null: u64 = 0;
    let mut builder = stream.launch_builder(target.function);
    builder.arg(args.a).arg(args.b).arg(&mut *args.c);
    match args.bias {
        Some(bias) => builder.arg(bias),
        None => builder.arg(&null),
    };
    builder
        .arg(&batch)
        .arg(&m)
        .arg(&n)
        .arg(&k)
        .arg(&sa)
        .arg(&sb)
        .arg(&sc)
        .arg(&args.alpha)
        .arg(&args.beta);
    // SAFETY: the argument list matches the `optiml_matmul` ABI every matmul template implements (pointers,
    // i32 dimensions, i64 strides, f32 scales), and every buffer was checked above to hold what the dimensions
    // address, in the stream's context.
    unsafe { builder.launch(cfg) }.map_err(Error::driver(name, "launch"))?;
    Ok(())
}
