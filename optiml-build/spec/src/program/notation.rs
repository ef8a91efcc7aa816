//! Index notation → [`Program`], and a program back to text ([`Program`]'s `Display`, [`Program::canonical`],
//! [`explain`]).
//!
//! ```text
//! m[r] = max(c) x[r, c]; e[r, c] = exp(x[r, c] - m[r]); y[r, c] = e[r, c] / sum(c) e[r, c], bf16, c=4096
//! ```
//!
//! # Statements
//! Statements are separated by `;` or by a line break before the next statement's `name[…] =` or `name =`; any
//! other line break (inside an expression, after an operator, before `, bf16`) does not end a statement.
//! - `name[i, j] = expr` defines a tensor with axes `i, j`; `name = expr` (or `name[] = expr`) a 0-d one when the
//!   right side reads a tensor or a parameter.
//! - `name = 1e-5` (a number or an expression of numbers and earlier constants) names a constant, which is inlined;
//!   if `name` is an index variable of the program (`c = 4096`) it fixes that dimension instead (a positive integer).
//! - A tensor is read as `x[i, j]`, always with the same variables in the same order (no transposes); a 0-d
//!   statement is read by its bare name; a 0-d input is `x[]`.
//! - An index variable is a dimension: any name written inside `[…]` or in a reduction's `(…)`.
//! - Any other bare name is a run-time `f32` parameter (`s` in `y[i] = x[i] * s`).
//!
//! # Options
//! After the last statement, separated by commas: a dtype (`f32`/`float32`, `bf16`/`bfloat16`,
//! `f16`/`fp16`/`half`; default f32), `c=4096` (fixes a dimension), `i32 indices` (argmax/argmin give `i32`
//! rather than the default `i64`).
//!
//! # Expressions, loosest first
//! | level | syntax | notes |
//! |---|---|---|
//! | comparison | `a < b`, `<=`, `>`, `>=`, `==`, `!=` | 1 or 0; they do not chain |
//! | sum | `a + b`, `a - b` | left-associative |
//! | product | `a * b`, `a / b` (also `·`, `×`, `÷`) | left-associative |
//! | sign | `-a` | `-x^2` is `-(x^2)`, as in math |
//! | power | `a ^ b`, `a ** b` | right-associative: `a^b^c` is `a^(b^c)`; `2^-x` is allowed |
//! | atom | `1.5`, `.5`, `1e-5`, `pi`, `x[i]`, `s`, `f(…)`, `(…)`, reductions | |
//!
//! Functions: `exp log log1p expm1 tanh erf sqrt rsqrt abs sigmoid neg` (one argument), `max min pow` (two),
//! `where(cond, a, b)` (`a` where `cond` is non-zero). Conveniences lower to the same IR as their spelled-out
//! form, so that one meaning has one program: `relu(v)` is `max(v, 0)`, `square(v)` is `v ^ 2`,
//! `clamp(v, lo, hi)` is `min(max(v, lo), hi)`, `neg(v)` is `-v`, `pow(a, b)` is `a ^ b`.
//!
//! `pi` is π. `e` is **not** Euler's number: `e` is too common a tensor name (`e[r, c]` in a softmax); write
//! `exp(1)`. `inf` and `nan` are refused, and so is any constant expression that folds to an infinity or a NaN.
//! Sub-expressions made of numbers only are folded (`sqrt(2 / pi)` becomes one number).
//!
//! # Reductions
//! `sum(c) body`, `mean(c, d) body`, `max`, `min`, `prod`, `argmax`, `argmin`. `name(…)` is a reduction when
//! every argument is a bare name and a value (a number, a name or `(`) follows directly; otherwise it is a call
//! (`max(a, b)`). The body extends over the rest of the product, as Σ does in math:
//! - `sum(c) x[r, c] * w[c]` sums the product;
//! - `e[r, c] / sum(c) e[r, c]` divides by the sum;
//! - `mean(c) x[r, c]^2 + eps` is (the mean of squares) + eps;
//! - `sum(c) -x[r, c]` does not parse (`-` does not start a body): write `-sum(c) x[r, c]` or `sum(c) (-x[r, c])`.
//!
//! Inside its body a reduction's variable shadows a statement axis of the same name, as Σ does:
//! `y[r, c] = e[r, c] / sum(c) e[r, c]` divides every element by its row's sum. `argmax`/`argmin` must be the whole
//! right side of their statement, and their results cannot be read by a later statement.
//!
//! # The program a text lowers to (normal form)
//! - Every reduction is the whole expression of its statement. One written inside an expression is lifted into
//!   an intermediate statement of its own, named `<statement>__<op>` (`y__sum`, then `y__sum2` …), whose axes are
//!   the body's free variables in dimension order; equal lifted reductions are computed once. Names containing
//!   `__` are reserved for these, and `Display` writes them back inline, so text → program → text → program is
//!   the identity. Directly nested reductions of the same kind merge (`sum(c) sum(d) x` is `sum(c, d) x`), and the
//!   variables of every reduction but argmax/argmin are kept in dimension order.
//! - Dimensions, inputs and parameters are numbered in order of first appearance in the text; outputs are the
//!   statements no later statement reads.
//!
//! # Limits
//! Nesting deeper than 64 (parentheses, calls, signs, powers, reduction bodies) or an expression more than 128
//! operations deep (`a + b + …` with more than 128 terms) is refused with an error, so parsing is linear and never
//! exhausts the stack.

use super::{Binary, DimDecl, Elem, Expr, Gather, Program, Reduce, Scan, Stmt, TensorDecl, Unary};
use crate::error::SpecError;
use crate::model::{DType, Dim, Precision};
use std::collections::BTreeSet;
use std::fmt::{self, Write as _};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

/// Errors are boxed inside the parser: a `?` in a debug build copies its error a few times into the frame, and
/// the frames of the recursive functions add up.
type Res<T> = Result<T, Box<SpecError>>;

/// FNV-1a: the names hashed here come from the spec's own author, so there is nothing to defend against, and
/// std's SipHash makes a 100 KB spec noticeably slow to check in debug builds.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

type Map<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<Fnv>>;
type Set<K> = std::collections::HashSet<K, BuildHasherDefault<Fnv>>;

/// Deepest syntactic nesting accepted (parentheses, calls, signs, powers, reduction bodies).
const MAX_NESTING: usize = 64;
/// Deepest expression tree accepted; left-associative chains (`a + b + c …`) count too. Every later pass recurses
/// over the tree, so this bounds their stack use: under 1 MB in a debug build, where a thread gets 2 MB.
const MAX_DEPTH: usize = 128;
/// Largest fixed dimension: integers above 2^53 are not exact in the f64 a number is read as.
const MAX_FIXED: f64 = 9_007_199_254_740_992.0;
/// Characters of the text an error quotes.
const NEAR: usize = 16;

/// Functions and their arity, for calls and for "did you mean".
const FUNCTIONS: &[(&str, usize)] = &[
    ("exp", 1),
    ("log", 1),
    ("log1p", 1),
    ("expm1", 1),
    ("tanh", 1),
    ("erf", 1),
    ("sqrt", 1),
    ("rsqrt", 1),
    ("abs", 1),
    ("sigmoid", 1),
    ("neg", 1),
    ("relu", 1),
    ("square", 1),
    ("max", 2),
    ("min", 2),
    ("pow", 2),
    ("where", 3),
    ("clamp", 3),
];

const REDUCTIONS: &[(&str, Reduce)] = &[
    ("sum", Reduce::Sum),
    ("mean", Reduce::Mean),
    ("max", Reduce::Max),
    ("min", Reduce::Min),
    ("prod", Reduce::Prod),
    ("argmax", Reduce::Argmax),
    ("argmin", Reduce::Argmin),
];

/// Running reductions (scans) along one axis of their statement: `cumsum(c) x[r, c]`, with the modifiers
/// `reverse` and `exclusive` after the dimension (`cumsum(c, reverse, exclusive)`).
const SCANS: &[(&str, Reduce)] = &[
    ("cumsum", Reduce::Sum),
    ("cumprod", Reduce::Prod),
    ("cummax", Reduce::Max),
    ("cummin", Reduce::Min),
];

/// Every tensor, dimension and parameter may become a parameter of a generated Rust function.
const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
    "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "while", "abstract", "become", "box", "do", "final", "macro", "override",
    "priv", "try", "typeof", "unsized", "virtual", "yield",
];

const DTYPES: &[(&str, DType)] = &[
    ("f32", DType::F32),
    ("fp32", DType::F32),
    ("float32", DType::F32),
    ("bf16", DType::Bf16),
    ("bfloat16", DType::Bf16),
    ("bfloat", DType::Bf16),
    ("f16", DType::F16),
    ("fp16", DType::F16),
    ("float16", DType::F16),
    ("half", DType::F16),
];

/// The spellings of the `tf32` option (as the matmul vocabulary takes it).
const TF32_WORDS: &[&str] = &["tf32", "tensorfloat32"];

const UNSUPPORTED_DTYPES: &[&str] = &["f64", "fp64", "float64", "double", "int8", "i8", "fp8"];

/// Whether `text` is index notation rather than plain words: it has an `=` (not `==`) and a name indexed with
/// `[`, as every program does (`y[i] = …`, or `s = sum(i) x[i]`). Plain words and the matmul/elementwise
/// equations (`y = x * s`, `C = A·Bᵀ`) have no `name[`. It is lenient on purpose: a text with mistakes that looks
/// like notation is notation, so that [`parse`] reports the mistake.
pub fn is_notation(text: &str) -> bool {
    let mut load = false;
    let mut assign = false;
    let mut prev_ident = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '[' if prev_ident => load = true,
            '=' if chars.peek() == Some(&'=') => {
                chars.next();
            }
            '=' => assign = true,
            _ => {}
        }
        if load && assign {
            return true;
        }
        if !c.is_whitespace() {
            prev_ident = c.is_ascii_alphanumeric() || c == '_';
        }
    }
    false
}

/// Parses index notation into a checked [`Program`] in the normal form the module doc describes.
///
/// # Errors
/// A [`SpecError::Notation`] with the character offset of the mistake, the text there and a hint.
pub fn parse(text: &str) -> Result<Program, SpecError> {
    let run = || -> Res<Program> {
        let toks = lex(text)?;
        let ast = Parser {
            text,
            toks: &toks,
            pos: 0,
            nesting: 0,
        }
        .program()?;
        Resolver::new(text).program(&ast)
    };
    run().map_err(|e| *e)
}

/// The axes of a load (an input or an earlier statement read whole), or `None` for any other expression.
fn load_axes<'p>(p: &'p Program, e: &Expr) -> Option<&'p [usize]> {
    match e {
        Expr::Input(i) => p.inputs.get(*i).map(|t| t.axes.as_slice()),
        Expr::Value(i) => p.stmts.get(*i).map(|s| s.axes.as_slice()),
        _ => None,
    }
}

/// Whether a statement sums a product of two different tensors over an index both of them use
/// (`c[i, j] = sum(k) a[i, k] * b[k, j]`): a contraction, which the matmul family computes. A sum of a tensor
/// times itself (`sum(c) x[r, c] * x[r, c]`) is a norm, not a contraction.
pub fn contraction(program: &Program) -> bool {
    fn walk(p: &Program, e: &Expr) -> bool {
        match e {
            Expr::Reduce(Reduce::Sum, over, body) => {
                if let Expr::Binary(Binary::Mul, a, b) = body.as_ref()
                    && a != b
                    && let (Some(x), Some(y)) = (load_axes(p, a), load_axes(p, b))
                    && over.iter().any(|d| x.contains(d) && y.contains(d))
                {
                    return true;
                }
                walk(p, body)
            }
            Expr::Reduce(_, _, a) | Expr::Unary(_, a) => walk(p, a),
            Expr::Binary(_, a, b) => walk(p, a) || walk(p, b),
            Expr::Select(c, a, b) => walk(p, c) || walk(p, a) || walk(p, b),
            _ => false,
        }
    }
    program.stmts.iter().any(|s| walk(program, &s.expr))
}

/// Whether a sum multiplies two different tensors that share the summed index, however the product is scaled
/// or divided (`sum(d) q[i, d] * k[j, d] * s`, `sum(j) e[i, j] * v[j, e] / l[i]`): a product whose operands
/// `tf32` may round. Wider than [`contraction`], which only a plain matrix product passes.
pub fn has_product(program: &Program) -> bool {
    fn factors<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
        match e {
            Expr::Binary(Binary::Mul, a, b) => {
                factors(a, out);
                factors(b, out);
            }
            Expr::Binary(Binary::Div, a, _) => factors(a, out),
            other => out.push(other),
        }
    }
    fn walk(p: &Program, e: &Expr) -> bool {
        match e {
            Expr::Reduce(Reduce::Sum, over, body) => {
                let mut loads = Vec::new();
                factors(body, &mut loads);
                let shared: Vec<&Expr> = loads
                    .into_iter()
                    .filter(|f| load_axes(p, f).is_some_and(|a| over.iter().any(|d| a.contains(d))))
                    .collect();
                shared
                    .iter()
                    .enumerate()
                    .any(|(n, a)| shared[n + 1..].iter().any(|b| a != b))
                    || walk(p, body)
            }
            Expr::Reduce(_, _, a) | Expr::Unary(_, a) => walk(p, a),
            Expr::Binary(_, a, b) => walk(p, a) || walk(p, b),
            Expr::Select(c, a, b) => walk(p, c) || walk(p, a) || walk(p, b),
            _ => false,
        }
    }
    program.stmts.iter().any(|s| walk(program, &s.expr))
}

/// What `cargo optiml explain` prints: the program (one statement per line), the signature a kernel of it takes
/// and the reference formula of each statement.
pub fn explain(program: &Program) -> String {
    let printer = Printer::written(program, false);
    // Options end the last statement's line, as in the one-line form, so the block parses as it is.
    let mut lines = printer.statements();
    let options = printer.options(false);
    if let Some(last) = lines.last_mut()
        && !options.is_empty()
    {
        last.push_str(", ");
        last.push_str(&options);
    }
    let mut out = String::from("program:\n");
    for line in lines {
        let _ = writeln!(out, "  {line}");
    }
    out.push_str("signature:\n");
    let _ = writeln!(out, "  {}", signature(program));
    out.push_str("reference:\n");
    let math = Printer::written(program, true);
    for line in math.statements() {
        let _ = writeln!(out, "  {line}");
    }
    out
}

/// `fn k(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, s: f32)`: inputs, outputs, run-time dims, params.
fn signature(p: &Program) -> String {
    let float = p.dtype.rust_path();
    let mut args: Vec<String> = p
        .inputs
        .iter()
        .map(|t| {
            let ty = match t.elem {
                Elem::Float => float,
                e => e.rust_type(p.dtype),
            };
            format!("{}: &CudaSlice<{ty}>", t.name)
        })
        .collect();
    for (_, s) in p.outputs() {
        let ty = match s.elem {
            Elem::Float => float,
            e => e.rust_type(p.dtype),
        };
        args.push(format!("{}: &mut CudaSlice<{ty}>", s.name));
    }
    for d in &p.dims {
        if d.size == Dim::Runtime {
            args.push(format!("{}: usize", d.name));
        }
    }
    for name in &p.params {
        args.push(format!("{name}: f32"));
    }
    format!("fn k({})", args.join(", "))
}

impl Program {
    /// The canonical text: this program's notation with positional names (dimensions `d0, d1 …`, inputs
    /// `in0 …`, parameters `p0 …`, intermediates `t0 …`, outputs `out0 …`), always followed by the dtype, every
    /// fixed dimension (`d1=4096`) and, when there are argmax/argmin statements, their index type. Renaming a
    /// variable or a tensor does not change it; it parses back to a program equal to this one but for names.
    /// Reductions the parser lifted out of an expression are written inline, as `Display` does, so that the
    /// numbering of dimensions, inputs and parameters (order of first appearance) survives the round trip; an
    /// intermediate the text names itself is written as a statement (`t0 …`), so `y[r] = x[r] / sum(c) …` and
    /// `s[r] = sum(c) …; y[r] = x[r] / s[r]` mean the same but have different canonical forms.
    /// It is hashed into cache keys: a change to its format must bump [`crate::SPEC_FORMAT`].
    pub fn canonical(&self) -> String {
        let printer = Printer::positional(self);
        let mut out = printer.statements().join("; ");
        out.push_str(", ");
        out.push_str(&printer.options(true));
        out
    }
}

/// The notation with the names as written: `parse(&p.to_string()) == Ok(p)` for every parsed program.
impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let printer = Printer::written(self, false);
        f.write_str(&printer.statements().join("; "))?;
        let options = printer.options(false);
        if !options.is_empty() {
            write!(f, ", {options}")?;
        }
        Ok(())
    }
}

// ───────────────────────────────────────────── lexer ─────────────────────────────────────────────

#[derive(Clone, Copy, Debug, PartialEq)]
enum Tk {
    Ident,
    Num(f64),
    LBrack,
    RBrack,
    LParen,
    RParen,
    Comma,
    Semi,
    Newline,
    Assign,
    Plus,
    Minus,
    Star,
    Slash,
    Caret,
    Cmp(Binary),
    End,
}

/// A token: its kind, its first character (0-based, in characters) and its bytes.
#[derive(Clone, Copy, Debug)]
struct Tok {
    kind: Tk,
    at: usize,
    byte: usize,
    end: usize,
}

impl Tok {
    fn pos(self) -> Pos {
        Pos {
            at: self.at,
            byte: self.byte,
        }
    }
}

/// A place in the text: a character offset for messages, a byte offset to quote from.
#[derive(Clone, Copy, Debug)]
struct Pos {
    at: usize,
    byte: usize,
}

fn error(text: &str, pos: Pos, what: impl Into<String>, hint: impl Into<String>) -> Box<SpecError> {
    let near: String = text
        .get(pos.byte..)
        .unwrap_or("")
        .chars()
        .take(NEAR)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Box::new(SpecError::Notation {
        at: pos.at,
        near: near.trim_end().to_string(),
        what: what.into(),
        hint: hint.into(),
    })
}

/// A name as a message quotes it: long ones are cut, so a 100 KB identifier makes a short message.
fn show(name: &str) -> String {
    if name.chars().count() > 40 {
        let head: String = name.chars().take(40).collect();
        format!("{head}…")
    } else {
        name.to_string()
    }
}

fn lex(text: &str) -> Res<Vec<Tok>> {
    let mut toks = Vec::new();
    let mut it = text.char_indices().peekable();
    let mut at = 0;
    while let Some((byte, c)) = it.next() {
        let start = Pos { at, byte };
        at += 1;
        let mut end = byte + c.len_utf8();
        let kind = match c {
            '\n' => Tk::Newline,
            c if c.is_whitespace() => continue,
            c if c.is_ascii_alphabetic() || c == '_' => {
                while let Some(&(b, c)) = it.peek() {
                    if !(c.is_ascii_alphanumeric() || c == '_') {
                        break;
                    }
                    end = b + 1;
                    at += 1;
                    it.next();
                }
                if text[byte..end].contains("__") {
                    return Err(error(
                        text,
                        start,
                        format!("the name `{}` contains `__`", show(&text[byte..end])),
                        "names with a double underscore are reserved for the intermediates the parser introduces",
                    ));
                }
                Tk::Ident
            }
            c if c.is_ascii_digit()
                || (c == '.' && it.peek().is_some_and(|(_, d)| d.is_ascii_digit())) =>
            {
                let mut seen_dot = c == '.';
                let mut seen_exp = false;
                while let Some(&(b, d)) = it.peek() {
                    let take = if d.is_ascii_digit() {
                        true
                    } else if d == '.' && !seen_dot && !seen_exp {
                        seen_dot = true;
                        true
                    } else if (d == 'e' || d == 'E') && !seen_exp {
                        // An exponent only when digits follow (`1e5`, `1e-5`); `2e` is a number then a name.
                        let rest = &text[b + 1..];
                        let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
                        if digits.starts_with(|c: char| c.is_ascii_digit()) {
                            seen_exp = true;
                            if rest.starts_with(['+', '-']) {
                                it.next();
                                at += 1;
                            }
                            true
                        } else {
                            false
                        }
                    } else {
                        false
                    };
                    if !take {
                        break;
                    }
                    it.next();
                    at += 1;
                    end = b + d.len_utf8();
                }
                if let Some(&(_, d)) = it.peek()
                    && (d.is_ascii_alphanumeric() || d == '_')
                {
                    return Err(error(
                        text,
                        start,
                        format!("the number `{}` runs into `{d}`", show(&text[byte..end])),
                        format!(
                            "write a product with `*`, as in `{} * {d}`",
                            show(&text[byte..end])
                        ),
                    ));
                }
                let literal = &text[byte..end];
                let value: f64 = literal.parse().map_err(|_| {
                    error(
                        text,
                        start,
                        format!("`{}` is not a number", show(literal)),
                        "",
                    )
                })?;
                if value.is_infinite() {
                    return Err(error(
                        text,
                        start,
                        format!(
                            "the number `{}` is too large for a 64-bit float",
                            show(literal)
                        ),
                        "numbers must be below about 1.8e308",
                    ));
                }
                let mantissa = literal.split(['e', 'E']).next().unwrap_or("");
                if value == 0.0 && mantissa.chars().any(|c| ('1'..='9').contains(&c)) {
                    return Err(error(
                        text,
                        start,
                        format!(
                            "the number `{}` is too small for a 64-bit float (it would be 0)",
                            show(literal)
                        ),
                        "numbers other than 0 must be above about 1e-308",
                    ));
                }
                Tk::Num(value)
            }
            '[' => Tk::LBrack,
            ']' => Tk::RBrack,
            '(' => Tk::LParen,
            ')' => Tk::RParen,
            ',' => Tk::Comma,
            ';' => Tk::Semi,
            '+' => Tk::Plus,
            '-' | '−' => Tk::Minus,
            '/' | '÷' => Tk::Slash,
            '^' => Tk::Caret,
            '·' | '×' | '⋅' => Tk::Star,
            '*' => {
                if let Some(&(b, '*')) = it.peek() {
                    it.next();
                    at += 1;
                    end = b + 1;
                    Tk::Caret
                } else {
                    Tk::Star
                }
            }
            '=' | '<' | '>' | '!' => {
                let two = it.peek().is_some_and(|&(_, d)| d == '=');
                if two {
                    it.next();
                    at += 1;
                    end += 1;
                }
                match (c, two) {
                    ('=', false) => Tk::Assign,
                    ('=', true) => Tk::Cmp(Binary::Eq),
                    ('<', false) => Tk::Cmp(Binary::Lt),
                    ('<', true) => Tk::Cmp(Binary::Le),
                    ('>', false) => Tk::Cmp(Binary::Gt),
                    ('>', true) => Tk::Cmp(Binary::Ge),
                    ('!', true) => Tk::Cmp(Binary::Ne),
                    _ => {
                        return Err(error(
                            text,
                            start,
                            "unexpected `!`",
                            "`!=` compares; there is no `not`: write `x[i] == 0`",
                        ));
                    }
                }
            }
            '≤' => Tk::Cmp(Binary::Le),
            '≥' => Tk::Cmp(Binary::Ge),
            '≠' => Tk::Cmp(Binary::Ne),
            c => {
                let hint = match c {
                    '.' => "decimals are written `0.5` or `.5`",
                    '{' | '}' => "group with `(…)`; tensors are indexed with `[…]`",
                    '@' => "a matrix product is a sum: `c[i, j] = sum(k) a[i, k] * b[k, j]`",
                    '\'' | 'ᵀ' => {
                        "transposes are not supported: index a tensor with the same variables everywhere"
                    }
                    _ if !c.is_ascii() && c.is_alphabetic() => {
                        "names are ASCII letters, digits and `_`"
                    }
                    _ => "index notation uses names, numbers, `[ ] ( ) , ; = + - * / ^ < > !`",
                };
                return Err(error(
                    text,
                    start,
                    format!("unexpected character `{c}`"),
                    hint,
                ));
            }
        };
        toks.push(Tok {
            kind,
            at: start.at,
            byte,
            end,
        });
    }
    toks.push(Tok {
        kind: Tk::End,
        at,
        byte: text.len(),
        end: text.len(),
    });
    // A line break ends a statement only between a token that can end one and a name that starts the next;
    // anywhere else (after an operator or a comma, before an operator) the expression goes on.
    let mut kept: Vec<Tok> = Vec::with_capacity(toks.len());
    for (i, t) in toks.iter().enumerate() {
        if t.kind != Tk::Newline {
            kept.push(*t);
            continue;
        }
        // Only the last line break of a run counts, so that a run of them is looked past once.
        if toks[i + 1].kind == Tk::Newline {
            continue;
        }
        let ends = kept
            .last()
            .is_some_and(|p| matches!(p.kind, Tk::Ident | Tk::Num(_) | Tk::RBrack | Tk::RParen));
        if ends && statement_head(&toks[i + 1..]) {
            kept.push(Tok {
                kind: Tk::Semi,
                ..*t
            });
        }
    }
    Ok(kept)
}

/// Whether the tokens start a statement: `name =` or `name[i, …] =`. Looks at most a few dozen tokens ahead, so
/// that deciding every line break stays linear.
fn statement_head(toks: &[Tok]) -> bool {
    let mut it = toks
        .iter()
        .take(64)
        .filter(|t| t.kind != Tk::Newline)
        .map(|t| t.kind);
    if it.next() != Some(Tk::Ident) {
        return false;
    }
    match it.next() {
        Some(Tk::Assign) => true,
        Some(Tk::LBrack) => {
            for k in it.by_ref() {
                match k {
                    Tk::Ident | Tk::Comma => {}
                    Tk::RBrack => return it.next() == Some(Tk::Assign),
                    _ => return false,
                }
            }
            false
        }
        _ => false,
    }
}

// ───────────────────────────────────────────── parser ─────────────────────────────────────────────

#[derive(Clone, Copy, Debug)]
struct Name<'a> {
    s: &'a str,
    pos: Pos,
}

#[derive(Debug)]
struct Node<'a> {
    kind: Kind<'a>,
    pos: Pos,
    depth: usize,
}

#[derive(Debug)]
enum Kind<'a> {
    Num(f64),
    Name(Name<'a>),
    Load(Name<'a>, Vec<Ix<'a>>),
    Call(Name<'a>, Vec<Node<'a>>),
    Reduce(Reduce, Vec<Name<'a>>, Box<Node<'a>>),
    /// A scan: the dimension, then its modifiers.
    Scan(Reduce, Vec<Name<'a>>, Box<Node<'a>>),
    Neg(Box<Node<'a>>),
    Bin(Binary, Box<Node<'a>>, Box<Node<'a>>),
}

/// One index of a load: an index variable, or an integer tensor read with index variables (a gather).
#[derive(Debug)]
enum Ix<'a> {
    Var(Name<'a>),
    Load(Name<'a>, Vec<Name<'a>>),
}

struct StmtAst<'a> {
    name: Name<'a>,
    idx: Option<Vec<Name<'a>>>,
    rhs: Node<'a>,
}

enum OptAst<'a> {
    DType(DType, Pos),
    /// `tf32`: the contractions may round their operands to TF32.
    Tf32(Pos),
    Fix(Name<'a>, f64, Pos),
    Indices(Elem, Pos),
    /// `bool m`, `i64 t`: an input's element type.
    Input(Name<'a>, Elem, Pos),
}

struct Ast<'a> {
    stmts: Vec<StmtAst<'a>>,
    opts: Vec<OptAst<'a>>,
}

struct Parser<'a, 't> {
    text: &'a str,
    toks: &'t [Tok],
    pos: usize,
    nesting: usize,
}

impl<'a> Parser<'a, '_> {
    fn tok(&self) -> Tok {
        self.toks[self.pos]
    }

    fn peek(&self) -> Tk {
        self.toks[self.pos].kind
    }

    fn peek_at(&self, k: usize) -> Tk {
        self.toks.get(self.pos + k).map_or(Tk::End, |t| t.kind)
    }

    fn bump(&mut self) -> Tok {
        let t = self.toks[self.pos];
        if t.kind != Tk::End {
            self.pos += 1;
        }
        t
    }

    fn name(&self, t: Tok) -> Name<'a> {
        Name {
            s: &self.text[t.byte..t.end],
            pos: t.pos(),
        }
    }

    fn err(&self, t: Tok, what: impl Into<String>, hint: impl Into<String>) -> Box<SpecError> {
        error(self.text, t.pos(), what, hint)
    }

    fn node(&self, kind: Kind<'a>, pos: Pos) -> Res<Node<'a>> {
        let child = match &kind {
            Kind::Num(_) | Kind::Name(_) | Kind::Load(..) => 0,
            Kind::Call(f, args) => {
                args.iter().map(|a| a.depth).max().unwrap_or(0) + usize::from(f.s == "clamp")
            }
            Kind::Reduce(_, _, a) | Kind::Scan(_, _, a) | Kind::Neg(a) => a.depth,
            Kind::Bin(_, a, b) => a.depth.max(b.depth),
        };
        if child + 1 > MAX_DEPTH {
            return Err(error(
                self.text,
                pos,
                format!("the expression is more than {MAX_DEPTH} operations deep"),
                "split it into several statements",
            ));
        }
        Ok(Node {
            kind,
            pos,
            depth: child + 1,
        })
    }

    fn program(mut self) -> Res<Ast<'a>> {
        let mut stmts = Vec::new();
        let mut opts = Vec::new();
        loop {
            while self.peek() == Tk::Semi {
                self.bump();
            }
            if self.peek() == Tk::End {
                break;
            }
            if !opts.is_empty() {
                return Err(self.err(
                    self.tok(),
                    "a statement after the options",
                    "options (`bf16`, `c=4096`, `i32 indices`) go after the last statement",
                ));
            }
            stmts.push(self.statement()?);
            let t = self.tok();
            match t.kind {
                Tk::Semi | Tk::End => {}
                Tk::Comma => {
                    self.bump();
                    opts = self.options()?;
                }
                Tk::RParen | Tk::RBrack => {
                    return Err(self.err(
                        t,
                        format!(
                            "unbalanced `{}`: nothing opened it",
                            &self.text[t.byte..t.end]
                        ),
                        "",
                    ));
                }
                Tk::Assign => {
                    return Err(self.err(
                        t,
                        "a second `=` in one statement",
                        "separate statements with `;` or a line break; compare with `==`",
                    ));
                }
                _ => {
                    return Err(self.err(
                        t,
                        "expected `;`, a line break, `,` and options, or the end after this expression",
                        "an operator may be missing (implicit products are not supported: write `a * b`)",
                    ));
                }
            }
        }
        if stmts.is_empty() {
            return Err(error(
                self.text,
                Pos { at: 0, byte: 0 },
                "the program has no statement",
                "write one, as in `y[i] = x[i] * 2`",
            ));
        }
        Ok(Ast { stmts, opts })
    }

    fn options(&mut self) -> Res<Vec<OptAst<'a>>> {
        let mut opts = Vec::new();
        loop {
            let t = self.bump();
            let word = &self.text[t.byte..t.end];
            let lower = word.to_ascii_lowercase();
            let opt = match t.kind {
                Tk::Ident if self.peek() == Tk::Assign => {
                    self.bump();
                    let v = self.bump();
                    match v.kind {
                        Tk::Num(value) => OptAst::Fix(self.name(t), value, v.pos()),
                        _ => {
                            return Err(self.err(
                                v,
                                format!(
                                    "`{}=` fixes a dimension and needs a positive integer",
                                    show(word)
                                ),
                                format!("write `{}=4096`", show(word)),
                            ));
                        }
                    }
                }
                Tk::Ident if DTYPES.iter().any(|(w, _)| *w == lower) => {
                    let d = DTYPES
                        .iter()
                        .find(|(w, _)| *w == lower)
                        .map_or(DType::F32, |(_, d)| *d);
                    OptAst::DType(d, t.pos())
                }
                Tk::Ident if TF32_WORDS.contains(&lower.as_str()) => OptAst::Tf32(t.pos()),
                Tk::Ident if UNSUPPORTED_DTYPES.contains(&lower.as_str()) => {
                    return Err(self.err(
                        t,
                        format!("the dtype `{word}` is not supported"),
                        "kernels are generated for f32, bf16 and f16",
                    ));
                }
                Tk::Ident
                    if matches!(lower.as_str(), "i32" | "int32" | "i64" | "int64" | "bool") =>
                {
                    let n = self.tok();
                    let next = self.text[n.byte..n.end].to_ascii_lowercase();
                    if n.kind != Tk::Ident {
                        let hint = if lower == "bool" {
                            "write `bool m` for an input `m` of that type (a mask)".to_string()
                        } else {
                            format!(
                                "write `{lower} indices` for the type of argmax/argmin results, or `{lower} m` for an input `m` of that type"
                            )
                        };
                        return Err(self.err(n, format!("`{word}` alone is not an option"), hint));
                    }
                    self.bump();
                    let elem = if lower == "bool" {
                        Elem::Bool
                    } else if lower.contains("32") {
                        Elem::I32
                    } else {
                        Elem::I64
                    };
                    if elem != Elem::Bool && matches!(next.as_str(), "indices" | "index") {
                        OptAst::Indices(elem, t.pos())
                    } else {
                        OptAst::Input(self.name(n), elem, t.pos())
                    }
                }
                Tk::Ident => {
                    let known = [
                        "f32", "bf16", "f16", "float32", "bfloat16", "fp16", "half", "tf32", "i32",
                        "i64", "indices", "bool",
                    ];
                    let hint = match closest(&lower, known.iter().copied()) {
                        Some(c) => format!(
                            "did you mean `{c}`? options are a dtype, `c=4096` and `i32 indices`"
                        ),
                        None => {
                            "options are a dtype (`f32`, `bf16`, `f16`), `c=4096` and `i32 indices`"
                                .into()
                        }
                    };
                    return Err(self.err(t, format!("unknown option `{}`", show(word)), hint));
                }
                _ => {
                    return Err(self.err(
                        t,
                        "expected an option after `,`",
                        "options are a dtype (`f32`, `bf16`, `f16`), `c=4096` and `i32 indices`; statements are separated by `;`",
                    ));
                }
            };
            opts.push(opt);
            let t = self.tok();
            match t.kind {
                Tk::Comma => {
                    self.bump();
                }
                Tk::Semi | Tk::End => return Ok(opts),
                _ => {
                    return Err(self.err(
                        t,
                        "expected `,` or the end after an option",
                        "options are a dtype (`f32`, `bf16`, `f16`), `c=4096` and `i32 indices`, separated by commas",
                    ));
                }
            }
        }
    }

    fn statement(&mut self) -> Res<StmtAst<'a>> {
        let t = self.bump();
        if t.kind != Tk::Ident {
            return Err(self.err(
                t,
                "a statement starts with the name it defines",
                "as in `y[i] = x[i] * 2` or `eps = 1e-5`",
            ));
        }
        let name = self.name(t);
        let idx = if self.peek() == Tk::LBrack {
            Some(self.indices()?)
        } else {
            None
        };
        let eq = self.bump();
        match eq.kind {
            Tk::Assign => {}
            Tk::Cmp(Binary::Eq) => {
                return Err(self.err(
                    eq,
                    "`==` compares",
                    "a statement defines with one `=`: `y[i] = …`",
                ));
            }
            _ => {
                return Err(self.err(
                    eq,
                    format!("expected `=` after `{}`", show(name.s)),
                    "a statement is `name[i, …] = expression`",
                ));
            }
        }
        let rhs = self.expr()?;
        Ok(StmtAst { name, idx, rhs })
    }

    /// `[i, j]`, `[]`.
    fn indices(&mut self) -> Res<Vec<Name<'a>>> {
        let open = self.bump();
        let mut out = Vec::new();
        if self.peek() == Tk::RBrack {
            self.bump();
            return Ok(out);
        }
        loop {
            let t = self.bump();
            match t.kind {
                Tk::Ident => out.push(self.name(t)),
                Tk::End => return Err(self.err(open, "unbalanced `[`: it is never closed", "")),
                _ => {
                    return Err(self.err(
                        t,
                        "an index is an index variable, as in `x[i, j]`",
                        "numbers, arithmetic and slices are not supported inside `[…]`",
                    ));
                }
            }
            let t = self.bump();
            match t.kind {
                Tk::Comma => {}
                Tk::RBrack => return Ok(out),
                Tk::End => return Err(self.err(open, "unbalanced `[`: it is never closed", "")),
                _ => {
                    return Err(self.err(
                        t,
                        "expected `,` or `]` after an index variable",
                        "an index is an index variable, as in `x[i, j]`",
                    ));
                }
            }
        }
    }

    /// A load's `[i, j]`, where an index may also read an integer tensor: `[r, t[r]]`.
    fn load_indices(&mut self) -> Res<Vec<Ix<'a>>> {
        let open = self.bump();
        let mut out = Vec::new();
        if self.peek() == Tk::RBrack {
            self.bump();
            return Ok(out);
        }
        loop {
            let t = self.bump();
            match t.kind {
                Tk::Ident if self.peek() == Tk::LBrack => {
                    let name = self.name(t);
                    let inner = self.indices()?;
                    out.push(Ix::Load(name, inner));
                }
                Tk::Ident => out.push(Ix::Var(self.name(t))),
                Tk::End => return Err(self.err(open, "unbalanced `[`: it is never closed", "")),
                _ => {
                    return Err(self.err(
                        t,
                        "an index is an index variable, as in `x[i, j]`, or an integer tensor, as in `x[r, t[r]]`",
                        "numbers, arithmetic and slices are not supported inside `[…]`",
                    ));
                }
            }
            let t = self.bump();
            match t.kind {
                Tk::Comma => {}
                Tk::RBrack => return Ok(out),
                Tk::End => return Err(self.err(open, "unbalanced `[`: it is never closed", "")),
                _ => {
                    return Err(self.err(
                        t,
                        "expected `,` or `]` after an index",
                        "an index is an index variable, as in `x[i, j]`",
                    ));
                }
            }
        }
    }

    fn expr(&mut self) -> Res<Node<'a>> {
        self.binary(1)
    }

    // The functions from here to `call` recurse once per level of nesting. In a debug build a frame holds the
    // temporaries of every branch, so each level costs kilobytes: binding levels share one function
    // (precedence climbing), and every message is built in a cold function of its own.

    /// Operators binding at `min` or tighter (1 comparison, 2 sum, 3 product), left-associative.
    fn binary(&mut self, min: u8) -> Res<Node<'a>> {
        let mut a = self.unary()?;
        loop {
            let (level, op) = match self.peek() {
                Tk::Cmp(op) => (1, op),
                Tk::Plus => (2, Binary::Add),
                Tk::Minus => (2, Binary::Sub),
                Tk::Star => (3, Binary::Mul),
                Tk::Slash => (3, Binary::Div),
                _ => return Ok(a),
            };
            if level < min {
                return Ok(a);
            }
            self.bump();
            let b = self.binary(level + 1)?;
            if level == 1 && matches!(self.peek(), Tk::Cmp(_)) {
                return Err(self.chained());
            }
            let pos = a.pos;
            a = self.join(Some(op), a, Some(b), pos)?;
        }
    }

    /// A sign, then a power: `-x^2` is `-(x^2)`, `2^-x` is `2^(-x)`.
    fn unary(&mut self) -> Res<Node<'a>> {
        // A failed parse is dropped, so the count is only restored on success.
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(self.too_deep());
        }
        let node = if self.peek() == Tk::Minus {
            let t = self.bump();
            let a = self.unary()?;
            self.join(None, a, None, t.pos())?
        } else {
            let base = self.primary()?;
            if self.peek() == Tk::Caret {
                self.bump();
                let exponent = self.unary()?;
                let pos = base.pos;
                self.join(Some(Binary::Pow), base, Some(exponent), pos)?
            } else {
                base
            }
        };
        self.nesting -= 1;
        Ok(node)
    }

    fn primary(&mut self) -> Res<Node<'a>> {
        let t = self.bump();
        match t.kind {
            Tk::LParen => {
                let e = self.expr()?;
                let close = self.bump();
                if close.kind == Tk::RParen {
                    Ok(e)
                } else {
                    Err(self.unclosed(t, close))
                }
            }
            Tk::Ident if self.peek() == Tk::LParen => {
                let name = self.name(t);
                self.call(name)
            }
            Tk::Ident | Tk::Num(_) => self.leaf(t),
            _ => Err(self.not_a_value(t)),
        }
    }

    /// A number, a load or a bare name: what does not recurse.
    #[inline(never)]
    fn leaf(&mut self, t: Tok) -> Res<Node<'a>> {
        if let Tk::Num(v) = t.kind {
            return self.node(Kind::Num(v), t.pos());
        }
        let name = self.name(t);
        if self.peek() == Tk::LBrack {
            let idx = self.load_indices()?;
            self.node(Kind::Load(name, idx), t.pos())
        } else {
            self.node(Kind::Name(name), t.pos())
        }
    }

    /// `-a` (no operator) or `a op b`, built out of the recursive functions' frames.
    #[inline(never)]
    fn join(
        &self,
        op: Option<Binary>,
        a: Node<'a>,
        b: Option<Node<'a>>,
        pos: Pos,
    ) -> Res<Node<'a>> {
        let kind = match (op, b) {
            (Some(op), Some(b)) => Kind::Bin(op, Box::new(a), Box::new(b)),
            _ => Kind::Neg(Box::new(a)),
        };
        self.node(kind, pos)
    }

    #[inline(never)]
    fn reduction(
        &self,
        op: Reduce,
        over: Vec<Name<'a>>,
        body: Node<'a>,
        pos: Pos,
    ) -> Res<Node<'a>> {
        self.node(Kind::Reduce(op, over, Box::new(body)), pos)
    }

    #[inline(never)]
    fn call_node(&self, name: Name<'a>, args: Vec<Node<'a>>) -> Res<Node<'a>> {
        self.node(Kind::Call(name, args), name.pos)
    }

    /// `name(…)` at `(`: a reduction when every argument is a bare name and a value follows, else a call.
    fn call(&mut self, name: Name<'a>) -> Res<Node<'a>> {
        let scan = SCANS.iter().find(|(n, _)| *n == name.s).map(|(_, r)| *r);
        if let Some(op) = scan
            && let Some(head) = self.reduction_head()
        {
            self.nesting += 1;
            if self.nesting > MAX_NESTING {
                return Err(self.too_deep());
            }
            let body = self.binary(3)?;
            self.nesting -= 1;
            return self.node(Kind::Scan(op, head, Box::new(body)), name.pos);
        }
        let op = REDUCTIONS
            .iter()
            .find(|(n, _)| *n == name.s)
            .map(|(_, r)| *r);
        if let Some(op) = op
            && let Some(over) = self.reduction_head()
        {
            // The body is the rest of the product, and one level deeper.
            self.nesting += 1;
            if self.nesting > MAX_NESTING {
                return Err(self.too_deep());
            }
            let body = self.binary(3)?;
            self.nesting -= 1;
            return self.reduction(op, over, body, name.pos);
        }
        // `clamp(v, lo, hi)` prints as `min(max(v, lo), hi)`, one level deeper: counting it so keeps every
        // program that parses parseable when printed.
        let extra = usize::from(name.s == "clamp");
        self.nesting += extra;
        let open = self.bump();
        let mut args = Vec::new();
        if self.peek() == Tk::RParen {
            self.bump();
        } else {
            loop {
                args.push(self.expr()?);
                let t = self.bump();
                match t.kind {
                    Tk::Comma => {}
                    Tk::RParen => break,
                    _ => return Err(self.bad_argument_list(name, open, t)),
                }
            }
        }
        self.nesting -= extra;
        self.call_node(name, args)
    }

    /// At `(` after a reduction's name: its variables, consumed, when they are bare names and a value follows.
    /// Looks ahead over `( a, b, … )` only, stopping at the first token that is not a name or a comma, so the
    /// whole parse stays linear.
    fn reduction_head(&mut self) -> Option<Vec<Name<'a>>> {
        let mut k = 1;
        loop {
            if self.peek_at(k) != Tk::Ident {
                return None;
            }
            k += 1;
            match self.peek_at(k) {
                Tk::Comma => k += 1,
                Tk::RParen => break,
                _ => return None,
            }
        }
        if !matches!(self.peek_at(k + 1), Tk::Num(_) | Tk::Ident | Tk::LParen) {
            return None;
        }
        self.bump();
        let mut over = Vec::new();
        loop {
            let v = self.bump();
            over.push(self.name(v));
            if self.bump().kind == Tk::RParen {
                return Some(over);
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn too_deep(&self) -> Box<SpecError> {
        self.err(
            self.tok(),
            format!("the expression nests deeper than {MAX_NESTING} levels"),
            "split it into several statements",
        )
    }

    #[cold]
    #[inline(never)]
    fn chained(&self) -> Box<SpecError> {
        self.err(
            self.tok(),
            "comparisons do not chain",
            "combine two comparisons with `*` (and) or use `where(…)`",
        )
    }

    #[cold]
    #[inline(never)]
    fn unclosed(&self, open: Tok, found: Tok) -> Box<SpecError> {
        if found.kind == Tk::End {
            self.err(open, "unbalanced `(`: it is never closed", "")
        } else {
            self.err(
                found,
                "expected `)`",
                format!("to close the `(` at character {}", open.at + 1),
            )
        }
    }

    #[cold]
    #[inline(never)]
    fn not_a_value(&self, t: Tok) -> Box<SpecError> {
        match t.kind {
            Tk::RParen | Tk::RBrack => self.err(
                t,
                format!("unbalanced `{}`: nothing opened it", &self.text[t.byte..t.end]),
                "",
            ),
            Tk::End => self.err(t, "the expression ends too early", "a value is missing"),
            _ => self.err(
                t,
                "expected a value",
                "a value is a number, a tensor such as `x[i]`, a name, a call such as `exp(…)` or `(…)`",
            ),
        }
    }

    #[cold]
    #[inline(never)]
    fn bad_argument_list(&self, name: Name<'a>, open: Tok, found: Tok) -> Box<SpecError> {
        if found.kind == Tk::End {
            self.err(open, "unbalanced `(`: it is never closed", "")
        } else {
            self.err(
                found,
                format!("expected `,` or `)` in the arguments of `{}`", show(name.s)),
                "",
            )
        }
    }
}

// ─────────────────────────────────────────── resolution ───────────────────────────────────────────

/// What the statement being resolved knows.
struct Cx<'a> {
    name: &'a str,
    axes: Vec<usize>,
    /// Variables bound by the enclosing reductions, innermost last.
    bound: Vec<usize>,
    /// Every variable some reduction of this statement binds, with the place and operator of the first.
    reduced: Map<usize, (Pos, Reduce)>,
    /// Axes used outside any reduction binding them.
    used_free: Set<usize>,
}

struct Resolver<'a> {
    text: &'a str,
    dims: Vec<DimDecl>,
    dim_of: Map<&'a str, usize>,
    inputs: Vec<TensorDecl>,
    input_of: Map<&'a str, (usize, Pos)>,
    params: Vec<String>,
    param_of: Map<&'a str, usize>,
    consts: Map<&'a str, (f64, Pos)>,
    stmts: Vec<Stmt>,
    stmt_of: Map<&'a str, (usize, Pos)>,
    /// Every name some statement defines, at its first definition.
    defined_at: Map<&'a str, Pos>,
    /// Every name read with `[…]` somewhere.
    loaded: Set<&'a str>,
    fixed_at: Map<usize, Pos>,
    lifted: Map<Expr, usize>,
    next_suffix: Map<String, usize>,
    indices: Elem,
    /// Each gather's index input, gathered input, and where the index is written: checked for their types
    /// once the options have typed the inputs.
    gathers: Vec<(usize, usize, Pos)>,
}

impl<'a> Resolver<'a> {
    fn new(text: &'a str) -> Self {
        Resolver {
            text,
            dims: Vec::new(),
            dim_of: Map::default(),
            inputs: Vec::new(),
            input_of: Map::default(),
            params: Vec::new(),
            param_of: Map::default(),
            consts: Map::default(),
            stmts: Vec::new(),
            stmt_of: Map::default(),
            defined_at: Map::default(),
            loaded: Set::default(),
            fixed_at: Map::default(),
            lifted: Map::default(),
            next_suffix: Map::default(),
            indices: Elem::I64,
            gathers: Vec::new(),
        }
    }

    fn err(&self, pos: Pos, what: impl Into<String>, hint: impl Into<String>) -> Box<SpecError> {
        error(self.text, pos, what, hint)
    }

    fn program(mut self, ast: &Ast<'a>) -> Res<Program> {
        for st in &ast.stmts {
            if let Some(idx) = &st.idx {
                for v in idx {
                    self.dim(*v)?;
                }
            }
            self.defined_at.entry(st.name.s).or_insert(st.name.pos);
            self.prepass(&st.rhs)?;
        }
        let mut dtype: Option<(DType, Pos)> = None;
        let mut tf32: Option<Pos> = None;
        let mut indices: Option<Pos> = None;
        for opt in &ast.opts {
            match opt {
                OptAst::DType(d, pos) => {
                    if let Some((_, first)) = dtype {
                        return Err(self.err(
                            *pos,
                            "a second dtype",
                            format!("the dtype is already given at character {}", first.at + 1),
                        ));
                    }
                    dtype = Some((*d, *pos));
                }
                OptAst::Indices(e, pos) => {
                    if let Some(first) = indices {
                        return Err(self.err(
                            *pos,
                            "the index type is given twice",
                            format!("it is already given at character {}", first.at + 1),
                        ));
                    }
                    indices = Some(*pos);
                    self.indices = *e;
                }
                OptAst::Tf32(pos) => {
                    if tf32.is_some() {
                        return Err(self.err(*pos, "`tf32` is given twice", "write it once"));
                    }
                    tf32 = Some(*pos);
                }
                OptAst::Fix(..) | OptAst::Input(..) => {}
            }
        }
        if let (Some(pos), Some((d, _))) = (tf32, dtype)
            && d != DType::F32
        {
            return Err(self.err(
                pos,
                format!("`tf32` with `{}` elements", d.name()),
                "tf32 is how f32 products may be rounded; 16-bit operands run on the tensor cores already: drop one",
            ));
        }
        for st in &ast.stmts {
            self.statement(st)?;
        }
        for opt in &ast.opts {
            if let OptAst::Input(name, elem, pos) = opt {
                let Some(input) = self.inputs.iter_mut().find(|t| t.name == name.s) else {
                    let known: Vec<&str> = self.inputs.iter().map(|t| t.name.as_str()).collect();
                    return Err(self.err(
                        name.pos,
                        format!("`{}` is not an input of the program", show(name.s)),
                        format!(
                            "a type option names an input the statements read; the inputs are {}",
                            list(&known)
                        ),
                    ));
                };
                if input.elem != Elem::Float {
                    return Err(self.err(
                        *pos,
                        format!("the type of `{}` is given twice", show(name.s)),
                        "give it once",
                    ));
                }
                input.elem = *elem;
            }
        }
        for &(index, gathered, pos) in &self.gathers {
            let (t, x) = (&self.inputs[index], &self.inputs[gathered]);
            if !matches!(t.elem, Elem::I64 | Elem::I32) {
                return Err(self.err(
                    pos,
                    format!(
                        "`{}` indexes `{}`, so it holds integers",
                        show(&t.name),
                        show(&x.name)
                    ),
                    format!(
                        "give it an integer type: add the option `i64 {}`",
                        show(&t.name)
                    ),
                ));
            }
            if x.elem != Elem::Float {
                return Err(self.err(
                    pos,
                    format!(
                        "`{}` is read at an index from a tensor, so it must be a floating tensor",
                        show(&x.name)
                    ),
                    "gathers read floating inputs",
                ));
            }
        }
        for opt in &ast.opts {
            if let OptAst::Fix(name, value, pos) = opt {
                let Some(&d) = self.dim_of.get(name.s) else {
                    let known: Vec<&str> = self.dims.iter().map(|d| d.name.as_str()).collect();
                    return Err(self.err(
                        name.pos,
                        format!("`{}` is not an index variable of the program", show(name.s)),
                        format!("its index variables are {}", list(&known)),
                    ));
                };
                self.fix(d, *value, *pos, name.pos)?;
            }
        }
        if let Some(pos) = indices
            && !self.stmts.iter().any(|s| s.elem != Elem::Float)
        {
            return Err(self.err(
                pos,
                "an index type, but no statement computes an argmax or argmin",
                "remove it",
            ));
        }
        if self.stmts.is_empty() {
            return Err(self.err(
                Pos { at: 0, byte: 0 },
                "the program defines constants only",
                "add a statement that reads a tensor, as in `y[i] = x[i] * eps`",
            ));
        }
        let mut read = vec![false; self.stmts.len()];
        for s in &self.stmts {
            mark_reads(&s.expr, &mut read);
        }
        for (s, read) in self.stmts.iter_mut().zip(read) {
            s.output = !read;
        }
        let text = self.text;
        let program = Program {
            dims: self.dims,
            inputs: self.inputs,
            params: self.params,
            stmts: self.stmts,
            dtype: dtype.map_or(DType::F32, |(d, _)| d),
            precision: if tf32.is_some() {
                Precision::Tf32
            } else {
                Precision::Exact
            },
        };
        if let Some(pos) = tf32
            && !has_product(&program)
        {
            return Err(error(
                text,
                pos,
                "`tf32` on a program without a product to round",
                "tf32 lets the operands of a contraction (`sum(k) a[i, k] * b[k, j]`, attention's scores) round to \
                 10 mantissa bits; this program has none: drop it",
            ));
        }
        Ok(program)
    }

    /// Names the program cannot use: functions, constants, Rust keywords.
    fn check_name(&self, name: Name<'a>, role: &str) -> Res<()> {
        static RESERVED: OnceLock<Set<&'static str>> = OnceLock::new();
        let reserved = RESERVED.get_or_init(|| {
            let mut all: Set<&'static str> = ["pi", "inf", "infinity", "nan", "NaN"]
                .into_iter()
                .collect();
            all.extend(FUNCTIONS.iter().map(|(f, _)| *f));
            all.extend(REDUCTIONS.iter().map(|(f, _)| *f));
            all.extend(SCANS.iter().map(|(f, _)| *f));
            all.extend(RUST_KEYWORDS);
            all
        });
        let s = name.s;
        if !reserved.contains(s) {
            return Ok(());
        }
        if s == "pi" {
            return Err(self.err(
                name.pos,
                format!("`pi` is the constant π, not {role}"),
                "choose another name",
            ));
        }
        if matches!(s, "inf" | "infinity" | "nan" | "NaN") {
            return Err(self.err(
                name.pos,
                format!("`{s}` cannot be used: constants must be finite numbers"),
                "name it something else, or write a finite number",
            ));
        }
        if FUNCTIONS.iter().any(|(f, _)| *f == s)
            || REDUCTIONS.iter().any(|(f, _)| *f == s)
            || SCANS.iter().any(|(f, _)| *f == s)
        {
            return Err(self.err(
                name.pos,
                format!("`{s}` is a function, not {role}"),
                format!("call it as `{s}(…)`, or choose another name"),
            ));
        }
        if RUST_KEYWORDS.contains(&s) {
            return Err(self.err(
                name.pos,
                format!("`{s}` is a Rust keyword"),
                "tensors, dimensions and parameters become parameters of the generated function: choose another name",
            ));
        }
        Ok(())
    }

    fn dim(&mut self, v: Name<'a>) -> Res<usize> {
        if let Some(&d) = self.dim_of.get(v.s) {
            return Ok(d);
        }
        self.check_name(v, "an index variable")?;
        self.dims.push(DimDecl {
            name: v.s.to_string(),
            size: Dim::Runtime,
        });
        self.dim_of.insert(v.s, self.dims.len() - 1);
        Ok(self.dims.len() - 1)
    }

    fn prepass(&mut self, n: &Node<'a>) -> Res<()> {
        match &n.kind {
            Kind::Load(name, idx) => {
                self.loaded.insert(name.s);
                for ix in idx {
                    match ix {
                        Ix::Var(v) => {
                            self.dim(*v)?;
                        }
                        Ix::Load(name, inner) => {
                            self.loaded.insert(name.s);
                            for v in inner {
                                self.dim(*v)?;
                            }
                        }
                    }
                }
            }
            Kind::Reduce(_, over, body) => {
                for v in over {
                    self.dim(*v)?;
                }
                self.prepass(body)?;
            }
            Kind::Call(_, args) => {
                for a in args {
                    self.prepass(a)?;
                }
            }
            // A scan's head names an axis its statement declares, then modifiers: nothing to declare.
            Kind::Neg(a) | Kind::Scan(_, _, a) => self.prepass(a)?,
            Kind::Bin(_, a, b) => {
                self.prepass(a)?;
                self.prepass(b)?;
            }
            Kind::Num(_) | Kind::Name(_) => {}
        }
        Ok(())
    }

    fn fix(&mut self, d: usize, value: f64, pos: Pos, name_pos: Pos) -> Res<()> {
        let name = self.dims[d].name.clone();
        if let Some(first) = self.fixed_at.get(&d) {
            return Err(self.err(
                name_pos,
                format!("the dimension `{}` is fixed twice", show(&name)),
                format!("it is already fixed at character {}", first.at + 1),
            ));
        }
        if !(value >= 1.0 && value.fract() == 0.0 && value <= MAX_FIXED) {
            return Err(self.err(
                pos,
                format!(
                    "the dimension `{}` must be fixed to a positive integer",
                    show(&name)
                ),
                format!(
                    "write `{}=4096`; 0, negative and fractional extents are refused",
                    show(&name)
                ),
            ));
        }
        self.fixed_at.insert(d, name_pos);
        // Exact: value is an integer no larger than 2^53.
        self.dims[d].size = Dim::Fixed(value as u64);
        Ok(())
    }

    fn statement(&mut self, st: &StmtAst<'a>) -> Res<()> {
        let name = st.name;
        let first = self
            .stmt_of
            .get(name.s)
            .map(|(_, p)| *p)
            .or(self.consts.get(name.s).map(|(_, p)| *p));
        if let Some(first) = first {
            return Err(self.err(
                name.pos,
                format!("`{}` is assigned twice", show(name.s)),
                format!(
                    "it is first assigned at character {}; give the second a new name",
                    first.at + 1
                ),
            ));
        }
        if st.idx.is_none()
            && let Some(&d) = self.dim_of.get(name.s)
        {
            let mut cx = Cx {
                name: name.s,
                axes: Vec::new(),
                bound: Vec::new(),
                reduced: Map::default(),
                used_free: Set::default(),
            };
            let e = if has_load(&st.rhs) {
                Expr::Param(0)
            } else {
                self.expr(&st.rhs, &mut cx, true)?
            };
            let Expr::Const(v) = e else {
                return Err(self.err(
                    st.rhs.pos,
                    format!(
                        "`{0}` is an index variable, so `{0} = …` fixes its extent, which must be a number",
                        show(name.s)
                    ),
                    "name the tensor something else",
                ));
            };
            return self.fix(d, v, st.rhs.pos, name.pos);
        }
        self.check_name(name, "a tensor")?;
        if self.dim_of.contains_key(name.s) {
            return Err(self.err(
                name.pos,
                format!(
                    "`{}` is an index variable, so it cannot also name a tensor",
                    show(name.s)
                ),
                "choose another name for the tensor",
            ));
        }
        let mut axes = Vec::new();
        for v in st.idx.iter().flatten() {
            let d = self.dim_of[v.s];
            if axes.contains(&d) {
                return Err(self.err(
                    v.pos,
                    format!("`{}` appears twice in `{}[…]`", show(v.s), show(name.s)),
                    "each axis of a tensor has its own index variable (diagonals are not supported)",
                ));
            }
            axes.push(d);
        }
        let mut reduced = Map::default();
        binders(&st.rhs, &self.dim_of, &mut reduced);
        let mut cx = Cx {
            name: name.s,
            axes,
            bound: Vec::new(),
            reduced,
            used_free: Set::default(),
        };
        let e = self.expr(&st.rhs, &mut cx, true)?;
        if st.idx.is_none()
            && let Expr::Const(v) = e
        {
            self.consts.insert(name.s, (v, name.pos));
            return Ok(());
        }
        let mut reduced: Vec<(usize, (Pos, Reduce))> =
            cx.reduced.iter().map(|(d, p)| (*d, *p)).collect();
        reduced.sort_by_key(|(_, (p, _))| p.at);
        for (d, (pos, op)) in reduced {
            if cx.axes.contains(&d) && !cx.used_free.contains(&d) {
                let v = &self.dims[d].name;
                return Err(self.err(
                    pos,
                    format!(
                        "`{}` is an axis of `{}` and is reduced by this `{}`, but is used nowhere outside it",
                        show(v),
                        show(name.s),
                        op.name()
                    ),
                    format!("drop `{}` from the left side, as in `{}[…] = {}({}) …`", show(v), show(name.s), op.name(), show(v)),
                ));
            }
        }
        let mut e = e;
        self.lift(&mut e, true, name.s);
        let elem = match &e {
            Expr::Reduce(op, ..) if op.is_arg() => self.indices,
            _ => Elem::Float,
        };
        self.stmts.push(Stmt {
            name: name.s.to_string(),
            axes: cx.axes,
            expr: e,
            elem,
            output: false,
        });
        self.stmt_of
            .insert(name.s, (self.stmts.len() - 1, name.pos));
        Ok(())
    }

    fn expr(&mut self, n: &Node<'a>, cx: &mut Cx<'a>, root: bool) -> Res<Expr> {
        match &n.kind {
            Kind::Num(v) => Ok(Expr::Const(*v)),
            Kind::Name(name) => self.bare(*name, cx),
            Kind::Load(name, idx) => self.load_ix(*name, idx, cx),
            Kind::Neg(a) => {
                let a = self.expr(a, cx, false)?;
                self.combine(None, a, None, n.pos)
            }
            Kind::Bin(op, a, b) => {
                let a = self.expr(a, cx, false)?;
                let b = self.expr(b, cx, false)?;
                self.combine(Some(*op), a, Some(b), n.pos)
            }
            Kind::Call(name, args) => self.call(*name, args, cx, n.pos),
            Kind::Reduce(op, over, body) => self.reduce(*op, over, body, cx, root, n.pos),
            Kind::Scan(op, head, body) => self.scan(*op, head, body, cx, root, n.pos),
        }
    }

    /// `-a` (no operator) or `a op b`, folded. Out of `expr`, which recurses once per level of the tree: in a
    /// debug build a frame holds the temporaries of all its arms.
    #[inline(never)]
    fn combine(&self, op: Option<Binary>, a: Expr, b: Option<Expr>, pos: Pos) -> Res<Expr> {
        let e = match (op, b) {
            (Some(op), Some(b)) => Expr::Binary(op, Box::new(a), Box::new(b)),
            _ => Expr::Unary(Unary::Neg, Box::new(a)),
        };
        self.fold(e, pos)
    }

    // Kept out of `expr`, which recurses once per level of the tree: in a debug build a function's frame holds
    // the temporaries of all its arms, and these messages would make every level several kilobytes.
    #[inline(never)]
    fn reduce(
        &mut self,
        op: Reduce,
        over: &[Name<'a>],
        body: &Node<'a>,
        cx: &mut Cx<'a>,
        root: bool,
        pos: Pos,
    ) -> Res<Expr> {
        if op.is_arg() && !root {
            return Err(self.err(
                pos,
                format!(
                    "`{}` must be the whole right side of its statement",
                    op.name()
                ),
                format!(
                    "it gives an index: write it alone, as in `i[r] = {}(c) x[r, c]`",
                    op.name()
                ),
            ));
        }
        let mut dims = Vec::new();
        for v in over {
            let d = self.dim_of[v.s];
            if dims.contains(&d) {
                return Err(self.err(
                    v.pos,
                    format!("`{}` appears twice in `{}(…)`", show(v.s), op.name()),
                    "list each variable once",
                ));
            }
            dims.push(d);
        }
        let depth = cx.bound.len();
        cx.bound.extend(&dims);
        let body = self.expr(body, cx, false);
        cx.bound.truncate(depth);
        let body = body?;
        let used = self.free_vars(&body);
        for (v, d) in over.iter().zip(&dims) {
            if !used.contains(d) {
                return Err(self.err(
                    v.pos,
                    format!("`{}({})` reduces over `{}`, which its body does not use", op.name(), show(v.s), show(v.s)),
                    "the body is the rest of the product after the `)`, and ends at the next `+`, `-` or comparison: put a longer body in parentheses",
                ));
            }
        }
        if !op.is_arg() {
            dims.sort_unstable();
        }
        // `sum(c) sum(d) x` is `sum(c, d) x`: one meaning, one program.
        if !op.is_arg()
            && let Expr::Reduce(inner, more, inner_body) = &body
            && *inner == op
        {
            let mut all = dims.clone();
            all.extend(more);
            all.sort_unstable();
            return Ok(Expr::Reduce(op, all, inner_body.clone()));
        }
        Ok(Expr::Reduce(op, dims, Box::new(body)))
    }

    /// `cumsum(c, reverse, exclusive) body`: the whole right side of a statement indexed by `c`.
    #[inline(never)]
    fn scan(
        &mut self,
        op: Reduce,
        head: &[Name<'a>],
        body: &Node<'a>,
        cx: &mut Cx<'a>,
        root: bool,
        pos: Pos,
    ) -> Res<Expr> {
        let mut scan = Scan {
            op,
            dim: 0,
            reverse: false,
            exclusive: false,
        };
        let name = scan.name();
        if !root {
            return Err(self.err(
                pos,
                format!("`{name}` must be the whole right side of its statement"),
                format!(
                    "write it alone, as in `c[r, k] = {name}(k) x[r, k]`, and use `c` in a later statement"
                ),
            ));
        }
        let (dim, modifiers) = head.split_first().expect("a reduction head has a name");
        let Some(&d) = self.dim_of.get(dim.s) else {
            return Err(self.err(
                dim.pos,
                format!(
                    "`{name}` scans along `{}`, which indexes no tensor",
                    show(dim.s)
                ),
                format!(
                    "name an axis of `{}`, as in `y[r, c] = {name}(c) x[r, c]`",
                    show(cx.name)
                ),
            ));
        };
        if !cx.axes.contains(&d) {
            return Err(self.err(
                dim.pos,
                format!(
                    "`{name}` scans along `{}`, which is not an axis of `{}`",
                    show(dim.s),
                    show(cx.name)
                ),
                format!(
                    "a scan keeps the axis it runs along: write `{}[…, {}, …] = {name}({}) …`",
                    show(cx.name),
                    show(dim.s),
                    show(dim.s)
                ),
            ));
        }
        scan.dim = d;
        for m in modifiers {
            let flag = match m.s {
                "reverse" | "reversed" => &mut scan.reverse,
                "exclusive" => &mut scan.exclusive,
                other => {
                    return Err(self.err(
                        m.pos,
                        format!("`{}` is not a modifier of `{name}`", show(other)),
                        format!(
                            "a scan runs along one dimension; after it come `reverse` and `exclusive`, as in `{name}({}, reverse)`",
                            show(dim.s)
                        ),
                    ));
                }
            };
            if *flag {
                return Err(self.err(
                    m.pos,
                    format!("`{}` appears twice in `{name}(…)`", show(m.s)),
                    "give each modifier once",
                ));
            }
            *flag = true;
        }
        if scan.exclusive && matches!(op, Reduce::Max | Reduce::Min) {
            return Err(self.err(
                pos,
                format!("`exclusive` applies to `cumsum` and `cumprod`, not `{name}`"),
                "a running max or min of nothing has no value; drop `exclusive`",
            ));
        }
        let body = self.expr(body, cx, false)?;
        cx.used_free.insert(d);
        Ok(Expr::Scan(scan, Box::new(body)))
    }

    fn bare(&mut self, name: Name<'a>, cx: &mut Cx<'a>) -> Res<Expr> {
        let s = name.s;
        if s == "pi" {
            return Ok(Expr::Const(std::f64::consts::PI));
        }
        if self.dim_of.contains_key(s) {
            return Err(self.err(
                name.pos,
                format!(
                    "`{}` is an index variable; its value cannot be used in arithmetic",
                    show(s)
                ),
                "an index variable only indexes tensors, as in `x[i]`",
            ));
        }
        self.check_name(name, "a value")?;
        if let Some((v, _)) = self.consts.get(s) {
            return Ok(Expr::Const(*v));
        }
        if let Some(&(j, _)) = self.stmt_of.get(s) {
            let st = &self.stmts[j];
            if !st.axes.is_empty() {
                let axes: Vec<&str> = st
                    .axes
                    .iter()
                    .map(|&d| self.dims[d].name.as_str())
                    .collect();
                return Err(self.err(
                    name.pos,
                    format!("`{}` has axes, so it is read with its indices", show(s)),
                    format!("write `{}[{}]`", show(s), axes.join(", ")),
                ));
            }
            self.check_readable(j, name.pos)?;
            return Ok(Expr::Value(j));
        }
        self.not_yet_defined(name, cx)?;
        if self.loaded.contains(s) {
            return Err(self.err(
                name.pos,
                format!("the input `{}` is used without an index", show(s)),
                format!(
                    "a tensor is read with its index variables, as in `{}[i]`",
                    show(s)
                ),
            ));
        }
        if let Some(&p) = self.param_of.get(s) {
            return Ok(Expr::Param(p));
        }
        self.params.push(s.to_string());
        self.param_of.insert(s, self.params.len() - 1);
        Ok(Expr::Param(self.params.len() - 1))
    }

    /// Errors for a name this statement defines or a later one does.
    fn not_yet_defined(&self, name: Name<'a>, cx: &Cx<'a>) -> Res<()> {
        if name.s == cx.name {
            return Err(self.err(
                name.pos,
                format!(
                    "`{}` reads the tensor its own statement defines",
                    show(name.s)
                ),
                "a statement cannot read itself; recurrences and scans are not supported here",
            ));
        }
        if let Some(at) = self.defined_at.get(name.s) {
            return Err(self.err(
                name.pos,
                format!(
                    "`{}` is read here but assigned later, at character {}",
                    show(name.s),
                    at.at + 1
                ),
                "statements run in order: move its statement before this one",
            ));
        }
        Ok(())
    }

    fn check_readable(&self, j: usize, pos: Pos) -> Res<()> {
        if self.stmts[j].elem != Elem::Float {
            return Err(self.err(
                pos,
                format!(
                    "`{}` holds argmax/argmin indices, which later statements cannot read",
                    show(&self.stmts[j].name)
                ),
                "keep it an output of the program",
            ));
        }
        Ok(())
    }

    /// A load whose indices may read an integer tensor: a plain load, or a gather.
    fn load_ix(&mut self, name: Name<'a>, idx: &[Ix<'a>], cx: &mut Cx<'a>) -> Res<Expr> {
        let vars: Vec<Name<'a>> = idx
            .iter()
            .filter_map(|ix| match ix {
                Ix::Var(v) => Some(*v),
                Ix::Load(..) => None,
            })
            .collect();
        if vars.len() == idx.len() {
            return self.load(name, &vars, cx);
        }
        self.gather(name, idx, cx)
    }

    /// `x[r, t[r]]`: input `x` read at the value of the integer input `t` along one axis.
    #[inline(never)]
    fn gather(&mut self, name: Name<'a>, idx: &[Ix<'a>], cx: &mut Cx<'a>) -> Res<Expr> {
        let s = name.s;
        let mut loads = idx.iter().enumerate().filter_map(|(p, ix)| match ix {
            Ix::Load(t, inner) => Some((p, *t, inner)),
            Ix::Var(_) => None,
        });
        let Some((axis, index_name, inner)) = loads.next() else {
            return Err(self.err(name.pos, "a gather without a gathered index", ""));
        };
        if let Some((_, second, _)) = loads.next() {
            return Err(self.err(
                second.pos,
                format!("a second index of `{}` read from a tensor", show(s)),
                "one index of a read may come from a tensor; read the others with index variables",
            ));
        }
        let Some(&(input, first)) = self.input_of.get(s) else {
            let (what, hint) = if self.stmt_of.contains_key(s) || self.dim_of.contains_key(s) {
                (
                    format!(
                        "`{}` is not an input: only inputs are read at an index from a tensor",
                        show(s)
                    ),
                    "compute the gathered values from inputs after the gather".to_string(),
                )
            } else {
                (
                    format!(
                        "`{}` is read at an index from a tensor before it is read with index variables",
                        show(s)
                    ),
                    format!(
                        "read it with index variables first (as in `{}[{}]`): that names the dimension `{}` indexes",
                        show(s),
                        vec!["…"; idx.len()].join(", "),
                        show(index_name.s)
                    ),
                )
            };
            return Err(self.err(name.pos, what, hint));
        };
        let axes = self.inputs[input].axes.clone();
        let spell = |ds: &[usize]| -> String {
            let v: Vec<&str> = ds.iter().map(|&d| self.dims[d].name.as_str()).collect();
            format!("{}[{}]", show(s), v.join(", "))
        };
        if axes.len() != idx.len() {
            return Err(self.err(
                name.pos,
                format!(
                    "`{}` has {} axes (`{}` at character {}), but {} indices here",
                    show(s),
                    axes.len(),
                    spell(&axes),
                    first.at + 1,
                    idx.len()
                ),
                "give one index per axis",
            ));
        }
        for (p, ix) in idx.iter().enumerate() {
            let Ix::Var(v) = ix else { continue };
            let d = self.index_var(*v, cx)?;
            if d != axes[p] {
                return Err(self.err(
                    v.pos,
                    format!(
                        "axis {} of `{}` is `{}` (`{}` at character {}), not `{}`",
                        p + 1,
                        show(s),
                        self.dims[axes[p]].name,
                        spell(&axes),
                        first.at + 1,
                        show(v.s)
                    ),
                    "a tensor is indexed by the same variables in the same order everywhere",
                ));
            }
        }
        let index = self.load(index_name, inner, cx)?;
        let Expr::Input(k) = index else {
            return Err(self.err(
                index_name.pos,
                format!(
                    "`{}` is computed by the program; an index read from a tensor comes from an input",
                    show(index_name.s)
                ),
                format!("make `{}` an input of integer type, as in `i64 {0}`", show(index_name.s)),
            ));
        };
        self.gathers.push((k, input, index_name.pos));
        Ok(Expr::Gather(Gather { input, axis }, Box::new(index)))
    }

    /// Checks that index variable `v` is bound here (an axis of the statement or a variable
    /// an enclosing reduction binds) and returns its dimension.
    fn index_var(&self, v: Name<'a>, cx: &mut Cx<'a>) -> Res<usize> {
        let d = self.dim_of[v.s];
        if cx.bound.contains(&d) {
            return Ok(d);
        }
        if cx.axes.contains(&d) {
            cx.used_free.insert(d);
            return Ok(d);
        }
        if let Some((rpos, op)) = cx.reduced.get(&d) {
            return Err(self.err(
                v.pos,
                format!(
                    "`{}` is used here outside the `{}({})` at character {} that reduces it, and is not an axis of `{}`",
                    show(v.s),
                    op.name(),
                    show(v.s),
                    rpos.at + 1,
                    show(cx.name)
                ),
                "a reduction's body is the rest of the product and ends at the next `+`, `-` or comparison: put the whole body in parentheses, as in `sum(c) (a[c] + b[c])`",
            ));
        }
        let axes: Vec<&str> = cx
            .axes
            .iter()
            .map(|&d| self.dims[d].name.as_str())
            .collect();
        Err(self.err(
            v.pos,
            format!(
                "`{}` is not an axis of `{}` (its axes: {})",
                show(v.s),
                show(cx.name),
                if axes.is_empty() {
                    "none".into()
                } else {
                    axes.join(", ")
                }
            ),
            format!(
                "reduce over it (`sum({0}) …`) or add it to the left side: `{1}[{2}{0}]`",
                show(v.s),
                show(cx.name),
                axes.iter().map(|a| format!("{a}, ")).collect::<String>()
            ),
        ))
    }

    fn load(&mut self, name: Name<'a>, idx: &[Name<'a>], cx: &mut Cx<'a>) -> Res<Expr> {
        let s = name.s;
        if self.dim_of.contains_key(s) {
            return Err(self.err(
                name.pos,
                format!("`{}` is an index variable, not a tensor", show(s)),
                "give the tensor and the index variable different names",
            ));
        }
        self.check_name(name, "a tensor")?;
        if self.consts.contains_key(s) {
            return Err(self.err(
                name.pos,
                format!("`{}` is a constant, not a tensor", show(s)),
                format!("write it without an index: `{}`", show(s)),
            ));
        }
        let mut dims = Vec::with_capacity(idx.len());
        for v in idx {
            let d = self.dim_of[v.s];
            if dims.contains(&d) {
                return Err(self.err(
                    v.pos,
                    format!("`{}` appears twice in `{}[…]`", show(v.s), show(s)),
                    "each axis of a tensor has its own index variable (diagonals are not supported)",
                ));
            }
            dims.push(self.index_var(*v, cx)?);
        }
        let (expr, axes, first) = if let Some(&(j, at)) = self.stmt_of.get(s) {
            self.check_readable(j, name.pos)?;
            (Expr::Value(j), self.stmts[j].axes.clone(), at)
        } else {
            self.not_yet_defined(name, cx)?;
            if let Some(&(i, at)) = self.input_of.get(s) {
                (Expr::Input(i), self.inputs[i].axes.clone(), at)
            } else {
                self.inputs.push(TensorDecl {
                    name: s.to_string(),
                    axes: dims.clone(),
                    elem: Elem::Float,
                });
                let i = self.inputs.len() - 1;
                self.input_of.insert(s, (i, name.pos));
                (Expr::Input(i), dims.clone(), name.pos)
            }
        };
        if axes != dims {
            let spell = |ds: &[usize]| -> String {
                let v: Vec<&str> = ds.iter().map(|&d| self.dims[d].name.as_str()).collect();
                format!("{}[{}]", show(s), v.join(", "))
            };
            return Err(self.err(
                name.pos,
                format!(
                    "`{}` is read as `{}` here but as `{}` at character {}",
                    show(s),
                    spell(&dims),
                    spell(&axes),
                    first.at + 1
                ),
                "a tensor is indexed by the same variables in the same order everywhere (transposes are not supported)",
            ));
        }
        Ok(expr)
    }

    fn call(&mut self, name: Name<'a>, args: &[Node<'a>], cx: &mut Cx<'a>, pos: Pos) -> Res<Expr> {
        let s = name.s;
        let Some(&(_, arity)) = FUNCTIONS.iter().find(|(f, _)| *f == s) else {
            if let Some((_, op)) = REDUCTIONS.iter().find(|(f, _)| *f == s) {
                return Err(self.err(
                    pos,
                    format!("`{s}` is a reduction: its variables go in `(…)` and its body follows"),
                    format!("write `{0}(c) x[r, c]`; `{0}(…)` needs bare index variables and a value right after the `)`", op.name()),
                ));
            }
            if SCANS.iter().any(|(f, _)| *f == s) {
                return Err(self.err(
                    pos,
                    format!("`{s}` is a scan: its dimension (and `reverse`, `exclusive`) go in `(…)` and its body follows"),
                    format!("write `y[r, c] = {s}(c) x[r, c]`; `{s}(…)` needs bare names and a value right after the `)`"),
                ));
            }
            let names = FUNCTIONS
                .iter()
                .map(|(f, _)| *f)
                .chain(REDUCTIONS.iter().map(|(f, _)| *f))
                .chain(SCANS.iter().map(|(f, _)| *f));
            let hint = match closest(s, names) {
                Some(c) => format!("did you mean `{c}`?"),
                None => "functions: exp log log1p expm1 tanh erf sqrt rsqrt abs sigmoid neg relu square max min pow where clamp; reductions: sum mean max min prod argmax argmin; scans: cumsum cumprod cummax cummin".into(),
            };
            return Err(self.err(pos, format!("unknown function `{}`", show(s)), hint));
        };
        if args.len() != arity {
            let plural = if arity == 1 { "" } else { "s" };
            let extra = if matches!(s, "max" | "min") && args.len() == 1 {
                format!(
                    "; as a reduction, `{s}(c)` needs a body right after the `)`: `{s}(c) x[r, c]`"
                )
            } else {
                String::new()
            };
            return Err(self.err(
                pos,
                format!("`{s}` takes {arity} argument{plural}, {} given", args.len()),
                format!("write `{s}({})`{extra}", vec!["…"; arity].join(", ")),
            ));
        }
        let mut a = Vec::with_capacity(args.len());
        for arg in args {
            a.push(self.expr(arg, cx, false)?);
        }
        let mut a = a.into_iter();
        // The arity is checked above, so the fallback is never used.
        let mut next = || Box::new(a.next().unwrap_or(Expr::Const(0.0)));
        let e = match s {
            "max" => Expr::Binary(Binary::Max, next(), next()),
            "min" => Expr::Binary(Binary::Min, next(), next()),
            "pow" => Expr::Binary(Binary::Pow, next(), next()),
            "where" => Expr::Select(next(), next(), next()),
            "relu" => Expr::Binary(Binary::Max, next(), Box::new(Expr::Const(0.0))),
            "square" => Expr::Binary(Binary::Pow, next(), Box::new(Expr::Const(2.0))),
            "clamp" => {
                let (v, lo, hi) = (next(), next(), next());
                let inner = self.fold(Expr::Binary(Binary::Max, v, lo), pos)?;
                Expr::Binary(Binary::Min, Box::new(inner), hi)
            }
            _ => {
                let op = match s {
                    "exp" => Unary::Exp,
                    "log" => Unary::Log,
                    "log1p" => Unary::Log1p,
                    "expm1" => Unary::Expm1,
                    "tanh" => Unary::Tanh,
                    "erf" => Unary::Erf,
                    "sqrt" => Unary::Sqrt,
                    "rsqrt" => Unary::Rsqrt,
                    "abs" => Unary::Abs,
                    "sigmoid" => Unary::Sigmoid,
                    _ => Unary::Neg,
                };
                Expr::Unary(op, next())
            }
        };
        self.fold(e, pos)
    }

    /// Folds an operation of constants into one constant; refuses NaN and infinities.
    fn fold(&self, e: Expr, pos: Pos) -> Res<Expr> {
        let c = |e: &Expr| match e {
            Expr::Const(v) => Some(*v),
            _ => None,
        };
        let value = match &e {
            Expr::Unary(op, a) => c(a).map(|a| eval_unary(*op, a)),
            Expr::Binary(op, a, b) => match (c(a), c(b)) {
                (Some(a), Some(b)) => Some(eval_binary(*op, a, b)),
                _ => None,
            },
            Expr::Select(k, a, b) => match (c(k), c(a), c(b)) {
                (Some(k), Some(a), Some(b)) => Some(if k != 0.0 { a } else { b }),
                _ => None,
            },
            _ => None,
        };
        match value {
            None => Ok(e),
            Some(v) if v.is_nan() => Err(self.err(
                pos,
                "this constant expression is not a number (NaN)",
                "check the arguments: `log`/`sqrt` of a negative number, `0 / 0` …",
            )),
            Some(v) if v.is_infinite() => Err(self.err(
                pos,
                "this constant expression is infinite",
                "check for a division by zero or an overflow",
            )),
            Some(v) => Ok(Expr::Const(v)),
        }
    }

    /// The index variables an expression uses that it does not bind itself.
    fn free_vars(&self, e: &Expr) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        self.collect_free(e, &mut out);
        out
    }

    fn collect_free(&self, e: &Expr, out: &mut BTreeSet<usize>) {
        match e {
            Expr::Const(_) | Expr::Param(_) => {}
            Expr::Input(i) => out.extend(&self.inputs[*i].axes),
            Expr::Value(j) => out.extend(&self.stmts[*j].axes),
            Expr::Unary(_, a) => self.collect_free(a, out),
            Expr::Binary(_, a, b) => {
                self.collect_free(a, out);
                self.collect_free(b, out);
            }
            Expr::Select(k, a, b) => {
                self.collect_free(k, out);
                self.collect_free(a, out);
                self.collect_free(b, out);
            }
            Expr::Reduce(_, over, body) => {
                let mut inner = BTreeSet::new();
                self.collect_free(body, &mut inner);
                out.extend(inner.into_iter().filter(|d| !over.contains(d)));
            }
            Expr::Scan(scan, body) => {
                out.insert(scan.dim);
                self.collect_free(body, out);
            }
            Expr::Gather(g, index) => {
                let axes = &self.inputs[g.input].axes;
                out.extend(
                    axes.iter()
                        .enumerate()
                        .filter(|&(p, _)| p != g.axis)
                        .map(|(_, &d)| d),
                );
                self.collect_free(index, out);
            }
        }
    }

    /// Moves every reduction that is not a statement's whole expression into a statement of its own.
    fn lift(&mut self, e: &mut Expr, root: bool, base: &str) {
        match e {
            Expr::Unary(_, a) | Expr::Reduce(_, _, a) | Expr::Scan(_, a) | Expr::Gather(_, a) => {
                self.lift(a, false, base);
            }
            Expr::Binary(_, a, b) => {
                self.lift(a, false, base);
                self.lift(b, false, base);
            }
            Expr::Select(k, a, b) => {
                self.lift(k, false, base);
                self.lift(a, false, base);
                self.lift(b, false, base);
            }
            Expr::Const(_) | Expr::Param(_) | Expr::Input(_) | Expr::Value(_) => {}
        }
        if !root && matches!(e, Expr::Reduce(..)) {
            let reduction = std::mem::replace(e, Expr::Const(0.0));
            *e = Expr::Value(self.statement_for(reduction, base));
        }
    }

    /// The lifted statement computing `reduction`: an earlier one if it is the same.
    #[inline(never)]
    fn statement_for(&mut self, reduction: Expr, base: &str) -> usize {
        if let Some(&j) = self.lifted.get(&reduction) {
            return j;
        }
        let op = match &reduction {
            Expr::Reduce(op, ..) => op.name(),
            _ => "value",
        };
        let prefix = format!("{base}__{op}");
        let k = self.next_suffix.entry(prefix.clone()).or_insert(1);
        let name = if *k == 1 {
            prefix
        } else {
            format!("{prefix}{k}")
        };
        *k += 1;
        let axes = self.free_vars(&reduction).into_iter().collect();
        self.stmts.push(Stmt {
            name,
            axes,
            expr: reduction.clone(),
            elem: Elem::Float,
            output: false,
        });
        let j = self.stmts.len() - 1;
        self.lifted.insert(reduction, j);
        j
    }
}

/// The variables of every reduction in a statement's right side, with the first place each is bound.
fn binders(n: &Node<'_>, dim_of: &Map<&str, usize>, out: &mut Map<usize, (Pos, Reduce)>) {
    match &n.kind {
        Kind::Reduce(op, over, body) => {
            for v in over {
                if let Some(&d) = dim_of.get(v.s) {
                    out.entry(d).or_insert((n.pos, *op));
                }
            }
            binders(body, dim_of, out);
        }
        Kind::Call(_, args) => args.iter().for_each(|a| binders(a, dim_of, out)),
        Kind::Neg(a) | Kind::Scan(_, _, a) => binders(a, dim_of, out),
        Kind::Bin(_, a, b) => {
            binders(a, dim_of, out);
            binders(b, dim_of, out);
        }
        Kind::Num(_) | Kind::Name(_) | Kind::Load(..) => {}
    }
}

fn has_load(n: &Node<'_>) -> bool {
    match &n.kind {
        Kind::Load(..) | Kind::Reduce(..) | Kind::Scan(..) => true,
        Kind::Call(_, args) => args.iter().any(has_load),
        Kind::Neg(a) => has_load(a),
        Kind::Bin(_, a, b) => has_load(a) || has_load(b),
        Kind::Num(_) | Kind::Name(_) => false,
    }
}

fn mark_reads(e: &Expr, read: &mut [bool]) {
    match e {
        Expr::Value(j) => read[*j] = true,
        Expr::Const(_) | Expr::Param(_) | Expr::Input(_) => {}
        Expr::Unary(_, a) | Expr::Reduce(_, _, a) | Expr::Scan(_, a) | Expr::Gather(_, a) => {
            mark_reads(a, read)
        }
        Expr::Binary(_, a, b) => {
            mark_reads(a, read);
            mark_reads(b, read);
        }
        Expr::Select(k, a, b) => {
            mark_reads(k, read);
            mark_reads(a, read);
            mark_reads(b, read);
        }
    }
}

fn eval_unary(op: Unary, v: f64) -> f64 {
    match op {
        Unary::Neg => -v,
        Unary::Exp => v.exp(),
        Unary::Log => v.ln(),
        Unary::Log1p => v.ln_1p(),
        Unary::Expm1 => v.exp_m1(),
        Unary::Tanh => v.tanh(),
        Unary::Erf => libm::erf(v),
        Unary::Sqrt => v.sqrt(),
        Unary::Rsqrt => 1.0 / v.sqrt(),
        Unary::Abs => v.abs(),
        Unary::Sigmoid => crate::reference::sigmoid(v),
    }
}

fn eval_binary(op: Binary, a: f64, b: f64) -> f64 {
    let truth = |t: bool| if t { 1.0 } else { 0.0 };
    match op {
        Binary::Add => a + b,
        Binary::Sub => a - b,
        Binary::Mul => a * b,
        Binary::Div => a / b,
        Binary::Pow => a.powf(b),
        Binary::Max => a.max(b),
        Binary::Min => a.min(b),
        Binary::Lt => truth(a < b),
        Binary::Le => truth(a <= b),
        Binary::Gt => truth(a > b),
        Binary::Ge => truth(a >= b),
        Binary::Eq => truth(a == b),
        Binary::Ne => truth(a != b),
    }
}

fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names
            .iter()
            .map(|n| format!("`{}`", show(n)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The candidate within typo distance of `word`, if any.
pub(crate) fn closest<'c>(
    word: &str,
    candidates: impl Iterator<Item = &'c str>,
) -> Option<&'c str> {
    // Long words are no typo of a short name; skipping them keeps a 100 KB word from costing quadratic time.
    if word.chars().count() > 32 {
        return None;
    }
    let (best, dist) = candidates
        .map(|c| (c, edit_distance(word, c)))
        .min_by_key(|(_, d)| *d)?;
    let limit = (word.chars().count() / 3).max(1);
    (dist <= limit && dist > 0).then_some(best)
}

pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
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

// ──────────────────────────────────────────── printing ────────────────────────────────────────────

/// Shortest text that reads back as the same f64.
pub(crate) fn number(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 || (1e-4..1e16).contains(&a) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Whether a statement is an intermediate the parser lifted out of an expression (written back inline).
fn generated(s: &Stmt) -> bool {
    s.name.contains("__")
}

struct Printer<'p> {
    p: &'p Program,
    dims: Vec<String>,
    inputs: Vec<String>,
    params: Vec<String>,
    stmts: Vec<String>,
    math: bool,
}

impl<'p> Printer<'p> {
    fn written(p: &'p Program, math: bool) -> Self {
        Printer {
            p,
            dims: p.dims.iter().map(|d| d.name.clone()).collect(),
            inputs: p.inputs.iter().map(|t| t.name.clone()).collect(),
            params: p.params.clone(),
            stmts: p.stmts.iter().map(|s| s.name.clone()).collect(),
            math,
        }
    }

    fn positional(p: &'p Program) -> Self {
        let (mut t, mut o) = (0, 0);
        let stmts = p
            .stmts
            .iter()
            .map(|s| {
                if s.output {
                    o += 1;
                    format!("out{}", o - 1)
                } else if generated(s) {
                    // Written inline; the name never appears.
                    s.name.clone()
                } else {
                    t += 1;
                    format!("t{}", t - 1)
                }
            })
            .collect();
        Printer {
            p,
            dims: (0..p.dims.len()).map(|i| format!("d{i}")).collect(),
            inputs: (0..p.inputs.len()).map(|i| format!("in{i}")).collect(),
            params: (0..p.params.len()).map(|i| format!("p{i}")).collect(),
            stmts,
            math: false,
        }
    }

    fn inlined(&self, j: usize) -> bool {
        self.p
            .stmts
            .get(j)
            .is_some_and(|s| generated(s) && !s.output)
    }

    fn statements(&self) -> Vec<String> {
        self.p
            .stmts
            .iter()
            .enumerate()
            .filter(|(j, _)| !self.inlined(*j))
            .map(|(j, s)| {
                let mut line = self.stmts[j].clone();
                if !s.axes.is_empty() {
                    line.push('[');
                    line.push_str(&self.axes(&s.axes));
                    line.push(']');
                } else if matches!(s.expr, Expr::Const(_)) {
                    // `name = 2` would name a constant; brackets keep it a statement.
                    line.push_str("[]");
                }
                line.push_str(" = ");
                self.go(&s.expr, 0, false, &mut line);
                line
            })
            .collect()
    }

    fn options(&self, canonical: bool) -> String {
        let mut out = Vec::new();
        if canonical || self.p.dtype != DType::F32 {
            out.push(self.p.dtype.name().to_string());
        }
        // Exact programs keep the text they had before precisions existed: it is hashed into keys.
        if self.p.precision == Precision::Tf32 {
            out.push("tf32".to_string());
        }
        for (i, d) in self.p.dims.iter().enumerate() {
            if let Dim::Fixed(v) = d.size {
                out.push(format!("{}={v}", self.dims[i]));
            }
        }
        let ints: Vec<Elem> = self
            .p
            .stmts
            .iter()
            .map(|s| s.elem)
            .filter(|e| *e != Elem::Float)
            .collect();
        let name = |e: Elem| if e == Elem::I32 { "i32" } else { "i64" };
        if let Some(&first) = ints.first() {
            if ints.iter().all(|e| *e == first) {
                if canonical || first == Elem::I32 {
                    out.push(format!("{} indices", name(first)));
                }
            } else {
                // Not something the parser builds; written so that the key still tells them apart.
                let each: Vec<&str> = ints.iter().map(|e| name(*e)).collect();
                out.push(format!("indices {}", each.join(" ")));
            }
        }
        for (i, t) in self.p.inputs.iter().enumerate() {
            if t.elem != Elem::Float {
                out.push(format!(
                    "{} {}",
                    t.elem.rust_type(self.p.dtype),
                    self.inputs[i]
                ));
            }
        }
        out.join(", ")
    }

    fn axes(&self, axes: &[usize]) -> String {
        axes.iter()
            .map(|&d| self.dims[d].as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The expression an `Expr` prints as: a lifted intermediate is written where it is read.
    fn view<'e>(&self, e: &'e Expr) -> &'e Expr
    where
        'p: 'e,
    {
        match e {
            Expr::Value(j) if self.inlined(*j) => self.view(&self.p.stmts[*j].expr),
            e => e,
        }
    }

    /// 0 comparison, 1 sum, 2 product, 3 sign, 4 power, 5 atom (reductions included: what follows decides).
    fn level(&self, e: &Expr) -> u8 {
        match self.view(e) {
            Expr::Binary(op, ..) => match op {
                Binary::Lt | Binary::Le | Binary::Gt | Binary::Ge | Binary::Eq | Binary::Ne => 0,
                Binary::Add | Binary::Sub => 1,
                Binary::Mul | Binary::Div => 2,
                Binary::Pow => 4,
                Binary::Max | Binary::Min => 5,
            },
            Expr::Unary(Unary::Neg, _) => 3,
            Expr::Const(v) if v.is_sign_negative() => 3,
            _ => 5,
        }
    }

    /// Whether the printed expression ends in a reduction's body, which would take in a following `*`, `/`, `^`.
    fn ends_open(&self, e: &Expr) -> bool {
        let tail = |b: &Expr, min: u8| self.level(b) >= min && self.ends_open(b);
        match self.view(e) {
            Expr::Reduce(..) | Expr::Scan(..) => true,
            Expr::Unary(Unary::Neg, a) => tail(a, 3),
            Expr::Binary(op, _, b) => match op {
                Binary::Mul | Binary::Div | Binary::Pow => tail(b, 3),
                Binary::Add | Binary::Sub => tail(b, 2),
                Binary::Max | Binary::Min => false,
                _ => tail(b, 1),
            },
            _ => false,
        }
    }

    fn go(&self, e: &Expr, min: u8, closed: bool, out: &mut String) {
        let e = self.view(e);
        let wrap = self.level(e) < min || (closed && self.ends_open(e));
        if wrap {
            out.push('(');
        }
        self.render(e, out);
        if wrap {
            out.push(')');
        }
    }

    fn render(&self, e: &Expr, out: &mut String) {
        match e {
            Expr::Const(v) => out.push_str(&number(*v)),
            Expr::Param(i) => out.push_str(&self.params[*i]),
            Expr::Input(i) => {
                out.push_str(&self.inputs[*i]);
                out.push('[');
                out.push_str(&self.axes(&self.p.inputs[*i].axes));
                out.push(']');
            }
            Expr::Gather(g, index) => {
                out.push_str(&self.inputs[g.input]);
                out.push('[');
                for (p, &d) in self.p.inputs[g.input].axes.iter().enumerate() {
                    if p > 0 {
                        out.push_str(", ");
                    }
                    if p == g.axis {
                        self.go(index, 0, false, out);
                    } else {
                        out.push_str(self.dims[d].as_str());
                    }
                }
                out.push(']');
            }
            Expr::Value(j) => {
                out.push_str(&self.stmts[*j]);
                let axes = &self.p.stmts[*j].axes;
                if !axes.is_empty() {
                    out.push('[');
                    out.push_str(&self.axes(axes));
                    out.push(']');
                }
            }
            Expr::Unary(Unary::Neg, a) => {
                // `- -x` rather than `-(-x)`: parentheses would nest deeper than the text that was parsed.
                out.push('-');
                if matches!(self.view(a), Expr::Unary(Unary::Neg, _)) {
                    out.push(' ');
                }
                self.go(a, 3, false, out);
            }
            Expr::Unary(Unary::Sqrt, a) if self.math => {
                out.push_str("√(");
                self.go(a, 0, false, out);
                out.push(')');
            }
            Expr::Unary(Unary::Abs, a) if self.math => {
                out.push('|');
                self.go(a, 0, false, out);
                out.push('|');
            }
            Expr::Unary(op, a) => {
                out.push_str(op.name());
                out.push('(');
                self.go(a, 0, false, out);
                out.push(')');
            }
            Expr::Binary(op @ (Binary::Max | Binary::Min), a, b) => {
                out.push_str(op.name());
                out.push('(');
                self.go(a, 0, false, out);
                out.push_str(", ");
                self.go(b, 0, false, out);
                out.push(')');
            }
            Expr::Binary(op, a, b) => {
                let (left, right, left_closed) = match op {
                    Binary::Add | Binary::Sub => (1, 2, false),
                    Binary::Mul | Binary::Div => (2, 3, true),
                    Binary::Pow => (5, 3, true),
                    _ => (1, 1, false),
                };
                self.go(a, left, left_closed, out);
                let symbol = match (self.math, op) {
                    (true, Binary::Mul) => "·",
                    (true, Binary::Le) => "≤",
                    (true, Binary::Ge) => "≥",
                    (true, Binary::Ne) => "≠",
                    (_, op) => op.name(),
                };
                out.push(' ');
                out.push_str(symbol);
                out.push(' ');
                self.go(b, right, false, out);
            }
            Expr::Select(k, a, b) => {
                if self.math {
                    out.push('(');
                    self.go(a, 0, false, out);
                    out.push_str(" if ");
                    self.go(k, 0, false, out);
                    out.push_str(" else ");
                    self.go(b, 0, false, out);
                    out.push(')');
                } else {
                    out.push_str("where(");
                    self.go(k, 0, false, out);
                    out.push_str(", ");
                    self.go(a, 0, false, out);
                    out.push_str(", ");
                    self.go(b, 0, false, out);
                    out.push(')');
                }
            }
            Expr::Scan(scan, body) => {
                let mut head = self.axes(&[scan.dim]);
                if scan.reverse {
                    head.push_str(", reverse");
                }
                if scan.exclusive {
                    head.push_str(", exclusive");
                }
                let _ = write!(out, "{}({head}) ", scan.name());
                let mut text = String::new();
                self.go(body, 2, false, &mut text);
                if text.starts_with('-') {
                    out.push('(');
                    out.push_str(&text);
                    out.push(')');
                } else {
                    out.push_str(&text);
                }
            }
            Expr::Reduce(op, over, body) => {
                if self.math {
                    let symbol = match op {
                        Reduce::Sum => "Σ",
                        Reduce::Prod => "Π",
                        op => op.name(),
                    };
                    let _ = write!(out, "{symbol}_{{{}}} ", self.axes(over));
                } else {
                    let _ = write!(out, "{}({}) ", op.name(), self.axes(over));
                }
                let mut text = String::new();
                self.go(body, 2, false, &mut text);
                // `-` does not start a body.
                if text.starts_with('-') {
                    out.push('(');
                    out.push_str(&text);
                    out.push(')');
                } else {
                    out.push_str(&text);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Program {
        parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    /// The message of the error `text` gives; it must name a position.
    fn fails(text: &str) -> String {
        match parse(text) {
            Ok(p) => panic!("{text:?} parsed: {p}"),
            Err(e) => {
                assert!(matches!(e, SpecError::Notation { .. }), "{text:?}: {e:?}");
                e.to_string()
            }
        }
    }

    fn has(message: &str, parts: &[&str]) {
        for p in parts {
            assert!(message.contains(p), "{message:?} lacks {p:?}");
        }
    }

    #[test]
    fn softmax_from_the_module_doc() {
        let p = ok(
            "m[r] = max(c) x[r, c]; e[r, c] = exp(x[r, c] - m[r]); y[r, c] = e[r, c] / sum(c) e[r, c]",
        );
        let names: Vec<&str> = p.dims.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["r", "c"]);
        assert_eq!(p.inputs.len(), 1);
        assert_eq!(p.inputs[0].axes, [0, 1]);
        let stmts: Vec<(&str, &[usize], bool)> = p
            .stmts
            .iter()
            .map(|s| (s.name.as_str(), s.axes.as_slice(), s.output))
            .collect();
        // The sum is lifted: its `c` shadows y's axis `c`, which the IR cannot say inside one statement.
        assert_eq!(
            stmts,
            [
                ("m", &[0][..], false),
                ("e", &[0, 1][..], false),
                ("y__sum", &[0][..], false),
                ("y", &[0, 1][..], true)
            ]
        );
        assert_eq!(
            p.stmts[2].expr,
            Expr::Reduce(Reduce::Sum, vec![1], Box::new(Expr::Value(1)))
        );
        assert_eq!(
            p.stmts[3].expr,
            Expr::Binary(
                Binary::Div,
                Box::new(Expr::Value(1)),
                Box::new(Expr::Value(2))
            )
        );
        assert_eq!(p.dtype, DType::F32);
        assert!(p.params.is_empty());
    }

    #[test]
    fn options_set_dtype_fixed_dims_and_index_type() {
        let p = ok("y[r, c] = x[r, c] / sum(c) x[r, c], bf16, c=4096");
        assert_eq!(p.dtype, DType::Bf16);
        assert_eq!(p.dims[1].size, Dim::Fixed(4096));
        assert_eq!(p.dims[0].size, Dim::Runtime);
        for (word, dtype) in [
            ("float32", DType::F32),
            ("bfloat16", DType::Bf16),
            ("fp16", DType::F16),
            ("half", DType::F16),
        ] {
            assert_eq!(ok(&format!("y[i] = x[i], {word}")).dtype, dtype);
        }
        let p = ok("i[r] = argmax(c) x[r, c], i32 indices");
        assert_eq!(p.stmts[0].elem, Elem::I32);
        assert_eq!(ok("i[r] = argmin(c) x[r, c]").stmts[0].elem, Elem::I64);
        // A constant statement fixes a dimension too, wherever it stands.
        let p = ok("c = 64; y[r, c] = x[r, c] * 2");
        assert_eq!(p.dims[1].size, Dim::Fixed(64));
        assert_eq!(p, ok("y[r, c] = x[r, c] * 2, c=64"));
    }

    #[test]
    fn constants_params_and_sugar_lower_to_one_program() {
        let p = ok("eps = 1e-5\ny[r, c] = x[r, c] / sqrt(mean(c) x[r, c]^2 + eps)");
        assert_eq!(
            p,
            ok("y[r, c] = x[r, c] / sqrt(mean(c) x[r, c] ** 2 + 0.00001)")
        );
        assert_eq!(ok("y[i] = relu(x[i])"), ok("y[i] = max(x[i], 0)"));
        assert_eq!(ok("y[i] = square(x[i])"), ok("y[i] = x[i] ^ 2"));
        assert_eq!(ok("y[i] = pow(x[i], 2)"), ok("y[i] = x[i] ** 2"));
        assert_eq!(ok("y[i] = neg(x[i])"), ok("y[i] = -x[i]"));
        assert_eq!(
            ok("y[i] = clamp(x[i], -1, 1)"),
            ok("y[i] = min(max(x[i], -1), 1)")
        );
        assert_eq!(ok("y[i] = x[i] · 2 × 3"), ok("y[i] = x[i] * 2 * 3"));
        assert_eq!(
            ok("y[i] = x[i] * sqrt(2 / pi)"),
            ok("y[i] = x[i] * 0.7978845608028654")
        );
        assert_eq!(ok("y[i] = x[i] * .5"), ok("y[i] = x[i] * 0.5"));
        // Sums of sums merge; reduction variables are kept in dimension order.
        assert_eq!(
            ok("y[i] = sum(j) sum(k) x[i, j, k]"),
            ok("y[i] = sum(j, k) x[i, j, k]")
        );
        assert_eq!(
            ok("z[i, j, k] = x[i, j, k]; y[i] = sum(k, j) x[i, j, k]"),
            ok("z[i, j, k] = x[i, j, k]; y[i] = sum(j, k) x[i, j, k]")
        );
        let p = ok("y[i] = x[i] * s + t; z[i] = y[i] * s");
        assert_eq!(p.params, ["s", "t"]);
        assert!(!p.stmts[0].output && p.stmts[1].output);
    }

    #[test]
    fn precedence_follows_math() {
        let e = |t: &str| {
            ok(&format!("y[i] = {t}"))
                .stmts
                .last()
                .map(|s| s.expr.clone())
                .unwrap()
        };
        let x = || Box::new(Expr::Input(0));
        let c = |v: f64| Box::new(Expr::Const(v));
        assert_eq!(
            e("-x[i]^2"),
            Expr::Unary(Unary::Neg, Box::new(Expr::Binary(Binary::Pow, x(), c(2.0))))
        );
        assert_eq!(
            e("x[i]^2^3"),
            Expr::Binary(Binary::Pow, x(), c(8.0)),
            "right-associative: 2^3 folds first"
        );
        assert_eq!(
            e("2^-x[i]"),
            Expr::Binary(Binary::Pow, c(2.0), Box::new(Expr::Unary(Unary::Neg, x())))
        );
        assert_eq!(
            e("x[i] - 1 - 2"),
            Expr::Binary(
                Binary::Sub,
                Box::new(Expr::Binary(Binary::Sub, x(), c(1.0))),
                c(2.0)
            )
        );
        assert_eq!(
            e("x[i] + 1 < 2 * x[i]"),
            Expr::Binary(
                Binary::Lt,
                Box::new(Expr::Binary(Binary::Add, x(), c(1.0))),
                Box::new(Expr::Binary(Binary::Mul, c(2.0), x()))
            )
        );
        // A reduction's body is the rest of the product.
        let p = ok("y[r] = a[r] * sum(c) x[r, c] * w[c] + 1");
        assert_eq!(p.stmts[0].name, "y__sum");
        assert!(
            matches!(&p.stmts[0].expr, Expr::Reduce(Reduce::Sum, _, b) if matches!(b.as_ref(), Expr::Binary(Binary::Mul, ..)))
        );
        let p = ok("y[r] = mean(c) x[r, c]^2 + 1e-5");
        assert!(
            matches!(&p.stmts[1].expr, Expr::Binary(Binary::Add, a, _) if matches!(a.as_ref(), Expr::Value(0)))
        );
        // `max(a, b)` with names and nothing after is a call; with a value after, a reduction.
        let p = ok("y = max(s, t)");
        assert_eq!(
            p.stmts[0].expr,
            Expr::Binary(
                Binary::Max,
                Box::new(Expr::Param(0)),
                Box::new(Expr::Param(1))
            )
        );
        let p = ok("y[r] = max(c) x[r, c]");
        assert!(matches!(p.stmts[0].expr, Expr::Reduce(Reduce::Max, ..)));
    }

    #[test]
    fn scans_run_along_an_axis_of_their_statement() {
        let p = ok("y[r, c] = cumsum(c) x[r, c]");
        assert_eq!(
            p.stmts[0].expr,
            Expr::Scan(
                Scan {
                    op: Reduce::Sum,
                    dim: 1,
                    reverse: false,
                    exclusive: false
                },
                Box::new(Expr::Input(0))
            )
        );
        // Modifiers in any order; the body is the rest of the product, a mask among it.
        let p = ok("y[r, c] = cumsum(c, exclusive, reverse) x[r, c] * m[r, c], bool m");
        let Expr::Scan(scan, body) = &p.stmts[0].expr else {
            panic!("{p}")
        };
        assert!(scan.reverse && scan.exclusive);
        assert!(matches!(body.as_ref(), Expr::Binary(Binary::Mul, ..)));
        assert_eq!(p.inputs[1].elem, Elem::Bool);
        assert_eq!(p.reduced_dims(), vec![1]);
        // A strided scan: along the middle axis.
        let p = ok("y[a, b, k] = cumprod(b) x[a, b, k]");
        assert!(matches!(&p.stmts[0].expr, Expr::Scan(s, _) if s.dim == 1 && s.op == Reduce::Prod));
        // Integer inputs take a type the same way.
        let p = ok("y[r] = x[r] * t[r], i64 t");
        assert_eq!(p.inputs[1].elem, Elem::I64);
        assert!(p.to_string().ends_with("i64 t"), "{p}");
        for (text, parts) in [
            (
                "y[r, c] = 2 * cumsum(c) x[r, c]",
                &["`cumsum` must be the whole right side", "later statement"][..],
            ),
            (
                "y[r] = cumsum(c) x[r, c]",
                &["not an axis of `y`", "keeps the axis"],
            ),
            (
                "y[r, c] = cumsum(c, backwards) x[r, c]",
                &["`backwards` is not a modifier", "reverse"],
            ),
            (
                "y[r, c] = cumsum(c, reverse, reverse) x[r, c]",
                &["appears twice"],
            ),
            ("y[r, c] = cumsum(x[r, c])", &["is a scan", "cumsum(c)"]),
            (
                "y[r, c] = cummax(c, exclusive) x[r, c]",
                &["`exclusive` applies to `cumsum` and `cumprod`"],
            ),
            ("y[r] = x[r], bool m", &["`m` is not an input", "`x`"]),
            ("y[r] = x[r], bool x, bool x", &["given twice"]),
            ("y[r] = x[r], bool", &["alone is not an option", "`bool m`"]),
        ] {
            has(&fails(text), parts);
        }
    }

    #[test]
    fn a_gather_reads_an_input_at_an_integer_inputs_value() {
        let p = ok(
            "m[r] = max(c) x[r, c]; y = mean(r) (m[r] + log(sum(c) exp(x[r, c] - m[r])) - x[r, t[r]]), i64 t",
        );
        let names: Vec<&str> = p.inputs.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["x", "t"]);
        assert_eq!(p.inputs[1].elem, Elem::I64);
        assert_eq!(p.inputs[1].axes, [0]);
        let y = p.stmts.last().unwrap();
        let Expr::Reduce(_, _, body) = &y.expr else {
            panic!("{y:?}")
        };
        let Expr::Binary(Binary::Sub, _, gather) = &**body else {
            panic!("{body:?}")
        };
        assert_eq!(
            **gather,
            Expr::Gather(Gather { input: 0, axis: 1 }, Box::new(Expr::Input(1)))
        );
        let text = p.to_string();
        assert!(text.contains("x[r, t[r]]"), "{text}");
        assert_eq!(ok(&text), p);
        // An embedding lookup: the table is read with its variables once, which names the gathered axis.
        let e = ok("n2[v] = sum(d) w[v, d] ^ 2; y[b, d] = w[ids[b], d] * g[b], i32 ids");
        assert!(e.to_string().contains("w[ids[b], d]"));
    }

    #[test]
    fn gather_mistakes_have_their_own_errors() {
        has(
            &fails("m[r] = max(c) x[r, c]; y[r] = x[r, t[r]]"),
            &["`t` indexes `x`, so it holds integers", "`i64 t`"],
        );
        has(
            &fails("y[r] = x[r, t[r]], i64 t"),
            &["read at an index from a tensor before it is read with index variables"],
        );
        has(
            &fails("m[r] = max(c) x[r, c]; y[r] = x[t[r], t[r]], i64 t"),
            &["a second index of `x` read from a tensor"],
        );
        has(
            &fails("m[r] = max(c) x[r, c]; y[r] = x[t[r]], i64 t"),
            &["`x` has 2 axes"],
        );
        has(
            &fails("m[r] = max(c) x[r, c]; y[r] = x[k, t[r]], i64 t"),
            &["`k` is not an axis of `y`"],
        );
        has(
            &fails("m[r] = max(c) x[r, c]; u[r] = m[r] * 2; y[r] = x[r, u[r]]"),
            &["`u` is computed by the program"],
        );
        has(
            &fails("m[r] = max(c) x[r, c]; y[r] = x[r, t[r]], i64 t, i64 x"),
            &["must be a floating tensor"],
        );
    }

    #[test]
    fn line_breaks_separate_statements_only_between_them() {
        let one = ok("m[r] = max(c) x[r, c]; y[r, c] = x[r, c] - m[r]");
        assert_eq!(ok("m[r] = max(c) x[r, c]\ny[r, c] = x[r, c] - m[r]\n"), one);
        assert_eq!(
            ok("m[r] = max(c)\n  x[r, c]\ny[r, c] = x[r, c]\n  - m[r]"),
            one
        );
        assert_eq!(
            ok("\n\nm[r] = max(c) x[r, c];\n\ny[r, c] = x[r, c] -\n m[r];"),
            one
        );
        assert_eq!(ok("y[i] = x[i]\n, bf16").dtype, DType::Bf16);
    }

    #[test]
    fn scalar_statements_and_zero_d_tensors() {
        let p = ok("s = sum(i) x[i] * w[i]; y[i] = x[i] / s");
        assert!(p.stmts[0].axes.is_empty());
        assert_eq!(
            p.stmts[1].expr,
            Expr::Binary(
                Binary::Div,
                Box::new(Expr::Input(0)),
                Box::new(Expr::Value(0))
            )
        );
        let p = ok("y[i] = x[i] * g[]");
        assert!(p.inputs[1].axes.is_empty());
        let p = ok("z[] = 2; y[i] = x[i] * z");
        assert_eq!(p.stmts[0].expr, Expr::Const(2.0));
        assert_eq!(p.to_string(), "z[] = 2; y[i] = x[i] * z");
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "m[r] = max(c) x[r, c]; e[r, c] = exp(x[r, c] - m[r]); y[r, c] = e[r, c] / sum(c) e[r, c]",
            "y[r, c] = x[r, c] / sum(c) x[r, c], bf16, c=4096",
            "y[i] = -x[i] ^ 2 + 2 ^ -x[i] * relu(x[i]) - clamp(x[i], -1, 1)",
            "y[r] = -sum(c) x[r, c] * 2; z[r] = (-sum(c) x[r, c]) * 2; w[r] = (sum(c) x[r, c]) ^ 2",
            "y[r] = 2 ^ sum(c) x[r, c] * 3; z[r] = (2 ^ sum(c) x[r, c]) * 3",
            "y[r] = sum(c) (-x[r, c]); z[r] = sum(c) (x[r, c] + 1) * 2",
            "y[a, b] = sum(c) x[a, c] * (sum(c) q[b, c]) + sum(c) x[a, c] * (sum(c) q[b, c])",
            "y[i] = where(x[i] > 0, x[i], 0.01 * x[i]) * (-1) ^ x[i]",
            "t[i] = x[i] * s; u[i] = t[i] / (1 + abs(t[i])) >= 0.5, f16",
            "i[r] = argmax(c) x[r, c] * 2, i32 indices",
            "y[i] = x[i] * 1e-300 + 1.5e300 * x[i] - 123456789012345680000",
            "y[r, c] = cumsum(c, reverse, exclusive) x[r, c] * m[r, c], bool m",
            "y[b, c, k] = cumprod(c) (-x[b, c, k]); z[b, c, k] = cummax(c, reverse) y[b, c, k] * 2",
        ] {
            let p = ok(text);
            let shown = p.to_string();
            assert_eq!(ok(&shown), p, "{text:?} → {shown:?}");
        }
        assert_eq!(
            ok("y[i] = -x[i] ^ 2 + 2 ^ -x[i]").to_string(),
            "y[i] = -x[i] ^ 2 + 2 ^ -x[i]"
        );
    }

    /// A tiny deterministic generator of programs as text, written twice with different names.
    struct Gen {
        state: u64,
    }

    impl Gen {
        fn next(&mut self, n: usize) -> usize {
            self.state = self
                .state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.state >> 33) % n as u64) as usize
        }

        /// `names`: dims i j k, inputs a(i, j) b(j) c(i, k), params s u, statements t0 t1.
        fn expr(
            &mut self,
            depth: usize,
            scope: &[usize],
            stmts: &[Vec<usize>],
            names: &Names,
            out: &mut String,
        ) {
            let inputs: [&[usize]; 3] = [&[0, 1], &[1], &[0, 2]];
            let choice = if depth == 0 {
                self.next(4)
            } else {
                self.next(12)
            };
            match choice {
                0 => {
                    let v = [0.5, 2.0, 1e-5, 3.0, 0.0][self.next(5)];
                    out.push_str(&number(v));
                }
                1 => out.push_str(&names.params[self.next(2)]),
                2 | 3 => {
                    let fits: Vec<usize> = (0..3)
                        .filter(|&t| inputs[t].iter().all(|d| scope.contains(d)))
                        .collect();
                    let prior: Vec<usize> = (0..stmts.len())
                        .filter(|&t| stmts[t].iter().all(|d| scope.contains(d)))
                        .collect();
                    if !prior.is_empty() && self.next(2) == 0 {
                        let t = prior[self.next(prior.len())];
                        let idx: Vec<&str> =
                            stmts[t].iter().map(|&d| names.dims[d].as_str()).collect();
                        if idx.is_empty() {
                            out.push_str(&names.stmts[t]);
                        } else {
                            let _ = write!(out, "{}[{}]", names.stmts[t], idx.join(", "));
                        }
                    } else if fits.is_empty() {
                        out.push('2');
                    } else {
                        let t = fits[self.next(fits.len())];
                        let idx: Vec<&str> =
                            inputs[t].iter().map(|&d| names.dims[d].as_str()).collect();
                        let _ = write!(out, "{}[{}]", names.inputs[t], idx.join(", "));
                    }
                }
                4 | 5 => {
                    let f = ["exp", "tanh", "abs", "sigmoid", "relu", "sqrt"][self.next(6)];
                    let _ = write!(out, "{f}(");
                    self.expr(depth - 1, scope, stmts, names, out);
                    out.push(')');
                }
                6 => {
                    out.push_str(["max(", "min(", "pow("][self.next(3)]);
                    self.expr(depth - 1, scope, stmts, names, out);
                    out.push_str(", ");
                    self.expr(depth - 1, scope, stmts, names, out);
                    out.push(')');
                }
                7 => {
                    out.push_str("where(");
                    self.expr(depth - 1, scope, stmts, names, out);
                    out.push_str(" > 0, ");
                    self.expr(depth - 1, scope, stmts, names, out);
                    out.push_str(", ");
                    self.expr(depth - 1, scope, stmts, names, out);
                    out.push(')');
                }
                8 => {
                    out.push_str(if self.next(2) == 0 { "-" } else { "-(" });
                    let open = out.ends_with('(');
                    self.expr(depth - 1, scope, stmts, names, out);
                    if open {
                        out.push(')');
                    }
                }
                9 | 10 => {
                    out.push('(');
                    self.expr(depth - 1, scope, stmts, names, out);
                    out.push_str([" + ", " - ", " * ", " / ", " ^ "][self.next(5)]);
                    self.expr(depth - 1, scope, stmts, names, out);
                    out.push(')');
                }
                _ => {
                    let free: Vec<usize> = (0..3).filter(|d| !scope.contains(d)).collect();
                    if free.is_empty() {
                        out.push_str(&names.params[0]);
                        return;
                    }
                    let d = free[self.next(free.len())];
                    let op = ["sum", "mean", "max", "min", "prod"][self.next(5)];
                    let _ = write!(out, "{op}({}) ", names.dims[d]);
                    let mut inner = scope.to_vec();
                    inner.push(d);
                    // The body must use `d`: a load of a tensor with it, times the rest.
                    let with: Vec<usize> = (0..3).filter(|&t| inputs[t].contains(&d)).collect();
                    let t = with[self.next(with.len())];
                    let idx: Vec<usize> = inputs[t].to_vec();
                    if idx.iter().all(|x| inner.contains(x)) {
                        let idx: Vec<&str> = idx.iter().map(|&x| names.dims[x].as_str()).collect();
                        let _ = write!(out, "{}[{}] * ", names.inputs[t], idx.join(", "));
                    } else {
                        out.push_str("0 * ");
                    }
                    out.push('(');
                    self.expr(depth - 1, &inner, stmts, names, out);
                    out.push(')');
                }
            }
        }
    }

    struct Names {
        dims: [String; 3],
        inputs: [String; 3],
        params: [String; 2],
        stmts: [String; 3],
    }

    fn names(style: usize) -> Names {
        let n = |base: &[&str; 3]| {
            base.map(|s| {
                if style == 0 {
                    s.to_string()
                } else {
                    format!("{s}_{style}x")
                }
            })
        };
        Names {
            dims: n(&["i", "j", "k"]),
            inputs: n(&["a", "b", "c"]),
            params: [["s", "u"][0], ["s", "u"][1]].map(|s| {
                if style == 0 {
                    s.to_string()
                } else {
                    format!("{s}{style}q")
                }
            }),
            stmts: n(&["t", "v", "w"]),
        }
    }

    fn program_text(seed: u64, style: usize) -> String {
        let mut g = Gen { state: seed };
        let names = names(style);
        let count = 1 + g.next(3);
        let mut stmts: Vec<Vec<usize>> = Vec::new();
        let mut parts = Vec::new();
        for t in 0..count {
            let axes: Vec<usize> =
                [vec![0, 1, 2], vec![0, 1], vec![1], vec![0, 2], vec![]][g.next(5)].clone();
            let mut text = names.stmts[t].clone();
            if !axes.is_empty() || g.next(3) == 0 {
                let idx: Vec<&str> = axes.iter().map(|&d| names.dims[d].as_str()).collect();
                let _ = write!(text, "[{}]", idx.join(", "));
            }
            text.push_str(" = ");
            g.expr(4, &axes, &stmts, &names, &mut text);
            parts.push(text);
            stmts.push(axes);
        }
        let mut text = parts.join("; ");
        match g.next(4) {
            0 => text.push_str(", bf16"),
            1 => {
                let _ = write!(text, ", {}=64", names.dims[g.next(3)]);
            }
            _ => {}
        }
        text
    }

    #[test]
    fn many_programs_round_trip_and_canonical_ignores_names() {
        let mut parsed = 0;
        let mut lifted = 0;
        for seed in 0..3000u64 {
            let text = program_text(seed, 0);
            let Ok(p) = parse(&text) else { continue };
            parsed += 1;
            lifted += usize::from(p.stmts.iter().any(generated));
            let shown = p.to_string();
            assert_eq!(parse(&shown).as_ref(), Ok(&p), "{text:?} → {shown:?}");
            let canonical = p.canonical();
            let again = parse(&canonical).unwrap_or_else(|e| panic!("{canonical:?}: {e}"));
            assert_eq!(again.canonical(), canonical, "{text:?}");
            assert_eq!(again.stmts.len(), p.stmts.len());
            let renamed = program_text(seed, 1);
            let q = parse(&renamed).unwrap_or_else(|e| panic!("{renamed:?}: {e}"));
            assert_eq!(q.canonical(), canonical, "{text:?} vs {renamed:?}");
            assert_ne!(q, p);
            let _ = explain(&p);
        }
        assert!(parsed > 1500, "only {parsed} generated programs parsed");
        assert!(
            lifted > 300,
            "only {lifted} generated programs lift a reduction"
        );
    }

    #[test]
    fn canonical_is_positional_and_changes_with_meaning() {
        let p = ok(
            "m[r] = max(c) x[r, c]; e[r, c] = exp(x[r, c] - m[r]); y[r, c] = e[r, c] / sum(c) e[r, c]",
        );
        assert_eq!(
            p.canonical(),
            "t0[d0] = max(d1) in0[d0, d1]; t1[d0, d1] = exp(in0[d0, d1] - t0[d0]); \
             out0[d0, d1] = t1[d0, d1] / sum(d1) t1[d0, d1], f32"
        );
        let q = ok(
            "mx[row] = max(col) inp[row, col]\nex[row, col] = exp(inp[row, col] - mx[row])\n\
                    out[row, col] = ex[row, col] / sum(col) ex[row, col], float32",
        );
        assert_eq!(q.canonical(), p.canonical());
        let base = "y[r, c] = x[r, c] * s / sum(c) x[r, c] + 1e-5";
        let variants = [
            "y[r, c] = x[r, c] * s / sum(c) x[r, c] + 1e-5, bf16",
            "y[r, c] = x[r, c] * s / sum(c) x[r, c] + 1e-5, c=128",
            "y[r, c] = x[r, c] * s / sum(c) x[r, c] + 1e-6",
            "y[r, c] = x[r, c] * s / mean(c) x[r, c] + 1e-5",
            "y[r, c] = x[r, c] * s * sum(c) x[r, c] + 1e-5",
            "y[r, c] = x[r, c] / s / sum(c) x[r, c] + 1e-5",
        ];
        let c = ok(base).canonical();
        assert_eq!(
            c,
            "out0[d0, d1] = in0[d0, d1] * p0 / sum(d1) in0[d0, d1] + 1e-5, f32"
        );
        for v in variants {
            assert_ne!(ok(v).canonical(), c, "{v}");
        }
        assert!(
            ok("i[r] = argmax(c) x[r, c]")
                .canonical()
                .ends_with(", f32, i64 indices")
        );
        assert!(
            ok("i[r] = argmax(c) x[r, c], i32 indices")
                .canonical()
                .ends_with(", f32, i32 indices")
        );
    }

    #[test]
    fn explain_shows_program_signature_and_formulas() {
        let p = ok(
            "s[r] = sum(c) x[r, c] * w[c]; y[r, c] = x[r, c] / sqrt(s[r] + eps) * alpha, bf16, c=64",
        );
        let text = explain(&p);
        assert_eq!(
            text,
            "program:\n  s[r] = sum(c) x[r, c] * w[c]\n  y[r, c] = x[r, c] / sqrt(s[r] + eps) * alpha, bf16, c=64\n\
             signature:\n  fn k(x: &CudaSlice<half::bf16>, w: &CudaSlice<half::bf16>, y: &mut CudaSlice<half::bf16>, \
             r: usize, eps: f32, alpha: f32)\n\
             reference:\n  s[r] = Σ_{c} x[r, c] · w[c]\n  y[r, c] = x[r, c] / √(s[r] + eps) · alpha\n"
        );
        let p = ok("i[r] = argmax(c) x[r, c]; n[r] = max(c) x[r, c]");
        assert!(explain(&p).contains("fn k(x: &CudaSlice<f32>, i: &mut CudaSlice<i64>, n: &mut CudaSlice<f32>, r: usize, c: usize)"));
    }

    #[test]
    fn contractions_are_sums_of_products_of_two_tensors() {
        assert!(contraction(&ok("c[i, j] = sum(k) a[i, k] * b[k, j]")));
        assert!(contraction(&ok("s = sum(k) a[k] * b[k]")));
        assert!(contraction(&ok(
            "c[i, j] = 2 * sum(k) a[i, k] * b[k, j] + 1"
        )));
        assert!(!contraction(&ok("s[r] = sum(c) x[r, c] * x[r, c]")));
        assert!(!contraction(&ok("s[r] = sum(c) x[r, c] * w[r]")));
        assert!(!contraction(&ok("s[r] = max(c) x[r, c] * w[c]")));
        assert!(!contraction(&ok("y[i, j] = a[i, j] * b[j]")));
    }

    #[test]
    fn is_notation_tells_notation_from_words() {
        for t in [
            "y[r, c] = x[r, c] / sum(c) x[r, c], bf16",
            "s = sum(i) x[i]",
            "eps = 1e-5; y[i] = x[i] + eps",
            "y[i = x[",
            "s = x[]",
            "out[] = 2",
        ] {
            assert!(is_notation(t), "{t}");
        }
        for t in [
            "softmax over the last axis",
            "y = x * s",
            "C = A·Bᵀ",
            "matmul, k=1024",
            "relu, bf16",
            "",
            "y == x[i]",
            "layer norm over [64, 256]",
        ] {
            assert!(!is_notation(t), "{t}");
        }
    }

    #[test]
    fn errors_name_the_place_and_the_fix() {
        has(
            &fails("y[r] = sum(c) x[r, c] + x[r, c]"),
            &[
                "character 30",
                "outside the `sum(c)` at character 8",
                "parentheses",
            ],
        );
        has(
            &fails("y[r, c] = sum(c) x[r, c]"),
            &["character 11", "axis of `y`", "used nowhere outside it"],
        );
        has(
            &fails("y[i] = sum(k) x[i]"),
            &[
                "character 12",
                "`sum(k)` reduces over `k`, which its body does not use",
            ],
        );
        has(
            &fails("y[i] = x[i, j]"),
            &[
                "character 13",
                "`j` is not an axis of `y`",
                "sum(j)",
                "`y[i, j]`",
            ],
        );
        has(
            &fails("y[i, j] = x[i, j] + x[j, i]"),
            &[
                "character 21",
                "`x[j, i]` here but as `x[i, j]` at character 11",
                "transposes are not supported",
            ],
        );
        has(
            &fails("y[i] = x[i]; y[i] = 2"),
            &["character 14", "`y` is assigned twice", "character 1"],
        );
        has(
            &fails("eps = 1; eps = 2; y[i] = x[i]"),
            &["character 10", "`eps` is assigned twice"],
        );
        has(
            &fails("y[i] = z[i]; z[i] = x[i]"),
            &["character 8", "assigned later, at character 14"],
        );
        has(
            &fails("y[i] = y[i] + 1"),
            &["character 8", "reads the tensor its own statement defines"],
        );
        has(
            &fails("y[i] = x[i] + x"),
            &[
                "character 15",
                "input `x` is used without an index",
                "`x[i]`",
            ],
        );
        has(
            &fails("m[r] = max(c) x[r, c]; y[r] = m * 2"),
            &["character 31", "write `m[r]`"],
        );
        has(
            &fails("y[r] = argmax(c) x[r, c] + 1"),
            &["character 8", "whole right side"],
        );
        has(
            &fails("y[r] = 2 * argmax(c) x[r, c]"),
            &["character 12", "whole right side"],
        );
        has(
            &fails("i[r] = argmax(c) x[r, c]; y[r] = i[r] * 2"),
            &["character 34", "indices"],
        );
        has(&fails("y[i] = log(-1) * x[i]"), &["character 8", "NaN"]);
        has(
            &fails("y[i] = x[i] * (1 / 0)"),
            &["character 16", "infinite"],
        );
        has(&fails("y[i] = x[i] * inf"), &["character 15", "finite"]);
        has(
            &fails("y[i] = x[i] * 1e999999"),
            &["character 15", "too large"],
        );
        has(
            &fails("y[i] = x[i] * 1e-999999"),
            &["character 15", "too small"],
        );
        has(
            &fails("y[i] = expp(x[i])"),
            &[
                "character 8",
                "unknown function `expp`",
                "did you mean `exp`?",
            ],
        );
        has(&fails("y[i] = sigmod(x[i])"), &["did you mean `sigmoid`?"]);
        has(
            &fails("y[i] = exp(x[i], 2)"),
            &["character 8", "`exp` takes 1 argument, 2 given"],
        );
        has(
            &fails("y[i] = max(x[i])"),
            &["`max` takes 2 arguments, 1 given", "`max(c) x[r, c]`"],
        );
        has(
            &fails("y[i] = sum(x[i])"),
            &["character 8", "`sum` is a reduction", "`sum(c) x[r, c]`"],
        );
        has(
            &fails("y[r] = sum(c) -x[r, c]"),
            &["character 8", "`sum` is a reduction"],
        );
        has(&fails(""), &["no statement"]);
        has(&fails(" ;\n ; "), &["no statement"]);
        has(&fails("eps = 1e-5"), &["constants only"]);
        has(
            &fails("y[c] = x[c], c=4, c=5"),
            &["character 19", "fixed twice", "character 14"],
        );
        has(
            &fails("c = 4; y[c] = x[c], c=4"),
            &["character 21", "fixed twice"],
        );
        has(
            &fails("y[c] = x[c], c=0"),
            &["character 16", "positive integer"],
        );
        has(&fails("y[c] = x[c], c=2.5"), &["positive integer"]);
        has(
            &fails("c = -3; y[c] = x[c]"),
            &["character 5", "positive integer"],
        );
        has(
            &fails("c = x[c] * 2; y[c] = x[c]"),
            &["character 5", "index variable", "must be a number"],
        );
        has(
            &fails("y[i] = x[i], c=4"),
            &["character 14", "`c` is not an index variable", "`i`"],
        );
        has(
            &fails("c[c] = x[c]"),
            &["character 1", "`c` is an index variable"],
        );
        has(
            &fails("y[i] = x[i] * i"),
            &["character 15", "index variable", "arithmetic"],
        );
        has(&fails("y[i] = x[i"), &["character 9", "unbalanced `[`"]);
        has(
            &fails("y[i] = (x[i] + 1"),
            &["character 8", "unbalanced `(`"],
        );
        has(
            &fails("y[i] = exp(x[i]"),
            &["character 11", "unbalanced `(`"],
        );
        has(
            &fails("y[i] = x[i] + 1)"),
            &["character 16", "unbalanced `)`"],
        );
        has(&fails("y[i] = x[i] ]"), &["character 13", "unbalanced `]`"]);
        has(
            &fails("y[i] = x[i] @ w[i]"),
            &["character 13", "unexpected character `@`", "sum(k)"],
        );
        has(
            &fails("y[i] = x[i] $"),
            &["character 13", "unexpected character `$`"],
        );
        has(&fails("y[i] = x[i] * é"), &["character 15", "ASCII"]);
        has(&fails("y[i] = 2x[i]"), &["character 8", "`2 * x`"]);
        has(
            &fails("y[i] = x[i + 1]"),
            &["character 12", "index variable"],
        );
        has(&fails("y[0] = x[0]"), &["character 3", "index variable"]);
        has(&fails("y[i, i] = x[i]"), &["character 6", "twice"]);
        has(
            &fails("y[i] = x[i] < 2 < 3"),
            &["character 17", "do not chain"],
        );
        has(
            &fails("y[i] = x[i], bf16; z[i] = x[i]"),
            &["character 20", "after the last statement"],
        );
        has(
            &fails("y[i] = x[i], bf17"),
            &[
                "character 14",
                "unknown option `bf17`",
                "did you mean `bf16`?",
            ],
        );
        has(
            &fails("y[i] = x[i], f64"),
            &["not supported", "f32, bf16 and f16"],
        );
        has(
            &fails("y[i] = x[i], bf16, f16"),
            &["character 20", "second dtype"],
        );
        has(
            &fails("y[i] = x[i], i32 indices"),
            &["character 14", "no statement computes an argmax"],
        );
        has(&fails("y[i] = x[i], i32"), &["`i32 indices`"]);
        has(&fails("y__sum[i] = x[i]"), &["character 1", "reserved"]);
        has(&fails("pi[i] = x[i]"), &["constant π"]);
        has(&fails("type[i] = x[i]"), &["Rust keyword"]);
        has(&fails("y[i] = x[i] * exp"), &["function", "`exp(…)`"]);
        has(&fails("y[i] = x[i] + 1 y"), &["character 17", "`;`"]);
        has(&fails("y[i] == x[i]"), &["character 6", "`==` compares"]);
        has(&fails("y[i] = x[i] = 2"), &["character 13", "second `=`"]);
        has(
            &fails("[i] = x[i]"),
            &["character 1", "starts with the name"],
        );
        has(&fails("y[i] ="), &["end of the text", "ends too early"]);
        has(
            &fails("eps = 1e-5; y[i] = eps[i]"),
            &["character 20", "constant, not a tensor"],
        );
        let deep = format!("y[i] = {}x[i]{}", "(".repeat(70), ")".repeat(70));
        has(&fails(&deep), &["deeper than 64"]);
        let long = format!("y[i] = x[i]{}", " + x[i]".repeat(300));
        has(
            &fails(&long),
            &["more than 128 operations deep", "split it"],
        );
        let minus = format!("y[i] = {}x[i]", "-".repeat(100));
        has(&fails(&minus), &["deeper than 64"]);
    }

    #[test]
    fn the_deepest_programs_fit_in_half_the_stack_of_a_thread() {
        let deepest = [
            format!("y[i] = x[i]{}", " * x[i]".repeat(MAX_DEPTH - 1)),
            format!("y[i] = {}x[i]{}", "(x[i] + ".repeat(62), ")".repeat(62))
                + &" + x[i]".repeat(MAX_DEPTH - 64),
            format!("y[i] = {}x[i]", "-".repeat(MAX_NESTING - 1)),
            format!("y[i] = {}x[i]{}", "clamp(".repeat(31), ", 0, 1)".repeat(31)),
            format!("y[i] = {}x[i]", "x[i] ^ ".repeat(MAX_NESTING - 1)),
            format!(
                "y[r] = {}x[r, c]{}",
                "exp(sum(c) (x[r, c] * ".repeat(15),
                "))".repeat(15)
            ),
        ];
        let run = std::thread::Builder::new()
            .stack_size(1024 * 1024)
            .spawn(move || {
                for text in deepest {
                    let p = parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
                    assert_eq!(parse(&p.to_string()).as_ref(), Ok(&p));
                    let canonical = p.canonical();
                    assert_eq!(parse(&canonical).map(|q| q.canonical()), Ok(canonical));
                    let _ = explain(&p);
                    let _ = contraction(&p);
                }
            });
        assert!(run.map(|t| t.join().is_ok()).unwrap_or(false));
    }

    #[test]
    fn limits_are_generous_for_real_programs() {
        let deep = format!("y[i] = {}x[i]{}", "(".repeat(60), ")".repeat(60));
        ok(&deep);
        let long = format!("y[i] = x[i]{}", " + x[i]".repeat(120));
        let p = ok(&long);
        assert_eq!(ok(&p.to_string()), p);
        let many: Vec<String> = (0..2000).map(|k| format!("t{k}[i] = x[i] * {k}")).collect();
        assert_eq!(ok(&many.join("; ")).stmts.len(), 2000);
    }
}
