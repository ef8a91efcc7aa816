//! Entries of format 2, which kept every file plainly beside the manifest (`v0.cu`, `v0.ptx`, `v0.cubin`,
//! `search-v0.jsonl`). They are read, verified as they were written, so that a cache committed before packs keeps
//! serving its tuned kernels; `cargo optiml prepare` rewrites them as packed entries ([`super::Cache::upgrade`]).

use super::{Entry, FileRecord, KeyInputs, VARIANT_FILES, VariantRecord, assemble, read_bounded};
use crate::codec;
use optiml_spec::sha256_hex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The format these entries were written in.
pub const FORMAT: u32 = 2;

/// A format-2 `manifest.bin`: today's manifest without its packs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// The entry's key, as format 2 computed it (its inputs with `optiml-cache/2` for the format).
    pub key: String,
    /// The key's inputs.
    pub inputs: KeyInputs,
    /// The kernel's entry point.
    pub entry: String,
    /// The NVRTC options used.
    pub nvrtc_options: Vec<String>,
    /// The variants.
    pub variants: Vec<VariantRecord>,
    /// Every file of the entry, each a plain file of its folder.
    pub files: Vec<FileRecord>,
}

/// The format-2 manifest in `dir`, when there is one that decodes.
pub fn manifest(dir: &Path) -> Result<Manifest, String> {
    let bytes = read_bounded(&dir.join(super::MANIFEST), codec::LIMIT as u64)
        .map_err(|e| format!("manifest.bin unreadable ({e})"))?;
    match codec::decode::<Manifest>(&bytes) {
        Ok((m, used)) if used == bytes.len() && m.format == FORMAT => Ok(m),
        Ok((m, used)) if used == bytes.len() => Err(format!("manifest format {}", m.format)),
        _ => Err("not a format-2 manifest".into()),
    }
}

/// The manifest and files of the format-2 entry for `inputs` in `dir`, every file checked against its length and
/// checksum (any fault fails the whole entry: these are read only to be rewritten).
pub fn read(
    dir: &Path,
    inputs: &KeyInputs,
) -> Result<(Manifest, BTreeMap<String, Vec<u8>>), String> {
    let m = manifest(dir)?;
    if m.inputs != *inputs || m.key != inputs.key_in(FORMAT) {
        return Err("manifest was written for other key inputs".into());
    }
    if m.variants.is_empty() {
        return Err("the manifest lists no variant".into());
    }
    let listed = |name: &str| m.files.iter().any(|f| f.name == name);
    for v in &m.variants {
        let log = v
            .tuning
            .as_ref()
            .map(|t| t.log.clone())
            .filter(|l| !l.is_empty());
        for name in VARIANT_FILES
            .iter()
            .map(|ext| format!("{}.{ext}", v.stem))
            .chain(log)
        {
            if !listed(&name) {
                return Err(format!("variant {} lacks `{name}`", v.stem));
            }
        }
    }
    let mut files = BTreeMap::new();
    for file in &m.files {
        if !super::plain_name(&file.name) {
            return Err(format!(
                "the manifest lists `{}`, not a file of the entry",
                file.name
            ));
        }
        let path = dir.join(&file.name);
        if std::fs::symlink_metadata(&path).is_ok_and(|meta| !meta.is_file()) {
            return Err(format!("{} is not a plain file", file.name));
        }
        let data =
            read_bounded(&path, file.len).map_err(|e| format!("{} unreadable ({e})", file.name))?;
        if data.len() as u64 != file.len || sha256_hex(&data) != file.sha256 {
            return Err(format!("{} does not match its checksum", file.name));
        }
        files.insert(file.name.clone(), data);
    }
    Ok((m, files))
}

/// The format-2 entry for `inputs` in `dir` ([`read`]) as an entry of today's format, packed in memory: its
/// manifest is the one [`super::Cache::upgrade`] writes, its folder still the old one.
pub fn entry(dir: &Path, inputs: &KeyInputs) -> Result<Entry, String> {
    let (m, files) = read(dir, inputs)?;
    let base = super::Manifest {
        format: super::FORMAT,
        key: inputs.key(),
        inputs: m.inputs,
        entry: m.entry,
        nvrtc_options: m.nvrtc_options,
        variants: m.variants,
        files: Vec::new(),
        packs: Vec::new(),
    };
    let (manifest, _) = assemble(base, &files).map_err(|e| format!("does not pack ({e})"))?;
    Ok(Entry {
        dir: dir.to_path_buf(),
        manifest,
        files,
    })
}
