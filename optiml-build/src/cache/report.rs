//! `report.md`: what an entry holds, in words, for whoever reviews a change to a committed cache. It is derived
//! from the manifest and the search logs, so it is not checksummed: `cargo optiml prepare` rewrites a stale one.

use super::{Entry, Files, Manifest, REPORT, TunedWords, pack_of};
use crate::fs::{self, FsError};
use crate::search::SearchRecords;
use std::path::Path;

/// Rewrites an entry's `report.md` from its manifest when it differs (a report written by an older generator);
/// `true` when it was rewritten. The report is not among the checksummed files, so this never invalidates it.
///
/// # Errors
/// [`FsError`] when the file cannot be written.
pub fn refresh_report(entry: &Entry, words: TunedWords) -> Result<bool, FsError> {
    let path = entry.dir.join(REPORT);
    let text = report(&entry.manifest, entry.files(), words);
    if std::fs::read(&path).is_ok_and(|old| old == text.as_bytes()) {
        return Ok(false);
    }
    fs::write(&path, text.as_bytes())?;
    Ok(true)
}

/// Whether an entry's `report.md` says what its manifest and logs do (`cargo optiml prepare --check`): a hand
/// edit, or a report an older generator wrote, is not.
pub fn report_is_current(entry: &Entry, words: TunedWords) -> bool {
    std::fs::read(entry.dir.join(REPORT))
        .is_ok_and(|text| text == report(&entry.manifest, entry.files(), words).as_bytes())
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

/// The human-readable summary written beside the manifest of an entry whose files are `files` (its search logs
/// say what each tuned variant was searched at; `words` words it).
pub fn report(m: &Manifest, files: &Files, words: TunedWords) -> String {
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
                        .and_then(|t| Some((&t.log, files.get(&t.log)?)))
                        .and_then(|(name, bytes)| {
                            SearchRecords::parse_jsonl(
                                &String::from_utf8_lossy(bytes),
                                Path::new(name),
                            )
                            .ok()
                        });
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
                 path: {}. {}{}\n",
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
                if t.log.is_empty() {
                    "Its search log is lost.".to_string()
                } else {
                    format!(
                        "Log: `{}` in `{}` (`cargo optiml analyze` reads it).",
                        t.log,
                        pack_of(&t.log)
                    )
                },
                // The seeds and LLM kernels measured beside the search, kept or not.
                files
                    .get(&t.log)
                    .and_then(|bytes| {
                        SearchRecords::parse_jsonl(&String::from_utf8_lossy(bytes), Path::new(&t.log)).ok()
                    })
                    .map(|r| crate::analyze::roots_sentence(&crate::analyze::roots(&r)))
                    .filter(|line| !line.is_empty())
                    .map_or_else(String::new, |line| format!(" {line}"))
            )),
            None => s.push_str(&format!(
                "\n### {}: the family's default schedule (no search has run on it)\n",
                v.stem
            )),
        }
    }
    s.push_str(
        "\n## Files\n\nEach pack is a gzip-compressed tar archive (`tar xzf v0.tar.gz` unpacks one); a file's length and \
         sha256 are those of its unpacked bytes.\n\n",
    );
    for pack in &m.packs {
        let f = &pack.file;
        s.push_str(&format!(
            "- `{}`: {} bytes, sha256 `{}`\n",
            f.name, f.len, f.sha256
        ));
        for name in &pack.members {
            if let Some(f) = m.files.iter().find(|f| f.name == *name) {
                s.push_str(&format!(
                    "  - `{}`: {} bytes, sha256 `{}`\n",
                    f.name, f.len, f.sha256
                ));
            }
        }
    }
    s
}
