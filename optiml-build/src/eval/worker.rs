//! The evaluation worker: a separate process that owns a CUDA context, runs the TESTPLAN gate on a candidate,
//! times it, and answers over its stdout. A candidate that faults takes only this process down; the parent
//! records the failure and starts a fresh worker.
//!
//! There is no separate worker binary to install: the parent re-executes its own executable (the build script,
//! or `cargo optiml`) with [`WORKER_ENV`] set, and [`serve_if_requested`] — called first thing by
//! [`crate::Builder::compile`] and by `cargo-optiml`, with the families' gates — turns that process into a
//! worker.
//!
//! The loop is generic: it loads the candidate's module and entry points, then hands the job to the [`Gate`] of
//! the problem's family, which checks and times it with the device toolkit ([`Bench`]).

use super::device::{Bench, Stop, reject};
use super::plan;
use super::protocol::{self, Job, JobResult, Request, Response, Timed};
use cudarc::driver::sys;
use cudarc::nvrtc::Ptx;
use optiml_runtime::Target;

/// Set (to any value) in a process's environment to make [`serve_if_requested`] serve as a worker.
pub const WORKER_ENV: &str = "OPTIML_EVAL_WORKER";

/// Set with [`WORKER_ENV`] to a job file: the worker runs that job's kernel once on its dispatch shape and exits
/// (the process Nsight Compute profiles).
pub const PROFILE_ENV: &str = "OPTIML_EVAL_PROFILE";

/// Set with [`WORKER_ENV`] to a job file: the worker runs that job's whole gate once (every shape of the plan,
/// the dispatch shape with one timed run) and exits, 0 when it passed (the process `compute-sanitizer` watches).
pub const CHECK_ENV: &str = "OPTIML_EVAL_CHECK";

/// When this process was started as a worker, serves requests on stdin/stdout (or runs one profiled launch, or
/// one checked job) and exits; otherwise returns.
pub fn serve_if_requested(gates: &[&dyn Gate]) {
    if optiml_spec::env::var_os(WORKER_ENV).is_some() {
        let code = if let Some(job) = optiml_spec::env::var_os(PROFILE_ENV) {
            run_once(std::path::Path::new(&job), gates, Once::Profile)
        } else if let Some(job) = optiml_spec::env::var_os(CHECK_ENV) {
            run_once(std::path::Path::new(&job), gates, Once::Check)
        } else {
            serve(gates)
        };
        std::process::exit(code);
    }
}

/// What a one-job worker runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Once {
    /// The kernel once on the dispatch shape, nothing else (what `ncu` profiles).
    Profile,
    /// The whole gate, with one timed run.
    Check,
}

/// Reads a `(support CUBIN, device, job)` file and runs the job once, as `once` says, on fresh inputs.
fn run_once(path: &std::path::Path, gates: &[&dyn Gate], once: Once) -> i32 {
    let read = std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| {
            crate::codec::decode::<(Vec<u8>, usize, Job)>(&bytes).map_err(|e| e.to_string())
        });
    let (support, device, job) = match read {
        Ok((v, _)) => v,
        Err(e) => {
            eprintln!("optiml eval worker: cannot read `{}`: {e}", path.display());
            return 2;
        }
    };
    let mut worker = match Bench::setup(device, support) {
        Ok(bench) => Worker { bench, gates },
        Err(e) => {
            eprintln!("optiml eval worker: setup failed: {e}");
            return 2;
        }
    };
    let job = match once {
        Once::Profile => Job {
            timing: protocol::TimingPlan {
                warmup: 0,
                runs: 0,
                flush_l2: true,
            },
            plan: plan::TestPlan {
                sizes: Vec::new(),
                ..job.plan.clone()
            },
            ..job
        },
        Once::Check => Job {
            timing: protocol::TimingPlan {
                warmup: 0,
                runs: 1,
                flush_l2: false,
            },
            ..job
        },
    };
    match worker.evaluate(&job) {
        JobResult::Measured(_) => 0,
        other => {
            eprintln!(
                "optiml eval worker: the {} run failed: {other:?}",
                match once {
                    Once::Profile => "profiled",
                    Once::Check => "checked",
                }
            );
            3
        }
    }
}

/// Serves until stdin closes. Exit status 0 after a clean end, 3 after a fault (the context is unusable),
/// 2 when setup failed.
fn serve(gates: &[&dyn Gate]) -> i32 {
    let mut input = std::io::stdin().lock();
    let mut output = match protocol_output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("optiml eval worker: cannot set up the protocol's descriptor: {e}");
            return 2;
        }
    };
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
    let mut worker = match Bench::new(device, cubin) {
        Ok(bench) => Worker { bench, gates },
        Err(e) => {
            eprintln!("optiml eval worker: setup failed: {e}");
            return 2;
        }
    };
    if protocol::write(&mut output, &Response::Ready(worker.bench.device.clone())).is_err() {
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

/// The protocol's own descriptor: a copy of stdout taken before anything else runs, after which stdout itself
/// points at stderr. A kernel's device `printf` (which the driver flushes to stdout), or any library's print,
/// then lands in the log: it can neither corrupt a response frame nor forge one (a wrong kernel printing the
/// bytes of a `Measured` frame was once read as measured).
fn protocol_output() -> std::io::Result<std::io::BufWriter<std::fs::File>> {
    use std::io::Write;
    use std::os::fd::AsFd;
    std::io::stdout().lock().flush()?;
    let copy = std::io::stdout().as_fd().try_clone_to_owned()?;
    // SAFETY: dup2 on two descriptors this process holds open (stderr and stdout); it closes and replaces
    // descriptor 1 atomically and touches no memory.
    if unsafe { libc::dup2(2, 1) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(std::io::BufWriter::new(std::fs::File::from(copy)))
}

/// A family's check of its candidates: what the worker hands a job to once its module is loaded.
pub trait Gate: Sync {
    /// The family whose problems it checks ([`protocol::Problem::family`]).
    fn family(&self) -> &'static str;

    /// Checks the candidate on every size of the job's plan against the float64 reference, then times it at
    /// the problem's dispatch size (checking that output too); returns the timed runs, in milliseconds.
    ///
    /// # Errors
    /// [`Stop::Reject`] when a check fails, [`Stop::Fault`] when the driver reports an error.
    fn run(&self, bench: &mut Bench, job: &Job, target: Target<'_>) -> Result<Vec<f64>, Stop>;
}

/// A worker: the toolkit on its device, and the gates it can run.
struct Worker<'g> {
    bench: Bench,
    gates: &'g [&'g dyn Gate],
}

impl Worker<'_> {
    fn evaluate(&mut self, job: &Job) -> JobResult {
        match self.run(job) {
            Ok(t) => JobResult::Measured(t),
            Err(Stop::Reject { check, reason }) => JobResult::Rejected { check, reason },
            Err(Stop::Fault { during, error }) => JobResult::Fault { during, error },
        }
    }

    fn run(&mut self, job: &Job) -> Result<Timed, Stop> {
        let module = self
            .bench
            .ctx
            .load_module(Ptx::from_binary(job.cubin.clone()))
            .map_err(|e| reject("load", format!("the driver rejected the CUBIN: {e}")))?;
        let function = module
            .load_function(&job.entry)
            .map_err(|e| reject("load", format!("no entry point `{}`: {e}", job.entry)))?;
        // Its parameter list, which every launch's arguments must match (a candidate whose source declares other
        // parameters than its launch passes is rejected, not launched).
        let function = optiml_runtime::Function::new(function);
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
        // The same companions, loaded the same way, as the generated wrapper's.
        let companions = optiml_runtime::load_companions(&module, job.launch.companions())
            .map_err(|(entry, e)| reject("load", format!("a module without its `{entry}`: {e}")))?;
        let target = Target {
            function: &function,
            companions: companions.each_ref().map(Option::as_ref),
            launch: job.launch,
            sm_count: self.bench.device.sm_count,
        };
        let gate = self
            .gates
            .iter()
            .find(|g| g.family() == job.problem.family)
            .ok_or_else(|| {
                reject(
                    "problem",
                    format!(
                        "this worker has no gate for `{}` kernels",
                        job.problem.family
                    ),
                )
            })?;
        let times = gate.run(&mut self.bench, job, target);
        times.map(|times_ms| Timed {
            times_ms,
            blocks_per_sm,
            function: attributes,
        })
    }
}
