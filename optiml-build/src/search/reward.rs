//! Measurements, the bottleneck class, the judge and the composite reward (seed §2.2, §3.1).

use super::Config;
pub use crate::measure::{Measurement, Signals};

/// The seed's bottleneck classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Bottleneck {
    /// DRAM SOL exceeds SM SOL by more than the delta.
    Memory,
    /// SM SOL exceeds DRAM SOL by more than the delta.
    Compute,
    /// Neither dominates (or counters are unavailable).
    Mixed,
}

impl Bottleneck {
    /// Classifies a measurement: `dram − sm > delta` is memory-bound, `sm − dram > delta` compute-bound.
    pub fn classify(m: &Measurement, delta: f64) -> Self {
        match (m.sm_sol, m.dram_sol) {
            (Some(sm), Some(dram)) if dram - sm > delta => Bottleneck::Memory,
            (Some(sm), Some(dram)) if sm - dram > delta => Bottleneck::Compute,
            _ => Bottleneck::Mixed,
        }
    }
}

/// A judge's decision on an edit.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Verdict {
    /// Keep the edit, with a plausibility score in [-1, 1].
    Keep(f64),
    /// Discard it, with a (negative) score.
    Discard(f64),
}

impl Verdict {
    /// The score.
    pub fn score(self) -> f64 {
        match self {
            Verdict::Keep(s) | Verdict::Discard(s) => s,
        }
    }
}

/// Judges an edit from the baseline's and the candidate's measurements. An LLM judge implements this too.
pub trait Judge {
    /// The verdict on going from `baseline` to `candidate`.
    fn judge(&self, baseline: &Measurement, candidate: &Measurement) -> Verdict;

    /// The verdict on `edit`, which took the kernel from `baseline` to `candidate`. A judge that reads the edit
    /// itself (the seed's LLM judge reads the change and the profile) overrides this; the others judge the
    /// measurements alone.
    fn judge_edit(
        &self,
        edit: &Edit<'_>,
        baseline: &Measurement,
        candidate: &Measurement,
    ) -> Verdict {
        let _ = edit;
        self.judge(baseline, candidate)
    }
}

/// One edit of the search: a transformation from one schedule to another.
#[derive(Clone, Copy, Debug)]
pub struct Edit<'a> {
    /// The transformation's name.
    pub transform: &'a str,
    /// The schedule it started from, described.
    pub from: &'a str,
    /// The schedule it made, described.
    pub to: &'a str,
}

/// The seed's rule: discard below 0.95× speed-up (−0.5) or above 1.3× the baseline's DRAM bytes (−0.8);
/// otherwise keep with score `min(1, speed-up − 1)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeterministicJudge;

impl Judge for DeterministicJudge {
    fn judge(&self, baseline: &Measurement, candidate: &Measurement) -> Verdict {
        let speedup = baseline.time_ms / candidate.time_ms.max(1e-12);
        if speedup < 0.95 {
            return Verdict::Discard(-0.5);
        }
        if let (Some(b), Some(c)) = (baseline.dram_bytes, candidate.dram_bytes)
            && c > 1.3 * b
        {
            return Verdict::Discard(-0.8);
        }
        Verdict::Keep((speedup - 1.0).min(1.0))
    }
}

/// `R = w_t·r_time + w_p·r_proxy + w_j·r_judge − p_guard`, with `r_time = tanh(2.5·(T0 − T)/max(T0, 0.1))`.
/// `r_proxy` is the change in the larger SOL figure (how close the kernel runs to its bound), in [-1, 1], zero
/// without counters; `p_guard` charges register spills (0.2, plus 0.1 per KiB, at most 1).
pub fn reward(
    config: &Config,
    baseline: &Measurement,
    candidate: &Measurement,
    verdict: Verdict,
) -> f64 {
    let (t0, t) = (baseline.time_ms, candidate.time_ms);
    let r_time = (2.5 * (t0 - t) / t0.max(0.1)).tanh();
    let sol = |m: &Measurement| match (m.sm_sol, m.dram_sol) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ => None,
    };
    let r_proxy = match (sol(baseline), sol(candidate)) {
        (Some(a), Some(b)) => ((b - a) / 100.0).clamp(-1.0, 1.0),
        _ => 0.0,
    };
    let p_guard = if candidate.spill_bytes > 0 {
        (0.2 + 0.1 * candidate.spill_bytes as f64 / 1024.0).min(1.0)
    } else {
        0.0
    };
    config.time_weight * r_time
        + config.proxy_weight * r_proxy
        + config.judge_weight * verdict.score()
        - p_guard
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(time_ms: f64, sm: f64, dram: f64) -> Measurement {
        Measurement {
            time_ms,
            sm_sol: Some(sm),
            dram_sol: Some(dram),
            dram_bytes: Some(1e9),
            ..Measurement::default()
        }
    }

    #[test]
    fn bottleneck_classes_follow_the_seed() {
        assert_eq!(
            Bottleneck::classify(&m(1.0, 20.0, 80.0), 7.5),
            Bottleneck::Memory
        );
        assert_eq!(
            Bottleneck::classify(&m(1.0, 80.0, 20.0), 7.5),
            Bottleneck::Compute
        );
        assert_eq!(
            Bottleneck::classify(&m(1.0, 50.0, 55.0), 7.5),
            Bottleneck::Mixed
        );
        let no_counters = Measurement {
            sm_sol: None,
            dram_sol: None,
            ..m(1.0, 0.0, 0.0)
        };
        assert_eq!(Bottleneck::classify(&no_counters, 7.5), Bottleneck::Mixed);
    }

    #[test]
    fn judge_rule() {
        let j = DeterministicJudge;
        let base = m(1.0, 50.0, 50.0);
        assert_eq!(j.judge(&base, &m(1.1, 50.0, 50.0)), Verdict::Discard(-0.5));
        let more_bytes = Measurement {
            dram_bytes: Some(1.4e9),
            ..m(0.9, 50.0, 50.0)
        };
        assert_eq!(j.judge(&base, &more_bytes), Verdict::Discard(-0.8));
        let Verdict::Keep(s) = j.judge(&base, &m(0.5, 50.0, 50.0)) else {
            panic!()
        };
        assert!((s - 1.0).abs() < 1e-12);
    }

    #[test]
    fn reward_formula() {
        let c = Config::default();
        let base = m(1.0, 50.0, 40.0);
        let faster = m(0.8, 60.0, 40.0);
        let r = reward(&c, &base, &faster, Verdict::Keep(0.25));
        let want = 0.4 * (2.5f64 * 0.2).tanh() + 0.3 * 0.1 + 0.2 * 0.25;
        assert!((r - want).abs() < 1e-12, "{r} vs {want}");
        let spilling = Measurement {
            spill_bytes: 2048,
            ..faster
        };
        assert!((reward(&c, &base, &spilling, Verdict::Keep(0.25)) - (want - 0.4)).abs() < 1e-12);
        assert!(reward(&c, &base, &m(1.5, 50.0, 40.0), Verdict::Discard(-0.5)) < 0.0);
    }
}
