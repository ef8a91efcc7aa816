//! Spec text → [`Spec`].
//!
//! The text is split into clauses at `,` and `;`. A clause is either a shape (`k=1024`, `m=n=512`), an equation
//! (`C = alpha·A·Bᵀ + beta·C`, `y = gelu(x)`) or a phrase (`batched gemm with B transposed`). Phrases are matched
//! word by word against a vocabulary, longest phrase first; every word must be understood, because a silently
//! ignored word ("column-major", "fp16") would yield a kernel that computes something else.

use crate::error::SpecError;
use crate::model::{
    Activation, DType, Dim, Family, Layout, MatmulNames, MatmulSpec, Precision, Spec, Triangle,
};
use crate::program::{Program, notation, words};

/// The longest spec text accepted, in characters: ten times the longest program a test writes, and a bound on
/// the parse time (a 1 MB spec once took 161 s in a build script's debug profile).
pub const MAX_SPEC_CHARS: usize = 4096;

/// Parses a spec string.
///
/// # Errors
/// A [`SpecError`] naming the first word or clause that could not be understood, with the closest known word;
/// [`SpecError::TooLong`] past [`MAX_SPEC_CHARS`].
pub fn parse(text: &str) -> Result<Spec, SpecError> {
    let chars = text.chars().count();
    if chars > MAX_SPEC_CHARS {
        return Err(SpecError::TooLong { chars });
    }
    if notation::is_notation(text) {
        let (body, range) = summation_range(text)?;
        let program = notation::parse(&body)?;
        // A sum over an index two inputs share is a matrix product: the matmul family's kernels compute it.
        if let Some(mut m) = contraction_matmul(&program) {
            if let Some(range) = range {
                m.triangle = Some(range.triangle(&m)?);
                check_triangular(&m, program.dtype)?;
            }
            return Ok(Spec {
                dtype: program.dtype,
                layout: Layout::RowMajor,
                family: Family::Matmul(m),
            });
        }
        if let Some(range) = range {
            return Err(SpecError::Unsupported {
                what: format!("the summation range `where {range}` on a program that is not one matrix product"),
                hint: "a range bounds the summed index of a product: `c[i, j] = sum(k) a[i, k] * b[k, j] where \
                       i <= k <= j`"
                    .into(),
            });
        }
        return Ok(tensor_spec(program));
    }
    match phrases(text) {
        Ok(spec) => Ok(spec),
        // The matmul and elementwise vocabulary understood the operator but not an option of it: its own error
        // says best what is wrong.
        Err(e @ (SpecError::NotForFamily { .. } | SpecError::Unsupported { .. })) => Err(e),
        // It did not understand the words: the tensor operators' vocabulary may. Tried second so that every
        // spec the first accepted keeps its meaning (and its cache key).
        Err(e) => match words::lower(text) {
            Some(program) => program.map(tensor_spec),
            None => Err(unknown_to_both(text, e)),
        },
    }
}

/// The matmul vocabulary's error `e` for a text neither vocabulary reads, naming the first word that neither
/// knows: "row-wise frobnicate" stopped the matmul vocabulary at `row`, which the tensor operators' arguments
/// know; `frobnicate` is the word to fix.
fn unknown_to_both(text: &str, e: SpecError) -> SpecError {
    let SpecError::UnknownWord { word, .. } = &e else {
        return e;
    };
    if !words::knows(word) {
        return e;
    }
    let known = |w: &str| {
        words::knows(w)
            || w.len() <= 1
            || VOCABULARY
                .iter()
                .any(|(p, _)| phrase_words(p).any(|x| x == w))
    };
    let tokens = tokenize(text).unwrap_or_default();
    match tokens.iter().find_map(|t| match t {
        Tok::Word(w) if !known(w) => Some(w.clone()),
        _ => None,
    }) {
        Some(word) => SpecError::UnknownWord {
            closest: closest_word(&word).or_else(|| words::closest(&word)),
            word,
        },
        None => e,
    }
}

/// The spec of a tensor program.
fn tensor_spec(program: Program) -> Spec {
    Spec {
        dtype: program.dtype,
        layout: Layout::RowMajor,
        family: Family::Tensor(program),
    }
}

/// The bounds a contraction's summed index runs between: `where i <= k <= j` after the statement.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SumRange {
    /// The names, lowest bound first: `[i, k, j]`.
    names: [String; 3],
}

impl std::fmt::Display for SumRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, b, c] = &self.names;
        write!(f, "{a} <= {b} <= {c}")
    }
}

impl SumRange {
    /// The triangle the range makes of the product `m`: the summed index between the output's row and
    /// column (`i <= k <= j`, upper: `C[i, j]` is 0 below the diagonal, and only the upper triangles of A and B
    /// take part), or between its column and row (`j <= k <= i`, lower).
    fn triangle(&self, m: &MatmulSpec) -> Result<Triangle, SpecError> {
        let names = m
            .names
            .as_deref()
            .expect("a contraction names its dimensions");
        let [lo, mid, hi] = &self.names;
        let (i, j, k) = (&names.m, &names.n, &names.k);
        match (lo == i, lo == j, hi == j, hi == i) {
            _ if mid != k => {}
            (true, _, true, _) => return Ok(Triangle::Upper),
            (_, true, _, true) => return Ok(Triangle::Lower),
            _ => {}
        }
        Err(SpecError::Unsupported {
            what: format!("the summation range `{self}`"),
            hint: format!(
                "a range bounds the summed index `{k}` by the output's row `{i}` and column `{j}`: `{i} <= {k} <= \
                 {j}` (upper triangular) or `{j} <= {k} <= {i}` (lower triangular)"
            ),
        })
    }
}

/// Splits `… where a <= b <= c` off an index-notation spec (clauses such as `, bf16` may follow it): the
/// rest of the text, and the range if there is one.
fn summation_range(text: &str) -> Result<(String, Option<SumRange>), SpecError> {
    let Some(at) = text.rfind(" where ") else {
        return Ok((text.to_string(), None));
    };
    let (body, after) = (&text[..at], &text[at + " where ".len()..]);
    // A `where(…)` select inside the statement is not a range clause.
    if after.trim_start().starts_with('(') || !body.contains('=') {
        return Ok((text.to_string(), None));
    }
    let end = after.find([',', ';']).unwrap_or(after.len());
    let (clause, rest) = (after[..end].trim(), &after[end..]);
    let parts: Vec<&str> = clause.split("<=").map(str::trim).collect();
    let name = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    match parts[..] {
        [a, b, c] if [a, b, c].into_iter().all(name) => Ok((
            format!("{}{rest}", body.trim_end()),
            Some(SumRange {
                names: [a, b, c].map(str::to_string),
            }),
        )),
        _ => Err(SpecError::BadEquation(format!(
            "`where {clause}`: a summation range reads `where i <= k <= j`, three index names joined by `<=`"
        ))),
    }
}

/// A triangular product's limits: the SIMT kernel reads its operands as stored, in f32, with no epilogue.
fn check_triangular(m: &MatmulSpec, dtype: DType) -> Result<(), SpecError> {
    let refuse = |what: &str| {
        Err(SpecError::Unsupported {
            what: format!("{what} in a triangular product"),
            hint: "triangular products are exact f32 products of untransposed operands without alpha, beta, bias \
                   or activation so far"
                .into(),
        })
    };
    if dtype != DType::F32 {
        return refuse(&format!("`{}` elements", dtype.name()));
    }
    if m.precision == Precision::Tf32 {
        return refuse("tf32");
    }
    if m.trans_a || m.trans_b {
        return refuse("a transposed operand");
    }
    for (on, word) in [
        (m.alpha, "alpha"),
        (m.beta, "beta"),
        (m.bias, "bias"),
        (m.activation.is_some(), "an activation"),
    ] {
        if on {
            return refuse(word);
        }
    }
    Ok(())
}

/// The matmul a program is, when it is exactly one (batched) matrix product written as a contraction:
/// `c[i, j] = sum(k) a[i, k] * b[k, j]`, either operand stored transposed (`a[k, i]`, `b[j, k]`), with leading
/// batch dimensions on the output and the same ones on one or both operands (one without them is shared).
/// Several batch dimensions (`c[b, h, i, j]`) are one batch of their product; they must all be run-time
/// extents. Anything more (a scale, an epilogue, a third input) stays a program.
fn contraction_matmul(p: &Program) -> Option<MatmulSpec> {
    use crate::program::{Binary, Expr, Reduce};
    let [stmt] = &p.stmts[..] else { return None };
    if p.inputs.len() != 2 || !p.params.is_empty() || !stmt.output {
        return None;
    }
    let Expr::Reduce(Reduce::Sum, over, body) = &stmt.expr else {
        return None;
    };
    let (&[k], Expr::Binary(Binary::Mul, x, y)) = (&over[..], body.as_ref()) else {
        return None;
    };
    let (Expr::Input(x), Expr::Input(y)) = (x.as_ref(), y.as_ref()) else {
        return None;
    };
    let (batch, i, j) = match &stmt.axes[..] {
        [batch @ .., i, j] => (batch, *i, *j),
        _ => return None,
    };
    // The operand holding the output's row dimension is A.
    let (a, b) = if p.inputs[*x].axes.contains(&i) {
        (*x, *y)
    } else {
        (*y, *x)
    };
    let (ta, tb) = (&p.inputs[a].axes, &p.inputs[b].axes);
    // An operand's axes: the batch dimensions first or none of them, then its two matrix dimensions.
    let matrix = |axes: &[usize]| -> Option<(bool, usize, usize)> {
        match axes {
            [r, c] => Some((false, *r, *c)),
            [lead @ .., r, c] if !batch.is_empty() && lead == batch => Some((true, *r, *c)),
            _ => None,
        }
    };
    let ((a_batched, a0, a1), (b_batched, b0, b1)) = (matrix(ta)?, matrix(tb)?);
    let trans_a = match (a0, a1) {
        (r, c) if r == i && c == k => false,
        (r, c) if r == k && c == i => true,
        _ => return None,
    };
    let trans_b = match (b0, b1) {
        (r, c) if r == k && c == j => false,
        (r, c) if r == j && c == k => true,
        _ => return None,
    };
    let batched = !batch.is_empty();
    if batched && !a_batched && !b_batched {
        return None;
    }
    let dim = |d: usize| p.dims[d].size;
    let name = |d: usize| p.dims[d].name.clone();
    let batch_dim = match batch {
        [] => Dim::Fixed(1),
        [one] => dim(*one),
        several if several.iter().all(|&d| dim(d) == Dim::Runtime) => Dim::Runtime,
        _ => return None,
    };
    Some(MatmulSpec {
        precision: p.precision,
        batched,
        trans_a,
        trans_b,
        shared_a: batched && !a_batched,
        shared_b: batched && !b_batched,
        alpha: false,
        beta: false,
        bias: false,
        activation: None,
        triangle: None,
        batch: batch_dim,
        m: dim(i),
        n: dim(j),
        k: dim(k),
        names: Some(Box::new(MatmulNames {
            a: p.inputs[a].name.clone(),
            b: p.inputs[b].name.clone(),
            c: stmt.name.clone(),
            batch: batch.iter().map(|&d| name(d)).collect(),
            m: name(i),
            n: name(j),
            k: name(k),
        })),
    })
}

/// The elementwise maps of the phrase vocabulary (`relu`, `x + y`, `x * s` …). They lower to tensor programs
/// ([`ElementwiseOp::program`]); the names of the program (`x`, `y`, `out`, `s`, `n`) are the ones these specs
/// have always taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnaryOp {
    Relu,
    /// Exact GELU.
    Gelu,
    /// `v · sigmoid(v)` (swish).
    Silu,
    Sigmoid,
    Tanh,
}

impl UnaryOp {
    /// The right side of `out[n] = …` in index notation.
    fn notation(self) -> &'static str {
        match self {
            UnaryOp::Relu => "relu(x[n])",
            UnaryOp::Gelu => "0.5 * x[n] * (1 + erf(x[n] / sqrt(2)))",
            UnaryOp::Silu => "x[n] * sigmoid(x[n])",
            UnaryOp::Sigmoid => "sigmoid(x[n])",
            UnaryOp::Tanh => "tanh(x[n])",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BinaryOp {
    Add,
    Mul,
}

impl BinaryOp {
    fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Mul => "mul",
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Mul => "*",
        }
    }
}

/// The right-hand side of a binary map: a second tensor `y` or a run-time scalar `s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operand {
    Tensor,
    Scalar,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ElementwiseOp {
    Unary(UnaryOp),
    Binary(BinaryOp, Operand),
}

impl ElementwiseOp {
    /// The map as a flat tensor program over `n` elements, `n` fixed when the spec gave it.
    fn program(self, n: Dim, dtype: DType) -> Result<Program, SpecError> {
        let rhs = match self {
            ElementwiseOp::Unary(u) => u.notation().to_string(),
            ElementwiseOp::Binary(b, Operand::Tensor) => format!("x[n] {} y[n]", b.symbol()),
            ElementwiseOp::Binary(b, Operand::Scalar) => format!("x[n] {} s", b.symbol()),
        };
        let mut text = format!("out[n] = {rhs}, {}", dtype.name());
        if let Dim::Fixed(v) = n {
            text.push_str(&format!(", n={v}"));
        }
        notation::parse(&text)
    }
}

/// The matmul and elementwise phrase parser.
fn phrases(text: &str) -> Result<Spec, SpecError> {
    let tokens = tokenize(text)?;
    if tokens.iter().all(|t| matches!(t, Tok::Sep)) {
        return Err(SpecError::Empty);
    }
    let mut draft = Draft::default();
    for clause in tokens.split(|t| matches!(t, Tok::Sep)) {
        if clause.is_empty() {
            continue;
        }
        if clause.iter().any(|t| matches!(t, Tok::Sym('='))) {
            clause_with_equals(clause, &mut draft)?;
        } else {
            phrase(clause, &mut draft)?;
        }
    }
    draft.finish()
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Num(u64),
    /// One of `* + = ( )`, or `T` for a transpose mark (`ᵀ`, `^T`, `.T`, `'`).
    Sym(char),
    Sep,
}

fn tokenize(text: &str) -> Result<Vec<Tok>, SpecError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if (c.is_alphanumeric() || c == '_') && c != 'ᵀ' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_')
                && chars[i] != 'ᵀ'
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect::<String>().to_lowercase();
            if word.chars().all(|c| c.is_ascii_digit()) {
                let value = word.parse::<u64>().map_err(|_| SpecError::BadShape {
                    name: word.clone(),
                    reason: "the number is too large".into(),
                })?;
                out.push(Tok::Num(value));
            } else {
                out.push(Tok::Word(word));
            }
            continue;
        }
        match c {
            ',' | ';' => out.push(Tok::Sep),
            '·' | '⋅' | '∙' | '×' | '*' | '@' => out.push(Tok::Sym('*')),
            '+' | '=' | '(' | ')' => out.push(Tok::Sym(c)),
            'ᵀ' | '\'' | '′' => out.push(Tok::Sym('T')),
            '^' | '.'
                if matches!(chars.get(i + 1), Some('t' | 'T'))
                    && !chars.get(i + 2).is_some_and(|c| c.is_alphanumeric()) =>
            {
                out.push(Tok::Sym('T'));
                i += 1;
            }
            // A minus before a number right after `=` is a sign, which no size has: `m=-1` once read as `m=1`.
            '-' | '–'
                if matches!(out.last(), Some(Tok::Sym('=')))
                    && chars.get(i + 1).is_some_and(|c| c.is_ascii_digit()) =>
            {
                let dim = match out.len().checked_sub(2).map(|i| &out[i]) {
                    Some(Tok::Word(w)) => w.clone(),
                    _ => "?".into(),
                };
                let digits: String = chars[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .take(20)
                    .collect();
                return Err(SpecError::BadShape {
                    reason: format!("`{dim}=-{digits}`: a size is a positive whole number"),
                    name: dim,
                });
            }
            // `row-major`, `element-wise`: a hyphen joins words like a space does.
            '-' | '–' => {}
            '.' if i + 1 == chars.len() => {}
            c if c.is_whitespace() => {}
            c => return Err(SpecError::UnexpectedChar(c)),
        }
        i += 1;
    }
    Ok(out)
}

/// Everything the clauses said, before it is checked for consistency.
#[derive(Default)]
struct Draft {
    matmul: Option<String>,
    batched: Option<String>,
    elementwise: Option<String>,
    dtypes: Vec<(DType, String)>,
    tf32: Option<String>,
    /// `exact`: fp32 multiply-adds only.
    exact: Option<String>,
    trans_a: bool,
    trans_b: bool,
    shared_a: Option<String>,
    shared_b: Option<String>,
    alpha: bool,
    beta: bool,
    bias: bool,
    triangle: Vec<(Triangle, String)>,
    unary: Vec<(UnaryOp, String)>,
    binary: Vec<(BinaryOp, String)>,
    operand: Vec<(Operand, String)>,
    shapes: Vec<(String, u64)>,
}

/// What a vocabulary phrase means.
#[derive(Clone, Copy, Debug)]
enum Meaning {
    Matmul,
    Batched,
    BatchedMatmul,
    Elementwise,
    DType(DType),
    UnsupportedDType(&'static str),
    Tf32,
    Exact,
    RowMajor,
    ColumnMajor,
    TransA,
    TransB,
    Codes(bool, bool),
    SharedA,
    SharedB,
    Alpha,
    Beta,
    Bias,
    Triangle(Triangle),
    Unary(UnaryOp),
    Binary(BinaryOp),
    Operand(Operand),
    AmbiguousProduct,
    Filler,
}

/// The vocabulary. Multi-word phrases are written with spaces; `^t` is a transpose mark.
const VOCABULARY: &[(&str, Meaning)] = &[
    ("matmul", Meaning::Matmul),
    ("mat mul", Meaning::Matmul),
    ("gemm", Meaning::Matmul),
    ("sgemm", Meaning::Matmul),
    ("mm", Meaning::Matmul),
    ("matrix multiply", Meaning::Matmul),
    ("matrix multiplication", Meaning::Matmul),
    ("matrix product", Meaning::Matmul),
    ("matrix products", Meaning::Matmul),
    ("matrix matrix product", Meaning::Matmul),
    ("matrix matrix multiplication", Meaning::Matmul),
    ("matrix multiplications", Meaning::Matmul),
    ("matmuls", Meaning::Matmul),
    ("gemms", Meaning::Matmul),
    ("bmm", Meaning::BatchedMatmul),
    ("bgemm", Meaning::BatchedMatmul),
    ("batched", Meaning::Batched),
    ("batch", Meaning::Batched),
    ("strided batched", Meaning::Batched),
    ("batch of", Meaning::Batched),
    ("elementwise", Meaning::Elementwise),
    ("element wise", Meaning::Elementwise),
    ("pointwise", Meaning::Elementwise),
    ("map", Meaning::Elementwise),
    ("unary", Meaning::Elementwise),
    ("binary", Meaning::Elementwise),
    ("f32", Meaning::DType(DType::F32)),
    ("fp32", Meaning::DType(DType::F32)),
    ("float32", Meaning::DType(DType::F32)),
    ("float", Meaning::DType(DType::F32)),
    ("single", Meaning::DType(DType::F32)),
    ("single precision", Meaning::DType(DType::F32)),
    ("f16", Meaning::DType(DType::F16)),
    ("fp16", Meaning::DType(DType::F16)),
    ("float16", Meaning::DType(DType::F16)),
    ("half", Meaning::DType(DType::F16)),
    ("bf16", Meaning::DType(DType::Bf16)),
    ("bfloat16", Meaning::DType(DType::Bf16)),
    // Once suggested `float`, which is another type.
    ("bfloat", Meaning::DType(DType::Bf16)),
    ("tf32", Meaning::Tf32),
    ("tf32 allowed", Meaning::Tf32),
    ("allow tf32", Meaning::Tf32),
    ("tensor float 32", Meaning::Tf32),
    ("exact", Meaning::Exact),
    ("f64", Meaning::UnsupportedDType("f64")),
    ("fp64", Meaning::UnsupportedDType("f64")),
    ("float64", Meaning::UnsupportedDType("f64")),
    ("double", Meaning::UnsupportedDType("f64")),
    ("int8", Meaning::UnsupportedDType("i8")),
    ("i8", Meaning::UnsupportedDType("i8")),
    ("fp8", Meaning::UnsupportedDType("fp8")),
    ("row major", Meaning::RowMajor),
    ("rowmajor", Meaning::RowMajor),
    ("c order", Meaning::RowMajor),
    ("column major", Meaning::ColumnMajor),
    ("col major", Meaning::ColumnMajor),
    ("colmajor", Meaning::ColumnMajor),
    ("a transposed", Meaning::TransA),
    ("transposed a", Meaning::TransA),
    ("transpose a", Meaning::TransA),
    ("trans a", Meaning::TransA),
    ("transa", Meaning::TransA),
    ("trans_a", Meaning::TransA),
    ("a ^t", Meaning::TransA),
    ("b transposed", Meaning::TransB),
    ("transposed b", Meaning::TransB),
    ("transpose b", Meaning::TransB),
    ("trans b", Meaning::TransB),
    ("transb", Meaning::TransB),
    ("trans_b", Meaning::TransB),
    ("b ^t", Meaning::TransB),
    ("shared a", Meaning::SharedA),
    ("a shared", Meaning::SharedA),
    ("broadcast a", Meaning::SharedA),
    ("a broadcast", Meaning::SharedA),
    ("same a", Meaning::SharedA),
    ("shared b", Meaning::SharedB),
    ("b shared", Meaning::SharedB),
    ("broadcast b", Meaning::SharedB),
    ("b broadcast", Meaning::SharedB),
    ("same b", Meaning::SharedB),
    ("tensor times a matrix", Meaning::SharedB),
    ("tensor times matrix", Meaning::SharedB),
    ("nn", Meaning::Codes(false, false)),
    ("nt", Meaning::Codes(false, true)),
    ("tn", Meaning::Codes(true, false)),
    ("tt", Meaning::Codes(true, true)),
    ("alpha", Meaning::Alpha),
    ("scaled", Meaning::Alpha),
    ("scaled by alpha", Meaning::Alpha),
    ("beta", Meaning::Beta),
    ("accumulate", Meaning::Beta),
    ("accumulating", Meaning::Beta),
    ("accumulate into c", Meaning::Beta),
    ("bias", Meaning::Bias),
    ("add bias", Meaning::Bias),
    ("bias add", Meaning::Bias),
    ("plus bias", Meaning::Bias),
    ("upper triangular", Meaning::Triangle(Triangle::Upper)),
    (
        "upper triangular matrices",
        Meaning::Triangle(Triangle::Upper),
    ),
    (
        "upper triangular matrix",
        Meaning::Triangle(Triangle::Upper),
    ),
    ("upper triangle", Meaning::Triangle(Triangle::Upper)),
    ("triu", Meaning::Triangle(Triangle::Upper)),
    ("lower triangular", Meaning::Triangle(Triangle::Lower)),
    (
        "lower triangular matrices",
        Meaning::Triangle(Triangle::Lower),
    ),
    (
        "lower triangular matrix",
        Meaning::Triangle(Triangle::Lower),
    ),
    ("lower triangle", Meaning::Triangle(Triangle::Lower)),
    ("tril", Meaning::Triangle(Triangle::Lower)),
    ("relu", Meaning::Unary(UnaryOp::Relu)),
    ("gelu", Meaning::Unary(UnaryOp::Gelu)),
    ("silu", Meaning::Unary(UnaryOp::Silu)),
    ("swish", Meaning::Unary(UnaryOp::Silu)),
    ("sigmoid", Meaning::Unary(UnaryOp::Sigmoid)),
    ("logistic", Meaning::Unary(UnaryOp::Sigmoid)),
    ("tanh", Meaning::Unary(UnaryOp::Tanh)),
    ("add", Meaning::Binary(BinaryOp::Add)),
    ("addition", Meaning::Binary(BinaryOp::Add)),
    ("plus", Meaning::Binary(BinaryOp::Add)),
    ("mul", Meaning::Binary(BinaryOp::Mul)),
    ("multiply", Meaning::Binary(BinaryOp::Mul)),
    ("multiplication", Meaning::Binary(BinaryOp::Mul)),
    ("times", Meaning::Binary(BinaryOp::Mul)),
    ("hadamard", Meaning::Binary(BinaryOp::Mul)),
    ("hadamard product", Meaning::Binary(BinaryOp::Mul)),
    ("elementwise product", Meaning::Binary(BinaryOp::Mul)),
    ("element wise product", Meaning::Binary(BinaryOp::Mul)),
    ("scale", Meaning::Binary(BinaryOp::Mul)),
    ("product", Meaning::AmbiguousProduct),
    ("products", Meaning::AmbiguousProduct),
    ("scalar", Meaning::Operand(Operand::Scalar)),
    ("a scalar", Meaning::Operand(Operand::Scalar)),
    ("tensor", Meaning::Operand(Operand::Tensor)),
    ("a tensor", Meaning::Operand(Operand::Tensor)),
    ("two tensors", Meaning::Operand(Operand::Tensor)),
    ("vector", Meaning::Operand(Operand::Tensor)),
    ("a", Meaning::Filler),
    ("an", Meaning::Filler),
    ("the", Meaning::Filler),
    ("of", Meaning::Filler),
    ("with", Meaning::Filler),
    ("for", Meaning::Filler),
    ("and", Meaning::Filler),
    ("by", Meaning::Filler),
    ("in", Meaning::Filler),
    ("kernel", Meaning::Filler),
    ("op", Meaning::Filler),
    ("operation", Meaning::Filler),
    ("precision", Meaning::Filler),
    ("fused", Meaning::Filler),
    ("epilogue", Meaning::Filler),
    ("then", Meaning::Filler),
    ("followed by", Meaning::Filler),
    ("activation", Meaning::Filler),
    ("+", Meaning::Filler),
];

/// A phrase's words, split once.
fn phrase_words(phrase: &str) -> impl Iterator<Item = &str> {
    phrase.split(' ')
}

/// A token as the vocabulary spells it.
fn vocab_word(tok: &Tok) -> Option<String> {
    match tok {
        Tok::Word(w) => Some(w.clone()),
        Tok::Sym('T') => Some("^t".into()),
        Tok::Sym('+') => Some("+".into()),
        _ => None,
    }
}

fn phrase(clause: &[Tok], draft: &mut Draft) -> Result<(), SpecError> {
    let words: Vec<Option<String>> = clause.iter().map(vocab_word).collect();
    let mut i = 0;
    while i < words.len() {
        let Some(word) = &words[i] else {
            return Err(match &clause[i] {
                Tok::Num(n) => SpecError::StrayNumber(*n),
                Tok::Sym(c) => SpecError::UnexpectedChar(*c),
                _ => SpecError::Empty,
            });
        };
        // Longest vocabulary phrase that matches here.
        let mut best: Option<(usize, Meaning, &str)> = None;
        for (text, meaning) in VOCABULARY {
            let len = phrase_words(text).count();
            let fits = i + len <= words.len()
                && phrase_words(text)
                    .zip(&words[i..i + len])
                    .all(|(p, w)| w.as_deref() == Some(p));
            if fits && best.is_none_or(|(l, _, _)| len > l) {
                best = Some((len, *meaning, text));
            }
        }
        let Some((len, meaning, text)) = best else {
            return Err(SpecError::UnknownWord {
                word: word.clone(),
                closest: closest_word(word),
            });
        };
        apply(meaning, text, draft)?;
        i += len;
    }
    Ok(())
}

fn apply(meaning: Meaning, text: &str, draft: &mut Draft) -> Result<(), SpecError> {
    let text = text.to_string();
    match meaning {
        Meaning::Matmul => draft.matmul = Some(text),
        Meaning::Batched => draft.batched = Some(text),
        Meaning::BatchedMatmul => {
            draft.matmul = Some(text.clone());
            draft.batched = Some(text);
        }
        Meaning::Elementwise => draft.elementwise = Some(text),
        Meaning::DType(d) => draft.dtypes.push((d, text)),
        Meaning::UnsupportedDType(d) => {
            return Err(SpecError::Unsupported {
                what: format!("dtype `{d}` (from `{text}`)"),
                hint: "f32, bf16 and f16 kernels are generated so far".into(),
            });
        }
        Meaning::Tf32 => draft.tf32 = Some(text),
        Meaning::Exact => draft.exact = Some(text),
        Meaning::RowMajor => {}
        Meaning::ColumnMajor => {
            return Err(SpecError::Unsupported {
                what: "column-major layout".into(),
                hint: "write the product row-major: a column-major C = A·B is the row-major Cᵀ = Bᵀ·Aᵀ".into(),
            });
        }
        Meaning::TransA => draft.trans_a = true,
        Meaning::SharedA => draft.shared_a = Some(text),
        Meaning::SharedB => draft.shared_b = Some(text),
        Meaning::TransB => draft.trans_b = true,
        Meaning::Codes(a, b) => {
            draft.trans_a |= a;
            draft.trans_b |= b;
        }
        Meaning::Alpha => draft.alpha = true,
        Meaning::Beta => draft.beta = true,
        Meaning::Bias => draft.bias = true,
        Meaning::Triangle(t) => draft.triangle.push((t, text)),
        Meaning::Unary(u) => draft.unary.push((u, text)),
        Meaning::Binary(b) => draft.binary.push((b, text)),
        Meaning::Operand(o) => draft.operand.push((o, text)),
        Meaning::AmbiguousProduct => {
            return Err(SpecError::Ambiguous {
                what: format!("`{text}` alone"),
                hint: "write `matrix product` (matmul) or `elementwise product` (mul)".into(),
            });
        }
        Meaning::Filler => {}
    }
    Ok(())
}

/// Shapes (`k=1024`, `m=n=512`) and equations (`C = A·Bᵀ`).
fn clause_with_equals(clause: &[Tok], draft: &mut Draft) -> Result<(), SpecError> {
    // A shape: names joined by `=`, ending in a number.
    if let Some(Tok::Num(value)) = clause.last() {
        let names = &clause[..clause.len() - 1];
        let mut parsed = Vec::new();
        let mut ok = names.len() >= 2 && names.len().is_multiple_of(2);
        for pair in names.chunks(2) {
            match pair {
                [Tok::Word(name), Tok::Sym('=')] => parsed.push(name.clone()),
                _ => ok = false,
            }
        }
        if ok {
            for name in parsed {
                draft.shapes.push((name, *value));
            }
            return Ok(());
        }
    }
    let Some(eq) = clause.iter().position(|t| matches!(t, Tok::Sym('='))) else {
        return Err(SpecError::BadEquation("expected `=`".into()));
    };
    let (lhs, rhs) = (&clause[..eq], &clause[eq + 1..]);
    let accumulate = matches!(lhs.last(), Some(Tok::Sym('+')));
    let lhs_name = match lhs {
        [Tok::Word(w)] | [Tok::Word(w), Tok::Sym('+')] => w.clone(),
        _ => {
            return Err(SpecError::BadEquation(
                "the left side must be one name, e.g. `C = A·B`".into(),
            ));
        }
    };
    if rhs.iter().any(|t| matches!(t, Tok::Sym('='))) {
        return Err(SpecError::BadEquation("more than one `=`".into()));
    }
    equation(&lhs_name, accumulate, rhs, draft)
}

fn equation(lhs: &str, accumulate: bool, rhs: &[Tok], draft: &mut Draft) -> Result<(), SpecError> {
    let names: Vec<&str> = rhs
        .iter()
        .filter_map(|t| match t {
            Tok::Word(w) => Some(w.as_str()),
            _ => None,
        })
        .collect();
    let is_fn = |i: usize| matches!(rhs.get(i + 1), Some(Tok::Sym('(')));
    if let Some(Tok::Num(n)) = rhs.iter().find(|t| matches!(t, Tok::Num(_))) {
        return Err(SpecError::BadEquation(format!(
            "the constant `{n}`: constants are run-time parameters (name it, e.g. `alpha` or `s`)"
        )));
    }
    if names.contains(&"a") && names.contains(&"b") {
        draft.matmul = Some("equation".into());
        return product_equation(lhs, accumulate, rhs, draft);
    }
    // Elementwise: out = f(x), out = x ⊕ y, out = x ⊕ s.
    if accumulate {
        return Err(SpecError::BadEquation(format!(
            "`{lhs} += …`: an elementwise kernel writes its output, it does not add to it (write `{lhs} = …`)"
        )));
    }
    draft.elementwise = Some("equation".into());
    let functions_before = draft.unary.len();
    let mut operands = Vec::new();
    for (i, tok) in rhs.iter().enumerate() {
        let Tok::Word(w) = tok else { continue };
        if is_fn(i) {
            function(w, draft)?;
        } else {
            operands.push(w.as_str());
        }
    }
    let op = if rhs.contains(&Tok::Sym('+')) {
        Some(BinaryOp::Add)
    } else if rhs.contains(&Tok::Sym('*')) {
        Some(BinaryOp::Mul)
    } else {
        None
    };
    if rhs.contains(&Tok::Sym('+')) && rhs.contains(&Tok::Sym('*')) {
        return Err(SpecError::Ambiguous {
            what: "both `+` and `*` in one elementwise equation".into(),
            hint: "fused elementwise chains are not supported yet: one operation per kernel".into(),
        });
    }
    match (operands.as_slice(), op) {
        ([_], None) if draft.unary.len() > functions_before => {}
        ([x], None) => {
            return Err(SpecError::BadEquation(format!(
                "`{lhs} = {x}` computes nothing: write `{lhs} = f({x})` with a function such as relu, or a sum or \
                 product"
            )));
        }
        ([_, rhs_name], Some(op)) => {
            let operand = if matches!(*rhs_name, "s" | "scalar" | "alpha" | "c") {
                Operand::Scalar
            } else {
                Operand::Tensor
            };
            draft.binary.push((op, format!("equation `{}`", op.name())));
            draft.operand.push((operand, "equation".into()));
        }
        _ => {
            return Err(SpecError::BadEquation(format!(
                "`{lhs} = …` must be `f(x)`, `x + y`, `x * y`, `x + s` or `x * s`"
            )));
        }
    }
    Ok(())
}

/// A matrix product's equation, read as a structure so that every name and mark means what it says:
/// `[act(] [alpha·] A[ᵀ]·B[ᵀ] [+ beta·C | + C] [+ bias] [)]`, the activation around the whole right side, the
/// factors of the product in this order (`·` may be left out: `A B'`), each term at most once. Anything else is
/// an error naming what it would have meant: `B·A`, `A·B·B`, `(A·B)ᵀ`, `A·ᵀB`, `relu(A)·B` and `A·B·bias`
/// were once read as `A·B` with a flag.
fn product_equation(
    lhs: &str,
    accumulate: bool,
    rhs: &[Tok],
    draft: &mut Draft,
) -> Result<(), SpecError> {
    let bad = |what: String| Err(SpecError::BadEquation(what));
    // Names are read in lower case; the one-letter matrices read better as written in the docs.
    let show = |n: &str| {
        if n.len() == 1 {
            n.to_uppercase()
        } else {
            n.to_string()
        }
    };
    let lhs_shown = show(lhs);
    let join = |f: &[&str]| f.iter().map(|n| show(n)).collect::<Vec<_>>().join("·");
    // The activation, when it wraps the whole right side.
    let mut body = rhs;
    if let [Tok::Word(f), Tok::Sym('('), inner @ .., Tok::Sym(')')] = rhs
        && balanced(inner)
    {
        function(f, draft)?;
        body = inner;
    }
    // Terms at top level, split at `+`.
    let mut terms: Vec<&[Tok]> = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, t) in body.iter().enumerate() {
        match t {
            Tok::Sym('(') => depth += 1,
            Tok::Sym(')') => depth = depth.saturating_sub(1),
            Tok::Sym('+') if depth == 0 => {
                terms.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&body[start..]);
    let mut product = false;
    for term in terms {
        // A term's factors: names, each optionally transposed, joined by `·` or by nothing.
        let mut factors: Vec<(&str, bool)> = Vec::new();
        let mut i = 0;
        while i < term.len() {
            match &term[i] {
                Tok::Word(w) if matches!(term.get(i + 1), Some(Tok::Sym('('))) => {
                    return bad(format!(
                        "`{w}(…)` inside the product: an activation applies to the whole result, as in \
                         `{lhs_shown} = {w}(A·B)`"
                    ));
                }
                Tok::Word(w) => {
                    let t = matches!(term.get(i + 1), Some(Tok::Sym('T')));
                    factors.push((w.as_str(), t));
                    i += 1 + usize::from(t);
                    continue;
                }
                Tok::Sym('*') if i > 0 && matches!(term.get(i + 1), Some(Tok::Word(_))) => {}
                Tok::Sym('T') | Tok::Sym('*')
                    if term[i] == Tok::Sym('T')
                        || matches!(term.get(i + 1), Some(Tok::Sym('T'))) =>
                {
                    return bad(
                        "a transpose mark must follow the operand it transposes, as in `Aᵀ·B`"
                            .into(),
                    );
                }
                Tok::Sym('(' | ')') => {
                    return bad(
                        "parentheses inside a matrix product: only an activation may wrap the whole right \
                         side (a transposed product, `(A·B)ᵀ`, is not a layout optiml computes: transpose the \
                         operands instead)"
                            .into(),
                    );
                }
                _ => return bad("a product needs a name on each side of `·`".into()),
            }
            i += 1;
        }
        let names: Vec<&str> = factors.iter().map(|f| f.0).collect();
        match names.as_slice() {
            ["a", "b"] | ["alpha", "a", "b"] => {
                if product {
                    return bad("two products `A·B`".into());
                }
                product = true;
                draft.alpha |= names[0] == "alpha";
                let at = |n: &str| factors.iter().find(|f| f.0 == n).is_some_and(|f| f.1);
                draft.trans_a |= at("a");
                draft.trans_b |= at("b");
            }
            ["beta", c] | [c] if *c == lhs && !draft.beta => draft.beta = true,
            ["bias"] if !draft.bias => draft.bias = true,
            ["b", "a"] | ["alpha", "b", "a"] => {
                return bad(
                    "`B·A`: the product is written `A·B` (A has the output's rows); to multiply the other way \
                     round, swap the buffers"
                        .into(),
                );
            }
            f if f.contains(&"bias") => {
                return bad("`bias` is added to the product: `A·B + bias`".into());
            }
            f if f.contains(&"a") || f.contains(&"b") => {
                return bad(format!(
                    "`{}`: a matrix product is `A·B`, optionally scaled by `alpha` (each operand once, A first)",
                    join(f)
                ));
            }
            f => {
                let unknown = f
                    .iter()
                    .find(|n| !matches!(**n, "alpha" | "beta" | "bias") && **n != lhs)
                    .copied()
                    .unwrap_or(f.first().copied().unwrap_or(""));
                if unknown.is_empty()
                    || matches!(unknown, "alpha" | "beta" | "bias")
                    || unknown == lhs
                {
                    return bad(format!(
                        "the term `{}`: a matrix product can only add `beta·{lhs_shown}` (or `{lhs_shown}`) and \
                         `bias`, each once",
                        join(f)
                    ));
                }
                return bad(format!(
                    "unknown name `{unknown}` in a matrix product (known: A, B, C, alpha, beta, bias, relu(…), \
                     gelu(…))"
                ));
            }
        }
    }
    if !product {
        return bad("no product `A·B` on the right side".into());
    }
    if accumulate {
        draft.beta = true;
    }
    Ok(())
}

/// Whether `toks` close every parenthesis they open, never going below zero: `relu(A)·(B)` is not one call.
fn balanced(toks: &[Tok]) -> bool {
    let mut depth = 0i64;
    for t in toks {
        match t {
            Tok::Sym('(') => depth += 1,
            Tok::Sym(')') => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

fn function(name: &str, draft: &mut Draft) -> Result<(), SpecError> {
    let op = match name {
        "relu" => UnaryOp::Relu,
        "gelu" => UnaryOp::Gelu,
        "silu" | "swish" => UnaryOp::Silu,
        "sigmoid" => UnaryOp::Sigmoid,
        "tanh" => UnaryOp::Tanh,
        other => {
            return Err(SpecError::UnknownWord {
                word: other.to_string(),
                closest: closest_word(other),
            });
        }
    };
    draft.unary.push((op, name.to_string()));
    Ok(())
}

impl Draft {
    fn finish(self) -> Result<Spec, SpecError> {
        let dtype = match self.dtypes.as_slice() {
            [] => DType::F32,
            [(d, _), rest @ ..] => {
                if let Some((_, other)) = rest.iter().find(|(o, _)| o != d) {
                    return Err(SpecError::Ambiguous {
                        what: format!("two dtypes, `{}` and `{other}`", self.dtypes[0].1),
                        hint: "name one element type".into(),
                    });
                }
                *d
            }
        };
        let family = if self.matmul.is_some()
            || (self.batched.is_some() && self.elementwise.is_none())
        {
            self.matmul_family()?
        } else if self.elementwise.is_some() || !self.unary.is_empty() || !self.binary.is_empty() {
            Family::Tensor(self.elementwise_program(dtype)?)
        } else {
            return Err(SpecError::NoFamily);
        };
        if dtype != DType::F32 {
            let word = &self.dtypes[0].1;
            if let Some(tf32) = &self.tf32 {
                return Err(SpecError::Ambiguous {
                    what: format!("`{tf32}` with `{word}` elements"),
                    hint: "tf32 is how f32 products may be rounded; 16-bit operands run on the tensor cores already: drop one".into(),
                });
            }
            if let Some(exact) = &self.exact {
                return Err(SpecError::Ambiguous {
                    what: format!("`{exact}` with `{word}` elements"),
                    hint: "exact keeps f32 products on fp32 multiply-adds; 16-bit operands run on the tensor cores: drop one".into(),
                });
            }
        }
        if let Family::Matmul(m) = &family
            && m.triangle.is_some()
        {
            check_triangular(m, dtype)?;
        }
        Ok(Spec {
            family,
            dtype,
            layout: Layout::RowMajor,
        })
    }

    fn matmul_family(&self) -> Result<Family, SpecError> {
        if self.matmul.is_none() {
            return Err(SpecError::NoFamily);
        }
        if let Some(e) = &self.elementwise {
            return Err(SpecError::Ambiguous {
                what: format!("a matrix product and `{e}`"),
                hint: "one kernel per spec: a matmul (with an optional relu/gelu/silu epilogue) or an elementwise map".into(),
            });
        }
        if let Some((_, word)) = self.binary.first() {
            return Err(SpecError::Ambiguous {
                what: format!("`{word}` in a matrix product"),
                hint: "to add a vector to every row write `bias`; to add the old C write `beta` or `C += A·B`".into(),
            });
        }
        if let Some((_, word)) = self.operand.first() {
            return Err(SpecError::NotForFamily {
                word: word.clone(),
                family: "matmul",
            });
        }
        let activation = match self.unary.as_slice() {
            [] => None,
            [(UnaryOp::Relu, _)] => Some(Activation::Relu),
            [(UnaryOp::Gelu, _)] => Some(Activation::Gelu),
            [(UnaryOp::Silu, _)] => Some(Activation::Silu),
            [(_, word)] => {
                return Err(SpecError::Unsupported {
                    what: format!("`{word}` as a matmul epilogue"),
                    hint: "matmul epilogues are relu, gelu and silu so far".into(),
                });
            }
            [(_, a), (_, b), ..] => {
                return Err(SpecError::Ambiguous {
                    what: format!("two activations, `{a}` and `{b}`"),
                    hint: "a matmul takes one epilogue activation".into(),
                });
            }
        };
        let mut batched = self.batched.is_some();
        let (mut bsz, mut m, mut n, mut k) =
            (Dim::Runtime, Dim::Runtime, Dim::Runtime, Dim::Runtime);
        for (name, value) in &self.shapes {
            let slot = match name.as_str() {
                "batch" | "b" | "batches" => {
                    batched = true;
                    &mut bsz
                }
                "m" => &mut m,
                "n" => &mut n,
                "k" => &mut k,
                other => {
                    return Err(SpecError::BadShape {
                        name: other.to_string(),
                        reason: "a matmul has the dimensions `batch`, `m`, `n` and `k`".into(),
                    });
                }
            };
            set_dim(slot, name, *value, i32::MAX as u64)?;
        }
        if !batched {
            bsz = Dim::Fixed(1);
        }
        // A 3-D tensor times one matrix (or one matrix times a 3-D tensor): the shared operand has no batch
        // items of its own.
        if let Some(word) = self.shared_a.as_ref().or(self.shared_b.as_ref())
            && !batched
        {
            return Err(SpecError::Unsupported {
                what: format!("`{word}` in a product without a batch"),
                hint: "a shared operand is the same matrix for every batch item: write `batched matmul, B shared`"
                    .into(),
            });
        }
        let triangle = match &self.triangle[..] {
            [] => None,
            [(t, _), rest @ ..] => {
                if let Some((_, other)) = rest.iter().find(|(o, _)| o != t) {
                    return Err(SpecError::Ambiguous {
                        what: format!("`{}` and `{other}`", self.triangle[0].1),
                        hint:
                            "a triangular product keeps one triangle: upper (triu) or lower (tril)"
                                .into(),
                    });
                }
                Some(*t)
            }
        };
        if let (Some(a), Some(b)) = (&self.shared_a, &self.shared_b) {
            return Err(SpecError::Ambiguous {
                what: format!("both operands shared (`{a}` and `{b}`)"),
                hint:
                    "every batch item would compute the same product: drop the batch or one of them"
                        .into(),
            });
        }
        if let (Some(tf32), Some(exact)) = (&self.tf32, &self.exact) {
            return Err(SpecError::Ambiguous {
                what: format!("`{tf32}` and `{exact}`"),
                hint: "tf32 lets products round their operands, exact keeps fp32 multiply-adds: drop one".into(),
            });
        }
        Ok(Family::Matmul(MatmulSpec {
            precision: match (&self.tf32, &self.exact) {
                (Some(_), _) => Precision::Tf32,
                (None, Some(_)) => Precision::Fma,
                (None, None) => Precision::Exact,
            },
            batched,
            trans_a: self.trans_a,
            trans_b: self.trans_b,
            shared_a: self.shared_a.is_some(),
            shared_b: self.shared_b.is_some(),
            alpha: self.alpha,
            beta: self.beta,
            bias: self.bias,
            activation,
            triangle,
            batch: bsz,
            m,
            n,
            k,
            names: None,
        }))
    }

    /// The elementwise map the phrases name, as the tensor program computing it.
    fn elementwise_program(&self, dtype: DType) -> Result<Program, SpecError> {
        if let Some(word) = self.tf32.as_ref().or(self.exact.as_ref()) {
            return Err(SpecError::NotForFamily {
                word: word.clone(),
                family: "elementwise",
            });
        }
        for (on, word) in [
            (self.trans_a || self.trans_b, "transposed"),
            (self.shared_a.is_some() || self.shared_b.is_some(), "shared"),
            (self.alpha, "alpha"),
            (self.beta, "beta"),
            (self.bias, "bias"),
            (self.batched.is_some(), "batched"),
            (!self.triangle.is_empty(), "triangular"),
        ] {
            if on {
                return Err(SpecError::NotForFamily {
                    word: word.into(),
                    family: "elementwise",
                });
            }
        }
        let op = match (self.unary.as_slice(), self.binary.as_slice()) {
            ([(u, _)], []) => {
                if let Some((_, word)) = self.operand.first() {
                    return Err(SpecError::NotForFamily {
                        word: word.clone(),
                        family: "unary elementwise",
                    });
                }
                ElementwiseOp::Unary(*u)
            }
            ([], [(b, _)]) => {
                let operand = match self.operand.as_slice() {
                    [] => Operand::Tensor,
                    [(o, _), rest @ ..] => {
                        if let Some((_, other)) = rest.iter().find(|(p, _)| p != o) {
                            return Err(SpecError::Ambiguous {
                                what: format!("`{}` and `{other}`", self.operand[0].1),
                                hint: "the second operand is either a tensor or a scalar".into(),
                            });
                        }
                        *o
                    }
                };
                ElementwiseOp::Binary(*b, operand)
            }
            ([], []) => {
                return Err(SpecError::Ambiguous {
                    what: "an elementwise map without an operation".into(),
                    hint: "name one: relu, gelu, silu, sigmoid, tanh, add or mul".into(),
                });
            }
            _ => {
                let words: Vec<String> = self
                    .unary
                    .iter()
                    .map(|(_, w)| w.clone())
                    .chain(self.binary.iter().map(|(_, w)| w.clone()))
                    .collect();
                return Err(SpecError::Ambiguous {
                    what: format!(
                        "several operations ({})",
                        words
                            .iter()
                            .map(|w| format!("`{w}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    hint:
                        "fused elementwise chains are not supported yet: one operation per kernel"
                            .into(),
                });
            }
        };
        let mut n = Dim::Runtime;
        for (name, value) in &self.shapes {
            match name.as_str() {
                "n" | "len" | "length" | "size" => set_dim(&mut n, name, *value, 1 << 62)?,
                other => {
                    return Err(SpecError::BadShape {
                        name: other.to_string(),
                        reason: "an elementwise map has one dimension, `n`".into(),
                    });
                }
            }
        }
        op.program(n, dtype)
    }
}

fn set_dim(slot: &mut Dim, name: &str, value: u64, max: u64) -> Result<(), SpecError> {
    if value == 0 || value > max {
        return Err(SpecError::BadShape {
            name: name.into(),
            reason: format!("must be between 1 and {max}"),
        });
    }
    if let Dim::Fixed(old) = *slot
        && old != value
    {
        return Err(SpecError::BadShape {
            name: name.into(),
            reason: format!("given twice ({old} and {value})"),
        });
    }
    *slot = Dim::Fixed(value);
    Ok(())
}

/// The vocabulary word closest to `word` by edit distance, if any is close enough to be a likely typo.
fn closest_word(word: &str) -> Option<String> {
    let mut candidates: Vec<&str> = VOCABULARY
        .iter()
        .flat_map(|(p, _)| phrase_words(p))
        .collect();
    candidates.extend(["softmax", "layernorm", "reduce", "transpose", "conv"]);
    candidates.retain(|c| c.len() > 1 && *c != "^t");
    let (best, dist) = candidates
        .into_iter()
        .map(|c| (c, edit_distance(word, c)))
        .min_by_key(|(_, d)| *d)?;
    let limit = (word.chars().count() / 3).max(1);
    (dist <= limit && dist > 0).then(|| best.to_string())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mm(text: &str) -> MatmulSpec {
        match parse(text)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
            .family
        {
            Family::Matmul(m) => m,
            other => panic!("{text:?} parsed as {other:?}"),
        }
    }

    fn canonical(text: &str) -> String {
        parse(text)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
            .canonical()
    }

    #[test]
    fn a_contraction_in_index_notation_is_a_matmul() {
        assert_eq!(
            canonical("c[i, j] = sum(k) a[i, k] * b[k, j]"),
            canonical("matmul, f32")
        );
        assert_eq!(
            canonical("out[r, q] = sum(p) y[q, p] * x[p, r]"),
            canonical("matmul, B transposed, A transposed")
        );
        assert_eq!(
            canonical("c[z, i, j] = sum(k) a[z, i, k] * b[k, j]"),
            canonical("batched matmul, B shared")
        );
        assert_eq!(
            canonical("c[i, j] = sum(k) a[i, k] * b[k, j], bf16, k=64"),
            canonical("matmul, bf16, k=64")
        );
        // The names are the signature's: the contraction's own, not a, b, c, m, n, k.
        let spec = parse("c[z, i, j] = sum(k) x[z, i, k] * w[k, j]").unwrap();
        let names = mm("c[z, i, j] = sum(k) x[z, i, k] * w[k, j]")
            .names
            .unwrap();
        assert_eq!(
            (names.a.as_str(), names.b.as_str(), &names.batch[..]),
            ("x", "w", &["z".to_string()][..])
        );
        let sig: syn::Signature = syn::parse_str(
            "fn bmm(x: &CudaSlice<f32>, w: &CudaSlice<f32>, c: &mut CudaSlice<f32>, z: usize, i: usize, j: usize, k: usize)",
        )
        .unwrap();
        let binding = crate::bind(&spec, &sig).unwrap();
        assert_eq!(binding.get(crate::Role::B).unwrap().name, "w");
        // Anything more than the product stays a program.
        for text in [
            "c[i, j] = sum(k) a[i, k] * b[k, j] * 2",
            "c[i, j] = relu(sum(k) a[i, k] * b[k, j])",
            "c[i, j] = sum(k) a[i, k] * b[k, i]",
        ] {
            assert!(
                matches!(parse(text).unwrap().family, Family::Tensor(_)),
                "{text}"
            );
        }
    }

    #[test]
    fn several_batch_dimensions_are_one_batch_of_their_product() {
        // KernelBench 11: einsum("bijl,lk->bijk"), a 4-D tensor times a matrix.
        let text = "y[b, i, j, k] = sum(l) x[b, i, j, l] * w[l, k]";
        assert_eq!(canonical(text), canonical("batched matmul, B shared"));
        let names = mm(text).names.unwrap();
        assert_eq!(names.batch, ["b", "i"]);
        assert_eq!((names.m.as_str(), names.n.as_str()), ("j", "k"));
        let sig: syn::Signature = syn::parse_str(
            "fn p11(x: &CudaSlice<f32>, w: &CudaSlice<f32>, y: &mut CudaSlice<f32>, b: usize, i: usize, j: usize, \
             k: usize, l: usize)",
        )
        .unwrap();
        let binding = crate::bind(&parse(text).unwrap(), &sig).unwrap();
        assert_eq!(binding.get(crate::Role::Batch).unwrap().name, "b");
        assert_eq!(binding.get(crate::Role::BatchAxis(1)).unwrap().name, "i");
        // Both operands batched over both dimensions (attention's scores), and the batch leading A only.
        let both = mm("s[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d]");
        assert!(both.batched && both.trans_b && !both.shared_a && !both.shared_b);
        // Batch dimensions in another order on an operand, or only some of them, are not one product.
        for text in [
            "y[b, i, j, k] = sum(l) x[i, b, j, l] * w[l, k]",
            "y[b, i, j, k] = sum(l) x[b, i, j, l] * w[i, l, k]",
        ] {
            assert!(
                matches!(parse(text).unwrap().family, Family::Tensor(_)),
                "{text}"
            );
        }
    }

    #[test]
    fn triangular_products_in_words_and_in_notation() {
        use crate::Triangle;
        for (text, want) in [
            ("matmul for upper triangular matrices", Triangle::Upper),
            ("triu matmul, f32", Triangle::Upper),
            (
                "c[i, j] = sum(k) a[i, k] * b[k, j] where i <= k <= j",
                Triangle::Upper,
            ),
            ("matmul for lower triangular matrices", Triangle::Lower),
            (
                "c[i, j] = sum(k) a[i, k] * b[k, j] where j <= k <= i, f32",
                Triangle::Lower,
            ),
        ] {
            assert_eq!(mm(text).triangle, Some(want), "{text}");
        }
        assert_eq!(
            canonical("matmul for upper triangular matrices"),
            "matmul f32 row-major a:n b:n triu m=? n=? k=?"
        );
        assert_eq!(
            canonical("x[r, c] = sum(t) p[r, t] * q[t, c] where c <= t <= r"),
            canonical("lower triangular matmul")
        );
        // A plain product keeps the canonical text (and key) it had before triangles.
        assert_eq!(
            canonical("matmul, f32"),
            "matmul f32 row-major a:n b:n m=? n=? k=?"
        );
        let refused = |text: &str| parse(text).unwrap_err().to_string();
        for (text, says) in [
            ("matmul, upper triangular, bf16", "bf16"),
            ("matmul, upper triangular, tf32", "tf32"),
            ("matmul, A transposed, upper triangular", "transposed"),
            ("matmul, upper triangular, bias", "bias"),
            ("matmul, upper triangular, relu", "activation"),
            ("matmul, triu, tril", "one triangle"),
            ("relu, triu", "triangular"),
            (
                "c[i, j] = sum(k) a[i, k] * b[k, j] where j <= k <= j",
                "i <= k <= j",
            ),
            (
                "c[i, j] = sum(k) a[k, i] * b[k, j] where i <= k <= j",
                "transposed",
            ),
            (
                "c[i, j] = sum(k) a[i, k] * b[k, j] where i < k",
                "three index names",
            ),
            (
                "y[i] = x[i] * 2 where i <= i <= i",
                "not one matrix product",
            ),
        ] {
            let e = refused(text);
            assert!(e.contains(says), "{text}: {e}");
        }
        // A `where(…)` select is not a range.
        assert!(parse("y[i] = where(x[i] > 0, x[i], 0)").is_ok());
    }

    #[test]
    fn batched_phrasings_reach_one_spec() {
        let want = parse("batched matmul, f32").unwrap();
        for text in [
            "bmm",
            "batched gemm",
            "batch of matrix products",
            "Batched MatMul, float32, row-major",
            "bmm f32",
            "batched matrix multiplication in single precision",
            "strided batched sgemm, fp32",
        ] {
            assert_eq!(parse(text).unwrap(), want, "{text}");
        }
        assert_eq!(
            want.canonical(),
            "matmul batched f32 row-major a:n b:n batch=? m=? n=? k=?"
        );
    }

    #[test]
    fn transposes_from_words_marks_and_codes() {
        for text in [
            "C = A·Bᵀ, float32",
            "matmul, B transposed",
            "gemm nt",
            "C = A @ B.T",
            "C = A*B^T",
            "matmul with Bᵀ",
            "C = A B'",
        ] {
            let m = mm(text);
            assert!(!m.trans_a && m.trans_b, "{text}");
        }
        let m = mm("gemm, transposed A and transposed B");
        assert!(m.trans_a && m.trans_b);
        assert!(mm("C = Aᵀ·B").trans_a);
    }

    #[test]
    fn shared_operands_need_a_batch_and_only_one_of_them() {
        for text in [
            "batched matmul, B shared",
            "bmm, broadcast b",
            "batched matmul, tensor times a matrix",
        ] {
            let m = mm(text);
            assert!(m.batched && m.shared_b && !m.shared_a, "{text}");
        }
        let m = mm("batched gemm, shared A, B transposed");
        assert!(m.shared_a && m.trans_b && !m.shared_b);
        assert_eq!(
            parse("batched matmul, B shared").unwrap().canonical(),
            "matmul batched f32 row-major a:n b:n:shared batch=? m=? n=? k=?"
        );
        assert!(matches!(
            parse("matmul, B shared"),
            Err(SpecError::Unsupported { .. })
        ));
        assert!(matches!(
            parse("bmm, shared a, shared b"),
            Err(SpecError::Ambiguous { .. })
        ));
    }

    #[test]
    fn sixteen_bit_dtypes_are_matmul_dtypes() {
        for (text, dtype) in [
            ("batched matmul, bf16", DType::Bf16),
            ("gemm, bfloat16, bias, gelu", DType::Bf16),
            ("matmul, fp16, B transposed", DType::F16),
            ("bmm half", DType::F16),
        ] {
            assert_eq!(parse(text).unwrap().dtype, dtype, "{text}");
        }
        assert_eq!(
            parse("matmul, bf16, A transposed").unwrap().canonical(),
            "matmul bf16 row-major a:t b:n m=? n=? k=?"
        );
        assert_eq!(
            parse("bmm, float16").unwrap().canonical(),
            parse("batched matmul f16").unwrap().canonical()
        );
    }

    /// `exact` keeps a plain f32 matmul on fp32 multiply-adds (no 3xTF32 schedule): its own spec, with its own
    /// canonical text, and refused beside `tf32` or 16-bit elements.
    #[test]
    fn exact_is_a_matmul_precision() {
        assert_eq!(mm("matmul, f32, exact").precision, Precision::Fma);
        assert_eq!(
            parse("bmm, exact, bias").unwrap().canonical(),
            "matmul batched f32 exact row-major a:n b:n bias batch=? m=? n=? k=?"
        );
        assert_ne!(
            parse("matmul, f32, exact").unwrap().canonical(),
            parse("matmul, f32").unwrap().canonical()
        );
        for text in ["matmul, tf32, exact", "matmul, bf16, exact"] {
            assert!(
                matches!(parse(text), Err(SpecError::Ambiguous { .. })),
                "{text}"
            );
        }
        assert!(matches!(
            parse("relu, exact"),
            Err(SpecError::NotForFamily { .. })
        ));
    }

    #[test]
    fn tf32_is_a_matmul_precision() {
        for text in [
            "batched matmul, f32, tf32",
            "matmul, tf32 allowed",
            "gemm, fp32, allow tf32, bias",
            "bmm tf32",
        ] {
            assert_eq!(mm(text).precision, Precision::Tf32, "{text}");
        }
        assert_eq!(mm("batched matmul, f32").precision, Precision::Exact);
        assert_eq!(
            parse("matmul, f32, tf32, B transposed")
                .unwrap()
                .canonical(),
            "matmul f32 tf32 row-major a:n b:t m=? n=? k=?"
        );
        // Exact specs keep their canonical text (and so their cache keys).
        assert_eq!(
            parse("matmul, f32").unwrap().canonical(),
            "matmul f32 row-major a:n b:n m=? n=? k=?"
        );
        assert!(matches!(
            parse("relu, tf32"),
            Err(SpecError::NotForFamily {
                family: "elementwise",
                ..
            })
        ));
    }

    /// `tf32` is an option of a program with a contraction: a contraction written in index notation becomes a
    /// TF32 matmul, attention keeps it as its program's precision (in words and in notation alike), and a program
    /// without a product, or with 16-bit elements, refuses it with the reason.
    #[test]
    fn tf32_is_a_precision_of_programs_with_products() {
        assert_eq!(
            mm("c[i, j] = sum(k) a[i, k] * b[k, j], tf32").precision,
            Precision::Tf32
        );
        assert_eq!(
            parse("c[i, j] = sum(k) a[i, k] * b[k, j], tf32")
                .unwrap()
                .canonical(),
            parse("matmul, f32, tf32").unwrap().canonical()
        );
        let program = |text: &str| match parse(text).unwrap().family {
            Family::Tensor(p) => p,
            other => panic!("{text}: {other:?}"),
        };
        let words = program("scaled dot-product attention, tf32");
        assert_eq!(words.precision, Precision::Tf32);
        let exact = program("scaled dot-product attention");
        assert_eq!(exact.precision, Precision::Exact);
        assert!(!exact.canonical().contains("tf32"), "{}", exact.canonical());
        assert!(
            words.canonical().ends_with(", f32, tf32"),
            "{}",
            words.canonical()
        );
        // The words and the notation they lower to are one spec.
        let notation = program(&format!("{words}"));
        assert_eq!(notation, words);
        assert_eq!(program("sdpa, allow tf32"), words);
        for (text, says) in [
            ("y[r] = sum(c) x[r, c] * x[r, c], tf32", "without a product"),
            ("y[i] = relu(x[i]), tf32", "without a product"),
            (
                "c[i, j] = sum(k) a[i, k] * b[k, j], bf16, tf32",
                "`tf32` with `bf16` elements",
            ),
            (
                "c[i, j] = sum(k) a[i, k] * b[k, j], tf32, tf32",
                "given twice",
            ),
            ("softmax over the last axis, tf32", "tf32"),
        ] {
            let m = parse(text).unwrap_err().to_string();
            assert!(m.contains(says), "{text}: {m}");
        }
    }

    /// `bfloat` is bf16 (it once suggested `float`, another type), and the list of what is supported names the
    /// 16-bit types, TF32 and the shared operand.
    #[test]
    fn bfloat_is_bf16_and_the_supported_list_is_current() {
        assert_eq!(parse("matmul, bfloat").unwrap().dtype, DType::Bf16);
        let e = parse("matmul, quux").unwrap_err().to_string();
        for named in ["bf16", "f16", "tf32", "tensor times a matrix"] {
            assert!(e.contains(named), "{named}: {e}");
        }
    }

    /// A spec neither vocabulary reads names the word neither knows, not the first word the matmul vocabulary
    /// stopped at (`row`, a word of the tensor operators' arguments).
    #[test]
    fn the_unknown_word_is_the_one_neither_vocabulary_knows() {
        let unknown = |text: &str| match parse(text) {
            Err(SpecError::UnknownWord { word, closest }) => (word, closest),
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(unknown("row-wise frobnicate").0, "frobnicate");
        assert_eq!(
            unknown("row-wise sofmax"),
            ("sofmax".to_string(), Some("softmax".to_string()))
        );
        // A word only the tensor vocabulary holds, nearest to the misspelling.
        assert_eq!(
            unknown("along rows, cumsumm").1.as_deref(),
            Some("cumsum"),
            "{:?}",
            unknown("along rows, cumsumm")
        );
        // A matmul spec's own unknown word is still the first one.
        assert_eq!(unknown("batched matmull, f32").0, "matmull");
    }

    /// A megabyte of spec is refused at once, and a long unknown word is not echoed whole.
    #[test]
    fn long_specs_are_refused_fast_and_not_echoed() {
        let huge = "relu ".repeat(200_000);
        let started = std::time::Instant::now();
        assert_eq!(
            parse(&huge),
            Err(SpecError::TooLong {
                chars: huge.chars().count()
            })
        );
        assert!(started.elapsed().as_millis() < 100);
        let word = "q".repeat(3000);
        let e = parse(&word).unwrap_err().to_string();
        assert!(e.len() < 1000 && e.contains("q…"), "{} chars", e.len());
        // At the bound, a spec still parses.
        let padded = format!("relu{}", " ".repeat(MAX_SPEC_CHARS - 4));
        assert!(parse(&padded).is_ok());
    }

    /// Each of these once parsed as another kernel (issue 19's list); each is now an error that says what the
    /// spec would have to be.
    #[test]
    fn no_spec_silently_means_another_kernel() {
        for (text, says) in [
            ("C = B·A", "`B·A`"),
            ("C = A·B·B", "`A·B·B`"),
            ("C = (A·B)ᵀ", "`(A·B)ᵀ`"),
            ("C = A·ᵀB", "a transpose mark must follow the operand"),
            ("C = relu(A)·B", "an activation applies to the whole result"),
            ("C = A·B·bias", "`bias` is added to the product"),
            ("C = A·B + C + C", "each once"),
            ("C = A·B·", "a name on each side"),
            ("y += relu(x)", "`y += …`"),
            ("matmul, m=-1", "`m=-1`"),
            ("relu, foo = bar", "`foo = bar` computes nothing"),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        // The forms they were mistaken for still read as before.
        assert!(mm("C = relu(A·B + bias)").bias);
        assert!(mm("C = alpha·A·Bᵀ + beta·C").trans_b);
        assert!(mm("C = A·B + C").beta);
        assert_eq!(mm("matmul, m=1").m, Dim::Fixed(1),);
    }

    #[test]
    fn epilogues() {
        let m = mm("C = relu(alpha·A·B + beta·C + bias)");
        assert!(m.alpha && m.beta && m.bias);
        assert_eq!(m.activation, Some(Activation::Relu));
        let m = mm("matmul with bias and gelu, f32");
        assert!(m.bias && !m.alpha && !m.beta);
        assert_eq!(m.activation, Some(Activation::Gelu));
        let m = mm("batched gemm, bf16, C = silu(A·B + bias)");
        assert!(m.bias && m.batched);
        assert_eq!(m.activation, Some(Activation::Silu));
        assert_eq!(mm("matmul with swish").activation, Some(Activation::Silu));
        assert!(mm("C += A·B").beta);
        assert!(mm("gemm, alpha, beta").alpha);
    }

    #[test]
    fn shapes() {
        let m = mm("bmm, batch=16, m=n=k=1024");
        assert_eq!(
            (m.batch, m.m, m.n, m.k),
            (
                Dim::Fixed(16),
                Dim::Fixed(1024),
                Dim::Fixed(1024),
                Dim::Fixed(1024)
            )
        );
        let m = mm("matmul, k=64");
        assert_eq!(
            (m.batch, m.m, m.k),
            (Dim::Fixed(1), Dim::Runtime, Dim::Fixed(64))
        );
        assert!(mm("matmul, batch=4").batched);
        assert!(matches!(
            parse("matmul, q=3"),
            Err(SpecError::BadShape { .. })
        ));
        assert!(matches!(
            parse("matmul, m=0"),
            Err(SpecError::BadShape { .. })
        ));
        assert!(matches!(
            parse("matmul, m=3, m=4"),
            Err(SpecError::BadShape { .. })
        ));
    }

    #[test]
    fn elementwise_phrasings() {
        let relu = parse("relu, f32").unwrap();
        assert_eq!(parse("elementwise relu").unwrap(), relu);
        assert_eq!(parse("y = relu(x)").unwrap(), relu);
        // The phrases lower to the program their index form gives, named as the maps always were.
        assert_eq!(relu, parse("out[n] = relu(x[n])").unwrap());
        assert_eq!(relu.canonical(), "program out0[d0] = max(in0[d0], 0), f32");
        assert_eq!(parse("swish").unwrap(), parse("silu f32").unwrap());
        assert_eq!(
            parse("gelu").unwrap(),
            parse("out[n] = 0.5 * x[n] * (1 + erf(x[n] / sqrt(2)))").unwrap()
        );
        let add = parse("add, f32").unwrap();
        assert_eq!(parse("z = x + y").unwrap(), add);
        assert_eq!(add, parse("out[n] = x[n] + y[n]").unwrap());
        let scaled = parse("mul by a scalar").unwrap();
        assert_eq!(parse("y = x * s").unwrap(), scaled);
        assert_eq!(scaled, parse("out[n] = x[n] * s").unwrap());
        assert_eq!(
            parse("sigmoid, n=4096").unwrap().canonical(),
            "program out0[d0] = sigmoid(in0[d0]), f32, d0=4096"
        );
        // 16-bit storage, as every program.
        assert_eq!(
            parse("relu, bf16").unwrap(),
            parse("out[n] = relu(x[n]), bf16").unwrap()
        );
    }

    #[test]
    fn rejections_name_the_word() {
        let e = parse("batched matmull, f32").unwrap_err();
        assert_eq!(
            e,
            SpecError::UnknownWord {
                word: "matmull".into(),
                closest: Some("matmul".into())
            }
        );
        assert!(e.to_string().contains("did you mean `matmul`"), "{e}");
        assert!(matches!(
            parse("convolution"),
            Err(SpecError::UnknownWord { .. })
        ));
        // An operator of the tensor vocabulary is a program, not an unknown word.
        assert!(matches!(
            parse("softmax").map(|s| s.family),
            Ok(crate::Family::Tensor(_))
        ));
        assert!(matches!(parse(""), Err(SpecError::Empty)));
        assert!(matches!(parse("f32"), Err(SpecError::NoFamily)));
        assert!(matches!(
            parse("matmul, double"),
            Err(SpecError::Unsupported { .. })
        ));
        assert!(matches!(
            parse("matmul, column-major"),
            Err(SpecError::Unsupported { .. })
        ));
        assert!(matches!(
            parse("matmul add"),
            Err(SpecError::Ambiguous { .. })
        ));
        assert!(matches!(
            parse("relu and gelu"),
            Err(SpecError::Ambiguous { .. })
        ));
        assert!(matches!(parse("product"), Err(SpecError::Ambiguous { .. })));
        assert!(matches!(
            parse("matmul, f32, f16"),
            Err(SpecError::Ambiguous { .. })
        ));
        assert!(matches!(
            parse("matmul, f64"),
            Err(SpecError::Unsupported { .. })
        ));
        assert!(matches!(
            parse("matmul, f16, tf32"),
            Err(SpecError::Ambiguous { .. })
        ));
        assert!(matches!(
            parse("relu, transposed a"),
            Err(SpecError::NotForFamily { .. })
        ));
        assert!(matches!(
            parse("matmul with sigmoid"),
            Err(SpecError::Unsupported { .. })
        ));
        assert!(matches!(
            parse("C = A·B + D"),
            Err(SpecError::BadEquation(_))
        ));
        assert!(matches!(parse("y = x * 2"), Err(SpecError::BadEquation(_))));
        assert!(matches!(
            parse("matmul #1"),
            Err(SpecError::UnexpectedChar('#'))
        ));
    }
}
