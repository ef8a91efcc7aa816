//! The LLM proposer (OptiML-X, issue 16 §3): at each node it expands, the search asks the model which of the
//! typed catalog's transformations to try first, given the kernel, the node's schedule and its measured
//! bottleneck. The answer only orders what the catalog offers: names the model makes up are ignored, and every
//! applicable transformation it leaves out follows in the routed order ([`RoutedProposer`]), so a poor answer
//! costs evaluations, never a reachable schedule. When the model cannot be asked, the routed order stands alone
//! and the failure is counted. Every exchange is recorded (its verdict lists what was proposed), so a search
//! replays with no endpoint.

use super::{Llm, Message, Role};
use crate::search::{Bottleneck, Proposer, RoutedProposer, Transform, Tunable};
use std::sync::Mutex;

/// The instructions every request starts with.
const SYSTEM: &str = "You steer a search for the fastest CUDA kernel. Each step applies one code transformation \
to the current kernel and measures it on the GPU. From the list you are given, pick the transformations to try \
next, best first. Answer with their names, one per line, nothing else.";

/// What the proposer did over a search.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProposerStats {
    /// Nodes the model was asked about (a node with one applicable transformation is not asked).
    pub asked: usize,
    /// Of those, answers read back from the recordings.
    pub replayed: usize,
    /// Requests that failed (endpoint, replay-only miss): the routed order was used.
    pub failed: usize,
    /// Answers that named at least one applicable transformation.
    pub useful: usize,
    /// Names in answers that are no applicable transformation.
    pub unknown_names: usize,
}

/// A [`Proposer`] that orders the catalog by the model's answer.
pub struct LlmProposer<'a, S> {
    llm: &'a Llm,
    routed: RoutedProposer<S>,
    kernel: String,
    stats: Mutex<ProposerStats>,
}

impl<'a, S: Tunable> LlmProposer<'a, S> {
    /// Proposes from `catalog` for the kernel `kernel` describes (its spec and shape, as the prompt shows it).
    pub fn new(llm: &'a Llm, catalog: Vec<Transform<S>>, kernel: impl Into<String>) -> Self {
        LlmProposer {
            llm,
            routed: RoutedProposer::new(catalog),
            kernel: kernel.into(),
            stats: Mutex::new(ProposerStats::default()),
        }
    }

    /// What it did so far.
    pub fn stats(&self) -> ProposerStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The request for one node.
    fn prompt(&self, schedule: &S, bottleneck: Bottleneck, options: &[Transform<S>]) -> String {
        let mut text = format!(
            "Kernel: {}\nCurrent schedule: {}\nMeasured bottleneck: {}\nTransformations that apply:\n",
            self.kernel,
            schedule.describe(),
            match bottleneck {
                Bottleneck::Memory => "memory (DRAM throughput above the SM's)",
                Bottleneck::Compute => "compute (SM throughput above DRAM's)",
                Bottleneck::Mixed => "neither dominates",
            }
        );
        for t in options {
            let addresses = match t.addresses {
                Bottleneck::Memory => "memory",
                Bottleneck::Compute => "compute",
                Bottleneck::Mixed => "either",
            };
            text.push_str(&format!(
                "- {} (for {addresses}-bound kernels, claims {:+.0}%): {}\n",
                t.name,
                (t.claimed_gain - 1.0) * 100.0,
                t.rationale
            ));
        }
        text.push_str("Which should the search try first?");
        text
    }
}

/// The applicable names `answer` mentions, in the order it first mentions them, and how many other words look
/// like names (contain a hyphen and no space) without being one.
pub fn named<'n>(answer: &str, names: &[&'n str]) -> (Vec<&'n str>, usize) {
    let mut found = Vec::new();
    let mut unknown = 0;
    for token in answer.split(|c: char| c.is_whitespace() || c == ',') {
        let word =
            token.trim_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        let word = word.trim_start_matches('-');
        if word.is_empty() {
            continue;
        }
        match names.iter().find(|n| n.eq_ignore_ascii_case(word)) {
            Some(n) if !found.contains(n) => found.push(*n),
            Some(_) => {}
            None if word.contains('-') => unknown += 1,
            None => {}
        }
    }
    (found, unknown)
}

impl<S: Tunable> Proposer<S> for LlmProposer<'_, S> {
    fn propose(&self, schedule: &S, bottleneck: Bottleneck) -> Vec<Transform<S>> {
        let routed = self.routed.propose(schedule, bottleneck);
        if routed.len() < 2 {
            return routed;
        }
        let messages = vec![
            Message::new(Role::System, SYSTEM),
            Message::new(Role::User, self.prompt(schedule, bottleneck, &routed)),
        ];
        let answer = self.llm.chat(messages);
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *stats;
        let Some(answer) = super::counted(answer, (&mut s.asked, &mut s.failed, &mut s.replayed))
        else {
            return routed;
        };
        let names: Vec<&str> = routed.iter().map(|t| t.name).collect();
        let (picked, unknown) = named(&answer.value.content, &names);
        stats.unknown_names += unknown;
        stats.useful += usize::from(!picked.is_empty());
        let verdict = if picked.is_empty() {
            "proposed nothing applicable: routed order".to_string()
        } else {
            format!("proposed {}", picked.join(", "))
        };
        let _ = self.llm.recorder().set_verdict(&answer.key, &verdict);
        let mut ordered: Vec<Transform<S>> = picked
            .iter()
            .filter_map(|n| routed.iter().find(|t| t.name == *n).cloned())
            .collect();
        ordered.extend(routed.into_iter().filter(|t| !picked.contains(&t.name)));
        ordered
    }
}
