//! The LLM path (issue 16): an OpenAI-compatible endpoint, reached through [`client`], every exchange recorded
//! by [`record`] so that a later run replays it with no endpoint. Nothing here runs unless the settings have an
//! `[llm]` table: with none, builds, tests and results are what they were.
//!
//! ```toml
//! [llm]
//! base_url = "http://127.0.0.1:8099/v1"   # any OpenAI-compatible server
//! model = "local"
//! api_key_env = "OPENAI_API_KEY"            # the variable's name; the key itself is never written anywhere
//! timeout_s = 120
//! max_tokens = 1024
//! temperature = 0.0
//! replay = "auto"                           # "auto": recorded answers first; "only": never call; "off": always call
//! top_k = 2                                 # experts the router picks per kernel
//! gumbel_tau = 0.5                          # Gumbel noise on the routing (seeded by [search] seed); none: nearest
//!
//! [llm.experts.stencils]                    # an expert of your own (or one replacing a built-in of that name)
//! description = "stencils and convolutions over grids"
//! prompt = "Tile with halos."
//! ```

pub mod client;
pub mod experts;
pub mod generate;
pub mod guard;
pub mod judge;
pub mod propose;
pub mod record;
pub mod translate;

pub use client::{ChatAnswer, ChatRequest, Client, EmbeddingRequest, Message, Role};
pub use record::{Exchange, Kind, Recorder};

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

/// `[llm]`: the endpoint and how it is used.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmSettings {
    /// The API's base URL, up to and including `/v1`.
    pub base_url: String,
    /// The model to ask for.
    pub model: String,
    /// The name of the environment variable that holds the API key (none: no key is sent).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Seconds one request may take (default 120).
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// The most tokens of an answer (default 1024).
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Sampling temperature (default 0).
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Where recorded answers come from (default [`Replay::Auto`]).
    #[serde(default)]
    pub replay: Option<Replay>,
    /// Experts the router picks for each kernel (default 2).
    #[serde(default)]
    pub top_k: Option<usize>,
    /// Gumbel noise on the routing (the seed's τ = 0.5); none: the nearest experts.
    #[serde(default)]
    pub gumbel_tau: Option<f64>,
    /// The user's experts, beside the built-in ones ([`experts::with_user`]).
    #[serde(default)]
    pub experts: std::collections::BTreeMap<String, experts::ExpertSettings>,
}

impl LlmSettings {
    /// Seconds one request may take.
    pub fn timeout_s(&self) -> f64 {
        self.timeout_s.filter(|t| *t > 0.0).unwrap_or(120.0)
    }

    /// The most tokens of an answer.
    pub fn max_tokens(&self) -> u32 {
        self.max_tokens.unwrap_or(1024)
    }
}

/// Whether recorded answers stand in for the endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Replay {
    /// A recorded answer where there is one, else the endpoint (and the answer is recorded).
    #[default]
    Auto,
    /// Recorded answers only: a request never recorded is an error, and the endpoint is never called (CI, a
    /// machine with no endpoint).
    Only,
    /// The endpoint every time (and each answer is recorded, replacing an older one).
    Off,
}

/// Why the model could not be asked, or its answer not used.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The settings name a key variable that is not set.
    #[error("the LLM settings take the API key from `{var}`, which is not set")]
    Key {
        /// The variable's name.
        var: String,
    },
    /// The endpoint could not be reached, or the connection failed.
    #[error("the LLM endpoint `{url}` could not be reached: {message}")]
    Transport {
        /// The URL.
        url: String,
        /// What failed.
        message: String,
    },
    /// The endpoint answered with an error status.
    #[error("the LLM endpoint `{url}` answered {status}: {body}")]
    Status {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of its body.
        body: String,
    },
    /// The answer is not what the API promises.
    #[error("the LLM endpoint `{url}` answered with something unexpected: {message}")]
    Malformed {
        /// The URL.
        url: String,
        /// What was wrong.
        message: String,
    },
    /// Replay only, and this request was never recorded.
    #[error(
        "no recorded answer for request {key} in `{}` (replay = \"only\"): run once with the endpoint to record it",
        dir.display()
    )]
    NotRecorded {
        /// The request's key.
        key: String,
        /// The recordings' folder.
        dir: PathBuf,
    },
    /// A recording could not be read or written.
    #[error("the LLM recording `{}`: {message}", path.display())]
    Record {
        /// The file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
}

/// An answer, with where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Answered<T> {
    /// The answer.
    pub value: T,
    /// The request's key in the recordings.
    pub key: String,
    /// Read back from a recording, not asked of the endpoint.
    pub replayed: bool,
}

/// Counts one answer in a caller's `(asked, failed, replayed)` counters (the proposer's and the judge's stats):
/// the answer, or `None` when the request failed and the caller falls back to its rule.
pub(crate) fn counted<T, E>(
    answer: Result<Answered<T>, E>,
    (asked, failed, replayed): (&mut usize, &mut usize, &mut usize),
) -> Option<Answered<T>> {
    *asked += 1;
    match answer {
        Ok(a) => {
            *replayed += usize::from(a.replayed);
            Some(a)
        }
        Err(_) => {
            *failed += 1;
            None
        }
    }
}

/// Where the exchanges of the workspace or crate at `root` are recorded by default: `<root>/target/optiml/llm`.
pub fn records_under(root: &std::path::Path) -> PathBuf {
    root.join("target").join("optiml").join("llm")
}

/// The model as optiml uses it: settings, the endpoint (unless replaying only) and the recordings.
#[derive(Debug)]
pub struct Llm {
    settings: LlmSettings,
    client: Result<Client, String>,
    recorder: Recorder,
    replay: Replay,
}

impl Llm {
    /// The model of `settings`, recording into `dir`. A missing key is an error only when the endpoint is asked.
    pub fn new(settings: &LlmSettings, dir: impl Into<PathBuf>) -> Self {
        Llm {
            settings: settings.clone(),
            client: Client::new(settings).map_err(|e| e.to_string()),
            recorder: Recorder::new(dir),
            replay: settings.replay.unwrap_or_default(),
        }
    }

    /// The recordings.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// The recorded exchange for `request` of `kind`, or the endpoint's answer (then recorded), as
    /// [`Replay`] says.
    fn exchange(
        &self,
        kind: Kind,
        request: serde_json::Value,
        ask: impl FnOnce(&Client) -> Result<(serde_json::Value, String, u64, u64), LlmError>,
    ) -> Result<(Exchange, String, bool), LlmError> {
        let key = Recorder::key(kind, &request);
        if self.replay != Replay::Off
            && let Some(e) = self.recorder.load(&key)?
        {
            return Ok((e, key, true));
        }
        if self.replay == Replay::Only {
            return Err(LlmError::NotRecorded {
                key,
                dir: self.recorder.dir().to_path_buf(),
            });
        }
        let client = self.client.as_ref().map_err(|e| LlmError::Transport {
            url: self.settings.base_url.clone(),
            message: e.clone(),
        })?;
        let started = Instant::now();
        let (response, model, prompt_tokens, completion_tokens) = ask(client)?;
        let exchange = Exchange {
            kind,
            request,
            response,
            model,
            prompt_tokens,
            completion_tokens,
            latency_ms: started.elapsed().as_secs_f64() * 1e3,
            recorded_at: crate::tune::now_rfc3339(),
            verdict: None,
        };
        self.recorder.store(&key, &exchange)?;
        Ok((exchange, key, false))
    }

    /// Asks the model to continue `messages`.
    ///
    /// # Errors
    /// [`LlmError`]: the endpoint failed, or (replay only) the request was never recorded.
    pub fn chat(&self, messages: Vec<Message>) -> Result<Answered<ChatAnswer>, LlmError> {
        let request = ChatRequest {
            model: self.settings.model.clone(),
            messages,
            max_tokens: self.settings.max_tokens(),
            temperature: self.settings.temperature.unwrap_or(0.0),
            seed: Some(0),
        };
        let json = serde_json::to_value(&request).map_err(|e| self.malformed(e))?;
        let (exchange, key, replayed) = self.exchange(Kind::Chat, json, |c| {
            let a = c.chat(&request)?;
            let (model, p, t) = (a.model.clone(), a.prompt_tokens, a.completion_tokens);
            Ok((
                serde_json::to_value(&a).map_err(|e| self.malformed(e))?,
                model,
                p,
                t,
            ))
        })?;
        let value = serde_json::from_value(exchange.response).map_err(|e| self.malformed(e))?;
        Ok(Answered {
            value,
            key,
            replayed,
        })
    }

    /// One vector per text, from the endpoint's embeddings.
    ///
    /// # Errors
    /// As [`Llm::chat`].
    pub fn embed(&self, texts: &[String]) -> Result<Answered<Vec<Vec<f32>>>, LlmError> {
        let request = EmbeddingRequest {
            model: self.settings.model.clone(),
            input: texts.to_vec(),
        };
        let json = serde_json::to_value(&request).map_err(|e| self.malformed(e))?;
        let (exchange, key, replayed) = self.exchange(Kind::Embeddings, json, |c| {
            let v = c.embed(&request)?;
            Ok((
                serde_json::to_value(&v).map_err(|e| self.malformed(e))?,
                self.settings.model.clone(),
                0,
                0,
            ))
        })?;
        let value = serde_json::from_value(exchange.response).map_err(|e| self.malformed(e))?;
        Ok(Answered {
            value,
            key,
            replayed,
        })
    }

    fn malformed(&self, e: serde_json::Error) -> LlmError {
        LlmError::Malformed {
            url: self.settings.base_url.clone(),
            message: e.to_string(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
