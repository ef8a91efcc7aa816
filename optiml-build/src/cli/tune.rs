//! `cargo optiml tune`: the search outside a build, one job per kernel, architecture and shape, with a progress bar
//! each; spread over the host's GPUs (`--devices`, [`crate::pool`]) and over machines (`--shard`, [`super::shard`]).

use super::shard::{self, Shard};
use super::{optiml_packages, root_and_cache};
use crate::config::{Dims, Settings, parse_dims};
use crate::eval::{TimingPlan, WorkerCommand};
use crate::pool;
use crate::search::Method;
use crate::tune::{self, Profiling, TuneOptions};
use crate::{cache, families, nvrtc, scan, targets};
use clap::{Args, ValueEnum};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use optiml_runtime::{Arch, probe};
use optiml_spec::env;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// `cargo optiml tune`.
#[derive(Debug, Args)]
pub struct Tune {
    /// Architectures to tune, comma separated (default: the GPU's). The GPU must run their CUBINs.
    #[arg(long, value_name = "ARCHS")]
    pub arch: Option<String>,
    /// Where to scan and which cache to refresh.
    #[command(flatten)]
    pub place: super::Place,
    /// Only these kernels (function names, comma separated).
    #[arg(long, value_name = "NAMES")]
    pub kernel: Option<String>,
    /// Shapes to tune for, `BxMxNxK`, comma separated (default: the kernel's `shapes` setting, else
    /// 16x1024x1024x1024).
    #[arg(long, value_name = "SHAPES")]
    pub shape: Option<String>,
    /// Candidates evaluated per kernel and shape (default: `[search] budget`, else 32).
    #[arg(long)]
    pub budget: Option<usize>,
    /// Seconds per kernel and shape (default: `[search] time_limit_s`, else 60).
    #[arg(long, value_name = "SECONDS")]
    pub time: Option<f64>,
    /// How to choose candidates (the baselines are for comparisons).
    #[arg(long, value_enum)]
    pub method: Option<MethodArg>,
    /// Seed of random choices and test inputs.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where Nsight Compute counters are taken (skipped, with a note in the log, without ncu or permission).
    #[arg(long, value_enum, default_value = "path")]
    pub profile: ProfileArg,
    /// Skip running each winner once under compute-sanitizer's memcheck before it is stored (it runs where
    /// `compute-sanitizer` is found: `OPTIML_SANITIZER`, `PATH` or `/usr/local/cuda/bin`).
    #[arg(long)]
    pub no_sanitize: bool,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0, conflicts_with = "devices")]
    pub device: usize,
    /// Tune on several GPUs of this host at once, `all` or ordinals (`0,1,3`; one twice runs two workers on
    /// it, for testing only: they disturb each other's timing): one job (kernel, architecture, shape) at a time
    /// per GPU, a job whose GPU fails goes to another, and a GPU that fails twice in a row is retired. With
    /// fewer jobs than GPUs, each job's search times a batch of candidates at once, one on each of its GPUs.
    #[arg(long, value_name = "all|0,1,…")]
    pub devices: Option<String>,
    /// Also copy every search log into this folder (`<kernel>-<arch>-<shape>.jsonl`).
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Leave the `[llm]` experts' kernels out of the search (with an `[llm]` table, each tensor operator's routed
    /// experts write one, replayed from `target/optiml/llm` where recorded, and what compiles joins the search
    /// as a root, gated and timed like every candidate).
    #[arg(long)]
    pub no_llm: bool,
    /// Repair rounds after each LLM expert's first answer (as `cargo optiml generate --rounds`; a replay asks
    /// the recorded rounds again).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub llm_rounds: usize,
    /// Take a deterministic share of the work, the i-th of n (every kernel, architecture and shape is one job;
    /// the shares partition them), and store it in a folder of its own (`--cache-dir`, else
    /// `target/optiml/shard-<i>-of-<n>`) for `cargo optiml merge`: any scheduler that starts n copies of one
    /// command (a Slurm job array, a Kubernetes indexed Job, a CI matrix) then tunes in parallel.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
}

/// The `[llm]` experts of one tensor operator in a tune: the kernels they write join the search as roots
/// ([`LlmExperts::roots`]), and the nearest one rewrites the fastest verified root once ([`Rewriter`]). Every
/// exchange is recorded under `<root>/target/optiml/llm` and replayed from there; answers compile with NVRTC for
/// the tuned architecture, and what compiles is only a candidate: the search gates it like any other. A line per
/// expert says what it gave.
///
/// [`Rewriter`]: crate::experts::Rewriter
struct LlmExperts<'a> {
    llm: crate::llm::Llm,
    settings: &'a crate::llm::LlmSettings,
    kernel: &'a scan::FoundKernel,
    program: &'a optiml_spec::program::Program,
    contract: crate::llm::generate::Contract,
    arch: Arch,
    /// Repair rounds, and the seed of the router's Gumbel noise.
    rounds: usize,
    seed: u64,
    compile: &'a (dyn Fn(&str) -> Result<nvrtc::Compiled, String> + Sync),
}

impl<'a> LlmExperts<'a> {
    /// The experts of `kernel` under `settings`' `[llm]` table: `None` without one, or for a kernel with no
    /// contract (not a tensor program the generator lowers).
    fn new(
        root: &Path,
        kernel: &'a scan::FoundKernel,
        settings: &'a Settings,
        (arch, rounds, seed): (Arch, usize, u64),
        compile: &'a (dyn Fn(&str) -> Result<nvrtc::Compiled, String> + Sync),
    ) -> Option<Self> {
        let llm_settings = settings.llm.as_ref()?;
        let optiml_spec::Family::Tensor(program) = &kernel.spec.family else {
            return None;
        };
        Some(Self {
            llm: crate::llm::Llm::new(llm_settings, crate::llm::records_under(root)),
            settings: llm_settings,
            kernel,
            program,
            contract: families::tensor::contract::contract(program)?,
            arch,
            rounds,
            seed,
            compile,
        })
    }

    /// What each routed expert writes, as roots (one per distinct source).
    fn roots(&self) -> Vec<crate::experts::Root> {
        let (runs, skipped) = super::generate::generate(
            &self.llm,
            self.settings,
            std::slice::from_ref(self.kernel),
            self.arch,
            (self.rounds, self.seed),
            self.compile,
        );
        for s in skipped {
            eprintln!("{}: no LLM kernel: {s}", self.kernel.name);
        }
        let mut roots: Vec<crate::experts::Root> = Vec::new();
        for run in runs {
            self.say(&run.expert, &run.written);
            let root = run.written.kernel.and_then(|(source, _)| {
                families::tensor::contract::llm_root(self.program, &run.expert, &source)
            });
            if let Some(root) = root
                && !roots
                    .iter()
                    .any(|r| r.candidate.source == root.candidate.source)
            {
                roots.push(root);
            }
        }
        roots
    }

    /// The line saying what `expert` wrote.
    fn say(&self, expert: &str, written: &crate::llm::generate::Written) {
        let last = written
            .attempts
            .last()
            .map_or_else(String::new, |a| a.verdict.to_string());
        eprintln!(
            "{} llm {expert} ({} answer(s)): {last}",
            self.kernel.name,
            written.attempts.len()
        );
    }
}

impl crate::experts::Rewriter for LlmExperts<'_> {
    fn rewrite(
        &self,
        root: &crate::experts::Root,
        time_ms: f64,
        best_ms: f64,
        shape: &str,
    ) -> Option<crate::experts::Root> {
        let router = crate::llm::experts::Router::new(
            crate::llm::experts::with_user(&self.settings.experts),
            Some(&self.llm),
        );
        let text = super::generate::request_text(self.kernel, self.program, self.arch);
        let request = router.embed(&text, Some(&self.llm)).ok()?;
        let expert = router.route(&request, 1, None).first()?.0.clone();
        let timing = crate::llm::generate::Timing {
            time_ms,
            best_ms,
            shape: shape.to_string(),
        };
        let written = crate::llm::generate::rewrite(
            &self.llm,
            &expert,
            &self.contract,
            (&root.candidate.source, &timing),
            self.rounds,
            self.compile,
        );
        let name = format!("llm {} rewrite of {}", expert.name, root.name);
        self.say(&name, &written);
        let (source, _) = written.kernel?;
        let mut rewritten =
            families::tensor::contract::llm_root(self.program, &expert.name, &source)?;
        rewritten.candidate.schedule = name.clone();
        rewritten.name = name;
        Some(rewritten)
    }
}

/// What one kernel is tuned with (the jobs name it by index).
struct KernelPlan<'a> {
    kernel: &'a scan::FoundKernel,
    ks: crate::config::KernelSettings,
    family: &'static dyn families::Family,
    targets: Vec<crate::tune::Target>,
    options: TuneOptions,
    roots: Vec<crate::experts::Root>,
    experts: Option<LlmExperts<'a>>,
}

/// One search: a kernel's plan, an architecture and one of the plan's targets (a shape).
struct Job {
    /// Its place in the run's list.
    index: usize,
    plan: usize,
    arch: Arch,
    target: usize,
}

/// A slot's GPUs as the progress display names them: `0`, or `0+2` for a search spread over two.
fn gpus(group: &[usize]) -> String {
    group
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join("+")
}

/// `--devices`: `all` (every GPU the driver lists) or comma-separated ordinals, each listed by the driver.
fn parse_devices(text: &str, devices: &[probe::Device]) -> anyhow::Result<Vec<usize>> {
    if text.trim() == "all" {
        if devices.is_empty() {
            anyhow::bail!("--devices all: the driver lists no GPU");
        }
        return Ok(devices.iter().map(|d| d.ordinal).collect());
    }
    let mut out = Vec::new();
    for part in text.split(',') {
        let n: usize = part.trim().parse().map_err(|_| {
            anyhow::anyhow!("--devices: `{part}` is not a device ordinal (`all`, or like `0,1`)")
        })?;
        if !devices.iter().any(|d| d.ordinal == n) {
            anyhow::bail!(
                "--devices: there is no device {n} (the driver lists {})",
                devices
                    .iter()
                    .map(|d| d.ordinal.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        out.push(n);
    }
    Ok(out)
}

/// `--method`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MethodArg {
    /// Monte Carlo tree search (the default).
    Mcts,
    /// Random walks over the same transformations.
    Random,
    /// Every schedule of the template.
    Exhaustive,
}

/// `--profile`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProfileArg {
    /// No counters.
    Off,
    /// Counters for the default and the path to the winner.
    Path,
    /// Counters for every verified candidate (they then steer the search; seconds each).
    Every,
}

/// The package folder holding `file`: its nearest ancestor with a `Cargo.toml`.
pub(super) fn package_of(file: &Path) -> PathBuf {
    scan::package_root(file)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

pub(super) fn run(t: &Tune) -> anyhow::Result<bool> {
    let (root, cache) = root_and_cache(&t.place)?;
    // A shard writes a folder of its own, holding only what it tuned: shards never write the same file.
    let cache = match t.shard {
        Some(s) => {
            let dir = t
                .place
                .cache_dir
                .clone()
                .unwrap_or_else(|| s.default_dir(&root));
            // The committed cache, as `--cache-dir` left out would name it.
            let (_, committed) = root_and_cache(&super::Place {
                dir: t.place.dir.clone(),
                cache_dir: None,
            })?;
            if targets::same_folder(&dir, &committed.root) {
                anyhow::bail!(
                    "--shard {s} writes only what it tunes, so it takes a folder of its own, not the cache `{}`: \
                     leave --cache-dir out (it then writes `{}`), and `cargo optiml merge` folds the shards in",
                    dir.display(),
                    s.default_dir(&root).display()
                );
            }
            cache::Cache::new(dir).with_words(families::tuned_for)
        }
        None => cache,
    };
    let devices = probe::devices().map_err(|e| anyhow::anyhow!("{e}"))?;
    let ordinals = match &t.devices {
        Some(text) => parse_devices(text, &devices)?,
        None => vec![t.device],
    };
    let Some(device) = devices.iter().find(|d| d.ordinal == ordinals[0]).cloned() else {
        anyhow::bail!(
            "`cargo optiml tune` measures candidates on a CUDA GPU, and device {} is not there{}; \
             on a machine without one, `cargo optiml prepare` fills the cache with the default kernels",
            ordinals[0],
            if probe::driver_present() {
                ""
            } else {
                " (no NVIDIA driver)"
            }
        );
    };
    // Times of one search compare only on one GPU model, and the cache records one per variant.
    if let Some(other) = devices
        .iter()
        .find(|d| ordinals.contains(&d.ordinal) && d.name != device.name)
    {
        anyhow::bail!(
            "--devices takes GPUs of one model, and {} is {} where {} is {}: tune each model on its own \
             (`--device`, or `--shard` per machine)",
            other.ordinal,
            other.name,
            device.ordinal,
            device.name
        );
    }
    let archs: Vec<Arch> = match t.arch.clone().or_else(|| env::var(env::OPTIML_ARCH)) {
        Some(text) => targets::parse_archs(&text, "--arch")?,
        None => vec![device.arch],
    };
    for a in &archs {
        if !a.cubin_runs_on(device.arch) {
            anyhow::bail!(
                "{a} cannot be tuned on {} ({}): its CUBINs do not run there",
                device.name,
                device.arch
            );
        }
    }
    let only: Option<Vec<String>> = t
        .kernel
        .as_ref()
        .map(|k| k.split(',').map(|s| s.trim().to_string()).collect());
    let cli_shapes: Option<Vec<Dims>> = match &t.shape {
        Some(text) => Some(
            text.split(',')
                .map(|s| {
                    parse_dims(s).ok_or_else(|| {
                        anyhow::anyhow!("--shape: `{s}` is not like 256x1024x1024x1024")
                    })
                })
                .collect::<Result<_, _>>()?,
        ),
        None => None,
    };
    let packages = optiml_packages(&root)?;
    let mut found = scan::scan(&packages)?;
    families::skip_unsupported(&mut found);
    let kernels = found
        .kernels_named(only.as_deref())
        .map_err(|e| anyhow::anyhow!("--kernel: {e}"))?;
    if kernels.is_empty() {
        anyhow::bail!("no kernel to tune in `{}`", root.display());
    }
    let nvrtc = nvrtc::load()?;
    let worker = WorkerCommand::current_exe()?;
    eprintln!(
        "tuning {} kernel(s) for {} on {} (device{} {})",
        kernels.len(),
        archs
            .iter()
            .map(Arch::to_string)
            .collect::<Vec<_>>()
            .join(","),
        device.name,
        if ordinals.len() > 1 { "s" } else { "" },
        ordinals
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    let all_settings: Vec<Settings> = kernels
        .iter()
        .map(|k| Settings::load(&package_of(&k.file)))
        .collect::<Result<_, _>>()?;
    // One job per kernel, architecture and shape; a shard keeps its share of them, named the same on every host.
    let mut drafts = Vec::new();
    let mut jobs: Vec<Job> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (plan, (kernel, settings)) in kernels.iter().zip(&all_settings).enumerate() {
        let ks = settings
            .kernel(&kernel.name)
            .map_err(|e| anyhow::anyhow!(e))?;
        let family = families::of(&kernel.spec);
        let targets = family
            .targets(&kernel.spec, &ks, cli_shapes.as_deref())
            .map_err(|e| anyhow::anyhow!("`{}`: {e}", kernel.name))?;
        for &arch in &archs {
            let key =
                cache::KeyInputs::of(kernel, arch, &families::kernel_generator(kernel, arch)).key();
            for (target, t) in targets.iter().enumerate() {
                jobs.push(Job {
                    index: jobs.len(),
                    plan,
                    arch,
                    target,
                });
                names.push(shard::job_name(&key, &t.to_string()));
            }
        }
        drafts.push((ks, family, targets));
    }
    if let Some(s) = t.shard {
        let mine = s.share(&names);
        shard::Record {
            shard: s.to_string(),
            device: device.name.clone(),
            device_arch: device.arch.to_string(),
            date: tune::now_rfc3339(),
            jobs: mine.iter().cloned().collect(),
        }
        .write(&cache.root)?;
        eprintln!(
            "shard {s}: {} of {} job(s), into `{}`",
            mine.len(),
            jobs.len(),
            cache.root.display()
        );
        let mut taken = names.iter().map(|n| mine.contains(n));
        jobs.retain(|_| taken.next().unwrap_or(false));
        for (index, job) in jobs.iter_mut().enumerate() {
            job.index = index;
        }
    }
    let groups = pool::slots(&ordinals, jobs.len());
    let slots = groups.len();
    // NVRTC runs ahead of every slot's search: the cores are shared between the slots.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let compile_threads = (cores / slots.max(1)).max(1);
    // The LLM experts' kernels are written for the first architecture and compiled again for each.
    let llm_arch = archs.first().copied().unwrap_or(device.arch);
    let compile_for_llm = |source: &str| {
        nvrtc::compile(nvrtc, "llm.cu", source, llm_arch)
            .map_err(|e| format!("{}\n{}", e.status, e.log))
    };
    let mut plans: Vec<KernelPlan<'_>> = Vec::new();
    for (p, ((kernel, settings), (ks, family, targets))) in
        kernels.iter().zip(&all_settings).zip(drafts).enumerate()
    {
        let mut search = settings.search_config();
        if let Some(b) = t.budget {
            search.budget = b;
        }
        if let Some(s) = t.time {
            search.time_limit = Duration::from_secs_f64(s);
        }
        let options = TuneOptions {
            method: match t.method {
                Some(MethodArg::Mcts) => Method::Mcts,
                Some(MethodArg::Random) => Method::Random,
                Some(MethodArg::Exhaustive) => Method::Exhaustive,
                None => settings.search.method.unwrap_or(Method::Mcts),
            },
            search,
            seed: t.seed.or(settings.search.seed).unwrap_or(0x0971_1111),
            timing: TimingPlan::default(),
            device: device.ordinal,
            also_on: Vec::new(),
            compile_threads,
            worker: worker.clone(),
            profiling: match t.profile {
                ProfileArg::Off => Profiling::Off,
                ProfileArg::Path => Profiling::Path,
                ProfileArg::Every => Profiling::Every,
            },
            sanitize: !t.no_sanitize,
        };
        // Only a kernel this run tunes asks its LLM experts.
        let experts = if t.no_llm || !jobs.iter().any(|j| j.plan == p) {
            None
        } else {
            LlmExperts::new(
                &root,
                kernel,
                settings,
                (llm_arch, t.llm_rounds, options.seed),
                &compile_for_llm,
            )
        };
        let roots = experts.as_ref().map_or_else(Vec::new, LlmExperts::roots);
        plans.push(KernelPlan {
            kernel,
            ks,
            family,
            targets,
            options,
            roots,
            experts,
        });
    }
    let multi = MultiProgress::new();
    // A line above the bars; where they are hidden (output not a terminal: a log), a plain line, which
    // `MultiProgress::println` would drop.
    let say = |line: String| {
        if multi.is_hidden() {
            eprintln!("{line}");
        } else {
            let _ = multi.println(line);
        }
    };
    let style =
        ProgressStyle::with_template("{prefix:>40} [{bar:30}] {pos:>3}/{len} {elapsed:>4} {msg}")
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .progress_chars("=> ");
    // A kernel's entry for one architecture, stored as soon as every job of it has a winner.
    let store_entry =
        |plan: &KernelPlan<'_>, arch: Arch, buckets: &[tune::Bucket]| -> anyhow::Result<()> {
            let kernel = plan.kernel;
            let generator = families::kernel_generator(kernel, arch);
            // `--shape` tunes some buckets: the entry keeps the others' winners. Tuning the configured
            // shapes replaces the entry (buckets of shapes no longer configured go). A shard keeps nothing:
            // its entry holds what it tuned, and `merge` keeps the cache's other winners.
            let kept = match (&cli_shapes, buckets.first()) {
                (Some(_), Some(first)) if t.shard.is_none() => {
                    let inputs = cache::KeyInputs::of(kernel, arch, &generator);
                    match cache.lookup(&inputs) {
                        cache::Lookup::Hit(entry) | cache::Lookup::Salvaged { entry, .. } => {
                            let retuned: Vec<[u64; 4]> =
                                buckets.iter().filter_map(|b| b.shape).collect();
                            tune::kept_variants(&entry, &retuned, first.winner.0.entry)?
                        }
                        cache::Lookup::Miss | cache::Lookup::Corrupt { .. } => Vec::new(),
                    }
                }
                _ => Vec::new(),
            };
            let taken: Vec<Option<[u64; 4]>> = buckets
                .iter()
                .map(|b| b.shape)
                .chain(kept.iter().map(|k| Some(k.shape)))
                .collect();
            let defaults = crate::engine::free_bucket_defaults(nvrtc, kernel, arch, &taken)?;
            let entry = tune::store(&cache, kernel, arch, &generator, buckets, &kept, &defaults)?;
            say(format!(
                "stored `{}` for {arch}: {} variant(s){} in `{}`",
                kernel.name,
                buckets.len(),
                if kept.is_empty() {
                    String::new()
                } else {
                    format!(" and {} kept from the earlier entry", kept.len())
                },
                entry.dir.display()
            ));
            // Other crates on this machine find the winner there ([`crate::targets::user_cache_dir`]).
            if let Some(user) = targets::user_cache_dir()
                .filter(|d| t.shard.is_none() && !targets::same_folder(d, &cache.root))
            {
                let user = cache::Cache::new(user).with_words(families::tuned_for);
                match user.adopt(&entry) {
                    Ok(copy) => say(format!(
                        "  and a copy in the per-user cache: `{}`",
                        copy.dir.display()
                    )),
                    Err(e) => say(format!("warning: not copied into the per-user cache: {e}")),
                }
            }
            Ok(())
        };
    let finished: Mutex<Vec<Option<tune::Bucket>>> = Mutex::new(vec![None; jobs.len()]);
    let work = |job: &Job, slot: usize| -> Result<tune::Bucket, pool::Failure> {
        let plan = &plans[job.plan];
        let (kernel, arch, problem) = (plan.kernel, job.arch, &plan.targets[job.target]);
        let group = &groups[slot];
        let ordinal = gpus(group);
        let options = TuneOptions {
            device: group[0],
            also_on: group[1..].to_vec(),
            ..plan.options.clone()
        };
        let shape = problem.to_string();
        let bar = multi.add(ProgressBar::new(options.search.budget as u64));
        bar.set_style(style.clone());
        bar.set_prefix(if ordinals.len() > 1 {
            format!("gpu {ordinal}: {} {arch} {shape}", kernel.name)
        } else {
            format!("{} {arch} {shape}", kernel.name)
        });
        let mut report = |p: tune::Progress| {
            bar.set_position(p.evaluations as u64);
            if let (Some(best), Some(default)) = (p.best_ms, p.default_ms) {
                bar.set_message(format!(
                    "best {best:.4} ms ({:.2}× default)",
                    default / best
                ));
            }
        };
        let request = tune::Request {
            nvrtc,
            kernel,
            arch,
            target: problem,
            settings: &plan.ks,
            options: &options,
            roots: &plan.roots,
            rewriter: plan
                .experts
                .as_ref()
                .map(|e| e as &dyn crate::experts::Rewriter),
        };
        match plan.family.tune(&request, &mut report) {
            Ok(b) => {
                let m = &b.best;
                bar.finish_with_message(format!(
                    "{:.4} ms, {}, {:.2}× the default; {} candidates in {:.1} s ({:.1}/s), {} rejected",
                    m.time_ms,
                    problem.rate.show(m),
                    b.default.time_ms / m.time_ms,
                    b.evaluations,
                    b.wall_s,
                    b.evaluations as f64 / b.wall_s.max(1e-9),
                    b.stats.compile_failures + b.stats.gate_failures + b.stats.faults,
                ));
                say(format!("{} {arch} {shape}: {}", kernel.name, b.sanitized));
                for root in &b.roots {
                    say(format!("{} {arch} {shape}: {root}", kernel.name));
                }
                if bar.is_hidden() {
                    eprintln!(
                        "{} {arch} {shape}: {:.4} ms ({:.2}× the default), path: {}",
                        kernel.name,
                        m.time_ms,
                        b.default.time_ms / m.time_ms,
                        b.path.join(" → ")
                    );
                }
                if let Some(dir) = &t.log_dir {
                    let written = std::fs::create_dir_all(dir).and_then(|()| {
                        std::fs::write(
                            dir.join(format!("{}-{arch}-{shape}.jsonl", kernel.name)),
                            &b.jsonl,
                        )
                    });
                    if let Err(e) = written {
                        say(format!(
                            "warning: the search log was not copied into `{}`: {e}",
                            dir.display()
                        ));
                    }
                }
                // The last job of its kernel and architecture to finish stores their entry.
                let group: Option<Vec<tune::Bucket>> = {
                    let mut done = finished.lock().unwrap_or_else(PoisonError::into_inner);
                    done[job.index] = Some(b.clone());
                    jobs.iter()
                        .filter(|j| j.plan == job.plan && j.arch == arch)
                        .map(|j| done[j.index].clone())
                        .collect()
                };
                if let Some(buckets) = group
                    && let Err(e) = store_entry(plan, arch, &buckets)
                {
                    return Err(pool::Failure::Job(format!("nothing stored: {e:#}")));
                }
                Ok(b)
            }
            Err(e) if e.is_device_failure() && slots > 1 => {
                bar.abandon_with_message(format!("gpu {ordinal} failed; moving"));
                Err(pool::Failure::Device(format!("gpu {ordinal}: {e}")))
            }
            Err(e) => {
                bar.abandon_with_message("failed");
                Err(pool::Failure::Job(e.to_string()))
            }
        }
    };
    let event = |e: pool::Event| {
        if let pool::Event::Retired { slot, why } = e {
            say(format!(
                "gpu {} retired, no more jobs go to it: {why}",
                gpus(&groups[slot])
            ));
        }
    };
    let report = pool::run(&jobs, slots, &work, &event);
    let mut failures = 0;
    for (job, result) in jobs.iter().zip(&report.results) {
        if let Err(e) = result {
            let plan = &plans[job.plan];
            eprintln!(
                "error: {} {} {}: {e}",
                plan.kernel.name, job.arch, plan.targets[job.target]
            );
            failures += 1;
        }
    }
    if failures > 0 {
        eprintln!("{failures} search(es) failed; their entries were left as they were");
        return Ok(false);
    }
    match t.shard {
        Some(s) => eprintln!(
            "shard {s} done: `cargo optiml merge` with every shard's folder (this one is `{}`) folds them into \
             the cache",
            cache.root.display()
        ),
        None => eprintln!(
            "Commit `{}`; `cargo optiml analyze <kernel>` shows each search.",
            cache.root.display()
        ),
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_all_or_ordinals_the_driver_lists() {
        let gpu = |ordinal| probe::Device {
            ordinal,
            name: "NVIDIA H100".into(),
            arch: Arch::new(9, 0),
        };
        let four: Vec<probe::Device> = (0..4).map(gpu).collect();
        assert_eq!(parse_devices("all", &four).unwrap(), [0, 1, 2, 3]);
        assert_eq!(parse_devices("2, 0", &four).unwrap(), [2, 0]);
        // One GPU twice: two workers on it (the mechanism, on a one-GPU machine).
        assert_eq!(parse_devices("0,0", &four).unwrap(), [0, 0]);
        let err = parse_devices("0,7", &four).unwrap_err().to_string();
        assert!(
            err.contains("no device 7 (the driver lists 0, 1, 2, 3)"),
            "{err}"
        );
        let err = parse_devices("0,x", &four).unwrap_err().to_string();
        assert!(err.contains("`x` is not a device ordinal"), "{err}");
        assert!(parse_devices("all", &[]).is_err());
        use clap::Parser;
        let both = crate::cli::CargoCli::try_parse_from([
            "cargo",
            "optiml",
            "tune",
            "--device",
            "1",
            "--devices",
            "all",
        ]);
        assert!(both.is_err(), "--device and --devices together");
    }
    use crate::llm::Replay;
    use crate::llm::tests::{Server, learner, scratch, settings};

    /// With an `[llm]` table, each routed expert's kernel that compiles becomes a root (one per distinct source),
    /// whose log record makes the same candidate again with no endpoint; without one, there are none.
    #[test]
    fn the_llm_experts_kernels_join_the_search_as_roots() {
        let server = Server::with(learner);
        let dir = scratch("tune-llm-roots");
        std::fs::create_dir_all(&dir).unwrap();
        let mut scan = scan::Scan::default();
        scan::scan_source(
            &dir.join("lib.rs"),
            "#[optiml::kernel(\"relu\")]\npub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);\n",
            &mut scan,
        );
        let kernel = &scan.kernels[0];
        let nvrtc = crate::nvrtc::testing::nvrtc();
        let arch = Arch::new(9, 0);
        let compile = |source: &str| {
            nvrtc::compile(nvrtc, "llm.cu", source, arch)
                .map_err(|e| format!("{}\n{}", e.status, e.log))
        };
        let plain = Settings::default();
        assert!(LlmExperts::new(&dir, kernel, &plain, (arch, 2, 0), &compile).is_none());
        let with = Settings {
            llm: Some(settings(&server.url, Replay::Auto)),
            ..Settings::default()
        };
        let experts = LlmExperts::new(&dir, kernel, &with, (arch, 2, 0), &compile).unwrap();
        let roots = experts.roots();
        // Both routed experts learn the same kernel: one root.
        assert_eq!(roots.len(), 1, "{roots:?}");
        let root = &roots[0];
        assert!(root.name.starts_with("llm "), "{}", root.name);
        assert_eq!(
            families::logged_candidate(kernel, &root.schedule),
            Ok(root.candidate.clone())
        );
        let mut forged = root.schedule.clone();
        forged["llm"]["source"] = "__global__ void optiml_program() {}".into();
        assert!(
            families::logged_candidate(kernel, &forged)
                .unwrap_err()
                .contains("hash")
        );
        assert!(
            dir.join("target/optiml/llm").is_dir(),
            "the exchanges are recorded"
        );

        // The fastest verified root goes back to the nearest expert with its time and the time to beat; what
        // compiles is a new root whose log record makes it again.
        use crate::experts::Rewriter;
        let rewritten = experts.rewrite(root, 0.29, 0.18, "n=67108864").unwrap();
        assert!(
            rewritten.name.starts_with("llm ")
                && rewritten
                    .name
                    .ends_with(&format!("rewrite of {}", root.name)),
            "{}",
            rewritten.name
        );
        assert_eq!(
            families::logged_candidate(kernel, &rewritten.schedule).map(|c| c.source),
            Ok(rewritten.candidate.source.clone())
        );
        let mut stack = vec![dir.join("target/optiml/llm")];
        let mut asked = false;
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    asked |= std::fs::read_to_string(p).unwrap().contains(
                        "At n=67108864 it takes 0.2900 ms; the fastest kernel found takes 0.1800 ms",
                    );
                }
            }
        }
        assert!(asked, "the rewrite request states the timing");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
