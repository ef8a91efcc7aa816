//! Plain words naming a tensor operator → its [`Program`].
//!
//! Each operator writes its index notation as text and hands it to [`notation::parse`], so a phrase lowers to
//! exactly the program of its index form by construction; [`vocabulary`] lists every operator with an example
//! and that form.
//!
//! ```text
//! "softmax over the last axis"
//!   → m[r] = max(c) x[r, c]; e[r, c] = exp(x[r, c] - m[r]); y[r, c] = e[r, c] / sum(c) e[r, c]
//! "group norm, groups 8"
//!   → m[d0, g] = mean(k, d2, d3) x[d0, g, k, d2, d3]; … , g=8
//! ```
//!
//! # Names
//! - The input is `x` and the output `y`; a loss's targets are `t`. An affine weight is `w` and a bias `b`; the vector of `diag(a) @ B` is
//!   `a` (first, as in KernelBench's `forward(A, B)`) and the matrix `x`; a run-time scalar is `s`.
//!   Intermediates: `m` (a max or a mean), `e` (exponentials), `l` (log-sum-exp), `v` (a variance), `norm`.
//! - Pointwise maps are flat: one dimension `n` (the rank of the tensor does not change them, so a rank phrase is
//!   accepted and has no effect). Frobenius normalisation and reductions "over all elements" are flat too.
//! - An operator over the last axis of a 2-D tensor uses `r` (rows) and `c` (the reduced axis); any other axis or
//!   rank uses `d0 … d{R-1}`. Group norm splits the channel axis into `g` (the group, fixed by `groups 8` as
//!   `g=8`) and `k` (the channel within it): `x[d0, g, k, d2, d3]` is the same memory as `x[d0, c, d2, d3]`, and
//!   every statistic becomes a plain reduction over `k, d2, d3`.
//! - Dimensions are numbered in order of first appearance in the notation, and a kernel takes its run-time
//!   dimensions in that order: a reduction over a middle axis lists the kept axes first (`y[d0, d2] = sum(d1) …`
//!   takes `d0, d2, d1`), batch norm its channel axis first (`m[d1] = mean(d0, d2, d3) …`).
//!
//! # Axes and defaults
//! - "over the last axis", "along rows", "per row" mean the last axis; "along columns" dim 0 of a 2-D tensor;
//!   "over dim 1", "dim=1", "axis 1" (negative dims count from the end); "over the last 3 axes" (layer and RMS
//!   norm, sums); "over all elements" (reductions). The rank is "of a 3-D tensor", "3d", "rank 3".
//! - Without a rank, a tensor is 2-D (dims 0, 1, -1, -2), or one more than the axes layer norm normalises; a
//!   larger dim without a rank is ambiguous. Batch, instance and group norm take a 4-D (N, C, H, W) tensor
//!   unless told otherwise (`batchnorm1d` is 3-D, `batchnorm3d` 5-D).
//! - Softmax, log-softmax, L1/L2 normalisation, RMS norm and layer norm without an axis phrase work on the last
//!   axis of a 2-D tensor (F.normalize's default dim 1 is that axis). Sum, mean, max, min, argmax and argmin
//!   have no conventional default, so naming none is an ambiguity error that lists the readings.
//! - `keep dims` / `keepdim=True` is accepted by reductions and lowers to the same program: keeping a reduced
//!   axis of extent 1 changes the result's shape, not its memory.
//! - Constants follow PyTorch: leaky relu slope 0.01; elu alpha 1; hardtanh [-1, 1]; softplus beta 1,
//!   threshold 20; selu's α = 1.6732632423543772, λ = 1.0507009873554805; norms eps 1e-5, biased variance,
//!   batch statistics (training mode), no affine parameters unless asked ("with affine weight and bias": PyTorch's
//!   default weight 1 and bias 0 are the identity). RMS norm takes "with weight" only.
//! - A dtype word (`bf16`, `f16`, `f32` …) sets the program's dtype; "i32 indices" the argmax/argmin type.
//! - Attention ("scaled dot-product attention", "sdpa") takes 4-D `q`, `k`, `v` (`[b, h, positions, features]`,
//!   PyTorch's layout) unless given a rank: queries `i`, keys `j`, features `d` and `dv`; scores `s`, their row
//!   max `m`, exponentials `e`, output `y`. Its scale is a run-time `scale` (PyTorch's default `1/sqrt(d)` is
//!   the caller's to pass) unless the spec fixes one (`scale 0.125`).
//!
//! Texts with a `name = …` equation (other than `dim=1`-style arguments) or with matmul words are left to the
//! spec parser: [`lower`] answers `None` for them.

use super::{Program, notation};
use crate::error::SpecError;
use crate::model::DType;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Lowers a plain-words spec naming a tensor operator to its program. `None` when the text names no operator
/// of this vocabulary (the caller then reports its own error); `Some(Err)` when it names one but something is
/// wrong: an unknown argument phrase (the error names the closest phrasing that works), an argument the
/// operator does not take, a bad value, or an ambiguity (the error lists the readings).
pub fn lower(text: &str) -> Option<Result<Program, SpecError>> {
    let notation = index_form(text)?;
    Some(notation.and_then(|t| notation::parse(&t)))
}

/// Whether `word` (lower case) is a word of this vocabulary.
pub fn knows(word: &str) -> bool {
    vocab().words.contains(&word)
}

/// The vocabulary's word closest to `word`, when one is near enough to be a misspelling of it.
pub fn closest(word: &str) -> Option<String> {
    notation::closest(word, vocab().words.iter().copied()).map(str::to_string)
}

/// Every operator phrase of the vocabulary with an example spec and its index-notation form, for docs,
/// `explain` and tests.
pub fn vocabulary() -> Vec<(&'static str, &'static str, String)> {
    EXAMPLES
        .iter()
        .map(|(op, example)| {
            let form = match index_form(example) {
                Some(Ok(t)) => t,
                Some(Err(e)) => format!("error: {e}"),
                None => "error: not recognised".to_string(),
            };
            (*op, *example, form)
        })
        .collect()
}

const EXAMPLES: &[(&str, &str)] = &[
    ("matrix-scalar multiply", "matrix scalar multiplication"),
    ("diag(a) @ B", "diag(A) @ B"),
    ("diag(a) @ B", "scale each row of B by a vector"),
    ("relu", "relu"),
    ("leaky relu", "leaky relu, negative slope 0.01"),
    ("sigmoid", "sigmoid"),
    ("tanh", "tanh"),
    ("softmax", "softmax over the last axis"),
    ("softmax", "softmax over dim 1 of a 3-D tensor"),
    ("log softmax", "log-softmax, dim=1"),
    ("swish", "swish"),
    ("gelu", "gelu"),
    (
        "gelu (tanh approximation)",
        "gelu with the tanh approximation",
    ),
    ("gelu (tanh approximation)", "minGPT new gelu"),
    ("selu", "selu"),
    ("hardsigmoid", "hardsigmoid"),
    ("softplus", "softplus"),
    ("softsign", "softsign"),
    ("elu", "elu, alpha 1.0"),
    ("hardtanh", "hardtanh, min -1, max 1"),
    ("batch norm", "batch norm, training mode, eps 1e-5"),
    ("batch norm", "batchnorm2d with affine weight and bias"),
    ("instance norm", "instance norm"),
    ("group norm", "group norm, groups 8"),
    ("rms norm", "rms norm over dim 1 of a 4-D tensor, eps 1e-5"),
    ("rms norm", "rmsnorm over the last axis"),
    ("frobenius norm", "frobenius norm"),
    ("mse loss", "mse loss"),
    ("huber loss", "smooth l1 loss"),
    ("hinge loss", "hinge loss"),
    ("kl divergence", "kl divergence, batchmean"),
    ("triplet margin loss", "triplet margin loss, margin 1.0"),
    ("cross entropy loss", "cross entropy loss"),
    ("l1 norm", "l1 norm over dim 1"),
    ("l2 norm", "l2 norm along rows"),
    (
        "layer norm",
        "layer norm over the last 3 axes of a 4-D tensor with affine weight and bias",
    ),
    ("layer norm", "layernorm"),
    ("sum", "sum over dim 1 of a 3-D tensor, keep dims"),
    ("mean", "mean over dim 1 of a 3-D tensor"),
    ("max", "max reduction over dim 1 of a 3-D tensor"),
    ("min", "min over dim 1 of a 3-D tensor"),
    ("argmax", "argmax over dim 1 of a 3-D tensor"),
    ("argmin", "argmin over dim 1 of a 3-D tensor, i32 indices"),
    ("sum", "sum over all elements"),
    ("cumsum", "cumsum along dim 1"),
    ("cumsum", "reverse cumsum, dim=1"),
    ("cumsum", "exclusive cumulative sum along rows"),
    ("cumsum", "masked cumsum along dim 1"),
    ("cumprod", "cumprod over dim 1 of a 3-D tensor"),
    ("transpose", "transpose"),
    ("transpose", "batched transpose, bf16"),
    (
        "scaled dot-product attention",
        "scaled dot-product attention",
    ),
    (
        "scaled dot-product attention",
        "attention of a 3-D tensor, scale 0.125",
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    MatScalar,
    Diag,
    Relu,
    LeakyRelu,
    Sigmoid,
    Tanh,
    Softmax,
    LogSoftmax,
    Swish,
    Gelu,
    GeluTanh,
    Selu,
    HardSigmoid,
    Softplus,
    Softsign,
    Elu,
    HardTanh,
    BatchNorm,
    InstanceNorm,
    GroupNorm,
    RmsNorm,
    Frobenius,
    Mse,
    Huber,
    Hinge,
    KlDiv,
    Triplet,
    CrossEntropy,
    L1Norm,
    L2Norm,
    LayerNorm,
    Sum,
    Mean,
    Max,
    Min,
    Argmax,
    Argmin,
    Cumsum,
    Cumprod,
    Transpose,
    Attention,
}

/// Groups of argument phrases an operator may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Axis,
    Rank,
    KeepDim,
    Eps,
    Affine,
    Slope,
    Alpha,
    Approx,
    Groups,
    Bounds,
    SoftplusArgs,
    Indices,
    Mode,
    /// A scan's direction.
    Direction,
    /// Whether a scan's element includes its own position.
    Inclusion,
    /// A boolean mask multiplying a scan's input.
    Mask,
    /// How a loss reduces over the batch.
    Reduction,
    /// A margin loss's margin.
    Margin,
    /// Attention's score scale.
    Scale,
    /// Products may round their operands to TF32.
    Tf32,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::MatScalar => "matrix-scalar multiply",
            Op::Diag => "diag(a) @ B",
            Op::Relu => "relu",
            Op::LeakyRelu => "leaky relu",
            Op::Sigmoid => "sigmoid",
            Op::Tanh => "tanh",
            Op::Softmax => "softmax",
            Op::LogSoftmax => "log softmax",
            Op::Swish => "swish",
            Op::Gelu => "gelu",
            Op::GeluTanh => "gelu (tanh approximation)",
            Op::Selu => "selu",
            Op::HardSigmoid => "hardsigmoid",
            Op::Softplus => "softplus",
            Op::Softsign => "softsign",
            Op::Elu => "elu",
            Op::HardTanh => "hardtanh",
            Op::BatchNorm => "batch norm",
            Op::InstanceNorm => "instance norm",
            Op::GroupNorm => "group norm",
            Op::RmsNorm => "rms norm",
            Op::Frobenius => "frobenius norm",
            Op::Mse => "mse loss",
            Op::Huber => "huber loss",
            Op::Hinge => "hinge loss",
            Op::KlDiv => "kl divergence",
            Op::Triplet => "triplet margin loss",
            Op::CrossEntropy => "cross entropy loss",
            Op::L1Norm => "l1 norm",
            Op::L2Norm => "l2 norm",
            Op::LayerNorm => "layer norm",
            Op::Sum => "sum",
            Op::Mean => "mean",
            Op::Max => "max",
            Op::Min => "min",
            Op::Argmax => "argmax",
            Op::Argmin => "argmin",
            Op::Cumsum => "cumsum",
            Op::Cumprod => "cumprod",
            Op::Transpose => "transpose",
            Op::Attention => "scaled dot-product attention",
        }
    }

    /// The argument phrases it takes besides a dtype.
    fn takes(self) -> &'static [Class] {
        use Class::*;
        match self {
            Op::MatScalar
            | Op::Relu
            | Op::Sigmoid
            | Op::Tanh
            | Op::Swish
            | Op::GeluTanh
            | Op::Selu => &[Rank],
            Op::HardSigmoid | Op::Softsign | Op::Frobenius | Op::Mse | Op::Huber => &[Rank],
            Op::Gelu => &[Rank, Approx],
            Op::LeakyRelu => &[Rank, Slope],
            Op::Elu => &[Rank, Alpha],
            Op::HardTanh => &[Rank, Bounds],
            Op::Softplus => &[Rank, SoftplusArgs],
            Op::Diag | Op::Hinge | Op::CrossEntropy => &[],
            Op::KlDiv => &[Reduction],
            Op::Triplet => &[Margin],
            Op::Softmax | Op::LogSoftmax | Op::L1Norm | Op::L2Norm => &[Axis, Rank],
            Op::RmsNorm => &[Axis, Rank, Eps, Affine],
            Op::LayerNorm => &[Axis, Rank, Eps, Affine],
            Op::BatchNorm => &[Rank, Eps, Affine, Mode],
            Op::InstanceNorm => &[Rank, Eps, Affine],
            Op::GroupNorm => &[Rank, Eps, Affine, Groups],
            Op::Sum | Op::Mean | Op::Max | Op::Min => &[Axis, Rank, KeepDim],
            Op::Argmax | Op::Argmin => &[Axis, Rank, KeepDim, Indices],
            Op::Cumsum => &[Axis, Rank, Direction, Inclusion, Mask],
            Op::Cumprod => &[Axis, Rank, Direction, Inclusion],
            Op::Transpose => &[Rank],
            Op::Attention => &[Rank, Scale, Tf32],
        }
    }

    fn is_reduction(self) -> bool {
        matches!(
            self,
            Op::Sum | Op::Mean | Op::Max | Op::Min | Op::Argmax | Op::Argmin
        )
    }

    fn is_scan(self) -> bool {
        matches!(self, Op::Cumsum | Op::Cumprod)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Arg {
    Last,
    Dim,
    LastK,
    Rows,
    Cols,
    All,
    Rank,
    KeepDim,
    Eps,
    Affine,
    AffineWeight,
    NoAffine,
    Slope,
    Alpha,
    Approx,
    Groups,
    MinVal,
    MaxVal,
    Beta,
    Threshold,
    I32,
    I64,
    DType(DType),
    BadDType(&'static str),
    Training,
    Eval,
    Reverse,
    Exclusive,
    Inclusive,
    Masked,
    BatchMean,
    Margin,
    Scale,
    Tf32,
}

impl Arg {
    fn class(self) -> Option<Class> {
        Some(match self {
            Arg::Last | Arg::Dim | Arg::LastK | Arg::Rows | Arg::Cols | Arg::All => Class::Axis,
            Arg::Rank => Class::Rank,
            Arg::KeepDim => Class::KeepDim,
            Arg::Eps => Class::Eps,
            Arg::Affine | Arg::AffineWeight | Arg::NoAffine => Class::Affine,
            Arg::Slope => Class::Slope,
            Arg::Alpha => Class::Alpha,
            Arg::Approx => Class::Approx,
            Arg::Groups => Class::Groups,
            Arg::MinVal | Arg::MaxVal => Class::Bounds,
            Arg::Beta | Arg::Threshold => Class::SoftplusArgs,
            Arg::I32 | Arg::I64 => Class::Indices,
            Arg::Training | Arg::Eval => Class::Mode,
            Arg::Reverse => Class::Direction,
            Arg::Exclusive | Arg::Inclusive => Class::Inclusion,
            Arg::Masked => Class::Mask,
            Arg::BatchMean => Class::Reduction,
            Arg::Margin => Class::Margin,
            Arg::Scale => Class::Scale,
            Arg::Tf32 => Class::Tf32,
            Arg::DType(_) | Arg::BadDType(_) => return None,
        })
    }

    /// How the phrase is written, for messages.
    fn show(self) -> &'static str {
        match self {
            Arg::Last => "over the last axis",
            Arg::Dim => "over dim 1",
            Arg::LastK => "over the last 3 axes",
            Arg::Rows => "along rows",
            Arg::Cols => "along columns",
            Arg::All => "over all elements",
            Arg::Rank => "of a 3-D tensor",
            Arg::KeepDim => "keep dims",
            Arg::Eps => "eps 1e-5",
            Arg::Affine => "with affine weight and bias",
            Arg::AffineWeight => "with weight",
            Arg::NoAffine => "without affine",
            Arg::Slope => "negative slope 0.01",
            Arg::Alpha => "alpha 1.0",
            Arg::Approx => "tanh approximation",
            Arg::Groups => "groups 8",
            Arg::MinVal => "min -1",
            Arg::MaxVal => "max 1",
            Arg::Beta => "beta 1",
            Arg::Threshold => "threshold 20",
            Arg::I32 => "i32 indices",
            Arg::I64 => "i64 indices",
            Arg::DType(_) | Arg::BadDType(_) => "bf16",
            Arg::Training => "training mode",
            Arg::Eval => "eval mode",
            Arg::Reverse => "reverse",
            Arg::Exclusive => "exclusive",
            Arg::Inclusive => "inclusive",
            Arg::Masked => "masked",
            Arg::BatchMean => "batchmean",
            Arg::Margin => "margin 1.0",
            Arg::Scale => "scale 0.125",
            Arg::Tf32 => "tf32",
        }
    }
}

/// The phrases an operator takes, for messages.
fn accepts(op: Op) -> String {
    let mut out: Vec<&str> = Vec::new();
    for class in op.takes() {
        let shown: &[&str] = match class {
            Class::Axis if op.is_scan() => &["along dim 1", "along rows", "along columns"],
            Class::Axis if op.is_reduction() => &[
                "over the last axis",
                "over dim 1",
                "along rows",
                "over all elements",
            ],
            Class::Axis if matches!(op, Op::LayerNorm | Op::RmsNorm) => {
                &["over the last axis", "over dim 1", "over the last 3 axes"]
            }
            Class::Axis => &["over the last axis", "over dim 1", "along rows"],
            Class::Rank => &["of a 3-D tensor"],
            Class::KeepDim => &["keep dims"],
            Class::Eps => &["eps 1e-5"],
            Class::Affine if op == Op::RmsNorm => &["with weight"],
            Class::Affine => &["with affine weight and bias", "with weight"],
            Class::Slope => &["negative slope 0.01"],
            Class::Alpha => &["alpha 1.0"],
            Class::Approx => &["tanh approximation"],
            Class::Groups => &["groups 8"],
            Class::Bounds => &["min -1", "max 1"],
            Class::SoftplusArgs => &["beta 1", "threshold 20"],
            Class::Indices => &["i32 indices"],
            Class::Mode => &["training mode"],
            Class::Direction => &["reverse"],
            Class::Inclusion => &["exclusive"],
            Class::Mask => &["masked"],
            Class::Reduction => &["batchmean"],
            Class::Margin => &["margin 1.0"],
            Class::Scale => &["scale 0.125"],
            Class::Tf32 => &["tf32"],
        };
        out.extend(shown);
    }
    out.push("a dtype (f32, bf16, f16)");
    out.iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Meaning {
    /// An operator, and the rank its name implies (`batchnorm3d`).
    Op(Op, Option<usize>),
    Arg(Arg),
    Filler,
}

/// The vocabulary. Words are lower case; `#` is any number, `%` an integer; `@` and `*` are symbols.
/// At each place the longest phrase wins, so `tanh approximation` beats `tanh` and `min -1` beats `min`.
const PHRASES: &[(&str, Meaning)] = {
    use Meaning::{Arg as A, Filler as F, Op as O};
    &[
        ("matrix scalar multiplication", O(Op::MatScalar, None)),
        ("matrix scalar multiply", O(Op::MatScalar, None)),
        ("matrix scalar product", O(Op::MatScalar, None)),
        ("matrix scalar mul", O(Op::MatScalar, None)),
        ("matrix times scalar", O(Op::MatScalar, None)),
        ("matrix times a scalar", O(Op::MatScalar, None)),
        ("multiply a matrix by a scalar", O(Op::MatScalar, None)),
        ("diag a @ b", O(Op::Diag, None)),
        ("diag a * b", O(Op::Diag, None)),
        ("diag a times b", O(Op::Diag, None)),
        ("scale each row of b by a vector", O(Op::Diag, None)),
        ("scale the rows of b by a vector", O(Op::Diag, None)),
        ("scale rows by a vector", O(Op::Diag, None)),
        ("row scaling", O(Op::Diag, None)),
        ("relu", O(Op::Relu, None)),
        ("leaky relu", O(Op::LeakyRelu, None)),
        ("leakyrelu", O(Op::LeakyRelu, None)),
        ("sigmoid", O(Op::Sigmoid, None)),
        ("logistic", O(Op::Sigmoid, None)),
        ("tanh", O(Op::Tanh, None)),
        ("softmax", O(Op::Softmax, None)),
        ("log softmax", O(Op::LogSoftmax, None)),
        ("logsoftmax", O(Op::LogSoftmax, None)),
        ("swish", O(Op::Swish, None)),
        ("silu", O(Op::Swish, None)),
        ("gelu", O(Op::Gelu, None)),
        ("exact gelu", O(Op::Gelu, None)),
        ("gelu exact", O(Op::Gelu, None)),
        ("erf gelu", O(Op::Gelu, None)),
        ("gelu tanh", O(Op::GeluTanh, None)),
        ("tanh gelu", O(Op::GeluTanh, None)),
        ("new gelu", O(Op::GeluTanh, None)),
        ("newgelu", O(Op::GeluTanh, None)),
        ("gelu new", O(Op::GeluTanh, None)),
        ("mingpt new gelu", O(Op::GeluTanh, None)),
        ("mingpt newgelu", O(Op::GeluTanh, None)),
        ("mingpt gelu", O(Op::GeluTanh, None)),
        ("selu", O(Op::Selu, None)),
        ("hardsigmoid", O(Op::HardSigmoid, None)),
        ("hard sigmoid", O(Op::HardSigmoid, None)),
        ("softplus", O(Op::Softplus, None)),
        ("soft plus", O(Op::Softplus, None)),
        ("softsign", O(Op::Softsign, None)),
        ("soft sign", O(Op::Softsign, None)),
        ("elu", O(Op::Elu, None)),
        ("hardtanh", O(Op::HardTanh, None)),
        ("hard tanh", O(Op::HardTanh, None)),
        ("batch norm", O(Op::BatchNorm, None)),
        ("batchnorm", O(Op::BatchNorm, None)),
        ("batch normalization", O(Op::BatchNorm, None)),
        ("batch normalisation", O(Op::BatchNorm, None)),
        ("batchnorm1d", O(Op::BatchNorm, Some(3))),
        ("batchnorm2d", O(Op::BatchNorm, Some(4))),
        ("batchnorm3d", O(Op::BatchNorm, Some(5))),
        ("instance norm", O(Op::InstanceNorm, None)),
        ("instancenorm", O(Op::InstanceNorm, None)),
        ("instance normalization", O(Op::InstanceNorm, None)),
        ("instance normalisation", O(Op::InstanceNorm, None)),
        ("instancenorm1d", O(Op::InstanceNorm, Some(3))),
        ("instancenorm2d", O(Op::InstanceNorm, Some(4))),
        ("instancenorm3d", O(Op::InstanceNorm, Some(5))),
        ("group norm", O(Op::GroupNorm, None)),
        ("groupnorm", O(Op::GroupNorm, None)),
        ("group normalization", O(Op::GroupNorm, None)),
        ("group normalisation", O(Op::GroupNorm, None)),
        ("rms norm", O(Op::RmsNorm, None)),
        ("rmsnorm", O(Op::RmsNorm, None)),
        ("rms normalization", O(Op::RmsNorm, None)),
        ("rms normalisation", O(Op::RmsNorm, None)),
        ("root mean square norm", O(Op::RmsNorm, None)),
        ("root mean square normalization", O(Op::RmsNorm, None)),
        ("frobenius norm", O(Op::Frobenius, None)),
        ("frobenius normalization", O(Op::Frobenius, None)),
        ("frobenius normalisation", O(Op::Frobenius, None)),
        ("frobenius normalize", O(Op::Frobenius, None)),
        ("mse loss", O(Op::Mse, None)),
        ("mseloss", O(Op::Mse, None)),
        ("mse", O(Op::Mse, None)),
        ("mean squared error", O(Op::Mse, None)),
        ("mean squared error loss", O(Op::Mse, None)),
        ("mean square error", O(Op::Mse, None)),
        ("huber loss", O(Op::Huber, None)),
        ("huberloss", O(Op::Huber, None)),
        ("smooth l1 loss", O(Op::Huber, None)),
        ("smoothl1loss", O(Op::Huber, None)),
        ("smooth l1", O(Op::Huber, None)),
        ("hinge loss", O(Op::Hinge, None)),
        ("hingeloss", O(Op::Hinge, None)),
        ("kl divergence", O(Op::KlDiv, None)),
        ("kl divergence loss", O(Op::KlDiv, None)),
        ("kl div", O(Op::KlDiv, None)),
        ("kl div loss", O(Op::KlDiv, None)),
        ("kldivloss", O(Op::KlDiv, None)),
        ("kullback leibler divergence", O(Op::KlDiv, None)),
        ("triplet margin loss", O(Op::Triplet, None)),
        ("tripletmarginloss", O(Op::Triplet, None)),
        ("triplet loss", O(Op::Triplet, None)),
        ("cross entropy", O(Op::CrossEntropy, None)),
        ("cross entropy loss", O(Op::CrossEntropy, None)),
        ("cross-entropy", O(Op::CrossEntropy, None)),
        ("cross-entropy loss", O(Op::CrossEntropy, None)),
        ("crossentropyloss", O(Op::CrossEntropy, None)),
        ("softmax cross entropy", O(Op::CrossEntropy, None)),
        ("transpose", O(Op::Transpose, None)),
        ("transposed copy", O(Op::Transpose, None)),
        ("matrix transpose", O(Op::Transpose, None)),
        ("transpose the last two axes", O(Op::Transpose, None)),
        ("swap the last two axes", O(Op::Transpose, None)),
        ("batched transpose", O(Op::Transpose, Some(3))),
        ("batch transpose", O(Op::Transpose, Some(3))),
        ("batched matrix transpose", O(Op::Transpose, Some(3))),
        ("scaled dot product attention", O(Op::Attention, None)),
        ("scaled dot-product attention", O(Op::Attention, None)),
        ("dot product attention", O(Op::Attention, None)),
        ("dot-product attention", O(Op::Attention, None)),
        ("scaled_dot_product_attention", O(Op::Attention, None)),
        ("sdpa", O(Op::Attention, None)),
        ("attention", O(Op::Attention, None)),
        ("softmax attention", O(Op::Attention, None)),
        ("self attention", O(Op::Attention, None)),
        ("self-attention", O(Op::Attention, None)),
        ("scale #", A(Arg::Scale)),
        ("l1 norm", O(Op::L1Norm, None)),
        ("l1norm", O(Op::L1Norm, None)),
        ("l1 normalization", O(Op::L1Norm, None)),
        ("l1 normalisation", O(Op::L1Norm, None)),
        ("l1 normalize", O(Op::L1Norm, None)),
        ("l2 norm", O(Op::L2Norm, None)),
        ("l2norm", O(Op::L2Norm, None)),
        ("l2 normalization", O(Op::L2Norm, None)),
        ("l2 normalisation", O(Op::L2Norm, None)),
        ("l2 normalize", O(Op::L2Norm, None)),
        ("layer norm", O(Op::LayerNorm, None)),
        ("layernorm", O(Op::LayerNorm, None)),
        ("layer normalization", O(Op::LayerNorm, None)),
        ("layer normalisation", O(Op::LayerNorm, None)),
        ("sum", O(Op::Sum, None)),
        ("mean", O(Op::Mean, None)),
        ("average", O(Op::Mean, None)),
        ("avg", O(Op::Mean, None)),
        ("max", O(Op::Max, None)),
        ("maximum", O(Op::Max, None)),
        ("min", O(Op::Min, None)),
        ("minimum", O(Op::Min, None)),
        ("argmax", O(Op::Argmax, None)),
        ("arg max", O(Op::Argmax, None)),
        ("argmin", O(Op::Argmin, None)),
        ("arg min", O(Op::Argmin, None)),
        ("cumsum", O(Op::Cumsum, None)),
        ("cum sum", O(Op::Cumsum, None)),
        ("cumulative sum", O(Op::Cumsum, None)),
        ("prefix sum", O(Op::Cumsum, None)),
        ("running sum", O(Op::Cumsum, None)),
        ("cumprod", O(Op::Cumprod, None)),
        ("cum prod", O(Op::Cumprod, None)),
        ("cumulative product", O(Op::Cumprod, None)),
        ("prefix product", O(Op::Cumprod, None)),
        ("running product", O(Op::Cumprod, None)),
        ("reverse", A(Arg::Reverse)),
        ("reversed", A(Arg::Reverse)),
        ("backwards", A(Arg::Reverse)),
        ("backward", A(Arg::Reverse)),
        ("flipped", A(Arg::Reverse)),
        ("exclusive", A(Arg::Exclusive)),
        ("inclusive", A(Arg::Inclusive)),
        ("batchmean", A(Arg::BatchMean)),
        ("batch mean", A(Arg::BatchMean)),
        ("reduction batchmean", A(Arg::BatchMean)),
        ("margin #", A(Arg::Margin)),
        ("masked", A(Arg::Masked)),
        ("mask", A(Arg::Masked)),
        ("boolean mask", A(Arg::Masked)),
        ("bool mask", A(Arg::Masked)),
        // Axes.
        ("last axis", A(Arg::Last)),
        ("last dim", A(Arg::Last)),
        ("last dimension", A(Arg::Last)),
        ("final axis", A(Arg::Last)),
        ("innermost axis", A(Arg::Last)),
        ("dim %", A(Arg::Dim)),
        ("dimension %", A(Arg::Dim)),
        ("axis %", A(Arg::Dim)),
        ("last % axes", A(Arg::LastK)),
        ("last % dims", A(Arg::LastK)),
        ("last % dimensions", A(Arg::LastK)),
        ("rows", A(Arg::Rows)),
        ("row", A(Arg::Rows)),
        ("rowwise", A(Arg::Rows)),
        ("row wise", A(Arg::Rows)),
        ("columns", A(Arg::Cols)),
        ("column", A(Arg::Cols)),
        ("cols", A(Arg::Cols)),
        ("columnwise", A(Arg::Cols)),
        ("column wise", A(Arg::Cols)),
        ("all elements", A(Arg::All)),
        ("all axes", A(Arg::All)),
        ("all dims", A(Arg::All)),
        ("all dimensions", A(Arg::All)),
        ("everything", A(Arg::All)),
        // Rank.
        ("% d", A(Arg::Rank)),
        ("rank %", A(Arg::Rank)),
        ("% dimensional", A(Arg::Rank)),
        // Other arguments.
        ("keep dims", A(Arg::KeepDim)),
        ("keep dim", A(Arg::KeepDim)),
        ("keep dimensions", A(Arg::KeepDim)),
        ("keepdim", A(Arg::KeepDim)),
        ("keepdims", A(Arg::KeepDim)),
        ("keepdim true", A(Arg::KeepDim)),
        ("keepdims true", A(Arg::KeepDim)),
        ("keepdim false", A(Arg::KeepDim)),
        ("keepdims false", A(Arg::KeepDim)),
        ("eps #", A(Arg::Eps)),
        ("epsilon #", A(Arg::Eps)),
        ("affine weight and bias", A(Arg::Affine)),
        ("weight and bias", A(Arg::Affine)),
        ("affine", A(Arg::Affine)),
        ("affine true", A(Arg::Affine)),
        ("elementwise affine", A(Arg::Affine)),
        ("elementwise affine true", A(Arg::Affine)),
        ("weight", A(Arg::AffineWeight)),
        ("affine weight", A(Arg::AffineWeight)),
        ("weight only", A(Arg::AffineWeight)),
        ("no affine", A(Arg::NoAffine)),
        ("without affine", A(Arg::NoAffine)),
        ("affine false", A(Arg::NoAffine)),
        ("elementwise affine false", A(Arg::NoAffine)),
        ("negative slope #", A(Arg::Slope)),
        ("slope #", A(Arg::Slope)),
        ("alpha #", A(Arg::Alpha)),
        ("tanh approximation", A(Arg::Approx)),
        ("approximate tanh", A(Arg::Approx)),
        ("tanh approximate", A(Arg::Approx)),
        ("approximation tanh", A(Arg::Approx)),
        ("groups %", A(Arg::Groups)),
        ("% groups", A(Arg::Groups)),
        ("num groups %", A(Arg::Groups)),
        ("number of groups %", A(Arg::Groups)),
        ("min #", A(Arg::MinVal)),
        ("min val #", A(Arg::MinVal)),
        ("min value #", A(Arg::MinVal)),
        ("max #", A(Arg::MaxVal)),
        ("max val #", A(Arg::MaxVal)),
        ("max value #", A(Arg::MaxVal)),
        ("beta #", A(Arg::Beta)),
        ("threshold #", A(Arg::Threshold)),
        ("i32 indices", A(Arg::I32)),
        ("int32 indices", A(Arg::I32)),
        ("i64 indices", A(Arg::I64)),
        ("int64 indices", A(Arg::I64)),
        ("training", A(Arg::Training)),
        ("training mode", A(Arg::Training)),
        ("train mode", A(Arg::Training)),
        ("batch statistics", A(Arg::Training)),
        ("batch stats", A(Arg::Training)),
        ("eval", A(Arg::Eval)),
        ("eval mode", A(Arg::Eval)),
        ("evaluation mode", A(Arg::Eval)),
        ("inference", A(Arg::Eval)),
        ("inference mode", A(Arg::Eval)),
        ("running statistics", A(Arg::Eval)),
        ("running stats", A(Arg::Eval)),
        ("tf32", A(Arg::Tf32)),
        ("tf32 allowed", A(Arg::Tf32)),
        ("allow tf32", A(Arg::Tf32)),
        ("tensor float 32", A(Arg::Tf32)),
        ("f32", A(Arg::DType(DType::F32))),
        ("fp32", A(Arg::DType(DType::F32))),
        ("float32", A(Arg::DType(DType::F32))),
        ("float", A(Arg::DType(DType::F32))),
        ("bf16", A(Arg::DType(DType::Bf16))),
        ("bfloat16", A(Arg::DType(DType::Bf16))),
        ("bfloat", A(Arg::DType(DType::Bf16))),
        ("f16", A(Arg::DType(DType::F16))),
        ("fp16", A(Arg::DType(DType::F16))),
        ("float16", A(Arg::DType(DType::F16))),
        ("half", A(Arg::DType(DType::F16))),
        ("f64", A(Arg::BadDType("f64"))),
        ("fp64", A(Arg::BadDType("f64"))),
        ("float64", A(Arg::BadDType("f64"))),
        ("double", A(Arg::BadDType("f64"))),
        ("int8", A(Arg::BadDType("i8"))),
        ("fp8", A(Arg::BadDType("fp8"))),
        // Words that add nothing.
        ("a", F),
        ("an", F),
        ("the", F),
        ("of", F),
        ("over", F),
        ("along", F),
        ("across", F),
        ("on", F),
        ("per", F),
        ("each", F),
        ("every", F),
        ("with", F),
        ("and", F),
        ("by", F),
        ("in", F),
        ("for", F),
        ("to", F),
        ("tensor", F),
        ("input", F),
        ("matrix", F),
        ("kernel", F),
        ("op", F),
        ("operation", F),
        ("operator", F),
        ("function", F),
        ("activation", F),
        ("layer", F),
        ("reduction", F),
        ("reduce", F),
        ("elementwise", F),
        ("element wise", F),
        ("pointwise", F),
        ("map", F),
        ("unary", F),
        ("apply", F),
        ("applied", F),
        ("mode", F),
        ("default", F),
        ("torch", F),
        ("nn", F),
        ("f", F),
        ("functional", F),
        ("x", F),
        ("true", F),
    ]
};

/// Words that belong to the matmul family's vocabulary: a text with them is not ours to lower.
const FOREIGN: &[&str] = &[
    "matmul", "matmuls", "gemm", "gemms", "sgemm", "bgemm", "bmm", "mm", "batched", "epilogue",
    "einsum",
];

/// What an equation's left side may be in our phrases (`dim=1`, `eps=1e-5`, `negative_slope=0.2`).
const KEYS: &[&str] = &[
    "dim",
    "dims",
    "axis",
    "dimension",
    "eps",
    "epsilon",
    "keepdim",
    "keepdims",
    "slope",
    "alpha",
    "approximate",
    "groups",
    "val",
    "value",
    "min",
    "max",
    "beta",
    "threshold",
    "margin",
    "reduction",
    "affine",
    "rank",
];

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Num(f64),
    Sym(char),
}

/// A token and where it is in the lower-cased characters of the text.
#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    span: (usize, usize),
}

/// Tokens and the characters they index.
struct Tokens {
    toks: Vec<Token>,
    chars: Vec<char>,
}

impl Tokens {
    fn text(&self, k: usize) -> String {
        let (a, b) = self.toks[k].span;
        self.chars[a..b].iter().collect()
    }
}

/// Splits lower-cased text into words, numbers and the symbols `@ *`; `None` when it is an equation or a
/// matmul spec, which are not plain words of this vocabulary.
fn tokenize(text: &str) -> Option<Tokens> {
    let text = text.to_lowercase();
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<Token> = Vec::new();
    let mut i = 0;
    let is_word = |c: char| c.is_ascii_alphanumeric();
    while i < chars.len() {
        let c = chars[i];
        let prev = if i > 0 { Some(chars[i - 1]) } else { None };
        let digit_at = |k: usize| chars.get(k).is_some_and(|c| c.is_ascii_digit());
        let signed = (c == '-' || c == '+')
            && !prev.is_some_and(is_word)
            && (digit_at(i + 1) || (chars.get(i + 1) == Some(&'.') && digit_at(i + 2)));
        if c.is_ascii_digit() || (c == '.' && digit_at(i + 1)) || signed {
            let start = i;
            i += 1;
            let mut dot = c == '.';
            let mut exp = false;
            while i < chars.len() {
                let d = chars[i];
                if d.is_ascii_digit() {
                    i += 1;
                } else if d == '.' && !dot && !exp && digit_at(i + 1) {
                    dot = true;
                    i += 1;
                } else if d == '.'
                    && !dot
                    && !exp
                    && !chars.get(i + 1).is_some_and(|c| c.is_alphanumeric())
                {
                    // `1.` (PyTorch's `min_val=-1.`)
                    dot = true;
                    i += 1;
                } else if d == 'e'
                    && !exp
                    && (digit_at(i + 1)
                        || (matches!(chars.get(i + 1), Some('-' | '+')) && digit_at(i + 2)))
                {
                    exp = true;
                    i += if digit_at(i + 1) { 1 } else { 2 };
                } else {
                    break;
                }
            }
            let literal: String = chars[start..i].iter().collect();
            let tok = match literal.parse::<f64>() {
                Ok(v) if v.is_finite() => Tok::Num(v),
                _ => Tok::Sym('#'),
            };
            out.push(Token {
                tok,
                span: (start, i),
            });
            continue;
        }
        if c.is_ascii_alphabetic() {
            let start = i;
            while i < chars.len() && is_word(chars[i]) {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Word(chars[start..i].iter().collect()),
                span: (start, i),
            });
            continue;
        }
        match c {
            '=' => {
                // `y = relu(x)` is an equation for the spec parser; `dim=1` is one of our arguments.
                let key = match out.last() {
                    Some(Token {
                        tok: Tok::Word(w), ..
                    }) => KEYS.contains(&w.as_str()),
                    _ => false,
                };
                if !key {
                    return None;
                }
            }
            '@' | '*' | '·' | '×' => out.push(Token {
                tok: Tok::Sym(if c == '@' { '@' } else { '*' }),
                span: (i, i + 1),
            }),
            c if c.is_whitespace() => {}
            '-' | '_' | ',' | ';' | ':' | '(' | ')' | '\'' | '"' | '.' | '–' => {}
            c => out.push(Token {
                tok: Tok::Sym(c),
                span: (i, i + 1),
            }),
        }
        i += 1;
    }
    let word = |k: usize| match out.get(k) {
        Some(Token {
            tok: Tok::Word(w), ..
        }) => w.as_str(),
        _ => "",
    };
    for (k, t) in out.iter().enumerate() {
        let Tok::Word(w) = &t.tok else { continue };
        // "batched" is the matmul vocabulary's, except in a batched transpose.
        let batched_transpose = w == "batched" && matches!(word(k + 1), "transpose" | "matrix");
        if (FOREIGN.contains(&w.as_str()) && !batched_transpose)
            || (w == "matrix"
                && matches!(
                    word(k + 1),
                    "multiply"
                        | "multiplication"
                        | "multiplications"
                        | "product"
                        | "products"
                        | "mul"
                ))
        {
            return None;
        }
    }
    Some(Tokens { toks: out, chars })
}

/// An element of a phrase.
#[derive(Clone, Debug, PartialEq)]
enum P {
    Word(&'static str),
    Sym(char),
    Num,
    Int,
}

struct Vocab {
    phrases: Vec<(Vec<P>, Meaning)>,
    /// Phrases by their first element: a word, `#` for numbers, or the symbol.
    by_first: HashMap<String, Vec<usize>>,
    /// Every word of the vocabulary, for "did you mean".
    words: Vec<&'static str>,
}

fn vocab() -> &'static Vocab {
    static VOCAB: OnceLock<Vocab> = OnceLock::new();
    VOCAB.get_or_init(|| {
        let mut phrases = Vec::new();
        let mut by_first: HashMap<String, Vec<usize>> = HashMap::new();
        let mut words = Vec::new();
        for (text, meaning) in PHRASES {
            let elems: Vec<P> = text
                .split(' ')
                .map(|w| match w {
                    "#" => P::Num,
                    "%" => P::Int,
                    "@" => P::Sym('@'),
                    "*" => P::Sym('*'),
                    w => P::Word(w),
                })
                .collect();
            let key = match &elems[0] {
                P::Word(w) => (*w).to_string(),
                P::Sym(c) => c.to_string(),
                P::Num | P::Int => "#".to_string(),
            };
            by_first.entry(key).or_default().push(phrases.len());
            for e in &elems {
                if let P::Word(w) = e
                    && w.len() > 1
                    && !words.contains(w)
                {
                    words.push(*w);
                }
            }
            phrases.push((elems, *meaning));
        }
        Vocab {
            phrases,
            by_first,
            words,
        }
    })
}

/// The numbers a phrase matched at `at`, if it matches.
fn matches(phrase: &[P], toks: &[Token], at: usize) -> Option<Vec<f64>> {
    let mut numbers = Vec::new();
    for (k, p) in phrase.iter().enumerate() {
        let t = &toks.get(at + k)?.tok;
        match (p, t) {
            (P::Word(w), Tok::Word(t)) if w == t => {}
            (P::Sym(c), Tok::Sym(t)) if c == t => {}
            (P::Num, Tok::Num(v)) => numbers.push(*v),
            (P::Int, Tok::Num(v)) if v.fract() == 0.0 && v.abs() < 1e9 => numbers.push(*v),
            _ => return None,
        }
    }
    Some(numbers)
}

/// The notation a plain-words spec lowers to.
fn index_form(text: &str) -> Option<Result<String, SpecError>> {
    let tokens = tokenize(text)?;
    let toks = &tokens.toks;
    let vocab = vocab();
    let mut found: Vec<(Meaning, Vec<f64>, String)> = Vec::new();
    let mut unknown: Vec<usize> = Vec::new();
    let mut i = 0;
    let mut buf = [0u8; 4];
    while i < toks.len() {
        let key: &str = match &toks[i].tok {
            Tok::Word(w) => w,
            Tok::Num(_) => "#",
            Tok::Sym(c) => c.encode_utf8(&mut buf),
        };
        let mut best: Option<(usize, Meaning, Vec<f64>)> = None;
        for &p in vocab.by_first.get(key).into_iter().flatten() {
            let (phrase, meaning) = &vocab.phrases[p];
            if let Some(numbers) = matches(phrase, toks, i)
                && best.as_ref().is_none_or(|(len, _, _)| phrase.len() > *len)
            {
                best = Some((phrase.len(), *meaning, numbers));
            }
        }
        match best {
            Some((len, meaning, numbers)) => {
                if meaning != Meaning::Filler {
                    let said: Vec<String> = (i..i + len).map(|k| tokens.text(k)).collect();
                    found.push((meaning, numbers, said.join(" ")));
                }
                i += len;
            }
            None => {
                unknown.push(i);
                i += 1;
            }
        }
    }
    let mut ops: Vec<(Op, Option<usize>, &str)> = Vec::new();
    for (m, _, said) in &found {
        if let Meaning::Op(op, rank) = m
            && !ops.iter().any(|(o, _, _)| o == op)
        {
            ops.push((*op, *rank, said));
        }
    }
    let (op, implied_rank, _) = *ops.first()?;
    if ops.len() > 1 {
        let names: Vec<String> = ops.iter().map(|(_, _, s)| format!("`{s}`")).collect();
        return Some(Err(SpecError::Ambiguous {
            what: format!(
                "the spec names {} operators: {}",
                ops.len(),
                names.join(", ")
            ),
            hint: "a plain-words spec names one operator; write a fused program in index notation"
                .into(),
        }));
    }
    if let Some(&first) = unknown.first() {
        // A few words are enough to find the place in the text.
        let mut phrase: Vec<String> = unknown.iter().take(8).map(|&k| tokens.text(k)).collect();
        if unknown.len() > 8 {
            phrase.push("…".into());
        }
        let closest = match &toks[first].tok {
            Tok::Word(w) => suggestion(w, op),
            _ => None,
        };
        return Some(Err(SpecError::UnknownPhrase {
            operator: op.name(),
            phrase: phrase.join(" "),
            closest,
            accepts: accepts(op),
        }));
    }
    Some(build(op, implied_rank, &found))
}

/// The phrase holding the vocabulary word closest to `word`, preferring phrases `op` takes.
fn suggestion(word: &str, op: Op) -> Option<String> {
    let vocab = vocab();
    let best = notation::closest(word, vocab.words.iter().copied())?;
    let holds = |(phrase, _): &&(Vec<P>, Meaning)| phrase.contains(&P::Word(best));
    let takes = |m: &Meaning| match m {
        Meaning::Arg(a) => a.class().is_none_or(|c| op.takes().contains(&c)),
        _ => false,
    };
    let chosen = vocab
        .phrases
        .iter()
        .filter(holds)
        .find(|(_, m)| takes(m))
        .or_else(|| vocab.phrases.iter().find(holds))?;
    Some(match chosen.1 {
        Meaning::Arg(a) => a.show().to_string(),
        Meaning::Op(o, _) => o.name().to_string(),
        Meaning::Filler => best.to_string(),
    })
}

/// The arguments a spec gave, checked against its operator.
#[derive(Default)]
struct Args {
    axis: Option<(Arg, i64, String)>,
    rank: Option<(usize, String)>,
    eps: Option<f64>,
    affine: Option<Arg>,
    slope: Option<f64>,
    alpha: Option<f64>,
    approx: bool,
    groups: Option<(i64, String)>,
    min: Option<f64>,
    max: Option<f64>,
    beta: Option<f64>,
    threshold: Option<f64>,
    indices: Option<Arg>,
    dtype: Option<DType>,
    reverse: bool,
    exclusive: bool,
    masked: bool,
    margin: Option<f64>,
    scale: Option<f64>,
    /// The phrase that allowed TF32, if one did.
    tf32: Option<String>,
}

fn build(
    op: Op,
    implied_rank: Option<usize>,
    found: &[(Meaning, Vec<f64>, String)],
) -> Result<String, SpecError> {
    let name = op.name();
    let bad = |phrase: &str, reason: String| SpecError::BadArgument {
        operator: name,
        phrase: phrase.to_string(),
        reason,
    };
    let mut a = Args::default();
    // One entry per setting, so repeating a phrase costs nothing and a long text stays linear.
    let mut seen: Vec<((Class, &str), &str)> = Vec::new();
    for (meaning, numbers, said) in found {
        let Meaning::Arg(arg) = meaning else { continue };
        let value = numbers.first().copied().unwrap_or(0.0);
        if let Arg::BadDType(d) = arg {
            return Err(SpecError::Unsupported {
                what: format!("dtype `{d}` (from `{said}`)"),
                hint: "f32, bf16 and f16 kernels are generated so far".into(),
            });
        }
        if let Arg::DType(d) = arg {
            if a.dtype.is_some_and(|e| e != *d) {
                return Err(bad(said, "a second, different dtype".into()));
            }
            a.dtype = Some(*d);
            continue;
        }
        let Some(class) = arg.class() else { continue };
        if !op.takes().contains(&class) {
            return Err(SpecError::NotForFamily {
                word: said.clone(),
                family: name,
            });
        }
        // Two phrases for one setting (`over dim 1 … over the last axis`) contradict each other; the two bounds
        // of hardtanh and the two softplus numbers are different settings.
        let setting = match class {
            Class::Bounds | Class::SoftplusArgs => (class, arg.show()),
            _ => (class, ""),
        };
        match seen.iter().find(|s| s.0 == setting) {
            Some((_, first)) if *first != said.as_str() => {
                return Err(bad(said, format!("it contradicts `{first}`; say it once")));
            }
            Some(_) => continue,
            None => seen.push((setting, said.as_str())),
        }
        match arg {
            Arg::Last | Arg::Rows | Arg::Cols | Arg::All => a.axis = Some((*arg, 0, said.clone())),
            Arg::Dim | Arg::LastK => a.axis = Some((*arg, value as i64, said.clone())),
            Arg::Rank => {
                if !(1.0..=8.0).contains(&value) {
                    return Err(bad(said, "the rank must be between 1 and 8".into()));
                }
                a.rank = Some((value as usize, said.clone()));
            }
            Arg::KeepDim | Arg::Training => {}
            Arg::Eval => {
                return Err(SpecError::Unsupported {
                    what: format!("{name} in eval mode (running statistics)"),
                    hint: "normalising with given statistics is a pointwise program: write it in index notation, \
                           as in `y[n, c, h, w] = (x[n, c, h, w] - m[c]) / sqrt(v[c] + 1e-5)`"
                        .into(),
                });
            }
            Arg::Eps => {
                if value < 0.0 {
                    return Err(bad(said, "eps must not be negative".into()));
                }
                a.eps = Some(value);
            }
            Arg::Affine | Arg::AffineWeight | Arg::NoAffine => {
                if op == Op::RmsNorm && *arg == Arg::Affine {
                    return Err(bad(
                        said,
                        "RMS norm has a weight and no bias: write `with weight`".into(),
                    ));
                }
                a.affine = Some(*arg);
            }
            Arg::Slope => a.slope = Some(value),
            Arg::Alpha => a.alpha = Some(value),
            Arg::Approx => a.approx = true,
            Arg::Groups => a.groups = Some((value as i64, said.clone())),
            Arg::MinVal => a.min = Some(value),
            Arg::MaxVal => a.max = Some(value),
            Arg::Beta => {
                if value <= 0.0 {
                    return Err(bad(said, "beta must be positive".into()));
                }
                a.beta = Some(value);
            }
            Arg::Threshold => a.threshold = Some(value),
            Arg::I32 | Arg::I64 => a.indices = Some(*arg),
            Arg::Reverse => a.reverse = true,
            Arg::Exclusive => a.exclusive = true,
            Arg::Inclusive => {}
            Arg::Masked => a.masked = true,
            Arg::BatchMean => {}
            Arg::Margin => a.margin = Some(value),
            Arg::Scale => a.scale = Some(value),
            Arg::Tf32 => a.tf32 = Some(said.clone()),
            Arg::DType(_) | Arg::BadDType(_) => {}
        }
    }
    if let (Some(said), Some(d)) = (&a.tf32, a.dtype)
        && d != DType::F32
    {
        return Err(bad(
            said,
            format!(
                "tf32 is how f32 products may be rounded; `{}` operands run on the tensor cores already: drop one",
                d.name()
            ),
        ));
    }
    let num = notation::number;
    let flat = |body: &str| format!("y[n] = {body}");
    let mut text = match op {
        Op::MatScalar => flat("x[n] * s"),
        Op::Diag => "y[r, c] = a[r] * x[r, c]".to_string(),
        Op::Relu => flat("relu(x[n])"),
        Op::LeakyRelu => flat(&format!(
            "where(x[n] > 0, x[n], {} * x[n])",
            num(a.slope.unwrap_or(0.01))
        )),
        Op::Sigmoid => flat("sigmoid(x[n])"),
        Op::Tanh => flat("tanh(x[n])"),
        Op::Swish => flat("x[n] * sigmoid(x[n])"),
        Op::Gelu if a.approx => flat(GELU_TANH),
        Op::Gelu => flat("0.5 * x[n] * (1 + erf(x[n] / sqrt(2)))"),
        Op::GeluTanh => flat(GELU_TANH),
        Op::Selu => {
            flat("1.0507009873554805 * where(x[n] > 0, x[n], 1.6732632423543772 * expm1(x[n]))")
        }
        Op::HardSigmoid => flat("clamp(x[n] + 3, 0, 6) / 6"),
        Op::Softsign => flat("x[n] / (1 + abs(x[n]))"),
        Op::Softplus => {
            let t = num(a.threshold.unwrap_or(20.0));
            match a.beta.unwrap_or(1.0) {
                1.0 => flat(&format!("where(x[n] > {t}, x[n], log1p(exp(x[n])))")),
                b => {
                    let b = num(b);
                    flat(&format!(
                        "where({b} * x[n] > {t}, x[n], log1p(exp({b} * x[n])) / {b})"
                    ))
                }
            }
        }
        Op::Elu => match a.alpha.unwrap_or(1.0) {
            1.0 => flat("where(x[n] > 0, x[n], expm1(x[n]))"),
            alpha => flat(&format!(
                "where(x[n] > 0, x[n], {} * expm1(x[n]))",
                num(alpha)
            )),
        },
        Op::HardTanh => {
            let (lo, hi) = (a.min.unwrap_or(-1.0), a.max.unwrap_or(1.0));
            if lo > hi {
                return Err(bad(
                    &format!("min {} max {}", num(lo), num(hi)),
                    "the lower bound is above the upper one".into(),
                ));
            }
            flat(&format!("clamp(x[n], {}, {})", num(lo), num(hi)))
        }
        Op::Frobenius => "norm = sqrt(sum(n) x[n] ^ 2); y[n] = x[n] / norm".to_string(),
        // Losses over every element of the predictions `x` and targets `t` (PyTorch's default reduction, the
        // mean), to a one-element `y`. Huber with delta 1 and smooth L1 with beta 1 are the same function.
        Op::Mse => "y = mean(n) (x[n] - t[n]) ^ 2".to_string(),
        Op::Huber => "y = mean(n) where(abs(x[n] - t[n]) < 1, 0.5 * (x[n] - t[n]) ^ 2, abs(x[n] - t[n]) - 0.5)"
            .to_string(),
        // `mean(clamp(1 - predictions * targets, min=0))` with PyTorch's broadcasting: the targets' one axis
        // lines up with the predictions' last (KernelBench 100: predictions [32768, 32768], targets [32768]).
        Op::Hinge => "y = mean(n, c) max(0, 1 - x[n, c] * t[c])".to_string(),
        // `kl_div(log(x), t, reduction='batchmean')` of probabilities `x` and targets `t` (KernelBench 98): the
        // sum over classes of `t · (log t − log x)` (0 where `t` is 0, as PyTorch's `xlogy`), averaged over the
        // batch. Cross term first, so that the predictions are the first input.
        Op::KlDiv => "d[r] = sum(c) ((-log(x[r, c])) * t[r, c] + where(t[r, c] > 0, t[r, c] * log(t[r, c]), 0)); \
                      y = mean(r) d[r]"
            .to_string(),
        // PyTorch's default: Euclidean distances with `pairwise_distance`'s eps added to each difference, the
        // mean over the batch (KernelBench 99: anchor, positive, negative of [32768, 8192]).
        Op::Triplet => format!(
            "dp[r] = sqrt(sum(c) (a[r, c] - p[r, c] + 1e-6) ^ 2); \
             dn[r] = sqrt(sum(c) (a[r, c] - n[r, c] + 1e-6) ^ 2); \
             y = mean(r) max(dp[r] - dn[r] + {}, 0)",
            num(a.margin.unwrap_or(1.0))
        ),
        // `F.cross_entropy(x, t)` of logits `x` [rows, classes] and class indices `t` [rows] (KernelBench 95):
        // the log of the softmax's denominator, shifted by the row's max, less the target's logit, averaged
        // over the rows. The max first, so that the logits are the first input and the targets the second.
        Op::CrossEntropy => "m[r] = max(c) x[r, c]; \
                             y = mean(r) (m[r] + log(sum(c) exp(x[r, c] - m[r])) - x[r, t[r]]), i64 t"
            .to_string(),
        Op::BatchNorm | Op::InstanceNorm | Op::GroupNorm => {
            channel_norm(op, implied_rank, &a, bad)?
        }
        Op::Transpose => transpose(implied_rank, &a, bad)?,
        Op::Attention => attention(&a, bad)?,
        Op::Cumsum | Op::Cumprod => {
            let (rank, along) = axes(op, &a, bad)?;
            if let (&[], Some((_, _, said))) = (along.as_slice(), &a.axis) {
                return Err(bad(
                    said,
                    "a scan runs along one axis: say which, as in `along dim 1`".into(),
                ));
            }
            scan(op, rank, along[0], &a)
        }
        _ => {
            let (rank, reduced) = axes(op, &a, bad)?;
            axis_op(op, rank, &reduced, &a)
        }
    };
    let mut options = Vec::new();
    if let Some(d) = a.dtype
        && d != DType::F32
    {
        options.push(d.name().to_string());
    }
    if a.tf32.is_some() {
        options.push("tf32".to_string());
    }
    if a.indices == Some(Arg::I32) {
        options.push("i32 indices".to_string());
    }
    if op == Op::GroupNorm
        && let Some((g, _)) = a.groups
    {
        options.insert(0, format!("g={g}"));
    }
    for o in options {
        text.push_str(", ");
        text.push_str(&o);
    }
    Ok(text)
}

const GELU_TANH: &str = "0.5 * x[n] * (1 + tanh(sqrt(2 / pi) * (x[n] + 0.044715 * x[n] ^ 3)))";

/// The rank and the reduced axes of an operator over axes.
fn axes(
    op: Op,
    a: &Args,
    bad: impl Fn(&str, String) -> SpecError,
) -> Result<(usize, Vec<usize>), SpecError> {
    let given = a.rank.as_ref().map(|(r, _)| *r);
    let Some((kind, k, said)) = &a.axis else {
        if op.is_scan() {
            let n = op.name();
            return Err(SpecError::Ambiguous {
                what: format!("`{n}` without an axis"),
                hint: format!(
                    "it runs along one axis, as PyTorch's `dim` says: `{n} along dim 1`, `{n} along rows` (the last \
                     axis) or `{n} along columns`"
                ),
            });
        }
        if op.is_reduction() {
            let n = op.name();
            return Err(SpecError::Ambiguous {
                what: format!("`{n}` without an axis"),
                hint: format!(
                    "it reads as `{n} over the last axis` (of each row), `{n} over dim 1 of a 3-D tensor` or \
                     `{n} over all elements`: say which"
                ),
            });
        }
        let rank = given.unwrap_or(2);
        return Ok((rank, vec![rank - 1]));
    };
    match kind {
        Arg::All => Ok((0, Vec::new())),
        Arg::Last | Arg::Rows => {
            let rank = given.unwrap_or(2);
            Ok((rank, vec![rank - 1]))
        }
        Arg::Cols => match given {
            None | Some(2) => Ok((2, vec![0])),
            Some(_) => Err(bad(
                said,
                "columns are those of a 2-D tensor: say `over dim 0` for another rank".into(),
            )),
        },
        Arg::LastK if op.is_scan() => Err(bad(
            said,
            "a scan runs along one axis: say which, as in `along dim 1`".into(),
        )),
        Arg::LastK => {
            let k = *k;
            if k < 1 {
                return Err(bad(said, "the number of axes must be at least 1".into()));
            }
            let rank = match given {
                Some(r) => r,
                None if k < 8 => k as usize + 1,
                None => return Err(bad(said, "at most 7 axes".into())),
            };
            if k as usize > rank {
                return Err(bad(said, format!("a {rank}-D tensor has only {rank} axes")));
            }
            Ok((rank, (rank - k as usize..rank).collect()))
        }
        _ => {
            let k = *k;
            let rank = match given {
                Some(r) => r,
                None if (-2..=1).contains(&k) => 2,
                None => {
                    let n = op.name();
                    return Err(SpecError::Ambiguous {
                        what: format!("`{said}` of a tensor of unknown rank"),
                        hint: format!(
                            "say the rank, as in `{n} over dim {k} of a {}-D tensor` or `… of a {}-D tensor`",
                            k.abs() + 1,
                            k.abs() + 2
                        ),
                    });
                }
            };
            let d = if k < 0 { rank as i64 + k } else { k };
            if d < 0 || d >= rank as i64 {
                return Err(bad(
                    said,
                    format!(
                        "a {rank}-D tensor has dims 0 to {} (or -1 to -{rank})",
                        rank - 1
                    ),
                ));
            }
            Ok((rank, vec![d as usize]))
        }
    }
}

/// `d0, d2` from the names of the axes `which` keeps.
fn pick(names: &[String], which: impl Fn(usize) -> bool) -> String {
    names
        .iter()
        .enumerate()
        .filter(|(i, _)| which(*i))
        .map(|(_, n)| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `x[…]`, or the bare name of a 0-d statement.
fn at(name: &str, idx: &str) -> String {
    if idx.is_empty() {
        name.to_string()
    } else {
        format!("{name}[{idx}]")
    }
}

fn axis_op(op: Op, rank: usize, reduced: &[usize], a: &Args) -> String {
    if rank == 0 {
        let r = match op {
            Op::Sum => "sum",
            Op::Mean => "mean",
            Op::Max => "max",
            Op::Min => "min",
            Op::Argmax => "argmax",
            _ => "argmin",
        };
        return format!("y = {r}(n) x[n]");
    }
    let names: Vec<String> = if rank == 2 && reduced == [1] {
        vec!["r".into(), "c".into()]
    } else {
        (0..rank).map(|i| format!("d{i}")).collect()
    };
    let all = pick(&names, |_| true);
    let kept = pick(&names, |i| !reduced.contains(&i));
    let over = pick(&names, |i| reduced.contains(&i));
    let x = format!("x[{all}]");
    let y = format!("y[{all}]");
    let m = at("m", &kept);
    let eps = num_or(a.eps, 1e-5);
    match op {
        Op::Softmax => format!(
            "{m} = max({over}) {x}; e[{all}] = exp({x} - {m}); {y} = e[{all}] / sum({over}) e[{all}]"
        ),
        Op::LogSoftmax => {
            let l = at("l", &kept);
            format!(
                "{m} = max({over}) {x}; {l} = {m} + log(sum({over}) exp({x} - {m})); {y} = {x} - {l}"
            )
        }
        Op::L1Norm => format!("{y} = {x} / mean({over}) abs({x})"),
        Op::L2Norm => format!("{y} = {x} / sqrt(sum({over}) {x} ^ 2)"),
        Op::RmsNorm => {
            let weight = if a.affine == Some(Arg::AffineWeight) {
                format!(" * w[{over}]")
            } else {
                String::new()
            };
            format!("{y} = {x} / sqrt(mean({over}) {x} ^ 2 + {eps}){weight}")
        }
        Op::LayerNorm => {
            let v = at("v", &kept);
            let affine = match a.affine {
                Some(Arg::Affine) => format!(" * w[{over}] + b[{over}]"),
                Some(Arg::AffineWeight) => format!(" * w[{over}]"),
                _ => String::new(),
            };
            format!(
                "{m} = mean({over}) {x}; {v} = mean({over}) ({x} - {m}) ^ 2; {y} = ({x} - {m}) / sqrt({v} + {eps}){affine}"
            )
        }
        _ => {
            let r = match op {
                Op::Sum => "sum",
                Op::Mean => "mean",
                Op::Max => "max",
                Op::Min => "min",
                Op::Argmax => "argmax",
                _ => "argmin",
            };
            format!("{} = {r}({over}) {x}", at("y", &kept))
        }
    }
}

/// `y[…] = cumsum(d, reverse, exclusive) x[…]` along axis `along` of a rank-`rank` tensor (`r, c` for the last axis
/// of a 2-D one), times a boolean mask `m` of the same shape when masked.
/// `y[c, r] = x[r, c]` for a matrix; for a higher rank the last two axes swap and the leading ones (`b`, or
/// `d0 … d{R-3}`) are a batch kept in place. The transpose family generates it.
/// `softmax(q kᵀ · scale) v` over the last two axes of 4-D tensors `q`, `k`, `v` (PyTorch's
/// `scaled_dot_product_attention` on `[batch, heads, positions, features]`), or of the rank given: queries `i`,
/// keys `j`, query and key features `d`, value features `dv`, the leading axes a batch. The scores are `s`, their
/// row max `m`, the exponentials `e`; the output is `y`. The scale is a run-time `scale` (PyTorch's default is
/// `1/sqrt(d)`, which the caller passes) unless the spec fixes it (`scale 0.125`).
fn attention(a: &Args, bad: impl Fn(&str, String) -> SpecError) -> Result<String, SpecError> {
    let rank = a.rank.as_ref().map_or(4, |(r, _)| *r);
    if rank < 2 {
        let said = a.rank.as_ref().map_or("attention", |(_, s)| s.as_str());
        return Err(bad(
            said,
            format!(
                "attention multiplies matrices of queries and keys; a {rank}-D tensor is not one"
            ),
        ));
    }
    let batch: Vec<String> = match rank {
        2 => Vec::new(),
        3 => vec!["b".into()],
        4 => vec!["b".into(), "h".into()],
        _ => (0..rank - 2).map(|d| format!("b{d}")).collect(),
    };
    let axes = |last: &[&str]| {
        let all: Vec<&str> = batch
            .iter()
            .map(String::as_str)
            .chain(last.iter().copied())
            .collect();
        all.join(", ")
    };
    let scale = a.scale.map_or("scale".to_string(), notation::number);
    Ok(format!(
        "s[{ij}] = sum(d) q[{id}] * k[{jd}] * {scale}; m[{i}] = max(j) s[{ij}]; e[{ij}] = exp(s[{ij}] - m[{i}]); \
         y[{iv}] = sum(j) e[{ij}] * v[{jv}] / sum(j) e[{ij}]",
        ij = axes(&["i", "j"]),
        id = axes(&["i", "d"]),
        jd = axes(&["j", "d"]),
        i = axes(&["i"]),
        iv = axes(&["i", "dv"]),
        jv = axes(&["j", "dv"]),
    ))
}

fn transpose(
    implied_rank: Option<usize>,
    a: &Args,
    bad: impl Fn(&str, String) -> SpecError,
) -> Result<String, SpecError> {
    let rank = match (&a.rank, implied_rank) {
        (Some((r, said)), Some(implied)) if *r != implied => {
            return Err(bad(
                said,
                format!("a batched transpose swaps the last two axes of a {implied}-D tensor"),
            ));
        }
        (Some((r, _)), _) => *r,
        (None, implied) => implied.unwrap_or(2),
    };
    if rank < 2 {
        let said = a.rank.as_ref().map_or("transpose", |(_, s)| s.as_str());
        return Err(bad(
            said,
            format!("a transpose swaps two axes; a {rank}-D tensor has fewer"),
        ));
    }
    let batch: Vec<String> = match rank {
        2 => Vec::new(),
        3 => vec!["b".into()],
        _ => (0..rank - 2).map(|d| format!("d{d}")).collect(),
    };
    let axes = |last: &[&str]| {
        let all: Vec<&str> = batch
            .iter()
            .map(String::as_str)
            .chain(last.iter().copied())
            .collect();
        all.join(", ")
    };
    Ok(format!(
        "y[{}] = x[{}]",
        axes(&["c", "r"]),
        axes(&["r", "c"])
    ))
}

fn scan(op: Op, rank: usize, along: usize, a: &Args) -> String {
    let names: Vec<String> = if rank == 2 && along == 1 {
        vec!["r".into(), "c".into()]
    } else {
        (0..rank).map(|i| format!("d{i}")).collect()
    };
    let all = pick(&names, |_| true);
    let mut head = names[along].clone();
    if a.reverse {
        head.push_str(", reverse");
    }
    if a.exclusive {
        head.push_str(", exclusive");
    }
    let name = op.name();
    if a.masked {
        format!("y[{all}] = {name}({head}) x[{all}] * m[{all}], bool m")
    } else {
        format!("y[{all}] = {name}({head}) x[{all}]")
    }
}

fn num_or(v: Option<f64>, default: f64) -> String {
    notation::number(v.unwrap_or(default))
}

/// Batch, instance and group norm of an (N, C, …) tensor.
fn channel_norm(
    op: Op,
    implied_rank: Option<usize>,
    a: &Args,
    bad: impl Fn(&str, String) -> SpecError,
) -> Result<String, SpecError> {
    let name = op.name();
    let rank = match (&a.rank, implied_rank) {
        (Some((r, said)), Some(implied)) if *r != implied => {
            return Err(bad(
                said,
                format!("the operator's name says a {implied}-D tensor"),
            ));
        }
        (Some((r, _)), _) => *r,
        (None, Some(r)) => r,
        (None, None) => 4,
    };
    let least = if op == Op::BatchNorm { 2 } else { 3 };
    if rank < least {
        let said = a.rank.as_ref().map_or("rank", |(_, s)| s.as_str());
        return Err(bad(
            said,
            format!("{name} needs a tensor of at least {least} dims (N, C, …)"),
        ));
    }
    let spatial: Vec<String> = (2..rank).map(|i| format!("d{i}")).collect();
    let eps = num_or(a.eps, 1e-5);
    let (names, stats, over, params): (Vec<String>, String, Vec<String>, String) = match op {
        Op::GroupNorm => {
            let Some((g, said)) = &a.groups else {
                return Err(SpecError::BadArgument {
                    operator: name,
                    phrase: "groups".into(),
                    reason: "group norm needs the number of groups: write `group norm, groups 8`"
                        .into(),
                });
            };
            if *g < 1 {
                return Err(bad(said, "the number of groups must be at least 1".into()));
            }
            let mut names = vec!["d0".to_string(), "g".into(), "k".into()];
            names.extend(spatial.iter().cloned());
            let mut over = vec!["k".to_string()];
            over.extend(spatial.iter().cloned());
            (names, "d0, g".into(), over, "g, k".into())
        }
        _ => {
            let mut names = vec!["d0".to_string(), "d1".into()];
            names.extend(spatial.iter().cloned());
            let (stats, over) = if op == Op::BatchNorm {
                let mut over = vec!["d0".to_string()];
                over.extend(spatial.iter().cloned());
                ("d1".to_string(), over)
            } else {
                ("d0, d1".to_string(), spatial.clone())
            };
            (names, stats, over, "d1".into())
        }
    };
    let all = names.join(", ");
    let over = over.join(", ");
    let x = format!("x[{all}]");
    let affine = match a.affine {
        Some(Arg::Affine) => format!(" * w[{params}] + b[{params}]"),
        Some(Arg::AffineWeight) => format!(" * w[{params}]"),
        _ => String::new(),
    };
    Ok(format!(
        "m[{stats}] = mean({over}) {x}; v[{stats}] = mean({over}) ({x} - m[{stats}]) ^ 2; \
         y[{all}] = ({x} - m[{stats}]) / sqrt(v[{stats}] + {eps}){affine}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lowered(text: &str) -> Program {
        match lower(text) {
            Some(Ok(p)) => p,
            Some(Err(e)) => panic!("{text:?}: {e}"),
            None => panic!("{text:?}: not recognised"),
        }
    }

    fn error(text: &str) -> SpecError {
        match lower(text) {
            Some(Err(e)) => e,
            Some(Ok(p)) => panic!("{text:?} lowered to {p}"),
            None => panic!("{text:?}: not recognised"),
        }
    }

    fn hand(text: &str) -> Program {
        notation::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    /// Each vocabulary example (and some synonyms), with its index form written by hand under other names.
    const BY_HAND: &[(&str, &str)] = &[
        ("matrix scalar multiplication", "out[i] = inp[i] * alpha"),
        (
            "matrix-scalar multiply, bf16",
            "out[i] = inp[i] * alpha, bfloat16",
        ),
        ("diag(A) @ B", "o[i, j] = v[i] * mat[i, j]"),
        (
            "scale each row of B by a vector",
            "o[i, j] = v[i] * mat[i, j]",
        ),
        ("relu", "o[i] = max(inp[i], 0)"),
        ("mse loss", "loss = mean(i) (p[i] - q[i])^2"),
        ("MSELoss", "loss = mean(i) (p[i] - q[i])^2"),
        (
            "mean squared error, bf16",
            "loss = mean(i) (p[i] - q[i])^2, bf16",
        ),
        (
            "smooth_l1_loss",
            "loss = mean(i) where(abs(p[i] - q[i]) < 1, 0.5 * (p[i] - q[i])^2, abs(p[i] - q[i]) - 0.5)",
        ),
        (
            "smooth l1 loss",
            "loss = mean(i) where(abs(p[i] - q[i]) < 1, 0.5 * (p[i] - q[i])^2, abs(p[i] - q[i]) - 0.5)",
        ),
        (
            "HuberLoss",
            "loss = mean(i) where(abs(p[i] - q[i]) < 1, 0.5 * (p[i] - q[i])^2, abs(p[i] - q[i]) - 0.5)",
        ),
        ("hinge loss", "loss = mean(i, j) max(0, 1 - p[i, j] * q[j])"),
        ("HingeLoss", "loss = mean(i, j) max(0, 1 - p[i, j] * q[j])"),
        (
            "kl divergence, batchmean",
            "kl[i] = sum(j) ((-log(pr[i, j])) * tg[i, j] + where(tg[i, j] > 0, tg[i, j] * log(tg[i, j]), 0)); \
             loss = mean(i) kl[i]",
        ),
        (
            "KLDivLoss",
            "kl[i] = sum(j) ((-log(pr[i, j])) * tg[i, j] + where(tg[i, j] > 0, tg[i, j] * log(tg[i, j]), 0)); \
             loss = mean(i) kl[i]",
        ),
        (
            "cross entropy loss",
            "mx[i] = max(j) lg[i, j]; loss = mean(i) (mx[i] + log(sum(j) exp(lg[i, j] - mx[i])) - lg[i, lb[i]]), i64 lb",
        ),
        (
            "CrossEntropyLoss",
            "mx[i] = max(j) lg[i, j]; loss = mean(i) (mx[i] + log(sum(j) exp(lg[i, j] - mx[i])) - lg[i, lb[i]]), i64 lb",
        ),
        (
            "triplet margin loss, margin 1.0",
            "d1[i] = sqrt(sum(j) (an[i, j] - po[i, j] + 1e-6)^2); d2[i] = sqrt(sum(j) (an[i, j] - ne[i, j] + 1e-6)^2); \
             loss = mean(i) max(d1[i] - d2[i] + 1, 0)",
        ),
        (
            "TripletMarginLoss",
            "d1[i] = sqrt(sum(j) (an[i, j] - po[i, j] + 1e-6)^2); d2[i] = sqrt(sum(j) (an[i, j] - ne[i, j] + 1e-6)^2); \
             loss = mean(i) max(d1[i] - d2[i] + 1, 0)",
        ),
        (
            "triplet margin loss, margin 0.5, bf16",
            "d1[i] = sqrt(sum(j) (an[i, j] - po[i, j] + 1e-6)^2); d2[i] = sqrt(sum(j) (an[i, j] - ne[i, j] + 1e-6)^2); \
             loss = mean(i) max(d1[i] - d2[i] + 0.5, 0), bf16",
        ),
        ("ReLU, fp16", "o[i] = max(inp[i], 0), half"),
        ("elementwise relu", "o[i] = max(inp[i], 0)"),
        (
            "leaky relu, negative slope 0.01",
            "o[i] = where(inp[i] > 0, inp[i], 0.01 * inp[i])",
        ),
        (
            "leaky_relu(x, negative_slope=0.2)",
            "o[i] = where(inp[i] > 0, inp[i], 0.2 * inp[i])",
        ),
        (
            "LeakyReLU",
            "o[i] = where(inp[i] > 0, inp[i], 0.01 * inp[i])",
        ),
        ("sigmoid", "o[i] = sigmoid(inp[i])"),
        ("tanh", "o[i] = tanh(inp[i])"),
        (
            "softmax over the last axis",
            "mx[a] = max(b) t[a, b]; ex[a, b] = exp(t[a, b] - mx[a]); o[a, b] = ex[a, b] / sum(b) ex[a, b]",
        ),
        (
            "softmax",
            "mx[a] = max(b) t[a, b]; ex[a, b] = exp(t[a, b] - mx[a]); o[a, b] = ex[a, b] / sum(b) ex[a, b]",
        ),
        (
            "softmax(x, dim=1)",
            "mx[a] = max(b) t[a, b]; ex[a, b] = exp(t[a, b] - mx[a]); o[a, b] = ex[a, b] / sum(b) ex[a, b]",
        ),
        (
            "softmax over dim 1 of a 3-D tensor",
            "mx[p, q] = max(k) t[p, k, q]; ex[p, k, q] = exp(t[p, k, q] - mx[p, q]); \
             o[p, k, q] = ex[p, k, q] / sum(k) ex[p, k, q]",
        ),
        (
            "softmax along columns",
            "mx[b] = max(a) t[a, b]; ex[a, b] = exp(t[a, b] - mx[b]); o[a, b] = ex[a, b] / sum(a) ex[a, b]",
        ),
        (
            "log-softmax, dim=1",
            "mx[a] = max(b) t[a, b]; lse[a] = mx[a] + log(sum(b) exp(t[a, b] - mx[a])); o[a, b] = t[a, b] - lse[a]",
        ),
        (
            "logsoftmax along rows, bf16",
            "mx[a] = max(b) t[a, b]; lse[a] = mx[a] + log(sum(b) exp(t[a, b] - mx[a])); o[a, b] = t[a, b] - lse[a], bf16",
        ),
        ("swish", "o[i] = inp[i] * sigmoid(inp[i])"),
        ("silu", "o[i] = inp[i] * sigmoid(inp[i])"),
        (
            "gelu",
            "o[i] = 0.5 * inp[i] * (1 + erf(inp[i] / 1.4142135623730951))",
        ),
        (
            "gelu with the tanh approximation",
            "o[i] = 0.5 * inp[i] * (1 + tanh(0.7978845608028654 * (inp[i] + 0.044715 * inp[i] ** 3)))",
        ),
        (
            "minGPT new gelu",
            "o[i] = 0.5 * inp[i] * (1 + tanh(sqrt(2 / pi) * (inp[i] + 0.044715 * pow(inp[i], 3))))",
        ),
        (
            "gelu, approximate='tanh'",
            "o[i] = 0.5 * inp[i] * (1 + tanh(0.7978845608028654 * (inp[i] + 0.044715 * inp[i] ^ 3)))",
        ),
        (
            "selu",
            "o[i] = 1.0507009873554804934193349852946 * \
             where(inp[i] > 0, inp[i], 1.6732632423543772848170429916717 * expm1(inp[i]))",
        ),
        ("hardsigmoid", "o[i] = min(max(inp[i] + 3, 0), 6) / 6"),
        ("hard sigmoid", "o[i] = clamp(inp[i] + 3, 0, 6) / 6"),
        (
            "softplus",
            "o[i] = where(inp[i] > 20, inp[i], log1p(exp(inp[i])))",
        ),
        (
            "softplus, beta 2, threshold 10",
            "o[i] = where(2 * inp[i] > 10, inp[i], log1p(exp(2 * inp[i])) / 2)",
        ),
        ("softsign", "o[i] = inp[i] / (1 + abs(inp[i]))"),
        (
            "elu, alpha 1.0",
            "o[i] = where(inp[i] > 0, inp[i], expm1(inp[i]))",
        ),
        (
            "elu, alpha=0.5",
            "o[i] = where(inp[i] > 0, inp[i], 0.5 * expm1(inp[i]))",
        ),
        ("hardtanh, min -1, max 1", "o[i] = min(max(inp[i], -1), 1)"),
        (
            "hardtanh(min_val=-2., max_val=2.)",
            "o[i] = min(max(inp[i], -2), 2)",
        ),
        (
            "batch norm, training mode, eps 1e-5",
            "mu[ch] = mean(bt, hh, ww) t[bt, ch, hh, ww]; \
             var[ch] = mean(bt, hh, ww) (t[bt, ch, hh, ww] - mu[ch]) ** 2; \
             o[bt, ch, hh, ww] = (t[bt, ch, hh, ww] - mu[ch]) / sqrt(var[ch] + 0.00001)",
        ),
        (
            "batchnorm2d with affine weight and bias",
            "mu[ch] = mean(bt, hh, ww) t[bt, ch, hh, ww]; \
             var[ch] = mean(bt, hh, ww) (t[bt, ch, hh, ww] - mu[ch]) ^ 2; \
             o[bt, ch, hh, ww] = (t[bt, ch, hh, ww] - mu[ch]) / sqrt(var[ch] + 1e-5) * gamma[ch] + beta[ch]",
        ),
        (
            "batchnorm1d",
            "mu[ch] = mean(bt, l) t[bt, ch, l]; var[ch] = mean(bt, l) (t[bt, ch, l] - mu[ch]) ^ 2; \
             o[bt, ch, l] = (t[bt, ch, l] - mu[ch]) / sqrt(var[ch] + 1e-5)",
        ),
        (
            "instance norm",
            "mu[bt, ch] = mean(hh, ww) t[bt, ch, hh, ww]; \
             var[bt, ch] = mean(hh, ww) (t[bt, ch, hh, ww] - mu[bt, ch]) ^ 2; \
             o[bt, ch, hh, ww] = (t[bt, ch, hh, ww] - mu[bt, ch]) / sqrt(var[bt, ch] + 1e-5)",
        ),
        (
            "group norm, groups 8",
            "mu[bt, grp] = mean(cg, hh, ww) t[bt, grp, cg, hh, ww]; \
             var[bt, grp] = mean(cg, hh, ww) (t[bt, grp, cg, hh, ww] - mu[bt, grp]) ^ 2; \
             o[bt, grp, cg, hh, ww] = (t[bt, grp, cg, hh, ww] - mu[bt, grp]) / sqrt(var[bt, grp] + 1e-5), grp=8",
        ),
        (
            "GroupNorm(num_groups=4) with affine weight and bias, eps=1e-6",
            "mu[bt, grp] = mean(cg, hh, ww) t[bt, grp, cg, hh, ww]; \
             var[bt, grp] = mean(cg, hh, ww) (t[bt, grp, cg, hh, ww] - mu[bt, grp]) ^ 2; \
             o[bt, grp, cg, hh, ww] = (t[bt, grp, cg, hh, ww] - mu[bt, grp]) / sqrt(var[bt, grp] + 1e-6) \
             * gamma[grp, cg] + beta[grp, cg], grp=4",
        ),
        (
            "rms norm over dim 1 of a 4-D tensor, eps 1e-5",
            "o[bt, ch, hh, ww] = t[bt, ch, hh, ww] / sqrt(mean(ch) t[bt, ch, hh, ww] ** 2 + 1e-5)",
        ),
        (
            "rmsnorm over the last axis",
            "o[a, b] = t[a, b] / sqrt(mean(b) square(t[a, b]) + 1e-5)",
        ),
        (
            "RMSNorm with weight",
            "o[a, b] = t[a, b] / sqrt(mean(b) t[a, b] ^ 2 + 1e-5) * g[b]",
        ),
        (
            "frobenius norm",
            "nrm = sqrt(sum(i) inp[i] ^ 2); o[i] = inp[i] / nrm",
        ),
        (
            "frobenius norm of a 4-D tensor",
            "nrm = sqrt(sum(i) inp[i] ^ 2); o[i] = inp[i] / nrm",
        ),
        (
            "l1 norm over dim 1",
            "o[a, b] = t[a, b] / mean(b) abs(t[a, b])",
        ),
        (
            "l2 norm along rows",
            "o[a, b] = t[a, b] / sqrt(sum(b) t[a, b] ^ 2)",
        ),
        (
            "L2 normalization",
            "o[a, b] = t[a, b] / sqrt(sum(b) t[a, b] ^ 2)",
        ),
        (
            "layer norm over the last 3 axes of a 4-D tensor with affine weight and bias",
            "mu[bt] = mean(p, q, s) t[bt, p, q, s]; var[bt] = mean(p, q, s) (t[bt, p, q, s] - mu[bt]) ^ 2; \
             o[bt, p, q, s] = (t[bt, p, q, s] - mu[bt]) / sqrt(var[bt] + 1e-5) * gamma[p, q, s] + beta[p, q, s]",
        ),
        (
            "layernorm",
            "mu[a] = mean(b) t[a, b]; var[a] = mean(b) (t[a, b] - mu[a]) ^ 2; \
             o[a, b] = (t[a, b] - mu[a]) / sqrt(var[a] + 1e-5)",
        ),
        (
            "layer norm over the last 3 axes",
            "mu[bt] = mean(p, q, s) t[bt, p, q, s]; var[bt] = mean(p, q, s) (t[bt, p, q, s] - mu[bt]) ^ 2; \
             o[bt, p, q, s] = (t[bt, p, q, s] - mu[bt]) / sqrt(var[bt] + 1e-5)",
        ),
        (
            "sum over dim 1 of a 3-D tensor, keep dims",
            "o[p, q] = sum(k) t[p, k, q]",
        ),
        (
            "sum over dim 1 of a 3-D tensor",
            "o[p, q] = sum(k) t[p, k, q]",
        ),
        (
            "torch.sum(x, dim=1, keepdim=True) of a 3d tensor",
            "o[p, q] = sum(k) t[p, k, q]",
        ),
        (
            "mean over dim 1 of a 3-D tensor",
            "o[p, q] = mean(k) t[p, k, q]",
        ),
        (
            "max reduction over dim 1 of a 3-D tensor",
            "o[p, q] = max(k) t[p, k, q]",
        ),
        (
            "min over dim 1 of a 3-D tensor",
            "o[p, q] = min(k) t[p, k, q]",
        ),
        (
            "argmax over dim 1 of a 3-D tensor",
            "o[p, q] = argmax(k) t[p, k, q]",
        ),
        (
            "argmin over dim 1 of a 3-D tensor, i32 indices",
            "o[p, q] = argmin(k) t[p, k, q], i32 indices",
        ),
        (
            "sum over dim -1 of a 3-D tensor",
            "o[p, k] = sum(q) t[p, k, q]",
        ),
        ("mean along rows", "o[a] = mean(b) t[a, b]"),
        ("sum over all elements", "total = sum(i) inp[i]"),
        (
            "max over the last 2 axes of a 3-D tensor",
            "o[p] = max(k, q) t[p, k, q]",
        ),
        ("cumsum along dim 1", "o[a, b] = cumsum(b) t[a, b]"),
        ("torch.cumsum(x, dim=1)", "o[a, b] = cumsum(b) t[a, b]"),
        ("cumulative sum along rows", "o[a, b] = cumsum(b) t[a, b]"),
        ("cumsum along columns", "o[a, b] = cumsum(a) t[a, b]"),
        (
            "reverse cumsum, dim=1",
            "o[a, b] = cumsum(b, reverse) t[a, b]",
        ),
        (
            "exclusive cumulative sum along rows",
            "o[a, b] = cumsum(b, exclusive) t[a, b]",
        ),
        (
            "masked cumsum along dim 1",
            "o[a, b] = cumsum(b) t[a, b] * k[a, b], bool k",
        ),
        (
            "cumprod over dim 1 of a 3-D tensor",
            "o[p, k, q] = cumprod(k) t[p, k, q]",
        ),
        (
            "reversed exclusive prefix product along dim -1, bf16",
            "o[a, b] = cumprod(b, exclusive, reverse) t[a, b], bf16",
        ),
        ("transpose", "o[q, p] = t[p, q]"),
        ("matrix transpose, f16", "o[q, p] = t[p, q], f16"),
        ("batched transpose, bf16", "o[z, q, p] = t[z, p, q], bf16"),
        (
            "swap the last two axes of a 4-D tensor",
            "o[u, v, q, p] = t[u, v, p, q]",
        ),
        (
            "scaled dot-product attention",
            "a[n, g, x, z] = sum(f) qq[n, g, x, f] * kk[n, g, z, f] * sc; mx[n, g, x] = max(z) a[n, g, x, z]; \
             w[n, g, x, z] = exp(a[n, g, x, z] - mx[n, g, x]); \
             o[n, g, x, u] = sum(z) w[n, g, x, z] * vv[n, g, z, u] / sum(z) w[n, g, x, z]",
        ),
        (
            "attention of a 3-D tensor, scale 0.125",
            "a[n, x, z] = sum(f) qq[n, x, f] * kk[n, z, f] * 0.125; mx[n, x] = max(z) a[n, x, z]; \
             w[n, x, z] = exp(a[n, x, z] - mx[n, x]); o[n, x, u] = sum(z) w[n, x, z] * vv[n, z, u] / sum(z) w[n, x, z]",
        ),
        (
            "sdpa of a 2-D tensor",
            "a[x, z] = sum(f) qq[x, f] * kk[z, f] * sc; mx[x] = max(z) a[x, z]; w[x, z] = exp(a[x, z] - mx[x]); \
             o[x, u] = sum(z) w[x, z] * vv[z, u] / sum(z) w[x, z]",
        ),
    ];

    #[test]
    fn every_phrase_lowers_to_its_index_form_written_by_hand() {
        for (words, by_hand) in BY_HAND {
            let p = lowered(words);
            let q = hand(by_hand);
            assert_eq!(p.canonical(), q.canonical(), "{words:?} vs {by_hand:?}");
            assert_eq!(p.dtype, q.dtype);
        }
        for (op, example, form) in vocabulary() {
            assert!(
                BY_HAND.iter().any(|(w, _)| w == &example),
                "the vocabulary example {example:?} ({op}) has no hand-written form"
            );
            assert!(!form.starts_with("error"), "{example:?}: {form}");
            assert_eq!(lowered(example), hand(&form), "{example:?}");
        }
    }

    #[test]
    fn words_use_the_documented_names() {
        let p = lowered("softmax");
        assert_eq!(p.inputs[0].name, "x");
        assert_eq!(
            p.outputs()
                .map(|(_, s)| s.name.as_str())
                .collect::<Vec<_>>(),
            ["y"]
        );
        let dims: Vec<&str> = p.dims.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(dims, ["r", "c"]);
        let p = lowered("relu");
        assert_eq!(p.dims[0].name, "n");
        let p = lowered("matrix scalar multiplication");
        assert_eq!(p.params, ["s"]);
        let p = lowered("group norm, groups 8");
        let dims: Vec<(&str, crate::Dim)> =
            p.dims.iter().map(|d| (d.name.as_str(), d.size)).collect();
        assert_eq!(dims[1], ("g", crate::Dim::Fixed(8)));
        assert_eq!(dims[2].0, "k");
        let p =
            lowered("layer norm over the last 3 axes of a 4-D tensor with affine weight and bias");
        let inputs: Vec<&str> = p.inputs.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(inputs, ["x", "w", "b"]);
        let p = lowered("diag(A) @ B");
        let inputs: Vec<&str> = p.inputs.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(inputs, ["a", "x"]);
        // keepdim changes the shape's metadata only.
        assert_eq!(
            lowered("sum over dim 1 of a 3-D tensor, keepdim=True"),
            lowered("sum over dim 1 of a 3-D tensor")
        );
    }

    #[test]
    fn synonyms_lower_alike() {
        let groups: &[&[&str]] = &[
            &[
                "log softmax",
                "logsoftmax",
                "log-softmax",
                "LogSoftmax",
                "log_softmax over the last axis",
                "log softmax, dim=-1",
            ],
            &["swish", "silu", "SiLU activation"],
            &[
                "rmsnorm",
                "rms norm",
                "RMSNorm",
                "rms normalization",
                "rms norm over the last dim",
            ],
            &[
                "gelu tanh",
                "new gelu",
                "NewGELU",
                "gelu, approximate tanh",
                "gelu with tanh approximation",
            ],
            &[
                "batch norm",
                "batchnorm",
                "BatchNorm2d",
                "batch normalization, training mode, eps=1e-5",
                "batch norm of a 4-d tensor",
            ],
            &[
                "argmax over dim 1 of a 3-D tensor",
                "argmax, dim=1, rank 3",
                "argmax along axis 1 of a 3d input",
            ],
            &[
                "l1 norm",
                "l1 norm along rows",
                "L1 normalization over dim 1",
                "l1norm over the last axis",
            ],
            &[
                "hardtanh",
                "hard tanh",
                "hardtanh, min -1, max 1",
                "HardTanh(min_val=-1., max_val=1.)",
            ],
        ];
        for group in groups {
            let first = lowered(group[0]);
            for other in &group[1..] {
                assert_eq!(lowered(other), first, "{other:?} vs {:?}", group[0]);
            }
        }
    }

    #[test]
    fn texts_that_are_not_ours_are_left_alone() {
        for text in [
            "y = relu(x)",
            "y = x * s",
            "matmul with relu",
            "bmm, f32",
            "batched gemm, B transposed",
            "matrix multiply with bias and gelu",
            "C = A·Bᵀ",
            "sofmax",
            "conv2d",
            "",
            "add a scalar",
        ] {
            assert!(lower(text).is_none(), "{text:?}");
        }
    }

    #[test]
    fn a_transpose_needs_two_axes_and_a_batched_one_three() {
        let m = error("transpose of a 1-D tensor").to_string();
        assert!(
            m.contains("a transpose swaps two axes; a 1-D tensor has fewer"),
            "{m}"
        );
        let m = error("batched transpose, rank 4").to_string();
        assert!(m.contains("the last two axes of a 3-D tensor"), "{m}");
        // "batched" belongs to the matmul vocabulary everywhere else.
        assert!(lower("batched transpose").is_some());
        assert!(lower("batched matmul").is_none());
    }

    #[test]
    fn errors_name_the_closest_phrase_or_the_readings() {
        let e = error("softmax over the lst axis");
        assert!(
            matches!(&e, SpecError::UnknownPhrase { closest: Some(c), .. } if c == "over the last axis"),
            "{e:?}"
        );
        let m = e.to_string();
        assert!(m.contains("`lst axis` is not understood in a softmax spec (did you mean `over the last axis`?)"), "{m}");
        assert!(m.contains("`over dim 1`"), "{m}");
        let e = error("layer norm, epsilon 1e-5, with afine weight and bias");
        assert!(
            matches!(&e, SpecError::UnknownPhrase { closest: Some(c), .. } if c == "with affine weight and bias"),
            "{e:?}"
        );
        let e = error("leeky relu");
        assert!(
            matches!(&e, SpecError::UnknownPhrase { closest: Some(c), .. } if c == "leaky relu"),
            "{e:?}"
        );
        let e = error("softmax 5");
        assert!(
            e.to_string()
                .contains("`5` is not understood in a softmax spec"),
            "{e}"
        );
        let m = error("sum").to_string();
        assert!(
            m.contains("`sum over the last axis`")
                && m.contains("`sum over dim 1 of a 3-D tensor`")
                && m.contains("`sum over all elements`"),
            "{m}"
        );
        assert!(matches!(error("argmin"), SpecError::Ambiguous { .. }));
        let m = error("sum over dim 2").to_string();
        assert!(
            m.contains("ambiguous") && m.contains("of a 3-D tensor"),
            "{m}"
        );
        let m = error("cumsum").to_string();
        assert!(
            m.contains("`cumsum along dim 1`") && m.contains("`cumsum along columns`"),
            "{m}"
        );
        let m = error("cumsum over all elements").to_string();
        assert!(m.contains("a scan runs along one axis"), "{m}");
        let m = error("cumsum over the last 2 axes of a 3-D tensor").to_string();
        assert!(m.contains("a scan runs along one axis"), "{m}");
        let m = error("masked cumprod along dim 1").to_string();
        assert_eq!(m, "`masked` does not apply to a cumprod kernel");
        let m = error("exclusive inclusive cumsum along dim 1").to_string();
        assert!(m.contains("contradicts `exclusive`"), "{m}");
        let m = error("relu softmax").to_string();
        assert!(m.contains("`relu`, `softmax`"), "{m}");
        let m = error("group norm").to_string();
        assert!(m.contains("groups 8"), "{m}");
        let m = error("group norm, groups 0").to_string();
        assert!(m.contains("at least 1"), "{m}");
        let m = error("leaky relu, alpha 2").to_string();
        assert_eq!(m, "`alpha 2` does not apply to a leaky relu kernel");
        let m = error("softmax over dim 3 of a 2-d tensor").to_string();
        assert!(
            m.contains("`dim 3` in a softmax spec: a 2-D tensor has dims 0 to 1"),
            "{m}"
        );
        let m = error("softmax over dim 1, over the last axis").to_string();
        assert!(m.contains("contradicts `dim 1`"), "{m}");
        let m = error("rms norm with affine weight and bias").to_string();
        assert!(m.contains("with weight"), "{m}");
        let m = error("batch norm in eval mode").to_string();
        assert!(
            m.contains("unsupported") && m.contains("index notation"),
            "{m}"
        );
        let m = error("l2 norm, f64").to_string();
        assert!(m.contains("f32, bf16 and f16"), "{m}");
        let m = error("softmax, bf16, f16").to_string();
        assert!(m.contains("second, different dtype"), "{m}");
        let m = error("hardtanh, min 2, max 1").to_string();
        assert!(m.contains("lower bound is above the upper one"), "{m}");
        let m = error("batchnorm2d of a 3-d tensor").to_string();
        assert!(m.contains("4-D"), "{m}");
        let m = error("instance norm of a 2-d tensor").to_string();
        assert!(m.contains("at least 3"), "{m}");
        let m = error("sum over the last 9 axes").to_string();
        assert!(m.contains("at most 7"), "{m}");
        let m = error("softmax of a 12-d tensor").to_string();
        assert!(m.contains("between 1 and 8"), "{m}");
        let m = error("softmax along columns of a 3-d tensor").to_string();
        assert!(m.contains("over dim 0"), "{m}");
        let m = error("relu @").to_string();
        assert!(m.contains("`@` is not understood in a relu spec"), "{m}");
    }

    #[test]
    fn attention_takes_a_rank_and_a_scale_and_nothing_else() {
        let p = lowered("scaled dot product attention");
        let names: Vec<&str> = p.inputs.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["q", "k", "v"]);
        assert_eq!(p.params, ["scale"]);
        let dims: Vec<&str> = p.dims.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(dims, ["b", "h", "i", "j", "d", "dv"]);
        assert!(lowered("attention, scale 0.5").params.is_empty());
        let m = error("attention over the last axis").to_string();
        assert!(
            m.contains("`last axis` does not apply to a scaled dot-product attention"),
            "{m}"
        );
        let m = error("attention of a 1-D tensor").to_string();
        assert!(m.contains("a 1-D tensor is not one"), "{m}");
        let m = error("attention, scale 0.5, scale 0.25").to_string();
        assert!(m.contains("contradicts"), "{m}");
    }
}
