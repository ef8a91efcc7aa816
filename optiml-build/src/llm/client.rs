//! The HTTP side: chat completions and embeddings of any OpenAI-compatible endpoint (a local llama.cpp or vLLM
//! server, or a hosted API), blocking, so a build script needs no async runtime.
//!
//! The API key is read from the environment variable the settings name, held in a [`Secret`] whose `Debug` says
//! nothing, sent only in the `Authorization` header, and cut out of every error text (some servers echo a key they
//! reject).

use super::{LlmError, LlmSettings};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A value that must not be printed: the API key.
#[derive(Clone)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The instructions.
    System,
    /// The request.
    User,
    /// The model's earlier answers (a repair round shows the model what it wrote).
    Assistant,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Its author.
    pub role: Role,
    /// Its text.
    pub content: String,
}

impl Message {
    /// A message of `role`.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
        }
    }
}

/// A chat completion request: what is sent, and what a recording is keyed by.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The model the settings name.
    pub model: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// The most tokens of the answer.
    pub max_tokens: u32,
    /// Sampling temperature (0: the most likely token each time, as repeatable as the server allows).
    pub temperature: f64,
    /// A sampling seed, for servers that take one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// What the model answered, with what it cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatAnswer {
    /// The answer's text.
    pub content: String,
    /// The model that answered, as the server names it.
    pub model: String,
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens of the answer.
    pub completion_tokens: u64,
    /// Why the answer ended (`stop`, `length`…).
    pub finish_reason: String,
}

/// An embeddings request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingRequest {
    /// The model the settings name.
    pub model: String,
    /// The texts, one vector each.
    pub input: Vec<String>,
}

/// A client of one endpoint.
#[derive(Clone, Debug)]
pub struct Client {
    agent: ureq::Agent,
    base_url: String,
    key: Option<Secret>,
}

/// The most bytes of an answer read: a server that streams without end cannot exhaust memory.
const MAX_RESPONSE_BYTES: u64 = 16 << 20;

impl Client {
    /// A client of the endpoint `settings` describe, with the API key from the variable it names (none when it
    /// names none).
    ///
    /// # Errors
    /// [`LlmError::Key`] when the settings name a variable that is not set.
    pub fn new(settings: &LlmSettings) -> Result<Self, LlmError> {
        let key = match &settings.api_key_env {
            Some(var) => Some(Secret(
                optiml_spec::env::var(var).ok_or_else(|| LlmError::Key { var: var.clone() })?,
            )),
            None => None,
        };
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs_f64(settings.timeout_s())))
            // A status that is not a success is read (its body says why), not turned into a bare code.
            .http_status_as_error(false)
            .build();
        Ok(Client {
            agent: config.into(),
            base_url: settings.base_url.trim_end_matches('/').to_string(),
            key,
        })
    }

    /// Posts `body` to `<base>/<path>` and reads the JSON answer.
    fn post<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, LlmError> {
        let url = format!("{}/{path}", self.base_url);
        let mut request = self.agent.post(&url);
        if let Some(Secret(key)) = &self.key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let scrub = |text: String| match &self.key {
            Some(Secret(key)) if !key.is_empty() => text.replace(key.as_str(), "<redacted>"),
            _ => text,
        };
        let mut response = request.send_json(body).map_err(|e| LlmError::Transport {
            url: url.clone(),
            message: scrub(e.to_string()),
        })?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_to_string()
            .map_err(|e| LlmError::Transport {
                url: url.clone(),
                message: scrub(e.to_string()),
            })?;
        if !(200..300).contains(&status) {
            return Err(LlmError::Status {
                url,
                status,
                body: scrub(text.chars().take(400).collect()),
            });
        }
        serde_json::from_str(&text).map_err(|e| LlmError::Malformed {
            url,
            message: scrub(format!(
                "{e}: {}",
                text.chars().take(200).collect::<String>()
            )),
        })
    }

    /// One chat completion.
    ///
    /// # Errors
    /// [`LlmError`] when the endpoint cannot be reached, refuses, or answers with something else than a chat
    /// completion.
    pub fn chat(&self, request: &ChatRequest) -> Result<ChatAnswer, LlmError> {
        let raw: wire::Completion = self.post("chat/completions", request)?;
        let choice = raw
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| LlmError::Malformed {
                url: format!("{}/chat/completions", self.base_url),
                message: "an answer with no choice".into(),
            })?;
        Ok(ChatAnswer {
            content: choice.message.content.unwrap_or_default(),
            model: raw.model.unwrap_or_else(|| request.model.clone()),
            prompt_tokens: raw.usage.as_ref().map_or(0, |u| u.prompt_tokens),
            completion_tokens: raw.usage.as_ref().map_or(0, |u| u.completion_tokens),
            finish_reason: choice.finish_reason.unwrap_or_default(),
        })
    }

    /// One vector per input text.
    ///
    /// # Errors
    /// As [`Client::chat`]; [`LlmError::Malformed`] when the answer holds another number of vectors, or vectors
    /// of different lengths (a decoder-only model without pooling answers a vector per token).
    pub fn embed(&self, request: &EmbeddingRequest) -> Result<Vec<Vec<f32>>, LlmError> {
        let raw: wire::Embeddings = self.post("embeddings", request)?;
        let url = || format!("{}/embeddings", self.base_url);
        let mut data = raw.data;
        data.sort_by_key(|d| d.index);
        if data.len() != request.input.len() {
            return Err(LlmError::Malformed {
                url: url(),
                message: format!("{} vectors for {} texts", data.len(), request.input.len()),
            });
        }
        let vectors: Vec<Vec<f32>> = data.into_iter().map(|d| d.embedding).collect();
        if vectors
            .iter()
            .any(|v| v.is_empty() || v.len() != vectors[0].len())
        {
            return Err(LlmError::Malformed {
                url: url(),
                message: "vectors of different lengths (one per token?)".into(),
            });
        }
        Ok(vectors)
    }
}

/// The OpenAI wire format, as much of it as is read.
mod wire {
    use serde::Deserialize;

    #[derive(Deserialize)]
    pub struct Completion {
        pub model: Option<String>,
        pub choices: Vec<Choice>,
        pub usage: Option<Usage>,
    }

    #[derive(Deserialize)]
    pub struct Choice {
        pub message: ChoiceMessage,
        pub finish_reason: Option<String>,
    }

    #[derive(Deserialize)]
    pub struct ChoiceMessage {
        pub content: Option<String>,
    }

    #[derive(Deserialize)]
    pub struct Usage {
        #[serde(default)]
        pub prompt_tokens: u64,
        #[serde(default)]
        pub completion_tokens: u64,
    }

    #[derive(Deserialize)]
    pub struct Embeddings {
        pub data: Vec<Embedding>,
    }

    #[derive(Deserialize)]
    pub struct Embedding {
        #[serde(default)]
        pub index: usize,
        pub embedding: Vec<f32>,
    }
}
