//! Tuned kernels reach every crate: a crate outside this repository, with no cache of its own, no GPU and no NVRTC,
//! builds with the tuned kernels of optiml's pre-tuned cache and of the per-user cache, each verified like any
//! entry, and the build says where each came from.

#![allow(clippy::unwrap_used)]

use optiml_build::cache::{Cache, KeyInputs, NewVariant, Tuning};
use optiml_build::engine::Origin;
use optiml_build::measure::Measurement;
use optiml_build::nvrtc::{Compiled, Resources};
use optiml_build::{Arch, Builder, families, scan};
use std::path::{Path, PathBuf};

/// A crate in a fresh temporary folder declaring `declarations`.
fn user_crate(name: &str, declarations: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("optiml-shared-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"user\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), declarations).unwrap();
    dir
}

/// The build of `dir` for sm_90, offline (a miss is an error, not a generation), with these fallbacks.
fn build(dir: &Path, user: Option<&Path>, pretuned: Option<&Path>) -> optiml_build::Report {
    Builder::new()
        .quiet(true)
        .offline(true)
        .arch([Arch::new(9, 0)])
        .search_time(0.0)
        .user_cache(user)
        .pretuned_cache(pretuned)
        .compile_at(dir, &dir.join("target/debug/build/user-0/out"))
        .unwrap_or_else(|e| panic!("{}", e.render()))
}

const BMM: &str = "#[optiml::kernel(\"batched matmul, f32\")]\npub fn bmm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, \
                   c: &mut CudaSlice<f32>, batch: usize, m: usize, n: usize, k: usize);\n";

#[test]
fn a_crate_outside_the_repository_builds_with_the_pretuned_kernels() {
    let pretuned = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.optiml");
    assert_eq!(
        optiml_build::targets::pretuned_dir().map(|d| d.canonicalize().unwrap()),
        Some(pretuned.canonicalize().unwrap()),
        "optiml-build finds the repository's cache as its pre-tuned one"
    );
    let dir = user_crate("pretuned", BMM);
    let report = build(&dir, None, Some(&pretuned));
    assert_eq!(report.entries.len(), 1);
    assert_eq!(report.entries[0].2, Origin::Cache(pretuned.clone()));
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("optiml's pre-tuned cache")
                && w.contains("`bmm` on sm_90 (tuned on NVIDIA")),
        "{:?}",
        report.warnings
    );
    // The kernel the crate embeds is the tuned one: the program lists a variant per tuned shape bucket.
    let kernel = std::fs::read_dir(dir.join("target/debug/build/user-0/out/optiml"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "rs"))
        .unwrap();
    let text = std::fs::read_to_string(kernel).unwrap();
    assert!(text.matches("shape: Some(").count() >= 1, "{text}");
    // Without the fallback, the same offline build has nothing to build from.
    let e = Builder::new()
        .quiet(true)
        .offline(true)
        .arch([Arch::new(9, 0)])
        .user_cache(None::<PathBuf>)
        .pretuned_cache(None::<PathBuf>)
        .compile_at(&dir, &dir.join("target/debug/build/user-0/out"))
        .unwrap_err();
    assert!(e.render().contains("bmm"), "{}", e.render());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_tuning_in_the_per_user_cache_reaches_another_crate_and_a_damaged_one_does_not() {
    let declaration =
        "#[optiml::kernel(\"relu\")]\npub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);\n";
    let dir = user_crate("user-cache", declaration);
    let user = dir.with_extension("user-cache");
    let _ = std::fs::remove_dir_all(&user);
    // Another crate's tuned entry for the same kernel, as its build-time search leaves it in the per-user cache.
    let kernel = &scan::scan(&[dir.join("src/lib.rs")])
        .unwrap()
        .unique_kernels()[0];
    let arch = Arch::new(9, 0);
    let inputs = KeyInputs::of(kernel, arch, &families::kernel_generator(kernel, arch));
    let candidate = families::default_candidate(&kernel.spec, arch);
    let compiled = Compiled {
        ptx: ".version 9.0\n.target sm_90\n".into(),
        cubin: b"\x7fELF tuned elsewhere".to_vec(),
        log: String::new(),
        resources: Resources::default(),
        options: vec!["-arch=sm_90".into()],
    };
    let tuning = Tuning {
        method: "mcts".into(),
        device: "NVIDIA H200".into(),
        date: "2026-12-06T00:00:00Z".into(),
        measurement: Measurement::default(),
        default_measurement: Measurement::default(),
        evaluations: 8,
        path: Vec::new(),
        log: String::new(),
    };
    let variant = NewVariant {
        tuning: Some(&tuning),
        ..NewVariant::default_for(&candidate, &compiled)
    };
    let stored = Cache::new(&user).store(&inputs, &[variant], true).unwrap();

    let report = build(&dir, Some(&user), None);
    assert_eq!(report.entries[0].2, Origin::Cache(user.clone()));
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("the per-user cache")
                && w.contains("`relu` on sm_90 (tuned on NVIDIA H200")),
        "{:?}",
        report.warnings
    );
    let artifacts = dir.join("target/debug/build/user-0/out/optiml/artifacts");
    let cubin = std::fs::read_dir(&artifacts)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cubin"))
        .unwrap();
    assert_eq!(std::fs::read(cubin).unwrap(), compiled.cubin);

    // Damaged, it is not used: the build falls through to what else there is (here nothing, so offline fails).
    std::fs::write(stored.dir.join("v0.tar.gz"), b"damaged").unwrap();
    let _ = std::fs::remove_dir_all(dir.join("target"));
    let e = Builder::new()
        .quiet(true)
        .offline(true)
        .arch([arch])
        .user_cache(Some(&user))
        .pretuned_cache(None::<PathBuf>)
        .compile_at(&dir, &dir.join("target/debug/build/user-0/out"))
        .unwrap_err();
    assert!(e.render().contains("relu"), "{}", e.render());
    // And the fallback is only read: the damaged entry is left as it was, not repaired or replaced.
    assert_eq!(
        std::fs::read(stored.dir.join("v0.tar.gz")).unwrap(),
        b"damaged"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&user).unwrap();
}
