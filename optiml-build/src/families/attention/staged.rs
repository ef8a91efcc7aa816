//! The staged form of attention on sm_90 ([`Launch::Attention`]): the scores `S = scale · q kᵀ` in fp32 and
//! `y = P v` on a `wgmma` matmul template (16-bit for bf16 and f16 storage, TF32 for a `tf32` spec), the weights
//! `P = softmax(S)` between them ([`STAGED_TEMPLATE`]), through a workspace, a round of batch items at a time.
//! With 512 keys and 1024 features (KernelBench 97) the scores are half the size of one input, so writing them
//! out costs less than the fused kernel's `mma.sync` products (`bench/harness/attention_staged/NOTES.md` has the
//! arithmetic). The module's entry point stays the fused kernel, for the calls the stages cannot take.
//!
//! One module holds both instances of the template: the shared headers once at file scope, each instance in a
//! namespace of its own with every option set, and every macro an instance (or the fused kernel before them)
//! defined undefined before the next. The TF32 template's entry names are fixed, so each instance renames them.

use super::fast::{self, STAGED_ROUNDS};
use super::{AttentionShape, Kind, Scale};
use crate::experts::Candidate;
use crate::families::matmul::{half, has_wgmma, tf32};
use optiml_runtime::{Arch, Launch, StagedAttention, Wgmma16};
use optiml_spec::DType;

/// The softmax between the products.
pub const STAGED_TEMPLATE: &str = include_str!("attention_staged.cu");

/// The products' tiles, both templates: two consumer warpgroups of 64 rows by 256 columns, four stages (each
/// template's default, its fastest on large products; the TF32 template computes `Cᵀ` in these layouts, so its
/// tile of `C` is 256 × 128). Either way the shared memory is the stages of both operands' tiles (128-byte rows)
/// and 1024 bytes of alignment.
const TILE_M: u32 = 128;
const TILE_N: u32 = 256;
const STAGES: u32 = 4;
const THREADS: u32 = 128 * (TILE_M / 64 + 1);
const SMEM_BYTES: u32 = STAGES * (TILE_M + TILE_N) * 128 + 1024;

/// The 16-bit template's options every instance sets (and undefines after it), so that neither instance sees
/// the other's.
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

/// The TF32 template's options every instance undefines first and after it; it sets all but the register split
/// (`OPTIML_SETMAXNREG` and the two counts), which the template chooses for each layout.
const TF32_OPTIONS: [&str; 16] = [
    "OPTIML_TRANS_A",
    "OPTIML_TRANS_B",
    "OPTIML_HAS_ALPHA",
    "OPTIML_HAS_BETA",
    "OPTIML_HAS_BIAS",
    "OPTIML_QN",
    "OPTIML_CONSUMERS",
    "OPTIML_PINGPONG",
    "OPTIML_STAGES",
    "OPTIML_TMA",
    "OPTIML_SPLIT_K",
    "OPTIML_TRANSPOSE_A",
    "OPTIML_TF32X3",
    "OPTIML_SETMAXNREG",
    "OPTIML_PRODUCER_REGS",
    "OPTIML_CONSUMER_REGS",
];

/// The staged roots a 16-bit or TF32 search on `arch` evaluates beside its walk: the fused default's tiles with each
/// round size; none but on sm_90 (`wgmma` is that chip's own).
pub fn roots(arch: Arch) -> Vec<fast::Schedule> {
    if !has_wgmma(arch) {
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

/// One instance of `template` with `options` (of `all`, which are undefined first), in namespace `space`, every
/// macro it defined undefined after it.
fn instance(template: &str, all: &[&str], space: &str, options: &[(&str, String)]) -> String {
    let mut out = String::new();
    for o in all {
        out.push_str(&format!("#undef {o}\n"));
    }
    for (name, value) in options {
        out.push_str(&format!("#define {name} {value}\n"));
    }
    out.push_str(&format!(
        "namespace {space} {{\n{template}\n}}  // namespace {space}\n"
    ));
    for name in defined(template).into_iter().chain(all.iter().copied()) {
        out.push_str(&format!("#undef {name}\n"));
    }
    out
}

/// The two products on the 16-bit template: the scores NT with an fp32 output and the scale, the values NN.
fn products16() -> String {
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
    let template = half::WGMMA_TEMPLATE;
    let scores = common(optiml_runtime::ATTN_SCORES_ENTRY, 1, 1, 1);
    let values = common(optiml_runtime::ATTN_VALUES_ENTRY, 0, 0, 0);
    instance(template, &OPTIONS, "optiml_stage_scores", &scores)
        + &instance(template, &OPTIONS, "optiml_stage_values", &values)
}

/// The two products on the TF32 template (its `cp.async` producer: no tensor maps), its fixed entry names
/// renamed for each: the scores NT (its shared-memory form) with the scale, the values NN (its register form).
fn products_tf32() -> String {
    let common = |trans_b: u32, alpha: u32| {
        vec![
            ("OPTIML_TRANS_A", "0".to_string()),
            ("OPTIML_TRANS_B", trans_b.to_string()),
            ("OPTIML_HAS_ALPHA", alpha.to_string()),
            ("OPTIML_HAS_BETA", "0".into()),
            ("OPTIML_HAS_BIAS", "0".into()),
            ("OPTIML_QN", TILE_N.to_string()),
            ("OPTIML_CONSUMERS", (TILE_M / 64).to_string()),
            ("OPTIML_PINGPONG", "0".into()),
            ("OPTIML_STAGES", STAGES.to_string()),
            ("OPTIML_TMA", "0".into()),
            ("OPTIML_SPLIT_K", "0".into()),
            ("OPTIML_TRANSPOSE_A", "0".into()),
            ("OPTIML_TF32X3", "0".into()),
        ]
    };
    let mut out = String::new();
    for (entry, space, trans_b, alpha) in [
        (
            optiml_runtime::ATTN_SCORES_ENTRY,
            "optiml_stage_scores",
            1,
            1,
        ),
        (
            optiml_runtime::ATTN_VALUES_ENTRY,
            "optiml_stage_values",
            0,
            0,
        ),
    ] {
        out.push_str(&format!("#define optiml_matmul {entry}\n"));
        out.push_str(&format!("#define optiml_transpose_a {entry}_transpose_a\n"));
        out.push_str(&instance(
            tf32::WGMMA_TEMPLATE,
            &TF32_OPTIONS,
            space,
            &common(trans_b, alpha),
        ));
        out.push_str("#undef optiml_matmul\n#undef optiml_transpose_a\n");
    }
    out
}

/// The candidate of `s` (staged) for `shape`, whose program is of `kind` (16-bit or TF32).
pub fn candidate(shape: &AttentionShape, s: &fast::Schedule, kind: Kind) -> Candidate {
    let f16 = u32::from(kind == Kind::Half(DType::F16));
    let fused_schedule = fast::Schedule { staged: 0, ..*s };
    let fused = fused_schedule.candidate(shape);
    let fused_launch = super::launch(shape, 256, fused_schedule.smem_bytes(kind), s.br);
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
    source.push_str(&if kind == Kind::Tf32 {
        products_tf32()
    } else {
        products16()
    });
    source.push_str(&format!(
        "#define OPTIML_SOFTMAX_F32 {}\n",
        u32::from(kind == Kind::Tf32)
    ));
    source.push_str(&format!("#define OPTIML_SOFTMAX_F16 {f16}\n"));
    source.push_str(STAGED_TEMPLATE);
    let l = &shape.layout;
    // The TF32 template computes Cᵀ in these layouts: its tile of C is the other way round.
    let (tile_m, tile_n) = if kind == Kind::Tf32 {
        (TILE_N, TILE_M)
    } else {
        (TILE_M, TILE_N)
    };
    let geometry = |trans_b| Wgmma16 {
        tile_m,
        tile_n,
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
    matches!(kind, Kind::Half(_) | Kind::Tf32) && has_wgmma(arch)
}
