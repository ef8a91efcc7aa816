//! Tuning spread over hosts by a scheduler that starts n copies of one command (`cargo optiml tune --shard
//! i/n`), and `cargo optiml merge`, which folds the shards' folders into the committed cache. Shards share
//! nothing but their output folders: each writes its own folder, with a record of the GPU it ran on.

use super::{Place, root_and_cache};
use crate::cache::{self, Cache, merge::Merged};
use clap::Args;
use optiml_runtime::Arch;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The file a shard's folder holds beside its entries.
pub const RECORD: &str = "shard.json";

/// One share of a tune: the `index`-th (from 1) of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Which share, from 1.
    pub index: usize,
    /// How many shares.
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("`{text}` is not a share like 1/4 (i/n with 1 <= i <= n)");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// This share of `jobs` (every shard's, named the same on every host): the jobs in name order are dealt
    /// out in turn, so the shares partition them and differ in size by at most one job, whatever order a host
    /// found them in.
    pub fn share(&self, jobs: &[String]) -> BTreeSet<String> {
        let sorted: BTreeSet<&String> = jobs.iter().collect();
        sorted
            .into_iter()
            .enumerate()
            .filter(|(p, _)| p % self.count == self.index - 1)
            .map(|(_, j)| j.clone())
            .collect()
    }

    /// The folder a shard writes by default: `<root>/target/optiml/shard-<i>-of-<n>`.
    pub fn default_dir(&self, root: &Path) -> PathBuf {
        root.join("target/optiml")
            .join(format!("shard-{}-of-{}", self.index, self.count))
    }
}

/// The name of one job of a tune, the same on every host: the kernel's cache key (its spec, binding,
/// architecture, toolchain and generator) and the shape.
pub fn job_name(key: &str, shape: &str) -> String {
    format!("{key} {shape}")
}

/// What a shard's folder says of the run that wrote it ([`RECORD`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The share, `i/n`.
    pub shard: String,
    /// The GPU it tuned on, as each variant's tuning names it.
    pub device: String,
    /// That GPU's architecture.
    pub device_arch: String,
    /// When the shard started (RFC 3339, UTC).
    pub date: String,
    /// The jobs it took ([`job_name`]).
    pub jobs: Vec<String>,
}

impl Record {
    /// Writes the record into `dir`, whole or not at all.
    ///
    /// # Errors
    /// When the folder cannot be written.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(".{RECORD}.{}", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, dir.join(RECORD))?;
        Ok(())
    }

    /// The record of the shard folder `dir`.
    ///
    /// # Errors
    /// When there is none, or it does not parse.
    pub fn read(dir: &Path) -> anyhow::Result<Self> {
        let path = dir.join(RECORD);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            anyhow::anyhow!(
                "`{}` is not a shard's folder: no readable `{RECORD}` ({e}); `cargo optiml tune --shard i/n` \
                 writes one",
                dir.display()
            )
        })?;
        serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("`{}` does not parse: {e}", path.display()))
    }
}

/// `cargo optiml merge`.
#[derive(Debug, Args)]
pub struct Merge {
    /// The folders `cargo optiml tune --shard i/n` wrote (each holds a `shard.json`).
    #[arg(required = true, value_name = "SHARD_DIRS")]
    pub shards: Vec<PathBuf>,
    /// Where to scan and which cache to merge into.
    #[command(flatten)]
    pub place: Place,
    /// Verify the shards and say what would be written, writing nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Every entry of the shard folders, verified and grouped by key; or every reason one cannot be merged.
///
/// # Errors
/// One line per problem: a folder that is not a shard's, an entry that does not verify, one in a folder that
/// is not its key's, one tuned on a GPU of another architecture than its own or, since the shard started, on
/// another GPU than its shard's.
pub fn gather(shards: &[PathBuf]) -> Result<BTreeMap<String, Vec<cache::Entry>>, Vec<String>> {
    let mut problems = Vec::new();
    let mut by_key: BTreeMap<String, Vec<cache::Entry>> = BTreeMap::new();
    for dir in shards {
        let record = match Record::read(dir) {
            Ok(r) => r,
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
        };
        let device_arch = match record.device_arch.parse::<Arch>() {
            Ok(a) => a,
            Err(e) => {
                problems.push(format!(
                    "`{}`: the device's architecture `{}` ({e})",
                    dir.join(RECORD).display(),
                    record.device_arch
                ));
                continue;
            }
        };
        let shard_cache = Cache::new(dir);
        for entry_dir in shard_cache.entry_dirs() {
            let entry = match cache::open(&entry_dir) {
                Ok(e) => e,
                Err(why) => {
                    problems.push(format!("`{}` is damaged: {why}", entry_dir.display()));
                    continue;
                }
            };
            let inputs = &entry.manifest.inputs;
            if shard_cache.entry_dir(inputs) != entry_dir {
                problems.push(format!(
                    "`{}` holds the entry of another key ({}, {})",
                    entry_dir.display(),
                    inputs.spec,
                    inputs.arch
                ));
                continue;
            }
            if (inputs.arch.major, inputs.arch.minor) != (device_arch.major, device_arch.minor) {
                problems.push(format!(
                    "`{}` is an entry for {} tuned on {} ({device_arch}): its times say nothing of {}",
                    entry_dir.display(),
                    inputs.arch,
                    record.device,
                    inputs.arch
                ));
                continue;
            }
            if !entry.manifest.variants.iter().any(|v| v.tuning.is_some()) {
                // A shard stores only what it tuned; an untuned entry (a copied cache's default) would replace
                // the cache's any-shape default with nothing.
                problems.push(format!(
                    "`{}` holds no tuned variant: `cargo optiml tune --shard` did not write it",
                    entry_dir.display()
                ));
                continue;
            }
            // A variant tuned before the shard started came with the cache it started from (any GPU may have
            // tuned it); one tuned since, on another GPU, is not this shard's work.
            let other_gpu = entry.manifest.variants.iter().find_map(|v| {
                v.tuning
                    .as_ref()
                    .filter(|t| t.device != record.device && t.date >= record.date)
                    .map(|t| t.device.clone())
            });
            if let Some(gpu) = other_gpu {
                problems.push(format!(
                    "`{}` has a variant tuned on {gpu}, but its shard ran on {}",
                    entry_dir.display(),
                    record.device
                ));
                continue;
            }
            by_key
                .entry(entry.manifest.key.clone())
                .or_default()
                .push(entry);
        }
    }
    if problems.is_empty() {
        Ok(by_key)
    } else {
        Err(problems)
    }
}

/// `cargo optiml merge`: every shard's entries into the cache, after every one of them verified; with any
/// problem, nothing is written.
pub(super) fn run(m: &Merge) -> anyhow::Result<bool> {
    let (_, cache) = root_and_cache(&m.place)?;
    let by_key = match gather(&m.shards) {
        Ok(g) => g,
        Err(problems) => {
            for p in &problems {
                eprintln!("error: {p}");
            }
            eprintln!(
                "nothing merged: {} problem(s); rerun the shards concerned, or leave their folders out",
                problems.len()
            );
            return Ok(false);
        }
    };
    let (mut written, mut unchanged) = (0, 0);
    for entries in by_key.values() {
        let what = entries
            .first()
            .map(|e| format!("{} ({})", e.manifest.inputs.spec, e.manifest.inputs.arch))
            .unwrap_or_default();
        let merged = if m.dry_run {
            cache.merge_preview(entries)?
        } else {
            cache.merge(entries)?
        };
        match merged {
            Merged::Written {
                dir,
                tuned,
                from_shards,
            } => {
                written += 1;
                eprintln!(
                    "{what}: {from_shards} shape(s) from {} shard(s), {tuned} tuned variant(s) in all: `{}`",
                    entries.len(),
                    dir.display()
                );
            }
            Merged::Unchanged { .. } => unchanged += 1,
        }
    }
    eprintln!(
        "{} {} shard folder(s) into `{}`: entries {}: {written}, already up to date: {unchanged}",
        if m.dry_run { "would merge" } else { "merged" },
        m.shards.len(),
        cache.root.display(),
        if m.dry_run { "to write" } else { "written" },
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::merge::tests::{A, default, store, tuned};
    use crate::cache::tests::temp_cache;

    #[test]
    fn shares_are_written_i_of_n() {
        assert_eq!("2/4".parse(), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(
            " 1 / 1 ".parse::<Shard>().map(|s| s.to_string()),
            Ok("1/1".into())
        );
        for bad in ["0/4", "5/4", "1/0", "1", "a/b", "-1/2", "1/2/3", ""] {
            let err = bad.parse::<Shard>().unwrap_err();
            assert!(err.contains("is not a share like 1/4"), "{bad}: {err}");
        }
    }

    /// The command line takes a share as `i/n` and names a bad one; `merge` needs at least one folder.
    #[test]
    fn the_command_line_takes_shares_and_shard_folders() {
        use crate::cli::{CargoCli, Command, Optiml};
        use clap::Parser;
        let parse = |args: &[&str]| {
            CargoCli::try_parse_from(["cargo", "optiml"].iter().chain(args)).map(|c| {
                let CargoCli::Optiml(Optiml { command }) = c;
                command
            })
        };
        match parse(&["tune", "--shard", "2/3"]) {
            Ok(Command::Tune(t)) => assert_eq!(t.shard, Some(Shard { index: 2, count: 3 })),
            other => panic!("{other:?}"),
        }
        let err = parse(&["tune", "--shard", "3/2"]).unwrap_err().to_string();
        assert!(err.contains("`3/2` is not a share like 1/4"), "{err}");
        match parse(&["merge", "a", "b", "--cache-dir", "c"]) {
            Ok(Command::Merge(m)) => {
                assert_eq!(m.shards, [PathBuf::from("a"), PathBuf::from("b")]);
                assert_eq!(m.place.cache_dir, Some(PathBuf::from("c")));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["merge", "a", "--dry-run"]) {
            Ok(Command::Merge(m)) => assert!(m.dry_run),
            other => panic!("{other:?}"),
        }
        assert!(parse(&["merge"]).is_err());
    }

    /// Every job is in exactly one share, for any number of shards and jobs, whatever order each host found the
    /// jobs in; the shares differ in size by at most one.
    #[test]
    fn the_shares_partition_the_jobs() {
        for jobs in 0..40usize {
            let names: Vec<String> = (0..jobs)
                .map(|j| job_name(&format!("{:064x}", j * 7919 % 97), &format!("1x{j}x64x64")))
                .collect();
            let mut reversed = names.clone();
            reversed.reverse();
            for count in 1..=9 {
                let shares: Vec<BTreeSet<String>> = (1..=count)
                    .map(|index| {
                        // Each host lists the jobs in its own order.
                        let seen = if index % 2 == 0 { &reversed } else { &names };
                        Shard { index, count }.share(seen)
                    })
                    .collect();
                let total: usize = shares.iter().map(BTreeSet::len).sum();
                assert_eq!(
                    total, jobs,
                    "{jobs} jobs, {count} shards: a job twice or never"
                );
                let all: BTreeSet<String> = shares.iter().flatten().cloned().collect();
                assert_eq!(all, names.iter().cloned().collect());
                let (lo, hi) = (
                    shares.iter().map(BTreeSet::len).min().unwrap(),
                    shares.iter().map(BTreeSet::len).max().unwrap(),
                );
                assert!(hi - lo <= 1, "{jobs} jobs, {count} shards: {lo}..{hi}");
            }
        }
    }

    /// A shard folder holding one entry tuned on an H200 for sm_90, with a record saying it ran on `gpu` (`arch`).
    fn shard_dir(name: &str, gpu: &str, arch: &str, date: &str) -> PathBuf {
        let cache = temp_cache(name);
        store(&cache, &[tuned(A, 1, "H200", "2026-12-07T10:00:00Z", 1.0)]);
        Record {
            shard: "1/2".into(),
            device: gpu.into(),
            device_arch: arch.into(),
            date: date.into(),
            jobs: vec!["a job".into()],
        }
        .write(&cache.root)
        .unwrap();
        cache.root
    }

    /// `merge` takes verified entries tuned on their own architecture by their shard's GPU, and names every
    /// folder or entry it refuses, writing nothing then.
    #[test]
    fn merge_refuses_damaged_mismatched_and_unrecorded_shards() {
        let date = "2026-12-07T10:00:00Z";
        let good = shard_dir("gather-good", "H200", "sm_90", date);
        let gathered = gather(std::slice::from_ref(&good)).unwrap();
        assert_eq!(gathered.len(), 1);
        assert_eq!(gathered.values().next().unwrap().len(), 1);

        let unrecorded = shard_dir("gather-unrecorded", "H200", "sm_90", date);
        std::fs::remove_file(unrecorded.join(RECORD)).unwrap();
        let other_arch = shard_dir("gather-arch", "H200", "sm_80", date);
        let other_gpu = shard_dir("gather-gpu", "H100", "sm_90", date);
        // An H200's variant from before an H100 shard started is one it carried from its cache.
        let carried = shard_dir("gather-carried", "H100", "sm_90", "2026-12-07T11:00:00Z");
        assert_eq!(gather(std::slice::from_ref(&carried)).unwrap().len(), 1);
        let damaged = shard_dir("gather-damaged", "H200", "sm_90", date);
        let entry = Cache::new(&damaged).entry_dirs().remove(0);
        let pack = std::fs::read_dir(&entry)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
            .unwrap();
        let mut bytes = std::fs::read(&pack).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(&pack, bytes).unwrap();
        let untuned = shard_dir("gather-untuned", "H200", "sm_90", date);
        store(&Cache::new(&untuned), &[default(A, 7)]);
        let moved = shard_dir("gather-moved", "H200", "sm_90", date);
        let entry = Cache::new(&moved).entry_dirs().remove(0);
        std::fs::rename(&entry, entry.with_file_name("0".repeat(64))).unwrap();

        let all = [
            good.clone(),
            unrecorded.clone(),
            other_arch.clone(),
            other_gpu.clone(),
            damaged.clone(),
            untuned.clone(),
            moved.clone(),
        ];
        let problems = gather(&all).unwrap_err();
        let said = |what: &str| problems.iter().filter(|p| p.contains(what)).count();
        assert_eq!(problems.len(), 6, "{problems:#?}");
        assert_eq!(said("holds no tuned variant"), 1, "{problems:#?}");
        assert_eq!(said("is not a shard's folder"), 1, "{problems:#?}");
        assert_eq!(said("its times say nothing of sm_90"), 1, "{problems:#?}");
        assert_eq!(said("but its shard ran on H100"), 1, "{problems:#?}");
        assert_eq!(said("is damaged"), 1, "{problems:#?}");
        assert_eq!(said("holds the entry of another key"), 1, "{problems:#?}");

        // The command writes nothing then, and merges the good folder alone.
        let dest = temp_cache("gather-dest");
        let merge = |shards: Vec<PathBuf>| {
            run(&Merge {
                shards,
                place: Place {
                    dir: Some(good.clone()),
                    cache_dir: Some(dest.root.clone()),
                },
                dry_run: false,
            })
            .unwrap()
        };
        assert!(!merge(all.to_vec()));
        assert!(!dest.root.exists(), "a refused merge wrote something");
        assert!(merge(vec![good.clone()]));
        assert_eq!(dest.entry_dirs().len(), 1);
        for d in all.iter().chain([&dest.root]) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
