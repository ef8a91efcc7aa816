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

/// `#define NAME VALUE` lines.
pub(crate) fn defines(pairs: &[(&str, i64)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("#define {k} {v}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn defines_are_one_line_each_in_order() {
        assert_eq!(
            super::defines(&[("OPTIML_BM", 128), ("OPTIML_TRANS_A", 0)]),
            "#define OPTIML_BM 128\n#define OPTIML_TRANS_A 0\n"
        );
        assert_eq!(super::defines(&[]), "");
    }
}
