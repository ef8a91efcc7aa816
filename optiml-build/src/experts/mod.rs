//! Experts write first kernels (OptiML-G). Today those are the hand-designed templates of each family (in
//! [`crate::families`]) with their default schedules; the search (OptiML-X) and LLM experts propose other
//! candidates through the same type.

use optiml_runtime::Launch;

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

/// A kernel that joins a search beside the generated ones without a schedule of the family's kernels: a user's
/// seed kernel (or, later, an LLM expert's). The search evaluates it with the same gate and timing as every
/// schedule, and keeps it only where it is faster than the search's best.
#[derive(Clone, Debug, PartialEq)]
pub struct Root {
    /// What it is, in logs and reports (`seed kernels/softmax.cu:softmax_rows`).
    pub name: String,
    /// What a search log records in place of a schedule, from which [`crate::families::logged_candidate`]
    /// makes the candidate again (a seed's file, function and content hash).
    pub schedule: serde_json::Value,
    /// The kernel.
    pub candidate: Candidate,
}

/// Writes a new root from a verified one: an LLM expert rewriting a kernel it (or the user) wrote into a faster
/// one, which the search then gates and times like any root.
pub trait Rewriter {
    /// A rewrite of `root`, which passed the gate and took `time_ms` at `shape` where the fastest kernel found
    /// took `best_ms`; `None` when no rewrite compiled.
    fn rewrite(&self, root: &Root, time_ms: f64, best_ms: f64, shape: &str) -> Option<Root>;
}

/// What a search log records as the transformation that made a [`Root`]'s step.
pub const ROOT_STEP: &str = "root";

/// A macro's value in a generated source: a number, or the name of an option a shared header defines
/// (`OPTIML_ACT_GELU`), so the source says what it selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Def {
    /// A number (sizes, flags).
    Int(i64),
    /// A named option.
    Name(&'static str),
}

impl From<i64> for Def {
    fn from(v: i64) -> Self {
        Def::Int(v)
    }
}

impl From<u32> for Def {
    fn from(v: u32) -> Self {
        Def::Int(v.into())
    }
}

impl From<bool> for Def {
    fn from(v: bool) -> Self {
        Def::Int(v.into())
    }
}

impl std::fmt::Display for Def {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Def::Int(v) => write!(f, "{v}"),
            Def::Name(n) => f.write_str(n),
        }
    }
}

/// `#define NAME VALUE` lines.
pub(crate) fn defines(pairs: &[(&str, Def)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("#define {k} {v}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn defines_are_one_line_each_in_order() {
        use super::Def;
        assert_eq!(
            super::defines(&[
                ("OPTIML_BM", 128u32.into()),
                ("OPTIML_TRANS_A", false.into()),
                ("OPTIML_ACT", Def::Name("OPTIML_ACT_GELU"))
            ]),
            "#define OPTIML_BM 128\n#define OPTIML_TRANS_A 0\n#define OPTIML_ACT OPTIML_ACT_GELU\n"
        );
        assert_eq!(super::defines(&[]), "");
    }
}
