//! Transposes from one-line specs (the transpose family): matrices and batches of matrices, f32 and bf16, each
//! output checked bit for bit against the host's transposition and timed with L2 flushed, against the device's
//! copy bandwidth (a transpose reads and writes each element once, as a copy does).
//!
//! ```text
//! cargo run --release -p optiml-examples --example transpose [-- --out DIR --runs N]
//! ```
//!
//! With `--out`, it writes `ours.json` there, which `bench/harness/transpose.py` reads to time PyTorch (eager and
//! `torch.compile`) on the same shapes in the same device call and write the table.

use optiml::cudarc::driver::CudaSlice;
use optiml::half::bf16;
use optiml_examples::time::time_flushed;
use optiml_examples::{BoxError, Device, Element, arg_value, copy_bandwidth, poisoned, random};
use std::path::PathBuf;
use std::sync::Arc;

/// `y[c, r] = x[r, c]`.
#[optiml::kernel("transpose")]
pub fn transpose(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);

/// The same in bf16.
#[optiml::kernel("transpose, bf16")]
pub fn transpose_bf16(x: &CudaSlice<bf16>, y: &mut CudaSlice<bf16>, r: usize, c: usize);

/// `y[b, c, r] = x[b, r, c]`: the last two axes of each batch item swapped.
#[optiml::kernel("batched transpose")]
pub fn batched_transpose(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, b: usize, r: usize, c: usize);

/// One measured shape.
struct Case {
    /// The spec, as declared above.
    spec: &'static str,
    /// Items, rows and columns of `x`.
    batch: usize,
    rows: usize,
    cols: usize,
    /// `f32` or `bf16`.
    dtype: &'static str,
}

const CASES: &[Case] = &[
    Case {
        spec: "transpose",
        batch: 1,
        rows: 8192,
        cols: 8192,
        dtype: "f32",
    },
    // Rows that are no multiple of a 16-byte chunk: every element moves on its own.
    Case {
        spec: "transpose",
        batch: 1,
        rows: 8191,
        cols: 6001,
        dtype: "f32",
    },
    Case {
        spec: "transpose",
        batch: 1,
        rows: 2048,
        cols: 2048,
        dtype: "f32",
    },
    Case {
        spec: "transpose, bf16",
        batch: 1,
        rows: 8192,
        cols: 8192,
        dtype: "bf16",
    },
    Case {
        spec: "batched transpose",
        batch: 16,
        rows: 2048,
        cols: 2048,
        dtype: "f32",
    },
    // Keys of attention heads: 512 items of 2048 × 64.
    Case {
        spec: "batched transpose",
        batch: 512,
        rows: 2048,
        cols: 64,
        dtype: "f32",
    },
];

fn main() -> Result<(), BoxError> {
    let Some(Device {
        stream, gpu, date, ..
    }) = Device::open_or_explain("The transpose kernels")
    else {
        return Ok(());
    };
    let runs: usize = arg_value("--runs").map_or(Ok(20), |r| r.parse())?;
    let out = arg_value("--out").map(PathBuf::from);
    println!("optiml transposes on {gpu}, {date}");
    let copy = copy_bandwidth(&stream)?;
    println!("copy bandwidth {:.2} TB/s", copy / 1e12);
    // Zeroed before each timed run: larger than the H200's 60 MiB L2.
    let mut flush = stream.alloc_zeros::<f32>(64 << 20)?;
    println!(
        "{:<20} {:>5} {:>6} {:>6} {:>5} {:>9} {:>7} {:>8}",
        "spec", "batch", "rows", "cols", "dtype", "ms", "TB/s", "of copy"
    );
    let mut rows = Vec::new();
    for case in CASES {
        let (ms, host_us) = match case.dtype {
            "bf16" => run::<bf16>(&stream, &mut flush, case, runs)?,
            _ => run::<f32>(&stream, &mut flush, case, runs)?,
        };
        let elem = if case.dtype == "bf16" { 2 } else { 4 };
        let bytes = 2 * case.batch * case.rows * case.cols * elem;
        let tbps = bytes as f64 / (ms * 1e-3);
        println!(
            "{:<20} {:>5} {:>6} {:>6} {:>5} {:>9.4} {:>7.2} {:>7.0}%",
            case.spec,
            case.batch,
            case.rows,
            case.cols,
            case.dtype,
            ms,
            tbps / 1e12,
            100.0 * tbps / copy
        );
        rows.push(serde_json::json!({
            "spec": case.spec, "batch": case.batch, "rows": case.rows, "cols": case.cols, "dtype": case.dtype,
            "optiml_ms": ms, "optiml_host_us": host_us, "min_bytes": bytes, "correct": true,
        }));
    }
    if let Some(dir) = out {
        std::fs::create_dir_all(&dir)?;
        let doc = serde_json::json!({
            "date": date, "gpu": gpu, "runs": runs, "copy_tbps": copy / 1e12, "cases": rows,
        });
        optiml_examples::report::write_json(&dir.join("ours.json"), &doc)?;
    }
    Ok(())
}

/// Launches `case` once and checks every element, then times it; the median milliseconds and host microseconds.
fn run<T: Element + Transposed>(
    stream: &Arc<optiml::cudarc::driver::CudaStream>,
    flush: &mut CudaSlice<f32>,
    case: &Case,
    runs: usize,
) -> Result<(f64, f64), BoxError> {
    let (b, r, c) = (case.batch, case.rows, case.cols);
    let (x, seed) = random::<T>(b * r * c);
    let dx = stream.clone_htod(&x)?;
    let mut dy = poisoned::<T>(stream, b * r * c)?;
    T::launch(stream, case, &dx, &mut dy)?;
    let y = stream.clone_dtoh(&dy)?;
    // A transpose moves bits: every element must be exactly its source.
    for item in 0..b {
        for i in 0..r {
            for j in 0..c {
                let (from, to) = (item * r * c + i * c + j, item * r * c + j * r + i);
                let (want, got): (f64, f64) = (x[from].into(), y[to].into());
                if want.to_bits() != got.to_bits() {
                    return Err(format!(
                        "{} {b}x{r}x{c}: y[{item}, {j}, {i}] = {got}, x[{item}, {i}, {j}] = {want} (seed {seed})",
                        case.spec
                    )
                    .into());
                }
            }
        }
    }
    let (t, host) = time_flushed(stream, flush, 3, runs, || {
        T::launch(stream, case, &dx, &mut dy)
    })?;
    Ok((t.median_ms, host))
}

/// The declared kernel of an element type.
trait Transposed: Sized {
    fn launch(
        stream: &Arc<optiml::cudarc::driver::CudaStream>,
        case: &Case,
        x: &CudaSlice<Self>,
        y: &mut CudaSlice<Self>,
    ) -> Result<(), BoxError>;
}

impl Transposed for f32 {
    fn launch(
        stream: &Arc<optiml::cudarc::driver::CudaStream>,
        case: &Case,
        x: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
    ) -> Result<(), BoxError> {
        match case.spec {
            "batched transpose" => {
                batched_transpose(stream, x, y, case.batch, case.rows, case.cols)?
            }
            _ => transpose(stream, x, y, case.rows, case.cols)?,
        }
        Ok(())
    }
}

impl Transposed for bf16 {
    fn launch(
        stream: &Arc<optiml::cudarc::driver::CudaStream>,
        case: &Case,
        x: &CudaSlice<bf16>,
        y: &mut CudaSlice<bf16>,
    ) -> Result<(), BoxError> {
        transpose_bf16(stream, x, y, case.rows, case.cols)?;
        Ok(())
    }
}
