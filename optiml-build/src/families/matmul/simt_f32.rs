//! The fp32 SIMT matmul template and its schedule: block tiling, a per-thread register tile, double-buffered
//! shared memory, 128-bit loads where alignment allows, predicated edges so every M, N, K is correct, and split-K
//! with a deterministic second pass for problems with few output tiles and a long reduction.

use super::{Candidate, defines};
use optiml_runtime::{Arch, Launch};
use optiml_spec::{Activation, MatmulSpec};

/// The CUDA template; specialised only by macros.
pub const TEMPLATE: &str = include_str!("templates/matmul_f32.cu");

/// The matrix-vector kernel compiled into every matmul module beside the tiled one (same ABI and flags), which
/// the launcher uses for `n == 1` or `m == 1`: on the H200 it reads the matrix at 0.96–1.0× of what a read-only
/// kernel reaches, where the tiled kernel wastes all but one column of each tile.
pub const GEMV_TEMPLATE: &str = include_str!("templates/gemv_f32.cu");

/// Values of [`Schedule::warp_n`]: a warp of 8×4, 4×8 or 2×16 lanes (rows × columns of the thread grid).
pub const WARP_N: [u32; 3] = [4, 8, 16];
/// Values of [`Schedule::group_m`]: row-major launch order, or groups of 4, 8 or 16 tile rows.
pub const GROUP_M: [u32; 4] = [1, 4, 8, 16];
/// Values of [`Schedule::async_mode`] (the template's `OPTIML_ASYNC_MODE`).
pub const ASYNC_MODE: [u32; 3] = [0, 1, 2];
/// Values of [`Schedule::min_blocks`]: 0 is the template's choice (see [`Schedule::auto_min_blocks`]), 1 lifts the
/// register cap to 255. (2 either equals the template's choice or spills at 64 registers for every tile shape.)
pub const MIN_BLOCKS: [u32; 2] = [0, 1];
/// Values of [`Schedule::split_k`]. Measured on the H200 against cuBLAS (`bench/results/2026-11-30-h200-splitk.md`):
/// 256×256×65536 is best at 32 (0.03× → 0.81×), 512×512×16384 at 16, 1000³ at 4, 4096³ at 2. 64: at
/// 256²×32768 with 128×128 tiles the time still halved from 16 to 32 splits (4 tiles × 32 = 128 blocks on 132
/// SMs), so a longer K wants more.
pub const SPLIT_K: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];
/// The name of the split-K reduction kernel in every module whose schedule splits K.
pub const REDUCE_ENTRY: &str = optiml_runtime::matmul::REDUCE_ENTRY;

fn one() -> u32 {
    1
}

/// Tile sizes and code-generation knobs: what the search transforms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Schedule {
    /// Rows of C per block.
    pub bm: u32,
    /// Columns of C per block.
    pub bn: u32,
    /// K-slice per shared-memory stage.
    pub bk: u32,
    /// Rows of C per thread.
    pub tm: u32,
    /// Columns of C per thread.
    pub tn: u32,
    /// Lanes of a warp along N (the rest, `32 / warp_n`, along M). Sets how many distinct A and B fragment bytes a
    /// warp reads from shared memory per k step and how wide each row segment of its C stores is.
    pub warp_n: u32,
    /// Block rasterization: 1 computes tiles in launch order; G > 1 walks G tile rows column by column, so the
    /// blocks resident together share A rows and B columns in L2.
    pub group_m: u32,
    /// Operand loads: 0 stages everything through registers, 1 uses `cp.async` for M/N-contiguous operands,
    /// 2 uses `cp.async` for everything (no staging registers).
    pub async_mode: u32,
    /// `__launch_bounds__` minimum blocks per SM, which caps registers per thread; 0 leaves it to the template.
    pub min_blocks: u32,
    /// Split-K factor S: S > 1 splits the reduction into S balanced ranges of whole k-tiles computed by separate
    /// blocks into a workspace, summed in a fixed order by a second kernel that applies the epilogue (no atomics,
    /// so results are bitwise reproducible). The launcher lowers S where the workspace would be too large or the
    /// ranges too short. (Logs written before split-K have no such field: 1.)
    #[serde(default = "one")]
    pub split_k: u32,
}

impl Schedule {
    /// The default: 128×128 block tile, 8×8 per thread, 256 threads, 4×8-lane warps, launch-order rasterization,
    /// `cp.async` for M/N-contiguous operands, the template's register cap. On an H200 it runs at the numbers in
    /// `bench/results/`; the search starts here.
    pub fn default_for(_arch: Arch) -> Self {
        Schedule {
            bm: 128,
            bn: 128,
            bk: 8,
            tm: 8,
            tn: 8,
            warp_n: 8,
            group_m: 1,
            async_mode: 1,
            min_blocks: 0,
            split_k: 1,
        }
    }

    /// Threads per block.
    pub fn threads(&self) -> u32 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }

    /// The minimum blocks per SM the template picks when `min_blocks` is 0 (mirrors its `OPTIML_MIN_BLOCKS`
    /// default on sm_80+, where `cp.async` exists).
    pub fn auto_min_blocks(&self) -> u32 {
        let threads = self.threads();
        if threads >= 512 {
            1
        } else if self.tm * self.tn >= 64 && (threads < 256 || self.bk > 8 || self.async_mode == 0)
        {
            (65536 / (threads * 168)).max(1)
        } else {
            512 / threads
        }
    }

    /// Whether the template supports this combination (and it compiles without spills for sm_90).
    pub fn is_valid(&self) -> bool {
        let tiles = [64, 128].contains(&self.bm)
            && [64, 128].contains(&self.bn)
            && [8, 16].contains(&self.bk)
            && [4, 8].contains(&self.tm)
            && [4, 8].contains(&self.tn)
            && self.threads() >= 64
            && self.threads() <= 1024;
        if !tiles {
            return false;
        }
        let (tx, ty) = (self.bn / self.tn, self.bm / self.tm);
        let warp =
            WARP_N.contains(&self.warp_n) && tx % self.warp_n == 0 && ty % (32 / self.warp_n) == 0;
        // An explicit minimum whose register cap equals the template's choice or a smaller explicit value's (the
        // cap never exceeds 255) is the same kernel under another name.
        let cap = |blocks: u32| (65536 / (self.threads() * blocks)).min(255);
        let min_blocks = self.min_blocks == 0
            || (MIN_BLOCKS.contains(&self.min_blocks)
                && cap(self.min_blocks) != cap(self.auto_min_blocks())
                && (1..self.min_blocks).all(|b| cap(b) != cap(self.min_blocks)));
        // Measured with NVRTC 13.0 for sm_90 (every other schedule compiles without spills with the plain flags):
        // 1024 threads leave 64 registers per thread, where only BK = 8 with cp.async and no rasterization
        // arithmetic fits with every load path and epilogue.
        let fits =
            self.threads() < 1024 || (self.bk == 8 && self.group_m == 1 && self.async_mode != 0);
        fits && warp
            && SPLIT_K.contains(&self.split_k)
            && GROUP_M.contains(&self.group_m)
            && ASYNC_MODE.contains(&self.async_mode)
            && min_blocks
    }

    /// The candidate computing `spec` with this schedule.
    pub fn candidate(&self, spec: &MatmulSpec) -> Candidate {
        let mut macros: Vec<(&str, i64)> = vec![
            ("OPTIML_BM", self.bm.into()),
            ("OPTIML_BN", self.bn.into()),
            ("OPTIML_BK", self.bk.into()),
            ("OPTIML_TM", self.tm.into()),
            ("OPTIML_TN", self.tn.into()),
            ("OPTIML_THREADS", self.threads().into()),
            ("OPTIML_WARP_N", self.warp_n.into()),
            ("OPTIML_GROUP_M", self.group_m.into()),
            ("OPTIML_ASYNC_MODE", self.async_mode.into()),
        ];
        if self.min_blocks != 0 {
            macros.push(("OPTIML_MIN_BLOCKS", self.min_blocks.into()));
        }
        macros.extend(spec_macros(spec));
        if self.split_k > 1 {
            macros.push(("OPTIML_SPLIT_K", 1));
        }
        macros.extend(gemv_macros());
        let source = format!(
            "// @generated by optiml-build {}: matmul f32, {}\n{}\n{TEMPLATE}\n{GEMV_TEMPLATE}",
            env!("CARGO_PKG_VERSION"),
            self.describe(),
            defines(&macros),
        );
        Candidate {
            source,
            entry: "optiml_matmul",
            launch: Launch::Matmul {
                bm: self.bm,
                bn: self.bn,
                threads: self.threads(),
                smem_bytes: 0,
                split_k: self.split_k,
            },
            schedule: self.describe(),
        }
    }

    /// `block 128x128x8, thread 8x8, 256 threads, warp 4x8, group 1, async 1, min blocks auto`, then
    /// `, split k S` when K is split.
    pub fn describe(&self) -> String {
        let min_blocks = match self.min_blocks {
            0 => "auto".to_string(),
            n => n.to_string(),
        };
        format!(
            "block {}x{}x{}, thread {}x{}, {} threads, warp {}x{}, group {}, async {}, min blocks {min_blocks}",
            self.bm,
            self.bn,
            self.bk,
            self.tm,
            self.tn,
            self.threads(),
            32 / self.warp_n.max(1),
            self.warp_n,
            self.group_m,
            self.async_mode,
        ) + &if self.split_k > 1 {
            format!(", split k {}", self.split_k)
        } else {
            String::new()
        }
    }

    /// Every schedule the template supports (what tests compile and the search can reach): 1638 tilings, each
    /// with every split factor.
    pub fn all() -> Vec<Schedule> {
        let mut out = Vec::new();
        for bm in [64, 128] {
            for bn in [64, 128] {
                for bk in [8, 16] {
                    for tm in [4, 8] {
                        for tn in [4, 8] {
                            for warp_n in WARP_N {
                                for group_m in GROUP_M {
                                    for async_mode in ASYNC_MODE {
                                        for (min_blocks, split_k) in MIN_BLOCKS
                                            .into_iter()
                                            .flat_map(|b| SPLIT_K.map(|s| (b, s)))
                                        {
                                            let s = Schedule {
                                                bm,
                                                bn,
                                                bk,
                                                tm,
                                                tn,
                                                warp_n,
                                                group_m,
                                                async_mode,
                                                min_blocks,
                                                split_k,
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
        }
        out
    }
}

/// The layout and epilogue macros every matmul template takes (the ABI of `optiml_matmul` and `optiml_gemv`).
pub(crate) fn spec_macros(spec: &MatmulSpec) -> [(&'static str, i64); 6] {
    let act = match spec.activation {
        None => 0,
        Some(Activation::Relu) => 1,
        Some(Activation::Gelu) => 2,
        Some(Activation::Silu) => 3,
    };
    [
        ("OPTIML_TRANS_A", spec.trans_a.into()),
        ("OPTIML_TRANS_B", spec.trans_b.into()),
        ("OPTIML_HAS_ALPHA", spec.alpha.into()),
        ("OPTIML_HAS_BETA", spec.beta.into()),
        ("OPTIML_HAS_BIAS", spec.bias.into()),
        ("OPTIML_ACT", act),
    ]
}

/// The matrix-vector kernel's launch shape, which the runtime's launcher assumes.
pub(crate) fn gemv_macros() -> [(&'static str, i64); 2] {
    [
        (
            "OPTIML_GEMV_THREADS",
            optiml_runtime::matmul::GEMV_THREADS.into(),
        ),
        (
            "OPTIML_GEMV_COL_TX",
            optiml_runtime::matmul::GEMV_COL_TX.into(),
        ),
    ]
}

impl crate::search::Tunable for Schedule {
    fn describe(&self) -> String {
        Schedule::describe(self)
    }

    fn is_valid(&self) -> bool {
        Schedule::is_valid(self)
    }
}
