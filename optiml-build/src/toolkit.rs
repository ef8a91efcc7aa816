//! The CUDA toolkit, where one is installed: a crate's own `.cu` files (host launchers and kernels an application
//! already has) compiled with nvcc through `cc`, for the architectures optiml builds for ([`crate::Builder::cuda_files`]).
//! optiml's own kernels, seeds included, never need it: they compile with NVRTC, so that a cache entry can be
//! made again, and checked, on any machine with NVRTC alone.

use optiml_runtime::Arch;
use std::path::PathBuf;

/// nvcc could not be used.
#[derive(Debug, thiserror::Error)]
#[error("no usable nvcc (tried `{}`{}): {reason}", .nvcc.display(), if *.from_env { ", from NVCC" } else { " on PATH" })]
pub struct NvccError {
    /// The program tried.
    pub nvcc: PathBuf,
    /// Whether it came from the `NVCC` variable.
    pub from_env: bool,
    /// What went wrong running `nvcc --version`.
    pub reason: String,
}

/// The nvcc `cc` will run: the `NVCC` variable (cc's own), else `nvcc` on `PATH`, checked by running
/// `nvcc --version`; the first line of its answer with the path.
///
/// # Errors
/// [`NvccError`] when it does not run or fails.
pub fn find_nvcc() -> Result<(PathBuf, String), NvccError> {
    let from_env = optiml_spec::env::var_os("NVCC");
    let nvcc = from_env
        .clone()
        .map_or_else(|| PathBuf::from("nvcc"), PathBuf::from);
    let failed = |reason: String| NvccError {
        nvcc: nvcc.clone(),
        from_env: from_env.is_some(),
        reason,
    };
    let out = std::process::Command::new(&nvcc)
        .arg("--version")
        .output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(format!(
            "`--version` exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let release = text
        .lines()
        .find(|l| l.contains("release"))
        .unwrap_or("")
        .trim()
        .to_string();
    Ok((nvcc, release))
}

/// nvcc's flags for `archs`: machine code for each, and PTX of the newest, which the driver compiles for GPUs
/// newer than all of them (as optiml's own entries carry PTX).
pub fn gencode_flags(archs: &[Arch]) -> Vec<String> {
    let number = |a: &Arch| a.to_string().trim_start_matches("sm_").to_string();
    let mut flags: Vec<String> = Vec::new();
    for a in archs {
        let flag = format!("-gencode=arch=compute_{0},code=sm_{0}", number(a));
        if !flags.contains(&flag) {
            flags.push(flag);
        }
    }
    if let Some(newest) = archs.iter().max() {
        flags.push(format!(
            "-gencode=arch=compute_{0},code=compute_{0}",
            number(newest)
        ));
    }
    flags
}

/// A `cc::Build` compiling `files` with nvcc for `archs` (C++17, the CUDA runtime linked statically, as `cc`
/// does by default); the caller adds its own knobs and calls `compile`.
pub fn cuda_build(files: &[PathBuf], archs: &[Arch]) -> cc::Build {
    let mut build = cc::Build::new();
    build.cuda(true).std("c++17").files(files);
    for flag in gencode_flags(archs) {
        build.flag(flag);
    }
    build
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_architecture_gets_machine_code_and_the_newest_ptx() {
        assert_eq!(
            gencode_flags(&[Arch::new(8, 0), Arch::new(9, 0)]),
            [
                "-gencode=arch=compute_80,code=sm_80",
                "-gencode=arch=compute_90,code=sm_90",
                "-gencode=arch=compute_90,code=compute_90"
            ]
        );
        let build = cuda_build(&[PathBuf::from("k.cu")], &[Arch::new(9, 0)]);
        assert!(build.get_files().any(|f| f == std::path::Path::new("k.cu")));
        // An architecture named twice is compiled once.
        assert_eq!(gencode_flags(&[Arch::new(9, 0), Arch::new(9, 0)]).len(), 2);
    }
}
