//! The fp32 SIMT matmul template and its schedule: block tiling, a per-thread register tile, double-buffered
//! shared memory, 128-bit loads where alignment allows, predicated edges so every M, N, K is correct, and split-K
//! with a deterministic second pass for problems with few output tiles and a long reduction.

use super::MatmulShape;
use crate::eval::{Evaluable, Problem};
use crate::experts::{Candidate, Def, defines};
use crate::search::{Bottleneck, Transform, Tunable};
use optiml_runtime::{Arch, Launch};
use optiml_spec::{DType, MatmulSpec, Triangle};

/// The CUDA template; specialised only by macros.
pub const TEMPLATE: &str = include_str!("cuda/matmul_f32.cu");

/// The matrix-vector kernel compiled into every matmul module beside the tiled one (same ABI and flags), which
/// the launcher uses for `n == 1` or `m == 1`: on the H200 it reads the matrix at 0.96–1.0× of what a read-only
/// kernel reaches, where the tiled kernel wastes all but one column of each tile.
pub const GEMV_TEMPLATE: &str = include_str!("cuda/gemv_f32.cu");

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

/// The template's `OPTIML_TRIANGLE` for a triangle.
fn triangle_code(t: Triangle) -> u32 {
    match t {
        Triangle::Upper => 1,
        Triangle::Lower => 2,
    }
}

fn one() -> u32 {
    1
}

/// Tile sizes and code-generation knobs: what the search transforms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// A recorded schedule reads as this kernel's only if it has no other kernel's fields: that is how a search log
// names the catalog it walked (`crate::families::catalog_of`).
#[serde(deny_unknown_fields)]
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

    /// The candidate computing `spec` with this schedule.
    pub fn candidate(&self, spec: &MatmulSpec) -> Candidate {
        let mut macros: Vec<(&str, Def)> = vec![
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
        macros.extend(super::spec_macros(spec));
        if self.split_k > 1 {
            macros.push(("OPTIML_SPLIT_K", Def::Int(1)));
        }
        // A triangular product's module holds no matrix-vector kernel, which knows no triangles: the launcher
        // finds none and runs the tiled kernel for every shape.
        let gemv = match spec.triangle {
            None => {
                macros.extend(super::gemv_macros());
                GEMV_TEMPLATE
            }
            Some(t) => {
                macros.push(("OPTIML_TRIANGLE", triangle_code(t).into()));
                ""
            }
        };
        let source = format!(
            "// @generated by optiml-build {}: matmul f32, {}\n{}\n{TEMPLATE}\n{gemv}",
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
}

impl Tunable for Schedule {
    /// `block 128x128x8, thread 8x8, 256 threads, warp 4x8, group 1, async 1, min blocks auto`, then
    /// `, split k S` when K is split.
    fn describe(&self) -> String {
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

    /// Whether the template supports this combination (and it compiles without spills for sm_90).
    fn is_valid(&self) -> bool {
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

    /// The default: 128×128 block tile, 8×8 per thread, 256 threads, 4×8-lane warps, launch-order rasterization,
    /// `cp.async` for M/N-contiguous operands, the template's register cap. On an H200 it runs at the numbers in
    /// `bench/results/`; the search starts here.
    fn default_for(_arch: Arch) -> Self {
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

    /// Every schedule the template supports (what tests compile and the search can reach): 1638 tilings, each
    /// with every split factor.
    fn space() -> Vec<Self> {
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

    /// The SIMT kernel's transformations over its schedule space.
    fn catalog() -> Vec<Transform<Self>> {
        vec![
            Transform {
                name: "grow-block-n",
                rationale: "a wider block tile reuses each loaded row of A across more columns: fewer DRAM/L2 bytes per FLOP",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.10,
                apply: |s| retile(Schedule { bn: s.bn * 2, ..*s }),
            },
            Transform {
                name: "grow-block-m",
                rationale: "a taller block tile reuses each loaded column of B across more rows",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.10,
                apply: |s| retile(Schedule { bm: s.bm * 2, ..*s }),
            },
            Transform {
                name: "deepen-k-tile",
                rationale: "a deeper k-slice per stage halves the barriers per FLOP and keeps more loads in flight",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.05,
                apply: |s| retile(Schedule { bk: s.bk * 2, ..*s }),
            },
            Transform {
                name: "grow-thread-tile",
                rationale: "a larger register tile does more FMAs per shared-memory load (higher arithmetic intensity per thread)",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.15,
                apply: |s| {
                    if s.tm <= s.tn {
                        retile(Schedule { tm: s.tm * 2, ..*s })
                    } else {
                        retile(Schedule { tn: s.tn * 2, ..*s })
                    }
                },
            },
            Transform {
                name: "shallow-k-tile",
                rationale: "a shallower k-slice frees registers and shared memory for more resident warps",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.03,
                apply: |s| retile(Schedule { bk: s.bk / 2, ..*s }),
            },
            Transform {
                name: "shrink-block-n",
                rationale: "a narrower block tile makes more blocks: fills the SMs on small or skinny problems",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.05,
                apply: |s| retile(Schedule { bn: s.bn / 2, ..*s }),
            },
            Transform {
                name: "shrink-block-m",
                rationale: "a shorter block tile makes more blocks",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.05,
                apply: |s| retile(Schedule { bm: s.bm / 2, ..*s }),
            },
            Transform {
                name: "shrink-thread-tile",
                rationale: "a smaller register tile lowers register pressure: more resident warps to hide latency",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.05,
                apply: |s| {
                    if s.tm >= s.tn {
                        retile(Schedule { tm: s.tm / 2, ..*s })
                    } else {
                        retile(Schedule { tn: s.tn / 2, ..*s })
                    }
                },
            },
            Transform {
                name: "widen-warp",
                rationale: "a 2x16-lane warp reads half the A fragment bytes per k step and stores 256-byte C rows; \
                            helps when A's fragment reads or narrow stores limit issue",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.03,
                apply: |s| {
                    Some(Schedule {
                        warp_n: s.warp_n * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "narrow-warp",
                rationale: "an 8x4-lane warp reads half the B fragment bytes per k step (fewer shared-memory wavefronts \
                            when TN-wide B reads dominate)",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.03,
                apply: |s| {
                    Some(Schedule {
                        warp_n: s.warp_n / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "group-tile-rows",
                rationale: "rasterizing blocks in groups of more tile rows makes co-resident blocks share A rows and B \
                            columns in L2: fewer DRAM bytes once the operands outgrow the 60 MiB L2",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.08,
                apply: |s| {
                    let next = GROUP_M.iter().find(|&&g| g > s.group_m)?;
                    Some(Schedule {
                        group_m: *next,
                        ..*s
                    })
                },
            },
            Transform {
                name: "ungroup-tile-rows",
                rationale: "fewer tile rows per raster group (down to launch order): less index arithmetic, and wide \
                            groups only pay when a wave's A and B slices would not fit in L2 otherwise",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.01,
                apply: |s| {
                    let prev = GROUP_M.iter().rev().find(|&&g| g < s.group_m)?;
                    Some(Schedule {
                        group_m: *prev,
                        ..*s
                    })
                },
            },
            Transform {
                name: "cp-async-all-operands",
                rationale: "cp.async for the K-contiguous operand too: no staging registers, so more loads in flight \
                            per thread and room under the register cap",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.05,
                apply: |s| {
                    Some(Schedule {
                        async_mode: 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "cp-async-mn-operands",
                rationale: "cp.async only for M/N-contiguous operands (16-byte chunks); the K-contiguous one uses float4 \
                            loads and a register transpose instead of four 4-byte cp.async per vector",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.03,
                apply: |s| {
                    Some(Schedule {
                        async_mode: 1,
                        ..*s
                    })
                },
            },
            Transform {
                name: "register-staged-loads",
                rationale: "float4 loads through registers for both operands: fewer memory instructions than 4-byte \
                            cp.async, at the cost of staging registers",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(Schedule {
                        async_mode: 0,
                        ..*s
                    })
                },
            },
            Transform {
                name: "one-block-per-sm",
                rationale: "__launch_bounds__ for 1 resident block: lifts the register cap so the register tile and \
                            prefetches never spill and ptxas can schedule for more ILP",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.05,
                apply: |s| {
                    Some(Schedule {
                        min_blocks: 1,
                        ..*s
                    })
                },
            },
            Transform {
                name: "split-k",
                rationale: "four times as many K splits, each a separate block summed by a deterministic second pass: \
                            a problem with fewer output tiles than SMs (small M·N, long K) fills the GPU",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.10,
                apply: |s| {
                    let next = SPLIT_K.iter().rev().find(|&&k| k <= s.split_k * 4)?;
                    Some(Schedule {
                        split_k: *next,
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-k-splits",
                rationale: "half the K splits: less workspace traffic and a cheaper second pass once the grid is full",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.03,
                apply: |s| {
                    Some(Schedule {
                        split_k: s.split_k / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "template-register-cap",
                rationale: "back to the template's measured register budget for this tile shape",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(Schedule {
                        min_blocks: 0,
                        ..*s
                    })
                },
            },
        ]
    }
}

impl Evaluable for Schedule {
    type Spec = MatmulSpec;
    type Shape = MatmulShape;

    fn as_launched(&self, _spec: &MatmulSpec, shape: MatmulShape) -> Self {
        Schedule {
            split_k: super::launched_split(self.split_k, shape),
            ..*self
        }
    }

    fn candidate(&self, spec: &MatmulSpec) -> Candidate {
        Schedule::candidate(self, spec)
    }

    fn problem(spec: &MatmulSpec, shape: MatmulShape) -> Problem {
        super::problem(spec, DType::F32, shape)
    }

    fn work(spec: &MatmulSpec, shape: MatmulShape) -> (f64, f64) {
        (shape.flops(), shape.min_bytes(spec))
    }
}

/// A tile change keeps the other knobs where they still apply; a warp shape or explicit register cap that no
/// longer fits the new thread grid (or duplicates the template's choice) falls back to the default, so growing or
/// shrinking tiles stays possible from every schedule.
fn retile(mut t: Schedule) -> Option<Schedule> {
    if !(Schedule { min_blocks: 0, ..t }).is_valid() {
        t.warp_n = 8;
    }
    if !t.is_valid() {
        t.min_blocks = 0;
    }
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{DistinctProposer, Proposer, RoutedProposer};

    #[test]
    fn a_split_the_launcher_would_undo_is_not_proposed() {
        let at = |k: usize| {
            move |a: &Schedule, b: &Schedule| {
                let launched = |s: &Schedule| Schedule {
                    split_k: optiml_runtime::matmul::splits_for(s.split_k, 4096 * 4096, k),
                    ..*s
                };
                launched(a) == launched(b)
            }
        };
        let root = Schedule::default_for(optiml_runtime::Arch::new(9, 0));
        let names = |p: &dyn Proposer<Schedule>| -> Vec<&'static str> {
            p.propose(&root, Bottleneck::Mixed)
                .iter()
                .map(|t| t.name)
                .collect()
        };
        let short = DistinctProposer::new(RoutedProposer::new(Schedule::catalog()), at(32));
        let long = DistinctProposer::new(RoutedProposer::new(Schedule::catalog()), at(65536));
        assert!(!names(&short).contains(&"split-k"));
        assert!(names(&long).contains(&"split-k"));
        // Everything else is proposed as before.
        let all = names(&RoutedProposer::new(Schedule::catalog()));
        assert_eq!(names(&short).len() + 1, all.len());
        assert_eq!(names(&long), all);
    }

    #[test]
    fn catalog_names_are_unique_and_effects_stay_in_the_template_space() {
        let catalog = Schedule::catalog();
        let mut names: Vec<&str> = catalog.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), catalog.len());
        for s in Schedule::space() {
            for t in &catalog {
                if let Some(out) = t.apply_to(&s) {
                    assert!(out.is_valid(), "{} on {s:?}", t.name);
                }
            }
        }
    }

    #[test]
    fn routing_puts_the_bottleneck_first_and_respects_preconditions() {
        let p = RoutedProposer::new(Schedule::catalog());
        let default = Schedule::default_for(optiml_runtime::Arch::new(9, 0));
        let mem = p.propose(&default, Bottleneck::Memory);
        // The block tile is at its maximum: growing it does not apply.
        assert!(
            mem.iter()
                .all(|t| t.name != "grow-block-n" && t.name != "grow-block-m")
        );
        assert_eq!(mem[0].name, "deepen-k-tile");
        let small = Schedule {
            bm: 128,
            bn: 128,
            bk: 16,
            tm: 4,
            tn: 4,
            ..default
        };
        let compute = p.propose(&small, Bottleneck::Compute);
        assert_eq!(compute[0].addresses, Bottleneck::Compute);
        assert_eq!(p.propose(&small, Bottleneck::Memory).len(), compute.len());
    }

    #[test]
    fn every_schedule_is_reachable_from_the_default() {
        let catalog = Schedule::catalog();
        let mut seen = std::collections::HashSet::new();
        let mut frontier = vec![Schedule::default_for(optiml_runtime::Arch::new(9, 0))];
        while let Some(s) = frontier.pop() {
            if seen.insert(s) {
                frontier.extend(catalog.iter().filter_map(|t| t.apply_to(&s)));
            }
        }
        let all = Schedule::space();
        assert_eq!(seen.len(), all.len());
        assert!(all.iter().all(|s| seen.contains(s)));
    }

    #[test]
    fn tile_changes_keep_the_knobs_that_still_apply() {
        let by_name = |name: &str| {
            Schedule::catalog()
                .into_iter()
                .find(|t| t.name == name)
                .unwrap()
        };
        let default = Schedule::default_for(optiml_runtime::Arch::new(9, 0));
        // A 2x16-lane warp needs 16 threads along N; with 8 it falls back to the default 4x8.
        let wide = Schedule {
            bn: 64,
            tn: 4,
            warp_n: 16,
            group_m: 8,
            async_mode: 2,
            ..default
        };
        assert!(wide.is_valid());
        let wider = by_name("grow-block-n").apply_to(&wide).unwrap();
        assert_eq!(wider, Schedule { bn: 128, ..wide });
        let thicker = by_name("grow-thread-tile").apply_to(&wide).unwrap();
        assert_eq!(
            thicker,
            Schedule {
                tn: 8,
                warp_n: 8,
                ..wide
            }
        );
        // An explicit register cap that would equal the template's choice, or not cap anything, resets to auto.
        let one_block = by_name("one-block-per-sm").apply_to(&default).unwrap();
        assert_eq!(one_block.min_blocks, 1);
        // 512 threads: the template already asks for 1 block.
        let halved = by_name("shrink-thread-tile").apply_to(&one_block).unwrap();
        assert_eq!((halved.threads(), halved.min_blocks), (512, 0));
        let narrower = by_name("shrink-block-n").apply_to(&one_block).unwrap();
        assert_eq!(narrower.min_blocks, 1);
    }
}
