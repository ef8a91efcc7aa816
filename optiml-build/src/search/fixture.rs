//! Schedules that exist only for the search's own tests. The search is generic over [`Tunable`], so its tests
//! must not lean on any family's schedule: a family that changes its space or catalog would silently change what
//! these tests prove, and the generic layer would name a family it is meant to know nothing about. These
//! fixtures are shaped like real kernel schedules (a tiled kernel's block and register tiles, a streaming
//! kernel's launch grid) so the landscapes built on them are as hard to search as the real ones, but their
//! spaces and catalogs are fixed here, next to the tests that count on them.
//!
//! ```text
//! Tile: block {64,128,256}² × k {8,16,32}, thread 4x4|8x4|8x8, 1–3 stages, group {1,2,4,8}
//!       (64–1024 threads, ≤ 48 KiB of stages)                        640 schedules, 12 transformations
//! Grid: {128..1024} threads × {one pass, 1..32} blocks/SM × unroll {1..8}   88 schedules, 8 transformations
//! ```

use super::{Bottleneck, Transform, Tunable};
use optiml_runtime::Arch;

/// Block-tile edges: the default's 64 is the smallest, so every block move from it grows the block (as from the
/// corner of a real tile space); 256 is one step past the MCTS landscape's best, so a search can overshoot.
const BLOCK: [u32; 3] = [64, 128, 256];
/// K-slice depths: three, so "deeper" and "shallower" both apply from the middle one.
const DEPTH: [u32; 3] = [8, 16, 32];
/// Register-tile edges: the default's 4×4 is the smallest tile, two growths (8×4, 8×8) from the largest.
const THREAD: [u32; 2] = [4, 8];
/// Pipeline depths: single, double or triple buffering; the extra stages are what the shared-memory limit takes
/// away first when the tiles grow.
const STAGES: [u32; 3] = [1, 2, 3];
/// Raster groups: launch order or groups of 2, 4 or 8 tile rows, a knob the tile landscapes ignore, which
/// multiplies the schedules a search without a landscape's hint could waste its budget on.
const GROUP_M: [u32; 4] = [1, 2, 4, 8];
/// Shared memory a block may use without opting in to more; it couples the tile shape to the pipeline depth,
/// so the space is not a plain product of its knobs.
const SMEM_BYTES: u32 = 48 * 1024;

/// A tiled kernel's schedule, the search tests' main landscape: a block tile, a k-slice, a per-thread register
/// tile and two knobs that do not change the tile. Big enough (640 schedules, 12 transformations; 68 tile
/// shapes, so even a search that moves only the tile has twice its default 32 evaluations of shapes to choose
/// from) that the search cannot find a best by enumerating, small enough for a test to enumerate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// As a family's schedule does: a logged schedule of another type does not read as this one, so `schedule_as`
// and `Replay::new` behave in the tests as they do on real logs.
#[serde(deny_unknown_fields)]
pub(crate) struct Tile {
    /// Rows per block: with `bn`, sets the data reuse a landscape rewards.
    pub bm: u32,
    /// Columns per block.
    pub bn: u32,
    /// K-slice per stage: what the synthetic landscapes reject or favour beside the tile.
    pub bk: u32,
    /// Rows per thread: with `tn`, the register tile (the landscapes' instruction-level parallelism).
    pub tm: u32,
    /// Columns per thread.
    pub tn: u32,
    /// Buffers in flight: a knob whose transformations are ties on the tile landscapes.
    pub stages: u32,
    /// Tile rows per raster group: another knob the tile landscapes ignore.
    pub group_m: u32,
}

/// Where searches on [`Tile`] start: the smallest tile (64×64×8 block, 4×4 per thread, 256 threads), four tile
/// transformations (two block growths, two thread-tile growths) from the best of the MCTS tests' landscape, so
/// reaching it takes the whole default depth.
pub(crate) const DEFAULT: Tile = Tile {
    bm: 64,
    bn: 64,
    bk: 8,
    tm: 4,
    tn: 4,
    stages: 2,
    group_m: 1,
};

impl Tile {
    /// Threads per block: the landscapes' occupancy term, and half of what bounds the space.
    pub(crate) fn threads(&self) -> u32 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }

    /// Shared memory of all stages (f32 operand slices): the other half of what bounds the space.
    pub(crate) fn smem_bytes(&self) -> u32 {
        (self.bm + self.bn) * self.bk * 4 * self.stages
    }
}

/// A tile change keeps the pipeline depth where it still fits and drops stages until it does, so growing a tile
/// is possible wherever one stage of it fits, as a real catalog's tile moves fall back on other knobs.
fn retile(mut t: Tile) -> Option<Tile> {
    while !t.is_valid() && t.stages > STAGES[0] {
        t.stages -= 1;
    }
    Some(t)
}

impl Tunable for Tile {
    /// `block 64x64x8, thread 4x4, 256 threads, 2 stages, group 1`: every field, so logs tell schedules apart.
    fn describe(&self) -> String {
        format!(
            "block {}x{}x{}, thread {}x{}, {} threads, {} stages, group {}",
            self.bm,
            self.bn,
            self.bk,
            self.tm,
            self.tn,
            self.threads(),
            self.stages,
            self.group_m,
        )
    }

    /// Each knob in its list, 64 to 1024 threads, and the stages' operand slices within the shared-memory
    /// limit: the last two make some tile moves invalid from some schedules, as a real template's constraints do.
    /// The register tile is square or twice as tall as wide: the thread-tile moves alternate rows and columns,
    /// so those are the shapes they reach, and a schedule no move reaches would be a best no search could find.
    fn is_valid(&self) -> bool {
        BLOCK.contains(&self.bm)
            && BLOCK.contains(&self.bn)
            && DEPTH.contains(&self.bk)
            && THREAD.contains(&self.tm)
            && THREAD.contains(&self.tn)
            && (self.tn..=2 * self.tn).contains(&self.tm)
            && STAGES.contains(&self.stages)
            && GROUP_M.contains(&self.group_m)
            && (64..=1024).contains(&self.threads())
            && self.smem_bytes() <= SMEM_BYTES
    }

    /// The same start on every architecture: the tests are about the search, not about a GPU.
    fn default_for(_arch: Arch) -> Self {
        DEFAULT
    }

    /// Every valid combination of the knobs' lists: 640 schedules.
    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for bm in BLOCK {
            for bn in BLOCK {
                for bk in DEPTH {
                    for tm in THREAD {
                        for tn in THREAD {
                            for stages in STAGES {
                                for group_m in GROUP_M {
                                    let s = Tile {
                                        bm,
                                        bn,
                                        bk,
                                        tm,
                                        tn,
                                        stages,
                                        group_m,
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
        out
    }

    /// Eight tile moves (the names, bottlenecks and claimed gains a tiled kernel's catalog uses, which the
    /// search tests route and filter by) and four moves of the knobs the tile landscapes ignore, which dilute a
    /// search that cannot tell them apart.
    fn catalog() -> Vec<Transform<Self>> {
        vec![
            Transform {
                name: "grow-block-n",
                rationale: "a wider block reuses each loaded row across more columns",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.10,
                apply: |s| retile(Tile { bn: s.bn * 2, ..*s }),
            },
            Transform {
                name: "grow-block-m",
                rationale: "a taller block reuses each loaded column across more rows",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.10,
                apply: |s| retile(Tile { bm: s.bm * 2, ..*s }),
            },
            Transform {
                name: "deepen-k-tile",
                rationale: "a deeper k-slice halves the barriers per step of the reduction",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.05,
                apply: |s| retile(Tile { bk: s.bk * 2, ..*s }),
            },
            Transform {
                name: "grow-thread-tile",
                rationale: "a larger register tile does more work per shared-memory load",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.15,
                apply: |s| {
                    // A square tile grows rows first, a tall one columns: the tile stays square or 2:1.
                    if s.tm <= s.tn {
                        retile(Tile { tm: s.tm * 2, ..*s })
                    } else {
                        retile(Tile { tn: s.tn * 2, ..*s })
                    }
                },
            },
            Transform {
                name: "shallow-k-tile",
                rationale: "a shallower k-slice frees shared memory for more resident blocks",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.03,
                apply: |s| retile(Tile { bk: s.bk / 2, ..*s }),
            },
            Transform {
                name: "shrink-block-n",
                rationale: "a narrower block makes more blocks on a small problem",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.05,
                apply: |s| retile(Tile { bn: s.bn / 2, ..*s }),
            },
            Transform {
                name: "shrink-block-m",
                rationale: "a shorter block makes more blocks on a small problem",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.05,
                apply: |s| retile(Tile { bm: s.bm / 2, ..*s }),
            },
            Transform {
                name: "shrink-thread-tile",
                rationale: "a smaller register tile lowers register pressure",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.05,
                apply: |s| {
                    // The inverse of growing: a tall tile loses rows, a square one columns.
                    if s.tm > s.tn {
                        retile(Tile { tm: s.tm / 2, ..*s })
                    } else {
                        retile(Tile { tn: s.tn / 2, ..*s })
                    }
                },
            },
            Transform {
                name: "add-stage",
                rationale: "a third buffer keeps one more k-slice in flight",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.04,
                apply: |s| {
                    Some(Tile {
                        stages: s.stages + 1,
                        ..*s
                    })
                },
            },
            Transform {
                name: "drop-stage",
                rationale: "double buffering frees shared memory for more resident blocks",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(Tile {
                        stages: s.stages - 1,
                        ..*s
                    })
                },
            },
            Transform {
                name: "group-tile-rows",
                rationale: "rasterizing in larger groups of tile rows shares operands in L2",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.08,
                apply: |s| {
                    let next = GROUP_M.iter().find(|&&g| g > s.group_m)?;
                    Some(Tile {
                        group_m: *next,
                        ..*s
                    })
                },
            },
            Transform {
                name: "ungroup-tile-rows",
                rationale: "smaller groups, down to launch order, save rasterization arithmetic",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.01,
                apply: |s| {
                    let prev = GROUP_M.iter().rev().find(|&&g| g < s.group_m)?;
                    Some(Tile {
                        group_m: *prev,
                        ..*s
                    })
                },
            },
        ]
    }
}

/// Threads per block of a [`Grid`].
const GRID_THREADS: [u32; 4] = [128, 256, 512, 1024];
/// Resident blocks per SM a [`Grid`] is sized for; 0 is one pass, a block per chunk, with no loop.
const GRID_BLOCKS_PER_SM: [u32; 7] = [0, 1, 2, 4, 8, 16, 32];
/// Loads in flight per thread of a [`Grid`].
const GRID_UNROLL: [u32; 4] = [1, 2, 4, 8];

/// A streaming kernel's launch grid: a second schedule type whose knobs and catalog share nothing with
/// [`Tile`]'s, so a test can show the same search tunes any [`Tunable`], not just the one it was written
/// against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// As `Tile`'s: a logged schedule of another type does not read as this one.
#[serde(deny_unknown_fields)]
pub(crate) struct Grid {
    /// Threads per block: with `blocks_per_sm`, the residency a bandwidth landscape rewards.
    pub threads: u32,
    /// Resident blocks per SM the grid is sized for; 0: one pass, which needs no residency to be chosen.
    pub blocks_per_sm: u32,
    /// Loads in flight per thread: a knob the bandwidth landscape ignores.
    pub unroll: u32,
}

impl Tunable for Grid {
    /// `256 threads, 8 blocks/SM, unroll 4`, or `256 threads, one pass, unroll 4`.
    fn describe(&self) -> String {
        let grid = if self.blocks_per_sm == 0 {
            "one pass".to_string()
        } else {
            format!("{} blocks/SM", self.blocks_per_sm)
        };
        format!("{} threads, {grid}, unroll {}", self.threads, self.unroll)
    }

    /// Each knob in its list and at most two waves of 2048 threads per SM, so the space is not a plain product.
    fn is_valid(&self) -> bool {
        GRID_THREADS.contains(&self.threads)
            && GRID_BLOCKS_PER_SM.contains(&self.blocks_per_sm)
            && self.threads * self.blocks_per_sm <= 4096
            && GRID_UNROLL.contains(&self.unroll)
    }

    /// The same start on every architecture: the tests are about the search, not about a GPU.
    fn default_for(_arch: Arch) -> Self {
        Grid {
            threads: 128,
            blocks_per_sm: 0,
            unroll: 1,
        }
    }

    /// Every valid combination: 88 schedules.
    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for threads in GRID_THREADS {
            for blocks_per_sm in GRID_BLOCKS_PER_SM {
                for unroll in GRID_UNROLL {
                    let s = Grid {
                        threads,
                        blocks_per_sm,
                        unroll,
                    };
                    if s.is_valid() {
                        out.push(s);
                    }
                }
            }
        }
        out
    }

    /// Moves that trade block size against blocks per SM, switch between one pass and a looping grid, and
    /// change the loads in flight: enough that reaching a good grid takes several of them.
    fn catalog() -> Vec<Transform<Self>> {
        vec![
            Transform {
                name: "wider-blocks",
                rationale: "the same residency in fewer, larger blocks",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(Grid {
                        threads: s.threads * 2,
                        blocks_per_sm: if s.blocks_per_sm == 0 {
                            0
                        } else {
                            (s.blocks_per_sm / 2).max(1)
                        },
                        ..*s
                    })
                },
            },
            Transform {
                name: "narrower-blocks",
                rationale: "the same residency in more, smaller blocks",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(Grid {
                        threads: s.threads / 2,
                        blocks_per_sm: s.blocks_per_sm * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "more-blocks-per-sm",
                rationale: "more resident threads keep more loads in flight",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.05,
                apply: |s| {
                    (s.blocks_per_sm > 0).then_some(Grid {
                        blocks_per_sm: s.blocks_per_sm * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-blocks-per-sm",
                rationale: "a smaller grid loops longer with fewer blocks to schedule",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.03,
                apply: |s| {
                    (s.blocks_per_sm > 1).then_some(Grid {
                        blocks_per_sm: s.blocks_per_sm / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "one-pass-grid",
                rationale: "no loop: blocks retire and fresh ones start",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.04,
                apply: |s| {
                    (s.blocks_per_sm > 0).then_some(Grid {
                        blocks_per_sm: 0,
                        ..*s
                    })
                },
            },
            Transform {
                name: "looping-grid",
                rationale: "two looping blocks per SM launch fewer blocks",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    (s.blocks_per_sm == 0).then_some(Grid {
                        blocks_per_sm: 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "deeper-unroll",
                rationale: "more independent loads per thread",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.04,
                apply: |s| {
                    Some(Grid {
                        unroll: s.unroll * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "shallower-unroll",
                rationale: "fewer registers per thread",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(Grid {
                        unroll: s.unroll / 2,
                        ..*s
                    })
                },
            },
        ]
    }
}

/// The fixtures' own guarantees: the numbers the module documentation and the search tests' comments quote, and
/// the properties a real catalog has (unique names, moves that stay in the space and reach all of it), so a
/// search test that fails points at the search, not at its landscape.
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Checks one fixture: its size, its default, its catalog's names and effects, and that the catalog reaches
    /// every schedule from the default (otherwise an exhaustive best could be out of a search's reach).
    fn check<S: Tunable>(size: usize, catalog_len: usize) {
        let space = S::space();
        assert_eq!(space.len(), size);
        let all: HashSet<S> = space.iter().copied().collect();
        assert_eq!(all.len(), size, "the space repeats a schedule");
        let root = S::default_for(Arch::new(9, 0));
        assert!(all.contains(&root));
        let catalog = S::catalog();
        assert_eq!(catalog.len(), catalog_len);
        let names: HashSet<&str> = catalog.iter().map(|t| t.name).collect();
        assert_eq!(names.len(), catalog.len(), "a name repeats");
        let mut reached = HashSet::from([root]);
        let mut frontier = vec![root];
        while let Some(s) = frontier.pop() {
            for t in &catalog {
                if let Some(next) = t.apply_to(&s) {
                    assert!(
                        all.contains(&next),
                        "{} leaves the space from {s:?}",
                        t.name
                    );
                    if reached.insert(next) {
                        frontier.push(next);
                    }
                }
            }
        }
        assert_eq!(reached.len(), size, "some schedules are unreachable");
    }

    #[test]
    fn the_tile_fixture_is_the_space_the_search_tests_describe() {
        check::<Tile>(640, 12);
        let tiles: HashSet<(u32, u32, u32, u32, u32)> = Tile::space()
            .iter()
            .map(|s| (s.bm, s.bn, s.bk, s.tm, s.tn))
            .collect();
        assert_eq!(tiles.len(), 68);
        assert_eq!(DEFAULT.threads(), 256);
    }

    #[test]
    fn the_grid_fixture_is_the_space_the_search_tests_describe() {
        check::<Grid>(88, 8);
    }
}
