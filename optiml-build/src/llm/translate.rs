//! Spec translation: where the phrase parser cannot read a spec, the model may propose the same operator in index
//! notation. optiml's own notation parser reads the proposal (a repair round gets the parser's error); the
//! proposal is shown to the user and recorded, and never used silently: the user accepts it by writing it into the
//! attribute, where it is parsed, checked against the signature and verified like any spec.

use super::{Llm, LlmError, Message, Role};
use optiml_spec::program::Program;

/// The instructions: the notation, by example.
const SYSTEM: &str = "You translate a description of a tensor operator into optiml's index notation, one line. \
Statements are separated by `;`; each is `name[indices] = expression`. Reductions are written `sum(j) expr`, \
`mean(j) expr`, `max(j) expr`, `min(j) expr`, `argmax(j) expr`, `argmin(j) expr`; scans `cumsum(j) expr`, \
`cumprod(j) expr`. Functions: exp, log, sqrt, tanh, erf, abs, relu, sigmoid, max(a, b), min(a, b), where(c, a, b). \
Examples:\n\
relu: y[i] = relu(x[i])\n\
softmax over the last axis: y[r, c] = exp(x[r, c]) / sum(c) exp(x[r, c])\n\
argmax over dim 1 of a 3-D tensor: y[b, k] = argmax(j) x[b, j, k]\n\
cumulative sum along dim 1: y[i, j] = cumsum(j) x[i, j]\n\
mean squared error: y = mean(i) (x[i] - t[i])^2\n\
Answer with the notation alone in a ```text fenced block.";

/// A translation the parser accepted.
#[derive(Clone, Debug, PartialEq)]
pub struct Translation {
    /// The notation as the model wrote it.
    pub notation: String,
    /// What it parses to.
    pub program: Program,
    /// Answers it took.
    pub answers: usize,
    /// The exchanges' keys in the recordings.
    pub keys: Vec<String>,
}

/// Why no translation was accepted.
#[derive(Debug, thiserror::Error)]
pub enum TranslateError {
    /// The endpoint failed.
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// Every answer failed to parse; the last one, and why.
    #[error("the model's {answers} answer(s) did not parse; the last, `{last}`: {reason}")]
    Unparsed {
        /// Answers given.
        answers: usize,
        /// The last proposal.
        last: String,
        /// The parser's error.
        reason: String,
    },
}

/// The notation in an answer: the first line of its fenced block, or its first non-empty line.
fn proposal(answer: &str) -> String {
    let text = super::guard::extract(answer).unwrap_or_else(|| answer.to_string());
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .chars()
        .take(2000)
        .collect()
}

/// Asks `llm` for `spec` (which the phrase parser refused with `why`) in index notation, with up to `rounds`
/// repairs from the notation parser's errors.
///
/// # Errors
/// [`TranslateError`] when the endpoint fails or no answer parses.
pub fn translate(
    llm: &Llm,
    spec: &str,
    why: &str,
    rounds: usize,
) -> Result<Translation, TranslateError> {
    let mut messages = vec![
        Message::new(Role::System, SYSTEM),
        Message::new(
            Role::User,
            format!("Translate: {spec}\n(optiml's phrase parser said: {why})"),
        ),
    ];
    let mut keys = Vec::new();
    let (mut last, mut reason) = (String::new(), String::new());
    for round in 0..=rounds {
        let answer = llm.chat(messages.clone())?;
        keys.push(answer.key.clone());
        last = proposal(&answer.value.content);
        match optiml_spec::program::notation::parse(&last) {
            Ok(program) => {
                let _ = llm
                    .recorder()
                    .set_verdict(&answer.key, "translation parsed");
                return Ok(Translation {
                    notation: last,
                    program,
                    answers: round + 1,
                    keys,
                });
            }
            Err(e) => {
                reason = e.to_string();
                let _ = llm
                    .recorder()
                    .set_verdict(&answer.key, &format!("translation: {reason}"));
                messages.push(Message::new(Role::Assistant, answer.value.content));
                messages.push(Message::new(
                    Role::User,
                    format!("That does not parse: {reason}. Answer again with the notation alone."),
                ));
            }
        }
    }
    Err(TranslateError::Unparsed {
        answers: keys.len(),
        last,
        reason,
    })
}
