//! Candidate evaluation (design.md §4–§5): compile with NVRTC, then verify against the TESTPLAN and time in an
//! isolated worker process, and turn the result into a [`Measurement`](crate::search::Measurement) for the
//! search.
//!
//! ```text
//! GpuEvaluator ──compile (NVRTC, parallel ahead of need)──▶ CUBIN ──Job over a pipe──▶ worker process
//!     ▲                                                                      │ gate: fresh inputs, NaN-poisoned
//!     └──────── Measurement (time, spread, derived or ncu SOL, ptxas) ◀──────┘ outputs, f64 reference; then time
//! ```
//!
//! Nothing here names a family: each family's gate (its test plan, reference and launch) lives in its folder
//! under `crate::families` and runs on this module's device toolkit ([`device`]).
//!
//! A candidate that faults or hangs takes only the worker down: the [`client`] notices (an error, end of
//! stream, or its deadline), records the failure, and starts a fresh worker for the next candidate.

pub mod client;
pub mod device;
mod gpu;
pub mod guard;
pub mod limits;
pub mod plan;
pub mod profile;
pub mod protocol;
pub mod sanitize;
pub mod worker;

pub use client::{Client, ClientError, WorkerCommand};
pub use device::{Bench, Narrow, Stop};
pub use gpu::{
    CANDIDATE_FILE, EvalSetup, Evaluable, GpuEvaluator, GpuEvaluatorError, Stats, support_source,
};
pub use plan::{Comparison, Distribution, TestPlan, Tolerance};
pub use profile::{Counters, find_ncu};
pub use protocol::{Ceilings, Device, Job, JobResult, Problem, TimingPlan};
pub use sanitize::{SanitizeError, find_sanitizer};
pub use worker::Gate;
