use super::*;
use optiml_spec::program::interp::{self, HostTensor};

fn spec(text: &str) -> Spec {
    optiml_spec::parse(text).unwrap()
}

fn shape(text: &str) -> AttentionShape {
    AttentionShape::of(&spec(text)).unwrap_or_else(|| panic!("{text}: not attention"))
}

#[test]
fn attention_is_claimed_in_words_and_notation_and_nothing_else_is() {
    for text in [
        "scaled dot-product attention",
        "scaled dot product attention of a 3-D tensor",
        "sdpa, scale 0.125",
        "attention of a 2-D tensor",
        "s[b, i, j] = sum(d) q[b, i, d] * k[b, j, d] * scale; m[b, i] = max(j) s[b, i, j]; \
         e[b, i, j] = exp(s[b, i, j] - m[b, i]); o[b, i, f] = sum(j) e[b, i, j] * v[b, j, f] / sum(j) e[b, i, j]",
        // Other names and order of the inputs, no scale.
        "t[n, x, y] = sum(c) kk[n, y, c] * qq[n, x, c]; mx[n, x] = max(y) t[n, x, y]; \
         w[n, x, y] = exp(t[n, x, y] - mx[n, x]); out[n, x, g] = sum(y) w[n, x, y] * vv[n, y, g] / sum(y) w[n, x, y]",
        // At the other precisions.
        "scaled dot-product attention, bf16",
        "scaled dot-product attention, f16",
        "sdpa, tf32",
    ] {
        assert!(Attention.claims(&spec(text)), "{text}");
        assert_eq!(super::super::of(&spec(text)).name(), FAMILY, "{text}");
    }
    for text in [
        // A softmax alone, scores without the softmax, keys stored feature-major, a missing normalisation, a
        // matmul.
        "softmax over the last axis",
        "s[b, i, j] = sum(d) q[b, i, d] * k[b, j, d]",
        "s[b, i, j] = sum(d) q[b, i, d] * k[b, d, j]; m[b, i] = max(j) s[b, i, j]; \
         e[b, i, j] = exp(s[b, i, j] - m[b, i]); o[b, i, f] = sum(j) e[b, i, j] * v[b, j, f] / sum(j) e[b, i, j]",
        "s[b, i, j] = sum(d) q[b, i, d] * k[b, j, d]; m[b, i] = max(j) s[b, i, j]; \
         e[b, i, j] = exp(s[b, i, j] - m[b, i]); o[b, i, f] = sum(j) e[b, i, j] * v[b, j, f]",
        "batched matmul, f32",
    ] {
        assert!(!Attention.claims(&spec(text)), "{text}");
    }
}

#[test]
fn the_layout_names_the_batch_the_positions_the_features_and_the_scale() {
    // `s[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d] * scale; …`: dimensions b, h, i, j, d, dv.
    let s = shape("scaled dot-product attention");
    assert_eq!(
        s.layout,
        Layout {
            batch: vec![0, 1],
            lq: 2,
            lk: 3,
            d: 4,
            dv: 5,
            qkv: [0, 1, 2],
            scale: Scale::Param,
            keys_first: false,
        }
    );
    let c = Schedule::default_for(Arch::new(9, 0)).candidate(&s);
    for line in [
        "#define OPTIML_DIMS long long e0, long long e1, long long e2, long long e3, long long e4, long long e5",
        "#define OPTIML_PARAMS , float p0",
        "#define OPTIML_SCALE p0",
        "#define OPTIML_BATCH (e0 * e1)",
        "#define OPTIML_LQ e2",
        "#define OPTIML_LK e3",
        "#define OPTIML_D e4",
        "#define OPTIML_DV e5",
        "#define OPTIML_Q in0",
        "#define OPTIML_V in2",
    ] {
        assert!(c.source.contains(line), "{line}\n{}", c.source);
    }
    let Launch::Program(l) = c.launch else {
        panic!("{:?}", c.launch)
    };
    assert_eq!(l.items_mask, 0b100111);
    assert_eq!(l.nonempty_mask, 0b1000);
    // The tensor-core kernel's block takes 64 queries by every feature; fp32 FMA's 32 by 1024. Both count the
    // same items, so either variant is dispatched by the same key.
    assert_eq!(l.items_per_block, 64);
    let Launch::Program(fma) = Schedule::default_for(Arch::new(7, 0)).candidate(&s).launch else {
        panic!()
    };
    assert_eq!(fma.items_per_block, 32 * 1024);
    assert_eq!(fma.items_mask, l.items_mask);
    let fixed = shape("attention of a 2-D tensor, scale 0.125");
    assert_eq!(fixed.layout.scale, Scale::Const(0.125));
    assert!(fixed.layout.batch.is_empty());
    let c = Schedule::default_for(Arch::new(9, 0)).candidate(&fixed);
    assert!(
        c.source.contains("#define OPTIML_PARAMS \n"),
        "{}",
        c.source
    );
    assert!(c.source.contains("#define OPTIML_SCALE 0.125f"));
    assert!(c.source.contains("#define OPTIML_BATCH 1LL"));
    // The keys came first in this one: q is the second input.
    let swapped = shape(
        "t[n, x, y] = sum(c) kk[n, y, c] * qq[n, x, c]; mx[n, x] = max(y) t[n, x, y]; \
         w[n, x, y] = exp(t[n, x, y] - mx[n, x]); out[n, x, g] = sum(y) w[n, x, y] * vv[n, y, g] / sum(y) w[n, x, y]",
    );
    assert_eq!(swapped.layout.scale, Scale::One);
    assert_eq!(swapped.layout.qkv, [1, 0, 2]);
    assert!(swapped.layout.keys_first);
}

/// The program the words lower to is PyTorch's attention: its float64 interpretation matches
/// `softmax(q kᵀ · scale) v` computed directly.
#[test]
fn the_program_is_softmax_of_scaled_scores_times_values() {
    let s = shape("attention of a 3-D tensor");
    let (b, lq, lk, d, dv) = (2usize, 3usize, 5usize, 4usize, 6usize);
    let extents = s.extents(&[b], lq, lk, d, dv);
    let noise = |n: usize, seed: u64| -> Vec<f32> {
        (0..n)
            .map(|i| {
                let x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed;
                ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    };
    let (q, k, v) = (
        noise(b * lq * d, 1),
        noise(b * lk * d, 2),
        noise(b * lk * dv, 3),
    );
    let scale = 0.7f64;
    let r = interp::eval(
        &s.program,
        &extents,
        &[
            HostTensor::Float(&q),
            HostTensor::Float(&k),
            HostTensor::Float(&v),
        ],
        &[scale],
        None,
        1,
    )
    .unwrap();
    for bi in 0..b {
        for i in 0..lq {
            let scores: Vec<f64> = (0..lk)
                .map(|j| {
                    (0..d)
                        .map(|x| q[(bi * lq + i) * d + x] as f64 * k[(bi * lk + j) * d + x] as f64)
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
            let l: f64 = w.iter().sum();
            for f in 0..dv {
                let want: f64 = (0..lk)
                    .map(|j| w[j] * v[(bi * lk + j) * dv + f] as f64)
                    .sum::<f64>()
                    / l;
                let got = r[0].values[(bi * lq + i) * dv + f];
                assert!((got - want).abs() < 1e-12, "{got} {want}");
            }
        }
    }
}

#[test]
fn the_space_holds_the_default_and_every_transformation_stays_in_it() {
    let space = Schedule::space();
    let default = Schedule::default_for(Arch::new(9, 0));
    assert!(space.contains(&default), "{default:?}");
    assert_eq!(default.units, Units::Tf32x3);
    assert!(space.len() > 50, "{}", space.len());
    // Two stages of 64 queries and 256 keys by 16 (+4) features, the 64 x (512 + 4) scores, the row state.
    assert_eq!(
        default.smem_bytes(),
        4 * (2 * (64 + 256) * 20 + 64 * 516 + 192)
    );
    // An sm_80 CUBIN runs on sm_86 and sm_89 too, whose blocks get at most 99 KiB of shared memory.
    let ampere = Schedule::default_for(Arch::new(8, 0));
    assert!(space.contains(&ampere), "{ampere:?}");
    assert_eq!(ampere.units, Units::Tf32x3);
    assert!(ampere.smem_bytes() <= 99 * 1024, "{}", ampere.smem_bytes());
    let fma = Schedule::default_for(Arch::new(7, 5));
    assert!(space.contains(&fma), "{fma:?}");
    assert_eq!(fma.units, Units::Fma);
    assert_eq!(
        fma.smem_bytes(),
        4 * (2 * 16 * 36 + 2 * 16 * 260 + 2 * 8 * 1024 + 32 * 257 + 96)
    );
    for s in &space {
        assert!(s.smem_bytes() <= MAX_SMEM, "{s:?}");
        for t in Schedule::catalog() {
            if let Some(n) = t.apply_to(s) {
                assert!(space.contains(&n), "{} from {s:?}", t.name);
            }
        }
    }
    for t in Schedule::catalog() {
        assert!(
            space.iter().any(|s| t.apply_to(s).is_some()),
            "{} never applies",
            t.name
        );
    }
}

#[test]
fn a_recorded_schedule_is_read_back_and_no_other_kernels_is_taken_for_it() {
    let s = spec("scaled dot-product attention");
    let default = Schedule::default_for(Arch::new(9, 0));
    let json = serde_json::to_value(default).unwrap();
    let c = Attention.scheduled_candidate(&s, &json).unwrap();
    assert_eq!(c.schedule, default.describe());
    assert!(Attention.catalog_of(&json).is_some());
    let transpose = serde_json::json!({"tile_rows": 64, "tile_cols": 64, "chunk_bytes": 16, "threads": 128, "blocks_per_sm": 16, "pad": 1});
    assert!(Attention.catalog_of(&transpose).is_none());
    let outside = serde_json::json!({"threads": 256, "br": 48, "bc": 256, "ec": 1024, "dk": 16, "ck": 8, "sc": 8, "oc": 16});
    assert!(Attention.scheduled_candidate(&s, &outside).is_err());
}

#[test]
fn targets_default_to_kernelbench_97_and_read_the_run_time_dimensions() {
    let none = KernelSettings::default();
    let t = Attention
        .targets(&spec("scaled dot-product attention"), &none, None)
        .unwrap();
    assert_eq!(t[0].dims, vec![32, 32, 512, 512, 1024, 1024]);
    assert_eq!(t[0].rate, Rate::Flops);
    assert_eq!(t[0].bucket, Some([32 * 32 * 512 * 1024, 1, 512 * 1024, 1]));
    let t = Attention
        .targets(&spec("attention of a 3-D tensor"), &none, None)
        .unwrap();
    assert_eq!(t[0].dims, vec![1024, 512, 512, 1024, 1024]);
    let shapes = [Dims(vec![8, 4, 1024, 2048, 64, 64])];
    let t = Attention
        .targets(&spec("scaled dot-product attention"), &none, Some(&shapes))
        .unwrap();
    assert_eq!(t[0].label, "b=8 h=4 i=1024 j=2048 d=64 dv=64");
    assert!(
        Attention
            .targets(&spec("sdpa"), &none, Some(&[Dims(vec![3])]))
            .is_err()
    );
    let s = shape("scaled dot-product attention");
    assert_eq!(flops(&s, &t[0].dims), 2.0 * 32.0 * 1024.0 * 2048.0 * 128.0);
}

#[test]
fn the_gate_checks_ragged_tiles_a_narrow_head_and_a_head_wider_than_a_tile() {
    let s = shape("attention of a 3-D tensor");
    let plan = test_plan(&s, &[Dims(vec![1, 2, 3, 4, 5])]);
    assert_eq!(
        plan.sizes,
        vec![
            vec![1, 1, 1, 1, 1],
            vec![2, 5, 7, 3, 5],
            vec![3, 33, 130, 17, 67],
            vec![2, 67, 300, 64, 64],
            vec![2, 72, 136, 64, 80],
            vec![1, 9, 20, 2, 9],
            vec![2, 40, 257, 1030, 1030],
            vec![145, 3, 8, 8, 8],
            vec![1, 2, 3, 4, 5],
        ]
    );
    // Two batch axes: the second takes its own extent, so the items' flattening is checked.
    let four = shape("scaled dot-product attention");
    assert_eq!(test_plan(&four, &[]).sizes[2], vec![3, 2, 33, 130, 17, 67]);
    // A spec fixing a dimension keeps it in every size.
    let fixed = shape("attention of a 3-D tensor").program.canonical();
    assert!(fixed.contains("d0"), "{fixed}");
}

/// A schedule with shared-memory stages (`dk`, `ck`) that the register-peak rule can vary.
trait Staged: Copy + PartialEq {
    fn stages(&self) -> (u32, u32);
    fn with_stages(&self, dk: u32, ck: u32) -> Self;

    /// Whether `among` holds this schedule with stages at least as deep (deeper, if `strictly`).
    fn has_deeper_sibling(&self, among: &[Self], strictly: bool) -> bool {
        let (dk, ck) = self.stages();
        among.iter().any(|t| {
            let (tdk, tck) = t.stages();
            tdk >= dk
                && tck >= ck
                && !(strictly && (tdk, tck) == (dk, ck))
                && *t == self.with_stages(tdk, tck)
        })
    }
}

impl Staged for Schedule {
    fn stages(&self) -> (u32, u32) {
        (self.dk, self.ck)
    }
    fn with_stages(&self, dk: u32, ck: u32) -> Self {
        Schedule { dk, ck, ..*self }
    }
}

impl Staged for fast::Schedule {
    fn stages(&self) -> (u32, u32) {
        (self.dk, self.ck)
    }
    fn with_stages(&self, dk: u32, ck: u32) -> Self {
        fast::Schedule { dk, ck, ..*self }
    }
}

/// The schedules whose shared-memory stages (`dk`, `ck`) are the deepest valid ones for their other tiles, then
/// every `spread`-th of the rest. A deeper stage holds more of each operand in registers: over the whole space
/// (`every_schedule_compiles_without_spills`, measured with NVRTC 13.0 on 2026-12-07: the 432 exact schedules and
/// the 64 fast ones of bf16), no schedule took more registers than its deepest-stage sibling. So the deepest ones hold
/// every register peak, where a spill would show first, and the spread compiles the shallower stages' code too.
fn register_peaks<S: Staged>(space: &[S], spread: usize) -> Vec<S> {
    let mut rest = 0usize;
    space
        .iter()
        .filter(|s| {
            !s.has_deeper_sibling(space, true) || {
                rest += 1;
                (rest - 1).is_multiple_of(spread)
            }
        })
        .copied()
        .collect()
}

fn exact_peaks() -> Vec<Schedule> {
    register_peaks(&Schedule::space(), 8)
}

fn fast_peaks() -> Vec<fast::Schedule> {
    register_peaks(&fast::Schedule::space(), 4)
}

/// The register peaks of the exact space (and an eighth of the rest) compile for sm_90 without spills: the
/// whole space is `every_schedule_compiles_without_spills` (ignored: five CPU-minutes).
#[test]
fn the_exact_register_peaks_compile_without_spills() {
    assert_exact_compile(exact_peaks());
}

/// Compiles `schedules` of the exact kernel for sm_90 and fails on any error, warning or spill.
fn assert_exact_compile(schedules: Vec<Schedule>) {
    let s = shape("scaled dot-product attention");
    let jobs = schedules
        .into_iter()
        .map(|sched| {
            let c = sched.candidate(&s);
            (c.schedule.clone(), c.source)
        })
        .collect();
    crate::nvrtc::testing::assert_compiles(jobs);
}

/// The subsets the CI compiles hold every value of every knob (both kinds of units among them), and each schedule
/// left out has a sibling with deeper stages that is compiled.
#[test]
fn the_register_peaks_cover_every_knob_and_every_tile_shape() {
    let all = Schedule::space();
    let peaks = exact_peaks();
    assert!(
        peaks.len() * 2 < all.len(),
        "{} of {}",
        peaks.len(),
        all.len()
    );
    type Knob = fn(&Schedule) -> u32;
    let knobs: [(&str, Knob); 9] = [
        ("units", |s| s.units as u32),
        ("br", |s| s.br),
        ("bc", |s| s.bc),
        ("ec", |s| s.ec),
        ("dk", |s| s.dk),
        ("ck", |s| s.ck),
        ("sc", |s| s.sc),
        ("oc", |s| s.oc),
        ("sk", |s| s.sk),
    ];
    for (name, knob) in knobs {
        for s in &all {
            assert!(
                peaks.iter().any(|p| knob(p) == knob(s)),
                "{name} = {} is never compiled",
                knob(s)
            );
        }
    }
    for s in &all {
        assert!(
            s.has_deeper_sibling(&peaks, false),
            "{s:?} has no deeper sibling among the peaks"
        );
    }
    let fast = fast_peaks();
    for s in &fast::Schedule::space() {
        assert!(
            s.has_deeper_sibling(&fast, false),
            "{s:?} has no deeper sibling among the fast peaks"
        );
    }
}

/// Every schedule compiles for sm_90 without spills (the data behind [`register_peaks`]).
#[test]
#[ignore = "compiles all 432 exact schedules (five CPU-minutes); the_exact_register_peaks_compile_without_spills runs in CI"]
fn every_schedule_compiles_without_spills() {
    assert_exact_compile(Schedule::space());
}

#[test]
fn the_version_hashes_the_template_every_candidate_holds_and_the_code_writing_its_header() {
    let s = spec("scaled dot-product attention");
    let sources = Attention.sources(&s);
    assert!(sources[3].contains("fn candidate(&self, shape: &AttentionShape)"));
    assert!(sources[4].contains("fn candidate(&self, shape: &AttentionShape)"));
    // The staged form's: the softmax, the 16-bit template it instantiates twice, and the code writing them.
    assert!(sources[5].contains("optiml_attn_softmax("));
    assert!(sources[6].contains("OPTIML_KERNEL("));
    assert!(sources[7].contains("pub fn candidate(shape: &AttentionShape"));
    for sched in Schedule::space() {
        let c = sched.candidate(&AttentionShape::of(&s).unwrap());
        let template = match sched.units {
            Units::Fma => &sources[0],
            Units::Tf32x3 => &sources[1],
        };
        assert!(c.source.contains(template.as_ref()), "{}", c.schedule);
        let rest = c.source.replace(template.as_ref(), "");
        assert!(
            rest.lines()
                .all(|l| l.is_empty() || l.starts_with("//") || l.starts_with("#define")),
            "{rest}"
        );
    }
}

/// A `tf32` spec and a 16-bit one search the fast schedules, an exact one the exact schedules: each kind gets its
/// kernel and its tolerance, and a log of one kind never reads as the other.
#[test]
fn each_precision_gets_its_kernel_its_tolerance_and_its_schedules() {
    let exact = spec("scaled dot-product attention");
    let tf32 = spec("scaled dot-product attention, tf32");
    let bf16 = spec("scaled dot-product attention, bf16");
    let f16 = spec("scaled dot-product attention, f16");
    let hopper = Arch::new(9, 0);
    let of = |s: &Spec| Kind::of(&AttentionShape::of(s).unwrap().program);
    assert_eq!(of(&exact), Kind::Exact);
    assert_eq!(of(&tf32), Kind::Tf32);
    assert_eq!(of(&bf16), Kind::Half(DType::Bf16));
    assert_eq!(of(&f16), Kind::Half(DType::F16));

    let e = Attention.default_candidate(&exact, hopper);
    assert!(e.source.contains("3xTF32 tensor cores"), "{}", e.source);
    assert!(!e.source.contains("#define OPTIML_TF32_ONCE"));
    let t = Attention.default_candidate(&tf32, hopper);
    assert!(
        t.source.contains("#define OPTIML_TF32_ONCE 1"),
        "{}",
        t.source
    );
    assert!(t.source.contains(MMA_TEMPLATE));
    let b = Attention.default_candidate(&bf16, hopper);
    assert!(b.source.contains("#define OPTIML_HALF 0"));
    assert!(b.source.contains(MMA16_TEMPLATE));
    let h = Attention.default_candidate(&f16, hopper);
    assert!(h.source.contains("#define OPTIML_HALF 1"));
    // Before sm_80 a tf32 spec is computed exactly, in fp32 FMA.
    let old = Attention.default_candidate(&tf32, Arch::new(7, 5));
    assert!(old.source.contains(TEMPLATE), "{}", old.schedule);

    // The same tiles; the 16-bit kernel's stages are half the bytes.
    let fast = fast::Schedule::default_for(hopper);
    assert_eq!(fast.mma(), Schedule::default_for(hopper));
    let (Launch::Program(lt), Launch::Program(lb)) = (&t.launch, &b.launch) else {
        panic!()
    };
    assert_eq!(lt.smem_bytes, Schedule::default_for(hopper).smem_bytes());
    assert_eq!(
        lb.smem_bytes,
        2 * 2 * (64 + 256) * (16 + 8) + 4 * (64 * 516 + 192)
    );
    assert_eq!((lt.items_mask, lt.items_per_block), (lb.items_mask, 64));

    // Tolerances follow the program.
    let tol = |s: &Spec| test_plan(&AttentionShape::of(s).unwrap(), &[]).tolerance;
    assert_eq!(tol(&exact), Tolerance::F32);
    assert_eq!(tol(&tf32), Tolerance::TF32);
    assert_eq!(tol(&bf16), Tolerance::BF16);
    assert_eq!(tol(&f16), Tolerance::F16);

    // Schedules: each spec reads its own kind, and the catalogs tell them apart.
    let fast_json = serde_json::to_value(fast).unwrap();
    let exact_json = serde_json::to_value(Schedule::default_for(hopper)).unwrap();
    assert!(Attention.scheduled_candidate(&bf16, &fast_json).is_ok());
    assert!(Attention.scheduled_candidate(&bf16, &exact_json).is_err());
    assert!(Attention.scheduled_candidate(&exact, &fast_json).is_err());
    assert!(Attention.scheduled_candidate(&tf32, &exact_json).is_ok());
    assert_eq!(
        Attention.catalog_of(&fast_json).unwrap().kernel,
        Attention.searched_catalog(&tf32).kernel
    );
    assert_eq!(
        Attention.catalog_of(&exact_json).unwrap().kernel,
        Attention.searched_catalog(&exact).kernel
    );
    assert_ne!(
        Attention.searched_catalog(&exact).kernel,
        Attention.searched_catalog(&bf16).kernel
    );
}

#[test]
fn the_fast_space_is_the_tensor_core_tiles_and_its_transformations_stay_in_it() {
    let space = fast::Schedule::space();
    // Exactly the exact tensor-core schedules' tiles.
    let mma: Vec<Schedule> = Schedule::space()
        .into_iter()
        .filter(|s| s.units == Units::Tf32x3)
        .collect();
    assert_eq!(
        space.iter().map(fast::Schedule::mma).collect::<Vec<_>>(),
        mma
    );
    assert!(space.contains(&fast::Schedule::default_for(Arch::new(9, 0))));
    assert!(space.contains(&fast::Schedule::default_for(Arch::new(8, 0))));
    let catalog = fast::Schedule::catalog();
    let names: Vec<&str> = catalog.iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [
            "longer-score-passes",
            "shorter-score-passes",
            "more-query-rows",
            "fewer-query-rows",
            "longer-key-chunks",
            "shorter-key-chunks",
            "narrower-feature-tile",
            "wider-feature-tile",
            "deeper-score-stages",
            "shallower-score-stages",
            "deeper-value-stages",
            "shallower-value-stages",
        ]
    );
    for s in &space {
        assert!(s.smem_bytes(Kind::Half(DType::Bf16)) <= s.smem_bytes(Kind::Tf32));
        for t in &catalog {
            if let Some(n) = t.apply_to(s) {
                assert!(space.contains(&n), "{} from {s:?}", t.name);
                // The same step as on the exact kernel's tiles.
                let on_exact = Schedule::catalog()
                    .into_iter()
                    .find(|e| e.name == t.name)
                    .and_then(|e| (e.apply)(&s.mma()));
                assert_eq!(on_exact, Some(n.mma()), "{}", t.name);
            }
        }
    }
    for t in &catalog {
        assert!(
            space.iter().any(|s| t.apply_to(s).is_some()),
            "{} never applies",
            t.name
        );
    }
}

/// The fast schedules compile for sm_90 without spills: the bf16 kernel's register peaks (and a quarter of the
/// rest), and for TF32 and f16 a quarter of the space, the defaults among them. The TF32 kernel is the exact one
/// with two of its three products gone (the exact peaks compile those), and f16 differs from bf16 in its
/// conversions and mma type only.
#[test]
fn the_fast_register_peaks_compile_without_spills() {
    let space = fast::Schedule::space();
    let defaults = [Arch::new(9, 0), Arch::new(8, 0)].map(fast::Schedule::default_for);
    let mut jobs = Vec::new();
    for (text, schedules) in [
        ("scaled dot-product attention, bf16", fast_peaks()),
        (
            "scaled dot-product attention, tf32",
            space.iter().step_by(4).copied().collect(),
        ),
        (
            "attention of a 3-D tensor, f16, scale 0.125",
            space.iter().step_by(4).copied().collect(),
        ),
    ] {
        let s = shape(text);
        for sched in schedules.iter().chain(&defaults) {
            let c = sched.candidate(&s);
            jobs.push((format!("{text}: {}", c.schedule), c.source));
        }
    }
    crate::nvrtc::testing::assert_compiles(jobs);
}

/// The staged form of a 16-bit or TF32 program on sm_90: one module holding the fused kernel (the entry point),
/// both instances of a `wgmma` template (scores NT with an fp32 output and the scale, values NN; the 16-bit
/// template, or the TF32 one with its entry names renamed) and the softmax, compiled for sm_90a without spills in
/// bf16, f16 and TF32; its launch names the program's axes, inputs and scale. Such a search on sm_90 evaluates it
/// as roots; exact programs and older GPUs never see it.
#[test]
fn the_staged_form_is_one_module_of_three_stages_and_the_fused_kernel() {
    let hopper = Arch::new(9, 0);
    let roots = staged::roots(hopper);
    assert_eq!(
        roots.iter().map(|r| r.staged).collect::<Vec<_>>(),
        [32, 128]
    );
    assert!(staged::roots(Arch::new(8, 0)).is_empty());
    // wgmma is sm_90's own: newer chips have other tensor-core instructions.
    assert!(staged::roots(Arch::new(10, 0)).is_empty());
    assert!(staged::applies(Kind::Half(DType::Bf16), hopper));
    assert!(staged::applies(Kind::Tf32, hopper));
    assert!(!staged::applies(Kind::Exact, hopper));
    assert!(!staged::applies(Kind::Half(DType::F16), Arch::new(8, 0)));
    let nvrtc = crate::nvrtc::testing::nvrtc();
    for (text, scale) in [
        ("scaled dot-product attention, bf16", None),
        (
            "attention of a 3-D tensor, f16, scale 0.125",
            Some(0.125f32),
        ),
        ("scaled dot-product attention, tf32", None),
    ] {
        let s = shape(text);
        let r = roots[0];
        assert!(r.is_valid());
        assert!(
            r.describe()
                .starts_with("staged through memory, 32 items a round")
        );
        let c = r.candidate(&s);
        let Launch::Attention(a) = c.launch else {
            panic!("{text}: {:?}", c.launch)
        };
        let l = &s.layout;
        assert_eq!(a.dims, [l.lq, l.lk, l.d, l.dv].map(|d| d as u32));
        assert_eq!(a.qkv, l.qkv.map(|i| i as u32));
        assert_eq!(a.scale_bits, scale.map(f32::to_bits), "{text}");
        assert_eq!(a.chunk, 32);
        assert!(a.scores.trans_b && !a.values.trans_b);
        // The TF32 template's tile of C is 256 × 128 in these layouts (it computes Cᵀ), the 16-bit one's 128 × 256.
        let tf32 = text.ends_with("tf32");
        assert_eq!(
            (a.scores.tile_m, a.scores.tile_n),
            if tf32 { (256, 128) } else { (128, 256) }
        );
        // The fused kernel keeps its own launch: the calls the stages cannot take go to it.
        let fused = fast::Schedule { staged: 0, ..r };
        assert_eq!(
            Launch::Program(a.fused),
            fused.candidate(&s).launch,
            "{text}"
        );
        assert_eq!(c.launch.image_arch(hopper), Arch::specific(9, 0));
        for entry in [
            ENTRY,
            optiml_runtime::ATTN_SCORES_ENTRY,
            optiml_runtime::ATTN_SOFTMAX_ENTRY,
            optiml_runtime::ATTN_VALUES_ENTRY,
        ] {
            assert!(c.source.contains(entry), "{text}: {entry}");
        }
        let out = crate::nvrtc::compile(nvrtc, "attention.cu", &c.source, Arch::specific(9, 0))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        let res = out.resources;
        assert!(
            res.spill_stores + res.spill_loads == 0 && res.stack_frame == 0,
            "{text}: {res:?}\n{}",
            out.log
        );
        assert_eq!(out.log.matches("warning").count(), 0, "{}", out.log);
        for entry in [
            optiml_runtime::ATTN_SCORES_ENTRY,
            optiml_runtime::ATTN_VALUES_ENTRY,
        ] {
            assert!(out.ptx.contains(&format!(".entry {entry}(")), "{entry}");
        }
        // The scores' wgmma reads k K-major (no transpose), the values' v MN-major (transposed).
        assert!(out.ptx.contains("wgmma.mma_async"));
    }
    // A schedule read back from a log or cache: "staged" is absent when 0, so fused schedules serialise as
    // before.
    let fused = fast::Schedule::default_for(hopper);
    let json = serde_json::to_string(&fused).unwrap();
    assert!(!json.contains("staged"), "{json}");
    let back: fast::Schedule = serde_json::from_str(&json).unwrap();
    assert_eq!(back, fused);
    let json = serde_json::to_string(&roots[1]).unwrap();
    assert_eq!(
        serde_json::from_str::<fast::Schedule>(&json).unwrap(),
        roots[1]
    );
}
