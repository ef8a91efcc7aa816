//! fp32-accurate matmuls on the TF32 tensor cores ("3xTF32", issue 17 §3), for plain `f32` specs on sm_90.
//!
//! Every element splits into two TF32 values, `big = rna(x)` and `small = rna(x − big)`, and the product is
//! `small·big + big·small + big·big` (the dropped `small·small` is under 2⁻²² of `|a·b|`): three TF32 products.
//! It is the `wgmma` TF32 template with `OPTIML_TF32X3` (the split inside the kernel, no extra memory traffic)
//! and `OPTIML_PROMOTE_KT` (the tensor core's accumulator added into an fp32 register sum every few k-tiles,
//! because its own accumulation does not round to nearest and its error grows with K). On an H100 the
//! two-consumer 128 × 128 tile promoting every 4 k-tiles ran at 1.72–1.81× cuBLAS SGEMM with a worst error below
//! SGEMM's on every large shape (`bench/results/2026-12-07-h100-tf32x3-in-kernel.md`).
//!
//! It is a schedule choice of a plain `f32` spec, not a precision change: the search offers its schedules as
//! roots beside the SIMT schedules, and the gate holds them to twice the exact SIMT kernel's own error on the
//! same inputs ([`crate::eval::plan::ErrorBound`]). That bound refuses the fast tile at the gate's small-K checks
//! (K = 65, 257), where promotion does not shorten the truncating accumulation and the exact kernel's error is
//! small; the one-consumer tile promoting every 2 passes most draws, at 1.13–1.40× the SIMT kernels
//! (`bench/results/2026-12-07-h100-tf32x3-tune.md`). Keeping the two small products in an accumulator of their
//! own ([`Schedule::split_acc`]) cuts the big accumulator's truncations to a third: on an H100 the bound accepted
//! every such schedule on every draw (30 of 30), at 0.77–0.98× the speed of the same tile with one accumulator
//! (`bench/results/2026-12-07-h100-tf32x3-split-acc.md`), so a plain-f32 search always has 3xTF32 roots the gate
//! lets through.

use super::tf32::{Reads, WGMMA_TEMPLATE, epilogue};
use super::{MatmulShape, WGMMA_SPLIT_K, split_to_fill};
use crate::eval::{Evaluable, Problem};
use crate::experts::{Candidate, Def, Root, defines};
use crate::search::{Bottleneck, Transform, Tunable};
use optiml_runtime::Arch;
use optiml_spec::{DType, MatmulSpec};

/// Values of [`Schedule::qn`]: the accumulator and the promoted sum take `qn / 2` registers each, so only the
/// 128-row `wgmma` leaves room for both.
pub const QN: [u32; 1] = [128];
/// Values of [`Schedule::consumers`].
pub const CONSUMERS: [u32; 2] = [1, 2];
/// Values of [`Schedule::stages`].
pub const STAGES: [u32; 3] = [2, 3, 4];
/// Values of [`Schedule::promote_kt`]: every 2 or 4 k-tiles of 32 (even: the main loop takes pairs). Rarer is
/// not accurate enough: on an H100 (`bench/results/2026-12-07-h100-tf32x3-in-kernel.md`) never promoting left
/// 10–15× the SGEMM error at K = 4096, every 8 k-tiles 3× its relative L2 error, every 4 at most 1.5×.
pub const PROMOTE_KT: [u32; 2] = [2, 4];

/// The most dynamic shared memory a block may use on sm_90 (227 KiB).
const MAX_SMEM: u32 = 227 * 1024;

/// The 3xTF32 kernel's knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// `promote_kt` is what tells a recorded 3xTF32 schedule from a TF32 one (`tf32::Schedule` has no such field and
// refuses unknown ones): a log's schedule names its kernel.
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Rows of the K-major operand per tile (the `wgmma` N).
    pub qn: u32,
    /// Consumer warpgroups, 64 rows of the other operand each.
    pub consumers: u32,
    /// Depth of the shared-memory ring of 32-deep k-tiles (each stage also holds the small parts).
    pub stages: u32,
    /// k-tiles between promotions of the accumulator into the fp32 sum.
    pub promote_kt: u32,
    /// The two small products in an accumulator of their own (`OPTIML_X3_SPLIT_ACC`): the big products'
    /// accumulator then truncates at a third of the k8 steps, which is what limits the error at small K.
    #[serde(default)]
    pub split_acc: bool,
    /// Splits of K across blocks (`OPTIML_SPLIT_K`, [`optiml_runtime::Launch::WgmmaStaged`]): each split's partial sums go to a
    /// workspace that a second launch adds in a fixed order, so a product with fewer tiles than multiprocessors
    /// and a long K fills the GPU. 1: the plain kernel.
    #[serde(default = "one_split")]
    pub split_k: u32,
    /// A `TN` product's A copied K-major into a workspace first (`super::tf32::Reads`); no effect on other
    /// layouts.
    #[serde(default)]
    pub transpose_a: bool,
}

/// The unsplit kernel, what a schedule recorded before splits existed ran.
fn one_split() -> u32 {
    1
}

impl Schedule {
    /// Threads per block: the consumers and one producer warpgroup.
    pub fn threads(&self) -> u32 {
        128 * (self.consumers + 1)
    }

    /// Rows of the other operand per tile (the template's `PW`).
    pub fn p_rows(&self) -> u32 {
        64 * self.consumers
    }

    /// Rows and columns of C per tile for `spec`: the K-major operand's `qn` rows are C's rows where the kernel
    /// computes `Cᵀ` (every layout but `TT`).
    pub fn tile(&self, spec: &MatmulSpec) -> (u32, u32) {
        // (A transposed first keeps `TN` in the swapped orientation.)
        let swap = !(spec.trans_a && spec.trans_b);
        if swap {
            (self.qn, self.p_rows())
        } else {
            (self.p_rows(), self.qn)
        }
    }

    /// Dynamic shared memory for `spec`: the ring of both operands, the ring of Q's small parts, and P's where P
    /// is in shared memory (`NT`: the SS form), plus 1024 bytes of alignment.
    pub fn smem_bytes(&self, spec: &MatmulSpec) -> u32 {
        let small_p = if self.p_in_smem(&Reads::of(spec, self.transpose_a).spec) {
            self.p_rows()
        } else {
            0
        };
        self.stages * (2 * self.qn + self.p_rows() + small_p) * 128 + 1024
    }

    /// The candidate computing `spec` (a plain `f32` matmul) with this schedule.
    pub fn candidate(&self, spec: &MatmulSpec) -> Candidate {
        // As the kernel reads it: a `TN` product's A is transposed into a workspace first.
        let reads = Reads::of(spec, self.transpose_a);
        let kspec = &reads.spec;
        // TMA loads a K-major Q, and P where it lands as it is stored: in registers' boxes, or K-major (`NT`).
        let tma = p_kmajor(kspec) || (!self.split_acc && (!kspec.trans_a || kspec.trans_b));
        let (tile_m, tile_n) = self.tile(spec);
        let mut macros: Vec<(&str, Def)> = vec![
            ("OPTIML_TF32X3", true.into()),
            ("OPTIML_PROMOTE_KT", self.promote_kt.into()),
            ("OPTIML_X3_SPLIT_ACC", self.split_acc.into()),
            ("OPTIML_SS", self.p_in_smem(kspec).into()),
            ("OPTIML_QN", self.qn.into()),
            ("OPTIML_CONSUMERS", self.consumers.into()),
            ("OPTIML_STAGES", self.stages.into()),
            ("OPTIML_PINGPONG", false.into()),
            // Two consumers hold the accumulator, the sum and two sets of big and small fragments: more than
            // the 168 registers a 384-thread block allows each thread without `setmaxnreg`.
            ("OPTIML_SETMAXNREG", (self.consumers == 2).into()),
            ("OPTIML_TMA", tma.into()),
        ];
        if self.split_k > 1 {
            macros.push(("OPTIML_SPLIT_K", true.into()));
        }
        if reads.transpose_a {
            macros.push(("OPTIML_TRANSPOSE_A", true.into()));
        }
        if self.split_acc && self.consumers == 2 {
            // The accumulators and the sum take 192 registers per consumer thread: the most setmaxnreg lends
            // within the 168 · 384 registers the block is launched with (40 · 128 + 2 · 232 · 128). A split's
            // tile decode spills the 40-register producer a little (once per tile); 48 / 232 exceeds the block's
            // registers, and the consumers' setmaxnreg.inc waited forever on an H100.
            macros.push(("OPTIML_PRODUCER_REGS", 40u32.into()));
            macros.push(("OPTIML_CONSUMER_REGS", 232u32.into()));
        }
        macros.extend(epilogue(spec));
        let source = format!(
            "// @generated by optiml-build {}: matmul f32 on tf32 tensor cores, 3xtf32 (wgmma, sm_90a), {}\n{}\n\
             {WGMMA_TEMPLATE}\n{}",
            env!("CARGO_PKG_VERSION"),
            self.describe(),
            defines(&macros),
            super::simt_f32::GEMV_TEMPLATE,
        );
        let launch = reads.launch(
            (tile_m, tile_n, self.threads(), self.smem_bytes(spec)),
            (
                if tma { self.qn } else { 0 },
                tma && !kspec.trans_a,
                tma && !kspec.trans_a && kspec.trans_b,
            ),
            self.split_k,
        );
        Candidate {
            source,
            entry: "optiml_matmul",
            launch,
            schedule: self.describe(),
        }
    }

    /// The root a plain `f32` search on sm_90 evaluates beside its SIMT schedules.
    pub fn root(&self, spec: &MatmulSpec) -> Root {
        Root {
            name: self.describe(),
            // Plain data always serialises.
            schedule: serde_json::to_value(self).unwrap_or_default(),
            candidate: self.candidate(spec),
        }
    }
}

/// The schedules a plain `f32` search on `arch` evaluates as roots beside its SIMT schedules: the default first,
/// then the rest of the space that can pass the gate's exact bound, each unsplit. Eleven evaluations, not a
/// search: the space is too small to need one.
///
/// Left out: the schedules adding the tensor core's accumulator into the fp32 sum only every 4 k-tiles with the
/// small products in the same accumulator. The gate refused every one of their 126 evaluations in the H100 tunes
/// of 2026-12-07 (35 in `bench/results/2026-12-07-h100-tf32x3-tune.md`, 91 in
/// `bench/results/2026-12-07-h100-3xtf32-two-consumer-tunes.md`) at its small-K checks (K = 65 and 257: up to
/// 2.9× the SIMT kernel's relative L2 error, where the bound is 2×): where K is small, promotion does not
/// shorten the tensor core's truncating accumulation, and the exact kernel's own error is small. With the small
/// products apart the same promotion passed 90 of 91 (the two-consumer 128 × 128 tile 34 of 34; it won 12 of
/// those 14 tunes, the other two, K far longer than M and N, going to a split one-consumer tile); one accumulator
/// promoted every 2 passed 39 of 57.
pub fn roots(arch: Arch) -> Vec<Schedule> {
    let default = Schedule::default_for(arch);
    std::iter::once(default)
        .chain(
            Schedule::space()
                .into_iter()
                .filter(|s| *s != default && (s.split_acc || s.promote_kt < 4)),
        )
        .collect()
}

/// [`roots`] for a search of `spec` at `shape`: for a `TN` product each root with A transposed first, then as
/// it is; and where a schedule's tiles leave most multiprocessors idle and K is long
/// ([`Schedule::split_for`]), its split form before the unsplit one: a search that runs out of time has
/// measured the forms the shape favours.
pub fn roots_at(arch: Arch, spec: &MatmulSpec, shape: MatmulShape) -> Vec<Schedule> {
    let plain = roots(arch);
    let unsplit: Vec<Schedule> = if spec.trans_a && !spec.trans_b {
        plain
            .iter()
            .map(|s| Schedule {
                transpose_a: true,
                ..*s
            })
            .chain(plain.iter().copied())
            .collect()
    } else {
        plain
    };
    let split: Vec<Schedule> = unsplit
        .iter()
        .map(|s| Schedule {
            split_k: s.split_for(spec, shape),
            ..*s
        })
        .filter(|s| s.split_k > 1)
        .collect();
    split.into_iter().chain(unsplit).collect()
}

/// Whether P is K-major in memory (`NT`): the template keeps it in shared memory as it is (the SS form).
fn p_kmajor(spec: &MatmulSpec) -> bool {
    !spec.trans_a && spec.trans_b
}

impl Schedule {
    /// The split of K that brings this schedule's grid at `shape` closest to one block per multiprocessor
    /// (the launcher's splits at most: `split_to_fill`).
    pub fn split_for(&self, spec: &MatmulSpec, shape: MatmulShape) -> u32 {
        let (tile_m, tile_n) = self.tile(spec);
        let tiles =
            shape.batch * shape.m.div_ceil(tile_m as usize) * shape.n.div_ceil(tile_n as usize);
        split_to_fill(tiles, shape)
    }

    /// Whether the kernel keeps P in shared memory for `spec` (the SS form): where P is K-major in memory, and
    /// with the small products apart in every layout (the producer transposes an MN-major P), since the second
    /// accumulator leaves no registers for P's fragments.
    fn p_in_smem(&self, spec: &MatmulSpec) -> bool {
        p_kmajor(spec) || self.split_acc
    }
}

impl Tunable for Schedule {
    /// `3xtf32 wgmma 128x128, 2 consumers, 3 stages, promoted every 4 k-tiles`.
    fn describe(&self) -> String {
        let promoted = match self.promote_kt {
            0 => "never promoted".to_string(),
            n => format!("promoted every {n} k-tiles"),
        };
        format!(
            "3xtf32 wgmma {}x{}, {} consumers, {} stages, {promoted}{}{}{}",
            self.qn,
            self.p_rows(),
            self.consumers,
            self.stages,
            if self.split_acc {
                ", small products apart"
            } else {
                ""
            },
            match self.split_k {
                1 => String::new(),
                s => format!(", split k {s}"),
            },
            if self.transpose_a {
                ", A transposed first"
            } else {
                ""
            }
        )
    }

    /// Whether the template supports it in a block's shared memory for every layout (the SS form's second
    /// ring of small parts included) and in the consumers' registers.
    fn is_valid(&self) -> bool {
        QN.contains(&self.qn)
            && CONSUMERS.contains(&self.consumers)
            && STAGES.contains(&self.stages)
            && PROMOTE_KT.contains(&self.promote_kt)
            && WGMMA_SPLIT_K.contains(&self.split_k)
            // Two consumers promoting every 2 k-tiles spill in three of the four layouts (NVRTC 13.0: 16 spill
            // stores at the 168-register cap, where the promotion runs after every pair); every 4 fits, and one
            // consumer fits either way (`nvrtc_compile` checks the whole space).
            && (self.consumers == 1 || self.promote_kt >= 4)
            // A second accumulator fits in the SS form only (NVRTC 13.0: with P's fragments in registers, 230–380
            // spill stores in every layout), and two consumers only with setmaxnreg's 232 registers each (at 216,
            // 32 spill stores): `candidate` asks for them.
            && self.stages * (2 * self.qn + 2 * self.p_rows()) * 128 + 1024 <= MAX_SMEM
    }

    /// 128 × 64 tiles, one consumer, four stages, the accumulator promoted every 2 k-tiles: the schedule that won
    /// 6 of the 7 H100 tunes of 2026-12-07 where the gate's exact bound let a 3xTF32 root through (it refused
    /// every schedule promoting every 4, among them the two-consumer 128 × 128 tile that was the default before,
    /// 1.7× faster than cuBLAS SGEMM but not within twice the SIMT kernel's error at small K).
    fn default_for(_arch: Arch) -> Self {
        Schedule {
            qn: 128,
            consumers: 1,
            stages: 4,
            promote_kt: 2,
            split_acc: false,
            split_k: 1,
            transpose_a: false,
        }
    }

    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for qn in QN {
            for consumers in CONSUMERS {
                for stages in STAGES {
                    for promote_kt in PROMOTE_KT {
                        for split_acc in [false, true] {
                            let s = Schedule {
                                qn,
                                consumers,
                                stages,
                                promote_kt,
                                split_acc,
                                split_k: 1,
                                transpose_a: false,
                            };
                            if s.is_valid() {
                                out.push(s);
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The tile, the ring and how often the accumulator is promoted.
    fn catalog() -> Vec<Transform<Self>> {
        vec![
            Transform {
                name: "one-consumer",
                rationale: "one consumer warpgroup halves the tile's other side: more tiles for small problems",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.05,
                apply: |s| Some(Schedule { consumers: 1, ..*s }),
            },
            Transform {
                name: "second-consumer",
                rationale: "two consumer warpgroups share each split stage of the K-major operand",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.10,
                apply: |s| Some(Schedule { consumers: 2, ..*s }),
            },
            Transform {
                name: "deeper-ring",
                rationale: "one more stage in flight hides more load latency behind the MMAs",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.03,
                apply: |s| {
                    let at = STAGES.iter().position(|&d| d == s.stages)?;
                    STAGES.get(at + 1).map(|&stages| Schedule { stages, ..*s })
                },
            },
            Transform {
                name: "rarer-promotion",
                rationale: "each promotion waits for the MMAs in flight: promoting half as often stalls half as \
                            often, at a larger accumulator (the gate judges the error)",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.03,
                apply: |s| {
                    (s.promote_kt == 2).then_some(Schedule {
                        promote_kt: 4,
                        ..*s
                    })
                },
            },
            Transform {
                name: "small-products-apart",
                rationale: "an accumulator of their own for the two small products: the big products' accumulator \
                            truncates at a third of the k8 steps (the error the gate's bound judges at small K), at \
                            the cost of P's fragments (P goes through shared memory)",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.0,
                apply: |s| {
                    (!s.split_acc).then_some(Schedule {
                        split_acc: true,
                        ..*s
                    })
                },
            },
            Transform {
                name: "one-accumulator",
                rationale: "all three products in one accumulator: P's fragments back in registers where it is \
                            MN-major (faster loads), at three times the truncations",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.1,
                apply: |s| {
                    s.split_acc.then_some(Schedule {
                        split_acc: false,
                        ..*s
                    })
                },
            },
            Transform {
                name: "closer-promotion",
                rationale: "a smaller accumulator truncates less at each k8 step: promoting twice as often lowers \
                            the error where the gate's bound is close",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.0,
                apply: |s| {
                    (s.promote_kt == 4).then_some(Schedule {
                        promote_kt: 2,
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

    /// As the TF32 kernel's: the split the launcher runs at `shape`, and A transposed first only in a `TN`
    /// product.
    fn as_launched(&self, spec: &MatmulSpec, shape: MatmulShape) -> Self {
        Schedule {
            split_k: super::launched_split(self.split_k, shape),
            transpose_a: Reads::of(spec, self.transpose_a).transpose_a,
            ..*self
        }
    }

    fn candidate(&self, spec: &MatmulSpec) -> Candidate {
        Schedule::candidate(self, spec)
    }

    /// Three TF32 products per fp32 one: a third of the TF32 peak, 8 / 3 of the fp32 FMA rate.
    fn peak_tflops(fp32_tflops: f64) -> f64 {
        8.0 / 3.0 * fp32_tflops
    }

    fn problem(spec: &MatmulSpec, shape: MatmulShape) -> Problem {
        super::problem(spec, DType::F32, shape)
    }

    fn work(spec: &MatmulSpec, shape: MatmulShape) -> (f64, f64) {
        (shape.flops(), shape.min_bytes(spec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use optiml_runtime::Launch;

    fn spec(trans_a: bool, trans_b: bool) -> MatmulSpec {
        match optiml_spec::parse("batched matmul, f32").unwrap().family {
            optiml_spec::Family::Matmul(m) => MatmulSpec {
                trans_a,
                trans_b,
                ..m
            },
            optiml_spec::Family::Tensor(_) => unreachable!(),
        }
    }

    #[test]
    fn two_consumers_split_in_the_kernel_and_fit_every_layout() {
        let s = Schedule {
            consumers: 2,
            stages: 3,
            promote_kt: 4,
            ..Schedule::default_for(Arch::new(9, 0))
        };
        assert!(s.is_valid());
        assert!(Schedule::space().contains(&s));
        assert!(Schedule::space().contains(&Schedule::default_for(Arch::new(9, 0))));
        let nn = s.candidate(&spec(false, false));
        for line in [
            "#define OPTIML_TF32X3 1",
            "#define OPTIML_PROMOTE_KT 4",
            "#define OPTIML_SETMAXNREG 1",
            "#define OPTIML_TMA 1",
        ] {
            assert!(nn.source.contains(line), "{line}");
        }
        // NN keeps P in registers: one more ring (Q's small parts); NT keeps it in shared memory: two more.
        assert_eq!(
            s.smem_bytes(&spec(false, false)),
            3 * (128 + 128 + 128) * 128 + 1024
        );
        assert_eq!(s.smem_bytes(&spec(false, true)), 3 * 4 * 128 * 128 + 1024);
        for (a, b) in [(false, false), (false, true), (true, false), (true, true)] {
            let (Launch::Wgmma { smem_bytes, .. } | Launch::WgmmaStaged { smem_bytes, .. }) =
                s.candidate(&spec(a, b)).launch
            else {
                panic!("not a wgmma launch");
            };
            assert!(smem_bytes <= MAX_SMEM);
        }
        // Four stages of the SS form do not fit; with one consumer they do.
        assert!(!Schedule { stages: 4, ..s }.is_valid());
        assert!(
            Schedule {
                stages: 4,
                consumers: 1,
                ..s
            }
            .is_valid()
        );
    }

    #[test]
    fn the_roots_are_the_default_then_the_schedules_that_can_pass_the_bound() {
        let roots = roots(Arch::new(9, 0));
        assert_eq!(roots[0], Schedule::default_for(Arch::new(9, 0)));
        // The space less its single-accumulator schedules promoting every 4 (three one-consumer rings, two
        // two-consumer ones), which never pass the gate's bound.
        assert_eq!(
            (Schedule::space().len(), roots.len()),
            (16, 11),
            "{roots:?}"
        );
        assert!(roots.iter().all(|s| s.split_acc || s.promote_kt == 2));
        assert!(roots.iter().any(|s| s.consumers == 2 && s.split_acc));
        assert!(roots.iter().all(|s| s.is_valid()));
        assert!(roots.iter().any(|s| s.promote_kt == 2));
        let distinct: std::collections::HashSet<_> = roots.iter().collect();
        assert_eq!(distinct.len(), roots.len());
        assert!(roots.iter().any(|s| s.consumers == 1) && roots.iter().any(|s| s.stages == 4));
    }

    #[test]
    fn few_tiles_and_a_long_k_split_towards_one_block_per_multiprocessor() {
        let hopper = Arch::new(9, 0);
        let (nn, tt) = (spec(false, false), spec(true, true));
        let at = |batch, m, n, k| MatmulShape { batch, m, n, k };
        let one = Schedule::default_for(hopper);
        let two = Schedule {
            consumers: 2,
            promote_kt: 4,
            ..one
        };
        // KernelBench's large K: 8 tiles of 128 × 64 (4 of 128 × 128) fill 128 of the 132 multiprocessors.
        assert_eq!(one.split_for(&nn, at(1, 256, 256, 524_288)), 16);
        assert_eq!(two.split_for(&nn, at(1, 256, 256, 524_288)), 32);
        // The tile's orientation: TT puts the 64 rows along M.
        assert_eq!(one.tile(&tt), (64, 128));
        assert_eq!(one.split_for(&tt, at(1, 64, 1024, 65_536)), 16);
        assert_eq!(one.split_for(&nn, at(1, 64, 1024, 65_536)), 8);
        // Tiles that fill the GPU, and ranges the launcher would shorten below 128, stay whole.
        assert_eq!(one.split_for(&nn, at(1, 4096, 4096, 4096)), 1);
        assert_eq!(one.split_for(&nn, at(1, 256, 256, 1024)), 8);
        assert_eq!(one.split_for(&nn, at(1, 256, 256, 200)), 1);
        // Roots at a deep shape: the split forms first, then every unsplit root.
        let roots = roots_at(hopper, &nn, at(1, 256, 256, 65_536));
        assert_eq!(roots.len(), 2 * super::roots(hopper).len());
        assert_eq!(roots[0], Schedule { split_k: 16, ..one });
        assert!(roots.iter().all(|s| s.is_valid()));
        assert_eq!(
            roots_at(hopper, &nn, at(1, 4096, 4096, 4096)),
            super::roots(hopper)
        );
        // The split form compiles in the split pass and launches with its reduction.
        let split = roots[0].candidate(&nn);
        assert!(split.source.contains("#define OPTIML_SPLIT_K 1"));
        assert!(matches!(
            split.launch,
            Launch::WgmmaStaged { split_k: 16, .. }
        ));
        assert!(
            split
                .launch
                .companions()
                .get(optiml_runtime::matmul::REDUCE_SLOT)
                .is_some()
        );
        assert!(
            !one.candidate(&nn)
                .source
                .contains("#define OPTIML_SPLIT_K 1")
        );
        assert!(
            split.schedule.ends_with(", split k 16"),
            "{}",
            split.schedule
        );
        // A TN product's roots: each with A transposed first, then as it is.
        let tn = spec(true, false);
        let roots = roots_at(hopper, &tn, at(1, 4096, 4096, 4096));
        assert_eq!(roots.len(), 2 * super::roots(hopper).len());
        assert!(roots[0].transpose_a && !roots.last().unwrap().transpose_a);
        let first = roots[0].candidate(&tn);
        assert!(matches!(
            first.launch,
            Launch::WgmmaStaged {
                transpose_a: true,
                split_k: 1,
                ..
            }
        ));
        assert!(first.schedule.ends_with(", A transposed first"));
        assert_eq!(
            roots[0].candidate(&nn).launch,
            one.candidate(&nn).launch,
            "no effect on NN"
        );
    }

    #[test]
    fn a_recorded_schedule_names_its_kernel() {
        let x3 = serde_json::to_value(Schedule::default_for(Arch::new(9, 0))).unwrap();
        assert!(serde_json::from_value::<super::super::tf32::Schedule>(x3.clone()).is_err());
        let tf32 = serde_json::to_value(super::super::tf32::Schedule::default_for(Arch::new(9, 0)))
            .unwrap();
        assert!(serde_json::from_value::<Schedule>(tf32).is_err());
        let root = Schedule::default_for(Arch::new(9, 0)).root(&spec(false, false));
        assert_eq!(root.schedule, x3);
        assert_eq!(
            root.name,
            "3xtf32 wgmma 128x64, 1 consumers, 4 stages, promoted every 2 k-tiles"
        );
    }
}
