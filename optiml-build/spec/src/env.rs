//! Every environment variable optiml reads, in one place, so the build script can declare each one to cargo
//! (`cargo:rerun-if-env-changed`) and the docs can list them. `std::env::var` is disallowed elsewhere (clippy.toml).

use std::ffi::OsString;

/// Target architectures, comma separated (`sm_80,sm_90`); overrides the GPU found at build time.
pub const OPTIML_ARCH: &str = "OPTIML_ARCH";
/// `1`/`true`: never generate; a cache miss is an error naming the command that fixes it.
pub const OPTIML_OFFLINE: &str = "OPTIML_OFFLINE";
/// The committed cache folder, overriding `<crate>/.optiml` and `<workspace>/.optiml`.
pub const OPTIML_CACHE_DIR: &str = "OPTIML_CACHE_DIR";
/// Path of an NVRTC shared library (`libnvrtc.so.13`), searched before anything else.
pub const OPTIML_NVRTC: &str = "OPTIML_NVRTC";
/// Seconds of search a build may spend on kernels it generates when a GPU is present (`0` turns it off).
pub const OPTIML_BUILD_SEARCH_S: &str = "OPTIML_BUILD_SEARCH_S";
/// CUDA toolkit roots searched for NVRTC, in order.
pub const CUDA_ROOTS: &[&str] = &["CUDA_HOME", "CUDA_PATH"];

/// Every variable above plus the toolkit roots: what a build script must watch.
pub fn watched() -> Vec<&'static str> {
    let mut all = vec![
        OPTIML_ARCH,
        OPTIML_OFFLINE,
        OPTIML_CACHE_DIR,
        OPTIML_NVRTC,
        OPTIML_BUILD_SEARCH_S,
    ];
    all.extend_from_slice(CUDA_ROOTS);
    all
}

/// The variable's value, if set and non-empty.
#[allow(clippy::disallowed_methods)]
pub fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The variable's raw value (paths need not be UTF-8), if set and non-empty.
#[allow(clippy::disallowed_methods)]
pub fn var_os(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// A boolean flag: `1`, `true`, `yes`, `on` (any case) are true; anything else, or unset, is false.
pub fn flag(name: &str) -> bool {
    var(name).is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}
