//! Every environment variable optiml reads, in one place, so the build script can declare each one to cargo
//! (`cargo:rerun-if-env-changed`) and the docs can list them. `std::env::var` is disallowed elsewhere (clippy.toml).

use std::ffi::OsString;

/// Target architectures, comma separated (`sm_80,sm_90`); overrides the GPU found at build time.
pub const OPTIML_ARCH: &str = "OPTIML_ARCH";
/// `1`/`true`: never generate; a cache miss is an error naming the command that fixes it.
pub const OPTIML_OFFLINE: &str = "OPTIML_OFFLINE";
/// The committed cache folder, overriding `<crate>/.optiml` and `<workspace>/.optiml`.
pub const OPTIML_CACHE_DIR: &str = "OPTIML_CACHE_DIR";
/// The per-user cache shared by every crate on the machine, read after the crate's own caches (default
/// `$XDG_CACHE_HOME/optiml`, else `$HOME/.cache/optiml`); `off` (or `0`, `false`, `no`) turns it off.
pub const OPTIML_USER_CACHE: &str = "OPTIML_USER_CACHE";
/// optiml's pre-tuned cache, read last (default: the `.optiml/` of the optiml checkout optiml-build was built
/// from); `off` (or `0`, `false`, `no`) turns it off.
pub const OPTIML_PRETUNED: &str = "OPTIML_PRETUNED";
/// Where the per-user cache lives by default, as the XDG base directory specification says.
pub const XDG_CACHE_HOME: &str = "XDG_CACHE_HOME";
/// The user's home, for `~/.cache` when `XDG_CACHE_HOME` is unset.
pub const HOME: &str = "HOME";
/// Path of an NVRTC shared library (`libnvrtc.so.13`), searched before anything else.
pub const OPTIML_NVRTC: &str = "OPTIML_NVRTC";
/// Seconds of search a build may spend on kernels it generates when a GPU is present (`0` turns it off).
pub const OPTIML_BUILD_SEARCH_S: &str = "OPTIML_BUILD_SEARCH_S";
/// `compute-sanitizer`, which `cargo optiml tune` runs its winners under (default: on `PATH`, else
/// `/usr/local/cuda/bin`). Read by the tuner only, not by builds.
pub const OPTIML_SANITIZER: &str = "OPTIML_SANITIZER";
/// Nsight Compute's `ncu`, for counters in `cargo optiml tune` (default: on `PATH`, else `/usr/local/cuda/bin`).
/// Read by the tuner only.
pub const OPTIML_NCU: &str = "OPTIML_NCU";
/// The host memory, in MiB, one evaluation job may take (default: half of RAM, at most 16 GiB). Read by the
/// evaluation worker only.
pub const OPTIML_WORKER_HOST_MB: &str = "OPTIML_WORKER_HOST_MB";
/// CUDA toolkit roots searched for NVRTC, in order.
pub const CUDA_ROOTS: &[&str] = &["CUDA_HOME", "CUDA_PATH"];

/// Every variable above plus the toolkit roots: what a build script must watch.
pub fn watched() -> Vec<&'static str> {
    let mut all = vec![
        OPTIML_ARCH,
        OPTIML_OFFLINE,
        OPTIML_CACHE_DIR,
        OPTIML_USER_CACHE,
        OPTIML_PRETUNED,
        XDG_CACHE_HOME,
        HOME,
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

/// A boolean flag that is set to something else than its spellings: the variable and what it held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlagError {
    /// The variable.
    pub name: &'static str,
    /// Its value.
    pub value: String,
}

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A long value is cut: the point is which variable, not an echo of whatever it holds.
        let shown: String = self.value.chars().take(40).collect();
        let cut = if shown.len() < self.value.len() {
            "…"
        } else {
            ""
        };
        write!(
            f,
            "`{}={shown}{cut}` is neither on (1, true, yes, on) nor off (0, false, no, off)",
            self.name
        )
    }
}

impl std::error::Error for FlagError {}

/// A boolean flag: `1`, `true`, `yes`, `on` (any case) are true; `0`, `false`, `no`, `off`, empty or unset are
/// false.
///
/// # Errors
/// [`FlagError`] for any other value: `OPTIML_OFFLINE=ture` must not silently mean off.
pub fn flag(name: &'static str) -> Result<bool, FlagError> {
    flag_value(name, var(name).as_deref())
}

/// [`flag`] of a value.
fn flag_value(name: &'static str, value: Option<&str>) -> Result<bool, FlagError> {
    let Some(v) = value else {
        return Ok(false);
    };
    match v.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "false" | "no" | "off" => Ok(false),
        "1" | "true" | "yes" | "on" => Ok(true),
        _ => Err(FlagError {
            name,
            value: v.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_takes_its_spellings_and_refuses_the_rest() {
        for v in ["1", "true", "YES", " on "] {
            assert_eq!(flag_value(OPTIML_OFFLINE, Some(v)), Ok(true), "{v}");
        }
        for v in ["0", "False", "no", "off"] {
            assert_eq!(flag_value(OPTIML_OFFLINE, Some(v)), Ok(false), "{v}");
        }
        assert_eq!(flag_value(OPTIML_OFFLINE, None), Ok(false));
        for v in ["ture", "2", "y", "enabled"] {
            let e = flag_value(OPTIML_OFFLINE, Some(v)).unwrap_err();
            assert!(
                e.to_string().contains(&format!("OPTIML_OFFLINE={v}")),
                "{e}"
            );
        }
        let long = "x".repeat(1000);
        let e = flag_value(OPTIML_OFFLINE, Some(&long))
            .unwrap_err()
            .to_string();
        assert!(e.len() < 200, "{e}");
    }
}
