//! The registry of kernel families. A family is one folder below this one: its kernels (templates, schedule
//! spaces, transformation catalogs), its test plan and tolerance, what it tunes for and how a search of it runs.
//! Everything above this module (the build engine, migration, the CLI) reaches a family only through
//! [`Family`]; everything below it (search, evaluation, cache, the tune driver) names none.
//!
//! Adding a family: a folder with a type implementing [`Family`] and one line in [`FAMILIES`]. A family whose specs
//! are tensor programs of one shape (as [`transpose`]'s and [`attention`]'s are) claims them ahead of the tensor family and needs
//! nothing else: the macro binds its signature and the runtime's program launcher launches its kernels. A family
//! with a spec of its own adds a variant to the spec model, its words to the spec parser and a launcher in
//! `optiml-runtime` (as [`matmul`] has).

pub mod attention;
pub mod matmul;
pub mod tensor;
pub mod transpose;

use crate::config::{Dims, KernelSettings};
use crate::eval::Gate;
use crate::experts::Candidate;
use crate::scan::{Scan, Skipped};
use crate::search::{Bottleneck, Transform, Tunable};
use crate::tune::{Bucket, Progress, Request, Target, TuneError};
use optiml_runtime::Arch;
use optiml_spec::{Spec, sha256_hex};
use std::borrow::Cow;

/// A kernel family: what the generic layers ask of one.
pub trait Family: Sync {
    /// Its name in messages and listings (`matmul`).
    fn name(&self) -> &'static str;

    /// Whether this family generates `spec`'s kernels. Families are asked in [`FAMILIES`]' order, so a family
    /// of one program shape comes before the tensor family, which takes every program.
    fn claims(&self, spec: &Spec) -> bool;

    /// Whether this family generates `spec`'s kernels; the reason when it cannot (a program no generator shape
    /// covers yet). The build skips such a kernel with that reason before asking for any candidate.
    ///
    /// # Errors
    /// Why `spec` is not generated.
    fn supports(&self, _spec: &Spec) -> Result<(), String> {
        Ok(())
    }

    /// The CUDA sources `spec`'s candidates are made from, in a fixed order: exactly the templates any candidate
    /// of `spec` concatenates, on any architecture (or, for a generator, every source it emits for `spec`), so
    /// the generator version changes exactly when one of them does.
    fn sources(&self, spec: &Spec) -> Vec<Cow<'static, str>>;

    /// The candidate an expert writes first for `spec` on `arch` (the default schedule of the kernel that
    /// architecture runs).
    fn default_candidate(&self, spec: &Spec, arch: Arch) -> Candidate;

    /// The untuned variants a build compiles for `spec` on `arch`, each with the shape key it serves (`None`:
    /// every shape): one default candidate unless the best schedule depends on the shape so much that one
    /// variant cannot serve all (a row kernel's row length), in which case the launcher picks the variant
    /// nearest each call's key.
    fn default_candidates(&self, spec: &Spec, arch: Arch) -> Vec<(Option<[u64; 4]>, Candidate)> {
        vec![(None, self.default_candidate(spec, arch))]
    }

    /// The candidate of `spec` with a schedule a search recorded as JSON (search logs keep schedules that way),
    /// read as the schedule type a search of `spec` walks.
    ///
    /// # Errors
    /// The JSON is not a schedule of that type (another kernel's, or written before the type changed), or it is
    /// outside the schedule space.
    fn scheduled_candidate(
        &self,
        spec: &Spec,
        schedule: &serde_json::Value,
    ) -> Result<Candidate, serde_json::Error>;

    /// The check every candidate of this family passes in the evaluation worker before it is timed.
    fn gate(&self) -> &'static dyn Gate;

    /// Every searchable kernel's transformation catalog.
    fn catalogs(&self) -> Vec<Catalog>;

    /// The catalog a search of `spec` composes.
    fn searched_catalog(&self, spec: &Spec) -> Catalog;

    /// The catalog of the kernel whose schedule `schedule` (as a search log records it) is, if it is one of this
    /// family's.
    fn catalog_of(&self, schedule: &serde_json::Value) -> Option<Catalog>;

    /// What to tune `spec` for: `shapes` (from the command line) if given, else the user's settings, else the
    /// family's default. Fixed dimensions of the spec always win.
    ///
    /// # Errors
    /// A message naming a shape this family cannot read.
    fn targets(
        &self,
        spec: &Spec,
        settings: &KernelSettings,
        shapes: Option<&[Dims]>,
    ) -> Result<Vec<Target>, String>;

    /// What a report says one of this family's tuned variants was tuned for: `bucket` is the key the runtime picks
    /// it by, `searched_at` the problem its search ran at as the search log records it (the target's label; `None`
    /// where the entry kept no log). The default gives the bucket's sizes, else that problem.
    fn tuned_for(&self, bucket: Option<[u64; 4]>, searched_at: Option<&str>) -> String {
        plain_tuned_for(bucket, searched_at)
    }

    /// Whether `spec`'s kernel reads the old values of its output, so that the runtime times it only into scratch
    /// memory (`optiml_runtime::Artifacts::reads_output`). The default: it writes its outputs only.
    fn reads_output(&self, _spec: &Spec) -> bool {
        false
    }

    /// Whether the runtime times a call at a shape no variant was tuned at against the entry's any-shape default
    /// (a matmul: `optiml_runtime::dispatch`), so that a tuned entry keeps that default beside its tuned
    /// variants and such a call is never slower than the untuned kernel. The default: no, the nearest tuned
    /// variant serves every call, and an any-shape default would only weigh on the entry.
    fn times_untuned_shapes(&self) -> bool {
        false
    }

    /// Runs one search (`request.target` must be one of [`Family::targets`]).
    ///
    /// # Errors
    /// [`TuneError`] when the kernel cannot be searched on that architecture, the evaluator cannot start, or the
    /// default schedule is rejected.
    fn tune(
        &self,
        request: &Request<'_>,
        report: &mut dyn FnMut(Progress),
    ) -> Result<Bucket, TuneError>;
}

/// Every family, in the order they are asked to claim a spec (and listings show them).
pub static FAMILIES: &[&dyn Family] = &[
    &matmul::Matmul,
    &transpose::Transpose,
    &attention::Attention,
    &tensor::Tensor,
];

/// The family that generates `spec`'s kernels: the first in [`FAMILIES`] that claims it. Every spec is claimed
/// (the matmul family takes every matmul spec, the tensor family every program); were none to claim one, the
/// tensor family would refuse it with its reason when asked whether it generates it.
pub fn of(spec: &Spec) -> &'static dyn Family {
    FAMILIES
        .iter()
        .copied()
        .find(|f| f.claims(spec))
        .unwrap_or(&tensor::Tensor)
}

/// Moves the kernels of `scan` that no family generates yet (a program no generator shape covers) to its skipped
/// declarations, each with the reason, so that a build warns about them instead of failing on them. Every consumer
/// of a scan calls it first (the scan itself knows no family).
pub fn skip_unsupported(scan: &mut Scan) {
    let (kept, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut scan.kernels)
        .into_iter()
        .map(|k| {
            let verdict = of(&k.spec).supports(&k.spec);
            (k, verdict)
        })
        .partition(|(_, verdict)| verdict.is_ok());
    scan.kernels = kept.into_iter().map(|(k, _)| k).collect();
    for (k, verdict) in refused {
        let reason = verdict.err().unwrap_or_default();
        scan.skipped.push(Skipped {
            file: k.file,
            line: k.line,
            message: format!("`{}`: no kernel is generated for it yet: {reason}", k.name),
            refused_spec: None,
        });
    }
}

/// When this process was started as an evaluation worker, serves as one with every family's gate, then exits;
/// otherwise returns. Called first thing by [`crate::Builder::compile`] and by `cargo-optiml`.
pub fn serve_worker_if_requested() {
    let gates: Vec<&dyn Gate> = FAMILIES.iter().map(|f| f.gate()).collect();
    crate::eval::worker::serve_if_requested(&gates);
}

/// What `cargo optiml explain` prints of `spec` beyond its canonical form: a product's formula and expected
/// signature, or a program's statements, signature, reference formula and the dimensions a signature must take.
pub fn explain(spec: &Spec) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if let optiml_spec::Family::Matmul(m) = &spec.family {
        let _ = writeln!(out, "product:\n  {}", m.formula());
        let _ = writeln!(
            out,
            "signature:\n  {}",
            optiml_spec::signature::expected_signature(spec)
        );
    }
    if let optiml_spec::Family::Tensor(program) = &spec.family {
        let _ = writeln!(out, "{}", optiml_spec::program::notation::explain(program));
        let needed = needed_dims(program);
        let names: Vec<&str> = needed
            .iter()
            .map(|&d| program.dims[d].name.as_str())
            .collect();
        let _ = writeln!(
            out,
            "dimensions the signature must take (the buffer lengths give the others): {}",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
        let _ = writeln!(out, "{}", tensor::contract::seed_abi(program));
    }
    out
}

/// A smallest set of run-time dimensions from which the buffer lengths determine every other one: each is left
/// out, in program order, while the rest still determine it.
pub(crate) fn needed_dims(program: &optiml_spec::program::Program) -> Vec<usize> {
    let mut given: Vec<usize> = (0..program.dims.len())
        .filter(|&d| program.dims[d].size == optiml_spec::Dim::Runtime)
        .collect();
    for d in given.clone() {
        let without: Vec<usize> = given.iter().copied().filter(|&g| g != d).collect();
        if optiml_spec::signature::inferable(program, &without).is_empty() {
            given = without;
        }
    }
    given
}

/// One searchable kernel's transformations, for listings and reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Catalog {
    /// The family.
    pub family: &'static str,
    /// The kernel, within its family (`wgmma tf32`).
    pub kernel: &'static str,
    /// Its transformations.
    pub entries: Vec<CatalogEntry>,
}

/// A transformation as listings show it.
#[derive(Clone, Debug, PartialEq)]
pub struct CatalogEntry {
    /// Its name, unique in its catalog.
    pub name: &'static str,
    /// The bottleneck it addresses.
    pub addresses: Bottleneck,
    /// The speed-up it claims.
    pub claimed_gain: f64,
    /// Why it should help.
    pub rationale: &'static str,
}

impl Catalog {
    /// The listing of kernel `S`'s catalog.
    pub fn of<S: Tunable>(family: &'static str, kernel: &'static str) -> Self {
        let entries = S::catalog()
            .iter()
            .map(|t: &Transform<S>| CatalogEntry {
                name: t.name,
                addresses: t.addresses,
                claimed_gain: t.claimed_gain,
                rationale: t.rationale,
            })
            .collect();
        Catalog {
            family,
            kernel,
            entries,
        }
    }

    /// The gain transformation `name` claims here.
    pub fn claimed_gain(&self, name: &str) -> Option<f64> {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.claimed_gain)
    }
}

/// The family's default candidate for `spec` on `arch`.
pub fn default_candidate(spec: &Spec, arch: Arch) -> Candidate {
    of(spec).default_candidate(spec, arch)
}

/// Whether `spec`'s kernel reads its output's old values; see [`Family::reads_output`].
pub fn reads_output(spec: &Spec) -> bool {
    of(spec).reads_output(spec)
}

/// Whether a tuned entry of `spec` keeps its any-shape default; see [`Family::times_untuned_shapes`].
pub fn times_untuned_shapes(spec: &Spec) -> bool {
    of(spec).times_untuned_shapes()
}

/// The family's untuned variants for `spec` on `arch`; see [`Family::default_candidates`].
pub fn default_candidates(spec: &Spec, arch: Arch) -> Vec<(Option<[u64; 4]>, Candidate)> {
    of(spec).default_candidates(spec, arch)
}

/// The candidate of `spec` with a schedule a search recorded as JSON; see [`Family::scheduled_candidate`].
///
/// # Errors
/// The JSON is not a schedule of the kernel a search of `spec` walks.
pub fn scheduled_candidate(
    spec: &Spec,
    schedule: &serde_json::Value,
) -> Result<Candidate, serde_json::Error> {
    of(spec).scheduled_candidate(spec, schedule)
}

/// The candidate a search log's best schedule names for `kernel`: a schedule of its family's kernels, the
/// kernel's seed ([`crate::experts::Root`]), which must be the file the log measured (its hash recorded there), or
/// an LLM expert's kernel, whose source the log holds.
///
/// # Errors
/// The JSON is neither a schedule of the kernel a search of the spec walks nor this kernel's current seed.
pub fn logged_candidate(
    kernel: &crate::scan::FoundKernel,
    schedule: &serde_json::Value,
) -> Result<Candidate, String> {
    if let Some(llm) = schedule.get("llm") {
        let optiml_spec::Family::Tensor(program) = &kernel.spec.family else {
            return Err(format!(
                "the log's winner is an LLM kernel, and `{}` is not a tensor program",
                kernel.name
            ));
        };
        let (Some(expert), Some(source), Some(sha)) = (
            llm["expert"].as_str(),
            llm["source"].as_str(),
            llm["sha256"].as_str(),
        ) else {
            return Err(format!(
                "the log's LLM winner lacks its expert, source or hash: {llm}"
            ));
        };
        if sha256_hex(source.as_bytes()) != sha {
            return Err("the log's LLM winner's source does not match its hash".into());
        }
        return tensor::contract::llm_root(program, expert, source)
            .map(|r| r.candidate)
            .ok_or_else(|| format!("`{}` has no LLM contract (a 16-bit program)", kernel.name));
    }
    let Some(logged) = schedule.get("seed") else {
        return scheduled_candidate(&kernel.spec, schedule).map_err(|e| e.to_string());
    };
    let (Some(seed), optiml_spec::Family::Tensor(program)) = (&kernel.seed, &kernel.spec.family)
    else {
        return Err(format!(
            "the log's winner is a seed ({logged}), and `{}` names none",
            kernel.name
        ));
    };
    let root = tensor::contract::seed_root(program, seed)
        .ok_or_else(|| format!("`{}` has no seed ABI (a 16-bit program)", kernel.name))?;
    if root.schedule["seed"] != *logged {
        return Err(format!(
            "the log's winner is the seed {logged}, and `{}` now names {}",
            kernel.name, root.schedule["seed"]
        ));
    }
    Ok(root.candidate)
}

/// The gain transformation `name` claims in the catalog a search of `spec` walks (names repeat across kernels:
/// `group-tile-rows` is both the SIMT and the 16-bit kernel's, with different effects).
pub fn claimed_gain(spec: &Spec, name: &str) -> Option<f64> {
    of(spec).searched_catalog(spec).claimed_gain(name)
}

/// The catalog of the kernel a search log's schedule belongs to (a log names its spec only in canonical text;
/// its schedules name their kernel).
pub fn catalog_of(schedule: &serde_json::Value) -> Option<Catalog> {
    FAMILIES.iter().find_map(|f| f.catalog_of(schedule))
}

/// The generator's version for `spec`'s family on `arch`: this crate's version, a hash of the sources `spec`'s
/// candidates are made from, and a hash of the defaults a build stores for `spec` on `arch` (each one's shape
/// bucket, entry, launch and code, comments left out). A changed kernel body invalidates the cached entries made
/// from it (tuned ones included) even when nobody bumps the version, and so does a change to how the defaults are
/// chosen or spelled (a schedule's macros, a launch's fields), which the templates alone do not show: otherwise
/// the committed defaults would stay what an earlier generator made, and `prepare --check` would not notice.
/// Every other entry is left alone (CubeCL hashes only names; we hash code), and `prepare` carries the tuned
/// variants of a re-keyed entry over where their machine code is unchanged.
pub fn generator_version(spec: &Spec, arch: Arch) -> String {
    let templates = sha256_hex(of(spec).sources(spec).concat().as_bytes());
    let mut defaults = String::new();
    for (bucket, c) in default_candidates(spec, arch) {
        defaults.push_str(&format!("{bucket:?} {} {:?}\n", c.entry, c.launch));
        // Code only: comments carry the signature's names (`out[n0] = …`), and kernels that differ only in
        // those share one key, so one entry.
        for line in c.source.lines() {
            defaults.push_str(line.split("//").next().unwrap_or("").trim_end());
            defaults.push('\n');
        }
    }
    // What a tuned entry keeps beside its tuned variants is part of what the entry holds.
    if times_untuned_shapes(spec) {
        defaults.push_str("tuned entries keep the any-shape default\n");
    }
    let defaults = sha256_hex(defaults.as_bytes());
    format!(
        "optiml-build {} templates {} defaults {}",
        env!("CARGO_PKG_VERSION"),
        &templates[..16],
        &defaults[..16]
    )
}

/// The generator's version for `kernel` on `arch`: [`generator_version`] of its spec, and with a seed, the seed's
/// file too, so that an edited seed retires the entries tuned with it (whether or not it won: it was measured
/// against the winner).
pub fn kernel_generator(kernel: &crate::scan::FoundKernel, arch: Arch) -> String {
    let version = generator_version(&kernel.spec, arch);
    match &kernel.seed {
        None => version,
        Some(seed) => format!("{version} seed {}", &seed.sha256()[..16]),
    }
}

/// What a report says a tuned variant was tuned for (see [`Family::tuned_for`]), in the words of the family whose
/// kernel `winner` (the schedule, as its search log records it) belongs to: an entry names its spec only in
/// canonical text, its schedules name their kernel. Without a schedule any family claims, the words are none's.
pub fn tuned_for(
    winner: Option<&serde_json::Value>,
    bucket: Option<[u64; 4]>,
    searched_at: Option<&str>,
) -> String {
    let family = winner.and_then(|w| FAMILIES.iter().find(|f| f.catalog_of(w).is_some()));
    match family {
        Some(f) => f.tuned_for(bucket, searched_at),
        None => plain_tuned_for(bucket, searched_at),
    }
}

/// [`Family::tuned_for`]'s default: the cache's plain wording ([`crate::cache::plain_words`]).
fn plain_tuned_for(bucket: Option<[u64; 4]>, searched_at: Option<&str>) -> String {
    crate::cache::plain_words(None, bucket, searched_at)
}

/// Whether `schedule` is a recorded schedule of kernel `S`.
fn is_schedule_of<S: Tunable + serde::de::DeserializeOwned>(schedule: &serde_json::Value) -> bool {
    read_schedule::<S>(schedule).is_ok()
}

/// Reads a recorded schedule of kernel `S`, refusing one outside its space.
fn read_schedule<S: Tunable + serde::de::DeserializeOwned>(
    v: &serde_json::Value,
) -> Result<S, serde_json::Error> {
    let s: S = serde_json::from_value(v.clone())?;
    if s.is_valid() {
        Ok(s)
    } else {
        Err(serde::de::Error::custom(format!(
            "`{}` is outside this generator's schedule space",
            s.describe()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_no_family_generates_are_skipped_with_the_reason() {
        let text = r#"
            #[optiml::kernel("softmax over the last axis")]
            fn softmax(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
            #[optiml::kernel("a[r] = sum(c) x[r, c]; b[c] = sum(r) x[r, c]")]
            fn sums(x: &CudaSlice<f32>, a: &mut CudaSlice<f32>, b: &mut CudaSlice<f32>);
        "#;
        let mut scan = Scan::default();
        crate::scan::scan_source(std::path::Path::new("k.rs"), text, &mut scan);
        assert_eq!(scan.kernels.len(), 2);
        skip_unsupported(&mut scan);
        assert_eq!(scan.kernels.len(), 1);
        assert_eq!(scan.kernels[0].name, "softmax");
        let why = &scan.skipped[0].message;
        assert!(
            why.starts_with("`sums`: no kernel is generated for it yet: "),
            "{why}"
        );
    }

    /// Only a kernel that adds `beta · C` reads its output: the runtime times every other one into the real output.
    #[test]
    fn only_a_product_with_beta_reads_its_output() {
        let reads = |text: &str| reads_output(&optiml_spec::parse(text).unwrap());
        assert!(reads("batched gemm, f32, C = alpha·A·B + beta·C"));
        assert!(reads(
            "batched gemm, fp16, C = gelu(alpha·Aᵀ·Bᵀ + beta·C + bias)"
        ));
        assert!(!reads("matmul with bias and relu, f32"));
        assert!(!reads("batched matmul, bf16"));
        assert!(!reads("softmax over the last axis"));
        assert!(!reads("scaled dot-product attention"));
    }

    #[test]
    fn every_family_is_reachable_from_a_spec() {
        for text in [
            "matmul, f32",
            "relu",
            "softmax over the last axis",
            "transpose",
        ] {
            let spec = optiml_spec::parse(text).unwrap();
            let family = of(&spec);
            assert!(FAMILIES.iter().any(|f| f.name() == family.name()));
        }
        let mut names: Vec<&str> = FAMILIES.iter().map(|f| f.name()).collect();
        names.dedup();
        assert_eq!(names.len(), FAMILIES.len());
    }

    #[test]
    fn every_catalog_entry_claims_its_own_gain_for_the_specs_that_search_it() {
        // A spec per searched kernel: claimed_gain must resolve every name of that kernel's catalog to that
        // kernel's entry, never another kernel's entry of the same name.
        let specs = [
            "matmul, f32",
            "matmul, f32, tf32",
            "matmul, bf16",
            "matmul, f16",
            "y = gelu(x)",
            "selu",
            "softmax over the last axis",
            "sum over dim 1 of a 3-D tensor",
            "frobenius norm",
            "cumsum along dim 1",
            "transpose",
            "scaled dot-product attention",
            "scaled dot-product attention, bf16",
        ];
        let mut seen = Vec::new();
        for text in specs {
            let spec = optiml_spec::parse(text).unwrap();
            let catalog = of(&spec).searched_catalog(&spec);
            assert!(!catalog.entries.is_empty(), "{text}");
            let mut names: Vec<&str> = catalog.entries.iter().map(|e| e.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(
                names.len(),
                catalog.entries.len(),
                "{text}: duplicate names"
            );
            for e in &catalog.entries {
                assert_eq!(
                    claimed_gain(&spec, e.name),
                    Some(e.claimed_gain),
                    "{text}: {}",
                    e.name
                );
            }
            assert_eq!(claimed_gain(&spec, "no-such-transformation"), None);
            seen.push((catalog.family, catalog.kernel));
        }
        // Every kernel any family lists is searched by one of the specs above.
        for family in FAMILIES {
            for c in family.catalogs() {
                assert!(
                    seen.contains(&(c.family, c.kernel)),
                    "{} {}",
                    c.family,
                    c.kernel
                );
            }
        }
        // The bug this registry fixed: the 16-bit `group-tile-rows` and `wide-wgmma` resolve to the 16-bit
        // catalog, not to the SIMT or TF32 ones.
        let bf16 = optiml_spec::parse("matmul, bf16").unwrap();
        assert_eq!(claimed_gain(&bf16, "group-tile-rows"), Some(1.08));
        assert!(claimed_gain(&bf16, "ping-pong").is_none());
    }

    #[test]
    fn each_family_words_what_its_variants_were_tuned_for() {
        let arch = Arch::new(9, 0);
        let schedule = |v: Result<serde_json::Value, serde_json::Error>| v.unwrap();
        let matmul = schedule(serde_json::to_value(
            <matmul::simt_f32::Schedule as Tunable>::default_for(arch),
        ));
        assert_eq!(
            tuned_for(
                Some(&matmul),
                Some([256, 1024, 1024, 1024]),
                Some("256x1024x1024x1024")
            ),
            "256×1024×1024×1024 (batch×m×n×k)"
        );
        let rows = schedule(serde_json::to_value(
            <tensor::codegen::RowSchedule as Tunable>::default_for(arch),
        ));
        assert_eq!(
            tuned_for(Some(&rows), None, Some("r=4096 c=393216")),
            "r=4096, c=393216"
        );
        // A schedule no family claims still gets words, none of them a family's.
        let unknown = serde_json::json!({"threads": 256});
        assert_eq!(
            tuned_for(Some(&unknown), Some([1, 2, 3, 4]), None),
            "1×2×3×4"
        );
        assert_eq!(tuned_for(None, None, Some("n=4")), "n=4");
        assert_eq!(tuned_for(None, None, None), "every size");
    }

    #[test]
    fn a_recorded_schedule_names_its_kernel() {
        let arch = Arch::new(9, 0);
        for text in ["matmul, f32", "matmul, f32, tf32", "matmul, bf16", "relu"] {
            let spec = optiml_spec::parse(text).unwrap();
            let family = of(&spec);
            let searched = family.searched_catalog(&spec);
            // The default candidate's schedule, as a log records it, read back through the family.
            let schedule = match &spec.family {
                // A map is a flat program: the pointwise generator's.
                optiml_spec::Family::Tensor(_) => serde_json::to_value(
                    <tensor::codegen::PointwiseSchedule as Tunable>::default_for(arch),
                ),
                optiml_spec::Family::Matmul(_) => match text {
                    "matmul, f32" => serde_json::to_value(
                        <matmul::simt_f32::Schedule as Tunable>::default_for(arch),
                    ),
                    "matmul, f32, tf32" => {
                        serde_json::to_value(<matmul::tf32::Schedule as Tunable>::default_for(arch))
                    }
                    _ => {
                        serde_json::to_value(<matmul::half::Schedule as Tunable>::default_for(arch))
                    }
                },
            }
            .unwrap();
            assert_eq!(catalog_of(&schedule), Some(searched), "{text}");
            assert!(scheduled_candidate(&spec, &schedule).is_ok(), "{text}");
        }
        assert_eq!(catalog_of(&serde_json::json!({"threads": 256})), None);
    }

    /// A seed's winner is made again from the kernel's seed, only while the file is the one the log measured;
    /// an edited seed also changes the generator version, which retires the entry.
    #[test]
    fn a_logged_seed_is_the_kernels_current_seed() {
        let text = r#"
            #[optiml::kernel("softmax over the last axis")]
            fn sm(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);
        "#;
        let mut scan = Scan::default();
        crate::scan::scan_source(std::path::Path::new("k.rs"), text, &mut scan);
        let plain = scan.kernels[0].clone();
        let mut kernel = plain.clone();
        kernel.seed = Some(crate::scan::SeedSource {
            seed: optiml_spec::Seed::parse("k/rows.cu:rows").unwrap(),
            path: "k/rows.cu".into(),
            text: "__global__ void rows(const float* x, float* y, long long r, long long c) {}"
                .into(),
        });
        let optiml_spec::Family::Tensor(p) = &kernel.spec.family else {
            panic!()
        };
        let root = tensor::contract::seed_root(p, kernel.seed.as_ref().unwrap()).unwrap();
        assert_eq!(
            logged_candidate(&kernel, &root.schedule),
            Ok(root.candidate.clone())
        );
        // A schedule of the family still reads as one.
        let row =
            <tensor::codegen::RowSchedule as crate::search::Tunable>::default_for(Arch::new(9, 0));
        let generated = logged_candidate(&kernel, &serde_json::to_value(row).unwrap()).unwrap();
        assert_eq!(generated.entry, tensor::codegen::ENTRY);
        assert_ne!(generated.source, root.candidate.source);
        let mut edited = kernel.clone();
        edited.seed.as_mut().unwrap().text.push_str("\n// edited\n");
        let err = logged_candidate(&edited, &root.schedule).unwrap_err();
        assert!(err.contains("now names"), "{err}");
        assert!(
            logged_candidate(&plain, &root.schedule)
                .unwrap_err()
                .contains("names none")
        );
        let arch = Arch::new(9, 0);
        assert_ne!(
            kernel_generator(&edited, arch),
            kernel_generator(&kernel, arch)
        );
        assert_ne!(
            kernel_generator(&kernel, arch),
            kernel_generator(&plain, arch)
        );
        assert_eq!(
            kernel_generator(&plain, arch),
            generator_version(&plain.spec, arch)
        );
    }

    #[test]
    fn kernels_of_one_key_share_one_generator() {
        // The same operator under other names (KernelBench's `p5` and the test crate's `scale`): one id, so one
        // cache entry, though the generated comments name their outputs differently.
        let dir = std::env::temp_dir().join(format!("optiml-generator-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.rs"), dir.join("b.rs"));
        std::fs::write(
            &a,
            "#[optiml::kernel(\"y = x * s\")]\npub fn scale(x: &CudaSlice<f32>, s: f32, out: &mut CudaSlice<f32>);\n",
        )
        .unwrap();
        std::fs::write(
            &b,
            "#[optiml::kernel(\"matrix scalar multiplication\")]\npub fn p5(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, s: f32);\n",
        )
        .unwrap();
        let one = |f: &std::path::Path| {
            let scan = crate::scan::scan(&[f.to_path_buf()]).unwrap();
            assert!(scan.skipped.is_empty(), "{:?}", scan.skipped);
            scan.unique_kernels().remove(0)
        };
        let (ka, kb) = (one(&a), one(&b));
        assert_eq!(ka.id, kb.id);
        for arch in [Arch::new(8, 0), Arch::new(9, 0)] {
            assert_eq!(kernel_generator(&ka, arch), kernel_generator(&kb, arch));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
