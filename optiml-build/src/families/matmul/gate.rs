//! The matmul family's gate, run in the evaluation worker: every shape of the plan checked element by element
//! against the float64 reference on fresh inputs with a poisoned output, then the dispatch shape timed, its
//! output checked after the first and the last timed run. 16-bit kernels read inputs the 16-bit type holds
//! exactly, so the reference sees what the kernel sees.

use super::plan::{Gathered, MatmulShape, Operands, check_item};
use crate::eval::device::{Bench, Narrow, Stop, fault, launch_failed, reject};
use crate::eval::plan::{self, Comparison, Distribution};
use crate::eval::{Gate, Job};
use cudarc::driver::CudaSlice;
use cudarc::driver::sys;
use optiml_runtime::Target;
use optiml_runtime::matmul::{self, MatmulArgs};
use optiml_spec::{DType, MatmulSpec};
use serde::{Deserialize, Serialize};

/// What a matmul candidate must compute: `C = act(alpha · op(A) · op(B) + beta · C + bias)` over a batch.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MatmulProblem {
    /// The spec (transposes and epilogue).
    pub spec: MatmulSpec,
    /// The element type of A, B and C (the worker generates f32 inputs the 16-bit types hold exactly).
    pub dtype: DType,
    /// The shape it is timed at and will be dispatched for.
    pub dispatch: MatmulShape,
    /// The run-time `alpha` used in checks (1 without alpha in the spec).
    pub alpha: f32,
    /// The run-time `beta` used in checks (ignored without beta).
    pub beta: f32,
}

/// The matmul family's gate.
pub struct MatmulGate;

impl Gate for MatmulGate {
    fn family(&self) -> &'static str {
        super::FAMILY
    }

    fn run(&self, bench: &mut Bench, job: &Job, target: Target<'_>) -> Result<Vec<f64>, Stop> {
        let problem: MatmulProblem = job
            .problem
            .decode()
            .map_err(|reason| reject("problem", reason))?;
        let case = Case {
            job,
            target,
            spec: &problem.spec,
            dtype: problem.dtype,
            alpha: problem.alpha,
            beta: problem.beta,
        };
        for (i, dims) in job.plan.sizes.iter().enumerate() {
            let shape = MatmulShape::from_dims(dims)
                .ok_or_else(|| reject("plan", format!("{dims:?} is not a matmul shape")))?;
            let seed = plan::splitmix(job.seed ^ (i as u64 + 1));
            check_shape(bench, &case, &shape, seed, i)?;
        }
        time_dispatch(bench, &case, problem.dispatch)
    }
}

/// The dispatch shape's buffers, kept between jobs of the same shape in [`Bench::kept`] (allocating gigabytes
/// per job would dominate the step time).
struct Dispatch {
    shape: MatmulShape,
    a: CudaSlice<f32>,
    b: CudaSlice<f32>,
    c: CudaSlice<f32>,
    c0: Option<CudaSlice<f32>>,
    bias: Option<CudaSlice<f32>>,
    /// A, B and C in the kernel's 16-bit type.
    narrow: Option<Narrow>,
}

/// Launches the candidate on `shape` through the runtime's own launcher: on the f32 buffers, or for a
/// 16-bit kernel on `narrow` after converting A, B and C into it, converting C back after the launch. The
/// conversions are stream work before and after the launch: a timed launch's events bracket only the
/// launch itself (`launch_timed`).
#[allow(clippy::too_many_arguments)]
fn launch(
    w: &Bench,
    case: &Case<'_>,
    shape: &MatmulShape,
    a: &mut CudaSlice<f32>,
    b: &mut CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    bias: Option<&CudaSlice<f32>>,
    narrow: Option<&mut Narrow>,
) -> Result<(), Stop> {
    let Some(narrow) = narrow else {
        return launch_timed(w, case, shape, Operands32::F32(a, b, c), bias, None);
    };
    w.convert(narrow, 0, a, true)?;
    w.convert(narrow, 1, b, true)?;
    w.convert(narrow, 2, c, true)?;
    launch_timed(w, case, shape, Operands32::Narrow(narrow), bias, None)?;
    w.convert(narrow, 2, c, false)
}

/// Launches on device operands as they are, with events around the launch when `times` is given.
fn launch_timed(
    w: &Bench,
    case: &Case<'_>,
    shape: &MatmulShape,
    ops: Operands32<'_>,
    bias: Option<&CudaSlice<f32>>,
    times: Option<&mut Vec<f64>>,
) -> Result<(), Stop> {
    fn go<T: matmul::Element>(
        w: &Bench,
        case: &Case<'_>,
        shape: &MatmulShape,
        (a, b, c): (&CudaSlice<T>, &CudaSlice<T>, &mut CudaSlice<T>),
        bias: Option<&CudaSlice<f32>>,
        times: Option<&mut Vec<f64>>,
    ) -> Result<(), Stop> {
        let s = &w.stream;
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = match times {
            Some(_) => Some(s.record_event(flags).map_err(fault("recording an event"))?),
            None => None,
        };
        matmul::launch_target(
            "candidate",
            s,
            case.target,
            MatmulArgs {
                a,
                b,
                c,
                bias,
                batch: shape.batch,
                m: shape.m,
                n: shape.n,
                k: shape.k,
                alpha: case.alpha,
                beta: case.beta,
                shared_a: case.spec.shared_a,
                shared_b: case.spec.shared_b,
            },
        )
        .map_err(launch_failed(format!("launching `{}`", case.job.name)))?;
        if let (Some(start), Some(times)) = (start, times) {
            let end = s.record_event(flags).map_err(fault("recording an event"))?;
            let ms = start
                .elapsed_ms(&end)
                .map_err(fault(format!("running `{}` on {shape}", case.job.name)))?;
            times.push(ms as f64);
        }
        Ok(())
    }
    match ops {
        Operands32::F32(a, b, c) => go(w, case, shape, (a, b, c), bias, times),
        Operands32::Narrow(Narrow::Bf16([a, b, c])) => go(w, case, shape, (a, b, c), bias, times),
        Operands32::Narrow(Narrow::F16([a, b, c])) => go(w, case, shape, (a, b, c), bias, times),
    }
}

/// One fully checked shape: fresh inputs, a NaN-poisoned output (or a random old C with beta), every element
/// compared with the float64 reference.
fn check_shape(
    w: &mut Bench,
    case: &Case<'_>,
    shape: &MatmulShape,
    seed: u64,
    index: usize,
) -> Result<(), Stop> {
    let (job, spec) = (case.job, case.spec);
    let dist = job.plan.distribution(index + job.seed as usize % 3);
    let check = format!("{shape} {dist}");
    let (pa, pb, pc) = shape.per_item();
    let s = w.stream.clone();
    let alloc = |n: usize| s.alloc_zeros::<f32>(n.max(1)).map_err(fault("allocating"));
    let (la, lb) = shape.operand_lens(spec);
    let mut a = alloc(la)?;
    let mut b = alloc(lb)?;
    let mut c = alloc(shape.batch * pc)?;
    let mut bias = if spec.bias {
        Some(alloc(shape.n)?)
    } else {
        None
    };
    w.fill(&mut a, seed ^ 1, dist)?;
    w.fill(&mut b, seed ^ 2, dist)?;
    if spec.beta {
        w.fill(&mut c, seed ^ 3, dist)?;
    } else {
        w.fill_const(&mut c, f32::NAN)?;
    }
    if let Some(bias) = &mut bias {
        w.fill(bias, seed ^ 4, dist)?;
    }
    let mut narrow = w.alloc_narrow(case.dtype, [la, lb, shape.batch * pc])?;
    if narrow.is_some() {
        for buf in [&mut a, &mut b, &mut c] {
            w.round16(buf, case.dtype)?;
        }
    }
    let host = |buf: &CudaSlice<f32>| s.clone_dtoh(buf).map_err(fault("copying inputs"));
    let (ha, hb, hc0) = (host(&a)?, host(&b)?, host(&c)?);
    let hbias = bias.as_ref().map(host).transpose()?;
    launch(
        w,
        case,
        shape,
        &mut a,
        &mut b,
        &mut c,
        bias.as_ref(),
        narrow.as_mut(),
    )?;
    s.synchronize()
        .map_err(fault(format!("running `{}` on {check}", job.name)))?;
    // The inputs must be as they were: a kernel that writes into A, B or the bias (its own scratch, or a
    // change too small for the output's tolerance) corrupts its caller's data and every later launch. A 16-bit
    // kernel read the narrow copies, which widen back to exactly these values when untouched.
    if let Some(n) = narrow.as_mut() {
        w.convert(n, 0, &mut a, false)?;
        w.convert(n, 1, &mut b, false)?;
    }
    let mut inputs = vec![("A", &ha, &a), ("B", &hb, &b)];
    if let (Some(before), Some(after)) = (&hbias, &bias) {
        inputs.push(("bias", before, after));
    }
    for (name, before, buf) in inputs {
        if let Some(reason) = written(name, before, &host(buf)?) {
            return Err(reject(check.clone(), reason));
        }
    }
    let out = host(&c)?;
    for item in 0..shape.batch {
        let (oa, ob) = shape.operand_offsets(spec, item);
        let ops = Operands {
            a: &ha[oa..][..pa],
            b: &hb[ob..][..pb],
            c0: &hc0[item * pc..][..pc],
            bias: hbias.as_deref(),
        };
        check_item(
            spec,
            shape,
            &job.plan.tolerance,
            &ops,
            case.alpha,
            case.beta,
            &out[item * pc..][..pc],
            item,
        )
        .map_err(|reason| reject(check.clone(), reason))?;
    }
    Ok(())
}

/// How the kernel changed input `name`, if it did: the first element whose bits differ and how many do.
pub(crate) fn written(name: &str, before: &[f32], after: &[f32]) -> Option<String> {
    let differ = |(x, y): (&f32, &f32)| x.to_bits() != y.to_bits();
    let first = before.iter().zip(after).position(differ)?;
    let count = before.iter().zip(after).filter(|&p| differ(p)).count();
    Some(format!(
        "the kernel wrote into its input {name}: {count} element(s) changed, the first at {first} ({} before, {} \
         after)",
        before[first], after[first]
    ))
}

/// The dispatch shape: fresh inputs, a verified first run, then warm-up and timed runs each starting from a
/// poisoned output and a flushed L2, then the last output checked again (a kernel that skips work once it
/// has produced an answer leaves NaN behind).
fn time_dispatch(w: &mut Bench, case: &Case<'_>, shape: MatmulShape) -> Result<Vec<f64>, Stop> {
    let spec = case.spec;
    let (_, _, pc) = shape.per_item();
    let (la, lb) = shape.operand_lens(spec);
    let s = w.stream.clone();
    // The last job's buffers, if this gate left them and they fit this one.
    let kept = w
        .kept
        .take()
        .and_then(|k| k.downcast::<Dispatch>().ok())
        .filter(|d| {
            d.shape == shape
                && (d.a.len(), d.b.len()) == (la.max(1), lb.max(1))
                && d.c0.is_some() == spec.beta
                && d.bias.is_some() == spec.bias
                && matches!(
                    (&d.narrow, case.dtype),
                    (None, DType::F32)
                        | (Some(Narrow::Bf16(_)), DType::Bf16)
                        | (Some(Narrow::F16(_)), DType::F16)
                )
        });
    let mut d = match kept {
        Some(d) => *d,
        None => {
            let alloc = |n: usize| {
                s.alloc_zeros::<f32>(n.max(1))
                    .map_err(fault(format!("allocating the {shape} buffers")))
            };
            Dispatch {
                shape,
                a: alloc(la)?,
                b: alloc(lb)?,
                c: alloc(shape.batch * pc)?,
                c0: if spec.beta {
                    Some(alloc(shape.batch * pc)?)
                } else {
                    None
                },
                bias: if spec.bias {
                    Some(alloc(shape.n)?)
                } else {
                    None
                },
                narrow: w.alloc_narrow(case.dtype, [la, lb, shape.batch * pc])?,
            }
        }
    };
    let result = time_with(w, case, &mut d);
    w.kept = Some(Box::new(d));
    result
}

fn time_with(w: &mut Bench, case: &Case<'_>, d: &mut Dispatch) -> Result<Vec<f64>, Stop> {
    let (job, spec) = (case.job, case.spec);
    let shape = d.shape;
    let (pa, pb, pc) = shape.per_item();
    let dist = job.plan.distribution(job.seed as usize);
    let check = format!("{shape} {dist} (dispatch shape)");
    let seed = plan::splitmix(job.seed ^ 0xd15);
    let s = w.stream.clone();
    // The batch items whose every sampled element is compared: first, last and one drawn.
    let mut items = vec![
        0,
        shape.batch.saturating_sub(1),
        seed as usize % shape.batch.max(1),
    ];
    items.sort_unstable();
    items.dedup();
    // The sampled rows and columns (the same crossings are checked every time).
    let (rows, cols) = plan::sample_grid(
        shape.m,
        shape.n,
        job.plan.dispatch_samples / items.len().max(1),
        seed,
    );
    // Fresh inputs from `seed` on the device, and host copies of what the checks need, gathered once per set.
    let load = |w: &Bench, d: &mut Dispatch, seed: u64| -> Result<Snapshot, Stop> {
        w.fill(&mut d.a, seed ^ 1, dist)?;
        w.fill(&mut d.b, seed ^ 2, dist)?;
        if let Some(c0) = &mut d.c0 {
            w.fill(c0, seed ^ 3, dist)?;
        }
        if let Some(bias) = &mut d.bias {
            w.fill(bias, seed ^ 4, dist)?;
        }
        if let Some(narrow) = &mut d.narrow {
            w.round16(&mut d.a, case.dtype)?;
            w.round16(&mut d.b, case.dtype)?;
            if let Some(c0) = &mut d.c0 {
                w.round16(c0, case.dtype)?;
            }
            w.convert(narrow, 0, &mut d.a, true)?;
            w.convert(narrow, 1, &mut d.b, true)?;
        }
        let copy = |buf: &CudaSlice<f32>, from: usize, len: usize| {
            s.clone_dtoh(&buf.slice(from..from + len))
                .map_err(fault("copying inputs"))
        };
        let mut ops = Vec::new();
        for &item in &items {
            ops.push((
                copy(&d.a, shape.operand_offsets(spec, item).0, pa)?,
                copy(&d.b, shape.operand_offsets(spec, item).1, pb)?,
                match &d.c0 {
                    Some(c0) => copy(c0, item * pc, pc)?,
                    None => Vec::new(),
                },
            ));
        }
        let bias = match &d.bias {
            Some(b) => Some(copy(b, 0, shape.n)?),
            None => None,
        };
        let gathered = ops
            .iter()
            .map(|(ha, hb, hc0)| {
                let o = Operands {
                    a: ha,
                    b: hb,
                    c0: hc0,
                    bias: bias.as_deref(),
                };
                Gathered::new(spec, &shape, &o, &rows, &cols)
            })
            .collect();
        Ok(Snapshot {
            ops,
            bias,
            gathered,
        })
    };
    let verify =
        |w: &Bench, c: &CudaSlice<f32>, inputs: &Snapshot, when: &str| -> Result<(), Stop> {
            let unwritten = w.count_nonfinite(c)?;
            if unwritten > 0 {
                return Err(reject(
                    check.clone(),
                    format!(
                        "{unwritten} of {} output elements are NaN or infinite {when}",
                        c.len()
                    ),
                ));
            }
            let copy = |buf: &CudaSlice<f32>, from: usize, len: usize| {
                s.clone_dtoh(&buf.slice(from..from + len))
                    .map_err(fault("copying the output"))
            };
            let mut cmp = Comparison::default();
            for ((&item, (ha, hb, hc0)), g) in items.iter().zip(&inputs.ops).zip(&inputs.gathered) {
                let out = copy(c, item * pc, pc)?;
                let ops = Operands {
                    a: ha,
                    b: hb,
                    c0: hc0,
                    bias: inputs.bias.as_deref(),
                };
                for &i in &rows {
                    for &j in &cols {
                        let at = || format!("C[{item}][{i}][{j}] {when}");
                        if spec.triangle.is_some_and(|t| t.outside(i, j)) {
                            cmp.check_zero(&at, out[i * shape.n + j]);
                            continue;
                        }
                        let (r, mag) = g.reference(spec, &shape, &ops, case.alpha, case.beta, i, j);
                        cmp.check(&job.plan.tolerance, &at, out[i * shape.n + j], r, mag);
                    }
                }
            }
            cmp.finish(&job.plan.tolerance)
                .map(|_| ())
                .map_err(|reason| reject(check.clone(), reason))
        };

    let mut inputs = load(w, d, seed)?;
    let total = 1 + job.timing.warmup + job.timing.runs;
    let mut times = Vec::new();
    for run in 0..total {
        let last = run + 1 == total && run > 0;
        if last {
            // The last run gets another input set: a kernel that replays an output it kept (in its own device
            // memory) from the earlier runs, whose inputs were all the same, fails the check after it.
            inputs = load(w, d, plan::splitmix(seed ^ 0x1a57))?;
        }
        match &d.c0 {
            Some(c0) => s.memcpy_dtod(c0, &mut d.c).map_err(fault("restoring C"))?,
            // The last run's C holds fresh finite values, not the NaN poison: a kernel that computes only when
            // it sees poison (as every run's output was before) keeps them, and the check after it fails.
            None if last => w.fill(&mut d.c, seed ^ 0xC0FF_EE00, Distribution::Uniform)?,
            None => w.fill_const(&mut d.c, f32::NAN)?,
        }
        if let Some(narrow) = &mut d.narrow {
            w.convert(narrow, 2, &mut d.c, true)?;
        }
        if job.timing.flush_l2 {
            w.flush_l2()?;
        }
        let mut ms = Vec::new();
        let ops = match &mut d.narrow {
            Some(narrow) => Operands32::Narrow(narrow),
            None => Operands32::F32(&mut d.a, &mut d.b, &mut d.c),
        };
        launch_timed(w, case, &shape, ops, d.bias.as_ref(), Some(&mut ms))?;
        if let Some(narrow) = &mut d.narrow {
            w.convert(narrow, 2, &mut d.c, false)?;
        }
        if run == 0 {
            // Verified before any timing counts.
            verify(w, &d.c, &inputs, "after the first run")?;
        } else if run > job.timing.warmup {
            times.extend(ms);
        }
    }
    verify(w, &d.c, &inputs, "after the last timed run")?;
    Ok(times)
}

/// Host copies of one input set of the dispatch shape: the sampled items' A, B and old C, the bias, and their
/// gathered rows and columns.
struct Snapshot {
    ops: Vec<(Vec<f32>, Vec<f32>, Vec<f32>)>,
    bias: Option<Vec<f32>>,
    gathered: Vec<Gathered>,
}

/// One matmul job's fixed parts: what every check and timed run of it launches.
struct Case<'a> {
    job: &'a Job,
    target: Target<'a>,
    spec: &'a MatmulSpec,
    dtype: DType,
    alpha: f32,
    beta: f32,
}

/// The device operands of one launch: the f32 buffers, or their 16-bit copies.
enum Operands32<'a> {
    F32(
        &'a mut CudaSlice<f32>,
        &'a mut CudaSlice<f32>,
        &'a mut CudaSlice<f32>,
    ),
    Narrow(&'a mut Narrow),
}

#[cfg(test)]
mod tests {
    use super::written;

    #[test]
    fn a_changed_input_is_named_with_its_first_changed_element() {
        let before = [1.0f32, 2.0, 3.0, -0.0];
        assert_eq!(written("A", &before, &before), None);
        let mut after = before;
        after[1] = f32::from_bits(2.0f32.to_bits() ^ 1);
        after[3] = 0.0;
        let why = written("A", &before, &after).unwrap();
        assert!(
            why.starts_with(
                "the kernel wrote into its input A: 2 element(s) changed, the first at 1"
            ),
            "{why}"
        );
    }
}
