//! Elementwise kernels from one-line specs: exact GELU and a scaled add, checked element by element and timed
//! against the device's copy bandwidth (the ceiling for a kernel that reads and writes each element once).
//!
//! ```text
//! cargo run --release -p optiml-examples --example elementwise
//! ```

use optiml::cudarc::driver::CudaSlice;
use optiml_examples::check::check_each;
use optiml_examples::{BoxError, Device, poisoned, random, time};

/// `out = gelu(x)`, the exact (erf) form.
#[optiml::kernel("y = gelu(x), f32")]
pub fn gelu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);

/// `out = x + y`.
#[optiml::kernel("elementwise add of two tensors, f32")]
pub fn add(x: &CudaSlice<f32>, y: &CudaSlice<f32>, out: &mut CudaSlice<f32>);

fn main() -> Result<(), BoxError> {
    let Some(Device { stream, gpu, .. }) =
        Device::open_or_explain("The elementwise kernels (`gelu`, `add`)")
    else {
        return Ok(());
    };
    println!("optiml elementwise f32 on {gpu}");
    let n = 4096 * 32768;
    let (x, seed_x) = random::<f32>(n);
    let (y, seed_y) = random::<f32>(n);
    let seeds = format!("seeds {seed_x}, {seed_y}");
    let (dx, dy) = (stream.clone_htod(&x)?, stream.clone_htod(&y)?);
    let mut out = poisoned(&stream, n)?;

    gelu(&stream, &dx, &mut out)?;
    check_each(&stream.clone_dtoh(&out)?, 1e-6, |i| {
        optiml_spec::reference::gelu(f64::from(x[i]))
    })
    .map_err(|e| format!("gelu: {e} ({seeds})"))?;
    // The sum of two floats rounds once, to the same float on every device: it must match exactly.
    add(&stream, &dx, &dy, &mut out)?;
    check_each(&stream.clone_dtoh(&out)?, 0.0, |i| f64::from(x[i] + y[i]))
        .map_err(|e| format!("add: {e} ({seeds})"))?;

    let mut copy = poisoned(&stream, n)?;
    let copy_t = time(&stream, 3, 20, || Ok(stream.memcpy_dtod(&dx, &mut copy)?))?;
    let gelu_t = time(&stream, 3, 20, || Ok(gelu(&stream, &dx, &mut out)?))?;
    let add_t = time(&stream, 3, 20, || Ok(add(&stream, &dx, &dy, &mut out)?))?;
    let tbps = |bytes: usize, ms: f64| bytes as f64 / (ms * 1e-3) / 1e12;
    let bytes = n * 4;
    let copy_bw = tbps(2 * bytes, copy_t.median_ms);
    println!(
        "{:<18} {:>10} {:>8} {:>10}",
        "kernel", "ms", "TB/s", "of copy"
    );
    for (name, t, traffic) in [
        ("copy (dtod)", copy_t, 2 * bytes),
        ("gelu", gelu_t, 2 * bytes),
        ("add", add_t, 3 * bytes),
    ] {
        let bw = tbps(traffic, t.median_ms);
        println!(
            "{name:<18} {:>10.3} {bw:>8.2} {:>9.0}%",
            t.median_ms,
            100.0 * bw / copy_bw
        );
    }
    Ok(())
}
