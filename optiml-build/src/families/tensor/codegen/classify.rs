//! Which generator covers a program, with the dimension roles it needs; reductions hoisted into statements of
//! their own first, so every later stage sees a reduction only as the whole expression of a statement.

use optiml_spec::program::{Elem, Expr, Gather, Program, Reduce, Scan, Stmt};
use std::fmt;

/// What kind of kernel a program is, with the dimension roles the generator needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// No reduction: every output element is a function of input elements at broadcast positions.
    Pointwise(PointwiseShape),
    /// Reductions over the innermost (contiguous) axes: one row per combination of the other dimensions.
    Rows(RowShape),
    /// Reductions over a middle or leading axis: one column (strided) per combination of the other dimensions.
    Columns(ColumnShape),
    /// Reductions of every dimension, or of dimensions on both sides of a kept one (batch statistics): few
    /// items, each far longer than a block, reduced by a two-stage tree across blocks.
    Tree(TreeShape),
    /// A running reduction along one axis (`cumsum(c) x[r, c]`): one line per combination of the other axes.
    Scan(ScanShape),
}

/// A program of one scan statement, `y[…] = cumsum(d) body` with a pointwise body of the inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanShape {
    /// The program.
    pub program: Program,
    /// The scan.
    pub scan: Scan,
    /// The output's axes other than the scanned one, outermost first: one line per combination.
    pub items: Vec<usize>,
    /// The output's axes after the scanned one: empty when the scanned axis is contiguous.
    pub inner: Vec<usize>,
}

/// A program without reductions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointwiseShape {
    /// The program.
    pub program: Program,
    /// The dimensions iterated over (the first output's axes), outermost first: every output has exactly these,
    /// every other tensor a subset.
    pub items: Vec<usize>,
    /// Every input has exactly the axes `items` (or none) and every output exactly `items`: one flat index
    /// addresses every tensor, no index is decomposed.
    pub flat: bool,
}

/// A program whose reductions all reduce the innermost axes of the tensors they read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowShape {
    /// The program with every reduction the whole expression of its own statement ([`lower`]).
    pub program: Program,
    /// The reduced dimensions C, in memory order: the trailing axes of every tensor that has any of them.
    pub reduced: Vec<usize>,
    /// The other dimensions (one row per combination), outermost first.
    pub items: Vec<usize>,
    /// Statements after the rows that fold per-row values over every row into scalars (a loss's mean over
    /// the batch of a per-row reduction), or `None`.
    pub tail: Option<Tail>,
}

/// The end of a row program that folds per-row values into scalars: `loss[] = mean(r) d[r]` after
/// `d[r] = sum(c) …`. Each row stores its contribution to every fold in a workspace; a second launch folds
/// them in row order ([`optiml_runtime::TreeLaunch`] with one pass).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tail {
    /// The first tail statement: every statement from here on has no axes, and is a fold over every row
    /// (a sum, mean, product, max or min of per-row values) or a pointwise function of earlier folds.
    pub start: usize,
    /// What the rows compute: the program with each fold's body in its place as a per-row statement (axes:
    /// the rows' dimensions), the tail's other statements as dead constants, and no tail output. Statement
    /// numbers are the program's.
    pub rows: Program,
}

impl Tail {
    /// The tail's folds in statement order: `(statement, operation)`.
    pub fn folds<'a>(&self, full: &'a Program) -> impl Iterator<Item = (usize, Reduce)> + 'a {
        let start = self.start;
        full.stmts
            .iter()
            .enumerate()
            .skip(start)
            .filter_map(|(j, s)| match &s.expr {
                Expr::Reduce(op, ..) => Some((j, *op)),
                _ => None,
            })
    }
}

impl RowShape {
    /// The program the row kernel's passes compute: the rows' part of a program with a [`Tail`].
    pub fn rows_program(&self) -> &Program {
        self.tail.as_ref().map_or(&self.program, |t| &t.rows)
    }
}

/// A program whose reductions reduce axes that some tensor has dimensions after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnShape {
    /// The program with every reduction the whole expression of its own statement ([`lower`]).
    pub program: Program,
    /// The reduced dimensions C, in memory order: adjacent axes of every tensor that has any of them.
    pub reduced: Vec<usize>,
    /// The other dimensions (one column per combination), outermost first; the innermost is the fastest
    /// varying across threads, so it is chosen as the largest tensor's innermost axis.
    pub items: Vec<usize>,
    /// The dimensions after C in some tensor (non-empty): what makes a column strided.
    pub inner: Vec<usize>,
}

/// A program reduced by a tree across blocks ([`Shape::Tree`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeShape {
    /// The program with every reduction the whole expression of its own statement ([`lower`]).
    pub program: Program,
    /// The reduced dimensions, in the order the kernel walks them: the outer ones, then the `inner` last ones.
    pub reduced: Vec<usize>,
    /// How many of the last `reduced` dimensions are the trailing axes, in this order, of every tensor that has
    /// any of them (at least 1): contiguous runs the kernel reads in 16-byte chunks.
    pub inner: usize,
    /// The other dimensions (one tree per combination), outermost first; possibly none.
    pub items: Vec<usize>,
}

impl TreeShape {
    /// The inner (contiguous) reduced dimensions.
    pub fn inner_dims(&self) -> &[usize] {
        &self.reduced[self.reduced.len() - self.inner..]
    }

    /// The outer reduced dimensions.
    pub fn outer_dims(&self) -> &[usize] {
        &self.reduced[..self.reduced.len() - self.inner]
    }
}

/// Why no generator covers a program yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unsupported {
    /// More dimensions than a launch's 32-bit dimension masks hold.
    TooManyDims {
        /// How many the program has.
        dims: usize,
    },
    /// The program computes nothing.
    NoOutputs,
    /// A pointwise program whose outputs are not indexed by the same dimensions.
    OutputAxesDiffer {
        /// The first output.
        first: String,
        /// One that differs.
        other: String,
    },
    /// An input of an integer type (generated kernels read floating tensors only).
    IntegerInput {
        /// The input.
        input: String,
    },
    /// A gather ([`Expr::Gather`]) that is not one value per row of a row program: only row kernels read
    /// gathered values so far, once per row (cross-entropy's target logit).
    Gather {
        /// The statement holding it.
        stmt: String,
    },
    /// A boolean input outside a scan (only scan kernels read masks so far).
    MaskInput {
        /// The input.
        input: String,
    },
    /// A scan among other statements (a scan kernel computes one scan of the inputs).
    ScanNotAlone {
        /// The scan's statement.
        stmt: String,
    },
    /// A scan whose body holds a reduction or another scan.
    ScanBody {
        /// The statement.
        stmt: String,
    },
    /// A tensor a scan reads whose axes are not in the order of the scan's output.
    ScanLayout {
        /// The tensor.
        tensor: String,
    },
    /// A reduction over no dimension.
    EmptyReduction {
        /// The statement holding it.
        stmt: String,
    },
    /// A scan inside an expression or a reduction's body, where [`lower`] meets it (a reduction inside another's
    /// body is hoisted into a statement of its own).
    NestedReduction {
        /// The statement holding it.
        stmt: String,
    },
    /// Reductions over different sets of dimensions in one program.
    MixedReductions {
        /// The first reduction's dimensions.
        first: Vec<String>,
        /// Another's.
        other: Vec<String>,
    },
    /// An argmax or argmin that needs a reduction across blocks (of every dimension, or of dimensions around a
    /// kept one).
    TreeArg {
        /// The statement.
        stmt: String,
    },
    /// No innermost reduced dimension is the last axis of every tensor that has it (so no contiguous run to
    /// read), or a statement has some reduced dimensions but not the innermost ones.
    SplitReducedAxes {
        /// The tensor.
        tensor: String,
    },
    /// An argmax or argmin whose statement keeps a reduced dimension as an axis (an index broadcast along the
    /// dimension it indexes).
    ArgBroadcast {
        /// The statement.
        stmt: String,
    },
    /// An argmax or argmin lists its dimensions in another order than the tensors store them.
    ArgOrder {
        /// The statement.
        stmt: String,
    },
    /// Two tensors read under the reduction each have a dimension the other lacks: a contraction (matmul).
    Contraction {
        /// One tensor.
        a: String,
        /// The other.
        b: String,
    },
    /// An output lacks a dimension that is not reduced, so every position of it would be written many times.
    OutputLacksDim {
        /// The output.
        output: String,
        /// The dimension.
        dim: String,
    },
    /// The program breaks a rule of the IR (an index out of range, a free variable that is not an axis).
    Malformed(String),
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unsupported::TooManyDims { dims } => {
                write!(f, "{dims} dimensions; kernels are generated for at most 32")
            }
            Unsupported::NoOutputs => f.write_str("the program has no output"),
            Unsupported::OutputAxesDiffer { first, other } => write!(
                f,
                "outputs `{first}` and `{other}` have different dimensions; a pointwise kernel writes outputs of one shape"
            ),
            Unsupported::IntegerInput { input } => write!(
                f,
                "input `{input}` has an integer type; generated kernels read floating inputs only"
            ),
            Unsupported::Gather { stmt } => write!(
                f,
                "`{stmt}` reads a tensor at an index from data where it is not one value per row; generated \
                 kernels gather once per row of a row program (`x[r, t[r]]` beside reductions over `x`'s other \
                 axes) so far"
            ),
            Unsupported::MaskInput { input } => write!(
                f,
                "input `{input}` is a mask (bool); only scan kernels read masks so far (multiply by a floating mask \
                 instead)"
            ),
            Unsupported::ScanNotAlone { stmt } => write!(
                f,
                "`{stmt}` is a scan among other statements; a scan kernel computes one scan of the inputs: write \
                 the scan's body inline, and what follows it as a program of its own"
            ),
            Unsupported::ScanBody { stmt } => write!(
                f,
                "the body of the scan `{stmt}` holds a reduction or a scan; a scan kernel scans a pointwise body"
            ),
            Unsupported::ScanLayout { tensor } => write!(
                f,
                "`{tensor}` lists its axes in another order than the scan's output (a transpose), which scan \
                 kernels do not read"
            ),
            Unsupported::EmptyReduction { stmt } => {
                write!(f, "`{stmt}` reduces over no dimension")
            }
            Unsupported::NestedReduction { stmt } => write!(
                f,
                "`{stmt}` holds a scan inside an expression or a reduction; a scan is computed only as a whole \
                 statement"
            ),
            Unsupported::MixedReductions { first, other } => write!(
                f,
                "reductions over different dimensions ({} and {}); one kernel reduces one set of dimensions",
                first.join(", "),
                other.join(", ")
            ),
            Unsupported::TreeArg { stmt } => write!(
                f,
                "`{stmt}` is an argmax / argmin across blocks (of every dimension, or of dimensions around a kept \
                 one), which is not generated yet"
            ),
            Unsupported::SplitReducedAxes { tensor } => write!(
                f,
                "`{tensor}` does not end with the innermost reduced dimension the other tensors end with, or has \
                 outer reduced dimensions without it (no contiguous run to reduce)"
            ),
            Unsupported::ArgBroadcast { stmt } => write!(
                f,
                "`{stmt}` broadcasts an argmax / argmin along a dimension it reduces; index outputs are one per row"
            ),
            Unsupported::ArgOrder { stmt } => write!(
                f,
                "`{stmt}` lists its dimensions in another order than the tensors store them; its linear position \
                 would not follow memory order"
            ),
            Unsupported::Contraction { a, b } => write!(
                f,
                "`{a}` and `{b}` each have a dimension the other lacks under one reduction: a contraction, for the \
                 matmul kernels"
            ),
            Unsupported::OutputLacksDim { output, dim } => write!(
                f,
                "output `{output}` lacks dimension `{dim}`, which is not reduced: each of its elements would be \
                 written once per value of `{dim}`"
            ),
            Unsupported::Malformed(why) => write!(f, "malformed program: {why}"),
        }
    }
}

impl std::error::Error for Unsupported {}

/// Classifies a program, or says why no generator covers it yet. Pointwise first (no reduction), then rows
/// (every reduced axis innermost), then columns, then a tree (no kept dimension, or reduced axes on both sides
/// of a kept one).
///
/// # Errors
/// [`Unsupported`] with the reason.
pub fn classify(program: &Program) -> Result<Shape, Unsupported> {
    check(program)?;
    if program.dims.len() > 32 {
        return Err(Unsupported::TooManyDims {
            dims: program.dims.len(),
        });
    }
    let outputs: Vec<&Stmt> = program.outputs().map(|(_, s)| s).collect();
    let Some(first) = outputs.first() else {
        return Err(Unsupported::NoOutputs);
    };
    if program.stmts.iter().any(|s| has_scan(&s.expr)) {
        return classify_scan(program);
    }
    // Integer inputs are read only as gathers' indices; masks only by scans (below).
    let indices = gathers(program);
    let mut plain = Vec::new();
    for s in &program.stmts {
        super::emit::refs(&s.expr, &mut plain, &mut Vec::new());
    }
    if let Some(input) = program
        .inputs
        .iter()
        .enumerate()
        .find(|&(k, t)| {
            t.elem != Elem::Float && (plain.contains(&k) || !indices.iter().any(|&(_, i)| i == k))
        })
        .map(|(_, t)| t)
    {
        return Err(match input.elem {
            Elem::Bool => Unsupported::MaskInput {
                input: input.name.clone(),
            },
            _ => Unsupported::IntegerInput {
                input: input.name.clone(),
            },
        });
    }
    if let Some(s) = program.stmts.iter().find(|s| has_gather(&s.expr)) {
        let shape = if program.stmts.iter().any(|s| has_reduce(&s.expr)) {
            classify_reduction(program)?
        } else {
            return Err(Unsupported::Gather {
                stmt: s.name.clone(),
            });
        };
        return match &shape {
            Shape::Rows(r) => {
                let rows = r.tail.as_ref().map_or(&r.program, |t| &t.rows);
                row_gathers(rows, r)?;
                Ok(shape)
            }
            _ => Err(Unsupported::Gather {
                stmt: s.name.clone(),
            }),
        };
    }
    if !program.stmts.iter().any(|s| has_reduce(&s.expr)) {
        let items = first.axes.clone();
        let mut sorted = items.clone();
        sorted.sort_unstable();
        for o in &outputs[1..] {
            let mut axes = o.axes.clone();
            axes.sort_unstable();
            if axes != sorted {
                return Err(Unsupported::OutputAxesDiffer {
                    first: first.name.clone(),
                    other: o.name.clone(),
                });
            }
        }
        let flat = program
            .inputs
            .iter()
            .all(|t| t.axes.is_empty() || t.axes == items)
            && outputs.iter().all(|o| o.axes == items);
        return Ok(Shape::Pointwise(PointwiseShape {
            program: program.clone(),
            items,
            flat,
        }));
    }
    classify_reduction(program)
}

/// A program with a scan: one statement, a pointwise body of float or mask inputs whose axes are the output's
/// in the output's order.
fn classify_scan(program: &Program) -> Result<Shape, Unsupported> {
    let Some(s) = program.stmts.iter().find(|s| has_scan(&s.expr)) else {
        return Err(Unsupported::Malformed("a scan vanished".into()));
    };
    if program.stmts.len() != 1 {
        return Err(Unsupported::ScanNotAlone {
            stmt: s.name.clone(),
        });
    }
    let Expr::Scan(scan, body) = &s.expr else {
        return Err(Unsupported::Malformed(format!(
            "`{}`: a scan that is not the whole expression",
            s.name
        )));
    };
    if has_reduce(body) {
        return Err(Unsupported::ScanBody {
            stmt: s.name.clone(),
        });
    }
    if let Some(input) = program
        .inputs
        .iter()
        .find(|t| matches!(t.elem, Elem::I64 | Elem::I32))
    {
        return Err(Unsupported::IntegerInput {
            input: input.name.clone(),
        });
    }
    for t in &program.inputs {
        let mut at = s.axes.iter();
        if !t.axes.iter().all(|a| at.any(|b| b == a)) {
            return Err(Unsupported::ScanLayout {
                tensor: t.name.clone(),
            });
        }
    }
    let k = s.axes.iter().position(|&a| a == scan.dim).ok_or_else(|| {
        Unsupported::Malformed(format!("`{}` scans along no axis of its own", s.name))
    })?;
    Ok(Shape::Scan(ScanShape {
        program: program.clone(),
        scan: *scan,
        items: s.axes.iter().copied().filter(|&a| a != scan.dim).collect(),
        inner: s.axes[k + 1..].to_vec(),
    }))
}

/// The distinct gathers of `p`'s statements whose index is an input, as (where, index input), in order of
/// appearance: the only gathers [`classify`] lets through, each loaded once per row.
pub(crate) fn gathers(p: &Program) -> Vec<(Gather, usize)> {
    fn walk(e: &Expr, out: &mut Vec<(Gather, usize)>) {
        match e {
            Expr::Gather(g, index) => {
                if let Expr::Input(k) = **index
                    && !out.contains(&(*g, k))
                {
                    out.push((*g, k));
                }
                walk(index, out);
            }
            Expr::Reduce(_, _, a) | Expr::Unary(_, a) | Expr::Scan(_, a) => walk(a, out),
            Expr::Binary(_, a, b) => {
                walk(a, out);
                walk(b, out);
            }
            Expr::Select(c, a, b) => {
                walk(c, out);
                walk(a, out);
                walk(b, out);
            }
            Expr::Const(_) | Expr::Param(_) | Expr::Input(_) | Expr::Value(_) => {}
        }
    }
    let mut out = Vec::new();
    for s in &p.stmts {
        walk(&s.expr, &mut out);
    }
    out
}

/// Whether `e` holds a gather.
pub(crate) fn has_gather(e: &Expr) -> bool {
    match e {
        Expr::Gather(..) => true,
        Expr::Reduce(_, _, a) | Expr::Unary(_, a) | Expr::Scan(_, a) => has_gather(a),
        Expr::Binary(_, a, b) => has_gather(a) || has_gather(b),
        Expr::Select(c, a, b) => has_gather(c) || has_gather(a) || has_gather(b),
        Expr::Const(_) | Expr::Param(_) | Expr::Input(_) | Expr::Value(_) => false,
    }
}

/// Checks that every gather of the row program `rows` (the shape's program, or its tail's rows) is one value
/// per row: in a statement without reduced axes that is not a reduction, reading an integer input without
/// reduced axes, from a floating input whose other axes are not reduced.
fn row_gathers(rows: &Program, shape: &RowShape) -> Result<(), Unsupported> {
    fn per_row(p: &Program, e: &Expr, reduced: &[usize]) -> bool {
        let row_axes = |axes: &[usize]| !axes.iter().any(|d| reduced.contains(d));
        match e {
            Expr::Gather(g, index) => {
                let Some(x) = p.inputs.get(g.input) else {
                    return false;
                };
                let others: Vec<usize> = x
                    .axes
                    .iter()
                    .enumerate()
                    .filter(|&(a, _)| a != g.axis)
                    .map(|(_, &d)| d)
                    .collect();
                let index_ok = matches!(**index, Expr::Input(k)
                    if p.inputs.get(k).is_some_and(|t| matches!(t.elem, Elem::I64 | Elem::I32) && row_axes(&t.axes)));
                x.elem == Elem::Float && g.axis < x.axes.len() && row_axes(&others) && index_ok
            }
            Expr::Reduce(_, _, a) | Expr::Scan(_, a) => !has_gather(a),
            Expr::Unary(_, a) => per_row(p, a, reduced),
            Expr::Binary(_, a, b) => per_row(p, a, reduced) && per_row(p, b, reduced),
            Expr::Select(c, a, b) => {
                per_row(p, c, reduced) && per_row(p, a, reduced) && per_row(p, b, reduced)
            }
            Expr::Const(_) | Expr::Param(_) | Expr::Input(_) | Expr::Value(_) => true,
        }
    }
    for s in &rows.stmts {
        if !has_gather(&s.expr) {
            continue;
        }
        let row_level = !s.axes.iter().any(|d| shape.reduced.contains(d))
            && !matches!(s.expr, Expr::Reduce(..));
        if !row_level || !per_row(rows, &s.expr, &shape.reduced) {
            return Err(Unsupported::Gather {
                stmt: s.name.clone(),
            });
        }
    }
    Ok(())
}

/// Whether `e` holds a scan.
pub(crate) fn has_scan(e: &Expr) -> bool {
    match e {
        Expr::Scan(..) => true,
        Expr::Reduce(_, _, a) | Expr::Unary(_, a) | Expr::Gather(_, a) => has_scan(a),
        Expr::Binary(_, a, b) => has_scan(a) || has_scan(b),
        Expr::Select(c, a, b) => has_scan(c) || has_scan(a) || has_scan(b),
        Expr::Const(_) | Expr::Param(_) | Expr::Input(_) | Expr::Value(_) => false,
    }
}

fn classify_reduction(program: &Program) -> Result<Shape, Unsupported> {
    let lowered = lower(program)?;
    if let Some(shape) = rows_with_tail(&lowered)? {
        return Ok(shape);
    }
    classify_lowered(lowered)
}

/// A row program that ends by folding per-row values over every row ([`Tail`]), or `None` when `lowered` does
/// not end so or its rows' part is not a row program.
fn rows_with_tail(lowered: &Program) -> Result<Option<Shape>, Unsupported> {
    let Some((start, folded)) = tail_start(lowered) else {
        return Ok(None);
    };
    let mut rows = lowered.clone();
    for s in &mut rows.stmts[start..] {
        s.output = false;
        (s.axes, s.expr) = match &s.expr {
            Expr::Reduce(_, _, body) => (folded.clone(), (**body).clone()),
            _ => (Vec::new(), Expr::Const(0.0)),
        };
    }
    let Shape::Rows(r) = classify_lowered(rows)? else {
        return Ok(None);
    };
    let mut items = r.items.clone();
    items.sort_unstable();
    if items != folded {
        return Ok(None);
    }
    Ok(Some(Shape::Rows(RowShape {
        program: lowered.clone(),
        reduced: r.reduced,
        items: r.items,
        tail: Some(Tail {
            start,
            rows: r.program,
        }),
    })))
}

/// Where a [`Tail`] starts in `p` and the dimensions its folds reduce (sorted), if `p` ends with one: from its
/// first statement on, no statement has axes; each is either a fold (not an argmax or argmin: a position among
/// rows is not generated) of per-row values, per-row inputs and parameters over one set of dimensions, or a
/// function of earlier folds and parameters; before it, some reduction over other dimensions.
fn tail_start(p: &Program) -> Option<(usize, Vec<usize>)> {
    let start = p.stmts.iter().position(|s| {
        s.axes.is_empty() && matches!(&s.expr, Expr::Reduce(op, ..) if !op.is_arg())
    })?;
    let mut folded: Option<Vec<usize>> = None;
    for s in &p.stmts[start..] {
        if !s.axes.is_empty() {
            return None;
        }
        match &s.expr {
            Expr::Reduce(op, dims, body) => {
                let mut sorted = dims.clone();
                sorted.sort_unstable();
                if op.is_arg() || folded.as_ref().is_some_and(|f| *f != sorted) {
                    return None;
                }
                folded = Some(sorted);
                let per_row = |e: &Expr| match e {
                    Expr::Value(k) => *k < start,
                    _ => true,
                };
                if !super::emit::leaves_all(body, &per_row) {
                    return None;
                }
            }
            e => {
                let of_folds = |e: &Expr| matches!(e, Expr::Value(k) if *k >= start);
                if !super::emit::leaves_all(e, &of_folds) {
                    return None;
                }
            }
        }
    }
    let folded = folded?;
    let mut row_reductions = p.stmts[..start].iter().filter_map(|s| match &s.expr {
        Expr::Reduce(_, dims, _) => Some(dims),
        _ => None,
    });
    let first = row_reductions.next()?;
    let disjoint = |dims: &Vec<usize>| !dims.iter().any(|d| folded.contains(d));
    (disjoint(first) && row_reductions.all(disjoint)).then_some((start, folded))
}

/// [`classify_reduction`] of a program already lowered.
fn classify_lowered(lowered: Program) -> Result<Shape, Unsupported> {
    let program = &lowered;
    let name = |d: usize| program.dims[d].name.clone();
    // The reduced set: every reduction's, as a set.
    let mut set: Option<(Vec<usize>, &Stmt)> = None;
    for s in &lowered.stmts {
        if let Expr::Reduce(_, dims, _) = &s.expr {
            if dims.is_empty() {
                return Err(Unsupported::EmptyReduction {
                    stmt: s.name.clone(),
                });
            }
            let mut sorted = dims.clone();
            sorted.sort_unstable();
            sorted.dedup();
            match &set {
                None => set = Some((sorted, s)),
                Some((c, _)) if *c == sorted => {}
                Some((_, f)) => {
                    let dims_of = |s: &Stmt| match &s.expr {
                        Expr::Reduce(_, d, _) => d.iter().map(|&d| name(d)).collect(),
                        _ => Vec::new(),
                    };
                    return Err(Unsupported::MixedReductions {
                        first: dims_of(f),
                        other: dims_of(s),
                    });
                }
            }
        }
    }
    let Some((c_set, first_reduce)) = set else {
        return Err(Unsupported::Malformed(
            "a reduction vanished when lowered".into(),
        ));
    };
    let is_c = |d: usize| c_set.contains(&d);
    let items_set: Vec<usize> = (0..program.dims.len()).filter(|&d| !is_c(d)).collect();
    // No kept dimension, or reduced axes apart in some tensor: a tree across blocks, once the checks below pass.
    let mut tree = items_set.is_empty();

    // The reduced axes of every tensor that has any: all of them, adjacent, in one order.
    let tensors: Vec<&[usize]> = lowered
        .inputs
        .iter()
        .map(|t| t.axes.as_slice())
        .chain(lowered.stmts.iter().map(|s| s.axes.as_slice()))
        .collect();
    let mut canonical: Option<Vec<usize>> = None;
    let mut inner: Vec<usize> = Vec::new();
    for axes in &tensors {
        let Some(start) = axes.iter().position(|&d| is_c(d)) else {
            continue;
        };
        let run = &axes[start..(start + c_set.len()).min(axes.len())];
        if run.len() != c_set.len()
            || !run.iter().all(|&d| is_c(d))
            || axes[start + run.len()..].iter().any(|&d| is_c(d))
        {
            tree = true;
            continue;
        }
        match &canonical {
            None => canonical = Some(run.to_vec()),
            Some(c) if c.as_slice() == run => {}
            Some(_) => tree = true,
        }
        for &d in &axes[start + run.len()..] {
            if !inner.contains(&d) {
                inner.push(d);
            }
        }
    }
    let reduced = match canonical {
        Some(c) => c,
        None => match &first_reduce.expr {
            Expr::Reduce(_, dims, _) => dims.clone(),
            _ => c_set.clone(),
        },
    };
    for s in &lowered.stmts {
        if let Expr::Reduce(op, dims, _) = &s.expr
            && op.is_arg()
        {
            if tree {
                return Err(Unsupported::TreeArg {
                    stmt: s.name.clone(),
                });
            }
            if *dims != reduced {
                return Err(Unsupported::ArgOrder {
                    stmt: s.name.clone(),
                });
            }
        }
    }

    // Every output is indexed by every dimension that is not reduced: else many items would write it.
    for (_, o) in lowered.outputs() {
        if let Some(&d) = items_set.iter().find(|d| !o.axes.contains(d)) {
            return Err(Unsupported::OutputLacksDim {
                output: o.name.clone(),
                dim: name(d),
            });
        }
    }

    // The inputs with reduced axes: one of them must have every other dimension any of them has, else the
    // reduction pairs elements of two independent index spaces (a contraction).
    let c_inputs: Vec<(&str, Vec<usize>)> = lowered
        .inputs
        .iter()
        .filter(|t| t.axes.iter().any(|&d| is_c(d)))
        .map(|t| {
            (
                t.name.as_str(),
                t.axes.iter().copied().filter(|&d| !is_c(d)).collect(),
            )
        })
        .collect();
    let dominant = c_inputs
        .iter()
        .find(|(_, outer)| {
            c_inputs
                .iter()
                .all(|(_, o)| o.iter().all(|d| outer.contains(d)))
        })
        .cloned();
    if dominant.is_none() {
        // Name two tensors that are not nested.
        for (a, oa) in &c_inputs {
            for (b, ob) in &c_inputs {
                if oa.iter().any(|d| !ob.contains(d)) && ob.iter().any(|d| !oa.contains(d)) {
                    return Err(Unsupported::Contraction {
                        a: (*a).to_string(),
                        b: (*b).to_string(),
                    });
                }
            }
        }
    }
    // Item order: the largest input's, so consecutive items are adjacent in the tensor that moves most bytes;
    // the dimensions it lacks go outermost, in program order.
    let anchor: Vec<usize> = match &dominant {
        Some((_, outer)) => outer.clone(),
        None => lowered
            .outputs()
            .next()
            .map(|(_, o)| o.axes.iter().copied().filter(|&d| !is_c(d)).collect())
            .unwrap_or_default(),
    };
    let mut items: Vec<usize> = items_set
        .iter()
        .copied()
        .filter(|d| !anchor.contains(d))
        .collect();
    items.extend(anchor);
    if tree {
        return tree_shape(lowered, &c_set, items);
    }
    if inner.is_empty() {
        Ok(Shape::Rows(RowShape {
            program: lowered,
            reduced,
            items,
            tail: None,
        }))
    } else {
        Ok(Shape::Columns(ColumnShape {
            program: lowered,
            reduced,
            items,
            inner,
        }))
    }
}

/// The tree shape of `lowered`, reducing `c_set` and keeping `items`: the reduced dimensions in the order of
/// the input with most of them, and the longest run of the last ones that every tensor having any of them ends
/// with (the contiguous inner run the kernel reads in chunks).
fn tree_shape(lowered: Program, c_set: &[usize], items: Vec<usize>) -> Result<Shape, Unsupported> {
    let is_c = |d: &usize| c_set.contains(d);
    let widest = lowered
        .inputs
        .iter()
        .max_by_key(|t| {
            (
                t.axes.iter().filter(|d| is_c(d)).count(),
                std::cmp::Reverse(t.axes.len()),
            )
        })
        .map(|t| t.axes.as_slice())
        .unwrap_or(&[]);
    let mut reduced: Vec<usize> = widest.iter().copied().filter(|d| is_c(d)).collect();
    for &d in c_set {
        if !reduced.contains(&d) {
            reduced.push(d);
        }
    }
    let tensors: Vec<(&str, &[usize])> = lowered
        .inputs
        .iter()
        .map(|t| (t.name.as_str(), t.axes.as_slice()))
        .chain(
            lowered
                .stmts
                .iter()
                .map(|s| (s.name.as_str(), s.axes.as_slice())),
        )
        .collect();
    // The first tensor that breaks a run, to name when none holds.
    let mut breaker = "";
    let inner = (1..=reduced.len()).rev().find(|&k| {
        let run = &reduced[reduced.len() - k..];
        tensors.iter().all(|(name, axes)| {
            let ok = !axes.iter().any(|d| run.contains(d)) || axes.ends_with(run);
            if !ok {
                breaker = name;
            }
            ok
        })
    });
    let split = |tensor: &str| Unsupported::SplitReducedAxes {
        tensor: tensor.to_string(),
    };
    let Some(inner) = inner else {
        return Err(split(breaker));
    };
    // A statement with reduced dimensions is evaluated per element of the walk: it must have the inner ones.
    let run = &reduced[reduced.len() - inner..];
    if let Some(s) = lowered
        .stmts
        .iter()
        .find(|s| s.axes.iter().any(is_c) && !s.axes.ends_with(run))
    {
        return Err(split(&s.name));
    }
    Ok(Shape::Tree(TreeShape {
        reduced,
        inner,
        items,
        program: lowered,
    }))
}

/// The program with every reduction that is not the whole expression of its statement (or that rebinds one of
/// the statement's axes) moved into a statement of its own, inserted just before (named `<statement>#<n>`, not an
/// output, with the statement's axes less the reduced ones), and read back through [`Expr::Value`]. `y[r, c] = x[r, c] / sum(c) x[r, c]` becomes
/// `y#0[r] = sum(c) x[r, c]; y[r, c] = x[r, c] / y#0[r]`. A reduction inside another's body moves out the same
/// way, with the variables bound around it as its axes less its own: `y = mean(r) sqrt(sum(c) x[r, c]^2)`
/// becomes `y#0[r] = sum(c) x[r, c]^2; y = mean(r) sqrt(y#0[r])`.
///
/// # Errors
/// [`Unsupported::NestedReduction`] when a statement holds a scan inside an expression or a reduction.
pub fn lower(program: &Program) -> Result<Program, Unsupported> {
    let mut stmts: Vec<Stmt> = Vec::with_capacity(program.stmts.len());
    let mut map = vec![0usize; program.stmts.len()];
    for (i, s) in program.stmts.iter().enumerate() {
        let nested = || Unsupported::NestedReduction {
            stmt: s.name.clone(),
        };
        let expr = match &s.expr {
            Expr::Reduce(op, dims, body) if !dims.iter().any(|d| s.axes.contains(d)) => {
                let mut hoisted = 0;
                let scope = bind(&s.axes, dims);
                let body = hoist(body, s, &scope, &map, &mut stmts, &mut hoisted)
                    .map_err(|()| nested())?;
                Expr::Reduce(*op, dims.clone(), Box::new(body))
            }
            Expr::Reduce(op, ..) if op.is_arg() => {
                return Err(Unsupported::ArgBroadcast {
                    stmt: s.name.clone(),
                });
            }
            e => {
                let mut hoisted = 0;
                hoist(e, s, &s.axes, &map, &mut stmts, &mut hoisted).map_err(|()| nested())?
            }
        };
        map[i] = stmts.len();
        stmts.push(Stmt { expr, ..s.clone() });
    }
    Ok(Program {
        stmts,
        ..program.clone()
    })
}

/// `axes` then the `dims` it lacks: the variables bound inside a reduction over `dims` at a point where `axes`
/// are bound.
fn bind(axes: &[usize], dims: &[usize]) -> Vec<usize> {
    let mut scope = axes.to_vec();
    scope.extend(dims.iter().filter(|d| !axes.contains(d)));
    scope
}

/// `e` (in statement `s`, where the variables `scope` are bound) with each reduction moved into a statement of
/// its own, innermost first.
fn hoist(
    e: &Expr,
    s: &Stmt,
    scope: &[usize],
    map: &[usize],
    stmts: &mut Vec<Stmt>,
    hoisted: &mut usize,
) -> Result<Expr, ()> {
    let mut go = |e: &Expr| hoist(e, s, scope, map, stmts, hoisted).map(Box::new);
    Ok(match e {
        Expr::Reduce(op, dims, body) => {
            let body = hoist(body, s, &bind(scope, dims), map, stmts, hoisted)?;
            let name = format!("{}#{}", s.name, *hoisted);
            *hoisted += 1;
            stmts.push(Stmt {
                name,
                // The variables bound here but those the reduction rebinds: its value is one per row.
                axes: scope
                    .iter()
                    .copied()
                    .filter(|d| !dims.contains(d))
                    .collect(),
                expr: Expr::Reduce(*op, dims.clone(), Box::new(body)),
                elem: if op.is_arg() { Elem::I64 } else { Elem::Float },
                output: false,
            });
            Expr::Value(stmts.len() - 1)
        }
        Expr::Unary(op, a) => Expr::Unary(*op, go(a)?),
        Expr::Binary(op, a, b) => {
            let a = go(a)?;
            Expr::Binary(*op, a, go(b)?)
        }
        Expr::Select(c, a, b) => {
            let c = go(c)?;
            let a = go(a)?;
            Expr::Select(c, a, go(b)?)
        }
        Expr::Value(j) => Expr::Value(map[*j]),
        Expr::Gather(g, index) => Expr::Gather(*g, go(index)?),
        // `classify` sends scans to their own shape before anything is lowered.
        Expr::Scan(..) => return Err(()),
        Expr::Const(_) | Expr::Param(_) | Expr::Input(_) => e.clone(),
    })
}

/// Whether `e` holds a reduction.
pub(crate) fn has_reduce(e: &Expr) -> bool {
    match e {
        Expr::Reduce(..) | Expr::Scan(..) => true,
        Expr::Unary(_, a) | Expr::Gather(_, a) => has_reduce(a),
        Expr::Binary(_, a, b) => has_reduce(a) || has_reduce(b),
        Expr::Select(c, a, b) => has_reduce(c) || has_reduce(a) || has_reduce(b),
        Expr::Const(_) | Expr::Param(_) | Expr::Input(_) | Expr::Value(_) => false,
    }
}

/// The rules of the IR the generators rely on, checked again so that a malformed program is refused, never
/// turned into a kernel that reads a variable nobody defined.
fn check(p: &Program) -> Result<(), Unsupported> {
    let bad = |why: String| Err(Unsupported::Malformed(why));
    let nd = p.dims.len();
    for t in &p.inputs {
        if t.axes.iter().any(|&d| d >= nd) {
            return bad(format!("input `{}` has an axis out of range", t.name));
        }
    }
    for (i, s) in p.stmts.iter().enumerate() {
        if s.axes.iter().any(|&d| d >= nd) {
            return bad(format!("`{}` has an axis out of range", s.name));
        }
        let mut distinct = s.axes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() != s.axes.len() {
            return bad(format!("`{}` repeats an axis", s.name));
        }
        if matches!(s.expr, Expr::Reduce(op, ..) if op.is_arg()) == (s.elem == Elem::Float) {
            return bad(format!(
                "`{}`: integer statements are exactly the argmax / argmin ones",
                s.name
            ));
        }
        check_expr(p, i, &s.expr, &s.axes)?;
    }
    Ok(())
}

/// Every tensor `e` reads (at statement `i` with variables `scope` bound) is indexed by variables in scope. A reduction may rebind an axis of its statement (`y[r, c] = x[r, c] / sum(c) x[r, c]`):
/// inside its body the variable is the reduction's.
fn check_expr(p: &Program, i: usize, e: &Expr, scope: &[usize]) -> Result<(), Unsupported> {
    let s = &p.stmts[i].name;
    let bad = |why: String| Err(Unsupported::Malformed(format!("`{s}`: {why}")));
    match e {
        Expr::Const(v) if v.is_nan() => bad("a NaN constant".into()),
        Expr::Const(_) => Ok(()),
        Expr::Param(k) if *k >= p.params.len() => bad("a parameter out of range".into()),
        Expr::Param(_) => Ok(()),
        Expr::Input(k) => match p.inputs.get(*k) {
            None => bad("an input out of range".into()),
            Some(t) if t.axes.iter().all(|d| scope.contains(d)) => Ok(()),
            Some(t) => bad(format!("`{}` is read with a variable out of scope", t.name)),
        },
        Expr::Value(j) => match p.stmts.get(*j) {
            Some(t) if *j < i && t.axes.iter().all(|d| scope.contains(d)) => Ok(()),
            Some(t) if *j < i => bad(format!("`{}` is read with a variable out of scope", t.name)),
            _ => bad("reads a statement that is not computed before it".into()),
        },
        Expr::Unary(_, a) => check_expr(p, i, a, scope),
        Expr::Gather(g, index) => match p.inputs.get(g.input) {
            Some(t) if g.axis >= t.axes.len() => {
                bad(format!("`{}` gathered along no axis", t.name))
            }
            Some(t)
                if t.axes
                    .iter()
                    .enumerate()
                    .all(|(a, d)| a == g.axis || scope.contains(d)) =>
            {
                check_expr(p, i, index, scope)
            }
            Some(t) => bad(format!(
                "`{}` is gathered with a variable out of scope",
                t.name
            )),
            None => bad("a gather from an input out of range".into()),
        },
        Expr::Binary(_, a, b) => {
            check_expr(p, i, a, scope)?;
            check_expr(p, i, b, scope)
        }
        Expr::Select(c, a, b) => {
            check_expr(p, i, c, scope)?;
            check_expr(p, i, a, scope)?;
            check_expr(p, i, b, scope)
        }
        Expr::Reduce(op, dims, body) => {
            let mut distinct = dims.clone();
            distinct.sort_unstable();
            distinct.dedup();
            if distinct.len() != dims.len() || dims.iter().any(|d| *d >= p.dims.len()) {
                return bad("a reduction over a repeated or unknown dimension".into());
            }
            if op.is_arg() && !std::ptr::eq(e, &p.stmts[i].expr) {
                return bad("an argmax / argmin that is not the whole expression".into());
            }
            let mut inner = scope.to_vec();
            for d in dims {
                if !inner.contains(d) {
                    inner.push(*d);
                }
            }
            check_expr(p, i, body, &inner)
        }
        Expr::Scan(scan, body) => {
            if !std::ptr::eq(e, &p.stmts[i].expr) {
                return bad("a scan that is not the whole expression".into());
            }
            if !p.stmts[i].axes.contains(&scan.dim) {
                return bad("a scan along a dimension that is not an axis of its statement".into());
            }
            check_expr(p, i, body, scope)
        }
    }
}

/// Whether `op` needs at least one element (its value over nothing is undefined).
pub(crate) fn needs_elements(op: Reduce) -> bool {
    !matches!(op, Reduce::Sum | Reduce::Prod)
}
