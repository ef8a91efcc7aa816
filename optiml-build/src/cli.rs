//! `cargo optiml`: the cache outside a build. The binary (`src/bin/cargo-optiml.rs`) only parses arguments.

use crate::cache::{Cache, KeyInputs, Lookup};
use crate::engine::{self, Origin, Policy};
use crate::{DEFAULT_ARCHS, Error, experts, scan, targets};
use clap::{Args, Parser, Subcommand};
use optiml_runtime::Arch;
use optiml_spec::env;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// Cargo's view: `cargo optiml …` runs `cargo-optiml optiml …`.
#[derive(Debug, Parser)]
#[command(name = "cargo", bin_name = "cargo")]
pub enum CargoCli {
    /// optiml's kernel cache.
    Optiml(Optiml),
}

/// `cargo optiml`.
#[derive(Debug, Args)]
#[command(
    version,
    about = "Generate and check optiml's committed kernel cache (.optiml/)"
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
    /// machines without a GPU or NVRTC take them from there. Removes entries no kernel needs any more (only
    /// folders named like entries). With --check, change nothing: exit 1 if an entry is missing or damaged.
    Prepare(Prepare),
}

/// `cargo optiml prepare`.
#[derive(Debug, Args)]
pub struct Prepare {
    /// Verify the committed cache instead of filling it; needs no NVRTC. Exit status 1 when an entry is missing
    /// or damaged; unused entries only warn.
    #[arg(long)]
    pub check: bool,
    /// Architectures, comma separated (default: OPTIML_ARCH, else sm_80,sm_90).
    #[arg(long, value_name = "ARCHS")]
    pub arch: Option<String>,
    /// The workspace or crate to scan (default: the workspace around the current folder).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The cache folder (default: OPTIML_CACHE_DIR, else `DIR/.optiml`).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// Runs a parsed command line; `Ok(false)` means "completed, but the check failed" (exit status 1).
///
/// # Errors
/// Any failure, with context.
pub fn run(cli: CargoCli) -> anyhow::Result<bool> {
    let CargoCli::Optiml(Optiml {
        command: Command::Prepare(p),
    }) = cli;
    prepare(&p)
}

fn prepare(p: &Prepare) -> anyhow::Result<bool> {
    let cwd = std::env::current_dir()?;
    let root = match &p.dir {
        Some(d) => d
            .canonicalize()
            .map_err(|e| anyhow::anyhow!("cannot open `{}`: {e}", d.display()))?,
        None => targets::workspace_root(&cwd),
    };
    let cache = Cache::new(match (&p.cache_dir, env::var_os(env::OPTIML_CACHE_DIR)) {
        (Some(d), _) => d.clone(),
        (None, Some(d)) => PathBuf::from(d),
        (None, None) => root.join(".optiml"),
    });
    let archs: Vec<Arch> = match p.arch.clone().or_else(|| env::var(env::OPTIML_ARCH)) {
        Some(text) => targets::parse_archs(&text, "--arch")?,
        None => DEFAULT_ARCHS.to_vec(),
    };
    // What each package's build script would scan: the packages whose build.rs uses optiml-build.
    let packages = optiml_packages(&root)?;
    let found = scan::scan(&packages)?;
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

    let generator = experts::generator_version();
    let needed: BTreeSet<PathBuf> = kernels
        .iter()
        .flat_map(|k| archs.iter().map(|&a| KeyInputs::of(k, a, &generator)))
        .map(|inputs| cache.entry_dir(&inputs))
        .collect();
    let unused: Vec<PathBuf> = cache
        .entry_dirs()
        .into_iter()
        .filter(|d| !needed.contains(d))
        .collect();

    if p.check {
        let mut bad = 0;
        for k in &kernels {
            for &arch in &archs {
                let inputs = KeyInputs::of(k, arch, &generator);
                match cache.lookup(&inputs) {
                    Lookup::Hit(_) => {}
                    Lookup::Miss => {
                        bad += 1;
                        eprintln!(
                            "missing: `{}` ({}:{}) on {arch}",
                            k.name,
                            k.file.display(),
                            k.line
                        );
                    }
                    Lookup::Corrupt { reason, .. } => {
                        bad += 1;
                        eprintln!("damaged: `{}` on {arch}: {reason}", k.name);
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
                "error: {bad} entries missing or damaged in `{}`; run `cargo optiml prepare --arch {archs_text}` and commit it",
                cache.root.display()
            );
            return Ok(false);
        }
        eprintln!(
            "ok: `{}` holds every kernel for {archs_text}",
            cache.root.display()
        );
        return Ok(true);
    }

    let policy = Policy {
        read: vec![cache.clone()],
        write: cache.clone(),
        offline: false,
    };
    let mut warnings = Vec::new();
    let resolved = engine::resolve(&kernels, &archs, &policy, &mut warnings);
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let resolved = resolved.map_err(|e: Error| anyhow::anyhow!(e.render()))?;
    for d in &unused {
        cache.remove(d)?;
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
