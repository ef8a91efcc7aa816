//! Launching generated matmul kernels: `C = act(alpha · op(A) · op(B) + beta · C + bias)` over a batch.

use crate::kernel::{KernelModule, Target};
use crate::launch::{Half, Kernel16, Launch, Wgmma16};
use crate::workspace::Workspace;
use crate::{Args, Error, Function, Param, check};
use cudarc::driver::{
    CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig, ValidAsZeroBits, sys,
};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::bf16 {}
    impl Sealed for half::f16 {}
}

/// The element types of matmul operands: `f32`, `half::bf16` and `half::f16` (sealed: the kernels exist for these
/// only).
pub trait Element: DeviceRepr + ValidAsZeroBits + sealed::Sealed {
    /// `None` for f32, else which 16-bit type.
    const HALF: Option<Half>;
    /// The spec's name of the type, for messages.
    const NAME: &'static str;
}

impl Element for f32 {
    const HALF: Option<Half> = None;
    const NAME: &'static str = "f32";
}

impl Element for half::bf16 {
    const HALF: Option<Half> = Some(Half::Bf16);
    const NAME: &'static str = "bf16";
}

impl Element for half::f16 {
    const HALF: Option<Half> = Some(Half::F16);
    const NAME: &'static str = "f16";
}

/// The arguments of one matmul launch. Matrices are row-major and packed: batch item `i` of `A` starts at
/// `i · m · k`, of `B` at `i · k · n`, of `C` at `i · m · n`, except that a shared operand is one matrix used by
/// every batch item. `T` is the operands' element type (`f32`, `half::bf16` or `half::f16`); the bias and the
/// scales are f32 whatever it is.
pub struct MatmulArgs<'a, T: Element = f32> {
    /// `m × k` (or `k × m` when the spec transposes A), per batch item.
    pub a: &'a CudaSlice<T>,
    /// `k × n` (or `n × k` when the spec transposes B), per batch item.
    pub b: &'a CudaSlice<T>,
    /// `m × n`, per batch item.
    pub c: &'a mut CudaSlice<T>,
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
    /// `A` is one matrix for every batch item (the spec says `A shared`).
    pub shared_a: bool,
    /// `B` is one matrix for every batch item (`B shared`: a 3-D tensor times a matrix).
    pub shared_b: bool,
}

/// Largest `m`, `n`, `k` or batch the kernels index with 32-bit block coordinates.
const MAX_DIM: usize = i32::MAX as usize;

// The module ABI the generator compiles against and `Launch::companions` names: defined with the launch kinds.
pub use crate::launch::{
    FALLBACK_SLOT, GEMV_ENTRY, GEMV_SLOT, REDUCE_ENTRY, REDUCE_SLOT, SIMT16_ENTRY, SIMT16_THREADS,
    TRANSPOSE_ENTRY, TRANSPOSE_SLOT, TRANSPOSE_THREADS,
};

/// Rows and columns of `C` per block of the 16-bit SIMT kernel.
const SIMT16_TILE: u32 = 64;

/// Threads per block of [`GEMV_ENTRY`] (the generator compiles it with this). 512 measured best over both of
/// its modes on the H200 (`bench/harness/gemv/GEMV_NOTES.md`).
pub const GEMV_THREADS: u32 = 512;

/// Threads along the output per block in [`GEMV_ENTRY`]'s column mode (the generator compiles it with this).
pub const GEMV_COL_TX: u32 = 8;

/// Outputs per block of [`GEMV_ENTRY`], the smaller of its two modes' (a warp per output row in dot mode, four
/// columns per thread along the output in column mode); a larger grid is correct, the extra blocks idle.
const GEMV_TILE: u32 = {
    let dot = GEMV_THREADS / 32;
    let col = 4 * GEMV_COL_TX;
    if dot < col { dot } else { col }
};

/// The largest split-K workspace one launch allocates; a shape that would need more runs with fewer splits
/// (a variant tuned at one shape may be dispatched to a much larger one).
pub(crate) const MAX_WORKSPACE_BYTES: usize = 1 << 30;

/// The shortest K range per split: below it the second pass and the workspace traffic cost more than the extra
/// blocks gain (the H200 measurements in `bench/results/2026-11-30-h200-splitk.md` gain from ranges of 250 up).
const MIN_SPLIT_LEN: usize = 128;

/// The splits to use for a problem with `plane = batch · m · n` outputs and reduction length `k`, from a variant
/// tuned with `split_k`: halved until each range is long enough and the workspace fits. (The search uses it too:
/// two schedules that differ only in a split the launcher would lower to the same count are one kernel.)
pub fn splits_for(split_k: u32, plane: usize, k: usize) -> u32 {
    let mut s = split_k.max(1);
    while s > 1
        && ((k / s as usize) < MIN_SPLIT_LEN
            || plane.saturating_mul(s as usize * 4) > MAX_WORKSPACE_BYTES)
    {
        s /= 2;
    }
    s
}

/// Checks `args` against each other and launches `kernel` on `stream`.
///
/// The first call at a shape no variant was tuned for times the candidates there ([`crate::dispatch`]),
/// synchronising `stream` once; later calls of its size class (each dimension rounded up to a power of two)
/// launch the fastest, asynchronously.
///
/// # Errors
/// [`Error::Dimension`] for a dimension over `i32::MAX`, [`Error::Shape`] for a buffer shorter than its
/// dimensions need, [`Error::ContextMismatch`] for a buffer of another context, the loading errors of
/// [`KernelModule::load`], and [`Error::Setting`] for a bad `OPTIML_DISPATCH`. Nothing is launched unless every
/// check passes.
pub fn launch<T: Element>(
    kernel: &'static KernelModule,
    stream: &CudaStream,
    args: MatmulArgs<'_, T>,
) -> Result<(), Error> {
    let name = kernel.name();
    if !check_args(name, stream, &args)? {
        return Ok(());
    }
    let loaded = kernel.load(stream)?;
    let shape = [args.batch, args.m, args.n, args.k].map(|d| d as u64);
    // A matrix-vector call runs the GEMV companion whichever variant is picked: nothing to measure.
    if args.m == 1 || args.n == 1 {
        return launch_checked(name, stream, loaded.target(Some(shape)), args);
    }
    // Timing launches write the real `C` (the chosen launch overwrites it after them) unless the kernel reads
    // it: then a zeroed scratch `C`, freed once every timing launch has finished.
    let mut scratch: Option<CudaSlice<T>> = None;
    let chosen = loaded.measured_target(name, stream, shape, |target| {
        let c = match (kernel.reads_output(), &mut scratch) {
            (false, _) => &mut *args.c,
            (true, Some(c)) => c,
            (true, None) => scratch.insert(scratch_like(name, stream, args.c.len())?),
        };
        let timed = MatmulArgs {
            a: args.a,
            b: args.b,
            c,
            bias: args.bias,
            batch: args.batch,
            m: args.m,
            n: args.n,
            k: args.k,
            alpha: args.alpha,
            beta: args.beta,
            shared_a: args.shared_a,
            shared_b: args.shared_b,
        };
        launch_checked(name, stream, target, timed)
    });
    if scratch.is_some() {
        stream
            .synchronize()
            .map_err(Error::driver(name, "finish the timing launches"))?;
    }
    launch_checked(name, stream, chosen?, args)
}

/// `len` zeroed elements for timing launches to write, ready before any launch on `stream` (which may not
/// synchronise with the context's default stream, where they are allocated).
fn scratch_like<T: Element>(
    name: &'static str,
    stream: &CudaStream,
    len: usize,
) -> Result<CudaSlice<T>, Error> {
    let alloc = stream.context().default_stream();
    let c = alloc
        .alloc_zeros(len)
        .map_err(Error::driver(name, "allocate a scratch output for timing"))?;
    alloc
        .synchronize()
        .map_err(Error::driver(name, "allocate a scratch output for timing"))?;
    Ok(c)
}

/// Checks `args` and launches a function loaded by someone else (the evaluation worker times candidates
/// through this, so a candidate is launched exactly as the generated wrapper would launch it).
///
/// # Errors
/// As [`launch`], less the loading errors.
pub fn launch_target<T: Element>(
    name: &'static str,
    stream: &CudaStream,
    target: Target<'_>,
    args: MatmulArgs<'_, T>,
) -> Result<(), Error> {
    if !check_args(name, stream, &args)? {
        return Ok(());
    }
    launch_checked(name, stream, target, args)
}

/// Checks every buffer against the dimensions; `Ok(false)` when there is nothing to compute.
fn check_args<T: Element>(
    name: &'static str,
    stream: &CudaStream,
    args: &MatmulArgs<'_, T>,
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
    let items = |shared: bool| if shared { 1 } else { args.batch };
    check::buffer(
        name,
        stream,
        "a",
        args.a,
        check::product(name, "a", &[items(args.shared_a), per_a])?,
    )?;
    check::buffer(
        name,
        stream,
        "b",
        args.b,
        check::product(name, "b", &[items(args.shared_b), per_b])?,
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

fn launch_checked<T: Element>(
    name: &'static str,
    stream: &CudaStream,
    target: Target<'_>,
    args: MatmulArgs<'_, T>,
) -> Result<(), Error> {
    let compiled_for = match target.launch {
        Launch::Matmul16 { elem, .. } => Some(elem),
        _ => None,
    };
    if compiled_for != T::HALF {
        return Err(Error::ElementType {
            kernel: name,
            given: T::NAME,
            compiled: match compiled_for {
                None => "f32",
                Some(Half::Bf16) => "bf16",
                Some(Half::F16) => "f16",
            },
        });
    }
    if (args.n == 1 || args.m == 1)
        && let Some(gemv) = target.companions[GEMV_SLOT]
    {
        return launch_gemv(name, stream, gemv, args);
    }
    match target.launch {
        Launch::Matmul {
            bm,
            bn,
            threads,
            smem_bytes,
            split_k,
        } => launch_tiled(
            name,
            stream,
            target,
            args,
            (bm, bn, threads, smem_bytes),
            split_k,
        ),
        Launch::Wgmma {
            tile_m,
            tile_n,
            threads,
            smem_bytes,
            tma_rows,
            tma_a_kmajor,
            tma_p_kmajor,
        } => launch_wgmma(
            name,
            stream,
            target,
            args,
            (tile_m, tile_n, threads, smem_bytes),
            (tma_rows, tma_a_kmajor, tma_p_kmajor),
            (1, false),
        ),
        Launch::WgmmaStaged {
            tile_m,
            tile_n,
            threads,
            smem_bytes,
            tma_rows,
            tma_a_kmajor,
            tma_p_kmajor,
            split_k,
            transpose_a,
        } => launch_wgmma(
            name,
            stream,
            target,
            args,
            (tile_m, tile_n, threads, smem_bytes),
            (tma_rows, tma_a_kmajor, tma_p_kmajor),
            (split_k, transpose_a),
        ),
        Launch::Matmul16 {
            kernel: Kernel16::Simt,
            ..
        } => launch_simt16(name, stream, target.function, args),
        Launch::Matmul16 {
            kernel: Kernel16::Wgmma(geometry),
            ..
        } => launch_wgmma16(name, stream, target, args, geometry),
        Launch::Matmul16 {
            kernel:
                Kernel16::Mma {
                    bm,
                    bn,
                    threads,
                    smem_bytes,
                },
            ..
        } => launch_blocks16(
            name,
            stream,
            target.function,
            args,
            (bm, bn, threads, smem_bytes),
        ),
        Launch::Retired | Launch::Program(_) | Launch::Attention(_) => Err(Error::NoVariant {
            kernel: name,
            device: "this launcher".into(),
            available: "a non-matmul variant".into(),
        }),
    }
}

/// The by-value arguments every matmul entry point takes after its pointers, in ABI order.
struct Scalars {
    batch: i32,
    m: i32,
    n: i32,
    k: i32,
    strides: (i64, i64, i64),
    alpha: f32,
    beta: f32,
    null: u64,
}

impl Scalars {
    /// The dimensions were checked to fit `i32` by [`check_args`].
    fn of<T: Element>(args: &MatmulArgs<'_, T>) -> Self {
        Scalars {
            batch: args.batch as i32,
            m: args.m as i32,
            n: args.n as i32,
            k: args.k as i32,
            strides: strides(args),
            alpha: args.alpha,
            beta: args.beta,
            null: 0,
        }
    }

    /// Pushes `bias` (or a null pointer), then `batch, M, N, K, strideA, strideB, strideC, alpha, beta`.
    fn push<'a>(&'a self, builder: &mut Args<'a>, bias: Option<&'a CudaSlice<f32>>) {
        match bias {
            Some(bias) => builder.arg(bias),
            None => builder.arg(&self.null),
        };
        builder
            .arg(&self.batch)
            .arg(&self.m)
            .arg(&self.n)
            .arg(&self.k)
            .arg(&self.strides.0)
            .arg(&self.strides.1)
            .arg(&self.strides.2)
            .arg(&self.alpha)
            .arg(&self.beta);
    }
}

/// A block per `bm × bn` tile, batch on the grid's z axis, and split-K through a workspace when it pays.
fn launch_tiled<T: Element>(
    name: &'static str,
    stream: &CudaStream,
    target: Target<'_>,
    args: MatmulArgs<'_, T>,
    (bm, bn, threads, smem_bytes): (u32, u32, u32, u32),
    split_k: u32,
) -> Result<(), Error> {
    let splits = splits_for(split_k, args.batch * args.m * args.n, args.k);
    let cfg = LaunchConfig {
        grid_dim: (
            args.n.div_ceil(bn as usize) as u32,
            args.m.div_ceil(bm as usize) as u32,
            // Split s of batch slot z is block z · S + s; blocks walk the batch in steps of the slots.
            args.batch.min(65535 / splits as usize) as u32 * splits,
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
    let scalars = Scalars::of(&args);
    let splits_arg = splits as i32;
    let mut split = Split::new(name, stream, &target, &args, splits)?;
    let mut builder = Args::new(stream, target.function, name);
    builder.arg(args.a).arg(args.b);
    match &mut split {
        Some(split) => builder.arg(&split.workspace.ptr),
        None => builder.arg(&mut *args.c),
    };
    scalars.push(&mut builder, args.bias);
    if split_k > 1 {
        builder.arg(&splits_arg);
    }
    // SAFETY: the argument list matches the `optiml_matmul` ABI every matmul template implements (pointers,
    // i32 dimensions, i64 strides, f32 scales, and the split count when the variant was compiled with split-K),
    // and every buffer was checked above to hold what the dimensions address, in the stream's context; the
    // workspace holds `splits · batch · m · n` elements, what the template's split pass writes.
    unsafe { builder.launch(cfg, "launch") }?;
    match split {
        Some(split) => split.reduce(name, stream, &target, args, &scalars),
        None => Ok(()),
    }
}

/// The second half of a split-K product: the workspace the first launch writes the partial sums of every split
/// into, `[S][batch][m][n]` (every element written, so it needs no initialisation; stream-ordered, freed on the
/// stream after the reduction when it drops), and the module's reduction that adds them into C.
struct Split<'s> {
    workspace: Workspace<'s>,
    reduce: &'s Function,
    splits: i32,
}

impl<'s> Split<'s> {
    /// The workspace of `splits` partial products, or `None` for one split (the plain kernel writes C itself).
    ///
    /// # Errors
    /// A variant compiled with split-K whose module lacks the reduction, or the allocation's failure.
    fn new<T: Element>(
        name: &'static str,
        stream: &'s CudaStream,
        target: &Target<'s>,
        args: &MatmulArgs<'_, T>,
        splits: u32,
    ) -> Result<Option<Self>, Error> {
        if splits <= 1 {
            return Ok(None);
        }
        let Some(reduce) = target.companions[REDUCE_SLOT] else {
            return Err(Error::NoVariant {
                kernel: name,
                device: "this launcher".into(),
                available: "a split-K variant without its reduction kernel".into(),
            });
        };
        let bytes = splits as usize * args.batch * args.m * args.n * 4;
        let workspace = Workspace::new(stream, bytes)
            .map_err(Error::driver(name, "allocate the split-K workspace"))?;
        Ok(Some(Split {
            workspace,
            reduce,
            splits: splits as i32,
        }))
    }

    /// Launches the reduction on `stream`, after the split pass: C = epilogue(Σ partial sums).
    fn reduce<T: Element>(
        self,
        name: &'static str,
        stream: &CudaStream,
        target: &Target<'_>,
        args: MatmulArgs<'_, T>,
        scalars: &Scalars,
    ) -> Result<(), Error> {
        let total = args.batch * args.m * args.n.div_ceil(4);
        let blocks = total
            .div_ceil(REDUCE_THREADS as usize)
            .min(target.sm_count as usize * (2048 / REDUCE_THREADS as usize))
            .max(1);
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (REDUCE_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut builder = Args::new(stream, self.reduce, name);
        builder.arg(&self.workspace.ptr).arg(&mut *args.c);
        match args.bias {
            Some(bias) => builder.arg(bias),
            None => builder.arg(&scalars.null),
        };
        builder
            .arg(&scalars.batch)
            .arg(&scalars.m)
            .arg(&scalars.n)
            .arg(&scalars.strides.2)
            .arg(&scalars.alpha)
            .arg(&scalars.beta)
            .arg(&self.splits);
        // SAFETY: `optiml_splitk_reduce(const float* W, float* C, const float* bias, int batch, int M, int N,
        // long long strideC, float alpha, float beta, int splits)` reads the `splits · batch · m · n` workspace
        // the first launch wrote (same stream, so after it) and writes `batch · m · n` elements of the checked C.
        unsafe { builder.launch(cfg, "launch the split-K reduction") }
    }
}

/// A persistent `wgmma` kernel: one block per multiprocessor at most, each walking tiles `b, b + grid, …`. With a
/// TMA producer, the launcher encodes the two operands' tensor maps per call (host work of about a microsecond)
/// or, where TMA cannot address an operand, tells the kernel to load with `cp.async` instead. With
/// `transpose_a`, A is first copied K-major into a workspace the kernel reads in its place. A variant compiled
/// with split-K (`split_k > 1`) takes the split count, and with more than one split writes the workspace the
/// reduction then adds into C.
#[allow(clippy::too_many_arguments)]
fn launch_wgmma<T: Element>(
    name: &'static str,
    stream: &CudaStream,
    target: Target<'_>,
    args: MatmulArgs<'_, T>,
    (tile_m, tile_n, threads, smem_bytes): (u32, u32, u32, u32),
    tma: (u32, bool, bool),
    (split_k, transpose_a): (u32, bool),
) -> Result<(), Error> {
    // (With K = 0 the kernel reads no A, and there is nothing to copy: A itself is passed.)
    let transposed = if transpose_a && args.k > 0 {
        Some(transpose_a_into_workspace(name, stream, &target, &args)?)
    } else {
        None
    };
    let a_ptr = transposed.as_ref().map(|w| w.ptr);
    let splits = splits_for(split_k, args.batch * args.m * args.n, args.k);
    let cfg = persistent(
        &args,
        (tile_m, tile_n, threads, smem_bytes),
        target.sm_count,
        splits,
    );
    let scalars = Scalars::of(&args);
    let splits_arg = splits as i32;
    let maps = (tma.0 > 0).then(|| TmaMaps::encode(stream, &args, a_ptr, tma));
    let mut split = Split::new(name, stream, &target, &args, splits)?;
    let mut builder = Args::new(stream, target.function, name);
    match &transposed {
        Some(w) => builder.arg(&w.ptr),
        None => builder.arg(args.a),
    };
    builder.arg(args.b);
    match &mut split {
        Some(split) => builder.arg(&split.workspace.ptr),
        None => builder.arg(&mut *args.c),
    };
    scalars.push(&mut builder, args.bias);
    if split_k > 1 {
        builder.arg(&splits_arg);
    }
    if let Some(maps) = &maps {
        builder.arg(&maps.q).arg(&maps.p).arg(&maps.use_tma);
    }
    // SAFETY: the arguments match the `wgmma` template's `optiml_matmul` (the common ABI, then the two
    // `__grid_constant__` tensor maps and the TMA switch when compiled with TMA); every buffer was checked to
    // hold what the dimensions address; the maps, when used, describe exactly those checked extents (their
    // out-of-bounds elements read as zero), and with `use_tma == 0` the kernel never reads them; a transposed A
    // is the workspace of the same extent, `m × k` per item, written on this stream before; with more than
    // one split, C is the workspace of `splits · batch · m · n` elements the split pass writes. Any grid is
    // valid: blocks loop over tiles.
    unsafe { builder.launch(cfg, "launch") }?;
    match split {
        Some(split) => split.reduce(name, stream, &target, args, &scalars),
        None => Ok(()),
    }
}

/// Copies A, stored `k × m` per batch item (one item where it is shared), into a packed `m × k` workspace on
/// `stream` with the module's [`TRANSPOSE_ENTRY`]: what a kernel compiled for a K-major A reads in its place.
///
/// # Errors
/// A module without the entry, the allocation's or the launch's failure.
fn transpose_a_into_workspace<'s, T: Element>(
    name: &'static str,
    stream: &'s CudaStream,
    target: &Target<'s>,
    args: &MatmulArgs<'_, T>,
) -> Result<Workspace<'s>, Error> {
    let Some(transpose) = target.companions[TRANSPOSE_SLOT] else {
        return Err(Error::NoVariant {
            kernel: name,
            device: "this launcher".into(),
            available: "a variant that transposes A without its transposing kernel".into(),
        });
    };
    let items = if args.shared_a { 1 } else { args.batch };
    // The copy is as large as A: capped like the split-K workspace, so that a variant tuned at one shape and
    // dispatched to a far larger A does not double its memory (measured dispatch then times the others).
    let bytes = items
        .checked_mul(args.m)
        .and_then(|x| x.checked_mul(args.k))
        .and_then(|x| x.checked_mul(4))
        .filter(|&b| b <= MAX_WORKSPACE_BYTES)
        .ok_or_else(|| Error::Dimension {
            kernel: name,
            arg: "k",
            value: format!("{} (A of {items} × {} × {})", args.k, args.m, args.k),
            reason: "makes A larger than the 1 GiB a variant that transposes A first may copy; a variant \
                     reading A in place serves it (measured dispatch times those)",
        })?;
    let workspace =
        Workspace::new(stream, bytes).map_err(Error::driver(name, "allocate the transposed A"))?;
    let (items_arg, k, m) = (items as i32, args.k as i32, args.m as i32);
    let stride_a = strides(args).0;
    let cfg = LaunchConfig {
        grid_dim: (
            args.m.div_ceil(32) as u32,
            args.k.div_ceil(32).min(65535) as u32,
            items.min(65535) as u32,
        ),
        block_dim: (TRANSPOSE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut builder = Args::new(stream, transpose, name);
    builder
        .arg(args.a)
        .arg(&workspace.ptr)
        .arg(&items_arg)
        .arg(&k)
        .arg(&m)
        .arg(&stride_a);
    // SAFETY: `optiml_transpose_a(const float* A, float* At, int batch, int K, int M, long long strideA)` reads
    // `items` items of `k · m` elements `strideA` apart from the checked A and writes `items · m · k` elements of
    // the workspace just allocated for them: the grid covers every 32 rows of M (x), and blocks loop over the
    // k-tiles and items its y and z do not cover.
    unsafe { builder.launch(cfg, "launch the transposition of A") }?;
    Ok(workspace)
}

/// A `CUtensorMap` as a kernel parameter (128 bytes, passed by value as `const __grid_constant__`).
#[repr(transparent)]
pub(crate) struct TmaMap(sys::CUtensorMap);

// SAFETY: a plain-old-data struct of the driver's, the exact layout of the kernel's `TmaMap` parameter.
unsafe impl DeviceRepr for TmaMap {}

impl Param for &TmaMap {
    const BYTES: usize = std::mem::size_of::<TmaMap>();
}

/// The tensor maps of a TMA launch and whether the kernel may use them.
struct TmaMaps {
    q: TmaMap,
    p: TmaMap,
    use_tma: i32,
}

impl TmaMaps {
    /// Maps of the K-major operand Q (`{K, rows, batch}`, box `{32, tma_rows, 1}`) and the other operand P:
    /// stored `K × cols`, `{cols, K, batch}` with box `{32, 32, 1}`; K-major (`p_kmajor`), `{K, rows, batch}`
    /// with box `{32, 16, 1}` taking every other row (the kernel's row order in shared memory: the even rows
    /// of each 16, then the odd ones). All fp32, 128-byte swizzle, zero fill outside. TMA needs 16-byte aligned
    /// bases and row and batch strides in multiples of 16 bytes; a call that breaks any of these gets zeroed
    /// maps and `use_tma = 0`, and the kernel's `cp.async` producer.
    fn encode<T: Element>(
        stream: &CudaStream,
        args: &MatmulArgs<'_, T>,
        a_ptr: Option<sys::CUdeviceptr>,
        (tma_rows, a_kmajor, p_kmajor): (u32, bool, bool),
    ) -> Self {
        // SAFETY: an all-zero CUtensorMap is a valid value of the plain byte array (the kernel ignores it).
        let zero = || TmaMap(unsafe { std::mem::zeroed() });
        let (sa, sb, _) = strides(args);
        let (a, _a_sync) = args.a.device_ptr(stream);
        // A copied K-major into a workspace is read in its place (same extent, same strides).
        let a = a_ptr.unwrap_or(a);
        let (b, _b_sync) = args.b.device_ptr(stream);
        // NN: Q = A (m × k), P = B (k × n). NT: Q = A, P = B stored n × k. TT: Q = B stored n × k, P = A
        // stored k × m.
        let (q, sq, q_rows, p, sp, p_rows) = if a_kmajor {
            (a, sa, args.m, b, sb, args.n)
        } else {
            (b, sb, args.n, a, sa, args.m)
        };
        let p_map = || {
            if p_kmajor {
                encode_map(p, args.k, p_rows, args.batch, sp, [32, 16], 2, None)
            } else {
                encode_map(p, p_rows, args.k, args.batch, sp, [32, 32], 1, None)
            }
        };
        let maps = (args.k > 0)
            .then(|| {
                Some(TmaMaps {
                    q: encode_map(q, args.k, q_rows, args.batch, sq, [32, tma_rows], 1, None)?,
                    p: p_map()?,
                    use_tma: 1,
                })
            })
            .flatten();
        maps.unwrap_or_else(|| TmaMaps {
            q: zero(),
            p: zero(),
            use_tma: 0,
        })
    }
}

/// A 3-D map `{cols, rows, batch}` of a row-major operand of fp32 (`half` `None`) or 16-bit elements whose batch
/// items are `stride` elements apart (0: one item for all), whose boxes take every `row_step`-th row, or `None`
/// where TMA cannot address it.
#[allow(clippy::too_many_arguments)]
fn encode_map(
    base: sys::CUdeviceptr,
    cols: usize,
    rows: usize,
    batch: usize,
    stride: i64,
    boxed: [u32; 2],
    row_step: u32,
    half: Option<Half>,
) -> Option<TmaMap> {
    encode_map_strided(
        base,
        (cols, cols),
        rows,
        batch,
        stride,
        boxed,
        row_step,
        half,
    )
}

/// [`encode_map`] of an operand whose rows are `pitch ≥ cols` elements apart, with boxes of consecutive rows.
pub(crate) fn encode_map_pitched(
    base: sys::CUdeviceptr,
    cols_pitch: (usize, usize),
    rows: usize,
    batch: usize,
    stride: i64,
    boxed: [u32; 2],
    half: Option<Half>,
) -> Option<TmaMap> {
    encode_map_strided(base, cols_pitch, rows, batch, stride, boxed, 1, half)
}

#[allow(clippy::too_many_arguments)]
fn encode_map_strided(
    base: sys::CUdeviceptr,
    (cols, pitch): (usize, usize),
    rows: usize,
    batch: usize,
    stride: i64,
    boxed: [u32; 2],
    row_step: u32,
    half: Option<Half>,
) -> Option<TmaMap> {
    use sys::CUtensorMapDataType as D;
    let (data_type, bytes) = match half {
        None => (D::CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4),
        Some(Half::Bf16) => (D::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2),
        Some(Half::F16) => (D::CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2),
    };
    let (dims, byte_strides) = map_geometry(base, (cols, pitch), rows, batch, stride, bytes)?;
    let box_dims = [boxed[0], boxed[1], 1];
    let element_strides = [1, row_step, 1];
    // SAFETY: a CUtensorMap is plain bytes, for which all zeros is a valid value.
    let mut map = TmaMap(unsafe { std::mem::zeroed() });
    // SAFETY: `map` is a live output buffer; the arrays have the rank's lengths (3 dimensions and element strides,
    // 2 byte strides); the driver only reads them and the address, and writes the map.
    let status = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map.0,
            data_type,
            3,
            base as *mut std::ffi::c_void,
            dims.as_ptr(),
            byte_strides.as_ptr(),
            box_dims.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    (status == sys::CUresult::CUDA_SUCCESS).then_some(map)
}

/// The dimensions `{cols, rows, items}` and byte strides `{row, item}` of a TMA map of a row-major operand of
/// `bytes`-byte elements whose rows are `pitch` elements apart, or `None` where TMA cannot address it: a base not 16-byte aligned, rows or batch items
/// not 16-byte multiples, an empty operand, or the driver's limits (dimensions up to 2³², strides under 2⁴⁰
/// bytes). A shared operand (`stride` 0) is one item.
fn map_geometry(
    base: sys::CUdeviceptr,
    (cols, pitch): (usize, usize),
    rows: usize,
    batch: usize,
    stride: i64,
    bytes: u64,
) -> Option<([u64; 3], [u64; 2])> {
    let row_bytes = pitch as u64 * bytes;
    if !base.is_multiple_of(16)
        || !row_bytes.is_multiple_of(16)
        || !(stride.unsigned_abs() * bytes).is_multiple_of(16)
        || stride < 0
        || cols == 0
        || cols > pitch
        || rows == 0
    {
        return None;
    }
    let (items, item_bytes) = if stride == 0 {
        (1, row_bytes * rows as u64)
    } else {
        (batch as u64, stride as u64 * bytes)
    };
    let dims = [cols as u64, rows as u64, items];
    (dims.iter().all(|&d| d <= 1 << 32) && item_bytes < 1 << 40)
        .then_some((dims, [row_bytes, item_bytes]))
}

/// The batch strides of A, B and C in elements: packed, or 0 for a shared operand (the templates read batch item
/// `z` of X at `X + z · strideX`).
fn strides<T: Element>(args: &MatmulArgs<'_, T>) -> (i64, i64, i64) {
    let packed = |shared: bool, len: usize| if shared { 0 } else { len as i64 };
    (
        packed(args.shared_a, args.m * args.k),
        packed(args.shared_b, args.k * args.n),
        (args.m * args.n) as i64,
    )
}

/// The 16-bit SIMT kernel ([`SIMT16_ENTRY`], or a module's entry on GPUs older than sm_80).
fn launch_simt16<T: Element>(
    name: &'static str,
    stream: &CudaStream,
    function: &Function,
    args: MatmulArgs<'_, T>,
) -> Result<(), Error> {
    let geometry = (SIMT16_TILE, SIMT16_TILE, SIMT16_THREADS, 0);
    launch_blocks16(name, stream, function, args, geometry)
}

/// A 16-bit kernel of one block per `bm × bn` tile, batch on the grid's z axis (the SIMT and the `mma.sync`
/// kernels). Both are correct for any grid (blocks loop over tiles and batch items), so the grid is capped
/// where CUDA caps it.
fn launch_blocks16<T: Element>(
    name: &'static str,
    stream: &CudaStream,
    function: &Function,
    args: MatmulArgs<'_, T>,
    (bm, bn, threads, smem_bytes): (u32, u32, u32, u32),
) -> Result<(), Error> {
    let cfg = LaunchConfig {
        grid_dim: (
            args.n.div_ceil(bn as usize).min(i32::MAX as usize) as u32,
            args.m.div_ceil(bm as usize).min(65535) as u32,
            args.batch.min(65535) as u32,
        ),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: smem_bytes,
    };
    let scalars = Scalars::of(&args);
    let mut builder = Args::new(stream, function, name);
    builder.arg(args.a).arg(args.b).arg(&mut *args.c);
    scalars.push(&mut builder, args.bias);
    // SAFETY: the SIMT kernel and the `mma.sync` kernel both take `optiml_matmul`'s ABI with 2-byte elements
    // (`const u16* A, const u16* B, u16* C, const float* bias, int batch, int M, int N, int K, long long
    // strideA, strideB, strideC, float alpha, float beta`), which `T` is here (the launch's element type was
    // checked against `T`); every buffer was checked to hold what the dimensions address, in the stream's
    // context; the shared memory is what the variant was compiled for (its limit raised at load). Any grid is
    // correct.
    unsafe { builder.launch(cfg, "launch") }?;
    Ok(())
}

/// The 16-bit `wgmma` kernel: a persistent grid walking `tile_m × tile_n` tiles, A and B read through TMA maps
/// encoded per call (of padded copies where rows are not 16-byte multiples). Calls no map can describe (K = 0, or
/// a copy over the workspace limit), and matrix-vector products in modules without a matrix-vector kernel (where
/// a 64-row tile would be mostly padding), go to the module's SIMT kernel.
fn launch_wgmma16<T: Element>(
    name: &'static str,
    stream: &CudaStream,
    target: Target<'_>,
    args: MatmulArgs<'_, T>,
    g: Wgmma16,
) -> Result<(), Error> {
    let Some(fallback) = target.companions[FALLBACK_SLOT] else {
        return Err(Error::NoVariant {
            kernel: name,
            device: "this launcher".into(),
            available: format!("a 16-bit tensor-core variant without `{SIMT16_ENTRY}`"),
        });
    };
    let maps = if args.m == 1 || args.n == 1 {
        None
    } else {
        tma_maps16(stream, &args, g)
    };
    let Some((map_a, map_b, _copies)) = maps else {
        return launch_simt16(name, stream, fallback, args);
    };
    let geometry = (g.tile_m, g.tile_n, g.threads, g.smem_bytes);
    let cfg = persistent(&args, geometry, target.sm_count, 1);
    let scalars = Scalars::of(&args);
    let mut builder = Args::new(stream, target.function, name);
    builder.arg(args.a).arg(args.b).arg(&mut *args.c);
    scalars.push(&mut builder, args.bias);
    builder.arg(&map_a).arg(&map_b);
    // SAFETY: the arguments match the 16-bit `wgmma` template's `optiml_matmul` (the common ABI with 2-byte
    // elements of the checked type, then the `__grid_constant__` tensor maps of A and B); every buffer was
    // checked to hold what the dimensions address, and the maps describe exactly those extents (reads outside
    // them are zero-filled by TMA). Any grid is valid: blocks loop over tiles.
    unsafe { builder.launch(cfg, "launch") }?;
    Ok(())
}

/// The launch of a persistent kernel: one block per multiprocessor at most (and per tile), each walking the
/// `tile_m × tile_n` tiles of every batch item (of every split of K) `b, b + grid, …`.
fn persistent<T: Element>(
    args: &MatmulArgs<'_, T>,
    (tile_m, tile_n, threads, smem_bytes): (u32, u32, u32, u32),
    sm_count: u32,
    splits: u32,
) -> LaunchConfig {
    let tiles = (args.m.div_ceil(tile_m as usize) as u64)
        .saturating_mul(args.n.div_ceil(tile_n as usize) as u64)
        .saturating_mul(args.batch as u64)
        .saturating_mul(u64::from(splits.max(1)));
    LaunchConfig {
        grid_dim: (tiles.clamp(1, u64::from(sm_count.max(1))) as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: smem_bytes,
    }
}

/// The tensor maps of A and B for the 16-bit `wgmma` kernel, and the pitched copies they read where TMA cannot
/// address an operand in place; `None` sends the call to the SIMT kernel. An operand stored `rows × cols` is
/// mapped `{cols, rows, batch}` with boxes of 64 columns (one 128-byte swizzle row) and, along the rows, the
/// tile's extent when the rows are the tile's own dimension (A `m × k`, B `n × k`), else 64 (A `k × m`, B
/// `k × n`: the kernel takes 64-wide slices).
fn tma_maps16<'s, T: Element>(
    stream: &'s CudaStream,
    args: &MatmulArgs<'_, T>,
    g: Wgmma16,
) -> Option<(TmaMap, TmaMap, [Option<Workspace<'s>>; 2])> {
    let (sa, sb, _) = strides(args);
    let (a, _a_sync) = args.a.device_ptr(stream);
    let (b, _b_sync) = args.b.device_ptr(stream);
    let (a_cols, a_rows, a_box) = if g.trans_a {
        (args.m, args.k, 64)
    } else {
        (args.k, args.m, g.tile_m)
    };
    let (b_cols, b_rows, b_box) = if g.trans_b {
        (args.k, args.n, g.tile_n)
    } else {
        (args.n, args.k, 64)
    };
    let (map_a, copy_a) = map16::<T>(stream, a, (a_cols, a_rows, args.batch), sa, a_box)?;
    let (map_b, copy_b) = map16::<T>(stream, b, (b_cols, b_rows, args.batch), sb, b_box)?;
    Some((map_a, map_b, [copy_a, copy_b]))
}

/// The map of one 16-bit operand of `(cols, rows, batch)` whose items are `stride` elements apart (0: shared).
/// Rows that are not 16-byte multiples (an odd K, N or M) cannot be mapped in place: the operand is copied on
/// the stream into a workspace whose rows are padded to 8 elements (the padding is never read: the map's
/// extent is the true width, and TMA fills outside it with zeros), which costs one read and write of the
/// operand against the SIMT kernel's twenty-fold slower product.
pub(crate) fn map16<'s, T: Element>(
    stream: &'s CudaStream,
    base: sys::CUdeviceptr,
    (cols, rows, batch): (usize, usize, usize),
    stride: i64,
    box_rows: u32,
) -> Option<(TmaMap, Option<Workspace<'s>>)> {
    let boxed = [64, box_rows];
    if let Some(map) = encode_map(base, cols, rows, batch, stride, boxed, 1, T::HALF) {
        return Some((map, None));
    }
    let pitch = cols.next_multiple_of(8);
    let items = if stride == 0 { 1 } else { batch };
    let height = items.checked_mul(rows)?;
    let bytes = height.checked_mul(pitch)?.checked_mul(2)?;
    if cols == 0 || height == 0 || bytes > MAX_WORKSPACE_BYTES {
        return None;
    }
    let copy = Workspace::new(stream, bytes).ok()?;
    // Packed items are `rows · cols` apart: the operand is one `items · rows × cols` matrix.
    let layout = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: base,
        srcArray: std::ptr::null_mut(),
        srcPitch: cols * 2,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: copy.ptr,
        dstArray: std::ptr::null_mut(),
        dstPitch: pitch * 2,
        WidthInBytes: cols * 2,
        Height: height,
    };
    // SAFETY: the source is the checked operand (`height` rows of `cols` 2-byte elements, contiguous), the
    // destination the workspace just allocated (`height` rows of `pitch ≥ cols` elements); both are device
    // memory of the stream's context, and the copy is ordered on the stream before the launch that reads it
    // and before the workspace's stream-ordered free.
    let status = unsafe { sys::cuMemcpy2DAsync_v2(&layout, stream.cu_stream()) };
    if status != sys::CUresult::CUDA_SUCCESS {
        return None;
    }
    let copied_stride = if stride == 0 {
        0
    } else {
        (rows * pitch) as i64
    };
    let map = encode_map_pitched(
        copy.ptr,
        (cols, pitch),
        rows,
        batch,
        copied_stride,
        boxed,
        T::HALF,
    )?;
    Some((map, Some(copy)))
}

/// A matrix-vector product (`n == 1` or `m == 1`) through [`GEMV_ENTRY`], whose ABI is `optiml_matmul`'s.
fn launch_gemv<T: Element>(
    name: &'static str,
    stream: &CudaStream,
    gemv: &Function,
    args: MatmulArgs<'_, T>,
) -> Result<(), Error> {
    let outputs = if args.n == 1 { args.m } else { args.n };
    let cfg = LaunchConfig {
        grid_dim: (
            outputs.div_ceil(GEMV_TILE as usize) as u32,
            1,
            args.batch.min(65535) as u32,
        ),
        block_dim: (GEMV_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let scalars = Scalars::of(&args);
    let mut builder = Args::new(stream, gemv, name);
    builder.arg(args.a).arg(args.b).arg(&mut *args.c);
    scalars.push(&mut builder, args.bias);
    // SAFETY: `optiml_gemv` takes `optiml_matmul`'s parameters (without the split count) and addresses the same
    // elements of A, B, C and bias for the same dimensions, all checked above in the stream's context; any grid
    // is correct (blocks loop over output tiles and batch items).
    unsafe { builder.launch(cfg, "launch the matrix-vector kernel") }?;
    Ok(())
}

/// Threads per block of the split-K reduction (the template's `OPTIML_REDUCE_THREADS` default).
const REDUCE_THREADS: u32 = 256;

#[cfg(test)]
mod tests {
    use super::{map_geometry, splits_for};

    #[test]
    fn tma_maps_only_where_the_hardware_can_address_them() {
        // A packed batch of 1024 × 512 matrices.
        assert_eq!(
            map_geometry(0x7f00_0000_0000, (512, 512), 1024, 8, 512 * 1024, 4),
            Some(([512, 1024, 8], [2048, 2 << 20]))
        );
        // A shared operand is one item, whatever the batch.
        assert_eq!(
            map_geometry(0x1000, (64, 64), 3, 100, 0, 4),
            Some(([64, 3, 1], [256, 768]))
        );
        // Misaligned base, rows of 33 floats, an item stride of an odd count, no rows: the cp.async path.
        assert_eq!(map_geometry(0x1004, (64, 64), 64, 1, 4096, 4), None);
        assert_eq!(map_geometry(0x1000, (33, 33), 64, 1, 33 * 64, 4), None);
        assert_eq!(map_geometry(0x1000, (64, 64), 3, 2, 64 * 3 + 2, 4), None);
        assert_eq!(map_geometry(0x1000, (64, 64), 0, 1, 0, 4), None);
        assert_eq!(map_geometry(0x1000, (0, 0), 8, 1, 0, 4), None);
    }

    #[test]
    fn sixteen_bit_maps_need_rows_of_eight_elements() {
        // 2-byte elements: rows of 8, 16, … elements are 16-byte multiples; 4 are not (f32 would be).
        assert_eq!(
            map_geometry(0x1000, (1024, 1024), 1024, 2, 1024 * 1024, 2),
            Some(([1024, 1024, 2], [2048, 2 << 20]))
        );
        assert_eq!(map_geometry(0x1000, (4, 4), 16, 1, 64, 2), None);
        assert_eq!(
            map_geometry(0x1000, (8, 8), 3, 5, 8 * 3, 2),
            Some(([8, 3, 5], [16, 48]))
        );
        // 255 × 257 items: the rows of 257 cannot be mapped, whatever the stride.
        assert_eq!(map_geometry(0x1000, (257, 257), 255, 4, 257 * 255, 2), None);
        assert_eq!(
            map_geometry(0x1000, (256, 256), 255, 4, 256 * 255 + 4, 2),
            None
        );
        // Their pitched copy (rows padded to 264 elements) can; the map keeps the true width.
        assert_eq!(
            map_geometry(0x1000, (257, 264), 255, 4, 264 * 255, 2),
            Some(([257, 255, 4], [528, 528 * 255]))
        );
        assert_eq!(map_geometry(0x1000, (265, 264), 255, 1, 0, 2), None);
    }

    #[test]
    fn splits_shrink_for_short_ranges_and_large_workspaces() {
        // The measured best cases keep their split.
        assert_eq!(splits_for(32, 256 * 256, 65536), 32);
        assert_eq!(splits_for(4, 1000 * 1000, 1000), 4);
        // A variant tuned for a long K, dispatched to a short one.
        assert_eq!(splits_for(32, 256 * 256, 1024), 8);
        assert_eq!(splits_for(4, 4096 * 4096, 128), 1);
        assert_eq!(splits_for(8, 64, 0), 1);
        // Dispatched to a huge output: the workspace stays under 1 GiB.
        assert_eq!(splits_for(4, 16384 * 16384, 65536), 1);
        assert_eq!(splits_for(16, 8192 * 4096, 65536), 8);
        assert_eq!(splits_for(1, 1, 1 << 20), 1);
        assert_eq!(splits_for(0, 1, 1 << 20), 1);
    }
}
