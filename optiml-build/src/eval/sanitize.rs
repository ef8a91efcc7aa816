//! `compute-sanitizer` on a winner before it is stored: the worker runs the winner's whole gate once (every
//! shape of the plan, the dispatch shape once) under memcheck, which sees what the guard regions cannot: reads
//! out of bounds, accesses far past a buffer, misaligned accesses, and errors inside the launch itself. Memcheck
//! slows kernels tens of times, so it runs on the one kernel that will be stored, not on every candidate.

use super::client::WorkerCommand;
use super::protocol::Job;
use super::worker::{CHECK_ENV, WORKER_ENV};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The exit status the sanitizer is told to use when it found errors (the worker's own are 0, 2 and 3).
const FOUND: i32 = 86;

/// `compute-sanitizer`: `OPTIML_SANITIZER`, else on `PATH`, else under `/usr/local/cuda/bin`.
pub fn find_sanitizer() -> Option<PathBuf> {
    super::profile::find_tool(optiml_spec::env::OPTIML_SANITIZER, "compute-sanitizer")
}

/// What a sanitized run found.
#[derive(Debug, thiserror::Error)]
pub enum SanitizeError {
    /// Memcheck reported errors in the kernel: it must not be stored.
    #[error("compute-sanitizer's memcheck found {errors} error(s): {first}")]
    Found {
        /// How many (the report's summary).
        errors: usize,
        /// The report's first error, in its words.
        first: String,
    },
    /// The run could not be made or did not finish: nothing is known either way.
    #[error("the sanitized run did not complete: {0}")]
    Failed(String),
}

/// Runs `job` once under `sanitizer`'s memcheck in a fresh worker and reads its report.
///
/// # Errors
/// [`SanitizeError::Found`] when memcheck reported errors; [`SanitizeError::Failed`] when the sanitizer or the
/// worker could not run, or the gate failed under it without a memcheck error.
pub fn sanitize(
    sanitizer: &Path,
    worker: &WorkerCommand,
    support_cubin: &[u8],
    device: usize,
    job: &Job,
    scratch: &Path,
) -> Result<(), SanitizeError> {
    let failed = |e: String| SanitizeError::Failed(e);
    let file = scratch.join("check.job");
    let log = scratch.join("memcheck.log");
    let bytes =
        crate::codec::encode(&(support_cubin, device, job)).map_err(|e| failed(e.to_string()))?;
    std::fs::write(&file, bytes).map_err(|e| failed(e.to_string()))?;
    let out = Command::new(sanitizer)
        // The runtime counts a function's parameters by asking for one past the last, which the driver answers
        // with CUDA_ERROR_INVALID_VALUE (CUDA 13.0 has no count call): memcheck would report each as an error.
        // A candidate's own failing API call still fails its launch, which the gate rejects.
        .args(["--tool", "memcheck", "--print-limit", "20"])
        .args(["--report-api-errors", "no"])
        .arg(format!("--error-exitcode={FOUND}"))
        .arg("--log-file")
        .arg(&log)
        .arg(&worker.program)
        .args(&worker.args)
        .env(WORKER_ENV, "1")
        .env(CHECK_ENV, &file)
        .output()
        .map_err(|e| failed(format!("cannot run `{}`: {e}", sanitizer.display())))?;
    let report = std::fs::read_to_string(&log).unwrap_or_default();
    verdict(
        out.status.code(),
        &report,
        &String::from_utf8_lossy(&out.stderr),
    )
}

/// The verdict from the run's exit status, memcheck's report and the worker's stderr.
fn verdict(status: Option<i32>, report: &str, stderr: &str) -> Result<(), SanitizeError> {
    let errors = report.lines().find_map(|l| {
        let rest = l.split("ERROR SUMMARY:").nth(1)?;
        rest.split_whitespace().next()?.parse::<usize>().ok()
    });
    let first = || {
        report
            .lines()
            .map(|l| l.trim_start_matches("=========").trim())
            .find(|l| !l.is_empty() && !l.starts_with("COMPUTE-SANITIZER"))
            .unwrap_or("no error text")
            .to_string()
    };
    match (errors, status) {
        (Some(n), _) if n > 0 => Err(SanitizeError::Found {
            errors: n,
            first: first(),
        }),
        (_, Some(FOUND)) => Err(SanitizeError::Found {
            errors: errors.unwrap_or(1),
            first: first(),
        }),
        (Some(0), Some(0)) => Ok(()),
        (None, Some(0)) => Err(SanitizeError::Failed(
            "the sanitizer printed no error summary".into(),
        )),
        _ => Err(SanitizeError::Failed(format!(
            "the worker exited with {}: {}",
            status.map_or("a signal".to_string(), |s| format!("status {s}")),
            stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reports as compute-sanitizer 2025 writes them: a clean run, an out-of-bounds write, and a run that
    /// died before its summary.
    #[test]
    fn memchecks_report_is_read_into_a_verdict() {
        let clean = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";
        assert!(verdict(Some(0), clean, "").is_ok());
        let found = "========= COMPUTE-SANITIZER\n\
            ========= Invalid __global__ write of size 4 bytes\n\
            =========     at optiml_matmul+0x2d0\n\
            ========= ERROR SUMMARY: 3 errors\n";
        match verdict(Some(FOUND), found, "") {
            Err(SanitizeError::Found { errors, first }) => {
                assert_eq!(errors, 3);
                assert_eq!(first, "Invalid __global__ write of size 4 bytes");
            }
            other => panic!("{other:?}"),
        }
        // The gate's own failure under the sanitizer, with memcheck's errors counted, is still "found".
        assert!(matches!(
            verdict(Some(3), found, "the checked run failed"),
            Err(SanitizeError::Found { errors: 3, .. })
        ));
        let died = "========= COMPUTE-SANITIZER\n";
        let why = verdict(None, died, "optiml eval worker: setup failed: no device\n")
            .unwrap_err()
            .to_string();
        assert!(
            why.contains("a signal") && why.contains("setup failed: no device"),
            "{why}"
        );
        assert!(matches!(
            verdict(Some(0), "", ""),
            Err(SanitizeError::Failed(_))
        ));
    }
}
