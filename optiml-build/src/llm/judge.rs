//! The LLM judge (OptiML-X, issue 16 §3; the seed's LLM-as-a-judge): for each edit the search measures, the
//! model reads the change (the transformation, the schedule before and after) and the profile of both sides,
//! and answers the seed's contract, `KEEP` or `DISCARD` with a plausibility score in [-1, 1]. It is advisory:
//! the score is the reward's judge term, weighted 0.2 as in the seed, beside the measured time and
//! speed-of-light terms, and the deterministic rule ([`DeterministicJudge`]) stays the default. An answer that
//! does not follow the contract, or a model that cannot be asked, gets the deterministic verdict, counted. Every
//! exchange is recorded with the verdict read from it, so a search replays with no endpoint.

use super::{Llm, Message, Role};
use crate::search::{DeterministicJudge, Edit, Judge, Measurement, Verdict};
use std::sync::Mutex;

/// The instructions every request starts with.
const SYSTEM: &str = "You judge one edit in a search for the fastest CUDA kernel: a transformation of the kernel's \
schedule, measured on the GPU before and after. Decide whether the search should keep building on it. Weigh the \
time, and whether the change is plausible for the kernel's bottleneck (a memory-bound kernel gains from less DRAM \
traffic, a compute-bound one from more throughput); distrust a gain that came with far more DRAM traffic or with \
register spills. Answer one line: KEEP or DISCARD, then a score from -1 (surely wrong) to 1 (surely right).";

/// What the judge did over a search.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JudgeStats {
    /// Edits the model was asked about.
    pub asked: usize,
    /// Of those, answers read back from the recordings.
    pub replayed: usize,
    /// Requests that failed (endpoint, replay-only miss): the deterministic verdict was used.
    pub failed: usize,
    /// Answers outside the contract: the deterministic verdict was used.
    pub unreadable: usize,
    /// Answers whose decision (keep or discard) differed from the deterministic rule's.
    pub overruled: usize,
}

/// A [`Judge`] that asks the model.
pub struct LlmJudge<'a> {
    llm: &'a Llm,
    kernel: String,
    stats: Mutex<JudgeStats>,
}

impl<'a> LlmJudge<'a> {
    /// Judges the edits of the search of the kernel `kernel` describes (its spec and shape, as the prompt shows
    /// it).
    pub fn new(llm: &'a Llm, kernel: impl Into<String>) -> Self {
        LlmJudge {
            llm,
            kernel: kernel.into(),
            stats: Mutex::new(JudgeStats::default()),
        }
    }

    /// What it did so far.
    pub fn stats(&self) -> JudgeStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn prompt(&self, edit: &Edit<'_>, baseline: &Measurement, candidate: &Measurement) -> String {
        let side = |m: &Measurement| {
            let pct = |v: Option<f64>| v.map_or("unmeasured".to_string(), |v| format!("{v:.1}%"));
            format!(
                "{:.4} ms; DRAM bytes {}; SM speed-of-light {}; DRAM speed-of-light {}; {} registers, {} bytes \
                 spilled",
                m.time_ms,
                m.dram_bytes
                    .map_or("unmeasured".to_string(), |b| format!("{b:.3e}")),
                pct(m.sm_sol),
                pct(m.dram_sol),
                m.registers,
                m.spill_bytes
            )
        };
        format!(
            "Kernel: {}\nEdit: {}\nBefore: {}\n  {}\nAfter: {}\n  {}\nSpeed-up: {:.3}x",
            self.kernel,
            edit.transform,
            edit.from,
            side(baseline),
            edit.to,
            side(candidate),
            baseline.time_ms / candidate.time_ms.max(1e-12)
        )
    }
}

/// The verdict an answer gives under the contract: its first `KEEP` or `DISCARD`, with the first number after
/// it clamped to [-1, 1]. A keep's score is never below 0; a discard's is the number's magnitude, negated (the
/// seed's discards score -0.5 and -0.8; a model may also write "DISCARD 0.8" for its confidence). `None` outside
/// the contract.
pub fn read(answer: &str) -> Option<Verdict> {
    let words: Vec<&str> = answer
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ':' | '(' | ')' | '*' | '`'))
        .filter(|w| !w.is_empty())
        .collect();
    let at = words
        .iter()
        .position(|w| w.eq_ignore_ascii_case("keep") || w.eq_ignore_ascii_case("discard"))?;
    let keep = words[at].eq_ignore_ascii_case("keep");
    let score = words[at + 1..]
        .iter()
        .find_map(|w| w.trim_end_matches('.').parse::<f64>().ok())
        .filter(|s| s.is_finite())?
        .clamp(-1.0, 1.0);
    Some(if keep {
        Verdict::Keep(score.max(0.0))
    } else {
        Verdict::Discard(-score.abs())
    })
}

impl Judge for LlmJudge<'_> {
    fn judge(&self, baseline: &Measurement, candidate: &Measurement) -> Verdict {
        DeterministicJudge.judge(baseline, candidate)
    }

    fn judge_edit(
        &self,
        edit: &Edit<'_>,
        baseline: &Measurement,
        candidate: &Measurement,
    ) -> Verdict {
        let rule = DeterministicJudge.judge(baseline, candidate);
        let messages = vec![
            Message::new(Role::System, SYSTEM),
            Message::new(Role::User, self.prompt(edit, baseline, candidate)),
        ];
        let answer = self.llm.chat(messages);
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *stats;
        let Some(answer) = super::counted(answer, (&mut s.asked, &mut s.failed, &mut s.replayed))
        else {
            return rule;
        };
        let (verdict, said) = match read(&answer.value.content) {
            Some(v) => {
                let differs = matches!(v, Verdict::Keep(_)) != matches!(rule, Verdict::Keep(_));
                stats.overruled += usize::from(differs);
                (v, format!("judged {v:?}"))
            }
            None => {
                stats.unreadable += 1;
                (rule, format!("outside the contract: the rule's {rule:?}"))
            }
        };
        let _ = self.llm.recorder().set_verdict(&answer.key, &said);
        verdict
    }
}
