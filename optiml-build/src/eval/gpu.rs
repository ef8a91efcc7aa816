//! The search's real [`Evaluator`]: NVRTC compiles on a pool of threads ahead of need, the worker gates and
//! times, and the result becomes a [`Measurement`] with derived speed-of-light figures.

use super::client::{Client, ClientError, WorkerCommand};
use super::plan::{TestPlan, splitmix};
use super::protocol::{Ceilings, Device, Job, JobResult, Problem, TimingPlan};
use crate::experts::Candidate;
use crate::nvrtc::{self, Compiled, Nvrtc};
use crate::search::Tunable;
use crate::search::{Evaluator, Measurement, Outcome, Signals};
use optiml_runtime::Arch;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The trusted support kernels the worker needs (compiled by the parent, which has NVRTC).
pub fn support_source() -> &'static str {
    concat!(
        include_str!("support.cu"),
        "\n",
        include_str!("../families/matmul/cuda/reference.cu")
    )
}

/// Why a GPU evaluator could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum GpuEvaluatorError {
    /// The support module did not compile.
    #[error("the evaluation support kernels did not compile: {0}")]
    Support(#[from] nvrtc::CompileFailure),
    /// No worker.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The device cannot run CUBINs for the architecture being tuned.
    #[error(
        "the GPU is {device}; a {arch} CUBIN does not run on it, so {arch} cannot be tuned here"
    )]
    Arch {
        /// The device's architecture.
        device: Arch,
        /// The architecture asked for.
        arch: Arch,
    },
    /// A search spread over GPUs of different models, whose times would not compare.
    #[error("one search's candidates are timed on GPUs of one model, and {first} is not {other}")]
    Mixed {
        /// The search's first GPU.
        first: String,
        /// The other one.
        other: String,
    },
}

type Built = Result<Arc<(Candidate, Compiled)>, String>;

enum Slot {
    /// Waiting in the pool's queue.
    Queued,
    /// Being compiled (by the pool or by the search thread).
    Compiling,
    Done(Built),
}

/// Claims a queued schedule for compiling; `false` when someone else has it.
fn claim<S: Evaluable>(shelf: &Shelf<S>, schedule: &S) -> bool {
    let Ok(mut map) = shelf.0.lock() else {
        return false;
    };
    match map.get(schedule) {
        Some(Slot::Queued) => {
            map.insert(*schedule, Slot::Compiling);
            true
        }
        _ => false,
    }
}

fn finish<S: Evaluable>(shelf: &Shelf<S>, schedule: S, built: Built) {
    if let Ok(mut map) = shelf.0.lock() {
        map.insert(schedule, Slot::Done(built));
    }
    shelf.1.notify_all();
}

/// Compiled candidates by schedule, filled by the pool.
type Shelf<S> = Arc<(Mutex<HashMap<S, Slot>>, Condvar)>;

/// A kernel the GPU evaluator runs: its schedules build candidates from the kernel's spec, and say what a job
/// computes and how much work it is. Each searchable kernel implements it beside its template, in its family's
/// folder.
pub trait Evaluable: Tunable {
    /// The spec the kernel computes.
    type Spec: Clone + std::fmt::Debug + Send + Sync + 'static;
    /// The problem size a candidate is timed at.
    type Shape: Copy + std::fmt::Debug + std::fmt::Display + Send + Sync + 'static;
    /// The candidate computing `spec` with this schedule.
    fn candidate(&self, spec: &Self::Spec) -> Candidate;
    /// What the worker verifies and times.
    fn problem(spec: &Self::Spec, shape: Self::Shape) -> Problem;
    /// The problem's FLOPs and fewest DRAM bytes (for achieved rates and derived SOL figures).
    fn work(spec: &Self::Spec, shape: Self::Shape) -> (f64, f64);
    /// The arithmetic peak the kernel is judged against (SM speed-of-light), from the device's fp32
    /// FMA peak.
    fn peak_tflops(fp32_tflops: f64) -> f64 {
        fp32_tflops
    }
    /// The schedule that launches exactly like this one for `spec` at `shape` (the launcher may adapt a schedule
    /// to the problem, and a schedule's choice may not apply to every layout); the search skips a transformation
    /// whose result launches like its starting point.
    fn as_launched(&self, _spec: &Self::Spec, _shape: Self::Shape) -> Self {
        *self
    }
    /// Where a search at `shape` starts: the schedule an untuned build launches there (a family with shape
    /// buckets has one default per bucket), so that the search's winner is never slower than what it replaces.
    fn start(_spec: &Self::Spec, _shape: Self::Shape, arch: Arch) -> Self {
        Self::default_for(arch)
    }
}

/// Totals of one evaluator's work, for the log and the throughput figure.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Candidates evaluated (compiled, gated, and timed when they passed).
    pub evaluated: usize,
    /// Rejected at compile time.
    pub compile_failures: usize,
    /// Rejected by the gate.
    pub gate_failures: usize,
    /// Faults and timeouts (each cost a worker).
    pub faults: usize,
    /// Seconds spent waiting for compiles that were not ready.
    pub compile_wait_s: f64,
    /// Seconds spent in the worker.
    pub worker_s: f64,
    /// Candidates profiled with Nsight Compute.
    pub profiled: usize,
    /// Seconds spent profiling.
    pub profile_s: f64,
}

/// What a [`GpuEvaluator`] evaluates, and how.
#[derive(Clone, Debug)]
pub struct EvalSetup<S: Evaluable> {
    /// The kernel's name, for messages.
    pub name: String,
    /// What it computes.
    pub spec: S::Spec,
    /// The architecture candidates are compiled for (the device must run its CUBINs).
    pub arch: Arch,
    /// The shape candidates are timed at.
    pub dispatch: S::Shape,
    /// The gate.
    pub plan: TestPlan,
    /// Timing settings.
    pub timing: TimingPlan,
    /// How to start the worker process.
    pub worker: WorkerCommand,
    /// CUDA device ordinal.
    pub device: usize,
    /// NVRTC threads compiling ahead of the search.
    pub compile_threads: usize,
    /// Seeds the fresh inputs of every job.
    pub seed: u64,
    /// `ncu` to profile every verified candidate with; `None`: derived signals only (fast).
    pub ncu: Option<PathBuf>,
}

/// Evaluates schedules of one kernel on a GPU.
pub struct GpuEvaluator<S: Evaluable> {
    name: String,
    spec: S::Spec,
    arch: Arch,
    nvrtc: &'static Nvrtc,
    dispatch: S::Shape,
    plan: TestPlan,
    timing: TimingPlan,
    client: Client,
    /// Workers on further GPUs of the same model ([`GpuEvaluator::spread_over`]), each timing its share of a
    /// batch while the others time theirs.
    helpers: Vec<Client>,
    device: Device,
    shelf: Shelf<S>,
    queue: Option<Sender<S>>,
    pool: Vec<std::thread::JoinHandle<()>>,
    seed: u64,
    count: u64,
    deadline: Duration,
    stats: Stats,
    worker: WorkerCommand,
    support: Vec<u8>,
    ordinal: usize,
    ncu: Option<PathBuf>,
    profile_error: Option<String>,
}

impl<S: Evaluable> GpuEvaluator<S> {
    /// An evaluator for `setup`; compiles the support module and starts the worker.
    ///
    /// # Errors
    /// [`GpuEvaluatorError`] when the support module does not compile, the worker does not start, or the
    /// device cannot run `setup.arch` CUBINs.
    pub fn new(nvrtc: &'static Nvrtc, setup: EvalSetup<S>) -> Result<Self, GpuEvaluatorError> {
        let EvalSetup {
            name,
            spec,
            arch,
            dispatch,
            plan,
            timing,
            worker,
            device: ordinal,
            compile_threads,
            seed,
            ncu,
        } = setup;
        let support = nvrtc::compile(nvrtc, "optiml_eval_support.cu", support_source(), arch)?;
        let mut client = Client::new(worker.clone(), support.cubin.clone(), ordinal);
        let device = client.device()?.clone();
        if !arch.cubin_runs_on(device.arch) {
            return Err(GpuEvaluatorError::Arch {
                device: device.arch,
                arch,
            });
        }
        let shelf: Shelf<S> = Arc::new((Mutex::new(HashMap::new()), Condvar::new()));
        let (queue, jobs) = mpsc::channel::<S>();
        let jobs = Arc::new(Mutex::new(jobs));
        let pool = (0..compile_threads.max(1))
            .map(|_| {
                let (jobs, shelf, spec) = (jobs.clone(), shelf.clone(), spec.clone());
                std::thread::spawn(move || {
                    loop {
                        let next = match jobs.lock() {
                            Ok(rx) => rx.recv(),
                            Err(_) => return,
                        };
                        let Ok(schedule) = next else { return };
                        if claim(&shelf, &schedule) {
                            let built = build(nvrtc, &schedule.candidate(&spec), arch);
                            finish(&shelf, schedule, built);
                        }
                    }
                })
            })
            .collect();
        Ok(GpuEvaluator {
            name,
            spec,
            arch,
            nvrtc,
            dispatch,
            plan,
            timing,
            client,
            helpers: Vec::new(),
            device,
            shelf,
            queue: Some(queue),
            pool,
            seed,
            count: 0,
            deadline: Duration::from_secs(120),
            stats: Stats::default(),
            worker,
            support: support.cubin,
            ordinal,
            ncu,
            profile_error: None,
        })
    }

    /// The device and its measured ceilings.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// What was done so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Workers restarted after faults.
    pub fn restarts(&self) -> usize {
        self.clients().map(Client::restarts).sum()
    }

    /// Whether a worker client gave up on its device (too many faults in a row): what failed is then a GPU or
    /// its driver, and other devices may run the same search.
    pub fn device_failing(&self) -> bool {
        self.clients().any(Client::is_failing)
    }

    fn clients(&self) -> impl Iterator<Item = &Client> {
        std::iter::once(&self.client).chain(&self.helpers)
    }

    /// Also times candidates on `ordinals` (GPUs of this one's model): a batch of candidates
    /// ([`Evaluator::evaluate_batch`]) is then timed on all of them at once, one worker per GPU, each GPU
    /// timing one candidate at a time. Compiles stay shared.
    ///
    /// # Errors
    /// A worker that does not start, or a GPU of another model than this evaluator's.
    pub fn spread_over(&mut self, ordinals: &[usize]) -> Result<(), GpuEvaluatorError> {
        for &ordinal in ordinals {
            let mut helper = Client::new(self.worker.clone(), self.support.clone(), ordinal);
            let device = helper.device()?;
            if device.name != self.device.name || device.arch != self.device.arch {
                return Err(GpuEvaluatorError::Mixed {
                    first: format!("GPU {} ({})", self.ordinal, self.device.name),
                    other: format!("GPU {ordinal} ({})", device.name),
                });
            }
            self.helpers.push(helper);
        }
        Ok(())
    }

    fn enqueue(&self, schedule: S) {
        let (lock, _) = &*self.shelf;
        let Ok(mut map) = lock.lock() else { return };
        if map.contains_key(&schedule) {
            return;
        }
        map.insert(schedule, Slot::Queued);
        if let Some(q) = &self.queue
            && q.send(schedule).is_err()
        {
            map.remove(&schedule);
        }
    }

    fn built(&mut self, schedule: &S) -> Built {
        self.enqueue(*schedule);
        let started = Instant::now();
        // Needed now but still queued behind speculative compiles: compile it here rather than wait its turn.
        if claim(&self.shelf, schedule) {
            let built = build(self.nvrtc, &schedule.candidate(&self.spec), self.arch);
            finish(&self.shelf, *schedule, built);
        }
        let (lock, ready) = &*self.shelf;
        let mut map = lock
            .lock()
            .map_err(|_| "the compile pool panicked".to_string())?;
        loop {
            match map.get(schedule) {
                Some(Slot::Done(b)) => {
                    let b = b.clone();
                    self.stats.compile_wait_s += started.elapsed().as_secs_f64();
                    return b;
                }
                Some(Slot::Queued | Slot::Compiling) => {
                    map = ready
                        .wait(map)
                        .map_err(|_| "the compile pool panicked".to_string())?;
                }
                None => return Err("the compile pool is gone".into()),
            }
        }
    }

    /// The measurement of a verified candidate.
    fn measurement(&self, compiled: &Compiled, times: &super::protocol::Timed) -> Measurement {
        let ms = times.median_ms();
        let secs = ms * 1e-3;
        let (flops, bytes) = S::work(&self.spec, self.dispatch);
        let tflops = flops / secs / 1e12;
        let tbps = bytes / secs / 1e12;
        let Ceilings {
            copy_tbps,
            fp32_tflops,
        } = self.device.ceilings;
        let r = compiled.resources;
        // ptxas' report when the log had one; else the loaded function's attributes (the compiler log was empty
        // for pool-compiled candidates on the H200; local bytes then stand in for spills).
        let (registers, spill_bytes, smem_bytes) = if r.registers > 0 {
            (r.registers, r.spill_stores + r.spill_loads, r.shared_bytes)
        } else {
            let f = times.function;
            (f.registers, f.local_bytes, f.shared_bytes)
        };
        Measurement {
            time_ms: ms,
            spread_pct: times.spread_pct(),
            sm_sol: (fp32_tflops > 0.0).then(|| 100.0 * tflops / S::peak_tflops(fp32_tflops)),
            dram_sol: (copy_tbps > 0.0).then(|| 100.0 * tbps / copy_tbps),
            // Derived signals know only the minimum traffic, the same for every candidate; the judge's DRAM
            // rule needs measured bytes, so it stays silent here rather than compare equal numbers.
            dram_bytes: None,
            tflops: Some(tflops),
            tbps: Some(tbps),
            registers,
            spill_bytes,
            smem_bytes,
            blocks_per_sm: Some(times.blocks_per_sm),
            signals: Signals::Derived,
        }
    }
}

/// The file name NVRTC compiles every candidate under. It is part of the machine code (internal symbols are
/// mangled with it), so [`crate::migrate`] compiles under it too when it compares a tuned kernel byte for byte.
pub const CANDIDATE_FILE: &str = "optiml_candidate.cu";

/// Compiles a candidate, once per process for a given source and architecture: different kernels and shape
/// buckets often share a source (the template's defines do not depend on the shape), and a compile costs far more
/// than a lookup.
fn build(nvrtc: &'static Nvrtc, candidate: &Candidate, arch: Arch) -> Built {
    static MEMO: std::sync::OnceLock<Mutex<HashMap<(String, Arch), Built>>> =
        std::sync::OnceLock::new();
    let key = (optiml_spec::sha256_hex(candidate.source.as_bytes()), arch);
    let memo = MEMO.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(b) = memo.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return b.map(|shared| Arc::new((candidate.clone(), shared.1.clone())));
    }
    let image_arch = candidate.launch.image_arch(arch);
    let built = nvrtc::compile(nvrtc, CANDIDATE_FILE, &candidate.source, image_arch)
        .map(|c| Arc::new((candidate.clone(), c)))
        .map_err(|e| format!("compile: {} {}", e.status, first_error(&e.log)));
    if let Ok(mut m) = memo.lock() {
        m.insert(key, built.clone());
    }
    built
}

/// The first error line of a compiler log (the whole log is in the worker's stderr when it matters).
fn first_error(log: &str) -> String {
    log.lines()
        .find(|l| l.contains("error"))
        .unwrap_or("")
        .trim()
        .chars()
        .take(300)
        .collect()
}

impl<S: Evaluable> GpuEvaluator<S> {
    /// Compiles (on this thread) and evaluates any candidate of the kernel's ABI: an expert's, an LLM's, or a
    /// test's deliberately broken one. Returns the compiled form with the outcome, so a winner can be stored
    /// without compiling it again.
    pub fn evaluate_candidate(&mut self, candidate: &Candidate) -> (Outcome, Option<Compiled>) {
        self.stats.evaluated += 1;
        match build(self.nvrtc, candidate, self.arch) {
            Ok(built) => {
                let outcome = self.run(&built);
                (outcome, Some(built.1.clone()))
            }
            Err(e) => {
                self.stats.compile_failures += 1;
                (Outcome::Rejected(e), None)
            }
        }
    }

    /// The compiled form of a schedule evaluated (or prepared) earlier.
    pub fn compiled(&self, schedule: &S) -> Option<(Candidate, Compiled)> {
        let (lock, _) = &*self.shelf;
        match lock.lock().ok()?.get(schedule)? {
            Slot::Done(Ok(b)) => Some((b.0.clone(), b.1.clone())),
            _ => None,
        }
    }

    fn job(&mut self, candidate: &Candidate, compiled: &Compiled) -> Job {
        self.count += 1;
        Job {
            name: format!("{} [{}]", self.name, candidate.schedule),
            cubin: compiled.cubin.clone(),
            entry: candidate.entry.to_string(),
            launch: candidate.launch,
            problem: S::problem(&self.spec, self.dispatch),
            plan: self.plan.clone(),
            timing: self.timing,
            seed: splitmix(self.seed ^ self.count.wrapping_mul(0x9e37_79b9)),
        }
    }

    /// Nsight Compute counters of a schedule compiled earlier, on fresh inputs of the dispatch shape.
    ///
    /// # Errors
    /// Why there are none: no `ncu`, counters not permitted, the schedule was never compiled.
    pub fn counters(&mut self, schedule: &S) -> Result<super::profile::Counters, String> {
        let (candidate, compiled) = self
            .compiled(schedule)
            .ok_or("the schedule was never compiled")?;
        self.profile_job(&candidate, &compiled)
    }

    fn profile_job(
        &mut self,
        candidate: &Candidate,
        compiled: &Compiled,
    ) -> Result<super::profile::Counters, String> {
        let ncu = self
            .ncu
            .clone()
            .or_else(super::profile::find_ncu)
            .ok_or("no ncu (set OPTIML_NCU or put it on PATH)")?;
        let job = self.job(candidate, compiled);
        let started = Instant::now();
        let scratch = profile_scratch()?;
        let counters = super::profile::profile(
            &ncu,
            &self.worker,
            &self.support,
            self.ordinal,
            &job,
            scratch.path(),
        );
        self.stats.profile_s += started.elapsed().as_secs_f64();
        if counters.is_ok() {
            self.stats.profiled += 1;
        }
        counters
    }

    /// Runs the whole gate of a schedule compiled earlier once more, in a fresh worker under `sanitizer`'s
    /// memcheck, on fresh inputs ([`super::sanitize`]).
    ///
    /// # Errors
    /// What memcheck found, or why the run could not be made (the schedule was never compiled, among others).
    pub fn sanitize(
        &mut self,
        sanitizer: &std::path::Path,
        schedule: &S,
    ) -> Result<(), super::SanitizeError> {
        let (candidate, compiled) = self.compiled(schedule).ok_or_else(|| {
            super::SanitizeError::Failed("the schedule was never compiled".into())
        })?;
        self.sanitize_built(sanitizer, &candidate, &compiled)
    }

    /// [`GpuEvaluator::sanitize`] for a candidate given as it is (compiled here).
    ///
    /// # Errors
    /// As [`GpuEvaluator::sanitize`]; a candidate that does not compile did not run.
    pub fn sanitize_candidate(
        &mut self,
        sanitizer: &std::path::Path,
        candidate: &Candidate,
    ) -> Result<(), super::SanitizeError> {
        let built =
            build(self.nvrtc, candidate, self.arch).map_err(super::SanitizeError::Failed)?;
        self.sanitize_built(sanitizer, &built.0, &built.1)
    }

    fn sanitize_built(
        &mut self,
        sanitizer: &std::path::Path,
        candidate: &Candidate,
        compiled: &Compiled,
    ) -> Result<(), super::SanitizeError> {
        let failed = super::SanitizeError::Failed;
        let job = self.job(candidate, compiled);
        let scratch = tempfile::Builder::new()
            .prefix("optiml-sanitize-")
            .tempdir()
            .map_err(|e| failed(format!("no scratch folder for the sanitizer ({e})")))?;
        super::sanitize::sanitize(
            sanitizer,
            &self.worker,
            &self.support,
            self.ordinal,
            &job,
            scratch.path(),
        )
    }

    /// Why profiling stopped, if it failed (the search then ran on derived signals).
    pub fn profile_error(&self) -> Option<&str> {
        self.profile_error.as_deref()
    }

    fn run(&mut self, built: &(Candidate, Compiled)) -> Outcome {
        let (candidate, compiled) = built;
        let job = self.job(candidate, compiled);
        let started = Instant::now();
        let answer = self.client.evaluate(&job, self.deadline);
        self.settle(built, answer, started.elapsed())
    }

    /// The outcome of a candidate's job from its worker's answer, which took `took`.
    fn settle(
        &mut self,
        (candidate, compiled): &(Candidate, Compiled),
        answer: Result<JobResult, super::client::ClientError>,
        took: Duration,
    ) -> Outcome {
        self.stats.worker_s += took.as_secs_f64();
        match answer {
            Ok(JobResult::Measured(t)) => {
                // Later jobs get a deadline from what a healthy one takes: a hang is caught in seconds, not
                // minutes, yet a slow but correct candidate (10× the first) still finishes.
                if self.count == 1 || self.deadline > took * 20 {
                    self.deadline = (took * 10).max(Duration::from_secs(10));
                }
                let mut m = self.measurement(compiled, &t);
                if self.ncu.is_some() && self.profile_error.is_none() {
                    match self.profile_job(candidate, compiled) {
                        Ok(c) => {
                            m.sm_sol = Some(c.sm_sol);
                            m.dram_sol = Some(c.dram_sol);
                            m.dram_bytes = Some(c.dram_bytes);
                            m.signals = Signals::Ncu;
                        }
                        // One failure (no permission, no ncu) will repeat: stop asking, say why once.
                        Err(e) => self.profile_error = Some(e),
                    }
                }
                Outcome::Measured(m)
            }
            Ok(JobResult::Rejected { check, reason }) => {
                self.stats.gate_failures += 1;
                Outcome::Rejected(format!("gate: {check}: {reason}"))
            }
            Ok(JobResult::Fault { during, error }) => {
                self.stats.faults += 1;
                Outcome::Rejected(format!("fault: {during}: {error}"))
            }
            Err(e) => {
                self.stats.faults += 1;
                Outcome::Rejected(format!("worker: {e}"))
            }
        }
    }
}

impl<S: Evaluable> Evaluator<S> for GpuEvaluator<S> {
    fn evaluate(&mut self, schedule: &S) -> Outcome {
        self.stats.evaluated += 1;
        match self.built(schedule) {
            Ok(built) => self.run(&built),
            Err(e) => {
                self.stats.compile_failures += 1;
                Outcome::Rejected(e)
            }
        }
    }

    fn prepare(&mut self, upcoming: &[S]) {
        for s in upcoming {
            self.enqueue(*s);
        }
    }

    fn width(&self) -> usize {
        1 + self.helpers.len()
    }

    /// Compiles the batch (in parallel, on the shared pool), then times it on every worker at once: worker
    /// `i` takes candidates `i`, `i + width`, … in turn. The jobs are numbered and seeded in batch order, as
    /// one-at-a-time evaluation would seed them.
    fn evaluate_batch(&mut self, schedules: &[S]) -> Vec<Outcome> {
        if self.helpers.is_empty() || schedules.len() < 2 {
            return schedules.iter().map(|s| self.evaluate(s)).collect();
        }
        self.prepare(schedules);
        let built: Vec<Built> = schedules.iter().map(|s| self.built(s)).collect();
        self.stats.evaluated += schedules.len();
        let jobs: Vec<Option<Job>> = built
            .iter()
            .map(|b| b.as_ref().ok().map(|b| self.job(&b.0, &b.1)))
            .collect();
        let (width, deadline) = (self.width(), self.deadline);
        type Answer = (Result<JobResult, super::client::ClientError>, Duration);
        let mut answers: Vec<Option<Answer>> = (0..jobs.len()).map(|_| None).collect();
        std::thread::scope(|scope| {
            let workers: Vec<_> = std::iter::once(&mut self.client)
                .chain(self.helpers.iter_mut())
                .enumerate()
                .map(|(w, client)| {
                    let mine: Vec<(usize, &Job)> = jobs
                        .iter()
                        .enumerate()
                        .skip(w)
                        .step_by(width)
                        .filter_map(|(i, j)| Some((i, j.as_ref()?)))
                        .collect();
                    scope.spawn(move || {
                        mine.into_iter()
                            .map(|(i, job)| {
                                let started = Instant::now();
                                let answer = client.evaluate(job, deadline);
                                (i, answer, started.elapsed())
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for worker in workers {
                // A worker thread only talks to its process; were it to panic, its candidates stay unanswered
                // and are rejected below.
                for (i, answer, took) in worker.join().unwrap_or_default() {
                    answers[i] = Some((answer, took));
                }
            }
        });
        built
            .into_iter()
            .zip(answers)
            .map(|(b, answer)| match (b, answer) {
                (Ok(b), Some((answer, took))) => self.settle(&b, answer, took),
                (Ok(_), None) => {
                    self.stats.faults += 1;
                    Outcome::Rejected("worker: its thread ended without an answer".into())
                }
                (Err(e), _) => {
                    self.stats.compile_failures += 1;
                    Outcome::Rejected(e)
                }
            })
            .collect()
    }
}

impl<S: Evaluable> Drop for GpuEvaluator<S> {
    fn drop(&mut self) {
        // Closing the queue ends the pool once the compiles in flight finish.
        self.queue = None;
        for t in self.pool.drain(..) {
            let _ = t.join();
        }
    }
}

/// A private folder for one profile's job file, removed when dropped: a fixed shared path
/// (`/tmp/optiml-profile`) let another user's files, or a symlink, stand where the job is written.
fn profile_scratch() -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix("optiml-profile-")
        .tempdir()
        .map_err(|e| format!("no scratch folder for the profiler ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_profile_writes_into_a_private_folder_removed_after() {
        let (a, b) = (profile_scratch().unwrap(), profile_scratch().unwrap());
        assert_ne!(a.path(), b.path());
        assert_ne!(a.path(), std::env::temp_dir().join("optiml-profile"));
        let kept = a.path().to_path_buf();
        assert!(kept.is_dir());
        drop(a);
        assert!(!kept.exists());
    }
}
