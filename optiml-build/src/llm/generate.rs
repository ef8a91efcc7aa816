//! OptiML-G's generation step: an expert writes a kernel against a [`Contract`] (the entry point's ABI, how it is
//! launched, what it computes, how it is checked); the [`super::guard`] and NVRTC check the answer, and
//! what fails goes back to the same expert, with the reason, for a few repair rounds, as CudaForge does. Each
//! exchange's verdict is written into its recording. What compiles is a candidate like any other: it still has
//! to pass the gate in the evaluation worker before it is timed or cached.

use super::experts::Expert;
use super::guard::{self, Refusal};
use super::{Llm, Message, Role};
use crate::nvrtc::Compiled;
use optiml_runtime::Launch;

/// What a kernel must be, in the words the expert reads, and the launch the runtime will use for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Contract {
    /// The entry point's name.
    pub entry: &'static str,
    /// The request, in words: the ABI, the launch, the computation, the check.
    pub text: String,
    /// How the runtime launches the kernel.
    pub launch: Launch,
    /// What precedes every answer when it is compiled and kept (a 16-bit program's `#include` of the
    /// conversions; empty for f32), so that an answer needs no include of its own (the header's guard makes a
    /// second one harmless).
    pub prelude: &'static str,
}

/// What became of one answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The endpoint failed (nothing to repair).
    Failed(String),
    /// The guard refused the code.
    Refused(Refusal),
    /// NVRTC rejected the code, with the start of its log.
    Rejected(String),
    /// It compiled.
    Compiled,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Failed(e) => write!(f, "failed: {e}"),
            Verdict::Refused(r) => write!(f, "refused: {r}"),
            Verdict::Rejected(log) => write!(f, "compile: {}", log.lines().next().unwrap_or("")),
            Verdict::Compiled => f.write_str("compiled"),
        }
    }
}

/// One answer of the expert.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt {
    /// The expert.
    pub expert: String,
    /// 0 for the first answer, then each repair round.
    pub round: usize,
    /// The exchange's key in the recordings (empty when the endpoint failed).
    pub key: String,
    /// Read back from a recording.
    pub replayed: bool,
    /// What became of it.
    pub verdict: Verdict,
}

/// What an expert wrote: every attempt, and the kernel that compiled, if one did.
#[derive(Clone, Debug)]
pub struct Written {
    /// Every answer, in order.
    pub attempts: Vec<Attempt>,
    /// The source that compiled and its compiled form.
    pub kernel: Option<(String, Compiled)>,
}

/// The lines of a compile log worth showing the model: its errors first, at most 30 lines.
fn log_excerpt(log: &str) -> String {
    let mut lines: Vec<&str> = log.lines().filter(|l| l.contains("error")).collect();
    if lines.is_empty() {
        lines = log.lines().collect();
    }
    lines.into_iter().take(30).collect::<Vec<_>>().join("\n")
}

/// Asks `expert` for a kernel meeting `contract`, compiling each answer with `compile` (the source in, the
/// compiled form or the compiler's log out), and sending what fails back for up to `rounds` repairs.
pub fn write(
    llm: &Llm,
    expert: &Expert,
    contract: &Contract,
    rounds: usize,
    compile: &dyn Fn(&str) -> Result<Compiled, String>,
) -> Written {
    let messages = vec![
        Message::new(Role::System, expert.prompt.clone()),
        Message::new(Role::User, contract.text.clone()),
    ];
    converse(llm, expert, contract, messages, rounds, compile)
}

/// How a verified kernel did, for a rewrite: its time and the time to beat, at the problem it was timed at.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// The kernel's median time, ms.
    pub time_ms: f64,
    /// The fastest kernel found so far, ms.
    pub best_ms: f64,
    /// The problem, in the family's words (`r=16384 c=4096`).
    pub shape: String,
}

/// Asks `expert` to rewrite `source`, a kernel meeting `contract` that passed the gate and took `timing`, into a
/// faster one (OptiML-X's free-form rewrite): the same contract, repair rounds and recording as [`write()`]. What
/// compiles is one more candidate for the gate.
pub fn rewrite(
    llm: &Llm,
    expert: &Expert,
    contract: &Contract,
    (source, timing): (&str, &Timing),
    rounds: usize,
    compile: &dyn Fn(&str) -> Result<Compiled, String>,
) -> Written {
    // The model is shown the kernel as it wrote it: without the prelude, which the contract says comes first.
    let source = source.strip_prefix(contract.prelude).unwrap_or(source);
    let messages = vec![
        Message::new(Role::System, expert.prompt.clone()),
        Message::new(Role::User, contract.text.clone()),
        Message::new(Role::Assistant, format!("```cuda\n{source}\n```")),
        Message::new(
            Role::User,
            format!(
                "That kernel passes the check. At {} it takes {:.4} ms; the fastest kernel found takes {:.4} ms. \
                 Rewrite it to be faster (memory access pattern, vector loads, work per thread, fewer passes), \
                 keeping the signature, the launch and the results. Answer with one ```cuda block holding the \
                 whole kernel.",
                timing.shape, timing.time_ms, timing.best_ms
            ),
        ),
    ];
    converse(llm, expert, contract, messages, rounds, compile)
}

/// The exchange behind [`write()`] and [`rewrite`]: each answer checked by the guard and compiled, what fails sent
/// back with the reason for up to `rounds` repairs.
fn converse(
    llm: &Llm,
    expert: &Expert,
    contract: &Contract,
    mut messages: Vec<Message>,
    rounds: usize,
    compile: &dyn Fn(&str) -> Result<Compiled, String>,
) -> Written {
    let mut attempts = Vec::new();
    for round in 0..=rounds {
        let answer = match llm.chat(messages.clone()) {
            Ok(a) => a,
            Err(e) => {
                attempts.push(Attempt {
                    expert: expert.name.clone(),
                    round,
                    key: String::new(),
                    replayed: false,
                    verdict: Verdict::Failed(e.to_string()),
                });
                break;
            }
        };
        let code = guard::extract(&answer.value.content)
            .map(|c| guard::with_c_linkage(&c, contract.entry))
            .ok_or(Refusal::NoCode);
        let checked = code.and_then(|c| guard::check(&c, contract.entry).map(|()| c));
        let (verdict, compiled) = match checked {
            Err(refusal) => (Verdict::Refused(refusal), None),
            Ok(answer) => {
                let source = format!("{}{answer}", contract.prelude);
                match compile(&source) {
                    Ok(c) => (Verdict::Compiled, Some((source, c))),
                    Err(log) => (Verdict::Rejected(log_excerpt(&log)), None),
                }
            }
        };
        // The verdict goes into the recording (a replayed run writes the same one again).
        let _ = llm
            .recorder()
            .set_verdict(&answer.key, &verdict.to_string());
        let feedback = match &verdict {
            Verdict::Refused(r) => format!(
                "Your answer was refused before compiling: {r}. Answer again with one ```cuda block holding the \
                 whole kernel."
            ),
            Verdict::Rejected(log) => format!(
                "NVRTC rejected the kernel:\n{log}\nFix it and answer with one ```cuda block holding the whole \
                 kernel."
            ),
            Verdict::Compiled | Verdict::Failed(_) => String::new(),
        };
        attempts.push(Attempt {
            expert: expert.name.clone(),
            round,
            key: answer.key.clone(),
            replayed: answer.replayed,
            verdict,
        });
        if let Some(kernel) = compiled {
            return Written {
                attempts,
                kernel: Some(kernel),
            };
        }
        messages.push(Message::new(Role::Assistant, answer.value.content));
        messages.push(Message::new(Role::User, feedback));
    }
    Written {
        attempts,
        kernel: None,
    }
}
