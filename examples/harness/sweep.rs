//! The matmul sweeps' driver, one for every element type: each case is drawn, launched into a poisoned output,
//! checked against float64, compared with the output of the best library call ([`crate::library`]: cuBLAS with a
//! workspace or one of cuBLASLt's heuristic algorithms, whichever is fastest on the row's operands), timed beside
//! it in alternating rounds, and ends as a row of the console table, the JSON and the markdown. A sweep program
//! holds its kernels, its cases and how it launches each kernel; [`SweepKernel`] tells the driver the rest.

use optiml::cudarc::driver::{CudaSlice, CudaStream};
use std::path::Path;
use std::sync::Arc;

use crate::library::{Library, Math};
use crate::matmul::{Activation, CublasGemm, GemmShape, Operands};
use crate::report::{Align, Table, cell_text, geomean, show_geomean, write_report};
use crate::{BoxError, Stats, arg_value, copy_bandwidth, poisoned, rel_diff, time_pair};

/// Elements of every output checked against float64.
const SAMPLES: usize = 2048;
/// Untimed runs of the kernel and of the library call before the timed rounds.
const WARMUP: usize = 5;
/// Timed rounds, each one run of the kernel and one of the library call.
const ROUNDS: usize = 30;

/// What the driver needs to know about a declared kernel.
pub trait SweepKernel: Copy {
    /// Its name as declared (and as `--kernels` selects it).
    fn name(self) -> &'static str;
    /// A stored `k × m`.
    fn trans_a(self) -> bool {
        false
    }
    /// B stored `n × k`.
    fn trans_b(self) -> bool {
        false
    }
    /// One B for every batch item.
    fn shared_b(self) -> bool {
        false
    }
    /// The fused bias + activation epilogue, by name and as the reference applies it (the library runs the
    /// plain product, so the row is not compared with the library's output).
    fn epilogue(self) -> Option<(&'static str, Activation)> {
        None
    }
    /// What its precision lets the library do with fp32 operands (the library call it is timed beside computes
    /// in the same precision).
    fn math(self) -> Math {
        Math::Exact
    }
    /// The sampled check's tolerance, relative to the terms' magnitude.
    fn tolerance(self) -> f64;
    /// How far (relative L2) optiml's output may lie from the library's: further, and the two do not compute the
    /// same thing, so the speed ratio would mean nothing.
    fn agreement(self) -> f64;
    /// Bytes of one element of A, B and C (the matrix-vector rows' least traffic).
    fn element_bytes(self) -> usize;
    /// Which of [`Sweep::groups`] its matrix-matrix rows are tabled and averaged in.
    fn group(self) -> usize;
    /// The fields of its JSON rows that say what it computes in (a precision, a type and its tolerance).
    fn json(self) -> serde_json::Map<String, serde_json::Value>;
    /// The `f32, exact` kernel of the same product, for a plain-f32 kernel that may run 3xTF32: its error on the
    /// row's operands is the one the gate holds this kernel's to (within 2×), so the row shows both.
    fn exact_twin(self) -> Option<Self> {
        None
    }
}

/// One row of a sweep: a kernel at a shape.
#[derive(Clone, Copy, Debug)]
pub struct Case<K> {
    /// What the shape is (`square`, `tall-skinny`, …).
    pub label: &'static str,
    /// The kernel.
    pub kernel: K,
    /// Batch items.
    pub batch: usize,
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// The inner dimension.
    pub k: usize,
}

/// A [`Case`], for the sweeps' tables of constants.
pub const fn case<K>(
    label: &'static str,
    kernel: K,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
) -> Case<K> {
    Case {
        label,
        kernel,
        batch,
        m,
        n,
        k,
    }
}

impl<K: SweepKernel> Case<K> {
    /// Whether one side of the product is a vector.
    pub fn is_gemv(&self) -> bool {
        self.m == 1 || self.n == 1
    }
    /// `batch×m×n×k`.
    pub fn shape(&self) -> String {
        format!("{}×{}×{}×{}", self.batch, self.m, self.n, self.k)
    }
    /// The product's shape and layout.
    pub fn gemm_shape(&self) -> GemmShape {
        GemmShape {
            batch: self.batch,
            m: self.m,
            n: self.n,
            k: self.k,
            trans_a: self.kernel.trans_a(),
            trans_b: self.kernel.trans_b(),
            shared_b: self.kernel.shared_b(),
        }
    }
    fn flops(&self) -> f64 {
        2.0 * (self.batch * self.m * self.n * self.k) as f64
    }
    /// Bytes a matrix-vector product must move at least: both operands read once, the output written once. A
    /// shared B counts once per batch item, as the sweeps' earlier outputs counted it (no matrix-vector row
    /// shares B).
    fn min_bytes(&self) -> f64 {
        let (b, m, n, k) = (self.batch, self.m, self.n, self.k);
        (self.kernel.element_bytes() * b * (m * k + k * n + m * n)) as f64
    }
    fn tflops(&self, s: &Stats) -> f64 {
        self.flops() / (s.median_ms * 1e-3) / 1e12
    }
    /// Bytes per second at the minimum traffic (meaningful for the memory-bound matrix-vector rows).
    fn bandwidth(&self, s: &Stats) -> f64 {
        self.min_bytes() / (s.median_ms * 1e-3)
    }
}

/// What a row that passed its checks measured.
#[derive(Clone, Debug)]
pub struct Measured {
    /// optiml's times.
    pub ours: Stats,
    /// The fastest library call's, in the same rounds.
    pub library: Stats,
    /// Which call that was ([`crate::library::Call::name`]).
    pub call: String,
    /// Every library call tried for the row, with its median time when it was picked: fastest first.
    pub candidates: Vec<(String, f64)>,
    /// optiml's largest sampled error against float64, relative to the terms' magnitude.
    pub error: f64,
    /// The library call's (of the plain product, on epilogue rows), where the sweep audits its baseline.
    pub library_error: Option<f64>,
    /// The [`SweepKernel::exact_twin`]'s on the same operands, where the kernel has one.
    pub exact_error: Option<f64>,
    /// ‖optiml − library‖₂ / ‖library‖₂; `None` where optiml fuses an epilogue the library does not run.
    pub diff: Option<f64>,
}

impl Measured {
    /// optiml's speed over the library call's (above 1: optiml is faster).
    pub fn ratio(&self) -> f64 {
        self.library.median_ms / self.ours.median_ms
    }
}

/// One row: its measurement, or why it failed.
pub struct Row<K> {
    /// What was run.
    pub case: Case<K>,
    /// What it measured, or the check it failed.
    pub outcome: Result<Measured, String>,
}

impl<K> Row<K> {
    fn measured(&self) -> Option<&Measured> {
        self.outcome.as_ref().ok()
    }
}

/// A table (and geometric mean) of matrix-matrix rows.
#[derive(Clone, Copy, Debug)]
pub struct Group {
    /// How the console and the means name its rows (`exact fp32`, `bf16`).
    pub name: &'static str,
    /// Its markdown section's title; `None` puts its table straight under the method.
    pub heading: Option<&'static str>,
}

/// How a sweep runs and reports.
#[derive(Clone, Copy, Debug)]
pub struct Sweep<'a> {
    /// The tables of matrix-matrix rows, in order ([`SweepKernel::group`] indexes them). Matrix-vector rows go
    /// in one memory-bound table after them, judged against the copy bandwidth.
    pub groups: &'a [Group],
    /// Also check the library's output against float64 (measured, not held to a tolerance: a baseline less
    /// precise than optiml is a finding, not a failure of the row), and report its error and how far the two
    /// outputs lie apart.
    pub audit_baseline: bool,
    /// Report a row that fails a check as FAILED, untimed, and go on (the run ends with an error after writing its
    /// outputs); otherwise the first failure ends the run.
    pub keep_going: bool,
}

/// A finished sweep: its rows and the copy bandwidth measured in the same run.
pub struct Results<'a, K> {
    sweep: Sweep<'a>,
    /// Every row, in the sweep's order.
    pub rows: Vec<Row<K>>,
    /// Device-to-device copy bandwidth, bytes read plus written per second.
    pub copy: f64,
}

impl<'a> Sweep<'a> {
    /// Measures the copy bandwidth, then every case `--kernels` selects (all without it) with `measure`, printing
    /// each row as it comes.
    ///
    /// # Errors
    /// The copy's timing, or the first failed row unless the sweep keeps going.
    pub fn run<K: SweepKernel>(
        &self,
        stream: &Arc<CudaStream>,
        cases: &[Case<K>],
        mut measure: impl FnMut(&Case<K>) -> Result<Measured, BoxError>,
    ) -> Result<Results<'a, K>, BoxError> {
        let copy = copy_bandwidth(stream)?;
        println!("device-to-device copy: {:.2} TB/s", copy / 1e12);
        let only = arg_value("--kernels");
        let cases: Vec<&Case<K>> = cases
            .iter()
            .filter(|c| {
                only.as_deref()
                    .is_none_or(|list| list.split(',').any(|k| k.trim() == c.kernel.name()))
            })
            .collect();
        let width = |f: fn(&Case<K>) -> usize| cases.iter().map(|c| f(c)).max().unwrap_or(0);
        let (lw, kw) = (
            width(|c| c.label.chars().count()),
            width(|c| c.kernel.name().len()),
        );
        println!(
            "{:<lw$} {:<kw$} {:>22} | {:>9} {:>8} | {:>9} {:>8} | {:>6} {:>8}{} | library call",
            "case",
            "kernel",
            "batch×m×n×k",
            "optiml ms",
            "TFLOP/s",
            "lib. ms",
            "TFLOP/s",
            "ratio",
            "error",
            if self.audit_baseline { " vs lib." } else { "" }
        );
        let mut rows = Vec::new();
        for c in cases {
            let outcome = measure(c).map_err(|e| e.to_string());
            let head = format!(
                "{:<lw$} {:<kw$} {:>22}",
                c.label,
                c.kernel.name(),
                c.shape()
            );
            match &outcome {
                Ok(r) => println!(
                    "{head} | {:>9.4} {:>8.1} | {:>9.4} {:>8.1} | {:>5.2}x {:>8.1e}{} | {}",
                    r.ours.median_ms,
                    c.tflops(&r.ours),
                    r.library.median_ms,
                    c.tflops(&r.library),
                    r.ratio(),
                    r.error,
                    if self.audit_baseline {
                        format!(" {:>8}", show_diff(r.diff))
                    } else {
                        String::new()
                    },
                    r.call
                ),
                Err(why) if self.keep_going => println!("{head} | FAILED: {why}"),
                Err(why) => {
                    return Err(
                        format!("{} `{}` {}: {why}", c.label, c.kernel.name(), c.shape()).into(),
                    );
                }
            }
            rows.push(Row { case: *c, outcome });
        }
        Ok(Results {
            sweep: *self,
            rows,
            copy,
        })
    }
}

/// Checks one case (optiml against float64; where the sweep audits its baseline, the library call against
/// float64; the two against each other), then times optiml beside the fastest library call ([`Library::fastest`],
/// picked on the same operands) in alternating rounds. Any failed check is an error, so nothing unchecked is
/// timed. `launch` runs a kernel (the case's, or its [`SweepKernel::exact_twin`], whose error is measured on the
/// same operands) on the operands into the output.
///
/// # Errors
/// The check that failed (the operands' seeds named), or what a launch reports.
pub fn measure<T: CublasGemm, K: SweepKernel>(
    stream: &Arc<CudaStream>,
    library: &Library,
    sweep: &Sweep<'_>,
    c: &Case<K>,
    launch: impl Fn(K, &Operands<T>, &mut CudaSlice<T>) -> Result<(), BoxError>,
) -> Result<Measured, BoxError> {
    let shape = c.gemm_shape();
    let x = Operands::<T>::random(stream, shape)?;
    let seeds = x.seeds();
    let (tol, act) = (c.kernel.tolerance(), c.kernel.epilogue().map(|e| e.1));
    let (_, _, c_len) = shape.lens();

    let mut dc = poisoned::<T>(stream, c_len)?;
    launch(c.kernel, &x, &mut dc)?;
    let ours = stream.clone_dtoh(&dc)?;
    let error = x
        .check(shape, act, &ours, SAMPLES, tol)
        .map_err(|e| format!("optiml: {e} ({seeds})"))?;
    let exact_error = match c.kernel.exact_twin() {
        Some(twin) => {
            let mut dt = poisoned::<T>(stream, c_len)?;
            launch(twin, &x, &mut dt)?;
            let exact = stream.clone_dtoh(&dt)?;
            Some(
                x.check(shape, act, &exact, SAMPLES, twin.tolerance())
                    .map_err(|e| format!("`{}`: {e} ({seeds})", twin.name()))?,
            )
        }
        None => None,
    };

    let mut dref = poisoned::<T>(stream, c_len)?;
    let (call, candidates) = library.fastest(shape, c.kernel.math(), &x.da, &x.db, &mut dref)?;
    // The picked call's own output, into a freshly poisoned buffer: what is compared is what is timed.
    dref = poisoned::<T>(stream, c_len)?;
    call.run(&x.da, &x.db, &mut dref)?;
    let theirs = stream.clone_dtoh(&dref)?;
    let name = call.call.name();
    let library_error = if sweep.audit_baseline {
        let e = x
            .check(shape, None, &theirs, SAMPLES, f64::INFINITY)
            .map_err(|e| format!("{name}: {e} ({seeds})"))?;
        Some(e)
    } else {
        None
    };
    let diff = match act {
        Some(_) => None,
        None => {
            // optiml's output was found finite above; a NaN from the library makes the difference NaN, and fails
            // too.
            let diff = rel_diff(&ours, &theirs);
            let most = c.kernel.agreement();
            if diff.is_nan() || diff > most {
                return Err(format!(
                    "{name} and optiml disagree: relative L2 {diff:e} > {most:e} ({seeds})"
                )
                .into());
            }
            Some(diff)
        }
    };

    let (ours, library) = time_pair(
        stream,
        WARMUP,
        ROUNDS,
        || launch(c.kernel, &x, &mut dc),
        || call.run(&x.da, &x.db, &mut dref),
    )?;
    Ok(Measured {
        ours,
        library,
        call: name,
        candidates: candidates
            .iter()
            .map(|(call, stats)| (call.name(), stats.median_ms))
            .collect(),
        error,
        library_error,
        exact_error,
        diff,
    })
}

/// Whether any of `rows` has an exact twin, whose error gets a column.
fn has_twins<K: SweepKernel>(rows: &[&Row<K>]) -> bool {
    rows.iter().any(|r| r.case.kernel.exact_twin().is_some())
}

/// A relative L2 distance for people: one significant decimal, or a dash where none was measured.
fn show_diff(diff: Option<f64>) -> String {
    diff.map_or("–".into(), |d| format!("{d:.1e}"))
}

impl<K: SweepKernel> Results<'_, K> {
    /// Rows that failed a check.
    pub fn failed(&self) -> usize {
        self.rows.iter().filter(|r| r.outcome.is_err()).count()
    }

    /// The matrix-matrix rows of group `g`.
    fn group(&self, g: usize) -> Vec<&Row<K>> {
        self.rows
            .iter()
            .filter(|r| r.case.kernel.group() == g && !r.case.is_gemv())
            .collect()
    }

    /// Group `g`'s geometric mean of optiml / library speed over its rows that passed (only they were timed);
    /// `None` over none.
    pub fn geomean(&self, g: usize) -> Option<f64> {
        geomean(
            self.group(g)
                .iter()
                .filter_map(|r| r.measured())
                .map(Measured::ratio),
        )
    }

    /// [`Results::geomean`] of every group, in order.
    fn geomeans(&self) -> Vec<Option<f64>> {
        (0..self.sweep.groups.len())
            .map(|g| self.geomean(g))
            .collect()
    }

    /// The means per group, then each matrix-vector row's bandwidth against the copy's.
    pub fn print_summary(&self) {
        let means: Vec<String> = self
            .sweep
            .groups
            .iter()
            .zip(self.geomeans())
            .enumerate()
            .map(|(g, (group, mean))| {
                let passed = self
                    .group(g)
                    .iter()
                    .filter(|r| r.measured().is_some())
                    .count();
                format!("{} {}x ({passed} rows)", group.name, show_geomean(mean))
            })
            .collect();
        println!(
            "geometric mean of optiml / best library call speed over the matrix-matrix rows{}: {}",
            if self.sweep.keep_going {
                " that passed"
            } else {
                ""
            },
            means.join(", ")
        );
        for r in self.rows.iter().filter(|r| r.case.is_gemv()) {
            if let Some(m) = r.measured() {
                let c = &r.case;
                println!(
                    "{:<16} {:>22}: {:.2} TB/s = {:.0}% of the copy bandwidth (library {:.2} TB/s)",
                    c.label,
                    c.shape(),
                    c.bandwidth(&m.ours) / 1e12,
                    100.0 * c.bandwidth(&m.ours) / self.copy,
                    c.bandwidth(&m.library) / 1e12
                );
            }
        }
    }

    /// Every row as JSON: what was run, the kernel's own fields, and what it measured (or, where the sweep keeps
    /// going, `status` and why it failed).
    pub fn rows_json(&self) -> Vec<serde_json::Value> {
        self.rows.iter().map(|r| self.row_json(r)).collect()
    }

    fn row_json(&self, r: &Row<K>) -> serde_json::Value {
        let c = r.case;
        let mut row = serde_json::json!({
            "case": c.label, "kernel": c.kernel.name(), "batch": c.batch, "m": c.m, "n": c.n, "k": c.k,
            "trans_a": c.kernel.trans_a(), "trans_b": c.kernel.trans_b(), "shared_b": c.kernel.shared_b(),
            "epilogue": c.kernel.epilogue().map(|(act, _)| format!("bias + {act} (fused; the library runs the plain gemm)")),
        });
        let extra = match &r.outcome {
            Ok(m) => {
                let candidates: Vec<serde_json::Value> = m
                    .candidates
                    .iter()
                    .map(|(call, ms)| serde_json::json!({"call": call, "median_ms": ms}))
                    .collect();
                let mut fields = serde_json::json!({
                    "optiml": m.ours.json(), "optiml_tflops": c.tflops(&m.ours),
                    "library": m.library.json(), "library_call": m.call,
                    "library_tflops": c.tflops(&m.library), "library_candidates": candidates,
                    "speed_vs_library": m.ratio(), "max_rel_err_sampled": m.error,
                    "min_bytes": c.min_bytes(), "optiml_bytes_per_s": c.bandwidth(&m.ours),
                    "library_bytes_per_s": c.bandwidth(&m.library),
                });
                if self.sweep.audit_baseline {
                    fields["library_max_rel_err_sampled"] = m.library_error.into();
                    fields["rel_l2_vs_library"] = m.diff.into();
                }
                if let (Some(twin), Some(e)) = (c.kernel.exact_twin(), m.exact_error) {
                    fields["exact_kernel"] = twin.name().into();
                    fields["exact_max_rel_err_sampled"] = e.into();
                }
                if self.sweep.keep_going {
                    fields["status"] = "ok".into();
                }
                fields
            }
            Err(why) => serde_json::json!({"status": "failed", "failure": why}),
        };
        if let (Some(row), serde_json::Value::Object(extra)) = (row.as_object_mut(), extra) {
            row.extend(c.kernel.json());
            row.extend(extra);
        }
        row
    }

    /// The markdown report: `preamble` (title, GPU, date, method), a table per group with its geometric mean, and
    /// the matrix-vector table against the copy bandwidth.
    pub fn markdown(&self, preamble: &str) -> String {
        let mut md = preamble.to_string();
        let passed = if self.sweep.keep_going {
            " that passed"
        } else {
            ""
        };
        for (g, (group, mean)) in self.sweep.groups.iter().zip(self.geomeans()).enumerate() {
            let rows = self.group(g);
            let twins = has_twins(&rows);
            let mut table = self.table(&[("TFLOP/s", Align::Right)], twins);
            for r in &rows {
                self.push_row(&mut table, r, twins, |c, s| {
                    vec![format!("{:.1}", c.tflops(s))]
                });
            }
            if let Some(h) = group.heading {
                md.push_str(&format!("\n## {h}\n"));
            }
            md.push_str(&format!(
                "\n{table}\nGeometric mean of optiml / best library call speed over the {} {} rows{passed}: **{}×**.\n",
                rows.iter().filter(|r| r.measured().is_some()).count(),
                group.name,
                show_geomean(mean)
            ));
        }
        let gemv: Vec<&Row<K>> = self.rows.iter().filter(|r| r.case.is_gemv()).collect();
        if !gemv.is_empty() {
            let twins = has_twins(&gemv);
            let mut table = self.table(&[("TB/s", Align::Right), ("of copy", Align::Right)], twins);
            for r in gemv {
                self.push_row(&mut table, r, twins, |c, s| {
                    vec![
                        format!("{:.2}", c.bandwidth(s) / 1e12),
                        format!("{:.0}%", 100.0 * c.bandwidth(s) / self.copy),
                    ]
                });
            }
            md.push_str(&format!(
                "\n## Matrix × vector (memory-bound)\n\nDevice-to-device copy in the same run: {:.2} TB/s (bytes \
                 read plus written). Bandwidth counts the least traffic: both operands read once, the output \
                 written once.\n\n{table}",
                self.copy / 1e12,
            ));
        }
        md
    }

    /// Adds `r` to `table`: what was run, optiml's time and its `rates`, the library call's time and its first
    /// rate (the others, shares of the copy bandwidth, are optiml's alone) and which call it was, the ratio and
    /// the errors (with the exact twin's where the table has that column); or, for a failed row, why in place of
    /// the numbers.
    fn push_row(
        &self,
        table: &mut Table,
        r: &Row<K>,
        twins: bool,
        rates: impl Fn(&Case<K>, &Stats) -> Vec<String>,
    ) {
        let c = &r.case;
        let mut cells = vec![
            c.label.to_string(),
            format!("`{}`", c.kernel.name()),
            c.shape(),
        ];
        match &r.outcome {
            Ok(m) => {
                cells.push(m.ours.cell());
                cells.extend(rates(c, &m.ours));
                cells.push(m.library.cell());
                cells.extend(rates(c, &m.library).into_iter().take(1));
                cells.push(m.call.clone());
                let note = match c.kernel.epilogue() {
                    Some(_) => " (library without the epilogue)",
                    None => "",
                };
                cells.push(format!("{:.2}×{note}", m.ratio()));
                cells.extend(self.error_cells(m, twins));
            }
            Err(why) => cells.push(format!("**FAILED**: {}", cell_text(why))),
        }
        table.row(&cells);
    }

    /// A table of rows: what was run, optiml's time and `rate` columns, the library call's and its name, the ratio
    /// and the errors (the exact twins' too, where `twins`).
    fn table(&self, rate: &[(&str, Align)], twins: bool) -> Table {
        let ms = |who| (who, Align::Left);
        let mut columns = vec![
            ("case", Align::Left),
            ("kernel", Align::Left),
            ("batch × m × n × k", Align::Left),
            ms("optiml ms (min–max)"),
        ];
        columns.extend(rate);
        columns.push(ms("library ms (min–max)"));
        // The library's rate: the first rate column (the share of the copy is optiml's alone).
        columns.extend(rate.iter().take(1));
        columns.push(("library call", Align::Left));
        columns.push(("optiml / library", Align::Right));
        if self.sweep.audit_baseline {
            columns.push(("max sampled error (library's)", Align::Right));
            columns.push(("rel. L2 vs library", Align::Right));
        } else {
            columns.push(("max sampled error", Align::Right));
        }
        if twins {
            columns.push(("`f32, exact` on the same operands", Align::Right));
        }
        Table::new(&columns)
    }

    /// The error columns of a measured row: optiml's error (and the library's, where audited), how far the two
    /// outputs lie apart, and where `twins`, the exact twin's error with optiml's as a multiple of it (the gate
    /// allows 2×).
    fn error_cells(&self, m: &Measured, twins: bool) -> Vec<String> {
        let mut cells = match m.library_error {
            Some(theirs) if self.sweep.audit_baseline => {
                vec![format!("{:.1e} ({theirs:.1e})", m.error), show_diff(m.diff)]
            }
            _ => vec![format!("{:.1e}", m.error)],
        };
        if twins {
            cells.push(m.exact_error.map_or("–".into(), |e| {
                format!("{e:.1e} (optiml {:.2}×)", m.error / e.max(1e-30))
            }));
        }
        cells
    }

    /// Writes `<stem>.json` (`doc`, its `rows` filled in) and `<stem>.md` into `dir`.
    ///
    /// # Errors
    /// As [`write_report`].
    pub fn write(
        &self,
        dir: &Path,
        stem: &str,
        mut doc: serde_json::Value,
        preamble: &str,
    ) -> Result<(), BoxError> {
        doc["rows"] = self.rows_json().into();
        write_report(dir, stem, &doc, &self.markdown(preamble))?;
        println!("wrote {}", dir.display());
        Ok(())
    }

    /// The end of a run: an error when a row failed its checks, after the outputs were written.
    ///
    /// # Errors
    /// How many rows failed.
    pub fn finish(&self) -> Result<(), BoxError> {
        match self.failed() {
            0 => Ok(()),
            failed => Err(format!("{failed} row(s) FAILED their checks (see above)").into()),
        }
    }
}
