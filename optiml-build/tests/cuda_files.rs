//! `Builder::cuda_files`: a crate's own CUDA files compiled with nvcc through `cc`, both ways. With no nvcc it is
//! an error whose help says how to get one; with the pinned nvcc wheels (`scripts/nvcc.sh`, which `.ci/run` runs
//! and exports as `OPTIML_TEST_NVCC`) the test crate's seed file compiles into a static library for sm_80 and
//! sm_90, and a broken file is an error naming it. One test, because it sets `NVCC` for the process.

#![allow(clippy::unwrap_used)]

use optiml_build::{Arch, Builder, Error};
use std::path::{Path, PathBuf};

fn configured(build: &mut cc::Build, out: &Path) {
    let target = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    build
        .out_dir(out)
        .target(&target)
        .host(&target)
        .opt_level(0)
        .debug(false)
        .cargo_metadata(false)
        .cargo_warnings(false);
}

#[test]
fn cuda_files_with_and_without_nvcc() {
    let builder = {
        let mut b = Builder::new();
        b.arch([Arch::new(8, 0), Arch::new(9, 0)]).quiet(true);
        b
    };
    let seed = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/kernels/kernels/softmax_rows.cu"
    ));

    // SAFETY: this file's only test; nothing else in the process reads the environment meanwhile.
    unsafe { std::env::set_var("NVCC", "/nonexistent/nvcc") };
    let err = builder.cuda_files([&seed]).unwrap_err();
    assert!(matches!(err, Error::Nvcc(_)), "{err:?}");
    let text = err.render();
    assert!(text.contains("/nonexistent/nvcc"), "{text}");
    assert!(text.contains("scripts/nvcc.sh"), "{text}");

    let nvcc = optiml_spec::env::var_os("OPTIML_TEST_NVCC").expect(
        "OPTIML_TEST_NVCC must name an nvcc: `export OPTIML_TEST_NVCC=$(scripts/nvcc.sh)` (as .ci/run does)",
    );
    // SAFETY: as above.
    unsafe { std::env::set_var("NVCC", &nvcc) };
    let out = tempfile::tempdir().unwrap();
    let mut build = builder.cuda_files([&seed]).unwrap();
    configured(&mut build, out.path());
    let args: Vec<String> = build
        .get_compiler()
        .args()
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    for flag in [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90,code=sm_90",
        "-gencode=arch=compute_90,code=compute_90",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} not in {args:?}");
    }
    build.try_compile("app_kernels").unwrap();
    let lib = std::fs::read(out.path().join("libapp_kernels.a")).unwrap();
    // The object embeds the device code, whose entry keeps the file's name.
    let has = |needle: &[u8]| lib.windows(needle.len()).any(|w| w == needle);
    assert!(has(b"softmax_rows"), "the kernel is not in the library");

    let broken = out.path().join("broken.cu");
    std::fs::write(
        &broken,
        "__global__ void k(float* x) { x[0] = undeclared; }\n",
    )
    .unwrap();
    let mut build = builder.cuda_files([&broken]).unwrap();
    configured(&mut build, out.path());
    let err = build.try_compile("broken").unwrap_err().to_string();
    assert!(err.contains("nvcc"), "{err}");
    eprintln!("{err}");
}
