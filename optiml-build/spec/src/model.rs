//! The typed spec: what a kernel computes, independent of how it is written or tuned.

use crate::program::Program;
use crate::reference;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A parsed kernel spec. Two spec strings that mean the same kernel parse to equal `Spec`s
/// and share one [`canonical`](Spec::canonical) form.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Spec {
    /// What the kernel computes.
    pub family: Family,
    /// Element type of every tensor operand.
    pub dtype: DType,
    /// Memory layout of every matrix operand.
    pub layout: Layout,
}

/// The kernel families optiml can generate.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Family {
    /// `C = act(alpha · op(A) · op(B) + beta · C + bias)`, optionally over a batch.
    Matmul(MatmulSpec),
    /// Any other operator: a tensor program in index notation or the plain words that lower to one.
    Tensor(Program),
}

/// Element types of the tensor operands. Other names (f64, int8, fp8) are recognised so that a spec naming them
/// gets a clear "not supported yet" error instead of "unknown word".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    /// IEEE single precision, exact fp32 arithmetic.
    F32,
    /// bfloat16 storage (8 significant bits, fp32's range): matmul operands and output; products accumulate in
    /// fp32 and the output is rounded once. Bias, `alpha` and `beta` stay f32.
    Bf16,
    /// IEEE half precision storage (11 significant bits, largest finite 65504), as [`DType::Bf16`] otherwise.
    F16,
}

impl DType {
    /// The name of the Rust element type a buffer of this dtype holds, as a signature spells its last segment
    /// (`f32`, or `bf16` / `f16` from the `half` crate).
    pub fn rust_type(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::Bf16 => "bf16",
            DType::F16 => "f16",
        }
    }

    /// The element type's path as messages show it (`half::bf16`).
    pub fn rust_path(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::Bf16 => "half::bf16",
            DType::F16 => "half::f16",
        }
    }

    /// The canonical name (`f32`, `bf16`, `f16`).
    pub fn name(self) -> &'static str {
        self.rust_type()
    }

    /// Bytes per element.
    pub fn bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::Bf16 | DType::F16 => 2,
        }
    }
}

/// Matrix layouts. Row-major (C order) is the only one; column-major is recognised and rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Layout {
    /// Rows are contiguous; a matrix of `r × c` has leading dimension `c`.
    RowMajor,
}

/// A problem dimension: fixed by the spec (and compiled into the kernel) or passed at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dim {
    /// Given as a parameter of the generated function.
    Runtime,
    /// Fixed by the spec, e.g. `k=1024`.
    Fixed(u64),
}

impl Dim {
    /// The fixed value, if any.
    pub fn fixed(self) -> Option<u64> {
        match self {
            Dim::Runtime => None,
            Dim::Fixed(v) => Some(v),
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Runtime => f.write_str("?"),
            Dim::Fixed(v) => write!(f, "{v}"),
        }
    }
}

/// Activations usable as a matmul epilogue or as an elementwise map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Activation {
    /// `max(v, 0)`.
    Relu,
    /// `0.5 · v · (1 + erf(v / √2))`, the exact form.
    Gelu,
    /// `v · sigmoid(v)` (swish).
    Silu,
}

impl Activation {
    /// The canonical name.
    pub fn name(self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::Gelu => "gelu",
            Activation::Silu => "silu",
        }
    }

    /// What it means, in float64: the reference every kernel's output is checked against.
    pub fn apply(self, v: f64) -> f64 {
        match self {
            Activation::Relu => reference::relu(v),
            Activation::Gelu => reference::gelu(v),
            Activation::Silu => reference::silu(v),
        }
    }
}

/// How a matmul may round its products.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Precision {
    /// fp32 accuracy: what `f32` alone means. A matmul runs on the SIMT kernels, or on sm_90 on the 3xTF32
    /// tensor-core kernel where the gate finds it within twice the SIMT kernel's error (issue 17).
    #[default]
    Exact,
    /// fp32 multiply-adds only (`exact`): a matmul stays on the SIMT kernels. Same tolerance as [`Exact`](Self::Exact).
    Fma,
    /// The spec allows TF32 tensor cores (`tf32`): A and B are rounded to 10 mantissa bits inside the kernel,
    /// products are accumulated in fp32; buffers stay f32. The check's tolerance is TF32's, not fp32's.
    Tf32,
}

/// The triangle a triangular product keeps ([`MatmulSpec::triangle`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Triangle {
    /// `C = triu(triu(A) · triu(B))`: elements on and above the diagonal.
    Upper,
    /// `C = tril(tril(A) · tril(B))`: elements on and below the diagonal.
    Lower,
}

impl Triangle {
    /// The canonical name (`triu`, `tril`), as PyTorch spells the masks.
    pub fn name(self) -> &'static str {
        match self {
            Triangle::Upper => "triu",
            Triangle::Lower => "tril",
        }
    }

    /// Whether element `(i, j)` lies outside the kept triangle (a triangular product writes it 0).
    pub fn outside(self, i: usize, j: usize) -> bool {
        match self {
            Triangle::Upper => j < i,
            Triangle::Lower => j > i,
        }
    }
}

/// A batched or plain matrix product with an optional fused epilogue.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MatmulSpec {
    /// Arithmetic the kernel may use (specs written before precisions existed are exact).
    #[serde(default)]
    pub precision: Precision,
    /// A batch of independent products (`A`, `B`, `C` hold `batch` matrices back to back).
    pub batched: bool,
    /// `A` is stored `K × M` and used transposed.
    pub trans_a: bool,
    /// `B` is stored `N × K` and used transposed.
    pub trans_b: bool,
    /// One `A` for every batch item (a matrix times a 3-D tensor): `A` holds a single matrix.
    #[serde(default)]
    pub shared_a: bool,
    /// One `B` for every batch item (a 3-D tensor times a matrix): `B` holds a single matrix.
    #[serde(default)]
    pub shared_b: bool,
    /// The product is scaled by a run-time `alpha: f32`.
    pub alpha: bool,
    /// The old `C`, scaled by a run-time `beta: f32`, is added (so `C` is read and written).
    pub beta: bool,
    /// A bias vector of length `N` is added to every row.
    pub bias: bool,
    /// Activation applied last.
    pub activation: Option<Activation>,
    /// A triangular product: A, B and C are triangular of this kind. Only A's and B's triangle is read (the
    /// other is taken as zero whatever it holds, as BLAS's `trmm` reads a triangular operand) and C's other
    /// triangle is written exactly zero, so `C[i, j]` sums `A[i, k] · B[k, j]` over `i ≤ k ≤ j` (upper) and the
    /// kernel skips the tiles and reduction ranges that hold only zeros. (Specs written before triangles: none.)
    #[serde(default)]
    pub triangle: Option<Triangle>,
    /// Number of matrices (always `Fixed(1)` when not batched).
    pub batch: Dim,
    /// Rows of `C`.
    pub m: Dim,
    /// Columns of `C`.
    pub n: Dim,
    /// The reduction dimension.
    pub k: Dim,
    /// The parameter names, when the spec is a contraction in index notation
    /// (`c[i, j] = sum(k) a[i, k] * b[k, j]` takes `a, b, c, i, j, k`); `None`: `a, b, c, batch, m, n, k`.
    /// Names are the signature's business: they are not part of the canonical form or the key.
    #[serde(default)]
    pub names: Option<Box<MatmulNames>>,
}

impl MatmulSpec {
    /// What the product computes, in the signature's names: `c[z, i, j] = relu(alpha · Σ_{p} a[z, i, p] ·
    /// b[p, j] + bias[j]), for z < batch, i < m, j < n, p < k`, with the summation range of a triangular product.
    /// A contraction uses its own names as indices.
    pub fn formula(&self) -> String {
        let n = self.names.as_deref();
        let pick = |f: fn(&MatmulNames) -> &str, d: &'static str| n.map_or(d, f).to_string();
        let (a, b, c) = (
            pick(|n| &n.a, "a"),
            pick(|n| &n.b, "b"),
            pick(|n| &n.c, "c"),
        );
        // A contraction's indices are its dimensions' names; the words' dimensions (batch, m, n, k) get indices.
        let (i, j, k) = (
            pick(|n| &n.m, "i"),
            pick(|n| &n.n, "j"),
            pick(|n| &n.k, "p"),
        );
        let batch: Vec<String> = match n {
            Some(n) => n.batch.clone(),
            None if self.batched => vec!["z".to_string()],
            None => Vec::new(),
        };
        let at = |batched: bool, x: &str, y: &str| {
            let mut axes: Vec<&str> = if batched {
                batch.iter().map(String::as_str).collect()
            } else {
                Vec::new()
            };
            axes.extend([x, y]);
            axes.join(", ")
        };
        let lhs = format!("{c}[{}]", at(true, &i, &j));
        let av = if self.trans_a {
            format!("{a}[{}]", at(!self.shared_a, &k, &i))
        } else {
            format!("{a}[{}]", at(!self.shared_a, &i, &k))
        };
        let bv = if self.trans_b {
            format!("{b}[{}]", at(!self.shared_b, &j, &k))
        } else {
            format!("{b}[{}]", at(!self.shared_b, &k, &j))
        };
        let range = match self.triangle {
            None => k.clone(),
            Some(Triangle::Upper) => format!("{i} ≤ {k} ≤ {j}"),
            Some(Triangle::Lower) => format!("{j} ≤ {k} ≤ {i}"),
        };
        let mut v = format!("Σ_{{{range}}} {av} · {bv}");
        if self.alpha {
            v = format!("alpha · {v}");
        }
        if self.beta {
            v = format!("{v} + beta · {lhs}");
        }
        if self.bias {
            v = format!("{v} + bias[{j}]");
        }
        if let Some(act) = self.activation {
            v = format!("{}({v})", act.name());
        }
        let mut out = format!("{lhs} = {v}");
        if let Some(t) = self.triangle {
            out.push_str(&format!(
                ", and 0 {} the diagonal ({i} {} {j})",
                if t == Triangle::Upper {
                    "below"
                } else {
                    "above"
                },
                if t == Triangle::Upper { ">" } else { "<" }
            ));
        }
        if n.is_none() {
            out.push_str(if self.batched {
                ", for z < batch, i < m, j < n, p < k"
            } else {
                ", for i < m, j < n, p < k"
            });
        }
        out
    }
}

#[cfg(test)]
mod formula_tests {
    use crate::{Family, parse};

    fn formula(text: &str) -> String {
        match parse(text).unwrap().family {
            Family::Matmul(m) => m.formula(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn formulas_name_every_operand_transpose_and_epilogue() {
        assert_eq!(
            formula("batched gemm, A transposed, alpha, beta, bias, relu"),
            "c[z, i, j] = relu(alpha · Σ_{p} a[z, p, i] · b[z, p, j] + beta · c[z, i, j] + bias[j]), \
             for z < batch, i < m, j < n, p < k"
        );
        assert_eq!(
            formula("bmm, shared A, B transposed"),
            "c[z, i, j] = Σ_{p} a[i, p] · b[z, j, p], for z < batch, i < m, j < n, p < k"
        );
        assert_eq!(
            formula("y[b, i, j, k] = sum(l) x[b, i, j, l] * w[l, k]"),
            "y[b, i, j, k] = Σ_{l} x[b, i, j, l] · w[l, k]"
        );
        assert_eq!(
            formula("matmul for lower triangular matrices"),
            "c[i, j] = Σ_{j ≤ p ≤ i} a[i, p] · b[p, j], and 0 above the diagonal (i < j), for i < m, j < n, p < k"
        );
    }
}

/// The parameter names of a matmul written as a contraction.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MatmulNames {
    /// The left operand.
    pub a: String,
    /// The right operand.
    pub b: String,
    /// The output.
    pub c: String,
    /// The batch dimensions, outermost first (none when not batched). Several are folded into one: a
    /// contraction `c[b, h, i, j] = sum(k) x[b, h, i, k] * w[k, j]` is a batch of `b · h` products, and the
    /// generated function multiplies the extents.
    pub batch: Vec<String>,
    /// Rows of the output.
    pub m: String,
    /// Columns of the output.
    pub n: String,
    /// The summed dimension.
    pub k: String,
}

impl Spec {
    /// The canonical text of the spec: one spelling per meaning, stable across releases
    /// (it is hashed into every cache key).
    pub fn canonical(&self) -> String {
        let dtype = self.dtype.name();
        match &self.family {
            Family::Matmul(m) => {
                let mut s = String::from("matmul");
                if m.batched {
                    s.push_str(" batched");
                }
                s.push_str(&format!(" {dtype}"));
                // Exact specs keep the spelling they had before precisions existed (it is hashed into keys).
                match m.precision {
                    Precision::Exact => {}
                    Precision::Fma => s.push_str(" exact"),
                    Precision::Tf32 => s.push_str(" tf32"),
                }
                s.push_str(" row-major");
                s.push_str(if m.trans_a { " a:t" } else { " a:n" });
                if m.shared_a {
                    s.push_str(":shared");
                }
                s.push_str(if m.trans_b { " b:t" } else { " b:n" });
                if m.shared_b {
                    s.push_str(":shared");
                }
                for (on, word) in [(m.alpha, "alpha"), (m.beta, "beta"), (m.bias, "bias")] {
                    if on {
                        s.push(' ');
                        s.push_str(word);
                    }
                }
                if let Some(act) = m.activation {
                    s.push(' ');
                    s.push_str(act.name());
                }
                if let Some(t) = m.triangle {
                    s.push(' ');
                    s.push_str(t.name());
                }
                if m.batched {
                    s.push_str(&format!(" batch={}", m.batch));
                }
                s.push_str(&format!(" m={} n={} k={}", m.m, m.n, m.k));
                s
            }
            Family::Tensor(p) => format!("program {}", p.canonical()),
        }
    }

    /// A short human name of the family, for messages ("batched matmul", "tensor program").
    pub fn family_name(&self) -> String {
        match &self.family {
            Family::Matmul(m) if m.batched => "batched matmul".into(),
            Family::Matmul(_) => "matmul".into(),
            Family::Tensor(_) => "tensor program".into(),
        }
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}
