//! The search during `cargo build`: kernels this build had to generate are tuned briefly on the GPU, if there
//! is one, and the winners replace the defaults in `target/optiml/`. Anything that goes wrong leaves the
//! verified default in place and says why; a build never fails because a search could not run.

use crate::cache::Cache;
use crate::config::{DEFAULT_BUILD_TIME_S, Settings};
use crate::engine::{Origin, Resolved};
use crate::eval::{TimingPlan, WorkerCommand};
use crate::scan::FoundKernel;
use crate::search::{Config, Method};
use crate::tune::{self, TuneOptions};
use crate::{families, nvrtc};
use optiml_runtime::probe;
use optiml_spec::Spec;
use optiml_spec::env;
use std::time::{Duration, Instant};

/// Shortest search worth starting: below this a search measures the default and little else.
const MIN_SEARCH_S: f64 = 5.0;

/// What the build-time search did.
#[derive(Debug, Default)]
pub(crate) struct Searched {
    /// What to tell the user, one line per kernel and architecture (or one line why nothing was searched).
    pub notes: Vec<String>,
    /// How many fresh entries were verified and tuned on the GPU.
    pub tuned: usize,
}

/// The seconds the next kernel gets when `left` seconds remain for `remaining` kernels: an equal share, but never
/// less than [`MIN_SEARCH_S`] (a shorter search finds nothing), so a small budget tunes the first kernels in
/// [`search_order`] rather than none; `None` once less than that is left.
fn share(left: f64, remaining: usize) -> Option<f64> {
    (left >= MIN_SEARCH_S).then(|| (left / remaining.max(1) as f64).max(MIN_SEARCH_S))
}

/// The order fresh entries are searched in, most to gain first: matrix products before the rest (their default
/// schedules run at 0.7–0.9× of a library's speed on the H200, where the tensor family's defaults of pointwise
/// maps already reach the copy bandwidth), each in scan order.
fn search_order<'a>(fresh: Vec<usize>, spec_of: impl Fn(usize) -> &'a Spec) -> Vec<usize> {
    let mut order = fresh;
    order.sort_by_key(|&i| families::of(spec_of(i)).name() != "matmul");
    order
}

/// Tunes the freshly generated entries of `resolved` within the build's time budget, storing the winners in
/// `cache` and a copy in `user` (the per-user cache, where other crates on this machine find them); returns what
/// to tell the user.
pub(crate) fn run(
    kernels: &[FoundKernel],
    resolved: &mut [Resolved],
    settings: &Settings,
    cache: &Cache,
    user: Option<&Cache>,
    explicit: Option<f64>,
) -> Searched {
    let budget_s = explicit
        .or_else(|| env::var(env::OPTIML_BUILD_SEARCH_S).and_then(|v| v.trim().parse::<f64>().ok()))
        .or(settings.search.build_time_s)
        .unwrap_or(DEFAULT_BUILD_TIME_S);
    let fresh: Vec<usize> = (0..resolved.len())
        .filter(|&i| resolved[i].origin == Origin::Generated)
        .collect();
    if budget_s <= 0.0 || fresh.is_empty() || !probe::driver_present() {
        return Searched::default();
    }
    let device = match probe::devices() {
        Ok(d) if !d.is_empty() => d[0].clone(),
        _ => return Searched::default(),
    };
    let mut notes = Vec::new();
    let mut tuned = 0;
    let only = |note: String| Searched {
        notes: vec![note],
        tuned: 0,
    };
    let (nvrtc, worker) = match (nvrtc::load(), WorkerCommand::current_exe()) {
        (Ok(n), Ok(w)) => (n, w),
        (Err(e), _) => return only(format!("no search: {e}")),
        (_, Err(e)) => {
            return only(format!(
                "no search: cannot find the build script's executable: {e}"
            ));
        }
    };
    let runnable: Vec<usize> = fresh
        .into_iter()
        .filter(|&i| resolved[i].arch.cubin_runs_on(device.arch))
        .collect();
    let runnable = search_order(runnable, |i| &kernels[resolved[i].kernel].spec);
    let deadline = Instant::now() + Duration::from_secs_f64(budget_s);
    for (done, &i) in runnable.iter().enumerate() {
        let kernel = &kernels[resolved[i].kernel];
        let arch = resolved[i].arch;
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64();
        let Some(share) = share(left, runnable.len() - done) else {
            notes.push(format!(
                "`{}` on {arch}: not searched (the build's {budget_s:.0} s of search are spent); \
                 `cargo optiml tune` searches without a time limit",
                kernel.name
            ));
            continue;
        };
        let ks = match settings.kernel(&kernel.name) {
            Ok(k) => k,
            Err(e) => {
                notes.push(format!("`{}`: not searched: {e}", kernel.name));
                continue;
            }
        };
        let family = families::of(&kernel.spec);
        let shapes = match family.targets(&kernel.spec, &ks, None) {
            Ok(t) => t,
            Err(e) => {
                notes.push(format!("`{}`: not searched: {e}", kernel.name));
                continue;
            }
        };
        let per_shape = share / shapes.len() as f64;
        let options = TuneOptions {
            method: settings.search.method.unwrap_or(Method::Mcts),
            search: Config {
                time_limit: Duration::from_secs_f64(per_shape),
                ..settings.search_config()
            },
            seed: settings.search.seed.unwrap_or(0x0971_1111),
            timing: TimingPlan::default(),
            device: device.ordinal,
            also_on: Vec::new(),
            compile_threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            worker: worker.clone(),
            // A build stays quick: counters and the sanitizer are for `cargo optiml tune`.
            profiling: tune::Profiling::Off,
            sanitize: false,
        };
        let started = Instant::now();
        let mut buckets = Vec::new();
        for target in &shapes {
            let request = tune::Request {
                nvrtc,
                kernel,
                arch,
                target,
                settings: &ks,
                options: &options,
                roots: &[],
                rewriter: None,
            };
            match family.tune(&request, &mut |_| {}) {
                Ok(b) => {
                    notes.extend(b.roots.iter().map(|r| format!("`{}`: {r}", kernel.name)));
                    buckets.push(b);
                }
                Err(e) => notes.push(format!(
                    "`{}`: search failed, the default stays: {e}",
                    kernel.name
                )),
            }
        }
        if buckets.len() != shapes.len() {
            continue;
        }
        let generator = families::kernel_generator(kernel, arch);
        // Without its defaults the entry still serves every shape (by its nearest tuned variant).
        let taken: Vec<Option<[u64; 4]>> = buckets.iter().map(|b| b.shape).collect();
        let defaults = match crate::engine::free_bucket_defaults(nvrtc, kernel, arch, &taken) {
            Ok(d) => d,
            Err(e) => {
                notes.push(format!(
                    "`{}`: the other shape buckets' defaults did not compile, so the tuned variants serve them: {e}",
                    kernel.name
                ));
                Vec::new()
            }
        };
        match tune::store(cache, kernel, arch, &generator, &buckets, &[], &defaults) {
            Ok(entry) => {
                if let Some(Err(e)) = user.map(|u| u.adopt(&entry)) {
                    notes.push(format!(
                        "`{}`: the tuned entry could not be copied into the per-user cache: {e}",
                        kernel.name
                    ));
                }
                resolved[i].entry = entry;
                tuned += 1;
                let speedups: Vec<String> = buckets
                    .iter()
                    .map(|b| {
                        format!(
                            "{}: {:.2}× the default in {} candidates",
                            b.label,
                            b.default.time_ms / b.best.time_ms,
                            b.evaluations
                        )
                    })
                    .collect();
                notes.push(format!(
                    "searched `{}` on {} ({arch}) for {:.0} s: {}; `cargo optiml tune` searches longer and \
                     refreshes `.optiml/`",
                    kernel.name,
                    device.name,
                    started.elapsed().as_secs_f64(),
                    speedups.join("; ")
                ));
            }
            Err(e) => notes.push(format!(
                "`{}`: the search's winner could not be stored, the default stays: {e}",
                kernel.name
            )),
        }
    }
    Searched { notes, tuned }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_budget_searches_the_first_kernels_and_never_none() {
        // 20 s for 8 kernels: each share was 2.5 s, under the minimum, so the first five were skipped and the
        // budget went to the last three.
        assert_eq!(share(20.0, 8), Some(MIN_SEARCH_S));
        assert_eq!(share(60.0, 3), Some(20.0));
        assert_eq!(share(MIN_SEARCH_S - 0.1, 1), None);
    }

    #[test]
    fn matrix_products_are_searched_first() {
        let specs: Vec<Spec> = [
            "relu",
            "matmul, f32",
            "softmax over the last axis",
            "bmm, bf16",
        ]
        .map(|t| optiml_spec::parse(t).unwrap())
        .into();
        assert_eq!(search_order(vec![0, 1, 2, 3], |i| &specs[i]), [1, 3, 0, 2]);
    }
}
