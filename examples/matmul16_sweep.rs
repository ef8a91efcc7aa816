//! optiml's bf16 and fp16 matmuls against the best library call (the fastest of `cublasGemmStridedBatchedEx` on
//! a handle with a workspace and cuBLASLt's heuristic algorithms, fp32 compute; `optiml_examples::library`) over
//! the shapes users have: square, odd, tall-skinny, small K, batched, transposed operands, a fused epilogue and a
//! matrix-vector product. Each row is one kernel declared with `#[optiml::kernel]`, checked against a float64
//! reference of the 16-bit inputs and against the library's output, then timed beside the library on the same
//! inputs in the same process. A row that fails a check is reported as FAILED and not timed; the run then exits
//! with an error.
//!
//! ```text
//! cargo run --release -p optiml-examples --example matmul16_sweep [-- --out DIR]
//! ```
//!
//! `--out DIR` writes `matmul16-sweep.json` and `matmul16-sweep.md` there; `--kernels gemm_bf16,bmm_f16` runs
//! only the rows of those kernels. Without a GPU it builds (the kernels come from the committed cache) and says so.
//! The checks, timing and tables are the shared sweep driver's (`optiml_examples::sweep`); this file holds the
//! kernels, the cases and how each kernel is launched.

use optiml::cudarc::driver::{CudaSlice, CudaStream};
use optiml::half::{bf16, f16};
use optiml_examples::library::Library;
use optiml_examples::matmul::Operands;
use optiml_examples::sweep::{Case, Group, Measured, Sweep, SweepKernel, case, measure};
use optiml_examples::{BoxError, Device, Element, arg_value, gelu, silu};
use std::path::PathBuf;
use std::sync::Arc;

/// `C = A·B`, row-major.
#[optiml::kernel("matmul, bf16")]
fn gemm_bf16(
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = A·Bᵀ` (B stored `n × k`).
#[optiml::kernel("C = A·Bᵀ, bf16")]
fn gemm_bf16_nt(
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = Aᵀ·B` (A stored `k × m`).
#[optiml::kernel("matmul, A transposed, bf16")]
fn gemm_bf16_tn(
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = gelu(A·B + bias)`, the epilogue fused (the bias stays fp32).
#[optiml::kernel("matmul with bias and gelu, bf16")]
fn gemm_bf16_bias_gelu(
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    bias: &CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = silu(A·B + bias)`, the epilogue fused (the bias stays fp32).
#[optiml::kernel("matmul with bias and silu, bf16")]
fn gemm_bf16_bias_silu(
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    bias: &CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
);

/// Batched, packed batch items.
#[optiml::kernel("batched matmul, bf16")]
fn bmm_bf16(
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = A·B` in fp16.
#[optiml::kernel("matmul, f16")]
fn gemm_f16(
    a: &CudaSlice<f16>,
    b: &CudaSlice<f16>,
    c: &mut CudaSlice<f16>,
    m: usize,
    n: usize,
    k: usize,
);

/// Batched, fp16.
#[optiml::kernel("batched matmul, fp16")]
fn bmm_f16(
    a: &CudaSlice<f16>,
    b: &CudaSlice<f16>,
    c: &mut CudaSlice<f16>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
);

/// `C = A·Bᵀ` in fp16.
#[optiml::kernel("matmul, fp16, B transposed")]
fn gemm_f16_nt(
    a: &CudaSlice<f16>,
    b: &CudaSlice<f16>,
    c: &mut CudaSlice<f16>,
    m: usize,
    n: usize,
    k: usize,
);

/// The element type of a row's A, B and C.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Dtype {
    Bf16,
    F16,
}

impl Dtype {
    fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => bf16::NAME,
            Dtype::F16 => f16::NAME,
        }
    }
    /// The sampled check's tolerance relative to the terms' magnitude (the gate's `Tolerance::BF16` / `F16`
    /// per element): twice the one rounding of the output (unit roundoff 2⁻⁸ ≈ 3.9e-3 for bf16, 2⁻¹¹ ≈ 4.9e-4
    /// for fp16), which also covers fp32 accumulation.
    fn tolerance(self) -> f64 {
        match self {
            Dtype::Bf16 => 8e-3,
            Dtype::F16 => 1e-3,
        }
    }
}

/// Which declared kernel a row runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kernel {
    Bf16,
    Bf16Nt,
    Bf16Tn,
    Bf16Bmm,
    Bf16BiasGelu,
    Bf16BiasSilu,
    F16,
    F16Bmm,
    F16Nt,
}

impl Kernel {
    fn dtype(self) -> Dtype {
        match self {
            Kernel::F16 | Kernel::F16Bmm | Kernel::F16Nt => Dtype::F16,
            _ => Dtype::Bf16,
        }
    }
}

impl SweepKernel for Kernel {
    fn name(self) -> &'static str {
        match self {
            Kernel::Bf16 => "gemm_bf16",
            Kernel::Bf16Nt => "gemm_bf16_nt",
            Kernel::Bf16Tn => "gemm_bf16_tn",
            Kernel::Bf16Bmm => "bmm_bf16",
            Kernel::Bf16BiasGelu => "gemm_bf16_bias_gelu",
            Kernel::Bf16BiasSilu => "gemm_bf16_bias_silu",
            Kernel::F16 => "gemm_f16",
            Kernel::F16Bmm => "bmm_f16",
            Kernel::F16Nt => "gemm_f16_nt",
        }
    }
    fn trans_a(self) -> bool {
        self == Kernel::Bf16Tn
    }
    fn trans_b(self) -> bool {
        matches!(self, Kernel::Bf16Nt | Kernel::F16Nt)
    }
    fn epilogue(self) -> Option<(&'static str, fn(f64) -> f64)> {
        match self {
            Kernel::Bf16BiasGelu => Some(("gelu", gelu)),
            Kernel::Bf16BiasSilu => Some(("silu", silu)),
            _ => None,
        }
    }
    fn tolerance(self) -> f64 {
        self.dtype().tolerance()
    }
    /// Each side rounds an fp32 sum once (within the tolerance of the exact product), so the two lie within twice
    /// that of each other.
    fn agreement(self) -> f64 {
        2.0 * self.tolerance()
    }
    fn element_bytes(self) -> usize {
        2
    }
    fn group(self) -> usize {
        match self.dtype() {
            Dtype::Bf16 => 0,
            Dtype::F16 => 1,
        }
    }
    fn json(self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::from_iter([
            ("dtype".into(), self.dtype().name().into()),
            ("tolerance".into(), self.tolerance().into()),
        ])
    }
}

/// One table per type.
const GROUPS: [Group; 2] = [
    Group {
        name: "bf16",
        heading: Some("bf16"),
    },
    Group {
        name: "fp16",
        heading: Some("fp16"),
    },
];

const SWEEP: &[Case<Kernel>] = &[
    case("square", Kernel::Bf16, 1, 8192, 8192, 8192),
    case("square", Kernel::Bf16, 1, 4096, 4096, 4096),
    case("square", Kernel::Bf16, 1, 2048, 2048, 2048),
    case("irregular", Kernel::Bf16, 1, 1000, 1000, 1000),
    case("odd", Kernel::Bf16, 1, 4095, 4097, 1023),
    case("tall-skinny", Kernel::Bf16, 1, 32768, 128, 1024),
    case("small K", Kernel::Bf16, 1, 4096, 4096, 32),
    case("batched", Kernel::Bf16Bmm, 256, 1024, 1024, 1024),
    case("batched", Kernel::Bf16Bmm, 16, 1024, 1024, 1024),
    case("B transposed", Kernel::Bf16Nt, 1, 4096, 4096, 4096),
    case("A transposed", Kernel::Bf16Tn, 1, 4096, 4096, 4096),
    case("bias + gelu", Kernel::Bf16BiasGelu, 1, 4096, 4096, 4096),
    case("bias + silu", Kernel::Bf16BiasSilu, 1, 4096, 4096, 4096),
    // Memory-bound: judged against the copy bandwidth measured in the same run.
    case("matrix × vector", Kernel::Bf16, 1, 8192, 1, 8192),
    case("square", Kernel::F16, 1, 4096, 4096, 4096),
    case("batched", Kernel::F16Bmm, 256, 1024, 1024, 1024),
    case("B transposed", Kernel::F16Nt, 1, 4096, 4096, 4096),
];

const METHOD: &str = "CUDA events on one stream; the library call is the fastest, on the row's own operands \
    (10 runs each, medians), of cuBLAS through cudarc (cublasGemmStridedBatchedEx, batch 1 for one matrix, 16-bit \
    A, B and C, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) on a handle with a 32 MiB workspace set and each \
    algorithm (up to 8) cuBLASLt's heuristic proposes for the problem (CUBLAS_COMPUTE_32F) within a 32 MiB \
    workspace; then 5 warm-up runs each and 30 rounds timing one optiml and one library run, alternating which \
    goes first (medians); the same inputs for both: uniform [-1, 1) rounded to the 16-bit \
    type on the host, the epilogue's bias fp32; every optiml \
    output checked for NaN (the buffer is poisoned first) and 2048 sampled elements against float64 dot products \
    of the 16-bit inputs within 8e-3 (bf16) / 1e-3 (fp16) of their terms' magnitude (twice the one rounding of \
    the output, which covers fp32 accumulation too); before any timing the library's output (poisoned first too) \
    is measured against the same reference and compared with optiml's (relative L2 within twice that tolerance: \
    both round once, possibly to neighbouring values) except where optiml fuses an epilogue the library does not \
    run; a row failing any check is reported as FAILED and not timed. TFLOP/s count 2·batch·m·n·k";

fn main() -> Result<(), BoxError> {
    let Some(Device {
        stream, gpu, date, ..
    }) = Device::open_or_explain("The 16-bit matmul sweep")
    else {
        return Ok(());
    };
    let library = Library::new(&stream)?;
    println!(
        "optiml matmul bf16/fp16 against the best library call on {gpu}, {date} (cuBLAS with a workspace, \
         cuBLASLt's heuristic algorithms; CUBLAS_COMPUTE_32F)"
    );
    let sweep = Sweep {
        groups: &GROUPS,
        audit_baseline: true,
        keep_going: true,
    };
    let results = sweep.run(&stream, SWEEP, |c| run(&stream, &library, &sweep, c))?;
    results.print_summary();
    if let Some(dir) = arg_value("--out") {
        let doc = serde_json::json!({
            "date": date, "gpu": gpu,
            "baseline": "the fastest per row of cuBLAS cublasGemmStridedBatchedEx (32 MiB workspace) and cuBLASLt's heuristic algorithms (32 MiB workspace), CUBLAS_COMPUTE_32F",
            "method": METHOD,
            "geomean_bf16_speed_vs_library": results.geomean(0),
            "geomean_fp16_speed_vs_library": results.geomean(1),
            "geomean_over": "the matrix-matrix rows of that type that passed their checks (not the matrix-vector one)",
            "copy_bandwidth_bytes_per_s": results.copy,
            "failed_rows": results.failed(),
        });
        let preamble = format!(
            "# Matmul bf16 / fp16 against the best library call — {gpu}, {date}\n\nBaseline: per row, the fastest \
             of cuBLAS (cublasGemmStridedBatchedEx, 32 MiB workspace) and cuBLASLt's heuristic algorithms, \
             CUBLAS_COMPUTE_32F.\n\nMethod: {METHOD}.\n"
        );
        results.write(&PathBuf::from(dir), "matmul16-sweep", doc, &preamble)?;
    }
    results.finish()
}

/// Measures one row, each arm typed to its kernel's element type (the fp32 bias read only by the fused epilogues).
fn run(
    stream: &Arc<CudaStream>,
    library: &Library,
    sweep: &Sweep<'_>,
    c: &Case<Kernel>,
) -> Result<Measured, BoxError> {
    let Case { batch, m, n, k, .. } = *c;
    match c.kernel {
        Kernel::Bf16 => measure(stream, library, sweep, c, |_, x: &Operands<bf16>, out| {
            Ok(gemm_bf16(stream, &x.da, &x.db, out, m, n, k)?)
        }),
        Kernel::Bf16Nt => measure(stream, library, sweep, c, |_, x: &Operands<bf16>, out| {
            Ok(gemm_bf16_nt(stream, &x.da, &x.db, out, m, n, k)?)
        }),
        Kernel::Bf16Tn => measure(stream, library, sweep, c, |_, x: &Operands<bf16>, out| {
            Ok(gemm_bf16_tn(stream, &x.da, &x.db, out, m, n, k)?)
        }),
        Kernel::Bf16Bmm => measure(stream, library, sweep, c, |_, x: &Operands<bf16>, out| {
            Ok(bmm_bf16(stream, &x.da, &x.db, out, batch, m, n, k)?)
        }),
        Kernel::Bf16BiasGelu => measure(stream, library, sweep, c, |_, x: &Operands<bf16>, out| {
            Ok(gemm_bf16_bias_gelu(
                stream, &x.da, &x.db, out, &x.dbias, m, n, k,
            )?)
        }),
        Kernel::Bf16BiasSilu => measure(stream, library, sweep, c, |_, x: &Operands<bf16>, out| {
            Ok(gemm_bf16_bias_silu(
                stream, &x.da, &x.db, out, &x.dbias, m, n, k,
            )?)
        }),
        Kernel::F16 => measure(stream, library, sweep, c, |_, x: &Operands<f16>, out| {
            Ok(gemm_f16(stream, &x.da, &x.db, out, m, n, k)?)
        }),
        Kernel::F16Bmm => measure(stream, library, sweep, c, |_, x: &Operands<f16>, out| {
            Ok(bmm_f16(stream, &x.da, &x.db, out, batch, m, n, k)?)
        }),
        Kernel::F16Nt => measure(stream, library, sweep, c, |_, x: &Operands<f16>, out| {
            Ok(gemm_f16_nt(stream, &x.da, &x.db, out, m, n, k)?)
        }),
    }
}
