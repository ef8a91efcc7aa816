//! The kernel cache: `target/optiml/` and the committed `.optiml/`, one layout for both.
//!
//! ```text
//! <root>/
//!   .lock                      held while an entry is renamed into place
//!   sm_90/<key>/               key = sha256(format, kernel id, arch, toolchain, generator)
//!     v0.cu v0.ptx v0.cubin    one variant: the generated source (for review), PTX (JIT fallback for newer
//!                              GPUs), CUBIN for sm_90; a tuned entry holds one variant per shape bucket
//!                              (buckets that chose the same kernel share its files)
//!     search-v0.jsonl          the search log of tuned variant 0 (`cargo optiml analyze` reads it)
//!     manifest.bin             bincode: key inputs, variants (launch, ptxas report, tuning), checksums
//!     report.md                the same, for people reviewing a committed cache
//! ```
//!
//! An entry is written into a temporary folder beside its final place and renamed into place, so a crash leaves
//! at most a stray `.tmp-*` folder, never half an entry. Loading compares every key input stored in the manifest
//! and every file's sha256; anything off is a miss (and the entry is replaced), never a wrong or torn kernel.

use crate::experts::Candidate;
use crate::fs::{self, FsError};
use crate::measure::Measurement;
use crate::nvrtc::{Compiled, PINNED, Resources};
use optiml_runtime::{Arch, Launch};
use optiml_spec::{KernelId, sha256_hex};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Manifest format; a different number is a miss.
pub const FORMAT: u32 = 2;

/// The files of a variant, by extension.
const VARIANT_FILES: [&str; 3] = ["cu", "ptx", "cubin"];

/// Everything an entry's key is made of; stored in the manifest and compared on load (a hash collision or a
/// hand-edited entry is then a miss, as sqlx compares the stored query).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyInputs {
    /// The kernel id (canonical spec + binding).
    pub kernel_id: String,
    /// The canonical spec.
    pub spec: String,
    /// The canonical binding.
    pub binding: String,
    /// Target architecture.
    pub arch: Arch,
    /// Compiler and its pinned release, e.g. `nvrtc 13.0`.
    pub toolchain: String,
    /// `experts::generator_version()`.
    pub generator: String,
}

impl KeyInputs {
    /// The key inputs of `kernel` on `arch` with this generator.
    pub fn new(id: &KernelId, spec: &str, binding: &str, arch: Arch, generator: &str) -> Self {
        KeyInputs {
            kernel_id: id.hex(),
            spec: spec.to_string(),
            binding: binding.to_string(),
            arch,
            toolchain: format!("nvrtc {PINNED}"),
            generator: generator.to_string(),
        }
    }

    /// The key inputs of a kernel found in the sources.
    pub fn of(kernel: &crate::scan::FoundKernel, arch: Arch, generator: &str) -> Self {
        Self::new(
            &kernel.id,
            &kernel.spec.canonical(),
            &kernel.binding.canonical(),
            arch,
            generator,
        )
    }

    /// The entry's key: sha256 of every input.
    pub fn key(&self) -> String {
        sha256_hex(
            format!(
                "optiml-cache/{FORMAT}\nkernel {}\narch {}\ntoolchain {}\ngenerator {}\n",
                self.kernel_id, self.arch, self.toolchain, self.generator
            )
            .as_bytes(),
        )
    }
}

/// A file of an entry with its checksum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// File name inside the entry.
    pub name: String,
    /// Length in bytes.
    pub len: u64,
    /// sha256, hex.
    pub sha256: String,
}

/// What a search found for a variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tuning {
    /// `mcts`, `random` or `exhaustive`.
    pub method: String,
    /// The GPU it was measured on.
    pub device: String,
    /// When (RFC 3339, UTC).
    pub date: String,
    /// The winner's measurement.
    pub measurement: Measurement,
    /// The default schedule's measurement in the same run.
    pub default_measurement: Measurement,
    /// Candidates evaluated.
    pub evaluations: usize,
    /// Transformations from the default to the winner.
    pub path: Vec<String>,
    /// The search log's file name in the entry (empty when none was stored).
    pub log: String,
}

/// One compiled form of the kernel in an entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VariantRecord {
    /// File stem: `<stem>.cu`, `<stem>.ptx`, `<stem>.cubin`.
    pub stem: String,
    /// Launch parameters.
    pub launch: Launch,
    /// The schedule, described.
    pub schedule: String,
    /// ptxas' resource report.
    pub resources: Resources,
    /// NVRTC's log.
    pub nvrtc_log: String,
    /// The problem shape (batch, m, n, k) it was tuned for; `None`: the default, for any shape.
    pub shape: Option<[u64; 4]>,
    /// What the search found, for a tuned variant.
    pub tuning: Option<Tuning>,
}

/// What `manifest.bin` holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// The entry's key.
    pub key: String,
    /// The key's inputs.
    pub inputs: KeyInputs,
    /// The kernel's entry point.
    pub entry: String,
    /// The NVRTC options used.
    pub nvrtc_options: Vec<String>,
    /// The variants (at least one).
    pub variants: Vec<VariantRecord>,
    /// Every file of the entry and its checksum.
    pub files: Vec<FileRecord>,
}

/// A verified entry.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Its folder.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
}

impl Entry {
    /// The path of one of the entry's files.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// A variant to store.
#[derive(Clone, Copy, Debug)]
pub struct NewVariant<'a> {
    /// The candidate.
    pub candidate: &'a Candidate,
    /// Its compiled form.
    pub compiled: &'a Compiled,
    /// The shape it was tuned for (`None`: any).
    pub shape: Option<[u64; 4]>,
    /// What the search found.
    pub tuning: Option<&'a Tuning>,
    /// The search log's bytes (JSON lines).
    pub log: Option<&'a [u8]>,
}

impl<'a> NewVariant<'a> {
    /// An untuned variant for every shape.
    pub fn default_for(candidate: &'a Candidate, compiled: &'a Compiled) -> Self {
        NewVariant {
            candidate,
            compiled,
            shape: None,
            tuning: None,
            log: None,
        }
    }
}

/// The outcome of a lookup.
#[derive(Debug)]
pub enum Lookup {
    /// A verified entry.
    Hit(Box<Entry>),
    /// No entry.
    Miss,
    /// An entry that failed verification, and why; it must be regenerated, never loaded.
    Corrupt {
        /// Its folder.
        dir: PathBuf,
        /// What failed.
        reason: String,
    },
    /// A damaged entry whose manifest is intact and some of whose variants still verify: the entry holds only
    /// those (in memory; [`Cache::repair`] writes it), so a lost file costs its own variant, not the tuning of
    /// the others.
    Salvaged {
        /// The verified part.
        entry: Box<Entry>,
        /// What failed verification.
        reason: String,
        /// What was lost, one line per variant or search log.
        lost: Vec<String>,
    },
}

/// Why the cache could not be written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// A filesystem operation failed.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// The manifest could not be encoded.
    #[error("failed to encode the manifest of `{}`", dir.display())]
    Encode {
        /// The entry.
        dir: PathBuf,
        /// The encoder's error.
        #[source]
        source: bincode::error::EncodeError,
    },
}

/// How a report words what a tuned variant was tuned for, from the winner's schedule as its search log records it
/// (which names its kernel, and so its family), the variant's bucket and the problem its search ran at. The cache
/// names no family: the build helper hands it the registry's wording ([`Cache::with_words`]).
pub type TunedWords = fn(Option<&serde_json::Value>, Option<[u64; 4]>, Option<&str>) -> String;

/// A cache root folder.
#[derive(Clone, Debug)]
pub struct Cache {
    /// The folder.
    pub root: PathBuf,
    /// How its reports word a tuned variant's shape.
    pub words: TunedWords,
}

impl PartialEq for Cache {
    /// Two caches are the same folder (the wording is not part of what is stored).
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
    }
}

impl Eq for Cache {}

impl Cache {
    /// A cache at `root` (created on first store), whose reports give a tuned variant's bucket sizes
    /// ([`plain_words`]).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Cache {
            root: root.into(),
            words: plain_words,
        }
    }

    /// This cache with reports worded by `words`.
    pub fn with_words(self, words: TunedWords) -> Self {
        Cache { words, ..self }
    }

    /// Where the entry for `inputs` lives.
    pub fn entry_dir(&self, inputs: &KeyInputs) -> PathBuf {
        self.root.join(inputs.arch.to_string()).join(inputs.key())
    }

    /// Looks up and verifies the entry for `inputs`.
    pub fn lookup(&self, inputs: &KeyInputs) -> Lookup {
        let dir = self.entry_dir(inputs);
        if !dir.exists() {
            return Lookup::Miss;
        }
        match verify(&dir, inputs) {
            Ok(manifest) => Lookup::Hit(Box::new(Entry { dir, manifest })),
            Err(reason) => match salvage(&dir, inputs) {
                Some((manifest, lost)) => Lookup::Salvaged {
                    entry: Box::new(Entry { dir, manifest }),
                    reason,
                    lost,
                },
                None => Lookup::Corrupt { dir, reason },
            },
        }
    }

    /// Rewrites a salvaged entry ([`Lookup::Salvaged`]) as it now stands: its manifest (written beside and
    /// renamed over the old one, so a reader sees the old or the new), its report, and without the files no
    /// variant lists any more.
    ///
    /// # Errors
    /// [`CacheError`] when a file cannot be written or removed.
    pub fn repair(&self, entry: &Entry) -> Result<(), CacheError> {
        let bytes = encode(&entry.manifest).map_err(|source| CacheError::Encode {
            dir: entry.dir.clone(),
            source,
        })?;
        let tmp = entry.dir.join(".manifest.bin.tmp");
        fs::write(&tmp, &bytes)?;
        fs::rename(&tmp, &entry.dir.join("manifest.bin"))?;
        let listed = |name: &str| entry.manifest.files.iter().any(|f| f.name == name);
        for path in fs::read_dir(&entry.dir)? {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !listed(&name) && name != "manifest.bin" && name != "report.md" {
                std::fs::remove_file(&path)
                    .or_else(|_| std::fs::remove_dir_all(&path))
                    .map_err(|source| FsError {
                        op: "remove a file no variant lists",
                        path: path.clone(),
                        source,
                    })?;
            }
        }
        refresh_report(entry, self.words)?;
        Ok(())
    }

    /// Copies a verified entry of another cache here under the same key (files copied into a scratch folder
    /// beside it, verified, then renamed into place), unless a valid entry is here already; the entry here.
    ///
    /// # Errors
    /// [`CacheError`] when a file cannot be copied, or the copy does not verify.
    pub fn adopt(&self, entry: &Entry) -> Result<Entry, CacheError> {
        let inputs = &entry.manifest.inputs;
        let dir = self.entry_dir(inputs);
        if let Lookup::Hit(hit) = self.lookup(inputs) {
            return Ok(*hit);
        }
        let parent = dir.parent().unwrap_or(&self.root).to_path_buf();
        fs::create_dir_all(&parent)?;
        let tmp = parent.join(format!(
            ".tmp-adopt-{}-{}",
            inputs.key(),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&tmp);
        fs::create_dir_all(&tmp)?;
        let names = entry
            .manifest
            .files
            .iter()
            .map(|f| f.name.as_str())
            .chain(["manifest.bin"]);
        for name in names {
            fs::write(&tmp.join(name), &fs::read(&entry.file(name))?)?;
        }
        let copied = Entry {
            dir: tmp.clone(),
            manifest: verify(&tmp, inputs).map_err(|reason| {
                let _ = std::fs::remove_dir_all(&tmp);
                CacheError::Fs(FsError {
                    op: "verify an adopted entry",
                    path: entry.dir.clone(),
                    source: std::io::Error::other(reason),
                })
            })?,
        };
        refresh_report(&copied, self.words)?;
        if std::fs::symlink_metadata(&dir).is_ok() {
            // A damaged entry (a valid one returned above) gives way.
            self.remove(&dir)?;
        }
        fs::rename(&tmp, &dir)?;
        Ok(Entry {
            dir,
            manifest: copied.manifest,
        })
    }

    /// Whether an entry for `inputs` here says it is tuned, from its manifest alone (nothing is checksummed:
    /// [`Cache::lookup`] still verifies an entry before it is used). Lets a reader that already has an untuned
    /// entry skip verifying other caches' untuned copies.
    pub fn holds_tuned(&self, inputs: &KeyInputs) -> bool {
        std::fs::read(self.entry_dir(inputs).join("manifest.bin"))
            .ok()
            .and_then(|bytes| decode(&bytes).ok())
            .is_some_and(|m| m.key == inputs.key() && m.variants.iter().any(|v| v.tuning.is_some()))
    }

    /// Writes an entry of `variants` under `inputs`, atomically. With `replace` false, an existing valid entry
    /// (another process stored it first) is kept; with `replace` true (a tuned entry superseding the default)
    /// it is swapped out under the lock, so a reader sees the old entry or the new one, never a mix.
    ///
    /// # Errors
    /// [`CacheError`] when the folder cannot be written.
    pub fn store(
        &self,
        inputs: &KeyInputs,
        variants: &[NewVariant<'_>],
        replace: bool,
    ) -> Result<Entry, CacheError> {
        let dir = self.entry_dir(inputs);
        let parent = dir.parent().unwrap_or(&self.root).to_path_buf();
        fs::create_dir_all(&parent)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let tmp = parent.join(format!(
            ".tmp-{}-{}-{nanos}",
            &inputs.key()[..16],
            std::process::id()
        ));
        let written = (|| {
            fs::create_dir_all(&tmp)?;
            let mut files = Vec::new();
            let mut put = |name: String, bytes: &[u8]| -> Result<(), CacheError> {
                fs::write(&tmp.join(&name), bytes)?;
                files.push(FileRecord {
                    name,
                    len: bytes.len() as u64,
                    sha256: sha256_hex(bytes),
                });
                Ok(())
            };
            let mut records: Vec<VariantRecord> = Vec::new();
            for (i, v) in variants.iter().enumerate() {
                // Shape buckets that chose the same kernel share its files (and its CUBIN in the program).
                let same = variants[..i].iter().position(|w| {
                    w.candidate.source == v.candidate.source && w.compiled.cubin == v.compiled.cubin
                });
                let stem = match same {
                    Some(j) => records[j].stem.clone(),
                    None => {
                        let stem = format!("v{i}");
                        put(format!("{stem}.cu"), v.candidate.source.as_bytes())?;
                        put(format!("{stem}.ptx"), v.compiled.ptx.as_bytes())?;
                        put(format!("{stem}.cubin"), &v.compiled.cubin)?;
                        stem
                    }
                };
                let tuning = match (v.tuning, v.log) {
                    (Some(t), Some(log)) => {
                        let name = format!("search-v{i}.jsonl");
                        put(name.clone(), log)?;
                        Some(Tuning {
                            log: name,
                            ..t.clone()
                        })
                    }
                    (t, _) => t.cloned(),
                };
                records.push(VariantRecord {
                    stem,
                    launch: v.candidate.launch,
                    schedule: v.candidate.schedule.clone(),
                    resources: v.compiled.resources,
                    nvrtc_log: v.compiled.log.clone(),
                    shape: v.shape,
                    tuning,
                });
            }
            let manifest = Manifest {
                format: FORMAT,
                key: inputs.key(),
                inputs: inputs.clone(),
                entry: variants
                    .first()
                    .map(|v| v.candidate.entry.to_string())
                    .unwrap_or_default(),
                nvrtc_options: variants
                    .first()
                    .map(|v| v.compiled.options.clone())
                    .unwrap_or_default(),
                variants: records,
                files,
            };
            fs::write(
                &tmp.join("report.md"),
                report(&manifest, &tmp, self.words).as_bytes(),
            )?;
            // The manifest is written last: a folder without one is never mistaken for an entry.
            let bytes = encode(&manifest).map_err(|source| CacheError::Encode {
                dir: dir.clone(),
                source,
            })?;
            fs::write(&tmp.join("manifest.bin"), &bytes)?;
            Ok::<_, CacheError>(manifest)
        })();
        let manifest = match written {
            Ok(m) => m,
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        let _lock = match self.lock() {
            Ok(l) => l,
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                return Err(e.into());
            }
        };
        Self::sweep_leftovers(&parent);
        let present = std::fs::symlink_metadata(&dir).ok();
        if present.as_ref().is_some_and(|m| m.file_type().is_symlink()) {
            // An entry is a folder this cache wrote, never a link: a link (dangling, or to a folder elsewhere,
            // whose contents are not ours to delete) is removed, not followed.
            if let Err(source) = std::fs::remove_file(&dir) {
                let _ = fs::remove_dir_all(&tmp);
                return Err(FsError {
                    op: "remove the link",
                    path: dir,
                    source,
                }
                .into());
            }
        } else if present.is_some() {
            if !replace && verify(&dir, inputs).is_ok() {
                fs::remove_dir_all(&tmp)?;
                return self.lookup_hit(inputs);
            }
            // Move the old entry aside first: renaming onto a non-empty folder fails, and removing it in place
            // could leave it half-deleted for a concurrent reader. Until the new entry is in place the old one
            // can come back, so a failed store leaves the cache as it was.
            let trash = parent.join(format!(
                ".trash-{}-{}-{nanos}",
                &inputs.key()[..16],
                std::process::id()
            ));
            if let Err(e) = fs::rename(&dir, &trash) {
                let _ = fs::remove_dir_all(&tmp);
                return Err(e.into());
            }
            if let Err(e) = fs::rename(&tmp, &dir) {
                let _ = fs::rename(&trash, &dir);
                let _ = fs::remove_dir_all(&tmp);
                return Err(e.into());
            }
            // The new entry is in place: what is left to do is tidying, and a folder that will not go is swept
            // by the next store ([`Cache::sweep_leftovers`]).
            let _ = fs::remove_dir_all(&trash);
            return Ok(Entry { dir, manifest });
        }
        if let Err(e) = fs::rename(&tmp, &dir) {
            let _ = fs::remove_dir_all(&tmp);
            return Err(e.into());
        }
        Ok(Entry { dir, manifest })
    }

    /// Removes what an interrupted store left in an architecture folder: `.trash-*` folders (only a store
    /// holding the lock makes one, and removes it at once) and `.tmp-*` folders over an hour old (a store writes
    /// its entry there before taking the lock, so a young one may be in progress). Called under the lock.
    fn sweep_leftovers(arch_dir: &Path) {
        let hour = std::time::Duration::from_secs(3600);
        for path in fs::read_dir(arch_dir).unwrap_or_default() {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if !meta.is_dir() {
                continue;
            }
            let stale = meta
                .modified()
                .ok()
                .and_then(|m| m.elapsed().ok())
                .is_some_and(|age| age > hour);
            if name.starts_with(".trash-") || (name.starts_with(".tmp-") && stale) {
                let _ = fs::remove_dir_all(&path);
            }
        }
    }

    fn lookup_hit(&self, inputs: &KeyInputs) -> Result<Entry, CacheError> {
        let dir = self.entry_dir(inputs);
        let manifest = verify(&dir, inputs).map_err(|reason| {
            CacheError::Fs(FsError {
                op: "verify",
                path: dir.clone(),
                source: std::io::Error::other(reason),
            })
        })?;
        Ok(Entry { dir, manifest })
    }

    /// Removes an entry folder (a corrupt one, or one `cargo optiml prepare` no longer needs).
    ///
    /// # Errors
    /// [`FsError`] when it cannot be removed.
    pub fn remove(&self, dir: &Path) -> Result<(), FsError> {
        let _lock = self.lock();
        fs::remove_dir_all(dir)
    }

    /// Every entry folder in the cache: `<arch>/<64 hex digits>`. Nothing else in the folder is ours to touch.
    pub fn entry_dirs(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for arch in fs::read_dir(&self.root).unwrap_or_default() {
            let is_arch = arch
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.parse::<Arch>().is_ok());
            // A real folder only: through a link to a folder elsewhere, `prepare` would have removed that
            // folder's 64-hex-named subfolders as unused entries.
            let real_dir = std::fs::symlink_metadata(&arch).is_ok_and(|m| m.is_dir());
            if !is_arch || !real_dir {
                continue;
            }
            for entry in fs::read_dir(&arch).unwrap_or_default() {
                let name = entry
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default()
                    .to_string();
                if name.len() == 64 && name.chars().all(|c| c.is_ascii_hexdigit()) && entry.is_dir()
                {
                    out.push(entry);
                }
            }
        }
        out
    }

    /// The verified entries here for `inputs`' kernel, architecture and toolchain written by another generator
    /// (an earlier template or crate version), those with the most tuned variants first: what `cargo optiml
    /// prepare` can carry tuned variants over from. Entries that fail verification are left out.
    pub fn earlier_entries(&self, inputs: &KeyInputs) -> Vec<Entry> {
        let mut out: Vec<Entry> = fs::read_dir(&self.root.join(inputs.arch.to_string()))
            .unwrap_or_default()
            .into_iter()
            .filter(|dir| {
                dir.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.len() == 64)
            })
            .filter_map(|dir| {
                let bytes = std::fs::read(dir.join("manifest.bin")).ok()?;
                let theirs = decode(&bytes).ok()?.inputs;
                let same_kernel = theirs.kernel_id == inputs.kernel_id
                    && theirs.arch == inputs.arch
                    && theirs.toolchain == inputs.toolchain
                    && theirs.generator != inputs.generator;
                if !same_kernel {
                    return None;
                }
                let manifest = verify(&dir, &theirs).ok()?;
                Some(Entry { dir, manifest })
            })
            .collect();
        let tuned = |e: &Entry| {
            e.manifest
                .variants
                .iter()
                .filter(|v| v.tuning.is_some())
                .count()
        };
        // Most tuned first, then by folder, so the choice does not depend on the directory's order.
        out.sort_by(|a, b| tuned(b).cmp(&tuned(a)).then_with(|| a.dir.cmp(&b.dir)));
        out
    }

    fn lock(&self) -> Result<std::fs::File, FsError> {
        fs::create_dir_all(&self.root)?;
        let path = self.root.join(".lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| FsError {
                op: "open the lock file",
                path: path.clone(),
                source,
            })?;
        file.lock().map_err(|source| FsError {
            op: "lock",
            path,
            source,
        })?;
        Ok(file)
    }
}

fn encode(m: &Manifest) -> Result<Vec<u8>, bincode::error::EncodeError> {
    crate::codec::encode(m)
}

fn decode(bytes: &[u8]) -> Result<Manifest, String> {
    match crate::codec::decode::<Manifest>(bytes) {
        Ok((m, used)) if used == bytes.len() => Ok(m),
        Ok(_) => Err("manifest.bin has trailing bytes".into()),
        Err(e) => Err(format!("manifest.bin does not decode ({e})")),
    }
}

/// Reads and checks an entry: manifest format, every key input, every file's length and sha256.
pub fn verify(dir: &Path, inputs: &KeyInputs) -> Result<Manifest, String> {
    let bytes = std::fs::read(dir.join("manifest.bin"))
        .map_err(|e| format!("manifest.bin unreadable ({e})"))?;
    let manifest = decode(&bytes)?;
    if manifest.format != FORMAT {
        return Err(format!(
            "manifest format {} (expected {FORMAT})",
            manifest.format
        ));
    }
    if manifest.inputs != *inputs || manifest.key != inputs.key() {
        return Err("manifest was written for other key inputs".into());
    }
    if manifest.variants.is_empty() {
        return Err("the manifest lists no variant".into());
    }
    // Every file a variant needs must be listed (and so checksummed below).
    let listed = |name: &str| manifest.files.iter().any(|f| f.name == name);
    for v in &manifest.variants {
        let needed = VARIANT_FILES
            .iter()
            .map(|ext| format!("{}.{ext}", v.stem))
            .chain(
                v.tuning
                    .as_ref()
                    .filter(|t| !t.log.is_empty())
                    .map(|t| t.log.clone()),
            );
        for name in needed {
            if !listed(&name) || name.contains(['/', '\\']) {
                return Err(format!("variant {} lacks `{name}`", v.stem));
            }
        }
    }
    for file in &manifest.files {
        // A record names a plain file of this folder: `../x` or an absolute path would read (and report the size
        // of) a file elsewhere, and a symlink would stand for one.
        let plain = !file.name.is_empty()
            && file.name != "."
            && file.name != ".."
            && !file.name.contains(['/', '\\', ':'])
            && std::path::Path::new(&file.name).components().count() == 1;
        if !plain {
            return Err(format!(
                "the manifest lists `{}`, not a file of the entry",
                file.name
            ));
        }
        let path = dir.join(&file.name);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
            return Err(format!("{} is not a plain file", file.name));
        }
        let data = std::fs::read(&path).map_err(|e| format!("{} unreadable ({e})", file.name))?;
        if data.len() as u64 != file.len {
            return Err(format!(
                "{} has {} bytes, the manifest says {}",
                file.name,
                data.len(),
                file.len
            ));
        }
        if sha256_hex(&data) != file.sha256 {
            return Err(format!("{} does not match its checksum", file.name));
        }
    }
    Ok(manifest)
}

/// What can be kept of an entry that failed [`verify`]: when its manifest decodes and names these key inputs, the
/// variants whose CUDA source, PTX and CUBIN all verify (a tuned one keeps its measurement even when its search
/// log is lost), and a line for each variant or log lost. `None` when nothing verifies.
pub fn salvage(dir: &Path, inputs: &KeyInputs) -> Option<(Manifest, Vec<String>)> {
    let manifest = decode(&std::fs::read(dir.join("manifest.bin")).ok()?).ok()?;
    if manifest.format != FORMAT || manifest.inputs != *inputs || manifest.key != inputs.key() {
        return None;
    }
    // Each record checked alone, as `verify` checks them all.
    let intact = |name: &str| -> Result<&FileRecord, String> {
        let file = manifest
            .files
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| format!("`{name}` is not listed"))?;
        let plain = !name.is_empty()
            && !name.contains(['/', '\\', ':'])
            && Path::new(name).components().count() == 1
            && name != "."
            && name != "..";
        let path = dir.join(name);
        if !plain || std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
            return Err(format!("`{name}` is not a plain file of the entry"));
        }
        let data = std::fs::read(&path).map_err(|e| format!("`{name}` is unreadable ({e})"))?;
        if data.len() as u64 != file.len || sha256_hex(&data) != file.sha256 {
            return Err(format!("`{name}` does not match its checksum"));
        }
        Ok(file)
    };
    let (mut variants, mut files, mut lost) = (Vec::new(), Vec::<FileRecord>::new(), Vec::new());
    let keep = |file: &FileRecord, files: &mut Vec<FileRecord>| {
        if !files.iter().any(|f| f.name == file.name) {
            files.push(file.clone());
        }
    };
    for v in &manifest.variants {
        let what = match v.shape {
            Some(s) => format!(
                "variant {} (tuned for {})",
                v.stem,
                s.map(|d| d.to_string()).join("×")
            ),
            None => format!("variant {} (the default)", v.stem),
        };
        let code: Result<Vec<&FileRecord>, String> = VARIANT_FILES
            .iter()
            .map(|ext| intact(&format!("{}.{ext}", v.stem)))
            .collect();
        let code = match code {
            Ok(code) => code,
            Err(why) => {
                lost.push(format!("{what}: {why}"));
                continue;
            }
        };
        for file in code {
            keep(file, &mut files);
        }
        let mut v = v.clone();
        if let Some(t) = v.tuning.as_mut().filter(|t| !t.log.is_empty()) {
            match intact(&t.log) {
                Ok(file) => keep(file, &mut files),
                Err(why) => {
                    lost.push(format!("the search log of {what}: {why}"));
                    t.log.clear();
                }
            }
        }
        variants.push(v);
    }
    if variants.is_empty() {
        return None;
    }
    Some((
        Manifest {
            variants,
            files,
            ..manifest
        },
        lost,
    ))
}

/// Rewrites an entry's `report.md` from its manifest when it differs (a report written by an older generator);
/// `true` when it was rewritten. The report is not among the checksummed files, so this never invalidates it.
///
/// # Errors
/// [`FsError`] when the file cannot be written.
pub fn refresh_report(entry: &Entry, words: TunedWords) -> Result<bool, FsError> {
    let path = entry.file("report.md");
    let text = report(&entry.manifest, &entry.dir, words);
    if std::fs::read(&path).is_ok_and(|old| old == text.as_bytes()) {
        return Ok(false);
    }
    fs::write(&path, text.as_bytes())?;
    Ok(true)
}

/// The wording of a tuned variant's shape no family claims: `256×1024×1024×1024` (the bucket), else the problem
/// searched at, else every size.
pub fn plain_words(
    _winner: Option<&serde_json::Value>,
    bucket: Option<[u64; 4]>,
    searched_at: Option<&str>,
) -> String {
    match (bucket, searched_at) {
        (Some(b), _) => b.map(|d| d.to_string()).join("×"),
        (None, Some(at)) => at.to_string(),
        (None, None) => "every size".into(),
    }
}

/// The human-readable summary written beside the manifest of the entry in `dir` (whose search logs say what each
/// tuned variant was searched at; `words` words it).
pub fn report(m: &Manifest, dir: &Path, words: TunedWords) -> String {
    let mut s = format!(
        "# optiml kernel `{}`\n\n| | |\n|---|---|\n| spec | `{}` |\n| binding | `{}` |\n| arch | {} |\n| toolchain | {} |\n\
         | generator | {} |\n| entry | `{}` |\n| NVRTC options | `{}` |\n\n## Variants\n\n\
         | variant | tuned for | schedule | launch | registers | spills (st/ld) | static smem |\n|---|---|---|---|---|---|---|\n",
        m.key,
        m.inputs.spec,
        m.inputs.binding,
        m.inputs.arch,
        m.inputs.toolchain,
        m.inputs.generator,
        m.entry,
        m.nvrtc_options.join(" "),
    );
    for v in &m.variants {
        let r = &v.resources;
        // NVRTC's log can be empty (the H200's compile pool): then the loaded function's attributes, which the
        // search measured, stand in; never a made-up 0.
        let (registers, spills, smem) = match (r.registers, &v.tuning) {
            (0, Some(t)) => (
                format!("{} (loaded)", t.measurement.registers),
                format!("{} B local (loaded)", t.measurement.spill_bytes),
                format!("{} (loaded)", t.measurement.smem_bytes),
            ),
            (0, None) => ("–".into(), "–".into(), "–".into()),
            _ => (
                r.registers.to_string(),
                format!("{} / {}", r.spill_stores, r.spill_loads),
                r.shared_bytes.to_string(),
            ),
        };
        s.push_str(&format!(
            "| {} | {} | {} | `{:?}` | {registers} | {spills} | {smem} |\n",
            v.stem,
            match (&v.tuning, v.shape) {
                (None, None) => "any (default schedule)".into(),
                // A family's untuned variant per shape bucket (the launcher picks the nearest key).
                (None, Some(b)) => format!(
                    "untuned, for calls nearest the key {}",
                    b.map(|d| d.to_string()).join("×")
                ),
                (tuning, bucket) => {
                    // The log's header names the problem searched at, its winner the kernel (and so the family
                    // that words it); without a readable log the bucket alone says it.
                    let log = tuning
                        .as_ref()
                        .filter(|t| !t.log.is_empty())
                        .and_then(|t| crate::search::read_jsonl(&dir.join(&t.log)).ok());
                    words(
                        log.as_ref().map(|r| &r.summary.best_schedule),
                        bucket,
                        log.as_ref().map(|r| r.header.shape.as_str()),
                    )
                }
            },
            v.schedule,
            v.launch,
        ));
    }
    for v in &m.variants {
        match &v.tuning {
            Some(t) => s.push_str(&format!(
                "\n### {}: tuned by {} on {} ({})\n\n{:.4} ms against the default's {:.4} ms ({:.2}×) after {} evaluations; \
                 path: {}. Log: `{}` (`cargo optiml analyze` reads it).\n",
                v.stem,
                t.method,
                t.device,
                t.date,
                t.measurement.time_ms,
                t.default_measurement.time_ms,
                t.default_measurement.time_ms / t.measurement.time_ms,
                t.evaluations,
                if t.path.is_empty() {
                    "none (the default won)".to_string()
                } else {
                    t.path.join(" → ")
                },
                t.log
            )),
            None => s.push_str(&format!(
                "\n### {}: the family's default schedule (no search has run on it)\n",
                v.stem
            )),
        }
    }
    s.push_str("\n## Files\n\n");
    for f in &m.files {
        s.push_str(&format!(
            "- `{}`: {} bytes, sha256 `{}`\n",
            f.name, f.len, f.sha256
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (KeyInputs, Candidate, Compiled) {
        let spec = optiml_spec::parse("bmm").unwrap();
        let sig: syn::ForeignItemFn = syn::parse_str(
            "fn bmm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, batch: usize, m: usize, n: usize, k: usize);",
        )
        .unwrap();
        let binding = optiml_spec::bind(&spec, &sig.sig).unwrap();
        let id = KernelId::new(&spec, &binding);
        let inputs = KeyInputs::new(
            &id,
            &spec.canonical(),
            &binding.canonical(),
            Arch::new(9, 0),
            "test-gen",
        );
        let candidate = crate::families::default_candidate(&spec, Arch::new(9, 0));
        let compiled = Compiled {
            ptx: ".version 9.0\n.target sm_90\n".into(),
            cubin: vec![0x7f, b'E', b'L', b'F', 1, 2, 3, 4],
            log: "ptxas info : Used 90 registers".into(),
            resources: Resources {
                registers: 90,
                ..Default::default()
            },
            options: vec!["-arch=sm_90".into()],
        };
        (inputs, candidate, compiled)
    }

    /// A search's findings: 1.2 ms for the default, 1.0 ms for the winner.
    fn sample_tuning() -> Tuning {
        Tuning {
            method: "mcts".into(),
            device: "NVIDIA H200".into(),
            date: "2026-11-30T00:00:00Z".into(),
            measurement: Measurement {
                time_ms: 1.0,
                ..Measurement::default()
            },
            default_measurement: Measurement {
                time_ms: 1.2,
                ..Measurement::default()
            },
            evaluations: 32,
            path: vec!["grow-block-n".into()],
            log: String::new(),
        }
    }

    fn temp_cache(name: &str) -> Cache {
        let root =
            std::env::temp_dir().join(format!("optiml-cache-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        Cache::new(root)
    }

    #[test]
    fn round_trip() {
        let cache = temp_cache("round-trip");
        let (inputs, candidate, compiled) = sample();
        assert!(matches!(cache.lookup(&inputs), Lookup::Miss));
        let stored = cache
            .store(
                &inputs,
                &[NewVariant::default_for(&candidate, &compiled)],
                false,
            )
            .unwrap();
        let Lookup::Hit(hit) = cache.lookup(&inputs) else {
            panic!("miss after store")
        };
        assert_eq!(hit.manifest, stored.manifest);
        assert_eq!(std::fs::read(hit.file("v0.cubin")).unwrap(), compiled.cubin);
        assert_eq!(hit.manifest.variants[0].launch, candidate.launch);
        assert_eq!(cache.entry_dirs(), vec![hit.dir.clone()]);
        // Other key inputs miss.
        let other = KeyInputs {
            generator: "other".into(),
            ..inputs.clone()
        };
        assert!(matches!(cache.lookup(&other), Lookup::Miss));
        // No stray temporary folders.
        let stray: Vec<_> = fs::read_dir(&cache.root.join("sm_90")).unwrap();
        assert_eq!(stray.len(), 1, "{stray:?}");
        std::fs::remove_dir_all(&cache.root).unwrap();
    }

    /// An architecture folder that is a link is not this cache's: its contents are never listed as entries, so
    /// `prepare` never removes them as unused.
    #[test]
    fn a_linked_architecture_folder_is_not_walked() {
        let cache = temp_cache("linked-arch");
        let elsewhere = cache.root.with_extension("elsewhere");
        let theirs = elsewhere.join("a".repeat(64));
        std::fs::create_dir_all(&theirs).unwrap();
        std::fs::create_dir_all(&cache.root).unwrap();
        std::os::unix::fs::symlink(&elsewhere, cache.root.join("sm_90")).unwrap();
        assert!(cache.entry_dirs().is_empty());
        std::fs::remove_dir_all(&cache.root).unwrap();
        std::fs::remove_dir_all(&elsewhere).unwrap();
    }

    /// A link where an entry belongs is replaced, never followed: a dangling one blocked every store, and one to
    /// a folder elsewhere would have had that folder's contents deleted.
    #[test]
    fn links_in_place_of_an_entry_are_replaced_not_followed() {
        let cache = temp_cache("links");
        let (inputs, candidate, compiled) = sample();
        let v = NewVariant::default_for(&candidate, &compiled);
        let dir = cache.entry_dir(&inputs);
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(cache.root.join("nowhere"), &dir).unwrap();
        assert!(!matches!(cache.lookup(&inputs), Lookup::Hit(_)));
        cache.store(&inputs, &[v], false).unwrap();
        assert!(matches!(cache.lookup(&inputs), Lookup::Hit(_)));
        assert!(
            !std::fs::symlink_metadata(&dir)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        // A link to someone's folder: the link goes, the folder and its file stay.
        let theirs = cache.root.join("theirs");
        std::fs::create_dir_all(&theirs).unwrap();
        std::fs::write(theirs.join("keep.txt"), b"mine").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&theirs, &dir).unwrap();
        cache.store(&inputs, &[v], true).unwrap();
        assert!(matches!(cache.lookup(&inputs), Lookup::Hit(_)));
        assert_eq!(std::fs::read(theirs.join("keep.txt")).unwrap(), b"mine");
        std::fs::remove_dir_all(&cache.root).unwrap();
    }

    /// What an interrupted store leaves (a `.trash-*` folder, an old `.tmp-*` one) goes with the next store; a
    /// young `.tmp-*` folder may be another process's store in progress and stays.
    #[test]
    fn a_store_sweeps_what_an_interrupted_one_left() {
        let cache = temp_cache("leftovers");
        let (inputs, candidate, compiled) = sample();
        let v = NewVariant::default_for(&candidate, &compiled);
        let arch = cache.entry_dir(&inputs).parent().unwrap().to_path_buf();
        let (trash, young, old) = (
            arch.join(".trash-0123456789abcdef-1-2"),
            arch.join(".tmp-0123456789abcdef-1-3"),
            arch.join(".tmp-0123456789abcdef-1-4"),
        );
        for d in [&trash, &young, &old] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("v0.cubin"), b"x").unwrap();
        }
        let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        std::fs::File::open(&old)
            .unwrap()
            .set_modified(two_hours_ago)
            .unwrap();
        cache.store(&inputs, &[v], false).unwrap();
        assert!(!trash.exists() && !old.exists() && young.exists());
        std::fs::remove_dir_all(&cache.root).unwrap();
    }

    #[test]
    fn corrupt_and_truncated_entries_are_detected_and_replaced() {
        let cache = temp_cache("corrupt");
        let (inputs, candidate, compiled) = sample();
        type Damage = (&'static str, fn(&Path));
        let damage: [Damage; 8] = [
            ("flipped cubin byte", |d| {
                let mut b = std::fs::read(d.join("v0.cubin")).unwrap();
                b[3] ^= 1;
                std::fs::write(d.join("v0.cubin"), b).unwrap();
            }),
            ("truncated ptx", |d| {
                let b = std::fs::read(d.join("v0.ptx")).unwrap();
                std::fs::write(d.join("v0.ptx"), &b[..b.len() / 2]).unwrap();
            }),
            ("truncated manifest", |d| {
                let b = std::fs::read(d.join("manifest.bin")).unwrap();
                std::fs::write(d.join("manifest.bin"), &b[..b.len() - 7]).unwrap();
            }),
            ("missing cubin", |d| {
                std::fs::remove_file(d.join("v0.cubin")).unwrap()
            }),
            ("empty manifest", |d| {
                std::fs::write(d.join("manifest.bin"), b"").unwrap()
            }),
            // The format, then a key whose length prefix announces 2^62 bytes: 13 bytes that aborted every
            // reader with a failed allocation before decoding was bounded.
            ("a file record pointing outside the entry", |d| {
                // A copy of the CUBIN one folder up, recorded as `../<name>` with its true length and checksum.
                let mut m = decode(&std::fs::read(d.join("manifest.bin")).unwrap()).unwrap();
                let outside = d.parent().unwrap().join("outside.cubin");
                std::fs::copy(d.join(&m.files[0].name), &outside).unwrap();
                m.files[0].name = "../outside.cubin".into();
                std::fs::write(d.join("manifest.bin"), encode(&m).unwrap()).unwrap();
            }),
            ("a file replaced by a symlink", |d| {
                let m = decode(&std::fs::read(d.join("manifest.bin")).unwrap()).unwrap();
                let name = &m.files[0].name;
                let outside = d.parent().unwrap().join("linked.cubin");
                std::fs::rename(d.join(name), &outside).unwrap();
                std::os::unix::fs::symlink(&outside, d.join(name)).unwrap();
            }),
            ("a manifest announcing a 2^62-byte key", |d| {
                let mut b = vec![FORMAT as u8, 253];
                b.extend_from_slice(&(1u64 << 62).to_le_bytes());
                b.extend_from_slice(&[0, 0, 0]);
                std::fs::write(d.join("manifest.bin"), b).unwrap()
            }),
        ];
        let v = NewVariant::default_for(&candidate, &compiled);
        for (what, f) in damage {
            let entry = cache.store(&inputs, &[v], false).unwrap();
            f(&entry.dir);
            assert!(
                matches!(cache.lookup(&inputs), Lookup::Corrupt { .. }),
                "{what} not detected"
            );
            // Storing again replaces the damaged entry.
            cache.store(&inputs, &[v], false).unwrap();
            assert!(
                matches!(cache.lookup(&inputs), Lookup::Hit(_)),
                "{what} not replaced"
            );
        }
        std::fs::remove_dir_all(&cache.root).unwrap();
    }

    #[test]
    fn an_entry_built_elsewhere_is_adopted_verified_and_replaces_a_damaged_one() {
        let (built, committed) = (temp_cache("adopt-from"), temp_cache("adopt-to"));
        let (inputs, candidate, compiled) = sample();
        let entry = built
            .store(
                &inputs,
                &[NewVariant::default_for(&candidate, &compiled)],
                false,
            )
            .unwrap();
        let adopted = committed.adopt(&entry).unwrap();
        assert_eq!(adopted.dir, committed.entry_dir(&inputs));
        let Lookup::Hit(hit) = committed.lookup(&inputs) else {
            panic!("the adopted entry does not verify")
        };
        assert_eq!(hit.manifest, entry.manifest);
        assert!(hit.file("report.md").is_file());
        // A damaged copy gives way to the good one; a good one stays.
        std::fs::write(hit.file("v0.ptx"), b"damaged").unwrap();
        committed.adopt(&entry).unwrap();
        assert!(matches!(committed.lookup(&inputs), Lookup::Hit(_)));
        // A source entry that does not verify is refused, and leaves nothing behind.
        std::fs::remove_dir_all(&committed.root).unwrap();
        std::fs::write(entry.file("v0.cubin"), b"damaged").unwrap();
        assert!(committed.adopt(&entry).is_err());
        assert!(matches!(committed.lookup(&inputs), Lookup::Miss));
        let arch_dir = committed.entry_dir(&inputs).parent().unwrap().to_path_buf();
        assert_eq!(std::fs::read_dir(arch_dir).unwrap().count(), 0);
        for c in [built, committed] {
            let _ = std::fs::remove_dir_all(&c.root);
        }
    }

    #[test]
    fn a_damaged_tuned_entry_keeps_its_verified_variants_and_says_what_was_lost() {
        let cache = temp_cache("salvage");
        let (inputs, candidate, compiled) = sample();
        // Three kernels: a default and two tuned ones (distinct sources, so distinct files), each with a log.
        let other = |tag: &str| Candidate {
            source: format!("{}\n// {tag}", candidate.source),
            ..candidate.clone()
        };
        let (c1, c2) = (other("tuned 1"), other("tuned 2"));
        let tuning = sample_tuning();
        let log = b"{\"kind\":\"header\"}\n".as_slice();
        let tuned = |c, shape| NewVariant {
            candidate: c,
            compiled: &compiled,
            shape: Some(shape),
            tuning: Some(&tuning),
            log: Some(log),
        };
        let store = || {
            cache
                .store(
                    &inputs,
                    &[
                        NewVariant::default_for(&candidate, &compiled),
                        tuned(&c1, [16, 1024, 1024, 1024]),
                        tuned(&c2, [256, 1024, 1024, 1024]),
                    ],
                    true,
                )
                .unwrap()
        };
        let entry = store();
        assert_eq!(entry.manifest.variants.len(), 3);
        let log_of = |i: usize| {
            entry.manifest.variants[i]
                .tuning
                .as_ref()
                .unwrap()
                .log
                .clone()
        };

        // One search log deleted: every variant stays, the lost log is named, and a repair writes that down.
        std::fs::remove_file(entry.dir.join(log_of(1))).unwrap();
        let Lookup::Salvaged {
            entry: kept, lost, ..
        } = cache.lookup(&inputs)
        else {
            panic!("a lost log made the entry unusable")
        };
        assert_eq!(kept.manifest.variants.len(), 3);
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert!(
            lost[0].contains("search log") && lost[0].contains("16×1024×1024×1024"),
            "{lost:?}"
        );
        cache.repair(&kept).unwrap();
        let Lookup::Hit(hit) = cache.lookup(&inputs) else {
            panic!("the repaired entry does not verify")
        };
        assert_eq!(hit.manifest.variants.len(), 3);
        assert!(
            hit.manifest.variants[1]
                .tuning
                .as_ref()
                .unwrap()
                .log
                .is_empty()
        );
        assert!(
            !hit.manifest.variants[2]
                .tuning
                .as_ref()
                .unwrap()
                .log
                .is_empty()
        );

        // A tuned variant's CUBIN damaged: that variant goes, the default and the other tuned one stay, and the
        // damaged file is removed by the repair.
        let entry = store();
        let stem = entry.manifest.variants[2].stem.clone();
        std::fs::write(entry.dir.join(format!("{stem}.cubin")), b"not elf").unwrap();
        let Lookup::Salvaged {
            entry: kept, lost, ..
        } = cache.lookup(&inputs)
        else {
            panic!("a damaged variant made the entry unusable")
        };
        assert_eq!(kept.manifest.variants.len(), 2);
        assert!(
            lost[0].contains("256×1024×1024×1024") && lost[0].contains(".cubin"),
            "{lost:?}"
        );
        cache.repair(&kept).unwrap();
        assert!(matches!(cache.lookup(&inputs), Lookup::Hit(_)));
        assert!(!entry.dir.join(format!("{stem}.cubin")).exists());

        // Nothing left that verifies: corrupt, as before.
        let entry = store();
        for v in &entry.manifest.variants {
            std::fs::remove_file(entry.dir.join(format!("{}.ptx", v.stem))).ok();
        }
        assert!(matches!(cache.lookup(&inputs), Lookup::Corrupt { .. }));
        std::fs::remove_dir_all(&cache.root).unwrap();
    }

    #[test]
    fn tuned_entries_hold_a_variant_per_bucket_with_their_logs_and_replace_the_default() {
        let cache = temp_cache("tuned");
        let (inputs, candidate, compiled) = sample();
        cache
            .store(
                &inputs,
                &[NewVariant::default_for(&candidate, &compiled)],
                false,
            )
            .unwrap();
        let tuning = sample_tuning();
        let log = b"{\"kind\":\"header\"}\n".as_slice();
        let variant = |shape| NewVariant {
            candidate: &candidate,
            compiled: &compiled,
            shape: Some(shape),
            tuning: Some(&tuning),
            log: Some(log),
        };
        // Without `replace`, the valid default stays.
        let kept = cache
            .store(&inputs, &[variant([16, 1024, 1024, 1024])], false)
            .unwrap();
        assert_eq!(kept.manifest.variants[0].shape, None);
        assert!(!cache.holds_tuned(&inputs));
        let tuned = cache
            .store(
                &inputs,
                &[
                    variant([256, 1024, 1024, 1024]),
                    variant([16, 1024, 1024, 1024]),
                ],
                true,
            )
            .unwrap();
        let Lookup::Hit(hit) = cache.lookup(&inputs) else {
            panic!("the tuned entry does not verify")
        };
        assert!(cache.holds_tuned(&inputs));
        assert_eq!(hit.manifest, tuned.manifest);
        assert_eq!(hit.manifest.variants.len(), 2);
        // Both buckets chose the same kernel: one set of files serves both.
        assert!(hit.manifest.variants.iter().all(|v| v.stem == "v0"));
        assert!(!hit.manifest.files.iter().any(|f| f.name.starts_with("v1.")));
        let t = hit.manifest.variants[1].tuning.as_ref().unwrap();
        assert_eq!(t.log, "search-v1.jsonl");
        assert_eq!(std::fs::read(hit.file(&t.log)).unwrap(), log);
        assert!(report(&hit.manifest, &hit.dir, plain_words).contains("1.20×"));
        // These logs are a bare header, which names no winner (and so no family): the bucket alone says it.
        let text = report(&hit.manifest, &hit.dir, plain_words);
        assert!(text.contains("| 256×1024×1024×1024 |"), "{text}");
        // A stale report is rewritten from the manifest, and the entry still verifies.
        std::fs::write(hit.file("report.md"), "stale").unwrap();
        assert!(refresh_report(&hit, plain_words).unwrap());
        assert!(!refresh_report(&hit, plain_words).unwrap());
        assert!(matches!(cache.lookup(&inputs), Lookup::Hit(_)));
        // An empty ptxas report is said as such: the loaded function's figures for a tuned variant, a dash
        // otherwise, never zeros that read as "no spills".
        let mut silent = hit.manifest.clone();
        silent.variants[0].resources = Default::default();
        silent.variants[0]
            .tuning
            .as_mut()
            .unwrap()
            .measurement
            .registers = 168;
        silent.variants[1].resources = Default::default();
        silent.variants[1].tuning = None;
        let text = report(&silent, &hit.dir, plain_words);
        assert!(
            text.contains("| 168 (loaded) | 0 B local (loaded) |"),
            "{text}"
        );
        assert!(text.contains("| – | – | – |"), "{text}");
        // A missing search log is damage like any other file: detected, though the variants it explained stay.
        std::fs::remove_file(hit.file("search-v0.jsonl")).unwrap();
        assert!(matches!(
            cache.lookup(&inputs),
            Lookup::Salvaged { ref lost, .. } if lost.iter().any(|l| l.contains("search log"))
        ));
        std::fs::remove_dir_all(&cache.root).unwrap();
    }

    #[test]
    fn a_tuned_tensor_variant_is_reported_in_its_programs_dimensions() {
        let cache = temp_cache("tensor-report").with_words(crate::families::tuned_for);
        let spec = optiml_spec::parse("softmax over the last axis").unwrap();
        let sig: syn::ForeignItemFn = syn::parse_str(
            "fn softmax(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);",
        )
        .unwrap();
        let binding = optiml_spec::bind(&spec, &sig.sig).unwrap();
        let inputs = KeyInputs::new(
            &KernelId::new(&spec, &binding),
            &spec.canonical(),
            &binding.canonical(),
            Arch::new(9, 0),
            "test-gen",
        );
        let (_, _, compiled) = sample();
        let candidate = crate::families::default_candidate(&spec, Arch::new(9, 0));
        let tuning = Tuning {
            method: "mcts".into(),
            device: "NVIDIA H200".into(),
            date: "2026-11-30T00:00:00Z".into(),
            measurement: Measurement::default(),
            default_measurement: Measurement::default(),
            evaluations: 3,
            path: Vec::new(),
            log: String::new(),
        };
        let log = |shape: &str| {
            let records = crate::search::SearchRecords {
                header: crate::search::Header {
                    kernel: "softmax".into(),
                    spec: spec.canonical(),
                    arch: "sm_90".into(),
                    device: "NVIDIA H200".into(),
                    shape: shape.into(),
                    method: crate::search::Method::Mcts,
                    seed: None,
                    config: serde_json::Value::Null,
                    started_at: "2026-11-30T00:00:00Z".into(),
                    signals: crate::search::Signals::Derived,
                },
                steps: Vec::new(),
                summary: crate::search::Summary {
                    best_node: 0,
                    best_schedule: serde_json::to_value(
                        <crate::families::tensor::codegen::RowSchedule as crate::search::Tunable>::default_for(
                            Arch::new(9, 0),
                        ),
                    )
                    .unwrap(),
                    best_describe: candidate.schedule.clone(),
                    best_measurement: Measurement::default(),
                    path: Vec::new(),
                    evaluations: 3,
                    wall_s: 1.0,
                },
            };
            records.to_jsonl().unwrap().into_bytes()
        };
        // The label the search logs now, then bare extents as older logs hold them.
        for (logged, said) in [
            ("r=4096 c=393216", "| r=4096, c=393216 |"),
            ("4096x393216", "| 4096x393216 |"),
        ] {
            let bytes = log(logged);
            let variant = NewVariant {
                candidate: &candidate,
                compiled: &compiled,
                shape: None,
                tuning: Some(&tuning),
                log: Some(&bytes),
            };
            let entry = cache.store(&inputs, &[variant], true).unwrap();
            let text = std::fs::read_to_string(entry.file("report.md")).unwrap();
            assert!(text.contains(said), "{text}");
            assert!(
                !text.contains("batch") && !text.contains("default schedule"),
                "{text}"
            );
            assert_eq!(
                report(&entry.manifest, &entry.dir, crate::families::tuned_for),
                text
            );
        }
        std::fs::remove_dir_all(&cache.root).unwrap();
    }

    #[test]
    fn key_depends_on_every_input() {
        let (inputs, _, _) = sample();
        let variants = [
            KeyInputs {
                arch: Arch::new(8, 0),
                ..inputs.clone()
            },
            KeyInputs {
                toolchain: "nvrtc 12.9".into(),
                ..inputs.clone()
            },
            KeyInputs {
                generator: "g2".into(),
                ..inputs.clone()
            },
            KeyInputs {
                kernel_id: "00".into(),
                ..inputs.clone()
            },
        ];
        for v in variants {
            assert_ne!(v.key(), inputs.key(), "{v:?}");
        }
    }
}
