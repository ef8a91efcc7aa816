//! The float64 interpreter: the reference every kernel of a [`Program`] is checked against (by the verification
//! gate, the tests and the examples alike).
//!
//! [`eval`] computes the statements in order on the CPU in f64, stores each one densely (row-major in its axes,
//! intermediates included) and returns every output as a [`Reference`]: its values and, for each value, the
//! error scale an f32 kernel's result is judged against.
//!
//! # Meanings
//! - [`Unary`]: `Neg` and `Abs` are exact; `Exp`, `Log`, `Log1p`, `Expm1`, `Tanh` and `Sqrt` are Rust's f64
//!   functions, `Erf` is [`libm::erf`], `Rsqrt(v)` is `1 / sqrt(v)`, and `Sigmoid` is
//!   [`crate::reference::sigmoid`]. In f64, `1 / (1 + e^-v)` is already stable: it never produces NaN, since
//!   `e^-v = ∞` gives the correctly underflowed 0, and `1 + e^-v` rounds only relative to itself.
//! - [`Binary`]: IEEE arithmetic. `Max` and `Min` give NaN if either operand is NaN. Comparisons give 1.0 or
//!   0.0, and every comparison with NaN is false except `!=`. `Pow(a, b)` uses repeated multiplication when `b`
//!   is an integer with `|b| ≤ 64`: that is what a kernel emits for `x^2`, and it is defined for a negative base.
//!   Otherwise it is `powf`.
//! - `Select(c, a, b)` is `a` where `c != 0`, else `b`. NaN counts as true, as in C's `c ? a : b`.
//! - [`Reduce`] runs over every combination of the listed dimensions, row-major in the order listed (the last one
//!   varies fastest). `Sum`, `Mean` (sum / count) and `Prod` accumulate in that order. `Max` and `Min` propagate
//!   NaN. `Argmax` and `Argmin` give the linear position, in that order, of the first extreme value; ties go to
//!   the smallest position, and the first NaN counts as the extreme (as in PyTorch). A `Sum` of nothing is 0 and
//!   a `Prod` of nothing is 1. Every other reduction of nothing is an error ([`InterpError::EmptyReduction`]).
//! - A [`Scan`] evaluates its body at every element of its statement, then folds it along the scanned axis in
//!   the scan's order with the reduction's rules; an exclusive element is the fold of the positions before it
//!   (0, 1, −∞ or +∞ for none). Each element's scale is that of the fold up to it (a prefix sum's
//!   `Σ (Eᵢ + |tᵢ|)` over the prefix).
//! - [`Expr::Input`] and [`Expr::Value`] load a tensor at the current values of its axes. A reduction may rebind
//!   an axis of its statement (the module example's `y[r, c] = e[r, c] / sum(c) e[r, c]`); inside the
//!   reduction, the variable runs over the reduction.
//!
//! Sums are plain f64. They err by at most about n·2⁻⁵³·Σ|terms|, eight orders of magnitude below the
//! tolerance of an f32 kernel judged against the same Σ|terms|, so compensated summation would buy nothing.
//!
//! # Error scales
//! Every value carries a scale `E`: a first-order bound on how far an f32 evaluation of the same expression can
//! land, in units of one rounding. The gate accepts an element when `|out − value| ≤ tol · E`, plus the output's
//! storage rounding, which the gate adds itself. Each rounding the kernel does contributes the magnitude of the
//! value it rounds, amplified by the derivatives of everything computed from that value. With `r` the result:
//!
//! | value | `E` |
//! |---|---|
//! | float input; integer input, constant or parameter that f32 holds exactly; integer statement (positions) | `0` |
//! | any other integer input, constant or parameter (the kernel rounds it to f32) | `\|v\|` |
//! | `-a`, `\|a\|` (exact) | `Ea` |
//! | `max`, `min`, `select`; reductions `max`, `min`, `argmax`, `argmin` (exact) | the chosen operand's `E` (the larger of two near-tied ones) |
//! | comparisons | `0` |
//! | `a ± b` | `Ea + Eb + \|r\|` |
//! | `a · b` | `Ea·\|b\| + \|a\|·Eb + \|r\|` |
//! | `a / b` | `(Ea + \|r\|·Eb) / \|b\| + \|r\|` |
//! | a smooth `f(a)` | `\|f'(a)\|·(Ea + \|a\|) + \|r\|` |
//! | `a ^ b` | `\|b·a^(b−1)\|·Ea + \|r·ln\|a\|\|·Eb + \|r\|`, plus `\|r·b·ln\|a\|\|` when `b` is not an integer |
//! | `sum` of terms `tᵢ` | `Σ (Eᵢ + \|tᵢ\|)` |
//! | `mean` | `Σ (Eᵢ + \|tᵢ\|) / n + \|r\|` |
//! | `prod` | the product rule, term by term |
//!
//! Why the inputs count as exact, and not as `E = |v|`: the kernel reads exactly these values. A difference of
//! two inputs, such as softmax's `x − max(x)`, is therefore off by at most one rounding of `|x − max|`. With
//! `E = |x|`, inputs near 1e4 would carry a scale of 2e4 through the shift into `exp`, and the check would
//! allow a 20 % error on every probability. A kernel that does the subtraction too is right to about one ulp of
//! the difference. A kernel that skips the shift, or does it in bf16, should fail. A sum still gets the gate's
//! usual scale: for a sum of inputs, `Σ (0 + |xᵢ|) = Σ|xᵢ|`, the sum of magnitudes the matmul gate judges
//! against. That term is the accumulation's rounding: every partial sum is bounded by Σ|tᵢ|.
//!
//! Why a smooth function's scale has `Ea + |a|`: a transcendental's own error looks like the exact function of
//! an argument rounded once (range reduction, or `__expf`'s `x·log2 e`). It therefore grows with `|f'(a)·a|`:
//! CUDA documents `2 + 1.17·|x|` ulps for `__expf`, and this term grows the allowance with `|x|` likewise. `powf` is `exp2(b·log2 a)`,
//! hence its extra term. After softmax's shift the argument is small, so this term stays small too.
//!
//! At non-smooth points, `|a|` has `|f'| = 1` on both sides. `max` and `min` are 1-Lipschitz, so when two
//! operands are within [`NEAR_TIE`]`·(Ea + Eb)` of each other (a kernel whose operands moved within tolerance
//! could pick either), the larger scale bounds both choices. `argmax` and `argmin` report the chosen value's
//! scale, so a gate can accept a different position whose value is within tolerance of the extreme. The model is
//! first order. It does not cover a comparison or select whose outcome flips near its boundary; the gate's
//! inputs should avoid ties there. An inexact argument at a singular point (`sqrt`, `rsqrt` or `log` at 0,
//! division by 0) gets an infinite scale: nothing bounds a kernel's result there. A scale is never NaN.
//!
//! # How it runs
//! Each statement is compiled once into postfix op lists. Loads carry their tensor's data and precomputed
//! strides, parameters fold into constants, and each reduction owns a nested list. A list runs over blocks of
//! up to 64 consecutive positions of its lane dimension (the statement's last axis, or a reduction's last
//! dimension). The blocks live on a stack allocated once per thread, so dispatch and offset arithmetic are paid
//! once per block, not once per element. A reduction that reads the lane dimension runs lane by lane; one that
//! does not runs once per block. One that depends only on leading statement axes (`sum(j) w[i, j]` inside
//! `y[i, k]`) runs only when those axes change. Each statement's elements, flattened row-major, are split into
//! contiguous runs across `threads` threads. Every element is computed the same way whatever the split, so the
//! results do not depend on the thread count, bit for bit.

use super::{Binary, Elem, Expr, Program, Reduce, Scan, Stmt, Unary};
use std::fmt;

/// An input's host values, dense and row-major in the input's axes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HostTensor<'a> {
    /// A floating input ([`Elem::Float`]): the values as the kernel sees them (bf16/f16 storage widened exactly).
    Float(&'a [f32]),
    /// An integer input ([`Elem::I64`] or [`Elem::I32`]), or a mask ([`Elem::Bool`]: 0 or 1).
    Int(&'a [i64]),
}

impl HostTensor<'_> {
    fn len(&self) -> usize {
        match self {
            HostTensor::Float(v) => v.len(),
            HostTensor::Int(v) => v.len(),
        }
    }
}

/// Restricts dimension `dim` to the listed values, so that a huge problem is checked on sampled rows without
/// evaluating everything. The dimension must be [`sampleable`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// The dimension: an index into [`Program::dims`].
    pub dim: usize,
    /// The values it takes, in this order. Each is below the dimension's extent, and repeats are allowed.
    pub values: Vec<usize>,
}

/// One tensor's reference.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reference {
    /// The values, dense and row-major in the statement's axes. Argmax/argmin positions are stored as exact
    /// integers.
    pub values: Vec<f64>,
    /// For each value, the error scale its tolerance is judged against: a kernel's element passes when it is
    /// within `tol · scale` of the value, plus the output's storage rounding (see the module doc). Never NaN.
    pub scales: Vec<f64>,
}

/// Why a program could not be evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InterpError {
    /// `extents` does not hold one value per dimension.
    Extents {
        /// The number of dimensions of the program.
        expected: usize,
        /// The number of extents given.
        got: usize,
    },
    /// The wrong number of inputs.
    Inputs {
        /// The number of inputs of the program.
        expected: usize,
        /// The number of inputs given.
        got: usize,
    },
    /// The wrong number of parameters.
    Params {
        /// The number of parameters of the program.
        expected: usize,
        /// The number of parameters given.
        got: usize,
    },
    /// A float buffer for an integer input, or the reverse.
    InputKind {
        /// The input's name.
        input: String,
        /// Its declared element type.
        expected: Elem,
    },
    /// An input's buffer does not hold exactly the product of its axes' extents.
    InputLength {
        /// The input's name.
        input: String,
        /// The product of its axes' extents.
        expected: usize,
        /// The buffer's length.
        got: usize,
    },
    /// A tensor's element count overflows `usize`.
    TooLarge {
        /// The tensor's name.
        tensor: String,
    },
    /// The sample restricts a dimension that a reduction binds, or one that does not exist.
    NotSampleable {
        /// The dimension's name (`#i` when the index is out of range).
        dim: String,
    },
    /// A sampled value is not below its dimension's extent.
    SampleValue {
        /// The dimension's name.
        dim: String,
        /// The value.
        value: usize,
        /// The dimension's extent.
        extent: usize,
    },
    /// A mean, max, min, argmax or argmin over no element, in a statement that has elements.
    EmptyReduction {
        /// The statement's name.
        stmt: String,
        /// The reduction.
        reduce: Reduce,
    },
    /// The program breaks a rule of the IR that evaluation relies on: an index out of range, a load of a later
    /// statement, or an axis bound by neither the statement nor an enclosing reduction.
    Malformed {
        /// The statement's name.
        stmt: String,
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for InterpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InterpError::Extents { expected, got } => {
                write!(
                    f,
                    "the program has {expected} dimensions, {got} extents were given"
                )
            }
            InterpError::Inputs { expected, got } => {
                write!(f, "the program reads {expected} inputs, {got} were given")
            }
            InterpError::Params { expected, got } => {
                write!(
                    f,
                    "the program has {expected} parameters, {got} values were given"
                )
            }
            InterpError::InputKind { input, expected } => {
                let want = if *expected == Elem::Float {
                    "floats"
                } else {
                    "integers"
                };
                write!(
                    f,
                    "input `{input}` holds {want}, a buffer of the other kind was given"
                )
            }
            InterpError::InputLength {
                input,
                expected,
                got,
            } => write!(
                f,
                "input `{input}` has {expected} elements by its axes' extents, its buffer holds {got}"
            ),
            InterpError::TooLarge { tensor } => {
                write!(f, "`{tensor}` has more elements than fit in usize")
            }
            InterpError::NotSampleable { dim } => write!(
                f,
                "dimension `{dim}` cannot be sampled: it must exist and no reduction may bind it"
            ),
            InterpError::SampleValue { dim, value, extent } => write!(
                f,
                "sampled value {value} of dimension `{dim}` is out of range (extent {extent})"
            ),
            InterpError::EmptyReduction { stmt, reduce } => write!(
                f,
                "`{stmt}`: {} over no element is undefined",
                reduce.name()
            ),
            InterpError::Malformed { stmt, reason } => write!(f, "`{stmt}`: {reason}"),
        }
    }
}

impl std::error::Error for InterpError {}

/// How close two compared values must be, relative to the sum of their scales, to count as tied for the scale
/// of `max`/`min` and their reductions. 2⁻⁶ ≈ 1.6e-2 is above every tolerance a gate uses (bf16's 8e-3), so a
/// pair a kernel could order the other way within tolerance is always caught. A looser threshold would only
/// inflate some scales.
pub const NEAR_TIE: f64 = 1.0 / 64.0;

/// Below this many op evaluations, a statement runs on the calling thread: spawning costs more.
const PARALLEL_WORK: usize = 1 << 15;

/// Integer exponents up to this magnitude are computed by multiplication.
const POW_INT_MAX: f64 = 64.0;

/// The dimensions a [`Sample`] may restrict: those that no reduction binds anywhere in the program, in order.
pub fn sampleable(program: &Program) -> Vec<usize> {
    let reduced = program.reduced_dims();
    (0..program.dims.len())
        .filter(|d| !reduced.contains(d))
        .collect()
}

/// Evaluates every output of `program`: one [`Reference`] per statement whose [`Stmt::output`] is
/// set, in statement order, dense and row-major in the statement's axes. With a `sample`, the sampled dimension
/// runs over the sampled values only, in the given order, in every statement that has it as an axis
/// (intermediates included).
///
/// `extents` holds every dimension's extent ([`Program::extents`]), `inputs` one buffer per
/// [`Program::inputs`], and `params` one value per [`Program::params`]. Give a parameter as the f32 the kernel
/// receives, widened; otherwise its rounding counts in the scales. `threads` is the number of threads to use;
/// 0 counts as 1. The result does not depend on it.
///
/// # Errors
/// The counts, kinds or lengths of the arguments do not match the program, the sample is invalid, a
/// reduction that must have an element has none, or the program breaks a rule evaluation relies on.
pub fn eval(
    program: &Program,
    extents: &[usize],
    inputs: &[HostTensor],
    params: &[f64],
    sample: Option<&Sample>,
    threads: usize,
) -> Result<Vec<Reference>, InterpError> {
    check_args(program, extents, inputs, params, sample)?;
    let iter_extents: Vec<usize> = match sample {
        None => extents.to_vec(),
        Some(s) => {
            let mut e = extents.to_vec();
            e[s.dim] = s.values.len();
            e
        }
    };
    let sampled = sample.map(|s| (s.dim, s.values.as_slice()));
    let mut stored: Vec<Reference> = Vec::with_capacity(program.stmts.len());
    for index in 0..program.stmts.len() {
        let reference = if let Expr::Scan(scan, body) = &program.stmts[index].expr {
            // The body, evaluated at every element as a statement of its own, then folded along the axis.
            let mut unscanned = program.clone();
            unscanned.stmts[index].expr = (**body).clone();
            let code = Compiler {
                program: &unscanned,
                index,
                extents,
                iter_extents: &iter_extents,
                sampled: sample.map(|s| s.dim),
                inputs,
                params,
                stored: &stored,
                bound: Vec::new(),
                lane: None,
                depth: 0,
                max_depth: 0,
                caches: 0,
            }
            .compile()?;
            let terms = run_stmt(&code, program.dims.len(), sampled, threads);
            scan_along(&program.stmts[index], *scan, terms, &iter_extents)?
        } else {
            let code = Compiler {
                program,
                index,
                extents,
                iter_extents: &iter_extents,
                sampled: sample.map(|s| s.dim),
                inputs,
                params,
                stored: &stored,
                bound: Vec::new(),
                lane: None,
                depth: 0,
                max_depth: 0,
                caches: 0,
            }
            .compile()?;
            run_stmt(&code, program.dims.len(), sampled, threads)
        };
        stored.push(reference);
    }
    Ok(program
        .stmts
        .iter()
        .zip(stored)
        .filter(|(s, _)| s.output)
        .map(|(_, r)| r)
        .collect())
}

fn check_args(
    program: &Program,
    extents: &[usize],
    inputs: &[HostTensor],
    params: &[f64],
    sample: Option<&Sample>,
) -> Result<(), InterpError> {
    if extents.len() != program.dims.len() {
        return Err(InterpError::Extents {
            expected: program.dims.len(),
            got: extents.len(),
        });
    }
    if inputs.len() != program.inputs.len() {
        return Err(InterpError::Inputs {
            expected: program.inputs.len(),
            got: inputs.len(),
        });
    }
    if params.len() != program.params.len() {
        return Err(InterpError::Params {
            expected: program.params.len(),
            got: params.len(),
        });
    }
    for (decl, host) in program.inputs.iter().zip(inputs) {
        if decl.axes.iter().any(|&a| a >= extents.len()) {
            return Err(InterpError::Malformed {
                stmt: decl.name.clone(),
                reason: "an axis of this input is not a dimension".into(),
            });
        }
        let kind_ok = matches!(
            (decl.elem, host),
            (Elem::Float, HostTensor::Float(_))
                | (Elem::I64 | Elem::I32 | Elem::Bool, HostTensor::Int(_))
        );
        if !kind_ok {
            return Err(InterpError::InputKind {
                input: decl.name.clone(),
                expected: decl.elem,
            });
        }
        let expected = count(&decl.axes, extents).ok_or_else(|| InterpError::TooLarge {
            tensor: decl.name.clone(),
        })?;
        if host.len() != expected {
            return Err(InterpError::InputLength {
                input: decl.name.clone(),
                expected,
                got: host.len(),
            });
        }
    }
    if let Some(s) = sample {
        let Some(decl) = program.dims.get(s.dim) else {
            return Err(InterpError::NotSampleable {
                dim: format!("#{}", s.dim),
            });
        };
        if !sampleable(program).contains(&s.dim) {
            return Err(InterpError::NotSampleable {
                dim: decl.name.clone(),
            });
        }
        if let Some(&value) = s.values.iter().find(|&&v| v >= extents[s.dim]) {
            return Err(InterpError::SampleValue {
                dim: decl.name.clone(),
                value,
                extent: extents[s.dim],
            });
        }
    }
    Ok(())
}

/// Folds `terms` (a statement's body at every element, dense in its axes) along the scan's axis.
fn scan_along(
    stmt: &Stmt,
    scan: Scan,
    terms: Reference,
    extents: &[usize],
) -> Result<Reference, InterpError> {
    let malformed = |reason: &str| InterpError::Malformed {
        stmt: stmt.name.clone(),
        reason: reason.into(),
    };
    let Some(k) = stmt.axes.iter().position(|&a| a == scan.dim) else {
        return Err(malformed(
            "scans along a dimension that is not an axis of the statement",
        ));
    };
    if !Scan::OPS.contains(&scan.op) {
        return Err(malformed(
            "scans with an operation other than sum, prod, max or min",
        ));
    }
    let n = extents[scan.dim];
    let inner: usize = stmt.axes[k + 1..].iter().map(|&a| extents[a]).product();
    let Reference { values, scales } = terms;
    let mut out = Reference {
        values: vec![0.0; values.len()],
        scales: vec![0.0; values.len()],
    };
    if n == 0 || inner == 0 {
        return Ok(out);
    }
    for line in 0..values.len() / n {
        let (o, i) = (line / inner, line % inner);
        let mut acc = Acc {
            op: scan.op,
            value: 0.0,
            scale: 0.0,
            at: 0,
        };
        for step in 0..n {
            let j = if scan.reverse { n - 1 - step } else { step };
            let at = (o * n + j) * inner + i;
            let (v, e) = if scan.exclusive && step == 0 {
                (scan.identity(), 0.0)
            } else if scan.exclusive {
                acc.finish(step)
            } else {
                acc.add(values[at], scales[at], step);
                acc.finish(step + 1)
            };
            if scan.exclusive {
                acc.add(values[at], scales[at], step);
            }
            out.values[at] = v;
            out.scales[at] = if e.is_nan() { f64::INFINITY } else { e };
        }
    }
    Ok(out)
}

/// The element count of a tensor with `axes`, or None on overflow.
fn count(axes: &[usize], extents: &[usize]) -> Option<usize> {
    axes.iter()
        .try_fold(1usize, |n, &a| n.checked_mul(extents[a]))
}

/// The magnitude f32 storage of `v` rounds away: 0 when f32 holds it exactly.
fn rounding(v: f64) -> f64 {
    if (v as f32) as f64 == v { 0.0 } else { v.abs() }
}

/// `d · e` where a zero factor wins over an infinite one. An exact quantity (`e = 0`) contributes nothing
/// however steep the function, and a quantity nothing depends on (`d = 0`) contributes nothing however
/// uncertain it is.
#[inline]
fn amp(d: f64, e: f64) -> f64 {
    if d == 0.0 || e == 0.0 { 0.0 } else { d * e }
}

// ---------------------------------------------------------------------------------------------------------------
// Compiled form

/// Elements per block. Every op list runs over up to this many consecutive values of its lane dimension at once
/// (a statement's last axis, or a reduction's last dimension), so dispatch, offsets and stack traffic are paid
/// once per block rather than once per element.
const LANES: usize = 64;

/// One dimension of a load, other than the lane: the offset grows by `stride` per step of `dim`.
#[derive(Clone, Copy, Debug)]
struct Term {
    dim: usize,
    stride: usize,
}

/// Where a load reads. `terms` covers the dimensions fixed during a block. `step` is the stride per lane, 0
/// when the tensor lacks the lane dimension (it broadcasts). `gather` is set when the lanes run over sampled
/// values of an input.
struct Access {
    terms: Box<[Term]>,
    step: usize,
    gather: bool,
}

/// One postfix op over a block. It writes stack slot `at`, and its operands sit at `at`, `at + 1`, and so on.
/// Loads carry their tensor's data, so the hot loop looks nothing up.
enum Op<'a> {
    Push {
        at: usize,
        value: f64,
        scale: f64,
    },
    Float {
        at: usize,
        data: &'a [f32],
        access: Access,
    },
    Int {
        at: usize,
        data: &'a [i64],
        access: Access,
    },
    /// An earlier statement. `exact`: an integer statement's values are positions, which kernels compute exactly.
    Stored {
        at: usize,
        values: &'a [f64],
        scales: &'a [f64],
        access: Access,
        exact: bool,
    },
    Unary {
        at: usize,
        op: Unary,
    },
    Binary {
        at: usize,
        op: Binary,
    },
    Select {
        at: usize,
    },
    Reduce {
        at: usize,
        code: Box<ReduceCode<'a>>,
    },
    /// A gather: slot `at` holds the index on entry and the value read on exit. `access` covers every axis but
    /// the gathered one, whose stride and extent follow.
    Gather {
        at: usize,
        data: &'a [f32],
        access: Access,
        stride: usize,
        extent: usize,
    },
}

struct ReduceCode<'a> {
    op: Reduce,
    dims: Box<[usize]>,
    extents: Box<[usize]>,
    count: usize,
    /// Runs in blocks along the last reduced dimension and leaves each block in slot `out`. That slot is above
    /// the reduction's own, where lane-by-lane results collect while the body runs.
    body: Box<[Op<'a>]>,
    out: usize,
    /// Whether the value depends on the enclosing list's lane dimension: then it is computed lane by lane,
    /// otherwise once per block.
    per_lane: bool,
    /// Set when the value depends only on statement axes before the lane axis: the cache slot, and how many
    /// leading axes the value depends on.
    cache: Option<(usize, usize)>,
}

struct StmtCode<'a> {
    ops: Box<[Op<'a>]>,
    axes: Box<[usize]>,
    extents: Box<[usize]>,
    len: usize,
    stack: usize,
    caches: usize,
    /// Op evaluations per element, roughly: whether threads pay off.
    work: usize,
}

struct Compiler<'p, 'a> {
    program: &'p Program,
    index: usize,
    extents: &'p [usize],
    iter_extents: &'p [usize],
    sampled: Option<usize>,
    inputs: &'p [HostTensor<'a>],
    params: &'p [f64],
    stored: &'a [Reference],
    /// The dimensions enclosing reductions bind, innermost last.
    bound: Vec<usize>,
    /// The lane dimension of the op list being compiled.
    lane: Option<usize>,
    depth: usize,
    max_depth: usize,
    caches: usize,
}

impl<'p, 'a> Compiler<'p, 'a> {
    fn stmt(&self) -> &'p Stmt {
        &self.program.stmts[self.index]
    }

    fn malformed(&self, reason: String) -> InterpError {
        InterpError::Malformed {
            stmt: self.stmt().name.clone(),
            reason,
        }
    }

    fn compile(mut self) -> Result<StmtCode<'a>, InterpError> {
        let stmt = self.stmt();
        let ndims = self.program.dims.len();
        for (k, &a) in stmt.axes.iter().enumerate() {
            if a >= ndims {
                return Err(self.malformed(format!("axis #{a} is not a dimension")));
            }
            if stmt.axes[..k].contains(&a) {
                let name = &self.program.dims[a].name;
                return Err(self.malformed(format!("axis `{name}` appears twice")));
            }
        }
        let len = count(&stmt.axes, self.iter_extents).ok_or_else(|| InterpError::TooLarge {
            tensor: stmt.name.clone(),
        })?;
        self.lane = stmt.axes.last().copied();
        let mut ops = Vec::new();
        let (_, work) = self.expr(&stmt.expr, &mut ops, len > 0)?;
        Ok(StmtCode {
            ops: ops.into(),
            axes: stmt.axes.clone().into(),
            extents: stmt.axes.iter().map(|&a| self.iter_extents[a]).collect(),
            len,
            stack: self.max_depth,
            caches: self.caches,
            work,
        })
    }

    /// Takes the next stack slot.
    fn push(&mut self) -> usize {
        self.depth += 1;
        self.max_depth = self.max_depth.max(self.depth);
        self.depth - 1
    }

    /// How to load a tensor with `axes` laid out by `extents`, checking that each axis is bound here. `by_value`:
    /// an input, read at the dimensions' values (which differ from their positions in the sampled one).
    fn access(
        &self,
        name: &str,
        axes: &[usize],
        extents: &[usize],
        by_value: bool,
    ) -> Result<Access, InterpError> {
        self.access_but(name, axes, extents, by_value, None)
            .map(|(access, _)| access)
    }

    /// [`Self::access`] without the axis at position `skip` (a gather's, set by data): it need not be bound, and
    /// its stride is returned beside the access (0 without one).
    fn access_but(
        &self,
        name: &str,
        axes: &[usize],
        extents: &[usize],
        by_value: bool,
        skip: Option<usize>,
    ) -> Result<(Access, usize), InterpError> {
        let mut terms = Vec::with_capacity(axes.len());
        let (mut step, mut gather, mut skipped) = (0, false, 0);
        let mut stride = 1usize;
        for (pos, &dim) in axes.iter().enumerate().rev() {
            if dim >= self.program.dims.len() {
                return Err(self.malformed(format!("`{name}` has axis #{dim}, not a dimension")));
            }
            if Some(pos) == skip {
                skipped = stride;
                stride = stride.saturating_mul(extents[dim]);
                continue;
            }
            if !self.stmt().axes.contains(&dim) && !self.bound.contains(&dim) {
                return Err(self.malformed(format!(
                    "reads `{name}`, whose axis `{}` neither the statement nor an enclosing reduction binds",
                    self.program.dims[dim].name
                )));
            }
            if Some(dim) == self.lane {
                step = stride;
                gather = by_value && Some(dim) == self.sampled;
            } else {
                terms.push(Term { dim, stride });
            }
            stride = stride.saturating_mul(extents[dim]);
        }
        Ok((
            Access {
                terms: terms.into(),
                step,
                gather,
            },
            skipped,
        ))
    }

    /// Compiles `e` onto `ops`. Returns the dimensions it reads that it does not bind itself, and the op
    /// evaluations one evaluation of it costs. `live`: whether it is ever evaluated (empty reductions matter only
    /// then).
    fn expr(
        &mut self,
        e: &Expr,
        ops: &mut Vec<Op<'a>>,
        live: bool,
    ) -> Result<(Vec<bool>, usize), InterpError> {
        let ndims = self.program.dims.len();
        let mut free = vec![false; ndims];
        let work = match e {
            Expr::Const(v) => {
                let at = self.push();
                ops.push(Op::Push {
                    at,
                    value: *v,
                    scale: rounding(*v),
                });
                1
            }
            Expr::Param(i) => {
                let Some(&v) = self.params.get(*i) else {
                    return Err(
                        self.malformed(format!("reads parameter #{i}, which does not exist"))
                    );
                };
                let at = self.push();
                ops.push(Op::Push {
                    at,
                    value: v,
                    scale: rounding(v),
                });
                1
            }
            Expr::Input(i) => {
                let Some(decl) = self.program.inputs.get(*i) else {
                    return Err(self.malformed(format!("reads input #{i}, which does not exist")));
                };
                let access = self.access(&decl.name, &decl.axes, self.extents, true)?;
                let at = self.push();
                ops.push(match self.inputs[*i] {
                    HostTensor::Float(data) => Op::Float { at, data, access },
                    HostTensor::Int(data) => Op::Int { at, data, access },
                });
                for &a in &decl.axes {
                    free[a] = true;
                }
                1
            }
            Expr::Value(j) => {
                if *j >= self.index {
                    return Err(self.malformed(format!(
                        "reads statement #{j}, which is not computed before it"
                    )));
                }
                let src = &self.program.stmts[*j];
                let access = self.access(&src.name, &src.axes, self.iter_extents, false)?;
                let r = &self.stored[*j];
                let at = self.push();
                ops.push(Op::Stored {
                    at,
                    values: &r.values,
                    scales: &r.scales,
                    access,
                    exact: src.elem != Elem::Float,
                });
                for &a in &src.axes {
                    free[a] = true;
                }
                1
            }
            Expr::Unary(op, a) => {
                let (fa, wa) = self.expr(a, ops, live)?;
                free = fa;
                ops.push(Op::Unary {
                    at: self.depth - 1,
                    op: *op,
                });
                wa + 1
            }
            Expr::Binary(op, a, b) => {
                let (fa, wa) = self.expr(a, ops, live)?;
                let (fb, wb) = self.expr(b, ops, live)?;
                free = union(fa, &fb);
                self.depth -= 1;
                ops.push(Op::Binary {
                    at: self.depth - 1,
                    op: *op,
                });
                wa.saturating_add(wb).saturating_add(1)
            }
            Expr::Select(c, a, b) => {
                let (fc, wc) = self.expr(c, ops, live)?;
                let (fa, wa) = self.expr(a, ops, live)?;
                let (fb, wb) = self.expr(b, ops, live)?;
                free = union(union(fc, &fa), &fb);
                self.depth -= 2;
                ops.push(Op::Select { at: self.depth - 1 });
                wc.saturating_add(wa).saturating_add(wb).saturating_add(1)
            }
            Expr::Scan(..) => {
                return Err(self.malformed(
                    "holds a scan inside its expression; a scan must be a statement's whole expression"
                        .into(),
                ));
            }
            Expr::Gather(g, index) => {
                let Some(decl) = self.program.inputs.get(g.input) else {
                    return Err(self.malformed(format!(
                        "gathers from input #{}, which does not exist",
                        g.input
                    )));
                };
                let Some(&dim) = decl.axes.get(g.axis) else {
                    return Err(self.malformed(format!(
                        "gathers along axis {} of `{}`, which has {}",
                        g.axis,
                        decl.name,
                        decl.axes.len()
                    )));
                };
                let HostTensor::Float(data) = self.inputs[g.input] else {
                    return Err(
                        self.malformed(format!("gathers from `{}`, an integer input", decl.name))
                    );
                };
                let (fi, wi) = self.expr(index, ops, live)?;
                free = fi;
                let (access, stride) =
                    self.access_but(&decl.name, &decl.axes, self.extents, true, Some(g.axis))?;
                for (p, &a) in decl.axes.iter().enumerate() {
                    if p != g.axis {
                        free[a] = true;
                    }
                }
                ops.push(Op::Gather {
                    at: self.depth - 1,
                    data,
                    access,
                    stride,
                    extent: self.extents[dim],
                });
                wi.saturating_add(1)
            }
            Expr::Reduce(op, over, body) => {
                for (k, &d) in over.iter().enumerate() {
                    if d >= ndims {
                        return Err(
                            self.malformed(format!("{} over #{d}, not a dimension", op.name()))
                        );
                    }
                    if over[..k].contains(&d) {
                        let name = &self.program.dims[d].name;
                        return Err(self.malformed(format!("{} over `{name}` twice", op.name())));
                    }
                }
                let extents: Box<[usize]> = over.iter().map(|&d| self.extents[d]).collect();
                let n = count(over, self.extents).ok_or_else(|| {
                    self.malformed(format!(
                        "{} over more elements than fit in usize",
                        op.name()
                    ))
                })?;
                if n == 0 && live && !matches!(op, Reduce::Sum | Reduce::Prod) {
                    return Err(InterpError::EmptyReduction {
                        stmt: self.stmt().name.clone(),
                        reduce: *op,
                    });
                }
                let at = self.push();
                let enclosing = (self.bound.len(), self.lane);
                self.bound.extend_from_slice(over);
                self.lane = over.last().copied();
                let mut code = Vec::new();
                let (fb, wb) = self.expr(body, &mut code, live && n > 0)?;
                self.bound.truncate(enclosing.0);
                self.lane = enclosing.1;
                self.depth = at + 1;
                for (d, f) in fb.into_iter().enumerate() {
                    free[d] = f && !over.contains(&d);
                }
                let per_lane = enclosing.1.is_some_and(|d| free[d]);
                // Cacheable when it reads neither a dimension an enclosing reduction binds nor the statement's
                // lane axis: then it is constant over a block and changes only when one of the leading
                // statement axes it reads (or an axis before them) steps.
                let stmt_lane = self.stmt().axes.last();
                let cache = if self.bound.iter().chain(stmt_lane).any(|&d| free[d]) {
                    None
                } else {
                    let axes = &self.stmt().axes;
                    let depth = (0..axes.len())
                        .rev()
                        .find(|&k| free[axes[k]])
                        .map_or(0, |k| k + 1);
                    self.caches += 1;
                    Some((self.caches - 1, depth))
                };
                ops.push(Op::Reduce {
                    at,
                    code: Box::new(ReduceCode {
                        op: *op,
                        dims: over.clone().into(),
                        extents,
                        count: n,
                        body: code.into(),
                        out: at + 1,
                        per_lane,
                        cache,
                    }),
                });
                n.saturating_mul(wb.saturating_add(1)).saturating_add(1)
            }
        };
        Ok((free, work))
    }
}

fn union(mut a: Vec<bool>, b: &[bool]) -> Vec<bool> {
    for (x, &y) in a.iter_mut().zip(b) {
        *x |= y;
    }
    a
}

// ---------------------------------------------------------------------------------------------------------------
// Evaluation

fn run_stmt(
    code: &StmtCode,
    ndims: usize,
    sampled: Option<(usize, &[usize])>,
    threads: usize,
) -> Reference {
    let len = code.len;
    let mut values = vec![0.0; len];
    let mut scales = vec![0.0; len];
    let parts = if code.work.saturating_mul(len) < PARALLEL_WORK {
        1
    } else {
        threads.max(1).min(len)
    };
    if parts <= 1 {
        run_chunk(code, ndims, sampled, 0, &mut values, &mut scales);
    } else {
        let chunk = len.div_ceil(parts);
        std::thread::scope(|s| {
            let mut chunks = values
                .chunks_mut(chunk)
                .zip(scales.chunks_mut(chunk))
                .enumerate();
            let first = chunks.next();
            for (i, (v, e)) in chunks {
                s.spawn(move || run_chunk(code, ndims, sampled, i * chunk, v, e));
            }
            if let Some((_, (v, e))) = first {
                run_chunk(code, ndims, sampled, 0, v, e);
            }
        });
    }
    Reference { values, scales }
}

/// A cached reduction value and the block (1-based stamp) it was last valid in; 0 is never.
#[derive(Clone, Copy)]
struct Slot {
    at: usize,
    value: f64,
    scale: f64,
}

struct Machine<'c> {
    /// The stack: slot `s` holds a block's values at `s * LANES ..`.
    v: Vec<f64>,
    e: Vec<f64>,
    /// Each dimension's current position: statements are stored by position.
    pos: Vec<usize>,
    /// Each dimension's current value: inputs are read by value (they differ in the sampled dimension only).
    val: Vec<usize>,
    sampled_dim: usize,
    sampled_values: &'c [usize],
    slots: Vec<Slot>,
    /// The statement block being computed, from 1.
    block: usize,
    /// The outermost statement axis that stepped since the previous block (0 on the first of a run).
    changed: usize,
    /// Positions of dimensions that running reductions rebind, to restore.
    saved: Vec<(usize, usize, usize)>,
}

fn run_chunk(
    code: &StmtCode,
    ndims: usize,
    sampled: Option<(usize, &[usize])>,
    start: usize,
    out_v: &mut [f64],
    out_e: &mut [f64],
) {
    if out_v.is_empty() {
        return;
    }
    let (sampled_dim, sampled_values) = sampled.unwrap_or((usize::MAX, &[]));
    let stack = code.stack.max(1) * LANES;
    let mut m = Machine {
        v: vec![0.0; stack],
        e: vec![0.0; stack],
        pos: vec![0; ndims],
        val: vec![0; ndims],
        sampled_dim,
        sampled_values,
        slots: vec![
            Slot {
                at: 0,
                value: 0.0,
                scale: 0.0
            };
            code.caches
        ],
        block: 0,
        changed: 0,
        saved: Vec::new(),
    };
    let mut rest = start;
    for (k, &d) in code.axes.iter().enumerate().rev() {
        m.set(d, rest % code.extents[k]);
        rest /= code.extents[k];
    }
    let lane = code.axes.len().checked_sub(1);
    let mut done = 0;
    while done < out_v.len() {
        m.block += 1;
        let n = match lane {
            None => {
                m.run(&code.ops, None, 0, 1);
                1
            }
            Some(k) => {
                let d = code.axes[k];
                let first = m.pos[d];
                let n = LANES.min(code.extents[k] - first).min(out_v.len() - done);
                m.run(&code.ops, Some(d), first, n);
                n
            }
        };
        out_v[done..done + n].copy_from_slice(&m.v[..n]);
        for (o, &e) in out_e[done..done + n].iter_mut().zip(&m.e[..n]) {
            *o = if e.is_nan() { f64::INFINITY } else { e };
        }
        done += n;
        if let Some(k) = lane {
            let d = code.axes[k];
            if m.pos[d] + n < code.extents[k] {
                m.set(d, m.pos[d] + n);
                m.changed = k;
            } else {
                m.set(d, 0);
                m.changed = m.step(&code.axes[..k], &code.extents[..k]).unwrap_or(0);
            }
        }
    }
}

#[inline]
fn offset(terms: &[Term], idx: &[usize]) -> usize {
    terms.iter().map(|t| idx[t.dim] * t.stride).sum()
}

impl Machine<'_> {
    #[inline]
    fn set(&mut self, d: usize, p: usize) {
        self.pos[d] = p;
        self.val[d] = if d == self.sampled_dim {
            self.sampled_values[p]
        } else {
            p
        };
    }

    /// Steps an odometer over `dims` (the last fastest). Returns the position that stepped, or None after the
    /// last combination (all back at 0).
    fn step(&mut self, dims: &[usize], extents: &[usize]) -> Option<usize> {
        for k in (0..dims.len()).rev() {
            let d = dims[k];
            if self.pos[d] + 1 < extents[k] {
                self.set(d, self.pos[d] + 1);
                return Some(k);
            }
            self.set(d, 0);
        }
        None
    }

    /// Runs `ops` for the `n` lanes where the lane dimension takes positions `first ..`, every other dimension
    /// in scope at its current position (the lane dimension's is `first`).
    fn run(&mut self, ops: &[Op], lane: Option<usize>, first: usize, n: usize) {
        for op in ops {
            match op {
                Op::Push { at, value, scale } => {
                    let r = at * LANES..at * LANES + n;
                    self.v[r.clone()].fill(*value);
                    self.e[r].fill(*scale);
                }
                Op::Float { at, data, access } => {
                    let base = offset(&access.terms, &self.val);
                    let out = &mut self.v[at * LANES..at * LANES + n];
                    if access.gather {
                        let values = &self.sampled_values[first..first + n];
                        for (o, &p) in out.iter_mut().zip(values) {
                            *o = data[base + p * access.step] as f64;
                        }
                    } else if access.step == 1 {
                        for (o, &x) in out.iter_mut().zip(&data[base + first..base + first + n]) {
                            *o = x as f64;
                        }
                    } else {
                        for (l, o) in out.iter_mut().enumerate() {
                            *o = data[base + (first + l) * access.step] as f64;
                        }
                    }
                    self.e[at * LANES..at * LANES + n].fill(0.0);
                }
                Op::Gather {
                    at,
                    data,
                    access,
                    stride,
                    extent,
                } => {
                    let base = offset(&access.terms, &self.val);
                    for l in 0..n {
                        let p = if access.gather {
                            self.sampled_values[first + l]
                        } else {
                            first + l
                        };
                        let i = self.v[at * LANES + l];
                        // Out of range (or not a whole number): NaN, as every kernel reads it.
                        self.v[at * LANES + l] =
                            if i >= 0.0 && i < *extent as f64 && i.fract() == 0.0 {
                                data[base + p * access.step + i as usize * stride] as f64
                            } else {
                                f64::NAN
                            };
                        self.e[at * LANES + l] = 0.0;
                    }
                }
                Op::Int { at, data, access } => {
                    let base = offset(&access.terms, &self.val);
                    for l in 0..n {
                        let p = if access.gather {
                            self.sampled_values[first + l]
                        } else {
                            first + l
                        };
                        let v = data[base + p * access.step] as f64;
                        self.v[at * LANES + l] = v;
                        self.e[at * LANES + l] = rounding(v);
                    }
                }
                Op::Stored {
                    at,
                    values,
                    scales,
                    access,
                    exact,
                } => {
                    let base = offset(&access.terms, &self.pos);
                    let r = at * LANES..at * LANES + n;
                    for (l, (v, e)) in self.v[r.clone()].iter_mut().zip(&mut self.e[r]).enumerate()
                    {
                        let i = base + (first + l) * access.step;
                        *v = values[i];
                        *e = if *exact { 0.0 } else { scales[i] };
                    }
                }
                Op::Unary { at, op } => {
                    let r = at * LANES..at * LANES + n;
                    for (v, e) in self.v[r.clone()].iter_mut().zip(&mut self.e[r]) {
                        (*v, *e) = unary(*op, *v, *e);
                    }
                }
                Op::Binary { at, op } => {
                    let r = at * LANES..(at + 2) * LANES;
                    let (va, vb) = self.v[r.clone()].split_at_mut(LANES);
                    let (ea, eb) = self.e[r].split_at_mut(LANES);
                    let lanes = va[..n]
                        .iter_mut()
                        .zip(&mut ea[..n])
                        .zip(vb.iter().zip(eb.iter()));
                    for ((a, ea), (&b, &eb)) in lanes {
                        (*a, *ea) = binary(*op, *a, *ea, b, eb);
                    }
                }
                Op::Select { at } => {
                    let s = at * LANES;
                    for l in s..s + n {
                        let pick = if self.v[l] != 0.0 {
                            l + LANES
                        } else {
                            l + 2 * LANES
                        };
                        self.v[l] = self.v[pick];
                        self.e[l] = self.e[pick];
                    }
                }
                Op::Reduce { at, code } => match lane {
                    Some(d) if code.per_lane => {
                        for l in 0..n {
                            self.set(d, first + l);
                            (self.v[at * LANES + l], self.e[at * LANES + l]) = self.reduce(code);
                        }
                        self.set(d, first);
                    }
                    _ => {
                        let (v, e) = self.reduce(code);
                        self.v[at * LANES..at * LANES + n].fill(v);
                        self.e[at * LANES..at * LANES + n].fill(e);
                    }
                },
            }
        }
    }

    fn reduce(&mut self, code: &ReduceCode) -> (f64, f64) {
        if let Some((slot, depth)) = code.cache {
            let s = self.slots[slot];
            if s.at == self.block || (s.at != 0 && s.at + 1 == self.block && self.changed >= depth)
            {
                self.slots[slot].at = self.block;
                return (s.value, s.scale);
            }
        }
        let saved = self.saved.len();
        for &d in code.dims.iter() {
            self.saved.push((d, self.pos[d], self.val[d]));
            self.set(d, 0);
        }
        let mut acc = Acc {
            op: code.op,
            value: 0.0,
            scale: 0.0,
            at: 0,
        };
        let out = code.out * LANES;
        match code.dims.split_last() {
            _ if code.count == 0 => {}
            None => {
                self.run(&code.body, None, 0, 1);
                acc.add(self.v[out], self.e[out], 0);
            }
            Some((&last, outer)) => {
                let extent = code.extents[outer.len()];
                let mut k = 0;
                loop {
                    let mut first = 0;
                    while first < extent {
                        let n = LANES.min(extent - first);
                        self.set(last, first);
                        self.run(&code.body, Some(last), first, n);
                        for (&v, &e) in self.v[out..out + n].iter().zip(&self.e[out..out + n]) {
                            acc.add(v, e, k);
                            k += 1;
                        }
                        first += n;
                    }
                    if self.step(outer, &code.extents[..outer.len()]).is_none() {
                        break;
                    }
                }
            }
        }
        for &(d, p, v) in self.saved[saved..].iter().rev() {
            self.pos[d] = p;
            self.val[d] = v;
        }
        self.saved.truncate(saved);
        let (value, scale) = acc.finish(code.count);
        if let Some((slot, _)) = code.cache {
            self.slots[slot] = Slot {
                at: self.block,
                value,
                scale,
            };
        }
        (value, scale)
    }
}

/// A running reduction.
#[derive(Clone, Copy)]
struct Acc {
    op: Reduce,
    value: f64,
    scale: f64,
    at: usize,
}

impl Acc {
    #[inline]
    fn add(&mut self, v: f64, e: f64, k: usize) {
        match self.op {
            Reduce::Sum | Reduce::Mean => {
                self.value += v;
                self.scale += e + v.abs();
            }
            Reduce::Prod => {
                if k == 0 {
                    (self.value, self.scale) = (v, e);
                } else {
                    let p = self.value;
                    self.value = p * v;
                    self.scale = amp(self.scale, v.abs()) + amp(p.abs(), e) + self.value.abs();
                }
            }
            Reduce::Max | Reduce::Argmax => self.extreme(v, e, k, true),
            Reduce::Min | Reduce::Argmin => self.extreme(v, e, k, false),
        }
    }

    #[inline]
    fn extreme(&mut self, v: f64, e: f64, k: usize, max: bool) {
        if k == 0 || (v.is_nan() && !self.value.is_nan()) {
            (self.value, self.scale, self.at) = (v, e, k);
        } else if !self.value.is_nan() {
            let gap = if max { v - self.value } else { self.value - v };
            let near = NEAR_TIE * (e + self.scale);
            if gap > 0.0 {
                self.scale = if gap <= near { e.max(self.scale) } else { e };
                (self.value, self.at) = (v, k);
            } else if -gap <= near {
                self.scale = self.scale.max(e);
            }
        }
    }

    fn finish(self, n: usize) -> (f64, f64) {
        match self.op {
            Reduce::Sum | Reduce::Max | Reduce::Min => (self.value, self.scale),
            Reduce::Mean => {
                let r = self.value / n as f64;
                (r, self.scale / n as f64 + r.abs())
            }
            Reduce::Prod if n == 0 => (1.0, 0.0),
            Reduce::Prod => (self.value, self.scale),
            Reduce::Argmax | Reduce::Argmin => (self.at as f64, self.scale),
        }
    }
}

/// `2 / √π`, erf's slope at 0.
const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

#[inline]
fn unary(op: Unary, a: f64, ea: f64) -> (f64, f64) {
    let (r, slope) = match op {
        Unary::Neg => return (-a, ea),
        Unary::Abs => return (a.abs(), ea),
        Unary::Exp => {
            let r = a.exp();
            (r, r)
        }
        Unary::Log => (a.ln(), 1.0 / a),
        Unary::Log1p => (a.ln_1p(), 1.0 / (1.0 + a)),
        Unary::Expm1 => (a.exp_m1(), a.exp()),
        Unary::Tanh => {
            let r = a.tanh();
            (r, 1.0 - r * r)
        }
        Unary::Erf => (libm::erf(a), TWO_OVER_SQRT_PI * (-a * a).exp()),
        Unary::Sqrt => {
            let r = a.sqrt();
            (r, 0.5 / r)
        }
        Unary::Rsqrt => {
            let r = 1.0 / a.sqrt();
            (r, 0.5 * r / a)
        }
        Unary::Sigmoid => {
            let r = crate::reference::sigmoid(a);
            (r, r * (1.0 - r))
        }
    };
    (r, amp(slope.abs(), ea + a.abs()) + r.abs())
}

#[inline]
fn binary(op: Binary, a: f64, ea: f64, b: f64, eb: f64) -> (f64, f64) {
    let cmp = |c: bool| (if c { 1.0 } else { 0.0 }, 0.0);
    match op {
        Binary::Add => {
            let r = a + b;
            (r, ea + eb + r.abs())
        }
        Binary::Sub => {
            let r = a - b;
            (r, ea + eb + r.abs())
        }
        Binary::Mul => {
            let r = a * b;
            (r, amp(ea, b.abs()) + amp(a.abs(), eb) + r.abs())
        }
        Binary::Div => {
            let r = a / b;
            (r, amp(1.0 / b.abs(), ea + amp(r.abs(), eb)) + r.abs())
        }
        Binary::Pow => pow(a, ea, b, eb),
        Binary::Max | Binary::Min => {
            if a.is_nan() || b.is_nan() {
                return (f64::NAN, ea.max(eb));
            }
            let first = if op == Binary::Max { a >= b } else { a <= b };
            let (r, er) = if first { (a, ea) } else { (b, eb) };
            let e = if (a - b).abs() <= NEAR_TIE * (ea + eb) {
                ea.max(eb)
            } else {
                er
            };
            (r, e)
        }
        Binary::Lt => cmp(a < b),
        Binary::Le => cmp(a <= b),
        Binary::Gt => cmp(a > b),
        Binary::Ge => cmp(a >= b),
        Binary::Eq => cmp(a == b),
        Binary::Ne => cmp(a != b),
    }
}

/// `a^n` by squaring: exact for the small exponents kernels multiply out, and defined for a negative base.
fn powi(a: f64, n: i32) -> f64 {
    let mut base = a;
    let mut k = n.unsigned_abs();
    let mut r = 1.0;
    while k > 0 {
        if k & 1 == 1 {
            r *= base;
        }
        base *= base;
        k >>= 1;
    }
    if n < 0 { 1.0 / r } else { r }
}

fn pow(a: f64, ea: f64, b: f64, eb: f64) -> (f64, f64) {
    let integral = b.fract() == 0.0 && b.abs() <= POW_INT_MAX;
    let raise = |x: f64, y: f64| {
        if integral {
            powi(x, y as i32)
        } else {
            x.powf(y)
        }
    };
    let r = raise(a, b);
    let da = if b == 0.0 {
        0.0
    } else {
        (b * raise(a, b - 1.0)).abs()
    };
    let ln = a.abs().ln().abs();
    let mut e = amp(da, ea) + amp(amp(r.abs(), ln), eb) + r.abs();
    if !integral {
        e += amp(r.abs(), amp(b.abs(), ln));
    }
    (r, e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DType, Dim};
    use crate::program::{DimDecl, Stmt, TensorDecl};

    // ---- builders ------------------------------------------------------------------------------------------

    fn prog(dims: &[&str], inputs: Vec<TensorDecl>, params: &[&str], stmts: Vec<Stmt>) -> Program {
        Program {
            dims: dims
                .iter()
                .map(|n| DimDecl {
                    name: n.to_string(),
                    size: Dim::Runtime,
                })
                .collect(),
            inputs,
            params: params.iter().map(|p| p.to_string()).collect(),
            stmts,
            dtype: DType::F32,
            precision: crate::model::Precision::Exact,
        }
    }
    fn input(name: &str, axes: &[usize]) -> TensorDecl {
        TensorDecl {
            name: name.into(),
            axes: axes.to_vec(),
            elem: Elem::Float,
        }
    }
    fn int_input(name: &str, axes: &[usize]) -> TensorDecl {
        TensorDecl {
            name: name.into(),
            axes: axes.to_vec(),
            elem: Elem::I64,
        }
    }
    fn out(name: &str, axes: &[usize], expr: Expr) -> Stmt {
        Stmt {
            name: name.into(),
            axes: axes.to_vec(),
            expr,
            elem: Elem::Float,
            output: true,
        }
    }
    fn tmp(name: &str, axes: &[usize], expr: Expr) -> Stmt {
        Stmt {
            output: false,
            ..out(name, axes, expr)
        }
    }
    fn x(i: usize) -> Expr {
        Expr::Input(i)
    }
    fn v(j: usize) -> Expr {
        Expr::Value(j)
    }
    fn c(k: f64) -> Expr {
        Expr::Const(k)
    }
    fn un(op: Unary, a: Expr) -> Expr {
        Expr::Unary(op, Box::new(a))
    }
    fn bin(op: Binary, a: Expr, b: Expr) -> Expr {
        Expr::Binary(op, Box::new(a), Box::new(b))
    }
    fn add(a: Expr, b: Expr) -> Expr {
        bin(Binary::Add, a, b)
    }
    fn sub(a: Expr, b: Expr) -> Expr {
        bin(Binary::Sub, a, b)
    }
    fn mul(a: Expr, b: Expr) -> Expr {
        bin(Binary::Mul, a, b)
    }
    fn div(a: Expr, b: Expr) -> Expr {
        bin(Binary::Div, a, b)
    }
    fn red(op: Reduce, over: &[usize], body: Expr) -> Expr {
        Expr::Reduce(op, over.to_vec(), Box::new(body))
    }
    fn select(cond: Expr, a: Expr, b: Expr) -> Expr {
        Expr::Select(Box::new(cond), Box::new(a), Box::new(b))
    }

    /// Deterministic values in [-scale, scale), exact in f32.
    fn noise(n: usize, seed: u64, scale: f32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
            })
            .collect()
    }

    fn eval1(p: &Program, ext: &[usize], inputs: &[HostTensor], params: &[f64]) -> Reference {
        let mut r = eval(p, ext, inputs, params, None, 1).expect("evaluates");
        assert_eq!(r.len(), 1);
        r.remove(0)
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-300) || a == b
    }

    // softmax over c of x[r, c]: m = max, s = sum exp(x − m), y = exp(x − m) / s.
    fn softmax() -> Program {
        let shifted = || sub(x(0), v(0));
        prog(
            &["r", "c"],
            vec![input("x", &[0, 1])],
            &[],
            vec![
                tmp("m", &[0], red(Reduce::Max, &[1], x(0))),
                tmp("s", &[0], red(Reduce::Sum, &[1], un(Unary::Exp, shifted()))),
                out("y", &[0, 1], div(un(Unary::Exp, shifted()), v(1))),
            ],
        )
    }

    fn softmax_direct(x: &[f32], rows: usize, cols: usize) -> Vec<f64> {
        let mut y = vec![0.0; rows * cols];
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
            for (k, &v) in row.iter().enumerate() {
                y[r * cols + k] = (v as f64 - m).exp() / s;
            }
        }
        y
    }

    // layer norm over c: mu, var = mean (x − mu)², y = (x − mu) · rsqrt(var + eps) · g + b.
    fn layer_norm() -> Program {
        let centered = || sub(x(0), v(0));
        prog(
            &["r", "c"],
            vec![input("x", &[0, 1]), input("g", &[1]), input("b", &[1])],
            &["eps"],
            vec![
                tmp("mu", &[0], red(Reduce::Mean, &[1], x(0))),
                tmp(
                    "var",
                    &[0],
                    red(Reduce::Mean, &[1], bin(Binary::Pow, centered(), c(2.0))),
                ),
                out(
                    "y",
                    &[0, 1],
                    add(
                        mul(
                            mul(centered(), un(Unary::Rsqrt, add(v(1), Expr::Param(0)))),
                            x(1),
                        ),
                        x(2),
                    ),
                ),
            ],
        )
    }

    // ---- meanings ------------------------------------------------------------------------------------------

    #[test]
    fn relu_is_exact_and_keeps_nan() {
        let p = prog(
            &["i"],
            vec![input("x", &[0])],
            &[],
            vec![out("y", &[0], bin(Binary::Max, x(0), c(0.0)))],
        );
        let xs = [-2.0, -0.5, 0.0, 3.0, f32::NAN];
        let r = eval1(&p, &[5], &[HostTensor::Float(&xs)], &[]);
        assert_eq!(&r.values[..4], &[0.0, 0.0, 0.0, 3.0]);
        assert!(r.values[4].is_nan());
        // No rounding anywhere: a kernel must be exact (up to the output's storage rounding).
        assert_eq!(&r.scales[..4], &[0.0; 4]);
        assert!(!r.scales[4].is_nan());
    }

    #[test]
    fn softmax_matches_direct_computation() {
        let (rows, cols) = (3, 5);
        let xs = noise(rows * cols, 1, 4.0);
        let r = eval1(&softmax(), &[rows, cols], &[HostTensor::Float(&xs)], &[]);
        let want = softmax_direct(&xs, rows, cols);
        for (a, b) in r.values.iter().zip(&want) {
            assert!(close(*a, *b, 1e-15), "{a} vs {b}");
        }
        for row in r.values.chunks(cols) {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        }
        // A hand-computed row: softmax(0, ln 2, ln 3) = (1, 2, 3) / 6.
        let xs = [0.0f32, 2f32.ln(), 3f32.ln()];
        let r = eval1(&softmax(), &[1, 3], &[HostTensor::Float(&xs)], &[]);
        let exact = |v: f32| (v as f64).exp();
        let s = exact(xs[0]) + exact(xs[1]) + exact(xs[2]);
        for (k, (&y, &x)) in r.values.iter().zip(&xs).enumerate() {
            assert!(close(y, exact(x) / s, 1e-15));
            assert!((y - (k + 1) as f64 / 6.0).abs() < 1e-7);
        }
    }

    #[test]
    fn softmax_scale_follows_the_shift_not_the_input_magnitude() {
        // Inputs near 1e4, spaced by exact f32 steps (ulp(1e4) = 2⁻¹⁰). The kernel subtracts the row max as the
        // program does; the difference of two exact f32 values is rounded once relative to itself. So the
        // scale must follow |x − m| (a few units), not |x| = 1e4.
        let cols = 64;
        let xs: Vec<f32> = (0..cols)
            .map(|k| 1e4 + (k as f32 * 0.37).sin() * 4.0)
            .collect();
        let r = eval1(&softmax(), &[1, cols], &[HostTensor::Float(&xs)], &[]);
        let m = xs.iter().fold(f32::MIN, |m, &v| m.max(v)) as f64;
        for (k, (&y, &e)) in r.values.iter().zip(&r.scales).enumerate() {
            let shift = m - xs[k] as f64;
            let rel = e / y;
            // Rounding happens (exp, the sum, the division): never zero. Bounded by the shift: each of x − m,
            // exp's argument rounding, the sum and the division contributes about 1 + |x − m|, never 1e4.
            assert!(rel >= 1.0, "scale/value {rel} at {k}");
            assert!(
                rel <= 4.0 * (shift + 2.0) + 8.0 + 12.0,
                "scale/value {rel} at {k} (shift {shift})"
            );
        }
        // The same row shifted to 0 gets the same relative scales up to the sum's small differences: the
        // magnitude of x is gone after the subtraction.
        let low: Vec<f32> = xs.iter().map(|&v| v - 1e4).collect();
        let r0 = eval1(&softmax(), &[1, cols], &[HostTensor::Float(&low)], &[]);
        for k in 0..cols {
            let (a, b) = (r.scales[k] / r.values[k], r0.scales[k] / r0.values[k]);
            assert!((a - b).abs() <= 0.05 * b, "{a} vs {b}");
        }
    }

    #[test]
    fn log_softmax() {
        // y = x − m − log(sum exp(x − m))
        let shifted = || sub(x(0), v(0));
        let p = prog(
            &["r", "c"],
            vec![input("x", &[0, 1])],
            &[],
            vec![
                tmp("m", &[0], red(Reduce::Max, &[1], x(0))),
                tmp("s", &[0], red(Reduce::Sum, &[1], un(Unary::Exp, shifted()))),
                out("y", &[0, 1], sub(shifted(), un(Unary::Log, v(1)))),
            ],
        );
        // Row (0, 0, 0): log(1/3) thrice. Row (1, 2, 3): x − log(e + e² + e³).
        let xs = [0.0f32, 0.0, 0.0, 1.0, 2.0, 3.0];
        let r = eval1(&p, &[2, 3], &[HostTensor::Float(&xs)], &[]);
        assert_eq!(&r.values[..3], &[-(3f64.ln()); 3]);
        let lse = (1f64.exp() + 2f64.exp() + 3f64.exp()).ln();
        for k in 0..3 {
            assert!(close(r.values[3 + k], (k + 1) as f64 - lse, 1e-15));
        }
        // Rounded, so never 0; a few units of the magnitudes involved (|x − m| ≤ 2, log s ≤ 1.1), no more.
        assert!(
            r.scales.iter().all(|&e| e > 0.0 && e < 20.0),
            "{:?}",
            r.scales
        );
    }

    #[test]
    fn layer_norm_matches_direct_computation() {
        let (rows, cols) = (4, 7);
        let xs = noise(rows * cols, 2, 3.0);
        let g = noise(cols, 3, 1.0);
        let b = noise(cols, 4, 1.0);
        let eps = 1e-5;
        let r = eval1(
            &layer_norm(),
            &[rows, cols],
            &[
                HostTensor::Float(&xs),
                HostTensor::Float(&g),
                HostTensor::Float(&b),
            ],
            &[eps],
        );
        for row in 0..rows {
            let xr: Vec<f64> = xs[row * cols..(row + 1) * cols]
                .iter()
                .map(|&v| v as f64)
                .collect();
            let mu = xr.iter().sum::<f64>() / cols as f64;
            let var = xr.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / cols as f64;
            for k in 0..cols {
                let want = (xr[k] - mu) / (var + eps).sqrt() * g[k] as f64 + b[k] as f64;
                let got = r.values[row * cols + k];
                assert!((got - want).abs() < 1e-14, "{got} vs {want}");
                assert!(r.scales[row * cols + k] > 0.0);
            }
        }
        // Hand-computed: x = (1, 3), g = 1, b = 0, eps = 0: mu 2, var 1, y = (−1, 1).
        let r = eval1(
            &layer_norm(),
            &[1, 2],
            &[
                HostTensor::Float(&[1.0, 3.0]),
                HostTensor::Float(&[1.0, 1.0]),
                HostTensor::Float(&[0.0, 0.0]),
            ],
            &[0.0],
        );
        assert_eq!(r.values, vec![-1.0, 1.0]);
    }

    #[test]
    fn rms_norm() {
        // ms[r] = mean(c) x²; y = x · rsqrt(ms + eps) · w
        let p = prog(
            &["r", "c"],
            vec![input("x", &[0, 1]), input("w", &[1])],
            &[],
            vec![
                tmp("ms", &[0], red(Reduce::Mean, &[1], mul(x(0), x(0)))),
                out(
                    "y",
                    &[0, 1],
                    mul(mul(x(0), un(Unary::Rsqrt, add(v(0), c(1e-6)))), x(1)),
                ),
            ],
        );
        // x = (3, 4): ms = 12.5.
        let r = eval1(
            &p,
            &[1, 2],
            &[
                HostTensor::Float(&[3.0, 4.0]),
                HostTensor::Float(&[1.0, 2.0]),
            ],
            &[],
        );
        let d = (12.5f64 + 1e-6).sqrt();
        assert!(close(r.values[0], 3.0 / d, 1e-15));
        assert!(close(r.values[1], 8.0 / d, 1e-15));
    }

    #[test]
    fn argmax_and_argmin_take_the_first_extreme() {
        let p = prog(
            &["r", "c"],
            vec![input("x", &[0, 1])],
            &[],
            vec![
                Stmt {
                    elem: Elem::I64,
                    ..out("amax", &[0], red(Reduce::Argmax, &[1], x(0)))
                },
                Stmt {
                    elem: Elem::I64,
                    ..out("amin", &[0], red(Reduce::Argmin, &[1], x(0)))
                },
            ],
        );
        let nan = f32::NAN;
        let xs = [
            1.0, 3.0, 3.0, 2.0, //
            5.0, 5.0, 5.0, 5.0, //
            1.0, nan, 7.0, nan, //
            -1.0, 2.0, -1.0, 2.0,
        ];
        let r = eval(&p, &[4, 4], &[HostTensor::Float(&xs)], &[], None, 1).expect("evaluates");
        assert_eq!(r[0].values, vec![1.0, 0.0, 1.0, 1.0]);
        assert_eq!(r[1].values, vec![0.0, 0.0, 1.0, 0.0]);

        // Over two dimensions, the position is row-major in the order the reduction lists them.
        let over = |dims: &[usize]| {
            prog(
                &["i", "j"],
                vec![input("x", &[0, 1])],
                &[],
                vec![Stmt {
                    elem: Elem::I64,
                    ..out("a", &[], red(Reduce::Argmax, dims, x(0)))
                }],
            )
        };
        // x[i, j] is 2×3; the max 9 sits at i = 1, j = 0.
        let xs = [1.0, 2.0, 3.0, 9.0, 4.0, 5.0];
        let ij = eval1(&over(&[0, 1]), &[2, 3], &[HostTensor::Float(&xs)], &[]);
        let ji = eval1(&over(&[1, 0]), &[2, 3], &[HostTensor::Float(&xs)], &[]);
        assert_eq!(ij.values, vec![3.0]); // 1·3 + 0
        assert_eq!(ji.values, vec![1.0]); // 0·2 + 1
    }

    #[test]
    fn sum_over_a_middle_axis() {
        // y[a, c] = sum(b) x[a, b, c], x of 2×3×4.
        let p = prog(
            &["a", "b", "c"],
            vec![input("x", &[0, 1, 2])],
            &[],
            vec![out("y", &[0, 2], red(Reduce::Sum, &[1], x(0)))],
        );
        let xs: Vec<f32> = (0..24).map(|k| k as f32).collect();
        let r = eval1(&p, &[2, 3, 4], &[HostTensor::Float(&xs)], &[]);
        // y[a, c] = Σ_b (12a + 4b + c) = 36a + 12 + 3c.
        let want: Vec<f64> = (0..2)
            .flat_map(|a| (0..4).map(move |c| (36 * a + 12 + 3 * c) as f64))
            .collect();
        assert_eq!(r.values, want);
        // A sum of exact inputs is judged against the sum of magnitudes.
        assert_eq!(r.scales, want);
    }

    #[test]
    fn broadcast_by_index() {
        // y[i, j] = a[i] * b[i, j]; z[i, j] = a[i] (the absent axis j broadcasts).
        let p = prog(
            &["i", "j"],
            vec![input("a", &[0]), input("b", &[0, 1])],
            &[],
            vec![out("y", &[0, 1], mul(x(0), x(1))), out("z", &[0, 1], x(0))],
        );
        let a = [2.0, -3.0];
        let b = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let r = eval(
            &p,
            &[2, 3],
            &[HostTensor::Float(&a), HostTensor::Float(&b)],
            &[],
            None,
            1,
        )
        .expect("evaluates");
        assert_eq!(r[0].values, vec![2.0, 4.0, 6.0, -12.0, -15.0, -18.0]);
        assert_eq!(r[0].scales, vec![2.0, 4.0, 6.0, 12.0, 15.0, 18.0]);
        assert_eq!(r[1].values, vec![2.0, 2.0, 2.0, -3.0, -3.0, -3.0]);
    }

    #[test]
    fn full_reduction_through_a_scalar_statement() {
        // t = sum(i, j) x[i, j]²; y[i, j] = x[i, j] / sqrt(t): a Frobenius normalization.
        let p = prog(
            &["i", "j"],
            vec![input("x", &[0, 1])],
            &[],
            vec![
                tmp(
                    "t",
                    &[],
                    red(Reduce::Sum, &[0, 1], bin(Binary::Pow, x(0), c(2.0))),
                ),
                out("y", &[0, 1], div(x(0), un(Unary::Sqrt, v(0)))),
            ],
        );
        // ‖(1, 2; 2, 4)‖ = 5.
        let xs = [1.0, 2.0, 2.0, 4.0];
        let r = eval1(&p, &[2, 2], &[HostTensor::Float(&xs)], &[]);
        assert_eq!(r.values, vec![0.2, 0.4, 0.4, 0.8]);

        // The same with the reduction inside the statement over other dimensions: computed once, not per
        // element (the cache), and equal.
        let q = prog(
            &["i", "j", "a", "b"],
            vec![input("x", &[0, 1]), input("w", &[2, 3])],
            &[],
            vec![out(
                "y",
                &[0, 1],
                div(
                    x(0),
                    un(Unary::Sqrt, red(Reduce::Sum, &[2, 3], mul(x(1), x(1)))),
                ),
            )],
        );
        let r2 = eval1(
            &q,
            &[2, 2, 2, 2],
            &[HostTensor::Float(&xs), HostTensor::Float(&xs)],
            &[],
        );
        assert_eq!(r2.values, r.values);
    }

    #[test]
    fn a_reduction_may_rebind_an_axis_of_its_statement() {
        // The module doc's spelling: y[r, c] = e[r, c] / sum(c) e[r, c].
        let p = prog(
            &["r", "c"],
            vec![input("x", &[0, 1])],
            &[],
            vec![
                tmp("m", &[0], red(Reduce::Max, &[1], x(0))),
                tmp("e", &[0, 1], un(Unary::Exp, sub(x(0), v(0)))),
                out("y", &[0, 1], div(v(1), red(Reduce::Sum, &[1], v(1)))),
            ],
        );
        let (rows, cols) = (5, 6);
        let xs = noise(rows * cols, 9, 3.0);
        let r = eval1(&p, &[rows, cols], &[HostTensor::Float(&xs)], &[]);
        let want = softmax_direct(&xs, rows, cols);
        for (a, b) in r.values.iter().zip(&want) {
            assert!(close(*a, *b, 1e-15));
        }
    }

    #[test]
    fn select_comparisons_pow_and_friends() {
        let p = prog(
            &["i"],
            vec![input("a", &[0]), input("b", &[0])],
            &[],
            vec![
                out("sel", &[0], select(bin(Binary::Lt, x(0), x(1)), x(0), x(1))),
                out("pow", &[0], bin(Binary::Pow, x(0), x(1))),
                out("ne", &[0], bin(Binary::Ne, x(0), x(1))),
                out("sig", &[0], un(Unary::Sigmoid, x(0))),
                out("min", &[0], bin(Binary::Min, x(0), x(1))),
            ],
        );
        let a = [-2.0, 4.0, f32::NAN, -1000.0, 1000.0];
        let b = [3.0, 0.5, 1.0, 2.0, -2.0];
        let r = eval(
            &p,
            &[5],
            &[HostTensor::Float(&a), HostTensor::Float(&b)],
            &[],
            None,
            1,
        )
        .expect("evaluates");
        // min by select; NaN < 1 is false, so the select takes b.
        assert_eq!(r[0].values, vec![-2.0, 0.5, 1.0, -1000.0, -2.0]);
        // (−2)³ = −8 exactly; 4^0.5 = 2; (−1000)² and 1000⁻².
        assert_eq!(r[1].values[0], -8.0);
        assert_eq!(r[1].values[1], 2.0);
        assert_eq!(r[1].values[3], 1e6);
        assert_eq!(r[1].values[4], 1e-6);
        assert_eq!(r[2].values, vec![1.0, 1.0, 1.0, 1.0, 1.0]);
        assert_eq!(r[2].scales, vec![0.0; 5]);
        assert_eq!(r[3].values[3], 0.0);
        assert_eq!(r[3].values[4], 1.0);
        assert!(close(r[3].values[0], 1.0 / (1.0 + 2f64.exp()), 1e-15));
        assert!(r[4].values[2].is_nan());
        for out in &r {
            assert!(out.scales.iter().all(|s| !s.is_nan()));
        }
        // Exact integer powers by multiplication: a kernel's x·x is one rounding.
        assert_eq!(pow(3.0, 0.0, 2.0, 0.0), (9.0, 9.0));
        assert_eq!(powi(-1.5, 3), -3.375);
        assert_eq!(powi(2.0, -2), 0.25);
    }

    #[test]
    fn reductions_of_nothing_and_products() {
        let p = |op| {
            prog(
                &["i", "k"],
                vec![input("x", &[0, 1])],
                &[],
                vec![out("y", &[0], red(op, &[1], x(0)))],
            )
        };
        let none = HostTensor::Float(&[]);
        assert_eq!(
            eval1(&p(Reduce::Sum), &[2, 0], &[none], &[]).values,
            vec![0.0, 0.0]
        );
        assert_eq!(
            eval1(&p(Reduce::Prod), &[2, 0], &[none], &[]).values,
            vec![1.0, 1.0]
        );
        for op in [Reduce::Mean, Reduce::Max, Reduce::Min, Reduce::Argmin] {
            let e = eval(&p(op), &[2, 0], &[none], &[], None, 1);
            assert_eq!(
                e,
                Err(InterpError::EmptyReduction {
                    stmt: "y".into(),
                    reduce: op
                })
            );
            // With no element to compute, nothing is undefined.
            assert_eq!(
                eval1(&p(op), &[0, 0], &[none], &[]).values,
                Vec::<f64>::new()
            );
        }
        // prod(2, −3, 0.5) = −3; scale: ((0 + 6)·0.5 + 6·0) + 3 = 6 (two roundings: |2·−3| and |−3|).
        let r = eval1(
            &p(Reduce::Prod),
            &[1, 3],
            &[HostTensor::Float(&[2.0, -3.0, 0.5])],
            &[],
        );
        assert_eq!((r.values[0], r.scales[0]), (-3.0, 6.0));
        // mean(1, −3) = −1; scale (1 + 3) / 2 + 1 = 3.
        let r = eval1(
            &p(Reduce::Mean),
            &[1, 2],
            &[HostTensor::Float(&[1.0, -3.0])],
            &[],
        );
        assert_eq!((r.values[0], r.scales[0]), (-1.0, 3.0));
    }

    #[test]
    fn integer_inputs_and_integer_statements() {
        // idx[r] = argmax(c) x[r, c]; y[r] = idx[r] + n[r] (positions and small integers are exact).
        let p = prog(
            &["r", "c"],
            vec![input("x", &[0, 1]), int_input("n", &[0])],
            &[],
            vec![
                Stmt {
                    elem: Elem::I64,
                    ..tmp("idx", &[0], red(Reduce::Argmax, &[1], x(0)))
                },
                out("y", &[0], add(v(0), x(1))),
            ],
        );
        let xs = [0.0, 1.0, 5.0, 2.0];
        let n = [10i64, 1 << 40];
        let r = eval1(
            &p,
            &[2, 2],
            &[HostTensor::Float(&xs), HostTensor::Int(&n)],
            &[],
        );
        assert_eq!(r.values, vec![11.0, (1u64 << 40) as f64]);
        // 11: one rounding of the sum. 2⁴⁰: exact in f32, so again one rounding of the sum only.
        assert_eq!(r.scales, vec![11.0, (1u64 << 40) as f64]);
    }

    #[test]
    fn a_gather_reads_at_the_index_and_nan_outside_the_axis() {
        use crate::program::notation::parse;
        // Cross-entropy over 5 rows of 70 classes (the lane block is 64 wide), with one target out of range.
        let (rows, n) = (5, 70);
        let xs = noise(rows * n, 11, 3.0);
        let mut targets: Vec<i64> = (0..rows as i64).map(|r| (r * 17 + 3) % n as i64).collect();
        let per_row =
            parse("m[r] = max(c) x[r, c]; l[r] = m[r] + log(sum(c) exp(x[r, c] - m[r])) - x[r, t[r]], i64 t")
                .unwrap();
        let loss = crate::program::words::lower("cross entropy loss")
            .unwrap()
            .unwrap();
        let direct = |targets: &[i64]| -> Vec<f64> {
            (0..rows)
                .map(|r| {
                    let row = &xs[r * n..(r + 1) * n];
                    let m = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
                    let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
                    m + s.ln() - row[targets[r] as usize] as f64
                })
                .collect()
        };
        let run = |p: &Program, targets: &[i64], sample: Option<&Sample>| {
            eval(
                p,
                &[rows, n],
                &[HostTensor::Float(&xs), HostTensor::Int(targets)],
                &[],
                sample,
                1,
            )
            .unwrap()
        };
        let want = direct(&targets);
        let l = &run(&per_row, &targets, None)[0];
        let y = &run(&loss, &targets, None)[0];
        assert_eq!(l.values.len(), rows);
        for (got, want) in l.values.iter().zip(&want) {
            assert!((got - want).abs() < 1e-12, "{got} against {want}");
        }
        let mean = want.iter().sum::<f64>() / rows as f64;
        assert!((y.values[0] - mean).abs() < 1e-12);
        // Sampled rows read the same gathered values.
        let sample = Sample {
            dim: 0,
            values: vec![3, 1],
        };
        let sampled = &run(&per_row, &targets, Some(&sample))[0];
        assert!((sampled.values[0] - want[3]).abs() < 1e-12);
        assert!((sampled.values[1] - want[1]).abs() < 1e-12);
        // An index past the axis, or negative, reads NaN.
        for bad in [n as i64, -1] {
            targets[2] = bad;
            let l = &run(&per_row, &targets, None)[0];
            assert!(l.values[2].is_nan());
            assert!(!l.values[1].is_nan());
            assert!(run(&loss, &targets, None)[0].values[0].is_nan());
        }
    }

    #[test]
    fn scans_fold_along_their_axis_in_either_direction() {
        use crate::program::notation::parse;
        // Rows of 70 cross the block width; the scanned axis is the middle one of three in the strided case.
        let (rows, n) = (3, 70);
        let xs = noise(rows * n, 7, 2.0);
        let mask: Vec<i64> = (0..rows * n).map(|i| i64::from(i % 3 != 0)).collect();
        let direct = |reverse: bool, exclusive: bool, masked: bool| {
            let mut out = vec![0.0; rows * n];
            for r in 0..rows {
                let mut acc = 0.0;
                for step in 0..n {
                    let c = if reverse { n - 1 - step } else { step };
                    let t = f64::from(xs[r * n + c])
                        * if masked { mask[r * n + c] as f64 } else { 1.0 };
                    if exclusive {
                        out[r * n + c] = acc;
                        acc += t;
                    } else {
                        acc += t;
                        out[r * n + c] = acc;
                    }
                }
            }
            out
        };
        for (text, reverse, exclusive, masked) in [
            ("y[r, c] = cumsum(c) x[r, c]", false, false, false),
            ("y[r, c] = cumsum(c, reverse) x[r, c]", true, false, false),
            ("y[r, c] = cumsum(c, exclusive) x[r, c]", false, true, false),
            (
                "y[r, c] = cumsum(c, reverse, exclusive) x[r, c]",
                true,
                true,
                false,
            ),
            (
                "y[r, c] = cumsum(c) x[r, c] * m[r, c], bool m",
                false,
                false,
                true,
            ),
        ] {
            let p = parse(text).unwrap();
            let mut inputs = vec![HostTensor::Float(&xs)];
            if masked {
                inputs.push(HostTensor::Int(&mask));
            }
            let r = eval1(&p, &[rows, n], &inputs, &[]);
            assert_eq!(r.values, direct(reverse, exclusive, masked), "{text}");
            // The scale is the prefix's sum of magnitudes: it never falls along the scan.
            let first = if reverse { n - 1 } else { 0 };
            let last = if reverse { 0 } else { n - 1 };
            assert!(r.scales[last] >= r.scales[first], "{text}");
            if exclusive {
                assert_eq!((r.values[first], r.scales[first]), (0.0, 0.0), "{text}");
            }
            // A sample of rows gives those rows' values.
            let sample = Sample {
                dim: 0,
                values: vec![2, 0],
            };
            let part = eval(&p, &[rows, n], &inputs, &[], Some(&sample), 2).unwrap();
            assert_eq!(part[0].values[..n], r.values[2 * n..], "{text}");
            assert_eq!(part[0].values[n..], r.values[..n], "{text}");
        }
        // A product and a running max along a strided (middle) axis: y[a, b, k], b scanned.
        let (na, nb, nk) = (2, 5, 3);
        let xs = noise(na * nb * nk, 9, 1.5);
        let at = |a: usize, b: usize, k: usize| (a * nb + b) * nk + k;
        for (text, prod) in [
            ("y[a, b, k] = cumprod(b) x[a, b, k]", true),
            ("y[a, b, k] = cummax(b) x[a, b, k]", false),
        ] {
            let p = parse(text).unwrap();
            let r = eval1(&p, &[na, nb, nk], &[HostTensor::Float(&xs)], &[]);
            for a in 0..na {
                for k in 0..nk {
                    let mut acc = f64::from(xs[at(a, 0, k)]);
                    for b in 0..nb {
                        let v = f64::from(xs[at(a, b, k)]);
                        if b > 0 {
                            acc = if prod { acc * v } else { acc.max(v) };
                        }
                        assert_eq!(r.values[at(a, b, k)], acc, "{text} at {a} {b} {k}");
                    }
                }
            }
        }
        // The scanned axis is never sampled.
        let p = parse("y[r, c] = cumsum(c) x[r, c]").unwrap();
        assert_eq!(sampleable(&p), vec![0]);
    }

    #[test]
    fn reductions_per_lane_nested_and_cached() {
        // Sizes cross the block width, so blocks split rows and reductions.
        let (ni, nj, nk, nl) = (3, 70, 130, 5);
        let a = noise(nj * nk, 12, 1.0);
        let b = noise(ni * nk, 13, 1.0);
        let w = noise(nk * nl, 14, 1.0);
        let ins = [
            HostTensor::Float(&a),
            HostTensor::Float(&b),
            HostTensor::Float(&w),
        ];
        let (a64, b64, w64) = (
            |j: usize, k: usize| a[j * nk + k] as f64,
            |i: usize, k: usize| b[i * nk + k] as f64,
            |k: usize, l: usize| w[k * nl + l] as f64,
        );
        // dims i j k l; a[j, k], b[i, k], w[k, l].
        let p = prog(
            &["i", "j", "k", "l"],
            vec![
                input("a", &[1, 2]),
                input("b", &[0, 2]),
                input("w", &[2, 3]),
            ],
            &[],
            vec![
                // A matmul: the reduction reads the lane axis j, so it runs lane by lane.
                out("mm", &[0, 1], red(Reduce::Sum, &[2], mul(x(0), x(1)))),
                // A nested reduction that depends on the outer body's lane k: lane by lane inside the body.
                out(
                    "nest",
                    &[0],
                    red(Reduce::Sum, &[2], mul(x(1), red(Reduce::Max, &[3], x(2)))),
                ),
                // Per lane (over j, sum(k) a[j, k]) times a reduction over two dimensions that reads only i:
                // once per block, cached along the row.
                out(
                    "two",
                    &[0, 1],
                    mul(
                        red(Reduce::Sum, &[2], x(0)),
                        red(Reduce::Sum, &[2, 3], mul(x(1), x(2))),
                    ),
                ),
            ],
        );
        let r = eval(&p, &[ni, nj, nk, nl], &ins, &[], None, 1).expect("evaluates");
        let mm = |i: usize, j: usize| (0..nk).map(|k| a64(j, k) * b64(i, k)).sum::<f64>();
        let wmax = |k: usize| (0..nl).map(|l| w64(k, l)).fold(f64::NEG_INFINITY, f64::max);
        let nest = |i: usize| (0..nk).map(|k| b64(i, k) * wmax(k)).sum::<f64>();
        let bw = |i: usize| {
            (0..nk)
                .flat_map(|k| (0..nl).map(move |l| (k, l)))
                .map(|(k, l)| b64(i, k) * w64(k, l))
                .sum::<f64>()
        };
        let asum = |j: usize| (0..nk).map(|k| a64(j, k)).sum::<f64>();
        for i in 0..ni {
            assert_eq!(r[1].values[i], nest(i));
            for j in 0..nj {
                assert_eq!(r[0].values[i * nj + j], mm(i, j));
                assert_eq!(r[2].values[i * nj + j], asum(j) * bw(i));
            }
        }
        // Bitwise the same on any number of threads (chunks start mid-row and mid-block).
        let mut many = eval(&p, &[ni, nj, nk, nl], &ins, &[], None, 4).expect("evaluates");
        for (one, many) in r.iter().zip(&mut many) {
            assert_eq!(one, many);
        }
    }

    #[test]
    fn cached_reductions_equal_intermediates() {
        // y[i, j] = x[i, j] · sum(k) (a[i, k] · sum(l) w[i, l]) both ways: the reductions inside the statement
        // (cached per row) and as intermediates.
        let (ni, nj, nk, nl) = (5, 150, 7, 9);
        let xs = noise(ni * nj, 15, 2.0);
        let a = noise(ni * nk, 16, 2.0);
        let w = noise(ni * nl, 17, 2.0);
        let ins = [
            HostTensor::Float(&xs),
            HostTensor::Float(&a),
            HostTensor::Float(&w),
        ];
        let inputs = || {
            vec![
                input("x", &[0, 1]),
                input("a", &[0, 2]),
                input("w", &[0, 3]),
            ]
        };
        let dims = ["i", "j", "k", "l"];
        let inline = prog(
            &dims,
            inputs(),
            &[],
            vec![out(
                "y",
                &[0, 1],
                mul(
                    x(0),
                    red(Reduce::Sum, &[2], mul(x(1), red(Reduce::Sum, &[3], x(2)))),
                ),
            )],
        );
        let staged = prog(
            &dims,
            inputs(),
            &[],
            vec![
                tmp("ws", &[0], red(Reduce::Sum, &[3], x(2))),
                tmp("t", &[0], red(Reduce::Sum, &[2], mul(x(1), v(0)))),
                out("y", &[0, 1], mul(x(0), v(1))),
            ],
        );
        let ext = [ni, nj, nk, nl];
        for threads in [1, 3] {
            let one = eval(&inline, &ext, &ins, &[], None, threads).expect("evaluates");
            let two = eval(&staged, &ext, &ins, &[], None, threads).expect("evaluates");
            assert_eq!(one, two);
        }
    }

    #[test]
    fn sampling_the_lane_axis() {
        // y[i, j] = x[i, j] · n[j] + sum(k) w[i, k], sampled on j (the last axis: gathered loads).
        let (ni, nj, nk) = (3, 100, 4);
        let xs = noise(ni * nj, 18, 2.0);
        let n: Vec<i64> = (0..nj as i64).map(|j| j * 3 - 7).collect();
        let w = noise(ni * nk, 19, 2.0);
        let ins = [
            HostTensor::Float(&xs),
            HostTensor::Int(&n),
            HostTensor::Float(&w),
        ];
        let p = prog(
            &["i", "j", "k"],
            vec![
                input("x", &[0, 1]),
                int_input("n", &[1]),
                input("w", &[0, 2]),
            ],
            &[],
            vec![
                tmp("e", &[0, 1], mul(x(0), x(1))),
                out("y", &[0, 1], add(v(0), red(Reduce::Sum, &[2], x(2)))),
            ],
        );
        assert_eq!(sampleable(&p), vec![0, 1]);
        let dense = eval1(&p, &[ni, nj, nk], &ins, &[]);
        let picks: Vec<usize> = vec![99, 0, 64, 63, 65, 63]
            .into_iter()
            .chain(0..70)
            .collect();
        let sample = Sample {
            dim: 1,
            values: picks.clone(),
        };
        let sampled = eval(&p, &[ni, nj, nk], &ins, &[], Some(&sample), 1)
            .expect("evaluates")
            .remove(0);
        for i in 0..ni {
            for (k, &j) in picks.iter().enumerate() {
                assert_eq!(
                    sampled.values[i * picks.len() + k],
                    dense.values[i * nj + j]
                );
                assert_eq!(
                    sampled.scales[i * picks.len() + k],
                    dense.scales[i * nj + j]
                );
            }
        }
    }

    // ---- error scales --------------------------------------------------------------------------------------

    #[test]
    fn scales_count_each_rounding() {
        let p = prog(
            &["i"],
            vec![input("a", &[0]), input("b", &[0])],
            &["s"],
            vec![
                out("copy", &[0], un(Unary::Neg, un(Unary::Abs, x(0)))),
                out("sum", &[0], add(x(0), x(1))),
                out("tenth", &[0], mul(x(0), c(0.1))),
                out("half", &[0], mul(x(0), c(0.5))),
                out("param", &[0], mul(x(0), Expr::Param(0))),
                out("exp", &[0], un(Unary::Exp, x(0))),
                out("sqrt0", &[0], un(Unary::Sqrt, mul(x(0), c(0.0)))),
                out("quot", &[0], div(x(0), x(1))),
            ],
        );
        let r = eval(
            &p,
            &[1],
            &[HostTensor::Float(&[2.0]), HostTensor::Float(&[-8.0])],
            &[0.25],
            None,
            1,
        )
        .expect("evaluates");
        assert_eq!(r[0].scales, vec![0.0]); // −|a|: no rounding
        assert_eq!(r[1].scales, vec![6.0]); // |2 − 8|
        assert_eq!(r[2].scales, vec![0.1 * 2.0 + 0.2]); // 0.1 is rounded in f32, then the product
        assert_eq!(r[3].scales, vec![1.0]); // 0.5 is exact: the product's rounding only
        assert_eq!(r[4].scales, vec![0.5]); // an f32-exact parameter is exact
        assert_eq!(r[5].scales, vec![2f64.exp() * (0.0 + 2.0) + 2f64.exp()]); // argument + result
        assert_eq!(r[6].scales, vec![0.0]); // sqrt at an exact 0: no infinite slope times nothing
        assert_eq!(r[7].scales, vec![0.25]); // |2 / −8|
    }

    #[test]
    fn max_near_ties_take_the_larger_scale() {
        // max(a·3, b): a·3 carries scale 3 (one rounding of 3); b is exact.
        let p = prog(
            &["i"],
            vec![input("a", &[0]), input("b", &[0])],
            &[],
            vec![
                out("m", &[0], bin(Binary::Max, mul(x(0), c(3.0)), x(1))),
                out("r", &[], red(Reduce::Max, &[0], x(0))),
            ],
        );
        let a = [1.0, 1.0, 1.0];
        let b = [2.0, 3.0, 3.01];
        let r = eval(
            &p,
            &[3],
            &[HostTensor::Float(&a), HostTensor::Float(&b)],
            &[],
            None,
            1,
        )
        .expect("evaluates");
        assert_eq!(r[0].values, vec![3.0, 3.0, 3.01f32 as f64]);
        // Far apart: the chosen operand's scale. Tied or within 2⁻⁶ of the scales: the larger.
        assert_eq!(r[0].scales, vec![3.0, 3.0, 3.0]);
        let b = [2.0, 3.0, 3.5];
        let r = eval(
            &p,
            &[3],
            &[HostTensor::Float(&a), HostTensor::Float(&b)],
            &[],
            None,
            1,
        )
        .expect("evaluates");
        assert_eq!(r[0].scales, vec![3.0, 3.0, 0.0]);
        assert_eq!(r[1].scales, vec![0.0]); // max of exact values: exact
    }

    // ---- sampling, threads, errors -------------------------------------------------------------------------

    #[test]
    fn sampling_equals_the_dense_rows() {
        let (rows, cols) = (9, 13);
        let xs = noise(rows * cols, 5, 2.0);
        let g = noise(cols, 6, 1.0);
        let b = noise(cols, 7, 1.0);
        let ins = [
            HostTensor::Float(&xs),
            HostTensor::Float(&g),
            HostTensor::Float(&b),
        ];
        let p = layer_norm();
        assert_eq!(sampleable(&p), vec![0]);
        let dense = eval(&p, &[rows, cols], &ins, &[1e-5], None, 1)
            .expect("evaluates")
            .remove(0);
        let picks = vec![7, 0, 3, 3];
        let sample = Sample {
            dim: 0,
            values: picks.clone(),
        };
        let sampled = eval(&p, &[rows, cols], &ins, &[1e-5], Some(&sample), 2)
            .expect("evaluates")
            .remove(0);
        assert_eq!(sampled.values.len(), picks.len() * cols);
        for (k, &row) in picks.iter().enumerate() {
            let want = row * cols..(row + 1) * cols;
            assert_eq!(
                &sampled.values[k * cols..(k + 1) * cols],
                &dense.values[want.clone()]
            );
            assert_eq!(
                &sampled.scales[k * cols..(k + 1) * cols],
                &dense.scales[want]
            );
        }
    }

    #[test]
    fn threads_do_not_change_a_bit() {
        // Big enough to split: 64 × 700 elements of a few ops each.
        let (rows, cols) = (64, 700);
        let xs = noise(rows * cols, 8, 30.0);
        let g = noise(cols, 9, 1.0);
        let b = noise(cols, 10, 1.0);
        let ins = [
            HostTensor::Float(&xs),
            HostTensor::Float(&g),
            HostTensor::Float(&b),
        ];
        for p in [softmax(), layer_norm()] {
            let params: &[f64] = if p.params.is_empty() { &[] } else { &[1e-5] };
            let one = eval(&p, &[rows, cols], &ins[..p.inputs.len()], params, None, 1)
                .expect("evaluates");
            for threads in [2, 3, 8] {
                let many = eval(
                    &p,
                    &[rows, cols],
                    &ins[..p.inputs.len()],
                    params,
                    None,
                    threads,
                )
                .expect("evaluates");
                let bits = |r: &[Reference]| -> Vec<u64> {
                    r.iter()
                        .flat_map(|r| r.values.iter().chain(&r.scales).map(|v| v.to_bits()))
                        .collect()
                };
                assert_eq!(bits(&one), bits(&many), "{threads} threads");
            }
        }
    }

    #[test]
    fn errors() {
        let p = softmax();
        let xs = [0.0f32; 6];
        let ok = [HostTensor::Float(&xs)];
        let e = |ext: &[usize], ins: &[HostTensor], params: &[f64], s: Option<&Sample>| {
            eval(&p, ext, ins, params, s, 1).expect_err("fails")
        };
        assert_eq!(
            e(&[2], &ok, &[], None),
            InterpError::Extents {
                expected: 2,
                got: 1
            }
        );
        assert_eq!(
            e(&[2, 3], &[], &[], None),
            InterpError::Inputs {
                expected: 1,
                got: 0
            }
        );
        assert_eq!(
            e(&[2, 3], &ok, &[1.0], None),
            InterpError::Params {
                expected: 0,
                got: 1
            }
        );
        assert_eq!(
            e(&[2, 3], &[HostTensor::Int(&[0; 6])], &[], None),
            InterpError::InputKind {
                input: "x".into(),
                expected: Elem::Float
            }
        );
        assert_eq!(
            e(&[2, 4], &ok, &[], None),
            InterpError::InputLength {
                input: "x".into(),
                expected: 8,
                got: 6
            }
        );
        let s = |dim, values: Vec<usize>| Sample { dim, values };
        assert_eq!(
            e(&[2, 3], &ok, &[], Some(&s(1, vec![0]))),
            InterpError::NotSampleable { dim: "c".into() }
        );
        assert_eq!(
            e(&[2, 3], &ok, &[], Some(&s(5, vec![0]))),
            InterpError::NotSampleable { dim: "#5".into() }
        );
        assert_eq!(
            e(&[2, 3], &ok, &[], Some(&s(0, vec![1, 2]))),
            InterpError::SampleValue {
                dim: "r".into(),
                value: 2,
                extent: 2
            }
        );
        assert_eq!(
            e(&[usize::MAX, 3], &ok, &[], None),
            InterpError::TooLarge { tensor: "x".into() }
        );
        // Malformed programs: a forward load, an unbound axis, a missing parameter.
        let bad = |stmts: Vec<Stmt>| {
            let p = prog(&["i", "j"], vec![input("x", &[0, 1])], &[], stmts);
            eval(&p, &[2, 3], &ok, &[], None, 1).expect_err("fails")
        };
        for err in [
            bad(vec![out("y", &[0], v(0))]),
            bad(vec![out("y", &[0], x(0))]),
            bad(vec![out("y", &[0], Expr::Param(0))]),
            bad(vec![out("y", &[0, 0], c(1.0))]),
        ] {
            assert!(matches!(err, InterpError::Malformed { .. }), "{err}");
            assert!(err.to_string().starts_with("`y`: "), "{err}");
        }
        assert_eq!(
            InterpError::EmptyReduction {
                stmt: "m".into(),
                reduce: Reduce::Max
            }
            .to_string(),
            "`m`: max over no element is undefined"
        );
    }

    // ---- speed ---------------------------------------------------------------------------------------------

    /// Output elements per second of `program`, best of a few runs (the machine may be shared).
    fn rate(program: &Program, ext: &[usize], inputs: &[HostTensor], threads: usize) -> f64 {
        let elements: usize = program
            .outputs()
            .map(|(_, s)| Program::len_of(&s.axes, ext))
            .sum();
        (0..3)
            .map(|_| {
                let t = std::time::Instant::now();
                let r = eval(program, ext, inputs, &[], None, threads).expect("evaluates");
                std::hint::black_box(r);
                elements as f64 / t.elapsed().as_secs_f64()
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn speed() {
        // Release: the gate's sizes. Debug only exercises the path (it is ~30× slower, and no claim is made).
        let rows = if cfg!(debug_assertions) { 50 } else { 1000 };
        let cols = 4096;
        let xs = noise(rows * cols, 11, 8.0);
        let ins = [HostTensor::Float(&xs)];
        let softmax_rate = rate(&softmax(), &[rows, cols], &ins, 2);
        // gelu: 0.5 · x · (1 + erf(x · √½)).
        let gelu = prog(
            &["i", "j"],
            vec![input("x", &[0, 1])],
            &[],
            vec![out(
                "y",
                &[0, 1],
                mul(
                    mul(c(0.5), x(0)),
                    add(
                        c(1.0),
                        un(Unary::Erf, mul(x(0), c(std::f64::consts::FRAC_1_SQRT_2))),
                    ),
                ),
            )],
        );
        let map_rate = rate(&gelu, &[rows, cols], &ins, 2);
        let check = eval1(&gelu, &[rows, cols], &ins, &[]);
        assert!(close(
            check.values[7],
            crate::reference::gelu(xs[7] as f64),
            1e-15
        ));
        eprintln!(
            "interp speed ({rows}×{cols}, 2 threads): softmax {:.3e} elem/s, gelu map {:.3e} elem/s",
            softmax_rate, map_rate
        );
        #[cfg(not(debug_assertions))]
        {
            assert!(
                softmax_rate >= 1e7,
                "softmax reference at {softmax_rate:.3e} elem/s"
            );
            assert!(map_rate >= 1e7, "map reference at {map_rate:.3e} elem/s");
        }
    }
}
