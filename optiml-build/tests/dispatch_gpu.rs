//! The runtime's measured dispatch on a real GPU, with a kernel module built here: a matmul with beta reads its
//! old output, so the timing launches of a call at an untuned shape must not touch it. Run on the H200
//! (`../shared/gpu/stage`); without a GPU these tests are ignored, never silently passed.

#![allow(clippy::unwrap_used)]

use optiml_runtime::matmul::{MatmulArgs, launch};
use optiml_runtime::{Artifacts, KernelModule, Variant};
use optiml_spec::{Family, Spec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// `spec`'s default kernel for this GPU twice, as a module the launcher sees as a default and a variant tuned
/// at 64³, the way a tuned entry serves: each call at another shape times both. `reads_output` is what the
/// build records for the spec, or its opposite for the control.
fn module(spec: &Spec, reads_output: bool) -> &'static KernelModule {
    let ctx = optiml_runtime::probe::context(0).expect("a CUDA device");
    let arch = optiml_runtime::probe::arch_of(&ctx).expect("its architecture");
    let c = optiml_build::families::default_candidate(spec, arch);
    let image = c.launch.image_arch(arch);
    let nvrtc = optiml_build::nvrtc::load().expect("NVRTC");
    let compiled = optiml_build::nvrtc::compile(nvrtc, "dispatch.cu", &c.source, image).unwrap();
    let cubin: &'static [u8] = Box::leak(compiled.cubin.into_boxed_slice());
    let ptx: &'static str = Box::leak(compiled.ptx.into_boxed_str());
    let variant = |shape| Variant {
        arch: image,
        cubin,
        ptx,
        launch: c.launch,
        shape,
    };
    let variants = Box::leak(Box::new([variant(None), variant(Some([1, 64, 64, 64]))]));
    Box::leak(Box::new(KernelModule::new(
        "dispatch_beta",
        Artifacts {
            spec: "batched gemm, f32, C = alpha·A·B + beta·C",
            entry: c.entry,
            variants,
            reads_output,
        },
    )))
}

/// `alpha · A·B + beta · C_old` in f64, per batch item (row-major, packed).
fn reference(
    (a, b, c): (&[f32], &[f32], &[f32]),
    (batch, m, n, k): (usize, usize, usize, usize),
    (alpha, beta): (f32, f32),
) -> Vec<f64> {
    let mut out = vec![0.0; batch * m * n];
    for z in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k)
                    .map(|p| a[(z * m + i) * k + p] as f64 * b[(z * k + p) * n + j] as f64)
                    .sum();
                let at = (z * m + i) * n + j;
                out[at] = alpha as f64 * dot + beta as f64 * c[at] as f64;
            }
        }
    }
    out
}

/// Launches `kernel` at a shape it has no variant for, twice (the first call times both variants, the second
/// launches the choice), each on a fresh old `C`; the largest error against the reference, relative to its scale.
fn worst_error(kernel: &'static KernelModule, rng: &mut StdRng) -> f64 {
    let ctx = optiml_runtime::probe::context(0).unwrap();
    let stream = ctx.default_stream();
    let shape @ (batch, m, n, k) = (2, 100, 70, 50);
    let (alpha, beta) = (0.75, -1.25);
    let mut worst = 0.0f64;
    for _ in 0..2 {
        let mut fill =
            |len: usize| -> Vec<f32> { (0..len).map(|_| rng.random_range(-1.0..1.0)).collect() };
        let (a, b, c) = (
            fill(batch * m * k),
            fill(batch * k * n),
            fill(batch * m * n),
        );
        let (da, db) = (
            stream.clone_htod(&a).unwrap(),
            stream.clone_htod(&b).unwrap(),
        );
        let mut dc = stream.clone_htod(&c).unwrap();
        let args = MatmulArgs {
            a: &da,
            b: &db,
            c: &mut dc,
            bias: None,
            batch,
            m,
            n,
            k,
            alpha,
            beta,
            shared_a: false,
            shared_b: false,
        };
        launch(kernel, &stream, args).unwrap();
        let got = stream.clone_dtoh(&dc).unwrap();
        let want = reference((&a, &b, &c), shape, (alpha, beta));
        for (g, w) in got.iter().zip(&want) {
            worst = worst.max((*g as f64 - w).abs() / (1.0 + w.abs()));
        }
    }
    worst
}

/// The first call at an untuned shape times the default against the tuned variant; with beta, on a scratch `C`:
/// the result is `alpha·A·B + beta·C_old` on the first call and on the next. The control declares that the kernel
/// does not read its output, so its timing launches run on the real `C` and fold `beta·C` in again and again: far
/// off, which shows the check can fail.
#[test]
#[ignore = "needs a CUDA GPU"]
fn timing_launches_leave_an_output_that_is_read_untouched() {
    let spec = optiml_spec::parse("batched gemm, f32, C = alpha·A·B + beta·C").unwrap();
    assert!(
        matches!(&spec.family, Family::Matmul(m) if m.alpha && m.beta && m.batch == optiml_spec::Dim::Runtime)
    );
    let seed: u64 = rand::random();
    eprintln!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let right = worst_error(module(&spec, true), &mut rng);
    assert!(right < 1e-4, "with a scratch C: {right}");
    let control = worst_error(module(&spec, false), &mut rng);
    assert!(
        control > 0.1,
        "timing on the real C went unnoticed: {control}"
    );
}
