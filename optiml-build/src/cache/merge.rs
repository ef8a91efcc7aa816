//! Combining entries that shards of one tune wrote for the same key (`cargo optiml merge`).
//!
//! A shard stores, for each kernel and architecture it tuned a shape of, an entry holding only what it tuned
//! (its winners and the free buckets' defaults). The merged entry takes every shape some shard tuned, from that
//! shard; a shape no shard tuned keeps the destination's variant; a free bucket's default stays only where no
//! tuned variant holds its shape. Where several shards tuned one shape, the faster measurement wins among
//! those taken on one GPU model (their times compare), then the newest tuning among models (they do not).

use super::{
    Cache, CacheError, Entry, Files, Lookup, Manifest, Tuning, VariantParts, VariantRecord, layout,
};
use std::path::PathBuf;

/// What [`Cache::merge`] did with one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Merged {
    /// The entry was written (or would be, in a preview): `tuned` variants, `from_shards` of them taken from the
    /// shards.
    Written {
        /// The entry's folder.
        dir: PathBuf,
        /// Tuned variants in the entry.
        tuned: usize,
        /// Of those, the ones a shard tuned (the rest were already in the destination).
        from_shards: usize,
    },
    /// The destination already held exactly this entry (a merge run twice).
    Unchanged {
        /// The entry's folder.
        dir: PathBuf,
    },
}

/// One variant of one entry, offered to the merged entry.
#[derive(Clone, Copy)]
struct Offer<'a> {
    entry: &'a Entry,
    variant: &'a VariantRecord,
}

impl Offer<'_> {
    fn tuning(&self) -> Option<&Tuning> {
        self.variant.tuning.as_ref()
    }
}

/// The tuned variant kept for one shape among `offers` (each tuned, none empty): per GPU model the fastest
/// (the first offered on a tie), then the newest of those (RFC 3339 dates sort as text; the first on a tie).
fn choose<'a>(offers: &[Offer<'a>]) -> Option<Offer<'a>> {
    let mut per_model: Vec<Offer<'a>> = Vec::new();
    for offer in offers {
        let Some(t) = offer.tuning() else { continue };
        match per_model
            .iter_mut()
            .find(|o| o.tuning().is_some_and(|u| u.device == t.device))
        {
            Some(best) => {
                if best
                    .tuning()
                    .is_some_and(|b| t.measurement.time_ms < b.measurement.time_ms)
                {
                    *best = *offer;
                }
            }
            None => per_model.push(*offer),
        }
    }
    let mut newest: Option<Offer<'a>> = None;
    for offer in per_model {
        let later = match (newest.and_then(|n| n.tuning().cloned()), offer.tuning()) {
            (Some(n), Some(t)) => t.date > n.date,
            _ => true,
        };
        if later {
            newest = Some(offer);
        }
    }
    newest
}

/// The variants of `entries` for `shape`, tuned or not.
fn offers<'a>(entries: &[&'a Entry], shape: Option<[u64; 4]>, tuned: bool) -> Vec<Offer<'a>> {
    entries
        .iter()
        .flat_map(|&entry| {
            entry
                .manifest
                .variants
                .iter()
                .filter(move |v| v.shape == shape && v.tuning.is_some() == tuned)
                .map(move |variant| Offer { entry, variant })
        })
        .collect()
}

/// The manifest (its file and pack records left to [`Cache::write`]) and files of `existing` merged with
/// `shards`' entries, all for one key. `None` when `shards` is empty.
fn merged(existing: Option<&Entry>, shards: &[Entry]) -> Option<(Manifest, Files, usize)> {
    let first = shards.first()?;
    let tuned_in = |e: &'_ Entry| {
        e.manifest
            .variants
            .iter()
            .filter(|v| v.tuning.is_some() && v.shape.is_some())
            .map(|v| v.shape)
            .collect::<Vec<_>>()
    };
    let mut shapes: Vec<[u64; 4]> = shards.iter().flat_map(tuned_in).flatten().collect();
    let from_shards = {
        shapes.sort_unstable();
        shapes.dedup();
        shapes.len()
    };
    if let Some(e) = existing {
        shapes.extend(tuned_in(e).into_iter().flatten());
        shapes.sort_unstable();
        shapes.dedup();
    }
    let shard_entries: Vec<&Entry> = shards.iter().collect();
    let existing_entries: Vec<&Entry> = existing.into_iter().collect();
    let all: Vec<&Entry> = shard_entries
        .iter()
        .chain(&existing_entries)
        .copied()
        .collect();
    let mut picks: Vec<Offer<'_>> = Vec::new();
    for &shape in &shapes {
        let from = offers(&shard_entries, Some(shape), true);
        let from = if from.is_empty() {
            offers(&existing_entries, Some(shape), true)
        } else {
            from
        };
        picks.extend(choose(&from));
    }
    // The free buckets' defaults: every shape some entry holds a default for and no tuned variant holds, and the
    // any-shape default of a family whose runtime times it against the tuned variants (it sorts first).
    let mut free: Vec<Option<[u64; 4]>> = all
        .iter()
        .flat_map(|e| &e.manifest.variants)
        .filter(|v| v.tuning.is_none())
        .map(|v| v.shape)
        .filter(|s| s.is_none_or(|s| !shapes.contains(&s)))
        .collect();
    free.sort_unstable();
    free.dedup();
    for shape in free {
        let from = offers(&all, shape, false);
        picks.extend(from.first().copied());
    }
    // Every file a variant names is there: the entries were verified.
    let (files, records) = layout(picks.iter().map(|pick| {
        let file = |name: &str| pick.entry.files.get(name).map(Vec::as_slice);
        let part = |ext: &str| file(&format!("{}.{ext}", pick.variant.stem)).unwrap_or_default();
        VariantParts {
            source: part("cu"),
            ptx: part("ptx"),
            cubin: part("cubin"),
            log: pick
                .tuning()
                .filter(|t| !t.log.is_empty())
                .and_then(|t| file(&t.log)),
            record: pick.variant.clone(),
        }
    }));
    let manifest = Manifest {
        variants: records,
        files: Vec::new(),
        packs: Vec::new(),
        ..first.manifest.clone()
    };
    Some((manifest, files, from_shards))
}

impl Cache {
    /// Merges `shards`' entries, all verified and all for one key, into this cache's entry for that key, as
    /// the module says, swapped in whole. Nothing is written where the result is what is already here.
    ///
    /// # Errors
    /// [`CacheError::Shards`] when `shards` is empty, holds no tuned variant, or its entries are for different
    /// keys or were written with different entry points or NVRTC options; [`CacheError`] when the entry cannot
    /// be written.
    pub fn merge(&self, shards: &[Entry]) -> Result<Merged, CacheError> {
        self.merge_or_preview(shards, true)
    }

    /// What [`Cache::merge`] would do with `shards`, writing nothing (`cargo optiml merge --dry-run`).
    ///
    /// # Errors
    /// As [`Cache::merge`], less the writing.
    pub fn merge_preview(&self, shards: &[Entry]) -> Result<Merged, CacheError> {
        self.merge_or_preview(shards, false)
    }

    fn merge_or_preview(&self, shards: &[Entry], write: bool) -> Result<Merged, CacheError> {
        let Some(first) = shards.first() else {
            return Err(CacheError::Shards("no entry to merge".into()));
        };
        let inputs = &first.manifest.inputs;
        if let Some(other) = shards.iter().find(|e| {
            e.manifest.key != first.manifest.key
                || e.manifest.entry != first.manifest.entry
                || e.manifest.nvrtc_options != first.manifest.nvrtc_options
        }) {
            return Err(CacheError::Shards(format!(
                "`{}` and `{}` are not entries of one kernel",
                first.dir.display(),
                other.dir.display()
            )));
        }
        // The entry here, of either format (a previous-format one's winners are kept too; `prepare` removes
        // its old folder once this one is written).
        let (existing, intact) = match self.lookup(inputs) {
            Lookup::Hit(entry) => (Some(*entry), true),
            // Damaged: its intact variants count, and the entry is rewritten whatever the merge gives.
            Lookup::Salvaged { entry, .. } => (Some(*entry), false),
            Lookup::Miss | Lookup::Corrupt { .. } => (None, false),
        };
        let Some((manifest, files, from_shards)) = merged(existing.as_ref(), shards) else {
            return Err(CacheError::Shards("no entry to merge".into()));
        };
        if from_shards == 0 {
            // Nothing tuned to bring in; merging would only drop the cache's any-shape default.
            return Err(CacheError::Shards(format!(
                "`{}` holds no tuned variant",
                first.dir.display()
            )));
        }
        let dir = self.entry_dir(inputs);
        if let Some(e) = &existing
            && intact
            && !self.is_legacy(e)
            && e.manifest.variants == manifest.variants
            && e.files == files
        {
            return Ok(Merged::Unchanged { dir });
        }
        let tuned = manifest
            .variants
            .iter()
            .filter(|v| v.tuning.is_some())
            .count();
        let dir = if write {
            self.write(&manifest, &files, true)?.dir
        } else {
            dir
        };
        Ok(Merged::Written {
            dir,
            tuned,
            from_shards,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::tests::{sample, sample_tuning, temp_cache};
    use super::super::{KeyInputs, NewVariant};
    use super::*;
    use crate::experts::Candidate;
    use crate::measure::Measurement;
    use crate::nvrtc::Compiled;

    pub(crate) const A: [u64; 4] = [256, 1024, 1024, 1024];
    const B: [u64; 4] = [16, 1024, 1024, 1024];
    const C: [u64; 4] = [1, 4096, 4096, 4096];
    /// A free bucket's shape (the GEMV companion's, say).
    const FREE: [u64; 4] = [1, 1, 4096, 4096];

    /// One variant: kernel `tag` (its source and CUBIN say which), tuned on `gpu` at `date` in `ms`, or a
    /// default where `gpu` is `None`.
    pub(crate) struct Made {
        shape: Option<[u64; 4]>,
        tag: u8,
        tuned: Option<(&'static str, &'static str, f64)>,
    }

    pub(crate) fn tuned(
        shape: [u64; 4],
        tag: u8,
        gpu: &'static str,
        date: &'static str,
        ms: f64,
    ) -> Made {
        Made {
            shape: Some(shape),
            tag,
            tuned: Some((gpu, date, ms)),
        }
    }

    pub(crate) fn default(shape: [u64; 4], tag: u8) -> Made {
        Made {
            shape: Some(shape),
            tag,
            tuned: None,
        }
    }

    /// The any-shape default a matmul entry keeps beside its tuned variants.
    fn any_shape(tag: u8) -> Made {
        Made {
            shape: None,
            tag,
            tuned: None,
        }
    }

    /// Stores `made` as the entry of the sample key in `cache`.
    pub(crate) fn store(cache: &Cache, made: &[Made]) -> Entry {
        let (inputs, candidate, compiled) = sample();
        let parts: Vec<(Candidate, Compiled, Option<Tuning>, Vec<u8>)> = made
            .iter()
            .map(|m| {
                let tuning = m.tuned.map(|(gpu, date, ms)| Tuning {
                    device: gpu.into(),
                    date: date.into(),
                    measurement: Measurement {
                        time_ms: ms,
                        ..Measurement::default()
                    },
                    ..sample_tuning()
                });
                (
                    Candidate {
                        source: format!("// kernel {}\n", m.tag),
                        ..candidate.clone()
                    },
                    Compiled {
                        cubin: vec![m.tag; 8],
                        ..compiled.clone()
                    },
                    tuning,
                    format!("{{\"log\":{}}}\n", m.tag).into_bytes(),
                )
            })
            .collect();
        let variants: Vec<NewVariant<'_>> = made
            .iter()
            .zip(&parts)
            .map(|(m, (candidate, compiled, tuning, log))| NewVariant {
                candidate,
                compiled,
                shape: m.shape,
                tuning: tuning.as_ref(),
                log: tuning.as_ref().map(|_| log.as_slice()),
            })
            .collect();
        cache.store(&inputs, &variants, true).unwrap()
    }

    /// A variant as a program and `analyze` see it: shape, kernel tag, the GPU it was tuned on, its search log.
    type Seen = (Option<[u64; 4]>, u8, Option<String>, Option<Vec<u8>>);

    /// The entry's variants, in order.
    fn seen(entry: &Entry) -> Vec<Seen> {
        entry
            .manifest
            .variants
            .iter()
            .map(|v| {
                let t = v.tuning.as_ref();
                (
                    v.shape,
                    entry.bytes(&format!("{}.cubin", v.stem)).unwrap()[0],
                    t.map(|t| t.device.clone()),
                    t.map(|t| entry.bytes(&t.log).unwrap().to_vec()),
                )
            })
            .collect()
    }

    fn lookup(cache: &Cache) -> Entry {
        match cache.lookup(&sample().0) {
            Lookup::Hit(e) => *e,
            other => panic!("{other:?}"),
        }
    }

    /// Two shards, each with some shapes of one kernel, give the entry one run over all the shapes gives; a
    /// shape neither tuned keeps the cache's winner, a free bucket's default stays only where no winner holds
    /// its shape, the any-shape default stays beside the winners, and merging again changes nothing.
    #[test]
    fn shards_of_one_kernel_merge_into_the_entry_one_run_gives() {
        let (one, two, dest, whole) = (
            temp_cache("merge-one"),
            temp_cache("merge-two"),
            temp_cache("merge-dest"),
            temp_cache("merge-whole"),
        );
        let date = "2026-12-07T12:00:00Z";
        let shard1 = store(
            &one,
            &[
                tuned(A, 1, "H200", date, 1.0),
                any_shape(8),
                default(FREE, 9),
            ],
        );
        let shard2 = store(
            &two,
            &[
                tuned(B, 2, "H200", date, 2.0),
                any_shape(8),
                default(FREE, 9),
            ],
        );
        // The unsharded run: both shapes in one entry, in shape order as `tune::store` writes them.
        let unsharded = store(
            &whole,
            &[
                tuned(B, 2, "H200", date, 2.0),
                tuned(A, 1, "H200", date, 1.0),
                any_shape(8),
                default(FREE, 9),
            ],
        );
        // A preview says what a merge will do and writes nothing.
        let preview = dest
            .merge_preview(&[shard1.clone(), shard2.clone()])
            .unwrap();
        assert!(!dest.root.exists(), "a preview wrote something");
        let written = dest.merge(&[shard1.clone(), shard2.clone()]).unwrap();
        assert_eq!(preview, written);
        assert!(
            matches!(
                written,
                Merged::Written {
                    tuned: 2,
                    from_shards: 2,
                    ..
                }
            ),
            "{written:?}"
        );
        let merged = lookup(&dest);
        assert_eq!(seen(&merged), seen(&unsharded));
        assert_eq!(merged.manifest, unsharded.manifest);
        assert_eq!(merged.files, unsharded.files);
        // Idempotent, whatever order the shards come in.
        assert!(matches!(
            dest.merge(&[shard2.clone(), shard1.clone()]).unwrap(),
            Merged::Unchanged { .. }
        ));

        // A destination with a winner for C and one for A, and the default of the free bucket C is not.
        let kept = temp_cache("merge-kept");
        store(
            &kept,
            &[
                tuned(C, 3, "H100", "2026-01-01T00:00:00Z", 0.5),
                tuned(A, 4, "H100", "2026-01-01T00:00:00Z", 0.1),
            ],
        );
        let free_c = temp_cache("merge-free-c");
        let shard3 = store(
            &free_c,
            &[
                tuned(B, 2, "H200", date, 2.0),
                default(C, 8),
                default(FREE, 9),
            ],
        );
        kept.merge(&[shard1.clone(), shard3]).unwrap();
        let shapes: Vec<_> = seen(&lookup(&kept))
            .into_iter()
            .map(|(s, tag, gpu, _)| (s, tag, gpu))
            .collect();
        assert_eq!(
            shapes,
            [
                (Some(C), 3, Some("H100".to_string())),
                (Some(B), 2, Some("H200".to_string())),
                (Some(A), 1, Some("H200".to_string())),
                (None, 8, None),
                (Some(FREE), 9, None),
            ]
        );
        for c in [one, two, dest, whole, kept, free_c] {
            let _ = std::fs::remove_dir_all(&c.root);
        }
    }

    /// A shape two shards tuned: the faster where both ran on one GPU model, the newer across models.
    #[test]
    fn a_shape_tuned_twice_keeps_the_faster_on_one_model_and_the_newer_across() {
        let (x, y, z, dest) = (
            temp_cache("twice-x"),
            temp_cache("twice-y"),
            temp_cache("twice-z"),
            temp_cache("twice-dest"),
        );
        let slow = store(&x, &[tuned(A, 1, "H200", "2026-12-07T10:00:00Z", 1.5)]);
        let fast = store(&y, &[tuned(A, 2, "H200", "2026-12-06T10:00:00Z", 1.0)]);
        let other = store(&z, &[tuned(A, 3, "H100", "2026-12-05T10:00:00Z", 0.5)]);
        let tag = |dest: &Cache| seen(&lookup(dest))[0].1;
        dest.merge(&[slow.clone(), fast.clone()]).unwrap();
        assert_eq!(tag(&dest), 2);
        dest.merge(&[fast.clone(), slow.clone()]).unwrap();
        assert_eq!(tag(&dest), 2);
        // The H100's 0.5 ms does not compare with an H200's time: the newest model's best stays.
        dest.merge(&[other.clone(), slow, fast]).unwrap();
        assert_eq!(tag(&dest), 2);
        // The search log travels with its winner.
        assert_eq!(
            seen(&lookup(&dest))[0].3.as_deref(),
            Some(&b"{\"log\":2}\n"[..])
        );
        for c in [x, y, z, dest] {
            let _ = std::fs::remove_dir_all(&c.root);
        }
    }

    /// A damaged destination keeps its intact winners and is written whole again, even where the merge changes
    /// nothing else.
    #[test]
    fn a_damaged_destination_is_rewritten_with_its_intact_winners() {
        let (shard, dest) = (temp_cache("damaged-shard"), temp_cache("damaged-dest"));
        let date = "2026-12-07T10:00:00Z";
        let theirs = store(&shard, &[tuned(A, 1, "H200", date, 1.0)]);
        let before = store(
            &dest,
            &[
                tuned(C, 3, "H200", date, 1.0),
                tuned(B, 2, "H200", date, 1.0),
            ],
        );
        // B's pack goes missing.
        let b = before
            .manifest
            .variants
            .iter()
            .find(|v| v.shape == Some(B))
            .unwrap();
        std::fs::remove_file(
            before
                .dir
                .join(super::super::pack_of(&format!("{}.cu", b.stem))),
        )
        .unwrap();
        assert!(matches!(dest.lookup(&sample().0), Lookup::Salvaged { .. }));
        assert!(matches!(
            dest.merge(std::slice::from_ref(&theirs)).unwrap(),
            Merged::Written { .. }
        ));
        let shapes: Vec<_> = seen(&lookup(&dest))
            .into_iter()
            .map(|v| (v.0, v.1))
            .collect();
        assert_eq!(shapes, [(Some(C), 3), (Some(A), 1)]);
        assert!(matches!(
            dest.merge(&[theirs]).unwrap(),
            Merged::Unchanged { .. }
        ));
        for c in [shard, dest] {
            let _ = std::fs::remove_dir_all(&c.root);
        }
    }

    #[test]
    fn entries_of_different_kernels_are_not_merged() {
        let (x, y, dest) = (
            temp_cache("diff-x"),
            temp_cache("diff-y"),
            temp_cache("diff-dest"),
        );
        let one = store(&x, &[tuned(A, 1, "H200", "2026-12-07T10:00:00Z", 1.0)]);
        let mut other = store(&y, &[tuned(B, 2, "H200", "2026-12-07T10:00:00Z", 1.0)]);
        other.manifest.inputs = KeyInputs {
            generator: "another".into(),
            ..other.manifest.inputs.clone()
        };
        other.manifest.key = other.manifest.inputs.key();
        let err = dest.merge(&[one, other]).unwrap_err();
        assert!(
            err.to_string().contains("not entries of one kernel"),
            "{err}"
        );
        assert!(dest.merge(&[]).is_err());
        let untuned = temp_cache("diff-untuned");
        let plain = store(&untuned, &[default(A, 5)]);
        let err = dest.merge(&[plain]).unwrap_err();
        assert!(err.to_string().contains("holds no tuned variant"), "{err}");
        let _ = std::fs::remove_dir_all(&untuned.root);
        assert!(!dest.root.exists(), "nothing was written");
        for c in [x, y] {
            let _ = std::fs::remove_dir_all(&c.root);
        }
    }
}
