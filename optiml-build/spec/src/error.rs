//! Spec errors and the spanned-error collector shared by the macro and the build script.
//!
//! Every message a user can get for a bad spec is a [`SpecError`] variant, so the macro, the build script's
//! warnings and the docs say the same thing; each variant has a trybuild case in `tests/ui/`.

use std::fmt;

/// What the supported spec families look like, appended to "no family" and "unknown word" errors.
pub const SUPPORTED: &str = "supported: matmul (\"matmul, f32\", \"C = A·Bᵀ\", with alpha/beta, bias, relu/gelu/silu; \
in f32, bf16 or f16, \"tf32\" to allow TF32 tensor cores, \"exact\" to keep f32 on fp32 multiply-adds), batched matmul (\"bmm\", \"batched gemm\", \"batch of \
matrix products\", \"tensor times a matrix\" for a shared B), elementwise maps (relu, gelu, silu, \
sigmoid, tanh; add/mul with a tensor or a scalar, \"y = x * s\"), tensor operators in plain words (\"softmax over \
the last axis\", \"layer norm\", \"sum over dim 1 of a 3-D tensor\"; `cargo optiml explain` shows what a spec means) \
or in index notation (\"y[r, c] = x[r, c] / sum(c) x[r, c]\")";

/// Why a spec string could not be turned into a [`Spec`](crate::Spec).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecError {
    /// The string holds nothing but separators.
    Empty,
    /// The string is longer than any spec needs ([`crate::MAX_SPEC_CHARS`]).
    TooLong {
        /// Its length in characters.
        chars: usize,
    },
    /// A character the spec language does not use.
    UnexpectedChar(char),
    /// A number outside `name=value`.
    StrayNumber(u64),
    /// A word not in the vocabulary.
    UnknownWord {
        /// The word as written (lower-cased).
        word: String,
        /// The closest vocabulary word, if one is within typo distance.
        closest: Option<String>,
    },
    /// No family (matmul, elementwise …) was named.
    NoFamily,
    /// Two readings are possible.
    Ambiguous {
        /// What clashes.
        what: String,
        /// How to say it unambiguously.
        hint: String,
    },
    /// Understood, but not generated (yet).
    Unsupported {
        /// What was asked for.
        what: String,
        /// What to write instead.
        hint: String,
    },
    /// A word that does not apply to the spec's family (`transposed` on an elementwise map).
    NotForFamily {
        /// The word.
        word: String,
        /// The family it was used with.
        family: &'static str,
    },
    /// A `name=value` clause that names no dimension of the family or has a bad value.
    BadShape {
        /// The dimension's name as written.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// An equation that is not one of the supported forms.
    BadEquation(String),
    /// A mistake in index notation (`y[r, c] = x[r, c] / sum(c) x[r, c]`), at a character of the text.
    Notation {
        /// Where, as a 0-based character (not byte) offset into the spec text.
        at: usize,
        /// The text from there on, a few characters, so the message shows the place without a caret.
        near: String,
        /// What is wrong.
        what: String,
        /// How to fix it (may be empty).
        hint: String,
    },
    /// A phrase inside a plain-words tensor operator spec (`softmax over the lst axis`) that was not understood.
    UnknownPhrase {
        /// The operator the spec names (`softmax`).
        operator: &'static str,
        /// The words that were not understood.
        phrase: String,
        /// The closest phrase that works, if one is within typo distance.
        closest: Option<String>,
        /// The argument phrases this operator takes, for the message.
        accepts: String,
    },
    /// An argument of a plain-words tensor operator with a bad or missing value (`groups 0`, group norm without
    /// a number of groups, `dim 3` of a 2-D tensor).
    BadArgument {
        /// The operator the spec names.
        operator: &'static str,
        /// The phrase at fault, or what is missing.
        phrase: String,
        /// What is wrong and what to write.
        reason: String,
    },
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::Empty => write!(f, "empty kernel spec; {SUPPORTED}"),
            SpecError::UnexpectedChar(c) => {
                write!(f, "unexpected character `{c}` in the kernel spec")
            }
            SpecError::StrayNumber(n) => {
                write!(
                    f,
                    "the number `{n}` belongs to a dimension: write it as `m={n}`, `k={n}`, `batch={n}` …"
                )
            }
            SpecError::UnknownWord {
                word,
                closest: Some(c),
            } => {
                let word = shortened(word);
                write!(
                    f,
                    "unknown word `{word}` in the kernel spec (did you mean `{c}`?); {SUPPORTED}"
                )
            }
            SpecError::UnknownWord {
                word,
                closest: None,
            } => {
                let word = shortened(word);
                write!(f, "unknown word `{word}` in the kernel spec; {SUPPORTED}")
            }
            SpecError::TooLong { chars } => write!(
                f,
                "the kernel spec is {chars} characters long; a spec may have at most {}",
                crate::MAX_SPEC_CHARS
            ),
            SpecError::NoFamily => write!(f, "the kernel spec names no kernel family; {SUPPORTED}"),
            SpecError::Ambiguous { what, hint } => {
                write!(f, "ambiguous kernel spec: {what}; {hint}")
            }
            SpecError::Unsupported { what, hint } => {
                write!(f, "unsupported kernel spec: {what}; {hint}")
            }
            SpecError::NotForFamily { word, family } => {
                let article = if family.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                write!(f, "`{word}` does not apply to {article} {family} kernel")
            }
            SpecError::BadShape { name, reason } => {
                write!(f, "bad dimension `{name}` in the kernel spec: {reason}")
            }
            SpecError::BadEquation(what) => {
                write!(f, "unsupported equation in the kernel spec: {what}")
            }
            SpecError::Notation {
                at,
                near,
                what,
                hint,
            } => {
                if near.is_empty() {
                    write!(f, "index notation, at the end of the text: {what}")?;
                } else {
                    write!(
                        f,
                        "index notation, at character {} (`{near}`): {what}",
                        at + 1
                    )?;
                }
                if !hint.is_empty() {
                    write!(f, "; {hint}")?;
                }
                Ok(())
            }
            SpecError::UnknownPhrase {
                operator,
                phrase,
                closest,
                accepts,
            } => {
                write!(f, "`{phrase}` is not understood in a {operator} spec")?;
                if let Some(c) = closest {
                    write!(f, " (did you mean `{c}`?)")?;
                }
                write!(f, "; {operator} takes: {accepts}")
            }
            SpecError::BadArgument {
                operator,
                phrase,
                reason,
            } => write!(f, "`{phrase}` in a {operator} spec: {reason}"),
        }
    }
}

impl std::error::Error for SpecError {}

/// Collects spanned errors so that one compile reports every mistake, each under its own token (cxx's `Errors`).
#[derive(Default)]
pub struct Errors {
    errors: Vec<syn::Error>,
}

impl Errors {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an error spanned to `tokens`.
    pub fn push_spanned(&mut self, tokens: impl quote::ToTokens, message: impl fmt::Display) {
        self.errors.push(syn::Error::new_spanned(tokens, message));
    }

    /// Records a ready-made error.
    pub fn push(&mut self, error: syn::Error) {
        self.errors.push(error);
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// Ends a phase: `Err` with all recorded errors combined, if any.
    ///
    /// # Errors
    /// The combined errors, when at least one was recorded.
    pub fn propagate(&mut self) -> syn::Result<()> {
        let mut all = std::mem::take(&mut self.errors).into_iter();
        match all.next() {
            None => Ok(()),
            Some(mut first) => {
                for e in all {
                    first.combine(e);
                }
                Err(first)
            }
        }
    }
}

/// A word as an error shows it: at most 40 characters, then `…` (a megabyte of letters is one word).
fn shortened(word: &str) -> String {
    match word.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &word[..i]),
        None => word.to_string(),
    }
}
