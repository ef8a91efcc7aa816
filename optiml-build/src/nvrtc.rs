//! Finding NVRTC, and compiling a candidate's CUDA source to PTX + CUBIN with the ptxas resource report.
//!
//! cudarc loads NVRTC by bare library name and panics when it is missing, and it knows no pip folders. So we look
//! for the library ourselves (like prost looks for `protoc`), load it by absolute path (its `libnvrtc-builtins`
//! first, which NVRTC itself opens by bare name), and only then let cudarc resolve the same soname, which the
//! dynamic loader answers with the library already loaded. `LD_LIBRARY_PATH` set inside a running process has
//! no effect, hence the explicit loading.

use optiml_runtime::Arch;
use optiml_spec::env;
use std::ffi::{CString, c_char};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The NVRTC release optiml pins for PTX and CUBIN that are cached or shipped: the H200's driver (580, CUDA 13.0)
/// rejects PTX from NVRTC 13.5, and 13.0's loads on every driver from 580 on. Part of every cache key.
pub const PINNED: NvrtcVersion = NvrtcVersion {
    major: 13,
    minor: 0,
};

/// The pip command that installs the pinned NVRTC on a machine without a CUDA toolkit.
pub const INSTALL_HINT: &str = "pip install nvidia-cuda-nvrtc==13.0.88 (then set OPTIML_NVRTC to \
    <site-packages>/nvidia/cu13/lib/libnvrtc.so.13), or install the CUDA 13.0 toolkit and set CUDA_HOME";

/// An NVRTC version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NvrtcVersion {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
}

impl fmt::Display for NvrtcVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Why NVRTC could not be used.
#[derive(Clone, Debug, thiserror::Error)]
pub enum NvrtcError {
    /// No library was found.
    #[error("NVRTC was not found; searched: {}", searched_list(.searched))]
    NotFound {
        /// Every place looked at, in order.
        searched: Vec<String>,
    },
    /// A library was found but could not be loaded.
    #[error("NVRTC at `{}` could not be loaded: {reason}", path.display())]
    Load {
        /// The library.
        path: PathBuf,
        /// The loader's message.
        reason: String,
    },
    /// A library of another release than the pinned one.
    #[error("NVRTC {found} at `{}` is not the pinned {PINNED}: its PTX may not load on the drivers the cache targets", path.display())]
    Version {
        /// What was found.
        found: NvrtcVersion,
        /// Where.
        path: PathBuf,
    },
}

fn searched_list(s: &[String]) -> String {
    s.join(", ")
}

/// A loaded NVRTC.
#[derive(Clone, Debug)]
pub struct Nvrtc {
    /// The library that was loaded (or the bare name the system loader resolved).
    pub path: PathBuf,
    /// Its version.
    pub version: NvrtcVersion,
}

/// Finds and loads NVRTC once per process: `OPTIML_NVRTC`, then `CUDA_HOME`/`CUDA_PATH`, `/usr/local/cuda`, the
/// pip wheel's folder in the usual site-packages, then in the site folders the `python3` on `PATH` reports, then
/// the system loader.
///
/// # Errors
/// [`NvrtcError::NotFound`] listing what was searched, [`NvrtcError::Load`], or [`NvrtcError::Version`] when the
/// library is not the pinned release.
pub fn load() -> Result<&'static Nvrtc, NvrtcError> {
    static LOADED: OnceLock<Result<Nvrtc, NvrtcError>> = OnceLock::new();
    LOADED
        .get_or_init(load_uncached)
        .as_ref()
        .map_err(Clone::clone)
}

/// The candidate library paths, in search order.
pub fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = env::var_os(env::OPTIML_NVRTC) {
        let p = PathBuf::from(p);
        if p.is_dir() {
            out.push(p.join("libnvrtc.so.13"));
            out.push(p.join("lib").join("libnvrtc.so.13"));
        } else {
            out.push(p);
        }
    }
    let mut roots: Vec<PathBuf> = env::CUDA_ROOTS
        .iter()
        .filter_map(|v| env::var_os(v))
        .map(PathBuf::from)
        .collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    for root in roots {
        for lib in ["lib64", "lib", "targets/x86_64-linux/lib"] {
            out.push(root.join(lib).join("libnvrtc.so.13"));
        }
    }
    let mut prefixes: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .iter()
        .filter_map(|v| env::var_os(v))
        .map(PathBuf::from)
        .collect();
    if let Some(home) = env::var_os("HOME") {
        prefixes.push(PathBuf::from(home).join(".local"));
    }
    prefixes.extend(["/usr/local", "/usr"].map(PathBuf::from));
    for prefix in prefixes {
        let lib = prefix.join("lib");
        for python in crate::fs::read_dir(&lib).unwrap_or_default() {
            let is_python = python
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("python3"));
            if is_python {
                for site in ["site-packages", "dist-packages"] {
                    out.push(python.join(site).join("nvidia/cu13/lib/libnvrtc.so.13"));
                }
            }
        }
    }
    out
}

/// Where the wheel's library would be in the site folders `python` reports (`site.getsitepackages()` and the
/// user site): a plain `pip install nvidia-cuda-nvrtc` into a Python outside the usual prefixes (pyenv, a
/// framework build) lands there. Empty when there is no such Python or it fails.
fn python_site_candidates(mut python: std::process::Command) -> Vec<PathBuf> {
    const SITES: &str =
        "import site\nfor p in site.getsitepackages() + [site.getusersitepackages()]: print(p)";
    let Ok(out) = python
        .args(["-c", SITES])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    if !out.status.success() {
        return Vec::new();
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| Path::new(l).join("nvidia/cu13/lib/libnvrtc.so.13"))
        .collect()
}

fn load_uncached() -> Result<Nvrtc, NvrtcError> {
    let mut searched = Vec::new();
    // Asking Python costs a process start, so only once the fixed places have failed.
    let late = || python_site_candidates(std::process::Command::new("python3"));
    for path in candidates()
        .into_iter()
        .chain(std::iter::once_with(late).flatten())
    {
        if searched.contains(&path.display().to_string()) {
            continue;
        }
        searched.push(path.display().to_string());
        if path.is_file() {
            return load_path(&path);
        }
    }
    searched.push("the system loader (libnvrtc.so.13, libnvrtc.so)".into());
    // SAFETY: probing only dlopens and drops library handles.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return finish(PathBuf::from("libnvrtc.so (system loader)"));
    }
    Err(NvrtcError::NotFound { searched })
}

fn load_path(path: &Path) -> Result<Nvrtc, NvrtcError> {
    let load_err = |reason: String| NvrtcError::Load {
        path: path.to_path_buf(),
        reason,
    };
    if let Some(dir) = path.parent() {
        for builtins in crate::fs::read_dir(dir).unwrap_or_default() {
            let is_builtins = builtins.file_name().is_some_and(|n| {
                n.to_string_lossy().starts_with("libnvrtc-builtins.so")
                    && !n.to_string_lossy().contains(".alt.")
            });
            if is_builtins {
                // SAFETY: loading NVIDIA's builtins library runs no initialisers with preconditions.
                let lib = unsafe { libloading::Library::new(&builtins) }
                    .map_err(|e| load_err(e.to_string()))?;
                // Kept loaded for the life of the process, so NVRTC's own dlopen of the bare name finds it.
                std::mem::forget(lib);
            }
        }
    }
    // SAFETY: as above; the handle is kept so cudarc's later dlopen of the soname resolves to this library.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| load_err(e.to_string()))?;
    std::mem::forget(lib);
    // SAFETY: probing only dlopens and drops library handles.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(load_err(
            "loaded, but its soname is not one cudarc resolves (expected libnvrtc.so.13)".into(),
        ));
    }
    finish(path.to_path_buf())
}

fn finish(path: PathBuf) -> Result<Nvrtc, NvrtcError> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (checked above); the out-pointers are valid.
    let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if status != cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(NvrtcError::Load {
            path,
            reason: format!("nvrtcVersion failed: {status:?}"),
        });
    }
    let version = NvrtcVersion {
        major: major as u32,
        minor: minor as u32,
    };
    if version != PINNED {
        return Err(NvrtcError::Version {
            found: version,
            path,
        });
    }
    Ok(Nvrtc { path, version })
}

/// Registers, spills and memory of one compiled kernel, from ptxas' `-v` report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Resources {
    /// Registers per thread.
    pub registers: u32,
    /// Bytes spilled to local memory (stores).
    pub spill_stores: u32,
    /// Bytes reloaded from spills.
    pub spill_loads: u32,
    /// Stack frame bytes.
    pub stack_frame: u32,
    /// Static shared memory bytes.
    pub shared_bytes: u32,
}

impl Resources {
    /// Parses ptxas' report (the NVRTC log of a `--ptxas-options=-v` compile). A module with several entry points
    /// (a matmul's tiled kernel, its matrix-vector kernel and split-K reduction) reports its largest register and
    /// shared-memory use, the tiled kernel's, and the spills and stack of all of them together, so that a spill
    /// anywhere counts.
    pub fn parse(log: &str) -> Self {
        let mut r = Resources::default();
        let number_before = |line: &str, unit: &str| -> Option<u32> {
            let at = line.find(unit)?;
            line[..at].split_whitespace().last()?.parse().ok()
        };
        for line in log.lines() {
            if let Some(v) = number_before(line, " registers") {
                r.registers = r.registers.max(v);
            }
            if let Some(v) = number_before(line, " bytes smem") {
                r.shared_bytes = r.shared_bytes.max(v);
            }
            if let Some(v) = number_before(line, " bytes stack frame") {
                r.stack_frame += v;
            }
            if let Some(v) = number_before(line, " bytes spill stores") {
                r.spill_stores += v;
            }
            if let Some(v) = number_before(line, " bytes spill loads") {
                r.spill_loads += v;
            }
        }
        r
    }
}

/// What NVRTC produced for one source and architecture.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The PTX (targets `arch`; JIT-able on newer GPUs).
    pub ptx: String,
    /// The CUBIN for `arch`.
    pub cubin: Vec<u8>,
    /// NVRTC's log, including ptxas' report.
    pub log: String,
    /// The parsed report.
    pub resources: Resources,
    /// The options used.
    pub options: Vec<String>,
}

/// A failed compilation, with the log.
#[derive(Clone, Debug, thiserror::Error)]
#[error("NVRTC failed ({status}) with options `{}`:\n{log}", options.join(" "))]
pub struct CompileFailure {
    /// NVRTC's status.
    pub status: String,
    /// The options used.
    pub options: Vec<String>,
    /// NVRTC's log.
    pub log: String,
}

/// The NVRTC options for `arch`: CUBIN and PTX for that target, ptxas' verbose report, C++17.
pub fn options(arch: Arch) -> Vec<String> {
    vec![
        format!("-arch={arch}"),
        "--std=c++17".into(),
        "--ptxas-options=-v".into(),
        "-default-device".into(),
    ]
}

/// Compiles `source` for `arch`. The [`Nvrtc`] argument is proof that [`load`] succeeded: cudarc panics on a
/// missing library, so no call reaches it before that.
///
/// # Errors
/// [`CompileFailure`] with NVRTC's log.
pub fn compile(
    _nvrtc: &Nvrtc,
    name: &str,
    source: &str,
    arch: Arch,
) -> Result<Compiled, CompileFailure> {
    use cudarc::nvrtc::{result, sys};
    let options = options(arch);
    let fail = |status: String, log: String| CompileFailure {
        status,
        options: options.clone(),
        log,
    };
    let src = CString::new(source).map_err(|_| {
        fail(
            "invalid source".into(),
            "the source holds a NUL byte".into(),
        )
    })?;
    let cname = CString::new(name).map_err(|_| fail("invalid name".into(), String::new()))?;
    // Every shared header, in memory (`crate::cuda`): NVRTC reads the ones the source includes.
    let header_texts: Vec<CString> = crate::cuda::HEADERS
        .iter()
        .map(|h| CString::new(h.text))
        .collect::<Result<_, _>>()
        .map_err(|_| fail("invalid header".into(), "a header holds a NUL byte".into()))?;
    let header_names: Vec<CString> = crate::cuda::HEADERS
        .iter()
        .map(|h| CString::new(h.name))
        .collect::<Result<_, _>>()
        .map_err(|_| {
            fail(
                "invalid header".into(),
                "a header name holds a NUL byte".into(),
            )
        })?;
    let texts: Vec<*const c_char> = header_texts.iter().map(|c| c.as_ptr()).collect();
    let names: Vec<*const c_char> = header_names.iter().map(|c| c.as_ptr()).collect();
    let mut prog = std::mem::MaybeUninit::<sys::nvrtcProgram>::uninit();
    // SAFETY: every pointer is a live NUL-terminated string that outlives the program (`src`, `cname` and the
    // header vectors are dropped after `prog` is destroyed below); the two arrays have `texts.len()` entries.
    let prog = unsafe {
        sys::nvrtcCreateProgram(
            prog.as_mut_ptr(),
            src.as_ptr(),
            cname.as_ptr(),
            texts.len() as i32,
            texts.as_ptr(),
            names.as_ptr(),
        )
        .result()
        .map(|()| prog.assume_init())
    }
    .map_err(|e| fail(format!("{e:?}"), String::new()))?;
    // Every path below destroys `prog` exactly once.
    let out = (|| {
        // SAFETY: `prog` is a live program; the options are valid C strings.
        let compiled = unsafe { result::compile_program(prog, &options) };
        // SAFETY: as above.
        let log = unsafe { result::get_program_log(prog) }
            .map(|l| c_chars_to_string(&l))
            .unwrap_or_default();
        if let Err(e) = compiled {
            return Err(fail(format!("{e:?}"), log));
        }
        // SAFETY: the program compiled.
        let ptx =
            unsafe { result::get_ptx(prog) }.map_err(|e| fail(format!("{e:?}"), log.clone()))?;
        let mut size = 0usize;
        // SAFETY: the program compiled for a real architecture, so it has a CUBIN; `size` is a valid out-pointer.
        let status = unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) };
        if status != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
            return Err(fail(format!("nvrtcGetCUBINSize: {status:?}"), log));
        }
        let mut cubin = vec![0u8; size];
        // SAFETY: `cubin` has exactly the size NVRTC reported.
        let status = unsafe { sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast::<c_char>()) };
        if status != sys::nvrtcResult::NVRTC_SUCCESS {
            return Err(fail(format!("nvrtcGetCUBIN: {status:?}"), log));
        }
        let resources = Resources::parse(&log);
        Ok(Compiled {
            ptx: c_chars_to_string(&ptx),
            cubin,
            log,
            resources,
            options: options.clone(),
        })
    })();
    // SAFETY: `prog` is live and not used after this.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The compile checks every kernel generator's tests share.
#[cfg(test)]
pub(crate) mod testing {
    /// NVRTC: the compile checks fail without it, as `nvrtc_compile.rs` does (`.ci/run` sets `OPTIML_NVRTC`), so a
    /// machine without it cannot pass them quietly.
    pub(crate) fn nvrtc() -> &'static crate::nvrtc::Nvrtc {
        crate::nvrtc::load().unwrap_or_else(|e| {
            panic!(
                "NVRTC not found ({e}); set OPTIML_NVRTC ({})",
                crate::nvrtc::INSTALL_HINT
            )
        })
    }

    /// Compiles every job on all cores; one line per failure (error, spill, stack frame).
    fn compile_all(nvrtc: &crate::nvrtc::Nvrtc, jobs: &[(String, String)]) -> Vec<String> {
        let arch = optiml_runtime::Arch::new(9, 0);
        let workers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    s.spawn(move || {
                        let mut bad = Vec::new();
                        for (name, source) in jobs.iter().skip(w).step_by(workers) {
                            match crate::nvrtc::compile(nvrtc, "program.cu", source, arch) {
                                Err(e) => bad.push(format!("{name}: {e}")),
                                Ok(out) => {
                                    let r = out.resources;
                                    let warnings = out.log.matches("warning").count();
                                    eprintln!(
                                        "{name}: {} registers, {} B smem, {warnings} warnings",
                                        r.registers, r.shared_bytes
                                    );
                                    if warnings > 0 {
                                        bad.push(format!("{name}: warnings\n{}", out.log));
                                    }
                                    if r.spill_stores + r.spill_loads > 0 || r.stack_frame > 0 {
                                        bad.push(format!("{name}: {r:?}"));
                                    }
                                }
                            }
                        }
                        bad
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("compile worker"))
                .collect()
        })
    }

    /// Compiles every job (name, source) for sm_90 and fails naming each that does not compile cleanly, spills or
    /// keeps a stack frame.
    pub(crate) fn assert_compiles(jobs: Vec<(String, String)>) {
        let nvrtc = nvrtc();
        // Schedules that differ only in launch knobs share a source but for the `@generated` line that describes
        // them: compile each kernel once.
        let mut seen = std::collections::HashSet::new();
        let jobs: Vec<(String, String)> = jobs
            .into_iter()
            .filter(|(_, s)| {
                seen.insert(s.split_once('\n').map_or("", |(_, rest)| rest).to_string())
            })
            .collect();
        let started = std::time::Instant::now();
        let bad = compile_all(nvrtc, &jobs);
        assert!(
            bad.is_empty(),
            "{} of {} failed:\n{}",
            bad.len(),
            jobs.len(),
            bad.join("\n")
        );
        eprintln!(
            "{} sources compiled in {:.1} s",
            jobs.len(),
            started.elapsed().as_secs_f64()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Python outside the usual prefixes (pyenv's, say) reports its site folders: the wheel's library there is
    /// a candidate. A shell script stands in for it (run by `sh`, not executed, so no other test's fork can hold
    /// it open for writing); a missing or failing Python gives nothing.
    #[test]
    fn the_running_pythons_site_folders_are_searched() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("pyenv/lib/python3.11/site-packages");
        let script = |name: &str, body: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, body).unwrap();
            let mut cmd = std::process::Command::new("sh");
            cmd.arg(path);
            cmd
        };
        let python = script(
            "python3",
            format!("echo {}\necho /home/u/.local/site\n", site.display()),
        );
        assert_eq!(
            python_site_candidates(python),
            [
                site.join("nvidia/cu13/lib/libnvrtc.so.13"),
                PathBuf::from("/home/u/.local/site/nvidia/cu13/lib/libnvrtc.so.13")
            ]
        );
        let missing = std::process::Command::new(dir.path().join("no-python"));
        assert!(python_site_candidates(missing).is_empty());
        let failing = script("failing", "echo /x\nexit 1\n".into());
        assert!(python_site_candidates(failing).is_empty());
    }

    #[test]
    fn parses_the_ptxas_report() {
        let log = "ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
                   ptxas         .     8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
                   ptxas info    : Used 128 registers, used 1 barriers, 8192 bytes smem, 360 bytes cmem[0]\n";
        let one = Resources {
            registers: 128,
            spill_stores: 4,
            spill_loads: 12,
            stack_frame: 8,
            shared_bytes: 8192,
        };
        assert_eq!(Resources::parse(log), one);
        // A second, smaller entry point: the largest use, and every spill.
        let two = format!(
            "{log}ptxas info    : Compiling entry function 'g' for 'sm_90'\n\
             ptxas         .     0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n\
             ptxas info    : Used 64 registers, used 1 barriers, 2048 bytes smem, 360 bytes cmem[0]\n"
        );
        assert_eq!(
            Resources::parse(&two),
            Resources {
                spill_stores: 12,
                spill_loads: 20,
                ..one
            }
        );
    }

    #[test]
    fn options_name_the_target() {
        assert_eq!(options(Arch::new(9, 0))[0], "-arch=sm_90");
        assert_eq!(options(Arch::specific(9, 0))[0], "-arch=sm_90a");
    }
}
