//! The plain data that crosses the `EngineHandle`: a validated request in, token outputs back.

use std::time::Duration;

use hearth_text::guided::Guide;

use crate::sampler::{Logprobs, SamplingParams};

/// Identifies a submitted request (all of its `n` samples).
pub type RequestId = u64;

/// A request the server has already validated: token ids and sampling settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidRequest {
    pub prompt: Vec<u32>,
    pub params: SamplingParams,
    /// Tokens to generate at most (generation also ends at max_model_len).
    pub max_tokens: usize,
    /// Parallel samples of the same prompt (they share the prompt's cached blocks).
    pub n: usize,
    /// Mixed into the prefix-cache hashes: requests with different salts never share blocks.
    pub cache_salt: Option<String>,
    /// Guided decoding: every sample's text must match this grammar (the sample stops when the
    /// grammar is complete and nothing may follow).
    pub guide: Option<Guide>,
}

impl ValidRequest {
    pub fn new(prompt: Vec<u32>, max_tokens: usize) -> Self {
        ValidRequest {
            prompt,
            params: SamplingParams::default(),
            max_tokens,
            n: 1,
            cache_salt: None,
            guide: None,
        }
    }
}

/// Why a sample ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-sequence or stop token.
    Stop,
    /// max_tokens or max_model_len.
    Length,
    /// Aborted (by the client or at shutdown).
    Abort,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Abort => "abort",
        }
    }
}

/// Per-sample timings, sent with its last output.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RequestMetrics {
    pub prompt_tokens: usize,
    /// Prompt tokens found in the prefix cache.
    pub cached_tokens: usize,
    pub generated_tokens: usize,
    /// Arrival to first scheduled.
    pub queue_time: Duration,
    /// Arrival to first token.
    pub ttft: Duration,
    /// Arrival to last token.
    pub e2e: Duration,
    /// Mean time between tokens after the first.
    pub mean_itl: Duration,
}

/// One generated token of one sample.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineOutput {
    /// Which of the request's `n` samples.
    pub index: usize,
    pub token: u32,
    pub logprobs: Option<Logprobs>,
    /// Set on the sample's last output.
    pub finish: Option<FinishReason>,
    /// Set on the sample's last output.
    pub metrics: Option<RequestMetrics>,
}
