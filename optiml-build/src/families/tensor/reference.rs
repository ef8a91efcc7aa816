//! The float64 interpreter on the GPU, so that the dispatch size is checked on every element.
//!
//! The host interpreter takes seconds per gigabyte, so the dispatch size used to be checked on sampled rows only
//! (and not at all past 2²⁸ input elements): a kernel wrong only at that size, or only in some of its blocks,
//! passed whenever its wrong elements missed the samples. Here the program becomes a CUDA module:
//! - [`lower`] moves every reduction that does not depend on all of its statement's axes (a row's sum inside
//!   `y[r, c] = e[r, c] / sum(c) e[r, c]`) into a statement of its own, so each is computed once per row, as the
//!   host interpreter's caches do, rather than once per element;
//! - [`source`] writes one kernel per statement, one thread per element, evaluating the expression in float64
//!   with the host's error scales (`cuda/reference.cu` transliterates `interp`'s arithmetic), and a scan's fold
//!   one line per thread;
//! - the parent compiles it with NVRTC ([`ptx`]), and the worker runs it on the inputs the candidate read and
//!   compares every element on the GPU ([`Device`]). Only the sums and the first failing element cross to the
//!   host, whose own [`Comparison::check`] words the failure.
//!
//! Programs whose reference would take too long on the GPU (attention at KernelBench's size: 10¹¹ products) or
//! too much memory keep the host's sampled rows ([`Device::fits`]).

use super::contract::c_type;
use crate::eval::device::{Bench, Stop, fault, reject};
use crate::eval::plan::{Comparison, Tolerance};
use cudarc::driver::{CudaFunction, CudaModule, CudaSlice, LaunchConfig, PushKernelArg};
use optiml_spec::program::{Elem, Expr, Program, Reduce, Scan};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

/// The module's fixed part: the interpreter's arithmetic, the scan's fold and the comparison.
const PRELUDE: &str = include_str!("cuda/reference.cu");

/// The most float64 operations one reference evaluation may cost (about a second on an H100's FP64 units at
/// the module's naive efficiency); past it the host's sampled rows are checked instead.
const MAX_WORK: f64 = 3e10;

/// The most operations one thread may run in sequence (a reduction's length times its body's work, or a scan's
/// line): a full reduction of a gigabyte in one thread would take seconds.
const MAX_CHAIN: f64 = (1u64 << 27) as f64;

/// Blocks of the comparison (fixed, so its per-block sums add up in the same order on every run).
const COMPARE_BLOCKS: u32 = 512;

/// One statement of a lowered program.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The statement's name, or the name of the statement a reduction was moved out of.
    pub name: String,
    /// Its axes, outermost first (indices into [`Program::dims`]).
    pub axes: Vec<usize>,
    /// What each element is; [`Expr::Value`] indexes the lowered steps.
    pub expr: Expr,
    /// A scan statement: `expr` is its body, folded along the axis afterwards.
    pub scan: Option<Scan>,
    /// An integer statement: read back with an error scale of 0, as the host reads positions.
    pub exact: bool,
}

/// A program as the GPU reference computes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Lowered {
    /// The statements in the order they are computed: each program statement after the reductions moved out of
    /// it.
    pub steps: Vec<Step>,
    /// The step of each of the program's outputs, in output order.
    pub outputs: Vec<usize>,
}

/// Lowers `p`. Every statement keeps its meaning: a moved reduction is read back at the same positions, with
/// the same value and error scale.
///
/// # Errors
/// The program breaks a rule of the IR (a scan inside an expression, a load of a later statement).
pub fn lower(p: &Program) -> Result<Lowered, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut map = Vec::with_capacity(p.stmts.len());
    let mut outputs = Vec::new();
    for s in &p.stmts {
        let (body, scan) = match &s.expr {
            Expr::Scan(scan, body) => {
                if !s.axes.contains(&scan.dim) || !Scan::OPS.contains(&scan.op) {
                    return Err(format!("`{}`: a scan the interpreter refuses", s.name));
                }
                (&**body, Some(*scan))
            }
            e => (e, None),
        };
        let mut lowering = Lowering {
            p,
            axes: &s.axes,
            name: &s.name,
            map: &map,
            steps: &mut steps,
            bound: Vec::new(),
        };
        let expr = lowering.expr(body)?;
        steps.push(Step {
            name: s.name.clone(),
            axes: s.axes.clone(),
            expr,
            scan,
            exact: s.elem != Elem::Float,
        });
        map.push(steps.len() - 1);
        if s.output {
            outputs.push(steps.len() - 1);
        }
    }
    Ok(Lowered { steps, outputs })
}

struct Lowering<'a> {
    p: &'a Program,
    /// The statement's axes.
    axes: &'a [usize],
    name: &'a str,
    /// The step of each earlier program statement.
    map: &'a [usize],
    steps: &'a mut Vec<Step>,
    /// The dimensions enclosing reductions bind.
    bound: Vec<usize>,
}

impl Lowering<'_> {
    fn expr(&mut self, e: &Expr) -> Result<Expr, String> {
        let b = |s: &mut Self, e: &Expr| s.expr(e).map(Box::new);
        Ok(match e {
            Expr::Const(_) | Expr::Param(_) | Expr::Input(_) => e.clone(),
            Expr::Value(j) => Expr::Value(
                *self
                    .map
                    .get(*j)
                    .ok_or_else(|| format!("`{}` reads a later statement", self.name))?,
            ),
            Expr::Unary(op, a) => Expr::Unary(*op, b(self, a)?),
            Expr::Binary(op, x, y) => Expr::Binary(*op, b(self, x)?, b(self, y)?),
            Expr::Select(c, x, y) => Expr::Select(b(self, c)?, b(self, x)?, b(self, y)?),
            Expr::Gather(g, index) => Expr::Gather(*g, b(self, index)?),
            Expr::Scan(..) => return Err(format!("`{}` holds a scan inside it", self.name)),
            Expr::Reduce(op, over, body) => {
                let depth = self.bound.len();
                self.bound.extend_from_slice(over);
                let body = b(self, body)?;
                self.bound.truncate(depth);
                let r = Expr::Reduce(*op, over.clone(), body);
                let free = free_dims(self.p, self.steps, &r);
                // Moved out when it reads no variable an enclosing reduction binds, and either some reduction
                // encloses it (it would run once per step of that loop) or it does not read every axis of its
                // statement (once per element of a row, where once per row suffices).
                let movable = free.iter().all(|d| !self.bound.contains(d))
                    && free.iter().all(|d| self.axes.contains(d))
                    && (!self.bound.is_empty() || free.len() < self.axes.len());
                if !movable {
                    return Ok(r);
                }
                self.steps.push(Step {
                    name: format!("{} (a {} inside it)", self.name, op.name()),
                    axes: self
                        .axes
                        .iter()
                        .copied()
                        .filter(|a| free.contains(a))
                        .collect(),
                    expr: r,
                    scan: None,
                    exact: false,
                });
                Expr::Value(self.steps.len() - 1)
            }
        })
    }
}

/// The dimensions `e` reads and does not bind itself, in increasing order.
fn free_dims(p: &Program, steps: &[Step], e: &Expr) -> Vec<usize> {
    fn walk(p: &Program, steps: &[Step], e: &Expr, out: &mut Vec<usize>) {
        match e {
            Expr::Const(_) | Expr::Param(_) => {}
            Expr::Input(i) => out.extend(p.inputs.get(*i).map_or(&[][..], |t| &t.axes)),
            Expr::Value(j) => out.extend(steps.get(*j).map_or(&[][..], |s| &s.axes)),
            Expr::Unary(_, a) | Expr::Scan(_, a) => walk(p, steps, a, out),
            Expr::Binary(_, a, b) => {
                walk(p, steps, a, out);
                walk(p, steps, b, out);
            }
            Expr::Select(c, a, b) => {
                walk(p, steps, c, out);
                walk(p, steps, a, out);
                walk(p, steps, b, out);
            }
            Expr::Gather(g, index) => {
                walk(p, steps, index, out);
                if let Some(t) = p.inputs.get(g.input) {
                    out.extend(
                        t.axes
                            .iter()
                            .enumerate()
                            .filter(|&(k, _)| k != g.axis)
                            .map(|(_, &a)| a),
                    );
                }
            }
            Expr::Reduce(_, over, body) => {
                let mut inner = Vec::new();
                walk(p, steps, body, &mut inner);
                out.extend(inner.into_iter().filter(|d| !over.contains(d)));
            }
        }
    }
    let mut out = Vec::new();
    walk(p, steps, e, &mut out);
    out.sort_unstable();
    out.dedup();
    out
}

/// The kernel of step `k`.
fn kernel(k: usize) -> String {
    format!("optiml_ref_{k}")
}

/// The scan's fold and the comparison, in [`PRELUDE`].
const SCAN: &str = "optiml_ref_scan";
const COMPARE: &str = "optiml_ref_compare";

/// Where the kernels find their operands: one table of 64-bit words, uploaded before each evaluation.
struct Table {
    inputs: usize,
    steps: usize,
    dims: usize,
}

impl Table {
    fn input(&self, i: usize) -> usize {
        i
    }
    fn values(&self, k: usize) -> usize {
        self.inputs + k
    }
    fn scales(&self, k: usize) -> usize {
        self.inputs + self.steps + k
    }
    fn extent(&self, d: usize) -> usize {
        self.inputs + 2 * self.steps + d
    }
    fn param(&self, i: usize) -> usize {
        self.inputs + 2 * self.steps + self.dims + i
    }
    fn len(&self, params: usize) -> usize {
        self.param(params)
    }
}

fn table(p: &Program, l: &Lowered) -> Table {
    Table {
        inputs: p.inputs.len(),
        steps: l.steps.len(),
        dims: p.dims.len(),
    }
}

/// The CUDA source of the reference of `p` lowered as `l`: the prelude (`cuda/reference.cu`) and one kernel per
/// step.
pub fn source(p: &Program, l: &Lowered) -> String {
    let t = table(p, l);
    let mut out = String::from(PRELUDE);
    for (k, step) in l.steps.iter().enumerate() {
        let mut e = Emit {
            p,
            l,
            body: String::new(),
            next: 0,
            depth: 2,
        };
        let (v, s) = e.expr(&step.expr);
        let mut body = String::from(
            "    for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e < len; e += (i64)gridDim.x * blockDim.x) {\n",
        );
        if !step.axes.is_empty() {
            body.push_str("        i64 rest = e;\n");
        }
        for (pos, &a) in step.axes.iter().enumerate().rev() {
            if pos == 0 {
                let _ = writeln!(body, "        const i64 i{a} = rest;");
            } else {
                let _ = writeln!(
                    body,
                    "        const i64 i{a} = rest % E{a};\n        rest /= E{a};"
                );
            }
        }
        body.push_str(&e.body);
        let _ = writeln!(
            body,
            "        V{k}[e] = {v};\n        S{k}[e] = isnan({s}) ? OPT_INF : {s};\n    }}\n}}"
        );
        let _ = writeln!(
            out,
            "\n// {}\nextern \"C\" __global__ void __launch_bounds__(256) {}(const u64* __restrict__ tab, i64 len) {{",
            step.name.replace('\n', " "),
            kernel(k)
        );
        // Only what the body names is declared (NVRTC warns of the rest).
        for d in 0..p.dims.len() {
            if names(&body, &format!("E{d}")) {
                let _ = writeln!(out, "    const i64 E{d} = (i64)tab[{}];", t.extent(d));
            }
        }
        for (i, input) in p.inputs.iter().enumerate() {
            if names(&body, &format!("IN{i}")) {
                let ty = c_type(input.elem);
                let _ = writeln!(
                    out,
                    "    const {ty}* __restrict__ IN{i} = (const {ty}*)tab[{}];",
                    t.input(i)
                );
            }
        }
        for j in 0..l.steps.len() {
            if names(&body, &format!("V{j}")) {
                let _ = writeln!(out, "    double* V{j} = (double*)tab[{}];", t.values(j));
            }
            if names(&body, &format!("S{j}")) {
                let _ = writeln!(out, "    double* S{j} = (double*)tab[{}];", t.scales(j));
            }
        }
        for i in 0..p.params.len() {
            if names(&body, &format!("P{i}")) {
                let _ = writeln!(
                    out,
                    "    const double P{i} = __longlong_as_double((i64)tab[{}]);",
                    t.param(i)
                );
            }
        }
        out.push_str(&body);
    }
    out
}

/// Whether `text` holds `name` as a whole identifier.
fn names(text: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(ident)
            && !text[at + name.len()..].chars().next().is_some_and(ident)
    })
}

/// A row-major offset over `axes`, each at the variable `var(position, axis)`.
fn offset(axes: &[usize], var: impl Fn(usize, usize) -> String) -> String {
    let mut o = String::from("0");
    for (k, &a) in axes.iter().enumerate() {
        o = format!("({o}) * E{a} + {}", var(k, a));
    }
    o
}

/// Writes an expression's code, one float64 value and scale per node.
struct Emit<'a> {
    p: &'a Program,
    l: &'a Lowered,
    body: String,
    next: usize,
    depth: usize,
}

impl Emit<'_> {
    fn line(&mut self, text: &str) {
        for _ in 0..self.depth {
            self.body.push_str("    ");
        }
        self.body.push_str(text);
        self.body.push('\n');
    }

    /// A fresh pair of names, declared.
    fn fresh(&mut self) -> (String, String) {
        let n = self.next;
        self.next += 1;
        let (v, s) = (format!("v{n}"), format!("s{n}"));
        self.line(&format!("double {v}, {s};"));
        (v, s)
    }

    fn expr(&mut self, e: &Expr) -> (String, String) {
        match e {
            Expr::Const(c) => {
                let (v, s) = self.fresh();
                let rounding = if (*c as f32) as f64 == *c {
                    0.0
                } else {
                    c.abs()
                };
                self.line(&format!(
                    "{v} = {}; {s} = {};",
                    literal(*c),
                    literal(rounding)
                ));
                (v, s)
            }
            Expr::Param(i) => {
                let (v, s) = self.fresh();
                self.line(&format!("{v} = P{i}; {s} = opt_rounding({v});"));
                (v, s)
            }
            Expr::Input(i) => {
                let t = &self.p.inputs[*i];
                let at = offset(&t.axes, |_, a| format!("i{a}"));
                let (v, s) = self.fresh();
                match t.elem {
                    Elem::Float => self.line(&format!("{v} = (double)IN{i}[{at}]; {s} = 0.0;")),
                    Elem::Bool => {
                        self.line(&format!("{v} = IN{i}[{at}] != 0 ? 1.0 : 0.0; {s} = 0.0;"))
                    }
                    Elem::I64 | Elem::I32 => self.line(&format!(
                        "{v} = (double)IN{i}[{at}]; {s} = opt_rounding({v});"
                    )),
                }
                (v, s)
            }
            Expr::Value(j) => {
                let step = &self.l.steps[*j];
                let at = offset(&step.axes, |_, a| format!("i{a}"));
                let (v, s) = self.fresh();
                let scale = if step.exact {
                    "0.0".to_string()
                } else {
                    format!("S{j}[{at}]")
                };
                self.line(&format!("{v} = V{j}[{at}]; {s} = {scale};"));
                (v, s)
            }
            Expr::Unary(op, a) => {
                let (av, as_) = self.expr(a);
                let (v, s) = self.fresh();
                let code = unary_code(*op);
                self.line(&format!("opt_unary({code}, {av}, {as_}, &{v}, &{s});"));
                (v, s)
            }
            Expr::Binary(op, a, b) => {
                let (av, as_) = self.expr(a);
                let (bv, bs) = self.expr(b);
                let (v, s) = self.fresh();
                let code = binary_code(*op);
                self.line(&format!(
                    "opt_binary({code}, {av}, {as_}, {bv}, {bs}, &{v}, &{s});"
                ));
                (v, s)
            }
            Expr::Select(c, a, b) => {
                // A condition's scale plays no part (the prelude silences NVRTC's note of it).
                let (cv, _) = self.expr(c);
                let (av, as_) = self.expr(a);
                let (bv, bs) = self.expr(b);
                let (v, s) = self.fresh();
                self.line(&format!(
                    "{v} = {cv} != 0.0 ? {av} : {bv}; {s} = {cv} != 0.0 ? {as_} : {bs};"
                ));
                (v, s)
            }
            Expr::Gather(g, index) => {
                let (iv, _) = self.expr(index);
                let t = &self.p.inputs[g.input];
                let dim = t.axes[g.axis];
                let at = offset(&t.axes, |k, a| {
                    if k == g.axis {
                        format!("(i64){iv}")
                    } else {
                        format!("i{a}")
                    }
                });
                let (v, s) = self.fresh();
                self.line(&format!(
                    "if ({iv} >= 0.0 && {iv} < (double)E{dim} && floor({iv}) == {iv}) {v} = (double)IN{}[{at}]; else {v} = OPT_NAN;",
                    g.input
                ));
                self.line(&format!("{s} = 0.0;"));
                (v, s)
            }
            Expr::Reduce(op, over, body) => {
                let n = self.next;
                self.next += 1;
                let count = over
                    .iter()
                    .map(|d| format!("E{d}"))
                    .chain(std::iter::once("(i64)1".to_string()))
                    .collect::<Vec<_>>()
                    .join(" * ");
                self.line(&format!(
                    "OptAcc acc{n}; opt_acc_init(&acc{n}, {}); i64 k{n} = 0;",
                    reduce_code(*op)
                ));
                for &d in over {
                    self.line(&format!("for (i64 i{d} = 0; i{d} < E{d}; ++i{d}) {{"));
                    self.depth += 1;
                }
                let (bv, bs) = self.expr(body);
                self.line(&format!("opt_acc_add(&acc{n}, {bv}, {bs}, k{n}); ++k{n};"));
                for _ in over {
                    self.depth -= 1;
                    self.line("}");
                }
                let (v, s) = self.fresh();
                self.line(&format!("opt_acc_finish(&acc{n}, {count}, &{v}, &{s});"));
                (v, s)
            }
            // `lower` leaves no scan inside an expression.
            Expr::Scan(_, body) => self.expr(body),
        }
    }
}

/// A float64 literal C reads back as exactly `v`.
fn literal(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "OPT_INF" } else { "(-OPT_INF)" }.to_string()
    } else {
        // Rust's shortest round-trip form, with a point or exponent so that C reads a double.
        let s = format!("{v:?}");
        if s.contains(['.', 'e', 'E']) {
            s
        } else {
            format!("{s}.0")
        }
    }
}

fn unary_code(op: optiml_spec::program::Unary) -> i32 {
    use optiml_spec::program::Unary::*;
    match op {
        Neg => 0,
        Exp => 1,
        Log => 2,
        Log1p => 3,
        Expm1 => 4,
        Tanh => 5,
        Erf => 6,
        Sqrt => 7,
        Rsqrt => 8,
        Abs => 9,
        Sigmoid => 10,
    }
}

fn binary_code(op: optiml_spec::program::Binary) -> i32 {
    use optiml_spec::program::Binary::*;
    match op {
        Add => 0,
        Sub => 1,
        Mul => 2,
        Div => 3,
        Pow => 4,
        Max => 5,
        Min => 6,
        Lt => 7,
        Le => 8,
        Gt => 9,
        Ge => 10,
        Eq => 11,
        Ne => 12,
    }
}

fn reduce_code(op: Reduce) -> i32 {
    match op {
        Reduce::Sum => 0,
        Reduce::Mean => 1,
        Reduce::Max => 2,
        Reduce::Min => 3,
        Reduce::Prod => 4,
        Reduce::Argmax => 5,
        Reduce::Argmin => 6,
    }
}

/// What evaluating `l` at `extents` costs: float64 operations in all, the longest sequence one thread runs, the
/// device bytes of every step's values and scales; `None` when a reduction that must have an element has none
/// (the host interpreter's error words that).
fn cost(l: &Lowered, extents: &[usize]) -> Option<(f64, f64, u64)> {
    fn work(e: &Expr, extents: &[usize]) -> Option<f64> {
        Some(match e {
            Expr::Const(_) | Expr::Param(_) | Expr::Input(_) | Expr::Value(_) => 1.0,
            Expr::Unary(_, a) | Expr::Scan(_, a) | Expr::Gather(_, a) => work(a, extents)? + 1.0,
            Expr::Binary(_, a, b) => work(a, extents)? + work(b, extents)? + 1.0,
            Expr::Select(c, a, b) => {
                work(c, extents)? + work(a, extents)? + work(b, extents)? + 1.0
            }
            Expr::Reduce(op, over, body) => {
                let n: f64 = over.iter().map(|&d| extents[d] as f64).product();
                if n == 0.0 && !matches!(op, Reduce::Sum | Reduce::Prod) {
                    return None;
                }
                n * (work(body, extents)? + 1.0) + 1.0
            }
        })
    }
    let (mut total, mut chain, mut bytes) = (0.0f64, 0.0f64, 0u64);
    for step in &l.steps {
        let elements: f64 = step.axes.iter().map(|&a| extents[a] as f64).product();
        let per = work(&step.expr, extents)?;
        total += elements * per;
        chain = chain.max(per);
        if let Some(scan) = step.scan {
            let n = extents[scan.dim] as f64;
            total += elements;
            chain = chain.max(n);
        }
        bytes = bytes.saturating_add((elements as u64).saturating_mul(16));
    }
    Some((total, chain, bytes))
}

// ---------------------------------------------------------------------------------------------------------------
// The parent: compiling

/// The PTX of `p`'s GPU reference, compiled once per program and process; `None` when NVRTC is missing or the
/// program is one the lowering refuses (the gate then checks the host's sampled rows, as before).
pub fn ptx(p: &Program) -> Option<String> {
    type Compiled = Mutex<HashMap<Program, Option<String>>>;
    static COMPILED: OnceLock<Compiled> = OnceLock::new();
    let compiled = COMPILED.get_or_init(Default::default);
    if let Some(hit) = compiled.lock().ok()?.get(p) {
        return hit.clone();
    }
    let made = (|| {
        let nvrtc = crate::nvrtc::load().ok()?;
        let l = lower(p).ok()?;
        let src = source(p, &l);
        // sm_80 PTX: every GPU the gate runs on JIT-compiles it.
        crate::nvrtc::compile(
            nvrtc,
            "optiml_tensor_reference.cu",
            &src,
            optiml_runtime::Arch::new(8, 0),
        )
        .ok()
        .map(|c| c.ptx)
    })();
    compiled.lock().ok()?.insert(p.clone(), made.clone());
    made
}

// ---------------------------------------------------------------------------------------------------------------
// The worker: evaluating and comparing

/// The reference module of one program, loaded in the worker.
pub struct Device {
    lowered: Lowered,
    _module: Arc<CudaModule>,
    steps: Vec<CudaFunction>,
    scan: CudaFunction,
    compare: CudaFunction,
}

/// The reference of every step at one size on the device, and the comparison's scratch.
pub struct Values {
    values: Vec<CudaSlice<f64>>,
    scales: Vec<CudaSlice<f64>>,
    table: CudaSlice<u64>,
    partial: CudaSlice<f64>,
    first: CudaSlice<u64>,
}

/// An output as the comparison reads it: its device address, element kind (0 f32, 1 bf16, 2 f16, 3 i64, 4 i32,
/// 5 bool) and length.
#[derive(Clone, Copy, Debug)]
pub struct OutputRef {
    /// The address of its first element.
    pub ptr: u64,
    /// Its kind, as `optiml_ref_compare` reads it.
    pub kind: i32,
    /// Its element count.
    pub len: usize,
}

impl Device {
    /// Loads `ptx` (from [`ptx`]) for `p`.
    ///
    /// # Errors
    /// [`Stop::Reject`] when the program does not lower or the module does not load: the gate cannot check this
    /// job's dispatch size as it promised.
    pub fn load(w: &mut Bench, p: &Program, ptx: &str) -> Result<Self, Stop> {
        let lowered = lower(p).map_err(|e| reject("reference", e))?;
        let module = w.load_trusted(ptx).map_err(|e| {
            reject(
                "reference",
                format!("the float64 reference did not load: {e}"),
            )
        })?;
        let f = |name: &str| {
            module.load_function(name).map_err(|e| {
                reject(
                    "reference",
                    format!("the float64 reference lacks `{name}`: {e}"),
                )
            })
        };
        let steps = (0..lowered.steps.len())
            .map(|k| f(&kernel(k)))
            .collect::<Result<_, _>>()?;
        Ok(Device {
            scan: f(SCAN)?,
            compare: f(COMPARE)?,
            steps,
            lowered,
            _module: module,
        })
    }

    /// The device bytes a reference at `extents` takes, when the GPU can compute it in reasonable time
    /// (at most 3·10¹⁰ float64 operations, 2²⁷ of them in one thread's sequence); `None` otherwise.
    pub fn fits(&self, extents: &[usize]) -> Option<u64> {
        let (work, chain, bytes) = cost(&self.lowered, extents)?;
        (work <= MAX_WORK && chain <= MAX_CHAIN)
            .then_some(bytes + u64::from(COMPARE_BLOCKS) * 16 + 8 * 64)
    }

    /// Evaluates every step at `extents` on the inputs at `inputs` (one device address per program input: f32
    /// values, integers, or mask bytes) with `params`, into `into` (allocated on the first call).
    ///
    /// # Errors
    /// [`Stop::Fault`] when the driver fails.
    pub fn evaluate(
        &self,
        w: &Bench,
        p: &Program,
        inputs: &[u64],
        extents: &[usize],
        params: &[f32],
        into: &mut Option<Values>,
    ) -> Result<(), Stop> {
        let s = &w.stream;
        let t = table(p, &self.lowered);
        let lens: Vec<usize> = self
            .lowered
            .steps
            .iter()
            .map(|step| Program::len_of(&step.axes, extents))
            .collect();
        if into.is_none() {
            let alloc = |n: usize| {
                s.alloc_zeros::<f64>(n.max(1))
                    .map_err(fault("allocating the float64 reference"))
            };
            *into = Some(Values {
                values: lens.iter().map(|&n| alloc(n)).collect::<Result<_, _>>()?,
                scales: lens.iter().map(|&n| alloc(n)).collect::<Result<_, _>>()?,
                table: s
                    .alloc_zeros::<u64>(t.len(p.params.len()).max(1))
                    .map_err(fault("allocating the reference's table"))?,
                partial: alloc(2 * COMPARE_BLOCKS as usize)?,
                first: s
                    .alloc_zeros::<u64>(1)
                    .map_err(fault("allocating the failing index"))?,
            });
        }
        let Some(v) = into.as_mut() else {
            return Err(reject("reference", "no reference buffers"));
        };
        let mut words = vec![0u64; t.len(p.params.len())];
        words[..inputs.len()].copy_from_slice(inputs);
        for k in 0..lens.len() {
            words[t.values(k)] = address(s, &v.values[k]);
            words[t.scales(k)] = address(s, &v.scales[k]);
        }
        for (d, &e) in extents.iter().enumerate() {
            words[t.extent(d)] = e as u64;
        }
        for (i, &x) in params.iter().enumerate() {
            words[t.param(i)] = f64::from(x).to_bits();
        }
        if !words.is_empty() {
            s.memcpy_htod(&words, &mut v.table)
                .map_err(fault("uploading the reference's table"))?;
        }
        let sms = w.device.sm_count;
        for (k, step) in self.lowered.steps.iter().enumerate() {
            let len = lens[k] as i64;
            if len > 0 {
                let mut b = s.launch_builder(&self.steps[k]);
                b.arg(&v.table).arg(&len);
                // SAFETY: `optiml_ref_k(const u64*, i64)` reads the table (every input's address with its
                // extents' elements, every step's buffers of `lens` elements, the extents and parameters, as
                // filled above) and writes elements below `len` of its own step's two buffers; its loads stay
                // within the buffers since every index is bounded by the extents the buffers were sized from
                // (a gather's index is checked against its axis).
                unsafe { b.launch(grid(lens[k], sms)) }
                    .map_err(fault("computing the float64 reference"))?;
            }
            if let (Some(scan), true) = (step.scan, len > 0) {
                let at = step.axes.iter().position(|&a| a == scan.dim).unwrap_or(0);
                let n = extents[scan.dim] as i64;
                let inner: usize = step.axes[at + 1..].iter().map(|&a| extents[a]).product();
                let lines = len / n.max(1);
                let (inner, op) = (inner as i64, reduce_code(scan.op));
                let (reverse, exclusive) = (i32::from(scan.reverse), i32::from(scan.exclusive));
                let mut b = s.launch_builder(&self.scan);
                b.arg(&mut v.values[k]).arg(&mut v.scales[k]);
                b.arg(&lines)
                    .arg(&n)
                    .arg(&inner)
                    .arg(&op)
                    .arg(&reverse)
                    .arg(&exclusive);
                // SAFETY: `optiml_ref_scan(double*, double*, i64, i64, i64, int, int, int)` touches positions
                // `(o·n + j)·inner + i` for `o·inner + i < lines`, `j < n`: below `lines · n = len`.
                unsafe { b.launch(grid(lines as usize, sms)) }
                    .map_err(fault("folding the float64 reference's scan"))?;
            }
        }
        Ok(())
    }

    /// Compares program output `k` (at `out`) with its reference in `v`. `name(i)` names element `i` in a
    /// failure.
    ///
    /// # Errors
    /// The outer error is a driver fault; the inner one says why the output is wrong: its first failing element,
    /// or the relative L2 error over every element.
    pub fn compare(
        &self,
        w: &Bench,
        v: &mut Values,
        k: usize,
        out: OutputRef,
        tol: &Tolerance,
        name: &dyn Fn(usize) -> String,
    ) -> Result<Result<(), String>, Stop> {
        let s = &w.stream;
        let step = self.lowered.outputs[k];
        let mut cmp = Comparison::default();
        if out.len == 0 {
            return Ok(cmp.finish(tol).map(drop));
        }
        s.memcpy_htod(&[u64::MAX], &mut v.first)
            .map_err(fault("resetting the failing index"))?;
        let n = out.len as i64;
        let mut b = s.launch_builder(&self.compare);
        b.arg(&out.ptr)
            .arg(&out.kind)
            .arg(&v.values[step])
            .arg(&v.scales[step]);
        let forgive = tol.forgive_abs();
        b.arg(&n).arg(&tol.scaled_abs).arg(&tol.abs).arg(&forgive);
        b.arg(&mut v.partial).arg(&mut v.first);
        let cfg = LaunchConfig {
            grid_dim: (COMPARE_BLOCKS, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `optiml_ref_compare(const void*, int, const double*, const double*, i64, double, double,
        // double, double*, u64*)` reads `n` elements of the output as `kind` (its buffer holds them) and of the step's
        // two buffers (sized from the same extents), and writes two sums per block and the index.
        unsafe { b.launch(cfg) }.map_err(fault("comparing with the float64 reference"))?;
        let sums = s
            .clone_dtoh(&v.partial)
            .map_err(fault("reading the comparison"))?;
        let at = s
            .clone_dtoh(&v.first)
            .map_err(fault("reading the comparison"))?[0];
        if at != u64::MAX {
            let i = at as usize;
            let one = |buf: &CudaSlice<f64>| -> Result<f64, Stop> {
                Ok(s.clone_dtoh(&buf.slice(i..i + 1))
                    .map_err(fault("reading a failing element"))?[0])
            };
            let (r, g) = (one(&v.values[step])?, one(&v.scales[step])?);
            let got = read_one(w, out, i)?;
            if out.kind >= 3 {
                return Ok(Err(format!("{} is {got}, expected {r}", name(i))));
            }
            cmp.check(tol, &|| name(i), got as f32, r, g);
            return Ok(Err(cmp.failure.unwrap_or_else(|| {
                format!(
                    "{} is {got:.8e}, expected {r:.8e}: at the edge of its bound (scale {g:.3e})",
                    name(i)
                )
            })));
        }
        let (diff2, ref2) = sums
            .chunks_exact(2)
            .fold((0.0, 0.0), |(d, r), p| (d + p[0], r + p[1]));
        cmp.add_sums(diff2, ref2, out.len);
        Ok(cmp.finish(tol).map(drop))
    }
}

/// Element `i` of an output, widened to f64.
fn read_one(w: &Bench, out: OutputRef, i: usize) -> Result<f64, Stop> {
    let s = &w.stream;
    let bytes = match out.kind {
        0 | 4 => 4,
        1 | 2 => 2,
        3 => 8,
        _ => 1,
    };
    let mut raw = [0u8; 8];
    // SAFETY: the output holds `len > i` elements of `bytes` bytes at `ptr`; the copy reads one of them into a
    // host array of at least that size, after the stream's work.
    unsafe {
        s.synchronize()
            .map_err(fault("reading a failing element"))?;
        cudarc::driver::result::memcpy_dtoh_sync(&mut raw[..bytes], out.ptr + (i * bytes) as u64)
            .map_err(fault("reading a failing element"))?;
    }
    Ok(match out.kind {
        0 => f32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as f64,
        1 => half::bf16::from_le_bytes([raw[0], raw[1]]).to_f64(),
        2 => half::f16::from_le_bytes([raw[0], raw[1]]).to_f64(),
        3 => i64::from_le_bytes(raw) as f64,
        4 => i32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as f64,
        _ => f64::from(u8::from(raw[0] != 0)),
    })
}

/// The device address of a buffer.
pub fn address<T>(s: &Arc<cudarc::driver::CudaStream>, buf: &CudaSlice<T>) -> u64 {
    use cudarc::driver::DevicePtr;
    let (ptr, _record) = buf.device_ptr(s);
    ptr
}

fn grid(n: usize, sms: u32) -> LaunchConfig {
    let blocks = n.div_ceil(256).clamp(1, sms.max(1) as usize * 16) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use optiml_spec::program::notation::parse;

    #[test]
    fn a_row_reduction_inside_an_elementwise_statement_is_computed_once_per_row() {
        let p = parse("y[r, c] = x[r, c] / sum(c) x[r, c]").unwrap();
        let l = lower(&p).unwrap();
        assert_eq!(l.steps.len(), 2);
        assert_eq!(l.steps[0].axes, vec![0]);
        assert!(matches!(l.steps[0].expr, Expr::Reduce(Reduce::Sum, ..)));
        assert_eq!(l.outputs, vec![1]);
        // The statement reads the row's sum back.
        let Expr::Binary(_, _, sum) = &l.steps[1].expr else {
            panic!("{:?}", l.steps[1].expr)
        };
        assert_eq!(**sum, Expr::Value(0));
        // A reduction over every axis the statement has stays where it is.
        let p = parse("y[r] = sum(c) x[r, c]").unwrap();
        assert_eq!(lower(&p).unwrap().steps.len(), 1);
    }

    #[test]
    fn a_reduction_inside_another_moves_out_when_it_ignores_the_outer_loop() {
        // Layer norm's variance: the mean inside the sum of squares is the row's, not the element's.
        let p = parse("y[r] = sum(c) (x[r, c] - mean(c) x[r, c])^2").unwrap();
        let l = lower(&p).unwrap();
        assert_eq!(l.steps.len(), 2, "{l:#?}");
        assert!(matches!(l.steps[0].expr, Expr::Reduce(Reduce::Mean, ..)));
        // One that reads the outer loop's variable stays inside it.
        let p = parse("y[i] = sum(j) sum(k) a[i, j] * b[j, k]").unwrap();
        let l = lower(&p).unwrap();
        assert_eq!(l.steps.len(), 1, "{l:#?}");
    }

    #[test]
    fn statements_keep_their_order_and_outputs() {
        let p = parse("m[r] = max(c) x[r, c]; e[r, c] = exp(x[r, c] - m[r]); y[r, c] = e[r, c] / sum(c) e[r, c]")
            .unwrap();
        let l = lower(&p).unwrap();
        // m, e, the row sum of e, y.
        assert_eq!(l.steps.len(), 4, "{l:#?}");
        assert_eq!(l.outputs, vec![3]);
        assert!(matches!(l.steps[2].expr, Expr::Reduce(Reduce::Sum, ..)));
    }

    #[test]
    fn the_cost_bounds_what_the_gpu_is_asked() {
        let p = parse("y[r, c] = x[r, c] / sum(c) x[r, c]").unwrap();
        let l = lower(&p).unwrap();
        // Softmax at KernelBench's 4096 × 393216: two passes, about 5 operations an element.
        let (work, chain, bytes) = cost(&l, &[4096, 393216]).unwrap();
        assert!(work < 1e10, "{work}");
        assert!(chain < 2e6, "{chain}");
        assert_eq!(bytes, (4096 + 4096 * 393216) * 16);
        // A full reduction of 2³⁰ elements in one thread is too long a chain.
        let p = parse("y = sum(r, c) x[r, c]").unwrap();
        let (_, chain, _) = cost(&lower(&p).unwrap(), &[1 << 15, 1 << 15]).unwrap();
        assert!(chain > MAX_CHAIN);
        // Attention at KernelBench 97's size (b, h, i, j, d, dv = 32, 32, 512, 512, 1024, 1024) is past what the GPU
        // reference takes per candidate: its dispatch size keeps the host's sampled query rows.
        let attention = match optiml_spec::parse("scaled dot-product attention")
            .unwrap()
            .family
        {
            optiml_spec::Family::Tensor(p) => p,
            other => panic!("{other:?}"),
        };
        let (work, _, _) =
            cost(&lower(&attention).unwrap(), &[32, 32, 512, 512, 1024, 1024]).unwrap();
        assert!(work > MAX_WORK, "{work}");
        // A max over nothing is the host's error to word.
        let p = parse("y[r] = max(c) x[r, c]").unwrap();
        assert!(cost(&lower(&p).unwrap(), &[4, 0]).is_none());
    }

    #[test]
    fn literals_read_back_exactly() {
        for v in [0.0, 1.0, -2.5, 1e-5, 0.1, 1e300, 3.0e-310, 123456789.0] {
            let s = literal(v);
            assert_eq!(s.parse::<f64>().unwrap(), v, "{s}");
            assert!(s.contains(['.', 'e']), "{s}");
        }
        assert_eq!(literal(f64::NEG_INFINITY), "(-OPT_INF)");
    }

    /// Programs with every kind of expression: maps, selects, row and column reductions (one inside another),
    /// arg reductions with i32 results, gathers, masks, every scan, parameters, 16-bit storage, several outputs.
    const SPECS: [&str; 16] = [
        "softmax over the last axis",
        "layer norm over the last 3 axes of a 4-D tensor with affine weight and bias",
        "argmax over dim 1 of a 3-D tensor, i32 indices",
        "cross entropy loss",
        "kl divergence, batchmean",
        "triplet margin loss, margin 1.0",
        "batch norm, training mode, bf16",
        "minGPT new gelu",
        "selu",
        "hardtanh, min -1, max 1",
        "smooth l1 loss",
        "masked cumsum along dim 1",
        "y[a, b, k] = cumsum(b, reverse, exclusive) x[a, b, k] * m[a, b, k], bool m",
        "y[a, b, k] = cumprod(b) (x[a, b, k] * w[b] + s)",
        "y[a, b, k] = cummax(b) x[a, b, k], bf16",
        "m[r] = max(c) x[r, c]; s[r] = sum(c) exp(x[r, c] - m[r]); lo = min(r) m[r]; \
         y = sum(r) log(s[r]) * w[r] * 0.5 + lo; z = max(r) s[r]",
    ];

    fn program(text: &str) -> Program {
        match optiml_spec::parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .family
        {
            optiml_spec::Family::Tensor(p) => p,
            other => panic!("{text}: {other:?}"),
        }
    }

    /// Their modules compile with NVRTC without a warning (skipped, with a note, where NVRTC is missing).
    #[test]
    fn programs_of_every_kind_compile_to_a_reference_module() {
        let Ok(nvrtc) = crate::nvrtc::load() else {
            eprintln!(
                "skipped: NVRTC not found; set OPTIML_NVRTC to compile the reference modules"
            );
            return;
        };
        // One module of every program's kernels, renamed apart.
        let mut all = String::from(PRELUDE);
        for (n, text) in SPECS.iter().enumerate() {
            let p = program(text);
            let l = lower(&p).unwrap_or_else(|e| panic!("{text}: {e}"));
            let src = source(&p, &l);
            all.push_str(&src[PRELUDE.len()..].replace("optiml_ref_", &format!("optiml_ref_{n}_")));
        }
        let c = crate::nvrtc::compile(nvrtc, "all.cu", &all, optiml_runtime::Arch::new(8, 0))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!c.log.contains("warning"), "{}", c.log);
        assert!(c.ptx.contains(".entry optiml_ref_scan("));
        assert!(c.ptx.contains(".entry optiml_ref_compare("));
        assert!(c.ptx.contains(".entry optiml_ref_15_0("));
    }

    /// On the GPU, every output's values and error scales are the host interpreter's, at the plan's sizes of
    /// each program, to float64 rounding (transcendentals differ in their last bits).
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn the_gpu_reference_is_the_host_interpreter() {
        use optiml_spec::program::interp::{self, HostTensor};
        let nvrtc = crate::nvrtc::load().expect("NVRTC");
        let ctx = optiml_runtime::probe::context(0).expect("a CUDA device");
        let arch = optiml_runtime::probe::arch_of(&ctx).expect("its architecture");
        let support = crate::nvrtc::compile(nvrtc, "s.cu", crate::eval::support_source(), arch)
            .expect("the support module");
        let mut w = Bench::setup(0, support.cubin).expect("a bench");
        let s = w.stream.clone();
        let mut compared = 0usize;
        for text in SPECS {
            let p = program(text);
            let ptx = ptx(&p).expect("the reference compiles");
            let device = Device::load(&mut w, &p, &ptx).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            // The worker loads a program's reference once, however many jobs send it.
            let again = w.load_trusted(&ptx).expect("the reference loads");
            assert!(Arc::ptr_eq(&again, &w.load_trusted(&ptx).unwrap()));
            let plan = super::super::gate::test_plan(&p, &[]);
            for (n, extents) in plan.sizes.iter().enumerate() {
                let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ n as u64;
                let mut next = move || {
                    seed = crate::eval::plan::splitmix(seed);
                    seed
                };
                let gathers = super::super::codegen::gathers(&p);
                let mut floats: Vec<Vec<f32>> = Vec::new();
                let mut ints: Vec<Vec<i64>> = Vec::new();
                let mut addresses = Vec::new();
                let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
                for (i, t) in p.inputs.iter().enumerate() {
                    let len = Program::len_of(&t.axes, extents).max(1);
                    match t.elem {
                        Elem::Float => {
                            // Positive and away from 0, so logarithms and roots are defined; 16-bit values
                            // rounded as the gate rounds them.
                            let v: Vec<f32> = (0..len)
                                .map(|_| {
                                    let x =
                                        0.25 + 1.75 * (next() >> 40) as f32 / (1u64 << 24) as f32;
                                    match p.dtype {
                                        optiml_spec::DType::Bf16 => {
                                            half::bf16::from_f32(x).to_f32()
                                        }
                                        optiml_spec::DType::F16 => half::f16::from_f32(x).to_f32(),
                                        optiml_spec::DType::F32 => x,
                                    }
                                })
                                .collect();
                            let d = s.clone_htod(&v).unwrap();
                            addresses.push(address(&s, &d));
                            keep.push(Box::new(d));
                            floats.push(v);
                            ints.push(Vec::new());
                        }
                        _ => {
                            let bound = gathers
                                .iter()
                                .filter(|&&(_, k)| k == i)
                                .map(|(g, _)| extents[p.inputs[g.input].axes[g.axis]])
                                .min()
                                .unwrap_or(2)
                                .max(1) as u64;
                            let v: Vec<i64> = (0..len).map(|_| (next() % bound) as i64).collect();
                            match t.elem {
                                Elem::I64 => {
                                    let d = s.clone_htod(&v).unwrap();
                                    addresses.push(address(&s, &d));
                                    keep.push(Box::new(d));
                                }
                                Elem::I32 => {
                                    let n: Vec<i32> = v.iter().map(|&x| x as i32).collect();
                                    let d = s.clone_htod(&n).unwrap();
                                    addresses.push(address(&s, &d));
                                    keep.push(Box::new(d));
                                }
                                _ => {
                                    let n: Vec<u8> = v.iter().map(|&x| x as u8).collect();
                                    let d = s.clone_htod(&n).unwrap();
                                    addresses.push(address(&s, &d));
                                    keep.push(Box::new(d));
                                }
                            }
                            floats.push(Vec::new());
                            ints.push(v);
                        }
                    }
                }
                let tensors: Vec<HostTensor<'_>> = p
                    .inputs
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let len = Program::len_of(&t.axes, extents);
                        match t.elem {
                            Elem::Float => HostTensor::Float(&floats[i][..len]),
                            _ => HostTensor::Int(&ints[i][..len]),
                        }
                    })
                    .collect();
                let params: Vec<f32> = (0..p.params.len()).map(|i| 0.75 + 0.5 * i as f32).collect();
                let wide: Vec<f64> = params.iter().map(|&x| f64::from(x)).collect();
                let host = interp::eval(&p, extents, &tensors, &wide, None, 4)
                    .unwrap_or_else(|e| panic!("{text} at {extents:?}: {e}"));
                let mut values = None;
                device
                    .evaluate(&w, &p, &addresses, extents, &params, &mut values)
                    .unwrap_or_else(|e| panic!("{text}: {e:?}"));
                let values = values.expect("evaluated");
                for (k, r) in host.iter().enumerate() {
                    let step = device.lowered.outputs[k];
                    let len = r.values.len();
                    let gv = s.clone_dtoh(&values.values[step]).unwrap();
                    let gs = s.clone_dtoh(&values.scales[step]).unwrap();
                    for i in 0..len {
                        let (h, g) = (r.values[i], gv[i]);
                        let close = |a: f64, b: f64, rel: f64| {
                            a == b
                                || (a.is_nan() && b.is_nan())
                                || (a - b).abs() <= rel * a.abs().max(b.abs())
                        };
                        assert!(
                            close(h, g, 1e-12) || (h - g).abs() <= 1e-12 * r.scales[i],
                            "{text} at {extents:?}, output {k}[{i}]: host {h:e}, GPU {g:e}"
                        );
                        assert!(
                            close(r.scales[i], gs[i], 1e-9),
                            "{text} at {extents:?}, output {k}[{i}]: host scale {:e}, GPU {:e}",
                            r.scales[i],
                            gs[i]
                        );
                    }
                    compared += len;
                }
                drop(keep);
            }
        }
        println!("{compared} elements equal");
        assert!(compared > 1_000_000, "{compared}");
    }
}
