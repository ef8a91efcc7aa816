//! What `cargo optiml analyze` prints and draws from a search log ([`crate::search::read_jsonl`]).
//!
//! - [`analyze`]: the path from the default schedule (node 0) to the best node, each transformation with the
//!   bottleneck it was routed on, metrics before → after, and its claimed gain next to the measured speed-up;
//!   [`Analysis::markdown`] prints it as a table and a paragraph.
//! - [`trajectory_svg`]: SM and DRAM SOL along that path, with time in a second panel (the seed's §5.3 figure).
//! - [`convergence_svg`]: best time found against evaluations spent, one line per log, for comparing methods
//!   (MCTS against random search) on equal budgets.
//!
//! The figures are hand-written SVG: a few polylines do not justify a plotting dependency in a build crate.

use crate::families;
use crate::search::{Bottleneck, Measurement, Method, SearchRecords, StepRecord};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

/// One transformation on the path to the best node.
#[derive(Clone, Debug, PartialEq)]
pub struct PathStep {
    /// The node it made.
    pub node: usize,
    /// The transformation's name.
    pub transform: String,
    /// The parent's bottleneck class: what the transformation was routed on.
    pub parent_bottleneck: Option<Bottleneck>,
    /// The parent's measurement.
    pub before: Measurement,
    /// The node's measurement.
    pub after: Measurement,
    /// The speed-up the catalog claims for it (`None` for a transformation the catalog does not hold).
    pub claimed_gain: Option<f64>,
    /// The speed-up measured: parent time / node time.
    pub measured_speedup: f64,
    /// The node's schedule in words.
    pub schedule: String,
}

/// Rejected evaluations that gave the same reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectionGroup {
    /// The reason's first line.
    pub reason: String,
    /// How many evaluations gave it.
    pub count: usize,
}

/// What a search log says, ready to print or draw.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    /// The kernel's name.
    pub kernel: String,
    /// The architecture.
    pub arch: String,
    /// The device.
    pub device: String,
    /// The problem shape tuned for.
    pub shape: String,
    /// How schedules were chosen.
    pub method: Method,
    /// The random seed, if any.
    pub seed: Option<u64>,
    /// The default schedule in words.
    pub default_schedule: String,
    /// The default schedule's measurement.
    pub default: Measurement,
    /// The best schedule in words.
    pub best_schedule: String,
    /// The best schedule's measurement.
    pub best: Measurement,
    /// The transformations from the default to the best node.
    pub path: Vec<PathStep>,
    /// Nodes created.
    pub nodes: usize,
    /// Evaluations spent.
    pub evaluations: usize,
    /// Nodes answered from an earlier evaluation of the same schedule.
    pub reused: usize,
    /// Rejected evaluations, grouped by reason, most frequent first.
    pub rejected: Vec<RejectionGroup>,
    /// Wall-clock seconds of the search.
    pub wall_s: f64,
    /// The kernels evaluated beside the search (a user's seed, the LLM experts' kernels), in order: each one's
    /// name and its time, or why the gate rejected it.
    pub roots: Vec<(String, Result<f64, String>)>,
}

/// Why a log cannot be analysed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// A node the path needs has no step.
    #[error("the log has no step for node {node}")]
    MissingNode {
        /// The node.
        node: usize,
    },
    /// A node on the path to the best one, or the best one, was never measured.
    #[error("node {node} is on the path to the best node but was not measured")]
    Unmeasured {
        /// The node.
        node: usize,
    },
    /// Following parents from the best node never reaches the default schedule.
    #[error("the parents of node {node} never reach the default schedule")]
    Cycle {
        /// Where the walk started.
        node: usize,
    },
}

fn by_node(records: &SearchRecords) -> HashMap<usize, &StepRecord> {
    let mut map = HashMap::new();
    for s in &records.steps {
        map.entry(s.node).or_insert(s);
    }
    map
}

/// The nodes from the root (the default schedule) to the summary's best node, both included.
///
/// # Errors
/// [`AnalyzeError::MissingNode`] or [`AnalyzeError::Cycle`] when the parents do not lead to a root.
pub fn path_nodes(records: &SearchRecords) -> Result<Vec<usize>, AnalyzeError> {
    let steps = by_node(records);
    let best = records.summary.best_node;
    let mut nodes = vec![best];
    let mut at = best;
    loop {
        let step = steps
            .get(&at)
            .ok_or(AnalyzeError::MissingNode { node: at })?;
        let Some(parent) = step.parent else { break };
        // A walk longer than the log has visited some node twice.
        if nodes.len() > records.steps.len() {
            return Err(AnalyzeError::Cycle { node: best });
        }
        nodes.push(parent);
        at = parent;
    }
    nodes.reverse();
    Ok(nodes)
}

/// Analyses a log: the path to the best node with its metrics, and what went wrong along the way.
///
/// # Errors
/// An [`AnalyzeError`] when the log's nodes do not form a path from a measured default to the best node.
pub fn analyze(records: &SearchRecords) -> Result<Analysis, AnalyzeError> {
    let steps = by_node(records);
    let nodes = path_nodes(records)?;
    let measured = |node: usize| -> Result<(&StepRecord, Measurement), AnalyzeError> {
        let step = steps.get(&node).ok_or(AnalyzeError::MissingNode { node })?;
        let m = step
            .outcome
            .measurement()
            .ok_or(AnalyzeError::Unmeasured { node })?;
        Ok((step, *m))
    };
    let (root, default) = measured(nodes[0])?;
    // The log's schedules name the kernel, and so the catalog, the search walked.
    let catalog = families::catalog_of(&records.summary.best_schedule);
    let mut path = Vec::new();
    for pair in nodes.windows(2) {
        let (parent, before) = measured(pair[0])?;
        let (step, after) = measured(pair[1])?;
        let mut transform = step.transform.clone().unwrap_or_else(|| "?".into());
        // A root replaces the schedule rather than transforming it: the row names it.
        if transform == crate::experts::ROOT_STEP {
            transform = format!("{transform}: {}", step.describe);
        }
        path.push(PathStep {
            node: step.node,
            claimed_gain: catalog.as_ref().and_then(|c| c.claimed_gain(&transform)),
            transform,
            parent_bottleneck: parent.bottleneck,
            before,
            after,
            measured_speedup: before.time_ms / after.time_ms.max(f64::MIN_POSITIVE),
            schedule: step.describe.clone(),
        });
    }
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    // Reused nodes repeat an earlier rejection without spending an evaluation; counting them would inflate it.
    for s in records.steps.iter().filter(|s| !s.reused) {
        if let crate::search::OutcomeRecord::Rejected { reason } = &s.outcome {
            *groups.entry(first_line(reason)).or_default() += 1;
        }
    }
    let mut rejected: Vec<RejectionGroup> = groups
        .into_iter()
        .map(|(reason, count)| RejectionGroup { reason, count })
        .collect();
    rejected.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    let h = &records.header;
    Ok(Analysis {
        kernel: h.kernel.clone(),
        arch: h.arch.clone(),
        device: h.device.clone(),
        shape: h.shape.clone(),
        method: h.method,
        seed: h.seed,
        default_schedule: root.describe.clone(),
        default,
        best_schedule: records.summary.best_describe.clone(),
        best: records.summary.best_measurement,
        path,
        nodes: records.steps.len(),
        evaluations: records.summary.evaluations,
        reused: records.steps.iter().filter(|s| s.reused).count(),
        rejected,
        wall_s: records.summary.wall_s,
        roots: roots(records),
    })
}

/// The kernels a log evaluated beside its search (a user's seed, the LLM experts' kernels), in order: each one's
/// name and its time, or the first line of why the gate rejected it.
pub fn roots(records: &SearchRecords) -> Vec<(String, Result<f64, String>)> {
    records
        .steps
        .iter()
        .filter(|s| s.transform.as_deref() == Some(crate::experts::ROOT_STEP))
        .map(|s| {
            let outcome = match &s.outcome {
                crate::search::OutcomeRecord::Measured(m) => Ok(m.time_ms),
                crate::search::OutcomeRecord::Rejected { reason } => Err(first_line(reason)),
            };
            (s.describe.clone(), outcome)
        })
        .collect()
}

/// [`roots`] in words, for summaries and reports (empty when there were none).
pub fn roots_sentence(roots: &[(String, Result<f64, String>)]) -> String {
    if roots.is_empty() {
        return String::new();
    }
    let each: Vec<String> = roots
        .iter()
        .map(|(name, outcome)| match outcome {
            Ok(t) => format!("{name} ({} ms)", ms(*t)),
            Err(why) => format!("{name} (rejected: `{}`)", why.replace('`', "'")),
        })
        .collect();
    format!(
        "Beside the search: {}; the best of them is kept only where it beats the search's best.",
        each.join(", ")
    )
}

fn first_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line = line.trim();
    const MAX: usize = 100;
    match line.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

fn bottleneck_name(b: Option<Bottleneck>) -> &'static str {
    match b {
        Some(Bottleneck::Memory) => "memory",
        Some(Bottleneck::Compute) => "compute",
        Some(Bottleneck::Mixed) => "mixed",
        None => "–",
    }
}

/// Milliseconds with about four significant digits: kernels run from microseconds to seconds.
fn ms(t: f64) -> String {
    if t >= 100.0 {
        format!("{t:.1}")
    } else if t >= 1.0 {
        format!("{t:.3}")
    } else {
        format!("{t:.4}")
    }
}

fn opt(v: Option<f64>, precision: usize) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.precision$}"))
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

impl Analysis {
    /// The best schedule's speed-up over the default.
    pub fn speedup(&self) -> f64 {
        self.default.time_ms / self.best.time_ms.max(f64::MIN_POSITIVE)
    }

    /// Rejected evaluations.
    pub fn rejected_count(&self) -> usize {
        self.rejected.iter().map(|g| g.count).sum()
    }

    /// The table and the summary paragraph, as markdown.
    pub fn markdown(&self) -> String {
        format!(
            "## `{}` on {}\n\n{}\n{}\n",
            self.kernel,
            self.arch,
            self.table(),
            self.summary()
        )
    }

    /// The path as a markdown table: one row for the default, then one per transformation.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| step | transformation | parent bottleneck | time (ms) | TFLOP/s | SM SOL % | DRAM SOL % | registers | claimed | measured |\n\
             |---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let d = &self.default;
        // The default has no parent; its own class shows as the first transformation's parent bottleneck.
        let _ = writeln!(
            out,
            "| 0 | default | – | {} | {} | {} | {} | {} | – | – |",
            ms(d.time_ms),
            opt(d.tflops, 2),
            opt(d.sm_sol, 1),
            opt(d.dram_sol, 1),
            d.registers
        );
        let arrow = |a: String, b: String| format!("{a} → {b}");
        for (i, p) in self.path.iter().enumerate() {
            let (b, a) = (&p.before, &p.after);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2}× |",
                i + 1,
                cell(&p.transform),
                bottleneck_name(p.parent_bottleneck),
                arrow(ms(b.time_ms), ms(a.time_ms)),
                arrow(opt(b.tflops, 2), opt(a.tflops, 2)),
                arrow(opt(b.sm_sol, 1), opt(a.sm_sol, 1)),
                arrow(opt(b.dram_sol, 1), opt(a.dram_sol, 1)),
                arrow(b.registers.to_string(), a.registers.to_string()),
                p.claimed_gain
                    .map_or_else(|| "–".into(), |g| format!("{g:.2}×")),
                p.measured_speedup
            );
        }
        out
    }

    /// One paragraph: what was searched, what it cost, what was rejected and why, and what it gained.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "`{}` on {}{}, tuned for {} by {}{}: {} evaluations in {:.1} s over {} nodes{}.",
            self.kernel,
            self.arch,
            if self.device.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.device)
            },
            self.shape,
            self.method,
            self.seed
                .map_or_else(String::new, |s| format!(" (seed {s})")),
            self.evaluations,
            self.wall_s,
            self.nodes,
            match self.reused {
                0 => String::new(),
                1 => " (1 answered from an earlier evaluation of the same schedule)".into(),
                n => format!(" ({n} answered from earlier evaluations of the same schedules)"),
            },
        );
        let rejected = self.rejected_count();
        if rejected == 0 {
            out.push_str(" No candidate was rejected.");
        } else {
            let groups: Vec<String> = self
                .rejected
                .iter()
                .map(|g| format!("{}× `{}`", g.count, g.reason.replace('`', "'")))
                .collect();
            let _ = write!(
                out,
                " {rejected} {} rejected: {}.",
                if rejected == 1 {
                    "candidate was"
                } else {
                    "candidates were"
                },
                groups.join(", ")
            );
        }
        if self.path.is_empty() {
            let _ = write!(
                out,
                " No transformation beat the default ({}, {} ms).",
                self.default_schedule,
                ms(self.default.time_ms)
            );
        } else {
            let names: Vec<&str> = self.path.iter().map(|p| p.transform.as_str()).collect();
            let _ = write!(
                out,
                " Best: {}, {} ms against {} ms for the default ({}): {:.2}× after {} ({}).",
                self.best_schedule,
                ms(self.best.time_ms),
                ms(self.default.time_ms),
                self.default_schedule,
                self.speedup(),
                if names.len() == 1 {
                    "1 transformation".to_owned()
                } else {
                    format!("{} transformations", names.len())
                },
                names.join(" → ")
            );
        }
        if !self.roots.is_empty() {
            let _ = write!(out, " {}", roots_sentence(&self.roots));
        }
        out
    }
}

/// Escapes text for SVG content and attribute values.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const SM_COLOUR: &str = "#1f77b4";
const DRAM_COLOUR: &str = "#d62728";
const TIME_COLOUR: &str = "#2ca02c";
const FONT: &str = r#"font-family="sans-serif" font-size="12""#;

fn svg_open(width: f64, height: f64) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" {FONT}>\n\
         <rect x=\"0\" y=\"0\" width=\"{width:.0}\" height=\"{height:.0}\" fill=\"white\"/>\n"
    )
}

fn polyline(out: &mut String, class: &str, colour: &str, points: &[(f64, f64)], tooltip: &str) {
    styled_polyline(out, class, colour, "", points, tooltip);
}

/// A polyline with extra attributes (`style`, e.g. a dash pattern) after the stroke.
fn styled_polyline(
    out: &mut String,
    class: &str,
    colour: &str,
    style: &str,
    points: &[(f64, f64)],
    tooltip: &str,
) {
    if points.is_empty() {
        return;
    }
    let pts: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    let _ = writeln!(
        out,
        "<polyline class=\"{class}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{style} points=\"{}\"><title>{}</title></polyline>",
        pts.join(" "),
        xml(tooltip)
    );
}

fn legend(out: &mut String, (x, y): (f64, f64), colour: &str, style: &str, label: &str) {
    let _ = writeln!(
        out,
        "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{colour}\" stroke-width=\"3\"{style}/>\
         <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
        x + 24.0,
        x + 30.0,
        y + 4.0,
        xml(label)
    );
}

/// A value axis: tick values, bottom to top, and how to label them.
struct Axis {
    ticks: Vec<f64>,
    decimals: usize,
    suffix: &'static str,
}

impl Axis {
    /// About `n` round steps (1, 2 or 5 × 10^k) covering `lo..=hi`: tick labels a reader can interpolate between.
    fn nice(lo: f64, hi: f64, n: usize) -> Axis {
        let (lo, hi) = if hi > lo && lo.is_finite() && hi.is_finite() {
            (lo, hi)
        } else {
            (0.0, 1.0)
        };
        let raw = (hi - lo) / n.max(1) as f64;
        let magnitude = 10f64.powf(raw.log10().floor());
        let step = magnitude
            * match raw / magnitude {
                r if r <= 1.0 => 1.0,
                r if r <= 2.0 => 2.0,
                r if r <= 5.0 => 5.0,
                _ => 10.0,
            };
        let first = (lo / step).floor();
        let count = ((hi / step).ceil() - first).max(1.0) as usize;
        Axis {
            ticks: (0..=count).map(|i| (first + i as f64) * step).collect(),
            decimals: (-step.log10().floor()).max(0.0) as usize,
            suffix: "",
        }
    }

    fn lo(&self) -> f64 {
        self.ticks.first().copied().unwrap_or(0.0)
    }

    fn hi(&self) -> f64 {
        self.ticks.last().copied().unwrap_or(1.0)
    }

    fn label(&self, v: f64) -> String {
        format!("{v:.0$}{1}", self.decimals, self.suffix)
    }

    /// The y coordinate of `v` in a panel spanning `top..bottom`.
    fn y(&self, v: f64, (top, bottom): (f64, f64)) -> f64 {
        let span = (self.hi() - self.lo()).max(f64::MIN_POSITIVE);
        bottom - (v - self.lo()) / span * (bottom - top)
    }

    /// Gridlines, tick labels, the axis lines and the rotated title, for a panel spanning `left..right` ×
    /// `top..bottom`.
    fn draw(
        &self,
        out: &mut String,
        (left, right): (f64, f64),
        (top, bottom): (f64, f64),
        title: &str,
    ) {
        for &v in &self.ticks {
            let y = self.y(v, (top, bottom));
            let _ = writeln!(
                out,
                "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{right:.1}\" y2=\"{y:.1}\" stroke=\"#dddddd\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                left - 6.0,
                y + 4.0,
                xml(&self.label(v))
            );
        }
        let (tx, ty) = (left - 58.0, (top + bottom) / 2.0);
        let _ = writeln!(
            out,
            "<line x1=\"{left:.1}\" y1=\"{top:.1}\" x2=\"{left:.1}\" y2=\"{bottom:.1}\" stroke=\"black\"/>\
             <line x1=\"{left:.1}\" y1=\"{bottom:.1}\" x2=\"{right:.1}\" y2=\"{bottom:.1}\" stroke=\"black\"/>\
             <text x=\"{tx:.1}\" y=\"{ty:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 {tx:.1} {ty:.1})\">{}</text>",
            xml(title)
        );
    }
}

/// SM and DRAM SOL along the path from the default to the best schedule (x: step, labelled with the
/// transformation; y: 0–100 %), with the kernel time in a second panel below: the seed's §5.3 figure.
pub fn trajectory_svg(a: &Analysis) -> String {
    let mut points = vec![("default".to_owned(), a.default)];
    points.extend(
        a.path
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("{}. {}", i + 1, p.transform), p.after)),
    );
    let n = points.len();
    let (left, legend_w) = (90.0, 170.0);
    let plot_w = (110.0 * (n.saturating_sub(1)) as f64).max(420.0);
    let right = left + plot_w;
    let width = right + legend_w;
    let (sol_top, sol_bottom) = (60.0, 260.0);
    let (time_top, time_bottom) = (300.0, 420.0);
    let height = 500.0;
    let x = |i: usize| {
        if n == 1 {
            (left + right) / 2.0
        } else {
            left + 30.0 + (plot_w - 60.0) * i as f64 / (n - 1) as f64
        }
    };

    let mut out = svg_open(width, height);
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">{}</text>\
         <text x=\"{:.1}\" y=\"42\" text-anchor=\"middle\" fill=\"#555555\">{}</text>",
        (left + right) / 2.0,
        xml(&format!(
            "{} on {}: SM and DRAM SOL along the search path",
            a.kernel, a.arch
        )),
        (left + right) / 2.0,
        xml(&format!(
            "{} {}, {} → {} ms ({:.2}×), {} evaluations",
            a.shape,
            a.method,
            ms(a.default.time_ms),
            ms(a.best.time_ms),
            a.speedup(),
            a.evaluations
        )),
    );

    let sol_axis = Axis {
        ticks: vec![0.0, 25.0, 50.0, 75.0, 100.0],
        decimals: 0,
        suffix: "%",
    };
    sol_axis.draw(&mut out, (left, right), (sol_top, sol_bottom), "SOL (%)");
    let sol_y = |v: f64| sol_axis.y(v.clamp(0.0, 100.0), (sol_top, sol_bottom));
    let sm: Vec<(f64, f64)> = points
        .iter()
        .enumerate()
        .filter_map(|(i, (_, m))| m.sm_sol.map(|v| (x(i), sol_y(v))))
        .collect();
    let dram: Vec<(f64, f64)> = points
        .iter()
        .enumerate()
        .filter_map(|(i, (_, m))| m.dram_sol.map(|v| (x(i), sol_y(v))))
        .collect();
    polyline(&mut out, "sm-sol", SM_COLOUR, &sm, "SM SOL (%)");
    polyline(&mut out, "dram-sol", DRAM_COLOUR, &dram, "DRAM SOL (%)");
    for (series, colour) in [(&sm, SM_COLOUR), (&dram, DRAM_COLOUR)] {
        for (px, py) in series.iter() {
            let _ = writeln!(
                out,
                "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3.5\" fill=\"{colour}\"/>"
            );
        }
    }
    if sm.is_empty() && dram.is_empty() {
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555555\">no SOL figures in this log (time-only signals)</text>",
            (left + right) / 2.0,
            (sol_top + sol_bottom) / 2.0
        );
    }

    let t_max = points
        .iter()
        .map(|(_, m)| m.time_ms)
        .fold(0.0_f64, f64::max);
    // Time starts at zero: a speed-up reads as the ratio of heights.
    let time_axis = Axis::nice(0.0, t_max * 1.05, 3);
    time_axis.draw(
        &mut out,
        (left, right),
        (time_top, time_bottom),
        "time (ms)",
    );
    let time_y = |t: f64| time_axis.y(t, (time_top, time_bottom));
    let time: Vec<(f64, f64)> = points
        .iter()
        .enumerate()
        .map(|(i, (_, m))| (x(i), time_y(m.time_ms)))
        .collect();
    polyline(&mut out, "time", TIME_COLOUR, &time, "time (ms)");
    for (i, (px, py)) in time.iter().enumerate() {
        let _ = writeln!(
            out,
            "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3.5\" fill=\"{TIME_COLOUR}\"/>\
             <text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\">{}</text>",
            py - 7.0,
            ms(points[i].1.time_ms)
        );
    }

    for (i, (label, _)) in points.iter().enumerate() {
        let (lx, ly) = (x(i), time_bottom + 16.0);
        let _ = writeln!(
            out,
            "<line x1=\"{lx:.1}\" y1=\"{time_bottom:.1}\" x2=\"{lx:.1}\" y2=\"{:.1}\" stroke=\"black\"/>\
             <text x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"end\" transform=\"rotate(-30 {lx:.1} {ly:.1})\">{}</text>",
            time_bottom + 4.0,
            xml(label)
        );
    }

    let lx = right + 20.0;
    legend(&mut out, (lx, sol_top + 10.0), SM_COLOUR, "", "SM SOL");
    legend(&mut out, (lx, sol_top + 30.0), DRAM_COLOUR, "", "DRAM SOL");
    legend(
        &mut out,
        (lx, time_top + 10.0),
        TIME_COLOUR,
        "",
        "time (ms)",
    );
    out.push_str("</svg>\n");
    out
}

/// The best time a log had found after each evaluation: one line of [`convergence_svg`].
#[derive(Clone, Debug, PartialEq)]
pub struct Convergence {
    /// What the line is called (a file name, or method and seed).
    pub label: String,
    /// How the log's schedules were chosen.
    pub method: Method,
    /// `(evaluations spent, best time so far in ms)`, evaluations increasing; starts at the first measurement.
    pub points: Vec<(usize, f64)>,
}

impl Convergence {
    /// The curve of a log; `label` names it in the legend's tooltip and in tables.
    pub fn of(records: &SearchRecords, label: impl Into<String>) -> Self {
        let mut points: Vec<(usize, f64)> = Vec::new();
        let mut best: Option<f64> = None;
        // Only evaluations cost budget: a reused node neither spends one nor finds anything new.
        for s in records.steps.iter().filter(|s| !s.reused) {
            if let Some(m) = s.outcome.measurement() {
                best = Some(best.map_or(m.time_ms, |b| b.min(m.time_ms)));
            }
            if let Some(b) = best {
                match points.last_mut() {
                    Some(last) if last.0 == s.evaluations => last.1 = b,
                    _ => points.push((s.evaluations, b)),
                }
            }
        }
        if let (Some(b), Some(&(e, _))) = (best, points.last())
            && records.summary.evaluations > e
        {
            points.push((records.summary.evaluations, b));
        }
        Convergence {
            label: label.into(),
            method: records.header.method,
            points,
        }
    }

    /// The best time found.
    pub fn best_ms(&self) -> Option<f64> {
        self.points.last().map(|p| p.1)
    }

    /// The evaluations spent when the best time was first found.
    pub fn evaluations_to_best(&self) -> Option<usize> {
        let best = self.best_ms()?;
        self.points.iter().find(|p| p.1 <= best).map(|p| p.0)
    }
}

/// Runs of different methods often share stretches of curve (they start from the same default): a dash pattern
/// per method keeps the one underneath visible.
fn method_style(m: Method) -> &'static str {
    match m {
        Method::Mcts => " stroke-opacity=\"0.85\"",
        Method::Random => " stroke-opacity=\"0.85\" stroke-dasharray=\"7 4\"",
        Method::Exhaustive => " stroke-opacity=\"0.85\" stroke-dasharray=\"2 3\"",
    }
}

fn method_colour(m: Method) -> &'static str {
    match m {
        Method::Mcts => "#1f77b4",
        Method::Random => "#ff7f0e",
        Method::Exhaustive => "#7f7f7f",
    }
}

/// The curves as a markdown table: per log, its method, evaluations, first and best time, speed-up, and the
/// evaluations it took to reach its best.
pub fn convergence_table(series: &[Convergence]) -> String {
    let mut out = String::from(
        "| log | method | evaluations | first (ms) | best (ms) | speed-up | best found at evaluation |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    for c in series {
        let (Some(first), Some(last)) = (c.points.first(), c.points.last()) else {
            let _ = writeln!(
                out,
                "| {} | {} | – | – | – | – | – |",
                cell(&c.label),
                c.method
            );
            continue;
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.2}× | {} |",
            cell(&c.label),
            c.method,
            last.0,
            ms(first.1),
            ms(last.1),
            first.1 / last.1.max(f64::MIN_POSITIVE),
            c.evaluations_to_best().unwrap_or(0)
        );
    }
    out
}

/// Best time found (y) against evaluations spent (x), one step-shaped polyline per log, coloured by method, with
/// a legend: the honest comparison of search methods on the same budget.
pub fn convergence_svg(series: &[Convergence], title: &str) -> String {
    let (left, right, top, bottom) = (100.0, 570.0, 60.0, 360.0);
    let (width, height) = (right + 200.0, bottom + 60.0);
    let all = series.iter().flat_map(|c| c.points.iter());
    let x_max = all.clone().map(|p| p.0).max().unwrap_or(1).max(1) as f64;
    let (lo, hi) = all.fold((f64::INFINITY, 0.0_f64), |(lo, hi), p| {
        (lo.min(p.1), hi.max(p.1))
    });
    // The axis spans the times found, not zero to the slowest: the curves differ by a few percent and would
    // otherwise be one line. The labelled ticks keep the scale honest. A single value gets a range of its own.
    let axis = if lo.is_finite() && hi > lo {
        let pad = (hi - lo) * 0.05;
        Axis::nice((lo - pad).max(0.0), hi + pad, 5)
    } else if lo.is_finite() {
        Axis::nice(lo * 0.9, lo * 1.1, 4)
    } else {
        Axis::nice(0.0, 1.0, 4)
    };
    let x = |e: usize| left + (right - left) * e as f64 / x_max;
    let y = |t: f64| axis.y(t, (top, bottom));

    let mut out = svg_open(width, height);
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"28\" text-anchor=\"middle\" font-size=\"15\">{}</text>",
        (left + right) / 2.0,
        xml(title)
    );
    axis.draw(
        &mut out,
        (left, right),
        (top, bottom),
        "best time found (ms)",
    );
    let x_step = ((x_max / 8.0).ceil() as usize).max(1);
    for e in (0..=x_max as usize).step_by(x_step) {
        let _ = writeln!(
            out,
            "<line x1=\"{0:.1}\" y1=\"{bottom:.1}\" x2=\"{0:.1}\" y2=\"{1:.1}\" stroke=\"black\"/>\
             <text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\">{e}</text>",
            x(e),
            bottom + 4.0,
            bottom + 18.0
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">evaluations</text>",
        (left + right) / 2.0,
        bottom + 40.0
    );

    for c in series {
        // A best-so-far curve only changes at an evaluation: draw it as stairs, not as slopes between them.
        let mut pts = Vec::new();
        for (i, &(e, t)) in c.points.iter().enumerate() {
            if i > 0 {
                pts.push((x(e), y(c.points[i - 1].1)));
            }
            pts.push((x(e), y(t)));
        }
        styled_polyline(
            &mut out,
            &format!("run {}", c.method),
            method_colour(c.method),
            method_style(c.method),
            &pts,
            &c.label,
        );
        if let Some(&(ex, ey)) = pts.last() {
            let _ = writeln!(
                out,
                "<circle cx=\"{ex:.1}\" cy=\"{ey:.1}\" r=\"3.5\" fill=\"{}\"><title>{}</title></circle>",
                method_colour(c.method),
                xml(&c.label)
            );
        }
    }

    let mut methods: BTreeMap<Method, usize> = BTreeMap::new();
    for c in series {
        *methods.entry(c.method).or_default() += 1;
    }
    for (i, (m, count)) in methods.iter().enumerate() {
        let label = format!("{m} ({count} {})", if *count == 1 { "run" } else { "runs" });
        legend(
            &mut out,
            (right + 20.0, top + 10.0 + 20.0 * i as f64),
            method_colour(*m),
            method_style(*m),
            &label,
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::families::matmul::simt_f32::Schedule;
    use crate::search::Tunable;
    use crate::search::{
        Config, Header, Outcome, SearchLog, Signals, Step, Verdict, config_value, records,
    };

    // The schedule grows fields as the template does; the rest come from the default.
    #[allow(clippy::needless_update)]
    fn schedule(bm: u32, bn: u32, bk: u32, tm: u32, tn: u32) -> Schedule {
        Schedule {
            bm,
            bn,
            bk,
            tm,
            tn,
            ..Schedule::default_for("sm_90".parse().unwrap())
        }
    }

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

    fn step(
        node: usize,
        parent: Option<usize>,
        transform: Option<&'static str>,
        schedule: Schedule,
        outcome: Outcome,
        evaluations: usize,
    ) -> Step<Schedule> {
        let bottleneck = match &outcome {
            Outcome::Measured(m) => Some(Bottleneck::classify(m, 7.5)),
            Outcome::Rejected(_) => None,
        };
        Step {
            node,
            parent,
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

    const SPILL: &str = "ptxas: 96 bytes spilled <lmem> & more\nsecond line";

    /// Default → deepen-k-tile (faster) → grow-thread-tile (fastest), with two rejections and a reused node.
    pub(crate) fn search_log() -> SearchLog<Schedule> {
        let s0 = schedule(64, 64, 8, 4, 4);
        let s1 = schedule(64, 64, 16, 4, 4);
        let s2 = schedule(64, 64, 16, 8, 4);
        let mut repeat = step(
            4,
            Some(1),
            Some("shallow-k-tile"),
            s0,
            measured(2.0, 40.0, 70.0, 40),
            4,
        );
        repeat.reused = true;
        let steps = vec![
            step(0, None, None, s0, measured(2.0, 40.0, 70.0, 40), 1),
            step(
                1,
                Some(0),
                Some("deepen-k-tile"),
                s1,
                measured(1.5, 50.0, 60.0, 48),
                2,
            ),
            step(
                2,
                Some(0),
                Some("grow-block-m"),
                schedule(128, 64, 8, 4, 4),
                Outcome::Rejected(SPILL.into()),
                3,
            ),
            step(
                3,
                Some(1),
                Some("grow-thread-tile"),
                s2,
                measured(1.0, 80.0, 45.0, 64),
                4,
            ),
            repeat,
            step(
                5,
                Some(3),
                Some("grow-block-n"),
                schedule(64, 128, 16, 8, 4),
                Outcome::Rejected(SPILL.into()),
                5,
            ),
            step(
                6,
                Some(3),
                Some("shrink-thread-tile"),
                s1,
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

    pub(crate) fn header(kernel: &str, method: Method, seed: Option<u64>) -> Header {
        Header {
            kernel: kernel.into(),
            spec: "bmm f32 [b,m,k]x[b,k,n]".into(),
            arch: "sm_90".into(),
            device: "NVIDIA H200".into(),
            shape: "256x1024x1024x1024".into(),
            method,
            seed,
            config: config_value(&Config::default()),
            started_at: "2026-01-02T03:04:05Z".into(),
            signals: Signals::Derived,
        }
    }

    fn analysis() -> Analysis {
        let r = records(&header("bmm", Method::Mcts, Some(7)), &search_log(), 3.0).unwrap();
        analyze(&r).unwrap()
    }

    #[test]
    fn the_path_runs_from_the_default_to_the_best_node() {
        let r = records(&header("bmm", Method::Mcts, Some(7)), &search_log(), 3.0).unwrap();
        assert_eq!(path_nodes(&r).unwrap(), [0, 1, 3]);
        let a = analyze(&r).unwrap();
        let names: Vec<&str> = a.path.iter().map(|p| p.transform.as_str()).collect();
        assert_eq!(names, ["deepen-k-tile", "grow-thread-tile"]);
        let first = &a.path[0];
        assert_eq!(first.parent_bottleneck, Some(Bottleneck::Memory));
        assert_eq!((first.before.time_ms, first.after.time_ms), (2.0, 1.5));
        let claimed = <Schedule as crate::search::Tunable>::catalog()
            .into_iter()
            .find(|t| t.name == "deepen-k-tile")
            .map(|t| t.claimed_gain);
        assert!(claimed.is_some());
        assert_eq!(first.claimed_gain, claimed);
        assert!((first.measured_speedup - 2.0 / 1.5).abs() < 1e-12);
        assert_eq!(a.path[1].parent_bottleneck, Some(Bottleneck::Memory));
        assert_eq!(a.path[1].after.registers, 64);
        assert!((a.speedup() - 2.0).abs() < 1e-12);
        // The reused node spent nothing and is not counted among the rejections.
        assert_eq!(a.reused, 1);
        assert_eq!(
            a.rejected,
            [
                RejectionGroup {
                    reason: "ptxas: 96 bytes spilled <lmem> & more".into(),
                    count: 2
                },
                RejectionGroup {
                    reason: "gate: max error 3e-2".into(),
                    count: 1
                },
            ]
        );

        let md = a.markdown();
        assert!(md.contains(&format!("| 1 | deepen-k-tile | memory | 2.000 → 1.500 | 1.00 → 1.33 | 40.0 → 50.0 | 70.0 → 60.0 | 40 → 48 | {:.2}× | 1.33× |", claimed.unwrap())), "{md}");
        assert!(
            md.contains("| 2 | grow-thread-tile | memory | 1.500 → 1.000 |"),
            "{md}"
        );
        assert!(
            md.contains("6 evaluations in 3.0 s over 7 nodes (1 answered"),
            "{md}"
        );
        assert!(md.contains("3 candidates were rejected: 2× `ptxas: 96 bytes spilled <lmem> & more`, 1× `gate: max error 3e-2`."), "{md}");
        assert!(
            md.contains("2.00× after 2 transformations (deepen-k-tile → grow-thread-tile)"),
            "{md}"
        );
    }

    #[test]
    fn a_broken_parent_chain_is_an_error() {
        let mut r = records(&header("bmm", Method::Mcts, None), &search_log(), 1.0).unwrap();
        r.steps.retain(|s| s.node != 1);
        assert!(matches!(
            analyze(&r),
            Err(AnalyzeError::MissingNode { node: 1 })
        ));
        let mut r = records(&header("bmm", Method::Mcts, None), &search_log(), 1.0).unwrap();
        r.steps[0].parent = Some(3);
        assert!(matches!(analyze(&r), Err(AnalyzeError::Cycle { node: 3 })));
        let mut r = records(&header("bmm", Method::Mcts, None), &search_log(), 1.0).unwrap();
        r.summary.best_node = 5;
        assert!(matches!(
            analyze(&r),
            Err(AnalyzeError::Unmeasured { node: 5 })
        ));
    }

    #[test]
    fn the_default_alone_is_a_path_of_length_zero() {
        let mut log = search_log();
        log.steps.truncate(1);
        log.best = log.steps[0].schedule;
        log.path.clear();
        let r = records(&header("bmm", Method::Mcts, None), &log, 1.0).unwrap();
        let a = analyze(&r).unwrap();
        assert!(a.path.is_empty());
        assert!(a.summary().contains("No transformation beat the default"));
        assert!(trajectory_svg(&a).contains("class=\"time\""));
    }

    #[test]
    fn the_trajectory_svg_draws_both_sol_series_and_time_with_escaped_labels() {
        let mut a = analysis();
        a.kernel = "bmm<f32> & co".into();
        a.path[0].transform = "tile<2> & more".into();
        let svg = trajectory_svg(&a);
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 3);
        for class in ["sm-sol", "dram-sol", "time"] {
            assert!(svg.contains(&format!("class=\"{class}\"")), "{class}");
        }
        assert!(svg.contains("bmm&lt;f32&gt; &amp; co"));
        assert!(svg.contains("1. tile&lt;2&gt; &amp; more"));
        assert!(!svg.contains("tile<2>"));
        assert!(svg.contains(">SM SOL<") && svg.contains(">DRAM SOL<") && svg.contains("100%"));
        // Every opened element is closed: a cheap well-formedness check without an XML parser.
        let opens = svg.matches("<polyline").count();
        assert_eq!(opens, svg.matches("</polyline>").count());
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
    }

    #[test]
    fn convergence_curves_track_the_best_time_per_evaluation() {
        let mcts = records(&header("bmm", Method::Mcts, Some(1)), &search_log(), 1.0).unwrap();
        let c = Convergence::of(&mcts, "mcts seed 1");
        assert_eq!(
            c.points,
            [(1, 2.0), (2, 1.5), (3, 1.5), (4, 1.0), (5, 1.0), (6, 1.0)]
        );
        assert_eq!(c.evaluations_to_best(), Some(4));

        let mut random = search_log();
        random.steps.truncate(3);
        random.best = random.steps[1].schedule;
        random.evaluations = 3;
        let random = records(&header("bmm", Method::Random, Some(2)), &random, 1.0).unwrap();
        let r = Convergence::of(&random, "random & <seed 2>");
        assert_eq!(r.best_ms(), Some(1.5));

        let series = [c, r];
        let svg = convergence_svg(&series, "bmm: MCTS vs random");
        assert!(svg.starts_with("<svg "));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("class=\"run mcts\"") && svg.contains("class=\"run random\""));
        assert!(svg.contains("random &amp; &lt;seed 2&gt;"));
        assert!(svg.contains(">mcts (1 run)<") && svg.contains(">random (1 run)<"));
        let table = convergence_table(&series);
        assert!(
            table.contains("| mcts seed 1 | mcts | 6 | 2.000 | 1.000 | 2.00× | 4 |"),
            "{table}"
        );
        assert!(convergence_svg(&[], "empty").contains("</svg>"));
    }
}
