//! The search log as JSON lines: the file a user reads (and `cargo optiml analyze` draws).
//!
//! ```text
//! {"kind":"header","kernel":"bmm",…,"method":"mcts","seed":7,…}     what was tuned, where, how
//! {"kind":"step","node":0,"parent":null,"transform":null,…}         one line per node, in creation order
//! {"kind":"step","node":1,"parent":0,"transform":"grow-block-n",…}
//! {"kind":"summary","best_node":4,"path":["deepen-k-tile",…],…}      what the search found
//! ```
//!
//! One record per line so a log can be `grep`ped, diffed and streamed; the records own their strings and the
//! schedule is kept as JSON, so a log stays readable after the schedule type grows or for another family.

use super::mcts::{Outcome, SearchLog, Step};
use super::reward::{Bottleneck, Measurement, Signals, Verdict};
use super::{Config, Tunable};
use crate::fs::{self, FsError};
use std::fmt;
use std::path::{Path, PathBuf};

/// How the schedules of a log were chosen.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// The Monte Carlo tree search.
    Mcts,
    /// Random transformations (the baseline the search must beat).
    Random,
    /// Every schedule of the template.
    Exhaustive,
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Method::Mcts => "mcts",
            Method::Random => "random",
            Method::Exhaustive => "exhaustive",
        })
    }
}

/// The first line: what was tuned, on what, and how.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Header {
    /// The kernel's name (the Rust function carrying `#[optiml::kernel]`).
    pub kernel: String,
    /// The canonical spec.
    pub spec: String,
    /// The target architecture (`sm_90`).
    pub arch: String,
    /// The device the candidates ran on (`NVIDIA H200`).
    #[serde(default)]
    pub device: String,
    /// The problem it was tuned for, as its family labels the target: `256x1024x1024x1024` (batch × M × N × K),
    /// `r=4096 c=393216` (a tensor program's dimensions), `n=67108864`.
    pub shape: String,
    /// How schedules were chosen.
    pub method: Method,
    /// The random seed, where the method uses one.
    #[serde(default)]
    pub seed: Option<u64>,
    /// The search settings (see [`config_value`]).
    #[serde(default)]
    pub config: serde_json::Value,
    /// When the search started, RFC 3339 UTC.
    pub started_at: String,
    /// Where the SOL figures came from.
    pub signals: Signals,
}

/// What evaluating one node gave, as logged.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum OutcomeRecord {
    /// Compiled, passed the gate, measured.
    Measured(Measurement),
    /// Failed to compile, failed the gate, crashed or timed out.
    Rejected {
        /// Why.
        reason: String,
    },
}

impl OutcomeRecord {
    /// The measurement, if the node was measured.
    pub fn measurement(&self) -> Option<&Measurement> {
        match self {
            OutcomeRecord::Measured(m) => Some(m),
            OutcomeRecord::Rejected { .. } => None,
        }
    }
}

impl From<&Outcome> for OutcomeRecord {
    fn from(o: &Outcome) -> Self {
        match o {
            Outcome::Measured(m) => OutcomeRecord::Measured(*m),
            Outcome::Rejected(reason) => OutcomeRecord::Rejected {
                reason: reason.clone(),
            },
        }
    }
}

/// One node of the search, as logged.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepRecord {
    /// The node's index (0 is the default schedule).
    pub node: usize,
    /// Its parent.
    pub parent: Option<usize>,
    /// The transformation that made it.
    pub transform: Option<String>,
    /// Its schedule, as the family's schedule type serialises it.
    pub schedule: serde_json::Value,
    /// The schedule in words (`block 128x128x8, thread 8x8, 256 threads`).
    pub describe: String,
    /// What evaluation gave.
    pub outcome: OutcomeRecord,
    /// Its bottleneck class (measured nodes).
    pub bottleneck: Option<Bottleneck>,
    /// The judge's verdict on the edit from the parent.
    pub verdict: Option<Verdict>,
    /// The reward backpropagated.
    pub reward: f64,
    /// Whether it was answered from an earlier evaluation of the same schedule (no budget spent).
    pub reused: bool,
    /// Evaluations spent so far, this one included.
    pub evaluations: usize,
    /// Seconds since the search started.
    pub elapsed_s: f64,
}

impl StepRecord {
    /// The record of `step`.
    ///
    /// # Errors
    /// The schedule does not serialise (not expected of a plain struct).
    pub fn of<S: Tunable>(step: &Step<S>) -> Result<Self, serde_json::Error> {
        Ok(StepRecord {
            node: step.node,
            parent: step.parent,
            transform: step.transform.map(str::to_owned),
            schedule: serde_json::to_value(step.schedule)?,
            describe: step.schedule.describe(),
            outcome: (&step.outcome).into(),
            bottleneck: step.bottleneck,
            verdict: step.verdict,
            reward: step.reward,
            reused: step.reused,
            evaluations: step.evaluations,
            elapsed_s: step.elapsed_s,
        })
    }

    /// The schedule as the family's type.
    ///
    /// # Errors
    /// The logged schedule is not a `T` (another family, or a schedule type that has changed since).
    pub fn schedule_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(&self.schedule)
    }
}

/// The last line: what the search found.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// The best node's index.
    pub best_node: usize,
    /// Its schedule, as JSON.
    pub best_schedule: serde_json::Value,
    /// Its schedule in words.
    pub best_describe: String,
    /// Its measurement.
    pub best_measurement: Measurement,
    /// The transformations from the default schedule to the best one.
    pub path: Vec<String>,
    /// Evaluations spent.
    pub evaluations: usize,
    /// Wall-clock seconds of the whole search.
    pub wall_s: f64,
}

/// One line of a log.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Record {
    /// The first line.
    Header(Header),
    /// A node.
    Step(StepRecord),
    /// The last line.
    Summary(Summary),
}

impl Record {
    fn kind(&self) -> &'static str {
        match self {
            Record::Header(_) => "header",
            Record::Step(_) => "step",
            Record::Summary(_) => "summary",
        }
    }
}

/// A whole log.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchRecords {
    /// What was tuned, on what, and how.
    pub header: Header,
    /// Every node, in creation order.
    pub steps: Vec<StepRecord>,
    /// What the search found.
    pub summary: Summary,
}

/// Why a log could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The file could not be read, written or renamed.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// A record would not serialise.
    #[error("cannot serialise the search log: {0}")]
    Serialize(#[source] serde_json::Error),
    /// A line is not a record.
    #[error("`{}` line {line}: malformed record: {source}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What the JSON parser said.
        #[source]
        source: serde_json::Error,
    },
    /// A record is out of place (a step before the header, anything after the summary, …).
    #[error("`{}` line {line}: expected {expected}, found a {found} record", path.display())]
    OutOfOrder {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What may appear there.
        expected: &'static str,
        /// What was there.
        found: &'static str,
    },
    /// The file ends before its summary: the search did not finish, or the file was cut.
    #[error("`{}` has no summary record (the search did not finish, or the file was cut)", path.display())]
    Incomplete {
        /// The file.
        path: PathBuf,
    },
    /// The search log names no best node the steps hold.
    #[error("the search log's best schedule was never measured by any step")]
    NoBestStep,
    /// A step's schedule is not one of the family asked for.
    #[error("a schedule in the search log is not of the expected family: {0}")]
    OtherFamily(#[source] serde_json::Error),
}

/// The config as a header records it: the settings a reader needs to reproduce or compare a search.
pub fn config_value(config: &Config) -> serde_json::Value {
    serde_json::json!({
        "exploration": config.exploration,
        "max_depth": config.max_depth,
        "budget": config.budget,
        "time_limit_s": config.time_limit.as_secs_f64(),
        "time_weight": config.time_weight,
        "proxy_weight": config.proxy_weight,
        "judge_weight": config.judge_weight,
        "prune_after": config.prune_after,
        "deepen_above": config.deepen_above,
        "bottleneck_delta": config.bottleneck_delta,
        "widening": config.widening,
        "widening_exponent": config.widening_exponent,
        "backup": config.backup,
    })
}

/// The records of a finished search.
///
/// # Errors
/// [`LogError::NoBestStep`] when no measured step holds the log's best schedule; [`LogError::Serialize`] when a
/// schedule does not serialise.
pub fn records<S: Tunable>(
    header: &Header,
    log: &SearchLog<S>,
    wall_s: f64,
) -> Result<SearchRecords, LogError> {
    // `SearchLog` keeps the best schedule, not its node: the search picks the first node with the least time, and
    // a later node with the same schedule only repeats that measurement, so the first measured step holding the
    // best schedule is the best node.
    let best_node = log
        .steps
        .iter()
        .find(|s| s.schedule == log.best && matches!(s.outcome, Outcome::Measured(_)))
        .map(|s| s.node)
        .ok_or(LogError::NoBestStep)?;
    let steps = log
        .steps
        .iter()
        .map(StepRecord::of)
        .collect::<Result<Vec<_>, _>>()
        .map_err(LogError::Serialize)?;
    Ok(SearchRecords {
        header: header.clone(),
        steps,
        summary: Summary {
            best_node,
            best_schedule: serde_json::to_value(log.best).map_err(LogError::Serialize)?,
            best_describe: log.best.describe(),
            best_measurement: log.best_measurement,
            path: log.path.iter().map(|s| (*s).to_owned()).collect(),
            evaluations: log.evaluations,
            wall_s,
        },
    })
}

impl SearchRecords {
    /// Appends the step of a root evaluated beside the search (`crate::tune::search_with_roots`): a child of
    /// the default schedule (node 0) made by the transformation [`crate::experts::ROOT_STEP`], with the root's
    /// schedule record. Where it `won`, the summary names it as the best node.
    pub fn add_root(
        &mut self,
        root: &crate::experts::Root,
        outcome: &Outcome,
        elapsed_s: f64,
        won: bool,
    ) {
        let node = self.steps.len();
        self.summary.evaluations += 1;
        self.steps.push(StepRecord {
            node,
            parent: Some(0),
            transform: Some(crate::experts::ROOT_STEP.to_string()),
            schedule: root.schedule.clone(),
            describe: root.name.clone(),
            outcome: outcome.into(),
            bottleneck: None,
            verdict: None,
            reward: 0.0,
            reused: false,
            evaluations: self.summary.evaluations,
            elapsed_s,
        });
        if let (true, Outcome::Measured(m)) = (won, outcome) {
            self.summary.best_node = node;
            self.summary.best_schedule = root.schedule.clone();
            self.summary.best_describe = root.name.clone();
            self.summary.best_measurement = *m;
            self.summary.path = vec![crate::experts::ROOT_STEP.to_string()];
        }
    }

    /// The log as JSON lines, each ending in a newline.
    ///
    /// # Errors
    /// A record does not serialise.
    pub fn to_jsonl(&self) -> Result<String, LogError> {
        let mut out = String::new();
        let mut push = |r: &Record| -> Result<(), LogError> {
            out.push_str(&serde_json::to_string(r).map_err(LogError::Serialize)?);
            out.push('\n');
            Ok(())
        };
        push(&Record::Header(self.header.clone()))?;
        for s in &self.steps {
            push(&Record::Step(s.clone()))?;
        }
        push(&Record::Summary(self.summary.clone()))?;
        Ok(out)
    }

    /// Parses JSON lines; `path` only names the source in errors. Blank lines are ignored.
    ///
    /// # Errors
    /// [`LogError::Malformed`], [`LogError::OutOfOrder`] or [`LogError::Incomplete`], naming `path` and the line.
    pub fn parse_jsonl(text: &str, path: &Path) -> Result<Self, LogError> {
        let mut header = None;
        let mut steps = Vec::new();
        let mut summary = None;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = i + 1;
            let record: Record =
                serde_json::from_str(line).map_err(|source| LogError::Malformed {
                    path: path.to_path_buf(),
                    line: at,
                    source,
                })?;
            let out_of_order = |expected| LogError::OutOfOrder {
                path: path.to_path_buf(),
                line: at,
                expected,
                found: record.kind(),
            };
            if summary.is_some() {
                return Err(out_of_order("the end of the log after the summary"));
            }
            match (record.clone(), header.is_some()) {
                (Record::Header(h), false) => header = Some(h),
                (_, false) => return Err(out_of_order("a header record first")),
                (Record::Header(_), true) => {
                    return Err(out_of_order("a step or summary record"));
                }
                (Record::Step(s), true) => steps.push(s),
                (Record::Summary(s), true) => summary = Some(s),
            }
        }
        match (header, summary) {
            (Some(header), Some(summary)) => Ok(SearchRecords {
                header,
                steps,
                summary,
            }),
            _ => Err(LogError::Incomplete {
                path: path.to_path_buf(),
            }),
        }
    }
}

/// Writes a finished search's log to `path` (its folder is created). A reader never sees half a log: the lines go
/// to a temporary file in the same folder, which is then renamed over `path`.
///
/// # Errors
/// [`LogError::Fs`] naming the path that could not be written, [`LogError::NoBestStep`] or
/// [`LogError::Serialize`] from [`records`].
pub fn write_jsonl<S: Tunable>(
    path: &Path,
    header: &Header,
    log: &SearchLog<S>,
    wall_s: f64,
) -> Result<(), LogError> {
    write_records(path, &records(header, log, wall_s)?)
}

/// Writes records to `path` atomically, as [`write_jsonl`] does.
///
/// # Errors
/// [`LogError::Fs`] naming the path that could not be written; [`LogError::Serialize`].
pub fn write_records(path: &Path, records: &SearchRecords) -> Result<(), LogError> {
    let text = records.to_jsonl()?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "search.jsonl".into());
    // The process id keeps two writers of the same log (two build scripts) off each other's temporary file;
    // the last rename wins, and each rename installs a whole log.
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    fs::write(&tmp, text.as_bytes())?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e.into());
    }
    Ok(())
}

/// Reads a log written by [`write_jsonl`].
///
/// # Errors
/// [`LogError::Fs`] when the file cannot be read; [`LogError::Malformed`], [`LogError::OutOfOrder`] or
/// [`LogError::Incomplete`] naming the file and line.
pub fn read_jsonl(path: &Path) -> Result<SearchRecords, LogError> {
    SearchRecords::parse_jsonl(&fs::read_to_string(path)?, path)
}

/// Reads only the header of a log (the first non-blank line), to find logs by kernel without parsing them.
///
/// # Errors
/// As [`read_jsonl`]; [`LogError::Incomplete`] for an empty file.
pub fn read_header(path: &Path) -> Result<Header, LogError> {
    header_of(&fs::read_to_string(path)?, path)
}

/// The header of the log `text` (the first non-blank line), read from `path`.
///
/// # Errors
/// As [`read_header`], but for reading the file.
pub fn header_of(text: &str, path: &Path) -> Result<Header, LogError> {
    let Some((i, line)) = text.lines().enumerate().find(|(_, l)| !l.trim().is_empty()) else {
        return Err(LogError::Incomplete {
            path: path.to_path_buf(),
        });
    };
    let record: Record = serde_json::from_str(line).map_err(|source| LogError::Malformed {
        path: path.to_path_buf(),
        line: i + 1,
        source,
    })?;
    match record {
        Record::Header(h) => Ok(h),
        other => Err(LogError::OutOfOrder {
            path: path.to_path_buf(),
            line: i + 1,
            expected: "a header record first",
            found: other.kind(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{DEFAULT, Tile};
    use super::*;

    /// A header as a search writes one; only `kernel`, `method` and `seed` vary between the tests' logs.
    fn header(kernel: &str, method: Method, seed: Option<u64>) -> Header {
        Header {
            kernel: kernel.into(),
            spec: "the search tests' tile fixture".into(),
            arch: "sm_90".into(),
            device: "synthetic".into(),
            shape: "synthetic".into(),
            method,
            seed,
            config: config_value(&Config::default()),
            started_at: "2026-01-02T03:04:05Z".into(),
            signals: Signals::Derived,
        }
    }

    /// A measurement with every figure a log line carries set, so a field lost in the round trip shows.
    fn measured(time_ms: f64, sm: f64, dram: f64, registers: u32) -> Outcome {
        Outcome::Measured(Measurement {
            time_ms,
            sm_sol: Some(sm),
            dram_sol: Some(dram),
            tflops: Some(2.0 / time_ms),
            registers,
            ..Measurement::default()
        })
    }

    /// The schedule `name` makes of `from`: each step's schedule is what its transformation really gives, so the
    /// log is one a search over the fixture could have written.
    fn apply(name: &str, from: Tile) -> Tile {
        Tile::catalog()
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.apply_to(&from))
            .unwrap()
    }

    /// A node `transform` made of `parent`'s schedule (or the root).
    fn step(
        node: usize,
        parent: Option<(usize, Tile)>,
        transform: Option<&'static str>,
        outcome: Outcome,
        evaluations: usize,
    ) -> Step<Tile> {
        let schedule = match (parent, transform) {
            (Some((_, from)), Some(name)) => apply(name, from),
            _ => DEFAULT,
        };
        let bottleneck = match &outcome {
            Outcome::Measured(m) => Some(Bottleneck::classify(m, 7.5)),
            Outcome::Rejected(_) => None,
        };
        Step {
            node,
            parent: parent.map(|(p, _)| p),
            transform,
            schedule,
            outcome,
            bottleneck,
            verdict: parent.map(|_| Verdict::Keep(0.1)),
            reward: 0.1,
            reused: false,
            evaluations,
            elapsed_s: evaluations as f64 * 0.5,
        }
    }

    /// A rejection with the characters a JSON string must escape (`<`, `&`, a newline), which a log must keep.
    const SPILL: &str = "ptxas: 96 bytes spilled <lmem> & more\nsecond line";

    /// Default → deepen-k-tile (faster) → grow-thread-tile (fastest), with three rejections and a node that
    /// returns to the default (reused, no evaluation spent).
    fn search_log() -> SearchLog<Tile> {
        let s0 = DEFAULT;
        let root = step(0, None, None, measured(2.0, 40.0, 70.0, 40), 1);
        let deeper = step(
            1,
            Some((0, s0)),
            Some("deepen-k-tile"),
            measured(1.5, 50.0, 60.0, 48),
            2,
        );
        let s1 = deeper.schedule;
        let best = step(
            3,
            Some((1, s1)),
            Some("grow-thread-tile"),
            measured(1.0, 80.0, 45.0, 64),
            4,
        );
        let s2 = best.schedule;
        let mut repeat = step(
            4,
            Some((1, s1)),
            Some("shallow-k-tile"),
            measured(2.0, 40.0, 70.0, 40),
            4,
        );
        assert_eq!(repeat.schedule, s0);
        repeat.reused = true;
        let steps = vec![
            root,
            deeper,
            step(
                2,
                Some((0, s0)),
                Some("grow-block-m"),
                Outcome::Rejected(SPILL.into()),
                3,
            ),
            best,
            repeat,
            step(
                5,
                Some((3, s2)),
                Some("grow-block-n"),
                Outcome::Rejected(SPILL.into()),
                5,
            ),
            step(
                6,
                Some((3, s2)),
                Some("shrink-thread-tile"),
                Outcome::Rejected("gate: max error 3e-2".into()),
                6,
            ),
        ];
        let Outcome::Measured(best_measurement) = steps[3].outcome.clone() else {
            unreachable!()
        };
        SearchLog {
            steps,
            best: s2,
            best_measurement,
            path: vec!["deepen-k-tile", "grow-thread-tile"],
            evaluations: 6,
        }
    }

    fn tmp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("optiml-log-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn write_then_read_round_trips() {
        let dir = tmp_dir("roundtrip");
        let path = dir.join("sub/search.jsonl");
        let log = search_log();
        let h = header("tile", Method::Mcts, Some(7));
        write_jsonl(&path, &h, &log, 3.25).unwrap();
        let back = read_jsonl(&path).unwrap();
        assert_eq!(back, records(&h, &log, 3.25).unwrap());
        assert_eq!(back.summary.best_node, 3);
        assert_eq!(back.summary.path, ["deepen-k-tile", "grow-thread-tile"]);
        assert_eq!(
            back.steps[1].schedule_as::<Tile>().unwrap(),
            log.steps[1].schedule
        );
        assert!(
            matches!(&back.steps[2].outcome, OutcomeRecord::Rejected { reason } if reason.contains("<lmem> & more\n")),
            "{:?}",
            back.steps[2].outcome
        );
        assert_eq!(read_header(&path).unwrap(), h);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + log.steps.len() + 1);
        assert!(lines[0].starts_with(r#"{"kind":"header""#), "{}", lines[0]);
        assert!(lines[1].contains(r#""status":"measured""#), "{}", lines[1]);
        assert!(lines.last().unwrap().starts_with(r#"{"kind":"summary""#));
        // Only the log is left in the folder: the temporary file was renamed.
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A root is logged as a step from the default; the summary names it only where it won, and `analyze`
    /// then shows the path default → root. A log read back keeps it, and a replay of the landscape skips it.
    #[test]
    fn a_root_is_a_step_from_the_default_and_the_best_only_where_it_won() {
        let root = crate::experts::Root {
            name: "seed k/rows.cu:rows".into(),
            schedule: serde_json::json!({"seed": {"file": "k/rows.cu", "function": "rows", "sha256": "ab"}}),
            candidate: crate::experts::Candidate {
                source: String::new(),
                entry: "optiml_program",
                launch: optiml_runtime::Launch::Matmul {
                    bm: 64,
                    bn: 64,
                    threads: 256,
                    smem_bytes: 0,
                    split_k: 1,
                },
                schedule: String::new(),
            },
        };
        let h = header("tile", Method::Mcts, Some(7));
        let log = search_log();
        let mut lost = records(&h, &log, 1.0).unwrap();
        let before = lost.summary.clone();
        lost.add_root(
            &root,
            &Outcome::Rejected("gate: out[3] is NaN".into()),
            1.5,
            false,
        );
        let step = lost.steps.last().unwrap();
        assert_eq!(
            (
                step.node,
                step.parent,
                step.transform.as_deref(),
                step.evaluations
            ),
            (7, Some(0), Some(crate::experts::ROOT_STEP), 7)
        );
        assert_eq!(lost.summary.best_node, before.best_node);
        assert_eq!(lost.summary.evaluations, 7);
        let mut won = records(&h, &log, 1.0).unwrap();
        let fast = measured(0.5, 90.0, 30.0, 32);
        won.add_root(&root, &fast, 1.5, true);
        assert_eq!(won.summary.best_node, 7);
        assert_eq!(won.summary.best_schedule, root.schedule);
        assert_eq!(won.summary.best_describe, root.name);
        assert_eq!(won.summary.path, [crate::experts::ROOT_STEP]);
        let back = SearchRecords::parse_jsonl(&won.to_jsonl().unwrap(), Path::new("x")).unwrap();
        assert_eq!(back, won);
        let a = crate::analyze::analyze(&back).unwrap();
        assert_eq!(a.path.len(), 1);
        assert_eq!(a.path[0].transform, "root: seed k/rows.cu:rows");
        assert!((a.speedup() - 4.0).abs() < 1e-9, "{}", a.speedup());
        assert_eq!(a.roots, [("seed k/rows.cu:rows".to_string(), Ok(0.5))]);
        assert!(
            a.summary()
                .contains("Beside the search: seed k/rows.cu:rows (0.5000 ms)"),
            "{}",
            a.summary()
        );
        let rejected = crate::analyze::analyze(&lost).unwrap();
        assert_eq!(rejected.path.len(), 2, "the search's own best stays");
        assert!(
            rejected
                .summary()
                .contains("seed k/rows.cu:rows (rejected: `gate: out[3] is NaN`)"),
            "{}",
            rejected.summary()
        );
        let replay = crate::search::replay::Replay::<Tile>::new(&back, 1).unwrap();
        assert_eq!(replay.len(), 3);
    }

    #[test]
    fn a_malformed_line_names_the_file_and_line() {
        let text = records(&header("tile", Method::Random, None), &search_log(), 1.0)
            .unwrap()
            .to_jsonl()
            .unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines[2] = r#"{"kind":"step","node":"#.into();
        let path = Path::new("logs/search.jsonl");
        let err = SearchRecords::parse_jsonl(&lines.join("\n"), path).unwrap_err();
        assert!(
            matches!(err, LogError::Malformed { line: 3, .. }),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.starts_with("`logs/search.jsonl` line 3: malformed record: "),
            "{msg}"
        );

        lines[2] = r#"{"kind":"frobnicate"}"#.into();
        let err = SearchRecords::parse_jsonl(&lines.join("\n"), path).unwrap_err();
        assert!(
            matches!(err, LogError::Malformed { line: 3, .. }),
            "{err:?}"
        );

        let err = SearchRecords::parse_jsonl(&lines[3..].join("\n"), path).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`logs/search.jsonl` line 1: expected a header record first, found a step record"
        );
        let cut = lines[..3].join("\n");
        let err = SearchRecords::parse_jsonl(&cut.replace(r#"{"kind":"frobnicate"}"#, ""), path)
            .unwrap_err();
        assert!(matches!(err, LogError::Incomplete { .. }), "{err:?}");

        let missing = read_jsonl(Path::new("/nonexistent/search.jsonl")).unwrap_err();
        assert!(
            missing.to_string().contains("`/nonexistent/search.jsonl`"),
            "{missing}"
        );
    }
}
