//! What every route shares: the engine handle, the text side (tokenizer, chat template, parser
//! names), the served model's identity, the API key and the metrics.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use hearth_runtime::EngineHandle;
use hearth_text::guided::TokenVocab;
use hearth_text::{ChatTemplate, Tokenizer};

use crate::metrics::Metrics;

#[derive(Clone)]
pub struct AppState {
    pub engine: EngineHandle,
    pub tokenizer: Arc<Tokenizer>,
    /// The tokenizer's vocabulary as a byte trie, for guided decoding's token masks.
    pub guided_vocab: Arc<TokenVocab>,
    pub template: Option<Arc<ChatTemplate>>,
    pub model_name: Arc<str>,
    pub max_model_len: usize,
    pub api_key: Option<Arc<str>>,
    pub tool_parser: Option<String>,
    pub reasoning_parser: Option<String>,
    /// The spec's enable_thinking (requests may override through chat_template_kwargs).
    pub enable_thinking: bool,
    pub default_template_kwargs: Arc<serde_json::Map<String, serde_json::Value>>,
    pub metrics: Arc<Metrics>,
    pub started: Instant,
    pub ready: Arc<AtomicBool>,
    /// Normalize Claude Code's prompt-cache busters on /v1/messages (spec server section).
    pub claude_code_normalization: bool,
    /// Also drop "Today's date is ..." system lines.
    pub strip_date_line: bool,
    /// /health fails when the engine has work but has not stepped for this long.
    pub hang_after_secs: f64,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("model_name", &self.model_name)
            .finish_non_exhaustive()
    }
}
