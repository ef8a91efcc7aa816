//! 16-bit matmuls (`matmul, bf16` / `matmul, f16`): A, B and C hold bf16 or fp16, products accumulate in fp32
//! and the output is rounded once. On sm_90 a warp-specialised `wgmma` kernel (compiled for `sm_90a`) reads A
//! and B through TMA in every layout (16-bit `wgmma` has transpose bits, so no operand is transposed by hand);
//! the module also holds an any-shape SIMT kernel for calls TMA cannot address and for matrix-vector products.
//! Elsewhere the SIMT kernel is the module's entry.

use super::MatmulShape;
use super::next_depth;
use crate::eval::{Evaluable, Problem};
use crate::experts::{Candidate, Def, defines};
use crate::search::{Bottleneck, Transform, Tunable};
use optiml_runtime::{Arch, Half, Kernel16, Launch, Wgmma16};
use optiml_spec::{DType, MatmulSpec};

/// The `wgmma` template (sm_90a).
pub const WGMMA_TEMPLATE: &str = include_str!("cuda/matmul_wgmma_16.cu");

/// The SIMT template (any architecture from sm_70 on).
pub const SIMT_TEMPLATE: &str = include_str!("cuda/matmul16_simt.cu");

/// The `mma.sync` template (sm_80 and newer GPUs without `wgmma`).
pub const MMA_TEMPLATE: &str = include_str!("cuda/matmul_mma_16.cu");

/// The matrix-vector template every 16-bit module also holds (`optiml_gemv`, launched for `n == 1` or
/// `m == 1`: memory-bound calls a tiled kernel would spend mostly on padding).
pub const GEMV_TEMPLATE: &str = include_str!("cuda/gemv_16.cu");

/// Values of [`Schedule::bn`]: columns of C per tile, the `wgmma` N.
pub const BN: [u32; 3] = [64, 128, 256];
/// Values of [`Schedule::consumers`]: consumer warpgroups, 64 rows of C each.
pub const CONSUMERS: [u32; 2] = [1, 2];
/// Values of [`Schedule::stages`].
pub const STAGES: [u32; 6] = [2, 3, 4, 5, 6, 8];
/// Values of [`Schedule::group_m`].
pub const GROUP_M: [u32; 2] = [1, 8];

/// The most dynamic shared memory a block may use on sm_90 (227 KiB).
const MAX_SMEM: u32 = 227 * 1024;

/// What a 16-bit kernel computes: the matmul and the element type of its buffers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Spec16 {
    /// The product and its epilogue.
    pub matmul: MatmulSpec,
    /// The element type of A, B and C.
    pub elem: Half,
}

impl Spec16 {
    /// The 16-bit spec of `matmul` with elements `dtype`, or `None` for f32.
    pub fn new(matmul: &MatmulSpec, dtype: DType) -> Option<Self> {
        let elem = match dtype {
            DType::F32 => return None,
            DType::Bf16 => Half::Bf16,
            DType::F16 => Half::F16,
        };
        Some(Spec16 {
            matmul: matmul.clone(),
            elem,
        })
    }

    /// The spec's dtype.
    pub fn dtype(&self) -> DType {
        match self.elem {
            Half::Bf16 => DType::Bf16,
            Half::F16 => DType::F16,
        }
    }

    /// The macros of the element type, the layout and the epilogue, which both templates read.
    fn macros(&self) -> Vec<(&'static str, Def)> {
        let mut macros = vec![(
            "OPTIML_DTYPE",
            Def::Name(match self.elem {
                Half::Bf16 => "OPTIML_DTYPE_BF16",
                Half::F16 => "OPTIML_DTYPE_F16",
            }),
        )];
        macros.extend(super::spec_macros(&self.matmul));
        macros.extend(super::gemv_macros());
        macros
    }
}

/// The `wgmma` kernel's knobs: what the search transforms for a 16-bit spec on sm_90.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// A recorded schedule reads as this kernel's only if it has no other kernel's fields: that is how a search log
// names the catalog it walked (`crate::families::catalog_of`).
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Columns of C per tile (the `wgmma` N): 64, 128 or 256.
    pub bn: u32,
    /// Consumer warpgroups, 64 rows of C each: 1 or 2.
    pub consumers: u32,
    /// Depth of the shared-memory ring of 64-deep k-tiles.
    pub stages: u32,
    /// Tile rows per raster group (concurrent blocks share B panels); 1 is row-major order.
    pub group_m: u32,
}

impl Schedule {
    /// Threads per block: the consumers and one producer warpgroup.
    pub fn threads(&self) -> u32 {
        128 * (self.consumers + 1)
    }

    /// Rows of C per tile.
    pub fn tile_m(&self) -> u32 {
        64 * self.consumers
    }

    /// Dynamic shared memory: the ring (A and B tiles of 64 two-byte elements, 128 bytes, per row), plus 1024
    /// bytes to align it to the 128-byte swizzle's period.
    pub fn smem_bytes(&self) -> u32 {
        self.stages * (self.tile_m() + self.bn) * 128 + 1024
    }

    /// The `wgmma` candidate computing `spec` with this schedule; the module also holds the SIMT kernel as
    /// [`SIMT16_ENTRY`](optiml_runtime::matmul::SIMT16_ENTRY).
    pub fn candidate(&self, spec: &Spec16) -> Candidate {
        let mut macros: Vec<(&str, Def)> = vec![
            ("OPTIML_BN", self.bn.into()),
            ("OPTIML_CONSUMERS", self.consumers.into()),
            ("OPTIML_STAGES", self.stages.into()),
            ("OPTIML_GROUP_M", self.group_m.into()),
        ];
        macros.extend(spec.macros());
        let source = format!(
            "// @generated by optiml-build {}: matmul {} (wgmma, sm_90a), {}\n{}\n{WGMMA_TEMPLATE}\n{SIMT_TEMPLATE}\n{GEMV_TEMPLATE}",
            env!("CARGO_PKG_VERSION"),
            spec.dtype().name(),
            self.describe(),
            defines(&macros),
        );
        Candidate {
            source,
            entry: "optiml_matmul",
            launch: Launch::Matmul16 {
                elem: spec.elem,
                kernel: Kernel16::Wgmma(Wgmma16 {
                    tile_m: self.tile_m(),
                    tile_n: self.bn,
                    threads: self.threads(),
                    smem_bytes: self.smem_bytes(),
                    trans_a: spec.matmul.trans_a,
                    trans_b: spec.matmul.trans_b,
                }),
            },
            schedule: self.describe(),
        }
    }
}

/// The candidate for `spec` on an architecture older than sm_80: the SIMT kernel as the module's entry (64 × 64
/// tiles, 256 threads, fp32 math on converted values; about 27 TFLOP/s on the H200).
pub fn simt_candidate(spec: &Spec16) -> Candidate {
    let source = format!(
        "// @generated by optiml-build {}: matmul {} (SIMT, fp32 accumulation)\n{}#define OPTIML_SIMT16_ENTRY optiml_matmul\n{SIMT_TEMPLATE}\n{GEMV_TEMPLATE}",
        env!("CARGO_PKG_VERSION"),
        spec.dtype().name(),
        defines(&spec.macros()),
    );
    Candidate {
        source,
        entry: "optiml_matmul",
        launch: Launch::Matmul16 {
            elem: spec.elem,
            kernel: Kernel16::Simt,
        },
        schedule: "SIMT 64x64, 256 threads".into(),
    }
}

/// The candidate for `spec` on sm_80 and newer GPUs without `wgmma`: the `mma.sync` kernel as the module's entry,
/// 128 × 128 × 32 blocks of four 64 × 64 warps; four `cp.async` stages (64 KiB, two blocks per SM on sm_80), three
/// where an SM has 100 KiB (sm_86, sm_89). On the H200 it ran at 0.50–0.55× cuBLAS's `wgmma` kernels
/// (`bench/results/archive/2026-11-30-h200-session10/mma16-summary.txt`): twice TF32, 14× the SIMT kernel.
pub fn mma_candidate(spec: &Spec16, arch: Arch) -> Candidate {
    let (bm, bn, bk, wm, wn) = (128u32, 128u32, 32u32, 64u32, 64u32);
    let stages: u32 = if matches!((arch.major, arch.minor), (8, 6) | (8, 7) | (8, 9)) {
        3
    } else {
        4
    };
    let threads = (bm / wm) * (bn / wn) * 32;
    let smem_bytes = 2 * stages * bk * (bm + bn);
    let mut macros: Vec<(&str, Def)> = vec![
        ("OPTIML_M16_BM", bm.into()),
        ("OPTIML_M16_BN", bn.into()),
        ("OPTIML_M16_BK", bk.into()),
        ("OPTIML_M16_WM", wm.into()),
        ("OPTIML_M16_WN", wn.into()),
        ("OPTIML_M16_STAGES", stages.into()),
    ];
    macros.extend(spec.macros());
    let describe = format!(
        "mma.sync block {bm}x{bn}x{bk}, warp {wm}x{wn}, {threads} threads, {stages} stages"
    );
    let source = format!(
        "// @generated by optiml-build {}: matmul {} (mma.sync), {describe}\n{}\n{MMA_TEMPLATE}\n{GEMV_TEMPLATE}",
        env!("CARGO_PKG_VERSION"),
        spec.dtype().name(),
        defines(&macros),
    );
    Candidate {
        source,
        entry: "optiml_matmul",
        launch: Launch::Matmul16 {
            elem: spec.elem,
            kernel: Kernel16::Mma {
                bm,
                bn,
                threads,
                smem_bytes,
            },
        },
        schedule: describe,
    }
}

/// The candidate for `spec` on `arch`: `wgmma` on sm_90 (the default schedule), `mma.sync` on other GPUs from
/// sm_80 on, the SIMT kernel before.
pub fn default_candidate(spec: &Spec16, arch: Arch) -> Candidate {
    if super::has_wgmma(arch) {
        Schedule::default_for(arch).candidate(spec)
    } else if arch.major >= 8 {
        mma_candidate(spec, arch)
    } else {
        simt_candidate(spec)
    }
}

impl Tunable for Schedule {
    /// `wgmma 128x256, 2 consumers, 4 stages, group 8`.
    fn describe(&self) -> String {
        format!(
            "wgmma {}x{}, {} consumers, {} stages, group {}",
            self.tile_m(),
            self.bn,
            self.consumers,
            self.stages,
            self.group_m
        )
    }

    /// Whether the template supports this combination within the shared memory of a block.
    fn is_valid(&self) -> bool {
        BN.contains(&self.bn)
            && CONSUMERS.contains(&self.consumers)
            && STAGES.contains(&self.stages)
            && GROUP_M.contains(&self.group_m)
            && self.smem_bytes() <= MAX_SMEM
    }

    /// 128 × 256 tiles, two consumer warpgroups, four stages (197632 bytes of shared memory), groups of 8 tile
    /// rows: the prototype that ran at 0.96–1.06× cuBLAS on large shapes in every layout on the H200
    /// (`bench/results/2026-11-30-h200-tensor-core-prototypes.md`).
    fn default_for(_arch: Arch) -> Self {
        Schedule {
            bn: 256,
            consumers: 2,
            stages: 4,
            group_m: 8,
        }
    }

    /// Every schedule the template supports.
    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for bn in BN {
            for consumers in CONSUMERS {
                for stages in STAGES {
                    for group_m in GROUP_M {
                        let s = Schedule {
                            bn,
                            consumers,
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
        out
    }

    /// The 16-bit `wgmma` kernel's transformations: its tile, its ring depth and its raster order. Names and claimed
    /// gains are those of the same moves in the other catalogs.
    fn catalog() -> Vec<Transform<Self>> {
        vec![
            Transform {
                name: "wide-wgmma",
                rationale: "a wider wgmma N reads each 64-row slice of A once per more columns: fewer shared-memory \
                            bytes per MMA",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.10,
                apply: |s| Some(Schedule { bn: s.bn * 2, ..*s }),
            },
            Transform {
                name: "narrow-wgmma",
                rationale: "a narrower tile gives more tiles, filling the machine on problems of fewer tiles than \
                            multiprocessors",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.10,
                apply: |s| Some(Schedule { bn: s.bn / 2, ..*s }),
            },
            Transform {
                name: "second-consumer",
                rationale: "two consumer warpgroups share each loaded stage of B: twice the MMAs per byte loaded",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.10,
                apply: |s| Some(Schedule { consumers: 2, ..*s }),
            },
            Transform {
                name: "one-consumer",
                rationale: "one consumer warpgroup halves the tile's rows: more tiles for small problems",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.05,
                apply: |s| Some(Schedule { consumers: 1, ..*s }),
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
            Transform {
                name: "group-tile-rows",
                rationale: "blocks running at once walk 8 tile rows per column: they share B panels in L2",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.08,
                apply: |s| Some(Schedule { group_m: 8, ..*s }),
            },
            Transform {
                name: "ungroup-tile-rows",
                rationale: "row-major tile order: consecutive blocks share A panels instead",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.01,
                apply: |s| Some(Schedule { group_m: 1, ..*s }),
            },
        ]
    }
}

impl Evaluable for Schedule {
    type Spec = Spec16;
    type Shape = MatmulShape;

    fn candidate(&self, spec: &Spec16) -> Candidate {
        Schedule::candidate(self, spec)
    }

    /// Dense bf16 / fp16 tensor-core throughput is 16× the fp32 FMA rate per SM and clock on Hopper (4096
    /// against 256 FLOPs).
    fn peak_tflops(fp32_tflops: f64) -> f64 {
        16.0 * fp32_tflops
    }

    fn problem(spec: &Spec16, shape: MatmulShape) -> Problem {
        super::problem(&spec.matmul, spec.dtype(), shape)
    }

    fn work(spec: &Spec16, shape: MatmulShape) -> (f64, f64) {
        (shape.flops(), shape.min_bytes_of(&spec.matmul, 2.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use optiml_runtime::matmul::{FALLBACK_SLOT, GEMV_SLOT, SIMT16_ENTRY};

    fn spec(text: &str) -> Spec16 {
        let s = optiml_spec::parse(text).unwrap();
        match &s.family {
            optiml_spec::Family::Matmul(m) => Spec16::new(m, s.dtype).unwrap(),
            optiml_spec::Family::Tensor(_) => unreachable!(),
        }
    }

    #[test]
    fn the_default_is_the_measured_prototype() {
        let s = Schedule::default_for(Arch::new(9, 0));
        assert!(s.is_valid());
        assert_eq!((s.threads(), s.smem_bytes()), (384, 197_632));
        assert!(!Schedule { stages: 5, ..s }.is_valid());
        let all = Schedule::space();
        assert!(all.contains(&s));
        // Stage depths that fit, per tile: 64x64, 128x64 and 64x128 all six; 128x128 up to 6 (five); 64x256
        // up to 5 (four); 128x256 up to 4 (three). Twice over for the two group sizes.
        assert_eq!(all.len(), 2 * (6 + 6 + 6 + 5 + 4 + 3));
        assert!(all.iter().all(|s| s.smem_bytes() <= MAX_SMEM));
    }

    #[test]
    fn the_candidate_carries_the_layout_and_the_fallback() {
        let s = Schedule::default_for(Arch::new(9, 0));
        let c = s.candidate(&spec("batched matmul, f16, A transposed, bias, gelu"));
        assert_eq!(
            c.launch,
            Launch::Matmul16 {
                elem: Half::F16,
                kernel: Kernel16::Wgmma(Wgmma16 {
                    tile_m: 128,
                    tile_n: 256,
                    threads: 384,
                    smem_bytes: 197_632,
                    trans_a: true,
                    trans_b: false,
                }),
            }
        );
        for want in [
            "#define OPTIML_DTYPE OPTIML_DTYPE_F16",
            "#define OPTIML_TRANS_A 1",
            "#define OPTIML_HAS_BIAS 1",
            "#define OPTIML_ACT OPTIML_ACT_GELU",
            "#define OPTIML_GROUP_M 8",
            "OPTIML_SIMT16_ENTRY(",
        ] {
            assert!(c.source.contains(want), "{want}");
        }
        assert_eq!(
            c.launch.companions().get(FALLBACK_SLOT).map(|c| c.entry),
            Some(SIMT16_ENTRY)
        );
        assert_eq!(c.launch.image_arch(Arch::new(9, 0)), Arch::specific(9, 0));
    }

    #[test]
    fn other_architectures_get_mma_sync_or_the_simt_kernel_as_entry() {
        let c = default_candidate(&spec("matmul, bf16"), Arch::new(8, 0));
        assert_eq!(
            c.launch,
            Launch::Matmul16 {
                elem: Half::Bf16,
                kernel: Kernel16::Mma {
                    bm: 128,
                    bn: 128,
                    threads: 128,
                    smem_bytes: 65_536
                }
            }
        );
        assert!(c.source.contains("mma.sync.aligned.m16n8k16"));
        assert!(!c.source.contains("wgmma.mma_async"));
        assert_eq!(c.launch.companions().get(FALLBACK_SLOT), None);
        assert_eq!(
            c.launch.companions().get(GEMV_SLOT).map(|c| c.entry),
            Some("optiml_gemv")
        );
        assert_eq!(c.launch.image_arch(Arch::new(8, 0)), Arch::new(8, 0));
        // 100 KiB per SM: three stages keep two blocks resident.
        assert_eq!(
            default_candidate(&spec("matmul, bf16"), Arch::new(8, 6))
                .launch
                .smem_bytes(),
            49_152
        );
        let old = default_candidate(&spec("matmul, f16"), Arch::new(7, 5));
        assert_eq!(
            old.launch,
            Launch::Matmul16 {
                elem: Half::F16,
                kernel: Kernel16::Simt
            }
        );
        assert!(
            old.source
                .contains("#define OPTIML_SIMT16_ENTRY optiml_matmul\n")
        );
    }
}
