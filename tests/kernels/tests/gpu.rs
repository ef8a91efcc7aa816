//! Every generated kernel against a CPU reference in f64, on the GPU. Fresh random inputs on every run (the seed
//! is printed), outputs poisoned with NaN before each launch and every element checked, shapes that are not
//! multiples of any tile. Run with `--include-ignored` on a machine with a CUDA GPU (`shared/gpu/stage` +
//! `target/gpu/run.sh` do that on the H200).

#![allow(clippy::unwrap_used, clippy::too_many_arguments)]

use optiml::cudarc::driver::{CudaSlice, CudaStream};
use optiml::half::{bf16, f16};
use optiml_spec::reference::{gelu, silu};
use optiml_test_kernels as k;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

fn stream() -> Arc<CudaStream> {
    let ctx = optiml::runtime::probe::context(0).expect("these tests need a CUDA GPU");
    ctx.default_stream()
}

fn rng() -> StdRng {
    let seed: u64 = rand::random();
    eprintln!("seed {seed}");
    StdRng::seed_from_u64(seed)
}

/// Three distributions: uniform, mixed magnitudes (|x| spans 1e-3..1e1), and heavy-tailed (a cube of uniforms
/// scaled by up to 30), never zeros or constants.
fn random(rng: &mut StdRng, len: usize, dist: usize) -> Vec<f32> {
    (0..len)
        .map(|_| {
            let u: f32 = rng.random_range(-1.0..1.0);
            match dist % 3 {
                0 => u,
                1 => u.signum() * 10f32.powf(rng.random_range(-3.0..1.0)),
                _ => u * u * u * rng.random_range(1.0..30.0),
            }
        })
        .collect()
}

fn up(s: &Arc<CudaStream>, v: &[f32]) -> CudaSlice<f32> {
    s.clone_htod(v).unwrap()
}

fn poisoned(s: &Arc<CudaStream>, len: usize) -> CudaSlice<f32> {
    s.clone_htod(&vec![f32::NAN; len]).unwrap()
}

fn down(s: &Arc<CudaStream>, v: &CudaSlice<f32>) -> Vec<f32> {
    s.clone_dtoh(v).unwrap()
}

/// ‖out − ref‖ / ‖ref‖ ≤ `rel`, every element finite, and every element within `rel` of the largest
/// reference magnitude scaled by √k (fp32 accumulation error grows with the reduction length).
fn check(what: &str, out: &[f32], want: &[f64], rel: f64, k: usize) {
    check_above(what, out, want, (rel, 1e-30), k);
}

/// [`check`] with an absolute allowance `floor` per element, below which an element does not count in the
/// relative error either: an output type's spacing near zero (fp16's subnormals are 2⁻²⁴ apart, so a
/// correct 1×1×1 product of 2.8e-8 comes out as 0).
fn check_above(what: &str, out: &[f32], want: &[f64], (rel, floor): (f64, f64), k: usize) {
    assert_eq!(out.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
    let (mut num, mut den) = (0f64, 0f64);
    for (i, (&o, &r)) in out.iter().zip(want).enumerate() {
        assert!(
            o.is_finite(),
            "{what}: element {i} is {o} (expected {r}): unwritten or overflowed"
        );
        let d = o as f64 - r;
        assert!(
            d.abs() <= rel * scale * (k.max(1) as f64).sqrt() + floor,
            "{what}: element {i} = {o}, reference {r}"
        );
        if r.abs() * rel >= floor {
            num += d * d;
            den += r * r;
        }
    }
    let err = (num / den.max(1e-300)).sqrt();
    assert!(err <= rel, "{what}: relative error {err:e} > {rel:e}");
}

struct Mm<'a> {
    a: &'a [f32],
    b: &'a [f32],
    c0: Option<&'a [f32]>,
    bias: Option<&'a [f32]>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    ta: bool,
    tb: bool,
    alpha: f64,
    beta: f64,
    act: fn(f64) -> f64,
}

fn reference(p: &Mm) -> Vec<f64> {
    let mut out = vec![0f64; p.batch * p.m * p.n];
    for z in 0..p.batch {
        let (a, b) = (&p.a[z * p.m * p.k..], &p.b[z * p.k * p.n..]);
        for i in 0..p.m {
            for j in 0..p.n {
                let mut acc = 0f64;
                for l in 0..p.k {
                    let av = if p.ta { a[l * p.m + i] } else { a[i * p.k + l] };
                    let bv = if p.tb { b[j * p.k + l] } else { b[l * p.n + j] };
                    acc += av as f64 * bv as f64;
                }
                let idx = z * p.m * p.n + i * p.n + j;
                let mut v = p.alpha * acc;
                if let Some(c0) = p.c0 {
                    v += p.beta * c0[idx] as f64;
                }
                if let Some(bias) = p.bias {
                    v += bias[j] as f64;
                }
                out[idx] = (p.act)(v);
            }
        }
    }
    out
}

const SHAPES: [(usize, usize, usize, usize); 7] = [
    (3, 77, 45, 33),
    (1, 1, 1, 1),
    (2, 129, 257, 100),
    (1, 128, 128, 128),
    (2, 200, 136, 513),
    (1, 5, 7, 0),
    (1, 64, 300, 4),
];

impl<'a> Mm<'a> {
    /// `C = A·B`, no transposes, no epilogue.
    fn plain(a: &'a [f32], b: &'a [f32], (batch, m, n, k): (usize, usize, usize, usize)) -> Self {
        Mm {
            a,
            b,
            c0: None,
            bias: None,
            batch,
            m,
            n,
            k,
            ta: false,
            tb: false,
            alpha: 1.0,
            beta: 0.0,
            act: |v| v,
        }
    }
}

/// `bmm` on fresh inputs of one shape, checked against the reference.
fn check_bmm(
    s: &Arc<CudaStream>,
    r: &mut StdRng,
    shape: (usize, usize, usize, usize),
    dist: usize,
) {
    let (batch, m, n, kk) = shape;
    let a = random(r, batch * m * kk, dist);
    let b = random(r, batch * kk * n, dist + 1);
    let mut c = poisoned(s, batch * m * n);
    k::bmm(s, &up(s, &a), &up(s, &b), &mut c, batch, m, n, kk).unwrap();
    let want = reference(&Mm::plain(&a, &b, shape));
    check(
        &format!("bmm {batch}x{m}x{n}x{kk}"),
        &down(s, &c),
        &want,
        1e-5,
        kk,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bmm_matches_reference_on_odd_shapes() {
    let s = stream();
    let mut r = rng();
    for (i, &shape) in SHAPES.iter().enumerate() {
        check_bmm(&s, &mut r, shape, i);
    }
}

/// A matmul call at a shape no variant was tuned for times the contenders on its first call (writing the real
/// output, which the chosen launch then overwrites) and launches the fastest after: the first call is right
/// whatever `C` held, and so is every later one.
#[test]
#[ignore = "needs a CUDA GPU"]
fn untuned_shapes_are_timed_once_and_right_every_time() {
    let s = stream();
    let mut r = rng();
    for round in 0..3 {
        check_bmm(&s, &mut r, (3, 777, 555, 333), round);
    }
}

/// A matmul launch recorded into a CUDA graph. With two streams in the context cudarc makes every buffer
/// argument wait on its last write's event, recorded before the capture: the driver would invalidate the capture
/// (as it did on an H100 on 2026-12-07, before the check), so the call refuses with `Error::TrackedCapture` and
/// leaves the capture intact. With event tracking off, as cudarc requires for capture, the call on the capturing
/// stream times nothing (timing would break the capture) and the replayed graph computes the product.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_matmul_launch_can_be_captured_into_a_cuda_graph() {
    use optiml::cudarc::driver::sys;
    const FLAGS: sys::CUgraphInstantiate_flags =
        sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
    use sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL as MODE;
    // This test's own context object: its event-tracking switch is not the other tests'.
    let s = stream();
    let mut r = rng();
    // Loads the module outside the capture, as a program that captures after a warm-up call does.
    check_bmm(&s, &mut r, (1, 64, 64, 64), 0);
    let ctx = s.context().clone();
    let cs = ctx.new_stream().unwrap();
    let (batch, m, n, kk) = (2, 300, 200, 100);
    let a = random(&mut r, batch * m * kk, 1);
    let b = random(&mut r, batch * kk * n, 2);
    let (da, db) = (up(&cs, &a), up(&cs, &b));
    let mut c = poisoned(&cs, batch * m * n);
    cs.synchronize().unwrap();

    cs.begin_capture(MODE).unwrap();
    let refused = k::bmm(&cs, &da, &db, &mut c, batch, m, n, kk);
    let ended = cs.end_capture(FLAGS);
    assert!(
        matches!(refused, Err(optiml::Error::TrackedCapture { .. })),
        "a tracked capture is refused before it is invalidated: {refused:?}"
    );
    ended.expect("the refused call left the capture valid");

    // SAFETY: every buffer was written on `cs` and the stream is synchronised; nothing else uses them.
    unsafe { ctx.disable_event_tracking() };
    cs.begin_capture(MODE).unwrap();
    let launched = k::bmm(&cs, &da, &db, &mut c, batch, m, n, kk);
    let graph = cs
        .end_capture(FLAGS)
        .unwrap()
        .expect("the capture recorded the launch");
    launched.unwrap();
    graph.launch().unwrap();
    let want = reference(&Mm::plain(&a, &b, (batch, m, n, kk)));
    check("bmm captured in a graph", &down(&cs, &c), &want, 1e-5, kk);
    // SAFETY: as above; later buffers of this context track events again.
    unsafe { ctx.enable_event_tracking() };
}

/// TF32 kernels are held to TF32's tolerance (`Tolerance::TF32`, 2e-3): the TMA path where rows and batch items
/// are 16-byte multiples (K = 100, 128, 4), the `cp.async` fallback elsewhere (K = 33, 513, the odd batch
/// strides), K = 0, and the matrix-vector kernel.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32_kernels_in_three_layouts() {
    let s = stream();
    let mut r = rng();
    let shapes = SHAPES.iter().chain(&[(2, 300, 1, 64), (4, 256, 512, 1024)]);
    for (i, &(batch, m, n, kk)) in shapes.enumerate() {
        let a = random(&mut r, batch * m * kk, i);
        let b = random(&mut r, batch * kk * n, i + 1);
        let mut c = poisoned(&s, batch * m * n);
        k::bmm_tf32(&s, &up(&s, &a), &up(&s, &b), &mut c, batch, m, n, kk).unwrap();
        let want = reference(&Mm::plain(&a, &b, (batch, m, n, kk)));
        let what = format!("bmm_tf32 {batch}x{m}x{n}x{kk}");
        check(&what, &down(&s, &c), &want, 2e-3, kk);

        let c0 = random(&mut r, batch * m * n, i + 2);
        let bias = random(&mut r, n, i + 3);
        let mut c = up(&s, &c0);
        let (alpha, beta) = (0.75f32, -0.5f32);
        k::bmm_tf32_tt_full(
            &s,
            &up(&s, &a),
            &up(&s, &b),
            &mut c,
            &up(&s, &bias),
            batch,
            m,
            n,
            kk,
            alpha,
            beta,
        )
        .unwrap();
        let want = reference(&Mm {
            c0: Some(&c0),
            bias: Some(&bias),
            ta: true,
            tb: true,
            alpha: alpha.into(),
            beta: beta.into(),
            act: gelu,
            ..Mm::plain(&a, &b, (batch, m, n, kk))
        });
        check(
            &format!("bmm_tf32_tt_full {batch}x{m}x{n}x{kk}"),
            &down(&s, &c),
            &want,
            2e-3,
            kk,
        );

        let (a1, b1) = (&a[..m * kk], &b[..kk * n]);
        let mut c = poisoned(&s, m * n);
        k::matmul_tf32_nt(&s, &up(&s, a1), &up(&s, b1), &mut c, m, n, kk).unwrap();
        let want = reference(&Mm {
            tb: true,
            ..Mm::plain(a1, b1, (1, m, n, kk))
        });
        check(
            &format!("matmul_tf32_nt {m}x{n}x{kk}"),
            &down(&s, &c),
            &want,
            2e-3,
            kk,
        );
    }
}

/// fp16's relative error and its subnormals' spacing.
const F16_TOLERANCE: (f64, f64) = (5e-4, 1.0 / 16_777_216.0);

/// The 16-bit element types, for the tests: conversions with round to nearest even.
trait Half:
    Copy + optiml::cudarc::driver::DeviceRepr + optiml::cudarc::driver::ValidAsZeroBits
{
    fn of(v: f32) -> Self;
    fn get(self) -> f32;
    const NAN: Self;
}

impl Half for bf16 {
    fn of(v: f32) -> Self {
        bf16::from_f32(v)
    }
    fn get(self) -> f32 {
        self.to_f32()
    }
    const NAN: Self = bf16::NAN;
}

impl Half for f16 {
    fn of(v: f32) -> Self {
        f16::from_f32(v)
    }
    fn get(self) -> f32 {
        self.to_f32()
    }
    const NAN: Self = f16::NAN;
}

/// `v` rounded to `T`: the device copy and the f32 values it holds exactly (the reference's inputs).
fn up16<T: Half>(s: &Arc<CudaStream>, v: &[f32]) -> (CudaSlice<T>, Vec<f32>) {
    let narrow: Vec<T> = v.iter().map(|&x| T::of(x)).collect();
    let exact = narrow.iter().map(|x| x.get()).collect();
    (s.clone_htod(&narrow).unwrap(), exact)
}

fn poisoned16<T: Half>(s: &Arc<CudaStream>, len: usize) -> CudaSlice<T> {
    s.clone_htod(&vec![T::NAN; len]).unwrap()
}

fn down16<T: Half>(s: &Arc<CudaStream>, v: &CudaSlice<T>) -> Vec<f32> {
    s.clone_dtoh(v)
        .unwrap()
        .into_iter()
        .map(Half::get)
        .collect()
}

/// 16-bit kernels are held to their output's rounding (`Tolerance::BF16`'s relative L2 4e-3, `Tolerance::F16`'s
/// 5e-4): the `wgmma` kernel reading the operands in place where TMA can address them (every stored row a
/// multiple of 8 elements: 128³, 3×136×264×72, 4×256×512×1024) and from padded copies elsewhere (K = 4, 33,
/// 100, 513; N = 45, 257, 300), the SIMT kernel for matrix-vector products and K = 0.
#[test]
#[ignore = "needs a CUDA GPU"]
fn sixteen_bit_kernels_in_every_layout() {
    let s = stream();
    let mut r = rng();
    let shapes = SHAPES
        .iter()
        .chain(&[(2, 300, 1, 64), (3, 136, 264, 72), (4, 256, 512, 1024)]);
    for (i, &(batch, m, n, kk)) in shapes.enumerate() {
        let a = random(&mut r, batch * m * kk, i);
        let b = random(&mut r, batch * kk * n, i + 1);
        let shape = (batch, m, n, kk);

        let ((da, ha), (db, hb)) = (up16::<bf16>(&s, &a), up16::<bf16>(&s, &b));
        let mut c = poisoned16::<bf16>(&s, batch * m * n);
        k::bmm_bf16(&s, &da, &db, &mut c, batch, m, n, kk).unwrap();
        let want = reference(&Mm::plain(&ha, &hb, shape));
        let what = format!("bmm_bf16 {batch}x{m}x{n}x{kk}");
        check(&what, &down16(&s, &c), &want, 4e-3, kk);

        let (a1, b1) = (&a[..m * kk], &b[..kk * n]);
        let ((da, ha), (db, hb)) = (up16::<bf16>(&s, a1), up16::<bf16>(&s, b1));
        let mut c = poisoned16::<bf16>(&s, m * n);
        k::matmul_bf16_tn(&s, &da, &db, &mut c, m, n, kk).unwrap();
        let want = reference(&Mm {
            ta: true,
            ..Mm::plain(&ha, &hb, (1, m, n, kk))
        });
        let what = format!("matmul_bf16_tn {m}x{n}x{kk}");
        check(&what, &down16(&s, &c), &want, 4e-3, kk);

        // fp16's range ends at 65504: the inputs (|x| < 30) keep every output far below it.
        let ((da, ha), (db, hb)) = (up16::<f16>(&s, a1), up16::<f16>(&s, b1));
        let mut c = poisoned16::<f16>(&s, m * n);
        k::matmul_f16_nt(&s, &da, &db, &mut c, m, n, kk).unwrap();
        let want = reference(&Mm {
            tb: true,
            ..Mm::plain(&ha, &hb, (1, m, n, kk))
        });
        let what = format!("matmul_f16_nt {m}x{n}x{kk}");
        check_above(&what, &down16(&s, &c), &want, F16_TOLERANCE, kk);

        let ((da, ha), (db, hb)) = (up16::<f16>(&s, &a), up16::<f16>(&s, &b));
        let (mut c, c0) = up16::<f16>(&s, &random(&mut r, batch * m * n, i + 2));
        let bias = random(&mut r, n, i + 3);
        let (alpha, beta) = (0.75f32, -0.5f32);
        k::bmm_f16_tt_full(
            &s,
            &da,
            &db,
            &mut c,
            &up(&s, &bias),
            batch,
            m,
            n,
            kk,
            alpha,
            beta,
        )
        .unwrap();
        let want = reference(&Mm {
            c0: Some(&c0),
            bias: Some(&bias),
            ta: true,
            tb: true,
            alpha: alpha.into(),
            beta: beta.into(),
            act: gelu,
            ..Mm::plain(&ha, &hb, shape)
        });
        let what = format!("bmm_f16_tt_full {batch}x{m}x{n}x{kk}");
        check_above(&what, &down16(&s, &c), &want, F16_TOLERANCE, kk);
    }
}

/// `silu(A·B + bias)` in every precision: fp32 (SIMT), TF32 and bf16 (tensor cores), with the matrix-vector
/// shapes on the GEMV kernels, each at its precision's tolerance.
#[test]
#[ignore = "needs a CUDA GPU"]
fn silu_epilogue_in_every_precision() {
    let s = stream();
    let mut r = rng();
    let shapes = SHAPES
        .iter()
        .chain(&[(2, 300, 1, 64), (1, 1, 513, 200), (4, 256, 512, 1024)]);
    for (i, &(batch, m, n, kk)) in shapes.enumerate() {
        let shape = (batch, m, n, kk);
        let a = random(&mut r, batch * m * kk, i);
        let b = random(&mut r, batch * kk * n, i + 1);
        let bias = random(&mut r, n, i + 2);
        let (da, db, dbias) = (up(&s, &a), up(&s, &b), up(&s, &bias));
        let want = reference(&Mm {
            bias: Some(&bias),
            act: silu,
            ..Mm::plain(&a, &b, shape)
        });

        let mut c = poisoned(&s, batch * m * n);
        k::bmm_bias_silu(&s, &da, &db, &mut c, &dbias, batch, m, n, kk).unwrap();
        let what = format!("bmm_bias_silu {batch}x{m}x{n}x{kk}");
        check(&what, &down(&s, &c), &want, 1e-5, kk);

        let mut c = poisoned(&s, batch * m * n);
        k::bmm_tf32_bias_silu(&s, &da, &db, &mut c, &dbias, batch, m, n, kk).unwrap();
        let what = format!("bmm_tf32_bias_silu {batch}x{m}x{n}x{kk}");
        check(&what, &down(&s, &c), &want, 2e-3, kk);

        let ((da, ha), (db, hb)) = (up16::<bf16>(&s, &a), up16::<bf16>(&s, &b));
        let mut c = poisoned16::<bf16>(&s, batch * m * n);
        k::bmm_bf16_nt_bias_silu(&s, &da, &db, &mut c, &dbias, batch, m, n, kk).unwrap();
        let want = reference(&Mm {
            bias: Some(&bias),
            tb: true,
            act: silu,
            ..Mm::plain(&ha, &hb, shape)
        });
        let what = format!("bmm_bf16_nt_bias_silu {batch}x{m}x{n}x{kk}");
        check(&what, &down16(&s, &c), &want, 4e-3, kk);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bmm_batch_beyond_the_grid_limit() {
    check_bmm(&stream(), &mut rng(), (70_000, 3, 2, 5), 0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn transposed_operands() {
    let s = stream();
    let mut r = rng();
    for (i, &(_, m, n, kk)) in SHAPES.iter().enumerate() {
        let a = random(&mut r, m * kk, i);
        let b = random(&mut r, kk * n, i + 2);
        let mut c = poisoned(&s, m * n);
        k::matmul_nt(&s, &up(&s, &a), &up(&s, &b), &mut c, m, n, kk).unwrap();
        let p = Mm {
            tb: true,
            ..Mm::plain(&a, &b, (1, m, n, kk))
        };
        check(
            &format!("nt {m}x{n}x{kk}"),
            &down(&s, &c),
            &reference(&p),
            1e-5,
            kk,
        );
        let mut c = poisoned(&s, m * n);
        k::matmul_tn(&s, &up(&s, &a), &up(&s, &b), &mut c, m, n, kk).unwrap();
        let p = Mm {
            ta: true,
            tb: false,
            ..p
        };
        check(
            &format!("tn {m}x{n}x{kk}"),
            &down(&s, &c),
            &reference(&p),
            1e-5,
            kk,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn full_epilogue() {
    let s = stream();
    let mut r = rng();
    for (i, &(batch, m, n, kk)) in SHAPES.iter().enumerate() {
        let a = random(&mut r, batch * m * kk, i);
        let b = random(&mut r, batch * kk * n, i + 1);
        let c0 = random(&mut r, batch * m * n, i + 2);
        let bias = random(&mut r, n, 0);
        let (alpha, beta) = (r.random_range(0.5f32..2.0), r.random_range(-1.5f32..1.5));
        let mut c = up(&s, &c0);
        k::bmm_tt_full(
            &s,
            &up(&s, &a),
            &up(&s, &b),
            &mut c,
            &up(&s, &bias),
            batch,
            m,
            n,
            kk,
            alpha,
            beta,
        )
        .unwrap();
        let p = Mm {
            a: &a,
            b: &b,
            c0: Some(&c0),
            bias: Some(&bias),
            batch,
            m,
            n,
            k: kk,
            ta: true,
            tb: true,
            alpha: alpha as f64,
            beta: beta as f64,
            act: gelu,
        };
        check(
            &format!("tt+epilogue {batch}x{m}x{n}x{kk}"),
            &down(&s, &c),
            &reference(&p),
            1e-5,
            kk,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bias_relu_and_fixed_shapes() {
    let s = stream();
    let mut r = rng();
    let (m, n, kk) = (97usize, 131usize, 257usize);
    let a = random(&mut r, m * kk, 0);
    let b = random(&mut r, kk * n, 1);
    let bias = random(&mut r, n, 2);
    let mut c = poisoned(&s, m * n);
    k::matmul_bias_relu(
        &s,
        kk as u32,
        m as u32,
        n as i64,
        &up(&s, &bias),
        &up(&s, &a),
        &up(&s, &b),
        &mut c,
    )
    .unwrap();
    let p = Mm {
        bias: Some(&bias),
        act: |v| v.max(0.0),
        ..Mm::plain(&a, &b, (1, m, n, kk))
    };
    check("bias+relu", &down(&s, &c), &reference(&p), 1e-5, kk);

    let (m, n, kk) = (65, 47, 300);
    let a = random(&mut r, m * kk, 1);
    let b = random(&mut r, kk * n, 2);
    let mut c = poisoned(&s, m * n);
    k::matmul_fixed(&s, &up(&s, &a), &up(&s, &b), &mut c).unwrap();
    let p = Mm::plain(&a, &b, (1, m, n, kk));
    check("fixed 65x47x300", &down(&s, &c), &reference(&p), 1e-5, kk);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn wrong_lengths_are_errors_and_launch_nothing() {
    let s = stream();
    let mut r = rng();
    let (batch, m, n, kk) = (2, 33, 17, 9);
    let a = up(&s, &random(&mut r, batch * m * kk, 0));
    let b = up(&s, &random(&mut r, batch * kk * n, 0));
    let short_b = up(&s, &random(&mut r, batch * kk * n - 1, 0));
    let mut c = poisoned(&s, batch * m * n);
    let e = k::bmm(&s, &a, &short_b, &mut c, batch, m, n, kk).unwrap_err();
    assert!(matches!(e, optiml::Error::Shape { arg: "b", .. }), "{e}");
    let e = k::bmm(&s, &a, &b, &mut c, batch + 1, m, n, kk).unwrap_err();
    assert!(e.to_string().contains("`a` holds"), "{e}");
    assert!(
        down(&s, &c).iter().all(|v| v.is_nan()),
        "a rejected launch wrote to c"
    );
    let x = up(&s, &random(&mut r, 10, 0));
    let mut out = poisoned(&s, 11);
    let e = k::relu(&s, &x, &mut out).unwrap_err();
    assert!(
        matches!(e, optiml::Error::BufferLength { arg: "out", .. }),
        "{e}"
    );
    let e = k::gelu(&s, &x, &mut out, 11).unwrap_err();
    assert!(
        matches!(e, optiml::Error::BufferLength { arg: "x", .. }),
        "{e}"
    );
    let e = k::scale(&s, &x, 2.0, &mut out).unwrap_err();
    assert!(
        matches!(e, optiml::Error::BufferLength { arg: "out", .. }),
        "{e}"
    );
    // Negative dimension through a signed parameter type.
    let bias = up(&s, &random(&mut r, n, 0));
    let e = k::matmul_bias_relu(&s, kk as u32, m as u32, -1, &bias, &a, &b, &mut c).unwrap_err();
    assert!(
        matches!(e, optiml::Error::Dimension { arg: "n", .. }),
        "{e}"
    );
    assert!(down(&s, &out).iter().all(|v| v.is_nan()));
}

type Unary = fn(&CudaStream, &CudaSlice<f32>, &mut CudaSlice<f32>) -> Result<(), optiml::Error>;
type Case = (&'static str, Unary, fn(f64) -> f64);

#[test]
#[ignore = "needs a CUDA GPU"]
fn elementwise_maps() {
    let s = stream();
    let mut r = rng();
    let unary: [Case; 5] = [
        ("relu", k::relu, |v| v.max(0.0)),
        ("relu_again", k::relu_again, |v| v.max(0.0)),
        ("silu", k::silu, |v| v / (1.0 + (-v).exp())),
        ("sigmoid", k::sigmoid, |v| 1.0 / (1.0 + (-v).exp())),
        ("tanh", k::tanh, f64::tanh),
    ];
    for n in [1usize, 3, 4, 5, 1000, 1_000_003] {
        let mut x = random(&mut r, n, n);
        x[0] = 100.0;
        if n > 1 {
            x[1] = -100.0;
        }
        let dx = up(&s, &x);
        for (name, f, want) in unary {
            let mut out = poisoned(&s, n);
            f(&s, &dx, &mut out).unwrap();
            let reference: Vec<f64> = x.iter().map(|&v| want(v as f64)).collect();
            check(
                &format!("{name} n={n}"),
                &down(&s, &out),
                &reference,
                2e-6,
                1,
            );
        }
        let mut out = poisoned(&s, n);
        k::gelu(&s, &dx, &mut out, n).unwrap();
        let reference: Vec<f64> = x.iter().map(|&v| gelu(v as f64)).collect();
        check(&format!("gelu n={n}"), &down(&s, &out), &reference, 2e-6, 1);

        let y = random(&mut r, n, n + 1);
        let dy = up(&s, &y);
        let mut out = poisoned(&s, n);
        k::add(&s, &dx, &dy, &mut out).unwrap();
        let reference: Vec<f64> = x
            .iter()
            .zip(&y)
            .map(|(&a, &b)| a as f64 + b as f64)
            .collect();
        check(&format!("add n={n}"), &down(&s, &out), &reference, 1e-7, 1);
        let mut out = poisoned(&s, n);
        k::mul(&s, &dx, &dy, &mut out).unwrap();
        let reference: Vec<f64> = x
            .iter()
            .zip(&y)
            .map(|(&a, &b)| a as f64 * b as f64)
            .collect();
        check(&format!("mul n={n}"), &down(&s, &out), &reference, 1e-7, 1);

        let sc: f32 = r.random_range(-3.0..3.0);
        let mut out = poisoned(&s, n);
        k::add_scalar(&s, &dx, &mut out, sc).unwrap();
        let reference: Vec<f64> = x.iter().map(|&a| a as f64 + sc as f64).collect();
        check(
            &format!("add scalar n={n}"),
            &down(&s, &out),
            &reference,
            1e-7,
            1,
        );
        let mut out = poisoned(&s, n);
        k::scale(&s, &dx, sc, &mut out).unwrap();
        let reference: Vec<f64> = x.iter().map(|&a| a as f64 * sc as f64).collect();
        check(
            &format!("scale n={n}"),
            &down(&s, &out),
            &reference,
            1e-7,
            1,
        );
    }
}

/// The seeded softmax launches whatever its entry holds (the generated default, or the seed where a tune kept
/// it): either way it is a softmax of every row.
#[test]
#[ignore = "needs a CUDA GPU"]
fn seeded_softmax_rows() {
    let s = stream();
    let mut r = rng();
    for (rows, cols) in [(1usize, 1usize), (3, 5), (7, 1000), (64, 4096), (513, 33)] {
        let x = random(&mut r, rows * cols, rows);
        let mut y = poisoned(&s, rows * cols);
        k::softmax_seeded(&s, &up(&s, &x), &mut y, rows, cols).unwrap();
        let mut want = Vec::with_capacity(rows * cols);
        for row in x.chunks(cols) {
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let e: Vec<f64> = row.iter().map(|&v| (v as f64 - m).exp()).collect();
            let sum: f64 = e.iter().sum();
            want.extend(e.iter().map(|v| v / sum));
        }
        check(
            &format!("softmax {rows}x{cols}"),
            &down(&s, &y),
            &want,
            1e-5,
            cols,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn exact_lengths_and_empty_launches() {
    let s = stream();
    let mut r = rng();
    let x = random(&mut r, 1000, 0);
    let mut out = poisoned(&s, 1000);
    // A map's `n` names every buffer's length: a prefix is an error, not a partial launch.
    let e = k::gelu(&s, &up(&s, &x), &mut out, 777).unwrap_err();
    assert!(
        matches!(e, optiml::Error::BufferLength { arg: "x", .. }),
        "{e}"
    );
    assert!(
        down(&s, &out).iter().all(|v| v.is_nan()),
        "a rejected launch wrote"
    );
    k::gelu(&s, &up(&s, &x), &mut out, 1000).unwrap();
    assert!(down(&s, &out).iter().all(|v| v.is_finite()));
    let mut c = poisoned(&s, 4);
    let one = up(&s, &[1.0]);
    k::bmm(&s, &one, &one, &mut c, 0, 2, 2, 1).unwrap();
    assert!(
        down(&s, &c).iter().all(|v| v.is_nan()),
        "an empty batch wrote"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn launches_from_many_threads_load_once_and_agree() {
    let s = stream();
    let mut r = rng();
    let x = random(&mut r, 4097, 0);
    let dx = up(&s, &x);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                let stream = s.context().new_stream().unwrap();
                let mut out = stream.clone_htod(&vec![f32::NAN; x.len()]).unwrap();
                k::tanh(&stream, &dx, &mut out).unwrap();
                let got = stream.clone_dtoh(&out).unwrap();
                for (g, v) in got.iter().zip(&x) {
                    assert!((*g as f64 - (*v as f64).tanh()).abs() < 1e-6);
                }
            });
        }
    });
}
