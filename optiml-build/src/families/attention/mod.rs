//! The attention family: scaled dot-product attention in exact fp32, `y = softmax(q kᵀ · scale) v` over the last
//! two axes of `q [… , i, d]`, `k [… , j, d]` and `v [… , j, dv]` ("scaled dot-product attention" in plain words,
//! PyTorch's `scaled_dot_product_attention` without a mask or dropout). The tensor family cannot generate it (its
//! kernels reduce one set of dimensions; attention contracts `d`, then reduces and contracts `j`); this family's
//! kernels fuse the whole program FlashAttention-style: scores of a chunk of keys, an online softmax, the weighted
//! values accumulated on chip, so no score matrix goes to memory. Two kernels, a choice of the schedule
//! ([`Units`]): products on tensor cores in 3xTF32 ([`MMA_TEMPLATE`], the default from sm_80 on: 2.7× the fp32
//! FMA kernel on KernelBench 97, nearer the float64 result than PyTorch's fp32 attention), or in fp32 FMA
//! ([`TEMPLATE`]). Both are held to the exact fp32 tolerance by the gate.
//!
//! Its specs are tensor programs, so, like [`super::transpose`], it takes the rest from the tensor family: the
//! signature and the runtime's program launcher (its kernel takes the program ABI), and the gate, which checks every
//! candidate against the float64 interpreter of the program.

use super::tensor::{self, Extents};
use super::{Catalog, Family, is_schedule_of, read_schedule};
use crate::config::{Dims, KernelSettings};
use crate::eval::{Distribution, Evaluable, Problem, Tolerance};
use crate::experts::{Candidate, Def};
use crate::search::{Bottleneck, Transform, Tunable};
use crate::tune::{self, Bucket, Progress, Rate, Request, Target, TuneError};
use optiml_runtime::{Arch, Launch, ProgramLaunch};
use optiml_spec::program::{Binary, Elem, Expr, Program, Reduce, Stmt, Unary};
use optiml_spec::{DType, Dim, Precision, Spec};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// The family.
pub struct Attention;

/// The family's name, in listings.
const FAMILY: &str = "attention";

/// The fp32 FMA kernel's template.
pub const TEMPLATE: &str = include_str!("attention.cu");

/// The tensor-core kernel's template (3xTF32, or TF32 for a `tf32` spec; sm_80+).
pub const MMA_TEMPLATE: &str = include_str!("attention_mma.cu");

/// The tensor-core kernel's template for 16-bit storage (bf16, f16; sm_80+).
pub const MMA16_TEMPLATE: &str = include_str!("attention_mma16.cu");

/// What a candidate is made from: the templates and the code that writes their headers, so that a change to any
/// retires the entries made from them.
const SOURCES: [&str; 9] = [
    TEMPLATE,
    MMA_TEMPLATE,
    MMA16_TEMPLATE,
    include_str!("mod.rs"),
    include_str!("fast.rs"),
    staged::STAGED_TEMPLATE,
    crate::families::matmul::half::WGMMA_TEMPLATE,
    include_str!("staged.rs"),
    crate::families::matmul::tf32::WGMMA_TEMPLATE,
];

/// What an attention program asks of its products, which decides the kernels and the schedule type searched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// f32 storage, exact fp32 products: [`Schedule`] (fp32 FMA or 3xTF32).
    Exact,
    /// f32 storage, products allowed TF32 (`tf32`): [`fast::Schedule`] on TF32 tensor cores.
    Tf32,
    /// 16-bit storage (bf16 or f16): [`fast::Schedule`] on 16-bit tensor cores.
    Half(DType),
}

impl Kind {
    /// The kind of `p`.
    pub fn of(p: &Program) -> Kind {
        match (p.dtype, p.precision) {
            (DType::F32, Precision::Exact) => Kind::Exact,
            (DType::F32, Precision::Tf32) => Kind::Tf32,
            (d, _) => Kind::Half(d),
        }
    }
}

/// Its entry point.
pub const ENTRY: &str = "optiml_attention";

/// The most dynamic shared memory a block of an sm_90 GPU may have (227 KiB).
const MAX_SMEM: u32 = 227 * 1024;

/// How the scores are scaled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// By the program's one run-time parameter.
    Param,
    /// By a constant of the spec.
    Const(f64),
    /// Not at all.
    One,
}

/// Where the axes of an attention program are: dimensions, as indices into the program's, and the inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// The leading axes every tensor shares, in order (empty for matrices).
    pub batch: Vec<usize>,
    /// Queries (`i`).
    pub lq: usize,
    /// Keys and values (`j`).
    pub lk: usize,
    /// Query and key features (`d`).
    pub d: usize,
    /// Value features (`dv`).
    pub dv: usize,
    /// The inputs holding `q`, `k` and `v`, as indices into the program's.
    pub qkv: [usize; 3],
    /// The scores' scale.
    pub scale: Scale,
    /// The scores multiply the key before the query (`k·q`): the order the program is compared in.
    pub keys_first: bool,
}

impl Layout {
    /// The layout of `p` when it is exactly attention in f32: the program "scaled dot-product attention" lowers to,
    /// under any names and with any leading axes (`s = sum(d) q·k·scale; m = max(j) s; e = exp(s − m);
    /// y = sum(j) e·v / sum(j) e`), every tensor row-major in `[…, position, feature]`.
    pub fn of(p: &Program) -> Option<Layout> {
        if p.inputs.len() != 3
            || p.params.len() > 1
            || p.inputs.iter().any(|t| t.elem != Elem::Float)
        {
            return None;
        }
        let [s, _, _, _, y] = &p.stmts[..] else {
            return None;
        };
        // The scores name the query and key inputs, the output the value input and its features.
        let Expr::Reduce(Reduce::Sum, over, body) = &s.expr else {
            return None;
        };
        let [d] = over[..] else { return None };
        let (product, scale) = match &**body {
            Expr::Binary(Binary::Mul, a, b) => match &**b {
                Expr::Param(0) => (&**a, Scale::Param),
                Expr::Const(c) if c.is_finite() => (&**a, Scale::Const(*c)),
                _ => (&**body, Scale::One),
            },
            _ => return None,
        };
        let Expr::Binary(Binary::Mul, qe, ke) = product else {
            return None;
        };
        let (&Expr::Input(a), &Expr::Input(b)) = (&**qe, &**ke) else {
            return None;
        };
        let n = y.axes.len();
        // The query is the factor whose position axis the output keeps.
        let keys_first = n >= 2 && p.inputs[b].axes.get(n - 2) == Some(&y.axes[n - 2]);
        let (qi, ki) = if keys_first { (b, a) } else { (a, b) };
        let vi = (0..3).find(|&x| x != qi && x != ki)?;
        let (q, k, v) = (&p.inputs[qi], &p.inputs[ki], &p.inputs[vi]);
        if n < 2 || q.axes.len() != n || k.axes.len() != n || v.axes.len() != n {
            return None;
        }
        let batch = q.axes[..n - 2].to_vec();
        let (lq, lk, dv) = (q.axes[n - 2], k.axes[n - 2], v.axes[n - 1]);
        let layout = Layout {
            batch,
            lq,
            lk,
            d,
            dv,
            qkv: [qi, ki, vi],
            scale,
            keys_first,
        };
        let mut distinct = layout.batch.clone();
        distinct.extend([lq, lk, d, dv]);
        let count = distinct.len();
        distinct.sort_unstable();
        distinct.dedup();
        let params = usize::from(scale == Scale::Param);
        (distinct.len() == count
            && distinct.len() == p.dims.len()
            && p.params.len() == params
            && layout.expected(p) == p.stmts)
            .then_some(layout)
    }

    /// The statements of attention with this layout, named as `p` names them.
    fn expected(&self, p: &Program) -> Vec<Stmt> {
        let with = |last: &[usize]| -> Vec<usize> {
            self.batch
                .iter()
                .copied()
                .chain(last.iter().copied())
                .collect()
        };
        let [qi, ki, vi] = self.qkv;
        let (a, b) = if self.keys_first { (ki, qi) } else { (qi, ki) };
        let product = Expr::Binary(
            Binary::Mul,
            Box::new(Expr::Input(a)),
            Box::new(Expr::Input(b)),
        );
        let body = match self.scale {
            Scale::Param => Expr::Binary(Binary::Mul, Box::new(product), Box::new(Expr::Param(0))),
            Scale::Const(c) => {
                Expr::Binary(Binary::Mul, Box::new(product), Box::new(Expr::Const(c)))
            }
            Scale::One => product,
        };
        let stmt = |at: usize, axes: Vec<usize>, expr: Expr, output: bool| Stmt {
            name: p.stmts.get(at).map_or_else(String::new, |s| s.name.clone()),
            axes,
            expr,
            elem: Elem::Float,
            output,
        };
        let value = |i: usize| Box::new(Expr::Value(i));
        vec![
            stmt(
                0,
                with(&[self.lq, self.lk]),
                Expr::Reduce(Reduce::Sum, vec![self.d], Box::new(body)),
                false,
            ),
            stmt(
                1,
                with(&[self.lq]),
                Expr::Reduce(Reduce::Max, vec![self.lk], value(0)),
                false,
            ),
            stmt(
                2,
                with(&[self.lq, self.lk]),
                Expr::Unary(
                    Unary::Exp,
                    Box::new(Expr::Binary(Binary::Sub, value(0), value(1))),
                ),
                false,
            ),
            stmt(
                3,
                with(&[self.lq]),
                Expr::Reduce(Reduce::Sum, vec![self.lk], value(2)),
                false,
            ),
            stmt(
                4,
                with(&[self.lq, self.dv]),
                Expr::Reduce(
                    Reduce::Sum,
                    vec![self.lk],
                    Box::new(Expr::Binary(
                        Binary::Div,
                        Box::new(Expr::Binary(
                            Binary::Mul,
                            value(2),
                            Box::new(Expr::Input(vi)),
                        )),
                        value(3),
                    )),
                ),
                true,
            ),
        ]
    }
}

/// An attention program and its layout: what a candidate is made for.
#[derive(Clone, Debug)]
pub struct AttentionShape {
    /// The program (its dimensions and names).
    pub program: Program,
    /// Where its axes are.
    pub layout: Layout,
}

impl AttentionShape {
    /// `spec`'s program, when it is attention.
    pub fn of(spec: &Spec) -> Option<AttentionShape> {
        let optiml_spec::Family::Tensor(p) = &spec.family else {
            return None;
        };
        Layout::of(p).map(|layout| AttentionShape {
            program: p.clone(),
            layout,
        })
    }

    /// The extents of every dimension: `batch[k]` for the k-th batch axis (1 past the end of `batch`), then the
    /// queries, keys and the two feature counts. Fixed dimensions keep their value.
    fn extents(&self, batch: &[usize], lq: usize, lk: usize, d: usize, dv: usize) -> Vec<usize> {
        let p = &self.program;
        let l = &self.layout;
        let mut e = vec![1usize; p.dims.len()];
        for (at, &b) in l.batch.iter().enumerate() {
            e[b] = batch.get(at).copied().unwrap_or(1);
        }
        e[l.lq] = lq;
        e[l.lk] = lk;
        e[l.d] = d;
        e[l.dv] = dv;
        for (x, dim) in e.iter_mut().zip(&p.dims) {
            if let Dim::Fixed(v) = dim.size {
                *x = v as usize;
            }
        }
        e
    }
}

/// Which units compute the products.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Units {
    /// fp32 multiply-adds ([`TEMPLATE`]).
    #[default]
    Fma,
    /// Tensor cores in 3xTF32 ([`MMA_TEMPLATE`], sm_80+): each fp32 operand split into a TF32 big and small
    /// part, three TF32 products per product, fp32-level error. A schedule choice, not a precision: the gate
    /// holds it to the exact fp32 tolerance.
    Tf32x3,
}

/// How the kernel tiles the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// The units computing the products (older logs, written before the tensor-core kernel, mean fp32 FMA).
    #[serde(default)]
    pub units: Units,
    /// Threads per block.
    pub threads: u32,
    /// Query rows per tile.
    pub br: u32,
    /// Keys per chunk.
    pub bc: u32,
    /// Value features per tile (the tensor-core kernel's block walks every tile of its queries in turn).
    pub ec: u32,
    /// Query and key features per shared-memory stage of the scores.
    pub dk: u32,
    /// Keys per shared-memory stage of `P v`.
    pub ck: u32,
    /// Score columns per thread (fp32 FMA; 0 on tensor cores, whose fragments fix it).
    pub sc: u32,
    /// Output columns per thread (fp32 FMA; 0 on tensor cores).
    pub oc: u32,
    /// Keys per score pass (tensor cores: a chunk's scores are computed this many keys at a time; 0 on fp32
    /// FMA, which computes a chunk at once).
    #[serde(default)]
    pub sk: u32,
}

const THREADS: [u32; 1] = [256];
const ROWS: [u32; 3] = [16, 32, 64];
const CHUNKS: [u32; 3] = [64, 128, 256];
const FEATURES: [u32; 4] = [128, 256, 512, 1024];
const SCORE_STAGES: [u32; 2] = [16, 32];
const VALUE_STAGES: [u32; 2] = [8, 16];
const SCORE_COLUMNS: [u32; 2] = [4, 8];
const OUTPUT_COLUMNS: [u32; 3] = [8, 16, 32];
const MMA_ROWS: [u32; 2] = [32, 64];
const MMA_CHUNKS: [u32; 3] = [128, 256, 512];
const MMA_PASSES: [u32; 2] = [128, 256];
const MMA_FEATURES: [u32; 2] = [128, 256];
const MMA_SCORE_STAGES: [u32; 2] = [16, 32];
const MMA_VALUE_STAGES: [u32; 2] = [16, 32];

impl Schedule {
    /// Score rows per thread, when the score tile splits evenly.
    fn score_rows(&self) -> Option<u32> {
        let across = self.bc.checked_div(self.sc)?;
        let down = self.threads.checked_div(across)?;
        (across * self.sc == self.bc && down * across == self.threads && down > 0)
            .then(|| self.br / down)
            .filter(|r| r * down == self.br && *r > 0)
    }

    /// Output rows per thread, when the output tile splits evenly.
    fn output_rows(&self) -> Option<u32> {
        let across = self.ec.checked_div(self.oc)?;
        let down = self.threads.checked_div(across)?;
        (across * self.oc == self.ec && down * across == self.threads && down > 0)
            .then(|| self.br / down)
            .filter(|r| r * down == self.br && *r > 0)
    }

    /// Dynamic shared memory per block: two stages of queries, keys and values (on tensor cores, the score and
    /// value stages share one area), the scores and three floats per row.
    pub fn smem_bytes(&self) -> u32 {
        let floats = match self.units {
            Units::Fma => {
                2 * self.dk * (self.br + 4)
                    + 2 * self.dk * (self.bc + 4)
                    + 2 * self.ck * self.ec
                    + self.br * (self.bc + 1)
            }
            Units::Tf32x3 => {
                let scores = (self.br + self.sk) * (self.dk + 4);
                let values = self.ck * (self.ec + 8);
                2 * scores.max(values) + self.br * (self.bc + 4)
            }
        } + 3 * self.br;
        4 * floats
    }

    /// The tensor-core kernel's constraints: its tiles split into 8 warps (2 by 4) of 16 × 8 fragments, a chunk
    /// into whole score passes and value stages, at most 64 accumulators a thread in either product (2 row and
    /// 8 column fragments), 64 accumulators only with stages of at most 16 keys or features (each stage sums
    /// into its own accumulators, and its fragments are loaded ahead of its products: 32 spill), and the shared
    /// memory of one block.
    fn mma_is_valid(&self) -> bool {
        self.threads == 256
            && MMA_ROWS.contains(&self.br)
            && MMA_CHUNKS.contains(&self.bc)
            && MMA_PASSES.contains(&self.sk)
            && MMA_FEATURES.contains(&self.ec)
            && MMA_SCORE_STAGES.contains(&self.dk)
            && MMA_VALUE_STAGES.contains(&self.ck)
            && self.sc == 0
            && self.oc == 0
            && self.bc.is_multiple_of(self.sk)
            && self.bc.is_multiple_of(self.ck)
            && (self.br / 32) * (self.sk / 32) * 4 <= 64
            && (self.br / 32) * (self.ec / 32) * 4 <= 64
            && (self.br / 32) * (self.ec / 32) * 4 * self.ck <= 1024
            && (self.br / 32) * (self.sk / 32) * 4 * self.dk <= 1024
            && self.smem_bytes() <= MAX_SMEM
    }

    /// The candidate computing `shape`'s attention with this schedule.
    pub fn candidate(&self, shape: &AttentionShape) -> Candidate {
        let (last, template): ((&str, Def), _) = match self.units {
            Units::Fma => (("OPTIML_SC", self.sc.into()), TEMPLATE),
            Units::Tf32x3 => (("OPTIML_SK", self.sk.into()), MMA_TEMPLATE),
        };
        let mut defs: Vec<(&str, Def)> = vec![
            ("OPTIML_THREADS", self.threads.into()),
            ("OPTIML_BR", self.br.into()),
            ("OPTIML_BC", self.bc.into()),
            ("OPTIML_EC", self.ec.into()),
            ("OPTIML_DK", self.dk.into()),
            ("OPTIML_CK", self.ck.into()),
            last,
        ];
        if self.units == Units::Fma {
            defs.push(("OPTIML_OC", self.oc.into()));
        }
        Candidate {
            source: source(shape, &self.describe(), &defs, template),
            entry: ENTRY,
            launch: Launch::Program(self.launch(shape)),
            schedule: self.describe(),
        }
    }

    /// The launch: one block per tile of `br` queries by `ec` value features (the items: every batch position,
    /// query and value feature), at most one block per multiprocessor (a block holds its output tile in
    /// registers and most of the shared memory); the kernel loops over the tiles. The tensor-core kernel's
    /// tile is `br` queries by every feature, but its items are the same (every variant of a program is
    /// dispatched by the same items): `br` of them per block gives at least a block per tile, capped at one per
    /// multiprocessor. The keys must not be empty (a softmax over no key has no value).
    fn launch(&self, shape: &AttentionShape) -> ProgramLaunch {
        let items_per_block = match self.units {
            Units::Fma => self.br * self.ec,
            Units::Tf32x3 => self.br,
        };
        launch(shape, self.threads, self.smem_bytes(), items_per_block)
    }
}

/// The source of a candidate of `shape`: a header naming the schedule (`what`), the template's options (`defs`),
/// the program's buffers, extents and scale as the template's macros, then the template.
fn source(shape: &AttentionShape, what: &str, defs: &[(&str, Def)], template: &str) -> String {
    let p = &shape.program;
    let l = &shape.layout;
    let dim = |d: usize| format!("e{d}");
    let dims: Vec<String> = (0..p.dims.len())
        .map(|d| format!("long long {}", dim(d)))
        .collect();
    let batch = if l.batch.is_empty() {
        "1LL".to_string()
    } else {
        let parts: Vec<String> = l.batch.iter().map(|&d| dim(d)).collect();
        format!("({})", parts.join(" * "))
    };
    let (params, scale) = match l.scale {
        Scale::Param => (", float p0".to_string(), "p0".to_string()),
        Scale::Const(c) => (String::new(), format!("{:?}f", c as f32)),
        Scale::One => (String::new(), "1.0f".to_string()),
    };
    let mut source = format!(
        "// @generated by optiml-build {}: attention {}, {what}\n",
        env!("CARGO_PKG_VERSION"),
        p.canonical(),
    );
    for (name, value) in defs {
        source.push_str(&format!("#define {name} {value}\n"));
    }
    let [qi, ki, vi] = l.qkv;
    for (name, input) in [("Q", qi), ("K", ki), ("V", vi)] {
        source.push_str(&format!("#define OPTIML_{name} in{input}\n"));
    }
    source.push_str("#define OPTIML_Y out0\n");
    source.push_str(&format!("#define OPTIML_DIMS {}\n", dims.join(", ")));
    source.push_str(&format!("#define OPTIML_PARAMS {params}\n"));
    source.push_str(&format!("#define OPTIML_SCALE {scale}\n"));
    source.push_str(&format!("#define OPTIML_BATCH {batch}\n"));
    for (name, d) in [("LQ", l.lq), ("LK", l.lk), ("D", l.d), ("DV", l.dv)] {
        source.push_str(&format!("#define OPTIML_{name} {}\n", dim(d)));
    }
    source.push_str(template);
    source
}

/// The launch of every attention kernel of `shape` (see [`Schedule::launch`]): the items are every batch
/// position, query and value feature, `items_per_block` of them a block, one block per multiprocessor.
fn launch(
    shape: &AttentionShape,
    threads: u32,
    smem_bytes: u32,
    items_per_block: u32,
) -> ProgramLaunch {
    let l = &shape.layout;
    let items_mask = l
        .batch
        .iter()
        .chain([&l.lq, &l.dv])
        .fold(0u32, |m, &d| m | (1 << d));
    ProgramLaunch {
        threads,
        smem_bytes,
        items_mask,
        items_per_block,
        max_blocks_per_sm: 1,
        cluster: 1,
        nonempty_mask: 1 << l.lk,
        tree: None,
    }
}

impl Tunable for Schedule {
    /// `32 queries x 1024 features, 256-key chunks, 256 threads, stages 16/8, 4x8 scores and 8x16 outputs per
    /// thread`.
    fn describe(&self) -> String {
        if self.units == Units::Tf32x3 {
            return format!(
                "3xTF32 tensor cores: {} queries, {}-key chunks in {}-key score passes, {}-feature output tiles, \
                 {} threads, stages {}/{}",
                self.br, self.bc, self.sk, self.ec, self.threads, self.dk, self.ck,
            );
        }
        format!(
            "{} queries x {} features, {}-key chunks, {} threads, stages {}/{}, {}x{} scores and {}x{} outputs per \
             thread",
            self.br,
            self.ec,
            self.bc,
            self.threads,
            self.dk,
            self.ck,
            self.score_rows().unwrap_or(0),
            self.sc,
            self.output_rows().unwrap_or(0),
            self.oc,
        )
    }

    /// The template's constraints (both tiles split evenly over the threads, a softmax row's threads are a power
    /// of two within a warp, every stage splits evenly), the shared memory of one block, and registers: the
    /// output tile (32 to 128 floats) and the scores (8 to 32) a thread holds stay within about 160 floats and
    /// are enough to keep its loads from shared memory behind its multiply-adds, at most 8 output rows per thread
    /// (16 spill), and a thread issues at most 32 copies per stage. The tensor-core kernel has its own
    /// (`Schedule::mma_is_valid`).
    fn is_valid(&self) -> bool {
        if self.units == Units::Tf32x3 {
            return self.mma_is_valid();
        }
        let (Some(sr), Some(or)) = (self.score_rows(), self.output_rows()) else {
            return false;
        };
        let per_row = self.threads / self.br;
        THREADS.contains(&self.threads)
            && ROWS.contains(&self.br)
            && CHUNKS.contains(&self.bc)
            && FEATURES.contains(&self.ec)
            && SCORE_STAGES.contains(&self.dk)
            && VALUE_STAGES.contains(&self.ck)
            && SCORE_COLUMNS.contains(&self.sc)
            && OUTPUT_COLUMNS.contains(&self.oc)
            && per_row * self.br == self.threads
            && per_row.is_power_of_two()
            && per_row <= 32
            && (self.br * self.dk).is_multiple_of(self.threads)
            && (self.bc * self.dk).is_multiple_of(self.threads)
            && (self.ck * self.ec).is_multiple_of(self.threads)
            && self.bc.is_multiple_of(self.ck)
            && self.bc * self.dk / self.threads <= 32
            && self.ck * self.ec / self.threads <= 32
            && (8..=32).contains(&(sr * self.sc))
            && (32..=128).contains(&(or * self.oc))
            && or <= 8
            && self.sk == 0
            && self.smem_bytes() <= MAX_SMEM
    }

    /// From sm_90 on, the tensor-core kernel: 64 queries a block, chunks of 512 keys (KernelBench 97's whole
    /// sequence, so its output is never reread) scored 256 keys a pass, 256-feature output tiles, 184 KiB of
    /// shared memory. On sm_8x the same kernel in 68 KiB (chunks of 128 keys, scored at once): an sm_80 CUBIN
    /// also runs on sm_86 and sm_89, whose blocks get at most 99 KiB. Before sm_80, fp32 FMA: 32 queries by 1024 value features, chunks of 256 keys, so a head
    /// of 1024 features is one tile wide and its scores are computed once; each thread holds 8 × 16 outputs and
    /// 4 × 8 scores, a block 135 KiB of shared memory.
    fn default_for(arch: Arch) -> Self {
        if arch.major >= 8 {
            let (bc, sk) = if arch.major >= 9 {
                (512, 256)
            } else {
                (128, 128)
            };
            Schedule {
                units: Units::Tf32x3,
                threads: 256,
                br: 64,
                bc,
                ec: 256,
                dk: 16,
                ck: 16,
                sc: 0,
                oc: 0,
                sk,
            }
        } else {
            Schedule {
                units: Units::Fma,
                threads: 256,
                br: 32,
                bc: 256,
                ec: 1024,
                dk: 16,
                ck: 8,
                sc: 8,
                oc: 16,
                sk: 0,
            }
        }
    }

    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for threads in THREADS {
            for br in ROWS {
                for bc in CHUNKS {
                    for ec in FEATURES {
                        for dk in SCORE_STAGES {
                            for ck in VALUE_STAGES {
                                for sc in SCORE_COLUMNS {
                                    for oc in OUTPUT_COLUMNS {
                                        let s = Schedule {
                                            units: Units::Fma,
                                            threads,
                                            br,
                                            bc,
                                            ec,
                                            dk,
                                            ck,
                                            sc,
                                            oc,
                                            sk: 0,
                                        };
                                        if s.is_valid() {
                                            out.push(s);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        for br in MMA_ROWS {
            for bc in MMA_CHUNKS {
                for sk in MMA_PASSES {
                    for ec in MMA_FEATURES {
                        for dk in MMA_SCORE_STAGES {
                            for ck in MMA_VALUE_STAGES {
                                let s = Schedule {
                                    units: Units::Tf32x3,
                                    threads: 256,
                                    br,
                                    bc,
                                    ec,
                                    dk,
                                    ck,
                                    sc: 0,
                                    oc: 0,
                                    sk,
                                };
                                if s.is_valid() {
                                    out.push(s);
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    fn catalog() -> Vec<Transform<Self>> {
        vec![
            Transform {
                name: "tensor-cores",
                rationale: "the products on tensor cores in 3xTF32: three TF32 products per product, still several \
                            times the rate of fp32 FMA at fp32-level error (sm_80+)",
                addresses: Bottleneck::Compute,
                claimed_gain: 2.0,
                apply: |s| (s.units == Units::Fma).then(|| Schedule::default_for(Arch::new(8, 0))),
            },
            Transform {
                name: "fp32-fma",
                rationale: "the products in fp32 FMA: exact rounding per product, for a shape whose tiles leave \
                            the tensor cores idle",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.0,
                apply: |s| {
                    (s.units == Units::Tf32x3).then(|| Schedule::default_for(Arch::new(7, 0)))
                },
            },
            Transform {
                name: "longer-score-passes",
                rationale: "twice the keys per score pass: each query stage serves twice the keys (twice the \
                            score accumulators)",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.05,
                apply: |s| Some(Schedule { sk: s.sk * 2, ..*s }),
            },
            Transform {
                name: "shorter-score-passes",
                rationale: "half the keys per score pass: half the score accumulators and stage memory",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| Some(Schedule { sk: s.sk / 2, ..*s }),
            },
            Transform {
                name: "more-query-rows",
                rationale: "twice the queries per tile: each key and value loaded serves twice the rows, half the \
                            L2 traffic (each thread holds twice the outputs)",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.10,
                apply: |s| Some(Schedule { br: s.br * 2, ..*s }),
            },
            Transform {
                name: "fewer-query-rows",
                rationale: "half the queries per tile: half the output registers, twice the tiles for a small batch",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.03,
                apply: |s| Some(Schedule { br: s.br / 2, ..*s }),
            },
            Transform {
                name: "longer-key-chunks",
                rationale: "twice the keys per chunk: half the softmax rescales and barriers per key, more score \
                            columns per thread",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.05,
                apply: |s| Some(Schedule { bc: s.bc * 2, ..*s }),
            },
            Transform {
                name: "shorter-key-chunks",
                rationale: "half the keys per chunk: half the score memory, fewer absent keys at a short sequence",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| Some(Schedule { bc: s.bc / 2, ..*s }),
            },
            Transform {
                name: "narrower-feature-tile",
                rationale: "half the value features per tile: fits a narrow head without idle lanes (the scores are \
                            computed once per feature tile)",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.10,
                apply: |s| {
                    Some(Schedule {
                        ec: s.ec / 2,
                        // On tensor cores (no columns per thread) only the tile narrows.
                        oc: if s.oc == 0 { 0 } else { (s.oc / 2).max(8) },
                        ..*s
                    })
                },
            },
            Transform {
                name: "wider-feature-tile",
                rationale: "twice the value features per tile: the scores of a wide head are computed half as often",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.20,
                apply: |s| {
                    Some(Schedule {
                        ec: s.ec * 2,
                        oc: s.oc * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "deeper-score-stages",
                rationale: "twice the features per stage of the scores: half the barriers, longer runs of each row \
                            read from L2",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.04,
                apply: |s| Some(Schedule { dk: s.dk * 2, ..*s }),
            },
            Transform {
                name: "shallower-score-stages",
                rationale: "half the features per stage: less shared memory, so a wider tile fits",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.01,
                apply: |s| Some(Schedule { dk: s.dk / 2, ..*s }),
            },
            Transform {
                name: "deeper-value-stages",
                rationale: "twice the keys per stage of P v: half the barriers in the accumulation",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.04,
                apply: |s| Some(Schedule { ck: s.ck * 2, ..*s }),
            },
            Transform {
                name: "shallower-value-stages",
                rationale: "half the keys per stage of P v: half its shared memory",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.01,
                apply: |s| Some(Schedule { ck: s.ck / 2, ..*s }),
            },
            Transform {
                name: "wider-score-registers",
                rationale: "twice the score columns per thread (half the rows): more products per shared-memory read",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.05,
                apply: |s| Some(Schedule { sc: s.sc * 2, ..*s }),
            },
            Transform {
                name: "narrower-score-registers",
                rationale: "half the score columns per thread (twice the rows): fewer registers",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| Some(Schedule { sc: s.sc / 2, ..*s }),
            },
            Transform {
                name: "wider-output-registers",
                rationale: "twice the output columns per thread (half the rows): fewer weight reads per product",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.04,
                apply: |s| Some(Schedule { oc: s.oc * 2, ..*s }),
            },
            Transform {
                name: "narrower-output-registers",
                rationale: "half the output columns per thread (twice the rows): fewer value reads per product",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.04,
                apply: |s| Some(Schedule { oc: s.oc / 2, ..*s }),
            },
        ]
    }
}

impl Evaluable for Schedule {
    type Spec = AttentionShape;
    type Shape = Extents;

    fn candidate(&self, spec: &AttentionShape) -> Candidate {
        Schedule::candidate(self, spec)
    }

    fn problem(spec: &AttentionShape, shape: Extents) -> Problem {
        tensor::problem(&spec.program, &shape.get())
    }

    fn work(spec: &AttentionShape, shape: Extents) -> (f64, f64) {
        (
            flops(spec, &shape.get()),
            tensor::min_bytes(&spec.program, &shape.get()),
        )
    }
}

/// Multiplies and adds of both products: `2 · items · queries · keys · (d + dv)`.
pub fn flops(shape: &AttentionShape, extents: &[usize]) -> f64 {
    let l = &shape.layout;
    let items: f64 = l.batch.iter().map(|&b| extents[b] as f64).product();
    2.0 * items
        * extents[l.lq] as f64
        * extents[l.lk] as f64
        * (extents[l.d] + extents[l.dv]) as f64
}

/// Every dimension's extent when the user gives no shape: KernelBench 97's attention, 1024 heads (32 × 32 with
/// two batch axes) of 512 queries and keys with 1024 features; fixed dimensions keep their value.
pub fn default_extents(shape: &AttentionShape) -> Vec<usize> {
    let batch: &[usize] = if shape.layout.batch.len() >= 2 {
        &[32, 32]
    } else {
        &[1024]
    };
    shape.extents(batch, 512, 512, 1024, 1024)
}

/// The sizes every candidate is checked at against the float64 reference: one element; a few of everything;
/// ragged tiles both ways with several feature groups and key chunks; a head of two features, narrower than one
/// stage (no extent is zero: a zero-length buffer cannot be allocated, so no caller can pass one); a head wider
/// than one feature tile, so its scores are computed per tile. Small enough for the reference.
fn check_sizes(shape: &AttentionShape) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (batch, lq, lk, d, dv) in [
        ([1, 1], 1, 1, 1, 1),
        ([2, 1], 5, 7, 3, 5),
        ([3, 2], 33, 130, 17, 67),
        ([2, 1], 67, 300, 64, 64),
        // Every extent a multiple of 8: the staged form's tensor maps take the operands in place (elsewhere
        // they read padded copies).
        ([2, 1], 72, 136, 64, 80),
        ([1, 2], 9, 20, 2, 9),
        ([2, 2], 40, 257, 1030, 1030),
        // More batch items than a round of the staged form holds, and no multiple of one: its rounds' offsets
        // and a short last round.
        ([145, 1], 3, 8, 8, 8),
    ] {
        let e = shape.extents(&batch, lq, lk, d, dv);
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// The gate's plan: `check_sizes` at the tolerance of the program's dtype and precision (f32's exact one for an
/// exact spec, TF32's for `tf32`, the storage type's for 16 bits), over the distributions the tensor gate uses for
/// programs without logarithms.
pub fn test_plan(shape: &AttentionShape, extra: &[Dims]) -> crate::eval::TestPlan {
    let mut sizes = check_sizes(shape);
    for d in extra {
        if let Ok(e) = shape.program.extents(&d.0)
            && !sizes.contains(&e)
        {
            sizes.push(e);
        }
    }
    let p = &shape.program;
    let mut plan = crate::eval::TestPlan::new(sizes, Tolerance::for_dtype(p.dtype, p.precision));
    plan.distributions = vec![
        Distribution::Uniform,
        Distribution::Large,
        Distribution::NearConstant,
        Distribution::Normal,
        Distribution::HeavyTailed,
    ];
    plan
}

impl Family for Attention {
    fn name(&self) -> &'static str {
        FAMILY
    }

    fn claims(&self, spec: &Spec) -> bool {
        AttentionShape::of(spec).is_some()
    }

    fn sources(&self, _spec: &Spec) -> Vec<Cow<'static, str>> {
        SOURCES.iter().map(|s| Cow::Borrowed(*s)).collect()
    }

    /// A `tf32` spec before sm_80 gets the exact FMA kernel (correct at any precision the spec allows); a
    /// 16-bit spec there gets the 16-bit kernel, whose compile error says it needs sm_80.
    fn default_candidate(&self, spec: &Spec, arch: Arch) -> Candidate {
        let Some(shape) = AttentionShape::of(spec) else {
            return super::of(spec).default_candidate(spec, arch);
        };
        match Kind::of(&shape.program) {
            Kind::Exact => Schedule::default_for(arch).candidate(&shape),
            Kind::Tf32 if arch.major < 8 => Schedule::default_for(arch).candidate(&shape),
            Kind::Tf32 | Kind::Half(_) => fast::Schedule::default_for(arch).candidate(&shape),
        }
    }

    fn scheduled_candidate(
        &self,
        spec: &Spec,
        schedule: &serde_json::Value,
    ) -> Result<Candidate, serde_json::Error> {
        let Some(shape) = AttentionShape::of(spec) else {
            return super::of(spec).scheduled_candidate(spec, schedule);
        };
        match Kind::of(&shape.program) {
            Kind::Exact => Ok(read_schedule::<Schedule>(schedule)?.candidate(&shape)),
            // A tf32 spec's variant tuned before sm_80 is the exact kernel.
            Kind::Tf32 if is_schedule_of::<Schedule>(schedule) => {
                Ok(read_schedule::<Schedule>(schedule)?.candidate(&shape))
            }
            Kind::Tf32 | Kind::Half(_) => {
                Ok(read_schedule::<fast::Schedule>(schedule)?.candidate(&shape))
            }
        }
    }

    fn gate(&self) -> &'static dyn crate::eval::Gate {
        &tensor::gate::ProgramGate
    }

    fn catalogs(&self) -> Vec<Catalog> {
        vec![
            Catalog::of::<Schedule>(FAMILY, "fused fp32 attention"),
            Catalog::of::<fast::Schedule>(FAMILY, "fused attention on TF32 or 16-bit tensor cores"),
        ]
    }

    fn searched_catalog(&self, spec: &Spec) -> Catalog {
        let exact = AttentionShape::of(spec).is_none_or(|s| Kind::of(&s.program) == Kind::Exact);
        self.catalogs().swap_remove(usize::from(!exact))
    }

    fn catalog_of(&self, schedule: &serde_json::Value) -> Option<Catalog> {
        let at = if is_schedule_of::<Schedule>(schedule) {
            0
        } else if is_schedule_of::<fast::Schedule>(schedule) {
            1
        } else {
            return None;
        };
        Some(self.catalogs().swap_remove(at))
    }

    /// A shape is the run-time dimensions' extents in program order (`32x32x512x512x1024x1024` for the 4-D words
    /// form: b, h, i, j, d, dv); the default is [`default_extents`].
    fn targets(
        &self,
        spec: &Spec,
        settings: &KernelSettings,
        shapes: Option<&[Dims]>,
    ) -> Result<Vec<Target>, String> {
        let Some(shape) = AttentionShape::of(spec) else {
            return super::of(spec).targets(spec, settings, shapes);
        };
        let p = &shape.program;
        let given = shapes.unwrap_or(&settings.shapes);
        let all: Vec<Vec<usize>> = if given.is_empty() {
            vec![default_extents(&shape)]
        } else {
            given
                .iter()
                .map(|d| p.extents(&d.0))
                .collect::<Result<_, _>>()?
        };
        let launch = Schedule::default_for(Arch::new(9, 0)).launch(&shape);
        all.into_iter()
            .map(|extents| {
                let e = Extents::new(&extents).map_err(|e| e.to_string())?;
                Ok(Target {
                    bucket: Some(optiml_runtime::program::shape_key(&launch, &extents)),
                    dims: extents,
                    label: e.labelled(p),
                    rate: Rate::Flops,
                })
            })
            .collect()
    }

    fn tuned_for(&self, bucket: Option<[u64; 4]>, searched_at: Option<&str>) -> String {
        tensor::Tensor.tuned_for(bucket, searched_at)
    }

    fn tune(
        &self,
        request: &Request<'_>,
        report: &mut dyn FnMut(Progress),
    ) -> Result<Bucket, TuneError> {
        let kernel = request.kernel;
        let unsupported = || TuneError::Unsupported {
            kernel: kernel.name.clone(),
            family: FAMILY,
        };
        let shape = AttentionShape::of(&kernel.spec).ok_or_else(unsupported)?;
        let extents = Extents::new(&request.target.dims).map_err(|_| unsupported())?;
        let plan = test_plan(&shape, &request.settings.test_shapes);
        let kind = Kind::of(&shape.program);
        match kind {
            Kind::Half(_) | Kind::Tf32 if staged::applies(kind, request.arch) => {
                // The staged form joins as roots: no walk from the fused tiles reaches it.
                let roots: Vec<crate::experts::Root> = request
                    .roots
                    .iter()
                    .cloned()
                    .chain(staged::roots(request.arch).into_iter().map(|r| {
                        crate::experts::Root {
                            name: r.describe(),
                            // Plain data always serialises.
                            schedule: serde_json::to_value(r).unwrap_or_default(),
                            candidate: r.candidate(&shape),
                        }
                    }))
                    .collect();
                tune::search_with_roots::<fast::Schedule>(
                    request,
                    (shape, extents, plan),
                    &roots,
                    report,
                )
            }
            Kind::Tf32 | Kind::Half(_) if request.arch.major >= 8 => {
                tune::search::<fast::Schedule>(request, shape, extents, plan, report)
            }
            Kind::Half(_) => Err(TuneError::Unsupported {
                kernel: kernel.name.clone(),
                family: FAMILY,
            }),
            Kind::Exact | Kind::Tf32 => {
                tune::search::<Schedule>(request, shape, extents, plan, report)
            }
        }
    }
}

pub mod fast;
pub mod staged;

#[cfg(test)]
mod tests;
