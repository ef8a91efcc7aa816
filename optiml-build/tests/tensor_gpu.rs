//! The tensor family's generated kernels on a real GPU: for every KernelBench operator of the target list (and a
//! few 16-bit and integer-output variants), the default schedule and a spread of its schedule space pass the
//! gate (the float64 interpreter on odd shapes and stressing inputs) and are timed. Run on the H200
//! (`../shared/gpu/stage`); without a GPU these tests are ignored, never silently passed.

#![allow(clippy::unwrap_used)]

use optiml_build::eval::{EvalSetup, Evaluable, GpuEvaluator, TimingPlan, WorkerCommand};
use optiml_build::families::tensor::codegen::{
    self, ColumnSchedule, PointwiseSchedule, RowSchedule, ScanSchedule, Shape, TreeSchedule,
};
use optiml_build::families::tensor::{Extents, gate, min_bytes};
use optiml_build::search::{Evaluator, Outcome, Tunable};
use optiml_runtime::Arch;
use optiml_spec::program::Program;
use std::path::PathBuf;

/// `cargo-optiml` serves as the worker: built beside this test here, staged beside it on the GPU machine.
/// `OPTIML_TEST_WORKER_WRAP` (a command line) runs it under a tool, such as `compute-sanitizer --tool memcheck
/// --log-file cs.log --error-exitcode 9` (the tool must keep standard output, the worker's protocol, clean).
fn worker() -> WorkerCommand {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_cargo-optiml"));
    let program = if built.exists() {
        built
    } else {
        std::env::current_exe()
            .expect("current exe")
            .with_file_name("cargo-optiml")
    };
    let wrap = optiml_spec::env::var_os("OPTIML_TEST_WORKER_WRAP")
        .map(|w| w.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut words = wrap.split_whitespace().map(std::ffi::OsString::from);
    match words.next() {
        Some(tool) => WorkerCommand {
            program: PathBuf::from(tool),
            args: words.chain([program.into_os_string()]).collect(),
        },
        None => WorkerCommand {
            program,
            args: Vec::new(),
        },
    }
}

/// The generator shape of the tensor program `text` declares.
fn shape_of(text: &str) -> Shape {
    let spec = optiml_spec::parse(text).unwrap();
    let optiml_spec::Family::Tensor(program) = &spec.family else {
        panic!("{text} is not a tensor program");
    };
    codegen::classify(program).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Evaluates a sweep's `schedules` at `extents`, printing and collecting the rejections into `failures`.
fn sweep<S: Evaluable<Shape = Extents>>(
    name: &str,
    spec: S::Spec,
    program: &Program,
    schedules: Vec<S>,
    extents: Vec<usize>,
    failures: &mut Vec<String>,
) {
    let (_, f) = evaluate_at(name, spec, program, schedules, extents);
    f.iter().for_each(|l| println!("REJECTED {l}"));
    failures.extend(f);
}

fn arch() -> Arch {
    let ctx = optiml_runtime::probe::context(0).expect("a CUDA device");
    optiml_runtime::probe::arch_of(&ctx).expect("its architecture")
}

/// The plain-words specs of the target list that the generator covers, then 16-bit and index-type variants.
const SPECS: &[&str] = &[
    "matrix scalar multiplication",
    "diag(A) @ B",
    "leaky relu, negative slope 0.01",
    "softmax over the last axis",
    "log-softmax, dim=1",
    "selu",
    "hardsigmoid",
    "softplus",
    "softsign",
    "elu, alpha 1.0",
    "hardtanh, min -1, max 1",
    "instance norm",
    "group norm, groups 8",
    "rms norm over dim 1 of a 4-D tensor, eps 1e-5",
    "l1 norm over dim 1",
    "l2 norm along rows",
    "layer norm over the last 3 axes of a 4-D tensor with affine weight and bias",
    "sum over dim 1 of a 3-D tensor, keep dims",
    "mean over dim 1 of a 3-D tensor",
    "max reduction over dim 1 of a 3-D tensor",
    "argmax over dim 1 of a 3-D tensor",
    "argmin over dim 1 of a 3-D tensor",
    "min over dim 1 of a 3-D tensor",
    "minGPT new gelu",
    "batch norm, training mode, eps 1e-5",
    "frobenius norm",
    "batch norm, training mode, bf16",
    "y = mean(i, j) (a[i, j] - b[i, j])^2",
    "mse loss",
    "smooth l1 loss",
    "hinge loss",
    "kl divergence, batchmean",
    "triplet margin loss, margin 1.0",
    "triplet margin loss, bf16",
    "cross entropy loss",
    "m[r] = max(c) x[r, c]; s[r] = sum(c) exp(x[r, c] - m[r]); lo = min(r) m[r]; \
     y = sum(r) log(s[r]) * w[r] * 0.5 + lo; z = max(r) s[r]",
    "y[i] = relu(x[i])",
    "y[i] = x[i] * sigmoid(x[i])",
    "softmax over the last axis, bf16",
    "rmsnorm over the last axis, bf16",
    "layer norm, bf16",
    "argmax over dim 1 of a 3-D tensor, i32 indices",
    "sum over dim 1 of a 3-D tensor, f16",
    "cumsum along dim 1",
    "cumprod along dim 1",
    "reverse cumsum along dim 1",
    "exclusive cumsum along dim 1",
    "masked cumsum along dim 1",
    "cumsum along dim 1, bf16",
    "y[a, b, k] = cumsum(b, reverse, exclusive) x[a, b, k] * m[a, b, k], bool m",
    "y[a, b, k] = cummax(b) x[a, b, k], bf16",
    "y[a, b, k] = cumprod(b) (x[a, b, k] * w[b] + s)",
];

/// A dispatch size of about 2²⁴ elements: reduced dimensions 4096 (2048 in 4-D programs), the others sharing
/// the rest. A program that reduces every dimension (a Frobenius norm, a loss) shrinks its largest one: it kept
/// the build's 2²⁶ elements, whose float64 reference the gate computes in full for every candidate (the likely
/// reason the Frobenius landscape did not finish in 120 s on the H200).
fn dispatch(p: &Program) -> Vec<usize> {
    let mut e = optiml_build::families::tensor::default_extents(p);
    let total: usize = e.iter().product::<usize>().max(1);
    let shrink = (total / (1 << 24)).max(1);
    let reduced = p.reduced_dims();
    let runtime = |i: &usize| p.dims[*i].size == optiml_spec::Dim::Runtime;
    let kept = (0..e.len()).find(|i| !reduced.contains(i) && runtime(i));
    if let Some(o) = kept.or_else(|| (0..e.len()).filter(runtime).max_by_key(|&i| e[i])) {
        e[o] = (e[o] / shrink).max(1);
    }
    e
}

/// Up to `n` schedules spread over the space, the default first.
fn spread<S: Tunable>(arch: Arch, n: usize) -> Vec<S> {
    let space = S::space();
    let mut out = vec![S::default_for(arch)];
    let step = (space.len() / n.max(1)).max(1);
    out.extend(
        space
            .into_iter()
            .step_by(step)
            .filter(|s| *s != S::default_for(arch)),
    );
    out.truncate(n + 1);
    out
}

/// Evaluates `schedules` of one program; returns one line per schedule and the failures.
fn evaluate<S: Evaluable<Shape = Extents>>(
    name: &str,
    spec: S::Spec,
    program: &Program,
    schedules: Vec<S>,
) -> (Vec<String>, Vec<String>) {
    evaluate_at(name, spec, program, schedules, dispatch(program))
}

/// An evaluator of one program's `S` schedules on GPU 0: its gate, with `extents` as the dispatch size.
fn evaluator<S: Evaluable<Shape = Extents>>(
    name: &str,
    spec: S::Spec,
    program: &Program,
    extents: &[usize],
    seed: u64,
) -> GpuEvaluator<S> {
    GpuEvaluator::<S>::new(
        optiml_build::nvrtc::load().expect("NVRTC"),
        EvalSetup {
            name: name.into(),
            plan: gate::test_plan(program, &[]),
            spec,
            arch: arch(),
            dispatch: Extents::new(extents).unwrap(),
            timing: TimingPlan::default(),
            worker: worker(),
            device: 0,
            compile_threads: 8,
            seed,
            ncu: None,
        },
    )
    .expect("an evaluator on GPU 0")
}

/// [`evaluate`] at the dispatch size `extents`.
fn evaluate_at<S: Evaluable<Shape = Extents>>(
    name: &str,
    spec: S::Spec,
    program: &Program,
    schedules: Vec<S>,
    extents: Vec<usize>,
) -> (Vec<String>, Vec<String>) {
    let mut evaluator = evaluator::<S>(name, spec, program, &extents, 7);
    let bytes = min_bytes(program, &extents);
    let (mut lines, mut failures) = (Vec::new(), Vec::new());
    for s in schedules {
        // Sweeps print each measurement as it lands, so a run cut short keeps what it measured.
        let outcome = evaluator.evaluate(&s);
        if let Outcome::Measured(m) = &outcome {
            println!(
                "measured {name} | {} | {:.4} ms | {:.2} TB/s",
                s.describe(),
                m.time_ms,
                bytes / (m.time_ms * 1e-3) / 1e12
            );
        }
        match outcome {
            Outcome::Measured(m) => lines.push(format!(
                "{name} | {} | {:.4} ms | {:.2} TB/s",
                s.describe(),
                m.time_ms,
                bytes / (m.time_ms * 1e-3) / 1e12
            )),
            Outcome::Rejected(reason) => {
                failures.push(format!("{name} | {}: {reason}", s.describe()))
            }
        }
    }
    (lines, failures)
}

/// The elementwise phrases (a map, a sum of two tensors, a scaled tensor) are flat programs: their default
/// candidate passes the gate and is timed, and the same kernel writing only half its output is rejected, as is
/// the map replaying an output it kept from an earlier run (the last timed run reads another input set) and the
/// map wrong in one element of the dispatch size only.
#[test]
#[ignore = "needs a CUDA GPU"]
fn elementwise_phrases_pass_the_gate_and_a_half_written_output_does_not() {
    let arch = arch();
    for text in ["y = gelu(x)", "z = x + y", "y = x * s"] {
        let Shape::Pointwise(shape) = shape_of(text) else {
            panic!("{text} is not pointwise");
        };
        let program = shape.program.clone();
        let extents = dispatch(&program);
        let good = Shape::Pointwise(shape.clone()).default_candidate(arch);
        let mut evaluator = evaluator::<PointwiseSchedule>(text, shape, &program, &extents, 9);
        let (outcome, _) = evaluator.evaluate_candidate(&good);
        let Outcome::Measured(m) = outcome else {
            panic!("{text}: {outcome:?}")
        };
        println!("{text}: {:.4} ms", m.time_ms);
        let total = "const long long total = n0;";
        assert!(good.source.contains(total), "{text}: the loop bound moved");
        let half = optiml_build::experts::Candidate {
            source: good
                .source
                .replace(total, "const long long total = n0 / 2;"),
            schedule: "broken: half the output".into(),
            ..good
        };
        let (broken, _) = evaluator.evaluate_candidate(&half);
        assert!(
            matches!(&broken, Outcome::Rejected(why) if why.starts_with("gate:")),
            "{text}: {broken:?}"
        );
        if text == "y = gelu(x)" {
            let replay = replaying(&good);
            let (outcome, _) = evaluator.evaluate_candidate(&replay);
            assert!(
                matches!(&outcome, Outcome::Rejected(why) if why.contains("after the last timed run")),
                "{text}, replaying a kept output: {outcome:?}"
            );
            println!("{text}, replaying a kept output: {outcome:?}");
            // Every element of the dispatch size is checked (on the GPU): one wrong element fails.
            let (outcome, _) = evaluator.evaluate_candidate(&wrong_at_the_dispatch_size(&good));
            assert!(
                matches!(&outcome, Outcome::Rejected(why) if why.contains("(dispatch size)") && why.contains("after the first run")),
                "{text}, one element wrong at the dispatch size: {outcome:?}"
            );
            println!("{text}, one element wrong at the dispatch size: {outcome:?}");
        }
    }
}

/// A user's seed kernel (the test crate's hand-written row softmax) passes the softmax program's gate under the
/// seed contract and is timed beside the generated default; the same seed skipping each row's last element, and
/// one that ignores the grid's loop (only the first 8 blocks' rows are written), are rejected.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_seed_passes_the_gate_and_a_broken_seed_does_not() {
    let text = "softmax over the last axis, f32";
    let Shape::Rows(shape) = shape_of(text) else {
        panic!("{text} is not a row program");
    };
    let program = shape.program.clone();
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/kernels/kernels/softmax_rows.cu"
    );
    let source = std::fs::read_to_string(file).unwrap();
    let seed = |text: String| optiml_build::scan::SeedSource {
        seed: optiml_spec::Seed::parse("kernels/softmax_rows.cu:softmax_rows").unwrap(),
        path: file.into(),
        text,
    };
    let root = |text: String| {
        optiml_build::families::tensor::contract::seed_root(&program, &seed(text)).unwrap()
    };
    let extents = dispatch(&program);
    let mut evaluator = evaluator::<RowSchedule>(text, shape.clone(), &program, &extents, 11);
    let default = Shape::Rows(shape).default_candidate(arch());
    let (generated, _) = evaluator.evaluate_candidate(&default);
    let Outcome::Measured(g) = generated else {
        panic!("the generated default: {generated:?}")
    };
    let (outcome, compiled) = evaluator.evaluate_candidate(&root(source.clone()).candidate);
    let Outcome::Measured(m) = outcome else {
        panic!("the seed: {outcome:?}")
    };
    assert!(compiled.is_some());
    println!(
        "seed {:.4} ms, generated default {:.4} ms at {extents:?}",
        m.time_ms, g.time_ms
    );
    let last = "for (long long c = threadIdx.x; c < cols; c += blockDim.x) out[c]";
    assert!(source.contains(last), "the seed's store moved");
    let short = source.replace(
        last,
        "for (long long c = threadIdx.x; c < cols - 1; c += blockDim.x) out[c]",
    );
    let grid = "r += gridDim.x";
    assert!(source.contains(grid), "the seed's row loop moved");
    let unlooped = source.replace(grid, "r += rows");
    for (what, broken) in [
        ("skips the last column", short),
        ("ignores the grid loop", unlooped),
    ] {
        let (outcome, _) = evaluator.evaluate_candidate(&root(broken).candidate);
        assert!(
            matches!(&outcome, Outcome::Rejected(why) if why.starts_with("gate:")),
            "a seed that {what}: {outcome:?}"
        );
        println!("a seed that {what}: {outcome:?}");
    }
}

/// A 16-bit program's seed reads and writes raw bits through `optiml/program.cuh`'s conversions (the root
/// includes it): it passes the bf16 gate, and one that rounds its outputs to the wrong 16-bit type does not.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_sixteen_bit_seed_passes_the_gate_and_a_mistyped_one_does_not() {
    let text = "gelu, bf16";
    let Shape::Pointwise(shape) = shape_of(text) else {
        panic!("{text} is not a pointwise program");
    };
    let program = shape.program.clone();
    let good = "__global__ void gelu16(const unsigned short* x, unsigned short* y, long long n) {\n\
        for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x) {\n\
            const float v = optiml_p::bf16_to_f32(x[i]);\n\
            y[i] = optiml_p::f32_to_bf16(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));\n\
        }\n}\n";
    let root = |text: &str| {
        let seed = optiml_build::scan::SeedSource {
            seed: optiml_spec::Seed::parse("kernels/gelu16.cu:gelu16").unwrap(),
            path: "kernels/gelu16.cu".into(),
            text: text.into(),
        };
        optiml_build::families::tensor::contract::seed_root(&program, &seed).unwrap()
    };
    let extents = dispatch(&program);
    let mut evaluator = evaluator::<PointwiseSchedule>(text, shape, &program, &extents, 12);
    let (outcome, _) = evaluator.evaluate_candidate(&root(good).candidate);
    let Outcome::Measured(m) = outcome else {
        panic!("the bf16 seed: {outcome:?}")
    };
    println!("bf16 seed {:.4} ms at {extents:?}", m.time_ms);
    let mistyped = good.replace("f32_to_bf16", "f32_to_f16");
    let (outcome, _) = evaluator.evaluate_candidate(&root(&mistyped).candidate);
    assert!(
        matches!(&outcome, Outcome::Rejected(why) if why.starts_with("gate:")),
        "a seed that stores f16 bits as bf16: {outcome:?}"
    );
    println!("a seed that stores f16 bits as bf16: {outcome:?}");
}

/// `good` (a one-input f32 map) made to keep its output: it computes at a size it has not seen, the last block
/// to finish copies the output into a buffer of its own, and at the size it last kept it copies that buffer out
/// without reading its input. Every run of one size but the first then replays the first one's output: right as
/// long as the inputs stay the same, and caught only by a last run on another input set.
fn replaying(good: &optiml_build::experts::Candidate) -> optiml_build::experts::Candidate {
    wrapped(
        good,
        "broken: replays a kept output",
        r#"
__device__ float optiml_kept[1 << 25];
__device__ long long optiml_kept_n = -1;
__device__ unsigned optiml_done;
extern "C" __global__ void __launch_bounds__(128) optiml_program(const T* in0, T* out0, long long n0_arg) {
    const long long n = n0_arg < (1 << 25) ? n0_arg : (1 << 25);
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x, nth = (long long)gridDim.x * blockDim.x;
    if (n == *(volatile long long*)&optiml_kept_n) {
        for (long long e = tid; e < n; e += nth) out0[e] = optiml_kept[e];
        return;
    }
    optiml_inner(in0, out0, n0_arg);
    __threadfence();
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&optiml_done, 1) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    for (long long e = threadIdx.x; e < n; e += blockDim.x) optiml_kept[e] = ((volatile float*)out0)[e];
    __syncthreads();
    if (threadIdx.x == 0) { optiml_done = 0; __threadfence(); optiml_kept_n = n; }
}
"#,
    )
}

/// `good` (a one-input f32 map) made wrong by 1% in one element near the middle of its output, only past 2²²
/// elements: at the dispatch size, never at a plan size. The last block to finish writes it, after every other
/// block has written its part.
fn wrong_at_the_dispatch_size(
    good: &optiml_build::experts::Candidate,
) -> optiml_build::experts::Candidate {
    wrapped(
        good,
        "broken: one element wrong at the dispatch size",
        r#"
__device__ unsigned optiml_done;
extern "C" __global__ void __launch_bounds__(128) optiml_program(const T* in0, T* out0, long long n0_arg) {
    optiml_inner(in0, out0, n0_arg);
    if (n0_arg <= (1 << 22)) return;
    __threadfence();
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&optiml_done, 1) == gridDim.x - 1;
    __syncthreads();
    if (!last || threadIdx.x != 0) return;
    const long long at = n0_arg / 2 + 12345;
    ((volatile T*)out0)[at] = ((volatile T*)out0)[at] * (T)1.01f + (T)0.01f;
    optiml_done = 0;
}
"#,
    )
}

/// `good` (a one-input f32 map) with its entry renamed `optiml_inner` and `entry` (defining a new
/// `optiml_program`) after it.
fn wrapped(
    good: &optiml_build::experts::Candidate,
    what: &str,
    entry: &str,
) -> optiml_build::experts::Candidate {
    let old = "extern \"C\" __global__ void __launch_bounds__(128) optiml_program(const T* in0, T* out0, long long n0_arg) {";
    assert!(good.source.contains(old), "the map's entry changed");
    let source = good.source.replace(
        old,
        "__device__ void optiml_inner(const T* in0, T* out0, long long n0_arg) {",
    ) + entry;
    optiml_build::experts::Candidate {
        source,
        schedule: what.into(),
        ..good.clone()
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_target_program_passes_the_gate_across_its_schedule_space() {
    let arch = arch();
    let per = optiml_spec::env::var_os("OPTIML_TENSOR_SCHEDULES")
        .and_then(|v| v.to_str().and_then(|v| v.parse().ok()))
        .unwrap_or(5);
    // `OPTIML_TENSOR_CLASS` (pointwise, rows, columns, tree, scan) keeps the programs of one generator.
    let class =
        optiml_spec::env::var_os("OPTIML_TENSOR_CLASS").map(|c| c.to_string_lossy().into_owned());
    // `OPTIML_TENSOR_ONLY` (texts separated by `|`) keeps the specs that hold one of them.
    let only =
        optiml_spec::env::var_os("OPTIML_TENSOR_ONLY").map(|c| c.to_string_lossy().into_owned());
    let (mut lines, mut failures) = (Vec::new(), Vec::new());
    for text in SPECS {
        let shape = shape_of(text);
        if class.as_deref().is_some_and(|c| c != shape.class()) {
            continue;
        }
        if only
            .as_deref()
            .is_some_and(|o| !o.split('|').any(|t| text.contains(t)))
        {
            continue;
        }
        let lowered = shape.program().clone();
        let (l, f) = match shape {
            Shape::Pointwise(s) => {
                // The program's own default (what a build compiles) besides the spread.
                let mut schedules = spread::<PointwiseSchedule>(arch, per);
                let own = PointwiseSchedule::for_program(&s, arch);
                if !schedules.contains(&own) {
                    schedules.push(own);
                }
                evaluate(text, s, &lowered, schedules)
            }
            Shape::Rows(s) => {
                // The row-length buckets' defaults (what a build compiles) besides the spread: a tree where
                // the bucket's rows are too long for the row kernel to read them as few times.
                let mut schedules = spread::<RowSchedule>(arch, per);
                let mut tree = None;
                for len in codegen::ROW_BUCKETS {
                    if let Some(t) = codegen::TreeShape::for_long_rows(&s, len, arch) {
                        tree = Some(t);
                        continue;
                    }
                    let b = RowSchedule::for_row(&s, len, arch);
                    if !schedules.contains(&b) {
                        schedules.push(b);
                    }
                }
                let (mut l, mut f) = evaluate(text, s, &lowered, schedules);
                if let Some(t) = tree {
                    let (tl, tf) =
                        evaluate(text, t, &lowered, vec![TreeSchedule::default_for(arch)]);
                    l.extend(tl);
                    f.extend(tf);
                }
                (l, f)
            }
            Shape::Columns(s) => evaluate(text, s, &lowered, spread::<ColumnSchedule>(arch, per)),
            Shape::Tree(s) => evaluate(text, s, &lowered, spread::<TreeSchedule>(arch, per)),
            Shape::Scan(s) => {
                // Both defaults a build compiles (many lines; few long lines, split) besides the spread.
                let mut schedules = spread::<ScanSchedule>(arch, per);
                for own in [
                    ScanSchedule::for_scan(&s, arch),
                    ScanSchedule::for_long_lines(arch),
                ] {
                    if !schedules.contains(&own) {
                        schedules.push(own);
                    }
                }
                evaluate(text, s, &lowered, schedules)
            }
        };
        for line in &l {
            println!("{line}");
        }
        for line in &f {
            println!("REJECTED {line}");
        }
        lines.extend(l);
        failures.extend(f);
    }
    assert!(
        failures.is_empty(),
        "{} rejected:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(!lines.is_empty());
}

/// Long rows at (a slice of) their KernelBench shapes, across cluster sizes, block sizes and shared-memory levels:
/// the measurements behind `RowSchedule::for_row`. Every schedule must pass the gate.
#[test]
#[ignore = "needs a CUDA GPU"]
fn long_rows_across_clusters() {
    let arch = arch();
    // Slices of the KernelBench shapes (about 256 MiB each, so the gate's copies stay short): the row lengths
    // are the real ones. `OPTIML_LONG_ROWS_FULL=1`: the whole KernelBench shapes, whose row counts change
    // which schedule wins (a slice of 256 softmax rows fills 2048 blocks of a cluster of 8, the whole 4096 rows
    // 32768).
    let layer_norm = "layer norm over the last 3 axes of a 4-D tensor with affine weight and bias";
    let cases: &[(&str, &[usize])] = if optiml_spec::env::var_os("OPTIML_LONG_ROWS_FULL").is_some()
    {
        &[
            ("softmax over the last axis", &[4096, 393216]),
            ("log-softmax, dim=1", &[4096, 393216]),
            ("instance norm", &[112, 64, 512, 512]),
            ("l1 norm over dim 1", &[32768, 65535]),
            ("l2 norm along rows", &[32768, 65535]),
            ("group norm, groups 8", &[112, 64, 512, 512]),
            (layer_norm, &[16, 64, 256, 256]),
        ]
    } else {
        &[
            ("softmax over the last axis", &[256, 393216]),
            ("instance norm", &[4, 64, 512, 512]),
            ("group norm, groups 8", &[4, 8, 512, 512]),
            (layer_norm, &[16, 64, 256, 256]),
            ("l2 norm along rows", &[1024, 65535]),
        ]
    };
    // `OPTIML_LONG_ROWS` keeps the cases whose spec contains it.
    let only =
        optiml_spec::env::var_os("OPTIML_LONG_ROWS").map(|c| c.to_string_lossy().into_owned());
    let mut failures = Vec::new();
    for (text, extents) in cases {
        if only.as_deref().is_some_and(|o| !text.contains(o)) {
            continue;
        }
        let Shape::Rows(shape) = shape_of(text) else {
            panic!("{text} is not a row program");
        };
        let lowered = shape.program.clone();
        let extents = lowered.extents(extents).unwrap();
        let row: usize = lowered.reduced_dims().iter().map(|&d| extents[d]).product();
        let mut schedules = vec![RowSchedule::for_row(&shape, row, arch)];
        // `OPTIML_LONG_ROWS_CLUSTER=8` keeps the clusters listed (comma separated): a full-size sweep of every
        // point runs past a device call's ten minutes.
        let clusters: Vec<u32> = match optiml_spec::env::var("OPTIML_LONG_ROWS_CLUSTER") {
            Some(list) => list
                .split(',')
                .filter_map(|c| c.trim().parse().ok())
                .collect(),
            None => vec![1, 2, 4, 8],
        };
        for cluster in clusters {
            for row_threads in [512, 1024] {
                for (smem_kib, unroll) in [(0, 4), (0, 8), (100, 4), (220, 4), (220, 8)] {
                    // Each point with and without L2 hints, side by side.
                    for l2 in [0, 1] {
                        let mut s = RowSchedule {
                            row_threads,
                            rows_per_block: 1,
                            reg_chunks: 32,
                            smem_kib,
                            unroll,
                            blocks_per_sm: 0,
                            cluster,
                            l2,
                            prefetch: false,
                        };
                        while !s.is_valid() && s.reg_chunks > 0 {
                            s.reg_chunks /= 2;
                        }
                        if s.is_valid() && !schedules.contains(&s) {
                            schedules.push(s);
                        }
                    }
                }
            }
        }
        sweep(text, shape, &lowered, schedules, extents, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Long rows held in the shared memory of a persistent grid of clusters (the clusters resident at once loop
/// over the rows), with and without the next row's part loaded during each row's last pass: the ring that
/// `bench/harness/softmax_ring` measured at 89% of the copy bandwidth (two passes from DRAM: 65%), as schedules
/// of the generated row kernel. Every schedule must pass the gate; each prints its time beside `for_row`'s.
#[test]
#[ignore = "needs a CUDA GPU"]
fn rows_held_on_chip_load_the_next_row_during_the_last_pass() {
    let arch = arch();
    let full = optiml_spec::env::var_os("OPTIML_LONG_ROWS_FULL").is_some();
    let cases: &[(&str, &[usize])] = if full {
        &[
            ("softmax over the last axis", &[4096, 393216]),
            ("log-softmax, dim=1", &[4096, 393216]),
            ("instance norm", &[112, 64, 512, 512]),
            ("l2 norm along rows", &[32768, 65535]),
        ]
    } else {
        &[
            ("softmax over the last axis", &[512, 393216]),
            ("instance norm", &[8, 64, 512, 512]),
            ("l2 norm along rows", &[2048, 65535]),
            // Per-row values only: the refills come in the last reduction pass (rows of 65536: every row
            // aligned, so every row after a block's first reads the copies).
            (
                "m[r] = mean(c) x[r, c]; v[r] = mean(c) (x[r, c] - m[r])^2",
                &[2048, 65536],
            ),
        ]
    };
    let mut failures = Vec::new();
    for (text, extents) in cases {
        let Shape::Rows(shape) = shape_of(text) else {
            panic!("{text} is not a row program");
        };
        let lowered = shape.program.clone();
        let extents = lowered.extents(extents).unwrap();
        let row: usize = lowered.reduced_dims().iter().map(|&d| extents[d]).product();
        let mut schedules = vec![RowSchedule::for_row(&shape, row, arch)];
        for cluster in [2, 4, 8] {
            for row_threads in [512, 1024] {
                for reg_chunks in [0, 8] {
                    for prefetch in [false, true] {
                        let s = RowSchedule {
                            row_threads,
                            rows_per_block: 1,
                            reg_chunks,
                            smem_kib: 220,
                            unroll: 4,
                            blocks_per_sm: 1,
                            cluster,
                            l2: 0,
                            prefetch,
                        };
                        if s.is_valid() && !schedules.contains(&s) {
                            schedules.push(s);
                        }
                    }
                }
            }
        }
        sweep(text, shape, &lowered, schedules, extents, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The pointwise launch space at a KernelBench map's shape (a slice of 4096 × 393216), and odd-length rows (L1
/// norm over rows of 65535, which take the element-wise path): the measurements behind those defaults.
#[test]
#[ignore = "needs a CUDA GPU"]
fn maps_and_odd_rows_across_launch_shapes() {
    let arch = arch();
    let mut failures = Vec::new();
    let Shape::Pointwise(shape) = shape_of("y[i] = relu(x[i])") else {
        panic!("relu is not pointwise");
    };
    let lowered = shape.program.clone();
    let extents = lowered.extents(&[1024 * 393216]).unwrap();
    let schedules: Vec<PointwiseSchedule> = PointwiseSchedule::space()
        .into_iter()
        .filter(|s| s.threads >= 256 && s.unroll >= 2)
        .collect();
    sweep("relu", shape, &lowered, schedules, extents, &mut failures);

    let Shape::Rows(shape) = shape_of("l1 norm over dim 1") else {
        panic!("l1 norm is not a row program");
    };
    let lowered = shape.program.clone();
    let extents = lowered.extents(&[4096, 65535]).unwrap();
    let mut schedules = vec![
        RowSchedule::for_row(&shape, 65535, arch),
        RowSchedule::for_row(&shape, 131072, arch),
    ];
    for cluster in [1, 2, 4] {
        for row_threads in [256, 512, 1024] {
            for unroll in [4, 8] {
                let s = RowSchedule {
                    row_threads,
                    rows_per_block: 1,
                    reg_chunks: 0,
                    smem_kib: 0,
                    unroll,
                    blocks_per_sm: 0,
                    cluster,
                    l2: 0,
                    prefetch: false,
                };
                if s.is_valid() && !schedules.contains(&s) {
                    schedules.push(s);
                }
            }
        }
    }
    sweep(
        "l1 norm",
        shape,
        &lowered,
        schedules,
        extents,
        &mut failures,
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Trees at (slices of) their KernelBench shapes, across block sizes, loads in flight and grid sizes: the
/// measurements behind `TreeSchedule::default_for`. Every schedule must pass the gate.
#[test]
#[ignore = "needs a CUDA GPU"]
fn trees_across_launch_shapes() {
    let cases: &[(&str, &[usize])] = &[
        ("batch norm, training mode, eps 1e-5", &[4, 64, 512, 512]),
        ("frobenius norm", &[4 * 64 * 512 * 512]),
        ("group norm, groups 8", &[4, 8, 512, 512]),
    ];
    let mut failures = Vec::new();
    for (text, extents) in cases {
        let shape = match shape_of(text) {
            Shape::Tree(t) => t,
            // A long-row program's tree variant.
            Shape::Rows(r) => codegen::TreeShape::for_long_rows(&r, 1 << 23, arch()).unwrap(),
            _ => panic!("{text} is not a tree program"),
        };
        let lowered = shape.program.clone();
        let extents = lowered.extents(extents).unwrap();
        let schedules: Vec<TreeSchedule> = TreeSchedule::space()
            .into_iter()
            .filter(|s| s.threads <= 512 && s.threads >= 256 && s.unroll >= 4 && s.blocks >= 528)
            .collect();
        sweep(text, shape, &lowered, schedules, extents, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// KernelBench 40 whole (a layer norm over rows of 4M elements, 16 rows sharing an affine weight and bias of
/// 4M elements each: a tree) in both block orders: item-major, the 132 blocks resident at once span two rows
/// and the weight comes from DRAM again for every other row; slice-major, they hold one slice of every row and
/// it comes once. Every schedule must pass the gate; the lines give the times side by side.
#[test]
#[ignore = "needs a CUDA GPU"]
fn layer_norm_trees_in_both_block_orders() {
    let text = "layer norm over the last 3 axes of a 4-D tensor with affine weight and bias";
    let Shape::Rows(rows) = shape_of(text) else {
        panic!("{text} is not a row program");
    };
    let shape = codegen::TreeShape::for_long_rows(&rows, 1 << 22, arch()).expect("a tree");
    let lowered = shape.program.clone();
    let extents = lowered.extents(&[16, 64, 256, 256]).unwrap();
    let schedules: Vec<TreeSchedule> = TreeSchedule::space()
        .into_iter()
        .filter(|s| {
            [256, 512].contains(&s.threads) && s.unroll >= 2 && [1056, 2112].contains(&s.blocks)
        })
        .collect();
    assert!(schedules.iter().any(|s| s.interleave) && schedules.iter().any(|s| !s.interleave));
    let mut failures = Vec::new();
    sweep(text, shape, &lowered, schedules, extents, &mut failures);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The pointwise launch space at small KernelBench maps (12: diag(A)·B over 4096 × 4096; 88: minGPT gelu over
/// 8192 × 8192, 256 MiB in and out), where a launch is tens of microseconds: the measurements behind the
/// pointwise size buckets.
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_maps_across_launch_shapes() {
    sweep_maps(
        &[
            ("diag(A) @ B", &[4096, 4096]),
            ("minGPT new gelu", &[8192 * 8192]),
        ],
        |s| s.threads <= 512 && s.unroll <= 4,
    );
}

/// The pointwise launch space at the full KernelBench map size (4096 × 393216 f32, 6 GiB in and out), for a light
/// map (relu) and a heavy one (sigmoid): the looping grid of the defaults against one pass (a block per
/// `threads × unroll` chunks, as PyTorch's eager maps launch).
#[test]
#[ignore = "needs a CUDA GPU"]
fn full_size_maps_across_launch_shapes() {
    let full: &[usize] = &[4096 * 393216];
    sweep_maps(
        &[("y[i] = relu(x[i])", full), ("y[i] = sigmoid(x[i])", full)],
        |s| {
            (s.blocks_per_sm == 0 && [128, 256, 512].contains(&s.threads))
                || (s.threads, s.blocks_per_sm) == (256, 2)
                || (s.threads, s.blocks_per_sm) == (256, 4)
        },
    );
}

/// Sweeps the pointwise schedules `keep` selects for each map of `cases` (spec text, extents).
fn sweep_maps(cases: &[(&str, &[usize])], keep: fn(&PointwiseSchedule) -> bool) {
    let mut failures = Vec::new();
    for (text, extents) in cases {
        let Shape::Pointwise(shape) = shape_of(text) else {
            panic!("{text} is not pointwise");
        };
        let lowered = shape.program.clone();
        let extents = lowered.extents(extents).unwrap();
        let schedules: Vec<PointwiseSchedule> = PointwiseSchedule::space()
            .into_iter()
            .filter(keep)
            .collect();
        sweep(text, shape, &lowered, schedules, extents, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every scan schedule on slices of KernelBench's scans (rows of 32768 f32, 8192 of them: 1 GiB in, 1 GiB out):
/// the inclusive cumsum, the reversed exclusive one (its chunks read from the end) and a masked one; a scan
/// along a strided axis; and few long lines (4 of 2²⁶ f32, written in index notation), there the split schedules of
/// 256 threads and the whole-line default only (a whole-line schedule takes 60–90 ms a run on 4 lines). The
/// measurements behind `ScanSchedule::for_scan` and `for_long_lines`; every schedule must pass the gate.
/// `OPTIML_SCAN_SWEEP` (a substring of the spec) keeps some.
#[test]
#[ignore = "needs a CUDA GPU"]
fn scans_across_their_schedule_space() {
    let only = optiml_spec::env::var_os("OPTIML_SCAN_SWEEP")
        .map(|o| o.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Which schedules of the space a case measures.
    type Keep = fn(&ScanSchedule) -> bool;
    let every: Keep = |_| true;
    let split: Keep =
        |s| s.threads == 256 && (s.blocks > 0 || *s == ScanSchedule::default_for(Arch::new(9, 0)));
    let cases: &[(&str, &[usize], Keep)] = &[
        ("cumsum along dim 1", &[8192, 32768], every),
        (
            "y[r, c] = cumsum(c, reverse, exclusive) x[r, c]",
            &[8192, 32768],
            every,
        ),
        ("masked cumsum along dim 1", &[8192, 32768], every),
        (
            "y[a, b, k] = cumsum(b) x[a, b, k]",
            &[64, 4096, 1024],
            every,
        ),
        ("y[r, c] = cumsum(c) x[r, c]", &[4, 1 << 26], split),
    ];
    let mut failures = Vec::new();
    for (text, extents, keep) in cases {
        if !text.contains(only.as_str()) {
            continue;
        }
        let Shape::Scan(shape) = shape_of(text) else {
            panic!("{text} is not a scan");
        };
        let lowered = shape.program.clone();
        let extents = lowered.extents(extents).unwrap();
        let schedules = ScanSchedule::space().into_iter().filter(keep).collect();
        sweep(text, shape, &lowered, schedules, extents, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The whole schedule space of six programs, measured once each on the GPU and written as exhaustive search logs
/// (`<label>.jsonl.gz` in `OPTIML_LANDSCAPES`, default `target/landscapes`): four pointwise maps (relu and exact
/// gelu over 2²⁶ elements, minGPT's gelu over 8192², diag(a)·B over 4096 × 4096) and two reduction trees (batch
/// norm and a Frobenius normalisation at the gate's dispatch size). `tensor_search_replay.rs` replays MCTS and
/// random search over them offline. The row and column spaces (thousands of schedules each) are too large to
/// measure whole in one call.
#[test]
#[ignore = "needs a CUDA GPU"]
fn landscapes_of_six_programs() {
    let dir = optiml_spec::env::var_os("OPTIML_LANDSCAPES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/landscapes"));
    std::fs::create_dir_all(&dir).unwrap();
    // `OPTIML_LANDSCAPES_ONLY=relu,diag` measures those only.
    let only = optiml_spec::env::var_os("OPTIML_LANDSCAPES_ONLY")
        .map(|o| o.to_string_lossy().into_owned())
        .unwrap_or_default();
    let wanted = |label: &str| only.is_empty() || only.split(',').any(|o| o == label);
    let maps: [(&str, &str, usize); 4] = [
        ("relu", "y[i] = relu(x[i])", 1 << 26),
        (
            "gelu",
            "y[i] = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2)))",
            1 << 26,
        ),
        ("mingpt-gelu", "minGPT new gelu", 8192 * 8192),
        ("diag", "diag(A) @ B", 4096),
    ];
    for (label, text, n) in maps.into_iter().filter(|m| wanted(m.0)) {
        let Shape::Pointwise(shape) = shape_of(text) else {
            panic!("{text} is not pointwise");
        };
        let program = shape.program.clone();
        let extents = if program.dims.len() == 2 {
            vec![n, n]
        } else {
            vec![n]
        };
        landscape::<PointwiseSchedule>(&dir, label, shape, &program, extents);
    }
    let trees = [
        ("batch-norm", "batch norm, training mode, eps 1e-5"),
        ("frobenius", "frobenius norm"),
    ];
    for (label, text) in trees.into_iter().filter(|t| wanted(t.0)) {
        let Shape::Tree(shape) = shape_of(text) else {
            panic!("{text} is not a tree");
        };
        let program = shape.program.clone();
        let extents = dispatch(&program);
        landscape::<TreeSchedule>(&dir, label, shape, &program, extents);
    }
}

/// Measures every schedule of `S`'s space for one program (the default first) and writes the log.
fn landscape<S: Evaluable<Shape = Extents>>(
    dir: &std::path::Path,
    label: &str,
    spec: S::Spec,
    program: &Program,
    extents: Vec<usize>,
) {
    use optiml_build::search::{self, Config, DeterministicJudge, Header, Method, Signals};
    use std::io::Write;
    let arch = arch();
    let mut evaluator = evaluator::<S>(label, spec, program, &extents, 11);
    let root = S::default_for(arch);
    let space: Vec<S> = S::space().into_iter().filter(|s| *s != root).collect();
    let config = Config {
        budget: space.len() + 1,
        time_limit: std::time::Duration::from_secs(3600),
        ..Config::default()
    };
    let started = std::time::Instant::now();
    let log = search::exhaustive(&config, &DeterministicJudge, root, &space, &mut evaluator)
        .expect("the exhaustive run");
    let header = Header {
        kernel: label.into(),
        spec: program.canonical(),
        arch: arch.to_string(),
        device: "NVIDIA H200".into(),
        shape: format!("{extents:?}"),
        method: Method::Exhaustive,
        seed: None,
        config: search::config_value(&config),
        started_at: String::new(),
        signals: Signals::Derived,
    };
    let jsonl = search::records(&header, &log, started.elapsed().as_secs_f64())
        .and_then(|r| r.to_jsonl())
        .expect("the log as JSON lines");
    let path = dir.join(format!("{label}.jsonl.gz"));
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::best(),
    );
    gz.write_all(jsonl.as_bytes()).unwrap();
    gz.finish().unwrap();
    let rejected = log
        .steps
        .iter()
        .filter(|s| matches!(s.outcome, Outcome::Rejected(_)))
        .count();
    println!(
        "landscape {label}: {} schedules, {rejected} rejected, best {:.4} ms ({}), default {:.4} ms, {:.0} s",
        log.steps.len(),
        log.best_measurement.time_ms,
        log.best.describe(),
        log.steps[0]
            .outcome
            .measured()
            .map_or(f64::NAN, |m| m.time_ms),
        started.elapsed().as_secs_f64()
    );
}

/// A few launch shapes for maps heavy in transcendentals (softplus, swish) at a KernelBench map's size (a slice
/// of 4096 × 393216): whether the small maps' choice (more resident threads, fewer loads each) serves them too.
#[test]
#[ignore = "needs a CUDA GPU"]
fn heavy_maps_across_launch_shapes() {
    let mut failures = Vec::new();
    for text in ["softplus", "y[i] = x[i] * sigmoid(x[i])"] {
        let Shape::Pointwise(shape) = shape_of(text) else {
            panic!("{text} is not pointwise");
        };
        let lowered = shape.program.clone();
        let extents = lowered.extents(&[1024 * 393216]).unwrap();
        let schedules: Vec<PointwiseSchedule> = [
            (256, 2, 4),
            (256, 4, 2),
            (256, 4, 4),
            (512, 2, 2),
            (128, 8, 2),
            (256, 8, 1),
        ]
        .into_iter()
        .map(|(threads, blocks_per_sm, unroll)| PointwiseSchedule {
            threads,
            blocks_per_sm,
            unroll,
        })
        .collect();
        sweep(text, shape, &lowered, schedules, extents, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The transpose family's kernel: every schedule of its space on 8192 × 8192 f32 and bf16 matrices (the
/// measurements behind its default), a spread of them on a batch of matrices and on a 4-D f16 tensor, and a
/// ragged shape whose rows are no multiple of a chunk. Each passes the gate (the float64 interpreter of the
/// program); beside them, the tensor family's pointwise kernel of the same program, which is what a transpose
/// compiled to before the family. `OPTIML_TRANSPOSE_SWEEP` (a substring of the spec) keeps some.
#[test]
#[ignore = "needs a CUDA GPU"]
fn transposes_across_their_schedule_space() {
    use optiml_build::families::transpose::{Schedule, TransposeShape};
    let keep = optiml_spec::env::var("OPTIML_TRANSPOSE_SWEEP").unwrap_or_default();
    let arch = arch();
    let mut failures = Vec::new();
    let cases: [(&str, &[usize], bool); 5] = [
        ("transpose", &[8192, 8192], true),
        ("transpose, bf16", &[8192, 8192], true),
        ("batched transpose", &[16, 2048, 2048], false),
        ("transpose of a 4-D tensor, f16", &[4, 8, 1024, 1024], false),
        ("y[j, i] = x[i, j]", &[6001, 8191], false),
    ];
    for (text, extents, whole_space) in cases {
        if !text.contains(keep.as_str()) {
            continue;
        }
        let spec = optiml_spec::parse(text).unwrap();
        let shape = TransposeShape::of(&spec).unwrap_or_else(|| panic!("{text} is no transpose"));
        let program = shape.program.clone();
        let schedules = if whole_space {
            let mut all = vec![Schedule::default_for(arch)];
            all.extend(
                Schedule::space()
                    .into_iter()
                    .filter(|s| *s != Schedule::default_for(arch)),
            );
            all
        } else {
            spread::<Schedule>(arch, 12)
        };
        sweep(
            text,
            shape,
            &program,
            schedules,
            extents.to_vec(),
            &mut failures,
        );
        let Ok(Shape::Pointwise(pointwise)) = codegen::classify(&program) else {
            panic!("{text}: the tensor family reads it as a map");
        };
        sweep(
            &format!("{text} (pointwise)"),
            pointwise.clone(),
            &program,
            vec![PointwiseSchedule::for_program(&pointwise, arch)],
            extents.to_vec(),
            &mut failures,
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The attention family's fused fp32 kernel: its default and a spread of its schedule space pass the gate (the
/// float64 interpreter at ragged sizes, with no features, and with a head wider than one tile of the output) and
/// are timed at KernelBench 97's shape (1024 heads of 512 × 1024, a run-time scale); the default also on 64 heads
/// of 1024 × 128 (a constant scale) and on a ragged batch whose keys come first in the scores.
/// `OPTIML_ATTENTION_SWEEP` (a count) widens the spread.
#[test]
#[ignore = "needs a CUDA GPU"]
fn attention_passes_its_gate_across_its_schedule_space() {
    let failures = attention_sweep::<optiml_build::families::attention::Schedule>(&[
        ("scaled dot-product attention", KB97, sweep_count()),
        (
            "attention of a 3-D tensor, scale 0.125",
            &[64, 1024, 1024, 128, 128],
            0,
        ),
        (KEYS_FIRST, &[7, 300, 513, 72, 96], 0),
    ]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The kernels at the spec's own precision: TF32 tensor cores for `tf32`, 16-bit ones for bf16 and f16 storage.
/// Each passes the gate at its precision's tolerance (TF32's, or the storage type's) and is timed, with a spread
/// of the fast schedules, at KernelBench 97's shape, and by default at the other two shapes of the exact sweep.
#[test]
#[ignore = "needs a CUDA GPU"]
fn attention_at_tf32_and_16_bits_passes_its_gate_across_its_schedule_space() {
    let keys_first_bf16 = format!("{KEYS_FIRST}, bf16");
    let failures = attention_sweep::<optiml_build::families::attention::fast::Schedule>(&[
        ("scaled dot-product attention, tf32", KB97, sweep_count()),
        ("scaled dot-product attention, bf16", KB97, sweep_count()),
        ("scaled dot-product attention, f16", KB97, 0),
        (
            "attention of a 3-D tensor, bf16, scale 0.125",
            &[64, 1024, 1024, 128, 128],
            0,
        ),
        (
            "attention of a 3-D tensor, tf32, scale 0.125",
            &[64, 1024, 1024, 128, 128],
            0,
        ),
        (&keys_first_bf16, &[7, 300, 513, 72, 96], 0),
    ]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The staged form of attention (scores, weights and values through memory, `Launch::Attention`) beside the
/// fused kernel, at 16 bits and TF32: every round size passes the gate at the spec's tolerance, and each prints
/// its time at KernelBench 97 (the prediction, `bench/harness/attention_staged/NOTES.md`: about 3 ms against the
/// fused 16-bit kernel's 11 ms, about 4 against the TF32 one's 15), at a shape whose rows are not 16-byte
/// multiples (padded copies), and with the keys first and no scale.
#[test]
#[ignore = "needs a CUDA GPU"]
fn staged_attention_passes_its_gate_beside_the_fused_kernel() {
    use optiml_build::families::attention::{fast, staged};
    let arch = arch();
    let fused = <fast::Schedule as Tunable>::default_for(arch);
    let mut schedules = vec![fused];
    schedules.extend(fast::STAGED_ROUNDS.map(|staged| fast::Schedule { staged, ..fused }));
    assert!(
        !staged::roots(arch).is_empty(),
        "sm_90 runs the staged form"
    );
    let keys_first_bf16 = format!("{KEYS_FIRST}, bf16");
    let failures = attention_schedules(&[
        (
            "scaled dot-product attention, bf16",
            KB97,
            schedules.clone(),
        ),
        ("scaled dot-product attention, f16", KB97, schedules.clone()),
        (
            "scaled dot-product attention, tf32",
            KB97,
            schedules.clone(),
        ),
        (
            "attention of a 3-D tensor, bf16, scale 0.125",
            &[64, 1024, 1024, 128, 128],
            schedules.clone(),
        ),
        (&keys_first_bf16, &[7, 300, 513, 72, 96], schedules),
    ]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// KernelBench 97: 32 × 32 heads of 512 queries and keys with 1024 features.
const KB97: &[usize] = &[32, 32, 512, 512, 1024, 1024];

/// Attention with other names, the keys first in the scores and no scale.
const KEYS_FIRST: &str = "t[n, x, y] = sum(c) kk[n, y, c] * qq[n, x, c]; mx[n, x] = max(y) t[n, x, y]; \
                          w[n, x, y] = exp(t[n, x, y] - mx[n, x]); \
                          out[n, x, g] = sum(y) w[n, x, y] * vv[n, y, g] / sum(y) w[n, x, y]";

/// How many schedules beyond the default a sweep times (`OPTIML_ATTENTION_SWEEP`, 6 by default).
fn sweep_count() -> usize {
    optiml_spec::env::var("OPTIML_ATTENTION_SWEEP")
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

/// Gates and times the default and `n` more `S` schedules of each attention spec at its extents; returns the
/// failures.
fn attention_sweep<S>(cases: &[(&str, &[usize], usize)]) -> Vec<String>
where
    S: Tunable
        + Evaluable<Spec = optiml_build::families::attention::AttentionShape, Shape = Extents>,
{
    let arch = arch();
    let cases: Vec<(&str, &[usize], Vec<S>)> = cases
        .iter()
        .map(|&(text, extents, n)| (text, extents, spread::<S>(arch, n)))
        .collect();
    attention_schedules(&cases)
}

/// Gates and times the given `S` schedules of each attention spec at its extents; returns the failures.
fn attention_schedules<S>(cases: &[(&str, &[usize], Vec<S>)]) -> Vec<String>
where
    S: Tunable
        + Evaluable<Spec = optiml_build::families::attention::AttentionShape, Shape = Extents>,
{
    use optiml_build::families::attention::{self, AttentionShape};
    let arch = arch();
    let mut failures = Vec::new();
    for (text, extents, schedules) in cases {
        let (text, extents) = (*text, *extents);
        let spec = optiml_spec::parse(text).unwrap();
        let shape = AttentionShape::of(&spec).unwrap_or_else(|| panic!("{text} is no attention"));
        let flops = attention::flops(&shape, extents);
        let mut evaluator = GpuEvaluator::<S>::new(
            optiml_build::nvrtc::load().expect("NVRTC"),
            EvalSetup {
                name: text.into(),
                plan: attention::test_plan(&shape, &[]),
                spec: shape.clone(),
                arch,
                dispatch: Extents::new(extents).unwrap(),
                timing: TimingPlan::default(),
                worker: worker(),
                device: 0,
                compile_threads: 8,
                seed: 11,
                ncu: None,
            },
        )
        .expect("an evaluator on GPU 0");
        for s in schedules {
            match evaluator.evaluate(s) {
                Outcome::Measured(m) => println!(
                    "measured {text} | {} | {:.4} ms | {:.1} TFLOP/s",
                    s.describe(),
                    m.time_ms,
                    flops / (m.time_ms * 1e-3) / 1e12
                ),
                Outcome::Rejected(reason) => {
                    println!("REJECTED {text} | {}: {reason}", s.describe());
                    failures.push(format!("{text} | {}: {reason}", s.describe()));
                }
            }
        }
    }
    failures
}
