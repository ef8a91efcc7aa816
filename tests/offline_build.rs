//! The promise of the committed cache: with `target/` gone, no GPU and no NVRTC, the workspace's kernel crates
//! build from `.optiml/` alone; and when an entry is missing, the build fails naming the command that fixes it.
//!
//! These tests run cargo on the workspace's own crates in the workspace's own target folder, so they reuse what
//! `cargo test` compiled (a separate folder compiled every dependency again: about two minutes on two cores).
//! Only the variables the kernel crates' build scripts read differ, so only those crates build again.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The target folder this test was built in (`CARGO_TARGET_TMPDIR` is its `tmp`).
fn target_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).to_path_buf()
}

/// `cargo build` of the kernel crates with NVRTC out of reach: generation forbidden, no library path given, and
/// no toolkit variables (setting them would rebuild cudarc, whose build script reads them, and all above it).
fn offline_build(target_dir: &Path, extra_env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(workspace())
        .args([
            "build",
            "--offline",
            "--locked",
            "-p",
            "optiml-test-kernels",
            "-p",
            "optiml-examples",
            "--examples",
            "--lib",
        ])
        .arg("--target-dir")
        .arg(target_dir)
        .env("OPTIML_OFFLINE", "1")
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .env_remove("OPTIML_NVRTC")
        .env_remove("OPTIML_ARCH")
        .env_remove("OPTIML_CACHE_DIR")
        // Nothing but the committed cache: a per-user cache on this machine could hide a miss.
        .env("OPTIML_USER_CACHE", "off");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A folder moved to `<name>-aside` for the guard's life and moved back when it drops (also after a failed
/// assertion); an aside copy a killed run left behind is moved back first.
struct Aside {
    path: PathBuf,
    aside: PathBuf,
}

impl Aside {
    fn new(path: &Path) -> Self {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push("-aside");
        let aside = path.with_file_name(name);
        if aside.exists() && !path.exists() {
            std::fs::rename(&aside, path).unwrap();
        }
        if path.exists() {
            std::fs::rename(path, &aside).unwrap();
        }
        Aside {
            path: path.to_path_buf(),
            aside,
        }
    }
}

impl Drop for Aside {
    fn drop(&mut self) {
        if self.aside.exists() {
            let _ = std::fs::remove_dir_all(&self.path);
            let _ = std::fs::rename(&self.aside, &self.path);
        }
    }
}

#[test]
fn builds_from_the_committed_cache_without_nvrtc_and_names_the_fix_on_a_miss() {
    let target = target_dir();
    // No target/optiml: only the committed cache can serve. What the workspace's builds generated or tuned there
    // is moved aside and back, not deleted.
    let _aside = Aside::new(&target.join("optiml"));
    let ok = offline_build(&target, &[]);
    assert!(
        ok.status.success(),
        "offline build from .optiml/ failed:\n{}",
        text(&ok)
    );
    assert!(
        !target.join("optiml").exists(),
        "an offline build generated kernels"
    );
    // A declaration with a bad spec is reported once, by the macro (here it is compiled out): the build script
    // prints nothing about it.
    assert!(
        !text(&ok).contains("frobnicate") && !text(&ok).contains("skipped"),
        "the build script reported a declaration it skipped:\n{}",
        text(&ok)
    );

    // The same build against an empty committed cache fails, listing each kernel and the command to run.
    let empty = target.join("tmp").join("offline-build-empty-cache");
    std::fs::create_dir_all(&empty).unwrap();
    // optiml's pre-tuned cache (this repository's `.optiml/`, read after the committed one) is turned off too.
    let miss = offline_build(
        &target,
        &[
            ("OPTIML_CACHE_DIR", &empty),
            ("OPTIML_PRETUNED", Path::new("off")),
        ],
    );
    assert!(
        !miss.status.success(),
        "a build with an empty cache succeeded offline"
    );
    let log = text(&miss);
    assert!(
        log.contains("OPTIML_OFFLINE is set and these kernels are in no cache"),
        "{log}"
    );
    assert!(log.contains("`bmm` ("), "{log}");
    assert!(
        log.contains("help: run `cargo optiml prepare --arch sm_80,sm_90`"),
        "{log}"
    );

    // A misspelt flag is an error, not "off" (which would have generated here, or failed on NVRTC).
    let typo = offline_build(&target, &[("OPTIML_OFFLINE", Path::new("ture"))]);
    assert!(!typo.status.success(), "OPTIML_OFFLINE=ture was accepted");
    let log = text(&typo);
    assert!(
        log.contains("`OPTIML_OFFLINE=ture` is neither on (1, true, yes, on) nor off"),
        "{log}"
    );
    assert!(
        log.contains("help: set `OPTIML_OFFLINE=1` or `OPTIML_OFFLINE=0`, or unset it"),
        "{log}"
    );
}

/// The workspace's cache, and that of the held-out crate (`bench/heldout`, a workspace of its own that no
/// workspace build compiles), hold every kernel their sources declare.
#[test]
fn prepare_check_accepts_the_committed_cache() {
    for dir in [workspace(), workspace().join("bench/heldout")] {
        let out = Command::new(env!("CARGO"))
            .current_dir(workspace())
            .args([
                "run",
                "--offline",
                "--locked",
                "-q",
                "-p",
                "optiml-build",
                "--bin",
                "cargo-optiml",
                "--target-dir",
            ])
            .arg(target_dir())
            .args(["--", "optiml", "prepare", "--check", "--dir"])
            .arg(&dir)
            .env_remove("OPTIML_ARCH")
            .env_remove("OPTIML_CACHE_DIR")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "`cargo optiml prepare --check --dir {}` failed:\n{}",
            dir.display(),
            text(&out)
        );
    }
}
