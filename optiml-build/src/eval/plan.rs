//! The TESTPLAN (design.md §4), what every family's gate shares: the input distributions, the tolerances by
//! output type, the plan's sizes, and the running comparison of outputs with the float64 reference. Each family
//! says which sizes and what reference (`crate::families`); everything here is pure host code, tested without a
//! GPU.

pub use crate::search::splitmix;
use optiml_spec::{DType, Precision};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How test inputs are drawn; the worker's trusted fill kernel implements each one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Distribution {
    /// Uniform on (−1, 1).
    Uniform,
    /// Standard normal.
    Normal,
    /// Student's t with 3 degrees of freedom, clipped at ±1e4: rare huge values, where a kernel that drops or
    /// double-counts a term shows up at once.
    HeavyTailed,
    /// 3 + 0.001·N(0, 1): rows whose variance is a millionth of their mean square, where a one-pass variance
    /// cancels to nothing.
    NearConstant,
    /// 1000·N(0, 1): `exp` of these overflows fp32 unless the row maximum is subtracted first.
    Large,
    /// exp(2·N(0, 1)), log-normal: positive values over about ten orders of magnitude, for programs that take the
    /// logarithm or the square root of an input (a KL divergence of probabilities).
    Positive,
}

impl Distribution {
    /// The code the fill kernel takes.
    pub fn code(self) -> i32 {
        match self {
            Distribution::Uniform => 0,
            Distribution::Normal => 1,
            Distribution::HeavyTailed => 2,
            Distribution::NearConstant => 3,
            Distribution::Large => 4,
            Distribution::Positive => 5,
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Distribution::Uniform => "uniform",
            Distribution::Normal => "normal",
            Distribution::HeavyTailed => "heavy-tailed",
            Distribution::NearConstant => "near-constant",
            Distribution::Large => "large",
            Distribution::Positive => "positive",
        })
    }
}

/// Tolerances by output type and precision.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    /// ‖out − ref‖₂ / ‖ref‖₂ must not exceed this.
    pub rel_l2: f64,
    /// |out − ref| must not exceed this times the element's magnitude bound Σ|terms| (the scale a correctly
    /// rounded dot product's error is proportional to).
    pub scaled_abs: f64,
    /// An absolute allowance on top of the scaled bound: the output type's finest spacing near zero, where
    /// relative rounding stops (fp16's subnormals are 2⁻²⁴ apart; fp32's and bf16's spacing there is far below
    /// anything measurable, so 0 leaves the smallest fp32 normal as the floor).
    #[serde(default)]
    pub abs: f64,
    /// Units of fp32 rounding (2⁻²⁴) of each element's error scale that the relative L2 error forgives: an
    /// element counts there with `max(0, |out − ref| − forgive · 2⁻²⁴ · scale)`. The scale is the float64
    /// interpreter's first-order bound on an f32 evaluation's error, so an honest kernel lands within about one
    /// rounding of it; where that is far above the element (a layer norm of near-constant rows divides the
    /// rounding of an fp32 mean of 3.0 by a standard deviation of 0.003), the element's own rounding is not
    /// the kernel's fault. Well-conditioned elements (scale near |ref|) are barely affected: 2 roundings is
    /// 1.2e-7 of them against fp32's L2 bound of 1e-5. 0 (the default of a configured tolerance): nothing.
    #[serde(default)]
    pub forgive: f64,
}

impl Tolerance {
    /// fp32 arithmetic (design.md §4: ‖out−ref‖/‖ref‖ ≤ 1e-5).
    pub const F32: Tolerance = Tolerance {
        rel_l2: 1e-5,
        scaled_abs: 1e-5,
        abs: 0.0,
        forgive: 2.0,
    };

    /// TF32 tensor cores with fp32 accumulation. Each product's operands are rounded to 10 mantissa bits, one
    /// to nearest (≤ 2⁻¹¹ relative) and one possibly by truncation (< 2⁻¹⁰: `wgmma` reads the top 19 bits of a
    /// shared-memory fp32 operand), so every term is off by less than 1.5e-3 of its magnitude, and an element
    /// by less than that of Σ|terms| plus fp32 accumulation. Truncation is biased, so the errors do not average
    /// out in the L2 norm either (the prototypes measured up to 8.3e-4 on normal inputs).
    pub const TF32: Tolerance = Tolerance {
        rel_l2: 2e-3,
        scaled_abs: 2e-3,
        abs: 0.0,
        forgive: 0.0,
    };

    /// TF32 tensor cores on inputs TF32 holds exactly (10 mantissa bits): every product is then exact, so an
    /// honest kernel's error is fp32 accumulation's alone (a relative L2 error near 1e-7), while a kernel that
    /// rounds its operands further, to bf16's 7 bits, stays near 1.6e-3, under [`Tolerance::TF32`]'s 2e-3 on
    /// ordinary inputs. Elements keep TF32's bound: they need not average out.
    pub const TF32_EXACT_INPUTS: Tolerance = Tolerance {
        rel_l2: 1e-4,
        scaled_abs: 2e-3,
        abs: 0.0,
        forgive: 0.0,
    };

    /// [`Tolerance::forgive`] as a fraction of an element's scale (what the GPU comparisons take).
    pub fn forgive_abs(&self) -> f64 {
        self.forgive * Comparison::ROUNDING
    }

    /// The tolerance of an fp32 output computed at `precision`.
    pub fn for_precision(precision: Precision) -> Tolerance {
        match precision {
            Precision::Exact | Precision::Fma => Tolerance::F32,
            Precision::Tf32 => Tolerance::TF32,
        }
    }

    /// bf16 operands and output, fp32 accumulation. The inputs are exact (the worker generates values bf16
    /// holds) and their products are exact in fp32; the output is rounded once to 8 significant bits, up to
    /// 2⁻⁸ ≈ 3.9e-3 of |out| (RMS about 2.3e-3), plus the accumulation's few fp32 ulps of Σ|terms|. Elements
    /// get twice the rounding; the relative L2 error, which averages it, a little under.
    pub const BF16: Tolerance = Tolerance {
        rel_l2: 4e-3,
        scaled_abs: 8e-3,
        abs: 0.0,
        forgive: 0.0,
    };

    /// fp16 operands and output: as [`Tolerance::BF16`] with 11 significant bits, 2⁻¹¹ ≈ 4.9e-4 of |out|
    /// (RMS about 2.8e-4), and below 2⁻¹⁴ (fp16's subnormals) up to half a spacing of 2⁻²⁴ absolute: the
    /// H200 gate saw a correct 2.92e-5 output off by exactly 2⁻²⁵.
    pub const F16: Tolerance = Tolerance {
        rel_l2: 5e-4,
        scaled_abs: 1e-3,
        abs: 1.0 / 16_777_216.0,
        forgive: 0.0,
    };

    /// The tolerance of an output of `dtype` elements computed at `precision`.
    pub fn for_dtype(dtype: DType, precision: Precision) -> Tolerance {
        match dtype {
            DType::F32 => Tolerance::for_precision(precision),
            DType::Bf16 => Tolerance::BF16,
            DType::F16 => Tolerance::F16,
        }
    }

    /// fp32 maps through transcendental functions, one output per input: a few ulps of the largest value of the
    /// check (transcendentals in fp32 are not correctly rounded; the scale keeps outputs near zero, where
    /// relative error means nothing, from failing).
    pub const F32_MAP: Tolerance = Tolerance {
        rel_l2: 1e-6,
        scaled_abs: 2e-6,
        abs: 0.0,
        forgive: 0.0,
    };
}

/// What every candidate of one kernel must pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestPlan {
    /// Problem sizes checked element by element against the float64 reference, each with fresh inputs, in the
    /// terms of the kernel's family (its gate reads them).
    pub sizes: Vec<Vec<usize>>,
    /// Distributions, cycled over the sizes (and the dispatch size).
    pub distributions: Vec<Distribution>,
    /// Tolerances.
    pub tolerance: Tolerance,
    /// Elements of a tensor program's dispatch size compared with the host's reference where the GPU's cannot
    /// check every element (its cost or memory), after every element was checked to be written (finite);
    /// corners and edges are always among them. (A matmul's dispatch shape is always compared on every element,
    /// against a float64 reference on the GPU.)
    pub dispatch_samples: usize,
    /// A trusted kernel whose own error on each check's inputs, times [`ErrorBound::FACTOR`], bounds the
    /// candidate's (within the plan's tolerance): a plain `f32` matmul's tensor-core schedules are held to the
    /// exact SIMT kernel's accuracy, not only to fp32's tolerance. Families whose gates do not read it ignore it.
    #[serde(default)]
    pub bound: Option<ErrorBound>,
}

/// The kernel a [`TestPlan::bound`] measures: a family default the parent compiled, loaded by the worker from its
/// PTX (trusted, as the float64 references are) and launched on each check's inputs before the candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBound {
    /// What it is, in rejections (`the exact SIMT kernel`).
    pub name: String,
    /// Its PTX.
    pub ptx: String,
    /// Its entry point.
    pub entry: String,
    /// How the runtime launches it.
    pub launch: optiml_runtime::Launch,
}

impl ErrorBound {
    /// How many times the bounding kernel's error a candidate may make (issue 17: 3xTF32 within 2× of SIMT).
    pub const FACTOR: f64 = 2.0;

    /// The least error the bound allows, relative to an element's magnitude and over a check's L2 norm: eight
    /// units of fp32 rounding (2⁻²¹). Below that the ratio of two correct kernels' errors measures their rounding
    /// orders, not their accuracy: on a 65-term reduction (an H100, 2026-12-07) the SIMT kernel's worst element
    /// was off by 2.9 units and the 3xTF32 kernel's, whose tensor cores truncate each k8 step's sum, by 6.9; from
    /// K = 1024 on the 3xTF32 kernel is the more accurate of the two.
    pub const FLOOR: f64 = 1.0 / 2_097_152.0;

    /// `tol` tightened to [`FACTOR`](Self::FACTOR) times the bounding kernel's measured errors (`worst`, the
    /// largest error relative to its element's magnitude; `rel_l2`), never below [`FLOOR`](Self::FLOOR) and never
    /// looser than `tol`.
    pub fn tighten(tol: &Tolerance, worst: f64, rel_l2: f64) -> Tolerance {
        let bound = |measured: f64, plan: f64| (Self::FACTOR * measured).max(Self::FLOOR).min(plan);
        let rel_l2 = bound(rel_l2, tol.rel_l2);
        Tolerance {
            rel_l2,
            scaled_abs: bound(worst, tol.scaled_abs),
            abs: tol.abs,
            // A measured L2 error is raw, so a bound built from it compares raw errors (forgiving nothing).
            forgive: if rel_l2 < tol.rel_l2 {
                0.0
            } else {
                tol.forgive
            },
        }
    }
}

impl TestPlan {
    /// A plan checking `sizes` with every distribution, 4096 sampled elements of the dispatch size.
    pub fn new(sizes: Vec<Vec<usize>>, tolerance: Tolerance) -> Self {
        TestPlan {
            sizes,
            distributions: vec![
                Distribution::Uniform,
                Distribution::Normal,
                Distribution::HeavyTailed,
            ],
            tolerance,
            dispatch_samples: 4096,
            bound: None,
        }
    }

    /// The distribution check number `i` uses.
    pub fn distribution(&self, i: usize) -> Distribution {
        self.distributions
            .get(i % self.distributions.len().max(1))
            .copied()
            .unwrap_or(Distribution::Uniform)
    }
}

/// Running comparison of outputs against references.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    /// Σ (out − ref)² over the conditioned elements: what [`Comparison::rel_l2`] measures (of sums a GPU
    /// comparison adds, only their forgiven form is known: [`Comparison::add_sums`]).
    diff2: f64,
    /// Σ of the same errors less the tolerance's forgiven rounding ([`Tolerance::forgive`]): what
    /// [`Comparison::finish`] judges.
    excess2: f64,
    ref2: f64,
    checked: usize,
    /// The largest error relative to its element's magnitude (the scaled bound's measure).
    worst: f64,
    /// The first failing element, with why.
    pub failure: Option<String>,
}

impl Comparison {
    /// The smallest |reference| / magnitude for an element to count in the relative L2 error: 2⁻¹⁰, at least
    /// 10 of fp32's 24 bits left after cancellation.
    const CONDITIONED: f64 = 1.0 / 1024.0;
    /// One fp32 rounding (2⁻²⁴), the unit of [`Tolerance::forgive`].
    const ROUNDING: f64 = 1.0 / 16_777_216.0;

    /// Compares one element. NaN or infinity never passes; the scaled bound allows a few ulps of the largest
    /// term (plus the smallest normal, so an exact zero may come out as a denormal).
    pub fn check(&mut self, tol: &Tolerance, at: &dyn Fn() -> String, out: f32, r: f64, mag: f64) {
        self.checked += 1;
        if self.failure.is_some() {
            return;
        }
        if !out.is_finite() {
            self.failure = Some(format!(
                "{} is {out} (expected {r:.6e}): not written, or overflowed",
                at()
            ));
            return;
        }
        let d = (out as f64 - r).abs();
        // An element whose value is far below the magnitude of its terms (cancellation, or an activation that
        // squashes it, as gelu does below −5) has lost most of its bits before the kernel's rounding: its
        // relative error measures that conditioning, not the kernel (on the H200, a correct gelu epilogue
        // failed the 1×1×1×1 check at relative error 1 on an output of 1e-9 from terms of 6). Such elements
        // are held to the scaled bound below only.
        // Likewise an element so small that the output type's absolute spacing, not its relative rounding,
        // bounds it: fp16's subnormals, and any reference below fp32's smallest normal, which the kernel may
        // flush to zero (on the H200, a correct sigmoid of -101 gave 0 against 1.4e-44, relative error 1).
        if r.abs() >= Self::CONDITIONED * mag
            && tol.scaled_abs * r.abs() >= tol.abs
            && r.abs() >= f32::MIN_POSITIVE as f64
        {
            let excess = (d - tol.forgive * Self::ROUNDING * mag.max(r.abs())).max(0.0);
            self.diff2 += d * d;
            self.excess2 += excess * excess;
            self.ref2 += r * r;
        }
        let scale = mag.max(r.abs());
        if scale > 0.0 {
            self.worst = self.worst.max(d / scale);
        }
        let bound = tol.scaled_abs * scale + tol.abs.max(f32::MIN_POSITIVE as f64);
        if d > bound {
            self.failure = Some(format!(
                "{} is {out:.8e}, expected {r:.8e} (error {d:.3e} > bound {bound:.3e})",
                at()
            ));
        }
    }

    /// Adds sums computed elsewhere (a GPU comparison of `checked` elements, none failing, by the same rule
    /// with the same tolerance): the conditioned elements' squared error less the forgiven rounding, and their
    /// squared reference.
    pub fn add_sums(&mut self, excess2: f64, ref2: f64, checked: usize) {
        self.diff2 += excess2;
        self.excess2 += excess2;
        self.ref2 += ref2;
        self.checked += checked;
    }

    /// Checks an element that must be exactly zero (a triangular product's other triangle): any other value,
    /// however small, fails.
    pub fn check_zero(&mut self, at: &dyn Fn() -> String, out: f32) {
        self.checked += 1;
        if self.failure.is_none() && out != 0.0 {
            self.failure = Some(format!(
                "{} is {out:.8e}, expected exactly 0 (outside the triangle)",
                at()
            ));
        }
    }

    /// The largest error seen relative to its element's magnitude (Σ|terms|, or |reference| where larger).
    pub fn worst_scaled(&self) -> f64 {
        self.worst
    }

    /// ‖out − ref‖₂ / ‖ref‖₂ over the conditioned elements so far (0 when there are none).
    pub fn rel_l2(&self) -> f64 {
        if self.ref2 > 0.0 {
            (self.diff2 / self.ref2).sqrt()
        } else {
            0.0
        }
    }

    /// The verdict over everything checked: the first element failure, or the relative L2 error.
    ///
    /// # Errors
    /// Why the outputs are wrong.
    pub fn finish(&self, tol: &Tolerance) -> Result<usize, String> {
        if let Some(f) = &self.failure {
            return Err(f.clone());
        }
        if self.ref2 > 0.0 {
            let rel = (self.excess2 / self.ref2).sqrt();
            if rel > tol.rel_l2 {
                let beyond = if tol.forgive > 0.0 {
                    format!(
                        " (beyond {} roundings of each element's scale)",
                        tol.forgive
                    )
                } else {
                    String::new()
                };
                return Err(format!(
                    "relative L2 error {rel:.3e}{beyond} over {} elements exceeds {:.1e}",
                    self.checked, tol.rel_l2
                ));
            }
        } else if self.diff2 > 0.0 {
            return Err("the reference is all zeros and the output is not".into());
        }
        Ok(self.checked)
    }
}

/// Rows and columns of an m × n output whose every crossing is compared: about √count of each, always the
/// first, middle and last, the others drawn from `seed`.
pub fn sample_grid(m: usize, n: usize, count: usize, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let side = (count as f64).sqrt().ceil().max(3.0) as usize;
    let pick = |len: usize, salt: u64| -> Vec<usize> {
        if len == 0 {
            return Vec::new();
        }
        let mut out = vec![0, len / 2, len - 1];
        let mut state = seed ^ salt;
        let mut tries = 0;
        while out.len() < side.min(len) && tries < 16 * side {
            tries += 1;
            state = splitmix(state);
            let v = (state % len as u64) as usize;
            if !out.contains(&v) {
                out.push(v);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    };
    (pick(m, 0x5157), pick(n, 0xc015))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_rejects_nan_large_errors_and_accepts_rounding() {
        let tol = Tolerance::F32;
        let at = || "x".to_string();
        let mut ok = Comparison::default();
        ok.check(&tol, &at, 1.000_000_1, 1.0, 1.0);
        ok.check(&tol, &at, 0.0, 0.0, 0.0);
        assert_eq!(ok.finish(&tol), Ok(2));
        let mut nan = Comparison::default();
        nan.check(&tol, &at, f32::NAN, 1.0, 1.0);
        assert!(nan.finish(&tol).unwrap_err().contains("NaN"));
        let mut off = Comparison::default();
        off.check(&tol, &at, 1.001, 1.0, 1.0);
        assert!(off.finish(&tol).is_err());
        let mut zeros = Comparison::default();
        zeros.check(&tol, &at, 1e-30, 0.0, 0.0);
        assert!(zeros.finish(&tol).is_err());
        // gelu(-5.9) from terms of magnitude 6: fp32's 1 + erf(x/√2) cancels to nothing, within the scaled
        // bound, and the relative L2 error of such an element says nothing about the kernel.
        let mut squashed = Comparison::default();
        squashed.check(&tol, &at, 0.0, -1.06e-8, 6.0);
        assert_eq!(squashed.finish(&tol), Ok(1));
        // sigmoid(-101): the reference is an fp32 denormal, the kernel's exp overflowed to a flushed zero.
        let mut denormal = Comparison::default();
        denormal.check(&tol, &at, 0.0, 1.4e-44, 1.4e-44);
        assert_eq!(denormal.finish(&tol), Ok(1));
        // Well-conditioned elements still count: 3e-6 too much on each of many elements of magnitude 1.
        let mut drift = Comparison::default();
        for _ in 0..100 {
            drift.check(&tol, &at, 1.0 + 9e-6, 1.0, 1.0);
        }
        drift.check(&tol, &at, 0.0, -1.06e-8, 6.0);
        assert!(drift.finish(&tol).is_ok());
        let mut drift = Comparison::default();
        for _ in 0..100 {
            drift.check(&tol, &at, 1.0 + 2e-5, 1.0, 3.0);
        }
        assert!(drift.finish(&tol).unwrap_err().contains("relative L2"));
    }

    /// KernelBench 40's failure on an H100 (2026-12-07): a layer norm of near-constant rows (3 + 1e-3·N(0, 1),
    /// eps 1e-5, an affine weight near 3) scales the rounding of the fp32 mean by 3 / 0.0033, so an element
    /// near 6 whose error scale is about 6000 is off by about 1e-4 when the mean is correctly rounded: a
    /// relative L2 error near 1.7e-5, over fp32's 1e-5, from no fault of the kernel. Forgiving two roundings of
    /// the scale passes it, and the measure (what an error bound is built from) still sees the raw error; a
    /// kernel off by 2e-5 on well-conditioned elements, or by a hundred roundings of the scale, still fails.
    #[test]
    fn the_relative_l2_error_forgives_the_rounding_an_elements_scale_carries() {
        let at = || "x".to_string();
        let run = |tol: &Tolerance, out: f32, r: f64, mag: f64| {
            let mut c = Comparison::default();
            for _ in 0..100 {
                c.check(tol, &at, out, r, mag);
            }
            c
        };
        let ln = run(&Tolerance::F32, 6.0001, 6.0, 6000.0);
        assert!(ln.finish(&Tolerance::F32).is_ok());
        assert!(ln.rel_l2() > 1.6e-5, "{}", ln.rel_l2());
        let raw = Tolerance {
            forgive: 0.0,
            ..Tolerance::F32
        };
        assert!(run(&raw, 6.0001, 6.0, 6000.0).finish(&raw).is_err());
        let far = run(&Tolerance::F32, 6.006, 6.0, 6000.0);
        assert!(
            far.finish(&Tolerance::F32)
                .unwrap_err()
                .contains("beyond 2 roundings")
        );
        assert!(
            run(&Tolerance::F32, 3.00006, 3.0, 3.0)
                .finish(&Tolerance::F32)
                .is_err()
        );
        // Bounds measured from a trusted kernel compare raw errors.
        assert_eq!(
            ErrorBound::tighten(&Tolerance::F32, 1e-7, 1e-7).forgive,
            0.0
        );
    }

    /// A comparison measures what it judges: the largest error relative to its element's magnitude, and the
    /// relative L2 error; the bound is twice the measured errors, at least eight fp32 roundings, at most the plan's.
    #[test]
    fn a_bound_is_twice_the_measured_error_within_the_plan() {
        let eps = f32::EPSILON;
        let at = || "x".to_string();
        // One element off by 16 ulps of 1 (magnitude 2), one exact (magnitude 4).
        let compare = |tol: &Tolerance, ulps: f32| {
            let mut cmp = Comparison::default();
            cmp.check(tol, &at, 1.0 + ulps * eps, 1.0, 2.0);
            cmp.check(tol, &at, -2.0, -2.0, 4.0);
            cmp
        };
        let measured = compare(&Tolerance::F32, 16.0);
        let d = 16.0 * eps as f64;
        assert_eq!(measured.worst_scaled(), d / 2.0);
        assert!((measured.rel_l2() - d / 5f64.sqrt()).abs() < 1e-12);
        let tol = ErrorBound::tighten(&Tolerance::F32, measured.worst_scaled(), measured.rel_l2());
        assert_eq!(tol.scaled_abs, d);
        // An output up to twice as far off as the measured kernel's passes; further off, it fails.
        assert!(compare(&tol, 24.0).finish(&tol).is_ok());
        assert!(compare(&tol, 48.0).finish(&tol).is_err());
        // Below the floor (eight fp32 roundings) the floor; above the plan, the plan.
        assert_eq!(
            ErrorBound::tighten(&Tolerance::F32, 0.0, 0.0).rel_l2,
            ErrorBound::FLOOR
        );
        assert_eq!(
            ErrorBound::tighten(&Tolerance::F32, 1e-3, 1e-3),
            Tolerance::F32
        );
    }

    #[test]
    fn sixteen_bit_outputs_are_held_to_their_rounding() {
        let at = || "x".to_string();
        let check = |tol: &Tolerance, out: f32, r: f64| {
            let mut c = Comparison::default();
            c.check(tol, &at, out, r, r.abs());
            c.finish(tol).is_ok()
        };
        // bf16 rounds 1 + 2⁻⁹ to 1; fp16 would not, and fp32's tolerance rejects bf16's rounding.
        assert!(check(&Tolerance::BF16, 1.0, 1.0 + 1.0 / 256.0 / 2.0));
        assert!(!check(&Tolerance::BF16, 1.0, 1.01));
        assert!(!check(&Tolerance::F16, 1.0, 1.0 + 1.0 / 512.0));
        assert!(!check(&Tolerance::F32, 1.0, 1.0 + 1.0 / 512.0));
        // fp16's subnormals: the H200 gate's 2.92e-5 output, half a spacing (2⁻²⁵) off; a whole spacing is not.
        assert!(check(&Tolerance::F16, 2.920_627_6e-5, 2.917_647_4e-5));
        assert!(!check(&Tolerance::F16, 2.92e-5 + 1.2e-7, 2.92e-5));
        assert!(!check(&Tolerance::BF16, 2.95e-5, 2.9e-5));
    }

    #[test]
    fn sample_grids_include_edges_and_stay_in_range() {
        let (rows, cols) = sample_grid(1000, 5, 4096, 7);
        assert_eq!(rows.len(), 64);
        assert_eq!(cols, vec![0, 1, 2, 3, 4]);
        assert!(rows.contains(&0) && rows.contains(&500) && rows.contains(&999));
        assert!(rows.iter().all(|&i| i < 1000));
        assert!(sample_grid(0, 5, 10, 1).0.is_empty());
    }
}
