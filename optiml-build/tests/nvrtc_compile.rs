//! Every variant the experts can generate compiles with the pinned NVRTC for sm_80 and sm_90, to a CUBIN with no
//! register spills and PTX for the same target. Needs NVRTC (`.ci/run` installs the wheel and sets OPTIML_NVRTC);
//! without it this test fails rather than passing silently.
//!
//! The matmul schedule space is too large to compile whole in CI (two cores, about two minutes), so CI compiles a
//! deterministic covering subset; `every_schedule_compiles_without_spills` (ignored; ~20 min) compiles all of it.

#![allow(clippy::unwrap_used)]

use optiml_build::experts::Candidate;
use optiml_build::families::matmul::{
    half as matmul16, simt_f32 as matmul, tf32 as matmul_tf32, tf32x3 as matmul_tf32x3,
};
use optiml_build::nvrtc;
use optiml_build::search::Tunable;
use optiml_runtime::Arch;
use optiml_spec::{Activation, DType, Dim, MatmulSpec, Precision, Triangle};
use std::collections::HashSet;

const ARCHS: [Arch; 2] = [Arch::new(8, 0), Arch::new(9, 0)];

fn spec(trans: (bool, bool), epilogue: (bool, bool, bool, Option<Activation>)) -> MatmulSpec {
    MatmulSpec {
        precision: Precision::Exact,
        batched: true,
        trans_a: trans.0,
        trans_b: trans.1,
        shared_a: false,
        shared_b: false,
        alpha: epilogue.0,
        beta: epilogue.1,
        bias: epilogue.2,
        activation: epilogue.3,
        triangle: None,
        batch: Dim::Runtime,
        m: Dim::Runtime,
        n: Dim::Runtime,
        k: Dim::Runtime,
        names: None,
    }
}

/// The operand loads (4 transpose combinations) and the epilogue (32 combinations) are separate parts of the
/// template: every epilogue is compiled once, the load path alternating between the two extremes, and every load
/// path with both extreme epilogues, which covers each part's every variant and their interactions at the
/// corners, in 38 compiles per architecture instead of 128.
fn matmul_specs() -> Vec<MatmulSpec> {
    let transposes = [(false, false), (false, true), (true, false), (true, true)];
    let mut epilogues = Vec::new();
    for bits in 0..8u32 {
        for act in [
            None,
            Some(Activation::Relu),
            Some(Activation::Gelu),
            Some(Activation::Silu),
        ] {
            epilogues.push((bits & 1 != 0, bits & 2 != 0, bits & 4 != 0, act));
        }
    }
    let (plain, full) = (epilogues[0], epilogues[epilogues.len() - 1]);
    let mut out = Vec::new();
    for (i, e) in epilogues.iter().enumerate() {
        let t = [(false, false), (true, true)][i % 2];
        out.push(spec(t, *e));
    }
    for t in transposes {
        for e in [plain, full] {
            let s = spec(t, e);
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    out
}

/// Every load path (4 transpose combinations) with the plain and the full epilogue.
fn corner_specs() -> Vec<MatmulSpec> {
    let (plain, full) = (
        (false, false, false, None),
        (true, true, true, Some(Activation::Gelu)),
    );
    [(false, false), (false, true), (true, false), (true, true)]
        .into_iter()
        .flat_map(|t| [spec(t, plain), spec(t, full)])
        .collect()
}

/// What a schedule exercises in the template: its tile shape, then each knob's value.
fn features(s: &matmul::Schedule) -> [(&'static str, [u32; 5]); 6] {
    [
        ("tile", [s.bm, s.bn, s.bk, s.tm, s.tn]),
        ("warp_n", [s.warp_n, 0, 0, 0, 0]),
        ("group_m", [s.group_m, 0, 0, 0, 0]),
        ("async_mode", [s.async_mode, 0, 0, 0, 0]),
        ("min_blocks", [s.min_blocks, 0, 0, 0, 0]),
        // Every split factor compiles to the same source (the count is a kernel argument).
        ("split_k", [u32::from(s.split_k > 1), 0, 0, 0, 0]),
    ]
}

/// Every load path (transpose pair) with both extreme epilogues, each compiled with a few schedules that together
/// take every value of every knob (so every knob value meets every one of these flag sets); the tile shapes are
/// spread over the flag sets. Greedy set cover over `Schedule::space()` from a fixed starting point per flag set:
/// deterministic, and it follows the space when `is_valid` changes.
fn covering_jobs() -> Vec<(matmul::Schedule, MatmulSpec)> {
    let all = matmul::Schedule::space();
    let mut tiles: Vec<[u32; 5]> = all.iter().map(|s| features(s)[0].1).collect();
    tiles.sort_unstable();
    tiles.dedup();
    let plain = spec((false, false), (false, false, false, None));
    let full = spec((false, false), (true, true, true, Some(Activation::Gelu)));
    let mut flag_sets = Vec::new();
    for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
        for e in [&plain, &full] {
            flag_sets.push(MatmulSpec {
                trans_a,
                trans_b,
                ..e.clone()
            });
        }
    }
    // The triangular products' masking and range code, with every knob value (split-K included).
    for triangle in [Triangle::Upper, Triangle::Lower] {
        flag_sets.push(MatmulSpec {
            triangle: Some(triangle),
            ..plain.clone()
        });
    }
    let mut jobs = Vec::new();
    for (j, spec) in flag_sets.iter().enumerate() {
        let mut todo: HashSet<(&str, [u32; 5])> = all
            .iter()
            .flat_map(|s| features(s).into_iter().skip(1))
            .collect();
        todo.extend(
            tiles
                .iter()
                .skip(j)
                .step_by(flag_sets.len())
                .map(|t| ("tile", *t)),
        );
        // Scanning from a different place per flag set varies the schedules that fill in each knob value.
        let start = j * all.len() / flag_sets.len();
        while !todo.is_empty() {
            let gain =
                |s: &matmul::Schedule| features(s).iter().filter(|f| todo.contains(*f)).count();
            let mut best = (0, None);
            for i in 0..all.len() {
                let s = &all[(start + i) % all.len()];
                if gain(s) > best.0 {
                    best = (gain(s), Some(*s));
                }
            }
            let best = best.1.expect("every feature comes from some schedule");
            for f in features(&best) {
                todo.remove(&f);
            }
            jobs.push((best, spec.clone()));
        }
    }
    jobs
}

type Job = (String, Candidate, Arch);

/// Compiles every job on all cores; returns one line per failure (error, spill, or missing output).
fn compile_all(jobs: &[Job]) -> Vec<String> {
    let nvrtc = nvrtc::load().unwrap_or_else(|e| panic!("{e}\nhelp: {}", nvrtc::INSTALL_HINT));
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                s.spawn(move || {
                    let mut bad = Vec::new();
                    for (name, c, arch) in jobs.iter().skip(w).step_by(workers) {
                        match nvrtc::compile(nvrtc, "variant.cu", &c.source, *arch) {
                            Err(e) => bad.push(format!("{name} on {arch}: {e}")),
                            Ok(out) => {
                                let r = out.resources;
                                if out.cubin.is_empty()
                                    || !out.ptx.contains(&format!(".target {arch}"))
                                {
                                    bad.push(format!(
                                        "{name} on {arch}: missing CUBIN or PTX for the target"
                                    ));
                                }
                                if r.spill_stores + r.spill_loads > 0
                                    || r.stack_frame > 0
                                    || r.registers == 0
                                {
                                    bad.push(format!("{name} on {arch}: {r:?}"));
                                }
                            }
                        }
                    }
                    bad
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

fn assert_compiled(jobs: &[Job], started: std::time::Instant) {
    let failures = compile_all(jobs);
    assert!(
        failures.is_empty(),
        "{} of {} variants failed:\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n")
    );
    eprintln!(
        "{} variants compiled in {:.1} s",
        jobs.len(),
        started.elapsed().as_secs_f64(),
    );
}

#[test]
fn every_generated_variant_compiles_without_spills() {
    let started = std::time::Instant::now();
    let mut jobs: Vec<Job> = Vec::new();
    for arch in ARCHS {
        // The default schedule with every epilogue and transpose combination on Hopper; on Ampere, whose
        // default differs only in its tile, every load path with both extreme epilogues (the epilogue code is
        // the same text on both).
        let specs = if arch == Arch::new(9, 0) {
            matmul_specs()
        } else {
            corner_specs()
        };
        for spec in specs {
            let c = matmul::Schedule::default_for(arch).candidate(&spec);
            jobs.push((format!("matmul {spec:?}"), c, arch));
        }
        // What the search explores, on Hopper: a subset that covers every knob value with every load path.
        if arch == Arch::new(9, 0) {
            for (schedule, spec) in covering_jobs() {
                jobs.push((
                    format!("matmul {} {spec:?}", schedule.describe()),
                    schedule.candidate(&spec),
                    arch,
                ));
            }
        }
    }
    assert_compiled(&jobs, started);
}

/// The TF32 kernels a build generates (the `mma.sync` one on sm_80, the `wgmma` one as sm_90a on sm_90) in
/// every layout, plain and with the full epilogue (gelu; silu in one layout), and every `wgmma` schedule the
/// search can reach in the two TMA layouts (`NN`, `TT`) and the two `cp.async` ones.
#[test]
fn every_tf32_variant_compiles_without_spills() {
    let started = std::time::Instant::now();
    let transposes = [(false, false), (false, true), (true, false), (true, true)];
    let (plain, full, silu) = (
        (false, false, false, None),
        (true, true, true, Some(Activation::Gelu)),
        (true, true, true, Some(Activation::Silu)),
    );
    let tf32 = |t, e| MatmulSpec {
        precision: Precision::Tf32,
        ..spec(t, e)
    };
    let mut jobs: Vec<Job> = Vec::new();
    for arch in ARCHS {
        for t in transposes {
            // silu differs from gelu only in the activation: one layout is enough.
            let silu = (t == (true, false)).then_some(silu);
            for e in [Some(plain), Some(full), silu].into_iter().flatten() {
                let spec = tf32(t, e);
                let c = optiml_build::families::default_candidate(
                    &optiml_spec::Spec {
                        family: optiml_spec::Family::Matmul(spec.clone()),
                        dtype: optiml_spec::DType::F32,
                        layout: optiml_spec::Layout::RowMajor,
                    },
                    arch,
                );
                let image = c.launch.image_arch(arch);
                jobs.push((format!("tf32 {} {spec:?}", c.schedule), c, image));
            }
        }
    }
    let hopper = Arch::specific(9, 0);
    // Each schedule in one layout and epilogue, in turn: every layout and epilogue meets a quarter of the
    // schedules, and the defaults above take every layout with both epilogues.
    for (i, s) in matmul_tf32::Schedule::space().into_iter().enumerate() {
        let spec = tf32(transposes[i % 4], [plain, full, plain, silu][i / 4 % 4]);
        jobs.push((
            format!("tf32 {} {spec:?}", s.describe()),
            s.candidate(&spec),
            hopper,
        ));
    }
    // A TN product's A transposed first (the kernel reads it as NN does), TF32 and 3xTF32, full epilogue.
    let first = matmul_tf32::Schedule {
        transpose_a: true,
        ..matmul_tf32::Schedule::default_for(hopper)
    };
    let tn = tf32((true, false), full);
    jobs.push((
        format!("tf32 {} {tn:?}", first.describe()),
        first.candidate(&tn),
        hopper,
    ));
    let first = matmul_tf32x3::Schedule {
        transpose_a: true,
        ..matmul_tf32x3::Schedule::default_for(hopper)
    };
    let tn = spec((true, false), full);
    jobs.push((
        format!("3xtf32 {} {tn:?}", first.describe()),
        first.candidate(&tn),
        hopper,
    ));
    // Split K (a second launch reduces) on the 128 × 128 tile the search's `split-k` leaves the default for: the
    // layouts of the two P forms, both epilogues.
    let split = matmul_tf32::Schedule {
        split_k: 8,
        qn: 128,
        ..matmul_tf32::Schedule::default_for(hopper)
    };
    for (t, e) in [((false, false), full), ((false, true), plain)] {
        let spec = tf32(t, e);
        jobs.push((
            format!("tf32 {} {spec:?}", split.describe()),
            split.candidate(&spec),
            hopper,
        ));
    }
    // The 3xTF32 root of a plain f32 spec: its default in every layout, the full epilogue in two of them, and
    // its space (register use differs by layout: a schedule once spilled in three of the four), the epilogue
    // alternating.
    let default = matmul_tf32x3::Schedule::default_for(hopper);
    for (t, e) in transposes.into_iter().zip([plain, full, full, plain]) {
        let spec = spec(t, e);
        jobs.push((
            format!("3xtf32 {} {spec:?}", default.describe()),
            default.candidate(&spec),
            hopper,
        ));
    }
    // The ring's depth changes shared memory, not registers: each (consumers, promotion, accumulators) schedule
    // with the deepest ring compiles in every layout, the shallower ones in one layout each (in turn).
    let space = matmul_tf32x3::Schedule::space();
    let deepest = |s: &matmul_tf32x3::Schedule| {
        space
            .iter()
            .filter(|o| {
                (o.consumers, o.promote_kt, o.split_acc) == (s.consumers, s.promote_kt, s.split_acc)
            })
            .all(|o| o.stages <= s.stages)
    };
    for (i, s) in space.iter().enumerate() {
        for (j, t) in transposes.into_iter().enumerate() {
            if !deepest(s) && j != i % 4 {
                continue;
            }
            let spec = spec(t, [plain, full][(i + j) % 2]);
            jobs.push((
                format!("3xtf32 {} {spec:?}", s.describe()),
                s.candidate(&spec),
                hopper,
            ));
        }
    }
    // Split K (a second launch reduces; its indices take registers): the default's split in every layout, and
    // each two-consumer schedule's (the ones near the register file's end) at its deepest ring in one layout in
    // turn, all with the full epilogue.
    let crowded = |s: &&matmul_tf32x3::Schedule| deepest(s) && (s.consumers == 2 || **s == default);
    for (i, s) in space.iter().filter(crowded).enumerate() {
        let split = matmul_tf32x3::Schedule { split_k: 16, ..*s };
        for (j, t) in transposes.into_iter().enumerate() {
            if *s != default && j != i % 4 {
                continue;
            }
            let spec = spec(t, full);
            jobs.push((
                format!("3xtf32 {} {spec:?}", split.describe()),
                split.candidate(&spec),
                hopper,
            ));
        }
    }
    assert_compiled(&jobs, started);
}

/// The 16-bit kernels a build generates (the `mma.sync` one on sm_80, the `wgmma` one with its SIMT
/// companion as sm_90a on sm_90), bf16 in every layout and f16 in the two extreme ones, plain and with the full epilogue (gelu; silu in
/// one layout), and every tile and ring shape of the `wgmma` schedules the search can reach, each in one layout,
/// type and epilogue in turn.
#[test]
fn every_16_bit_variant_compiles_without_spills() {
    let started = std::time::Instant::now();
    let transposes = [(false, false), (false, true), (true, false), (true, true)];
    let (plain, full, silu) = (
        (false, false, false, None),
        (true, true, true, Some(Activation::Gelu)),
        (true, true, true, Some(Activation::Silu)),
    );
    let types = [DType::Bf16, DType::F16];
    let mut jobs: Vec<Job> = Vec::new();
    for arch in ARCHS {
        for dtype in types {
            for t in transposes {
                // f16 differs from bf16 only in its conversions (operand loads, the epilogue's stores): its
                // two extreme layouts are enough.
                if dtype == DType::F16 && t.0 != t.1 {
                    continue;
                }
                // silu differs from gelu only in the activation: one layout is enough.
                let silu = (t == (true, false)).then_some(silu);
                for e in [Some(plain), Some(full), silu].into_iter().flatten() {
                    let c = optiml_build::families::default_candidate(
                        &optiml_spec::Spec {
                            family: optiml_spec::Family::Matmul(spec(t, e)),
                            dtype,
                            layout: optiml_spec::Layout::RowMajor,
                        },
                        arch,
                    );
                    let image = c.launch.image_arch(arch);
                    jobs.push((format!("{dtype:?} {} {t:?} {e:?}", c.schedule), c, image));
                }
            }
        }
    }
    let hopper = Arch::specific(9, 0);
    // The raster group only reorders tiles (an index computation, no registers): each tile and ring shape once,
    // the group alternating so that both values compile. The whole space is the ignored test's.
    let shapes: Vec<matmul16::Schedule> = matmul16::Schedule::space()
        .into_iter()
        .filter(|s| s.group_m == matmul16::GROUP_M[0])
        .collect();
    let covering = shapes
        .into_iter()
        .enumerate()
        .map(|(i, s)| matmul16::Schedule {
            group_m: matmul16::GROUP_M[i % matmul16::GROUP_M.len()],
            ..s
        });
    for (i, s) in covering.enumerate() {
        let (t, e, dtype) = (
            transposes[i % 4],
            [plain, full, silu][i / 4 % 3],
            types[i / 8 % 2],
        );
        let spec16 = matmul16::Spec16::new(&spec(t, e), dtype).unwrap();
        jobs.push((
            format!("{dtype:?} {} {t:?} {e:?}", s.describe()),
            s.candidate(&spec16),
            hopper,
        ));
    }
    assert_compiled(&jobs, started);
}

/// The whole schedule space (SIMT fp32 and 16-bit `wgmma`) with the plain flags on Hopper (what `is_valid`
/// promises). About 20 minutes on 2 cores:
/// `cargo test -p optiml-build --test nvrtc_compile -- --ignored`.
#[test]
#[ignore = "compiles every schedule (~1600 NVRTC runs, ~20 minutes on 2 cores)"]
fn every_schedule_compiles_without_spills() {
    let started = std::time::Instant::now();
    let arch = Arch::new(9, 0);
    let plain = spec((false, false), (false, false, false, None));
    let mut jobs: Vec<Job> = matmul::Schedule::space()
        .into_iter()
        .map(|s| {
            (
                format!("matmul {}", s.describe()),
                s.candidate(&plain),
                arch,
            )
        })
        .collect();
    let plain16 = matmul16::Spec16::new(&plain, DType::Bf16).unwrap();
    jobs.extend(matmul16::Schedule::space().into_iter().map(|s| {
        (
            format!("bf16 {}", s.describe()),
            s.candidate(&plain16),
            Arch::specific(9, 0),
        )
    }));
    assert_compiled(&jobs, started);
}

#[test]
fn the_matmul_specs_take_every_epilogue_and_every_load_path_with_both_extremes() {
    let specs = matmul_specs();
    let epilogue = |s: &MatmulSpec| (s.alpha, s.beta, s.bias, s.activation);
    let mut epilogues: Vec<_> = specs.iter().map(epilogue).collect();
    epilogues.sort_by_key(|e| format!("{e:?}"));
    epilogues.dedup();
    assert_eq!(epilogues.len(), 32);
    for t in [(false, false), (false, true), (true, false), (true, true)] {
        for e in [
            (false, false, false, None),
            (true, true, true, Some(Activation::Silu)),
        ] {
            assert!(
                specs
                    .iter()
                    .any(|s| (s.trans_a, s.trans_b) == t && epilogue(s) == e),
                "{t:?} {e:?}"
            );
        }
    }
    assert_eq!(specs.len(), 38);
}

#[test]
fn the_covering_subset_takes_every_knob_value_with_every_flag_set() {
    let jobs = covering_jobs();
    let all = matmul::Schedule::space();
    let mut seen: HashSet<(&str, [u32; 5], bool, bool, bool)> = HashSet::new();
    for (s, spec) in &jobs {
        for f in features(s) {
            seen.insert((f.0, f.1, spec.trans_a, spec.trans_b, spec.bias));
        }
    }
    for s in &all {
        assert!(
            seen.iter()
                .any(|f| f.0 == "tile" && f.1 == features(s)[0].1)
        );
        for f in features(s).into_iter().skip(1) {
            for (a, b, e) in [false, true].into_iter().flat_map(|a| {
                [false, true]
                    .into_iter()
                    .flat_map(move |b| [false, true].map(|e| (a, b, e)))
            }) {
                assert!(seen.contains(&(f.0, f.1, a, b, e)), "{f:?} {a} {b} {e}");
            }
        }
    }
    assert_eq!(covering_jobs(), jobs, "not deterministic");
    eprintln!("{} covering jobs over {} schedules", jobs.len(), all.len());
}
