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
        // Roots evaluated beside the search have no schedule of the landscape's kernel.
        let schedules = records
            .steps
            .iter()
            .filter(|s| s.transform.as_deref() != Some(crate::experts::ROOT_STEP));
        for step in schedules {
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

#[cfg(test)]
mod tests {
    use super::super::fixture::Tile;
    use super::*;
    use crate::search::{Config, DeterministicJudge, Header, Method, exhaustive, records};

    /// A GPU stand-in: time grows with the distance from one corner of the space (the shallowest k-slice, the
    /// smallest register tile); every schedule's runs spread by 4%; SOL derived from the time; schedules with
    /// 256-row blocks rejected, so 136 of the 640 tile schedules were never measured (the default's 64-row block
    /// is not among them: an exhaustive run needs its root measured).
    struct Landscape;

    impl Evaluator<Tile> for Landscape {
        fn evaluate(&mut self, s: &Tile) -> Outcome {
            if s.bm == 256 {
                return Outcome::Rejected("gate: synthetic".into());
            }
            let time_ms = 1.0 + f64::from(s.bk) / 64.0 + f64::from(s.tm * s.tn) / 256.0;
            Outcome::Measured(Measurement {
                time_ms,
                spread_pct: 4.0,
                sm_sol: Some(60.0 / time_ms),
                dram_sol: Some(5.0 / time_ms),
                tflops: Some(40.0 / time_ms),
                registers: 128,
                signals: Signals::Derived,
                ..Measurement::default()
            })
        }
    }

    fn landscape() -> SearchRecords {
        let space = Tile::space();
        let root = Tile::default_for(optiml_runtime::Arch::new(9, 0));
        let config = Config {
            budget: space.len() + 1,
            ..Config::default()
        };
        let log = exhaustive(&config, &DeterministicJudge, root, &space, &mut Landscape).unwrap();
        let header = Header {
            kernel: "tile".into(),
            spec: "the search tests' tile fixture".into(),
            arch: "sm_90".into(),
            device: "synthetic".into(),
            shape: "synthetic".into(),
            method: Method::Exhaustive,
            seed: None,
            config: serde_json::Value::Null,
            started_at: String::new(),
            signals: Signals::Derived,
        };
        records(&header, &log, 0.0).unwrap()
    }

    #[test]
    fn serves_what_was_measured_within_its_spread_and_rejects_the_rest() {
        let records = landscape();
        let mut replay: Replay<Tile> = Replay::new(&records, 7).unwrap();
        assert!(replay.measured_ms(&replay.root()).is_some());
        let measured: Vec<Tile> = Tile::space().into_iter().filter(|s| s.bm != 256).collect();
        assert_eq!((measured.len(), Tile::space().len()), (504, 640));
        assert_eq!(replay.len(), measured.len());
        let mut moved = 0;
        for s in &measured {
            let truth = replay.measured_ms(s).unwrap();
            let Outcome::Measured(m) = replay.evaluate(s) else {
                panic!("{s:?} was measured")
            };
            // Within ±spread/2, and the figures derived from time move with it; the rest is as measured.
            let scale = m.time_ms / truth;
            assert!((scale - 1.0).abs() <= 0.02 + 1e-12, "{scale}");
            moved += usize::from(scale != 1.0);
            let want_sol = 60.0 / truth / scale;
            assert!((m.sm_sol.unwrap() - want_sol).abs() < 1e-9);
            assert!((m.tflops.unwrap() * m.time_ms - 40.0).abs() < 1e-9);
            assert_eq!((m.registers, m.signals), (128, Signals::Derived));
        }
        assert!(
            moved > measured.len() / 2,
            "the noise should move most times"
        );
        let rejected = Tile::space().into_iter().find(|s| s.bm == 256).unwrap();
        assert!(matches!(replay.evaluate(&rejected), Outcome::Rejected(_)));
        // The same seed replays the same noise; another seed, other noise.
        let again = Replay::<Tile>::new(&records, 7)
            .unwrap()
            .evaluate(&measured[0]);
        assert_eq!(again, replay.evaluate(&measured[0]));
        let other = Replay::<Tile>::new(&records, 8)
            .unwrap()
            .evaluate(&measured[0]);
        assert_ne!(other, replay.evaluate(&measured[0]));
        // The fastest measured schedule: the shallowest k-slice with the smallest register tile.
        assert!((replay.best_ms() - 1.0 - 8.0 / 64.0 - 16.0 / 256.0).abs() < 1e-9);
    }
}
