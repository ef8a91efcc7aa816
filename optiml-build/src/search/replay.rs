//! A landscape measured on a GPU, served again: the evaluator behind offline comparisons of search strategies.

use super::log::{LogError, SearchRecords};
use super::mcts::{Evaluator, Outcome};
use super::reward::{Measurement, Signals};
use super::{Tunable, splitmix};
use std::collections::HashMap;

/// Serves schedules from an exhaustive run's log, each time scaled by seeded noise as large as that
/// measurement's spread. Everything else (SOL figures, registers, occupancy) is replayed as measured, so a search
/// routes and rewards as it did on the GPU, and strategies can be compared on any machine against real numbers.
#[derive(Clone, Debug)]
pub struct Replay<S> {
    landscape: HashMap<S, Measurement>,
    root: S,
    seed: u64,
}

impl<S: Tunable + serde::de::DeserializeOwned> Replay<S> {
    /// The landscape of `records` (its first step is the root), with noise drawn from `seed`.
    ///
    /// # Errors
    /// A step whose schedule is not an `S`; a log without steps.
    pub fn new(records: &SearchRecords, seed: u64) -> Result<Self, LogError> {
        let mut landscape = HashMap::new();
        for step in &records.steps {
            if let Some(m) = step.outcome.measurement() {
                let s = step.schedule_as::<S>().map_err(LogError::OtherFamily)?;
                landscape.insert(s, *m);
            }
        }
        let root = records
            .steps
            .first()
            .ok_or(LogError::NoBestStep)?
            .schedule_as::<S>()
            .map_err(LogError::OtherFamily)?;
        Ok(Replay {
            landscape,
            root,
            seed,
        })
    }
}

impl<S: Tunable> Replay<S> {
    /// The schedule the measured run started from.
    pub fn root(&self) -> S {
        self.root
    }

    /// How many schedules were measured.
    pub fn len(&self) -> usize {
        self.landscape.len()
    }

    /// Whether nothing was measured.
    pub fn is_empty(&self) -> bool {
        self.landscape.is_empty()
    }

    /// The median time of `schedule` as measured, without noise.
    pub fn measured_ms(&self, schedule: &S) -> Option<f64> {
        self.landscape.get(schedule).map(|m| m.time_ms)
    }

    /// The fastest measured time.
    pub fn best_ms(&self) -> f64 {
        self.landscape
            .values()
            .map(|m| m.time_ms)
            .fold(f64::INFINITY, f64::min)
    }
}

impl<S: Tunable> Evaluator<S> for Replay<S> {
    fn evaluate(&mut self, schedule: &S) -> Outcome {
        let Some(&m) = self.landscape.get(schedule) else {
            return Outcome::Rejected("rejected (or absent) in the measured landscape".into());
        };
        let h = splitmix(self.seed ^ splitmix(fnv1a(format!("{schedule:?}").as_bytes())));
        // Uniform in ±spread/2: the measured runs of this schedule spanned `spread_pct` of its median. Figures
        // derived from the time move with it.
        let u = (h >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
        let scale = 1.0 + u * m.spread_pct / 100.0;
        let rate = |x: Option<f64>| x.map(|x| x / scale);
        let derived = m.signals == Signals::Derived;
        Outcome::Measured(Measurement {
            time_ms: m.time_ms * scale,
            tflops: rate(m.tflops),
            tbps: rate(m.tbps),
            sm_sol: if derived { rate(m.sm_sol) } else { m.sm_sol },
            dram_sol: if derived {
                rate(m.dram_sol)
            } else {
                m.dram_sol
            },
            ..m
        })
    }
}

/// FNV-1a: a hash that, unlike `std`'s, is the same in every process and release.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}
