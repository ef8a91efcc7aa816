//! `cargo optiml`: the kernel cache and the search logs, outside a build. The binary (`src/bin/cargo-optiml.rs`) only parses arguments.

use crate::analyze::{self as report, Convergence};
use crate::cache::{Cache, KeyInputs, Lookup};
use crate::engine::{self, Origin, Policy};
use crate::search::{self, SearchRecords};
use crate::{DEFAULT_ARCHS, Error, families, scan, targets};
use clap::{Args, Parser, Subcommand};

mod generate;
pub mod shard;
mod tune;
use optiml_runtime::Arch;
use optiml_spec::env;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Cargo's view: `cargo optiml …` runs `cargo-optiml optiml …`.
#[derive(Debug, Parser)]
#[command(name = "cargo", bin_name = "cargo")]
pub enum CargoCli {
    /// optiml's kernel cache and search logs.
    Optiml(Optiml),
}

/// `cargo optiml`.
#[derive(Debug, Args)]
#[command(
    version,
    about = "Generate and check optiml's committed kernel cache (.optiml/); read its search logs"
)]
pub struct Optiml {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate every kernel of the workspace for each architecture into the committed cache, so that builds on
    /// machines without a GPU or NVRTC take them from there. Tuned variants of an earlier generator's entries are
    /// carried over where this generator compiles them to the same CUBIN. Removes entries no kernel needs any more
    /// (only folders named like entries). With --check, change nothing: exit 1 if an entry is missing or damaged.
    Prepare(Prepare),
    /// List the transformations the search applies to a matmul schedule: name, the bottleneck it addresses, the
    /// speed-up it claims, and why it should help.
    Transforms(Transforms),
    /// Show what a search did: the path from the default schedule to the best one, with metrics before and after
    /// each transformation, claimed against measured gains, and the rejections; draws SM and DRAM SOL along the
    /// path as an SVG. With --compare, also draws best time found against evaluations for several logs.
    Analyze(Analyze),
    /// Search for faster kernels on this machine's GPU (MCTS over the family's transformations, every candidate
    /// verified and timed in an isolated worker), one variant per shape bucket, and store the winners in the
    /// committed cache, replacing the default entries. Logs go into each entry (`cargo optiml analyze` reads them).
    Tune(tune::Tune),
    /// Fold the folders that shards of one tune wrote (`cargo optiml tune --shard i/n` on n machines) into the
    /// committed cache. Every entry is verified first (checksums, key, the architecture of the GPU it was tuned
    /// on); with any problem nothing is written. A shape several shards tuned keeps the faster measurement among
    /// those of one GPU model, else the newest; a shape no shard tuned keeps the cache's variant. Running it
    /// twice changes nothing.
    Merge(shard::Merge),
    /// Ask the LLM experts of the `[llm]` settings for kernels (OptiML-G): each tensor operator's request goes to
    /// the top-K experts by embedding similarity, each writes against the family's contract with repair rounds
    /// from the guard and NVRTC, and a table says what compiled. Every exchange is recorded and replayed on the
    /// next run; nothing is written to the cache.
    Generate(generate::Generate),
    /// Show what a spec means: the program it lowers to (for a tensor operator, in index notation), the signature
    /// the kernel takes, the reference formula every candidate is checked against, and which generator makes
    /// it. A spec that does not parse prints the error, which names the closest phrasing that works.
    Explain(Explain),
}

/// `cargo optiml explain`.
#[derive(Debug, Args)]
pub struct Explain {
    /// The spec, as written in `#[optiml::kernel("…")]`.
    pub spec: String,
    /// When the spec does not parse, ask the endpoint of the current package's `[llm]` settings for the same
    /// operator in index notation: shown, recorded, never used (write it into the attribute to accept it).
    #[arg(long)]
    pub llm: bool,
}

/// `cargo optiml prepare`.
#[derive(Debug, Args)]
pub struct Prepare {
    /// Verify the committed cache instead of filling it; needs no NVRTC. Exit status 1 when an entry is missing,
    /// damaged, of the previous format or has a stale `report.md`; unused entries only warn.
    #[arg(long)]
    pub check: bool,
    /// With --check, also re-derive every variant with NVRTC (the family's default for an untuned one, its search
    /// log's schedule for a tuned one) and require its source, launch, CUBIN and PTX to be exactly what that gives:
    /// an entry whose pieces belong to different kernels, or whose launch was edited, fails.
    #[arg(long, requires = "check")]
    pub rebuild: bool,
    /// Architectures, comma separated (default: OPTIML_ARCH, else sm_80,sm_90).
    #[arg(long, value_name = "ARCHS")]
    pub arch: Option<String>,
    /// Where to scan and which cache to fill.
    #[command(flatten)]
    pub place: Place,
}

/// The folder scanned and the cache used, shared by the commands that write the cache.
#[derive(Debug, Args)]
pub struct Place {
    /// The workspace or crate to scan (default: the workspace around the current folder).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The cache folder (default: OPTIML_CACHE_DIR, else `DIR/.optiml`).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// `cargo optiml transforms`.
#[derive(Debug, Args)]
pub struct Transforms {
    /// Print JSON (an array of {name, addresses, claimed_gain, rationale}) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also describe the other experts of the search: the LLM experts (built in, and the current package's
    /// `[llm.experts]`), the router, the `[llm]` settings, recording and replay, the proposer and the judge.
    #[arg(long)]
    pub experts: bool,
}

/// `cargo optiml analyze`.
#[derive(Debug, Args)]
pub struct Analyze {
    /// A search log (`.jsonl`), or a kernel name: then every `search*.jsonl` log under the cache folders whose
    /// header names that kernel is analysed (one per architecture, typically).
    pub target: String,
    /// Where to look for logs by kernel name (default: OPTIML_CACHE_DIR, else `./.optiml`; then `target/optiml`).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Where to write the SOL figure (default: `<kernel>.<arch>.<log stem>.svg` in `--figures`). When several
    /// logs match, the architecture is added to the file name.
    #[arg(long, value_name = "PATH")]
    pub svg: Option<PathBuf>,
    /// The folder figures go to: outside every cache, so that `analyze` leaves the committed `.optiml/` as it was.
    #[arg(long, value_name = "DIR", default_value = "target/optiml/analyze")]
    pub figures: PathBuf,
    /// More logs to compare with (for example random search with several seeds): prints best time against
    /// evaluations for every log and draws it, as `<kernel>.<arch>.<log stem>.compare.svg` in `--figures`.
    #[arg(long, value_name = "LOG", num_args = 1..)]
    pub compare: Vec<PathBuf>,
}

/// Runs a parsed command line; `Ok(false)` means "completed, but the check failed" (exit status 1).
///
/// # Errors
/// Any failure, with context.
pub fn run(cli: CargoCli) -> anyhow::Result<bool> {
    let CargoCli::Optiml(Optiml { command }) = cli;
    match command {
        Command::Prepare(p) => prepare(&p),
        Command::Transforms(t) => transforms(&t),
        Command::Analyze(a) => analyze(&a),
        Command::Tune(t) => tune::run(&t),
        Command::Merge(m) => shard::run(&m),
        Command::Generate(g) => generate::run(&g),
        Command::Explain(e) => explain(&e),
    }
}

fn explain(e: &Explain) -> anyhow::Result<bool> {
    let spec = match optiml_spec::parse(&e.spec) {
        Ok(spec) => spec,
        Err(err) => {
            eprintln!("error: {err}");
            if e.llm {
                translate(&e.spec, &err.to_string())?;
            }
            return Ok(false);
        }
    };
    println!("canonical: {}", spec.canonical());
    let family = families::of(&spec);
    print!("{}", families::explain(&spec));
    match family.supports(&spec) {
        Ok(()) => println!(
            "generated by: the {} family ({} kernel)",
            family.name(),
            family.searched_catalog(&spec).kernel
        ),
        Err(reason) => println!("not generated yet: {reason}"),
    }
    Ok(true)
}

/// The model's reading of a spec the phrase parser refused, in index notation, parsed by optiml's notation parser.
fn translate(spec: &str, why: &str) -> anyhow::Result<()> {
    let cwd = std::env::current_dir()?;
    let settings = crate::config::Settings::load(&cwd)?;
    let Some(llm_settings) = settings.llm else {
        anyhow::bail!(
            "--llm: no [llm] table in `{}` (optiml.toml or [package.metadata.optiml.llm])",
            cwd.display()
        );
    };
    let dir = crate::llm::records_under(&targets::workspace_root(&cwd));
    let llm = crate::llm::Llm::new(&llm_settings, &dir);
    match crate::llm::translate::translate(&llm, spec, why, 2) {
        Ok(t) => {
            println!(
                "the model reads it as (unverified, after {} answer(s)):\n    {}\nwhich means:\n    {}\n\
                 To use it, write `#[optiml::kernel(\"{}\")]`: it is then checked against the signature and every \
                 kernel is verified against it like any spec. (Recorded in `{}`.)",
                t.answers,
                t.notation,
                t.program.canonical(),
                t.notation,
                dir.display()
            );
            Ok(())
        }
        Err(e) => anyhow::bail!("--llm: no translation: {e}"),
    }
}

fn transforms(t: &Transforms) -> anyhow::Result<bool> {
    let name = |b: search::Bottleneck| match b {
        search::Bottleneck::Memory => "memory",
        search::Bottleneck::Compute => "compute",
        search::Bottleneck::Mixed => "mixed",
    };
    let catalogs: Vec<families::Catalog> = families::FAMILIES
        .iter()
        .flat_map(|f| f.catalogs())
        .collect();
    // (family, kernel, name, addresses, claimed gain, rationale) of every catalog.
    let rows: Vec<(&str, &str, &str, &str, f64, &str)> = catalogs
        .iter()
        .flat_map(|c| {
            c.entries.iter().map(|e| {
                (
                    c.family,
                    c.kernel,
                    e.name,
                    name(e.addresses),
                    e.claimed_gain,
                    e.rationale,
                )
            })
        })
        .collect();
    if t.json {
        let items: Vec<serde_json::Value> = rows
            .iter()
            .map(|(family, kernel, n, addresses, gain, rationale)| {
                serde_json::json!({
                    "family": family,
                    "kernel": kernel,
                    "name": n,
                    "addresses": addresses,
                    "claimed_gain": gain,
                    "rationale": rationale,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(true);
    }
    println!(
        "| family | kernel | transformation | addresses | claimed gain | rationale |\n|---|---|---|---|---:|---|"
    );
    for (family, kernel, n, addresses, gain, rationale) in &rows {
        println!(
            "| {family} | {kernel} | {n} | {addresses} | {gain:.2}× | {} |",
            rationale.replace('|', "\\|")
        );
    }
    if t.experts {
        let cwd = std::env::current_dir()?;
        let user = crate::config::Settings::load(&cwd)?
            .llm
            .map(|l| l.experts)
            .unwrap_or_default();
        print!("\n{}", experts_text(&crate::llm::experts::with_user(&user)));
    }
    Ok(true)
}

/// What `transforms --experts` says: each LLM expert, then how the LLM path is set up and used.
fn experts_text(experts: &[crate::llm::experts::Expert]) -> String {
    let mut s =
        String::from("## LLM experts (OptiML-G)\n\n| expert | what it is good at |\n|---|---|\n");
    for e in experts {
        s.push_str(&format!(
            "| {} | {} |\n",
            e.name,
            e.description.replace('|', "\\|")
        ));
    }
    s.push_str(LLM_GUIDE);
    s
}

/// How the LLM path is configured and what each part does (`transforms --experts`).
const LLM_GUIDE: &str = "
Nothing here runs without an `[llm]` table (in `optiml.toml` or `[package.metadata.optiml.llm]`):

- **settings**: `base_url` (an OpenAI-compatible API, up to `/v1`), `model`, `api_key_env` (the *name* of the
  variable holding the key; the key is sent only in the `Authorization` header and never written), `timeout_s`
  (120), `max_tokens` (1024), `temperature` (0), `replay`, `top_k` (2), `gumbel_tau` (none), and
  `[llm.experts.<name>]` with `description` and `prompt` for experts of your own (one named like a built-in
  replaces it).
- **router**: each kernel's request (its spec, the kind of computation, its program) goes to the `top_k` experts
  nearest by cosine similarity, over the endpoint's embeddings or a built-in hashed embedding, with seeded
  Gumbel noise of `gumbel_tau` when set.
- **recording and replay**: every exchange is stored, content-addressed, with its model, tokens, latency and
  verdict (`target/optiml/llm` by default). `replay = \"auto\"` uses a recorded answer where there is one,
  `\"only\"` never calls the endpoint (CI, no endpoint), `\"off\"` always calls it.
- **`cargo optiml generate`**: the routed experts write each tensor operator's kernel against the family's
  contract, with repair rounds from the guard and NVRTC, and a table says what compiled; it writes nothing to
  the cache.
- **`cargo optiml tune`**: the same kernels (replayed where recorded; `--llm-rounds`, `--no-llm`) join the search
  as roots: gated in the worker like every candidate, timed, kept only where faster than the search's best, their
  source held in the search log; then the nearest expert rewrites the fastest verified root (an LLM kernel or your
  seed) once, told its time and the time to beat, and the rewrite is gated and timed the same way. `cargo
  optiml analyze` lists them all.
- **`cargo optiml explain --llm`**, and the build script for refused specs: the model's reading of a spec in index
  notation, shown and recorded, never used until written into the attribute.
- **proposer and judge** (`search_compare --llm`): the model orders the catalog's applicable transformations at
  each node, and judges each measured edit KEEP or DISCARD with a score (the reward's 0.2 judge term); the
  routed proposer and the deterministic rule stay the defaults.
- **seeds from a user's `.cu` file** (no `[llm]` needed): `#[optiml::kernel(\"…\", seed = \"kernels/f.cu:function\")]`
  names a kernel of your own, written against the program ABI `cargo optiml explain` prints, as a root of the
  search: `cargo optiml tune` verifies it with the gate, times it beside the search's best, and keeps it only where
  it is faster; the log and the report name it (`seed kernels/f.cu:function`). Seeds compile with NVRTC;
  `Builder::cuda_files` hands the crate's own `.cu` files to nvcc through `cc` for its host code.
";

fn analyze(a: &Analyze) -> anyhow::Result<bool> {
    let logs = resolve_logs(&a.target, a.cache_dir.as_deref())?;
    let mut loaded: Vec<(PathBuf, SearchRecords)> = Vec::new();
    for (log, text) in &logs {
        let records = SearchRecords::parse_jsonl(text, log)?;
        let analysis = report::analyze(&records)
            .map_err(|e| anyhow::anyhow!("cannot analyse `{}`: {e}", log.display()))?;
        let svg = match (&a.svg, logs.len()) {
            (Some(path), 1) => path.clone(),
            (Some(path), _) => with_suffix(path, &records.header.arch, "svg"),
            (None, _) => a.figures.join(figure_name(log, &records, "svg")),
        };
        println!("log: `{}`\n", log.display());
        println!("{}", analysis.markdown());
        write_file(&svg, &report::trajectory_svg(&analysis))?;
        eprintln!("wrote the SOL figure to `{}`", svg.display());
        loaded.push((log.clone(), records));
    }
    if a.compare.is_empty() {
        return Ok(true);
    }
    for log in &a.compare {
        let text = read_log(log)?;
        loaded.push((log.clone(), SearchRecords::parse_jsonl(&text, log)?));
    }
    let first = &loaded[0].1.header;
    for (log, r) in &loaded[1..] {
        let h = &r.header;
        if (&h.kernel, &h.arch, &h.shape) != (&first.kernel, &first.arch, &first.shape) {
            eprintln!(
                "warning: `{}` tuned `{}` on {} for {}, not `{}` on {} for {}: its times are not comparable",
                log.display(),
                h.kernel,
                h.arch,
                h.shape,
                first.kernel,
                first.arch,
                first.shape
            );
        }
    }
    let series: Vec<Convergence> = loaded
        .iter()
        .map(|(log, r)| {
            let seed = r
                .header
                .seed
                .map_or_else(String::new, |s| format!(", seed {s}"));
            Convergence::of(r, format!("{} ({}{seed})", log.display(), r.header.method))
        })
        .collect();
    println!("## best time found against evaluations\n");
    println!("{}", report::convergence_table(&series));
    let title = format!(
        "{} on {}, {}: best time found against evaluations",
        first.kernel, first.arch, first.shape
    );
    let out = a
        .figures
        .join(figure_name(&loaded[0].0, &loaded[0].1, "compare.svg"));
    write_file(&out, &report::convergence_svg(&series, &title))?;
    eprintln!("wrote the comparison figure to `{}`", out.display());
    Ok(true)
}

/// `…/search.jsonl` of `bmm` on sm_90 → `bmm.sm_90.search.svg`.
fn figure_name(log: &Path, records: &SearchRecords, extension: &str) -> String {
    let stem = log
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(
        "{}.{}.{stem}.{extension}",
        records.header.kernel, records.header.arch
    )
}

/// `dir/search.jsonl` + `sm_90` → `dir/search.sm_90.svg`.
fn with_suffix(path: &Path, suffix: &str, extension: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!("{stem}.{suffix}.{extension}"))
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::fs::create_dir_all(dir)?;
    }
    crate::fs::write(path, text.as_bytes())?;
    Ok(())
}

/// The text of the log at `path`: a file, or a log in a cache entry's pack, named as the entry's folder and the
/// log's name in it (`.optiml/sm_90/<key>/search-v0.jsonl`, as `analyze` prints it).
fn read_log(path: &Path) -> anyhow::Result<String> {
    if path.is_file() {
        return Ok(crate::fs::read_to_string(path)?);
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        anyhow::bail!("no search log at `{}`", path.display());
    };
    if !dir.join("manifest.bin").is_file() {
        anyhow::bail!("no search log at `{}`", path.display());
    }
    let entry = crate::cache::open(dir).map_err(|why| {
        anyhow::anyhow!("`{}` is not a verified cache entry: {why}", dir.display())
    })?;
    let bytes = entry
        .bytes(name)
        .map_err(|_| anyhow::anyhow!("the cache entry `{}` holds no `{name}`", dir.display()))?;
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

/// The logs `target` names, with their text: the log itself, or every search log under the cache folders whose
/// header names the kernel `target`.
fn resolve_logs(target: &str, cache_dir: Option<&Path>) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let as_path = Path::new(target);
    if target.ends_with(".jsonl") || target.contains(std::path::MAIN_SEPARATOR) || as_path.is_file()
    {
        return Ok(vec![(as_path.to_path_buf(), read_log(as_path)?)]);
    }
    let dirs = log_dirs(cache_dir)?;
    let mut found = Vec::new();
    // The kernels that do have logs, to name when `target` has none.
    let mut others: Vec<String> = Vec::new();
    for dir in &dirs {
        for (file, text) in find_logs(dir)? {
            match search::header_of(&text, &file) {
                Ok(h) if h.kernel == target => found.push((file, text)),
                Ok(h) => others.push(h.kernel),
                Err(e) => eprintln!("warning: skipped {e}"),
            }
        }
    }
    found.sort();
    found.dedup();
    if found.is_empty() {
        anyhow::bail!(no_log_message(target, &dirs, others));
    }
    Ok(found)
}

/// Why `analyze <target>` found nothing, with the kernels that have logs in those folders: a misspelt name and a
/// kernel never searched no longer read the same.
fn no_log_message(target: &str, dirs: &[PathBuf], mut with_logs: Vec<String>) -> String {
    let searched: Vec<String> = dirs.iter().map(|d| format!("`{}`", d.display())).collect();
    with_logs.sort();
    with_logs.dedup();
    let known = if with_logs.is_empty() {
        "no kernel has a search log there".to_string()
    } else {
        format!("kernels with search logs: {}", with_logs.join(", "))
    };
    format!(
        "no search log for kernel `{target}` in {}; {known}. Pass one of those names, the path of a `.jsonl` log, \
         or the folder holding it with --cache-dir",
        searched.join(", ")
    )
}

/// Folders to search for logs by kernel name: the committed cache, then the build cache; with no
/// OPTIML_CACHE_DIR, both beside the current folder and at the workspace root.
fn log_dirs(cache_dir: Option<&Path>) -> anyhow::Result<Vec<PathBuf>> {
    if let Some(d) = cache_dir {
        return Ok(vec![d.to_path_buf()]);
    }
    let cwd = std::env::current_dir()?;
    let root = targets::workspace_root(&cwd);
    let mut dirs = match env::var_os(env::OPTIML_CACHE_DIR) {
        Some(d) => vec![PathBuf::from(d)],
        None => vec![cwd.join(".optiml"), root.join(".optiml")],
    };
    dirs.extend([cwd.join("target/optiml"), root.join("target/optiml")]);
    let mut unique = Vec::new();
    for d in dirs {
        if !unique.contains(&d) {
            unique.push(d);
        }
    }
    Ok(unique)
}

/// The search logs below `dir` with their text: `search*.jsonl` files, and the logs packed in each cache entry
/// (a folder holding a `manifest.bin`), which is verified first. Symbolic links are not followed (a link back up
/// would loop), and hidden folders are skipped: the cache writes its temporary entries there.
fn find_logs(dir: &Path) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if d.join("manifest.bin").is_file() {
            match crate::cache::open(&d) {
                Ok(entry) => out.extend(entry.logs().map(|(name, bytes)| {
                    (d.join(name), String::from_utf8_lossy(bytes).into_owned())
                })),
                Err(why) => eprintln!("warning: skipped the cache entry `{}`: {why}", d.display()),
            }
            continue;
        }
        for path in crate::fs::read_dir(&d)? {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() && !name.starts_with('.') {
                stack.push(path);
            } else if meta.is_file() && name.starts_with("search") && name.ends_with(".jsonl") {
                let text = crate::fs::read_to_string(&path)?;
                out.push((path, text));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The folder to scan (`--dir`, else the workspace around the current folder) and the committed cache in it
/// (`--cache-dir`, else `OPTIML_CACHE_DIR`, else `<root>/.optiml`).
fn root_and_cache(place: &Place) -> anyhow::Result<(PathBuf, Cache)> {
    let (dir, cache_dir) = (place.dir.as_deref(), place.cache_dir.as_deref());
    let cwd = std::env::current_dir()?;
    let root = match dir {
        Some(d) => d
            .canonicalize()
            .map_err(|e| anyhow::anyhow!("cannot open `{}`: {e}", d.display()))?,
        None => targets::workspace_root(&cwd),
    };
    let cache = Cache::new(match (cache_dir, env::var_os(env::OPTIML_CACHE_DIR)) {
        (Some(d), _) => d.to_path_buf(),
        (None, Some(d)) => PathBuf::from(d),
        (None, None) => root.join(".optiml"),
    })
    .with_words(families::tuned_for);
    Ok((root, cache))
}

/// The `--dir` and `--cache-dir` a command was given, as a command line repeating it would spell them.
fn place_args(place: &Place) -> String {
    let mut out = String::new();
    for (flag, dir) in [("--dir", &place.dir), ("--cache-dir", &place.cache_dir)] {
        if let Some(dir) = dir {
            out.push_str(&format!(" {flag} {}", dir.display()));
        }
    }
    out
}

fn prepare(p: &Prepare) -> anyhow::Result<bool> {
    let (root, cache) = root_and_cache(&p.place)?;
    let archs: Vec<Arch> = match p.arch.clone().or_else(|| env::var(env::OPTIML_ARCH)) {
        Some(text) => targets::parse_archs(&text, "--arch")?,
        None => DEFAULT_ARCHS.to_vec(),
    };
    // What each package's build script would scan: the packages whose build.rs uses optiml-build.
    let packages = optiml_packages(&root)?;
    let mut found = scan::scan(&packages)?;
    families::skip_unsupported(&mut found);
    for s in &found.skipped {
        eprintln!(
            "warning: skipped {}:{}: {}",
            s.file.display(),
            s.line,
            s.message
        );
    }
    let kernels = found.unique_kernels();
    let archs_text = archs
        .iter()
        .map(Arch::to_string)
        .collect::<Vec<_>>()
        .join(",");
    eprintln!(
        "{} kernels × {} ({archs_text}) in `{}`",
        kernels.len(),
        archs.len(),
        root.display()
    );

    // Entries of the previous format are rewritten packed before anything else looks at the cache: carried-over
    // tuning and the unused-entry sweep then see them at their current keys.
    if !p.check {
        let upgraded = cache.upgrade()?;
        if upgraded > 0 {
            eprintln!(
                "{upgraded} entries of the previous cache format rewritten as packed entries in `{}`",
                cache.root.display()
            );
        }
    }
    let needed: BTreeSet<PathBuf> = kernels
        .iter()
        .flat_map(|k| {
            archs
                .iter()
                .map(move |&a| KeyInputs::of(k, a, &families::kernel_generator(k, a)))
        })
        // Under --check, a needed entry of the previous format is reported as such, not as unused.
        .flat_map(|inputs| {
            let old = p.check.then(|| cache.legacy_dir(&inputs));
            std::iter::once(cache.entry_dir(&inputs)).chain(old)
        })
        .collect();
    let unused: Vec<PathBuf> = cache
        .entry_dirs()
        .into_iter()
        .filter(|d| !needed.contains(d))
        .collect();

    if p.check {
        let nvrtc = match p.rebuild {
            true => Some(crate::nvrtc::load().map_err(|e| {
                anyhow::anyhow!(
                    "--rebuild compiles every variant again: {e} ({})",
                    crate::nvrtc::INSTALL_HINT
                )
            })?),
            false => None,
        };
        let mut bad = 0;
        for k in &kernels {
            for &arch in &archs {
                let inputs = KeyInputs::of(k, arch, &families::kernel_generator(k, arch));
                match cache.lookup(&inputs) {
                    Lookup::Hit(entry) if cache.is_legacy(&entry) => {
                        bad += 1;
                        eprintln!(
                            "old format: `{}` on {arch} (`{}`) is of the previous cache format, unpacked; \
                             `cargo optiml prepare` rewrites it",
                            k.name,
                            entry.dir.display()
                        );
                    }
                    Lookup::Hit(entry) => {
                        // Derived text is checked like the rest: a pull request cannot say one thing in the
                        // report and hold another in the manifest.
                        if !crate::cache::report_is_current(&entry, families::tuned_for) {
                            bad += 1;
                            eprintln!(
                                "stale report: `{}` on {arch}: `{}` is not what the entry's manifest and logs \
                                 say; `cargo optiml prepare` rewrites it",
                                k.name,
                                entry.dir.join("report.md").display()
                            );
                        }
                        let Some(nvrtc) = nvrtc else { continue };
                        let wrong = crate::migrate::rederive(nvrtc, k, arch, &entry)?;
                        if !wrong.is_empty() {
                            bad += 1;
                            eprintln!(
                                "differs: `{}` on {arch} (`{}`): {}",
                                k.name,
                                entry.dir.display(),
                                wrong.join("; ")
                            );
                        }
                    }
                    Lookup::Miss => {
                        bad += 1;
                        let earlier = crate::migrate::earlier_tuned(&cache, &inputs).is_some();
                        eprintln!(
                            "missing: `{}` ({}:{}) on {arch}{}",
                            k.name,
                            k.file.display(),
                            k.line,
                            if earlier {
                                " (an earlier generator's tuned entry is here: `cargo optiml prepare` carries over \
                                 the variants it compiles to the same machine code)"
                            } else {
                                ""
                            }
                        );
                    }
                    Lookup::Corrupt { reason, .. } => {
                        bad += 1;
                        eprintln!("damaged: `{}` on {arch}: {reason}", k.name);
                    }
                    Lookup::Salvaged {
                        entry,
                        reason,
                        lost,
                    } => {
                        bad += 1;
                        eprintln!(
                            "damaged: `{}` on {arch}: {reason}; `prepare` keeps its {} verified variant(s) and \
                             loses {}",
                            k.name,
                            entry.manifest.variants.len(),
                            lost.join("; ")
                        );
                    }
                }
            }
        }
        for d in &unused {
            eprintln!(
                "warning: unused entry `{}` (`cargo optiml prepare` removes it)",
                d.display()
            );
        }
        if bad > 0 {
            eprintln!(
                "error: {bad} entries missing, damaged, of the previous format, with a stale report or not what their \
                 records re-derive to in `{}`; run `cargo optiml prepare --arch {archs_text}{}` and commit it",
                cache.root.display(),
                place_args(&p.place)
            );
            return Ok(false);
        }
        eprintln!(
            "ok: `{}` holds every kernel for {archs_text}{}",
            cache.root.display(),
            if p.rebuild {
                ", each variant exactly what its record re-derives to"
            } else {
                ""
            }
        );
        return Ok(true);
    }

    carry_tuned(&cache, &kernels, &archs)?;
    // What the workspace's builds already generated (or their search tuned) in `target/optiml/`, then what the
    // per-user cache and optiml's pre-tuned cache hold, is verified like any entry and copied, not generated
    // again (a tuned entry there replaces an untuned one here).
    let built = Cache::new(root.join("target").join("optiml"));
    let mut read = vec![cache.clone()];
    for dir in [
        Some(built.root.clone()),
        targets::user_cache_dir(),
        targets::pretuned_dir(),
    ]
    .into_iter()
    .flatten()
    {
        let listed = read.iter().any(|c| targets::same_folder(&c.root, &dir));
        if dir.is_dir() && !listed {
            read.push(Cache::new(dir));
        }
    }
    let policy = Policy {
        read,
        write: cache.clone(),
        offline: false,
    };
    let mut warnings = Vec::new();
    let resolved = engine::resolve(&kernels, &archs, &policy, &mut warnings);
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let mut resolved = resolved.map_err(|e: Error| anyhow::anyhow!(e.render()))?;
    let mut adopted: BTreeMap<PathBuf, usize> = BTreeMap::new();
    for r in resolved.iter_mut() {
        if let Origin::Cache(from) = &r.origin
            && *from != cache.root
        {
            *adopted.entry(from.clone()).or_default() += 1;
            r.entry = cache.adopt(&r.entry)?;
            r.origin = Origin::Cache(cache.root.clone());
        }
    }
    for (from, n) in &adopted {
        eprintln!("{n} entries copied from `{}`", from.display());
    }
    for d in &unused {
        cache.remove(d)?;
    }
    // Reports are derived text: bring those written by an older generator up to date.
    let mut refreshed = 0;
    for r in resolved.iter().filter(|r| r.origin != Origin::Generated) {
        refreshed += usize::from(crate::cache::refresh_report(&r.entry, families::tuned_for)?);
    }
    if refreshed > 0 {
        eprintln!("{refreshed} report.md files rewritten from their manifests");
    }
    let generated = resolved
        .iter()
        .filter(|r| r.origin == Origin::Generated)
        .count();
    eprintln!(
        "{} entries: {} reused, {generated} generated; {} unused removed.\nCommit `{}` to version control.",
        resolved.len(),
        resolved.len() - generated,
        unused.len(),
        cache.root.display()
    );
    Ok(true)
}

/// Carries the tuned variants of earlier generators' entries over to the current keys where the current
/// generator compiles them to the same machine code ([`crate::migrate`]), one kernel × architecture per core,
/// before `prepare` generates defaults for what is still missing.
fn carry_tuned(cache: &Cache, kernels: &[scan::FoundKernel], archs: &[Arch]) -> anyhow::Result<()> {
    // Only misses can be carried over to; `carry_over` finds (and verifies) the earlier entry itself.
    let jobs: Vec<(&scan::FoundKernel, Arch)> = kernels
        .iter()
        .flat_map(|k| archs.iter().map(move |&a| (k, a)))
        .filter(|&(k, arch)| {
            let inputs = KeyInputs::of(k, arch, &families::kernel_generator(k, arch));
            matches!(cache.lookup(&inputs), Lookup::Miss)
        })
        .collect();
    if jobs.is_empty() {
        return Ok(());
    }
    // Without NVRTC nothing can be compared; generating the misses then fails with the error that says how to
    // fix it.
    let Ok(nvrtc) = crate::nvrtc::load() else {
        return Ok(());
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len());
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(kernel, arch)) = jobs.get(i) else {
                        break;
                    };
                    let generator = families::kernel_generator(kernel, arch);
                    let r = crate::migrate::carry_over(nvrtc, cache, kernel, arch, &generator);
                    if let Ok(mut all) = results.lock() {
                        all.push((i, r));
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(i, _)| *i);
    let (shape, flag) = (
        |s: &Option<[u64; 4]>| match s {
            Some([b, m, n, k]) => format!("{b}×{m}×{n}×{k}"),
            None => "every shape".into(),
        },
        |s: &Option<[u64; 4]>| match s {
            Some([b, m, n, k]) => format!(" --shape {b}x{m}x{n}x{k}"),
            None => String::new(),
        },
    );
    for (i, r) in results {
        let (kernel, arch) = jobs[i];
        let Some(c) = r? else { continue };
        eprintln!(
            "{} `{}` on {arch}: {} of {} tuned variants compile to the same machine code, from `{}`",
            if c.kept.is_empty() {
                "nothing carried over for"
            } else {
                "carried over"
            },
            kernel.name,
            c.kept.len(),
            c.kept.len() + c.dropped.len(),
            c.from.display()
        );
        for (s, why) in &c.dropped {
            eprintln!(
                "  left behind: {}: {why}; `cargo optiml tune --kernel {} --arch {arch}{}` tunes it again",
                shape(s),
                kernel.name,
                flag(s)
            );
        }
        if let Some(why) = &c.defaults_failed {
            eprintln!(
                "  the other shape buckets keep no default (the nearest carried variant serves them): {why}"
            );
        }
    }
    Ok(())
}

/// Folders under `root` (itself included) holding a `Cargo.toml` and a `build.rs` that calls optiml-build.
fn optiml_packages(root: &std::path::Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let build = dir.join("build.rs");
        if dir.join("Cargo.toml").is_file()
            && build.is_file()
            && crate::fs::read_to_string(&build)?.contains("optiml_build")
        {
            out.push(dir.clone());
        }
        for path in crate::fs::read_dir(&dir)? {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if path.is_dir() && !name.starts_with('.') && name != "target" {
                stack.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    /// `transforms --experts` lists every expert, a user's beside the built-in ones, and says how each part of
    /// the LLM path is set up.
    #[test]
    fn the_experts_are_documented_with_the_router_the_settings_and_the_replay() {
        let mut user = std::collections::BTreeMap::new();
        user.insert(
            "stencils".to_string(),
            crate::llm::experts::ExpertSettings {
                description: "stencils and convolutions over grids".into(),
                prompt: "Tile with halos.".into(),
            },
        );
        let experts = crate::llm::experts::with_user(&user);
        let text = super::experts_text(&experts);
        for e in crate::llm::experts::builtin() {
            assert!(text.contains(&format!("| {} |", e.name)), "{}", e.name);
        }
        for said in [
            "| stencils | stencils and convolutions over grids |",
            "**router**",
            "top_k",
            "gumbel_tau",
            "api_key_env",
            "`replay = \"auto\"`",
            "\"only\"",
            "KEEP or DISCARD",
            "seeds from a user's `.cu` file",
            "seed = \"kernels/f.cu:function\"",
            "Builder::cuda_files",
            "join the search\n  as roots",
        ] {
            assert!(text.contains(said), "{said}: {text}");
        }
    }

    #[test]
    fn analyze_names_the_kernels_that_have_logs() {
        use super::no_log_message;
        let dirs = [std::path::PathBuf::from("/repo/.optiml")];
        let m = no_log_message("p99", &dirs, vec!["p98".into(), "p23".into(), "p98".into()]);
        assert!(m.contains("kernels with search logs: p23, p98."), "{m}");
        let m = no_log_message("p99", &dirs, Vec::new());
        assert!(m.contains("no kernel has a search log there"), "{m}");
    }

    #[test]
    fn explain_names_the_dimensions_a_signature_needs() {
        let program = |text: &str| match optiml_spec::parse(text).unwrap().family {
            optiml_spec::Family::Tensor(p) => p,
            other => panic!("{other:?}"),
        };
        let names = |text: &str| -> Vec<String> {
            let p = program(text);
            crate::families::needed_dims(&p)
                .into_iter()
                .map(|d| p.dims[d].name.clone())
                .collect()
        };
        // Softmax: x[r, c] has two unknowns; given c, its length gives r.
        assert_eq!(names("softmax over the last axis"), ["c"]);
        // A map and a broadcast multiply: every length determines its dimension.
        assert!(names("selu").is_empty());
        assert!(names("diag(A) @ B").is_empty());
        // A reduction over a middle axis: y[d0, d2] and x[d0, d1, d2] need one of the three (y's length gives
        // d0·d2 only with one of them, then x's gives d1).
        assert_eq!(names("sum over dim 1 of a 3-D tensor").len(), 1);
    }

    /// `explain` states the ABI a seed is written against, for the programs that take one.
    #[test]
    fn explain_states_the_seed_abi() {
        let explain = |text: &str| crate::families::explain(&optiml_spec::parse(text).unwrap());
        let softmax = explain("softmax over the last axis, f32");
        assert!(
            softmax.contains(
                "extern \"C\" __global__ void function(const float* in0, float* out0, long long n0, long long n1)"
            ),
            "{softmax}"
        );
        assert!(explain("y = x * s").contains("float* out0, long long n0, float p0)"));
        // A 16-bit program's floats are their raw bits, with the conversions named.
        let relu16 = explain("relu, bf16");
        assert!(
            relu16.contains(
                "void function(const unsigned short* in0, unsigned short* out0, long long n0)"
            ) && relu16.contains("optiml_p::bf16_to_f32"),
            "{relu16}"
        );
        assert!(!explain("matmul, f32").contains("seed kernel"));
    }
}
