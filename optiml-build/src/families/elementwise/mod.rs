//! The elementwise family: `out[i] = f(x[i])`, `x[i] ⊕ y[i]` or `x[i] ⊕ s`, from one template (a grid-stride loop
//! with 128-bit accesses where alignment allows) whose launch shape the search tunes once, at a length far past
//! L2; the winner serves every length.

pub mod gate;
#[cfg(test)]
mod migrate_tests;

use super::{Catalog, Family, is_schedule_of, read_schedule};
use crate::config::{Dims, KernelSettings};
use crate::eval::{Evaluable, Problem};
use crate::experts::{Candidate, Def, defines};
use crate::search::{Bottleneck, Transform, Tunable};
use crate::tune::{self, Bucket, Progress, Rate, Request, Target, TuneError};
use optiml_runtime::{Arch, Launch};
use optiml_spec::{BinaryOp, ElementwiseOp, ElementwiseSpec, Operand, Spec, UnaryOp};

/// The CUDA template; specialised only by macros.
pub const TEMPLATE: &str = include_str!("cuda/elementwise_f32.cu");

/// The elementwise family.
pub struct Elementwise;

/// The family's name, in problems and listings.
const FAMILY: &str = "elementwise";

/// The length an elementwise kernel is tuned at when its spec fixes none: 2²⁶ elements (256 MiB per tensor), far
/// past L2, as a bandwidth-bound map is used.
pub const TUNED_LENGTH: usize = 1 << 26;

/// What every elementwise candidate is made from: the template and the epilogue header it includes.
const SOURCES: [&str; 2] = [TEMPLATE, crate::cuda::EPILOGUE.text];

fn map(spec: &Spec) -> Option<&ElementwiseSpec> {
    match &spec.family {
        optiml_spec::Family::Elementwise(e) => Some(e),
        optiml_spec::Family::Matmul(_) | optiml_spec::Family::Tensor(_) => None,
    }
}

impl Family for Elementwise {
    fn name(&self) -> &'static str {
        FAMILY
    }

    fn sources(&self, spec: &Spec) -> Vec<std::borrow::Cow<'static, str>> {
        match map(spec) {
            Some(_) => SOURCES.map(std::borrow::Cow::Borrowed).to_vec(),
            None => super::of(spec).sources(spec),
        }
    }

    fn default_candidate(&self, spec: &Spec, arch: Arch) -> Candidate {
        match map(spec) {
            Some(e) => Schedule::default_for(arch).candidate(e),
            None => super::of(spec).default_candidate(spec, arch),
        }
    }

    fn scheduled_candidate(
        &self,
        spec: &Spec,
        schedule: &serde_json::Value,
    ) -> Result<Candidate, serde_json::Error> {
        match map(spec) {
            Some(e) => Ok(read_schedule::<Schedule>(schedule)?.candidate(e)),
            None => super::of(spec).scheduled_candidate(spec, schedule),
        }
    }

    fn gate(&self) -> &'static dyn crate::eval::Gate {
        &gate::MapGate
    }

    fn catalogs(&self) -> Vec<Catalog> {
        vec![Catalog::of::<Schedule>(FAMILY, "grid-stride")]
    }

    fn searched_catalog(&self, spec: &Spec) -> Catalog {
        match map(spec) {
            Some(_) => Catalog::of::<Schedule>(FAMILY, "grid-stride"),
            None => super::of(spec).searched_catalog(spec),
        }
    }

    fn catalog_of(&self, schedule: &serde_json::Value) -> Option<Catalog> {
        is_schedule_of::<Schedule>(schedule).then(|| Catalog::of::<Schedule>(FAMILY, "grid-stride"))
    }

    /// One target whatever the settings say: the winner serves every length.
    fn targets(
        &self,
        spec: &Spec,
        settings: &KernelSettings,
        shapes: Option<&[Dims]>,
    ) -> Result<Vec<Target>, String> {
        let Some(e) = map(spec) else {
            return super::of(spec).targets(spec, settings, shapes);
        };
        let n = match e.n {
            optiml_spec::Dim::Fixed(f) => f as usize,
            optiml_spec::Dim::Runtime => TUNED_LENGTH,
        };
        Ok(vec![Target {
            dims: vec![n],
            bucket: None,
            label: format!("n={n}"),
            rate: Rate::Bytes,
        }])
    }

    fn tune(
        &self,
        request: &Request<'_>,
        report: &mut dyn FnMut(Progress),
    ) -> Result<Bucket, TuneError> {
        let kernel = request.kernel;
        let Some(e) = map(&kernel.spec) else {
            return Err(TuneError::Unsupported {
                kernel: kernel.name.clone(),
                family: FAMILY,
            });
        };
        let n = request.target.dims.first().copied().unwrap_or(TUNED_LENGTH);
        tune::search::<Schedule>(request, e.clone(), n, gate::test_plan(e, &[]), report)
    }
}

/// Launch shape of the grid-stride loop: what the search transforms for this family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// A recorded schedule reads as this kernel's only if it has no other kernel's fields: that is how a search log
// names the catalog it walked (`crate::families::catalog_of`).
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Threads per block.
    pub threads: u32,
    /// Resident blocks per SM the grid is sized for.
    pub blocks_per_sm: u32,
}

impl Schedule {
    /// The candidate computing `spec`.
    pub fn candidate(&self, spec: &ElementwiseSpec) -> Candidate {
        let (op, binary) = match spec.op {
            ElementwiseOp::Unary(u) => (
                match u {
                    UnaryOp::Relu => 1,
                    UnaryOp::Gelu => 2,
                    UnaryOp::Silu => 3,
                    UnaryOp::Sigmoid => 4,
                    UnaryOp::Tanh => 5,
                },
                0,
            ),
            ElementwiseOp::Binary(b, operand) => (
                match b {
                    BinaryOp::Add => 6,
                    BinaryOp::Mul => 7,
                },
                match operand {
                    Operand::Tensor => 1,
                    Operand::Scalar => 2,
                },
            ),
        };
        let describe = self.describe();
        let source = format!(
            "// @generated by optiml-build {}: elementwise f32, {describe}\n{}\n{TEMPLATE}",
            env!("CARGO_PKG_VERSION"),
            defines(&[
                ("OPTIML_OP", Def::Int(op)),
                ("OPTIML_BINARY", Def::Int(binary)),
                ("OPTIML_THREADS", self.threads.into())
            ]),
        );
        Candidate {
            source,
            entry: "optiml_elementwise",
            launch: Launch::Elementwise {
                threads: self.threads,
                per_thread: 4,
                blocks_per_sm: self.blocks_per_sm,
            },
            schedule: describe,
        }
    }
}

impl Tunable for Schedule {
    /// `256 threads, 8 blocks/SM, float4`.
    fn describe(&self) -> String {
        format!(
            "{} threads, {} blocks/SM, float4",
            self.threads, self.blocks_per_sm
        )
    }

    /// Whether the template supports it: 128 to 1024 threads, and a grid of at most two waves of 2048 threads
    /// per SM (more only queues blocks; fewer than one block per SM idles SMs).
    fn is_valid(&self) -> bool {
        [128, 256, 512, 1024].contains(&self.threads)
            && [1, 2, 4, 8, 16, 32].contains(&self.blocks_per_sm)
            && self.threads * self.blocks_per_sm <= 4096
    }

    /// 256 threads, 8 blocks per SM: a full SM of 2048 threads, each with 16-byte accesses in flight.
    fn default_for(_arch: Arch) -> Self {
        Schedule {
            threads: 256,
            blocks_per_sm: 8,
        }
    }

    /// Every schedule the template supports.
    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for threads in [128, 256, 512, 1024] {
            for blocks_per_sm in [1, 2, 4, 8, 16, 32] {
                let s = Schedule {
                    threads,
                    blocks_per_sm,
                };
                if s.is_valid() {
                    out.push(s);
                }
            }
        }
        out
    }

    /// The elementwise family's transformations over its launch shape (the template is a grid-stride float4 loop).
    fn catalog() -> Vec<Transform<Self>> {
        vec![
            Transform {
                name: "wider-blocks",
                rationale: "twice the threads per block, half the blocks per SM: the same residency in fewer, larger \
                            blocks (fewer block launches and tail effects)",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(Schedule {
                        threads: s.threads * 2,
                        blocks_per_sm: (s.blocks_per_sm / 2).max(1),
                    })
                },
            },
            Transform {
                name: "narrower-blocks",
                rationale: "half the threads per block, twice the blocks per SM: finer load balance across SMs",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(Schedule {
                        threads: s.threads / 2,
                        blocks_per_sm: s.blocks_per_sm * 2,
                    })
                },
            },
            Transform {
                name: "more-blocks-per-sm",
                rationale: "a grid of more resident threads keeps more 16-byte loads in flight per SM (memory-level \
                            parallelism), the lever of a bandwidth-bound loop",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.05,
                apply: |s| {
                    Some(Schedule {
                        blocks_per_sm: s.blocks_per_sm * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-blocks-per-sm",
                rationale: "a smaller grid makes each thread loop longer: fewer blocks to schedule and more loads per \
                            thread for the compiler to overlap",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.03,
                apply: |s| {
                    Some(Schedule {
                        blocks_per_sm: s.blocks_per_sm / 2,
                        ..*s
                    })
                },
            },
        ]
    }
}

impl Evaluable for Schedule {
    type Spec = ElementwiseSpec;
    type Shape = usize;

    fn candidate(&self, spec: &ElementwiseSpec) -> Candidate {
        Schedule::candidate(self, spec)
    }

    fn problem(spec: &ElementwiseSpec, n: usize) -> Problem {
        Problem::new(
            FAMILY,
            &gate::MapProblem {
                spec: spec.clone(),
                n,
                s: 1.25,
            },
        )
    }

    fn work(spec: &ElementwiseSpec, n: usize) -> (f64, f64) {
        let tensors = match spec.op {
            ElementwiseOp::Binary(_, Operand::Tensor) => 3.0,
            _ => 2.0,
        };
        (n as f64, 4.0 * tensors * n as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_elementwise_catalog_reaches_every_schedule_from_the_default() {
        use Schedule as Ew;
        let catalog = Schedule::catalog();
        let mut names: Vec<&str> = catalog.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), catalog.len());
        let root = Ew::default_for(optiml_runtime::Arch::new(9, 0));
        let (mut seen, mut frontier) = (vec![root], vec![root]);
        while let Some(s) = frontier.pop() {
            for t in &catalog {
                if let Some(next) = t.apply_to(&s) {
                    assert!(next.is_valid(), "{} on {s:?}", t.name);
                    if !seen.contains(&next) {
                        seen.push(next);
                        frontier.push(next);
                    }
                }
            }
        }
        let all = Ew::space();
        assert!(
            all.iter().all(|s| seen.contains(s)),
            "{} of {}",
            seen.len(),
            all.len()
        );
    }
}
