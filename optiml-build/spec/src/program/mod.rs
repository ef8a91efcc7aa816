//! The typed program every tensor spec lowers to (the IR): named tensors indexed by named dimensions, pointwise
//! expressions, reductions over named dimensions, broadcasting by index, several statements with intermediates.
//!
//! Plain words ([`words`]) and index notation ([`notation`]) are two spellings of one [`Program`]; the float64
//! interpreter ([`interp`]) is the reference every kernel of a program is checked against.
//!
//! ```text
//! "softmax over the last axis"                                     (plain words)
//! "m[r] = max(c) x[r, c]; e[r, c] = exp(x[r, c] - m[r]);
//!  y[r, c] = e[r, c] / sum(c) e[r, c]"                             (index notation)
//!        └──────────────▶ Program { dims: [r, c], inputs: [x[r, c]], stmts: [m, e, y__sum, y] }
//! ```
//!
//! # The rules a program obeys (checked when it is built, relied on by every consumer)
//! - **An index variable is a dimension.** `x[r, c]` says x's first axis has the extent of dimension `r`. Every
//!   tensor is always indexed by the same variables in the same order (its [`TensorDecl::axes`] or
//!   [`Stmt::axes`]), so a load names only the tensor ([`Expr::Input`], [`Expr::Value`]). Tensors are dense and
//!   row-major in their axes' order: the last axis is contiguous.
//! - **Inputs** are the tensors read and never assigned, in order of first appearance. **Outputs** are the
//!   statements whose [`Stmt::output`] is set: those no later statement reads. Intermediates are read later.
//! - A statement's free variables (those of its expression outside any [`Expr::Reduce`] binding them) are a
//!   subset of its axes; an axis absent from the expression broadcasts. A reduction binds its variables inside
//!   its body only, where they shadow a statement axis of the same name (`y[r, c] = e[r, c] / sum(c) e[r, c]`:
//!   the sum runs over every `c` of the row, the division uses the element's own `c`); it does not bind one an
//!   enclosing reduction already binds. The parsers lift every reduction that is not a statement's whole right
//!   side into a statement of its own (`y__sum[r] = sum(c) e[r, c]`, names with `__` are reserved for them), so a
//!   parsed program never shadows; the interpreter accepts a hand-built one that does.
//! - [`Reduce::Argmax`] and [`Reduce::Argmin`] appear only as the whole expression of a statement whose
//!   [`Stmt::elem`] is an integer type; every other statement is [`Elem::Float`].
//! - A scan ([`Expr::Scan`]: `cumsum(c) x[r, c]`) appears only as the whole expression of a statement that has
//!   the scanned dimension as an axis, and its body holds no reduction or scan. It binds nothing: its body is
//!   evaluated at every position of the scanned dimension up to the element's own (or from it, reversed).
//! - A gather ([`Expr::Gather`]: `x[r, t[r]]`) reads an input with one axis set by an integer input's value
//!   instead of an index variable. That axis is not a free variable of the gather; the index input's axes are.
//!   The gathered tensor is read elsewhere with its index variables, which name the gathered axis's dimension.
//!   An index outside that dimension's extent reads NaN, in the interpreter and in every kernel.
//! - Arithmetic is f32 in kernels and f64 in the interpreter; [`Program::dtype`] is the storage type of every
//!   floating tensor, inputs and outputs alike (intermediates a kernel keeps on chip are f32).

pub mod interp;
pub mod notation;
pub mod words;

use crate::model::{DType, Dim, Precision};
use serde::{Deserialize, Serialize};

/// A tensor program: what a tensor spec computes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Program {
    /// The dimensions (index variables), in order of first appearance.
    pub dims: Vec<DimDecl>,
    /// The tensors the program reads, in order of first appearance.
    pub inputs: Vec<TensorDecl>,
    /// Run-time f32 scalar parameters (`s` in `y[i] = x[i] * s`), in order of first appearance.
    pub params: Vec<String>,
    /// The statements, in the order they are computed.
    pub stmts: Vec<Stmt>,
    /// Storage type of every floating tensor (inputs and outputs).
    pub dtype: DType,
    /// How products may round their operands: [`Precision::Tf32`] (the option `tf32`) lets the contractions of
    /// an f32 program (a matrix product, attention's two products) run on TF32 tensor cores, checked at TF32's
    /// tolerance. Only a program with such a product takes it ([`notation::has_product`]); an exact kernel is
    /// always a correct kernel of a `tf32` program.
    #[serde(default)]
    pub precision: Precision,
}

/// A dimension: an index variable and its extent.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DimDecl {
    /// Its name as written (`r`, `cols`).
    pub name: String,
    /// Given at run time, or fixed by the spec (`c=4096`).
    pub size: Dim,
}

/// An input tensor.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorDecl {
    /// Its name as written.
    pub name: String,
    /// Its axes, outermost first: indices into [`Program::dims`]. Empty for a scalar tensor.
    pub axes: Vec<usize>,
    /// Its element type.
    pub elem: Elem,
}

/// One statement: `name[axes] = expr`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stmt {
    /// The name of the tensor it defines.
    pub name: String,
    /// Its axes, outermost first: indices into [`Program::dims`]. Empty for a scalar result.
    pub axes: Vec<usize>,
    /// What each element is.
    pub expr: Expr,
    /// Its element type.
    pub elem: Elem,
    /// Whether it is an output of the program (no later statement reads it).
    pub output: bool,
}

/// Element types of tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Elem {
    /// The program's floating storage type ([`Program::dtype`]).
    Float,
    /// 64-bit signed integer (PyTorch's index type): argmax/argmin results.
    I64,
    /// 32-bit signed integer.
    I32,
    /// A boolean stored as one byte, 0 or 1 (PyTorch's `bool`): masks. Read as 0.0 or 1.0.
    Bool,
}

/// An expression, evaluated at one element of its statement (every dimension variable in scope has a value).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    /// A number (`1e-5`, `0.5`, `pi` after folding).
    Const(f64),
    /// A run-time scalar parameter: an index into [`Program::params`].
    Param(usize),
    /// An input tensor at the current values of its axes: an index into [`Program::inputs`].
    Input(usize),
    /// An earlier statement's tensor at the current values of its axes: an index into [`Program::stmts`].
    Value(usize),
    /// A function of one value.
    Unary(Unary, Box<Expr>),
    /// A function of two values.
    Binary(Binary, Box<Expr>, Box<Expr>),
    /// `where(cond, then, other)`: `then` where `cond` is non-zero, else `other`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A reduction of the body over every combination of the listed dimensions (indices into
    /// [`Program::dims`]).
    Reduce(Reduce, Vec<usize>, Box<Expr>),
    /// A running reduction of the body along one of the statement's axes ([`Scan`]): `cumsum(c) x[r, c]`.
    Scan(Scan, Box<Expr>),
    /// An input read at an index taken from data ([`Gather`]): the expression is the index, an integer input at
    /// the current values of its axes (`x[r, t[r]]`: `t[r]`).
    Gather(Gather, Box<Expr>),
}

/// Where a gather reads: input `input` at the current values of its axes, except the axis at position `axis`
/// of [`TensorDecl::axes`], which takes the index's value (cross-entropy's `x[r, t[r]]`: input `x`, axis 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Gather {
    /// The tensor read: an index into [`Program::inputs`].
    pub input: usize,
    /// The position in that input's axes that the index sets.
    pub axis: usize,
}

/// A running reduction (prefix scan) along one dimension: the element at position `i` folds the body's values
/// at positions `0..=i` in increasing order, or `i..n` in decreasing order when reversed; an exclusive scan
/// leaves out position `i` itself (its first element is the fold of nothing: 0 for a sum, 1 for a product).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scan {
    /// How values fold: [`Reduce::Sum`], [`Reduce::Prod`], [`Reduce::Max`] or [`Reduce::Min`].
    pub op: Reduce,
    /// The scanned dimension: an index into [`Program::dims`], and an axis of the statement.
    pub dim: usize,
    /// From the last position towards the first (`cumsum(x.flip(d), d).flip(d)`).
    pub reverse: bool,
    /// Each element leaves out its own position's value.
    pub exclusive: bool,
}

impl Scan {
    /// The operations a scan folds with.
    pub const OPS: [Reduce; 4] = [Reduce::Sum, Reduce::Prod, Reduce::Max, Reduce::Min];

    /// The name index notation spells it with: `cumsum`, `cumprod`, `cummax`, `cummin`.
    pub fn name(self) -> &'static str {
        match self.op {
            Reduce::Prod => "cumprod",
            Reduce::Max => "cummax",
            Reduce::Min => "cummin",
            _ => "cumsum",
        }
    }

    /// The value of a fold of nothing (an exclusive scan's first element).
    pub fn identity(self) -> f64 {
        match self.op {
            Reduce::Prod => 1.0,
            Reduce::Max => f64::NEG_INFINITY,
            Reduce::Min => f64::INFINITY,
            _ => 0.0,
        }
    }
}

// Programs are keys (hashed, compared); their constants are never NaN (the builder refuses one), so bitwise
// equality is equality.
impl Eq for Expr {}

impl std::hash::Hash for Expr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Expr::Const(v) => v.to_bits().hash(state),
            Expr::Param(i) | Expr::Input(i) | Expr::Value(i) => i.hash(state),
            Expr::Unary(op, a) => {
                op.hash(state);
                a.hash(state);
            }
            Expr::Binary(op, a, b) => {
                op.hash(state);
                a.hash(state);
                b.hash(state);
            }
            Expr::Select(c, a, b) => {
                c.hash(state);
                a.hash(state);
                b.hash(state);
            }
            Expr::Reduce(op, over, body) => {
                op.hash(state);
                over.hash(state);
                body.hash(state);
            }
            Expr::Scan(scan, body) => {
                scan.hash(state);
                body.hash(state);
            }
            Expr::Gather(g, index) => {
                g.hash(state);
                index.hash(state);
            }
        }
    }
}

/// Functions of one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Unary {
    /// `-v`.
    Neg,
    /// `e^v`.
    Exp,
    /// Natural logarithm.
    Log,
    /// `ln(1 + v)`, accurate near 0.
    Log1p,
    /// `e^v - 1`, accurate near 0.
    Expm1,
    /// Hyperbolic tangent.
    Tanh,
    /// The error function.
    Erf,
    /// Square root.
    Sqrt,
    /// `1 / sqrt(v)`.
    Rsqrt,
    /// `|v|`.
    Abs,
    /// `1 / (1 + e^-v)`, computed without overflow.
    Sigmoid,
}

/// Functions of two values. Comparisons give 1 or 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Binary {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// `a ^ b` (`pow(a, b)`).
    Pow,
    /// The larger (NaN if either is NaN).
    Max,
    /// The smaller (NaN if either is NaN).
    Min,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
}

/// Reductions over named dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Reduce {
    /// `Σ`.
    Sum,
    /// `Σ / count`.
    Mean,
    /// The largest.
    Max,
    /// The smallest.
    Min,
    /// `Π`.
    Prod,
    /// The row-major linear position, over the reduced dimensions, of the first largest value.
    Argmax,
    /// The row-major linear position of the first smallest value.
    Argmin,
}

impl Unary {
    /// The name index notation spells it with.
    pub fn name(self) -> &'static str {
        match self {
            Unary::Neg => "neg",
            Unary::Exp => "exp",
            Unary::Log => "log",
            Unary::Log1p => "log1p",
            Unary::Expm1 => "expm1",
            Unary::Tanh => "tanh",
            Unary::Erf => "erf",
            Unary::Sqrt => "sqrt",
            Unary::Rsqrt => "rsqrt",
            Unary::Abs => "abs",
            Unary::Sigmoid => "sigmoid",
        }
    }
}

impl Binary {
    /// The name index notation spells it with (operators as their symbol).
    pub fn name(self) -> &'static str {
        match self {
            Binary::Add => "+",
            Binary::Sub => "-",
            Binary::Mul => "*",
            Binary::Div => "/",
            Binary::Pow => "^",
            Binary::Max => "max",
            Binary::Min => "min",
            Binary::Lt => "<",
            Binary::Le => "<=",
            Binary::Gt => ">",
            Binary::Ge => ">=",
            Binary::Eq => "==",
            Binary::Ne => "!=",
        }
    }
}

impl Reduce {
    /// The name index notation spells it with.
    pub fn name(self) -> &'static str {
        match self {
            Reduce::Sum => "sum",
            Reduce::Mean => "mean",
            Reduce::Max => "max",
            Reduce::Min => "min",
            Reduce::Prod => "prod",
            Reduce::Argmax => "argmax",
            Reduce::Argmin => "argmin",
        }
    }

    /// Whether the result is an index rather than a value.
    pub fn is_arg(self) -> bool {
        matches!(self, Reduce::Argmax | Reduce::Argmin)
    }
}

impl Elem {
    /// Bytes per element, given the program's floating storage type.
    pub fn bytes(self, dtype: DType) -> usize {
        match self {
            Elem::Float => dtype.bytes(),
            Elem::I64 => 8,
            Elem::I32 => 4,
            Elem::Bool => 1,
        }
    }

    /// The Rust element type a buffer of it holds, last path segment (`f32`, `bf16`, `i64`).
    pub fn rust_type(self, dtype: DType) -> &'static str {
        match self {
            Elem::Float => dtype.rust_type(),
            Elem::I64 => "i64",
            Elem::I32 => "i32",
            Elem::Bool => "bool",
        }
    }
}

impl Program {
    /// The outputs, in statement order: `(statement index, statement)`.
    pub fn outputs(&self) -> impl Iterator<Item = (usize, &Stmt)> {
        self.stmts.iter().enumerate().filter(|(_, s)| s.output)
    }

    /// The extent of every dimension given the run-time values of the [`Dim::Runtime`] ones, in order.
    ///
    /// # Errors
    /// `runtime` does not hold exactly one value per run-time dimension.
    pub fn extents(&self, runtime: &[usize]) -> Result<Vec<usize>, String> {
        let wanted = self.dims.iter().filter(|d| d.size == Dim::Runtime).count();
        if runtime.len() != wanted {
            return Err(format!(
                "the program has {wanted} run-time dimensions, {} values were given",
                runtime.len()
            ));
        }
        let mut values = runtime.iter();
        Ok(self
            .dims
            .iter()
            .map(|d| match d.size {
                Dim::Fixed(v) => v as usize,
                Dim::Runtime => *values.next().expect("counted above"),
            })
            .collect())
    }

    /// The dimensions some reduction binds or some scan runs along, in order: the reduced lengths a kernel and
    /// its test plan care about, and the ones a sample must never restrict.
    pub fn reduced_dims(&self) -> Vec<usize> {
        fn walk(e: &Expr, out: &mut Vec<usize>) {
            match e {
                Expr::Const(_) | Expr::Param(_) | Expr::Input(_) | Expr::Value(_) => {}
                Expr::Unary(_, a) => walk(a, out),
                Expr::Binary(_, a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                Expr::Select(c, a, b) => {
                    walk(c, out);
                    walk(a, out);
                    walk(b, out);
                }
                Expr::Reduce(_, over, body) => {
                    out.extend(over);
                    walk(body, out);
                }
                Expr::Scan(scan, body) => {
                    out.push(scan.dim);
                    walk(body, out);
                }
                Expr::Gather(_, index) => walk(index, out),
            }
        }
        let mut out = Vec::new();
        for s in &self.stmts {
            walk(&s.expr, &mut out);
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The number of elements of a tensor with `axes`, given every dimension's extent.
    pub fn len_of(axes: &[usize], extents: &[usize]) -> usize {
        axes.iter().map(|&a| extents[a]).product()
    }
}
