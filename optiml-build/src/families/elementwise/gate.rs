//! The elementwise family's gate, run in the evaluation worker: every length of the plan checked element by
//! element against the float64 reference on fresh inputs with a poisoned output, then the dispatch length timed,
//! sampled elements checked after the first and the last timed run.

use crate::eval::device::{Bench, Stop, fault, reject};
use crate::eval::plan::{self, Comparison};
use crate::eval::{Gate, Job, TestPlan, Tolerance};
use cudarc::driver::{CudaSlice, sys};
use optiml_runtime::Target;
use optiml_runtime::elementwise::{self, ElementwiseArgs};
use optiml_spec::{BinaryOp, Dim, ElementwiseOp, ElementwiseSpec, Operand};
use serde::{Deserialize, Serialize};

/// What an elementwise candidate must compute: `out[i] = f(x[i])`, `x[i] ⊕ y[i]` or `x[i] ⊕ s`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MapProblem {
    /// The spec (the operation and its operand).
    pub spec: ElementwiseSpec,
    /// The length it is timed at.
    pub n: usize,
    /// The scalar operand used in checks (ignored without one).
    pub s: f32,
}

/// The elementwise family's gate.
pub struct MapGate;

impl Gate for MapGate {
    fn family(&self) -> &'static str {
        super::FAMILY
    }

    fn run(&self, bench: &mut Bench, job: &Job, target: Target<'_>) -> Result<Vec<f64>, Stop> {
        let problem: MapProblem = job
            .problem
            .decode()
            .map_err(|reason| reject("problem", reason))?;
        let spec = &problem.spec;
        for (i, dims) in job.plan.sizes.iter().enumerate() {
            let &[len] = &dims[..] else {
                return Err(reject("plan", format!("{dims:?} is not a length")));
            };
            let seed = plan::splitmix(job.seed ^ (i as u64 + 1));
            run_length(bench, job, target, spec, len, problem.s, seed, i, None)?;
        }
        let seed = plan::splitmix(job.seed ^ 0xd15);
        let mut times = Vec::new();
        run_length(
            bench,
            job,
            target,
            spec,
            problem.n,
            problem.s,
            seed,
            0,
            Some(&mut times),
        )?;
        Ok(times)
    }
}

/// The default plan for `spec`: one element, lengths that are no multiple of the vector width or of any block,
/// one past a power of two, and `extra` (the user's); a fixed length is kept.
pub fn test_plan(spec: &ElementwiseSpec, extra: &[usize]) -> TestPlan {
    let mut lengths: Vec<usize> = Vec::new();
    for &n in [1, 3, 31, 1000, 4097, 100_003].iter().chain(extra) {
        let n = match spec.n {
            Dim::Fixed(f) => f as usize,
            Dim::Runtime => n,
        };
        if !lengths.contains(&n) {
            lengths.push(n);
        }
    }
    TestPlan::new(
        lengths.into_iter().map(|n| vec![n]).collect(),
        Tolerance::F32_MAP,
    )
}

/// One elementwise check on fresh inputs of length `n`. Without `times`, every element is compared with
/// the float64 reference. With `times` (the dispatch length), the first run is checked on sampled elements
/// after every element was found written, then warm-up and timed runs follow, each from a poisoned output
/// and a flushed L2, and the last output is checked again.
#[allow(clippy::too_many_arguments)]
fn run_length(
    w: &mut Bench,
    job: &Job,
    target: Target<'_>,
    spec: &ElementwiseSpec,
    n: usize,
    s: f32,
    seed: u64,
    index: usize,
    times: Option<&mut Vec<f64>>,
) -> Result<(), Stop> {
    let dist = job.plan.distribution(index + job.seed as usize % 3);
    let check = format!(
        "n={n} {dist}{}",
        if times.is_some() {
            " (dispatch length)"
        } else {
            ""
        }
    );
    let st = w.stream.clone();
    let alloc = |len: usize| {
        st.alloc_zeros::<f32>(len.max(1))
            .map_err(fault("allocating"))
    };
    let tensor_y = matches!(spec.op, ElementwiseOp::Binary(_, Operand::Tensor));
    let (mut x, mut out) = (alloc(n)?, alloc(n)?);
    let mut y = if tensor_y { Some(alloc(n)?) } else { None };
    w.fill(&mut x, seed ^ 1, dist)?;
    if let Some(y) = &mut y {
        w.fill(y, seed ^ 2, dist)?;
    }
    let copy = |buf: &CudaSlice<f32>| st.clone_dtoh(buf).map_err(fault("copying inputs"));
    let hx = copy(&x)?;
    let hy = match &y {
        Some(y) => copy(y)?,
        None => Vec::new(),
    };
    let launch = |w: &Bench, out: &mut CudaSlice<f32>| {
        elementwise::launch_target(
            "candidate",
            &w.stream,
            target,
            ElementwiseArgs {
                x: &x,
                y: y.as_ref(),
                out,
                n: Some(n),
                s,
            },
        )
        .map_err(fault(format!("launching `{}`", job.name)))
    };
    // Every element when checking, else the first, middle and last plus drawn ones.
    let positions: Vec<usize> = if times.is_none() {
        (0..n).collect()
    } else {
        let (rows, _) = plan::sample_grid(n, 1, job.plan.dispatch_samples.pow(2), seed);
        rows
    };
    let verify = |w: &Bench, out: &CudaSlice<f32>, when: &str| -> Result<(), Stop> {
        let unwritten = w.count_nonfinite(out)?;
        if unwritten > 0 {
            return Err(reject(
                check.clone(),
                format!("{unwritten} of {n} output elements are NaN or infinite {when}"),
            ));
        }
        let host = copy(out)?;
        let pairs: Vec<(f32, f64)> = positions
            .iter()
            .map(|&i| {
                let yi = hy.get(i).copied().unwrap_or(0.0);
                (host[i], reference(spec, hx[i], yi, s))
            })
            .collect();
        compare(&job.plan.tolerance, &pairs, &|k| {
            format!("out[{}] {when}", positions[k])
        })
        .map(|_| ())
        .map_err(|reason| reject(check.clone(), reason))
    };
    let Some(times) = times else {
        w.fill_const(&mut out, f32::NAN)?;
        launch(w, &mut out)?;
        st.synchronize()
            .map_err(fault(format!("running `{}` on {check}", job.name)))?;
        return verify(w, &out, "");
    };
    let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    for run in 0..1 + job.timing.warmup + job.timing.runs {
        w.fill_const(&mut out, f32::NAN)?;
        if job.timing.flush_l2 {
            w.flush_l2()?;
        }
        let start = st
            .record_event(flags)
            .map_err(fault("recording an event"))?;
        launch(w, &mut out)?;
        let end = st
            .record_event(flags)
            .map_err(fault("recording an event"))?;
        let ms = start
            .elapsed_ms(&end)
            .map_err(fault(format!("running `{}` on {check}", job.name)))?;
        if run == 0 {
            verify(w, &out, "after the first run")?;
        } else if run > job.timing.warmup {
            times.push(ms as f64);
        }
    }
    verify(w, &out, "after the last timed run")
}

/// The float64 reference of one element of an elementwise map.
pub fn reference(spec: &ElementwiseSpec, x: f32, y: f32, s: f32) -> f64 {
    let (x, y, s) = (x as f64, y as f64, s as f64);
    match spec.op {
        ElementwiseOp::Unary(op) => op.apply(x),
        ElementwiseOp::Binary(op, operand) => {
            let w = match operand {
                Operand::Tensor => y,
                Operand::Scalar => s,
            };
            match op {
                BinaryOp::Add => x + w,
                BinaryOp::Mul => x * w,
            }
        }
    }
}

/// Compares elementwise outputs with their references, the bound scaled by the largest reference of the check.
///
/// # Errors
/// The first wrong element (`at` names it), or the relative error over the check.
pub fn compare(
    tol: &Tolerance,
    outputs: &[(f32, f64)],
    at: &dyn Fn(usize) -> String,
) -> Result<usize, String> {
    let scale = outputs.iter().fold(0.0f64, |m, (_, r)| m.max(r.abs()));
    let mut cmp = Comparison::default();
    for (i, &(out, r)) in outputs.iter().enumerate() {
        cmp.check(tol, &|| at(i), out, r, scale);
    }
    cmp.finish(tol)
}

#[cfg(test)]
mod tests {
    use super::*;
    use optiml_spec::parse;

    #[test]
    fn elementwise_plan_and_reference() {
        let ew = |text: &str| match parse(text).unwrap().family {
            optiml_spec::Family::Elementwise(e) => e,
            other => panic!("{other:?}"),
        };
        let p = test_plan(&ew("y = gelu(x)"), &[12345]);
        assert!([1, 4097, 12345].iter().all(|&n| p.sizes.contains(&vec![n])));
        assert_eq!(test_plan(&ew("relu, n=64"), &[]).sizes, vec![vec![64]]);
        let gelu = ew("y = gelu(x)");
        assert!((reference(&gelu, 1.0, 0.0, 0.0) - 0.841_344_746).abs() < 1e-8);
        assert_eq!(reference(&ew("z = x + y"), 1.5, 2.0, 9.0), 3.5);
        assert_eq!(reference(&ew("y = x * s"), 1.5, 2.0, 4.0), 6.0);
        let tol = Tolerance::F32_MAP;
        assert!(
            compare(
                &tol,
                &[(0.841_344_7, 0.841_344_746), (0.0, 1e-30)],
                &|i| format!("{i}")
            )
            .is_ok()
        );
        let e = compare(&tol, &[(1.0, 1.0), (f32::NAN, 2.0)], &|i| {
            format!("out[{i}]")
        })
        .unwrap_err();
        assert!(e.contains("out[1]"), "{e}");
        assert!(compare(&tol, &[(1.001, 1.0)], &|i| format!("{i}")).is_err());
    }
}
