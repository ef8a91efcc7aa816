//! The evaluation worker: a separate process that owns a CUDA context, runs the TESTPLAN gate on a candidate,
//! times it, and answers over its stdout. A candidate that faults takes only this process down; the parent
//! records the failure and starts a fresh worker.
//!
//! There is no separate worker binary to install: the parent re-executes its own executable (the build script,
//! or `cargo optiml`) with [`WORKER_ENV`] set, and [`serve_if_requested`] — called first thing by
//! [`crate::Builder::compile`] and by `cargo-optiml` — turns that process into a worker.

use super::plan::{self, Comparison, MatmulShape, Operands};
use super::protocol::{self, Ceilings, Device, Job, JobResult, Problem, Request, Response, Timed};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig, PushKernelArg, sys,
};
use cudarc::nvrtc::Ptx;
use optiml_runtime::elementwise::{self, ElementwiseArgs};
use optiml_runtime::matmul::{self, MatmulArgs};
use optiml_runtime::{Target, probe};
use optiml_spec::{DType, ElementwiseOp, ElementwiseSpec, MatmulSpec, Operand};
use std::sync::Arc;

/// Set (to any value) in a process's environment to make [`serve_if_requested`] serve as a worker.
pub const WORKER_ENV: &str = "OPTIML_EVAL_WORKER";

/// Bytes overwritten between timed runs so that no run starts with inputs in the H200's 60 MiB L2.
const FLUSH_BYTES: usize = 256 << 20;

/// Set with [`WORKER_ENV`] to a job file: the worker runs that job's kernel once on its dispatch shape and exits
/// (the process Nsight Compute profiles).
pub const PROFILE_ENV: &str = "OPTIML_EVAL_PROFILE";

/// When this process was started as a worker, serves requests on stdin/stdout (or runs one profiled launch)
/// and exits; otherwise returns.
pub fn serve_if_requested() {
    if optiml_spec::env::var_os(WORKER_ENV).is_some() {
        let code = match optiml_spec::env::var_os(PROFILE_ENV) {
            Some(job) => profile_once(std::path::Path::new(&job)),
            None => serve(),
        };
        std::process::exit(code);
    }
}

/// Reads a `(support CUBIN, device, job)` file and launches the job's kernel once on fresh inputs.
fn profile_once(path: &std::path::Path) -> i32 {
    let read = std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| {
            bincode::serde::decode_from_slice::<(Vec<u8>, usize, Job), _>(
                &bytes,
                bincode::config::standard(),
            )
            .map_err(|e| e.to_string())
        });
    let (support, device, job) = match read {
        Ok((v, _)) => v,
        Err(e) => {
            eprintln!("optiml eval worker: cannot read `{}`: {e}", path.display());
            return 2;
        }
    };
    let mut worker = match Worker::setup(device, support) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("optiml eval worker: setup failed: {e}");
            return 2;
        }
    };
    let once = Job {
        timing: protocol::TimingPlan {
            warmup: 0,
            runs: 0,
            flush_l2: true,
        },
        plan: plan::TestPlan {
            shapes: Vec::new(),
            ..job.plan.clone()
        },
        ..job
    };
    match worker.evaluate(&once) {
        JobResult::Measured(_) => 0,
        other => {
            eprintln!("optiml eval worker: the profiled run failed: {other:?}");
            3
        }
    }
}

/// Serves until stdin closes. Exit status 0 after a clean end, 3 after a fault (the context is unusable),
/// 2 when setup failed.
fn serve() -> i32 {
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    let (cubin, device) = match protocol::read::<Request>(&mut input) {
        Ok(Some(Request::Setup {
            support_cubin,
            device,
        })) => (support_cubin, device),
        other => {
            eprintln!("optiml eval worker: expected a setup message, got {other:?}");
            return 2;
        }
    };
    let mut worker = match Worker::new(device, cubin) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("optiml eval worker: setup failed: {e}");
            return 2;
        }
    };
    if protocol::write(&mut output, &Response::Ready(worker.device.clone())).is_err() {
        return 2;
    }
    loop {
        let job = match protocol::read::<Request>(&mut input) {
            Ok(Some(Request::Evaluate(job))) => job,
            Ok(None) => return 0,
            Ok(Some(Request::Setup { .. })) | Err(_) => {
                eprintln!("optiml eval worker: malformed request");
                return 2;
            }
        };
        let result = worker.evaluate(&job);
        let fault = matches!(result, JobResult::Fault { .. });
        if protocol::write(&mut output, &Response::Done(result)).is_err() || fault {
            return if fault { 3 } else { 2 };
        }
    }
}

/// Why a job stopped early.
enum Stop {
    Reject { check: String, reason: String },
    Fault { during: String, error: String },
}

fn fault<E: std::fmt::Display>(during: impl Into<String>) -> impl FnOnce(E) -> Stop {
    let during = during.into();
    move |e| Stop::Fault {
        during,
        error: e.to_string(),
    }
}

fn reject(check: impl Into<String>, reason: impl Into<String>) -> Stop {
    Stop::Reject {
        check: check.into(),
        reason: reason.into(),
    }
}

struct Support {
    _module: Arc<CudaModule>,
    fill: CudaFunction,
    fill_const: CudaFunction,
    count_nonfinite: CudaFunction,
    fma_peak: CudaFunction,
    round16: CudaFunction,
    to16: CudaFunction,
    from16: CudaFunction,
}

/// Device copies of A, B and C in a 16-bit kernel's element type. The checks fill, poison and read the f32
/// buffers beside them, whose values the 16-bit type holds exactly (`Worker::round16`); these are converted
/// from them before a launch and C back after it.
enum Narrow {
    Bf16([CudaSlice<half::bf16>; 3]),
    F16([CudaSlice<half::f16>; 3]),
}

/// The support kernels' code of a 16-bit type.
fn code16(dtype: DType) -> i32 {
    match dtype {
        DType::F16 => 1,
        DType::Bf16 | DType::F32 => 0,
    }
}

/// The dispatch shape's buffers, kept between jobs of the same shape (allocating gigabytes per job would
/// dominate the step time).
struct Dispatch {
    shape: MatmulShape,
    a: CudaSlice<f32>,
    b: CudaSlice<f32>,
    c: CudaSlice<f32>,
    c0: Option<CudaSlice<f32>>,
    bias: Option<CudaSlice<f32>>,
    /// A, B and C in the kernel's 16-bit type.
    narrow: Option<Narrow>,
}

struct Worker {
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    support: Support,
    device: Device,
    /// Overwritten between timed runs; taken out while being written.
    flush: Option<CudaSlice<f32>>,
    dispatch: Option<Dispatch>,
}

fn grid_for(n: usize, sm_count: u32) -> LaunchConfig {
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

impl Worker {
    /// A worker with measured ceilings.
    fn new(device: usize, support_cubin: Vec<u8>) -> Result<Self, String> {
        let mut w = Self::setup(device, support_cubin)?;
        w.device.ceilings = w.ceilings().map_err(|e| e.to_string())?;
        Ok(w)
    }

    /// A worker without ceilings (a profiled run needs none, and their kernels would only clutter the profile).
    fn setup(device: usize, support_cubin: Vec<u8>) -> Result<Self, String> {
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
            _module: module,
        };
        let flush = stream
            .alloc_zeros::<f32>(FLUSH_BYTES / 4)
            .map_err(|e| e.to_string())?;
        Ok(Worker {
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
            dispatch: None,
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
    fn time(
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

    fn fill(
        &self,
        buf: &mut CudaSlice<f32>,
        seed: u64,
        dist: plan::Distribution,
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

    fn fill_const(&self, buf: &mut CudaSlice<f32>, v: f32) -> Result<(), Stop> {
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
    fn round16(&self, buf: &mut CudaSlice<f32>, dtype: DType) -> Result<(), Stop> {
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

    /// Allocates the 16-bit copies of buffers of `lens` elements.
    fn alloc_narrow(&self, dtype: DType, lens: [usize; 3]) -> Result<Option<Narrow>, Stop> {
        fn three<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
            s: &Arc<CudaStream>,
            [a, b, c]: [usize; 3],
        ) -> Result<[CudaSlice<T>; 3], Stop> {
            let alloc = |n: usize| {
                s.alloc_zeros::<T>(n.max(1))
                    .map_err(fault("allocating 16-bit buffers"))
            };
            Ok([alloc(a)?, alloc(b)?, alloc(c)?])
        }
        Ok(match dtype {
            DType::F32 => None,
            DType::Bf16 => Some(Narrow::Bf16(three(&self.stream, lens)?)),
            DType::F16 => Some(Narrow::F16(three(&self.stream, lens)?)),
        })
    }

    /// Converts `f32s` into 16-bit copy `which` (0 A, 1 B, 2 C) of `narrow`, or back (`to_narrow` false).
    fn convert(
        &self,
        narrow: &mut Narrow,
        which: usize,
        f32s: &mut CudaSlice<f32>,
        to_narrow: bool,
    ) -> Result<(), Stop> {
        fn go<T: cudarc::driver::DeviceRepr>(
            w: &Worker,
            narrow: &mut CudaSlice<T>,
            f32s: &mut CudaSlice<f32>,
            to_narrow: bool,
            code: i32,
        ) -> Result<(), Stop> {
            let n = f32s.len().min(narrow.len()) as i64;
            let (f, what) = if to_narrow {
                (&w.support.to16, "converting to 16 bits")
            } else {
                (&w.support.from16, "widening the 16-bit output")
            };
            let mut b = w.stream.launch_builder(f);
            if to_narrow {
                b.arg(&*f32s).arg(&mut *narrow);
            } else {
                b.arg(&*narrow).arg(&mut *f32s);
            }
            b.arg(&n).arg(&code);
            // SAFETY: `optiml_to16(const float*, u16*, long long, int)` and `optiml_from16(const u16*, float*,
            // long long, int)` touch indices below `n`, the shorter buffer's length; both element types are
            // 2-byte `half` types, the kernels' `unsigned short`.
            unsafe { b.launch(grid_for(n as usize, w.device.sm_count)) }
                .map(|_| ())
                .map_err(fault(what))
        }
        match narrow {
            Narrow::Bf16(bufs) => go(self, &mut bufs[which], f32s, to_narrow, 0),
            Narrow::F16(bufs) => go(self, &mut bufs[which], f32s, to_narrow, 1),
        }
    }

    /// Overwrites the flush buffer, so the next run starts with nothing of its inputs in L2.
    fn flush_l2(&mut self) -> Result<(), Stop> {
        let Some(mut flush) = self.flush.take() else {
            return Ok(());
        };
        let done = self.fill_const(&mut flush, 0.0);
        self.flush = Some(flush);
        done
    }

    fn count_nonfinite(&self, buf: &CudaSlice<f32>) -> Result<u64, Stop> {
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

    fn evaluate(&mut self, job: &Job) -> JobResult {
        match self.run(job) {
            Ok(t) => JobResult::Measured(t),
            Err(Stop::Reject { check, reason }) => JobResult::Rejected { check, reason },
            Err(Stop::Fault { during, error }) => JobResult::Fault { during, error },
        }
    }

    fn run(&mut self, job: &Job) -> Result<Timed, Stop> {
        let module = self
            .ctx
            .load_module(Ptx::from_binary(job.cubin.clone()))
            .map_err(|e| reject("load", format!("the driver rejected the CUBIN: {e}")))?;
        let function = module
            .load_function(&job.entry)
            .map_err(|e| reject("load", format!("no entry point `{}`: {e}", job.entry)))?;
        let threads = job.launch.threads();
        let smem = job.launch.smem_bytes();
        if smem > 48 * 1024 {
            function
                .set_attribute(
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem as i32,
                )
                .map_err(|e| reject("load", format!("{smem} bytes of shared memory: {e}")))?;
        }
        let blocks_per_sm = function
            .occupancy_max_active_blocks_per_multiprocessor(threads, smem as usize, None)
            .map_err(|e| reject("load", format!("occupancy: {e}")))?;
        if blocks_per_sm == 0 {
            return Err(reject(
                "load",
                format!(
                    "{threads} threads with {smem} bytes of shared memory cannot run on this device"
                ),
            ));
        }
        let attr = |a| {
            function
                .get_attribute(a)
                .map(|v| v.max(0) as u32)
                .unwrap_or(0)
        };
        let attributes = protocol::FunctionAttributes {
            registers: attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS),
            local_bytes: attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            shared_bytes: attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
        };
        // The same companions the generated wrapper loads (`Launch::companions`).
        let companions = job.launch.companions();
        let required = |entry: Option<&str>| {
            entry
                .map(|entry| {
                    module
                        .load_function(entry)
                        .map_err(|e| reject("load", format!("a module without its `{entry}`: {e}")))
                })
                .transpose()
        };
        let reduce = required(companions.reduce)?;
        let fallback = required(companions.fallback)?;
        let gemv = companions
            .gemv
            .and_then(|entry| module.load_function(entry).ok());
        let target = Target {
            function: &function,
            reduce: reduce.as_ref(),
            gemv: gemv.as_ref(),
            fallback: fallback.as_ref(),
            launch: job.launch,
            sm_count: self.device.sm_count,
        };
        let times = match &job.problem {
            Problem::Matmul {
                spec,
                dtype,
                dispatch,
                alpha,
                beta,
            } => {
                let case = Case {
                    job,
                    target,
                    spec,
                    dtype: *dtype,
                    alpha: *alpha,
                    beta: *beta,
                };
                for (i, shape) in job.plan.shapes.iter().enumerate() {
                    let seed = plan::splitmix(job.seed ^ (i as u64 + 1));
                    self.check_shape(&case, shape, seed, i)?;
                }
                self.time_dispatch(&case, *dispatch)
            }
            Problem::Elementwise { spec, n, s } => {
                for (i, &len) in job.plan.lengths.iter().enumerate() {
                    let seed = plan::splitmix(job.seed ^ (i as u64 + 1));
                    self.elementwise_run(job, target, spec, len, *s, seed, i, None)?;
                }
                let seed = plan::splitmix(job.seed ^ 0xd15);
                let mut times = Vec::new();
                self.elementwise_run(job, target, spec, *n, *s, seed, 0, Some(&mut times))?;
                Ok(times)
            }
        };
        times.map(|times_ms| Timed {
            times_ms,
            blocks_per_sm,
            function: attributes,
        })
    }

    /// One elementwise check on fresh inputs of length `n`. Without `times`, every element is compared with
    /// the float64 reference. With `times` (the dispatch length), the first run is checked on sampled elements
    /// after every element was found written, then warm-up and timed runs follow, each from a poisoned output
    /// and a flushed L2, and the last output is checked again.
    #[allow(clippy::too_many_arguments)]
    fn elementwise_run(
        &mut self,
        job: &Job,
        target: Target<'_>,
        spec: &ElementwiseSpec,
        n: usize,
        s: f32,
        seed: u64,
        index: usize,
        times: Option<&mut Vec<f64>>,
    ) -> Result<(), Stop> {
        let dist = job.plan.distribution(index + job.seed as usize % 3);
        let check = format!(
            "n={n} {dist}{}",
            if times.is_some() {
                " (dispatch length)"
            } else {
                ""
            }
        );
        let st = self.stream.clone();
        let alloc = |len: usize| {
            st.alloc_zeros::<f32>(len.max(1))
                .map_err(fault("allocating"))
        };
        let tensor_y = matches!(spec.op, ElementwiseOp::Binary(_, Operand::Tensor));
        let (mut x, mut out) = (alloc(n)?, alloc(n)?);
        let mut y = if tensor_y { Some(alloc(n)?) } else { None };
        self.fill(&mut x, seed ^ 1, dist)?;
        if let Some(y) = &mut y {
            self.fill(y, seed ^ 2, dist)?;
        }
        let copy = |buf: &CudaSlice<f32>| st.clone_dtoh(buf).map_err(fault("copying inputs"));
        let hx = copy(&x)?;
        let hy = match &y {
            Some(y) => copy(y)?,
            None => Vec::new(),
        };
        let launch = |w: &Self, out: &mut CudaSlice<f32>| {
            elementwise::launch_target(
                "candidate",
                &w.stream,
                target,
                ElementwiseArgs {
                    x: &x,
                    y: y.as_ref(),
                    out,
                    n: Some(n),
                    s,
                },
            )
            .map_err(fault(format!("launching `{}`", job.name)))
        };
        // Every element when checking, else the first, middle and last plus drawn ones.
        let positions: Vec<usize> = if times.is_none() {
            (0..n).collect()
        } else {
            let (rows, _) = plan::sample_grid(n, 1, job.plan.dispatch_samples.pow(2), seed);
            rows
        };
        let verify = |w: &Self, out: &CudaSlice<f32>, when: &str| -> Result<(), Stop> {
            let unwritten = w.count_nonfinite(out)?;
            if unwritten > 0 {
                return Err(reject(
                    check.clone(),
                    format!("{unwritten} of {n} output elements are NaN or infinite {when}"),
                ));
            }
            let host = copy(out)?;
            let pairs: Vec<(f32, f64)> = positions
                .iter()
                .map(|&i| {
                    let yi = hy.get(i).copied().unwrap_or(0.0);
                    (host[i], plan::elementwise_reference(spec, hx[i], yi, s))
                })
                .collect();
            plan::check_elementwise(&job.plan.tolerance, &pairs, &|k| {
                format!("out[{}] {when}", positions[k])
            })
            .map(|_| ())
            .map_err(|reason| reject(check.clone(), reason))
        };
        let Some(times) = times else {
            self.fill_const(&mut out, f32::NAN)?;
            launch(self, &mut out)?;
            st.synchronize()
                .map_err(fault(format!("running `{}` on {check}", job.name)))?;
            return verify(self, &out, "");
        };
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        for run in 0..1 + job.timing.warmup + job.timing.runs {
            self.fill_const(&mut out, f32::NAN)?;
            if job.timing.flush_l2 {
                self.flush_l2()?;
            }
            let start = st
                .record_event(flags)
                .map_err(fault("recording an event"))?;
            launch(self, &mut out)?;
            let end = st
                .record_event(flags)
                .map_err(fault("recording an event"))?;
            let ms = start
                .elapsed_ms(&end)
                .map_err(fault(format!("running `{}` on {check}", job.name)))?;
            if run == 0 {
                verify(self, &out, "after the first run")?;
            } else if run > job.timing.warmup {
                times.push(ms as f64);
            }
        }
        verify(self, &out, "after the last timed run")
    }

    /// Launches the candidate on `shape` through the runtime's own launcher: on the f32 buffers, or for a
    /// 16-bit kernel on `narrow` after converting A, B and C into it, converting C back after the launch. The
    /// conversions are stream work before and after the launch: a timed launch's events bracket only the
    /// launch itself (`launch_timed`).
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        case: &Case<'_>,
        shape: &MatmulShape,
        a: &mut CudaSlice<f32>,
        b: &mut CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        bias: Option<&CudaSlice<f32>>,
        narrow: Option<&mut Narrow>,
    ) -> Result<(), Stop> {
        let Some(narrow) = narrow else {
            return self.launch_timed(case, shape, Operands32::F32(a, b, c), bias, None);
        };
        self.convert(narrow, 0, a, true)?;
        self.convert(narrow, 1, b, true)?;
        self.convert(narrow, 2, c, true)?;
        self.launch_timed(case, shape, Operands32::Narrow(narrow), bias, None)?;
        self.convert(narrow, 2, c, false)
    }

    /// Launches on device operands as they are, with events around the launch when `times` is given.
    fn launch_timed(
        &self,
        case: &Case<'_>,
        shape: &MatmulShape,
        ops: Operands32<'_>,
        bias: Option<&CudaSlice<f32>>,
        times: Option<&mut Vec<f64>>,
    ) -> Result<(), Stop> {
        fn go<T: matmul::Element>(
            w: &Worker,
            case: &Case<'_>,
            shape: &MatmulShape,
            (a, b, c): (&CudaSlice<T>, &CudaSlice<T>, &mut CudaSlice<T>),
            bias: Option<&CudaSlice<f32>>,
            times: Option<&mut Vec<f64>>,
        ) -> Result<(), Stop> {
            let s = &w.stream;
            let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
            let start = match times {
                Some(_) => Some(s.record_event(flags).map_err(fault("recording an event"))?),
                None => None,
            };
            matmul::launch_target(
                "candidate",
                s,
                case.target,
                MatmulArgs {
                    a,
                    b,
                    c,
                    bias,
                    batch: shape.batch,
                    m: shape.m,
                    n: shape.n,
                    k: shape.k,
                    alpha: case.alpha,
                    beta: case.beta,
                    shared_a: case.spec.shared_a,
                    shared_b: case.spec.shared_b,
                },
            )
            .map_err(fault(format!("launching `{}`", case.job.name)))?;
            if let (Some(start), Some(times)) = (start, times) {
                let end = s.record_event(flags).map_err(fault("recording an event"))?;
                let ms = start
                    .elapsed_ms(&end)
                    .map_err(fault(format!("running `{}` on {shape}", case.job.name)))?;
                times.push(ms as f64);
            }
            Ok(())
        }
        match ops {
            Operands32::F32(a, b, c) => go(self, case, shape, (a, b, c), bias, times),
            Operands32::Narrow(Narrow::Bf16([a, b, c])) => {
                go(self, case, shape, (a, b, c), bias, times)
            }
            Operands32::Narrow(Narrow::F16([a, b, c])) => {
                go(self, case, shape, (a, b, c), bias, times)
            }
        }
    }

    /// One fully checked shape: fresh inputs, a NaN-poisoned output (or a random old C with beta), every element
    /// compared with the float64 reference.
    fn check_shape(
        &mut self,
        case: &Case<'_>,
        shape: &MatmulShape,
        seed: u64,
        index: usize,
    ) -> Result<(), Stop> {
        let (job, spec) = (case.job, case.spec);
        let dist = job.plan.distribution(index + job.seed as usize % 3);
        let check = format!("{shape} {dist}");
        let (pa, pb, pc) = shape.per_item();
        let s = self.stream.clone();
        let alloc = |n: usize| s.alloc_zeros::<f32>(n.max(1)).map_err(fault("allocating"));
        let (la, lb) = shape.operand_lens(spec);
        let mut a = alloc(la)?;
        let mut b = alloc(lb)?;
        let mut c = alloc(shape.batch * pc)?;
        let mut bias = if spec.bias {
            Some(alloc(shape.n)?)
        } else {
            None
        };
        self.fill(&mut a, seed ^ 1, dist)?;
        self.fill(&mut b, seed ^ 2, dist)?;
        if spec.beta {
            self.fill(&mut c, seed ^ 3, dist)?;
        } else {
            self.fill_const(&mut c, f32::NAN)?;
        }
        if let Some(bias) = &mut bias {
            self.fill(bias, seed ^ 4, dist)?;
        }
        let mut narrow = self.alloc_narrow(case.dtype, [la, lb, shape.batch * pc])?;
        if narrow.is_some() {
            for buf in [&mut a, &mut b, &mut c] {
                self.round16(buf, case.dtype)?;
            }
        }
        let host = |buf: &CudaSlice<f32>| s.clone_dtoh(buf).map_err(fault("copying inputs"));
        let (ha, hb, hc0) = (host(&a)?, host(&b)?, host(&c)?);
        let hbias = bias.as_ref().map(host).transpose()?;
        self.launch(
            case,
            shape,
            &mut a,
            &mut b,
            &mut c,
            bias.as_ref(),
            narrow.as_mut(),
        )?;
        s.synchronize()
            .map_err(fault(format!("running `{}` on {check}", job.name)))?;
        let out = host(&c)?;
        for item in 0..shape.batch {
            let (oa, ob) = shape.operand_offsets(spec, item);
            let ops = Operands {
                a: &ha[oa..][..pa],
                b: &hb[ob..][..pb],
                c0: &hc0[item * pc..][..pc],
                bias: hbias.as_deref(),
            };
            plan::check_item(
                spec,
                shape,
                &job.plan.tolerance,
                &ops,
                case.alpha,
                case.beta,
                &out[item * pc..][..pc],
                item,
            )
            .map_err(|reason| reject(check.clone(), reason))?;
        }
        Ok(())
    }

    /// The dispatch shape: fresh inputs, a verified first run, then warm-up and timed runs each starting from a
    /// poisoned output and a flushed L2, then the last output checked again (a kernel that skips work once it
    /// has produced an answer leaves NaN behind).
    fn time_dispatch(&mut self, case: &Case<'_>, shape: MatmulShape) -> Result<Vec<f64>, Stop> {
        let spec = case.spec;
        let (_, _, pc) = shape.per_item();
        let (la, lb) = shape.operand_lens(spec);
        let s = self.stream.clone();
        let reusable = self.dispatch.as_ref().is_some_and(|d| {
            d.shape == shape
                && (d.a.len(), d.b.len()) == (la.max(1), lb.max(1))
                && d.c0.is_some() == spec.beta
                && d.bias.is_some() == spec.bias
                && matches!(
                    (&d.narrow, case.dtype),
                    (None, DType::F32)
                        | (Some(Narrow::Bf16(_)), DType::Bf16)
                        | (Some(Narrow::F16(_)), DType::F16)
                )
        });
        if !reusable {
            self.dispatch = None;
            let alloc = |n: usize| {
                s.alloc_zeros::<f32>(n.max(1))
                    .map_err(fault(format!("allocating the {shape} buffers")))
            };
            self.dispatch = Some(Dispatch {
                shape,
                a: alloc(la)?,
                b: alloc(lb)?,
                c: alloc(shape.batch * pc)?,
                c0: if spec.beta {
                    Some(alloc(shape.batch * pc)?)
                } else {
                    None
                },
                bias: if spec.bias {
                    Some(alloc(shape.n)?)
                } else {
                    None
                },
                narrow: self.alloc_narrow(case.dtype, [la, lb, shape.batch * pc])?,
            });
        }
        let Some(mut d) = self.dispatch.take() else {
            return Err(reject("dispatch", "no buffers"));
        };
        let result = self.time_with(case, &mut d);
        self.dispatch = Some(d);
        result
    }

    fn time_with(&mut self, case: &Case<'_>, d: &mut Dispatch) -> Result<Vec<f64>, Stop> {
        let (job, spec) = (case.job, case.spec);
        let shape = d.shape;
        let (pa, pb, pc) = shape.per_item();
        let dist = job.plan.distribution(job.seed as usize);
        let check = format!("{shape} {dist} (dispatch shape)");
        let seed = plan::splitmix(job.seed ^ 0xd15);
        self.fill(&mut d.a, seed ^ 1, dist)?;
        self.fill(&mut d.b, seed ^ 2, dist)?;
        if let Some(c0) = &mut d.c0 {
            self.fill(c0, seed ^ 3, dist)?;
        }
        if let Some(bias) = &mut d.bias {
            self.fill(bias, seed ^ 4, dist)?;
        }
        if let Some(narrow) = &mut d.narrow {
            self.round16(&mut d.a, case.dtype)?;
            self.round16(&mut d.b, case.dtype)?;
            if let Some(c0) = &mut d.c0 {
                self.round16(c0, case.dtype)?;
            }
            self.convert(narrow, 0, &mut d.a, true)?;
            self.convert(narrow, 1, &mut d.b, true)?;
        }
        let s = self.stream.clone();
        // The batch items whose every sampled element is compared: first, last and one drawn.
        let mut items = vec![
            0,
            shape.batch.saturating_sub(1),
            seed as usize % shape.batch.max(1),
        ];
        items.sort_unstable();
        items.dedup();
        let copy = |buf: &CudaSlice<f32>, from: usize, len: usize| {
            s.clone_dtoh(&buf.slice(from..from + len))
                .map_err(fault("copying inputs"))
        };
        let mut host_ops = Vec::new();
        for &item in &items {
            host_ops.push((
                copy(&d.a, shape.operand_offsets(spec, item).0, pa)?,
                copy(&d.b, shape.operand_offsets(spec, item).1, pb)?,
                match &d.c0 {
                    Some(c0) => copy(c0, item * pc, pc)?,
                    None => Vec::new(),
                },
            ));
        }
        let hbias = match &d.bias {
            Some(b) => Some(copy(b, 0, shape.n)?),
            None => None,
        };

        // The sampled rows and columns, gathered once per job (the same crossings are checked both times).
        let (rows, cols) = plan::sample_grid(
            shape.m,
            shape.n,
            job.plan.dispatch_samples / items.len().max(1),
            seed,
        );
        let gathered: Vec<plan::Gathered> = host_ops
            .iter()
            .map(|(ha, hb, hc0)| {
                let ops = Operands {
                    a: ha,
                    b: hb,
                    c0: hc0,
                    bias: hbias.as_deref(),
                };
                plan::Gathered::new(spec, &shape, &ops, &rows, &cols)
            })
            .collect();
        let verify = |w: &Self, c: &CudaSlice<f32>, when: &str| -> Result<(), Stop> {
            let unwritten = w.count_nonfinite(c)?;
            if unwritten > 0 {
                return Err(reject(
                    check.clone(),
                    format!(
                        "{unwritten} of {} output elements are NaN or infinite {when}",
                        c.len()
                    ),
                ));
            }
            let mut cmp = Comparison::default();
            for ((&item, (ha, hb, hc0)), g) in items.iter().zip(&host_ops).zip(&gathered) {
                let out = copy(c, item * pc, pc)?;
                let ops = Operands {
                    a: ha,
                    b: hb,
                    c0: hc0,
                    bias: hbias.as_deref(),
                };
                for &i in &rows {
                    for &j in &cols {
                        let (r, mag) = g.reference(spec, &shape, &ops, case.alpha, case.beta, i, j);
                        cmp.check(
                            &job.plan.tolerance,
                            &|| format!("C[{item}][{i}][{j}] {when}"),
                            out[i * shape.n + j],
                            r,
                            mag,
                        );
                    }
                }
            }
            cmp.finish(&job.plan.tolerance)
                .map(|_| ())
                .map_err(|reason| reject(check.clone(), reason))
        };

        let total = 1 + job.timing.warmup + job.timing.runs;
        let mut times = Vec::new();
        for run in 0..total {
            match &d.c0 {
                Some(c0) => s.memcpy_dtod(c0, &mut d.c).map_err(fault("restoring C"))?,
                None => self.fill_const(&mut d.c, f32::NAN)?,
            }
            if let Some(narrow) = &mut d.narrow {
                self.convert(narrow, 2, &mut d.c, true)?;
            }
            if job.timing.flush_l2 {
                self.flush_l2()?;
            }
            let mut ms = Vec::new();
            let ops = match &mut d.narrow {
                Some(narrow) => Operands32::Narrow(narrow),
                None => Operands32::F32(&mut d.a, &mut d.b, &mut d.c),
            };
            self.launch_timed(case, &shape, ops, d.bias.as_ref(), Some(&mut ms))?;
            if let Some(narrow) = &mut d.narrow {
                self.convert(narrow, 2, &mut d.c, false)?;
            }
            if run == 0 {
                // Verified before any timing counts.
                verify(self, &d.c, "after the first run")?;
            } else if run > job.timing.warmup {
                times.extend(ms);
            }
        }
        verify(self, &d.c, "after the last timed run")?;
        Ok(times)
    }
}

/// One matmul job's fixed parts: what every check and timed run of it launches.
struct Case<'a> {
    job: &'a Job,
    target: Target<'a>,
    spec: &'a MatmulSpec,
    dtype: DType,
    alpha: f32,
    beta: f32,
}

/// The device operands of one launch: the f32 buffers, or their 16-bit copies.
enum Operands32<'a> {
    F32(
        &'a mut CudaSlice<f32>,
        &'a mut CudaSlice<f32>,
        &'a mut CudaSlice<f32>,
    ),
    Narrow(&'a mut Narrow),
}
