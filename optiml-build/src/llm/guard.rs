//! What is let through from a model's answer to NVRTC: the kernel in its fenced block, and only device code. A
//! response with host code, file or console access, an `#include` other than optiml's own headers, or more than
//! [`MAX_SOURCE_BYTES`] is refused before it is compiled (and LLM-written code runs only in the evaluation
//! worker, under its deadline, like every candidate).

/// The most bytes of kernel source taken from one answer.
pub const MAX_SOURCE_BYTES: usize = 64 * 1024;

/// Why an answer's code was not compiled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No fenced code block.
    #[error("the answer holds no fenced code block")]
    NoCode,
    /// Longer than [`MAX_SOURCE_BYTES`].
    #[error("the code is {0} bytes, more than the {MAX_SOURCE_BYTES} taken")]
    TooLong(usize),
    /// An `#include` of something other than optiml's headers.
    #[error(
        "line {line}: `#include {what}`: only optiml's own headers (`optiml/…`) may be included"
    )]
    Include {
        /// The line (1-based).
        line: usize,
        /// What it includes.
        what: String,
    },
    /// Host code or I/O.
    #[error("line {line}: `{what}` is host code or I/O, which a kernel answer must not hold")]
    Host {
        /// The line (1-based).
        line: usize,
        /// The construct.
        what: &'static str,
    },
    /// No `extern "C" __global__` function of the entry's name.
    #[error(
        "no `extern \"C\" __global__ void {0}(…)`: the kernel must keep the entry point's name and ABI"
    )]
    NoEntry(String),
}

/// The code of the first fenced block of `answer` (```` ```cuda ````, ```` ```cpp ````, ```` ```c++ ```` or bare),
/// without its fences.
pub fn extract(answer: &str) -> Option<String> {
    let start = answer.find("```")?;
    let after = &answer[start + 3..];
    // The info string (the language) runs to the end of the fence's line.
    let body = &after[after.find('\n')? + 1..];
    let end = body.find("```").unwrap_or(body.len());
    Some(body[..end].trim_end().to_string() + "\n")
}

/// `source` with C linkage on the entry point where the answer left it off (`__global__ void optiml_program(…)`
/// without `extern "C"`, a common slip): the symbol is then found by its name; nothing else changes.
pub fn with_c_linkage(source: &str, entry: &str) -> String {
    let Some(at) = source.find(&format!("{entry}(")) else {
        return source.to_string();
    };
    let Some(global) = source[..at].rfind("__global__") else {
        return source.to_string();
    };
    if source[..global].trim_end().ends_with("extern \"C\"") {
        return source.to_string();
    }
    format!("{}extern \"C\" {}", &source[..global], &source[global..])
}

/// Constructs that only host code, or I/O, would use (device code never needs them). `std::` is not among them:
/// without headers NVRTC rejects it with a message the expert can act on.
const HOST: [&str; 13] = [
    "int main",
    "__host__",
    "cudaMalloc",
    "cudaMemcpy",
    "cudaFree",
    "cudaDeviceSynchronize",
    "cudaLaunch",
    "<<<",
    "printf",
    "fopen",
    "system(",
    "asm volatile(\"trap",
    "#pragma comment",
];

/// Checks `source` (from [`extract`]) before it is compiled: its size, its includes, no host code, and an entry
/// point named `entry`.
///
/// # Errors
/// The first [`Refusal`].
pub fn check(source: &str, entry: &str) -> Result<(), Refusal> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(Refusal::TooLong(source.len()));
    }
    for (i, raw) in source.lines().enumerate() {
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix('#') {
            let directive = rest.trim_start();
            if let Some(what) = directive.strip_prefix("include") {
                let what = what.trim();
                let ours = what.starts_with("<optiml/") || what.starts_with("\"optiml/");
                if !ours {
                    return Err(Refusal::Include {
                        line: i + 1,
                        what: what.chars().take(80).collect(),
                    });
                }
            }
        }
        // Comments may say anything.
        let code = line.split("//").next().unwrap_or("");
        if let Some(what) = HOST.iter().find(|h| code.contains(*h)) {
            return Err(Refusal::Host { line: i + 1, what });
        }
    }
    let declared = source.match_indices(entry).any(|(at, _)| {
        let before = &source[..at];
        let after = source[at + entry.len()..].trim_start();
        before.contains("extern \"C\"")
            && before[before.rfind("extern \"C\"").unwrap_or(0)..].contains("__global__")
            && after.starts_with('(')
            && !before.ends_with(|c: char| c.is_alphanumeric() || c == '_')
    });
    if !declared {
        return Err(Refusal::NoEntry(entry.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = "extern \"C\" __global__ void optiml_kernel(const float* x, float* y, long long n) {\n\
                          \x20   long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n\
                          \x20   for (; i < n; i += (long long)gridDim.x * blockDim.x) y[i] = fmaxf(x[i], 0.f);\n}\n";

    #[test]
    fn the_kernel_is_taken_from_its_fence() {
        let answer =
            format!("Here is the kernel:\n```cuda\n{KERNEL}```\nIt uses a grid-stride loop.");
        let code = extract(&answer).unwrap();
        assert_eq!(code, KERNEL);
        assert_eq!(check(&code, "optiml_kernel"), Ok(()));
        assert_eq!(extract("no code here"), None);
        // An unclosed fence takes the rest.
        assert_eq!(extract(&format!("```\n{KERNEL}")).unwrap(), KERNEL);
    }

    #[test]
    fn a_missing_extern_c_is_added_and_nothing_else_changes() {
        let bare = KERNEL.replace("extern \"C\" ", "");
        assert_eq!(with_c_linkage(&bare, "optiml_kernel"), KERNEL);
        assert_eq!(with_c_linkage(KERNEL, "optiml_kernel"), KERNEL);
        let bounded = bare.replace("__global__ void", "__global__ void __launch_bounds__(256)");
        assert!(with_c_linkage(&bounded, "optiml_kernel").starts_with("extern \"C\" __global__"));
        assert_eq!(with_c_linkage("no kernel", "optiml_kernel"), "no kernel");
    }

    #[test]
    fn host_code_includes_and_a_renamed_entry_are_refused() {
        let with = |extra: &str| format!("{extra}\n{KERNEL}");
        assert!(matches!(
            check(&with("#include <stdio.h>"), "optiml_kernel"),
            Err(Refusal::Include { line: 1, .. })
        ));
        assert!(matches!(
            check(&with("# include \"/etc/passwd\""), "optiml_kernel"),
            Err(Refusal::Include { .. })
        ));
        assert_eq!(
            check(&with("#include <optiml/program.cuh>"), "optiml_kernel"),
            Ok(())
        );
        for host in [
            "int main() { return 0; }",
            "__host__ void f() {}",
            "void g() { cudaMalloc(0, 0); }",
            "__device__ void h() { printf(\"%d\", 1); }",
            "void l() { optiml_kernel<<<1, 1>>>(0, 0, 0); }",
        ] {
            assert!(
                matches!(
                    check(&with(host), "optiml_kernel"),
                    Err(Refusal::Host { .. })
                ),
                "{host}"
            );
        }
        // A comment that mentions host calls is fine.
        assert_eq!(
            check(&with("// no cudaMalloc here"), "optiml_kernel"),
            Ok(())
        );
        assert_eq!(
            check(KERNEL, "optiml_other"),
            Err(Refusal::NoEntry("optiml_other".into()))
        );
        assert!(matches!(
            check(&"x".repeat(MAX_SOURCE_BYTES + 1), "optiml_kernel"),
            Err(Refusal::TooLong(_))
        ));
    }
}
