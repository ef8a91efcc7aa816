//! Build-script helper and engine of `cargo optiml`: finds `#[optiml::kernel("…")]` declarations, generates each
//! kernel for each target GPU architecture, compiles it with NVRTC, caches it, and writes the Rust the attribute
//! includes.
//!
//! ```no_run
//! // build.rs: the whole of `fn main`
//! optiml_build::Builder::new().compile().unwrap_or_else(|e| e.exit());
//! ```
//!
//! # What a build does
//! 1. **Scan** every `.rs` file of the crate (`src/`, `examples/`, `tests/`, `benches/`, modules included; not
//!    `target/`, hidden folders or nested packages) for the attribute, with the parser the macro uses. A
//!    declaration with a bad spec is skipped (listed in [`Report::skipped`]); the macro reports it with a span.
//! 2. **Target architectures**: `OPTIML_ARCH` (`sm_80,sm_90`) if set, else the GPUs the driver reports, else
//!    [`DEFAULT_ARCHS`] (`sm_80,sm_90`).
//! 3. **Look up** each kernel × architecture by its key — sha256 of the canonical spec and signature, the
//!    architecture, the pinned NVRTC release and the generator version — in `target/optiml/`, then in the
//!    committed cache: `OPTIML_CACHE_DIR`, else `<crate>/.optiml/` and `<workspace>/.optiml/`; then, read only,
//!    in the per-user cache ([`targets::user_cache_dir`]), where `cargo optiml tune` and the build-time search
//!    leave a copy of each winner for the other crates on the machine, and in optiml's pre-tuned cache
//!    ([`targets::pretuned_dir`]). A tuned entry beats an untuned one wherever it sits, and the build's warning
//!    names a fallback that served. Entries are verified (key inputs, checksums) before use; a damaged one is
//!    regenerated, never loaded.
//! 4. **Generate** what is missing, unless `OPTIML_OFFLINE=1`: the family's default template, compiled by NVRTC
//!    to PTX + CUBIN with ptxas' register/spill/shared-memory report, stored atomically in `target/optiml/`.
//!    NVRTC is found through `OPTIML_NVRTC` (a `libnvrtc.so.13`), `CUDA_HOME`/`CUDA_PATH`, `/usr/local/cuda`,
//!    the pip wheel `nvidia-cuda-nvrtc==13.0.88` in the usual site-packages, then the system loader.
//! 5. **Search**, only for kernels generated in this build and only with a GPU present: a short MCTS (20 s in
//!    all by default; [`Builder::search_time`], `OPTIML_BUILD_SEARCH_S` or `[search] build_time_s`) whose winners,
//!    verified and timed in an isolated worker process, replace the defaults in `target/optiml/`. See [`tune`].
//! 6. **Emit** `$OUT_DIR/optiml/kernel-<id>.rs` per kernel, and `cargo:rerun-if-changed` /
//!    `rerun-if-env-changed` lines, so an unchanged crate never reruns any of this.
//!
//! A crate whose committed cache holds every kernel builds with no GPU, no CUDA toolkit and no NVRTC. Fill it
//! with `cargo optiml prepare` (`--check` in CI verifies it without NVRTC), and tune it on a GPU with
//! `cargo optiml tune`.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod analyze;
mod build_search;
pub mod cache;
pub mod cli;
pub mod codec;
pub mod config;
pub mod cuda;
pub mod emit;
pub mod engine;
mod error;
pub mod eval;
pub mod experts;
pub mod families;
pub mod fs;
pub mod llm;
pub mod measure;
pub mod migrate;
pub mod nvrtc;
pub mod pool;
pub mod scan;
pub mod search;
pub mod targets;
pub mod toolkit;
pub mod tune;

pub use error::{Error, Miss};
pub use families::serve_worker_if_requested;
pub use optiml_runtime::Arch;
pub use targets::DEFAULT_ARCHS;

use cache::Cache;
use engine::{Origin, Policy};
use optiml_spec::env;
use std::path::PathBuf;
use targets::ArchSource;

/// Configures and runs the build-time pipeline. Setters take `&mut self` so a build script can configure inside
/// `if`s before the terminal [`compile`](Builder::compile).
#[derive(Clone, Debug, Default)]
#[must_use = "call .compile() to generate the kernels"]
pub struct Builder {
    sources: Vec<PathBuf>,
    archs: Option<Vec<Arch>>,
    offline: Option<bool>,
    cache_dir: Option<PathBuf>,
    /// The per-user cache: `None` reads the environment ([`targets::user_cache_dir`]), `Some(None)` reads none.
    user_cache: Option<Option<PathBuf>>,
    /// optiml's pre-tuned cache: `None` is [`targets::pretuned_dir`], `Some(None)` reads none.
    pretuned_cache: Option<Option<PathBuf>>,
    quiet: bool,
    search_time: Option<f64>,
}

/// For each declaration whose spec the parser refused, the `[llm]` model's reading of it in index notation,
/// parsed by optiml's notation parser ([`llm::translate`]), as a line to show: the user accepts it by writing it
/// into the attribute, where it is checked like any spec. The exchanges are recorded under the workspace's
/// `target/optiml/llm`, and replayed by later builds; a spec the model cannot translate gets no line (the macro's
/// error stands alone).
fn translations(
    skipped: &[scan::Skipped],
    settings: &llm::LlmSettings,
    manifest_dir: &std::path::Path,
) -> Vec<String> {
    let dir = llm::records_under(&targets::workspace_root(manifest_dir));
    let model = llm::Llm::new(settings, &dir);
    skipped
        .iter()
        .filter_map(|s| {
            let (spec, why) = s.refused_spec.as_ref()?;
            let t = llm::translate::translate(&model, spec, why, 2).ok()?;
            Some(format!(
                "{}:{}: the model `{}` reads the spec \"{spec}\" as `{}` (unverified; to use it, write                  `#[optiml::kernel(\"{}\")]`, which is checked and verified like any spec)",
                s.file.display(),
                s.line,
                settings.model,
                t.notation,
                t.notation
            ))
        })
        .collect()
}

/// What [`Builder::compile`] did, per kernel and architecture.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The architectures built for.
    pub archs: Vec<Arch>,
    /// One line per kernel × architecture: name, arch, where its entry came from.
    pub entries: Vec<(String, Arch, Origin)>,
    /// Declarations skipped (bad spec or signature), as `file:line: message`.
    pub skipped: Vec<String>,
    /// Non-fatal problems (damaged cache entries that were regenerated) and where kernels came from other than
    /// this crate's caches.
    pub warnings: Vec<String>,
    /// What the build-time search did, one line per kernel and architecture searched.
    pub searched: Vec<String>,
    /// The `[llm]` model's readings of refused specs in index notation, one line each, shown and never used.
    pub translations: Vec<String>,
}

impl Report {
    /// How many variants were generated in this run.
    pub fn generated(&self) -> usize {
        self.entries
            .iter()
            .filter(|(_, _, o)| *o == Origin::Generated)
            .count()
    }
}

impl Builder {
    /// A builder with the defaults described in the crate docs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Scans `path` (a file or a folder) instead of the whole crate; call again to add more.
    pub fn source(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.sources.push(path.into());
        self
    }

    /// Builds for these architectures, whatever `OPTIML_ARCH` says or GPU is present.
    pub fn arch(&mut self, archs: impl IntoIterator<Item = Arch>) -> &mut Self {
        self.archs = Some(archs.into_iter().collect());
        self
    }

    /// Forbids (or allows) generation, overriding `OPTIML_OFFLINE`.
    pub fn offline(&mut self, offline: bool) -> &mut Self {
        self.offline = Some(offline);
        self
    }

    /// Reads the committed cache from `dir`, overriding `OPTIML_CACHE_DIR` and the `.optiml/` folders.
    pub fn cache_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Reads the per-user cache from `dir` (`None`: reads no per-user cache), overriding `OPTIML_USER_CACHE` and
    /// the XDG default.
    pub fn user_cache(&mut self, dir: Option<impl Into<PathBuf>>) -> &mut Self {
        self.user_cache = Some(dir.map(Into::into));
        self
    }

    /// Reads optiml's pre-tuned cache from `dir` (`None`: reads none) instead of the one that comes with optiml.
    pub fn pretuned_cache(&mut self, dir: Option<impl Into<PathBuf>>) -> &mut Self {
        self.pretuned_cache = Some(dir.map(Into::into));
        self
    }

    /// Seconds of search on a cache miss when a GPU is present, shared by every kernel generated in this build
    /// (0 turns it off); overrides `[search] build_time_s` and `OPTIML_BUILD_SEARCH_S`. Default 20.
    pub fn search_time(&mut self, seconds: f64) -> &mut Self {
        self.search_time = Some(seconds);
        self
    }

    /// A [`cc::Build`] that compiles the crate's own CUDA files (`files`, relative to the package root as in any
    /// build script) with nvcc, for the architectures this builder generates for (machine code for each, PTX
    /// for the newest), as `cxx-build` hands back its build: add flags, defines or includes, then call
    /// `compile("name")`, which links the result into the crate. nvcc is `cc`'s: the `NVCC` variable, else `nvcc`
    /// on `PATH`. A kernel named as a seed (`seed = "file.cu:function"`) does not need this: optiml compiles
    /// seeds with NVRTC, toolkit or not. Each file is watched (`cargo:rerun-if-changed`).
    ///
    /// ```no_run
    /// // build.rs
    /// let builder = optiml_build::Builder::new();
    /// builder.compile().unwrap_or_else(|e| e.exit());
    /// match builder.cuda_files(["kernels/softmax.cu"]) {
    ///     Ok(mut build) => build.compile("app_kernels"),
    ///     Err(e) => e.exit(),
    /// }
    /// ```
    ///
    /// # Errors
    /// [`Error::Nvcc`] when no nvcc runs (its help names the way to install one); [`Error::Arch`] for a bad
    /// `OPTIML_ARCH`.
    pub fn cuda_files<P: Into<PathBuf>>(
        &self,
        files: impl IntoIterator<Item = P>,
    ) -> Result<cc::Build, Error> {
        let files: Vec<PathBuf> = files.into_iter().map(Into::into).collect();
        toolkit::find_nvcc().map_err(Error::Nvcc)?;
        let archs = match &self.archs {
            Some(a) => a.clone(),
            None => targets::resolve_archs()?.0,
        };
        if !self.quiet {
            for f in &files {
                println!("cargo:rerun-if-changed={}", f.display());
            }
            println!("cargo:rerun-if-env-changed=NVCC");
        }
        Ok(toolkit::cuda_build(&files, &archs))
    }

    /// Prints no `cargo:` lines (for use outside a build script).
    pub fn quiet(&mut self, quiet: bool) -> &mut Self {
        self.quiet = quiet;
        self
    }

    /// Runs the pipeline; see the crate docs.
    ///
    /// # Errors
    /// [`Error::NotInBuildScript`] outside a build script, [`Error::Offline`] / [`Error::Nvrtc`] when kernels must
    /// be generated and cannot be, [`Error::Compile`] when NVRTC rejects a kernel, [`Error::Cache`] /
    /// [`Error::Emit`] when files cannot be written. Each error's [`help`](Error::help) names the fix.
    pub fn compile(&self) -> Result<Report, Error> {
        // A build script re-executed as the search's evaluation worker serves and exits here.
        families::serve_worker_if_requested();
        let manifest_dir = env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).ok_or(
            Error::NotInBuildScript {
                var: "CARGO_MANIFEST_DIR",
            },
        )?;
        let out_dir = env::var_os("OUT_DIR")
            .map(PathBuf::from)
            .ok_or(Error::NotInBuildScript { var: "OUT_DIR" })?;
        self.compile_at(&manifest_dir, &out_dir)
    }

    /// Runs the pipeline for the crate at `manifest_dir`, writing into `out_dir`, as [`compile`](Builder::compile)
    /// does in a build script: for tools and tests that run it outside one (with [`quiet`](Builder::quiet)).
    ///
    /// # Errors
    /// As [`compile`](Builder::compile).
    pub fn compile_at(
        &self,
        manifest_dir: &std::path::Path,
        out_dir: &std::path::Path,
    ) -> Result<Report, Error> {
        let (manifest_dir, out_dir) = (manifest_dir.to_path_buf(), out_dir.to_path_buf());
        let cargo = |line: String| {
            if !self.quiet {
                println!("cargo:{line}");
            }
        };
        for var in env::watched() {
            cargo(format!("rerun-if-env-changed={var}"));
        }

        let roots = if self.sources.is_empty() {
            vec![manifest_dir.clone()]
        } else {
            self.sources.clone()
        };
        let mut scan = scan::scan(&roots).map_err(Error::Scan)?;
        crate::families::skip_unsupported(&mut scan);
        for file in &scan.files {
            cargo(format!("rerun-if-changed={}", file.display()));
        }
        // A folder makes cargo watch everything below it, so the crate root itself (which may hold `target/`)
        // is never listed; its subfolders are. A new source file at the root comes with a new target in the
        // manifest (an `[[example]]`, a `[[bin]]`), so the manifest stands in for the root.
        for dir in scan.dirs.iter().filter(|d| !roots.contains(d)) {
            cargo(format!("rerun-if-changed={}", dir.display()));
        }
        if self.sources.is_empty() {
            cargo(format!(
                "rerun-if-changed={}",
                manifest_dir.join("Cargo.toml").display()
            ));
        }

        // A skipped declaration (bad spec or signature) is the macro's to report, once, with a span: a
        // build-script warning repeated its error, and cargo replayed that warning on every later build.
        let mut report = Report::default();
        for s in &scan.skipped {
            report
                .skipped
                .push(format!("{}:{}: {}", s.file.display(), s.line, s.message));
        }

        let (archs, source) = match &self.archs {
            Some(a) => (a.clone(), ArchSource::Explicit),
            None => targets::resolve_archs()?,
        };
        report.archs = archs.clone();
        let committed = match &self.cache_dir {
            Some(d) => vec![d.clone()],
            None => targets::committed_dirs(&manifest_dir),
        };
        for dir in &committed {
            if dir.exists() {
                cargo(format!("rerun-if-changed={}", dir.display()));
            }
        }
        let target =
            Cache::new(targets::target_cache_dir(&out_dir)).with_words(families::tuned_for);
        let mut read = vec![target.clone()];
        read.extend(committed.into_iter().map(Cache::new));
        // The fallbacks, read after the crate's own caches: tuned entries other crates on this machine made,
        // then those optiml ships. Read only; a folder already listed is not read twice.
        let user = match &self.user_cache {
            Some(dir) => dir.clone(),
            None => targets::user_cache_dir(),
        };
        let pretuned = match &self.pretuned_cache {
            Some(dir) => dir.clone(),
            None => targets::pretuned_dir(),
        };
        // The build-time search copies its winners into the per-user cache, when it is one of the fallbacks.
        let user_cache = user
            .as_ref()
            .filter(|d| !read.iter().any(|c| targets::same_folder(&c.root, d)))
            .map(|d| Cache::new(d).with_words(families::tuned_for));
        let mut fallbacks: Vec<(PathBuf, &str)> = Vec::new();
        for (dir, what) in [
            (user, "the per-user cache"),
            (pretuned, "optiml's pre-tuned cache"),
        ] {
            let Some(dir) = dir else { continue };
            if read.iter().any(|c| targets::same_folder(&c.root, &dir)) {
                continue;
            }
            if dir.exists() {
                cargo(format!("rerun-if-changed={}", dir.display()));
            }
            read.push(Cache::new(&dir));
            fallbacks.push((dir, what));
        }
        let policy = Policy {
            read,
            write: target,
            offline: match self.offline {
                Some(o) => o,
                None => env::flag(env::OPTIML_OFFLINE).map_err(Error::Flag)?,
            },
        };

        let started = std::time::Instant::now();
        let mut warnings = Vec::new();
        let kernels = scan.unique_kernels();
        let resolved = engine::resolve(&kernels, &archs, &policy, &mut warnings);
        for w in &warnings {
            cargo(format!("warning=optiml: {w}"));
        }
        report.warnings = warnings;
        let mut resolved = resolved?;
        let settings = config::Settings::load(&manifest_dir).map_err(Error::Config)?;
        if let Some(llm) = &settings.llm {
            report.translations = translations(&scan.skipped, llm, &manifest_dir);
            for line in &report.translations {
                cargo(format!("warning=optiml: {line}"));
            }
        }
        // Where a kernel came from a fallback, the build says so: it was not tuned for this crate, and
        // `cargo optiml prepare` makes it the crate's own.
        for (dir, what) in &fallbacks {
            let from: Vec<String> = resolved
                .iter()
                .filter(|r| r.origin == Origin::Cache(dir.clone()))
                .map(|r| {
                    let tuning = r
                        .entry
                        .manifest
                        .variants
                        .iter()
                        .find_map(|v| v.tuning.as_ref());
                    match tuning {
                        Some(t) => format!(
                            "`{}` on {} (tuned on {}, {})",
                            kernels[r.kernel].name, r.arch, t.device, t.date
                        ),
                        None => format!("`{}` on {} (untuned)", kernels[r.kernel].name, r.arch),
                    }
                })
                .collect();
            if !from.is_empty() {
                let line = format!(
                    "from {what} `{}`: {}; `cargo optiml prepare` copies them into this crate's `.optiml/`",
                    dir.display(),
                    from.join(", ")
                );
                cargo(format!("warning=optiml: {line}"));
                report.warnings.push(line);
            }
        }
        let searched = build_search::run(
            &kernels,
            &mut resolved,
            &settings,
            &policy.write,
            user_cache.as_ref(),
            self.search_time,
        );
        for line in &searched.notes {
            cargo(format!("warning=optiml: {line}"));
        }
        report.searched = searched.notes;
        emit::emit(&out_dir, &kernels, &resolved).map_err(Error::Emit)?;
        for r in &resolved {
            report
                .entries
                .push((kernels[r.kernel].name.clone(), r.arch, r.origin.clone()));
        }
        if report.generated() > 0 {
            let archs_text: Vec<String> = archs.iter().map(Arch::to_string).collect();
            let why = match source {
                ArchSource::Detected(gpus) => format!("GPUs found: {}", gpus.join(", ")),
                ArchSource::Env => "from OPTIML_ARCH".into(),
                ArchSource::Explicit => "set in build.rs".into(),
                ArchSource::Default => "default; set OPTIML_ARCH to change".into(),
            };
            // Cargo replays a build script's warnings on later builds that do not run it: the text says what
            // this run did, with its time, so a replay does not read as another generation.
            let tuned = match searched.tuned {
                0 => "default schedules, not verified or tuned on a GPU".to_string(),
                n => format!(
                    "{n} of them verified and tuned on a GPU by the build's search (above), the rest default \
                     schedules"
                ),
            };
            cargo(format!(
                "warning=optiml: this build script (run at {}) generated {} kernel variants for {} ({why}) \
                 with NVRTC in {:.1} s: {tuned}; `cargo optiml prepare` commits them to `.optiml/`",
                tune::now_rfc3339(),
                report.generated(),
                archs_text.join(","),
                started.elapsed().as_secs_f64()
            ));
        }
        Ok(report)
    }
}
