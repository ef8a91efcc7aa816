//! The build helper's error: what failed, its cause chain, and the command that fixes it.

use crate::cache::CacheError;
use crate::fs::FsError;
use crate::nvrtc::{CompileFailure, INSTALL_HINT, NvrtcError};
use optiml_runtime::{Arch, ArchParseError};
use std::fmt;
use std::path::PathBuf;

/// A kernel variant that is in no cache.
#[derive(Clone, Debug)]
pub struct Miss {
    /// The function's name.
    pub kernel: String,
    /// Where it is declared.
    pub file: PathBuf,
    /// Its line.
    pub line: usize,
    /// The architecture.
    pub arch: Arch,
    /// The cache key.
    pub key: String,
}

impl fmt::Display for Miss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` ({}:{}) on {} (key {})",
            self.kernel,
            self.file.display(),
            self.line,
            self.arch,
            &self.key[..16]
        )
    }
}

fn list(misses: &[Miss]) -> String {
    misses.iter().map(|m| format!("\n  - {m}")).collect()
}

fn archs(misses: &[Miss]) -> String {
    let mut a: Vec<String> = misses.iter().map(|m| m.arch.to_string()).collect();
    a.sort();
    a.dedup();
    a.join(",")
}

/// Why `Builder::compile` or `cargo optiml` failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A variable cargo sets for build scripts is missing.
    #[error(
        "`{var}` is not set: optiml_build::Builder::compile() runs from a build script (build.rs)"
    )]
    NotInBuildScript {
        /// The variable.
        var: &'static str,
    },
    /// Reading the sources failed.
    #[error("failed to scan the sources for #[optiml::kernel]")]
    Scan(#[source] FsError),
    /// A bad architecture name.
    #[error("bad target architecture in `{origin}`")]
    Arch {
        /// Where it came from (`OPTIML_ARCH`, `--arch`).
        origin: String,
        /// The parse error.
        #[source]
        source: ArchParseError,
    },
    /// An on/off variable holds neither.
    #[error("a setting is not on or off")]
    Flag(#[source] optiml_spec::env::FlagError),
    /// Generation is forbidden and kernels are missing from every cache.
    #[error("OPTIML_OFFLINE is set and these kernels are in no cache:{}", list(.misses))]
    Offline {
        /// What is missing.
        misses: Vec<Miss>,
    },
    /// Kernels must be generated and NVRTC is unavailable.
    #[error("these kernels are in no cache and must be generated, but NVRTC is unavailable:{}", list(.misses))]
    Nvrtc {
        /// What is missing.
        misses: Vec<Miss>,
        /// Why NVRTC is unavailable.
        #[source]
        source: NvrtcError,
    },
    /// NVRTC rejected a generated kernel.
    #[error("NVRTC failed to compile kernel `{kernel}` for {arch}")]
    Compile {
        /// The kernel.
        kernel: String,
        /// The architecture.
        arch: Arch,
        /// NVRTC's failure and log.
        #[source]
        source: CompileFailure,
    },
    /// A cache entry could not be written.
    #[error("failed to write the kernel cache")]
    Cache(#[source] CacheError),
    /// The generated Rust could not be written.
    #[error("failed to write the generated Rust")]
    Emit(#[source] FsError),
    /// `optiml.toml` or `[package.metadata.optiml]` is wrong.
    #[error("the optiml settings do not parse")]
    Config(#[source] crate::config::ConfigError),
    /// [`crate::Builder::cuda_files`] found no nvcc to compile the crate's own CUDA files with.
    #[error("the crate's own CUDA files need nvcc")]
    Nvcc(#[source] crate::toolkit::NvccError),
}

impl Error {
    /// The command or setting that fixes this error, if there is one.
    pub fn help(&self) -> Option<String> {
        match self {
            Error::Offline { misses } => Some(format!(
                "run `cargo optiml prepare --arch {}` on a machine with NVRTC and commit `.optiml/`, or unset OPTIML_OFFLINE",
                archs(misses)
            )),
            Error::Nvrtc { misses, .. } => Some(format!(
                "{INSTALL_HINT}; or run `cargo optiml prepare --arch {}` where NVRTC is available and commit `.optiml/`",
                archs(misses)
            )),
            Error::Arch { .. } => Some("write architectures like `OPTIML_ARCH=sm_80,sm_90`".into()),
            Error::Flag(e) => Some(format!("set `{}=1` or `{}=0`, or unset it", e.name, e.name)),
            Error::Compile { .. } => Some(
                "this is a bug in optiml's kernel templates; please report it with the log above"
                    .into(),
            ),
            Error::Config(_) => Some(
                "see the keys `optiml_build::config` documents (`[search]`, `[kernels.<name>]`)"
                    .into(),
            ),
            Error::Nvcc(_) => Some(
                "install the CUDA toolkit, or the wheels `pip install nvidia-cuda-nvcc==13.0.88 \
                 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96` (`scripts/nvcc.sh` \
                 does it), and set NVCC to its `nvcc`; optiml's own kernels and seeds need none of it"
                    .into(),
            ),
            Error::NotInBuildScript { .. } => {
                Some("call it from build.rs, or use `cargo optiml prepare` outside a build".into())
            }
            _ => None,
        }
    }

    /// The message, each cause as `Caused by:`, and the fix, as a build script should print them.
    pub fn render(&self) -> String {
        let mut s = format!("error: {self}");
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            s.push_str(&format!(
                "\n\nCaused by:\n    {}",
                cause.to_string().replace('\n', "\n    ")
            ));
            source = cause.source();
        }
        if let Some(help) = self.help() {
            s.push_str(&format!("\n\nhelp: {help}"));
        }
        s
    }

    /// Prints [`render`](Self::render) to stderr and exits with status 1: no panic, no backtrace.
    pub fn exit(self) -> ! {
        eprintln!("{}", self.render());
        std::process::exit(1)
    }
}
