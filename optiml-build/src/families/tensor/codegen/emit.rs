//! Expressions to CUDA text, and the parts every generated translation unit shares: the header comment, the
//! storage type, the entry point's parameter list (the ABI of `optiml_runtime::ProgramLaunch`) and the extents.
//!
//! Names in the generated source are positional, never the program's own (which may be CUDA keywords):
//! `in{k}` input k, `out{k}` the k-th output, `n{d}` dimension d's extent, `p{k}` parameter k, `v{j}` the value
//! of statement j at the current element, `s{j}` its value for the current row or column.

use optiml_spec::DType;
use optiml_spec::program::{Binary, Elem, Expr, Program, Reduce, Unary};

/// Source text with indentation, built line by line.
#[derive(Default)]
pub(crate) struct Code {
    text: String,
    depth: usize,
}

impl Code {
    /// One line at the current depth.
    pub(crate) fn line(&mut self, s: impl AsRef<str>) {
        let s = s.as_ref();
        if s.is_empty() {
            self.text.push('\n');
            return;
        }
        for _ in 0..self.depth {
            self.text.push_str("    ");
        }
        self.text.push_str(s);
        self.text.push('\n');
    }

    /// `s` then one level deeper (`s` usually ends with `{`).
    pub(crate) fn open(&mut self, s: impl AsRef<str>) {
        self.line(s);
        self.depth += 1;
    }

    /// One level shallower, then `s` (usually `}`).
    pub(crate) fn close(&mut self, s: impl AsRef<str>) {
        self.depth = self.depth.saturating_sub(1);
        self.line(s);
    }

    /// One level shallower for `s` alone (`} else {`).
    pub(crate) fn mid(&mut self, s: impl AsRef<str>) {
        self.depth = self.depth.saturating_sub(1);
        self.line(s);
        self.depth += 1;
    }

    /// The text.
    pub(crate) fn finish(self) -> String {
        self.text
    }
}

/// An `f32` literal for `v` (as the kernel computes in f32): the shortest text that reads back to the same f32.
pub(crate) fn lit(v: f64) -> String {
    let f = v as f32;
    if f.is_infinite() {
        return if f > 0.0 {
            "optiml_p::inf_f()".into()
        } else {
            "(-optiml_p::inf_f())".into()
        };
    }
    let mut s = format!("{f:?}");
    if !s.contains(['.', 'e', 'E']) {
        s.push_str(".0");
    }
    if s.starts_with('-') {
        format!("({s}f)")
    } else {
        format!("{s}f")
    }
}

/// What the leaves of an expression are at the point it is evaluated.
pub(crate) trait Env {
    /// Input `k`'s value (f32).
    fn input(&self, k: usize) -> String;
    /// Statement `j`'s value (f32).
    fn value(&self, j: usize) -> String;
    /// Whether `e` has one value for every element the kernel evaluates it at together (a row's, a column's, the
    /// whole launch's): a division by it becomes a multiplication by its reciprocal, which the compiler computes
    /// once. One rounding more than the division (at most an ulp and a half in all); the division's dozen
    /// instructions per element made exp-and-divide kernels such as softmax compute-bound.
    fn invariant(&self, _e: &Expr) -> bool {
        false
    }
    /// Whether the fast hardware forms of exp, log and the logistic serve (`ex2.approx` / `lg2.approx` with a
    /// scaling: a few ulp of f32). True where the result is stored as a 16-bit type, whose rounding (2^-8 or
    /// 2^-11) is far coarser: the accurate forms' dozen instructions per element made 16-bit softmax
    /// compute-bound (about half the copy bandwidth on the H200).
    fn fast(&self) -> bool {
        false
    }
    /// A gather's value ([`Expr::Gather`]). Only row kernels gather (once per row, into [`gathered`]'s
    /// variable); `classify` refuses a gather anywhere else, and this default makes a compile error name the bug.
    fn gather(&self, _e: &Expr) -> String {
        "OPTIML_GATHER_UNSUPPORTED".into()
    }
}

/// The variable a kernel holds a row's gathered value in: `sg{input}_{axis}_{index input}`. `None` unless the
/// index is an input, the only gathers `classify` lets through.
pub(crate) fn gathered(e: &Expr) -> Option<String> {
    match e {
        Expr::Gather(g, index) => match **index {
            Expr::Input(k) => Some(format!("sg{}_{}_{k}", g.input, g.axis)),
            _ => None,
        },
        _ => None,
    }
}

/// Whether every leaf of `e` satisfies `leaf` (constants and parameters always do).
pub(crate) fn leaves_all(e: &Expr, leaf: &dyn Fn(&Expr) -> bool) -> bool {
    match e {
        Expr::Const(_) | Expr::Param(_) => true,
        Expr::Input(_) | Expr::Value(_) | Expr::Gather(..) => leaf(e),
        Expr::Unary(_, a) => leaves_all(a, leaf),
        Expr::Binary(_, a, b) => leaves_all(a, leaf) && leaves_all(b, leaf),
        Expr::Select(c, a, b) => leaves_all(c, leaf) && leaves_all(a, leaf) && leaves_all(b, leaf),
        Expr::Reduce(..) | Expr::Scan(..) => false,
    }
}

/// `e` as a CUDA f32 expression. Reductions must have been hoisted ([`super::classify::lower`]) and are
/// evaluated by the kernel's passes, not here.
pub(crate) fn expr(e: &Expr, env: &dyn Env) -> String {
    let go = |e: &Expr| expr(e, env);
    match e {
        Expr::Const(v) => lit(*v),
        Expr::Param(k) => format!("p{k}"),
        Expr::Input(k) => env.input(*k),
        Expr::Value(j) => env.value(*j),
        Expr::Gather(..) => env.gather(e),
        Expr::Unary(op, a) => {
            let a = go(a);
            match op {
                Unary::Neg => format!("(-{a})"),
                Unary::Exp if env.fast() => format!("__expf({a})"),
                Unary::Exp => format!("expf({a})"),
                Unary::Log if env.fast() => format!("__logf({a})"),
                Unary::Log => format!("logf({a})"),
                Unary::Log1p => format!("log1pf({a})"),
                Unary::Expm1 => format!("expm1f({a})"),
                Unary::Tanh => format!("tanhf({a})"),
                Unary::Erf => format!("erff({a})"),
                Unary::Sqrt => format!("sqrtf({a})"),
                Unary::Rsqrt => format!("rsqrtf({a})"),
                Unary::Abs => format!("fabsf({a})"),
                Unary::Sigmoid if env.fast() => format!("optiml_p::sigmoid_fast({a})"),
                Unary::Sigmoid => format!("optiml_p::sigmoid({a})"),
            }
        }
        Expr::Binary(op, a, rhs) => {
            let (a, b) = (go(a), go(rhs));
            match op {
                Binary::Add => format!("({a} + {b})"),
                Binary::Sub => format!("({a} - {b})"),
                Binary::Mul => format!("({a} * {b})"),
                Binary::Div if env.invariant(rhs) => format!("({a} * (1.0f / {b}))"),
                Binary::Div => format!("({a} / {b})"),
                Binary::Pow if small_power(rhs) == Some(2) => format!("({a} * {a})"),
                Binary::Pow if small_power(rhs) == Some(3) => format!("({a} * {a} * {a})"),
                Binary::Pow => format!("powf({a}, {b})"),
                Binary::Max => format!("optiml_p::maxf({a}, {b})"),
                Binary::Min => format!("optiml_p::minf({a}, {b})"),
                Binary::Lt => format!("optiml_p::truth({a} < {b})"),
                Binary::Le => format!("optiml_p::truth({a} <= {b})"),
                Binary::Gt => format!("optiml_p::truth({a} > {b})"),
                Binary::Ge => format!("optiml_p::truth({a} >= {b})"),
                Binary::Eq => format!("optiml_p::truth({a} == {b})"),
                Binary::Ne => format!("optiml_p::truth({a} != {b})"),
            }
        }
        Expr::Select(c, a, b) => format!("({} != 0.f ? {} : {})", go(c), go(a), go(b)),
        // Unreachable after lowering; a compile error names the bug rather than a wrong kernel hiding it.
        Expr::Reduce(..) => "OPTIML_UNLOWERED_REDUCTION".into(),
        // A scan is its statement's whole expression, computed by the scan kernel's steps.
        Expr::Scan(..) => "OPTIML_SCAN_IN_AN_EXPRESSION".into(),
    }
}

/// The exponent 2 or 3 when `e` is that constant: such a power is emitted as multiplications. A square is one,
/// correctly rounded like powf's result and with its NaN, infinity and sign cases; NVRTC does not simplify
/// powf(x, 2.0f), whose general path (a logarithm and an exponential, about 80 instructions) made RMS norms over
/// channels compute-bound. A cube (GELU's tanh form has one) is two, within an ulp and a half of powf's result.
pub(crate) fn small_power(e: &Expr) -> Option<u32> {
    match e {
        Expr::Const(c) if *c == 2.0 => Some(2),
        Expr::Const(c) if *c == 3.0 => Some(3),
        _ => None,
    }
}

/// Whether `e` calls a function of several instructions and temporaries (exponentials, logarithms, …).
pub(crate) fn transcendental(e: &Expr) -> bool {
    match e {
        Expr::Unary(op, a) => {
            matches!(
                op,
                Unary::Exp
                    | Unary::Log
                    | Unary::Log1p
                    | Unary::Expm1
                    | Unary::Tanh
                    | Unary::Erf
                    | Unary::Sigmoid
            ) || transcendental(a)
        }
        // A square or a cube is multiplications (`emit::expr`).
        Expr::Binary(op, a, b) => {
            (*op == Binary::Pow && small_power(b).is_none())
                || transcendental(a)
                || transcendental(b)
        }
        Expr::Select(c, a, b) => transcendental(c) || transcendental(a) || transcendental(b),
        Expr::Reduce(_, _, b) | Expr::Scan(_, b) => transcendental(b),
        Expr::Const(_) | Expr::Param(_) | Expr::Input(_) | Expr::Value(_) | Expr::Gather(..) => {
            false
        }
    }
}

/// The reduction struct of `optiml/program.cuh` combining `op`'s partial values (the sum for a mean).
pub(crate) fn reduce_op(op: Reduce) -> &'static str {
    match op {
        Reduce::Sum | Reduce::Mean => "optiml_p::Sum",
        Reduce::Prod => "optiml_p::Prod",
        Reduce::Max => "optiml_p::Max",
        Reduce::Min => "optiml_p::Min",
        Reduce::Argmax | Reduce::Argmin => "",
    }
}

/// The storage dtype's number in `optiml_p::io`.
pub(crate) fn dtype_id(d: DType) -> u32 {
    match d {
        DType::F32 => 0,
        DType::Bf16 => 1,
        DType::F16 => 2,
    }
}

/// Elements per 16-byte chunk.
pub(crate) fn vec_width(d: DType) -> u32 {
    16 / d.bytes() as u32
}

/// A name as a comment may show it (the program's names are identifiers; anything else is replaced).
fn shown(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_#".contains(c) {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// The translation unit's opening: the `@generated` line, the program as comments (positional names against the
/// program's), the shared header and the storage type.
pub(crate) fn prologue(program: &Program, class: &str, describe: &str) -> Code {
    let mut c = Code::default();
    c.line(format!(
        "// @generated by optiml-build {}: tensor program, {class} kernel, {}, {describe}",
        env!("CARGO_PKG_VERSION"),
        program.dtype.name()
    ));
    let dims: Vec<String> = program
        .dims
        .iter()
        .enumerate()
        .map(|(d, x)| match x.size.fixed() {
            Some(v) => format!("n{d}={}={v}", shown(&x.name)),
            None => format!("n{d}={}", shown(&x.name)),
        })
        .collect();
    c.line(format!("// dims: {}", dims.join(", ")));
    for (k, t) in program.inputs.iter().enumerate() {
        c.line(format!(
            "// in{k} = {}[{}]",
            shown(&t.name),
            axes_text(&t.axes)
        ));
    }
    let mut out = 0;
    for (j, s) in program.stmts.iter().enumerate() {
        let role = if s.output {
            out += 1;
            format!("out{}", out - 1)
        } else {
            "intermediate".into()
        };
        c.line(format!(
            "// stmt {j} ({role}): {}[{}] = {}",
            shown(&s.name),
            axes_text(&s.axes),
            expr_text(&s.expr)
        ));
    }
    c.line("#include \"optiml/program.cuh\"");
    c.line(format!(
        "typedef optiml_p::io<{}> IO;  // {}",
        dtype_id(program.dtype),
        program.dtype.name()
    ));
    c.line("typedef IO::T T;");
    c
}

fn axes_text(axes: &[usize]) -> String {
    axes.iter()
        .map(|d| format!("n{d}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The expression in positional names, for the source's comments.
fn expr_text(e: &Expr) -> String {
    struct Names;
    impl Env for Names {
        fn input(&self, k: usize) -> String {
            format!("in{k}")
        }
        fn value(&self, j: usize) -> String {
            format!("v{j}")
        }
        fn gather(&self, e: &Expr) -> String {
            match e {
                Expr::Gather(g, index) => {
                    format!("in{}[axis {} at {}]", g.input, g.axis, expr_text(index))
                }
                _ => String::new(),
            }
        }
    }
    match e {
        Expr::Reduce(op, dims, body) => {
            format!("{}({}) {}", op.name(), axes_text(dims), expr_text(body))
        }
        Expr::Scan(scan, body) => {
            let mut head = format!("n{}", scan.dim);
            if scan.reverse {
                head.push_str(", reverse");
            }
            if scan.exclusive {
                head.push_str(", exclusive");
            }
            format!("{}({head}) {}", scan.name(), expr_text(body))
        }
        e => expr(e, &Names),
    }
}

/// The storage type of statement `s`'s output buffer.
pub(crate) fn out_type(elem: Elem) -> &'static str {
    match elem {
        Elem::Float => "T",
        Elem::I64 => "long long",
        Elem::I32 => "int",
        Elem::Bool => "unsigned char",
    }
}

/// The pointer type an input of `elem` is passed as.
pub(crate) fn in_type(elem: Elem) -> &'static str {
    match elem {
        Elem::Float => "const T*",
        Elem::I64 => "const long long*",
        Elem::I32 => "const int*",
        Elem::Bool => "const unsigned char*",
    }
}

/// The output ordinal of every statement that is an output (`None` for intermediates).
pub(crate) fn output_ordinals(p: &Program) -> Vec<Option<usize>> {
    let mut k = 0;
    p.stmts
        .iter()
        .map(|s| {
            s.output.then(|| {
                k += 1;
                k - 1
            })
        })
        .collect()
}

/// `extern "C" __global__ void __launch_bounds__(...) optiml_program(<the ABI>) {` and the extents: fixed ones
/// as constants (the argument is ignored), so the compiler folds them.
pub(crate) fn entry(c: &mut Code, p: &Program, bounds: &str) {
    entry_with(c, p, bounds, "");
}

/// [`entry`] with launch attributes (`__cluster_dims__(…) `, with its trailing space) before the bounds.
pub(crate) fn entry_with(c: &mut Code, p: &Program, bounds: &str, attrs: &str) {
    entry_full(c, p, bounds, attrs, &[]);
}

/// [`entry_with`] with parameters after the program's (a tree's workspace, stage and slices).
pub(crate) fn entry_full(c: &mut Code, p: &Program, bounds: &str, attrs: &str, extra: &[&str]) {
    let mut params: Vec<String> = Vec::new();
    for (k, t) in p.inputs.iter().enumerate() {
        params.push(format!("{} in{k}", in_type(t.elem)));
    }
    let ord = output_ordinals(p);
    for (j, s) in p.stmts.iter().enumerate() {
        if let Some(k) = ord[j] {
            params.push(format!("{}* out{k}", out_type(s.elem)));
        }
    }
    for d in 0..p.dims.len() {
        params.push(format!("long long n{d}_arg"));
    }
    for k in 0..p.params.len() {
        params.push(format!("float p{k}"));
    }
    params.extend(extra.iter().map(|e| e.to_string()));
    c.open(format!(
        "extern \"C\" __global__ void {attrs}__launch_bounds__({bounds}) optiml_program({}) {{",
        params.join(", ")
    ));
    for (d, x) in p.dims.iter().enumerate() {
        match x.size.fixed() {
            Some(v) => c.line(format!(
                "const long long n{d} = {v}LL;  // fixed: n{d}_arg is ignored"
            )),
            None => c.line(format!("const long long n{d} = n{d}_arg;")),
        }
    }
    for d in 0..p.dims.len() {
        if p.dims[d].size.fixed().is_some() {
            c.line(format!("(void)n{d}_arg;"));
        }
    }
}

/// `n{a} * n{b} * ...` (`1LL` for none).
pub(crate) fn product(dims: &[usize]) -> String {
    if dims.is_empty() {
        return "1LL".into();
    }
    dims.iter()
        .map(|d| format!("n{d}"))
        .collect::<Vec<_>>()
        .join(" * ")
}

/// The element offset of a tensor with `axes` at the coordinates `q{d}` (row-major, last axis contiguous),
/// skipping the axes in `skip` (their contribution is added by the caller).
pub(crate) fn offset(axes: &[usize], skip: &[usize]) -> String {
    let mut terms = Vec::new();
    for (i, &d) in axes.iter().enumerate() {
        if skip.contains(&d) {
            continue;
        }
        let later = &axes[i + 1..];
        if later.is_empty() {
            terms.push(format!("q{d}"));
        } else {
            terms.push(format!("q{d} * ({})", product(later)));
        }
    }
    if terms.is_empty() {
        "0LL".into()
    } else {
        terms.join(" + ")
    }
}

/// Lines defining `q{d}` for each dimension in `needed`, from a linear index `idx` over `items` (outermost first).
pub(crate) fn coords(c: &mut Code, idx: &str, items: &[usize], needed: &[usize], ty: &str) {
    for (i, &d) in items.iter().enumerate() {
        if !needed.contains(&d) {
            continue;
        }
        let later = &items[i + 1..];
        let q = if later.is_empty() {
            format!("{idx} % ({ty})n{d}")
        } else if i == 0 {
            format!("{idx} / ({ty})({})", product(later))
        } else {
            format!("{idx} / ({ty})({}) % ({ty})n{d}", product(later))
        };
        c.line(format!("const long long q{d} = (long long)({q});"));
    }
}

/// A bit mask of dimensions.
pub(crate) fn mask(dims: impl IntoIterator<Item = usize>) -> u32 {
    dims.into_iter().fold(0u32, |m, d| m | (1u32 << d))
}

/// The dimensions that must not be empty: those reduced by an operation without a value over nothing.
pub(crate) fn nonempty_mask(p: &Program) -> u32 {
    let mut m = 0u32;
    for s in &p.stmts {
        walk_reduces(&s.expr, &mut |op, dims| {
            if super::classify::needs_elements(op) {
                m |= mask(dims.iter().copied());
            }
        });
    }
    m
}

fn walk_reduces(e: &Expr, f: &mut dyn FnMut(Reduce, &[usize])) {
    match e {
        Expr::Reduce(op, dims, body) => {
            f(*op, dims);
            walk_reduces(body, f);
        }
        Expr::Unary(_, a) | Expr::Scan(_, a) | Expr::Gather(_, a) => walk_reduces(a, f),
        Expr::Binary(_, a, b) => {
            walk_reduces(a, f);
            walk_reduces(b, f);
        }
        Expr::Select(c, a, b) => {
            walk_reduces(c, f);
            walk_reduces(a, f);
            walk_reduces(b, f);
        }
        Expr::Const(_) | Expr::Param(_) | Expr::Input(_) | Expr::Value(_) => {}
    }
}

/// The inputs and statements `e` reads directly.
pub(crate) fn refs(e: &Expr, inputs: &mut Vec<usize>, values: &mut Vec<usize>) {
    match e {
        Expr::Input(k) => {
            if !inputs.contains(k) {
                inputs.push(*k);
            }
        }
        Expr::Value(j) => {
            if !values.contains(j) {
                values.push(*j);
            }
        }
        Expr::Unary(_, a) => refs(a, inputs, values),
        Expr::Binary(_, a, b) => {
            refs(a, inputs, values);
            refs(b, inputs, values);
        }
        Expr::Select(c, a, b) => {
            refs(c, inputs, values);
            refs(a, inputs, values);
            refs(b, inputs, values);
        }
        Expr::Reduce(_, _, b) | Expr::Scan(_, b) => refs(b, inputs, values),
        // A gather reads its tensors itself, once per row ([`gathered`]): not as element or item inputs.
        Expr::Const(_) | Expr::Param(_) | Expr::Gather(..) => {}
    }
}
