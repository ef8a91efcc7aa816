//! Baselines for honesty (the search issue, §8): random search over the same transformations, and exhaustive
//! enumeration where the space is small, both with the same evaluator, judge and reward as the tree search and
//! the same [`SearchLog`], so the logs compare line by line.

use super::mcts::{Evaluator, Outcome, SearchLog, Step};
use super::reward::{Bottleneck, Judge, Measurement, reward};
use super::transform::Transform;
use super::{Config, Tunable};
use std::collections::HashMap;
use std::time::Instant;

/// SplitMix64: a small, well-mixed generator (seeds, sample positions, random walks); no dependency needed.
pub fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Shared bookkeeping of the baselines: nodes by schedule, steps, the best so far.
struct Recorder<'a, S> {
    config: &'a Config,
    judge: &'a dyn Judge,
    started: Instant,
    base: Measurement,
    nodes: HashMap<S, (usize, Option<Measurement>)>,
    schedules: Vec<S>,
    parents: Vec<Option<usize>>,
    transforms: Vec<Option<&'static str>>,
    steps: Vec<Step<S>>,
    evaluations: usize,
}

impl<'a, S: Tunable> Recorder<'a, S> {
    fn start(
        config: &'a Config,
        judge: &'a dyn Judge,
        root: S,
        evaluator: &mut dyn Evaluator<S>,
    ) -> Result<Self, String> {
        let started = Instant::now();
        let outcome = evaluator.evaluate(&root);
        let base = match &outcome {
            Outcome::Measured(m) => *m,
            Outcome::Rejected(why) => {
                return Err(format!("the default schedule was rejected: {why}"));
            }
        };
        let mut r = Recorder {
            config,
            judge,
            started,
            base,
            nodes: HashMap::new(),
            schedules: vec![root],
            parents: vec![None],
            transforms: vec![None],
            steps: Vec::new(),
            evaluations: 1,
        };
        r.nodes.insert(root, (0, Some(base)));
        r.steps.push(Step {
            node: 0,
            parent: None,
            transform: None,
            schedule: root,
            outcome,
            bottleneck: Some(Bottleneck::classify(&base, config.bottleneck_delta)),
            verdict: None,
            reward: 0.0,
            reused: false,
            evaluations: 1,
            elapsed_s: started.elapsed().as_secs_f64(),
        });
        Ok(r)
    }

    fn out_of_budget(&self) -> bool {
        self.evaluations >= self.config.budget || self.started.elapsed() >= self.config.time_limit
    }

    /// Evaluates `schedule` (reached from node `parent` by `transform`) unless it was seen; returns its node
    /// and measurement.
    fn visit(
        &mut self,
        evaluator: &mut dyn Evaluator<S>,
        schedule: S,
        parent: usize,
        transform: Option<&'static str>,
    ) -> (usize, Option<Measurement>) {
        if let Some(&seen) = self.nodes.get(&schedule) {
            return seen;
        }
        let outcome = evaluator.evaluate(&schedule);
        self.record(schedule, parent, transform, outcome)
    }

    /// Adds the node of `schedule` (new: not seen before) with its evaluation's `outcome`; returns its node
    /// and measurement.
    fn record(
        &mut self,
        schedule: S,
        parent: usize,
        transform: Option<&'static str>,
        outcome: Outcome,
    ) -> (usize, Option<Measurement>) {
        self.evaluations += 1;
        let id = self.schedules.len();
        let parent_m = self.steps[parent]
            .outcome
            .measured()
            .copied()
            .unwrap_or(self.base);
        let (r, verdict, m, b) = match &outcome {
            Outcome::Measured(m) => {
                let v = self.judge.judge(&parent_m, m);
                (
                    reward(self.config, &self.base, m, v),
                    Some(v),
                    Some(*m),
                    Some(Bottleneck::classify(m, self.config.bottleneck_delta)),
                )
            }
            Outcome::Rejected(_) => (-1.0, None, None, None),
        };
        self.schedules.push(schedule);
        self.parents.push(Some(parent));
        self.transforms.push(transform);
        self.nodes.insert(schedule, (id, m));
        self.steps.push(Step {
            node: id,
            parent: Some(parent),
            transform,
            schedule,
            outcome,
            bottleneck: b,
            verdict,
            reward: r,
            reused: false,
            evaluations: self.evaluations,
            elapsed_s: self.started.elapsed().as_secs_f64(),
        });
        (id, m)
    }

    fn finish(self) -> SearchLog<S> {
        let best = self
            .steps
            .iter()
            .filter_map(|s| s.outcome.measured().map(|m| (s.node, *m)))
            .min_by(|a, b| a.1.time_ms.total_cmp(&b.1.time_ms))
            .unwrap_or((0, self.base));
        let mut path = Vec::new();
        let mut at = best.0;
        while let (Some(t), Some(p)) = (self.transforms[at], self.parents[at]) {
            path.push(t);
            at = p;
        }
        path.reverse();
        SearchLog {
            best: self.schedules[best.0],
            best_measurement: best.1,
            path,
            evaluations: self.evaluations,
            steps: self.steps,
        }
    }
}

/// Random search: walks of up to `max_depth` uniformly chosen applicable transformations from the default,
/// evaluating every schedule not seen before, until the budget is spent. A walk stops early at a rejected
/// schedule (there is nothing to transform further). One schedule at a time: each step of a walk starts from
/// the last one's.
///
/// # Errors
/// The rejection of the root.
pub fn random_search<S: Tunable>(
    config: &Config,
    judge: &dyn Judge,
    catalog: &[Transform<S>],
    root: S,
    evaluator: &mut dyn Evaluator<S>,
    seed: u64,
) -> Result<SearchLog<S>, String> {
    let mut r = Recorder::start(config, judge, root, evaluator)?;
    let mut state = splitmix(seed);
    // Walks that find nothing new in a row: the reachable space is exhausted.
    let mut stale = 0;
    while !r.out_of_budget() && stale < 1000 {
        // Walks are drawn ahead, in batches, so the evaluator can compile their schedules in parallel; a rejection
        // only cuts a walk short, so the draw does not depend on outcomes.
        let mut walks: Vec<Vec<(&'static str, S)>> = Vec::new();
        let mut fresh: Vec<S> = Vec::new();
        let wanted = config.budget.saturating_sub(r.evaluations);
        let mut draws = 0;
        while fresh.len() < wanted && draws < 1000 {
            draws += 1;
            let mut walk = Vec::new();
            let mut schedule = root;
            for _ in 0..config.max_depth {
                let options: Vec<(&Transform<S>, S)> = catalog
                    .iter()
                    .filter_map(|t| t.apply_to(&schedule).map(|s| (t, s)))
                    .collect();
                if options.is_empty() {
                    break;
                }
                state = splitmix(state);
                let (t, next) = options[(state % options.len() as u64) as usize];
                if !r.nodes.contains_key(&next) && !fresh.contains(&next) {
                    fresh.push(next);
                }
                walk.push((t.name, next));
                schedule = next;
            }
            walks.push(walk);
        }
        evaluator.prepare(&fresh);
        for walk in walks {
            let before = r.evaluations;
            let mut node = 0;
            for (name, next) in walk {
                if r.out_of_budget() {
                    break;
                }
                let (id, m) = r.visit(evaluator, next, node, Some(name));
                if m.is_none() {
                    break;
                }
                node = id;
            }
            stale = if r.evaluations == before {
                stale + 1
            } else {
                0
            };
            if r.out_of_budget() || stale >= 1000 {
                break;
            }
        }
    }
    Ok(r.finish())
}

/// Exhaustive enumeration: evaluates every schedule of `space` (the default first), within the budget, as many
/// at a time as the evaluator takes ([`Evaluator::width`]).
///
/// # Errors
/// The rejection of the root.
pub fn exhaustive<S: Tunable>(
    config: &Config,
    judge: &dyn Judge,
    root: S,
    space: &[S],
    evaluator: &mut dyn Evaluator<S>,
) -> Result<SearchLog<S>, String> {
    let take = space.len().min(config.budget.saturating_sub(1));
    // Everything is known up front: let the evaluator compile the whole space ahead, in order.
    let ahead: Vec<S> = std::iter::once(root)
        .chain(space[..take].iter().copied())
        .collect();
    evaluator.prepare(&ahead);
    let mut r = Recorder::start(config, judge, root, evaluator)?;
    // As many at a time as the evaluator takes (one per GPU), in the space's order.
    let width = evaluator.width().max(1);
    let mut rest = space.iter().copied().peekable();
    while rest.peek().is_some() && !r.out_of_budget() {
        let room = width.min(config.budget - r.evaluations);
        let mut batch: Vec<S> = Vec::new();
        while batch.len() < room {
            let Some(s) = rest.next() else { break };
            if !r.nodes.contains_key(&s) && !batch.contains(&s) {
                batch.push(s);
            }
        }
        let outcomes = evaluator.evaluate_batch(&batch);
        for (s, outcome) in batch.into_iter().zip(outcomes) {
            r.record(s, 0, None, outcome);
        }
    }
    Ok(r.finish())
}

#[cfg(test)]
mod tests {
    use super::super::fixture::Tile;
    use super::super::{DeterministicJudge, Signals, Tunable};
    use super::*;

    /// A deterministic landscape over every field the schedule has: the time is a hash of the schedule.
    struct Hashed(usize);
    impl Evaluator<Tile> for Hashed {
        fn evaluate(&mut self, s: &Tile) -> Outcome {
            self.0 += 1;
            let h = splitmix(
                format!("{s:?}")
                    .bytes()
                    .fold(7u64, |a, b| splitmix(a ^ b as u64)),
            );
            if h.is_multiple_of(11) {
                return Outcome::Rejected("planted".into());
            }
            Outcome::Measured(Measurement {
                time_ms: 1.0 + (h % 1000) as f64 / 1000.0,
                signals: Signals::TimeOnly,
                ..Measurement::default()
            })
        }
    }

    #[test]
    fn random_search_spends_its_budget_on_distinct_schedules_and_is_seeded() {
        let config = Config {
            budget: 20,
            ..Config::default()
        };
        let root = Tile::space()[0];
        let catalog = Tile::catalog();
        let mut e = Hashed(0);
        let a = random_search(&config, &DeterministicJudge, &catalog, root, &mut e, 1).unwrap();
        assert_eq!(a.evaluations, e.0);
        assert!(a.evaluations <= 20);
        let mut distinct: Vec<_> = a.steps.iter().map(|s| s.schedule).collect();
        distinct.sort_by_key(|s| format!("{s:?}"));
        distinct.dedup();
        assert_eq!(distinct.len(), a.steps.len());
        let b = random_search(
            &config,
            &DeterministicJudge,
            &catalog,
            root,
            &mut Hashed(0),
            1,
        )
        .unwrap();
        assert_eq!(a.best, b.best);
        assert!(a.best_measurement.time_ms <= a.steps[0].outcome.measured().unwrap().time_ms);
    }

    /// The hashed landscape behind an evaluator of `width`, recording its batches.
    struct Wide(Hashed, usize, Vec<usize>);
    impl Evaluator<Tile> for Wide {
        fn evaluate(&mut self, s: &Tile) -> Outcome {
            self.2.push(1);
            self.0.evaluate(s)
        }
        fn width(&self) -> usize {
            self.1
        }
        fn evaluate_batch(&mut self, schedules: &[Tile]) -> Vec<Outcome> {
            self.2.push(schedules.len());
            schedules.iter().map(|s| self.0.evaluate(s)).collect()
        }
    }

    #[test]
    fn exhaustive_takes_the_space_in_batches_of_the_evaluators_width() {
        let space = Tile::space();
        let config = Config {
            budget: 50,
            time_limit: std::time::Duration::from_secs(600),
            ..Config::default()
        };
        let one = exhaustive(
            &config,
            &DeterministicJudge,
            space[0],
            &space,
            &mut Hashed(0),
        )
        .unwrap();
        let mut wide = Wide(Hashed(0), 4, Vec::new());
        let four = exhaustive(&config, &DeterministicJudge, space[0], &space, &mut wide).unwrap();
        // The same schedules in the same order, the budget kept, in batches of 4 after the root.
        let order = |l: &SearchLog<Tile>| l.steps.iter().map(|s| s.schedule).collect::<Vec<_>>();
        assert_eq!(order(&one), order(&four));
        assert_eq!(four.evaluations, 50);
        assert_eq!(wide.0.0, 50);
        // The root alone, then 49 = 12 × 4 + 1.
        let mut expected = vec![1];
        expected.extend([4; 12]);
        expected.push(1);
        assert_eq!(wide.2, expected);
    }

    #[test]
    fn exhaustive_finds_the_minimum_of_the_space() {
        let space = Tile::space();
        let config = Config {
            budget: space.len() + 1,
            time_limit: std::time::Duration::from_secs(600),
            ..Config::default()
        };
        let mut e = Hashed(0);
        let log = exhaustive(&config, &DeterministicJudge, space[0], &space, &mut e).unwrap();
        let mut probe = Hashed(0);
        let best = space
            .iter()
            .filter_map(|s| probe.evaluate(s).measured().map(|m| m.time_ms))
            .fold(f64::INFINITY, f64::min);
        assert_eq!(log.best_measurement.time_ms, best);
    }
}
