//! Every variant the experts can generate compiles with the pinned NVRTC for sm_80 and sm_90, to a CUBIN with no
//! register spills and PTX for the same target. Needs NVRTC (`.ci/run` installs the wheel and sets OPTIML_NVRTC);
//! without it this test fails rather than passing silently.

#![allow(clippy::unwrap_used)]

use optiml_build::experts::{self, Candidate, elementwise, matmul};
use optiml_build::nvrtc;
use optiml_runtime::Arch;
use optiml_spec::{
    Activation, BinaryOp, Dim, ElementwiseOp, ElementwiseSpec, MatmulSpec, Operand, UnaryOp,
};

const ARCHS: [Arch; 2] = [Arch::new(8, 0), Arch::new(9, 0)];

fn spec(trans: (bool, bool), epilogue: (bool, bool, bool, Option<Activation>)) -> MatmulSpec {
    MatmulSpec {
        batched: true,
        trans_a: trans.0,
        trans_b: trans.1,
        alpha: epilogue.0,
        beta: epilogue.1,
        bias: epilogue.2,
        activation: epilogue.3,
        batch: Dim::Runtime,
        m: Dim::Runtime,
        n: Dim::Runtime,
        k: Dim::Runtime,
    }
}

/// The operand loads (4 transpose combinations) and the epilogue (24 combinations) are separate parts of the
/// template: every epilogue is compiled with both extreme load paths and every load path with both extreme
/// epilogues, which covers each part's every variant and their interactions at the corners, in 52 compiles per
/// architecture instead of 96.
fn matmul_specs() -> Vec<MatmulSpec> {
    let transposes = [(false, false), (false, true), (true, false), (true, true)];
    let mut epilogues = Vec::new();
    for bits in 0..8u32 {
        for act in [None, Some(Activation::Relu), Some(Activation::Gelu)] {
            epilogues.push((bits & 1 != 0, bits & 2 != 0, bits & 4 != 0, act));
        }
    }
    let (plain, full) = (epilogues[0], epilogues[epilogues.len() - 1]);
    let mut out = Vec::new();
    for e in &epilogues {
        for t in [(false, false), (true, true)] {
            out.push(spec(t, *e));
        }
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

fn elementwise_specs() -> Vec<ElementwiseSpec> {
    let mut ops: Vec<ElementwiseOp> = [
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::Silu,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
    ]
    .map(ElementwiseOp::Unary)
    .to_vec();
    for b in [BinaryOp::Add, BinaryOp::Mul] {
        for o in [Operand::Tensor, Operand::Scalar] {
            ops.push(ElementwiseOp::Binary(b, o));
        }
    }
    ops.into_iter()
        .map(|op| ElementwiseSpec {
            op,
            n: Dim::Runtime,
        })
        .collect()
}

#[test]
fn every_generated_variant_compiles_without_spills() {
    let nvrtc = nvrtc::load().unwrap_or_else(|e| panic!("{e}\nhelp: {}", nvrtc::INSTALL_HINT));
    let mut jobs: Vec<(String, Candidate, Arch)> = Vec::new();
    for arch in ARCHS {
        // The default schedule with every epilogue and transpose combination: what a build generates today.
        for spec in matmul_specs() {
            let c = matmul::Schedule::default_for(arch).candidate(&spec);
            jobs.push((format!("matmul {spec:?}"), c, arch));
        }
        // Every schedule the template supports (what the search will explore), plain spec, on Hopper.
        if arch == Arch::new(9, 0) {
            for schedule in matmul::Schedule::all() {
                jobs.push((
                    format!("matmul {}", schedule.describe()),
                    schedule.candidate(&matmul_specs()[0]),
                    arch,
                ));
            }
        }
        for spec in elementwise_specs() {
            jobs.push((
                format!("elementwise {:?}", spec.op),
                elementwise::Schedule::default_for(arch).candidate(&spec),
                arch,
            ));
        }
    }
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let jobs = &jobs;
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
    });
    assert!(
        failures.is_empty(),
        "{} of {} variants failed:\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n")
    );
    eprintln!(
        "{} variants compiled ({})",
        jobs.len(),
        experts::generator_version()
    );
}
