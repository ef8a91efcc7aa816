//! The TESTPLAN (design.md §4): which shapes and input distributions every candidate must get right, the
//! float64 reference, and the tolerances. Everything here is pure host code, so it is tested without a GPU;
//! the worker runs it.

pub use crate::search::splitmix;
use optiml_spec::{
    Activation, BinaryOp, DType, Dim, ElementwiseOp, ElementwiseSpec, MatmulSpec, Operand,
    Precision, UnaryOp,
};
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

/// How test inputs are drawn; the worker's trusted fill kernel implements each one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Distribution {
    /// Uniform on (−1, 1).
    Uniform,
    /// Standard normal.
    Normal,
    /// Student's t with 3 degrees of freedom, clipped at ±1e4: rare huge values, where a kernel that drops or
    /// double-counts a term shows up at once.
    HeavyTailed,
}

impl Distribution {
    /// The code the fill kernel takes.
    pub fn code(self) -> i32 {
        match self {
            Distribution::Uniform => 0,
            Distribution::Normal => 1,
            Distribution::HeavyTailed => 2,
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Distribution::Uniform => "uniform",
            Distribution::Normal => "normal",
            Distribution::HeavyTailed => "heavy-tailed",
        })
    }
}

/// Tolerances by precision.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    /// ‖out − ref‖₂ / ‖ref‖₂ must not exceed this.
    pub rel_l2: f64,
    /// |out − ref| must not exceed this times the element's magnitude bound Σ|terms| (the scale a correctly
    /// rounded dot product's error is proportional to).
    pub scaled_abs: f64,
    /// An absolute allowance on top of the scaled bound: the output type's finest spacing near zero, where
    /// relative rounding stops (fp16's subnormals are 2⁻²⁴ apart; fp32's and bf16's spacing there is far below
    /// anything measurable, so 0 leaves the smallest fp32 normal as the floor).
    #[serde(default)]
    pub abs: f64,
}

impl Tolerance {
    /// fp32 arithmetic (design.md §4: ‖out−ref‖/‖ref‖ ≤ 1e-5).
    pub const F32: Tolerance = Tolerance {
        rel_l2: 1e-5,
        scaled_abs: 1e-5,
        abs: 0.0,
    };

    /// TF32 tensor cores with fp32 accumulation. Each product's operands are rounded to 10 mantissa bits, one
    /// to nearest (≤ 2⁻¹¹ relative) and one possibly by truncation (< 2⁻¹⁰: `wgmma` reads the top 19 bits of a
    /// shared-memory fp32 operand), so every term is off by less than 1.5e-3 of its magnitude, and an element
    /// by less than that of Σ|terms| plus fp32 accumulation. Truncation is biased, so the errors do not average
    /// out in the L2 norm either (the prototypes measured up to 8.3e-4 on normal inputs).
    pub const TF32: Tolerance = Tolerance {
        rel_l2: 2e-3,
        scaled_abs: 2e-3,
        abs: 0.0,
    };

    /// The tolerance of a matmul computed at `precision`.
    pub fn for_precision(precision: Precision) -> Tolerance {
        match precision {
            Precision::Exact => Tolerance::F32,
            Precision::Tf32 => Tolerance::TF32,
        }
    }

    /// bf16 operands and output, fp32 accumulation. The inputs are exact (the worker generates values bf16
    /// holds) and their products are exact in fp32; the output is rounded once to 8 significant bits, up to
    /// 2⁻⁸ ≈ 3.9e-3 of |out| (RMS about 2.3e-3), plus the accumulation's few fp32 ulps of Σ|terms|. Elements
    /// get twice the rounding; the relative L2 error, which averages it, a little under.
    pub const BF16: Tolerance = Tolerance {
        rel_l2: 4e-3,
        scaled_abs: 8e-3,
        abs: 0.0,
    };

    /// fp16 operands and output: as [`Tolerance::BF16`] with 11 significant bits, 2⁻¹¹ ≈ 4.9e-4 of |out|
    /// (RMS about 2.8e-4), and below 2⁻¹⁴ (fp16's subnormals) up to half a spacing of 2⁻²⁴ absolute: the
    /// H200 gate saw a correct 2.92e-5 output off by exactly 2⁻²⁵.
    pub const F16: Tolerance = Tolerance {
        rel_l2: 5e-4,
        scaled_abs: 1e-3,
        abs: 1.0 / 16_777_216.0,
    };

    /// The tolerance of a matmul of `dtype` elements computed at `precision`.
    pub fn for_matmul(dtype: DType, precision: Precision) -> Tolerance {
        match dtype {
            DType::F32 => Tolerance::for_precision(precision),
            DType::Bf16 => Tolerance::BF16,
            DType::F16 => Tolerance::F16,
        }
    }

    /// fp32 elementwise maps: a few ulps of the largest value of the check (transcendentals in fp32 are not
    /// correctly rounded; the scale keeps outputs near zero, where relative error means nothing, from failing).
    pub const F32_ELEMENTWISE: Tolerance = Tolerance {
        rel_l2: 1e-6,
        scaled_abs: 2e-6,
        abs: 0.0,
    };
}

/// What every candidate of one kernel must pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestPlan {
    /// Shapes checked element by element against the float64 reference, each with fresh inputs.
    pub shapes: Vec<MatmulShape>,
    /// Distributions, cycled over the shapes (and the dispatch shape).
    pub distributions: Vec<Distribution>,
    /// Tolerances.
    pub tolerance: Tolerance,
    /// Elements of the dispatch shape compared with the reference, after every element was checked to be
    /// written (finite); corners and edges are always among them.
    pub dispatch_samples: usize,
    /// Lengths checked element by element (elementwise kernels), each with fresh inputs.
    #[serde(default)]
    pub lengths: Vec<usize>,
}

impl TestPlan {
    /// The default plan for `spec`: shapes that are multiples of no tile size, a one-element product, an empty
    /// reduction, a tall, a wide and two deep ones, a
    /// matrix-vector and a vector-matrix product; fixed dimensions of the spec are kept. `extra` shapes (the
    /// user's) are appended.
    pub fn for_matmul(spec: &MatmulSpec, extra: &[MatmulShape]) -> Self {
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
        let mut shapes: Vec<MatmulShape> = Vec::new();
        for s in base.iter().chain(extra).map(|s| s.fit(spec)) {
            if !shapes.contains(&s) && s.flops() <= 2e9 {
                shapes.push(s);
            }
        }
        TestPlan {
            shapes,
            distributions: vec![
                Distribution::Uniform,
                Distribution::Normal,
                Distribution::HeavyTailed,
            ],
            tolerance: Tolerance::for_precision(spec.precision),
            dispatch_samples: 4096,
            lengths: Vec::new(),
        }
    }

    /// The default plan for an elementwise `spec`: one element, lengths that are no multiple of the vector
    /// width or of any block, one past a power of two, and `extra` (the user's); a fixed length is kept.
    pub fn for_elementwise(spec: &ElementwiseSpec, extra: &[usize]) -> Self {
        let mut lengths: Vec<usize> = Vec::new();
        for &n in [1, 3, 31, 1000, 4097, 100_003].iter().chain(extra) {
            let n = match spec.n {
                Dim::Fixed(f) => f as usize,
                Dim::Runtime => n,
            };
            if !lengths.contains(&n) {
                lengths.push(n);
            }
        }
        TestPlan {
            shapes: Vec::new(),
            distributions: vec![
                Distribution::Uniform,
                Distribution::Normal,
                Distribution::HeavyTailed,
            ],
            tolerance: Tolerance::F32_ELEMENTWISE,
            dispatch_samples: 4096,
            lengths,
        }
    }

    /// The distribution check number `i` uses.
    pub fn distribution(&self, i: usize) -> Distribution {
        self.distributions
            .get(i % self.distributions.len().max(1))
            .copied()
            .unwrap_or(Distribution::Uniform)
    }
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
        for &i in rows {
            g.rows[i] = (0..k)
                .map(|p| {
                    if spec.trans_a {
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
                    if spec.trans_b {
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
        let alpha = if spec.alpha { alpha as f64 } else { 1.0 };
        let mut v = alpha * acc;
        mag *= alpha.abs();
        if spec.beta {
            let c = beta as f64 * ops.c0[i * shape.n + j] as f64;
            v += c;
            mag += c.abs();
        }
        if let Some(bias) = ops.bias {
            v += bias[j] as f64;
            mag += (bias[j] as f64).abs();
        }
        let v = match spec.activation {
            None => v,
            Some(Activation::Relu) => v.max(0.0),
            Some(Activation::Gelu) => 0.5 * v * (1.0 + libm::erf(v / std::f64::consts::SQRT_2)),
            Some(Activation::Silu) => v / (1.0 + (-v).exp()),
        };
        (v, mag)
    }
}

/// The float64 reference of one element of an elementwise map.
pub fn elementwise_reference(spec: &ElementwiseSpec, x: f32, y: f32, s: f32) -> f64 {
    let (x, y, s) = (x as f64, y as f64, s as f64);
    let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
    match spec.op {
        ElementwiseOp::Unary(UnaryOp::Relu) => x.max(0.0),
        ElementwiseOp::Unary(UnaryOp::Gelu) => {
            0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2))
        }
        ElementwiseOp::Unary(UnaryOp::Silu) => x * sigmoid(x),
        ElementwiseOp::Unary(UnaryOp::Sigmoid) => sigmoid(x),
        ElementwiseOp::Unary(UnaryOp::Tanh) => x.tanh(),
        ElementwiseOp::Binary(op, operand) => {
            let w = match operand {
                Operand::Tensor => y,
                Operand::Scalar => s,
            };
            match op {
                BinaryOp::Add => x + w,
                BinaryOp::Mul => x * w,
            }
        }
    }
}

/// Compares elementwise outputs with their references, the bound scaled by the largest reference of the check.
///
/// # Errors
/// The first wrong element (`at` names it), or the relative error over the check.
pub fn check_elementwise(
    tol: &Tolerance,
    outputs: &[(f32, f64)],
    at: &dyn Fn(usize) -> String,
) -> Result<usize, String> {
    let scale = outputs.iter().fold(0.0f64, |m, (_, r)| m.max(r.abs()));
    let mut cmp = Comparison::default();
    for (i, &(out, r)) in outputs.iter().enumerate() {
        cmp.check(tol, &|| at(i), out, r, scale);
    }
    cmp.finish(tol)
}

/// Running comparison of outputs against references.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    diff2: f64,
    ref2: f64,
    checked: usize,
    /// The first failing element, with why.
    pub failure: Option<String>,
}

impl Comparison {
    /// The smallest |reference| / magnitude for an element to count in the relative L2 error: 2⁻¹⁰, at least
    /// 10 of fp32's 24 bits left after cancellation.
    const CONDITIONED: f64 = 1.0 / 1024.0;

    /// Compares one element. NaN or infinity never passes; the scaled bound allows a few ulps of the largest
    /// term (plus the smallest normal, so an exact zero may come out as a denormal).
    pub fn check(&mut self, tol: &Tolerance, at: &dyn Fn() -> String, out: f32, r: f64, mag: f64) {
        self.checked += 1;
        if self.failure.is_some() {
            return;
        }
        if !out.is_finite() {
            self.failure = Some(format!(
                "{} is {out} (expected {r:.6e}): not written, or overflowed",
                at()
            ));
            return;
        }
        let d = (out as f64 - r).abs();
        // An element whose value is far below the magnitude of its terms (cancellation, or an activation that
        // squashes it, as gelu does below −5) has lost most of its bits before the kernel's rounding: its
        // relative error measures that conditioning, not the kernel (on the H200, a correct gelu epilogue
        // failed the 1×1×1×1 check at relative error 1 on an output of 1e-9 from terms of 6). Such elements
        // are held to the scaled bound below only.
        // Likewise an element so small that the output type's absolute spacing, not its relative rounding,
        // bounds it (fp16's subnormals).
        if r.abs() >= Self::CONDITIONED * mag && tol.scaled_abs * r.abs() >= tol.abs {
            self.diff2 += d * d;
            self.ref2 += r * r;
        }
        let bound = tol.scaled_abs * mag.max(r.abs()) + tol.abs.max(f32::MIN_POSITIVE as f64);
        if d > bound {
            self.failure = Some(format!(
                "{} is {out:.8e}, expected {r:.8e} (error {d:.3e} > bound {bound:.3e})",
                at()
            ));
        }
    }

    /// The verdict over everything checked: the first element failure, or the relative L2 error.
    ///
    /// # Errors
    /// Why the outputs are wrong.
    pub fn finish(&self, tol: &Tolerance) -> Result<usize, String> {
        if let Some(f) = &self.failure {
            return Err(f.clone());
        }
        if self.ref2 > 0.0 {
            let rel = (self.diff2 / self.ref2).sqrt();
            if rel > tol.rel_l2 {
                return Err(format!(
                    "relative L2 error {rel:.3e} over {} elements exceeds {:.1e}",
                    self.checked, tol.rel_l2
                ));
            }
        } else if self.diff2 > 0.0 {
            return Err("the reference is all zeros and the output is not".into());
        }
        Ok(self.checked)
    }
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
    let mut cmp = Comparison::default();
    let all_rows: Vec<usize> = (0..shape.m).collect();
    let all_cols: Vec<usize> = (0..shape.n).collect();
    let g = Gathered::new(spec, shape, ops, &all_rows, &all_cols);
    for i in 0..shape.m {
        for j in 0..shape.n {
            let (r, mag) = g.reference(spec, shape, ops, alpha, beta, i, j);
            cmp.check(
                tol,
                &|| format!("C[{item}][{i}][{j}]"),
                out[i * shape.n + j],
                r,
                mag,
            );
        }
    }
    cmp.finish(tol)
}

/// Rows and columns of an m × n output whose every crossing is compared: about √count of each, always the
/// first, middle and last, the others drawn from `seed`.
pub fn sample_grid(m: usize, n: usize, count: usize, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let side = (count as f64).sqrt().ceil().max(3.0) as usize;
    let pick = |len: usize, salt: u64| -> Vec<usize> {
        if len == 0 {
            return Vec::new();
        }
        let mut out = vec![0, len / 2, len - 1];
        let mut state = seed ^ salt;
        let mut tries = 0;
        while out.len() < side.min(len) && tries < 16 * side {
            tries += 1;
            state = splitmix(state);
            let v = (state % len as u64) as usize;
            if !out.contains(&v) {
                out.push(v);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    };
    (pick(m, 0x5157), pick(n, 0xc015))
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let p = TestPlan::for_matmul(&spec("batched matmul, f32"), &[]);
        assert!(p.shapes.iter().any(|s| s.k == 0));
        assert!(p.shapes.iter().any(|s| s.m % 2 == 1 && s.n % 2 == 1));
        let fixed = TestPlan::for_matmul(&spec("matmul, f32, k=64, n=32"), &[]);
        assert!(
            fixed
                .shapes
                .iter()
                .all(|s| s.k == 64 && s.n == 32 && s.batch == 1)
        );
        // Fixing dimensions merges shapes that became equal.
        let all_fixed = TestPlan::for_matmul(&spec("matmul, f32, m=8, n=8, k=8"), &[]);
        assert_eq!(all_fixed.shapes.len(), 1);
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
    fn comparison_rejects_nan_large_errors_and_accepts_rounding() {
        let tol = Tolerance::F32;
        let at = || "x".to_string();
        let mut ok = Comparison::default();
        ok.check(&tol, &at, 1.000_000_1, 1.0, 1.0);
        ok.check(&tol, &at, 0.0, 0.0, 0.0);
        assert_eq!(ok.finish(&tol), Ok(2));
        let mut nan = Comparison::default();
        nan.check(&tol, &at, f32::NAN, 1.0, 1.0);
        assert!(nan.finish(&tol).unwrap_err().contains("NaN"));
        let mut off = Comparison::default();
        off.check(&tol, &at, 1.001, 1.0, 1.0);
        assert!(off.finish(&tol).is_err());
        let mut zeros = Comparison::default();
        zeros.check(&tol, &at, 1e-30, 0.0, 0.0);
        assert!(zeros.finish(&tol).is_err());
        // gelu(-5.9) from terms of magnitude 6: fp32's 1 + erf(x/√2) cancels to nothing, within the scaled
        // bound, and the relative L2 error of such an element says nothing about the kernel.
        let mut squashed = Comparison::default();
        squashed.check(&tol, &at, 0.0, -1.06e-8, 6.0);
        assert_eq!(squashed.finish(&tol), Ok(1));
        // Well-conditioned elements still count: 3e-6 too much on each of many elements of magnitude 1.
        let mut drift = Comparison::default();
        for _ in 0..100 {
            drift.check(&tol, &at, 1.0 + 9e-6, 1.0, 1.0);
        }
        drift.check(&tol, &at, 0.0, -1.06e-8, 6.0);
        assert!(drift.finish(&tol).is_ok());
        let mut drift = Comparison::default();
        for _ in 0..100 {
            drift.check(&tol, &at, 1.0 + 2e-5, 1.0, 3.0);
        }
        assert!(drift.finish(&tol).unwrap_err().contains("relative L2"));
    }

    #[test]
    fn sixteen_bit_outputs_are_held_to_their_rounding() {
        let at = || "x".to_string();
        let check = |tol: &Tolerance, out: f32, r: f64| {
            let mut c = Comparison::default();
            c.check(tol, &at, out, r, r.abs());
            c.finish(tol).is_ok()
        };
        // bf16 rounds 1 + 2⁻⁹ to 1; fp16 would not, and fp32's tolerance rejects bf16's rounding.
        assert!(check(&Tolerance::BF16, 1.0, 1.0 + 1.0 / 256.0 / 2.0));
        assert!(!check(&Tolerance::BF16, 1.0, 1.01));
        assert!(!check(&Tolerance::F16, 1.0, 1.0 + 1.0 / 512.0));
        assert!(!check(&Tolerance::F32, 1.0, 1.0 + 1.0 / 512.0));
        // fp16's subnormals: the H200 gate's 2.92e-5 output, half a spacing (2⁻²⁵) off; a whole spacing is not.
        assert!(check(&Tolerance::F16, 2.920_627_6e-5, 2.917_647_4e-5));
        assert!(!check(&Tolerance::F16, 2.92e-5 + 1.2e-7, 2.92e-5));
        assert!(!check(&Tolerance::BF16, 2.95e-5, 2.9e-5));
    }

    #[test]
    fn elementwise_plan_and_reference() {
        let ew = |text: &str| match parse(text).unwrap().family {
            optiml_spec::Family::Elementwise(e) => e,
            other => panic!("{other:?}"),
        };
        let p = TestPlan::for_elementwise(&ew("y = gelu(x)"), &[12345]);
        assert!(p.lengths.contains(&1) && p.lengths.contains(&4097) && p.lengths.contains(&12345));
        assert!(p.shapes.is_empty());
        assert_eq!(
            TestPlan::for_elementwise(&ew("relu, n=64"), &[]).lengths,
            vec![64]
        );
        let gelu = ew("y = gelu(x)");
        assert!((elementwise_reference(&gelu, 1.0, 0.0, 0.0) - 0.841_344_746).abs() < 1e-8);
        assert_eq!(elementwise_reference(&ew("z = x + y"), 1.5, 2.0, 9.0), 3.5);
        assert_eq!(elementwise_reference(&ew("y = x * s"), 1.5, 2.0, 4.0), 6.0);
        let tol = Tolerance::F32_ELEMENTWISE;
        assert!(
            check_elementwise(
                &tol,
                &[(0.841_344_7, 0.841_344_746), (0.0, 1e-30)],
                &|i| format!("{i}")
            )
            .is_ok()
        );
        let e = check_elementwise(&tol, &[(1.0, 1.0), (f32::NAN, 2.0)], &|i| {
            format!("out[{i}]")
        })
        .unwrap_err();
        assert!(e.contains("out[1]"), "{e}");
        assert!(check_elementwise(&tol, &[(1.001, 1.0)], &|i| format!("{i}")).is_err());
    }

    #[test]
    fn sample_grids_include_edges_and_stay_in_range() {
        let (rows, cols) = sample_grid(1000, 5, 4096, 7);
        assert_eq!(rows.len(), 64);
        assert_eq!(cols, vec![0, 1, 2, 3, 4]);
        assert!(rows.contains(&0) && rows.contains(&500) && rows.contains(&999));
        assert!(rows.iter().all(|&i| i < 1000));
        assert!(sample_grid(0, 5, 10, 1).0.is_empty());
    }
}
