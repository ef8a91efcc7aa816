//! What an LLM expert is asked to write for a tensor program ([`crate::llm::generate`]): the program ABI every
//! generated kernel takes, a launch that serves any program (blocks of 256 threads, at most 8 per
//! multiprocessor, the kernel looping over its work), the computation in index notation and how it is checked.
//! The kernel it answers is then one more candidate for the program's gate. A user's own kernel named as a seed
//! ([`seed_root`]) is written against the same contract.

use super::codegen;
use crate::llm::generate::Contract;
use optiml_runtime::{Arch, Launch, ProgramLaunch};
use optiml_spec::DType;
use optiml_spec::program::{Elem, Program};

/// Threads per block of an LLM-written kernel.
pub const THREADS: u32 = 256;

/// The C type of an element of `elem` (f32 programs; the float64 reference reads every floating input from its
/// f32 values too).
pub(super) fn c_type(elem: Elem) -> &'static str {
    match elem {
        Elem::Float => "float",
        Elem::I64 => "long long",
        Elem::I32 => "int",
        Elem::Bool => "unsigned char",
    }
}

/// The C type of an element of `elem` in the ABI of a program of `dtype`: a 16-bit program's floats are their
/// raw bit patterns, as its generated kernels and the runtime pass them.
fn abi_type(elem: Elem, dtype: DType) -> &'static str {
    match (elem, dtype) {
        (Elem::Float, DType::Bf16 | DType::F16) => "unsigned short",
        _ => c_type(elem),
    }
}

/// What a kernel of a 16-bit program is told of its floats, and the header that gives it the conversions (the
/// same `optiml/program.cuh` the generated kernels include, offered to NVRTC in memory); `None` for f32.
fn sixteen_bit(dtype: DType) -> Option<(&'static str, &'static str)> {
    let text = match dtype {
        DType::F32 => return None,
        DType::Bf16 => concat!(
            "Floating tensors hold bf16 values as raw 16-bit patterns (`unsigned short`): widen each with ",
            "`optiml_p::bf16_to_f32(u)` (exact), compute in float, and round each output once with ",
            "`optiml_p::f32_to_bf16(x)` (to nearest even); `optiml/program.cuh`, which declares them, is included ",
            "before the kernel."
        ),
        DType::F16 => concat!(
            "Floating tensors hold f16 values as raw 16-bit patterns (`unsigned short`): widen each with ",
            "`optiml_p::f16_to_f32(u)` (exact), compute in float, and round each output once with ",
            "`optiml_p::f32_to_f16(x)` (to nearest even); `optiml/program.cuh`, which declares them, is included ",
            "before the kernel."
        ),
    };
    Some((text, "#include \"optiml/program.cuh\"\n"))
}

/// The kernel parameters of `p`'s ABI, in order: inputs, outputs, extents, scalars.
fn parameters(p: &Program) -> Vec<String> {
    let mut params: Vec<String> = Vec::new();
    for (k, t) in p.inputs.iter().enumerate() {
        params.push(format!("const {}* in{k}", abi_type(t.elem, p.dtype)));
    }
    for (k, s) in p.stmts.iter().filter(|s| s.output).enumerate() {
        params.push(format!("{}* out{k}", abi_type(s.elem, p.dtype)));
    }
    for d in 0..p.dims.len() {
        params.push(format!("long long n{d}"));
    }
    for k in 0..p.params.len() {
        params.push(format!("float p{k}"));
    }
    params
}

/// What `cargo optiml explain` says a seed kernel of `p` must be.
pub fn seed_abi(p: &Program) -> String {
    format!(
        "seed kernel (`seed = \"file.cu:function\"`; its parameters in this order, any names):\n  \
         extern \"C\" __global__ void function({})\n  \
         launched on a 1-D grid of blocks of {THREADS} threads, at most 8 blocks per multiprocessor, no dynamic \
         shared memory: it loops over its work\n  (inK: the program's inputs in order, outK: its outputs, nK: the \
         extents of its dimensions in the canonical form's order d0, d1, …, pK: its scalars){}",
        parameters(p).join(", "),
        sixteen_bit(p.dtype)
            .map(|(text, _)| format!("\n  {text}"))
            .unwrap_or_default()
    )
}

/// The contract for `p`. A 16-bit program's kernel gets the conversions of `optiml/program.cuh`, which the root
/// includes ahead of its text (so an answer need not include it; a second include is harmless).
pub fn contract(p: &Program) -> Option<Contract> {
    let params = parameters(p);
    let fixed: Vec<String> = p
        .dims
        .iter()
        .enumerate()
        .filter_map(|(d, x)| x.size.fixed().map(|v| format!("n{d} is always {v}")))
        .collect();
    let all = (1u32 << p.dims.len()) - 1;
    // The dimensions a call must not leave empty (a max over none has no value) are the program's, whatever
    // the kernel: the generator's default launch states them.
    let nonempty_mask = match codegen::classify(p)
        .ok()?
        .default_candidate(Arch::new(9, 0))
        .launch
    {
        Launch::Program(l) => l.nonempty_mask,
        _ => 0,
    };
    let text = format!(
        "Write the CUDA kernel `optiml_program` computing this program, in index notation (dimension dK runs over \
         0 ≤ dK < nK; inK are the inputs, outK the outputs, tK intermediates you compute as you see fit, pK scalar \
         parameters):\n\n    {}\n\nIts signature, exactly:\n\n    extern \"C\" __global__ void optiml_program({})\n\n\
         Every tensor is dense and row-major in the order of its indices as written: `in0[d0, d1]` is \
         `in0[d0 * n1 + d1]`. `sum(dK)`, `mean(dK)`, `max(dK)`, `min(dK)`, `argmax(dK)` and `argmin(dK)` reduce over \
         dK (argmax and argmin give the first index of the extreme value). {}\n\n\
         Launch: a 1-D grid of any number of blocks of {THREADS} threads (at most 8 blocks per multiprocessor, no \
         dynamic shared memory): loop over the work so that every grid computes every output element exactly \
         once.\n\nCheck: every output element is compared with a double-precision evaluation of the program on fresh random \
         inputs, at several sizes including 1 and odd sizes; about 1e-5 of relative error is allowed. Write only the \
         kernel and the __device__ functions it calls.",
        p.canonical(),
        params.join(", "),
        {
            let extents = if fixed.is_empty() {
                "Every extent is given at run time.".to_string()
            } else {
                format!(
                    "Fixed extents: {} (the argument still comes).",
                    fixed.join(", ")
                )
            };
            match sixteen_bit(p.dtype) {
                Some((text, _)) => format!("{extents} {text}"),
                None => extents,
            }
        }
    );
    Some(Contract {
        entry: "optiml_program",
        text,
        launch: Launch::Program(ProgramLaunch {
            threads: THREADS,
            smem_bytes: 0,
            items_mask: all,
            items_per_block: THREADS * 4,
            max_blocks_per_sm: 8,
            cluster: 1,
            nonempty_mask,
            tree: None,
        }),
        prelude: sixteen_bit(p.dtype).map_or("", |(_, include)| include),
    })
}

/// The search root of `seed`, a user's kernel for `p` written against [`contract`]'s ABI and launch: its file,
/// with C linkage added where it was left off, the function renamed to the contract's entry point by a macro (so
/// the user's name stays in the file), and a `#line` so that NVRTC's messages name the user's file and lines.
/// A 16-bit program's seed gets the contract's prelude (the conversions) ahead of it. `None` for a program
/// with no contract (one the generator cannot lower).
pub fn seed_root(p: &Program, seed: &crate::scan::SeedSource) -> Option<crate::experts::Root> {
    let contract = contract(p)?;
    let function = &seed.seed.function;
    let source = format!(
        "{prelude}#define {function} {entry}\n#line 1 \"{file}\"\n{text}",
        prelude = contract.prelude,
        entry = contract.entry,
        file = seed.seed.file,
        text = crate::llm::guard::with_c_linkage(&seed.text, function),
    );
    let schedule = serde_json::json!({ "seed": {
        "file": seed.seed.file,
        "function": function,
        "sha256": seed.sha256(),
    }});
    Some(root(
        contract,
        format!("seed {}", seed.seed),
        schedule,
        source,
    ))
}

/// A root launched as `contract` says, with `name` in logs and reports and `schedule` in the log.
fn root(
    contract: Contract,
    name: String,
    schedule: serde_json::Value,
    source: String,
) -> crate::experts::Root {
    crate::experts::Root {
        candidate: crate::experts::Candidate {
            source,
            entry: contract.entry,
            launch: contract.launch,
            schedule: name.clone(),
        },
        name,
        schedule,
    }
}

/// The search root of a kernel an LLM expert wrote for `p` against [`contract`] (`source` is what compiled, C
/// linkage included). The log records the source itself, so the winner can be made again, and checked, from the
/// log alone on a machine with no endpoint and no recordings. `None` for a program with no contract.
pub fn llm_root(p: &Program, expert: &str, source: &str) -> Option<crate::experts::Root> {
    let schedule = serde_json::json!({ "llm": {
        "expert": expert,
        "sha256": optiml_spec::sha256_hex(source.as_bytes()),
        "source": source,
    }});
    Some(root(
        contract(p)?,
        format!("llm {expert}"),
        schedule,
        source.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_states_the_abi_the_computation_and_the_launch() {
        let p = optiml_spec::program::notation::parse("y[r, c] = x[r, c] / sum(c) x[r, c] * s")
            .unwrap();
        let c = contract(&p).unwrap();
        assert!(
            c.text.contains(
                "extern \"C\" __global__ void optiml_program(const float* in0, float* out0, long long n0, long long n1, float p0)"
            ),
            "{}",
            c.text
        );
        assert!(c.text.contains(&p.canonical()), "{}", c.text);
        let Launch::Program(l) = c.launch else {
            panic!("{:?}", c.launch)
        };
        assert_eq!(
            (l.threads, l.items_mask, l.max_blocks_per_sm),
            (THREADS, 0b11, 8)
        );
        assert!(c.prelude.is_empty());
        // A 16-bit program's floats are raw bits, converted with the header its prelude includes.
        let half = optiml_spec::program::notation::parse("y[i] = relu(x[i]), bf16").unwrap();
        let c = contract(&half).unwrap();
        assert!(
            c.text.contains(
                "optiml_program(const unsigned short* in0, unsigned short* out0, long long n0)"
            ) && c.text.contains("optiml_p::f32_to_bf16"),
            "{}",
            c.text
        );
        assert_eq!(c.prelude, "#include \"optiml/program.cuh\"\n");
    }

    fn seed(text: &str) -> crate::scan::SeedSource {
        crate::scan::SeedSource {
            seed: optiml_spec::Seed::parse("kernels/rows.cu:my_rows").unwrap(),
            path: "/pkg/kernels/rows.cu".into(),
            text: text.into(),
        }
    }

    /// A seed is the user's file under the contract's entry point: it compiles to `optiml_program` with C
    /// linkage the user left off, and NVRTC's messages name the user's file and line.
    #[test]
    fn a_seed_compiles_to_the_entry_point_and_its_errors_name_the_users_file() {
        let p = optiml_spec::program::notation::parse("y[r, c] = x[r, c] * 2").unwrap();
        let nvrtc = crate::nvrtc::testing::nvrtc();
        let arch = Arch::new(9, 0);
        let good = seed(
            "__global__ void my_rows(const float* x, float* y, long long r, long long c) {\n\
             for (long long i = blockIdx.x * 256ll + threadIdx.x; i < r * c; i += 256ll * gridDim.x) y[i] = 2 * x[i];\n}\n",
        );
        let root = seed_root(&p, &good).unwrap();
        assert_eq!(root.name, "seed kernels/rows.cu:my_rows");
        assert_eq!(root.candidate.entry, "optiml_program");
        assert_eq!(root.schedule["seed"]["sha256"], good.sha256());
        let compiled =
            crate::nvrtc::compile(nvrtc, "seed.cu", &root.candidate.source, arch).unwrap();
        assert!(
            compiled.ptx.contains(".entry optiml_program("),
            "{}",
            compiled.ptx
        );
        let broken = seed("__global__ void my_rows(const float* x) {\n  undeclared = 1;\n}\n");
        let log = crate::nvrtc::compile(
            nvrtc,
            "seed.cu",
            &seed_root(&p, &broken).unwrap().candidate.source,
            arch,
        )
        .unwrap_err()
        .log;
        assert!(log.contains("kernels/rows.cu(2)"), "{log}");
        // The test crate's seed (a row softmax) compiles under the softmax program's contract.
        let softmax = optiml_spec::parse("softmax over the last axis, f32").unwrap();
        let optiml_spec::Family::Tensor(softmax) = &softmax.family else {
            panic!()
        };
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/kernels/kernels/softmax_rows.cu"
        );
        let text = std::fs::read_to_string(file).unwrap();
        let mut ours = seed(&text);
        ours.seed = optiml_spec::Seed::parse("kernels/softmax_rows.cu:softmax_rows").unwrap();
        let source = seed_root(softmax, &ours).unwrap().candidate.source;
        if let Err(e) = crate::nvrtc::compile(nvrtc, "seed.cu", &source, arch) {
            panic!("{}", e.log);
        }
        // A 16-bit program's seed reads raw bits and converts them with the header the root includes; its
        // errors still name the user's lines.
        let half = optiml_spec::program::notation::parse("y[i] = relu(x[i]), f16").unwrap();
        let relu16 = seed(
            "__global__ void my_rows(const unsigned short* x, unsigned short* y, long long n) {\n\
             for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x)\n\
             y[i] = optiml_p::f32_to_f16(fmaxf(optiml_p::f16_to_f32(x[i]), 0.0f));\n}\n",
        );
        let source = seed_root(&half, &relu16).unwrap().candidate.source;
        match crate::nvrtc::compile(nvrtc, "seed.cu", &source, arch) {
            Ok(c) => assert!(c.ptx.contains(".entry optiml_program("), "{}", c.ptx),
            Err(e) => panic!("{}", e.log),
        }
        let mut broken16 = relu16.clone();
        broken16.text = broken16.text.replace("f16_to_f32", "f16_to_f33");
        let log = crate::nvrtc::compile(
            nvrtc,
            "seed.cu",
            &seed_root(&half, &broken16).unwrap().candidate.source,
            arch,
        )
        .unwrap_err()
        .log;
        assert!(log.contains("kernels/rows.cu(3)"), "{log}");
    }
}
