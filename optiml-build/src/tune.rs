//! Tuning on a GPU, for any family: search one kernel at one target from its default schedule with the real
//! evaluator ([`search()`]), then store the winners (with their measurements and search logs) as one cache entry,
//! replacing the default ([`store`]). A family picks the kernel, the gate and the targets
//! (`crate::families::Family::tune`); `cargo optiml tune` and the build's search on a cache miss drive it.

use crate::cache::{Cache, CacheError, Entry, KeyInputs, NewVariant, Tuning};
use crate::config::KernelSettings;
use crate::eval::{
    EvalSetup, Evaluable, GpuEvaluator, GpuEvaluatorError, TestPlan, TimingPlan, WorkerCommand,
};
use crate::experts::{Candidate, Root};
use crate::nvrtc::{Compiled, Nvrtc};
use crate::scan::FoundKernel;
use crate::search::{
    self, Config, DeterministicJudge, DistinctProposer, Evaluator, Header, Measurement, Method,
    Outcome, RoutedProposer, Search, SearchLog, Signals,
};
use optiml_runtime::Arch;
use std::time::Instant;

/// How to tune.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// Tree search, or a baseline.
    pub method: Method,
    /// Search settings (budget, time limit, the seed's constants).
    pub search: Config,
    /// Seeds random choices and fresh inputs.
    pub seed: u64,
    /// Timing settings.
    pub timing: TimingPlan,
    /// CUDA device ordinal.
    pub device: usize,
    /// Further GPUs (of `device`'s model) that time candidates of the same search: the tree search then
    /// evaluates a batch of `1 + also_on.len()` candidates at a time, one per GPU.
    pub also_on: Vec<usize>,
    /// NVRTC threads.
    pub compile_threads: usize,
    /// How to start the evaluation worker.
    pub worker: WorkerCommand,
    /// Where Nsight Compute counters are taken.
    pub profiling: Profiling,
    /// Run the winner's gate once more under `compute-sanitizer`'s memcheck, where it is installed, before it
    /// is stored: a winner with memcheck errors fails the search.
    pub sanitize: bool,
}

/// Where Nsight Compute counters replace the derived SOL figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Profiling {
    /// Nowhere: derived signals only (the fastest search).
    Off,
    /// After the search, for the default and each node on the path to the winner: the search stays fast and the
    /// log (and `cargo optiml analyze`'s figure) shows measured SOL along the path. Skipped without `ncu`.
    #[default]
    Path,
    /// Every verified candidate, so the counters steer the search (seconds per candidate).
    Every,
}

/// Why tuning stopped.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// The family's schedules and transformations exist, but the worker cannot verify and time it yet.
    #[error(
        "`{kernel}`: the evaluation worker does not run {family} kernels yet (its transformations are in \
         `cargo optiml transforms`); its default is used"
    )]
    Unsupported {
        /// The kernel.
        kernel: String,
        /// Its family.
        family: &'static str,
    },
    /// The kernel's search space is another architecture's.
    #[error("`{kernel}` is not tuned on {arch}: {why}; its default is used")]
    Arch {
        /// The kernel.
        kernel: String,
        /// The GPU's architecture.
        arch: Arch,
        /// Why.
        why: &'static str,
    },
    /// No evaluator.
    #[error("`{kernel}` on {arch}: {source}")]
    Evaluator {
        /// The kernel.
        kernel: String,
        /// The architecture.
        arch: Arch,
        /// Why.
        #[source]
        source: GpuEvaluatorError,
    },
    /// The default schedule itself failed (the template is wrong for this spec: a bug to report).
    #[error("`{kernel}` on {arch} at {shape}: {reason}")]
    Search {
        /// The kernel.
        kernel: String,
        /// The architecture.
        arch: Arch,
        /// The problem size.
        shape: String,
        /// Why.
        reason: String,
    },
    /// The winner passed the gate, but memcheck found errors in it: nothing is stored (a bug in the family's
    /// template to report, with the schedule).
    #[error("`{kernel}` on {arch} at {shape}: the winner ({schedule}) {source}")]
    Sanitizer {
        /// The kernel.
        kernel: String,
        /// The architecture.
        arch: Arch,
        /// The problem size.
        shape: String,
        /// The winner's schedule.
        schedule: String,
        /// What memcheck found.
        #[source]
        source: crate::eval::SanitizeError,
    },
    /// The device gave up under the search (its worker faulted or hung on every candidate, many in a row):
    /// another device may run the same search.
    #[error("`{kernel}` on {arch} at {shape}: the device failed: {reason}")]
    Device {
        /// The kernel.
        kernel: String,
        /// The architecture.
        arch: Arch,
        /// The problem size.
        shape: String,
        /// The search's own error.
        reason: String,
    },
    /// The search log did not serialize.
    #[error("the search log of `{kernel}`: {source}")]
    Log {
        /// The kernel.
        kernel: String,
        /// Why.
        #[source]
        source: search::LogError,
    },
}

impl TuneError {
    /// Whether the device failed rather than the search: its worker or evaluator could not start, or gave up
    /// under the search. Another device may then run the same search (`cargo optiml tune --devices`).
    pub fn is_device_failure(&self) -> bool {
        matches!(self, TuneError::Evaluator { .. } | TuneError::Device { .. })
    }
}

/// The winner for one shape bucket.
#[derive(Clone, Debug)]
pub struct Bucket {
    /// The problem it was tuned at, for people: `256x1024x1024x1024`, `n=67108864`.
    pub label: String,
    /// The key the runtime picks variants by (`[batch, m, n, k]` for matmul); `None`: every size.
    pub shape: Option<[u64; 4]>,
    /// The winner's measurement.
    pub best: Measurement,
    /// The winner's schedule, described.
    pub best_schedule: String,
    /// Candidates evaluated.
    pub evaluations: usize,
    /// Transformations from the default to the winner.
    pub path: Vec<String>,
    /// Seconds the search took, profiling included.
    pub wall_s: f64,
    /// The winner, compiled.
    pub winner: (Candidate, Compiled),
    /// The default schedule's measurement in the same run.
    pub default: Measurement,
    /// What the stored entry says about it.
    pub tuning: Tuning,
    /// The search log as JSON lines.
    pub jsonl: Vec<u8>,
    /// Evaluator totals.
    pub stats: crate::eval::Stats,
    /// Workers restarted after faults.
    pub restarts: usize,
    /// What `compute-sanitizer` said of the winner ("memcheck: no errors"), or why it did not run.
    pub sanitized: String,
    /// A line for each root evaluated beside the search ([`search_with_roots`]): verified and how fast, or why
    /// the gate rejected it.
    pub roots: Vec<String>,
}

/// What evaluating one root gave.
struct RootStep {
    elapsed_s: f64,
    outcome: Outcome,
    compiled: Option<Compiled>,
}

/// The fastest measured root faster than `below` ms: its index and time.
fn fastest(steps: &[RootStep], below: f64) -> Option<(usize, f64)> {
    steps
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, r.outcome.measured()?.time_ms)))
        .filter(|&(_, t)| t < below)
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// Progress of one search, for a progress bar.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Evaluations so far.
    pub evaluations: usize,
    /// The budget.
    pub budget: usize,
    /// The best time so far, ms.
    pub best_ms: Option<f64>,
    /// The default's time, ms.
    pub default_ms: Option<f64>,
}

/// Reports progress after every evaluation.
struct Watched<'a, S: Evaluable> {
    inner: &'a mut GpuEvaluator<S>,
    progress: Progress,
    report: &'a mut dyn FnMut(Progress),
}

impl<S: Evaluable> Evaluator<S> for Watched<'_, S> {
    fn evaluate(&mut self, schedule: &S) -> Outcome {
        let outcome = self.inner.evaluate(schedule);
        self.note(&outcome);
        outcome
    }

    fn prepare(&mut self, upcoming: &[S]) {
        self.inner.prepare(upcoming);
    }

    fn width(&self) -> usize {
        self.inner.width()
    }

    fn evaluate_batch(&mut self, schedules: &[S]) -> Vec<Outcome> {
        let outcomes = self.inner.evaluate_batch(schedules);
        for outcome in &outcomes {
            self.note(outcome);
        }
        outcomes
    }
}

impl<S: Evaluable> Watched<'_, S> {
    /// Counts an evaluation and reports the progress.
    fn note(&mut self, outcome: &Outcome) {
        self.progress.evaluations += 1;
        if let Outcome::Measured(m) = outcome {
            self.progress.default_ms.get_or_insert(m.time_ms);
            if self.progress.best_ms.is_none_or(|b| m.time_ms < b) {
                self.progress.best_ms = Some(m.time_ms);
            }
        }
        (self.report)(self.progress);
    }
}

/// The current time as RFC 3339 UTC, without a date crate: days from the civil calendar algorithm.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// One search's problem, as its family states it: a matmul shape bucket, or a tensor program's extents (with the
/// bucket its winner serves).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The problem size in the family's terms (`[batch, m, n, k]` for a matmul, a program's extents).
    pub dims: Vec<usize>,
    /// The key the runtime picks the winner by; `None`: the winner serves every size.
    pub bucket: Option<[u64; 4]>,
    /// For people: `256x1024x1024x1024`, `n=67108864`.
    pub label: String,
    /// Which achieved rate says how good a kernel is at it.
    pub rate: Rate,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

/// The rate a target is judged by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    /// Arithmetic, TFLOP/s.
    Flops,
    /// Memory traffic, TB/s.
    Bytes,
}

impl Rate {
    /// `812.3 TFLOP/s` or `3.91 TB/s` for `m`.
    pub fn show(self, m: &Measurement) -> String {
        match self {
            Rate::Flops => format!("{:.1} TFLOP/s", m.tflops.unwrap_or(0.0)),
            Rate::Bytes => format!("{:.2} TB/s", m.tbps.unwrap_or(0.0)),
        }
    }
}

/// One search to run: a kernel on an architecture at a target, with its user's settings.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    /// NVRTC, which compiles every candidate.
    pub nvrtc: &'static Nvrtc,
    /// The kernel as declared.
    pub kernel: &'a FoundKernel,
    /// The architecture its variants are compiled for.
    pub arch: Arch,
    /// The problem searched at.
    pub target: &'a Target,
    /// What its user said about it.
    pub settings: &'a KernelSettings,
    /// How to search.
    pub options: &'a TuneOptions,
    /// Kernels that join the search as roots beside the family's own (LLM experts' kernels); a family adds the
    /// kernel's seed.
    pub roots: &'a [Root],
    /// Rewrites the fastest verified root once more (an LLM expert), where there is one.
    pub rewriter: Option<&'a dyn crate::experts::Rewriter>,
}

/// The search itself, for any searchable kernel `S`: evaluator, method, ncu on the path, log, and the bucket to
/// store. `spec` and `shape` are the kernel's own forms of the request's spec and target, and `plan` its gate.
///
/// # Errors
/// [`TuneError`] when the evaluator cannot start or the default schedule is rejected.
pub fn search<S: Evaluable>(
    request: &Request<'_>,
    spec: S::Spec,
    shape: S::Shape,
    plan: TestPlan,
    report: &mut dyn FnMut(Progress),
) -> Result<Bucket, TuneError> {
    search_with_roots::<S>(request, (spec, shape, plan), &[], report)
}

/// [`search()`] with `roots` beside the schedules: after the search, each root is evaluated by the same
/// evaluator (the same gate, inputs and timing), logged as a step from the default schedule, and wins the bucket
/// where it is faster than the search's best. A root the gate rejects is logged and reported, never kept.
///
/// # Errors
/// As [`search()`]; and a winning root that `compute-sanitizer` finds errors in.
pub fn search_with_roots<S: Evaluable>(
    request: &Request<'_>,
    (spec, shape, plan): (S::Spec, S::Shape, TestPlan),
    roots: &[Root],
    report: &mut dyn FnMut(Progress),
) -> Result<Bucket, TuneError> {
    let Request {
        nvrtc,
        kernel,
        arch,
        target,
        options,
        ..
    } = *request;
    let (root, catalog, space) = (S::start(&spec, shape, arch), S::catalog(), S::space());
    let key = target.bucket;
    // The family's words for the target (`r=4096 c=393216`), which the log keeps and reports repeat.
    let label = target.label.clone();
    let failed = |reason: String| TuneError::Search {
        kernel: kernel.name.clone(),
        arch,
        shape: label.clone(),
        reason,
    };
    let started_at = now_rfc3339();
    let started = Instant::now();
    // The search's test of "the same kernel" reads the spec the evaluator takes.
    let launched_spec = spec.clone();
    let mut evaluator = GpuEvaluator::<S>::new(
        nvrtc,
        EvalSetup {
            name: kernel.name.clone(),
            spec,
            arch,
            dispatch: shape,
            plan,
            timing: options.timing,
            worker: options.worker.clone(),
            device: options.device,
            compile_threads: options.compile_threads,
            seed: options.seed,
            ncu: match options.profiling {
                Profiling::Every => crate::eval::find_ncu(),
                _ => None,
            },
        },
    )
    .and_then(|mut e| e.spread_over(&options.also_on).map(|()| e))
    .map_err(|source| TuneError::Evaluator {
        kernel: kernel.name.clone(),
        arch,
        source,
    })?;
    let device = evaluator.device().name.clone();
    let judge = DeterministicJudge;
    let mut watched = Watched {
        inner: &mut evaluator,
        progress: Progress {
            evaluations: 0,
            budget: options.search.budget,
            best_ms: None,
            default_ms: None,
        },
        report,
    };
    let mut log = match options.method {
        Method::Mcts => {
            let proposer =
                DistinctProposer::new(RoutedProposer::new(catalog), move |a: &S, b: &S| {
                    a.as_launched(&launched_spec, shape) == b.as_launched(&launched_spec, shape)
                });
            Search::new(options.search.clone(), &proposer, &judge).run(root, &mut watched)
        }
        Method::Random => search::random_search(
            &options.search,
            &judge,
            &catalog,
            root,
            &mut watched,
            options.seed,
        ),
        Method::Exhaustive => {
            let space: Vec<S> = space.into_iter().filter(|s| *s != root).collect();
            search::exhaustive(&options.search, &judge, root, &space, &mut watched)
        }
    }
    .map_err(|reason| {
        if evaluator.device_failing() {
            TuneError::Device {
                kernel: kernel.name.clone(),
                arch,
                shape: label.clone(),
                reason,
            }
        } else {
            failed(reason)
        }
    })?;
    let mut signals =
        if options.profiling == Profiling::Every && evaluator.profile_error().is_none() {
            Signals::Ncu
        } else {
            Signals::Derived
        };
    let mut signals_note = evaluator.profile_error().map(str::to_string);
    if options.profiling == Profiling::Path {
        match profile_path(&mut evaluator, &mut log) {
            Ok(()) => signals = Signals::Ncu,
            Err(e) => signals_note = Some(e),
        }
    }
    let mut roots = roots.to_vec();
    let mut root_steps = Vec::new();
    for root in &roots {
        let (outcome, compiled) = evaluator.evaluate_candidate(&root.candidate);
        root_steps.push(RootStep {
            elapsed_s: started.elapsed().as_secs_f64(),
            outcome,
            compiled,
        });
    }
    // One rewrite of the fastest verified root, gated and timed like the others.
    if let (Some(rewriter), Some((i, time_ms))) =
        (request.rewriter, fastest(&root_steps, f64::INFINITY))
    {
        let best_ms = time_ms.min(log.best_measurement.time_ms);
        if let Some(rewritten) = rewriter.rewrite(&roots[i], time_ms, best_ms, &label) {
            let (outcome, compiled) = evaluator.evaluate_candidate(&rewritten.candidate);
            root_steps.push(RootStep {
                elapsed_s: started.elapsed().as_secs_f64(),
                outcome,
                compiled,
            });
            roots.push(rewritten);
        }
    }
    // The fastest measured root, where it beats the search's best.
    let root_winner = fastest(&root_steps, log.best_measurement.time_ms).map(|(i, _)| i);
    let best_describe = match root_winner {
        Some(i) => roots[i].name.clone(),
        None => log.best.describe(),
    };
    let sanitized = if !options.sanitize {
        "not run (turned off)".to_string()
    } else if let Some(sanitizer) = crate::eval::find_sanitizer() {
        let checked = match root_winner {
            Some(i) => evaluator.sanitize_candidate(&sanitizer, &roots[i].candidate),
            None => evaluator.sanitize(&sanitizer, &log.best),
        };
        match checked {
            Ok(()) => "memcheck: no errors".to_string(),
            Err(source @ crate::eval::SanitizeError::Found { .. }) => {
                return Err(TuneError::Sanitizer {
                    kernel: kernel.name.clone(),
                    arch,
                    shape: label.clone(),
                    schedule: best_describe.clone(),
                    source,
                });
            }
            Err(e @ crate::eval::SanitizeError::Failed(_)) => format!("not checked: {e}"),
        }
    } else {
        "not run (no compute-sanitizer; set OPTIML_SANITIZER)".to_string()
    };
    let wall_s = started.elapsed().as_secs_f64();
    let default = log.steps[0]
        .outcome
        .measured()
        .copied()
        .unwrap_or(log.best_measurement);
    let winner = match root_winner {
        Some(i) => root_steps[i]
            .compiled
            .clone()
            .map(|c| (roots[i].candidate.clone(), c)),
        None => evaluator.compiled(&log.best),
    }
    .ok_or_else(|| failed("the winner's compiled form is gone".into()))?;
    let header = Header {
        kernel: kernel.name.clone(),
        spec: kernel.spec.canonical(),
        arch: arch.to_string(),
        device: device.clone(),
        shape: label.clone(),
        method: options.method,
        seed: Some(options.seed),
        config: {
            let mut c = search::config_value(&options.search);
            if let Some(map) = c.as_object_mut() {
                if let Some(note) = &signals_note {
                    map.insert("signals_note".into(), note.clone().into());
                }
                map.insert("sanitizer".into(), sanitized.clone().into());
            }
            c
        },
        started_at: started_at.clone(),
        signals,
    };
    let log_error = |source| TuneError::Log {
        kernel: kernel.name.clone(),
        source,
    };
    let mut records = search::records(&header, &log, wall_s).map_err(log_error)?;
    let mut roots_seen = Vec::new();
    for (i, (root, step)) in roots.iter().zip(&root_steps).enumerate() {
        records.add_root(root, &step.outcome, step.elapsed_s, root_winner == Some(i));
        roots_seen.push(match &step.outcome {
            Outcome::Measured(m) => format!(
                "{}: verified, {:.4} ms against the search's best {:.4} ms{}",
                root.name,
                m.time_ms,
                log.best_measurement.time_ms,
                if root_winner == Some(i) {
                    " (kept)"
                } else {
                    " (not kept)"
                }
            ),
            Outcome::Rejected(why) => format!("{}: rejected, {why}", root.name),
        });
    }
    let jsonl = records.to_jsonl().map_err(log_error)?.into_bytes();
    let (best, path) = (
        records.summary.best_measurement,
        records.summary.path.clone(),
    );
    let tuning = Tuning {
        method: options.method.to_string(),
        device,
        date: started_at,
        measurement: best,
        default_measurement: default,
        evaluations: records.summary.evaluations,
        path: path.clone(),
        log: String::new(),
    };
    Ok(Bucket {
        label,
        shape: key,
        best,
        best_schedule: best_describe,
        roots: roots_seen,
        evaluations: records.summary.evaluations,
        path,
        wall_s,
        default,
        winner,
        tuning,
        jsonl,
        stats: evaluator.stats(),
        restarts: evaluator.restarts(),
        sanitized,
    })
}

/// Replaces the derived SOL figures of the default and of every node on the path to the winner with Nsight
/// Compute counters (the log then says `"signals": "Ncu"` for those steps).
fn profile_path<S: Evaluable>(
    evaluator: &mut GpuEvaluator<S>,
    log: &mut SearchLog<S>,
) -> Result<(), String> {
    let mut on_path = vec![log.steps[0].schedule];
    let mut at = log
        .steps
        .iter()
        .position(|s| s.schedule == log.best && s.outcome.measured().is_some());
    while let Some(i) = at {
        on_path.push(log.steps[i].schedule);
        at = log.steps[i]
            .parent
            .and_then(|p| log.steps.iter().position(|s| s.node == p));
    }
    on_path.dedup();
    for schedule in on_path {
        let c = evaluator.counters(&schedule)?;
        for step in log.steps.iter_mut().filter(|s| s.schedule == schedule) {
            if let Outcome::Measured(m) = &mut step.outcome {
                m.sm_sol = Some(c.sm_sol);
                m.dram_sol = Some(c.dram_sol);
                m.dram_bytes = Some(c.dram_bytes);
                m.signals = Signals::Ncu;
            }
        }
        if log.best == schedule {
            log.best_measurement.sm_sol = Some(c.sm_sol);
            log.best_measurement.dram_sol = Some(c.dram_sol);
            log.best_measurement.dram_bytes = Some(c.dram_bytes);
            log.best_measurement.signals = Signals::Ncu;
        }
    }
    Ok(())
}

/// A tuned variant read back from a stored entry, so that tuning some of a kernel's shapes keeps the others.
#[derive(Clone, Debug)]
pub struct Kept {
    /// Its source and launch (the entry point is the new winners').
    pub candidate: Candidate,
    /// Its PTX and CUBIN as stored.
    pub compiled: Compiled,
    /// The shape bucket.
    pub shape: [u64; 4],
    /// What its search found.
    pub tuning: Tuning,
    /// Its search log (empty when the entry had none).
    pub log: Vec<u8>,
}

/// The tuned variants of `entry` whose shapes are not in `retuned`, read back from its (verified) files.
///
/// # Errors
/// [`CacheError`] when a file cannot be read.
pub fn kept_variants(
    entry: &Entry,
    retuned: &[[u64; 4]],
    entry_point: &'static str,
) -> Result<Vec<Kept>, CacheError> {
    let mut kept = Vec::new();
    for v in &entry.manifest.variants {
        let (Some(shape), Some(tuning)) = (v.shape, &v.tuning) else {
            continue;
        };
        if retuned.contains(&shape) {
            continue;
        }
        let read = |name: String| entry.bytes(&name).map(<[u8]>::to_vec);
        let text = |name: String| -> Result<String, CacheError> {
            Ok(String::from_utf8_lossy(&read(name)?).into_owned())
        };
        let log = if tuning.log.is_empty() {
            Vec::new()
        } else {
            read(tuning.log.clone())?
        };
        kept.push(Kept {
            candidate: Candidate {
                source: text(format!("{}.cu", v.stem))?,
                entry: entry_point,
                launch: v.launch,
                schedule: v.schedule.clone(),
            },
            compiled: Compiled {
                ptx: text(format!("{}.ptx", v.stem))?,
                cubin: read(format!("{}.cubin", v.stem))?,
                log: v.nvrtc_log.clone(),
                resources: v.resources,
                options: entry.manifest.nvrtc_options.clone(),
            },
            shape,
            tuning: Tuning {
                log: String::new(),
                ..tuning.clone()
            },
            log,
        });
    }
    Ok(kept)
}

/// Stores the winners of `kernel` on `arch` as one entry (a variant per bucket) with the `kept` variants of the
/// entry it replaces, then `defaults`, the family's untuned variants of the buckets no tuned variant holds and,
/// for a matmul, its any-shape default (`crate::engine::free_bucket_defaults`): a row kernel tuned for one row
/// length keeps its defaults for the others, and a matmul call at a shape nobody tuned can time the default. Tuned variants come first, so that a call as near a tuned shape as a default's bucket takes the tuned
/// one.
///
/// # Errors
/// [`CacheError`] when the entry cannot be written.
pub fn store(
    cache: &Cache,
    kernel: &FoundKernel,
    arch: Arch,
    generator: &str,
    buckets: &[Bucket],
    kept: &[Kept],
    defaults: &[crate::engine::Untuned],
) -> Result<Entry, CacheError> {
    let inputs = KeyInputs::of(kernel, arch, generator);
    // In shape order, winners then the free buckets' defaults: the entry is then the same whichever order the
    // shapes were tuned in, and whichever shards tuned them (`cargo optiml merge` writes this order too).
    let mut variants: Vec<NewVariant<'_>> = buckets
        .iter()
        .map(|b| NewVariant {
            candidate: &b.winner.0,
            compiled: &b.winner.1,
            shape: b.shape,
            tuning: Some(&b.tuning),
            log: Some(&b.jsonl),
        })
        .chain(kept.iter().map(|k| NewVariant {
            candidate: &k.candidate,
            compiled: &k.compiled,
            shape: Some(k.shape),
            tuning: Some(&k.tuning),
            log: (!k.log.is_empty()).then_some(k.log.as_slice()),
        }))
        .collect();
    variants.sort_by_key(|v| v.shape);
    let mut free: Vec<NewVariant<'_>> = defaults
        .iter()
        .map(crate::engine::Untuned::variant)
        .collect();
    free.sort_by_key(|v| v.shape);
    variants.extend(free);
    cache.store(&inputs, &variants, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuning_some_shapes_keeps_the_other_buckets_and_the_free_buckets_defaults() {
        let root = std::env::temp_dir().join(format!("optiml-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let src = root.join("lib.rs");
        std::fs::write(
            &src,
            "#[optiml::kernel(\"batched matmul, f32\")]\npub fn bmm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, batch: usize, m: usize, n: usize, k: usize);\n",
        )
        .unwrap();
        let kernel = crate::scan::scan(&[src])
            .unwrap()
            .unique_kernels()
            .remove(0);
        let arch = Arch::new(9, 0);
        let generator = crate::families::kernel_generator(&kernel, arch);
        let cache = Cache::new(root.join(".optiml"));
        let compiled = |tag: u8| Compiled {
            ptx: format!(".version 9.0 // {tag}\n"),
            cubin: vec![tag; 4],
            log: String::new(),
            resources: Default::default(),
            options: vec!["-arch=sm_90".into()],
        };
        let candidate = |tag: u8| Candidate {
            source: format!("// schedule {tag}\n"),
            ..crate::families::default_candidate(&kernel.spec, arch)
        };
        let bucket = |tag: u8, shape: [u64; 4]| Bucket {
            label: format!("{shape:?}"),
            shape: Some(shape),
            best: Measurement::default(),
            best_schedule: format!("schedule {tag}"),
            evaluations: 3,
            path: vec!["grow-block-n".into()],
            wall_s: 1.0,
            winner: (candidate(tag), compiled(tag)),
            default: Measurement::default(),
            tuning: Tuning {
                method: "mcts".into(),
                device: "test".into(),
                date: String::new(),
                measurement: Measurement::default(),
                default_measurement: Measurement::default(),
                evaluations: 3,
                path: vec!["grow-block-n".into()],
                log: String::new(),
            },
            jsonl: format!("{{\"log\":{tag}}}\n").into_bytes(),
            stats: Default::default(),
            restarts: 0,
            sanitized: "memcheck: no errors".into(),
            roots: Vec::new(),
        };
        let (a, b) = ([256, 1024, 1024, 1024], [16, 1024, 1024, 1024]);
        let first = store(
            &cache,
            &kernel,
            arch,
            &generator,
            &[bucket(1, a), bucket(2, b)],
            &[],
            &[],
        )
        .unwrap();
        // Retune `a` only: `b`'s winner, files and log survive; `a`'s old winner does not.
        let kept = kept_variants(&first, &[a], "optiml_matmul").unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].shape, b);
        assert_eq!(kept[0].compiled.cubin, vec![2; 4]);
        // The default of a free bucket goes in, after the tuned variants.
        let c = [1, 64, 64, 64];
        let defaults = [crate::engine::Untuned {
            shape: Some(c),
            candidate: candidate(9),
            compiled: compiled(9),
        }];
        let second = store(
            &cache,
            &kernel,
            arch,
            &generator,
            &[bucket(3, a)],
            &kept,
            &defaults,
        )
        .unwrap();
        let shapes: Vec<_> = second.manifest.variants.iter().map(|v| v.shape).collect();
        // In shape order (`b` is the smaller), whatever order they were tuned in.
        assert_eq!(shapes, [Some(b), Some(a), Some(c)]);
        let free = &second.manifest.variants[2];
        assert!(free.tuning.is_none());
        assert_eq!(
            second.bytes(&format!("{}.cubin", free.stem)).unwrap(),
            [9; 4]
        );
        let lookup = |dir: &Entry, shape| {
            let v = dir
                .manifest
                .variants
                .iter()
                .find(|v| v.shape == Some(shape))
                .unwrap();
            let log = &v.tuning.as_ref().unwrap().log;
            (
                dir.bytes(&format!("{}.cubin", v.stem)).unwrap().to_vec(),
                dir.bytes(log).unwrap().to_vec(),
            )
        };
        assert_eq!(lookup(&second, a), (vec![3; 4], b"{\"log\":3}\n".to_vec()));
        assert_eq!(lookup(&second, b), (vec![2; 4], b"{\"log\":2}\n".to_vec()));
        // The stored entry verifies (checksums, key).
        let inputs = KeyInputs::of(&kernel, arch, &generator);
        assert!(matches!(
            cache.lookup(&inputs),
            crate::cache::Lookup::Hit(_)
        ));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn rfc3339_dates() {
        let now = now_rfc3339();
        assert_eq!(now.len(), 20, "{now}");
        assert!(now.starts_with("20") && now.ends_with('Z'));
        assert_eq!(&now[4..5], "-");
    }
}
