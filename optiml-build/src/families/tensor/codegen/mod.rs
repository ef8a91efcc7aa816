//! The tensor-program generator: a [`Program`] (the IR every tensor spec lowers to) becomes a CUDA translation
//! unit with a schedule space the search tunes.
//!
//! ```text
//! Program ──classify──▶ Shape::Pointwise ──PointwiseSchedule::candidate──▶ Candidate
//!                       Shape::Rows      ──RowSchedule::candidate──────▶ Candidate (a Tail: then folds the
//!                                                                          rows' values over every row)
//!                       Shape::Columns   ──ColumnSchedule::candidate───▶ Candidate
//!                       Shape::Tree      ──TreeSchedule::candidate─────▶ Candidate
//!                       Shape::Scan      ──ScanSchedule::candidate─────▶ Candidate
//!                       Unsupported (a typed reason: contractions, several reduced sets, …)
//! ```
//!
//! Every candidate is one `extern "C"` kernel, `optiml_program`, with the ABI of
//! [`optiml_runtime::ProgramLaunch`]: input buffers (program order), output buffers (statement order), every
//! dimension's extent (`long long`), the run-time `float` parameters (and a tree's workspace, stage and slices,
//! [`optiml_runtime::TreeLaunch`]). Sources include `optiml/program.cuh`
//! ([`crate::cuda::PROGRAM`]), which is all they share: a family's version must hash it with the text the
//! generator emits.
//!
//! Every kernel is bounds-safe at any extents (no access outside a tensor, empty dimensions included), handles
//! any alignment (16-byte accesses only where proven aligned at run time), and its reductions combine in an order
//! fixed by the schedule and the shape (fixed-order trees, no atomics), so a run repeats bit for bit. Checked on
//! an H200 (CuPy harness, not in this crate) against a float64 interpreter: every test program of `tests.rs` with
//! several schedules each, at odd shapes (rows of 1, 7, 33, 4097, 70001; misaligned buffers; guard bands around
//! every output; large and near-constant inputs), all bitwise repeatable.
//!
//! # Numerics (what a float64 reference should allow)
//! - Arithmetic is f32; 16-bit values widen exactly and round to nearest even once, on store.
//! - A division whose divisor is the same for all elements evaluated together (a row's sum, a parameter) is a
//!   multiplication by its reciprocal: one rounding more than the division.
//! - 16-bit programs use the hardware exp and log (`__expf`, `__logf`, a few ulp of f32) in element
//!   expressions; f32 programs use `expf` and `logf`. Per-row scalars always use the accurate forms.
//! - `max` / `min` (binary and reductions) return NaN when either operand is NaN; `argmax` / `argmin` treat NaN
//!   as the extreme and return the first extreme's index (ties: lowest index), as PyTorch does.
//! - Mean is the f32 sum divided by the element count; an empty reduced dimension is refused at launch for
//!   mean, max, min, argmax and argmin (`nonempty_mask`), while sum and product give 0 and 1.
//! - Reduction order: each thread folds its own elements in increasing order, then a warp xor butterfly, then the
//!   warps' (or split threads', or a cluster's blocks') partials in order. A tree folds its blocks' partials per
//!   item in slice order; how many slices follows the shape and the schedule, never the GPU.
//! - A row program's tail ([`Tail`], a loss's mean over the batch) folds the per-row values in row
//!   order: each thread of one block the rows `t, t + T, …`, then a warp butterfly, then the warps in order; sums
//!   and products in double, rounded to f32 once.
//! - A tree computes a mean and the spread around it (`Σ (x − mean)²`) in one pass: each thread's tile values
//!   are reduced to count, mean and squared distance, merged pairwise (Chan, Golub and LeVeque) in the same
//!   fixed order. It rounds differently from two passes but is as stable (no cancellation between sums).

mod classify;
mod columns;
mod emit;
mod plan;
mod pointwise;
mod rows;
mod scan;
#[cfg(test)]
mod tests;
mod tree;

pub(crate) use classify::gathers;
pub use classify::{
    ColumnShape, PointwiseShape, RowShape, ScanShape, Shape, Tail, TreeShape, Unsupported,
    classify, lower,
};
pub use columns::ColumnSchedule;
pub use pointwise::PointwiseSchedule;
pub use rows::{ROW_BUCKETS, RowSchedule};
pub use scan::ScanSchedule;
pub use tree::TreeSchedule;

use crate::experts::Candidate;
use crate::search::Tunable;
use optiml_runtime::Arch;
use optiml_spec::program::Program;

/// The kernel's entry point in every generated source.
pub const ENTRY: &str = "optiml_program";

impl Shape {
    /// Which generator: `pointwise`, `rows`, `columns`, `tree` or `scan`.
    pub fn class(&self) -> &'static str {
        match self {
            Shape::Pointwise(_) => "pointwise",
            Shape::Rows(_) => "rows",
            Shape::Columns(_) => "columns",
            Shape::Tree(_) => "tree",
            Shape::Scan(_) => "scan",
        }
    }

    /// The candidate of the class's default schedule for this program on `arch`.
    pub fn default_candidate(&self, arch: Arch) -> Candidate {
        match self {
            Shape::Pointwise(s) => PointwiseSchedule::for_program(s, arch).candidate(s),
            Shape::Rows(s) => RowSchedule::default_for(arch).candidate(s),
            Shape::Columns(s) => ColumnSchedule::default_for(arch).candidate(s),
            Shape::Tree(s) => TreeSchedule::default_for(arch).candidate(s),
            Shape::Scan(s) => ScanSchedule::for_scan(s, arch).candidate(s),
        }
    }

    /// The untuned variants a build compiles on `arch`, each with the shape key
    /// ([`optiml_runtime::program::shape_key`]) it serves: a row kernel one per row-length bucket
    /// (`ROW_BUCKETS` of the rows generator, keyed on that length; a tree for the buckets whose rows it reads
    /// fewer times, [`TreeShape::for_long_rows`]); a scan one for many lines and one for few long lines
    /// ([`ScanSchedule::for_long_lines`]); the others one for every shape.
    pub fn default_candidates(&self, arch: Arch) -> Vec<(Option<[u64; 4]>, Candidate)> {
        match self {
            Shape::Rows(s) => ROW_BUCKETS
                .iter()
                .map(|&len| {
                    let c = match TreeShape::for_long_rows(s, len, arch) {
                        Some(t) => TreeSchedule::default_for(arch).candidate(&t),
                        None => RowSchedule::for_row(s, len, arch).candidate(s),
                    };
                    // The key's item count is the same for every bucket, so the row length alone picks.
                    (Some([4096, 1, len as u64, 1]), c)
                })
                .collect(),
            Shape::Scan(s) => vec![
                (
                    Some([4096, 1, 4096, 1]),
                    ScanSchedule::for_scan(s, arch).candidate(s),
                ),
                (
                    Some([1, 1, 1 << 24, 1]),
                    ScanSchedule::for_long_lines(arch).candidate(s),
                ),
            ],
            _ => vec![(None, self.default_candidate(arch))],
        }
    }

    /// The program the kernels compute (for reductions: lowered, every reduction its own statement).
    pub fn program(&self) -> &Program {
        match self {
            Shape::Pointwise(s) => &s.program,
            Shape::Rows(s) => &s.program,
            Shape::Columns(s) => &s.program,
            Shape::Tree(s) => &s.program,
            Shape::Scan(s) => &s.program,
        }
    }
}

/// The default candidate of `program` on `arch`, or why no generator covers it.
///
/// # Errors
/// [`Unsupported`] with the reason.
pub fn default_candidate(program: &Program, arch: Arch) -> Result<Candidate, Unsupported> {
    Ok(classify(program)?.default_candidate(arch))
}
