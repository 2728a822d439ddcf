//! `/v1/completions`: raw-prompt generation. The request shares [`SamplingOptions`] with
//! chat; the response and its stream chunks have the same shape (`"text_completion"`).

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::common::{FinishReason, SamplingOptions, StreamOptions, Usage};
use crate::tag::TextCompletionObject;

/// Body of `POST /v1/completions`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    pub model: String,
    pub prompt: Prompt,
    /// Fill-in-the-middle suffix; parsed so the server can reject it by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
    /// OpenAI defaults this to 16 for completions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(flatten)]
    pub sampling: SamplingOptions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_of: Option<u32>,
    /// Return the prompt before the completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub echo: Option<bool>,
    /// Number of top alternatives per token (an integer here, unlike chat's bool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// vLLM extra; defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_special_tokens: Option<bool>,
    /// vLLM extra: isolates this request's prefix-cache entries from other tenants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_salt: Option<String>,
    /// Every key this type does not know; the server rejects them by name.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl CompletionRequest {
    /// Whether the client asked for server-sent events.
    pub fn is_stream(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    /// Whether the stream should end with a usage chunk.
    pub fn include_usage(&self) -> bool {
        self.stream_options
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }

    /// Names of the fields collected in `extra`, for an error message.
    pub fn unknown_fields(&self) -> Vec<&str> {
        self.extra.keys().map(String::as_str).collect()
    }
}

/// `prompt`: text or token ids, one prompt or a batch. Variant order matters for
/// untagged parsing: `[1, 2]` must become `Tokens`, not fail as `Texts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    Text(String),
    Tokens(Vec<u32>),
    Texts(Vec<String>),
    TokenBatches(Vec<Vec<u32>>),
}

impl Default for Prompt {
    fn default() -> Self {
        Self::Text(String::new())
    }
}

impl Prompt {
    /// How many prompts the request carries (each yields `n` choices).
    pub fn len(&self) -> usize {
        match self {
            Self::Text(_) | Self::Tokens(_) => 1,
            Self::Texts(v) => v.len(),
            Self::TokenBatches(v) => v.len(),
        }
    }

    /// Whether the batch is empty (an empty list was sent).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A completion response, or one streamed chunk of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionResponse {
    pub id: String,
    pub object: TextCompletionObject,
    /// Unix seconds.
    pub created: u64,
    pub model: String,
    pub choices: Vec<CompletionChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Streamed chunks use the response's shape, with partial `text` per choice.
pub type CompletionChunk = CompletionResponse;

/// One generated text (or a piece of it, when streaming).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionChoice {
    pub index: u32,
    pub text: String,
    #[serde(default)]
    pub logprobs: Option<CompletionLogprobs>,
    #[serde(default)]
    pub finish_reason: Option<FinishReason>,
}

/// Legacy-style logprobs: parallel arrays, one entry per token.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionLogprobs {
    /// Character offset of each token within the returned text.
    pub text_offset: Vec<u32>,
    /// `null` for the first prompt token when echoing (it has no logprob).
    pub token_logprobs: Vec<Option<f32>>,
    pub tokens: Vec<String>,
    /// Token -> logprob, most likely first.
    pub top_logprobs: Vec<Option<IndexMap<String, f32>>>,
}
