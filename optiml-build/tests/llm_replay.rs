//! The real model's recorded run, replayed with no endpoint, as CI does. `scripts/llm-demo.sh` ran a real server
//! (llama-cpp-python with Qwen2.5-Coder-0.5B-Instruct, on this kind of machine) and `cargo optiml generate` over
//! twelve tensor operators; `tests/llm-demo/` holds the operators (`lib.rs`), the table that run printed
//! (`generate.md`) and every exchange it recorded (`llm/`). Here the same crate, with `replay = "only"`, an
//! endpoint nobody listens on and an API key in the environment, must print the same table (routing, repair
//! rounds and NVRTC's verdicts all happen again; only the answers come from the recordings), write nothing to
//! the cache, and leave the key in no file. A change to a prompt, the router or the contract makes the
//! recordings stale: this test then fails, and `bash scripts/llm-demo.sh` records them again.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

const KEY: &str = "sk-optiml-test-0123456789abcdef";

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// A table without its replay counts (`2 (0)` live, `2 (2)` replayed).
fn without_replay_counts(table: &str) -> String {
    table
        .lines()
        .map(|l| {
            let mut cells: Vec<String> = l.split(" | ").map(str::to_string).collect();
            if cells.len() > 4
                && let Some((answers, _)) = cells[3].split_once(" (")
            {
                cells[3] = answers.to_string();
            }
            cells.join(" | ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_real_models_run_replays_with_no_endpoint() {
    let data = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/llm-demo"));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::copy(data.join("lib.rs"), root.join("src/lib.rs")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"llm-demo\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    )
    .unwrap();
    std::fs::write(
        root.join("build.rs"),
        "fn main() { optiml_build::Builder::new().compile().unwrap_or_else(|e| e.exit()); }\n",
    )
    .unwrap();
    // As the demo's settings, but port 9 (discard: nothing answers there) and a key to keep out of every file.
    std::fs::write(
        root.join("optiml.toml"),
        "[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"local\"\ntimeout_s = 5\nmax_tokens = 400\n\
         replay = \"only\"\ntop_k = 1\napi_key_env = \"OPTIML_TEST_LLM_KEY\"\n",
    )
    .unwrap();
    copy_dir(&data.join("llm"), &root.join("target/optiml/llm"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cargo-optiml"))
        .args(["optiml", "generate", "--rounds", "1", "--dir"])
        .arg(root)
        .env("OPTIML_TEST_LLM_KEY", KEY)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let recorded = std::fs::read_to_string(data.join("generate.md")).unwrap();
    assert_eq!(
        without_replay_counts(stdout.trim()),
        without_replay_counts(recorded.trim()),
        "the replay differs from the recorded run; re-record with `bash scripts/llm-demo.sh`\n{stderr}"
    );
    // Every answer came from a recording.
    let first = stdout.lines().nth(2).unwrap();
    assert!(first.contains("| 1 (1) |"), "{first}");
    assert!(
        stdout.contains("3 compiled"),
        "the recorded run compiled three kernels: {stdout}"
    );
    // Nothing went to the cache: what an expert wrote is verified on a GPU before anything keeps it.
    assert!(!root.join(".optiml").exists());
    let mut files = Vec::new();
    files_under(root, &mut files);
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "`{}` holds the key",
            f.display()
        );
    }
}
