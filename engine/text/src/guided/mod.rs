//! Guided (grammar-constrained) decoding: JSON schemas, JSON mode and tool-call formats compiled
//! to a byte-level grammar (`grammar.rs`, `schema.rs`, `tools.rs`), a matcher that runs it
//! (`matcher.rs`), and per-step token masks over the vocabulary (`mask.rs`).
//!
//! The request carries a [`Guide`] (plain data: the compiled grammar and the shared vocabulary
//! trie); the engine keeps one [`GuideState`] per sample, asks it for the allowed tokens before
//! sampling and advances it with the sampled token. Does not own sampling or stop tokens: the
//! engine allows its stop tokens when [`GuideState::is_accepting`] and ends the sample when
//! [`GuideState::is_finished`].

mod grammar;
mod mask;
mod matcher;
mod schema;
#[cfg(test)]
mod tests;
mod tools;

use std::sync::Arc;

pub use grammar::Grammar;
pub use mask::{MaskCache, SharedMaskCache, TokenMask, TokenVocab};
pub use matcher::Matcher;
pub use schema::{
    json_object_grammar, json_schema_grammar, SchemaError, MAX_WS, SUPPORTED_KEYWORDS,
};
pub use tools::{tool_call_grammar, ToolGrammarError, ToolSpec, GUIDED_TOOL_PARSERS};

/// How a reasoning model's output opens before the guided part (reasoning-aware guided
/// decoding, as vLLM does it: the grammar applies after the thinking).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningPrefix {
    /// The model writes `<think>...</think>` itself, or nothing (Qwen3).
    Explicit,
    /// The prompt opened `<think>`: the output may start with reasoning ending in `</think>`
    /// (GLM-4.5+, DeepSeek-R1 with thinking on).
    Implicit,
}

/// Markers that end reasoning (the reasoning parsers switch to content at them), so free
/// reasoning text may not contain them.
const REASONING_ENDS: &[&str] = &[
    "</think>",
    "<tool_call>",
    "<\u{ff5c}tool\u{2581}calls\u{2581}begin\u{ff5c}>",
];

/// `g`, optionally preceded by a reasoning section and up to a few newlines.
pub fn after_reasoning(g: Grammar, prefix: ReasoningPrefix) -> Grammar {
    let mut b = grammar::Builder::from_grammar(&g);
    let text = b.text(REASONING_ENDS, grammar::UNBOUNDED);
    let close = b.lit("</think>");
    let section = match prefix {
        ReasoningPrefix::Explicit => {
            let open = b.lit("<think>");
            b.seq(&[open, text, close])
        }
        ReasoningPrefix::Implicit => b.seq(&[text, close]),
    };
    let ws = b.ws(4);
    let with = b.seq(&[section, ws]);
    let none = b.seq(&[]);
    let opt = b.alt(&[with, none]);
    let root = b.seq(&[opt, g.root]);
    b.finish(root)
}

/// What a guided request carries to the engine: the grammar its output must match and the
/// vocabulary to mask with.
#[derive(Debug, Clone)]
pub struct Guide {
    pub grammar: Arc<Grammar>,
    pub vocab: Arc<TokenVocab>,
}

impl PartialEq for Guide {
    fn eq(&self, other: &Self) -> bool {
        self.grammar == other.grammar && Arc::ptr_eq(&self.vocab, &other.vocab)
    }
}

/// One sample's progress through its guide.
#[derive(Debug)]
pub struct GuideState {
    matcher: Matcher,
    vocab: Arc<TokenVocab>,
    cache: SharedMaskCache,
}

impl GuideState {
    /// `cache` may be shared by the samples of one request (same grammar).
    pub fn new(guide: &Guide, cache: SharedMaskCache) -> Self {
        GuideState {
            matcher: Matcher::new(guide.grammar.clone()),
            vocab: guide.vocab.clone(),
            cache,
        }
    }

    /// The tokens the grammar allows next (stop tokens are the caller's business).
    pub fn mask(&mut self) -> Arc<TokenMask> {
        let mut cache = match self.cache.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        cache.get(&self.vocab, self.matcher.grammar(), self.matcher.state())
    }

    /// Advances over a sampled token; false (and no change) when the grammar refuses it.
    pub fn advance(&mut self, token: u32) -> bool {
        self.vocab.is_guidable(token) && self.matcher.accept_bytes(self.vocab.token_bytes(token))
    }

    /// The text so far is complete: the sample may stop here.
    pub fn is_accepting(&self) -> bool {
        self.matcher.is_accepting()
    }

    /// Complete and nothing may follow: the sample must stop.
    pub fn is_finished(&self) -> bool {
        self.matcher.is_finished()
    }
}
