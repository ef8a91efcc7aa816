//! The matmul family's gate, run in the evaluation worker: every shape of the plan checked element by element
//! against the float64 reference on fresh inputs with a poisoned output, then the dispatch shape timed, its
//! output checked after the first and the last timed run. 16-bit kernels read inputs the 16-bit type holds
//! exactly, so the reference sees what the kernel sees.

use super::plan::{MatmulShape, Operands, check_item, compare_item};
use super::reference;
use crate::eval::device::{Bench, Narrow, Stop, fault, launch_failed, reject};
use crate::eval::guard::{Guarded, guarded_bytes};
use crate::eval::limits::{Need, bytes};
use crate::eval::plan::{self, Distribution, ErrorBound, Tolerance};
use crate::eval::{Gate, Job};
use cudarc::driver::CudaSlice;
use cudarc::driver::sys;
use optiml_runtime::Target;
use optiml_runtime::matmul::{self, MatmulArgs};
use optiml_spec::{DType, MatmulSpec, Precision};
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
/// per job would dominate the step time). Those the candidate gets lie between guard regions, re-armed with
/// each job's pattern.
struct Dispatch {
    shape: MatmulShape,
    a: Guarded<f32>,
    b: Guarded<f32>,
    c: Guarded<f32>,
    /// The old C of a spec with beta, copied into C before each run (the candidate never sees it).
    c0: Option<CudaSlice<f32>>,
    bias: Option<Guarded<f32>>,
    /// A, B and C in the kernel's 16-bit type.
    narrow: Option<Narrow>,
}

impl Dispatch {
    /// Writes the patterns of `seed` into every guard.
    fn arm(&mut self, seed: u64) -> Result<(), Stop> {
        self.a.arm(seed)?;
        self.b.arm(seed.wrapping_add(1))?;
        self.c.arm(seed.wrapping_add(2))?;
        if let Some(bias) = &mut self.bias {
            bias.arm(seed.wrapping_add(3))?;
        }
        if let Some(narrow) = &mut self.narrow {
            narrow.arm(seed.wrapping_add(4))?;
        }
        Ok(())
    }

    /// Rejects the candidate when it wrote into a guard of any buffer it got.
    fn check_guards(&self, check: &str) -> Result<(), Stop> {
        check_guards(
            check,
            [&self.a, &self.b, &self.c],
            self.bias.as_ref(),
            self.narrow.as_ref(),
        )
    }
}

/// Salts a check's seed into the seed of its guards' patterns.
const GUARD_SALT: u64 = 0x6775_6172_6421;

/// Rejects the candidate of check `check` when it wrote into a guard of A, B, C, the bias or a 16-bit copy.
fn check_guards(
    check: &str,
    [a, b, c]: [&Guarded<f32>; 3],
    bias: Option<&Guarded<f32>>,
    narrow: Option<&Narrow>,
) -> Result<(), Stop> {
    a.check(check, "A")?;
    b.check(check, "B")?;
    c.check(check, "C")?;
    if let Some(bias) = bias {
        bias.check(check, "bias")?;
    }
    if let Some(n) = narrow {
        for (which, name) in ["A (16-bit)", "B (16-bit)", "C (16-bit)"]
            .iter()
            .enumerate()
        {
            n.check(which, check, name)?;
        }
    }
    Ok(())
}

/// The device bytes of the buffers a candidate gets for `shape` (with guards), the 16-bit copies, and the old C
/// with `c0`.
fn device_bytes(spec: &MatmulSpec, dtype: DType, shape: &MatmulShape, c0: bool) -> u64 {
    let (la, lb) = shape.operand_lens(spec);
    let lc = shape.batch.saturating_mul(shape.m.saturating_mul(shape.n));
    let mut total = [la, lb, lc]
        .iter()
        .map(|&n| guarded_bytes(bytes(n.max(1), 4)))
        .sum::<u64>();
    if dtype != DType::F32 {
        total += [la, lb, lc]
            .iter()
            .map(|&n| guarded_bytes(bytes(n.max(1), 2)))
            .sum::<u64>();
    }
    if spec.bias {
        total += guarded_bytes(bytes(shape.n.max(1), 4));
    }
    if c0 {
        total += bytes(lc, 4);
    }
    total
}

/// What checking `shape` in full takes: its buffers, and on the host A, B, the old C and the bias before, A and
/// B again after (the input check), C, and one batch item's float64 reference operands (op(A)'s rows and
/// op(B)'s columns).
fn check_need(spec: &MatmulSpec, dtype: DType, shape: &MatmulShape) -> Need {
    let (la, lb) = shape.operand_lens(spec);
    let lc = shape.batch.saturating_mul(shape.m.saturating_mul(shape.n));
    let mut need = Need::default();
    need.device(device_bytes(spec, dtype, shape, false));
    for n in [la, la, lb, lb, lc, lc] {
        need.host(bytes(n, 4));
    }
    if spec.bias {
        need.host(bytes(shape.n, 4));
    }
    need.host(bytes(shape.m.saturating_add(shape.n), 4).saturating_mul(shape.k as u64));
    need
}

/// What timing `shape` takes beyond its kept buffers: the buffers when `allocate`, and the float64 reference's
/// scratch of its full checks (which leave only a few numbers to the host).
fn dispatch_need(spec: &MatmulSpec, dtype: DType, shape: &MatmulShape, allocate: bool) -> Need {
    let mut need = Need::default();
    if allocate {
        need.device(device_bytes(spec, dtype, shape, spec.beta));
    }
    need.device(reference::scratch_bytes(shape));
    need
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
    // Under a TF32 spec every other shape reads A and B rounded to TF32: TF32's own tolerance cannot tell a
    // kernel that rounds its operands to bf16 from one that rounds them to TF32, but on these inputs an honest
    // kernel's products are exact, and the tighter bound can.
    let tf32_exact = spec.precision == Precision::Tf32 && index.is_multiple_of(2);
    let (check, tolerance) = if tf32_exact {
        (
            format!("{shape} {dist}, TF32-exact inputs"),
            Tolerance::TF32_EXACT_INPUTS,
        )
    } else {
        (format!("{shape} {dist}"), job.plan.tolerance)
    };
    let (pa, pb, pc) = shape.per_item();
    w.admit(
        &format!("checking {shape}"),
        check_need(spec, case.dtype, shape),
    )?;
    let s = w.stream.clone();
    // Each buffer the candidate gets lies between guards holding this check's own pattern.
    let guard = plan::splitmix(seed ^ GUARD_SALT);
    let alloc = |n: usize, salt: u64| w.guarded::<f32>(n.max(1), guard.wrapping_add(salt));
    let (la, lb) = shape.operand_lens(spec);
    let mut a = alloc(la, 0)?;
    let mut b = alloc(lb, 1)?;
    let mut c = alloc(shape.batch * pc, 2)?;
    let mut bias = if spec.bias {
        Some(alloc(shape.n, 3)?)
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
    if tf32_exact {
        w.round_tf32(&mut a)?;
        w.round_tf32(&mut b)?;
    }
    let mut narrow = w.alloc_narrow(
        case.dtype,
        [la, lb, shape.batch * pc],
        guard.wrapping_add(4),
    )?;
    if narrow.is_some() {
        for buf in [&mut a, &mut b, &mut c] {
            w.round16(buf, case.dtype)?;
        }
    }
    let host = |buf: &CudaSlice<f32>| s.clone_dtoh(buf).map_err(fault("copying inputs"));
    let (ha, hb, hc0) = (host(&a)?, host(&b)?, host(&c)?);
    let hbias = bias.as_deref().map(host).transpose()?;
    // Each item's tolerance: the plan's, or twice what the bounding kernel's own error is on these inputs.
    let tolerances = match (&job.plan.bound, &narrow) {
        (Some(bound), None) => {
            let inputs = Inputs {
                a: &a,
                b: &b,
                bias: bias.as_deref(),
                ha: &ha,
                hb: &hb,
                hc0: &hc0,
                hbias: hbias.as_deref(),
            };
            bounded(w, case, bound, shape, &check, &tolerance, &inputs)?
        }
        _ => vec![tolerance; shape.batch],
    };
    launch(
        w,
        case,
        shape,
        &mut a,
        &mut b,
        &mut c,
        bias.as_deref(),
        narrow.as_mut(),
    )?;
    s.synchronize()
        .map_err(fault(format!("running `{}` on {check}", job.name)))?;
    // A write just past an end (or before a start) changes no checked element and no driver sees it: the guards
    // do.
    check_guards(&check, [&a, &b, &c], bias.as_ref(), narrow.as_ref())?;
    // The inputs must be as they were: a kernel that writes into A, B or the bias (its own scratch, or a
    // change too small for the output's tolerance) corrupts its caller's data and every later launch. A 16-bit
    // kernel read the narrow copies, which widen back to exactly these values when untouched.
    if let Some(n) = narrow.as_mut() {
        w.convert(n, 0, &mut a, false)?;
        w.convert(n, 1, &mut b, false)?;
    }
    let mut inputs = vec![("A", &ha, &*a), ("B", &hb, &*b)];
    if let (Some(before), Some(after)) = (&hbias, bias.as_deref()) {
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
            &tolerances[item],
            &ops,
            case.alpha,
            case.beta,
            &out[item * pc..][..pc],
            item,
        )
        .map_err(|reason| match &job.plan.bound {
            Some(bound) if tolerances[item] != tolerance => format!(
                "{reason} (the bound is {} times {}'s own error on these inputs)",
                ErrorBound::FACTOR,
                bound.name
            ),
            _ => reason,
        })
        .map_err(|reason| reject(check.clone(), reason))?;
    }
    Ok(())
}

/// A check's inputs on the device (as the candidate gets them) and on the host (as they were filled).
struct Inputs<'a> {
    a: &'a CudaSlice<f32>,
    b: &'a CudaSlice<f32>,
    bias: Option<&'a CudaSlice<f32>>,
    ha: &'a [f32],
    hb: &'a [f32],
    hc0: &'a [f32],
    hbias: Option<&'a [f32]>,
}

/// Each batch item's tolerance under `bound`: the bounding kernel is launched on the check's inputs (into its
/// own output, from the same old C) and its errors against the float64 reference, times
/// [`ErrorBound::FACTOR`], tighten `tolerance` ([`ErrorBound::tighten`]).
///
/// # Errors
/// A fault loading or running the bounding kernel.
fn bounded(
    w: &mut Bench,
    case: &Case<'_>,
    bound: &ErrorBound,
    shape: &MatmulShape,
    check: &str,
    tolerance: &Tolerance,
    inputs: &Inputs<'_>,
) -> Result<Vec<Tolerance>, Stop> {
    let spec = case.spec;
    let module = w
        .load_trusted(&bound.ptx)
        .map_err(fault(format!("loading {}", bound.name)))?;
    let function = module
        .load_function(&bound.entry)
        .map_err(fault(format!("loading {}", bound.name)))?;
    let function = optiml_runtime::Function::new(function);
    let target = Target {
        function: &function,
        companions: Default::default(),
        launch: bound.launch,
        sm_count: w.device.sm_count,
    };
    let s = w.stream.clone();
    let mut c = s
        .clone_htod(inputs.hc0)
        .map_err(fault(format!("allocating {}'s output", bound.name)))?;
    matmul::launch_target(
        "bound",
        &s,
        target,
        MatmulArgs {
            a: inputs.a,
            b: inputs.b,
            c: &mut c,
            bias: inputs.bias,
            batch: shape.batch,
            m: shape.m,
            n: shape.n,
            k: shape.k,
            alpha: case.alpha,
            beta: case.beta,
            shared_a: spec.shared_a,
            shared_b: spec.shared_b,
        },
    )
    .map_err(launch_failed(format!("launching {}", bound.name)))?;
    let out = s
        .clone_dtoh(&c)
        .map_err(fault(format!("running {} on {check}", bound.name)))?;
    // Measured, not judged: any finite error counts.
    let measure = Tolerance {
        rel_l2: f64::INFINITY,
        scaled_abs: f64::INFINITY,
        abs: tolerance.abs,
        forgive: 0.0,
    };
    let (pa, pb, pc) = shape.per_item();
    Ok((0..shape.batch)
        .map(|item| {
            let (oa, ob) = shape.operand_offsets(spec, item);
            let ops = Operands {
                a: &inputs.ha[oa..][..pa],
                b: &inputs.hb[ob..][..pb],
                c0: &inputs.hc0[item * pc..][..pc],
                bias: inputs.hbias,
            };
            let cmp = compare_item(
                spec,
                shape,
                &measure,
                &ops,
                case.alpha,
                case.beta,
                &out[item * pc..][..pc],
                item,
            );
            // A bounding kernel whose output is not finite here (an overflow) says nothing about the
            // candidate's error: the plan's tolerance stands.
            match cmp.failure {
                Some(_) => *tolerance,
                None => ErrorBound::tighten(tolerance, cmp.worst_scaled(), cmp.rel_l2()),
            }
        })
        .collect())
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
    if kept.is_none() {
        // Whatever another shape's buffers held is freed before asking what is free.
        w.stream
            .synchronize()
            .map_err(fault("freeing the last job's buffers"))?;
    }
    let need = dispatch_need(spec, case.dtype, &shape, kept.is_none());
    w.admit(&format!("timing {shape}"), need)?;
    let guard = plan::splitmix(case.job.seed ^ GUARD_SALT);
    let mut d = match kept {
        Some(mut d) => {
            d.arm(guard)?;
            *d
        }
        None => {
            let alloc = |n: usize, salt: u64| w.guarded::<f32>(n.max(1), guard.wrapping_add(salt));
            Dispatch {
                shape,
                a: alloc(la, 0)?,
                b: alloc(lb, 1)?,
                c: alloc(shape.batch * pc, 2)?,
                c0: if spec.beta {
                    Some(
                        w.stream
                            .alloc_zeros::<f32>((shape.batch * pc).max(1))
                            .map_err(fault(format!("allocating the {shape} buffers")))?,
                    )
                } else {
                    None
                },
                bias: if spec.bias {
                    Some(alloc(shape.n, 3)?)
                } else {
                    None
                },
                narrow: w.alloc_narrow(
                    case.dtype,
                    [la, lb, shape.batch * pc],
                    guard.wrapping_add(4),
                )?,
            }
        }
    };
    let result = time_with(w, case, &mut d);
    w.kept = Some(Box::new(d));
    result
}

fn time_with(w: &mut Bench, case: &Case<'_>, d: &mut Dispatch) -> Result<Vec<f64>, Stop> {
    let job = case.job;
    let shape = d.shape;
    let dist = job.plan.distribution(job.seed as usize);
    let check = format!("{shape} {dist} (dispatch shape)");
    let seed = plan::splitmix(job.seed ^ 0xd15);
    let s = w.stream.clone();
    let mut digests = load(w, case, d, dist, seed)?;
    let total = 1 + job.timing.warmup + job.timing.runs;
    let mut times = Vec::new();
    for run in 0..total {
        let last = run + 1 == total && run > 0;
        if last {
            // The last run gets another input set: a kernel that replays an output it kept (in its own device
            // memory) from the earlier runs, whose inputs were all the same, fails the check after it.
            digests = load(w, case, d, dist, plan::splitmix(seed ^ 0x1a57))?;
        }
        match &d.c0 {
            Some(c0) => s.memcpy_dtod(c0, &mut *d.c).map_err(fault("restoring C"))?,
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
        launch_timed(w, case, &shape, ops, d.bias.as_deref(), Some(&mut ms))?;
        if let Some(narrow) = &mut d.narrow {
            w.convert(narrow, 2, &mut d.c, false)?;
        }
        if run == 0 {
            // Verified before any timing counts.
            verify(w, case, d, &digests, &check, "after the first run")?;
        } else if run > job.timing.warmup {
            times.extend(ms);
        }
    }
    verify(w, case, d, &digests, &check, "after the last timed run")?;
    Ok(times)
}

/// Fresh inputs from `seed` in the dispatch buffers (and their 16-bit copies), and the digests of what the
/// candidate reads.
fn load(
    w: &Bench,
    case: &Case<'_>,
    d: &mut Dispatch,
    dist: Distribution,
    seed: u64,
) -> Result<Vec<(&'static str, u64)>, Stop> {
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
    input_digests(w, d)
}

/// The digests of the inputs the candidate reads at the dispatch shape: A and B (their 16-bit copies for a
/// 16-bit kernel) and the bias.
fn input_digests(w: &Bench, d: &Dispatch) -> Result<Vec<(&'static str, u64)>, Stop> {
    let mut out = match &d.narrow {
        Some(Narrow::Bf16([a, b, _])) => vec![("A", w.digest(&**a)?), ("B", w.digest(&**b)?)],
        Some(Narrow::F16([a, b, _])) => vec![("A", w.digest(&**a)?), ("B", w.digest(&**b)?)],
        None => vec![("A", w.digest(&*d.a)?), ("B", w.digest(&*d.b)?)],
    };
    if let Some(bias) = &d.bias {
        out.push(("bias", w.digest(&**bias)?));
    }
    Ok(out)
}

/// The dispatch shape's checks after a run: no guard written, no input changed (`before` holds their digests
/// from [`load`]), every element of C within its bound of the float64 reference.
fn verify(
    w: &Bench,
    case: &Case<'_>,
    d: &Dispatch,
    before: &[(&'static str, u64)],
    check: &str,
    when: &str,
) -> Result<(), Stop> {
    d.check_guards(check)?;
    let unwritten = w.count_nonfinite(&d.c)?;
    if unwritten > 0 {
        return Err(reject(
            check,
            format!(
                "{unwritten} of {} output elements are NaN or infinite {when}",
                d.c.len()
            ),
        ));
    }
    for ((name, was), (_, now)) in before.iter().zip(input_digests(w, d)?) {
        if *was != now {
            return Err(reject(
                check,
                format!("the kernel wrote into its input {name} {when}"),
            ));
        }
    }
    let inputs = reference::Inputs {
        a: &d.a,
        b: &d.b,
        c0: d.c0.as_ref(),
        bias: d.bias.as_deref(),
    };
    reference::check_all(
        w,
        case.spec,
        &d.shape,
        case.alpha,
        case.beta,
        &case.job.plan.tolerance,
        &inputs,
        &d.c,
        when,
    )?
    .map(|_| ())
    .map_err(|reason| reject(check, reason))
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
    use super::*;
    use crate::eval::limits::{self, host_cap};

    fn spec(text: &str) -> MatmulSpec {
        match optiml_spec::parse(text).unwrap().family {
            optiml_spec::Family::Matmul(m) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_check_needs_every_buffer_with_its_guards_and_every_host_copy() {
        let f32 = spec("batched matmul, f32");
        let shape = MatmulShape {
            batch: 4,
            m: 64,
            n: 64,
            k: 64,
        };
        // A, B and C: 4 × 64 × 64 floats each, with two 4 KiB guards.
        let one = 4 * 64 * 64 * 4 + 2 * 4096;
        let need = check_need(&f32, DType::F32, &shape);
        assert_eq!(need.device, 3 * one);
        // A, B and C twice each, and one item's rows of op(A) and columns of op(B).
        assert_eq!(need.host, 6 * 4 * 64 * 64 * 4 + (64 + 64) * 64 * 4);
        // 16-bit copies of the three beside them.
        let half = check_need(&f32, DType::Bf16, &shape);
        assert_eq!(half.device, need.device + 3 * (4 * 64 * 64 * 2 + 2 * 4096));
        // With a bias: its buffer (256 bytes, so the smallest guards) and host copy.
        let biased = check_need(&spec("batched matmul, f32, bias"), DType::F32, &shape);
        assert_eq!(biased.device, need.device + 256 + 2 * 256);
        assert_eq!(biased.host, need.host + 256);
        // A kept dispatch set costs the device only the reference's scratch, and the host nothing.
        let scratch = reference::scratch_bytes(&shape);
        let kept = dispatch_need(&f32, DType::F32, &shape, false);
        assert_eq!((kept.device, kept.host), (scratch, 0));
        let fresh = dispatch_need(&spec("gemm, beta"), DType::F32, &shape, true);
        assert_eq!(fresh.device, 3 * one + 4 * 64 * 64 * 4 + scratch);
    }

    #[test]
    fn every_plan_shape_fits_a_small_host_and_a_huge_user_shape_is_refused() {
        let s = spec("batched matmul, f32");
        let small = host_cap(Some("1024"), None);
        for dims in &super::super::test_plan(&s, &[]).sizes {
            let shape = MatmulShape::from_dims(dims).unwrap();
            let need = check_need(&s, DType::F32, &shape);
            assert_eq!(
                limits::admit("x", need, Some(80 << 30), &small),
                Ok(()),
                "{shape}"
            );
        }
        let huge = MatmulShape {
            batch: 64,
            m: 8192,
            n: 8192,
            k: 8192,
        };
        let need = check_need(&s, DType::F32, &huge);
        let default = host_cap(None, Some("MemTotal: 2147483648 kB\n"));
        let why = limits::admit("checking 64x8192x8192x8192", need, Some(40 << 30), &default)
            .unwrap_err()
            .to_string();
        assert!(why.contains("of GPU memory"), "{why}");
        let why = limits::admit("checking 64x8192x8192x8192", need, Some(u64::MAX), &default)
            .unwrap_err()
            .to_string();
        assert!(
            why.contains("of host memory") && why.contains("16384.0 MiB"),
            "{why}"
        );
    }

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
