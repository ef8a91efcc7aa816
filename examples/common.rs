//! What the examples share: finding a GPU (or saying plainly there is none), random inputs, timing with CUDA
//! events, and the baselines measured beside optiml in the same run (cuBLAS, a naive kernel).

#![allow(clippy::unwrap_used)]

use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, StridedBatchedConfig};
use optiml::cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr, sys};
use optiml::half::{bf16, f16};
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

/// [`random`]'s values rounded to `T` (the inputs both optiml and cuBLAS multiply, and the reference's, read
/// back exactly). |x| < 1 keeps a K-term product below K in magnitude, far inside fp16's range (65504) for every K
/// the examples use.
pub fn random16<T: Half>(len: usize) -> (Vec<T>, u64) {
    let (v, seed) = random(len, None);
    (v.into_iter().map(T::from_f32).collect(), seed)
}

/// A device buffer of `len` NaNs: anything the kernel fails to write stays NaN and fails the check.
pub fn poisoned(stream: &Arc<CudaStream>, len: usize) -> Result<CudaSlice<f32>, BoxError> {
    Ok(stream.clone_htod(&vec![f32::NAN; len])?)
}

/// A 16-bit float optiml's matmuls take (`bf16`, `f16`): stored 16-bit, multiplied and accumulated in fp32.
pub trait Half: DeviceRepr + Copy + Into<f64> {
    /// How the examples print the type.
    const NAME: &'static str;
    /// The NaN a poisoned buffer holds.
    const NAN: Self;
    /// 1 and 0, cuBLAS's alpha and beta (cudarc widens them to fp32 for the fp32 compute type).
    const ONE: Self;
    /// See [`Half::ONE`].
    const ZERO: Self;
    /// `x` rounded to nearest.
    fn from_f32(x: f32) -> Self;
}

impl Half for bf16 {
    const NAME: &'static str = "bf16";
    const NAN: Self = bf16::NAN;
    const ONE: Self = bf16::ONE;
    const ZERO: Self = bf16::ZERO;
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
}

impl Half for f16 {
    const NAME: &'static str = "fp16";
    const NAN: Self = f16::NAN;
    const ONE: Self = f16::ONE;
    const ZERO: Self = f16::ZERO;
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
}

/// [`poisoned`] for a 16-bit output.
pub fn poisoned16<T: Half>(stream: &Arc<CudaStream>, len: usize) -> Result<CudaSlice<T>, BoxError> {
    Ok(stream.clone_htod(&vec![T::NAN; len])?)
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
    /// A table cell: `median (min–max)`.
    pub fn cell(&self) -> String {
        format!(
            "{:.4} ({:.4}–{:.4})",
            self.median_ms, self.min_ms, self.max_ms
        )
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

/// Device-to-device copy bandwidth (bytes read plus bytes written per second) over a 1 GiB buffer: the
/// reference a memory-bound kernel is judged against.
pub fn copy_bandwidth(stream: &Arc<CudaStream>) -> Result<f64, BoxError> {
    let len = 1 << 28;
    let src = stream.alloc_zeros::<f32>(len)?;
    let mut dst = stream.alloc_zeros::<f32>(len)?;
    let t = time(stream, 3, 10, || Ok(stream.memcpy_dtod(&src, &mut dst)?))?;
    Ok(2.0 * 4.0 * len as f64 / (t.median_ms * 1e-3))
}

/// The geometric mean of speed ratios; `None` over none (a `--kernels` selection without such rows), so a
/// report never shows a mean of nothing as 1×.
pub fn geomean(ratios: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, count) = ratios
        .into_iter()
        .fold((0f64, 0usize), |(s, c), r| (s + r.ln(), c + 1));
    (count > 0).then(|| (sum / count as f64).exp())
}

/// A geometric mean for people: three decimals, or a dash over no rows.
pub fn show_geomean(geomean: Option<f64>) -> String {
    geomean.map_or("–".to_string(), |g| format!("{g:.3}"))
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

/// Checks a batched `m × n` output (f32, or a 16-bit type read exactly as f64): every element written (nothing
/// left of the NaN poison, no overflow), and `samples` pseudo-random elements within `tol` (1e-5 for exact fp32,
/// 2e-3 for TF32, 4e-3 for bf16, 5e-4 for fp16) of `reference(item, row, column)`, which returns the float64
/// value and the magnitude of its terms (Σ|a·b| + |bias|, the scale a dot product's rounding error is
/// proportional to). Returns the largest sampled error relative to that magnitude.
///
/// # Errors
/// The first element not written, or the largest sampled error when it exceeds `tol`.
pub fn check_sampled<T: Copy + Into<f64>>(
    out: &[T],
    (batch, m, n): (usize, usize, usize),
    samples: usize,
    tol: f64,
    reference: impl Fn(usize, usize, usize) -> (f64, f64),
) -> Result<f64, String> {
    if let Some(i) = out.iter().position(|&v| !v.into().is_finite()) {
        return Err(format!(
            "element {i} is {} (unwritten or wrong)",
            out[i].into()
        ));
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
        let err = (out[z * m * n + i * n + j].into() - want).abs() / mag.max(1e-30);
        worst = worst.max(err);
    }
    if worst > tol {
        return Err(format!("sampled relative error {worst:e} > {tol:e}"));
    }
    Ok(worst)
}

/// A fused epilogue as the reference applies it: the bias added to every row, then the activation.
pub type Epilogue<'a> = (&'a [f32], fn(f64) -> f64);

/// [`check_sampled`] for the row-major product `C[z] = op(A[z])·op(B[z])` of packed matrices laid out as `shape`
/// says, with `act(C + bias)` applied when `epilogue = (bias, act)` is given: the float64 reference from the
/// very values the kernel read (f32, or 16-bit read exactly), with the magnitude Σ|a·b| + |bias|, which bounds
/// |reference| too (the activations here grow no faster than their argument).
///
/// # Errors
/// As [`check_sampled`].
pub fn check_matmul<T: Copy + Into<f64>>(
    shape: GemmShape,
    (a, b, epilogue): (&[T], &[T], Option<Epilogue<'_>>),
    out: &[T],
    samples: usize,
    tol: f64,
) -> Result<f64, String> {
    let GemmShape {
        batch,
        m,
        n,
        k,
        trans_a,
        trans_b,
    } = shape;
    let a_at = |z: usize, i: usize, l: usize| {
        a[z * m * k + if trans_a { l * m + i } else { i * k + l }].into()
    };
    let b_at = |z: usize, l: usize, j: usize| {
        b[z * k * n + if trans_b { j * k + l } else { l * n + j }].into()
    };
    check_sampled(out, (batch, m, n), samples, tol, |z, i, j| {
        let (mut acc, mut mag) = (0f64, 0f64);
        for l in 0..k {
            let p = a_at(z, i, l) * b_at(z, l, j);
            acc += p;
            mag += p.abs();
        }
        if let Some((bias, act)) = epilogue {
            acc += f64::from(bias[j]);
            mag += f64::from(bias[j]).abs();
            acc = act(acc);
        }
        (acc, mag)
    })
}

/// The float64 activations every reference uses (the gate's too).
pub use optiml_spec::reference::{gelu, silu};

/// ‖x − y‖₂ / ‖y‖₂ in float64: how far a result is from a baseline's.
pub fn rel_diff<T: Copy + Into<f64>>(x: &[T], y: &[T]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (&a, &b) in x.iter().zip(y) {
        let (a, b): (f64, f64) = (a.into(), b.into());
        num += (a - b).powi(2);
        den += b.powi(2);
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

/// The cuBLAS configuration of a row-major problem, operands swapped as [`cublas_gemm`] says (the caller passes
/// `b` as cuBLAS's A).
fn swapped<T>(shape: GemmShape, alpha: T, beta: T) -> StridedBatchedConfig<T> {
    use cudarc::cublas::sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
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
    StridedBatchedConfig {
        gemm: GemmConfig {
            transa,
            transb,
            m: n as i32,
            n: m as i32,
            k: k as i32,
            alpha,
            lda: lda as i32,
            ldb: ldb as i32,
            beta,
            ldc: n as i32,
        },
        batch_size: batch as i32,
        stride_a: (k * n) as i64,
        stride_b: (m * k) as i64,
        stride_c: (m * n) as i64,
    }
}

/// cuBLAS's fp32 gemm (default math mode: exact fp32) for the same row-major problem: sgemm for one matrix,
/// sgemm_strided_batched for more. cuBLAS is column-major: the row-major `C = op(A)·op(B)` is the column-major
/// `Cᵀ = op(B)ᵀ·op(A)ᵀ`, so B goes first, and a row-major operand stored untransposed is a column-major one to
/// use as it is.
///
/// # Errors
/// What cuBLAS reports.
pub fn cublas_gemm(
    blas: &CudaBlas,
    shape: GemmShape,
    a: &CudaSlice<f32>,
    b: &CudaSlice<f32>,
    out: &mut CudaSlice<f32>,
) -> Result<(), BoxError> {
    let cfg = swapped(shape, 1.0f32, 0.0f32);
    if shape.batch == 1 {
        // SAFETY: the caller's buffers hold matrices of the sizes in `cfg.gemm`.
        unsafe { blas.gemm(cfg.gemm, b, a, out) }?;
    } else {
        // SAFETY: every buffer holds `batch` packed matrices of the sizes in `cfg`.
        unsafe { blas.gemm_strided_batched(cfg, b, a, out) }?;
    }
    Ok(())
}

/// cuBLAS's gemm for 16-bit operands and output, fp32 compute: `cublasGemmStridedBatchedEx` with A, B and C
/// `CUDA_R_16BF` (or `CUDA_R_16F`), `CUBLAS_COMPUTE_32F`, `CUBLAS_GEMM_DEFAULT` and fp32 alpha = 1, beta = 0 —
/// the call cudarc 0.19's `Gemm<bf16>` / `Gemm<f16>::gemm_strided_batched` makes (`src/cublas/safe/gemm.rs`).
/// One matrix is a batch of one rather than `cublasGemmEx`, so every row measures the same entry point.
/// Operands are swapped as [`cublas_gemm`] explains.
///
/// # Errors
/// What cuBLAS reports.
pub fn cublas_gemm16<T: Half>(
    blas: &CudaBlas,
    shape: GemmShape,
    a: &CudaSlice<T>,
    b: &CudaSlice<T>,
    out: &mut CudaSlice<T>,
) -> Result<(), BoxError>
where
    CudaBlas: Gemm<T>,
{
    // SAFETY: every buffer holds `batch` packed matrices of the sizes in the configuration.
    unsafe { blas.gemm_strided_batched(swapped(shape, T::ONE, T::ZERO), b, a, out) }?;
    Ok(())
}
