//! Transformations as typed objects: a name, the bottleneck it addresses, the gain it claims, and its effect on a
//! schedule (`None` when its precondition does not hold).

use super::Tunable;
use super::reward::Bottleneck;
use crate::experts::matmul::{GROUP_M, SPLIT_K, Schedule};
use crate::experts::{elementwise, matmul_tf32, matmul16};

/// One transformation of a schedule of type `S` (a matmul schedule unless said otherwise).
#[derive(Clone, Copy, Debug)]
pub struct Transform<S = Schedule> {
    /// Short name, unique in its catalog.
    pub name: &'static str,
    /// What it does and why it should help.
    pub rationale: &'static str,
    /// The bottleneck it addresses (the seed's routing, §3.1).
    pub addresses: Bottleneck,
    /// The speed-up it claims when it applies to that bottleneck (reported next to the measured one).
    pub claimed_gain: f64,
    /// Its effect; `None` when the precondition fails or the result is not a schedule the template supports.
    pub apply: fn(&S) -> Option<S>,
}

impl<S: Tunable> Transform<S> {
    /// Applies the transformation, checking the template's constraints.
    pub fn apply_to(&self, s: &S) -> Option<S> {
        (self.apply)(s).filter(|t| t.is_valid() && t != s)
    }
}

impl<S> PartialEq for Transform<S> {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// The matmul family's transformations over the template's schedule space.
pub fn matmul_catalog() -> Vec<Transform> {
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

/// The elementwise family's transformations over its launch shape (the template is a grid-stride float4 loop).
pub fn elementwise_catalog() -> Vec<Transform<elementwise::Schedule>> {
    vec![
        Transform {
            name: "wider-blocks",
            rationale: "twice the threads per block, half the blocks per SM: the same residency in fewer, larger \
                        blocks (fewer block launches and tail effects)",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.02,
            apply: |s| {
                Some(elementwise::Schedule {
                    threads: s.threads * 2,
                    blocks_per_sm: (s.blocks_per_sm / 2).max(1),
                })
            },
        },
        Transform {
            name: "narrower-blocks",
            rationale: "half the threads per block, twice the blocks per SM: finer load balance across SMs",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.02,
            apply: |s| {
                Some(elementwise::Schedule {
                    threads: s.threads / 2,
                    blocks_per_sm: s.blocks_per_sm * 2,
                })
            },
        },
        Transform {
            name: "more-blocks-per-sm",
            rationale: "a grid of more resident threads keeps more 16-byte loads in flight per SM (memory-level \
                        parallelism), the lever of a bandwidth-bound loop",
            addresses: Bottleneck::Memory,
            claimed_gain: 1.05,
            apply: |s| {
                Some(elementwise::Schedule {
                    blocks_per_sm: s.blocks_per_sm * 2,
                    ..*s
                })
            },
        },
        Transform {
            name: "fewer-blocks-per-sm",
            rationale: "a smaller grid makes each thread loop longer: fewer blocks to schedule and more loads per \
                        thread for the compiler to overlap",
            addresses: Bottleneck::Memory,
            claimed_gain: 1.03,
            apply: |s| {
                Some(elementwise::Schedule {
                    blocks_per_sm: s.blocks_per_sm / 2,
                    ..*s
                })
            },
        },
    ]
}

/// The TF32 `wgmma` kernel's transformations: its tile and its ring depth.
pub fn tf32_catalog() -> Vec<Transform<matmul_tf32::Schedule>> {
    vec![
        Transform {
            name: "wide-wgmma",
            rationale: "a 256-row wgmma reads each 64-row slice of the other operand once per 256 rows instead of \
                        128: half the shared-memory bytes per MMA",
            addresses: Bottleneck::Compute,
            claimed_gain: 1.10,
            apply: |s| Some(matmul_tf32::Schedule { qn: s.qn * 2, ..*s }),
        },
        Transform {
            name: "narrow-wgmma",
            rationale: "a 128-row tile gives twice the tiles, filling the machine on problems of fewer tiles than \
                        multiprocessors",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.10,
            apply: |s| Some(matmul_tf32::Schedule { qn: s.qn / 2, ..*s }),
        },
        Transform {
            name: "second-consumer",
            rationale: "two consumer warpgroups share each loaded stage of the K-major operand: twice the MMAs per \
                        byte loaded",
            addresses: Bottleneck::Compute,
            claimed_gain: 1.10,
            apply: |s| Some(matmul_tf32::Schedule { consumers: 2, ..*s }),
        },
        Transform {
            name: "one-consumer",
            rationale: "one consumer warpgroup halves the tile's other side: more tiles for small problems",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.05,
            apply: |s| Some(matmul_tf32::Schedule { consumers: 1, ..*s }),
        },
        Transform {
            name: "ping-pong",
            rationale: "the two consumer warpgroups take their own tiles in turns: one's epilogue (C stores) runs \
                        while the other's MMAs keep the tensor cores busy, instead of both stopping per tile",
            addresses: Bottleneck::Compute,
            claimed_gain: 1.08,
            apply: |s| {
                Some(matmul_tf32::Schedule {
                    pingpong: true,
                    ..*s
                })
            },
        },
        Transform {
            name: "cooperative",
            rationale: "both consumer warpgroups share each tile: half the loads of the wide operand per MMA",
            addresses: Bottleneck::Memory,
            claimed_gain: 1.03,
            apply: |s| {
                Some(matmul_tf32::Schedule {
                    pingpong: false,
                    ..*s
                })
            },
        },
        Transform {
            name: "deeper-ring",
            rationale: "one more stage in flight hides more load latency behind the MMAs",
            addresses: Bottleneck::Memory,
            claimed_gain: 1.03,
            apply: |s| next_depth(s.stages, 1).map(|stages| matmul_tf32::Schedule { stages, ..*s }),
        },
        Transform {
            name: "shallower-ring",
            rationale: "one stage fewer frees shared memory (and its fill time at the start of each tile)",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.02,
            apply: |s| {
                next_depth(s.stages, -1).map(|stages| matmul_tf32::Schedule { stages, ..*s })
            },
        },
    ]
}

/// The 16-bit `wgmma` kernel's transformations: its tile, its ring depth and its raster order. Names and claimed
/// gains are those of the same moves in the other catalogs.
pub fn matmul16_catalog() -> Vec<Transform<matmul16::Schedule>> {
    vec![
        Transform {
            name: "wide-wgmma",
            rationale: "a wider wgmma N reads each 64-row slice of A once per more columns: fewer shared-memory \
                        bytes per MMA",
            addresses: Bottleneck::Compute,
            claimed_gain: 1.10,
            apply: |s| Some(matmul16::Schedule { bn: s.bn * 2, ..*s }),
        },
        Transform {
            name: "narrow-wgmma",
            rationale: "a narrower tile gives more tiles, filling the machine on problems of fewer tiles than \
                        multiprocessors",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.10,
            apply: |s| Some(matmul16::Schedule { bn: s.bn / 2, ..*s }),
        },
        Transform {
            name: "second-consumer",
            rationale: "two consumer warpgroups share each loaded stage of B: twice the MMAs per byte loaded",
            addresses: Bottleneck::Compute,
            claimed_gain: 1.10,
            apply: |s| Some(matmul16::Schedule { consumers: 2, ..*s }),
        },
        Transform {
            name: "one-consumer",
            rationale: "one consumer warpgroup halves the tile's rows: more tiles for small problems",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.05,
            apply: |s| Some(matmul16::Schedule { consumers: 1, ..*s }),
        },
        Transform {
            name: "deeper-ring",
            rationale: "one more stage in flight hides more load latency behind the MMAs",
            addresses: Bottleneck::Memory,
            claimed_gain: 1.03,
            apply: |s| next_depth(s.stages, 1).map(|stages| matmul16::Schedule { stages, ..*s }),
        },
        Transform {
            name: "shallower-ring",
            rationale: "one stage fewer frees shared memory (and its fill time at the start of each tile)",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.02,
            apply: |s| next_depth(s.stages, -1).map(|stages| matmul16::Schedule { stages, ..*s }),
        },
        Transform {
            name: "group-tile-rows",
            rationale: "blocks running at once walk 8 tile rows per column: they share B panels in L2",
            addresses: Bottleneck::Memory,
            claimed_gain: 1.08,
            apply: |s| Some(matmul16::Schedule { group_m: 8, ..*s }),
        },
        Transform {
            name: "ungroup-tile-rows",
            rationale: "row-major tile order: consecutive blocks share A panels instead",
            addresses: Bottleneck::Memory,
            claimed_gain: 1.01,
            apply: |s| Some(matmul16::Schedule { group_m: 1, ..*s }),
        },
    ]
}

/// The ring depth `step` positions from `stages` in the `wgmma` kernels' shared list of depths.
fn next_depth(stages: u32, step: isize) -> Option<u32> {
    debug_assert_eq!(matmul_tf32::STAGES, matmul16::STAGES);
    let at = matmul16::STAGES.iter().position(|&d| d == stages)?;
    matmul16::STAGES.get(at.checked_add_signed(step)?).copied()
}

/// The gain a transformation of any family's catalog claims, by name (reports compare it with the measured one).
pub fn claimed_gain(name: &str) -> Option<f64> {
    matmul_catalog()
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.claimed_gain)
        .or_else(|| {
            tf32_catalog()
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.claimed_gain)
        })
        .or_else(|| {
            elementwise_catalog()
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.claimed_gain)
        })
}

/// Proposes the transformations to try from a node. An LLM expert implements this too.
pub trait Proposer<S = Schedule> {
    /// Transformations applicable to `schedule`, best first, for a node classified as `bottleneck`.
    fn propose(&self, schedule: &S, bottleneck: Bottleneck) -> Vec<Transform<S>>;
}

/// Another proposer's transformations, less those whose result is the same kernel as the schedule it starts from
/// under `same` (for a matmul: a split-K factor the launcher lowers, at the problem being tuned, to the count it
/// already runs), so no evaluation is spent on a renamed kernel.
pub struct DistinctProposer<P, S> {
    inner: P,
    same: Box<SameKernel<S>>,
}

/// Whether two schedules launch the same kernel for the problem at hand.
type SameKernel<S> = dyn Fn(&S, &S) -> bool + Send + Sync;

impl<P, S> DistinctProposer<P, S> {
    /// Filters `inner`'s proposals with `same(from, to)`.
    pub fn new(inner: P, same: impl Fn(&S, &S) -> bool + Send + Sync + 'static) -> Self {
        Self {
            inner,
            same: Box::new(same),
        }
    }
}

impl<P: Proposer<S>, S: Tunable> Proposer<S> for DistinctProposer<P, S> {
    fn propose(&self, schedule: &S, bottleneck: Bottleneck) -> Vec<Transform<S>> {
        self.inner
            .propose(schedule, bottleneck)
            .into_iter()
            .filter(|t| {
                t.apply_to(schedule)
                    .is_some_and(|to| !(self.same)(schedule, &to))
            })
            .collect()
    }
}

/// The seed's routing: transformations that address the node's bottleneck first, then the rest (so a search is
/// never stuck when the classification is wrong), each only where its precondition holds.
#[derive(Clone, Debug)]
pub struct RoutedProposer<S = Schedule> {
    catalog: Vec<Transform<S>>,
}

impl<S: Tunable> RoutedProposer<S> {
    /// Routes over `catalog`.
    pub fn new(catalog: Vec<Transform<S>>) -> Self {
        Self { catalog }
    }
}

impl<S: Tunable> Proposer<S> for RoutedProposer<S> {
    fn propose(&self, schedule: &S, bottleneck: Bottleneck) -> Vec<Transform<S>> {
        let applicable = self
            .catalog
            .iter()
            .filter(|t| t.apply_to(schedule).is_some());
        let (mut first, rest): (Vec<Transform<S>>, Vec<Transform<S>>) =
            applicable.partition(|t| t.addresses == bottleneck);
        first.extend(rest);
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let names = |p: &dyn Proposer| -> Vec<&'static str> {
            p.propose(&root, Bottleneck::Mixed)
                .iter()
                .map(|t| t.name)
                .collect()
        };
        let short = DistinctProposer::new(RoutedProposer::new(matmul_catalog()), at(32));
        let long = DistinctProposer::new(RoutedProposer::new(matmul_catalog()), at(65536));
        assert!(!names(&short).contains(&"split-k"));
        assert!(names(&long).contains(&"split-k"));
        // Everything else is proposed as before.
        let all = names(&RoutedProposer::new(matmul_catalog()));
        assert_eq!(names(&short).len() + 1, all.len());
        assert_eq!(names(&long), all);
    }

    #[test]
    fn catalog_names_are_unique_and_effects_stay_in_the_template_space() {
        let catalog = matmul_catalog();
        let mut names: Vec<&str> = catalog.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), catalog.len());
        for s in Schedule::all() {
            for t in &catalog {
                if let Some(out) = t.apply_to(&s) {
                    assert!(out.is_valid(), "{} on {s:?}", t.name);
                }
            }
        }
    }

    #[test]
    fn routing_puts_the_bottleneck_first_and_respects_preconditions() {
        let p = RoutedProposer::new(matmul_catalog());
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
        let catalog = matmul_catalog();
        let mut seen = std::collections::HashSet::new();
        let mut frontier = vec![Schedule::default_for(optiml_runtime::Arch::new(9, 0))];
        while let Some(s) = frontier.pop() {
            if seen.insert(s) {
                frontier.extend(catalog.iter().filter_map(|t| t.apply_to(&s)));
            }
        }
        let all = Schedule::all();
        assert_eq!(seen.len(), all.len());
        assert!(all.iter().all(|s| seen.contains(s)));
    }

    #[test]
    fn tile_changes_keep_the_knobs_that_still_apply() {
        let by_name = |name: &str| {
            matmul_catalog()
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

    #[test]
    fn the_elementwise_catalog_reaches_every_schedule_from_the_default() {
        use crate::experts::elementwise::Schedule as Ew;
        let catalog = elementwise_catalog();
        let mut names: Vec<&str> = catalog.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), catalog.len());
        let root = Ew::default_for(optiml_runtime::Arch::new(9, 0));
        let (mut seen, mut frontier) = (vec![root], vec![root]);
        while let Some(s) = frontier.pop() {
            for t in &catalog {
                if let Some(next) = t.apply_to(&s) {
                    assert!(next.is_valid(), "{} on {s:?}", t.name);
                    if !seen.contains(&next) {
                        seen.push(next);
                        frontier.push(next);
                    }
                }
            }
        }
        let all = Ew::all();
        assert!(
            all.iter().all(|s| seen.contains(s)),
            "{} of {}",
            seen.len(),
            all.len()
        );
        assert!(
            claimed_gain("more-blocks-per-sm").is_some() && claimed_gain("grow-block-n").is_some()
        );
    }
}
