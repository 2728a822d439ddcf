//! Pieces shared by `/v1/chat/completions` and `/v1/completions`: the sampling knobs,
//! stop sequences, stream options, finish reasons, usage and chat-style logprobs.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::str_or::impl_str_or_deserialize;

/// Sampling and stopping fields both generation endpoints accept. Flattened into the
/// request, so on the wire these are top-level keys (`"temperature": 0.7`), and the
/// server converts them to engine sampling parameters in one place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplingOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// vLLM extra; `-1` or `0` means disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<i32>,
    /// vLLM extra.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_p: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopSequences>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f32>,
    /// vLLM extra; multiplicative, 1.0 means off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetition_penalty: Option<f32>,
    /// vLLM extra: EOS and stop tokens are suppressed until this many tokens exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_tokens: Option<u32>,
    /// vLLM extra.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
    /// vLLM extra: token ids that end generation, in addition to EOS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_token_ids: Option<Vec<u32>>,
    /// vLLM extra; defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_special_tokens: Option<bool>,
    /// vLLM extra.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_stop_str_in_output: Option<bool>,
    /// Token id (as a decimal string, since JSON keys are strings) to bias in [-100, 100].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logit_bias: Option<IndexMap<String, f32>>,
}

/// `stop`: one string or a list of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum StopSequences {
    One(String),
    Many(Vec<String>),
}

impl_str_or_deserialize!(StopSequences, One, Many, "a string or an array of strings");

impl StopSequences {
    /// The stop strings as a slice, whichever form was sent.
    pub fn as_slice(&self) -> &[String] {
        match self {
            Self::One(s) => std::slice::from_ref(s),
            Self::Many(v) => v,
        }
    }

    /// The stop strings as an owned list.
    pub fn into_vec(self) -> Vec<String> {
        match self {
            Self::One(s) => vec![s],
            Self::Many(v) => v,
        }
    }
}

/// `stream_options`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Send a final chunk with `usage` and empty `choices`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_usage: Option<bool>,
    /// vLLM extra: put running `usage` on every chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuous_usage_stats: Option<bool>,
}

/// Why a choice stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// EOS, a stop string or a stop token.
    Stop,
    /// `max_tokens` or the context length was reached.
    Length,
    /// The model called tools.
    ToolCalls,
    ContentFilter,
}

/// Token accounting for one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
}

impl Usage {
    /// Usage with `total_tokens` filled in.
    pub fn new(prompt_tokens: u32, completion_tokens: u32) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            prompt_tokens_details: None,
        }
    }

    /// Adds how many prompt tokens came from the prefix cache.
    pub fn with_cached_tokens(mut self, cached_tokens: u32) -> Self {
        self.prompt_tokens_details = Some(PromptTokensDetails { cached_tokens });
        self
    }
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    pub cached_tokens: u32,
}

/// Chat-style `logprobs` on a choice.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatLogprobs {
    pub content: Option<Vec<ChatLogprobToken>>,
}

/// One sampled token with its log-probability and the most likely alternatives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatLogprobToken {
    pub token: String,
    pub logprob: f32,
    /// UTF-8 bytes of the token; a token may be part of a multi-byte character.
    pub bytes: Option<Vec<u8>>,
    #[serde(default)]
    pub top_logprobs: Vec<TopLogprob>,
}

/// One alternative in `top_logprobs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    pub token: String,
    pub logprob: f32,
    pub bytes: Option<Vec<u8>>,
}
