//! The matmul family's TESTPLAN: its problem size, the shapes every candidate must get right, and the float64
//! reference of one element.

use crate::eval::{Comparison, TestPlan, Tolerance};
use optiml_spec::{Dim, MatmulSpec};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A matmul problem size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MatmulShape {
    /// Independent products.
    pub batch: usize,
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// Reduction length.
    pub k: usize,
}

impl MatmulShape {
    /// The shape of a plan's size `[batch, m, n, k]`.
    pub fn from_dims(dims: &[usize]) -> Option<Self> {
        match *dims {
            [batch, m, n, k] => Some(MatmulShape { batch, m, n, k }),
            _ => None,
        }
    }

    /// `[batch, m, n, k]`, as plans and targets hold sizes.
    pub fn dims(&self) -> Vec<usize> {
        vec![self.batch, self.m, self.n, self.k]
    }

    /// FLOPs of the product (2·batch·m·n·k).
    pub fn flops(&self) -> f64 {
        2.0 * self.batch as f64 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// The fewest DRAM bytes the problem can move: A and B read once, C written once (and read with beta).
    pub fn min_bytes(&self, spec: &MatmulSpec) -> f64 {
        self.min_bytes_of(spec, 4.0)
    }

    /// [`min_bytes`](Self::min_bytes) for A, B and C of `elem_bytes`-byte elements (the bias is f32).
    pub fn min_bytes_of(&self, spec: &MatmulSpec, elem_bytes: f64) -> f64 {
        let (b, m, n, k) = (
            self.batch as f64,
            self.m as f64,
            self.n as f64,
            self.k as f64,
        );
        let c = if spec.beta { 2.0 } else { 1.0 };
        let items = |shared: bool| if shared { 1.0 } else { b };
        elem_bytes * (items(spec.shared_a) * m * k + items(spec.shared_b) * k * n + b * c * m * n)
            + if spec.bias { 4.0 * n } else { 0.0 }
    }

    /// Elements of A and B over the whole batch (a shared operand holds one matrix).
    pub fn operand_lens(&self, spec: &MatmulSpec) -> (usize, usize) {
        let (pa, pb, _) = self.per_item();
        let items = |shared: bool| if shared { 1 } else { self.batch };
        (items(spec.shared_a) * pa, items(spec.shared_b) * pb)
    }

    /// Where batch item `item` of A and of B starts (a shared operand's one matrix for every item).
    pub fn operand_offsets(&self, spec: &MatmulSpec, item: usize) -> (usize, usize) {
        let (pa, pb, _) = self.per_item();
        let at = |shared: bool, len: usize| if shared { 0 } else { item * len };
        (at(spec.shared_a, pa), at(spec.shared_b, pb))
    }

    /// Fixed dimensions of `spec` replace this shape's.
    pub fn fit(self, spec: &MatmulSpec) -> Self {
        let pick = |d: Dim, v: usize| match d {
            Dim::Fixed(f) => f as usize,
            Dim::Runtime => v,
        };
        MatmulShape {
            batch: if spec.batched {
                pick(spec.batch, self.batch)
            } else {
                1
            },
            m: pick(spec.m, self.m),
            n: pick(spec.n, self.n),
            k: pick(spec.k, self.k),
        }
    }

    /// Elements of one operand: (A, B, C) per batch item.
    pub fn per_item(&self) -> (usize, usize, usize) {
        (self.m * self.k, self.k * self.n, self.m * self.n)
    }
}

impl fmt::Display for MatmulShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}x{}", self.batch, self.m, self.n, self.k)
    }
}

/// The default plan for `spec`: shapes that are multiples of no tile size, a one-element product, an empty
/// reduction, a tall, a wide and two deep ones, a
/// matrix-vector and a vector-matrix product; fixed dimensions of the spec are kept. `extra` shapes (the
/// user's) are appended.
pub fn test_plan(spec: &MatmulSpec, extra: &[MatmulShape]) -> TestPlan {
    let base = [
        MatmulShape {
            batch: 1,
            m: 1,
            n: 1,
            k: 1,
        },
        MatmulShape {
            batch: 2,
            m: 127,
            n: 129,
            k: 65,
        },
        MatmulShape {
            batch: 3,
            m: 130,
            n: 67,
            k: 257,
        },
        MatmulShape {
            batch: 1,
            m: 67,
            n: 200,
            k: 0,
        },
        MatmulShape {
            batch: 2,
            m: 257,
            n: 33,
            k: 31,
        },
        MatmulShape {
            batch: 1,
            m: 5,
            n: 300,
            k: 513,
        },
        // Matrix times vector and vector times matrix: the launcher's bandwidth kernel.
        MatmulShape {
            batch: 3,
            m: 300,
            n: 1,
            k: 257,
        },
        MatmulShape {
            batch: 2,
            m: 1,
            n: 129,
            k: 515,
        },
        // Long enough for every split-K factor the launcher uses (ranges of 128 and more).
        MatmulShape {
            batch: 2,
            m: 33,
            n: 65,
            k: 4099,
        },
    ];
    // A triangular product's tiles meet the diagonal in every way on square matrices: a diagonal through tile
    // corners, through tile middles, and tiles wholly on either side.
    let square = [
        MatmulShape {
            batch: 2,
            m: 256,
            n: 256,
            k: 256,
        },
        MatmulShape {
            batch: 1,
            m: 301,
            n: 301,
            k: 301,
        },
    ];
    let square = if spec.triangle.is_some() {
        &square[..]
    } else {
        &[]
    };
    let mut shapes: Vec<MatmulShape> = Vec::new();
    for s in base.iter().chain(square).chain(extra).map(|s| s.fit(spec)) {
        if !shapes.contains(&s) && s.flops() <= 2e9 {
            shapes.push(s);
        }
    }
    TestPlan::new(
        shapes.iter().map(MatmulShape::dims).collect(),
        Tolerance::for_precision(spec.precision),
    )
}

/// Host copies of one batch item's operands.
#[derive(Clone, Debug)]
pub struct Operands<'a> {
    /// A as stored.
    pub a: &'a [f32],
    /// B as stored.
    pub b: &'a [f32],
    /// C before the call (read only with beta).
    pub c0: &'a [f32],
    /// The bias (length n) when the spec has one.
    pub bias: Option<&'a [f32]>,
}

/// op(A) rows and op(B) columns of one batch item, gathered contiguous for the reference's dot products: a
/// column of a row-major B is a stride-n walk, one cache miss per term on large matrices (measured: 0.8 s per
/// candidate at 4096³ before gathering).
pub struct Gathered {
    rows: Vec<Vec<f32>>,
    cols: Vec<Vec<f32>>,
}

impl Gathered {
    /// Gathers rows `rows` of op(A) and columns `cols` of op(B).
    pub fn new(
        spec: &MatmulSpec,
        shape: &MatmulShape,
        ops: &Operands<'_>,
        rows: &[usize],
        cols: &[usize],
    ) -> Self {
        let (m, n, k) = (shape.m, shape.n, shape.k);
        let mut g = Gathered {
            rows: vec![Vec::new(); m],
            cols: vec![Vec::new(); n],
        };
        // A triangular product reads only its operands' triangle: the rest counts as zero, whatever it holds.
        let read_a = |i: usize, p: usize| spec.triangle.is_none_or(|t| !t.outside(i, p));
        let read_b = |p: usize, j: usize| spec.triangle.is_none_or(|t| !t.outside(p, j));
        for &i in rows {
            g.rows[i] = (0..k)
                .map(|p| {
                    if !read_a(i, p) {
                        0.0
                    } else if spec.trans_a {
                        ops.a[p * m + i]
                    } else {
                        ops.a[i * k + p]
                    }
                })
                .collect();
        }
        for &j in cols {
            g.cols[j] = (0..k)
                .map(|p| {
                    if !read_b(p, j) {
                        0.0
                    } else if spec.trans_b {
                        ops.b[j * k + p]
                    } else {
                        ops.b[p * n + j]
                    }
                })
                .collect();
        }
        g
    }

    /// The float64 reference of element (i, j) (a gathered row and column), and the magnitude bound its error
    /// scales with.
    #[allow(clippy::too_many_arguments)]
    pub fn reference(
        &self,
        spec: &MatmulSpec,
        shape: &MatmulShape,
        ops: &Operands<'_>,
        alpha: f32,
        beta: f32,
        i: usize,
        j: usize,
    ) -> (f64, f64) {
        let (mut acc, mut mag) = (0.0f64, 0.0f64);
        for (&a, &b) in self.rows[i].iter().zip(&self.cols[j]) {
            let t = a as f64 * b as f64;
            acc += t;
            mag += t.abs();
        }
        let c0 = if spec.beta {
            ops.c0[i * shape.n + j]
        } else {
            0.0
        };
        epilogue(spec, alpha, beta, acc, mag, c0, ops.bias.map(|b| b[j]))
    }
}

/// The float64 reference of one element from its product `acc` and the product's magnitude bound `mag`
/// (Σ|terms|): `act(alpha · acc + beta · c0 + bias)`, with the bound grown by each added term's magnitude. The
/// host reference and the GPU one (`reference.rs`, whose failing element is re-derived here) share it.
pub fn epilogue(
    spec: &MatmulSpec,
    alpha: f32,
    beta: f32,
    acc: f64,
    mag: f64,
    c0: f32,
    bias: Option<f32>,
) -> (f64, f64) {
    let alpha = if spec.alpha { alpha as f64 } else { 1.0 };
    let mut v = alpha * acc;
    let mut mag = mag * alpha.abs();
    if spec.beta {
        let c = beta as f64 * c0 as f64;
        v += c;
        mag += c.abs();
    }
    if let Some(bias) = bias {
        v += bias as f64;
        mag += (bias as f64).abs();
    }
    let v = spec.activation.map_or(v, |act| act.apply(v));
    (v, mag)
}

/// Checks every element of one batch item's output.
///
/// # Errors
/// The first wrong element, or the relative error over the item.
#[allow(clippy::too_many_arguments)]
pub fn check_item(
    spec: &MatmulSpec,
    shape: &MatmulShape,
    tol: &Tolerance,
    ops: &Operands<'_>,
    alpha: f32,
    beta: f32,
    out: &[f32],
    item: usize,
) -> Result<usize, String> {
    compare_item(spec, shape, tol, ops, alpha, beta, out, item).finish(tol)
}

/// Every element of one batch item's output compared with the float64 reference under `tol`: the comparison,
/// with its first failure (if any) and its measured errors.
#[allow(clippy::too_many_arguments)]
pub fn compare_item(
    spec: &MatmulSpec,
    shape: &MatmulShape,
    tol: &Tolerance,
    ops: &Operands<'_>,
    alpha: f32,
    beta: f32,
    out: &[f32],
    item: usize,
) -> Comparison {
    let mut cmp = Comparison::default();
    let all_rows: Vec<usize> = (0..shape.m).collect();
    let all_cols: Vec<usize> = (0..shape.n).collect();
    let g = Gathered::new(spec, shape, ops, &all_rows, &all_cols);
    for i in 0..shape.m {
        for j in 0..shape.n {
            let at = || format!("C[{item}][{i}][{j}]");
            if spec.triangle.is_some_and(|t| t.outside(i, j)) {
                cmp.check_zero(&at, out[i * shape.n + j]);
                continue;
            }
            let (r, mag) = g.reference(spec, shape, ops, alpha, beta, i, j);
            cmp.check(tol, &at, out[i * shape.n + j], r, mag);
        }
    }
    cmp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::Tolerance;
    use optiml_spec::parse;

    fn spec(text: &str) -> MatmulSpec {
        match parse(text).unwrap().family {
            optiml_spec::Family::Matmul(m) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_shared_operand_is_one_matrix_at_offset_zero_for_every_item() {
        let shape = MatmulShape {
            batch: 3,
            m: 4,
            n: 5,
            k: 6,
        };
        let packed = spec("bmm");
        assert_eq!(shape.operand_lens(&packed), (72, 90));
        assert_eq!(shape.operand_offsets(&packed, 2), (48, 60));
        let shared_b = spec("batched matmul, B shared");
        assert_eq!(shape.operand_lens(&shared_b), (72, 30));
        assert_eq!(shape.operand_offsets(&shared_b, 2), (48, 0));
        let shared_a = spec("bmm, shared A");
        assert_eq!(shape.operand_lens(&shared_a), (24, 90));
        assert_eq!(shape.operand_offsets(&shared_a, 2), (0, 60));
        // The shared operand is read once, not once per item.
        assert_eq!(
            shape.min_bytes(&packed) - shape.min_bytes(&shared_b),
            4.0 * 2.0 * 30.0
        );
    }

    #[test]
    fn default_plan_keeps_fixed_dimensions_and_covers_odd_and_empty_shapes() {
        let shapes = |p: TestPlan| -> Vec<MatmulShape> {
            p.sizes
                .iter()
                .map(|d| MatmulShape::from_dims(d).unwrap())
                .collect()
        };
        let p = shapes(test_plan(&spec("batched matmul, f32"), &[]));
        assert!(p.iter().any(|s| s.k == 0));
        assert!(p.iter().any(|s| s.m % 2 == 1 && s.n % 2 == 1));
        let fixed = shapes(test_plan(&spec("matmul, f32, k=64, n=32"), &[]));
        assert!(fixed.iter().all(|s| s.k == 64 && s.n == 32 && s.batch == 1));
        // Fixing dimensions merges shapes that became equal.
        let all_fixed = shapes(test_plan(&spec("matmul, f32, m=8, n=8, k=8"), &[]));
        assert_eq!(all_fixed.len(), 1);
    }

    #[test]
    fn reference_follows_transposes_and_epilogue() {
        let s = spec("matmul, f32, A transposed, alpha, beta, bias, relu");
        let shape = MatmulShape {
            batch: 1,
            m: 2,
            n: 1,
            k: 2,
        };
        // A stored k × m = [[1, 2], [3, 4]] → A = [[1, 3], [2, 4]]; B = [1, 1]ᵀ.
        let ops = Operands {
            a: &[1.0, 2.0, 3.0, 4.0],
            b: &[1.0, 1.0],
            c0: &[10.0, -100.0],
            bias: Some(&[0.5]),
        };
        let g = Gathered::new(&s, &shape, &ops, &[0, 1], &[0]);
        let (r0, mag0) = g.reference(&s, &shape, &ops, 2.0, 0.5, 0, 0);
        assert_eq!(r0, 2.0 * 4.0 + 5.0 + 0.5);
        assert_eq!(mag0, 8.0 + 5.0 + 0.5);
        let (r1, _) = g.reference(&s, &shape, &ops, 2.0, 0.5, 1, 0);
        assert_eq!(r1, 0.0, "relu of 12 - 50 + 0.5");
        // The same element through silu: v · sigmoid(v), negative inputs give small negative outputs.
        let s = spec("matmul, f32, A transposed, alpha, beta, bias, silu");
        let (r0, _) = g.reference(&s, &shape, &ops, 2.0, 0.5, 0, 0);
        assert!((r0 - 13.5 / (1.0 + (-13.5f64).exp())).abs() < 1e-12);
        let (r1, _) = g.reference(&s, &shape, &ops, 2.0, 0.5, 1, 0);
        let v: f64 = 2.0 * 6.0 - 50.0 + 0.5;
        assert!(r1 < 0.0 && (r1 - v / (1.0 + (-v).exp())).abs() < 1e-18);
    }

    #[test]
    fn a_triangular_product_reads_one_triangle_and_must_write_exact_zeros_outside_it() {
        let (m, k, n) = (5, 5, 5);
        let shape = MatmulShape { batch: 1, m, n, k };
        // Nothing is triangular in the stored operands: the reference must ignore the other triangles.
        let a: Vec<f32> = (0..m * k).map(|v| (v % 7) as f32 - 3.0).collect();
        let b: Vec<f32> = (0..k * n).map(|v| (v % 5) as f32 - 1.5).collect();
        let ops = Operands {
            a: &a,
            b: &b,
            c0: &[],
            bias: None,
        };
        let tol = Tolerance::for_precision(optiml_spec::Precision::Exact);
        for (text, upper) in [
            ("matmul for upper triangular matrices", true),
            ("matmul for lower triangular matrices", false),
        ] {
            let s = spec(text);
            let keep = |i: usize, j: usize| if upper { i <= j } else { i >= j };
            // C[i][j] = sum over k between i and j of A[i][k] B[k][j].
            let mut want = vec![0.0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    if keep(i, j) {
                        want[i * n + j] = (0..k)
                            .filter(|&p| keep(i, p) && keep(p, j))
                            .map(|p| a[i * k + p] * b[p * n + j])
                            .sum();
                    }
                }
            }
            let check = |out: &[f32]| check_item(&s, &shape, &tol, &ops, 1.0, 0.0, out, 0);
            check(&want).unwrap_or_else(|e| panic!("{text}: {e}"));
            // The full product masked afterwards read the other triangles.
            let mut full = vec![0.0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    if keep(i, j) {
                        full[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
                    }
                }
            }
            assert!(check(&full).is_err(), "{text}");
            // Anything but zero outside the triangle fails, however small.
            let mut leak = want.clone();
            leak[if upper { n } else { 1 }] = 1e-30;
            let e = check(&leak).unwrap_err();
            assert!(e.contains("exactly 0"), "{text}: {e}");
        }
    }
}
