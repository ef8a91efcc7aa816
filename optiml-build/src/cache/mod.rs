//! The kernel cache: `target/optiml/` and the committed `.optiml/`, one layout for both.
//!
//! ```text
//! <root>/
//!   .lock                      held while an entry is renamed into place
//!   sm_90/<key>/               key = sha256(format, kernel id, arch, toolchain, generator)
//!     v0.tar.gz                one variant's files, packed (gzip-compressed tar, `tar xzf` opens it): its
//!                              generated source `v0.cu` (for review), `v0.ptx` (JIT fallback for newer GPUs),
//!                              `v0.cubin` for sm_90 and, for a tuned variant, its search log `search-v0.jsonl`
//!                              (`cargo optiml analyze` reads it); a tuned entry holds one variant per shape
//!                              bucket (buckets that chose the same kernel share its files)
//!     manifest.bin             bincode: key inputs, variants (launch, ptxas report, tuning), every file's and
//!                              pack's length and sha256
//!     report.md                the same in words, for people reviewing a committed cache
//! ```
//!
//! Packed, an entry takes about a fifth of the bytes its plain files did ([`pack`]), and a few files in place of
//! a dozen. An entry is written into a temporary folder beside its final place and renamed into place, so a crash
//! leaves at most a stray `.tmp-*` folder, never half an entry. Loading compares every key input stored in the
//! manifest and every pack's and file's sha256, and keeps the bytes it checked: what is embedded is what was
//! verified. Anything off is a miss (and the entry is replaced), never a wrong or torn kernel. Entries of the
//! previous format ([`legacy`]) are still read, and `cargo optiml prepare` rewrites them.

pub mod legacy;
pub mod merge;
pub mod pack;
mod report;

pub use report::{plain_words, refresh_report, report, report_is_current};

use crate::experts::Candidate;
use crate::fs::{self, FsError};
use crate::measure::Measurement;
use crate::nvrtc::{Compiled, PINNED, Resources};
use optiml_runtime::{Arch, Launch};
use optiml_spec::{KernelId, sha256_hex};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Manifest format; a different number is a miss (format 2, files unpacked, is still read: [`legacy`]).
pub const FORMAT: u32 = 3;

/// The files of a variant, by extension.
const VARIANT_FILES: [&str; 3] = ["cu", "ptx", "cubin"];

/// An entry's manifest file.
const MANIFEST: &str = "manifest.bin";

/// An entry's summary for people.
const REPORT: &str = "report.md";

/// An entry's files by name (`v0.cu`, `v0.cubin`, `search-v0.jsonl`…), unpacked.
pub type Files = BTreeMap<String, Vec<u8>>;

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
    /// [`crate::families::kernel_generator`]: the templates' and the defaults' hashes (and a seed's).
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
        self.key_in(FORMAT)
    }

    /// The key an entry of manifest format `format` has for these inputs.
    fn key_in(&self, format: u32) -> String {
        sha256_hex(
            format!(
                "optiml-cache/{format}\nkernel {}\narch {}\ntoolchain {}\ngenerator {}\n",
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

/// One pack of an entry: the archive on disk and the files it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pack {
    /// The archive (`v0.tar.gz`): its length and checksum as stored.
    pub file: FileRecord,
    /// The names of the files it holds (each in [`Manifest::files`]), in its order.
    pub members: Vec<String>,
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
    /// Every file of the entry and the checksum of its unpacked bytes.
    pub files: Vec<FileRecord>,
    /// The packs that hold the files on disk, each file in one.
    pub packs: Vec<Pack>,
}

/// A verified entry: its manifest, and the bytes of its files as they were checked.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Its folder.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
    files: Files,
}

impl Entry {
    /// The verified bytes of one of the entry's files (`v0.cubin`, `search-v0.jsonl`…): those that were
    /// checksummed, never a second read of a file that may have changed since.
    ///
    /// # Errors
    /// [`FsError`] (not found) when the entry holds no such file.
    pub fn bytes(&self, name: &str) -> Result<&[u8], FsError> {
        self.files
            .get(name)
            .map(Vec::as_slice)
            .ok_or_else(|| FsError {
                op: "read a file of the entry",
                path: self.dir.join(name),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the entry holds no such file",
                ),
            })
    }

    /// Every file of the entry by name, unpacked.
    pub fn files(&self) -> &Files {
        &self.files
    }

    /// The search logs of its tuned variants, by file name.
    pub fn logs(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.manifest
            .variants
            .iter()
            .filter_map(|v| v.tuning.as_ref())
            .filter_map(|t| Some((t.log.as_str(), self.files.get(&t.log)?.as_slice())))
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
    /// Entries handed to [`Cache::merge`] that cannot be merged into one.
    #[error("cannot merge: {0}")]
    Shards(String),
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

    /// Where a format-2 entry for `inputs` lived ([`legacy`]).
    pub(crate) fn legacy_dir(&self, inputs: &KeyInputs) -> PathBuf {
        self.root
            .join(inputs.arch.to_string())
            .join(inputs.key_in(legacy::FORMAT))
    }

    /// Looks up and verifies the entry for `inputs`. Where there is none, an entry of the previous format
    /// ([`legacy`]) serves, verified as it was written and packed in memory: its folder is then not
    /// [`Cache::entry_dir`], and [`Cache::upgrade`] rewrites it.
    pub fn lookup(&self, inputs: &KeyInputs) -> Lookup {
        let dir = self.entry_dir(inputs);
        if !dir.exists() {
            let old = self.legacy_dir(inputs);
            if !old.is_dir() {
                return Lookup::Miss;
            }
            return match legacy::entry(&old, inputs) {
                Ok(entry) => Lookup::Hit(Box::new(entry)),
                Err(reason) => Lookup::Corrupt { dir: old, reason },
            };
        }
        match verify(&dir, inputs) {
            Ok(entry) => Lookup::Hit(Box::new(entry)),
            Err(reason) => match salvage(&dir, inputs) {
                Some((entry, lost)) => Lookup::Salvaged {
                    entry: Box::new(entry),
                    reason,
                    lost,
                },
                None => Lookup::Corrupt { dir, reason },
            },
        }
    }

    /// Whether `entry` (from [`Cache::lookup`]) is of the previous format, which [`Cache::upgrade`] rewrites.
    pub fn is_legacy(&self, entry: &Entry) -> bool {
        entry.dir != self.entry_dir(&entry.manifest.inputs)
    }

    /// Rewrites every entry of the previous format here ([`legacy`]) that verifies as a packed entry under its
    /// current key, and removes the old folder; the number rewritten. One that does not verify is left for
    /// `cargo optiml prepare` to report and remove as unused.
    ///
    /// # Errors
    /// [`CacheError`] when an entry cannot be written or an old folder removed.
    pub fn upgrade(&self) -> Result<usize, CacheError> {
        let mut done = 0;
        for dir in self.entry_dirs() {
            let Ok(old) = legacy::manifest(&dir) else {
                continue;
            };
            if dir != self.legacy_dir(&old.inputs) {
                continue;
            }
            let Lookup::Hit(entry) = self.lookup(&old.inputs) else {
                continue;
            };
            if !self.is_legacy(&entry) {
                // Rewritten already (another process): the old folder is unused.
                self.remove(&dir)?;
                continue;
            }
            self.write(&entry.manifest, &entry.files, false)?;
            self.remove(&dir)?;
            done += 1;
        }
        Ok(done)
    }

    /// Rewrites a salvaged entry ([`Lookup::Salvaged`]) as it now stands: only the files its remaining variants
    /// list, newly packed, swapped in whole (a reader sees the old entry or the new one).
    ///
    /// # Errors
    /// [`CacheError`] when the entry cannot be written.
    pub fn repair(&self, entry: &Entry) -> Result<(), CacheError> {
        self.write(&entry.manifest, &entry.files, true).map(|_| ())
    }

    /// Stores a verified entry of another cache here under the same key, from the bytes it was verified with,
    /// in place of what is here (the build found it there because this cache lacks it, or holds it untuned, or
    /// it is a newer tuning); the entry here.
    ///
    /// # Errors
    /// [`CacheError`] when the entry cannot be written.
    pub fn adopt(&self, entry: &Entry) -> Result<Entry, CacheError> {
        self.write(&entry.manifest, &entry.files, true)
    }

    /// Whether an entry for `inputs` here says it is tuned, from its manifest alone (nothing is checksummed:
    /// [`Cache::lookup`] still verifies an entry before it is used). Lets a reader that already has an untuned
    /// entry skip verifying other caches' untuned copies.
    pub fn holds_tuned(&self, inputs: &KeyInputs) -> bool {
        let tuned = |variants: &[VariantRecord]| variants.iter().any(|v| v.tuning.is_some());
        let current = read_bounded(
            &self.entry_dir(inputs).join(MANIFEST),
            crate::codec::LIMIT as u64,
        )
        .ok()
        .and_then(|bytes| decode(&bytes).ok());
        match current {
            Some(m) => m.key == inputs.key() && tuned(&m.variants),
            None => legacy::manifest(&self.legacy_dir(inputs))
                .is_ok_and(|m| m.key == inputs.key_in(legacy::FORMAT) && tuned(&m.variants)),
        }
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
        let (files, records) = layout(variants.iter().map(|v| VariantParts {
            source: v.candidate.source.as_bytes(),
            ptx: v.compiled.ptx.as_bytes(),
            cubin: &v.compiled.cubin,
            log: v.log,
            record: VariantRecord {
                stem: String::new(),
                launch: v.candidate.launch,
                schedule: v.candidate.schedule.clone(),
                resources: v.compiled.resources,
                nvrtc_log: v.compiled.log.clone(),
                shape: v.shape,
                tuning: v.tuning.cloned(),
            },
        }));
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
            files: Vec::new(),
            packs: Vec::new(),
        };
        self.write(&manifest, &files, replace)
    }

    /// Writes the entry `manifest` describes (its file and pack records are made here) with `files`, at its
    /// key, atomically, as [`Cache::store`] says.
    fn write(
        &self,
        manifest: &Manifest,
        files: &Files,
        replace: bool,
    ) -> Result<Entry, CacheError> {
        let inputs = &manifest.inputs;
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
        let base = Manifest {
            format: FORMAT,
            key: inputs.key(),
            ..manifest.clone()
        };
        let written = (|| {
            fs::create_dir_all(&tmp)?;
            let (manifest, packs) = assemble(base, files).map_err(|source| FsError {
                op: "pack the files of",
                path: dir.clone(),
                source,
            })?;
            for (name, bytes) in &packs {
                fs::write(&tmp.join(name), bytes)?;
            }
            fs::write(
                &tmp.join(REPORT),
                report(&manifest, files, self.words).as_bytes(),
            )?;
            // The manifest is written last: a folder without one is never mistaken for an entry.
            let bytes = encode(&manifest).map_err(|source| CacheError::Encode {
                dir: dir.clone(),
                source,
            })?;
            fs::write(&tmp.join(MANIFEST), &bytes)?;
            Ok::<_, CacheError>(manifest)
        })();
        let manifest = match written {
            Ok(m) => m,
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        let entry = Entry {
            dir: dir.clone(),
            manifest,
            files: files.clone(),
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
            if !replace && let Ok(kept) = verify(&dir, inputs) {
                fs::remove_dir_all(&tmp)?;
                return Ok(kept);
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
            if let Err(e) = swap_in(&tmp, &dir) {
                let _ = fs::rename(&trash, &dir);
                let _ = fs::remove_dir_all(&tmp);
                return Err(e.into());
            }
            // The new entry is in place: what is left to do is tidying, and a folder that will not go is swept
            // by the next store ([`Cache::sweep_leftovers`]).
            let _ = fs::remove_dir_all(&trash);
            return Ok(entry);
        }
        if let Err(e) = fs::rename(&tmp, &dir) {
            let _ = fs::remove_dir_all(&tmp);
            return Err(e.into());
        }
        Ok(entry)
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
                let bytes = read_bounded(&dir.join(MANIFEST), crate::codec::LIMIT as u64).ok()?;
                let theirs = decode(&bytes).ok()?.inputs;
                let same_kernel = theirs.kernel_id == inputs.kernel_id
                    && theirs.arch == inputs.arch
                    && theirs.toolchain == inputs.toolchain
                    && theirs.generator != inputs.generator;
                if !same_kernel {
                    return None;
                }
                verify(&dir, &theirs).ok()
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

/// One variant's bytes and its record (stem and log name left to [`layout`]).
struct VariantParts<'a> {
    source: &'a [u8],
    ptx: &'a [u8],
    cubin: &'a [u8],
    /// The search log, for a tuned variant that has one.
    log: Option<&'a [u8]>,
    record: VariantRecord,
}

/// An entry's files and variant records, in order: variant `i` is stored as `v<i>.cu`, `.ptx`, `.cubin` and its
/// log as `search-v<i>.jsonl`, except that variants of the same kernel (same source and CUBIN) share the first
/// one's files (and its CUBIN in the program). [`Cache::store`] and [`Cache::merge`] both lay entries out so.
fn layout<'a>(variants: impl Iterator<Item = VariantParts<'a>>) -> (Files, Vec<VariantRecord>) {
    let mut files = Files::new();
    let mut records: Vec<VariantRecord> = Vec::new();
    let mut kernels: Vec<(&[u8], &[u8])> = Vec::new();
    for (i, v) in variants.enumerate() {
        let stem = match kernels.iter().position(|&k| k == (v.source, v.cubin)) {
            Some(j) => records[j].stem.clone(),
            None => {
                let stem = format!("v{i}");
                files.insert(format!("{stem}.cu"), v.source.to_vec());
                files.insert(format!("{stem}.ptx"), v.ptx.to_vec());
                files.insert(format!("{stem}.cubin"), v.cubin.to_vec());
                stem
            }
        };
        kernels.push((v.source, v.cubin));
        let tuning = match (v.record.tuning, v.log) {
            (Some(t), Some(log)) => {
                let name = format!("search-v{i}.jsonl");
                files.insert(name.clone(), log.to_vec());
                Some(Tuning { log: name, ..t })
            }
            (t, _) => t,
        };
        records.push(VariantRecord {
            stem,
            tuning,
            ..v.record
        });
    }
    (files, records)
}

/// The pack a file is stored in: a variant's files and its search log go in the variant's pack (`v1.cu`,
/// `search-v1.jsonl` → `v1.tar.gz`), so a damaged pack costs one variant, as a damaged file did.
pub fn pack_of(name: &str) -> String {
    let stem = name.strip_prefix("search-").unwrap_or(name);
    format!("{}.tar.gz", stem.split('.').next().unwrap_or(stem))
}

/// Whether `name` is a plain file name inside an entry's folder: `../x` or an absolute path would read (and
/// report the size of) a file elsewhere.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', ':'])
        && Path::new(name).components().count() == 1
}

/// The bytes of the plain file at `path` when it holds at most `most`: a damaged length cannot make a reader
/// take in a file of any size.
fn read_bounded(path: &Path, most: u64) -> Result<Vec<u8>, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a plain file".into());
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(most.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > most {
        return Err(format!("longer than the {most} bytes expected"));
    }
    Ok(bytes)
}

/// `base` with the records of `files` and of the packs that hold them, and the packs' bytes by file name.
fn assemble(base: Manifest, files: &Files) -> std::io::Result<(Manifest, pack::Named)> {
    let mut grouped: BTreeMap<String, Vec<(&str, &[u8])>> = BTreeMap::new();
    for (name, bytes) in files {
        grouped
            .entry(pack_of(name))
            .or_default()
            .push((name.as_str(), bytes.as_slice()));
    }
    let mut packs = Vec::new();
    let mut bytes_of = Vec::new();
    for (name, members) in grouped {
        let bytes = pack::write(&members)?;
        packs.push(Pack {
            file: FileRecord {
                name: name.clone(),
                len: bytes.len() as u64,
                sha256: sha256_hex(&bytes),
            },
            members: members.iter().map(|(n, _)| n.to_string()).collect(),
        });
        bytes_of.push((name, bytes));
    }
    let records = files
        .iter()
        .map(|(name, bytes)| FileRecord {
            name: name.clone(),
            len: bytes.len() as u64,
            sha256: sha256_hex(bytes),
        })
        .collect();
    Ok((
        Manifest {
            files: records,
            packs,
            ..base
        },
        bytes_of,
    ))
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

/// The manifest in `dir`, decoded (read with a bound, so a damaged one costs an error, not memory), with its
/// format and key checked against `inputs`.
fn manifest_for(dir: &Path, inputs: &KeyInputs) -> Result<Manifest, String> {
    let bytes = read_bounded(&dir.join(MANIFEST), crate::codec::LIMIT as u64)
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
    Ok(manifest)
}

/// The files a variant needs: its source, PTX and CUBIN, and its search log where it has one.
fn needed(v: &VariantRecord) -> impl Iterator<Item = String> + '_ {
    VARIANT_FILES
        .iter()
        .map(|ext| format!("{}.{ext}", v.stem))
        .chain(
            v.tuning
                .as_ref()
                .filter(|t| !t.log.is_empty())
                .map(|t| t.log.clone()),
        )
}

/// Unpacks every pack of `manifest` in `dir`: each file's bytes when its pack opens and they match the file's
/// record, else why not. With `strict`, each pack must also match its own record and hold exactly its members.
fn unpack(
    dir: &Path,
    manifest: &Manifest,
    strict: bool,
) -> BTreeMap<String, Result<Vec<u8>, String>> {
    let record = |name: &str| manifest.files.iter().find(|f| f.name == name);
    let mut out = BTreeMap::new();
    for pack in &manifest.packs {
        let opened = (|| {
            if !plain_name(&pack.file.name) {
                return Err(format!(
                    "the manifest lists `{}`, not a file of the entry",
                    pack.file.name
                ));
            }
            let most = if strict {
                pack.file.len
            } else {
                pack::MAX_UNPACKED
            };
            let bytes = read_bounded(&dir.join(&pack.file.name), most)
                .map_err(|e| format!("{} unreadable ({e})", pack.file.name))?;
            if strict
                && (bytes.len() as u64 != pack.file.len || sha256_hex(&bytes) != pack.file.sha256)
            {
                return Err(format!("{} does not match its checksum", pack.file.name));
            }
            let lens = pack.members.iter().filter_map(|n| record(n)).map(|f| f.len);
            let members = pack::read(
                &bytes,
                |n| {
                    pack.members
                        .iter()
                        .any(|m| m == n)
                        .then(|| record(n).map_or(0, |f| f.len))
                },
                pack::unpacked_bound(lens),
            )
            .map_err(|e| format!("{} {e}", pack.file.name))?;
            if strict && members.len() != pack.members.len() {
                return Err(format!("{} lacks some of its files", pack.file.name));
            }
            Ok(members)
        })();
        match opened {
            Ok(members) => {
                for (name, bytes) in members {
                    let checked = match record(&name) {
                        Some(f)
                            if bytes.len() as u64 == f.len && sha256_hex(&bytes) == f.sha256 =>
                        {
                            Ok(bytes)
                        }
                        Some(_) => Err(format!("{name} does not match its checksum")),
                        None => Err(format!("{name} is not listed")),
                    };
                    out.insert(name, checked);
                }
            }
            Err(why) => {
                for name in &pack.members {
                    out.insert(name.clone(), Err(why.clone()));
                }
            }
        }
    }
    out
}

/// Reads and checks an entry: manifest format, every key input, every pack's and file's length and sha256, every
/// file a variant needs present, and nothing unlisted.
fn verify(dir: &Path, inputs: &KeyInputs) -> Result<Entry, String> {
    let manifest = manifest_for(dir, inputs)?;
    // Every file a variant needs must be listed (and so checksummed below).
    let listed = |name: &str| manifest.files.iter().any(|f| f.name == name);
    for v in &manifest.variants {
        for name in needed(v) {
            if !listed(&name) {
                return Err(format!("variant {} lacks `{name}`", v.stem));
            }
        }
    }
    let mut files = Files::new();
    for (name, bytes) in unpack(dir, &manifest, true) {
        files.insert(name, bytes?);
    }
    if let Some(f) = manifest.files.iter().find(|f| !files.contains_key(&f.name)) {
        return Err(format!("{} is in no pack", f.name));
    }
    Ok(Entry {
        dir: dir.to_path_buf(),
        manifest,
        files,
    })
}

/// What can be kept of an entry that failed [`verify`]: when its manifest decodes and names these key inputs, the
/// variants whose CUDA source, PTX and CUBIN all verify (a tuned one keeps its measurement even when its search
/// log is lost), and a line for each variant or log lost. `None` when nothing verifies.
fn salvage(dir: &Path, inputs: &KeyInputs) -> Option<(Entry, Vec<String>)> {
    let manifest = manifest_for(dir, inputs).ok()?;
    let unpacked = unpack(dir, &manifest, false);
    let intact = |name: &str| -> Result<Vec<u8>, String> {
        unpacked
            .get(name)
            .cloned()
            .unwrap_or_else(|| Err(format!("`{name}` is in no pack")))
    };
    let (mut variants, mut files, mut lost) = (Vec::new(), Files::new(), Vec::new());
    for v in &manifest.variants {
        let what = match v.shape {
            Some(s) => format!(
                "variant {} (tuned for {})",
                v.stem,
                s.map(|d| d.to_string()).join("×")
            ),
            None => format!("variant {} (the default)", v.stem),
        };
        let code: Result<Vec<(String, Vec<u8>)>, String> = VARIANT_FILES
            .iter()
            .map(|ext| {
                let name = format!("{}.{ext}", v.stem);
                intact(&name).map(|b| (name, b))
            })
            .collect();
        match code {
            Ok(code) => files.extend(code),
            Err(why) => {
                lost.push(format!("{what}: {why}"));
                continue;
            }
        }
        let mut v = v.clone();
        if let Some(t) = v.tuning.as_mut().filter(|t| !t.log.is_empty()) {
            match intact(&t.log) {
                Ok(bytes) => {
                    files.insert(t.log.clone(), bytes);
                }
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
    // The records of what is kept; the packs are made anew when the entry is rewritten.
    let records = manifest
        .files
        .iter()
        .filter(|f| files.contains_key(&f.name))
        .cloned()
        .collect();
    Some((
        Entry {
            dir: dir.to_path_buf(),
            manifest: Manifest {
                variants,
                files: records,
                ..manifest
            },
            files,
        },
        lost,
    ))
}

/// The entry in `dir`, verified against the key inputs its own manifest names (of either format): for readers
/// that find entries by walking folders, as `cargo optiml analyze` finds search logs.
///
/// # Errors
/// Why the folder is not a verified entry.
pub fn open(dir: &Path) -> Result<Entry, String> {
    let bytes = read_bounded(&dir.join(MANIFEST), crate::codec::LIMIT as u64)
        .map_err(|e| format!("manifest.bin unreadable ({e})"))?;
    match decode(&bytes) {
        Ok(m) => verify(dir, &m.inputs),
        Err(why) => {
            let old = legacy::manifest(dir).map_err(|_| why)?;
            legacy::entry(dir, &old.inputs)
        }
    }
}
/// Renames a written entry into the place of one moved aside. A test may make it fail, as a full disk or a
/// concurrent store would, to see the old entry come back.
fn swap_in(tmp: &Path, dir: &Path) -> Result<(), FsError> {
    #[cfg(test)]
    if tests::FAIL_SWAP.with(std::cell::Cell::get) {
        return Err(FsError {
            op: "rename into place",
            path: dir.to_path_buf(),
            source: std::io::Error::other("injected by a test"),
        });
    }
    fs::rename(tmp, dir)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> (KeyInputs, Candidate, Compiled) {
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
    pub(crate) fn sample_tuning() -> Tuning {
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

    pub(crate) fn temp_cache(name: &str) -> Cache {
        let root =
            std::env::temp_dir().join(format!("optiml-cache-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        Cache::new(root)
    }

    /// Rewrites the pack `name` of the entry in `dir` with its members edited by `edit`, and records the new pack
    /// in the manifest (length and checksum), as someone editing an entry by hand would.
    fn repack(dir: &Path, name: &str, edit: impl FnOnce(&mut pack::Named)) {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        let mut members = pack::read(&bytes, |_| Some(1 << 20), 1 << 24).unwrap();
        edit(&mut members);
        let refs: Vec<(&str, &[u8])> = members
            .iter()
            .map(|(n, b)| (n.as_str(), b.as_slice()))
            .collect();
        let bytes = pack::write(&refs).unwrap();
        std::fs::write(dir.join(name), &bytes).unwrap();
        let mut m = decode(&std::fs::read(dir.join(MANIFEST)).unwrap()).unwrap();
        let pack = m.packs.iter_mut().find(|p| p.file.name == name).unwrap();
        pack.file.len = bytes.len() as u64;
        pack.file.sha256 = sha256_hex(&bytes);
        std::fs::write(dir.join(MANIFEST), encode(&m).unwrap()).unwrap();
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
        assert_eq!(hit.bytes("v0.cubin").unwrap(), compiled.cubin);
        // One pack, the manifest and the report: nothing else.
        let mut names: Vec<String> = fs::read_dir(&hit.dir)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["manifest.bin", "report.md", "v0.tar.gz"]);
        // The same variants give the same bytes in another cache: an unchanged entry is one blob in git.
        let again = temp_cache("round-trip-again");
        let copy = again
            .store(
                &inputs,
                &[NewVariant::default_for(&candidate, &compiled)],
                false,
            )
            .unwrap();
        for name in &names {
            assert_eq!(
                std::fs::read(hit.dir.join(name)).unwrap(),
                std::fs::read(copy.dir.join(name)).unwrap(),
                "{name} differs"
            );
        }
        std::fs::remove_dir_all(&again.root).unwrap();
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

    thread_local! {
        /// Makes [`super::swap_in`] fail on this thread.
        pub(super) static FAIL_SWAP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// A store whose new entry cannot be renamed into place puts the old entry back, as it was, and leaves
    /// neither its moved-aside copy nor the new one behind.
    #[test]
    fn a_failed_swap_puts_the_old_entry_back() {
        let cache = temp_cache("failed-swap");
        let (inputs, candidate, compiled) = sample();
        let v = NewVariant::default_for(&candidate, &compiled);
        cache
            .store(&inputs, std::slice::from_ref(&v), false)
            .unwrap();
        let dir = cache.entry_dir(&inputs);
        let before = std::fs::read(dir.join("manifest.bin")).unwrap();
        FAIL_SWAP.with(|f| f.set(true));
        let failed = cache.store(&inputs, &[v], true);
        FAIL_SWAP.with(|f| f.set(false));
        assert!(failed.is_err());
        assert!(matches!(cache.lookup(&inputs), Lookup::Hit(_)));
        assert_eq!(std::fs::read(dir.join("manifest.bin")).unwrap(), before);
        let arch = dir.parent().unwrap();
        let left: Vec<String> = std::fs::read_dir(arch)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".trash-") || n.starts_with(".tmp-"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
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
        let damage: [Damage; 10] = [
            ("flipped pack byte", |d| {
                let mut b = std::fs::read(d.join("v0.tar.gz")).unwrap();
                let mid = b.len() / 2;
                b[mid] ^= 1;
                std::fs::write(d.join("v0.tar.gz"), b).unwrap();
            }),
            ("truncated pack", |d| {
                let b = std::fs::read(d.join("v0.tar.gz")).unwrap();
                std::fs::write(d.join("v0.tar.gz"), &b[..b.len() / 2]).unwrap();
            }),
            ("truncated manifest", |d| {
                let b = std::fs::read(d.join("manifest.bin")).unwrap();
                std::fs::write(d.join("manifest.bin"), &b[..b.len() - 7]).unwrap();
            }),
            ("missing pack", |d| {
                std::fs::remove_file(d.join("v0.tar.gz")).unwrap()
            }),
            ("empty manifest", |d| {
                std::fs::write(d.join("manifest.bin"), b"").unwrap()
            }),
            ("a pack record pointing outside the entry", |d| {
                // A copy of the pack one folder up, recorded as `../<name>` with its true length and checksum.
                let mut m = decode(&std::fs::read(d.join("manifest.bin")).unwrap()).unwrap();
                let outside = d.parent().unwrap().join("outside.tar.gz");
                std::fs::copy(d.join(&m.packs[0].file.name), &outside).unwrap();
                m.packs[0].file.name = "../outside.tar.gz".into();
                std::fs::write(d.join("manifest.bin"), encode(&m).unwrap()).unwrap();
            }),
            ("a pack replaced by a symlink", |d| {
                let outside = d.parent().unwrap().join("linked.tar.gz");
                std::fs::rename(d.join("v0.tar.gz"), &outside).unwrap();
                std::os::unix::fs::symlink(&outside, d.join("v0.tar.gz")).unwrap();
            }),
            // The format, then a key whose length prefix announces 2^62 bytes: 13 bytes that aborted every
            // reader with a failed allocation before decoding was bounded.
            ("a manifest announcing a 2^62-byte key", |d| {
                let mut b = vec![FORMAT as u8, 253];
                b.extend_from_slice(&(1u64 << 62).to_le_bytes());
                b.extend_from_slice(&[0, 0, 0]);
                std::fs::write(d.join("manifest.bin"), b).unwrap()
            }),
            // Packs edited with their records recomputed: a member the manifest does not list, and another
            // kernel's CUBIN in place of this one's.
            ("a pack holding an unlisted file", |d| {
                repack(d, "v0.tar.gz", |m| {
                    m.push(("v0.extra".into(), b"x".to_vec()))
                });
            }),
            ("a pack holding other bytes", |d| {
                repack(d, "v0.tar.gz", |m| {
                    for (name, bytes) in m.iter_mut() {
                        if name == "v0.cubin" {
                            bytes[4] ^= 1;
                        }
                    }
                });
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
        assert!(hit.dir.join(REPORT).is_file());
        // A damaged copy gives way to the good one; a good one stays.
        std::fs::write(hit.dir.join("v0.tar.gz"), b"damaged").unwrap();
        committed.adopt(&entry).unwrap();
        assert!(matches!(committed.lookup(&inputs), Lookup::Hit(_)));
        // What is adopted is the bytes the source entry was verified with: damage to its folder since then does
        // not travel.
        std::fs::remove_dir_all(&committed.root).unwrap();
        std::fs::write(entry.dir.join("v0.tar.gz"), b"damaged").unwrap();
        committed.adopt(&entry).unwrap();
        let Lookup::Hit(hit) = committed.lookup(&inputs) else {
            panic!("the adopted entry does not verify")
        };
        assert_eq!(hit.bytes("v0.cubin").unwrap(), compiled.cubin);
        let arch_dir = committed.entry_dir(&inputs).parent().unwrap().to_path_buf();
        assert_eq!(std::fs::read_dir(arch_dir).unwrap().count(), 1);
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

        // One search log taken out of its pack: every variant stays, the lost log is named, and a repair writes
        // that down.
        let lost_log = log_of(1);
        repack(&entry.dir, &pack_of(&lost_log), |m| {
            m.retain(|(n, _)| *n != lost_log)
        });
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
        // damaged pack is removed by the repair.
        let entry = store();
        let stem = entry.manifest.variants[2].stem.clone();
        let cubin = format!("{stem}.cubin");
        repack(&entry.dir, &pack_of(&cubin), |m| {
            for (name, bytes) in m.iter_mut() {
                if *name == cubin {
                    *bytes = b"not elf".to_vec();
                }
            }
        });
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
        assert!(!entry.dir.join(pack_of(&cubin)).exists());

        // Nothing left that verifies: corrupt, as before.
        let entry = store();
        for pack in &entry.manifest.packs {
            std::fs::remove_file(entry.dir.join(&pack.file.name)).unwrap();
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
        assert_eq!(hit.bytes(&t.log).unwrap(), log);
        // One pack holds the shared files and the first log, another the second log.
        let packs: Vec<(&str, Vec<&str>)> = hit
            .manifest
            .packs
            .iter()
            .map(|p| {
                (
                    p.file.name.as_str(),
                    p.members.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            packs,
            [
                (
                    "v0.tar.gz",
                    vec!["search-v0.jsonl", "v0.cu", "v0.cubin", "v0.ptx"]
                ),
                ("v1.tar.gz", vec!["search-v1.jsonl"]),
            ]
        );
        // A reviewer reads what each variant is: its spec, schedule, measurement, GPU and date.
        let text = report(&hit.manifest, hit.files(), plain_words);
        for said in [
            "1.20×",
            "tuned by mcts on NVIDIA H200 (2026-11-30T00:00:00Z)",
            "| spec |",
            "| schedule |",
        ] {
            assert!(text.contains(said), "{said}: {text}");
        }
        // These logs are a bare header, which names no winner (and so no family): the bucket alone says it.
        let text = report(&hit.manifest, hit.files(), plain_words);
        assert!(
            text.contains("Log: `search-v1.jsonl` in `v1.tar.gz`"),
            "{text}"
        );
        assert!(text.contains("| 256×1024×1024×1024 |"), "{text}");
        // A stale report is rewritten from the manifest, and the entry still verifies.
        std::fs::write(hit.dir.join(REPORT), "stale").unwrap();
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
        let text = report(&silent, hit.files(), plain_words);
        assert!(
            text.contains("| 168 (loaded) | 0 B local (loaded) |"),
            "{text}"
        );
        assert!(text.contains("| – | – | – |"), "{text}");
        // A missing search log is damage like any other file: detected, though the variants it explained stay.
        repack(&hit.dir, "v0.tar.gz", |m| {
            m.retain(|(n, _)| n != "search-v0.jsonl")
        });
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
            crate::search::SearchRecords {
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
            }
        };
        // Stores the variant with `records` as its log; the entry and its report.
        let store = |records: &crate::search::SearchRecords| {
            let bytes = records.to_jsonl().unwrap().into_bytes();
            let variant = NewVariant {
                candidate: &candidate,
                compiled: &compiled,
                shape: None,
                tuning: Some(&tuning),
                log: Some(&bytes),
            };
            let entry = cache.store(&inputs, &[variant], true).unwrap();
            let text = std::fs::read_to_string(entry.dir.join(REPORT)).unwrap();
            (entry, text)
        };
        // The label the search logs now, then bare extents as older logs hold them.
        for (logged, said) in [
            ("r=4096 c=393216", "| r=4096, c=393216 |"),
            ("4096x393216", "| 4096x393216 |"),
        ] {
            let (entry, text) = store(&log(logged));
            assert!(text.contains(said), "{text}");
            assert!(
                !text.contains("batch") && !text.contains("default schedule"),
                "{text}"
            );
            assert_eq!(
                report(&entry.manifest, entry.files(), crate::families::tuned_for),
                text
            );
        }
        // A seed measured beside the search is reported, kept or not.
        let mut seeded = log("r=4096 c=393216");
        let root = crate::experts::Root {
            name: "seed kernels/rows.cu:rows".into(),
            schedule: serde_json::json!({"seed": {}}),
            candidate: candidate.clone(),
        };
        seeded.add_root(
            &root,
            &crate::search::Outcome::Measured(Measurement {
                time_ms: 0.29,
                ..Measurement::default()
            }),
            1.0,
            false,
        );
        let (_, text) = store(&seeded);
        assert!(
            text.contains("Beside the search: seed kernels/rows.cu:rows (0.2900 ms)"),
            "{text}"
        );
        std::fs::remove_dir_all(&cache.root).unwrap();
    }

    /// A tuned entry of the previous format (plain files beside a format-2 manifest), as a cache committed before
    /// packs holds it: it serves, verified, until `prepare` rewrites it packed under its current key.
    #[test]
    fn an_entry_of_the_previous_format_serves_and_is_upgraded() {
        let cache = temp_cache("legacy");
        let (inputs, candidate, compiled) = sample();
        let log = b"{\"kind\":\"header\"}\n";
        let plain: [(&str, &[u8]); 4] = [
            ("v0.cu", candidate.source.as_bytes()),
            ("v0.ptx", compiled.ptx.as_bytes()),
            ("v0.cubin", &compiled.cubin),
            ("search-v0.jsonl", log),
        ];
        let old = cache.legacy_dir(&inputs);
        std::fs::create_dir_all(&old).unwrap();
        for (name, bytes) in plain {
            std::fs::write(old.join(name), bytes).unwrap();
        }
        let manifest = legacy::Manifest {
            format: legacy::FORMAT,
            key: inputs.key_in(legacy::FORMAT),
            inputs: inputs.clone(),
            entry: candidate.entry.to_string(),
            nvrtc_options: compiled.options.clone(),
            variants: vec![VariantRecord {
                stem: "v0".into(),
                launch: candidate.launch,
                schedule: candidate.schedule.clone(),
                resources: compiled.resources,
                nvrtc_log: compiled.log.clone(),
                shape: Some([16, 1024, 1024, 1024]),
                tuning: Some(Tuning {
                    log: "search-v0.jsonl".into(),
                    ..sample_tuning()
                }),
            }],
            files: plain
                .iter()
                .map(|(name, bytes)| FileRecord {
                    name: name.to_string(),
                    len: bytes.len() as u64,
                    sha256: sha256_hex(bytes),
                })
                .collect(),
        };
        std::fs::write(old.join(MANIFEST), crate::codec::encode(&manifest).unwrap()).unwrap();

        assert!(cache.holds_tuned(&inputs));
        let Lookup::Hit(hit) = cache.lookup(&inputs) else {
            panic!("an entry of the previous format does not serve")
        };
        assert!(cache.is_legacy(&hit));
        assert_eq!(hit.bytes("v0.cubin").unwrap(), compiled.cubin);
        assert_eq!(
            hit.logs().collect::<Vec<_>>(),
            [("search-v0.jsonl", log.as_slice())]
        );
        assert_eq!(open(&old).unwrap().manifest, hit.manifest);

        // Damaged, it is corrupt like any entry, and is not rewritten.
        std::fs::write(old.join("v0.cubin"), b"damaged!").unwrap();
        assert!(matches!(cache.lookup(&inputs), Lookup::Corrupt { .. }));
        assert_eq!(cache.upgrade().unwrap(), 0);
        std::fs::write(old.join("v0.cubin"), &compiled.cubin).unwrap();

        assert_eq!(cache.upgrade().unwrap(), 1);
        assert!(!old.exists());
        let Lookup::Hit(new) = cache.lookup(&inputs) else {
            panic!("the rewritten entry does not verify")
        };
        assert!(!cache.is_legacy(&new));
        assert_eq!(new.manifest, hit.manifest);
        assert_eq!(new.files(), hit.files());
        assert!(cache.holds_tuned(&inputs));
        assert_eq!(cache.upgrade().unwrap(), 0);
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
