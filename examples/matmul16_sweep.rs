//! optiml's bf16 and fp16 matmuls against cuBLAS (`cublasGemmStridedBatchedEx`, fp32 compute) over the shapes
//! users have: square, odd, tall-skinny, small K, batched, transposed operands, a fused epilogue and a
//! matrix-vector product. Each row is one kernel declared with `#[optiml::kernel]`, checked against a float64
//! reference of the 16-bit inputs and against cuBLAS's output, then timed beside cuBLAS on the same inputs in the
//! same process. A row that fails a check is reported as FAILED and not timed; the run then exits with an error.
//!
//! ```text
//! cargo run --release -p optiml-examples --example matmul16_sweep [-- --out DIR]
//! ```
//!
//! `--out DIR` writes `matmul16-sweep.json` and `matmul16-sweep.md` there; `--kernels gemm_bf16,bmm_f16` runs
//! only the rows of those kernels. Without a GPU it builds (the kernels come from the committed cache) and says so.

use cudarc::cublas::{CudaBlas, Gemm};
use optiml::cudarc::driver::{CudaSlice, CudaStream};
use optiml::half::{bf16, f16};
use optiml_examples::{
    BoxError, GemmShape, Half, Stats, arg_value, check_matmul, copy_bandwidth, cublas_gemm16,
    describe, gelu, geomean, gpu_or_explain, poisoned16, random, random16, rel_diff, show_geomean,
    silu, time_pair, today,
};
use std::fmt::Write as _;
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

/// An activation as the float64 reference applies it.
type Activation = fn(f64) -> f64;

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
    fn dtype(self) -> Dtype {
        match self {
            Kernel::F16 | Kernel::F16Bmm | Kernel::F16Nt => Dtype::F16,
            _ => Dtype::Bf16,
        }
    }
    fn trans_a(self) -> bool {
        self == Kernel::Bf16Tn
    }
    fn trans_b(self) -> bool {
        matches!(self, Kernel::Bf16Nt | Kernel::F16Nt)
    }
    /// The fused bias + activation epilogue, by name and as the reference applies it (cuBLAS runs the plain
    /// product).
    fn epilogue(self) -> Option<(&'static str, Activation)> {
        match self {
            Kernel::Bf16BiasGelu => Some(("gelu", gelu)),
            Kernel::Bf16BiasSilu => Some(("silu", silu)),
            _ => None,
        }
    }
}

/// One row of the sweep.
#[derive(Clone, Copy, Debug)]
struct Case {
    label: &'static str,
    kernel: Kernel,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
}

impl Case {
    /// Whether one side of the product is a vector.
    fn is_gemv(&self) -> bool {
        self.m == 1 || self.n == 1
    }
    fn shape(&self) -> String {
        format!("{}×{}×{}×{}", self.batch, self.m, self.n, self.k)
    }
    fn gemm_shape(&self) -> GemmShape {
        GemmShape {
            batch: self.batch,
            m: self.m,
            n: self.n,
            k: self.k,
            trans_a: self.kernel.trans_a(),
            trans_b: self.kernel.trans_b(),
        }
    }
    fn flops(&self) -> f64 {
        2.0 * (self.batch * self.m * self.n * self.k) as f64
    }
    /// Bytes a matrix-vector product must move at least: both 16-bit operands read once, the output written once.
    fn min_bytes(&self) -> f64 {
        2.0 * (self.batch * (self.m * self.k + self.k * self.n + self.m * self.n)) as f64
    }
}

const fn case(
    label: &'static str,
    kernel: Kernel,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
) -> Case {
    Case {
        label,
        kernel,
        batch,
        m,
        n,
        k,
    }
}

const SWEEP: &[Case] = &[
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

const METHOD: &str = "CUDA events on one stream, 5 warm-up runs each, then 30 rounds timing one optiml and one cuBLAS \
    run, alternating which goes first (medians); the same inputs for both: uniform [-1, 1) rounded to the 16-bit \
    type on the host, the epilogue's bias fp32; cuBLAS through cudarc: cublasGemmStridedBatchedEx (batch 1 for one \
    matrix) with 16-bit A, B and C, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT, default math mode; every optiml \
    output checked for NaN (the buffer is poisoned first) and 2048 sampled elements against float64 dot products \
    of the 16-bit inputs within 8e-3 (bf16) / 1e-3 (fp16) of their terms' magnitude (twice the one rounding of \
    the output, which covers fp32 accumulation too); before any timing cuBLAS's output (poisoned first too) is measured against the same \
    reference and compared with optiml's (relative L2 within twice that tolerance: both round once, possibly to \
    neighbouring values) except where optiml fuses an epilogue cuBLAS does not run; a row failing any check is \
    reported as FAILED and not timed. TFLOP/s count 2·batch·m·n·k";

/// What a row that passed its checks measured.
struct Measured {
    ours: Stats,
    cublas: Stats,
    /// optiml's largest sampled error against float64, relative to the terms' magnitude.
    error: f64,
    /// cuBLAS's (of the plain product, on epilogue rows).
    cublas_error: f64,
    /// ‖optiml − cuBLAS‖₂ / ‖cuBLAS‖₂; `None` where optiml fuses an epilogue cuBLAS does not run.
    diff: Option<f64>,
}

/// One row: its measurement, or why it failed.
struct Row {
    case: Case,
    outcome: Result<Measured, String>,
}

impl Row {
    fn measured(&self) -> Option<&Measured> {
        self.outcome.as_ref().ok()
    }
    fn json(&self) -> serde_json::Value {
        let c = self.case;
        let mut row = serde_json::json!({
            "case": c.label, "kernel": c.kernel.name(), "dtype": c.kernel.dtype().name(),
            "batch": c.batch, "m": c.m, "n": c.n, "k": c.k,
            "trans_a": c.kernel.trans_a(), "trans_b": c.kernel.trans_b(),
            "epilogue": c.kernel.epilogue().map(|(act, _)| format!("bias + {act} (fused; cuBLAS runs the plain gemm)")),
            "tolerance": c.kernel.dtype().tolerance(),
        });
        let extra = match &self.outcome {
            Ok(r) => serde_json::json!({
                "status": "ok",
                "optiml": r.ours.json(), "optiml_tflops": tflops(&c, &r.ours),
                "cublas": r.cublas.json(), "cublas_tflops": tflops(&c, &r.cublas),
                "speed_vs_cublas": ratio(r),
                "max_rel_err_sampled": r.error, "cublas_max_rel_err_sampled": r.cublas_error,
                "rel_l2_vs_cublas": r.diff,
                "min_bytes": c.min_bytes(), "optiml_bytes_per_s": bandwidth(&c, &r.ours),
                "cublas_bytes_per_s": bandwidth(&c, &r.cublas),
            }),
            Err(why) => serde_json::json!({"status": "failed", "failure": why}),
        };
        if let (Some(row), serde_json::Value::Object(extra)) = (row.as_object_mut(), extra) {
            row.extend(extra);
        }
        row
    }
}

fn tflops(c: &Case, s: &Stats) -> f64 {
    c.flops() / (s.median_ms * 1e-3) / 1e12
}

/// optiml's speed over cuBLAS's (above 1: optiml is faster).
fn ratio(r: &Measured) -> f64 {
    r.cublas.median_ms / r.ours.median_ms
}

/// Bytes per second at the minimum traffic (meaningful for the memory-bound matrix-vector rows).
fn bandwidth(c: &Case, s: &Stats) -> f64 {
    c.min_bytes() / (s.median_ms * 1e-3)
}

fn main() -> Result<(), BoxError> {
    let Some(ctx) = gpu_or_explain("The 16-bit matmul sweep") else {
        return Ok(());
    };
    let stream = ctx.default_stream();
    let gpu = describe(&ctx);
    let date = today();
    // SAFETY: probing only dlopens and drops library handles; cudarc panics when the library is missing.
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        return Err("cuBLAS is not installed: the sweep has nothing to compare with".into());
    }
    let blas = CudaBlas::new(stream.clone())?;
    println!(
        "optiml matmul bf16/fp16 against cuBLAS on {gpu}, {date} (cuBLAS cublasGemmStridedBatchedEx, \
         CUBLAS_COMPUTE_32F)"
    );
    let copy = copy_bandwidth(&stream)?;
    println!("device-to-device copy: {:.2} TB/s", copy / 1e12);
    println!(
        "{:<15} {:<19} {:>22} | {:>9} {:>8} | {:>9} {:>8} | {:>6} {:>8} {:>8}",
        "case",
        "kernel",
        "batch×m×n×k",
        "optiml ms",
        "TFLOP/s",
        "cuBLAS ms",
        "TFLOP/s",
        "ratio",
        "error",
        "vs cuBLAS"
    );
    let only = arg_value("--kernels");
    let wanted = |c: &Case| {
        only.as_deref()
            .is_none_or(|list| list.split(',').any(|k| k.trim() == c.kernel.name()))
    };
    let mut rows = Vec::new();
    for c in SWEEP.iter().filter(|c| wanted(c)) {
        let row = Row {
            case: *c,
            outcome: run(&stream, &blas, c).map_err(|e| e.to_string()),
        };
        let head = format!("{:<15} {:<19} {:>22}", c.label, c.kernel.name(), c.shape());
        match &row.outcome {
            Ok(r) => println!(
                "{head} | {:>9.4} {:>8.1} | {:>9.4} {:>8.1} | {:>5.2}x {:>8.1e} {:>8}",
                r.ours.median_ms,
                tflops(c, &r.ours),
                r.cublas.median_ms,
                tflops(c, &r.cublas),
                ratio(r),
                r.error,
                r.diff.map_or("–".into(), |d| format!("{d:.1e}"))
            ),
            Err(why) => println!("{head} | FAILED: {why}"),
        }
        rows.push(row);
    }
    // Only rows that passed are timed, so only they enter the means.
    let matmul = |d: Dtype| -> Vec<&Row> {
        rows.iter()
            .filter(|r| r.case.kernel.dtype() == d && !r.case.is_gemv())
            .collect()
    };
    let (bf16_rows, f16_rows) = (matmul(Dtype::Bf16), matmul(Dtype::F16));
    let mean = |rows: &[&Row]| geomean(rows.iter().filter_map(|r| r.measured()).map(ratio));
    let (geomean_bf16, geomean_f16) = (mean(&bf16_rows), mean(&f16_rows));
    let gemv: Vec<&Row> = rows.iter().filter(|r| r.case.is_gemv()).collect();
    let failed = rows.iter().filter(|r| r.outcome.is_err()).count();
    println!(
        "geometric mean of optiml / cuBLAS speed over the matrix-matrix rows that passed: bf16 {}x ({} rows), \
         fp16 {}x ({} rows)",
        show_geomean(geomean_bf16),
        bf16_rows.iter().filter(|r| r.measured().is_some()).count(),
        show_geomean(geomean_f16),
        f16_rows.iter().filter(|r| r.measured().is_some()).count(),
    );
    for r in &gemv {
        if let Some(m) = r.measured() {
            println!(
                "{:<16} {:>22}: {:.2} TB/s = {:.0}% of the copy bandwidth (cuBLAS {:.2} TB/s)",
                r.case.label,
                r.case.shape(),
                bandwidth(&r.case, &m.ours) / 1e12,
                100.0 * bandwidth(&r.case, &m.ours) / copy,
                bandwidth(&r.case, &m.cublas) / 1e12
            );
        }
    }
    if let Some(dir) = arg_value("--out") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir)?;
        let doc = serde_json::json!({
            "date": date, "gpu": gpu,
            "baseline": "cuBLAS cublasGemmStridedBatchedEx, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT",
            "method": METHOD,
            "geomean_bf16_speed_vs_cublas": geomean_bf16,
            "geomean_fp16_speed_vs_cublas": geomean_f16,
            "geomean_over": "the matrix-matrix rows of that type that passed their checks (not the matrix-vector one)",
            "copy_bandwidth_bytes_per_s": copy,
            "failed_rows": failed,
            "rows": rows.iter().map(Row::json).collect::<Vec<_>>(),
        });
        std::fs::write(
            dir.join("matmul16-sweep.json"),
            serde_json::to_string_pretty(&doc)? + "\n",
        )?;
        let mut md = format!(
            "# Matmul bf16 / fp16 against cuBLAS — {gpu}, {date}\n\nBaseline: cuBLAS cublasGemmStridedBatchedEx, \
             CUBLAS_COMPUTE_32F.\n\nMethod: {METHOD}.\n"
        );
        for (name, rows, mean) in [
            ("bf16", &bf16_rows, geomean_bf16),
            ("fp16", &f16_rows, geomean_f16),
        ] {
            matmul_table(&mut md, name, rows, mean);
        }
        gemv_table(&mut md, &gemv, copy);
        std::fs::write(dir.join("matmul16-sweep.md"), md)?;
        println!("wrote {}", dir.display());
    }
    if failed > 0 {
        return Err(format!("{failed} row(s) FAILED their checks (see above)").into());
    }
    Ok(())
}

/// One type's matrix-matrix rows and their geometric mean.
fn matmul_table(md: &mut String, dtype: &str, rows: &[&Row], geomean: Option<f64>) {
    let _ = write!(
        md,
        "\n## {dtype}\n\n| case | kernel | batch × m × n × k | optiml ms (min–max) | TFLOP/s | cuBLAS ms (min–max) | \
         TFLOP/s | optiml / cuBLAS | max sampled error (cuBLAS's) | rel. L2 vs cuBLAS |\n\
         |---|---|---|---|---:|---|---:|---:|---:|---:|\n"
    );
    for r in rows {
        let c = r.case;
        let _ = match &r.outcome {
            Ok(m) => writeln!(
                md,
                "| {} | `{}` | {} | {} | {:.1} | {} | {:.1} | {:.2}×{} | {:.1e} ({:.1e}) | {} |",
                c.label,
                c.kernel.name(),
                c.shape(),
                m.ours.cell(),
                tflops(&c, &m.ours),
                m.cublas.cell(),
                tflops(&c, &m.cublas),
                ratio(m),
                if c.kernel.epilogue().is_some() {
                    " (cuBLAS without the epilogue)"
                } else {
                    ""
                },
                m.error,
                m.cublas_error,
                m.diff.map_or("–".into(), |d| format!("{d:.1e}"))
            ),
            Err(why) => failed_row(md, &c, why),
        };
    }
    let measured = rows.iter().filter(|r| r.measured().is_some()).count();
    let _ = writeln!(
        md,
        "\nGeometric mean of optiml / cuBLAS speed over the {measured} {dtype} rows that passed: **{}×**.",
        show_geomean(geomean)
    );
}

/// The matrix-vector section.
fn gemv_table(md: &mut String, gemv: &[&Row], copy: f64) {
    if gemv.is_empty() {
        return;
    }
    let _ = write!(
        md,
        "\n## Matrix × vector (memory-bound)\n\nDevice-to-device copy in the same run: {:.2} TB/s (bytes read plus \
         written). Bandwidth counts the least traffic: both operands read once, the output written once.\n\n\
         | case | kernel | batch × m × n × k | optiml ms (min–max) | TB/s | of copy | cuBLAS ms (min–max) | TB/s | \
         optiml / cuBLAS | max sampled error (cuBLAS's) | rel. L2 vs cuBLAS |\n\
         |---|---|---|---|---:|---:|---|---:|---:|---:|---:|\n",
        copy / 1e12
    );
    for r in gemv {
        let c = r.case;
        let _ = match &r.outcome {
            Ok(m) => writeln!(
                md,
                "| {} | `{}` | {} | {} | {:.2} | {:.0}% | {} | {:.2} | {:.2}× | {:.1e} ({:.1e}) | {} |",
                c.label,
                c.kernel.name(),
                c.shape(),
                m.ours.cell(),
                bandwidth(&c, &m.ours) / 1e12,
                100.0 * bandwidth(&c, &m.ours) / copy,
                m.cublas.cell(),
                bandwidth(&c, &m.cublas) / 1e12,
                ratio(m),
                m.error,
                m.cublas_error,
                m.diff.map_or("–".into(), |d| format!("{d:.1e}"))
            ),
            Err(why) => failed_row(md, &c, why),
        };
    }
}

/// A failed row: its reason in place of the numbers (pipes escaped so the table holds).
fn failed_row(md: &mut String, c: &Case, why: &str) -> std::fmt::Result {
    writeln!(
        md,
        "| {} | `{}` | {} | **FAILED**: {} |",
        c.label,
        c.kernel.name(),
        c.shape(),
        why.replace('|', "\\|")
    )
}

/// Runs one row's kernel, each arm typed to its kernel's element type.
fn run(stream: &Arc<CudaStream>, blas: &CudaBlas, c: &Case) -> Result<Measured, BoxError> {
    let Case { batch, m, n, k, .. } = *c;
    match c.kernel {
        Kernel::Bf16 => measure(stream, blas, c, |x: &Inputs<bf16>, out| {
            Ok(gemm_bf16(stream, &x.a, &x.b, out, m, n, k)?)
        }),
        Kernel::Bf16Nt => measure(stream, blas, c, |x: &Inputs<bf16>, out| {
            Ok(gemm_bf16_nt(stream, &x.a, &x.b, out, m, n, k)?)
        }),
        Kernel::Bf16Tn => measure(stream, blas, c, |x: &Inputs<bf16>, out| {
            Ok(gemm_bf16_tn(stream, &x.a, &x.b, out, m, n, k)?)
        }),
        Kernel::Bf16Bmm => measure(stream, blas, c, |x: &Inputs<bf16>, out| {
            Ok(bmm_bf16(stream, &x.a, &x.b, out, batch, m, n, k)?)
        }),
        Kernel::Bf16BiasGelu => measure(stream, blas, c, |x: &Inputs<bf16>, out| {
            Ok(gemm_bf16_bias_gelu(
                stream, &x.a, &x.b, out, &x.bias, m, n, k,
            )?)
        }),
        Kernel::Bf16BiasSilu => measure(stream, blas, c, |x: &Inputs<bf16>, out| {
            Ok(gemm_bf16_bias_silu(
                stream, &x.a, &x.b, out, &x.bias, m, n, k,
            )?)
        }),
        Kernel::F16 => measure(stream, blas, c, |x: &Inputs<f16>, out| {
            Ok(gemm_f16(stream, &x.a, &x.b, out, m, n, k)?)
        }),
        Kernel::F16Bmm => measure(stream, blas, c, |x: &Inputs<f16>, out| {
            Ok(bmm_f16(stream, &x.a, &x.b, out, batch, m, n, k)?)
        }),
        Kernel::F16Nt => measure(stream, blas, c, |x: &Inputs<f16>, out| {
            Ok(gemm_f16_nt(stream, &x.a, &x.b, out, m, n, k)?)
        }),
    }
}

/// A row's device inputs: the 16-bit operands and the fp32 bias (read only by the epilogue kernel).
struct Inputs<T> {
    a: CudaSlice<T>,
    b: CudaSlice<T>,
    bias: CudaSlice<f32>,
}

/// Checks one row (optiml against float64, cuBLAS against float64 and optiml), then times it beside cuBLAS.
/// Any failed check is an error, so nothing unchecked is timed.
fn measure<T: Half>(
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    c: &Case,
    launch: impl Fn(&Inputs<T>, &mut CudaSlice<T>) -> Result<(), BoxError>,
) -> Result<Measured, BoxError>
where
    CudaBlas: Gemm<T>,
{
    let Case { batch, m, n, k, .. } = *c;
    let (a, seed_a) = random16::<T>(batch * m * k);
    let (b, seed_b) = random16::<T>(batch * k * n);
    let (bias, seed_bias) = random(n, None);
    let seeds = format!("seeds {seed_a}, {seed_b}, {seed_bias}");
    let inputs = Inputs {
        a: stream.clone_htod(&a)?,
        b: stream.clone_htod(&b)?,
        bias: stream.clone_htod(&bias)?,
    };
    let (shape, tol) = (c.gemm_shape(), c.kernel.dtype().tolerance());
    let epilogue = c.kernel.epilogue().map(|(_, act)| (bias.as_slice(), act));

    let mut dc = poisoned16::<T>(stream, batch * m * n)?;
    launch(&inputs, &mut dc)?;
    let ours = stream.clone_dtoh(&dc)?;
    let error = check_matmul(shape, (&a, &b, epilogue), &ours, 2048, tol)
        .map_err(|e| format!("optiml: {e} ({seeds})"))?;

    let mut dref = poisoned16::<T>(stream, batch * m * n)?;
    cublas_gemm16(blas, shape, &inputs.a, &inputs.b, &mut dref)?;
    let theirs = stream.clone_dtoh(&dref)?;
    // Only measured, not held to `tol`: a baseline less precise than optiml is a finding, not a failure of the row.
    let cublas_error = check_matmul(shape, (&a, &b, None), &theirs, 2048, f64::INFINITY)
        .map_err(|e| format!("cuBLAS: {e} ({seeds})"))?;
    let diff = if epilogue.is_none() {
        // The baseline must compute the same thing, or the ratio means nothing. Each rounds an fp32 sum once
        // (within `tol` of the exact product), so the two lie within twice that of each other; both outputs were
        // found finite above, so the difference is a number.
        let diff = rel_diff(&ours, &theirs);
        if diff > 2.0 * tol {
            return Err(format!(
                "cuBLAS and optiml disagree: relative L2 {diff:e} > {:e} ({seeds})",
                2.0 * tol
            )
            .into());
        }
        Some(diff)
    } else {
        None
    };

    let (ours, cublas) = time_pair(
        stream,
        5,
        30,
        || launch(&inputs, &mut dc),
        || cublas_gemm16(blas, shape, &inputs.a, &inputs.b, &mut dref),
    )?;
    Ok(Measured {
        ours,
        cublas,
        error,
        cublas_error,
        diff,
    })
}
