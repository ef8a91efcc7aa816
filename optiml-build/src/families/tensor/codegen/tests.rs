//! Classification of hand-built programs, the catalogs' reach, and (with NVRTC) compiles of generated kernels.

use super::*;
use crate::search::Tunable;
use optiml_spec::program::{Binary, DimDecl, Elem, Expr, Reduce, Stmt, TensorDecl, Unary};
use optiml_spec::{DType, Dim};

// ---------------------------------------------------------------- program builders

fn dims(names: &[&str]) -> Vec<DimDecl> {
    names
        .iter()
        .map(|n| DimDecl {
            name: (*n).to_string(),
            size: Dim::Runtime,
        })
        .collect()
}

fn input(name: &str, axes: &[usize]) -> TensorDecl {
    TensorDecl {
        name: name.into(),
        axes: axes.to_vec(),
        elem: Elem::Float,
    }
}

fn stmt(name: &str, axes: &[usize], expr: Expr) -> Stmt {
    Stmt {
        name: name.into(),
        axes: axes.to_vec(),
        expr,
        elem: Elem::Float,
        output: false,
    }
}

fn out(name: &str, axes: &[usize], expr: Expr) -> Stmt {
    Stmt {
        output: true,
        ..stmt(name, axes, expr)
    }
}

fn arg_out(name: &str, axes: &[usize], expr: Expr) -> Stmt {
    Stmt {
        elem: Elem::I64,
        ..out(name, axes, expr)
    }
}

fn x(k: usize) -> Expr {
    Expr::Input(k)
}
fn v(j: usize) -> Expr {
    Expr::Value(j)
}
fn k(c: f64) -> Expr {
    Expr::Const(c)
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

fn program(
    dim_names: &[&str],
    inputs: Vec<TensorDecl>,
    params: &[&str],
    stmts: Vec<Stmt>,
    dtype: DType,
) -> Program {
    Program {
        dims: dims(dim_names),
        inputs,
        params: params.iter().map(|p| (*p).to_string()).collect(),
        stmts,
        dtype,
        precision: optiml_spec::Precision::Exact,
    }
}

// ---------------------------------------------------------------- the test programs

/// `y[i] = max(x[i], 0)`.
fn relu(dtype: DType) -> Program {
    program(
        &["i"],
        vec![input("x", &[0])],
        &[],
        vec![out("y", &[0], bin(Binary::Max, x(0), k(0.0)))],
        dtype,
    )
}

/// `y[i] = where(x[i] > 0, x[i], 0.01 * x[i])`.
fn leaky_relu(dtype: DType) -> Program {
    program(
        &["i"],
        vec![input("x", &[0])],
        &[],
        vec![out(
            "y",
            &[0],
            Expr::Select(
                Box::new(bin(Binary::Gt, x(0), k(0.0))),
                Box::new(x(0)),
                Box::new(mul(k(0.01), x(0))),
            ),
        )],
        dtype,
    )
}

/// `u = 0.7978845608 * (x + 0.044715 x³); y = 0.5 x (1 + tanh u)` over a 2-D tensor.
fn gelu_tanh(dtype: DType) -> Program {
    let cube = mul(mul(x(0), x(0)), x(0));
    program(
        &["r", "c"],
        vec![input("x", &[0, 1])],
        &[],
        vec![
            stmt(
                "u",
                &[0, 1],
                mul(k(0.7978845608028654), add(x(0), mul(k(0.044715), cube))),
            ),
            out(
                "y",
                &[0, 1],
                mul(mul(k(0.5), x(0)), add(k(1.0), un(Unary::Tanh, v(0)))),
            ),
        ],
        dtype,
    )
}

/// `y[i, j] = a[i] * b[i, j] + s`.
fn broadcast_mul(dtype: DType) -> Program {
    program(
        &["i", "j"],
        vec![input("a", &[0]), input("b", &[0, 1])],
        &["s"],
        vec![out("y", &[0, 1], add(mul(x(0), x(1)), Expr::Param(0)))],
        dtype,
    )
}

/// `y[i, j] = x[j, i] + bias[j]`: a transposing read and a broadcast along the outer axis.
fn transpose_bias(dtype: DType) -> Program {
    program(
        &["i", "j"],
        vec![input("x", &[1, 0]), input("bias", &[1])],
        &[],
        vec![out("y", &[0, 1], add(x(0), x(1)))],
        dtype,
    )
}

/// Softmax over the last axis, in three statements.
fn softmax(dtype: DType) -> Program {
    program(
        &["r", "c"],
        vec![input("x", &[0, 1])],
        &[],
        vec![
            stmt("m", &[0], red(Reduce::Max, &[1], x(0))),
            stmt("e", &[0, 1], un(Unary::Exp, sub(x(0), v(0)))),
            out("y", &[0, 1], div(v(1), red(Reduce::Sum, &[1], v(1)))),
        ],
        dtype,
    )
}

/// Log-softmax over the last axis.
fn log_softmax(dtype: DType) -> Program {
    program(
        &["r", "c"],
        vec![input("x", &[0, 1])],
        &[],
        vec![
            stmt("m", &[0], red(Reduce::Max, &[1], x(0))),
            stmt(
                "s",
                &[0],
                red(Reduce::Sum, &[1], un(Unary::Exp, sub(x(0), v(0)))),
            ),
            out("y", &[0, 1], sub(sub(x(0), v(0)), un(Unary::Log, v(1)))),
        ],
        dtype,
    )
}

/// Layer norm over the last axis with an affine weight and bias.
fn layer_norm(dtype: DType) -> Program {
    let centred = || sub(x(0), v(0));
    program(
        &["r", "c"],
        vec![input("x", &[0, 1]), input("w", &[1]), input("b", &[1])],
        &[],
        vec![
            stmt("mu", &[0], red(Reduce::Mean, &[1], x(0))),
            stmt(
                "var",
                &[0],
                red(Reduce::Mean, &[1], mul(centred(), centred())),
            ),
            stmt("rstd", &[0], un(Unary::Rsqrt, add(v(1), k(1e-5)))),
            out("y", &[0, 1], add(mul(mul(centred(), v(2)), x(1)), x(2))),
        ],
        dtype,
    )
}

/// RMS norm over the last axis of a 3-D tensor, weight `w[c]`, also writing the per-row `rstd`.
fn rms_norm(dtype: DType) -> Program {
    program(
        &["b", "t", "c"],
        vec![input("x", &[0, 1, 2]), input("w", &[2])],
        &["eps"],
        vec![
            out(
                "rstd",
                &[0, 1],
                un(
                    Unary::Rsqrt,
                    add(red(Reduce::Mean, &[2], mul(x(0), x(0))), Expr::Param(0)),
                ),
            ),
            out("y", &[0, 1, 2], mul(mul(x(0), v(0)), x(1))),
        ],
        dtype,
    )
}

/// RMS norm over the channels of `x[b, c, h, w]`, gain `g[c]`.
fn rms_norm_channels(dtype: DType) -> Program {
    program(
        &["b", "c", "h", "w"],
        vec![input("x", &[0, 1, 2, 3]), input("g", &[1])],
        &[],
        vec![
            stmt("ms", &[0, 2, 3], red(Reduce::Mean, &[1], mul(x(0), x(0)))),
            out(
                "y",
                &[0, 1, 2, 3],
                mul(mul(x(0), un(Unary::Rsqrt, add(v(0), k(1e-6)))), x(1)),
            ),
        ],
        dtype,
    )
}

/// Sum, mean, max and argmax of `x[b, j, k]` over `axis` (1: columns; 2: rows).
fn stats(axis: usize, dtype: DType) -> Program {
    let kept: Vec<usize> = (0..3).filter(|&d| d != axis).collect();
    program(
        &["b", "j", "k"],
        vec![input("x", &[0, 1, 2])],
        &[],
        vec![
            out("sum", &kept, red(Reduce::Sum, &[axis], x(0))),
            out("mean", &kept, red(Reduce::Mean, &[axis], x(0))),
            out("max", &kept, red(Reduce::Max, &[axis], x(0))),
            arg_out("argmax", &kept, red(Reduce::Argmax, &[axis], x(0))),
        ],
        dtype,
    )
}

/// Batch norm in training mode over `x[n, c, h]`: statistics over `n` and `h`, around the kept `c`, with an
/// affine weight and bias per channel.
fn batch_norm(dtype: DType) -> Program {
    let centred = || sub(x(0), v(0));
    program(
        &["n", "c", "h"],
        vec![input("x", &[0, 1, 2]), input("w", &[1]), input("b", &[1])],
        &[],
        vec![
            stmt("m", &[1], red(Reduce::Mean, &[0, 2], x(0))),
            stmt(
                "var",
                &[1],
                red(Reduce::Mean, &[0, 2], mul(centred(), centred())),
            ),
            out(
                "y",
                &[0, 1, 2],
                add(
                    mul(div(centred(), un(Unary::Sqrt, add(v(1), k(1e-5)))), x(1)),
                    x(2),
                ),
            ),
        ],
        dtype,
    )
}

/// `y = x / ‖x‖` over a 2-D tensor: a sum of every element, then a map.
fn frobenius(dtype: DType) -> Program {
    program(
        &["i", "j"],
        vec![input("x", &[0, 1])],
        &[],
        vec![
            stmt(
                "norm",
                &[],
                un(Unary::Sqrt, red(Reduce::Sum, &[0, 1], mul(x(0), x(0)))),
            ),
            out("y", &[0, 1], div(x(0), v(0))),
        ],
        dtype,
    )
}

/// A loss: the mean squared difference of two tensors, and their largest difference, as two scalars.
fn mse(dtype: DType) -> Program {
    let d = || sub(x(0), x(1));
    program(
        &["i", "j"],
        vec![input("a", &[0, 1]), input("b", &[0, 1])],
        &[],
        vec![
            out("mse", &[], red(Reduce::Mean, &[0, 1], mul(d(), d()))),
            out("dmax", &[], red(Reduce::Max, &[0, 1], un(Unary::Abs, d()))),
        ],
        dtype,
    )
}

/// Every supported test program, with its expected class.
fn supported() -> Vec<(&'static str, Program, &'static str)> {
    let mut out = Vec::new();
    for dtype in [DType::F32, DType::Bf16] {
        let d = if dtype == DType::F32 { "" } else { " bf16" };
        let _ = d;
        out.extend([
            ("relu", relu(dtype), "pointwise"),
            ("leaky relu", leaky_relu(dtype), "pointwise"),
            ("gelu tanh", gelu_tanh(dtype), "pointwise"),
            ("broadcast mul", broadcast_mul(dtype), "pointwise"),
            ("transpose bias", transpose_bias(dtype), "pointwise"),
            ("softmax", softmax(dtype), "rows"),
            ("log softmax", log_softmax(dtype), "rows"),
            ("layer norm", layer_norm(dtype), "rows"),
            ("rms norm", rms_norm(dtype), "rows"),
            ("rms norm channels", rms_norm_channels(dtype), "columns"),
            ("stats dim 1", stats(1, dtype), "columns"),
            ("stats last", stats(2, dtype), "rows"),
            ("batch norm", batch_norm(dtype), "tree"),
            ("frobenius", frobenius(dtype), "tree"),
            ("mse", mse(dtype), "tree"),
        ]);
    }
    out.push(("relu f16", relu(DType::F16), "pointwise"));
    out.push(("softmax f16", softmax(DType::F16), "rows"));
    for (name, text, dtype) in SCANS {
        out.push((*name, parsed(text, *dtype), "scan"));
    }
    for (name, text, dtype) in TAILS {
        out.push((*name, parsed(text, *dtype), "rows"));
    }
    out
}

/// Row programs that fold their per-row values over the rows: losses over a batch, several folds at once.
const TAILS: &[(&str, &str, DType)] = &[
    (
        "kl batchmean",
        "d[r] = sum(c) t[r, c] * (log(t[r, c]) - log(p[r, c])); y = mean(r) d[r]",
        DType::F32,
    ),
    (
        "triplet margin",
        "dp[r] = sqrt(sum(c) (a[r, c] - p[r, c] + 1e-6)^2); \
         dn[r] = sqrt(sum(c) (a[r, c] - n[r, c] + 1e-6)^2); y = mean(r) max(dp[r] - dn[r] + 1, 0)",
        DType::F32,
    ),
    (
        "cross entropy",
        "m[r] = max(c) x[r, c]; y = mean(r) (m[r] + log(sum(c) exp(x[r, c] - m[r])) - x[r, t[r]]), i64 t",
        DType::F32,
    ),
    (
        "folds of a softmax's statistics",
        "m[r] = max(c) x[r, c]; s[r] = sum(c) exp(x[r, c] - m[r]); lo = min(r) m[r]; \
         y = sum(r) log(s[r]) * w[r] * 0.5 + lo; z = prod(r) m[r]",
        DType::Bf16,
    ),
];

/// Scans along the contiguous axis and along a strided one, each option once.
const SCANS: &[(&str, &str, DType)] = &[
    ("cumsum", "y[r, c] = cumsum(c) x[r, c]", DType::F32),
    (
        "masked reverse exclusive cumsum",
        "y[r, c] = cumsum(c, reverse, exclusive) x[r, c] * m[r, c], bool m",
        DType::F32,
    ),
    (
        "cumprod of a broadcast",
        "y[r, c] = cumprod(c) (x[r, c] * w[c] + s)",
        DType::Bf16,
    ),
    (
        "strided cummax",
        "y[a, b, k] = cummax(b, reverse) x[a, b, k]",
        DType::Bf16,
    ),
    (
        "strided exclusive cumsum",
        "y[a, b, k] = cumsum(b, exclusive) x[a, b, k] * m[a, b], bool m",
        DType::F32,
    ),
];

/// A program written in index notation, at `dtype`.
fn parsed(text: &str, dtype: DType) -> Program {
    let mut p =
        optiml_spec::program::notation::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    p.dtype = dtype;
    p
}

// ---------------------------------------------------------------- classification

#[test]
fn every_test_program_lands_in_its_class() {
    for (name, p, class) in supported() {
        let shape = classify(&p).unwrap_or_else(|e| panic!("{name} ({:?}): {e}", p.dtype));
        assert_eq!(shape.class(), class, "{name} ({:?})", p.dtype);
    }
}

#[test]
fn a_row_program_gathers_once_per_row_and_nowhere_else() {
    let p = parsed(TAILS[2].1, DType::F32);
    let Ok(Shape::Rows(shape)) = classify(&p) else {
        panic!("rows");
    };
    assert!(shape.tail.is_some());
    for (_, c) in Shape::Rows(shape).default_candidates(Arch::new(9, 0)) {
        // The row's target, bounds-checked: NaN outside the classes, as the interpreter reads it.
        assert!(
            c.source
                .contains("const long long gi_sg0_1_1 = (long long)in1[q0];"),
            "{}",
            c.source
        );
        assert!(
            c.source
                .contains("gi_sg0_1_1 < n1) ? IO::get(in0[q0 * (n1) + gi_sg0_1_1 * (1LL)])")
        );
        assert!(c.source.contains("const long long* in1"));
        assert!(!c.source.contains("si1"), "the index is no item input");
    }
    // Per element, in a pointwise program, or with the index read as a value: refused with the reason.
    for text in [
        "m[r] = max(c) x[r, c]; y[r, c] = x[r, c] - x[r, t[r]] + m[r], i64 t",
        "m[r] = max(c) x[r, c]; s[r] = sum(c) x[r, c] * x[r, t[r]], i64 t",
        "m[r] = max(c) x[r, c]; y[r] = x[r, t[r]] * t[r] + m[r], i64 t",
    ] {
        let e = unsupported(&parsed(text, DType::F32));
        assert!(
            matches!(
                e,
                Unsupported::Gather { .. } | Unsupported::IntegerInput { .. }
            ),
            "{text}: {e:?}"
        );
    }
    let plain = parsed("y[r, c] = x[r, c]; z[r] = x[r, t[r]], i64 t", DType::F32);
    assert!(matches!(unsupported(&plain), Unsupported::Gather { .. }));
}

#[test]
fn a_row_program_that_folds_its_rows_keeps_the_folds_for_a_second_launch() {
    let p = parsed(TAILS[3].1, DType::F32);
    let Ok(Shape::Rows(shape)) = classify(&p) else {
        panic!("rows");
    };
    let tail = shape.tail.as_ref().expect("a tail");
    // m, s, then the folds lo, y#0 (the sum, hoisted), y and z.
    let folds: Vec<(usize, Reduce)> = tail.folds(&shape.program).collect();
    assert_eq!(tail.start, 2);
    assert_eq!(
        folds,
        [(2, Reduce::Min), (3, Reduce::Sum), (5, Reduce::Prod)]
    );
    // The rows compute each fold's body per row and no tail output.
    let rows = shape.rows_program();
    assert_eq!(rows.stmts[3].axes, [0]);
    assert!(rows.stmts[2..].iter().all(|s| !s.output));
    let c = Shape::Rows(shape.clone()).default_candidates(Arch::new(9, 0));
    for (_, c) in &c {
        let optiml_runtime::Launch::Program(l) = c.launch else {
            panic!("a program launch");
        };
        let t = l.tree.expect("a tail runs in two launches");
        assert_eq!((t.passes, t.partials, t.blocks), (1, 3, 0));
        assert_eq!(l.cluster, 1, "{}", c.schedule);
        // No row may go missing from the folds: the rows' dimension must not be empty.
        assert_eq!(l.nonempty_mask & 1, 1);
        assert!(c.source.contains("ws[2LL * rows + row] = s5;"));
    }
    // Folds over a column program's items are not generated (yet): the reason names both reduced sets.
    let columns = parsed(
        "d[r, k] = sum(c) x[r, c, k]; y = mean(r, k) d[r, k]",
        DType::F32,
    );
    assert!(matches!(
        unsupported(&columns),
        Unsupported::MixedReductions { .. }
    ));
}

#[test]
fn pointwise_shapes_say_when_one_index_serves_all() {
    let flat = |p: &Program| match classify(p) {
        Ok(Shape::Pointwise(s)) => s.flat,
        other => panic!("{other:?}"),
    };
    assert!(flat(&relu(DType::F32)));
    assert!(flat(&gelu_tanh(DType::F32)));
    assert!(!flat(&broadcast_mul(DType::F32)));
    assert!(!flat(&transpose_bias(DType::F32)));
}

#[test]
fn reductions_inside_expressions_are_hoisted_into_statements() {
    let lowered = lower(&softmax(DType::F32)).expect("lowers");
    let names: Vec<&str> = lowered.stmts.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["m", "e", "y#0", "y"]);
    assert_eq!(
        lowered.stmts[2].expr,
        red(Reduce::Sum, &[1], v(1)),
        "the hoisted sum reads e"
    );
    assert_eq!(lowered.stmts[3].expr, div(v(1), v(2)));
    assert!(lowered.stmts[3].output && !lowered.stmts[2].output);
    // A reduction in another's body moves out with the outer variables as its axes, innermost first (the
    // notation parser does the same; this program is built directly).
    let d = || sub(x(0), x(1));
    let nested = program(
        &["r", "c"],
        vec![input("a", &[0, 1]), input("p", &[0, 1])],
        &[],
        vec![out(
            "y",
            &[],
            red(
                Reduce::Mean,
                &[0],
                un(Unary::Sqrt, red(Reduce::Sum, &[1], mul(d(), d()))),
            ),
        )],
        DType::F32,
    );
    let lowered = lower(&nested).expect("lowers");
    let names: Vec<(&str, &[usize])> = lowered
        .stmts
        .iter()
        .map(|s| (s.name.as_str(), s.axes.as_slice()))
        .collect();
    assert_eq!(names, [("y#0", &[0][..]), ("y", &[])]);
    assert_eq!(
        lowered.stmts[1].expr,
        red(Reduce::Mean, &[0], un(Unary::Sqrt, v(0)))
    );
    let Ok(Shape::Rows(shape)) = classify(&nested) else {
        panic!("a row program with a tail");
    };
    assert_eq!(shape.tail.map(|t| t.start), Some(1));
}

#[test]
fn roles_of_dimensions_follow_the_largest_tensor() {
    let Ok(Shape::Rows(r)) = classify(&rms_norm(DType::F32)) else {
        panic!("rows")
    };
    assert_eq!((r.reduced.clone(), r.items.clone()), (vec![2], vec![0, 1]));
    let Ok(Shape::Columns(c)) = classify(&rms_norm_channels(DType::F32)) else {
        panic!("columns")
    };
    assert_eq!(c.reduced, vec![1]);
    assert_eq!(c.items, vec![0, 2, 3]);
    assert_eq!(c.inner, vec![2, 3]);
}

#[test]
fn passes_share_independent_reductions() {
    let p = lower(&stats(2, DType::F32)).expect("lowers");
    let passes = plan::Passes::new(&p, &[2]);
    assert_eq!(passes.reductions, vec![vec![0, 1, 2, 3]], "one pass");
    assert!(passes.cached.is_empty(), "a single pass keeps nothing");
    let p = lower(&softmax(DType::F32)).expect("lowers");
    let passes = plan::Passes::new(&p, &[1]);
    assert_eq!(passes.reductions, vec![vec![0], vec![2]]);
    assert_eq!(passes.count(), 3, "max, sum, then the outputs");
    assert_eq!(passes.cached, vec![0]);
    let p = lower(&layer_norm(DType::F32)).expect("lowers");
    let passes = plan::Passes::new(&p, &[1]);
    assert_eq!(passes.reductions, vec![vec![0], vec![1]]);
    assert_eq!(passes.stages[2], vec![2], "rstd after the variance");
    assert_eq!(passes.cached, vec![0], "the weights do not vary per row");
}

#[test]
fn mean_and_variance_fuse_into_one_pass_only_where_the_variance_measures_from_that_mean() {
    // Layer norm: the variance of the mean's own body moves into the mean's pass; rstd follows it.
    let p = lower(&layer_norm(DType::F32)).expect("lowers");
    let mut passes = plan::Passes::new(&p, &[1]);
    passes.fuse_moments(&p);
    assert_eq!(passes.reductions, vec![vec![0, 1]]);
    assert_eq!(passes.moments, vec![(0, 1)]);
    assert_eq!(
        passes.stages,
        vec![vec![], vec![2]],
        "rstd after the one pass"
    );
    assert_eq!(passes.count(), 2, "statistics, then the outputs");
    assert_eq!(passes.moment_of(1), Some((0, 1)));
    // A spread around another value than the body's own mean stays a second pass: Σ (2x − mean x)².
    let other = program(
        &["r", "c"],
        vec![input("x", &[0, 1])],
        &[],
        vec![
            stmt("mu", &[0], red(Reduce::Mean, &[1], x(0))),
            out(
                "q",
                &[0],
                red(
                    Reduce::Sum,
                    &[1],
                    mul(sub(mul(k(2.0), x(0)), v(0)), sub(mul(k(2.0), x(0)), v(0))),
                ),
            ),
        ],
        DType::F32,
    );
    let p = lower(&other).expect("lowers");
    let mut passes = plan::Passes::new(&p, &[1]);
    passes.fuse_moments(&p);
    assert_eq!(passes.reductions, vec![vec![0], vec![1]]);
    assert!(passes.moments.is_empty());
    // Softmax's sum reads the max but is no spread: untouched.
    let p = lower(&softmax(DType::F32)).expect("lowers");
    let mut passes = plan::Passes::new(&p, &[1]);
    passes.fuse_moments(&p);
    assert_eq!(passes.reductions, vec![vec![0], vec![2]]);
}

#[test]
fn a_max_and_the_sum_it_shifts_fuse_into_one_online_pass() {
    // Softmax: the sum of e = exp(x − m) (an element statement) joins the max's pass; the outputs follow.
    let p = lower(&softmax(DType::F32)).expect("lowers");
    let mut passes = plan::Passes::new(&p, &[1]);
    passes.fuse_online(&p);
    assert_eq!(passes.reductions, vec![vec![0, 2]]);
    assert_eq!(passes.online, vec![(0, 2)]);
    assert_eq!(passes.online_in(0), vec![(0, 2)]);
    assert_eq!(passes.online_of(2), Some((0, 2)));
    assert_eq!(passes.count(), 2, "statistics, then the outputs");
    assert_eq!(passes.cached, vec![0], "both passes read x");
    assert!(
        !passes.need[0].elems.contains(&1),
        "exp(x − m) needs the finished max: not evaluated in the max's pass"
    );
    // Log-softmax: the exponential inline in the sum's body.
    let log = lower(&log_softmax(DType::F32)).expect("lowers");
    let mut passes = plan::Passes::new(&log, &[1]);
    passes.fuse_online(&log);
    assert_eq!(passes.count(), 2);
    assert_eq!(passes.online.len(), 1);
    // A shift by another value than the body's own max stays a second pass: Σ exp(2x − max x).
    let other = program(
        &["r", "c"],
        vec![input("x", &[0, 1])],
        &[],
        vec![
            stmt("m", &[0], red(Reduce::Max, &[1], x(0))),
            out(
                "s",
                &[0],
                red(
                    Reduce::Sum,
                    &[1],
                    un(Unary::Exp, sub(mul(k(2.0), x(0)), v(0))),
                ),
            ),
        ],
        DType::F32,
    );
    let p = lower(&other).expect("lowers");
    let mut passes = plan::Passes::new(&p, &[1]);
    passes.fuse_online(&p);
    assert_eq!(passes.reductions, vec![vec![0], vec![1]]);
    assert!(passes.online.is_empty());
}

fn unsupported(p: &Program) -> Unsupported {
    match classify(p) {
        Err(e) => {
            assert!(!e.to_string().is_empty());
            e
        }
        Ok(s) => panic!("classified as {}", s.class()),
    }
}

#[test]
fn unsupported_programs_say_why() {
    // A matmul: y[i, j] = sum(k) a[i, k] * b[k, j].
    let matmul = program(
        &["i", "j", "k"],
        vec![input("a", &[0, 2]), input("b", &[2, 1])],
        &[],
        vec![out("y", &[0, 1], red(Reduce::Sum, &[2], mul(x(0), x(1))))],
        DType::F32,
    );
    assert!(matches!(
        unsupported(&matmul),
        Unsupported::Contraction { .. }
    ));
    // Everything reduced to one value.
    let total = program(
        &["i"],
        vec![input("x", &[0])],
        &[],
        vec![out("y", &[], red(Reduce::Sum, &[0], x(0)))],
        DType::F32,
    );
    assert_eq!(classify(&total).map(|s| s.class()), Ok("tree"));
    // ... but not an argmax of everything.
    let total_arg = program(
        &["i"],
        vec![input("x", &[0])],
        &[],
        vec![arg_out("y", &[], red(Reduce::Argmax, &[0], x(0)))],
        DType::F32,
    );
    assert!(matches!(
        unsupported(&total_arg),
        Unsupported::TreeArg { .. }
    ));
    // Batch statistics over b and h of x[b, c, h]: a tree, walking h contiguously.
    let batch = program(
        &["b", "c", "h"],
        vec![input("x", &[0, 1, 2])],
        &[],
        vec![out("m", &[1], red(Reduce::Mean, &[0, 2], x(0)))],
        DType::F32,
    );
    let Ok(Shape::Tree(t)) = classify(&batch) else {
        panic!("tree")
    };
    assert_eq!(
        (t.outer_dims(), t.inner_dims(), &t.items[..]),
        (&[0][..], &[2][..], &[1][..])
    );
    // ... but not where no reduced axis ends every tensor that has it: x[b, c, h] and z[h, b].
    let crossed = program(
        &["b", "c", "h"],
        vec![input("x", &[0, 1, 2]), input("z", &[2, 0])],
        &[],
        vec![out("m", &[1], red(Reduce::Sum, &[0, 2], mul(x(0), x(1))))],
        DType::F32,
    );
    assert!(matches!(
        unsupported(&crossed),
        Unsupported::SplitReducedAxes { .. }
    ));
    // Two reduced sets.
    let mixed = program(
        &["r", "c"],
        vec![input("x", &[0, 1])],
        &[],
        vec![
            out("a", &[0], red(Reduce::Sum, &[1], x(0))),
            out("b", &[1], red(Reduce::Sum, &[0], x(0))),
        ],
        DType::F32,
    );
    assert!(matches!(
        unsupported(&mixed),
        Unsupported::MixedReductions { .. }
    ));
    // Pointwise outputs of two shapes.
    let shapes = program(
        &["i", "j"],
        vec![input("x", &[0, 1]), input("a", &[0])],
        &[],
        vec![out("y", &[0, 1], x(0)), out("z", &[0], x(1))],
        DType::F32,
    );
    assert!(matches!(
        unsupported(&shapes),
        Unsupported::OutputAxesDiffer { .. }
    ));
    // An output without an outer dimension.
    let lacks = program(
        &["b", "r", "c"],
        vec![input("x", &[0, 1, 2]), input("a", &[0])],
        &[],
        vec![
            stmt("s", &[0, 1], red(Reduce::Sum, &[2], x(0))),
            out("y", &[0], mul(x(1), k(2.0))),
            out("z", &[0, 1], v(0)),
        ],
        DType::F32,
    );
    assert!(matches!(
        unsupported(&lacks),
        Unsupported::OutputLacksDim { .. }
    ));
    // A reduction of a reduction over another dimension that keeps a dimension: two reduced sets.
    let nested = program(
        &["i", "j", "k"],
        vec![input("x", &[0, 1, 2])],
        &[],
        vec![out(
            "y",
            &[0],
            red(Reduce::Sum, &[1], red(Reduce::Max, &[2], x(0))),
        )],
        DType::F32,
    );
    assert!(matches!(
        unsupported(&nested),
        Unsupported::MixedReductions { .. }
    ));
    // An argmax listing its dimensions against memory order.
    let arg = program(
        &["b", "h", "w"],
        vec![input("x", &[0, 1, 2])],
        &[],
        vec![arg_out("i", &[0], red(Reduce::Argmax, &[2, 1], x(0)))],
        DType::F32,
    );
    assert!(matches!(unsupported(&arg), Unsupported::ArgOrder { .. }));
    // A variable out of scope.
    let bad = program(
        &["i", "j"],
        vec![input("x", &[0, 1])],
        &[],
        vec![out("y", &[0], x(0))],
        DType::F32,
    );
    assert!(matches!(unsupported(&bad), Unsupported::Malformed(_)));
    // Scans: among other statements, of a reduction, of a transposed input; a mask outside a scan.
    let f32 = DType::F32;
    assert!(matches!(
        unsupported(&parsed(
            "c[r, k] = cumsum(k) x[r, k]; y[r, k] = c[r, k] * 2",
            f32
        )),
        Unsupported::ScanNotAlone { .. }
    ));
    assert!(matches!(
        unsupported(&parsed(
            "y[r, k] = cumsum(k) (x[r, k] / sum(k) x[r, k])",
            f32
        )),
        Unsupported::ScanNotAlone { .. }
    ));
    let mut of_reduction = parsed("y[r, k] = cumsum(k) x[r, k]", f32);
    of_reduction.stmts[0].expr = Expr::Scan(
        match &of_reduction.stmts[0].expr {
            Expr::Scan(s, _) => *s,
            _ => unreachable!(),
        },
        Box::new(red(Reduce::Sum, &[1], x(0))),
    );
    assert!(matches!(
        unsupported(&of_reduction),
        Unsupported::ScanBody { .. } | Unsupported::Malformed(_)
    ));
    assert!(matches!(
        unsupported(&parsed("y[r, k] = cumsum(k) x[r, k] * t[k, r]", f32)),
        Unsupported::ScanLayout { .. }
    ));
    assert!(matches!(
        unsupported(&parsed("y[r, k] = x[r, k] * m[r, k], bool m", f32)),
        Unsupported::MaskInput { .. }
    ));
}

#[test]
fn scans_keep_the_scanned_axis_and_read_contiguous_lines_in_chunks() {
    let arch = Arch::new(9, 0);
    for (name, text, dtype) in SCANS {
        let Ok(Shape::Scan(shape)) = classify(&parsed(text, *dtype)) else {
            panic!("{name}")
        };
        let contiguous = shape.inner.is_empty();
        assert!(!shape.items.contains(&shape.scan.dim), "{name}");
        let c = ScanSchedule::for_scan(&shape, arch).candidate(&shape);
        // 16-byte chunks only along a contiguous axis; a mask is read as bytes.
        assert_eq!(c.source.contains("uint4"), contiguous, "{name}");
        assert_eq!(
            c.source.contains("const unsigned char* in1"),
            text.contains("bool m"),
            "{name}"
        );
        let s = ScanSchedule::for_scan(&shape, arch);
        assert!(s.is_valid(), "{name}");
        if contiguous {
            assert_eq!(s.row_threads, s.threads, "{name}");
        } else {
            assert_eq!(
                (s.row_threads, s.chunks * emit::vec_width(*dtype)),
                (1, 16),
                "{name}"
            );
        }
    }
}

#[test]
fn few_long_lines_take_a_split_scan_in_three_launches() {
    let arch = Arch::new(9, 0);
    let Ok(shape @ Shape::Scan(_)) = classify(&parsed(SCANS[1].1, SCANS[1].2)) else {
        panic!("scan")
    };
    let variants = shape.default_candidates(arch);
    let keys: Vec<[u64; 4]> = variants.iter().map(|(k, _)| k.expect("keyed")).collect();
    assert_eq!(keys, [[4096, 1, 4096, 1], [1, 1, 1 << 24, 1]]);
    let launch = |c: &Candidate| match c.launch {
        optiml_runtime::Launch::Program(l) => l,
        _ => panic!("program launch"),
    };
    // Many lines: one launch, a block per line.
    assert!(launch(&variants[0].1).tree.is_none());
    // Few long lines: slices of a block each; totals, their prefixes, then the scan.
    let split = launch(&variants[1].1);
    let t = split.tree.expect("a split scan");
    let s = ScanSchedule::for_long_lines(arch);
    assert!(s.is_valid());
    assert_eq!((t.passes, t.partials, t.blocks), (2, 1, s.blocks));
    assert_eq!(t.tile, s.threads * s.chunks * emit::vec_width(SCANS[1].2));
    assert!(
        variants[1]
            .1
            .source
            .contains("float* ws, int stage, long long slices)")
    );
    // A recorded schedule from before the split reads as a whole-line one.
    let old: ScanSchedule =
        serde_json::from_str(r#"{"threads":256,"row_threads":256,"chunks":1}"#).expect("reads");
    assert_eq!(old, ScanSchedule::default_for(arch));
}

// ---------------------------------------------------------------- catalogs

fn reaches_the_whole_space<S: Tunable>() {
    let catalog = S::catalog();
    let mut names: Vec<&str> = catalog.iter().map(|t| t.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), catalog.len(), "duplicate names");
    let root = S::default_for(Arch::new(9, 0));
    assert!(root.is_valid());
    let mut seen = std::collections::HashSet::from([root]);
    let mut frontier = vec![root];
    while let Some(s) = frontier.pop() {
        for t in &catalog {
            if let Some(next) = t.apply_to(&s) {
                assert!(next.is_valid(), "{} on {s:?}", t.name);
                if seen.insert(next) {
                    frontier.push(next);
                }
            }
        }
    }
    let all = S::space();
    let missing: Vec<&S> = all.iter().filter(|s| !seen.contains(s)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} unreached, e.g. {:?}",
        missing.len(),
        all.len(),
        missing.first()
    );
    assert_eq!(seen.len(), all.len(), "the catalog leaves the space");
}

#[test]
fn the_pointwise_catalog_reaches_every_schedule_from_the_default() {
    reaches_the_whole_space::<PointwiseSchedule>();
}

#[test]
fn the_row_catalog_reaches_every_schedule_from_the_default() {
    reaches_the_whole_space::<RowSchedule>();
}

#[test]
fn the_column_catalog_reaches_every_schedule_from_the_default() {
    reaches_the_whole_space::<ColumnSchedule>();
}

#[test]
fn the_tree_catalog_reaches_every_schedule_from_the_default() {
    reaches_the_whole_space::<TreeSchedule>();
}

#[test]
fn the_scan_catalog_reaches_every_schedule_from_the_default() {
    reaches_the_whole_space::<ScanSchedule>();
}

#[test]
fn a_tree_stores_one_partial_per_reduction_and_runs_once_per_pass_and_once_more() {
    let arch = Arch::new(9, 0);
    for (name, p, passes, partials) in [
        // Mean and variance in one pass: count, mean and squared distance.
        ("batch norm", batch_norm(DType::F32), 1, 3),
        ("frobenius", frobenius(DType::F32), 1, 1),
        ("mse", mse(DType::Bf16), 1, 2),
    ] {
        let c = classify(&p).expect("tree").default_candidate(arch);
        let optiml_runtime::Launch::Program(l) = c.launch else {
            panic!("{name}")
        };
        let t = l.tree.expect("a tree launch");
        assert_eq!((t.passes, t.partials), (passes, partials), "{name}");
        let s = TreeSchedule::default_for(arch);
        let vec = emit::vec_width(p.dtype);
        assert_eq!(t.tile, s.threads * s.unroll * vec, "{name}");
        assert!(c.source.contains("float* ws, int stage, long long slices)"));
    }
}

#[test]
fn recorded_schedules_name_their_kernel() {
    let arch = Arch::new(9, 0);
    let pw = serde_json::to_value(PointwiseSchedule::default_for(arch)).expect("json");
    let rows = serde_json::to_value(RowSchedule::default_for(arch)).expect("json");
    let cols = serde_json::to_value(ColumnSchedule::default_for(arch)).expect("json");
    let tree = serde_json::to_value(TreeSchedule::default_for(arch)).expect("json");
    for other in [&pw, &rows, &cols] {
        assert!(serde_json::from_value::<TreeSchedule>(other.clone()).is_err());
    }
    assert!(serde_json::from_value::<PointwiseSchedule>(tree.clone()).is_err());
    assert!(serde_json::from_value::<RowSchedule>(tree.clone()).is_err());
    assert!(serde_json::from_value::<ColumnSchedule>(tree).is_err());
    assert!(serde_json::from_value::<RowSchedule>(pw.clone()).is_err());
    assert!(serde_json::from_value::<ColumnSchedule>(pw.clone()).is_err());
    assert!(serde_json::from_value::<PointwiseSchedule>(rows.clone()).is_err());
    assert!(serde_json::from_value::<ColumnSchedule>(rows).is_err());
    assert!(serde_json::from_value::<PointwiseSchedule>(cols.clone()).is_err());
    assert!(serde_json::from_value::<RowSchedule>(cols).is_err());
}

// ---------------------------------------------------------------- candidates

#[test]
fn candidates_follow_the_abi() {
    let arch = Arch::new(9, 0);
    for (name, p, _) in supported() {
        let shape = classify(&p).expect("supported");
        let c = shape.default_candidate(arch);
        assert!(
            c.source.starts_with("// @generated by optiml-build"),
            "{name}"
        );
        assert_eq!(c.entry, ENTRY);
        assert!(c.source.contains("#include \"optiml/program.cuh\""));
        let optiml_runtime::Launch::Program(l) = c.launch else {
            panic!("{name}: {:?}", c.launch)
        };
        assert!(l.threads >= 32 && l.threads <= 1024 && l.items_per_block >= 1);
        assert_eq!(l.cluster, 1);
        // The parameter list: inputs, outputs, extents, parameters.
        let sig = c
            .source
            .lines()
            .find(|l| l.contains("optiml_program("))
            .expect("entry");
        let args = &sig[sig.find("optiml_program(").expect("entry")..];
        let n_args = args.matches(',').count() + 1;
        let outputs = p.outputs().count();
        // A tree's workspace, stage and slices follow.
        let tree = if l.tree.is_some() { 3 } else { 0 };
        let tail = matches!(&shape, Shape::Rows(r) if r.tail.is_some());
        assert_eq!(shape.class() == "tree" || tail, tree == 3, "{name}");
        assert_eq!(
            n_args,
            p.inputs.len() + outputs + p.dims.len() + p.params.len() + tree,
            "{name}: {sig}"
        );
        // Reductions that have no value over nothing forbid an empty reduced dimension.
        let needs_elements = shape.program().stmts.iter().any(
            |s| matches!(s.expr, Expr::Reduce(op, ..) if !matches!(op, Reduce::Sum | Reduce::Prod)),
        );
        assert_eq!(l.nonempty_mask != 0, needs_elements || tail, "{name}");
    }
}

// ---------------------------------------------------------------- NVRTC

pub(super) use crate::nvrtc::testing::assert_compiles;

#[test]
fn every_default_compiles_for_sm90_without_spills() {
    let arch = Arch::new(9, 0);
    let mut jobs = Vec::new();
    for (name, p, _) in supported() {
        let shape = classify(&p).expect("supported");
        let c = shape.default_candidate(arch);
        jobs.push((format!("{name} {:?}: {}", p.dtype, c.schedule), c.source));
        // Each row-length bucket's variant too (what a build compiles).
        for (key, c) in shape.default_candidates(arch) {
            jobs.push((
                format!("{name} {:?} {key:?}: {}", p.dtype, c.schedule),
                c.source,
            ));
        }
    }
    assert_compiles(jobs);
}

#[test]
fn long_rows_spread_over_a_cluster_on_sm90_only() {
    let Ok(Shape::Rows(shape)) = classify(&layer_norm(DType::F32)) else {
        panic!("rows")
    };
    // Layer norm reads its row three times (mean, variance, outputs). 393216 f32 = 1.5 MiB per row: no block
    // holds it; 8 blocks (192 KiB each) do.
    let s = RowSchedule::for_row(&shape, 393216, Arch::new(9, 0));
    assert_eq!(s.cluster, 8, "{}", s.describe());
    assert!(s.is_valid());
    let c = s.candidate(&shape);
    assert!(c.source.contains("__cluster_dims__(8, 1, 1)"));
    let optiml_runtime::Launch::Program(l) = c.launch else {
        panic!("program launch")
    };
    assert_eq!(l.cluster, 8);
    // Without clusters the row stays one block's, and a short row needs none.
    assert_eq!(
        RowSchedule::for_row(&shape, 393216, Arch::new(8, 0)).cluster,
        1
    );
    let short = RowSchedule::for_row(&shape, 2048, Arch::new(9, 0));
    assert_eq!(short.cluster, 1);
    assert!(!short.candidate(&shape).source.contains("cluster"));
    // A row that 8 blocks of 512 threads hold in registers (128 KiB each) goes to the smallest such cluster:
    // instance norm's rows of 262144 f32 (1 MiB) to 8.
    let s = RowSchedule::for_row(&shape, 262144, Arch::new(9, 0));
    assert_eq!(
        (s.cluster, s.row_threads, s.reg_chunks),
        (8, 512, 16),
        "{}",
        s.describe()
    );
    // A softmax reads its row twice (the online max and sum, then the outputs): rows of 65535 (256 KiB) keep a
    // block each; rows of 393216 (1.5 MiB) go over a cluster of 2 with 1024 threads.
    let Ok(Shape::Rows(softmax)) = classify(&softmax(DType::F32)) else {
        panic!("rows")
    };
    let s = RowSchedule::for_row(&softmax, 65535, Arch::new(9, 0));
    assert_eq!((s.cluster, s.row_threads), (1, 1024), "{}", s.describe());
    let s = RowSchedule::for_row(&softmax, 393216, Arch::new(9, 0));
    assert_eq!((s.cluster, s.row_threads), (2, 1024), "{}", s.describe());
    // One variant per row-length bucket, keyed on the length.
    let keys: Vec<u64> = Shape::Rows(shape)
        .default_candidates(Arch::new(9, 0))
        .iter()
        .map(|(k, _)| k.expect("keyed")[2])
        .collect();
    assert_eq!(keys, [256, 2048, 16384, 131072, 1 << 20, 1 << 23]);
}

/// Every scan schedule for the contiguous scan with the most code (a mask, reversed, exclusive), and each
/// group size at the chunk extremes for a strided 16-bit product of a broadcast.
#[test]
fn scan_schedules_compile_without_spills() {
    let mut jobs = Vec::new();
    let shape = |text: &str, dtype: DType| match classify(&parsed(text, dtype)) {
        Ok(Shape::Scan(s)) => s,
        other => panic!("{text}: {other:?}"),
    };
    let rows = shape(SCANS[1].1, SCANS[1].2);
    for s in ScanSchedule::space() {
        let c = s.candidate(&rows);
        jobs.push((format!("{}: {}", SCANS[1].0, c.schedule), c.source));
    }
    let strided = shape(
        "y[a, b, k] = cumprod(b, reverse) (x[a, b, k] * w[b] + s)",
        DType::Bf16,
    );
    for s in ScanSchedule::space() {
        if s.threads == 256 && s.chunks != 2 {
            let c = s.candidate(&strided);
            jobs.push((format!("strided cumprod: {}", c.schedule), c.source));
        }
    }
    assert_compiles(jobs);
}

/// Every pointwise schedule's source (the launch knobs share one) for a flat and a broadcasting program.
#[test]
fn every_pointwise_schedule_compiles_without_spills() {
    let mut jobs = Vec::new();
    for p in [relu(DType::F32), broadcast_mul(DType::Bf16)] {
        let Ok(Shape::Pointwise(shape)) = classify(&p) else {
            panic!("pointwise")
        };
        for s in PointwiseSchedule::space() {
            let c = s.candidate(&shape);
            jobs.push((format!("{:?} {}", p.dtype, c.schedule), c.source));
        }
    }
    assert_compiles(jobs);
}

/// Row schedules that together take every cache size with every thread geometry, and every shared-memory level
/// and unroll depth (spread over the geometries), for an f32 program with a cached input and a 16-bit program with
/// weights (the heaviest in registers). The whole space is `every_row_schedule_compiles` (ignored: minutes).
fn covering_rows() -> Vec<RowSchedule> {
    let mut out = Vec::new();
    let mut i = 0usize;
    let all = RowSchedule::space();
    let mut geometries: Vec<(u32, u32)> = all
        .iter()
        .map(|s| (s.row_threads, s.rows_per_block))
        .collect();
    geometries.dedup();
    geometries.sort_unstable();
    geometries.dedup();
    for (row_threads, rows_per_block) in geometries {
        for reg_chunks in [0, 1, 2, 4, 8, 16, 32] {
            let smem_kib = [0, 24, 46, 100, 220][i % 5];
            // Every third with shared memory loads the next row during its last pass, on a persistent grid.
            let prefetch = smem_kib > 0 && i % 3 == 1;
            let s = RowSchedule {
                row_threads,
                rows_per_block,
                reg_chunks,
                smem_kib,
                unroll: [1, 2, 4, 8][i % 4],
                blocks_per_sm: prefetch as u32,
                cluster: if rows_per_block == 1 {
                    [1, 2, 4, 8][i % 4]
                } else {
                    1
                },
                l2: i.is_multiple_of(3) as u32,
                prefetch,
            };
            if s.is_valid() {
                out.push(s);
                i += 1;
            }
        }
    }
    out
}

#[test]
fn covering_row_schedules_compile_without_spills() {
    let mut jobs = Vec::new();
    // The covering schedules alternate between the f32 and the 16-bit program, so each compiles once and the
    // two together take every knob value (keeps the test near half a minute on two cores).
    for (p, first) in [(softmax(DType::F32), 0), (layer_norm(DType::Bf16), 1)] {
        let Ok(Shape::Rows(shape)) = classify(&p) else {
            panic!("rows")
        };
        for s in covering_rows().into_iter().skip(first).step_by(2) {
            let c = s.candidate(&shape);
            jobs.push((format!("{:?} {}", p.dtype, c.schedule), c.source));
        }
    }
    assert_compiles(jobs);
}

#[test]
#[ignore]
fn every_row_schedule_compiles() {
    let Ok(Shape::Rows(shape)) = classify(&softmax(DType::F32)) else {
        panic!("rows")
    };
    let jobs = RowSchedule::space()
        .into_iter()
        .map(|s| {
            let c = s.candidate(&shape);
            (c.schedule, c.source)
        })
        .collect();
    assert_compiles(jobs);
}

/// Tree schedules in both block orders, at the default and the largest block with the most loads in flight,
/// for batch statistics and for a layer norm's long rows (the tree whose weight the items share).
#[test]
fn tree_schedules_in_both_orders_compile_without_spills() {
    let hopper = Arch::new(9, 0);
    let Ok(Shape::Tree(batch)) = classify(&batch_norm(DType::F32)) else {
        panic!("tree")
    };
    let Ok(Shape::Rows(ln)) = classify(&layer_norm(DType::Bf16)) else {
        panic!("rows")
    };
    let ln = TreeShape::for_long_rows(&ln, 1 << 23, hopper).expect("a tree");
    let mut jobs = Vec::new();
    for shape in [&batch, &ln] {
        for base in [
            TreeSchedule::default_for(hopper),
            TreeSchedule {
                threads: 1024,
                unroll: 8,
                blocks: 1056,
                interleave: false,
            },
        ] {
            for interleave in [false, true] {
                let s = TreeSchedule { interleave, ..base };
                assert!(s.is_valid(), "{}", s.describe());
                let c = s.candidate(shape);
                assert_eq!(
                    c.source.contains("blockIdx.x / G"),
                    interleave,
                    "{}",
                    c.schedule
                );
                jobs.push((
                    format!("{:?} {}", shape.program.dtype, c.schedule),
                    c.source,
                ));
            }
        }
    }
    assert_compiles(jobs);
}

/// Column schedules: every thread geometry (threads, split), the cache sizes and unroll depths spread over them.
#[test]
fn covering_column_schedules_compile_without_spills() {
    let mut jobs = Vec::new();
    for p in [rms_norm_channels(DType::Bf16), stats(1, DType::F32)] {
        let Ok(Shape::Columns(shape)) = classify(&p) else {
            panic!("columns")
        };
        let mut i = 0usize;
        for s in ColumnSchedule::space() {
            if s.blocks_per_sm != 0 || s.unroll != [1, 2, 4, 8][i % 4] {
                continue;
            }
            if s.cache != [0, 4, 8, 16, 32][(i / 4) % 5] {
                continue;
            }
            i += 1;
            let c = s.candidate(&shape);
            jobs.push((format!("{:?} {}", p.dtype, c.schedule), c.source));
        }
    }
    assert_compiles(jobs);
}

#[test]
fn long_rows_whose_statistics_fuse_take_a_tree() {
    let rows = |p: Program| match classify(&p) {
        Ok(Shape::Rows(s)) => s,
        other => panic!("{other:?}"),
    };
    let (hopper, ampere) = (Arch::new(9, 0), Arch::new(8, 0));
    let ln = rows(layer_norm(DType::F32));
    // 8M elements: past a cluster's share, and mean and variance fuse: a tree of one row per item.
    let t = TreeShape::for_long_rows(&ln, 1 << 23, hopper).expect("a tree");
    assert_eq!((t.inner, &t.items[..]), (1, &[0][..]));
    // Rows a cluster keeps close stay the row kernel's, unless there are no clusters.
    assert!(TreeShape::for_long_rows(&ln, 1 << 17, hopper).is_none());
    assert!(TreeShape::for_long_rows(&ln, 1 << 17, ampere).is_some());
    // Softmax fuses its max and sum online, which the row kernel does too: the row kernel at every length.
    let sm = rows(softmax(DType::F32));
    assert!(TreeShape::for_long_rows(&sm, 1 << 23, hopper).is_none());
    // The build's variants follow.
    let classes: Vec<bool> = Shape::Rows(ln)
        .default_candidates(hopper)
        .iter()
        .map(|(_, c)| c.source.contains("tree kernel"))
        .collect();
    assert_eq!(classes, [false, false, false, false, true, true]);
}

#[test]
fn squares_and_cubes_are_multiplications_other_powers_powf() {
    let source = |e: f64| {
        let p = program(
            &["i"],
            vec![input("x", &[0])],
            &[],
            vec![out("y", &[0], bin(Binary::Pow, x(0), k(e)))],
            DType::F32,
        );
        classify(&p)
            .expect("pointwise")
            .default_candidate(Arch::new(9, 0))
            .source
    };
    assert!(!source(2.0).contains("powf("));
    assert!(!source(3.0).contains("powf("));
    assert!(source(2.5).contains("powf("));
}

#[test]
fn maps_heavy_in_arithmetic_default_to_two_chunks_per_thread() {
    let arch = Arch::new(9, 0);
    let own = |p: Program| match classify(&p) {
        Ok(Shape::Pointwise(s)) => PointwiseSchedule::for_program(&s, arch),
        other => panic!("{other:?}"),
    };
    let base = PointwiseSchedule::default_for(arch);
    assert_eq!(own(relu(DType::F32)), base);
    assert_eq!(own(broadcast_mul(DType::F32)), base);
    let heavy = own(gelu_tanh(DType::F32));
    assert_eq!(heavy.unroll, 2 * base.unroll);
    assert!(heavy.is_valid());
    // A division counts too.
    let softsign = program(
        &["i"],
        vec![input("x", &[0])],
        &[],
        vec![out("y", &[0], div(x(0), add(k(1.0), un(Unary::Abs, x(0)))))],
        DType::F32,
    );
    assert_eq!(own(softsign), heavy);
}

/// The ring: a softmax whose rows a cluster's shared memory holds loads each block's next row into the slots its
/// last pass has just read and stored from, and the next row's first pass waits for those copies instead of
/// loading. It needs shared memory and a grid that loops over rows; without the knob there is no code for it.
#[test]
fn held_rows_load_the_next_row_during_the_last_pass() {
    let ring = RowSchedule {
        row_threads: 512,
        rows_per_block: 1,
        reg_chunks: 0,
        smem_kib: 220,
        unroll: 4,
        blocks_per_sm: 1,
        cluster: 8,
        l2: 0,
        prefetch: true,
    };
    assert!(ring.is_valid(), "{}", ring.describe());
    assert!(
        ring.describe()
            .ends_with(", cluster 8, next row prefetched")
    );
    // Shared memory and a grid that loops over rows are what it needs.
    assert!(
        !RowSchedule {
            smem_kib: 0,
            ..ring
        }
        .is_valid()
    );
    assert!(
        !RowSchedule {
            blocks_per_sm: 0,
            ..ring
        }
        .is_valid()
    );
    // A persistent cluster grid is the clusters resident at once: one "block per SM" level only.
    assert!(
        !RowSchedule {
            blocks_per_sm: 2,
            prefetch: false,
            ..ring
        }
        .is_valid()
    );
    let Ok(Shape::Rows(shape)) = classify(&softmax(DType::F32)) else {
        panic!("rows")
    };
    let source = ring.candidate(&shape).source;
    for needle in [
        "bool pf = false;",
        "const long long nstep = (long long)optiml_p::cluster_count();",
        "if (pf) optiml_p::cp_async_wait_all();",
        "t0[u] = pf ? sm0[",
        "if (!pf && (",
        "if (pfn) {",
        "optiml_p::ld_async_rel<IO>(&sm0[",
        "pf = pfn;",
    ] {
        assert!(source.contains(needle), "{needle}\n{source}");
    }
    // The first pass's loads of the held part are the only ones that may read the copies; the last pass
    // refills only on the aligned path (once per row body).
    assert_eq!(
        source.matches("optiml_p::ld_async_rel").count(),
        1,
        "{source}"
    );
    let plain = RowSchedule {
        prefetch: false,
        ..ring
    }
    .candidate(&shape)
    .source;
    assert!(
        !plain.contains("ld_async_rel") && !plain.contains("bool pf") && !plain.contains("pfn")
    );
    // The search's "same kernel": the ring is its own; over a program that reads each row once (row
    // statistics in one pass) the ask changes nothing, and launches as the schedule without it.
    assert_eq!(ring.launched(&shape), ring);
    let Ok(Shape::Rows(once)) = classify(&stats(2, DType::F32)) else {
        panic!("rows")
    };
    assert_eq!(
        ring.launched(&once),
        RowSchedule {
            prefetch: false,
            ..ring
        }
    );
    assert!(!ring.candidate(&once).source.contains("ld_async_rel"));
    // Both kinds compile without spills, f32 and 16-bit, with register chunks too.
    let Ok(Shape::Rows(ln)) = classify(&layer_norm(DType::Bf16)) else {
        panic!("rows")
    };
    let mut jobs = Vec::new();
    for (shape, s) in [
        (&shape, ring),
        (&ln, ring),
        (
            &ln,
            RowSchedule {
                row_threads: 1024,
                reg_chunks: 4,
                cluster: 2,
                ..ring
            },
        ),
        (
            &shape,
            RowSchedule {
                row_threads: 256,
                reg_chunks: 4,
                smem_kib: 100,
                cluster: 1,
                blocks_per_sm: 2,
                ..ring
            },
        ),
    ] {
        assert!(s.is_valid(), "{}", s.describe());
        let c = s.candidate(shape);
        assert!(c.source.contains("ld_async_rel"), "{}", c.schedule);
        jobs.push((c.schedule, c.source));
    }
    assert_compiles(jobs);
}

/// A program of per-row values only (a row's variance about its mean: two passes, no element output) refills
/// the slots in its last reduction pass: a ring that waited for copies nobody started would read the row before.
/// Every ring root of every target program that asks the next row starts it.
#[test]
fn per_row_values_only_refill_in_their_last_reduction_pass() {
    let centred = || sub(x(0), v(0));
    let variance = program(
        &["r", "c"],
        vec![input("x", &[0, 1])],
        &[],
        vec![
            stmt("mu", &[0], red(Reduce::Mean, &[1], x(0))),
            out(
                "var",
                &[0],
                red(Reduce::Mean, &[1], mul(centred(), centred())),
            ),
        ],
        DType::F32,
    );
    let Ok(Shape::Rows(shape)) = classify(&variance) else {
        panic!("rows")
    };
    let hopper = Arch::new(9, 0);
    let rings = RowSchedule::rings(&shape, 393_216, hopper);
    assert!(!rings.is_empty());
    let mut jobs = Vec::new();
    for r in rings {
        let c = r.candidate(&shape);
        assert!(c.source.contains("pf = pfn;"), "{}", c.source);
        assert_eq!(
            c.source.matches("optiml_p::ld_async_rel").count(),
            1,
            "{}",
            c.source
        );
        jobs.push((c.schedule, c.source));
    }
    assert_compiles(jobs);
    for (name, p, _) in supported() {
        let Ok(Shape::Rows(shape)) = classify(&p) else {
            continue;
        };
        for len in [65_535, 393_216, 1 << 20] {
            for r in RowSchedule::rings(&shape, len, hopper) {
                let source = r.candidate(&shape).source;
                assert_eq!(
                    source.contains("pfn"),
                    source.contains("optiml_p::ld_async_rel"),
                    "{name} {}",
                    r.describe()
                );
            }
        }
    }
}

/// The ring roots a row search adds: the smallest cluster whose shared memory holds the row (KernelBench 23's
/// softmax rows of 393216 f32 need 8 blocks, rows of 65535 two), none where the default already holds the row
/// in registers, and none before sm_90 for rows one block cannot hold.
#[test]
fn the_ring_roots_hold_the_row_in_the_smallest_cluster() {
    let hopper = Arch::new(9, 0);
    let Ok(Shape::Rows(shape)) = classify(&softmax(DType::F32)) else {
        panic!("rows")
    };
    let rings = RowSchedule::rings(&shape, 393_216, hopper);
    assert_eq!(rings.len(), 2, "{rings:?}");
    for r in &rings {
        assert!(r.is_valid() && r.prefetch && r.blocks_per_sm == 1, "{r:?}");
        assert_eq!((r.cluster, r.smem_kib, r.reg_chunks), (8, 220, 0));
        assert!(r.candidate(&shape).source.contains("ld_async_rel"));
    }
    assert_eq!(
        RowSchedule::rings(&shape, 65_535, hopper)
            .iter()
            .map(|r| (r.cluster, r.row_threads))
            .collect::<Vec<_>>(),
        [(2, 512), (2, 1024)]
    );
    assert!(RowSchedule::rings(&shape, 4096, hopper).is_empty());
    assert!(RowSchedule::rings(&shape, 393_216, Arch::new(8, 0)).is_empty());
    // Before sm_90 a ring asks no more shared memory than a block may opt into (163 KiB on sm_80, 99 on sm_86).
    for (arch, kib) in [(Arch::new(8, 0), 100), (Arch::new(8, 6), 46)] {
        for r in RowSchedule::rings(&shape, 16_384, arch) {
            assert_eq!((r.cluster, r.smem_kib), (1, kib), "{arch} {}", r.describe());
        }
    }
}
