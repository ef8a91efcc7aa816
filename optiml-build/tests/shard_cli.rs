//! `cargo optiml tune --shard` and `cargo optiml merge` as a user runs them, on a machine without a GPU: a shard
//! refuses to write into the committed cache, and `merge` refuses what no shard wrote, writing nothing.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

/// A crate declaring one kernel, in a fresh temporary folder.
fn user_crate(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("optiml-shard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"user\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        "#[optiml::kernel(\"relu\")]\npub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);\n",
    )
    .unwrap();
    dir
}

fn optiml(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_cargo-optiml"))
        .arg("optiml")
        .args(args)
        .current_dir(dir)
        .env_remove("OPTIML_CACHE_DIR")
        .env("OPTIML_USER_CACHE", "off")
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
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
