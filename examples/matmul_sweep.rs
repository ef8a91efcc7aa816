//! The matmul family against the best library call over the shapes users have: square, rectangular, odd, small
//! K, large K, tall-skinny, batched, transposed operands and a fused epilogue; plain `f32` (3xTF32 where the
//! cache picked it), TF32 and `f32, exact` (SIMT only). Each row is one kernel declared
//! with `#[optiml::kernel]`, checked against a float64 reference on fresh random inputs, then timed on the same
//! inputs in the same process beside the fastest of cuBLAS (with a workspace) and cuBLASLt's heuristic
//! algorithms (`optiml_examples::library`).
//!
//! ```text
//! cargo run --release -p optiml-examples --example matmul_sweep [-- --out DIR]
//! ```
//!
//! `--out DIR` writes `matmul-sweep.json` and `matmul-sweep.md` there; `--kernels gemm_tf32,bmm` runs only the
//! rows of those kernels. A row that fails a check ends the run. Without a GPU it builds (the kernels come from the
//! committed cache) and says so. The checks, timing and tables are the shared sweep driver's
//! (`optiml_examples::sweep`); this file holds the kernels, the cases and how each kernel is launched.

use optiml::cudarc::driver::{CudaSlice, CudaStream};
use optiml_examples::library::{Library, Math};
use optiml_examples::matmul::Operands;
use optiml_examples::sweep::{Case, Group, Sweep, SweepKernel, case, measure};
use optiml_examples::{BoxError, Device, arg_value, gelu};
use std::path::PathBuf;
use std::sync::Arc;

/// `C = A·B`, row-major.
#[optiml::kernel("matmul, f32")]
fn gemm(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = A·Bᵀ` (B stored `n × k`).
#[optiml::kernel("C = A·Bᵀ, float32")]
fn gemm_nt(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = Aᵀ·B` (A stored `k × m`).
#[optiml::kernel("matmul, A transposed")]
fn gemm_tn(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// The README's kernel (its committed cache entry is tuned for 256×1024³ and 16×1024³).
#[optiml::kernel("batched matmul, f32")]
fn bmm(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
);

/// A 3-D tensor times one matrix: `C[z] = A[z]·B` for every batch item, with a single `B`.
#[optiml::kernel("batched matmul, B shared, f32")]
fn bmm_shared_b(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = gelu(A·B + bias)`, the epilogue fused.
#[optiml::kernel("matmul with bias and gelu, f32")]
fn gemm_bias_gelu(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    bias: &CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = A·B` on TF32 tensor cores (`wgmma` + TMA on the H200).
#[optiml::kernel("matmul, f32, tf32")]
fn gemm_tf32(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = A·Bᵀ` on TF32 tensor cores (both operands K-major: `cp.async`, no TMA).
#[optiml::kernel("C = A·Bᵀ, tf32")]
fn gemm_tf32_nt(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = Aᵀ·B` on TF32 tensor cores (the producer transposes A).
#[optiml::kernel("matmul, A transposed, tf32")]
fn gemm_tf32_tn(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// Batched, TF32 tensor cores.
#[optiml::kernel("batched matmul, f32, tf32")]
fn bmm_tf32(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = gelu(A·B + bias)` on TF32 tensor cores.
#[optiml::kernel("matmul with bias and gelu, tf32")]
fn gemm_tf32_bias_gelu(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    bias: &CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// `gemm` in exact fp32 only (the SIMT kernels: `exact` opts out of 3xTF32).
#[optiml::kernel("matmul, f32, exact")]
fn gemm_exact(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// `gemm_nt` in exact fp32 only.
#[optiml::kernel("C = A·Bᵀ, float32, exact")]
fn gemm_nt_exact(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// `gemm_tn` in exact fp32 only.
#[optiml::kernel("matmul, A transposed, exact")]
fn gemm_tn_exact(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// `bmm` in exact fp32 only.
#[optiml::kernel("batched matmul, f32, exact")]
fn bmm_exact(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
);

/// `bmm_shared_b` in exact fp32 only.
#[optiml::kernel("batched matmul, B shared, f32, exact")]
fn bmm_shared_b_exact(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
);

/// `gemm_bias_gelu` in exact fp32 only.
#[optiml::kernel("matmul with bias and gelu, f32, exact")]
fn gemm_bias_gelu_exact(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    bias: &CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// Which declared kernel a row runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kernel {
    Gemm,
    Nt,
    Tn,
    Bmm,
    SharedB,
    BiasGelu,
    Tf32Gemm,
    Tf32Nt,
    Tf32Tn,
    Tf32Bmm,
    Tf32BiasGelu,
    GemmExact,
    NtExact,
    TnExact,
    BmmExact,
    SharedBExact,
    BiasGeluExact,
}

impl Kernel {
    /// Runs on TF32 tensor cores (compared with the library in TF32 math).
    fn tf32(self) -> bool {
        matches!(
            self,
            Kernel::Tf32Gemm
                | Kernel::Tf32Nt
                | Kernel::Tf32Tn
                | Kernel::Tf32Bmm
                | Kernel::Tf32BiasGelu
        )
    }

    /// Declared `f32, exact`: the SIMT kernels only.
    fn exact(self) -> bool {
        matches!(
            self,
            Kernel::GemmExact
                | Kernel::NtExact
                | Kernel::TnExact
                | Kernel::BmmExact
                | Kernel::SharedBExact
                | Kernel::BiasGeluExact
        )
    }
}

impl SweepKernel for Kernel {
    fn name(self) -> &'static str {
        match self {
            Kernel::Gemm => "gemm",
            Kernel::Nt => "gemm_nt",
            Kernel::Tn => "gemm_tn",
            Kernel::Bmm => "bmm",
            Kernel::SharedB => "bmm_shared_b",
            Kernel::BiasGelu => "gemm_bias_gelu",
            Kernel::Tf32Gemm => "gemm_tf32",
            Kernel::Tf32Nt => "gemm_tf32_nt",
            Kernel::Tf32Tn => "gemm_tf32_tn",
            Kernel::Tf32Bmm => "bmm_tf32",
            Kernel::Tf32BiasGelu => "gemm_tf32_bias_gelu",
            Kernel::GemmExact => "gemm_exact",
            Kernel::NtExact => "gemm_nt_exact",
            Kernel::TnExact => "gemm_tn_exact",
            Kernel::BmmExact => "bmm_exact",
            Kernel::SharedBExact => "bmm_shared_b_exact",
            Kernel::BiasGeluExact => "gemm_bias_gelu_exact",
        }
    }
    fn trans_a(self) -> bool {
        matches!(self, Kernel::Tn | Kernel::Tf32Tn | Kernel::TnExact)
    }
    fn trans_b(self) -> bool {
        matches!(self, Kernel::Nt | Kernel::Tf32Nt | Kernel::NtExact)
    }
    /// A tensor times one matrix: cuBLAS runs it as the single sgemm of `batch · m` rows a cuBLAS user would write.
    fn shared_b(self) -> bool {
        matches!(self, Kernel::SharedB | Kernel::SharedBExact)
    }
    fn epilogue(self) -> Option<(&'static str, fn(f64) -> f64)> {
        matches!(
            self,
            Kernel::BiasGelu | Kernel::Tf32BiasGelu | Kernel::BiasGeluExact
        )
        .then_some(("gelu", gelu))
    }
    fn math(self) -> Math {
        if self.tf32() { Math::Tf32 } else { Math::Exact }
    }
    /// fp32 rounding, or TF32's (`Tolerance::TF32` of the gate).
    fn tolerance(self) -> f64 {
        if self.tf32() { 2e-3 } else { 1e-5 }
    }
    /// Exact fp32 sums differ only in their order; TF32 ones round their inputs too, each side differently.
    fn agreement(self) -> f64 {
        if self.tf32() { 4e-3 } else { 1e-5 }
    }
    fn element_bytes(self) -> usize {
        4
    }
    fn group(self) -> usize {
        if self.tf32() {
            1
        } else if self.exact() {
            2
        } else {
            0
        }
    }
    fn json(self) -> serde_json::Map<String, serde_json::Value> {
        let precision = if self.tf32() {
            "tf32"
        } else if self.exact() {
            "fp32 exact"
        } else {
            "fp32"
        };
        serde_json::Map::from_iter([("precision".into(), precision.into())])
    }
    fn exact_twin(self) -> Option<Self> {
        match self {
            Kernel::Gemm => Some(Kernel::GemmExact),
            Kernel::Nt => Some(Kernel::NtExact),
            Kernel::Tn => Some(Kernel::TnExact),
            Kernel::Bmm => Some(Kernel::BmmExact),
            Kernel::SharedB => Some(Kernel::SharedBExact),
            Kernel::BiasGelu => Some(Kernel::BiasGeluExact),
            _ => None,
        }
    }
}

/// The tables: plain `f32` (SIMT or 3xTF32, as the tune and the gate's exact bound chose) against the library's
/// exact fp32, then TF32 against the library in TF32 math, then `f32, exact` (SIMT only) against exact fp32.
const GROUPS: [Group; 3] = [
    Group {
        name: "fp32",
        heading: None,
    },
    Group {
        name: "TF32",
        heading: Some("TF32 tensor cores (the library in TF32 math)"),
    },
    Group {
        name: "exact fp32",
        heading: Some(
            "`f32, exact`: the SIMT kernels only (untuned where no tune has run for the spec)",
        ),
    },
];

const SWEEP: &[Case<Kernel>] = &[
    case("square", Kernel::Gemm, 1, 4096, 4096, 4096),
    case("square", Kernel::Gemm, 1, 2048, 2048, 2048),
    case("irregular", Kernel::Gemm, 1, 1000, 1000, 1000),
    case("odd", Kernel::Gemm, 1, 4095, 4097, 1023),
    case("rectangular", Kernel::Gemm, 1, 8192, 2048, 1024),
    case("tall-skinny", Kernel::Gemm, 1, 32768, 128, 1024),
    case("short-wide", Kernel::Gemm, 1, 128, 32768, 1024),
    case("small K", Kernel::Gemm, 1, 4096, 4096, 32),
    case("large K", Kernel::Gemm, 1, 256, 256, 65536),
    case("batched", Kernel::Bmm, 256, 1024, 1024, 1024),
    case("batched", Kernel::Bmm, 16, 1024, 1024, 1024),
    case("batched odd", Kernel::Bmm, 64, 255, 257, 129),
    case("tensor × matrix", Kernel::SharedB, 32, 512, 1024, 1024),
    case("B transposed", Kernel::Nt, 1, 2048, 2048, 2048),
    case("A transposed", Kernel::Tn, 1, 2048, 2048, 2048),
    case("bias + gelu", Kernel::BiasGelu, 1, 2048, 2048, 2048),
    // Matrix-vector products: memory-bound, judged against the copy bandwidth measured in the same run.
    case("matrix × vector", Kernel::Gemm, 1, 16384, 1, 16384),
    case("matrix × vector", Kernel::Gemm, 1, 8191, 1, 8193),
    case("vector × matrix", Kernel::Gemm, 1, 1, 16384, 16384),
    case("Aᵀ × vector", Kernel::Tn, 1, 16384, 1, 16384),
    case("batched m × v", Kernel::Bmm, 64, 1024, 1, 1024),
    // TF32 tensor cores against the library in TF32 math.
    case("square", Kernel::Tf32Gemm, 1, 8192, 8192, 8192),
    case("square", Kernel::Tf32Gemm, 1, 4096, 4096, 4096),
    case("square", Kernel::Tf32Gemm, 1, 2048, 2048, 2048),
    case("irregular", Kernel::Tf32Gemm, 1, 1000, 1000, 1000),
    case("odd", Kernel::Tf32Gemm, 1, 4095, 4097, 1023),
    case("tall-skinny", Kernel::Tf32Gemm, 1, 32768, 128, 1024),
    case("small K", Kernel::Tf32Gemm, 1, 4096, 4096, 32),
    case("batched", Kernel::Tf32Bmm, 256, 1024, 1024, 1024),
    case("batched", Kernel::Tf32Bmm, 16, 1024, 1024, 1024),
    case("B transposed", Kernel::Tf32Nt, 1, 4096, 4096, 4096),
    case("A transposed", Kernel::Tf32Tn, 1, 4096, 4096, 4096),
    case("bias + gelu", Kernel::Tf32BiasGelu, 1, 4096, 4096, 4096),
    // `f32, exact` (SIMT only) at the shapes issue 17 names.
    case("square", Kernel::GemmExact, 1, 4096, 4096, 4096),
    case("odd", Kernel::GemmExact, 1, 4095, 4097, 1023),
    case("large K", Kernel::GemmExact, 1, 256, 256, 65536),
    case("batched", Kernel::BmmExact, 256, 1024, 1024, 1024),
    case("batched", Kernel::BmmExact, 16, 1024, 1024, 1024),
];

const METHOD: &str = "CUDA events on one stream; the library call is the fastest, on the row's own operands \
    (10 runs each, medians), of cuBLAS through cudarc (sgemm / sgemm_strided_batched) on a handle with a 32 MiB \
    workspace set and each algorithm (up to 8) cuBLASLt's heuristic proposes for the problem within a 32 MiB \
    workspace; then 5 warm-up runs each and 30 rounds timing one optiml and one library run, alternating which \
    goes first (medians); the same inputs for both; every optiml output checked for NaN (the \
    buffer is poisoned first) and 2048 sampled elements against float64 within 1e-5 of their terms' magnitude; \
    the library's output compared with optiml's (relative L2 ≤ 1e-5) except where optiml fuses an epilogue the \
    library does not run; the library's own sampled error measured on the same elements. Plain `f32` rows run \
    what the cache holds for the shape (SIMT, or 3xTF32 where a tune picked it and the gate held it within 2× of \
    the exact SIMT kernel's error); beside each, the `f32, exact` twin's sampled error on the same operands and \
    elements. TF32 rows: optiml kernels whose spec allows TF32, cuBLAS with \
    CUBLAS_TF32_TENSOR_OP_MATH and cuBLASLt with CUBLAS_COMPUTE_32F_FAST_TF32, sampled elements within 2e-3 of \
    their terms' magnitude (the gate's TF32 tolerance) and the two results within 4e-3 of each other (both round \
    to TF32, differently)";

fn main() -> Result<(), BoxError> {
    let Some(Device {
        stream, gpu, date, ..
    }) = Device::open_or_explain("The matmul sweep")
    else {
        return Ok(());
    };
    let library = Library::new(&stream)?;
    println!(
        "optiml matmul f32 against the best library call on {gpu}, {date} (fp32 rows: the library in exact \
         fp32; tf32 rows: TF32 math)"
    );
    // A failed check ends the run: the fp32 kernels are the reference the others are judged beside. The library's
    // own error is measured too: the fp32 rows show it beside optiml's and the exact SIMT kernel's.
    let sweep = Sweep {
        groups: &GROUPS,
        audit_baseline: true,
        keep_going: false,
    };
    let results = sweep.run(&stream, SWEEP, |c| {
        measure(&stream, &library, &sweep, c, |kernel, x, dc| {
            launch(&stream, kernel, c, x, dc)
        })
    })?;
    results.print_summary();
    if let Some(dir) = arg_value("--out") {
        let doc = serde_json::json!({
            "date": date, "gpu": gpu,
            "method": METHOD,
            "geomean_speed_vs_library": results.geomean(0),
            "geomean_over": "the plain f32 matrix-matrix rows (not the matrix-vector, TF32 or `f32, exact` ones)",
            "geomean_tf32_speed_vs_library_tf32": results.geomean(1),
            "geomean_exact_speed_vs_library": results.geomean(2),
            "copy_bandwidth_bytes_per_s": results.copy,
        });
        let preamble = format!(
            "# Matmul f32 against the best library call — {gpu}, {date}\n\nMethod: {METHOD}.\n"
        );
        results.write(&PathBuf::from(dir), "matmul-sweep", doc, &preamble)?;
    }
    results.finish()
}

/// Runs `kernel` (the case's, or its exact twin) at the case's shape on its operands (the bias read only by the
/// fused epilogue) into `dc`.
fn launch(
    stream: &Arc<CudaStream>,
    kernel: Kernel,
    c: &Case<Kernel>,
    x: &Operands<f32>,
    dc: &mut CudaSlice<f32>,
) -> Result<(), BoxError> {
    let Case { batch, m, n, k, .. } = *c;
    let (da, db, dbias) = (&x.da, &x.db, &x.dbias);
    match kernel {
        Kernel::Gemm => gemm(stream, da, db, dc, m, n, k)?,
        Kernel::Nt => gemm_nt(stream, da, db, dc, m, n, k)?,
        Kernel::Tn => gemm_tn(stream, da, db, dc, m, n, k)?,
        Kernel::Bmm => bmm(stream, da, db, dc, batch, m, n, k)?,
        Kernel::SharedB => bmm_shared_b(stream, da, db, dc, batch, m, n, k)?,
        Kernel::BiasGelu => gemm_bias_gelu(stream, da, db, dc, dbias, m, n, k)?,
        Kernel::Tf32Gemm => gemm_tf32(stream, da, db, dc, m, n, k)?,
        Kernel::Tf32Nt => gemm_tf32_nt(stream, da, db, dc, m, n, k)?,
        Kernel::Tf32Tn => gemm_tf32_tn(stream, da, db, dc, m, n, k)?,
        Kernel::Tf32Bmm => bmm_tf32(stream, da, db, dc, batch, m, n, k)?,
        Kernel::Tf32BiasGelu => gemm_tf32_bias_gelu(stream, da, db, dc, dbias, m, n, k)?,
        Kernel::GemmExact => gemm_exact(stream, da, db, dc, m, n, k)?,
        Kernel::NtExact => gemm_nt_exact(stream, da, db, dc, m, n, k)?,
        Kernel::TnExact => gemm_tn_exact(stream, da, db, dc, m, n, k)?,
        Kernel::BmmExact => bmm_exact(stream, da, db, dc, batch, m, n, k)?,
        Kernel::SharedBExact => bmm_shared_b_exact(stream, da, db, dc, batch, m, n, k)?,
        Kernel::BiasGeluExact => gemm_bias_gelu_exact(stream, da, db, dc, dbias, m, n, k)?,
    }
    Ok(())
}
