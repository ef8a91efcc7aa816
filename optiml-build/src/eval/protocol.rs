//! What the parent and the evaluation worker say to each other over the worker's stdin and stdout: one
//! length-prefixed bincode frame per message.

use super::plan::TestPlan;
use optiml_runtime::{Arch, Launch};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};

/// The largest frame either side accepts: a CUBIN is a few hundred KiB; anything near this is a broken stream.
const MAX_FRAME: u32 = crate::codec::LIMIT as u32;

/// Parent → worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Request {
    /// The first message: the trusted support kernels (input generation, poisoning, checks, ceilings), compiled
    /// by the parent, and the device to use.
    Setup {
        /// CUBIN of the support module for the device.
        support_cubin: Vec<u8>,
        /// CUDA device ordinal.
        device: usize,
    },
    /// Verify and time one candidate.
    Evaluate(Box<Job>),
}

/// One candidate to verify and time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Job {
    /// A label for messages.
    pub name: String,
    /// The CUBIN to load.
    pub cubin: Vec<u8>,
    /// Its entry point.
    pub entry: String,
    /// How the runtime launches it.
    pub launch: Launch,
    /// What it computes.
    pub problem: Problem,
    /// How it is verified.
    pub plan: TestPlan,
    /// How it is timed.
    pub timing: TimingPlan,
    /// Seeds this job's fresh inputs.
    pub seed: u64,
}

/// The computation a candidate must perform, as its family's gate reads it: the family's name, and its own
/// description of the problem (what is computed, at which dispatch size, with which scalars), encoded.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Problem {
    /// The family whose gate checks it.
    pub family: String,
    /// The family's problem type, bincode-encoded.
    pub payload: Vec<u8>,
}

impl Problem {
    /// `problem`, a problem of `family`.
    pub fn new<T: Serialize>(family: &str, problem: &T) -> Self {
        // Plain data always encodes; were it ever not to, the gate's decode names the problem instead of the
        // parent failing mid-search.
        let payload = crate::codec::encode(problem).unwrap_or_default();
        Problem {
            family: family.to_string(),
            payload,
        }
    }

    /// The family's problem.
    ///
    /// # Errors
    /// The payload is not a `T` (a message names the family).
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, String> {
        crate::codec::decode(&self.payload)
            .map(|(p, _)| p)
            .map_err(|e| format!("a `{}` problem that does not decode: {e}", self.family))
    }
}

/// Timing settings (design.md §5).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimingPlan {
    /// Untimed runs first.
    pub warmup: u32,
    /// Timed runs; the median is reported.
    pub runs: u32,
    /// Overwrite a buffer larger than L2 before each run, so no run starts with a warm cache.
    pub flush_l2: bool,
}

impl Default for TimingPlan {
    fn default() -> Self {
        TimingPlan {
            warmup: 3,
            runs: 10,
            flush_l2: true,
        }
    }
}

/// Worker → parent.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Response {
    /// Answer to [`Request::Setup`]: the device and its measured ceilings.
    Ready(Device),
    /// Answer to [`Request::Evaluate`].
    Done(JobResult),
}

/// The device a worker runs on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Device {
    /// Its name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Its architecture.
    pub arch: Arch,
    /// Multiprocessors.
    pub sm_count: u32,
    /// Ceilings measured once at worker start.
    pub ceilings: Ceilings,
}

/// What the device reaches on trusted micro-kernels, the denominators of the derived SOL figures.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    /// Device-to-device copy, read + write, TB/s.
    pub copy_tbps: f64,
    /// fp32 FMA throughput, TFLOP/s.
    pub fp32_tflops: f64,
}

/// The result of one job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum JobResult {
    /// It computed the right answer on every check and was timed.
    Measured(Timed),
    /// A check failed; the candidate was never timed (or its timed output was wrong).
    Rejected {
        /// Which check (shape, distribution).
        check: String,
        /// What was wrong.
        reason: String,
    },
    /// The driver reported an error (illegal address, trap, launch failure). The worker's context is unusable
    /// and the worker exits after sending this.
    Fault {
        /// What the worker was doing.
        during: String,
        /// The driver's error.
        error: String,
    },
}

/// Timings of a verified candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timed {
    /// Each timed run, milliseconds, in order.
    pub times_ms: Vec<f64>,
    /// Resident blocks per SM for this launch, as the driver computes it.
    pub blocks_per_sm: u32,
    /// What the loaded function reports: registers per thread, local (spill and stack) bytes per thread,
    /// static shared bytes. The driver's word, whatever the compiler log held.
    pub function: FunctionAttributes,
}

/// A loaded function's resource attributes (`cuFuncGetAttribute`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionAttributes {
    /// Registers per thread.
    pub registers: u32,
    /// Local memory per thread, bytes (spills and stack).
    pub local_bytes: u32,
    /// Static shared memory per block, bytes.
    pub shared_bytes: u32,
}

impl Timed {
    /// The median run.
    pub fn median_ms(&self) -> f64 {
        let mut t = self.times_ms.clone();
        t.sort_by(f64::total_cmp);
        match t.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => t[n / 2],
            n => 0.5 * (t[n / 2 - 1] + t[n / 2]),
        }
    }

    /// (slowest − fastest) / median, percent.
    pub fn spread_pct(&self) -> f64 {
        let lo = self.times_ms.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.times_ms.iter().copied().fold(0.0, f64::max);
        100.0 * (hi - lo) / self.median_ms()
    }
}

/// A broken pipe or a malformed frame.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// Reading or writing the pipe failed (the other side exited).
    #[error("the pipe failed: {0}")]
    Io(#[from] std::io::Error),
    /// The frame announced an impossible length.
    #[error("a frame of {0} bytes is over the limit")]
    TooLarge(u64),
    /// The frame did not decode.
    #[error("a frame did not decode: {0}")]
    Decode(#[from] bincode::error::DecodeError),
    /// The message did not encode.
    #[error("a message did not encode: {0}")]
    Encode(#[from] bincode::error::EncodeError),
}

/// Writes one message.
///
/// # Errors
/// [`FrameError`] when encoding or the pipe fails.
pub fn write<T: Serialize>(w: &mut impl Write, msg: &T) -> Result<(), FrameError> {
    let bytes = crate::codec::encode(msg)?;
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|&l| l <= MAX_FRAME)
        .ok_or(FrameError::TooLarge(bytes.len() as u64))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(&bytes)?;
    w.flush()?;
    Ok(())
}

/// Reads one message; `Ok(None)` on a clean end of stream.
///
/// # Errors
/// [`FrameError`] when the pipe breaks mid-frame or the frame does not decode.
pub fn read<T: for<'de> Deserialize<'de>>(r: &mut impl Read) -> Result<Option<T>, FrameError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_le_bytes(len);
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len.into()));
    }
    let mut bytes = vec![0u8; len as usize];
    r.read_exact(&mut bytes)?;
    let (msg, _) = crate::codec::decode(&bytes)?;
    Ok(Some(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_a_truncated_frame_is_an_error() {
        let msg = JobResult::Rejected {
            check: "2x127x129x65 normal".into(),
            reason: "element 7 is NaN".into(),
        };
        let mut buf = Vec::new();
        write(&mut buf, &msg).unwrap();
        write(&mut buf, &msg).unwrap();
        let mut r = &buf[..];
        assert_eq!(read::<JobResult>(&mut r).unwrap(), Some(msg.clone()));
        assert_eq!(read::<JobResult>(&mut r).unwrap(), Some(msg));
        assert_eq!(read::<JobResult>(&mut r).unwrap(), None);
        let mut cut = &buf[..buf.len() - 3];
        read::<JobResult>(&mut cut).unwrap();
        assert!(read::<JobResult>(&mut cut).is_err());
        let mut huge = &[0xff, 0xff, 0xff, 0xff, 0][..];
        assert!(matches!(
            read::<JobResult>(&mut huge),
            Err(FrameError::TooLarge(_))
        ));
    }

    #[test]
    fn median_and_spread() {
        let t = Timed {
            times_ms: vec![3.0, 1.0, 2.0, 10.0],
            blocks_per_sm: 1,
            function: FunctionAttributes::default(),
        };
        assert_eq!(t.median_ms(), 2.5);
        assert!((t.spread_pct() - 360.0).abs() < 1e-9);
    }
}
