//! The crate's error type: why a sequence was refused by [`crate::Scheduler::add`].
//!
//! Scheduling itself never fails: a step that cannot place a sequence leaves it waiting.

use crate::SeqId;

/// Why [`crate::Scheduler::add`] refused a sequence. Nothing is queued when this is returned.
#[derive(Debug, thiserror::Error)]
pub enum SchedError {
    #[error("the prompt has {prompt} tokens but max_model_len is {max_model_len}")]
    PromptTooLong { prompt: usize, max_model_len: usize },
    #[error("the prompt needs {needed} KV blocks but the cache has only {available} in all")]
    PromptTooLargeForCache { needed: usize, available: usize },
    #[error("sequence {0} already exists")]
    DuplicateId(SeqId),
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// Only with `enable_chunked_prefill = false`: such a prompt could never be scheduled.
    #[error(
        "the prompt has {prompt} tokens but max_num_batched_tokens is {max_num_batched_tokens} \
         and chunked prefill is disabled"
    )]
    PromptExceedsBatchBudget {
        prompt: usize,
        max_num_batched_tokens: usize,
    },
}
