//! `cargo optiml` on a crate of its own, as a user runs it: `prepare` fills the cache, `--check` accepts it and
//! refuses a hand-edited report, and `--check --rebuild` re-derives every variant with NVRTC; `tune --shard` never
//! writes the committed cache, and `merge` refuses what no shard wrote, writing nothing (no GPU needed for either).

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A crate using optiml-build in a fresh temporary folder, declaring one kernel.
fn user_crate(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("optiml-prepare-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"user\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("build.rs"),
        "fn main() { optiml_build::Builder::new().compile().unwrap_or_else(|e| e.exit()); }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        "#[optiml::kernel(\"relu\")]\npub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);\n",
    )
    .unwrap();
    dir
}

/// `cargo optiml ARGS` in `dir`.
fn optiml(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-optiml"))
        .arg("optiml")
        .args(args)
        .current_dir(dir)
        .env_remove("OPTIML_CACHE_DIR")
        // What this crate's cache holds, nothing copied from this machine's per-user cache.
        .env("OPTIML_USER_CACHE", "off")
        .output()
        .unwrap()
}

fn prepare(dir: &Path, args: &[&str]) -> Output {
    let d = dir.to_str().unwrap();
    let mut all = vec!["prepare", "--arch", "sm_90", "--dir", d];
    all.extend(args);
    optiml(dir, &all)
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn prepare_fills_the_cache_and_check_refuses_a_stale_report_and_rebuild_rederives() {
    let dir = user_crate("check");
    let out = prepare(&dir, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let out = prepare(&dir, &["--check"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("holds every kernel"), "{}", text(&out));

    // A report edited by hand (or left by an older generator) fails the check, and `prepare` rewrites it.
    let report = std::fs::read_dir(dir.join(".optiml/sm_90"))
        .unwrap()
        .map(|e| e.unwrap().path().join("report.md"))
        .next()
        .unwrap();
    let honest = std::fs::read_to_string(&report).unwrap();
    std::fs::write(&report, format!("{honest}\nTuned on an H200, 3× faster.\n")).unwrap();
    let out = prepare(&dir, &["--check"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("stale report: `relu` on sm_90"),
        "{}",
        text(&out)
    );
    let out = prepare(&dir, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&report).unwrap(), honest);

    // `--rebuild` compiles every variant again and finds each exactly what its record says.
    let out = prepare(&dir, &["--check", "--rebuild"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("each variant exactly what its record re-derives to"),
        "{}",
        text(&out)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_shard_never_writes_the_committed_cache_and_merge_takes_only_shard_folders() {
    let dir = user_crate("cli");
    let d = dir.to_str().unwrap();
    // Into the committed cache: refused before anything else (no GPU needed to say so).
    let out = optiml(
        &dir,
        &[
            "tune",
            "--dir",
            d,
            "--shard",
            "1/2",
            "--cache-dir",
            &format!("{d}/.optiml"),
        ],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("takes a folder of its own"),
        "{}",
        text(&out)
    );
    assert!(!dir.join(".optiml").exists());
    // A bad share is the command line's error.
    let out = optiml(&dir, &["tune", "--shard", "3/2"]);
    assert!(
        text(&out).contains("`3/2` is not a share like 1/4"),
        "{}",
        text(&out)
    );

    // A folder no shard wrote: named, and nothing merged.
    let stray = dir.join("stray");
    std::fs::create_dir_all(&stray).unwrap();
    let out = optiml(&dir, &["merge", stray.to_str().unwrap(), "--dir", d]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("is not a shard's folder"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("nothing merged"), "{}", text(&out));
    assert!(!dir.join(".optiml").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
