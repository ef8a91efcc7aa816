//! Transformations as typed objects: a name, the bottleneck it addresses, the gain it claims, and its effect on a
//! schedule (`None` when its precondition does not hold).

use super::Tunable;
use super::reward::Bottleneck;

/// One transformation of a schedule of type `S`. Each kernel's catalog of them lives beside its template, in its
/// family's folder.
#[derive(Clone, Copy, Debug)]
pub struct Transform<S> {
    /// Short name, unique in its catalog.
    pub name: &'static str,
    /// What it does and why it should help.
    pub rationale: &'static str,
    /// The bottleneck it addresses (the seed's routing, §3.1).
    pub addresses: Bottleneck,
    /// The speed-up it claims when it applies to that bottleneck (reported next to the measured one).
    pub claimed_gain: f64,
    /// Its effect; `None` when the precondition fails or the result is not a schedule the template supports.
    pub apply: fn(&S) -> Option<S>,
}

impl<S: Tunable> Transform<S> {
    /// Applies the transformation, checking the template's constraints.
    pub fn apply_to(&self, s: &S) -> Option<S> {
        (self.apply)(s).filter(|t| t.is_valid() && t != s)
    }
}

impl<S> PartialEq for Transform<S> {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// Proposes the transformations to try from a node. An LLM expert implements this too.
pub trait Proposer<S> {
    /// Transformations applicable to `schedule`, best first, for a node classified as `bottleneck`.
    fn propose(&self, schedule: &S, bottleneck: Bottleneck) -> Vec<Transform<S>>;
}

/// Another proposer's transformations, less those whose result is the same kernel as the schedule it starts from
/// under `same` (a knob the launcher adapts to the problem being tuned, such as a split factor it lowers to
/// the count it already runs), so no evaluation is spent on a renamed kernel.
pub struct DistinctProposer<P, S> {
    inner: P,
    same: Box<SameKernel<S>>,
}

/// Whether two schedules launch the same kernel for the problem at hand.
type SameKernel<S> = dyn Fn(&S, &S) -> bool + Send + Sync;

impl<P, S> DistinctProposer<P, S> {
    /// Filters `inner`'s proposals with `same(from, to)`.
    pub fn new(inner: P, same: impl Fn(&S, &S) -> bool + Send + Sync + 'static) -> Self {
        Self {
            inner,
            same: Box::new(same),
        }
    }
}

impl<P: Proposer<S>, S: Tunable> Proposer<S> for DistinctProposer<P, S> {
    fn propose(&self, schedule: &S, bottleneck: Bottleneck) -> Vec<Transform<S>> {
        self.inner
            .propose(schedule, bottleneck)
            .into_iter()
            .filter(|t| {
                t.apply_to(schedule)
                    .is_some_and(|to| !(self.same)(schedule, &to))
            })
            .collect()
    }
}

/// The seed's routing: transformations that address the node's bottleneck first, then the rest (so a search is
/// never stuck when the classification is wrong), each only where its precondition holds.
#[derive(Clone, Debug)]
pub struct RoutedProposer<S> {
    catalog: Vec<Transform<S>>,
}

impl<S: Tunable> RoutedProposer<S> {
    /// Routes over `catalog`.
    pub fn new(catalog: Vec<Transform<S>>) -> Self {
        Self { catalog }
    }
}

impl<S: Tunable> Proposer<S> for RoutedProposer<S> {
    fn propose(&self, schedule: &S, bottleneck: Bottleneck) -> Vec<Transform<S>> {
        let applicable = self
            .catalog
            .iter()
            .filter(|t| t.apply_to(schedule).is_some());
        let (mut first, rest): (Vec<Transform<S>>, Vec<Transform<S>>) =
            applicable.partition(|t| t.addresses == bottleneck);
        first.extend(rest);
        first
    }
}
