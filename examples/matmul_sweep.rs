//! The matmul family against cuBLAS over the shapes users have: square, rectangular, odd, small K, large K,
//! tall-skinny, batched, transposed operands and a fused epilogue. Each row is one kernel declared with
//! `#[optiml::kernel]`, checked against a float64 reference on fresh random inputs, then timed beside cuBLAS on
//! the same inputs in the same process.
//!
//! ```text
//! cargo run --release -p optiml-examples --example matmul_sweep [-- --out DIR]
//! ```
//!
//! `--out DIR` writes `matmul-sweep.json` and `matmul-sweep.md` there; `--kernels gemm_tf32,bmm` runs only the
//! rows of those kernels. Without a GPU it builds (the kernels come from the committed cache) and says so.

use cudarc::cublas::CudaBlas;
use optiml::cudarc::driver::{CudaSlice, CudaStream};
use optiml_examples::{
    BoxError, GemmShape, Stats, arg_value, check_sampled, copy_bandwidth, cublas_gemm, describe,
    geomean, gpu_or_explain, poisoned, random, rel_diff, show_geomean, time_pair,
};
use std::fmt::Write as _;
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
}

impl Kernel {
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
        }
    }
    fn trans_a(self) -> bool {
        matches!(self, Kernel::Tn | Kernel::Tf32Tn)
    }
    fn trans_b(self) -> bool {
        matches!(self, Kernel::Nt | Kernel::Tf32Nt)
    }
    /// The fused bias + gelu epilogue (cuBLAS runs the plain product).
    fn epilogue(self) -> bool {
        matches!(self, Kernel::BiasGelu | Kernel::Tf32BiasGelu)
    }
    /// Runs on TF32 tensor cores (compared with cuBLAS in TF32 math mode).
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
    /// The tolerance of the sampled check, relative to the terms' magnitude: fp32 rounding, or TF32's
    /// (`Tolerance::TF32` of the gate).
    fn tolerance(self) -> f64 {
        if self.tf32() { 2e-3 } else { 1e-5 }
    }
    /// One B for every batch item.
    fn shared_b(self) -> bool {
        self == Kernel::SharedB
    }
}

impl Case {
    /// The cuBLAS call computing the same product. A tensor times one matrix is, row-major and packed, one
    /// matrix of `batch · m` rows times that matrix: the single sgemm a cuBLAS user would write.
    fn gemm_shape(&self) -> GemmShape {
        if self.kernel.shared_b() {
            return GemmShape {
                batch: 1,
                m: self.batch * self.m,
                ..Case {
                    kernel: Kernel::Bmm,
                    ..*self
                }
                .gemm_shape()
            };
        }
        GemmShape {
            batch: self.batch,
            m: self.m,
            n: self.n,
            k: self.k,
            trans_a: self.kernel.trans_a(),
            trans_b: self.kernel.trans_b(),
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
    // TF32 tensor cores against cuBLAS in TF32 math mode.
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
];

/// Bytes a matrix-vector product must move at least: both operands read once, the output written once.
fn min_bytes(c: &Case) -> f64 {
    4.0 * (c.batch * (c.m * c.k + c.k * c.n + c.m * c.n)) as f64
}

fn main() -> Result<(), BoxError> {
    let Some(ctx) = gpu_or_explain("The matmul sweep") else {
        return Ok(());
    };
    let stream = ctx.default_stream();
    let gpu = describe(&ctx);
    let date = optiml_examples::today();
    // SAFETY: probing only dlopens and drops library handles; cudarc panics when the library is missing.
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        return Err("cuBLAS is not installed: the sweep has nothing to compare with".into());
    }
    let blas = CudaBlas::new(stream.clone())?;
    let blas_tf32 = CudaBlas::new(stream.clone())?;
    // SAFETY: a live handle of this process; the mode only lets cuBLAS round fp32 inputs to TF32.
    let status = unsafe {
        cudarc::cublas::sys::cublasSetMathMode(
            *blas_tf32.handle(),
            cudarc::cublas::sys::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH,
        )
    };
    if status != cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Err(format!("cuBLAS refused TF32 math mode: {status:?}").into());
    }
    println!(
        "optiml matmul f32 against cuBLAS on {gpu}, {date} (exact fp32 rows: default math mode; tf32 rows: \
         CUBLAS_TF32_TENSOR_OP_MATH)"
    );
    println!(
        "{:<14} {:<15} {:>22} | {:>9} {:>8} | {:>9} {:>8} | {:>6} {:>8}",
        "case",
        "kernel",
        "batch×m×n×k",
        "optiml ms",
        "TFLOP/s",
        "cuBLAS ms",
        "TFLOP/s",
        "ratio",
        "error"
    );
    let copy = copy_bandwidth(&stream)?;
    println!("device-to-device copy: {:.2} TB/s", copy / 1e12);
    let only = arg_value("--kernels");
    let wanted = |c: &Case| {
        only.as_deref()
            .is_none_or(|list| list.split(',').any(|k| k.trim() == c.kernel.name()))
    };
    let mut rows = Vec::new();
    for c in SWEEP.iter().filter(|c| wanted(c)) {
        let row = run(&stream, if c.kernel.tf32() { &blas_tf32 } else { &blas }, c)?;
        println!(
            "{:<14} {:<15} {:>22} | {:>9.4} {:>8.1} | {:>9.4} {:>8.1} | {:>5.2}x {:>8.1e}",
            c.label,
            c.kernel.name(),
            format!("{}×{}×{}×{}", c.batch, c.m, c.n, c.k),
            row.ours.median_ms,
            row.tflops(&row.ours),
            row.cublas.median_ms,
            row.tflops(&row.cublas),
            row.ratio(),
            row.error
        );
        rows.push(row);
    }
    let (tf32, exact): (Vec<&Row>, Vec<&Row>) = rows.iter().partition(|r| r.case.kernel.tf32());
    let (gemv, gemm): (Vec<&Row>, Vec<&Row>) = exact.into_iter().partition(|r| r.case.is_gemv());
    let geomean_of = |rows: &[&Row]| geomean(rows.iter().map(|r| r.ratio()));
    let (geomean, geomean_tf32) = (geomean_of(&gemm), geomean_of(&tf32));
    println!(
        "geometric mean of optiml / cuBLAS speed: {}x over {} exact fp32 matrix-matrix shapes, {}x over {} TF32 \
         shapes",
        show_geomean(geomean),
        gemm.len(),
        show_geomean(geomean_tf32),
        tf32.len()
    );
    for r in &gemv {
        println!(
            "{:<16} {:>22}: {:.2} TB/s = {:.0}% of the copy bandwidth (cuBLAS {:.2} TB/s)",
            r.case.label,
            r.case.shape(),
            r.bandwidth(&r.ours) / 1e12,
            100.0 * r.bandwidth(&r.ours) / copy,
            r.bandwidth(&r.cublas) / 1e12
        );
    }
    if let Some(dir) = arg_value("--out") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir)?;
        let doc = serde_json::json!({
            "date": date, "gpu": gpu,
            "method": METHOD,
            "geomean_speed_vs_cublas": geomean,
            "geomean_over": "the exact fp32 matrix-matrix rows (not the matrix-vector or TF32 ones)",
            "geomean_tf32_speed_vs_cublas_tf32": geomean_tf32,
            "copy_bandwidth_bytes_per_s": copy,
            "rows": rows.iter().map(Row::json).collect::<Vec<_>>(),
        });
        std::fs::write(
            dir.join("matmul-sweep.json"),
            serde_json::to_string_pretty(&doc)? + "\n",
        )?;
        std::fs::write(
            dir.join("matmul-sweep.md"),
            markdown(
                &gpu,
                &date,
                (&gemm, &gemv, &tf32),
                (geomean, geomean_tf32),
                copy,
            ),
        )?;
        println!("wrote {}", dir.display());
    }
    Ok(())
}

const METHOD: &str = "CUDA events on one stream, 5 warm-up runs each, then 30 rounds timing one optiml and one cuBLAS \
    run, alternating which goes first (medians); the same inputs for both; cuBLAS \
    through cudarc (sgemm / sgemm_strided_batched, default math mode); every optiml output checked for NaN (the \
    buffer is poisoned first) and 2048 sampled elements against float64 within 1e-5 of their terms' magnitude; \
    cuBLAS's output compared with optiml's (relative L2 ≤ 1e-5) except where optiml fuses an epilogue cuBLAS \
    does not run. TF32 rows: optiml kernels whose spec allows TF32, cuBLAS with CUBLAS_TF32_TENSOR_OP_MATH, \
    sampled elements within 2e-3 of their terms' magnitude (the gate's TF32 tolerance) and the two results within \
    4e-3 of each other (both round to TF32, differently)";

/// What one case measured.
struct Row {
    case: Case,
    ours: Stats,
    cublas: Stats,
    error: f64,
}

impl Row {
    fn flops(&self) -> f64 {
        let c = self.case;
        2.0 * (c.batch * c.m * c.n * c.k) as f64
    }
    fn tflops(&self, s: &Stats) -> f64 {
        self.flops() / (s.median_ms * 1e-3) / 1e12
    }
    /// optiml's speed over cuBLAS's (above 1: optiml is faster).
    fn ratio(&self) -> f64 {
        self.cublas.median_ms / self.ours.median_ms
    }
    /// Bytes per second at the minimum traffic (meaningful for the memory-bound matrix-vector rows).
    fn bandwidth(&self, s: &Stats) -> f64 {
        min_bytes(&self.case) / (s.median_ms * 1e-3)
    }
    fn json(&self) -> serde_json::Value {
        let c = self.case;
        serde_json::json!({
            "min_bytes": min_bytes(&c), "optiml_bytes_per_s": self.bandwidth(&self.ours),
            "cublas_bytes_per_s": self.bandwidth(&self.cublas),
            "case": c.label, "kernel": c.kernel.name(), "batch": c.batch, "m": c.m, "n": c.n, "k": c.k,
            "trans_a": c.kernel.trans_a(), "trans_b": c.kernel.trans_b(),
            "epilogue": c.kernel.epilogue().then_some("bias + gelu (fused; cuBLAS runs the plain gemm)"),
            "precision": if c.kernel.tf32() { "tf32" } else { "fp32" },
            "optiml": self.ours.json(), "optiml_tflops": self.tflops(&self.ours),
            "cublas": self.cublas.json(), "cublas_tflops": self.tflops(&self.cublas),
            "speed_vs_cublas": self.ratio(), "max_rel_err_sampled": self.error,
        })
    }
}

fn markdown(
    gpu: &str,
    date: &str,
    (rows, gemv, tf32): (&[&Row], &[&Row], &[&Row]),
    (geomean, geomean_tf32): (Option<f64>, Option<f64>),
    copy: f64,
) -> String {
    const HEADER: &str = "| case | kernel | batch × m × n × k | optiml ms (min–max) | TFLOP/s | cuBLAS ms (min–max) | \
         TFLOP/s | optiml / cuBLAS | max sampled error |\n|---|---|---|---|---:|---|---:|---:|---:|\n";
    let mut md =
        format!("# Matmul f32 against cuBLAS — {gpu}, {date}\n\nMethod: {METHOD}.\n\n{HEADER}");
    matmul_rows(&mut md, rows);
    let _ = writeln!(
        md,
        "\nGeometric mean of optiml / cuBLAS speed over the {} rows: **{}×**.",
        rows.len(),
        show_geomean(geomean)
    );
    let _ = write!(
        md,
        "\n## TF32 tensor cores (cuBLAS in TF32 math mode)\n\n{HEADER}"
    );
    matmul_rows(&mut md, tf32);
    let _ = writeln!(
        md,
        "\nGeometric mean of optiml / cuBLAS TF32 speed over the {} rows: **{}×**.",
        tf32.len(),
        show_geomean(geomean_tf32)
    );
    gemv_rows(&mut md, gemv, copy);
    md
}

/// Table rows of matrix-matrix products.
fn matmul_rows(md: &mut String, rows: &[&Row]) {
    for r in rows {
        let c = r.case;
        let cell = Stats::cell;
        let _ = writeln!(
            md,
            "| {} | `{}` | {}×{}×{}×{} | {} | {:.1} | {} | {:.1} | {:.2}×{} | {:.1e} |",
            c.label,
            c.kernel.name(),
            c.batch,
            c.m,
            c.n,
            c.k,
            cell(&r.ours),
            r.tflops(&r.ours),
            cell(&r.cublas),
            r.tflops(&r.cublas),
            r.ratio(),
            if c.kernel.epilogue() {
                " (cuBLAS without the epilogue)"
            } else {
                ""
            },
            r.error
        );
    }
}

/// The matrix-vector section.
fn gemv_rows(md: &mut String, gemv: &[&Row], copy: f64) {
    let _ = write!(
        md,
        "\n## Matrix × vector (memory-bound)\n\nDevice-to-device copy in the same run: {:.2} TB/s (bytes read plus \
         written). Bandwidth counts the least traffic: both operands read once, the output written once.\n\n\
         | case | kernel | batch × m × n × k | optiml ms (min–max) | TB/s | of copy | cuBLAS ms (min–max) | TB/s | \
         optiml / cuBLAS | max sampled error |\n|---|---|---|---|---:|---:|---|---:|---:|---:|\n",
        copy / 1e12
    );
    for r in gemv {
        let c = r.case;
        let cell = Stats::cell;
        let _ = writeln!(
            md,
            "| {} | `{}` | {} | {} | {:.2} | {:.0}% | {} | {:.2} | {:.2}× | {:.1e} |",
            c.label,
            c.kernel.name(),
            c.shape(),
            cell(&r.ours),
            r.bandwidth(&r.ours) / 1e12,
            100.0 * r.bandwidth(&r.ours) / copy,
            cell(&r.cublas),
            r.bandwidth(&r.cublas) / 1e12,
            r.ratio(),
            r.error
        );
    }
}

fn run(stream: &Arc<CudaStream>, blas: &CudaBlas, c: &Case) -> Result<Row, BoxError> {
    let Case {
        batch,
        m,
        n,
        k,
        kernel,
        ..
    } = *c;
    let (a, seed_a) = random(batch * m * k, None);
    let b_items = if kernel.shared_b() { 1 } else { batch };
    let (b, seed_b) = random(b_items * k * n, None);
    let (bias, seed_bias) = random(n, None);
    let (da, db, dbias) = (
        stream.clone_htod(&a)?,
        stream.clone_htod(&b)?,
        stream.clone_htod(&bias)?,
    );
    let mut dc = poisoned(stream, batch * m * n)?;
    let launch = |dc: &mut CudaSlice<f32>| -> Result<(), BoxError> {
        match kernel {
            Kernel::Gemm => gemm(stream, &da, &db, dc, m, n, k)?,
            Kernel::Nt => gemm_nt(stream, &da, &db, dc, m, n, k)?,
            Kernel::Tn => gemm_tn(stream, &da, &db, dc, m, n, k)?,
            Kernel::Bmm => bmm(stream, &da, &db, dc, batch, m, n, k)?,
            Kernel::SharedB => bmm_shared_b(stream, &da, &db, dc, batch, m, n, k)?,
            Kernel::BiasGelu => gemm_bias_gelu(stream, &da, &db, dc, &dbias, m, n, k)?,
            Kernel::Tf32Gemm => gemm_tf32(stream, &da, &db, dc, m, n, k)?,
            Kernel::Tf32Nt => gemm_tf32_nt(stream, &da, &db, dc, m, n, k)?,
            Kernel::Tf32Tn => gemm_tf32_tn(stream, &da, &db, dc, m, n, k)?,
            Kernel::Tf32Bmm => bmm_tf32(stream, &da, &db, dc, batch, m, n, k)?,
            Kernel::Tf32BiasGelu => gemm_tf32_bias_gelu(stream, &da, &db, dc, &dbias, m, n, k)?,
        }
        Ok(())
    };
    launch(&mut dc)?;
    let out = stream.clone_dtoh(&dc)?;
    let seeds = format!("seeds {seed_a}, {seed_b}, {seed_bias}");
    let epilogue = kernel.epilogue().then_some(bias.as_slice());
    let error =
        check(c, &a, &b, epilogue, &out).map_err(|e| format!("{}: {e} ({seeds})", c.label))?;
    let mut dref = poisoned(stream, batch * m * n)?;
    let (ours, cublas) = time_pair(
        stream,
        5,
        30,
        || launch(&mut dc),
        || cublas_gemm(blas, c.gemm_shape(), &da, &db, &mut dref),
    )?;
    if epilogue.is_none() {
        // The baseline must compute the same thing, or the ratio means nothing.
        let theirs = stream.clone_dtoh(&dref)?;
        let diff = rel_diff(&out, &theirs);
        if diff > if kernel.tf32() { 4e-3 } else { 1e-5 } {
            return Err(format!(
                "{}: cuBLAS and optiml disagree by {diff:e} ({seeds})",
                c.label
            )
            .into());
        }
    }
    Ok(Row {
        case: *c,
        ours,
        cublas,
        error,
    })
}

/// Every element written, and 2048 sampled elements within the kernel's tolerance of an f64 reference, relative
/// to the magnitude of their terms (Σ|a·b| + |bias|). Returns the largest sampled error.
fn check(c: &Case, a: &[f32], b: &[f32], bias: Option<&[f32]>, out: &[f32]) -> Result<f64, String> {
    let Case {
        batch,
        m,
        n,
        k,
        kernel,
        ..
    } = *c;
    let a_at = |z: usize, i: usize, l: usize| {
        let x = if kernel.trans_a() {
            a[z * m * k + l * m + i]
        } else {
            a[z * m * k + i * k + l]
        };
        f64::from(x)
    };
    let b_at = |z: usize, l: usize, j: usize| {
        let z = if kernel.shared_b() { 0 } else { z };
        let x = if kernel.trans_b() {
            b[z * k * n + j * k + l]
        } else {
            b[z * k * n + l * n + j]
        };
        f64::from(x)
    };
    check_sampled(out, (batch, m, n), 2048, kernel.tolerance(), |z, i, j| {
        let (mut acc, mut mag) = (0f64, 0f64);
        for l in 0..k {
            let p = a_at(z, i, l) * b_at(z, l, j);
            acc += p;
            mag += p.abs();
        }
        if let Some(bias) = bias {
            acc += f64::from(bias[j]);
            mag += f64::from(bias[j]).abs();
            acc = optiml_spec::reference::gelu(acc);
        }
        (acc, mag)
    })
}
