//! How each family's variants are launched: the runtime's registry of launch kinds. A variant records one of
//! these (the cache stores it, the generated wrapper embeds it); the generic loader ([`crate::KernelModule`])
//! asks it only for its image architecture, shared memory, threads and companion entry points, and the
//! family's launcher reads the rest. A new family adds its variant at the end of [`Launch`] and its launcher
//! module beside [`crate::matmul`].

use crate::Arch;

/// The split-K reduction's entry point, in every module whose matmul variant splits K.
pub const REDUCE_ENTRY: &str = "optiml_splitk_reduce";

/// The companion slot ([`Companions`]) of [`REDUCE_ENTRY`].
pub const REDUCE_SLOT: usize = 0;
/// The companion slot of [`GEMV_ENTRY`].
pub const GEMV_SLOT: usize = 1;
/// The companion slot of [`SIMT16_ENTRY`].
pub const FALLBACK_SLOT: usize = 2;
/// The companion slot of [`TRANSPOSE_ENTRY`].
pub const TRANSPOSE_SLOT: usize = 3;

/// The entry point that copies A, stored `k × m` per batch item, into an `m × k` workspace, in a module whose
/// kernel reads A K-major ([`Launch::WgmmaStaged`]'s `transpose_a`):
/// `optiml_transpose_a(const float* A, float* At, int batch, int K, int M, long long strideA)`, At packed
/// (`m · k` per item), `TRANSPOSE_THREADS`-thread blocks, at least `⌈m / 32⌉` of them along x (blocks loop over
/// the k-tiles and items the grid's y and z do not cover).
pub const TRANSPOSE_ENTRY: &str = "optiml_transpose_a";

/// Threads per block of [`TRANSPOSE_ENTRY`]: 32 × 8, each moving four elements of a 32 × 32 tile.
pub const TRANSPOSE_THREADS: u32 = 256;

/// The matrix-vector entry point every generated matmul module also holds: a call with `n == 1` or `m == 1` is
/// memory-bound, and a bandwidth kernel reads the matrix once at full speed where a tiled one wastes its tile.
pub const GEMV_ENTRY: &str = "optiml_gemv";

/// The any-shape 16-bit kernel every 16-bit tensor-core module also holds: it takes the calls TMA cannot address
/// (misaligned buffers, rows that are not 16-byte multiples, an empty dimension) and the matrix-vector ones.
pub const SIMT16_ENTRY: &str = "optiml_matmul16_simt";

/// Threads per block of the 16-bit SIMT kernel (its template's fixed geometry: 64 × 64 tiles, 4 × 4 per thread).
pub const SIMT16_THREADS: u32 = 256;

/// The entry point of a [`Launch::Attention`] module that computes `S = scale · q kᵀ` (a `wgmma` template,
/// `optiml_matmul`'s ABI, `NT`, fp32 output).
pub const ATTN_SCORES_ENTRY: &str = "optiml_attn_scores";
/// The entry point of a [`Launch::Attention`] module that turns the scores into weights (of the storage type, fp32
/// for f32 storage): `optiml_attn_softmax(const float* S, W* P, long long rows, int keys, int pitch)`, a row of
/// `keys` scores per warp ([`ATTN_SOFTMAX_THREADS`] threads a block), the weights `pitch` elements apart.
pub const ATTN_SOFTMAX_ENTRY: &str = "optiml_attn_softmax";
/// The entry point of a [`Launch::Attention`] module that computes `y = P v` (a `wgmma` template, `NN`).
pub const ATTN_VALUES_ENTRY: &str = "optiml_attn_values";
/// The companion slot of [`ATTN_SCORES_ENTRY`].
pub const ATTN_SCORES_SLOT: usize = 0;
/// The companion slot of [`ATTN_SOFTMAX_ENTRY`].
pub const ATTN_SOFTMAX_SLOT: usize = 1;
/// The companion slot of [`ATTN_VALUES_ENTRY`].
pub const ATTN_VALUES_SLOT: usize = 2;
/// Threads per block of [`ATTN_SOFTMAX_ENTRY`]: 8 warps, a row each.
pub const ATTN_SOFTMAX_THREADS: u32 = 256;
/// The most keys [`ATTN_SOFTMAX_ENTRY`] holds in a warp's registers (32 a lane); longer rows go to the fused
/// kernel.
pub const ATTN_MAX_KEYS: usize = 1024;

/// How a variant is launched; written by `optiml-build` from the template's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Launch {
    /// A tiled matmul: one block of `threads` threads per `bm × bn` tile of `C`, batch on the grid's z axis.
    Matmul {
        /// Rows of `C` per block.
        bm: u32,
        /// Columns of `C` per block.
        bn: u32,
        /// Threads per block.
        threads: u32,
        /// Dynamic shared memory per block, in bytes.
        smem_bytes: u32,
        /// Split-K factor: above 1, the module also holds
        /// [`REDUCE_ENTRY`] and the product takes two launches through a
        /// workspace (the launcher may use fewer splits for a shape where these would not pay).
        split_k: u32,
    },
    /// Index 1 held the elementwise family's grid-stride map, which flat tensor programs replaced. The slot
    /// stays so that every later variant keeps its index in stored manifests; nothing builds it, and the
    /// launchers refuse it.
    Retired,
    // Variants are appended: cache manifests store this enum by variant index (bincode).
    /// A warp-specialised tensor-core matmul (`wgmma`, sm_90a only): a persistent grid of at most one block per
    /// multiprocessor walks the `tile_m × tile_n` tiles of every batch item; one producer warpgroup fills a ring
    /// of shared-memory stages, the others multiply.
    Wgmma {
        /// Rows of `C` per tile.
        tile_m: u32,
        /// Columns of `C` per tile.
        tile_n: u32,
        /// Threads per block (128 per warpgroup).
        threads: u32,
        /// Dynamic shared memory per block, in bytes.
        smem_bytes: u32,
        /// Rows per TMA box of the K-major operand Q (the `wgmma` N), when the producer loads through TMA
        /// tensor maps the launcher encodes; 0 when it loads with `cp.async` only.
        tma_rows: u32,
        /// With TMA: Q is A (`NN` and `NT`, computed as `Cᵀ = Bᵀ·Aᵀ`), else B (`TT`).
        tma_a_kmajor: bool,
        /// With TMA: the other operand P is K-major too (`NT`: B stored `n × k`) and is loaded as boxes of every
        /// other row; otherwise it is stored `k × rows` and loaded as 32 × 32 boxes.
        tma_p_kmajor: bool,
    },
    /// A matmul of 16-bit operands (bf16 or fp16, fp32 accumulation, C of the operands' type).
    Matmul16 {
        /// The element type of A, B and C.
        elem: Half,
        /// Which kernel the module's entry is.
        kernel: Kernel16,
    },
    /// A kernel generated from a tensor program (`optiml_spec::program`).
    Program(ProgramLaunch),
    /// A [`Launch::Wgmma`] kernel with launches around it. With `transpose_a`, the module's [`TRANSPOSE_ENTRY`]
    /// first copies A, stored `k × m`, into an `m × k` workspace that the kernel (compiled for A stored `m × k`)
    /// reads: TF32 `wgmma` takes both shared-memory operands K-major, and a copy at the bandwidth costs less
    /// than transposing in the kernel's producer. With `split_k > 1`, K may split across blocks for products
    /// with few output tiles and a long K: the kernel takes the split count after `beta`, each split writes
    /// its partial sums into a workspace, and the module's [`REDUCE_ENTRY`] adds them in a fixed order and
    /// applies the epilogue. The fields are [`Launch::Wgmma`]'s, then these two.
    WgmmaStaged {
        /// Rows of `C` per tile.
        tile_m: u32,
        /// Columns of `C` per tile.
        tile_n: u32,
        /// Threads per block (128 per warpgroup).
        threads: u32,
        /// Dynamic shared memory per block, in bytes.
        smem_bytes: u32,
        /// As [`Launch::Wgmma`]'s.
        tma_rows: u32,
        /// As [`Launch::Wgmma`]'s.
        tma_a_kmajor: bool,
        /// As [`Launch::Wgmma`]'s.
        tma_p_kmajor: bool,
        /// Splits of K the variant was tuned with; the launcher may use fewer (down to 1, the plain kernel)
        /// where the ranges would be too short or the workspace too large
        /// ([`crate::matmul::splits_for`]).
        split_k: u32,
        /// A is transposed into a workspace first ([`TRANSPOSE_ENTRY`]).
        transpose_a: bool,
    },
    /// Attention in three launches through memory (`sm_90a`): see [`StagedAttention`].
    Attention(StagedAttention),
}

/// Attention `y = softmax(scale · q kᵀ) v` as three launches per round of batch items, through a workspace: the
/// scores `S = scale · q kᵀ` in fp32 ([`ATTN_SCORES_ENTRY`], on the `wgmma` tensor cores: the 16-bit template for
/// bf16 and f16 storage, which reads its operands through tensor maps; the TF32 one for f32, which reads them in
/// place), the weights `P = softmax(S)` of the storage type ([`ATTN_SOFTMAX_ENTRY`]; fp32 weights overwrite the
/// scores), then `y = P v` ([`ATTN_VALUES_ENTRY`]). Where the score rows are short against the head (KernelBench 97: 512 keys, 1024
/// features), writing them out costs less than the fused kernel's `mma.sync` products. The module's entry point
/// is that fused kernel, with the tensor-program ABI and [`fused`](Self::fused)'s launch: it takes the calls the
/// stages cannot (more than [`ATTN_MAX_KEYS`] keys, operands the tensor maps cannot describe even copied, a
/// workspace past its bound).
///
/// `q`, `k`, `v` and `y` are row-major `[batch…, rows, features]`: every dimension but the four of
/// [`dims`](Self::dims) is a batch dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct StagedAttention {
    /// The fused kernel's launch.
    pub fused: ProgramLaunch,
    /// The scores' kernel's tiles, threads and shared memory (`trans_b`: k is stored keys × features); for f32
    /// storage, the TF32 template's.
    pub scores: Wgmma16,
    /// The values' kernel.
    pub values: Wgmma16,
    /// Batch items per round of the three launches (the workspace holds one round's scores and weights; small
    /// rounds keep them in L2).
    pub chunk: u32,
    /// The program's dimensions (indices in program order) of the queries, keys, features and value features.
    pub dims: [u32; 4],
    /// Which of the program's inputs are q, k and v.
    pub qkv: [u32; 3],
    /// The scale's `f32` bits, or `None`: the call's first run-time parameter.
    pub scale_bits: Option<u32>,
}

/// The launch of a generated tensor-program kernel. Its entry point takes the program's input buffers (in
/// program order), its output buffers (in statement order), every dimension's extent as an `i64` (fixed ones
/// too, in program order) and the run-time `f32` parameters (in program order); [`crate::program`] pushes
/// exactly that list.
///
/// The grid is computed from the dimensions: `items` is the product of the extents of the dimensions in
/// [`items_mask`](Self::items_mask); `blocks = ⌈items / items_per_block⌉`, at most `max_blocks_per_sm` per
/// multiprocessor when that is nonzero (the kernel then loops over items), times `cluster` (with a cluster and a
/// nonzero `max_blocks_per_sm`, at most as many clusters as the device holds at once). A [`tree`](Self::tree)
/// launch differs: see [`TreeLaunch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ProgramLaunch {
    /// Threads per block.
    pub threads: u32,
    /// Dynamic shared memory per block, in bytes.
    pub smem_bytes: u32,
    /// Bit `i` set: dimension `i`'s extent multiplies the number of work items.
    pub items_mask: u32,
    /// Work items one block (or one cluster) covers, at least 1.
    pub items_per_block: u32,
    /// Nonzero: the grid holds at most this many blocks per multiprocessor and the kernel loops over the items;
    /// with a cluster, the clusters resident at once (the driver's count).
    pub max_blocks_per_sm: u32,
    /// Blocks per thread-block cluster along x (1: no cluster); each work item is then a cluster's.
    pub cluster: u32,
    /// Bit `i` set: dimension `i` must not be empty (a max, min, mean or arg reduction over it has no value
    /// then; a row program's tail folds over it in a launch that needs a row), and a call with it empty is an
    /// error.
    pub nonempty_mask: u32,
    /// A reduction whose items are too few to fill the GPU (a sum to one value, batch statistics per channel):
    /// several launches of the same kernel through a workspace.
    pub tree: Option<TreeLaunch>,
}

/// A deterministic two-stage reduction tree: each item's reduced elements are cut into `slices` contiguous
/// ranges, one block each; launch `k < passes` writes every block's partials of reduction pass `k` to a workspace,
/// and every later launch first folds them per item in slice order (so a run repeats bit for bit), the last one
/// writing the outputs.
///
/// The entry point takes, after the [`ProgramLaunch`] arguments, the workspace (`float*`, `partials · items ·
/// slices` elements), the stage (`int`, `0..=passes`) and the slices per item (`long long`). The grid is
/// `⌈items / items_per_block⌉ · slices` blocks of [`threads`](ProgramLaunch::threads), where `slices = ⌊blocks /
/// items⌋` but at least 1 and at most one per `tile` reduced elements: a function of the shape and the schedule
/// only, never of the GPU. Items share a block only in launches with one slice per item (`blocks` 0: a row
/// program whose rows store per-row values in the workspace, folded by the last launch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TreeLaunch {
    /// Blocks per launch over all items, before the limits above.
    pub blocks: u32,
    /// Reduced elements per block at least (what one block's loop step covers).
    pub tile: u32,
    /// Reduction passes: the launches before the writing one.
    pub passes: u32,
    /// Partial values per item and slice in the workspace (one per reduction).
    pub partials: u32,
}

/// The kernel a 16-bit matmul module's entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Kernel16 {
    /// The sm_90a `wgmma` kernel; the module also holds the SIMT kernel for the calls it does not take.
    Wgmma(Wgmma16),
    /// The any-shape SIMT kernel (GPUs older than sm_80).
    Simt,
    /// The any-shape `mma.sync` kernel (sm_80 and newer without `wgmma`): one block of `threads` per `bm × bn`
    /// tile of `C`, batch on the grid's z axis.
    Mma {
        /// Rows of `C` per block.
        bm: u32,
        /// Columns of `C` per block.
        bn: u32,
        /// Threads per block.
        threads: u32,
        /// Dynamic shared memory per block, in bytes.
        smem_bytes: u32,
    },
}

/// The 16-bit element types of tensor-core matmuls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Half {
    /// bfloat16 (`half::bf16`).
    Bf16,
    /// IEEE half precision (`half::f16`).
    F16,
}

/// The launch geometry of the 16-bit `wgmma` kernel: a persistent grid of at most one block per multiprocessor,
/// A and B read only through TMA tensor maps the launcher encodes per call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Wgmma16 {
    /// Rows of `C` per tile (64 per consumer warpgroup).
    pub tile_m: u32,
    /// Columns of `C` per tile (the `wgmma` N).
    pub tile_n: u32,
    /// Threads per block (128 per warpgroup).
    pub threads: u32,
    /// Dynamic shared memory per block, in bytes.
    pub smem_bytes: u32,
    /// A is stored `k × m` (its map's boxes are 64 × 64).
    pub trans_a: bool,
    /// B is stored `n × k` (its map's boxes are `tile_n` rows of 64).
    pub trans_b: bool,
}

/// The entry points a module holds beside its kernel, each in the slot its family's launcher reads it from
/// ([`crate::LoadedVariant::companions`], [`crate::Target::companions`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Companions(pub [Option<Companion>; COMPANION_SLOTS]);

/// One companion entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Companion {
    /// Its `extern "C"` name.
    pub entry: &'static str,
    /// A module without it cannot run this launch (else it is optional: modules built before it existed lack
    /// it, and the launcher does without).
    pub required: bool,
    /// The dynamic shared memory its launches take: above 48 KiB the loader raises its limit to this, as it
    /// does the entry point's ([`Launch::smem_bytes`]).
    pub smem_bytes: u32,
}

/// Slots for companion entry points per module.
pub const COMPANION_SLOTS: usize = 4;

impl Companions {
    /// `entry` in `slot`.
    fn with(self, slot: usize, entry: &'static str, required: bool) -> Self {
        self.with_smem(slot, entry, required, 0)
    }

    /// `entry` in `slot`, launched with `smem_bytes` of dynamic shared memory.
    fn with_smem(
        mut self,
        slot: usize,
        entry: &'static str,
        required: bool,
        smem_bytes: u32,
    ) -> Self {
        self.0[slot] = Some(Companion {
            entry,
            required,
            smem_bytes,
        });
        self
    }

    /// The entry point in `slot`, if any.
    pub fn get(&self, slot: usize) -> Option<Companion> {
        self.0.get(slot).copied().flatten()
    }
}

impl Launch {
    /// The architecture a variant for `arch` is compiled for: `wgmma` and `setmaxnreg` exist only in the
    /// architecture-specific target (`sm_90a`), whose code runs on that exact chip only.
    pub fn image_arch(&self, arch: Arch) -> Arch {
        match self {
            Launch::Wgmma { .. }
            | Launch::WgmmaStaged { .. }
            | Launch::Attention(_)
            | Launch::Matmul16 {
                kernel: Kernel16::Wgmma(_),
                ..
            } => Arch::specific(arch.major, arch.minor),
            Launch::Matmul { .. }
            | Launch::Retired
            | Launch::Matmul16 { .. }
            | Launch::Program(_) => arch,
        }
    }

    /// Dynamic shared memory per block, in bytes.
    pub fn smem_bytes(&self) -> u32 {
        match *self {
            Launch::Matmul { smem_bytes, .. }
            | Launch::Wgmma { smem_bytes, .. }
            | Launch::WgmmaStaged { smem_bytes, .. } => smem_bytes,
            Launch::Matmul16 {
                kernel: Kernel16::Wgmma(w),
                ..
            } => w.smem_bytes,
            Launch::Matmul16 {
                kernel: Kernel16::Mma { smem_bytes, .. },
                ..
            } => smem_bytes,
            Launch::Program(p) | Launch::Attention(StagedAttention { fused: p, .. }) => {
                p.smem_bytes
            }
            Launch::Retired
            | Launch::Matmul16 {
                kernel: Kernel16::Simt,
                ..
            } => 0,
        }
    }

    /// Threads per block of the module's entry point.
    pub fn threads(&self) -> u32 {
        match *self {
            Launch::Matmul { threads, .. }
            | Launch::Wgmma { threads, .. }
            | Launch::WgmmaStaged { threads, .. } => threads,
            Launch::Retired => 0,
            Launch::Matmul16 {
                kernel: Kernel16::Wgmma(w),
                ..
            } => w.threads,
            Launch::Matmul16 {
                kernel: Kernel16::Mma { threads, .. },
                ..
            } => threads,
            Launch::Matmul16 {
                kernel: Kernel16::Simt,
                ..
            } => SIMT16_THREADS,
            Launch::Program(p) | Launch::Attention(StagedAttention { fused: p, .. }) => p.threads,
        }
    }

    /// The Rust expression that builds this value through the `optiml` facade (`::optiml::runtime::…`): what
    /// the generated wrapper embeds for each variant.
    pub fn rust_expr(&self) -> String {
        match *self {
            Launch::Matmul {
                bm,
                bn,
                threads,
                smem_bytes,
                split_k,
            } => format!(
                "::optiml::runtime::Launch::Matmul {{ bm: {bm}, bn: {bn}, threads: {threads}, smem_bytes: {smem_bytes}, \
                 split_k: {split_k} }}"
            ),
            Launch::Wgmma {
                tile_m,
                tile_n,
                threads,
                smem_bytes,
                tma_rows,
                tma_a_kmajor,
                tma_p_kmajor,
            } => format!(
                "::optiml::runtime::Launch::Wgmma {{ tile_m: {tile_m}, tile_n: {tile_n}, threads: {threads}, \
                 smem_bytes: {smem_bytes}, tma_rows: {tma_rows}, tma_a_kmajor: {tma_a_kmajor}, \
                 tma_p_kmajor: {tma_p_kmajor} }}"
            ),
            Launch::WgmmaStaged {
                tile_m,
                tile_n,
                threads,
                smem_bytes,
                tma_rows,
                tma_a_kmajor,
                tma_p_kmajor,
                split_k,
                transpose_a,
            } => format!(
                "::optiml::runtime::Launch::WgmmaStaged {{ tile_m: {tile_m}, tile_n: {tile_n}, threads: {threads}, \
                 smem_bytes: {smem_bytes}, tma_rows: {tma_rows}, tma_a_kmajor: {tma_a_kmajor}, \
                 tma_p_kmajor: {tma_p_kmajor}, split_k: {split_k}, transpose_a: {transpose_a} }}"
            ),
            Launch::Matmul16 { elem, kernel } => {
                let kernel = match kernel {
                    Kernel16::Simt => "::optiml::runtime::Kernel16::Simt".to_string(),
                    Kernel16::Mma {
                        bm,
                        bn,
                        threads,
                        smem_bytes,
                    } => format!(
                        "::optiml::runtime::Kernel16::Mma {{ bm: {bm}, bn: {bn}, threads: {threads}, \
                         smem_bytes: {smem_bytes} }}"
                    ),
                    Kernel16::Wgmma(w) => {
                        format!("::optiml::runtime::Kernel16::Wgmma({})", wgmma16_expr(&w))
                    }
                };
                format!(
                    "::optiml::runtime::Launch::Matmul16 {{ elem: ::optiml::runtime::Half::{elem:?}, kernel: {kernel} }}"
                )
            }
            Launch::Retired => "::optiml::runtime::Launch::Retired".to_string(),
            Launch::Program(p) => {
                format!("::optiml::runtime::Launch::Program({})", program_expr(&p))
            }
            Launch::Attention(StagedAttention {
                fused,
                scores,
                values,
                chunk,
                dims,
                qkv,
                scale_bits,
            }) => format!(
                "::optiml::runtime::Launch::Attention(::optiml::runtime::StagedAttention {{ fused: {}, \
                 scores: {}, values: {}, chunk: {chunk}, dims: {dims:?}, qkv: {qkv:?}, scale_bits: \
                 ::core::option::Option::{} }})",
                program_expr(&fused),
                wgmma16_expr(&scores),
                wgmma16_expr(&values),
                scale_bits.map_or("None".to_string(), |b| format!("Some({b})")),
            ),
        }
    }

    /// The companion entry points a module of this launch holds beside its kernel.
    pub fn companions(&self) -> Companions {
        let none = Companions::default();
        match *self {
            Launch::Matmul { split_k, .. } => {
                let with_gemv = none.with(GEMV_SLOT, GEMV_ENTRY, false);
                if split_k > 1 {
                    with_gemv.with(REDUCE_SLOT, REDUCE_ENTRY, true)
                } else {
                    with_gemv
                }
            }
            Launch::Wgmma { .. } => none.with(GEMV_SLOT, GEMV_ENTRY, false),
            Launch::WgmmaStaged {
                split_k,
                transpose_a,
                ..
            } => {
                let mut with = none.with(GEMV_SLOT, GEMV_ENTRY, false);
                if split_k > 1 {
                    with = with.with(REDUCE_SLOT, REDUCE_ENTRY, true);
                }
                if transpose_a {
                    with = with.with(TRANSPOSE_SLOT, TRANSPOSE_ENTRY, true);
                }
                with
            }
            Launch::Matmul16 { kernel, .. } => {
                let with_gemv = none.with(GEMV_SLOT, GEMV_ENTRY, false);
                if matches!(kernel, Kernel16::Wgmma(_)) {
                    with_gemv.with(FALLBACK_SLOT, SIMT16_ENTRY, true)
                } else {
                    with_gemv
                }
            }
            Launch::Attention(s) => none
                .with_smem(
                    ATTN_SCORES_SLOT,
                    ATTN_SCORES_ENTRY,
                    true,
                    s.scores.smem_bytes,
                )
                .with(ATTN_SOFTMAX_SLOT, ATTN_SOFTMAX_ENTRY, true)
                .with_smem(
                    ATTN_VALUES_SLOT,
                    ATTN_VALUES_ENTRY,
                    true,
                    s.values.smem_bytes,
                ),
            Launch::Retired | Launch::Program(_) => none,
        }
    }
}

/// The Rust expression of a [`Wgmma16`] through the facade.
fn wgmma16_expr(w: &Wgmma16) -> String {
    let Wgmma16 {
        tile_m,
        tile_n,
        threads,
        smem_bytes,
        trans_a,
        trans_b,
    } = *w;
    format!(
        "::optiml::runtime::Wgmma16 {{ tile_m: {tile_m}, tile_n: {tile_n}, threads: {threads}, \
         smem_bytes: {smem_bytes}, trans_a: {trans_a}, trans_b: {trans_b} }}"
    )
}

/// The Rust expression of a [`ProgramLaunch`] through the facade.
fn program_expr(p: &ProgramLaunch) -> String {
    let ProgramLaunch {
        threads,
        smem_bytes,
        items_mask,
        items_per_block,
        max_blocks_per_sm,
        cluster,
        nonempty_mask,
        tree,
    } = *p;
    let tree = match tree {
        None => "::core::option::Option::None".to_string(),
        Some(TreeLaunch {
            blocks,
            tile,
            passes,
            partials,
        }) => format!(
            "::core::option::Option::Some(::optiml::runtime::TreeLaunch {{ blocks: {blocks}, \
             tile: {tile}, passes: {passes}, partials: {partials} }})"
        ),
    };
    format!(
        "::optiml::runtime::ProgramLaunch {{ threads: {threads}, smem_bytes: {smem_bytes}, items_mask: \
         {items_mask}, items_per_block: {items_per_block}, max_blocks_per_sm: {max_blocks_per_sm}, cluster: \
         {cluster}, nonempty_mask: {nonempty_mask}, tree: {tree} }}"
    )
}
