//! Issue 17's held-out shapes: five fp32 products at shapes no tuning list names, in a crate whose cache starts
//! empty (its build generates the untuned defaults), each checked against float64 and timed beside the best
//! library call in the same process (`optiml_examples::sweep`, as `matmul_sweep` does); `torch.matmul` is timed
//! in the same device call by `bench/harness/matmul_torch.py`. `bench/harness/heldout_gpu.sh` runs it before
//! and after `cargo optiml tune --shape` at each shape.
//!
//! ```text
//! cargo run --release --manifest-path bench/heldout/Cargo.toml [-- --out DIR]
//! ```

use optiml::cudarc::driver::{CudaSlice, CudaStream};
use optiml_examples::library::{Library, Math};
use optiml_examples::matmul::Operands;
use optiml_examples::sweep::{Case, Group, Sweep, SweepKernel, case, measure};
use optiml_examples::{BoxError, Device, arg_value};
use std::path::PathBuf;
use std::sync::Arc;

/// `C = A·B`.
#[optiml::kernel("matmul, f32")]
fn gemm(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// `C[z] = A[z]·B[z]`.
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

/// `C = Aᵀ·B` (A stored `k × m`).
#[optiml::kernel("C = Aᵀ·B, f32")]
fn gemm_tn(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = A·Bᵀ` (B stored `n × k`).
#[optiml::kernel("C = A·Bᵀ, f32")]
fn gemm_nt(
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    Gemm,
    Bmm,
    Tn,
    Nt,
}

impl SweepKernel for Kernel {
    fn name(self) -> &'static str {
        match self {
            Kernel::Gemm => "gemm",
            Kernel::Bmm => "bmm",
            Kernel::Tn => "gemm_tn",
            Kernel::Nt => "gemm_nt",
        }
    }
    fn trans_a(self) -> bool {
        self == Kernel::Tn
    }
    fn trans_b(self) -> bool {
        self == Kernel::Nt
    }
    fn math(self) -> Math {
        Math::Exact
    }
    /// Plain `f32`: fp32 rounding, whichever kernel (SIMT or 3xTF32) the cache holds.
    fn tolerance(self) -> f64 {
        1e-5
    }
    fn agreement(self) -> f64 {
        1e-5
    }
    fn element_bytes(self) -> usize {
        4
    }
    fn group(self) -> usize {
        0
    }
    fn json(self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::from_iter([("precision".into(), "fp32".into())])
    }
}

const GROUPS: [Group; 1] = [Group {
    name: "fp32",
    heading: None,
}];

/// The issue's five: an irregular shape in the thousands, a batched rectangular product, `Aᵀ·B` and `A·Bᵀ` at
/// 8192, and a large K (two 512-row panels: 32 output tiles, so split-K or nothing fills the GPU).
const HELD_OUT: &[Case<Kernel>] = &[
    case("irregular", Kernel::Gemm, 1, 8205, 5921, 2949),
    case("batched rectangular", Kernel::Bmm, 128, 512, 2048, 1024),
    case("Aᵀ·B", Kernel::Tn, 1, 2048, 2048, 8192),
    case("A·Bᵀ", Kernel::Nt, 1, 8192, 8192, 8192),
    case("large K", Kernel::Gemm, 1, 512, 512, 262144),
];

const METHOD: &str = "a crate of its own whose cache held only the untuned defaults until `cargo optiml tune \
    --shape` ran at each row's shape; CUDA events on one stream; the library call is the fastest, on the row's \
    own operands (10 runs each, medians), of cuBLAS (sgemm / sgemm_strided_batched, 32 MiB workspace) and each \
    algorithm (up to 8) cuBLASLt's heuristic proposes within a 32 MiB workspace, in exact fp32; then 5 warm-up \
    runs each and 30 rounds timing one optiml and one library run, alternating which goes first (medians); the \
    same inputs for both; every optiml output checked for NaN (the buffer is poisoned first) and 2048 sampled \
    elements against float64 within 1e-5 of their terms' magnitude; the library's output compared with \
    optiml's (relative L2 ≤ 1e-5)";

fn main() -> Result<(), BoxError> {
    let Some(Device {
        stream, gpu, date, ..
    }) = Device::open_or_explain("The held-out shapes")
    else {
        return Ok(());
    };
    let library = Library::new(&stream)?;
    println!("optiml at held-out fp32 shapes against the best library call on {gpu}, {date}");
    let sweep = Sweep {
        groups: &GROUPS,
        audit_baseline: true,
        keep_going: true,
    };
    let results = sweep.run(&stream, HELD_OUT, |c| {
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
        });
        let preamble = format!(
            "# Held-out fp32 shapes against the best library call — {gpu}, {date}\n\nMethod: {METHOD}.\n"
        );
        results.write(&PathBuf::from(dir), "heldout", doc, &preamble)?;
    }
    results.finish()
}

/// Runs `kernel` at the case's shape on its operands into `dc`.
fn launch(
    stream: &Arc<CudaStream>,
    kernel: Kernel,
    c: &Case<Kernel>,
    x: &Operands<f32>,
    dc: &mut CudaSlice<f32>,
) -> Result<(), BoxError> {
    let Case { batch, m, n, k, .. } = *c;
    let (da, db) = (&x.da, &x.db);
    match kernel {
        Kernel::Gemm => gemm(stream, da, db, dc, m, n, k)?,
        Kernel::Bmm => bmm(stream, da, db, dc, batch, m, n, k)?,
        Kernel::Tn => gemm_tn(stream, da, db, dc, m, n, k)?,
        Kernel::Nt => gemm_nt(stream, da, db, dc, m, n, k)?,
    }
    Ok(())
}
