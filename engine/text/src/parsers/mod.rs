//! Streaming tool-call and reasoning parsers: model text in, OpenAI-shaped pieces out.
//!
//! Owns the per-format grammars (one file per format under `tool/` and `reasoning/`) and the
//! plain data they produce. Does not own wire types, SSE framing or logging: the server turns a
//! [`ParsedDelta`] into a chunk and logs [`tool::ToolParser::failures`].
//!
//! The server runs them per request, in this order: detokenizer -> stop strings ->
//! [`reasoning::ReasoningParser`] -> [`tool::ToolParser`] (on the content part only).
//! Every parser gives the same final result whatever the chunking of its input: decisions depend
//! only on the text seen so far, and text that could still turn into a marker is held back.

pub mod reasoning;
mod scan;
pub mod tool;

pub use reasoning::{reasoning_parser, ReasoningParser};
pub use tool::{parse_complete, tool_parser, ToolParser};

/// A tool call as the server sends it (OpenAI shape).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// `call_` + 24 alphanumeric characters, unique per call.
    pub id: String,
    pub name: String,
    /// A JSON object serialized to a string (never empty: a call without arguments has `{}`).
    pub arguments: String,
}

/// What one streamed delta of model text becomes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedDelta {
    /// Text for `delta.content`; empty when there is none (the server then omits the field).
    pub content: String,
    /// Text for `delta.reasoning_content`; tool parsers leave it empty.
    pub reasoning: String,
    pub tool_calls: Vec<ToolCallDelta>,
}

impl ParsedDelta {
    /// Nothing to send.
    pub fn is_empty(&self) -> bool {
        self.content.is_empty() && self.reasoning.is_empty() && self.tool_calls.is_empty()
    }

    /// Appends `other` after `self` (streams concatenate; tool-call indices are kept).
    pub fn append(&mut self, other: ParsedDelta) {
        self.content.push_str(&other.content);
        self.reasoning.push_str(&other.reasoning);
        self.tool_calls.extend(other.tool_calls);
    }
}

/// One piece of a streamed tool call (OpenAI `delta.tool_calls[]`).
///
/// Hearth's parsers emit each call whole, in one delta, once its end marker has arrived and it
/// parsed: `id` and `name` are set and `arguments` is the complete JSON object. A malformed call
/// therefore never leaks a half call to the client; it comes back as content instead.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallDelta {
    /// Position of the call in this response (0, 1, ...).
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
    /// Text to append to the call's arguments.
    pub arguments: String,
}

/// A parser name from a spec or request that does not exist.
#[derive(Debug, thiserror::Error)]
pub enum ParserError {
    #[error("unknown {kind} parser `{name}` (allowed: {allowed})")]
    Unknown {
        kind: &'static str,
        name: String,
        allowed: String,
    },
}

/// A fresh tool-call id: `call_` + 24 characters from [A-Za-z0-9].
///
/// Ids only need to be unique, not secret: a process-wide counter makes every input distinct and
/// std's randomly keyed SipHash spreads it, so two servers do not hand out the same sequence.
pub(crate) fn new_call_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;

    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static KEYS: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();

    let keys = KEYS.get_or_init(std::collections::hash_map::RandomState::new);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut id = String::with_capacity(29);
    id.push_str("call_");
    for part in 0..4u64 {
        let mut h = keys.build_hasher();
        h.write_u64(n);
        h.write_u64(part);
        let mut x = h.finish();
        for _ in 0..6 {
            id.push(char::from(ALPHABET[(x % 62) as usize]));
            x /= 62;
        }
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_ids_have_openai_shape_and_are_unique() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| new_call_id()).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            assert_eq!(id.len(), 29, "{id}");
            assert!(id.starts_with("call_"));
            assert!(id[5..].bytes().all(|b| b.is_ascii_alphanumeric()), "{id}");
        }
    }

    #[test]
    fn parsers_are_send() {
        fn send<T: Send + ?Sized>() {}
        send::<dyn ReasoningParser>();
        send::<dyn ToolParser>();
    }
}
