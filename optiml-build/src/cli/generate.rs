//! `cargo optiml generate`: the LLM experts write kernels for the workspace's tensor operators (OptiML-G). Each
//! kernel's request is routed to the top-K experts; each writes against the tensor family's contract, with
//! repair rounds from the guard and NVRTC; a table says what compiled. Every exchange is recorded (under
//! `target/optiml/llm/` by default) and replayed on the next run with the same requests. Nothing here writes the
//! cache: what an expert writes still has to pass the gate before anything keeps it.

use super::{Place, optiml_packages, root_and_cache};
use crate::config::Settings;
use crate::families;
use crate::llm::experts::{self, Gumbel, Router};
use crate::llm::generate::{self, Verdict, Written};
use crate::llm::{Llm, LlmSettings};
use crate::nvrtc;
use crate::scan::{self, FoundKernel};
use clap::Args;
use optiml_runtime::Arch;
use std::path::PathBuf;

/// `cargo optiml generate`.
#[derive(Debug, Args)]
pub struct Generate {
    /// Only these kernels (function names, comma separated).
    #[arg(long, value_name = "NAMES")]
    pub kernel: Option<String>,
    /// Repair rounds after each expert's first answer.
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// The architecture the answers are compiled for.
    #[arg(long, default_value = "sm_90", value_name = "ARCH")]
    pub arch: String,
    /// Where the exchanges are recorded (default: `<root>/target/optiml/llm`).
    #[arg(long, value_name = "DIR")]
    pub record_dir: Option<PathBuf>,
    /// Where to scan.
    #[command(flatten)]
    pub place: Place,
}

/// One expert's run on one kernel.
pub struct Run {
    /// The kernel's name.
    pub kernel: String,
    /// The expert's name.
    pub expert: String,
    /// The router's cosine similarity of the expert to the kernel's request.
    pub similarity: f64,
    /// What the expert wrote.
    pub written: Written,
}

/// The request the router embeds for `kernel`: the spec as written, the kind of computation its program is (in
/// the words the experts' descriptions use), the program and the architecture.
pub(super) fn request_text(
    kernel: &FoundKernel,
    program: &optiml_spec::program::Program,
    arch: Arch,
) -> String {
    use families::tensor::codegen::{Shape, classify};
    let kind = match classify(program) {
        Ok(Shape::Pointwise(_)) => "an elementwise map: memory-bound, limited by DRAM bandwidth",
        Ok(Shape::Rows(_)) => "a reduction over each row (sum, max, norm, softmax)",
        Ok(Shape::Columns(_)) => "a reduction over an axis of strided columns",
        Ok(Shape::Tree(_)) => "a reduction of many elements to few values (a mean, a loss)",
        Ok(Shape::Scan(_)) => "a scan: a cumulative sum or product along an axis",
        Err(_) => "a tensor operator",
    };
    format!(
        "{}: {kind}. {} ({arch})",
        kernel.spec_text,
        program.canonical()
    )
}

/// Routes each of `kernels` (those with a tensor program) to `llm`'s experts and has each write a kernel; the
/// runs, and a line for each kernel that was not asked for.
pub fn generate(
    llm: &Llm,
    settings: &LlmSettings,
    kernels: &[FoundKernel],
    arch: Arch,
    (rounds, seed): (usize, u64),
    compile: &dyn Fn(&str) -> Result<crate::nvrtc::Compiled, String>,
) -> (Vec<Run>, Vec<String>) {
    let mut skipped = Vec::new();
    let router = Router::new(experts::with_user(&settings.experts), Some(llm));
    let gumbel = settings.gumbel_tau.map(|tau| Gumbel { tau, seed });
    let mut runs = Vec::new();
    for kernel in kernels {
        let optiml_spec::Family::Tensor(program) = &kernel.spec.family else {
            skipped.push(format!(
                "`{}`: not a tensor operator (no contract yet)",
                kernel.name
            ));
            continue;
        };
        let Some(contract) = families::tensor::contract::contract(program) else {
            skipped.push(format!(
                "`{}`: no contract (the generator does not lower its program)",
                kernel.name
            ));
            continue;
        };
        let request = match router.embed(&request_text(kernel, program, arch), Some(llm)) {
            Ok(v) => v,
            Err(e) => {
                skipped.push(format!(
                    "`{}`: the request could not be embedded: {e}",
                    kernel.name
                ));
                continue;
            }
        };
        for (expert, similarity) in router.route(&request, settings.top_k.unwrap_or(2), gumbel) {
            runs.push(Run {
                kernel: kernel.name.clone(),
                expert: expert.name.clone(),
                similarity,
                written: generate::write(llm, expert, &contract, rounds, compile),
            });
        }
    }
    (runs, skipped)
}

/// The table of `runs` and its summary line.
pub fn table(runs: &[Run]) -> String {
    let mut s = String::from(
        "| kernel | expert | similarity | answers (replayed) | verdicts | compiled |\n|---|---|---:|---:|---|---|\n",
    );
    for r in runs {
        let a = &r.written.attempts;
        let replayed = a.iter().filter(|x| x.replayed).count();
        let verdicts: Vec<String> = a
            .iter()
            .map(|x| x.verdict.to_string().replace('|', "\\|"))
            .collect();
        s.push_str(&format!(
            "| {} | {} | {:.3} | {} ({replayed}) | {} | {} |\n",
            r.kernel,
            r.expert,
            r.similarity,
            a.len(),
            verdicts.join("; "),
            if r.written.kernel.is_some() {
                "yes"
            } else {
                "no"
            }
        ));
    }
    let compiled = runs.iter().filter(|r| r.written.kernel.is_some()).count();
    let answers: usize = runs.iter().map(|r| r.written.attempts.len()).sum();
    let first_try = runs
        .iter()
        .filter(|r| {
            r.written
                .attempts
                .first()
                .is_some_and(|a| a.verdict == Verdict::Compiled)
        })
        .count();
    s.push_str(&format!(
        "\n{} expert runs over {} kernels: {compiled} compiled ({first_try} at the first answer), {answers} answers.\n",
        runs.len(),
        {
            let mut k: Vec<&str> = runs.iter().map(|r| r.kernel.as_str()).collect();
            k.dedup();
            k.len()
        }
    ));
    s
}

pub(super) fn run(g: &Generate) -> anyhow::Result<bool> {
    let (root, _) = root_and_cache(&g.place)?;
    let arch: Arch = crate::targets::parse_archs(&g.arch, "--arch")?
        .first()
        .copied()
        .ok_or_else(|| anyhow::anyhow!("--arch names no architecture"))?;
    let only: Option<Vec<String>> = g
        .kernel
        .as_ref()
        .map(|k| k.split(',').map(|s| s.trim().to_string()).collect());
    let packages = optiml_packages(&root)?;
    let found = scan::scan(&packages)?;
    let kernels: Vec<FoundKernel> = found
        .kernels_named(only.as_deref())
        .map_err(|e| anyhow::anyhow!("--kernel: {e}"))?;
    if kernels.is_empty() {
        anyhow::bail!("no kernel to generate in `{}`", root.display());
    }
    // One endpoint per package's settings: kernels are grouped by the package that declares them.
    let mut by_settings: Vec<(LlmSettings, u64, Vec<FoundKernel>)> = Vec::new();
    let mut unconfigured = Vec::new();
    for k in kernels {
        let settings = Settings::load(&super::tune::package_of(&k.file))?;
        let Some(llm) = settings.llm.clone() else {
            unconfigured.push(k.name.clone());
            continue;
        };
        let seed = settings.search.seed.unwrap_or(0);
        match by_settings.iter_mut().find(|(s, ..)| *s == llm) {
            Some((_, _, list)) => list.push(k),
            None => by_settings.push((llm, seed, vec![k])),
        }
    }
    if by_settings.is_empty() {
        anyhow::bail!(
            "no [llm] table in the settings of {}: add one to `optiml.toml` (or `[package.metadata.optiml.llm]`) \
             with `base_url` and `model` (`cargo doc -p optiml-build` shows the keys under `llm`)",
            unconfigured.join(", ")
        );
    }
    let nvrtc = nvrtc::load()?;
    let compile = |source: &str| {
        nvrtc::compile(nvrtc, "llm.cu", source, arch)
            .map_err(|e| format!("{}\n{}", e.status, e.log))
    };
    let dir = g
        .record_dir
        .clone()
        .unwrap_or_else(|| crate::llm::records_under(&root));
    let mut skipped = Vec::new();
    let mut runs = Vec::new();
    for (settings, seed, kernels) in &by_settings {
        let llm = Llm::new(settings, &dir);
        let (r, s) = generate(&llm, settings, kernels, arch, (g.rounds, *seed), &compile);
        runs.extend(r);
        skipped.extend(s);
    }
    for s in &skipped {
        eprintln!("skipped {s}");
    }
    if !unconfigured.is_empty() {
        eprintln!("no [llm] settings for: {}", unconfigured.join(", "));
    }
    println!("{}", table(&runs));
    eprintln!("exchanges recorded in `{}`", dir.display());
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Replay;
    use crate::llm::tests::{Server, learner, scratch, settings};

    /// With the built-in embedding (a server without embeddings), the request's words route each kind of
    /// program to its expert.
    #[test]
    fn requests_name_the_kind_of_computation_the_router_matches() {
        let dir = scratch("cli-route");
        let src = dir.join("lib.rs");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            &src,
            "#[optiml::kernel(\"relu\")]\npub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);\n\
             #[optiml::kernel(\"softmax over the last axis\")]\npub fn sm(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);\n\
             #[optiml::kernel(\"cumsum along dim 1\")]\npub fn cs(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);\n",
        )
        .unwrap();
        let router = Router::new(experts::builtin(), None);
        for k in scan::scan(&[src]).unwrap().unique_kernels() {
            let optiml_spec::Family::Tensor(p) = &k.spec.family else {
                panic!("{} is not a tensor program", k.name)
            };
            let v = router
                .embed(&request_text(&k, p, Arch::new(9, 0)), None)
                .unwrap();
            let expected = if k.name == "relu" {
                "memory-bound"
            } else {
                "reductions-and-scans"
            };
            assert_eq!(router.route(&v, 1, None)[0].0.name, expected, "{}", k.name);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn each_tensor_kernel_goes_to_its_experts_and_the_table_says_what_compiled() {
        let server = Server::with(learner);
        let dir = scratch("cli-generate");
        let src = dir.join("lib.rs");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            &src,
            "#[optiml::kernel(\"relu\")]\npub fn relu(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);\n\
             #[optiml::kernel(\"matmul, f32\")]\npub fn mm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, \
             m: usize, n: usize, k: usize);\n",
        )
        .unwrap();
        let kernels = scan::scan(&[src]).unwrap().unique_kernels();
        let settings = settings(&server.url, Replay::Auto);
        let llm = Llm::new(&settings, dir.join("llm"));
        let nvrtc = crate::nvrtc::testing::nvrtc();
        let compile = |source: &str| {
            nvrtc::compile(nvrtc, "llm.cu", source, Arch::new(9, 0)).map_err(|e| e.log)
        };
        let (runs, skipped) =
            generate(&llm, &settings, &kernels, Arch::new(9, 0), (2, 0), &compile);
        // relu goes to the two nearest experts; the matmul has no contract yet.
        assert_eq!(runs.len(), 2);
        assert!(
            runs.iter()
                .all(|r| r.kernel == "relu" && r.written.kernel.is_some())
        );
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].contains("`mm`"), "{skipped:?}");
        let text = table(&runs);
        assert!(text.contains("| relu | "), "{text}");
        assert!(
            text.contains("2 expert runs over 1 kernels: 2 compiled (0 at the first answer)"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
