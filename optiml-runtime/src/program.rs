//! Launching kernels generated from tensor programs: any number of input and output buffers, dimensions given
//! or inferred from the buffer lengths, and `f32` scalars. Every buffer must hold exactly the elements its
//! dimensions make, so a wrong length or a swapped dimension is an [`Error`], never an out-of-bounds access.

use crate::attention;
use crate::kernel::{KernelModule, Target};
use crate::launch::{Launch, ProgramLaunch, StagedAttention};
use crate::workspace::Workspace;
use crate::{Args, Error, check};
use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, LaunchConfig};
use half::{bf16, f16};

/// What the launcher must know of a program: its buffers' dimensions and its dimensions' names, in the order
/// of the kernel's parameters. The generated wrapper embeds one as a `static`.
#[derive(Clone, Copy, Debug)]
pub struct Signature {
    /// The input buffers, in program order.
    pub inputs: &'static [TensorSig],
    /// The output buffers, in statement order.
    pub outputs: &'static [TensorSig],
    /// Every dimension, in program order: its name and, when the spec fixes it, its extent.
    pub dims: &'static [(&'static str, Option<usize>)],
}

/// One buffer of a [`Signature`].
#[derive(Clone, Copy, Debug)]
pub struct TensorSig {
    /// Its parameter name.
    pub name: &'static str,
    /// Its dimensions, outermost first, as indices into [`Signature::dims`].
    pub axes: &'static [u16],
    /// Its element type.
    pub elem: Elem,
}

/// Element types of program buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// `f32`.
    F32,
    /// `half::bf16`.
    Bf16,
    /// `half::f16`.
    F16,
    /// `i64`.
    I64,
    /// `i32`.
    I32,
    /// `bool` (a mask: one byte, 0 or 1).
    Bool,
}

impl Elem {
    /// The Rust name.
    pub fn name(self) -> &'static str {
        match self {
            Elem::F32 => "f32",
            Elem::Bf16 => "bf16",
            Elem::F16 => "f16",
            Elem::I64 => "i64",
            Elem::I32 => "i32",
            Elem::Bool => "bool",
        }
    }
}

/// An input buffer.
#[derive(Clone, Copy)]
pub enum In<'a> {
    /// `f32` elements.
    F32(&'a CudaSlice<f32>),
    /// `bf16` elements.
    Bf16(&'a CudaSlice<bf16>),
    /// `f16` elements.
    F16(&'a CudaSlice<f16>),
    /// `i64` elements.
    I64(&'a CudaSlice<i64>),
    /// `i32` elements.
    I32(&'a CudaSlice<i32>),
    /// `bool` elements (masks).
    Bool(&'a CudaSlice<bool>),
}

/// An output buffer.
pub enum Out<'a> {
    /// `f32` elements.
    F32(&'a mut CudaSlice<f32>),
    /// `bf16` elements.
    Bf16(&'a mut CudaSlice<bf16>),
    /// `f16` elements.
    F16(&'a mut CudaSlice<f16>),
    /// `i64` elements.
    I64(&'a mut CudaSlice<i64>),
    /// `i32` elements.
    I32(&'a mut CudaSlice<i32>),
}

macro_rules! buffer_from {
    ($($t:ty => $v:ident),*) => {$(
        impl<'a> From<&'a CudaSlice<$t>> for In<'a> {
            fn from(b: &'a CudaSlice<$t>) -> Self {
                In::$v(b)
            }
        }
        impl<'a> From<&'a mut CudaSlice<$t>> for Out<'a> {
            fn from(b: &'a mut CudaSlice<$t>) -> Self {
                Out::$v(b)
            }
        }
    )*};
}
buffer_from!(f32 => F32, bf16 => Bf16, f16 => F16, i64 => I64, i32 => I32);

// Masks are inputs only: no program computes a boolean.
impl<'a> From<&'a CudaSlice<bool>> for In<'a> {
    fn from(b: &'a CudaSlice<bool>) -> Self {
        In::Bool(b)
    }
}

impl In<'_> {
    fn elem(&self) -> Elem {
        match self {
            In::F32(_) => Elem::F32,
            In::Bf16(_) => Elem::Bf16,
            In::F16(_) => Elem::F16,
            In::I64(_) => Elem::I64,
            In::I32(_) => Elem::I32,
            In::Bool(_) => Elem::Bool,
        }
    }

    fn len(&self) -> usize {
        match self {
            In::F32(b) => b.len(),
            In::Bf16(b) => b.len(),
            In::F16(b) => b.len(),
            In::I64(b) => b.len(),
            In::I32(b) => b.len(),
            In::Bool(b) => b.len(),
        }
    }

    fn check_context(
        &self,
        kernel: &'static str,
        stream: &CudaStream,
        arg: &'static str,
    ) -> Result<(), Error> {
        match self {
            In::F32(b) => check::buffer(kernel, stream, arg, b, 0),
            In::Bf16(b) => check::buffer(kernel, stream, arg, b, 0),
            In::F16(b) => check::buffer(kernel, stream, arg, b, 0),
            In::I64(b) => check::buffer(kernel, stream, arg, b, 0),
            In::I32(b) => check::buffer(kernel, stream, arg, b, 0),
            In::Bool(b) => check::buffer(kernel, stream, arg, b, 0),
        }
    }
}

impl Out<'_> {
    fn reborrow(&mut self) -> Out<'_> {
        match self {
            Out::F32(b) => Out::F32(b),
            Out::Bf16(b) => Out::Bf16(b),
            Out::F16(b) => Out::F16(b),
            Out::I64(b) => Out::I64(b),
            Out::I32(b) => Out::I32(b),
        }
    }

    fn elem(&self) -> Elem {
        match self {
            Out::F32(_) => Elem::F32,
            Out::Bf16(_) => Elem::Bf16,
            Out::F16(_) => Elem::F16,
            Out::I64(_) => Elem::I64,
            Out::I32(_) => Elem::I32,
        }
    }

    fn len(&self) -> usize {
        match self {
            Out::F32(b) => b.len(),
            Out::Bf16(b) => b.len(),
            Out::F16(b) => b.len(),
            Out::I64(b) => b.len(),
            Out::I32(b) => b.len(),
        }
    }

    fn check_context(
        &self,
        kernel: &'static str,
        stream: &CudaStream,
        arg: &'static str,
    ) -> Result<(), Error> {
        match self {
            Out::F32(b) => check::buffer(kernel, stream, arg, b, 0),
            Out::Bf16(b) => check::buffer(kernel, stream, arg, b, 0),
            Out::F16(b) => check::buffer(kernel, stream, arg, b, 0),
            Out::I64(b) => check::buffer(kernel, stream, arg, b, 0),
            Out::I32(b) => check::buffer(kernel, stream, arg, b, 0),
        }
    }
}

/// The arguments of one program launch.
pub struct ProgramArgs<'a, 'b> {
    /// The input buffers, in the signature's order.
    pub inputs: &'b [In<'a>],
    /// The output buffers, in the signature's order.
    pub outputs: &'b mut [Out<'a>],
    /// One entry per dimension of the signature: the extent, or `None` for one fixed by the spec or to infer
    /// from the buffer lengths.
    pub dims: &'b [Option<usize>],
    /// The run-time scalars, in program order.
    pub params: &'b [f32],
}

/// Checks `args` against `sig` and launches `kernel` on `stream`.
///
/// # Errors
/// [`Error::BufferLength`] when a buffer does not hold exactly the elements its dimensions make,
/// [`Error::Undetermined`] when a dimension is neither given nor determined by the lengths,
/// [`Error::Dimension`] when a dimension that must not be empty is 0 or a size overflows,
/// [`Error::ElementType`] and [`Error::ContextMismatch`], and the loading errors of [`KernelModule::load`].
pub fn launch(
    kernel: &'static KernelModule,
    stream: &CudaStream,
    sig: &Signature,
    args: ProgramArgs<'_, '_>,
) -> Result<(), Error> {
    let name = kernel.name();
    let extents = check_args(name, stream, sig, &args)?;
    let loaded = kernel.load(stream)?;
    // Every variant of one program covers the same work items (the mask follows the program, not the
    // schedule), so the first variant's mask keys the call.
    let key = loaded
        .functions
        .first()
        .and_then(|f| match f.variant.launch {
            Launch::Program(p) | Launch::Attention(StagedAttention { fused: p, .. }) => {
                Some(shape_key(&p, &extents))
            }
            _ => None,
        });
    launch_checked(name, stream, loaded.target(key), sig, &extents, args)
}

/// The shape key a tensor-program variant is tuned for, and a call is dispatched by: `[items, 1, rest, 1]`,
/// where `items` is the product of the extents in the launch's `items_mask` (the rows of a row kernel, the
/// kept positions of a column kernel, every element of a map) and `rest` the product of the others (the
/// reduced length). The launcher picks the variant whose key is nearest in log-distance of both.
pub fn shape_key(p: &ProgramLaunch, extents: &[usize]) -> [u64; 4] {
    let (mut items, mut rest) = (1u64, 1u64);
    for (i, &e) in extents.iter().enumerate() {
        let e = e as u64;
        if p.items_mask & (1 << i) != 0 {
            items = items.saturating_mul(e);
        } else {
            rest = rest.saturating_mul(e);
        }
    }
    [items, 1, rest, 1]
}

/// Checks `args` and launches a function loaded by someone else (the evaluation worker), exactly as [`launch`]
/// would.
///
/// # Errors
/// As [`launch`], less the loading errors.
pub fn launch_target(
    name: &'static str,
    stream: &CudaStream,
    target: Target<'_>,
    sig: &Signature,
    args: ProgramArgs<'_, '_>,
) -> Result<(), Error> {
    let extents = check_args(name, stream, sig, &args)?;
    launch_checked(name, stream, target, sig, &extents, args)
}

/// Every dimension's extent: given, fixed, or inferred from a buffer whose other dimensions are known.
///
/// # Errors
/// As [`launch`].
pub fn extents(
    name: &'static str,
    sig: &Signature,
    args: &ProgramArgs<'_, '_>,
) -> Result<Vec<usize>, Error> {
    if args.dims.len() != sig.dims.len()
        || args.inputs.len() != sig.inputs.len()
        || args.outputs.len() != sig.outputs.len()
    {
        return Err(Error::Undetermined {
            kernel: name,
            dim: "-",
            reason: format!(
                "the call gives {} inputs, {} outputs and {} dimensions where the kernel takes {}, {} and {}",
                args.inputs.len(),
                args.outputs.len(),
                args.dims.len(),
                sig.inputs.len(),
                sig.outputs.len(),
                sig.dims.len()
            ),
        });
    }
    // A hand-written signature could name a dimension it does not have; the generated ones never do.
    if let Some(t) = sig
        .inputs
        .iter()
        .chain(sig.outputs)
        .find(|t| t.axes.iter().any(|&a| a as usize >= sig.dims.len()))
    {
        return Err(Error::Undetermined {
            kernel: name,
            dim: t.name,
            reason: format!(
                "names a dimension the signature does not have (it has {})",
                sig.dims.len()
            ),
        });
    }
    let mut known: Vec<Option<usize>> = sig
        .dims
        .iter()
        .zip(args.dims)
        .map(|((_, fixed), given)| fixed.or(*given))
        .collect();
    let buffers: Vec<(&TensorSig, usize)> = sig
        .inputs
        .iter()
        .zip(args.inputs.iter().map(In::len))
        .chain(sig.outputs.iter().zip(args.outputs.iter().map(Out::len)))
        .collect();
    // Inference, as `optiml_spec::signature::inferable` proves possible at compile time.
    loop {
        let mut changed = false;
        for (t, len) in &buffers {
            let unknown: Vec<u16> = t
                .axes
                .iter()
                .copied()
                .filter(|&a| known[a as usize].is_none())
                .collect();
            let [only] = unknown[..] else { continue };
            let others = check::product(
                name,
                t.name,
                &t.axes
                    .iter()
                    .filter_map(|&a| known[a as usize])
                    .collect::<Vec<_>>(),
            )?;
            if others == 0 || len % others != 0 {
                return Err(Error::BufferLength {
                    kernel: name,
                    arg: t.name,
                    got: *len,
                    expected: others,
                    axes: axes_text(sig, t, &known),
                });
            }
            known[only as usize] = Some(len / others);
            changed = true;
        }
        if !changed {
            break;
        }
    }
    sig.dims
        .iter()
        .zip(&known)
        .map(|((dim, _), k)| {
            k.ok_or_else(|| Error::Undetermined {
                kernel: name,
                dim,
                reason: "is not given and no buffer length determines it".into(),
            })
        })
        .collect()
}

fn axes_text(sig: &Signature, t: &TensorSig, known: &[Option<usize>]) -> String {
    let parts: Vec<String> = t
        .axes
        .iter()
        .map(|&a| {
            let (dim, _) = sig.dims[a as usize];
            match known[a as usize] {
                Some(v) => format!("{dim}={v}"),
                None => format!("{dim}=?"),
            }
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

fn check_args(
    name: &'static str,
    stream: &CudaStream,
    sig: &Signature,
    args: &ProgramArgs<'_, '_>,
) -> Result<Vec<usize>, Error> {
    let extents = extents(name, sig, args)?;
    let known: Vec<Option<usize>> = extents.iter().copied().map(Some).collect();
    let lens = args
        .inputs
        .iter()
        .map(|b| (b.len(), b.elem()))
        .chain(args.outputs.iter().map(|b| (b.len(), b.elem())));
    for (t, (len, elem)) in sig.inputs.iter().chain(sig.outputs).zip(lens) {
        if elem != t.elem {
            return Err(Error::ElementType {
                kernel: name,
                given: elem.name(),
                compiled: t.elem.name(),
            });
        }
        let axes: Vec<usize> = t.axes.iter().map(|&a| extents[a as usize]).collect();
        let expected = check::product(name, t.name, &axes)?;
        if len != expected {
            return Err(Error::BufferLength {
                kernel: name,
                arg: t.name,
                got: len,
                expected,
                axes: axes_text(sig, t, &known),
            });
        }
    }
    for (t, b) in sig.inputs.iter().zip(args.inputs) {
        b.check_context(name, stream, t.name)?;
    }
    for (t, b) in sig.outputs.iter().zip(args.outputs.iter()) {
        b.check_context(name, stream, t.name)?;
    }
    Ok(extents)
}

fn launch_checked(
    name: &'static str,
    stream: &CudaStream,
    target: Target<'_>,
    sig: &Signature,
    extents: &[usize],
    mut args: ProgramArgs<'_, '_>,
) -> Result<(), Error> {
    let p = match target.launch {
        Launch::Program(p) | Launch::Attention(StagedAttention { fused: p, .. }) => p,
        _ => {
            return Err(Error::NoVariant {
                kernel: name,
                device: "this launcher".into(),
                available: "a variant of another family".into(),
            });
        }
    };
    for (i, (&extent, (dim, _))) in extents.iter().zip(sig.dims).enumerate() {
        if extent == 0 && p.nonempty_mask & (1 << i) != 0 {
            return Err(Error::Dimension {
                kernel: name,
                arg: dim,
                value: "0".into(),
                reason: "is reduced by a max, min, mean or arg reduction (which has no value over nothing), or \
                         folded over after a row reduction (whose second launch needs a row)",
            });
        }
        if i64::try_from(extent).is_err() {
            return Err(Error::Dimension {
                kernel: name,
                arg: dim,
                value: extent.to_string(),
                reason: "does not fit in i64",
            });
        }
    }
    if let Launch::Attention(staged) = &target.launch
        && attention::launch_staged(name, stream, &target, staged, extents, &mut args)?
    {
        return Ok(());
    }
    let tree = match p.tree {
        None => None,
        Some(t) => match tree_grid(&p, &t, extents) {
            Ok(None) => return Ok(()),
            Ok(Some(g)) => Some((t, g)),
            Err(blocks) => return Err(too_many_blocks(name, blocks)),
        },
    };
    // A persistent cluster grid holds the clusters that are resident at once: the driver counts them.
    let resident = (p.cluster > 1 && p.max_blocks_per_sm > 0)
        .then(|| {
            target
                .function
                .resident_clusters(stream, (p.cluster, p.threads, p.smem_bytes))
        })
        .flatten();
    let cfg = match (&tree, grid(&p, extents, target.sm_count, resident)) {
        (Some((_, g)), _) => g.config,
        (None, Ok(Some(cfg))) => cfg,
        (None, Ok(None)) => return Ok(()),
        (None, Err(blocks)) => return Err(too_many_blocks(name, blocks)),
    };
    let dims: Vec<i64> = extents.iter().map(|&e| e as i64).collect();
    // The partials of every reduction, [partials][items][slices]: each launch but the last writes its pass's
    // slots in full before any later launch (same stream) reads them, so it needs no initialisation.
    // Stream-ordered: freed on `stream` after the last launch when it drops.
    let workspace = match &tree {
        Some((t, g)) => {
            let bytes = (t.partials.max(1) as usize)
                .saturating_mul(g.items as usize)
                .saturating_mul(g.slices as usize)
                .saturating_mul(4);
            Some(
                Workspace::new(stream, bytes)
                    .map_err(Error::driver(name, "allocate the reduction workspace"))?,
            )
        }
        None => None,
    };
    let stages = tree.as_ref().map_or(1, |(t, _)| t.passes as i32 + 1);
    for stage in 0..stages {
        let mut builder = Args::new(stream, target.function, name);
        for b in args.inputs {
            match b {
                In::F32(b) => builder.arg(*b),
                In::Bf16(b) => builder.arg(*b),
                In::F16(b) => builder.arg(*b),
                In::I64(b) => builder.arg(*b),
                In::I32(b) => builder.arg(*b),
                In::Bool(b) => builder.arg(*b),
            };
        }
        for b in args.outputs.iter_mut() {
            push_out(&mut builder, b.reborrow());
        }
        for d in &dims {
            builder.arg(d);
        }
        for s in args.params {
            builder.arg(s);
        }
        let slices = tree.as_ref().map_or(0, |(_, g)| g.slices as i64);
        if let Some(w) = &workspace {
            builder.arg(&w.ptr).arg(&stage).arg(&slices);
        }
        // SAFETY: the argument list is the ABI `ProgramLaunch` documents (inputs, outputs, every extent as i64,
        // the scalars; for a tree the workspace, the stage and the slices per item, with a workspace of the
        // `partials · items · slices` floats the stages address), each buffer holds exactly the elements its
        // dimensions make in the stream's context, and the generated kernel touches only elements inside those
        // dimensions.
        unsafe { builder.launch(cfg, "launch") }?;
    }
    Ok(())
}

fn too_many_blocks(name: &'static str, blocks: u128) -> Error {
    Error::Dimension {
        kernel: name,
        arg: "-",
        value: format!("{blocks} blocks"),
        reason: "is more blocks than one launch takes for this variant",
    }
}

/// A tree launch's grid at some extents.
#[derive(Clone, Copy, Debug)]
pub struct TreeGrid {
    /// Every launch's configuration: `items · slices` blocks.
    pub config: LaunchConfig,
    /// The items (one reduction each).
    pub items: u64,
    /// The blocks (contiguous ranges of reduced elements) per item.
    pub slices: u64,
}

/// The grid of tree launch `t` of `p` at `extents` ([`TreeLaunch`](crate::TreeLaunch) says how), or `None`
/// when there is no item.
///
/// # Errors
/// The number of blocks, when it exceeds what one launch takes.
pub fn tree_grid(
    p: &ProgramLaunch,
    t: &crate::TreeLaunch,
    extents: &[usize],
) -> Result<Option<TreeGrid>, u128> {
    let [items, _, reduced, _] = shape_key(p, extents);
    if items == 0 {
        return Ok(None);
    }
    let slices = (u64::from(t.blocks) / items)
        .min(reduced.div_ceil(u64::from(t.tile.max(1))))
        .max(1);
    // Items share a block only where each has one slice (a row program's tail: `TreeLaunch` says so).
    let groups = items.div_ceil(u64::from(p.items_per_block.max(1)));
    let blocks = u128::from(groups) * u128::from(slices);
    if blocks > i32::MAX as u128 {
        return Err(blocks);
    }
    Ok(Some(TreeGrid {
        config: LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (p.threads, 1, 1),
            shared_mem_bytes: p.smem_bytes,
        },
        items,
        slices,
    }))
}

fn push_out<'a>(builder: &mut Args<'a>, b: Out<'a>) {
    fn push<'a, T: DeviceRepr>(builder: &mut Args<'a>, b: &'a mut CudaSlice<T>) {
        builder.arg(b);
    }
    match b {
        Out::F32(b) => push(builder, b),
        Out::Bf16(b) => push(builder, b),
        Out::F16(b) => push(builder, b),
        Out::I64(b) => push(builder, b),
        Out::I32(b) => push(builder, b),
    }
}

/// The launch configuration of `p` for `extents`, or `None` when there is no work item. A persistent cluster
/// grid (`cluster > 1` and `max_blocks_per_sm > 0`) holds at most `resident_clusters` clusters, the count the
/// device holds at once ([`Function::resident_clusters`](crate::Function::resident_clusters)); unknown (or
/// 0), a cluster per work group (each loops once).
///
/// # Errors
/// The number of blocks, when it exceeds what one launch takes and the kernel does not loop over its items.
pub fn grid(
    p: &ProgramLaunch,
    extents: &[usize],
    sm_count: u32,
    resident_clusters: Option<u32>,
) -> Result<Option<LaunchConfig>, u128> {
    let items: u128 = extents
        .iter()
        .enumerate()
        .filter(|(i, _)| p.items_mask & (1 << i) != 0)
        .map(|(_, &e)| e as u128)
        .product();
    if items == 0 {
        return Ok(None);
    }
    let mut blocks = items.div_ceil(p.items_per_block.max(1) as u128);
    if p.cluster > 1 {
        // Clusters, not blocks: more than are resident at once would leave the last ones to run their whole
        // share of the items after the others finish.
        // A count of 0 is no count (an empty grid would not launch).
        if let (true, Some(resident)) = (
            p.max_blocks_per_sm > 0,
            resident_clusters.filter(|&r| r > 0),
        ) {
            blocks = blocks.min(resident as u128);
        }
    } else if p.max_blocks_per_sm > 0 {
        blocks = blocks.min(sm_count as u128 * p.max_blocks_per_sm as u128);
    }
    let blocks = blocks * p.cluster.max(1) as u128;
    if blocks > i32::MAX as u128 {
        return Err(blocks);
    }
    Ok(Some(LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (p.threads, 1, 1),
        shared_mem_bytes: p.smem_bytes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(
        items_mask: u32,
        items_per_block: u32,
        max_blocks_per_sm: u32,
        cluster: u32,
    ) -> ProgramLaunch {
        ProgramLaunch {
            threads: 256,
            smem_bytes: 0,
            items_mask,
            items_per_block,
            max_blocks_per_sm,
            cluster,
            nonempty_mask: 0,
            tree: None,
        }
    }

    #[test]
    fn the_grid_follows_the_masked_dimensions() {
        // Rows (dim 0) of 1000 elements: one row per block.
        let g = |l, e: &[usize]| grid(&l, e, 132, None).unwrap().unwrap().grid_dim;
        assert_eq!(g(launch(0b01, 1, 0, 1), &[300, 1000]), (300, 1, 1));
        // Every element, 1024 per block, at most 8 or 1 blocks per SM.
        assert_eq!(g(launch(0b11, 1024, 8, 1), &[300, 1000]), (293, 1, 1));
        assert_eq!(g(launch(0b11, 1024, 1, 1), &[300, 1000]), (132, 1, 1));
        // A cluster of 4 per row.
        assert_eq!(g(launch(0b01, 1, 0, 4), &[300, 1000]), (1200, 1, 1));
        assert!(matches!(
            grid(&launch(0b01, 1, 0, 1), &[0, 1000], 132, None),
            Ok(None)
        ));
        // A grid one launch cannot take is refused unless the kernel loops over its items.
        assert!(grid(&launch(0b11, 1, 0, 8), &[1 << 40, 1 << 20], 132, None).is_err());
        assert_eq!(g(launch(0b11, 1, 4, 1), &[1 << 40, 1 << 20]), (528, 1, 1));
        // A persistent grid of clusters of 8: the 15 the device holds at once (the driver's count), not 132 / 8;
        // where the driver does not say, a cluster per row.
        let persistent = launch(0b01, 1, 1, 8);
        let at = |resident| {
            grid(&persistent, &[4096, 393_216], 132, resident)
                .unwrap()
                .unwrap()
                .grid_dim
        };
        assert_eq!(at(Some(15)), (120, 1, 1));
        assert_eq!(at(None), (4096 * 8, 1, 1));
        // A count of 0 is no count: never an empty grid.
        assert_eq!(at(Some(0)), (4096 * 8, 1, 1));
        assert_eq!(
            grid(&persistent, &[7, 393_216], 132, Some(15))
                .unwrap()
                .unwrap()
                .grid_dim,
            (56, 1, 1)
        );
    }

    #[test]
    fn a_tree_cuts_each_item_into_slices_that_follow_the_shape_only() {
        let t = crate::TreeLaunch {
            blocks: 1024,
            tile: 4096,
            passes: 2,
            partials: 2,
        };
        // Batch statistics of x[n, c, h, w] per channel c (dim 1): 64 items of 64 · 512 · 512 elements.
        let p = ProgramLaunch {
            tree: Some(t),
            ..launch(0b0010, 1, 0, 1)
        };
        let g = tree_grid(&p, &t, &[64, 64, 512, 512]).unwrap().unwrap();
        assert_eq!((g.items, g.slices, g.config.grid_dim.0), (64, 16, 1024));
        // A sum to one value: every block on the one item.
        let all = ProgramLaunch { items_mask: 0, ..p };
        let g = tree_grid(&all, &t, &[64, 64, 512, 512]).unwrap().unwrap();
        assert_eq!((g.items, g.slices), (1, 1024));
        // Short reductions take a block per tile at most, and at least one per item.
        let g = tree_grid(&all, &t, &[1, 1, 1, 5000]).unwrap().unwrap();
        assert_eq!(g.slices, 2);
        let g = tree_grid(&p, &t, &[1, 5000, 1, 0]).unwrap().unwrap();
        assert_eq!((g.items, g.slices), (5000, 1));
        assert!(tree_grid(&p, &t, &[8, 0, 8, 8]).unwrap().is_none());
        assert!(tree_grid(&p, &t, &[1, 1 << 40, 1, 1]).is_err());
    }

    #[test]
    fn a_row_programs_tail_launches_its_row_groups_once_per_stage() {
        // 32768 rows (dim 0) of 4096, 8 rows per block, no slicing: the rows' grid at every stage.
        let t = crate::TreeLaunch {
            blocks: 0,
            tile: 0,
            passes: 1,
            partials: 1,
        };
        let p = ProgramLaunch {
            tree: Some(t),
            ..launch(0b01, 8, 0, 1)
        };
        let g = tree_grid(&p, &t, &[32768, 4096]).unwrap().unwrap();
        assert_eq!((g.items, g.slices, g.config.grid_dim.0), (32768, 1, 4096));
        let g = tree_grid(&p, &t, &[9, 4096]).unwrap().unwrap();
        assert_eq!((g.items, g.config.grid_dim.0), (9, 2));
    }

    #[test]
    fn the_shape_key_splits_items_from_the_reduced_length() {
        // Rows of x[b, r, c] reduced over c: items b·r, rest c.
        assert_eq!(
            shape_key(&launch(0b011, 1, 0, 1), &[4, 1000, 393216]),
            [4000, 1, 393216, 1]
        );
        // A map covers every element.
        assert_eq!(shape_key(&launch(0b11, 1024, 0, 1), &[7, 9]), [63, 1, 1, 1]);
        // Sizes past u64 saturate rather than wrap.
        assert_eq!(
            shape_key(&launch(0b11, 1, 0, 1), &[usize::MAX, 4])[0],
            u64::MAX
        );
    }
}
