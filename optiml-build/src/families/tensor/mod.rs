//! The tensor family: any program of `optiml_spec::program` that a generator shape covers (pointwise, row
//! reductions and normalisations, reductions over a middle or leading axis, reductions across blocks: of a whole
//! tensor, or batch statistics), generated from the program rather than specialised from a template, checked
//! against the float64 interpreter of the program itself.

pub mod codegen;
pub mod contract;
pub mod gate;
#[cfg(test)]
mod migrate_tests;
pub mod reference;

use super::{Catalog, Family, is_schedule_of, read_schedule};
use crate::config::{Dims, KernelSettings};
use crate::eval::{Evaluable, Problem};
use crate::experts::Candidate;
use crate::tune::{self, Bucket, Progress, Rate, Request, Target, TuneError};
use codegen::{
    ColumnSchedule, ColumnShape, PointwiseSchedule, PointwiseShape, RowSchedule, RowShape,
    ScanSchedule, ScanShape, Shape, TreeSchedule, TreeShape,
};
use optiml_runtime::Arch;
use optiml_spec::program::Program;
use optiml_spec::{Dim, Spec};
use std::borrow::Cow;
use std::fmt;

/// The tensor family.
pub struct Tensor;

/// The family's name, in problems and listings.
const FAMILY: &str = "tensor";

/// The elements a program is tuned at when its spec fixes no size: 2²⁶ (256 MiB of f32), far past L2, as the
/// bandwidth-bound kernels of this family are used.
pub const TUNED_ELEMENTS: usize = 1 << 26;

/// The extent a reduced dimension is tuned at when neither the spec nor the user gives one.
pub const TUNED_REDUCED: usize = 4096;

fn program(spec: &Spec) -> Option<&Program> {
    match &spec.family {
        optiml_spec::Family::Tensor(p) => Some(p),
        _ => None,
    }
}

/// The kernel names of the five shapes, in listings.
const KERNELS: [&str; 5] = ["pointwise", "rows", "columns", "tree", "scan"];

fn catalog(shape: &Shape) -> Catalog {
    match shape {
        Shape::Pointwise(_) => Catalog::of::<PointwiseSchedule>(FAMILY, KERNELS[0]),
        Shape::Rows(_) => Catalog::of::<RowSchedule>(FAMILY, KERNELS[1]),
        Shape::Columns(_) => Catalog::of::<ColumnSchedule>(FAMILY, KERNELS[2]),
        Shape::Tree(_) => Catalog::of::<TreeSchedule>(FAMILY, KERNELS[3]),
        Shape::Scan(_) => Catalog::of::<ScanSchedule>(FAMILY, KERNELS[4]),
    }
}

/// What every candidate is made from: the generator's own code (its emitted text is a function of nothing
/// else but the program and the schedule) and the header its sources include. Hashing the generator rather than
/// the kernels it would emit keeps the version cheap (a row program's space holds thousands of schedules) and
/// never misses a change: any edit of the generator retires every entry it made, and `prepare` carries over the
/// tuned ones whose CUBIN did not change.
const GENERATOR: [&str; 10] = [
    crate::cuda::PROGRAM.text,
    include_str!("codegen/mod.rs"),
    include_str!("codegen/classify.rs"),
    include_str!("codegen/emit.rs"),
    include_str!("codegen/plan.rs"),
    include_str!("codegen/pointwise.rs"),
    include_str!("codegen/rows.rs"),
    include_str!("codegen/columns.rs"),
    include_str!("codegen/tree.rs"),
    include_str!("codegen/scan.rs"),
];

/// The key a call of `p` at `extents` is dispatched by ([`optiml_runtime::program::shape_key`]): a winner tuned
/// at `extents` carries it, so that the launcher picks it for calls near that shape over the untuned defaults of
/// the row-length buckets (a winner without a key was never launched beside them). `None` when no generator
/// covers `p`. The key follows the program's work items, which every schedule and architecture share.
pub fn dispatch_key(p: &Program, extents: &[usize]) -> Option<[u64; 4]> {
    let shape = codegen::classify(p).ok()?;
    match shape.default_candidate(Arch::new(9, 0)).launch {
        optiml_runtime::Launch::Program(launch) => {
            Some(optiml_runtime::program::shape_key(&launch, extents))
        }
        _ => None,
    }
}

impl Family for Tensor {
    fn name(&self) -> &'static str {
        FAMILY
    }

    fn claims(&self, spec: &Spec) -> bool {
        program(spec).is_some()
    }

    fn supports(&self, spec: &Spec) -> Result<(), String> {
        let Some(p) = program(spec) else {
            return super::of(spec).supports(spec);
        };
        codegen::classify(p).map(|_| ()).map_err(|e| e.to_string())
    }

    fn sources(&self, spec: &Spec) -> Vec<Cow<'static, str>> {
        if program(spec).is_none() {
            return super::of(spec).sources(spec);
        }
        GENERATOR.iter().map(|s| Cow::Borrowed(*s)).collect()
    }

    fn default_candidate(&self, spec: &Spec, arch: Arch) -> Candidate {
        let Some(p) = program(spec) else {
            return super::of(spec).default_candidate(spec, arch);
        };
        match codegen::classify(p) {
            Ok(shape) => shape.default_candidate(arch),
            // `supports` refused it before anything asked for a candidate (the build skips such a kernel with
            // the reason); an empty source fails to compile, loudly, if someone asks anyway.
            Err(e) => Candidate {
                source: format!("#error \"{e}\"\n"),
                entry: codegen::ENTRY,
                launch: optiml_runtime::Launch::Program(optiml_runtime::ProgramLaunch {
                    threads: 32,
                    smem_bytes: 0,
                    items_mask: 0,
                    items_per_block: 1,
                    max_blocks_per_sm: 0,
                    cluster: 1,
                    nonempty_mask: 0,
                    tree: None,
                }),
                schedule: "not generated".into(),
            },
        }
    }

    fn default_candidates(&self, spec: &Spec, arch: Arch) -> Vec<(Option<[u64; 4]>, Candidate)> {
        let Some(p) = program(spec) else {
            return super::of(spec).default_candidates(spec, arch);
        };
        match codegen::classify(p) {
            Ok(shape) => shape.default_candidates(arch),
            Err(_) => vec![(None, self.default_candidate(spec, arch))],
        }
    }

    fn scheduled_candidate(
        &self,
        spec: &Spec,
        schedule: &serde_json::Value,
    ) -> Result<Candidate, serde_json::Error> {
        let Some(p) = program(spec) else {
            return super::of(spec).scheduled_candidate(spec, schedule);
        };
        match codegen::classify(p) {
            Ok(Shape::Rows(s)) => match read_schedule::<RowSchedule>(schedule) {
                Ok(row) => Ok(row.candidate(&s)),
                // Long rows are searched as a tree (`TreeShape::for_long_rows`): their log holds a tree's
                // schedule.
                Err(e) => match (
                    codegen::TreeShape::of_rows(&s),
                    read_schedule::<TreeSchedule>(schedule),
                ) {
                    (Some(tree), Ok(t)) => Ok(t.candidate(&tree)),
                    _ => Err(e),
                },
            },
            Ok(Shape::Columns(s)) => Ok(read_schedule::<ColumnSchedule>(schedule)?.candidate(&s)),
            Ok(Shape::Tree(s)) => Ok(read_schedule::<TreeSchedule>(schedule)?.candidate(&s)),
            Ok(Shape::Scan(s)) => Ok(read_schedule::<ScanSchedule>(schedule)?.candidate(&s)),
            Ok(Shape::Pointwise(s)) => {
                Ok(read_schedule::<PointwiseSchedule>(schedule)?.candidate(&s))
            }
            Err(e) => Err(serde::de::Error::custom(e.to_string())),
        }
    }

    fn gate(&self) -> &'static dyn crate::eval::Gate {
        &gate::ProgramGate
    }

    fn catalogs(&self) -> Vec<Catalog> {
        vec![
            Catalog::of::<PointwiseSchedule>(FAMILY, KERNELS[0]),
            Catalog::of::<RowSchedule>(FAMILY, KERNELS[1]),
            Catalog::of::<ColumnSchedule>(FAMILY, KERNELS[2]),
            Catalog::of::<TreeSchedule>(FAMILY, KERNELS[3]),
            Catalog::of::<ScanSchedule>(FAMILY, KERNELS[4]),
        ]
    }

    fn searched_catalog(&self, spec: &Spec) -> Catalog {
        let Some(p) = program(spec) else {
            return super::of(spec).searched_catalog(spec);
        };
        match codegen::classify(p) {
            Ok(shape) => catalog(&shape),
            Err(_) => Catalog::of::<PointwiseSchedule>(FAMILY, KERNELS[0]),
        }
    }

    fn catalog_of(&self, schedule: &serde_json::Value) -> Option<Catalog> {
        if is_schedule_of::<PointwiseSchedule>(schedule) {
            Some(Catalog::of::<PointwiseSchedule>(FAMILY, KERNELS[0]))
        } else if is_schedule_of::<RowSchedule>(schedule) {
            Some(Catalog::of::<RowSchedule>(FAMILY, KERNELS[1]))
        } else if is_schedule_of::<ColumnSchedule>(schedule) {
            Some(Catalog::of::<ColumnSchedule>(FAMILY, KERNELS[2]))
        } else if is_schedule_of::<TreeSchedule>(schedule) {
            Some(Catalog::of::<TreeSchedule>(FAMILY, KERNELS[3]))
        } else if is_schedule_of::<ScanSchedule>(schedule) {
            Some(Catalog::of::<ScanSchedule>(FAMILY, KERNELS[4]))
        } else {
            None
        }
    }

    /// A shape is the run-time dimensions' extents in program order (`4096x393216` for `x[r, c]`); the default
    /// is [`default_extents`].
    fn targets(
        &self,
        spec: &Spec,
        settings: &KernelSettings,
        shapes: Option<&[Dims]>,
    ) -> Result<Vec<Target>, String> {
        let Some(p) = program(spec) else {
            return super::of(spec).targets(spec, settings, shapes);
        };
        let runtime = p.dims.iter().filter(|d| d.size == Dim::Runtime).count();
        let given = shapes.unwrap_or(&settings.shapes);
        let all: Vec<Vec<usize>> = if given.is_empty() {
            vec![default_extents(p)]
        } else {
            given
                .iter()
                .map(|d| {
                    if d.0.len() != runtime {
                        return Err(format!(
                            "`{d}` gives {} sizes; this program has {runtime} run-time dimensions ({})",
                            d.0.len(),
                            runtime_names(p)
                        ));
                    }
                    p.extents(&d.0)
                })
                .collect::<Result<_, _>>()?
        };
        all.into_iter()
            .map(|extents| {
                let e = Extents::new(&extents).map_err(|e| e.to_string())?;
                Ok(Target {
                    bucket: dispatch_key(p, &extents),
                    dims: extents,
                    label: e.labelled(p),
                    rate: Rate::Bytes,
                })
            })
            .collect()
    }

    /// `r=4096, c=393216`: the program's own dimensions at the size the search ran at (the winner serves every
    /// size), from the target's label; a log written before searches logged their targets' labels holds bare
    /// extents (`4096x393216`), said as they are.
    fn tuned_for(&self, bucket: Option<[u64; 4]>, searched_at: Option<&str>) -> String {
        match searched_at {
            Some(label) => label.split_whitespace().collect::<Vec<_>>().join(", "),
            None => super::plain_tuned_for(bucket, searched_at),
        }
    }

    fn tune(
        &self,
        request: &Request<'_>,
        report: &mut dyn FnMut(Progress),
    ) -> Result<Bucket, TuneError> {
        let kernel = request.kernel;
        let unsupported = || TuneError::Unsupported {
            kernel: kernel.name.clone(),
            family: FAMILY,
        };
        let Some(p) = program(&kernel.spec) else {
            return Err(unsupported());
        };
        let extents = Extents::new(&request.target.dims).map_err(|_| unsupported())?;
        let plan = gate::test_plan(p, &request.settings.test_shapes);
        // The user's seed joins the search as a root.
        let roots: Vec<_> = kernel
            .seed
            .iter()
            .filter_map(|seed| contract::seed_root(p, seed))
            .chain(request.roots.iter().cloned())
            .collect();
        match codegen::classify(p).map_err(|_| unsupported())? {
            Shape::Pointwise(s) => tune::search_with_roots::<PointwiseSchedule>(
                request,
                (s, extents, plan),
                &roots,
                report,
            ),
            // Rows the build gives a tree (long rows whose statistics fuse, as the default of their length's
            // bucket) are searched as a tree: the row kernel's space holds nothing that reads them as few times
            // (KernelBench 40 on an H100: the row search's best 0.488 ms, the tree's 0.307).
            Shape::Rows(s) => {
                let row_len = s
                    .reduced
                    .iter()
                    .map(|&d| request.target.dims.get(d).copied().unwrap_or(1))
                    .product();
                match codegen::TreeShape::for_long_rows(&s, row_len, request.arch) {
                    Some(t) => tune::search_with_roots::<TreeSchedule>(
                        request,
                        (t, extents, plan),
                        &roots,
                        report,
                    ),
                    None => {
                        // The ring joins as roots: the walk from the bucket's default does not reach it.
                        let rings = RowSchedule::rings(&s, row_len, request.arch)
                            .into_iter()
                            .map(|r| crate::experts::Root {
                                name: crate::search::Tunable::describe(&r),
                                // Plain data always serialises.
                                schedule: serde_json::to_value(r).unwrap_or_default(),
                                candidate: r.candidate(&s),
                            });
                        let roots: Vec<_> = roots.iter().cloned().chain(rings).collect();
                        tune::search_with_roots::<RowSchedule>(
                            request,
                            (s, extents, plan),
                            &roots,
                            report,
                        )
                    }
                }
            }
            Shape::Columns(s) => tune::search_with_roots::<ColumnSchedule>(
                request,
                (s, extents, plan),
                &roots,
                report,
            ),
            Shape::Tree(s) => {
                tune::search_with_roots::<TreeSchedule>(request, (s, extents, plan), &roots, report)
            }
            Shape::Scan(s) => {
                tune::search_with_roots::<ScanSchedule>(request, (s, extents, plan), &roots, report)
            }
        }
    }
}

fn runtime_names(p: &Program) -> String {
    let names: Vec<&str> = p
        .dims
        .iter()
        .filter(|d| d.size == Dim::Runtime)
        .map(|d| d.name.as_str())
        .collect();
    names.join(", ")
}

/// Every dimension's extent when the user gives no shape: the reduced dimensions [`TUNED_REDUCED`] elements
/// together (the innermost the most, the others 4 each), the others 64 except the outermost one, which takes
/// what brings the largest tensor to [`TUNED_ELEMENTS`]; fixed ones keep their value. A tree program's
/// innermost reduced dimension takes that size instead (its items stay 64 each).
pub fn default_extents(p: &Program) -> Vec<usize> {
    let reduced = p.reduced_dims();
    let runtime_reduced: Vec<usize> = reduced
        .iter()
        .copied()
        .filter(|&i| p.dims[i].size == Dim::Runtime)
        .collect();
    // Memory order puts the innermost reduced dimension last among a tensor's reduced axes: the highest
    // position in the largest input's axes.
    let innermost = p.inputs.iter().max_by_key(|t| t.axes.len()).and_then(|t| {
        t.axes
            .iter()
            .rev()
            .find(|a| runtime_reduced.contains(a))
            .copied()
    });
    let others = runtime_reduced.len().saturating_sub(1) as u32;
    let mut extents: Vec<usize> = p
        .dims
        .iter()
        .enumerate()
        .map(|(i, d)| match d.size {
            Dim::Fixed(v) => v as usize,
            Dim::Runtime if Some(i) == innermost => (TUNED_REDUCED >> (2 * others)).max(1),
            Dim::Runtime if reduced.contains(&i) => 4,
            Dim::Runtime => 64,
        })
        .collect();
    // A tree reduces few items of many elements each (a whole tensor, batch statistics per channel): the
    // innermost reduced dimension takes the size.
    let tree = matches!(codegen::classify(p), Ok(Shape::Tree(_)));
    let outer = if tree {
        innermost
    } else {
        (0..p.dims.len()).find(|&i| p.dims[i].size == Dim::Runtime && !reduced.contains(&i))
    };
    if let Some(o) = outer {
        let largest = p
            .inputs
            .iter()
            .map(|t| t.axes.as_slice())
            .chain(p.outputs().map(|(_, s)| s.axes.as_slice()))
            .max_by_key(|axes| Program::len_of(axes, &extents))
            .unwrap_or(&[]);
        let rest: usize = largest
            .iter()
            .filter(|&&a| a != o)
            .map(|&a| extents[a])
            .product();
        extents[o] = (TUNED_ELEMENTS / rest.max(1)).max(1);
    }
    extents
}

/// Every dimension's extent, in program order: the problem size a program's candidates are timed at.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Extents {
    len: u8,
    values: [u64; Extents::MAX],
}

/// More dimensions than [`Extents`] holds.
#[derive(Debug)]
pub struct TooManyDims(usize);

impl fmt::Display for TooManyDims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} dimensions; at most {} are supported",
            self.0,
            Extents::MAX
        )
    }
}

impl Extents {
    /// The most dimensions a program may have.
    pub const MAX: usize = 8;

    /// `extents` as a value.
    ///
    /// # Errors
    /// More than [`Extents::MAX`] of them.
    pub fn new(extents: &[usize]) -> Result<Self, TooManyDims> {
        if extents.len() > Self::MAX {
            return Err(TooManyDims(extents.len()));
        }
        let mut values = [0u64; Self::MAX];
        for (v, &e) in values.iter_mut().zip(extents) {
            *v = e as u64;
        }
        Ok(Extents {
            len: extents.len() as u8,
            values,
        })
    }

    /// The extents.
    pub fn get(&self) -> Vec<usize> {
        self.values[..self.len as usize]
            .iter()
            .map(|&v| v as usize)
            .collect()
    }

    /// `r=4096 c=393216`.
    pub fn labelled(&self, p: &Program) -> String {
        let parts: Vec<String> = p
            .dims
            .iter()
            .zip(self.get())
            .map(|(d, v)| format!("{}={v}", d.name))
            .collect();
        parts.join(" ")
    }
}

impl fmt::Debug for Extents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.get())
    }
}

impl fmt::Display for Extents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.get().iter().map(usize::to_string).collect();
        f.write_str(&parts.join("x"))
    }
}

/// What the worker verifies and times for a kernel of `p` at `extents`: any kernel taking the program ABI, checked
/// by this family's gate against the float64 interpreter.
pub fn problem(p: &Program, extents: &[usize]) -> Problem {
    Problem::new(
        FAMILY,
        &gate::ProgramProblem::new(p.clone(), extents.to_vec()),
    )
}

/// The minimum DRAM traffic of `p` at `extents`: every input read once, every output written once.
pub fn min_bytes(p: &Program, extents: &[usize]) -> f64 {
    let inputs = p
        .inputs
        .iter()
        .map(|t| Program::len_of(&t.axes, extents) * t.elem.bytes(p.dtype));
    let outputs = p
        .outputs()
        .map(|(_, s)| Program::len_of(&s.axes, extents) * s.elem.bytes(p.dtype));
    inputs.chain(outputs).sum::<usize>() as f64
}

/// The elements of `p`'s largest tensor at `extents`: the work a candidate is credited with (this family is judged
/// by bandwidth) and the size its gate's plan and samples are bounded by.
pub fn largest(p: &Program, extents: &[usize]) -> usize {
    p.inputs
        .iter()
        .map(|t| Program::len_of(&t.axes, extents))
        .chain(p.outputs().map(|(_, s)| Program::len_of(&s.axes, extents)))
        .max()
        .unwrap_or(0)
}

macro_rules! evaluable {
    ($($schedule:ty => $shape:ty, $start:expr $(, launched: $launched:expr)?);*) => {$(
        impl Evaluable for $schedule {
            type Spec = $shape;
            type Shape = Extents;

            fn candidate(&self, spec: &$shape) -> Candidate {
                <$schedule>::candidate(self, spec)
            }

            fn problem(spec: &$shape, shape: Extents) -> Problem {
                problem(&spec.program, &shape.get())
            }

            fn work(spec: &$shape, shape: Extents) -> (f64, f64) {
                let extents = shape.get();
                (largest(&spec.program, &extents) as f64, min_bytes(&spec.program, &extents))
            }

            fn start(spec: &$shape, shape: Extents, arch: Arch) -> Self {
                ($start)(spec, &shape.get(), arch)
            }

            $(
                fn as_launched(&self, spec: &$shape, _shape: Extents) -> Self {
                    ($launched)(self, spec)
                }
            )?
        }
    )*};
}
// Each search starts where an untuned build launches: a row kernel at the default of its row length's bucket (a
// search of cross-entropy from the general default, 256 threads per row, kept it after 32 evaluations: 1.4x
// slower than the bucket's default there), a map at its arithmetic's default, a scan at its lines' default.
evaluable!(
    PointwiseSchedule => PointwiseShape,
        |s: &PointwiseShape, _: &[usize], arch| PointwiseSchedule::for_program(s, arch);
    RowSchedule => RowShape, |s: &RowShape, extents: &[usize], arch| {
        // The bucket the launcher picks for this row length (every bucket's key has the same rows).
        let row_len: usize = s.reduced.iter().map(|&d| extents[d]).product();
        let distance = |len: usize| ((len as f64 + 1.0).ln() - (row_len as f64 + 1.0).ln()).abs();
        let bucket = codegen::ROW_BUCKETS
            .iter()
            .copied()
            .min_by(|a, b| distance(*a).total_cmp(&distance(*b)))
            .unwrap_or(row_len);
        RowSchedule::for_row(s, bucket, arch)
    }, launched: RowSchedule::launched;
    ColumnSchedule => ColumnShape, |_: &ColumnShape, _: &[usize], arch| <ColumnSchedule as crate::search::Tunable>::default_for(arch);
    TreeSchedule => TreeShape, |_: &TreeShape, _: &[usize], arch| <TreeSchedule as crate::search::Tunable>::default_for(arch);
    ScanSchedule => ScanShape, |s: &ScanShape, _: &[usize], arch| ScanSchedule::for_scan(s, arch)
);

#[cfg(test)]
mod tests {
    use super::*;

    fn program(text: &str) -> Program {
        match optiml_spec::parse(text).unwrap().family {
            optiml_spec::Family::Tensor(p) => p,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_row_program_tuned_as_a_tree_reads_its_logged_tree_schedule() {
        use crate::search::Tunable;
        let spec = optiml_spec::parse("layer norm over the last axis, f32").unwrap();
        let Ok(Shape::Rows(rows)) = codegen::classify(super::program(&spec).unwrap()) else {
            panic!("a layer norm is a row program");
        };
        let arch = optiml_runtime::Arch::new(9, 0);
        let tree = TreeSchedule::default_for(arch);
        let logged = serde_json::to_value(tree).unwrap();
        let read = Tensor.scheduled_candidate(&spec, &logged).unwrap();
        assert_eq!(
            read.source,
            tree.candidate(&TreeShape::of_rows(&rows).unwrap()).source
        );
        let row = serde_json::to_value(RowSchedule::default_for(arch)).unwrap();
        assert_eq!(
            Tensor.scheduled_candidate(&spec, &row).unwrap().source,
            RowSchedule::default_for(arch).candidate(&rows).source
        );
    }

    #[test]
    fn default_extents_keep_the_reduced_length_and_the_size() {
        let total = |p: &Program, e: &[usize]| Program::len_of(&p.inputs[0].axes, e);
        // Softmax: rows of 4096, 2²⁶ elements.
        let p = program("softmax over the last axis");
        assert_eq!(default_extents(&p), vec![16384, 4096]);
        // Layer norm over three axes: 4096 elements per row together, not 4096³.
        let p =
            program("layer norm over the last 3 axes of a 4-D tensor with affine weight and bias");
        let e = default_extents(&p);
        assert_eq!(e[1] * e[2] * e[3], 4096, "{e:?}");
        assert_eq!(total(&p, &e), TUNED_ELEMENTS);
        // Group norm keeps its fixed group count.
        let p = program("group norm, groups 8");
        let e = default_extents(&p);
        assert!(e.contains(&8), "{e:?}");
        assert_eq!(total(&p, &e), TUNED_ELEMENTS);
        // A middle-axis reduction: the reduced axis 4096, the inner 64, the outer the rest.
        let p = program("y[b, k] = sum(j) x[b, j, k]");
        assert_eq!(default_extents(&p), vec![256, 64, 4096]);
        // A map: one flat dimension.
        assert_eq!(default_extents(&program("selu")), vec![TUNED_ELEMENTS]);
        // Trees: a norm of everything, and batch statistics of 64 channels.
        assert_eq!(
            default_extents(&program("frobenius norm")),
            vec![TUNED_ELEMENTS]
        );
        let p = program("batch norm, training mode");
        let e = default_extents(&p);
        assert_eq!(total(&p, &e), TUNED_ELEMENTS);
        let channel = (0..e.len()).find(|d| !p.reduced_dims().contains(d));
        assert_eq!(channel.map(|c| e[c]), Some(64), "{e:?}");
    }

    #[test]
    fn a_recorded_schedule_reads_back_as_its_class() {
        use crate::search::Tunable;
        let arch = Arch::new(9, 0);
        for (text, schedule) in [
            (
                "hardtanh, min -1, max 1",
                serde_json::to_value(PointwiseSchedule::default_for(arch)),
            ),
            (
                "softmax over the last axis",
                serde_json::to_value(RowSchedule::default_for(arch)),
            ),
            (
                "sum over dim 1 of a 3-D tensor",
                serde_json::to_value(ColumnSchedule::default_for(arch)),
            ),
            (
                "frobenius norm",
                serde_json::to_value(TreeSchedule::default_for(arch)),
            ),
        ] {
            let spec = optiml_spec::parse(text).unwrap();
            let schedule = schedule.unwrap();
            assert_eq!(
                Tensor.catalog_of(&schedule),
                Some(Tensor.searched_catalog(&spec)),
                "{text}"
            );
            let c = Tensor.scheduled_candidate(&spec, &schedule).unwrap();
            assert_eq!(
                c.source,
                Tensor.default_candidate(&spec, arch).source,
                "{text}"
            );
            assert!(Tensor.supports(&spec).is_ok(), "{text}");
        }
        // Batch statistics over dimensions around the kept one: a tree.
        let bn = optiml_spec::parse("batch norm, training mode").unwrap();
        assert!(Tensor.supports(&bn).is_ok());
    }

    #[test]
    fn a_variant_is_said_to_be_tuned_for_the_programs_own_dimensions() {
        let spec = optiml_spec::parse("softmax over the last axis").unwrap();
        // A target's label is what a search of this family logs.
        let targets = Tensor
            .targets(
                &spec,
                &KernelSettings::default(),
                Some(&[Dims(vec![4096, 393216])]),
            )
            .unwrap();
        assert_eq!(
            Tensor.tuned_for(None, Some(&targets[0].label)),
            "r=4096, c=393216"
        );
        // An older log's bare extents, never matmul's four sizes.
        assert_eq!(Tensor.tuned_for(None, Some("4096x393216")), "4096x393216");
        assert_eq!(Tensor.tuned_for(None, None), "every size");
    }

    #[test]
    fn a_winner_carries_the_key_calls_at_its_shape_are_dispatched_by() {
        // A row program: the rows, then the row length, as the launcher keys a call. The untuned defaults
        // beside it are keyed by row length alone (4096 rows), so the winner is nearest to calls at its shape.
        let kl = optiml_spec::parse("kl divergence, batchmean").unwrap();
        let targets = Tensor
            .targets(
                &kl,
                &KernelSettings::default(),
                Some(&[Dims(vec![16384, 16384])]),
            )
            .unwrap();
        assert_eq!(targets[0].bucket, Some([16384, 1, 16384, 1]));
        let defaults = Tensor.default_candidates(&kl, Arch::new(9, 0));
        assert!(
            defaults
                .iter()
                .all(|(key, _)| key.is_some() && *key != targets[0].bucket)
        );
        // A map: every element is an item.
        let relu = program("relu");
        assert_eq!(dispatch_key(&relu, &[1000]), Some([1000, 1, 1, 1]));
    }

    #[test]
    fn extents_print_as_shapes() {
        let e = Extents::new(&[4096, 393216]).unwrap();
        assert_eq!(e.to_string(), "4096x393216");
        assert_eq!(
            e.labelled(&program("softmax over the last axis")),
            "r=4096 c=393216"
        );
        assert!(Extents::new(&[1; 9]).is_err());
    }
}
