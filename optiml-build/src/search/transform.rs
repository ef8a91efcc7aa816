//! Transformations as typed objects: a name, the bottleneck it addresses, the gain it claims, and its effect on a
//! schedule (`None` when its precondition does not hold).

use super::reward::Bottleneck;
use crate::experts::matmul::Schedule;

/// One transformation of a matmul schedule.
#[derive(Clone, Copy, Debug)]
pub struct Transform {
    /// Short name, unique in its catalog.
    pub name: &'static str,
    /// What it does and why it should help.
    pub rationale: &'static str,
    /// The bottleneck it addresses (the seed's routing, §3.1).
    pub addresses: Bottleneck,
    /// The speed-up it claims when it applies to that bottleneck (reported next to the measured one).
    pub claimed_gain: f64,
    /// Its effect; `None` when the precondition fails or the result is not a schedule the template supports.
    pub apply: fn(&Schedule) -> Option<Schedule>,
}

impl Transform {
    /// Applies the transformation, checking the template's constraints.
    pub fn apply_to(&self, s: &Schedule) -> Option<Schedule> {
        (self.apply)(s).filter(|t| t.is_valid() && t != s)
    }
}

impl PartialEq for Transform {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// The matmul family's transformations over the template's schedule space.
pub fn matmul_catalog() -> Vec<Transform> {
    vec![
        Transform {
            name: "grow-block-n",
            rationale: "a wider block tile reuses each loaded row of A across more columns: fewer DRAM/L2 bytes per FLOP",
            addresses: Bottleneck::Memory,
            claimed_gain: 1.10,
            apply: |s| Some(Schedule { bn: s.bn * 2, ..*s }),
        },
        Transform {
            name: "grow-block-m",
            rationale: "a taller block tile reuses each loaded column of B across more rows",
            addresses: Bottleneck::Memory,
            claimed_gain: 1.10,
            apply: |s| Some(Schedule { bm: s.bm * 2, ..*s }),
        },
        Transform {
            name: "deepen-k-tile",
            rationale: "a deeper k-slice per stage halves the barriers per FLOP and keeps more loads in flight",
            addresses: Bottleneck::Memory,
            claimed_gain: 1.05,
            apply: |s| Some(Schedule { bk: s.bk * 2, ..*s }),
        },
        Transform {
            name: "grow-thread-tile",
            rationale: "a larger register tile does more FMAs per shared-memory load (higher arithmetic intensity per thread)",
            addresses: Bottleneck::Compute,
            claimed_gain: 1.15,
            apply: |s| {
                if s.tm <= s.tn {
                    Some(Schedule { tm: s.tm * 2, ..*s })
                } else {
                    Some(Schedule { tn: s.tn * 2, ..*s })
                }
            },
        },
        Transform {
            name: "shallow-k-tile",
            rationale: "a shallower k-slice frees registers and shared memory for more resident warps",
            addresses: Bottleneck::Compute,
            claimed_gain: 1.03,
            apply: |s| Some(Schedule { bk: s.bk / 2, ..*s }),
        },
        Transform {
            name: "shrink-block-n",
            rationale: "a narrower block tile makes more blocks: fills the SMs on small or skinny problems",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.05,
            apply: |s| Some(Schedule { bn: s.bn / 2, ..*s }),
        },
        Transform {
            name: "shrink-block-m",
            rationale: "a shorter block tile makes more blocks",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.05,
            apply: |s| Some(Schedule { bm: s.bm / 2, ..*s }),
        },
        Transform {
            name: "shrink-thread-tile",
            rationale: "a smaller register tile lowers register pressure: more resident warps to hide latency",
            addresses: Bottleneck::Mixed,
            claimed_gain: 1.05,
            apply: |s| {
                if s.tm >= s.tn {
                    Some(Schedule { tm: s.tm / 2, ..*s })
                } else {
                    Some(Schedule { tn: s.tn / 2, ..*s })
                }
            },
        },
    ]
}

/// Proposes the transformations to try from a node. An LLM expert implements this too.
pub trait Proposer {
    /// Transformations applicable to `schedule`, best first, for a node classified as `bottleneck`.
    fn propose(&self, schedule: &Schedule, bottleneck: Bottleneck) -> Vec<Transform>;
}

/// The seed's routing: transformations that address the node's bottleneck first, then the rest (so a search is
/// never stuck when the classification is wrong), each only where its precondition holds.
#[derive(Clone, Debug)]
pub struct RoutedProposer {
    catalog: Vec<Transform>,
}

impl RoutedProposer {
    /// Routes over `catalog`.
    pub fn new(catalog: Vec<Transform>) -> Self {
        Self { catalog }
    }
}

impl Proposer for RoutedProposer {
    fn propose(&self, schedule: &Schedule, bottleneck: Bottleneck) -> Vec<Transform> {
        let applicable = self
            .catalog
            .iter()
            .filter(|t| t.apply_to(schedule).is_some());
        let (mut first, rest): (Vec<Transform>, Vec<Transform>) =
            applicable.partition(|t| t.addresses == bottleneck);
        first.extend(rest);
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_names_are_unique_and_effects_stay_in_the_template_space() {
        let catalog = matmul_catalog();
        let mut names: Vec<&str> = catalog.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), catalog.len());
        for s in Schedule::all() {
            for t in &catalog {
                if let Some(out) = t.apply_to(&s) {
                    assert!(out.is_valid(), "{} on {s:?}", t.name);
                }
            }
        }
    }

    #[test]
    fn routing_puts_the_bottleneck_first_and_respects_preconditions() {
        let p = RoutedProposer::new(matmul_catalog());
        let default = Schedule {
            bm: 128,
            bn: 128,
            bk: 8,
            tm: 8,
            tn: 8,
        };
        let mem = p.propose(&default, Bottleneck::Memory);
        // The block tile is at its maximum: growing it does not apply.
        assert!(
            mem.iter()
                .all(|t| t.name != "grow-block-n" && t.name != "grow-block-m")
        );
        assert_eq!(mem[0].name, "deepen-k-tile");
        let small = Schedule {
            bm: 128,
            bn: 128,
            bk: 16,
            tm: 4,
            tn: 4,
        };
        let compute = p.propose(&small, Bottleneck::Compute);
        assert_eq!(compute[0].addresses, Bottleneck::Compute);
        assert_eq!(p.propose(&small, Bottleneck::Memory).len(), compute.len());
    }
}
