//! `cargo optiml analyze` and `cargo optiml transforms` as a user runs them: logs written with the library API
//! into a temporary folder, the binary run on them, its output and figures checked.

#![allow(clippy::unwrap_used)]

use optiml_build::Arch;
use optiml_build::families::matmul::simt_f32::Schedule;
use optiml_build::search::Tunable;
use optiml_build::search::{
    Bottleneck, Config, Header, Measurement, Method, Outcome, SearchLog, Signals, Step, Verdict,
    config_value, write_jsonl,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

// The schedule grows fields as the template does; the rest come from the default.
#[allow(clippy::needless_update)]
fn schedule(bm: u32, bk: u32, tm: u32) -> Schedule {
    Schedule {
        bm,
        bk,
        tm,
        ..Schedule::default_for(Arch::new(9, 0))
    }
}

fn step(
    node: usize,
    parent: Option<usize>,
    transform: Option<&'static str>,
    s: Schedule,
    outcome: Outcome,
) -> Step<Schedule> {
    let bottleneck = match &outcome {
        Outcome::Measured(m) => Some(Bottleneck::classify(m, 7.5)),
        Outcome::Rejected(_) => None,
    };
    Step {
        node,
        parent,
        transform,
        schedule: s,
        outcome,
        bottleneck,
        verdict: parent.map(|_| Verdict::Keep(0.2)),
        reward: 0.2,
        reused: false,
        evaluations: node + 1,
        elapsed_s: node as f64,
    }
}

fn measured(time_ms: f64, sm: f64, dram: f64) -> Outcome {
    Outcome::Measured(Measurement {
        time_ms,
        sm_sol: Some(sm),
        dram_sol: Some(dram),
        tflops: Some(10.0 / time_ms),
        registers: 64,
        ..Measurement::default()
    })
}

/// Default (2 ms, memory-bound) → deepen-k-tile (1.6 ms) → grow-thread-tile (1.0 ms), one rejection.
fn search_log(best_ms: f64) -> SearchLog<Schedule> {
    let (s0, s1, s2) = (
        schedule(128, 8, 4),
        schedule(128, 16, 4),
        schedule(128, 16, 8),
    );
    let steps = vec![
        step(0, None, None, s0, measured(2.0, 40.0, 75.0)),
        step(
            1,
            Some(0),
            Some("deepen-k-tile"),
            s1,
            measured(1.6, 55.0, 70.0),
        ),
        step(
            2,
            Some(0),
            Some("shrink-block-m"),
            schedule(64, 8, 4),
            Outcome::Rejected("ptxas: 64 bytes spilled".into()),
        ),
        step(
            3,
            Some(1),
            Some("grow-thread-tile"),
            s2,
            measured(best_ms, 85.0, 50.0),
        ),
    ];
    let Outcome::Measured(best_measurement) = steps[3].outcome.clone() else {
        unreachable!()
    };
    SearchLog {
        steps,
        best: s2,
        best_measurement,
        path: vec!["deepen-k-tile", "grow-thread-tile"],
        evaluations: 4,
    }
}

fn header(arch: &str, method: Method, seed: u64) -> Header {
    Header {
        kernel: "bmm".into(),
        spec: "bmm f32 [b,m,k]x[b,k,n]".into(),
        arch: arch.into(),
        device: "NVIDIA H200".into(),
        shape: "256x1024x1024x1024".into(),
        method,
        seed: Some(seed),
        config: config_value(&Config::default()),
        started_at: "2026-01-02T03:04:05Z".into(),
        signals: Signals::Derived,
    }
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("analyze_cli-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the binary in `dir/work`, so its default figure folder is `dir/work/target/optiml/analyze`.
fn cargo_optiml(dir: &Path, args: &[&str]) -> Output {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    Command::new(env!("CARGO_BIN_EXE_cargo-optiml"))
        .current_dir(&work)
        .arg("optiml")
        .args(args)
        .env_remove("OPTIML_CACHE_DIR")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn analyze_a_log_prints_the_path_and_draws_the_sol_figure() {
    let dir = fresh_dir("path");
    let log = dir.join("sm_90/search.jsonl");
    write_jsonl(
        &log,
        &header("sm_90", Method::Mcts, 1),
        &search_log(1.0),
        2.5,
    )
    .unwrap();

    let out = cargo_optiml(&dir, &["analyze", log.to_str().unwrap()]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("| 1 | deepen-k-tile | memory | 2.000 → 1.600 |"),
        "{stdout}"
    );
    assert!(stdout.contains("| 2 | grow-thread-tile |"), "{stdout}");
    assert!(
        stdout.contains("1 candidate was rejected: 1× `ptxas: 64 bytes spilled`"),
        "{stdout}"
    );
    assert!(stdout.contains("2.00× after 2 transformations"), "{stdout}");

    // The figure goes to the figures folder, never beside the log (a committed cache stays as it was).
    let svg_path = Path::new("target/optiml/analyze/bmm.sm_90.search.svg");
    assert!(!dir.join("sm_90/search.svg").exists());
    assert!(stderr.contains(&svg_path.display().to_string()), "{stderr}");
    let svg = std::fs::read_to_string(dir.join("work").join(svg_path)).unwrap();
    assert!(svg.starts_with("<svg "));
    assert!(
        svg.contains("class=\"sm-sol\"")
            && svg.contains("class=\"dram-sol\"")
            && svg.contains("class=\"time\"")
    );
    assert!(svg.contains("2. grow-thread-tile"));
}

#[test]
fn analyze_by_kernel_name_finds_every_arch_and_compares_methods() {
    let dir = fresh_dir("name");
    for arch in ["sm_80", "sm_90"] {
        let log = dir.join(format!("{arch}/entry/search.jsonl"));
        write_jsonl(&log, &header(arch, Method::Mcts, 1), &search_log(1.0), 2.5).unwrap();
    }
    // Not a log of `bmm`: ignored.
    let other = Header {
        kernel: "saxpy".into(),
        ..header("sm_90", Method::Mcts, 1)
    };
    write_jsonl(
        &dir.join("sm_90/other/search.jsonl"),
        &other,
        &search_log(1.0),
        1.0,
    )
    .unwrap();

    let out = cargo_optiml(
        &dir,
        &["analyze", "bmm", "--cache-dir", dir.to_str().unwrap()],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.matches("## `bmm` on ").count(), 2, "{stdout}");
    assert!(stdout.contains("## `bmm` on sm_80") && stdout.contains("## `bmm` on sm_90"));
    let figures = dir.join("work/target/optiml/analyze");
    assert!(
        figures.join("bmm.sm_80.search.svg").is_file()
            && figures.join("bmm.sm_90.search.svg").is_file()
    );
    assert!(!figures.join("saxpy.sm_90.search.svg").exists());
    // Nothing was written into the cache folder.
    let mut written = Vec::new();
    for arch in ["sm_80", "sm_90"] {
        for d in ["entry", "other"] {
            if let Ok(files) = std::fs::read_dir(dir.join(arch).join(d)) {
                written.extend(
                    files
                        .flatten()
                        .filter(|f| f.path().extension().is_some_and(|e| e == "svg"))
                        .map(|f| f.path()),
                );
            }
        }
    }
    assert!(
        written.is_empty(),
        "analyze wrote into the cache: {written:?}"
    );

    let random = dir.join("random/search-random-2.jsonl");
    write_jsonl(
        &random,
        &header("sm_90", Method::Random, 2),
        &search_log(1.4),
        3.0,
    )
    .unwrap();
    let mcts = dir.join("sm_90/entry/search.jsonl");
    let out = cargo_optiml(
        &dir,
        &[
            "analyze",
            mcts.to_str().unwrap(),
            "--compare",
            random.to_str().unwrap(),
        ],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("(random, seed 2) | random | 4 | 2.000 | 1.400 | 1.43× | 4 |"),
        "{stdout}"
    );
    let svg = std::fs::read_to_string(figures.join("bmm.sm_90.search.compare.svg")).unwrap();
    assert!(svg.starts_with("<svg "));
    assert_eq!(svg.matches("<polyline").count(), 2);
    assert!(svg.contains(">mcts (1 run)<") && svg.contains(">random (1 run)<"));

    let out = cargo_optiml(
        &dir,
        &["analyze", "gemm", "--cache-dir", dir.to_str().unwrap()],
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no search log for kernel `gemm`"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_malformed_log_is_reported_with_its_line() {
    let dir = fresh_dir("malformed");
    let log = dir.join("search.jsonl");
    write_jsonl(
        &log,
        &header("sm_90", Method::Mcts, 1),
        &search_log(1.0),
        2.5,
    )
    .unwrap();
    let mut lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines[2].truncate(10);
    std::fs::write(&log, lines.join("\n")).unwrap();
    let out = cargo_optiml(&dir, &["analyze", log.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("`{}` line 3: malformed record", log.display())),
        "{stderr}"
    );
}

#[test]
fn transforms_lists_the_catalog() {
    let out = cargo_optiml(&fresh_dir("transforms"), &["transforms"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.starts_with(
            "| family | kernel | transformation | addresses | claimed gain | rationale |"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("| matmul | simt f32 | grow-block-n | memory | 1.10× |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| tensor | pointwise | more-blocks-per-sm | memory | 1.05× |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| matmul | wgmma bf16/f16 | group-tile-rows | memory | 1.08× |"),
        "{stdout}"
    );

    let out = cargo_optiml(&fresh_dir("transforms"), &["transforms", "--json"]);
    assert!(out.status.success());
    let items: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let items = items.as_array().unwrap();
    assert_eq!(
        items.len(),
        optiml_build::families::FAMILIES
            .iter()
            .flat_map(|f| f.catalogs())
            .map(|c| c.entries.len())
            .sum::<usize>()
    );
    assert!(items.iter().any(|t| t["family"] == "matmul"
        && t["kernel"] == "wgmma tf32"
        && t["name"] == "ping-pong"));
    assert!(
        items
            .iter()
            .any(|t| t["name"] == "deepen-k-tile" && t["addresses"] == "memory")
    );
}
