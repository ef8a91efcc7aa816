//! The staged form of 16-bit attention on sm_90 ([`Launch::Attention`]): the scores `S = scale · q kᵀ` in fp32
//! and `y = P v` on the 16-bit `wgmma` matmul template, the weights `P = softmax(S)` between them
//! ([`STAGED_TEMPLATE`]), through a workspace, a round of batch items at a time. With 512 keys and 1024
//! features (KernelBench 97) the scores are half the size of one input, so writing them out costs less than the
//! fused kernel's `mma.sync` products (`bench/harness/attention_staged/NOTES.md` has the arithmetic). The
//! module's entry point stays the fused kernel, for the calls the stages cannot take.
//!
//! One module holds both instances of the template: the shared headers once at file scope, each instance in a
//! namespace of its own with every option set, and every macro an instance (or the fused kernel before them)
//! defined undefined before the next.

use super::fast::{self, STAGED_ROUNDS};
use super::{AttentionShape, Kind, Scale};
use crate::experts::Candidate;
use crate::families::matmul::half::WGMMA_TEMPLATE;
use optiml_runtime::{Arch, Launch, StagedAttention, Wgmma16};
use optiml_spec::DType;

/// The softmax between the products.
pub const STAGED_TEMPLATE: &str = include_str!("attention_staged.cu");

/// The products' tiles: two consumer warpgroups of 64 rows by 256 columns, four stages (the 16-bit template's
/// default, its fastest on large products).
const TILE_M: u32 = 128;
const TILE_N: u32 = 256;
const STAGES: u32 = 4;
const THREADS: u32 = 128 * (TILE_M / 64 + 1);
/// The template's shared memory: the stages of A (`TILE_M` rows) and B (`TILE_N`), 128 bytes a row, and 1024
/// bytes of alignment.
const SMEM_BYTES: u32 = STAGES * (TILE_M + TILE_N) * 128 + 1024;

/// The options every instance sets (and undefines after it), so that neither instance sees the other's.
const OPTIONS: [&str; 16] = [
    "OPTIML_KERNEL",
    "OPTIML_TRANS_A",
    "OPTIML_TRANS_B",
    "OPTIML_C_F32",
    "OPTIML_HAS_ALPHA",
    "OPTIML_HAS_BETA",
    "OPTIML_HAS_BIAS",
    "OPTIML_BN",
    "OPTIML_CONSUMERS",
    "OPTIML_STAGES",
    "OPTIML_GROUP_M",
    "OPTIML_SETMAXNREG",
    "OPTIML_PRODUCER_REGS",
    "OPTIML_CONSUMER_REGS",
    "OPTIML_EPI_VEC",
    "OPTIML_MN_DESC_SWAP",
];

/// The staged roots a 16-bit search on `arch` evaluates beside its walk: the fused default's tiles with each
/// round size; none before sm_90 (`wgmma`).
pub fn roots(arch: Arch) -> Vec<fast::Schedule> {
    if arch.major < 9 {
        return Vec::new();
    }
    let fused = <fast::Schedule as crate::search::Tunable>::default_for(arch);
    [32, 128]
        .into_iter()
        .filter(|r| STAGED_ROUNDS.contains(r))
        .map(|staged| fast::Schedule { staged, ..fused })
        .collect()
}

/// The names a piece of CUDA source defines (`#define NAME …`), in order, without repeats.
fn defined(source: &str) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for line in source.lines() {
        let Some(rest) = line.trim_start().strip_prefix('#') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("define") else {
            continue;
        };
        let name: &str = rest
            .trim_start()
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .next()
            .unwrap_or("");
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// One instance of the 16-bit template with `options`, in namespace `space`, every macro it defined undefined
/// after it.
fn instance(space: &str, options: &[(&str, String)]) -> String {
    let mut out = String::new();
    for o in OPTIONS {
        out.push_str(&format!("#undef {o}\n"));
    }
    for (name, value) in options {
        out.push_str(&format!("#define {name} {value}\n"));
    }
    out.push_str(&format!(
        "namespace {space} {{\n{WGMMA_TEMPLATE}\n}}  // namespace {space}\n"
    ));
    for name in defined(WGMMA_TEMPLATE) {
        out.push_str(&format!("#undef {name}\n"));
    }
    out
}

/// The candidate of `s` (staged) for `shape`, of 16-bit type `dtype`.
pub fn candidate(shape: &AttentionShape, s: &fast::Schedule, dtype: DType) -> Candidate {
    let f16 = u32::from(dtype == DType::F16);
    let fused_schedule = fast::Schedule { staged: 0, ..*s };
    let fused = fused_schedule.candidate(shape);
    let fused_launch = super::launch(
        shape,
        256,
        fused_schedule.smem_bytes(Kind::Half(dtype)),
        s.br,
    );
    let mut source = fused.source.clone();
    // The fused kernel's macros end here: the instances set their own.
    source.push_str(
        "\n// ---- the staged form: the shared headers, the two products, the softmax ----\n",
    );
    for name in defined(&fused.source) {
        source.push_str(&format!("#undef {name}\n"));
    }
    source.push_str(&format!("#define OPTIML_DTYPE {f16}\n"));
    for header in [
        "optiml/defaults.cuh",
        "optiml/epilogue.cuh",
        "optiml/sm90.cuh",
    ] {
        source.push_str(&format!("#include \"{header}\"\n"));
    }
    let common = |kernel: &str, trans_b: u32, c_f32: u32, alpha: u32| {
        vec![
            ("OPTIML_KERNEL", kernel.to_string()),
            ("OPTIML_TRANS_A", "0".into()),
            ("OPTIML_TRANS_B", trans_b.to_string()),
            ("OPTIML_C_F32", c_f32.to_string()),
            ("OPTIML_HAS_ALPHA", alpha.to_string()),
            ("OPTIML_HAS_BETA", "0".into()),
            ("OPTIML_HAS_BIAS", "0".into()),
            ("OPTIML_BN", TILE_N.to_string()),
            ("OPTIML_CONSUMERS", (TILE_M / 64).to_string()),
            ("OPTIML_STAGES", STAGES.to_string()),
            ("OPTIML_GROUP_M", "8".into()),
            ("OPTIML_SETMAXNREG", "1".into()),
            ("OPTIML_PRODUCER_REGS", "40".into()),
            ("OPTIML_CONSUMER_REGS", "232".into()),
            ("OPTIML_EPI_VEC", "1".into()),
            ("OPTIML_MN_DESC_SWAP", "0".into()),
        ]
    };
    source.push_str(&instance(
        "optiml_stage_scores",
        &common(optiml_runtime::ATTN_SCORES_ENTRY, 1, 1, 1),
    ));
    source.push_str(&instance(
        "optiml_stage_values",
        &common(optiml_runtime::ATTN_VALUES_ENTRY, 0, 0, 0),
    ));
    source.push_str(&format!("#define OPTIML_SOFTMAX_F16 {f16}\n"));
    source.push_str(STAGED_TEMPLATE);
    let l = &shape.layout;
    let geometry = |trans_b| Wgmma16 {
        tile_m: TILE_M,
        tile_n: TILE_N,
        threads: THREADS,
        smem_bytes: SMEM_BYTES,
        trans_a: false,
        trans_b,
    };
    let dim = |d: usize| d as u32;
    Candidate {
        source,
        entry: super::ENTRY,
        launch: Launch::Attention(StagedAttention {
            fused: fused_launch,
            scores: geometry(true),
            values: geometry(false),
            chunk: s.staged,
            dims: [dim(l.lq), dim(l.lk), dim(l.d), dim(l.dv)],
            qkv: l.qkv.map(dim),
            scale_bits: match l.scale {
                Scale::Param => None,
                Scale::Const(c) => Some((c as f32).to_bits()),
                Scale::One => Some(1f32.to_bits()),
            },
        }),
        schedule: crate::search::Tunable::describe(s),
    }
}

/// Whether `kind` on `arch` has the staged form.
pub fn applies(kind: Kind, arch: Arch) -> bool {
    matches!(kind, Kind::Half(_)) && arch.major >= 9
}
