//! The promise of the committed cache: with `target/` gone, no GPU and no NVRTC, the workspace's kernel crates
//! build from `.optiml/` alone; and when an entry is missing, the build fails naming the command that fixes it.
//!
//! These tests run cargo on the workspace's own crates in a separate target folder (the first run compiles the
//! dependencies once, about a minute on two cores).

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `cargo build` of the kernel crates with NVRTC out of reach: generation forbidden, no library path given, and
/// the toolkit variables pointing nowhere.
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
        .env("CUDA_HOME", "/nonexistent")
        .env("CUDA_PATH", "/nonexistent")
        .env_remove("OPTIML_NVRTC")
        .env_remove("OPTIML_ARCH")
        .env_remove("OPTIML_CACHE_DIR");
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

#[test]
fn builds_from_the_committed_cache_without_nvrtc_and_names_the_fix_on_a_miss() {
    let target = workspace().join("target").join("offline-build");
    // A fresh target/optiml: only the committed cache can serve.
    let _ = std::fs::remove_dir_all(target.join("optiml"));
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

    // The same build against an empty committed cache fails, listing each kernel and the command to run.
    let empty = target.join("empty-cache");
    std::fs::create_dir_all(&empty).unwrap();
    let miss = offline_build(&target, &[("OPTIML_CACHE_DIR", &empty)]);
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
}

#[test]
fn prepare_check_accepts_the_committed_cache() {
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
        .arg(workspace().join("target").join("offline-build"))
        .args(["--", "optiml", "prepare", "--check"])
        .env_remove("OPTIML_ARCH")
        .env_remove("OPTIML_CACHE_DIR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "`cargo optiml prepare --check` failed:\n{}",
        text(&out)
    );
}
