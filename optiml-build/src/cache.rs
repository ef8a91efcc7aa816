//! The kernel cache: `target/optiml/` and the committed `.optiml/`, one layout for both.
//!
//! ```text
//! <root>/
//!   .lock                      held while an entry is renamed into place
//!   sm_90/<key>/               key = sha256(format, kernel id, arch, toolchain, generator)
//!     kernel.cu                the generated source (for review and debugging)
//!     kernel.ptx               PTX for sm_90 (JIT fallback for newer GPUs)
//!     kernel.cubin             CUBIN for sm_90
//!     manifest.bin             bincode: key inputs, launch parameters, ptxas report, checksums
//!     report.md                the same, for people reviewing a committed cache
//! ```
//!
//! An entry is written into a temporary folder beside its final place and renamed into place, so a crash leaves
//! at most a stray `.tmp-*` folder, never half an entry. Loading compares every key input stored in the manifest
//! and every file's sha256; anything off is a miss (and the entry is replaced), never a wrong or torn kernel.

use crate::experts::Candidate;
use crate::fs::{self, FsError};
use crate::nvrtc::{Compiled, PINNED, Resources};
use optiml_runtime::{Arch, Launch};
use optiml_spec::{KernelId, sha256_hex};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Manifest format; a different number is a miss.
pub const FORMAT: u32 = 1;

const FILES: [&str; 3] = ["kernel.cu", "kernel.ptx", "kernel.cubin"];

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
    /// Launch parameters.
    pub launch: Launch,
    /// The schedule, described.
    pub schedule: String,
    /// ptxas' resource report.
    pub resources: Resources,
    /// The NVRTC options used.
    pub nvrtc_options: Vec<String>,
    /// NVRTC's log.
    pub nvrtc_log: String,
    /// The artifact files and their checksums.
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
    /// The CUBIN's path.
    pub fn cubin(&self) -> PathBuf {
        self.dir.join("kernel.cubin")
    }

    /// The PTX's path.
    pub fn ptx(&self) -> PathBuf {
        self.dir.join("kernel.ptx")
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

/// A cache root folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cache {
    /// The folder.
    pub root: PathBuf,
}

impl Cache {
    /// A cache at `root` (created on first store).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Cache { root: root.into() }
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
            Err(reason) => Lookup::Corrupt { dir, reason },
        }
    }

    /// Writes `candidate` compiled as `compiled` under `inputs`, atomically; if another process stored a valid
    /// entry first, that one is kept.
    ///
    /// # Errors
    /// [`CacheError`] when the folder cannot be written.
    pub fn store(
        &self,
        inputs: &KeyInputs,
        candidate: &Candidate,
        compiled: &Compiled,
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
        let contents: [&[u8]; 3] = [
            candidate.source.as_bytes(),
            compiled.ptx.as_bytes(),
            &compiled.cubin,
        ];
        let written = (|| {
            fs::create_dir_all(&tmp)?;
            let mut files = Vec::new();
            for (name, bytes) in FILES.iter().zip(contents) {
                fs::write(&tmp.join(name), bytes)?;
                files.push(FileRecord {
                    name: name.to_string(),
                    len: bytes.len() as u64,
                    sha256: sha256_hex(bytes),
                });
            }
            let manifest = Manifest {
                format: FORMAT,
                key: inputs.key(),
                inputs: inputs.clone(),
                entry: candidate.entry.to_string(),
                launch: candidate.launch,
                schedule: candidate.schedule.clone(),
                resources: compiled.resources,
                nvrtc_options: compiled.options.clone(),
                nvrtc_log: compiled.log.clone(),
                files,
            };
            fs::write(&tmp.join("report.md"), report(&manifest).as_bytes())?;
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
        let _lock = self.lock()?;
        if dir.exists() {
            if verify(&dir, inputs).is_ok() {
                fs::remove_dir_all(&tmp)?;
                return self.lookup_hit(inputs);
            }
            // Move the bad entry aside first: renaming onto a non-empty folder fails, and removing it in place
            // could leave it half-deleted for a concurrent reader.
            let trash = parent.join(format!(
                ".trash-{}-{}-{nanos}",
                &inputs.key()[..16],
                std::process::id()
            ));
            fs::rename(&dir, &trash)?;
            fs::remove_dir_all(&trash)?;
        }
        fs::rename(&tmp, &dir)?;
        Ok(Entry { dir, manifest })
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
            if !is_arch || !arch.is_dir() {
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
    bincode::serde::encode_to_vec(m, bincode::config::standard())
}

fn decode(bytes: &[u8]) -> Result<Manifest, String> {
    match bincode::serde::decode_from_slice::<Manifest, _>(bytes, bincode::config::standard()) {
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
    let names: Vec<&str> = manifest.files.iter().map(|f| f.name.as_str()).collect();
    if names != FILES {
        return Err(format!("manifest lists {names:?}"));
    }
    for file in &manifest.files {
        let data = std::fs::read(dir.join(&file.name))
            .map_err(|e| format!("{} unreadable ({e})", file.name))?;
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

/// The human-readable summary written beside the manifest.
pub fn report(m: &Manifest) -> String {
    let r = &m.resources;
    let mut s = format!(
        "# optiml kernel `{}`\n\n| | |\n|---|---|\n| spec | `{}` |\n| binding | `{}` |\n| arch | {} |\n| toolchain | {} |\n\
         | generator | {} |\n| entry | `{}` |\n| schedule | {} |\n| launch | `{:?}` |\n\
         | registers | {} |\n| spills (stores/loads) | {} / {} bytes |\n| stack frame | {} bytes |\n| static shared memory | {} bytes |\n\n\
         Selected: the family's default schedule (no search has run on this entry).\n\n## Files\n\n",
        m.key,
        m.inputs.spec,
        m.inputs.binding,
        m.inputs.arch,
        m.inputs.toolchain,
        m.inputs.generator,
        m.entry,
        m.schedule,
        m.launch,
        r.registers,
        r.spill_stores,
        r.spill_loads,
        r.stack_frame,
        r.shared_bytes
    );
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
        let candidate = crate::experts::default_candidate(&spec, Arch::new(9, 0));
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
        let stored = cache.store(&inputs, &candidate, &compiled).unwrap();
        let Lookup::Hit(hit) = cache.lookup(&inputs) else {
            panic!("miss after store")
        };
        assert_eq!(hit.manifest, stored.manifest);
        assert_eq!(std::fs::read(hit.cubin()).unwrap(), compiled.cubin);
        assert_eq!(hit.manifest.launch, candidate.launch);
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

    #[test]
    fn corrupt_and_truncated_entries_are_detected_and_replaced() {
        let cache = temp_cache("corrupt");
        let (inputs, candidate, compiled) = sample();
        type Damage = (&'static str, fn(&Path));
        let damage: [Damage; 5] = [
            ("flipped cubin byte", |d| {
                let mut b = std::fs::read(d.join("kernel.cubin")).unwrap();
                b[3] ^= 1;
                std::fs::write(d.join("kernel.cubin"), b).unwrap();
            }),
            ("truncated ptx", |d| {
                let b = std::fs::read(d.join("kernel.ptx")).unwrap();
                std::fs::write(d.join("kernel.ptx"), &b[..b.len() / 2]).unwrap();
            }),
            ("truncated manifest", |d| {
                let b = std::fs::read(d.join("manifest.bin")).unwrap();
                std::fs::write(d.join("manifest.bin"), &b[..b.len() - 7]).unwrap();
            }),
            ("missing cubin", |d| {
                std::fs::remove_file(d.join("kernel.cubin")).unwrap()
            }),
            ("empty manifest", |d| {
                std::fs::write(d.join("manifest.bin"), b"").unwrap()
            }),
        ];
        for (what, f) in damage {
            let entry = cache.store(&inputs, &candidate, &compiled).unwrap();
            f(&entry.dir);
            assert!(
                matches!(cache.lookup(&inputs), Lookup::Corrupt { .. }),
                "{what} not detected"
            );
            // Storing again replaces the damaged entry.
            cache.store(&inputs, &candidate, &compiled).unwrap();
            assert!(
                matches!(cache.lookup(&inputs), Lookup::Hit(_)),
                "{what} not replaced"
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
