//! Tuned variants survive a generator change that leaves their machine code alone.
//!
//! A cache key holds the generator version (a hash of the family's templates), so any template edit (a new
//! epilogue branch, a comment) orphans every tuned entry of the family, and the searches that filled them cost
//! GPU time. What a search measured, though, is machine code. Where the new generator, given the schedule the
//! search chose (kept in the variant's search log), compiles to the same CUBIN byte for byte and launches it the
//! same way, the measurement, the gate's verdict and the log still describe exactly what would be stored.
//! `cargo optiml prepare` carries those variants into the new key; the others are left to the default and to the
//! next `cargo optiml tune`, and each is reported with the reason.
//!
//! The comparison is on the CUBIN, the machine code that was measured. It follows from the source, the NVRTC
//! release and options (the toolchain is part of the key) and the file name (candidates are always compiled as
//! [`crate::eval::CANDIDATE_FILE`]); code the preprocessor drops, or a shifted line, does not reach it without
//! `-lineinfo`, which optiml never passes. Now and then it also follows from what the process compiled before,
//! hence up to four compiles per source. The PTX is not compared: its virtual register numbering varies that
//! way far more often. The carried entry stores this generator's PTX (the JIT form for newer GPUs) of the same
//! source.

use crate::cache::{Cache, CacheError, Entry, KeyInputs, Lookup, NewVariant, Tuning};
use crate::experts::Candidate;
use crate::families;
use crate::nvrtc::{self, Compiled, Nvrtc};
use crate::scan::FoundKernel;
use crate::search::SearchRecords;
use optiml_runtime::Arch;
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

/// Why a tuned variant of an earlier entry was not carried over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// The variant has no search log, so its schedule is unknown.
    NoLog,
    /// Its log does not parse, or its schedule is not one this generator knows (the schedule type changed).
    Schedule(String),
    /// This generator's source for the schedule does not compile.
    Compile(String),
    /// This generator compiles the schedule to another CUBIN, or launches it otherwise: it must be tuned again.
    Changed,
}

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dropped::NoLog => f.write_str("it has no search log, so its schedule is unknown"),
            Dropped::Schedule(why) => {
                write!(f, "its logged schedule is not this generator's ({why})")
            }
            Dropped::Compile(why) => write!(f, "this generator's source does not compile ({why})"),
            Dropped::Changed => {
                f.write_str("this generator compiles its schedule to different machine code")
            }
        }
    }
}

/// What [`carry_over`] did for one kernel on one architecture.
#[derive(Debug)]
pub struct Carried {
    /// The earlier entry (left in place; `cargo optiml prepare` removes it as unused).
    pub from: PathBuf,
    /// The new entry, when at least one variant was carried over.
    pub entry: Option<Entry>,
    /// The shape buckets carried over (`None`: a variant for every shape, as families without shape buckets have).
    pub kept: Vec<Option<[u64; 4]>>,
    /// The shape buckets left behind, and why.
    pub dropped: Vec<(Option<[u64; 4]>, Dropped)>,
    /// Why the free shape buckets got no default beside the carried variants (a compile failed), if they did not:
    /// the entry then serves them by its nearest carried variant.
    pub defaults_failed: Option<String>,
}

/// How many times a source is compiled before its CUBIN is declared different. NVRTC's output for one source
/// depends on what the process compiled before it (its PTX register numbering does, and ptxas' allocation follows
/// it now and then): measured on a tuned fp32 kernel, the same source gave the stored CUBIN, then another after a
/// different compile, then the stored one again. Each attempt runs in a different state (other kernels compile
/// in between on the other threads), so a few attempts find the measured machine code where it is reachable.
const COMPILE_ATTEMPTS: usize = 4;

/// A variant that passed: this generator's candidate and compiled form, with the earlier tuning and log.
struct Passed {
    candidate: Candidate,
    compiled: Compiled,
    shape: Option<[u64; 4]>,
    tuning: Tuning,
    log: Vec<u8>,
}

/// The entry an earlier generator wrote in `cache` for `inputs`' kernel and architecture that holds the most tuned
/// variants, if any holds one: what [`carry_over`] carries from.
pub fn earlier_tuned(cache: &Cache, inputs: &KeyInputs) -> Option<Entry> {
    cache
        .earlier_entries(inputs)
        .into_iter()
        .find(|e| e.manifest.variants.iter().any(|v| v.tuning.is_some()))
}

/// Carries the tuned variants of `kernel` on `arch` over from the entry an earlier generator wrote in `cache` to
/// `generator`'s key, where this generator reproduces their machine code. `None` when there is nothing to do:
/// the current key already has an entry, or no earlier entry holds a tuned variant.
///
/// # Errors
/// [`CacheError`] when an earlier entry's file cannot be read or the new entry cannot be written.
pub fn carry_over(
    nvrtc: &Nvrtc,
    cache: &Cache,
    kernel: &FoundKernel,
    arch: Arch,
    generator: &str,
) -> Result<Option<Carried>, CacheError> {
    let inputs = KeyInputs::of(kernel, arch, generator);
    if !matches!(cache.lookup(&inputs), Lookup::Miss) {
        return Ok(None);
    }
    let Some(earlier) = earlier_tuned(cache, &inputs) else {
        return Ok(None);
    };
    let mut passed = Vec::new();
    let mut carried = Carried {
        from: earlier.dir.clone(),
        entry: None,
        kept: Vec::new(),
        dropped: Vec::new(),
        defaults_failed: None,
    };
    // Buckets that chose the same kernel share a source: their compiles are shared.
    let mut built: HashMap<String, Vec<Compiled>> = HashMap::new();
    for v in &earlier.manifest.variants {
        let Some(tuning) = &v.tuning else { continue };
        match reproduce(nvrtc, kernel, arch, &earlier, v, &mut built)? {
            Ok((candidate, compiled, log)) => {
                carried.kept.push(v.shape);
                passed.push(Passed {
                    candidate,
                    compiled,
                    shape: v.shape,
                    tuning: Tuning {
                        log: String::new(),
                        ..tuning.clone()
                    },
                    log,
                });
            }
            Err(why) => carried.dropped.push((v.shape, why)),
        }
    }
    if !passed.is_empty() {
        let mut variants: Vec<NewVariant<'_>> = passed
            .iter()
            .map(|p| NewVariant {
                candidate: &p.candidate,
                compiled: &p.compiled,
                shape: p.shape,
                tuning: Some(&p.tuning),
                log: Some(&p.log),
            })
            .collect();
        // The buckets no carried variant holds keep this generator's defaults, as a new tuned entry does; without
        // them (a compile failure) the entry still serves every shape by its nearest carried variant.
        let taken: Vec<Option<[u64; 4]>> = passed.iter().map(|p| p.shape).collect();
        let defaults = match crate::engine::free_bucket_defaults(nvrtc, kernel, arch, &taken) {
            Ok(d) => d,
            Err(e) => {
                carried.defaults_failed = Some(e.to_string());
                Vec::new()
            }
        };
        variants.extend(defaults.iter().map(crate::engine::Untuned::variant));
        carried.entry = Some(cache.store(&inputs, &variants, false)?);
    }
    Ok(Some(carried))
}

/// What is wrong with `entry` (of `kernel` on `arch`) against what this generator derives from its records, one
/// line per variant that differs (`prepare --check --rebuild`): each variant's candidate is re-derived, an untuned
/// one from the family's default for its shape bucket and a tuned one from the schedule its search log chose, and
/// its source, launch, CUBIN and PTX must be exactly what that candidate is and compiles to. A self-consistent entry
/// whose CUBIN is another kernel's, or whose launch was edited, passes every checksum and fails here.
///
/// # Errors
/// [`CacheError`] when a file of the entry cannot be read.
pub fn rederive(
    nvrtc: &Nvrtc,
    kernel: &FoundKernel,
    arch: Arch,
    entry: &Entry,
) -> Result<Vec<String>, CacheError> {
    let defaults = families::default_candidates(&kernel.spec, arch);
    let mut wrong = Vec::new();
    for v in &entry.manifest.variants {
        let candidate = match &v.tuning {
            None => match defaults.iter().find(|(shape, _)| *shape == v.shape) {
                Some((_, c)) => c.clone(),
                None => {
                    wrong.push(format!(
                        "{}: this generator has no default for its shape bucket",
                        v.stem
                    ));
                    continue;
                }
            },
            Some(t) => {
                let log_path = entry.dir.join(&t.log);
                let log = entry.bytes(&t.log)?;
                let schedule = SearchRecords::parse_jsonl(&String::from_utf8_lossy(log), &log_path)
                    .map_err(|e| e.to_string())
                    .and_then(|r| families::logged_candidate(kernel, &r.summary.best_schedule));
                match schedule {
                    Ok(c) => c,
                    Err(e) => {
                        wrong.push(format!(
                            "{}: its search log names no schedule of this generator: {e}",
                            v.stem
                        ));
                        continue;
                    }
                }
            }
        };
        let source = entry.bytes(&format!("{}.cu", v.stem))?;
        if source != candidate.source.as_bytes() {
            wrong.push(format!(
                "{}: its source is not what its schedule generates",
                v.stem
            ));
            continue;
        }
        if candidate.launch != v.launch {
            wrong.push(format!(
                "{}: its launch ({:?}) is not the one its schedule launches with ({:?})",
                v.stem, v.launch, candidate.launch
            ));
            continue;
        }
        let cubin = entry.bytes(&format!("{}.cubin", v.stem))?;
        let ptx = entry.bytes(&format!("{}.ptx", v.stem))?;
        // The file name NVRTC was given is in the machine code (assertions name it): the build names a default's
        // after its kernel, a search its candidates one way.
        let file = match v.tuning {
            None => format!("{}_{arch}.cu", kernel.name),
            Some(_) => crate::eval::CANDIDATE_FILE.to_string(),
        };
        let (mut same_cubin, mut same_ptx) = (false, false);
        for _ in 0..COMPILE_ATTEMPTS {
            match nvrtc::compile(
                nvrtc,
                &file,
                &candidate.source,
                candidate.launch.image_arch(arch),
            ) {
                Ok(c) => {
                    same_cubin |= c.cubin.as_slice() == cubin;
                    same_ptx |=
                        without_register_numbers(c.ptx.as_bytes()) == without_register_numbers(ptx);
                }
                Err(e) => {
                    wrong.push(format!(
                        "{}: its source does not compile: {}",
                        v.stem, e.status
                    ));
                    break;
                }
            }
            if same_cubin && same_ptx {
                break;
            }
        }
        if !same_cubin {
            wrong.push(format!(
                "{}: its CUBIN is not what NVRTC makes of its source",
                v.stem
            ));
        } else if !same_ptx {
            wrong.push(format!(
                "{}: its PTX is not what NVRTC makes of its source",
                v.stem
            ));
        }
    }
    Ok(wrong)
}

/// PTX with its virtual registers' numbers left out (`%r17` → `%r`): NVRTC numbers them differently from one
/// compile of a source to the next (see [`COMPILE_ATTEMPTS`]), and nothing else about the PTX changes.
fn without_register_numbers(ptx: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ptx.len());
    let mut in_name = false;
    for &b in ptx {
        if b == b'%' {
            in_name = true;
        } else if in_name && b.is_ascii_digit() {
            continue;
        } else if !b.is_ascii_alphabetic() {
            in_name = false;
        }
        out.push(b);
    }
    out
}

/// This generator's form of one tuned variant of `earlier`, when it is the same machine code; the outer error
/// is an unreadable file, the inner one why the variant stays behind.
#[allow(clippy::type_complexity)]
fn reproduce(
    nvrtc: &Nvrtc,
    kernel: &FoundKernel,
    arch: Arch,
    earlier: &Entry,
    v: &crate::cache::VariantRecord,
    built: &mut HashMap<String, Vec<Compiled>>,
) -> Result<Result<(Candidate, Compiled, Vec<u8>), Dropped>, CacheError> {
    let Some(log_name) = v.tuning.as_ref().map(|t| &t.log).filter(|l| !l.is_empty()) else {
        return Ok(Err(Dropped::NoLog));
    };
    let log_path = earlier.dir.join(log_name);
    let log = earlier.bytes(log_name)?;
    let records = match SearchRecords::parse_jsonl(&String::from_utf8_lossy(log), &log_path) {
        Ok(r) => r,
        Err(e) => return Ok(Err(Dropped::Schedule(e.to_string()))),
    };
    let candidate = match families::logged_candidate(kernel, &records.summary.best_schedule) {
        Ok(c) => c,
        Err(e) => return Ok(Err(Dropped::Schedule(e))),
    };
    if candidate.launch != v.launch {
        return Ok(Err(Dropped::Changed));
    }
    let old = earlier.bytes(&format!("{}.cubin", v.stem))?;
    let tried = built.entry(candidate.source.clone()).or_default();
    while !tried.iter().any(|c| c.cubin == old) && tried.len() < COMPILE_ATTEMPTS {
        match nvrtc::compile(
            nvrtc,
            crate::eval::CANDIDATE_FILE,
            &candidate.source,
            candidate.launch.image_arch(arch),
        ) {
            Ok(c) => tried.push(c),
            Err(e) => {
                let first = e.log.lines().find(|l| l.contains("error")).unwrap_or("");
                return Ok(Err(Dropped::Compile(format!("{} {first}", e.status))));
            }
        }
    }
    Ok(match tried.iter().find(|c| c.cubin == old) {
        Some(same) => Ok((candidate, same.clone(), log.to_vec())),
        None => Err(Dropped::Changed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry stored from its own default passes; one holding another kernel's CUBIN (checksums recomputed, so
    /// every lookup accepts it) or an edited launch does not.
    #[test]
    fn a_rebuild_finds_another_kernels_cubin_and_an_edited_launch() {
        let root = std::env::temp_dir().join(format!("optiml-rederive-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let src = root.join("lib.rs");
        std::fs::write(
            &src,
            "#[optiml::kernel(\"relu\")]\npub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);\n\
             #[optiml::kernel(\"tanh\")]\npub fn tanh(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);\n",
        )
        .unwrap();
        let kernels = crate::scan::scan(&[src]).unwrap().unique_kernels();
        let arch = Arch::new(9, 0);
        let nvrtc = crate::nvrtc::testing::nvrtc();
        let cache = Cache::new(root.join(".optiml"));
        let inputs = KeyInputs::of(
            &kernels[0],
            arch,
            &families::kernel_generator(&kernels[0], arch),
        );
        let built: Vec<(Candidate, Compiled)> = kernels
            .iter()
            .map(|k| {
                let c = families::default_candidate(&k.spec, arch);
                let file = format!("{}_{arch}.cu", k.name);
                let compiled = nvrtc::compile(nvrtc, &file, &c.source, arch).unwrap();
                (c, compiled)
            })
            .collect();
        let (relu, tanh) = (&built[0], &built[1]);
        let honest = cache
            .store(&inputs, &[NewVariant::default_for(&relu.0, &relu.1)], false)
            .unwrap();
        assert_eq!(
            rederive(nvrtc, &kernels[0], arch, &honest).unwrap(),
            Vec::<String>::new()
        );

        let forged = cache
            .store(&inputs, &[NewVariant::default_for(&relu.0, &tanh.1)], true)
            .unwrap();
        assert!(matches!(cache.lookup(&inputs), Lookup::Hit(_)));
        let wrong = rederive(nvrtc, &kernels[0], arch, &forged).unwrap();
        assert_eq!(wrong.len(), 1, "{wrong:?}");
        assert!(
            wrong[0].contains("its CUBIN is not what NVRTC makes"),
            "{wrong:?}"
        );

        let mut edited = relu.0.clone();
        if let optiml_runtime::Launch::Program(p) = &mut edited.launch {
            p.threads *= 2;
        }
        let forged = cache
            .store(&inputs, &[NewVariant::default_for(&edited, &relu.1)], true)
            .unwrap();
        let wrong = rederive(nvrtc, &kernels[0], arch, &forged).unwrap();
        assert!(wrong[0].contains("its launch"), "{wrong:?}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn register_numbers_are_left_out_of_the_ptx_compared() {
        let a = without_register_numbers(b"add.f32 %f12, %f3, %f104;\nld.param.u64 %rd7, [p_0];\n");
        let b = without_register_numbers(b"add.f32 %f1, %f30, %f4;\nld.param.u64 %rd70, [p_0];\n");
        assert_eq!(a, b);
        assert_eq!(
            a,
            b"add.f32 %f, %f, %f;\nld.param.u64 %rd, [p_0];\n".to_vec()
        );
        assert_ne!(a, without_register_numbers(b"mul.f32 %f1, %f3, %f4;\n"));
    }
}
