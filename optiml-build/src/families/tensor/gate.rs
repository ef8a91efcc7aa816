//! The tensor family's gate, run in the evaluation worker: the program's float64 interpreter is the reference.
//! Every size of the plan is checked element by element on fresh inputs with poisoned outputs; then the
//! dispatch size is timed, and checked after the first and the last timed run: on every element against the
//! program's float64 reference computed on the GPU ([`mod@reference`]), or, where that would cost too much, on
//! sampled rows by the host. Every check counts the unwritten elements of whole outputs on the device and copies
//! back only what it compares, so that checking a dispatch size of gigabytes costs about what a few runs of the
//! candidate do.

use super::reference::{self, OutputRef, Values};
use crate::config::Dims;
use crate::eval::device::{Bench, Positions, Stop, fault, launch_failed, reject};
use crate::eval::guard::{Guarded, guarded_bytes, written_bytes};
use crate::eval::limits::{Need, bytes};
use crate::eval::plan::{self, Comparison, Distribution};
use crate::eval::{Gate, Job, TestPlan, Tolerance};
use cudarc::driver::{CudaSlice, CudaStream, sys};
use half::{bf16, f16};
use optiml_runtime::Target;
use optiml_runtime::program::{self as rt, In, Out, ProgramArgs, Signature, TensorSig};
use optiml_spec::program::interp::{self, HostTensor, Reference, Sample};
use optiml_spec::program::{Elem, Expr, Program, Reduce, Unary};
use optiml_spec::{DType, Dim, Precision};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What a program's candidate must compute, and at which size it is timed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProgramProblem {
    /// The program.
    pub program: Program,
    /// Every dimension's extent at the dispatch size.
    pub dispatch: Vec<usize>,
    /// The run-time scalars used in checks, one per parameter.
    pub params: Vec<f32>,
    /// The PTX of the program's float64 reference on the GPU ([`reference::ptx`]), which checks every element
    /// of the dispatch size; without it (no NVRTC in the parent), sampled rows are checked on the host.
    #[serde(default)]
    pub reference: Option<String>,
}

impl ProgramProblem {
    /// `program` timed at `dispatch`, with scalars that are neither 0 nor 1 (which would hide a dropped or
    /// doubled parameter).
    pub fn new(program: Program, dispatch: Vec<usize>) -> Self {
        let params = (0..program.params.len())
            .map(|i| 0.75 + 0.5 * i as f32)
            .collect();
        ProgramProblem {
            reference: reference::ptx(&program),
            program,
            dispatch,
            params,
        }
    }
}

/// The tensor family's gate.
pub struct ProgramGate;

impl Gate for ProgramGate {
    fn family(&self) -> &'static str {
        super::FAMILY
    }

    fn run(&self, bench: &mut Bench, job: &Job, target: Target<'_>) -> Result<Vec<f64>, Stop> {
        let problem: ProgramProblem = job
            .problem
            .decode()
            .map_err(|reason| reject("problem", reason))?;
        let p = &problem.program;
        if let Some(t) = p.inputs.iter().enumerate().find_map(|(k, t)| {
            (matches!(t.elem, Elem::I64 | Elem::I32)
                && index_bound(p, k, &problem.dispatch).is_none())
            .then_some(t)
        }) {
            return Err(reject(
                "inputs",
                format!(
                    "`{}` is an integer input no gather reads as its index; the gate draws integers as indices only",
                    t.name
                ),
            ));
        }
        let sig = signature(p);
        let gpu = match &problem.reference {
            Some(ptx) => Some(reference::Device::load(bench, p, ptx)?),
            None => None,
        };
        let check = Check {
            job,
            target,
            program: p,
            sig: &sig,
            params: &problem.params,
            gpu: gpu.as_ref(),
        };
        for (i, extents) in job.plan.sizes.iter().enumerate() {
            let seed = plan::splitmix(job.seed ^ (i as u64 + 1));
            check.size(bench, extents, seed, i, None)?;
        }
        let seed = plan::splitmix(job.seed ^ 0xd15);
        let mut times = Vec::new();
        check.size(bench, &problem.dispatch, seed, 0, Some(&mut times))?;
        Ok(times)
    }
}

/// The runtime's view of `p`'s buffers and dimensions. Its names live as long as the worker (a few bytes per
/// job), as the runtime's signatures are the generated wrappers' statics.
pub fn signature(p: &Program) -> Signature {
    fn leak<T>(v: Vec<T>) -> &'static [T] {
        Box::leak(v.into_boxed_slice())
    }
    let name = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    let elem = |e: Elem| runtime_elem(e, p.dtype);
    let tensor = |n: &str, axes: &[usize], e: Elem| TensorSig {
        name: name(n),
        axes: leak(axes.iter().map(|&a| a as u16).collect()),
        elem: elem(e),
    };
    Signature {
        inputs: leak(
            p.inputs
                .iter()
                .map(|t| tensor(&t.name, &t.axes, t.elem))
                .collect(),
        ),
        outputs: leak(
            p.outputs()
                .map(|(_, s)| tensor(&s.name, &s.axes, s.elem))
                .collect(),
        ),
        dims: leak(
            p.dims
                .iter()
                .map(|d| (name(&d.name), d.size.fixed().map(|v| v as usize)))
                .collect(),
        ),
    }
}

/// The number of positions integer input `k` indexes at `extents` (the smallest gathered axis it sets), or
/// `None` when no gather reads it as its index.
fn index_bound(p: &Program, k: usize, extents: &[usize]) -> Option<usize> {
    super::codegen::gathers(p)
        .into_iter()
        .filter(|&(_, i)| i == k)
        .map(|(g, _)| extents[p.inputs[g.input].axes[g.axis]])
        .min()
}

/// The runtime's element type of a tensor of `elem` in a program of `dtype`.
pub fn runtime_elem(elem: Elem, dtype: DType) -> rt::Elem {
    match (elem, dtype) {
        (Elem::Float, DType::F32) => rt::Elem::F32,
        (Elem::Float, DType::Bf16) => rt::Elem::Bf16,
        (Elem::Float, DType::F16) => rt::Elem::F16,
        (Elem::I64, _) => rt::Elem::I64,
        (Elem::I32, _) => rt::Elem::I32,
        (Elem::Bool, _) => rt::Elem::Bool,
    }
}

/// The plan for `p`: sizes that stress what a generator gets wrong (a single element; reduced lengths of 1,
/// of a few elements, past a block, past shared memory; other extents that are multiples of nothing), each
/// dimension's extent chosen by whether a reduction binds it; fixed dimensions keep their value; `extra` (the
/// user's run-time extents) after them. Inputs cycle through every distribution, including large magnitudes
/// (softmax must subtract the maximum) and near-constant rows (a norm's variance must not cancel).
pub fn test_plan(p: &Program, extra: &[Dims]) -> TestPlan {
    let reduced = p.reduced_dims();
    // (reduced extent, other extent): at most about 2²¹ elements per tensor, so the float64 reference stays fast.
    let shapes: [(usize, usize); 6] = [(1, 1), (1, 5), (7, 3), (1000, 33), (4099, 17), (70_001, 2)];
    let mut sizes: Vec<Vec<usize>> = Vec::new();
    for (r, o) in shapes {
        let extents: Vec<usize> = p
            .dims
            .iter()
            .enumerate()
            .map(|(i, d)| match d.size {
                Dim::Fixed(v) => v as usize,
                Dim::Runtime if reduced.contains(&i) => r,
                // Without reductions every dimension takes the long extents.
                Dim::Runtime if reduced.is_empty() => r.max(o),
                Dim::Runtime => o,
            })
            .collect();
        if super::largest(p, &extents) <= 1 << 22 && !sizes.contains(&extents) {
            sizes.push(extents);
        }
    }
    for d in extra {
        if let Ok(extents) = p.extents(&d.0)
            && !sizes.contains(&extents)
        {
            sizes.push(extents);
        }
    }
    let mut plan = TestPlan::new(sizes, Tolerance::for_dtype(p.dtype, Precision::Exact));
    plan.distributions = if running_product(p) {
        // A running product of thousands of values of magnitude above 1 overflows to infinity, which the
        // gate reads as unwritten: these two shrink instead (and cross the subnormal range, which counts too).
        vec![Distribution::Uniform, Distribution::Normal]
    } else if roots_or_logs_of_inputs(p) {
        // The logarithm of a negative input is NaN, which the gate reads as unwritten: positive values only.
        vec![Distribution::Positive, Distribution::NearConstant]
    } else {
        vec![
            Distribution::Uniform,
            Distribution::Large,
            Distribution::NearConstant,
            Distribution::Normal,
            Distribution::HeavyTailed,
        ]
    };
    plan
}

/// Whether `p` takes the logarithm, square root or reciprocal square root of an input itself (not of a value
/// computed from it, such as a sum of squares).
fn roots_or_logs_of_inputs(p: &Program) -> bool {
    fn walk(e: &Expr) -> bool {
        match e {
            Expr::Unary(Unary::Log | Unary::Sqrt | Unary::Rsqrt, a)
                if matches!(**a, Expr::Input(_) | Expr::Gather(..)) =>
            {
                true
            }
            // A gather's index is an integer input, drawn as indices whatever the distribution.
            Expr::Gather(..) => false,
            Expr::Unary(_, a) | Expr::Reduce(_, _, a) | Expr::Scan(_, a) => walk(a),
            Expr::Binary(_, a, b) => walk(a) || walk(b),
            Expr::Select(c, a, b) => walk(c) || walk(a) || walk(b),
            Expr::Const(_) | Expr::Param(_) | Expr::Input(_) | Expr::Value(_) => false,
        }
    }
    p.stmts.iter().any(|s| walk(&s.expr))
}

/// Whether `p` computes a running product (`cumprod`).
fn running_product(p: &Program) -> bool {
    p.stmts
        .iter()
        .any(|s| matches!(&s.expr, Expr::Scan(scan, _) if scan.op == Reduce::Prod))
}

/// Above this many input elements, a dispatch size the GPU reference cannot take is checked for unwritten
/// outputs only: its host reference would take longer than the search can afford per candidate (the plan's sizes
/// are checked in full).
const DISPATCH_REFERENCE_ELEMENTS: usize = 1 << 28;

/// Whether the dispatch size of `p` at `extents` is small enough to check against the reference
/// ([`DISPATCH_REFERENCE_ELEMENTS`]).
fn reference_fits(p: &Program, extents: &[usize]) -> bool {
    let total_inputs = p
        .inputs
        .iter()
        .map(|t| Program::len_of(&t.axes, extents))
        .fold(0usize, usize::saturating_add);
    total_inputs <= DISPATCH_REFERENCE_ELEMENTS
}

/// A device buffer of a program, between guard regions (the candidate reads or writes it).
enum Buffer {
    F32(Guarded<f32>),
    Bf16(Guarded<bf16>),
    F16(Guarded<f16>),
    I64(Guarded<i64>),
    I32(Guarded<i32>),
}

/// `$e` with `$b` bound to whichever typed slice `$buf` (a `Buffer`, by reference) holds.
macro_rules! typed {
    ($buf:expr, $b:ident => $e:expr) => {
        match $buf {
            Buffer::F32($b) => $e,
            Buffer::Bf16($b) => $e,
            Buffer::F16($b) => $e,
            Buffer::I64($b) => $e,
            Buffer::I32($b) => $e,
        }
    };
}

impl Buffer {
    /// `len` elements (at least one), their guards holding the pattern of `seed`.
    fn alloc(st: &Arc<CudaStream>, elem: rt::Elem, len: usize, seed: u64) -> Result<Self, Stop> {
        let len = len.max(1);
        Ok(match elem {
            // A mask is drawn as f32 values (kept here) and thresholded into [`Input::mask`].
            rt::Elem::F32 | rt::Elem::Bool => Buffer::F32(Guarded::alloc(st, len, seed)?),
            rt::Elem::Bf16 => Buffer::Bf16(Guarded::alloc(st, len, seed)?),
            rt::Elem::F16 => Buffer::F16(Guarded::alloc(st, len, seed)?),
            rt::Elem::I64 => Buffer::I64(Guarded::alloc(st, len, seed)?),
            rt::Elem::I32 => Buffer::I32(Guarded::alloc(st, len, seed)?),
        })
    }

    /// The bytes of one element as [`Buffer::alloc`] stores `elem` (a mask's drawn values are f32).
    fn elem_bytes(elem: rt::Elem) -> usize {
        match elem {
            rt::Elem::Bf16 | rt::Elem::F16 => 2,
            rt::Elem::F32 | rt::Elem::Bool | rt::Elem::I32 => 4,
            rt::Elem::I64 => 8,
        }
    }

    fn arm(&mut self, seed: u64) -> Result<(), Stop> {
        typed!(self, b => b.arm(seed))
    }

    fn check_guards(&self, check: &str, name: &str) -> Result<(), Stop> {
        typed!(self, b => b.check(check, name))
    }

    fn input(&self) -> In<'_> {
        match self {
            Buffer::F32(b) => In::F32(b),
            Buffer::Bf16(b) => In::Bf16(b),
            Buffer::F16(b) => In::F16(b),
            Buffer::I64(b) => In::I64(b),
            Buffer::I32(b) => In::I32(b),
        }
    }

    fn output(&mut self) -> Out<'_> {
        match self {
            Buffer::F32(b) => Out::F32(b),
            Buffer::Bf16(b) => Out::Bf16(b),
            Buffer::F16(b) => Out::F16(b),
            Buffer::I64(b) => Out::I64(b),
            Buffer::I32(b) => Out::I32(b),
        }
    }
}

/// An input's device buffer, and for a 16-bit one the f32 buffer its values are drawn in (then rounded and
/// narrowed: the reference reads the f32 values the 16-bit type holds exactly). A mask's values are drawn in
/// `buffer` and the kernel reads `mask`, true where they are positive.
struct Input {
    buffer: Buffer,
    drawn: Option<CudaSlice<f32>>,
    mask: Option<Guarded<bool>>,
}

impl Input {
    /// What the kernel reads.
    fn arg(&self) -> In<'_> {
        match &self.mask {
            Some(m) => In::Bool(m),
            None => self.buffer.input(),
        }
    }

    /// The bytes of what the kernel reads, on the host, and the bytes of one of its elements.
    fn read_bytes(&self) -> Result<(Vec<u8>, usize), Stop> {
        match &self.mask {
            Some(m) => Ok((m.host_bytes()?, 1)),
            None => typed!(&self.buffer, b => Ok((b.host_bytes()?, b.elem_bytes()))),
        }
    }

    /// Where the GPU reference reads it: a mask's bytes, a 16-bit input's exact f32 values, else the buffer.
    fn address(&self, st: &Arc<CudaStream>) -> u64 {
        match (&self.mask, &self.drawn) {
            (Some(m), _) => reference::address(st, m),
            (None, Some(f)) => reference::address(st, f),
            (None, None) => typed!(&self.buffer, b => reference::address(st, b)),
        }
    }

    /// Rejects the candidate when it wrote into a guard of what it reads, `name`.
    fn check_guards(&self, check: &str, name: &str) -> Result<(), Stop> {
        match &self.mask {
            Some(m) => m.check(check, name),
            None => self.buffer.check_guards(check, name),
        }
    }
}

/// An input's host values for the reference.
enum HostValues {
    Float(Vec<f32>),
    Int(Vec<i64>),
}

/// An output's device buffer and its element count. Integer outputs are poisoned with -1, an index no arg
/// reduction returns; float outputs with NaN.
struct Output {
    buffer: Buffer,
    len: usize,
}

impl Output {
    /// Writes values no correct kernel leaves behind: NaN, or an impossible index.
    fn poison(&mut self, w: &Bench) -> Result<(), Stop> {
        typed!(&mut self.buffer, b => w.poison(b))
    }

    fn decoy(&mut self, w: &Bench, seed: u64) -> Result<(), Stop> {
        typed!(&mut self.buffer, b => w.decoy(b, seed))
    }

    /// The output as the GPU reference's comparison reads it.
    fn as_ref(&self, st: &Arc<CudaStream>) -> OutputRef {
        let kind = match &self.buffer {
            Buffer::F32(_) => 0,
            Buffer::Bf16(_) => 1,
            Buffer::F16(_) => 2,
            Buffer::I64(_) => 3,
            Buffer::I32(_) => 4,
        };
        OutputRef {
            ptr: typed!(&self.buffer, b => reference::address(st, b)),
            kind,
            len: self.len,
        }
    }

    /// How many elements were left unwritten (NaN, infinite or an impossible index), counted on the device.
    fn unwritten(&self, w: &Bench) -> Result<u64, Stop> {
        typed!(&self.buffer, b => w.count_poisoned(b, self.len))
    }

    /// The `compared` elements on the host as f64 (indices as numbers); nothing else is copied.
    fn read(&self, w: &Bench, compared: &Compared) -> Result<Vec<f64>, Stop> {
        let at = match compared {
            Compared::All => None,
            Compared::At { device, .. } => Some(device),
        };
        typed!(&self.buffer, b => w.gather(b, at, self.len))
    }
}

/// Every buffer of a program at one size, in [`Program::inputs`] and output order. The dispatch size's are kept
/// between jobs in [`Bench::kept`] while the next job's program needs the same ones: allocating gigabytes per job
/// would cost more than the runs it checks (as in the matmul gate).
struct Buffers {
    /// Each input's then each output's element type and count.
    layout: Vec<(rt::Elem, usize)>,
    inputs: Vec<Input>,
    outputs: Vec<Output>,
}

impl Buffers {
    /// The element type and count of each input, then of each output, of `p` at `extents`.
    fn layout(p: &Program, extents: &[usize]) -> Vec<(rt::Elem, usize)> {
        let inputs = p
            .inputs
            .iter()
            .map(|t| (t.elem, Program::len_of(&t.axes, extents)));
        let outputs = p
            .outputs()
            .map(|(_, s)| (s.elem, Program::len_of(&s.axes, extents)));
        inputs
            .chain(outputs)
            .map(|(e, len)| (runtime_elem(e, p.dtype), len))
            .collect()
    }

    /// The device bytes of buffers of `layout` for `p`: each with its guards, a 16-bit input's f32 values and
    /// a mask.
    fn device_bytes(p: &Program, layout: &[(rt::Elem, usize)]) -> u64 {
        layout
            .iter()
            .enumerate()
            .map(|(k, &(elem, len))| {
                let len = len.max(1);
                let mut b = guarded_bytes(bytes(len, Buffer::elem_bytes(elem)));
                if k < p.inputs.len() {
                    match elem {
                        rt::Elem::Bf16 | rt::Elem::F16 => b = b.saturating_add(bytes(len, 4)),
                        rt::Elem::Bool => b = b.saturating_add(guarded_bytes(bytes(len, 1))),
                        _ => {}
                    }
                }
                b
            })
            .fold(0, u64::saturating_add)
    }

    /// The seed of the guards of buffer `k` (inputs then outputs; a mask's is the next) in a set armed from
    /// `seed`.
    fn guard_seed(seed: u64, k: usize) -> u64 {
        seed.wrapping_add(2 * k as u64)
    }

    fn alloc(
        w: &Bench,
        p: &Program,
        layout: Vec<(rt::Elem, usize)>,
        seed: u64,
    ) -> Result<Self, Stop> {
        let st = &w.stream;
        let (ins, outs) = layout.split_at(p.inputs.len());
        let inputs = ins
            .iter()
            .enumerate()
            .map(|(k, &(elem, len))| {
                let guard = Self::guard_seed(seed, k);
                let drawn = match elem {
                    rt::Elem::Bf16 | rt::Elem::F16 => Some(
                        st.alloc_zeros::<f32>(len.max(1))
                            .map_err(fault("allocating"))?,
                    ),
                    _ => None,
                };
                let mask = match elem {
                    rt::Elem::Bool => Some(Guarded::alloc(st, len.max(1), guard + 1)?),
                    _ => None,
                };
                Ok(Input {
                    buffer: Buffer::alloc(st, elem, len, guard)?,
                    drawn,
                    mask,
                })
            })
            .collect::<Result<_, Stop>>()?;
        let outputs = outs
            .iter()
            .enumerate()
            .map(|(k, &(elem, len))| {
                let guard = Self::guard_seed(seed, ins.len() + k);
                Ok(Output {
                    buffer: Buffer::alloc(st, elem, len, guard)?,
                    len,
                })
            })
            .collect::<Result<_, Stop>>()?;
        Ok(Buffers {
            layout,
            inputs,
            outputs,
        })
    }

    /// Writes the patterns of `seed` into every guard (a kept set gets each job's own).
    fn arm(&mut self, seed: u64) -> Result<(), Stop> {
        for (k, input) in self.inputs.iter_mut().enumerate() {
            let guard = Self::guard_seed(seed, k);
            input.buffer.arm(guard)?;
            if let Some(mask) = &mut input.mask {
                mask.arm(guard + 1)?;
            }
        }
        let n = self.inputs.len();
        for (k, output) in self.outputs.iter_mut().enumerate() {
            output.buffer.arm(Self::guard_seed(seed, n + k))?;
        }
        Ok(())
    }
}

/// Rejects the candidate of check `check` when it wrote into a guard of any buffer of `p` it got.
fn check_guards(
    check: &str,
    p: &Program,
    inputs: &[Input],
    outputs: &[Output],
) -> Result<(), Stop> {
    for (t, input) in p.inputs.iter().zip(inputs) {
        input.check_guards(check, &format!("`{}`", t.name))?;
    }
    for ((_, stmt), output) in p.outputs().zip(outputs) {
        output
            .buffer
            .check_guards(check, &format!("`{}`", stmt.name))?;
    }
    Ok(())
}

/// Salts a size's seed into the seed of its guards' patterns.
const GUARD_SALT: u64 = 0x6775_6172_6421;

/// The host bytes a size of `p` at `extents` takes: the inputs' host copies (integer indices always, drawn as
/// i64 and narrowed; the others with a reference), the float64 reference of every statement (values and scales,
/// twice for a scan's terms) over `sample`'s rows, the compared elements' positions and values, and with
/// `inputs_checked` the bytes of every input before and after the launch.
fn host_need(
    p: &Program,
    extents: &[usize],
    sample: Option<&Sample>,
    with_reference: bool,
    inputs_checked: bool,
) -> u64 {
    let mut need = Need::default();
    for t in &p.inputs {
        let len = Program::len_of(&t.axes, extents);
        match t.elem {
            Elem::I64 | Elem::I32 => need.host(bytes(len, 12)),
            // Drawn as f32, then held as i64 for the reference.
            Elem::Bool if with_reference => need.host(bytes(len, 12)),
            Elem::Float if with_reference => need.host(bytes(len, 4)),
            _ => {}
        }
        if inputs_checked {
            let size = match t.elem {
                Elem::Bool => 1,
                other => Buffer::elem_bytes(runtime_elem(other, p.dtype)),
            };
            need.host(bytes(len, 2 * size));
        }
    }
    if with_reference {
        for s in &p.stmts {
            let len = reference_len(&s.axes, extents, sample);
            let per = if matches!(s.expr, Expr::Scan(..)) {
                32
            } else {
                16
            };
            need.host(bytes(len, per));
            if s.output {
                let positions = if restricts(&s.axes, sample) { 8 } else { 0 };
                need.host(bytes(len, 8 + positions));
            }
        }
    }
    need.host
}

/// The device bytes a check of `p` at `extents` gathers its compared elements into (as f64), with their
/// positions where `sample` restricts an output.
fn compared_device_bytes(p: &Program, extents: &[usize], sample: Option<&Sample>) -> u64 {
    p.outputs()
        .map(|(_, s)| {
            let len = reference_len(&s.axes, extents, sample);
            bytes(len, if restricts(&s.axes, sample) { 16 } else { 8 })
        })
        .fold(0, u64::saturating_add)
}

/// How many elements the reference of a tensor with `axes` holds: every one, or with a sampled dimension among
/// them, its sampled values only.
fn reference_len(axes: &[usize], extents: &[usize], sample: Option<&Sample>) -> usize {
    axes.iter()
        .map(|&a| match sample {
            Some(s) if s.dim == a => s.values.len(),
            _ => extents[a],
        })
        .fold(1usize, usize::saturating_mul)
}

/// Which elements of an output are compared with its reference.
enum Compared {
    /// Every element, in order: the reference is whole.
    All,
    /// Those at `host` (row-major positions, in the reference's order), gathered on the device from `device`.
    At { host: Vec<usize>, device: Positions },
}

impl Compared {
    /// What an output with `axes` is compared on when `sample` restricts the reference; positions are uploaded
    /// only where it restricts this output.
    fn of(
        w: &Bench,
        axes: &[usize],
        extents: &[usize],
        sample: Option<&Sample>,
    ) -> Result<Self, Stop> {
        if !restricts(axes, sample) {
            return Ok(Compared::All);
        }
        let host = positions(axes, extents, sample);
        let device = w.positions(&host)?;
        Ok(Compared::At { host, device })
    }

    /// The row-major position in the output of the reference's `i`-th value.
    fn position(&self, i: usize) -> usize {
        match self {
            Compared::All => i,
            Compared::At { host, .. } => host[i],
        }
    }
}

/// What one size is checked against.
struct Mode<'g> {
    /// Every element, against the program's float64 reference on the GPU.
    gpu: Option<&'g reference::Device>,
    /// The host reference's rows, where it holds only some.
    sample: Option<Sample>,
    /// Whether the host computes a reference (without either, only unwritten elements are counted).
    host: bool,
}

impl<'g> Mode<'g> {
    fn gpu(g: &'g reference::Device) -> Self {
        Mode {
            gpu: Some(g),
            sample: None,
            host: false,
        }
    }
}

/// One job's checks.
struct Check<'a> {
    job: &'a Job,
    target: Target<'a>,
    program: &'a Program,
    sig: &'a Signature,
    params: &'a [f32],
    /// The program's float64 reference on the GPU, for the dispatch size.
    gpu: Option<&'a reference::Device>,
}

impl Check<'_> {
    /// One size, on its buffers: the dispatch size's kept from the last job where they fit (see [`Buffers`]).
    fn size(
        &self,
        w: &mut Bench,
        extents: &[usize],
        seed: u64,
        index: usize,
        times: Option<&mut Vec<f64>>,
    ) -> Result<(), Stop> {
        let p = self.program;
        let layout = Buffers::layout(p, extents);
        let keep = times.is_some();
        // A kept set that does not fit is freed before this one is allocated (and before asking what is free).
        let kept = if keep {
            let kept = w.kept.take().and_then(|k| k.downcast::<Buffers>().ok());
            let fits = kept.filter(|b| b.layout == layout);
            if fits.is_none() {
                w.stream
                    .synchronize()
                    .map_err(fault("freeing the last job's buffers"))?;
            }
            fits
        } else {
            None
        };
        // Refused before anything is allocated when its buffers, or its host copies and reference, would not fit.
        let label: Vec<String> = p
            .dims
            .iter()
            .zip(extents)
            .map(|(d, e)| format!("{}={e}", d.name))
            .collect();
        let what = format!("checking {}", label.join(" "));
        let need = |mode: &Mode, reference_bytes: u64| {
            let mut need = Need::default();
            if kept.is_none() {
                need.device(Buffers::device_bytes(p, &layout));
            }
            if mode.host {
                need.device(compared_device_bytes(p, extents, mode.sample.as_ref()));
            }
            need.device(reference_bytes);
            need.host(host_need(
                p,
                extents,
                mode.sample.as_ref(),
                mode.host,
                !keep,
            ));
            need
        };
        // The dispatch size is checked on every element by the GPU's reference where it is affordable, else on
        // the host's sampled rows; a plan size always on every element by the host.
        let on_gpu = if keep {
            self.gpu
                .and_then(|g| g.fits(extents).map(|bytes| (g, bytes)))
        } else {
            None
        };
        let mode = match on_gpu {
            Some((g, bytes)) if w.admit(&what, need(&Mode::gpu(g), bytes)).is_ok() => Mode::gpu(g),
            _ => {
                let mode = Mode {
                    gpu: None,
                    sample: if keep {
                        dispatch_sample(p, extents, self.job.plan.dispatch_samples, seed)
                    } else {
                        None
                    },
                    host: !keep || reference_fits(p, extents),
                };
                w.admit(&what, need(&mode, 0))?;
                mode
            }
        };
        let guard = plan::splitmix(seed ^ GUARD_SALT);
        let mut buffers = match kept {
            Some(mut b) => {
                b.arm(guard)?;
                *b
            }
            None => Buffers::alloc(w, p, layout, guard)?,
        };
        let result = self.run(w, &mut buffers, extents, seed, index, times, &mode);
        if keep {
            w.kept = Some(Box::new(buffers));
        }
        result
    }

    /// Draws an input set from `seed` into the device `inputs` (in f32 from `dist`, rounded to the storage
    /// type; masks half true; a gather's indices uniform over what they select) and returns the host copies the
    /// reference reads when `with_reference` (else nothing).
    fn draw(
        &self,
        w: &Bench,
        inputs: &mut [Input],
        extents: &[usize],
        seed: u64,
        dist: Distribution,
        with_reference: bool,
    ) -> Result<Vec<HostValues>, Stop> {
        let p = self.program;
        let st = &w.stream;
        let mut host = Vec::new();
        for (i, (t, input)) in p.inputs.iter().zip(inputs.iter_mut()).enumerate() {
            let len = Program::len_of(&t.axes, extents);
            let drawn = seed ^ (i as u64 + 1).wrapping_mul(0x9e37);
            if matches!(t.elem, Elem::I64 | Elem::I32) {
                // A gather's indices: uniform over the positions they select (all in range; the interpreter's
                // NaN for one outside is tested on the host).
                let bound = index_bound(p, i, extents).unwrap_or(1).max(1) as u64;
                let values: Vec<i64> = (0..len as u64)
                    .map(|j| (plan::splitmix(drawn ^ j.wrapping_mul(0x2545_f491)) % bound) as i64)
                    .collect();
                let e = fault("copying inputs");
                match &mut input.buffer {
                    Buffer::I64(b) if len > 0 => st.memcpy_htod(&values, &mut **b).map_err(e)?,
                    Buffer::I32(b) if len > 0 => {
                        let narrow: Vec<i32> = values.iter().map(|&v| v as i32).collect();
                        st.memcpy_htod(&narrow, &mut **b).map_err(e)?;
                    }
                    _ => {}
                }
                if with_reference {
                    host.push(HostValues::Int(values));
                }
                continue;
            }
            let values: &CudaSlice<f32> = match (&mut input.buffer, &mut input.drawn) {
                (Buffer::F32(b), _) if t.elem == Elem::Bool => {
                    // Half true, whatever the distribution of the floating inputs.
                    w.fill(b, drawn, Distribution::Uniform)?;
                    let Some(mask) = input.mask.as_mut() else {
                        return Err(reject("inputs", "a mask input without its mask buffer"));
                    };
                    w.to_mask(b, mask)?;
                    b
                }
                (Buffer::F32(b), _) => {
                    w.fill(b, drawn, dist)?;
                    b
                }
                (Buffer::Bf16(n), Some(f)) => {
                    w.fill(f, drawn, dist)?;
                    w.round16(f, DType::Bf16)?;
                    w.narrow(f, n, DType::Bf16)?;
                    f
                }
                (Buffer::F16(n), Some(f)) => {
                    w.fill(f, drawn, dist)?;
                    w.round16(f, DType::F16)?;
                    w.narrow(f, n, DType::F16)?;
                    f
                }
                _ => {
                    return Err(reject(
                        "inputs",
                        "integer inputs are not generated by this gate yet",
                    ));
                }
            };
            if with_reference {
                let mut values = st.clone_dtoh(values).map_err(fault("copying inputs"))?;
                values.truncate(len);
                host.push(match t.elem {
                    Elem::Bool => {
                        HostValues::Int(values.iter().map(|&v| i64::from(v > 0.0)).collect())
                    }
                    _ => HostValues::Float(values),
                });
            }
        }
        Ok(host)
    }

    /// The float64 reference of the program on `host` inputs: every element, or the rows of `sample`.
    fn reference(
        &self,
        host: &[HostValues],
        extents: &[usize],
        sample: Option<&Sample>,
        check: &str,
    ) -> Result<Vec<Reference>, Stop> {
        let tensors: Vec<HostTensor<'_>> = host
            .iter()
            .map(|v| match v {
                HostValues::Float(v) => HostTensor::Float(v),
                HostValues::Int(v) => HostTensor::Int(v),
            })
            .collect();
        let params: Vec<f64> = self.params.iter().map(|&s| s as f64).collect();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        interp::eval(self.program, extents, &tensors, &params, sample, threads)
            .map_err(|e| reject(check.to_string(), format!("the reference failed: {e}")))
    }

    /// One size on fresh inputs. Without `times`, every output element is compared with the reference. With
    /// `times` (the dispatch size), the first run is checked (on sampled rows when the size is large), then
    /// warm-up and timed runs follow, each from poisoned outputs and a flushed L2, and the last run is checked
    /// again. Every check counts unwritten elements of the whole output on the device; only the elements compared
    /// with the reference are copied to the host.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        w: &mut Bench,
        buffers: &mut Buffers,
        extents: &[usize],
        seed: u64,
        index: usize,
        times: Option<&mut Vec<f64>>,
        mode: &Mode<'_>,
    ) -> Result<(), Stop> {
        let p = self.program;
        let dist = self
            .job
            .plan
            .distribution(index + self.job.seed as usize % 5);
        let label: Vec<String> = p
            .dims
            .iter()
            .zip(extents)
            .map(|(d, e)| format!("{}={e}", d.name))
            .collect();
        let check = format!(
            "{} {dist}{}",
            label.join(" "),
            if times.is_some() {
                " (dispatch size)"
            } else {
                ""
            }
        );
        let st = w.stream.clone();
        let Buffers {
            inputs, outputs, ..
        } = buffers;
        // Inputs: drawn in f32, rounded to the storage type, kept on the host for its reference.
        let with_reference = mode.host;
        let host = self.draw(w, inputs, extents, seed, dist, with_reference)?;
        // Or the GPU's reference of every element, from the inputs as the candidate reads them.
        let mut on_gpu: Option<Values> = None;
        let evaluate = |w: &Bench, inputs: &[Input], into: &mut Option<Values>| match mode.gpu {
            Some(g) => {
                let addresses: Vec<u64> = inputs.iter().map(|i| i.address(&w.stream)).collect();
                g.evaluate(w, p, &addresses, extents, self.params, into)
            }
            None => Ok(()),
        };
        evaluate(w, inputs, &mut on_gpu)?;
        let dims: Vec<Option<usize>> = extents.iter().map(|&e| Some(e)).collect();
        let launch = |w: &Bench, inputs: &[Input], outputs: &mut [Output]| {
            let ins: Vec<In<'_>> = inputs.iter().map(Input::arg).collect();
            let mut outs: Vec<Out<'_>> = outputs.iter_mut().map(|o| o.buffer.output()).collect();
            rt::launch_target(
                "candidate",
                &w.stream,
                self.target,
                self.sig,
                ProgramArgs {
                    inputs: &ins,
                    outputs: &mut outs,
                    dims: &dims,
                    params: self.params,
                },
            )
            .map_err(launch_failed(format!("launching `{}`", self.job.name)))
        };
        // The host reference: every element, or, at a large dispatch size, the rows of a sampled dimension.
        let sample = mode.sample.clone();
        let reference = if with_reference {
            Some(self.reference(&host, extents, sample.as_ref(), &check)?)
        } else {
            None
        };
        // Where each reference value lies in its output: found once, gathered from after every checked run.
        let compared: Vec<Compared> = if reference.is_some() {
            p.outputs()
                .map(|(_, s)| Compared::of(w, &s.axes, extents, sample.as_ref()))
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        let tolerance = self.job.plan.tolerance;
        let verify = |w: &Bench,
                      outputs: &[Output],
                      reference: &Option<Vec<Reference>>,
                      on_gpu: &mut Option<Values>,
                      when: &str|
         -> Result<(), Stop> {
            for ((k, (_, stmt)), out) in p.outputs().enumerate().zip(outputs) {
                let unwritten = out.unwritten(w)?;
                if unwritten > 0 {
                    return Err(reject(
                        check.clone(),
                        format!(
                            "{unwritten} of {} elements of `{}` are unwritten (NaN, infinite or an impossible index) {when}",
                            out.len, stmt.name
                        ),
                    ));
                }
                if let (Some(g), Some(values)) = (mode.gpu, on_gpu.as_mut()) {
                    let name = |i: usize| {
                        format!("{}{} {when}", stmt.name, coords(&stmt.axes, extents, i))
                    };
                    let out = out.as_ref(&w.stream);
                    g.compare(w, values, k, out, &tolerance, &name)?
                        .map_err(|reason| reject(check.clone(), reason))?;
                    continue;
                }
                let (Some(reference), Some(compared)) = (reference, compared.get(k)) else {
                    continue;
                };
                let r = &reference[k];
                let values = out.read(w, compared)?;
                if values.len() != r.values.len() {
                    return Err(Stop::Fault {
                        during: format!("checking `{}` on {check}", stmt.name),
                        error: format!(
                            "{} elements read back for {} reference values",
                            values.len(),
                            r.values.len()
                        ),
                    });
                }
                let at = |i: usize| {
                    format!(
                        "{}{} {when}",
                        stmt.name,
                        coords(&stmt.axes, extents, compared.position(i))
                    )
                };
                if stmt.elem == Elem::Float {
                    let mut cmp = Comparison::default();
                    for (i, &v) in values.iter().enumerate() {
                        cmp.check(&tolerance, &|| at(i), v as f32, r.values[i], r.scales[i]);
                    }
                    cmp.finish(&tolerance)
                        .map_err(|reason| reject(check.clone(), reason))?;
                } else if let Some(i) = values.iter().zip(&r.values).position(|(v, r)| v != r) {
                    return Err(reject(
                        check.clone(),
                        format!("{} is {}, expected {}", at(i), values[i], r.values[i]),
                    ));
                }
            }
            Ok(())
        };
        let Some(times) = times else {
            for o in outputs.iter_mut() {
                o.poison(w)?;
            }
            // What the kernel reads, to see that it left it as it was: a kernel that writes into an input (its own
            // scratch, or a change too small for the tolerance) corrupts its caller's data.
            let before = inputs
                .iter()
                .map(Input::read_bytes)
                .collect::<Result<Vec<_>, Stop>>()?;
            launch(w, inputs, outputs)?;
            st.synchronize()
                .map_err(fault(format!("running `{}` on {check}", self.job.name)))?;
            // A write just past an end (or before a start) changes no compared element and no driver sees it: the
            // guards do.
            check_guards(&check, p, inputs, outputs)?;
            for ((t, input), (before, size)) in p.inputs.iter().zip(inputs.iter()).zip(&before) {
                let (after, _) = input.read_bytes()?;
                if let Some(reason) = written_bytes(&format!("`{}`", t.name), *size, before, &after)
                {
                    return Err(reject(check.clone(), reason));
                }
            }
            return verify(w, outputs, &reference, &mut on_gpu, "");
        };
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let total = 1 + self.job.timing.warmup + self.job.timing.runs;
        let mut last_reference = None;
        for run in 0..total {
            if run + 1 == total && run > 0 {
                // The last run gets another input set: a kernel that replays an output it kept (in its own
                // device memory) from the earlier runs, whose inputs were all the same, fails the check after it.
                let again = plan::splitmix(seed ^ 0x1a57);
                let host = self.draw(w, inputs, extents, again, dist, with_reference)?;
                evaluate(w, inputs, &mut on_gpu)?;
                if with_reference {
                    last_reference =
                        Some(self.reference(&host, extents, sample.as_ref(), &check)?);
                }
            }
            // The last run's outputs hold finite decoys, not the poison every earlier run saw: a kernel that
            // computes only when it sees poison keeps them, and the check after that run fails.
            for o in outputs.iter_mut() {
                if run + 1 == total && run > 0 {
                    o.decoy(w, self.job.seed ^ 0xDEC0)?;
                } else {
                    o.poison(w)?;
                }
            }
            if self.job.timing.flush_l2 {
                w.flush_l2()?;
            }
            let start = st
                .record_event(flags)
                .map_err(fault("recording an event"))?;
            launch(w, inputs, outputs)?;
            let end = st
                .record_event(flags)
                .map_err(fault("recording an event"))?;
            let ms = start
                .elapsed_ms(&end)
                .map_err(fault(format!("running `{}` on {check}", self.job.name)))?;
            if run == 0 {
                verify(w, outputs, &reference, &mut on_gpu, "after the first run")?;
                check_guards(&check, p, inputs, outputs)?;
            } else if run > self.job.timing.warmup {
                times.push(ms as f64);
            }
        }
        // A single run (no warm-up, no timed run) was the first, checked on the first input set.
        if last_reference.is_some() || !with_reference {
            verify(
                w,
                outputs,
                &last_reference,
                &mut on_gpu,
                "after the last timed run",
            )?;
        }
        // The guards are written once a size: a write past an end in any run is still there.
        check_guards(&check, p, inputs, outputs)
    }
}

/// The rows a large dispatch size is checked on: about `samples` elements' worth of one sampleable dimension
/// (first, middle and last always among them); `None` (everything) when the size is small or no dimension can be
/// sampled. The dimension is the one that leaves the float64 reference least work (the outermost among equals):
/// attention's queries, not its batch, whose every sampled item would still cost a whole head.
fn dispatch_sample(p: &Program, extents: &[usize], samples: usize, seed: u64) -> Option<Sample> {
    if super::largest(p, extents) <= 1 << 20 {
        return None;
    }
    let rows_of = |dim: usize| {
        let per_row = super::largest(p, extents) / extents[dim].max(1);
        (samples / per_row.max(1)).clamp(3, 64).min(extents[dim])
    };
    let dim = interp::sampleable(p)
        .into_iter()
        .filter(|&d| extents[d] > 1)
        .map(|d| (reference_work(p, extents, d, rows_of(d)), d))
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))?
        .1;
    let rows = rows_of(dim);
    let (values, _) = plan::sample_grid(extents[dim], 1, rows * rows, seed);
    Some(Sample { dim, values })
}

/// About the operations the float64 reference performs with dimension `dim` cut to `rows` values: every
/// statement's elements times the extents its reductions run over.
fn reference_work(p: &Program, extents: &[usize], dim: usize, rows: usize) -> f64 {
    fn reduced(e: &Expr, extents: &[usize]) -> f64 {
        match e {
            Expr::Const(_) | Expr::Param(_) | Expr::Input(_) | Expr::Value(_) => 0.0,
            Expr::Unary(_, a) | Expr::Scan(_, a) | Expr::Gather(_, a) => reduced(a, extents),
            Expr::Binary(_, a, b) => reduced(a, extents).max(reduced(b, extents)),
            Expr::Select(c, a, b) => reduced(c, extents)
                .max(reduced(a, extents))
                .max(reduced(b, extents)),
            Expr::Reduce(_, over, body) => {
                let n: f64 = over.iter().map(|&d| extents[d] as f64).product();
                n * reduced(body, extents).max(1.0)
            }
        }
    }
    p.stmts
        .iter()
        .map(|s| {
            let elements: f64 = s
                .axes
                .iter()
                .map(|&a| if a == dim { rows } else { extents[a] } as f64)
                .product();
            elements * reduced(&s.expr, extents).max(1.0)
        })
        .sum()
}

/// Whether `sample` restricts a tensor with `axes`: otherwise its reference is whole, every element in order.
fn restricts(axes: &[usize], sample: Option<&Sample>) -> bool {
    sample.is_some_and(|s| axes.contains(&s.dim))
}

/// The row-major positions, in a tensor with `axes`, of the elements a reference (dense, with the sampled
/// dimension running over its sampled values only) holds, in the reference's order.
fn positions(axes: &[usize], extents: &[usize], sample: Option<&Sample>) -> Vec<usize> {
    let sizes: Vec<usize> = axes
        .iter()
        .map(|&a| match sample {
            Some(s) if s.dim == a => s.values.len(),
            _ => extents[a],
        })
        .collect();
    let total: usize = sizes.iter().product();
    let mut out = Vec::with_capacity(total);
    let mut index = vec![0usize; axes.len()];
    for _ in 0..total {
        let mut pos = 0;
        for (k, &a) in axes.iter().enumerate() {
            let v = match sample {
                Some(s) if s.dim == a => s.values[index[k]],
                _ => index[k],
            };
            pos = pos * extents[a] + v;
        }
        out.push(pos);
        for k in (0..axes.len()).rev() {
            index[k] += 1;
            if index[k] < sizes[k] {
                break;
            }
            index[k] = 0;
        }
    }
    out
}

/// `[3, 17]`: the coordinates of row-major position `pos` in a tensor with `axes`.
fn coords(axes: &[usize], extents: &[usize], mut pos: usize) -> String {
    let mut c = vec![0; axes.len()];
    for (k, &a) in axes.iter().enumerate().rev() {
        let e = extents[a].max(1);
        c[k] = pos % e;
        pos /= e;
    }
    format!("{c:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logarithms_of_inputs_are_tested_on_positive_inputs_only() {
        let plan = |text: &str| {
            let p = optiml_spec::program::notation::parse(text).expect("parses");
            test_plan(&p, &[]).distributions
        };
        let kl = "d[r] = sum(c) ((-log(x[r, c])) * t[r, c] + where(t[r, c] > 0, t[r, c] * log(t[r, c]), 0)); \
                  y = mean(r) d[r]";
        assert_eq!(
            plan(kl),
            [Distribution::Positive, Distribution::NearConstant]
        );
        assert_eq!(plan("y[i] = sqrt(x[i])")[0], Distribution::Positive);
        // The root of a sum of squares takes any input.
        let norm = plan("y[r, c] = x[r, c] / sqrt(sum(c) x[r, c]^2)");
        assert!(norm.contains(&Distribution::Normal));
    }

    #[test]
    fn a_size_needs_its_guarded_buffers_its_host_copies_and_its_reference() {
        let p = optiml_spec::program::notation::parse("y[i] = x[i] * 2").unwrap();
        let layout = Buffers::layout(&p, &[1000]);
        // x and y: 4000 bytes each between two 4 KiB guards.
        assert_eq!(Buffers::device_bytes(&p, &layout), 2 * (4000 + 2 * 4096));
        // x on the host, before and after the launch; y's float64 value and scale, and its compared copy.
        assert_eq!(
            host_need(&p, &[1000], None, true, true),
            4000 + 2 * 4000 + 16 * 1000 + 8 * 1000
        );
        // Timed without a reference: nothing on the host.
        assert_eq!(host_need(&p, &[1000], None, false, false), 0);
        assert_eq!(compared_device_bytes(&p, &[1000], None), 8 * 1000);
        // A 16-bit input is drawn in f32 beside it; a mask is a byte each, with its own guards.
        let mut half = p.clone();
        half.dtype = DType::Bf16;
        let layout = Buffers::layout(&half, &[1000]);
        assert_eq!(
            Buffers::device_bytes(&half, &layout),
            2 * (2000 + 2 * 2048) + 4000
        );
        let mask = optiml_spec::program::notation::parse("y[i] = x[i] * m[i], bool m").unwrap();
        let layout = Buffers::layout(&mask, &[1000]);
        assert_eq!(layout[1].0, rt::Elem::Bool, "{layout:?}");
        assert_eq!(
            Buffers::device_bytes(&mask, &layout),
            3 * (4000 + 2 * 4096) + 1000 + 2 * 1024
        );
        // A sampled dispatch size: the reference holds the sampled rows only.
        let rows =
            optiml_spec::program::notation::parse("y[r, c] = x[r, c] / sum(c) x[r, c]").unwrap();
        let sample = Sample {
            dim: 0,
            values: vec![0, 7, 4095],
        };
        let extents = [4096, 1 << 16];
        let sampled = host_need(&rows, &extents, Some(&sample), true, false);
        let whole = host_need(&rows, &extents, None, true, false);
        assert!(sampled < whole);
        // The inputs' copies (1 GiB) dominate; the reference is 3 rows' worth.
        assert!(
            sampled - 4 * 4096 * (1 << 16) < 64 * 3 * (1 << 16),
            "{sampled}"
        );
    }

    #[test]
    fn positions_follow_the_sample() {
        // y[r, c] over 4 × 3, rows 1 and 3 sampled.
        let s = Sample {
            dim: 0,
            values: vec![1, 3],
        };
        assert_eq!(
            positions(&[0, 1], &[4, 3], Some(&s)),
            vec![3, 4, 5, 9, 10, 11]
        );
        assert_eq!(positions(&[0, 1], &[2, 2], None), vec![0, 1, 2, 3]);
        // A tensor without the sampled dimension is whole.
        assert_eq!(positions(&[1], &[4, 3], Some(&s)), vec![0, 1, 2]);
        // The sampled dimension inside: x[b, r] sampled on r.
        let s = Sample {
            dim: 1,
            values: vec![2],
        };
        assert_eq!(positions(&[0, 1], &[2, 4], Some(&s)), vec![2, 6]);
        assert_eq!(coords(&[0, 1], &[2, 4], 6), "[1, 2]");
        assert_eq!(positions(&[], &[2, 4], None), vec![0]);
    }

    #[test]
    fn only_what_the_sample_restricts_is_gathered() {
        let s = Sample {
            dim: 0,
            values: vec![1, 3],
        };
        assert!(restricts(&[0, 1], Some(&s)));
        assert!(restricts(&[1, 0], Some(&s)));
        // An output without the sampled dimension, or no sample: read whole, since its reference holds every
        // element in order.
        for (axes, sample) in [
            (&[1][..], Some(&s)),
            (&[0, 1][..], None),
            (&[][..], Some(&s)),
        ] {
            assert!(!restricts(axes, sample));
            let all = positions(axes, &[4, 3], sample);
            assert_eq!(all, (0..all.len()).collect::<Vec<_>>(), "{axes:?}");
        }
    }

    #[test]
    fn the_dispatch_size_reads_back_a_few_rows_of_its_output() {
        let p = match optiml_spec::parse("softmax over the last axis")
            .unwrap()
            .family
        {
            optiml_spec::Family::Tensor(p) => p,
            other => panic!("{other:?}"),
        };
        let extents = [4096, 393216];
        let sample = dispatch_sample(&p, &extents, 4096, 7).expect("a sampled dimension");
        assert_eq!(sample.dim, 0);
        assert!(sample.values.contains(&0) && sample.values.contains(&4095));
        let (_, y) = p.outputs().next().unwrap();
        assert!(restricts(&y.axes, Some(&sample)));
        let at = positions(&y.axes, &extents, Some(&sample));
        // Whole rows: the sampled rows' elements, in order, out of 1.6 billion.
        assert_eq!(at.len(), sample.values.len() * extents[1]);
        assert!(at.len() <= 64 * extents[1]);
        for (k, &row) in sample.values.iter().enumerate() {
            let run = &at[k * extents[1]..][..extents[1]];
            assert_eq!(run[0], row * extents[1]);
            assert!(run.windows(2).all(|w| w[1] == w[0] + 1));
        }
        assert!(at.iter().all(|&i| i < extents[0] * extents[1]));
        assert_eq!(
            coords(&y.axes, &extents, at[at.len() - 1]),
            "[4095, 393215]"
        );
        // Small sizes are compared whole.
        assert!(dispatch_sample(&p, &[64, 1024], 4096, 7).is_none());
    }

    #[test]
    fn attention_is_sampled_on_its_queries_so_its_reference_stays_small() {
        let p = match optiml_spec::parse("scaled dot-product attention")
            .unwrap()
            .family
        {
            optiml_spec::Family::Tensor(p) => p,
            other => panic!("{other:?}"),
        };
        // b, h, i, j, d, dv: KernelBench 97. Sampling b would leave 3 × 32 whole heads (5·10¹⁰ operations).
        let extents = [32, 32, 512, 512, 1024, 1024];
        let sample = dispatch_sample(&p, &extents, 4096, 7).expect("a sampled dimension");
        assert_eq!(sample.dim, 2);
        let rows = sample.values.len();
        assert!((3..=64).contains(&rows), "{rows}");
        assert!(reference_work(&p, &extents, 2, rows) < 2e10);
        assert!(reference_work(&p, &extents, 0, 3) > 4e10);
    }
}
