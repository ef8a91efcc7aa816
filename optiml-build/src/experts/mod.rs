//! Experts write first kernels (OptiML-G). Today that is the hand-designed template of each family with its
//! default schedule; the search (OptiML-X) and LLM experts propose other candidates through the same type.

pub mod elementwise;
pub mod matmul;
pub mod matmul16;
pub mod matmul_tf32;

use crate::search::Tunable;
use optiml_runtime::{Arch, Launch};
use optiml_spec::{DType, Family, Precision, Spec, sha256_hex};

/// A kernel ready to compile: full CUDA source plus how to launch it.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The complete translation unit (macro definitions, then the template).
    pub source: String,
    /// The `extern "C"` entry point.
    pub entry: &'static str,
    /// The launch parameters the source was specialised for.
    pub launch: Launch,
    /// A one-line description of the schedule, for reports.
    pub schedule: String,
}

/// The family's default candidate for `spec` on `arch`.
pub fn default_candidate(spec: &Spec, arch: Arch) -> Candidate {
    match &spec.family {
        Family::Matmul(m) if spec.dtype != DType::F32 => match matmul16::Spec16::new(m, spec.dtype)
        {
            Some(s) => matmul16::default_candidate(&s, arch),
            None => matmul::Schedule::default_for(arch).candidate(m),
        },
        Family::Matmul(m) if m.precision == Precision::Tf32 => {
            matmul_tf32::default_candidate(m, arch)
        }
        Family::Matmul(m) => matmul::Schedule::default_for(arch).candidate(m),
        Family::Elementwise(e) => elementwise::Schedule::default_for(arch).candidate(e),
    }
}

/// The candidate of `spec` with a schedule a search recorded as JSON (search logs keep schedules that way), read
/// as the schedule type [`crate::tune`] searches for that spec: the 16-bit `wgmma` kernel's, the TF32 one's, the
/// fp32 SIMT kernel's or the elementwise map's.
///
/// # Errors
/// The JSON is not a schedule of that type (it was written by another family, or before the type changed).
pub fn scheduled_candidate(
    spec: &Spec,
    schedule: &serde_json::Value,
) -> Result<Candidate, serde_json::Error> {
    fn read<S: Tunable + serde::de::DeserializeOwned>(
        v: &serde_json::Value,
    ) -> Result<S, serde_json::Error> {
        let s: S = serde_json::from_value(v.clone())?;
        if s.is_valid() {
            Ok(s)
        } else {
            Err(serde::de::Error::custom(format!(
                "`{}` is outside this generator's schedule space",
                s.describe()
            )))
        }
    }
    Ok(match &spec.family {
        Family::Matmul(m) if spec.dtype != DType::F32 => {
            let spec16 = matmul16::Spec16::new(m, spec.dtype).ok_or_else(|| {
                serde::de::Error::custom(format!("{} is not a 16-bit type", spec.dtype.name()))
            })?;
            read::<matmul16::Schedule>(schedule)?.candidate(&spec16)
        }
        Family::Matmul(m) if m.precision == Precision::Tf32 => {
            read::<matmul_tf32::Schedule>(schedule)?.candidate(m)
        }
        Family::Matmul(m) => read::<matmul::Schedule>(schedule)?.candidate(m),
        Family::Elementwise(e) => read::<elementwise::Schedule>(schedule)?.candidate(e),
    })
}

/// The generator's version for `spec`'s family: this crate's version plus a hash of the templates that family's
/// kernels are made from, so that a changed kernel body invalidates that family's cached entries (tuned ones
/// included) even when nobody bumps the version, and leaves the other families' entries alone (CubeCL hashes
/// only names; we hash code).
pub fn generator_version(spec: &Spec) -> String {
    let templates: &[&str] = match &spec.family {
        Family::Matmul(_) if spec.dtype != DType::F32 => &[
            matmul16::WGMMA_TEMPLATE,
            matmul16::SIMT_TEMPLATE,
            matmul16::MMA_TEMPLATE,
            matmul16::GEMV_TEMPLATE,
        ],
        Family::Matmul(m) if m.precision == Precision::Tf32 => &[
            matmul_tf32::WGMMA_TEMPLATE,
            matmul_tf32::MMA_TEMPLATE,
            matmul::GEMV_TEMPLATE,
        ],
        Family::Matmul(_) => &[matmul::TEMPLATE, matmul::GEMV_TEMPLATE],
        Family::Elementwise(_) => &[elementwise::TEMPLATE],
    };
    let hash = sha256_hex(templates.concat().as_bytes());
    format!(
        "optiml-build {} templates {}",
        env!("CARGO_PKG_VERSION"),
        &hash[..16]
    )
}

/// `#define NAME VALUE` lines.
fn defines(pairs: &[(&str, i64)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("#define {k} {v}\n"))
        .collect()
}
