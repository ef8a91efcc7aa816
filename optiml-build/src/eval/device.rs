//! The device toolkit every family's gate uses: one CUDA context and stream, trusted support kernels (fresh
//! inputs, NaN poisoning, 16-bit rounding and conversion, a non-finite count; for outputs of any stored type,
//! poisoning, a count of unwritten elements and a gather of the compared ones), an L2 flush, event timing, and the
//! ceilings the derived speed-of-light figures divide by. What a gate checks and how it launches is the family's
//! (`crate::families`); how to fill, poison, flush and time is here, once.

use super::guard::Guarded;
use super::limits::{self, HostCap, LimitError, Need};
use super::plan::Distribution;
use super::protocol::{Ceilings, Device};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig, PushKernelArg, sys,
};
use cudarc::nvrtc::Ptx;
use optiml_runtime::probe;
use optiml_spec::DType;
use std::sync::Arc;

/// Bytes overwritten between timed runs so that no run starts with inputs in the H200's 60 MiB L2.
const FLUSH_BYTES: usize = 256 << 20;

/// Why a job stopped early.
#[derive(Debug)]
pub enum Stop {
    /// A check failed: the candidate is wrong (never timed, or its timed output was wrong).
    Reject {
        /// Which check (shape, distribution).
        check: String,
        /// What was wrong.
        reason: String,
    },
    /// The driver reported an error; the context is unusable.
    Fault {
        /// What the worker was doing.
        during: String,
        /// The driver's error.
        error: String,
    },
}

/// Turns a driver error during `during` into a [`Stop::Fault`].
pub fn fault<E: std::fmt::Display>(during: impl Into<String>) -> impl FnOnce(E) -> Stop {
    let during = during.into();
    move |e| Stop::Fault {
        during,
        error: e.to_string(),
    }
}

/// How a candidate's launch failed: arguments that are not its code's parameters are the candidate's fault (a
/// rejection, with nothing launched), anything else the device's.
pub fn launch_failed(during: impl Into<String>) -> impl FnOnce(optiml_runtime::Error) -> Stop {
    let during = during.into();
    move |e| match e {
        optiml_runtime::Error::Parameters { .. } => reject("launch", e.to_string()),
        e => fault(during)(e),
    }
}

/// A failed check.
pub fn reject(check: impl Into<String>, reason: impl Into<String>) -> Stop {
    Stop::Reject {
        check: check.into(),
        reason: reason.into(),
    }
}

/// The trusted support kernels of `support.cu`, loaded once per worker.
pub(crate) struct Support {
    _module: Arc<CudaModule>,
    fill: CudaFunction,
    fill_const: CudaFunction,
    count_nonfinite: CudaFunction,
    fma_peak: CudaFunction,
    round16: CudaFunction,
    to16: CudaFunction,
    from16: CudaFunction,
    to_mask: CudaFunction,
    poison: CudaFunction,
    decoy: CudaFunction,
    count_poisoned: CudaFunction,
    gather: CudaFunction,
    round_tf32: CudaFunction,
    digest: CudaFunction,
    /// The matmul gate's float64 reference and its comparison (`families/matmul/cuda/reference.cu`).
    pub(crate) matmul_reference: CudaFunction,
    pub(crate) matmul_compare: CudaFunction,
}

/// Device copies of three buffers (a matmul's A, B and C) in a 16-bit kernel's element type, each between guard
/// regions (the kernel reads and writes these). The checks fill, poison and read the f32 buffers beside them,
/// whose values the 16-bit type holds exactly ([`Bench::round16`]); these are converted from them before a
/// launch and back after it.
pub enum Narrow {
    /// bf16 copies.
    Bf16([Guarded<half::bf16>; 3]),
    /// fp16 copies.
    F16([Guarded<half::f16>; 3]),
}

impl Narrow {
    /// Writes the pattern of `seed` into the copies' guards (`seed + 1` and `+ 2` for B and C).
    ///
    /// # Errors
    /// [`Stop::Fault`] when the copy fails.
    pub fn arm(&mut self, seed: u64) -> Result<(), Stop> {
        match self {
            Narrow::Bf16(bufs) => arm3(bufs, seed),
            Narrow::F16(bufs) => arm3(bufs, seed),
        }
    }

    /// Rejects the candidate of check `check` when it wrote into a guard of copy `which` (0 A, 1 B, 2 C), named
    /// `name` (e.g. "C (bf16)").
    ///
    /// # Errors
    /// [`Stop::Reject`] naming the copy; [`Stop::Fault`] when the copy back fails.
    pub fn check(&self, which: usize, check: &str, name: &str) -> Result<(), Stop> {
        match self {
            Narrow::Bf16(bufs) => bufs[which].check(check, name),
            Narrow::F16(bufs) => bufs[which].check(check, name),
        }
    }
}

fn arm3<T: cudarc::driver::DeviceRepr>(bufs: &mut [Guarded<T>; 3], seed: u64) -> Result<(), Stop> {
    for (i, b) in bufs.iter_mut().enumerate() {
        b.arm(seed.wrapping_add(i as u64))?;
    }
    Ok(())
}

/// The support kernels' code of a 16-bit type.
fn code16(dtype: DType) -> i32 {
    match dtype {
        DType::F16 => 1,
        DType::Bf16 | DType::F32 => 0,
    }
}

/// A grid-stride launch over `n` elements: 256 threads, at most 8 blocks per multiprocessor.
pub fn grid_for(n: usize, sm_count: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (
            (n.div_ceil(256)).clamp(1, sm_count as usize * 8) as u32,
            1,
            1,
        ),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The 16-bit element types the conversion kernels read and write as raw `unsigned short` patterns.
pub trait Narrow16: cudarc::driver::DeviceRepr + private::Sealed {}
impl Narrow16 for half::bf16 {}
impl Narrow16 for half::f16 {}

/// The element types of outputs the output kernels ([`Bench::poison`], [`Bench::count_poisoned`],
/// [`Bench::gather`]) read and write in place, by their code in `support.cu`.
pub trait Stored: cudarc::driver::DeviceRepr + private::Sealed {
    /// The support kernels' code of the type.
    const CODE: i32;
}
impl Stored for f32 {
    const CODE: i32 = 0;
}
impl Stored for half::bf16 {
    const CODE: i32 = 1;
}
impl Stored for half::f16 {
    const CODE: i32 = 2;
}
impl Stored for i32 {
    const CODE: i32 = 3;
}
impl Stored for i64 {
    const CODE: i32 = 4;
}

mod private {
    /// Only `half`'s two 16-bit float types are [`super::Narrow16`]; those and f32, i32 and i64 are
    /// [`super::Stored`].
    pub trait Sealed {}
    impl Sealed for half::bf16 {}
    impl Sealed for half::f16 {}
    impl Sealed for f32 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
}

/// Positions of an output's elements on the device, uploaded once and gathered from after every checked run.
pub struct Positions {
    at: CudaSlice<i64>,
    /// One past the largest position: the shortest buffer they may be gathered from.
    end: usize,
}

impl Positions {
    /// How many elements a gather from them returns.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// Whether they name no element.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }
}

/// A gate's workbench on one device: see the module docs.
pub struct Bench {
    /// The stream every check and timed run is issued on.
    pub stream: Arc<CudaStream>,
    /// The context candidates' modules load into.
    pub ctx: Arc<CudaContext>,
    support: Support,
    /// The device and its measured ceilings.
    pub device: Device,
    /// Overwritten between timed runs; taken out while being written.
    flush: Option<CudaSlice<f32>>,
    /// Whatever a gate keeps between jobs (its dispatch buffers: allocating gigabytes per job would dominate the
    /// step time); a gate that finds another gate's value here replaces it.
    pub kept: Option<Box<dyn std::any::Any>>,
    /// The host memory a job may take ([`limits::host_cap_here`]), or why the setting is wrong (every job is then
    /// refused, saying so).
    host_cap: Result<HostCap, LimitError>,
    /// Trusted modules loaded by [`Bench::load_trusted`], newest last, with their PTX: a search sends the same
    /// program's float64 reference with every job, and loading it (a JIT compile) per job would repeat the
    /// same work.
    trusted: Vec<(String, Arc<CudaModule>)>,
}

/// The most trusted modules a worker keeps loaded.
const TRUSTED_MODULES: usize = 4;

impl Bench {
    /// The module of `ptx`, trusted code the parent compiled (a family's float64 reference), loaded once per
    /// worker while it is among the last four asked for.
    ///
    /// # Errors
    /// What loading the module reports.
    pub fn load_trusted(
        &mut self,
        ptx: &str,
    ) -> Result<Arc<CudaModule>, cudarc::driver::DriverError> {
        if let Some(at) = self.trusted.iter().position(|(p, _)| p == ptx) {
            let hit = self.trusted.remove(at);
            let module = hit.1.clone();
            self.trusted.push(hit);
            return Ok(module);
        }
        let module = self.ctx.load_module(Ptx::from_src(ptx))?;
        if self.trusted.len() >= TRUSTED_MODULES {
            self.trusted.remove(0);
        }
        self.trusted.push((ptx.to_string(), module.clone()));
        Ok(module)
    }

    /// The toolkit on device `device`, with measured ceilings.
    pub fn new(device: usize, support_cubin: Vec<u8>) -> Result<Self, String> {
        let mut w = Self::setup(device, support_cubin)?;
        w.device.ceilings = w.ceilings().map_err(|e| e.to_string())?;
        Ok(w)
    }

    /// The toolkit without ceilings (a profiled run needs none, and their kernels would only clutter the profile).
    pub fn setup(device: usize, support_cubin: Vec<u8>) -> Result<Self, String> {
        let ctx = probe::context(device).map_err(|e| e.to_string())?;
        let stream = ctx.default_stream();
        let arch = probe::arch_of(&ctx).map_err(|e| e.to_string())?;
        let name = ctx.name().map_err(|e| e.to_string())?;
        let sm_count = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| e.to_string())? as u32;
        let module = ctx
            .load_module(Ptx::from_binary(support_cubin))
            .map_err(|e| format!("loading the support module: {e}"))?;
        let f = |n: &str| {
            module
                .load_function(n)
                .map_err(|e| format!("support kernel {n}: {e}"))
        };
        let support = Support {
            fill: f("optiml_fill")?,
            fill_const: f("optiml_fill_const")?,
            count_nonfinite: f("optiml_count_nonfinite")?,
            fma_peak: f("optiml_fma_peak")?,
            round16: f("optiml_round16")?,
            to16: f("optiml_to16")?,
            from16: f("optiml_from16")?,
            to_mask: f("optiml_to_mask")?,
            poison: f("optiml_poison")?,
            decoy: f("optiml_decoy")?,
            count_poisoned: f("optiml_count_poisoned")?,
            gather: f("optiml_gather")?,
            round_tf32: f("optiml_round_tf32")?,
            digest: f("optiml_digest")?,
            matmul_reference: f("optiml_matmul_reference")?,
            matmul_compare: f("optiml_matmul_compare")?,
            _module: module,
        };
        let flush = stream
            .alloc_zeros::<f32>(FLUSH_BYTES / 4)
            .map_err(|e| e.to_string())?;
        Ok(Bench {
            stream,
            ctx,
            support,
            device: Device {
                name,
                arch,
                sm_count,
                ceilings: Ceilings {
                    copy_tbps: 0.0,
                    fp32_tflops: 0.0,
                },
            },
            flush: Some(flush),
            kept: None,
            host_cap: limits::host_cap_here(),
            trusted: Vec::new(),
        })
    }

    /// Median of five: a 512 MiB device-to-device copy, and a grid of FMA chains filling every SM.
    fn ceilings(&mut self) -> Result<Ceilings, cudarc::driver::DriverError> {
        let s = self.stream.clone();
        let n = (512usize << 20) / 4;
        let src = s.alloc_zeros::<f32>(n)?;
        let mut dst = s.alloc_zeros::<f32>(n)?;
        let mut copy = Vec::new();
        for _ in 0..6 {
            let t = self.time(|s| s.memcpy_dtod(&src, &mut dst))?;
            copy.push(2.0 * (n * 4) as f64 / (t * 1e-3) / 1e12);
        }
        let blocks = self.device.sm_count * 8;
        let iters = 4096i32;
        let mut out = s.alloc_zeros::<f32>((blocks * 256) as usize)?;
        let mut fma = Vec::new();
        for _ in 0..6 {
            let f = &self.support.fma_peak;
            let t = self.time(|s| {
                let mut b = s.launch_builder(f);
                b.arg(&mut out).arg(&iters).arg(&1.0f32);
                // SAFETY: `optiml_fma_peak(float*, int, float)` writes at most one element per thread, and
                // `out` holds one per thread of the grid.
                unsafe {
                    b.launch(LaunchConfig {
                        grid_dim: (blocks, 1, 1),
                        block_dim: (256, 1, 1),
                        shared_mem_bytes: 0,
                    })
                }
                .map(|_| ())
            })?;
            let flops = (blocks * 256) as f64 * iters as f64 * 16.0 * 8.0 * 2.0;
            fma.push(flops / (t * 1e-3) / 1e12);
        }
        // The first of each is a warm-up.
        let median = |mut v: Vec<f64>| {
            v.remove(0);
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        Ok(Ceilings {
            copy_tbps: median(copy),
            fp32_tflops: median(fma),
        })
    }

    /// Times one piece of stream work with events, after a full sync.
    pub fn time(
        &self,
        work: impl FnOnce(&Arc<CudaStream>) -> Result<(), cudarc::driver::DriverError>,
    ) -> Result<f64, cudarc::driver::DriverError> {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        self.stream.synchronize()?;
        let start = self.stream.record_event(flags)?;
        work(&self.stream)?;
        let end = self.stream.record_event(flags)?;
        Ok(start.elapsed_ms(&end)? as f64)
    }

    /// Fills `buf` with fresh inputs of distribution `dist`, from `seed`.
    pub fn fill(
        &self,
        buf: &mut CudaSlice<f32>,
        seed: u64,
        dist: Distribution,
    ) -> Result<(), Stop> {
        let n = buf.len() as i64;
        let code = dist.code();
        let mut b = self.stream.launch_builder(&self.support.fill);
        b.arg(&mut *buf).arg(&n).arg(&seed).arg(&code);
        // SAFETY: `optiml_fill(float*, long long, u64, int)` writes indices below `n`, the buffer's length.
        unsafe { b.launch(grid_for(n as usize, self.device.sm_count)) }
            .map(|_| ())
            .map_err(fault("filling inputs"))
    }

    /// Writes `v` everywhere in `buf` (NaN poisons an output, so an unwritten element shows).
    pub fn fill_const(&self, buf: &mut CudaSlice<f32>, v: f32) -> Result<(), Stop> {
        let n = buf.len() as i64;
        let mut b = self.stream.launch_builder(&self.support.fill_const);
        b.arg(&mut *buf).arg(&n).arg(&v);
        // SAFETY: `optiml_fill_const(float*, long long, float)` writes indices below the buffer's length.
        unsafe { b.launch(grid_for(n as usize, self.device.sm_count)) }
            .map(|_| ())
            .map_err(fault("poisoning the output"))
    }

    /// Rounds an f32 input in place to values of the 16-bit `dtype`; fp16 inputs are first clamped to ±32, so
    /// that the plan's heavy-tailed inputs cannot overflow a correct output past fp16's 65504.
    pub fn round16(&self, buf: &mut CudaSlice<f32>, dtype: DType) -> Result<(), Stop> {
        let n = buf.len() as i64;
        let code = code16(dtype);
        let clip = if dtype == DType::F16 {
            32.0f32
        } else {
            f32::MAX
        };
        let mut b = self.stream.launch_builder(&self.support.round16);
        b.arg(&mut *buf).arg(&n).arg(&code).arg(&clip);
        // SAFETY: `optiml_round16(float*, long long, int, float)` rewrites indices below the buffer's length.
        unsafe { b.launch(grid_for(n as usize, self.device.sm_count)) }
            .map(|_| ())
            .map_err(fault("rounding inputs to 16 bits"))
    }

    /// Rounds f32 values in place to TF32's 10 mantissa bits (to nearest even): inputs a TF32 product keeps exactly.
    ///
    /// # Errors
    /// [`Stop::Fault`] when the launch fails.
    pub fn round_tf32(&self, buf: &mut CudaSlice<f32>) -> Result<(), Stop> {
        let n = buf.len() as i64;
        let mut b = self.stream.launch_builder(&self.support.round_tf32);
        b.arg(&mut *buf).arg(&n);
        // SAFETY: `optiml_round_tf32(float*, long long)` rewrites indices below the buffer's length.
        unsafe { b.launch(grid_for(n as usize, self.device.sm_count)) }
            .map(|_| ())
            .map_err(fault("rounding inputs to TF32"))
    }

    /// A digest of `buf`'s bytes: equal before and after a launch unless the launch wrote into it (up to a
    /// 64-bit collision).
    ///
    /// # Errors
    /// [`Stop::Fault`] when the launch or the copy fails.
    pub fn digest<T: cudarc::driver::DeviceRepr>(&self, buf: &CudaSlice<T>) -> Result<u64, Stop> {
        let mut sum = self
            .stream
            .alloc_zeros::<u64>(1)
            .map_err(fault("allocating"))?;
        let bytes = (buf.len() * std::mem::size_of::<T>()) as i64;
        let mut b = self.stream.launch_builder(&self.support.digest);
        b.arg(buf).arg(&bytes).arg(&mut sum);
        // SAFETY: `optiml_digest(const unsigned char*, long long, u64*)` reads the buffer's `bytes` bytes (as
        // aligned 32-bit words, then the tail byte by byte) and adds into the single counter.
        unsafe { b.launch(grid_for(bytes as usize / 4, self.device.sm_count)) }
            .map_err(fault("digesting an input"))?;
        let host = self
            .stream
            .clone_dtoh(&sum)
            .map_err(fault("reading the digest"))?;
        Ok(host[0])
    }

    /// The support kernels, for a family's own launches of its reference.
    pub(crate) fn support(&self) -> &Support {
        &self.support
    }

    /// Refuses a job (or one size of it) whose `need` would not fit: its device bytes past
    /// [`limits::DEVICE_PERCENT`] of the device's free memory (asked only when there are some), or its host bytes
    /// past the host cap. Called before the buffers are allocated, so a job too large for this machine is a clear
    /// rejection ("memory"), not a driver error half-way or the OOM killer ending the build.
    ///
    /// # Errors
    /// [`Stop::Reject`] saying what `what` needed and what was allowed; [`Stop::Fault`] when the driver cannot
    /// say how much memory is free.
    pub fn admit(&self, what: &str, need: Need) -> Result<(), Stop> {
        let free = if need.device > 0 {
            let (free, _) = self
                .ctx
                .mem_get_info()
                .map_err(fault("asking the free GPU memory"))?;
            Some(free as u64)
        } else {
            None
        };
        limits::admit(what, need, free, &self.host_cap).map_err(|e| reject("memory", e.to_string()))
    }

    /// `len` zeroed elements between guard regions holding the pattern of `seed` ([`Guarded`]): a buffer a
    /// candidate reads or writes.
    ///
    /// # Errors
    /// [`Stop::Fault`] when the driver cannot allocate it.
    pub fn guarded<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        len: usize,
        seed: u64,
    ) -> Result<Guarded<T>, Stop> {
        Guarded::alloc(&self.stream, len, seed)
    }

    /// Allocates the 16-bit copies of buffers of `lens` elements (at least one each), their guards holding the
    /// patterns of `seed` ([`Narrow::arm`]).
    pub fn alloc_narrow(
        &self,
        dtype: DType,
        lens: [usize; 3],
        seed: u64,
    ) -> Result<Option<Narrow>, Stop> {
        fn three<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
            s: &Arc<CudaStream>,
            [a, b, c]: [usize; 3],
            seed: u64,
        ) -> Result<[Guarded<T>; 3], Stop> {
            Ok([
                Guarded::alloc(s, a.max(1), seed)?,
                Guarded::alloc(s, b.max(1), seed.wrapping_add(1))?,
                Guarded::alloc(s, c.max(1), seed.wrapping_add(2))?,
            ])
        }
        Ok(match dtype {
            DType::F32 => None,
            DType::Bf16 => Some(Narrow::Bf16(three(&self.stream, lens, seed)?)),
            DType::F16 => Some(Narrow::F16(three(&self.stream, lens, seed)?)),
        })
    }

    /// Converts `f32s` into 16-bit copy `which` (0 A, 1 B, 2 C) of `narrow`, or back (`to_narrow` false).
    pub fn convert(
        &self,
        narrow: &mut Narrow,
        which: usize,
        f32s: &mut CudaSlice<f32>,
        to_narrow: bool,
    ) -> Result<(), Stop> {
        match (narrow, to_narrow) {
            (Narrow::Bf16(bufs), true) => self.narrow(f32s, &mut bufs[which], DType::Bf16),
            (Narrow::F16(bufs), true) => self.narrow(f32s, &mut bufs[which], DType::F16),
            (Narrow::Bf16(bufs), false) => self.widen(&bufs[which], f32s, DType::Bf16),
            (Narrow::F16(bufs), false) => self.widen(&bufs[which], f32s, DType::F16),
        }
    }

    /// Rounds `f32s` to the 16-bit `dtype` into `narrow` (as many elements as the shorter holds). `T` must be
    /// that type (`half::bf16` or `half::f16`): the kernel writes raw 16-bit patterns.
    pub fn narrow<T: Narrow16>(
        &self,
        f32s: &CudaSlice<f32>,
        narrow: &mut CudaSlice<T>,
        dtype: DType,
    ) -> Result<(), Stop> {
        let n = f32s.len().min(narrow.len()) as i64;
        let code = code16(dtype);
        let mut b = self.stream.launch_builder(&self.support.to16);
        b.arg(f32s).arg(&mut *narrow).arg(&n).arg(&code);
        // SAFETY: `optiml_to16(const float*, u16*, long long, int)` touches indices below `n`, the shorter
        // buffer's length; `T` is a 2-byte `half` type, the kernel's `unsigned short`.
        unsafe { b.launch(grid_for(n as usize, self.device.sm_count)) }
            .map(|_| ())
            .map_err(fault("converting to 16 bits"))
    }

    /// Widens the 16-bit `narrow` (of `dtype`) into `f32s`, exactly.
    pub fn widen<T: Narrow16>(
        &self,
        narrow: &CudaSlice<T>,
        f32s: &mut CudaSlice<f32>,
        dtype: DType,
    ) -> Result<(), Stop> {
        let n = f32s.len().min(narrow.len()) as i64;
        let code = code16(dtype);
        let mut b = self.stream.launch_builder(&self.support.from16);
        b.arg(narrow).arg(&mut *f32s).arg(&n).arg(&code);
        // SAFETY: `optiml_from16(const u16*, float*, long long, int)` touches indices below `n`, the shorter
        // buffer's length; `T` is a 2-byte `half` type.
        unsafe { b.launch(grid_for(n as usize, self.device.sm_count)) }
            .map(|_| ())
            .map_err(fault("widening 16-bit values"))
    }

    /// Writes the mask `values > 0` into `mask` (as many elements as the shorter holds).
    pub fn to_mask(&self, values: &CudaSlice<f32>, mask: &mut CudaSlice<bool>) -> Result<(), Stop> {
        let n = values.len().min(mask.len()) as i64;
        let mut b = self.stream.launch_builder(&self.support.to_mask);
        b.arg(values).arg(&mut *mask).arg(&n);
        // SAFETY: `optiml_to_mask(const float*, unsigned char*, long long)` touches indices below `n`, the
        // shorter buffer's length; `bool` is one byte, and the kernel writes only 0 or 1.
        unsafe { b.launch(grid_for(n as usize, self.device.sm_count)) }
            .map(|_| ())
            .map_err(fault("drawing a mask"))
    }

    /// Overwrites the flush buffer, so the next run starts with nothing of its inputs in L2.
    pub fn flush_l2(&mut self) -> Result<(), Stop> {
        let Some(mut flush) = self.flush.take() else {
            return Ok(());
        };
        let done = self.fill_const(&mut flush, 0.0);
        self.flush = Some(flush);
        done
    }

    /// How many elements of `buf` are NaN or infinite (unwritten outputs stay NaN).
    pub fn count_nonfinite(&self, buf: &CudaSlice<f32>) -> Result<u64, Stop> {
        let mut count = self
            .stream
            .alloc_zeros::<u64>(1)
            .map_err(fault("allocating"))?;
        let n = buf.len() as i64;
        let mut b = self.stream.launch_builder(&self.support.count_nonfinite);
        b.arg(buf).arg(&n).arg(&mut count);
        // SAFETY: `optiml_count_nonfinite(const float*, long long, u64*)` reads indices below the buffer's
        // length and adds into the single counter.
        unsafe { b.launch(grid_for(n as usize, self.device.sm_count)) }
            .map_err(fault("counting unwritten elements"))?;
        let host = self
            .stream
            .clone_dtoh(&count)
            .map_err(fault("reading the count"))?;
        Ok(host[0])
    }

    /// Writes the value no correct kernel leaves in an output: NaN in a float, -1 (no index) in an integer.
    pub fn poison<T: Stored>(&self, buf: &mut CudaSlice<T>) -> Result<(), Stop> {
        let (n, code) = (buf.len() as i64, T::CODE);
        let mut b = self.stream.launch_builder(&self.support.poison);
        b.arg(&mut *buf).arg(&n).arg(&code);
        // SAFETY: `optiml_poison(void*, long long, int)` writes indices below the buffer's length, as elements of
        // the type `T::CODE` names, which is `T`.
        unsafe { b.launch(grid_for(n as usize, self.device.sm_count)) }
            .map(|_| ())
            .map_err(fault("poisoning the output"))
    }

    /// Writes finite values from a hash of each position and `seed` (small multiples of 1/64 in a float,
    /// indices below 1000 in an integer): what an output holds before the last timed run instead of the poison,
    /// so a kernel that computes only when it sees the poison keeps them and fails the check after that run.
    pub fn decoy<T: Stored>(&self, buf: &mut CudaSlice<T>, seed: u64) -> Result<(), Stop> {
        let (n, code) = (buf.len() as i64, T::CODE);
        let mut b = self.stream.launch_builder(&self.support.decoy);
        b.arg(&mut *buf).arg(&n).arg(&code).arg(&seed);
        // SAFETY: `optiml_decoy(void*, long long, int, u64)` writes indices below the buffer's length, as
        // elements of the type `T::CODE` names, which is `T`.
        unsafe { b.launch(grid_for(n as usize, self.device.sm_count)) }
            .map(|_| ())
            .map_err(fault("writing decoy outputs"))
    }

    /// How many of the first `n` elements of `buf` a kernel left unwritten: those still holding what
    /// [`Bench::poison`] wrote, or any NaN or infinity of a float. Counted on the device: only the count crosses.
    pub fn count_poisoned<T: Stored>(&self, buf: &CudaSlice<T>, n: usize) -> Result<u64, Stop> {
        let n = n.min(buf.len()) as i64;
        if n == 0 {
            return Ok(0);
        }
        let mut count = self
            .stream
            .alloc_zeros::<u64>(1)
            .map_err(fault("allocating"))?;
        let code = T::CODE;
        let mut b = self.stream.launch_builder(&self.support.count_poisoned);
        b.arg(buf).arg(&n).arg(&code).arg(&mut count);
        // SAFETY: `optiml_count_poisoned(const void*, long long, int, u64*)` reads indices below `n`, at most the
        // buffer's length, as `T`, and adds into the single counter.
        unsafe { b.launch(grid_for(n as usize, self.device.sm_count)) }
            .map_err(fault("counting unwritten elements"))?;
        let host = self
            .stream
            .clone_dtoh(&count)
            .map_err(fault("reading the count"))?;
        Ok(host[0])
    }

    /// Uploads element positions for [`Bench::gather`].
    pub fn positions(&self, positions: &[usize]) -> Result<Positions, Stop> {
        let at: Vec<i64> = positions.iter().map(|&p| p as i64).collect();
        let end = positions.iter().max().map_or(0, |&p| p + 1);
        let at = if at.is_empty() {
            self.stream.null::<i64>()
        } else {
            self.stream.clone_htod(&at)
        }
        .map_err(fault("uploading the compared positions"))?;
        Ok(Positions { at, end })
    }

    /// The elements of `buf` at `at`, in its order, or its first `n` without, widened exactly to f64 (indices as
    /// numbers): only these cross to the host.
    pub fn gather<T: Stored>(
        &self,
        buf: &CudaSlice<T>,
        at: Option<&Positions>,
        n: usize,
    ) -> Result<Vec<f64>, Stop> {
        let (n, bound) = match at {
            Some(p) => (p.len(), p.end),
            None => (n, n),
        };
        if bound > buf.len() {
            return Err(Stop::Fault {
                during: "reading the output back".into(),
                error: format!("element {} asked of a buffer of {}", bound - 1, buf.len()),
            });
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut out = self
            .stream
            .alloc_zeros::<f64>(n)
            .map_err(fault("allocating"))?;
        let (len, code) = (n as i64, T::CODE);
        // A null position list: the kernel reads the first `n` elements.
        let null = 0u64;
        let mut b = self.stream.launch_builder(&self.support.gather);
        b.arg(buf).arg(&code);
        match at {
            Some(p) => b.arg(&p.at),
            None => b.arg(&null),
        };
        b.arg(&len).arg(&mut out);
        // SAFETY: `optiml_gather(const void*, int, const long long*, long long, double*)` writes the `n` elements
        // of `out` and reads `buf` as `T` at positions below `bound`, checked above to be within it.
        unsafe { b.launch(grid_for(n, self.device.sm_count)) }
            .map_err(fault("gathering the compared elements"))?;
        self.stream
            .clone_dtoh(&out)
            .map_err(fault("copying the compared elements"))
    }
}

#[cfg(test)]
mod tests {
    use optiml_runtime::Arch;

    /// The support module compiles, and exports every kernel [`super::Bench::setup`] loads (a missing one would
    /// only show on a GPU, as a worker that cannot start). Skipped, with a note, where NVRTC is missing.
    #[test]
    fn support_kernels_compile_and_export_what_the_bench_loads() {
        let nvrtc = match crate::nvrtc::load() {
            Ok(n) => n,
            Err(e) => {
                eprintln!(
                    "skipped: NVRTC not found ({e}); set OPTIML_NVRTC to compile the support kernels"
                );
                return;
            }
        };
        let source = crate::eval::support_source();
        let compiled =
            crate::nvrtc::compile(nvrtc, "optiml_eval_support.cu", source, Arch::new(9, 0))
                .unwrap_or_else(|e| panic!("{e}"));
        assert!(!compiled.log.contains("warning"), "{}", compiled.log);
        for name in [
            "optiml_fill",
            "optiml_fill_const",
            "optiml_count_nonfinite",
            "optiml_fma_peak",
            "optiml_round16",
            "optiml_to16",
            "optiml_from16",
            "optiml_to_mask",
            "optiml_poison",
            "optiml_decoy",
            "optiml_count_poisoned",
            "optiml_gather",
            "optiml_round_tf32",
            "optiml_digest",
            "optiml_matmul_reference",
            "optiml_matmul_compare",
        ] {
            assert!(
                compiled.ptx.contains(&format!(".entry {name}(")),
                "`{name}` is not in the support module"
            );
        }
    }
}
