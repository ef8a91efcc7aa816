//! The stages build.rs and `cargo optiml` share: key each kernel per architecture, look it up, generate and
//! compile what is missing, store it.

use crate::cache::{Cache, Entry, KeyInputs, Lookup, NewVariant};
use crate::error::{Error, Miss};
use crate::families;
use crate::nvrtc;
use crate::scan::FoundKernel;
use optiml_runtime::Arch;
use std::path::PathBuf;

/// Where a resolved entry came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Found, verified, in this cache folder.
    Cache(PathBuf),
    /// Generated and compiled in this run.
    Generated,
}

/// One kernel on one architecture, ready to embed.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// Index into the kernels passed to [`resolve`].
    pub kernel: usize,
    /// The architecture.
    pub arch: Arch,
    /// The verified entry.
    pub entry: Entry,
    /// Where it came from.
    pub origin: Origin,
}

/// How [`resolve`] may fill misses.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Caches to read, in order.
    pub read: Vec<Cache>,
    /// Where generated entries go.
    pub write: Cache,
    /// Forbid generation.
    pub offline: bool,
}

/// Something worth telling the user that is not an error (a corrupt entry that will be regenerated).
pub type Warning = String;

/// Resolves every kernel on every architecture.
///
/// # Errors
/// [`Error::Offline`] or [`Error::Nvrtc`] listing every miss at once, [`Error::Compile`], [`Error::Cache`].
pub fn resolve(
    kernels: &[FoundKernel],
    archs: &[Arch],
    policy: &Policy,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<Resolved>, Error> {
    let mut done = Vec::new();
    let mut todo = Vec::new();
    for (index, kernel) in kernels.iter().enumerate() {
        for &arch in archs {
            let generator = families::kernel_generator(kernel, arch);
            let inputs = KeyInputs::of(kernel, arch, &generator);
            let mut found: Option<Resolved> = None;
            let mut damaged: Vec<(PathBuf, String)> = Vec::new();
            for cache in &policy.read {
                // With an entry in hand, a later cache matters only for a tuned one: a look at its manifest
                // spares reading and checksumming every file of an untuned copy on each build-script run.
                if found.is_some() && !cache.holds_tuned(&inputs) {
                    continue;
                }
                let entry = match cache.lookup(&inputs) {
                    Lookup::Hit(entry) => entry,
                    // What still verifies of a damaged entry serves, and is written back where this build
                    // writes (elsewhere, `cargo optiml prepare` rewrites it).
                    Lookup::Salvaged {
                        entry,
                        reason,
                        lost,
                    } => {
                        let repaired = *cache == policy.write
                            && !policy.offline
                            && cache.repair(&entry).is_ok();
                        warnings.push(format!(
                            "cache entry `{}` for `{}` on {arch} is damaged ({reason}): its {} verified variant(s) \
                             {}; lost: {}",
                            entry.dir.display(),
                            kernel.name,
                            entry.manifest.variants.len(),
                            if repaired {
                                "are kept, and the entry was rewritten with them"
                            } else {
                                "serve this build (`cargo optiml prepare` rewrites the entry with them)"
                            },
                            lost.join("; ")
                        ));
                        entry
                    }
                    Lookup::Miss => continue,
                    Lookup::Corrupt { dir, reason } => {
                        damaged.push((dir, reason));
                        continue;
                    }
                };
                if cache.is_legacy(&entry) {
                    warnings.push(format!(
                        "cache entry `{}` for `{}` on {arch} is of the previous cache format (unpacked); it serves \
                         this build, and `cargo optiml prepare` rewrites it",
                        entry.dir.display(),
                        kernel.name
                    ));
                }
                // A tuned entry beats an untuned one wherever it sits: `target/optiml/` is read first, and its
                // default must not hide the winner `cargo optiml tune` committed.
                let tuned = entry.manifest.variants.iter().any(|v| v.tuning.is_some());
                if found.is_none() || tuned {
                    found = Some(Resolved {
                        kernel: index,
                        arch,
                        entry: *entry,
                        origin: Origin::Cache(cache.root.clone()),
                    });
                }
                if tuned {
                    break;
                }
            }
            // What happens to a damaged entry depends on the other caches and the policy: say the one that will.
            for (dir, reason) in damaged {
                let then = match &found {
                    Some(r) => match &r.origin {
                        Origin::Cache(root) => format!("the entry in `{}` is used", root.display()),
                        Origin::Generated => "another entry is used".to_string(),
                    },
                    None if policy.offline => "not regenerated (OPTIML_OFFLINE)".to_string(),
                    None => "regenerated".to_string(),
                };
                warnings.push(format!(
                    "cache entry `{}` for `{}` on {arch} is damaged ({reason}); it is ignored: {then}",
                    dir.display(),
                    kernel.name
                ));
            }
            match found {
                Some(r) => done.push(r),
                None => todo.push((index, arch, inputs)),
            }
        }
    }
    if todo.is_empty() {
        return Ok(done);
    }
    let misses: Vec<Miss> = todo
        .iter()
        .map(|(i, arch, inputs)| Miss {
            kernel: kernels[*i].name.clone(),
            file: kernels[*i].file.clone(),
            line: kernels[*i].line,
            arch: *arch,
            key: inputs.key(),
        })
        .collect();
    if policy.offline {
        return Err(Error::Offline { misses });
    }
    let nvrtc = nvrtc::load().map_err(|source| Error::Nvrtc { misses, source })?;
    // NVRTC is thread-safe across programs; compile on every core.
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(todo.len());
    let chunks: Vec<Vec<(usize, Arch, KeyInputs)>> = {
        let mut c: Vec<Vec<_>> = (0..workers).map(|_| Vec::new()).collect();
        for (i, job) in todo.into_iter().enumerate() {
            c[i % workers].push(job);
        }
        c
    };
    let results: Vec<Result<Vec<Resolved>, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|(index, arch, inputs)| {
                            generate(&kernels[index], index, arch, &inputs, nvrtc, &policy.write)
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Cache(crate::cache::CacheError::Fs(
                        crate::fs::FsError {
                            op: "generate (a worker thread panicked)",
                            path: policy.write.root.clone(),
                            source: std::io::Error::other("worker panicked"),
                        },
                    )))
                })
            })
            .collect()
    });
    for r in results {
        done.extend(r?);
    }
    done.sort_by_key(|r| (r.kernel, r.arch));
    Ok(done)
}

/// One of a family's untuned variants, compiled: the shape bucket it serves (`None`: every shape), its candidate
/// and its compiled images.
pub struct Untuned {
    /// The bucket.
    pub shape: Option<[u64; 4]>,
    /// The candidate.
    pub candidate: crate::experts::Candidate,
    /// Its PTX and CUBIN.
    pub compiled: nvrtc::Compiled,
}

impl Untuned {
    /// The variant to store.
    pub fn variant(&self) -> NewVariant<'_> {
        NewVariant {
            shape: self.shape,
            ..NewVariant::default_for(&self.candidate, &self.compiled)
        }
    }
}

/// The family's untuned variants of `kernel` on `arch` (one per shape bucket where the family has buckets),
/// compiled: shape buckets often share a schedule, and each distinct source compiles once.
///
/// # Errors
/// The first compile that fails.
pub fn compiled_defaults(
    nvrtc: &nvrtc::Nvrtc,
    kernel: &FoundKernel,
    arch: Arch,
) -> Result<Vec<Untuned>, nvrtc::CompileFailure> {
    compiled_defaults_of(nvrtc, kernel, arch, |_| true)
}

/// The untuned variants a tuned entry of `kernel` keeps beside its tuned variants, which hold the shapes
/// `taken`, compiled: those of the family's shape buckets that are free, and the any-shape default where the
/// runtime times it against the tuned variants ([`families::times_untuned_shapes`]; otherwise nothing is
/// compiled for a family whose default serves every shape).
///
/// # Errors
/// The first compile that fails.
pub fn free_bucket_defaults(
    nvrtc: &nvrtc::Nvrtc,
    kernel: &FoundKernel,
    arch: Arch,
    taken: &[Option<[u64; 4]>],
) -> Result<Vec<Untuned>, nvrtc::CompileFailure> {
    let timed = families::times_untuned_shapes(&kernel.spec);
    compiled_defaults_of(nvrtc, kernel, arch, |shape| is_free(shape, taken, timed))
}

/// Whether a default for `shape` belongs beside tuned variants holding `taken`: a bucket's that no tuned variant
/// holds, or the any-shape default where the runtime times it against them (`timed`); elsewhere that default
/// would only be dead weight, as the nearest tuned variant serves every call.
fn is_free(shape: Option<[u64; 4]>, taken: &[Option<[u64; 4]>], timed: bool) -> bool {
    match shape {
        Some(_) => !taken.contains(&shape),
        None => timed,
    }
}

fn compiled_defaults_of(
    nvrtc: &nvrtc::Nvrtc,
    kernel: &FoundKernel,
    arch: Arch,
    keep: impl Fn(Option<[u64; 4]>) -> bool,
) -> Result<Vec<Untuned>, nvrtc::CompileFailure> {
    let mut out: Vec<Untuned> = Vec::new();
    for (shape, candidate) in families::default_candidates(&kernel.spec, arch) {
        if !keep(shape) {
            continue;
        }
        let compiled = match out.iter().find(|u| u.candidate.source == candidate.source) {
            Some(u) => u.compiled.clone(),
            None => nvrtc::compile(
                nvrtc,
                &format!("{}_{arch}.cu", kernel.name),
                &candidate.source,
                candidate.launch.image_arch(arch),
            )?,
        };
        out.push(Untuned {
            shape,
            candidate,
            compiled,
        });
    }
    Ok(out)
}

fn generate(
    kernel: &FoundKernel,
    index: usize,
    arch: Arch,
    inputs: &KeyInputs,
    nvrtc: &nvrtc::Nvrtc,
    cache: &Cache,
) -> Result<Resolved, Error> {
    let defaults = compiled_defaults(nvrtc, kernel, arch).map_err(|source| Error::Compile {
        kernel: kernel.name.clone(),
        arch,
        source,
    })?;
    let variants: Vec<NewVariant<'_>> = defaults.iter().map(Untuned::variant).collect();
    let entry = cache
        .store(inputs, &variants, false)
        .map_err(Error::Cache)?;
    Ok(Resolved {
        kernel: index,
        arch,
        entry,
        origin: Origin::Generated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Tuning;
    use crate::search::Measurement;

    #[test]
    fn free_buckets_and_a_timed_any_shape_default_sit_beside_tuned_variants() {
        let (a, c) = ([256, 1024, 1024, 1024], [1, 64, 64, 64]);
        for timed in [false, true] {
            assert!(is_free(Some(c), &[Some(a)], timed));
            assert!(!is_free(Some(a), &[Some(a)], timed));
            assert_eq!(is_free(None, &[Some(a)], timed), timed);
        }
    }

    /// A kernel declared in a temporary crate under `root`, its key inputs on sm_90, its default candidate and a
    /// stand-in compilation.
    fn fixture(
        root: &std::path::Path,
    ) -> (
        Vec<FoundKernel>,
        KeyInputs,
        crate::experts::Candidate,
        nvrtc::Compiled,
    ) {
        let _ = std::fs::remove_dir_all(root);
        std::fs::create_dir_all(root).unwrap();
        let src = root.join("lib.rs");
        std::fs::write(
            &src,
            "#[optiml::kernel(\"batched matmul, f32\")]\npub fn bmm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, batch: usize, m: usize, n: usize, k: usize);\n",
        )
        .unwrap();
        let kernels = crate::scan::scan(&[src]).unwrap().unique_kernels();
        let arch = Arch::new(9, 0);
        let inputs = KeyInputs::of(
            &kernels[0],
            arch,
            &families::kernel_generator(&kernels[0], arch),
        );
        let candidate = families::default_candidate(&kernels[0].spec, arch);
        let compiled = nvrtc::Compiled {
            ptx: ".version 9.0\n".into(),
            cubin: vec![1, 2, 3],
            log: String::new(),
            resources: Default::default(),
            options: Vec::new(),
        };
        (kernels, inputs, candidate, compiled)
    }

    /// A damaged entry's warning says what happens instead: another cache's entry is used, or (offline) nothing
    /// is regenerated; it once said "regenerated" just before the offline error.
    #[test]
    fn a_damaged_entry_is_reported_with_what_happens_instead() {
        let root =
            std::env::temp_dir().join(format!("optiml-engine-damaged-{}", std::process::id()));
        let (kernels, inputs, candidate, compiled) = fixture(&root);
        let (target, committed) = (
            Cache::new(root.join("target")),
            Cache::new(root.join(".optiml")),
        );
        let v = NewVariant::default_for(&candidate, &compiled);
        let entry = committed.store(&inputs, &[v], false).unwrap();
        std::fs::write(entry.dir.join("v0.tar.gz"), b"damaged").unwrap();
        let policy = |offline| Policy {
            read: vec![target.clone(), committed.clone()],
            write: target.clone(),
            offline,
        };
        let mut warnings = Vec::new();
        let arch = Arch::new(9, 0);
        assert!(resolve(&kernels, &[arch], &policy(true), &mut warnings).is_err());
        assert!(
            warnings[0].ends_with("it is ignored: not regenerated (OPTIML_OFFLINE)"),
            "{warnings:?}"
        );
        // Damaged in the cache read first, whole in the next one.
        committed.store(&inputs, &[v], true).unwrap();
        let entry = target.store(&inputs, &[v], false).unwrap();
        std::fs::write(entry.dir.join("v0.tar.gz"), b"damaged").unwrap();
        let mut warnings = Vec::new();
        resolve(&kernels, &[arch], &policy(true), &mut warnings).unwrap();
        assert!(
            warnings[0].contains(&format!(
                "it is ignored: the entry in `{}` is used",
                committed.root.display()
            )),
            "{warnings:?}"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_tuned_entry_wins_over_a_default_read_earlier() {
        let root = std::env::temp_dir().join(format!("optiml-engine-tuned-{}", std::process::id()));
        let (kernels, inputs, candidate, compiled) = fixture(&root);
        let arch = Arch::new(9, 0);
        let (target, committed) = (
            Cache::new(root.join("target")),
            Cache::new(root.join(".optiml")),
        );
        target
            .store(
                &inputs,
                &[NewVariant::default_for(&candidate, &compiled)],
                false,
            )
            .unwrap();
        let tuning = Tuning {
            method: "mcts".into(),
            device: "test".into(),
            date: String::new(),
            measurement: Measurement::default(),
            default_measurement: Measurement::default(),
            evaluations: 1,
            path: Vec::new(),
            log: String::new(),
        };
        committed
            .store(
                &inputs,
                &[NewVariant {
                    shape: Some([16, 1024, 1024, 1024]),
                    tuning: Some(&tuning),
                    ..NewVariant::default_for(&candidate, &compiled)
                }],
                false,
            )
            .unwrap();
        let policy = Policy {
            read: vec![target.clone(), committed.clone()],
            write: target,
            offline: true,
        };
        let resolved = resolve(&kernels, &[arch], &policy, &mut Vec::new()).unwrap();
        assert_eq!(resolved[0].origin, Origin::Cache(committed.root.clone()));
        assert_eq!(
            resolved[0].entry.manifest.variants[0].shape,
            Some([16, 1024, 1024, 1024])
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
