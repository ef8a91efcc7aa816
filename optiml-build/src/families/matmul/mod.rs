//! The matmul family: `C = act(alpha · op(A) · op(B) + beta · C + bias)`, optionally over a batch, in f32 (exact),
//! f32 with TF32 tensor cores, bf16 or fp16. Its kernels, one level below:
//!
//! | spec | sm_90 | sm_80–89 | older | searched |
//! |---|---|---|---|---|
//! | `f32` | [`simt_f32`] (SIMT, split-K), or [`tf32x3`] where faster and as accurate | [`simt_f32`] | the same | [`simt_f32::Schedule`] (+ [`tf32x3`] roots on sm_90) |
//! | `f32, tf32` | [`tf32`] `wgmma` + TMA | [`tf32`] `mma.sync` | — | [`tf32::Schedule`] (sm_90) |
//! | `bf16` / `f16` | [`half`] `wgmma` + TMA | [`half`] `mma.sync` | [`half`] SIMT | [`half::Schedule`] (sm_90) |
//!
//! Every module also holds a matrix-vector kernel (`optiml_gemv`, `cuda/gemv_f32.cu` or `cuda/gemv_16.cu`) that
//! the launcher uses for `n == 1` or `m == 1`. The CUDA templates are in `cuda/`.

pub mod gate;
pub mod half;
pub mod plan;
pub mod reference;
pub mod simt_f32;
pub mod tf32;
pub mod tf32x3;

pub use plan::{MatmulShape, test_plan};

use super::{Catalog, Family, is_schedule_of, read_schedule};
use crate::config::{Dims, KernelSettings};
use crate::eval::{Problem, Tolerance};
use crate::experts::{Candidate, Def};
use crate::search::Tunable;
use crate::tune::{self, Bucket, Progress, Rate, Request, Target, TuneError};
use half::Spec16;
use optiml_runtime::Arch;
use optiml_spec::{Activation, DType, MatmulSpec, Precision, Spec};

/// The matmul family.
pub struct Matmul;

/// The family's name, in problems and listings.
const FAMILY: &str = "matmul";

/// Which kernels a matmul spec runs on: its precision class. (A spec of another family has none; the methods of
/// [`Matmul`] hand such a spec to its own family, which [`super::of`] never routes here.)
enum Class {
    /// Exact fp32: the SIMT kernel.
    F32(MatmulSpec),
    /// f32 buffers, TF32 tensor-core math.
    Tf32(MatmulSpec),
    /// bf16 or fp16 buffers.
    Half(Spec16),
}

impl Class {
    /// The class of `spec`, or `None` for another family's spec.
    fn of(spec: &Spec) -> Option<Class> {
        let optiml_spec::Family::Matmul(m) = &spec.family else {
            return None;
        };
        Some(match Spec16::new(m, spec.dtype) {
            Some(s) => Class::Half(s),
            None if m.precision == Precision::Tf32 => Class::Tf32(m.clone()),
            None => Class::F32(m.clone()),
        })
    }

    fn matmul(&self) -> &MatmulSpec {
        match self {
            Class::F32(m) | Class::Tf32(m) => m,
            Class::Half(s) => &s.matmul,
        }
    }
}

impl Family for Matmul {
    fn name(&self) -> &'static str {
        FAMILY
    }

    fn claims(&self, spec: &Spec) -> bool {
        Class::of(spec).is_some()
    }

    fn sources(&self, spec: &Spec) -> Vec<std::borrow::Cow<'static, str>> {
        let Some(class) = Class::of(spec) else {
            return super::of(spec).sources(spec);
        };
        // Every template includes the defaults and epilogue headers, the `wgmma` ones the sm_90 header too, the
        // f32 ones (SIMT and TF32 `wgmma`) the split-K reduction.
        let (defaults, epilogue, sm90, splitk) = (
            crate::cuda::DEFAULTS.text,
            crate::cuda::EPILOGUE.text,
            crate::cuda::SM90.text,
            crate::cuda::SPLITK.text,
        );
        let templates: Vec<&'static str> = match class {
            // (A triangular product's module holds no matrix-vector kernel.)
            Class::F32(m) if m.triangle.is_some() => {
                vec![simt_f32::TEMPLATE, defaults, epilogue, splitk]
            }
            // `exact`: the SIMT kernels only.
            Class::F32(m) if m.precision == Precision::Fma => vec![
                simt_f32::TEMPLATE,
                simt_f32::GEMV_TEMPLATE,
                defaults,
                epilogue,
                splitk,
            ],
            // The 3xTF32 root runs the TF32 `wgmma` template.
            Class::F32(_) => vec![
                simt_f32::TEMPLATE,
                simt_f32::GEMV_TEMPLATE,
                tf32::WGMMA_TEMPLATE,
                defaults,
                epilogue,
                sm90,
                splitk,
            ],
            Class::Tf32(_) => vec![
                tf32::WGMMA_TEMPLATE,
                tf32::MMA_TEMPLATE,
                simt_f32::GEMV_TEMPLATE,
                defaults,
                epilogue,
                sm90,
                splitk,
            ],
            Class::Half(_) => vec![
                half::WGMMA_TEMPLATE,
                half::SIMT_TEMPLATE,
                half::MMA_TEMPLATE,
                half::GEMV_TEMPLATE,
                defaults,
                epilogue,
                sm90,
            ],
        };
        templates
            .into_iter()
            .map(std::borrow::Cow::Borrowed)
            .collect()
    }

    fn default_candidate(&self, spec: &Spec, arch: Arch) -> Candidate {
        let Some(class) = Class::of(spec) else {
            return super::of(spec).default_candidate(spec, arch);
        };
        match class {
            Class::F32(m) => simt_f32::Schedule::default_for(arch).candidate(&m),
            Class::Tf32(m) => tf32::default_candidate(&m, arch),
            Class::Half(s) => half::default_candidate(&s, arch),
        }
    }

    fn scheduled_candidate(
        &self,
        spec: &Spec,
        schedule: &serde_json::Value,
    ) -> Result<Candidate, serde_json::Error> {
        let Some(class) = Class::of(spec) else {
            return super::of(spec).scheduled_candidate(spec, schedule);
        };
        Ok(match class {
            // A search of a plain f32 spec logs SIMT schedules and, where its 3xTF32 root won, that root's.
            Class::F32(m) if is_schedule_of::<tf32x3::Schedule>(schedule) => {
                read_schedule::<tf32x3::Schedule>(schedule)?.candidate(&m)
            }
            Class::F32(m) => read_schedule::<simt_f32::Schedule>(schedule)?.candidate(&m),
            Class::Tf32(m) => read_schedule::<tf32::Schedule>(schedule)?.candidate(&m),
            Class::Half(s) => read_schedule::<half::Schedule>(schedule)?.candidate(&s),
        })
    }

    fn gate(&self) -> &'static dyn crate::eval::Gate {
        &gate::MatmulGate
    }

    fn catalogs(&self) -> Vec<Catalog> {
        vec![
            Catalog::of::<simt_f32::Schedule>(FAMILY, "simt f32"),
            Catalog::of::<tf32::Schedule>(FAMILY, "wgmma tf32"),
            Catalog::of::<half::Schedule>(FAMILY, "wgmma bf16/f16"),
        ]
    }

    fn searched_catalog(&self, spec: &Spec) -> Catalog {
        let at = match Class::of(spec) {
            Some(Class::F32(_)) => 0,
            Some(Class::Tf32(_)) => 1,
            Some(Class::Half(_)) => 2,
            None => return super::of(spec).searched_catalog(spec),
        };
        self.catalogs().swap_remove(at)
    }

    fn catalog_of(&self, schedule: &serde_json::Value) -> Option<Catalog> {
        // A 3xTF32 schedule is a root of a plain f32 search, which walked the SIMT catalog.
        let at = if is_schedule_of::<simt_f32::Schedule>(schedule)
            || is_schedule_of::<tf32x3::Schedule>(schedule)
        {
            0
        } else if is_schedule_of::<tf32::Schedule>(schedule) {
            1
        } else if is_schedule_of::<half::Schedule>(schedule) {
            2
        } else {
            return None;
        };
        Some(self.catalogs().swap_remove(at))
    }

    /// `256×1024×1024×1024 (batch×m×n×k)`: the bucket the runtime picks the variant by.
    /// `C = … + beta · C` reads the old `C`.
    fn reads_output(&self, spec: &Spec) -> bool {
        matches!(&spec.family, optiml_spec::Family::Matmul(m) if m.beta)
    }

    fn times_untuned_shapes(&self) -> bool {
        true
    }

    fn tuned_for(&self, bucket: Option<[u64; 4]>, searched_at: Option<&str>) -> String {
        match bucket {
            Some(b) => format!("{} (batch×m×n×k)", b.map(|d| d.to_string()).join("×")),
            None => super::plain_tuned_for(None, searched_at),
        }
    }

    fn targets(
        &self,
        spec: &Spec,
        settings: &KernelSettings,
        shapes: Option<&[Dims]>,
    ) -> Result<Vec<Target>, String> {
        let Some(class) = Class::of(spec) else {
            return super::of(spec).targets(spec, settings, shapes);
        };
        let m = class.matmul();
        let shapes = match shapes.or((!settings.shapes.is_empty()).then_some(&settings.shapes[..]))
        {
            Some(dims) => dims.iter().map(shape).collect::<Result<Vec<_>, _>>()?,
            None => default_shapes(m),
        };
        Ok(shapes
            .into_iter()
            .map(|s| {
                let s = s.fit(m);
                Target {
                    dims: vec![s.batch, s.m, s.n, s.k],
                    bucket: Some([s.batch, s.m, s.n, s.k].map(|d| d as u64)),
                    label: s.to_string(),
                    rate: Rate::Flops,
                }
            })
            .collect())
    }

    fn tune(
        &self,
        request: &Request<'_>,
        report: &mut dyn FnMut(Progress),
    ) -> Result<Bucket, TuneError> {
        let kernel = request.kernel;
        let Some(class) = Class::of(&kernel.spec) else {
            return Err(TuneError::Unsupported {
                kernel: kernel.name.clone(),
                family: FAMILY,
            });
        };
        let at = match &request.target.dims[..] {
            &[batch, m, n, k] => MatmulShape { batch, m, n, k },
            other => {
                return Err(TuneError::Search {
                    kernel: kernel.name.clone(),
                    arch: request.arch,
                    shape: request.target.label.clone(),
                    reason: format!("{other:?} is not a matmul shape (batch, m, n, k)"),
                });
            }
        };
        let spec = class.matmul();
        let test_shapes = request
            .settings
            .test_shapes
            .iter()
            .map(shape)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|reason| TuneError::Search {
                kernel: kernel.name.clone(),
                arch: request.arch,
                shape: request.target.label.clone(),
                reason,
            })?;
        let mut plan = test_plan(spec, &test_shapes);
        plan.tolerance = request
            .settings
            .tolerance
            .unwrap_or(Tolerance::for_dtype(kernel.spec.dtype, spec.precision));
        // The tensor-core kernels are searched over the sm_90 `wgmma` kernels' schedules; elsewhere they have one.
        let tensor_cores_elsewhere = |why: &'static str| TuneError::Arch {
            kernel: kernel.name.clone(),
            arch: request.arch,
            why,
        };
        match class {
            Class::Half(s) if has_wgmma(request.arch) => {
                tune::search::<half::Schedule>(request, s, at, plan, report)
            }
            Class::Half(_) => Err(tensor_cores_elsewhere(
                "16-bit kernels are searched over the sm_90 `wgmma` kernel's schedules (elsewhere the SIMT \
                 kernel has one)",
            )),
            Class::Tf32(m) if has_wgmma(request.arch) => {
                tune::search::<tf32::Schedule>(request, m, at, plan, report)
            }
            Class::Tf32(_) => Err(tensor_cores_elsewhere(
                "TF32 kernels are searched over the sm_90 `wgmma` kernel's schedules (elsewhere the \
                 `mma.sync` kernel has one)",
            )),
            Class::F32(m)
                if has_wgmma(request.arch)
                    && m.triangle.is_none()
                    && m.precision != Precision::Fma =>
            {
                // The 3xTF32 kernel joins as roots ([`tf32x3::roots_at`]), and every candidate is held to twice the exact SIMT
                // kernel's error on each check's inputs: the root may win only where it is as accurate.
                plan.bound = Some(exact_bound(request.nvrtc, &m, request.arch).map_err(|e| {
                    TuneError::Search {
                        kernel: kernel.name.clone(),
                        arch: request.arch,
                        shape: request.target.label.clone(),
                        reason: format!(
                            "the exact SIMT kernel that bounds the gate did not compile: {e}"
                        ),
                    }
                })?);
                let roots: Vec<_> = tf32x3::roots_at(request.arch, &m, at)
                    .iter()
                    .map(|s| s.root(&m))
                    .collect();
                tune::search_with_roots::<simt_f32::Schedule>(
                    request,
                    (m, at, plan),
                    &roots,
                    report,
                )
            }
            Class::F32(m) => tune::search::<simt_f32::Schedule>(request, m, at, plan, report),
        }
    }
}

/// The exact SIMT kernel's default for `spec`, compiled for `arch`, as the bound of a plain f32 search's gate
/// ([`ErrorBound`](crate::eval::plan::ErrorBound)): every candidate is held to twice its error on each check.
///
/// # Errors
/// Its compile failure.
pub fn exact_bound(
    nvrtc: &crate::nvrtc::Nvrtc,
    spec: &MatmulSpec,
    arch: Arch,
) -> Result<crate::eval::plan::ErrorBound, crate::nvrtc::CompileFailure> {
    let candidate = simt_f32::Schedule::default_for(arch).candidate(spec);
    let compiled = crate::nvrtc::compile(
        nvrtc,
        "optiml_exact_bound.cu",
        &candidate.source,
        candidate.launch.image_arch(arch),
    )?;
    Ok(crate::eval::plan::ErrorBound {
        name: "the exact SIMT kernel".into(),
        ptx: compiled.ptx,
        entry: candidate.entry.to_string(),
        launch: candidate.launch,
    })
}

/// A shape as the user wrote it: `batch x m x n x k`, or `m x n x k` for batch 1.
fn shape(dims: &Dims) -> Result<MatmulShape, String> {
    match dims.0[..] {
        [batch, m, n, k] => Ok(MatmulShape { batch, m, n, k }),
        [m, n, k] => Ok(MatmulShape { batch: 1, m, n, k }),
        _ => Err(format!(
            "`{dims}` is not a matmul shape like 16x1024x1024x1024 (batch x m x n x k) or 1024x1024x1024"
        )),
    }
}

/// The shape tuned for when the user names none: a batch of 1024³ products (or the spec's fixed sizes).
pub fn default_shapes(spec: &MatmulSpec) -> Vec<MatmulShape> {
    vec![
        MatmulShape {
            batch: 16,
            m: 1024,
            n: 1024,
            k: 1024,
        }
        .fit(spec),
    ]
}

/// Whether `arch` runs the `wgmma` templates (sm_90 only: the instructions are arch-specific, and newer chips
/// have other tensor-core instructions).
pub fn has_wgmma(arch: Arch) -> bool {
    (arch.major, arch.minor) == (9, 0)
}

/// The run-time `alpha` of every matmul check (ignored without alpha): not 1, so that a kernel ignoring it fails.
const ALPHA: f32 = 0.75;
/// The run-time `beta` of every matmul check (ignored without beta).
const BETA: f32 = -0.5;

/// The split a schedule with `split_k` launches with at `shape`, as the search tells kernels apart
/// (`Evaluable::as_launched`): the launcher's count ([`optiml_runtime::matmul::splits_for`]), except that a
/// split-compiled kernel the launcher runs unsplit stays apart from the plain kernel (its registers and, with
/// beta, its C prefetch differ): it is 2, the smallest split that also runs unsplit there.
fn launched_split(split_k: u32, shape: MatmulShape) -> u32 {
    match optiml_runtime::matmul::splits_for(split_k, shape.batch * shape.m * shape.n, shape.k) {
        1 if split_k > 1 => 2,
        s => s,
    }
}

/// What the worker verifies and times for a matmul of element type `dtype` at `shape`.
fn problem(spec: &MatmulSpec, dtype: DType, shape: MatmulShape) -> Problem {
    Problem::new(
        FAMILY,
        &gate::MatmulProblem {
            spec: spec.clone(),
            dtype,
            dispatch: shape,
            alpha: ALPHA,
            beta: BETA,
        },
    )
}

/// The layout and epilogue macros every matmul template takes (the ABI of `optiml_matmul` and `optiml_gemv`).
fn spec_macros(spec: &MatmulSpec) -> [(&'static str, Def); 6] {
    let act = Def::Name(match spec.activation {
        None => "OPTIML_ACT_NONE",
        Some(Activation::Relu) => "OPTIML_ACT_RELU",
        Some(Activation::Gelu) => "OPTIML_ACT_GELU",
        Some(Activation::Silu) => "OPTIML_ACT_SILU",
    });
    [
        ("OPTIML_TRANS_A", spec.trans_a.into()),
        ("OPTIML_TRANS_B", spec.trans_b.into()),
        ("OPTIML_HAS_ALPHA", spec.alpha.into()),
        ("OPTIML_HAS_BETA", spec.beta.into()),
        ("OPTIML_HAS_BIAS", spec.bias.into()),
        ("OPTIML_ACT", act),
    ]
}

/// The matrix-vector kernel's launch shape, which the runtime's launcher assumes.
fn gemv_macros() -> [(&'static str, Def); 2] {
    [
        (
            "OPTIML_GEMV_THREADS",
            optiml_runtime::matmul::GEMV_THREADS.into(),
        ),
        (
            "OPTIML_GEMV_COL_TX",
            optiml_runtime::matmul::GEMV_COL_TX.into(),
        ),
    ]
}

/// Splits of K the `wgmma` TF32 kernels (TF32 and 3xTF32) may run ([`tf32::Schedule::split_k`],
/// [`tf32x3::Schedule::split_k`]).
pub const WGMMA_SPLIT_K: [u32; 6] = [1, 2, 4, 8, 16, 32];

/// The blocks a split fills the grid towards: the multiprocessors of an H100 or H200 (132), one persistent
/// `wgmma` block each.
const GRID_BLOCKS: usize = 132;

/// The split of K that brings `tiles` output tiles at `shape` closest to one block per multiprocessor without
/// passing it (the most of [`WGMMA_SPLIT_K`] with `tiles · split ≤ 132`), as the launcher would run it
/// ([`optiml_runtime::matmul::splits_for`]: each range at least 128 long, the workspace bounded). 1 where the
/// tiles alone fill the GPU.
fn split_to_fill(tiles: usize, shape: MatmulShape) -> u32 {
    let wanted = WGMMA_SPLIT_K
        .iter()
        .copied()
        .filter(|&s| tiles.max(1) * s as usize <= GRID_BLOCKS)
        .max()
        .unwrap_or(1);
    optiml_runtime::matmul::splits_for(wanted, shape.batch * shape.m * shape.n, shape.k)
}

/// The ring depth `step` positions from `stages` in the `wgmma` kernels' shared list of depths.
fn next_depth(stages: u32, step: isize) -> Option<u32> {
    debug_assert_eq!(tf32::STAGES, half::STAGES);
    let at = half::STAGES.iter().position(|&d| d == stages)?;
    half::STAGES.get(at.checked_add_signed(step)?).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::{default_candidate, generator_version};

    fn spec(text: &str) -> Spec {
        optiml_spec::parse(text).unwrap()
    }

    #[test]
    fn the_version_hashes_exactly_the_sources_every_candidate_concatenates() {
        let archs = [
            Arch::new(7, 5),
            Arch::new(8, 0),
            Arch::new(8, 6),
            Arch::new(8, 9),
            Arch::new(9, 0),
            Arch::new(10, 0),
        ];
        for text in [
            "matmul, f32",
            "matmul, f32, tf32",
            "matmul, bf16",
            "matmul, f16",
        ] {
            let s = spec(text);
            let sources = Matmul.sources(&s);
            let mut candidates: Vec<Candidate> =
                archs.iter().map(|&a| default_candidate(&s, a)).collect();
            // A plain f32 search on sm_90 also compiles its 3xTF32 root.
            if let Some(Class::F32(m)) = Class::of(&s) {
                candidates.push(tf32x3::Schedule::default_for(Arch::new(9, 0)).candidate(&m));
            }
            // What a candidate compiles: its text and the shared headers it includes.
            fn compiled(c: &Candidate) -> Vec<&str> {
                let mut parts = vec![c.source.as_str()];
                parts.extend(crate::cuda::included_by(&c.source).iter().map(|h| h.text));
                parts
            }
            // Each listed source is in some candidate...
            for (i, src) in sources.iter().enumerate() {
                assert!(
                    candidates
                        .iter()
                        .any(|c| compiled(c).iter().any(|p| p.contains(src.as_ref()))),
                    "{text}: source {i} is hashed but no candidate holds it"
                );
            }
            // ...and no candidate holds code from anywhere else: what is left once the listed sources are cut
            // out is the generated header (comments and macro definitions), and every header it includes is
            // listed.
            for c in &candidates {
                let mut rest = c.source.clone();
                for src in &sources {
                    rest = rest.replace(src.as_ref(), "");
                }
                assert!(
                    rest.lines()
                        .all(|l| l.is_empty() || l.starts_with("//") || l.starts_with("#define")),
                    "{text}: `{}` holds unhashed code: {rest}",
                    c.schedule
                );
                for h in crate::cuda::included_by(&c.source) {
                    assert!(
                        sources.iter().any(|s| s == h.text),
                        "{text}: `{}` is included, not hashed",
                        h.name
                    );
                }
            }
        }
    }

    /// A plain f32 search's log may name a SIMT schedule or its 3xTF32 root's: each makes its own kernel again,
    /// and both read as the SIMT catalog the search walked. A TF32 schedule is not a plain f32 spec's.
    #[test]
    fn a_plain_f32_spec_takes_its_3xtf32_root_back_from_a_log() {
        let f32 = spec("batched matmul, f32, bias");
        let x3 = serde_json::to_value(tf32x3::Schedule::default_for(Arch::new(9, 0))).unwrap();
        let c = Matmul.scheduled_candidate(&f32, &x3).unwrap();
        assert!(
            c.source.contains("#define OPTIML_TF32X3 1"),
            "{}",
            c.schedule
        );
        assert!(c.source.contains("#define OPTIML_HAS_BIAS 1"));
        let simt = serde_json::to_value(simt_f32::Schedule::default_for(Arch::new(9, 0))).unwrap();
        let searched = Matmul.searched_catalog(&f32).kernel;
        assert_eq!(Matmul.catalog_of(&x3).unwrap().kernel, searched);
        assert_eq!(Matmul.catalog_of(&simt).unwrap().kernel, searched);
        let tf32 = serde_json::to_value(tf32::Schedule::default_for(Arch::new(9, 0))).unwrap();
        assert!(Matmul.scheduled_candidate(&f32, &tf32).is_err());
    }

    #[test]
    fn precision_classes_have_their_own_versions() {
        // The templates' part: one per precision class.
        let v = |t: &str| {
            let version = generator_version(&spec(t), Arch::new(9, 0));
            let templates = version.split(" templates ").nth(1).unwrap().to_string();
            templates.split(' ').next().unwrap().to_string()
        };
        assert_eq!(v("matmul, f32"), v("batched matmul, f32, bias, relu"));
        assert_ne!(v("matmul, f32"), v("matmul, f32, tf32"));
        assert_ne!(v("matmul, f32"), v("matmul, bf16"));
        assert_eq!(v("matmul, bf16"), v("matmul, f16"));
        // The defaults' part: what a build stores differs by spec and by architecture (the same templates give
        // sm_80 the `mma.sync` kernel and sm_90 the `wgmma` one).
        let whole = |t: &str, arch| generator_version(&spec(t), arch);
        assert_ne!(
            whole("matmul, f32", Arch::new(9, 0)),
            whole("batched matmul, f32, bias, relu", Arch::new(9, 0))
        );
        assert_ne!(
            whole("matmul, f32, tf32", Arch::new(8, 0)),
            whole("matmul, f32, tf32", Arch::new(9, 0))
        );
        assert_eq!(
            whole("matmul, f32", Arch::new(9, 0)),
            whole("matmul, f32", Arch::new(9, 0))
        );
    }

    #[test]
    fn targets_come_from_the_command_line_then_the_settings_then_the_family() {
        let mm = spec("matmul, f32, k=64");
        let dims = |d: &[usize]| Dims(d.to_vec());
        let labels = |t: Vec<Target>| -> Vec<String> { t.into_iter().map(|t| t.label).collect() };
        let none = KernelSettings::default();
        assert_eq!(
            labels(Matmul.targets(&mm, &none, None).unwrap()),
            ["1x1024x1024x64"]
        );
        let settings = KernelSettings {
            shapes: vec![dims(&[32, 32, 32]), dims(&[1, 64, 64, 64])],
            ..KernelSettings::default()
        };
        let from_settings = Matmul.targets(&mm, &settings, None).unwrap();
        assert_eq!(labels(from_settings.clone()), ["1x32x32x64", "1x64x64x64"]);
        assert_eq!(from_settings[0].bucket, Some([1, 32, 32, 64]));
        assert_eq!(from_settings[0].rate, Rate::Flops);
        assert_eq!(
            labels(
                Matmul
                    .targets(&mm, &settings, Some(&[dims(&[8, 8, 8])]))
                    .unwrap()
            ),
            ["1x8x8x64"]
        );
        let err = Matmul
            .targets(&mm, &none, Some(&[dims(&[8, 8])]))
            .unwrap_err();
        assert!(err.contains("8x8"), "{err}");
    }

    #[test]
    fn default_shapes_follow_fixed_dimensions() {
        let m = Class::of(&spec("matmul, f32, k=64"))
            .unwrap()
            .matmul()
            .clone();
        assert_eq!(
            default_shapes(&m),
            vec![MatmulShape {
                batch: 1,
                m: 1024,
                n: 1024,
                k: 64
            }]
        );
    }
}
