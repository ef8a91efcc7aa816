//! TF32 tensor-core matmuls, for specs that allow TF32 (`matmul, f32, tf32`): a warp-specialised `wgmma`
//! kernel with a TMA producer on sm_90 (compiled for the arch-specific `sm_90a`), and the `mma.sync` kernel on
//! every other architecture from sm_80 on. Buffers stay f32; A and B are rounded to TF32 inside the kernel and
//! products accumulate in fp32.

use super::MatmulShape;
use super::{has_wgmma, next_depth};
use crate::eval::{Evaluable, Problem};
use crate::experts::{Candidate, defines};
use crate::search::{Bottleneck, Transform, Tunable};
use optiml_runtime::{Arch, Launch};
use optiml_spec::{DType, MatmulSpec};

/// The `wgmma` template (sm_90a).
pub const WGMMA_TEMPLATE: &str = include_str!("cuda/matmul_wgmma_tf32.cu");

/// The `mma.sync` template (sm_80 and newer).
pub const MMA_TEMPLATE: &str = include_str!("cuda/matmul_tf32.cu");

/// Values of [`Schedule::qn`]: the `wgmma` N, rows of the K-major operand per tile.
pub const QN: [u32; 2] = [128, 256];
/// Values of [`Schedule::consumers`]: consumer warpgroups, each computing 64 rows of the other operand.
pub const CONSUMERS: [u32; 2] = [1, 2];
/// Values of [`Schedule::stages`].
pub const STAGES: [u32; 6] = [2, 3, 4, 5, 6, 8];

/// The most dynamic shared memory a block may use on sm_90 (227 KiB).
const MAX_SMEM: u32 = 227 * 1024;

/// The `wgmma` kernel's knobs: what the search transforms for a TF32 spec on sm_90.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// A recorded schedule reads as this kernel's only if it has no other kernel's fields: that is how a search log
// names the catalog it walked (`crate::families::catalog_of`).
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Rows of the K-major operand per tile (the `wgmma` N): 128 or 256.
    pub qn: u32,
    /// Consumer warpgroups (64 rows of the other operand each): 1 or 2.
    pub consumers: u32,
    /// Depth of the shared-memory ring of 32-deep k-tiles.
    pub stages: u32,
    /// With two consumers: each computes its own `qn × 64` tiles and their main loops take turns, so one's
    /// epilogue overlaps the other's MMAs; otherwise both share each `qn × 128` tile.
    #[serde(default)]
    pub pingpong: bool,
}

impl Schedule {
    /// 256 × 128 tiles, two consumer warpgroups, four stages (197632 bytes of shared memory): the prototype that
    /// ran at cuBLAS's TF32 speed on the H200 for 256×1024³ (`bench/results/2026-11-30-h200-tf32.md`).
    pub fn default_for(_arch: Arch) -> Self {
        Schedule {
            qn: 256,
            consumers: 2,
            stages: 4,
            pingpong: false,
        }
    }

    /// Threads per block: the consumers and one producer warpgroup.
    pub fn threads(&self) -> u32 {
        128 * (self.consumers + 1)
    }

    /// Rows of the other operand P per tile (the template's `PW`).
    pub fn p_rows(&self) -> u32 {
        if self.pingpong {
            64
        } else {
            64 * self.consumers
        }
    }

    /// Dynamic shared memory: the ring, plus 1024 bytes to align it to the 128-byte swizzle's period.
    pub fn smem_bytes(&self) -> u32 {
        self.stages * (self.qn + self.p_rows()) * 128 + 1024
    }

    /// Whether the template supports this combination within the shared memory of a block.
    pub fn is_valid(&self) -> bool {
        QN.contains(&self.qn)
            && CONSUMERS.contains(&self.consumers)
            && STAGES.contains(&self.stages)
            && (!self.pingpong || self.consumers == 2)
            && self.smem_bytes() <= MAX_SMEM
    }

    /// Every schedule the template supports.
    pub fn all() -> Vec<Schedule> {
        let mut out = Vec::new();
        for qn in QN {
            for consumers in CONSUMERS {
                for stages in STAGES {
                    for pingpong in [false, true] {
                        let s = Schedule {
                            qn,
                            consumers,
                            stages,
                            pingpong,
                        };
                        if s.is_valid() {
                            out.push(s);
                        }
                    }
                }
            }
        }
        out
    }

    /// `wgmma 256x128, 2 consumers, 4 stages`, or `wgmma 256x64 ping-pong, 2 consumers, 5 stages`.
    pub fn describe(&self) -> String {
        format!(
            "wgmma {}x{}{}, {} consumers, {} stages",
            self.qn,
            self.p_rows(),
            if self.pingpong { " ping-pong" } else { "" },
            self.consumers,
            self.stages
        )
    }

    /// The `wgmma` candidate computing `spec` with this schedule. The TMA producer is compiled in for every
    /// layout whose wide operand Q is K-major in memory (`NN`, `NT`, `TT`); `TN`, whose A is M-major where
    /// TF32 `wgmma` needs it K-major, is transposed by the `cp.async` producer.
    pub fn candidate(&self, spec: &MatmulSpec) -> Candidate {
        let tma = !spec.trans_a || spec.trans_b;
        // The accumulator holds Cᵀ unless both operands are transposed.
        let swap = !(spec.trans_a && spec.trans_b);
        let pw = self.p_rows();
        let (tile_m, tile_n) = if swap { (self.qn, pw) } else { (pw, self.qn) };
        let mut macros: Vec<(&str, i64)> = vec![
            ("OPTIML_QN", self.qn.into()),
            ("OPTIML_CONSUMERS", self.consumers.into()),
            ("OPTIML_STAGES", self.stages.into()),
            ("OPTIML_PINGPONG", self.pingpong.into()),
            ("OPTIML_TMA", tma.into()),
        ];
        macros.extend(epilogue(spec));
        let source = format!(
            "// @generated by optiml-build {}: matmul f32 tf32 (wgmma, sm_90a), {}\n{}\n{WGMMA_TEMPLATE}\n{}",
            env!("CARGO_PKG_VERSION"),
            self.describe(),
            defines(&macros),
            super::simt_f32::GEMV_TEMPLATE,
        );
        Candidate {
            source,
            entry: "optiml_matmul",
            launch: Launch::Wgmma {
                tile_m,
                tile_n,
                threads: self.threads(),
                smem_bytes: self.smem_bytes(),
                tma_rows: if tma { self.qn } else { 0 },
                tma_a_kmajor: tma && !spec.trans_a,
                // NT: B (the P operand) stored n × k.
                tma_p_kmajor: tma && !spec.trans_a && spec.trans_b,
            },
            schedule: self.describe(),
        }
    }
}

/// The candidate for `spec` on an architecture without `wgmma`: the `mma.sync` template at its H200-measured
/// starting point (128×128×32 block, 64×64 warp tiles, three `cp.async` stages).
pub fn mma_candidate(spec: &MatmulSpec) -> Candidate {
    let (bm, bn, bk, wm, wn, stages) = (128u32, 128u32, 32u32, 64u32, 64u32, 3u32);
    let threads = (bm / wm) * (bn / wn) * 32;
    // The template's shared-memory layout (`OPTIML_A_STAGE_FLOATS`, `OPTIML_B_STAGE_FLOATS`): K-contiguous
    // rows padded by 4 floats, M/N-contiguous ones by 8.
    let a = if spec.trans_a {
        bk * (bm + 8)
    } else {
        bm * (bk + 4)
    };
    let b = if spec.trans_b {
        bn * (bk + 4)
    } else {
        bk * (bn + 8)
    };
    let smem = 4 * stages * (a + b);
    let mut macros: Vec<(&str, i64)> = vec![
        ("OPTIML_BM", bm.into()),
        ("OPTIML_BN", bn.into()),
        ("OPTIML_BK", bk.into()),
        ("OPTIML_WM", wm.into()),
        ("OPTIML_WN", wn.into()),
        ("OPTIML_STAGES", stages.into()),
    ];
    macros.extend(epilogue(spec));
    let describe = format!(
        "mma.sync block {bm}x{bn}x{bk}, warp {wm}x{wn}, {threads} threads, {stages} stages"
    );
    let source = format!(
        "// @generated by optiml-build {}: matmul f32 tf32 (mma.sync), {describe}\n{}\n{MMA_TEMPLATE}\n{}",
        env!("CARGO_PKG_VERSION"),
        defines(&macros),
        super::simt_f32::GEMV_TEMPLATE,
    );
    Candidate {
        source,
        entry: "optiml_matmul",
        launch: Launch::Matmul {
            bm,
            bn,
            threads,
            // The template asks for dynamic shared memory only above the 48 KiB static limit.
            smem_bytes: if smem > 48 * 1024 { smem } else { 0 },
            split_k: 1,
        },
        schedule: describe,
    }
}

/// The candidate for `spec` on `arch`: `wgmma` on sm_90 (the default schedule), `mma.sync` elsewhere.
pub fn default_candidate(spec: &MatmulSpec, arch: Arch) -> Candidate {
    if has_wgmma(arch) {
        Schedule::default_for(arch).candidate(spec)
    } else {
        mma_candidate(spec)
    }
}

/// The layout and epilogue macros both templates share, and the matrix-vector kernel's.
fn epilogue(spec: &MatmulSpec) -> Vec<(&'static str, i64)> {
    let mut macros = super::spec_macros(spec).to_vec();
    macros.extend(super::gemv_macros());
    macros
}

impl Tunable for Schedule {
    fn describe(&self) -> String {
        Schedule::describe(self)
    }

    fn is_valid(&self) -> bool {
        Schedule::is_valid(self)
    }

    fn default_for(arch: Arch) -> Self {
        Schedule::default_for(arch)
    }

    fn space() -> Vec<Self> {
        Schedule::all()
    }

    fn catalog() -> Vec<Transform<Self>> {
        catalog()
    }
}

impl Evaluable for Schedule {
    type Spec = MatmulSpec;
    type Shape = MatmulShape;

    fn candidate(&self, spec: &MatmulSpec) -> Candidate {
        Schedule::candidate(self, spec)
    }

    /// Dense TF32 tensor-core throughput is 8× the fp32 FMA rate per SM and clock on Ampere and Hopper (1024
    /// against 128 multiply-adds).
    fn peak_tflops(fp32_tflops: f64) -> f64 {
        8.0 * fp32_tflops
    }

    fn problem(spec: &MatmulSpec, shape: MatmulShape) -> Problem {
        super::problem(spec, DType::F32, shape)
    }

    fn work(spec: &MatmulSpec, shape: MatmulShape) -> (f64, f64) {
        (shape.flops(), shape.min_bytes(spec))
    }
}

/// The TF32 `wgmma` kernel's transformations: its tile and its ring depth.
fn catalog() -> Vec<Transform<Schedule>> {
    vec![
        Transform {
            name: "wide-wgmma",
            rationale: "a 256-row wgmma reads each 64-row slice of the other operand once per 256 rows instead of \
                        128: half the shared-memory bytes per MMA",
            addresses: Bottleneck::Compute,
            claimed_gain: 1.10,
            apply: |s| Some(Schedule { qn: s.qn * 2, ..*s }),
        },
        Transform {
            name: "narrow-wgmma",
            rationale: "a 128-row tile gives twice the tiles, filling the machine on problems of fewer tiles than \
                        multiprocessors",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.10,
            apply: |s| Some(Schedule { qn: s.qn / 2, ..*s }),
        },
        Transform {
            name: "second-consumer",
            rationale: "two consumer warpgroups share each loaded stage of the K-major operand: twice the MMAs per \
                        byte loaded",
            addresses: Bottleneck::Compute,
            claimed_gain: 1.10,
            apply: |s| Some(Schedule { consumers: 2, ..*s }),
        },
        Transform {
            name: "one-consumer",
            rationale: "one consumer warpgroup halves the tile's other side: more tiles for small problems",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.05,
            apply: |s| Some(Schedule { consumers: 1, ..*s }),
        },
        Transform {
            name: "ping-pong",
            rationale: "the two consumer warpgroups take their own tiles in turns: one's epilogue (C stores) runs \
                        while the other's MMAs keep the tensor cores busy, instead of both stopping per tile",
            addresses: Bottleneck::Compute,
            claimed_gain: 1.08,
            apply: |s| {
                Some(Schedule {
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
                Some(Schedule {
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
            apply: |s| next_depth(s.stages, 1).map(|stages| Schedule { stages, ..*s }),
        },
        Transform {
            name: "shallower-ring",
            rationale: "one stage fewer frees shared memory (and its fill time at the start of each tile)",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.02,
            apply: |s| next_depth(s.stages, -1).map(|stages| Schedule { stages, ..*s }),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(trans_a: bool, trans_b: bool) -> MatmulSpec {
        match optiml_spec::parse("batched matmul, f32, tf32")
            .unwrap()
            .family
        {
            optiml_spec::Family::Matmul(m) => MatmulSpec {
                trans_a,
                trans_b,
                ..m
            },
            optiml_spec::Family::Elementwise(_) => unreachable!(),
        }
    }

    #[test]
    fn the_default_is_the_measured_prototype() {
        let s = Schedule::default_for(Arch::new(9, 0));
        assert!(s.is_valid());
        assert_eq!((s.threads(), s.smem_bytes()), (384, 197_632));
        assert!(Schedule::all().contains(&s));
        // Five 256-row stages do not fit a block's shared memory; with ping-pong's 64-row tiles they do.
        assert!(!Schedule { stages: 5, ..s }.is_valid());
        let pingpong = Schedule {
            stages: 5,
            pingpong: true,
            ..s
        };
        assert!(pingpong.is_valid());
        assert_eq!(pingpong.smem_bytes(), 205_824);
        assert!(
            !Schedule {
                consumers: 1,
                ..pingpong
            }
            .is_valid()
        );
        // 18 cooperative or single-consumer schedules, 10 ping-pong ones.
        assert_eq!(Schedule::all().len(), 28);
        assert!(matches!(
            pingpong.candidate(&spec(false, false)).launch,
            Launch::Wgmma {
                tile_m: 256,
                tile_n: 64,
                threads: 384,
                ..
            }
        ));
    }

    #[test]
    fn tma_wherever_the_wide_operand_is_k_major() {
        let s = Schedule::default_for(Arch::new(9, 0));
        let launch = |a, b| s.candidate(&spec(a, b)).launch;
        assert_eq!(
            launch(false, false),
            Launch::Wgmma {
                tile_m: 256,
                tile_n: 128,
                threads: 384,
                smem_bytes: 197_632,
                tma_rows: 256,
                tma_a_kmajor: true,
                tma_p_kmajor: false,
            }
        );
        assert!(matches!(
            launch(true, true),
            Launch::Wgmma {
                tile_m: 128,
                tile_n: 256,
                tma_rows: 256,
                tma_a_kmajor: false,
                tma_p_kmajor: false,
                ..
            }
        ));
        assert!(matches!(
            launch(false, true),
            Launch::Wgmma {
                tma_rows: 256,
                tma_a_kmajor: true,
                tma_p_kmajor: true,
                ..
            }
        ));
        assert!(matches!(
            launch(true, false),
            Launch::Wgmma { tma_rows: 0, .. }
        ));
        assert!(
            s.candidate(&spec(true, false))
                .source
                .contains("#define OPTIML_TMA 0")
        );
    }

    #[test]
    fn other_architectures_get_mma_sync() {
        let c = default_candidate(&spec(false, false), Arch::new(8, 0));
        assert!(c.source.contains("mma.sync"));
        assert_eq!(
            c.launch,
            Launch::Matmul {
                bm: 128,
                bn: 128,
                threads: 128,
                smem_bytes: 107_520,
                split_k: 1
            }
        );
        assert!(matches!(
            default_candidate(&spec(false, false), Arch::new(9, 0)).launch,
            Launch::Wgmma { .. }
        ));
        assert!(!has_wgmma(Arch::new(10, 0)));
    }
}
