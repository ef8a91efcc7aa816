//! What the examples share: finding a GPU (or saying plainly there is none), random inputs, timing with CUDA
//! events, and the baselines measured beside optiml in the same run (cuBLAS, a naive kernel).

#![allow(clippy::unwrap_used)]

use optiml::cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, sys};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::error::Error;
use std::sync::Arc;

/// The examples' error type.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// Device 0's context, or `None` after printing why there is none (no driver, no device).
pub fn gpu_or_explain(what: &str) -> Option<Arc<CudaContext>> {
    match optiml::runtime::probe::context(0) {
        Ok(ctx) => Some(ctx),
        Err(e) => {
            println!("no CUDA device found ({e}).");
            println!(
                "{what}: built from the kernel cache; run this example on a machine with an NVIDIA GPU to launch it."
            );
            None
        }
    }
}

/// The device's name and compute capability, e.g. `NVIDIA H200 (sm_90)`.
pub fn describe(ctx: &CudaContext) -> String {
    let arch = optiml::runtime::probe::arch_of(ctx)
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    format!(
        "{} ({arch})",
        ctx.name().unwrap_or_else(|_| "unknown GPU".into())
    )
}

/// `len` values uniform in [-1, 1) from a fresh seed (printed, so a failure can be replayed).
pub fn random(len: usize, seed: Option<u64>) -> (Vec<f32>, u64) {
    let seed = seed.unwrap_or_else(rand::random);
    let mut rng = StdRng::seed_from_u64(seed);
    (
        (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect(),
        seed,
    )
}

/// A device buffer of `len` NaNs: anything the kernel fails to write stays NaN and fails the check.
pub fn poisoned(stream: &Arc<CudaStream>, len: usize) -> Result<CudaSlice<f32>, BoxError> {
    Ok(stream.clone_htod(&vec![f32::NAN; len])?)
}

/// Median, minimum and maximum of timed runs, in milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    /// Median.
    pub median_ms: f64,
    /// Fastest run.
    pub min_ms: f64,
    /// Slowest run.
    pub max_ms: f64,
    /// Timed runs.
    pub runs: usize,
}

impl Stats {
    /// As JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"median_ms": self.median_ms, "min_ms": self.min_ms, "max_ms": self.max_ms, "runs": self.runs})
    }
}

/// Times `f` with CUDA events on `stream`: `warmup` untimed runs, then `reps` timed ones.
pub fn time(
    stream: &Arc<CudaStream>,
    warmup: usize,
    reps: usize,
    mut f: impl FnMut() -> Result<(), BoxError>,
) -> Result<Stats, BoxError> {
    for _ in 0..warmup {
        f()?;
    }
    stream.synchronize()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        f()?;
        let end = stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        times.push(start.elapsed_ms(&end)? as f64);
    }
    Ok(stats(times))
}

/// Times `a` and `b` against each other: `warmup` untimed runs of each, then `reps` rounds that time one run of
/// `a` and one of `b`, alternating which goes first. Timing one after the other lets clock and temperature drift
/// favour whichever runs first (up to 15% on the H200 for 0.2–10 ms kernels, `bench/results/2026-11-30-h200-tf32.md`).
pub fn time_pair(
    stream: &Arc<CudaStream>,
    warmup: usize,
    reps: usize,
    mut a: impl FnMut() -> Result<(), BoxError>,
    mut b: impl FnMut() -> Result<(), BoxError>,
) -> Result<(Stats, Stats), BoxError> {
    for _ in 0..warmup {
        a()?;
        b()?;
    }
    stream.synchronize()?;
    let mut times = [Vec::with_capacity(reps), Vec::with_capacity(reps)];
    let once = |f: &mut dyn FnMut() -> Result<(), BoxError>| -> Result<f64, BoxError> {
        let start = stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        f()?;
        let end = stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        Ok(start.elapsed_ms(&end)? as f64)
    };
    for round in 0..reps {
        if round % 2 == 0 {
            times[0].push(once(&mut a)?);
            times[1].push(once(&mut b)?);
        } else {
            times[1].push(once(&mut b)?);
            times[0].push(once(&mut a)?);
        }
    }
    let [ta, tb] = times;
    Ok((stats(ta), stats(tb)))
}

fn stats(mut times: Vec<f64>) -> Stats {
    times.sort_by(f64::total_cmp);
    let reps = times.len();
    Stats {
        median_ms: times[reps / 2],
        min_ms: times[0],
        max_ms: times[reps - 1],
        runs: reps,
    }
}

/// The naive batched matmul of the seed (one thread per output element, 16×16 blocks), compiled at run time
/// with NVRTC. `None` when NVRTC is not installed: the baseline is then skipped, not faked.
pub fn naive_bmm(ctx: &Arc<CudaContext>) -> Option<CudaFunction> {
    // SAFETY: probing only dlopens and drops library handles.
    if !unsafe { optiml::cudarc::nvrtc::sys::is_culib_present() } {
        return None;
    }
    const SRC: &str = r#"
extern "C" __global__ void naive_bmm(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    long long z = blockIdx.z;
    if (row < M && col < N) {
        const float* a = A + z * M * K;
        const float* b = B + z * K * N;
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) sum += a[row * K + k] * b[k * N + col];
        C[z * M * N + row * N + col] = sum;
    }
}"#;
    let opts = optiml::cudarc::nvrtc::CompileOptions {
        arch: Some("sm_80"),
        ..Default::default()
    };
    let ptx = optiml::cudarc::nvrtc::compile_ptx_with_opts(SRC, opts).ok()?;
    ctx.load_module(ptx).ok()?.load_function("naive_bmm").ok()
}

/// Today's date, `YYYY-MM-DD` (UTC).
pub fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0) as i64;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The value following `flag` on the command line, if any.
pub fn arg_value(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Checks a batched `m × n` output: every element written (nothing left of the NaN poison), and `samples`
/// pseudo-random elements within `tol` (1e-5 for exact fp32, 2e-3 for TF32) of `reference(item, row, column)`,
/// which returns the float64 value and the magnitude of its terms (Σ|a·b| + |bias|, the scale a dot product's
/// rounding error is proportional to). Returns the largest sampled error relative to that magnitude.
///
/// # Errors
/// The first element not written, or the largest sampled error when it exceeds `tol`.
pub fn check_sampled(
    out: &[f32],
    (batch, m, n): (usize, usize, usize),
    samples: usize,
    tol: f64,
    reference: impl Fn(usize, usize, usize) -> (f64, f64),
) -> Result<f64, String> {
    if let Some(i) = out.iter().position(|v| !v.is_finite()) {
        return Err(format!("element {i} is {} (unwritten or wrong)", out[i]));
    }
    let (mut worst, mut state) = (0f64, 0x9e37_79b9_7f4a_7c15_u64);
    for _ in 0..samples {
        // xorshift: the same positions every run, spread over every batch item, row and column.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let (z, i, j) = (
            (state % batch as u64) as usize,
            ((state >> 20) % m as u64) as usize,
            ((state >> 40) % n as u64) as usize,
        );
        let (want, mag) = reference(z, i, j);
        let err = (f64::from(out[z * m * n + i * n + j]) - want).abs() / mag.max(1e-30);
        worst = worst.max(err);
    }
    if worst > tol {
        return Err(format!("sampled relative error {worst:e} > {tol:e}"));
    }
    Ok(worst)
}

/// ‖x − y‖₂ / ‖y‖₂ in float64: how far a result is from a baseline's.
pub fn rel_diff(x: &[f32], y: &[f32]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (a, b) in x.iter().zip(y) {
        num += (f64::from(*a) - f64::from(*b)).powi(2);
        den += f64::from(*b).powi(2);
    }
    (num / den.max(1e-300)).sqrt()
}

/// The shape and operand layout of a row-major batched product `C[z] = op(A[z])·op(B[z])`, packed matrices.
#[derive(Clone, Copy, Debug)]
pub struct GemmShape {
    /// Batch items.
    pub batch: usize,
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// The inner dimension.
    pub k: usize,
    /// A stored `k × m` (transposed).
    pub trans_a: bool,
    /// B stored `n × k` (transposed).
    pub trans_b: bool,
}

/// cuBLAS's fp32 gemm (default math mode: exact fp32) for the same row-major problem. cuBLAS is column-major:
/// the row-major `C = op(A)·op(B)` is the column-major `Cᵀ = op(B)ᵀ·op(A)ᵀ`, so B goes first, and a row-major
/// operand stored untransposed is a column-major one to use as it is.
///
/// # Errors
/// What cuBLAS reports.
pub fn cublas_gemm(
    blas: &cudarc::cublas::CudaBlas,
    shape: GemmShape,
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    out: &mut CudaSlice<f32>,
) -> Result<(), BoxError> {
    use cudarc::cublas::sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
    use cudarc::cublas::{Gemm, GemmConfig, StridedBatchedConfig};
    let GemmShape {
        batch,
        m,
        n,
        k,
        trans_a,
        trans_b,
    } = shape;
    let (transa, lda) = if trans_b {
        (CUBLAS_OP_T, k)
    } else {
        (CUBLAS_OP_N, n)
    };
    let (transb, ldb) = if trans_a {
        (CUBLAS_OP_T, m)
    } else {
        (CUBLAS_OP_N, k)
    };
    let gemm = GemmConfig {
        transa,
        transb,
        m: n as i32,
        n: m as i32,
        k: k as i32,
        alpha: 1.0f32,
        lda: lda as i32,
        ldb: ldb as i32,
        beta: 0.0f32,
        ldc: n as i32,
    };
    if batch == 1 {
        // SAFETY: the caller's buffers hold matrices of the sizes in `gemm`.
        unsafe { blas.gemm(gemm, b, a, out) }?;
    } else {
        let cfg = StridedBatchedConfig {
            gemm,
            batch_size: batch as i32,
            stride_a: (k * n) as i64,
            stride_b: (m * k) as i64,
            stride_c: (m * n) as i64,
        };
        // SAFETY: every buffer holds `batch` packed matrices of the sizes in `cfg`.
        unsafe { blas.gemm_strided_batched(cfg, b, a, out) }?;
    }
    Ok(())
}
