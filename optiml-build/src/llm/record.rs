//! Every exchange with the model, content-addressed: the request's sha256 names the file that holds the request,
//! the answer, the model, the tokens, the latency and what optiml made of the answer. A later run with the same
//! request reads the answer back instead of calling the model, so CI and machines with no endpoint replay a
//! recorded run exactly, and the committed cache still holds only verified winners.
//!
//! ```text
//! <dir>/<first two hex digits>/<sha256>.json
//! ```

use super::LlmError;
use crate::fs;
use optiml_spec::sha256_hex;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Which endpoint an exchange went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// `chat/completions`.
    Chat,
    /// `embeddings`.
    Embeddings,
}

/// One recorded exchange.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// The endpoint.
    pub kind: Kind,
    /// The request, as sent (it holds no key: the key travels in a header).
    pub request: serde_json::Value,
    /// The answer, as read.
    pub response: serde_json::Value,
    /// The model that answered.
    pub model: String,
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens of the answer.
    pub completion_tokens: u64,
    /// Milliseconds the endpoint took.
    pub latency_ms: f64,
    /// When (RFC 3339, UTC).
    pub recorded_at: String,
    /// What optiml made of the answer (`compiled`, `gate: …`, `proposed grow-block-n`…), once known.
    #[serde(default)]
    pub verdict: Option<String>,
}

/// The store of a run's exchanges.
#[derive(Clone, Debug)]
pub struct Recorder {
    dir: PathBuf,
}

impl Recorder {
    /// A store in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Recorder { dir: dir.into() }
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of a request to `kind`: sha256 of the endpoint and the request's JSON, whose fields serialize in
    /// one order, so the same request always has the same key.
    pub fn key(kind: Kind, request: &serde_json::Value) -> String {
        let kind = match kind {
            Kind::Chat => "chat",
            Kind::Embeddings => "embeddings",
        };
        sha256_hex(format!("optiml-llm/1\n{kind}\n{request}").as_bytes())
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir
            .join(&key[..2.min(key.len())])
            .join(format!("{key}.json"))
    }

    /// The exchange recorded under `key`, if any.
    ///
    /// # Errors
    /// [`LlmError::Record`] when a file is there but does not read as an exchange.
    pub fn load(&self, key: &str) -> Result<Option<Exchange>, LlmError> {
        let path = self.path(key);
        if !path.is_file() {
            return Ok(None);
        }
        let text = fs::read_to_string(&path).map_err(|e| LlmError::Record {
            path: path.clone(),
            message: e.to_string(),
        })?;
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| LlmError::Record {
                path,
                message: e.to_string(),
            })
    }

    /// Records `exchange` under `key`, whole or not at all (written beside and renamed into place).
    ///
    /// # Errors
    /// [`LlmError::Record`] when it cannot be written.
    pub fn store(&self, key: &str, exchange: &Exchange) -> Result<(), LlmError> {
        let path = self.path(key);
        let fail = |message: String| LlmError::Record {
            path: path.clone(),
            message,
        };
        let text = serde_json::to_string_pretty(exchange).map_err(|e| fail(e.to_string()))?;
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| fail(e.to_string()))?;
        }
        let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
        fs::write(&tmp, text.as_bytes()).map_err(|e| fail(e.to_string()))?;
        fs::rename(&tmp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            fail(e.to_string())
        })
    }

    /// Notes what optiml made of the answer recorded under `key`.
    ///
    /// # Errors
    /// As [`Recorder::load`] and [`Recorder::store`]; [`LlmError::NotRecorded`] when nothing is recorded there.
    pub fn set_verdict(&self, key: &str, verdict: &str) -> Result<(), LlmError> {
        let mut exchange = self.load(key)?.ok_or_else(|| LlmError::NotRecorded {
            key: key.to_string(),
            dir: self.dir.clone(),
        })?;
        exchange.verdict = Some(verdict.to_string());
        self.store(key, &exchange)
    }

    /// Every exchange recorded here, by key.
    ///
    /// # Errors
    /// [`LlmError::Record`] for a file that does not read.
    pub fn all(&self) -> Result<Vec<(String, Exchange)>, LlmError> {
        let mut out = Vec::new();
        for sub in fs::read_dir(&self.dir).unwrap_or_default() {
            for file in fs::read_dir(&sub).unwrap_or_default() {
                let Some(key) = file
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(".json"))
                    .map(str::to_string)
                else {
                    continue;
                };
                if let Some(e) = self.load(&key)? {
                    out.push((key, e));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}
