//! Which variant a call launches when no variant was tuned at its shape.
//!
//! A kernel's variants for one architecture are the any-shape default, or one per tuned shape bucket (a tuned
//! matmul entry holds only those), or both. A call at a tuned shape launches that bucket's variant. Any other call
//! used to launch the nearest bucket's, which can be slower than the default (issue 17: 9.11 ms against the
//! default's 8.51 ms at 8205×2949·2949×5921). So the first call in a size class (each dimension rounded up to a
//! power of two), in each CUDA context, times the contenders at its shape instead: the nearest tuned
//! variants and the default where there is one, in alternating rounds. Every later call in that class launches
//! the fastest, without timing or allocating. `OPTIML_DISPATCH=nearest` skips the timing, a stream being
//! captured into a CUDA graph always gets the nearest (timing would break the capture), and so does every class
//! after the first 4096 of one kernel in one context (the table and the timing do not grow without bound).

use crate::Error;
use cudarc::driver::{CudaStream, sys};
use std::collections::HashMap;
use std::sync::Mutex;

/// How many tuned variants besides the default a first call times: the nearest few hold the likely winner, and
/// each costs a handful of launches once per shape.
const TUNED_CONTENDERS: usize = 3;

/// Timed rounds per contender (after one untimed round that loads and warms each): the median of five keeps a
/// single preempted launch from deciding.
const ROUNDS: usize = 5;

/// The most size classes one loaded kernel keeps a choice for, per context: a program whose shapes vary without
/// bound (each dimension its own power of two) stops timing there and launches the nearest tuned variant, so
/// neither the table (a few dozen bytes a class) nor the timing grows with it.
const MAX_CLASSES: usize = 4096;

/// The environment variable that chooses the dispatch rule.
pub const DISPATCH_VAR: &str = "OPTIML_DISPATCH";

/// The dispatch rule for calls at shapes no variant was tuned for ([`DISPATCH_VAR`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Time the default and the nearest tuned variants on a size class's first call; launch the fastest after
    /// (`measure`, the default).
    Measure,
    /// Launch the variant tuned nearest, untimed (`nearest`).
    Nearest,
}

impl Rule {
    /// The rule `value` names (`None`: the variable is unset).
    ///
    /// # Errors
    /// [`Error::Setting`] for any other value.
    pub fn parse(value: Option<&str>) -> Result<Rule, Error> {
        match value.map(str::trim) {
            None | Some("" | "measure") => Ok(Rule::Measure),
            Some("nearest") => Ok(Rule::Nearest),
            Some(other) => Err(Error::Setting {
                var: DISPATCH_VAR,
                value: other.to_string(),
                expected: "`measure` (the default) or `nearest`",
            }),
        }
    }

    /// The rule the environment sets.
    ///
    /// # Errors
    /// As [`Rule::parse`].
    #[allow(clippy::disallowed_methods)] // read by the running program at launch, not by a build script
    pub fn from_env() -> Result<Rule, Error> {
        match std::env::var(DISPATCH_VAR) {
            Ok(v) => Rule::parse(Some(&v)),
            Err(std::env::VarError::NotPresent) => Rule::parse(None),
            Err(std::env::VarError::NotUnicode(v)) => Rule::parse(Some(&v.to_string_lossy())),
        }
    }
}

/// How far apart two shape keys are for dispatch: log-distance of the product of the first two dimensions (a
/// batch folds into rows), of the third and of the fourth, so 2× off in any of them counts the same at every
/// scale.
pub(crate) fn shape_distance(a: [u64; 4], b: [u64; 4]) -> f64 {
    let l = |x: u64| ((x as f64) + 1.0).ln();
    (l(a[0].saturating_mul(a[1])) - l(b[0].saturating_mul(b[1]))).abs()
        + (l(a[2]) - l(b[2])).abs()
        + (l(a[3]) - l(b[3])).abs()
}

/// The index of the variant to launch for `want` among variants tuned for `shapes`, untimed: the nearest tuned
/// one, else the first for any shape, else the first.
pub(crate) fn nearest(
    shapes: impl Iterator<Item = Option<[u64; 4]>> + Clone,
    want: Option<[u64; 4]>,
) -> usize {
    want.and_then(|want| {
        shapes
            .clone()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (i, shape_distance(s, want))))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    })
    .or_else(|| shapes.clone().position(|s| s.is_none()))
    .unwrap_or(0)
}

/// The key a measured choice is kept under: each dimension rounded up to a power of two, so a program whose
/// shapes vary (a sequence length, a batch) times once per size class, not once per size; the first call of
/// the class times the contenders at its own shape.
pub(crate) fn anchor(shape: [u64; 4]) -> [u64; 4] {
    shape.map(|d| d.checked_next_power_of_two().unwrap_or(u64::MAX))
}

/// The variants worth timing for a call at `want`: just the one tuned at exactly `want` when there is one;
/// else the first any-shape variant and the [`TUNED_CONTENDERS`] nearest tuned ones, nearest first. One entry
/// means there is nothing to time.
pub(crate) fn contenders(shapes: &[Option<[u64; 4]>], want: [u64; 4]) -> Vec<usize> {
    if let Some(i) = shapes.iter().position(|s| *s == Some(want)) {
        return vec![i];
    }
    let mut tuned: Vec<(usize, f64)> = shapes
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.map(|s| (i, shape_distance(s, want))))
        .collect();
    tuned.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut out: Vec<usize> = shapes
        .iter()
        .position(Option::is_none)
        .into_iter()
        .collect();
    out.extend(tuned.iter().take(TUNED_CONTENDERS).map(|&(i, _)| i));
    if out.is_empty() {
        out.push(0);
    }
    out
}

/// The index of the fastest contender by median time (`times[c]`: contender `c`'s rounds, in ms); the first on
/// a tie, so the default wins when nothing is faster.
pub(crate) fn fastest(times: &[Vec<f32>]) -> usize {
    let median = |t: &Vec<f32>| {
        let mut t = t.clone();
        t.sort_by(f32::total_cmp);
        t.get(t.len() / 2).copied().unwrap_or(f32::INFINITY)
    };
    let medians: Vec<f32> = times.iter().map(median).collect();
    (0..medians.len()).fold(
        0,
        |best, c| {
            if medians[c] < medians[best] { c } else { best }
        },
    )
}

/// The variant each measured shape launches, per loaded context.
#[derive(Debug, Default)]
pub(crate) struct Choices(Mutex<HashMap<[u64; 4], usize>>);

impl Choices {
    /// The choice made for `shape`'s size class ([`anchor`]).
    pub(crate) fn get(&self, shape: [u64; 4]) -> Option<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&anchor(shape))
            .copied()
    }

    /// Keeps `variant` for `shape`'s size class while fewer than [`MAX_CLASSES`] are kept.
    fn set(&self, shape: [u64; 4], variant: usize) {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() < MAX_CLASSES {
            kept.insert(anchor(shape), variant);
        }
    }

    /// Whether no other size class will be kept ([`MAX_CLASSES`]).
    fn full(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len() >= MAX_CLASSES
    }
}

/// The variant (an index into `shapes`) to launch at `shape` on `stream` when no variant is tuned exactly there
/// (the caller launches that one) and its size class has no choice yet ([`Choices::get`]): the only contender,
/// or the fastest of [`contenders`], timed by `run`
/// (which launches variant `i` on `stream` so that the call's own launch afterwards gives the same result: into
/// the output it overwrites anyway, or into scratch memory). Concurrent first calls at one shape may each time
/// the contenders; they agree up to noise, and the last one's choice stays.
///
/// # Errors
/// [`Error::Setting`] for a bad [`DISPATCH_VAR`], the driver's errors while timing, and `run`'s errors.
pub(crate) fn choose(
    kernel: &'static str,
    stream: &CudaStream,
    shapes: &[Option<[u64; 4]>],
    shape: [u64; 4],
    choices: &Choices,
    mut run: impl FnMut(usize) -> Result<(), Error>,
) -> Result<usize, Error> {
    let contenders = contenders(shapes, shape);
    if let [only] = contenders[..] {
        choices.set(shape, only);
        return Ok(only);
    }
    let capturing = stream.capture_status().map_err(Error::driver(
        kernel,
        "ask whether the stream is being captured",
    ))? != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    if capturing || choices.full() || Rule::from_env()? == Rule::Nearest {
        return Ok(nearest(shapes.iter().copied(), Some(shape)));
    }
    // The untimed round: a contender that cannot launch at this shape drops out (the call fails only when none
    // can, with the first one's error).
    let mut first_error = None;
    let mut survivors = Vec::with_capacity(contenders.len());
    for i in contenders {
        match run(i) {
            Ok(()) => survivors.push(i),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match (survivors.as_slice(), first_error) {
        ([], Some(e)) => return Err(e),
        (&[only], _) => {
            choices.set(shape, only);
            return Ok(only);
        }
        _ => {}
    }
    let ctx = stream.context();
    let event = || {
        ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(Error::driver(kernel, "create a timing event"))
    };
    let mut marks = Vec::with_capacity(ROUNDS * survivors.len());
    for _ in 0..ROUNDS {
        for (c, &i) in survivors.iter().enumerate() {
            let (start, end) = (event()?, event()?);
            start
                .record(stream)
                .map_err(Error::driver(kernel, "record a timing event"))?;
            run(i)?;
            end.record(stream)
                .map_err(Error::driver(kernel, "record a timing event"))?;
            marks.push((c, start, end));
        }
    }
    let mut times = vec![Vec::with_capacity(ROUNDS); survivors.len()];
    for (c, start, end) in marks {
        times[c].push(
            start
                .elapsed_ms(&end)
                .map_err(Error::driver(kernel, "read a timing event"))?,
        );
    }
    let chosen = survivors
        .get(fastest(&times))
        .copied()
        .unwrap_or_else(|| nearest(shapes.iter().copied(), Some(shape)));
    choices.set(shape, chosen);
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_pick_the_nearest_tuned_variant() {
        let tuned = [Some([256, 1024, 1024, 1024]), Some([16, 1024, 1024, 1024])];
        assert_eq!(
            nearest(tuned.iter().copied(), Some([200, 1024, 1024, 1024])),
            0
        );
        assert_eq!(
            nearest(tuned.iter().copied(), Some([8, 1024, 1024, 1024])),
            1
        );
        assert_eq!(nearest(tuned.iter().copied(), None), 0);
        let mixed = [None, Some([16, 64, 64, 64])];
        assert_eq!(
            nearest(mixed.iter().copied(), Some([1, 4096, 4096, 4096])),
            1
        );
        assert_eq!(nearest(mixed.iter().copied(), None), 0);
        // A tensor program tuned at 16384 rows of 16384, beside the untuned row-length buckets (keyed at 4096
        // rows): the winner for calls at its shape, the bucket for calls far from it. A winner without a key
        // would never be picked while a keyed variant exists.
        let rows = [
            Some([16384, 1, 16384, 1]),
            Some([4096, 1, 2048, 1]),
            Some([4096, 1, 16384, 1]),
        ];
        assert_eq!(nearest(rows.iter().copied(), Some([16384, 1, 16384, 1])), 0);
        assert_eq!(nearest(rows.iter().copied(), Some([12000, 1, 16384, 1])), 0);
        assert_eq!(nearest(rows.iter().copied(), Some([1000, 1, 16384, 1])), 2);
        assert_eq!(nearest(rows.iter().copied(), Some([16384, 1, 2048, 1])), 1);
        let unkeyed = [None, Some([4096, 1, 16384, 1])];
        assert_eq!(
            nearest(unkeyed.iter().copied(), Some([16384, 1, 16384, 1])),
            1
        );
    }

    #[test]
    fn shape_distance_is_symmetric_and_scale_free() {
        let a = [16, 1024, 1024, 1024];
        let b = [256, 1024, 1024, 1024];
        let c = [1, 16384, 1024, 1024];
        assert_eq!(shape_distance(a, a), 0.0);
        assert!((shape_distance(a, b) - shape_distance(b, a)).abs() < 1e-12);
        // The same rows spread over batch items or one tall matrix are the same work for a batched tile.
        assert!(shape_distance(a, c) < 1e-3);
        assert!(shape_distance(a, [16, 1024, 1024, 64]) > 2.0);
    }

    /// A call at a tuned shape times nothing; any other call times the default against the nearest tuned
    /// variants (at most three), nearest first; an entry without a default times its tuned variants.
    #[test]
    fn contenders_are_the_default_and_the_nearest_tuned_variants() {
        let shapes = [
            None,
            Some([1, 8192, 8192, 8192]),
            Some([1, 4096, 4096, 4096]),
            Some([1, 1024, 1024, 1024]),
            Some([256, 1024, 1024, 1024]),
            Some([1, 128, 128, 128]),
        ];
        assert_eq!(contenders(&shapes, [1, 4096, 4096, 4096]), [2]);
        // The shape the issue measured: 8205 × 2949 · 2949 × 5921.
        assert_eq!(contenders(&shapes, [1, 8205, 5921, 2949]), [0, 1, 2, 3]);
        assert_eq!(contenders(&shapes, [1, 100, 100, 100]), [0, 5, 3, 2]);
        assert_eq!(contenders(&[None], [1, 5, 5, 5]), [0]);
        assert_eq!(contenders(&[None, None], [1, 5, 5, 5]), [0]);
        let tuned_only = [Some([1, 64, 64, 64]), Some([1, 4096, 4096, 4096])];
        assert_eq!(contenders(&tuned_only, [1, 2000, 2000, 2000]), [1, 0]);
        assert_eq!(contenders(&[], [1, 5, 5, 5]), [0]);
    }

    /// Shapes of one size class share a choice; the next power of two starts another.
    #[test]
    fn choices_are_kept_per_power_of_two_class() {
        assert_eq!(anchor([3, 777, 555, 333]), [4, 1024, 1024, 512]);
        assert_eq!(anchor([4, 1024, 1024, 512]), [4, 1024, 1024, 512]);
        assert_eq!(anchor([0, 1, 1025, u64::MAX]), [1, 1, 2048, u64::MAX]);
        let choices = Choices::default();
        choices.set([1, 8205, 5921, 2949], 2);
        assert_eq!(choices.get([1, 9000, 6000, 3000]), Some(2));
        assert_eq!(choices.get([1, 8192, 6000, 3000]), None);
        // The table stops growing at its cap; what it holds stays.
        for b in 0..2 * MAX_CLASSES as u64 {
            choices.set([1 << (b % 64), 1 << (b / 64 % 64), 1 << (b / 4096), 1], 1);
        }
        assert!(choices.full());
        assert_eq!(choices.0.lock().unwrap().len(), MAX_CLASSES);
        assert_eq!(choices.get([1, 9000, 6000, 3000]), Some(2));
    }

    /// The lowest median wins, whatever the outliers; a tie keeps the first contender (the default).
    #[test]
    fn the_fastest_is_the_lowest_median() {
        let default = vec![8.5, 8.6, 8.4, 8.5, 30.0];
        let tuned = vec![9.1, 9.2, 1.0, 9.0, 9.1];
        assert_eq!(fastest(&[default.clone(), tuned]), 0);
        assert_eq!(fastest(&[vec![2.0; 5], vec![1.0, 1.0, 1.0, 50.0, 50.0]]), 1);
        assert_eq!(fastest(&[vec![3.0; 5], vec![3.0; 5]]), 0);
        assert_eq!(fastest(&[vec![], default]), 1);
    }

    #[test]
    fn the_rule_is_measure_unless_set_to_nearest() {
        assert_eq!(Rule::parse(None).unwrap(), Rule::Measure);
        assert_eq!(Rule::parse(Some("measure")).unwrap(), Rule::Measure);
        assert_eq!(Rule::parse(Some(" nearest ")).unwrap(), Rule::Nearest);
        let e = Rule::parse(Some("fastest")).unwrap_err().to_string();
        assert!(
            e.contains("OPTIML_DISPATCH") && e.contains("fastest") && e.contains("nearest"),
            "{e}"
        );
    }
}
