//! Which architectures to build for, and where the caches are.

use crate::Error;
use optiml_runtime::{Arch, probe};
use optiml_spec::env;
use std::path::{Path, PathBuf};

/// Built when nothing else decides: Ampere (A100, sm_80; its PTX also JITs on Ada and newer) and Hopper (H100,
/// H200, sm_90).
pub const DEFAULT_ARCHS: [Arch; 2] = [Arch::new(8, 0), Arch::new(9, 0)];

/// Where the architecture list came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArchSource {
    /// Set on the `Builder` or the command line.
    Explicit,
    /// `OPTIML_ARCH`.
    Env,
    /// The GPUs found at build time.
    Detected(Vec<String>),
    /// [`DEFAULT_ARCHS`].
    Default,
}

/// Parses `sm_80,sm_90`.
///
/// # Errors
/// [`Error::Arch`] naming `origin`.
pub fn parse_archs(text: &str, origin: &str) -> Result<Vec<Arch>, Error> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let arch = part.parse::<Arch>().map_err(|source| Error::Arch {
            origin: origin.into(),
            source,
        })?;
        if !out.contains(&arch) {
            out.push(arch);
        }
    }
    Ok(out)
}

/// `OPTIML_ARCH` if set (an explicit request beats detection), else the GPUs the driver reports, else
/// [`DEFAULT_ARCHS`].
///
/// # Errors
/// [`Error::Arch`] for a malformed `OPTIML_ARCH`.
pub fn resolve_archs() -> Result<(Vec<Arch>, ArchSource), Error> {
    if let Some(text) = env::var(env::OPTIML_ARCH) {
        let archs = parse_archs(&text, env::OPTIML_ARCH)?;
        if !archs.is_empty() {
            return Ok((archs, ArchSource::Env));
        }
    }
    // A driver that fails to answer is treated as no GPU: the build must not depend on it.
    let devices = probe::devices().unwrap_or_default();
    if !devices.is_empty() {
        let mut archs: Vec<Arch> = devices.iter().map(|d| d.arch).collect();
        archs.sort();
        archs.dedup();
        let names = devices
            .iter()
            .map(|d| format!("{} ({})", d.name, d.arch))
            .collect();
        return Ok((archs, ArchSource::Detected(names)));
    }
    Ok((DEFAULT_ARCHS.to_vec(), ArchSource::Default))
}

/// The workspace root above `dir`: the outermost folder whose `Cargo.toml` has a `[workspace]` table, else `dir`.
pub fn workspace_root(dir: &Path) -> PathBuf {
    let mut found = dir.to_path_buf();
    for ancestor in dir.ancestors() {
        let manifest = ancestor.join("Cargo.toml");
        if std::fs::read_to_string(&manifest)
            .is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"))
        {
            found = ancestor.to_path_buf();
        }
    }
    found
}

/// The committed caches to read, in order: `OPTIML_CACHE_DIR`, else `<crate>/.optiml` and
/// `<workspace>/.optiml`.
pub fn committed_dirs(manifest_dir: &Path) -> Vec<PathBuf> {
    if let Some(dir) = env::var_os(env::OPTIML_CACHE_DIR) {
        return vec![PathBuf::from(dir)];
    }
    let mut dirs = vec![manifest_dir.join(".optiml")];
    let ws = workspace_root(manifest_dir).join(".optiml");
    if !dirs.contains(&ws) {
        dirs.push(ws);
    }
    dirs
}

/// The per-user cache shared by every crate on this machine: `OPTIML_USER_CACHE`, else `$XDG_CACHE_HOME/optiml`,
/// else `$HOME/.cache/optiml`; `None` when it is turned off (`OPTIML_USER_CACHE=off`) or there is no home.
pub fn user_cache_dir() -> Option<PathBuf> {
    user_cache_dir_from(
        env::var_os(env::OPTIML_USER_CACHE),
        env::var_os(env::XDG_CACHE_HOME),
        env::var_os(env::HOME),
    )
}

/// A folder a variable names, or `None` when it says `off` (or `0`, `false`, `no`).
fn folder_or_off(value: std::ffi::OsString) -> Option<PathBuf> {
    let off = value.to_str().is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "off" | "0" | "false" | "no"
        )
    });
    (!off).then(|| PathBuf::from(value))
}

fn user_cache_dir_from(
    explicit: Option<std::ffi::OsString>,
    xdg: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    if let Some(dir) = explicit {
        return folder_or_off(dir);
    }
    // The specification says a relative XDG_CACHE_HOME is invalid and is to be ignored.
    if let Some(xdg) = xdg.map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Some(xdg.join("optiml"));
    }
    home.map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .map(|h| h.join(".cache").join("optiml"))
}

/// The pre-tuned cache that comes with optiml: `OPTIML_PRETUNED`, else the `.optiml/` of the repository
/// optiml-build was built from (present for a path or git dependency), holding the kernels optiml tunes itself.
/// `None` when it is turned off (`OPTIML_PRETUNED=off`) or not there.
pub fn pretuned_dir() -> Option<PathBuf> {
    let dir = match env::var_os(env::OPTIML_PRETUNED) {
        Some(value) => folder_or_off(value)?,
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()?
            .join(".optiml"),
    };
    dir.is_dir().then_some(dir)
}

/// Whether two paths are one folder (both resolved where they exist).
pub fn same_folder(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// `target/optiml/` derived from `OUT_DIR` (`target/<profile>/build/<pkg>-<hash>/out`), else a folder in
/// `OUT_DIR`.
pub fn target_cache_dir(out_dir: &Path) -> PathBuf {
    let build = out_dir.parent().and_then(Path::parent);
    match build
        .filter(|b| b.file_name().is_some_and(|n| n == "build"))
        .and_then(Path::parent)
        .and_then(Path::parent)
    {
        Some(target) => target.join("optiml"),
        None => out_dir.join("optiml-cache"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_cache_follows_the_xdg_specification_and_can_be_turned_off() {
        let os = |s: &str| Some(std::ffi::OsString::from(s));
        assert_eq!(
            user_cache_dir_from(None, os("/x/cache"), os("/home/u")),
            Some(PathBuf::from("/x/cache/optiml"))
        );
        // A relative XDG_CACHE_HOME is ignored.
        assert_eq!(
            user_cache_dir_from(None, os("rel"), os("/home/u")),
            Some(PathBuf::from("/home/u/.cache/optiml"))
        );
        assert_eq!(
            user_cache_dir_from(os("/shared/optiml"), os("/x"), os("/home/u")),
            Some(PathBuf::from("/shared/optiml"))
        );
        for off in ["off", "0", "False", "no"] {
            assert_eq!(
                user_cache_dir_from(os(off), os("/x"), os("/home/u")),
                None,
                "{off}"
            );
        }
        assert_eq!(user_cache_dir_from(None, None, None), None);
    }

    #[test]
    fn arch_lists() {
        assert_eq!(
            parse_archs("sm_80, sm_90,sm_80", "t").unwrap(),
            vec![Arch::new(8, 0), Arch::new(9, 0)]
        );
        let e = parse_archs("sm_80,hopper", "OPTIML_ARCH").unwrap_err();
        assert!(
            e.render().contains("`hopper` is not a GPU architecture"),
            "{}",
            e.render()
        );
    }

    #[test]
    fn target_dir_from_out_dir() {
        assert_eq!(
            target_cache_dir(Path::new("/w/target/release/build/app-0123/out")),
            PathBuf::from("/w/target/optiml")
        );
        assert_eq!(
            target_cache_dir(Path::new("/tmp/out")),
            PathBuf::from("/tmp/out/optiml-cache")
        );
    }
}
