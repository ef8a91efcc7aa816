//! Attention at the spec's own precision: a `tf32` spec on TF32 tensor cores (one product per product, where the
//! exact kernel takes three), a bf16 or f16 spec on 16-bit tensor cores with 16-bit storage
//! ([`super::MMA16_TEMPLATE`]). Both kernels tile the work as the exact 3xTF32 kernel does, so a schedule here is
//! that kernel's tiles ([`Schedule::mma`]) and the search walks them with the same transformations. It is its own
//! type so that an exact spec's search can never reach a kernel that rounds more than the spec allows, and a log
//! of one kind never reads as the other.

use super::{AttentionShape, Kind, MAX_SMEM, Units};
use crate::eval::{Evaluable, Problem};
use crate::experts::{Candidate, Def};
use crate::families::tensor::Extents;
use crate::search::{Transform, Tunable};
use optiml_runtime::{Arch, Launch};
use optiml_spec::DType;
use serde::{Deserialize, Serialize};

/// How a fast kernel tiles the work (the fields of [`super::Schedule`] the tensor-core kernels use, with the
/// same meaning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Query rows per tile.
    pub br: u32,
    /// Keys per chunk.
    pub bc: u32,
    /// Keys per score pass.
    pub sk: u32,
    /// Value features per output tile.
    pub ec: u32,
    /// Query and key features per shared-memory stage of the scores.
    pub dk: u32,
    /// Keys per shared-memory stage of `P v`.
    pub ck: u32,
    /// 16-bit and TF32 programs on sm_90: batch items per round of the staged form ([`Launch::Attention`]: scores,
    /// weights and values through memory, the tiles above its fused kernel's for the calls it cannot take);
    /// 0, the fused kernel alone. Only the search's roots set it (the walk never does).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub staged: u32,
}

/// Batch items per round of the staged form: the workspace holds one round's scores and weights (KernelBench
/// 97: 1.5 MiB an item), which L2 keeps for the next stage when the round is small.
pub const STAGED_ROUNDS: [u32; 4] = [16, 32, 64, 128];

fn is_zero(x: &u32) -> bool {
    *x == 0
}

impl Schedule {
    /// The exact tensor-core schedule with these tiles: its constraints (fragments, registers) are this kernel's.
    pub fn mma(&self) -> super::Schedule {
        super::Schedule {
            units: Units::Tf32x3,
            threads: 256,
            br: self.br,
            bc: self.bc,
            ec: self.ec,
            dk: self.dk,
            ck: self.ck,
            sc: 0,
            oc: 0,
            sk: self.sk,
        }
    }

    /// The tiles of an exact tensor-core schedule.
    fn of_mma(s: super::Schedule) -> Option<Schedule> {
        (s.units == Units::Tf32x3 && s.threads == 256 && s.sc == 0 && s.oc == 0).then_some(
            Schedule {
                br: s.br,
                bc: s.bc,
                sk: s.sk,
                ec: s.ec,
                dk: s.dk,
                ck: s.ck,
                staged: 0,
            },
        )
    }

    /// Dynamic shared memory of the kernel for `kind`: the TF32 kernel's is the exact one's; the 16-bit kernel
    /// keeps its stages in 16 bits (rows 8 elements longer than a stage), the scores and row state in fp32.
    pub fn smem_bytes(&self, kind: Kind) -> u32 {
        match kind {
            Kind::Exact | Kind::Tf32 => self.mma().smem_bytes(),
            Kind::Half(_) => {
                let scores = (self.br + self.sk) * (self.dk + 8);
                let values = self.ck * (self.ec + 8);
                2 * 2 * scores.max(values) + 4 * (self.br * (self.bc + 4) + 3 * self.br)
            }
        }
    }

    /// The candidate computing `shape`'s attention with this schedule, on the kernel its program's kind asks
    /// for (an exact program, which never searches this type, gets the exact 3xTF32 kernel); a staged schedule
    /// gets the staged form, these tiles its fused kernel.
    pub fn candidate(&self, shape: &AttentionShape) -> Candidate {
        let kind = Kind::of(&shape.program);
        if self.staged > 0 && matches!(kind, Kind::Half(_) | Kind::Tf32) {
            return super::staged::candidate(shape, self, kind);
        }
        let mut defs: Vec<(&str, Def)> = vec![
            ("OPTIML_THREADS", 256u32.into()),
            ("OPTIML_BR", self.br.into()),
            ("OPTIML_BC", self.bc.into()),
            ("OPTIML_EC", self.ec.into()),
            ("OPTIML_DK", self.dk.into()),
            ("OPTIML_CK", self.ck.into()),
            ("OPTIML_SK", self.sk.into()),
        ];
        let template = match kind {
            Kind::Exact => super::MMA_TEMPLATE,
            Kind::Tf32 => {
                defs.push(("OPTIML_TF32_ONCE", 1u32.into()));
                super::MMA_TEMPLATE
            }
            Kind::Half(d) => {
                defs.push(("OPTIML_HALF", u32::from(d == DType::F16).into()));
                super::MMA16_TEMPLATE
            }
        };
        let what = format!("{} tensor cores: {}", units(kind), self.describe());
        Candidate {
            source: super::source(shape, &what, &defs, template),
            entry: super::ENTRY,
            launch: Launch::Program(super::launch(shape, 256, self.smem_bytes(kind), self.br)),
            schedule: self.describe(),
        }
    }
}

/// What computes the products of a program of `kind`, for headers.
fn units(kind: Kind) -> &'static str {
    match kind {
        Kind::Exact => "3xTF32",
        Kind::Tf32 => "TF32",
        Kind::Half(DType::F16) => "f16",
        Kind::Half(_) => "bf16",
    }
}

/// The exact schedule's transformation at `I` of its catalog, on these tiles.
fn via<const I: usize>(s: &Schedule) -> Option<Schedule> {
    let t = &super::Schedule::catalog()[I];
    (t.apply)(&s.mma()).and_then(Schedule::of_mma)
}

/// The exact catalog's transformations of the tensor-core tiles: from `longer-score-passes` (2) to
/// `shallower-value-stages` (13). The units and the FMA kernel's registers are not this kernel's choices.
const TILE_TRANSFORMS: std::ops::Range<usize> = 2..14;

impl Tunable for Schedule {
    /// `64 queries, 512-key chunks in 256-key score passes, 256-feature output tiles, stages 16/16`.
    fn describe(&self) -> String {
        let tiles = format!(
            "{} queries, {}-key chunks in {}-key score passes, {}-feature output tiles, stages {}/{}",
            self.br, self.bc, self.sk, self.ec, self.dk, self.ck
        );
        if self.staged > 0 {
            format!(
                "staged through memory, {} items a round (the fused kernel: {tiles})",
                self.staged
            )
        } else {
            tiles
        }
    }

    /// The exact tensor-core kernel's constraints (whole fragments and mma depths, registers, shared memory).
    /// Its register rule is kept though these kernels' fragments are smaller: with stages of 32 features, the
    /// TF32 kernel's widest tiles (64 accumulators) spill, as the exact kernel's do (the NVRTC compile test).
    fn is_valid(&self) -> bool {
        (self.staged == 0 || STAGED_ROUNDS.contains(&self.staged))
            && self.mma().is_valid()
            && self.dk.is_multiple_of(16)
            && self.ck.is_multiple_of(16)
            && self.smem_bytes(Kind::Half(DType::Bf16)) <= MAX_SMEM
    }

    /// The exact kernel's tiles on its architecture (sm_80's on anything older: these kernels need sm_80).
    fn default_for(arch: Arch) -> Self {
        let at = if arch.major >= 8 {
            arch
        } else {
            Arch::new(8, 0)
        };
        Schedule::of_mma(super::Schedule::default_for(at))
            .expect("the default from sm_80 on is a tensor-core schedule")
    }

    fn space() -> Vec<Self> {
        super::Schedule::space()
            .into_iter()
            .filter_map(Schedule::of_mma)
            .filter(Schedule::is_valid)
            .collect()
    }

    fn catalog() -> Vec<Transform<Self>> {
        let applies: [fn(&Schedule) -> Option<Schedule>; 12] = [
            via::<2>, via::<3>, via::<4>, via::<5>, via::<6>, via::<7>, via::<8>, via::<9>,
            via::<10>, via::<11>, via::<12>, via::<13>,
        ];
        super::Schedule::catalog()[TILE_TRANSFORMS]
            .iter()
            .zip(applies)
            .map(|(t, apply)| Transform {
                name: t.name,
                rationale: t.rationale,
                addresses: t.addresses,
                claimed_gain: t.claimed_gain,
                apply,
            })
            .collect()
    }
}

impl Evaluable for Schedule {
    type Spec = AttentionShape;
    type Shape = Extents;

    fn candidate(&self, spec: &AttentionShape) -> Candidate {
        Schedule::candidate(self, spec)
    }

    fn problem(spec: &AttentionShape, shape: Extents) -> Problem {
        <super::Schedule as Evaluable>::problem(spec, shape)
    }

    fn work(spec: &AttentionShape, shape: Extents) -> (f64, f64) {
        <super::Schedule as Evaluable>::work(spec, shape)
    }
}
