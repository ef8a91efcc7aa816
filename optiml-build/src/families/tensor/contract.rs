//! What an LLM expert is asked to write for a tensor program ([`crate::llm::generate`]): the program ABI every
//! generated kernel takes, a launch that serves any program (blocks of 256 threads, at most 8 per
//! multiprocessor, the kernel looping over its work), the computation in index notation and how it is checked.
//! The kernel it answers is then one more candidate for the program's gate.

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

/// The contract for `p`, an f32 program (16-bit programs need headers the guard does not let an answer include;
/// they get none).
pub fn contract(p: &Program) -> Option<Contract> {
    if p.dtype != DType::F32 {
        return None;
    }
    let mut params: Vec<String> = Vec::new();
    for (k, t) in p.inputs.iter().enumerate() {
        params.push(format!("const {}* in{k}", c_type(t.elem)));
    }
    for (k, s) in p.stmts.iter().filter(|s| s.output).enumerate() {
        params.push(format!("{}* out{k}", c_type(s.elem)));
    }
    for d in 0..p.dims.len() {
        params.push(format!("long long n{d}"));
    }
    for k in 0..p.params.len() {
        params.push(format!("float p{k}"));
    }
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
        if fixed.is_empty() {
            "Every extent is given at run time.".to_string()
        } else {
            format!(
                "Fixed extents: {} (the argument still comes).",
                fixed.join(", ")
            )
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
    })
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
        // 16-bit programs get no contract.
        let half = optiml_spec::program::notation::parse("y[i] = relu(x[i]), bf16").unwrap();
        assert!(contract(&half).is_none());
    }
}
