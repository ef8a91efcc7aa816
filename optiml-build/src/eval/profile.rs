//! Nsight Compute counters for a candidate: the worker runs the kernel once under `ncu`, which reports SM and
//! DRAM speed-of-light, DRAM bytes and L1/TEX traffic. Where `ncu` is missing or counters are forbidden (common
//! on cloud GPUs) the caller keeps the derived figures and says so.

use super::client::WorkerCommand;
use super::protocol::Job;
use super::worker::{PROFILE_ENV, WORKER_ENV};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The metrics asked for, in the order of [`Counters`].
const METRICS: [&str; 4] = [
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes.sum",
    "l1tex__t_bytes.sum",
];

/// What Nsight Compute measured for one launch.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    /// SM throughput, % of peak.
    pub sm_sol: f64,
    /// DRAM throughput, % of peak.
    pub dram_sol: f64,
    /// DRAM bytes read and written.
    pub dram_bytes: f64,
    /// L1/TEX bytes.
    pub l1tex_bytes: f64,
}

/// `ncu`: `OPTIML_NCU`, else on `PATH`, else under `/usr/local/cuda/bin`.
pub fn find_ncu() -> Option<PathBuf> {
    find_tool(optiml_spec::env::OPTIML_NCU, "ncu")
}

/// A CUDA toolkit program: the path in `var`, else `exe` on `PATH`, else under `/usr/local/cuda/bin`.
pub(crate) fn find_tool(var: &str, exe: &str) -> Option<PathBuf> {
    if let Some(p) = optiml_spec::env::var_os(var) {
        return Some(PathBuf::from(p));
    }
    let on_path = optiml_spec::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(exe))
        .find(|p| p.is_file());
    on_path.or_else(|| {
        let p = Path::new("/usr/local/cuda/bin").join(exe);
        p.is_file().then_some(p)
    })
}

/// Profiles `job`'s kernel once with `ncu` (clocks left as they are, so the counters match the timed runs).
///
/// # Errors
/// Why no counters came back: `ncu` failed, counters are not permitted, or its output had no metric rows.
pub fn profile(
    ncu: &Path,
    worker: &WorkerCommand,
    support_cubin: &[u8],
    device: usize,
    job: &Job,
    scratch: &Path,
) -> Result<Counters, String> {
    std::fs::create_dir_all(scratch).map_err(|e| e.to_string())?;
    let file = scratch.join(format!("profile-{}.job", std::process::id()));
    let bytes = crate::codec::encode(&(support_cubin, device, job)).map_err(|e| e.to_string())?;
    std::fs::write(&file, bytes).map_err(|e| e.to_string())?;
    let out = Command::new(ncu)
        .args([
            "--clock-control",
            "none",
            "--target-processes",
            "all",
            "-k",
            &format!("regex:^{}$", job.entry),
            "-c",
            "1",
            "--csv",
            "--print-units",
            "base",
            "--metrics",
            &METRICS.join(","),
        ])
        .arg(&worker.program)
        .args(&worker.args)
        .env(WORKER_ENV, "1")
        .env(PROFILE_ENV, &file)
        .output();
    let _ = std::fs::remove_file(&file);
    let out = out.map_err(|e| format!("cannot run `{}`: {e}", ncu.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let why = text
            .lines()
            .chain(err.lines())
            .find(|l| l.contains("ERR_") || l.contains("rror"))
            .unwrap_or("no reason given");
        return Err(format!("ncu exited with {}: {why}", out.status));
    }
    parse(&text)
}

/// Reads the metric rows of `ncu --csv` output (one row per metric: …,"Metric Name","Metric Unit","Metric Value").
pub fn parse(csv: &str) -> Result<Counters, String> {
    let mut values = [None; 4];
    for line in csv.lines().filter(|l| l.starts_with('"')) {
        let fields: Vec<&str> = line.trim().trim_matches('"').split("\",\"").collect();
        if fields.len() < 3 {
            continue;
        }
        let (name, value) = (fields[fields.len() - 3], fields[fields.len() - 1]);
        if let Some(i) = METRICS.iter().position(|m| *m == name)
            && let Ok(v) = value.replace(',', "").parse::<f64>()
        {
            values[i] = Some(v);
        }
    }
    match values {
        [
            Some(sm_sol),
            Some(dram_sol),
            Some(dram_bytes),
            Some(l1tex_bytes),
        ] => Ok(Counters {
            sm_sol,
            dram_sol,
            dram_bytes,
            l1tex_bytes,
        }),
        _ => Err(format!(
            "ncu printed no metric rows for the kernel (were counters permitted?): {}",
            csv.lines()
                .filter(|l| l.contains("==PROF==") || l.contains("==ERROR=="))
                .collect::<Vec<_>>()
                .join(" ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ncu_csv_rows() {
        let csv = r#"==PROF== Connected to process 1234
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1234","w","h","optiml_matmul","1","7","(256, 1, 1)","(8, 8, 16)","0","9.0","Command line profiler metrics","dram__bytes.sum","byte","3,221,225,472"
"0","1234","w","h","optiml_matmul","1","7","(256, 1, 1)","(8, 8, 16)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","12.5"
"0","1234","w","h","optiml_matmul","1","7","(256, 1, 1)","(8, 8, 16)","0","9.0","Command line profiler metrics","l1tex__t_bytes.sum","byte","1000"
"0","1234","w","h","optiml_matmul","1","7","(256, 1, 1)","(8, 8, 16)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","78.25"
"#;
        let c = parse(csv).unwrap();
        assert_eq!(c.sm_sol, 78.25);
        assert_eq!(c.dram_sol, 12.5);
        assert_eq!(c.dram_bytes, 3_221_225_472.0);
        assert_eq!(c.l1tex_bytes, 1000.0);
        let denied = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n";
        assert!(parse(denied).unwrap_err().contains("ERR_NVGPUCTRPERM"));
    }
}
