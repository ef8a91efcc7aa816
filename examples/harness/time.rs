//! Timing with CUDA events on one stream: medians of many runs, a kernel and its baseline in alternating rounds,
//! and, where inputs would otherwise sit in L2 between runs, a flush before each.

use optiml::cudarc::driver::{CudaSlice, CudaStream, sys};
use std::sync::Arc;

use crate::BoxError;

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
    /// The statistics of `times` (NaN over none, so that zero runs read as no number rather than a panic).
    fn of(mut times: Vec<f64>) -> Stats {
        times.sort_by(f64::total_cmp);
        let at = |i: usize| times.get(i).copied().unwrap_or(f64::NAN);
        Stats {
            median_ms: at(times.len() / 2),
            min_ms: at(0),
            max_ms: times.last().copied().unwrap_or(f64::NAN),
            runs: times.len(),
        }
    }
}

/// The milliseconds between events recorded on `stream` before and after `f`.
fn once(
    stream: &Arc<CudaStream>,
    f: &mut dyn FnMut() -> Result<(), BoxError>,
) -> Result<f64, BoxError> {
    let start = stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
    f()?;
    let end = stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
    Ok(f64::from(start.elapsed_ms(&end)?))
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
    let times = (0..reps)
        .map(|_| once(stream, &mut f))
        .collect::<Result<_, _>>()?;
    Ok(Stats::of(times))
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
    let (mut ta, mut tb) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    for round in 0..reps {
        if round % 2 == 0 {
            ta.push(once(stream, &mut a)?);
            tb.push(once(stream, &mut b)?);
        } else {
            tb.push(once(stream, &mut b)?);
            ta.push(once(stream, &mut a)?);
        }
    }
    Ok((Stats::of(ta), Stats::of(tb)))
}

/// Times `f` as a caller meeting cold caches pays for it: `warmup` untimed runs, then `runs` runs each after
/// zeroing `flush` (a buffer larger than L2, so no input is left there). The flush is queued, not waited for, so
/// the host work of a call overlaps it. Also returns the median host time of one call of `f`, in microseconds
/// (what a caller waiting on nothing but the launch pays).
pub fn time_flushed(
    stream: &Arc<CudaStream>,
    flush: &mut CudaSlice<f32>,
    warmup: usize,
    runs: usize,
    mut f: impl FnMut() -> Result<(), BoxError>,
) -> Result<(Stats, f64), BoxError> {
    for _ in 0..warmup {
        f()?;
    }
    stream.synchronize()?;
    let (mut times, mut host) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        stream.memset_zeros(flush)?;
        let mut timed = || {
            let called = std::time::Instant::now();
            let launched = f();
            host.push(called.elapsed().as_secs_f64() * 1e6);
            launched
        };
        times.push(once(stream, &mut timed)?);
    }
    // The host times are microseconds, not milliseconds: only their median is taken from the statistics.
    Ok((Stats::of(times), Stats::of(host).median_ms))
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
