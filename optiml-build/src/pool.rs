//! A host's GPUs as a pool for tuning jobs (`cargo optiml tune --devices`): one thread per device slot runs one
//! job at a time, so nothing else runs on a GPU while a job times on it; jobs go to whichever slot is free. A job
//! whose device failed under it (its worker could not start, or died or hung on every candidate) goes to another
//! slot; a slot that fails [`RETIRE_AFTER`] jobs in a row is retired with its reason, so one bad GPU costs the
//! retries of its jobs, never the run. A job that fails on its own account (the search found nothing) is not
//! retried. With fewer jobs than GPUs, a slot holds several GPUs ([`slots`]) and its search times a batch of
//! candidates at once, one per GPU.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, PoisonError};

/// Device failures in a row after which a slot takes no more jobs.
pub const RETIRE_AFTER: usize = 2;

/// Why a job did not finish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The device or its worker failed: another device may run the job.
    Device(String),
    /// The job fails wherever it runs.
    Job(String),
}

/// What the pool tells its caller while it runs (for the progress display and the log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A job's device failed; the job goes back into the queue unless no other slot can take it.
    Moved {
        /// The job's index.
        job: usize,
        /// The slot that failed it.
        slot: usize,
        /// Why.
        why: String,
    },
    /// A slot takes no more jobs.
    Retired {
        /// The slot.
        slot: usize,
        /// Its last failure.
        why: String,
    },
}

/// The pool's slots for `jobs` jobs on the GPUs `ordinals`: a GPU per slot where there are at least as many
/// jobs as GPUs; otherwise one slot per job, the GPUs dealt out in turn, so a job's search times a batch of
/// candidates on all of its slot's GPUs at once ([`crate::search::Evaluator::width`]) rather than leaving
/// GPUs idle. A slot's first GPU is its own; the others join its searches.
pub fn slots(ordinals: &[usize], jobs: usize) -> Vec<Vec<usize>> {
    let n = jobs.clamp(1, ordinals.len().max(1));
    let mut groups = vec![Vec::new(); n.min(ordinals.len())];
    for (i, &o) in ordinals.iter().enumerate() {
        let g = i % groups.len();
        groups[g].push(o);
    }
    groups
}

/// What a run of the pool gives: each job's result, in job order, and the slots it retired.
#[derive(Debug)]
pub struct Report<R> {
    /// Per job: its result, or why it failed (the last device's words where every slot failed it).
    pub results: Vec<Result<R, String>>,
    /// The retired slots, with their last failure, in the order they were retired.
    pub retired: Vec<(usize, String)>,
}

struct State<R> {
    queue: VecDeque<usize>,
    /// Per job, the slots that failed it.
    tried: Vec<Vec<usize>>,
    /// Per job, its device's last failure.
    last: Vec<String>,
    results: Vec<Option<Result<R, String>>>,
    alive: Vec<bool>,
    failures_in_a_row: Vec<usize>,
    retired: Vec<(usize, String)>,
}

impl<R> State<R> {
    /// Fails every queued job that no live slot may take any more.
    fn give_up_on_stranded(&mut self) {
        let alive = &self.alive;
        let (tried, last, results) = (&self.tried, &self.last, &mut self.results);
        let retired = self.retired.last().map_or("none", |r| r.1.as_str());
        self.queue.retain(|&j| {
            let open = (0..alive.len()).any(|s| alive[s] && !tried[j].contains(&s));
            if !open {
                results[j] = Some(Err(if last[j].is_empty() {
                    format!("no device left to run it (the last one retired: {retired})")
                } else {
                    format!(
                        "every device that could run it failed (the last: {})",
                        last[j]
                    )
                }));
            }
            open
        });
    }

    fn done(&self) -> bool {
        self.results.iter().all(Option::is_some)
    }

    /// The first queued job `slot` has not failed.
    fn take_for(&mut self, slot: usize) -> Option<usize> {
        let at = self
            .queue
            .iter()
            .position(|&j| !self.tried[j].contains(&slot))?;
        self.queue.remove(at)
    }
}

/// Runs `jobs` on `slots` slots (`work(job, slot)` runs one job on one slot, blocking), as the module says.
/// Returns when every job has a result.
pub fn run<J: Sync, R: Send>(
    jobs: &[J],
    slots: usize,
    work: &(dyn Fn(&J, usize) -> Result<R, Failure> + Sync),
    event: &(dyn Fn(Event) + Sync),
) -> Report<R> {
    let state = Mutex::new(State {
        queue: (0..jobs.len()).collect(),
        tried: vec![Vec::new(); jobs.len()],
        last: vec![String::new(); jobs.len()],
        results: (0..jobs.len()).map(|_| None).collect(),
        alive: vec![true; slots],
        failures_in_a_row: vec![0; slots],
        retired: Vec::new(),
    });
    let changed = Condvar::new();
    let lock = || state.lock().unwrap_or_else(PoisonError::into_inner);
    if slots == 0 {
        lock().give_up_on_stranded();
    }
    std::thread::scope(|scope| {
        for slot in 0..slots {
            let (changed, lock) = (&changed, &lock);
            scope.spawn(move || {
                loop {
                    let job = {
                        let mut s = lock();
                        loop {
                            if s.done() || !s.alive[slot] {
                                return;
                            }
                            if let Some(j) = s.take_for(slot) {
                                break j;
                            }
                            s = changed.wait(s).unwrap_or_else(PoisonError::into_inner);
                        }
                    };
                    let outcome = work(&jobs[job], slot);
                    let mut s = lock();
                    match outcome {
                        Ok(r) => {
                            s.results[job] = Some(Ok(r));
                            s.failures_in_a_row[slot] = 0;
                        }
                        Err(Failure::Job(why)) => {
                            s.results[job] = Some(Err(why));
                            s.failures_in_a_row[slot] = 0;
                        }
                        Err(Failure::Device(why)) => {
                            s.tried[job].push(slot);
                            s.last[job] = why.clone();
                            s.queue.push_front(job);
                            s.failures_in_a_row[slot] += 1;
                            event(Event::Moved {
                                job,
                                slot,
                                why: why.clone(),
                            });
                            if s.failures_in_a_row[slot] >= RETIRE_AFTER {
                                s.alive[slot] = false;
                                s.retired.push((slot, why.clone()));
                                event(Event::Retired { slot, why });
                            }
                            s.give_up_on_stranded();
                        }
                    }
                    drop(s);
                    changed.notify_all();
                }
            });
        }
    });
    let s = state.into_inner().unwrap_or_else(PoisonError::into_inner);
    Report {
        results: s
            .results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err("never run".into())))
            .collect(),
        retired: s.retired,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::Client;
    use crate::eval::client::tests::{dying_worker, hanging_worker, sample_job};
    use crate::eval::protocol::JobResult;

    #[test]
    fn fewer_jobs_than_gpus_share_the_gpus_out() {
        assert_eq!(slots(&[0, 1, 2, 3], 9), [[0], [1], [2], [3]]);
        assert_eq!(slots(&[0, 1, 2, 3], 4), [[0], [1], [2], [3]]);
        assert_eq!(slots(&[0, 1, 2, 3], 1), [vec![0, 1, 2, 3]]);
        assert_eq!(
            slots(&[0, 1, 2, 3, 4, 5, 6, 7], 3),
            [vec![0, 3, 6], vec![1, 4, 7], vec![2, 5]]
        );
        assert_eq!(slots(&[0, 0], 1), [vec![0, 0]]);
        assert_eq!(slots(&[2], 0), [vec![2]]);
        // Every GPU in exactly one slot.
        for jobs in 0..10 {
            let mut all: Vec<usize> = slots(&[0, 1, 2, 3, 4, 5], jobs).concat();
            all.sort_unstable();
            assert_eq!(all, [0, 1, 2, 3, 4, 5]);
        }
    }
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Every job runs exactly once where no device fails, on every slot in turn.
    #[test]
    fn every_job_runs_once() {
        for slots in 1..=4 {
            let runs: Vec<AtomicUsize> = (0..23).map(|_| AtomicUsize::new(0)).collect();
            let jobs: Vec<usize> = (0..23).collect();
            let report = run(
                &jobs,
                slots,
                &|&j: &usize, _slot| {
                    runs[j].fetch_add(1, Ordering::SeqCst);
                    Ok(j * 2)
                },
                &|_| {},
            );
            assert!(report.retired.is_empty());
            for (j, r) in report.results.iter().enumerate() {
                assert_eq!(r, &Ok(j * 2));
                assert_eq!(runs[j].load(Ordering::SeqCst), 1);
            }
        }
    }

    /// Slot 1's worker dies on every candidate and slot 2's hangs (real worker processes, killed at their
    /// deadline): both are retired, named with their reason, and every job completes on slot 0, once.
    #[test]
    fn a_dying_and_a_hanging_worker_cost_retries_not_jobs() {
        let job = sample_job();
        let jobs: Vec<usize> = (0..6).collect();
        let done_on_0 = AtomicUsize::new(0);
        let retired_now = AtomicUsize::new(0);
        let events = Mutex::new(Vec::new());
        let report = run(
            &jobs,
            3,
            &|&j: &usize, slot| {
                if slot == 0 {
                    // A healthy device that finishes nothing until the bad ones are retired (or 30 s have
                    // passed), so that they get jobs whatever the timing.
                    let start = std::time::Instant::now();
                    while retired_now.load(Ordering::SeqCst) < 2 && start.elapsed().as_secs() < 30 {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    done_on_0.fetch_add(1, Ordering::SeqCst);
                    return Ok(j);
                }
                let worker = if slot == 1 {
                    dying_worker()
                } else {
                    hanging_worker()
                };
                let mut client = Client::new(worker, Vec::new(), slot);
                match client.evaluate(&job, Duration::from_secs(1)) {
                    Ok(JobResult::Fault { during, error }) => {
                        Err(Failure::Device(format!("slot {slot}: {during}: {error}")))
                    }
                    other => panic!("slot {slot}: {other:?}"),
                }
            },
            &|e| {
                if matches!(e, Event::Retired { .. }) {
                    retired_now.fetch_add(1, Ordering::SeqCst);
                }
                events.lock().unwrap().push(e);
            },
        );
        assert_eq!(
            report.results,
            jobs.iter().map(|&j| Ok(j)).collect::<Vec<_>>()
        );
        assert_eq!(done_on_0.load(Ordering::SeqCst), jobs.len());
        let mut retired: Vec<usize> = report.retired.iter().map(|r| r.0).collect();
        retired.sort_unstable();
        assert_eq!(retired, [1, 2], "{:?}", report.retired);
        for (slot, why) in &report.retired {
            assert!(why.starts_with(&format!("slot {slot}: ")), "{why}");
        }
        let events = events.into_inner().unwrap();
        let moved = events
            .iter()
            .filter(|e| matches!(e, Event::Moved { .. }))
            .count();
        assert_eq!(moved, 2 * RETIRE_AFTER, "{events:?}");
    }

    /// A job that fails on its own account is not retried; where every slot fails a job, it fails with the
    /// last device's words, and the run still ends.
    #[test]
    fn job_failures_are_final_and_a_pool_of_bad_devices_ends() {
        let runs = AtomicUsize::new(0);
        let report = run(
            &[0usize],
            3,
            &|_: &usize, _| {
                runs.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(Failure::Job("the default failed the gate".into()))
            },
            &|_| {},
        );
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(report.results, [Err("the default failed the gate".into())]);

        let jobs: Vec<usize> = (0..5).collect();
        let report = run(
            &jobs,
            2,
            &|_: &usize, slot| {
                Err::<(), _>(Failure::Device(format!("GPU {slot} fell off the bus")))
            },
            &|_| {},
        );
        assert_eq!(report.retired.len(), 2);
        for r in &report.results {
            let why = r.as_ref().unwrap_err();
            assert!(
                why.starts_with("every device that could run it failed (the last: GPU ")
                    || why.starts_with("no device left to run it (the last one retired: GPU "),
                "{why}"
            );
        }
        let none = run(&jobs, 0, &|_: &usize, _| Ok(()), &|_| {});
        assert!(none.results.iter().all(Result::is_err));
    }
}
