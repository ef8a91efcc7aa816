//! What a run leaves behind: JSON for programs (`bench/render.py`, later comparisons) and a markdown table for
//! people, both naming the date and the GPU, with the baseline measured in the same run beside every number.

use std::fmt::Write as _;
use std::path::Path;

use crate::BoxError;

/// Today's date, `YYYY-MM-DD` (UTC).
pub fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0) as i64;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The geometric mean of speed ratios; `None` over none (a `--kernels` selection without such rows), so a
/// report never shows a mean of nothing as 1×.
pub fn geomean(ratios: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, count) = ratios
        .into_iter()
        .fold((0f64, 0usize), |(s, c), r| (s + r.ln(), c + 1));
    (count > 0).then(|| (sum / count as f64).exp())
}

/// A geometric mean for people: three decimals, or a dash over no rows.
pub fn show_geomean(geomean: Option<f64>) -> String {
    geomean.map_or("–".to_string(), |g| format!("{g:.3}"))
}

/// How a markdown column aligns its cells.
#[derive(Clone, Copy, Debug)]
pub enum Align {
    /// Text: names, shapes, times with their spread.
    Left,
    /// Numbers compared down the column.
    Right,
}

/// A markdown table, header first, rows as they come.
#[derive(Clone, Debug)]
pub struct Table {
    text: String,
}

impl Table {
    /// A table with these column titles and alignments.
    pub fn new(columns: &[(&str, Align)]) -> Table {
        let titles: Vec<&str> = columns.iter().map(|c| c.0).collect();
        let rules: Vec<&str> = columns
            .iter()
            .map(|c| match c.1 {
                Align::Left => "---",
                Align::Right => "---:",
            })
            .collect();
        Table {
            text: format!("| {} |\n|{}|\n", titles.join(" | "), rules.join("|")),
        }
    }

    /// Adds a row. A row may hold fewer cells than there are columns: a failed row puts its reason where its
    /// numbers would be.
    pub fn row<S: AsRef<str>>(&mut self, cells: &[S]) {
        let cells: Vec<&str> = cells.iter().map(AsRef::as_ref).collect();
        let _ = writeln!(self.text, "| {} |", cells.join(" | "));
    }

    /// The markdown so far.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// A cell that holds free text (a failure's reason): pipes escaped so that the table holds.
pub fn cell_text(text: &str) -> String {
    text.replace('|', "\\|")
}

/// Writes `doc` to `path` as pretty JSON ending in a newline.
///
/// # Errors
/// What serialising or writing reports.
pub fn write_json(path: &Path, doc: &serde_json::Value) -> Result<(), BoxError> {
    std::fs::write(path, serde_json::to_string_pretty(doc)? + "\n")?;
    Ok(())
}

/// Writes a run's two outputs into `dir` (created if missing): `<stem>.json` and `<stem>.md`.
///
/// # Errors
/// What creating the folder, serialising or writing reports.
pub fn write_report(
    dir: &Path,
    stem: &str,
    doc: &serde_json::Value,
    markdown: &str,
) -> Result<(), BoxError> {
    std::fs::create_dir_all(dir)?;
    write_json(&dir.join(format!("{stem}.json")), doc)?;
    std::fs::write(dir.join(format!("{stem}.md")), markdown)?;
    Ok(())
}
